/* The provider ABI: what the harness calls to run an op on an implementation under test.
 *
 * A provider is a table of function pointers. Built-in providers (the reference adapter, ATen)
 * and plugins loaded with --provider-lib use the same table; a plugin exports
 *     const cc_provider *capcheck_provider_v1(void);
 * and sets abi_version = CC_PROVIDER_ABI_VERSION. The harness owns every buffer: inputs are
 * strided views in the case dtype (index inputs int64, masks uint8), outputs are dense row-major
 * buffers in the case dtype whose shapes the reference derived.
 */
#ifndef CAPCHECK_PROVIDER_H
#define CAPCHECK_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#include "../reference/ref.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CC_PROVIDER_ABI_VERSION 1

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
    /* Write the op's output into *out (dense, dtype and shape preset by the harness). */
    cc_status (*forward)(void *ctx, const cc_call *call, cc_view *out, char *msg, size_t msg_len);
    /* Given the output cotangent g (dense), write each requested input gradient: grads[i].data
     * is NULL for inputs that are not differentiated. */
    cc_status (*vjp)(void *ctx, const cc_call *call, const cc_view *g, cc_view *grads, char *msg,
                     size_t msg_len);
    /* Provenance, e.g. "libtorch 2.15.0; threads 1; cuda none" (may be NULL). */
    void (*describe)(void *ctx, char *buf, size_t buf_len);
    /* The vjpMode of this provider's capsule for an op ("backendVJP", "torchLeanTape", "none")
     * and, optionally, a note on how the call adapts ATen to TorchLean's contract. */
    const char *(*vjp_mode)(void *ctx, const char *op);
} cc_provider;

typedef const cc_provider *(*cc_provider_entry_fn)(void);

/* Built-in providers. */
const cc_provider *cc_reference_provider(void);
/* NULL when capcheck was built without libtorch. */
const cc_provider *cc_aten_provider(void);

size_t cc_dtype_size(cc_dtype t);
const char *cc_dtype_name(cc_dtype t);
const char *cc_device_name(cc_device d);

#ifdef __cplusplus
}
#endif

#endif
