/* The cuDNN provider "cudnn" (see cuda_providers.h), through cuDNN's legacy (v7-style) API.
 *
 * conv / convTranspose (channels-first single sample, reference/ref_conv.c) are one cuDNN
 * convolution between an "image" tensor (the convolution's input side) and a "window" tensor
 * (its output side), batch N = 1, filter [window C, image C / groups, k...]; spatial rank 1 runs
 * as rank 2 with a unit leading axis:
 *   conv           image = x, window = y:  y = Forward(x) + b (y prefilled with b, beta = 1);
 *                  dx = BackwardData(g), dW = BackwardFilter(x, g), db = BackwardBias(g)
 *   convTranspose  image = y, window = x:  y = BackwardData(x) + b;
 *                  dx = Forward(g), dW = BackwardFilter(g, x), db = BackwardBias(g)
 * (the convTranspose weight [inC, outC/groups, k...] is exactly that filter.) Algorithms are
 * pinned to the GEMM-class ones (implicit GEMM, precomputed implicit GEMM, explicit GEMM;
 * BackwardData ALGO_1/ALGO_0; BackwardFilter ALGO_1/ALGO_0/ALGO_3), never FFT or Winograd, whose
 * error is outside the reference's per-window bound; math type CUDNN_FMA_MATH (no tensor cores,
 * no TF32). Dilation 0 (the reference's extent-1 taps) is refused: cuDNN needs dilation >= 1.
 * A case with no term at all (no input channel, an all-padding window) is the bias, written on
 * the host; cuDNN descriptors cannot have zero extents.
 *
 * softmax / logSoftmax over params.axis: the tensor viewed as [outer, axis, inner, 1] in
 * CUDNN_SOFTMAX_MODE_CHANNEL, CUDNN_SOFTMAX_ACCURATE (max-shifted) or CUDNN_SOFTMAX_LOG; the
 * VJP recomputes y on the device and calls cudnnSoftmaxBackward. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cudnn.h>

#include "providers/cuda/cuda_common.h"
#include "providers/openblas/gemm_lowering.h"

static cc_status dnn_check(cudnnStatus_t s, const char *what, char *msg, size_t len)
{
    if (s == CUDNN_STATUS_SUCCESS)
        return CC_OK;
    cc_status st = s == CUDNN_STATUS_NOT_SUPPORTED ? CC_UNSUPPORTED : CC_FAILED;
    return ccu_say(msg, len, st, "%s: cuDNN: %s", what, cudnnGetErrorString(s));
}

static int fits_int(int64_t v)
{
    return v >= 0 && v <= INT_MAX;
}

typedef struct {
    cudnnHandle_t h;
    cc_dtype t;
    cudnnDataType_t dt;
    ccu_bufs bufs;
} dnn_call;

static cc_status open_call(const cc_call *call, dnn_call *c, char *msg, size_t len)
{
    memset(c, 0, sizeof *c);
    c->t = call->dtype;
    c->dt = call->dtype == CC_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    cc_status st = dnn_check(cudnnCreate(&c->h), "cudnnCreate", msg, len);
    if (st != CC_OK)
        c->h = NULL;
    return st;
}

/* Finish the device work (synchronize, copy outputs back, free) and destroy the handle. */
static cc_status close_call(dnn_call *c, cc_status st, char *msg, size_t len)
{
    st = ccu_finish(&c->bufs, st, msg, len);
    if (c->h) {
        char spare[256];
        cc_status s2 = dnn_check(cudnnDestroy(c->h), "cudnnDestroy", st == CC_OK ? msg : spare,
                                 st == CC_OK ? len : sizeof spare);
        if (st == CC_OK)
            st = s2;
        c->h = NULL;
    }
    return st;
}

/* alpha/beta scalars in the compute type (double for f64 data, float otherwise). */
typedef union {
    float f;
    double d;
} scalar;

static scalar sc(const dnn_call *c, double v)
{
    scalar s;
    if (c->t == CC_F64)
        s.d = v;
    else
        s.f = (float)v;
    return s;
}

