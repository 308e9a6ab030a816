/* fftFno (reference/ref_composite.c) forward and VJP lowered to batched real FFTs over an
 * abstract transform backend, plus host arithmetic: the cuFFT provider's backend is cuFFT on
 * device copies; the CPU test (tests/test_cuda_host.c) plugs in a plain DFT, so every line of
 * the bookkeeping below runs here without a GPU. Plain C11, no CUDA header.
 *
 * Packed spectra [rows, K, 2], K = n/2 + 1; bin k is an endpoint when k = 0 or 2k = n, m_k = 1 at
 * endpoints and 2 inside. Host steps are exact (copies, transposes, zeroing endpoint imaginaries,
 * halving) except the divisions by n and the spectral mode mixing, which run in the case dtype's
 * own arithmetic (each float32 operation rounded to float32):
 *   variant 1 rfft1d   x [batch, n]            -> R2C.
 *   variant 2 irfft1d  z [batch, K, 2], length n -> endpoint imaginaries zeroed, C2R, / n.
 *   variant 0 spectralConv x [n, width], Wre/Wim [modes, width, width]:
 *        X = R2C(x^T) (one row per channel, endpoint imaginaries zeroed: the contract's rfft);
 *        Y_k[o] = sum_i X_k[i] (Wre[k,i,o] + i Wim[k,i,o]) for k < modes, 0 for k >= modes
 *        (mode truncation); y = (C2R(Y) / n)^T.
 * VJPs (the real-pairing adjoints of the reference):
 *   rfft1d    dx = C2R(G / m_k)                      (endpoint imaginaries zeroed)
 *   irfft1d   dz = (m_k / n) R2C(g)                  (endpoint imaginaries zeroed)
 *   spectral  GY = (m_k / n) R2C(g^T) for k < modes; dWre = GYr Xr + GYi Xi, dWim = GYi Xr - GYr Xi;
 *             dX_k[i] = sum_o GY_k[o] conj(W_k[i,o]) for k < modes; dx = C2R(dX / m_k)^T. */
#ifndef CAPCHECK_FFT_LOWERING_H
#define CAPCHECK_FFT_LOWERING_H

#include <stddef.h>
#include <stdint.h>

#include "abi/capcheck_provider.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The transforms the lowering needs, on host buffers of `dtype` (CC_F32 or CC_F64), `batch`
 * contiguous rows of a length-n signal each, unnormalized (cuFFT's conventions):
 *   r2c: real in [batch, n] -> out [batch, K, 2], out_k = sum_t x_t e^{-2 pi i t k / n};
 *   c2r: in [batch, K, 2] -> real out [batch, n], x_t = sum_k m_k (Re_k cos - Im_k sin)(2 pi t k/n),
 *        the Hermitian extension's sum; the lowering zeroes endpoint imaginaries before a c2r.
 * Neither may modify `in`. n >= 1, batch >= 1. */
typedef struct cc_fft_backend {
    void *self;
    cc_dtype dtype;
    cc_status (*r2c)(void *self, int64_t n, int64_t batch, const void *in, void *out, char *msg,
                     size_t len);
    cc_status (*c2r)(void *self, int64_t n, int64_t batch, const void *in, void *out, char *msg,
                     size_t len);
} cc_fft_backend;

/* Whether op is fftFno (the lowering's only op). */
int cc_fft_has_op(const char *op);

/* The geometry of an fftFno call: CC_OK, or CC_FAILED with a sentence for a call whose shapes do
 * not match its variant (the harness validated them; this guards the lowering's own indexing). */
typedef struct {
    int variant;
    int64_t rows;  /* variants 1, 2: batch; variant 0: width (one transform per channel) */
    int64_t n, K;  /* signal length, bins */
    int64_t modes; /* variant 0 */
} cc_fft_geom;

cc_status cc_fft_geometry(const cc_call *call, cc_fft_geom *g, char *msg, size_t len);

/* Forward into *out (dense, shape preset by the harness). */
cc_status cc_fft_forward(const cc_fft_backend *bk, const cc_call *call, cc_view *out, char *msg,
                         size_t len);
/* VJP: writes every grads[i] whose data is non-NULL (dense, the shape of input i). */
cc_status cc_fft_vjp(const cc_fft_backend *bk, const cc_call *call, const cc_view *g,
                     cc_view *grads, char *msg, size_t len);

/* Spectrum s [rows, K, 2] in place, bins of a length-n signal: zero every endpoint imaginary;
 * with halve_inside, halve interior bins (exact); with weight_over_n, multiply bin k by m_k / n
 * (doubling exact, one rounded division). Exposed for the unit tests. */
void cc_fft_adjust_spectrum(cc_dtype t, void *s, int64_t rows, int64_t n, int halve_inside,
                            int weight_over_n);

#ifdef __cplusplus
}
#endif

#endif
