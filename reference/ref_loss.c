/* Losses (ops.md H): mseLoss, crossEntropy (logits form), distill. Each returns a scalar
 * (rank-0 output); g in the VJPs is that scalar's cotangent.
 *
 * Error models are derived per op below; all count roundings in units of u of the provider's
 * compute type, and the sums use the any-order bound (K - 1) u sum|terms| for K terms. The
 * log-softmax inside crossEntropy and distill reuses the softmax family's bound (ref_softmax.c):
 *   E_j = 2 (d_j + rel_s + |log s| + |ls_j| + 1),  rel_s = (n - 1) + sum_l p_l (d_l + 2),
 * d_j = |z_j - max z|, ls_j = log-softmax, p = softmax; when the logits are first divided by a
 * temperature in the provider's dtype (distill), that rounding (u|z_j/T|) moves ls_j = zt_j -
 * logsumexp(zt) by (1 - p_j) d zt_j - sum_{l != j} p_l d zt_l: at most u times the smaller of
 * |z_j/T| + sum_l p_l |z_l/T| and (1 - p_j)(|z_j/T| + max_l |z_l/T|) (0 for a p_j of 1: huge
 * logits far apart), which is added to E_j. Softmax values are taken as
 * p_j (E_j + 4) (this dominates both exp(ls_j) and the direct softmax route).
 *
 * Strict f16/bf16 (ref.h): every sum (the softmax denominators, the loss sums) runs in float32,
 * but these losses are compositions whose steps store their results in the dtype (ATen: the
 * log-softmax, with its log-sum-exp max + log s stored in the dtype; the products; the slice
 * sums), so the dtype share is every rounding that is not part of a long sum: each formula with
 * its lengths (n - 1 in E, K, C) set to 0, |max + log s| added to E (E0), and the final
 * roundings. prob: the same lengths replaced by their square roots (Ep).
 * The oracle's sums (the softmax denominators, the loss sums) are compensated (ref_sum). */
#include "ref_families.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- shared helpers ---------------------------------------------------------------------- */

/* meanDenominator of the shape with `axis` removed: its element count, or 1 if that is 0. */
static double slices_denominator(const ref_shape *s, int axis)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        if (i != axis)
            n *= s->dim[i];
    return n > 0 ? (double)n : 1.0;
}

/* Log-softmax of the slice z[j * stride] / T, j < len (len >= 1), into the work vector
 * w = [ls | p | E | E0 | Ep] (each contiguous, of length len): ls, the softmax p, the error bound
 * E (units of u, see the top) and its dtype share E0 and probabilistic form Ep; `scaled` says
 * the provider divides by T. */
static void lsm_slice(const double *z, int64_t len, int64_t stride, double T, int scaled,
                      double *w, int plain)
{
    double *ls = w, *p = w + len, *E = w + 2 * len, *E0 = w + 3 * len, *Ep = w + 4 * len;
    double m = z[0] / T; /* max fold seeded with the first element */
    for (int64_t j = 1; j < len; j++)
        if (z[j * stride] / T > m)
            m = z[j * stride] / T;
    ref_sum den = {0};
    for (int64_t j = 0; j < len; j++)
        ref_sum_add(&den, exp(z[j * stride] / T - m));
    double sum = ref_sum_value(&den, plain);
    double lsum = log(sum), spread = 0.0, zspread = 0.0, zmax = 0.0;
    for (int64_t j = 0; j < len; j++) {
        double zt = z[j * stride] / T;
        ls[j] = (zt - m) - lsum; /* computed directly, never log(softmax) */
        p[j] = exp(zt - m) / sum;
        spread += ref_mag_prod(p[j], fabs(zt - m) + 2.0);
        zspread += ref_mag_prod(p[j], fabs(zt));
        zmax = fmax(zmax, fabs(zt));
    }
    double rel_s = (double)(len - 1) + spread, rel_sp = sqrt((double)(len - 1)) + spread;
    for (int64_t j = 0; j < len; j++) {
        double zt = z[j * stride] / T;
        E[j] = 2.0 * (fabs(zt - m) + rel_s + fabs(lsum) + fabs(ls[j]) + 1.0);
        E0[j] = 2.0 * (fabs(zt - m) + spread + fabs(m + lsum) + fabs(lsum) + fabs(ls[j]) + 1.0);
        Ep[j] = 2.0 * (fabs(zt - m) + rel_sp + fabs(lsum) + fabs(ls[j]) + 1.0);
        if (scaled) { /* d ls_j = (1 - p_j) d zt_j - sum_{l != j} p_l d zt_l */
            double any = fabs(zt) + zspread, others = ref_mag_prod(1.0 - p[j], fabs(zt) + zmax);
            double shift = others < any ? others : any;
            E[j] += shift;
            E0[j] += shift;
            Ep[j] += shift;
        }
    }
}

