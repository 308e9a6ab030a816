/* Exact tests of the edge rules of hardMaskedSoftmax, topKMask, reduceMean, the shape/index ops
 * and the losses (ops.md D, E, F, H), of their shape-error messages, and a sampler sweep. */
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

/* ---- helpers ----------------------------------------------------------------------------- */

#define SH(...) make_shape((const int64_t[]){__VA_ARGS__}, \
                           (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
static const ref_shape SCALAR = {0, {0}};

static ref_shape make_shape(const int64_t *d, int rank)
{
    ref_shape s = {rank, {0}};
    memcpy(s.dim, d, sizeof(int64_t) * (size_t)rank);
    return s;
}

/* Runs shape (which must succeed) and forward; returns forward's status. */
static ref_status fwd(const ref_op *op, const ref_params *p, int n, const ref_shape *s,
                      const double *const *v, ref_shape *out, double *y, double *mag)
{
    ref_err e = {{0}};
    ref_status st = op->shape(p, n, s, out, &e);
    if (st != REF_OK)
        fail_msg("%s: unexpected shape error: %s", op->name, e.msg);
    ref_tensor in[REF_MAX_INPUTS];
    for (int i = 0; i < n; i++) {
        in[i].shape = s[i];
        in[i].v = (double *)v[i];
    }
    ref_tensor o = {*out, y};
    return ref_t_forward(op, p, n, in, &o, mag);
}

/* VJP with every gradient in grads[i] (NULL = not requested) and magnitudes in gmag[i]. */
static ref_status vjp(const ref_op *op, const ref_params *p, int n, const ref_shape *s,
                      const double *const *v, const ref_shape *out, const double *y,
                      const double *g, double **grads, double **gmag)
{
    ref_tensor in[REF_MAX_INPUTS], gr[REF_MAX_INPUTS];
    for (int i = 0; i < n; i++) {
        in[i].shape = s[i];
        in[i].v = (double *)v[i];
        gr[i].shape = s[i];
        gr[i].v = grads[i];
    }
    ref_tensor yt = {*out, (double *)y}, gt = {*out, (double *)g};
    return ref_t_vjp(op, p, n, in, &yt, &gt, gr, gmag);
}

static void expect_einval(const ref_op *op, const ref_params *p, int n, const ref_shape *s,
                          const char *needle)
{
    ref_err e = {{0}};
    ref_shape out;
    ref_status st = op->shape(p, n, s, &out, &e);
    if (st != REF_EINVAL)
        fail_msg("%s: expected REF_EINVAL (%s), got %d", op->name, needle, (int)st);
    if (!strstr(e.msg, needle))
        fail_msg("%s: message '%s' does not mention '%s'", op->name, e.msg, needle);
}

static void assert_shape(const ref_shape *got, ref_shape want)
{
    if (!ref_shape_eq(got, &want)) {
        char a[96], b[96];
        ref_shape_fmt(got, a, sizeof a);
        ref_shape_fmt(&want, b, sizeof b);
        fail_msg("shape %s, want %s", a, b);
    }
}

static void assert_close(double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol * (1.0 + fabs(want))))
        fail_msg("got %.17g, want %.17g", got, want);
}

static void assert_bits(double got, double want) /* identical value and sign (NaN == NaN) */
{
    if (isnan(want)) {
        if (!isnan(got))
            fail_msg("got %.17g, want NaN", got);
        return;
    }
    if (got != want || signbit(got) != signbit(want))
        fail_msg("got %.17g, want %.17g", got, want);
}

/* ---- hardMaskedSoftmax ------------------------------------------------------------------ */

static void test_hms_partial_row(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("hardMaskedSoftmax");
    assert_string_equal(op->report_name, "hard_masked_softmax");
    assert_int_equal(op->input_kind[1], REF_IN_MASK);
    ref_params p = ref_t_params(op);
    /* the largest score (4) is blocked: the max runs over the allowed entries only */
    double x[] = {1, 2, 3, 4}, m[] = {1, 0, 1, 0}, y[4], mag[4];
    ref_shape s[] = {SH(4), SH(4)}, out;
    const double *v[] = {x, m};
    assert_int_equal(fwd(op, &p, 2, s, v, &out, y, mag), REF_OK);
    double d = exp(1.0) + exp(3.0);
    assert_close(y[0], exp(1.0) / d, 1e-15);
    assert_close(y[2], exp(3.0) / d, 1e-15);
    assert_bits(y[1], 0.0);
    assert_bits(y[3], 0.0);
    assert_true(mag[1] == 0.0 && mag[3] == 0.0 && mag[0] > 0.0 && mag[2] > 0.0);
    /* a non-finite score at a blocked entry does not matter */
    double xb[] = {1, INFINITY, 3, NAN}, yb[4];
    const double *vb[] = {xb, m};
    assert_int_equal(fwd(op, &p, 2, s, vb, &out, yb, NULL), REF_OK);
    for (int i = 0; i < 4; i++)
        assert_bits(yb[i], y[i]);
}

static void test_hms_fully_blocked_row(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("hardMaskedSoftmax");
    ref_params p = ref_t_params(op);
    double x[] = {5, -1, 2, 0.5, 0.25, 1}, m[] = {0, 0, 0, 1, 1, 1}, y[6], mag[6];
    ref_shape s[] = {SH(2, 3), SH(2, 3)}, out;
    const double *v[] = {x, m};
    assert_int_equal(fwd(op, &p, 2, s, v, &out, y, mag), REF_OK);
    for (int i = 0; i < 3; i++) {
        assert_bits(y[i], 0.0);
        assert_true(mag[i] == 0.0);
    }
    assert_close(y[3] + y[4] + y[5], 1.0, 1e-15); /* the last axis is the softmax axis */
    double g[] = {1, 2, 3, 0.5, -1, 2}, dx[6], dm[6];
    double *grads[] = {dx, NULL}, *gm[] = {dm, NULL};
    assert_int_equal(vjp(op, &p, 2, s, v, &out, y, g, grads, gm), REF_OK);
    for (int i = 0; i < 3; i++) {
        assert_bits(dx[i], 0.0);
        assert_true(dm[i] == 0.0);
    }
    double dot = g[3] * y[3] + g[4] * y[4] + g[5] * y[5];
    for (int i = 3; i < 6; i++)
        assert_close(dx[i], y[i] * (g[i] - dot), 1e-15);
}

static void test_hms_vjp_blocked_zero(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("hardMaskedSoftmax");
    ref_params p = ref_t_params(op);
    double x[] = {0.3, -0.7, 1.1}, m[] = {1, 0, 1}, y[3];
    ref_shape s[] = {SH(3), SH(3)}, out;
    const double *v[] = {x, m};
    assert_int_equal(fwd(op, &p, 2, s, v, &out, y, NULL), REF_OK);
    double g[] = {0.5, 100.0, -2.0}, dx[3];
    double *grads[] = {dx, NULL};
    assert_int_equal(vjp(op, &p, 2, s, v, &out, y, g, grads, NULL), REF_OK);
    assert_bits(dx[1], 0.0);
    double dot = g[0] * y[0] + g[2] * y[2];
    assert_close(dx[0], y[0] * (g[0] - dot), 1e-15);
    assert_close(dx[2], y[2] * (g[2] - dot), 1e-15);
    assert_close(dx[0] + dx[2], 0.0, 1e-15);
    /* unrequested gradient: nothing to do */
    double *none[] = {NULL, NULL};
    assert_int_equal(vjp(op, &p, 2, s, v, &out, y, g, none, NULL), REF_OK);
}

