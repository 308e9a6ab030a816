/* Composite ops (ops.md K): fftFno, selectiveScan, attention.
 *
 * Each is written as the plain formula: the transforms as O(n^2) DFT sums in float64, the scan
 * as the left-to-right recurrence, attention as explicit scores, row softmax and products. */
#include "ref_families.h"
#include "ref_parallel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* ======================================================================================== */
/* fftFno: rfft1d, irfft1d and the FNO spectral convolution built on them.
 *
 * Packed real spectra: bin k in 0..K-1, K = floor(n/2) + 1, stored as (re, im). theta =
 * 2 pi t k / n. A bin is an "endpoint" when k = 0 (DC) or 2k = n (Nyquist, even n); m_k = 1 at
 * endpoints and 2 for interior bins; iota_k = 0 at endpoints, 1 otherwise (endpoint imaginary
 * parts are exactly 0 in rfft and ignored by irfft).
 *   rfft1d  (variant 1): x [batch, n], n >= 1 -> [batch, K, 2];
 *           X_k = sum_t x_t (cos theta, -iota_k sin theta)           (unnormalized)
 *   irfft1d (variant 2): z [batch, K, 2], params.length = n >= 1 -> [batch, n];
 *           x_t = sum_k (m_k / n) (Re_k cos theta - iota_k Im_k sin theta)
 *   spectralConv (variant 0): x [grid, width], Wre/Wim [modes, width, width], params.modes =
 *           modes, 0 <= modes <= K(grid); X = rfft over grid per channel; for k < modes
 *           Y_k[o] = sum_i X_k[i] (Wre[k,i,o] + i Wim[k,i,o]) (no conjugation), bins >= modes are
 *           zero; y = irfft (normalized, length grid) per channel -> [grid, width].
 * Adjoints (real pairing of the packed layout, ops.md K):
 *   rfft*(G)_t  = sum_k (Gr_k cos theta - iota_k Gi_k sin theta)   (= unnormalized irfft(G/m))
 *   irfft*(g)_k = (m_k / n) rfft(g)_k, endpoint imaginaries 0.
 *
 * Error model (units of u). Any correct provider (FFT of any radix or Bluestein, or a dense DFT
 * matrix through a matmul as TorchLean's CPU path) computes each output as a length-n sum: its
 * error is within n sum|terms| plus the twiddle (matrix entry) rounding and a spare:
 *   rfft:   m = (n + 2) sum_t |x_t| for both parts of every bin. Endpoint imaginaries are exactly
 *           0 here but get the same m: ops.md notes TorchLean's CUDA forward does not force
 *           them, so a rounding-level value there is within the contract's tolerance.
 *   irfft:  m_t = (n + 2) sum_k (m_k/n) (|Re_k| + iota_k |Im_k|).
 *   VJPs add one rounding for the bin weights: (n + 3) in place of (n + 2).
 *   spectralConv: with A_i = sum_t |x_ti|, |X|_1 = |Xr| + |Xi|, |W|_1 = |Wr| + |Wi|:
 *     X error eX_i = (n + 2) A_i; MY_k[o] = sum_i |X_k[i]|_1 |W_k,i,o|_1 bounds |Yr|, |Yi|;
 *     eY_k[o] = (2 width + 1) MY_k[o] + sum_i |W_k,i,o|_1 eX_i (length-2width mixing sums);
 *     m(y_t[o]) = sum_{k < modes} (m_k/n) (1 + iota_k) ((n + 2) MY_k[o] + eY_k[o]).
 *   c_fwd = c_vjp = 2.
 * Strict f16/bf16: no split (an FFT's butterflies may run in the dtype; ATen has no f16/bf16
 * FFT on CPU). prob for rfft1d/irfft1d and their adjoints: n becomes sqrt(n); spectralConv has
 * none (never suspect). */

static int fft_endpoint(int64_t k, int64_t n)
{
    return k == 0 || 2 * k == n;
}

/* m_k / n, the weight of bin k in the normalized inverse. */
static double fft_weight(int64_t k, int64_t n)
{
    return (fft_endpoint(k, n) ? 1.0 : 2.0) / (double)n;
}

/* cos and sin of 2 pi r / n for 0 <= r < n, exact at the quarter points. */
static void twiddle(int64_t r, int64_t n, double *c, double *s)
{
    if (r == 0) {
        *c = 1.0, *s = 0.0;
    } else if (2 * r == n) {
        *c = -1.0, *s = 0.0;
    } else if (4 * r == n) {
        *c = 0.0, *s = 1.0;
    } else if (4 * r == 3 * n) {
        *c = 0.0, *s = -1.0;
    } else {
        double th = 2.0 * M_PI * (double)r / (double)n;
        *c = cos(th);
        *s = sin(th);
    }
}

/* The twiddles of one transform length n: c[r], s[r] = twiddle(r, n) for every r < n, made once
 * per call so the O(n^2) sums below look them up instead of calling cos and sin per term. */
typedef struct {
    int64_t n;
    double *c, *s;
} twiddle_table;

static void twiddles_free(twiddle_table *t)
{
    free(t->c), free(t->s);
    t->c = t->s = NULL;
}

static ref_status twiddles_make(int64_t n, twiddle_table *t)
{
    t->n = n;
    t->c = malloc(sizeof(double) * (size_t)(n + 1));
    t->s = malloc(sizeof(double) * (size_t)(n + 1));
    if (!t->c || !t->s) {
        twiddles_free(t);
        return REF_ENOMEM;
    }
    for (int64_t r = 0; r < n; r++)
        twiddle(r, n, &t->c[r], &t->s[r]);
    return REF_OK;
}

/* Bin k of the forward real DFT of one signal x_t = x[t * xs], t < n = tw->n. The twiddle
 * index r = (t k) mod n steps by k (k < n) instead of a product and a division per term. */
static void dft_bin(const twiddle_table *tw, const double *x, int64_t xs, int64_t k, double *re,
                    double *im)
{
    int64_t n = tw->n;
    double sr = 0.0, si = 0.0;
    for (int64_t t = 0, r = 0; t < n; t++, r = r + k < n ? r + k : r + k - n) {
        sr += x[t * xs] * tw->c[r];
        si -= x[t * xs] * tw->s[r];
    }
    *re = sr;
    *im = fft_endpoint(k, n) ? 0.0 : si;
}

/* Bins k < nbins (<= K) into re/im[k*os]. */
static void dft_forward(const twiddle_table *tw, const double *x, int64_t xs, int64_t nbins,
                        double *re, double *im, int64_t os)
{
    for (int64_t k = 0; k < nbins; k++)
        dft_bin(tw, x, xs, k, &re[k * os], &im[k * os]);
}

/* Point t of the inverse-shaped sum x_t = sum_{k < nbins} w_k (Re_k cos - iota_k Im_k sin),
 * w_k = m_k/n when normalized (irfft) or 1 (the rfft adjoint); n = tw->n, r = (t k) mod n steps
 * by t. */
static double dft_point(const twiddle_table *tw, const double *re, const double *im, int64_t is,
                        int64_t nbins, int normalized, int64_t t)
{
    int64_t n = tw->n;
    double s_t = 0.0;
    for (int64_t k = 0, r = 0; k < nbins; k++, r = r + t < n ? r + t : r + t - n) {
        double w = normalized ? fft_weight(k, n) : 1.0;
        s_t += w * (re[k * is] * tw->c[r] - (fft_endpoint(k, n) ? 0.0 : im[k * is] * tw->s[r]));
    }
    return s_t;
}

static void dft_inverse(const twiddle_table *tw, const double *re, const double *im, int64_t is,
                        int64_t nbins, int normalized, double *x, int64_t xs)
{
    for (int64_t t = 0; t < tw->n; t++)
        x[t * xs] = dft_point(tw, re, im, is, nbins, normalized, t);
}

static ref_status fft_fno_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                                ref_err *e)
{
    char sx[96];
    ref_shape_fmt(&in[0], sx, sizeof sx);
    if (p->variant < 0 || p->variant > 2)
        return ref_err_set(e, "fftFno variant must be 0 (spectralConv), 1 (rfft1d) or 2 "
                              "(irfft1d), got %d", p->variant);
    int want = p->variant == 0 ? 3 : 1;
    if (n != want)
        return ref_err_set(e, "fftFno variant %d takes %d input%s, got %d", p->variant, want,
                           want == 1 ? "" : "s (x, wre, wim)", n);
    const ref_shape *x = &in[0];
    if (p->variant == 1) {
        if (x->rank != 2 || x->dim[1] < 1)
            return ref_err_set(e, "rfft1d wants x [batch, n] with n >= 1, got %s", sx);
        out->rank = 3;
        out->dim[0] = x->dim[0];
        out->dim[1] = x->dim[1] / 2 + 1;
        out->dim[2] = 2;
        return REF_OK;
    }
    if (p->variant == 2) {
        if (p->length < 1)
            return ref_err_set(e, "irfft1d needs the signal length param length >= 1, got %lld",
                               (long long)p->length);
        if (x->rank != 3 || x->dim[1] != p->length / 2 + 1 || x->dim[2] != 2)
            return ref_err_set(e, "irfft1d of length %lld wants z [batch, %lld, 2], got %s",
                               (long long)p->length, (long long)(p->length / 2 + 1), sx);
        out->rank = 2;
        out->dim[0] = x->dim[0];
        out->dim[1] = p->length;
        return REF_OK;
    }
    if (x->rank != 2 || x->dim[0] < 1)
        return ref_err_set(e, "spectralConv wants x [grid, width] with grid >= 1, got %s", sx);
    int64_t K = x->dim[0] / 2 + 1;
    if (p->modes < 0 || p->modes > K)
        return ref_err_set(e, "spectralConv modes must be in 0..%lld (grid/2+1 for grid %lld), "
                              "got %lld", (long long)K, (long long)x->dim[0],
                           (long long)p->modes);
    for (int k = 1; k <= 2; k++) {
        const ref_shape *w = &in[k];
        if (w->rank != 3 || w->dim[0] != p->modes || w->dim[1] != x->dim[1] ||
            w->dim[2] != x->dim[1]) {
            char sw[96];
            ref_shape_fmt(w, sw, sizeof sw);
            return ref_err_set(e, "spectralConv %s must be [modes, width, width] = [%lld, %lld, "
                                  "%lld], got %s", k == 1 ? "wre" : "wim", (long long)p->modes,
                               (long long)x->dim[1], (long long)x->dim[1], sw);
        }
    }
    *out = *x;
    return REF_OK;
}

