/* Shape, view and indexing ops (ops.md F): reshape, permute, broadcast, concat, slice, gather
 * (index_select semantics), scatterAdd.
 *
 * Error model (one rule for the whole family, c_fwd = c_vjp = 1). Every output element is a
 * sum of t_i >= 0 input terms (t_i = 1 for a pure copy, 0 for a structural zero); a t-term sum
 * in any order (ATen's index_add, CUDA atomics, column sums of sum_to_size) is within
 * (t - 1) u sum|terms| of the exact value. So
 *     m_i = (t_i - 1) sum|terms| + |y_i| / 2      (t_i >= 1),   m_i = 0 (t_i = 0).
 * A copy (t = 1) gets u|y|/2: an exact copy passes and any change of a dtype value (at least
 * one ulp > u|y|) fails. Strict f16/bf16 (ref.h): a sum of t >= 2 terms runs in float32 and is
 * rounded once: dtype = |y| (a copy stays |y|/2: exact); prob: sqrt(t - 1) in place of t - 1.
 * Index inputs (gather, scatterAdd) are float64 holding exact integers;
 * a non-integer or out-of-range index is outside the op's domain (REF_EDOMAIN): TorchLean's
 * types exclude it (its LibTorch capsule defensively zeroes or skips such rows). */
#include "ref_families.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- shared helpers ---------------------------------------------------------------------- */

/* Row-major multi-index of `flat` in shape s. */
static void unravel(int64_t flat, const ref_shape *s, int64_t *idx)
{
    for (int i = s->rank - 1; i >= 0; i--) {
        idx[i] = flat % s->dim[i];
        flat /= s->dim[i];
    }
}

static int64_t ravel(const int64_t *idx, const ref_shape *s)
{
    int64_t flat = 0;
    for (int i = 0; i < s->rank; i++)
        flat = flat * s->dim[i] + idx[i];
    return flat;
}

/* The magnitude of an element that is one copied term. */
static double copy_mag(double y)
{
    return fabs(y) / 2.0;
}

/* Magnitudes of a t-term sum with sum|terms| = abs_sum and value y (rule at the top). */
static void set_sum_mags(const ref_mag *mag, int64_t k, int64_t t, double abs_sum, double y)
{
    double len = (double)(t > 1 ? t - 1 : 0);
    if (t <= 0)
        ref_mag_set(mag, k, 0.0, 0.0, 0.0);
    else
        ref_mag_set(mag, k, len * abs_sum + fabs(y) / 2.0, t > 1 ? fabs(y) : fabs(y) / 2.0,
                    sqrt(len) * abs_sum + fabs(y) / 2.0);
}

/* Copy with the copy magnitudes (also used by every exact VJP). */
static void copy_out(const double *src, int64_t n, double *dst, double *mag)
{
    for (int64_t i = 0; i < n; i++) {
        dst[i] = src[i];
        if (mag)
            mag[i] = copy_mag(dst[i]);
    }
}

/* Validates a shape given as a parameter: rank in [0, REF_MAX_RANK], extents >= 0, and an
 * element count that fits int64. */
static ref_status check_param_shape(const char *what, const ref_shape *t, ref_err *e)
{
    if (t->rank < 0 || t->rank > REF_MAX_RANK)
        return ref_err_set(e, "%s has rank %d (must be 0..%d)", what, t->rank, REF_MAX_RANK);
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) {
        if (t->dim[i] < 0)
            return ref_err_set(e, "%s has a negative extent %lld at axis %d", what,
                               (long long)t->dim[i], i);
        if (t->dim[i] > 0 && n > INT64_MAX / t->dim[i])
            return ref_err_set(e, "%s has too many elements (overflows int64)", what);
        n *= t->dim[i];
    }
    return REF_OK;
}

/* Every index an exact integer in [0, extent). */
static int indices_valid(const double *idx, int64_t count, int64_t extent)
{
    for (int64_t j = 0; j < count; j++)
        if (!(idx[j] >= 0.0 && idx[j] < (double)extent && idx[j] == floor(idx[j])))
            return 0;
    return 1;
}

/* index_select along the split axis: dst[o, j, i] = src[o, idx[j], i] for j < count, with the
 * copy magnitudes when mag != NULL (gather's forward, scatterAdd's source cotangent). */
static void index_select(ref_axis_split a, const double *idx, int64_t count, const double *src,
                         double *dst, double *mag)
{
    for (int64_t o = 0; o < a.outer; o++)
        for (int64_t j = 0; j < count; j++)
            for (int64_t i = 0; i < a.inner; i++) {
                int64_t k = (o * count + j) * a.inner + i;
                dst[k] = src[(o * a.len + (int64_t)idx[j]) * a.inner + i];
                if (mag)
                    mag[k] = copy_mag(dst[k]);
            }
}

