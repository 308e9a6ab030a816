/* Linear algebra (ops.md G).
 *
 * Error model of every dot-product output: a length-K sum of products in any order and with or
 * without FMA is within K u sum_k |a_k b_k| of the exact value (gamma_K bound), so
 * m = K * sum_k |a_k b_k| (K >= 1) and c = 2 (first-order slack of gamma_K = Ku/(1-Ku)).
 * scaledMatmul adds 3 roundings per term (alpha rounded to the dtype, the scaling product, and
 * one spare for the split sqrt|alpha| scaling of both operands): m = |alpha| (K + 3) sum|a b|.
 *
 * Strict f16/bf16 (ref.h): the dot product runs in float32 and is rounded to the dtype once:
 * dtype = |y|; scaledMatmul's 3 scaling roundings may happen in the dtype (the operands or the
 * product scaled there): dtype = 3 |alpha| sum|a b| + |y|; a VJP summed over broadcast batch
 * axes (ATen: one product per batch, rounded to the dtype, then summed) adds sum|terms| for
 * those roundings. prob: K becomes sqrt(K) (the forward: the smaller of that and ref_sum_prob's
 * exchangeable form).
 * The forward's sums are compensated (ref_sum, Dot2): the oracle errs by 2^-53 |y| + gamma_K^2
 * sum|a b| there (scaledMatmul's scaling another 2^-53 |y|), within 2^-53 (dtype_i + 2^-20 m_i)
 * (REF_COMPENSATED_FWD). */
#include "ref_families.h"
#include "ref_parallel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- matmul: torch.matmul (1-D operands promoted, leading batch axes broadcast) ----------- */

/* Operands viewed as (batch..., rows, cols) with the 1-D promotions made explicit. */
typedef struct {
    ref_shape batch_a, batch_b, batch_out;
    int64_t m, k, n;
    ref_shape out;
} mm_geom;

static ref_status mm_geometry(const ref_shape *a, const ref_shape *b, mm_geom *g, ref_err *e)
{
    char sa[96], sb[96];
    ref_shape_fmt(a, sa, sizeof sa);
    ref_shape_fmt(b, sb, sizeof sb);
    if (a->rank == 0 || b->rank == 0)
        return ref_err_set(e, "matmul needs rank >= 1 operands, got %s and %s", sa, sb);
    memset(g, 0, sizeof *g);
    int64_t ka = a->dim[a->rank - 1];
    int64_t kb = b->rank == 1 ? b->dim[0] : b->dim[b->rank - 2];
    if (ka != kb)
        return ref_err_set(e, "matmul inner extents differ: %s @ %s", sa, sb);
    g->k = ka;
    g->m = a->rank == 1 ? 1 : a->dim[a->rank - 2];
    g->n = b->rank == 1 ? 1 : b->dim[b->rank - 1];
    g->batch_a.rank = a->rank > 2 ? a->rank - 2 : 0;
    g->batch_b.rank = b->rank > 2 ? b->rank - 2 : 0;
    memcpy(g->batch_a.dim, a->dim, sizeof(int64_t) * (size_t)g->batch_a.rank);
    memcpy(g->batch_b.dim, b->dim, sizeof(int64_t) * (size_t)g->batch_b.rank);
    int R = g->batch_a.rank > g->batch_b.rank ? g->batch_a.rank : g->batch_b.rank;
    g->batch_out.rank = R;
    for (int i = 0; i < R; i++) {
        int ia = i - (R - g->batch_a.rank), ib = i - (R - g->batch_b.rank);
        int64_t da = ia >= 0 ? g->batch_a.dim[ia] : 1, db = ib >= 0 ? g->batch_b.dim[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return ref_err_set(e, "matmul batch axes do not broadcast: %s @ %s", sa, sb);
        g->batch_out.dim[i] = da == 1 ? db : da;
    }
    g->out = g->batch_out;
    if (a->rank > 1)
        g->out.dim[g->out.rank++] = g->m;
    if (b->rank > 1)
        g->out.dim[g->out.rank++] = g->n;
    return REF_OK;
}

/* Linear index into a right-aligned broadcast batch for output batch index `flat`. */
static int64_t batch_offset(const ref_shape *out_batch, const ref_shape *in_batch, int64_t flat)
{
    int64_t off = 0, stride = 1;
    for (int i = out_batch->rank - 1; i >= 0; i--) {
        int64_t idx = flat % out_batch->dim[i];
        flat /= out_batch->dim[i];
        int j = i - (out_batch->rank - in_batch->rank);
        if (j >= 0) {
            if (in_batch->dim[j] != 1)
                off += idx * stride;
            stride *= in_batch->dim[j];
        }
    }
    return off;
}

static ref_status matmul_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                               ref_err *e)
{
    (void)p;
    (void)n;
    mm_geom g;
    ref_status st = mm_geometry(&in[0], &in[1], &g, e);
    if (st == REF_OK)
        *out = g.out;
    return st;
}

/* out[b, i, j] = alpha * sum_k A[ba, i, k] B[bb, k, j] (left fold from 0 over k);
 * m = |alpha| (max(K, 1) + extra) sum_k |A B| (matmul: alpha = 1, extra = 0), split as the file
 * comment says (mm_set_mags).
 * The loop over k runs outside the one over j: B is read along its rows and row i of out
 * gathers its sums in place, each in increasing k as the formula reads. Rows (b, i) are split
 * over threads. */
typedef struct {
    mm_geom g;
    const ref_tensor *in;
    ref_tensor *out;
    const ref_mag *mags;
    double alpha;
    int extra, plain; /* plain: ref_params' plain_sums */
    _Atomic int failed; /* a thread had no room for its sums */
} mm_job;

/* Element i's three magnitudes from S = sum|terms| of its len terms, y its (scaled) value and
 * P the probabilistic magnitude of its sum (sqrt(len) S, or ref_sum_prob's smaller form). */
static void mm_set_mags(const ref_mag *mags, int64_t i, double alpha, double len, int extra,
                        int folds, double abs_sum, double y, double P)
{
    double S = fabs(alpha) * abs_sum;
    ref_mag_set(mags, i, fabs(alpha) * (len + extra) * abs_sum, (extra + folds) * S + fabs(y),
                fabs(alpha) * P + extra * S);
}

/* The same for an element whose sum is acc (a compensated one: the forward's). */
static void mm_set_sum_mags(const ref_mag *mags, int64_t i, double alpha, double len, int extra,
                            const ref_sum *acc, double y)
{
    mm_set_mags(mags, i, alpha, len, extra, 0, acc->abs, y, ref_sum_prob(acc));
}

/* Each row's n sums are compensated (ref_sum), kept side by side in acc. */
static void mm_forward_rows(void *ctx, int64_t lo, int64_t hi)
{
    const mm_job *t = ctx;
    const mm_geom *g = &t->g;
    double len = (double)(g->k > 0 ? g->k : 1);
    ref_sum *acc = malloc(sizeof *acc * (size_t)(g->n + 1));
    if (!acc) {
        ((mm_job *)ctx)->failed = 1;
        return;
    }
    for (int64_t bi = lo; bi < hi; bi++) {
        int64_t b = bi / g->m, i = bi % g->m;
        const double *A = t->in[0].v + batch_offset(&g->batch_out, &g->batch_a, b) * g->m * g->k;
        const double *B = t->in[1].v + batch_offset(&g->batch_out, &g->batch_b, b) * g->k * g->n;
        double *row = t->out->v + bi * g->n;
        memset(acc, 0, sizeof *acc * (size_t)g->n);
        for (int64_t k = 0; k < g->k; k++) {
            double a = A[i * g->k + k];
            const double *Bk = B + k * g->n;
            for (int64_t j = 0; j < g->n; j++)
                ref_sum_add_prod(&acc[j], a, Bk[j]);
        }
        for (int64_t j = 0; j < g->n; j++) {
            row[j] = t->alpha * ref_sum_value(&acc[j], t->plain);
            if (t->mags && t->mags->worst)
                mm_set_sum_mags(t->mags, bi * g->n + j, t->alpha, len, t->extra, &acc[j], row[j]);
        }
    }
    free(acc);
}

static ref_status mm_forward(const ref_params *p, const ref_tensor *in, ref_tensor *out,
                             const ref_mag *mags, double alpha, int extra)
{
    mm_job t = {.in = in, .out = out, .mags = mags, .alpha = alpha, .extra = extra,
                .plain = p->plain_sums};
    mm_geometry(&in[0].shape, &in[1].shape, &t.g, NULL);
    ref_parallel_for(p->threads, ref_numel(&t.g.batch_out) * t.g.m, 1, mm_forward_rows, &t);
    return t.failed ? REF_ENOMEM : REF_OK;
}

