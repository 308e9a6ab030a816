/* The OpenBLAS provider (see openblas_provider.h).
 *
 * matmul, scaledMatmul, linear: providers/openblas/gemm_lowering.c over a CBLAS backend that
 * works in place on the harness's buffers (strided views go to the GEMM as they are where their
 * strides allow, NoTrans or Trans; otherwise they are packed).
 *
 * conv / convTranspose (channels-first single sample, reference/ref_conv.c): both are written
 * with one pair of gathers over "image" positions P and "window" positions Q, related by
 * P_a = Q_a s_a + k_a d_a - p_a (zero padding outside the image):
 *   im2col  col[(c nk + kk), q] = img[c, P(q, kk)]   (0 outside)
 *   col2im  img[c, P(q, kk)]  += col[(c nk + kk), q]
 * conv:          image = x, window = y.  y_g = W_g col(x_g) + b;  dcol = W_g^T g_g -> col2im = dx;
 *                dW_g = g_g col(x_g)^T;  db = g ones.
 * convTranspose: image = y, window = x.  y += col2im(W_g^T x_g) (+ b first);
 *                dx_g = W_g col(g_g);  dW_g = x_g col(g_g)^T;  db = g ones.
 * (g = group; W_g the group's rows of the dense weight.) Every output is a sum of the same
 * products as the reference's, so its error model holds; padded taps add exact zeros. */
#include "providers/provider_util.h"
#include "providers/openblas/openblas_provider.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "providers/openblas/gemm_lowering.h"

/* OpenBLAS's own entry points (declared by its cblas.h; repeated for other CBLAS headers). */
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
char *openblas_get_config(void);

/* Row-major C = alpha op(A) op(B) + beta C in the dtype (f32 or f64). */
static cc_status blas_gemm(cc_dtype t, int ta, int tb, int64_t m, int64_t n, int64_t k,
                           double alpha, const void *A, int64_t lda, const void *B, int64_t ldb,
                           double beta, void *C, int64_t ldc, char *msg, size_t len)
{
    if (m <= 0 || n <= 0 || k <= 0)
        return CC_OK;
    if (!cc_fits_int(m) || !cc_fits_int(n) || !cc_fits_int(k) || !cc_fits_int(lda) || !cc_fits_int(ldb) ||
        !cc_fits_int(ldc))
        return cc_say(msg, len, CC_UNSUPPORTED, "a GEMM extent exceeds OpenBLAS's 32-bit int");
    enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
    if (t == CC_F64)
        cblas_dgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, alpha, A, (int)lda, B,
                    (int)ldb, beta, C, (int)ldc);
    else
        cblas_sgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, (float)alpha, A, (int)lda, B,
                    (int)ldb, (float)beta, C, (int)ldc);
    return CC_OK;
}

/* ---- the CBLAS backend of the GEMM lowering: host pointers, nothing to copy --------------- */

static cc_status bk_gemm(void *self, int ta, int tb, int64_t m, int64_t n, int64_t k,
                         double alpha, const void *A, int64_t lda, const void *B, int64_t ldb,
                         double beta, void *C, int64_t ldc, char *msg, size_t len)
{
    const cc_dtype *t = self;
    return blas_gemm(*t, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, msg, len);
}

static cc_status bk_input(void *self, const void *host, int64_t count, const void **dev,
                          char *msg, size_t len)
{
    (void)self, (void)count, (void)msg, (void)len;
    *dev = host;
    return CC_OK;
}

static cc_status bk_output(void *self, void *host, int64_t count, void **dev, char *msg,
                           size_t len)
{
    const cc_dtype *t = self;
    (void)msg, (void)len;
    memset(host, 0, (size_t)count * cc_dtype_size(*t)); /* +0.0 in both formats */
    *dev = host;
    return CC_OK;
}

static cc_status bk_finish(void *self, cc_status st, char *msg, size_t len)
{
    (void)self, (void)msg, (void)len;
    return st;
}

/* ---- convolution ---------------------------------------------------------------------------- */

typedef struct {
    int transposed, sr;
    int64_t cin, cout, groups, cin_g, cout_g;
    int64_t in[3], k[3], out[3], s[3], p[3], d[3];
    int64_t nin, nk, nout; /* spatial counts */
} cv_geom;

