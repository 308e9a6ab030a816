#include "harness/run/compare.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "reference/ref_parallel.h"

const char *cc_accumulation_name(cc_accumulation a)
{
    return a == CC_ACC_RELAXED ? "relaxed" : "strict";
}

int cc_accumulation_parse(const char *s, cc_accumulation *out)
{
    if (s && strcmp(s, "strict") == 0)
        *out = CC_ACC_STRICT;
    else if (s && strcmp(s, "relaxed") == 0)
        *out = CC_ACC_RELAXED;
    else
        return -1;
    return 0;
}

const char *cc_judging_describe(cc_accumulation acc, int power)
{
    if (power)
        return acc == CC_ACC_RELAXED ? "relaxed, power" : "strict, power";
    return cc_accumulation_name(acc);
}

cc_bound_model cc_bound_for(cc_dtype t, double c_op)
{
    return cc_bound_for_compute(t, 0.0, c_op);
}

cc_bound_model cc_bound_for_compute(cc_dtype t, double compute_u, double c_op)
{
    return cc_bound_for_judging(t, compute_u, c_op, CC_ACC_STRICT);
}

/* u is the provider's roundoff plus the oracle's own: the float64 reference performs the same
 * kind of rounded steps, so for an f64 case its error is as large as the provider's and both
 * must fit (for f32 and narrower the 2^-53 term is negligible). A declared compute roundoff replaces u(dtype) only when it is coarser: the output is rounded
 * to the dtype whatever the arithmetic was. The floor stays the dtype's (TF32 has f32's
 * exponent range). Strict f16/bf16 accumulate in float32: u_acc is float32's roundoff (or the
 * declared one, when coarser). */
cc_bound_model cc_bound_for_judging(cc_dtype t, double compute_u, double c_op,
                                    cc_accumulation acc)
{
    double oracle = cc_unit_roundoff(CC_F64);
    double u = cc_unit_roundoff(t);
    if (compute_u > u)
        u = compute_u;
    double u_acc = u;
    if (acc == CC_ACC_STRICT && (t == CC_F16 || t == CC_BF16))
        u_acc = fmax(compute_u, cc_unit_roundoff(CC_F32));
    cc_bound_model m = {c_op, u + oracle, cc_smallest_normal(t), u_acc + oracle,
                        CC_SUSPECT_LAMBDA, 0, 0, 0, 0.0};
    /* the probabilistic model holds for an accumulation that rounds to nearest in float32 or
     * finer; a fold in the dtype (relaxed f16/bf16) or a declared coarser arithmetic (TF32 on
     * tensor cores, whose accumulators may truncate) is outside it: a bf16 fold stagnates
     * once the partial sum is 2^8 times a term, every error of one sign */
    m.prob_judges = m.u_acc <= cc_unit_roundoff(CC_F32) + oracle;
    m.bias_test = t == CC_F16 || t == CC_BF16;
    return m;
}

void cc_bound_oracle_compensated(cc_bound_model *m)
{
    double oracle = cc_unit_roundoff(CC_F64);
    if (m->oracle_dtype > 0)
        return;
    m->u -= oracle; /* exact: u(dtype) + 2^-53 - 2^-53 */
    m->u_acc -= oracle;
    m->oracle_dtype = oracle;
}

double cc_bias_z_threshold(void)
{
    return sqrt(2.0 * log(2.0 / CC_BIAS_ALPHA));
}

int cc_compute_roundoff_valid(double compute_u)
{
    return compute_u >= 0.0 && compute_u <= CC_MAX_COMPUTE_ROUNDOFF;
}

/* c_op * (u_acc * a + u * dtype) + floor, or c_op * u * a + floor when the accumulation is the
 * dtype's own (a is m_i for the bound, lambda * prob_i for the suspect bound). */
static inline double split_bound(const cc_bound_model *m, double a, double dtype)
{
    double b = m->u_acc < m->u ? m->c_op * (m->u_acc * a + m->u * dtype)
                               : m->c_op * m->u * a;
    /* a compensated oracle's own share (0 otherwise, and adding 0 changes no bit) */
    double o = m->oracle_dtype > 0 ? m->c_op * m->oracle_dtype * (dtype + 0x1p-20 * a) : 0.0;
    b = b + o + m->floor;
    return isnan(b) ? m->floor : b; /* a magnitude that is not a number: hold it to the floor */
}

