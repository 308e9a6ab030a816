/* Convolution, channels-first single sample (ops.md J): x [inC, s...] with spatial rank 1, 2 or
 * 3 (params->spatial), no batch axis. conv and convTranspose share one geometry and one loop
 * over the terms (oc, o, ic, k) of their sums, written once for every spatial rank with
 * row-major index arithmetic over the spatial axes.
 *
 * Geometry, per spatial axis a (stride s, symmetric padding p, dilation d, kernel extent k):
 *   conv           out = floor((in + 2p - E)/s) + 1 with E = d (k - 1) + 1, or 0 when
 *                  in + 2p < E; input position of output o and tap k: i = o s + k d - p
 *                  (outside [0, in) it is a zero-padded cell).
 *   convTranspose  out = (in - 1) s + d (k - 1) + 1 - 2p, saturating at 0, and 0 if in, k or s is
 *                  0 (ops.md: (in - 1) s + k - 2p at d = 1); output o and tap k read input
 *                  i = (o + p - k d)/s when that is an integer in [0, in), else nothing.
 * Dilation 0 is accepted (ops.md: extent 1): every tap of an axis reads the same cell. Pools use
 * their own geometry (ref_pool.c).
 *
 * The kernel extents come from the weight's shape. params->kernel[] mirrors them (the sampler
 * writes them so a case line shows the kernel); shape() accepts kernel[a] == 0 ("take it from the
 * weight") or the weight's extent, and rejects anything else.
 *
 * Error model. Every output and every gradient entry is a sum of products (plus the bias): a
 * length-n sum of products in any order, with or without FMA, is within n u sum|terms| of the
 * exact value (gamma_n bound; im2col + GEMM, implicit GEMM and col2im are all reorderings of the
 * same terms, and padded zeros add exact zeros). So m = n * sum|terms| with n the number of
 * terms (>= 1) and c = 2 (first-order slack of gamma_n = nu/(1-nu)), as for linear. Transform
 * algorithms (Winograd, FFT convolution) are outside this bound: their error is relative to the
 * norms of whole tiles, not of one window; the provider should pin direct/GEMM algorithms.
 * Strict f16/bf16 (ref.h): each sum runs in float32 and is rounded once; the forward's product
 * sum may be rounded to the dtype before the bias is added (as linear's): dtype = |sum x W| + |y|
 * for the forward, |value| for the gradients. prob: n becomes sqrt(n). */
#include "ref_families.h"
#include "ref_parallel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CV_MAX_GEOM ((int64_t)1 << 30) /* stride, pad, dilation, extents: keeps products in int64 */

/* ---- geometry shared by conv and convTranspose ------------------------------------------- */

typedef struct {
    int transposed;
    int sr;                          /* spatial rank */
    int64_t cin, cout, groups;       /* channels and groups */
    int64_t cin_g, cout_g;           /* channels per group */
    ref_sp_ext in, k, out;               /* spatial extents of x, the kernel and y */
    int64_t s[3], p[3], d[3];
} cv_geom;

static void conv_defaults(ref_params *p)
{
    ref_window_defaults(p);
    p->groups = 1;
}

