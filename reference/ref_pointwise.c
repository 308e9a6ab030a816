/* Pointwise ops (ops.md B, C). Same-shape inputs, no implicit broadcasting (a broadcast input
 * reaches a provider as a stride-0 view; the reference sees its dense values).
 *
 * Structure: every op has one scalar forward kernel `<op>_y(p, x, &m)` returning y and its
 * error-model magnitude m, and one scalar VJP kernel `<op>_dx(p, x, y, g, &m)` returning the
 * cotangent of x and its magnitude (binary ops: `<op>_y(a, b, &m)` and `<op>_dx(a, b, g, d, m)`).
 * The formula and the edge rules are stated above each kernel; the tensor loops are shared.
 *
 * Error model of a pointwise op. Inputs are exact (both sides get the same rounded values), so
 * a provider's only error is its own evaluation in unit roundoff u (float32 u = 2^-24 for f32
 * and for the float32 opmath ATen uses for f16/bf16, then one rounding to the output dtype).
 * Facts used in the derivations below, first order in u:
 *   - a correctly rounded operation (+ - * / sqrt, and the conversion of a double constant to
 *     the compute type) has relative error <= u;
 *   - a library exp, log, tanh, sin, cos, tanhf... is within 2 ulp, and 1 ulp <= 2u|y|, so
 *     relative error <= 4u ("4u-function" below) — CUDA's documented maximum is 2 ulp for
 *     expf/logf/tanhf/sinf/cosf, Sleef's u10 kernels used by ATen CPU are within 1 ulp;
 *   - 1 - s or 1 + t with |s|,|t| near 1 cancels: its absolute error is the absolute error of
 *     s plus u|result|, so such magnitudes carry an absolute term, not |y| alone.
 * m_i is chosen so that c_op * u * m_i bounds every such correct evaluation (any stage order,
 * FMA or not), while a wrong formula, branch or tie rule exceeds it, and so does an 8-ulp bias
 * wherever the op is well conditioned (softplus and safeLog are not, in TorchLean's own
 * log(1 + e) form: 1 + e costs an absolute u). Checked against ATen float32 CPU kernels and the
 * LibTorch capsules' float32 compositions on 2e5 inputs per op (|x| up to 100, cotangents up to
 * e^5): worst bound ratio 0.53. Not covered by any relative bound: an intermediate that
 * overflows in float32 while the result does not (exp's VJP g * e^x for x > 88.7 with small g;
 * ATen softplus with threshold = inf, log1p(exp(x)), for x > 88) — Inf against a finite value.
 *
 * Inf/NaN cotangents: where TorchLean's CPU tape multiplies a 0/1 derivative mask and the
 * LibTorch capsule selects (relu, sqrt, clamp, max/min), the reference selects (LibTorch is the
 * capsule compared); abs multiplies on both engines, and so does the reference. */
#include "ref_families.h"

#include <math.h>
#include <string.h>

#define PI_F64 3.141592653589793 /* the backend's pi (Float.pi) */

/* Underflow of an intermediate. A derivative factor or exp(x) below FLT_MIN = 2^-126 may be
 * flushed or lose bits in float32 opmath (the compute type of f32, f16 and bf16 providers), and
 * it reaches the result multiplied by a factor F (the cotangent g, x, 1/S...): an absolute
 * error of F 2^-126 = u F 2^-102 that the output dtype's floor does not cover when |F| > 1.
 * Such magnitudes carry F * UF. For float64 providers the term is negligible. */
#define UF 0x1p-102

/* ---- shared shape and sampling ----------------------------------------------------------- */

/* Every input: rank within REF_MAX_RANK and no negative dimension. */
static ref_status check_inputs(const char *what, int want, int n, const ref_shape *in,
                               ref_err *e)
{
    if (n != want)
        return ref_err_set(e, "%s takes %d tensor input%s but got %d", what, want,
                           want == 1 ? "" : "s", n);
    for (int i = 0; i < n; i++) {
        if (in[i].rank < 0 || in[i].rank > REF_MAX_RANK)
            return ref_err_set(e, "input %d has rank %d (must be 0..%d)", i, in[i].rank,
                               REF_MAX_RANK);
        for (int d = 0; d < in[i].rank; d++)
            if (in[i].dim[d] < 0)
                return ref_err_set(e, "input %d has negative size %lld on axis %d", i,
                                   (long long)in[i].dim[d], d);
    }
    return REF_OK;
}

static ref_status unary_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                              ref_err *e)
{
    (void)p;
    ref_status st = check_inputs("this pointwise op", 1, n, in, e);
    return st != REF_OK ? st : ref_same_shape(n, in, out, e);
}

static ref_status binary_shape(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                               ref_err *e)
{
    (void)p;
    ref_status st = check_inputs("this pointwise op", 2, n, in, e);
    return st != REF_OK ? st : ref_same_shape(n, in, out, e);
}

static ref_status sample_unary(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                               ref_shape *in)
{
    (void)p;
    return ref_sample_same_shapes(r, req, 1, n, in);
}

static ref_status sample_binary(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                ref_shape *in)
{
    (void)p;
    return ref_sample_same_shapes(r, req, 2, n, in);
}

/* A random multiple of 1/16 in [lo16/16, hi16/16]: exact in every dtype, so the constant
 * itself is never the source of a difference (the error model still allows for rounding). */
static double sample_sixteenths(ref_rng *r, int64_t lo16, int64_t hi16)
{
    return (double)ref_rng_range(r, lo16, hi16) / 16.0;
}

/* Domains: keep finite differences a `gap` away from one or two kinks. */
static void avoid_points(ref_domain *d, int k, double a, double b, double gap)
{
    d->n_avoid = k;
    d->avoid[0] = a;
    d->avoid[1] = b;
    d->gap = gap;
}

/* ---- shared loops -------------------------------------------------------------------------- */

