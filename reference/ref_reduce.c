/* Reductions (ops.md E): the axis is dropped (keepdim false) and must be nonempty.
 *
 * Error model: a length-n sum in any order (ATen's cascade, a GPU tree) is within
 * (n - 1) u sum|x| of the exact sum, plus u|y| for the final rounding; m_i = n * sum|x|, c = 1.
 * The VJP is a broadcast copy: exact, m_i = |g|.
 * reduceMean y = s / n: the sum's error divided by n, (n - 1)/n u sum|x| < u sum|x|, then the
 * division (TorchLean) or the multiply by a rounded 1/n (its LibTorch capsule, ATen) adds at
 * most 2u|y|: m_i = sum|x| + 2|y|, c = 1 (the (n-1)/n factor leaves u sum|x|/n >= u|y| of
 * slack for second-order terms). Its VJP g/n (or g * fl(1/n)) is within 2u|g/n|: m_i = |g|/n,
 * c = 2.
 * Strict f16/bf16 (ref.h): the sum runs in float32 and the result is rounded to the dtype once:
 * dtype_i = |y|. prob: the sum's probabilistic magnitude P (ref_sum_prob: sqrt(n) sum|x|, or
 * the smaller exchangeable form), and P / n + 2|y| for the mean. The VJPs are pointwise (no
 * split).
 * The sums are compensated (ref_sum): the oracle's own error is 2^-53 |y| + gamma_n^2 sum|x|
 * (REF_COMPENSATED_FWD), not the (n - 1) 2^-53 sum|x| of a plain fold; the mean's division adds
 * another 2^-53 |y|, within the 2^-53 sum|x| / n >= 2^-53 |y| its m_i leaves spare. */
#include "ref_families.h"

#include <math.h>

static ref_status reduce_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                               ref_err *e)
{
    (void)n;
    int ax = ref_norm_axis(p->axis, in[0].rank);
    if (in[0].rank == 0 || ax < 0)
        return ref_err_set(e, "axis %d is out of range for rank %d", p->axis, in[0].rank);
    if (in[0].dim[ax] == 0)
        return ref_err_set(e, "axis %d is empty (TorchLean requires a nonempty reduction axis)",
                           p->axis);
    out->rank = in[0].rank - 1;
    for (int i = 0, j = 0; i < in[0].rank; i++)
        if (i != ax)
            out->dim[j++] = in[0].dim[i];
    return REF_OK;
}

static ref_status sample_reduce(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                ref_shape *in)
{
    ref_status st = ref_sample_with_axis(r, req, 0, &in[0], &p->axis);
    if (st != REF_OK)
        return st;
    int rank = in[0].rank;
    if (req->zero_dim) {
        if (rank < 2)
            return REF_ENOTAPPLICABLE; /* the reduced axis itself may not be empty */
        int z = (int)ref_rng_range(r, 0, rank - 2);
        in[0].dim[z >= p->axis ? z + 1 : z] = 0;
    }
    *n = 1;
    return REF_OK;
}

/* The compensated sum of x[o, j, i] over j, in increasing j. */
static ref_sum axis_sum(const ref_tensor *x, ref_axis_split a, int64_t o, int64_t i)
{
    ref_sum s = {0};
    for (int64_t j = 0; j < a.len; j++)
        ref_sum_add(&s, x->v[(o * a.len + j) * a.inner + i]);
    return s;
}

/* reduceSum: y[o, i] = sum over j of x[o, j, i]. */
static ref_status reduce_sum_fwd(const ref_params *p, int n, const ref_tensor *in,
                                 ref_tensor *out, const ref_mag *mags)
{
    (void)n;
    ref_axis_split a = ref_split_param_axis(p, &in[0].shape);
    for (int64_t o = 0; o < a.outer; o++)
        for (int64_t i = 0; i < a.inner; i++) {
            ref_sum s = axis_sum(&in[0], a, o, i);
            double y = ref_sum_value(&s, p->plain_sums);
            out->v[o * a.inner + i] = y;
            if (mags)
                ref_mag_set(mags, o * a.inner + i, (double)a.len * s.abs, fabs(y),
                            ref_sum_prob(&s));
        }
    return REF_OK;
}