/* index_add along the split axis: dst[o, idx[j], i] += src[o, j, i] in increasing j, and the
 * same for |src| into abs_sum when abs_sum != NULL (scatterAdd's forward, gather's VJP). */
static void index_add(ref_axis_split a, const double *idx, int64_t count, const double *src,
                      double *dst, double *abs_sum)
{
    for (int64_t o = 0; o < a.outer; o++)
        for (int64_t j = 0; j < count; j++)
            for (int64_t i = 0; i < a.inner; i++) {
                int64_t k = (o * a.len + (int64_t)idx[j]) * a.inner + i;
                double t = src[(o * count + j) * a.inner + i];
                dst[k] += t;
                if (abs_sum)
                    abs_sum[k] += fabs(t);
            }
}

/* Magnitudes of an index_add result y: y[o, d, i] is a sum of base_terms plus hits[d] terms,
 * hits[d] = the number of j with idx[j] = d (counted once, not once per d: O(len + count)), with
 * sum|terms| = abs_sum[o, d, i] (abs_sum may be mag itself). */
static ref_status index_add_mags(ref_axis_split a, const double *idx, int64_t count,
                                 int64_t base_terms, const double *abs_sum, const double *y,
                                 const ref_mag *mag)
{
    int64_t *hits = calloc((size_t)a.len + 1, sizeof(int64_t));
    if (!hits)
        return REF_ENOMEM;
    for (int64_t j = 0; j < count; j++)
        hits[(int64_t)idx[j]]++;
    for (int64_t o = 0; o < a.outer; o++)
        for (int64_t d = 0; d < a.len; d++) {
            int64_t terms = base_terms + hits[d];
            for (int64_t i = 0; i < a.inner; i++) {
                int64_t k = (o * a.len + d) * a.inner + i;
                set_sum_mags(mag, k, terms, abs_sum[k], y[k]);
            }
        }
    free(hits);
    return REF_OK;
}

/* The requested rank, or a random one in [lo, 3] (at least 1 when a zero-size dimension is
 * asked for, since a scalar has no dimension to empty). */
static int sample_rank(ref_rng *r, const ref_sample_req *req, int lo)
{
    if (req->rank >= 0)
        return req->rank;
    return (int)ref_rng_range(r, req->zero_dim && lo < 1 ? 1 : lo, 3);
}

/* ---- reshape: same element count, row-major order kept; VJP reshapes g back ---------------- */

static ref_status reshape_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                                ref_err *e)
{
    (void)n;
    ref_status st = check_param_shape("the reshape target", &p->target, e);
    if (st != REF_OK)
        return st;
    if (ref_numel(&p->target) != ref_numel(&in[0])) {
        char a[96], b[96];
        ref_shape_fmt(&in[0], a, sizeof a);
        ref_shape_fmt(&p->target, b, sizeof b);
        return ref_err_set(e, "cannot reshape %s (%lld elements) to %s (%lld elements)", a,
                           (long long)ref_numel(&in[0]), b, (long long)ref_numel(&p->target));
    }
    *out = p->target;
    return REF_OK;
}

/* y_j = x_j for every row-major position j. */
static ref_status reshape_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                              const ref_mag *mags)
{
    double *mag = ref_mag_worst(mags);
    (void)p;
    (void)n;
    copy_out(in[0].v, ref_numel(&in[0].shape), out->v, mag);
    return REF_OK;
}

/* dx_j = g_j. */
static ref_status reshape_vjp(const ref_params *p, int n, const ref_tensor *in,
                              const ref_tensor *y, const ref_tensor *g, ref_tensor *grad,
                              const ref_mag *gmag)
{
    (void)p;
    (void)n;
    (void)y;
    if (grad[0].v)
        copy_out(g->v, ref_numel(&in[0].shape), grad[0].v, gmag ? gmag[0].worst : NULL);
    return REF_OK;
}

static ref_status sample_reshape(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                 ref_shape *in)
{
    int rank = sample_rank(r, req, 0);
    if (rank == 0 && req->zero_dim)
        return REF_ENOTAPPLICABLE;
    ref_sample_shape(r, rank, req->max_elems, req->zero_dim, &in[0]);
    int64_t N = ref_numel(&in[0]);
    ref_shape *t = &p->target;
    memset(t, 0, sizeof *t);
    t->rank = (int)ref_rng_range(r, N == 1 ? 0 : 1, 4);
    for (int i = 0; i < t->rank; i++)
        t->dim[i] = 1;
    if (N == 0) {
        for (int i = 0; i < t->rank; i++)
            t->dim[i] = ref_rng_range(r, 1, 3);
        t->dim[ref_rng_range(r, 0, t->rank - 1)] = 0;
    } else { /* hand each prime factor of N to a random axis */
        int64_t m = N;
        for (int64_t f = 2; m > 1; f++)
            while (m % f == 0) {
                t->dim[ref_rng_range(r, 0, t->rank - 1)] *= f;
                m /= f;
            }
    }
    *n = 1;
    return REF_OK;
}

