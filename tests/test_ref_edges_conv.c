/* Exact tests of the edge rules of conv, convTranspose, maxPool, smoothMaxPool and avgPool
 * (ops.md J), on small cases computed by hand: stride, padding, dilation (0 included), groups,
 * 1-D/2-D/3-D index order, empty outputs, the maxPool first-winner rule and its VJP, padded cells
 * ignored by maxPool but zero for smoothMaxPool/avgPool, the p > floor(k/2) rule, overflow-scale
 * smoothMaxPool, negative beta, shape-error messages, and the samplers' contracts. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/case/values.h"
#include "reference/ref.h"
#include "ref_test_util.h"

#define CAP 512

typedef struct {
    const ref_op *op;
    ref_params p;
    int n;
    ref_tensor in[3];
    double buf[3][CAP];
    ref_shape out;
    double y[CAP], mag[CAP];
    double grad[3][CAP], gmag[3][CAP];
} tc;

static ref_shape shp(int rank, ...)
{
    ref_shape s = {rank, {0}};
    va_list ap;
    va_start(ap, rank);
    for (int i = 0; i < rank; i++)
        s.dim[i] = va_arg(ap, int);
    va_end(ap);
    return s;
}

static void tc_init(tc *t, const char *name, int spatial, int n)
{
    memset(t, 0, sizeof *t);
    t->op = ref_t_op(name);
    t->p = ref_t_params(t->op);
    t->p.spatial = spatial;
    t->n = n;
}

/* Input i with shape s and values v (NULL: 0, 1, 2, ... scaled by `scale` if v is NULL). */
static void tc_in(tc *t, int i, ref_shape s, const double *v)
{
    int64_t cnt = ref_numel(&s);
    assert_true(cnt <= CAP);
    t->in[i].shape = s;
    t->in[i].v = t->buf[i];
    for (int64_t j = 0; j < cnt; j++)
        t->buf[i][j] = v ? v[j] : (double)(j + 1);
}

static ref_status tc_shape(tc *t, ref_err *e)
{
    ref_shape s[3];
    for (int i = 0; i < t->n; i++)
        s[i] = t->in[i].shape;
    return t->op->shape(&t->p, t->n, s, &t->out, e);
}

static void tc_fwd(tc *t)
{
    ref_err e = {{0}};
    ref_status st = tc_shape(t, &e);
    if (st != REF_OK)
        fail_msg("%s shape failed: %s", t->op->name, e.msg);
    assert_true(ref_numel(&t->out) <= CAP);
    ref_tensor out = {t->out, t->y};
    assert_int_equal(ref_t_forward(t->op, &t->p, t->n, t->in, &out, t->mag), REF_OK);
}

static void tc_vjp(tc *t, const double *g)
{
    tc_fwd(t);
    double gb[CAP];
    int64_t ny = ref_numel(&t->out);
    for (int64_t j = 0; j < ny; j++)
        gb[j] = g ? g[j] : 1.0;
    ref_tensor y = {t->out, t->y}, gt = {t->out, gb};
    ref_tensor grad[3];
    double *gm[3];
    for (int i = 0; i < t->n; i++) {
        grad[i].shape = t->in[i].shape;
        grad[i].v = t->grad[i];
        gm[i] = t->gmag[i];
    }
    assert_int_equal(ref_t_vjp(t->op, &t->p, t->n, t->in, &y, &gt, grad, gm), REF_OK);
}

static void expect_shape(const tc *t, ref_shape s)
{
    char a[96], b[96];
    ref_shape_fmt(&t->out, a, sizeof a);
    ref_shape_fmt(&s, b, sizeof b);
    if (!ref_shape_eq(&t->out, &s))
        fail_msg("%s output shape %s, expected %s", t->op->name, a, b);
}

static void expect_vals(const char *what, const double *got, const double *want, int64_t n,
                        double tol)
{
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol * (1.0 + fabs(want[i]))) &&
            !(isinf(want[i]) && got[i] == want[i]))
            fail_msg("%s[%lld] = %.17g, expected %.17g", what, (long long)i, got[i], want[i]);
}

static void expect_einval(tc *t, const char *needle)
{
    ref_err e = {{0}};
    ref_status st = tc_shape(t, &e);
    if (st != REF_EINVAL)
        fail_msg("%s: expected REF_EINVAL mentioning \"%s\", got status %d", t->op->name, needle,
                 (int)st);
    if (!strstr(e.msg, needle))
        fail_msg("%s: message \"%s\" does not mention \"%s\"", t->op->name, e.msg, needle);
}

/* ---- conv ---------------------------------------------------------------------------------- */

/* conv of x = [1, 2, 3, 4] ([1, 4]) with W = [1, 2, 3] ([1, 1, 3]), b = 0.5, stride 2, pad 1:
 * y = [8.5, 20.5]; for g = [1, 10]: dx = [2, 13, 20, 30], dW = [20, 31, 42], db = 11. */
static void conv_1d_stride2_pad1(tc *t)
{
    tc_init(t, "conv", 1, 3);
    double x[] = {1, 2, 3, 4}, w[] = {1, 2, 3}, b[] = {0.5};
    tc_in(t, 0, shp(2, 1, 4), x);
    tc_in(t, 1, shp(3, 1, 1, 3), w);
    tc_in(t, 2, shp(1, 1), b);
    t->p.stride[0] = 2;
    t->p.pad[0] = 1;
}

static void test_conv_1d_stride_pad(void **state)
{
    (void)state;
    tc t;
    conv_1d_stride2_pad1(&t);
    double g[] = {1, 10};
    tc_vjp(&t, g);
    expect_shape(&t, shp(2, 1, 2));
    /* o=0 reads cells -1,0,1: 0*1 + 1*2 + 2*3; o=1 reads 1,2,3: 2 + 6 + 12 */
    double y[] = {8.5, 20.5};
    expect_vals("y", t.y, y, 2, 0);
    double dx[] = {2, 13, 20, 30}, dw[] = {20, 31, 42}, db[] = {11};
    expect_vals("dx", t.grad[0], dx, 4, 0);
    expect_vals("dW", t.grad[1], dw, 3, 0);
    expect_vals("db", t.grad[2], db, 1, 0);
    /* magnitudes: (K + 1)(sum|x W| + |b|) with K = 3 taps */
    double mag[] = {4 * (8 + 0.5), 4 * (20 + 0.5)};
    expect_vals("mag", t.mag, mag, 2, 0);
    /* dx[1] has two terms 3*1 and 1*10: 2 * 13 */
    assert_true(t.gmag[0][1] == 26.0);
    assert_true(t.gmag[2][0] == 2 * 11.0);
}

/* Zero padding is read as the formula reads it: x_pad's zero times W. With W[0] = Inf, the tap
 * that lands on the padded cell -1 makes y[0] = 0 * Inf + ... = NaN, while y[1] (taps on real
 * cells 1..3) is Inf * 2 + ... = Inf. convTranspose's dx is the convolution of g padded with
 * zeros: a weight whose tap lands outside y reaches dx as W * 0 (NaN for Inf), and dW takes
 * x * 0 there. */
