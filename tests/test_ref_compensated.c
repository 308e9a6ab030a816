/* The compensated reference against the simple one it replaced. The reference's sums (ref_sum,
 * reference/ref_families.h) are compensated; with ref_params' plain_sums each is the plain left
 * fold from 0 that it carries, the simple float64 reference. A correct kernel errs by at most
 * c_op 2^-53 m_i (the op's error model in float64), and the simple reference is one: on every
 * element of every output and gradient of every case of the smoke suite, the edge files and
 * every 8th nightly case, the two must agree within that bound of the simple one (plus
 * float64's smallest normal), non-finite values exactly (NaN equals NaN). Prints the largest
 * difference in units of that bound, per op; asserts that some ops differ at all (the sums are
 * compensated) and none beyond it. Before it, ref_sum itself on sums whose answer is known. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "full_ref_util.h"
#include "harness/run/sample.h"
#include "test_util.h"

typedef struct {
    double worst[128]; /* per op (registry index): the largest difference over the bound */
    long cases, differing;
} tally;

/* The largest |a - b| / (c 2^-53 m + 2^-1022) over n elements; +Inf where non-finite values
 * differ in kind. */
static double largest_ratio(const double *a, const double *b, const double *m, int64_t n,
                            double c, int64_t *at)
{
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double r;
        if (!isfinite(a[i]) || !isfinite(b[i]))
            r = (isnan(a[i]) && isnan(b[i])) || a[i] == b[i] ? 0.0 : INFINITY;
        else
            r = fabs(a[i] - b[i]) / (c * 0x1p-53 * m[i] + 0x1p-1022);
        if (!(r <= worst)) {
            worst = r;
            *at = i;
        }
    }
    return worst;
}

static void check_case(const cc_case *c, tally *t)
{
    cc_inputs in;
    char msg[256], line[CC_CASE_LINE_MAX];
    if (cc_materialize(c, &in, msg, sizeof msg))
        return;
    cc_case_print(c, line, sizeof line);
    ref_params compensated = c->params, plain = c->params;
    plain.plain_sums = 1;
    full_ref a, b;
    if (full_run(c, &in, &compensated, &a) == 0 && full_run(c, &in, &plain, &b) == 0) {
        int k = 0;
        while (ref_op_at(k) != c->op)
            k++;
        int64_t at = -1, ny = ref_numel(&in.out_shape);
        double r = largest_ratio(a.y.v, b.y.v, b.mag.worst, ny, c->op->c_fwd, &at);
        if (r > 1.0)
            fail_msg("y[%lld]: compensated %a, simple %a, %.3g times the simple reference's "
                     "bound: %s", (long long)at, a.y.v[at], b.y.v[at], r, line);
        int differs = memcmp(a.y.v, b.y.v, sizeof(double) * (size_t)ny) != 0;
        for (int i = 0; i < c->n_in; i++) {
            if (!a.grad[i].v)
                continue;
            int64_t n = ref_numel(&c->shape[i]);
            double rg = largest_ratio(a.grad[i].v, b.grad[i].v, b.gmag[i].worst, n,
                                      c->op->c_vjp, &at);
            if (rg > 1.0)
                fail_msg("gradient %d [%lld]: compensated %a, simple %a, %.3g times the simple "
                         "reference's bound: %s",
                         i, (long long)at, a.grad[i].v[at], b.grad[i].v[at], rg, line);
            differs |= memcmp(a.grad[i].v, b.grad[i].v, sizeof(double) * (size_t)n) != 0;
            r = rg > r ? rg : r;
        }
        if (k < 128 && r > t->worst[k])
            t->worst[k] = r;
        t->cases++;
        t->differing += differs;
    }
    full_free(&a);
    full_free(&b);
    cc_inputs_free(&in);
}

static void check_file(const char *path, size_t every, tally *t)
{
    cc_case_list l = {0};
    assert_int_equal(cc_t_load_cases(path, &l), 0);
    for (size_t k = 0; k < l.n; k += every)
        if (cc_reference_work(&l.v[k]) <= 2e7)
            check_case(&l.v[k], t);
    cc_case_list_free(&l);
}

static void test_compensated_within_the_simple_reference_bound(void **state)
{
    (void)state;
    tally t;
    memset(&t, 0, sizeof t);
    check_file(CAPCHECK_SOURCE_DIR "/cases/smoke.cases", 1, &t);
    check_file(CAPCHECK_SOURCE_DIR "/cases/edge/shapes.cases", 1, &t);
    check_file(CAPCHECK_SOURCE_DIR "/cases/edge/params.cases", 1, &t);
    check_file(CAPCHECK_SOURCE_DIR "/cases/nightly.cases", 8, &t);
    printf("%ld cases, %ld of them with a value the compensated sums changed; the largest "
           "difference, in units of the simple reference's bound c_op 2^-53 m_i:\n",
           t.cases, t.differing);
    int ops_differing = 0;
    for (int k = 0; k < ref_op_count() && k < 128; k++)
        if (t.worst[k] > 0) {
            printf("  %-14s %.3g\n", ref_op_at(k)->name, t.worst[k]);
            ops_differing++;
        }
    assert_true(t.cases > 10000);
    assert_true(ops_differing >= 8); /* reductions, softmax, losses, norms, matmul: compensated */
}

