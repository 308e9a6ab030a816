/* Normalization (ops.md I).
 *
 * Strict f16/bf16 (ref.h): the statistics (mean, variance) and the normalization run in float32
 * and y is rounded once: layerNorm's forward has dtype = |y|. ATen keeps what it saves for the
 * backward (mean, rstd) and batchNorm's folded scale and shift in the dtype, so:
 *   batchNorm training forward: dtype = (|x| + 2 |mu|) |gamma| / sigma + |beta| + |y| (scale and
 *     shift rounded, y = x scale + shift);
 *   the training VJPs: xhat is read through a mean and a 1/sigma stored in the dtype, an error
 *     of |mu| / sigma + |xhat| (units of u) in every xhat: dtype(dx) = 2 |dx| + (1/sigma)
 *     ((|xhat| + |mu|/sigma) |mean(a xhat)| + |xhat| (mean|a xhat| + mean|a| |mu|/sigma));
 *     dtype(dgamma) = |dgamma| + sum |g| (|xhat| + |mu|/sigma); dtype(dbeta) = |dbeta|;
 *   batchNorm eval (no accumulation in the forward or dx): as relaxed; its dgamma and dbeta
 *     sums: |value| + (dgamma) sum |g| 4 (|x| + |mu|) / sigma.
 * prob: every length (N, and R for layerNorm's dgamma/dbeta) becomes its square root. */
#include "ref_families.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- layerNorm over the suffix x.shape[axis:] -------------------------------------------- */

static void layer_norm_defaults(ref_params *p)
{
    p->axis = -1;  /* TorchLean's layerNorm normalizes the last axis (ops.md I) */
    p->eps = 1e-5; /* TorchLean.normalizationEpsilon */
}

/* rows = prod x.shape[:axis], cols = prod x.shape[axis:]. */
static void ln_split(const ref_params *p, const ref_shape *x, int64_t *rows, int64_t *cols)
{
    int ax = ref_norm_axis(p->axis, x->rank);
    *rows = 1;
    *cols = 1;
    for (int i = 0; i < x->rank; i++)
        *(i < ax ? rows : cols) *= x->dim[i];
}

static ref_status layer_norm_shape(const ref_params *p, int n, const ref_shape *in,
                                   ref_shape *out, ref_err *e)
{
    (void)n;
    const ref_shape *x = &in[0];
    int ax = ref_norm_axis(p->axis, x->rank);
    if (x->rank == 0 || ax < 0)
        return ref_err_set(e, "axis %d is out of range for rank %d", p->axis, x->rank);
    ref_shape suffix = {x->rank - ax, {0}};
    memcpy(suffix.dim, x->dim + ax, sizeof(int64_t) * (size_t)suffix.rank);
    if (ref_numel(&suffix) == 0)
        return ref_err_set(e, "layerNorm over an empty suffix is undefined (N = 0)");
    for (int k = 1; k <= 2; k++)
        if (!ref_shape_eq(&in[k], &suffix)) {
            char want[96], got[96];
            ref_shape_fmt(&suffix, want, sizeof want);
            ref_shape_fmt(&in[k], got, sizeof got);
            return ref_err_set(e, "%s must have the normalized shape %s, got %s",
                               k == 1 ? "gamma" : "beta", want, got);
        }
    if (!(p->eps >= 0))
        return ref_err_set(e, "eps must be >= 0, got %g", p->eps);
    *out = *x;
    return REF_OK;
}

/* Row statistics in float64: mu = sum/N; c = x - mu; var = mean((c - mean c)^2) clamped >= 0
 * (TorchLean re-centres the centred data); sigma = sqrt(var + eps). The clamp is TorchLean's
 * max(var, 0) on Lean's Float (maxOfLe: var <= 0 ? 0 : var), so a NaN variance stays NaN. */
typedef struct {
    double mu, sigma, mean_abs_x, mean_abs_c, var;
} ln_stats;

