/* matmul, scaledMatmul and linear as row-major GEMMs over a cc_gemm_backend (see the header). */
#include "providers/provider_util.h"
#include "providers/openblas/gemm_lowering.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"

#define GL_MAX_OWNED 8
#define GL_MAX_STAGED 3 /* outputs of one call: linear's three gradients at most */

static size_t elem_size(cc_dtype t)
{
    return t == CC_F64 ? 8 : t == CC_F32 ? 4 : t == CC_F16 || t == CC_BF16 ? 2 : t == CC_I64 ? 8 : 1;
}

int64_t cc_view_numel(const cc_view *v)
{
    int64_t n = 1;
    for (int i = 0; i < v->rank; i++)
        n *= v->shape[i];
    return n;
}

int64_t cc_view_span(const cc_view *v)
{
    int64_t last = 0;
    for (int i = 0; i < v->rank; i++) {
        if (v->shape[i] == 0)
            return 0;
        if (v->strides[i] < 0)
            return -1;
        last += (v->shape[i] - 1) * v->strides[i];
    }
    return last + 1;
}

void cc_view_pack(const cc_view *v, void *dst)
{
    int64_t n = cc_view_numel(v);
    size_t es = elem_size(v->dtype);
    int64_t idx[REF_MAX_RANK] = {0};
    const char *src = v->data;
    char *d = dst;
    for (int64_t j = 0; j < n; j++) {
        int64_t off = 0;
        for (int a = 0; a < v->rank; a++)
            off += idx[a] * v->strides[a];
        memcpy(d + (size_t)j * es, src + (size_t)off * es, es);
        for (int a = v->rank - 1; a >= 0; a--) { /* row-major odometer */
            if (++idx[a] < v->shape[a])
                break;
            idx[a] = 0;
        }
    }
}

int cc_view_is_dense(const cc_view *v)
{
    int all_zero = 1, dense = 1;
    int64_t s = 1;
    for (int a = v->rank - 1; a >= 0; a--) {
        if (v->strides[a] != 0)
            all_zero = 0;
        if (v->shape[a] > 1 && v->strides[a] != s)
            dense = 0;
        s *= v->shape[a] > 0 ? v->shape[a] : 1;
    }
    return all_zero || dense;
}

/* ---- operands ------------------------------------------------------------------------------ */

/* An output accumulated in acc_dtype apart from the harness's buffer (half-precision cases). */
typedef struct {
    void *dst;   /* the harness's buffer, case dtype */
    void *acc;   /* host buffer of acc_dtype that finish() fills */
    int64_t count;
} gl_staged;

typedef struct {
    const cc_gemm_backend *bk;
    size_t es;     /* operand element size */
    size_t es_acc; /* C element size */
    void *owned[GL_MAX_OWNED]; /* host buffers (packed copies, ones), freed after finish() */
    int n_owned;
    gl_staged staged[GL_MAX_STAGED];
    int n_staged;
} gl_ctx;

static void *gl_alloc(gl_ctx *gc, int64_t count)
{
    if (gc->n_owned == GL_MAX_OWNED || count < 0)
        return NULL;
    void *p = calloc((size_t)(count > 0 ? count : 1), gc->es);
    if (p)
        gc->owned[gc->n_owned++] = p;
    return p;
}

/* A zero-filled backend buffer of acc_dtype for `count` output elements whose values end up in
 * host (case dtype): directly when the two dtypes agree, else through a staged host buffer that
 * gl_unstage rounds into host after finish(). */
static cc_status gl_output(gl_ctx *gc, void *host, int64_t count, void **dev, char *msg,
                           size_t len)
{
    const cc_gemm_backend *bk = gc->bk;
    if (bk->acc_dtype == bk->dtype)
        return bk->output(bk->self, host, count, dev, msg, len);
    if (gc->n_staged == GL_MAX_STAGED)
        return cc_say(msg, len, CC_FAILED, "internal: more than %d staged outputs", GL_MAX_STAGED);
    void *acc = calloc((size_t)(count > 0 ? count : 1), gc->es_acc);
    if (!acc)
        return cc_say(msg, len, CC_FAILED, "out of memory staging an output");
    gc->staged[gc->n_staged++] = (gl_staged){host, acc, count};
    return bk->output(bk->self, acc, count, dev, msg, len);
}