static ref_status cv_geometry(const ref_params *p, int n, const ref_shape *in, int transposed,
                              cv_geom *g, ref_err *e)
{
    const char *op = transposed ? "convTranspose" : "conv";
    const char *wform = transposed ? "[inC, outC/groups, k...]" : "[outC, inC/groups, k...]";
    memset(g, 0, sizeof *g);
    g->transposed = transposed;
    if (n != 3)
        return ref_err_set(e, "%s takes 3 inputs (x, weight, bias), got %d", op, n);
    if (p->spatial < 1 || p->spatial > 3)
        return ref_err_set(e, "%s spatial rank must be 1, 2 or 3, got %d", op, p->spatial);
    int sr = g->sr = p->spatial;
    char sx[96], sw[96], sb[96];
    ref_shape_fmt(&in[0], sx, sizeof sx);
    ref_shape_fmt(&in[1], sw, sizeof sw);
    ref_shape_fmt(&in[2], sb, sizeof sb);
    for (int t = 0; t < 3; t++)
        for (int a = 0; a < in[t].rank; a++)
            if (in[t].dim[a] < 0 || in[t].dim[a] > CV_MAX_GEOM)
                return ref_err_set(e, "%s input %d has an invalid extent %lld", op, t,
                                   (long long)in[t].dim[a]);
    if (in[0].rank != sr + 1)
        return ref_err_set(e, "%s x must be [C, %d spatial axes] (rank %d, no batch axis), got %s",
                           op, sr, sr + 1, sx);
    if (in[1].rank != sr + 2)
        return ref_err_set(e, "%s weight must be %s of rank %d, got %s", op, wform, sr + 2, sw);
    if (p->groups < 1)
        return ref_err_set(e, "%s groups must be >= 1, got %lld", op, (long long)p->groups);
    g->groups = p->groups;
    g->cin = in[0].dim[0];
    if (g->cin % g->groups != 0)
        return ref_err_set(e, "%s x has %lld channels, not divisible by groups = %lld", op,
                           (long long)g->cin, (long long)g->groups);
    g->cin_g = g->cin / g->groups;
    if (!transposed) {
        g->cout = in[1].dim[0];
        if (g->cout % g->groups != 0)
            return ref_err_set(e, "conv weight has %lld output channels, not divisible by groups "
                               "= %lld", (long long)g->cout, (long long)g->groups);
        g->cout_g = g->cout / g->groups;
        if (in[1].dim[1] != g->cin_g)
            return ref_err_set(e, "conv weight %s must have inC/groups = %lld input channels "
                               "(x %s, groups %lld)", sw, (long long)g->cin_g, sx,
                               (long long)g->groups);
    } else {
        if (in[1].dim[0] != g->cin)
            return ref_err_set(e, "convTranspose weight %s must have inC = %lld leading "
                               "channels like x %s", sw, (long long)g->cin, sx);
        g->cout_g = in[1].dim[1];
        g->cout = g->cout_g * g->groups;
    }
    if (in[2].rank != 1 || in[2].dim[0] != g->cout)
        return ref_err_set(e, "%s bias must be [outC] = [%lld], got %s", op, (long long)g->cout,
                           sb);
    g->in.rank = g->k.rank = g->out.rank = sr;
    for (int a = 0; a < sr; a++) {
        int64_t in_a = in[0].dim[a + 1], k = in[1].dim[a + 2];
        int64_t s = p->stride[a], pd = p->pad[a], d = p->dil[a];
        if (p->kernel[a] != 0 && p->kernel[a] != k)
            return ref_err_set(e, "%s kernel[%d] = %lld disagrees with the weight's extent %lld "
                               "(use 0 or the weight's extent)", op, a, (long long)p->kernel[a],
                               (long long)k);
        if (!transposed && k == 0)
            return ref_err_set(e, "conv kernel extent %d is 0 (weight %s); a kernel needs at "
                               "least one tap", a, sw);
        if (s < (transposed ? 0 : 1) || s > CV_MAX_GEOM)
            return ref_err_set(e, "%s stride[%d] = %lld is out of range (%s)", op, a,
                               (long long)s, transposed ? ">= 0" : ">= 1");
        if (pd < 0 || pd > CV_MAX_GEOM)
            return ref_err_set(e, "%s pad[%d] = %lld is out of range (>= 0)", op, a,
                               (long long)pd);
        if (d < 0 || d > CV_MAX_GEOM)
            return ref_err_set(e, "%s dil[%d] = %lld is out of range (>= 0; 0 acts as extent 1)",
                               op, a, (long long)d);
        g->in.d[a] = in_a;
        g->k.d[a] = k;
        g->s[a] = s;
        g->p[a] = pd;
        g->d[a] = d;
        int64_t out;
        if (!transposed) {
            int64_t E = d * (k - 1) + 1;
            out = in_a + 2 * pd < E ? 0 : (in_a + 2 * pd - E) / s + 1;
        } else if (in_a == 0 || k == 0 || s == 0) {
            out = 0;
        } else {
            int64_t full = (in_a - 1) * s + d * (k - 1) + 1;
            out = full > 2 * pd ? full - 2 * pd : 0;
        }
        g->out.d[a] = out;
    }
    double total = (double)g->cout;
    for (int a = 0; a < sr; a++)
        total *= (double)g->out.d[a];
    if (total > 281474976710656.0) /* 2^48 */
        return ref_err_set(e, "%s output would have %.3g elements (too large)", op, total);
    return REF_OK;
}

/* The input cell read by output position oi through tap ki, or -1 where there is none (a padded
 * cell for conv; a non-integer or out-of-range source for convTranspose). */
static int64_t cv_source(const cv_geom *g, const int64_t oi[3], const int64_t ki[3])
{
    int64_t ii[3];
    for (int a = 0; a < g->sr; a++) {
        if (!g->transposed) {
            ii[a] = oi[a] * g->s[a] + ki[a] * g->d[a] - g->p[a];
        } else {
            int64_t num = oi[a] + g->p[a] - ki[a] * g->d[a];
            if (num < 0 || num % g->s[a] != 0)
                return -1;
            ii[a] = num / g->s[a];
        }
    }
    return ref_sp_ravel(&g->in, ii);
}

/* The input cell read by output o (flat) through each tap kk (flat, row-major over the kernel),
 * into src[kk]. Output o is unravelled once and the taps walked in order. */
static void cv_sources(const cv_geom *g, int64_t o, int64_t nk, int64_t *src)
{
    int64_t oi[3], ki[3] = {0, 0, 0};
    ref_sp_unravel(&g->out, o, oi);
    for (int64_t kk = 0; kk < nk; kk++, ref_sp_next(&g->k, ki))
        src[kk] = cv_source(g, oi, ki);
}

/* Flat weight index of the term (oc, ic) at tap 0 (its taps follow contiguously): conv
 * W[oc, ic - grp inC/groups, :], convTranspose W[ic, oc - grp outC/groups, :] (grp = the group
 * of oc and ic). */
