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
 * those roundings. prob: K becomes sqrt(K). */
#include "ref_families.h"

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
 * comment says. The loop over k runs outside the one over j: B is read along its rows and row i
 * of out gathers its sums in place, each in increasing k as the formula reads. */
static void mm_forward(const ref_tensor *in, ref_tensor *out, const ref_mag *mags, double alpha,
                       int extra)
{
    double *mag = ref_mag_worst(mags);
    mm_geom g;
    mm_geometry(&in[0].shape, &in[1].shape, &g, NULL);
    int64_t nb = ref_numel(&g.batch_out);
    for (int64_t b = 0; b < nb; b++) {
        const double *A = in[0].v + batch_offset(&g.batch_out, &g.batch_a, b) * g.m * g.k;
        const double *B = in[1].v + batch_offset(&g.batch_out, &g.batch_b, b) * g.k * g.n;
        for (int64_t i = 0; i < g.m; i++) {
            double *row = out->v + (b * g.m + i) * g.n, *mrow = mag ? mag + (b * g.m + i) * g.n
                                                                    : NULL;
            for (int64_t j = 0; j < g.n; j++) {
                row[j] = 0.0;
                if (mrow)
                    mrow[j] = 0.0;
            }
            for (int64_t k = 0; k < g.k; k++) {
                double a = A[i * g.k + k];
                const double *Bk = B + k * g.n;
                for (int64_t j = 0; j < g.n; j++) {
                    row[j] += a * Bk[j];
                    if (mrow)
                        mrow[j] += fabs(a * Bk[j]);
                }
            }
            double len = (double)(g.k > 0 ? g.k : 1);
            for (int64_t j = 0; j < g.n; j++) {
                row[j] = alpha * row[j];
                if (mrow) {
                    double S = fabs(alpha) * mrow[j];
                    ref_mag_set(mags, (b * g.m + i) * g.n + j,
                                fabs(alpha) * (len + extra) * mrow[j], extra * S + fabs(row[j]),
                                (sqrt(len) + extra) * S);
                }
            }
        }
    }
}

static ref_status matmul_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                             const ref_mag *mags)
{
    (void)p;
    (void)n;
    mm_forward(in, out, mags, 1.0, 0);
    return REF_OK;
}

/* dA[ba, i, k] = alpha * sum over batches b that read ba, sum_j g[b, i, j] B[bb, k, j];
 * dB[bb, k, j] = alpha * sum over batches b that read bb, sum_i A[ba, i, k] g[b, i, j]
 * (left folds from 0: b outer, then j for dA and i for dB).
 * m = |alpha| (uses + extra) sum|terms|, uses = the number of terms summed into the element:
 * n per batch b reading ba for dA, m per batch reading bb for dB (counted per batch, once). */