/* Round every staged accumulator to the case dtype (one rounding per element) when the call
 * succeeded; free them in any case. */
static void gl_unstage(gl_ctx *gc, cc_status st)
{
    for (int i = 0; i < gc->n_staged; i++) {
        gl_staged *sg = &gc->staged[i];
        for (int64_t j = 0; st == CC_OK && j < sg->count; j++)
            cc_store(gc->bk->dtype, sg->dst, j, cc_load(gc->bk->acc_dtype, sg->acc, j));
        free(sg->acc);
    }
    gc->n_staged = 0;
}

/* A batch of rows x cols matrices as the GEMM sees them. */
typedef struct {
    const char *dev; /* backend pointer of element [0, ..., 0] */
    int trans;       /* stored transposed: pass op = T */
    int64_t ld;
    int64_t rows, cols;
    int brank;
    int64_t bdim[REF_MAX_RANK], bstride[REF_MAX_RANK]; /* batch axes, strides in the storage */
    int64_t dstride[REF_MAX_RANK]; /* dense strides of the same batch axes (for gradients) */
} gl_operand;

/* Can a rows x cols slice with strides (rs, cs) be handed to a row-major GEMM as it is? */
static int direct_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int *trans,
                         int64_t *ld)
{
    int64_t c1 = cols > 1 ? cols : 1, r1 = rows > 1 ? rows : 1;
    if ((cols <= 1 || cs == 1) && (rows <= 1 || rs >= c1)) {
        *trans = 0;
        *ld = rows <= 1 ? c1 : rs;
        return 1;
    }
    if ((rows <= 1 || rs == 1) && (cols <= 1 || cs >= r1)) {
        *trans = 1;
        *ld = cols <= 1 ? r1 : cs;
        return 1;
    }
    return 0;
}

/* The operand of view v: batch axes 0..brank-1, matrix rows along row_axis and columns along
 * col_axis (-1: a virtual axis of extent 1, the 1-D promotions). The operand must not be empty.
 * Packs v densely when its strides do not suit a GEMM. */
static cc_status gl_operand_of(gl_ctx *gc, const cc_view *v, int brank, int row_axis,
                               int col_axis, gl_operand *o, char *msg, size_t len)
{
    memset(o, 0, sizeof *o);
    o->rows = row_axis >= 0 ? v->shape[row_axis] : 1;
    o->cols = col_axis >= 0 ? v->shape[col_axis] : 1;
    o->brank = brank;
    int64_t dense = o->rows * o->cols;
    for (int i = brank - 1; i >= 0; i--) {
        o->bdim[i] = v->shape[i];
        o->dstride[i] = dense;
        dense *= v->shape[i];
    }
    int64_t rs = row_axis >= 0 ? v->strides[row_axis] : 0;
    int64_t cs = col_axis >= 0 ? v->strides[col_axis] : 0;
    int64_t span = cc_view_span(v);
    if (span < 0)
        return cc_say(msg, len, CC_UNSUPPORTED, "an input has a negative stride");
    const void *host = v->data;
    if (direct_layout(o->rows, o->cols, rs, cs, &o->trans, &o->ld)) {
        for (int i = 0; i < brank; i++)
            o->bstride[i] = v->strides[i];
    } else {
        void *p = gl_alloc(gc, dense);
        if (!p)
            return cc_say(msg, len, CC_FAILED, "out of memory packing an input");
        cc_view_pack(v, p);
        host = p;
        span = dense;
        /* dense strides of the view's own axes, then the same choice again */
        int64_t st[REF_MAX_RANK], s = 1;
        for (int a = v->rank - 1; a >= 0; a--) {
            st[a] = s;
            s *= v->shape[a];
        }
        rs = row_axis >= 0 ? st[row_axis] : 0;
        cs = col_axis >= 0 ? st[col_axis] : 0;
        if (!direct_layout(o->rows, o->cols, rs, cs, &o->trans, &o->ld))
            return cc_say(msg, len, CC_FAILED, "internal: a packed operand is not GEMM-ready");
        for (int i = 0; i < brank; i++)
            o->bstride[i] = st[i];
    }
    const void *dev = NULL;
    cc_status st = gc->bk->input(gc->bk->self, host, span, &dev, msg, len);
    o->dev = dev;
    return st;
}

