/* Random sources (ops.md A): randUniform, bernoulliMask. requiresVJP = false for both (capsule
 * vjpMode none, `vjpUnavailable`), so there is no VJP.
 *
 * Both take no tensor input; the output shape is params->target and the stream key is
 * params->rng_seed. The key is used as given: TorchLean's IR derives key = splitmix64(seed +
 * nodeIndex) and eager sessions thread their own counter, so a case names the *derived* key
 * and any TorchLean stream can be reproduced by passing its key.
 *
 * Stream: element at row-major linear index j has u_j = splitmix64(key + j) mod 2^32 (UInt64
 * wrap-around in key + j), and randUniform's value is u_j / 2^32 — exact in float64, so the
 * reference output is TorchLean's stream bit for bit. A float32 provider rounds it once
 * (LibTorch computes u/4294967296 in float64 and casts): error <= u|y|, so m = |y| and c = 1;
 * the top draws may round to exactly 1.0 in float32, which is allowed.
 *
 * A provider with a different generator is judged statistically (ref_random.h). */
#include "ref_random.h"

#include "ref_families.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TWO_POW_32 4294967296.0

/* u_j / 2^32 of the stream `key`. */
static double stream_at(uint64_t key, int64_t j)
{
    uint64_t u = ref_splitmix64(key + (uint64_t)j) & 0xffffffffULL;
    return (double)u / TWO_POW_32;
}

/* ---- shape and sampling ------------------------------------------------------------------ */

static ref_status random_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                               ref_err *e)
{
    (void)in;
    if (n != 0)
        return ref_err_set(e, "random sources take no tensor inputs but got %d", n);
    const ref_shape *t = &p->target;
    if (t->rank < 0 || t->rank > REF_MAX_RANK)
        return ref_err_set(e, "the output shape (to=) has rank %d (must be 0..%d)", t->rank,
                           REF_MAX_RANK);
    int64_t total = 1;
    for (int d = 0; d < t->rank; d++) {
        if (t->dim[d] < 0)
            return ref_err_set(e, "the output shape (to=) has negative size %lld on axis %d",
                               (long long)t->dim[d], d);
        if (t->dim[d] > 0 && total > INT64_MAX / t->dim[d])
            return ref_err_set(e, "the output shape (to=) has more than 2^63 elements");
        total *= t->dim[d];
    }
    *out = *t;
    return REF_OK;
}

static ref_status sample_random(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                int with_keep)
{
    int rank = req->rank >= 0 ? req->rank : (int)ref_rng_range(r, 1, 3);
    if (rank > REF_MAX_RANK)
        return REF_ENOTAPPLICABLE;
    ref_sample_shape(r, rank, req->max_elems, req->zero_dim, &p->target);
    p->rng_seed = ref_rng_next(r);
    if (with_keep) {
        /* mostly an interior probability (sixteenths, exact in float32); sometimes an endpoint */
        int64_t k = ref_rng_range(r, -1, 17);
        p->keep_prob = k < 0 ? 0.0 : (k > 16 ? 1.0 : (double)k / 16.0);
    }
    *n = 0;
    return REF_OK;
}

static ref_status sample_uniform(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                 ref_shape *in)
{
    (void)in;
    return sample_random(r, req, p, n, 0);
}

static ref_status sample_mask(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                              ref_shape *in)
{
    (void)in;
    return sample_random(r, req, p, n, 1);
}

static void mask_defaults(ref_params *p)
{
    p->keep_prob = 0.5;
}

/* ---- randUniform: y_j = (splitmix64(key + j) mod 2^32) / 2^32, in [0, 1) exactly ------------ */
static ref_status rand_uniform_fwd(const ref_params *p, int n, const ref_tensor *in,
                                   ref_tensor *out, const ref_mag *mags)
{
    double *mag = ref_mag_worst(mags);
    (void)n;
    (void)in;
    int64_t N = ref_numel(&out->shape);
    for (int64_t j = 0; j < N; j++) {
        out->v[j] = stream_at(p->rng_seed, j);
        if (mag)
            mag[j] = out->v[j]; /* rounding to the dtype: <= u|y| */
    }
    return REF_OK;
}

