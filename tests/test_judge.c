/* The judge on the path runs use. cc_compare_at (harness/run/compare.c) judges an output a chunk
 * at a time in vectorized loops; spec_compare below is its definition written as the plainest
 * loop over the element rules of harness/run/compare.h (cc_element_bound, cc_element_ratio_of,
 * cc_bound_is_vacuous). The two must agree bit for bit, element by element (bound, ratio,
 * suspect ratio) and in everything a comparison keeps (counts, vacuity, the worst element and
 * its values, the verdict), on
 *   - every comparison of a slice of cases/smoke.cases and cases/nightly.cases, run through the
 *     runner (full and sampled checks, forward and VJP) on the reference provider whose outputs
 *     are perturbed: a few units in the last place, special values, random bit patterns;
 *   - adversarial chunks: random bit patterns of every dtype (NaN, +-Inf, +-0, subnormals, the
 *     largest finite value and beyond), magnitudes that are 0, NaN or Inf, every bound model,
 *     lengths around the vector width and the chunk, sampled picks.
 * Each part counts what it met and asserts it met every class it claims to cover. Every
 * comparison is also made by each clone of the vectorized loops this CPU runs (default, AVX2,
 * x86-64-v4: cc_compare_at_isa), not only by the one its dispatch picks. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/dtype.h"
#include "harness/run/compare.h"
#include "harness/run/runner.h"
#include "harness/run/sample.h"
#include "reference/ref_parallel.h"
#include "skip_util.h"
#include "test_util.h"

/* ---- the definition ------------------------------------------------------------------------ */

static int64_t numel_of(const cc_view *v)
{
    int64_t n = 1;
    for (int a = 0; a < v->rank; a++)
        n *= v->shape[a];
    return n;
}

/* The element values of the rounding-bias test, e indexing the compared elements. */
typedef struct {
    double e, g;
    int64_t at;
} spec_bias_value;

static const spec_bias_value *sort_base;

static int spec_by_value(const void *pa, const void *pb)
{
    const spec_bias_value *a = &sort_base[*(const int64_t *)pa],
                          *b = &sort_base[*(const int64_t *)pb];
    if (a->e < b->e)
        return -1;
    if (a->e > b->e)
        return 1;
    return a->at < b->at ? -1 : a->at > b->at;
}

static int spec_by_index(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return a < b ? -1 : a > b;
}

/* The rounding-bias test as compare.h states it: the candidates (cc_bias_candidate), the first
 * element of each distinct expected value, in element order: counted toward zero (|got| <
 * |expected|) and below (got < expected), their errors in ulps at the expected value summed
 * away from zero and divided by their number; cc_bias_decide on the counts. */
static void spec_bias(const double *expected, const ref_mag *mag, const int64_t *at, int64_t n,
                      const cc_view *got, const cc_bound_model *m, cc_bias *out)
{
    memset(out, 0, sizeof *out);
    if (!m->bias_test)
        return;
    spec_bias_value *v = malloc(sizeof *v * (size_t)(n + 1));
    int64_t *order = malloc(sizeof *order * (size_t)(n + 1));
    assert_true(v && order);
    int64_t nv = 0;
    for (int64_t e = 0; e < n; e++) {
        double g = cc_load(got->dtype, got->data, at ? at[e] : e);
        if (cc_bias_candidate(m, cc_element_mag_at(mag, e), expected[e], g, got->dtype))
            v[nv++] = (spec_bias_value){expected[e], g, e};
    }
    for (int64_t j = 0; j < nv; j++)
        order[j] = j;
    sort_base = v;
    qsort(order, (size_t)nv, sizeof *order, spec_by_value);
    int64_t kept = 0; /* the first of each value: the smallest index among equal values */
    for (int64_t j = 0; j < nv; j++)
        if (j == 0 || v[order[j]].e != v[order[j - 1]].e)
            order[kept++] = order[j];
    qsort(order, (size_t)kept, sizeof *order, spec_by_index); /* v is in element order */
    double sum = 0.0;
    out->n = kept;
    for (int64_t j = 0; j < kept; j++) {
        const spec_bias_value *b = &v[order[j]];
        out->toward_zero += fabs(b->g) < fabs(b->e);
        out->below += b->g < b->e;
        sum += (b->g - b->e) / cc_ulp(got->dtype, b->e) * (b->e < 0 ? -1.0 : 1.0);
    }
    out->mean_ulp = kept > 0 ? sum / (double)kept : 0.0;
    cc_bias_decide(out);
    free(v);
    free(order);
}

