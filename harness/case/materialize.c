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

static void fill_nan(cc_dtype t, void *buf, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        cc_store(t, buf, i, cc_dtype_is_float(t) ? NAN : 0);
}

/* A dense output view of shape s over `data`, NaN-filled; -1 when data is NULL. */
static int dense_output(cc_dtype t, const ref_shape *s, void *data, cc_view *out)
{
    memset(out, 0, sizeof *out);
    out->dtype = t;
    out->rank = s->rank;
    memcpy(out->shape, s->dim, sizeof(int64_t) * (size_t)s->rank);
    cc_dense_strides(s, out->strides);
    out->data = data;
    if (!data)
        return -1;
    fill_nan(t, data, ref_numel(s));
    return 0;
}

int cc_alloc_output(cc_dtype t, const ref_shape *s, cc_view *out)
{
    return dense_output(t, s, alloc_elems(t, ref_numel(s)), out);
}

int cc_alloc_output_in(cc_inputs *in, const char *name, cc_dtype t, const ref_shape *s,
                       cc_view *out)
{
    size_t bytes = (size_t)ref_numel(s) * cc_dtype_size(t);
    return dense_output(t, s, cc_guard_alloc(&in->mem, bytes, name), out);
}

/* The strides, the offset of element [0,...,0] and the buffer length (elements) of layout l for
 * shape s. */
static void layout_geometry(const cc_input_layout *l, const ref_shape *s, int64_t *strides,
                            int64_t *offset, int64_t *phys)
{
    int r = s->rank;
    int64_t n = ref_numel(s);
    cc_dense_strides(s, strides);
    *offset = 0;
    *phys = n;
    if (l->kind == CC_LAYOUT_TRANSPOSE && r >= 2) {
        /* the buffer is row-major in (..., d[r-1], d[r-2]); the view swaps the last two axes */
        ref_shape ps = *s;
        ps.dim[r - 2] = s->dim[r - 1];
        ps.dim[r - 1] = s->dim[r - 2];
        int64_t pst[REF_MAX_RANK];
        cc_dense_strides(&ps, pst);
        memcpy(strides, pst, sizeof(int64_t) * (size_t)r);
        strides[r - 2] = pst[r - 1];
        strides[r - 1] = pst[r - 2];
    } else if (l->kind == CC_LAYOUT_STRIDE2 && r >= 1) {
        for (int i = 0; i < r; i++)
            strides[i] *= 2;
        *phys = 2 * n;
    } else if (l->kind == CC_LAYOUT_BCAST && r >= 2 && s->dim[0] > 1) {
        strides[0] = 0; /* values were drawn constant along axis 0 */
        *phys = n / s->dim[0];
    } else if (l->kind == CC_LAYOUT_CHLAST && r >= 2) {
        /* axis 0 innermost, the others row-major outside it */
        int64_t st = s->dim[0] > 0 ? s->dim[0] : 1;
        strides[0] = 1;
        for (int a = r - 1; a >= 1; a--) {
            strides[a] = st;
            st *= s->dim[a] > 0 ? s->dim[a] : 1;
        }
    } else if (l->kind == CC_LAYOUT_SLICED) {
        /* x[1:, ..., 1:-1] of a buffer one row longer on axis 0 and two wider on the last axis
         * (rank 1: x[1:-1]; a scalar: the middle one of three) */
        ref_shape ps = *s;
        if (r == 0) {
            *offset = 1;
            *phys = 3;
            return;
        }
        ps.dim[r - 1] += 2;
        if (r >= 2)
            ps.dim[0] += 1;
        int64_t total = 1;
        for (int a = 0; a < r; a++)
            total *= ps.dim[a] > 0 ? ps.dim[a] : 1;
        cc_dense_strides(&ps, strides);
        *offset = 1 + (r >= 2 ? strides[0] : 0);
        *phys = total;
    } else if (l->kind == CC_LAYOUT_STRIDED) {
        memcpy(strides, l->strides, sizeof(int64_t) * (size_t)r);
        *offset = l->offset;
        int64_t span = 0;
        for (int a = 0; a < r; a++)
            span += (s->dim[a] - 1) * strides[a];
        *phys = n > 0 ? l->offset + span + 1 : l->offset;
    }
}

/* Lay out dense values x (shape s) in layout l: a buffer from the case's set holding NaN (0 for
 * integers) in its gaps, and the view into it. */
static int lay_out(const cc_input_layout *l, cc_dtype t, const ref_shape *s, const double *x,
                   cc_inputs *in, const char *name, cc_view *v, void **storage, int64_t *len,
                   int64_t *offset)
{
    int r = s->rank;
    int64_t n = ref_numel(s), phys;
    memset(v, 0, sizeof *v);
    v->dtype = t;
    v->rank = r;
    memcpy(v->shape, s->dim, sizeof(int64_t) * (size_t)r);
    layout_geometry(l, s, v->strides, offset, &phys);
    *len = phys;
    *storage = cc_guard_alloc(&in->mem, (size_t)phys * cc_dtype_size(t), name);
    if (!*storage)
        return -1;
    /* gaps of a strided buffer hold NaN (or 0 for integers): a provider that ignores strides
     * reads them and fails loudly */
    fill_nan(t, *storage, phys);
    v->data = (char *)*storage + (size_t)*offset * cc_dtype_size(t);
    int64_t idx[REF_MAX_RANK] = {0};
    for (int64_t j = 0; j < n; j++) {
        int64_t off = 0;
        for (int a = 0; a < r; a++)
            off += idx[a] * v->strides[a];
        cc_store(t, v->data, off, x[j]);
        for (int a = r - 1; a >= 0; a--) {
            if (++idx[a] < s->dim[a])
                break;
            idx[a] = 0;
        }
    }
    cc_guard_seal(&in->mem, *storage);
    return 0;
}

