/* Pooling, channels-first single sample (ops.md J): x [C, s...] with spatial rank 1, 2 or 3
 * (params->spatial), no batch axis; every channel is pooled on its own. One geometry and one
 * window walk serve all spatial ranks (row-major index arithmetic over the spatial axes).
 *
 * Geometry, per spatial axis a (kernel k = params->kernel[a], stride s >= 1, symmetric padding
 * p, dilation 1): out = 0 if in = 0, k = 0 or p > floor(k/2) (an empty output, not an error;
 * ATen rejects that padding), else floor((in + 2p - k)/s) + 1, or 0 when in + 2p < k (floor
 * mode). Window o covers cells o s + j - p, j in [0, k), visited in row-major order of j; a
 * cell outside [0, in) is a padded cell. Under the padding rule every window holds a real cell.
 *
 * The three pools differ in what a padded cell is: ignored (maxPool, as -inf), or a zero
 * (smoothMaxPool and avgPool: it counts in the pivot, the sum and the divisor).
 * Error models are stated above each op.
 * Strict f16/bf16 (ref.h): window sums (avgPool's, smoothMaxPool's S, every gradient gathered
 * from several windows) run in float32 and each result is rounded once: dtype = |value|, but
 * 2|y| for avgPool's forward (the window sum may be rounded before the division). maxPool's
 * forward is exact. prob: each count (K taps, n windows) becomes its square root. */
#include "ref_families.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PL_MAX_GEOM ((int64_t)1 << 30)

/* ---- geometry ------------------------------------------------------------------------------ */

typedef struct {
    int sr;
    int64_t C;
    ref_sp_ext in, k, out;
    int64_t s[3], p[3];
} pl_geom;

static void smooth_defaults(ref_params *p)
{
    ref_window_defaults(p);
    p->beta = 1.0;
}

static ref_status pl_geometry(const ref_params *p, int n, const ref_shape *in, const char *op,
                              pl_geom *g, ref_err *e)
{
    memset(g, 0, sizeof *g);
    if (n != 1)
        return ref_err_set(e, "%s takes 1 input (x), got %d", op, n);
    if (p->spatial < 1 || p->spatial > 3)
        return ref_err_set(e, "%s spatial rank must be 1, 2 or 3, got %d", op, p->spatial);
    int sr = g->sr = p->spatial;
    char sx[96];
    ref_shape_fmt(&in[0], sx, sizeof sx);
    if (in[0].rank != sr + 1)
        return ref_err_set(e, "%s x must be [C, %d spatial axes] (rank %d, no batch axis), got %s",
                           op, sr, sr + 1, sx);
    for (int a = 0; a <= sr; a++)
        if (in[0].dim[a] < 0 || in[0].dim[a] > PL_MAX_GEOM)
            return ref_err_set(e, "%s x %s has an invalid extent", op, sx);
    g->C = in[0].dim[0];
    g->in.rank = g->k.rank = g->out.rank = sr;
    for (int a = 0; a < sr; a++) {
        int64_t in_a = in[0].dim[a + 1], k = p->kernel[a], s = p->stride[a], pd = p->pad[a];
        if (k < 0 || k > PL_MAX_GEOM)
            return ref_err_set(e, "%s kernel[%d] = %lld is out of range (>= 0)", op, a,
                               (long long)k);
        if (s < 1 || s > PL_MAX_GEOM)
            return ref_err_set(e, "%s stride[%d] = %lld is out of range (>= 1)", op, a,
                               (long long)s);
        if (pd < 0 || pd > PL_MAX_GEOM)
            return ref_err_set(e, "%s pad[%d] = %lld is out of range (>= 0)", op, a,
                               (long long)pd);
        if (p->dil[a] != 1)
            return ref_err_set(e, "%s dil[%d] = %lld: pools have dilation 1", op, a,
                               (long long)p->dil[a]);
        g->in.d[a] = in_a;
        g->k.d[a] = k;
        g->s[a] = s;
        g->p[a] = pd;
        if (in_a == 0 || k == 0 || pd > k / 2 || in_a + 2 * pd < k)
            g->out.d[a] = 0;
        else
            g->out.d[a] = (in_a + 2 * pd - k) / s + 1;
    }
    return REF_OK;
}