/* ---- permute: output axis i = input axis perm[i]; VJP applies the inverse permutation ------ */

static ref_status permute_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                                ref_err *e)
{
    (void)n;
    int rank = in[0].rank;
    if (p->perm_len != rank)
        return ref_err_set(e, "perm has %d entries but the input has rank %d", p->perm_len,
                           rank);
    int seen[REF_MAX_RANK] = {0};
    out->rank = rank;
    for (int i = 0; i < rank; i++) {
        int a = ref_norm_axis(p->perm[i], rank);
        if (a < 0)
            return ref_err_set(e, "perm[%d] = %d is out of range for rank %d", i, p->perm[i],
                               rank);
        if (seen[a])
            return ref_err_set(e, "perm names axis %d twice (not a permutation)", a);
        seen[a] = 1;
        out->dim[i] = in[0].dim[a];
    }
    return REF_OK;
}

/* Flat input position of output position o: input index[perm[i]] = output index[i]. */
static int64_t permute_source(const ref_params *p, const ref_shape *in, const ref_shape *out,
                              int64_t o)
{
    int64_t oi[REF_MAX_RANK], ii[REF_MAX_RANK];
    unravel(o, out, oi);
    for (int i = 0; i < out->rank; i++)
        ii[ref_norm_axis(p->perm[i], in->rank)] = oi[i];
    return ravel(ii, in);
}

/* y[o] = x[source(o)]. */
static ref_status permute_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                              const ref_mag *mags)
{
    double *mag = ref_mag_worst(mags);
    (void)n;
    int64_t N = ref_numel(&out->shape);
    for (int64_t o = 0; o < N; o++) {
        out->v[o] = in[0].v[permute_source(p, &in[0].shape, &out->shape, o)];
        if (mag)
            mag[o] = copy_mag(out->v[o]);
    }
    return REF_OK;
}

/* dx[source(o)] = g[o] (a bijection, so every dx element is one copied term). */
static ref_status permute_vjp(const ref_params *p, int n, const ref_tensor *in,
                              const ref_tensor *y, const ref_tensor *g, ref_tensor *grad,
                              const ref_mag *gmag)
{
    (void)n;
    (void)y;
    if (!grad[0].v)
        return REF_OK;
    int64_t N = ref_numel(&g->shape);
    for (int64_t o = 0; o < N; o++) {
        int64_t k = permute_source(p, &in[0].shape, &g->shape, o);
        grad[0].v[k] = g->v[o];
        if (gmag && gmag[0].worst)
            gmag[0].worst[k] = copy_mag(g->v[o]);
    }
    return REF_OK;
}

static ref_status sample_permute(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                 ref_shape *in)
{
    int rank = sample_rank(r, req, 1);
    if (rank == 0 && req->zero_dim)
        return REF_ENOTAPPLICABLE;
    ref_sample_shape(r, rank, req->max_elems, req->zero_dim, &in[0]);
    p->perm_len = rank;
    for (int i = 0; i < rank; i++)
        p->perm[i] = i;
    for (int i = rank - 1; i > 0; i--) { /* Fisher-Yates */
        int j = (int)ref_rng_range(r, 0, i);
        int t = p->perm[i];
        p->perm[i] = p->perm[j];
        p->perm[j] = t;
    }
    if (rank > 0 && ref_rng_range(r, 0, 2) == 0)
        p->perm[0] -= rank; /* negative axes are accepted, as in torch.permute */
    *n = 1;
    return REF_OK;
}

/* ---- broadcast: NumPy right-aligned to target; VJP sums over the broadcast axes ------------- */

static ref_status broadcast_shape(const ref_params *p, int n, const ref_shape *in,
                                  ref_shape *out, ref_err *e)
{
    (void)n;
    const ref_shape *t = &p->target;
    ref_status st = check_param_shape("the broadcast target", t, e);
    if (st != REF_OK)
        return st;
    char a[96], b[96];
    ref_shape_fmt(&in[0], a, sizeof a);
    ref_shape_fmt(t, b, sizeof b);
    if (t->rank < in[0].rank)
        return ref_err_set(e, "cannot broadcast %s to the lower-rank target %s", a, b);
    int lead = t->rank - in[0].rank;
    for (int i = 0; i < in[0].rank; i++)
        if (in[0].dim[i] != 1 && in[0].dim[i] != t->dim[lead + i])
            return ref_err_set(e, "cannot broadcast %s to %s: input axis %d has extent %lld, "
                                  "target %lld (must be equal or 1)",
                               a, b, i, (long long)in[0].dim[i], (long long)t->dim[lead + i]);
    *out = *t;
    return REF_OK;
}

