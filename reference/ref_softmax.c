/* Softmax family (ops.md D). softmax, logSoftmax and topKMask take any axis; hardMaskedSoftmax
 * works on the last axis (TorchLean recurses over the outer axes). Each slice is independent.
 *
 * Error model (derived once, used by softmax and logSoftmax). In a dtype with unit roundoff u,
 * a provider computing d_i = x_i - m, e_i = exp(d_i), s = sum e, y_i = e_i / s has
 *   rel err(e_i) <= u (|d_i| + 2)                      (rounding of d_i, then exp to ~1 ulp)
 *   rel err(s)   <= (n - 1) u + sum_j y_j u (|d_j| + 2) (any summation order)
 *   rel err(y_i) <= u + rel err(e_i) + rel err(s).
 * So m_i = y_i (3 + |d_i| + (n - 1) + sum_j y_j (|d_j| + 2)) and c = 2 for second-order slack.
 * logSoftmax y_i = d_i - log s: |err| <= u|d_i| + rel err(s) + u|log s| + u|y_i|.
 * hardMaskedSoftmax uses softmax's model with n = the allowed count of the row; its blocked
 * entries are exact zeros (m_i = 0). topKMask's 0/1 output is exact (m_i = 0, bound = floor).
 *
 * Strict f16/bf16 (ref.h): the exponentials, the denominator and the division run in float32;
 * the numerators may be stored in the dtype before the division (ATen's CPU kernel uses the
 * output as its scratch: errors up to 1.8 u|y| seen in bf16): dtype = 2|y|. ATen's logSoftmax stores the log-sum-exp max + log s in the
 * dtype before subtracting it (seen on CPU: y = x - fl(max + log s)), the denominator's one
 * rounding: dtype = |max + log s| + |log s| + 1 + |y|. The VJPs run on the forward's output as
 * stored in the dtype (ATen's backward kernels take it): their dtype share is that rounding
 * carried through (the softmax VJP: y_i (|g_i - <g, y>| + sum_j |g_j| y_j); logSoftmax's:
 * exp(y_i) |sum g| times the forward's dtype share) plus |dx|. prob: n - 1 (and n) become their
 * square roots, in the forward factors too.
 * The denominator s and the VJPs' sums <g, y> and sum g are compensated (ref_sum). */
#include "ref_families.h"

#include <math.h>
#include <stdlib.h>

static ref_status axis_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                             ref_err *e)
{
    (void)n;
    if (in[0].rank > 0 && ref_norm_axis(p->axis, in[0].rank) < 0)
        return ref_err_set(e, "axis %d is out of range for rank %d", p->axis, in[0].rank);
    *out = in[0];
    return REF_OK;
}

static ref_status sample_axis(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                              ref_shape *in)
{
    int rank = req->rank >= 0 ? req->rank : (int)ref_rng_range(r, 1, 3);
    if (rank == 0 && req->zero_dim)
        return REF_ENOTAPPLICABLE; /* a scalar has no dimension to empty */
    ref_sample_shape(r, rank, req->max_elems, req->zero_dim, &in[0]);
    p->axis = rank > 0 ? (int)ref_rng_range(r, 0, rank - 1) : 0;
    if (rank > 0 && ref_rng_range(r, 0, 2) == 0)
        p->axis -= rank; /* negative axes are part of the contract */
    *n = 1;
    return REF_OK;
}

/* Per-slice statistics shared by forward and error model. */
typedef struct {
    double max, sum, spread; /* spread = sum_j y_j (|d_j| + 2) over the allowed j */
    int64_t allowed;         /* allowed entries (the whole slice when there is no mask) */
} slice_stats;

static int is_allowed(const double *mask, int64_t k)
{
    return mask == NULL || mask[k] != 0.0; /* TorchLean's CUDA buffer: allowed <=> value != 0 */
}

/* One slice x[j * stride], j < len (mask likewise; NULL = every entry allowed):
 * m = max over the allowed entries (strict-> fold seeded with the first allowed one);
 * numerator e_j = exp(x_j - m) if allowed, exactly 0 if blocked; y_j = e_j / sum_j e_j for every
 * j (ordinary arithmetic: a NaN sum makes the blocked entries NaN too). No allowed entry: y = 0. */
