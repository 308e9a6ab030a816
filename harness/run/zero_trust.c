#include "harness/run/zero_trust.h"

#include <math.h>
#include <stdio.h>

#include "core/dtype.h"

/* Two values in a dtype that a correct kernel may legitimately confuse: equal, both NaN, or
 * both below the smallest normal (a flushed subnormal is not a wrong answer). */
static int same_value(double a, double b, double tiny)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return a == b || (fabs(a) < tiny && fabs(b) < tiny);
}

/* Exactly the same value (NaN matches NaN; +0 matches -0). */
static int identical(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

/* The reference's own float64 error at element i: c_op * 2^-53 * m_i. Within it, two values
 * are the same answer (a gradient that is zero in exact arithmetic comes out as +-1e-17). */
static double ref_tol(const double *mag, double c_op, int64_t i)
{
    return mag && c_op > 0 && isfinite(mag[i]) ? c_op * 0x1p-53 * fabs(mag[i]) : 0.0;
}

cc_zt_verdict cc_zero_trust(const char *what, const double *expected, const double *mag,
                            double c_op, const cc_view *got, const cc_zt_source *sources,
                            int n_sources, char *msg, size_t len)
{
    int64_t n = 1;
    for (int i = 0; i < got->rank; i++)
        n *= got->shape[i];
    if (n < 2 || !expected || !got->data)
        return CC_ZT_OK;
    cc_dtype t = got->dtype;
    double tiny = cc_smallest_normal(t);
    double g0 = cc_load(t, got->data, 0), e0 = expected[0], r0 = cc_round_to(t, e0);
    double tol0 = ref_tol(mag, c_op, 0);
    int got_zero = 1, got_const = 1;
    int64_t ref_nonzero = -1, ref_varies = -1;
    for (int64_t i = 0; i < n; i++) {
        double g = cc_load(t, got->data, i), e = expected[i], r = cc_round_to(t, e);
        double tol = ref_tol(mag, c_op, i);
        got_zero &= g == 0.0;
        got_const &= identical(g, g0);
        if (ref_nonzero < 0 && !(fabs(r) < tiny) && !(fabs(e) <= tol))
            ref_nonzero = i; /* NaN counts as nonzero */
        /* values one rounding apart in the dtype may legitimately come out equal */
        double adjacent = 2.0 * cc_unit_roundoff(t) * fmax(fabs(e), fabs(e0));
        if (ref_varies < 0 && !same_value(r, r0, tiny) && !(fabs(e - e0) <= tol + tol0 + adjacent))
            ref_varies = i;
    }
    if (got_zero && ref_nonzero >= 0) {
        snprintf(msg, len,
                 "zero-trust: %s is all zeros (%lld elements) but the reference is not "
                 "(flat element %lld: expected %.9g)",
                 what, (long long)n, (long long)ref_nonzero, expected[ref_nonzero]);
        return CC_ZT_ALL_ZERO;
    }
    /* a constant NaN or Inf is no plausible-looking stand-in: the comparison judges it (a finite
     * expected value fails it; under edge=nan/inf a non-finite one may legitimately match) */
    if (got_const && ref_varies >= 0 && isfinite(g0)) {
        snprintf(msg, len,
                 "zero-trust: %s is the constant %.9g in all %lld elements but the reference "
                 "is not constant (flat elements 0 and %lld: expected %.9g and %.9g)",
                 what, g0, (long long)n, (long long)ref_varies, expected[0],
                 expected[ref_varies]);
        return CC_ZT_ALL_EQUAL;
    }
    for (int s = 0; s < n_sources; s++) {
        const cc_zt_source *src = &sources[s];
        if (!src->v || src->n != n)
            continue;
        int copy = 1;
        int64_t differs = -1;
        for (int64_t i = 0; i < n && (copy || differs < 0); i++) {
            if (copy && !identical(cc_load(t, got->data, i), src->v[i]))
                copy = 0;
            double e = expected[i];
            if (differs < 0 && !same_value(cc_round_to(t, e), src->v[i], tiny) &&
                !(fabs(e - src->v[i]) <= ref_tol(mag, c_op, i)))
                differs = i;
        }
        if (copy && differs >= 0) {
            snprintf(msg, len,
                     "zero-trust: %s is an exact copy of %s (%lld elements) but the reference "
                     "differs from %s (flat element %lld: expected %.9g, %s has %.9g)",
                     what, src->name ? src->name : "an input", (long long)n,
                     src->name ? src->name : "it", (long long)differs, expected[differs],
                     src->name ? src->name : "it", src->v[differs]);
            return CC_ZT_COPY;
        }
    }
    return CC_ZT_OK;
}
