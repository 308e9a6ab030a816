#include "harness/run/power.h"

#include <math.h>
#include <stdlib.h>

#include "core/dtype.h"

/* The ladders: k = 2^(i/2) for i < 61, and j = 2^i ulps for i < 31 (both 1 .. 2^30). */
#define K_STEPS 61
#define ULP_STEPS 31

static double ladder(int i, int ulps)
{
    return ulps ? ldexp(1.0, i) : ldexp(i % 2 ? 1.4142135623730951 : 1.0, i / 2);
}

typedef struct {
    const double *expected;
    const ref_mag *mag;
    const cc_view *got;
    const cc_bound_model *m;
    int64_t n;
    const int64_t *at; /* element i is got's at[i] (a sampled check); NULL: got's i */
    int ulps;    /* perturb by k ulps, else scale the error by k */
    int suspect; /* judge against min(bound, suspect bound) */
    double own_max; /* the output's own magnitude (cc_output_own_max: the expected values') */
} perturbation;

/* Does the perturbation k of every finite element (its error scaled by k, or k more ulps away
 * from the expected value) make the output fail? k = 0: the output as the provider gave it. */
static int rejected(const perturbation *pt, double k)
{
    cc_dtype t = pt->got->dtype;
    for (int64_t i = 0; i < pt->n; i++) {
        double g = cc_load(t, pt->got->data, pt->at ? pt->at[i] : i), e = pt->expected[i];
        if (k > 0 && isfinite(g) && isfinite(e)) {
            double step = k * cc_ulp(t, g);
            g = cc_round_to(t, pt->ulps ? g + (g < e ? -step : step) : e + k * (g - e));
        }
        cc_element_mag em = cc_element_mag_at(pt->mag, i);
        double b = cc_element_judging_bound(pt->m, em, e, pt->own_max, t, NULL);
        if (pt->suspect)
            b = fmin(b, cc_element_suspect_bound(pt->m, em));
        if (cc_element_ratio_of(e, g, b, t, pt->m) > 1.0)
            return 1;
    }
    return 0;
}

/* The smallest ladder value that is rejected (a binary search: rejection grows with the
 * perturbation); 0 when the unperturbed output already is, +Inf when the top of the ladder is
 * not. */
static double smallest_rejected(const perturbation *pt)
{
    if (rejected(pt, 0.0))
        return 0.0;
    int lo = -1, hi = (pt->ulps ? ULP_STEPS : K_STEPS) - 1; /* not rejected at lo (-1: none) */
    if (!rejected(pt, ladder(hi, pt->ulps)))
        return INFINITY;
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (rejected(pt, ladder(mid, pt->ulps)))
            hi = mid;
        else
            lo = mid;
    }
    return ladder(hi, pt->ulps);
}

void cc_power_init(cc_power *pw)
{
    pw->k_fail = pw->k_suspect = NAN;
    pw->ulp_fail = pw->ulp_suspect = INFINITY;
    pw->trunc_bound = pw->trunc = NAN;
}

void cc_power_keep_larger(double *slot, double v)
{
    if (!isnan(v) && (isnan(*slot) || v > *slot))
        *slot = v;
}

/* A kernel that rounds the exact result toward zero (truncates it) in place of the provider:
 * rejected by the bound alone, and with the rounding-bias test (power.h). Nothing is measured
 * where the test reaches no value, or there is no room for the perturbed copy. */
static void truncation_rejected(const double *expected, const ref_mag *mag, int64_t n,
                                const cc_view *got, const int64_t *at, const cc_bound_model *m,
                                cc_power *pw)
{
    cc_dtype t = got->dtype;
    size_t size = cc_dtype_size(t);
    void *buf = m->bias_test ? malloc(size * (size_t)(n + 1)) : NULL;
    if (!buf)
        return;
    for (int64_t i = 0; i < n; i++) {
        double g = cc_load(t, got->data, at ? at[i] : i), e = expected[i];
        if (isfinite(e) && isfinite(g)) {
            double r = cc_round_to(t, e);
            g = fabs(r) > fabs(e) ? r - copysign(cc_ulp(t, e), e) : r;
        }
        cc_store(t, buf, i, g);
    }
    cc_view v = {t, 1, {n}, {1}, buf};
    cc_comparison c;
    cc_compare_at(expected, mag, NULL, 0, &v, m, &c);
    if (c.bias.n > 0) {
        cc_power_keep_larger(&pw->trunc_bound, c.worst_ratio > 1.0 ? 1.0 : 0.0);
        cc_power_keep_larger(&pw->trunc, c.worst_ratio > 1.0 || c.bias.biased ? 1.0 : 0.0);
    }
    free(buf);
}

void cc_power_keep_smaller(double *slot, double v)
{
    if (!isnan(v) && (isnan(*slot) || v < *slot))
        *slot = v;
}

void cc_power_of_check(const double *expected, const ref_mag *mag, const cc_view *got,
                       const cc_bound_model *m, cc_power *pw)
{
    cc_power_of_check_at(expected, mag, NULL, 0, got, m, pw);
}

void cc_power_of_check_at(const double *expected, const ref_mag *mag, const int64_t *at,
                          int64_t count, const cc_view *got, const cc_bound_model *m,
                          cc_power *pw)
{
    int64_t n = 1;
    for (int i = 0; i < got->rank; i++)
        n *= got->shape[i];
    if (at)
        n = count;
    if (n <= 0)
        return;
    int erred = 0;
    for (int64_t i = 0; i < n && !erred; i++) {
        double g = cc_load(got->dtype, got->data, at ? at[i] : i);
        erred = isfinite(g) && isfinite(expected[i]) && g != expected[i];
    }
    truncation_rejected(expected, mag, n, got, at, m, pw);
    perturbation pt = {expected, mag, got, m, n, at, 1, 0,
                       cc_output_own_max(expected, mag->worst, n, m)};
    for (pt.suspect = 0; pt.suspect <= 1; pt.suspect++)
        cc_power_keep_smaller(pt.suspect ? &pw->ulp_suspect : &pw->ulp_fail, smallest_rejected(&pt));
    if (!erred)
        return; /* exact: k times no error is no error */
    pt.ulps = 0;
    for (pt.suspect = 0; pt.suspect <= 1; pt.suspect++)
        cc_power_keep_smaller(pt.suspect ? &pw->k_suspect : &pw->k_fail, smallest_rejected(&pt));
}