static slice_stats slice_softmax(const double *x, const double *mask, int64_t len,
                                 int64_t stride, double *y, int plain)
{
    slice_stats st = {0.0, 0.0, 0.0, 0};
    for (int64_t j = 0; j < len; j++)
        if (is_allowed(mask, j * stride)) {
            if (st.allowed == 0 || x[j * stride] > st.max)
                st.max = x[j * stride];
            st.allowed++;
        }
    if (st.allowed == 0) { /* fully blocked row -> zeros */
        for (int64_t j = 0; j < len; j++)
            y[j * stride] = 0.0;
        return st;
    }
    ref_sum sum = {0};
    for (int64_t j = 0; j < len; j++) {
        y[j * stride] = is_allowed(mask, j * stride) ? exp(x[j * stride] - st.max) : 0.0;
        ref_sum_add(&sum, y[j * stride]);
    }
    st.sum = ref_sum_value(&sum, plain);
    for (int64_t j = 0; j < len; j++) {
        y[j * stride] /= st.sum;
        if (is_allowed(mask, j * stride))
            st.spread += ref_mag_prod(y[j * stride], fabs(x[j * stride] - st.max) + 2.0);
    }
    return st;
}

/* softmax: y = exp(x - max) / sum exp(x - max) per slice; n = 0 slice unchanged; scalar -> 1.
 * With a mask (hardMaskedSoftmax) the scalar is 1 if allowed else 0, blocked entries are exactly
 * 0 (m_i = 0) and the error model's n is the number of allowed entries. */
static ref_status softmax_core(const ref_tensor *x, const double *mask, int axis,
                               ref_tensor *out, const ref_mag *mags, int log_form, int plain)
{
    const ref_shape *s = &x->shape;
    if (s->rank == 0) {
        out->v[0] = log_form ? 0.0 : (is_allowed(mask, 0) ? 1.0 : 0.0);
        if (mags)
            mags->worst[0] = log_form ? 1.0 : out->v[0];
        return REF_OK;
    }
    ref_axis_split a = ref_split_axis(s, axis);
    if (a.len == 0)
        return REF_OK;
    for (int64_t o = 0; o < a.outer; o++)
        for (int64_t i = 0; i < a.inner; i++) {
            int64_t base = o * a.len * a.inner + i;
            const double *xs = x->v + base;
            const double *ms = mask ? mask + base : NULL;
            double *y = out->v + base;
            slice_stats st = slice_softmax(xs, ms, a.len, a.inner, y, plain);
            double ls = log_form ? log(st.sum) : 0.0; /* once per slice */
            double len = (double)(st.allowed - 1);
            double rel_s = len + st.spread, rel_sp = sqrt(len > 0 ? len : 0) + st.spread;
            for (int64_t j = 0; j < a.len; j++) {
                double d = fabs(xs[j * a.inner] - st.max);
                int64_t k = base + j * a.inner;
                if (!log_form) {
                    double yk = y[j * a.inner];
                    int on = is_allowed(ms, j * a.inner); /* then st.allowed > 0 */
                    if (mags)
                        ref_mag_set(mags, k, on ? ref_mag_prod(yk, 3.0 + d + rel_s) : 0.0,
                                    on ? 2.0 * fabs(yk) : 0.0,
                                    on ? ref_mag_prod(yk, 3.0 + d + rel_sp) : 0.0);
                } else {
                    double yl = (xs[j * a.inner] - st.max) - ls; /* never log(softmax) */
                    y[j * a.inner] = yl;
                    if (mags)
                        ref_mag_set(mags, k, d + rel_s + fabs(ls) + fabs(yl) + 1.0,
                                    fabs(st.max + ls) + fabs(ls) + fabs(yl) + 1.0,
                                    d + rel_sp + fabs(ls) + fabs(yl) + 1.0);
                }
            }
        }
    return REF_OK;
}

static ref_status softmax_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                              const ref_mag *mags)
{
    (void)n;
    return softmax_core(&in[0], NULL, ref_norm_axis(p->axis, in[0].shape.rank), out, mags, 0,
                        p->plain_sums);
}

static ref_status log_softmax_fwd(const ref_params *p, int n, const ref_tensor *in,
                                  ref_tensor *out, const ref_mag *mags)
{
    (void)n;
    return softmax_core(&in[0], NULL, ref_norm_axis(p->axis, in[0].shape.rank), out, mags, 1,
                        p->plain_sums);
}

/* softmax VJP: dx = y * (g - <g, y>) per slice.
 * Error: dot has (n-1)u sum|g y| + sum |g_j| |dy_j|; with dy_j <= u y_j F_j (forward factor),
 * m_i = |dx_i| + y_i (|g_i - dot| + (n-1) sum|g_j y_j| + sum|g_j| y_j F_j) + |g_i - dot| y_i F_i.
 * With a mask the same formula runs on the masked output: a blocked entry has y = 0, hence
 * dx = 0 and m = 0 for finite g (IEEE: 0 * Inf = NaN is kept, as in TorchLean's capsule, which
 * runs the plain row-softmax backward on the output). */