static int64_t cv_wrow(const cv_geom *g, int64_t oc, int64_t ic, int64_t nk)
{
    if (!g->transposed)
        return (oc * g->cin_g + ic % g->cin_g) * nk;
    return (ic * g->cout_g + oc % g->cout_g) * nk;
}

static ref_status conv_shape_impl(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                                  ref_err *e, int transposed)
{
    cv_geom g;
    ref_status st = cv_geometry(p, n, in, transposed, &g, e);
    if (st != REF_OK)
        return st;
    ref_sp_channels_shape(g.cout, &g.out, out);
    return REF_OK;
}

static ref_status conv_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                             ref_err *e)
{
    return conv_shape_impl(p, n, in, out, e, 0);
}

static ref_status conv_t_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                               ref_err *e)
{
    return conv_shape_impl(p, n, in, out, e, 1);
}

/* conv:          y[oc, o] = b[oc] + sum_{ic in grp(oc)} sum_k x_pad[ic, o s + k d - p] W[oc, ic', k]
 * convTranspose: y[oc, o] = b[oc] + sum_{ic in grp(oc)} sum_k x[ic, (o + p - k d)/s] W[ic, oc', k]
 *                (only the terms whose source is an integer inside x)
 * (ic' and oc' are the channel within its group.) The inner sum is a left fold from 0, input
 * channels outer, kernel offsets row-major inner; the bias is added after.
 * m = (n + 1)(sum|x W| + |b|), n = number of terms that exist (conv counts the padded taps too:
 * inC/groups * prod(k)). One output element, its sources src[] (cv_sources) given: */
static void cv_out_elem(const cv_geom *g, const ref_tensor *in, int64_t oc, const int64_t *src,
                        double *y, const ref_mag *mags, int64_t i)
{
    int64_t nin = ref_sp_count(&g->in), nk = ref_sp_count(&g->k), grp = oc / g->cout_g;
    const double *x = in[0].v, *W = in[1].v, *b = in[2].v;
    double s = 0.0, s_abs = 0.0;
    int64_t terms = g->transposed ? 0 : g->cin_g * nk;
    for (int64_t icl = 0; icl < g->cin_g; icl++) {
        int64_t ic = grp * g->cin_g + icl;
        const double *xc = x + ic * nin, *w = W + cv_wrow(g, oc, ic, nk);
        for (int64_t kk = 0; kk < nk; kk++) {
            if (src[kk] < 0) {
                /* conv: x_pad's zero times W, as the formula reads (exactly 0 for a finite
                 * weight, NaN for a NaN or infinite one, as im2col gives); convTranspose: the
                 * term does not exist */
                if (!g->transposed)
                    s += 0.0 * w[kk];
                continue;
            }
            double t = xc[src[kk]] * w[kk];
            s += t;
            s_abs += fabs(t);
            if (g->transposed)
                terms++;
        }
    }
    *y = s + b[oc];
    if (mags)
        ref_mag_set(mags, i, (double)(terms + 1) * (s_abs + fabs(b[oc])), fabs(s) + fabs(s + b[oc]),
                    (sqrt((double)terms) + 1.0) * (s_abs + fabs(b[oc])));
}

typedef struct {
    cv_geom g;
    const ref_tensor *in, *gt;
    ref_tensor *out, *grad;
    const ref_mag *mags; /* NULL: not wanted */
    double *absum[3];
    int64_t *uses[3];
    int failed; /* a thread's scratch could not be allocated */
} cv_job;

/* A thread's list of sources for one output (cv_sources), or NULL with the job failed. */
static int64_t *cv_src_scratch(cv_job *t)
{
    int64_t *src = malloc(sizeof(int64_t) * (size_t)(ref_sp_count(&t->g.k) + 1));
    if (!src)
        t->failed = 1;
    return src;
}

/* Output elements (oc, o), flattened, split over threads. */
static void cv_forward_range(void *ctx, int64_t lo, int64_t hi)
{
    cv_job *t = ctx;
    int64_t nk = ref_sp_count(&t->g.k), nout = ref_sp_count(&t->g.out);
    int64_t *src = cv_src_scratch(t);
    if (!src)
        return;
    for (int64_t f = lo; f < hi; f++) {
        cv_sources(&t->g, f % nout, nk, src);
        cv_out_elem(&t->g, t->in, f / nout, src, &t->out->v[f], t->mags, f);
    }
    free(src);
}

static ref_status cv_forward(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                             const ref_mag *mags, int transposed)
{
    cv_job t = {.in = in, .out = out, .mags = mags && mags->worst ? mags : NULL};
    ref_shape shapes[3] = {in[0].shape, in[1].shape, in[2].shape};
    if (cv_geometry(p, n, shapes, transposed, &t.g, NULL) != REF_OK)
        return REF_EINVAL;
    ref_parallel_for(p->threads, t.g.cout * ref_sp_count(&t.g.out), 64, cv_forward_range, &t);
    return t.failed ? REF_ENOMEM : REF_OK;
}