/* Spectral-convolution intermediates: X (rfft of every channel, first `modes` bins), Y (mixed),
 * and the error-model pieces. Arrays are [modes, width] row-major. */
typedef struct {
    int64_t n, w, M;
    double *Xr, *Xi, *Yr, *Yi, *MY, *eY, *A;
    twiddle_table tw; /* of length n */
} sc_state;

static void sc_free(sc_state *s)
{
    free(s->Xr), free(s->Xi), free(s->Yr), free(s->Yi), free(s->MY), free(s->eY), free(s->A);
    twiddles_free(&s->tw);
}

static ref_status sc_compute(const ref_tensor *in, int64_t modes, sc_state *s)
{
    s->n = in[0].shape.dim[0];
    s->w = in[0].shape.dim[1];
    s->M = modes;
    size_t mw = (size_t)(s->M * s->w + 1);
    s->Xr = calloc(mw, sizeof(double)), s->Xi = calloc(mw, sizeof(double));
    s->Yr = calloc(mw, sizeof(double)), s->Yi = calloc(mw, sizeof(double));
    s->MY = calloc(mw, sizeof(double)), s->eY = calloc(mw, sizeof(double));
    s->A = calloc((size_t)s->w + 1, sizeof(double));
    s->tw.c = s->tw.s = NULL;
    if (!s->Xr || !s->Xi || !s->Yr || !s->Yi || !s->MY || !s->eY || !s->A ||
        twiddles_make(s->n, &s->tw) != REF_OK) {
        sc_free(s);
        return REF_ENOMEM;
    }
    int64_t n = s->n, w = s->w, M = s->M;
    const double *x = in[0].v, *Wr = in[1].v, *Wi = in[2].v;
    for (int64_t i = 0; i < w; i++) {
        dft_forward(&s->tw, x + i, w, M, s->Xr + i, s->Xi + i, w);
        for (int64_t t = 0; t < n; t++)
            s->A[i] += fabs(x[t * w + i]);
    }
    for (int64_t k = 0; k < M; k++)
        for (int64_t o = 0; o < w; o++) {
            double yr = 0.0, yi = 0.0, my = 0.0, prop = 0.0;
            for (int64_t i = 0; i < w; i++) {
                double xr = s->Xr[k * w + i], xi = s->Xi[k * w + i];
                double wr = Wr[(k * w + i) * w + o], wi = Wi[(k * w + i) * w + o];
                yr += xr * wr - xi * wi;
                yi += xr * wi + xi * wr;
                my += (fabs(xr) + fabs(xi)) * (fabs(wr) + fabs(wi));
                prop += (fabs(wr) + fabs(wi)) * (double)(n + 2) * s->A[i];
            }
            s->Yr[k * w + o] = yr;
            s->Yi[k * w + o] = yi;
            s->MY[k * w + o] = my;
            s->eY[k * w + o] = (double)(2 * w + 1) * my + prop;
        }
    return REF_OK;
}

/* The magnitude of every y[t, o] (one value per channel o). */
static double sc_out_mag(const sc_state *s, int64_t o)
{
    double m = 0.0;
    for (int64_t k = 0; k < s->M; k++)
        m += fft_weight(k, s->n) * (fft_endpoint(k, s->n) ? 1.0 : 2.0) *
             ((double)(s->n + 2) * s->MY[k * s->w + o] + s->eY[k * s->w + o]);
    return m;
}

static ref_status spectral_conv_fwd(const ref_params *p, const ref_tensor *in, ref_tensor *out,
                                    const ref_mag *mags)
{
    double *mag = ref_mag_worst(mags);
    sc_state s;
    ref_status st = sc_compute(in, p->modes, &s);
    if (st != REF_OK)
        return st;
    int64_t n = s.n, w = s.w;
    for (int64_t o = 0; o < w; o++) {
        dft_inverse(&s.tw, s.Yr + o, s.Yi + o, w, s.M, 1, out->v + o, w);
        if (mag) {
            double m = sc_out_mag(&s, o);
            for (int64_t t = 0; t < n; t++)
                mag[t * w + o] = m;
        }
    }
    sc_free(&s);
    return REF_OK;
}

/* Picked y[t, o]: the spectra (X, Y) in full, the inverse only at the picks. */
static ref_status spectral_conv_fwd_at(const ref_params *p, const ref_tensor *in, ref_picks *pk)
{
    sc_state s;
    ref_status st = sc_compute(in, p->modes, &s);
    if (st != REF_OK)
        return st;
    for (int64_t e = 0; e < pk->count; e++) {
        int64_t t = pk->at[e] / s.w, o = pk->at[e] % s.w;
        pk->v[e] = dft_point(&s.tw, s.Yr + o, s.Yi + o, s.w, s.M, 1, t);
        if (pk->mag.worst)
            pk->mag.worst[e] = sc_out_mag(&s, o);
    }
    sc_free(&s);
    return REF_OK;
}

/* spectralConv VJP (see the family comment for the adjoints):
 *   GY_k[o] = (m_k/n) rfft(g[:, o])_k (endpoint imaginary 0), for k < modes;
 *   dWr[k,i,o] = GYr Xr + GYi Xi;   dWi[k,i,o] = GYi Xr - GYr Xi;
 *   dXr_k[i] = sum_o GYr Wr + GYi Wi;   dXi_k[i] = sum_o GYi Wr - GYr Wi;
 *   dx[:, i] = rfft*(dX[:, i]).
 * Error (units of u), AG_o = sum_t |g_to|, eGY_k[o] = (m_k/n)(n + 3) AG_o (both parts):
 *   m(dW) = 3 |X|_1 |GY|_1 + |X|_1 eGY + |GY|_1 (n + 2) A_i;
 *   MdX_k[i] = sum_o |GY|_1 |W|_1, edX = (2 width + 1) MdX + sum_o |W|_1 eGY;
 *   m(dx_t[i]) = sum_{k < modes} (1 + iota_k) ((n + 3) MdX_k[i] + edX_k[i]). */
typedef struct {
    sc_state s;
    double *GYr, *GYi, *dXr, *dXi, *mdx, *AG;
} sc_vjp_state;

static void sc_vjp_free(sc_vjp_state *v)
{
    free(v->GYr), free(v->GYi), free(v->dXr), free(v->dXi), free(v->mdx), free(v->AG);
    sc_free(&v->s);
}

/* Everything but the last inverse transform (dx): GY, the weight gradients (into grad[1], grad[2]
 * when wanted), dX and its magnitudes. */
static ref_status sc_vjp_state_make(const ref_params *p, const ref_tensor *in,
                                    const ref_tensor *g, ref_tensor *grad, double **gmag,
                                    sc_vjp_state *v)
{
    memset(v, 0, sizeof *v);
    ref_status st = sc_compute(in, p->modes, &v->s);
    if (st != REF_OK)
        return st;
    int64_t n = v->s.n, w = v->s.w, M = v->s.M;
    size_t mw = (size_t)(M * w + 1);
    v->GYr = calloc(mw, sizeof(double)), v->GYi = calloc(mw, sizeof(double));
    v->dXr = calloc(mw, sizeof(double)), v->dXi = calloc(mw, sizeof(double));
    v->mdx = calloc(mw, sizeof(double)), v->AG = calloc((size_t)w + 1, sizeof(double));
    if (!v->GYr || !v->GYi || !v->dXr || !v->dXi || !v->mdx || !v->AG) {
        sc_vjp_free(v);
        return REF_ENOMEM;
    }
    double *GYr = v->GYr, *GYi = v->GYi, *AG = v->AG;
    const sc_state *s = &v->s;
    const double *Wr = in[1].v, *Wi = in[2].v;
    for (int64_t o = 0; o < w; o++) {
        dft_forward(&s->tw, g->v + o, w, M, GYr + o, GYi + o, w);
        for (int64_t k = 0; k < M; k++) {
            GYr[k * w + o] *= fft_weight(k, n);
            GYi[k * w + o] *= fft_weight(k, n);
        }
        for (int64_t t = 0; t < n; t++)
            AG[o] += fabs(g->v[t * w + o]);
    }
    double *mW[2] = {gmag ? gmag[1] : NULL, gmag ? gmag[2] : NULL};
    for (int64_t k = 0; k < M; k++)
        for (int64_t i = 0; i < w; i++) {
            double xr = s->Xr[k * w + i], xi = s->Xi[k * w + i], ax = fabs(xr) + fabs(xi);
            double sr = 0.0, si = 0.0, mdX = 0.0, prop = 0.0;
            for (int64_t o = 0; o < w; o++) {
                int64_t wo = (k * w + i) * w + o;
                double gr = GYr[k * w + o], gi = GYi[k * w + o], ag = fabs(gr) + fabs(gi);
                double egy = fft_weight(k, n) * (double)(n + 3) * AG[o];
                double aw = fabs(Wr[wo]) + fabs(Wi[wo]);
                double m_w = 3.0 * ax * ag + ax * egy + ag * (double)(n + 2) * s->A[i];
                if (grad[1].v) {
                    grad[1].v[wo] = gr * xr + gi * xi;
                    if (mW[0])
                        mW[0][wo] = m_w;
                }
                if (grad[2].v) {
                    grad[2].v[wo] = gi * xr - gr * xi;
                    if (mW[1])
                        mW[1][wo] = m_w;
                }
                sr += gr * Wr[wo] + gi * Wi[wo];
                si += gi * Wr[wo] - gr * Wi[wo];
                mdX += ag * aw;
                prop += aw * egy;
            }
            v->dXr[k * w + i] = sr;
            v->dXi[k * w + i] = si;
            v->mdx[k * w + i] = (double)(n + 3) * mdX + (double)(2 * w + 1) * mdX + prop;
        }
    return REF_OK;
}

