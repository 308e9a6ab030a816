/* Exact tests of the edge rules of scaledMatmul, softmaxMatmul, batchNorm, fftFno,
 * selectiveScan and attention (ops.md G, I, K), and of their shape-error messages. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "reference/ref.h"
#include "ref_test_util.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

#define MAXN 256

/* A small case: up to 5 inputs of at most MAXN values each. */
typedef struct {
    const ref_op *op;
    ref_params p;
    int n;
    ref_shape s[REF_MAX_INPUTS];
    double v[REF_MAX_INPUTS][MAXN];
    ref_shape out_shape;
    double y[MAXN], mag[MAXN];
    double g[MAXN];
    double grad[REF_MAX_INPUTS][MAXN], gmag[REF_MAX_INPUTS][MAXN];
} tcase;

static ref_shape shp(int rank, ...)
{
    ref_shape s = {rank, {0}};
    va_list ap;
    va_start(ap, rank);
    for (int i = 0; i < rank; i++)
        s.dim[i] = va_arg(ap, int64_t);
    va_end(ap);
    return s;
}
#define S1(a) shp(1, (int64_t)(a))
#define S2(a, b) shp(2, (int64_t)(a), (int64_t)(b))
#define S3(a, b, c) shp(3, (int64_t)(a), (int64_t)(b), (int64_t)(c))

static void init(tcase *c, const char *name)
{
    memset(c, 0, sizeof *c);
    c->op = ref_t_op(name);
    c->p = ref_t_params(c->op);
}

static void add_input(tcase *c, ref_shape s, const double *vals)
{
    int64_t n = ref_numel(&s);
    assert_true(n <= MAXN);
    c->s[c->n] = s;
    if (vals)
        memcpy(c->v[c->n], vals, sizeof(double) * (size_t)n);
    c->n++;
}

static ref_status shape_of(tcase *c, ref_err *e)
{
    return c->op->shape(&c->p, c->n, c->s, &c->out_shape, e);
}

static void run_fwd(tcase *c)
{
    ref_err e = {{0}};
    ref_status st = shape_of(c, &e);
    if (st != REF_OK)
        fail_msg("%s shape: %s", c->op->name, e.msg);
    assert_true(ref_numel(&c->out_shape) <= MAXN);
    ref_tensor in[REF_MAX_INPUTS], out = {c->out_shape, c->y};
    for (int i = 0; i < c->n; i++)
        in[i] = (ref_tensor){c->s[i], c->v[i]};
    assert_int_equal(ref_t_forward(c->op, &c->p, c->n, in, &out, c->mag), REF_OK);
}

/* Forward, then the VJP of every differentiable input for cotangent c->g. */
static void run_vjp(tcase *c)
{
    run_fwd(c);
    ref_tensor in[REF_MAX_INPUTS], grad[REF_MAX_INPUTS], y = {c->out_shape, c->y},
                                                      g = {c->out_shape, c->g};
    double *gm[REF_MAX_INPUTS];
    for (int i = 0; i < c->n; i++) {
        in[i] = (ref_tensor){c->s[i], c->v[i]};
        int diff = c->op->input_kind[i] == REF_IN_DATA;
        grad[i] = (ref_tensor){c->s[i], diff ? c->grad[i] : NULL};
        gm[i] = diff ? c->gmag[i] : NULL;
    }
    assert_int_equal(ref_t_vjp(c->op, &c->p, c->n, in, &y, &g, grad, gm), REF_OK);
}

static void expect_shape_error(tcase *c, const char *needle)
{
    ref_err e = {{0}};
    assert_int_equal(shape_of(c, &e), REF_EINVAL);
    if (!strstr(e.msg, needle))
        fail_msg("%s: message \"%s\" lacks \"%s\"", c->op->name, e.msg, needle);
}

static void assert_near(double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol))
        fail_msg("got %.17g, want %.17g (tol %g)", got, want, tol);
}

/* ---- scaledMatmul ------------------------------------------------------------------------- */

static void test_scaled_matmul_alpha(void **state)
{
    (void)state;
    tcase c;
    init(&c, "scaled_matmul");
    assert_true(c.p.alpha == 1.0); /* default: plain matmul */
    c.p.alpha = -0.5;
    add_input(&c, S2(2, 2), (double[]){1, 2, 3, 4});
    add_input(&c, S2(2, 2), (double[]){5, 6, 7, 8});
    memcpy(c.g, (double[]){1, 0, 0, 2}, sizeof(double) * 4);
    run_vjp(&c);
    const double y[] = {-9.5, -11, -21.5, -25}; /* -0.5 * [[19, 22], [43, 50]] */
    for (int i = 0; i < 4; i++)
        assert_true(c.y[i] == y[i]);
    /* m = |alpha| (K + 3) sum|a b|: element 0 has sum|ab| = 1*5 + 2*7 = 19 */
    assert_true(c.mag[0] == 0.5 * 5 * 19);
    /* dA = alpha g B^T = -0.5 [[5, 7], [12, 16]]; dB = alpha A^T g = -0.5 [[1, 6], [2, 8]] */
    const double da[] = {-2.5, -3.5, -6, -8}, db[] = {-0.5, -3, -1, -4};
    for (int i = 0; i < 4; i++) {
        assert_true(c.grad[0][i] == da[i]);
        assert_true(c.grad[1][i] == db[i]);
    }
    /* 1-D promotion: a [2] @ b [2] is a scalar */
    init(&c, "scaledMatmul");
    c.p.alpha = 2.0;
    add_input(&c, S1(2), (double[]){1, 2});
    add_input(&c, S1(2), (double[]){3, 4});
    run_fwd(&c);
    assert_int_equal(c.out_shape.rank, 0);
    assert_true(c.y[0] == 22.0);
}