/* Flat input position read by output position o: leading target axes are new; an input axis of
 * extent 1 is read at index 0. */
static int64_t broadcast_source(const ref_shape *in, const ref_shape *out, int64_t o)
{
    int64_t oi[REF_MAX_RANK], ii[REF_MAX_RANK];
    unravel(o, out, oi);
    int lead = out->rank - in->rank;
    for (int i = 0; i < in->rank; i++)
        ii[i] = in->dim[i] == 1 ? 0 : oi[lead + i];
    return ravel(ii, in);
}

/* y[o] = x[source(o)]. */
static ref_status broadcast_fwd(const ref_params *p, int n, const ref_tensor *in,
                                ref_tensor *out, const ref_mag *mags)
{
    double *mag = ref_mag_worst(mags);
    (void)p;
    (void)n;
    int64_t N = ref_numel(&out->shape);
    for (int64_t o = 0; o < N; o++) {
        out->v[o] = in[0].v[broadcast_source(&in[0].shape, &out->shape, o)];
        if (mag)
            mag[o] = copy_mag(out->v[o]);
    }
    return REF_OK;
}

/* dx[k] = sum of g[o] over the o with source(o) = k, in row-major order of o (reduceFromBroadcast:
 * the broadcast axes are summed, kept singleton axes stay). An expansion to extent 0 gives 0. */
static ref_status broadcast_vjp(const ref_params *p, int n, const ref_tensor *in,
                                const ref_tensor *y, const ref_tensor *g, ref_tensor *grad,
                                const ref_mag *gmag)
{
    (void)p;
    (void)n;
    (void)y;
    if (!grad[0].v)
        return REF_OK;
    int64_t nx = ref_numel(&in[0].shape), N = ref_numel(&g->shape);
    double *abs_sum = calloc((size_t)nx + 1, sizeof(double));
    int64_t *terms = calloc((size_t)nx + 1, sizeof(int64_t));
    if (!abs_sum || !terms) {
        free(abs_sum), free(terms);
        return REF_ENOMEM;
    }
    memset(grad[0].v, 0, sizeof(double) * (size_t)nx);
    for (int64_t o = 0; o < N; o++) {
        int64_t k = broadcast_source(&in[0].shape, &g->shape, o);
        grad[0].v[k] += g->v[o];
        abs_sum[k] += fabs(g->v[o]);
        terms[k]++;
    }
    if (gmag && gmag[0].worst)
        for (int64_t k = 0; k < nx; k++)
            set_sum_mags(&gmag[0], k, terms[k], abs_sum[k], grad[0].v[k]);
    free(abs_sum), free(terms);
    return REF_OK;
}

static ref_status sample_broadcast(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                   ref_shape *in)
{
    int rank = sample_rank(r, req, 0);
    if (rank == 0 && req->zero_dim)
        return REF_ENOTAPPLICABLE;
    ref_sample_shape(r, rank, req->max_elems, req->zero_dim, &in[0]);
    for (int i = 0; i < rank; i++)
        if (in[0].dim[i] != 0 && ref_rng_range(r, 0, 1))
            in[0].dim[i] = 1; /* an axis to expand */
    ref_shape *t = &p->target;
    memset(t, 0, sizeof *t);
    int extra = (int)ref_rng_range(r, 0, 2);
    if (rank + extra > REF_MAX_RANK)
        extra = REF_MAX_RANK - rank;
    t->rank = rank + extra;
    for (int i = 0; i < extra; i++)
        t->dim[i] = ref_rng_range(r, 1, 3);
    for (int i = 0; i < rank; i++)
        t->dim[extra + i] = in[0].dim[i] == 1 ? ref_rng_range(r, 1, 3) : in[0].dim[i];
    *n = 1;
    return REF_OK;
}

/* ---- concat: >= 2 inputs along axis, other extents equal; VJP slices g back ---------------- */