/* The magnitude of every dx[t, i] (one value per channel i). */
static double sc_dx_mag(const sc_vjp_state *v, int64_t i)
{
    double m = 0.0;
    for (int64_t k = 0; k < v->s.M; k++)
        m += (fft_endpoint(k, v->s.n) ? 1.0 : 2.0) * v->mdx[k * v->s.w + i];
    return m;
}

static ref_status spectral_conv_vjp(const ref_params *p, const ref_tensor *in,
                                    const ref_tensor *g, ref_tensor *grad, const ref_mag *gmag)
{
    sc_vjp_state v;
    double *worst[3] = {gmag ? gmag[0].worst : NULL, gmag ? gmag[1].worst : NULL,
                        gmag ? gmag[2].worst : NULL};
    ref_status st = sc_vjp_state_make(p, in, g, grad, worst, &v);
    if (st != REF_OK)
        return st;
    int64_t n = v.s.n, w = v.s.w;
    if (grad[0].v)
        for (int64_t i = 0; i < w; i++) {
            dft_inverse(&v.s.tw, v.dXr + i, v.dXi + i, w, v.s.M, 0, grad[0].v + i, w);
            if (worst[0]) {
                double m = sc_dx_mag(&v, i);
                for (int64_t t = 0; t < n; t++)
                    worst[0][t * w + i] = m;
            }
        }
    sc_vjp_free(&v);
    return REF_OK;
}

/* Picked dx[t, i] (the inverse at the picks only), or picked weight-gradient entries (from the
 * whole weight gradient, which is cheap next to the transforms). */
static ref_status spectral_conv_vjp_at(const ref_params *p, const ref_tensor *in,
                                       const ref_tensor *g, int wrt, ref_picks *pk)
{
    ref_tensor grad[3];
    double *gmag[3] = {0};
    memset(grad, 0, sizeof grad);
    int64_t nw = ref_numel(&in[1].shape);
    if (wrt > 0) {
        grad[wrt].v = malloc(sizeof(double) * (size_t)(nw + 1));
        gmag[wrt] = malloc(sizeof(double) * (size_t)(nw + 1));
        if (!grad[wrt].v || !gmag[wrt]) {
            free(grad[wrt].v), free(gmag[wrt]);
            return REF_ENOMEM;
        }
    }
    sc_vjp_state v;
    ref_status st = sc_vjp_state_make(p, in, g, grad, gmag, &v);
    for (int64_t e = 0; st == REF_OK && e < pk->count; e++) {
        int64_t f = pk->at[e];
        if (wrt > 0) {
            pk->v[e] = grad[wrt].v[f];
            if (pk->mag.worst)
                pk->mag.worst[e] = gmag[wrt][f];
            continue;
        }
        int64_t t = f / v.s.w, i = f % v.s.w;
        pk->v[e] = dft_point(&v.s.tw, v.dXr + i, v.dXi + i, v.s.w, v.s.M, 0, t);
        if (pk->mag.worst)
            pk->mag.worst[e] = sc_dx_mag(&v, i);
    }
    if (st == REF_OK)
        sc_vjp_free(&v);
    if (wrt > 0)
        free(grad[wrt].v), free(gmag[wrt]);
    return st;
}

/* rfft1d (variant 1) and irfft1d (variant 2), forward and VJP: one batch row at a time, rows
 * split over threads. Sums of the magnitudes, per row:
 *   rfft     (N + 2) sum_t |x_t|                 rfft adjoint   (N + 3) sum_k (|Gr| + iota|Gi|)
 *   irfft    (N + 2) sum_k w_k (|Re| + iota|Im|)  irfft adjoint  w_k (N + 3) sum_t |g_t| */
static double abs_sum(const double *x, int64_t n)
{
    double a = 0.0;
    for (int64_t t = 0; t < n; t++)
        a += fabs(x[t]);
    return a;
}

/* sum_k weight_k (|z_re| + iota_k |z_im|) over packed bins (weight_k = m_k/n, or 1) */
static double spectrum_abs_sum(const double *z, int64_t K, int64_t N, int weighted)
{
    double a = 0.0;
    for (int64_t k = 0; k < K; k++) {
        double v = fabs(z[2 * k]) + (fft_endpoint(k, N) ? 0.0 : fabs(z[2 * k + 1]));
        a += weighted ? fft_weight(k, N) * v : v;
    }
    return a;
}

typedef struct {
    const ref_params *p;
    const twiddle_table *tw;
    const double *src; /* x (forward) or g (VJP) */
    double *dst;
    const ref_mag *mags; /* NULL: not wanted */
    int64_t N, K;
    int vjp;
} fft_rows_job;

/* An element's worst and prob magnitudes: rounds (N + 2 forward, N + 3 adjoint) with N made
 * sqrt(N) for prob, times weight (w_k of the irfft adjoint, else 1) and a = its abs sum; no
 * dtype share (the file comment). */
static void fft_set_mags(const ref_mag *mags, int64_t i, int64_t N, int vjp, double weight,
                         double a)
{
    double rounds = vjp ? 3.0 : 2.0;
    ref_mag_set(mags, i, weight * (double)(N + (vjp ? 3 : 2)) * a, NAN,
                weight * (sqrt((double)N) + rounds) * a);
}

/* Row b of the transform the job names, into dst (and mag). */
static void fft_rows(void *ctx, int64_t lo, int64_t hi)
{
    const fft_rows_job *j = ctx;
    int64_t N = j->N, K = j->K, spec = 2 * K;
    for (int64_t b = lo; b < hi; b++) {
        int rfft_shaped = (j->p->variant == 1) != j->vjp; /* a signal in, a spectrum out */
        if (rfft_shaped) {
            const double *x = j->src + b * N;
            double *z = j->dst + b * spec;
            dft_forward(j->tw, x, 1, K, z, z + 1, 2);
            double a = abs_sum(x, N);
            for (int64_t k = 0; k < K; k++) {
                if (j->vjp) { /* irfft adjoint: dz = (m_k/n) rfft(g) */
                    double wk = fft_weight(k, N);
                    z[2 * k] *= wk;
                    z[2 * k + 1] *= wk; /* exactly 0 at the endpoints (dft_forward) */
                }
                for (int part = 0; j->mags && part < 2; part++)
                    fft_set_mags(j->mags, b * spec + 2 * k + part, N, j->vjp,
                                 j->vjp ? fft_weight(k, N) : 1.0, a);
            }
        } else {
            const double *z = j->src + b * spec;
            dft_inverse(j->tw, z, z + 1, 2, K, !j->vjp, j->dst + b * N, 1);
            double a = spectrum_abs_sum(z, K, N, !j->vjp);
            for (int64_t t = 0; j->mags && t < N; t++)
                fft_set_mags(j->mags, b * N + t, N, j->vjp, 1.0, a);
        }
    }
}

static ref_status fft_rows_run(const ref_params *p, int64_t B, int64_t N, const double *src,
                               double *dst, const ref_mag *mags, int vjp)
{
    twiddle_table tw;
    if (twiddles_make(N, &tw) != REF_OK)
        return REF_ENOMEM;
    fft_rows_job j = {p, &tw, src, dst, mags && mags->worst ? mags : NULL, N, N / 2 + 1, vjp};
    ref_parallel_for(p->threads, B, 1, fft_rows, &j);
    twiddles_free(&tw);
    return REF_OK;
}

/* The signal length of a variant-1 or -2 case. */
static int64_t fft_length(const ref_params *p, const ref_tensor *in)
{
    return p->variant == 1 ? in[0].shape.dim[1] : p->length;
}

static ref_status fft_fno_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                              const ref_mag *mags)
{
    (void)n;
    if (p->variant == 0)
        return spectral_conv_fwd(p, in, out, mags);
    return fft_rows_run(p, in[0].shape.dim[0], fft_length(p, in), in[0].v, out->v, mags, 0);
}

static ref_status fft_fno_vjp(const ref_params *p, int n, const ref_tensor *in,
                              const ref_tensor *y, const ref_tensor *g, ref_tensor *grad,
                              const ref_mag *gmag)
{
    (void)n;
    (void)y;
    if (p->variant == 0)
        return spectral_conv_vjp(p, in, g, grad, gmag);
    if (!grad[0].v)
        return REF_OK;
    return fft_rows_run(p, in[0].shape.dim[0], fft_length(p, in), g->v, grad[0].v,
                        gmag ? &gmag[0] : NULL, 1);
}

/* Picked elements of rfft1d/irfft1d (forward or VJP): each bin or point alone. */
static ref_status fft_rows_at(const ref_params *p, const ref_tensor *in, const double *src,
                              int vjp, ref_picks *pk)
{
    int64_t N = fft_length(p, in), K = N / 2 + 1, spec = 2 * K;
    twiddle_table tw;
    if (twiddles_make(N, &tw) != REF_OK)
        return REF_ENOMEM;
    int rfft_shaped = (p->variant == 1) != vjp;
    for (int64_t e = 0; e < pk->count; e++) {
        int64_t f = pk->at[e];
        double weight = 1.0, a;
        if (rfft_shaped) {
            int64_t b = f / spec, k = f % spec / 2;
            double re, im;
            dft_bin(&tw, src + b * N, 1, k, &re, &im);
            double v = f % 2 ? im : re;
            a = abs_sum(src + b * N, N);
            pk->v[e] = vjp ? v * fft_weight(k, N) : v;
            weight = vjp ? fft_weight(k, N) : 1.0;
        } else {
            int64_t b = f / N, t = f % N;
            const double *z = src + b * spec;
            pk->v[e] = dft_point(&tw, z, z + 1, 2, K, !vjp, t);
            a = spectrum_abs_sum(z, K, N, !vjp);
        }
        if (pk->mag.worst)
            fft_set_mags(&pk->mag, e, N, vjp, weight, a);
    }
    twiddles_free(&tw);
    return REF_OK;
}