static void test_scaled_matmul_errors(void **state)
{
    (void)state;
    tcase c;
    init(&c, "scaledMatmul");
    c.p.alpha = INFINITY;
    add_input(&c, S2(2, 2), NULL);
    add_input(&c, S2(2, 2), NULL);
    expect_shape_error(&c, "finite alpha");
    init(&c, "scaledMatmul");
    add_input(&c, S2(2, 3), NULL);
    add_input(&c, S2(2, 2), NULL);
    expect_shape_error(&c, "inner extents differ");
}

/* ---- softmaxMatmul ------------------------------------------------------------------------ */

static void test_softmax_matmul(void **state)
{
    (void)state;
    tcase c;
    init(&c, "softmaxMatmul");
    /* S = 0 gives uniform weights: out = mean of V's rows; row 1 puts all weight on key 1 */
    add_input(&c, S2(2, 2), (double[]){0, 0, -1e300, 0});
    add_input(&c, S2(2, 3), (double[]){1, 2, 3, 5, 6, 7});
    memcpy(c.g, (double[]){1, 1, 1, 0, 0, 0}, sizeof(double) * 6);
    run_vjp(&c);
    const double y[] = {3, 4, 5, 5, 6, 7};
    for (int i = 0; i < 6; i++)
        assert_true(c.y[i] == y[i]);
    /* row 0: dP = g V^T = [6, 18], r = 12, dS = 0.5 * [-6, 6]; row 1 g = 0 -> dS = 0 */
    const double ds[] = {-3, 3, 0, 0};
    for (int i = 0; i < 4; i++)
        assert_true(c.grad[0][i] == ds[i]);
    /* dV = P^T g: only row 0 contributes, with weights 1/2 */
    for (int i = 0; i < 6; i++)
        assert_true(c.grad[1][i] == 0.5);
    /* m = 0 keys: the empty sum is 0 */
    init(&c, "softmaxMatmul");
    add_input(&c, S3(2, 3, 0), NULL);
    add_input(&c, S3(2, 0, 2), NULL);
    run_fwd(&c);
    assert_int_equal(ref_numel(&c.out_shape), 12);
    for (int i = 0; i < 12; i++)
        assert_true(c.y[i] == 0.0 && c.mag[i] == 0.0);
}

static void test_softmax_matmul_errors(void **state)
{
    (void)state;
    tcase c;
    init(&c, "softmaxMatmul");
    add_input(&c, S1(3), NULL);
    add_input(&c, S2(3, 2), NULL);
    expect_shape_error(&c, "same rank >= 2");
    init(&c, "softmaxMatmul");
    add_input(&c, S3(2, 1, 3), NULL);
    add_input(&c, S3(1, 3, 2), NULL);
    expect_shape_error(&c, "no broadcasting");
    init(&c, "softmaxMatmul");
    add_input(&c, S2(1, 3), NULL);
    add_input(&c, S2(2, 2), NULL);
    expect_shape_error(&c, "inner extents differ");
}

/* ---- batchNorm ------------------------------------------------------------------------------ */

static void test_batch_norm_training(void **state)
{
    (void)state;
    tcase c;
    init(&c, "batch_norm");
    assert_true(c.p.eps == 1e-5 && c.p.training == 1);
    /* channel 0 = [1, 3] (mu 2, var 1; eps 3 makes sigma 2), channel 1 = [4, 4] (var 0) */
    c.p.eps = 3.0;
    add_input(&c, S2(2, 2), (double[]){1, 3, 4, 4});
    add_input(&c, S1(2), (double[]){2, 5});
    add_input(&c, S1(2), (double[]){10, 20});
    memcpy(c.g, (double[]){1, 2, 3, 4}, sizeof(double) * 4);
    run_vjp(&c);
    /* channel 0: xhat = [-0.5, 0.5], y = 2 xhat + 10; channel 1: zero variance, y = beta */
    const double y[] = {9, 11, 20, 20};
    for (int i = 0; i < 4; i++)
        assert_true(c.y[i] == y[i]);
    /* dgamma_0 = sum g xhat = -0.5 + 1 = 0.5; dbeta = sum g; channel 1 xhat = 0 */
    assert_true(c.grad[1][0] == 0.5 && c.grad[1][1] == 0.0);
    assert_true(c.grad[2][0] == 3.0 && c.grad[2][1] == 7.0);
    /* dx_0 = (1/2)(a - mean a - xhat mean(a xhat)), a = [2, 4]: mean a = 3, mean(a xhat) = 0.5 */
    assert_true(c.grad[0][0] == 0.5 * (2 - 3 - (-0.5) * 0.5));
    assert_true(c.grad[0][1] == 0.5 * (4 - 3 - 0.5 * 0.5));
    /* channel 1 (zero variance): a = [15, 20], xhat = 0: dx = (a - mean a) / sqrt(eps) */
    assert_near(c.grad[0][2], (15 - 17.5) / sqrt(3.0), 1e-15);
}