static void test_hms_scalar_and_empty(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("hardMaskedSoftmax");
    ref_params p = ref_t_params(op);
    ref_shape s[] = {SCALAR, SCALAR}, out;
    double x[] = {-3.5}, on[] = {1}, off[] = {0}, y[1], mag[1];
    const double *v1[] = {x, on}, *v0[] = {x, off};
    assert_int_equal(fwd(op, &p, 2, s, v1, &out, y, mag), REF_OK);
    assert_int_equal(out.rank, 0);
    assert_bits(y[0], 1.0);
    assert_int_equal(fwd(op, &p, 2, s, v0, &out, y, mag), REF_OK);
    assert_bits(y[0], 0.0);
    double g[] = {7}, dx[1], dm[1];
    double *grads[] = {dx, NULL}, *gm[] = {dm, NULL};
    assert_int_equal(vjp(op, &p, 2, s, v1, &out, y, g, grads, gm), REF_OK);
    assert_bits(dx[0], 0.0);
    assert_true(dm[0] == 0.0);
    /* zero-size: a [0, 3] and a [2, 0] tensor */
    double dummy[1] = {0};
    const double *ve[] = {dummy, dummy};
    ref_shape e1[] = {SH(0, 3), SH(0, 3)}, e2[] = {SH(2, 0), SH(2, 0)};
    assert_int_equal(fwd(op, &p, 2, e1, ve, &out, y, mag), REF_OK);
    assert_int_equal(fwd(op, &p, 2, e2, ve, &out, y, mag), REF_OK);
    assert_int_equal(vjp(op, &p, 2, e2, ve, &out, dummy, dummy, grads, gm), REF_OK);
}

static void test_hms_nonfinite_allowed(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("hardMaskedSoftmax");
    ref_params p = ref_t_params(op);
    ref_shape s[] = {SH(3), SH(3)}, out;
    double y[3];
    /* an allowed NaN (or +Inf: Inf - Inf) keeps ordinary arithmetic: the whole row is NaN,
     * the blocked entry included (0 / NaN) */
    double xn[] = {NAN, 1, 2}, xi[] = {INFINITY, 1, 2}, m[] = {1, 1, 0};
    const double *vn[] = {xn, m}, *vi[] = {xi, m};
    assert_int_equal(fwd(op, &p, 2, s, vn, &out, y, NULL), REF_OK);
    for (int i = 0; i < 3; i++)
        assert_true(isnan(y[i]));
    assert_int_equal(fwd(op, &p, 2, s, vi, &out, y, NULL), REF_OK);
    for (int i = 0; i < 3; i++)
        assert_true(isnan(y[i]));
    /* an allowed -Inf next to finite scores is an exact 0 */
    double xm[] = {-INFINITY, 1, 2}, m2[] = {1, 1, 1};
    const double *vm[] = {xm, m2};
    assert_int_equal(fwd(op, &p, 2, s, vm, &out, y, NULL), REF_OK);
    assert_bits(y[0], 0.0);
    assert_close(y[1] + y[2], 1.0, 1e-15);
}

static void test_hms_errors(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("hardMaskedSoftmax");
    ref_params p = ref_t_params(op);
    ref_shape bad[] = {SH(2, 3), SH(3, 2)};
    expect_einval(op, &p, 2, bad, "mask has shape [3,2] but x has [2,3]");
    ref_shape one[] = {SH(2, 3)};
    expect_einval(op, &p, 1, one, "takes 2 inputs");
}

/* ---- topKMask ---------------------------------------------------------------------------- */

static void topk_run(int64_t k, int axis, ref_shape s, const double *x, double *y)
{
    const ref_op *op = ref_t_op("topKMask");
    ref_params p = ref_t_params(op);
    p.k = k;
    p.axis = axis;
    ref_shape out;
    double mag[64];
    const double *v[] = {x};
    assert_int_equal(fwd(op, &p, 1, &s, v, &out, y, mag), REF_OK);
    assert_true(ref_shape_eq(&out, &s));
    for (int64_t i = 0; i < ref_numel(&s); i++)
        assert_true(mag[i] == 0.0); /* exact output */
}

static void expect_row(const double *y, const double *want, int n)
{
    for (int i = 0; i < n; i++)
        if (y[i] != want[i])
            fail_msg("entry %d: got %g, want %g", i, y[i], want[i]);
}

static void test_topk_ties_lower_index(void **state)
{
    (void)state;
    double x[] = {1, 3, 3, 2, 3}, y[5];
    topk_run(1, -1, SH(5), x, y);
    expect_row(y, (const double[]){0, 1, 0, 0, 0}, 5);
    topk_run(2, -1, SH(5), x, y);
    expect_row(y, (const double[]){0, 1, 1, 0, 0}, 5);
    topk_run(3, 0, SH(5), x, y);
    expect_row(y, (const double[]){0, 1, 1, 0, 1}, 5);
    topk_run(4, 0, SH(5), x, y);
    expect_row(y, (const double[]){0, 1, 1, 1, 1}, 5);
    /* -0 and +0 compare equal: a tie, won by the lower index */
    double z[] = {0.0, -0.0}, yz[2];
    topk_run(1, -1, SH(2), z, yz);
    expect_row(yz, (const double[]){1, 0}, 2);
}

static void test_topk_k_edges(void **state)
{
    (void)state;
    double x[] = {0.5, -1, 2, 7}, y[4];
    topk_run(0, -1, SH(4), x, y);
    expect_row(y, (const double[]){0, 0, 0, 0}, 4);
    topk_run(4, -1, SH(4), x, y);
    expect_row(y, (const double[]){1, 1, 1, 1}, 4);
    topk_run(9, -1, SH(4), x, y);
    expect_row(y, (const double[]){1, 1, 1, 1}, 4);
    /* axis 0 of a [3, 2]: per column */
    double m[] = {1, 9, 5, 8, 3, 7}, ym[6];
    topk_run(1, 0, SH(3, 2), m, ym);
    expect_row(ym, (const double[]){0, 1, 1, 0, 0, 0}, 6);
    topk_run(2, -2, SH(3, 2), m, ym);
    expect_row(ym, (const double[]){0, 1, 1, 1, 1, 0}, 6);
    /* scalar: one slice of length 1 */
    double s[] = {-4}, ys[1];
    topk_run(1, 0, SCALAR, s, ys);
    assert_bits(ys[0], 1.0);
    topk_run(0, 0, SCALAR, s, ys);
    assert_bits(ys[0], 0.0);
    /* zero-size */
    topk_run(2, 1, SH(2, 0), s, ys);
}

static void test_topk_contract(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("topKMask");
    assert_int_equal(op->requires_vjp, 0);
    assert_true(op->params == (REF_P_AXIS | REF_P_K));
    ref_params p = ref_t_params(op);
    assert_int_equal(p.axis, -1);
    assert_int_equal(p.k, 1);
    ref_shape s = SH(2, 2);
    p.k = -1;
    expect_einval(op, &p, 1, &s, "k must be >= 0");
    p.k = 1;
    p.axis = 2;
    expect_einval(op, &p, 1, &s, "axis 2 is out of range");
    /* a requested VJP is zero */
    p.axis = -1;
    double x[] = {1, 2, 3, 4}, y[4], g[] = {1, 1, 1, 1}, dx[4] = {9, 9, 9, 9}, dm[4] = {9, 9, 9, 9};
    ref_shape out;
    const double *v[] = {x};
    assert_int_equal(fwd(op, &p, 1, &s, v, &out, y, NULL), REF_OK);
    double *grads[] = {dx}, *gm[] = {dm}, *none[] = {NULL};
    assert_int_equal(vjp(op, &p, 1, &s, v, &out, y, g, grads, gm), REF_OK);
    for (int i = 0; i < 4; i++)
        assert_true(dx[i] == 0.0 && dm[i] == 0.0);
    assert_int_equal(vjp(op, &p, 1, &s, v, &out, y, g, grads, NULL), REF_OK);
    assert_int_equal(vjp(op, &p, 1, &s, v, &out, y, g, none, NULL), REF_OK);
}

/* ---- softmax / logSoftmax / reduceSum (the family's existing ops) ----------------------- */