/* Five work vectors of length len (one allocation). */
static double *alloc_work(int64_t len)
{
    return malloc(sizeof(double) * (size_t)(5 * len + 1));
}

/* Validation shared by crossEntropy and distill: two same-shape inputs, rank >= 1, valid axis. */
static ref_status class_axis_shape(const char *op, const ref_params *p, int n,
                                   const ref_shape *in, ref_shape *out, ref_err *e)
{
    if (n != 2)
        return ref_err_set(e, "%s takes 2 inputs, got %d", op, n);
    if (!ref_shape_eq(&in[0], &in[1])) {
        char a[96], b[96];
        ref_shape_fmt(&in[0], a, sizeof a);
        ref_shape_fmt(&in[1], b, sizeof b);
        return ref_err_set(e, "%s inputs have shapes %s and %s (same shape required)", op, a, b);
    }
    if (in[0].rank == 0 || ref_norm_axis(p->axis, in[0].rank) < 0)
        return ref_err_set(e, "class axis %d is out of range for rank %d", p->axis, in[0].rank);
    out->rank = 0;
    return REF_OK;
}

static ref_status sample_class_axis(ref_rng *r, const ref_sample_req *req, ref_params *p,
                                    int *n, ref_shape *in)
{
    int ax;
    ref_status st = ref_sample_with_axis(r, req, req->zero_dim, &in[0], &ax);
    if (st != REF_OK)
        return st; /* a class axis is needed */
    in[1] = in[0];
    p->axis = ref_sample_axis_param(r, ax, in[0].rank);
    *n = 2;
    return REF_OK;
}

/* ---- mseLoss: L = sum (yhat - t)^2 / N, N = element count (1 if empty) -------------------- */

/* Error: diff (u) then square (u): 3u per term; sum (N - 1)u sum d^2; scaling by 1/N (rounded
 * reciprocal and product, or a division) 2u|L|. Over N: m = (N + 4) L, c = 2 (second order of
 * the long sum in low-precision dtypes). Empty: L = 0, m = 0. Strict: the squared differences
 * may be stored in the dtype, the sum is float32: dtype = 5 L; prob (sqrt(N) + 4) L.
 * The oracle's sum is compensated: it errs by the differences' roundings (2^-52 L), the sum's
 * final one and the division (2^-53 L each), within 2^-53 dtype_i (REF_COMPENSATED_FWD). */
static ref_status mse_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                          const ref_mag *mags)
{
    (void)n;
    int64_t N = ref_numel(&in[0].shape);
    double den = N > 0 ? (double)N : 1.0;
    ref_sum acc = {0};
    for (int64_t i = 0; i < N; i++)
        ref_sum_add_prod(&acc, in[0].v[i] - in[1].v[i], in[0].v[i] - in[1].v[i]);
    out->v[0] = ref_sum_value(&acc, p->plain_sums) / den;
    double L = fabs(out->v[0]);
    if (mags)
        ref_mag_set(mags, 0, ((double)N + 4.0) * L, 5.0 * L, (sqrt((double)N) + 4.0) * L);
    return REF_OK;
}

/* dyhat_i = ((yhat_i - t_i) * (2/N)) * g (TorchLean's CPU order); dt_i = 0 - dyhat_i.
 * Error: diff, the constant 2/N, two products: 4u|dyhat|; m = |dyhat|, c = 5 (one spare). */