static void test_batch_norm_single_position(void **state)
{
    (void)state;
    tcase c;
    init(&c, "batchNorm");
    /* x [C] (rank 1) and x [C, 1, 1] each have one spatial position: var = 0, y = beta */
    for (int form = 0; form < 2; form++) {
        init(&c, "batchNorm");
        add_input(&c, form ? S3(2, 1, 1) : S1(2), (double[]){7, -3});
        add_input(&c, S1(2), (double[]){2, 3});
        add_input(&c, S1(2), (double[]){0.5, -1});
        memcpy(c.g, (double[]){1.5, -2}, sizeof(double) * 2);
        run_vjp(&c);
        assert_true(c.y[0] == 0.5 && c.y[1] == -1.0);
        for (int i = 0; i < 2; i++) {
            assert_true(c.grad[0][i] == 0.0); /* y does not depend on x */
            assert_true(c.grad[1][i] == 0.0); /* xhat = 0 */
            assert_true(c.grad[2][i] == c.g[i]);
            assert_true(isfinite(c.mag[i]) && isfinite(c.gmag[0][i]));
        }
    }
}

static void test_batch_norm_eval(void **state)
{
    (void)state;
    tcase c;
    init(&c, "batchNorm");
    c.p.training = 0;
    c.p.eps = 0.25;
    add_input(&c, S2(2, 2), (double[]){1, 3, 4, 6});
    add_input(&c, S1(2), (double[]){2, 5});
    add_input(&c, S1(2), (double[]){10, 20});
    add_input(&c, S1(2), (double[]){2, 5});       /* running mean */
    add_input(&c, S1(2), (double[]){3.75, -3.0}); /* running var; the negative one clamps to 0 */
    assert_int_equal(c.op->input_kind[3], REF_IN_CONST);
    assert_int_equal(c.op->input_kind[4], REF_IN_CONST);
    memcpy(c.g, (double[]){1, 2, 3, 4}, sizeof(double) * 4);
    run_vjp(&c);
    /* channel 0: sigma = sqrt(3.75 + 0.25) = 2; channel 1: sigma = sqrt(0 + 0.25) = 0.5 */
    const double y[] = {9, 11, 10, 30};
    for (int i = 0; i < 4; i++)
        assert_true(c.y[i] == y[i]);
    /* dx = g gamma / sigma; dgamma = sum g xhat; dbeta = sum g */
    const double dx[] = {1, 2, 30, 40};
    for (int i = 0; i < 4; i++)
        assert_true(c.grad[0][i] == dx[i]);
    assert_true(c.grad[1][0] == -0.5 + 1.0 && c.grad[1][1] == 3 * -2.0 + 4 * 2.0);
    assert_true(c.grad[2][0] == 3.0 && c.grad[2][1] == 7.0);
    /* the eval form accepts empty spatial extents */
    init(&c, "batchNorm");
    c.p.training = 0;
    add_input(&c, S2(2, 0), NULL);
    for (int k = 0; k < 4; k++)
        add_input(&c, S1(2), (double[]){1, 1});
    run_fwd(&c);
    assert_int_equal(ref_numel(&c.out_shape), 0);
}

static void test_batch_norm_errors(void **state)
{
    (void)state;
    tcase c;
    init(&c, "batchNorm");
    add_input(&c, S2(2, 3), NULL);
    add_input(&c, S1(2), NULL);
    add_input(&c, S1(2), NULL);
    add_input(&c, S1(2), NULL);
    add_input(&c, S1(2), NULL);
    expect_shape_error(&c, "training form takes 3 inputs");
    c.p.training = 0;
    c.n = 3;
    expect_shape_error(&c, "eval form takes 5 inputs");
    init(&c, "batchNorm");
    add_input(&c, S2(2, 3), NULL);
    add_input(&c, S1(3), NULL);
    add_input(&c, S1(2), NULL);
    expect_shape_error(&c, "gamma must have shape [2]");
    init(&c, "batchNorm");
    add_input(&c, S2(2, 0), NULL);
    add_input(&c, S1(2), NULL);
    add_input(&c, S1(2), NULL);
    expect_shape_error(&c, "at least one spatial position");
    init(&c, "batchNorm");
    add_input(&c, shp(0), NULL);
    add_input(&c, S1(1), NULL);
    add_input(&c, S1(1), NULL);
    expect_shape_error(&c, "rank >= 1");
    init(&c, "batchNorm");
    c.p.eps = -1;
    add_input(&c, S2(1, 2), NULL);
    add_input(&c, S1(1), NULL);
    add_input(&c, S1(1), NULL);
    expect_shape_error(&c, "eps must be");
}

/* ---- fftFno ------------------------------------------------------------------------------- */