static void test_softmax_existing_edges(void **state)
{
    (void)state;
    const ref_op *sm = ref_t_op("softmax"), *ls = ref_t_op("logSoftmax");
    ref_params p = ref_t_params(sm);
    double x[] = {-3.5}, y[4], mag[4], g[] = {2, -1, 0.5, 3}, dx[4], dm[4];
    double *grads[] = {dx}, *gm[] = {dm}, *none[] = {NULL};
    ref_shape out;
    const double *v[] = {x};
    /* scalar: softmax 1, logSoftmax 0, both with a zero gradient */
    assert_int_equal(fwd(sm, &p, 1, &SCALAR, v, &out, y, mag), REF_OK);
    assert_bits(y[0], 1.0);
    assert_int_equal(vjp(sm, &p, 1, &SCALAR, v, &out, y, g, grads, gm), REF_OK);
    assert_bits(dx[0], 0.0);
    assert_int_equal(fwd(ls, &p, 1, &SCALAR, v, &out, y, mag), REF_OK);
    assert_bits(y[0], 0.0);
    assert_int_equal(vjp(ls, &p, 1, &SCALAR, v, &out, y, g, grads, gm), REF_OK);
    assert_bits(dx[0], 0.0);
    assert_int_equal(vjp(ls, &p, 1, &SCALAR, v, &out, y, g, none, NULL), REF_OK);
    assert_int_equal(vjp(sm, &p, 1, &SCALAR, v, &out, y, g, none, NULL), REF_OK);
    /* n = 0 slice: unchanged (nothing to write) */
    ref_shape e = SH(3, 0);
    p.axis = 1;
    assert_int_equal(fwd(sm, &p, 1, &e, v, &out, y, mag), REF_OK);
    /* logSoftmax VJP from the saved output: g - exp(y) sum g */
    double z[] = {0.5, -1, 2, 0};
    ref_shape s = SH(4);
    const double *vz[] = {z};
    p.axis = 0;
    assert_int_equal(fwd(ls, &p, 1, &s, vz, &out, y, mag), REF_OK);
    assert_int_equal(vjp(ls, &p, 1, &s, vz, &out, y, g, grads, gm), REF_OK);
    for (int i = 0; i < 4; i++)
        assert_close(dx[i], g[i] - exp(y[i]) * 4.5, 1e-15);
    assert_int_equal(vjp(ls, &p, 1, &s, vz, &out, y, g, grads, NULL), REF_OK);
    p.axis = 1;
    expect_einval(sm, &p, 1, &s, "axis 1 is out of range for rank 1");
}

static void test_reduce_sum_edges(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("reduceSum");
    ref_params p = ref_t_params(op);
    double x[] = {1, 2, 3, 4, 5, 6}, y[3], mag[3], g[] = {1, -2, 3}, dx[6], dm[6];
    double *grads[] = {dx}, *gm[] = {dm}, *none[] = {NULL};
    ref_shape s = SH(2, 3), out;
    const double *v[] = {x};
    p.axis = 0;
    assert_int_equal(fwd(op, &p, 1, &s, v, &out, y, mag), REF_OK);
    expect_row(y, (const double[]){5, 7, 9}, 3);
    assert_int_equal(vjp(op, &p, 1, &s, v, &out, y, g, grads, gm), REF_OK);
    expect_row(dx, (const double[]){1, -2, 3, 1, -2, 3}, 6);
    assert_int_equal(vjp(op, &p, 1, &s, v, &out, y, g, none, NULL), REF_OK);
    ref_shape e = SH(0, 2);
    expect_einval(op, &p, 1, &e, "is empty");
}

/* ---- reduceMean -------------------------------------------------------------------------- */

static void test_reduce_mean(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("reduceMean");
    assert_string_equal(op->report_name, "reduce_mean");
    ref_params p = ref_t_params(op);
    double x[] = {1, 2, 6, -4, 0.5, 0.5}, y[3], mag[3];
    ref_shape s = SH(2, 3), out;
    const double *v[] = {x};
    p.axis = 1;
    assert_int_equal(fwd(op, &p, 1, &s, v, &out, y, mag), REF_OK);
    assert_shape(&out, SH(2));
    assert_bits(y[0], 3.0);
    assert_bits(y[1], -1.0);
    assert_close(mag[0], 9.0 + 6.0, 0); /* sum|x| + 2|y| */
    p.axis = -2;
    assert_int_equal(fwd(op, &p, 1, &s, v, &out, y, NULL), REF_OK);
    assert_shape(&out, SH(3));
    assert_bits(y[0], -1.5);
    assert_bits(y[1], 1.25);
    assert_bits(y[2], 3.25);
    /* VJP: g / n broadcast back */
    double g[] = {3, -6, 9}, dx[6], dm[6];
    double *grads[] = {dx}, *gm[] = {dm}, *none[] = {NULL};
    assert_int_equal(vjp(op, &p, 1, &s, v, &out, y, g, grads, gm), REF_OK);
    const double want[] = {1.5, -3, 4.5, 1.5, -3, 4.5};
    for (int i = 0; i < 6; i++) {
        assert_bits(dx[i], want[i]);
        assert_bits(dm[i], fabs(want[i]));
    }
    assert_int_equal(vjp(op, &p, 1, &s, v, &out, y, g, grads, NULL), REF_OK);
    assert_int_equal(vjp(op, &p, 1, &s, v, &out, y, g, none, NULL), REF_OK);
    /* empty outer axis is fine; the reduced axis may not be empty */
    ref_shape e = SH(0, 3);
    p.axis = 1;
    assert_int_equal(fwd(op, &p, 1, &e, v, &out, y, mag), REF_OK);
    assert_int_equal(ref_numel(&out), 0);
    p.axis = 0;
    expect_einval(op, &p, 1, &e, "is empty");
    p.axis = 3;
    expect_einval(op, &p, 1, &s, "out of range");
    expect_einval(op, &p, 1, &SCALAR, "out of range");
}

/* ---- reshape ----------------------------------------------------------------------------- */

static void test_reshape(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("reshape");
    ref_params p = ref_t_params(op);
    double x[] = {1, -2, 3, -0.0, 5, 6}, y[6], mag[6];
    ref_shape s = SH(2, 3), out;
    const double *v[] = {x};
    p.target = SH(3, 1, 2);
    assert_int_equal(fwd(op, &p, 1, &s, v, &out, y, mag), REF_OK);
    assert_true(ref_shape_eq(&out, &p.target));
    for (int i = 0; i < 6; i++) {
        assert_bits(y[i], x[i]);
        assert_bits(mag[i], fabs(x[i]) / 2);
    }
    double dx[6], dm[6];
    double *grads[] = {dx}, *gm[] = {dm}, *none[] = {NULL};
    assert_int_equal(vjp(op, &p, 1, &s, v, &out, y, y, grads, gm), REF_OK);
    for (int i = 0; i < 6; i++)
        assert_bits(dx[i], x[i]);
    assert_int_equal(vjp(op, &p, 1, &s, v, &out, y, y, none, NULL), REF_OK);
    /* scalar <-> [1, 1], empty <-> empty */
    p.target = SH(1, 1);
    assert_int_equal(fwd(op, &p, 1, &SCALAR, v, &out, y, NULL), REF_OK);
    p.target = SH(0, 5);
    ref_shape e = SH(3, 0);
    assert_int_equal(fwd(op, &p, 1, &e, v, &out, y, NULL), REF_OK);
    /* errors */
    p.target = SH(4, 2);
    expect_einval(op, &p, 1, &s, "cannot reshape [2,3] (6 elements) to [4,2] (8 elements)");
    p.target = SH(-2, -3);
    expect_einval(op, &p, 1, &s, "negative extent");
    p.target.rank = REF_MAX_RANK + 1;
    expect_einval(op, &p, 1, &s, "rank 9");
    p.target = SH(INT64_MAX / 2, 4);
    expect_einval(op, &p, 1, &s, "overflows");
}

/* ---- permute ----------------------------------------------------------------------------- */