static ref_status softmax_vjp_core(const ref_tensor *x, const double *mask, int axis,
                                   const ref_tensor *y, const ref_tensor *g, double *dx,
                                   const ref_mag *mag, int plain)
{
    const ref_shape *s = &x->shape;
    if (s->rank == 0) { /* the output is constant (1, 0 or 1-if-allowed) */
        dx[0] = 0.0;
        if (mag)
            mag->worst[0] = 0.0;
        return REF_OK;
    }
    ref_axis_split a = ref_split_axis(s, axis);
    size_t n = (size_t)(ref_numel(s) + 1);
    /* the forward's worst and prob magnitudes: y_k F_k and y_k Fp_k */
    ref_mag fwd = {mag ? malloc(sizeof(double) * n) : NULL, NULL,
                   mag ? malloc(sizeof(double) * n) : NULL};
    ref_tensor tmp = {*s, mag ? malloc(sizeof(double) * n) : NULL};
    if (mag && (!fwd.worst || !fwd.prob || !tmp.v)) {
        free(fwd.worst), free(fwd.prob), free(tmp.v);
        return REF_ENOMEM;
    }
    if (mag)
        softmax_core(x, mask, axis, &tmp, &fwd, 0, plain);
    free(tmp.v);
    double rows = (double)(a.len - 1);
    for (int64_t o = 0; o < a.outer; o++)
        for (int64_t i = 0; i < a.inner; i++) {
            int64_t base = o * a.len * a.inner + i;
            double prop = 0.0, prop_p = 0.0, prop_dt = 0.0;
            ref_sum gy = {0};
            for (int64_t j = 0; j < a.len; j++) {
                int64_t k = base + j * a.inner;
                ref_sum_add_prod(&gy, g->v[k], y->v[k]);
                if (mag) {
                    prop += fabs(g->v[k]) * fwd.worst[k];
                    prop_p += fabs(g->v[k]) * fwd.prob[k];
                    prop_dt += fabs(g->v[k]) * y->v[k];
                }
            }
            double dot = ref_sum_value(&gy, plain), dot_abs = gy.abs;
            for (int64_t j = 0; j < a.len; j++) {
                int64_t k = base + j * a.inner;
                double c = g->v[k] - dot, yk = y->v[k];
                dx[k] = yk * c;
                if (!mag)
                    continue;
                if (!(yk > 0)) {
                    ref_mag_set(mag, k, 0.0, 0.0, 0.0);
                    continue;
                }
                double F = fwd.worst[k] / yk, Fp = fwd.prob[k] / yk;
                ref_mag_set(mag, k,
                            fabs(dx[k]) + yk * (fabs(c) + rows * dot_abs + prop) + fabs(c) * yk * F,
                            fabs(dx[k]) + yk * (fabs(c) + prop_dt),
                            fabs(dx[k]) + yk * (fabs(c) + sqrt(rows) * dot_abs + prop_p) +
                                fabs(c) * yk * Fp);
            }
        }
    free(fwd.worst), free(fwd.prob);
    return REF_OK;
}

static ref_status softmax_vjp(const ref_params *p, int n, const ref_tensor *in,
                              const ref_tensor *y, const ref_tensor *g, ref_tensor *grad,
                              const ref_mag *gmag)
{
    (void)n;
    if (!grad[0].v)
        return REF_OK;
    return softmax_vjp_core(&in[0], NULL, ref_norm_axis(p->axis, in[0].shape.rank), y, g,
                            grad[0].v, gmag && gmag[0].worst ? &gmag[0] : NULL, p->plain_sums);
}

/* logSoftmax VJP from the saved output: dx = g - exp(y) * sum g.
 * Error: sum g has (n-1)u sum|g|; exp(y) has rel err <= u(|y| + F) with F the forward bound;
 * m_i = |g_i| + |dx_i| + p_i ((n-1) sum|g| + |sum g| (|y_i| + F_i + 2)), p_i = exp(y_i). */