/* A dense host buffer of count elements handed to the backend as an input. */
static cc_status gl_dense_input(gl_ctx *gc, const void *host, int64_t count, const char **dev,
                                char *msg, size_t len)
{
    const void *d = NULL;
    cc_status st = gc->bk->input(gc->bk->self, host, count, &d, msg, len);
    *dev = d;
    return st;
}

static cc_status gl_ones(gl_ctx *gc, int64_t count, const char **dev, char *msg, size_t len)
{
    void *p = gl_alloc(gc, count);
    if (!p)
        return cc_say(msg, len, CC_FAILED, "out of memory");
    for (int64_t i = 0; i < count; i++)
        cc_store(gc->bk->dtype, p, i, 1.0); /* exact in every format */
    return gl_dense_input(gc, p, count, dev, msg, len);
}

/* Element offset of operand o's slice for output batch index `flat` over out_dim[0..orank)
 * (right-aligned broadcasting: an operand axis of extent 1 always reads index 0); `dense`
 * selects the dense strides (gradient buffers) instead of the storage strides. */
static int64_t batch_off(const int64_t *out_dim, int orank, const gl_operand *o, int64_t flat,
                         int dense)
{
    int64_t off = 0;
    for (int i = orank - 1; i >= 0; i--) {
        int64_t idx = flat % out_dim[i];
        flat /= out_dim[i];
        int j = i - (orank - o->brank);
        if (j >= 0 && o->bdim[j] != 1)
            off += idx * (dense ? o->dstride[j] : o->bstride[j]);
    }
    return off;
}

static cc_status gl_gemm(gl_ctx *gc, int ta, int tb, int64_t m, int64_t n, int64_t k,
                         double alpha, const char *A, int64_t lda, const char *B, int64_t ldb,
                         double beta, char *C, int64_t ldc, char *msg, size_t len)
{
    if (m <= 0 || n <= 0 || k <= 0)
        return CC_OK; /* an empty product: C keeps its (zero or bias) contents */
    return gc->bk->gemm(gc->bk->self, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, msg,
                        len);
}

/* ---- matmul and scaledMatmul ------------------------------------------------------------------ */

typedef struct {
    int64_t m, k, n;
    int ra, rb, orank; /* operand batch ranks, output batch rank */
    int64_t odim[REF_MAX_RANK];
    int64_t nb; /* output batch count */
} mm_geom;

static cc_status mm_geometry(const cc_view *a, const cc_view *b, mm_geom *g, char *msg,
                             size_t len)
{
    memset(g, 0, sizeof *g);
    if (a->rank < 1 || b->rank < 1 || a->rank > REF_MAX_RANK || b->rank > REF_MAX_RANK)
        return cc_say(msg, len, CC_FAILED, "matmul needs operands of rank 1..%d", REF_MAX_RANK);
    int64_t ka = a->shape[a->rank - 1];
    int64_t kb = b->rank == 1 ? b->shape[0] : b->shape[b->rank - 2];
    if (ka != kb)
        return cc_say(msg, len, CC_FAILED, "matmul inner extents differ (%lld and %lld)",
                   (long long)ka, (long long)kb);
    g->k = ka;
    g->m = a->rank == 1 ? 1 : a->shape[a->rank - 2];
    g->n = b->rank == 1 ? 1 : b->shape[b->rank - 1];
    g->ra = a->rank > 2 ? a->rank - 2 : 0;
    g->rb = b->rank > 2 ? b->rank - 2 : 0;
    g->orank = g->ra > g->rb ? g->ra : g->rb;
    g->nb = 1;
    for (int i = 0; i < g->orank; i++) {
        int ia = i - (g->orank - g->ra), ib = i - (g->orank - g->rb);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return cc_say(msg, len, CC_FAILED, "matmul batch axes do not broadcast");
        g->odim[i] = da == 1 ? db : da;
        g->nb *= g->odim[i];
    }
    return CC_OK;
}

