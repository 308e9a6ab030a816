/* The cuFFT provider "cufft": fftFno, all three variants (reference/ref_composite.c), through
 * the lowering of providers/cuda/fft_lowering.c over cuFFT's batched 1-D real transforms:
 *   R2C (D2Z): real rows -> packed (re, im) bins (the cufftComplex layout is exactly the packed
 *              layout), unnormalized;
 *   C2R (Z2D): packed bins -> real rows, the Hermitian sum, unnormalized.
 * rfft1d is one R2C; irfft1d a C2R of the spectrum with its endpoint imaginaries zeroed, / n;
 * spectralConv an R2C per channel, the mode mixing and truncation on the host in the case dtype,
 * a C2R, / n; the VJPs are the real-pairing adjoints as R2C/C2R of rescaled spectra (the
 * formulas: fft_lowering.h). One plan per transform, on device copies, destroyed after it. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cufft.h>

#include "providers/cuda/cuda_common.h"
#include "providers/cuda/fft_lowering.h"

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
    return cc_say(msg, len, st, "%s: cuFFT: %s (%d)", what, cufft_error_name(r), (int)r);
}

/* One batched 1-D transform: R2C (real -> K complex per row) or C2R (K complex -> n real). */
static cc_status transform(cc_dtype t, int r2c, int64_t n, int64_t batch, const void *in_host,
                           void *out_host, char *msg, size_t len)
{
    if (n > INT_MAX || batch > INT_MAX)
        return cc_say(msg, len, CC_UNSUPPORTED, "fftFno: extents exceed cuFFT's int");
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

/* The cc_fft_backend of the lowering: one cuFFT plan per transform, on device copies. */
typedef struct {
    cc_dtype t;
} ft_backend;

static cc_status bk_r2c(void *self, int64_t n, int64_t batch, const void *in, void *out,
                        char *msg, size_t len)
{
    const ft_backend *b = self;
    return transform(b->t, 1, n, batch, in, out, msg, len);
}

static cc_status bk_c2r(void *self, int64_t n, int64_t batch, const void *in, void *out,
                        char *msg, size_t len)
{
    const ft_backend *b = self;
    return transform(b->t, 0, n, batch, in, out, msg, len);
}

static cc_status ft_check(const cc_call *call, char *msg, size_t len)
{
    cc_status st = ccu_check_call("cufft", call, 0, msg, len);
    if (st == CC_OK && !cc_fft_has_op(call->op))
        st = cc_say(msg, len, CC_UNSUPPORTED, "the cufft provider has no %s", call->op);
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
    if (st != CC_OK)
        return st;
    ft_backend b = {call->dtype};
    cc_fft_backend bk = {&b, call->dtype, bk_r2c, bk_c2r};
    return cc_fft_forward(&bk, call, out, msg, len);
}

static cc_status ft_vjp(void *ctx, const cc_call *call, const cc_view *gv, cc_view *grads,
                        char *msg, size_t len)
{
    (void)ctx;
    cc_status st = ft_check(call, msg, len);
    if (st != CC_OK)
        return st;
    ft_backend b = {call->dtype};
    cc_fft_backend bk = {&b, call->dtype, bk_r2c, bk_c2r};
    return cc_fft_vjp(&bk, call, gv, grads, msg, len);
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
    return cc_fft_has_op(op) ? "backendVJP" : NULL;
}

const cc_provider *ccu_cufft_provider(void)
{
    static const cc_provider p = {CC_PROVIDER_ABI_VERSION, "cufft", NULL, ft_init, ft_forward,
                                  ft_vjp, ft_describe, ft_vjp_mode, NULL};
    return &p;
}