static cc_status cv_geometry(const cc_call *call, int transposed, const cc_view *out,
                             cv_geom *g, char *msg, size_t len)
{
    const ref_params *p = call->params;
    memset(g, 0, sizeof *g);
    g->transposed = transposed;
    if (call->n_in != 3 || !p)
        return cc_say(msg, len, CC_FAILED, "%s takes x, weight, bias and window parameters",
                   call->op);
    const cc_view *x = &call->in[0], *w = &call->in[1], *b = &call->in[2];
    int sr = g->sr = p->spatial;
    if (sr < 1 || sr > 3 || x->rank != sr + 1 || w->rank != sr + 2 || b->rank != 1 ||
        p->groups < 1)
        return cc_say(msg, len, CC_FAILED, "%s: bad ranks or groups for spatial rank %d", call->op,
                   sr);
    g->groups = p->groups;
    g->cin = x->shape[0];
    if (g->cin % g->groups)
        return cc_say(msg, len, CC_FAILED, "%s: channels not divisible by groups", call->op);
    g->cin_g = g->cin / g->groups;
    if (!transposed) {
        g->cout = w->shape[0];
        if (g->cout % g->groups || w->shape[1] != g->cin_g)
            return cc_say(msg, len, CC_FAILED, "conv: weight does not match x and groups");
        g->cout_g = g->cout / g->groups;
    } else {
        if (w->shape[0] != g->cin)
            return cc_say(msg, len, CC_FAILED, "convTranspose: weight does not match x");
        g->cout_g = w->shape[1];
        g->cout = g->cout_g * g->groups;
    }
    if (b->shape[0] != g->cout)
        return cc_say(msg, len, CC_FAILED, "%s: bias is not [outC]", call->op);
    g->nin = g->nk = g->nout = 1;
    for (int a = 0; a < sr; a++) {
        int64_t in = x->shape[a + 1], k = w->shape[a + 2];
        int64_t s = p->stride[a], pd = p->pad[a], d = p->dil[a];
        if (s < 0 || pd < 0 || d < 0 || (!transposed && (s < 1 || k < 1)))
            return cc_say(msg, len, CC_FAILED, "%s: bad window geometry on axis %d", call->op, a);
        int64_t o;
        if (!transposed) {
            int64_t E = d * (k - 1) + 1;
            o = in + 2 * pd < E ? 0 : (in + 2 * pd - E) / s + 1;
        } else if (in == 0 || k == 0 || s == 0) {
            o = 0;
        } else {
            int64_t full = (in - 1) * s + d * (k - 1) + 1;
            o = full > 2 * pd ? full - 2 * pd : 0;
        }
        g->in[a] = in, g->k[a] = k, g->out[a] = o, g->s[a] = s, g->p[a] = pd, g->d[a] = d;
        g->nin *= in, g->nk *= k, g->nout *= o;
    }
    if (out) {
        if (out->rank != sr + 1 || out->shape[0] != g->cout || !cc_view_is_dense(out))
            return cc_say(msg, len, CC_FAILED, "%s: the output buffer does not match", call->op);
        for (int a = 0; a < sr; a++)
            if (out->shape[a + 1] != g->out[a])
                return cc_say(msg, len, CC_FAILED, "%s: output extent %d differs", call->op, a);
    }
    for (int i = 0; i < 3; i++)
        if (call->in[i].dtype != call->dtype || cc_view_span(&call->in[i]) < 0)
            return cc_say(msg, len, CC_FAILED, "%s: input %d is not a %s view with strides >= 0",
                       call->op, i, cc_dtype_name(call->dtype));
    return CC_OK;
}

/* The image and window sides of the im2col relation. */
typedef struct {
    int sr;
    int64_t img[3], win[3], k[3], s[3], p[3], d[3];
    int64_t nwin, nk;
} cv_side;

