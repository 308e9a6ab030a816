/* matmul, scaledMatmul and linear (forward and VJP) lowered to row-major GEMMs over an abstract
 * BLAS backend. Shared by the OpenBLAS provider (the backend is CBLAS on the harness's own host
 * buffers) and the cuBLAS provider (device copies, column-major calls on the transposed
 * problem). Plain C11; no BLAS header is needed here.
 *
 * Operands are the harness's strided views. A 2-D slice whose strides are row-major (column
 * stride 1, row stride >= columns) or column-major (row stride 1, column stride >= rows) goes to
 * the GEMM as it is, with CblasNoTrans or CblasTrans and its own leading dimension; anything else
 * (every other element, a stride-0 broadcast row) is packed into a dense row-major copy first.
 * Batch axes are walked with their strides (0 on a broadcast axis), so a broadcast operand is
 * never materialised. Every GEMM is a plain sum of products (no Strassen, no reduced precision),
 * so the reference's dot-product error model applies to every output and gradient entry.
 *
 * Geometry (reference/ref_linalg.c): torch.matmul with 1-D promotion ([k] @ B is a row, A @ [k]
 * a column, both dropped from the output) and right-aligned broadcast batch axes;
 * scaledMatmul = alpha * matmul (alpha is handed to the GEMM's own alpha); linear
 * y[..., o] = sum_i x[..., i] W[o, i] + b[o] (the bias enters as a rank-1 GEMM ones x b^T,
 * then the product is accumulated with beta = 1). VJPs: dA = alpha g B^T, dB = alpha A^T g summed
 * over the batches that read each slice (beta = 1 accumulation); linear dx = g W,
 * dW = sum g^T x, db = g^T ones. */
#ifndef CAPCHECK_GEMM_LOWERING_H
#define CAPCHECK_GEMM_LOWERING_H

#include <stddef.h>
#include <stdint.h>

#include "abi/capcheck_provider.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the lowering needs from a BLAS. Pointers handed to gemm are backend pointers (host for
 * CBLAS, device for cuBLAS) obtained from input()/output(); element offsets are applied by the
 * lowering in units of the operand dtype (A, B) and of the accumulation dtype (C).
 *
 * Half-precision operands (f16, bf16) need acc_dtype CC_F32: every product C is then a float32
 * buffer that the GEMMs accumulate into (beta = 1 across batches and the bias), and the lowering
 * rounds it to the case dtype once, after finish(), into the harness's buffer (one rounding per
 * output element, as a GEMM with a half-precision C would do for a single product). */
typedef struct cc_gemm_backend {
    void *self;
    cc_dtype dtype;     /* operand dtype: the case dtype, CC_F32/CC_F64, or CC_F16/CC_BF16 */
    cc_dtype acc_dtype; /* dtype of C and of output() buffers: dtype itself, or CC_F32 for halves */
    /* Row-major C[m x n] = alpha op(A) op(B) + beta C, op(X) = X or X^T as ta/tb say (the stored
     * matrix is then k x m / n x k); m, n, k >= 1; every ld is a valid row-major leading
     * dimension of the stored matrix. */
    cc_status (*gemm)(void *self, int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha,
                      const void *A, int64_t lda, const void *B, int64_t ldb, double beta,
                      void *C, int64_t ldc, char *msg, size_t len);
    /* A backend pointer to `count` elements that hold the host data (read only). */
    cc_status (*input)(void *self, const void *host, int64_t count, const void **dev, char *msg,
                       size_t len);
    /* A zero-filled backend buffer for `count` elements of acc_dtype, written back to host (a
     * buffer of acc_dtype) by finish(). */
    cc_status (*output)(void *self, void *host, int64_t count, void **dev, char *msg,
                        size_t len);
    /* Wait for the work, copy every output back to its host buffer, release every backend
     * buffer. Called exactly once per lowering call, after a failure too (st is that failure:
     * nothing is copied then); returns st, or the first error finishing raised. */
    cc_status (*finish)(void *self, cc_status st, char *msg, size_t len);
} cc_gemm_backend;

/* Whether the lowering implements op (matmul, scaledMatmul, linear). */
int cc_gemm_has_op(const char *op);

/* Forward of call->op into *out (dense, shape preset by the harness). */
cc_status cc_gemm_forward(const cc_gemm_backend *bk, const cc_call *call, cc_view *out, char *msg,
                          size_t len);
/* VJP: writes every grads[i] whose data is non-NULL (dense, the shape of input i). */
cc_status cc_gemm_vjp(const cc_gemm_backend *bk, const cc_call *call, const cc_view *g,
                      cc_view *grads, char *msg, size_t len);

/* Helpers the providers share (also used by the OpenBLAS convolution). */
int64_t cc_view_numel(const cc_view *v);
/* Elements from v->data to the last element v can read, + 1 (0 for an empty view); -1 when a
 * stride is negative. */
int64_t cc_view_span(const cc_view *v);
/* Dense row-major copy of a strided view into dst (numel elements of the view's dtype). */
void cc_view_pack(const cc_view *v, void *dst);
/* Whether out is dense row-major for its shape (or its strides were left all zero). */
int cc_view_is_dense(const cc_view *v);

#ifdef __cplusplus
}
#endif

#endif