/* The cells of window o (flat) into cells[j] for every window offset j < K (flat, row-major),
 * -1 for a padded cell. Window o is unravelled once and its offsets walked in order. */
static void pl_window(const pl_geom *g, int64_t o, int64_t K, int64_t *cells)
{
    int64_t oi[3], ji[3] = {0, 0, 0}, ii[3];
    ref_sp_unravel(&g->out, o, oi);
    for (int64_t j = 0; j < K; j++, ref_sp_next(&g->k, ji)) {
        for (int a = 0; a < g->sr; a++)
            ii[a] = oi[a] * g->s[a] + ji[a] - g->p[a];
        cells[j] = ref_sp_ravel(&g->in, ii);
    }
}

/* A buffer for one window's cells (K + 1 entries: K may be 0). */
static int64_t *pl_cells_alloc(int64_t K)
{
    return malloc(sizeof(int64_t) * (size_t)(K + 1));
}

static ref_status pool_shape_named(const ref_params *p, int n, const ref_shape *in,
                                   ref_shape *out, ref_err *e, const char *op)
{
    pl_geom g;
    ref_status st = pl_geometry(p, n, in, op, &g, e);
    if (st != REF_OK)
        return st;
    ref_sp_channels_shape(g.C, &g.out, out);
    return REF_OK;
}

static ref_status max_pool_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                                 ref_err *e)
{
    return pool_shape_named(p, n, in, out, e, "maxPool");
}

static ref_status avg_pool_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                                 ref_err *e)
{
    return pool_shape_named(p, n, in, out, e, "avgPool");
}

static ref_status smooth_pool_shape(const ref_params *p, int n, const ref_shape *in,
                                    ref_shape *out, ref_err *e)
{
    if (!(isfinite(p->beta) && p->beta != 0.0))
        return ref_err_set(e, "smoothMaxPool beta must be finite and nonzero, got %g", p->beta);
    return pool_shape_named(p, n, in, out, e, "smoothMaxPool");
}

/* Shared start of every forward/VJP: the (already validated) geometry of in[0]. */
static ref_status pl_geom_of(const ref_params *p, int n, const ref_tensor *in, pl_geom *g)
{
    return pl_geometry(p, n, &in[0].shape, "pool", g, NULL) == REF_OK ? REF_OK : REF_EINVAL;
}

static void sample_window(ref_rng *r, int64_t in_a, int64_t *k, int64_t *s, int64_t *p)
{
    *k = ref_rng_range(r, 1, 3);
    *p = ref_rng_range(r, 0, *k / 2);
    *s = ref_rng_range(r, 1, 2);
    while (*k > 1 && in_a + 2 * *p < *k) /* keep the output nonempty (p stays <= floor(k/2): */
        (*k)--;                           /* the loop stops at k = in + 2p >= 2p + 1) */
}

/* Spatial rank from the requested rank of x (clamped to 2..4: 1..3 spatial axes), C in 1..3,
 * kernels 1..3 with p <= floor(k/2) and a nonempty output; zero_dim empties C or one axis. */
static ref_status sample_pool(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                              ref_shape *in)
{
    int sr = ref_sample_spatial_rank(r, req);
    ref_window_defaults(p);
    p->spatial = sr;
    int64_t max_elems = req->max_elems > 1 ? req->max_elems : 1;
    int64_t C = ref_rng_range(r, 1, max_elems < 3 ? max_elems : 3);
    ref_shape sp;
    ref_sample_shape(r, sr, max_elems / C, 0, &sp);
    for (int a = 0; a < sr; a++)
        sample_window(r, sp.dim[a], &p->kernel[a], &p->stride[a], &p->pad[a]);
    if (req->zero_dim) {
        int z = (int)ref_rng_range(r, 0, sr);
        if (z == 0)
            C = 0;
        else
            sp.dim[z - 1] = 0;
    }
    in[0].rank = sr + 1;
    in[0].dim[0] = C;
    for (int a = 0; a < sr; a++)
        in[0].dim[a + 1] = sp.dim[a];
    *n = 1;
    return REF_OK;
}

static ref_status sample_smooth(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                ref_shape *in)
{
    ref_status st = sample_pool(r, req, p, n, in);
    double mag = 0.5 + 2.5 * ref_rng_uniform(r);
    p->beta = ref_rng_range(r, 0, 1) ? mag : -mag;
    return st;
}