typedef double (*unary_y_fn)(const ref_params *p, double x, double *m);
typedef double (*unary_dx_fn)(const ref_params *p, double x, double y, double g, double *m);
typedef double (*binary_y_fn)(double a, double b, double *m);
typedef void (*binary_dx_fn)(double a, double b, double g, double d[2], double m[2]);

static ref_status unary_forward(const ref_params *p, const ref_tensor *in, ref_tensor *out,
                                double *mag, unary_y_fn f)
{
    int64_t N = ref_numel(&out->shape);
    for (int64_t i = 0; i < N; i++) {
        double m;
        out->v[i] = f(p, in[0].v[i], &m);
        if (mag)
            mag[i] = m;
    }
    return REF_OK;
}

/* y is forward's output; when the caller has none, it is recomputed from x. */
static ref_status unary_backward(const ref_params *p, const ref_tensor *in, const ref_tensor *y,
                                 const ref_tensor *g, ref_tensor *grad, const ref_mag *gmag,
                                 unary_y_fn f, unary_dx_fn df)
{
    if (!grad[0].v)
        return REF_OK;
    double *gm = gmag ? gmag[0].worst : NULL;
    int64_t N = ref_numel(&in[0].shape);
    for (int64_t i = 0; i < N; i++) {
        double x = in[0].v[i], m, unused;
        double yv = (y && y->v) ? y->v[i] : f(p, x, &unused);
        grad[0].v[i] = df(p, x, yv, g->v[i], &m);
        if (gm)
            gm[i] = m + (isfinite(g->v[i]) ? fabs(g->v[i]) * UF : 0.0); /* f'(x) may underflow */
    }
    return REF_OK;
}

static ref_status binary_forward(const ref_tensor *in, ref_tensor *out, double *mag,
                                 binary_y_fn f)
{
    int64_t N = ref_numel(&out->shape);
    for (int64_t i = 0; i < N; i++) {
        double m;
        out->v[i] = f(in[0].v[i], in[1].v[i], &m);
        if (mag)
            mag[i] = m;
    }
    return REF_OK;
}

/* uf: UF where the derivative forms an intermediate that may underflow (div's a/b, then / b),
 * 0 where each gradient is one product or a copy (its own underflow is the floor's). */
static ref_status binary_backward(const ref_tensor *in, const ref_tensor *g, ref_tensor *grad,
                                  const ref_mag *gmag, binary_dx_fn df, double uf)
{
    int64_t N = ref_numel(&in[0].shape);
    for (int64_t i = 0; i < N; i++) {
        double d[2], m[2];
        df(in[0].v[i], in[1].v[i], g->v[i], d, m);
        for (int k = 0; k < 2; k++) {
            if (!grad[k].v)
                continue;
            grad[k].v[i] = d[k];
            if (gmag && gmag[k].worst)
                gmag[k].worst[i] = m[k] + (isfinite(g->v[i]) ? fabs(g->v[i]) * uf : 0.0);
        }
    }
    return REF_OK;
}