static void test_padding_is_read_as_zero_times_w(void **state)
{
    (void)state;
    tc t;
    conv_1d_stride2_pad1(&t);
    t.buf[1][0] = INFINITY;
    tc_fwd(&t);
    assert_true(isnan(t.y[0]));
    assert_true(isinf(t.y[1]) && t.y[1] > 0);
    /* finite weights: the padded tap adds an exact zero (y as before) */
    conv_1d_stride2_pad1(&t);
    tc_fwd(&t);
    assert_true(t.y[0] == 8.5);

    /* convTranspose x [1, 2], W [1, 1, 3] = {Inf, 1, 1}, stride 1, pad 1: y has 2 cells; input
     * cell 1's tap k = 2 lands on output 1 + 2 - 1 = 2, outside y. */
    tc_init(&t, "convTranspose", 1, 3);
    double x[] = {1, 2}, w[] = {1, 1, INFINITY}, b[] = {0};
    tc_in(&t, 0, shp(2, 1, 2), x);
    tc_in(&t, 1, shp(3, 1, 1, 3), w);
    tc_in(&t, 2, shp(1, 1), b);
    t.p.kernel[0] = 3;
    t.p.stride[0] = 1;
    t.p.pad[0] = 1;
    t.p.dil[0] = 1;
    double g[] = {1, 1};
    tc_vjp(&t, g);
    expect_shape(&t, shp(2, 1, 2));
    assert_true(isnan(t.grad[0][1])); /* dx[1] = W[0] g[0] + W[1] g[1] + Inf * 0 */
    /* dx[0]'s taps: k = 0 lands on -1 (0 * 1), k = 1 on 0, k = 2 on 1 (Inf * g[1]) */
    assert_true(isinf(t.grad[0][0]));
    /* dW[0] collects x[0] * 0 (output -1) and x[1] * g[0]: finite; dW[2] has x[1] * 0 */
    assert_true(t.grad[1][0] == 2.0 && t.grad[1][2] == 1.0);
}

static void test_conv_dilation(void **state)
{
    (void)state;
    tc t;
    tc_init(&t, "conv", 1, 3);
    double x[] = {1, 2, 3, 4, 5}, w[] = {1, 1}, b[] = {0};
    tc_in(&t, 0, shp(2, 1, 5), x);
    tc_in(&t, 1, shp(3, 1, 1, 2), w);
    tc_in(&t, 2, shp(1, 1), b);
    t.p.dil[0] = 2; /* extent 3: y[o] = x[o] + x[o + 2] */
    tc_fwd(&t);
    expect_shape(&t, shp(2, 1, 3));
    double y[] = {4, 6, 8};
    expect_vals("y", t.y, y, 3, 0);

    /* dilation 0 is accepted as extent 1: all three taps read the same cell */
    tc_init(&t, "conv", 1, 3);
    double x0[] = {1, 2, 3}, w0[] = {1, 1, 1};
    tc_in(&t, 0, shp(2, 1, 3), x0);
    tc_in(&t, 1, shp(3, 1, 1, 3), w0);
    tc_in(&t, 2, shp(1, 1), b);
    t.p.dil[0] = 0;
    tc_vjp(&t, NULL);
    expect_shape(&t, shp(2, 1, 3));
    double y0[] = {3, 6, 9}, dx0[] = {3, 3, 3}, dw0[] = {6, 6, 6};
    expect_vals("y", t.y, y0, 3, 0);
    expect_vals("dx", t.grad[0], dx0, 3, 0);
    expect_vals("dW", t.grad[1], dw0, 3, 0);
}

static void test_conv_groups(void **state)
{
    (void)state;
    tc t;
    tc_init(&t, "conv", 1, 3);
    double x[] = {1, 2, 3, 4}, w[] = {1, 2, 3, 4}, b[] = {0, 0, 0, 0.25};
    tc_in(&t, 0, shp(2, 2, 2), x);    /* channel 0: [1,2], channel 1: [3,4] */
    tc_in(&t, 1, shp(3, 4, 1, 1), w); /* oc 0,1 read channel 0; oc 2,3 read channel 1 */
    tc_in(&t, 2, shp(1, 4), b);
    t.p.groups = 2;
    tc_vjp(&t, NULL);
    expect_shape(&t, shp(2, 4, 2));
    double y[] = {1, 2, 2, 4, 9, 12, 12.25, 16.25};
    expect_vals("y", t.y, y, 8, 0);
    double dx[] = {3, 3, 7, 7}, dw[] = {3, 3, 7, 7}, db[] = {2, 2, 2, 2};
    expect_vals("dx", t.grad[0], dx, 4, 0);
    expect_vals("dW", t.grad[1], dw, 4, 0);
    expect_vals("db", t.grad[2], db, 4, 0);
}

static void test_conv_2d_3d_index_order(void **state)
{
    (void)state;
    tc t;
    /* 2-D: kernel offsets row-major, W[0,0,i,j] pairs with x[0,i,j] */
    tc_init(&t, "conv", 2, 3);
    double x2[] = {1, 2, 3, 4}, w2[] = {1, 10, 100, 1000}, b[] = {0};
    tc_in(&t, 0, shp(3, 1, 2, 2), x2);
    tc_in(&t, 1, shp(4, 1, 1, 2, 2), w2);
    tc_in(&t, 2, shp(1, 1), b);
    t.p.kernel[0] = t.p.kernel[1] = 2; /* kernel[] may mirror the weight */
    tc_fwd(&t);
    expect_shape(&t, shp(3, 1, 1, 1));
    assert_true(t.y[0] == 4321.0);

    /* 3-D with padding on the middle axis only: x [1, 1, 2, 3] = [[1,2,3],[4,5,6]],
     * W [1,1,1,1,2] = [1, 10], pad (0,1,0): out [1, 1, 4, 2], padded rows give 0. */
    tc_init(&t, "conv", 3, 3);
    double x3[] = {1, 2, 3, 4, 5, 6}, w3[] = {1, 10};
    tc_in(&t, 0, shp(4, 1, 1, 2, 3), x3);
    tc_in(&t, 1, shp(5, 1, 1, 1, 1, 2), w3);
    tc_in(&t, 2, shp(1, 1), b);
    t.p.pad[1] = 1;
    tc_vjp(&t, NULL);
    expect_shape(&t, shp(4, 1, 1, 4, 2));
    double y3[] = {0, 0, 21, 32, 54, 65, 0, 0};
    expect_vals("y", t.y, y3, 8, 0);
    /* dx: each cell is read by tap 0 at w' = w and tap 1 at w' = w - 1 (when 0 <= w' < 2) */
    double dx3[] = {1, 11, 10, 1, 11, 10}, dw3[] = {1 + 2 + 4 + 5, 2 + 3 + 5 + 6};
    expect_vals("dx", t.grad[0], dx3, 6, 0);
    expect_vals("dW", t.grad[1], dw3, 2, 0);
}

static void test_conv_empty(void **state)
{
    (void)state;
    tc t;
    /* no input channels: the output is the bias */
    tc_init(&t, "conv", 1, 3);
    double b[] = {1.5, -2};
    tc_in(&t, 0, shp(2, 0, 3), NULL);
    tc_in(&t, 1, shp(3, 2, 0, 2), NULL);
    tc_in(&t, 2, shp(1, 2), b);
    tc_vjp(&t, NULL);
    expect_shape(&t, shp(2, 2, 2));
    double y[] = {1.5, 1.5, -2, -2}, db[] = {2, 2};
    expect_vals("y", t.y, y, 4, 0);
    expect_vals("db", t.grad[2], db, 2, 0);
    assert_true(t.mag[0] == 1.5);

    /* an empty spatial axis with enough padding: windows of padding only give the bias */
    tc_init(&t, "conv", 1, 3);
    tc_in(&t, 0, shp(2, 1, 0), NULL);
    tc_in(&t, 1, shp(3, 1, 1, 2), NULL);
    tc_in(&t, 2, shp(1, 1), b);
    t.p.pad[0] = 1;
    tc_fwd(&t);
    expect_shape(&t, shp(2, 1, 1));
    assert_true(t.y[0] == 1.5);

    /* without padding the output is empty (in + 2p < E) */
    t.p.pad[0] = 0;
    tc_fwd(&t);
    expect_shape(&t, shp(2, 1, 0));
}