/* ---- maxPool ------------------------------------------------------------------------------ */

/* The first row-major winner of window o of channel x_c: strict > over the real cells, seeded
 * with the first real cell (so ties keep the earliest cell, and a NaN never displaces a number;
 * a NaN in the first real cell stays), among the window's cells (pl_window). Returns its cell,
 * or -1 for a window without real cells (impossible under the padding rule; the output is
 * then 0). */
static int64_t max_winner(const int64_t *cells, int64_t nk, const double *x_c)
{
    int64_t arg = -1;
    for (int64_t j = 0; j < nk; j++) {
        int64_t c = cells[j];
        if (c < 0)
            continue; /* padded cells are ignored (-inf) */
        if (arg < 0 || x_c[c] > x_c[arg])
            arg = c;
    }
    return arg;
}

/* y[c, o] = x[c, winner(c, o)].
 * Error model: a selection is exact, m = |y| and c = 1 (half an ulp of float32 slack, less than
 * the distance to any other float32 value, so picking a different cell fails). */
static ref_status max_pool_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                               const ref_mag *mags)
{
    double *mag = ref_mag_worst(mags);
    pl_geom g;
    if (pl_geom_of(p, n, in, &g) != REF_OK)
        return REF_EINVAL;
    int64_t nin = ref_sp_count(&g.in), nout = ref_sp_count(&g.out), K = ref_sp_count(&g.k);
    int64_t *cells = pl_cells_alloc(K);
    if (!cells)
        return REF_ENOMEM;
    for (int64_t c = 0; c < g.C; c++)
        for (int64_t o = 0; o < nout; o++) {
            pl_window(&g, o, K, cells);
            int64_t w = max_winner(cells, K, in[0].v + c * nin);
            double y = w >= 0 ? in[0].v[c * nin + w] : 0.0;
            out->v[c * nout + o] = y;
            if (mag)
                mag[c * nout + o] = fabs(y);
        }
    free(cells);
    return REF_OK;
}

/* dx[c, i] = sum of g[c, o] over the windows o whose first winner is i.
 * Error model: a sum of the routed cotangents; n routes give m = n * sum|g| (c = 1); one route
 * is a copy. */
static ref_status max_pool_vjp(const ref_params *p, int n, const ref_tensor *in,
                               const ref_tensor *y, const ref_tensor *gt, ref_tensor *grad,
                               const ref_mag *gmag)
{
    (void)y;
    if (!grad[0].v)
        return REF_OK;
    pl_geom g;
    if (pl_geom_of(p, n, in, &g) != REF_OK)
        return REF_EINVAL;
    int64_t nin = ref_sp_count(&g.in), nout = ref_sp_count(&g.out), nx = g.C * nin;
    int64_t K = ref_sp_count(&g.k);
    double *m = gmag ? gmag[0].worst : NULL;
    int64_t *routes = calloc((size_t)nx + 1, sizeof(int64_t)), *cells = pl_cells_alloc(K);
    if (!routes || !cells) {
        free(routes), free(cells);
        return REF_ENOMEM;
    }
    memset(grad[0].v, 0, sizeof(double) * (size_t)nx);
    if (m)
        memset(m, 0, sizeof(double) * (size_t)nx);
    for (int64_t c = 0; c < g.C; c++)
        for (int64_t o = 0; o < nout; o++) {
            pl_window(&g, o, K, cells);
            int64_t w = max_winner(cells, K, in[0].v + c * nin);
            if (w < 0)
                continue;
            double gv = gt->v[c * nout + o];
            grad[0].v[c * nin + w] += gv;
            routes[c * nin + w]++;
            if (m)
                m[c * nin + w] += fabs(gv);
        }
    for (int64_t i = 0; m && i < nx; i++) {
        double len = (double)(routes[i] > 0 ? routes[i] : 1);
        ref_mag_set(&gmag[0], i, len * m[i], fabs(grad[0].v[i]), sqrt(len) * m[i]);
    }
    free(routes), free(cells);
    return REF_OK;
}

/* ---- smoothMaxPool ------------------------------------------------------------------------ */