static ln_stats ln_row_stats(const double *x, int64_t N, double eps, int plain)
{
    ln_stats s = {0};
    ref_sum sum = {0}, centred = {0}, squares = {0}; /* compensated (ref_sum) */
    for (int64_t j = 0; j < N; j++)
        ref_sum_add(&sum, x[j]);
    s.mu = ref_sum_value(&sum, plain) / (double)N;
    s.mean_abs_x = sum.abs / (double)N;
    for (int64_t j = 0; j < N; j++)
        ref_sum_add(&centred, x[j] - s.mu);
    double cmean = ref_sum_value(&centred, plain) / (double)N;
    s.mean_abs_c = centred.abs / (double)N;
    for (int64_t j = 0; j < N; j++) {
        double d = (x[j] - s.mu) - cmean;
        ref_sum_add_prod(&squares, d, d);
    }
    double var = ref_sum_value(&squares, plain) / (double)N;
    s.var = var <= 0 ? 0.0 : var;
    s.sigma = sqrt(s.var + eps);
    return s;
}

/* Error of x_hat_i in units of u (provider in a dtype with roundoff u):
 *   d_mu     <= N mean|x|                      (length-N sum, then /N)
 *   d_var    <= N var + 2 mean|c| d_mu          (sum of squares of the centred values)
 *   d_sigma/sigma = d_var / (2 (var + eps)) + 1
 *   d_xhat_i <= (d_mu + |c_i|) / sigma + |xhat_i| (d_sigma/sigma + 1).  */
/* len: the sums' length N for the worst case, sqrt(N) for the probabilistic form. */
static double ln_rel_sigma(const ln_stats *s, double len)
{
    double d_mu = len * s->mean_abs_x;
    double d_var = len * s->var + 2.0 * s->mean_abs_c * d_mu;
    return d_var / (2.0 * (s->sigma * s->sigma)) + 1.0;
}

static double ln_xhat_err(const ln_stats *s, double len, double c, double xhat)
{
    return (len * s->mean_abs_x + fabs(c)) / s->sigma +
           fabs(xhat) * (ln_rel_sigma(s, len) + 1.0);
}

/* xhat's error read through a mean and a 1/sigma stored in the dtype (units of u). */
static double ln_xhat_stored(const ln_stats *s, double xhat)
{
    return fabs(xhat) + fabs(s->mu) / s->sigma;
}

/* The row sums of the layerNorm dx rule (below), with a_j = g_j gamma_j: mean(a), mean(a xhat),
 * mean|a|, mean|a xhat| and prop = mean(|a| d_xhat) (prop_p: its probabilistic form).
 * gamma[j * gstride]: gstride 1 for a gamma per position (layerNorm), 0 for one gamma per row
 * (a batchNorm channel). */
typedef struct {
    double a, ax, abs_a, abs_ax, prop, prop_p;
} ln_means;

static ln_means ln_row_means(const ln_stats *s, int64_t N, const double *x, const double *g,
                             const double *gamma, int64_t gstride)
{
    ln_means mm = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    double len_p = sqrt((double)N);
    for (int64_t j = 0; j < N; j++) {
        double c = x[j] - s->mu, xhat = c / s->sigma, a = g[j] * gamma[j * gstride];
        mm.a += a;
        mm.ax += a * xhat;
        mm.abs_a += fabs(a);
        mm.abs_ax += fabs(a * xhat);
        mm.prop += fabs(a) * ln_xhat_err(s, (double)N, c, xhat);
        mm.prop_p += fabs(a) * ln_xhat_err(s, len_p, c, xhat);
    }
    mm.a /= (double)N;
    mm.ax /= (double)N;
    mm.abs_a /= (double)N;
    mm.abs_ax /= (double)N;
    mm.prop /= (double)N;
    mm.prop_p /= (double)N;
    return mm;
}

/* dx_j = (a_j - mean(a) - xhat_j mean(a xhat)) / sigma, and its magnitudes at element k: worst
 *   |dx| (d_sigma/sigma + 2) + (|a| + N mean|a| + |xhat| (N mean|a xhat| + prop)
 *   + ex |mean(a xhat)|) / sigma,   ex = d_xhat_j,
 * prob the same with sqrt(N), dtype as the file comment says. */