static ref_status cv_forward_at(const ref_params *p, int n, const ref_tensor *in, ref_picks *pk,
                                int transposed)
{
    cv_geom g;
    ref_shape shapes[3] = {in[0].shape, in[1].shape, in[2].shape};
    if (cv_geometry(p, n, shapes, transposed, &g, NULL) != REF_OK)
        return REF_EINVAL;
    int64_t nk = ref_sp_count(&g.k), nout = ref_sp_count(&g.out);
    int64_t *src = malloc(sizeof(int64_t) * (size_t)(nk + 1));
    if (!src)
        return REF_ENOMEM;
    for (int64_t e = 0; e < pk->count; e++) {
        cv_sources(&g, pk->at[e] % nout, nk, src);
        cv_out_elem(&g, in, pk->at[e] / nout, src, &pk->v[e], pk->mag.worst ? &pk->mag : NULL, e);
    }
    free(src);
    return REF_OK;
}

static ref_status conv_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                           const ref_mag *mags)
{
    return cv_forward(p, n, in, out, mags, 0);
}

static ref_status conv_t_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                             const ref_mag *mags)
{
    return cv_forward(p, n, in, out, mags, 1);
}

/* convTranspose's dx and dW are ordinary convolutions with g, whose zero padding of g reads
 * W[ic, oc', k] * 0 (into dx) and x[ic, i] * 0 (into dW) for every tap that lands outside y:
 * exactly 0 for finite values, NaN for a NaN or infinite one. Those products are added after
 * the terms (the term walk of cv_vjp only visits the taps that land inside y), for the input
 * channels ic in [lo, hi) (a thread's range). dx or dW may be NULL. */
static int64_t convt_outside(const cv_geom *g, const int64_t ii[3], const int64_t ki[3])
{
    int64_t oi[3];
    for (int a = 0; a < g->sr; a++)
        oi[a] = ii[a] * g->s[a] + ki[a] * g->d[a] - g->p[a];
    return ref_sp_ravel(&g->out, oi) < 0;
}

static void convt_padded_terms(void *ctx, int64_t lo, int64_t hi)
{
    cv_job *t = ctx;
    const cv_geom *g = &t->g;
    const double *x = t->in[0].v, *W = t->in[1].v;
    double *dx = t->grad[0].v, *dW = t->grad[1].v;
    int64_t nin = ref_sp_count(&g->in), nk = ref_sp_count(&g->k);
    for (int64_t ic = lo; ic < hi; ic++) {
        int64_t grp = ic / g->cin_g, ii[3] = {0, 0, 0};
        for (int64_t i = 0; i < nin; i++, ref_sp_next(&g->in, ii)) {
            int64_t ki[3] = {0, 0, 0};
            for (int64_t kk = 0; kk < nk; kk++, ref_sp_next(&g->k, ki)) {
                if (!convt_outside(g, ii, ki))
                    continue;
                for (int64_t ocl = 0; ocl < g->cout_g; ocl++) {
                    int64_t wi = cv_wrow(g, grp * g->cout_g + ocl, ic, nk) + kk;
                    if (dx)
                        dx[ic * nin + i] += W[wi] * 0.0;
                    if (dW)
                        dW[wi] += x[ic * nin + i] * 0.0;
                }
            }
        }
    }
}

/* VJP of both, from the same terms t = x[ic, src] W[w] feeding y[oc, o]:
 *   dx[ic, src] = sum over terms reading it of W[w] g[oc, o]
 *     (conv: the transposed convolution of g with W; convTranspose: the ordinary convolution
 *      dx[ic, i] = sum_{oc, k} W[ic, oc', k] g[oc, i s + k d - p])
 *   dW[w]       = sum over terms using it of x[ic, src] g[oc, o]
 *   db[oc]      = sum_o g[oc, o].
 * Every sum is a left fold from 0 in the order (oc, o, k) of the walk below, then (for
 * convTranspose) its padded products. Each entry's magnitude is (number of its terms, >= 1) *
 * sum|terms|. Threads take input channels for dx and output channels for dW and db: each walks
 * the terms in the same order and keeps those of its own channels. */
static void cv_vjp_dx(void *ctx, int64_t lo, int64_t hi)
{
    cv_job *t = ctx;
    const cv_geom *g = &t->g;
    int64_t nin = ref_sp_count(&g->in), nk = ref_sp_count(&g->k), nout = ref_sp_count(&g->out);
    int64_t *src = cv_src_scratch(t);
    if (!src)
        return;
    const double *W = t->in[1].v, *G = t->gt->v;
    double *dx = t->grad[0].v;
    for (int64_t oc = 0; oc < g->cout; oc++) {
        int64_t grp = oc / g->cout_g;
        if ((grp + 1) * g->cin_g <= lo || grp * g->cin_g >= hi)
            continue;
        for (int64_t o = 0; o < nout; o++) {
            double gv = G[oc * nout + o];
            cv_sources(g, o, nk, src);
            for (int64_t icl = 0; icl < g->cin_g; icl++) {
                int64_t ic = grp * g->cin_g + icl, w0 = cv_wrow(g, oc, ic, nk);
                if (ic < lo || ic >= hi)
                    continue;
                for (int64_t kk = 0; kk < nk; kk++) {
                    if (src[kk] < 0)
                        continue;
                    int64_t xi = ic * nin + src[kk];
                    dx[xi] += W[w0 + kk] * gv;
                    t->absum[0][xi] += fabs(W[w0 + kk] * gv);
                    t->uses[0][xi]++;
                }
            }
        }
    }
    free(src);
}