static ref_status fft_fno_fwd_at(const ref_params *p, int n, const ref_tensor *in, ref_picks *pk)
{
    (void)n;
    if (p->variant == 0)
        return spectral_conv_fwd_at(p, in, pk);
    return fft_rows_at(p, in, in[0].v, 0, pk);
}

static ref_status fft_fno_vjp_at_one(const ref_params *p, int n, const ref_tensor *in,
                                     const ref_tensor *g, int wrt, ref_picks *pk)
{
    (void)n;
    if (p->variant == 0)
        return spectral_conv_vjp_at(p, in, g, wrt, pk);
    return fft_rows_at(p, in, g->v, 1, pk);
}

static ref_status fft_fno_vjp_at(const ref_params *p, int n, const ref_tensor *in,
                                 const ref_tensor *g, ref_picks *pk)
{
    return ref_vjp_at_each(fft_fno_vjp_at_one, p, n, in, g, pk);
}

/* Work of one element: a length-n sum (rfft, irfft and their adjoints; spectralConv's inverse),
 * plus for spectralConv the spectra of every channel spread over the elements of a channel. */
static double fft_fno_work(const ref_params *p, int n, const ref_shape *in, int wrt)
{
    (void)n;
    (void)wrt;
    if (p->variant == 0)
        return (double)p->modes * (double)(in[0].dim[1] + 1);
    return (double)(p->variant == 1 ? in[0].dim[1] : p->length);
}

static ref_status sample_fft_fno(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                 ref_shape *in)
{
    int64_t cap = req->max_elems > 1 ? req->max_elems : 1;
    if (req->rank == 2)
        p->variant = (int)ref_rng_range(r, 0, 1);
    else if (req->rank == 3)
        p->variant = 2;
    else if (req->rank < 0)
        p->variant = (int)ref_rng_range(r, 0, 2);
    else
        return REF_ENOTAPPLICABLE;
    if (p->variant == 0) { /* x [grid, width], width <= 4 keeps W small */
        int64_t width = ref_rng_range(r, 1, cap < 4 ? cap : 4);
        int64_t grid = ref_rng_range(r, 1, cap / width > 1 ? cap / width : 1);
        p->modes = ref_rng_range(r, 1, grid / 2 + 1);
        if (req->zero_dim) {
            if (ref_rng_range(r, 0, 1))
                width = 0;
            else
                p->modes = 0;
        }
        in[0].rank = 2;
        in[0].dim[0] = grid;
        in[0].dim[1] = width;
        in[1].rank = in[2].rank = 3;
        in[1].dim[1] = in[2].dim[1] = in[1].dim[2] = in[2].dim[2] = width;
        int64_t limit = ref_extent_cap(&in[1], 0, ref_sample_budget(req));
        if (p->modes > limit) /* wre, wim [modes, width, width] within the budget */
            p->modes = limit;
        in[1].dim[0] = in[2].dim[0] = p->modes;
        *n = 3;
        return REF_OK;
    }
    *n = 1;
    if (p->variant == 1) { /* x [batch, n] */
        int64_t len = ref_rng_range(r, 1, cap < 16 ? cap : 16);
        in[0].rank = 2;
        in[0].dim[0] = req->zero_dim ? 0 : ref_rng_range(r, 1, cap / len > 1 ? cap / len : 1);
        in[0].dim[1] = len;
        return REF_OK;
    }
    p->length = ref_rng_range(r, 1, cap < 16 ? cap : 16); /* z [batch, length/2+1, 2] */
    int64_t K = p->length / 2 + 1, per = 2 * K;
    in[0].rank = 3;
    in[0].dim[0] = req->zero_dim ? 0 : ref_rng_range(r, 1, cap / per > 1 ? cap / per : 1);
    in[0].dim[1] = K;
    in[0].dim[2] = 2;
    return REF_OK;
}

/* ======================================================================================== */
/* selectiveScan: h_t = a_t * h_{t-1} + b_t * x_t, h_{-1} = h0; output all states [T, D].
 * Inputs a, b: both [D] (shared) or both [T, D] (token-dependent); x [T, D]; h0 [D].
 * VJP: G_{T-1} = g_{T-1}, G_t = g_t + a_{t+1} G_{t+1}; da_t = G_t h_{t-1}; db_t = G_t x_t;
 * dx_t = G_t b_t; dh0 = G_0 a_0 (0 when T = 0); the shared layout sums da_t, db_t over time.
 *
 * Error model (units of u). h_t = sum_{s<=t} (prod_{r=s+1..t} a_r) b_s x_s +
 * (prod_{r<=t} a_r) h0: a sum of t + 2 products. Let N_t = |a_t| N_{t-1} + |b_t x_t|,
 * N_{-1} = |h0| (the sum of the absolute terms). Any evaluation order (the sequential
 * recurrence, a log-depth affine prefix scan, a chunked scan, FMA or not) forms each term with at
 * most t + 1 multiplications and adds it through at most t + 1 additions, so every term carries
 * at most 2(t + 1) roundings: m_t = (2t + 3) N_t (one spare), c_fwd = 2.
 * VJP: G_t is the same kind of sum backwards: NG_t = |g_t| + |a_{t+1}| NG_{t+1},
 * eG_t = (2(T - t) + 1) NG_t. With e_h(t-1) = (2t + 1) N_{t-1} (0 for h0, which is exact):
 *   m(dx_t) = |b_t| (eG_t + NG_t);  m(db_t) = |x_t| (eG_t + NG_t);
 *   m(da_t) = NG_t e_h(t-1) + N_{t-1} (eG_t + NG_t);  m(dh0) = |a_0| (eG_0 + NG_0);
 *   shared da, db: a length-T sum: T sum_t |terms| + sum_t m(term). c_vjp = 2.
 * Strict f16/bf16 (ref.h): the recurrence is an accumulation: it runs in float32 and each output
 * is rounded once (dtype = |value|). prob: each chain of k roundings counts sqrt(k) + 1
 * (forward: (sqrt(2t + 2) + 1) N_t), T becomes sqrt(T). */

static ref_status scan_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                             ref_err *e)
{
    (void)p;
    (void)n;
    const ref_shape *a = &in[0], *b = &in[1], *x = &in[2], *h0 = &in[3];
    char sa[96], sb[96], sx[96], sh[96];
    ref_shape_fmt(a, sa, sizeof sa);
    ref_shape_fmt(b, sb, sizeof sb);
    ref_shape_fmt(x, sx, sizeof sx);
    ref_shape_fmt(h0, sh, sizeof sh);
    if (x->rank != 2)
        return ref_err_set(e, "selectiveScan wants x [T, D], got %s", sx);
    int64_t D = x->dim[1];
    if (h0->rank != 1 || h0->dim[0] != D)
        return ref_err_set(e, "selectiveScan h0 must be [D] = [%lld] for x %s, got %s",
                           (long long)D, sx, sh);
    if (!ref_shape_eq(a, b))
        return ref_err_set(e, "selectiveScan a %s and b %s must share one layout ([D] or [T, D])",
                           sa, sb);
    int shared_ok = a->rank == 1 && a->dim[0] == D;
    int token_ok = ref_shape_eq(a, x);
    if (!shared_ok && !token_ok)
        return ref_err_set(e, "selectiveScan a and b must be [D] (shared) or [T, D] = %s "
                              "(token-dependent), got %s", sx, sa);
    *out = *x;
    return REF_OK;
}

static void scan_domain(const ref_params *p, int n, const ref_shape *in, int i, ref_domain *d)
{
    (void)p;
    (void)n;
    (void)in;
    if (i == 0) /* decay coefficients in (0, 1) as in Mamba (the fast path of the LibTorch scan) */
        d->kind = REF_DOM_UNIT;
}

/* Coefficient of step t at channel d in either layout. */
static double scan_coef(const ref_tensor *c, int64_t t, int64_t d, int64_t D)
{
    return c->shape.rank == 1 ? c->v[d] : c->v[t * D + d];
}

/* The states h and the magnitudes N (both [T, D]). */
static void scan_states(const ref_tensor *in, double *h, double *N)
{
    int64_t T = in[2].shape.dim[0], D = in[2].shape.dim[1];
    for (int64_t d = 0; d < D; d++) {
        double hp = in[3].v[d], np = fabs(in[3].v[d]);
        for (int64_t t = 0; t < T; t++) {
            double at = scan_coef(&in[0], t, d, D);
            double bx = scan_coef(&in[1], t, d, D) * in[2].v[t * D + d];
            hp = at * hp + bx;
            np = fabs(at) * np + fabs(bx);
            h[t * D + d] = hp;
            N[t * D + d] = np;
        }
    }
}

static ref_status scan_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                           const ref_mag *mags)
{
    (void)p;
    (void)n;
    int64_t T = in[2].shape.dim[0], D = in[2].shape.dim[1];
    double *N = malloc(sizeof(double) * (size_t)(T * D + 1));
    if (!N)
        return REF_ENOMEM;
    scan_states(in, out->v, N);
    if (mags)
        for (int64_t t = 0; t < T; t++)
            for (int64_t d = 0; d < D; d++) {
                int64_t i = t * D + d;
                ref_mag_set(mags, i, (double)(2 * t + 3) * N[i], fabs(out->v[i]),
                            (sqrt((double)(2 * t + 2)) + 1.0) * N[i]);
            }
    free(N);
    return REF_OK;
}