/* The judge as compare.h states it. n elements (count picks at[e] of got, or all of got); for
 * each: its magnitudes, judging bound (cc_element_judging_bound: the probabilistic bound where
 * the worst-case one is vacuous and the model allows it) and suspect bound, the provider's
 * value, the ratios. Counted: over the bound (ratio > 1), NaN where the other side has none,
 * vacuous judging bounds, elements judged by the probabilistic bound. The worst is element 0
 * whatever its ratio, then each element whose ratio is larger than every one before it. The
 * suspect ratio is the largest suspect ratio (0 when none is positive). Vacuous: the output
 * rule of cc_output_is_vacuous over those counts and the finite expected values whose judging
 * bound is infinite. The rounding-bias test: spec_bias. */
static void spec_compare(const double *expected, const ref_mag *mag, const int64_t *at,
                         int64_t count, const cc_view *got, const cc_bound_model *m,
                         cc_comparison *out, cc_element_judgement *each)
{
    int64_t n = at ? count : numel_of(got);
    memset(out, 0, sizeof *out);
    out->n = n;
    out->worst_index = -1;
    /* the output's own magnitude: its largest finite |expected| that is not within the
     * reference's own float64 error, 2 c_op 2^-53 m_i, of zero (a NaN m_i excludes nothing) */
    double out_max = 0.0;
    double oracle = 2.0 * m->c_op * cc_unit_roundoff(CC_F64);
    for (int64_t e = 0; e < n; e++) {
        double a = fabs(expected[e]);
        if (isfinite(a) && !(a <= oracle * mag->worst[e]) && a > out_max)
            out_max = a;
    }
    out->own_max = out_max;
    int64_t n_finite = 0, n_unbounded = 0;
    for (int64_t e = 0; e < n; e++) {
        cc_element_mag em = cc_element_mag_at(mag, e);
        int by_prob;
        double bound =
            cc_element_judging_bound(m, em, expected[e], out_max, got->dtype, &by_prob);
        double suspect_bound = cc_element_suspect_bound(m, em);
        double g = cc_load(got->dtype, got->data, at ? at[e] : e);
        double ratio = cc_element_ratio_of(expected[e], g, bound, got->dtype, m);
        double suspect = cc_element_ratio_of(expected[e], g, suspect_bound, got->dtype, m);
        each[e] = (cc_element_judgement){bound, ratio, suspect, by_prob};
        out->n_over += ratio > 1.0;
        out->n_nan_mismatch += isnan(expected[e]) != isnan(g);
        n_finite += isfinite(expected[e]) != 0;
        out->n_vacuous += cc_bound_is_vacuous(expected[e], bound, out_max, got->dtype, m);
        n_unbounded += isfinite(expected[e]) && bound == INFINITY;
        out->n_prob += by_prob;
        if (suspect > out->suspect_ratio)
            out->suspect_ratio = suspect;
        if (e == 0 || ratio > out->worst_ratio) {
            out->worst_ratio = ratio;
            out->worst_index = at ? at[e] : e;
            out->expected = expected[e];
            out->got = g;
            out->bound = bound;
            out->magnitude = mag->worst[e];
            out->worst_by_prob = by_prob;
        }
    }
    out->vacuous = cc_output_is_vacuous(n, n_finite, out->n_vacuous, n_unbounded);
    spec_bias(expected, mag, at, n, got, m, &out->bias);
}

/* What a case makes of a comparison (harness/run/runner.c): fail over the bound or biased,
 * else suspect over the suspect bound, else pass. */
static const char *verdict_of(const cc_comparison *c)
{
    return c->worst_ratio > 1.0 || c->bias.biased ? "fail"
           : c->suspect_ratio > 1.0               ? "suspect"
                                                  : "pass";
}

/* ---- agreement, bit for bit ---------------------------------------------------------------- */