static void test_rfft_known_signal(void **state)
{
    (void)state;
    tcase c;
    init(&c, "fft_fno");
    c.p.variant = 1;
    add_input(&c, S2(2, 4), (double[]){1, 2, 3, 4, 1, 0, 0, 0});
    run_fwd(&c);
    assert_int_equal(c.out_shape.rank, 3);
    assert_int_equal(c.out_shape.dim[1], 3);
    /* [1,2,3,4]: X = 10, -2 + 2i, -2 (DC and Nyquist imaginaries exactly +0); impulse: all 1 */
    const double y[] = {10, 0, -2, 2, -2, 0, 1, 0, 1, 0, 1, 0};
    for (int i = 0; i < 12; i++)
        assert_true(c.y[i] == y[i]);
    assert_true(!signbit(c.y[1]) && !signbit(c.y[5]) && !signbit(c.y[7]) && !signbit(c.y[11]));
    /* odd n = 3: no Nyquist bin; X_1 = -1.5 + i sqrt(3)/2 */
    init(&c, "fftFno");
    c.p.variant = 1;
    add_input(&c, S2(1, 3), (double[]){1, 2, 3});
    run_fwd(&c);
    assert_int_equal(c.out_shape.dim[1], 2);
    assert_true(c.y[0] == 6 && c.y[1] == 0.0);
    assert_near(c.y[2], -1.5, 1e-14);
    assert_near(c.y[3], sqrt(3.0) / 2, 1e-14);
    /* n = 1: one bin, the DC value */
    init(&c, "fftFno");
    c.p.variant = 1;
    add_input(&c, S2(1, 1), (double[]){-2.5});
    run_fwd(&c);
    assert_true(c.y[0] == -2.5 && c.y[1] == 0.0);
    /* rfft VJP (adjoint): dx_t = sum_k Gr cos - iota Gi sin; endpoint Gi have no effect */
    init(&c, "fftFno");
    c.p.variant = 1;
    add_input(&c, S2(1, 4), (double[]){0, 0, 0, 0});
    memcpy(c.g, (double[]){0, 7, 0, 0, 0, -9}, sizeof(double) * 6); /* only endpoint imaginaries */
    run_vjp(&c);
    for (int t = 0; t < 4; t++)
        assert_true(c.grad[0][t] == 0.0);
    memcpy(c.g, (double[]){1, 0, 0, 1, 0, 0}, sizeof(double) * 6); /* DC re 1, bin 1 im 1 */
    run_vjp(&c);
    const double dx[] = {1, 0, 1, 2}; /* 1 - sin(pi t / 2) */
    for (int t = 0; t < 4; t++)
        assert_true(c.grad[0][t] == dx[t]);
}

static void test_irfft_roundtrip_and_endpoints(void **state)
{
    (void)state;
    for (int64_t n = 1; n <= 9; n++) {
        tcase f, b;
        init(&f, "fftFno");
        f.p.variant = 1;
        double x[9];
        for (int t = 0; t < n; t++)
            x[t] = sin(1.0 + 3.0 * t) * 2.0 - 0.25 * t;
        add_input(&f, S2(1, n), x);
        run_fwd(&f);
        init(&b, "fftFno");
        b.p.variant = 2;
        b.p.length = n;
        add_input(&b, f.out_shape, f.y);
        /* irfft ignores the endpoint imaginaries: garbage there changes nothing */
        b.v[0][1] = 123.0;
        if (n % 2 == 0)
            b.v[0][2 * (n / 2) + 1] = -77.0;
        for (int t = 0; t < n; t++)
            b.g[t] = 1.0 + t;
        run_vjp(&b);
        assert_int_equal(b.out_shape.dim[1], n);
        for (int t = 0; t < n; t++)
            assert_near(b.y[t], x[t], 1e-13);
        /* the VJP w.r.t. the ignored endpoint imaginaries is exactly 0 */
        assert_true(b.grad[0][1] == 0.0);
        if (n % 2 == 0)
            assert_true(b.grad[0][2 * (n / 2) + 1] == 0.0);
    }
    /* irfft weights m_k / n: a lone interior bin (1, 0) of n = 4 gives (2/4) cos(pi t / 2) */
    tcase c;
    init(&c, "fftFno");
    c.p.variant = 2;
    c.p.length = 4;
    add_input(&c, S3(1, 3, 2), (double[]){0, 0, 1, 0, 0, 0});
    memcpy(c.g, (double[]){1, 0, 0, 0}, sizeof(double) * 4);
    run_vjp(&c);
    const double y[] = {0.5, 0, -0.5, 0};
    for (int t = 0; t < 4; t++)
        assert_true(c.y[t] == y[t]);
    /* irfft*(g) = (m_k/n) rfft(g): g = impulse -> [1/4, 0, 1/2, 0, 1/4, 0] */
    const double dz[] = {0.25, 0, 0.5, 0, 0.25, 0};
    for (int i = 0; i < 6; i++)
        assert_true(c.grad[0][i] == dz[i]);
}