/* ---- bernoulliMask: y_j in {0, 1} ----------------------------------------------------------- *
 *   !(keepProb > 0)            -> 0 (so NaN keepProb gives all zeros)
 *   keepProb > 0, !(1 > keepProb) -> 1 (everything kept when p >= 1)
 *   otherwise                  -> 1 if keepProb > u_j / 2^32 else 0.
 * The endpoints are decided before the draw is converted. keepProb is TorchLean's scalar parent
 * (a parameter here). LibTorch rounds p to float32 and compares with the float32-rounded draw,
 * so a float32 provider reproducing the stream can differ from this float64 stream where a
 * draw lies within float32 rounding of p (probability ~2^-24 per element); such a mismatch is
 * a precision effect, not a bug. Exact values: m = |y|, c = 1. */
static double mask_at(double keep, uint64_t key, int64_t j)
{
    if (!(keep > 0))
        return 0.0;
    if (!(1 > keep))
        return 1.0;
    return keep > stream_at(key, j) ? 1.0 : 0.0;
}

static ref_status bernoulli_mask_fwd(const ref_params *p, int n, const ref_tensor *in,
                                     ref_tensor *out, const ref_mag *mags)
{
    double *mag = ref_mag_worst(mags);
    (void)n;
    (void)in;
    int64_t N = ref_numel(&out->shape);
    for (int64_t j = 0; j < N; j++) {
        out->v[j] = mask_at(p->keep_prob, p->rng_seed, j);
        if (mag)
            mag[j] = out->v[j];
    }
    return REF_OK;
}

/* ---- statistical checks ----------------------------------------------------------------------- */

static int verdict(int pass, char *why, size_t len, const char *fmt, ...)
{
    if (why && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
    }
    return pass;
}

/* Two-sided normal tail: P(|Z| >= |z|). */
static double normal_two_sided_p(double z)
{
    return erfc(fabs(z) / sqrt(2.0));
}

/* Kolmogorov's limiting distribution: Q(lambda) = P(sqrt(n) D_n > lambda) as n -> inf,
 *   Q = 2 sum_{k>=1} (-1)^(k-1) exp(-2 k^2 lambda^2)                    (lambda >= 1.18)
 *   Q = 1 - sqrt(2 pi)/lambda sum_{k>=1} exp(-(2k-1)^2 pi^2 / (8 lambda^2))  (lambda < 1.18)
 * (both series converge fast in their ranges; terms beyond 100 are far below 1e-300). */
