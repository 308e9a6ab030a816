/* Zero-trust checks (harness/run/zero_trust.h): an all-zeros, constant or copied output fails with
 * its own message even where the bound would let it through (long bf16 reductions, a scale
 * close to 1), and the reference provider raises no false alarm on the smoke suite nor on
 * every op of the vocabulary in all four dtypes and layouts. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/case/case.h"
#include "core/dtype.h"
#include "harness/run/runner.h"
#include "harness/run/zero_trust.h"
#include "test_util.h"

/* ---- the check on its own ----------------------------------------------------------------- */

static void test_verdicts(void **state)
{
    (void)state;
    char msg[384];
    double ref[4] = {1e-30, -2e-30, 3e-30, 4e-30};
    double zeros[4] = {0, -0.0, 0, 0};
    cc_view got = cc_t_vector_view(CC_F64, zeros, 4);
    assert_int_equal(cc_zero_trust("y", ref, NULL, 0, &got, NULL, 0, msg, sizeof msg),
                     CC_ZT_ALL_ZERO);
    assert_non_null(strstr(msg, "zero-trust: y is all zeros"));

    /* a reference that is zero, or only subnormal (flushing is legitimate), is no alarm */
    double ref_zero[4] = {0, 0, -0.0, 0};
    assert_int_equal(cc_zero_trust("y", ref_zero, NULL, 0, &got, NULL, 0, msg, sizeof msg),
                     CC_ZT_OK);
    double ref_sub[4] = {1e-310, -3e-311, 0, 2e-320};
    assert_int_equal(cc_zero_trust("y", ref_sub, NULL, 0, &got, NULL, 0, msg, sizeof msg),
                     CC_ZT_OK);
    /* ... while 1e-30 is a normal f32: all zeros is an alarm there too */
    float zf[4] = {0, 0, 0, 0};
    cc_view gotf = cc_t_vector_view(CC_F32, NULL, 4);
    gotf.data = zf;
    assert_int_equal(cc_zero_trust("y", ref, NULL, 0, &gotf, NULL, 0, msg, sizeof msg),
                     CC_ZT_ALL_ZERO);
    double ref_sub32[4] = {1e-39, 0, -1e-40, 0}; /* f32 subnormals */
    assert_int_equal(cc_zero_trust("y", ref_sub32, NULL, 0, &gotf, NULL, 0, msg, sizeof msg),
                     CC_ZT_OK);

    /* a reference that is zero up to its own float64 error (c_op * 2^-53 * m_i) is zero: the
     * gradient of softmaxMatmul's s when v's rows are equal comes out as +-3e-17 */
    double ref_noise[4] = {3e-17, -1e-17, 2e-17, 0}, mag[4] = {1, 1, 1, 1};
    assert_int_equal(cc_zero_trust("grad:s", ref_noise, mag, 2, &got, NULL, 0, msg, sizeof msg),
                     CC_ZT_OK);
    assert_int_equal(cc_zero_trust("grad:s", ref_noise, NULL, 0, &got, NULL, 0, msg, sizeof msg),
                     CC_ZT_ALL_ZERO);

    /* a single element is never judged */
    cc_view one = cc_t_vector_view(CC_F64, zeros, 1);
    assert_int_equal(cc_zero_trust("y", ref, NULL, 0, &one, NULL, 0, msg, sizeof msg), CC_ZT_OK);

    double fill[4] = {0.5, 0.5, 0.5, 0.5}, ref_var[4] = {0.5, 0.25, 0.5, 0.5};
    cc_view g2 = cc_t_vector_view(CC_F64, fill, 4);
    assert_int_equal(cc_zero_trust("grad:x", ref_var, NULL, 0, &g2, NULL, 0, msg, sizeof msg),
                     CC_ZT_ALL_EQUAL);
    assert_non_null(strstr(msg, "grad:x is the constant 0.5"));
    double ref_const[4] = {0.5, 0.5, 0.5, 0.5};
    assert_int_equal(cc_zero_trust("y", ref_const, NULL, 0, &g2, NULL, 0, msg, sizeof msg),
                     CC_ZT_OK);
    /* values that differ from a constant only by rounding to the dtype count as constant */
    double ref_round[4] = {0.5, 0.5 + 1e-12, 0.5, 0.5};
    g2.dtype = CC_F32;
    float fillf[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    g2.data = fillf;
    assert_int_equal(cc_zero_trust("y", ref_round, NULL, 0, &g2, NULL, 0, msg, sizeof msg),
                     CC_ZT_OK);

    double x[4] = {1, 2, 3, NAN}, copy[4] = {1, 2, 3, NAN}, y[4] = {1.01, 2.02, 3.03, NAN};
    cc_zt_source src[2] = {{"a", y, 4}, {"x", x, 4}};
    cc_view c = cc_t_vector_view(CC_F64, copy, 4);
    assert_int_equal(cc_zero_trust("y", y, NULL, 0, &c, src + 1, 1, msg, sizeof msg), CC_ZT_COPY);
    assert_non_null(strstr(msg, "exact copy of x"));
    /* the reference equal to the source (relu of positives, add of zeros) is no alarm */
    assert_int_equal(cc_zero_trust("y", x, NULL, 0, &c, src, 2, msg, sizeof msg), CC_ZT_OK);
    /* a source of another element count is not compared */
    cc_zt_source short_src = {"x", x, 3};
    assert_int_equal(cc_zero_trust("y", y, NULL, 0, &c, &short_src, 1, msg, sizeof msg), CC_ZT_OK);
}

/* ---- planted providers around the reference ----------------------------------------------- */

typedef enum { PLANT_ZEROS, PLANT_FILL, PLANT_COPY_X, PLANT_COPY_G, PLANT_ZERO_GRAD0 } plant;

typedef struct {
    plant kind;
} plant_ctx;

static int64_t view_numel(const cc_view *v)
{
    int64_t n = 1;
    for (int i = 0; i < v->rank; i++)
        n *= v->shape[i];
    return n;
}

static void copy_view(const cc_view *from, cc_view *to)
{
    int64_t n = view_numel(to), idx[REF_MAX_RANK] = {0};
    for (int64_t k = 0; k < n; k++) {
        int64_t off = 0;
        for (int a = 0; a < from->rank; a++)
            off += idx[a] * from->strides[a];
        cc_store(to->dtype, to->data, k, cc_load(from->dtype, from->data, off));
        for (int a = from->rank - 1; a >= 0 && ++idx[a] == from->shape[a]; a--)
            idx[a] = 0;
    }
}

static cc_status plant_forward(void *ctx, const cc_call *call, cc_view *out, char *msg,
                               size_t len)
{
    const plant_ctx *pc = ctx;
    const cc_provider *ref = cc_reference_provider();
    cc_status st = ref->forward(ref->ctx, call, out, msg, len);
    int64_t n = view_numel(out);
    if (pc->kind == PLANT_ZEROS)
        for (int64_t i = 0; i < n; i++)
            cc_store(out->dtype, out->data, i, 0.0);
    if (pc->kind == PLANT_FILL)
        for (int64_t i = 1; i < n; i++)
            cc_store(out->dtype, out->data, i, cc_load(out->dtype, out->data, 0));
    if (pc->kind == PLANT_COPY_X)
        copy_view(&call->in[0], out);
    return st;
}

static cc_status plant_vjp(void *ctx, const cc_call *call, const cc_view *g, cc_view *grads,
                           char *msg, size_t len)
{
    const plant_ctx *pc = ctx;
    const cc_provider *ref = cc_reference_provider();
    cc_status st = ref->vjp(ref->ctx, call, g, grads, msg, len);
    if (pc->kind == PLANT_COPY_G && grads[0].data)
        copy_view(g, &grads[0]);
    if (pc->kind == PLANT_ZERO_GRAD0 && grads[0].data)
        for (int64_t i = 0; i < view_numel(&grads[0]); i++)
            cc_store(grads[0].dtype, grads[0].data, i, 0.0);
    return st;
}

static cc_provider planted(plant_ctx *pc)
{
    const cc_provider *ref = cc_reference_provider();
    cc_provider p = *ref;
    p.name = "planted";
    p.ctx = pc;
    p.forward = plant_forward;
    p.vjp = plant_vjp;
    return p;
}

/* The planted output passes its bound (ratio <= 1) under `acc`, and zero-trust fails it anyway. */
static void expect_caught_judged(plant kind, const char *line, const char *what,
                                 cc_accumulation acc)
{
    plant_ctx pc = {kind};
    cc_provider p = planted(&pc);
    cc_result r;
    cc_case c = cc_t_parse_case(line);
    cc_run_options j = {.accumulation = acc};
    cc_run_case_probed(&p, &c, &j, NULL, &r);
    if (r.status != CC_RES_FAIL || !strstr(r.message, "zero-trust") || !strstr(r.message, what))
        fail_msg("%s: expected a zero-trust failure naming '%s', got %s: %s", line, what,
                 cc_result_status_name(r.status), r.message);
    if (!(r.worst_ratio <= 1.0))
        fail_msg("%s: the bound alone should have passed this planted output (ratio %g)", line,
                 r.worst_ratio);
}

static void expect_caught(plant kind, const char *line, const char *what)
{
    expect_caught_judged(kind, line, what, CC_ACC_STRICT);
}

/* Under strict accumulation the bound alone rejects what relaxed lets through. */
static void expect_bound_rejects_when_strict(plant kind, const char *line)
{
    plant_ctx pc = {kind};
    cc_provider p = planted(&pc);
    cc_result r;
    cc_t_run_line(&p, line, &r);
    if (r.status != CC_RES_FAIL || !(r.worst_ratio > 1.0))
        fail_msg("%s: strict accumulation should reject this planted output by its bound, got %s "
                 "(ratio %g)", line, cc_result_status_name(r.status), r.worst_ratio);
}

static void test_planted_outputs_inside_the_bound_are_caught(void **state)
{
    (void)state;
    /* a long bf16 sum judged relaxed: m_i ~ n * sum|x| at bf16's u makes zero (and a constant)
     * fit in the bound; strict (float32 accumulation) rejects them by the bound itself */
    const char *zeros = "reduceSum dtype=bf16 in=[4,512] axis=1 check=fwd seed=3";
    const char *fill = "reduceSum dtype=bf16 in=[6,512] axis=1 check=fwd seed=4";
    expect_caught_judged(PLANT_ZEROS, zeros, "y is all zeros", CC_ACC_RELAXED);
    expect_caught_judged(PLANT_FILL, fill, "y is the constant", CC_ACC_RELAXED);
    expect_bound_rejects_when_strict(PLANT_ZEROS, zeros);
    expect_bound_rejects_when_strict(PLANT_FILL, fill);
    /* a scale by 1.01 in bf16: the input itself is within 4u of the answer */
    expect_caught(PLANT_COPY_X, "scale dtype=bf16 in=[64] alpha=1.01 check=fwd seed=5",
                  "y is an exact copy of x");
    expect_caught(PLANT_COPY_G, "scale dtype=bf16 in=[8,8] alpha=1.01 check=vjp seed=6",
                  "grad:x is an exact copy of the cotangent g");
    /* matmul's da sums over the 512 columns of b in bf16: zeros fit the relaxed bound */
    const char *mm = "matmul dtype=bf16 in=[2,8],[8,512] check=vjp seed=7";
    expect_caught_judged(PLANT_ZERO_GRAD0, mm, "grad:a is all zeros", CC_ACC_RELAXED);
    expect_bound_rejects_when_strict(PLANT_ZERO_GRAD0, mm);
}

/* Exact zeros where the answer is zero in exact arithmetic pass: with v's rows equal (bcast
 * layout), softmaxMatmul's gradient of s is 0, and the float64 reference says +-1e-17. */
static void test_exact_zero_gradient_is_no_alarm(void **state)
{
    (void)state;
    plant_ctx pc = {PLANT_ZERO_GRAD0};
    cc_provider p = planted(&pc);
    cc_result r;
    cc_t_run_line(&p,
                  "softmaxMatmul dtype=f64 in=[2,4],[4,3] layout=bcast seed=6451792391253033529",
                  &r);
    if (r.status != CC_RES_PASS)
        fail_msg("%s: %s", cc_result_status_name(r.status), r.message);
}

/* ---- no false alarms ---------------------------------------------------------------------- */

static void expect_all_pass(const cc_case_list *l, const char *what)
{
    const cc_provider *ref = cc_reference_provider();
    size_t bad = 0;
    for (size_t i = 0; i < l->n; i++) {
        cc_result r;
        cc_run_case(ref, &l->v[i], &r);
        if (r.status != CC_RES_PASS && r.status != CC_RES_UNSUPPORTED) {
            if (bad++ < 5)
                print_message("%s: %s: %s\n  %s\n", what, cc_result_status_name(r.status),
                              r.message, r.line);
        }
    }
    if (bad)
        fail_msg("%zu of %zu %s cases did not pass on the reference provider", bad, l->n, what);
}

static void test_no_false_alarm_on_the_reference(void **state)
{
    (void)state;
    cc_case_defaults def = {CC_CPU, 0};
    cc_parse_error err;
    cc_case_list smoke = {0};
    if (cc_t_load_cases(CAPCHECK_SOURCE_DIR "/cases/smoke.cases", &smoke))
        fail_msg("cannot parse cases/smoke.cases");
    expect_all_pass(&smoke, "smoke");
    cc_case_list_free(&smoke);

    cc_case_list all = {0};
    const char *text =
        "* count=2 dtype=f32,f64,f16,bf16 layout=contig,transpose,stride2,bcast size=small "
        "zero=1 seed=1\n"
        "* count=2 dtype=bf16,f16 layout=contig size=medium seed=2\n";
    if (cc_cases_parse_text(text, "vocabulary", &def, &all, &err))
        fail_msg("%s:%d: %s", err.file, err.line, err.msg);
    expect_all_pass(&all, "every-op");
    cc_case_list_free(&all);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verdicts),
        cmocka_unit_test(test_planted_outputs_inside_the_bound_are_caught),
        cmocka_unit_test(test_exact_zero_gradient_is_no_alarm),
        cmocka_unit_test(test_no_false_alarm_on_the_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
