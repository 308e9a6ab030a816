/* The cuBLAS providers "cublas" and "cublas-tf32" (see cuda_providers.h): the GEMM lowering of
 * providers/openblas/gemm_lowering.c over a cuBLAS backend. Operands are uploaded whole (the
 * span of the strided view, or its dense packing); a row-major C = op(A) op(B) is the
 * column-major C^T = op(B)^T op(A)^T, so each GEMM is issued with the operands swapped and the
 * same transpose flags. Math mode per call: CUBLAS_PEDANTIC_MATH (no TF32, no reduced-precision
 * reductions) or CUBLAS_TF32_TENSOR_OP_MATH (ctx, or CAPCHECK_TF32=1 for "cublas").
 *
 * f16 and bf16: cublasGemmEx with f16/bf16 A and B, a float32 C and CUBLAS_COMPUTE_32F_PEDANTIC
 * (products and sums in float32, no down-conversion, no tensor-core shortcuts), the handle in
 * CUBLAS_PEDANTIC_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION whatever TF32 says
 * (TF32 concerns float32 operands only). The lowering accumulates every product, batch and bias
 * in that float32 C and rounds each output to the case dtype once (gemm_lowering.h), so the
 * dtype's own u is the honest bound: no compute_roundoff is declared for them. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "providers/cuda/cuda_common.h"
#include "providers/openblas/gemm_lowering.h"

typedef enum { TF32_FROM_ENV = 0, TF32_ON } tf32_mode;

typedef struct {
    tf32_mode mode;
} cublas_opts;

static const cublas_opts kEnvOpts = {TF32_FROM_ENV}, kTf32Opts = {TF32_ON};

static int tf32_on(const void *ctx)
{
    const cublas_opts *o = ctx;
    if (o && o->mode == TF32_ON)
        return 1;
    const char *env = getenv("CAPCHECK_TF32");
    return env && strcmp(env, "1") == 0;
}

static cc_status cublas_check(cublasStatus_t s, const char *what, char *msg, size_t len)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return CC_OK;
    return cc_say(msg, len, s == CUBLAS_STATUS_NOT_SUPPORTED ? CC_UNSUPPORTED : CC_FAILED,
                   "%s: cuBLAS: %s", what, cublasGetStatusString(s));
}

/* ---- the backend of the GEMM lowering ----------------------------------------------------- */

typedef struct {
    cublasHandle_t h;
    cc_dtype t;   /* operands */
    cc_dtype acc; /* C: t, or f32 for f16/bf16 operands */
    ccu_bufs bufs;
} cublas_call;

static int is_half(cc_dtype t)
{
    return t == CC_F16 || t == CC_BF16;
}

static cc_status bk_gemm(void *self, int ta, int tb, int64_t m, int64_t n, int64_t k,
                         double alpha, const void *A, int64_t lda, const void *B, int64_t ldb,
                         double beta, void *C, int64_t ldc, char *msg, size_t len)
{
    cublas_call *c = self;
    if (!cc_fits_int(m) || !cc_fits_int(n) || !cc_fits_int(k) || !cc_fits_int(lda) || !cc_fits_int(ldb) ||
        !cc_fits_int(ldc))
        return cc_say(msg, len, CC_UNSUPPORTED, "a GEMM extent exceeds cuBLAS's 32-bit int");
    /* row-major C (m x n) = op(A) op(B)  <=>  column-major C^T (n x m) = op(B)^T op(A)^T */
    cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t s;
    const char *what;
    if (c->t == CC_F64) {
        what = "cublasDgemm";
        s = cublasDgemm(c->h, opb, opa, (int)n, (int)m, (int)k, &alpha, B, (int)ldb, A,
                        (int)lda, &beta, C, (int)ldc);
    } else if (c->t == CC_F32) {
        float fa = (float)alpha, fb = (float)beta;
        what = "cublasSgemm";
        s = cublasSgemm(c->h, opb, opa, (int)n, (int)m, (int)k, &fa, B, (int)ldb, A, (int)lda,
                        &fb, C, (int)ldc);
    } else { /* f16/bf16 operands, float32 C and arithmetic (alpha, beta float) */
        float fa = (float)alpha, fb = (float)beta;
        cudaDataType_t ab = c->t == CC_F16 ? CUDA_R_16F : CUDA_R_16BF;
        what = "cublasGemmEx (CUBLAS_COMPUTE_32F_PEDANTIC)";
        s = cublasGemmEx(c->h, opb, opa, (int)n, (int)m, (int)k, &fa, B, ab, (int)ldb, A, ab,
                         (int)lda, &fb, C, CUDA_R_32F, (int)ldc, CUBLAS_COMPUTE_32F_PEDANTIC,
                         CUBLAS_GEMM_DEFAULT);
    }
    cc_status st = cublas_check(s, what, msg, len);
    if (st == CC_OK)
        st = ccu_check(cudaGetLastError(), "the cuBLAS GEMM launch", msg, len);
    return st;
}

static cc_status bk_input(void *self, const void *host, int64_t count, const void **dev,
                          char *msg, size_t len)
{
    cublas_call *c = self;
    void *d = NULL;
    cc_status st = ccu_upload(&c->bufs, host, (size_t)count * cc_dtype_size(c->t), &d, msg, len);
    *dev = d;
    return st;
}

static cc_status bk_output(void *self, void *host, int64_t count, void **dev, char *msg,
                           size_t len)
{
    cublas_call *c = self;
    return ccu_output(&c->bufs, host, (size_t)count * cc_dtype_size(c->acc), dev, msg, len);
}

static cc_status bk_finish(void *self, cc_status st, char *msg, size_t len)
{
    cublas_call *c = self;
    return ccu_finish(&c->bufs, st, msg, len);
}