static cv_side side_of(const cv_geom *g)
{
    cv_side c;
    memset(&c, 0, sizeof c);
    c.sr = g->sr;
    for (int a = 0; a < g->sr; a++) {
        c.img[a] = g->transposed ? g->out[a] : g->in[a];
        c.win[a] = g->transposed ? g->in[a] : g->out[a];
        c.k[a] = g->k[a], c.s[a] = g->s[a], c.p[a] = g->p[a], c.d[a] = g->d[a];
    }
    c.nwin = g->transposed ? g->nin : g->nout;
    c.nk = g->nk;
    return c;
}

/* Offset (in elements, from the image's channel base) of image cell P(q, kk), or -1 when it lies
 * outside the image; sstride are the image's spatial strides. */
static int64_t img_cell(const cv_side *c, int64_t q, int64_t kk, const int64_t *sstride)
{
    int64_t qi[3], ki[3], off = 0;
    for (int a = c->sr - 1; a >= 0; a--) {
        qi[a] = q % c->win[a], q /= c->win[a];
        ki[a] = kk % c->k[a], kk /= c->k[a];
    }
    for (int a = 0; a < c->sr; a++) {
        int64_t P = qi[a] * c->s[a] + ki[a] * c->d[a] - c->p[a];
        if (P < 0 || P >= c->img[a])
            return -1;
        off += P * sstride[a];
    }
    return off;
}

/* col[(ch nk + kk) nwin + q] = img[ch, P(q, kk)] for ch < C; img strided (cstride per channel). */
static void im2col(const cv_side *c, const char *img, int64_t cstride, const int64_t *sstride,
                   int64_t C, char *col, size_t es)
{
    for (int64_t kk = 0; kk < c->nk; kk++)
        for (int64_t q = 0; q < c->nwin; q++) {
            int64_t off = img_cell(c, q, kk, sstride);
            for (int64_t ch = 0; ch < C; ch++) {
                char *dst = col + (size_t)((ch * c->nk + kk) * c->nwin + q) * es;
                if (off < 0)
                    memset(dst, 0, es);
                else
                    memcpy(dst, img + (size_t)(ch * cstride + off) * es, es);
            }
        }
}

/* img[ch, P(q, kk)] += col[(ch nk + kk) nwin + q]; img dense [C, image...]. */
static void col2im_add(cc_dtype t, const cv_side *c, const char *col, int64_t C, char *img)
{
    int64_t dense[3], nimg = 1;
    for (int a = c->sr - 1; a >= 0; a--) {
        dense[a] = nimg;
        nimg *= c->img[a];
    }
    for (int64_t kk = 0; kk < c->nk; kk++)
        for (int64_t q = 0; q < c->nwin; q++) {
            int64_t off = img_cell(c, q, kk, dense);
            if (off < 0)
                continue;
            for (int64_t ch = 0; ch < C; ch++) {
                int64_t ci = (ch * c->nk + kk) * c->nwin + q, ii = ch * nimg + off;
                if (t == CC_F64)
                    ((double *)img)[ii] += ((const double *)col)[ci];
                else
                    ((float *)img)[ii] += ((const float *)col)[ci];
            }
        }
}

/* y[oc, o] = b[oc] for every o. */
static void fill_bias(const cc_view *b, int64_t cout, int64_t nout, char *y, size_t es)
{
    for (int64_t oc = 0; oc < cout; oc++)
        for (int64_t o = 0; o < nout; o++)
            memcpy(y + (size_t)(oc * nout + o) * es,
                   (const char *)b->data + (size_t)(oc * b->strides[0]) * es, es);
}

/* db[oc] = sum_o g[oc, o] (g dense [cout, n]) as a GEMM with a ones column. */
static cc_status bias_grad(cc_dtype t, const char *G, int64_t cout, int64_t n, char *db,
                           char *msg, size_t len)
{
    size_t es = cc_dtype_size(t);
    memset(db, 0, (size_t)cout * es);
    if (cout == 0 || n == 0)
        return CC_OK;
    char *ones = malloc((size_t)n * es);
    if (!ones)
        return cc_say(msg, len, CC_FAILED, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        if (t == CC_F64)
            ((double *)ones)[i] = 1.0;
        else
            ((float *)ones)[i] = 1.0f;
    }
    cc_status st = blas_gemm(t, 0, 0, cout, 1, n, 1.0, G, n, ones, 1, 0.0, db, 1, msg, len);
    free(ones);
    return st;
}

