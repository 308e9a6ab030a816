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
/* Ratio of one element; +Inf for a NaN/Inf mismatch. */
double cc_element_ratio(double expected, double got, double mag, cc_dtype t,
                        const cc_bound_model *m, double *bound_out);
void cc_compare(const double *expected, const double *mag, const cc_view *got,
                const cc_bound_model *m, cc_comparison *out);

#endif
