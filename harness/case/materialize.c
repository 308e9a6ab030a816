#include "harness/case/materialize.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bulk.h"
#include "core/dtype.h"
#include "core/view.h"
#include "harness/case/edges.h"
#include "harness/case/values.h"
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

/* Every buffer of a provider's: written in full by whoever asks for it. */
static void *alloc_elems(cc_dtype t, int64_t n)
{
    return cc_alloc_big((size_t)(n > 0 ? n : 1) * cc_dtype_size(t));
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

/* How a tensor's values sit in its provider buffer. */
typedef enum { BUF_DENSE, BUF_TRANSPOSED, BUF_STRIDE2, BUF_SLICE /* bcast: one slice */ } buffer_kind;

/* The provider's view of a tensor of shape s in layout l: its strides and its buffer, with the
 * gaps of a strided buffer (and nothing else) set to NaN (0 for integers): a provider that
 * ignores strides reads them and fails loudly. The values are stored by store_layout. Returns
 * the buffer's kind, or -1 when out of memory. */
static int plan_layout(cc_layout l, cc_dtype t, const ref_shape *s, cc_view *v, void **storage)
{
    buffer_kind kind = BUF_DENSE;
    int r = s->rank;
    int64_t n = ref_numel(s), phys = n;
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
        kind = BUF_TRANSPOSED;
    } else if (l == CC_LAYOUT_STRIDE2 && r >= 1) {
        for (int i = 0; i < r; i++)
            v->strides[i] *= 2;
        phys = 2 * n;
        kind = BUF_STRIDE2;
    } else if (l == CC_LAYOUT_BCAST && r >= 2 && s->dim[0] > 1) {
        v->strides[0] = 0; /* values were drawn constant along axis 0: the buffer holds a slice */
        phys = n / s->dim[0];
        kind = BUF_SLICE;
    }
    if (!(*storage = alloc_elems(t, phys)))
        return -1;
    if (kind == BUF_STRIDE2) /* the gaps: NaN, or 0 for integers */
        cc_fill_nan(t, *storage, phys);
    v->data = *storage;
    return (int)kind;
}

/* Store dense values x (already values of the view's dtype) through the view. */
static void store_layout(buffer_kind kind, const cc_view *v, const double *x)
{
    int r = v->rank;
    int64_t n = 1;
    for (int a = 0; a < r; a++)
        n *= v->shape[a];
    if (n == 0)
        return;
    if (kind == BUF_TRANSPOSED) {
        int64_t rows = v->shape[r - 2], cols = v->shape[r - 1];
        store_transposed(v->dtype, v->data, x, n / (rows * cols), rows, cols);
    } else if (kind == BUF_STRIDE2) {
        cc_store_array(v->dtype, v->data, 0, 2, x, n);
    } else {
        cc_store_array(v->dtype, v->data, 0, 1, x, kind == BUF_SLICE ? n / v->shape[0] : n);
    }
}

/* Drawing an input: on several threads (a value depends on its index alone, so the split
 * changes nothing), a block at a time, each block drawn, rounded and, for a dense buffer,
 * stored while it is in the cache. Rounding waits when edge values are still to come. */
typedef struct {
    const ref_domain *d;
    int stream;
    uint64_t key;
    double *x;
    cc_dtype round_to; /* CC_DTYPE_COUNT: do not round yet */
    const cc_view *store; /* a dense buffer to store into, or NULL */
} draw_job;

#define DRAW_BLOCK 4096
#define DRAW_GRAIN (INT64_C(1) << 16) /* elements per thread at least: below, one thread */

static void draw_part(void *ctx, int64_t lo, int64_t hi)
{
    const draw_job *j = ctx;
    for (int64_t b = lo; b < hi; b += DRAW_BLOCK) {
        int64_t len = hi - b < DRAW_BLOCK ? hi - b : DRAW_BLOCK;
        cc_draw_range(j->d, j->stream, j->key, b, len, j->x + b);
        if (j->round_to != CC_DTYPE_COUNT)
            cc_round_array(j->round_to, j->x + b, len);
        if (j->store)
            cc_store_array(j->store->dtype, j->store->data, b, 1, j->x + b, len);
    }
}

/* x[0..n) of one tensor: drawn, edge values put in, rounded to t (a float dtype, or left as
 * drawn), replicated along a broadcast axis (n = distinct * copies) and stored through v. */
static void fill(const cc_case *c, int input, const ref_domain *d, const ref_shape *s,
                 int64_t distinct, cc_dtype t, buffer_kind kind, const cc_view *v, int threads,
                 double *x)
{
    int64_t n = ref_numel(s);
    int edges = input >= 0 && c->edges;
    int dense = kind == BUF_DENSE || kind == BUF_SLICE; /* the draw's order is the buffer's */
    draw_job j = {d, cc_case_stream(c), cc_input_key(c->seed, input >= 0 ? input : COTANGENT_INPUT),
                  x, cc_dtype_is_float(t) && !edges ? t : CC_DTYPE_COUNT,
                  !edges && dense ? v : NULL};
    if (d->kind == REF_DOM_DISTINCT) /* a permutation of the whole input */
        draw_part(&j, 0, distinct);
    else
        ref_parallel_for(threads, distinct, DRAW_GRAIN, draw_part, &j);
    if (edges) {
        cc_edge_inject(c, input, d, s, x, distinct);
        if (cc_dtype_is_float(t))
            cc_round_array(t, x, distinct);
    }
    for (int64_t k = distinct; k < n; k += distinct) /* a broadcast axis 0: copies */
        memcpy(x + k, x, sizeof(double) * (size_t)distinct);
    if (!j.store)
        store_layout(kind, v, x);
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
    for (int i = 0; i < c->n_in; i++) {
        const ref_shape *s = &c->shape[i];
        int64_t n = ref_numel(s);
        ref_domain d;
        ref_default_domain(c->op, &c->params, c->n_in, c->shape, i, &d);
        in->ref_in[i].shape = *s;
        in->ref_in[i].v = cc_alloc_big(sizeof(double) * (size_t)(n > 0 ? n : 1));
        cc_dtype t = cc_input_dtype(c, i);
        int kind = in->ref_in[i].v ? plan_layout(c->layout, t, s, &in->view[i], &in->storage[i])
                                   : -1;
        if (kind < 0)
            goto oom;
        fill(c, i, &d, s, kind == BUF_SLICE ? n / s->dim[0] : n, t, (buffer_kind)kind,
             &in->view[i], threads, in->ref_in[i].v);
    }
    int64_t ny = ref_numel(&in->out_shape);
    in->g.shape = in->out_shape;
    in->g.v = cc_alloc_big(sizeof(double) * (size_t)(ny > 0 ? ny : 1));
    if (!in->g.v ||
        plan_layout(CC_LAYOUT_CONTIG, c->dtype, &in->out_shape, &in->g_view, &in->g_storage) < 0)
        goto oom;
    ref_domain normal = {REF_DOM_NORMAL, 0, 0, 0, {0, 0}, 0};
    fill(c, -1, &normal, &in->out_shape, ny, c->dtype, BUF_DENSE, &in->g_view, threads, in->g.v);
    return 0;
oom:
    snprintf(msg, msg_len, "out of memory materializing the inputs");
    cc_inputs_free(in);
    return -1;
}

void cc_inputs_free(cc_inputs *in)
{
    for (int i = 0; i < REF_MAX_INPUTS; i++) {
        cc_free_big(in->ref_in[i].v);
        cc_free_big(in->storage[i]);
    }
    cc_free_big(in->g.v);
    cc_free_big(in->g_storage);
    memset(in, 0, sizeof *in);
}