/* One window of smoothMaxPool (zero padding: a padded cell holds 0). */
typedef struct {
    double pivot, sum, L;   /* pivot, S = sum_j exp(beta (v_j - pivot)), L = log S */
    double spread;          /* sum_j w_j |v_j - pivot|, w_j = exp(beta (v_j - pivot)) / S */
} smooth_win;

static double window_value(const int64_t *cells, const double *x_c, int64_t j)
{
    return cells[j] < 0 ? 0.0 : x_c[cells[j]];
}

/* pivot: fold seeded with the first window cell, replaced by a strictly larger (beta > 0) or
 * smaller (beta < 0) value; then the shifted sum. */
static smooth_win smooth_window(const int64_t *cells, int64_t nk, const double *x_c,
                                double beta)
{
    smooth_win w = {0};
    w.pivot = window_value(cells, x_c, 0);
    for (int64_t j = 1; j < nk; j++) {
        double v = window_value(cells, x_c, j);
        if (beta > 0 ? v > w.pivot : v < w.pivot)
            w.pivot = v;
    }
    for (int64_t j = 0; j < nk; j++)
        w.sum += exp(beta * (window_value(cells, x_c, j) - w.pivot));
    w.L = log(w.sum);
    for (int64_t j = 0; j < nk; j++) {
        double d = window_value(cells, x_c, j) - w.pivot;
        w.spread += ref_mag_prod(exp(beta * d) / w.sum, fabs(d));
    }
    return w;
}

/* y[c, o] = pivot + log(sum_j exp(beta (v_j - pivot))) * (1/beta) over the K = prod(k) window
 * cells v_j (padded cells are 0).
 * Error model (u = provider roundoff; t_j = beta d_j, d_j = v_j - pivot; pivot is exact):
 *   t_j: subtraction, product and beta's own rounding  -> |dt_j| <= 3u|t_j|
 *   e_j = exp(t_j)                                      -> rel <= u (3|t_j| + 2)
 *   S = sum e_j (any order)                             -> rel <= (K-1)u + sum_j w_j u (3|t_j|+2)
 *   L = log S (2u|L|), L/beta (division, beta rounding: 2u|L/beta|), + pivot (u|y|),
 * so |err| <= u [(K + 1 + 4|L|)/|beta| + 3 sum_j w_j |d_j| + |y|] =: u m, and c = 2 for the
 * second-order terms and a libm exp/log of a couple of ulp. Overflow-scale inputs stay finite:
 * every exponent is <= 0 and S lies in [1, K]. */
static ref_status smooth_pool_fwd(const ref_params *p, int n, const ref_tensor *in,
                                  ref_tensor *out, const ref_mag *mags)
{
    pl_geom g;
    if (pl_geom_of(p, n, in, &g) != REF_OK)
        return REF_EINVAL;
    int64_t nin = ref_sp_count(&g.in), nout = ref_sp_count(&g.out), K = ref_sp_count(&g.k);
    double beta = p->beta;
    int64_t *cells = pl_cells_alloc(K);
    if (!cells)
        return REF_ENOMEM;
    for (int64_t c = 0; c < g.C; c++)
        for (int64_t o = 0; o < nout; o++) {
            pl_window(&g, o, K, cells);
            smooth_win w = smooth_window(cells, K, in[0].v + c * nin, beta);
            double y = w.pivot + w.L * (1.0 / beta);
            out->v[c * nout + o] = y;
            if (mags)
                ref_mag_set(mags, c * nout + o,
                            ((double)K + 1.0 + 4.0 * fabs(w.L)) / fabs(beta) + 3.0 * w.spread +
                                fabs(y),
                            fabs(y),
                            (sqrt((double)K) + 1.0 + 4.0 * fabs(w.L)) / fabs(beta) +
                                3.0 * w.spread + fabs(y));
        }
    free(cells);
    return REF_OK;
}

/* dx[c, i] += g[c, o] exp(beta (x_i - pivot)) / S for every window o holding the real cell i
 * (padded cells take no gradient).
 * Error model: each term g w_i carries rel(e_i) + rel(S) + the division, the product and an
 * exp(t - L) formulation's u|L|: R = K + 5 + 3|t_i| + 3|L| + 3 sum_j w_j |t_j| (units of u);
 * n windows summed add n. m_i = sum over its windows of |g w_i| (n_i + R), c = 2. */
