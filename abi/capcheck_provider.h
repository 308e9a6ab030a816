/* The provider ABI: what the harness calls to run an op on an implementation under test.
 *
 * A provider is a table of function pointers. Built-in providers (the reference adapter, ATen)
 * and plugins loaded with --provider-lib use the same table; a plugin exports
 *     const cc_provider *capcheck_provider_v1(void);
 * and sets abi_version = CC_PROVIDER_ABI_VERSION. (The entry point keeps its _v1 name: the
 * table's abi_version says which layout it has.)
 *
 * ABI history: version 1 ends at vjp_mode; version 2 appends compute_roundoff. The harness loads
 * both (a version-1 table is read up to vjp_mode only, its compute_roundoff taken as NULL), so
 * a plugin built against version 1 keeps working unchanged. The harness owns every buffer: inputs are
 * strided views in the case dtype (index inputs int64, masks uint8), outputs are dense row-major
 * buffers in the case dtype whose shapes the reference derived.
 *
 * Room abi/: below core/, providers/ and the harness, which all include it; it includes only
 * reference/ref.h (the ref_params record the ops' parameters travel in). A plugin built outside
 * the project compiles with -I<capcheck> and #include "abi/capcheck_provider.h".
 */
#ifndef CAPCHECK_ABI_PROVIDER_H
#define CAPCHECK_ABI_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#include "../reference/ref.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CC_PROVIDER_ABI_VERSION 2
#define CC_PROVIDER_ABI_MIN_VERSION 1 /* the oldest table layout the plugin loader accepts */

typedef enum { CC_F64 = 0, CC_F32, CC_F16, CC_BF16, CC_I64, CC_U8, CC_DTYPE_COUNT } cc_dtype;
typedef enum { CC_CPU = 0, CC_CUDA, CC_DEVICE_COUNT } cc_device;

/* Result of a provider call. */
typedef enum {
    CC_OK = 0,
    CC_UNSUPPORTED = 1, /* this op/dtype/device is not implemented: recorded, never a pass */
    CC_FAILED = 2       /* the call raised an error: msg says what */
} cc_status;

typedef struct {
    cc_dtype dtype;
    int rank;
    int64_t shape[REF_MAX_RANK];
    int64_t strides[REF_MAX_RANK]; /* in elements; 0 for a broadcast axis */
    void *data;                    /* address of element [0,...,0] */
} cc_view;

typedef struct {
    const char *op;           /* ref_op.name, e.g. "logSoftmax" */
    const ref_params *params; /* the fields the op names in ref_op.params are set */
    cc_device device;
    cc_dtype dtype; /* floating dtype of the case */
    int n_in;
    const cc_view *in;
} cc_call;

typedef struct cc_provider {
    int abi_version; /* CC_PROVIDER_ABI_VERSION */
    const char *name; /* "aten", "reference", a plugin's name */
    void *ctx;
    /* Prepare a device (called once per worker before any case); CC_UNSUPPORTED with a
     * sentence in msg when the device is absent. */
    cc_status (*init)(void *ctx, cc_device device, char *msg, size_t msg_len);
    /* Write the op's output into *out (dense, dtype and shape preset by the harness). A provider
     * that finds one of its kernels wrote outside a buffer (a canary of its own, as the CUDA
     * providers keep) returns CC_FAILED with msg starting "out-of-bounds:": the case is then
     * `out-of-bounds`, not an error. */
    cc_status (*forward)(void *ctx, const cc_call *call, cc_view *out, char *msg, size_t msg_len);
    /* Given the output cotangent g (dense), write each requested input gradient: grads[i].data
     * is NULL for inputs that are not differentiated. */
    cc_status (*vjp)(void *ctx, const cc_call *call, const cc_view *g, cc_view *grads, char *msg,
                     size_t msg_len);
    /* Provenance, e.g. "libtorch 2.15.0; threads 1; cuda none" (may be NULL). */
    void (*describe)(void *ctx, char *buf, size_t buf_len);
    /* The vjpMode of this provider's capsule for an op ("backendVJP", "torchLeanTape", "none")
     * and, optionally, a note on how the call adapts ATen to TorchLean's contract. A property
     * of the capsule: a worker asks once per op and keeps a copy of the text. */
    const char *(*vjp_mode)(void *ctx, const char *op);
    /* ABI version 2 (may be NULL; a version-1 table has no such field). The unit roundoff of the
     * arithmetic this provider uses for `op` (ref_op.name) in `dtype` on `device` when it is
     * coarser than the dtype's own, e.g. 2^-11 for an f32 matmul or conv that runs on TF32
     * tensor cores; 0 means "the dtype's u". The harness's bound then uses this u in place of
     * u(dtype) (harness/run/compare.h, cc_bound_for_compute): a provider can loosen its error model
     * only by declaring what its kernels do, and its describe() should say so ("tf32 on"). A
     * declaration finer than u(dtype) changes nothing (the output is still rounded to the
     * dtype); one coarser than bf16's 2^-8, or not a number, makes the case an error. Called in
     * the worker, after init. */
    double (*compute_roundoff)(void *ctx, const char *op, cc_dtype dtype, cc_device device);
} cc_provider;

typedef const cc_provider *(*cc_provider_entry_fn)(void);

/* Built-in providers. */
const cc_provider *cc_reference_provider(void);
/* The ATen provider, its library loaded on first use (providers/aten_loader.c); NULL when
 * capcheck was built without libtorch or the library cannot be loaded (_load says why). */
const cc_provider *cc_aten_provider(void);
const cc_provider *cc_aten_provider_load(char *msg, size_t msg_len);
/* 1 when this process has loaded the ATen provider's library. */
int cc_aten_loaded(void);

size_t cc_dtype_size(cc_dtype t);
const char *cc_dtype_name(cc_dtype t);
const char *cc_device_name(cc_device d);

#ifdef __cplusplus
}
#endif

#endif
