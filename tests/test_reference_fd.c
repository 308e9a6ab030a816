/* Every reference VJP against central finite differences of its own forward, in float64:
 * for random directions u (per differentiable input) and cotangent v,
 *     <v, (f(x + h u) - f(x - h u)) / 2h>  ==  <J^T v, u>
 * within a relative tolerance that covers the O(h^2) truncation and O(eps/h) rounding.
 * Each op is exercised on >= 5 sampled shapes: rank 1, rank 4, a zero-size dimension where the
 * op allows one, and the op's own choices. Kinks are avoided by the op's domain (exact tests of
 * the subgradient conventions live in test_reference_edges.c). */
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

#define FD_H 1e-6
#define FD_RTOL 2e-6
#define MAX_ELEMS 48
#define MIN_SHAPES 5

typedef struct {
    const ref_op *op;
    ref_params p;
    int n;
    ref_shape shape[REF_MAX_INPUTS];
    ref_tensor in[REF_MAX_INPUTS];
    ref_shape out_shape;
} fd_case;

static double *alloc_doubles(int64_t n)
{
    double *v = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    assert_non_null(v);
    return v;
}

static int input_is_differentiable(const ref_op *op, int i)
{
    int k = i < op->max_inputs ? i : op->max_inputs - 1;
    if (k >= REF_MAX_INPUTS)
        k = REF_MAX_INPUTS - 1;
    return op->input_kind[k] == REF_IN_DATA;
}

/* Draw a case for request `req`; returns 0 when the op cannot satisfy it. */
static int make_case(const ref_op *op, const ref_sample_req *req, uint64_t seed, fd_case *c)
{
    memset(c, 0, sizeof *c);
    c->op = op;
    c->p = ref_t_params(op);
    ref_rng r = {seed};
    if (op->sample(&r, req, &c->p, &c->n, c->shape) != REF_OK)
        return 0;
    ref_err e = {{0}};
    ref_status st = op->shape(&c->p, c->n, c->shape, &c->out_shape, &e);
    if (st != REF_OK)
        fail_msg("%s: its own sampler drew an invalid case: %s", op->name, e.msg);
    for (int i = 0; i < c->n; i++) {
        ref_domain d;
        ref_default_domain(op, &c->p, c->n, c->shape, i, &d);
        c->in[i].shape = c->shape[i];
        c->in[i].v = alloc_doubles(ref_numel(&c->shape[i]));
        cc_draw_values(&d, cc_input_key(seed, i), ref_numel(&c->shape[i]), c->in[i].v);
    }
    return 1;
}

static void free_case(fd_case *c)
{
    for (int i = 0; i < c->n; i++)
        free(c->in[i].v);
}

static void forward(const fd_case *c, const ref_tensor *in, ref_tensor *out, double *mag)
{
    out->shape = c->out_shape;
    ref_status st = ref_t_forward(c->op, &c->p, c->n, in, out, mag);
    if (st != REF_OK)
        fail_msg("%s forward failed (status %d)", c->op->name, (int)st);
}

/* The three magnitude planes of n values where the value is finite: worst, dtype share and prob
 * are finite and >= 0, and the probabilistic form never exceeds the worst case (sqrt(n) <= n). */
static void check_mags(const char *op, const char *what, const double *v, ref_mag *mag,
                       int64_t n)
{
    ref_mag_complete(mag, n);
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(v[i]))
            continue;
        double w = mag->worst[i], d = mag->dtype[i], p = mag->prob[i];
        if (!(w >= 0 && isfinite(w) && d >= 0 && isfinite(d) && p >= 0 &&
              p <= w * (1 + 1e-12) + 1e-300))
            fail_msg("%s %s[%lld]: magnitudes worst %g, dtype %g, prob %g", op, what,
                     (long long)i, w, d, p);
    }
}