static ref_status mse_vjp(const ref_params *p, int n, const ref_tensor *in, const ref_tensor *y,
                          const ref_tensor *g, ref_tensor *grad, const ref_mag *gmag)
{
    (void)p;
    (void)n;
    (void)y;
    int64_t N = ref_numel(&in[0].shape);
    double scale = 2.0 / (N > 0 ? (double)N : 1.0);
    for (int64_t i = 0; i < N; i++) {
        double dy = ((in[0].v[i] - in[1].v[i]) * scale) * g->v[0];
        if (grad[0].v) {
            grad[0].v[i] = dy;
            if (gmag && gmag[0].worst)
                gmag[0].worst[i] = fabs(dy);
        }
        if (grad[1].v) {
            grad[1].v[i] = 0.0 - dy;
            if (gmag && gmag[1].worst)
                gmag[1].worst[i] = fabs(dy);
        }
    }
    return REF_OK;
}

static ref_status mse_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                            ref_err *e)
{
    (void)p;
    if (n != 2)
        return ref_err_set(e, "mseLoss takes 2 inputs (yhat, target), got %d", n);
    ref_shape same;
    ref_status st = ref_same_shape(n, in, &same, e);
    if (st != REF_OK)
        return st;
    out->rank = 0;
    return REF_OK;
}

static ref_status sample_mse(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                             ref_shape *in)
{
    (void)p;
    int rank = req->rank >= 0 ? req->rank : (int)ref_rng_range(r, req->zero_dim ? 1 : 0, 3);
    if (rank == 0 && req->zero_dim)
        return REF_ENOTAPPLICABLE;
    ref_sample_shape(r, rank, req->max_elems, req->zero_dim, &in[0]);
    in[1] = in[0];
    *n = 2;
    return REF_OK;
}

/* ---- crossEntropy: Proposal (b) of ops.md H, logits with probability targets -------------- */

static void ce_defaults(ref_params *p)
{
    p->axis = -1; /* class axis: last */
}

static ref_status ce_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                           ref_err *e)
{
    return class_axis_shape("crossEntropy", p, n, in, out, e);
}

static void ce_domain(const ref_params *p, int n, const ref_shape *in, int i, ref_domain *d)
{
    (void)p;
    (void)n;
    (void)in;
    if (i == 1)
        d->kind = REF_DOM_UNIT; /* nonnegative (unnormalized) target probabilities */
}

/* L = -(sum over slices and classes of t_c ls_c) / S, ls = logSoftmax(logits, axis), S = number
 * of slices (meanDenominator of the shape without the class axis).
 * Error: ls_c carries u E_c; K = (slices * classes) products and a K-term sum carry K u sum|t ls|;
 * the division u|L|: m = (sum |t_c| E_c + K sum |t_c ls_c|) / S + |L|, c = 2. */
static ref_status ce_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                         const ref_mag *mags)
{
    (void)n;
    const ref_shape *s = &in[0].shape;
    int ax = ref_norm_axis(p->axis, s->rank);
    ref_axis_split a = ref_split_axis(s, ax);
    double S = slices_denominator(s, ax);
    double prop = 0.0, prop0 = 0.0, prop_p = 0.0;
    ref_sum acc = {0};
    if (a.len > 0) {
        double *w = alloc_work(a.len);
        if (!w)
            return REF_ENOMEM;
        for (int64_t o = 0; o < a.outer; o++)
            for (int64_t i = 0; i < a.inner; i++) {
                int64_t base = o * a.len * a.inner + i;
                lsm_slice(in[0].v + base, a.len, a.inner, 1.0, 0, w, p->plain_sums);
                for (int64_t c = 0; c < a.len; c++) {
                    double t = in[1].v[base + c * a.inner];
                    ref_sum_add_prod(&acc, t, w[c]);
                    prop += fabs(t) * w[2 * a.len + c];
                    prop0 += fabs(t) * w[3 * a.len + c];
                    prop_p += fabs(t) * w[4 * a.len + c];
                }
            }
        free(w);
    }
    out->v[0] = -(ref_sum_value(&acc, p->plain_sums) / S);
    double K = (double)ref_numel(s), L = fabs(out->v[0]), abs_terms = acc.abs;
    if (mags) /* the products and the slice sums stored in the dtype: 2 sum|t ls| */
        ref_mag_set(mags, 0, (prop + K * abs_terms) / S + L, (prop0 + 2.0 * abs_terms) / S + L,
                    (prop_p + sqrt(K) * abs_terms) / S + L);
    return REF_OK;
}