static void *dense_copy(const cc_view *v)
{
    int64_t n = cc_view_numel(v);
    void *p = malloc((size_t)(n > 0 ? n : 1) * cc_dtype_size(v->dtype));
    if (p)
        cc_view_pack(v, p);
    return p;
}

static cc_status conv_forward(const cc_call *call, int transposed, cc_view *out, char *msg,
                              size_t len)
{
    cv_geom g;
    cc_status st = cv_geometry(call, transposed, out, &g, msg, len);
    if (st != CC_OK)
        return st;
    cc_dtype t = call->dtype;
    size_t es = cc_dtype_size(t);
    char *y = out->data;
    fill_bias(&call->in[2], g.cout, g.nout, y, es);
    if (g.cout * g.nout == 0 || g.cin_g * g.nk * g.nin == 0)
        return CC_OK; /* no term exists: the bias */
    cv_side c = side_of(&g);
    const cc_view *x = &call->in[0];
    char *W = dense_copy(&call->in[1]);
    char *col = NULL, *X = NULL;
    if (!W)
        return cc_say(msg, len, CC_FAILED, "out of memory");
    if (!transposed) {
        int64_t K = g.cin_g * g.nk;
        col = malloc((size_t)(K * g.nout) * es);
        if (!col)
            st = cc_say(msg, len, CC_FAILED, "out of memory");
        for (int64_t grp = 0; grp < g.groups && st == CC_OK; grp++) {
            im2col(&c, (const char *)x->data + (size_t)(grp * g.cin_g * x->strides[0]) * es,
                   x->strides[0], x->strides + 1, g.cin_g, col, es);
            st = blas_gemm(t, 0, 0, g.cout_g, g.nout, K, 1.0, W + (size_t)(grp * g.cout_g * K) * es,
                           K, col, g.nout, 1.0, y + (size_t)(grp * g.cout_g * g.nout) * es,
                           g.nout, msg, len);
        }
    } else {
        int64_t KK = g.cout_g * g.nk;
        X = dense_copy(x);
        col = malloc((size_t)(KK * g.nin) * es);
        if (!X || !col)
            st = cc_say(msg, len, CC_FAILED, "out of memory");
        for (int64_t grp = 0; grp < g.groups && st == CC_OK; grp++) {
            st = blas_gemm(t, 1, 0, KK, g.nin, g.cin_g, 1.0, W + (size_t)(grp * g.cin_g * KK) * es,
                           KK, X + (size_t)(grp * g.cin_g * g.nin) * es, g.nin, 0.0, col, g.nin,
                           msg, len);
            if (st == CC_OK)
                col2im_add(t, &c, col, g.cout_g, y + (size_t)(grp * g.cout_g * g.nout) * es);
        }
    }
    free(W), free(X), free(col);
    return st;
}