static cc_status upload_view(dnn_call *c, const cc_view *v, void **dev, char *msg, size_t len)
{
    void *h = ccu_dense_host(v);
    if (!h)
        return ccu_say(msg, len, CC_FAILED, "out of memory");
    cc_status st = ccu_upload(&c->bufs, h, (size_t)cc_view_numel(v) * cc_dtype_size(c->t), dev,
                              msg, len);
    free(h);
    return st;
}

/* ---- convolution -------------------------------------------------------------------------- */

typedef struct {
    int transposed, sr, nd; /* nd: cuDNN tensor rank (4 or 5) */
    int64_t groups, ci, co;  /* image-side and window-side channels */
    int64_t img[3], win[3], k[3], s[3], p[3], d[3];
    int64_t nimg, nwin, nk;
    int64_t cin, cout; /* the op's own x / y channels */
} dc_geom;

static cc_status dc_geometry(const cc_call *call, int transposed, dc_geom *g, char *msg,
                             size_t len)
{
    const ref_params *p = call->params;
    memset(g, 0, sizeof *g);
    g->transposed = transposed;
    if (call->n_in != 3 || !p)
        return ccu_say(msg, len, CC_FAILED, "%s takes x, weight, bias", call->op);
    const cc_view *x = &call->in[0], *w = &call->in[1], *b = &call->in[2];
    int sr = g->sr = p->spatial;
    if (sr < 1 || sr > 3 || x->rank != sr + 1 || w->rank != sr + 2 || b->rank != 1 ||
        p->groups < 1)
        return ccu_say(msg, len, CC_FAILED, "%s: bad ranks or groups", call->op);
    g->nd = sr == 3 ? 5 : 4;
    g->groups = p->groups;
    g->cin = x->shape[0];
    int64_t cin_g = g->cin / g->groups, cout_g;
    if (g->cin % g->groups)
        return ccu_say(msg, len, CC_FAILED, "%s: channels not divisible by groups", call->op);
    if (!transposed) {
        g->cout = w->shape[0];
        if (g->cout % g->groups || w->shape[1] != cin_g)
            return ccu_say(msg, len, CC_FAILED, "conv: weight does not match x and groups");
        cout_g = g->cout / g->groups;
    } else {
        if (w->shape[0] != g->cin)
            return ccu_say(msg, len, CC_FAILED, "convTranspose: weight does not match x");
        cout_g = w->shape[1];
        g->cout = cout_g * g->groups;
    }
    (void)cout_g;
    if (b->shape[0] != g->cout)
        return ccu_say(msg, len, CC_FAILED, "%s: bias is not [outC]", call->op);
    g->nimg = g->nwin = g->nk = 1;
    for (int a = 0; a < sr; a++) {
        int64_t in = x->shape[a + 1], k = w->shape[a + 2];
        int64_t s = p->stride[a], pd = p->pad[a], d = p->dil[a], o;
        if (s < 0 || pd < 0 || d < 0 || (!transposed && (s < 1 || k < 1)))
            return ccu_say(msg, len, CC_FAILED, "%s: bad window geometry", call->op);
        if (!transposed) {
            int64_t E = d * (k - 1) + 1;
            o = in + 2 * pd < E ? 0 : (in + 2 * pd - E) / s + 1;
        } else if (in == 0 || k == 0 || s == 0) {
            o = 0;
        } else {
            int64_t full = (in - 1) * s + d * (k - 1) + 1;
            o = full > 2 * pd ? full - 2 * pd : 0;
        }
        g->img[a] = transposed ? o : in;
        g->win[a] = transposed ? in : o;
        g->k[a] = k, g->s[a] = s, g->p[a] = pd, g->d[a] = d;
        g->nimg *= g->img[a], g->nwin *= g->win[a], g->nk *= k;
    }
    g->ci = transposed ? g->cout : g->cin;
    g->co = transposed ? g->cin : g->cout;
    return CC_OK;
}

/* Whether any term exists (every extent cuDNN would see is >= 1). */
static int dc_has_terms(const dc_geom *g)
{
    return g->ci > 0 && g->co > 0 && g->nimg > 0 && g->nwin > 0 && g->nk > 0;
}