/* Picked elements whose sums run down columns (matmul's output, dB; linear's gradients) are
 * formed with the summation index outermost and the picks side by side: each pick's sum still
 * takes its terms in increasing order from 0, while the operands are read along their rows. */

/* sum_r P[r sp + po[e]] Q[r sq + qo[e]] for the picks e in [0, count), r from 0 up to terms,
 * the picks side by side with r outermost, into v[e] and sum|terms| into abs_sum[e] (both
 * added to). Each pick's operand offsets are worked out once beforehand (po, qo), not divided
 * out of its flat index again for every term. */
static void picked_sums(int64_t terms, const double *P, int64_t sp, const int64_t *po,
                        const double *Q, int64_t sq, const int64_t *qo, int64_t count,
                        double *restrict v, double *restrict abs_sum)
{
    for (int64_t r = 0; r < terms; r++) {
        const double *Pr = P + r * sp, *Qr = Q + r * sq;
        for (int64_t e = 0; e < count; e++) {
            double term = Pr[po[e]] * Qr[qo[e]];
            v[e] += term;
            abs_sum[e] += fabs(term);
        }
    }
}

/* The picks at[lo .. hi) of one output batch of `per` elements: the range of the batch `b`. */
static void batch_range(const ref_picks *pk, int64_t per, int64_t b, int64_t *lo, int64_t *hi)
{
    int64_t e = *lo = *hi;
    while (e < pk->count && pk->at[e] / per == b)
        e++;
    *hi = e;
}

/* The same at the picked elements alone: out[b, i, j] as one compensated sum over k, its
 * terms added in increasing k as mm_forward_rows adds them. */
static ref_status mm_forward_at(const ref_tensor *in, ref_picks *pk, double alpha, int extra,
                                int plain)
{
    mm_geom g;
    mm_geometry(&in[0].shape, &in[1].shape, &g, NULL);
    size_t len = (size_t)(pk->count + 1);
    ref_sum *acc = calloc(len, sizeof *acc);
    int64_t *ao = malloc(sizeof(int64_t) * len), *bo = malloc(sizeof(int64_t) * len);
    if (!acc || !ao || !bo) {
        free(acc), free(ao), free(bo);
        return REF_ENOMEM;
    }
    int64_t lo = 0, hi = 0;
    while (hi < pk->count) {
        int64_t b = pk->at[hi] / (g.m * g.n);
        batch_range(pk, g.m * g.n, b, &lo, &hi);
        const double *A = in[0].v + batch_offset(&g.batch_out, &g.batch_a, b) * g.m * g.k;
        const double *B = in[1].v + batch_offset(&g.batch_out, &g.batch_b, b) * g.k * g.n;
        for (int64_t e = lo; e < hi; e++) {
            ao[e] = pk->at[e] % (g.m * g.n) / g.n * g.k; /* A[i, 0] */
            bo[e] = pk->at[e] % g.n;                      /* B[0, j] */
        }
        /* out[i, j] += A[i, k] B[k, j] for every pick, k outermost */
        for (int64_t k = 0; k < g.k; k++)
            for (int64_t e = lo; e < hi; e++)
                ref_sum_add_prod(&acc[e], A[ao[e] + k], B[k * g.n + bo[e]]);
        for (int64_t e = lo; e < hi; e++) {
            pk->v[e] = alpha * ref_sum_value(&acc[e], plain);
            if (pk->mag.worst)
                mm_set_sum_mags(&pk->mag, e, alpha, (double)(g.k > 0 ? g.k : 1), extra, &acc[e],
                                pk->v[e]);
        }
    }
    free(acc), free(ao), free(bo);
    return REF_OK;
}

static ref_status matmul_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                             const ref_mag *mags)
{
    (void)n;
    return mm_forward(p, in, out, mags, 1.0, 0);
}

/* dA[ba, i, k] = alpha * sum over batches b that read ba, sum_j g[b, i, j] B[bb, k, j];
 * dB[bb, k, j] = alpha * sum over batches b that read bb, sum_i A[ba, i, k] g[b, i, j]
 * (left folds from 0: b outer, then j for dA and i for dB).
 * m = |alpha| (uses + extra) sum|terms|, uses = the number of terms summed into the element:
 * n per batch b reading ba for dA, m per batch reading bb for dB (counted per batch, once).
 * dA's rows i and dB's rows k are split over threads, each thread walking every batch. */
typedef struct {
    mm_geom g;
    const ref_tensor *in, *gt;
    double *dA, *dB, *mA, *mB;
} mm_vjp_job;

static void mm_vjp_rows_a(void *ctx, int64_t lo, int64_t hi)
{
    const mm_vjp_job *t = ctx;
    const mm_geom *g = &t->g;
    for (int64_t b = 0; b < ref_numel(&g->batch_out); b++) {
        int64_t oa = batch_offset(&g->batch_out, &g->batch_a, b) * g->m * g->k;
        const double *B = t->in[1].v + batch_offset(&g->batch_out, &g->batch_b, b) * g->k * g->n;
        const double *G = t->gt->v + b * g->m * g->n;
        for (int64_t i = lo; i < hi; i++) /* dA[i, k] += sum_j g[i, j] B[k, j]: rows of g, B */
            for (int64_t k = 0; k < g->k; k++) {
                double s = t->dA[oa + i * g->k + k], s_abs = t->mA ? t->mA[oa + i * g->k + k] : 0.0;
                for (int64_t j = 0; j < g->n; j++) {
                    s += G[i * g->n + j] * B[k * g->n + j];
                    s_abs += fabs(G[i * g->n + j] * B[k * g->n + j]);
                }
                t->dA[oa + i * g->k + k] = s;
                if (t->mA)
                    t->mA[oa + i * g->k + k] = s_abs;
            }
    }
}

static void mm_vjp_rows_b(void *ctx, int64_t lo, int64_t hi)
{
    const mm_vjp_job *t = ctx;
    const mm_geom *g = &t->g;
    for (int64_t b = 0; b < ref_numel(&g->batch_out); b++) {
        const double *A = t->in[0].v + batch_offset(&g->batch_out, &g->batch_a, b) * g->m * g->k;
        int64_t ob = batch_offset(&g->batch_out, &g->batch_b, b) * g->k * g->n;
        const double *G = t->gt->v + b * g->m * g->n;
        for (int64_t i = 0; i < g->m; i++) /* dB[k, j] += A[i, k] g[i, j]: in increasing i */
            for (int64_t k = lo; k < hi; k++) {
                double a = A[i * g->k + k];
                double *row = t->dB + ob + k * g->n, *mrow = t->mB ? t->mB + ob + k * g->n : NULL;
                for (int64_t j = 0; j < g->n; j++) {
                    row[j] += a * G[i * g->n + j];
                    if (mrow)
                        mrow[j] += fabs(a * G[i * g->n + j]);
                }
            }
    }
}

/* How many output batches read each batch of an operand. */
static int64_t *mm_reads(const mm_geom *g, const ref_shape *operand_batch)
{
    int64_t *reads = calloc((size_t)ref_numel(operand_batch) + 1, sizeof(int64_t));
    for (int64_t b = 0; reads && b < ref_numel(&g->batch_out); b++)
        reads[batch_offset(&g->batch_out, operand_batch, b)]++;
    return reads;
}