static void check_case(fd_case *c, uint64_t seed, int *checked_inputs)
{
    const ref_op *op = c->op;
    int64_t ny = ref_numel(&c->out_shape);
    ref_tensor y = {c->out_shape, alloc_doubles(ny)};
    ref_mag ymag;
    assert_int_equal(ref_mag_alloc(ny, &ymag), 0);
    y.shape = c->out_shape;
    if (op->forward(&c->p, c->n, c->in, &y, &ymag) != REF_OK)
        fail_msg("%s forward failed", op->name);
    check_mags(op->name, "y", y.v, &ymag, ny);

    ref_tensor v = {c->out_shape, alloc_doubles(ny)};
    ref_domain normal = {REF_DOM_NORMAL, 0, 0, 0, {0, 0}, 0};
    cc_draw_values(&normal, cc_input_key(seed ^ 0x5eedULL, 99), ny, v.v);

    ref_tensor grad[REF_MAX_INPUTS];
    ref_mag gmag[REF_MAX_INPUTS];
    memset(gmag, 0, sizeof gmag);
    for (int i = 0; i < c->n; i++) {
        grad[i].shape = c->shape[i];
        grad[i].v = input_is_differentiable(op, i) ? alloc_doubles(ref_numel(&c->shape[i])) : NULL;
        if (grad[i].v)
            assert_int_equal(ref_mag_alloc(ref_numel(&c->shape[i]), &gmag[i]), 0);
    }
    ref_status st = op->vjp(&c->p, c->n, c->in, &y, &v, grad, gmag);
    assert_int_equal(st, REF_OK);
    for (int i = 0; i < c->n; i++)
        if (grad[i].v)
            check_mags(op->name, "grad", grad[i].v, &gmag[i], ref_numel(&c->shape[i]));

    char shapes[256] = "";
    for (int i = 0; i < c->n; i++) {
        char s[64];
        ref_shape_fmt(&c->shape[i], s, sizeof s);
        strncat(shapes, s, sizeof shapes - strlen(shapes) - 2);
        strcat(shapes, " ");
    }

    for (int k = 0; k < c->n; k++) {
        if (!grad[k].v)
            continue;
        int64_t nk = ref_numel(&c->shape[k]);
        double *u = alloc_doubles(nk);
        cc_draw_values(&normal, cc_input_key(seed ^ 0xd1ecULL, k), nk, u);
        ref_tensor shifted[REF_MAX_INPUTS];
        memcpy(shifted, c->in, sizeof(ref_tensor) * (size_t)c->n);
        double *xp = alloc_doubles(nk), *xm = alloc_doubles(nk);
        for (int64_t j = 0; j < nk; j++) {
            xp[j] = c->in[k].v[j] + FD_H * u[j];
            xm[j] = c->in[k].v[j] - FD_H * u[j];
        }
        ref_tensor yp = {c->out_shape, alloc_doubles(ny)}, ym = {c->out_shape, alloc_doubles(ny)};
        shifted[k].v = xp;
        forward(c, shifted, &yp, NULL);
        shifted[k].v = xm;
        forward(c, shifted, &ym, NULL);
        double lhs = 0, lhs_abs = 0, rhs = 0, rhs_abs = 0;
        for (int64_t i = 0; i < ny; i++) {
            double jv = (yp.v[i] - ym.v[i]) / (2 * FD_H);
            lhs += v.v[i] * jv;
            lhs_abs += fabs(v.v[i] * jv);
        }
        for (int64_t j = 0; j < nk; j++) {
            rhs += grad[k].v[j] * u[j];
            rhs_abs += fabs(grad[k].v[j] * u[j]);
            assert_true(gmag[k].worst[j] >= 0 && isfinite(gmag[k].worst[j]));
        }
        double tol = FD_RTOL * (lhs_abs + rhs_abs) + 1e-9;
        if (!(fabs(lhs - rhs) <= tol))
            fail_msg("%s VJP of input %d (%s) disagrees with finite differences: <v,Ju> = %.12g, "
                     "<J^T v,u> = %.12g, |diff| = %.3g > tol %.3g; shapes %sseed %llu",
                     op->name, k, op->input_names[k < op->max_inputs ? k : op->max_inputs - 1],
                     lhs, rhs, fabs(lhs - rhs), tol, shapes, (unsigned long long)seed);
        (*checked_inputs)++;
        free(u), free(xp), free(xm), free(yp.v), free(ym.v);
    }
    for (int i = 0; i < c->n; i++)
        free(grad[i].v), ref_mag_free(&gmag[i]);
    free(y.v), ref_mag_free(&ymag), free(v.v);
}

static void test_op_fd(void **state)
{
    const ref_op *op = *state;
    assert_non_null(op->vjp);
    const ref_sample_req reqs[] = {
        {1, 0, MAX_ELEMS}, {4, 0, MAX_ELEMS}, {-1, 1, MAX_ELEMS}, {2, 0, MAX_ELEMS},
        {3, 0, MAX_ELEMS}, {-1, 0, MAX_ELEMS}, {-1, 0, 8},       {-1, 0, MAX_ELEMS},
        {2, 0, 12},        {3, 0, MAX_ELEMS}};
    int shapes = 0, checked = 0;
    for (size_t q = 0; q < sizeof reqs / sizeof reqs[0]; q++) {
        for (uint64_t attempt = 0; attempt < 4; attempt++) {
            uint64_t seed = 0x1234567ULL + 7919ULL * q + 104729ULL * attempt;
            fd_case c;
            if (!make_case(op, &reqs[q], seed, &c))
                continue;
            check_case(&c, seed, &checked);
            free_case(&c);
            shapes++;
            break;
        }
    }
    if (shapes < MIN_SHAPES)
        fail_msg("%s: only %d sampled shapes (need %d)", op->name, shapes, MIN_SHAPES);
    assert_true(checked > 0);
}

int main(void)
{
    int n = ref_op_count(), k = 0;
    struct CMUnitTest *tests = calloc((size_t)n, sizeof *tests);
    for (int i = 0; i < n; i++) {
        const ref_op *op = ref_op_at(i);
        if (!op->requires_vjp)
            continue;
        tests[k].name = op->name;
        tests[k].test_func = test_op_fd;
        tests[k].initial_state = (void *)op;
        k++;
    }
    int rc = _cmocka_run_group_tests("reference_vjp_vs_finite_differences", tests, (size_t)k, NULL,
                                     NULL);
    free(tests);
    return rc;
}