typedef struct {
    cudnnTensorDescriptor_t img, win, bias;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
} dc_desc;

static void dc_desc_free(dc_desc *D)
{
    if (D->img)
        cudnnDestroyTensorDescriptor(D->img);
    if (D->win)
        cudnnDestroyTensorDescriptor(D->win);
    if (D->bias)
        cudnnDestroyTensorDescriptor(D->bias);
    if (D->w)
        cudnnDestroyFilterDescriptor(D->w);
    if (D->conv)
        cudnnDestroyConvolutionDescriptor(D->conv);
    memset(D, 0, sizeof *D);
}

static cc_status set_tensor(cudnnTensorDescriptor_t t, cudnnDataType_t dt, int nd,
                            const int *dims, char *msg, size_t len)
{
    int strides[5], s = 1;
    for (int i = nd - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i];
    }
    return dnn_check(cudnnSetTensorNdDescriptor(t, dt, nd, dims, strides),
                     "cudnnSetTensorNdDescriptor", msg, len);
}

static cc_status dc_describe(const dnn_call *c, const dc_geom *g, const cc_call *call,
                             dc_desc *D, char *msg, size_t len)
{
    memset(D, 0, sizeof *D);
    int nd = g->nd, ns = nd - 2, lead = g->sr == 1; /* rank 1 runs as rank 2 */
    int idims[5], wdims[5], fdims[5], bdims[5], pad[3], str[3], dil[3];
    if (!fits_int(g->ci) || !fits_int(g->co) || !fits_int(g->groups))
        return ccu_say(msg, len, CC_UNSUPPORTED, "%s: extents exceed cuDNN's int", call->op);
    idims[0] = wdims[0] = bdims[0] = 1;
    idims[1] = (int)g->ci, wdims[1] = (int)g->co;
    fdims[0] = (int)g->co, fdims[1] = (int)(g->ci / g->groups);
    bdims[1] = (int)(g->transposed ? g->ci : g->co); /* the op's output channels */
    for (int a = 0; a < ns; a++) {
        int sa = a - lead; /* the op's spatial axis, -1 for the unit leading axis */
        int64_t vi = sa < 0 ? 1 : g->img[sa], vw = sa < 0 ? 1 : g->win[sa];
        int64_t vk = sa < 0 ? 1 : g->k[sa], vp = sa < 0 ? 0 : g->p[sa];
        int64_t vs = sa < 0 ? 1 : g->s[sa], vd = sa < 0 ? 1 : g->d[sa];
        if (vd < 1)
            return ccu_say(msg, len, CC_UNSUPPORTED, "%s: cuDNN needs dilation >= 1 (dilation 0 "
                           "on axis %d)", call->op, sa);
        if (vs < 1)
            return ccu_say(msg, len, CC_UNSUPPORTED, "%s: cuDNN needs stride >= 1", call->op);
        if (!fits_int(vi) || !fits_int(vw) || !fits_int(vk) || !fits_int(vp) || !fits_int(vs) ||
            !fits_int(vd))
            return ccu_say(msg, len, CC_UNSUPPORTED, "%s: extents exceed cuDNN's int", call->op);
        idims[a + 2] = (int)vi, wdims[a + 2] = (int)vw, fdims[a + 2] = (int)vk;
        bdims[a + 2] = 1;
        pad[a] = (int)vp, str[a] = (int)vs, dil[a] = (int)vd;
    }
    cc_status st = dnn_check(cudnnCreateTensorDescriptor(&D->img), "cudnnCreateTensorDescriptor",
                             msg, len);
    if (st == CC_OK)
        st = dnn_check(cudnnCreateTensorDescriptor(&D->win), "cudnnCreateTensorDescriptor", msg,
                       len);
    if (st == CC_OK)
        st = dnn_check(cudnnCreateTensorDescriptor(&D->bias), "cudnnCreateTensorDescriptor", msg,
                       len);
    if (st == CC_OK)
        st = dnn_check(cudnnCreateFilterDescriptor(&D->w), "cudnnCreateFilterDescriptor", msg,
                       len);
    if (st == CC_OK)
        st = dnn_check(cudnnCreateConvolutionDescriptor(&D->conv),
                       "cudnnCreateConvolutionDescriptor", msg, len);
    if (st == CC_OK)
        st = set_tensor(D->img, c->dt, nd, idims, msg, len);
    if (st == CC_OK)
        st = set_tensor(D->win, c->dt, nd, wdims, msg, len);
    if (st == CC_OK)
        st = set_tensor(D->bias, c->dt, nd, bdims, msg, len);
    if (st == CC_OK)
        st = dnn_check(cudnnSetFilterNdDescriptor(D->w, c->dt, CUDNN_TENSOR_NCHW, nd, fdims),
                       "cudnnSetFilterNdDescriptor", msg, len);
    if (st == CC_OK)
        st = dnn_check(cudnnSetConvolutionNdDescriptor(D->conv, ns, pad, str, dil,
                                                       CUDNN_CROSS_CORRELATION, c->dt),
                       "cudnnSetConvolutionNdDescriptor", msg, len);
    if (st == CC_OK)
        st = dnn_check(cudnnSetConvolutionGroupCount(D->conv, (int)g->groups),
                       "cudnnSetConvolutionGroupCount", msg, len);
    if (st == CC_OK)
        st = dnn_check(cudnnSetConvolutionMathType(D->conv, CUDNN_FMA_MATH),
                       "cudnnSetConvolutionMathType(CUDNN_FMA_MATH)", msg, len);
    if (st == CC_OK) { /* cuDNN's own idea of the window side must be ours */
        int od[5] = {0};
        st = dnn_check(cudnnGetConvolutionNdForwardOutputDim(D->conv, D->img, D->w, nd, od),
                       "cudnnGetConvolutionNdForwardOutputDim", msg, len);
        for (int i = 0; st == CC_OK && i < nd; i++)
            if (od[i] != wdims[i])
                st = ccu_say(msg, len, CC_FAILED, "%s: cuDNN derives window extent %d on axis "
                             "%d, the reference %d", call->op, od[i], i, wdims[i]);
    }
    return st;
}

