/* Edge-value classes: where their values go and which values (the table in edge_class.h). */
#include "harness/case/edges.h"

#include <math.h>

#include "core/dtype.h"
#include "harness/case/edge_class.h"
#include "harness/case/values.h"

/* The stream that picks edge positions and values, apart from the stream of ordinary values. */
static uint64_t edge_key(uint64_t seed, int input, int cls)
{
    return ref_splitmix64(cc_input_key(seed, input) ^ (0xed6e0000ULL + (uint64_t)cls));
}

/* Element j of stream k is picked with probability `share`; at least one of n is. */
static int picked(uint64_t k, int64_t j, int64_t n, double share)
{
    return cc_uniform_at(k, 2 * j) < share || j == (int64_t)(ref_splitmix64(k) % (uint64_t)n);
}

/* The tie set of a domain: small values exact in every dtype, plus the op's kinks. */
static int tie_values(const ref_domain *d, double *v)
{
    static const double normal[] = {-1.0, -0.5, 0.0, 0.5, 1.0};
    static const double positive[] = {0.5, 1.0, 2.0};
    static const double unit[] = {0.25, 0.5, 0.75};
    const double *base = normal;
    int n = 5;
    if (d->kind == REF_DOM_POSITIVE) {
        base = positive;
        n = 3;
    } else if (d->kind == REF_DOM_UNIT) {
        base = unit;
        n = 3;
    }
    for (int k = 0; k < n; k++)
        v[k] = base[k];
    for (int a = 0; a < d->n_avoid && a < 2; a++)
        v[n++] = d->avoid[a];
    return n;
}

/* One edge value of class cls for dtype t; u in [0,1) picks it, sign_u its sign. */
static double edge_value(int cls, cc_dtype t, const ref_domain *d, double u, double sign_u)
{
    double sign = d->kind == REF_DOM_POSITIVE || d->kind == REF_DOM_UNIT || sign_u < 0.5 ? 1.0
                                                                                         : -1.0;
    switch (cls) {
    case CC_EDGE_NAN:
        return NAN;
    case CC_EDGE_INF:
        return sign * INFINITY;
    case CC_EDGE_SIGNED_ZERO:
        return sign * 0.0;
    case CC_EDGE_SUBNORMAL: /* [2^-6, 1) x the smallest normal: a nonzero subnormal of every
                               dtype once rounded (bf16 keeps 7 bits below it) */
        return sign * cc_smallest_normal(t) * (0x1p-6 + (1.0 - 0x1p-6) * u);
    case CC_EDGE_HUGE: /* |x| in [M^(1/3)/4, M^(1/3)), M the largest finite value */
        return sign * cbrt(cc_max_finite(t)) * (0.25 + 0.75 * u);
    case CC_EDGE_MODERATE: /* |x| in [10, 100), log-uniform */
        return sign * 10.0 * pow(10.0, u);
    default:
        return 0.0;
    }
}