static void test_spectral_conv_modes(void **state)
{
    (void)state;
    /* grid 8, width 1, identity weights on the kept modes: y = the low-pass of x */
    const int64_t n = 8;
    /* x = 1.5 - 2 (t % 2) + cos(2 pi t/8) + cos(6 pi t/8) = 0.5 + cos(bin 1) + cos(bin 3) +
     * cos(pi t) (bin 4, Nyquist): modes M keeps the bins below M */
    double x[8], want[6][8];
    for (int t = 0; t < n; t++) {
        double b1 = cos(2 * M_PI * t / n), b3 = cos(2 * M_PI * 3 * t / n), b4 = t % 2 ? -1 : 1;
        x[t] = 1.5 - 2.0 * (t % 2) + b1 + b3;
        want[0][t] = 0.0;
        want[1][t] = 0.5;
        want[2][t] = want[3][t] = 0.5 + b1;
        want[4][t] = 0.5 + b1 + b3;
        want[5][t] = 0.5 + b1 + b3 + b4;
    }
    for (int64_t modes = 0; modes <= n / 2 + 1; modes++) {
        tcase c;
        init(&c, "fft_fno");
        c.p.variant = 0;
        c.p.modes = modes;
        add_input(&c, S2(n, 1), x);
        double wr[5] = {1, 1, 1, 1, 1}, wi[5] = {0};
        add_input(&c, S3(modes, 1, 1), wr);
        add_input(&c, S3(modes, 1, 1), wi);
        for (int t = 0; t < n; t++)
            c.g[t] = 1.0 + t * t;
        run_vjp(&c);
        for (int t = 0; t < n; t++) {
            if (modes == 0)
                assert_true(c.y[t] == 0.0 && c.grad[0][t] == 0.0);
            assert_near(c.y[t], want[modes][t], 1e-13);
        }
        /* Wim at DC (and at Nyquist) only feeds an ignored imaginary part: gradient exactly 0 */
        if (modes >= 1)
            assert_true(c.grad[2][0] == 0.0);
        if (modes == 5)
            assert_true(c.grad[2][4] == 0.0);
    }
    /* complex weight: Y_1 = X_1 (0 + 1i) turns cos into -sin... y = -(2/8)|X_1| sin */
    tcase c;
    init(&c, "fftFno");
    c.p.variant = 0;
    c.p.modes = 2;
    double xc[8];
    for (int t = 0; t < n; t++)
        xc[t] = cos(2 * M_PI * t / n);
    add_input(&c, S2(n, 1), xc);
    add_input(&c, S3(2, 1, 1), (double[]){0, 0});
    add_input(&c, S3(2, 1, 1), (double[]){0, 1});
    run_fwd(&c);
    for (int t = 0; t < n; t++)
        assert_near(c.y[t], -sin(2 * M_PI * t / n), 1e-13);
}

static void test_fft_fno_errors(void **state)
{
    (void)state;
    tcase c;
    init(&c, "fftFno");
    c.p.variant = 3;
    add_input(&c, S2(2, 4), NULL);
    expect_shape_error(&c, "variant must be");
    c.p.variant = 1;
    c.s[0] = S2(2, 0);
    expect_shape_error(&c, "n >= 1");
    c.p.variant = 0;
    expect_shape_error(&c, "takes 3 inputs");
    c.p.variant = 2;
    c.s[0] = S3(2, 3, 2);
    c.p.length = 0;
    expect_shape_error(&c, "length >= 1");
    c.p.length = 6; /* needs 4 bins */
    expect_shape_error(&c, "[batch, 4, 2]");
    init(&c, "fftFno");
    c.p.variant = 0;
    c.p.modes = 4; /* grid 5 has 3 bins */
    add_input(&c, S2(5, 2), NULL);
    add_input(&c, S3(4, 2, 2), NULL);
    add_input(&c, S3(4, 2, 2), NULL);
    expect_shape_error(&c, "modes must be in 0..3");
    c.p.modes = 3;
    expect_shape_error(&c, "wre must be [modes, width, width] = [3, 2, 2]");
    c.s[1] = S3(3, 2, 2);
    expect_shape_error(&c, "wim must be");
    c.s[0] = S2(0, 2);
    expect_shape_error(&c, "grid >= 1");
}

/* ---- selectiveScan ------------------------------------------------------------------------ */

static void test_scan_shared(void **state)
{
    (void)state;
    tcase c;
    init(&c, "selective_scan");
    add_input(&c, S1(1), (double[]){0.5});
    add_input(&c, S1(1), (double[]){2});
    add_input(&c, S2(3, 1), (double[]){1, 2, 3});
    add_input(&c, S1(1), (double[]){1});
    memcpy(c.g, (double[]){1, 1, 1}, sizeof(double) * 3);
    run_vjp(&c);
    /* h = 0.5*1 + 2*1 = 2.5, 0.5*2.5 + 4 = 5.25, 0.5*5.25 + 6 = 8.625 */
    assert_true(c.y[0] == 2.5 && c.y[1] == 5.25 && c.y[2] == 8.625);
    /* m_t = (2t + 3) N_t with N = 2.5, 5.25, 8.625 (all terms positive) */
    assert_true(c.mag[0] == 3 * 2.5 && c.mag[2] == 7 * 8.625);
    /* G = 1.75, 1.5, 1: da = sum G_t h_{t-1} = 1.75 + 3.75 + 5.25, db = sum G_t x_t */
    assert_true(c.grad[0][0] == 10.75);
    assert_true(c.grad[1][0] == 7.75);
    assert_true(c.grad[2][0] == 3.5 && c.grad[2][1] == 3.0 && c.grad[2][2] == 2.0);
    assert_true(c.grad[3][0] == 0.875);
}