static void test_conv_shape_errors(void **state)
{
    (void)state;
    tc t;
    tc_init(&t, "conv", 2, 3);
    tc_in(&t, 0, shp(3, 2, 4, 4), NULL);
    tc_in(&t, 1, shp(4, 3, 2, 3, 3), NULL);
    tc_in(&t, 2, shp(1, 3), NULL);
    ref_err e = {{0}};
    assert_int_equal(tc_shape(&t, &e), REF_OK);
    expect_shape(&t, shp(3, 3, 2, 2));

    t.p.spatial = 4;
    expect_einval(&t, "spatial rank");
    t.p.spatial = 1;
    expect_einval(&t, "x must be [C, 1 spatial axes]");
    t.p.spatial = 2;
    t.n = 2;
    expect_einval(&t, "3 inputs");
    t.n = 3;
    t.in[1].shape = shp(3, 3, 2, 3);
    expect_einval(&t, "weight must be [outC, inC/groups, k...]");
    t.in[1].shape = shp(4, 3, 1, 3, 3);
    expect_einval(&t, "inC/groups = 2");
    t.in[1].shape = shp(4, 3, 2, 3, 3);
    t.in[2].shape = shp(1, 4);
    expect_einval(&t, "bias must be [outC] = [3]");
    t.in[2].shape = shp(1, 3);
    t.p.groups = 0;
    expect_einval(&t, "groups must be >= 1");
    t.p.groups = 2;
    expect_einval(&t, "not divisible by groups");
    t.p.groups = 1;
    t.p.kernel[1] = 2;
    expect_einval(&t, "kernel[1] = 2 disagrees");
    t.p.kernel[1] = 3;
    assert_int_equal(tc_shape(&t, &e), REF_OK);
    t.p.stride[0] = 0;
    expect_einval(&t, "stride[0]");
    t.p.stride[0] = 1;
    t.p.pad[1] = -1;
    expect_einval(&t, "pad[1]");
    t.p.pad[1] = 0;
    t.p.dil[0] = -1;
    expect_einval(&t, "dil[0]");
    t.p.dil[0] = 1;
    t.in[1].shape = shp(4, 3, 2, 0, 3);
    t.p.kernel[0] = 0;
    expect_einval(&t, "kernel extent 0 is 0");
    t.in[1].shape = shp(4, 3, 2, 3, 3);
    t.in[0].shape = shp(3, 2, -1, 4);
    expect_einval(&t, "invalid extent");
    t.in[0].shape = shp(3, 2, 4, 4);
    t.p.stride[0] = t.p.stride[1] = 1;
    t.p.pad[0] = t.p.pad[1] = 1 << 29;
    expect_einval(&t, "too large");

    /* groups: outC must divide */
    tc_init(&t, "conv", 1, 3);
    tc_in(&t, 0, shp(2, 2, 4), NULL);
    tc_in(&t, 1, shp(3, 3, 1, 1), NULL);
    tc_in(&t, 2, shp(1, 3), NULL);
    t.p.groups = 2;
    expect_einval(&t, "3 output channels, not divisible");
}

/* The adjoint identities that tie the two ops together: conv's dx is convTranspose of g with the
 * same weight tensor, and convTranspose's dx is conv of g (whenever the extents line up). */
static void test_conv_transpose_adjoint(void **state)
{
    (void)state;
    tc c, ct;
    /* conv: x [4, 7, 5], W [2, 2, 3, 2] (groups 2), stride (2, 1), pad (1, 0), dil (2, 1):
     * out = floor((7 + 2 - 5)/2) + 1 = 3, (5 - 2)/1 + 1 = 4; convTranspose of [2, 3, 4] back to
     * (3 - 1) 2 + 2*2 + 1 - 2 = 7 and 3 + 1 + 1 = 5. */
    tc_init(&c, "conv", 2, 3);
    double xv[140], wv[24], gv[24], zero[4] = {0};
    for (int i = 0; i < 140; i++)
        xv[i] = sin(1.0 + i);
    for (int i = 0; i < 24; i++) {
        wv[i] = cos(2.0 + 3 * i);
        gv[i] = sin(0.5 * i) + 0.25;
    }
    tc_in(&c, 0, shp(3, 4, 7, 5), xv);
    tc_in(&c, 1, shp(4, 2, 2, 3, 2), wv);
    tc_in(&c, 2, shp(1, 2), zero);
    c.p.groups = 2;
    c.p.stride[0] = 2;
    c.p.pad[0] = 1;
    c.p.dil[0] = 2;
    tc_vjp(&c, gv);
    expect_shape(&c, shp(3, 2, 3, 4));

    tc_init(&ct, "convTranspose", 2, 3);
    ct.p = c.p;
    tc_in(&ct, 0, shp(3, 2, 3, 4), gv);
    tc_in(&ct, 1, shp(4, 2, 2, 3, 2), wv); /* [inC = 2, outC/groups = 2, 3, 2] -> outC 4 */
    tc_in(&ct, 2, shp(1, 4), zero);
    tc_vjp(&ct, xv);
    expect_shape(&ct, shp(3, 4, 7, 5));
    expect_vals("conv dx vs convTranspose y", c.grad[0], ct.y, 140, 1e-13);
    expect_vals("convTranspose dx vs conv y", ct.grad[0], c.y, 24, 1e-13);
    /* the weight gradients are the same contraction of x and g */
    expect_vals("dW", c.grad[1], ct.grad[1], 24, 1e-13);
}

/* ---- convTranspose ------------------------------------------------------------------------- */

static void test_conv_t_1d(void **state)
{
    (void)state;
    tc t;
    tc_init(&t, "convTranspose", 1, 3);
    double x[] = {1, 2}, w[] = {1, 2, 3}, b[] = {0.5};
    tc_in(&t, 0, shp(2, 1, 2), x);
    tc_in(&t, 1, shp(3, 1, 1, 3), w);
    tc_in(&t, 2, shp(1, 1), b);
    t.p.stride[0] = 2;
    double g[] = {1, 2, 3, 4, 5};
    tc_vjp(&t, g);
    expect_shape(&t, shp(2, 1, 5)); /* (2 - 1) 2 + 3 */
    double y[] = {1.5, 2.5, 5.5, 4.5, 6.5};
    expect_vals("y", t.y, y, 5, 0);
    double dx[] = {14, 26}, dw[] = {7, 10, 13}, db[] = {15};
    expect_vals("dx", t.grad[0], dx, 2, 0);
    expect_vals("dW", t.grad[1], dw, 3, 0);
    expect_vals("db", t.grad[2], db, 1, 0);
    /* y[2] has two terms (x0 W2 = 3, x1 W0 = 2) plus the bias: 3 (5 + 0.5) */
    assert_true(t.mag[2] == 16.5);
    assert_true(t.mag[0] == 2 * 1.5);

    /* padding 1 crops one cell at each end */
    t.p.pad[0] = 1;
    tc_fwd(&t);
    expect_shape(&t, shp(2, 1, 3));
    double yp[] = {2.5, 5.5, 4.5};
    expect_vals("y pad", t.y, yp, 3, 0);

    /* dilation 2, stride 1: o = i + 2k */
    tc_init(&t, "convTranspose", 1, 3);
    double w2[] = {1, 10}, b0[] = {0};
    tc_in(&t, 0, shp(2, 1, 2), x);
    tc_in(&t, 1, shp(3, 1, 1, 2), w2);
    tc_in(&t, 2, shp(1, 1), b0);
    t.p.dil[0] = 2;
    tc_fwd(&t);
    expect_shape(&t, shp(2, 1, 4));
    double yd[] = {1, 2, 10, 20};
    expect_vals("y dil", t.y, yd, 4, 0);

    /* dilation 0: every tap lands on o = i s - p; extent (in - 1) s + 1 */
    t.p.dil[0] = 0;
    t.p.stride[0] = 2;
    tc_fwd(&t);
    expect_shape(&t, shp(2, 1, 3));
    double y0[] = {11, 0, 22};
    expect_vals("y dil0", t.y, y0, 3, 0);
}