static ref_status scan_vjp(const ref_params *p, int n, const ref_tensor *in, const ref_tensor *y,
                           const ref_tensor *g, ref_tensor *grad, const ref_mag *gmag)
{
    (void)p;
    (void)n;
    (void)y;
    int64_t T = in[2].shape.dim[0], D = in[2].shape.dim[1];
    int shared = in[0].shape.rank == 1;
    double *h = malloc(sizeof(double) * (size_t)(T * D + 1));
    double *N = malloc(sizeof(double) * (size_t)(T * D + 1));
    if (!h || !N) {
        free(h), free(N);
        return REF_ENOMEM;
    }
    scan_states(in, h, N);
    double *m[4], *mp[4]; /* worst and prob planes; the dtype share is |value| (set at the end) */
    for (int k = 0; k < 4; k++) {
        m[k] = gmag && grad[k].v ? gmag[k].worst : NULL;
        mp[k] = m[k] ? gmag[k].prob : NULL;
    }
    if (shared)
        for (int k = 0; k < 2; k++)
            if (grad[k].v) {
                memset(grad[k].v, 0, sizeof(double) * (size_t)D);
                if (m[k])
                    memset(m[k], 0, sizeof(double) * (size_t)D);
                if (mp[k])
                    memset(mp[k], 0, sizeof(double) * (size_t)D);
            }
    for (int64_t d = 0; d < D; d++) {
        double G = 0.0, NG = 0.0;
        for (int64_t t = T - 1; t >= 0; t--) {
            int64_t i = t * D + d;
            if (t + 1 < T) {
                double an = scan_coef(&in[0], t + 1, d, D);
                G = g->v[i] + an * G;
                NG = fabs(g->v[i]) + fabs(an) * NG;
            } else {
                G = g->v[i];
                NG = fabs(g->v[i]);
            }
            double eG = (double)(2 * (T - t) + 1) * NG;
            double eGp = (sqrt((double)(2 * (T - t))) + 1.0) * NG;
            double hp = t > 0 ? h[i - D] : in[3].v[d];
            double np = t > 0 ? N[i - D] : fabs(in[3].v[d]);
            double eh = t > 0 ? (double)(2 * t + 1) * np : 0.0;
            double ehp = t > 0 ? (sqrt((double)(2 * t)) + 1.0) * np : 0.0;
            double bt = scan_coef(&in[1], t, d, D), xt = in[2].v[i];
            double da = G * hp, m_da = NG * eh + np * (eG + NG), p_da = NG * ehp + np * (eGp + NG);
            double db = G * xt, m_db = fabs(xt) * (eG + NG), p_db = fabs(xt) * (eGp + NG);
            double sT = sqrt((double)T);
            int64_t j = shared ? d : i;
            if (grad[0].v) {
                grad[0].v[j] = shared ? grad[0].v[j] + da : da;
                if (m[0])
                    m[0][j] = shared ? m[0][j] + (double)T * NG * np + m_da : m_da;
                if (mp[0])
                    mp[0][j] = shared ? mp[0][j] + sT * NG * np + p_da : p_da;
            }
            if (grad[1].v) {
                grad[1].v[j] = shared ? grad[1].v[j] + db : db;
                if (m[1])
                    m[1][j] = shared ? m[1][j] + (double)T * NG * fabs(xt) + m_db : m_db;
                if (mp[1])
                    mp[1][j] = shared ? mp[1][j] + sT * NG * fabs(xt) + p_db : p_db;
            }
            if (grad[2].v) {
                grad[2].v[i] = G * bt;
                if (m[2])
                    ref_mag_set(&gmag[2], i, fabs(bt) * (eG + NG), fabs(grad[2].v[i]),
                                fabs(bt) * (eGp + NG));
            }
        }
        if (grad[3].v) { /* after the loop G = G_0 (or nothing when T = 0) */
            double a0 = T > 0 ? scan_coef(&in[0], 0, d, D) : 0.0;
            grad[3].v[d] = T > 0 ? G * a0 : 0.0;
            if (m[3])
                ref_mag_set(&gmag[3], d,
                            T > 0 ? fabs(a0) * ((double)(2 * T + 1) * NG + NG) : 0.0,
                            fabs(grad[3].v[d]),
                            T > 0 ? fabs(a0) * ((sqrt((double)(2 * T)) + 1.0) * NG + NG) : 0.0);
        }
    }
    for (int k = 0; k < 2; k++) /* da, db: their dtype share is the final rounding */
        for (int64_t j = 0; m[k] && gmag[k].dtype && j < ref_numel(&in[k].shape); j++)
            gmag[k].dtype[j] = fabs(grad[k].v[j]);
    free(h), free(N);
    return REF_OK;
}

static ref_status sample_scan(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                              ref_shape *in)
{
    (void)p;
    int rank = req->rank >= 0 ? req->rank : (int)ref_rng_range(r, 1, 2);
    if (rank != 1 && rank != 2)
        return REF_ENOTAPPLICABLE; /* a is [D] (shared) or [T, D] (token-dependent) */
    /* T up to 12 (the recurrence is the point), D takes what max_elems leaves, at most 4 */
    int64_t cap = req->max_elems > 1 ? req->max_elems : 1;
    ref_shape x = {2, {ref_rng_range(r, 1, cap < 12 ? cap : 12), 1}};
    x.dim[1] = ref_rng_range(r, 1, cap / x.dim[0] < 4 ? cap / x.dim[0] : 4);
    if (req->zero_dim)
        x.dim[ref_rng_range(r, 0, 1)] = 0;
    in[2] = x;
    in[3].rank = 1;
    in[3].dim[0] = x.dim[1];
    in[0] = in[1] = rank == 1 ? in[3] : x;
    *n = 4;
    return REF_OK;
}

/* ======================================================================================== */
/* attention: out = A V with A = softmax over keys of S = (Q K^T) * s, s = 1/sqrt(d) (1 when
 * d = 0). Q [..., nQ, d], K [..., nK, d], V [..., nK, dv] of one rank >= 2 with EQUAL leading
 * axes (the folded batch*heads axis; rank 2 = one head); out [..., nQ, dv]. Optional mask
 * [nQ, nK] (true = allowed) broadcast over the leading axes; params.causal additionally blocks
 * key j > query i (top-left aligned when nQ != nK). With any blocking, A is the hard-masked
 * softmax: max over allowed entries, blocked weights exactly 0. nK = 0 rows are fully blocked.
 * A fully blocked row i (no allowed key) is defined, not computed (ops.md; TorchLean's guard,
 * FlashAttention's l = 0): out[i, :] = 0 and row i adds nothing to any gradient (dQ[i, :] = 0,
 * and no dS[i, :] term in dK, no A[i, :] term in dV), whatever Q[i], K and V hold: Σ_k 0·V[k]
 * would be NaN where V holds NaN or Inf. A partially blocked row keeps ordinary arithmetic
 * (a blocked key's 0 weight times a NaN of V is NaN, as the composed bmm gives).
 * VJP: dV = A^T g; dA = g V^T; dS' = A (dA - rowsum(dA A)); dS = s dS'; dQ = dS K; dK = dS^T Q.
 *
 * Error model (units of u). Logit error: sig_ik = s (d + 3) sum_l |Q_il K_kl| (the length-d dot,
 * the rounding of s, and the sqrt|s| split onto both operands of TorchLean's LibTorch path).
 * A_ik then has relative error Fp_ik = F_ik + min(sig_ik + sum_j A_ij sig_ij,
 * (1 - A_ik)(sig_ik + max_j sig_ij)) (weight_shift), with F_ik the softmax
 * op's factor 3 + |S_ik - max_i| + (nK - 1) + sum_j A_ij (|S_ij - max_i| + 2) (the |S - max|
 * term also covers online-softmax rescaling, whose exponent shifts add up to |S - max|).
 *   m(out_ij) = sum_k A_ik |V_kj| (nK + Fp_ik).
 * VJP, per row with Gabs_ik = sum_j |g_ij V_kj| >= |dA_ik| and r_i = sum_k A_ik dA_ik:
 *   R_i = sum_k A_ik (nK + dv + Fp_ik) Gabs_ik (the rowsum error; also covers rowsum(g * out));
 *   m(dS'_ik) = A_ik (Fp_ik |dA_ik - r_i| + dv Gabs_ik + R_i + |dA_ik| + |r_i|) + |dS'_ik|;
 *   m(dS_ik) = s m(dS'_ik) + 2 |dS_ik| (s rounded, product rounded);
 *   m(dQ_il) = sum_k |K_kl| ((nK + 2) |dS_ik| + m(dS_ik));
 *   m(dK_kl) = sum_i |Q_il| ((nQ + 2) |dS_ik| + m(dS_ik));
 *   m(dV_kj) = sum_i A_ik |g_ij| (nQ + Fp_ik).
 * c_fwd = c_vjp = 2.
 * Strict f16/bf16 (ref.h): each product and the softmax run in float32, but S, A (and dA, dS in
 * the VJP) are stored in the dtype between them (ATen: bmm, _softmax, bmm), so the dtype share
 * is every rounding that is not part of a long sum: each formula with its lengths (d, nK, nQ,
 * dv, and F's nK - 1) set to 0 (Fp0; dA's and dS's own roundings kept), plus the final rounding.
 * prob: those lengths replaced by their square roots (Fpp). */

typedef struct {
    int64_t batch, nQ, nK, d, dv;
    double scale;
} attn_geom;

static attn_geom attn_geometry(const ref_shape *q, const ref_shape *k, const ref_shape *v)
{
    attn_geom g = {1, q->dim[q->rank - 2], k->dim[k->rank - 2], q->dim[q->rank - 1],
                   v->dim[v->rank - 1], 1.0};
    for (int i = 0; i + 2 < q->rank; i++)
        g.batch *= q->dim[i];
    if (g.d > 0)
        g.scale = 1.0 / sqrt((double)g.d);
    return g;
}

static ref_status attn_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                             ref_err *e)
{
    (void)p;
    const ref_shape *q = &in[0], *k = &in[1], *v = &in[2];
    char sq[96], sk[96], sv[96];
    ref_shape_fmt(q, sq, sizeof sq);
    ref_shape_fmt(k, sk, sizeof sk);
    ref_shape_fmt(v, sv, sizeof sv);
    if (q->rank < 2 || k->rank != q->rank || v->rank != q->rank)
        return ref_err_set(e, "attention wants Q [..., nQ, d], K [..., nK, d], V [..., nK, dv] "
                              "of one rank >= 2, got %s, %s, %s", sq, sk, sv);
    int R = q->rank;
    for (int i = 0; i + 2 < R; i++)
        if (k->dim[i] != q->dim[i] || v->dim[i] != q->dim[i])
            return ref_err_set(e, "attention leading (batch*heads) axes must be equal: Q %s, "
                                  "K %s, V %s", sq, sk, sv);
    if (k->dim[R - 1] != q->dim[R - 1])
        return ref_err_set(e, "attention Q %s and K %s disagree on the head dimension d", sq, sk);
    if (v->dim[R - 2] != k->dim[R - 2])
        return ref_err_set(e, "attention K %s and V %s disagree on the number of keys", sk, sv);
    if (n == 4) {
        const ref_shape *m = &in[3];
        if (m->rank != 2 || m->dim[0] != q->dim[R - 2] || m->dim[1] != k->dim[R - 2]) {
            char sm[96];
            ref_shape_fmt(m, sm, sizeof sm);
            return ref_err_set(e, "attention mask must be [nQ, nK] = [%lld, %lld], got %s",
                               (long long)q->dim[R - 2], (long long)k->dim[R - 2], sm);
        }
    }
    *out = *q;
    out->dim[R - 1] = v->dim[R - 1];
    return REF_OK;
}