static ref_status concat_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                               ref_err *e)
{
    if (n < 2 || n > REF_MAX_INPUTS)
        return ref_err_set(e, "concat takes 2..%d inputs, got %d", REF_MAX_INPUTS, n);
    int rank = in[0].rank, ax = ref_norm_axis(p->axis, rank);
    if (rank == 0 || ax < 0)
        return ref_err_set(e, "axis %d is out of range for rank %d", p->axis, rank);
    *out = in[0];
    for (int k = 1; k < n; k++) {
        char a[96], b[96];
        ref_shape_fmt(&in[0], a, sizeof a);
        ref_shape_fmt(&in[k], b, sizeof b);
        if (in[k].rank != rank)
            return ref_err_set(e, "input %d has shape %s but input 0 has %s (ranks differ)", k,
                               b, a);
        for (int i = 0; i < rank; i++)
            if (i != ax && in[k].dim[i] != in[0].dim[i])
                return ref_err_set(e, "input %d has shape %s but input 0 has %s (axis %d must "
                                      "match off the concat axis)",
                                   k, b, a, i);
        out->dim[ax] += in[k].dim[ax];
    }
    return REF_OK;
}

/* Output row o (outer index) is input 0's row o, then input 1's, ...; a row of input k is
 * len_k * inner contiguous values. */
static ref_status concat_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                             const ref_mag *mags)
{
    double *mag = ref_mag_worst(mags);
    int ax = ref_norm_axis(p->axis, out->shape.rank);
    ref_axis_split a = ref_split_axis(&out->shape, ax);
    int64_t pos = 0;
    for (int64_t o = 0; o < a.outer; o++)
        for (int k = 0; k < n; k++) {
            int64_t row = in[k].shape.dim[ax] * a.inner;
            copy_out(in[k].v + o * row, row, out->v + pos, mag ? mag + pos : NULL);
            pos += row;
        }
    return REF_OK;
}

/* dx_k = the piece of g that input k filled. */
static ref_status concat_vjp(const ref_params *p, int n, const ref_tensor *in,
                             const ref_tensor *y, const ref_tensor *g, ref_tensor *grad,
                             const ref_mag *gmag)
{
    (void)y;
    int ax = ref_norm_axis(p->axis, g->shape.rank);
    ref_axis_split a = ref_split_axis(&g->shape, ax);
    int64_t pos = 0;
    for (int64_t o = 0; o < a.outer; o++)
        for (int k = 0; k < n; k++) {
            int64_t row = in[k].shape.dim[ax] * a.inner;
            if (grad[k].v)
                copy_out(g->v + pos, row, grad[k].v + o * row,
                         gmag && gmag[k].worst ? gmag[k].worst + o * row : NULL);
            pos += row;
        }
    return REF_OK;
}

static ref_status sample_concat(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                ref_shape *in)
{
    int ax;
    ref_status st = ref_sample_with_axis(r, req, req->zero_dim, &in[0], &ax);
    if (st != REF_OK)
        return st;
    int rank = in[0].rank;
    *n = (int)ref_rng_range(r, 2, 4);
    int64_t limit = ref_extent_cap(&in[0], ax, ref_sample_budget(req));
    for (int k = 1; k < *n; k++) {
        in[k] = in[0];
        in[k].dim[ax] = ref_rng_range(r, req->zero_dim ? 0 : 1, 3);
        if (in[k].dim[ax] > limit) /* every piece within the budget */
            in[k].dim[ax] = limit;
    }
    p->axis = ref_sample_axis_param(r, ax, rank);
    return REF_OK;
}

/* ---- slice: [start, start + count) along axis; VJP zeros with g in the range --------------- */

static ref_status slice_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                              ref_err *e)
{
    (void)n;
    int ax = ref_norm_axis(p->axis, in[0].rank);
    if (in[0].rank == 0 || ax < 0)
        return ref_err_set(e, "axis %d is out of range for rank %d", p->axis, in[0].rank);
    int64_t ext = in[0].dim[ax];
    if (p->start < 0 || p->count < 0 || p->start > ext || p->count > ext - p->start)
        return ref_err_set(e, "slice [%lld, %lld + %lld) does not fit axis %d of extent %lld",
                           (long long)p->start, (long long)p->start, (long long)p->count,
                           p->axis, (long long)ext);
    *out = in[0];
    out->dim[ax] = p->count;
    return REF_OK;
}

/* y[o, j, i] = x[o, start + j, i], j < count. */
static ref_status slice_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                            const ref_mag *mags)
{
    double *mag = ref_mag_worst(mags);
    (void)n;
    ref_axis_split a = ref_split_param_axis(p, &in[0].shape);
    for (int64_t o = 0; o < a.outer; o++) {
        int64_t dst = o * p->count * a.inner;
        copy_out(in[0].v + (o * a.len + p->start) * a.inner, p->count * a.inner, out->v + dst,
                 mag ? mag + dst : NULL);
    }
    return REF_OK;
}

