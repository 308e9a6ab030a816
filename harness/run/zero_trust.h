/* Zero-trust checks: outputs that a bound can let through but that no correct kernel writes.
 *
 * The bound c_op * u * m_i + floor is generous where values are tiny next to their magnitude
 * (long bf16/f16 reductions, subnormal-sized results, near-identity ops): an all-zeros output,
 * a constant fill, or an untouched copy of an input can land inside it. Each of these fails
 * with its own message whatever the bound ratio says:
 *
 *   all zeros   every element is +-0, but the reference (rounded to the dtype, subnormals
 *               counted as zero: flushing them is legitimate) has a nonzero element;
 *   all equal   every element is the same value, but the rounded reference is not constant;
 *   copy        the output equals one of the sources (an input of the same element count, or
 *               the output cotangent g for a gradient) element for element, NaN for NaN, but
 *               the rounded reference differs from that source somewhere.
 *
 * No false alarms on correct providers: an output with fewer than 2 elements is never judged,
 * and each check is skipped when the reference itself has that property (all zero, constant,
 * equal to the source). The provider's values are compared exactly; the reference's are
 * compared after rounding to the output dtype, and two reference values within the
 * reference's own float64 error (c_op * 2^-53 * m_i) are the same answer: a gradient that is
 * zero in exact arithmetic and comes out of the float64 reference as 3e-17 is zero. */
#ifndef CAPCHECK_ZERO_TRUST_H
#define CAPCHECK_ZERO_TRUST_H

#include <stddef.h>
#include <stdint.h>

#include "abi/capcheck_provider.h"

typedef enum {
    CC_ZT_OK = 0,
    CC_ZT_ALL_ZERO,
    CC_ZT_ALL_EQUAL,
    CC_ZT_COPY
} cc_zt_verdict;

/* A tensor the output must not merely copy: dense float64 values, as the provider saw them. */
typedef struct {
    const char *name; /* "x", "g", ... */
    const double *v;
    int64_t n;
} cc_zt_source;

/* Judge the provider output `got` (dense, got->dtype) against the dense float64 reference
 * `expected` of the same element count, with its error-model magnitudes `mag` (may be NULL:
 * then the reference is taken as exact) and the op's constant c_op. `what` names the output
 * in the message ("y", "grad:x"). Returns CC_ZT_OK, or the verdict with a one-sentence
 * message in msg. */
cc_zt_verdict cc_zero_trust(const char *what, const double *expected, const double *mag,
                            double c_op, const cc_view *got, const cc_zt_source *sources,
                            int n_sources, char *msg, size_t len);
/* The same with the reference known on some elements only (a sampled check, sample.h):
 * expected[e] and mag[e] belong to flat element at[e] (ascending, count of them); the provider's
 * whole output and the sources are still read, the reference's side of each check is taken over
 * the known elements. at == NULL is cc_zero_trust. */
cc_zt_verdict cc_zero_trust_at(const char *what, const double *expected, const double *mag,
                               const int64_t *at, int64_t count, double c_op, const cc_view *got,
                               const cc_zt_source *sources, int n_sources, char *msg,
                               size_t len);

#endif
