/* fftFno over a cc_fft_backend (see the header for the formulas). */
#include "providers/provider_util.h"
#include "providers/cuda/fft_lowering.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/openblas/gemm_lowering.h"

static int endpoint(int64_t k, int64_t n)
{
    return k == 0 || 2 * k == n;
}

/* Element access and arithmetic in the case dtype (f32 or f64): rd rounds a double result to the
 * dtype, so a chain of rd(a op b) is that dtype's own arithmetic (a float32 product or sum is
 * exact in double before its one rounding). */
static double ld(cc_dtype t, const void *p, int64_t i)
{
    return t == CC_F64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

static void st(cc_dtype t, void *p, int64_t i, double v)
{
    if (t == CC_F64)
        ((double *)p)[i] = v;
    else
        ((float *)p)[i] = (float)v;
}

static double rd(cc_dtype t, double v)
{
    return t == CC_F64 ? v : (double)(float)v;
}

int cc_fft_has_op(const char *op)
{
    return op && (!strcmp(op, "fftFno") || !strcmp(op, "fft_fno"));
}

void cc_fft_adjust_spectrum(cc_dtype t, void *s, int64_t rows, int64_t n, int halve_inside,
                            int weight_over_n)
{
    int64_t K = n / 2 + 1;
    for (int64_t b = 0; b < rows; b++)
        for (int64_t k = 0; k < K; k++) {
            int64_t i = (b * K + k) * 2;
            int e = endpoint(k, n);
            double re = ld(t, s, i), im = ld(t, s, i + 1);
            if (halve_inside && !e)
                re *= 0.5, im *= 0.5; /* exact */
            if (weight_over_n) {
                double m = e ? 1.0 : 2.0; /* (m_k re) / n: doubling exact, one rounding */
                re = rd(t, m * re / (double)n);
                im = rd(t, m * im / (double)n);
            }
            st(t, s, i, re);
            st(t, s, i + 1, e ? 0.0 : im);
        }
}

static void divide_by_n(cc_dtype t, void *x, int64_t count, int64_t n)
{
    for (int64_t i = 0; i < count; i++)
        st(t, x, i, rd(t, ld(t, x, i) / (double)n));
}

/* dst [cols, rows] = src [rows, cols]^T (element copies). */
static void transpose(cc_dtype t, const void *src, int64_t rows, int64_t cols, void *dst)
{
    size_t es = cc_dtype_size(t);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            memcpy((char *)dst + (size_t)(c * rows + r) * es,
                   (const char *)src + (size_t)(r * cols + c) * es, es);
}

cc_status cc_fft_geometry(const cc_call *call, cc_fft_geom *g, char *msg, size_t len)
{
    const ref_params *p = call->params;
    memset(g, 0, sizeof *g);
    if (!p)
        return cc_say(msg, len, CC_FAILED, "fftFno: the call has no parameters");
    g->variant = p->variant;
    const cc_view *x = call->n_in >= 1 ? &call->in[0] : NULL;
    switch (p->variant) {
    case 1:
        if (call->n_in != 1 || x->rank != 2 || x->shape[1] < 1)
            return cc_say(msg, len, CC_FAILED, "rfft1d wants one input x [batch, n], n >= 1");
        g->rows = x->shape[0];
        g->n = x->shape[1];
        break;
    case 2:
        g->n = p->length;
        if (call->n_in != 1 || g->n < 1 || x->rank != 3 || x->shape[1] != g->n / 2 + 1 ||
            x->shape[2] != 2)
            return cc_say(msg, len, CC_FAILED, "irfft1d wants one input z [batch, length/2+1, 2]");
        g->rows = x->shape[0];
        break;
    case 0: {
        if (call->n_in != 3 || x->rank != 2 || x->shape[0] < 1)
            return cc_say(msg, len, CC_FAILED, "spectralConv wants x [grid, width] (grid >= 1), "
                                            "wre, wim");
        g->n = x->shape[0];
        g->rows = x->shape[1];
        g->modes = p->modes;
        if (g->modes < 0 || g->modes > g->n / 2 + 1)
            return cc_say(msg, len, CC_FAILED, "spectralConv modes %lld outside 0..%lld",
                       (long long)g->modes, (long long)(g->n / 2 + 1));
        for (int k = 1; k <= 2; k++) {
            const cc_view *w = &call->in[k];
            if (w->rank != 3 || w->shape[0] != g->modes || w->shape[1] != g->rows ||
                w->shape[2] != g->rows)
                return cc_say(msg, len, CC_FAILED, "spectralConv %s is not [modes, width, width]",
                           k == 1 ? "wre" : "wim");
        }
        break;
    }
    default:
        return cc_say(msg, len, CC_UNSUPPORTED, "fftFno variant %d: only 0 (spectralConv), 1 "
                   "(rfft1d) and 2 (irfft1d) exist", p->variant);
    }
    g->K = g->n / 2 + 1;
    return CC_OK;
}

/* ---- buffers ------------------------------------------------------------------------------- */

#define FL_MAX_BUFS 12

typedef struct {
    cc_dtype t;
    size_t es;
    void *p[FL_MAX_BUFS];
    int n;
} fl_bufs;

/* A zeroed host buffer of count elements of the dtype, freed by fl_free. */
static void *fl_alloc(fl_bufs *b, int64_t count)
{
    if (b->n == FL_MAX_BUFS || count < 0)
        return NULL;
    void *p = calloc((size_t)(count > 0 ? count : 1), b->es);
    if (p)
        b->p[b->n++] = p;
    return p;
}

/* A dense copy of a view. */
static void *fl_dense(fl_bufs *b, const cc_view *v)
{
    void *p = fl_alloc(b, cc_view_numel(v));
    if (p)
        cc_view_pack(v, p);
    return p;
}

static void fl_free(fl_bufs *b)
{
    for (int i = 0; i < b->n; i++)
        free(b->p[i]);
    b->n = 0;
}

static cc_status oom(char *msg, size_t len)
{
    return cc_say(msg, len, CC_FAILED, "out of memory");
}

/* ---- spectralConv (variant 0) ------------------------------------------------------------- */

/* X [w, K, 2] = the contract's rfft of every channel of x [n, w] (dense). */
static cc_status sc_spectrum(const cc_fft_backend *bk, fl_bufs *b, const cc_fft_geom *g,
                             const void *x, void **X, char *msg, size_t len)
{
    void *xT = fl_alloc(b, g->rows * g->n);
    *X = fl_alloc(b, g->rows * g->K * 2);
    if (!xT || !*X)
        return oom(msg, len);
    transpose(bk->dtype, x, g->n, g->rows, xT);
    cc_status s = bk->r2c(bk->self, g->n, g->rows, xT, *X, msg, len);
    if (s == CC_OK)
        cc_fft_adjust_spectrum(bk->dtype, *X, g->rows, g->n, 0, 0);
    return s;
}

/* out [n, w] = (C2R(S) with S [w, K, 2] adjusted in place)^T, divided by n when normalized. */
static cc_status sc_inverse(const cc_fft_backend *bk, fl_bufs *b, const cc_fft_geom *g, void *S,
                            int normalized, void *out, char *msg, size_t len)
{
    void *yT = fl_alloc(b, g->rows * g->n);
    if (!yT)
        return oom(msg, len);
    cc_status s = bk->c2r(bk->self, g->n, g->rows, S, yT, msg, len);
    if (s != CC_OK)
        return s;
    if (normalized)
        divide_by_n(bk->dtype, yT, g->rows * g->n, g->n);
    transpose(bk->dtype, yT, g->rows, g->n, out);
    return CC_OK;
}

static cc_status sc_forward(const cc_fft_backend *bk, const cc_call *call, const cc_fft_geom *g,
                            cc_view *out, char *msg, size_t len)
{
    cc_dtype t = bk->dtype;
    int64_t w = g->rows, K = g->K;
    if (w == 0)
        return CC_OK;
    fl_bufs b = {t, cc_dtype_size(t), {0}, 0};
    void *x = fl_dense(&b, &call->in[0]), *Wr = fl_dense(&b, &call->in[1]);
    void *Wi = fl_dense(&b, &call->in[2]), *Y = fl_alloc(&b, w * K * 2), *X = NULL;
    cc_status s = !x || !Wr || !Wi || !Y ? oom(msg, len) : CC_OK;
    if (s == CC_OK)
        s = sc_spectrum(bk, &b, g, x, &X, msg, len);
    if (s == CC_OK) {
        /* Y_k[o] = sum_i X_k[i] W[k,i,o] for the kept modes; Y stays 0 beyond them */
        for (int64_t k = 0; k < g->modes; k++)
            for (int64_t o = 0; o < w; o++) {
                double yr = 0.0, yi = 0.0;
                for (int64_t i = 0; i < w; i++) {
                    double xr = ld(t, X, (i * K + k) * 2), xi = ld(t, X, (i * K + k) * 2 + 1);
                    double wr = ld(t, Wr, (k * w + i) * w + o), wi = ld(t, Wi, (k * w + i) * w + o);
                    yr = rd(t, yr + rd(t, rd(t, xr * wr) - rd(t, xi * wi)));
                    yi = rd(t, yi + rd(t, rd(t, xr * wi) + rd(t, xi * wr)));
                }
                st(t, Y, (o * K + k) * 2, yr);
                st(t, Y, (o * K + k) * 2 + 1, yi);
            }
        cc_fft_adjust_spectrum(t, Y, w, g->n, 0, 0); /* irfft ignores endpoint imaginaries */
        s = sc_inverse(bk, &b, g, Y, 1, out->data, msg, len);
    }
    fl_free(&b);
    return s;
}

static cc_status sc_vjp(const cc_fft_backend *bk, const cc_call *call, const cc_fft_geom *g,
                        const cc_view *gv, cc_view *grads, char *msg, size_t len)
{
    cc_dtype t = bk->dtype;
    int64_t w = g->rows, K = g->K, M = g->modes;
    if (w == 0 || (!grads[0].data && !grads[1].data && !grads[2].data))
        return CC_OK;
    fl_bufs b = {t, cc_dtype_size(t), {0}, 0};
    void *x = fl_dense(&b, &call->in[0]), *Wr = fl_dense(&b, &call->in[1]);
    void *Wi = fl_dense(&b, &call->in[2]), *GY = fl_alloc(&b, w * K * 2);
    void *gT = fl_alloc(&b, w * g->n), *X = NULL;
    cc_status s = !x || !Wr || !Wi || !GY || !gT ? oom(msg, len) : CC_OK;
    if (s == CC_OK) { /* GY = (m_k / n) rfft(g[:, o]) */
        transpose(t, gv->data, g->n, w, gT);
        s = bk->r2c(bk->self, g->n, w, gT, GY, msg, len);
        if (s == CC_OK)
            cc_fft_adjust_spectrum(t, GY, w, g->n, 0, 1);
    }
    if (s == CC_OK && (grads[1].data || grads[2].data)) {
        s = sc_spectrum(bk, &b, g, x, &X, msg, len);
        for (int64_t k = 0; s == CC_OK && k < M; k++)
            for (int64_t i = 0; i < w; i++)
                for (int64_t o = 0; o < w; o++) {
                    double xr = ld(t, X, (i * K + k) * 2), xi = ld(t, X, (i * K + k) * 2 + 1);
                    double gr = ld(t, GY, (o * K + k) * 2), gi = ld(t, GY, (o * K + k) * 2 + 1);
                    int64_t wo = (k * w + i) * w + o;
                    if (grads[1].data)
                        st(t, grads[1].data, wo, rd(t, rd(t, gr * xr) + rd(t, gi * xi)));
                    if (grads[2].data)
                        st(t, grads[2].data, wo, rd(t, rd(t, gi * xr) - rd(t, gr * xi)));
                }
    }
    if (s == CC_OK && grads[0].data) {
        void *dX = fl_alloc(&b, w * K * 2); /* 0 beyond the kept modes */
        if (!dX)
            s = oom(msg, len);
        for (int64_t k = 0; s == CC_OK && k < M; k++)
            for (int64_t i = 0; i < w; i++) {
                double sr = 0.0, si = 0.0;
                for (int64_t o = 0; o < w; o++) {
                    double gr = ld(t, GY, (o * K + k) * 2), gi = ld(t, GY, (o * K + k) * 2 + 1);
                    double wr = ld(t, Wr, (k * w + i) * w + o), wi = ld(t, Wi, (k * w + i) * w + o);
                    sr = rd(t, sr + rd(t, rd(t, gr * wr) + rd(t, gi * wi)));
                    si = rd(t, si + rd(t, rd(t, gi * wr) - rd(t, gr * wi)));
                }
                st(t, dX, (i * K + k) * 2, sr);
                st(t, dX, (i * K + k) * 2 + 1, si);
            }
        if (s == CC_OK) { /* dx = rfft*(dX) = C2R(dX / m_k) per channel */
            cc_fft_adjust_spectrum(t, dX, w, g->n, 1, 0);
            s = sc_inverse(bk, &b, g, dX, 0, grads[0].data, msg, len);
        }
    }
    fl_free(&b);
    return s;
}

/* ---- entry points ---------------------------------------------------------------------------- */

static cc_status check_call(const cc_fft_backend *bk, const cc_call *call, cc_fft_geom *g,
                            char *msg, size_t len)
{
    if (!call || !call->op || !cc_fft_has_op(call->op))
        return cc_say(msg, len, CC_UNSUPPORTED, "no FFT lowering for %s",
                   call && call->op ? call->op : "(null)");
    if (call->dtype != CC_F32 && call->dtype != CC_F64)
        return cc_say(msg, len, CC_UNSUPPORTED, "fftFno: no %s transform (f32 and f64 only)",
                   cc_dtype_name(call->dtype));
    if (bk->dtype != call->dtype)
        return cc_say(msg, len, CC_FAILED, "internal: backend dtype differs from the case dtype");
    for (int i = 0; i < call->n_in; i++)
        if (call->in[i].dtype != call->dtype)
            return cc_say(msg, len, CC_FAILED, "fftFno: input %d is %s, the case is %s", i,
                       cc_dtype_name(call->in[i].dtype), cc_dtype_name(call->dtype));
    return cc_fft_geometry(call, g, msg, len);
}

static int64_t out_count(const cc_fft_geom *g)
{
    return g->variant == 1 ? g->rows * g->K * 2 : g->rows * g->n;
}

cc_status cc_fft_forward(const cc_fft_backend *bk, const cc_call *call, cc_view *out, char *msg,
                         size_t len)
{
    cc_fft_geom g;
    cc_status s = check_call(bk, call, &g, msg, len);
    if (s != CC_OK)
        return s;
    if (!out || !cc_view_is_dense(out) || cc_view_numel(out) != out_count(&g) ||
        out->dtype != call->dtype)
        return cc_say(msg, len, CC_FAILED, "fftFno: the output buffer does not match");
    if (g.variant == 0)
        return sc_forward(bk, call, &g, out, msg, len);
    if (g.rows == 0)
        return CC_OK;
    fl_bufs b = {call->dtype, cc_dtype_size(call->dtype), {0}, 0};
    void *x = fl_dense(&b, &call->in[0]);
    if (!x)
        s = oom(msg, len);
    else if (g.variant == 1) {
        s = bk->r2c(bk->self, g.n, g.rows, x, out->data, msg, len);
    } else {
        cc_fft_adjust_spectrum(call->dtype, x, g.rows, g.n, 0, 0); /* endpoint imaginaries */
        s = bk->c2r(bk->self, g.n, g.rows, x, out->data, msg, len);
        if (s == CC_OK)
            divide_by_n(call->dtype, out->data, g.rows * g.n, g.n);
    }
    fl_free(&b);
    return s;
}

cc_status cc_fft_vjp(const cc_fft_backend *bk, const cc_call *call, const cc_view *gv,
                     cc_view *grads, char *msg, size_t len)
{
    cc_fft_geom g;
    cc_status s = check_call(bk, call, &g, msg, len);
    if (s != CC_OK)
        return s;
    if (!gv || !grads || !cc_view_is_dense(gv) || gv->dtype != call->dtype ||
        cc_view_numel(gv) != out_count(&g))
        return cc_say(msg, len, CC_FAILED, "fftFno: the cotangent does not match the output");
    for (int i = 0; i < call->n_in; i++)
        if (grads[i].data && (!cc_view_is_dense(&grads[i]) ||
                              cc_view_numel(&grads[i]) != cc_view_numel(&call->in[i])))
            return cc_say(msg, len, CC_FAILED, "fftFno: gradient buffer %d does not match input %d",
                       i, i);
    for (int i = 0; i < call->n_in; i++) /* empty sums (no kept mode, no channel) are zeros */
        if (grads[i].data)
            memset(grads[i].data, 0, (size_t)cc_view_numel(&call->in[i]) * cc_dtype_size(call->dtype));
    if (g.variant == 0)
        return sc_vjp(bk, call, &g, gv, grads, msg, len);
    if (!grads[0].data || g.rows == 0)
        return CC_OK;
    fl_bufs b = {call->dtype, cc_dtype_size(call->dtype), {0}, 0};
    void *G = fl_alloc(&b, out_count(&g));
    if (!G) {
        fl_free(&b);
        return oom(msg, len);
    }
    memcpy(G, gv->data, (size_t)out_count(&g) * b.es);
    if (g.variant == 1) { /* dx = C2R(G / m_k) */
        cc_fft_adjust_spectrum(call->dtype, G, g.rows, g.n, 1, 0);
        s = bk->c2r(bk->self, g.n, g.rows, G, grads[0].data, msg, len);
    } else { /* dz = (m_k / n) R2C(g) */
        s = bk->r2c(bk->self, g.n, g.rows, G, grads[0].data, msg, len);
        if (s == CC_OK)
            cc_fft_adjust_spectrum(call->dtype, grads[0].data, g.rows, g.n, 0, 1);
    }
    fl_free(&b);
    return s;
}