static cc_status conv_vjp(const cc_call *call, int transposed, const cc_view *gv, cc_view *grads,
                          char *msg, size_t len)
{
    cv_geom g;
    cc_status st = cv_geometry(call, transposed, NULL, &g, msg, len);
    if (st != CC_OK)
        return st;
    cc_dtype t = call->dtype;
    size_t es = cc_dtype_size(t);
    if (!cc_view_is_dense(gv) || gv->dtype != t || cc_view_numel(gv) != g.cout * g.nout)
        return cc_say(msg, len, CC_FAILED, "%s: the cotangent is not dense [outC, out...]",
                   call->op);
    char *dx = grads[0].data, *dW = grads[1].data, *db = grads[2].data;
    int64_t wcount = cc_view_numel(&call->in[1]);
    if (dx)
        memset(dx, 0, (size_t)(g.cin * g.nin) * es);
    if (dW)
        memset(dW, 0, (size_t)wcount * es);
    const char *G = gv->data;
    if (db && (st = bias_grad(t, G, g.cout, g.nout, db, msg, len)) != CC_OK)
        return st;
    if ((!dx && !dW) || g.cout_g * g.nout * g.cin_g * g.nk * g.nin == 0)
        return CC_OK;
    cv_side c = side_of(&g);
    const cc_view *x = &call->in[0];
    char *W = dense_copy(&call->in[1]), *col = NULL, *dcol = NULL, *X = NULL;
    if (!W)
        return cc_say(msg, len, CC_FAILED, "out of memory");
    if (!transposed) {
        int64_t K = g.cin_g * g.nk;
        col = malloc((size_t)(K * g.nout) * es);
        dcol = malloc((size_t)(K * g.nout) * es);
        if (!col || !dcol)
            st = cc_say(msg, len, CC_FAILED, "out of memory");
        for (int64_t grp = 0; grp < g.groups && st == CC_OK; grp++) {
            const char *Gg = G + (size_t)(grp * g.cout_g * g.nout) * es;
            const char *Wg = W + (size_t)(grp * g.cout_g * K) * es;
            if (dW) { /* dW_g (cout_g x K) = g_g (cout_g x nout) col^T (nout x K) */
                im2col(&c, (const char *)x->data + (size_t)(grp * g.cin_g * x->strides[0]) * es,
                       x->strides[0], x->strides + 1, g.cin_g, col, es);
                st = blas_gemm(t, 0, 1, g.cout_g, K, g.nout, 1.0, Gg, g.nout, col, g.nout, 0.0,
                               dW + (size_t)(grp * g.cout_g * K) * es, K, msg, len);
            }
            if (dx && st == CC_OK) { /* dcol (K x nout) = W_g^T (K x cout_g) g_g -> col2im */
                st = blas_gemm(t, 1, 0, K, g.nout, g.cout_g, 1.0, Wg, K, Gg, g.nout, 0.0, dcol,
                               g.nout, msg, len);
                if (st == CC_OK)
                    col2im_add(t, &c, dcol, g.cin_g, dx + (size_t)(grp * g.cin_g * g.nin) * es);
            }
        }
    } else {
        int64_t KK = g.cout_g * g.nk;
        int64_t dense_sp[3], n = 1;
        for (int a = g.sr - 1; a >= 0; a--) {
            dense_sp[a] = n;
            n *= g.out[a];
        }
        X = dense_copy(x);
        col = malloc((size_t)(KK * g.nin) * es);
        if (!X || !col)
            st = cc_say(msg, len, CC_FAILED, "out of memory");
        for (int64_t grp = 0; grp < g.groups && st == CC_OK; grp++) {
            /* col(g_g) (KK x nin): the window positions are x's */
            im2col(&c, G + (size_t)(grp * g.cout_g * g.nout) * es, g.nout, dense_sp, g.cout_g,
                   col, es);
            if (dx) /* dx_g (cin_g x nin) = W_g (cin_g x KK) col */
                st = blas_gemm(t, 0, 0, g.cin_g, g.nin, KK, 1.0,
                               W + (size_t)(grp * g.cin_g * KK) * es, KK, col, g.nin, 0.0,
                               dx + (size_t)(grp * g.cin_g * g.nin) * es, g.nin, msg, len);
            if (dW && st == CC_OK) /* dW_g (cin_g x KK) = x_g (cin_g x nin) col^T */
                st = blas_gemm(t, 0, 1, g.cin_g, KK, g.nin, 1.0,
                               X + (size_t)(grp * g.cin_g * g.nin) * es, g.nin, col, g.nin, 0.0,
                               dW + (size_t)(grp * g.cin_g * KK) * es, KK, msg, len);
        }
    }
    free(W), free(X), free(col), free(dcol);
    return st;
}

/* ---- the cc_provider functions ----------------------------------------------------------------- */

static int is_conv(const char *op, int *transposed)
{
    if (!strcmp(op, "conv")) {
        *transposed = 0;
        return 1;
    }
    if (!strcmp(op, "convTranspose") || !strcmp(op, "conv_transpose")) {
        *transposed = 1;
        return 1;
    }
    return 0;
}