static double ln_row_dx(const ln_stats *s, int64_t N, const ln_means *mm, double a, double c,
                        double xhat, const ref_mag *mag, int64_t k)
{
    double dx = (a - mm->a - xhat * mm->ax) / s->sigma;
    if (!mag)
        return dx;
    double len = (double)N, len_p = sqrt(len), st = ln_xhat_stored(s, xhat);
    double worst = fabs(dx) * (ln_rel_sigma(s, len) + 2.0) +
                   (fabs(a) + len * mm->abs_a + fabs(xhat) * (len * mm->abs_ax + mm->prop) +
                    ln_xhat_err(s, len, c, xhat) * fabs(mm->ax)) /
                       s->sigma;
    double prob = fabs(dx) * (ln_rel_sigma(s, len_p) + 2.0) +
                  (fabs(a) + len_p * mm->abs_a + fabs(xhat) * (len_p * mm->abs_ax + mm->prop_p) +
                   ln_xhat_err(s, len_p, c, xhat) * fabs(mm->ax)) /
                      s->sigma;
    double dtype = 2.0 * fabs(dx) + (st * fabs(mm->ax) +
                                     fabs(xhat) * (mm->abs_ax + mm->abs_a * fabs(s->mu) / s->sigma)) /
                                        s->sigma;
    ref_mag_set(mag, k, worst, dtype, prob);
    return dx;
}

/* y = (x - mu) / sigma * gamma + beta.  m_i = |gamma_i| d_xhat_i + |xhat_i gamma_i| + |y_i|. */
static ref_status layer_norm_fwd(const ref_params *p, int n, const ref_tensor *in,
                                 ref_tensor *out, const ref_mag *mags)
{
    (void)n;
    int64_t R, N;
    ln_split(p, &in[0].shape, &R, &N);
    const double *gamma = in[1].v, *beta = in[2].v;
    for (int64_t r = 0; r < R; r++) {
        const double *x = in[0].v + r * N;
        ln_stats s = ln_row_stats(x, N, p->eps, p->plain_sums);
        for (int64_t j = 0; j < N; j++) {
            double c = x[j] - s.mu, xhat = c / s.sigma;
            double y = xhat * gamma[j] + beta[j];
            out->v[r * N + j] = y;
            if (mags)
                ref_mag_set(mags, r * N + j,
                            fabs(gamma[j]) * ln_xhat_err(&s, (double)N, c, xhat) +
                                fabs(xhat * gamma[j]) + fabs(y),
                            fabs(y),
                            fabs(gamma[j]) * ln_xhat_err(&s, sqrt((double)N), c, xhat) +
                                fabs(xhat * gamma[j]) + fabs(y));
        }
    }
    return REF_OK;
}

/* With a = g * gamma per row:
 *   dx = (1/sigma) (a - mean(a) - xhat * mean(a * xhat));  dgamma = sum_rows g * xhat;
 *   dbeta = sum_rows g.
 * Error (units of u): the two means are length-N sums (N mean|.|), xhat carries d_xhat, and
 * 1/sigma carries d_sigma/sigma; dgamma/dbeta are length-R sums (R sum|.|) plus d_xhat. */