static ref_status mm_vjp(const ref_params *p, const ref_tensor *in, const ref_tensor *gt,
                         ref_tensor *grad, const ref_mag *gmag, double alpha, int extra)
{
    mm_vjp_job t = {.in = in, .gt = gt, .dA = grad[0].v, .dB = grad[1].v};
    mm_geom *g = &t.g;
    mm_geometry(&in[0].shape, &in[1].shape, g, NULL);
    int64_t na = ref_numel(&in[0].shape), nbb = ref_numel(&in[1].shape);
    int64_t *reads_a = mm_reads(g, &g->batch_a), *reads_b = mm_reads(g, &g->batch_b);
    if (!reads_a || !reads_b) {
        free(reads_a), free(reads_b);
        return REF_ENOMEM;
    }
    t.mA = t.dA && gmag ? gmag[0].worst : NULL;
    t.mB = t.dB && gmag ? gmag[1].worst : NULL;
    for (int64_t i = 0; t.dA && i < na; i++) {
        t.dA[i] = 0.0;
        if (t.mA)
            t.mA[i] = 0.0; /* sum|terms| until the final scaling */
    }
    for (int64_t i = 0; t.dB && i < nbb; i++) {
        t.dB[i] = 0.0;
        if (t.mB)
            t.mB[i] = 0.0;
    }
    if (t.dA)
        ref_parallel_for(p->threads, g->m, 1, mm_vjp_rows_a, &t);
    if (t.dB)
        ref_parallel_for(p->threads, g->k, 1, mm_vjp_rows_b, &t);
    for (int s = 0; s < 2; s++) {
        double *d = s == 0 ? t.dA : t.dB, *m = s == 0 ? t.mA : t.mB;
        if (!d)
            continue;
        int64_t cnt = s == 0 ? na : nbb, per = s == 0 ? g->m * g->k : g->k * g->n;
        for (int64_t i = 0; i < cnt; i++) {
            d[i] *= alpha;
            if (m) {
                int64_t reads = s == 0 ? reads_a[i / per] : reads_b[i / per];
                int64_t uses = reads * (s == 0 ? g->n : g->m);
                double len = (double)(uses > 0 ? uses : 1);
                mm_set_mags(&gmag[s], i, alpha, len, extra, reads > 1, m[i], d[i],
                            sqrt(len) * m[i]);
            }
        }
    }
    free(reads_a), free(reads_b);
    return REF_OK;
}

/* The same at picked elements of dA (wrt 0; each a sum along rows of g and B) or dB (wrt 1:
 * sums down columns of A and g, formed with the batches and i outermost). */
static ref_status mm_vjp_dB_at(const ref_tensor *in, const ref_tensor *gt, ref_picks *pk,
                               double alpha, int extra)
{
    mm_geom g;
    mm_geometry(&in[0].shape, &in[1].shape, &g, NULL);
    int64_t nb = ref_numel(&g.batch_out);
    size_t len = (size_t)(pk->count + 1);
    double *abs_sum = malloc(sizeof(double) * len);
    int64_t *reads = calloc(len, sizeof(int64_t)); /* output batches that read the pick's */
    int64_t *ao = malloc(sizeof(int64_t) * len), *go = malloc(sizeof(int64_t) * len);
    if (!abs_sum || !reads || !ao || !go) {
        free(abs_sum), free(reads), free(ao), free(go);
        return REF_ENOMEM;
    }
    for (int64_t e = 0; e < pk->count; e++) {
        pk->v[e] = abs_sum[e] = 0.0;
        ao[e] = pk->at[e] % (g.k * g.n) / g.n; /* A[0, k] */
        go[e] = pk->at[e] % g.n;               /* g[0, j] */
    }
    for (int64_t b = 0; b < nb; b++) {
        int64_t bb = batch_offset(&g.batch_out, &g.batch_b, b), lo = 0, hi = 0;
        while (hi < pk->count && pk->at[hi] / (g.k * g.n) < bb) /* the picks of batch bb */
            hi++;
        batch_range(pk, g.k * g.n, bb, &lo, &hi);
        const double *A = in[0].v + batch_offset(&g.batch_out, &g.batch_a, b) * g.m * g.k;
        const double *G = gt->v + b * g.m * g.n;
        /* dB[k, j] += A[i, k] g[i, j] for every pick, i outermost */
        picked_sums(g.m, A, g.k, ao + lo, G, g.n, go + lo, hi - lo, pk->v + lo, abs_sum + lo);
        for (int64_t e = lo; e < hi; e++)
            reads[e]++;
    }
    for (int64_t e = 0; e < pk->count; e++) {
        pk->v[e] = pk->v[e] * alpha;
        int64_t uses = reads[e] * g.m;
        if (pk->mag.worst)
        {
            double len = (double)(uses > 0 ? uses : 1);
            mm_set_mags(&pk->mag, e, alpha, len, extra, reads[e] > 1, abs_sum[e], pk->v[e],
                        sqrt(len) * abs_sum[e]);
        }
    }
    free(abs_sum), free(reads), free(ao), free(go);
    return REF_OK;
}

static ref_status mm_vjp_at(const ref_tensor *in, const ref_tensor *gt, int wrt, ref_picks *pk,
                            double alpha, int extra)
{
    if (wrt == 1)
        return mm_vjp_dB_at(in, gt, pk, alpha, extra);
    mm_geom g;
    mm_geometry(&in[0].shape, &in[1].shape, &g, NULL);
    int64_t nb = ref_numel(&g.batch_out);
    size_t len = (size_t)(pk->count + 1);
    int64_t *go = malloc(sizeof(int64_t) * len), *bo = malloc(sizeof(int64_t) * len);
    double *s_abs = malloc(sizeof(double) * len);
    if (!go || !bo || !s_abs) {
        free(go), free(bo), free(s_abs);
        return REF_ENOMEM;
    }
    for (int64_t e = 0; e < pk->count; e++) { /* dA[ba, i, k]: rows i of g and k of B */
        go[e] = pk->at[e] % (g.m * g.k) / g.k * g.n, bo[e] = pk->at[e] % g.k * g.n;
        pk->v[e] = s_abs[e] = 0.0;
    }
    /* the picks of each batch ba of A, then every output batch b reading ba in increasing b */
    int64_t lo = 0, hi = 0;
    while (hi < pk->count) {
        int64_t ba = pk->at[hi] / (g.m * g.k), uses = 0, reads = 0;
        batch_range(pk, g.m * g.k, ba, &lo, &hi);
        for (int64_t b = 0; b < nb; b++) {
            if (batch_offset(&g.batch_out, &g.batch_a, b) != ba)
                continue;
            const double *B = in[1].v + batch_offset(&g.batch_out, &g.batch_b, b) * g.k * g.n;
            ref_dots(g.n, gt->v + b * g.m * g.n, go + lo, B, bo + lo, hi - lo, pk->v + lo,
                     s_abs + lo);
            uses += g.n;
            reads++;
        }
        for (int64_t e = lo; e < hi; e++) {
            pk->v[e] = pk->v[e] * alpha;
            if (pk->mag.worst)
                mm_set_mags(&pk->mag, e, alpha, (double)(uses > 0 ? uses : 1), extra, reads > 1,
                            s_abs[e], pk->v[e], sqrt((double)(uses > 0 ? uses : 1)) * s_abs[e]);
        }
    }
    free(go), free(bo), free(s_abs);
    return REF_OK;
}

/* Work of one element: K terms of the output, n (dA) or m (dB) per batch that reads it. */
static double mm_work(const ref_shape *in, int wrt)
{
    mm_geom g;
    ref_err e;
    if (mm_geometry(&in[0], &in[1], &g, &e) != REF_OK)
        return 0.0;
    double nb = (double)ref_numel(&g.batch_out);
    if (wrt < 0)
        return (double)g.k;
    if (wrt == 0)
        return nb / (double)(ref_numel(&g.batch_a) > 0 ? ref_numel(&g.batch_a) : 1) * (double)g.n;
    return nb / (double)(ref_numel(&g.batch_b) > 0 ? ref_numel(&g.batch_b) : 1) * (double)g.m;
}

static ref_status matmul_fwd_at(const ref_params *p, int n, const ref_tensor *in, ref_picks *pk)
{
    (void)p, (void)n;
    return mm_forward_at(in, pk, 1.0, 0, p->plain_sums);
}

static ref_status matmul_vjp_at_one(const ref_params *p, int n, const ref_tensor *in,
                                    const ref_tensor *gt, int wrt, ref_picks *pk)
{
    (void)p, (void)n;
    return mm_vjp_at(in, gt, wrt, pk, 1.0, 0);
}

static ref_status matmul_vjp_at(const ref_params *p, int n, const ref_tensor *in,
                                const ref_tensor *gt, ref_picks *pk)
{
    return ref_vjp_at_each(matmul_vjp_at_one, p, n, in, gt, pk);
}

static double matmul_work(const ref_params *p, int n, const ref_shape *in, int wrt)
{
    (void)p, (void)n;
    return mm_work(in, wrt);
}

static ref_status matmul_vjp(const ref_params *p, int n, const ref_tensor *in,
                             const ref_tensor *y, const ref_tensor *gt, ref_tensor *grad,
                             const ref_mag *gmag)
{
    (void)n;
    (void)y;
    return mm_vjp(p, in, gt, grad, gmag, 1.0, 0);
}

/* A [batch..., m, k] drawn within max_elems (rank 1: [k]); B [batch'..., k, n] (rank 1: [k]) with
 * B's batch axes right-aligned, each equal to A's or 1 (broadcast). */