static void test_conv_t_groups_and_3d(void **state)
{
    (void)state;
    tc t;
    tc_init(&t, "convTranspose", 1, 3);
    double x[] = {1, 2}, w[] = {1, 2, 3, 4}, b[] = {0, 0, 0, 0};
    tc_in(&t, 0, shp(2, 2, 1), x);    /* channels 0 and 1, one cell each */
    tc_in(&t, 1, shp(3, 2, 2, 1), w); /* [inC 2, outC/groups 2, k 1]: outC = 4 */
    tc_in(&t, 2, shp(1, 4), b);
    t.p.groups = 2;
    tc_vjp(&t, NULL);
    expect_shape(&t, shp(2, 4, 1));
    double y[] = {1, 2, 6, 8}, dx[] = {3, 7}, dw[] = {1, 1, 2, 2};
    expect_vals("y", t.y, y, 4, 0);
    expect_vals("dx", t.grad[0], dx, 2, 0);
    expect_vals("dW", t.grad[1], dw, 4, 0);

    /* 3-D: one input cell spreads the kernel */
    tc_init(&t, "convTranspose", 3, 3);
    double x3[] = {2}, w3[] = {1, 2, 3, 4}, b3[] = {0};
    tc_in(&t, 0, shp(4, 1, 1, 1, 1), x3);
    tc_in(&t, 1, shp(5, 1, 1, 1, 2, 2), w3);
    tc_in(&t, 2, shp(1, 1), b3);
    tc_fwd(&t);
    expect_shape(&t, shp(4, 1, 1, 2, 2));
    double y3[] = {2, 4, 6, 8};
    expect_vals("y", t.y, y3, 4, 0);
}

static void test_conv_t_empty_and_errors(void **state)
{
    (void)state;
    tc t;
    tc_init(&t, "convTranspose", 1, 3);
    tc_in(&t, 0, shp(2, 1, 1), NULL);
    tc_in(&t, 1, shp(3, 1, 1, 1), NULL);
    tc_in(&t, 2, shp(1, 1), NULL);
    t.p.pad[0] = 1; /* (1 - 1) 1 + 1 - 2 saturates at 0 */
    tc_vjp(&t, NULL);
    expect_shape(&t, shp(2, 1, 0));
    assert_true(t.grad[0][0] == 0.0 && t.grad[2][0] == 0.0);
    t.p.pad[0] = 0;
    t.p.stride[0] = 0; /* stride 0: empty output */
    tc_fwd(&t);
    expect_shape(&t, shp(2, 1, 0));
    t.p.stride[0] = 1;
    t.in[1].shape = shp(3, 1, 1, 0); /* kernel 0: empty output */
    tc_fwd(&t);
    expect_shape(&t, shp(2, 1, 0));
    t.in[0].shape = shp(2, 1, 0); /* empty input */
    t.in[1].shape = shp(3, 1, 1, 1);
    tc_fwd(&t);
    expect_shape(&t, shp(2, 1, 0));

    t.in[0].shape = shp(2, 2, 3);
    t.in[1].shape = shp(3, 3, 1, 2);
    t.in[2].shape = shp(1, 1);
    expect_einval(&t, "must have inC = 2 leading channels");
    t.in[1].shape = shp(3, 2, 2, 2);
    t.in[2].shape = shp(1, 2);
    t.p.groups = 2;
    expect_einval(&t, "bias must be [outC] = [4]");
    t.p.groups = 3;
    expect_einval(&t, "x has 2 channels, not divisible by groups = 3");
    t.p.groups = 1;
    t.p.stride[0] = -1;
    expect_einval(&t, "stride[0] = -1 is out of range (>= 0)");
    t.p.stride[0] = 1;
    t.in[1].shape = shp(2, 2, 2);
    expect_einval(&t, "[inC, outC/groups, k...]");
}

/* ---- maxPool ------------------------------------------------------------------------------- */

static void pool_init(tc *t, const char *name, int spatial, ref_shape xs, const double *x)
{
    tc_init(t, name, spatial, 1);
    tc_in(t, 0, xs, x);
}

static void test_max_pool_ties_first_winner(void **state)
{
    (void)state;
    tc t;
    double x[] = {3, 3, 1, 3};
    pool_init(&t, "maxPool", 1, shp(2, 1, 4), x);
    t.p.kernel[0] = 2;
    double g[] = {1, 2, 4};
    tc_vjp(&t, g);
    expect_shape(&t, shp(2, 1, 3));
    double y[] = {3, 3, 3}, dx[] = {1, 2, 0, 4};
    expect_vals("y", t.y, y, 3, 0);
    expect_vals("dx", t.grad[0], dx, 4, 0); /* window 0 keeps cell 0, not cell 1 */
    assert_true(t.mag[0] == 3.0);

    /* 2-D: row-major order, so (0,1) wins over (1,0) */
    double x2[] = {1, 4, 4, 2};
    pool_init(&t, "maxPool", 2, shp(3, 1, 2, 2), x2);
    t.p.kernel[0] = t.p.kernel[1] = 2;
    double g2[] = {5};
    tc_vjp(&t, g2);
    expect_shape(&t, shp(3, 1, 1, 1));
    double dx2[] = {0, 5, 0, 0};
    assert_true(t.y[0] == 4.0);
    expect_vals("dx", t.grad[0], dx2, 4, 0);

    /* overlapping windows accumulate on a shared winner; magnitude routes * sum|g| */
    double x3[] = {1, 5, 2};
    pool_init(&t, "maxPool", 1, shp(2, 1, 3), x3);
    t.p.kernel[0] = 2;
    double g3[] = {2, -3};
    tc_vjp(&t, g3);
    double dx3[] = {0, -1, 0};
    expect_vals("dx", t.grad[0], dx3, 3, 0);
    assert_true(t.gmag[0][1] == 2 * 5.0);
    assert_true(t.gmag[0][0] == 0.0);
}