static cc_status check_call(const cc_call *call, char *msg, size_t len)
{
    if (!call || !call->op)
        return cc_say(msg, len, CC_FAILED, "openblas: NULL call");
    int tr;
    if (!cc_gemm_has_op(call->op) && !is_conv(call->op, &tr))
        return cc_say(msg, len, CC_UNSUPPORTED, "the openblas provider has no %s", call->op);
    if (call->device != CC_CPU)
        return cc_say(msg, len, CC_UNSUPPORTED, "the openblas provider runs on the CPU only");
    if (call->dtype != CC_F32 && call->dtype != CC_F64)
        return cc_say(msg, len, CC_UNSUPPORTED, "%s: OpenBLAS has no %s GEMM (f32 and f64 only)",
                   call->op, cc_dtype_name(call->dtype));
    if (call->n_in > 0 && !call->in)
        return cc_say(msg, len, CC_FAILED, "%s: the call has no input views", call->op);
    return CC_OK;
}

static cc_status ob_init(void *ctx, cc_device device, char *msg, size_t len)
{
    (void)ctx;
    if (device != CC_CPU)
        return cc_say(msg, len, CC_UNSUPPORTED, "the openblas provider runs on the CPU only");
    int threads = 1;
    const char *env = getenv("CAPCHECK_OPENBLAS_THREADS");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end || v < 1 || v > 1024)
            return cc_say(msg, len, CC_FAILED,
                       "CAPCHECK_OPENBLAS_THREADS=%s is not a thread count (1..1024)", env);
        threads = (int)v;
    }
    openblas_set_num_threads(threads);
    return CC_OK;
}

static cc_status ob_forward(void *ctx, const cc_call *call, cc_view *out, char *msg, size_t len)
{
    (void)ctx;
    cc_status st = check_call(call, msg, len);
    if (st != CC_OK)
        return st;
    if (!out)
        return cc_say(msg, len, CC_FAILED, "%s: NULL output", call->op);
    int tr;
    if (is_conv(call->op, &tr))
        return conv_forward(call, tr, out, msg, len);
    cc_dtype t = call->dtype;
    cc_gemm_backend bk = {.self = &t, .dtype = t, .acc_dtype = t, .gemm = bk_gemm,
                          .input = bk_input, .output = bk_output, .finish = bk_finish};
    return cc_gemm_forward(&bk, call, out, msg, len);
}

static cc_status ob_vjp(void *ctx, const cc_call *call, const cc_view *g, cc_view *grads,
                        char *msg, size_t len)
{
    (void)ctx;
    cc_status st = check_call(call, msg, len);
    if (st != CC_OK)
        return st;
    if (!g || !grads)
        return cc_say(msg, len, CC_FAILED, "%s: NULL cotangent or gradients", call->op);
    int tr;
    if (is_conv(call->op, &tr)) {
        for (int i = 0; i < 3 && i < call->n_in; i++)
            if (grads[i].data && !cc_view_is_dense(&grads[i]))
                return cc_say(msg, len, CC_FAILED, "%s: gradient buffer %d is not dense", call->op,
                           i);
        return conv_vjp(call, tr, g, grads, msg, len);
    }
    cc_dtype t = call->dtype;
    cc_gemm_backend bk = {.self = &t, .dtype = t, .acc_dtype = t, .gemm = bk_gemm,
                          .input = bk_input, .output = bk_output, .finish = bk_finish};
    return cc_gemm_vjp(&bk, call, g, grads, msg, len);
}

static void ob_describe(void *ctx, char *buf, size_t len)
{
    (void)ctx;
    if (!buf || !len)
        return;
    const char *cfg = openblas_get_config();
    if (!cfg)
        cfg = "unknown";
    int prefixed = strncmp(cfg, "OpenBLAS", 8) == 0;
    snprintf(buf, len, "%s%s; threads %d; device cpu; provider external; vjp GEMM",
             prefixed ? "" : "OpenBLAS ", cfg, openblas_get_num_threads());
}

static const char *ob_vjp_mode(void *ctx, const char *op)
{
    (void)ctx;
    int tr;
    return op && (cc_gemm_has_op(op) || is_conv(op, &tr)) ? "backendVJP" : NULL;
}

const cc_provider *cc_openblas_provider(char *msg, size_t msg_len)
{
    (void)msg, (void)msg_len;
    static const cc_provider p = {CC_PROVIDER_ABI_VERSION, "openblas", NULL, ob_init,
                                  ob_forward, ob_vjp, ob_describe, ob_vjp_mode, NULL};
    return &p;
}