static ref_status sample_matmul(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                ref_shape *in)
{
    (void)p;
    int ra = req->rank >= 0 ? req->rank : (int)ref_rng_range(r, 1, 4);
    if (ra < 1 || ra > REF_MAX_RANK)
        return REF_ENOTAPPLICABLE;
    ref_sample_shape(r, ra, req->max_elems, 0, &in[0]);
    int rb = ra <= 2 ? (int)ref_rng_range(r, 1, 2) : (int)ref_rng_range(r, 2, ra);
    int64_t nn = ref_rng_range(r, 1, 4);
    if (req->zero_dim) { /* m, k or n */
        int z = (int)ref_rng_range(r, 0, 2);
        if (z == 2 && rb > 1)
            nn = 0;
        else if (z == 1 && ra > 1)
            in[0].dim[ra - 2] = 0;
        else
            in[0].dim[ra - 1] = 0;
    }
    int64_t k = in[0].dim[ra - 1];
    in[1].rank = rb;
    if (rb == 1)
        in[1].dim[0] = k;
    else {
        for (int i = 0; i < rb - 2; i++)
            in[1].dim[i] = ref_rng_range(r, 0, 1) ? in[0].dim[i + (ra - rb)] : 1;
        in[1].dim[rb - 2] = k;
        in[1].dim[rb - 1] = nn;
        int64_t limit = ref_extent_cap(&in[1], rb - 1, ref_sample_budget(req));
        if (nn > limit) /* B [..., k, n] within the budget (k is A's full last axis) */
            in[1].dim[rb - 1] = limit;
    }
    *n = 2;
    return REF_OK;
}

/* ---- scaledMatmul: alpha * (A @ B) -------------------------------------------------------
 * Proposal (not in TorchLean). Same geometry as matmul (1-D promotion, broadcast batch axes);
 * alpha = params->alpha (default 1), which must be finite. VJP dA = alpha g B^T, dB = alpha A^T g
 * (reduced over broadcast batch axes). Error model: see the file comment (extra = 3). */

static void scaled_matmul_defaults(ref_params *p)
{
    p->alpha = 1.0;
}

static ref_status scaled_matmul_shape(const ref_params *p, int n, const ref_shape *in,
                                      ref_shape *out, ref_err *e)
{
    if (!isfinite(p->alpha))
        return ref_err_set(e, "scaledMatmul needs a finite alpha, got %g", p->alpha);
    return matmul_shape(p, n, in, out, e);
}

static ref_status scaled_matmul_fwd(const ref_params *p, int n, const ref_tensor *in,
                                    ref_tensor *out, const ref_mag *mags)
{
    (void)n;
    return mm_forward(p, in, out, mags, p->alpha, 3);
}

static ref_status scaled_matmul_vjp(const ref_params *p, int n, const ref_tensor *in,
                                    const ref_tensor *y, const ref_tensor *gt, ref_tensor *grad,
                                    const ref_mag *gmag)
{
    (void)n;
    (void)y;
    return mm_vjp(p, in, gt, grad, gmag, p->alpha, 3);
}

static ref_status scaled_matmul_fwd_at(const ref_params *p, int n, const ref_tensor *in,
                                       ref_picks *pk)
{
    (void)n;
    return mm_forward_at(in, pk, p->alpha, 3, p->plain_sums);
}

static ref_status scaled_matmul_vjp_at_one(const ref_params *p, int n, const ref_tensor *in,
                                           const ref_tensor *gt, int wrt, ref_picks *pk)
{
    (void)n;
    return mm_vjp_at(in, gt, wrt, pk, p->alpha, 3);
}

static ref_status scaled_matmul_vjp_at(const ref_params *p, int n, const ref_tensor *in,
                                       const ref_tensor *gt, ref_picks *pk)
{
    return ref_vjp_at_each(scaled_matmul_vjp_at_one, p, n, in, gt, pk);
}

static ref_status sample_scaled_matmul(ref_rng *r, const ref_sample_req *req, ref_params *p,
                                       int *n, ref_shape *in)
{
    ref_status st = sample_matmul(r, req, p, n, in);
    /* |alpha| on both sides of 1 (the split-scaling and the plain-scaling paths) and both signs */
    p->alpha = (ref_rng_uniform(r) * 2.0 - 1.0) * 3.0;
    return st;
}

/* ---- softmaxMatmul: softmax(S, last axis) @ V -----------------------------------------------
 * Proposal (not in TorchLean). S [..., n, m], V [..., m, d] with EQUAL leading axes (no
 * broadcasting, no 1-D promotion; rank >= 2); out [..., n, d]. P = softmax of each row of S
 * (max-shifted, as the softmax op); out = P V. m = 0: out = 0 (empty sum). No mask (the optional
 * hard mask of ops.md is not part of this op in capcheck; attention covers masking).
 * VJP: dV = P^T g; dP = g V^T; dS = P (dP - rowsum(P dP)).
 *
 * Error model (units of u). P_ik carries the softmax op's relative error
 *   F_ik = 3 + |S_ik - max_i| + (m - 1) + sum_k P_ik (|S_ik - max_i| + 2)   (ref_softmax.c)
 * so out_ij (a length-m dot of P with V): m_ij = sum_k P_ik |V_kj| (m + F_ik).
 * VJP, with Gabs_ik = sum_j |g_ij V_kj| (>= |dP_ik|), r_i = sum_k P_ik dP_ik:
 *   dP_ik error <= d Gabs_ik;
 *   r_i error   <= R_i = sum_k P_ik (m + d + F_ik) Gabs_ik, which also covers the alternative
 *                 rowsum(g * out) form (length-d dot with out's own error);
 *   m(dS_ik)    = P_ik (F_ik |dP_ik - r_i| + d Gabs_ik + R_i + |dP_ik| + |r_i|) + |dS_ik|;
 *   m(dV_kj)    = sum_i P_ik |g_ij| (n + F_ik).
 * c_fwd = c_vjp = 2 (second-order slack).
 * Strict f16/bf16: the softmax and each product run in float32, but P (and dP in the VJP) is
 * stored in the dtype between them (ATen: _softmax, then matmul), so the dtype share is those
 * roundings and the final one:
 *   out: sum_k P_ik |V_kj| + |out_ij|;   dV: sum_i P_ik |g_ij| + |dV_kj|;
 *   dS:  P_ik (|dP_ik - r_i| + Gabs_ik + 2 sum_k P_ik Gabs_ik) + |dS_ik|.
 * prob: every length (m, n, d, and F's m - 1) becomes its square root (Fp in place of F). */

/* One softmax row with its error factors F (see above) and their probabilistic form Fp (m - 1
 * replaced by sqrt(m - 1)). */
static void sm_row(const double *s, int64_t m, double *P, double *F, double *Fp)
{
    if (m == 0)
        return;
    double mx = s[0], sum = 0.0, spread = 0.0;
    for (int64_t k = 1; k < m; k++)
        if (s[k] > mx)
            mx = s[k];
    for (int64_t k = 0; k < m; k++) {
        P[k] = exp(s[k] - mx);
        sum += P[k];
    }
    for (int64_t k = 0; k < m; k++) {
        P[k] /= sum;
        spread += ref_mag_prod(P[k], fabs(s[k] - mx) + 2.0);
    }
    for (int64_t k = 0; k < m; k++) {
        F[k] = 3.0 + fabs(s[k] - mx) + (double)(m - 1) + spread;
        Fp[k] = 3.0 + fabs(s[k] - mx) + sqrt((double)(m - 1)) + spread;
    }
}

typedef struct {
    int64_t batch, n, m, d;
} smm_geom;

static smm_geom smm_geometry(const ref_shape *S, const ref_shape *V)
{
    smm_geom g = {1, S->dim[S->rank - 2], S->dim[S->rank - 1], V->dim[V->rank - 1]};
    for (int i = 0; i + 2 < S->rank; i++)
        g.batch *= S->dim[i];
    return g;
}

static ref_status softmax_matmul_shape(const ref_params *p, int n, const ref_shape *in,
                                       ref_shape *out, ref_err *e)
{
    (void)p;
    (void)n;
    const ref_shape *S = &in[0], *V = &in[1];
    char ss[96], sv[96];
    ref_shape_fmt(S, ss, sizeof ss);
    ref_shape_fmt(V, sv, sizeof sv);
    if (S->rank < 2 || V->rank != S->rank)
        return ref_err_set(e, "softmaxMatmul wants S [..., n, m] and V [..., m, d] of the same "
                              "rank >= 2, got %s and %s", ss, sv);
    for (int i = 0; i + 2 < S->rank; i++)
        if (S->dim[i] != V->dim[i])
            return ref_err_set(e, "softmaxMatmul leading axes must be equal (no broadcasting): "
                                  "%s and %s", ss, sv);
    if (S->dim[S->rank - 1] != V->dim[V->rank - 2])
        return ref_err_set(e, "softmaxMatmul inner extents differ: S %s has %lld keys, V %s has "
                              "%lld rows", ss, (long long)S->dim[S->rank - 1], sv,
                           (long long)V->dim[V->rank - 2]);
    *out = *S;
    out->dim[out->rank - 1] = V->dim[V->rank - 1];
    return REF_OK;
}