static void test_max_pool_padding_ignored(void **state)
{
    (void)state;
    tc t;
    double x[] = {-5, -7};
    pool_init(&t, "maxPool", 1, shp(2, 1, 2), x);
    t.p.kernel[0] = 3;
    t.p.pad[0] = 1;
    double g[] = {1, 1};
    tc_vjp(&t, g);
    expect_shape(&t, shp(2, 1, 2));
    double y[] = {-5, -5}, dx[] = {2, 0}; /* a padded 0 never wins */
    expect_vals("y", t.y, y, 2, 0);
    expect_vals("dx", t.grad[0], dx, 2, 0);

    /* NaN: strict > never lets a later NaN win; a NaN in the first real cell stays */
    double xn[] = {1, NAN, 2, NAN, 1};
    pool_init(&t, "maxPool", 1, shp(2, 1, 5), xn);
    t.p.kernel[0] = 3;
    t.p.stride[0] = 2;
    tc_fwd(&t);
    assert_true(t.y[0] == 2.0);
    assert_true(t.y[1] == 2.0);
    double xn2[] = {NAN, 1};
    pool_init(&t, "maxPool", 1, shp(2, 1, 2), xn2);
    t.p.kernel[0] = 2;
    tc_fwd(&t);
    assert_true(isnan(t.y[0]));

    /* all -inf: the first real cell is the winner */
    double xi[] = {-INFINITY, -INFINITY};
    pool_init(&t, "maxPool", 1, shp(2, 1, 2), xi);
    t.p.kernel[0] = 2;
    tc_vjp(&t, NULL);
    assert_true(t.y[0] == -INFINITY);
    assert_true(t.grad[0][0] == 1.0 && t.grad[0][1] == 0.0);
}

static void test_max_pool_3d_channels(void **state)
{
    (void)state;
    tc t;
    double x[16];
    for (int i = 0; i < 16; i++)
        x[i] = (double)((i * 5) % 16); /* distinct values, max of channel 0 at cell 3 (15) */
    pool_init(&t, "maxPool", 3, shp(4, 2, 2, 2, 2), x);
    t.p.kernel[0] = t.p.kernel[1] = t.p.kernel[2] = 2;
    double g[] = {1, 2};
    tc_vjp(&t, g);
    expect_shape(&t, shp(4, 2, 1, 1, 1));
    /* channel 0: 0,5,10,15,4,9,14,3 -> 15 at cell 3; channel 1: 8,13,2,7,12,1,6,11 -> 13 at 1 */
    double y[] = {15, 13};
    expect_vals("y", t.y, y, 2, 0);
    for (int i = 0; i < 16; i++)
        assert_true(t.grad[0][i] == (i == 3 ? 1.0 : i == 9 ? 2.0 : 0.0));

    /* 3-D with stride and padding on one axis */
    double x2[] = {1, 2, 3, 4, 5, 6};
    pool_init(&t, "maxPool", 3, shp(4, 1, 1, 2, 3), x2);
    t.p.kernel[0] = 1;
    t.p.kernel[1] = 2;
    t.p.kernel[2] = 2;
    t.p.pad[2] = 1;
    t.p.stride[2] = 2;
    tc_fwd(&t);
    expect_shape(&t, shp(4, 1, 1, 1, 2)); /* (3 + 2 - 2)/2 + 1 = 2 */
    double y2[] = {4, 6};
    expect_vals("y", t.y, y2, 2, 0);
}

static void test_pool_empty_rules(void **state)
{
    (void)state;
    const char *ops[] = {"maxPool", "smoothMaxPool", "avgPool"};
    for (int o = 0; o < 3; o++) {
        tc t;
        pool_init(&t, ops[o], 1, shp(2, 2, 4), NULL);
        t.p.kernel[0] = 2;
        t.p.pad[0] = 1;
        tc_fwd(&t);
        expect_shape(&t, shp(2, 2, 5)); /* p = floor(k/2) is allowed: (4 + 2 - 2) + 1 */
        t.p.pad[0] = 2;                 /* p > floor(k/2): empty, not an error */
        tc_vjp(&t, NULL);
        expect_shape(&t, shp(2, 2, 0));
        for (int i = 0; i < 8; i++)
            assert_true(t.grad[0][i] == 0.0);
        t.p.kernel[0] = 3;
        t.p.pad[0] = 1;
        tc_fwd(&t);
        expect_shape(&t, shp(2, 2, 4));
        t.p.pad[0] = 2;
        tc_fwd(&t);
        expect_shape(&t, shp(2, 2, 0));
        t.p.pad[0] = 0;
        t.p.kernel[0] = 0; /* k = 0 */
        tc_fwd(&t);
        expect_shape(&t, shp(2, 2, 0));
        t.p.kernel[0] = 5; /* in + 2p < k */
        tc_fwd(&t);
        expect_shape(&t, shp(2, 2, 0));
        pool_init(&t, ops[o], 2, shp(3, 1, 0, 3), NULL); /* in = 0 */
        t.p.kernel[0] = t.p.kernel[1] = 1;
        tc_fwd(&t);
        expect_shape(&t, shp(3, 1, 0, 3));
        pool_init(&t, ops[o], 1, shp(2, 0, 3), NULL); /* no channels */
        t.p.kernel[0] = 2;
        tc_vjp(&t, NULL);
        expect_shape(&t, shp(2, 0, 2));
    }
}

static void test_pool_shape_errors(void **state)
{
    (void)state;
    const char *ops[] = {"maxPool", "smoothMaxPool", "avgPool"};
    for (int o = 0; o < 3; o++) {
        tc t;
        pool_init(&t, ops[o], 2, shp(3, 1, 4, 4), NULL);
        t.p.kernel[0] = t.p.kernel[1] = 2;
        ref_err e = {{0}};
        assert_int_equal(tc_shape(&t, &e), REF_OK);
        t.p.spatial = 0;
        expect_einval(&t, "spatial rank must be 1, 2 or 3");
        t.p.spatial = 3;
        expect_einval(&t, "x must be [C, 3 spatial axes] (rank 4");
        t.p.spatial = 2;
        t.n = 2;
        expect_einval(&t, "takes 1 input");
        t.n = 1;
        t.p.kernel[1] = -1;
        expect_einval(&t, "kernel[1] = -1");
        t.p.kernel[1] = 2;
        t.p.stride[0] = 0;
        expect_einval(&t, "stride[0] = 0");
        t.p.stride[0] = 1;
        t.p.pad[1] = -2;
        expect_einval(&t, "pad[1] = -2");
        t.p.pad[1] = 0;
        t.p.dil[0] = 2;
        expect_einval(&t, "pools have dilation 1");
        t.p.dil[0] = 1;
        t.in[0].shape = shp(3, 1, -4, 4);
        expect_einval(&t, "invalid extent");
    }
    tc t;
    pool_init(&t, "smoothMaxPool", 1, shp(2, 1, 4), NULL);
    t.p.kernel[0] = 2;
    t.p.beta = 0.0;
    expect_einval(&t, "beta must be finite and nonzero");
    t.p.beta = INFINITY;
    expect_einval(&t, "beta must be finite and nonzero");
}

/* ---- smoothMaxPool ------------------------------------------------------------------------- */

