/* Sampled checks: which cases, and which elements (sample.h says why these). */
#include "harness/run/sample.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LATTICE_SHARE 1024 /* the lattice holds about 1/1024 of the output */
#define RANDOM_PICKS 256

static int is_data_input(const ref_op *op, int i)
{
    int k = i < op->max_inputs ? i : op->max_inputs - 1;
    return op->input_kind[k < REF_MAX_INPUTS ? k : REF_MAX_INPUTS - 1] == REF_IN_DATA;
}

static int wants_vjp(const cc_case *c)
{
    return c->check != CC_CHECK_FWD && c->op->vjp != NULL;
}

double cc_reference_work(const cc_case *c)
{
    const ref_op *op = c->op;
    if (!op->work)
        return 0.0;
    ref_shape out;
    ref_err e;
    if (op->shape(&c->params, c->n_in, c->shape, &out, &e) != REF_OK)
        return 0.0;
    double w = c->check != CC_CHECK_VJP
                   ? (double)ref_numel(&out) * op->work(&c->params, c->n_in, c->shape, -1)
                   : 0.0;
    for (int i = 0; wants_vjp(c) && i < c->n_in; i++)
        if (is_data_input(op, i))
            w += (double)ref_numel(&c->shape[i]) * op->work(&c->params, c->n_in, c->shape, i);
    return w;
}

/* Every value finite: exponent bits not all ones, tested a block at a time without a branch
 * per value (the loop vectorizes; a large case's inputs are scanned at memory speed). */
static int all_finite(const double *v, int64_t n)
{
    const uint64_t exponent = UINT64_C(0x7ff0000000000000);
    for (int64_t lo = 0; lo < n; lo += 4096) {
        int64_t hi = n - lo < 4096 ? n : lo + 4096;
        uint64_t bad = 0;
        for (int64_t i = lo; i < hi; i++) {
            uint64_t bits;
            memcpy(&bits, &v[i], sizeof bits);
            bad |= (uint64_t)((bits & exponent) == exponent);
        }
        if (bad)
            return 0;
    }
    return 1;
}

/* ---- the plan ------------------------------------------------------------------------------ */

/* The matrix view: rows = the leading axes, columns = the rest, split where max(R, C) is least. */
static void matrix_view(const ref_shape *s, int64_t *rows, int64_t *cols)
{
    int64_t n = ref_numel(s);
    *rows = 1;
    *cols = n;
    int64_t lead = 1;
    for (int a = 0; a + 1 < s->rank; a++) {
        lead *= s->dim[a];
        int64_t rest = lead > 0 ? n / lead : 0;
        if ((lead > rest ? lead : rest) < (*rows > *cols ? *rows : *cols)) {
            *rows = lead;
            *cols = rest;
        }
    }
}

typedef struct {
    int64_t *v;
    int64_t n, cap;
} index_list;

static int push(index_list *l, int64_t x)
{
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 1024;
        int64_t *v = realloc(l->v, sizeof(int64_t) * (size_t)cap);
        if (!v)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
    return 0;
}

static int by_index(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void sort_unique(index_list *l)
{
    qsort(l->v, (size_t)l->n, sizeof(int64_t), by_index);
    int64_t k = 0;
    for (int64_t i = 0; i < l->n; i++)
        if (k == 0 || l->v[i] != l->v[k - 1])
            l->v[k++] = l->v[i];
    l->n = k;
}

/* Rows (or columns) on the boundaries of an extent: 0, 1, the last two, and both sides of the
 * first and the last boundary of tiles of 4 .. 128. */
static int boundaries(int64_t extent, int64_t *out)
{
    int n = 0;
    int64_t cand[4 + 6 * 4];
    cand[n++] = 0, cand[n++] = 1, cand[n++] = extent - 2, cand[n++] = extent - 1;
    for (int64_t t = 4; t <= 128; t *= 2) {
        int64_t last = (extent - 1) / t * t; /* the start of the last tile */
        cand[n++] = t - 1, cand[n++] = t, cand[n++] = last - 1, cand[n++] = last;
    }
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (cand[i] < 0 || cand[i] >= extent)
            continue;
        int seen = 0;
        for (int j = 0; j < k && !seen; j++)
            seen = out[j] == cand[i];
        if (!seen)
            out[k++] = cand[i];
    }
    return k;
}