static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* "" when the two comparisons are the same to the bit; else the first field that differs. */
static void differences(const cc_comparison *fast, const cc_comparison *spec, char *why,
                        size_t n)
{
    why[0] = 0;
#define DIFF_INT(f)                                                                            \
    if (!why[0] && fast->f != spec->f)                                                         \
    snprintf(why, n, #f ": vectorized %lld, definition %lld", (long long)fast->f,              \
             (long long)spec->f)
#define DIFF_DOUBLE(f)                                                                         \
    if (!why[0] && !same_bits(fast->f, spec->f))                                               \
    snprintf(why, n, #f ": vectorized %a, definition %a", fast->f, spec->f)
    DIFF_INT(n);
    DIFF_INT(n_over);
    DIFF_INT(n_nan_mismatch);
    DIFF_INT(n_vacuous);
    DIFF_INT(vacuous);
    DIFF_INT(worst_index);
    DIFF_DOUBLE(worst_ratio);
    DIFF_DOUBLE(expected);
    DIFF_DOUBLE(got);
    DIFF_DOUBLE(bound);
    DIFF_DOUBLE(magnitude);
    DIFF_DOUBLE(suspect_ratio);
    DIFF_INT(n_prob);
    DIFF_INT(worst_by_prob);
    DIFF_DOUBLE(own_max);
    DIFF_INT(bias.n);
    DIFF_INT(bias.toward_zero);
    DIFF_INT(bias.below);
    DIFF_DOUBLE(bias.mean_ulp);
    DIFF_DOUBLE(bias.z);
    DIFF_INT(bias.biased);
#undef DIFF_INT
#undef DIFF_DOUBLE
    if (!why[0] && strcmp(verdict_of(fast), verdict_of(spec)) != 0)
        snprintf(why, n, "verdict: vectorized %s, definition %s", verdict_of(fast),
                 verdict_of(spec));
}

/* What the checks met, to show they covered what they claim. */
typedef struct {
    long comparisons, elements, mismatches;
    long multi_chunk, sampled, empty;
    long nan_expected, nan_got, inf_expected, inf_got, overflow_accepted;
    long over_bound, exactly_one, vacuous_outputs, vacuous_elements, suspect_outputs;
    long pattern_outputs; /* cc_output_is_vacuous's exception: an output of Inf inputs */
    long nonfinite_alike, split_planes, worst_after_first_chunk;
    long prob_elements, prob_worst, bias_tests, biased, bias_repeats, compensated;
    long by_clone[REF_ISA_COUNT]; /* comparisons each clone made */
    char first[768];
} coverage;

/* Judge once by cc_compare_at_each and once by the definition; note any difference (and,
 * when given, that cc_compare_at in the runner gave the same: `ran`). */
static void check_one(coverage *cv, const double *expected, const ref_mag *mag,
                      const int64_t *at, int64_t count, const cc_view *got,
                      const cc_bound_model *m, const cc_comparison *ran, const char *what)
{
    int64_t n = at ? count : numel_of(got);
    cc_element_judgement *fast_each = malloc(sizeof *fast_each * (size_t)(n + 1));
    cc_element_judgement *spec_each = malloc(sizeof *spec_each * (size_t)(n + 1));
    assert_non_null(fast_each);
    assert_non_null(spec_each);
    cc_comparison fast, spec, plain;
    cc_compare_at_each(expected, mag, at, count, got, m, &fast, fast_each);
    cc_compare_at(expected, mag, at, count, got, m, &plain);
    spec_compare(expected, mag, at, count, got, m, &spec, spec_each);
    char why[512];
    differences(&fast, &spec, why, sizeof why);
    char other[400];
    if (!why[0]) {
        differences(&plain, &spec, other, sizeof other);
        if (other[0])
            snprintf(why, sizeof why, "cc_compare_at: %s", other);
    }
    if (!why[0] && ran) {
        differences(ran, &spec, other, sizeof other);
        if (other[0])
            snprintf(why, sizeof why, "as the run judged it: %s", other);
    }
    for (int isa = 0; isa < REF_ISA_COUNT && !why[0]; isa++) { /* every clone, forced */
        cc_comparison c;
        cc_element_judgement *e_isa = malloc(sizeof *e_isa * (size_t)(n + 1));
        assert_non_null(e_isa);
        if (cc_compare_at_isa(isa, expected, mag, at, count, got, m, &c, e_isa) == 0) {
            cv->by_clone[isa]++;
            differences(&c, &spec, other, sizeof other);
            for (int64_t e = 0; e < n && !other[0]; e++)
                if (!same_bits(e_isa[e].bound, fast_each[e].bound) ||
                    !same_bits(e_isa[e].ratio, fast_each[e].ratio) ||
                    !same_bits(e_isa[e].suspect_ratio, fast_each[e].suspect_ratio) ||
                    e_isa[e].by_prob != fast_each[e].by_prob)
                    snprintf(other, sizeof other, "element %lld's judgement differs",
                             (long long)e);
            if (other[0])
                snprintf(why, sizeof why, "the %s clone: %s", ref_isa_name(isa), other);
        }
        free(e_isa);
    }
    for (int64_t e = 0; e < n && !why[0]; e++) {
        const cc_element_judgement *f = &fast_each[e], *s = &spec_each[e];
        if (!same_bits(f->bound, s->bound) || !same_bits(f->ratio, s->ratio) ||
            !same_bits(f->suspect_ratio, s->suspect_ratio) || f->by_prob != s->by_prob)
            snprintf(why, sizeof why,
                     "element %lld (expected %a, got %a): bound %a / %a, ratio %a / %a, suspect "
                     "%a / %a (vectorized / definition)",
                     (long long)e, expected[e],
                     cc_load(got->dtype, got->data, at ? at[e] : e), f->bound, s->bound,
                     f->ratio, s->ratio, f->suspect_ratio, s->suspect_ratio);
    }
    cv->comparisons++;
    cv->elements += n;
    if (why[0] && !cv->mismatches++)
        snprintf(cv->first, sizeof cv->first, "%s: %s", what, why);
    cv->multi_chunk += n > 256;
    cv->sampled += at != NULL;
    cv->empty += n == 0;
    cv->vacuous_outputs += spec.vacuous;
    cv->vacuous_elements += spec.n_vacuous;
    cv->suspect_outputs += spec.worst_ratio <= 1.0 && spec.suspect_ratio > 1.0;
    cv->nonfinite_alike += m->nonfinite_alike;
    cv->split_planes += m->u_acc < m->u && mag->dtype != NULL;
    cv->compensated += m->oracle_dtype > 0;
    cv->worst_after_first_chunk += spec.worst_index >= 256 && !at;
    cv->over_bound += spec.n_over;
    cv->prob_elements += spec.n_prob;
    cv->prob_worst += spec.worst_by_prob;
    cv->bias_tests += spec.bias.n > 0;
    cv->biased += spec.bias.biased;
    long candidates = 0;
    for (int64_t e = 0; e < n; e++)
        candidates += cc_bias_candidate(m, cc_element_mag_at(mag, e), expected[e],
                                        cc_load(got->dtype, got->data, at ? at[e] : e),
                                        got->dtype);
    cv->bias_repeats += candidates > spec.bias.n;
    long finite_expected = 0;
    for (int64_t e = 0; e < n; e++) {
        double x = expected[e], g = cc_load(got->dtype, got->data, at ? at[e] : e);
        finite_expected += isfinite(x) != 0;
        cv->nan_expected += isnan(x) != 0;
        cv->nan_got += isnan(g) != 0;
        cv->inf_expected += isinf(x) != 0;
        cv->inf_got += isinf(g) != 0;
        cv->overflow_accepted += isfinite(x) && isinf(g) && spec_each[e].ratio == 0.0;
        cv->exactly_one += spec_each[e].ratio == 1.0;
    }
    cv->pattern_outputs += !spec.vacuous && finite_expected > 0 &&
                           spec.n_vacuous == finite_expected;
    free(fast_each);
    free(spec_each);
}

/* ---- a deterministic stream of bits -------------------------------------------------------- */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

typedef struct {
    uint64_t s;
} stream;

static uint64_t next(stream *r)
{
    return mix(r->s++);
}

static double uniform(stream *r)
{
    return (double)(next(r) >> 11) * 0x1p-53;
}

/* A value of dtype t stored at buf[i] from raw bits: any pattern, NaNs and all. */
static void store_bits(cc_dtype t, void *buf, int64_t i, uint64_t bits)
{
    size_t size = cc_dtype_size(t);
    memcpy((char *)buf + (size_t)i * size, &bits, size); /* little-endian: the low bytes */
}

/* One of the values the rules single out, for dtype t. */
static double special_value(cc_dtype t, uint64_t pick)
{
    double max = cc_max_finite(t), tiny = cc_smallest_normal(t);
    double sub = t == CC_F64 ? 0x1p-1074 : t == CC_F32 ? 0x1p-149 : t == CC_F16 ? 0x1p-24
                                                                                 : 0x1p-133;
    const double v[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, max, -max,
                        tiny, -tiny, sub, -sub, 1.0, -1.0, max * 2.0 < INFINITY ? max * 2 : max};
    return v[pick % (sizeof v / sizeof v[0])];
}

/* x rounded to dtype t toward zero (a truncating conversion). */
static double toward_zero(cc_dtype t, double x)
{
    double r = cc_round_to(t, x);
    return fabs(r) > fabs(x) ? r - copysign(cc_ulp(t, x), x) : r;
}

/* ---- part 1: adversarial chunks ------------------------------------------------------------ */

static const cc_dtype FLOATS[] = {CC_F64, CC_F32, CC_F16, CC_BF16};

/* An expected value (float64, as the reference gives it) for dtype t. */
static double adversarial_expected(cc_dtype t, stream *r)
{
    uint64_t k = next(r);
    switch (k % 8) {
    case 0:
        return special_value(t, k >> 8);
    case 1: { /* any float64 bit pattern */
        double x;
        uint64_t b = next(r);
        memcpy(&x, &b, sizeof x);
        return x;
    }
    case 2: /* beyond the dtype's largest finite value: may come back as Inf */
        return copysign(cc_max_finite(t) * (1.0 + uniform(r)), (k >> 9) & 1 ? -1.0 : 1.0);
    case 3: /* tiny, around the floor */
        return ldexp(uniform(r) - 0.5, -120 - (int)(k >> 60));
    default:
        return ldexp(uniform(r) * 2.0 - 1.0, (int)((k >> 8) % 40) - 20);
    }
}

/* The provider's value: the expected value a few units in the last place away (ratios about 1),
 * exactly it, a special value, or any bit pattern of the dtype. */
static void adversarial_got(cc_dtype t, double expected, void *buf, int64_t i, stream *r)
{
    uint64_t k = next(r);
    switch (k % 6) {
    case 0:
        store_bits(t, buf, i, next(r));
        return;
    case 1:
        cc_store(t, buf, i, special_value(t, k >> 8));
        return;
    case 2:
        cc_store(t, buf, i, expected);
        return;
    default: {
        double x = cc_round_to(t, expected);
        double steps = (double)((int64_t)((k >> 8) % 97) - 48);
        cc_store(t, buf, i, x + steps * cc_ulp(t, x) * ((k >> 20) & 1 ? 1.0 : 0.0625));
        return;
    }
    }
}

/* A magnitude plane value for expected value x: mostly |x| times a few, sometimes 0, NaN, Inf,
 * huge or tiny. */
static double adversarial_mag(double x, stream *r)
{
    uint64_t k = next(r);
    switch (k % 16) {
    case 0:
        return 0.0;
    case 1:
        return NAN;
    case 2:
        return INFINITY;
    case 3:
        return 1e300;
    case 4:
        return 0x1p-1060;
    default:
        return (isfinite(x) ? fabs(x) : 1.0) * (1.0 + (double)(k % 64) * uniform(r));
    }
}

static void test_adversarial_chunks(void **state)
{
    (void)state;
    /* around the vector widths (2, 4, 8 doubles), the chunk (256) and its multiples */
    static const int64_t lengths[] = {0,   1,   2,   3,   4,   5,   7,   8,   9,   15,  16,
                                      17,  31,  32,  33,  63,  64,  65,  255, 256, 257, 258,
                                      263, 264, 511, 512, 513, 767, 768, 769, 1000};
    static const double compute_u[] = {0.0, 0x1p-11, 0x1p-8};
    static const double c_ops[] = {1.0, 2.0, 7.5, 300.0};
    enum { TRIALS = 6 };
    coverage cv;
    memset(&cv, 0, sizeof cv);
    stream r = {20240601};
    const int n_lengths = (int)(sizeof lengths / sizeof lengths[0]);
    for (int li = 0; li < n_lengths; li++)
        for (int ti = 0; ti < 4; ti++)
            for (int trial = 0; trial < TRIALS; trial++) {
                cc_dtype t = FLOATS[ti];
                int64_t n = lengths[li];
                int sampled = trial % 3 == 2;
                int64_t total = sampled ? 2 * n + 5 : n; /* the dense output picks come from */
                double *expected = malloc(sizeof(double) * (size_t)(n + 1));
                double *planes = malloc(sizeof(double) * 3 * (size_t)(n + 1));
                void *got = malloc(8 * (size_t)(total + 1));
                int64_t *at = sampled ? malloc(sizeof(int64_t) * (size_t)(n + 1)) : NULL;
                assert_true(expected && planes && got && (!sampled || at));
                /* picks: n ascending indices of [0, total) */
                for (int64_t e = 0, j = 0; sampled && e < n; j++)
                    if ((int64_t)(next(&r) % 2) == 0 || total - j == n - e)
                        at[e++] = j;
                for (int64_t j = 0; j < total; j++)
                    store_bits(t, got, j, next(&r)); /* what no pick reads: anything */
                /* some outputs start with a first chunk of exact values, so that a later
                 * chunk holds the worst element */
                int calm_start = trial == 1;
                /* trial 3: values drawn from 13 (repeated values), converted to the dtype
                 * toward zero (odd lengths) or to nearest: the rounding-bias test's two sides */
                double pool[13];
                for (int k = 0; k < 13; k++)
                    pool[k] = ldexp(uniform(&r) + 1.0, (int)(next(&r) % 9) - 4) *
                              (next(&r) % 2 ? -1.0 : 1.0);
                for (int64_t e = 0; e < n; e++) {
                    expected[e] = calm_start && e < 256 ? 1.0
                                  : trial == 3 && e % 2 ? pool[next(&r) % 13] * (1.0 + 1e-9 * (double)e)
                                  : trial == 3          ? pool[next(&r) % 13]
                                                        : adversarial_expected(t, &r);
                    if (calm_start && e < 256)
                        cc_store(t, got, sampled ? at[e] : e, 1.0);
                    else if (trial == 3)
                        cc_store(t, got, sampled ? at[e] : e,
                                 li % 2 ? toward_zero(t, expected[e]) : expected[e]);
                    else
                        adversarial_got(t, expected[e], got, sampled ? at[e] : e, &r);
                    planes[e] = adversarial_mag(expected[e], &r);
                    planes[n + 1 + e] = planes[e] * uniform(&r);       /* dtype_i <= m_i */
                    planes[2 * (n + 1) + e] = planes[e] * uniform(&r); /* prob_i <= m_i */
                    if (trial == 5 && li % 3 == 1 && isfinite(expected[e]))
                        planes[e] = INFINITY; /* an output of Inf inputs, as an rfft's */
                    if (trial == 3 && e % 8) { /* mostly candidates of the rounding-bias test */
                        planes[n + 1 + e] = fabs(expected[e]) * uniform(&r);
                        planes[2 * (n + 1) + e] = planes[e] * 0.5 * uniform(&r);
                    }
                }
                ref_mag mag = {planes, trial % 2 ? planes + n + 1 : NULL,
                               trial % 4 < 2 || trial == 3 ? planes + 2 * (n + 1) : NULL};
                cc_bound_model m =
                    cc_bound_for_judging(t, compute_u[trial % 3], c_ops[(trial + li) % 4],
                                         (trial + ti) % 2 ? CC_ACC_RELAXED : CC_ACC_STRICT);
                m.nonfinite_alike = trial % 5 == 4;
                if ((li + trial) % 5 == 3) /* an oracle whose sums are compensated */
                    cc_bound_oracle_compensated(&m);
                cc_view v = cc_t_vector_view(t, got, total);
                char what[128];
                snprintf(what, sizeof what, "%s, %lld elements%s, trial %d", cc_dtype_name(t),
                         (long long)n, sampled ? " (sampled)" : "", trial);
                check_one(&cv, expected, &mag, at, n, &v, &m, NULL, what);
                free(expected);
                free(planes);
                free(got);
                free(at);
            }
    printf("adversarial chunks: %ld comparisons, %ld elements (%ld of them NaN expected, %ld "
           "NaN got, %ld Inf expected, %ld Inf got, %ld overflows accepted, %ld over the bound, "
           "%ld vacuous); %ld multi-chunk, %ld sampled, %ld empty; %ld mismatches\n",
           cv.comparisons, cv.elements, cv.nan_expected, cv.nan_got, cv.inf_expected, cv.inf_got,
           cv.overflow_accepted, cv.over_bound, cv.vacuous_elements, cv.multi_chunk, cv.sampled,
           cv.empty, cv.mismatches);
    if (cv.mismatches)
        fail_msg("%ld of %ld comparisons differ from the definition; first: %s", cv.mismatches,
                 cv.comparisons, cv.first);
    assert_int_equal(cv.comparisons, n_lengths * 4 * TRIALS);
    /* every class the comment above claims, met */
    assert_true(cv.nan_expected > 100 && cv.nan_got > 100 && cv.inf_expected > 100 &&
                cv.inf_got > 100);
    assert_true(cv.overflow_accepted > 0 && cv.over_bound > 1000 && cv.vacuous_elements > 100);
    assert_true(cv.multi_chunk > 50 && cv.sampled > 100 && cv.empty > 0);
    assert_true(cv.nonfinite_alike > 20 && cv.split_planes > 20 && cv.compensated > 20);
    assert_true(cv.worst_after_first_chunk > 0);
    printf("outputs of Inf inputs judged by their pattern: %ld; vacuous: %ld\n",
           cv.pattern_outputs, cv.vacuous_outputs);
    assert_true(cv.pattern_outputs > 10 && cv.vacuous_outputs > 5);
    printf("probabilistic bound: %ld elements judged by it (%ld outputs' worst); rounding-bias "
           "test: %ld outputs, %ld biased, %ld with repeated values\n",
           cv.prob_elements, cv.prob_worst, cv.bias_tests, cv.biased, cv.bias_repeats);
    assert_true(cv.prob_elements > 100 && cv.prob_worst > 0);
    assert_true(cv.bias_tests > 50 && cv.biased > 5 && cv.bias_repeats > 5);
    for (int isa = 0; isa < REF_ISA_COUNT; isa++) {
        printf("the %s clone: %ld comparisons%s\n", ref_isa_name(isa), cv.by_clone[isa],
               ref_isa_runs(isa) ? "" : " (this CPU cannot run it)");
        assert_int_equal(cv.by_clone[isa], ref_isa_runs(isa) ? cv.comparisons : 0);
    }
}

/* ---- part 2: the smoke and nightly cases, as runs judge them ------------------------------- */

/* The reference provider, its outputs perturbed element by element: a few units in the last
 * place, special values, random bit patterns (in proportions the case's index chooses). */
typedef struct {
    uint64_t seed;
    int mode; /* 0 exact, 1 ulps, 2 specials, 3 bits, 4 all of them */
} perturb_ctx;

static void perturb(const perturb_ctx *p, cc_view *v, uint64_t salt)
{
    if (!v->data || !cc_dtype_is_float(v->dtype) || p->mode == 0)
        return;
    stream r = {mix(p->seed ^ salt)};
    for (int64_t i = 0, n = numel_of(v); i < n; i++) {
        uint64_t k = next(&r);
        int mode = p->mode == 4 ? (int)(k % 3) + 1 : p->mode;
        double x = cc_load(v->dtype, v->data, i);
        if (mode == 1 && k % 4 == 0)
            cc_store(v->dtype, v->data, i,
                     x + (double)((int64_t)((k >> 8) % 65) - 32) * cc_ulp(v->dtype, x));
        else if (mode == 2 && k % 16 == 0)
            cc_store(v->dtype, v->data, i, special_value(v->dtype, k >> 8));
        else if (mode == 3 && k % 32 == 0)
            store_bits(v->dtype, v->data, i, next(&r));
    }
}

static cc_status perturbed_forward(void *ctx, const cc_call *call, cc_view *out, char *msg,
                                   size_t len)
{
    const cc_provider *ref = cc_reference_provider();
    cc_status st = ref->forward(ref->ctx, call, out, msg, len);
    if (st == CC_OK)
        perturb(ctx, out, 1);
    return st;
}

static cc_status perturbed_vjp(void *ctx, const cc_call *call, const cc_view *g, cc_view *grads,
                               char *msg, size_t len)
{
    const cc_provider *ref = cc_reference_provider();
    cc_status st = ref->vjp(ref->ctx, call, g, grads, msg, len);
    for (int i = 0; st == CC_OK && i < call->n_in; i++)
        perturb(ctx, &grads[i], 2 + (uint64_t)i);
    return st;
}

static void judged(void *ctx, const cc_judged_output *o)
{
    coverage *cv = ctx;
    check_one(cv, o->expected, o->mag, o->at, o->count, o->got, o->bound, o->cmp,
              "a comparison of the case");
}

/* Every `stride`-th case of a file whose reference costs at most `most_work`; returns how many
 * ran. Each runs on the perturbed reference (mode by its index), every third sampled. */
static long run_slice(const char *path, size_t stride, double most_work, coverage *cv,
                      char *first_case, size_t first_len)
{
    cc_case_list l = {0};
    if (cc_t_load_cases(path, &l))
        fail_msg("cannot parse %s", path);
    long ran = 0;
    for (size_t i = 0; i < l.n; i += stride) {
        cc_case *c = &l.v[i];
        if (cc_reference_work(c) > most_work)
            continue;
        perturb_ctx pc = {i * 2654435761u, (int)(i / stride % 5)};
        cc_provider p = *cc_reference_provider();
        p.name = "perturbed";
        p.ctx = &pc;
        p.forward = perturbed_forward;
        p.vjp = perturbed_vjp;
        cc_judge_tap tap = {judged, cv};
        cc_run_options o = {.tap = &tap,
                            .ref = i / stride % 3 == 2 ? CC_REF_SAMPLED : CC_REF_AUTO};
        long before = cv->mismatches;
        cc_result res;
        cc_run_case_probed(&p, c, &o, NULL, &res);
        if (cv->mismatches > before && !first_case[0])
            snprintf(first_case, first_len, "%s", res.line);
        ran++;
    }
    cc_case_list_free(&l);
    return ran;
}

static void test_smoke_and_nightly_slice(void **state)
{
    (void)state;
    coverage cv;
    memset(&cv, 0, sizeof cv);
    char first_case[CC_CASE_LINE_MAX] = "";
    long smoke = run_slice(CAPCHECK_SOURCE_DIR "/cases/smoke.cases", 1, 2e7, &cv, first_case,
                           sizeof first_case);
    long nightly = run_slice(CAPCHECK_SOURCE_DIR "/cases/nightly.cases", 97, 2e7, &cv,
                             first_case, sizeof first_case);
    printf("smoke %ld cases, nightly slice %ld cases: %ld comparisons, %ld elements (%ld NaN "
           "expected, %ld NaN got, %ld Inf got, %ld over the bound, %ld exactly at it); %ld "
           "multi-chunk, %ld sampled, %ld vacuous, %ld suspect, %ld with a dtype share; %ld "
           "mismatches\n",
           smoke, nightly, cv.comparisons, cv.elements, cv.nan_expected, cv.nan_got, cv.inf_got,
           cv.over_bound, cv.exactly_one, cv.multi_chunk, cv.sampled, cv.vacuous_outputs,
           cv.suspect_outputs, cv.split_planes, cv.mismatches);
    if (cv.mismatches)
        fail_msg("%ld of %ld comparisons differ from the definition; first in case %s: %s",
                 cv.mismatches, cv.comparisons, first_case, cv.first);
    assert_true(smoke > 200 && nightly > 500);
    assert_true(cv.comparisons > 2000 && cv.elements > 500000);
    assert_true(cv.nan_expected > 0 && cv.nan_got > 1000 && cv.inf_got > 1000);
    assert_true(cv.over_bound > 1000 && cv.multi_chunk > 100 && cv.sampled > 100);
    assert_true(cv.vacuous_outputs > 0 && cv.suspect_outputs > 0 && cv.split_planes > 100);
    printf("probabilistic bound: %ld elements judged by it; rounding-bias test: %ld outputs, "
           "%ld biased, %ld with repeated values\n",
           cv.prob_elements, cv.bias_tests, cv.biased, cv.bias_repeats);
    assert_true(cv.prob_elements > 0 && cv.bias_tests > 100 && cv.bias_repeats > 0 &&
                cv.compensated > 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adversarial_chunks),
        cmocka_unit_test(test_smoke_and_nightly_slice),
    };
#if REF_HAVE_VECTOR_CLONES && defined(REF_CLONE_NAMES_UNKNOWN)
    cc_t_skip("this compiler names its target_clones clones otherwise than fn.avx2: only the "
              "clone its dispatch picks is tested");
#endif
    return cc_t_exit_code(
        cmocka_run_group_tests_name("judge_against_its_definition", tests, NULL, NULL));
}