/* out[b, i, j] from row (b, i)'s P, F, Fp and Vj = V[b, :, j] (a row of V transposed), into *y
 * and, when mags, element i of mags' planes. */
static void smm_out_elem(const smm_geom *g, const double *Vj, const double *P, const double *F,
                         const double *Fp, double *y, const ref_mag *mags, int64_t i)
{
    double s = 0.0, s_mag = 0.0, s_pv = 0.0, s_prob = 0.0;
    for (int64_t k = 0; k < g->m; k++) {
        double pv = ref_mag_prod(P[k], fabs(Vj[k]));
        s += P[k] * Vj[k];
        s_mag += ref_mag_prod(P[k], fabs(Vj[k]) * ((double)g->m + F[k]));
        s_pv += pv;
        s_prob += ref_mag_prod(pv, sqrt((double)g->m) + Fp[k]);
    }
    *y = s;
    if (mags)
        ref_mag_set(mags, i, s_mag, s_pv + fabs(s), s_prob);
}

typedef struct {
    smm_geom g;
    const ref_tensor *in, *gt;
    ref_tensor *out, *grad;
    const ref_mag *mags, *mS, *mV; /* mS, mV: gradients' planes, NULL where not wanted */
    int failed;
} smm_job;

/* Batch b's V transposed into Vt [d, m] (its columns read along rows), unless *have is b. */
static void smm_vt(const smm_geom *g, const ref_tensor *in, int64_t b, double *Vt, int64_t *have)
{
    if (*have != b)
        ref_transpose(in[1].v + b * g->m * g->d, g->m, g->d, Vt);
    *have = b;
}

static double *smm_vt_alloc(const smm_geom *g)
{
    return malloc(sizeof(double) * (size_t)(g->m * g->d + 1));
}

/* Rows (b, i), flattened, split over threads. */
static void smm_forward_rows(void *ctx, int64_t lo, int64_t hi)
{
    smm_job *t = ctx;
    const smm_geom *g = &t->g;
    double *P = malloc(sizeof(double) * (size_t)(g->m + 1) * 3);
    double *Vt = smm_vt_alloc(g);
    int64_t have = -1;
    if (!P || !Vt) {
        free(P), free(Vt);
        t->failed = 1;
        return;
    }
    double *F = P + g->m + 1, *Fp = F + g->m + 1;
    for (int64_t bi = lo; bi < hi; bi++) {
        smm_vt(g, t->in, bi / g->n, Vt, &have);
        sm_row(t->in[0].v + bi * g->m, g->m, P, F, Fp);
        for (int64_t j = 0; j < g->d; j++)
            smm_out_elem(g, Vt + j * g->m, P, F, Fp, &t->out->v[bi * g->d + j], t->mags,
                         bi * g->d + j);
    }
    free(P), free(Vt);
}

static ref_status softmax_matmul_fwd(const ref_params *p, int n, const ref_tensor *in,
                                     ref_tensor *out, const ref_mag *mags)
{
    (void)n;
    smm_job t = {.g = smm_geometry(&in[0].shape, &in[1].shape), .in = in, .out = out,
                 .mags = mags};
    ref_parallel_for(p->threads, t.g.batch * t.g.n, 1, smm_forward_rows, &t);
    return t.failed ? REF_ENOMEM : REF_OK;
}

/* One row of the VJP: dP and Gabs of row (b, i) from its P, F, Fp, its r, R, Rp and PG, and dS'
 * with its three magnitudes at every k (into element k of mdS's planes, all three present).
 * Vt is batch b's V transposed (smm_vt): dP[k] = sum_j g[j] V[k, j] is formed for every k side
 * by side, j outermost. */
static void smm_vjp_from_p(const smm_geom *g, const double *Vt, const double *G, const double *P,
                           const double *F, const double *Fp, double *dP, double *Gabs,
                           double *dS, const ref_mag *mdS)
{
    ref_row_times(G, g->d, Vt, g->m, g->m, dP, Gabs);
    double r = 0.0;
    for (int64_t k = 0; k < g->m; k++)
        r += P[k] * dP[k];
    double R = 0.0, Rp = 0.0, PG = 0.0, sd = sqrt((double)g->d);
    for (int64_t k = 0; k < g->m; k++) {
        R += ref_mag_prod(P[k], ((double)(g->m + g->d) + F[k]) * Gabs[k]);
        Rp += ref_mag_prod(P[k], (sqrt((double)g->m) + sd + Fp[k]) * Gabs[k]);
        PG += ref_mag_prod(P[k], Gabs[k]);
    }
    for (int64_t k = 0; k < g->m; k++) {
        dS[k] = P[k] * (dP[k] - r);
        ref_mag_set(mdS, k,
                    ref_mag_prod(P[k], F[k] * fabs(dP[k] - r) + (double)g->d * Gabs[k] + R +
                                           fabs(dP[k]) + fabs(r)) +
                        fabs(dS[k]),
                    ref_mag_prod(P[k], fabs(dP[k] - r) + Gabs[k] + 2.0 * PG) + fabs(dS[k]),
                    ref_mag_prod(P[k], Fp[k] * fabs(dP[k] - r) + sd * Gabs[k] + Rp +
                                           fabs(dP[k]) + fabs(r)) +
                        fabs(dS[k]));
    }
}

/* Batches b split over threads (dV sums over the rows of its batch). */
static void smm_vjp_batches(void *ctx, int64_t lo, int64_t hi)
{
    smm_job *t = ctx;
    const smm_geom *g = &t->g;
    size_t row = (size_t)(g->m + 1);
    double *buf = malloc(sizeof(double) * row * 9), *Vt = smm_vt_alloc(g);
    int64_t have = -1;
    if (!buf || !Vt) {
        free(buf), free(Vt);
        t->failed = 1;
        return;
    }
    double *P = buf, *F = P + row, *Fp = F + row, *dP = Fp + row, *Gabs = dP + row;
    double *dS = Gabs + row;
    ref_mag mdS = {dS + row, dS + 2 * row, dS + 3 * row};
    for (int64_t b = lo; b < hi; b++)
        for (int64_t i = 0; i < g->n; i++) {
            int64_t bi = b * g->n + i, srow = bi * g->m;
            const double *G = t->gt->v + bi * g->d;
            smm_vt(g, t->in, b, Vt, &have);
            sm_row(t->in[0].v + bi * g->m, g->m, P, F, Fp);
            smm_vjp_from_p(g, Vt, G, P, F, Fp, dP, Gabs, dS, &mdS);
            for (int64_t k = 0; k < g->m; k++) {
                if (t->grad[0].v)
                    t->grad[0].v[srow + k] = dS[k];
                if (t->grad[0].v && t->mS)
                    ref_mag_set(t->mS, srow + k, mdS.worst[k], mdS.dtype[k], mdS.prob[k]);
                if (t->grad[1].v)
                    for (int64_t j = 0; j < g->d; j++) {
                        int64_t o = b * g->m * g->d + k * g->d + j;
                        t->grad[1].v[o] += P[k] * G[j];
                        if (t->mV) { /* dtype and prob gather sum_i P|g| and its prob form */
                            double pg = ref_mag_prod(P[k], fabs(G[j]));
                            t->mV->worst[o] +=
                                ref_mag_prod(P[k], fabs(G[j]) * ((double)g->n + F[k]));
                            if (t->mV->dtype)
                                t->mV->dtype[o] += pg;
                            if (t->mV->prob)
                                t->mV->prob[o] += ref_mag_prod(pg, sqrt((double)g->n) + Fp[k]);
                        }
                    }
            }
        }
    free(buf), free(Vt);
}