static ref_status layer_norm_vjp(const ref_params *p, int n, const ref_tensor *in,
                                 const ref_tensor *y, const ref_tensor *g, ref_tensor *grad,
                                 const ref_mag *gmag)
{
    (void)n;
    (void)y;
    int64_t R, N;
    ln_split(p, &in[0].shape, &R, &N);
    const double *gamma = in[1].v;
    const ref_mag *mx = gmag && gmag[0].worst ? &gmag[0] : NULL;
    const ref_mag *mg = gmag && gmag[1].worst ? &gmag[1] : NULL;
    const ref_mag *mb = gmag && gmag[2].worst ? &gmag[2] : NULL;
    /* dgamma's and dbeta's three magnitudes gather over the rows: worst, dtype share, prob */
    double *acc = calloc(6 * (size_t)N + 1, sizeof(double));
    if (!acc)
        return REF_ENOMEM;
    double *gw = acc, *gd = acc + N, *gp = acc + 2 * N, *bw = acc + 3 * N, *bp = acc + 4 * N;
    if (grad[1].v)
        memset(grad[1].v, 0, sizeof(double) * (size_t)N);
    if (grad[2].v)
        memset(grad[2].v, 0, sizeof(double) * (size_t)N);
    double lenR = (double)R, lenR_p = sqrt(lenR), len_p = sqrt((double)N);
    for (int64_t r = 0; r < R; r++) {
        const double *x = in[0].v + r * N, *gr = g->v + r * N;
        ln_stats s = ln_row_stats(x, N, p->eps, p->plain_sums);
        ln_means mm = ln_row_means(&s, N, x, gr, gamma, 1);
        for (int64_t j = 0; j < N; j++) {
            double c = x[j] - s.mu, xhat = c / s.sigma, a = gr[j] * gamma[j], ag = fabs(gr[j]);
            double dx = ln_row_dx(&s, N, &mm, a, c, xhat, grad[0].v ? mx : NULL, r * N + j);
            if (grad[0].v)
                grad[0].v[r * N + j] = dx;
            if (grad[1].v) {
                grad[1].v[j] += gr[j] * xhat;
                gw[j] += ag * (lenR * fabs(xhat) + ln_xhat_err(&s, (double)N, c, xhat));
                gd[j] += ag * ln_xhat_stored(&s, xhat);
                gp[j] += ag * (lenR_p * fabs(xhat) + ln_xhat_err(&s, len_p, c, xhat));
            }
            if (grad[2].v) {
                grad[2].v[j] += gr[j];
                bw[j] += lenR * ag;
                bp[j] += lenR_p * ag;
            }
        }
    }
    for (int64_t j = 0; j < N; j++) {
        if (grad[1].v && mg)
            ref_mag_set(mg, j, gw[j], gd[j] + fabs(grad[1].v[j]), gp[j]);
        if (grad[2].v && mb)
            ref_mag_set(mb, j, bw[j], fabs(grad[2].v[j]), bp[j]);
    }
    free(acc);
    return REF_OK;
}

static ref_status sample_layer_norm(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                    ref_shape *in)
{
    int rank = req->rank >= 1 ? req->rank : (int)ref_rng_range(r, 1, 3);
    ref_sample_shape(r, rank, req->max_elems, 0, &in[0]);
    p->axis = (int)ref_rng_range(r, 0, rank - 1);
    if (req->zero_dim) {
        if (p->axis == 0)
            return REF_ENOTAPPLICABLE; /* only the row axes may be empty */
        in[0].dim[ref_rng_range(r, 0, p->axis - 1)] = 0;
    }
    in[1].rank = in[2].rank = rank - p->axis;
    memcpy(in[1].dim, in[0].dim + p->axis, sizeof(int64_t) * (size_t)in[1].rank);
    memcpy(in[2].dim, in[0].dim + p->axis, sizeof(int64_t) * (size_t)in[2].rank);
    if (ref_rng_range(r, 0, 1))
        p->axis -= rank;
    *n = 3;
    return REF_OK;
}

/* ---- batchNorm: two forms selected by params->training ----------------------------------
 * Inputs x [C, spatial...] (ONE sample, channel axis 0, no batch axis; rank 1 = one spatial
 * position), gamma [C], beta [C]; the eval form adds running_mean [C], running_var [C]
 * (constants). N = prod spatial extents.
 *  training (TorchLean runtime form, training != 0, 3 inputs): per channel c, mu = mean, var =
 *    population variance over the N positions (re-centred as layerNorm, clamped >= 0; N >= 1,
 *    N = 1 gives var = 0 and y = beta); y = (x - mu) / sqrt(var + eps) * gamma + beta.
 *  eval (IR batchNormEval, training == 0, 5 inputs): y = (x - mu_run) / sqrt(max(var_run, 0) +
 *    eps) * gamma + beta; N = 0 allowed (nothing to reduce).
 * eps default 1e-5 (TorchLean.normalizationEpsilon). Gradients: x, gamma, beta. */

static void batch_norm_defaults(ref_params *p)
{
    p->eps = 1e-5;
    p->training = 1;
}

static int64_t bn_positions(const ref_shape *x)
{
    int64_t N = 1;
    for (int i = 1; i < x->rank; i++)
        N *= x->dim[i];
    return N;
}