/* Scores, weights and error factors of query row i of batch b (arrays of length nK), and the
 * transposes of batch `batch`'s K and V: each score and each dA entry of a row is a dot product
 * along d (dv), formed for all keys at once with d (dv) outer, so every one keeps its own
 * left fold from 0 in increasing l (j) while the keys go side by side. */
typedef struct {
    double *S, *sig, *A, *Fp, *Fp0, *Fpp; /* Fp, its dtype share and its probabilistic form */
    double *Kt, *Vt; /* [d, nK], [dv, nK] */
    int64_t batch;   /* whose transposes Kt and Vt hold; -1: none yet */
    int blocked;     /* the row has no allowed key: zero output, no gradient terms */
} attn_row_buf;

static void attn_transposes(const ref_tensor *in, const attn_geom *g, int64_t b,
                            attn_row_buf *w)
{
    if (w->batch == b)
        return;
    ref_transpose(in[1].v + b * g->nK * g->d, g->nK, g->d, w->Kt);
    ref_transpose(in[2].v + b * g->nK * g->dv, g->nK, g->dv, w->Vt);
    w->batch = b;
}

/* The relative error a weight A_k = softmax(S)_k takes from logit errors |dS_j| <= sig_j (units
 * of u): dA_k / A_k = dS_k - sum_j A_j dS_j = (1 - A_k) dS_k - sum_{j != k} A_j dS_j, so
 * |dA_k / A_k| <= min(sig_k + sig_bar, (1 - A_k)(sig_k + sig_max)) with sig_bar = sum_j A_j
 * sig_j and sig_max = max_j sig_j (sum_{j != k} A_j = 1 - A_k). The second form is 0 for a
 * weight of 1: huge logits far apart make exactly one-hot rows, whose weights no logit error
 * moves. */
static double weight_shift(double sig_k, double sig_bar, double rest, double sig_max)
{
    double any = sig_k + sig_bar, others = ref_mag_prod(rest, sig_k + sig_max);
    return others < any ? others : any;
}

static void attn_row(const ref_params *p, int n, const ref_tensor *in, const attn_geom *g,
                     int64_t b, int64_t i, attn_row_buf *w)
{
    const double *Q = in[0].v + (b * g->nQ + i) * g->d;
    attn_transposes(in, g, b, w);
    double *restrict S = w->S, *restrict S_abs = w->sig; /* sum Q K, sum |Q K| until scaled */
    /* a causal row's scores past i are never read (their weights are 0, and a zero weight
     * makes every product with them 0 below): left at 0, not formed */
    int64_t formed = p->causal && i + 1 < g->nK ? i + 1 : g->nK;
    ref_row_times(Q, g->d, w->Kt, g->nK, formed, S, S_abs); /* sum_l Q[l] K[k, l], every k */
    for (int64_t k = formed; k < g->nK; k++)
        S[k] = S_abs[k] = 0.0;
    int64_t first = -1, allowed = 0;
    double *sig0 = w->Fp0, *sigp = w->Fpp; /* the logit errors' two forms, until the end */
    for (int64_t k = 0; k < g->nK; k++) {
        w->S[k] = w->S[k] * g->scale;
        sig0[k] = g->scale * 3.0 * w->sig[k];
        sigp[k] = g->scale * (sqrt((double)g->d) + 3.0) * w->sig[k];
        w->sig[k] = g->scale * (double)(g->d + 3) * w->sig[k];
        int ok = (n < 4 || in[3].v[i * g->nK + k] != 0.0) && (!p->causal || k <= i);
        w->A[k] = ok ? 1.0 : 0.0; /* allowed flag until the weights are computed */
        if (ok && first < 0)
            first = k;
        allowed += ok;
    }
    w->blocked = allowed == 0;
    if (w->blocked) { /* fully blocked row: zero weights */
        for (int64_t k = 0; k < g->nK; k++)
            w->A[k] = w->Fp[k] = w->Fp0[k] = w->Fpp[k] = 0.0;
        return;
    }
    double mx = w->S[first], sum = 0.0, spread = 0.0, sig_bar = 0.0, sig0_bar = 0.0;
    double sigp_bar = 0.0, sig_max = 0.0, sig0_max = 0.0, sigp_max = 0.0;
    for (int64_t k = first + 1; k < g->nK; k++)
        if (w->A[k] != 0.0 && w->S[k] > mx)
            mx = w->S[k];
    for (int64_t k = 0; k < g->nK; k++)
        if (w->A[k] != 0.0) { /* the largest logit errors of the allowed keys */
            sig_max = fmax(sig_max, w->sig[k]);
            sig0_max = fmax(sig0_max, sig0[k]);
            sigp_max = fmax(sigp_max, sigp[k]);
        }
    for (int64_t k = 0; k < g->nK; k++) {
        w->A[k] = w->A[k] != 0.0 ? exp(w->S[k] - mx) : 0.0;
        sum += w->A[k];
    }
    for (int64_t k = 0; k < g->nK; k++) {
        w->A[k] /= sum;
        spread += ref_mag_prod(w->A[k], fabs(w->S[k] - mx) + 2.0);
        sig_bar += ref_mag_prod(w->A[k], w->sig[k]);
        sig0_bar += ref_mag_prod(w->A[k], sig0[k]);
        sigp_bar += ref_mag_prod(w->A[k], sigp[k]);
    }
    for (int64_t k = 0; k < g->nK; k++) {
        int on = w->A[k] != 0.0;
        double d = fabs(w->S[k] - mx), rest = 1.0 - w->A[k];
        w->Fp[k] = on ? 3.0 + d + (double)(g->nK - 1) + spread +
                            weight_shift(w->sig[k], sig_bar, rest, sig_max)
                      : 0.0;
        w->Fp0[k] = on ? 3.0 + d + spread + weight_shift(sig0[k], sig0_bar, rest, sig0_max) : 0.0;
        w->Fpp[k] = on ? 3.0 + d + sqrt((double)(g->nK - 1)) + spread +
                             weight_shift(sigp[k], sigp_bar, rest, sigp_max)
                       : 0.0;
    }
}

static void attn_row_free(attn_row_buf *w, int extra, double **more)
{
    free(w->S), free(w->sig), free(w->A), free(w->Fp), free(w->Fp0), free(w->Fpp);
    free(w->Kt), free(w->Vt);
    for (int i = 0; i < extra; i++)
        free(more[i]);
}

/* The row buffers, and `extra` more arrays of length nK. */
static ref_status attn_row_alloc(const attn_geom *g, int extra, attn_row_buf *w, double **more)
{
    size_t len = (size_t)(g->nK + 1);
    w->S = malloc(sizeof(double) * len), w->sig = malloc(sizeof(double) * len);
    w->A = malloc(sizeof(double) * len), w->Fp = malloc(sizeof(double) * len);
    w->Fp0 = malloc(sizeof(double) * len), w->Fpp = malloc(sizeof(double) * len);
    w->Kt = malloc(sizeof(double) * (len * (size_t)g->d + 1));
    w->Vt = malloc(sizeof(double) * (len * (size_t)g->dv + 1));
    w->batch = -1;
    int ok = w->S && w->sig && w->A && w->Fp && w->Fp0 && w->Fpp && w->Kt && w->Vt;
    for (int i = 0; i < extra; i++)
        ok = (more[i] = malloc(sizeof(double) * len)) != NULL && ok;
    if (!ok) {
        attn_row_free(w, extra, more);
        return REF_ENOMEM;
    }
    return REF_OK;
}

/* out[b, i, j] from row (b, i)'s weights into *y, and when mags, its three magnitudes into
 * element i of mags' planes. */
static void attn_out_elem(const attn_geom *g, const double *V, const attn_row_buf *w, int64_t j,
                          double *y, const ref_mag *mags, int64_t i)
{
    double s = 0.0, s_mag = 0.0, s_dt = 0.0, s_prob = 0.0, nK = (double)g->nK;
    for (int64_t k = 0; !w->blocked && k < g->nK; k++) { /* a fully blocked row: 0 */
        double av = fabs(V[k * g->dv + j]);
        s += w->A[k] * V[k * g->dv + j];
        s_mag += ref_mag_prod(w->A[k], av * (nK + w->Fp[k]));
        s_dt += ref_mag_prod(w->A[k], av * w->Fp0[k]);
        s_prob += ref_mag_prod(w->A[k], av * (sqrt(nK) + w->Fpp[k]));
    }
    *y = s;
    if (mags)
        ref_mag_set(mags, i, s_mag, s_dt + fabs(s), s_prob);
}

typedef struct {
    const ref_params *p;
    int n;
    attn_geom g;
    const ref_tensor *in, *gt;
    ref_tensor *out, *grad;
    const ref_mag *mags;
    double *m[3][3]; /* gradient t's plane f (worst, dtype, prob), NULL: not wanted */
    int failed;
} attn_job;

