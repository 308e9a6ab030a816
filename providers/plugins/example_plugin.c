/* A minimal capcheck provider plugin: add and relu, forward and VJP, float32 and float64, on
 * the CPU. Everything else answers CC_UNSUPPORTED. It depends on nothing but
 * abi/capcheck_provider.h (and the ref_params record it includes), which is the whole plugin ABI,
 * and the header-only view helpers of providers/plugins/plugin_views.h; it calls no capcheck
 * function (the host exports none to plugins):
 *
 *     cc -std=c11 -O2 -fPIC -shared -I<capcheck> example_plugin.c -o example_plugin.so
 *     capcheck run --provider-lib ./example_plugin.so --op add
 *
 * The harness owns every buffer. Inputs are strided views in the case dtype (strides in
 * elements, 0 on a broadcast axis, gaps of a strided buffer hold NaN: never read outside the
 * view); outputs and gradients are dense row-major buffers whose shapes the harness preset. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "providers/plugins/plugin_views.h"
#include "abi/capcheck_provider.h"

static int same_shape(const cc_view *a, const cc_view *b)
{
    return a->rank == b->rank &&
           memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->rank) == 0;
}

/* The ops and dtypes this plugin implements; a sentence in msg otherwise. */
static cc_status supported(const cc_call *call, char *msg, size_t len)
{
    if (call->device != CC_CPU) {
        snprintf(msg, len, "the example plugin runs on the CPU only");
        return CC_UNSUPPORTED;
    }
    if (call->dtype != CC_F32 && call->dtype != CC_F64) {
        snprintf(msg, len, "the example plugin has f32 and f64 only");
        return CC_UNSUPPORTED;
    }
    if (strcmp(call->op, "add") == 0) {
        if (call->n_in != 2 || !same_shape(&call->in[0], &call->in[1])) {
            snprintf(msg, len, "add wants two inputs of the same shape");
            return CC_FAILED;
        }
        return CC_OK;
    }
    if (strcmp(call->op, "relu") == 0)
        return call->n_in == 1 ? CC_OK : (snprintf(msg, len, "relu has one input"), CC_FAILED);
    snprintf(msg, len, "the example plugin implements add and relu only, not %s", call->op);
    return CC_UNSUPPORTED;
}

static cc_status ex_init(void *ctx, cc_device device, char *msg, size_t len)
{
    (void)ctx;
    if (device != CC_CPU) {
        snprintf(msg, len, "the example plugin runs on the CPU only");
        return CC_UNSUPPORTED;
    }
    return CC_OK;
}

/* add: y = a + b.  relu: y = x if x > 0, NaN stays NaN, else +0. */
static cc_status ex_forward(void *ctx, const cc_call *call, cc_view *out, char *msg, size_t len)
{
    (void)ctx;
    cc_status st = supported(call, msg, len);
    if (st != CC_OK)
        return st;
    int64_t n = cc_plugin_numel(out);
    int is_add = strcmp(call->op, "add") == 0;
    for (int64_t i = 0; i < n; i++) {
        double x = cc_plugin_load(&call->in[0], i);
        double y = is_add ? (double)(call->dtype == CC_F32
                                         ? (float)x + (float)cc_plugin_load(&call->in[1], i)
                                         : x + cc_plugin_load(&call->in[1], i))
                          : (isnan(x) ? x : (x > 0 ? x : 0.0));
        cc_plugin_store(out, i, y);
    }
    return CC_OK;
}

/* add: da = g, db = g.  relu: dx = g where x > 0, else 0 (a select: NaN/Inf g at x <= 0 -> 0).
 * grads[i].data is NULL for an input that is not differentiated. */
static cc_status ex_vjp(void *ctx, const cc_call *call, const cc_view *g, cc_view *grads,
                        char *msg, size_t len)
{
    (void)ctx;
    cc_status st = supported(call, msg, len);
    if (st != CC_OK)
        return st;
    int64_t n = cc_plugin_numel(g);
    int is_add = strcmp(call->op, "add") == 0;
    for (int64_t i = 0; i < n; i++) {
        double gi = cc_plugin_load(g, i);
        if (is_add) {
            for (int k = 0; k < 2; k++)
                if (grads[k].data)
                    cc_plugin_store(&grads[k], i, gi);
        } else if (grads[0].data) {
            cc_plugin_store(&grads[0], i, cc_plugin_load(&call->in[0], i) > 0 ? gi : 0.0);
        }
    }
    return CC_OK;
}

static void ex_describe(void *ctx, char *buf, size_t len)
{
    (void)ctx;
    snprintf(buf, len, "capcheck example plugin (add, relu; f32/f64; cpu), ABI %d",
             CC_PROVIDER_ABI_VERSION);
}

static const char *ex_vjp_mode(void *ctx, const char *op)
{
    (void)ctx;
    return strcmp(op, "add") == 0 || strcmp(op, "relu") == 0 ? "backendVJP" : NULL;
}

/* The one exported symbol (see cc_provider_entry_fn). */
__attribute__((visibility("default"))) const cc_provider *capcheck_provider_v1(void)
{
    static const cc_provider p = {CC_PROVIDER_ABI_VERSION, "example", NULL, ex_init,
                                  ex_forward, ex_vjp, ex_describe, ex_vjp_mode, NULL};
    return &p;
}