/* A handle for one call, in the math mode the provider is set to. */
static cc_status open_call(const void *ctx, const cc_call *call, cublas_call *c, char *msg,
                           size_t len)
{
    memset(c, 0, sizeof *c);
    c->t = call->dtype;
    c->acc = is_half(c->t) ? CC_F32 : c->t;
    cc_status st = cublas_check(cublasCreate(&c->h), "cublasCreate", msg, len);
    if (st != CC_OK) {
        c->h = NULL;
        return st;
    }
    cublasMath_t mode = is_half(c->t)
                            ? (cublasMath_t)(CUBLAS_PEDANTIC_MATH |
                                             CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)
                        : tf32_on(ctx) ? CUBLAS_TF32_TENSOR_OP_MATH
                                       : CUBLAS_PEDANTIC_MATH;
    st = cublas_check(cublasSetMathMode(c->h, mode), "cublasSetMathMode", msg, len);
    if (st == CC_OK)
        st = cublas_check(cublasSetPointerMode(c->h, CUBLAS_POINTER_MODE_HOST),
                          "cublasSetPointerMode", msg, len);
    return st;
}

static cc_status close_call(cublas_call *c, cc_status st, char *msg, size_t len)
{
    if (c->h) {
        char spare[256];
        cc_status s2 = cublas_check(cublasDestroy(c->h), "cublasDestroy",
                                    st == CC_OK ? msg : spare, st == CC_OK ? len : sizeof spare);
        if (st == CC_OK)
            st = s2;
    }
    return st;
}

static cc_gemm_backend backend_of(cublas_call *c)
{
    cc_gemm_backend bk = {.self = c, .dtype = c->t, .acc_dtype = c->acc, .gemm = bk_gemm,
                          .input = bk_input, .output = bk_output, .finish = bk_finish};
    return bk;
}

/* ---- the cc_provider functions ------------------------------------------------------------- */

static cc_status cb_check(const cc_call *call, char *msg, size_t len)
{
    cc_status st = ccu_check_call("cublas", call, 1, msg, len);
    if (st == CC_OK && !cc_gemm_has_op(call->op))
        st = cc_say(msg, len, CC_UNSUPPORTED, "the cublas provider has no %s", call->op);
    return st;
}

static cc_status cb_init(void *ctx, cc_device device, char *msg, size_t len)
{
    (void)ctx;
    return ccu_init("cublas", device, msg, len);
}

static cc_status cb_forward(void *ctx, const cc_call *call, cc_view *out, char *msg, size_t len)
{
    cc_status st = cb_check(call, msg, len);
    if (st != CC_OK)
        return st;
    cublas_call c;
    st = open_call(ctx, call, &c, msg, len);
    if (st == CC_OK) {
        cc_gemm_backend bk = backend_of(&c);
        st = cc_gemm_forward(&bk, call, out, msg, len); /* calls finish */
    }
    return close_call(&c, st, msg, len);
}

static cc_status cb_vjp(void *ctx, const cc_call *call, const cc_view *g, cc_view *grads,
                        char *msg, size_t len)
{
    cc_status st = cb_check(call, msg, len);
    if (st != CC_OK)
        return st;
    cublas_call c;
    st = open_call(ctx, call, &c, msg, len);
    if (st == CC_OK) {
        cc_gemm_backend bk = backend_of(&c);
        st = cc_gemm_vjp(&bk, call, g, grads, msg, len);
    }
    return close_call(&c, st, msg, len);
}

static void cb_describe(void *ctx, char *buf, size_t len)
{
    if (!buf || !len)
        return;
    int major = 0, minor = 0, patch = 0;
    cublasGetProperty(MAJOR_VERSION, &major);
    cublasGetProperty(MINOR_VERSION, &minor);
    cublasGetProperty(PATCH_LEVEL, &patch);
    char base[448];
    ccu_describe_base(base, sizeof base);
    snprintf(buf, len, "cublas %d.%d.%d; %s; tf32 %s; f16/bf16 cublasGemmEx "
             "CUBLAS_COMPUTE_32F_PEDANTIC with a float32 C rounded once; provider external; "
             "vjp GEMM", major, minor, patch, base,
             tf32_on(ctx) ? "on (CUBLAS_TF32_TENSOR_OP_MATH, f32 bound at u 2^-11)"
                          : "off (CUBLAS_PEDANTIC_MATH)");
}

static const char *cb_vjp_mode(void *ctx, const char *op)
{
    (void)ctx;
    return op && cc_gemm_has_op(op) ? "backendVJP" : NULL;
}

/* Under CUBLAS_TF32_TENSOR_OP_MATH an f32 GEMM rounds its operands to TF32 (10 explicit
 * mantissa bits): its error model uses TF32's 2^-11 (abi/capcheck_provider.h, compute_roundoff). f64 GEMMs
 * never use TF32. */
static double cb_compute_roundoff(void *ctx, const char *op, cc_dtype dtype, cc_device device)
{
    (void)device;
    return dtype == CC_F32 && op && cc_gemm_has_op(op) && tf32_on(ctx) ? 0x1p-11 : 0.0;
}

const cc_provider *ccu_cublas_provider(int tf32)
{
    static const cc_provider env = {CC_PROVIDER_ABI_VERSION, "cublas", (void *)&kEnvOpts,
                                    cb_init, cb_forward, cb_vjp, cb_describe, cb_vjp_mode,
                                    cb_compute_roundoff};
    static const cc_provider forced = {CC_PROVIDER_ABI_VERSION, "cublas-tf32",
                                       (void *)&kTf32Opts, cb_init, cb_forward, cb_vjp,
                                       cb_describe, cb_vjp_mode, cb_compute_roundoff};
    return tf32 ? &forced : &env;
}