static void test_scan_token(void **state)
{
    (void)state;
    tcase c;
    init(&c, "selectiveScan");
    add_input(&c, S2(3, 1), (double[]){0.5, 2, -1});
    add_input(&c, S2(3, 1), (double[]){1, 0.5, 3});
    add_input(&c, S2(3, 1), (double[]){1, 2, 3});
    add_input(&c, S1(1), (double[]){1});
    memcpy(c.g, (double[]){1, 1, 1}, sizeof(double) * 3);
    run_vjp(&c);
    /* h = 0.5 + 1 = 1.5, 2*1.5 + 1 = 4, -4 + 9 = 5 */
    assert_true(c.y[0] == 1.5 && c.y[1] == 4.0 && c.y[2] == 5.0);
    /* G_2 = 1, G_1 = 1 + a_2 G_2 = 0, G_0 = 1 + a_1 G_1 = 1 */
    const double da[] = {1, 0, 4}, db[] = {1, 0, 3}, dx[] = {1, 0, 3};
    for (int t = 0; t < 3; t++) {
        assert_true(c.grad[0][t] == da[t]);
        assert_true(c.grad[1][t] == db[t]);
        assert_true(c.grad[2][t] == dx[t]);
    }
    assert_true(c.grad[3][0] == 0.5);
    /* two channels are independent: channel 1 with a = 0 forgets h0 */
    init(&c, "selectiveScan");
    add_input(&c, S2(2, 2), (double[]){0.5, 0, 0.5, 0});
    add_input(&c, S2(2, 2), (double[]){1, 1, 1, 1});
    add_input(&c, S2(2, 2), (double[]){1, 3, 1, 4});
    add_input(&c, S1(2), (double[]){2, 100});
    run_fwd(&c);
    assert_true(c.y[0] == 2 && c.y[1] == 3 && c.y[2] == 2 && c.y[3] == 4);
}

static void test_scan_empty(void **state)
{
    (void)state;
    for (int shared = 0; shared < 2; shared++) {
        tcase c;
        init(&c, "selectiveScan");
        add_input(&c, shared ? S1(2) : S2(0, 2), (double[]){0.5, 0.5});
        add_input(&c, shared ? S1(2) : S2(0, 2), (double[]){1, 1});
        add_input(&c, S2(0, 2), NULL);
        add_input(&c, S1(2), (double[]){3, 4});
        for (int i = 0; i < 4; i++)
            c.grad[0][i] = c.grad[1][i] = c.grad[3][i] = 99;
        run_vjp(&c);
        assert_int_equal(ref_numel(&c.out_shape), 0);
        assert_true(c.grad[3][0] == 0.0 && c.grad[3][1] == 0.0); /* h0 reaches no output */
        if (shared)
            assert_true(c.grad[0][0] == 0.0 && c.grad[1][1] == 0.0);
    }
}

static void test_scan_errors(void **state)
{
    (void)state;
    tcase c;
    init(&c, "selectiveScan");
    add_input(&c, S1(2), NULL);
    add_input(&c, S1(2), NULL);
    add_input(&c, S1(2), NULL);
    add_input(&c, S1(2), NULL);
    expect_shape_error(&c, "wants x [T, D]");
    c.s[2] = S2(3, 2);
    c.s[3] = S1(3);
    expect_shape_error(&c, "h0 must be [D] = [2]");
    c.s[3] = S1(2);
    c.s[1] = S2(3, 2);
    expect_shape_error(&c, "share one layout");
    c.s[0] = c.s[1] = S2(4, 2);
    expect_shape_error(&c, "(token-dependent)");
}

/* ---- attention ---------------------------------------------------------------------------- */