/* reduceSum VJP: dx[o, j, i] = g[o, i]. */
static ref_status reduce_sum_vjp(const ref_params *p, int n, const ref_tensor *in,
                                 const ref_tensor *y, const ref_tensor *g, ref_tensor *grad,
                                 const ref_mag *gmag)
{
    (void)n;
    (void)y;
    if (!grad[0].v)
        return REF_OK;
    ref_axis_split a = ref_split_param_axis(p, &in[0].shape);
    for (int64_t o = 0; o < a.outer; o++)
        for (int64_t j = 0; j < a.len; j++)
            for (int64_t i = 0; i < a.inner; i++) {
                int64_t k = (o * a.len + j) * a.inner + i;
                grad[0].v[k] = g->v[o * a.inner + i];
                if (gmag && gmag[0].worst)
                    gmag[0].worst[k] = fabs(grad[0].v[k]);
            }
    return REF_OK;
}

/* reduceMean: y[o, i] = (sum over j of x[o, j, i]) / n, n = axis extent >= 1. */
static ref_status reduce_mean_fwd(const ref_params *p, int n, const ref_tensor *in,
                                  ref_tensor *out, const ref_mag *mags)
{
    (void)n;
    ref_axis_split a = ref_split_param_axis(p, &in[0].shape);
    for (int64_t o = 0; o < a.outer; o++)
        for (int64_t i = 0; i < a.inner; i++) {
            ref_sum s = axis_sum(&in[0], a, o, i);
            /* division, as TorchLean (not a reciprocal multiply) */
            double y = ref_sum_value(&s, p->plain_sums) / (double)a.len;
            out->v[o * a.inner + i] = y;
            if (mags)
                ref_mag_set(mags, o * a.inner + i, s.abs + 2.0 * fabs(y), fabs(y),
                            ref_sum_prob(&s) / (double)a.len + 2.0 * fabs(y));
        }
    return REF_OK;
}

/* reduceMean VJP: dx[o, j, i] = g[o, i] / n. */
static ref_status reduce_mean_vjp(const ref_params *p, int n, const ref_tensor *in,
                                  const ref_tensor *y, const ref_tensor *g, ref_tensor *grad,
                                  const ref_mag *gmag)
{
    (void)n;
    (void)y;
    if (!grad[0].v)
        return REF_OK;
    ref_axis_split a = ref_split_param_axis(p, &in[0].shape);
    for (int64_t o = 0; o < a.outer; o++)
        for (int64_t j = 0; j < a.len; j++)
            for (int64_t i = 0; i < a.inner; i++) {
                int64_t k = (o * a.len + j) * a.inner + i;
                grad[0].v[k] = g->v[o * a.inner + i] / (double)a.len;
                if (gmag && gmag[0].worst)
                    gmag[0].worst[k] = fabs(grad[0].v[k]);
            }
    return REF_OK;
}

const ref_op ref_family_reduce[] = {
    {.name = "reduceSum", .report_name = "reduce_sum", .min_inputs = 1, .max_inputs = 1,
     .input_names = {"x"}, .params = REF_P_AXIS, .requires_vjp = 1, .c_fwd = 1, .c_vjp = 1,
     .compensated = REF_COMPENSATED_FWD, .shape = reduce_shape, .forward = reduce_sum_fwd,
     .vjp = reduce_sum_vjp,
     .sample = sample_reduce},
    {.name = "reduceMean", .report_name = "reduce_mean", .min_inputs = 1, .max_inputs = 1,
     .input_names = {"x"}, .params = REF_P_AXIS, .requires_vjp = 1, .c_fwd = 1, .c_vjp = 2,
     .compensated = REF_COMPENSATED_FWD,
     .note = "the axis must be nonempty (ATen's mean of an empty axis is NaN); TorchLean divides "
             "by n, its LibTorch capsule multiplies by float32 1/n",
     .shape = reduce_shape, .forward = reduce_mean_fwd, .vjp = reduce_mean_vjp,
     .sample = sample_reduce},
};
const int ref_family_reduce_count = (int)(sizeof ref_family_reduce / sizeof ref_family_reduce[0]);