static void test_permute(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("permute");
    ref_params p = ref_t_params(op);
    double x[24], y[24], mag[24];
    for (int i = 0; i < 24; i++)
        x[i] = i - 11.5;
    ref_shape s = SH(2, 3, 4), out;
    const double *v[] = {x};
    p.perm_len = 3;
    p.perm[0] = 2, p.perm[1] = 0, p.perm[2] = -2; /* = (2, 0, 1) */
    assert_int_equal(fwd(op, &p, 1, &s, v, &out, y, mag), REF_OK);
    assert_shape(&out, SH(4, 2, 3));
    for (int k = 0; k < 4; k++) /* y[k, i, j] = x[i, j, k] */
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                assert_bits(y[(k * 2 + i) * 3 + j], x[(i * 3 + j) * 4 + k]);
    /* VJP: the inverse permutation, so permuting y back recovers x */
    double dx[24], dm[24];
    double *grads[] = {dx}, *gm[] = {dm}, *none[] = {NULL};
    assert_int_equal(vjp(op, &p, 1, &s, v, &out, y, y, grads, gm), REF_OK);
    for (int i = 0; i < 24; i++) {
        assert_bits(dx[i], x[i]);
        assert_bits(dm[i], fabs(x[i]) / 2);
    }
    assert_int_equal(vjp(op, &p, 1, &s, v, &out, y, y, grads, NULL), REF_OK);
    assert_int_equal(vjp(op, &p, 1, &s, v, &out, y, y, none, NULL), REF_OK);
    /* scalar: the empty permutation */
    p.perm_len = 0;
    assert_int_equal(fwd(op, &p, 1, &SCALAR, v, &out, y, NULL), REF_OK);
    assert_bits(y[0], x[0]);
    /* errors */
    p.perm_len = 2;
    p.perm[0] = 0, p.perm[1] = 1;
    expect_einval(op, &p, 1, &s, "perm has 2 entries but the input has rank 3");
    p.perm_len = 3;
    p.perm[0] = 0, p.perm[1] = 1, p.perm[2] = -3;
    expect_einval(op, &p, 1, &s, "names axis 0 twice");
    p.perm[2] = 3;
    expect_einval(op, &p, 1, &s, "perm[2] = 3 is out of range");
}

/* ---- broadcast --------------------------------------------------------------------------- */

static void test_broadcast(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("broadcast");
    ref_params p = ref_t_params(op);
    double x[] = {1, 2, 3}, y[24], mag[24];
    ref_shape s = SH(3, 1), out;
    const double *v[] = {x};
    p.target = SH(2, 3, 4);
    assert_int_equal(fwd(op, &p, 1, &s, v, &out, y, mag), REF_OK);
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 4; k++)
                assert_bits(y[(a * 3 + i) * 4 + k], x[i]);
    /* VJP: sum over the new axis 0 and the expanded axis 2, the [3, 1] shape kept */
    double g[24], dx[3], dm[3];
    for (int i = 0; i < 24; i++)
        g[i] = (double)(i % 5) - 1.5;
    double *grads[] = {dx}, *gm[] = {dm}, *none[] = {NULL};
    assert_int_equal(vjp(op, &p, 1, &s, v, &out, y, g, grads, gm), REF_OK);
    for (int i = 0; i < 3; i++) {
        double want = 0, abs_sum = 0;
        for (int a = 0; a < 2; a++)
            for (int k = 0; k < 4; k++) {
                want += g[(a * 3 + i) * 4 + k];
                abs_sum += fabs(g[(a * 3 + i) * 4 + k]);
            }
        assert_bits(dx[i], want);
        assert_close(dm[i], 7 * abs_sum + fabs(want) / 2, 1e-15); /* 8 terms */
    }
    assert_int_equal(vjp(op, &p, 1, &s, v, &out, y, g, grads, NULL), REF_OK);
    assert_int_equal(vjp(op, &p, 1, &s, v, &out, y, g, none, NULL), REF_OK);
    /* expansion to extent 0: empty output, the gradient is 0 with magnitude 0 */
    ref_shape one = SH(1);
    p.target = SH(0);
    assert_int_equal(fwd(op, &p, 1, &one, v, &out, y, mag), REF_OK);
    assert_int_equal(ref_numel(&out), 0);
    assert_int_equal(vjp(op, &p, 1, &one, v, &out, y, g, grads, gm), REF_OK);
    assert_bits(dx[0], 0.0);
    assert_true(dm[0] == 0.0);
    /* scalar to [2, 2]: the VJP sums everything */
    p.target = SH(2, 2);
    assert_int_equal(fwd(op, &p, 1, &SCALAR, v, &out, y, mag), REF_OK);
    for (int i = 0; i < 4; i++)
        assert_bits(y[i], 1.0);
    assert_int_equal(vjp(op, &p, 1, &SCALAR, v, &out, y, g, grads, gm), REF_OK);
    assert_bits(dx[0], g[0] + g[1] + g[2] + g[3]);
    /* errors */
    p.target = SH(3);
    expect_einval(op, &p, 1, &s, "cannot broadcast [3,1] to the lower-rank target [3]");
    p.target = SH(2, 4);
    expect_einval(op, &p, 1, &s, "input axis 0 has extent 3, target 2");
    p.target = SH(3, -1);
    expect_einval(op, &p, 1, &s, "negative extent");
}

/* ---- concat ------------------------------------------------------------------------------ */

static void test_concat(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("concat");
    assert_int_equal(op->min_inputs, 2);
    assert_int_equal(op->max_inputs, REF_MAX_INPUTS);
    ref_params p = ref_t_params(op);
    double a[] = {1, 2}, b[1] = {0}, c[] = {3, 4, 5, 6}, y[6], mag[6];
    ref_shape s[] = {SH(2, 1), SH(2, 0), SH(2, 2)}, out;
    const double *v[] = {a, b, c};
    p.axis = -1;
    assert_int_equal(fwd(op, &p, 3, s, v, &out, y, mag), REF_OK);
    assert_shape(&out, SH(2, 3));
    expect_row(y, (const double[]){1, 3, 4, 2, 5, 6}, 6);
    double g[] = {10, 20, 30, 40, 50, 60}, da[2], dc[4], dma[2], dmc[4];
    double *grads[] = {da, NULL, dc}, *gm[] = {dma, NULL, dmc};
    assert_int_equal(vjp(op, &p, 3, s, v, &out, y, g, grads, gm), REF_OK);
    expect_row(da, (const double[]){10, 40}, 2);
    expect_row(dc, (const double[]){20, 30, 50, 60}, 4);
    assert_bits(dmc[3], 30.0);
    assert_int_equal(vjp(op, &p, 3, s, v, &out, y, g, grads, NULL), REF_OK);
    /* axis 0 */
    ref_shape s0[] = {SH(1, 2), SH(2, 2)};
    const double *v0[] = {a, c};
    p.axis = 0;
    assert_int_equal(fwd(op, &p, 2, s0, v0, &out, y, NULL), REF_OK);
    expect_row(y, (const double[]){1, 2, 3, 4, 5, 6}, 6);
    /* errors */
    expect_einval(op, &p, 1, s0, "concat takes 2..8 inputs, got 1");
    ref_shape r[] = {SH(2, 2), SH(2)};
    expect_einval(op, &p, 2, r, "ranks differ");
    ref_shape m[] = {SH(2, 2), SH(2, 3)};
    expect_einval(op, &p, 2, m, "axis 1 must match");
    ref_shape z[] = {SCALAR, SCALAR};
    expect_einval(op, &p, 2, z, "out of range for rank 0");
    p.axis = 2;
    expect_einval(op, &p, 2, s0, "axis 2 is out of range");
}

/* ---- slice ------------------------------------------------------------------------------- */

static void test_slice(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("slice");
    ref_params p = ref_t_params(op);
    double x[] = {0, 1, 2, 3, 4, 10, 11, 12, 13, 14}, y[10], mag[10];
    ref_shape s = SH(2, 5), out;
    const double *v[] = {x};
    p.axis = 1, p.start = 1, p.count = 3;
    assert_int_equal(fwd(op, &p, 1, &s, v, &out, y, mag), REF_OK);
    assert_shape(&out, SH(2, 3));
    expect_row(y, (const double[]){1, 2, 3, 11, 12, 13}, 6);
    double g[] = {-1, -2, -3, -4, -5, -6}, dx[10], dm[10];
    double *grads[] = {dx}, *gm[] = {dm}, *none[] = {NULL};
    assert_int_equal(vjp(op, &p, 1, &s, v, &out, y, g, grads, gm), REF_OK);
    expect_row(dx, (const double[]){0, -1, -2, -3, 0, 0, -4, -5, -6, 0}, 10);
    assert_true(dm[0] == 0.0 && dm[4] == 0.0 && dm[1] == 0.5);
    assert_int_equal(vjp(op, &p, 1, &s, v, &out, y, g, grads, NULL), REF_OK);
    assert_int_equal(vjp(op, &p, 1, &s, v, &out, y, g, none, NULL), REF_OK);
    /* an empty slice at the very end is allowed */
    p.start = 5, p.count = 0;
    assert_int_equal(fwd(op, &p, 1, &s, v, &out, y, mag), REF_OK);
    assert_int_equal(ref_numel(&out), 0);
    assert_int_equal(vjp(op, &p, 1, &s, v, &out, y, g, grads, gm), REF_OK);
    for (int i = 0; i < 10; i++)
        assert_bits(dx[i], 0.0);
    /* errors */
    p.start = 3, p.count = 3;
    expect_einval(op, &p, 1, &s, "slice [3, 3 + 3) does not fit axis 1 of extent 5");
    p.start = -1, p.count = 1;
    expect_einval(op, &p, 1, &s, "does not fit");
    p.start = 0, p.count = -1;
    expect_einval(op, &p, 1, &s, "does not fit");
    p.start = 6, p.count = 0;
    expect_einval(op, &p, 1, &s, "does not fit");
    p.start = 0, p.count = 1, p.axis = -3;
    expect_einval(op, &p, 1, &s, "axis -3 is out of range");
    expect_einval(op, &p, 1, &SCALAR, "out of range for rank 0");
}

