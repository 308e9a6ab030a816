/* The sampled forms (ref_op.forward_at, vjp_at) and the reference on threads
 * (reference/ref_parallel.h) against the serial full reference: on every element of every case
 * of the smoke suite and the edge files and every 8th nightly case of the ops that have sampled
 * forms (cases/edge/shapes.cases holds their rarer geometries: broadcast batches, 1-D operands,
 * groups, dilation 0, masks, every fftFno variant), the values and all three magnitude planes
 * (worst, dtype, prob: reference/ref.h's ref_mag, completed as the runner completes them) are
 * the same bits
 * (NaN equals NaN: its sign is not a result). Every case it runs is a corpus line, so
 * scripts/coverage counts its reach into reference/ twice: beside the reference's own tests, and
 * in the corpus pass (the sampled forms and threads are how a run evaluates those lines). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/case/materialize.h"
#include "harness/run/sample.h"
#include "full_ref_util.h"
#include "test_util.h"

static int same_bits(const double *a, const double *b, int64_t n, int64_t *where)
{
    for (int64_t i = 0; i < n; i++)
        if (!(isnan(a[i]) && isnan(b[i])) && memcmp(&a[i], &b[i], sizeof(double)) != 0) {
            *where = i;
            return 0;
        }
    return 1;
}

static void expect_same(const char *what, const char *line, const double *a, const double *b,
                        int64_t n)
{
    int64_t at;
    if (!same_bits(a, b, n, &at))
        fail_msg("%s differs at flat element %lld (%a against %a): %s", what, (long long)at,
                 a[at], b[at], line);
}

/* The three planes of two magnitudes (of n elements each). */
static void expect_same_mags(const char *what, const char *line, const ref_mag *a,
                             const ref_mag *b, int64_t n)
{
    static const char *const plane[3] = {"worst", "dtype", "prob"};
    const double *pa[3] = {a->worst, a->dtype, a->prob}, *pb[3] = {b->worst, b->dtype, b->prob};
    for (int k = 0; k < 3; k++) {
        char w[96];
        snprintf(w, sizeof w, "%s (%s)", what, plane[k]);
        expect_same(w, line, pa[k], pb[k], n);
    }
}

/* Picks of every one of n elements, their planes prefilled as the runner's sample_picks
 * prefills them. */
static ref_picks all_picks(int64_t n)
{
    int64_t *all = malloc(sizeof(int64_t) * (size_t)(n + 1));
    ref_picks pk = {n, all, malloc(sizeof(double) * (size_t)(n + 1)), {NULL, NULL, NULL}};
    assert_non_null(all);
    assert_non_null(pk.v);
    assert_int_equal(ref_mag_alloc(n, &pk.mag), 0);
    for (int64_t k = 0; k < n; k++)
        all[k] = k;
    return pk;
}

static void picks_free(ref_picks *pk)
{
    free((int64_t *)pk->at), free(pk->v), ref_mag_free(&pk->mag);
}

/* forward_at and vjp_at at every element, and 3 threads, against the serial full reference. */
static long check_case(const cc_case *c)
{
    const ref_op *op = c->op;
    if (!op->forward_at || !op->vjp)
        return 0;
    cc_inputs in;
    char msg[256], line[CC_CASE_LINE_MAX];
    if (cc_materialize(c, &in, msg, sizeof msg))
        return 0;
    cc_case_print(c, line, sizeof line);
    double work = cc_reference_work(c); /* what a run weighs before it samples */
    if (!(work >= 0 && isfinite(work)))
        fail_msg("the reference work of %s is %g, not a count of multiply-adds", line, work);
    full_ref serial, threaded;
    ref_params one = c->params, three = c->params;
    one.threads = 1;
    three.threads = 3;
    int ok = full_run(c, &in, &one, &serial) == 0;
    if (ok && full_run(c, &in, &three, &threaded) == 0) {
        int64_t ny = ref_numel(&in.out_shape);
        expect_same("y on 3 threads", line, serial.y.v, threaded.y.v, ny);
        expect_same_mags("m(y) on 3 threads", line, &serial.mag, &threaded.mag, ny);
        ref_picks pk = all_picks(ny);
        assert_int_equal(op->forward_at(&c->params, c->n_in, in.ref_in, &pk), REF_OK);
        ref_mag_complete(&pk.mag, ny);
        expect_same("forward_at", line, serial.y.v, pk.v, ny);
        expect_same_mags("forward_at's magnitude", line, &serial.mag, &pk.mag, ny);
        picks_free(&pk);
        ref_picks gpk[REF_MAX_INPUTS];
        memset(gpk, 0, sizeof gpk);
        for (int i = 0; i < c->n_in; i++) {
            if (!serial.grad[i].v)
                continue;
            int64_t n = ref_numel(&c->shape[i]);
            expect_same("a gradient on 3 threads", line, serial.grad[i].v, threaded.grad[i].v, n);
            expect_same_mags("a gradient magnitude on 3 threads", line, &serial.gmag[i],
                             &threaded.gmag[i], n);
            gpk[i] = all_picks(n);
        }
        assert_int_equal(op->vjp_at(&c->params, c->n_in, in.ref_in, &in.g, gpk), REF_OK);
        for (int i = 0; i < c->n_in; i++) {
            if (!gpk[i].at)
                continue;
            char what[64];
            snprintf(what, sizeof what, "vjp_at of input %d", i);
            ref_mag_complete(&gpk[i].mag, gpk[i].count);
            expect_same(what, line, serial.grad[i].v, gpk[i].v, gpk[i].count);
            expect_same_mags(what, line, &serial.gmag[i], &gpk[i].mag, gpk[i].count);
            picks_free(&gpk[i]);
        }
        full_free(&threaded);
    } else if (ok) {
        fail_msg("the threaded reference refused a case the serial one ran: %s", line);
    }
    full_free(&serial);
    cc_inputs_free(&in);
    return ok;
}

static void check_file(const char *path, size_t every)
{
    cc_case_list l = {0};
    assert_int_equal(cc_t_load_cases(path, &l), 0);
    long checked = 0;
    for (size_t k = 0; k < l.n; k++)
        if (l.v[k].op->forward_at && (k % every == 0))
            checked += check_case(&l.v[k]);
    fprintf(stderr, "%s: %ld cases of the sampled ops, sampled forms and 3 threads bit-identical\n",
            path, checked);
    assert_true(checked > 0);
    cc_case_list_free(&l);
}

static void test_sampled_forms_and_threads_equal_the_serial_reference(void **state)
{
    (void)state;
    check_file(CAPCHECK_SOURCE_DIR "/cases/smoke.cases", 1);
    check_file(CAPCHECK_SOURCE_DIR "/cases/edge/shapes.cases", 1);
    check_file(CAPCHECK_SOURCE_DIR "/cases/edge/params.cases", 1);
    check_file(CAPCHECK_SOURCE_DIR "/cases/nightly.cases", 8);
    check_file(CAPCHECK_SOURCE_DIR "/cases/edge/extents.cases", 32); /* the coverage build runs it */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sampled_forms_and_threads_equal_the_serial_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