static void test_attention_masked_row(void **state)
{
    (void)state;
    tcase c;
    init(&c, "attention");
    assert_int_equal(c.op->input_kind[3], REF_IN_MASK);
    /* B 1, nQ 2, nK 2, d 4 (scale 1/2), dv 1; row 0 fully blocked, row 1 allows both keys */
    add_input(&c, S3(1, 2, 4), (double[]){1, 2, 3, 4, 0, 0, 0, 0});
    add_input(&c, S3(1, 2, 4), (double[]){1, 0, 0, 0, 0, 1, 0, 0});
    add_input(&c, S3(1, 2, 1), (double[]){2, 6});
    add_input(&c, S2(2, 2), (double[]){0, 0, 1, 1});
    memcpy(c.g, (double[]){5, 1}, sizeof(double) * 2);
    run_vjp(&c);
    assert_true(c.y[0] == 0.0 && c.mag[0] == 0.0); /* zero weights, zero output */
    assert_true(c.y[1] == 4.0);                    /* Q row 1 = 0: uniform weights */
    for (int l = 0; l < 4; l++)
        assert_true(c.grad[0][l] == 0.0); /* the blocked row's dQ is 0 whatever g is */
    /* row 1: dA = g V^T = [2, 6], r = 4, dS' = 0.5 [-2, 2], dS = dS'/2; dQ_1 = dS K */
    const double dq1[] = {-0.5, 0.5, 0, 0};
    for (int l = 0; l < 4; l++)
        assert_true(c.grad[0][4 + l] == dq1[l]);
    for (int l = 0; l < 8; l++)
        assert_true(c.grad[1][l] == 0.0); /* dK = dS^T Q and Q row 1 is 0 */
    assert_true(c.grad[2][0] == 0.5 && c.grad[2][1] == 0.5); /* dV = A^T g: row 0 adds nothing */
    /* nK = 0: every row is empty, output zeros */
    init(&c, "attention");
    add_input(&c, S3(2, 3, 2), NULL);
    add_input(&c, S3(2, 0, 2), NULL);
    add_input(&c, S3(2, 0, 3), NULL);
    run_fwd(&c);
    assert_int_equal(ref_numel(&c.out_shape), 18);
    for (int i = 0; i < 18; i++)
        assert_true(c.y[i] == 0.0);
}

/* A fully blocked row is zero output and no gradient term whatever V, K and its own Q hold
 * (ops.md): Σ 0·V would be NaN where V holds NaN or Inf; a partially blocked row keeps ordinary
 * arithmetic (a blocked key's NaN reaches its output). The sampled forms are held to these values
 * by tests/test_ref_sampled.c on cases/edge/shapes.cases' blocked-row lines. */
static void test_attention_blocked_row_nonfinite(void **state)
{
    (void)state;
    tcase c;
    init(&c, "attention");
    /* B 1, nQ 3, nK 2, d 1, dv 2; row 0 fully blocked (and its Q is NaN), row 1 allows key 0
     * only (key 1's V holds NaN and Inf), row 2 allows both */
    add_input(&c, S3(1, 3, 1), (double[]){NAN, 1, 2});
    add_input(&c, S3(1, 2, 1), (double[]){1, INFINITY});
    add_input(&c, S3(1, 2, 2), (double[]){1, 2, NAN, INFINITY});
    add_input(&c, S2(3, 2), (double[]){0, 0, 1, 0, 1, 1});
    memcpy(c.g, (double[]){1, 1, 1, 1, 1, 1}, sizeof(double) * 6);
    run_vjp(&c);
    assert_true(c.y[0] == 0.0 && c.y[1] == 0.0); /* not 0 * NaN */
    assert_true(c.mag[0] == 0.0 && c.mag[1] == 0.0);
    assert_true(isnan(c.y[2]) && isnan(c.y[3])); /* 0 * NaN, 0 * Inf of blocked key 1 */
    assert_true(isnan(c.y[4]));                   /* row 2: an Inf score, a NaN value */
    assert_true(c.grad[0][0] == 0.0);             /* dQ of the blocked row */
    assert_true(c.gmag[0][0] == 0.0);
}

static void test_attention_causal(void **state)
{
    (void)state;
    tcase c;
    init(&c, "attention");
    c.p.causal = 1;
    /* rank 2 (one head), nQ 3 > nK 2, d 0 (scale 1, scores 0): row 0 sees key 0, rows 1-2 both */
    add_input(&c, S2(3, 0), NULL);
    add_input(&c, S2(2, 0), NULL);
    add_input(&c, S2(2, 2), (double[]){1, 10, 3, 30});
    run_fwd(&c);
    const double y[] = {1, 10, 2, 20, 2, 20};
    for (int i = 0; i < 6; i++)
        assert_true(c.y[i] == y[i]);
    /* causal and mask together: the mask blocks key 0 of row 1, causal blocks key 1 of row 0 */
    add_input(&c, S2(3, 2), (double[]){1, 1, 0, 1, 0, 0});
    run_fwd(&c);
    const double y2[] = {1, 10, 3, 30, 0, 0};
    for (int i = 0; i < 6; i++)
        assert_true(c.y[i] == y2[i]);
    /* without causal the scores decide: a large score on key 1 wins row 0 */
    init(&c, "attention");
    add_input(&c, S2(1, 1), (double[]){1});
    add_input(&c, S2(2, 1), (double[]){0, 800});
    add_input(&c, S2(2, 1), (double[]){1, 3});
    run_fwd(&c);
    assert_true(c.y[0] == 3.0);
    c.p.causal = 1;
    run_fwd(&c);
    assert_true(c.y[0] == 1.0);
}