double cc_element_bound(const cc_bound_model *m, cc_element_mag mag)
{
    return split_bound(m, mag.worst, mag.dtype);
}

double cc_element_suspect_bound(const cc_bound_model *m, cc_element_mag mag)
{
    return split_bound(m, m->lambda * mag.prob, mag.dtype);
}

double cc_element_ratio_of(double expected, double got, double bound, cc_dtype t,
                           const cc_bound_model *m)
{
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

double cc_element_ratio(double expected, double got, double mag, cc_dtype t,
                        const cc_bound_model *m, double *bound_out)
{
    double bound = cc_element_bound(m, (cc_element_mag){mag, mag, mag});
    if (bound_out)
        *bound_out = bound;
    return cc_element_ratio_of(expected, got, bound, t, m);
}

cc_element_mag cc_element_mag_at(const ref_mag *mag, int64_t i)
{
    double w = mag->worst[i];
    return (cc_element_mag){w, mag->dtype ? mag->dtype[i] : w, mag->prob ? mag->prob[i] : w};
}

/* The vacuity test of a finite expected value of magnitude a (max_finite: the dtype's). */
static inline int vacuous_at(double a, double bound, double out_max, double max_finite,
                             const cc_bound_model *m)
{
    /* | and &, not || and &&: no branch, so the loops that call it vectorize */
    return (bound >= max_finite + a) | ((out_max > 0) & (bound - m->floor >= a + out_max));
}

int cc_bound_is_vacuous(double expected, double bound, double out_max, cc_dtype t,
                        const cc_bound_model *m)
{
    return isfinite(expected) && vacuous_at(fabs(expected), bound, out_max, cc_max_finite(t), m);
}

int cc_output_is_vacuous(int64_t n, int64_t n_finite, int64_t n_vacuous, int64_t n_unbounded)
{
    int pattern_only = n_unbounded == n_finite && n_finite < n; /* beside an Inf or NaN */
    return n_finite > 0 && n_vacuous == n_finite && !pattern_only;
}

double cc_element_judging_bound(const cc_bound_model *m, cc_element_mag mag, double expected,
                                double out_max, cc_dtype t, int *by_prob)
{
    double b = cc_element_bound(m, mag), sb = cc_element_suspect_bound(m, mag);
    int use = m->prob_judges && sb < b && cc_bound_is_vacuous(expected, b, out_max, t, m);
    if (by_prob)
        *by_prob = use;
    return use ? sb : b;
}

double cc_output_own_max(const double *expected, const double *worst, int64_t n,
                         const cc_bound_model *m)
{
    /* an output that is zero in exact arithmetic comes out of the reference as +-1e-17: what
     * is within the oracle's own float64 error of zero is no magnitude of the output's */
    double out_max = 0.0, oracle = 2.0 * m->c_op * cc_unit_roundoff(CC_F64);
    for (int64_t i = 0; i < n; i++) {
        double a = fabs(expected[i]);
        if (isfinite(a) && a > out_max && !(a <= oracle * worst[i]))
            out_max = a;
    }
    return out_max;
}

/* cc_bias_candidate with r = cc_round_to(t, e) given. */
static int bias_candidate_rounded(const cc_bound_model *m, cc_element_mag mag, double e,
                                  double g, double r, cc_dtype t)
{
    double a = fabs(e);
    if (!m->bias_test || !isfinite(g) || !(a >= cc_smallest_normal(t) && a <= cc_max_finite(t)))
        return 0;
    /* the final rounding is the only rounding in the dtype, of an accumulation of at least 4
     * terms (prob_i <= m_i / 2: sqrt(n) <= n / 2); not representable, not a tie */
    return mag.dtype <= a && 2.0 * mag.prob <= mag.worst && r != e &&
           fabs(r - e) != 0.5 * cc_ulp(t, e);
}

int cc_bias_candidate(const cc_bound_model *m, cc_element_mag mag, double expected, double got,
                      cc_dtype t)
{
    return bias_candidate_rounded(m, mag, expected, got, cc_round_to(t, expected), t);
}

void cc_bias_decide(cc_bias *b)
{
    b->z = 0.0;
    b->biased = 0;
    if (b->n <= 0)
        return;
    double root = sqrt((double)b->n);
    double z_zero = (double)(2 * b->toward_zero - b->n) / root;
    double z_below = (double)(2 * b->below - b->n) / root;
    b->z = fabs(z_below) > fabs(z_zero) ? z_below : z_zero;
    b->biased = fabs(b->z) > cc_bias_z_threshold();
}

void cc_compare(const double *expected, const ref_mag *mag, const cc_view *got,
                const cc_bound_model *m, cc_comparison *out)
{
    cc_compare_at(expected, mag, NULL, 0, got, m, out);
}

/* The judging bound (cc_element_judging_bound), whether the probabilistic bound is it, the
 * ratio and the suspect ratio of elements [0, len) of a chunk, as the finite rule of
 * cc_element_ratio_of gives them (|got - expected| / bound); returns how many elements have a
 * value that is not finite (the caller redoes those by the exact rules). No call and no branch
 * per element, so it vectorizes: the same arithmetic per element, the same bits. */
REF_VECTOR_CLONES
static int64_t chunk_ratios(const cc_bound_model *m, const double *restrict e,
                            const double *restrict worst, const double *restrict dtype,
                            const double *restrict prob, const double *restrict g, int64_t len,
                            double out_max, double max_finite, double *restrict bound,
                            double *restrict r, double *restrict rs, int64_t *restrict by_prob)
{
    int64_t nonfinite = 0;
    for (int64_t k = 0; k < len; k++) {
        double b = split_bound(m, worst[k], dtype[k]);
        double sb = split_bound(m, m->lambda * prob[k], dtype[k]);
        double a = fabs(e[k]);
        int64_t use = m->prob_judges & (sb < b) & (a <= DBL_MAX) &
                      vacuous_at(a, b, out_max, max_finite, m);
        double jb = use ? sb : b;
        double err = fabs(g[k] - e[k]);
        bound[k] = jb;
        by_prob[k] = use;
        r[k] = err / jb;
        rs[k] = err / sb;
        nonfinite += !(a <= DBL_MAX) | !(fabs(g[k]) <= DBL_MAX);
    }
    return nonfinite;
}

/* Bit patterns of positive doubles order as (signed) integers, so a maximum over them
 * vectorizes as an integer one (AVX2 compares signed 64-bit lanes); x > 0 keeps NaN and
 * anything not positive out, as `x > max` does in a running maximum that starts at 0. */
static inline int64_t positive_bits(double x)
{
    int64_t b;
    memcpy(&b, &x, sizeof b);
    return x > 0 ? b : 0;
}

static inline double bits_value(int64_t b)
{
    double x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* A chunk's counts (over the bound, finite expected values, vacuous bounds, infinite bounds of
 * finite expected values) and its largest positive ratio and suspect ratio (0 when none is), as
 * bit patterns; vectorizes. */
typedef struct {
    int64_t n_over, n_finite, n_vacuous, n_unbounded, n_prob;
    int64_t r_max, rs_max;
} chunk_tally;

REF_VECTOR_CLONES
static void tally_chunk(const cc_bound_model *m, const double *restrict e,
                        const double *restrict bound, const double *restrict r,
                        const double *restrict rs, const int64_t *restrict by_prob,
                        int64_t len, double out_max, double max_finite, chunk_tally *t)
{
    int64_t n_over = 0, n_finite = 0, n_vacuous = 0, n_unbounded = 0, n_prob = 0;
    int64_t r_max = 0, rs_max = 0;
    for (int64_t k = 0; k < len; k++) {
        double a = fabs(e[k]);
        int finite = a <= DBL_MAX;
        n_over += r[k] > 1.0;
        n_finite += finite;
        n_vacuous += finite & vacuous_at(a, bound[k], out_max, max_finite, m);
        n_unbounded += finite & (bound[k] > DBL_MAX);
        n_prob += by_prob[k];
        int64_t rb = positive_bits(r[k]), sb = positive_bits(rs[k]);
        r_max = rb > r_max ? rb : r_max;
        rs_max = sb > rs_max ? sb : rs_max;
    }
    *t = (chunk_tally){n_over, n_finite, n_vacuous, n_unbounded, n_prob, r_max, rs_max};
}

/* The rounding-bias test's candidates of an output, in the order of their elements. */
typedef struct {
    double e, g;
    int64_t i; /* the element (its place among the compared ones) */
} bias_value;

typedef struct {
    bias_value *v;
    int64_t n;
} bias_values;

static int by_value_then_place(const void *pa, const void *pb)
{
    const bias_value *a = pa, *b = pb;
    if (a->e != b->e)
        return a->e < b->e ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

static int by_place(const void *pa, const void *pb)
{
    const bias_value *a = pa, *b = pb;
    return (a->i > b->i) - (a->i < b->i);
}

/* The test over the distinct expected values among the candidates (the first element of each:
 * a value repeated, by a broadcast gradient or a repeated input, rounds the same way each
 * time and is one observation), counted and their signed errors summed in element order. */
static void bias_tally(bias_values *bv, cc_dtype t, cc_bias *out)
{
    qsort(bv->v, (size_t)bv->n, sizeof *bv->v, by_value_then_place);
    int64_t kept = 0;
    for (int64_t j = 0; j < bv->n; j++)
        if (j == 0 || bv->v[j].e != bv->v[j - 1].e)
            bv->v[kept++] = bv->v[j];
    qsort(bv->v, (size_t)kept, sizeof *bv->v, by_place);
    cc_bias b = {kept, 0, 0, 0.0, 0.0, 0};
    double sum = 0.0;
    for (int64_t j = 0; j < kept; j++) {
        double e = bv->v[j].e, g = bv->v[j].g;
        b.toward_zero += fabs(g) < fabs(e);
        b.below += g < e;
        sum += (g - e) / cc_ulp(t, e) * (e < 0 ? -1.0 : 1.0);
    }
    b.mean_ulp = kept > 0 ? sum / (double)kept : 0.0;
    cc_bias_decide(&b);
    *out = b;
}

void cc_compare_at(const double *expected, const ref_mag *mag, const int64_t *at, int64_t count,
                   const cc_view *got, const cc_bound_model *m, cc_comparison *out)
{
    cc_compare_at_each(expected, mag, at, count, got, m, out, NULL);
}

REF_VECTOR_CLONE_DECLS(chunk_ratios);
REF_VECTOR_CLONE_DECLS(tally_chunk);

/* The two vectorized loops a comparison runs: the dispatched clones, or one ISA's. */
typedef struct {
    __typeof__(chunk_ratios) *ratios;
    __typeof__(tally_chunk) *tally;
} compare_loops;

static void compare_with(const compare_loops *loops, const double *expected, const ref_mag *mag,
                         const int64_t *at, int64_t count, const cc_view *got,
                         const cc_bound_model *m, cc_comparison *out,
                         cc_element_judgement *each);

void cc_compare_at_each(const double *expected, const ref_mag *mag, const int64_t *at,
                        int64_t count, const cc_view *got, const cc_bound_model *m,
                        cc_comparison *out, cc_element_judgement *each)
{
    compare_loops loops = {chunk_ratios, tally_chunk};
    compare_with(&loops, expected, mag, at, count, got, m, out, each);
}

int cc_compare_at_isa(int isa, const double *expected, const ref_mag *mag, const int64_t *at,
                      int64_t count, const cc_view *got, const cc_bound_model *m,
                      cc_comparison *out, cc_element_judgement *each)
{
    if (!ref_isa_runs(isa))
        return -1;
    compare_loops loops = {REF_VECTOR_CLONE(chunk_ratios, isa),
                           REF_VECTOR_CLONE(tally_chunk, isa)};
    compare_with(&loops, expected, mag, at, count, got, m, out, each);
    return 0;
}

static void compare_with(const compare_loops *loops, const double *expected, const ref_mag *mag,
                         const int64_t *at, int64_t count, const cc_view *got,
                         const cc_bound_model *m, cc_comparison *out,
                         cc_element_judgement *each)
{
    int64_t n = 1;
    for (int i = 0; i < got->rank; i++)
        n *= got->shape[i];
    if (at)
        n = count;
    memset(out, 0, sizeof *out);
    out->n = n;
    out->worst_index = n > 0 ? (at ? at[0] : 0) : -1;
    /* on a sampled check, the largest among the picks */
    double out_max = cc_output_own_max(expected, mag->worst, n, m);
    out->own_max = out_max;
    /* a plane the reference did not write is m_i's (cc_element_mag_at) */
    const double *worst = mag->worst, *dtype = mag->dtype ? mag->dtype : mag->worst,
                 *prob = mag->prob ? mag->prob : mag->worst;
    int64_t n_finite = 0, n_unbounded = 0;
    const double max_finite = cc_max_finite(got->dtype);
    bias_values bv = {NULL, 0};
    if (m->bias_test && n > 0 && !(bv.v = malloc(sizeof *bv.v * (size_t)n)))
        out->bias.n = -1; /* no room for the test: the caller says so */
    enum { CHUNK = 256 };
    double g[CHUNK], bound[CHUNK], r[CHUNK], rs[CHUNK], rounded[CHUNK];
    int64_t by_prob[CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t len = n - i0 < CHUNK ? n - i0 : CHUNK;
        const double *e = expected + i0;
        if (at)
            for (int64_t k = 0; k < len; k++)
                g[k] = cc_load(got->dtype, got->data, at[i0 + k]);
        else
            cc_load_array(got->dtype, got->data, i0, 1, g, len);
        if (loops->ratios(m, e, worst + i0, dtype + i0, prob + i0, g, len, out_max, max_finite,
                          bound, r, rs, by_prob))
            for (int64_t k = 0; k < len; k++) { /* the rules of NaN, Inf and overflow */
                if (isfinite(e[k]) && isfinite(g[k]))
                    continue;
                double sbound = split_bound(m, m->lambda * prob[i0 + k], dtype[i0 + k]);
                r[k] = cc_element_ratio_of(e[k], g[k], bound[k], got->dtype, m);
                rs[k] = cc_element_ratio_of(e[k], g[k], sbound, got->dtype, m);
                if (isnan(e[k]) != isnan(g[k]))
                    out->n_nan_mismatch++;
            }
        if (bv.v) { /* the rounding-bias test's candidates */
            memcpy(rounded, e, sizeof(double) * (size_t)len);
            cc_round_array(got->dtype, rounded, len);
            for (int64_t k = 0; k < len; k++)
                if (bias_candidate_rounded(m, (cc_element_mag){worst[i0 + k], dtype[i0 + k],
                                                               prob[i0 + k]},
                                           e[k], g[k], rounded[k], got->dtype))
                    bv.v[bv.n++] = (bias_value){e[k], g[k], i0 + k};
        }
        for (int64_t k = 0; each && k < len; k++)
            each[i0 + k] = (cc_element_judgement){bound[k], r[k], rs[k], (int)by_prob[k]};
        chunk_tally t;
        loops->tally(m, e, bound, r, rs, by_prob, len, out_max, max_finite, &t);
        out->n_over += t.n_over;
        n_finite += t.n_finite;
        out->n_vacuous += t.n_vacuous;
        n_unbounded += t.n_unbounded;
        out->n_prob += t.n_prob;
        if (bits_value(t.rs_max) > out->suspect_ratio)
            out->suspect_ratio = bits_value(t.rs_max);
        /* the worst: element 0 whatever its ratio, then the first element of a ratio larger
         * than every one before it (a NaN never is), as a running maximum keeps it */
        double chunk_max = bits_value(t.r_max);
        if (i0 == 0 || chunk_max > out->worst_ratio) {
            int64_t w = 0;
            if (!(i0 == 0 && isnan(r[0]))) /* else element 0 stays the worst */
                while (w < len - 1 && r[w] != chunk_max)
                    w++;
            out->worst_ratio = r[w];
            out->worst_index = at ? at[i0 + w] : i0 + w;
            out->expected = e[w];
            out->got = g[w];
            out->bound = bound[w];
            out->magnitude = worst[i0 + w];
            out->worst_by_prob = (int)by_prob[w];
        }
    }
    out->vacuous = cc_output_is_vacuous(n, n_finite, out->n_vacuous, n_unbounded);
    if (bv.v)
        bias_tally(&bv, got->dtype, &out->bias);
    free(bv.v);
}
