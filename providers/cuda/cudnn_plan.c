/* Pooling and batchNorm plans of the cuDNN provider (see the header). */
#include "providers/provider_util.h"
#include "providers/cuda/cudnn_plan.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/dtype.h"

/* ---- pooling --------------------------------------------------------------------------------- */

cc_status ccu_pool_plan_make(const cc_call *call, ccu_pool_plan *pl, char *msg, size_t len)
{
    memset(pl, 0, sizeof *pl);
    if (!call || !call->op)
        return cc_say(msg, len, CC_FAILED, "pooling: NULL call");
    const char *op = call->op;
    pl->is_max = !strcmp(op, "maxPool") || !strcmp(op, "max_pool");
    if (!pl->is_max && strcmp(op, "avgPool") && strcmp(op, "avg_pool"))
        return cc_say(msg, len, CC_FAILED, "internal: %s is not a pooling", op);
    const ref_params *p = call->params;
    if (!p || call->n_in != 1 || !call->in)
        return cc_say(msg, len, CC_FAILED, "%s takes one input x [C, spatial...]", op);
    const cc_view *x = &call->in[0];
    int sr = pl->sr = p->spatial;
    if (sr < 1 || sr > 3 || x->rank != sr + 1)
        return cc_say(msg, len, CC_FAILED, "%s wants x [C, %d spatial axes]", op, sr);
    pl->C = x->shape[0];
    pl->nin = pl->nout = pl->K = 1;
    int empty = pl->C == 0;
    for (int a = 0; a < sr; a++) {
        int64_t in = x->shape[a + 1], k = p->kernel[a], s = p->stride[a], pd = p->pad[a];
        if (in < 0 || k < 0 || s < 1 || pd < 0)
            return cc_say(msg, len, CC_FAILED, "%s: bad window geometry on axis %d", op, a);
        if (p->dil[a] != 1)
            return cc_say(msg, len, CC_UNSUPPORTED, "%s: cuDNN pooling has no dilation (dil[%d] = "
                       "%lld; the contract's pools have dilation 1)", op, a, (long long)p->dil[a]);
        int64_t o = in == 0 || k == 0 || pd > k / 2 || in + 2 * pd < k ? 0
                                                                       : (in + 2 * pd - k) / s + 1;
        pl->in[a] = in, pl->k[a] = k, pl->s[a] = s, pl->p[a] = pd, pl->out[a] = o;
        pl->nin *= in, pl->nout *= o, pl->K *= k;
        if (o == 0)
            empty = 1;
    }
    pl->empty = empty;
    if (empty)
        return CC_OK;
    int lead = sr == 1; /* rank 1 runs as rank 2: [1, C, 1, L] */
    pl->nd = sr == 3 ? 5 : 4;
    if (!cc_fits_int(pl->C))
        return cc_say(msg, len, CC_UNSUPPORTED, "%s: extents exceed cuDNN's int", op);
    pl->x_dims[0] = pl->y_dims[0] = 1;
    pl->x_dims[1] = pl->y_dims[1] = (int)pl->C;
    for (int d = 0; d < pl->nd - 2; d++) {
        int a = d - lead; /* the op's axis, -1 for the unit leading axis */
        int64_t in = a < 0 ? 1 : pl->in[a], o = a < 0 ? 1 : pl->out[a];
        int64_t k = a < 0 ? 1 : pl->k[a], s = a < 0 ? 1 : pl->s[a], pd = a < 0 ? 0 : pl->p[a];
        if (!cc_fits_int(in) || !cc_fits_int(o) || !cc_fits_int(k) || !cc_fits_int(s) || !cc_fits_int(pd))
            return cc_say(msg, len, CC_UNSUPPORTED, "%s: extents exceed cuDNN's int", op);
        pl->x_dims[d + 2] = (int)in, pl->y_dims[d + 2] = (int)o;
        pl->window[d] = (int)k, pl->stride[d] = (int)s, pl->pad[d] = (int)pd;
    }
    return CC_OK;
}

/* Advance a row-major multi-index over ext[0..r); 0 after the last. */
static int next_index(int64_t *idx, const int64_t *ext, int r)
{
    for (int a = r - 1; a >= 0; a--) {
        if (++idx[a] < ext[a])
            return 1;
        idx[a] = 0;
    }
    return 0;
}