/* Rows (b, i), flattened, split over threads. */
static void attn_forward_rows(void *ctx, int64_t lo, int64_t hi)
{
    attn_job *t = ctx;
    const attn_geom *g = &t->g;
    attn_row_buf w;
    if (attn_row_alloc(g, 0, &w, NULL) != REF_OK) {
        t->failed = 1;
        return;
    }
    for (int64_t bi = lo; bi < hi; bi++) {
        attn_row(t->p, t->n, t->in, g, bi / g->nQ, bi % g->nQ, &w);
        for (int64_t j = 0; j < g->dv; j++)
            attn_out_elem(g, t->in[2].v + bi / g->nQ * g->nK * g->dv, &w, j,
                          &t->out->v[bi * g->dv + j], t->mags, bi * g->dv + j);
    }
    attn_row_free(&w, 0, NULL);
}

static ref_status attn_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                           const ref_mag *mags)
{
    attn_job t = {.p = p, .n = n, .g = attn_geometry(&in[0].shape, &in[1].shape, &in[2].shape),
                  .in = in, .out = out, .mags = mags && mags->worst ? mags : NULL};
    ref_parallel_for(p->threads, t.g.batch * t.g.nQ, 1, attn_forward_rows, &t);
    return t.failed ? REF_ENOMEM : REF_OK;
}

/* The lengths of the VJP's formulas in each form f (worst, dtype, prob): nK, nQ and dv (the
 * dtype form keeps dA's own rounding). */
typedef struct {
    double nK[3], nQ[3], dv[3];
} attn_lengths;

static attn_lengths attn_lengths_of(const attn_geom *g)
{
    attn_lengths L = {{(double)g->nK, 0.0, sqrt((double)g->nK)},
                      {(double)g->nQ, 0.0, sqrt((double)g->nQ)},
                      {(double)g->dv, 1.0, sqrt((double)g->dv)}};
    return L;
}

/* The VJP's row (b, i): its weights (w), dA and Gabs, and dS = s dS' with its magnitude in each
 * form f (mdS[f]). */
static void attn_vjp_row(const ref_params *p, int n, const ref_tensor *in, const ref_tensor *gt,
                         const attn_geom *g, int64_t b, int64_t i, attn_row_buf *w, double *dA,
                         double *Gabs, double *dS, double *const mdS[3])
{
    const double *G = gt->v + (b * g->nQ + i) * g->dv;
    attn_lengths L = attn_lengths_of(g);
    attn_row(p, n, in, g, b, i, w); /* and batch b's transposes */
    ref_row_times(G, g->dv, w->Vt, g->nK, g->nK, dA, Gabs); /* dA[k] = sum_j g[j] V[k, j] */
    const double *F[3] = {w->Fp, w->Fp0, w->Fpp};
    double r = 0.0, R[3] = {0.0, 0.0, 0.0};
    for (int64_t k = 0; k < g->nK; k++) {
        r += w->A[k] * dA[k];
        for (int f = 0; f < 3; f++)
            R[f] += ref_mag_prod(w->A[k], (L.nK[f] + L.dv[f] + F[f][k]) * Gabs[k]);
    }
    for (int64_t k = 0; k < g->nK; k++) {
        double dsp = w->A[k] * (dA[k] - r);
        dS[k] = g->scale * dsp;
        for (int f = 0; f < 3; f++) {
            double mdsp = ref_mag_prod(w->A[k], F[f][k] * fabs(dA[k] - r) + L.dv[f] * Gabs[k] +
                                                    R[f] + fabs(dA[k]) + fabs(r)) +
                          fabs(dsp);
            mdS[f][k] = g->scale * mdsp + 2.0 * fabs(dS[k]);
        }
    }
}

/* Batches b split over threads (dK and dV sum over the rows of their batch). */
static void attn_vjp_batches(void *ctx, int64_t lo, int64_t hi)
{
    attn_job *t = ctx;
    const attn_geom *g = &t->g;
    const ref_tensor *in = t->in;
    ref_tensor *grad = t->grad;
    double *const(*m)[3] = t->m;
    attn_row_buf w;
    double *more[6]; /* dA, Gabs, dS, and dS's worst, dtype and prob magnitudes */
    if (attn_row_alloc(g, 6, &w, more) != REF_OK) {
        t->failed = 1;
        return;
    }
    double *dA = more[0], *Gabs = more[1], *dS = more[2];
    double *const mdS[3] = {more[3], more[4], more[5]};
    attn_lengths L = attn_lengths_of(g);
    const double *F[3] = {w.Fp, w.Fp0, w.Fpp};
    for (int64_t b = lo; b < hi; b++) {
        const double *K = in[1].v + b * g->nK * g->d;
        for (int64_t i = 0; i < g->nQ; i++) {
            const double *Q = in[0].v + (b * g->nQ + i) * g->d;
            const double *G = t->gt->v + (b * g->nQ + i) * g->dv;
            attn_vjp_row(t->p, t->n, in, t->gt, g, b, i, &w, dA, Gabs, dS, mdS);
            if (w.blocked) /* a fully blocked row adds no gradient term */
                continue;
            for (int64_t k = 0; k < g->nK; k++) {
                for (int64_t l = 0; l < g->d; l++) {
                    int64_t qi = (b * g->nQ + i) * g->d + l, ki = (b * g->nK + k) * g->d + l;
                    if (grad[0].v)
                        grad[0].v[qi] += dS[k] * K[k * g->d + l];
                    if (grad[1].v)
                        grad[1].v[ki] += dS[k] * Q[l];
                    for (int f = 0; f < 3; f++) {
                        if (m[0][f])
                            m[0][f][qi] += fabs(K[k * g->d + l]) *
                                           ((L.nK[f] + 2.0) * fabs(dS[k]) + mdS[f][k]);
                        if (m[1][f])
                            m[1][f][ki] +=
                                fabs(Q[l]) * ((L.nQ[f] + 2.0) * fabs(dS[k]) + mdS[f][k]);
                    }
                }
                if (grad[2].v)
                    for (int64_t j = 0; j < g->dv; j++) {
                        int64_t vi = (b * g->nK + k) * g->dv + j;
                        grad[2].v[vi] += w.A[k] * G[j];
                        for (int f = 0; f < 3; f++)
                            if (m[2][f])
                                m[2][f][vi] +=
                                    ref_mag_prod(w.A[k], fabs(G[j]) * (L.nQ[f] + F[f][k]));
                    }
            }
        }
    }
    attn_row_free(&w, 6, more);
}

static ref_status attn_vjp(const ref_params *p, int n, const ref_tensor *in, const ref_tensor *y,
                           const ref_tensor *gt, ref_tensor *grad, const ref_mag *gmag)
{
    (void)y;
    attn_job t = {.p = p, .n = n, .g = attn_geometry(&in[0].shape, &in[1].shape, &in[2].shape),
                  .in = in, .gt = gt, .grad = grad};
    /* the planes accumulate: m[k][f], f = worst, dtype, prob */
    for (int k = 0; k < 3; k++) {
        int64_t nt = ref_numel(&in[k].shape);
        const ref_mag *gm = gmag && grad[k].v && gmag[k].worst ? &gmag[k] : NULL;
        t.m[k][0] = gm ? gm->worst : NULL;
        t.m[k][1] = gm ? gm->dtype : NULL;
        t.m[k][2] = gm ? gm->prob : NULL;
        if (grad[k].v)
            memset(grad[k].v, 0, sizeof(double) * (size_t)nt);
        for (int f = 0; f < 3; f++)
            if (t.m[k][f])
                memset(t.m[k][f], 0, sizeof(double) * (size_t)nt);
    }
    ref_parallel_for(p->threads, t.g.batch, 1, attn_vjp_batches, &t);
    return t.failed ? REF_ENOMEM : REF_OK;
}

/* Picked elements. The output and dQ need their own row only (made once for the picks in it);
 * dK and dV sum over every row of their batch, whose dS, m(dS), A and Fp are kept for the picks
 * of that batch (the picks come in index order). */
static ref_status attn_fwd_at(const ref_params *p, int n, const ref_tensor *in, ref_picks *pk)
{
    attn_geom g = attn_geometry(&in[0].shape, &in[1].shape, &in[2].shape);
    attn_row_buf w;
    if (attn_row_alloc(&g, 0, &w, NULL) != REF_OK)
        return REF_ENOMEM;
    int64_t have = -1;
    for (int64_t e = 0; e < pk->count; e++) {
        int64_t bi = pk->at[e] / g.dv;
        if (bi != have)
            attn_row(p, n, in, &g, bi / g.nQ, bi % g.nQ, &w);
        have = bi;
        attn_out_elem(&g, in[2].v + bi / g.nQ * g.nK * g.dv, &w, pk->at[e] % g.dv, &pk->v[e],
                      pk->mag.worst ? &pk->mag : NULL, e);
    }
    attn_row_free(&w, 0, NULL);
    return REF_OK;
}