/* ---- gather ------------------------------------------------------------------------------ */

static void test_gather_repeats(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("gather");
    assert_int_equal(op->input_kind[1], REF_IN_INDEX);
    ref_params p = ref_t_params(op);
    double x[] = {1, 2, 3, 4, 5, 6}, idx[] = {2, 0, 2}, y[6], mag[6];
    ref_shape s[] = {SH(3, 2), SH(3)}, out;
    const double *v[] = {x, idx};
    p.axis = 0;
    assert_int_equal(fwd(op, &p, 2, s, v, &out, y, mag), REF_OK);
    assert_shape(&out, SH(3, 2));
    expect_row(y, (const double[]){5, 6, 1, 2, 5, 6}, 6);
    /* VJP: scatter-add into zeros; the repeated row accumulates, the unused row is 0 */
    double g[] = {0.5, 1, 2, 4, 8, 16}, dx[6], dm[6];
    double *grads[] = {dx, NULL}, *gm[] = {dm, NULL}, *none[] = {NULL, NULL};
    assert_int_equal(vjp(op, &p, 2, s, v, &out, y, g, grads, gm), REF_OK);
    expect_row(dx, (const double[]){2, 4, 0, 0, 8.5, 17}, 6);
    assert_true(dm[2] == 0.0 && dm[3] == 0.0);
    assert_bits(dm[0], 1.0);                   /* one term: |y|/2 */
    assert_bits(dm[4], (0.5 + 8) + 8.5 / 2); /* two terms */
    assert_int_equal(vjp(op, &p, 2, s, v, &out, y, g, grads, NULL), REF_OK);
    assert_int_equal(vjp(op, &p, 2, s, v, &out, y, g, none, NULL), REF_OK);
    /* along axis 1 (negative), with an empty index */
    double i1[] = {1, 1, 0, 1};
    ref_shape s1[] = {SH(3, 2), SH(4)};
    const double *v1[] = {x, i1};
    p.axis = -1;
    double y1[12];
    assert_int_equal(fwd(op, &p, 2, s1, v1, &out, y1, NULL), REF_OK);
    expect_row(y1, (const double[]){2, 2, 1, 2, 4, 4, 3, 4, 6, 6, 5, 6}, 12);
    ref_shape se[] = {SH(3, 2), SH(0)};
    assert_int_equal(fwd(op, &p, 2, se, v1, &out, y1, NULL), REF_OK);
    assert_shape(&out, SH(3, 0));
    assert_int_equal(vjp(op, &p, 2, se, v1, &out, y1, g, grads, gm), REF_OK);
    for (int i = 0; i < 6; i++)
        assert_bits(dx[i], 0.0);
}

static void test_gather_select_and_domain(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("gather");
    ref_params p = ref_t_params(op);
    double x[] = {1, 2, 3, 4, 5, 6}, two[] = {2}, y[3];
    ref_shape s[] = {SH(2, 3), SCALAR}, out;
    const double *v[] = {x, two};
    p.axis = 1; /* select: the axis is dropped */
    assert_int_equal(fwd(op, &p, 2, s, v, &out, y, NULL), REF_OK);
    assert_shape(&out, SH(2));
    expect_row(y, (const double[]){3, 6}, 2);
    p.axis = 0;
    double one[] = {1};
    const double *v0[] = {x, one};
    assert_int_equal(fwd(op, &p, 2, s, v0, &out, y, NULL), REF_OK);
    assert_shape(&out, SH(3));
    expect_row(y, (const double[]){4, 5, 6}, 3);
    /* index values outside [0, extent) or not integers: outside the domain */
    double g[3] = {1, 1, 1}, dx[6];
    double *grads[] = {dx, NULL};
    const double bad_values[] = {2, -1, 0.5, NAN};
    for (int k = 0; k < 4; k++) {
        const double *vb[] = {x, &bad_values[k]};
        assert_int_equal(fwd(op, &p, 2, s, vb, &out, y, NULL), REF_EDOMAIN);
        assert_int_equal(vjp(op, &p, 2, s, vb, &out, y, g, grads, NULL), REF_EDOMAIN);
    }
    /* the index domain spans the axis extent */
    ref_domain d;
    ref_shape sd[] = {SH(2, 7), SH(4)};
    p.axis = -1;
    ref_default_domain(op, &p, 2, sd, 1, &d);
    assert_int_equal(d.kind, REF_DOM_INDEX);
    assert_true(d.hi == 7.0);
    ref_default_domain(op, &p, 2, sd, 0, &d);
    assert_int_equal(d.kind, REF_DOM_NORMAL);
    p.axis = 5;
    ref_default_domain(op, &p, 2, sd, 1, &d);
    assert_true(d.hi == 0.0);
}

static void test_gather_errors(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("gather");
    ref_params p = ref_t_params(op);
    ref_shape r2[] = {SH(2, 3), SH(2, 2)};
    expect_einval(op, &p, 2, r2, "the index must be a vector");
    ref_shape ax[] = {SH(2, 3), SH(2)};
    p.axis = 2;
    expect_einval(op, &p, 2, ax, "axis 2 is out of range");
    ref_shape sc[] = {SCALAR, SH(1)};
    p.axis = 0;
    expect_einval(op, &p, 2, sc, "out of range for rank 0");
    ref_shape em[] = {SH(0, 3), SH(2)};
    expect_einval(op, &p, 2, em, "the index has 2 entries but axis 0 is empty");
    ref_shape ok[] = {SH(0, 3), SH(0)};
    ref_shape out;
    ref_err e;
    assert_int_equal(op->shape(&p, 2, ok, &out, &e), REF_OK);
    expect_einval(op, &p, 1, ok, "gather takes 2 inputs");
}

/* ---- scatterAdd -------------------------------------------------------------------------- */