/* dx = 0 outside the range, dx[o, start + j, i] = g[o, j, i] inside. */
static ref_status slice_vjp(const ref_params *p, int n, const ref_tensor *in,
                            const ref_tensor *y, const ref_tensor *g, ref_tensor *grad,
                            const ref_mag *gmag)
{
    (void)n;
    (void)y;
    if (!grad[0].v)
        return REF_OK;
    int64_t nx = ref_numel(&in[0].shape);
    double *mag = gmag ? gmag[0].worst : NULL;
    memset(grad[0].v, 0, sizeof(double) * (size_t)nx);
    if (mag)
        memset(mag, 0, sizeof(double) * (size_t)nx);
    ref_axis_split a = ref_split_param_axis(p, &in[0].shape);
    for (int64_t o = 0; o < a.outer; o++) {
        int64_t dst = (o * a.len + p->start) * a.inner;
        copy_out(g->v + o * p->count * a.inner, p->count * a.inner, grad[0].v + dst,
                 mag ? mag + dst : NULL);
    }
    return REF_OK;
}

static ref_status sample_slice(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                               ref_shape *in)
{
    int ax;
    ref_status st = ref_sample_with_axis(r, req, req->zero_dim, &in[0], &ax);
    if (st != REF_OK)
        return st;
    int rank = in[0].rank;
    int64_t ext = in[0].dim[ax];
    if (ext == 0) {
        p->start = p->count = 0;
    } else {
        p->start = ref_rng_range(r, 0, ext - 1);
        p->count = ref_rng_range(r, req->zero_dim ? 0 : 1, ext - p->start);
    }
    p->axis = ref_sample_axis_param(r, ax, rank);
    *n = 1;
    return REF_OK;
}

/* ---- gather: index_select along axis (a rank-0 index selects one entry and drops the axis) -- */

static ref_status gather_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                               ref_err *e)
{
    if (n != 2)
        return ref_err_set(e, "gather takes 2 inputs (x, index), got %d", n);
    int ax = ref_norm_axis(p->axis, in[0].rank);
    if (in[0].rank == 0 || ax < 0)
        return ref_err_set(e, "axis %d is out of range for rank %d", p->axis, in[0].rank);
    if (in[1].rank > 1)
        return ref_err_set(e, "the index must be a vector (or a scalar for select), got rank %d",
                           in[1].rank);
    int64_t count = ref_numel(&in[1]);
    if (in[0].dim[ax] == 0 && count > 0)
        return ref_err_set(e, "the index has %lld entries but axis %d is empty (no valid index)",
                           (long long)count, p->axis);
    *out = in[0];
    if (in[1].rank == 1) {
        out->dim[ax] = count;
    } else { /* select: the axis is dropped */
        out->rank--;
        for (int i = ax; i < out->rank; i++)
            out->dim[i] = in[0].dim[i + 1];
    }
    return REF_OK;
}

static void index_domain(const ref_params *p, int n, const ref_shape *in, int i, ref_domain *d)
{
    (void)n;
    if (i != 1)
        return;
    int ax = ref_norm_axis(p->axis, in[0].rank);
    d->kind = REF_DOM_INDEX;
    d->hi = ax >= 0 ? (double)in[0].dim[ax] : 0.0; /* indices in [0, extent) */
}

/* y[o, j, i] = x[o, idx[j], i] for j < count (repeats allowed). */
static ref_status gather_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                             const ref_mag *mags)
{
    double *mag = ref_mag_worst(mags);
    (void)n;
    ref_axis_split a = ref_split_param_axis(p, &in[0].shape);
    int64_t count = ref_numel(&in[1].shape);
    const double *idx = in[1].v;
    if (!indices_valid(idx, count, a.len))
        return REF_EDOMAIN;
    index_select(a, idx, count, in[0].v, out->v, mag);
    return REF_OK;
}

/* dx[o, d, i] = sum over j with idx[j] = d of g[o, j, i], a left fold from 0 in j order
 * (scatter-add into zeros; repeated indices accumulate). */
static ref_status gather_vjp(const ref_params *p, int n, const ref_tensor *in,
                             const ref_tensor *y, const ref_tensor *g, ref_tensor *grad,
                             const ref_mag *gmag)
{
    (void)n;
    (void)y;
    if (!grad[0].v)
        return REF_OK;
    ref_axis_split a = ref_split_param_axis(p, &in[0].shape);
    int64_t count = ref_numel(&in[1].shape), nx = ref_numel(&in[0].shape);
    const double *idx = in[1].v;
    if (!indices_valid(idx, count, a.len))
        return REF_EDOMAIN;
    double *abs_sum = calloc((size_t)nx + 1, sizeof(double));
    if (!abs_sum)
        return REF_ENOMEM;
    memset(grad[0].v, 0, sizeof(double) * (size_t)nx);
    index_add(a, idx, count, g->v, grad[0].v, abs_sum);
    ref_status st = REF_OK;
    if (gmag && gmag[0].worst)
        st = index_add_mags(a, idx, count, 0, abs_sum, grad[0].v, &gmag[0]);
    free(abs_sum);
    return st;
}

