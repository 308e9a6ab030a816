/* The list of op families and the helpers they share. Adding a family: one line here and one
 * REF_FAMILY line in ref_families.h. */
#include "ref_families.h"
#include "ref_parallel.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define FAMILY(name) {ref_family_##name, &ref_family_##name##_count}

const ref_family ref_families[] = {
    FAMILY(random), FAMILY(pointwise), FAMILY(softmax), FAMILY(reduce), FAMILY(shape),
    FAMILY(linalg),  FAMILY(loss),      FAMILY(norm),    FAMILY(conv),   FAMILY(pool),
    FAMILY(composite), FAMILY(custom),  {0, 0}};

ref_status ref_same_shape(int n, const ref_shape *in, ref_shape *out, ref_err *e)
{
    for (int i = 1; i < n; i++)
        if (!ref_shape_eq(&in[0], &in[i])) {
            char a[96], b[96];
            ref_shape_fmt(&in[0], a, sizeof a);
            ref_shape_fmt(&in[i], b, sizeof b);
            return ref_err_set(e, "input %d has shape %s but input 0 has %s (same shape required)",
                               i, b, a);
        }
    *out = in[0];
    return REF_OK;
}

ref_status ref_sample_same_shapes(ref_rng *r, const ref_sample_req *req, int n_inputs, int *n,
                                  ref_shape *in)
{
    int rank = req->rank >= 0 ? req->rank : (int)ref_rng_range(r, 1, 3);
    ref_sample_shape(r, rank, req->max_elems, req->zero_dim, &in[0]);
    for (int i = 1; i < n_inputs; i++)
        in[i] = in[0];
    *n = n_inputs;
    return REF_OK;
}

ref_axis_split ref_split_axis(const ref_shape *s, int axis)
{
    ref_axis_split a = {1, 1, 1};
    for (int i = 0; i < s->rank; i++) {
        if (i < axis)
            a.outer *= s->dim[i];
        else if (i == axis)
            a.len = s->dim[i];
        else
            a.inner *= s->dim[i];
    }
    return a;
}

ref_axis_split ref_split_param_axis(const ref_params *p, const ref_shape *s)
{
    return ref_split_axis(s, ref_norm_axis(p->axis, s->rank));
}

ref_status ref_sample_with_axis(ref_rng *r, const ref_sample_req *req, int zero_dim,
                                ref_shape *s, int *ax)
{
    int rank = req->rank >= 0 ? req->rank : (int)ref_rng_range(r, 1, 3);
    if (rank == 0)
        return REF_ENOTAPPLICABLE;
    ref_sample_shape(r, rank, req->max_elems, zero_dim, s);
    *ax = (int)ref_rng_range(r, 0, rank - 1);
    return REF_OK;
}

int ref_sample_axis_param(ref_rng *r, int ax, int rank)
{
    return ref_rng_range(r, 0, 2) == 0 ? ax - rank : ax;
}

int64_t ref_sample_budget(const ref_sample_req *req)
{
    return req->max_elems > REF_SAMPLE_MIN_BUDGET ? req->max_elems : REF_SAMPLE_MIN_BUDGET;
}

int64_t ref_extent_cap(const ref_shape *s, int axis, int64_t budget)
{
    int64_t rest = 1;
    for (int i = 0; i < s->rank; i++)
        if (i != axis) {
            if (s->dim[i] == 0)
                return INT64_MAX;
            rest *= s->dim[i];
        }
    return budget / rest > 1 ? budget / rest : 1;
}

ref_status ref_vjp_at_each(ref_vjp_at_one one, const ref_params *p, int n, const ref_tensor *in,
                           const ref_tensor *g, ref_picks *pk)
{
    ref_status st = REF_OK;
    for (int i = 0; i < n && st == REF_OK; i++)
        if (pk[i].count > 0)
            st = one(p, n, in, g, i, &pk[i]);
    return st;
}

void ref_transpose(const double *a, int64_t rows, int64_t cols, double *out)
{
    enum { TILE = 32 };
    for (int64_t r0 = 0; r0 < rows; r0 += TILE)
        for (int64_t c0 = 0; c0 < cols; c0 += TILE)
            for (int64_t r = r0; r < r0 + TILE && r < rows; r++)
                for (int64_t c = c0; c < c0 + TILE && c < cols; c++)
                    out[c * rows + r] = a[r * cols + c];
}