/* Run one of the pinned algorithms: the first whose workspace query and call succeed. */
typedef enum { RUN_FWD, RUN_BWD_DATA, RUN_BWD_FILTER } dc_run;

static cc_status dc_exec(dnn_call *c, dc_desc *D, dc_run what, const void *a_dev,
                         const void *b_dev, void *out_dev, double beta, char *msg, size_t len)
{
    static const cudnnConvolutionFwdAlgo_t fwd[] = {
        CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
        CUDNN_CONVOLUTION_FWD_ALGO_GEMM};
    static const cudnnConvolutionBwdDataAlgo_t bwd_data[] = {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
                                                              CUDNN_CONVOLUTION_BWD_DATA_ALGO_0};
    static const cudnnConvolutionBwdFilterAlgo_t bwd_filter[] = {
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3};
    int n = what == RUN_FWD ? 3 : what == RUN_BWD_DATA ? 2 : 3;
    scalar one = sc(c, 1.0), bt = sc(c, beta);
    cc_status st = CC_UNSUPPORTED;
    char why[256] = "";
    for (int i = 0; i < n; i++) {
        size_t ws = 0;
        cudnnStatus_t s;
        if (what == RUN_FWD)
            s = cudnnGetConvolutionForwardWorkspaceSize(c->h, D->img, D->w, D->conv, D->win,
                                                        fwd[i], &ws);
        else if (what == RUN_BWD_DATA)
            s = cudnnGetConvolutionBackwardDataWorkspaceSize(c->h, D->w, D->win, D->conv, D->img,
                                                             bwd_data[i], &ws);
        else
            s = cudnnGetConvolutionBackwardFilterWorkspaceSize(c->h, D->img, D->win, D->conv,
                                                               D->w, bwd_filter[i], &ws);
        if (s == CUDNN_STATUS_NOT_SUPPORTED) {
            dnn_check(s, "workspace query", why, sizeof why);
            continue;
        }
        if ((st = dnn_check(s, "cuDNN workspace query", msg, len)) != CC_OK)
            return st;
        void *wsp = NULL;
        if ((st = ccu_scratch(&c->bufs, ws, &wsp, msg, len)) != CC_OK)
            return st;
        /* a: image-side (fwd, bwd filter) or window-side (bwd data) input; b: filter (fwd, bwd
         * data) or window-side dy (bwd filter) */
        if (what == RUN_FWD)
            s = cudnnConvolutionForward(c->h, &one, D->img, a_dev, D->w, b_dev, D->conv, fwd[i],
                                        wsp, ws, &bt, D->win, out_dev);
        else if (what == RUN_BWD_DATA)
            s = cudnnConvolutionBackwardData(c->h, &one, D->w, b_dev, D->win, a_dev, D->conv,
                                             bwd_data[i], wsp, ws, &bt, D->img, out_dev);
        else
            s = cudnnConvolutionBackwardFilter(c->h, &one, D->img, a_dev, D->win, b_dev, D->conv,
                                               bwd_filter[i], wsp, ws, &bt, D->w, out_dev);
        if (s == CUDNN_STATUS_NOT_SUPPORTED) {
            dnn_check(s, "convolution", why, sizeof why);
            st = CC_UNSUPPORTED;
            continue;
        }
        st = dnn_check(s, what == RUN_FWD        ? "cudnnConvolutionForward"
                          : what == RUN_BWD_DATA ? "cudnnConvolutionBackwardData"
                                                 : "cudnnConvolutionBackwardFilter",
                       msg, len);
        if (st == CC_OK)
            st = ccu_check(cudaGetLastError(), "the cuDNN convolution launch", msg, len);
        return st;
    }
    return ccu_say(msg, len, CC_UNSUPPORTED, "no pinned GEMM-class cuDNN algorithm supports this "
                   "convolution (%s)", why);
}