static ref_status smooth_pool_vjp(const ref_params *p, int n, const ref_tensor *in,
                                  const ref_tensor *y, const ref_tensor *gt, ref_tensor *grad,
                                  const ref_mag *gmag)
{
    (void)y;
    if (!grad[0].v)
        return REF_OK;
    pl_geom g;
    if (pl_geom_of(p, n, in, &g) != REF_OK)
        return REF_EINVAL;
    int64_t nin = ref_sp_count(&g.in), nout = ref_sp_count(&g.out), nx = g.C * nin;
    int64_t K = ref_sp_count(&g.k);
    double beta = p->beta, ab = fabs(beta);
    double *m = gmag ? gmag[0].worst : NULL;
    int64_t *uses = calloc((size_t)nx + 1, sizeof(int64_t)), *cells = pl_cells_alloc(K);
    double *rel = calloc(2 * (size_t)nx + 1, sizeof(double)), *rel_p = rel ? rel + nx : NULL;
    if (!uses || !rel || !cells) {
        free(uses), free(rel), free(cells);
        return REF_ENOMEM;
    }
    memset(grad[0].v, 0, sizeof(double) * (size_t)nx);
    for (int64_t c = 0; c < g.C; c++) {
        const double *x_c = in[0].v + c * nin;
        for (int64_t o = 0; o < nout; o++) {
            pl_window(&g, o, K, cells);
            smooth_win w = smooth_window(cells, K, x_c, beta);
            double gv = gt->v[c * nout + o];
            for (int64_t j = 0; j < K; j++) {
                int64_t cell = cells[j];
                if (cell < 0)
                    continue;
                double d = x_c[cell] - w.pivot, wt = exp(beta * d) / w.sum;
                grad[0].v[c * nin + cell] += gv * wt;
                uses[c * nin + cell]++;
                double r0 = 3.0 * ab * fabs(d) + 3.0 * fabs(w.L) + 3.0 * ab * w.spread;
                rel[c * nin + cell] += fabs(gv * wt) * ((double)K + 5.0 + 3.0 * ab * fabs(d) +
                                                        3.0 * fabs(w.L) + 3.0 * ab * w.spread);
                rel_p[c * nin + cell] += fabs(gv * wt) * (sqrt((double)K) + 5.0 + r0);
                if (m)
                    m[c * nin + cell] += fabs(gv * wt);
            }
        }
    }
    for (int64_t i = 0; m && i < nx; i++)
        ref_mag_set(&gmag[0], i, m[i] * (double)uses[i] + rel[i], fabs(grad[0].v[i]),
                    m[i] * sqrt((double)uses[i]) + rel_p[i]);
    free(uses), free(rel), free(cells);
    return REF_OK;
}

/* ---- avgPool ------------------------------------------------------------------------------ */

/* y[c, o] = (sum of the window's real cells, a left fold from 0 in row-major order) / prod(k):
 * count_include_pad = true, the divisor is always the full kernel volume.
 * Error model: the window sum has at most K - 1 roundings on sum|x| and the division by K (or a
 * product with a rounded 1/K) two on |y|: |err| <= u ((K-1)/K sum|x| + 2|y|), so
 * m = sum_window |x| + 2|y| and c = 1. */
static ref_status avg_pool_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                               const ref_mag *mags)
{
    pl_geom g;
    if (pl_geom_of(p, n, in, &g) != REF_OK)
        return REF_EINVAL;
    int64_t nin = ref_sp_count(&g.in), nout = ref_sp_count(&g.out), K = ref_sp_count(&g.k);
    int64_t *cells = pl_cells_alloc(K);
    if (!cells)
        return REF_ENOMEM;
    for (int64_t c = 0; c < g.C; c++)
        for (int64_t o = 0; o < nout; o++) {
            double s = 0.0, s_abs = 0.0;
            pl_window(&g, o, K, cells);
            for (int64_t j = 0; j < K; j++) {
                int64_t cell = cells[j];
                if (cell < 0)
                    continue; /* a padded cell counts 0 */
                s += in[0].v[c * nin + cell];
                s_abs += fabs(in[0].v[c * nin + cell]);
            }
            double y = s / (double)K;
            out->v[c * nout + o] = y;
            if (mags)
                ref_mag_set(mags, c * nout + o, s_abs + 2.0 * fabs(y), 2.0 * fabs(y),
                            s_abs / sqrt((double)K) + 2.0 * fabs(y));
        }
    free(cells);
    return REF_OK;
}

