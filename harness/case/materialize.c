#include "harness/case/materialize.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "harness/case/edges.h"
#include "harness/case/values.h"

#define COTANGENT_INPUT 100 /* the key index of the output cotangent's stream */

cc_dtype cc_input_dtype(const cc_case *c, int i)
{
    int k = i < c->op->max_inputs ? i : c->op->max_inputs - 1;
    if (k >= REF_MAX_INPUTS)
        k = REF_MAX_INPUTS - 1;
    switch (c->op->input_kind[k]) {
    case REF_IN_INDEX:
        return CC_I64;
    case REF_IN_MASK:
        return CC_U8;
    default:
        return c->dtype;
    }
}

static void *alloc_elems(cc_dtype t, int64_t n)
{
    return calloc((size_t)(n > 0 ? n : 1), cc_dtype_size(t));
}

int cc_alloc_output(cc_dtype t, const ref_shape *s, cc_view *out)
{
    memset(out, 0, sizeof *out);
    out->dtype = t;
    out->rank = s->rank;
    memcpy(out->shape, s->dim, sizeof(int64_t) * (size_t)s->rank);
    cc_dense_strides(s, out->strides);
    int64_t n = ref_numel(s);
    out->data = alloc_elems(t, n);
    if (!out->data)
        return -1;
    for (int64_t i = 0; i < n; i++)
        cc_store(t, out->data, i, cc_dtype_is_float(t) ? NAN : 0);
    return 0;
}

/* Lay out dense values x (shape s) in layout l: choose the physical buffer and strides. */
static int lay_out(cc_layout l, cc_dtype t, const ref_shape *s, const double *x, cc_view *v,
                   void **storage)
{
    int r = s->rank;
    int64_t n = ref_numel(s);
    memset(v, 0, sizeof *v);
    v->dtype = t;
    v->rank = r;
    memcpy(v->shape, s->dim, sizeof(int64_t) * (size_t)r);
    cc_dense_strides(s, v->strides);
    int64_t phys = n;
    if (l == CC_LAYOUT_TRANSPOSE && r >= 2) {
        /* the buffer is row-major in (..., d[r-1], d[r-2]); the view swaps the last two axes */
        ref_shape ps = *s;
        ps.dim[r - 2] = s->dim[r - 1];
        ps.dim[r - 1] = s->dim[r - 2];
        int64_t pst[REF_MAX_RANK];
        cc_dense_strides(&ps, pst);
        memcpy(v->strides, pst, sizeof(int64_t) * (size_t)r);
        v->strides[r - 2] = pst[r - 1];
        v->strides[r - 1] = pst[r - 2];
    } else if (l == CC_LAYOUT_STRIDE2 && r >= 1) {
        for (int i = 0; i < r; i++)
            v->strides[i] *= 2;
        phys = 2 * n;
    } else if (l == CC_LAYOUT_BCAST && r >= 2 && s->dim[0] > 1) {
        v->strides[0] = 0; /* values were drawn constant along axis 0 */
        phys = n / s->dim[0];
    }
    *storage = alloc_elems(t, phys);
    if (!*storage)
        return -1;
    /* gaps of a strided buffer hold NaN (or 0 for integers): a provider that ignores strides
     * reads them and fails loudly */
    for (int64_t i = 0; i < phys; i++)
        cc_store(t, *storage, i, cc_dtype_is_float(t) ? NAN : 0);
    v->data = *storage;
    int64_t idx[REF_MAX_RANK] = {0};
    for (int64_t j = 0; j < n; j++) {
        int64_t off = 0;
        for (int a = 0; a < r; a++)
            off += idx[a] * v->strides[a];
        cc_store(t, *storage, off, x[j]);
        for (int a = r - 1; a >= 0; a--) {
            if (++idx[a] < s->dim[a])
                break;
            idx[a] = 0;
        }
    }
    return 0;
}

int cc_materialize(const cc_case *c, cc_inputs *in, char *msg, size_t msg_len)
{
    memset(in, 0, sizeof *in);
    in->n_in = c->n_in;
    ref_err e = {{0}};
    if (c->op->shape(&c->params, c->n_in, c->shape, &in->out_shape, &e) != REF_OK) {
        snprintf(msg, msg_len, "%s", e.msg);
        return -1;
    }
    for (int i = 0; i < c->n_in; i++) {
        const ref_shape *s = &c->shape[i];
        int64_t n = ref_numel(s);
        ref_domain d;
        ref_default_domain(c->op, &c->params, c->n_in, c->shape, i, &d);
        double *x = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
        in->ref_in[i].shape = *s;
        in->ref_in[i].v = x;
        if (!x)
            goto oom;
        int bcast = c->layout == CC_LAYOUT_BCAST && s->rank >= 2 && s->dim[0] > 1;
        int64_t distinct = bcast ? n / s->dim[0] : n;
        cc_draw_values(&d, cc_input_key(c->seed, i), distinct, x);
        cc_edge_inject(c, i, &d, s, x, distinct);
        for (int64_t j = distinct; j < n; j++)
            x[j] = x[j % distinct];
        cc_dtype t = cc_input_dtype(c, i);
        if (cc_dtype_is_float(t))
            for (int64_t j = 0; j < n; j++)
                x[j] = cc_round_to(t, x[j]);
        if (lay_out(c->layout, t, s, x, &in->view[i], &in->storage[i]))
            goto oom;
    }
    int64_t ny = ref_numel(&in->out_shape);
    in->g.shape = in->out_shape;
    in->g.v = calloc((size_t)(ny > 0 ? ny : 1), sizeof(double));
    if (!in->g.v)
        goto oom;
    ref_domain normal = {REF_DOM_NORMAL, 0, 0, 0, {0, 0}, 0};
    cc_draw_values(&normal, cc_input_key(c->seed, COTANGENT_INPUT), ny, in->g.v);
    for (int64_t j = 0; j < ny; j++)
        in->g.v[j] = cc_round_to(c->dtype, in->g.v[j]);
    if (lay_out(CC_LAYOUT_CONTIG, c->dtype, &in->out_shape, in->g.v, &in->g_view,
                &in->g_storage))
        goto oom;
    return 0;
oom:
    snprintf(msg, msg_len, "out of memory materializing the inputs");
    cc_inputs_free(in);
    return -1;
}

void cc_inputs_free(cc_inputs *in)
{
    for (int i = 0; i < REF_MAX_INPUTS; i++) {
        free(in->ref_in[i].v);
        free(in->storage[i]);
    }
    free(in->g.v);
    free(in->g_storage);
    memset(in, 0, sizeof *in);
}
