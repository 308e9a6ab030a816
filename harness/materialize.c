#include "harness/materialize.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/dtype.h"
#include "harness/edges.h"
#include "harness/values.h"
#include "reference/ref_parallel.h"

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

void cc_dense_strides(const ref_shape *s, int64_t *strides)
{
    int64_t st = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        strides[i] = st;
        st *= s->dim[i] > 0 ? s->dim[i] : 1;
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
    cc_fill_nan(t, out->data, n);
    return 0;
}

/* The transposed layout's store: batch matrices [rows, cols] of x into a buffer of
 * [cols, rows] matrices, in tiles so both sides are read and written along their rows. */
static void store_transposed(cc_dtype t, void *buf, const double *x, int64_t batches,
                             int64_t rows, int64_t cols)
{
    enum { TILE = 32 };
    for (int64_t b = 0; b < batches; b++)
        for (int64_t r0 = 0; r0 < rows; r0 += TILE)
            for (int64_t c0 = 0; c0 < cols; c0 += TILE) {
                int64_t r1 = r0 + TILE < rows ? r0 + TILE : rows;
                int64_t c1 = c0 + TILE < cols ? c0 + TILE : cols;
                for (int64_t r = r0; r < r1; r++) /* x[b, r, c0..c1) to buf[b, c, r] */
                    cc_store_array(t, buf, (b * cols + c0) * rows + r, rows,
                                   x + (b * rows + r) * cols + c0, c1 - c0);
            }
}

/* Lay out dense values x (shape s, already values of t) in layout l: choose the physical buffer
 * and strides, and store. Only the gaps of a strided buffer are left as NaN (or 0 for integers):
 * a provider that ignores strides reads them and fails loudly. */
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
        if (!(*storage = alloc_elems(t, n)))
            return -1;
        int64_t rows = s->dim[r - 2], cols = s->dim[r - 1];
        if (n > 0)
            store_transposed(t, *storage, x, n / (rows * cols), rows, cols);
    } else if (l == CC_LAYOUT_STRIDE2 && r >= 1) {
        for (int i = 0; i < r; i++)
            v->strides[i] *= 2;
        if (!(*storage = alloc_elems(t, 2 * n)))
            return -1;
        if (cc_dtype_is_float(t))
            cc_fill_nan(t, *storage, 2 * n);
        cc_store_array(t, *storage, 0, 2, x, n);
    } else if (l == CC_LAYOUT_BCAST && r >= 2 && s->dim[0] > 1) {
        /* values were drawn constant along axis 0: the buffer holds one slice */
        v->strides[0] = 0;
        if (!(*storage = alloc_elems(t, n / s->dim[0])))
            return -1;
        cc_store_array(t, *storage, 0, 1, x, n / s->dim[0]);
    } else {
        if (!(*storage = alloc_elems(t, n)))
            return -1;
        cc_store_array(t, *storage, 0, 1, x, n);
    }
    v->data = *storage;
    return 0;
}

/* Inputs drawn on several threads: each draws a range of the elements (a value depends on its
 * index alone, so the split changes nothing). */
typedef struct {
    const ref_domain *d;
    int stream;
    uint64_t key;
    double *x;
} draw_job;

static void draw_part(void *ctx, int64_t lo, int64_t hi)
{
    const draw_job *j = ctx;
    cc_draw_range(j->d, j->stream, j->key, lo, hi - lo, j->x + lo);
}

#define DRAW_GRAIN (INT64_C(1) << 16) /* elements per thread at least: below, one thread */

static void draw(const ref_domain *d, int stream, uint64_t key, int64_t n, int threads,
                 double *x)
{
    draw_job j = {d, stream, key, x};
    if (d->kind == REF_DOM_DISTINCT)
        cc_draw_range(d, stream, key, 0, n, x);
    else
        ref_parallel_for(threads, n, DRAW_GRAIN, draw_part, &j);
}

int cc_materialize(const cc_case *c, cc_inputs *in, char *msg, size_t msg_len)
{
    return cc_materialize_threads(c, 1, in, msg, msg_len);
}

int cc_materialize_threads(const cc_case *c, int threads, cc_inputs *in, char *msg,
                           size_t msg_len)
{
    memset(in, 0, sizeof *in);
    in->n_in = c->n_in;
    ref_err e = {{0}};
    if (c->op->shape(&c->params, c->n_in, c->shape, &in->out_shape, &e) != REF_OK) {
        snprintf(msg, msg_len, "%s", e.msg);
        return -1;
    }
    int stream = cc_case_stream(c);
    for (int i = 0; i < c->n_in; i++) {
        const ref_shape *s = &c->shape[i];
        int64_t n = ref_numel(s);
        ref_domain d;
        ref_default_domain(c->op, &c->params, c->n_in, c->shape, i, &d);
        double *x = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
        in->ref_in[i].shape = *s;
        in->ref_in[i].v = x;
        if (!x)
            goto oom;
        int bcast = c->layout == CC_LAYOUT_BCAST && s->rank >= 2 && s->dim[0] > 1;
        int64_t distinct = bcast ? n / s->dim[0] : n;
        draw(&d, stream, cc_input_key(c->seed, i), distinct, threads, x);
        cc_edge_inject(c, i, &d, s, x, distinct);
        cc_dtype t = cc_input_dtype(c, i);
        if (cc_dtype_is_float(t))
            cc_round_array(t, x, distinct);
        for (int64_t j = distinct; j < n; j += distinct) /* a broadcast axis 0: copies */
            memcpy(x + j, x, sizeof(double) * (size_t)distinct);
        if (lay_out(c->layout, t, s, x, &in->view[i], &in->storage[i]))
            goto oom;
    }
    int64_t ny = ref_numel(&in->out_shape);
    in->g.shape = in->out_shape;
    in->g.v = malloc(sizeof(double) * (size_t)(ny > 0 ? ny : 1));
    if (!in->g.v)
        goto oom;
    ref_domain normal = {REF_DOM_NORMAL, 0, 0, 0, {0, 0}, 0};
    draw(&normal, stream, cc_input_key(c->seed, COTANGENT_INPUT), ny, threads, in->g.v);
    cc_round_array(c->dtype, in->g.v, ny);
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

double *cc_view_to_dense(const cc_view *v, ref_shape *shape)
{
    shape->rank = v->rank;
    memcpy(shape->dim, v->shape, sizeof(int64_t) * (size_t)v->rank);
    int64_t n = ref_numel(shape);
    double *x = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!x)
        return NULL;
    if (n == 0)
        return x;
    if (v->rank == 0) {
        x[0] = cc_load(v->dtype, v->data, 0);
        return x;
    }
    /* a row (the last axis) at a time: its elements are `stride` apart */
    int last = v->rank - 1;
    int64_t len = v->shape[last], idx[REF_MAX_RANK] = {0};
    for (int64_t j = 0; j < n; j += len) {
        int64_t off = 0;
        for (int a = 0; a < last; a++)
            off += idx[a] * v->strides[a];
        cc_load_array(v->dtype, v->data, off, v->strides[last], x + j, len);
        for (int a = last - 1; a >= 0; a--) {
            if (++idx[a] < v->shape[a])
                break;
            idx[a] = 0;
        }
    }
    return x;
}
