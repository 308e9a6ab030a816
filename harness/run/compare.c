#include "harness/run/compare.h"

#include <math.h>

#include "core/dtype.h"

/* u is the provider's roundoff plus the oracle's own: the float64 reference performs the same
 * kind of rounded steps, so for an f64 case its error is as large as the provider's and both
 * must fit (for f32 and narrower the 2^-53 term is negligible). */
cc_bound_model cc_bound_for(cc_dtype t, double c_op)
{
    return cc_bound_for_compute(t, 0.0, c_op);
}

/* A declared compute roundoff replaces u(dtype) only when it is coarser: the output is rounded
 * to the dtype whatever the arithmetic was. The floor stays the dtype's (TF32 has f32's
 * exponent range). */
cc_bound_model cc_bound_for_compute(cc_dtype t, double compute_u, double c_op)
{
    double u = cc_unit_roundoff(t);
    if (compute_u > u)
        u = compute_u;
    cc_bound_model m = {c_op, u + cc_unit_roundoff(CC_F64), cc_smallest_normal(t), 0};
    return m;
}

int cc_compute_roundoff_valid(double compute_u)
{
    return compute_u >= 0.0 && compute_u <= CC_MAX_COMPUTE_ROUNDOFF;
}

double cc_element_ratio(double expected, double got, double mag, cc_dtype t,
                        const cc_bound_model *m, double *bound_out)
{
    double bound = m->c_op * m->u * mag + m->floor;
    if (isnan(bound)) /* a magnitude that is not a number: hold the element to the floor */
        bound = m->floor;
    if (bound_out)
        *bound_out = bound;
    if (m->nonfinite_alike && !isfinite(expected))
        return isfinite(got) ? INFINITY : 0.0;
    if (isnan(expected) || isnan(got))
        return (isnan(expected) && isnan(got)) ? 0.0 : INFINITY;
    if (isinf(expected) || isinf(got)) {
        if (expected == got)
            return 0.0;
        /* a finite expected value may legitimately overflow the dtype: accept the Inf of its
         * sign when the exact value rounds to it (and the bound admits the overflow) */
        if (isinf(got) && !isinf(expected) && signbit(got) == signbit(expected) &&
            isinf(cc_round_to(t, expected + copysign(bound, expected))))
            return 0.0;
        return INFINITY;
    }
    return fabs(got - expected) / bound;
}

void cc_compare(const double *expected, const double *mag, const cc_view *got,
                const cc_bound_model *m, cc_comparison *out)
{
    int64_t n = 1;
    for (int i = 0; i < got->rank; i++)
        n *= got->shape[i];
    out->n = n;
    out->n_over = out->n_nan_mismatch = 0;
    out->worst_ratio = 0.0;
    out->worst_index = n > 0 ? 0 : -1;
    out->expected = out->got = out->bound = out->magnitude = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double g = cc_load(got->dtype, got->data, i), bound;
        double r = cc_element_ratio(expected[i], g, mag[i], got->dtype, m, &bound);
        if (r > 1.0)
            out->n_over++;
        if (isnan(expected[i]) != isnan(g))
            out->n_nan_mismatch++;
        if (r > out->worst_ratio || i == 0) {
            out->worst_ratio = r;
            out->worst_index = i;
            out->expected = expected[i];
            out->got = g;
            out->bound = bound;
            out->magnitude = mag[i];
        }
    }
}