/* The ref_op entry points of an op are thin wrappers around its two kernels. */
#define UNARY_ENTRY_POINTS(op)                                                                   \
    static ref_status op##_fwd(const ref_params *p, int n, const ref_tensor *in,                 \
                               ref_tensor *out, const ref_mag *mag)                              \
    {                                                                                            \
        (void)n;                                                                                 \
        return unary_forward(p, in, out, ref_mag_worst(mag), op##_y);                            \
    }                                                                                            \
    static ref_status op##_vjp(const ref_params *p, int n, const ref_tensor *in,                 \
                               const ref_tensor *y, const ref_tensor *g, ref_tensor *grad,       \
                               const ref_mag *gmag)                                              \
    {                                                                                            \
        (void)n;                                                                                 \
        return unary_backward(p, in, y, g, grad, gmag, op##_y, op##_dx);                         \
    }

#define BINARY_ENTRY_POINTS(op, uf)                                                              \
    static ref_status op##_fwd(const ref_params *p, int n, const ref_tensor *in,                 \
                               ref_tensor *out, const ref_mag *mag)                              \
    {                                                                                            \
        (void)p;                                                                                 \
        (void)n;                                                                                 \
        return binary_forward(in, out, ref_mag_worst(mag), op##_y);                              \
    }                                                                                            \
    static ref_status op##_vjp(const ref_params *p, int n, const ref_tensor *in,                 \
                               const ref_tensor *y, const ref_tensor *g, ref_tensor *grad,       \
                               const ref_mag *gmag)                                              \
    {                                                                                            \
        (void)p;                                                                                 \
        (void)n;                                                                                 \
        (void)y;                                                                                 \
        return binary_backward(in, g, grad, gmag, op##_dx, uf);                                  \
    }

/* ==== B. Pointwise arithmetic ============================================================== */

/* ---- add: y = a + b; VJP (g, g) ----------------------------------------------------------- *
 * One correctly rounded sum: error <= u|y|; m = |y|, c_fwd = 2. VJP exact copies (LibTorch's
 * addcmul(0, g, 1) turns a -0 cotangent into +0: equal as values). */
static double add_y(double a, double b, double *m)
{
    double y = a + b;
    *m = fabs(y);
    return y;
}

static void add_dx(double a, double b, double g, double d[2], double m[2])
{
    (void)a;
    (void)b;
    d[0] = g;
    d[1] = g;
    m[0] = m[1] = fabs(g);
}
BINARY_ENTRY_POINTS(add, 0.0)

/* ---- sub: y = a - b; VJP (g, -g) ---------------------------------------------------------- *
 * As add. The second cotangent is -g (IEEE negation: -(+0) = -0, as LibTorch's g*(-1); the
 * CPU tape's 0 - g gives +0 there — equal as values). */
static double sub_y(double a, double b, double *m)
{
    double y = a - b;
    *m = fabs(y);
    return y;
}

static void sub_dx(double a, double b, double g, double d[2], double m[2])
{
    (void)a;
    (void)b;
    d[0] = g;
    d[1] = -g;
    m[0] = m[1] = fabs(g);
}
BINARY_ENTRY_POINTS(sub, 0.0)

/* ---- mul: y = a * b; VJP (g*b, g*a) ------------------------------------------------------- *
 * One rounding each: m = |y| (resp. |g b|, |g a|), c = 2. */
static double mul_y(double a, double b, double *m)
{
    double y = a * b;
    *m = fabs(y);
    return y;
}

static void mul_dx(double a, double b, double g, double d[2], double m[2])
{
    d[0] = g * b;
    d[1] = g * a;
    m[0] = fabs(d[0]);
    m[1] = fabs(d[1]);
}
BINARY_ENTRY_POINTS(mul, 0.0)

/* ---- div: y = a / b, raw IEEE (b = 0 gives ±Inf or NaN, no guard) --------------------------- *
 * Not a BackendOp: TorchLean's tape op Tape.div / divSpec. Forward: one correctly rounded
 * division (error <= u|y|); a provider using a*(1/b) has <= 2u|y|; m = |y|, c_fwd = 4.
 * VJP (TorchLean's schedule, successive divisions, deliberately not b^2):
 *   da = g / b                    one rounding (g*(1/b): two)          m = |da|
 *   db = -(g * ((a / b) / b))     three roundings (-g*a/(b*b): four)   m = |db|
 * c_vjp = 6 covers four roundings plus second-order terms. */
static double div_y(double a, double b, double *m)
{
    double y = a / b;
    *m = fabs(y);
    return y;
}

static void div_dx(double a, double b, double g, double d[2], double m[2])
{
    d[0] = g / b;
    d[1] = -(g * ((a / b) / b));
    m[0] = fabs(d[0]);
    m[1] = fabs(d[1]);
}
BINARY_ENTRY_POINTS(div, UF)

static void div_domain(const ref_params *p, int n, const ref_shape *in, int i, ref_domain *d)
{
    (void)p;
    (void)n;
    (void)in;
    if (i == 1)
        avoid_points(d, 1, 0.0, 0.0, 0.05); /* the divisor stays off the pole */
}

/* ---- neg: y = -x; VJP -g ------------------------------------------------------------------- *
 * Not a BackendOp (spec negOp). Proposal (not in TorchLean): compared against at::neg. IEEE
 * negation, so -(+0) = -0 (TorchLean's runtime writes 0 - x, which gives +0: the signed-zero
 * difference is recorded, the values are equal). Exact: m = |y|, c = 1. */
static double neg_y(const ref_params *p, double x, double *m)
{
    (void)p;
    *m = fabs(x);
    return -x;
}

static double neg_dx(const ref_params *p, double x, double y, double g, double *m)
{
    (void)p;
    (void)x;
    (void)y;
    *m = fabs(g);
    return -g;
}
UNARY_ENTRY_POINTS(neg)

/* ---- scale: y = x * c, c = params->alpha; VJP g * c ------------------------------------------ *
 * c is a host double; on CUDA TorchLean rounds it to float32 (relative error u), then one
 * product rounding: error <= 2u|y|; m = |y| (resp. |g c|), c_fwd = c_vjp = 4. */
static double scale_y(const ref_params *p, double x, double *m)
{
    double y = x * p->alpha;
    *m = fabs(y);
    return y;
}

static double scale_dx(const ref_params *p, double x, double y, double g, double *m)
{
    (void)x;
    (void)y;
    double d = g * p->alpha;
    *m = fabs(d);
    return d;
}
UNARY_ENTRY_POINTS(scale)

static void scale_defaults(ref_params *p)
{
    p->alpha = 1.0;
}

static ref_status sample_scale(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                               ref_shape *in)
{
    p->alpha = sample_sixteenths(r, -48, 48); /* c in [-3, 3], exact in every dtype */
    return ref_sample_same_shapes(r, req, 1, n, in);
}

/* ---- abs: y = |x|; VJP sign(x) * g --------------------------------------------------------- *
 * sign = 1 for x > 0, -1 for x < 0, 0 for x = ±0 and NaN; the VJP is a product on both
 * engines (so 0 * Inf = NaN at x = 0 with an infinite cotangent). Exact: c = 1. */
static double abs_y(const ref_params *p, double x, double *m)
{
    (void)p;
    double y = fabs(x); /* NaN stays NaN */
    *m = y;
    return y;
}

static double abs_dx(const ref_params *p, double x, double y, double g, double *m)
{
    (void)p;
    (void)y;
    double s = x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
    double d = s * g;
    *m = fabs(d);
    return d;
}
UNARY_ENTRY_POINTS(abs)

static void kink_at_zero_domain(const ref_params *p, int n, const ref_shape *in, int i,
                                ref_domain *d)
{
    (void)p;
    (void)n;
    (void)in;
    (void)i;
    avoid_points(d, 1, 0.0, 0.0, 1e-3); /* the kink has its own exact test */
}

/* ---- sqrt: y = sqrt(max(x, 0)): x <= 0 (incl. -0) gives +0; NaN stays NaN --------------------- *
 * VJP: g * (1 / (2 sqrt x)) for x > 0; 0 otherwise, *selected* (LibTorch's rule: an Inf/NaN
 * cotangent still gives 0 there; NaN x is not > 0 and gives 0 too).
 * Forward: one correctly rounded sqrt: m = |y|, c_fwd = 2.
 * VJP: sqrt, 2*, reciprocal (or a division), product: three roundings; m = |dx|, c_vjp = 4. */
static double sqrt_y(const ref_params *p, double x, double *m)
{
    (void)p;
    double y = isnan(x) ? x : (x > 0 ? sqrt(x) : 0.0);
    *m = fabs(y);
    return y;
}

static double sqrt_dx(const ref_params *p, double x, double y, double g, double *m)
{
    (void)p;
    (void)y;
    double d = x > 0 ? g * (1.0 / (2.0 * sqrt(x))) : 0.0;
    *m = fabs(d);
    return d;
}
UNARY_ENTRY_POINTS(sqrt)

static void sqrt_domain(const ref_params *p, int n, const ref_shape *in, int i, ref_domain *d)
{
    (void)p;
    (void)n;
    (void)in;
    (void)i;
    avoid_points(d, 1, 0.0, 0.0, 1e-2); /* both branches, away from the infinite slope */
}

/* ---- clamp: y = fmin(fmax(x, lo), hi) (LibTorch's form) ------------------------------------ *
 * Edge rules: NaN x -> lo (fmax ignores the NaN); lo > hi -> hi everywhere.
 * VJP: g where lo < x < hi strictly, 0 at both bounds and outside (selected; NaN x gives 0).
 * Exact (a selection of an input or a bound): c = 1. A provider whose bounds are float32-
 * rounded differs only when a bound is not representable; samplers draw representable bounds. */
static double clamp_y(const ref_params *p, double x, double *m)
{
    double y = fmin(fmax(x, p->lo), p->hi);
    *m = fabs(y);
    return y;
}

static double clamp_dx(const ref_params *p, double x, double y, double g, double *m)
{
    (void)y;
    double d = (p->lo < x && x < p->hi) ? g : 0.0;
    *m = fabs(d);
    return d;
}
UNARY_ENTRY_POINTS(clamp)

static void clamp_defaults(ref_params *p)
{
    p->lo = -1.0;
    p->hi = 1.0;
}

static void clamp_domain(const ref_params *p, int n, const ref_shape *in, int i, ref_domain *d)
{
    (void)n;
    (void)in;
    (void)i;
    avoid_points(d, 2, p->lo, p->hi, 1e-3);
}

static ref_status sample_clamp(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                               ref_shape *in)
{
    p->lo = sample_sixteenths(r, -24, -4); /* [-1.5, -0.25] */
    p->hi = sample_sixteenths(r, 4, 24);   /* [0.25, 1.5] */
    if (ref_rng_range(r, 0, 7) == 0) {     /* sometimes lo > hi: the output is hi everywhere */
        double t = p->lo;
        p->lo = p->hi;
        p->hi = t;
    }
    return ref_sample_same_shapes(r, req, 1, n, in);
}

/* ---- max: y = fmax(a, b) (LibTorch: the non-NaN operand wins; both NaN -> NaN) --------------- *
 * VJP: a > b -> (g, 0); b > a -> (0, g); otherwise (tie, or unordered because of a NaN) ->
 * (g/2, g/2), computed g * 0.5 and selected. Exact: c = 1. TorchLean's CPU tape uses the
 * scalar Max and may keep a NaN; ATen maximum propagates NaN: NaN inputs are a declared
 * divergence class. */
static double max_y(double a, double b, double *m)
{
    double y = fmax(a, b);
    *m = fabs(y);
    return y;
}

/* The VJP of a selection between a and b (max, min): g to a where a_wins, to b where b_wins,
 * otherwise (tie or NaN) g * 0.5 to each. Exact: m = |d|. */
static void route_selection(int a_wins, int b_wins, double g, double d[2], double m[2])
{
    if (a_wins) {
        d[0] = g;
        d[1] = 0.0;
    } else if (b_wins) {
        d[0] = 0.0;
        d[1] = g;
    } else {
        d[0] = d[1] = g * 0.5;
    }
    m[0] = fabs(d[0]);
    m[1] = fabs(d[1]);
}

static void max_dx(double a, double b, double g, double d[2], double m[2])
{
    route_selection(a > b, b > a, g, d, m);
}
BINARY_ENTRY_POINTS(max, 0.0)

/* ---- min: y = fmin(a, b); VJP mirrors max: a < b -> (g, 0); b < a -> (0, g); else split ------- */
static double min_y(double a, double b, double *m)
{
    double y = fmin(a, b);
    *m = fabs(y);
    return y;
}

static void min_dx(double a, double b, double g, double d[2], double m[2])
{
    route_selection(a < b, b < a, g, d, m);
}
BINARY_ENTRY_POINTS(min, 0.0)

/* ---- inv: y = 1 / x; x = ±0 gives ±Inf (IEEE, no guard) ------------------------------------- *
 * VJP (both runtimes): r = 1/x, r2 = r*r, t = g*r2, dx = t * (-1). At x = ±0: r2 = +Inf, so
 * dx = -g*Inf (NaN when g = 0).
 * Forward one rounding: m = |y|, c_fwd = 2. VJP: r's error doubles in r*r, then two more
 * roundings (or ATen's -g*r*r): 4u first order; m = |dx|, c_vjp = 6. */
static double inv_y(const ref_params *p, double x, double *m)
{
    (void)p;
    double y = 1.0 / x;
    *m = fabs(y);
    return y;
}

static double inv_dx(const ref_params *p, double x, double y, double g, double *m)
{
    (void)p;
    (void)y;
    double r = 1.0 / x;
    double r2 = r * r;
    double d = (g * r2) * -1.0;
    *m = fabs(d);
    return d;
}
UNARY_ENTRY_POINTS(inv)

static void inv_domain(const ref_params *p, int n, const ref_shape *in, int i, ref_domain *d)
{
    (void)p;
    (void)n;
    (void)in;
    (void)i;
    avoid_points(d, 1, 0.0, 0.0, 0.05); /* off the pole */
}

/* ==== C. Activations and transcendental pointwise ops ======================================= */

/* ---- relu: y = 0 if x == 0 else max(x, 0) (so -0 -> +0); VJP g if x > 0 else 0 (select) ------ *
 * NaN input: TorchLean's CPU keeps NaN (backend max) and so does the reference; its CUDA
 * capsule gives 0 (where(x > 0, x, 0)); the edge class records that rule. Exact: c = 1. */
static double relu_y(const ref_params *p, double x, double *m)
{
    (void)p;
    double y = isnan(x) ? x : (x > 0 ? x : 0.0);
    *m = fabs(y);
    return y;
}

static double relu_dx(const ref_params *p, double x, double y, double g, double *m)
{
    (void)p;
    (void)y;
    double d = x > 0 ? g : 0.0; /* subgradient 0 at the kink */
    *m = fabs(d);
    return d;
}
UNARY_ENTRY_POINTS(relu)

/* The composite activations below use one convention: m is the first-order error bound of
 * the derivation in units of u (each term a worst case, errors of one intermediate that reach
 * the result along two paths counted with their combined coefficient), and c = 2 leaves a
 * factor 2 for second-order terms and stage orders other than the ones counted (ATen's, the
 * LibTorch capsule's, TorchLean's). */

/* ---- gelu (tanh approximation only; not PyTorch's default erf form) --------------------------- *
 * y = x (1 + tanh(k (x + c x^3))) / 2, c = 0.044715, k = sqrt(2/pi) in backend arithmetic.
 * Stage order: t1 = ((c x) x) x; t2 = x + t1; t3 = t2 k; t = tanh t3; t4 = 1 + t; t5 = x t4;
 * y = t5 / 2. x = -Inf gives -Inf * 0 = NaN; huge negative x gives -0.
 * Error (first order): c and k are constants rounded to the compute type (relative u each;
 * LibTorch's literal k may differ from the computed k by 1 ulp: same bound). t1: 4u|t1|;
 * t2: 4u|t1| + u|t2|; t3: k(4u|t1| + u|t2|) + 2u|t3| <= u k (4|t1| + 3|t2|);
 * t: P err(t3) + 4u|t| with P = 1 - t^2; t4 = 1 + t: err(t) + u|t4| (cancels for x << 0);
 * t5: |x| err(t4) + u|t5|; /2 exact. So, c_fwd = 2 with
 *   m = 2|y| + (|x|/2)(4|t| + P k (4|t1| + 3|t2|)). */
static const double gelu_c = 0.044715;

static double gelu_k(void)
{
    return sqrt(2.0 / PI_F64);
}

static double gelu_y(const ref_params *p, double x, double *m)
{
    (void)p;
    double k = gelu_k();
    double t1 = ((gelu_c * x) * x) * x;
    double t2 = x + t1;
    double t3 = t2 * k;
    double t = tanh(t3);
    double t4 = 1.0 + t;
    double t5 = x * t4;
    double y = t5 / 2.0;
    double P = 1.0 - t * t; /* 0 once tanh saturates: the conditioning term vanishes */
    double cond = P > 0 ? P * k * (4.0 * fabs(t1) + 3.0 * fabs(t2)) : 0.0;
    *m = 2.0 * fabs(y) + 0.5 * fabs(x) * (4.0 * fabs(t) + cond);
    return y;
}

/* VJP: dx = g (1 + t + x (1 - t^2) k (1 + 3c x^2)) / 2, with 3c x^2 as ((3 c) x) x, t recomputed.
 * Error, with P = 1 - t^2, s = 3c x^2, A = |x| k (1 + s), E = P k (4|t1| + 3|t2|) + 4|t| (the
 * forward's bound of t, in units of u): t enters 1 + t directly and P through -2t dt, so with
 * coefficient |1 - 2 t x k (1 + s)|; t*t and 1 - t^2 round (u t^2 + u P, times A); the term
 * ((x P) k)(1 + s) adds 9u A P (three products, k, the constants of s and 1 + s); 1 + t, the
 * sum and the product with g add u(|1 + t| + 2|d|)/2 + u|d| per unit g. So, c_vjp = 2 with
 *   m = |g| ((E |1 - 2 t x k (1 + s)| + A (t^2 + P) + 9 A P + |1 + t|)/2 + 2|d|),  d = dx/g. */
static double gelu_dx(const ref_params *p, double x, double y, double g, double *m)
{
    (void)p;
    (void)y;
    double k = gelu_k();
    double t1 = ((gelu_c * x) * x) * x;
    double t2 = x + t1;
    double t = tanh(t2 * k);
    double s = ((3.0 * gelu_c) * x) * x;
    double P = 1.0 - t * t;
    double term = ((x * P) * k) * (1.0 + s);
    double d = (1.0 + t + term) / 2.0;
    double dx = g * d;
    double bound = fabs(1.0 + t) + 4.0 * fabs(d);
    /* Where tanh saturates (P = 0 in float64, so t = ±1 and P = 0 exactly in any lower
     * precision) the P terms are exactly 0 on both sides and are left out (they would be
     * 0 * Inf for huge x). */
    if (P > 0) {
        double A = fabs(x) * k * (1.0 + s);
        double E = P * k * (4.0 * fabs(t1) + 3.0 * fabs(t2)) + 4.0 * fabs(t);
        bound += E * fabs(1.0 - 2.0 * t * x * k * (1.0 + s)) + A * (t * t + P) + 9.0 * A * P;
    } else {
        bound += 4.0 * fabs(t);
    }
    *m = fabs(g) * bound / 2.0;
    return dx;
}
UNARY_ENTRY_POINTS(gelu)

/* ---- sigmoid (stable branches) --------------------------------------------------------------- *
 * x > 0: s = 1 / (1 + exp(-x)); otherwise e = exp(x), s = e / (1 + e). NaN stays NaN;
 * -Inf -> 0, +Inf -> 1.
 * Forward error: with e's relative error d (<= 4u), 1 + e carries e d/(1 + e) of it, so e/(1+e)
 * has d/(1 + e) <= 4u plus two roundings; 1/(1 + E) (either sign of x, as ATen's
 * unconditional form) has E d/(1 + E) <= 4u plus two roundings: relative <= 6u; m = |s|,
 * c_fwd = 6. */
static double stable_sigmoid(double x)
{
    if (x > 0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

static double sigmoid_y(const ref_params *p, double x, double *m)
{
    (void)p;
    double s = stable_sigmoid(x);
    *m = fabs(s);
    return s;
}

/* VJP: dx = (s (1 - s)) g with s recomputed from x (LibTorch: g * (y * (1 - y)); ATen
 * sigmoid_backward: g (1 - y) y). s's error (6u s) reaches s (1 - s) with coefficient 1 - 2s
 * (the same s feeds both factors); 1 - s, the product and g add 3u s (1 - s). c_vjp = 2 with
 *   m = |g| (6 s |1 - 2s| + 3 s (1 - s)). */
static double sigmoid_dx(const ref_params *p, double x, double y, double g, double *m)
{
    (void)p;
    (void)y;
    double s = stable_sigmoid(x);
    double d = (s * (1.0 - s)) * g;
    *m = fabs(g) * (6.0 * s * fabs(1.0 - 2.0 * s) + 3.0 * s * (1.0 - s));
    return d;
}
UNARY_ENTRY_POINTS(sigmoid)

/* ---- silu: y = x * sigmoid(x) (stable sigmoid) -------------------------------------------------- *
 * Not a BackendOp (Activation.Kind.silu / swishSpec). Proposal (not in TorchLean): compared
 * against at::silu / silu_backward. x = -Inf gives -Inf * 0 = NaN (as ATen's x/(1+exp(-x))).
 * Forward: sigmoid 6u plus the product u (ATen's x / (1 + exp(-x)) the same): 7u relative;
 * m = |y| + |x| UF (s underflows for x < -87), c_fwd = 8. */
static double silu_y(const ref_params *p, double x, double *m)
{
    (void)p;
    double y = x * stable_sigmoid(x);
    *m = fabs(y) + (isfinite(x) ? fabs(x) * UF : 0.0);
    return y;
}

/* VJP: dx = (s + x s (1 - s)) g (ATen silu_backward: g s (1 + x (1 - s))). s's error (6u s)
 * reaches d with coefficient 1 + x (1 - 2s); the roundings of x s, 1 - s and their product add
 * 3u|x| s (1 - s) (ATen's form: 2u|x| s (1 - s) + u|d|); the sum and g add 2u|d|. The
 * derivative crosses zero near x = -1.28, so the bound is absolute there. c_vjp = 2 with
 *   m = |g| (6 s |1 + x (1 - 2s)| + 3|x| s (1 - s) + 3|d| + |x| UF). */
static double silu_dx(const ref_params *p, double x, double y, double g, double *m)
{
    (void)p;
    (void)y;
    double s = stable_sigmoid(x);
    double d = s + x * s * (1.0 - s);
    *m = fabs(g) * (6.0 * s * fabs(1.0 + x * (1.0 - 2.0 * s)) + 3.0 * fabs(x) * s * (1.0 - s) +
                    3.0 * fabs(d) + (isfinite(x) ? fabs(x) * UF : 0.0));
    return d * g;
}
UNARY_ENTRY_POINTS(silu)

/* ---- tanh: y = tanh x (backend tanh); a 4u-function: m = |y|, c_fwd = 4 ------------------------- */
static double tanh_y(const ref_params *p, double x, double *m)
{
    (void)p;
    double y = tanh(x);
    *m = fabs(y);
    return y;
}

/* VJP: dx = (1 - y y) g (spec: 1 - tanh x * tanh x; LibTorch recomputes y; ATen tanh_backward
 * uses the saved y). y's error (4u|y|) reaches 1 - y^2 as 8u y^2 (1 - y^2 cancels for |x|
 * large); y*y, 1 - y^2 and g round: u y^2 + 2u (1 - y^2). c_vjp = 2 with
 *   m = |g| (9 y^2 + 2 |1 - y^2|). */
static double tanh_dx(const ref_params *p, double x, double y, double g, double *m)
{
    (void)p;
    (void)x;
    double q = 1.0 - y * y;
    *m = fabs(g) * (9.0 * y * y + 2.0 * fabs(q));
    return q * g;
}
UNARY_ENTRY_POINTS(tanh)

/* ---- softplus (beta = 1, NO threshold; plain log of 1 + e, not log1p) ---------------------------- *
 * x > 0: y = x + log(1 + exp(-x)); otherwise y = log(1 + exp(x)). +Inf -> +Inf, -Inf -> 0.
 * Error (LibTorch's max(x,0) + log(1 + exp(-|x|)) or either branch form): with E = exp(-|x|)
 * <= 1 and L = log(1 + E) <= ln 2: err(E) <= 4uE; 1 + E rounds to u(1 + E) absolute — the
 * whole of L is lost for large |x| in float32, which is TorchLean's own rounding; err(L) <=
 * (4uE + u(1 + E))/(1 + E) + 4uL; the final sum u|y|. c_fwd = 2 with
 *   m = |y| + 1 + 4E/(1 + E) + 4L   (the "1" is the absolute u that 1 + E costs).
 * ATen's softplus(x, 1, threshold=inf) = log1p(exp(x)) overflows to Inf for x > 88 in float32:
 * that is ATen's divergence, not TorchLean's. */
static double softplus_val(double x, double *E, double *L)
{
    double e = exp(-fabs(x)); /* exp(-x) for x > 0, exp(x) otherwise */
    double y = x > 0 ? x + log(1.0 + e) : log(1.0 + e);
    if (E)
        *E = isnan(e) ? 0.0 : e;
    if (L)
        *L = isnan(e) ? 0.0 : log(1.0 + e);
    return y;
}

/* softplus's first-order error bound in units of u (see above). */
static double softplus_err(double y, double E, double L)
{
    return fabs(y) + 1.0 + 4.0 * E / (1.0 + E) + 4.0 * L;
}

static double softplus_y(const ref_params *p, double x, double *m)
{
    (void)p;
    double E, L;
    double y = softplus_val(x, &E, &L);
    *m = softplus_err(y, E, L);
    return y;
}

/* VJP: dx = sigmoid(x) g (stable sigmoid): 6u + u: m = |dx|, c_vjp = 8. */
static double softplus_dx(const ref_params *p, double x, double y, double g, double *m)
{
    (void)p;
    (void)y;
    double d = stable_sigmoid(x) * g;
    *m = fabs(d);
    return d;
}
UNARY_ENTRY_POINTS(softplus)

/* ---- exp: y = e^x; VJP g * e^x (from the saved y) ------------------------------------------------ *
 * A 4u-function: m = |y|, c_fwd = 4; VJP adds a product rounding: m = |dx|, c_vjp = 6. */
static double exp_y(const ref_params *p, double x, double *m)
{
    (void)p;
    double y = exp(x);
    *m = fabs(y);
    return y;
}

static double exp_dx(const ref_params *p, double x, double y, double g, double *m)
{
    (void)p;
    (void)x;
    double d = g * y;
    *m = fabs(d);
    return d;
}
UNARY_ENTRY_POINTS(exp)

/* ---- log: y = ln x; domain x > 0 ------------------------------------------------------------------ *
 * Domain rule: TorchLean's CPU tape and IR evaluator reject (error) when any input is <= 0 or
 * NaN, pointing to safeLog; so does the reference: forward and VJP return REF_EDOMAIN for the
 * whole tensor (LibTorch has no guard: -Inf at 0, NaN below — an expected-rejection class).
 * Forward a 4u-function: m = |y|, c_fwd = 4. VJP g * (1/x): two roundings, m = |dx|, c_vjp = 4. */
static double log_y(const ref_params *p, double x, double *m)
{
    (void)p;
    double y = log(x);
    *m = fabs(y);
    return y;
}

static double log_dx(const ref_params *p, double x, double y, double g, double *m)
{
    (void)p;
    (void)y;
    double d = g * (1.0 / x);
    *m = fabs(d);
    return d;
}

static int log_domain_ok(const ref_tensor *x)
{
    int64_t N = ref_numel(&x->shape);
    for (int64_t i = 0; i < N; i++)
        if (!(x->v[i] > 0)) /* <= 0 or NaN */
            return 0;
    return 1;
}

static ref_status log_fwd(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                          const ref_mag *mags)
{
    double *mag = ref_mag_worst(mags);
    (void)n;
    if (!log_domain_ok(&in[0]))
        return REF_EDOMAIN;
    return unary_forward(p, in, out, mag, log_y);
}

static ref_status log_vjp(const ref_params *p, int n, const ref_tensor *in, const ref_tensor *y,
                          const ref_tensor *g, ref_tensor *grad, const ref_mag *gmag)
{
    (void)n;
    if (!log_domain_ok(&in[0]))
        return REF_EDOMAIN;
    return unary_backward(p, in, y, g, grad, gmag, log_y, log_dx);
}

static void log_domain(const ref_params *p, int n, const ref_shape *in, int i, ref_domain *d)
{
    (void)p;
    (void)n;
    (void)in;
    (void)i;
    d->kind = REF_DOM_POSITIVE; /* strictly positive draws */
}

/* ---- sin: y = sin x (radians); VJP cos(x) g ---------------------------------------------------- *
 * 4u-functions: m = |y|, c_fwd = 4; VJP adds a product: m = |dx|, c_vjp = 6. */
static double sin_y(const ref_params *p, double x, double *m)
{
    (void)p;
    double y = sin(x);
    *m = fabs(y);
    return y;
}

static double sin_dx(const ref_params *p, double x, double y, double g, double *m)
{
    (void)p;
    (void)y;
    double d = cos(x) * g;
    *m = fabs(d);
    return d;
}
UNARY_ENTRY_POINTS(sin)

/* ---- cos: y = cos x; VJP -sin(x) g (LibTorch: sin * (-1), then * g). As sin. --------------------- */
static double cos_y(const ref_params *p, double x, double *m)
{
    (void)p;
    double y = cos(x);
    *m = fabs(y);
    return y;
}

static double cos_dx(const ref_params *p, double x, double y, double g, double *m)
{
    (void)p;
    (void)y;
    double d = (sin(x) * -1.0) * g;
    *m = fabs(d);
    return d;
}
UNARY_ENTRY_POINTS(cos)

/* ---- safeLog: y = log(softplus(x) + eps), eps = params->eps (default 1e-6) ---------------------- *
 * A smooth surrogate, NOT log(max(x, eps)). eps is passed through as given (zero, negative or
 * non-finite eps are not rejected: softplus(x) + eps <= 0 gives -Inf or NaN, compared exactly).
 * Error, with S = softplus(x) + eps: softplus's bound (u * softplus_err, see softplus), eps
 * rounded to the compute type (u|eps|) and the sum (u|S|) give S the relative error u R with
 *   R = (softplus_err + |eps| + |S|) / |S|;
 * log adds 4u|y|. c_fwd = 2 with m = R + 4|y| (m = 0 where y is not finite: an exact
 * match is required there). */
static double safelog_parts(const ref_params *p, double x, double *S, double *R)
{
    double E, L;
    double sp = softplus_val(x, &E, &L);
    *S = sp + p->eps;
    *R = (softplus_err(sp, E, L) + fabs(p->eps) + fabs(*S)) / fabs(*S);
    return sp;
}

static double safeLog_y(const ref_params *p, double x, double *m)
{
    double S, R;
    safelog_parts(p, x, &S, &R);
    double y = log(S);
    *m = (isfinite(y) && isfinite(R)) ? R + 4.0 * fabs(y) : 0.0;
    return y;
}

/* VJP: dx = (sigmoid(x) / (softplus(x) + eps)) g.
 * Error: sigmoid 6u, S relative u R, the division and the product 2u: err <= u|dx| (8 + R);
 * the sigmoid underflows for x < -87 and is divided by S >= eps: + |g| UF / S.
 * c_vjp = 2 with m = |dx| (8 + R) + |g| UF / |S|. */
static double safeLog_dx(const ref_params *p, double x, double y, double g, double *m)
{
    (void)y;
    double S, R;
    safelog_parts(p, x, &S, &R);
    double d = (stable_sigmoid(x) / S) * g;
    *m = (isfinite(d) && isfinite(R)) ? fabs(d) * (8.0 + R) + fabs(g) * UF / fabs(S) : 0.0;
    return d;
}
UNARY_ENTRY_POINTS(safeLog)

static void safelog_defaults(ref_params *p)
{
    p->eps = 1e-6; /* Context.defaultEpsilon */
}

static ref_status sample_safelog(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                                 ref_shape *in)
{
    static const double eps_choices[] = {1e-6, 1e-6, 1e-3, 0.5};
    p->eps = eps_choices[ref_rng_range(r, 0, 3)];
    return ref_sample_same_shapes(r, req, 1, n, in);
}

/* ---- table (spec order) ------------------------------------------------------------------------- */

#define UNARY(nm, rn, op, cf, cv, prm, defs, dom, smp, nt)                                          \
    {.name = nm, .report_name = rn, .min_inputs = 1, .max_inputs = 1, .input_names = {"x"},     \
     .params = prm, .requires_vjp = 1, .c_fwd = cf, .c_vjp = cv, .note = nt,                    \
     .set_defaults = defs, .shape = unary_shape, .domain = dom, .forward = op##_fwd,            \
     .vjp = op##_vjp, .sample = smp}
#define BINARY(nm, rn, op, cf, cv, dom, nt)                                                         \
    {.name = nm, .report_name = rn, .min_inputs = 2, .max_inputs = 2, .input_names = {"a", "b"},\
     .requires_vjp = 1, .c_fwd = cf, .c_vjp = cv, .note = nt, .shape = binary_shape,            \
     .domain = dom, .forward = op##_fwd, .vjp = op##_vjp, .sample = sample_binary}

const ref_op ref_family_pointwise[] = {
    BINARY("add", "add", add, 2, 2, NULL, NULL),
    BINARY("sub", "sub", sub, 2, 2, NULL, NULL),
    BINARY("mul", "mul", mul, 2, 2, NULL, NULL),
    BINARY("div", "div", div, 4, 6, div_domain,
           "not a BackendOp (TorchLean tape op); VJP db = -(g*((a/b)/b)) by successive divisions"),
    UNARY("neg", "neg", neg, 1, 1, 0, NULL, NULL, sample_unary,
          "Proposal (not in TorchLean): at::neg; -(+0) = -0 where TorchLean's 0 - x gives +0"),
    UNARY("scale", "scale", scale, 4, 4, REF_P_ALPHA, scale_defaults, NULL, sample_scale,
          "constant c = alpha; TorchLean CUDA rounds c to float32 first"),
    UNARY("abs", "abs", abs, 1, 1, 0, NULL, kink_at_zero_domain, sample_unary,
          "VJP sign(x)*g with sign(0) = sign(NaN) = 0, a product (ATen uses sgn(x))"),
    UNARY("sqrt", "sqrt", sqrt, 2, 4, 0, NULL, sqrt_domain, sample_unary,
          "sqrt(max(x,0)): x <= 0 gives +0 and VJP 0 (ATen: NaN below 0, Inf gradient at 0)"),
    UNARY("clamp", "clamp", clamp, 1, 1, REF_P_LOHI, clamp_defaults, clamp_domain, sample_clamp,
          "fmin(fmax(x,lo),hi): NaN x -> lo, lo > hi -> hi; VJP only strictly inside (lo,hi) "
          "(ATen clamp propagates NaN, passes g at the bounds)"),
    BINARY("max", "max", max, 1, 1, NULL,
           "fmax (non-NaN operand wins; ATen maximum propagates NaN); tie or NaN splits g/2, g/2"),
    BINARY("min", "min", min, 1, 1, NULL,
           "fmin (non-NaN operand wins; ATen minimum propagates NaN); tie or NaN splits g/2, g/2"),
    UNARY("relu", "relu", relu, 1, 1, 0, NULL, kink_at_zero_domain, sample_unary,
          "NaN input: TorchLean CPU keeps NaN, its CUDA capsule gives 0; ATen relu keeps NaN"),
    UNARY("gelu", "gelu", gelu, 2, 2, 0, NULL, NULL, sample_unary,
          "tanh approximation only (ATen's default gelu is the erf form)"),
    UNARY("sigmoid", "sigmoid", sigmoid, 6, 2, 0, NULL, NULL, sample_unary, NULL),
    UNARY("silu", "silu", silu, 8, 2, 0, NULL, NULL, sample_unary,
          "Proposal (not in TorchLean BackendOps): x*sigmoid(x), compared with at::silu"),
    UNARY("tanh", "tanh", tanh, 4, 2, 0, NULL, NULL, sample_unary, NULL),
    UNARY("softplus", "softplus", softplus, 2, 8, 0, NULL, NULL, sample_unary,
          "beta 1, no threshold (ATen softplus defaults to threshold 20); log(1+e), not log1p"),
    UNARY("exp", "exp", exp, 4, 6, 0, NULL, NULL, sample_unary, NULL),
    UNARY("log", "log", log, 4, 4, 0, NULL, log_domain, sample_unary,
          "x <= 0 or NaN is rejected (TorchLean errors; ATen gives -Inf/NaN)"),
    UNARY("sin", "sin", sin, 4, 6, 0, NULL, NULL, sample_unary, NULL),
    UNARY("cos", "cos", cos, 4, 6, 0, NULL, NULL, sample_unary, NULL),
    UNARY("inv", "inv", inv, 2, 6, 0, NULL, inv_domain, sample_unary, NULL),
    UNARY("safeLog", "safe_log", safeLog, 2, 2, REF_P_EPS, safelog_defaults, NULL,
          sample_safelog, "log(softplus(x) + eps), eps default 1e-6; not log(max(x, eps))"),
};
const int ref_family_pointwise_count = (int)(sizeof ref_family_pointwise /
                                             sizeof ref_family_pointwise[0]);