static ref_status attn_vjp_at(const ref_params *p, int n, const ref_tensor *in,
                              const ref_tensor *gt, ref_picks *pk)
{
    attn_geom g = attn_geometry(&in[0].shape, &in[1].shape, &in[2].shape);
    size_t row = (size_t)(g.nK + 1), rows = g.nQ > 0 ? (size_t)g.nQ : 1;
    attn_row_buf w;
    /* dA, Gabs, dS, m(dS) in its three forms; kept per row: dS, its m in three forms, A, and
     * Fp, Fp0, Fpp */
    enum { KEEP = 8 };
    double *more[6], *keep[KEEP] = {0};
    if (attn_row_alloc(&g, 6, &w, more) != REF_OK)
        return REF_ENOMEM;
    int ok = 1;
    for (int k = 0; k < KEEP; k++)
        ok = (keep[k] = malloc(sizeof(double) * row * rows)) != NULL && ok;
    int64_t most = 1; /* the most picks of one output */
    for (int t = 0; t < 3 && t < n; t++)
        most = pk[t].count > most ? pk[t].count : most;
    int64_t *kk = malloc(sizeof(int64_t) * (size_t)most), *cc = malloc(sizeof(int64_t) * (size_t)most);
    double *smag = malloc(sizeof(double) * (size_t)most * 3); /* per form f: smag + f * most */
    char *blocked = malloc(rows); /* batch b's fully blocked rows: no gradient terms */
    ok = ok && kk && cc && smag && blocked;
    attn_lengths L = attn_lengths_of(&g);
    /* per output, its picks' next position, and the element count of one batch of it */
    int64_t next[3] = {0, 0, 0}, per[3] = {g.nQ * g.d, g.nK * g.d, g.nK * g.dv};
    for (int64_t b = 0; ok && b < g.batch; b++) {
        int any = 0;
        for (int t = 0; t < 3 && t < n; t++)
            any |= next[t] < pk[t].count && pk[t].at[next[t]] / per[t] == b;
        if (!any)
            continue;
        for (int64_t i = 0; i < g.nQ; i++) { /* every row of batch b: its dS, m(dS), A, Fp */
            attn_vjp_row(p, n, in, gt, &g, b, i, &w, more[0], more[1], more[2], more + 3);
            blocked[i] = (char)w.blocked;
            const double *row_of[KEEP] = {more[2], more[3], more[4], more[5],
                                          w.A,     w.Fp,    w.Fp0,   w.Fpp};
            for (int k = 0; k < KEEP; k++)
                memcpy(keep[k] + (size_t)i * row, row_of[k], sizeof(double) * (size_t)g.nK);
        }
        for (int t = 0; t < 3 && t < n; t++) {
            int64_t lo = next[t], hi = lo, cols = t == 2 ? g.dv : g.d;
            while (hi < pk[t].count && pk[t].at[hi] / per[t] == b)
                hi++;
            next[t] = hi;
            for (int64_t e = lo; e < hi; e++) { /* the pick's row (or key) and column */
                int64_t f = pk[t].at[e] % per[t];
                kk[e - lo] = f / cols, cc[e - lo] = f % cols;
                pk[t].v[e] = 0.0;
                for (int ff = 0; ff < 3; ff++)
                    smag[ff * most + e - lo] = 0.0;
            }
            if (t == 0) { /* dQ[b, i, l] = sum_k dS[i, k] K[k, l] (K[k, l] = Kt[l, k]) */
                for (int64_t e = lo; e < hi; e++) {
                    if (blocked[kk[e - lo]])
                        continue; /* 0, magnitudes 0 */
                    size_t at = (size_t)kk[e - lo] * row;
                    const double *dS = keep[0] + at, *Kl = w.Kt + cc[e - lo] * g.nK;
                    double s = 0.0, s_mag[3] = {0.0, 0.0, 0.0};
                    for (int64_t k = 0; k < g.nK; k++) {
                        s += dS[k] * Kl[k];
                        for (int ff = 0; ff < 3; ff++)
                            s_mag[ff] += fabs(Kl[k]) * ((L.nK[ff] + 2.0) * fabs(dS[k]) +
                                                        keep[1 + ff][at + (size_t)k]);
                    }
                    pk[t].v[e] = s;
                    for (int ff = 0; ff < 3; ff++)
                        smag[ff * most + e - lo] = s_mag[ff];
                }
            } else { /* dK[b, k, l] = sum_i dS[i, k] Q[i, l]; dV[b, k, j] = sum_i A[i, k] g[i, j]:
                      * i outermost, the picks side by side (each still sums in increasing i) */
                for (int64_t i = 0; i < g.nQ; i++) {
                    if (blocked[i])
                        continue;
                    size_t at = (size_t)i * row;
                    /* dK: dS and its three m; dV: A and its three F */
                    const double *k0 = keep[t == 1 ? 0 : 4] + at;
                    const double *k1[3] = {keep[t == 1 ? 1 : 5] + at, keep[t == 1 ? 2 : 6] + at,
                                           keep[t == 1 ? 3 : 7] + at};
                    const double *xr = t == 1 ? in[0].v + (b * g.nQ + i) * g.d
                                              : gt->v + (b * g.nQ + i) * g.dv;
                    double *v = pk[t].v + lo;
                    if (t == 1)
                        for (int64_t e = 0; e < hi - lo; e++) {
                            double q = xr[cc[e]], dsk = k0[kk[e]];
                            v[e] += dsk * q;
                            for (int ff = 0; ff < 3; ff++)
                                smag[ff * most + e] +=
                                    fabs(q) * ((L.nQ[ff] + 2.0) * fabs(dsk) + k1[ff][kk[e]]);
                        }
                    else
                        for (int64_t e = 0; e < hi - lo; e++) {
                            double gij = xr[cc[e]], a = k0[kk[e]];
                            v[e] += a * gij;
                            for (int ff = 0; ff < 3; ff++)
                                smag[ff * most + e] +=
                                    ref_mag_prod(a, fabs(gij) * (L.nQ[ff] + k1[ff][kk[e]]));
                        }
                }
            }
            for (int64_t e = lo; pk[t].mag.worst && e < hi; e++)
                ref_mag_set(&pk[t].mag, e, smag[e - lo], smag[most + e - lo],
                            smag[2 * most + e - lo]);
        }
    }
    attn_row_free(&w, 6, more);
    for (int k = 0; k < KEEP; k++)
        free(keep[k]);
    free(kk), free(cc), free(smag), free(blocked);
    return ok ? REF_OK : REF_ENOMEM;
}

/* Work of one element: its row's scores and a length-nK dot (output), the row's scores and dA
 * (dQ), a batch's rows over its picks (dK, dV: counted as one row of the dot per term). */
static double attn_work(const ref_params *p, int n, const ref_shape *in, int wrt)
{
    (void)p, (void)n;
    attn_geom g = attn_geometry(&in[0], &in[1], &in[2]);
    double row = (double)g.nK * (double)(g.d + 1);
    if (wrt < 0)
        return row;
    return wrt == 0 ? row + (double)g.nK * (double)g.dv : (double)g.nQ;
}

static ref_status sample_attn(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                              ref_shape *in)
{
    int rank = req->rank >= 0 ? req->rank : (int)ref_rng_range(r, 2, 4);
    if (rank < 2 || rank > REF_MAX_RANK)
        return REF_ENOTAPPLICABLE;
    /* nQ, d first (up to 4 each), the leading axes from what max_elems leaves */
    int64_t cap = req->max_elems > 1 ? req->max_elems : 1;
    ref_shape q;
    int64_t nq = ref_rng_range(r, 1, cap < 4 ? cap : 4);
    int64_t d = ref_rng_range(r, 1, cap / nq < 4 ? cap / nq : 4);
    ref_sample_shape(r, rank - 2, cap / (nq * d), 0, &q);
    q.rank = rank;
    q.dim[rank - 2] = nq;
    q.dim[rank - 1] = d;
    int64_t nK = ref_rng_range(r, 1, 4), dv = ref_rng_range(r, 1, 3);
    if (req->zero_dim) { /* any of the leading axes, nQ, d, nK or dv */
        int z = (int)ref_rng_range(r, 0, rank + 1);
        if (z < rank)
            q.dim[z] = 0;
        else if (z == rank)
            nK = 0;
        else
            dv = 0;
    }
    in[0] = in[1] = in[2] = q;
    /* K [..., nK, d] and V [..., nK, dv] within the budget (nK and dv are drawn up to 4 and 3
     * on top of Q's leading axes) */
    int64_t budget = ref_sample_budget(req), limit = ref_extent_cap(&q, rank - 2, budget);
    nK = nK < limit ? nK : limit;
    in[1].dim[rank - 2] = in[2].dim[rank - 2] = nK;
    limit = ref_extent_cap(&in[2], rank - 1, budget);
    in[2].dim[rank - 1] = dv < limit ? dv : limit;
    p->causal = ref_rng_range(r, 0, 2) == 0;
    *n = ref_rng_range(r, 0, 1) ? 4 : 3;
    in[3].rank = 2;
    in[3].dim[0] = q.dim[rank - 2];
    in[3].dim[1] = nK;
    return REF_OK;
}

/* ======================================================================================== */

const ref_op ref_family_composite[] = {
    {.name = "fftFno", .report_name = "fft_fno", .min_inputs = 1, .max_inputs = 3,
     .input_names = {"x", "wre", "wim"}, .params = REF_P_VARIANT | REF_P_MODES | REF_P_LENGTH,
     .requires_vjp = 1, .c_fwd = 2, .c_vjp = 2,
     .note = "variant 0 spectralConv x [grid, width], 1 rfft1d [batch, n] (unnormalized, packed "
             "re/im), 2 irfft1d (normalized, endpoint imaginaries ignored); VJPs are the packed "
             "real-pairing adjoints, not the inverse transforms",
     .shape = fft_fno_shape, .forward = fft_fno_fwd, .vjp = fft_fno_vjp,
     .sample = sample_fft_fno, .forward_at = fft_fno_fwd_at, .vjp_at = fft_fno_vjp_at,
     .work = fft_fno_work},
    {.name = "selectiveScan", .report_name = "selective_scan", .min_inputs = 4, .max_inputs = 4,
     .input_names = {"a", "b", "x", "h0"}, .requires_vjp = 1, .c_fwd = 2, .c_vjp = 2,
     .note = "all T states [T, D]; a, b shared [D] or token-dependent [T, D]; no ATen kernel "
             "(sequential loop)",
     .shape = scan_shape, .domain = scan_domain, .forward = scan_fwd, .vjp = scan_vjp,
     .sample = sample_scan},
    {.name = "attention", .report_name = "attention", .min_inputs = 3, .max_inputs = 4,
     .input_names = {"q", "k", "v", "mask"},
     .input_kind = {REF_IN_DATA, REF_IN_DATA, REF_IN_DATA, REF_IN_MASK},
     .params = REF_P_CAUSAL, .requires_vjp = 1, .c_fwd = 2, .c_vjp = 2,
     .note = "fully blocked rows give zero weights and a zero output (SDPA gives NaN); mask "
             "[nQ, nK] true = allowed, broadcast over the folded batch*heads axis",
     .shape = attn_shape, .forward = attn_fwd, .vjp = attn_vjp, .sample = sample_attn,
     .forward_at = attn_fwd_at, .vjp_at = attn_vjp_at, .work = attn_work},
};
const int ref_family_composite_count =
    (int)(sizeof ref_family_composite / sizeof ref_family_composite[0]);