static double kolmogorov_q(double lambda)
{
    if (lambda <= 0)
        return 1.0;
    double s = 0.0;
    if (lambda < 1.18) {
        const double pi = 3.141592653589793;
        for (int k = 1; k <= 100; k++) {
            double j = 2.0 * k - 1.0;
            s += exp(-j * j * pi * pi / (8.0 * lambda * lambda));
        }
        double q = 1.0 - sqrt(2.0 * pi) / lambda * s;
        return q < 0 ? 0.0 : q;
    }
    for (int k = 1; k <= 100; k++)
        s += (k % 2 ? 2.0 : -2.0) * exp(-2.0 * k * k * lambda * lambda);
    return s < 0 ? 0.0 : (s > 1 ? 1.0 : s);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Uniform sample test. Level: alpha is split evenly (Bonferroni) over the three tests, so a
 * correct generator fails with probability <= alpha.
 *   mean:     z = (mean - 1/2) / sqrt(1 / (12 n)),   p = P(|Z| >= |z|)          (n >= 20)
 *   variance: s^2 = sum (x - mean)^2 / (n - 1); Var(s^2) = (mu4 - sigma^4 (n-3)/(n-1)) / n with
 *             mu4 = 1/80, sigma^4 = 1/144 for U[0,1]; z = (s^2 - 1/12) / sqrt(Var(s^2))  (n >= 20)
 *   KS:       D = sup |F_n(x) - x| over the sorted sample (D+ and D-); p = Q((sqrt n + 0.12 +
 *             0.11/sqrt n) D) with Stephens' small-sample correction of Kolmogorov's Q.
 * Each passes when p >= alpha/3. Critical values (per-test level alpha/3):
 *   alpha = 1e-2: |z| <= 2.935, lambda <= 1.788;  alpha = 1e-3: |z| <= 3.588, lambda <= 2.086;
 *   alpha = 1e-4: |z| <= 4.149, lambda <= 2.345   (lambda = (sqrt n + 0.12 + 0.11/sqrt n) D).
 * The mean and variance tests use the normal approximation, hence n >= 20; below that only the
 * range and KS are applied. Teeth: a generator on [0, 1/2), a sum of two draws, values
 * repeated, or a missing low bit pattern shift D or the moments far beyond these values. */
int ref_check_uniform_sample(const double *x, int64_t n, double alpha, char *why, size_t len)
{
    if (!(alpha > 0 && alpha < 1))
        return verdict(0, why, len, "significance alpha = %g is not in (0, 1)", alpha);
    if (n < 0 || (n > 0 && !x))
        return verdict(0, why, len, "no sample given (n = %lld)", (long long)n);
    if (n == 0)
        return verdict(1, why, len, "empty sample: nothing to test");
    for (int64_t i = 0; i < n; i++)
        if (!(x[i] >= 0.0 && x[i] <= 1.0))
            return verdict(0, why, len, "element %lld is %g, outside [0, 1]", (long long)i, x[i]);
    double level = alpha / 3.0;
    double dn = (double)n;

    double mean = 0.0;
    for (int64_t i = 0; i < n; i++)
        mean += x[i];
    mean /= dn;
    double zm = 0.0, zv = 0.0, var = 0.0;
    if (n >= 20) {
        zm = (mean - 0.5) / sqrt(1.0 / (12.0 * dn));
        if (normal_two_sided_p(zm) < level)
            return verdict(0, why, len,
                           "mean %.6g of %lld draws is %.2f standard errors from 1/2 "
                           "(p = %.3g < alpha/3 = %.3g)",
                           mean, (long long)n, zm, normal_two_sided_p(zm), level);
        for (int64_t i = 0; i < n; i++)
            var += (x[i] - mean) * (x[i] - mean);
        var /= dn - 1.0;
        double var_var = (1.0 / 80.0 - (1.0 / 144.0) * (dn - 3.0) / (dn - 1.0)) / dn;
        zv = (var - 1.0 / 12.0) / sqrt(var_var);
        if (normal_two_sided_p(zv) < level)
            return verdict(0, why, len,
                           "variance %.6g of %lld draws is %.2f standard errors from 1/12 "
                           "(p = %.3g < alpha/3 = %.3g)",
                           var, (long long)n, zv, normal_two_sided_p(zv), level);
    }

    double *s = malloc(sizeof(double) * (size_t)n);
    if (!s)
        return verdict(0, why, len, "out of memory sorting %lld draws", (long long)n);
    memcpy(s, x, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof(double), cmp_double);
    double D = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double above = (double)(i + 1) / dn - s[i]; /* D+ */
        double below = s[i] - (double)i / dn;       /* D- */
        if (above > D)
            D = above;
        if (below > D)
            D = below;
    }
    free(s);
    double rn = sqrt(dn);
    double lambda = (rn + 0.12 + 0.11 / rn) * D;
    double pks = kolmogorov_q(lambda);
    if (pks < level)
        return verdict(0, why, len,
                       "Kolmogorov-Smirnov D = %.4g over %lld draws (lambda = %.3f, p = %.3g < "
                       "alpha/3 = %.3g): not uniform on [0, 1]",
                       D, (long long)n, lambda, pks, level);
    if (n >= 20)
        return verdict(1, why, len,
                       "uniform: mean %.4g (z = %.2f), variance %.4g (z = %.2f), KS D = %.4g "
                       "(p = %.3g) over %lld draws",
                       mean, zm, var, zv, D, pks, (long long)n);
    return verdict(1, why, len, "uniform: KS D = %.4g (p = %.3g) over %lld draws", D, pks,
                   (long long)n);
}

/* Exact two-sided binomial test ("minlike", as R's binom.test): with f(i) = C(n,i) p^i
 * (1-p)^(n-i), the p-value of k ones is the sum of f(i) over every i with f(i) <= f(k)
 * (relative slack 1e-7 for rounding). log f(i) is built by the recursion
 *   log f(0) = n log(1 - p),  log f(i+1) = log f(i) + log((n - i)/(i + 1)) + log(p/(1 - p)),
 * in the log domain (no underflow for large n). */
static double binomial_two_sided_p(int64_t n, int64_t k, double p)
{
    double step = log(p) - log1p(-p);
    double lf = (double)n * log1p(-p), lfk = 0.0;
    for (int64_t i = 0; i <= n; i++) {
        if (i == k)
            lfk = lf;
        if (i < n)
            lf += log((double)(n - i) / (double)(i + 1)) + step;
    }
    double total = 0.0;
    lf = (double)n * log1p(-p);
    for (int64_t i = 0; i <= n; i++) {
        if (lf <= lfk + 1e-7)
            total += exp(lf);
        if (i < n)
            lf += log((double)(n - i) / (double)(i + 1)) + step;
    }
    return total > 1.0 ? 1.0 : total;
}