static void test_smooth_max_pool_values(void **state)
{
    (void)state;
    tc t;
    double x[] = {0, log(3.0)};
    pool_init(&t, "smoothMaxPool", 1, shp(2, 1, 2), x);
    t.p.kernel[0] = 2;
    t.p.beta = 1.0;
    tc_vjp(&t, NULL);
    assert_true(fabs(t.y[0] - log(4.0)) <= 1e-15);
    double dx[] = {0.25, 0.75};
    expect_vals("dx", t.grad[0], dx, 2, 1e-15);

    /* negative beta: pivot = min, a soft minimum */
    double xn[] = {1, 2};
    pool_init(&t, "smoothMaxPool", 1, shp(2, 1, 2), xn);
    t.p.kernel[0] = 2;
    t.p.beta = -1.0;
    tc_vjp(&t, NULL);
    double e1 = exp(-1.0);
    assert_true(fabs(t.y[0] - (1.0 - log(1.0 + e1))) <= 1e-15);
    double dxn[] = {1.0 / (1.0 + e1), e1 / (1.0 + e1)};
    expect_vals("dx", t.grad[0], dxn, 2, 1e-15);
    /* beta = -2 over [1, 2]: y = 1 - log(1 + e^-2)/2 */
    t.p.beta = -2.0;
    tc_fwd(&t);
    assert_true(fabs(t.y[0] - (1.0 - 0.5 * log(1.0 + exp(-2.0)))) <= 1e-15);
}

static void test_smooth_max_pool_zero_padding(void **state)
{
    (void)state;
    tc t;
    /* window (pad 0, -5, pad 0): the padded zeros are the pivot and count in the sum */
    double x[] = {-5};
    pool_init(&t, "smoothMaxPool", 1, shp(2, 1, 1), x);
    t.p.kernel[0] = 3;
    t.p.pad[0] = 1;
    t.p.beta = 1.0;
    tc_vjp(&t, NULL);
    expect_shape(&t, shp(2, 1, 1));
    double e5 = exp(-5.0);
    assert_true(fabs(t.y[0] - log(2.0 + e5)) <= 1e-15);
    assert_true(fabs(t.grad[0][0] - e5 / (2.0 + e5)) <= 1e-16); /* padded cells take nothing */

    /* the same with maxPool and avgPool: padded cells ignored vs zero */
    double x2[] = {-5, -7};
    pool_init(&t, "smoothMaxPool", 1, shp(2, 1, 2), x2);
    t.p.kernel[0] = 3;
    t.p.pad[0] = 1;
    t.p.beta = 1.0;
    tc_fwd(&t);
    double s = log(1.0 + exp(-5.0) + exp(-7.0));
    double ys[] = {s, s};
    expect_vals("y", t.y, ys, 2, 1e-15);
    /* beta < 0: the pivot is the window min, here the real cell -7 */
    t.p.beta = -1.0;
    tc_fwd(&t);
    double yn = -7.0 - log(exp(-7.0) + exp(-2.0) + 1.0); /* cells (0, -5, -7) */
    assert_true(fabs(t.y[0] - yn) <= 1e-14);
}

static void test_smooth_max_pool_overflow_scale(void **state)
{
    (void)state;
    tc t;
    double x[] = {1e300, 1e300, -1e300};
    pool_init(&t, "smoothMaxPool", 1, shp(2, 1, 3), x);
    t.p.kernel[0] = 2;
    t.p.beta = 1.0;
    tc_vjp(&t, NULL);
    assert_true(isfinite(t.y[0]) && isfinite(t.y[1]));
    assert_true(t.y[0] == 1e300 + log(2.0) && t.y[1] == 1e300);
    assert_true(t.grad[0][0] == 0.5 && t.grad[0][1] == 1.5 && t.grad[0][2] == 0.0);
    assert_true(isfinite(t.mag[0]) && isfinite(t.gmag[0][1]));

    /* beta = -1 at -1e300 with zero padding: the pivot is the min, the padded 0 adds exp(-inf) */
    double xm[] = {-1e300};
    pool_init(&t, "smoothMaxPool", 1, shp(2, 1, 1), xm);
    t.p.kernel[0] = 3;
    t.p.pad[0] = 1;
    t.p.beta = -1.0;
    tc_vjp(&t, NULL);
    assert_true(t.y[0] == -1e300);
    assert_true(t.grad[0][0] == 1.0);

    /* huge beta: still no overflow */
    double xb[] = {1, 2};
    pool_init(&t, "smoothMaxPool", 1, shp(2, 1, 2), xb);
    t.p.kernel[0] = 2;
    t.p.beta = 1e308;
    tc_fwd(&t);
    assert_true(t.y[0] == 2.0);
}

static void test_smooth_max_pool_error_model(void **state)
{
    (void)state;
    tc t;
    double x[] = {0, log(3.0)};
    pool_init(&t, "smoothMaxPool", 1, shp(2, 1, 2), x);
    t.p.kernel[0] = 2;
    t.p.beta = 2.0;
    tc_fwd(&t);
    /* m = (K + 1 + 4|L|)/|beta| + 3 sum w |d| + |y| with K = 2, pivot log 3 */
    double d = log(3.0), S = exp(-2.0 * d) + 1.0, L = log(S), w0 = exp(-2.0 * d) / S;
    double m = (3.0 + 4.0 * L) / 2.0 + 3.0 * w0 * d + fabs(d + L / 2.0);
    assert_true(fabs(t.mag[0] - m) <= 1e-14 * m);
}

/* ---- avgPool ------------------------------------------------------------------------------- */

static void test_avg_pool_count_include_pad(void **state)
{
    (void)state;
    tc t;
    double x[] = {3, 6};
    pool_init(&t, "avgPool", 1, shp(2, 1, 2), x);
    t.p.kernel[0] = 3;
    t.p.pad[0] = 1;
    double g[] = {1, 2};
    tc_vjp(&t, g);
    expect_shape(&t, shp(2, 1, 2));
    double y[] = {3, 3}, dx[] = {1, 1};
    expect_vals("y", t.y, y, 2, 1e-15); /* (0 + 3 + 6)/3 and (3 + 6 + 0)/3 */
    expect_vals("dx", t.grad[0], dx, 2, 1e-15);
    /* m = sum|x| + 2|y|; dx magnitude (n + 1) sum|g|/K */
    assert_true(t.mag[0] == 9.0 + 6.0);
    assert_true(fabs(t.gmag[0][0] - 3.0 * 3.0 / 3.0) <= 1e-15);

    double x2[] = {1, 2, 3, 4, 5, 6, 7, 8};
    pool_init(&t, "avgPool", 2, shp(3, 1, 2, 4), x2);
    t.p.kernel[0] = t.p.kernel[1] = 2;
    t.p.stride[0] = t.p.stride[1] = 2;
    tc_fwd(&t);
    expect_shape(&t, shp(3, 1, 1, 2));
    double y2[] = {(1 + 2 + 5 + 6) / 4.0, (3 + 4 + 7 + 8) / 4.0};
    expect_vals("y", t.y, y2, 2, 0);

    pool_init(&t, "avgPool", 3, shp(4, 1, 2, 2, 2), x2);
    t.p.kernel[0] = t.p.kernel[1] = t.p.kernel[2] = 2;
    tc_vjp(&t, NULL);
    assert_true(t.y[0] == 4.5);
    for (int i = 0; i < 8; i++)
        assert_true(t.grad[0][i] == 0.125);
}

/* ---- samplers ------------------------------------------------------------------------------ */

