/* Room core/ (dtype, view, files, clock, json, sha256): the common layer; knows no case.
 * May call abi/capcheck_provider.h (the ABI types) and reference/ only. */
/* Floating formats: rounding a float64 master value to a case dtype, storing and loading
 * elements of a provider buffer, and the constants of the error model. */
#ifndef CAPCHECK_DTYPE_H
#define CAPCHECK_DTYPE_H

#include <stdint.h>

#include "abi/capcheck_provider.h"

/* x rounded to nearest-even in dtype t, returned exactly as a double (integers unchanged). */
double cc_round_to(cc_dtype t, double x);
void cc_store(cc_dtype t, void *buf, int64_t i, double x); /* rounds, then stores */
double cc_load(cc_dtype t, const void *buf, int64_t i);
/* The same a whole array at a time, for the per-element paths of large cases (equal, value for
 * value, to cc_round_to, cc_store and cc_load):
 *   cc_round_array   x[i] = cc_round_to(t, x[i]) for i < n;
 *   cc_store_array   element i of x (already a value of t) into buf[off + i * stride];
 *   cc_load_array    x[i] = cc_load(t, buf, off + i * stride);
 *   cc_round_store_array  cc_round_array, then cc_store_array at stride 1 into buf[off ..],
 *                    in one pass (t a float dtype);
 *   cc_store_rows    x[q * cols + c] (already values of t) into
 *                    buf[off + q * row_stride + c * stride] for q < rows, c < cols: a
 *                    cc_store_array per row, written a column at a time where that suits;
 *   cc_fill_nan      n elements of buf with NaN (0 for the integer dtypes). */
void cc_round_array(cc_dtype t, double *x, int64_t n);
void cc_store_array(cc_dtype t, void *buf, int64_t off, int64_t stride, const double *x,
                    int64_t n);
void cc_round_store_array(cc_dtype t, double *x, int64_t n, void *buf, int64_t off);
void cc_store_rows(cc_dtype t, void *buf, int64_t off, int64_t row_stride, int64_t stride,
                   const double *x, int64_t rows, int64_t cols);
void cc_load_array(cc_dtype t, const void *buf, int64_t off, int64_t stride, double *x,
                   int64_t n);
void cc_fill_nan(cc_dtype t, void *buf, int64_t n);
/* cc_round_array, cc_store_array and cc_round_store_array compiled for instruction set isa
 * (REF_ISA_*, reference/ref_parallel.h) whatever this CPU's dispatch picks: 0 with the three in
 * *out, or -1 when this build or CPU has no such clone. Tests hold every clone to cc_round_to
 * and cc_store, bit for bit. */
typedef struct {
    void (*round_array)(cc_dtype t, double *x, int64_t n);
    void (*store_array)(cc_dtype t, void *buf, int64_t off, int64_t stride, const double *x,
                        int64_t n);
    void (*round_store_array)(cc_dtype t, double *x, int64_t n, void *buf, int64_t off);
} cc_dtype_array_loops;
int cc_dtype_array_loops_isa(int isa, cc_dtype_array_loops *out);
/* The flat index of the first NaN or Inf among the dense elements buf[off .. off + n), or -1:
 * read as bits, a block at a time, without converting (a large output scanned at memory speed). */
int64_t cc_find_nonfinite(cc_dtype t, const void *buf, int64_t off, int64_t n);
/* Unit roundoff u of a compute format: f64 2^-53, f32 2^-24, f16 and TF32 2^-11, bf16 2^-8. */
double cc_unit_roundoff(cc_dtype t);
double cc_smallest_normal(cc_dtype t);
/* The spacing of dtype t's values at x (for 0 and non-finite x: at the smallest normal). */
double cc_ulp(cc_dtype t, double x);
double cc_max_finite(cc_dtype t);
int cc_dtype_is_float(cc_dtype t);
/* Parse "f32" etc.; returns -1 when unknown. */
int cc_dtype_parse(const char *s, cc_dtype *out);
/* "cpu", "cuda", or "gpu" (TorchLean's Device.gpu, an alias of cuda); -1 otherwise
 * (core/torchlean.h, cc_device_unknown_msg, says why). */
int cc_device_parse(const char *s, cc_device *out);

#endif