/* Mask sample test: structure first (exact 0/1; the endpoint rules exactly), then the number of
 * ones k against Binomial(n, keep_prob) at level alpha. Critical values depend on (n, p); e.g.
 * n = 10000, p = 0.5, alpha = 1e-3: k must lie in [4835, 5165] (|k - np| <= 3.3 sqrt(np(1-p))
 * asymptotically). Teeth: keep/drop swapped (p -> 1 - p), a mask that is never 1, values other
 * than 0/1, or ones where the endpoint rule demands zeros. */
int ref_check_mask_sample(const double *x, int64_t n, double keep_prob, double alpha, char *why,
                          size_t len)
{
    if (!(alpha > 0 && alpha < 1))
        return verdict(0, why, len, "significance alpha = %g is not in (0, 1)", alpha);
    if (n < 0 || (n > 0 && !x))
        return verdict(0, why, len, "no sample given (n = %lld)", (long long)n);
    int64_t ones = 0;
    for (int64_t i = 0; i < n; i++) {
        if (x[i] != 0.0 && x[i] != 1.0)
            return verdict(0, why, len, "element %lld is %g, not 0 or 1", (long long)i, x[i]);
        ones += x[i] == 1.0;
    }
    if (!(keep_prob > 0)) {
        if (ones)
            return verdict(0, why, len,
                           "keep probability %g is not > 0, so every entry must be 0, but %lld "
                           "of %lld are 1",
                           keep_prob, (long long)ones, (long long)n);
        return verdict(1, why, len, "all %lld entries are 0, as keep probability %g requires",
                       (long long)n, keep_prob);
    }
    if (!(1 > keep_prob)) {
        if (ones != n)
            return verdict(0, why, len,
                           "keep probability %g is not < 1, so every entry must be 1, but %lld "
                           "of %lld are 0",
                           keep_prob, (long long)(n - ones), (long long)n);
        return verdict(1, why, len, "all %lld entries are 1, as keep probability %g requires",
                       (long long)n, keep_prob);
    }
    if (n == 0)
        return verdict(1, why, len, "empty mask: nothing to test");
    double pv = binomial_two_sided_p(n, ones, keep_prob);
    if (pv < alpha)
        return verdict(0, why, len,
                       "%lld of %lld entries kept (rate %.4g) is implausible for keep "
                       "probability %g (binomial p = %.3g < alpha = %.3g)",
                       (long long)ones, (long long)n, (double)ones / (double)n, keep_prob, pv,
                       alpha);
    return verdict(1, why, len,
                   "%lld of %lld entries kept (rate %.4g) for keep probability %g (binomial p = "
                   "%.3g)",
                   (long long)ones, (long long)n, (double)ones / (double)n, keep_prob, pv);
}

/* ---- table ------------------------------------------------------------------------------------ */

const ref_op ref_family_random[] = {
    {.name = "randUniform", .report_name = "rand_uniform", .min_inputs = 0, .max_inputs = 0,
     .params = REF_P_RSEED | REF_P_TARGET, .requires_vjp = 0, .c_fwd = 1, .c_vjp = 0,
     .note = "TorchLean's splitmix64 stream (u_j mod 2^32)/2^32, compared bit-exactly; torch.rand "
             "(Philox) only statistically",
     .shape = random_shape, .forward = rand_uniform_fwd, .vjp = NULL, .sample = sample_uniform},
    {.name = "bernoulliMask", .report_name = "bernoulli_mask", .min_inputs = 0, .max_inputs = 0,
     .params = REF_P_RSEED | REF_P_TARGET | REF_P_KEEP, .requires_vjp = 0, .c_fwd = 1,
     .c_vjp = 0,
     .note = "keep if keepProb > u_j/2^32 on TorchLean's stream; !(p > 0) (incl. NaN) -> 0, "
             "!(1 > p) -> 1",
     .set_defaults = mask_defaults, .shape = random_shape, .forward = bernoulli_mask_fwd,
     .vjp = NULL, .sample = sample_mask},
};
const int ref_family_random_count = (int)(sizeof ref_family_random /
                                          sizeof ref_family_random[0]);