static ref_status batch_norm_shape(const ref_params *p, int n, const ref_shape *in,
                                   ref_shape *out, ref_err *e)
{
    static const char *const names[5] = {"x", "gamma", "beta", "running_mean", "running_var"};
    int want = p->training ? 3 : 5;
    if (n != want)
        return ref_err_set(e, "batchNorm %s form takes %d inputs (x, gamma, beta%s), got %d",
                           p->training ? "training" : "eval", want,
                           p->training ? "" : ", running_mean, running_var", n);
    const ref_shape *x = &in[0];
    char sx[96];
    ref_shape_fmt(x, sx, sizeof sx);
    if (x->rank < 1)
        return ref_err_set(e, "batchNorm wants x [C, spatial...] of rank >= 1, got %s", sx);
    for (int k = 1; k < n; k++)
        if (in[k].rank != 1 || in[k].dim[0] != x->dim[0]) {
            char sk[96];
            ref_shape_fmt(&in[k], sk, sizeof sk);
            return ref_err_set(e, "batchNorm %s must have shape [%lld] (the channels of x %s), "
                                  "got %s", names[k], (long long)x->dim[0], sx, sk);
        }
    if (p->training && bn_positions(x) == 0)
        return ref_err_set(e, "batchNorm training form needs at least one spatial position per "
                              "channel, x is %s", sx);
    if (!(p->eps >= 0) || !isfinite(p->eps))
        return ref_err_set(e, "eps must be finite and >= 0, got %g", p->eps);
    *out = *x;
    return REF_OK;
}

static void batch_norm_domain(const ref_params *p, int n, const ref_shape *in, int i,
                              ref_domain *d)
{
    (void)p;
    (void)n;
    (void)in;
    if (i == 4)
        d->kind = REF_DOM_POSITIVE; /* running variance; negative values are a hand-written edge */
}

/* Eval form statistics of channel c: sigma = sqrt(max(var_run, 0) + eps). */
static double bn_eval_sigma(const ref_tensor *in, int64_t c, double eps)
{
    double v = in[4].v[c];
    return sqrt((v <= 0 ? 0.0 : v) + eps); /* max(v, 0) as maxOfLe: NaN stays NaN */
}

/* Forward. Training: m_i as layerNorm (|gamma| d_xhat + |xhat gamma| + |y|, ln_xhat_err with
 * this channel's statistics) plus |beta|: ATen folds y = x scale + (beta - mu scale), so beta's
 * sum is rounded apart from y's (measured: ATen CPU float32 reaches 0.78 of the bound without
 * it). Eval: a provider may compute invstd = rsqrt(v + eps) (<= 5u: sum,
 * eps rounding, 2-ulp rsqrt), fold scale = gamma invstd and shift = beta - mu scale, then
 * y = x scale + shift: error <= u (7 |x scale| + 8 |mu scale| + |beta| + |y|), so
 * m_i = 4 (|x| + |mu|) |gamma| / sigma + |beta| + |y| with c = 2. */
static ref_status batch_norm_fwd(const ref_params *p, int n, const ref_tensor *in,
                                 ref_tensor *out, const ref_mag *mags)
{
    double *mag = ref_mag_worst(mags);
    (void)n;
    double len_p = sqrt((double)bn_positions(&in[0].shape));
    int64_t C = in[0].shape.dim[0], N = bn_positions(&in[0].shape);
    const double *gamma = in[1].v, *beta = in[2].v;
    for (int64_t c = 0; c < C; c++) {
        const double *x = in[0].v + c * N;
        double *y = out->v + c * N;
        if (p->training) {
            ln_stats s = ln_row_stats(x, N, p->eps, p->plain_sums);
            for (int64_t j = 0; j < N; j++) {
                double d = x[j] - s.mu, xhat = d / s.sigma;
                y[j] = xhat * gamma[c] + beta[c];
                if (mags)
                    ref_mag_set(mags, c * N + j,
                                fabs(gamma[c]) * ln_xhat_err(&s, (double)N, d, xhat) +
                                    fabs(xhat * gamma[c]) + fabs(beta[c]) + fabs(y[j]),
                                (fabs(x[j]) + 2.0 * fabs(s.mu)) * fabs(gamma[c]) / s.sigma +
                                    fabs(beta[c]) + fabs(y[j]),
                                fabs(gamma[c]) * ln_xhat_err(&s, len_p, d, xhat) +
                                    fabs(xhat * gamma[c]) + fabs(beta[c]) + fabs(y[j]));
            }
        } else {
            double mu = in[3].v[c], sigma = bn_eval_sigma(in, c, p->eps);
            for (int64_t j = 0; j < N; j++) {
                y[j] = (x[j] - mu) / sigma * gamma[c] + beta[c];
                if (mag)
                    mag[c * N + j] = 4.0 * (fabs(x[j]) + fabs(mu)) * fabs(gamma[c]) / sigma +
                                     fabs(beta[c]) + fabs(y[j]);
            }
        }
    }
    return REF_OK;
}