static ref_status log_softmax_vjp(const ref_params *p, int n, const ref_tensor *in,
                                  const ref_tensor *y, const ref_tensor *g, ref_tensor *grad,
                                  const ref_mag *gmag)
{
    (void)n;
    if (!grad[0].v)
        return REF_OK;
    const ref_shape *s = &in[0].shape;
    double *mag = gmag ? gmag[0].worst : NULL;
    if (s->rank == 0) {
        grad[0].v[0] = 0.0; /* scalar: y is constant 0 */
        if (mag)
            mag[0] = 0.0;
        return REF_OK;
    }
    ref_axis_split a = ref_split_param_axis(p, s);
    if (a.len == 0)
        return REF_OK; /* empty slices: no gradient to write */
    for (int64_t o = 0; o < a.outer; o++)
        for (int64_t i = 0; i < a.inner; i++) {
            int64_t base = o * a.len * a.inner + i;
            double mx = in[0].v[base];
            ref_sum gs = {0};
            for (int64_t j = 0; j < a.len; j++) {
                ref_sum_add(&gs, g->v[base + j * a.inner]);
                mx = fmax(mx, in[0].v[base + j * a.inner]);
            }
            double sum = ref_sum_value(&gs, p->plain_sums), sum_abs = gs.abs;
            /* the forward's log-sum-exp max + log s = x_k - y_k (any k), stored in the dtype */
            double lse = in[0].v[base] - y->v[base], len = (double)a.len;
            for (int64_t j = 0; j < a.len; j++) {
                int64_t k = base + j * a.inner;
                double pk = exp(y->v[k]), gk = fabs(g->v[k]);
                grad[0].v[k] = g->v[k] - pk * sum;
                double dx = fabs(grad[0].v[k]), ay = fabs(y->v[k]);
                if (mag)
                    ref_mag_set(&gmag[0], k,
                                gk + dx + pk * (len * sum_abs + fabs(sum) * (ay + len + 4.0)),
                                dx + pk * fabs(sum) *
                                         (fabs(lse) + fabs(lse - mx) + 1.0 + ay),
                                gk + dx +
                                    pk * (sqrt(len) * sum_abs +
                                          fabs(sum) * (ay + sqrt(len) + 4.0)));
            }
        }
    return REF_OK;
}

/* ---- hardMaskedSoftmax (ops.md D): last axis, mask true (nonzero) = allowed --------------- */

static ref_status masked_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                               ref_err *e)
{
    (void)p;
    if (n != 2)
        return ref_err_set(e, "hardMaskedSoftmax takes 2 inputs (x, mask), got %d", n);
    if (!ref_shape_eq(&in[0], &in[1])) {
        char a[96], b[96];
        ref_shape_fmt(&in[0], a, sizeof a);
        ref_shape_fmt(&in[1], b, sizeof b);
        return ref_err_set(e, "mask has shape %s but x has %s (the mask must match x)", b, a);
    }
    *out = in[0];
    return REF_OK;
}

/* y = softmax over the last axis of x restricted to the allowed entries (see slice_softmax):
 * blocked entries are exactly 0, a fully blocked row is all zeros, a scalar is 1 if allowed
 * else 0. Error model: softmax's, with n = the number of allowed entries of the row. */
static ref_status masked_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                             const ref_mag *mags)
{
    (void)p;
    (void)n;
    return softmax_core(&in[0], in[1].v, in[0].shape.rank - 1, out, mags, 0, p->plain_sums);
}

/* dx = y * (g - <g, y>) per row at the masked output (the mask is constant, no gradient). */
static ref_status masked_vjp(const ref_params *p, int n, const ref_tensor *in,
                             const ref_tensor *y, const ref_tensor *g, ref_tensor *grad,
                             const ref_mag *gmag)
{
    (void)n;
    if (!grad[0].v)
        return REF_OK;
    return softmax_vjp_core(&in[0], in[1].v, in[0].shape.rank - 1, y, g, grad[0].v,
                            gmag && gmag[0].worst ? &gmag[0] : NULL, p->plain_sums);
}

static ref_status sample_masked(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                ref_shape *in)
{
    (void)p;
    if (req->rank == 0 && req->zero_dim)
        return REF_ENOTAPPLICABLE; /* a scalar has no dimension to empty */
    return ref_sample_same_shapes(r, req, 2, n, in);
}

/* ---- topKMask: Proposal (not in TorchLean) ------------------------------------------------- */

static void topk_defaults(ref_params *p)
{
    p->axis = -1; /* default: last axis */
    p->k = 1;
}

static ref_status topk_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                             ref_err *e)
{
    if (p->k < 0)
        return ref_err_set(e, "k must be >= 0, got %lld", (long long)p->k);
    return axis_shape(p, n, in, out, e);
}

/* y_j = 1 if fewer than k entries of its slice beat x_j, else 0, where x_i beats x_j when
 * x_i > x_j, or x_i == x_j and i < j (ties go to the lower index). So k = 0 gives zeros and
 * k >= n ones; a scalar is one slice of length 1. NaN compares false (it beats nothing and
 * nothing beats it); case generators keep NaN out. The output is exact: m_i = 0. */