static ref_status softmax_matmul_vjp(const ref_params *p, int n, const ref_tensor *in,
                                     const ref_tensor *y, const ref_tensor *gt, ref_tensor *grad,
                                     const ref_mag *gmag)
{
    (void)n;
    (void)y;
    smm_job t = {.g = smm_geometry(&in[0].shape, &in[1].shape), .in = in, .gt = gt,
                 .grad = grad, .mS = gmag && gmag[0].worst ? &gmag[0] : NULL,
                 .mV = gmag && gmag[1].worst ? &gmag[1] : NULL};
    int64_t nv = ref_numel(&in[1].shape);
    if (grad[1].v)
        memset(grad[1].v, 0, sizeof(double) * (size_t)nv);
    double *vplanes[3] = {t.mV ? t.mV->worst : NULL, t.mV ? t.mV->dtype : NULL,
                          t.mV ? t.mV->prob : NULL};
    for (int k = 0; grad[1].v && k < 3; k++)
        if (vplanes[k])
            memset(vplanes[k], 0, sizeof(double) * (size_t)nv);
    ref_parallel_for(p->threads, t.g.batch, 1, smm_vjp_batches, &t);
    for (int64_t o = 0; grad[1].v && t.mV && t.mV->dtype && o < nv; o++)
        t.mV->dtype[o] += fabs(grad[1].v[o]); /* and the final rounding */
    return t.failed ? REF_ENOMEM : REF_OK;
}

/* Picked elements: a row's softmax (and, for dS, its VJP row) is made once for the picks in
 * that row; a dV entry sums over every row of its batch, whose P and F are made once per batch
 * for the picks in it (the picks come in index order). */
static ref_status softmax_matmul_fwd_at(const ref_params *p, int n, const ref_tensor *in,
                                        ref_picks *pk)
{
    (void)p, (void)n;
    smm_geom g = smm_geometry(&in[0].shape, &in[1].shape);
    double *P = malloc(sizeof(double) * (size_t)(g.m + 1) * 3);
    double *Vt = smm_vt_alloc(&g);
    if (!P || !Vt) {
        free(P), free(Vt);
        return REF_ENOMEM;
    }
    double *F = P + g.m + 1, *Fp = F + g.m + 1;
    int64_t have = -1, have_b = -1;
    for (int64_t e = 0; e < pk->count; e++) {
        int64_t bi = pk->at[e] / g.d, j = pk->at[e] % g.d;
        smm_vt(&g, in, bi / g.n, Vt, &have_b);
        if (bi != have)
            sm_row(in[0].v + bi * g.m, g.m, P, F, Fp);
        have = bi;
        smm_out_elem(&g, Vt + j * g.m, P, F, Fp, &pk->v[e], pk->mag.worst ? &pk->mag : NULL, e);
    }
    free(P), free(Vt);
    return REF_OK;
}

/* Picked gradients, a batch at a time: the softmax rows (P, F) of a batch with picks are made
 * once for both gradients: dS's rows add dP, r and R to their row's P and F (smm_vjp_from_p);
 * a dV entry sums over every row of its batch, formed with the rows outermost and the batch's
 * picks side by side (each still sums in increasing i). */
static ref_status softmax_matmul_vjp_at(const ref_params *p, int n, const ref_tensor *in,
                                        const ref_tensor *gt, ref_picks *pk)
{
    (void)p, (void)n;
    smm_geom g = smm_geometry(&in[0].shape, &in[1].shape);
    ref_picks none = {0}, *pS = &pk[0], *pV = n > 1 ? &pk[1] : &none;
    size_t row = (size_t)(g.m + 1), rows = g.n > 0 ? (size_t)g.n : 1;
    int64_t most = pS->count > pV->count ? pS->count : pV->count;
    double *P = malloc(sizeof(double) * row * rows), *F = malloc(sizeof(double) * row * rows);
    double *Fp = malloc(sizeof(double) * row * rows);
    double *buf = malloc(sizeof(double) * row * 6), *Vt = smm_vt_alloc(&g);
    int64_t *kk = malloc(sizeof(int64_t) * (size_t)(most + 1));
    int64_t *jj = malloc(sizeof(int64_t) * (size_t)(most + 1));
    double *smag = malloc(sizeof(double) * (size_t)(most + 1) * 3);
    ref_status st = P && F && Fp && buf && Vt && kk && jj && smag ? REF_OK : REF_ENOMEM;
    double *dP = buf, *Gabs = dP + row, *dS = Gabs + row;
    ref_mag mdS = {dS + row, dS + 2 * row, dS + 3 * row};
    /* dV's sums: worst, sum P|g| (dtype) and its prob form */
    double *spg = smag + most + 1, *sprob = spg + most + 1;
    int64_t perS = g.n * g.m, perV = g.m * g.d, loS = 0, hiS = 0, loV = 0, hiV = 0;
    for (int64_t b = 0; st == REF_OK && b < g.batch && (hiS < pS->count || hiV < pV->count); b++) {
        for (loS = hiS; hiS < pS->count && pS->at[hiS] / perS == b;)
            hiS++;
        for (loV = hiV; hiV < pV->count && pV->at[hiV] / perV == b;)
            hiV++;
        if (loV < hiV) /* dV reads every row of the batch */
            for (int64_t i = 0; i < g.n; i++)
                sm_row(in[0].v + (b * g.n + i) * g.m, g.m, P + (size_t)i * row,
                       F + (size_t)i * row, Fp + (size_t)i * row);
        int64_t have = -1, have_b = -1;
        for (int64_t e = loS; e < hiS; e++) { /* dS[b, i, k] */
            int64_t i = pS->at[e] % perS / g.m, k = pS->at[e] % g.m;
            double *Pi = P + (size_t)i * row, *Fi = F + (size_t)i * row;
            double *Fpi = Fp + (size_t)i * row;
            if (i != have) {
                smm_vt(&g, in, b, Vt, &have_b);
                if (loV == hiV)
                    sm_row(in[0].v + (b * g.n + i) * g.m, g.m, Pi, Fi, Fpi);
                smm_vjp_from_p(&g, Vt, gt->v + (b * g.n + i) * g.d, Pi, Fi, Fpi, dP, Gabs, dS,
                               &mdS);
            }
            have = i;
            pS->v[e] = dS[k];
            if (pS->mag.worst)
                ref_mag_set(&pS->mag, e, mdS.worst[k], mdS.dtype[k], mdS.prob[k]);
        }
        if (loV == hiV)
            continue;
        int64_t cnt = hiV - loV;
        double *v = pV->v + loV;
        for (int64_t e = 0; e < cnt; e++) { /* dV[b, k, j] = sum_i P[i, k] g[i, j] */
            kk[e] = pV->at[loV + e] % perV / g.d, jj[e] = pV->at[loV + e] % g.d;
            v[e] = smag[e] = spg[e] = sprob[e] = 0.0;
        }
        for (int64_t i = 0; i < g.n; i++) {
            const double *Pi = P + (size_t)i * row, *Fi = F + (size_t)i * row;
            const double *Fpi = Fp + (size_t)i * row;
            const double *Gi = gt->v + (b * g.n + i) * g.d;
            for (int64_t e = 0; e < cnt; e++) {
                double Pik = Pi[kk[e]], Fik = Fi[kk[e]], Gij = Gi[jj[e]];
                double pg = ref_mag_prod(Pik, fabs(Gij));
                v[e] += Pik * Gij;
                smag[e] += ref_mag_prod(Pik, fabs(Gij) * ((double)g.n + Fik));
                spg[e] += pg;
                sprob[e] += ref_mag_prod(pg, sqrt((double)g.n) + Fpi[kk[e]]);
            }
        }
        for (int64_t e = 0; pV->mag.worst && e < cnt; e++)
            ref_mag_set(&pV->mag, loV + e, smag[e], spg[e] + fabs(v[e]), sprob[e]);
    }
    free(P), free(F), free(Fp), free(buf), free(Vt), free(kk), free(jj), free(smag);
    return st;
}

/* Work of one element: a softmax row and a length-m dot (output), a row of dP (dS), the
 * softmax rows of a batch over its picks (dV, counted as one row per term). */
static double softmax_matmul_work(const ref_params *p, int n, const ref_shape *in, int wrt)
{
    (void)p, (void)n;
    smm_geom g = smm_geometry(&in[0], &in[1]);
    if (wrt < 0)
        return 2.0 * (double)g.m;
    return wrt == 0 ? (double)g.m * (double)(g.d + 2) : (double)g.n;
}

