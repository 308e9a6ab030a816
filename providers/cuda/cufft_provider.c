/* The cuFFT provider "cufft": fftFno's packed real transforms (reference/ref_composite.c).
 *   variant 1 rfft1d   x [batch, n] -> [batch, K, 2], K = n/2 + 1: R2C (D2Z), unnormalized; the
 *                      cufftComplex output is exactly the packed (re, im) layout.
 *   variant 2 irfft1d  z [batch, K, 2], length n -> [batch, n]: C2R (Z2D) of z with the endpoint
 *                      imaginaries (DC, Nyquist) set to 0 (TorchLean ignores them), then / n.
 * VJPs (the real-pairing adjoints, not the inverses):
 *   rfft*(G)_t  = sum_k (Gr cos - iota Gi sin) = C2R(G') with G'_k = G_k / m_k (m_k = 2 inside,
 *                 1 at the endpoints, whose imaginaries are zeroed): C2R sums m_k Re(G'_k e^{i.})
 *   irfft*(g)_k = (m_k / n) R2C(g)_k, endpoint imaginaries 0.
 * The spectra are adjusted on the host (halving, zeroing: exact; one division by n per element).
 * variant 0 (spectralConv) is not implemented here. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cufft.h>

#include "providers/cuda/cuda_common.h"
#include "providers/openblas/gemm_lowering.h"

static const char *cufft_error_name(cufftResult r)
{
    switch (r) {
    case CUFFT_SUCCESS: return "CUFFT_SUCCESS";
    case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED";
    case CUFFT_INVALID_TYPE: return "CUFFT_INVALID_TYPE";
    case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED";
    case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
    case CUFFT_INVALID_DEVICE: return "CUFFT_INVALID_DEVICE";
    case CUFFT_NO_WORKSPACE: return "CUFFT_NO_WORKSPACE";
    case CUFFT_NOT_IMPLEMENTED: return "CUFFT_NOT_IMPLEMENTED";
    case CUFFT_NOT_SUPPORTED: return "CUFFT_NOT_SUPPORTED";
    default: return "an unknown cufftResult";
    }
}

static cc_status cufft_check(cufftResult r, const char *what, char *msg, size_t len)
{
    if (r == CUFFT_SUCCESS)
        return CC_OK;
    cc_status st = r == CUFFT_INVALID_SIZE || r == CUFFT_NOT_SUPPORTED ||
                           r == CUFFT_NOT_IMPLEMENTED
                       ? CC_UNSUPPORTED
                       : CC_FAILED;
    return ccu_say(msg, len, st, "%s: cuFFT: %s (%d)", what, cufft_error_name(r), (int)r);
}

static int endpoint(int64_t k, int64_t n)
{
    return k == 0 || 2 * k == n;
}

/* Element access in the case dtype (f32/f64 only here). */
static double ld_el(cc_dtype t, const void *p, int64_t i)
{
    return t == CC_F64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

static void st_el(cc_dtype t, void *p, int64_t i, double v)
{
    if (t == CC_F64)
        ((double *)p)[i] = v;
    else
        ((float *)p)[i] = (float)v;
}

/* One batched 1-D transform: R2C (real -> K complex per row) or C2R (K complex -> n real). */
static cc_status transform(cc_dtype t, int r2c, int64_t n, int64_t batch, const void *in_host,
                           void *out_host, char *msg, size_t len)
{
    if (n > INT_MAX || batch > INT_MAX)
        return ccu_say(msg, len, CC_UNSUPPORTED, "fftFno: extents exceed cuFFT's int");
    size_t es = cc_dtype_size(t);
    int64_t K = n / 2 + 1;
    size_t real_bytes = (size_t)(batch * n) * es, cplx_bytes = (size_t)(batch * K * 2) * es;
    ccu_bufs bs = {.n = 0};
    void *din = NULL, *dout = NULL;
    cufftHandle plan = 0;
    int have_plan = 0;
    cufftType type = t == CC_F64 ? (r2c ? CUFFT_D2Z : CUFFT_Z2D) : (r2c ? CUFFT_R2C : CUFFT_C2R);
    cc_status st = ccu_upload(&bs, in_host, r2c ? real_bytes : cplx_bytes, &din, msg, len);
    if (st == CC_OK)
        st = ccu_output(&bs, out_host, r2c ? cplx_bytes : real_bytes, &dout, msg, len);
    if (st == CC_OK) {
        st = cufft_check(cufftPlan1d(&plan, (int)n, type, (int)batch), "cufftPlan1d", msg, len);
        have_plan = st == CC_OK;
    }
    if (st == CC_OK) {
        cufftResult r;
        if (t == CC_F64)
            r = r2c ? cufftExecD2Z(plan, din, dout) : cufftExecZ2D(plan, din, dout);
        else
            r = r2c ? cufftExecR2C(plan, din, dout) : cufftExecC2R(plan, din, dout);
        st = cufft_check(r, r2c ? "cufftExec (real to complex)" : "cufftExec (complex to real)",
                         msg, len);
    }
    st = ccu_finish(&bs, st, msg, len); /* synchronizes before the copy back */
    if (have_plan) {
        char spare[256];
        cc_status s2 = cufft_check(cufftDestroy(plan), "cufftDestroy",
                                   st == CC_OK ? msg : spare, st == CC_OK ? len : sizeof spare);
        if (st == CC_OK)
            st = s2;
    }
    return st;
}

typedef struct {
    int64_t batch, n, K;
} fft_geom;

static cc_status fft_geometry(const cc_call *call, fft_geom *g, char *msg, size_t len)
{
    const ref_params *p = call->params;
    if (!p || call->n_in != 1)
        return ccu_say(msg, len, p && p->variant == 0 ? CC_UNSUPPORTED : CC_FAILED,
                       "fftFno: the cufft provider implements variants 1 (rfft1d) and 2 "
                       "(irfft1d), one input each");
    if (p->variant != 1 && p->variant != 2)
        return ccu_say(msg, len, CC_UNSUPPORTED,
                       "fftFno variant %d: the cufft provider implements variants 1 (rfft1d) "
                       "and 2 (irfft1d) only", p->variant);
    const cc_view *x = &call->in[0];
    g->batch = x->rank >= 1 ? x->shape[0] : 0;
    if (p->variant == 1) {
        if (x->rank != 2 || x->shape[1] < 1)
            return ccu_say(msg, len, CC_FAILED, "rfft1d wants x [batch, n], n >= 1");
        g->n = x->shape[1];
    } else {
        g->n = p->length;
        if (g->n < 1 || x->rank != 3 || x->shape[1] != g->n / 2 + 1 || x->shape[2] != 2)
            return ccu_say(msg, len, CC_FAILED, "irfft1d wants z [batch, length/2+1, 2]");
    }
    g->K = g->n / 2 + 1;
    return CC_OK;
}

/* Spectrum s [batch, K, 2] in place: multiply bin k by scale(k) and zero endpoint imaginaries. */
static void adjust_spectrum(cc_dtype t, void *s, const fft_geom *g, int halve_inside,
                            int weight_over_n)
{
    for (int64_t b = 0; b < g->batch; b++)
        for (int64_t k = 0; k < g->K; k++) {
            int64_t i = (b * g->K + k) * 2;
            int e = endpoint(k, g->n);
            double re = ld_el(t, s, i), im = ld_el(t, s, i + 1);
            if (halve_inside && !e)
                re *= 0.5, im *= 0.5; /* exact */
            if (weight_over_n) {
                double m = e ? 1.0 : 2.0; /* (m_k re) / n: doubling exact, one rounding */
                if (t == CC_F32) {
                    re = (double)((float)(m * re) / (float)g->n);
                    im = (double)((float)(m * im) / (float)g->n);
                } else {
                    re = m * re / (double)g->n;
                    im = m * im / (double)g->n;
                }
            }
            st_el(t, s, i, re);
            st_el(t, s, i + 1, e ? 0.0 : im);
        }
}

static void divide_by_n(cc_dtype t, void *x, int64_t count, int64_t n)
{
    for (int64_t i = 0; i < count; i++) {
        if (t == CC_F32)
            ((float *)x)[i] /= (float)n;
        else
            ((double *)x)[i] /= (double)n;
    }
}

static cc_status ft_check(const cc_call *call, char *msg, size_t len)
{
    cc_status st = ccu_check_call("cufft", call, 0, msg, len);
    if (st == CC_OK && strcmp(call->op, "fftFno") && strcmp(call->op, "fft_fno"))
        st = ccu_say(msg, len, CC_UNSUPPORTED, "the cufft provider has no %s", call->op);
    return st;
}

static cc_status ft_init(void *ctx, cc_device device, char *msg, size_t len)
{
    (void)ctx;
    return ccu_init("cufft", device, msg, len);
}

static cc_status ft_forward(void *ctx, const cc_call *call, cc_view *out, char *msg, size_t len)
{
    (void)ctx;
    cc_status st = ft_check(call, msg, len);
    fft_geom g;
    if (st == CC_OK)
        st = fft_geometry(call, &g, msg, len);
    if (st != CC_OK)
        return st;
    int v1 = call->params->variant == 1;
    int64_t want = v1 ? g.batch * g.K * 2 : g.batch * g.n;
    if (!out || !cc_view_is_dense(out) || cc_view_numel(out) != want)
        return ccu_say(msg, len, CC_FAILED, "fftFno: the output buffer does not match");
    if (g.batch == 0)
        return CC_OK;
    void *x = ccu_dense_host(&call->in[0]);
    if (!x)
        return ccu_say(msg, len, CC_FAILED, "out of memory");
    if (v1) {
        st = transform(call->dtype, 1, g.n, g.batch, x, out->data, msg, len);
    } else {
        adjust_spectrum(call->dtype, x, &g, 0, 0); /* endpoint imaginaries ignored */
        st = transform(call->dtype, 0, g.n, g.batch, x, out->data, msg, len);
        if (st == CC_OK)
            divide_by_n(call->dtype, out->data, g.batch * g.n, g.n);
    }
    free(x);
    return st;
}

static cc_status ft_vjp(void *ctx, const cc_call *call, const cc_view *gv, cc_view *grads,
                        char *msg, size_t len)
{
    (void)ctx;
    cc_status st = ft_check(call, msg, len);
    fft_geom g;
    if (st == CC_OK)
        st = fft_geometry(call, &g, msg, len);
    if (st != CC_OK)
        return st;
    if (!grads || !grads[0].data)
        return CC_OK;
    int v1 = call->params->variant == 1;
    int64_t nx = v1 ? g.batch * g.n : g.batch * g.K * 2, ng = v1 ? g.batch * g.K * 2 : g.batch * g.n;
    if (!gv || !cc_view_is_dense(gv) || cc_view_numel(gv) != ng || gv->dtype != call->dtype ||
        !cc_view_is_dense(&grads[0]) || cc_view_numel(&grads[0]) != nx)
        return ccu_say(msg, len, CC_FAILED, "fftFno: the cotangent or gradient buffer does not "
                                            "match");
    if (g.batch == 0)
        return CC_OK;
    size_t es = cc_dtype_size(call->dtype);
    void *G = malloc((size_t)ng * es);
    if (!G)
        return ccu_say(msg, len, CC_FAILED, "out of memory");
    memcpy(G, gv->data, (size_t)ng * es);
    if (v1) { /* dx = C2R(G / m_k) */
        adjust_spectrum(call->dtype, G, &g, 1, 0);
        st = transform(call->dtype, 0, g.n, g.batch, G, grads[0].data, msg, len);
    } else { /* dz = (m_k / n) R2C(g) */
        st = transform(call->dtype, 1, g.n, g.batch, G, grads[0].data, msg, len);
        if (st == CC_OK)
            adjust_spectrum(call->dtype, grads[0].data, &g, 0, 1);
    }
    free(G);
    return st;
}

static void ft_describe(void *ctx, char *buf, size_t len)
{
    (void)ctx;
    if (!buf || !len)
        return;
    int v = 0;
    cufftGetVersion(&v);
    char base[448];
    ccu_describe_base(base, sizeof base);
    snprintf(buf, len, "cufft %d; %s; provider external; vjp cuFFT", v, base);
}

static const char *ft_vjp_mode(void *ctx, const char *op)
{
    (void)ctx;
    return op && (!strcmp(op, "fftFno") || !strcmp(op, "fft_fno")) ? "backendVJP" : NULL;
}

const cc_provider *ccu_cufft_provider(void)
{
    static const cc_provider p = {CC_PROVIDER_ABI_VERSION, "cufft", NULL, ft_init, ft_forward,
                                  ft_vjp, ft_describe, ft_vjp_mode, NULL};
    return &p;
}