#if defined(__GNUC__)
/* Four doubles side by side (GCC and Clang vector extensions): element-wise IEEE products and
 * sums, |t| by clearing the sign bit (fabs's bits), nothing fused (-ffp-contract=off). */
typedef double ref_v4 __attribute__((vector_size(32)));
typedef int64_t ref_v4i __attribute__((vector_size(32)));

/* (macros, not functions: a function passing these by value would change its ABI with AVX) */
#define V4_LOAD(v, p) memcpy(&(v), (p), sizeof(v))
#define V4_ABS(t) ((ref_v4)((ref_v4i)(t) & abs_mask))

/* Sixteen columns k0 .. k0+15 in registers over the whole l loop, then eight: each column's sum
 * and |sum| still take the terms in increasing l, one rounding each, so any width gives the
 * bits of the scalar loop below; the width is for the adds' latency (eight independent chains
 * per l instead of four: the softmaxMatmul and attention references spent a third of their
 * time here). Compiled for the widest vectors the CPU has (a vector operation rounds each
 * element as the scalar one does). */
REF_VECTOR_CLONES
static void row_times_wide(const double *x, int64_t L, const double *M, int64_t ld,
                           int64_t count, double *out, double *out_abs, int64_t *done)
{
    const ref_v4i abs_mask = {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX};
    int64_t k0 = 0;
    for (; k0 + 16 <= count; k0 += 16) {
        ref_v4 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        ref_v4 m0, m1, m2, m3;
        for (int64_t l = 0; l < L; l++) {
            const double *m = M + l * ld + k0;
            ref_v4 q = {x[l], x[l], x[l], x[l]};
            V4_LOAD(m0, m), V4_LOAD(m1, m + 4), V4_LOAD(m2, m + 8), V4_LOAD(m3, m + 12);
            ref_v4 t0 = q * m0, t1 = q * m1, t2 = q * m2, t3 = q * m3;
            s0 += t0, s1 += t1, s2 += t2, s3 += t3;
            a0 += V4_ABS(t0), a1 += V4_ABS(t1), a2 += V4_ABS(t2), a3 += V4_ABS(t3);
        }
        memcpy(out + k0, &s0, sizeof s0), memcpy(out + k0 + 4, &s1, sizeof s1);
        memcpy(out + k0 + 8, &s2, sizeof s2), memcpy(out + k0 + 12, &s3, sizeof s3);
        memcpy(out_abs + k0, &a0, sizeof a0), memcpy(out_abs + k0 + 4, &a1, sizeof a1);
        memcpy(out_abs + k0 + 8, &a2, sizeof a2), memcpy(out_abs + k0 + 12, &a3, sizeof a3);
    }
    for (; k0 + 8 <= count; k0 += 8) {
        ref_v4 s0 = {0}, s1 = {0}, a0 = {0}, a1 = {0}, m0, m1;
        for (int64_t l = 0; l < L; l++) {
            const double *m = M + l * ld + k0;
            ref_v4 q = {x[l], x[l], x[l], x[l]};
            V4_LOAD(m0, m), V4_LOAD(m1, m + 4);
            ref_v4 t0 = q * m0, t1 = q * m1;
            s0 += t0, s1 += t1;
            a0 += V4_ABS(t0), a1 += V4_ABS(t1);
        }
        memcpy(out + k0, &s0, sizeof s0), memcpy(out + k0 + 4, &s1, sizeof s1);
        memcpy(out_abs + k0, &a0, sizeof a0), memcpy(out_abs + k0 + 4, &a1, sizeof a1);
    }
    *done = k0;
}
#endif

/* The wide loop (one clone of it, or none), then the columns it left one at a time. */
typedef void (*row_times_wide_fn)(const double *x, int64_t L, const double *M, int64_t ld,
                                  int64_t count, double *out, double *out_abs, int64_t *done);

