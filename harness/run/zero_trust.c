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

/* The provider's output is read a chunk at a time, the first one short: most outputs show at
 * their first elements that they are not all zero, not constant, not a copy. The length of the
 * chunk at i0 of n. */
enum { CHUNK = 1024, FIRST_CHUNK = 8 };

static int64_t chunk_at(int64_t i0, int64_t n)
{
    int64_t len = i0 ? CHUNK : FIRST_CHUNK;
    return n - i0 < len ? n - i0 : len;
}

cc_zt_verdict cc_zero_trust(const char *what, const double *expected, const double *mag,
                            double c_op, const cc_view *got, const cc_zt_source *sources,
                            int n_sources, char *msg, size_t len)
{
    return cc_zero_trust_at(what, expected, mag, NULL, 0, c_op, got, sources, n_sources, msg, len);
}

cc_zt_verdict cc_zero_trust_at(const char *what, const double *expected, const double *mag,
                               const int64_t *at, int64_t count, double c_op, const cc_view *got,
                               const cc_zt_source *sources, int n_sources, char *msg, size_t len)
{
    int64_t n = 1;
    for (int i = 0; i < got->rank; i++)
        n *= got->shape[i];
    int64_t known = at ? count : n; /* reference values: expected[e] is element at[e] (or e) */
    if (n < 2 || known < 1 || !expected || !got->data)
        return CC_ZT_OK;
    double g[CHUNK];
    cc_dtype t = got->dtype;
    double tiny = cc_smallest_normal(t);
    int64_t first = at ? at[0] : 0;
    double g0 = cc_load(t, got->data, 0), e0 = expected[0], r0 = cc_round_to(t, e0);
    double tol0 = ref_tol(mag, c_op, 0);
    int got_zero = 1, got_const = 1;
    for (int64_t i0 = 0, len; i0 < n && (got_zero || got_const); i0 += len) {
        len = chunk_at(i0, n);
        cc_load_array(t, got->data, i0, 1, g, len);
        for (int64_t k = 0; k < len; k++) {
            got_zero &= g[k] == 0.0;
            got_const &= identical(g[k], g0);
        }
    }
    int64_t ref_nonzero = -1, ref_varies = -1; /* positions e in expected[] */
    for (int64_t e = 0; e < known && (ref_nonzero < 0 || ref_varies < 0); e++) {
        double x = expected[e], r = cc_round_to(t, x), tol = ref_tol(mag, c_op, e);
        if (ref_nonzero < 0 && !(fabs(r) < tiny) && !(fabs(x) <= tol))
            ref_nonzero = e; /* NaN counts as nonzero */
        /* values one rounding apart in the dtype may legitimately come out equal */
        double adjacent = 2.0 * cc_unit_roundoff(t) * fmax(fabs(x), fabs(e0));
        if (ref_varies < 0 && !same_value(r, r0, tiny) && !(fabs(x - e0) <= tol + tol0 + adjacent))
            ref_varies = e;
    }
    cc_zt_verdict v = CC_ZT_OK;
    if (got_zero && ref_nonzero >= 0) {
        snprintf(msg, len,
                 "zero-trust: %s is all zeros (%lld elements) but the reference is not "
                 "(flat element %lld: expected %.9g)",
                 what, (long long)n, (long long)(at ? at[ref_nonzero] : ref_nonzero),
                 expected[ref_nonzero]);
        v = CC_ZT_ALL_ZERO;
    } else if (got_const && ref_varies >= 0 && isfinite(g0)) {
        /* a constant NaN or Inf is no plausible-looking stand-in: the comparison judges it (a
         * finite expected value fails it; under edge=nan/inf a non-finite one may match) */
        snprintf(msg, len,
                 "zero-trust: %s is the constant %.9g in all %lld elements but the reference "
                 "is not constant (flat elements %lld and %lld: expected %.9g and %.9g)",
                 what, g0, (long long)n, (long long)first,
                 (long long)(at ? at[ref_varies] : ref_varies), e0, expected[ref_varies]);
        v = CC_ZT_ALL_EQUAL;
    }
    for (int s = 0; s < n_sources && v == CC_ZT_OK; s++) {
        const cc_zt_source *src = &sources[s];
        if (!src->v || src->n != n)
            continue;
        int copy = 1;
        for (int64_t i0 = 0, len; i0 < n && copy; i0 += len) {
            len = chunk_at(i0, n);
            cc_load_array(t, got->data, i0, 1, g, len);
            for (int64_t k = 0; k < len && copy; k++)
                copy = identical(g[k], src->v[i0 + k]);
        }
        int64_t differs = -1;
        for (int64_t e = 0; copy && e < known && differs < 0; e++) {
            int64_t i = at ? at[e] : e;
            double x = expected[e];
            if (!same_value(cc_round_to(t, x), src->v[i], tiny) &&
                !(fabs(x - src->v[i]) <= ref_tol(mag, c_op, e)))
                differs = e;
        }
        if (copy && differs >= 0) {
            int64_t i = at ? at[differs] : differs;
            snprintf(msg, len,
                     "zero-trust: %s is an exact copy of %s (%lld elements) but the reference "
                     "differs from %s (flat element %lld: expected %.9g, %s has %.9g)",
                     what, src->name ? src->name : "an input", (long long)n,
                     src->name ? src->name : "it", (long long)i, expected[differs],
                     src->name ? src->name : "it", src->v[i]);
            v = CC_ZT_COPY;
        }
    }
    return v;
}