/* dx[c, i] = sum over the windows o holding the real cell i of g[c, o] / prod(k).
 * Error model: n_i terms g/K, each rounded (twice with a reciprocal), then summed:
 * m_i = (n_i + 1) sum |g| / K, c = 1. */
static ref_status avg_pool_vjp(const ref_params *p, int n, const ref_tensor *in,
                               const ref_tensor *y, const ref_tensor *gt, ref_tensor *grad,
                               const ref_mag *gmag)
{
    (void)y;
    if (!grad[0].v)
        return REF_OK;
    pl_geom g;
    if (pl_geom_of(p, n, in, &g) != REF_OK)
        return REF_EINVAL;
    int64_t nin = ref_sp_count(&g.in), nout = ref_sp_count(&g.out), nx = g.C * nin;
    int64_t K = ref_sp_count(&g.k);
    double *m = gmag ? gmag[0].worst : NULL;
    int64_t *uses = calloc((size_t)nx + 1, sizeof(int64_t)), *cells = pl_cells_alloc(K);
    if (!uses || !cells) {
        free(uses), free(cells);
        return REF_ENOMEM;
    }
    memset(grad[0].v, 0, sizeof(double) * (size_t)nx);
    if (m)
        memset(m, 0, sizeof(double) * (size_t)nx);
    for (int64_t c = 0; c < g.C; c++)
        for (int64_t o = 0; o < nout; o++) {
            double gv = gt->v[c * nout + o];
            pl_window(&g, o, K, cells);
            for (int64_t j = 0; j < K; j++) {
                int64_t cell = cells[j];
                if (cell < 0)
                    continue; /* padded cells are dropped */
                grad[0].v[c * nin + cell] += gv / (double)K;
                uses[c * nin + cell]++;
                if (m)
                    m[c * nin + cell] += fabs(gv) / (double)K;
            }
        }
    for (int64_t i = 0; m && i < nx; i++)
        ref_mag_set(&gmag[0], i, m[i] * (double)(uses[i] + 1), fabs(grad[0].v[i]),
                    m[i] * (sqrt((double)uses[i]) + 1.0));
    free(uses), free(cells);
    return REF_OK;
}

const ref_op ref_family_pool[] = {
    {.name = "maxPool", .report_name = "max_pool", .min_inputs = 1, .max_inputs = 1,
     .input_names = {"x"}, .params = REF_P_WINDOW, .requires_vjp = 1, .c_fwd = 1, .c_vjp = 1,
     .note = "padded cells ignored; strict > keeps the first row-major winner and never picks a "
             "later NaN (ATen propagates NaN); pad > floor(k/2) gives an empty output",
     .set_defaults = ref_window_defaults, .shape = max_pool_shape, .forward = max_pool_fwd,
     .vjp = max_pool_vjp, .sample = sample_pool},
    {.name = "smoothMaxPool", .report_name = "smooth_max_pool", .min_inputs = 1, .max_inputs = 1,
     .input_names = {"x"}, .params = REF_P_WINDOW | REF_P_BETA, .requires_vjp = 1, .c_fwd = 2,
     .c_vjp = 2,
     .note = "no ATen primitive: pivot + log(sum exp(beta (v - pivot)))/beta over zero-padded "
             "windows (padded cells count 0), pivot = max (beta > 0) or min (beta < 0)",
     .set_defaults = smooth_defaults, .shape = smooth_pool_shape, .forward = smooth_pool_fwd,
     .vjp = smooth_pool_vjp, .sample = sample_smooth},
    {.name = "avgPool", .report_name = "avg_pool", .min_inputs = 1, .max_inputs = 1,
     .input_names = {"x"}, .params = REF_P_WINDOW, .requires_vjp = 1, .c_fwd = 1, .c_vjp = 1,
     .note = "count_include_pad = true (divisor prod(k) always); pad > floor(k/2) gives an empty "
             "output (ATen rejects it)",
     .set_defaults = ref_window_defaults, .shape = avg_pool_shape, .forward = avg_pool_fwd,
     .vjp = avg_pool_vjp, .sample = sample_pool},
};
const int ref_family_pool_count = (int)(sizeof ref_family_pool / sizeof ref_family_pool[0]);
