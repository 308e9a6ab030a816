/* Host-side plans of the cuDNN provider's pooling and batchNorm (providers/cuda/cudnn_provider.c):
 * how TorchLean's contract (reference/ref_pool.c, ref_norm.c) maps onto cuDNN's descriptors, and
 * which inputs cuDNN cannot compute under that contract. Plain C11 without a CUDA or cuDNN
 * header, so test_cuda_host checks every rule here on any machine.
 *
 * Pooling (maxPool, avgPool): x [C, s...] (one sample, spatial rank 1-3) is the cuDNN tensor
 * [1, C, s...]; spatial rank 1 runs as rank 2 with a unit leading axis (window 1, pad 0, stride
 * 1), as the convolutions do. Window, symmetric padding and stride map one to one; dilation does
 * not exist in cuDNN pooling (the contract has none either: dil must be 1). The contract's
 * output extent per axis is floor((in + 2p - k)/s) + 1, or 0 when in = 0, k = 0, p > floor(k/2)
 * or in + 2p < k: such an empty output never reaches cuDNN (the VJP is then all zeros). Under
 * p <= floor(k/2) every window holds a real cell, so
 *   maxPool  CUDNN_POOLING_MAX_DETERMINISTIC: padded cells never win (the contract ignores
 *            them), and the selected value is the window maximum. cuDNN routes a maximum's
 *            gradient to one cell but does not document which one when several real cells tie,
 *            whereas the contract takes the first row-major one; nor does it document where a
 *            NaN ranks (the contract keeps a NaN only in a window's first real cell) or what a
 *            window of -inf alone gives. Those inputs are refused: ties for the VJP only (the
 *            forward value is the same whichever tied cell wins), NaN and all -inf windows for
 *            both.
 *   avgPool  CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING: the divisor is the full window volume
 *            prod(k) (count_include_pad), padded cells add 0: exactly the contract.
 *
 * batchNorm: x [C, spatial...] (one sample) is [1, C, N, 1], N = prod(spatial), in
 * CUDNN_BATCHNORM_SPATIAL: statistics per channel over the N positions, the population (biased)
 * variance, y = (x - mu) / sqrt(var + eps) gamma + beta (eps inside the root, as the contract).
 *   training  ForwardTraining (no running statistics: exponentialAverageFactor 0 and NULL running
 *             buffers) and Backward (dx, dgamma, dbeta from the batch statistics); N = 1 gives
 *             var = 0 and y = beta.
 *   eval      ForwardInference with the running variance clamped at 0 on the host (the
 *             contract's max(var_run, 0); exact). Its VJP is composed of cuDNN kernels, because
 *             cudnnBatchNormalizationBackward only knows batch statistics:
 *             dx = ForwardInference(g; scale gamma, bias 0, mean 0, var var_run) = g gamma / sigma,
 *             xhat = ForwardInference(x; scale 1, bias 0, mean mu_run, var var_run),
 *             dgamma = per-channel sum of g * xhat (cudnnOpTensor MUL, cudnnConvolutionBackwardBias),
 *             dbeta = per-channel sum of g (cudnnConvolutionBackwardBias).
 *   C = 0 or N = 0 (eval only) has no element for cuDNN: y is empty and gradients are zeros. */
#ifndef CAPCHECK_CUDNN_PLAN_H
#define CAPCHECK_CUDNN_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "abi/capcheck_provider.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int is_max;                       /* maxPool (else avgPool) */
    int sr;                           /* the op's spatial rank, 1..3 */
    int64_t C;                        /* channels */
    int64_t in[3], k[3], s[3], p[3];  /* the op's per-axis geometry */
    int64_t out[3];                   /* the contract's output extents */
    int64_t nin, nout, K;             /* per channel: input cells, output cells, window volume */
    int empty;                        /* no output element: nothing for cuDNN to do */
    /* cuDNN's view (set when !empty): tensors [1, C, spatial...] of rank nd, window/pad/stride
     * of nd - 2 entries, rank 1 lifted to rank 2 with a unit leading axis */
    int nd;
    int x_dims[5], y_dims[5];
    int window[3], pad[3], stride[3];
} ccu_pool_plan;

/* CC_OK with the plan; CC_UNSUPPORTED with a sentence for what cuDNN cannot express (dilation,
 * extents beyond int); CC_FAILED for a call that is not a pooling of one x [C, s...]. */
cc_status ccu_pool_plan_make(const cc_call *call, ccu_pool_plan *pl, char *msg, size_t len);

/* What decides whether cuDNN's max pooling meets the contract on a given x. */
typedef struct {
    int64_t tie_windows;     /* windows whose maximum is shared by two or more real cells */
    int64_t nan_windows;     /* windows with a NaN among their real cells */
    int64_t neg_inf_windows; /* windows whose real cells are all -inf */
} ccu_maxpool_scan;

/* Scan every window of x (dense [C, in...] in dtype t, f32 or f64) over its real cells. */
void ccu_maxpool_scan_x(const ccu_pool_plan *pl, cc_dtype t, const void *x, ccu_maxpool_scan *s);

/* CC_OK when cuDNN computes the contract's maxPool forward (vjp = 0) or VJP (vjp = 1) of this x;
 * else CC_UNSUPPORTED with the reason and the first such window's count. */
cc_status ccu_maxpool_expressible(const ccu_pool_plan *pl, cc_dtype t, const void *x, int vjp,
                                  char *msg, size_t len);

typedef struct {
    int training;
    int64_t C, N;    /* channels; positions per channel */
    double eps;
    int empty;       /* C * N == 0 */
    int x_dims[4];   /* [1, C, N, 1] (set when !empty) */
} ccu_bn_plan;

/* CC_OK with the plan; CC_UNSUPPORTED for extents beyond cuDNN's int; CC_FAILED for a call that
 * is not batchNorm's (3 inputs training, 5 eval; x [C, ...], per-channel vectors [C]). */
cc_status ccu_bn_plan_make(const cc_call *call, ccu_bn_plan *pl, char *msg, size_t len);

/* The eval form's running variance as the contract reads it: v = max(v, 0) for C values of dtype
 * t in place (a NaN stays NaN). */
void ccu_bn_clamp_variance(cc_dtype t, void *var, int64_t C);

#ifdef __cplusplus
}
#endif

#endif