static void test_samplers(void **state)
{
    (void)state;
    const char *ops[] = {"conv", "convTranspose", "maxPool", "smoothMaxPool", "avgPool"};
    for (int o = 0; o < 5; o++) {
        const ref_op *op = ref_t_op(ops[o]);
        int saw_rank[5] = {0}, saw_nonempty = 0;
        for (int q = 0; q < 300; q++) {
            ref_sample_req req = {q % 6 - 1, q % 3 == 0, q % 5 == 0 ? 8 : 64};
            ref_params p = ref_t_params(op);
            ref_rng r = {0x9000ULL + (uint64_t)q};
            int n = 0;
            ref_shape in[3], out;
            assert_int_equal(op->sample(&r, &req, &p, &n, in), REF_OK);
            ref_err e = {{0}};
            if (op->shape(&p, n, in, &out, &e) != REF_OK)
                fail_msg("%s sampler drew an invalid case: %s", ops[o], e.msg);
            assert_true(ref_numel(&in[0]) <= req.max_elems);
            assert_true(in[0].rank >= 2 && in[0].rank <= 4);
            saw_rank[in[0].rank] = 1;
            int has_zero = 0;
            for (int i = 0; i < n; i++)
                has_zero |= ref_numel(&in[i]) == 0;
            if (req.zero_dim)
                assert_true(has_zero);
            else
                assert_true(ref_numel(&out) > 0);
            saw_nonempty |= !req.zero_dim;
            if (o == 3)
                assert_true(fabs(p.beta) >= 0.5 && fabs(p.beta) <= 3.0);
        }
        assert_true(saw_rank[2] && saw_rank[3] && saw_rank[4] && saw_nonempty);
    }
}


/* ---- direct calls: unrequested gradients, no magnitudes, invalid parameters --------------- */

static void test_direct_calls(void **state)
{
    (void)state;
    tc t;
    conv_1d_stride2_pad1(&t);
    tc_fwd(&t);
    ref_tensor y = {t.out, t.y}, out = {t.out, t.y};
    double g[] = {1, 10};
    ref_tensor gt = {t.out, g};
    /* only dW, and no magnitudes */
    ref_tensor grad[3] = {{t.in[0].shape, NULL}, {t.in[1].shape, t.grad[1]}, {t.in[2].shape, NULL}};
    assert_int_equal(ref_t_vjp(t.op, &t.p, 3, t.in, &y, &gt, grad, NULL), REF_OK);
    double dw[] = {20, 31, 42};
    expect_vals("dW", t.grad[1], dw, 3, 0);
    /* magnitudes requested for dW only */
    double *gm[3] = {NULL, t.gmag[1], NULL};
    assert_int_equal(ref_t_vjp(t.op, &t.p, 3, t.in, &y, &gt, grad, gm), REF_OK);
    assert_true(t.gmag[1][1] == 2 * 31.0);
    /* invalid parameters reach forward/vjp as REF_EINVAL, not a crash */
    t.p.stride[0] = 0;
    assert_int_equal(ref_t_forward(t.op, &t.p, 3, t.in, &out, NULL), REF_EINVAL);
    assert_int_equal(ref_t_vjp(t.op, &t.p, 3, t.in, &y, &gt, grad, NULL), REF_EINVAL);

    const char *ops[] = {"maxPool", "smoothMaxPool", "avgPool"};
    for (int o = 0; o < 3; o++) {
        double xp[] = {1, 3, 2};
        pool_init(&t, ops[o], 1, shp(2, 1, 3), xp);
        t.p.kernel[0] = 2;
        tc_fwd(&t);
        ref_tensor py = {t.out, t.y}, pout = {t.out, t.y}, pg = {t.out, g};
        ref_tensor none[1] = {{t.in[0].shape, NULL}};
        assert_int_equal(ref_t_vjp(t.op, &t.p, 1, t.in, &py, &pg, none, NULL), REF_OK);
        ref_tensor one[1] = {{t.in[0].shape, t.grad[0]}};
        assert_int_equal(ref_t_vjp(t.op, &t.p, 1, t.in, &py, &pg, one, NULL), REF_OK);
        assert_int_equal(ref_t_forward(t.op, &t.p, 1, t.in, &pout, NULL), REF_OK);
        t.p.dil[0] = 3;
        assert_int_equal(ref_t_forward(t.op, &t.p, 1, t.in, &pout, NULL), REF_EINVAL);
        assert_int_equal(ref_t_vjp(t.op, &t.p, 1, t.in, &py, &pg, one, NULL), REF_EINVAL);
    }

    /* samplers clamp an out-of-range rank preference to 2..4 */
    const char *all[] = {"conv", "convTranspose", "maxPool"};
    for (int o = 0; o < 3; o++) {
        const ref_op *op = ref_op_find(all[o]);
        ref_params p;
        memset(&p, 0, sizeof p);
        ref_rng r = {7};
        ref_sample_req req = {6, 0, 64};
        int n = 0;
        ref_shape in[3];
        assert_int_equal(op->sample(&r, &req, &p, &n, in), REF_OK);
        assert_int_equal(in[0].rank, 4);
        req.max_elems = 1; /* tiny budgets still give a valid case */
        assert_int_equal(op->sample(&r, &req, &p, &n, in), REF_OK);
        ref_shape out;
        ref_err e = {{0}};
        assert_int_equal(op->shape(&p, n, in, &out, &e), REF_OK);
    }
}

/* ---- the error models have teeth: float32 evaluations pass, planted bugs fail ------------- */

#define U32 (1.0 / 16777216.0)

/* A sampled case with float32-representable inputs. */
typedef struct {
    const ref_op *op;
    ref_params p;
    int n;
    ref_shape s[3], out;
    double v[3][CAP];
} f32_case;

static int f32_case_make(const char *name, uint64_t seed, f32_case *c)
{
    memset(c, 0, sizeof *c);
    c->op = ref_t_op(name);
    c->p = ref_t_params(c->op);
    ref_rng r = {seed};
    ref_sample_req req = {-1, 0, 64};
    assert_int_equal(c->op->sample(&r, &req, &c->p, &c->n, c->s), REF_OK);
    ref_err e = {{0}};
    assert_int_equal(c->op->shape(&c->p, c->n, c->s, &c->out, &e), REF_OK);
    for (int i = 0; i < c->n; i++) {
        if (ref_numel(&c->s[i]) > CAP)
            return 0;
        ref_domain d = {REF_DOM_NORMAL, 0, 0, 0, {0, 0}, 0};
        cc_draw_values(&d, cc_input_key(seed, i), ref_numel(&c->s[i]), c->v[i]);
        for (int64_t j = 0; j < ref_numel(&c->s[i]); j++)
            c->v[i][j] = (double)(float)c->v[i][j];
    }
    c->p.beta = (double)(float)c->p.beta;
    return ref_numel(&c->out) <= CAP;
}

/* Cell of window/output o at tap j for a pool-like or conv geometry (test-local, generic). */
static int64_t f32_cell(int sr, const int64_t *in, const int64_t *k, const int64_t *out,
                        const int64_t *s, const int64_t *p, const int64_t *d, int64_t o,
                        int64_t j)
{
    int64_t oi[3], ji[3], flat = 0;
    for (int a = sr - 1; a >= 0; a--) {
        oi[a] = o % out[a], o /= out[a];
        ji[a] = j % k[a], j /= k[a];
    }
    for (int a = 0; a < sr; a++) {
        int64_t i = oi[a] * s[a] + ji[a] * (d ? d[a] : 1) - p[a];
        if (i < 0 || i >= in[a])
            return -1;
        flat = flat * in[a] + i;
    }
    return flat;
}

/* float32 conv forward; order 0 forward, 1 reversed, 2 fmaf; bug 1 drops the last tap, bug 2
 * adds the bias twice rounded in float16-like precision (a 2^-11 relative slip). */
