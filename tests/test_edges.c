/* Edge-value classes (harness/case/edge_class.h): the edge= key of case and generator lines,
 * which ops a class applies to, and that the materialized inputs really carry each class's
 * values, at positions that depend on the seed alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness/case/case.h"
#include "core/dtype.h"
#include "harness/case/materialize.h"

static const cc_case_defaults defaults = {CC_CPU, 0};

static cc_case parse(const char *line)
{
    cc_case c;
    cc_parse_error err;
    if (cc_case_parse(line, &defaults, &c, &err))
        fail_msg("'%s' did not parse: col %d: %s", line, err.column, err.msg);
    return c;
}

static void expect_error(const char *text, const char *msg, int column)
{
    cc_case_list l = {0};
    cc_parse_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(cc_cases_parse_text(text, "t", &defaults, &l, &err), -1);
    if (!strstr(err.msg, msg))
        fail_msg("'%s': expected '%s' in '%s'", text, msg, err.msg);
    if (column)
        assert_int_equal(err.column, column);
    cc_case_list_free(&l);
}

static void test_edge_key_round_trips(void **state)
{
    (void)state;
    cc_case c = parse("relu in=[8] edge=signed-zero seed=3");
    assert_int_equal(c.edges, 1u << CC_EDGE_SIGNED_ZERO);
    char line[CC_CASE_LINE_MAX];
    cc_case_print(&c, line, sizeof line);
    assert_string_equal(line, "relu dtype=f32 device=cpu in=[8] edge=signed-zero stream=2 "
                              "layout=contig check=both seed=3");
    cc_case again = parse(line);
    assert_int_equal(again.edges, c.edges);
    /* none is the ordinary case, printed without the key (lines from before edge classes keep
     * their canonical text) */
    c = parse("relu in=[8] edge=none");
    assert_int_equal(c.edges, 0);
    cc_case_print(&c, line, sizeof line);
    assert_null(strstr(line, "edge="));
    for (int e = 0; e < CC_EDGE_COUNT; e++) {
        char l2[128];
        snprintf(l2, sizeof l2, "%s in=[4,5],[4,5] edge=%s",
                 e == CC_EDGE_MASKED_ROW   ? "hardMaskedSoftmax"
                 : e == CC_EDGE_LARGE_MEAN ? "mseLoss" /* an op taking a statistic */
                                           : "add",
                 cc_edge_class_names[e]);
        assert_int_equal(parse(l2).edges, 1u << e);
    }
}

static void test_edge_errors_name_the_column(void **state)
{
    (void)state;
    expect_error("relu in=[8] edge=bogus\n", "unknown edge class 'bogus'", 18);
    /* relu has no mask input; log's positive domain takes no NaN (TorchLean rejects it) */
    expect_error("relu in=[8] edge=masked-row\n",
                 "edge=masked-row puts no value into any input of this relu case", 18);
    expect_error("log in=[8] edge=nan\n", "edge=nan puts no value", 0);
    expect_error("relu in=[0] edge=nan\n", "edge=nan puts no value", 0); /* nothing to carry it */
    expect_error("relu count=2 edge=nan,bogus\n", "bad edge class list 'nan,bogus'", 19);
    expect_error("relu count=2 edge=masked-row\n", "edge=masked-row puts no value into any "
                                                   "input of relu", 19);
}

static void test_generators_expand_edge_classes(void **state)
{
    (void)state;
    cc_case_list a = {0}, b = {0};
    cc_parse_error err;
    /* all: every class that applies to relu (not masked-row, not large-mean: relu takes no
     * statistic), the seeds of a line without edge= unchanged for its edge=none part */
    assert_int_equal(cc_cases_parse_text("relu count=3 edge=all\n", "t", &defaults, &a, &err), 0);
    assert_int_equal(a.n, 3 * (CC_EDGE_COUNT - 2));
    for (size_t i = 0; i < a.n; i++)
        assert_int_equal(a.v[i].edges, 1u << (i / 3 < CC_EDGE_MASKED_ROW ? i / 3 : i / 3 + 1));
    assert_int_equal(cc_cases_parse_text("relu count=3 edge=none,ties\nrelu count=3\n", "t",
                                         &defaults, &b, &err),
                     0);
    assert_int_equal(b.n, 9);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(b.v[i].edges, 0);
        assert_int_equal(b.v[i].seed, b.v[6 + i].seed);
        assert_int_equal(b.v[3 + i].edges, 1u << CC_EDGE_TIES);
        assert_true(b.v[3 + i].seed != b.v[i].seed);
    }
    cc_case_list_free(&a);
    /* '*' keeps only the ops a class reaches: masked-row is for mask inputs */
    assert_int_equal(cc_cases_parse_text("* count=2 edge=masked-row\n", "t", &defaults, &a, &err),
                     0);
    assert_true(a.n >= 2);
    for (size_t i = 0; i < a.n; i++)
        assert_true(strcmp(a.v[i].op->name, "hardMaskedSoftmax") == 0 ||
                    strcmp(a.v[i].op->name, "attention") == 0);
    cc_case_list_free(&a);
    cc_case_list_free(&b);
}

/* The dense float64 inputs of a case (what both sides see). */
static cc_inputs inputs_of(const char *line)
{
    cc_case c = parse(line);
    cc_inputs in;
    char msg[256];
    if (cc_materialize(&c, &in, msg, sizeof msg))
        fail_msg("%s: %s", line, msg);
    return in;
}