/* Host buffer [cout, n] holding b[oc] in every row. */
static void *bias_rows(const cc_view *b, int64_t cout, int64_t n, size_t es)
{
    char *y = malloc((size_t)(cout * n > 0 ? cout * n : 1) * es);
    if (!y)
        return NULL;
    for (int64_t oc = 0; oc < cout; oc++)
        for (int64_t o = 0; o < n; o++)
            memcpy(y + (size_t)(oc * n + o) * es,
                   (const char *)b->data + (size_t)(oc * b->strides[0]) * es, es);
    return y;
}

static cc_status conv_forward(dnn_call *c, const cc_call *call, int transposed, cc_view *out,
                              char *msg, size_t len)
{
    dc_geom g;
    cc_status st = dc_geometry(call, transposed, &g, msg, len);
    if (st != CC_OK)
        return st;
    int64_t nout = transposed ? g.nimg : g.nwin; /* spatial count of the op's output */
    if (!out || !cc_view_is_dense(out) || cc_view_numel(out) != g.cout * nout)
        return ccu_say(msg, len, CC_FAILED, "%s: the output buffer does not match", call->op);
    if (g.cout * nout == 0)
        return CC_OK;
    size_t es = cc_dtype_size(c->t);
    void *yb = bias_rows(&call->in[2], g.cout, nout, es);
    if (!yb)
        return ccu_say(msg, len, CC_FAILED, "out of memory");
    if (!dc_has_terms(&g)) { /* the bias alone */
        memcpy(out->data, yb, (size_t)(g.cout * nout) * es);
        free(yb);
        return CC_OK;
    }
    dc_desc D;
    void *x = NULL, *w = NULL, *y = NULL;
    st = dc_describe(c, &g, call, &D, msg, len);
    if (st == CC_OK)
        st = upload_view(c, &call->in[0], &x, msg, len);
    if (st == CC_OK)
        st = upload_view(c, &call->in[1], &w, msg, len);
    if (st == CC_OK)
        st = ccu_output(&c->bufs, out->data, (size_t)(g.cout * nout) * es, &y, msg, len);
    if (st == CC_OK) /* y = b, then y = conv + 1 * y */
        st = ccu_check(cudaMemcpy(y, yb, (size_t)(g.cout * nout) * es, cudaMemcpyHostToDevice),
                       "cudaMemcpy of the bias", msg, len);
    if (st == CC_OK)
        st = transposed ? dc_exec(c, &D, RUN_BWD_DATA, x, w, y, 1.0, msg, len)
                        : dc_exec(c, &D, RUN_FWD, x, w, y, 1.0, msg, len);
    dc_desc_free(&D);
    free(yb);
    return st;
}