static ref_status mm_vjp(const ref_tensor *in, const ref_tensor *gt, ref_tensor *grad,
                         const ref_mag *gmag, double alpha, int extra)
{
    mm_geom g;
    mm_geometry(&in[0].shape, &in[1].shape, &g, NULL);
    int64_t nb = ref_numel(&g.batch_out);
    int64_t na = ref_numel(&in[0].shape), nbb = ref_numel(&in[1].shape);
    int64_t nba = ref_numel(&g.batch_a), nbb_batches = ref_numel(&g.batch_b);
    int64_t *reads_a = calloc((size_t)nba + 1, sizeof(int64_t));
    int64_t *reads_b = calloc((size_t)nbb_batches + 1, sizeof(int64_t));
    if (!reads_a || !reads_b) {
        free(reads_a), free(reads_b);
        return REF_ENOMEM;
    }
    double *dA = grad[0].v, *dB = grad[1].v;
    double *mA = dA && gmag ? gmag[0].worst : NULL, *mB = dB && gmag ? gmag[1].worst : NULL;
    for (int64_t i = 0; dA && i < na; i++) {
        dA[i] = 0.0;
        if (mA)
            mA[i] = 0.0; /* sum|terms| until the final scaling */
    }
    for (int64_t i = 0; dB && i < nbb; i++) {
        dB[i] = 0.0;
        if (mB)
            mB[i] = 0.0;
    }
    for (int64_t b = 0; b < nb; b++) {
        int64_t ba = batch_offset(&g.batch_out, &g.batch_a, b);
        int64_t bb = batch_offset(&g.batch_out, &g.batch_b, b);
        int64_t oa = ba * g.m * g.k, ob = bb * g.k * g.n;
        const double *A = in[0].v + oa, *B = in[1].v + ob, *G = gt->v + b * g.m * g.n;
        reads_a[ba]++;
        reads_b[bb]++;
        if (dA) /* dA[i, k] += sum_j g[i, j] B[k, j]: rows of g and B */
            for (int64_t i = 0; i < g.m; i++)
                for (int64_t k = 0; k < g.k; k++) {
                    double s = dA[oa + i * g.k + k], s_abs = mA ? mA[oa + i * g.k + k] : 0.0;
                    for (int64_t j = 0; j < g.n; j++) {
                        s += G[i * g.n + j] * B[k * g.n + j];
                        s_abs += fabs(G[i * g.n + j] * B[k * g.n + j]);
                    }
                    dA[oa + i * g.k + k] = s;
                    if (mA)
                        mA[oa + i * g.k + k] = s_abs;
                }
        if (dB) /* dB[k, j] += A[i, k] g[i, j]: row k of dB gathers in increasing i */
            for (int64_t i = 0; i < g.m; i++)
                for (int64_t k = 0; k < g.k; k++) {
                    double a = A[i * g.k + k];
                    double *row = dB + ob + k * g.n, *mrow = mB ? mB + ob + k * g.n : NULL;
                    for (int64_t j = 0; j < g.n; j++) {
                        row[j] += a * G[i * g.n + j];
                        if (mrow)
                            mrow[j] += fabs(a * G[i * g.n + j]);
                    }
                }
    }
    for (int t = 0; t < 2; t++) {
        double *d = t == 0 ? dA : dB, *m = t == 0 ? mA : mB;
        if (!d)
            continue;
        int64_t cnt = t == 0 ? na : nbb, per = t == 0 ? g.m * g.k : g.k * g.n;
        for (int64_t i = 0; i < cnt; i++) {
            d[i] *= alpha;
            if (m) {
                int64_t reads = t == 0 ? reads_a[i / per] : reads_b[i / per];
                int64_t uses = reads * (t == 0 ? g.n : g.m);
                double len = (double)(uses > 0 ? uses : 1), S = fabs(alpha) * m[i];
                ref_mag_set(&gmag[t], i, fabs(alpha) * (len + extra) * m[i],
                            (extra + (reads > 1)) * S + fabs(d[i]), (sqrt(len) + extra) * S);
            }
        }
    }
    free(reads_a), free(reads_b);
    return REF_OK;
}

static ref_status matmul_vjp(const ref_params *p, int n, const ref_tensor *in,
                             const ref_tensor *y, const ref_tensor *gt, ref_tensor *grad,
                             const ref_mag *gmag)
{
    (void)p;
    (void)n;
    (void)y;
    return mm_vjp(in, gt, grad, gmag, 1.0, 0);
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
    mm_forward(in, out, mags, p->alpha, 3);
    return REF_OK;
}