static void test_scatter_left_fold(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("scatterAdd");
    assert_string_equal(op->report_name, "scatter_add");
    ref_params p = ref_t_params(op);
    /* out[1] = (1e16 + 1) + 1 = 1e16 in a left fold from the base; (1 + 1) + 1e16 would be
     * 1e16 + 2. An untouched -0 base stays -0. */
    double base[] = {-0.0, 1e16, 3}, idx[] = {1, 1, 2}, src[] = {1, 1, -0.5}, y[3], mag[3];
    ref_shape s[] = {SH(3), SH(3), SH(3)}, out;
    const double *v[] = {base, idx, src};
    assert_int_equal(fwd(op, &p, 3, s, v, &out, y, mag), REF_OK);
    assert_bits(y[0], -0.0);
    assert_bits(y[1], 1e16);
    assert_bits(y[2], 2.5);
    assert_true(mag[0] == 0.0);                       /* one term, |y|/2 */
    assert_close(mag[1], 2 * (1e16 + 2) + 1e16 / 2, 1e-15); /* three terms */
    assert_int_equal(fwd(op, &p, 3, s, v, &out, y, NULL), REF_OK);
    /* VJP: dBase = g, dSource = g at the indices */
    double g[] = {7, 8, 9}, db[3], ds[3], dmb[3], dms[3];
    double *grads[] = {db, NULL, ds}, *gm[] = {dmb, NULL, dms};
    assert_int_equal(vjp(op, &p, 3, s, v, &out, y, g, grads, gm), REF_OK);
    expect_row(db, g, 3);
    expect_row(ds, (const double[]){8, 8, 9}, 3);
    assert_bits(dms[2], 4.5);
    double *only_base[] = {db, NULL, NULL}, *only_src[] = {NULL, NULL, ds};
    assert_int_equal(vjp(op, &p, 3, s, v, &out, y, g, only_base, NULL), REF_OK);
    assert_int_equal(vjp(op, &p, 3, s, v, &out, y, g, only_src, NULL), REF_OK);
    /* a 2-D case along axis 0: whole rows are added */
    double b2[] = {0, 0, 0, 0}, i2[] = {1}, s2[] = {5, 6}, y2[4];
    ref_shape sh2[] = {SH(2, 2), SH(1), SH(1, 2)};
    const double *v2[] = {b2, i2, s2};
    assert_int_equal(fwd(op, &p, 3, sh2, v2, &out, y2, NULL), REF_OK);
    expect_row(y2, (const double[]){0, 0, 5, 6}, 4);
    /* bad index values */
    const double bad[] = {3, 1, 1};
    const double *vb[] = {base, bad, src};
    assert_int_equal(fwd(op, &p, 3, s, vb, &out, y, NULL), REF_EDOMAIN);
    assert_int_equal(vjp(op, &p, 3, s, vb, &out, y, g, grads, NULL), REF_EDOMAIN);
    ref_domain d;
    ref_shape sd[] = {SH(4, 9), SH(2), SH(4, 2)};
    p.axis = 1;
    ref_default_domain(op, &p, 3, sd, 1, &d);
    assert_true(d.kind == REF_DOM_INDEX && d.hi == 9.0);
}

static void test_scatter_errors(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("scatterAdd");
    ref_params p = ref_t_params(op);
    ref_shape ok[] = {SH(3, 2), SH(4), SH(4, 2)};
    expect_einval(op, &p, 2, ok, "scatterAdd takes 3 inputs");
    ref_shape r[] = {SH(3, 2), SCALAR, SH(3, 2)};
    expect_einval(op, &p, 3, r, "the index must be a vector, got rank 0");
    ref_shape m[] = {SH(3, 2), SH(4), SH(3, 2)};
    expect_einval(op, &p, 3, m, "source must have shape [4,2]");
    ref_shape e[] = {SH(0, 2), SH(1), SH(1, 2)};
    expect_einval(op, &p, 3, e, "axis 0 is empty");
    ref_shape sc[] = {SCALAR, SH(1), SH(1)};
    expect_einval(op, &p, 3, sc, "out of range for rank 0");
    p.axis = -3;
    expect_einval(op, &p, 3, ok, "axis -3 is out of range");
}

/* ---- mseLoss ----------------------------------------------------------------------------- */

static void test_mse(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("mseLoss");
    ref_params p = ref_t_params(op);
    double yh[] = {1, 2, 3}, t[] = {1, 0, 0}, y[1], mag[1];
    ref_shape s[] = {SH(3), SH(3)}, out;
    const double *v[] = {yh, t};
    assert_int_equal(fwd(op, &p, 2, s, v, &out, y, mag), REF_OK);
    assert_int_equal(out.rank, 0);
    assert_close(y[0], 13.0 / 3.0, 1e-16);
    assert_close(mag[0], 7 * 13.0 / 3.0, 1e-15);
    double g[] = {1.5}, dy[3], dt[3], dmy[3], dmt[3];
    double *grads[] = {dy, dt}, *gm[] = {dmy, dmt};
    assert_int_equal(vjp(op, &p, 2, s, v, &out, y, g, grads, gm), REF_OK);
    for (int i = 0; i < 3; i++) {
        double want = ((yh[i] - t[i]) * (2.0 / 3.0)) * 1.5;
        assert_bits(dy[i], want);
        assert_bits(dt[i], 0.0 - want); /* CPU order: 0 - dyhat, so +0 for a zero residual */
    }
    assert_bits(dt[0], 0.0);
    double *only_t[] = {NULL, dt};
    assert_int_equal(vjp(op, &p, 2, s, v, &out, y, g, only_t, NULL), REF_OK);
    /* empty: denominator 1, loss 0 */
    ref_shape e[] = {SH(0, 4), SH(0, 4)};
    assert_int_equal(fwd(op, &p, 2, e, v, &out, y, mag), REF_OK);
    assert_bits(y[0], 0.0);
    assert_true(mag[0] == 0.0);
    assert_int_equal(vjp(op, &p, 2, e, v, &out, y, g, grads, gm), REF_OK);
    /* scalar */
    ref_shape sc[] = {SCALAR, SCALAR};
    assert_int_equal(fwd(op, &p, 2, sc, v, &out, y, NULL), REF_OK);
    assert_bits(y[0], 0.0);
    /* errors */
    ref_shape bad[] = {SH(3), SH(2)};
    expect_einval(op, &p, 2, bad, "input 1 has shape [2] but input 0 has [3]");
    expect_einval(op, &p, 1, bad, "mseLoss takes 2 inputs");
}

/* ---- crossEntropy ------------------------------------------------------------------------ */

static double log_sum_exp(const double *z, int n, int stride)
{
    double m = z[0], s = 0;
    for (int i = 1; i < n; i++)
        m = z[i * stride] > m ? z[i * stride] : m;
    for (int i = 0; i < n; i++)
        s += exp(z[i * stride] - m);
    return m + log(s);
}

static void test_ce_values(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("crossEntropy");
    assert_string_equal(op->report_name, "cross_entropy");
    assert_int_equal(op->input_kind[1], REF_IN_CONST);
    ref_params p = ref_t_params(op);
    assert_int_equal(p.axis, -1);
    /* [2, 3] logits, class axis last, one-hot targets: mean over S = 2 rows of -log p */
    double z[] = {1, 2, 3, -1, 0.5, 0}, t[] = {0, 0, 1, 1, 0, 0}, y[1], mag[1];
    ref_shape s[] = {SH(2, 3), SH(2, 3)}, out;
    const double *v[] = {z, t};
    assert_int_equal(fwd(op, &p, 2, s, v, &out, y, mag), REF_OK);
    double want = ((log_sum_exp(z, 3, 1) - 3) + (log_sum_exp(z + 3, 3, 1) + 1)) / 2;
    assert_close(y[0], want, 1e-15);
    assert_true(mag[0] > fabs(y[0]));
    /* gradient: (softmax * sum t - t) / S * g */
    double g[] = {2}, dz[6], dm[6];
    double *grads[] = {dz, NULL}, *gm[] = {dm, NULL}, *none[] = {NULL, NULL};
    assert_int_equal(vjp(op, &p, 2, s, v, &out, y, g, grads, gm), REF_OK);
    for (int r = 0; r < 2; r++) {
        double l = log_sum_exp(z + 3 * r, 3, 1);
        for (int c = 0; c < 3; c++)
            assert_close(dz[3 * r + c], (exp(z[3 * r + c] - l) - t[3 * r + c]) / 2 * 2, 1e-15);
    }
    assert_int_equal(vjp(op, &p, 2, s, v, &out, y, g, grads, NULL), REF_OK);
    assert_int_equal(vjp(op, &p, 2, s, v, &out, y, g, none, NULL), REF_OK);
    /* class axis 0 of a [3, 2]: S = 2 slices (the columns) */
    p.axis = 0;
    double zc[] = {1, -1, 2, 0.5, 3, 0}, tc[] = {0, 1, 0, 0, 1, 0};
    const double *vc[] = {zc, tc};
    ref_shape sc[] = {SH(3, 2), SH(3, 2)};
    assert_int_equal(fwd(op, &p, 2, sc, vc, &out, y, NULL), REF_OK);
    assert_close(y[0], want, 1e-15); /* the transpose of the case above */
    /* rank 1: a single slice, S = 1 */
    p.axis = 0;
    ref_shape s1[] = {SH(3), SH(3)};
    assert_int_equal(fwd(op, &p, 2, s1, v, &out, y, NULL), REF_OK);
    assert_close(y[0], log_sum_exp(z, 3, 1) - 3, 1e-15);
}