static cc_status conv_vjp(dnn_call *c, const cc_call *call, int transposed, const cc_view *gv,
                          cc_view *grads, char *msg, size_t len)
{
    dc_geom g;
    cc_status st = dc_geometry(call, transposed, &g, msg, len);
    if (st != CC_OK)
        return st;
    int64_t nout = transposed ? g.nimg : g.nwin;
    size_t es = cc_dtype_size(c->t);
    if (!gv || !cc_view_is_dense(gv) || gv->dtype != c->t || cc_view_numel(gv) != g.cout * nout)
        return ccu_say(msg, len, CC_FAILED, "%s: the cotangent is not dense [outC, out...]",
                       call->op);
    int64_t cnt[3] = {cc_view_numel(&call->in[0]), cc_view_numel(&call->in[1]), g.cout};
    void *d[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        if (!grads[i].data)
            continue;
        if (!cc_view_is_dense(&grads[i]) || cc_view_numel(&grads[i]) != cnt[i])
            return ccu_say(msg, len, CC_FAILED, "%s: gradient buffer %d does not match",
                           call->op, i);
        memset(grads[i].data, 0, (size_t)cnt[i] * es);
        if ((st = ccu_output(&c->bufs, grads[i].data, (size_t)cnt[i] * es, &d[i], msg, len)))
            return st;
    }
    if (g.cout * nout == 0)
        return CC_OK; /* every gradient is an empty sum */
    dc_desc D;
    memset(&D, 0, sizeof D);
    void *G = NULL, *x = NULL, *w = NULL;
    int terms = dc_has_terms(&g);
    /* the bias gradient only needs g's descriptor: [1, cout, out...] */
    if (terms || d[2]) {
        dc_geom gg = g;
        if (!terms) { /* describe g alone: a 1x1 "convolution" over the output extents */
            for (int a = 0; a < g.sr; a++) {
                int64_t e = transposed ? g.img[a] : g.win[a];
                gg.img[a] = gg.win[a] = e;
                gg.k[a] = gg.s[a] = gg.d[a] = 1;
                gg.p[a] = 0;
            }
            gg.ci = gg.co = g.cout;
            gg.groups = 1;
        }
        st = dc_describe(c, &gg, call, &D, msg, len);
    }
    if (st == CC_OK)
        st = ccu_upload(&c->bufs, gv->data, (size_t)(g.cout * nout) * es, &G, msg, len);
    if (st == CC_OK && d[2]) {
        scalar one = sc(c, 1.0), zero = sc(c, 0.0);
        st = dnn_check(cudnnConvolutionBackwardBias(c->h, &one, transposed && terms ? D.img : D.win,
                                                    G, &zero, D.bias, d[2]),
                       "cudnnConvolutionBackwardBias", msg, len);
    }
    if (st == CC_OK && terms && (d[0] || d[1])) {
        st = upload_view(c, &call->in[0], &x, msg, len);
        if (st == CC_OK)
            st = upload_view(c, &call->in[1], &w, msg, len);
        if (!transposed) {
            if (st == CC_OK && d[0]) /* dx (image) = BackwardData(W, g (window)) */
                st = dc_exec(c, &D, RUN_BWD_DATA, G, w, d[0], 0.0, msg, len);
            if (st == CC_OK && d[1]) /* dW = BackwardFilter(x (image), g (window)) */
                st = dc_exec(c, &D, RUN_BWD_FILTER, x, G, d[1], 0.0, msg, len);
        } else {
            if (st == CC_OK && d[0]) /* dx (window) = Forward(g (image), W) */
                st = dc_exec(c, &D, RUN_FWD, G, w, d[0], 0.0, msg, len);
            if (st == CC_OK && d[1]) /* dW = BackwardFilter(g (image), x (window)) */
                st = dc_exec(c, &D, RUN_BWD_FILTER, G, x, d[1], 0.0, msg, len);
        }
    }
    dc_desc_free(&D);
    return st;
}