/* 1 when layout l aliases elements (a stride-0 axis of extent > 1): what the provider sees is
 * then the buffer, read back, not the values as drawn. */
static int aliases(const cc_input_layout *l, const ref_shape *s)
{
    for (int a = 0; l->kind == CC_LAYOUT_STRIDED && a < s->rank; a++)
        if (l->strides[a] == 0 && s->dim[a] > 1)
            return 1;
    return 0;
}

const char *cc_input_name(const ref_op *op, int i)
{
    int k = i < op->max_inputs ? i : op->max_inputs - 1;
    if (k >= REF_MAX_INPUTS)
        k = REF_MAX_INPUTS - 1;
    return op->input_names[k] ? op->input_names[k] : "x";
}

int cc_materialize(const cc_case *c, cc_inputs *in, char *msg, size_t msg_len)
{
    return cc_materialize_in(c, 0, NULL, CC_PLACE_END, in, msg, msg_len);
}

int cc_materialize_in(const cc_case *c, int guarded, cc_guard_cache *cache,
                      cc_guard_place place, cc_inputs *in, char *msg, size_t msg_len)
{
    memset(in, 0, sizeof *in);
    cc_guard_set_init(&in->mem, guarded);
    in->mem.cache = cache;
    in->mem.place = place;
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
        cc_input_layout lay = cc_case_input_layout(c, i);
        int bcast = lay.kind == CC_LAYOUT_BCAST && s->rank >= 2 && s->dim[0] > 1;
        int64_t distinct = bcast ? n / s->dim[0] : n;
        cc_draw_values(&d, cc_input_key(c->seed, i), distinct, x);
        cc_edge_inject(c, i, &d, s, x, distinct);
        for (int64_t j = distinct; j < n; j++)
            x[j] = x[j % distinct];
        cc_dtype t = cc_input_dtype(c, i);
        if (cc_dtype_is_float(t))
            for (int64_t j = 0; j < n; j++)
                x[j] = cc_round_to(t, x[j]);
        char name[40];
        snprintf(name, sizeof name, "input %s", cc_input_name(c->op, i));
        if (lay_out(&lay, t, s, x, in, name, &in->view[i], &in->storage[i], &in->storage_len[i],
                    &in->offset[i]))
            goto oom;
        if (aliases(&lay, s)) { /* the reference gets what the provider sees */
            ref_shape same;
            double *seen = cc_view_to_dense(&in->view[i], &same);
            if (!seen)
                goto oom;
            free(x);
            in->ref_in[i].v = seen;
        }
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
    cc_input_layout dense;
    memset(&dense, 0, sizeof dense);
    int64_t g_len, g_off;
    if (lay_out(&dense, c->dtype, &in->out_shape, in->g.v, in, "the cotangent g", &in->g_view,
                &in->g_storage, &g_len, &g_off))
        goto oom;
    return 0;
oom:
    snprintf(msg, msg_len, "out of memory materializing the inputs");
    cc_inputs_free(in);
    return -1;
}

/* A copy of `bytes` at old in a new buffer of the set (at its current placement), read-only. */
static void *moved(cc_inputs *in, void *old, size_t bytes)
{
    char name[40] = "";
    for (int k = 0; k < in->mem.n; k++)
        if (in->mem.b[k].data == old)
            snprintf(name, sizeof name, "%s", in->mem.b[k].name);
    void *now = cc_guard_alloc(&in->mem, bytes, name);
    if (!now)
        return NULL;
    memcpy(now, old, bytes);
    cc_guard_seal(&in->mem, now);
    cc_guard_free(&in->mem, old);
    return now;
}

int cc_inputs_replace(const cc_case *c, cc_inputs *in, cc_guard_place place)
{
    in->mem.place = place;
    for (int i = 0; i < c->n_in; i++) {
        size_t es = cc_dtype_size(in->view[i].dtype);
        void *now = moved(in, in->storage[i], (size_t)in->storage_len[i] * es);
        if (!now)
            return -1;
        in->storage[i] = now;
        in->view[i].data = (char *)now + (size_t)in->offset[i] * es;
    }
    void *g = moved(in, in->g_storage, (size_t)ref_numel(&in->out_shape) * cc_dtype_size(c->dtype));
    if (!g)
        return -1;
    in->g_storage = in->g_view.data = g;
    return 0;
}

void cc_inputs_free(cc_inputs *in)
{
    for (int i = 0; i < REF_MAX_INPUTS; i++)
        free(in->ref_in[i].v);
    free(in->g.v);
    cc_guard_free_all(&in->mem);
    memset(in, 0, sizeof *in);
}