static void cv_vjp_dw(void *ctx, int64_t lo, int64_t hi)
{
    cv_job *t = ctx;
    const cv_geom *g = &t->g;
    int64_t nin = ref_sp_count(&g->in), nk = ref_sp_count(&g->k), nout = ref_sp_count(&g->out);
    int64_t *src = cv_src_scratch(t);
    if (!src)
        return;
    const double *x = t->in[0].v, *G = t->gt->v;
    double *dW = t->grad[1].v, *db = t->grad[2].v;
    for (int64_t oc = lo; oc < hi; oc++) {
        int64_t grp = oc / g->cout_g;
        for (int64_t o = 0; o < nout; o++) {
            double gv = G[oc * nout + o];
            if (db) {
                db[oc] += gv;
                t->absum[2][oc] += fabs(gv);
                t->uses[2][oc]++;
            }
            if (!dW)
                continue;
            cv_sources(g, o, nk, src);
            for (int64_t icl = 0; icl < g->cin_g; icl++) {
                int64_t ic = grp * g->cin_g + icl, w0 = cv_wrow(g, oc, ic, nk);
                for (int64_t kk = 0; kk < nk; kk++) {
                    if (src[kk] < 0)
                        continue;
                    int64_t xi = ic * nin + src[kk], wi = w0 + kk;
                    dW[wi] += x[xi] * gv;
                    t->absum[1][wi] += fabs(x[xi] * gv);
                    t->uses[1][wi]++;
                }
            }
        }
    }
    free(src);
}

/* A gradient entry's three magnitudes from its terms' count and sum|terms| (the file comment). */
static void cv_set_sum_mags(const ref_mag *mag, int64_t i, int64_t uses, double abs_sum,
                            double value)
{
    double len = (double)(uses > 0 ? uses : 1);
    ref_mag_set(mag, i, len * abs_sum, fabs(value), sqrt(len) * abs_sum);
}

static ref_status cv_vjp(const ref_params *p, int n, const ref_tensor *in, const ref_tensor *gt,
                         ref_tensor *grad, const ref_mag *gmag, int transposed)
{
    cv_job t = {.in = in, .gt = gt, .grad = grad};
    cv_geom *g = &t.g;
    ref_shape shapes[3] = {in[0].shape, in[1].shape, in[2].shape};
    if (cv_geometry(p, n, shapes, transposed, g, NULL) != REF_OK)
        return REF_EINVAL;
    int64_t nin = ref_sp_count(&g->in);
    int64_t count[3] = {g->cin * nin, ref_numel(&in[1].shape), g->cout};
    ref_status st = REF_OK;
    for (int k = 0; k < 3; k++) {
        t.absum[k] = calloc((size_t)count[k] + 1, sizeof(double));
        t.uses[k] = calloc((size_t)count[k] + 1, sizeof(int64_t));
        if (!t.absum[k] || !t.uses[k])
            st = REF_ENOMEM;
        if (grad[k].v)
            memset(grad[k].v, 0, sizeof(double) * (size_t)count[k]);
    }
    if (st == REF_OK && grad[0].v)
        ref_parallel_for(p->threads, g->cin, 1, cv_vjp_dx, &t);
    if (st == REF_OK && (grad[1].v || grad[2].v))
        ref_parallel_for(p->threads, g->cout, 1, cv_vjp_dw, &t);
    if (st == REF_OK && transposed && (grad[0].v || grad[1].v))
        ref_parallel_for(p->threads, g->cin, 1, convt_padded_terms, &t);
    if (t.failed)
        st = REF_ENOMEM;
    for (int k = 0; st == REF_OK && k < 3; k++) {
        if (!grad[k].v || !gmag || !gmag[k].worst)
            continue;
        for (int64_t i = 0; i < count[k]; i++)
            cv_set_sum_mags(&gmag[k], i, t.uses[k][i], t.absum[k][i], grad[k].v[i]);
    }
    for (int k = 0; k < 3; k++)
        free(t.absum[k]), free(t.uses[k]);
    return st;
}

/* One entry of dx, alone: its terms in the walk's order (oc, o, k). Output o reads input cell i
 * through tap k when o is k's preimage of i (at most one per tap; with dilation 0 several taps
 * share one o, and they follow in tap order). */
typedef struct {
    int64_t o, kk;
} cv_tap;

