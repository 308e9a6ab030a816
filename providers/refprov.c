/* The reference adapter: the float64 reference behind the provider ABI. It reads the strided
 * views, computes in float64 and rounds each output once to the case dtype — the most accurate
 * provider possible, so it must pass every case with a bound ratio near 0. Tests wrap it to
 * plant bugs, and it lets the harness run without libtorch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/view.h"
#include "abi/capcheck_provider.h"

static void store_dense(const double *x, cc_view *out)
{
    int64_t n = 1;
    for (int i = 0; i < out->rank; i++)
        n *= out->shape[i];
    for (int64_t i = 0; i < n; i++)
        cc_store(out->dtype, out->data, i, x[i]);
}

typedef struct {
    const ref_op *op;
    ref_tensor in[REF_MAX_INPUTS];
    ref_tensor y;
} ref_call;

static void ref_call_free(ref_call *rc)
{
    for (int i = 0; i < REF_MAX_INPUTS; i++)
        free(rc->in[i].v);
    free(rc->y.v);
}

static cc_status ref_call_forward(const cc_call *call, ref_call *rc, char *msg, size_t len)
{
    memset(rc, 0, sizeof *rc);
    rc->op = ref_op_find(call->op);
    if (!rc->op) {
        snprintf(msg, len, "the reference has no op %s", call->op);
        return CC_UNSUPPORTED;
    }
    ref_shape shapes[REF_MAX_INPUTS];
    for (int i = 0; i < call->n_in; i++) {
        rc->in[i].v = cc_view_to_dense(&call->in[i], &rc->in[i].shape);
        shapes[i] = rc->in[i].shape;
        if (!rc->in[i].v)
            return CC_FAILED;
    }
    ref_err e = {{0}};
    if (rc->op->shape(call->params, call->n_in, shapes, &rc->y.shape, &e) != REF_OK) {
        snprintf(msg, len, "%s", e.msg);
        return CC_FAILED;
    }
    int64_t n = ref_numel(&rc->y.shape);
    rc->y.v = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (!rc->y.v)
        return CC_FAILED;
    ref_status st = rc->op->forward(call->params, call->n_in, rc->in, &rc->y, NULL);
    if (st != REF_OK) {
        snprintf(msg, len, "reference forward of %s failed (status %d)", call->op, (int)st);
        return CC_FAILED;
    }
    return CC_OK;
}

static cc_status refprov_init(void *ctx, cc_device device, char *msg, size_t len)
{
    (void)ctx;
    if (device != CC_CPU) {
        snprintf(msg, len, "the reference provider runs on the CPU only");
        return CC_UNSUPPORTED;
    }
    return CC_OK;
}

static cc_status refprov_forward(void *ctx, const cc_call *call, cc_view *out, char *msg,
                                 size_t len)
{
    (void)ctx;
    ref_call rc;
    cc_status st = ref_call_forward(call, &rc, msg, len);
    if (st == CC_OK)
        store_dense(rc.y.v, out);
    ref_call_free(&rc);
    return st;
}

static cc_status refprov_vjp(void *ctx, const cc_call *call, const cc_view *g, cc_view *grads,
                             char *msg, size_t len)
{
    (void)ctx;
    ref_call rc;
    cc_status st = ref_call_forward(call, &rc, msg, len);
    ref_tensor gt = {{0}, NULL}, grad[REF_MAX_INPUTS];
    memset(grad, 0, sizeof grad);
    if (st != CC_OK)
        goto done;
    if (!rc.op->vjp) {
        snprintf(msg, len, "the reference has no VJP for %s", call->op);
        st = CC_UNSUPPORTED;
        goto done;
    }
    gt.v = cc_view_to_dense(g, &gt.shape);
    for (int i = 0; i < call->n_in; i++) {
        grad[i].shape = rc.in[i].shape;
        if (grads[i].data) {
            int64_t n = ref_numel(&grad[i].shape);
            grad[i].v = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
        }
    }
    if (rc.op->vjp(call->params, call->n_in, rc.in, &rc.y, &gt, grad, NULL) != REF_OK) {
        snprintf(msg, len, "reference VJP of %s failed", call->op);
        st = CC_FAILED;
        goto done;
    }
    for (int i = 0; i < call->n_in; i++)
        if (grads[i].data && grad[i].v)
            store_dense(grad[i].v, &grads[i]);
done:
    free(gt.v);
    for (int i = 0; i < REF_MAX_INPUTS; i++)
        free(grad[i].v);
    ref_call_free(&rc);
    return st;
}

static void refprov_describe(void *ctx, char *buf, size_t len)
{
    (void)ctx;
    snprintf(buf, len, "capcheck float64 reference, outputs rounded once to the case dtype");
}

static const char *refprov_vjp_mode(void *ctx, const char *op)
{
    (void)ctx;
    const ref_op *o = ref_op_find(op);
    return !o ? NULL : (o->vjp ? "torchLeanTape" : "none");
}

const cc_provider *cc_reference_provider(void)
{
    static const cc_provider p = {CC_PROVIDER_ABI_VERSION, "reference", NULL, refprov_init,
                                  refprov_forward, refprov_vjp, refprov_describe,
                                  refprov_vjp_mode, NULL};
    return &p;
}