void ccu_maxpool_scan_x(const ccu_pool_plan *pl, cc_dtype t, const void *x, ccu_maxpool_scan *s)
{
    memset(s, 0, sizeof *s);
    if (pl->empty)
        return;
    int sr = pl->sr;
    for (int64_t c = 0; c < pl->C; c++) {
        int64_t o[3] = {0, 0, 0};
        do {
            double best = -INFINITY;
            int64_t real = 0, at_best = 0, nan = 0;
            int64_t j[3] = {0, 0, 0};
            do {
                int64_t cell = 0, inside = 1;
                for (int a = 0; a < sr; a++) {
                    int64_t i = o[a] * pl->s[a] + j[a] - pl->p[a];
                    inside &= i >= 0 && i < pl->in[a];
                    cell = cell * pl->in[a] + i;
                }
                if (!inside)
                    continue; /* a padded cell */
                double v = cc_load(t, x, c * pl->nin + cell);
                real++;
                if (isnan(v))
                    nan++;
                else if (v > best || at_best == 0)
                    best = v, at_best = 1;
                else if (v == best)
                    at_best++;
            } while (next_index(j, pl->k, sr));
            if (nan)
                s->nan_windows++;
            else if (real > 0 && best == -INFINITY)
                s->neg_inf_windows++;
            else if (at_best >= 2)
                s->tie_windows++;
        } while (next_index(o, pl->out, sr));
    }
}

cc_status ccu_maxpool_expressible(const ccu_pool_plan *pl, cc_dtype t, const void *x, int vjp,
                                  char *msg, size_t len)
{
    ccu_maxpool_scan s;
    ccu_maxpool_scan_x(pl, t, x, &s);
    if (s.nan_windows)
        return cc_say(msg, len, CC_UNSUPPORTED, "maxPool: %lld window(s) hold a NaN, and cuDNN does "
                   "not state where a NaN ranks in max pooling (the contract keeps a NaN only in a "
                   "window's first real cell)", (long long)s.nan_windows);
    if (s.neg_inf_windows)
        return cc_say(msg, len, CC_UNSUPPORTED, "maxPool: %lld window(s) hold only -inf, and cuDNN "
                   "does not state what such a window gives", (long long)s.neg_inf_windows);
    if (vjp && s.tie_windows)
        return cc_say(msg, len, CC_UNSUPPORTED, "maxPool VJP: %lld window(s) have a tied maximum, "
                   "and cuDNN does not state which tied cell takes the gradient (the contract: "
                   "the first in row-major order)", (long long)s.tie_windows);
    return CC_OK;
}

/* ---- batchNorm ------------------------------------------------------------------------------ */

cc_status ccu_bn_plan_make(const cc_call *call, ccu_bn_plan *pl, char *msg, size_t len)
{
    memset(pl, 0, sizeof *pl);
    const ref_params *p = call ? call->params : NULL;
    if (!p || !call->in)
        return cc_say(msg, len, CC_FAILED, "batchNorm: NULL call or parameters");
    pl->training = p->training != 0;
    pl->eps = p->eps;
    int want = pl->training ? 3 : 5;
    if (call->n_in != want)
        return cc_say(msg, len, CC_FAILED, "batchNorm %s form takes %d inputs, the call has %d",
                   pl->training ? "training" : "eval", want, call->n_in);
    const cc_view *x = &call->in[0];
    if (x->rank < 1)
        return cc_say(msg, len, CC_FAILED, "batchNorm wants x [C, spatial...]");
    pl->C = x->shape[0];
    pl->N = 1;
    for (int a = 1; a < x->rank; a++)
        pl->N *= x->shape[a];
    for (int i = 1; i < want; i++)
        if (call->in[i].rank != 1 || call->in[i].shape[0] != pl->C)
            return cc_say(msg, len, CC_FAILED, "batchNorm input %d is not [C]", i);
    if (pl->training && pl->N == 0)
        return cc_say(msg, len, CC_FAILED, "batchNorm training form needs a position per channel");
    if (!(pl->eps >= 0) || !isfinite(pl->eps))
        return cc_say(msg, len, CC_FAILED, "batchNorm eps must be finite and >= 0");
    pl->empty = pl->C * pl->N == 0;
    if (pl->empty)
        return CC_OK;
    if (!cc_fits_int(pl->C) || !cc_fits_int(pl->N))
        return cc_say(msg, len, CC_UNSUPPORTED, "batchNorm: extents exceed cuDNN's int");
    pl->x_dims[0] = 1;
    pl->x_dims[1] = (int)pl->C;
    pl->x_dims[2] = (int)pl->N;
    pl->x_dims[3] = 1;
    return CC_OK;
}

void ccu_bn_clamp_variance(cc_dtype t, void *var, int64_t C)
{
    for (int64_t c = 0; c < C; c++)
        if (cc_load(t, var, c) < 0) /* false for NaN */
            cc_store(t, var, c, 0.0);
}