typedef struct {
    int64_t n, nan, pinf, ninf, pzero, nzero, subnormal, huge, other;
} census;

static census count_values(const ref_tensor *t, cc_dtype dt)
{
    census k = {0};
    k.n = ref_numel(&t->shape);
    double huge = cbrt(cc_max_finite(dt)) / 4;
    for (int64_t j = 0; j < k.n; j++) {
        double x = t->v[j];
        if (isnan(x))
            k.nan++;
        else if (isinf(x))
            x > 0 ? k.pinf++ : k.ninf++;
        else if (x == 0)
            signbit(x) ? k.nzero++ : k.pzero++;
        else if (fabs(x) < cc_smallest_normal(dt))
            k.subnormal++;
        else if (fabs(x) >= huge && fabs(x) < cbrt(cc_max_finite(dt)))
            k.huge++;
        else
            k.other++;
    }
    return k;
}

static void test_each_class_puts_its_values_in(void **state)
{
    (void)state;
    static const cc_dtype dts[] = {CC_F64, CC_F32, CC_F16, CC_BF16};
    static const char *const dnames[] = {"f64", "f32", "f16", "bf16"};
    for (int d = 0; d < 4; d++) {
        char line[160];
        census k;
        cc_inputs in;
#define INPUT0(edge)                                                                           \
    (snprintf(line, sizeof line, "add dtype=%s in=[16,24],[16,24] edge=%s seed=5", dnames[d],  \
              edge),                                                                           \
     in = inputs_of(line), k = count_values(&in.ref_in[0], dts[d]), cc_inputs_free(&in), k)
        /* share 1/16 of 384 elements: some, far from all */
        k = INPUT0("nan");
        assert_true(k.nan >= 4 && k.nan <= 60 && k.other > 300);
        k = INPUT0("inf");
        assert_true(k.pinf >= 2 && k.ninf >= 2 && k.pinf + k.ninf <= 60);
        k = INPUT0("signed-zero");
        assert_true(k.pzero >= 20 && k.nzero >= 20);
        k = INPUT0("subnormal");
        assert_true(k.subnormal >= 40 && k.nan == 0);
        k = INPUT0("huge");
        assert_true(k.huge >= 4 && k.huge <= 60 && k.pinf + k.ninf == 0);
        k = INPUT0("ties"); /* every value from {-1, -1/2, 0, 1/2, 1} */
        assert_int_equal(k.other + k.pzero + k.nzero, k.n);
        in = inputs_of(line);
        for (int64_t j = 0; j < k.n; j++) {
            double x = in.ref_in[0].v[j];
            assert_true(x == -1 || x == -0.5 || x == 0 || x == 0.5 || x == 1);
        }
        cc_inputs_free(&in);
#undef INPUT0
    }
    /* log's input stays strictly positive: +Inf only, positive subnormals */
    cc_inputs in = inputs_of("log dtype=f32 in=[256] edge=inf seed=1");
    census k = count_values(&in.ref_in[0], CC_F32);
    assert_true(k.pinf >= 1 && k.ninf == 0 && k.nan == 0);
    cc_inputs_free(&in);
    in = inputs_of("log dtype=f32 in=[256] edge=subnormal seed=1");
    for (int64_t j = 0; j < 256; j++)
        assert_true(in.ref_in[0].v[j] > 0);
    cc_inputs_free(&in);
    /* masked-row: whole rows of the mask blocked, the scores untouched */
    in = inputs_of("hardMaskedSoftmax dtype=f32 in=[12,9],[12,9] edge=masked-row seed=2");
    int blocked_rows = 0;
    for (int r = 0; r < 12; r++) {
        int allowed = 0;
        for (int j = 0; j < 9; j++)
            allowed += in.ref_in[1].v[r * 9 + j] != 0;
        blocked_rows += allowed == 0;
    }
    assert_true(blocked_rows >= 1 && blocked_rows < 12);
    k = count_values(&in.ref_in[0], CC_F32);
    assert_int_equal(k.other, k.n);
    cc_inputs_free(&in);
    /* the index input of gather never takes edge values */
    in = inputs_of("gather dtype=f32 in=[6,5],[30] axis=1 edge=nan seed=4");
    for (int64_t j = 0; j < 30; j++)
        assert_false(isnan(in.ref_in[1].v[j]));
    cc_inputs_free(&in);
}

/* A broadcast layout's values stay constant along axis 0 with edge values in them, and the same
 * line always gives the same values. */
static void test_edge_values_are_reproducible_and_respect_layouts(void **state)
{
    (void)state;
    const char *line = "mul dtype=f32 in=[4,16],[4,16] edge=nan layout=bcast seed=11";
    cc_inputs a = inputs_of(line), b = inputs_of(line);
    int nans = 0;
    for (int64_t j = 0; j < 64; j++) {
        double x = a.ref_in[0].v[j], y = b.ref_in[0].v[j], row0 = a.ref_in[0].v[j % 16];
        assert_true(isnan(x) ? isnan(y) && isnan(row0) : x == y && x == row0);
        nans += isnan(x);
    }
    assert_true(nans >= 4);
    cc_inputs_free(&a);
    cc_inputs_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edge_key_round_trips),
        cmocka_unit_test(test_edge_errors_name_the_column),
        cmocka_unit_test(test_generators_expand_edge_classes),
        cmocka_unit_test(test_each_class_puts_its_values_in),
        cmocka_unit_test(test_edge_values_are_reproducible_and_respect_layouts),
    };
    return cmocka_run_group_tests_name("edge_classes", tests, NULL, NULL);
}