static cc_status mm_operands(gl_ctx *gc, const cc_call *call, const mm_geom *g, gl_operand *A,
                             gl_operand *B, char *msg, size_t len)
{
    const cc_view *a = &call->in[0], *b = &call->in[1];
    cc_status st = gl_operand_of(gc, a, g->ra, a->rank >= 2 ? a->rank - 2 : -1, a->rank - 1, A,
                                 msg, len);
    if (st == CC_OK)
        st = gl_operand_of(gc, b, g->rb, b->rank >= 2 ? b->rank - 2 : 0,
                           b->rank >= 2 ? b->rank - 1 : -1, B, msg, len);
    return st;
}

static double op_alpha(const cc_call *call)
{
    return call->params &&
                   (strcmp(call->op, "scaledMatmul") == 0 || strcmp(call->op, "scaled_matmul") == 0)
               ? call->params->alpha
               : 1.0;
}

static cc_status matmul_fwd(gl_ctx *gc, const cc_call *call, cc_view *out, char *msg, size_t len)
{
    mm_geom g;
    cc_status st = mm_geometry(&call->in[0], &call->in[1], &g, msg, len);
    if (st != CC_OK)
        return st;
    if (cc_view_numel(out) != g.nb * g.m * g.n)
        return cc_say(msg, len, CC_FAILED, "the output buffer has %lld elements, matmul makes %lld",
                   (long long)cc_view_numel(out), (long long)(g.nb * g.m * g.n));
    if (g.nb * g.m * g.n == 0)
        return CC_OK;
    void *C = NULL;
    st = gl_output(gc, out->data, g.nb * g.m * g.n, &C, msg, len);
    if (st != CC_OK || g.k == 0)
        return st; /* k = 0: the empty sum, zeros */
    gl_operand A, B;
    if ((st = mm_operands(gc, call, &g, &A, &B, msg, len)) != CC_OK)
        return st;
    double alpha = op_alpha(call);
    size_t es = gc->es, ec = gc->es_acc;
    for (int64_t b = 0; b < g.nb && st == CC_OK; b++)
        st = gl_gemm(gc, A.trans, B.trans, g.m, g.n, g.k, alpha,
                     A.dev + (size_t)batch_off(g.odim, g.orank, &A, b, 0) * es, A.ld,
                     B.dev + (size_t)batch_off(g.odim, g.orank, &B, b, 0) * es, B.ld, 0.0,
                     (char *)C + (size_t)(b * g.m * g.n) * ec, g.n, msg, len);
    return st;
}

static cc_status matmul_vjp(gl_ctx *gc, const cc_call *call, const cc_view *gv, cc_view *grads,
                            char *msg, size_t len)
{
    mm_geom g;
    cc_status st = mm_geometry(&call->in[0], &call->in[1], &g, msg, len);
    if (st != CC_OK)
        return st;
    int wa = grads[0].data != NULL, wb = grads[1].data != NULL;
    void *dA = NULL, *dB = NULL;
    int64_t na = cc_view_numel(&call->in[0]), nbb = cc_view_numel(&call->in[1]);
    if (wa && na > 0 && (st = gl_output(gc, grads[0].data, na, &dA, msg, len)))
        return st;
    if (wb && nbb > 0 && (st = gl_output(gc, grads[1].data, nbb, &dB, msg, len)))
        return st;
    if (g.nb * g.m * g.n * g.k == 0 || (!wa && !wb))
        return CC_OK; /* every gradient entry is an empty sum */
    gl_operand A, B;
    if ((st = mm_operands(gc, call, &g, &A, &B, msg, len)) != CC_OK)
        return st;
    const char *G = NULL;
    if ((st = gl_dense_input(gc, gv->data, g.nb * g.m * g.n, &G, msg, len)) != CC_OK)
        return st;
    double alpha = op_alpha(call);
    size_t es = gc->es, ec = gc->es_acc;
    for (int64_t b = 0; b < g.nb && st == CC_OK; b++) {
        const char *Gb = G + (size_t)(b * g.m * g.n) * es;
        const char *Ab = A.dev + (size_t)batch_off(g.odim, g.orank, &A, b, 0) * es;
        const char *Bb = B.dev + (size_t)batch_off(g.odim, g.orank, &B, b, 0) * es;
        if (wa) /* dA (m x k) += alpha g (m x n) B^T (n x k) */
            st = gl_gemm(gc, 0, !B.trans, g.m, g.k, g.n, alpha, Gb, g.n, Bb, B.ld, 1.0,
                         (char *)dA + (size_t)batch_off(g.odim, g.orank, &A, b, 1) * ec, g.k,
                         msg, len);
        if (wb && st == CC_OK) /* dB (k x n) += alpha A^T (k x m) g (m x n) */
            st = gl_gemm(gc, !A.trans, 0, g.k, g.n, g.m, alpha, Ab, A.ld, Gb, g.n, 1.0,
                         (char *)dB + (size_t)batch_off(g.odim, g.orank, &B, b, 1) * ec, g.n,
                         msg, len);
    }
    return st;
}