static ref_status sample_softmax_matmul(ref_rng *r, const ref_sample_req *req, ref_params *p,
                                        int *n, ref_shape *in)
{
    (void)p;
    int rank = req->rank >= 0 ? req->rank : (int)ref_rng_range(r, 2, 4);
    if (rank < 2 || rank > REF_MAX_RANK)
        return REF_ENOTAPPLICABLE;
    /* S carries the batch axes, n and m; a zero-size axis, if asked, may be any of them or d */
    int zero_d = req->zero_dim && ref_rng_range(r, 0, rank) == 0;
    int64_t cap = req->max_elems > 1 ? req->max_elems : 1;
    int64_t rows = ref_rng_range(r, 1, cap < 5 ? cap : 5);
    int64_t keys = ref_rng_range(r, 1, cap / rows < 6 ? cap / rows : 6);
    ref_sample_shape(r, rank - 2, cap / (rows * keys), 0, &in[0]); /* the leading axes */
    in[0].rank = rank;
    in[0].dim[rank - 2] = rows;
    in[0].dim[rank - 1] = keys;
    if (req->zero_dim && !zero_d)
        in[0].dim[ref_rng_range(r, 0, rank - 1)] = 0;
    in[1] = in[0];
    in[1].dim[rank - 2] = in[0].dim[rank - 1];
    in[1].dim[rank - 1] = zero_d ? 0 : ref_rng_range(r, 1, 4);
    int64_t limit = ref_extent_cap(&in[1], rank - 1, ref_sample_budget(req));
    if (in[1].dim[rank - 1] > limit) /* V [..., m, d] within the budget */
        in[1].dim[rank - 1] = limit;
    *n = 2;
    return REF_OK;
}

/* ---- linear: y[l, o] = sum_i W[o, i] x[l, i] + b[o] at every leading index l ------------- */

static ref_status linear_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                               ref_err *e)
{
    (void)p;
    (void)n;
    const ref_shape *x = &in[0], *w = &in[1], *b = &in[2];
    char sx[96], sw[96], sb[96];
    ref_shape_fmt(x, sx, sizeof sx);
    ref_shape_fmt(w, sw, sizeof sw);
    ref_shape_fmt(b, sb, sizeof sb);
    if (x->rank < 1 || w->rank != 2 || b->rank != 1)
        return ref_err_set(e, "linear wants x [..., in], W [out, in], b [out]; got %s, %s, %s",
                           sx, sw, sb);
    if (x->dim[x->rank - 1] != w->dim[1] || b->dim[0] != w->dim[0])
        return ref_err_set(e, "linear extents disagree: x %s, W %s, b %s", sx, sw, sb);
    *out = *x;
    out->dim[out->rank - 1] = w->dim[0];
    return REF_OK;
}

/* Number of leading positions l of x [..., in] (1 for a 1-D x). */
static int64_t leading_count(const ref_shape *x)
{
    int64_t L = 1;
    for (int i = 0; i + 1 < x->rank; i++)
        L *= x->dim[i];
    return L;
}

typedef struct {
    const ref_tensor *in, *g;
    ref_tensor *out, *grad;
    const ref_mag *mags, *mx, *mw, *mb; /* NULL where not wanted */
    int64_t nin, nout, L;
} linear_job;

/* m = (in + 1)(sum|W x| + |b|): a length-(in + 1) sum with the bias. Strict: the product sum
 * in float32, rounded to the dtype before the bias is added (ATen's addmm on CPU), then the
 * sum rounded: dtype = |W x| + |y|; prob: (sqrt(in) + 1)(sum|W x| + |b|). s is sum W x. */
static void linear_set_mags(const ref_mag *mags, int64_t i, int64_t nin, double s, double s_abs,
                            double b)
{
    ref_mag_set(mags, i, (double)(nin + 1) * (s_abs + fabs(b)), fabs(s) + fabs(s + b),
                (sqrt((double)nin) + 1.0) * (s_abs + fabs(b)));
}

static void linear_rows(void *ctx, int64_t lo, int64_t hi)
{
    const linear_job *t = ctx;
    int64_t nin = t->nin, nout = t->nout;
    const double *x = t->in[0].v, *W = t->in[1].v, *b = t->in[2].v;
    for (int64_t l = lo; l < hi; l++)
        for (int64_t o = 0; o < nout; o++) {
            double s = 0.0, s_abs = 0.0;
            for (int64_t i = 0; i < nin; i++) {
                s += W[o * nin + i] * x[l * nin + i];
                s_abs += fabs(W[o * nin + i] * x[l * nin + i]);
            }
            t->out->v[l * nout + o] = s + b[o];
            if (t->mags)
                linear_set_mags(t->mags, l * nout + o, nin, s, s_abs, b[o]);
        }
}

static linear_job linear_setup(const ref_tensor *in)
{
    linear_job t = {.in = in, .nin = in[1].shape.dim[1], .nout = in[1].shape.dim[0],
                    .L = leading_count(&in[0].shape)};
    return t;
}

/* Rows l are split over threads. */
static ref_status linear_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                             const ref_mag *mags)
{
    (void)n;
    linear_job t = linear_setup(in);
    t.out = out;
    t.mags = mags && mags->worst ? mags : NULL;
    ref_parallel_for(p->threads, t.L, 1, linear_rows, &t);
    return REF_OK;
}

/* Strict: each gradient entry is one float32 sum rounded once (dtype = |value|); prob:
 * sqrt(terms). */
static void set_sum_mags(const ref_mag *mag, int64_t i, double terms, double abs_sum,
                         double value)
{
    double len = terms > 0 ? terms : 1;
    ref_mag_set(mag, i, len * abs_sum, fabs(value), sqrt(len) * abs_sum);
}

/* row[i] = sum_k a_k v_k[i], and when mags, element off + i of its planes from
 * sum_k |a_k v_k[i]| (set_sum_mags), for i < n: left folds from 0 over k < K, with
 * a_k = a[k a_step] and v_k = v + k v_step. */
static void row_of_sums(double *row, const ref_mag *mags, int64_t off, const double *a,
                        int64_t a_step, const double *v, int64_t v_step, int64_t K, int64_t n)
{
    double *mrow = mags ? mags->worst + off : NULL;
    for (int64_t i = 0; i < n; i++) {
        row[i] = 0.0;
        if (mrow)
            mrow[i] = 0.0;
    }
    for (int64_t k = 0; k < K; k++) {
        const double *vk = v + k * v_step;
        double ak = a[k * a_step];
        for (int64_t i = 0; i < n; i++) {
            row[i] += ak * vk[i];
            if (mrow)
                mrow[i] += fabs(ak * vk[i]);
        }
    }
    for (int64_t i = 0; mrow && i < n; i++)
        set_sum_mags(mags, off + i, (double)K, mrow[i], row[i]);
}

/* dx[l, i] = sum_o W[o, i] g[l, o];  dW[o, i] = sum_l g[l, o] x[l, i];  db[o] = sum_l g[l, o]:
 * each a left fold from 0, dx in increasing o, dW and db in increasing l. The loops that feed a
 * sum run outside the loop over i, so W, x and g are read along their rows and each entry
 * gathers its terms in place, in the same order (m = (terms) * sum|terms| is scaled after).
 * dx's rows l and dW's and db's rows o are split over threads. */
static void linear_dx_rows(void *ctx, int64_t lo, int64_t hi)
{
    const linear_job *t = ctx;
    int64_t nin = t->nin, nout = t->nout;
    for (int64_t l = lo; l < hi; l++) /* dx[l, :] = sum_o g[l, o] W[o, :] */
        row_of_sums(t->grad[0].v + l * nin, t->mx, l * nin, t->g->v + l * nout, 1, t->in[1].v,
                    nin, nout, nin);
}

static void linear_dw_rows(void *ctx, int64_t lo, int64_t hi)
{
    const linear_job *t = ctx;
    int64_t nin = t->nin, nout = t->nout, L = t->L;
    const double *G = t->g->v;
    double *dW = t->grad[1].v, *db = t->grad[2].v;
    for (int64_t o = lo; o < hi; o++) {
        if (dW) /* dW[o, :] = sum_l g[l, o] x[l, :] */
            row_of_sums(dW + o * nin, t->mw, o * nin, G + o, nout, t->in[0].v, nin, L, nin);
        if (db) {
            double s = 0.0, s_abs = 0.0;
            for (int64_t l = 0; l < L; l++) {
                s += G[l * nout + o];
                s_abs += fabs(G[l * nout + o]);
            }
            db[o] = s;
            if (t->mb)
                set_sum_mags(t->mb, o, (double)L, s_abs, s);
        }
    }
}