/* Index length for a sampled axis extent: 1..2*ext+1 (so repeats are common), 0 allowed only
 * where a zero-size dimension is asked for or unavoidable. */
static int64_t sample_count(ref_rng *r, int64_t ext, int zero_dim)
{
    if (ext == 0)
        return 0;
    return ref_rng_range(r, zero_dim ? 0 : 1, 2 * ext + 1);
}

static ref_status sample_gather(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                ref_shape *in)
{
    int ax;
    ref_status st = ref_sample_with_axis(r, req, req->zero_dim, &in[0], &ax);
    if (st != REF_OK)
        return st;
    int rank = in[0].rank;
    int64_t ext = in[0].dim[ax];
    if (ext > 0 && ref_rng_range(r, 0, 4) == 0) {
        in[1].rank = 0; /* select form */
    } else {
        in[1].rank = 1;
        in[1].dim[0] = sample_count(r, ext, req->zero_dim);
        if (in[1].dim[0] > ref_sample_budget(req)) /* the index within the budget */
            in[1].dim[0] = ref_sample_budget(req);
    }
    p->axis = ref_sample_axis_param(r, ax, rank);
    *n = 2;
    return REF_OK;
}

/* ---- scatterAdd: out = base + sum of source rows at the indexed positions ----------------- */

static ref_status scatter_shape(const ref_params *p, int n, const ref_shape *in,
                                ref_shape *out, ref_err *e)
{
    if (n != 3)
        return ref_err_set(e, "scatterAdd takes 3 inputs (base, index, source), got %d", n);
    int ax = ref_norm_axis(p->axis, in[0].rank);
    if (in[0].rank == 0 || ax < 0)
        return ref_err_set(e, "axis %d is out of range for rank %d", p->axis, in[0].rank);
    if (in[1].rank != 1)
        return ref_err_set(e, "the index must be a vector, got rank %d", in[1].rank);
    int64_t count = in[1].dim[0];
    if (in[0].dim[ax] == 0 && count > 0)
        return ref_err_set(e, "the index has %lld entries but axis %d is empty (no valid index)",
                           (long long)count, p->axis);
    ref_shape want = in[0];
    want.dim[ax] = count;
    if (!ref_shape_eq(&in[2], &want)) {
        char a[96], b[96];
        ref_shape_fmt(&want, a, sizeof a);
        ref_shape_fmt(&in[2], b, sizeof b);
        return ref_err_set(e, "source must have shape %s (base with axis %d of extent = index "
                              "length), got %s",
                           a, p->axis, b);
    }
    *out = in[0];
    return REF_OK;
}

/* out[o, d, i] = base[o, d, i] + source[o, j1, i] + source[o, j2, i] + ... over the j with
 * idx[j] = d in increasing j (a left fold starting from the base value, so an untouched -0
 * base stays -0). Magnitude: a (1 + terms)-term sum. */
static ref_status scatter_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                              const ref_mag *mags)
{
    (void)n;
    ref_axis_split a = ref_split_param_axis(p, &in[0].shape);
    int64_t count = in[1].shape.dim[0], N = ref_numel(&in[0].shape);
    const double *idx = in[1].v, *src = in[2].v;
    if (!indices_valid(idx, count, a.len))
        return REF_EDOMAIN;
    double *abs_sum = NULL; /* sum|terms| per output, when magnitudes are asked for */
    if (mags && !(abs_sum = calloc((size_t)N + 1, sizeof(double))))
        return REF_ENOMEM;
    for (int64_t k = 0; k < N; k++) {
        out->v[k] = in[0].v[k];
        if (abs_sum)
            abs_sum[k] = fabs(in[0].v[k]);
    }
    index_add(a, idx, count, src, out->v, abs_sum);
    ref_status st = mags ? index_add_mags(a, idx, count, 1, abs_sum, out->v, mags) : REF_OK;
    free(abs_sum);
    return st;
}