static void row_times_with(row_times_wide_fn wide, const double *x, int64_t L, const double *M,
                           int64_t ld, int64_t count, double *out, double *out_abs);

#if defined(__GNUC__)
REF_VECTOR_CLONE_DECLS(row_times_wide);
#define ROW_TIMES_WIDE(isa) REF_VECTOR_CLONE(row_times_wide, isa)
#else
#define ROW_TIMES_WIDE(isa) NULL
#endif

void ref_row_times(const double *x, int64_t L, const double *M, int64_t ld, int64_t count,
                   double *out, double *out_abs)
{
#if defined(__GNUC__)
    row_times_with(row_times_wide, x, L, M, ld, count, out, out_abs);
#else
    row_times_with(NULL, x, L, M, ld, count, out, out_abs);
#endif
}

int ref_row_times_isa(int isa, const double *x, int64_t L, const double *M, int64_t ld,
                      int64_t count, double *out, double *out_abs)
{
    if (!ref_isa_runs(isa))
        return -1;
    row_times_with(ROW_TIMES_WIDE(isa), x, L, M, ld, count, out, out_abs);
    return 0;
}

static void row_times_with(row_times_wide_fn wide, const double *x, int64_t L, const double *M,
                           int64_t ld, int64_t count, double *out, double *out_abs)
{
    int64_t k0 = 0;
    if (wide)
        wide(x, L, M, ld, count, out, out_abs, &k0);
    for (; k0 < count; k0++) {
        double s = 0.0, a = 0.0;
        for (int64_t l = 0; l < L; l++) {
            double t = x[l] * M[l * ld + k0];
            s += t;
            a += fabs(t);
        }
        out[k0] = s, out_abs[k0] = a;
    }
}

void ref_dots(int64_t len, const double *P, const int64_t *po, const double *Q, const int64_t *qo,
              int64_t count, double *v, double *v_abs)
{
    int64_t e = 0;
    for (; e + 4 <= count; e += 4) {
        const double *p0 = P + po[e], *p1 = P + po[e + 1], *p2 = P + po[e + 2], *p3 = P + po[e + 3];
        const double *q0 = Q + qo[e], *q1 = Q + qo[e + 1], *q2 = Q + qo[e + 2], *q3 = Q + qo[e + 3];
        double s0 = v[e], s1 = v[e + 1], s2 = v[e + 2], s3 = v[e + 3];
        double a0 = v_abs[e], a1 = v_abs[e + 1], a2 = v_abs[e + 2], a3 = v_abs[e + 3];
        for (int64_t i = 0; i < len; i++) {
            double t0 = p0[i] * q0[i], t1 = p1[i] * q1[i], t2 = p2[i] * q2[i], t3 = p3[i] * q3[i];
            s0 += t0, s1 += t1, s2 += t2, s3 += t3;
            a0 += fabs(t0), a1 += fabs(t1), a2 += fabs(t2), a3 += fabs(t3);
        }
        v[e] = s0, v[e + 1] = s1, v[e + 2] = s2, v[e + 3] = s3;
        v_abs[e] = a0, v_abs[e + 1] = a1, v_abs[e + 2] = a2, v_abs[e + 3] = a3;
    }
    for (; e < count; e++) {
        const double *p0 = P + po[e], *q0 = Q + qo[e];
        double s0 = v[e], a0 = v_abs[e];
        for (int64_t i = 0; i < len; i++) {
            double t0 = p0[i] * q0[i];
            s0 += t0;
            a0 += fabs(t0);
        }
        v[e] = s0, v_abs[e] = a0;
    }
}

/* ---- spatial axes of conv and pool ------------------------------------------------------- */

int64_t ref_sp_count(const ref_sp_ext *e)
{
    int64_t n = 1;
    for (int a = 0; a < e->rank; a++)
        n *= e->d[a];
    return n;
}

void ref_sp_unravel(const ref_sp_ext *e, int64_t flat, int64_t idx[3])
{
    for (int a = e->rank - 1; a >= 0; a--) {
        idx[a] = e->d[a] > 0 ? flat % e->d[a] : 0;
        flat = e->d[a] > 0 ? flat / e->d[a] : 0;
    }
}