/* ---- linear ----------------------------------------------------------------------------------- */

typedef struct {
    int64_t nin, nout, rows, L; /* L = all leading positions; rows = per batch slice */
    int brank;
    int64_t nb;
} lin_geom;

static cc_status lin_geometry(const cc_call *call, lin_geom *g, char *msg, size_t len)
{
    const cc_view *x = &call->in[0], *w = &call->in[1], *b = &call->in[2];
    memset(g, 0, sizeof *g);
    if (x->rank < 1 || x->rank > REF_MAX_RANK || w->rank != 2 || b->rank != 1 ||
        x->shape[x->rank - 1] != w->shape[1] || b->shape[0] != w->shape[0])
        return cc_say(msg, len, CC_FAILED, "linear wants x [..., in], W [out, in], b [out]");
    g->nin = w->shape[1];
    g->nout = w->shape[0];
    g->brank = x->rank > 2 ? x->rank - 2 : 0;
    g->rows = x->rank >= 2 ? x->shape[x->rank - 2] : 1;
    g->nb = 1;
    for (int i = 0; i < g->brank; i++)
        g->nb *= x->shape[i];
    g->L = g->nb * g->rows;
    return CC_OK;
}

/* x as batches of rows x in; W^T as one in x out matrix. */
static cc_status lin_operands(gl_ctx *gc, const cc_call *call, const lin_geom *g, gl_operand *X,
                              gl_operand *WT, char *msg, size_t len)
{
    const cc_view *x = &call->in[0];
    cc_status st = gl_operand_of(gc, x, g->brank, x->rank >= 2 ? x->rank - 2 : -1, x->rank - 1,
                                 X, msg, len);
    if (st == CC_OK)
        st = gl_operand_of(gc, &call->in[1], 0, 1, 0, WT, msg, len);
    return st;
}

static cc_status linear_fwd(gl_ctx *gc, const cc_call *call, cc_view *out, char *msg, size_t len)
{
    lin_geom g;
    cc_status st = lin_geometry(call, &g, msg, len);
    if (st != CC_OK)
        return st;
    if (cc_view_numel(out) != g.L * g.nout)
        return cc_say(msg, len, CC_FAILED, "the output buffer has %lld elements, linear makes %lld",
                   (long long)cc_view_numel(out), (long long)(g.L * g.nout));
    if (g.L * g.nout == 0)
        return CC_OK;
    void *C = NULL;
    if ((st = gl_output(gc, out->data, g.L * g.nout, &C, msg, len)) != CC_OK)
        return st;
    /* C = ones (L x 1) b^T (1 x out): every row the bias, exactly */
    gl_operand Bias;
    const char *ones = NULL;
    if ((st = gl_operand_of(gc, &call->in[2], 0, -1, 0, &Bias, msg, len)) != CC_OK ||
        (st = gl_ones(gc, g.L, &ones, msg, len)) != CC_OK ||
        (st = gl_gemm(gc, 0, Bias.trans, g.L, g.nout, 1, 1.0, ones, 1, Bias.dev, Bias.ld, 0.0,
                      C, g.nout, msg, len)) != CC_OK)
        return st;
    if (g.nin == 0)
        return CC_OK;
    gl_operand X, WT;
    if ((st = lin_operands(gc, call, &g, &X, &WT, msg, len)) != CC_OK)
        return st;
    size_t es = gc->es, ec = gc->es_acc;
    const int64_t *odim = call->in[0].shape;
    for (int64_t b = 0; b < g.nb && st == CC_OK; b++) /* C_b += x_b W^T */
        st = gl_gemm(gc, X.trans, WT.trans, g.rows, g.nout, g.nin, 1.0,
                     X.dev + (size_t)batch_off(odim, g.brank, &X, b, 0) * es, X.ld, WT.dev,
                     WT.ld, 1.0, (char *)C + (size_t)(b * g.rows * g.nout) * ec, g.nout, msg,
                     len);
    return st;
}