static void test_attention_errors(void **state)
{
    (void)state;
    tcase c;
    init(&c, "attention");
    add_input(&c, S1(4), NULL);
    add_input(&c, S1(4), NULL);
    add_input(&c, S1(4), NULL);
    expect_shape_error(&c, "of one rank >= 2");
    c.s[0] = S3(2, 3, 4);
    c.s[1] = S3(1, 5, 4);
    c.s[2] = S3(2, 5, 6);
    expect_shape_error(&c, "leading (batch*heads) axes");
    c.s[1] = S3(2, 5, 3);
    expect_shape_error(&c, "head dimension d");
    c.s[1] = S3(2, 5, 4);
    c.s[2] = S3(2, 4, 6);
    expect_shape_error(&c, "number of keys");
    c.s[2] = S3(2, 5, 6);
    add_input(&c, S2(5, 3), NULL);
    expect_shape_error(&c, "mask must be [nQ, nK] = [3, 5]");
    c.s[3] = S2(3, 5);
    ref_err e;
    assert_int_equal(shape_of(&c, &e), REF_OK);
    assert_int_equal(c.out_shape.dim[2], 6);
}

/* ---- samplers honour the request ---------------------------------------------------------- */

static void test_samplers(void **state)
{
    (void)state;
    const char *names[] = {"scaledMatmul", "softmaxMatmul", "batchNorm", "fftFno",
                           "selectiveScan", "attention"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        const ref_op *op = ref_t_op(names[k]);
        int zero_seen = 0;
        for (int rank = -1; rank <= 5; rank++)
            for (int zero = 0; zero < 2; zero++)
                for (uint64_t seed = 1; seed < 40; seed++) {
                    ref_rng r = {seed * 7919u + (uint64_t)rank};
                    ref_sample_req req = {rank, zero, 48};
                    ref_params p = ref_t_params(op);
                    ref_shape in[REF_MAX_INPUTS], out;
                    int n = 0;
                    ref_status st = op->sample(&r, &req, &p, &n, in);
                    if (st == REF_ENOTAPPLICABLE)
                        continue;
                    assert_int_equal(st, REF_OK);
                    assert_true(n >= op->min_inputs && n <= op->max_inputs);
                    ref_err e = {{0}};
                    if (op->shape(&p, n, in, &out, &e) != REF_OK)
                        fail_msg("%s sampled an invalid case: %s", op->name, e.msg);
                    assert_true(ref_numel(&in[0]) <= 48);
                    if (rank >= 0)
                        assert_int_equal(in[0].rank, rank);
                    if (zero) {
                        int has_zero = 0;
                        for (int i = 0; i < n; i++)
                            has_zero |= ref_numel(&in[i]) == 0;
                        assert_true(has_zero);
                        zero_seen = 1;
                    }
                }
        assert_true(zero_seen);
    }
}

/* ---- the other ops of the files owned here: matmul, linear, layerNorm shape errors --------- */

static void test_owned_shape_errors(void **state)
{
    (void)state;
    tcase c;
    init(&c, "matmul");
    add_input(&c, shp(0), NULL);
    add_input(&c, S1(2), NULL);
    expect_shape_error(&c, "rank >= 1 operands");
    c.s[0] = S3(2, 1, 3);
    c.s[1] = S3(3, 3, 1);
    expect_shape_error(&c, "batch axes do not broadcast");
    init(&c, "linear");
    add_input(&c, S2(2, 3), NULL);
    add_input(&c, S1(3), NULL);
    add_input(&c, S1(4), NULL);
    expect_shape_error(&c, "linear wants x [..., in]");
    c.s[1] = S2(4, 2);
    expect_shape_error(&c, "linear extents disagree");
    init(&c, "layerNorm");
    c.p.axis = 2;
    add_input(&c, S2(2, 3), NULL);
    add_input(&c, S1(3), NULL);
    add_input(&c, S1(3), NULL);
    expect_shape_error(&c, "axis 2 is out of range");
    c.p.axis = 1;
    c.s[0] = S2(2, 0);
    expect_shape_error(&c, "empty suffix");
    c.s[0] = S2(2, 3);
    c.s[2] = S1(2);
    expect_shape_error(&c, "beta must have the normalized shape [3]");
    c.s[2] = S1(3);
    c.p.eps = -1;
    expect_shape_error(&c, "eps must be >= 0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scaled_matmul_alpha),
        cmocka_unit_test(test_scaled_matmul_errors),
        cmocka_unit_test(test_softmax_matmul),
        cmocka_unit_test(test_softmax_matmul_errors),
        cmocka_unit_test(test_batch_norm_training),
        cmocka_unit_test(test_batch_norm_single_position),
        cmocka_unit_test(test_batch_norm_eval),
        cmocka_unit_test(test_batch_norm_errors),
        cmocka_unit_test(test_rfft_known_signal),
        cmocka_unit_test(test_irfft_roundtrip_and_endpoints),
        cmocka_unit_test(test_spectral_conv_modes),
        cmocka_unit_test(test_fft_fno_errors),
        cmocka_unit_test(test_scan_shared),
        cmocka_unit_test(test_scan_token),
        cmocka_unit_test(test_scan_empty),
        cmocka_unit_test(test_scan_errors),
        cmocka_unit_test(test_attention_masked_row),
        cmocka_unit_test(test_attention_blocked_row_nonfinite),
        cmocka_unit_test(test_attention_causal),
        cmocka_unit_test(test_attention_errors),
        cmocka_unit_test(test_samplers),
        cmocka_unit_test(test_owned_shape_errors),
    };
    return cmocka_run_group_tests_name("reference_edges_composite", tests, NULL, NULL);
}