static void test_ce_unnormalized_and_empty(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("crossEntropy");
    ref_params p = ref_t_params(op);
    double z[] = {0.25, -2, 1}, y[1], g[] = {1}, dz[3];
    ref_shape s[] = {SH(3), SH(3)}, out;
    double *grads[] = {dz, NULL};
    /* zero targets: zero loss and zero gradient */
    double t0[] = {0, 0, 0};
    const double *v0[] = {z, t0};
    assert_int_equal(fwd(op, &p, 2, s, v0, &out, y, NULL), REF_OK);
    assert_true(y[0] == 0.0);
    assert_int_equal(vjp(op, &p, 2, s, v0, &out, y, g, grads, NULL), REF_OK);
    for (int i = 0; i < 3; i++)
        assert_bits(dz[i], 0.0);
    /* unnormalized target (sum 2): dz = softmax * 2 - t */
    double t2[] = {2, 0, 0};
    const double *v2[] = {z, t2};
    assert_int_equal(fwd(op, &p, 2, s, v2, &out, y, NULL), REF_OK);
    double l = log_sum_exp(z, 3, 1);
    assert_close(y[0], -2 * (z[0] - l), 1e-15);
    assert_int_equal(vjp(op, &p, 2, s, v2, &out, y, g, grads, NULL), REF_OK);
    for (int i = 0; i < 3; i++)
        assert_close(dz[i], exp(z[i] - l) * 2 - t2[i], 1e-15);
    /* empty class axis: loss 0, S = 2 */
    ref_shape e[] = {SH(2, 0), SH(2, 0)};
    double mag[1];
    assert_int_equal(fwd(op, &p, 2, e, v2, &out, y, mag), REF_OK);
    assert_true(y[0] == 0.0 && mag[0] == 0.0);
    assert_int_equal(vjp(op, &p, 2, e, v2, &out, y, g, grads, NULL), REF_OK);
    /* empty slices: loss 0 */
    ref_shape e2[] = {SH(0, 3), SH(0, 3)};
    assert_int_equal(fwd(op, &p, 2, e2, v2, &out, y, mag), REF_OK);
    assert_true(y[0] == 0.0);
    /* the target's draw domain is nonnegative */
    ref_domain d;
    ref_default_domain(op, &p, 2, s, 1, &d);
    assert_int_equal(d.kind, REF_DOM_UNIT);
    ref_default_domain(op, &p, 2, s, 0, &d);
    assert_int_equal(d.kind, REF_DOM_NORMAL);
}

static void test_ce_errors(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("crossEntropy");
    ref_params p = ref_t_params(op);
    ref_shape sc[] = {SCALAR, SCALAR};
    expect_einval(op, &p, 2, sc, "class axis -1 is out of range for rank 0");
    ref_shape m[] = {SH(2, 3), SH(3, 2)};
    expect_einval(op, &p, 2, m, "crossEntropy inputs have shapes [2,3] and [3,2]");
    p.axis = 2;
    ref_shape ok[] = {SH(2, 3), SH(2, 3)};
    expect_einval(op, &p, 2, ok, "class axis 2 is out of range");
    expect_einval(op, &p, 1, ok, "crossEntropy takes 2 inputs");
}

/* ---- distill ----------------------------------------------------------------------------- */

static void test_distill_values(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("distill");
    assert_int_equal(op->input_kind[1], REF_IN_CONST);
    ref_params p = ref_t_params(op);
    assert_true(p.temperature == 1.0 && p.axis == -1);
    double s[] = {0.5, -1, 2, 1, 1, 0}, t[] = {1, 0, -1, 0.25, 3, -2}, y[1], mag[1];
    ref_shape sh[] = {SH(2, 3), SH(2, 3)}, out;
    const double *v[] = {s, t};
    const double temps[] = {1.0, 2.5};
    for (int k = 0; k < 2; k++) {
        double T = temps[k];
        p.temperature = T;
        assert_int_equal(fwd(op, &p, 2, sh, v, &out, y, mag), REF_OK);
        double kl = 0, ps[6], q[6];
        for (int r = 0; r < 2; r++) {
            double zs[3], zt[3];
            for (int c = 0; c < 3; c++)
                zs[c] = s[3 * r + c] / T, zt[c] = t[3 * r + c] / T;
            double ls = log_sum_exp(zs, 3, 1), lt = log_sum_exp(zt, 3, 1);
            for (int c = 0; c < 3; c++) {
                q[3 * r + c] = exp(zt[c] - lt);
                ps[3 * r + c] = exp(zs[c] - ls);
                kl += q[3 * r + c] * ((zt[c] - lt) - (zs[c] - ls));
            }
        }
        assert_close(y[0], T * T * kl / 2, 1e-14);
        assert_true(mag[0] > fabs(y[0]));
        double g[] = {-0.5}, ds[6], dm[6];
        double *grads[] = {ds, NULL}, *gm[] = {dm, NULL};
        assert_int_equal(vjp(op, &p, 2, sh, v, &out, y, g, grads, gm), REF_OK);
        for (int i = 0; i < 6; i++)
            assert_close(ds[i], T * (ps[i] - q[i]) * -0.5 / 2, 1e-14);
    }
    /* identical logits: zero loss, exactly zero gradient */
    const double *same[] = {s, s};
    p.temperature = 3;
    assert_int_equal(fwd(op, &p, 2, sh, same, &out, y, NULL), REF_OK);
    assert_true(fabs(y[0]) < 1e-15);
    double g[] = {1}, ds[6];
    double *grads[] = {ds, NULL}, *none[] = {NULL, NULL};
    assert_int_equal(vjp(op, &p, 2, sh, same, &out, y, g, grads, NULL), REF_OK);
    for (int i = 0; i < 6; i++)
        assert_true(ds[i] == 0.0);
    assert_int_equal(vjp(op, &p, 2, sh, same, &out, y, g, none, NULL), REF_OK);
    /* a teacher probability that underflows contributes exactly 0 (log-target form) */
    double s1[] = {0, 0}, t1[] = {0, -800}, y1[1];
    ref_shape sh1[] = {SH(2), SH(2)};
    const double *v1[] = {s1, t1};
    p.temperature = 1;
    assert_int_equal(fwd(op, &p, 2, sh1, v1, &out, y1, NULL), REF_OK);
    assert_close(y1[0], log(2.0), 1e-15);
    /* empty class axis: 0 */
    ref_shape e[] = {SH(3, 0), SH(3, 0)};
    assert_int_equal(fwd(op, &p, 2, e, v, &out, y, mag), REF_OK);
    assert_true(y[0] == 0.0);
    assert_int_equal(vjp(op, &p, 2, e, v, &out, y, g, grads, NULL), REF_OK);
}

static void test_distill_errors(void **state)
{
    (void)state;
    const ref_op *op = ref_t_op("distill");
    ref_params p = ref_t_params(op);
    ref_shape ok[] = {SH(2, 3), SH(2, 3)};
    const double bad_t[] = {0.0, -1.0, NAN, INFINITY};
    for (int i = 0; i < 4; i++) {
        p.temperature = bad_t[i];
        expect_einval(op, &p, 2, ok, "temperature must be finite and > 0");
    }
    p.temperature = 1;
    ref_shape m[] = {SH(2, 3), SH(2, 4)};
    expect_einval(op, &p, 2, m, "distill inputs have shapes");
    ref_shape sc[] = {SCALAR, SCALAR};
    expect_einval(op, &p, 2, sc, "out of range for rank 0");
}

/* ---- sampler sweep: every sampled case is valid and honours the request ------------------- */

static const char *const my_ops[] = {"hardMaskedSoftmax", "topKMask", "reduceMean", "reshape",
                                     "permute", "broadcast", "concat", "slice", "gather",
                                     "scatterAdd", "mseLoss", "crossEntropy", "distill"};

