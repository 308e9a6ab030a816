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
 * VJP recomputes y on the device and calls cudnnSoftmaxBackward.
 *
 * maxPool / avgPool (cudnnPoolingForward/Backward) and batchNorm (ForwardTraining /
 * ForwardInference / Backward, the eval VJP composed of cuDNN kernels): the mapping of the
 * contract onto the descriptors, and the inputs cuDNN cannot compute under it (tied maxima for
 * the max-pool VJP, NaN windows, ...), are the host-side plans of cudnn_plan.h. cuDNN 9 keeps
 * these legacy entry points (deprecated, still exported); they are used as they are. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cudnn.h>

#include "core/dtype.h"
#include "providers/cuda/cuda_common.h"
#include "providers/cuda/cudnn_plan.h"
#include "providers/openblas/gemm_lowering.h"

static cc_status dnn_check(cudnnStatus_t s, const char *what, char *msg, size_t len)
{
    if (s == CUDNN_STATUS_SUCCESS)
        return CC_OK;
    cc_status st = s == CUDNN_STATUS_NOT_SUPPORTED ? CC_UNSUPPORTED : CC_FAILED;
    return cc_say(msg, len, st, "%s: cuDNN: %s", what, cudnnGetErrorString(s));
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
        return cc_say(msg, len, CC_FAILED, "out of memory");
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
        return cc_say(msg, len, CC_FAILED, "%s takes x, weight, bias", call->op);
    const cc_view *x = &call->in[0], *w = &call->in[1], *b = &call->in[2];
    int sr = g->sr = p->spatial;
    if (sr < 1 || sr > 3 || x->rank != sr + 1 || w->rank != sr + 2 || b->rank != 1 ||
        p->groups < 1)
        return cc_say(msg, len, CC_FAILED, "%s: bad ranks or groups", call->op);
    g->nd = sr == 3 ? 5 : 4;
    g->groups = p->groups;
    g->cin = x->shape[0];
    int64_t cin_g = g->cin / g->groups, cout_g;
    if (g->cin % g->groups)
        return cc_say(msg, len, CC_FAILED, "%s: channels not divisible by groups", call->op);
    if (!transposed) {
        g->cout = w->shape[0];
        if (g->cout % g->groups || w->shape[1] != cin_g)
            return cc_say(msg, len, CC_FAILED, "conv: weight does not match x and groups");
        cout_g = g->cout / g->groups;
    } else {
        if (w->shape[0] != g->cin)
            return cc_say(msg, len, CC_FAILED, "convTranspose: weight does not match x");
        cout_g = w->shape[1];
        g->cout = cout_g * g->groups;
    }
    (void)cout_g;
    if (b->shape[0] != g->cout)
        return cc_say(msg, len, CC_FAILED, "%s: bias is not [outC]", call->op);
    g->nimg = g->nwin = g->nk = 1;
    for (int a = 0; a < sr; a++) {
        int64_t in = x->shape[a + 1], k = w->shape[a + 2];
        int64_t s = p->stride[a], pd = p->pad[a], d = p->dil[a], o;
        if (s < 0 || pd < 0 || d < 0 || (!transposed && (s < 1 || k < 1)))
            return cc_say(msg, len, CC_FAILED, "%s: bad window geometry", call->op);
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
    if (!cc_fits_int(g->ci) || !cc_fits_int(g->co) || !cc_fits_int(g->groups))
        return cc_say(msg, len, CC_UNSUPPORTED, "%s: extents exceed cuDNN's int", call->op);
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
            return cc_say(msg, len, CC_UNSUPPORTED, "%s: cuDNN needs dilation >= 1 (dilation 0 "
                           "on axis %d)", call->op, sa);
        if (vs < 1)
            return cc_say(msg, len, CC_UNSUPPORTED, "%s: cuDNN needs stride >= 1", call->op);
        if (!cc_fits_int(vi) || !cc_fits_int(vw) || !cc_fits_int(vk) || !cc_fits_int(vp) || !cc_fits_int(vs) ||
            !cc_fits_int(vd))
            return cc_say(msg, len, CC_UNSUPPORTED, "%s: extents exceed cuDNN's int", call->op);
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
                st = cc_say(msg, len, CC_FAILED, "%s: cuDNN derives window extent %d on axis "
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
    return cc_say(msg, len, CC_UNSUPPORTED, "no pinned GEMM-class cuDNN algorithm supports this "
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
        return cc_say(msg, len, CC_FAILED, "%s: the output buffer does not match", call->op);
    if (g.cout * nout == 0)
        return CC_OK;
    size_t es = cc_dtype_size(c->t);
    void *yb = bias_rows(&call->in[2], g.cout, nout, es);
    if (!yb)
        return cc_say(msg, len, CC_FAILED, "out of memory");
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
        return cc_say(msg, len, CC_FAILED, "%s: the cotangent is not dense [outC, out...]",
                       call->op);
    int64_t cnt[3] = {cc_view_numel(&call->in[0]), cc_view_numel(&call->in[1]), g.cout};
    void *d[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        if (!grads[i].data)
            continue;
        if (!cc_view_is_dense(&grads[i]) || cc_view_numel(&grads[i]) != cnt[i])
            return cc_say(msg, len, CC_FAILED, "%s: gradient buffer %d does not match",
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
            return cc_say(msg, len, CC_FAILED, "%s: axis out of range", call->op);
    }
    int64_t outer = 1, mid = 1, inner = 1;
    for (int i = 0; i < r; i++)
        *(i < axis ? &outer : i == axis ? &mid : &inner) *= x->shape[i];
    *count = outer * mid * inner;
    *t = NULL;
    if (*count == 0)
        return CC_OK;
    if (!cc_fits_int(outer) || !cc_fits_int(mid) || !cc_fits_int(inner))
        return cc_say(msg, len, CC_UNSUPPORTED, "%s: extents exceed cuDNN's int", call->op);
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
        return cc_say(msg, len, CC_FAILED, "%s takes one input", call->op);
    cudnnTensorDescriptor_t t = NULL;
    int64_t n = 0;
    cc_status st = sm_desc(c, call, &t, &n, msg, len);
    size_t es = cc_dtype_size(c->t);
    cc_view *dst = out ? out : grad;
    if (st == CC_OK && (!dst || !cc_view_is_dense(dst) || cc_view_numel(dst) != n))
        st = cc_say(msg, len, CC_FAILED, "%s: the output buffer does not match", call->op);
    if (st == CC_OK && gv && (!cc_view_is_dense(gv) || cc_view_numel(gv) != n))
        st = cc_say(msg, len, CC_FAILED, "%s: the cotangent does not match", call->op);
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

/* ---- maxPool / avgPool ------------------------------------------------------------------------ */

/* Dense host copy of input i (caller frees), or NULL with a sentence. */
static void *host_input(const cc_call *call, int i, char *msg, size_t len)
{
    void *h = ccu_dense_host(&call->in[i]);
    if (!h)
        cc_say(msg, len, CC_FAILED, "out of memory");
    return h;
}

/* A pooling descriptor of the plan in `mode`, checked against the contract's output extents. */
static cc_status pool_desc(const ccu_pool_plan *pl, cudnnPoolingMode_t mode,
                           cudnnTensorDescriptor_t xd, cudnnPoolingDescriptor_t *pd, char *msg,
                           size_t len)
{
    cc_status st = dnn_check(cudnnCreatePoolingDescriptor(pd), "cudnnCreatePoolingDescriptor",
                             msg, len);
    if (st != CC_OK) {
        *pd = NULL;
        return st;
    }
    st = dnn_check(cudnnSetPoolingNdDescriptor(*pd, mode, CUDNN_NOT_PROPAGATE_NAN, pl->nd - 2,
                                               pl->window, pl->pad, pl->stride),
                   "cudnnSetPoolingNdDescriptor", msg, len);
    if (st == CC_OK) { /* cuDNN's own idea of the output must be the contract's */
        int od[5] = {0};
        st = dnn_check(cudnnGetPoolingNdForwardOutputDim(*pd, xd, pl->nd, od),
                       "cudnnGetPoolingNdForwardOutputDim", msg, len);
        for (int i = 0; st == CC_OK && i < pl->nd; i++)
            if (od[i] != pl->y_dims[i])
                st = cc_say(msg, len, CC_FAILED, "pooling: cuDNN derives output extent %d on "
                             "axis %d, the contract %d", od[i], i, pl->y_dims[i]);
    }
    return st;
}

/* Forward into out (or, for the VJP, into a scratch y), then with gv the backward into grad.
 * maxPool runs CUDNN_POOLING_MAX_DETERMINISTIC, or CUDNN_POOLING_MAX where cuDNN does not
 * support that (on tie-free windows both select and route the same cell). */
static cc_status pool_run(dnn_call *c, const cc_call *call, cc_view *out, const cc_view *gv,
                          cc_view *grad, char *msg, size_t len)
{
    ccu_pool_plan pl;
    cc_status st = ccu_pool_plan_make(call, &pl, msg, len);
    if (st != CC_OK)
        return st;
    size_t es = cc_dtype_size(c->t);
    int64_t ny = pl.C * pl.nout, nx = pl.C * pl.nin;
    if (out && (!cc_view_is_dense(out) || cc_view_numel(out) != ny))
        return cc_say(msg, len, CC_FAILED, "%s: the output buffer does not match", call->op);
    if (gv && (!cc_view_is_dense(gv) || gv->dtype != c->t || cc_view_numel(gv) != ny ||
               !cc_view_is_dense(grad) || cc_view_numel(grad) != nx))
        return cc_say(msg, len, CC_FAILED, "%s: the cotangent or gradient does not match",
                       call->op);
    if (gv)
        memset(grad->data, 0, (size_t)nx * es); /* no window: no gradient */
    if (pl.empty)
        return CC_OK;
    void *xh = host_input(call, 0, msg, len);
    if (!xh)
        return CC_FAILED;
    if (pl.is_max)
        st = ccu_maxpool_expressible(&pl, c->t, xh, gv != NULL, msg, len);
    cudnnTensorDescriptor_t xd = NULL, yd = NULL;
    cudnnPoolingDescriptor_t pd = NULL;
    void *x = NULL, *y = NULL, *G = NULL, *dx = NULL;
    if (st == CC_OK)
        st = dnn_check(cudnnCreateTensorDescriptor(&xd), "cudnnCreateTensorDescriptor", msg, len);
    if (st == CC_OK)
        st = dnn_check(cudnnCreateTensorDescriptor(&yd), "cudnnCreateTensorDescriptor", msg, len);
    if (st == CC_OK)
        st = set_tensor(xd, c->dt, pl.nd, pl.x_dims, msg, len);
    if (st == CC_OK)
        st = set_tensor(yd, c->dt, pl.nd, pl.y_dims, msg, len);
    if (st == CC_OK)
        st = ccu_upload(&c->bufs, xh, (size_t)nx * es, &x, msg, len);
    if (st == CC_OK)
        st = out ? ccu_output(&c->bufs, out->data, (size_t)ny * es, &y, msg, len)
                 : ccu_scratch(&c->bufs, (size_t)ny * es, &y, msg, len);
    if (st == CC_OK && gv)
        st = ccu_upload(&c->bufs, gv->data, (size_t)ny * es, &G, msg, len);
    if (st == CC_OK && gv)
        st = ccu_output(&c->bufs, grad->data, (size_t)nx * es, &dx, msg, len);
    const cudnnPoolingMode_t modes[2] = {
        pl.is_max ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
        CUDNN_POOLING_MAX};
    scalar one = sc(c, 1.0), zero = sc(c, 0.0);
    for (int m = 0; st == CC_OK && m < (pl.is_max ? 2 : 1); m++) {
        st = pool_desc(&pl, modes[m], xd, &pd, msg, len);
        if (st == CC_OK)
            st = dnn_check(cudnnPoolingForward(c->h, pd, &one, xd, x, &zero, yd, y),
                           "cudnnPoolingForward", msg, len);
        if (st == CC_OK && gv)
            st = dnn_check(cudnnPoolingBackward(c->h, pd, &one, yd, y, yd, G, xd, x, &zero, xd,
                                                dx),
                           "cudnnPoolingBackward", msg, len);
        if (pd)
            cudnnDestroyPoolingDescriptor(pd);
        pd = NULL;
        if (st == CC_UNSUPPORTED && m == 0 && pl.is_max)
            st = CC_OK; /* try CUDNN_POOLING_MAX */
        else
            break;
    }
    if (st == CC_OK)
        st = ccu_check(cudaGetLastError(), "the cuDNN pooling launch", msg, len);
    if (xd)
        cudnnDestroyTensorDescriptor(xd);
    if (yd)
        cudnnDestroyTensorDescriptor(yd);
    free(xh);
    return st;
}

/* ---- batchNorm --------------------------------------------------------------------------------- */

typedef struct {
    cudnnTensorDescriptor_t xd, bnd; /* [1, C, N, 1] and the derived [1, C, 1, 1] */
} bn_desc;

static void bn_desc_free(bn_desc *D)
{
    if (D->xd)
        cudnnDestroyTensorDescriptor(D->xd);
    if (D->bnd)
        cudnnDestroyTensorDescriptor(D->bnd);
    memset(D, 0, sizeof *D);
}

static cc_status bn_describe(const dnn_call *c, const ccu_bn_plan *pl, bn_desc *D, char *msg,
                             size_t len)
{
    memset(D, 0, sizeof *D);
    if (!(pl->eps >= CUDNN_BN_MIN_EPSILON))
        return cc_say(msg, len, CC_UNSUPPORTED, "batchNorm: eps %g is below cuDNN's "
                       "CUDNN_BN_MIN_EPSILON %g", pl->eps, (double)CUDNN_BN_MIN_EPSILON);
    cc_status st = dnn_check(cudnnCreateTensorDescriptor(&D->xd), "cudnnCreateTensorDescriptor",
                             msg, len);
    if (st == CC_OK)
        st = dnn_check(cudnnCreateTensorDescriptor(&D->bnd), "cudnnCreateTensorDescriptor", msg,
                       len);
    if (st == CC_OK)
        st = set_tensor(D->xd, c->dt, 4, pl->x_dims, msg, len);
    if (st == CC_OK)
        st = dnn_check(cudnnDeriveBNTensorDescriptor(D->bnd, D->xd, CUDNN_BATCHNORM_SPATIAL),
                       "cudnnDeriveBNTensorDescriptor", msg, len);
    return st;
}

/* Device copy of input i (dense); for the running variance (input 4), clamped at 0 first. */
static cc_status bn_upload(dnn_call *c, const cc_call *call, int i, void **dev, char *msg,
                           size_t len)
{
    void *h = host_input(call, i, msg, len);
    if (!h)
        return CC_FAILED;
    if (i == 4)
        ccu_bn_clamp_variance(c->t, h, cc_view_numel(&call->in[i]));
    cc_status st = ccu_upload(&c->bufs, h, (size_t)cc_view_numel(&call->in[i]) *
                                               cc_dtype_size(c->t), dev, msg, len);
    free(h);
    return st;
}

static cc_status bn_forward(dnn_call *c, const cc_call *call, cc_view *out, char *msg,
                            size_t len)
{
    ccu_bn_plan pl;
    cc_status st = ccu_bn_plan_make(call, &pl, msg, len);
    if (st != CC_OK)
        return st;
    if (!out || !cc_view_is_dense(out) || cc_view_numel(out) != pl.C * pl.N)
        return cc_say(msg, len, CC_FAILED, "batchNorm: the output buffer does not match");
    if (pl.empty)
        return CC_OK;
    bn_desc D;
    void *x = NULL, *gamma = NULL, *beta = NULL, *mean = NULL, *var = NULL, *y = NULL;
    scalar one = sc(c, 1.0), zero = sc(c, 0.0);
    st = bn_describe(c, &pl, &D, msg, len);
    for (int i = 0; st == CC_OK && i < call->n_in; i++)
        st = bn_upload(c, call, i, i == 0 ? &x : i == 1 ? &gamma : i == 2 ? &beta
                                               : i == 3 ? &mean : &var, msg, len);
    if (st == CC_OK)
        st = ccu_output(&c->bufs, out->data, (size_t)(pl.C * pl.N) * cc_dtype_size(c->t), &y,
                        msg, len);
    if (st == CC_OK && pl.training) /* batch statistics; no running statistics kept */
        st = dnn_check(cudnnBatchNormalizationForwardTraining(
                           c->h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, D.xd, x, D.xd, y, D.bnd,
                           gamma, beta, 0.0, NULL, NULL, pl.eps, NULL, NULL),
                       "cudnnBatchNormalizationForwardTraining", msg, len);
    else if (st == CC_OK)
        st = dnn_check(cudnnBatchNormalizationForwardInference(
                           c->h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, D.xd, x, D.xd, y, D.bnd,
                           gamma, beta, mean, var, pl.eps),
                       "cudnnBatchNormalizationForwardInference", msg, len);
    if (st == CC_OK)
        st = ccu_check(cudaGetLastError(), "the cuDNN batchNorm launch", msg, len);
    bn_desc_free(&D);
    return st;
}

/* Eval VJP from cuDNN kernels (cudnn_plan.h): dx as a ForwardInference of g, dgamma and dbeta
 * as per-channel sums (cudnnConvolutionBackwardBias) of g * xhat and g. */
static cc_status bn_eval_vjp(dnn_call *c, const ccu_bn_plan *pl, const bn_desc *D, void *x,
                             void *G, void *gamma, void *mean, void *var, void *d[3], char *msg,
                             size_t len)
{
    size_t es = cc_dtype_size(c->t), nx = (size_t)(pl->C * pl->N) * es;
    scalar one = sc(c, 1.0), zero = sc(c, 0.0);
    void *zeros = NULL, *ones = NULL, *xhat = NULL, *prod = NULL;
    cc_status st = ccu_scratch(&c->bufs, (size_t)pl->C * es, &zeros, msg, len);
    if (st == CC_OK && d[0]) /* dx = gamma (g - 0) / sqrt(var + eps) + 0 */
        st = dnn_check(cudnnBatchNormalizationForwardInference(
                           c->h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, D->xd, G, D->xd, d[0],
                           D->bnd, gamma, zeros, zeros, var, pl->eps),
                       "cudnnBatchNormalizationForwardInference (dx)", msg, len);
    if (st == CC_OK && d[1]) {
        void *h = malloc((size_t)pl->C * es);
        if (!h)
            return cc_say(msg, len, CC_FAILED, "out of memory");
        for (int64_t i = 0; i < pl->C; i++)
            cc_store(c->t, h, i, 1.0);
        st = ccu_upload(&c->bufs, h, (size_t)pl->C * es, &ones, msg, len);
        free(h);
        if (st == CC_OK)
            st = ccu_scratch(&c->bufs, nx, &xhat, msg, len);
        if (st == CC_OK)
            st = ccu_scratch(&c->bufs, nx, &prod, msg, len);
        if (st == CC_OK) /* xhat = (x - mu_run) / sqrt(var + eps) */
            st = dnn_check(cudnnBatchNormalizationForwardInference(
                               c->h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, D->xd, x, D->xd,
                               xhat, D->bnd, ones, zeros, mean, var, pl->eps),
                           "cudnnBatchNormalizationForwardInference (xhat)", msg, len);
        cudnnOpTensorDescriptor_t od = NULL;
        if (st == CC_OK)
            st = dnn_check(cudnnCreateOpTensorDescriptor(&od), "cudnnCreateOpTensorDescriptor",
                           msg, len);
        if (st == CC_OK)
            st = dnn_check(cudnnSetOpTensorDescriptor(od, CUDNN_OP_TENSOR_MUL, c->dt,
                                                      CUDNN_NOT_PROPAGATE_NAN),
                           "cudnnSetOpTensorDescriptor", msg, len);
        if (st == CC_OK) /* prod = g * xhat */
            st = dnn_check(cudnnOpTensor(c->h, od, &one, D->xd, G, &one, D->xd, xhat, &zero,
                                         D->xd, prod),
                           "cudnnOpTensor (g * xhat)", msg, len);
        if (od)
            cudnnDestroyOpTensorDescriptor(od);
        if (st == CC_OK)
            st = dnn_check(cudnnConvolutionBackwardBias(c->h, &one, D->xd, prod, &zero, D->bnd,
                                                        d[1]),
                           "cudnnConvolutionBackwardBias (dgamma)", msg, len);
    }
    if (st == CC_OK && d[2])
        st = dnn_check(cudnnConvolutionBackwardBias(c->h, &one, D->xd, G, &zero, D->bnd, d[2]),
                       "cudnnConvolutionBackwardBias (dbeta)", msg, len);
    return st;
}

static cc_status bn_vjp(dnn_call *c, const cc_call *call, const cc_view *gv, cc_view *grads,
                        char *msg, size_t len)
{
    ccu_bn_plan pl;
    cc_status st = ccu_bn_plan_make(call, &pl, msg, len);
    if (st != CC_OK)
        return st;
    size_t es = cc_dtype_size(c->t);
    int64_t cnt[3] = {pl.C * pl.N, pl.C, pl.C};
    if (!gv || !cc_view_is_dense(gv) || gv->dtype != c->t || cc_view_numel(gv) != cnt[0])
        return cc_say(msg, len, CC_FAILED, "batchNorm: the cotangent does not match");
    for (int i = 0; i < 3; i++)
        if (grads[i].data && (!cc_view_is_dense(&grads[i]) || cc_view_numel(&grads[i]) != cnt[i]))
            return cc_say(msg, len, CC_FAILED, "batchNorm: gradient buffer %d does not match",
                           i);
    for (int i = 0; i < 3; i++) /* sums over no position are zeros */
        if (grads[i].data)
            memset(grads[i].data, 0, (size_t)cnt[i] * es);
    if (pl.empty || (!grads[0].data && !grads[1].data && !grads[2].data))
        return CC_OK;
    bn_desc D;
    void *x = NULL, *G = NULL, *gamma = NULL, *mean = NULL, *var = NULL, *d[3] = {NULL, NULL, NULL};
    st = bn_describe(c, &pl, &D, msg, len);
    if (st == CC_OK)
        st = bn_upload(c, call, 0, &x, msg, len);
    if (st == CC_OK)
        st = bn_upload(c, call, 1, &gamma, msg, len);
    if (st == CC_OK && !pl.training)
        st = bn_upload(c, call, 3, &mean, msg, len);
    if (st == CC_OK && !pl.training)
        st = bn_upload(c, call, 4, &var, msg, len);
    if (st == CC_OK)
        st = ccu_upload(&c->bufs, gv->data, (size_t)cnt[0] * es, &G, msg, len);
    /* cudnnBatchNormalizationBackward writes all three: unwanted ones go to scratch */
    for (int i = 0; st == CC_OK && i < 3; i++)
        st = grads[i].data ? ccu_output(&c->bufs, grads[i].data, (size_t)cnt[i] * es, &d[i], msg,
                                        len)
             : pl.training ? ccu_scratch(&c->bufs, (size_t)cnt[i] * es, &d[i], msg, len)
                           : CC_OK;
    scalar one = sc(c, 1.0), zero = sc(c, 0.0);
    if (st == CC_OK && pl.training)
        st = dnn_check(cudnnBatchNormalizationBackward(c->h, CUDNN_BATCHNORM_SPATIAL, &one, &zero,
                                                       &one, &zero, D.xd, x, D.xd, G, D.xd, d[0],
                                                       D.bnd, gamma, d[1], d[2], pl.eps, NULL,
                                                       NULL),
                       "cudnnBatchNormalizationBackward", msg, len);
    else if (st == CC_OK)
        st = bn_eval_vjp(c, &pl, &D, x, G, gamma, mean, var, d, msg, len);
    if (st == CC_OK)
        st = ccu_check(cudaGetLastError(), "the cuDNN batchNorm launch", msg, len);
    bn_desc_free(&D);
    return st;
}

/* ---- the cc_provider functions --------------------------------------------------------------- */

typedef enum { DN_NONE, DN_CONV, DN_CONVT, DN_SOFTMAX, DN_POOL, DN_BATCHNORM } dn_kind;

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
    if (!strcmp(op, "maxPool") || !strcmp(op, "max_pool") || !strcmp(op, "avgPool") ||
        !strcmp(op, "avg_pool"))
        return DN_POOL;
    if (!strcmp(op, "batchNorm") || !strcmp(op, "batch_norm"))
        return DN_BATCHNORM;
    return DN_NONE;
}

static cc_status dn_check(const cc_call *call, char *msg, size_t len)
{
    cc_status st = ccu_check_call("cudnn", call, 0, msg, len);
    if (st == CC_OK && kind_of(call->op) == DN_NONE)
        st = cc_say(msg, len, CC_UNSUPPORTED, "the cudnn provider has no %s", call->op);
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
        st = k == DN_SOFTMAX     ? softmax_run(&c, call, out, NULL, NULL, msg, len)
             : k == DN_POOL      ? pool_run(&c, call, out, NULL, NULL, msg, len)
             : k == DN_BATCHNORM ? bn_forward(&c, call, out, msg, len)
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
        return cc_say(msg, len, CC_FAILED, "%s: NULL cotangent or gradients", call->op);
    dnn_call c;
    if ((st = open_call(call, &c, msg, len)) == CC_OK) {
        dn_kind k = kind_of(call->op);
        if (k == DN_SOFTMAX)
            st = grads[0].data ? softmax_run(&c, call, NULL, g, &grads[0], msg, len) : CC_OK;
        else if (k == DN_POOL)
            st = grads[0].data ? pool_run(&c, call, NULL, g, &grads[0], msg, len) : CC_OK;
        else if (k == DN_BATCHNORM)
            st = bn_vjp(&c, call, g, grads, msg, len);
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
             "pinned (deterministic ALGO_1 first); pooling MAX_DETERMINISTIC / "
             "AVERAGE_COUNT_INCLUDE_PADDING; batchNorm SPATIAL (eval VJP composed); provider "
             "external; vjp cuDNN backward",
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