/* dlogits_c = (p_c sum_l t_l - t_c) / S * g per slice (the target gets no gradient).
 * Error: p_c carries u p_c (E_c + 4); sum t has C u sum|t|; the products, the subtraction, the
 * scaling of t by g/S (ATen's route: d(logp) = -t g / S, then the log-softmax backward) and the
 * final g/S: m = |g|/S (p_c (E_c + 4)|T| + p_c (C + 1) sum|t| + |p_c T - t_c| + 2|t_c|)
 * + 2|dlogits_c|, T = sum_l t_l, c = 2. */
static ref_status ce_vjp(const ref_params *p, int n, const ref_tensor *in, const ref_tensor *y,
                         const ref_tensor *g, ref_tensor *grad, const ref_mag *gmag)
{
    (void)n;
    (void)y;
    if (!grad[0].v)
        return REF_OK;
    const ref_shape *s = &in[0].shape;
    int ax = ref_norm_axis(p->axis, s->rank);
    ref_axis_split a = ref_split_axis(s, ax);
    double S = slices_denominator(s, ax), gs = g->v[0];
    double *mag = gmag ? gmag[0].worst : NULL;
    if (a.len == 0)
        return REF_OK;
    double *w = alloc_work(a.len);
    if (!w)
        return REF_ENOMEM;
    double C = (double)a.len;
    for (int64_t o = 0; o < a.outer; o++)
        for (int64_t i = 0; i < a.inner; i++) {
            int64_t base = o * a.len * a.inner + i;
            const double *t = in[1].v + base;
            double *pr = w + a.len, *E = w + 2 * a.len, *E0 = w + 3 * a.len, *Ep = w + 4 * a.len;
            lsm_slice(in[0].v + base, a.len, a.inner, 1.0, 0, w, p->plain_sums);
            double T = 0.0, T_abs = 0.0;
            for (int64_t c = 0; c < a.len; c++) {
                T += t[c * a.inner];
                T_abs += fabs(t[c * a.inner]);
            }
            for (int64_t c = 0; c < a.len; c++) {
                int64_t k = base + c * a.inner;
                double tc = t[c * a.inner], inner = pr[c] * T - tc;
                grad[0].v[k] = inner / S * gs;
                double v[3], len[3] = {C + 1.0, 1.0, sqrt(C) + 1.0};
                const double *Ef[3] = {E, E0, Ep};
                for (int f = 0; f < 3; f++)
                    v[f] = fabs(gs) / S *
                               (ref_mag_prod(pr[c], Ef[f][c] + 4.0) * fabs(T) +
                                pr[c] * len[f] * T_abs + fabs(inner) + 2.0 * fabs(tc)) +
                           2.0 * fabs(grad[0].v[k]);
                if (mag)
                    ref_mag_set(&gmag[0], k, v[0], v[1], v[2]);
            }
        }
    free(w);
    return REF_OK;
}

/* ---- distill: Proposal (not in TorchLean) -------------------------------------------------- */

static void distill_defaults(ref_params *p)
{
    p->temperature = 1.0;
    p->axis = -1; /* class axis: last */
}

static ref_status distill_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                                ref_err *e)
{
    if (!(p->temperature > 0.0) || !isfinite(p->temperature))
        return ref_err_set(e, "temperature must be finite and > 0, got %g", p->temperature);
    return class_axis_shape("distill", p, n, in, out, e);
}

/* L = T^2 / S * sum over slices of KL(q || p), q = softmax(t/T) (teacher, constant),
 * p = softmax(s/T) (student), KL = sum_c q_c (a_c - b_c) with a = logSoftmax(t/T),
 * b = logSoftmax(s/T) (the log-target form of ATen's kl_div: a term with q_c = 0 is 0).
 * Error: q_c = exp(a_c) carries u q_c (Ea_c + 1), a - b carries u (Ea_c + Eb_c), the
 * subtraction and product 2u|term|; the K-term sum K u sum|term|; T^2 (rounded) and 1/S: 3u|L|:
 * m = T^2/S (sum |a_c - b_c| q_c (Ea_c + 1) + q_c (Ea_c + Eb_c) + (K + 1) sum|term|) + 3|L|,
 * c = 2. */