/* Training VJP per channel, a = g gamma_c:
 *   dx = (1/sigma) (a - mean(a) - xhat mean(a xhat));  dgamma_c = sum_j g xhat;  dbeta_c = sum_j g.
 * Magnitudes: dx as layerNorm's; dgamma/dbeta are length-N sums: N sum|g xhat| plus the
 * propagated xhat error; N sum|g|. xhat_j's error has its own part (c_j's rounding and the
 * division: |c_j| / sigma + |xhat_j|) and the part the channel's mean and sigma share, the same
 * at every j: -d_mu / sigma - xhat_j d_sigma / sigma, which sums to -(d_mu / sigma) sum g -
 * (d_sigma / sigma) sum g xhat, not sum |g| times them (on a large-mean channel the shared part
 * is 4096 times the spread, and summed in absolute value it admitted every dgamma):
 *   m(dgamma) = sum_j |g_j| (N |xhat_j| + |c_j| / sigma + |xhat_j|) + |sum g| N mean|x| / sigma
 *               + |dgamma| d_sigma / sigma   (ln_xhat_err's terms, d_sigma / sigma =
 *               ln_rel_sigma), the dtype share |sum g| |mu| / sigma + sum |g xhat|.
 * Eval VJP: dx = g gamma / sigma (m = 4 |dx|: invstd 5u and two products, with c = 2);
 * dgamma_c = sum_j g xhat (m = sum_j |g| (N |xhat| + 4 (|x| + |mu|) / sigma));
 * dbeta_c = sum_j g (m = N sum|g|). */
static ref_status batch_norm_vjp(const ref_params *p, int n, const ref_tensor *in,
                                 const ref_tensor *y, const ref_tensor *g, ref_tensor *grad,
                                 const ref_mag *gmag)
{
    (void)n;
    (void)y;
    int64_t C = in[0].shape.dim[0], N = bn_positions(&in[0].shape);
    const double *gamma = in[1].v;
    const ref_mag *mx = gmag && gmag[0].worst ? &gmag[0] : NULL;
    const ref_mag *mg = gmag && gmag[1].worst ? &gmag[1] : NULL;
    const ref_mag *mb = gmag && gmag[2].worst ? &gmag[2] : NULL;
    double len = (double)N, len_p = sqrt(len);
    for (int64_t c = 0; c < C; c++) {
        const double *x = in[0].v + c * N, *gc = g->v + c * N;
        double dgamma = 0.0, dbeta = 0.0, abs_g = 0.0, m_dbeta = 0.0;
        double gw = 0.0, gd = 0.0, gp = 0.0; /* dgamma's worst, dtype share and prob */
        if (p->training) {
            ln_stats s = ln_row_stats(x, N, p->eps, p->plain_sums);
            ln_means mm = ln_row_means(&s, N, x, gc, &gamma[c], 0);
            for (int64_t j = 0; j < N; j++) {
                double d = x[j] - s.mu, xhat = d / s.sigma, a = gc[j] * gamma[c];
                double dx = ln_row_dx(&s, N, &mm, a, d, xhat, grad[0].v ? mx : NULL, c * N + j);
                if (grad[0].v)
                    grad[0].v[c * N + j] = dx;
                dgamma += gc[j] * xhat;
                double own = fabs(d) / s.sigma + fabs(xhat);
                gw += fabs(gc[j]) * (len * fabs(xhat) + own);
                gd += fabs(gc[j] * xhat);
                gp += fabs(gc[j]) * (len_p * fabs(xhat) + own);
                dbeta += gc[j];
                abs_g += fabs(gc[j]);
                m_dbeta += len * fabs(gc[j]);
            }
            /* the shared part of xhat's error, summed with the signs of g (above) */
            gw += fabs(dbeta) * len * s.mean_abs_x / s.sigma +
                  fabs(dgamma) * ln_rel_sigma(&s, len);
            gp += fabs(dbeta) * len_p * s.mean_abs_x / s.sigma +
                  fabs(dgamma) * ln_rel_sigma(&s, len_p);
            gd += fabs(dbeta) * fabs(s.mu) / s.sigma;
        } else {
            double mu = in[3].v[c], sigma = bn_eval_sigma(in, c, p->eps);
            for (int64_t j = 0; j < N; j++) {
                double xhat = (x[j] - mu) / sigma, dx = gc[j] * gamma[c] / sigma;
                double ex = 4.0 * (fabs(x[j]) + fabs(mu)) / sigma;
                if (grad[0].v)
                    grad[0].v[c * N + j] = dx;
                if (grad[0].v && mx)
                    mx->worst[c * N + j] = 4.0 * fabs(dx); /* pointwise: no split */
                dgamma += gc[j] * xhat;
                gw += fabs(gc[j]) * (len * fabs(xhat) + ex);
                gd += fabs(gc[j]) * ex;
                gp += fabs(gc[j]) * (len_p * fabs(xhat) + ex);
                dbeta += gc[j];
                abs_g += fabs(gc[j]);
                m_dbeta += len * fabs(gc[j]);
            }
        }
        if (grad[1].v) {
            grad[1].v[c] = dgamma;
            if (mg)
                ref_mag_set(mg, c, gw, gd + fabs(dgamma), gp);
        }
        if (grad[2].v) {
            grad[2].v[c] = dbeta;
            if (mb)
                ref_mag_set(mb, c, m_dbeta, fabs(dbeta), len_p * abs_g);
        }
    }
    return REF_OK;
}