static int cv_dx_taps(const cv_geom *g, int64_t i, cv_tap *taps)
{
    int64_t nk = ref_sp_count(&g->k), ii[3], ki[3] = {0, 0, 0};
    int count = 0;
    ref_sp_unravel(&g->in, i, ii);
    for (int64_t kk = 0; kk < nk; kk++, ref_sp_next(&g->k, ki)) {
        int64_t oi[3];
        int ok = 1;
        for (int a = 0; a < g->sr && ok; a++) {
            if (!g->transposed) { /* o s + k d - p = i */
                int64_t num = ii[a] + g->p[a] - ki[a] * g->d[a];
                ok = num >= 0 && num % g->s[a] == 0;
                oi[a] = ok ? num / g->s[a] : 0;
            } else { /* (o + p - k d) / s = i */
                oi[a] = ii[a] * g->s[a] - g->p[a] + ki[a] * g->d[a];
            }
        }
        int64_t o = ok ? ref_sp_ravel(&g->out, oi) : -1;
        if (o < 0)
            continue;
        int at = count++; /* insertion by o; equal o keep tap order */
        while (at > 0 && taps[at - 1].o > o) {
            taps[at] = taps[at - 1];
            at--;
        }
        taps[at] = (cv_tap){o, kk};
    }
    return count;
}

/* The output positions that read a cell through tap ki, per spatial axis: the coordinates o_a
 * whose source i_a exists (cv_source's rule on that axis alone), as their parts of the flat
 * output and input indices (os[a][], is[a][], count[a]); axes past the spatial rank get the one
 * entry 0. The positions are then the row-major product of the axes, in increasing flat o, so
 * a walk over it visits exactly the positions cv_source accepts, in the same order, without
 * testing every output position. buf holds 2 (out[0] + out[1] + out[2] + 3) entries. */
static void cv_tap_axes(const cv_geom *g, const int64_t ki[3], int64_t *buf, int64_t *os[3],
                        int64_t *is[3], int64_t count[3])
{
    int64_t so = 1, si = 1;
    for (int a = 2; a >= 0; a--) {
        int64_t ext = a < g->sr ? g->out.d[a] : 1;
        os[a] = buf, is[a] = buf + ext, buf += 2 * ext + 2;
        count[a] = 0;
        if (a >= g->sr) {
            os[a][0] = is[a][0] = 0;
            count[a] = 1;
            continue;
        }
        for (int64_t o = 0; o < ext; o++) {
            int64_t i;
            if (!g->transposed) {
                i = o * g->s[a] + ki[a] * g->d[a] - g->p[a];
            } else {
                int64_t num = o + g->p[a] - ki[a] * g->d[a];
                if (num < 0 || num % g->s[a] != 0)
                    continue;
                i = num / g->s[a];
            }
            if (i < 0 || i >= g->in.d[a])
                continue;
            os[a][count[a]] = o * so;
            is[a][count[a]] = i * si;
            count[a]++;
        }
        so *= g->out.d[a];
        si *= g->in.d[a];
    }
}