static ref_status linear_vjp(const ref_params *p, int n, const ref_tensor *in,
                             const ref_tensor *y, const ref_tensor *g, ref_tensor *grad,
                             const ref_mag *gmag)
{
    (void)n;
    (void)y;
    linear_job t = linear_setup(in);
    t.g = g;
    t.grad = grad;
    t.mx = gmag && grad[0].v && gmag[0].worst ? &gmag[0] : NULL;
    t.mw = gmag && grad[1].v && gmag[1].worst ? &gmag[1] : NULL;
    t.mb = gmag && grad[2].v && gmag[2].worst ? &gmag[2] : NULL;
    if (grad[0].v)
        ref_parallel_for(p->threads, t.L, 1, linear_dx_rows, &t);
    if (grad[1].v || grad[2].v)
        ref_parallel_for(p->threads, t.nout, 1, linear_dw_rows, &t);
    return REF_OK;
}

/* The picked elements alone, each sum in the order above. */
static ref_status linear_fwd_at(const ref_params *p, int n, const ref_tensor *in, ref_picks *pk)
{
    (void)p, (void)n;
    linear_job t = linear_setup(in);
    const double *x = in[0].v, *W = in[1].v, *b = in[2].v;
    size_t len = (size_t)(pk->count + 1);
    int64_t *wo = malloc(sizeof(int64_t) * len), *xo = malloc(sizeof(int64_t) * len);
    double *s_abs = malloc(sizeof(double) * len);
    if (!wo || !xo || !s_abs) {
        free(wo), free(xo), free(s_abs);
        return REF_ENOMEM;
    }
    for (int64_t e = 0; e < pk->count; e++) { /* W's row o and x's row l */
        wo[e] = pk->at[e] % t.nout * t.nin, xo[e] = pk->at[e] / t.nout * t.nin;
        pk->v[e] = s_abs[e] = 0.0;
    }
    ref_dots(t.nin, W, wo, x, xo, pk->count, pk->v, s_abs);
    for (int64_t e = 0; e < pk->count; e++) {
        double bo = b[pk->at[e] % t.nout], sum = pk->v[e];
        pk->v[e] = sum + bo;
        if (pk->mag.worst)
            linear_set_mags(&pk->mag, e, t.nin, sum, s_abs[e], bo);
    }
    free(wo), free(xo), free(s_abs);
    return REF_OK;
}

/* dx picks sum over o (W's rows), dW and db picks over l (rows of g and x): that index
 * outermost, the picks side by side. */
static ref_status linear_vjp_at_one(const ref_params *p, int n, const ref_tensor *in,
                                    const ref_tensor *g, int wrt, ref_picks *pk)
{
    (void)p, (void)n;
    linear_job t = linear_setup(in);
    const double *x = in[0].v, *W = in[1].v, *G = g->v;
    size_t len = (size_t)(pk->count + 1);
    double *abs_sum = malloc(sizeof(double) * len);
    int64_t *po = malloc(sizeof(int64_t) * len), *qo = malloc(sizeof(int64_t) * len);
    if (!abs_sum || !po || !qo) {
        free(abs_sum), free(po), free(qo);
        return REF_ENOMEM;
    }
    int64_t terms = wrt == 0 ? t.nout : t.L;
    for (int64_t e = 0; e < pk->count; e++) {
        int64_t f = pk->at[e];
        pk->v[e] = abs_sum[e] = 0.0;
        po[e] = wrt == 0 ? f % t.nin : wrt == 1 ? f / t.nin : f; /* W[0, i]; g[0, o]; g[0, o] */
        qo[e] = wrt == 0 ? f / t.nin * t.nout : wrt == 1 ? f % t.nin : 0; /* g[l, 0]; x[0, i] */
    }
    /* o outermost for dx (W[o, i] g[l, o]), l for dW (g[l, o] x[l, i]) and db (g[l, o]) */
    if (wrt == 0)
        picked_sums(terms, W, t.nin, po, G, 1, qo, pk->count, pk->v, abs_sum);
    else if (wrt == 1)
        picked_sums(terms, G, t.nout, po, x, t.nin, qo, pk->count, pk->v, abs_sum);
    else
        for (int64_t r = 0; r < terms; r++)
            for (int64_t e = 0; e < pk->count; e++) {
                double term = G[r * t.nout + po[e]];
                pk->v[e] += term;
                abs_sum[e] += fabs(term);
            }
    for (int64_t e = 0; pk->mag.worst && e < pk->count; e++)
        set_sum_mags(&pk->mag, e, (double)terms, abs_sum[e], pk->v[e]);
    free(abs_sum), free(po), free(qo);
    return REF_OK;
}

static ref_status linear_vjp_at(const ref_params *p, int n, const ref_tensor *in,
                                const ref_tensor *g, ref_picks *pk)
{
    return ref_vjp_at_each(linear_vjp_at_one, p, n, in, g, pk);
}

static double linear_work(const ref_params *p, int n, const ref_shape *in, int wrt)
{
    (void)p, (void)n;
    return wrt < 0 ? (double)in[1].dim[1] : wrt == 0 ? (double)in[1].dim[0]
                                                     : (double)leading_count(&in[0]);
}

static ref_status sample_linear(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                ref_shape *in)
{
    (void)p;
    int rank = req->rank >= 1 ? req->rank : (int)ref_rng_range(r, 1, 3);
    ref_sample_shape(r, rank, req->max_elems, req->zero_dim, &in[0]);
    int64_t side = (int64_t)floor(sqrt((double)(req->max_elems > 1 ? req->max_elems : 1)));
    int64_t nout = ref_rng_range(r, 1, side > 1 ? side : 1);
    int64_t nin = in[0].dim[rank - 1];
    in[1].rank = 2;
    in[1].dim[0] = nout;
    in[1].dim[1] = nin;
    in[2].rank = 1;
    in[2].dim[0] = nout;
    /* out [..., nout] and W [nout, nin] within the budget (nout was drawn up to sqrt(max_elems)
     * on top of a full-size x) */
    ref_shape out = in[0];
    int64_t budget = ref_sample_budget(req);
    int64_t limit_w = ref_extent_cap(&in[1], 0, budget);
    int64_t limit_y = ref_extent_cap(&out, rank - 1, budget);
    if (nout > limit_w || nout > limit_y)
        in[1].dim[0] = in[2].dim[0] = limit_w < limit_y ? limit_w : limit_y;
    *n = 3;
    return REF_OK;
}

const ref_op ref_family_linalg[] = {
    {.name = "matmul", .report_name = "matmul", .min_inputs = 2, .max_inputs = 2,
     .input_names = {"a", "b"}, .requires_vjp = 1, .c_fwd = 2, .c_vjp = 2,
     .compensated = REF_COMPENSATED_FWD, .shape = matmul_shape, .forward = matmul_fwd, .vjp = matmul_vjp, .sample = sample_matmul,
     .forward_at = matmul_fwd_at, .vjp_at = matmul_vjp_at, .work = matmul_work},
    {.name = "scaledMatmul", .report_name = "scaled_matmul", .min_inputs = 2, .max_inputs = 2,
     .input_names = {"a", "b"}, .params = REF_P_ALPHA, .requires_vjp = 1, .c_fwd = 2,
     .c_vjp = 2, .compensated = REF_COMPENSATED_FWD,
     .note = "Proposal (not in TorchLean): alpha * matmul(a, b)",
     .set_defaults = scaled_matmul_defaults, .shape = scaled_matmul_shape,
     .forward = scaled_matmul_fwd, .vjp = scaled_matmul_vjp, .sample = sample_scaled_matmul,
     .forward_at = scaled_matmul_fwd_at, .vjp_at = scaled_matmul_vjp_at, .work = matmul_work},
    {.name = "softmaxMatmul", .report_name = "softmax_matmul", .min_inputs = 2, .max_inputs = 2,
     .input_names = {"s", "v"}, .requires_vjp = 1, .c_fwd = 2, .c_vjp = 2,
     .note = "Proposal (not in TorchLean): softmax(s, -1) @ v; equal leading axes, no mask",
     .shape = softmax_matmul_shape, .forward = softmax_matmul_fwd, .vjp = softmax_matmul_vjp,
     .sample = sample_softmax_matmul, .forward_at = softmax_matmul_fwd_at,
     .vjp_at = softmax_matmul_vjp_at, .work = softmax_matmul_work},
    {.name = "linear", .report_name = "linear", .min_inputs = 3, .max_inputs = 3,
     .input_names = {"x", "w", "b"}, .requires_vjp = 1, .c_fwd = 2, .c_vjp = 2,
     .shape = linear_shape, .forward = linear_fwd, .vjp = linear_vjp, .sample = sample_linear,
     .forward_at = linear_fwd_at, .vjp_at = linear_vjp_at, .work = linear_work},
};
const int ref_family_linalg_count = (int)(sizeof ref_family_linalg / sizeof ref_family_linalg[0]);