static cc_status linear_vjp(gl_ctx *gc, const cc_call *call, const cc_view *gv, cc_view *grads,
                            char *msg, size_t len)
{
    lin_geom g;
    cc_status st = lin_geometry(call, &g, msg, len);
    if (st != CC_OK)
        return st;
    int want[3];
    void *d[3] = {NULL, NULL, NULL};
    int64_t cnt[3] = {g.L * g.nin, g.nout * g.nin, g.nout};
    for (int i = 0; i < 3; i++) {
        want[i] = grads[i].data != NULL && cnt[i] > 0;
        if (want[i] && (st = gl_output(gc, grads[i].data, cnt[i], &d[i], msg, len)) != CC_OK)
            return st;
    }
    if (g.L * g.nout == 0 || (!want[0] && !want[1] && !want[2]))
        return CC_OK;
    const char *G = NULL;
    if ((st = gl_dense_input(gc, gv->data, g.L * g.nout, &G, msg, len)) != CC_OK)
        return st;
    size_t es = gc->es, ec = gc->es_acc;
    if (want[2]) { /* db (out x 1) = g^T (out x L) ones (L x 1) */
        const char *ones = NULL;
        if ((st = gl_ones(gc, g.L, &ones, msg, len)) != CC_OK ||
            (st = gl_gemm(gc, 1, 0, g.nout, 1, g.L, 1.0, G, g.nout, ones, 1, 0.0, d[2], 1, msg,
                          len)) != CC_OK)
            return st;
    }
    if (g.nin == 0 || (!want[0] && !want[1]))
        return CC_OK;
    gl_operand X, WT;
    if ((st = lin_operands(gc, call, &g, &X, &WT, msg, len)) != CC_OK)
        return st;
    const int64_t *odim = call->in[0].shape;
    for (int64_t b = 0; b < g.nb && st == CC_OK; b++) {
        const char *Gb = G + (size_t)(b * g.rows * g.nout) * es;
        if (want[0]) /* dx_b (rows x in) = g_b (rows x out) W (out x in) */
            st = gl_gemm(gc, 0, !WT.trans, g.rows, g.nin, g.nout, 1.0, Gb, g.nout, WT.dev,
                         WT.ld, 0.0, (char *)d[0] + (size_t)(b * g.rows * g.nin) * ec, g.nin,
                         msg, len);
        if (want[1] && st == CC_OK) /* dW (out x in) += g_b^T (out x rows) x_b (rows x in) */
            st = gl_gemm(gc, 1, X.trans, g.nout, g.nin, g.rows, 1.0, Gb, g.nout,
                         X.dev + (size_t)batch_off(odim, g.brank, &X, b, 0) * es, X.ld, 1.0,
                         d[1], g.nin, msg, len);
    }
    return st;
}

/* ---- entry points ------------------------------------------------------------------------------ */

typedef enum { GL_NONE, GL_MATMUL, GL_LINEAR } gl_kind;

static gl_kind kind_of(const char *op)
{
    if (!op)
        return GL_NONE;
    if (!strcmp(op, "matmul") || !strcmp(op, "scaledMatmul") || !strcmp(op, "scaled_matmul"))
        return GL_MATMUL;
    if (!strcmp(op, "linear"))
        return GL_LINEAR;
    return GL_NONE;
}

int cc_gemm_has_op(const char *op)
{
    return kind_of(op) != GL_NONE;
}

