/* The CUDA providers, plain C against the CUDA runtime and NVIDIA's libraries:
 *   cublas       matmul, scaledMatmul, linear (forward and VJP; f32, f64, f16, bf16) through
 *                cuBLAS GEMMs (providers/openblas/gemm_lowering.c on device copies). Math mode:
 *                pedantic (no TF32) unless CAPCHECK_TF32=1 in the environment of the worker
 *                (capcheck --tf32 on sets it); f16/bf16 by cublasGemmEx into a float32 C with
 *                CUBLAS_COMPUTE_32F_PEDANTIC, rounded to the dtype once.
 *   cublas-tf32  the same with CUBLAS_TF32_TENSOR_OP_MATH forced on.
 *                Both declare TF32's roundoff 2^-11 for f32 cases whenever TF32 is on
 *                (compute_roundoff, provider.h): the error model then judges f32 results at
 *                u = 2^-11. TF32 that a provider does not declare is what the f32 model
 *                catches (tests/plugins/mutants.c, matmul_tf32).
 *   cudnn        conv, convTranspose (forward and VJP, algorithms pinned to implicit GEMM /
 *                deterministic GEMM-class kernels, CUDNN_FMA_MATH: no tensor cores, no TF32),
 *                softmax and logSoftmax (forward and VJP, CUDNN_SOFTMAX_ACCURATE / _LOG),
 *                maxPool and avgPool (cudnnPoolingForward/Backward), batchNorm (training and
 *                eval forms); f32, f64. The contract-to-descriptor mapping and the inputs cuDNN
 *                cannot compute under the contract: cudnn_plan.h. Only when capcheck was built
 *                with cuDNN.
 *   cufft        fftFno variants 0 (spectralConv), 1 (rfft1d) and 2 (irfft1d), forward and VJP
 *                (the adjoints as cuFFT transforms of rescaled spectra; fft_lowering.h); f32,
 *                f64.
 * Every provider runs on device cuda only. init checks cudaGetDeviceCount (count initialised to
 * 0; a failing call or no device gives CC_UNSUPPORTED "no CUDA device: <cudaGetErrorString>"
 * on a machine without an NVIDIA device node, CC_FAILED on one with: cc_cuda_device_status),
 * then selects device 0 in that worker (CUDA contexts do not survive fork: the harness forks
 * first). Every CUDA, cuBLAS, cuDNN and cuFFT call is checked; results are read only after a
 * device synchronize. Library handles, plans and buffers live for one call: no global state. */
#ifndef CAPCHECK_CUDA_PROVIDERS_H
#define CAPCHECK_CUDA_PROVIDERS_H

#include <stddef.h>
#include <string.h>

#include "abi/capcheck_provider.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether `name` is one of the CUDA provider names above. */
static inline int cc_cuda_provider_known(const char *name)
{
    return name && (!strcmp(name, "cublas") || !strcmp(name, "cublas-tf32") ||
                    !strcmp(name, "cudnn") || !strcmp(name, "cufft"));
}
/* The provider called `name`, or NULL with one sentence in msg (unknown name, or capcheck built
 * without CUDA / without cuDNN). Does not call init. In the capcheck executable this is
 * providers/cuda/cuda_loader.c: the providers and NVIDIA's libraries (about 0.13 s to load) are
 * a module of their own, libcapcheck_cuda.so, loaded the first time a CUDA provider is asked
 * for; the module's entry capcheck_cuda_entry is this function of the providers themselves. */
const cc_provider *cc_cuda_provider(const char *name, char *msg, size_t msg_len);

#ifdef __cplusplus
}
#endif

#endif
