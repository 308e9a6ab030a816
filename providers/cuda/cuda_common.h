/* Shared plumbing of the CUDA providers: the device check, error sentences, per-call device
 * buffers (uploads, zero-filled outputs copied back after a synchronize) and provenance text. */
#ifndef CAPCHECK_CUDA_COMMON_H
#define CAPCHECK_CUDA_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "providers/provider_util.h"
#include "abi/capcheck_provider.h"

#define CCU_MAX_BUFS 24

/* init of every CUDA provider: CC_UNSUPPORTED "no CUDA device: ..." unless a device exists,
 * CC_FAILED when a device node is there but the runtime cannot count it (cc_cuda_device_status);
 * then device 0 is selected and its context created in this process. `who` names the provider
 * in the sentences. */
cc_status ccu_init(const char *who, cc_device device, char *msg, size_t len);
/* CC_OK, or CC_FAILED "<what>: <cudaGetErrorName>: <cudaGetErrorString>". */
cc_status ccu_check(cudaError_t e, const char *what, char *msg, size_t len);
/* The checks every call makes: device cuda, floating dtype f32/f64 (and f16/bf16 when
 * allow_half; CC_UNSUPPORTED otherwise), input views present. */
cc_status ccu_check_call(const char *who, const cc_call *call, int allow_half, char *msg,
                         size_t len);

/* The device buffers of one provider call. Each sits between two canary regions of
 * CCU_CANARY_BYTES (device memory has no guard pages to give): ccu_finish checks them after the
 * call and answers CC_FAILED with "out-of-bounds: ..." (the runner's out-of-bounds status) when a
 * kernel wrote outside a buffer. A read outside goes unseen on the device. */
#define CCU_CANARY_BYTES 256
#define CCU_CANARY 0xa5
typedef struct {
    void *dev;  /* the buffer, CCU_CANARY_BYTES into its allocation */
    void *host; /* outputs: where finish copies the result */
    size_t bytes;
    int is_output;
} ccu_buf;

typedef struct {
    ccu_buf b[CCU_MAX_BUFS];
    int n;
} ccu_bufs;

/* Device copy of `bytes` at host (*dev = NULL for 0 bytes). */
cc_status ccu_upload(ccu_bufs *bs, const void *host, size_t bytes, void **dev, char *msg,
                     size_t len);
/* Zero-filled device buffer that finish copies back to host. */
cc_status ccu_output(ccu_bufs *bs, void *host, size_t bytes, void **dev, char *msg, size_t len);
/* Zero-filled device scratch (not copied back). */
cc_status ccu_scratch(ccu_bufs *bs, size_t bytes, void **dev, char *msg, size_t len);
/* Synchronize, check for errors, copy outputs back when st is CC_OK, free everything. Returns st
 * or the first CUDA error met. */
cc_status ccu_finish(ccu_bufs *bs, cc_status st, char *msg, size_t len);

/* "cuda <runtime>; driver <driver>; gpu <name>" (or "gpu none" without a device). */
void ccu_describe_base(char *buf, size_t len);

/* Dense host copy of a strided view (caller frees); NULL when out of memory. */
void *ccu_dense_host(const cc_view *v);

#endif