static ref_status distill_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                              const ref_mag *mags)
{
    (void)n;
    const ref_shape *s = &in[0].shape;
    int ax = ref_norm_axis(p->axis, s->rank);
    ref_axis_split a = ref_split_axis(s, ax);
    double S = slices_denominator(s, ax), T = p->temperature;
    double prop = 0.0, prop0 = 0.0, prop_p = 0.0;
    ref_sum acc = {0};
    if (a.len > 0) {
        double *ws = alloc_work(a.len), *wt = alloc_work(a.len);
        if (!ws || !wt) {
            free(ws), free(wt);
            return REF_ENOMEM;
        }
        for (int64_t o = 0; o < a.outer; o++)
            for (int64_t i = 0; i < a.inner; i++) {
                int64_t base = o * a.len * a.inner + i;
                lsm_slice(in[0].v + base, a.len, a.inner, T, 1, ws, p->plain_sums);
                lsm_slice(in[1].v + base, a.len, a.inner, T, 1, wt, p->plain_sums);
                for (int64_t c = 0; c < a.len; c++) {
                    double q = wt[a.len + c], diff = wt[c] - ws[c];
                    ref_sum_add_prod(&acc, q, diff);
                    for (int f = 0; f < 3; f++) { /* E, E0, Ep */
                        double Ea = wt[(2 + f) * a.len + c], Eb = ws[(2 + f) * a.len + c];
                        *(f == 0 ? &prop : f == 1 ? &prop0 : &prop_p) +=
                            ref_mag_prod(q, fabs(diff) * (Ea + 1.0)) + ref_mag_prod(q, Ea + Eb);
                    }
                }
            }
        free(ws), free(wt);
    }
    out->v[0] = T * T * (ref_sum_value(&acc, p->plain_sums) / S);
    double K = (double)ref_numel(s), L3 = 3.0 * fabs(out->v[0]), abs_terms = acc.abs;
    if (mags)
        ref_mag_set(mags, 0, T * T / S * (prop + (K + 1.0) * abs_terms) + L3,
                    T * T / S * (prop0 + 2.0 * abs_terms) + L3,
                    T * T / S * (prop_p + (sqrt(K) + 1.0) * abs_terms) + L3);
    return REF_OK;
}

/* ds_c = T (p_c - q_c) g / S (the teacher gets no gradient).
 * Error along ATen's route (d b = -q g T^2/S, log-softmax backward, then /T): q_c carries
 * u q_c (Ea_c + 1) and 3 roundings; sum_l db_l has C u sum|db| plus the q errors; exp(b_c)
 * carries u p_c (Eb_c + 4); the product, subtraction and /T: m = T|g|/S (q_c (Ea_c + 4)
 * + p_c (Eb_c + 4 + C sum q + sum_l q_l (Ea_l + 1)) + 2|p_c - q_c|) + 2|ds_c|, c = 2. */
