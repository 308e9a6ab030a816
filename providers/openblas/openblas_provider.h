/* The OpenBLAS provider ("openblas"): matmul, scaledMatmul, linear, conv and convTranspose,
 * forward and VJP, in f32 and f64, on the CPU through CBLAS (sgemm/dgemm; convolutions by
 * im2col + GEMM and col2im). TorchLean provider `external`, vjpMode backendVJP: every gradient
 * is computed by GEMMs too. OpenBLAS runs 1 thread unless CAPCHECK_OPENBLAS_THREADS says
 * otherwise (set in init, stated by describe). */
#ifndef CAPCHECK_OPENBLAS_PROVIDER_H
#define CAPCHECK_OPENBLAS_PROVIDER_H

#include <stddef.h>

#include "abi/capcheck_provider.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The provider, or NULL with one sentence in msg when capcheck was built without OpenBLAS. */
const cc_provider *cc_openblas_provider(char *msg, size_t msg_len);

#ifdef __cplusplus
}
#endif

#endif
