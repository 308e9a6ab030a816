/* The OpenBLAS provider: cases/openblas.cases (matmul, scaledMatmul, linear, conv,
 * convTranspose x f32/f64 x every layout class, zero-size dimensions included) passes under the
 * reference's error model with zero failures; f16/bf16 report unsupported, not a failure; the
 * provider states OpenBLAS's configuration and its thread count; and a wrapper that ignores the
 * input strides (a classic BLAS-binding bug) is caught. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/case/case.h"
#include "harness/run/runner.h"
#include "providers/openblas/openblas_provider.h"
#include "test_util.h"

static cc_case_list cases;
static const cc_provider *ob;

static const char *const OPS[] = {"matmul", "scaledMatmul", "linear", "conv", "convTranspose"};
#define N_OPS (sizeof OPS / sizeof OPS[0])

static int setup(void **state)
{
    (void)state;
    char msg[256];
    ob = cc_openblas_provider(msg, sizeof msg);
    if (!ob || ob->init(ob->ctx, CC_CPU, msg, sizeof msg) != CC_OK) {
        fprintf(stderr, "openblas provider: %s\n", msg);
        return -1;
    }
    return cc_t_load_cases("cases/openblas.cases", &cases);
}

static int teardown(void **state)
{
    (void)state;
    cc_case_list_free(&cases);
    return 0;
}

static int has_zero_dim(const cc_case *c)
{
    for (int i = 0; i < c->n_in; i++)
        for (int a = 0; a < c->shape[i].rank; a++)
            if (c->shape[i].dim[a] == 0)
                return 1;
    return 0;
}

/* The case file covers what the suite claims: every op x dtype x layout, and empty extents. */
static void test_case_file_covers_ops_dtypes_layouts_and_zero_dims(void **state)
{
    (void)state;
    for (size_t o = 0; o < N_OPS; o++) {
        int seen[2][CC_LAYOUT_COUNT] = {{0}};
        int zero = 0;
        for (size_t i = 0; i < cases.n; i++) {
            const cc_case *c = &cases.v[i];
            if (strcmp(c->op->name, OPS[o]) != 0)
                continue;
            assert_true(c->dtype == CC_F32 || c->dtype == CC_F64);
            seen[c->dtype == CC_F64][c->layout]++;
            zero += has_zero_dim(c);
        }
        for (int d = 0; d < 2; d++)
            for (int l = 0; l <= CC_LAYOUT_BCAST; l++) /* the four classes of the case file */
                if (!seen[d][l])
                    fail_msg("%s has no %s case with layout %s", OPS[o], d ? "f64" : "f32",
                             cc_layout_name((cc_layout)l));
        if (!zero)
            fail_msg("%s has no case with a zero-size dimension", OPS[o]);
    }
}

static void test_cases_pass_on_openblas(void **state)
{
    (void)state;
    cc_t_tally t = cc_t_run_all(ob, &cases, NULL);
    printf("cases/openblas.cases on openblas: %ld cases, %ld passed\n", t.cases, t.passed);
    assert_true(t.cases >= 300);
    if (t.not_passed)
        fail_msg("%ld cases did not pass on openblas; first: %s", t.not_passed, t.first_failure);
}

static cc_result run_line(const cc_provider *p, const char *line)
{
    cc_result r;
    cc_t_run_line(p, line, &r);
    return r;
}

static void test_half_precision_is_unsupported(void **state)
{
    (void)state;
    static const char *const lines[] = {
        "matmul dtype=f16 in=[3,4],[4,2] seed=1",
        "scaledMatmul dtype=bf16 in=[3,4],[4,2] alpha=2 seed=2",
        "linear dtype=f16 in=[2,5],[3,5],[3] seed=3",
        "conv dtype=f16 in=[2,6],[2,2,3],[2] kernel=[3] seed=4",
        "convTranspose dtype=bf16 in=[2,6],[2,2,3],[2] kernel=[3] seed=5",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        cc_result r = run_line(ob, lines[i]);
        if (r.status != CC_RES_UNSUPPORTED)
            fail_msg("%s -> %s (%s), want unsupported", lines[i], cc_result_status_name(r.status),
                     r.message);
        assert_non_null(strstr(r.message, "f32 and f64 only"));
    }
    /* an op OpenBLAS does not implement, and a device it does not run on */
    cc_result r = run_line(ob, "softmax dtype=f32 in=[3,4] axis=1 seed=6");
    assert_int_equal(r.status, CC_RES_UNSUPPORTED);
    char msg[256] = "";
    assert_int_equal(ob->init(ob->ctx, CC_CUDA, msg, sizeof msg), CC_UNSUPPORTED);
    assert_non_null(strstr(msg, "CPU only"));
    assert_string_equal(ob->vjp_mode(ob->ctx, "conv"), "backendVJP");
    assert_null(ob->vjp_mode(ob->ctx, "softmax"));
}

static void test_describe_states_config_and_threads(void **state)
{
    (void)state;
    char d[512] = "";
    ob->describe(ob->ctx, d, sizeof d);
    printf("describe: %s\n", d);
    assert_true(strncmp(d, "OpenBLAS ", 9) == 0);
    assert_non_null(strstr(d, "; threads 1"));
    assert_non_null(strstr(d, "provider external"));
}

/* ---- a planted bug: the binding that treats every input as dense ------------------------- */

static cc_status dense_strides_fwd(void *ctx, const cc_call *call, cc_view *out, char *msg,
                                   size_t len)
{
    (void)ctx;
    cc_view in[REF_MAX_INPUTS];
    cc_call c = *call;
    for (int i = 0; i < call->n_in; i++) {
        in[i] = call->in[i];
        int bcast = 0; /* a broadcast buffer is smaller than dense: leave it alone */
        for (int a = 0; a < in[i].rank; a++)
            bcast |= in[i].strides[a] == 0 && in[i].shape[a] > 1;
        for (int a = in[i].rank - 1, s = 1; a >= 0 && !bcast; a--) {
            in[i].strides[a] = s;
            s *= (int)in[i].shape[a];
        }
    }
    c.in = in;
    return ob->forward(ob->ctx, &c, out, msg, len);
}

static void test_ignored_strides_are_caught(void **state)
{
    (void)state;
    cc_provider bad = *ob;
    bad.name = "openblas-ignores-strides";
    bad.forward = dense_strides_fwd;
    for (size_t o = 0; o < N_OPS; o++) {
        cc_t_tally t = cc_t_run_all(&bad, &cases, OPS[o]);
        printf("planted bug %s: caught by %ld of %ld %s cases\n", bad.name, t.not_passed, t.cases,
               OPS[o]);
        if (t.not_passed == 0)
            fail_msg("a provider that ignores input strides passed every %s case", OPS[o]);
    }
}

int main(void)
{
    char msg[256];
    if (!cc_openblas_provider(msg, sizeof msg)) {
        printf("skipped: %s\n", msg);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_case_file_covers_ops_dtypes_layouts_and_zero_dims),
        cmocka_unit_test(test_cases_pass_on_openblas),
        cmocka_unit_test(test_half_precision_is_unsupported),
        cmocka_unit_test(test_describe_states_config_and_threads),
        cmocka_unit_test(test_ignored_strides_are_caught),
    };
    return cmocka_run_group_tests_name("openblas_provider", tests, setup, teardown);
}