static ref_status scaled_matmul_vjp(const ref_params *p, int n, const ref_tensor *in,
                                    const ref_tensor *y, const ref_tensor *gt, ref_tensor *grad,
                                    const ref_mag *gmag)
{
    (void)n;
    (void)y;
    return mm_vjp(in, gt, grad, gmag, p->alpha, 3);
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

static ref_status softmax_matmul_fwd(const ref_params *p, int n, const ref_tensor *in,
                                     ref_tensor *out, const ref_mag *mags)
{
    (void)p;
    (void)n;
    smm_geom g = smm_geometry(&in[0].shape, &in[1].shape);
    double *P = malloc(sizeof(double) * (size_t)(g.m + 1));
    double *F = malloc(sizeof(double) * (size_t)(g.m + 1));
    double *Fp = malloc(sizeof(double) * (size_t)(g.m + 1));
    if (!P || !F || !Fp) {
        free(P), free(F), free(Fp);
        return REF_ENOMEM;
    }
    for (int64_t b = 0; b < g.batch; b++) {
        const double *V = in[1].v + b * g.m * g.d;
        for (int64_t i = 0; i < g.n; i++) {
            sm_row(in[0].v + (b * g.n + i) * g.m, g.m, P, F, Fp);
            for (int64_t j = 0; j < g.d; j++) {
                double s = 0.0, s_mag = 0.0, s_pv = 0.0, s_prob = 0.0;
                for (int64_t k = 0; k < g.m; k++) {
                    double pv = ref_mag_prod(P[k], fabs(V[k * g.d + j]));
                    s += P[k] * V[k * g.d + j];
                    s_mag += ref_mag_prod(P[k], fabs(V[k * g.d + j]) * ((double)g.m + F[k]));
                    s_pv += pv;
                    s_prob += ref_mag_prod(pv, sqrt((double)g.m) + Fp[k]);
                }
                out->v[(b * g.n + i) * g.d + j] = s;
                if (mags)
                    ref_mag_set(mags, (b * g.n + i) * g.d + j, s_mag, s_pv + fabs(s), s_prob);
            }
        }
    }
    free(P), free(F), free(Fp);
    return REF_OK;
}

static ref_status softmax_matmul_vjp(const ref_params *p, int n, const ref_tensor *in,
                                     const ref_tensor *y, const ref_tensor *gt, ref_tensor *grad,
                                     const ref_mag *gmag)
{
    (void)p;
    (void)n;
    (void)y;
    smm_geom g = smm_geometry(&in[0].shape, &in[1].shape);
    double *mS = gmag ? gmag[0].worst : NULL, *mV = gmag ? gmag[1].worst : NULL;
    size_t row = (size_t)(g.m + 1);
    double *P = malloc(sizeof(double) * row), *F = malloc(sizeof(double) * row);
    double *Fp = malloc(sizeof(double) * row);
    double *dP = malloc(sizeof(double) * row), *Gabs = malloc(sizeof(double) * row);
    int64_t nv = ref_numel(&in[1].shape);
    /* dV's dtype and prob shares gather beside its worst one: sum_i P|g| and its prob form */
    double *vPg = mV ? calloc((size_t)nv + 1, sizeof(double)) : NULL;
    double *vProb = mV ? calloc((size_t)nv + 1, sizeof(double)) : NULL;
    if (!P || !F || !Fp || !dP || !Gabs || (mV && (!vPg || !vProb))) {
        free(P), free(F), free(Fp), free(dP), free(Gabs), free(vPg), free(vProb);
        return REF_ENOMEM;
    }
    if (grad[1].v)
        memset(grad[1].v, 0, sizeof(double) * (size_t)nv);
    if (grad[1].v && mV)
        memset(mV, 0, sizeof(double) * (size_t)nv);
    for (int64_t b = 0; b < g.batch; b++) {
        const double *V = in[1].v + b * g.m * g.d;
        for (int64_t i = 0; i < g.n; i++) {
            int64_t srow = (b * g.n + i) * g.m;
            const double *G = gt->v + (b * g.n + i) * g.d;
            sm_row(in[0].v + srow, g.m, P, F, Fp);
            double r = 0.0;
            for (int64_t k = 0; k < g.m; k++) {
                dP[k] = 0.0;
                Gabs[k] = 0.0;
                for (int64_t j = 0; j < g.d; j++) {
                    dP[k] += G[j] * V[k * g.d + j];
                    Gabs[k] += fabs(G[j] * V[k * g.d + j]);
                }
                r += P[k] * dP[k];
            }
            double R = 0.0, Rp = 0.0, PG = 0.0, sd = sqrt((double)g.d);
            for (int64_t k = 0; k < g.m; k++) {
                R += ref_mag_prod(P[k], ((double)(g.m + g.d) + F[k]) * Gabs[k]);
                Rp += ref_mag_prod(P[k], (sqrt((double)g.m) + sd + Fp[k]) * Gabs[k]);
                PG += ref_mag_prod(P[k], Gabs[k]);
            }
            for (int64_t k = 0; k < g.m; k++) {
                double ds = P[k] * (dP[k] - r);
                if (grad[0].v)
                    grad[0].v[srow + k] = ds;
                if (grad[0].v && mS)
                    ref_mag_set(&gmag[0], srow + k,
                                ref_mag_prod(P[k], F[k] * fabs(dP[k] - r) + (double)g.d * Gabs[k] +
                                                       R + fabs(dP[k]) + fabs(r)) +
                                    fabs(ds),
                                ref_mag_prod(P[k], fabs(dP[k] - r) + Gabs[k] + 2.0 * PG) +
                                    fabs(ds),
                                ref_mag_prod(P[k], Fp[k] * fabs(dP[k] - r) + sd * Gabs[k] + Rp +
                                                       fabs(dP[k]) + fabs(r)) +
                                    fabs(ds));
                if (grad[1].v)
                    for (int64_t j = 0; j < g.d; j++) {
                        int64_t o = b * g.m * g.d + k * g.d + j;
                        grad[1].v[o] += P[k] * G[j];
                        if (mV) {
                            double pg = ref_mag_prod(P[k], fabs(G[j]));
                            mV[o] += ref_mag_prod(P[k], fabs(G[j]) * ((double)g.n + F[k]));
                            vPg[o] += pg;
                            vProb[o] += ref_mag_prod(pg, sqrt((double)g.n) + Fp[k]);
                        }
                    }
            }
        }
    }
    for (int64_t o = 0; grad[1].v && mV && o < nv; o++)
        ref_mag_set(&gmag[1], o, mV[o], vPg[o] + fabs(grad[1].v[o]), vProb[o]);
    free(P), free(F), free(Fp), free(dP), free(Gabs), free(vPg), free(vProb);
    return REF_OK;
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

/* m = (in + 1)(sum|W x| + |b|): a length-(in + 1) sum with the bias. Strict: the product sum
 * in float32, rounded to the dtype before the bias is added (ATen's addmm on CPU), then the
 * sum rounded: dtype = |W x| + |y|; prob: (sqrt(in) + 1)(sum|W x| + |b|). */
static ref_status linear_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                             const ref_mag *mags)
{
    (void)p;
    (void)n;
    int64_t nin = in[1].shape.dim[1], nout = in[1].shape.dim[0];
    int64_t L = leading_count(&in[0].shape);
    const double *x = in[0].v, *W = in[1].v, *b = in[2].v;
    for (int64_t l = 0; l < L; l++)
        for (int64_t o = 0; o < nout; o++) {
            double s = 0.0, s_abs = 0.0;
            for (int64_t i = 0; i < nin; i++) {
                s += W[o * nin + i] * x[l * nin + i];
                s_abs += fabs(W[o * nin + i] * x[l * nin + i]);
            }
            out->v[l * nout + o] = s + b[o];
            if (mags)
                ref_mag_set(mags, l * nout + o, (double)(nin + 1) * (s_abs + fabs(b[o])),
                            fabs(s) + fabs(s + b[o]),
                            (sqrt((double)nin) + 1.0) * (s_abs + fabs(b[o])));
        }
    return REF_OK;
}

/* dx[l, i] = sum_o W[o, i] g[l, o];  dW[o, i] = sum_l g[l, o] x[l, i];  db[o] = sum_l g[l, o]:
 * each a left fold from 0, dx in increasing o, dW and db in increasing l. The loops that feed a
 * sum run outside the loop over i, so W, x and g are read along their rows and each entry
 * gathers its terms in place, in the same order (m = (terms) * sum|terms| is scaled after).
 * Strict: each is one float32 sum rounded once (dtype = |value|); prob: sqrt(terms). */
static void set_sum_mags(const ref_mag *mag, int64_t i, double terms, double abs_sum,
                         double value)
{
    double len = terms > 0 ? terms : 1;
    ref_mag_set(mag, i, len * abs_sum, fabs(value), sqrt(len) * abs_sum);
}

static ref_status linear_vjp(const ref_params *p, int n, const ref_tensor *in,
                             const ref_tensor *y, const ref_tensor *g, ref_tensor *grad,
                             const ref_mag *gmag)
{
    (void)p;
    (void)n;
    (void)y;
    int64_t nin = in[1].shape.dim[1], nout = in[1].shape.dim[0];
    int64_t L = leading_count(&in[0].shape);
    const double *x = in[0].v, *W = in[1].v, *G = g->v;
    double *mx = gmag ? gmag[0].worst : NULL, *mw = gmag ? gmag[1].worst : NULL, *mb = gmag ? gmag[2].worst : NULL;
    double *dx = grad[0].v, *dW = grad[1].v, *db = grad[2].v;
    if (dx)
        for (int64_t l = 0; l < L; l++) {
            double *row = dx + l * nin, *mrow = mx ? mx + l * nin : NULL;
            for (int64_t i = 0; i < nin; i++) {
                row[i] = 0.0;
                if (mrow)
                    mrow[i] = 0.0;
            }
            for (int64_t o = 0; o < nout; o++) {
                const double *w = W + o * nin;
                double gv = G[l * nout + o];
                for (int64_t i = 0; i < nin; i++) {
                    row[i] += w[i] * gv;
                    if (mrow)
                        mrow[i] += fabs(w[i] * gv);
                }
            }
            for (int64_t i = 0; mrow && i < nin; i++)
                set_sum_mags(&gmag[0], l * nin + i, (double)nout, mrow[i], row[i]);
        }
    if (dW)
        for (int64_t o = 0; o < nout; o++) {
            double *row = dW + o * nin, *mrow = mw ? mw + o * nin : NULL;
            for (int64_t i = 0; i < nin; i++) {
                row[i] = 0.0;
                if (mrow)
                    mrow[i] = 0.0;
            }
            for (int64_t l = 0; l < L; l++) {
                const double *xl = x + l * nin;
                double gv = G[l * nout + o];
                for (int64_t i = 0; i < nin; i++) {
                    row[i] += gv * xl[i];
                    if (mrow)
                        mrow[i] += fabs(gv * xl[i]);
                }
            }
            for (int64_t i = 0; mrow && i < nin; i++)
                set_sum_mags(&gmag[1], o * nin + i, (double)L, mrow[i], row[i]);
        }
    if (db) {
        for (int64_t o = 0; o < nout; o++) {
            db[o] = 0.0;
            if (mb)
                mb[o] = 0.0;
        }
        for (int64_t l = 0; l < L; l++)
            for (int64_t o = 0; o < nout; o++) {
                db[o] += G[l * nout + o];
                if (mb)
                    mb[o] += fabs(G[l * nout + o]);
            }
        for (int64_t o = 0; mb && o < nout; o++)
            set_sum_mags(&gmag[2], o, (double)L, mb[o], db[o]);
    }
    return REF_OK;
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
     .shape = matmul_shape, .forward = matmul_fwd, .vjp = matmul_vjp, .sample = sample_matmul},
    {.name = "scaledMatmul", .report_name = "scaled_matmul", .min_inputs = 2, .max_inputs = 2,
     .input_names = {"a", "b"}, .params = REF_P_ALPHA, .requires_vjp = 1, .c_fwd = 2,
     .c_vjp = 2, .note = "Proposal (not in TorchLean): alpha * matmul(a, b)",
     .set_defaults = scaled_matmul_defaults, .shape = scaled_matmul_shape,
     .forward = scaled_matmul_fwd, .vjp = scaled_matmul_vjp, .sample = sample_scaled_matmul},
    {.name = "softmaxMatmul", .report_name = "softmax_matmul", .min_inputs = 2, .max_inputs = 2,
     .input_names = {"s", "v"}, .requires_vjp = 1, .c_fwd = 2, .c_vjp = 2,
     .note = "Proposal (not in TorchLean): softmax(s, -1) @ v; equal leading axes, no mask",
     .shape = softmax_matmul_shape, .forward = softmax_matmul_fwd, .vjp = softmax_matmul_vjp,
     .sample = sample_softmax_matmul},
    {.name = "linear", .report_name = "linear", .min_inputs = 3, .max_inputs = 3,
     .input_names = {"x", "w", "b"}, .requires_vjp = 1, .c_fwd = 2, .c_vjp = 2,
     .shape = linear_shape, .forward = linear_fwd, .vjp = linear_vjp, .sample = sample_linear},
};
const int ref_family_linalg_count = (int)(sizeof ref_family_linalg / sizeof ref_family_linalg[0]);