/* dBase = g; dSource[o, j, i] = g[o, idx[j], i] (index_select of g). The index gets none. */
static ref_status scatter_vjp(const ref_params *p, int n, const ref_tensor *in,
                              const ref_tensor *y, const ref_tensor *g, ref_tensor *grad,
                              const ref_mag *gmag)
{
    (void)n;
    (void)y;
    ref_axis_split a = ref_split_param_axis(p, &in[0].shape);
    int64_t count = in[1].shape.dim[0];
    const double *idx = in[1].v;
    if (grad[0].v)
        copy_out(g->v, ref_numel(&g->shape), grad[0].v, gmag ? gmag[0].worst : NULL);
    if (!grad[2].v)
        return REF_OK;
    if (!indices_valid(idx, count, a.len))
        return REF_EDOMAIN;
    index_select(a, idx, count, g->v, grad[2].v, gmag ? gmag[2].worst : NULL);
    return REF_OK;
}

static ref_status sample_scatter(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                 ref_shape *in)
{
    int ax;
    ref_status st = ref_sample_with_axis(r, req, req->zero_dim, &in[0], &ax);
    if (st != REF_OK)
        return st;
    int rank = in[0].rank;
    int64_t count = sample_count(r, in[0].dim[ax], req->zero_dim);
    int64_t limit = ref_extent_cap(&in[0], ax, ref_sample_budget(req));
    count = count < limit ? count : limit; /* source [..., count, ...] within the budget */
    in[1].rank = 1;
    in[1].dim[0] = count;
    in[2] = in[0];
    in[2].dim[ax] = count;
    p->axis = ref_sample_axis_param(r, ax, rank);
    *n = 3;
    return REF_OK;
}

/* ---- table -------------------------------------------------------------------------------- */

const ref_op ref_family_shape[] = {
    {.name = "reshape", .report_name = "reshape", .min_inputs = 1, .max_inputs = 1,
     .input_names = {"x"}, .params = REF_P_TARGET, .requires_vjp = 1, .c_fwd = 1, .c_vjp = 1,
     .note = "explicit target shape (no -1 inference)", .shape = reshape_shape,
     .forward = reshape_fwd, .vjp = reshape_vjp, .sample = sample_reshape},
    {.name = "permute", .report_name = "permute", .min_inputs = 1, .max_inputs = 1,
     .input_names = {"x"}, .params = REF_P_PERM, .requires_vjp = 1, .c_fwd = 1, .c_vjp = 1,
     .shape = permute_shape, .forward = permute_fwd, .vjp = permute_vjp,
     .sample = sample_permute},
    {.name = "broadcast", .report_name = "broadcast", .min_inputs = 1, .max_inputs = 1,
     .input_names = {"x"}, .params = REF_P_TARGET, .requires_vjp = 1, .c_fwd = 1, .c_vjp = 1,
     .shape = broadcast_shape, .forward = broadcast_fwd, .vjp = broadcast_vjp,
     .sample = sample_broadcast},
    {.name = "concat", .report_name = "concat", .min_inputs = 2, .max_inputs = REF_MAX_INPUTS,
     .input_names = {"x", "x", "x", "x", "x", "x", "x", "x"}, .params = REF_P_AXIS,
     .requires_vjp = 1, .c_fwd = 1, .c_vjp = 1, .shape = concat_shape, .forward = concat_fwd,
     .vjp = concat_vjp, .sample = sample_concat},
    {.name = "slice", .report_name = "slice", .min_inputs = 1, .max_inputs = 1,
     .input_names = {"x"}, .params = REF_P_AXIS | REF_P_RANGE, .requires_vjp = 1, .c_fwd = 1,
     .c_vjp = 1, .shape = slice_shape, .forward = slice_fwd, .vjp = slice_vjp,
     .sample = sample_slice},
    {.name = "gather", .report_name = "gather", .min_inputs = 2, .max_inputs = 2,
     .input_names = {"x", "index"}, .input_kind = {REF_IN_DATA, REF_IN_INDEX},
     .params = REF_P_AXIS, .requires_vjp = 1, .c_fwd = 1, .c_vjp = 1,
     .note = "index_select semantics with a 1-D index (not at::gather); a 0-D index selects and "
             "drops the axis",
     .shape = gather_shape, .domain = index_domain, .forward = gather_fwd, .vjp = gather_vjp,
     .sample = sample_gather},
    {.name = "scatterAdd", .report_name = "scatter_add", .min_inputs = 3, .max_inputs = 3,
     .input_names = {"base", "index", "source"},
     .input_kind = {REF_IN_DATA, REF_IN_INDEX, REF_IN_DATA}, .params = REF_P_AXIS,
     .requires_vjp = 1, .c_fwd = 1, .c_vjp = 1,
     .note = "index_add along axis with a 1-D index (not at::scatter_add's elementwise index)",
     .shape = scatter_shape, .domain = index_domain, .forward = scatter_fwd,
     .vjp = scatter_vjp, .sample = sample_scatter},
};
const int ref_family_shape_count = (int)(sizeof ref_family_shape / sizeof ref_family_shape[0]);
