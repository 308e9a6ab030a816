#include "providers/cuda/cuda_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/openblas/gemm_lowering.h"

cc_status ccu_check(cudaError_t e, const char *what, char *msg, size_t len)
{
    if (e == cudaSuccess)
        return CC_OK;
    return cc_say(msg, len, CC_FAILED, "%s: %s: %s", what, cudaGetErrorName(e),
                   cudaGetErrorString(e));
}

cc_status ccu_init(const char *who, cc_device device, char *msg, size_t len)
{
    if (device != CC_CUDA)
        return cc_say(msg, len, CC_UNSUPPORTED, "the %s provider runs on device cuda only",
                       who);
    int count = 0; /* left unset by a failing call (no driver) */
    cudaError_t e = cudaGetDeviceCount(&count);
    cc_status st = cc_cuda_device_status(e != cudaSuccess, e == cudaErrorNoDevice,
                                         cudaGetErrorString(e), count, "/dev", msg, len);
    if (st != CC_OK)
        return st;
    st = ccu_check(cudaSetDevice(0), "cudaSetDevice(0)", msg, len);
    if (st == CC_OK)
        st = ccu_check(cudaFree(NULL), "creating the CUDA context", msg, len);
    return st;
}

cc_status ccu_check_call(const char *who, const cc_call *call, int allow_half, char *msg,
                         size_t len)
{
    if (!call || !call->op)
        return cc_say(msg, len, CC_FAILED, "%s: NULL call", who);
    if (call->device != CC_CUDA)
        return cc_say(msg, len, CC_UNSUPPORTED, "the %s provider runs on device cuda only", who);
    int half = call->dtype == CC_F16 || call->dtype == CC_BF16;
    if (call->dtype != CC_F32 && call->dtype != CC_F64 && !(allow_half && half))
        return cc_say(msg, len, CC_UNSUPPORTED, "%s: the %s provider has no %s path (%s)",
                       call->op, who, cc_dtype_name(call->dtype),
                       allow_half ? "f32, f64, f16 and bf16" : "f32 and f64 only");
    if (call->n_in > 0 && !call->in)
        return cc_say(msg, len, CC_FAILED, "%s: the call has no input views", call->op);
    for (int i = 0; i < call->n_in; i++)
        if (call->in[i].dtype != call->dtype || cc_view_span(&call->in[i]) < 0)
            return cc_say(msg, len, CC_FAILED, "%s: input %d is not a %s view with strides >= 0",
                           call->op, i, cc_dtype_name(call->dtype));
    return CC_OK;
}

static cc_status add_buf(ccu_bufs *bs, void *host, size_t bytes, int is_output, void **dev,
                         char *msg, size_t len)
{
    *dev = NULL;
    if (bytes == 0)
        return CC_OK;
    if (bs->n == CCU_MAX_BUFS)
        return cc_say(msg, len, CC_FAILED, "internal: more than %d device buffers in one call",
                       CCU_MAX_BUFS);
    void *d = NULL;
    cc_status st = ccu_check(cudaMalloc(&d, bytes + 2 * CCU_CANARY_BYTES), "cudaMalloc", msg, len);
    if (st != CC_OK)
        return st;
    char *buf = (char *)d + CCU_CANARY_BYTES;
    bs->b[bs->n++] = (ccu_buf){buf, host, bytes, is_output};
    *dev = buf;
    st = ccu_check(cudaMemset(d, CCU_CANARY, CCU_CANARY_BYTES), "cudaMemset (canary)", msg, len);
    if (st == CC_OK)
        st = ccu_check(cudaMemset(buf + bytes, CCU_CANARY, CCU_CANARY_BYTES),
                       "cudaMemset (canary)", msg, len);
    return st;
}

cc_status ccu_upload(ccu_bufs *bs, const void *host, size_t bytes, void **dev, char *msg,
                     size_t len)
{
    cc_status st = add_buf(bs, NULL, bytes, 0, dev, msg, len);
    if (st == CC_OK && bytes)
        st = ccu_check(cudaMemcpy(*dev, host, bytes, cudaMemcpyHostToDevice),
                       "cudaMemcpy to the device", msg, len);
    return st;
}

cc_status ccu_output(ccu_bufs *bs, void *host, size_t bytes, void **dev, char *msg, size_t len)
{
    cc_status st = add_buf(bs, host, bytes, 1, dev, msg, len);
    if (st == CC_OK && bytes)
        st = ccu_check(cudaMemset(*dev, 0, bytes), "cudaMemset", msg, len);
    return st;
}