static ref_status topk_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                           const ref_mag *mags)
{
    double *mag = ref_mag_worst(mags);
    (void)n;
    const ref_shape *s = &in[0].shape;
    ref_axis_split a = {1, 1, 1};
    if (s->rank > 0)
        a = ref_split_param_axis(p, s);
    for (int64_t o = 0; o < a.outer; o++)
        for (int64_t i = 0; i < a.inner; i++) {
            const double *x = in[0].v + o * a.len * a.inner + i;
            double *y = out->v + o * a.len * a.inner + i;
            for (int64_t j = 0; j < a.len; j++) {
                int64_t beaten_by = 0;
                for (int64_t l = 0; l < a.len; l++)
                    if (x[l * a.inner] > x[j * a.inner] ||
                        (x[l * a.inner] == x[j * a.inner] && l < j))
                        beaten_by++;
                y[j * a.inner] = beaten_by < p->k ? 1.0 : 0.0;
                if (mag)
                    mag[(o * a.len + j) * a.inner + i] = 0.0;
            }
        }
    return REF_OK;
}

/* requiresVJP is false (the mask is piecewise constant); if a VJP is asked for, it is zero. */
static ref_status topk_vjp(const ref_params *p, int n, const ref_tensor *in, const ref_tensor *y,
                           const ref_tensor *g, ref_tensor *grad, const ref_mag *gmag)
{
    (void)p;
    (void)n;
    (void)y;
    (void)g;
    if (!grad[0].v)
        return REF_OK;
    int64_t N = ref_numel(&in[0].shape);
    for (int64_t i = 0; i < N; i++) {
        grad[0].v[i] = 0.0;
        if (gmag && gmag[0].worst)
            gmag[0].worst[i] = 0.0;
    }
    return REF_OK;
}

/* Providers leave the tie order unspecified (ATen topk), so generated inputs are tie-free;
 * the lower-index tie rule has its own exact test. */
static void topk_domain(const ref_params *p, int n, const ref_shape *in, int i, ref_domain *d)
{
    (void)p, (void)n, (void)in, (void)i;
    d->kind = REF_DOM_DISTINCT;
}

static ref_status sample_topk(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                              ref_shape *in)
{
    ref_status st = sample_axis(r, req, p, n, in);
    if (st != REF_OK)
        return st;
    int64_t len = in[0].rank > 0 ? in[0].dim[ref_norm_axis(p->axis, in[0].rank)] : 1;
    p->k = ref_rng_range(r, 0, len + 1); /* includes k = 0 and k > n */
    return REF_OK;
}

const ref_op ref_family_softmax[] = {
    {.name = "logSoftmax", .report_name = "log_softmax", .min_inputs = 1, .max_inputs = 1,
     .input_names = {"x"}, .params = REF_P_AXIS, .requires_vjp = 1, .c_fwd = 2, .c_vjp = 2,
     .shape = axis_shape, .forward = log_softmax_fwd, .vjp = log_softmax_vjp,
     .sample = sample_axis},
    {.name = "softmax", .report_name = "softmax", .min_inputs = 1, .max_inputs = 1,
     .input_names = {"x"}, .params = REF_P_AXIS, .requires_vjp = 1, .c_fwd = 2, .c_vjp = 2,
     .shape = axis_shape, .forward = softmax_fwd, .vjp = softmax_vjp, .sample = sample_axis},
    {.name = "hardMaskedSoftmax", .report_name = "hard_masked_softmax", .min_inputs = 2,
     .max_inputs = 2, .input_names = {"x", "mask"}, .input_kind = {REF_IN_DATA, REF_IN_MASK},
     .requires_vjp = 1, .c_fwd = 2, .c_vjp = 2,
     .note = "last axis; mask true = allowed; a fully blocked row gives zeros (softmax of a "
             "-inf-filled row in ATen gives NaN)",
     .shape = masked_shape, .forward = masked_fwd, .vjp = masked_vjp, .sample = sample_masked},
    {.name = "topKMask", .report_name = "top_k_mask", .min_inputs = 1, .max_inputs = 1,
     .input_names = {"x"}, .params = REF_P_AXIS | REF_P_K, .requires_vjp = 0, .c_fwd = 1,
     .c_vjp = 1,
     .note = "Proposal (not in TorchLean): ties go to the lower index (ATen topk's tie order is "
             "unspecified: only tie-free cases are comparable)",
     .set_defaults = topk_defaults, .shape = topk_shape, .domain = topk_domain,
     .forward = topk_fwd, .vjp = topk_vjp,
     .sample = sample_topk},
};
const int ref_family_softmax_count =
    (int)(sizeof ref_family_softmax / sizeof ref_family_softmax[0]);
