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

/* The input cell read by output o (flat) through each tap kk (flat, row-major over the kernel),
 * into src[kk], or -1 where there is none (a padded cell for conv; a non-integer or out-of-range
 * source for convTranspose). Output o is unravelled once and the taps walked in order. */
static void cv_sources(const cv_geom *g, int64_t o, int64_t nk, int64_t *src)
{
    int64_t oi[3], ki[3] = {0, 0, 0}, ii[3];
    ref_sp_unravel(&g->out, o, oi);
    for (int64_t kk = 0; kk < nk; kk++, ref_sp_next(&g->k, ki)) {
        int inside = 1;
        for (int a = 0; a < g->sr; a++) {
            if (!g->transposed) {
                ii[a] = oi[a] * g->s[a] + ki[a] * g->d[a] - g->p[a];
            } else {
                int64_t num = oi[a] + g->p[a] - ki[a] * g->d[a];
                if (num < 0 || num % g->s[a] != 0)
                    inside = 0;
                else
                    ii[a] = num / g->s[a];
            }
        }
        src[kk] = inside ? ref_sp_ravel(&g->in, ii) : -1;
    }
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
 * inC/groups * prod(k)). */
static ref_status cv_forward(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                             const ref_mag *mags, int transposed)
{
    cv_geom g;
    ref_shape shapes[3] = {in[0].shape, in[1].shape, in[2].shape};
    if (cv_geometry(p, n, shapes, transposed, &g, NULL) != REF_OK)
        return REF_EINVAL;
    int64_t nin = ref_sp_count(&g.in), nk = ref_sp_count(&g.k), nout = ref_sp_count(&g.out);
    const double *x = in[0].v, *W = in[1].v, *b = in[2].v;
    int64_t *src = malloc(sizeof(int64_t) * (size_t)(nk + 1));
    if (!src)
        return REF_ENOMEM;
    for (int64_t oc = 0; oc < g.cout; oc++) {
        int64_t grp = oc / g.cout_g;
        for (int64_t o = 0; o < nout; o++) {
            double s = 0.0, s_abs = 0.0;
            int64_t terms = transposed ? 0 : g.cin_g * nk;
            cv_sources(&g, o, nk, src);
            for (int64_t icl = 0; icl < g.cin_g; icl++) {
                int64_t ic = grp * g.cin_g + icl;
                const double *xc = x + ic * nin, *w = W + cv_wrow(&g, oc, ic, nk);
                for (int64_t kk = 0; kk < nk; kk++) {
                    if (src[kk] < 0) {
                        /* conv: x_pad's zero times W, as the formula reads (exactly 0 for a
                         * finite weight, NaN for a NaN or infinite one, as im2col gives);
                         * convTranspose: the term does not exist */
                        if (!transposed)
                            s += 0.0 * w[kk];
                        continue;
                    }
                    double t = xc[src[kk]] * w[kk];
                    s += t;
                    s_abs += fabs(t);
                    if (transposed)
                        terms++;
                }
            }
            out->v[oc * nout + o] = s + b[oc];
            if (mags)
                ref_mag_set(mags, oc * nout + o, (double)(terms + 1) * (s_abs + fabs(b[oc])),
                            fabs(s) + fabs(s + b[oc]),
                            (sqrt((double)terms) + 1.0) * (s_abs + fabs(b[oc])));
        }
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
 * exactly 0 for finite values, NaN for a NaN or infinite one. Those products are added here
 * (the term walk of cv_vjp only visits the taps that land inside y). dx or dW may be NULL. */
static void convt_padded_terms(const cv_geom *g, const double *x, const double *W, double *dx,
                               double *dW)
{
    int64_t nin = ref_sp_count(&g->in), nk = ref_sp_count(&g->k);
    for (int64_t ic = 0; ic < g->cin; ic++) {
        int64_t grp = ic / g->cin_g, ii[3] = {0, 0, 0};
        for (int64_t i = 0; i < nin; i++, ref_sp_next(&g->in, ii)) {
            int64_t ki[3] = {0, 0, 0}, oi[3];
            for (int64_t kk = 0; kk < nk; kk++, ref_sp_next(&g->k, ki)) {
                for (int a = 0; a < g->sr; a++)
                    oi[a] = ii[a] * g->s[a] + ki[a] * g->d[a] - g->p[a];
                if (ref_sp_ravel(&g->out, oi) >= 0)
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
 * Each entry's magnitude is (number of its terms, >= 1) * sum|terms|. */
static ref_status cv_vjp(const ref_params *p, int n, const ref_tensor *in, const ref_tensor *gt,
                         ref_tensor *grad, const ref_mag *gmag, int transposed)
{
    cv_geom g;
    ref_shape shapes[3] = {in[0].shape, in[1].shape, in[2].shape};
    if (cv_geometry(p, n, shapes, transposed, &g, NULL) != REF_OK)
        return REF_EINVAL;
    int64_t nin = ref_sp_count(&g.in), nk = ref_sp_count(&g.k), nout = ref_sp_count(&g.out);
    int64_t count[3] = {g.cin * nin, ref_numel(&in[1].shape), g.cout};
    double *absum[3] = {0};
    int64_t *uses[3] = {0};
    int64_t *src = malloc(sizeof(int64_t) * (size_t)(nk + 1));
    ref_status st = src ? REF_OK : REF_ENOMEM;
    for (int t = 0; t < 3; t++) {
        absum[t] = calloc((size_t)count[t] + 1, sizeof(double));
        uses[t] = calloc((size_t)count[t] + 1, sizeof(int64_t));
        if (!absum[t] || !uses[t])
            st = REF_ENOMEM;
        if (grad[t].v)
            memset(grad[t].v, 0, sizeof(double) * (size_t)count[t]);
    }
    const double *x = in[0].v, *W = in[1].v, *G = gt->v;
    for (int64_t oc = 0; st == REF_OK && oc < g.cout; oc++) {
        int64_t grp = oc / g.cout_g;
        for (int64_t o = 0; o < nout; o++) {
            double gv = G[oc * nout + o];
            if (grad[2].v) {
                grad[2].v[oc] += gv;
                absum[2][oc] += fabs(gv);
                uses[2][oc]++;
            }
            cv_sources(&g, o, nk, src);
            for (int64_t icl = 0; icl < g.cin_g; icl++) {
                int64_t ic = grp * g.cin_g + icl, w0 = cv_wrow(&g, oc, ic, nk);
                for (int64_t kk = 0; kk < nk; kk++) {
                    if (src[kk] < 0)
                        continue;
                    int64_t xi = ic * nin + src[kk], wi = w0 + kk;
                    if (grad[0].v) {
                        grad[0].v[xi] += W[wi] * gv;
                        absum[0][xi] += fabs(W[wi] * gv);
                        uses[0][xi]++;
                    }
                    if (grad[1].v) {
                        grad[1].v[wi] += x[xi] * gv;
                        absum[1][wi] += fabs(x[xi] * gv);
                        uses[1][wi]++;
                    }
                }
            }
        }
    }
    if (st == REF_OK && transposed)
        convt_padded_terms(&g, x, W, grad[0].v, grad[1].v);
    for (int t = 0; st == REF_OK && t < 3; t++) {
        if (!grad[t].v || !gmag || !gmag[t].worst)
            continue;
        for (int64_t i = 0; i < count[t]; i++) {
            double len = (double)(uses[t][i] > 0 ? uses[t][i] : 1);
            ref_mag_set(&gmag[t], i, len * absum[t][i], fabs(grad[t].v[i]),
                        sqrt(len) * absum[t][i]);
        }
    }
    for (int t = 0; t < 3; t++)
        free(absum[t]), free(uses[t]);
    free(src);
    return st;
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
     .sample = sample_conv},
    {.name = "convTranspose", .report_name = "conv_transpose", .min_inputs = 3, .max_inputs = 3,
     .input_names = {"x", "weight", "bias"}, .params = REF_P_WINDOW | REF_P_GROUPS,
     .requires_vjp = 1, .c_fwd = 2, .c_vjp = 2,
     .note = "weight [inC, outC/groups, k...]; groups > 1 as PyTorch defines them (TorchLean has "
             "groups 1 only); output_padding 0; in, k or stride 0 gives an empty output",
     .set_defaults = conv_defaults, .shape = conv_t_shape, .forward = conv_t_fwd,
     .vjp = conv_t_vjp, .sample = sample_conv_t},
};
const int ref_family_conv_count = (int)(sizeof ref_family_conv / sizeof ref_family_conv[0]);