static cc_status check_call(const cc_gemm_backend *bk, const cc_call *call, gl_kind k,
                            char *msg, size_t len)
{
    if (k == GL_NONE)
        return cc_say(msg, len, CC_UNSUPPORTED, "no GEMM lowering for %s", call->op);
    int full = call->dtype == CC_F32 || call->dtype == CC_F64;
    int half = call->dtype == CC_F16 || call->dtype == CC_BF16;
    if (!full && !half)
        return cc_say(msg, len, CC_UNSUPPORTED, "%s: no %s GEMM (f32, f64, f16, bf16)", call->op,
                   cc_dtype_name(call->dtype));
    if (bk->dtype != call->dtype)
        return cc_say(msg, len, CC_FAILED, "internal: backend dtype differs from the case dtype");
    if (bk->acc_dtype != (half ? CC_F32 : call->dtype))
        return cc_say(msg, len, CC_FAILED, "internal: a %s GEMM accumulates in %s, the backend "
                   "states %s", cc_dtype_name(call->dtype), half ? "f32" : cc_dtype_name(call->dtype),
                   cc_dtype_name(bk->acc_dtype));
    int want = k == GL_MATMUL ? 2 : 3;
    if (call->n_in != want || !call->in)
        return cc_say(msg, len, CC_FAILED, "%s takes %d inputs, the call has %d", call->op, want,
                   call->n_in);
    for (int i = 0; i < call->n_in; i++)
        if (call->in[i].dtype != call->dtype)
            return cc_say(msg, len, CC_FAILED, "%s: input %d is %s, the case is %s", call->op, i,
                       cc_dtype_name(call->in[i].dtype), cc_dtype_name(call->dtype));
    return CC_OK;
}

static void free_owned(gl_ctx *gc)
{
    for (int i = 0; i < gc->n_owned; i++)
        free(gc->owned[i]);
    gc->n_owned = 0;
}

static gl_ctx gl_ctx_of(const cc_gemm_backend *bk)
{
    gl_ctx gc;
    memset(&gc, 0, sizeof gc);
    gc.bk = bk;
    gc.es = elem_size(bk->dtype);
    gc.es_acc = elem_size(bk->acc_dtype);
    return gc;
}

cc_status cc_gemm_forward(const cc_gemm_backend *bk, const cc_call *call, cc_view *out, char *msg,
                          size_t len)
{
    gl_kind k = kind_of(call ? call->op : NULL);
    cc_status st = !call || !out ? cc_say(msg, len, CC_FAILED, "NULL call or output")
                                 : check_call(bk, call, k, msg, len);
    if (st == CC_OK && !cc_view_is_dense(out))
        st = cc_say(msg, len, CC_FAILED, "the output buffer is not dense row-major");
    gl_ctx gc = gl_ctx_of(bk);
    if (st == CC_OK)
        st = k == GL_MATMUL ? matmul_fwd(&gc, call, out, msg, len)
                            : linear_fwd(&gc, call, out, msg, len);
    st = bk->finish(bk->self, st, msg, len);
    gl_unstage(&gc, st);
    free_owned(&gc);
    return st;
}

cc_status cc_gemm_vjp(const cc_gemm_backend *bk, const cc_call *call, const cc_view *g,
                      cc_view *grads, char *msg, size_t len)
{
    gl_kind k = kind_of(call ? call->op : NULL);
    cc_status st = !call || !g || !grads ? cc_say(msg, len, CC_FAILED, "NULL call or cotangent")
                                         : check_call(bk, call, k, msg, len);
    if (st == CC_OK && (!cc_view_is_dense(g) || g->dtype != call->dtype))
        st = cc_say(msg, len, CC_FAILED, "the cotangent is not dense in the case dtype");
    for (int i = 0; st == CC_OK && i < call->n_in; i++)
        if (grads[i].data && !cc_view_is_dense(&grads[i]))
            st = cc_say(msg, len, CC_FAILED, "gradient buffer %d is not dense row-major", i);
    gl_ctx gc = gl_ctx_of(bk);
    if (st == CC_OK)
        st = k == GL_MATMUL ? matmul_vjp(&gc, call, g, grads, msg, len)
                            : linear_vjp(&gc, call, g, grads, msg, len);
    st = bk->finish(bk->self, st, msg, len);
    gl_unstage(&gc, st);
    free_owned(&gc);
    return st;
}