/* ---- softmax / logSoftmax ------------------------------------------------------------------ */

static cc_status sm_desc(const dnn_call *c, const cc_call *call, cudnnTensorDescriptor_t *t,
                         int64_t *count, char *msg, size_t len)
{
    const cc_view *x = &call->in[0];
    int r = x->rank, axis = call->params ? call->params->axis : -1;
    if (r > 0) {
        axis = axis < 0 ? axis + r : axis;
        if (axis < 0 || axis >= r)
            return ccu_say(msg, len, CC_FAILED, "%s: axis out of range", call->op);
    }
    int64_t outer = 1, mid = 1, inner = 1;
    for (int i = 0; i < r; i++)
        *(i < axis ? &outer : i == axis ? &mid : &inner) *= x->shape[i];
    *count = outer * mid * inner;
    *t = NULL;
    if (*count == 0)
        return CC_OK;
    if (!fits_int(outer) || !fits_int(mid) || !fits_int(inner))
        return ccu_say(msg, len, CC_UNSUPPORTED, "%s: extents exceed cuDNN's int", call->op);
    cc_status st = dnn_check(cudnnCreateTensorDescriptor(t), "cudnnCreateTensorDescriptor", msg,
                             len);
    if (st == CC_OK)
        st = dnn_check(cudnnSetTensor4dDescriptor(*t, CUDNN_TENSOR_NCHW, c->dt, (int)outer,
                                                  (int)mid, (int)inner, 1),
                       "cudnnSetTensor4dDescriptor", msg, len);
    return st;
}

static int is_log(const char *op)
{
    return !strcmp(op, "logSoftmax") || !strcmp(op, "log_softmax");
}

static cc_status softmax_run(dnn_call *c, const cc_call *call, cc_view *out, const cc_view *gv,
                             cc_view *grad, char *msg, size_t len)
{
    if (call->n_in != 1)
        return ccu_say(msg, len, CC_FAILED, "%s takes one input", call->op);
    cudnnTensorDescriptor_t t = NULL;
    int64_t n = 0;
    cc_status st = sm_desc(c, call, &t, &n, msg, len);
    size_t es = cc_dtype_size(c->t);
    cc_view *dst = out ? out : grad;
    if (st == CC_OK && (!dst || !cc_view_is_dense(dst) || cc_view_numel(dst) != n))
        st = ccu_say(msg, len, CC_FAILED, "%s: the output buffer does not match", call->op);
    if (st == CC_OK && gv && (!cc_view_is_dense(gv) || cc_view_numel(gv) != n))
        st = ccu_say(msg, len, CC_FAILED, "%s: the cotangent does not match", call->op);
    if (st != CC_OK || n == 0) {
        if (t)
            cudnnDestroyTensorDescriptor(t);
        return st;
    }
    cudnnSoftmaxAlgorithm_t algo = is_log(call->op) ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE;
    scalar one = sc(c, 1.0), zero = sc(c, 0.0);
    void *x = NULL, *y = NULL, *G = NULL, *dx = NULL;
    st = upload_view(c, &call->in[0], &x, msg, len);
    if (st == CC_OK)
        st = out ? ccu_output(&c->bufs, out->data, (size_t)n * es, &y, msg, len)
                 : ccu_scratch(&c->bufs, (size_t)n * es, &y, msg, len);
    if (st == CC_OK)
        st = dnn_check(cudnnSoftmaxForward(c->h, algo, CUDNN_SOFTMAX_MODE_CHANNEL, &one, t, x,
                                           &zero, t, y),
                       "cudnnSoftmaxForward", msg, len);
    if (st == CC_OK && gv) {
        st = ccu_upload(&c->bufs, gv->data, (size_t)n * es, &G, msg, len);
        if (st == CC_OK)
            st = ccu_output(&c->bufs, grad->data, (size_t)n * es, &dx, msg, len);
        if (st == CC_OK)
            st = dnn_check(cudnnSoftmaxBackward(c->h, algo, CUDNN_SOFTMAX_MODE_CHANNEL, &one, t,
                                                y, t, G, &zero, t, dx),
                           "cudnnSoftmaxBackward", msg, len);
    }
    if (st == CC_OK)
        st = ccu_check(cudaGetLastError(), "the cuDNN softmax launch", msg, len);
    cudnnDestroyTensorDescriptor(t);
    return st;
}