static ref_status cv_vjp_at(const ref_params *p, int n, const ref_tensor *in,
                            const ref_tensor *gt, int wrt, ref_picks *pk, int transposed)
{
    cv_geom g;
    ref_shape shapes[3] = {in[0].shape, in[1].shape, in[2].shape};
    if (cv_geometry(p, n, shapes, transposed, &g, NULL) != REF_OK)
        return REF_EINVAL;
    int64_t nin = ref_sp_count(&g.in), nk = ref_sp_count(&g.k), nout = ref_sp_count(&g.out);
    const double *x = in[0].v, *W = in[1].v, *G = gt->v;
    cv_tap *taps = malloc(sizeof(cv_tap) * (size_t)(nk + 1));
    int64_t *axes = malloc(sizeof(int64_t) * (size_t)(2 * (g.out.d[0] + g.out.d[1] + g.out.d[2]) + 8));
    if (!taps || !axes) {
        free(taps), free(axes);
        return REF_ENOMEM;
    }
    for (int64_t e = 0; e < pk->count; e++) {
        int64_t f = pk->at[e], uses = 0;
        double s = 0.0, s_abs = 0.0;
        if (wrt == 0) { /* dx[ic, i] */
            int64_t ic = f / nin, i = f % nin, grp = ic / g.cin_g;
            int nt = cv_dx_taps(&g, i, taps);
            for (int64_t oc = grp * g.cout_g; oc < (grp + 1) * g.cout_g; oc++)
                for (int k = 0; k < nt; k++) {
                    double term = W[cv_wrow(&g, oc, ic, nk) + taps[k].kk] * G[oc * nout + taps[k].o];
                    s += term;
                    s_abs += fabs(term);
                    uses++;
                }
            if (transposed) {
                int64_t ii[3], ki[3] = {0, 0, 0};
                ref_sp_unravel(&g.in, i, ii);
                for (int64_t kk = 0; kk < nk; kk++, ref_sp_next(&g.k, ki))
                    if (convt_outside(&g, ii, ki))
                        for (int64_t ocl = 0; ocl < g.cout_g; ocl++)
                            s += W[cv_wrow(&g, grp * g.cout_g + ocl, ic, nk) + kk] * 0.0;
            }
        } else if (wrt == 1) { /* dW[w]: conv (oc, ic', k), convTranspose (ic, oc', k) */
            int64_t kk = f % nk, row = f / nk, oc, ic;
            if (!transposed) {
                oc = row / g.cin_g;
                ic = oc / g.cout_g * g.cin_g + row % g.cin_g;
            } else {
                ic = row / g.cout_g;
                oc = ic / g.cin_g * g.cout_g + row % g.cout_g;
            }
            int64_t ki[3], *os[3], *is[3], cnt[3];
            ref_sp_unravel(&g.k, kk, ki);
            cv_tap_axes(&g, ki, axes, os, is, cnt);
            const double *xc = x + ic * nin, *Gc = G + oc * nout;
            for (int64_t t0 = 0; t0 < cnt[0]; t0++) /* the outputs reading through tap kk */
                for (int64_t t1 = 0; t1 < cnt[1]; t1++) {
                    int64_t o01 = os[0][t0] + os[1][t1], i01 = is[0][t0] + is[1][t1];
                    for (int64_t t2 = 0; t2 < cnt[2]; t2++) {
                        double term = xc[i01 + is[2][t2]] * Gc[o01 + os[2][t2]];
                        s += term;
                        s_abs += fabs(term);
                    }
                }
            uses = cnt[0] * cnt[1] * cnt[2];
            if (transposed) {
                int64_t ii[3] = {0, 0, 0};
                for (int64_t i = 0; i < nin; i++, ref_sp_next(&g.in, ii))
                    if (convt_outside(&g, ii, ki))
                        s += x[ic * nin + i] * 0.0;
            }
        } else { /* db[oc] */
            for (int64_t o = 0; o < nout; o++) {
                s += G[f * nout + o];
                s_abs += fabs(G[f * nout + o]);
                uses++;
            }
        }
        pk->v[e] = s;
        if (pk->mag.worst)
            cv_set_sum_mags(&pk->mag, e, uses, s_abs, s);
    }
    free(taps), free(axes);
    return REF_OK;
}

/* Work of one element: the terms of an output (inC/groups taps), of a dx entry (outC/groups
 * taps), of a dW entry (every output position) and of db (every output position). */
static double cv_work(const ref_params *p, int n, const ref_shape *in, int wrt, int transposed)
{
    cv_geom g;
    ref_err e;
    if (cv_geometry(p, n, in, transposed, &g, &e) != REF_OK)
        return 0.0;
    double nk = (double)ref_sp_count(&g.k), nout = (double)ref_sp_count(&g.out);
    if (wrt < 0)
        return (double)g.cin_g * nk;
    return wrt == 0 ? (double)g.cout_g * nk : nout;
}

static ref_status conv_vjp(const ref_params *p, int n, const ref_tensor *in, const ref_tensor *y,
                           const ref_tensor *g, ref_tensor *grad, const ref_mag *gmag)
{
    (void)y;
    return cv_vjp(p, n, in, g, grad, gmag, 0);
}

static ref_status conv_t_vjp(const ref_params *p, int n, const ref_tensor *in,
                             const ref_tensor *y, const ref_tensor *g, ref_tensor *grad,
                             const ref_mag *gmag)
{
    (void)y;
    return cv_vjp(p, n, in, g, grad, gmag, 1);
}

static ref_status conv_fwd_at(const ref_params *p, int n, const ref_tensor *in, ref_picks *pk)
{
    return cv_forward_at(p, n, in, pk, 0);
}

static ref_status conv_t_fwd_at(const ref_params *p, int n, const ref_tensor *in, ref_picks *pk)
{
    return cv_forward_at(p, n, in, pk, 1);
}

static ref_status conv_vjp_at_one(const ref_params *p, int n, const ref_tensor *in,
                                  const ref_tensor *g, int wrt, ref_picks *pk)
{
    return cv_vjp_at(p, n, in, g, wrt, pk, 0);
}

static ref_status conv_t_vjp_at_one(const ref_params *p, int n, const ref_tensor *in,
                                    const ref_tensor *g, int wrt, ref_picks *pk)
{
    return cv_vjp_at(p, n, in, g, wrt, pk, 1);
}

static ref_status conv_vjp_at(const ref_params *p, int n, const ref_tensor *in,
                              const ref_tensor *g, ref_picks *pk)
{
    return ref_vjp_at_each(conv_vjp_at_one, p, n, in, g, pk);
}

static ref_status conv_t_vjp_at(const ref_params *p, int n, const ref_tensor *in,
                                const ref_tensor *g, ref_picks *pk)
{
    return ref_vjp_at_each(conv_t_vjp_at_one, p, n, in, g, pk);
}

static double conv_work(const ref_params *p, int n, const ref_shape *in, int wrt)
{
    return cv_work(p, n, in, wrt, 0);
}