static void f32_conv(const f32_case *c, int order, int bug, double *y)
{
    int sr = c->p.spatial;
    int64_t in[3], k[3], out[3], nin = 1, nk = 1, nout = 1;
    for (int a = 0; a < sr; a++) {
        in[a] = c->s[0].dim[a + 1], k[a] = c->s[1].dim[a + 2], out[a] = c->out.dim[a + 1];
        nin *= in[a], nk *= k[a], nout *= out[a];
    }
    int64_t cout = c->s[1].dim[0], cin_g = c->s[1].dim[1], cout_g = cout / c->p.groups;
    for (int64_t oc = 0; oc < cout; oc++)
        for (int64_t o = 0; o < nout; o++) {
            float acc = 0.0f;
            int64_t T = cin_g * nk - (bug == 1 ? 1 : 0);
            for (int64_t t0 = 0; t0 < T; t0++) {
                int64_t t = order == 1 ? T - 1 - t0 : t0;
                int64_t icl = t / nk, kk = t % nk, ic = (oc / cout_g) * cin_g + icl;
                int64_t cell = f32_cell(sr, in, k, out, c->p.stride, c->p.pad, c->p.dil, o, kk);
                if (cell < 0)
                    continue;
                float xv = (float)c->v[0][ic * nin + cell];
                float wv = (float)c->v[1][(oc * cin_g + icl) * nk + kk];
                acc = order == 2 ? fmaf(xv, wv, acc) : acc + xv * wv;
            }
            float b = (float)c->v[2][oc];
            if (bug == 2)
                b = b * (1.0f + 1.0f / 2048.0f);
            y[oc * nout + o] = (double)(acc + b);
        }
}

/* float32 pools: kind 0 avgPool, 1 smoothMaxPool; bug 1: avgPool divides by the real-cell count
 * (count_include_pad false) / smoothMaxPool ignores padded cells. */
static void f32_pool(const f32_case *c, int kind, int order, int bug, double *y)
{
    int sr = c->p.spatial;
    int64_t in[3], out[3], nin = 1, nk = 1, nout = 1;
    for (int a = 0; a < sr; a++) {
        in[a] = c->s[0].dim[a + 1], out[a] = c->out.dim[a + 1];
        nin *= in[a], nk *= c->p.kernel[a], nout *= out[a];
    }
    float beta = (float)c->p.beta;
    for (int64_t ch = 0; ch < c->s[0].dim[0]; ch++)
        for (int64_t o = 0; o < nout; o++) {
            float v[64];
            int real[64], nreal = 0;
            for (int64_t j = 0; j < nk; j++) {
                int64_t cell = f32_cell(sr, in, c->p.kernel, out, c->p.stride, c->p.pad, NULL,
                                        o, j);
                real[j] = cell >= 0;
                nreal += real[j];
                v[j] = cell >= 0 ? (float)c->v[0][ch * nin + cell] : 0.0f;
            }
            if (kind == 0) {
                float acc = 0.0f;
                for (int64_t j0 = 0; j0 < nk; j0++)
                    acc += v[order == 1 ? nk - 1 - j0 : j0];
                y[ch * nout + o] = (double)(acc * (1.0f / (float)(bug ? nreal : nk)));
            } else {
                float piv = beta > 0 ? -INFINITY : INFINITY; /* CUDA's fmax/fmin from -+inf */
                for (int64_t j = 0; j < nk; j++)
                    if (!bug || real[j])
                        piv = beta > 0 ? fmaxf(piv, v[j]) : fminf(piv, v[j]);
                float S = 0.0f;
                for (int64_t j0 = 0; j0 < nk; j0++) {
                    int64_t j = order == 1 ? nk - 1 - j0 : j0;
                    if (!bug || real[j])
                        S += expf(beta * (v[j] - piv));
                }
                y[ch * nout + o] = (double)(piv + logf(S) / beta);
            }
        }
}

/* Worst |got - ref| / (c u m) over many sampled cases of `name`. */
static double worst_ratio(const char *name, int order, int bug)
{
    double worst = 0.0;
    for (uint64_t seed = 1; seed <= 150; seed++) {
        f32_case c;
        if (!f32_case_make(name, seed * 7777, &c))
            continue;
        ref_tensor in[3];
        for (int i = 0; i < c.n; i++)
            in[i] = (ref_tensor){c.s[i], c.v[i]};
        double y[CAP], mag[CAP], got[CAP];
        ref_tensor out = {c.out, y};
        assert_int_equal(ref_t_forward(c.op, &c.p, c.n, in, &out, mag), REF_OK);
        if (c.op->name[0] == 'c')
            f32_conv(&c, order, bug, got);
        else
            f32_pool(&c, c.op->name[0] == 'a' ? 0 : 1, order, bug, got);
        for (int64_t i = 0; i < ref_numel(&c.out); i++) {
            double r = fabs(got[i] - y[i]) / (c.op->c_fwd * U32 * mag[i] + 1e-300);
            if (r > worst)
                worst = r;
        }
    }
    return worst;
}

static void test_float32_within_error_model(void **state)
{
    (void)state;
    const char *ops[] = {"conv", "avgPool", "smoothMaxPool"};
    for (int o = 0; o < 3; o++)
        for (int order = 0; order < 3; order++) {
            if (order == 2 && o != 0)
                continue;
            double r = worst_ratio(ops[o], order, 0);
            if (!(r <= 1.0))
                fail_msg("%s: a correct float32 evaluation (order %d) reaches bound ratio %g",
                         ops[o], order, r);
        }
    /* planted bugs must exceed the bound somewhere */
    assert_true(worst_ratio("conv", 0, 1) > 1.0);
    assert_true(worst_ratio("conv", 0, 2) > 1.0);
    assert_true(worst_ratio("avgPool", 0, 1) > 1.0);
    assert_true(worst_ratio("smoothMaxPool", 0, 1) > 1.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_1d_stride_pad),
        cmocka_unit_test(test_padding_is_read_as_zero_times_w),
        cmocka_unit_test(test_conv_dilation),
        cmocka_unit_test(test_conv_groups),
        cmocka_unit_test(test_conv_2d_3d_index_order),
        cmocka_unit_test(test_conv_empty),
        cmocka_unit_test(test_conv_shape_errors),
        cmocka_unit_test(test_conv_transpose_adjoint),
        cmocka_unit_test(test_conv_t_1d),
        cmocka_unit_test(test_conv_t_groups_and_3d),
        cmocka_unit_test(test_conv_t_empty_and_errors),
        cmocka_unit_test(test_max_pool_ties_first_winner),
        cmocka_unit_test(test_max_pool_padding_ignored),
        cmocka_unit_test(test_max_pool_3d_channels),
        cmocka_unit_test(test_pool_empty_rules),
        cmocka_unit_test(test_pool_shape_errors),
        cmocka_unit_test(test_smooth_max_pool_values),
        cmocka_unit_test(test_smooth_max_pool_zero_padding),
        cmocka_unit_test(test_smooth_max_pool_overflow_scale),
        cmocka_unit_test(test_smooth_max_pool_error_model),
        cmocka_unit_test(test_avg_pool_count_include_pad),
        cmocka_unit_test(test_samplers),
        cmocka_unit_test(test_direct_calls),
        cmocka_unit_test(test_float32_within_error_model),
    };
    return cmocka_run_group_tests_name("reference_edges_conv_pool", tests, NULL, NULL);
}