static void sweep_case(const ref_op *op, const ref_sample_req *req, uint64_t seed, int *drawn)
{
    ref_params p = ref_t_params(op);
    ref_rng r = {seed};
    int n = 0;
    ref_shape s[REF_MAX_INPUTS];
    memset(s, 0, sizeof s);
    if (op->sample(&r, req, &p, &n, s) != REF_OK)
        return;
    (*drawn)++;
    assert_true(n >= op->min_inputs && n <= op->max_inputs);
    if (req->rank >= 0)
        assert_int_equal(s[0].rank, req->rank);
    assert_true(ref_numel(&s[0]) <= req->max_elems);
    if (req->zero_dim && ref_numel(&s[0]) != 0)
        fail_msg("%s: a zero-size dimension was asked for (rank %d), got %lld elements",
                 op->name, req->rank, (long long)ref_numel(&s[0]));
    ref_shape out;
    ref_err e = {{0}};
    if (op->shape(&p, n, s, &out, &e) != REF_OK)
        fail_msg("%s sampled an invalid case: %s", op->name, e.msg);
    ref_tensor in[REF_MAX_INPUTS], gr[REF_MAX_INPUTS];
    double *gm[REF_MAX_INPUTS];
    for (int i = 0; i < n; i++) {
        ref_domain d;
        ref_default_domain(op, &p, n, s, i, &d);
        int64_t m = ref_numel(&s[i]);
        in[i].shape = gr[i].shape = s[i];
        in[i].v = calloc((size_t)m + 1, sizeof(double));
        gr[i].v = calloc((size_t)m + 1, sizeof(double));
        gm[i] = calloc((size_t)m + 1, sizeof(double));
        cc_draw_values(&d, cc_input_key(seed, i), m, in[i].v);
    }
    int64_t ny = ref_numel(&out);
    ref_tensor y = {out, calloc((size_t)ny + 1, sizeof(double))};
    ref_tensor g = {out, calloc((size_t)ny + 1, sizeof(double))};
    double *ym = calloc((size_t)ny + 1, sizeof(double));
    for (int64_t i = 0; i < ny; i++)
        g.v[i] = 1.0 - 0.25 * (double)(i % 7);
    assert_int_equal(ref_t_forward(op, &p, n, in, &y, NULL), REF_OK);
    assert_int_equal(ref_t_forward(op, &p, n, in, &y, ym), REF_OK);
    for (int64_t i = 0; i < ny; i++)
        assert_true(ym[i] >= 0 && isfinite(ym[i]));
    assert_int_equal(ref_t_vjp(op, &p, n, in, &y, &g, gr, gm), REF_OK);
    assert_int_equal(ref_t_vjp(op, &p, n, in, &y, &g, gr, NULL), REF_OK);
    for (int i = 0; i < n; i++)
        free(in[i].v), free(gr[i].v), free(gm[i]);
    free(y.v), free(g.v), free(ym);
}

static void test_sampler_sweep(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof my_ops / sizeof my_ops[0]; k++) {
        const ref_op *op = ref_t_op(my_ops[k]);
        int drawn = 0;
        for (int rank = -1; rank <= 5; rank++)
            for (int zero = 0; zero <= 1; zero++)
                for (uint64_t seed = 1; seed <= 40; seed++) {
                    ref_sample_req req = {rank, zero, (seed % 3) ? 64 : 6};
                    sweep_case(op, &req, seed * 7919 + (uint64_t)(rank + 1) * 31 + zero, &drawn);
                }
        if (drawn < 200)
            fail_msg("%s: only %d sampled cases", op->name, drawn);
    }
}

static void test_registry(void **state)
{
    (void)state;
    const char *pairs[][2] = {{"hardMaskedSoftmax", "hard_masked_softmax"},
                              {"topKMask", "top_k_mask"},
                              {"reduceMean", "reduce_mean"},
                              {"scatterAdd", "scatter_add"},
                              {"mseLoss", "mse_loss"},
                              {"crossEntropy", "cross_entropy"},
                              {"distill", "distill"}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        const ref_op *a = ref_t_op(pairs[i][0]), *b = ref_t_op(pairs[i][1]);
        assert_ptr_equal(a, b);
    }
    for (size_t k = 0; k < sizeof my_ops / sizeof my_ops[0]; k++) {
        const ref_op *op = ref_t_op(my_ops[k]);
        assert_non_null(op->vjp);
        assert_true(op->c_fwd > 0 && op->c_vjp > 0);
    }
}

/* Shapes and whole numbers as printf would print them ("[%lld,%lld]", %lld, %llu), cut like
 * snprintf cuts them: the shape checks format their operands on every call, without printf. */
static void test_shape_text_as_printf(void **state)
{
    (void)state;
    const int64_t values[] = {0, 1, -1, 9, 10, 99, 100, 12345, -987654321, INT64_MAX, INT64_MIN};
    const size_t nv = sizeof values / sizeof values[0];
    for (size_t k = 0; k < nv; k++) {
        char want[64], digits[REF_DECIMAL_MAX];
        snprintf(want, sizeof want, "%lld", (long long)values[k]);
        assert_string_equal(ref_decimal_i64(digits, values[k]), want);
        snprintf(want, sizeof want, "%llu", (unsigned long long)values[k]);
        assert_string_equal(ref_decimal_u64(digits, (uint64_t)values[k]), want);
    }
    for (int rank = 0; rank <= REF_MAX_RANK; rank++)
        for (size_t k = 0; k < nv; k++) {
            ref_shape s = {rank, {0}};
            for (int a = 0; a < rank; a++)
                s.dim[a] = values[(k + (size_t)a) % nv];
            char want[512] = "[";
            for (int a = 0; a < rank; a++)
                snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", a ? "," : "",
                         (long long)s.dim[a]);
            strcat(want, "]");
            for (size_t cap = 0; cap <= strlen(want) + 1; cap++) { /* every cut, and none */
                char got[512], cut[512];
                memset(got, 'x', sizeof got);
                snprintf(cut, cap ? cap : 1, "%s", want);
                ref_shape_fmt(&s, got, cap);
                if (cap)
                    assert_string_equal(got, cut);
                else
                    assert_int_equal(got[0], 'x'); /* nothing written */
            }
        }
}

/* The vocabulary: TorchLean's 47 BackendOps plus capcheck's 9 additions, which no ContractClaim
 * can name (evidence_out.c asks ref_is_backend_op). */
static void test_backend_ops_of_the_vocabulary(void **state)
{
    (void)state;
    int backend = 0;
    for (int i = 0; i < ref_op_count(); i++)
        backend += ref_is_backend_op(ref_op_at(i)->name);
    assert_int_equal(ref_op_count(), 56);
    assert_int_equal(backend, 47);
    assert_false(ref_is_backend_op("scaledMatmul"));
    assert_true(ref_is_backend_op("softmax"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backend_ops_of_the_vocabulary),
        cmocka_unit_test(test_shape_text_as_printf),
        cmocka_unit_test(test_hms_partial_row),
        cmocka_unit_test(test_hms_fully_blocked_row),
        cmocka_unit_test(test_hms_vjp_blocked_zero),
        cmocka_unit_test(test_hms_scalar_and_empty),
        cmocka_unit_test(test_hms_nonfinite_allowed),
        cmocka_unit_test(test_hms_errors),
        cmocka_unit_test(test_softmax_existing_edges),
        cmocka_unit_test(test_reduce_sum_edges),
        cmocka_unit_test(test_topk_ties_lower_index),
        cmocka_unit_test(test_topk_k_edges),
        cmocka_unit_test(test_topk_contract),
        cmocka_unit_test(test_reduce_mean),
        cmocka_unit_test(test_reshape),
        cmocka_unit_test(test_permute),
        cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_concat),
        cmocka_unit_test(test_slice),
        cmocka_unit_test(test_gather_repeats),
        cmocka_unit_test(test_gather_select_and_domain),
        cmocka_unit_test(test_gather_errors),
        cmocka_unit_test(test_scatter_left_fold),
        cmocka_unit_test(test_scatter_errors),
        cmocka_unit_test(test_mse),
        cmocka_unit_test(test_ce_values),
        cmocka_unit_test(test_ce_unnormalized_and_empty),
        cmocka_unit_test(test_ce_errors),
        cmocka_unit_test(test_distill_values),
        cmocka_unit_test(test_distill_errors),
        cmocka_unit_test(test_sampler_sweep),
        cmocka_unit_test(test_registry),
    };
    return cmocka_run_group_tests_name("reference_edges_shape_softmax_reduce_loss", tests, NULL,
                                       NULL);
}