/* wide: the values of input i (kind from the table in edge_class.h), from stream k. */
static void wide_inject(const cc_case *c, int i, const ref_shape *s, double *x, int64_t n,
                        uint64_t k)
{
    cc_dtype t = c->dtype;
    double T = cc_wide_exp_limit(t), sign = cc_uniform_at(k ^ 0x5151, 0) < 0.5 ? 1.0 : -1.0;
    switch (cc_wide_kind_of(c->op, t, i)) {
    case CC_WIDE_LOGITS: /* one offset: a max-subtracting softmax gives the same weights */
        for (int64_t j = 0; j < n; j++)
            x[j] += sign * T * (1.0 + 0.5 * cc_uniform_at(k, 0));
        break;
    case CC_WIDE_SUM: /* one offset: the mean fits, the sum of 32 or more terms does not */
        for (int64_t j = 0; j < n; j++)
            x[j] += sign * 1024.0 * (1.0 + cc_uniform_at(k, 0));
        break;
    case CC_WIDE_SQUARES: /* a spread of 512 to 1024: most squares past 65504 */
        for (int64_t j = 0; j < n; j++)
            x[j] *= 512.0 * (1.0 + cc_uniform_at(k, 0));
        break;
    case CC_WIDE_EXP_ARGS:
    case CC_WIDE_SQUARE_SUM: {
        int args = cc_wide_kind_of(c->op, t, i) == CC_WIDE_EXP_ARGS;
        for (int64_t j = 0; j < n; j++)
            if (picked(k, j, n, args ? 0.25 : 1.0 / 32))
                x[j] = (cc_uniform_at(k ^ 0x5151, j + 1) < 0.5 ? 1.0 : -1.0) *
                       (args ? T * (1.0 + cc_uniform_at(k, 2 * j + 1))
                             : 256.0 + 44.0 * cc_uniform_at(k, 2 * j + 1));
        break;
    }
    case CC_WIDE_SCORES: {
        /* every row (last axis) of q and of k one value +-W: every score is +-W^2 sqrt(d), the
         * same bits in every key of a row, so a correct kernel's rounding of S ties exactly as
         * the exact scores do (its weights stay exact); W^2 sqrt(d) = 58,950 in f16 (the
         * unscaled q.k past 65504 from d = 2), 1.5 T elsewhere (exp past its overflow where a
         * kernel does not subtract the row's max) */
        int64_t d = s->rank > 0 && s->dim[s->rank - 1] > 0 ? s->dim[s->rank - 1] : 1;
        double top = t == CC_F16 ? 0.9 * 65504.0 : 1.5 * T, w = sqrt(top / sqrt((double)d));
        for (int64_t j = 0; j < n; j++)
            x[j] = (cc_uniform_at(k ^ 0x5151, j / d + 1) < 0.5 ? 1.0 : -1.0) * w;
        break;
    }
    default:
        break;
    }
}

void cc_edge_inject(const cc_case *c, int i, const ref_domain *d, const ref_shape *s, double *x,
                    int64_t n)
{
    if (n <= 0)
        return;
    cc_dtype t = c->dtype;
    for (int cls = 0; cls < CC_EDGE_COUNT; cls++) {
        if (!(c->edges >> cls & 1) || !cc_edge_input_takes(c->op, t, i, d, cls))
            continue;
        uint64_t k = edge_key(c->seed, i, cls);
        if (cls == CC_EDGE_WIDE) {
            wide_inject(c, i, s, x, n, k);
        } else if (cls == CC_EDGE_MASKED_ROW) { /* block whole rows along the last axis */
            int64_t len = s->rank > 0 && s->dim[s->rank - 1] > 0 ? s->dim[s->rank - 1] : 1;
            int64_t rows = n / len;
            for (int64_t r = 0; r < rows; r++)
                if (picked(k, r, rows, 0.25))
                    for (int64_t j = 0; j < len; j++)
                        x[r * len + j] = 0.0;
        } else if (cls == CC_EDGE_LARGE_MEAN) { /* one offset for the whole input */
            static const int half_precision[] = {26, 12, 6, 4}; /* f64 f32 f16 bf16 */
            int bits = t <= CC_BF16 ? half_precision[t] : 12;
            double sign = d->kind == REF_DOM_POSITIVE || cc_uniform_at(k ^ 0x5151, 0) < 0.5 ? 1.0
                                                                                              : -1.0;
            double offset = sign * ldexp(1.0 + cc_uniform_at(k, 0), bits);
            for (int64_t j = 0; j < n; j++)
                x[j] += offset;
        } else if (cls == CC_EDGE_TIES) { /* every value from the tie set */
            double v[7];
            int nv = tie_values(d, v);
            for (int64_t j = 0; j < n; j++)
                x[j] = v[(int)(cc_uniform_at(k, 2 * j) * nv)];
        } else {
            double share = cls == CC_EDGE_SIGNED_ZERO || cls == CC_EDGE_SUBNORMAL ? 0.25 : 1.0 / 16;
            for (int64_t j = 0; j < n; j++)
                if (picked(k, j, n, share))
                    x[j] = edge_value(cls, t, d, cc_uniform_at(k, 2 * j + 1),
                                      cc_uniform_at(k ^ 0x5151, j));
        }
    }
}