int64_t ref_sp_ravel(const ref_sp_ext *e, const int64_t idx[3])
{
    int64_t flat = 0;
    for (int a = 0; a < e->rank; a++) {
        if (idx[a] < 0 || idx[a] >= e->d[a])
            return -1;
        flat = flat * e->d[a] + idx[a];
    }
    return flat;
}

void ref_sp_next(const ref_sp_ext *e, int64_t idx[3])
{
    for (int a = e->rank - 1; a >= 0; a--) {
        if (++idx[a] < e->d[a])
            return;
        idx[a] = 0;
    }
}

void ref_sp_channels_shape(int64_t C, const ref_sp_ext *e, ref_shape *s)
{
    s->rank = e->rank + 1;
    s->dim[0] = C;
    for (int a = 0; a < e->rank; a++)
        s->dim[a + 1] = e->d[a];
}

void ref_window_defaults(ref_params *p)
{
    for (int a = 0; a < 3; a++) {
        p->stride[a] = 1;
        p->pad[a] = 0;
        p->dil[a] = 1;
    }
}

int ref_sample_spatial_rank(ref_rng *r, const ref_sample_req *req)
{
    int rank = req->rank >= 0 ? req->rank : (int)ref_rng_range(r, 2, 4);
    if (rank < 2)
        rank = 2;
    if (rank > 4)
        rank = 4;
    return rank - 1;
}

/* The probabilistic magnitude of a sum (ref_families.h). A kernel sums n terms t_k along a
 * binary tree of its choosing; node v adds the partial sums of its two subtrees and rounds:
 * the error is sum_v delta_v T_v (first order), T_v the exact sum of v's s_v leaves. With
 * independent, mean-zero roundings |delta_v| <= u, Azuma-Hoeffding gives
 *   P(|error| > lambda u sqrt(Q)) <= 2 exp(-lambda^2 / 2),   Q = sum_v T_v^2.
 * Any tree: Q <= n (sum|t|)^2, the sqrt(n) sum|t| form. When the tree does not depend on the
 * values and the terms are exchangeable (the harness draws them independently), each T_v is a
 * sample of s_v of the n terms without replacement: T_v = s_v S / n + D_v (S their sum). With
 * sigma^2 = q / n - (S / n)^2 their variance (q = sum t^2) and R >= max|t_k - S/n| (here
 * max|t| + |S| / n), Bernstein's inequality (which sampling without replacement obeys, by
 * Hoeffding 1963) and a union bound over the n - 1 nodes give, with probability 1 - p
 * (p = 1e-9, L = ln(2 (n - 1) / p)),
 *   |D_v| <= sigma sqrt(2 s_v L) + (2/3) R L   at every node,
 * and with sum_v s_v <= n (n + 1) / 2 (a chain's, the largest of any binary tree),
 *   Q <= 2 sum_v (s_v S / n)^2 + 2 sum_v D_v^2
 *     <= (n + 1) S^2 + 4 L n (n + 1) sigma^2 + (16/9) L^2 R^2 n,
 * plus q for the roundings of the terms themselves (products). Its square root is the
 * exchangeable form: for n = 10^6 terms of N(0, 1), 8.4 n against sqrt(n) sum|t| = 800 n; for
 * terms of one sign (S = sum|t|) it is no smaller than the sqrt(n) form. Both forms rest on
 * the one Azuma event, so the judge's false-alarm rate per element is 2 e^-18 + p = 3.1e-8. */
double ref_sum_prob(const ref_sum *s)
{
    double n = (double)s->n, any_order = sqrt(n) * s->abs;
    if (s->n < 2)
        return any_order;
    double mean = s->hi / n, var = s->sq / n - mean * mean, R = s->max + fabs(mean);
    double L = log(2.0 * (n - 1.0) / 1e-9);
    double Q = (n + 1.0) * s->hi * s->hi + 4.0 * L * n * (n + 1.0) * (var > 0 ? var : 0.0) +
               16.0 / 9.0 * L * L * R * R * n + s->sq;
    double exchangeable = sqrt(Q);
    return exchangeable < any_order ? exchangeable : any_order; /* NaN: the any-order form */
}