int cc_sample_plan(const cc_case *c, int output, const ref_shape *s, cc_sample *out)
{
    memset(out, 0, sizeof *out);
    int64_t n = ref_numel(s), R, C;
    out->total = n;
    if (n == 0)
        return 0;
    matrix_view(s, &R, &C);
    out->rows = R;
    out->cols = C;
    uint64_t h = ref_splitmix64(c->seed ^ ref_splitmix64(0x5a3b1e00ULL + (uint64_t)(output + 1)));
    index_list l = {0};
    int bad = 0;
    /* every row and every column */
    for (int64_t t = 0; t < (R > C ? R : C); t++)
        bad |= push(&l, (t % R) * C + t % C);
    /* the lattice: rows rho mod Tr, and in each such row the columns gamma_r mod Tc */
    int64_t tr = R < 8 ? R : 8, tc = C < 8 ? C : 8;
    int64_t target = n / LATTICE_SHARE > 64 ? n / LATTICE_SHARE : 64;
    while (((R + tr - 1) / tr) * ((C + tc - 1) / tc) > target && (tr < R || tc < C)) {
        if ((tr < R && (R + tr - 1) / tr >= (C + tc - 1) / tc) || tc >= C)
            tr *= 2;
        else
            tc *= 2;
    }
    out->window_rows = tr;
    out->window_cols = tc;
    int64_t rho = (int64_t)(ref_splitmix64(h) % (uint64_t)tr);
    for (int64_t r = rho; r < R; r += tr) {
        int64_t gamma = (int64_t)(ref_splitmix64(h + 1 + (uint64_t)r) % (uint64_t)tc);
        for (int64_t col = gamma; col < C; col += tc)
            bad |= push(&l, r * C + col);
    }
    /* the boundaries, crossed */
    int64_t br[32], bc[32];
    int nr = boundaries(R, br), nc = boundaries(C, bc);
    for (int i = 0; i < nr; i++)
        for (int j = 0; j < nc; j++)
            bad |= push(&l, br[i] * C + bc[j]);
    /* and a few at random */
    for (int k = 0; k < RANDOM_PICKS; k++)
        bad |= push(&l, (int64_t)(ref_splitmix64(h ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(k + 1))) %
                                  (uint64_t)n));
    if (bad) {
        free(l.v);
        return -1;
    }
    sort_unique(&l);
    out->at = l.v;
    out->count = l.n;
    return 0;
}

int cc_sample_add(cc_sample *s, const int64_t *extra, int64_t n)
{
    if (n <= 0)
        return 0;
    index_list l = {s->at, s->count, s->count};
    for (int64_t i = 0; i < n; i++)
        if (push(&l, extra[i])) {
            s->at = l.v;
            return -1;
        }
    sort_unique(&l);
    s->at = l.v;
    s->count = l.n;
    return 0;
}

void cc_sample_free(cc_sample *s)
{
    free(s->at);
    memset(s, 0, sizeof *s);
}

/* ---- the choice ---------------------------------------------------------------------------- */

int cc_sampling_chosen(const cc_case *c, cc_ref_mode mode, const cc_inputs *in)
{
    const ref_op *op = c->op;
    if (mode == CC_REF_AUTO)
        mode = c->ref;
    if (mode == CC_REF_FULL || !op->forward_at || !op->work || (wants_vjp(c) && !op->vjp_at))
        return 0;
    if (mode == CC_REF_AUTO && cc_reference_work(c) <= CC_SAMPLE_THRESHOLD)
        return 0;
    /* non-finite inputs make non-finite expected values the sample could miss */
    for (int i = 0; i < c->n_in; i++)
        if (!all_finite(in->ref_in[i].v, ref_numel(&in->ref_in[i].shape)))
            return 0;
    if (wants_vjp(c) && !all_finite(in->g.v, ref_numel(&in->g.shape)))
        return 0;
    if (mode == CC_REF_SAMPLED)
        return 1;
    /* worth it only when the sample's work is a small part of the full reference's (a small
     * output, such as a bias gradient, may be sampled whole) */
    double sampled = 0.0, full = 0.0;
    for (int k = -1; k < c->n_in; k++) {
        if (k >= 0 && (!wants_vjp(c) || !is_data_input(op, k)))
            continue;
        if (k < 0 && c->check == CC_CHECK_VJP)
            continue;
        cc_sample s;
        if (cc_sample_plan(c, k, k < 0 ? &in->out_shape : &c->shape[k], &s))
            return 0;
        double w = op->work(&c->params, c->n_in, c->shape, k);
        sampled += (double)s.count * w;
        full += (double)s.total * w;
        cc_sample_free(&s);
    }
    return sampled <= full / 4;
}