static ref_status distill_vjp(const ref_params *p, int n, const ref_tensor *in,
                              const ref_tensor *y, const ref_tensor *g, ref_tensor *grad,
                              const ref_mag *gmag)
{
    (void)n;
    (void)y;
    if (!grad[0].v)
        return REF_OK;
    const ref_shape *s = &in[0].shape;
    int ax = ref_norm_axis(p->axis, s->rank);
    ref_axis_split a = ref_split_axis(s, ax);
    double S = slices_denominator(s, ax), T = p->temperature, gs = g->v[0];
    double *mag = gmag ? gmag[0].worst : NULL;
    if (a.len == 0)
        return REF_OK;
    double *ws = alloc_work(a.len), *wt = alloc_work(a.len);
    if (!ws || !wt) {
        free(ws), free(wt);
        return REF_ENOMEM;
    }
    for (int64_t o = 0; o < a.outer; o++)
        for (int64_t i = 0; i < a.inner; i++) {
            int64_t base = o * a.len * a.inner + i;
            lsm_slice(in[0].v + base, a.len, a.inner, T, 1, ws, p->plain_sums);
            lsm_slice(in[1].v + base, a.len, a.inner, T, 1, wt, p->plain_sums);
            const double *ps = ws + a.len, *q = wt + a.len;
            double qsum = 0.0, qprop[3] = {0.0, 0.0, 0.0}; /* with E, E0, Ep */
            for (int64_t c = 0; c < a.len; c++) {
                qsum += q[c];
                for (int f = 0; f < 3; f++)
                    qprop[f] += ref_mag_prod(q[c], wt[(2 + f) * a.len + c] + 1.0);
            }
            double len[3] = {(double)a.len, 0.0, sqrt((double)a.len)};
            for (int64_t c = 0; c < a.len; c++) {
                int64_t k = base + c * a.inner;
                grad[0].v[k] = T * (ps[c] - q[c]) * gs / S;
                double v[3];
                for (int f = 0; f < 3; f++) {
                    double Ea = wt[(2 + f) * a.len + c], Eb = ws[(2 + f) * a.len + c];
                    v[f] = T * fabs(gs) / S *
                               (ref_mag_prod(q[c], Ea + 4.0) +
                                ref_mag_prod(ps[c], Eb + 4.0 + len[f] * qsum + qprop[f]) +
                                2.0 * fabs(ps[c] - q[c])) +
                           2.0 * fabs(grad[0].v[k]);
                }
                if (mag)
                    ref_mag_set(&gmag[0], k, v[0], v[1], v[2]);
            }
        }
    free(ws), free(wt);
    return REF_OK;
}

static ref_status sample_distill(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                 ref_shape *in)
{
    ref_status st = sample_class_axis(r, req, p, n, in);
    p->temperature = 0.5 + 3.5 * ref_rng_uniform(r);
    return st;
}

/* ---- table -------------------------------------------------------------------------------- */

const ref_op ref_family_loss[] = {
    {.name = "mseLoss", .report_name = "mse_loss", .min_inputs = 2, .max_inputs = 2,
     .input_names = {"yhat", "target"}, .requires_vjp = 1, .c_fwd = 2, .c_vjp = 5,
     .compensated = REF_COMPENSATED_FWD,
     .note = "mean over all elements with denominator 1 for an empty tensor (ATen: NaN)",
     .shape = mse_shape, .forward = mse_fwd, .vjp = mse_vjp, .sample = sample_mse},
    {.name = "crossEntropy", .report_name = "cross_entropy", .min_inputs = 2, .max_inputs = 2,
     .input_names = {"logits", "target"}, .input_kind = {REF_IN_DATA, REF_IN_CONST},
     .params = REF_P_AXIS, .requires_vjp = 1, .c_fwd = 2, .c_vjp = 2,
     .note = "Proposal (TorchLean loss spec, not a BackendOp): -sum(target * logSoftmax)/S over "
             "the S slices off the class axis; targets are (unnormalized) probabilities",
     .set_defaults = ce_defaults, .shape = ce_shape, .domain = ce_domain, .forward = ce_fwd,
     .vjp = ce_vjp, .sample = sample_class_axis},
    {.name = "distill", .report_name = "distill", .min_inputs = 2, .max_inputs = 2,
     .input_names = {"student", "teacher"}, .input_kind = {REF_IN_DATA, REF_IN_CONST},
     .params = REF_P_AXIS | REF_P_TEMP, .requires_vjp = 1, .c_fwd = 2, .c_vjp = 2,
     .note = "Proposal (not in TorchLean): T^2 KL(softmax(t/T) || softmax(s/T)) averaged over "
             "the slices off the class axis (ATen batchmean divides by size(0))",
     .set_defaults = distill_defaults, .shape = distill_shape, .forward = distill_fwd,
     .vjp = distill_vjp, .sample = sample_distill},
};
const int ref_family_loss_count = (int)(sizeof ref_family_loss / sizeof ref_family_loss[0]);