/* reduceSum of x (n values) under plain_sums `plain`: its value and three magnitudes. */
static double reduce_sum(const double *x, int64_t n, int plain, double mag[3])
{
    const ref_op *op = ref_op_find("reduceSum");
    ref_params p;
    memset(&p, 0, sizeof p);
    p.plain_sums = plain;
    double y = 0.0, w = 0.0, d = 0.0, pr = 0.0;
    ref_tensor in = {{1, {n}}, (double *)x}, out = {{0, {0}}, &y};
    ref_mag m = {&w, &d, &pr};
    assert_int_equal(op->forward(&p, 1, &in, &out, &m), REF_OK);
    mag[0] = w, mag[1] = d, mag[2] = pr;
    return y;
}

/* The compensated sums (ref_sum, through the ops that use it: the library's own copies of its
 * inline code) on sums a plain fold gets wrong, a dot product whose products' remainders
 * matter, non-finite terms, and ref_sum_prob's two forms (ref_families.c's formula, written
 * out). */
static void test_ref_sum(void **state)
{
    (void)state;
    double mag[3];
    double cancel[] = {1e16, 1.0, -1e16, 0x1p-30};
    assert_true(reduce_sum(cancel, 4, 1, mag) == 0x1p-30); /* the plain fold lost the 1 */
    assert_true(reduce_sum(cancel, 4, 0, mag) == 1.0 + 0x1p-30); /* compensated: exact */
    assert_true(mag[0] == 4.0 * (2e16 + 1.0 + 0x1p-30)); /* m = n sum|x| */
    /* (1 + 2^-30)^2 - (1 + 2^-29): 2^-60, which the rounded product loses */
    const ref_op *mm = ref_op_find("matmul");
    ref_params p;
    memset(&p, 0, sizeof p);
    double a[2] = {1.0 + 0x1p-30, -(1.0 + 0x1p-29)}, b[2] = {1.0 + 0x1p-30, 1.0}, y = -1.0;
    ref_tensor mm_in[2] = {{{1, {2}}, a}, {{1, {2}}, b}}, mm_out = {{0, {0}}, &y};
    assert_int_equal(mm->forward(&p, 2, mm_in, &mm_out, NULL), REF_OK);
    assert_true(y == 0x1p-60);
    p.plain_sums = 1;
    assert_int_equal(mm->forward(&p, 2, mm_in, &mm_out, NULL), REF_OK);
    assert_true(y == 0.0);
    /* a term that is not finite: the plain fold's value (Inf, NaN), as before */
    double inf[] = {1.0, INFINITY, 2.0, -INFINITY};
    assert_true(reduce_sum(inf, 3, 0, mag) == INFINITY);
    assert_true(isnan(reduce_sum(inf, 4, 0, mag)));
    /* the probabilistic magnitude: terms of one sign keep sqrt(n) sum|t| (the exchangeable
     * form is no smaller there), one term is itself */
    double *x = malloc(sizeof(double) * 4096);
    assert_non_null(x);
    double abs_sum = 0.0;
    for (int k = 0; k < 4096; k++)
        abs_sum += x[k] = 1.0 + k % 7;
    reduce_sum(x, 4096, 0, mag);
    assert_true(mag[2] == 64.0 * abs_sum);
    double one = -3.0;
    reduce_sum(&one, 1, 0, mag);
    assert_true(mag[2] == 3.0);
    /* 4096 terms +-1 alternating: S = 0, sigma^2 = 1, R = 1 */
    for (int k = 0; k < 4096; k++)
        x[k] = k % 2 ? -1.0 : 1.0;
    reduce_sum(x, 4096, 0, mag);
    double n = 4096.0, L = log(2.0 * (n - 1.0) / 1e-9);
    double want = sqrt((n + 1.0) * 0.0 + 4.0 * L * n * (n + 1.0) * 1.0 +
                       16.0 / 9.0 * L * L * 1.0 * n + n);
    assert_true(mag[2] == want);
    assert_true(want < 64.0 * 4096.0 / 5.0); /* five times the any-order form's power */
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref_sum),
        cmocka_unit_test(test_compensated_within_the_simple_reference_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