cc_status ccu_scratch(ccu_bufs *bs, size_t bytes, void **dev, char *msg, size_t len)
{
    cc_status st = add_buf(bs, NULL, bytes, 0, dev, msg, len);
    if (st == CC_OK && bytes)
        st = ccu_check(cudaMemset(*dev, 0, bytes), "cudaMemset", msg, len);
    return st;
}

/* 0 when both canaries of b are intact; else -1 with the out-of-bounds sentence. */
static int canary_spoiled(const ccu_buf *b, int index, char *msg, size_t len)
{
    unsigned char seen[2][CCU_CANARY_BYTES];
    const char *buf = b->dev;
    if (cudaMemcpy(seen[0], buf - CCU_CANARY_BYTES, CCU_CANARY_BYTES, cudaMemcpyDeviceToHost) !=
            cudaSuccess ||
        cudaMemcpy(seen[1], buf + b->bytes, CCU_CANARY_BYTES, cudaMemcpyDeviceToHost) !=
            cudaSuccess)
        return 0; /* the copy's own error is reported by the caller's checks */
    for (int side = 0; side < 2; side++)
        for (int k = 0; k < CCU_CANARY_BYTES; k++)
            if (seen[side][k] != CCU_CANARY) {
                int far = side ? k + 1 : CCU_CANARY_BYTES - k;
                for (int j = 0; side && j < CCU_CANARY_BYTES; j++)
                    if (seen[side][j] != CCU_CANARY)
                        far = j + 1;
                cc_say(msg, len, CC_FAILED,
                       "out-of-bounds: a kernel wrote %d byte%s %s device buffer %d (%s, %zu "
                       "bytes; its canary was overwritten)",
                       far, far == 1 ? "" : "s", side ? "past the end of" : "before the start of",
                       index, b->is_output ? "an output" : "an input or scratch", b->bytes);
                return -1;
            }
    return 0;
}

cc_status ccu_finish(ccu_bufs *bs, cc_status st, char *msg, size_t len)
{
    /* a failure already described keeps its sentence; later errors only if there was none */
    char spare[256];
    char *m = st == CC_OK ? msg : spare;
    size_t ml = st == CC_OK ? len : sizeof spare;
    cc_status s2 = ccu_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", m, ml);
    if (s2 == CC_OK)
        s2 = ccu_check(cudaGetLastError(), "a kernel launch", m, ml);
    if (st == CC_OK)
        st = s2;
    for (int i = 0; st == CC_OK && i < bs->n; i++)
        if (canary_spoiled(&bs->b[i], i, msg, len))
            st = CC_FAILED;
    for (int i = 0; st == CC_OK && i < bs->n; i++)
        if (bs->b[i].is_output)
            st = ccu_check(cudaMemcpy(bs->b[i].host, bs->b[i].dev, bs->b[i].bytes,
                                      cudaMemcpyDeviceToHost),
                           "cudaMemcpy to the host", msg, len);
    for (int i = 0; i < bs->n; i++) {
        cc_status s3 =
            ccu_check(cudaFree((char *)bs->b[i].dev - CCU_CANARY_BYTES), "cudaFree", m, ml);
        if (st == CC_OK)
            st = s3;
    }
    bs->n = 0;
    return st;
}

void ccu_describe_base(char *buf, size_t len)
{
    int rt = 0, drv = 0, count = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    char gpu[320] = "none (no CUDA device)";
    if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) {
        struct cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
            snprintf(gpu, sizeof gpu, "%s (sm_%d%d)", prop.name, prop.major, prop.minor);
    }
    cudaGetLastError(); /* clear what a failing query left */
    char dv[32] = "none";
    if (drv > 0)
        snprintf(dv, sizeof dv, "%d.%d", drv / 1000, (drv % 1000) / 10);
    snprintf(buf, len, "cuda %d.%d; driver %s; gpu %s", rt / 1000, (rt % 1000) / 10, dv, gpu);
}

void *ccu_dense_host(const cc_view *v)
{
    int64_t n = cc_view_numel(v);
    void *p = malloc((size_t)(n > 0 ? n : 1) * cc_dtype_size(v->dtype));
    if (p)
        cc_view_pack(v, p);
    return p;
}