static double conv_t_work(const ref_params *p, int n, const ref_shape *in, int wrt)
{
    return cv_work(p, n, in, wrt, 1);
}

/* ---- samplers ----------------------------------------------------------------------------- */

/* A random case: spatial rank from the requested rank of x (clamped to 2..4, i.e. 1..3 spatial
 * axes), groups 1 or 2, dilation 1 or 2 (dilation 0 lives in the exact tests: ATen rejects it),
 * kernels 1..3 that fit the padded input so the output is nonempty; zero_dim empties inC, outC
 * or one spatial axis of x. */
static ref_status sample_conv_impl(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                   ref_shape *in, int transposed)
{
    int sr = ref_sample_spatial_rank(r, req);
    conv_defaults(p);
    p->spatial = sr;
    p->groups = ref_rng_range(r, 1, 2);
    int64_t max_elems = req->max_elems > 1 ? req->max_elems : 1;
    int64_t cin_g = ref_rng_range(r, 1, 2), cout_g = ref_rng_range(r, 1, 2);
    while (cin_g * p->groups > max_elems && p->groups > 1)
        p->groups--;
    if (cin_g * p->groups > max_elems)
        cin_g = 1;
    int64_t cin = cin_g * p->groups, cout = cout_g * p->groups;
    ref_shape sp;
    ref_sample_shape(r, sr, max_elems / cin, 0, &sp);
    int64_t k[3];
    for (int a = 0; a < sr; a++) {
        int64_t in_a = sp.dim[a];
        p->stride[a] = ref_rng_range(r, 1, 2);
        p->dil[a] = ref_rng_range(r, 0, 3) == 0 ? 2 : 1;
        k[a] = ref_rng_range(r, 1, 3);
        if (!transposed) {
            p->pad[a] = ref_rng_range(r, 0, 1);
            while (k[a] > 1 && p->dil[a] * (k[a] - 1) + 1 > in_a + 2 * p->pad[a])
                k[a]--;
        } else {
            int64_t room = (in_a - 1) * p->stride[a] + p->dil[a] * (k[a] - 1);
            int64_t pmax = room / 2 < 1 ? room / 2 : 1;
            p->pad[a] = ref_rng_range(r, 0, pmax);
        }
        p->kernel[a] = k[a];
    }
    if (req->zero_dim) {
        int z = (int)ref_rng_range(r, 0, 2);
        if (z == 0)
            cin_g = cin = 0;
        else if (z == 1)
            cout_g = cout = 0;
        else
            sp.dim[ref_rng_range(r, 0, sr - 1)] = 0;
    }
    in[0].rank = sr + 1;
    in[0].dim[0] = cin;
    in[1].rank = sr + 2;
    in[1].dim[0] = transposed ? cin : cout;
    in[1].dim[1] = transposed ? cout_g : cin_g;
    for (int a = 0; a < sr; a++) {
        in[0].dim[a + 1] = sp.dim[a];
        in[1].dim[a + 2] = k[a];
    }
    in[2].rank = 1;
    in[2].dim[0] = cout;
    *n = 3;
    return REF_OK;
}

static ref_status sample_conv(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                              ref_shape *in)
{
    return sample_conv_impl(r, req, p, n, in, 0);
}

static ref_status sample_conv_t(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                ref_shape *in)
{
    return sample_conv_impl(r, req, p, n, in, 1);
}

const ref_op ref_family_conv[] = {
    {.name = "conv", .report_name = "conv", .min_inputs = 3, .max_inputs = 3,
     .input_names = {"x", "weight", "bias"}, .params = REF_P_WINDOW | REF_P_GROUPS,
     .requires_vjp = 1, .c_fwd = 2, .c_vjp = 2,
     .note = "one sample [C, spatial...]; dilation 0 accepted as extent 1 (ATen rejects it); "
             "outputs with no real input cell (inC = 0, or padding only) are the bias",
     .set_defaults = conv_defaults, .shape = conv_shape, .forward = conv_fwd, .vjp = conv_vjp,
     .sample = sample_conv, .forward_at = conv_fwd_at, .vjp_at = conv_vjp_at,
     .work = conv_work},
    {.name = "convTranspose", .report_name = "conv_transpose", .min_inputs = 3, .max_inputs = 3,
     .input_names = {"x", "weight", "bias"}, .params = REF_P_WINDOW | REF_P_GROUPS,
     .requires_vjp = 1, .c_fwd = 2, .c_vjp = 2,
     .note = "weight [inC, outC/groups, k...]; groups > 1 as PyTorch defines them (TorchLean has "
             "groups 1 only); output_padding 0; in, k or stride 0 gives an empty output",
     .set_defaults = conv_defaults, .shape = conv_t_shape, .forward = conv_t_fwd,
     .vjp = conv_t_vjp, .sample = sample_conv_t, .forward_at = conv_t_fwd_at,
     .vjp_at = conv_t_vjp_at, .work = conv_t_work},
};
const int ref_family_conv_count = (int)(sizeof ref_family_conv / sizeof ref_family_conv[0]);
