/* A plugin built against provider ABI version 1, whose table ends at vjp_mode: the loader must
 * accept it and read nothing past that field (the loaded table's compute_roundoff is NULL). The
 * table sits in a larger object whose next member is a non-NULL function pointer, so a loader
 * that copied a whole version-2 table would pick that pointer up as compute_roundoff, and the
 * test sees it. Implements neg in f64 on any strided view. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "abi/capcheck_provider.h"

typedef struct { /* abi/capcheck_provider.h's cc_provider as ABI version 1 defined it */
    int abi_version;
    const char *name;
    void *ctx;
    cc_status (*init)(void *ctx, cc_device device, char *msg, size_t msg_len);
    cc_status (*forward)(void *ctx, const cc_call *call, cc_view *out, char *msg, size_t msg_len);
    cc_status (*vjp)(void *ctx, const cc_call *call, const cc_view *g, cc_view *grads, char *msg,
                     size_t msg_len);
    void (*describe)(void *ctx, char *buf, size_t buf_len);
    const char *(*vjp_mode)(void *ctx, const char *op);
} provider_v1;

static double not_a_roundoff(void *ctx, const char *op, cc_dtype t, cc_device d)
{
    (void)ctx;
    (void)op;
    (void)t;
    (void)d;
    return 0x1p-8;
}

static cc_status v1_forward(void *ctx, const cc_call *call, cc_view *out, char *msg, size_t len)
{
    (void)ctx;
    if (!call->op || call->op[0] != 'n' || call->op[1] != 'e' || call->op[2] != 'g' ||
        call->op[3] || call->dtype != CC_F64 || call->n_in != 1) {
        snprintf(msg, len, "the abi-v1 plugin has only neg in f64");
        return CC_UNSUPPORTED;
    }
    const cc_view *x = &call->in[0];
    int64_t n = 1;
    for (int d = 0; d < x->rank; d++)
        n *= x->shape[d];
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0, rest = i;
        for (int d = x->rank - 1; d >= 0; d--) {
            off += (rest % x->shape[d]) * x->strides[d];
            rest /= x->shape[d];
        }
        ((double *)out->data)[i] = -((const double *)x->data)[off];
    }
    return CC_OK;
}

static const struct {
    provider_v1 table;
    double (*after)(void *, const char *, cc_dtype, cc_device);
} kPlugin = {{1, "abi-v1", NULL, NULL, v1_forward, NULL, NULL, NULL}, not_a_roundoff};

__attribute__((visibility("default"))) const cc_provider *capcheck_provider_v1(void)
{
    return (const cc_provider *)(const void *)&kPlugin.table;
}