static ref_status sample_batch_norm(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                    ref_shape *in)
{
    int rank = req->rank >= 0 ? req->rank : (int)ref_rng_range(r, 1, 4);
    if (rank < 1 || rank > REF_MAX_RANK)
        return REF_ENOTAPPLICABLE;
    p->training = (int)ref_rng_range(r, 0, 1);
    ref_sample_shape(r, rank, req->max_elems, 0, &in[0]);
    if (req->zero_dim) /* training needs a position per channel: only C may be empty there */
        in[0].dim[p->training ? 0 : ref_rng_range(r, 0, rank - 1)] = 0;
    *n = p->training ? 3 : 5;
    for (int k = 1; k < *n; k++) {
        in[k].rank = 1;
        in[k].dim[0] = in[0].dim[0];
    }
    return REF_OK;
}

const ref_op ref_family_norm[] = {
    {.name = "layerNorm", .report_name = "layer_norm", .min_inputs = 3, .max_inputs = 3,
     .input_names = {"x", "gamma", "beta"}, .params = REF_P_AXIS | REF_P_EPS, .requires_vjp = 1,
     .c_fwd = 2, .c_vjp = 2, .set_defaults = layer_norm_defaults, .shape = layer_norm_shape,
     .forward = layer_norm_fwd, .vjp = layer_norm_vjp, .sample = sample_layer_norm},
    {.name = "batchNorm", .report_name = "batch_norm", .min_inputs = 3, .max_inputs = 5,
     .input_names = {"x", "gamma", "beta", "running_mean", "running_var"},
     .input_kind = {REF_IN_DATA, REF_IN_DATA, REF_IN_DATA, REF_IN_CONST, REF_IN_CONST},
     .params = REF_P_EPS | REF_P_TRAINING, .requires_vjp = 1, .c_fwd = 2, .c_vjp = 2,
     .note = "one sample x [C, spatial...] (no batch axis); training: batch statistics over the "
             "spatial positions, one position allowed (zero variance), no running-stat update; "
             "eval: running variance clamped at 0",
     .set_defaults = batch_norm_defaults, .shape = batch_norm_shape, .domain = batch_norm_domain,
     .forward = batch_norm_fwd, .vjp = batch_norm_vjp, .sample = sample_batch_norm},
};
const int ref_family_norm_count = (int)(sizeof ref_family_norm / sizeof ref_family_norm[0]);