/* ---- the cc_provider functions --------------------------------------------------------------- */

typedef enum { DN_NONE, DN_CONV, DN_CONVT, DN_SOFTMAX } dn_kind;

static dn_kind kind_of(const char *op)
{
    if (!op)
        return DN_NONE;
    if (!strcmp(op, "conv"))
        return DN_CONV;
    if (!strcmp(op, "convTranspose") || !strcmp(op, "conv_transpose"))
        return DN_CONVT;
    if (!strcmp(op, "softmax") || is_log(op))
        return DN_SOFTMAX;
    return DN_NONE;
}

static cc_status dn_check(const cc_call *call, char *msg, size_t len)
{
    cc_status st = ccu_check_call("cudnn", call, 0, msg, len);
    if (st == CC_OK && kind_of(call->op) == DN_NONE)
        st = ccu_say(msg, len, CC_UNSUPPORTED, "the cudnn provider has no %s", call->op);
    return st;
}

static cc_status dn_init(void *ctx, cc_device device, char *msg, size_t len)
{
    (void)ctx;
    return ccu_init("cudnn", device, msg, len);
}

static cc_status dn_forward(void *ctx, const cc_call *call, cc_view *out, char *msg, size_t len)
{
    (void)ctx;
    cc_status st = dn_check(call, msg, len);
    if (st != CC_OK)
        return st;
    dnn_call c;
    if ((st = open_call(call, &c, msg, len)) == CC_OK) {
        dn_kind k = kind_of(call->op);
        st = k == DN_SOFTMAX ? softmax_run(&c, call, out, NULL, NULL, msg, len)
                             : conv_forward(&c, call, k == DN_CONVT, out, msg, len);
    }
    return close_call(&c, st, msg, len);
}

static cc_status dn_vjp(void *ctx, const cc_call *call, const cc_view *g, cc_view *grads,
                        char *msg, size_t len)
{
    (void)ctx;
    cc_status st = dn_check(call, msg, len);
    if (st != CC_OK)
        return st;
    if (!g || !grads)
        return ccu_say(msg, len, CC_FAILED, "%s: NULL cotangent or gradients", call->op);
    dnn_call c;
    if ((st = open_call(call, &c, msg, len)) == CC_OK) {
        dn_kind k = kind_of(call->op);
        if (k == DN_SOFTMAX)
            st = grads[0].data ? softmax_run(&c, call, NULL, g, &grads[0], msg, len) : CC_OK;
        else
            st = conv_vjp(&c, call, k == DN_CONVT, g, grads, msg, len);
    }
    return close_call(&c, st, msg, len);
}

static void dn_describe(void *ctx, char *buf, size_t len)
{
    (void)ctx;
    if (!buf || !len)
        return;
    size_t v = cudnnGetVersion();
    char base[448];
    ccu_describe_base(base, sizeof base);
    snprintf(buf, len, "cudnn %zu.%zu.%zu; %s; tf32 off (CUDNN_FMA_MATH); algorithms GEMM-class "
             "pinned (deterministic ALGO_1 first); provider external; vjp cuDNN backward",
             v / 10000, (v % 10000) / 100, v % 100, base);
}

static const char *dn_vjp_mode(void *ctx, const char *op)
{
    (void)ctx;
    return kind_of(op) != DN_NONE ? "backendVJP" : NULL;
}

const cc_provider *ccu_cudnn_provider(void)
{
    static const cc_provider p = {CC_PROVIDER_ABI_VERSION, "cudnn", NULL, dn_init, dn_forward,
                                  dn_vjp, dn_describe, dn_vjp_mode, NULL};
    return &p;
}
