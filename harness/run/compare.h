/* Compare a provider's output with the reference under the op's error model:
 *   element i passes when |got_i - expected_i| <= c_op * u * m_i + floor,
 * NaN positions must match, and +-Inf must match in sign (or be the dtype's overflow of a
 * finite expected value beyond the largest finite number). The figure kept is the worst bound
 * ratio |got - expected| / bound (<= 1 passes), with the element that produced it. */
#ifndef CAPCHECK_COMPARE_H
#define CAPCHECK_COMPARE_H

#include <stdint.h>

#include "providers/provider.h"

typedef struct {
    double c_op, u, floor;
    /* Cases with NaN or Inf inputs (edge=nan, edge=inf): an expected NaN or +-Inf is matched by
     * any non-finite value. Algebraically equal evaluations of one formula differ there (Inf - Inf
     * is NaN in one order, Inf in another), so only finiteness is the contract's; a finite
     * expected value still needs a finite value within its bound. */
    int nonfinite_alike;
} cc_bound_model;

typedef struct {
    int64_t n, n_over;     /* elements compared, elements over their bound */
    int64_t n_nan_mismatch;
    double worst_ratio;    /* 0 for an empty or exact output */
    int64_t worst_index;   /* -1 when n == 0 */
    double expected, got, bound, magnitude;
} cc_comparison;

/* Bound model of a case: u = the roundoff of the dtype the provider computes in plus the
 * float64 oracle's 2^-53, floor = the dtype's smallest normal (covers flushed subnormals). */
cc_bound_model cc_bound_for(cc_dtype t, double c_op);
/* The same for a provider that declares its compute roundoff (provider.h, compute_roundoff):
 * u = max(compute_u, u(dtype)) + 2^-53; compute_u = 0 is cc_bound_for. TF32 (f32 matmul or conv
 * on tensor cores) is compute_u = 2^-11. */
cc_bound_model cc_bound_for_compute(cc_dtype t, double compute_u, double c_op);
/* The coarsest compute roundoff a provider may declare: bf16's 2^-8. */
#define CC_MAX_COMPUTE_ROUNDOFF 0x1p-8
/* 1 when a declared compute roundoff is usable: 0 (none) up to CC_MAX_COMPUTE_ROUNDOFF; NaN,
 * negative and coarser values are not (the runner makes such a case an error). */
int cc_compute_roundoff_valid(double compute_u);
/* Ratio of one element; +Inf for a NaN/Inf mismatch. A finite expected value whose magnitude is
 * NaN is held to the floor alone (it must come back nearly exact rather than pass whatever it
 * is); one whose magnitude overflowed to +Inf accepts any finite value, which is what the error
 * model says of it (only edge=huge and edge=inf cases reach this). */
double cc_element_ratio(double expected, double got, double mag, cc_dtype t,
                        const cc_bound_model *m, double *bound_out);
void cc_compare(const double *expected, const double *mag, const cc_view *got,
                const cc_bound_model *m, cc_comparison *out);
/* The same on some elements of a dense `got` (a sampled check, harness/run/sample.h): expected[e]
 * and mag[e] are those of flat element at[e] (ascending); out->n is count and worst_index a
 * flat index into got. at == NULL compares every element (count is then ignored). */
void cc_compare_at(const double *expected, const double *mag, const int64_t *at, int64_t count,
                   const cc_view *got, const cc_bound_model *m, cc_comparison *out);

#endif
