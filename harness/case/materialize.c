#include "harness/case/materialize.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bulk.h"
#include "core/dtype.h"
#include "core/text.h"
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
    cc_fill_nan(t, data, ref_numel(s));
    return 0;
}

int cc_alloc_output(cc_dtype t, const ref_shape *s, cc_view *out)
{
    int64_t n = ref_numel(s);
    return dense_output(t, s, cc_alloc_big((size_t)(n > 0 ? n : 1) * cc_dtype_size(t)), out);
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

/* How the values are stored through a view: dense values x in row-major order go to
 *   STORE_DENSE       the buffer's first m elements (m = every element, or one slice along a
 *                     broadcast axis 0: the values repeat along it), in one pass;
 *   STORE_TRANSPOSED  [rows, cols] matrices kept as [cols, rows] ones, in tiles;
 *   STORE_ROWS        anything else, a row (the last axis) at a time in row-major order, so an
 *                     element that several indices share (a stride 0) keeps the last value, as
 *                     an element-by-element store through the strides would. */
typedef enum { STORE_DENSE, STORE_TRANSPOSED, STORE_ROWS } store_kind;

static int strides_dense_from(const cc_view *v, int a0)
{
    int64_t st = 1;
    for (int a = v->rank - 1; a >= a0; a--) {
        if (v->shape[a] != 1 && v->strides[a] != st)
            return 0;
        st *= v->shape[a];
    }
    return 1;
}

/* bcast: the values repeat along axis 0 (the broadcast layout), so one slice holds them all. */
static store_kind plan_store(const cc_view *v, int bcast)
{
    int r = v->rank;
    if (strides_dense_from(v, 0) || (bcast && strides_dense_from(v, 1)))
        return STORE_DENSE;
    if (r >= 2) {
        cc_view swapped = *v; /* the transposed layout: dense once its last two axes swap */
        swapped.shape[r - 2] = v->shape[r - 1];
        swapped.shape[r - 1] = v->shape[r - 2];
        swapped.strides[r - 2] = v->strides[r - 1];
        swapped.strides[r - 1] = v->strides[r - 2];
        if (strides_dense_from(&swapped, 0))
            return STORE_TRANSPOSED;
    }
    return STORE_ROWS;
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

/* Store dense values x (already values of the view's dtype; n of them, row-major) through v. */
static void store_view(store_kind kind, const cc_view *v, const double *x, int64_t n)
{
    int r = v->rank;
    if (n == 0)
        return;
    if (kind == STORE_DENSE) { /* a broadcast axis 0 (stride 0): its first slice */
        cc_store_array(v->dtype, v->data, 0, 1, x,
                       r >= 2 && v->strides[0] == 0 && v->shape[0] > 1 ? n / v->shape[0] : n);
    } else if (kind == STORE_TRANSPOSED) {
        int64_t rows = v->shape[r - 2], cols = v->shape[r - 1];
        store_transposed(v->dtype, v->data, x, n / (rows * cols), rows, cols);
    } else if (r == 0) {
        cc_store_array(v->dtype, v->data, 0, 1, x, 1);
    } else {
        int64_t len = v->shape[r - 1], idx[REF_MAX_RANK] = {0}, off = 0;
        for (int64_t j = 0; j < n; j += len) {
            cc_store_array(v->dtype, v->data, off, v->strides[r - 1], x + j, len);
            for (int a = r - 2; a >= 0; a--) { /* the next row: carry through the outer axes */
                off += v->strides[a];
                if (++idx[a] < v->shape[a])
                    break;
                off -= idx[a] * v->strides[a];
                idx[a] = 0;
            }
        }
    }
}

/* Lay out a tensor of shape s in layout l: a buffer from the case's set and the view into it,
 * both where capcheck writes it until seal_layout gives the provider's read-only address.
 * The buffer's gaps (elements no index reaches) hold NaN, or 0 for integers: a provider that
 * ignores strides reads them and fails loudly; the rest is left for store_view. */
static int plan_layout(const cc_input_layout *l, cc_dtype t, const ref_shape *s, cc_inputs *in,
                       const char *name, cc_view *v, void **storage, int64_t *len,
                       int64_t *offset)
{
    int64_t phys;
    memset(v, 0, sizeof *v);
    v->dtype = t;
    v->rank = s->rank;
    memcpy(v->shape, s->dim, sizeof(int64_t) * (size_t)s->rank);
    layout_geometry(l, s, v->strides, offset, &phys);
    *len = phys;
    *storage = cc_guard_alloc_input(&in->mem, (size_t)phys * cc_dtype_size(t), name);
    if (!*storage)
        return -1;
    v->data = (char *)*storage + (size_t)*offset * cc_dtype_size(t);
    int gapless = l->kind == CC_LAYOUT_CONTIG || l->kind == CC_LAYOUT_TRANSPOSE ||
                  l->kind == CC_LAYOUT_BCAST || l->kind == CC_LAYOUT_CHLAST;
    if (!gapless)
        cc_fill_nan(t, *storage, phys);
    return 0;
}

/* The filled buffer made read-only; storage and view move to the address the provider reads. */
static void seal_layout(cc_inputs *in, void **storage, cc_view *v)
{
    size_t offset = (size_t)((char *)v->data - (char *)*storage);
    *storage = cc_guard_seal(&in->mem, *storage);
    v->data = (char *)*storage + offset;
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

/* Drawing an input: on several threads (a value depends on its index alone, so the split
 * changes nothing), a block at a time, each block drawn, rounded and, for a dense buffer or one
 * whose view has no aliases (store_through), stored while it is in the cache. Rounding waits
 * when edge values are still to come. */
typedef struct {
    const ref_domain *d;
    int stream;
    uint64_t key;
    double *x;
    cc_dtype round_to; /* CC_DTYPE_COUNT: do not round yet */
    const cc_view *store; /* a dense buffer to store into, or NULL */
    const cc_view *through; /* or a view without aliases to store through its strides */
} draw_job;

/* Elements [e, e + len) of the dense row-major values (x points at element e) stored through
 * view v, a row segment at a time: where each lands is fixed by its index, so with no two
 * indices sharing a place (no stride 0) the order of the stores changes nothing. */
static void store_through(const cc_view *v, int64_t e, const double *x, int64_t len)
{
    int r = v->rank;
    if (r == 0) {
        cc_store_array(v->dtype, v->data, 0, 1, x, len);
        return;
    }
    while (len > 0) {
        int64_t idx = e, off = 0, col = 0;
        for (int a = r - 1; a >= 0; a--) { /* e's multi-index, and its offset */
            int64_t k = idx % v->shape[a];
            idx /= v->shape[a];
            off += k * v->strides[a];
            if (a == r - 1)
                col = k;
        }
        int64_t cols = v->shape[r - 1], seg = cols - col < len ? cols - col : len;
        if (r >= 2 && col == 0 && len >= 2 * cols &&
            llabs(v->strides[r - 2]) < llabs(v->strides[r - 1])) {
            /* whole rows of one matrix whose columns run along memory (a transposed buffer):
             * stored together, a column at a time */
            int64_t row = (e / cols) % v->shape[r - 2], k = len / cols;
            if (k > v->shape[r - 2] - row)
                k = v->shape[r - 2] - row;
            cc_store_rows(v->dtype, v->data, off, v->strides[r - 2], v->strides[r - 1], x, k,
                          cols);
            seg = k * cols;
        } else
            cc_store_array(v->dtype, v->data, off, v->strides[r - 1], x, seg);
        e += seg;
        x += seg;
        len -= seg;
    }
}

/* 1 when store_through suits v: no two indices share a place (no axis of extent > 1 with
 * stride 0), and rows long enough that finding each row's offset costs little */
static int store_through_suits(const cc_view *v)
{
    if (v->rank > 0 && v->shape[v->rank - 1] < 16)
        return 0;
    for (int a = 0; a < v->rank; a++)
        if (v->shape[a] > 1 && v->strides[a] == 0)
            return 0;
    return 1;
}

#define DRAW_BLOCK 4096
#define DRAW_GRAIN (INT64_C(1) << 16) /* elements per thread at least: below, one thread */

static void draw_part(void *ctx, int64_t lo, int64_t hi)
{
    const draw_job *j = ctx;
    for (int64_t b = lo; b < hi; b += DRAW_BLOCK) {
        int64_t len = hi - b < DRAW_BLOCK ? hi - b : DRAW_BLOCK;
        cc_draw_range(j->d, j->stream, j->key, b, len, j->x + b);
        if (j->round_to != CC_DTYPE_COUNT && j->store && j->store->dtype == j->round_to)
            cc_round_store_array(j->round_to, j->x + b, len, j->store->data, b); /* one pass */
        else {
            if (j->round_to != CC_DTYPE_COUNT)
                cc_round_array(j->round_to, j->x + b, len);
            if (j->store)
                cc_store_array(j->store->dtype, j->store->data, b, 1, j->x + b, len);
        }
        if (j->through) /* stored while the block is in the cache, not in a second pass */
            store_through(j->through, b, j->x + b, len);
    }
}

/* x[0..n) of one tensor: drawn, edge values put in, rounded to t (a float dtype, or left as
 * drawn), replicated along a broadcast axis (n = distinct * copies) and stored through v. */
static void fill(const cc_case *c, int input, const ref_domain *d, const ref_shape *s,
                 int64_t distinct, cc_dtype t, const cc_view *v, int threads, double *x)
{
    int64_t n = ref_numel(s);
    int edges = input >= 0 && c->edges;
    store_kind kind = plan_store(v, distinct < n);
    /* stored block by block as drawn (no edge values to come): a dense buffer, or one whose
     * view store_through suits (not a broadcast one: its copies come after the draw) */
    const cc_view *dense = !edges && kind == STORE_DENSE ? v : NULL;
    const cc_view *through = !edges && !dense && distinct == n && store_through_suits(v) ? v : NULL;
    draw_job j = {d, cc_case_stream(c), cc_input_key(c->seed, input >= 0 ? input : COTANGENT_INPUT),
                  x, cc_dtype_is_float(t) && !edges ? t : CC_DTYPE_COUNT, dense, through};
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
    if (!j.store && !j.through)
        store_view(kind, v, x, n);
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
    return cc_materialize_in(c, 0, NULL, CC_PLACE_END, 1, in, msg, msg_len);
}

int cc_materialize_threads(const cc_case *c, int threads, cc_inputs *in, char *msg,
                           size_t msg_len)
{
    return cc_materialize_in(c, 0, NULL, CC_PLACE_END, threads, in, msg, msg_len);
}

int cc_materialize_in(const cc_case *c, int guarded, cc_guard_cache *cache,
                      cc_guard_place place, int threads, cc_inputs *in, char *msg,
                      size_t msg_len)
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
        double *x = cc_alloc_big(sizeof(double) * (size_t)(n > 0 ? n : 1));
        in->ref_in[i].shape = *s;
        in->ref_in[i].v = x;
        if (!x)
            goto oom;
        cc_input_layout lay = cc_case_input_layout(c, i);
        int bcast = lay.kind == CC_LAYOUT_BCAST && s->rank >= 2 && s->dim[0] > 1;
        cc_dtype t = cc_input_dtype(c, i);
        char name[40];
        cc_text_join(name, sizeof name, "input ", cc_input_name(c->op, i));
        if (plan_layout(&lay, t, s, in, name, &in->view[i], &in->storage[i], &in->storage_len[i],
                        &in->offset[i]))
            goto oom;
        fill(c, i, &d, s, bcast ? n / s->dim[0] : n, t, &in->view[i], threads, x);
        seal_layout(in, &in->storage[i], &in->view[i]);
        if (aliases(&lay, s)) { /* the reference gets what the provider sees */
            ref_shape same;
            double *seen = cc_view_to_dense(&in->view[i], &same);
            if (!seen)
                goto oom;
            cc_free_big(x);
            in->ref_in[i].v = seen;
        }
    }
    int64_t ny = ref_numel(&in->out_shape);
    in->g.shape = in->out_shape;
    in->g.v = cc_alloc_big(sizeof(double) * (size_t)(ny > 0 ? ny : 1));
    cc_input_layout dense;
    memset(&dense, 0, sizeof dense);
    int64_t g_len, g_off;
    if (!in->g.v || plan_layout(&dense, c->dtype, &in->out_shape, in, "the cotangent g",
                                &in->g_view, &in->g_storage, &g_len, &g_off))
        goto oom;
    ref_domain normal = {REF_DOM_NORMAL, 0, 0, 0, {0, 0}, 0};
    fill(c, -1, &normal, &in->out_shape, ny, c->dtype, &in->g_view, threads, in->g.v);
    seal_layout(in, &in->g_storage, &in->g_view);
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
    void *now = cc_guard_alloc_input(&in->mem, bytes, name);
    if (!now)
        return NULL;
    memcpy(now, old, bytes);
    now = cc_guard_seal(&in->mem, now);
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
        cc_free_big(in->ref_in[i].v);
    cc_free_big(in->g.v);
    cc_guard_free_all(&in->mem);
    memset(in, 0, sizeof *in);
}
