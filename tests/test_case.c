/* Case lines: print(parse(line)) is canonical and parses back to the same case; generator
 * lines expand deterministically and stay within their size's element budget; every kind of bad
 * input gets one sentence with its column. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/case/case.h"
#include "core/dtype.h"
#include "core/torchlean.h"

static const cc_case_defaults defaults = {CC_CPU, 0};

static void roundtrip(const char *line, const char *canonical)
{
    cc_case c, again;
    cc_parse_error err;
    memset(&err, 0, sizeof err);
    if (cc_case_parse(line, &defaults, &c, &err))
        fail_msg("'%s' did not parse: col %d: %s", line, err.column, err.msg);
    char printed[CC_CASE_LINE_MAX], reprinted[CC_CASE_LINE_MAX];
    cc_case_print(&c, printed, sizeof printed);
    if (canonical)
        assert_string_equal(printed, canonical);
    assert_int_equal(cc_case_parse(printed, &defaults, &again, &err), 0);
    cc_case_print(&again, reprinted, sizeof reprinted);
    assert_string_equal(printed, reprinted);
    assert_memory_equal(&c.params, &again.params, sizeof c.params);
    assert_int_equal(c.seed, again.seed);
    assert_int_equal(c.n_in, again.n_in);
}

/* A double parameter prints as its shortest decimal that reads back exactly: the printed eps
 * against a plain search over every precision, on 20,000 values (any bits, decimals, powers
 * of two apart). */
static void test_double_parameters_print_shortest(void **state)
{
    (void)state;
    uint64_t bits = 88172645463325252ull;
    for (int k = 0; k < 20000; k++) {
        bits ^= bits << 13;
        bits ^= bits >> 7;
        bits ^= bits << 17;
        double x;
        if (k % 3 == 0) {
            uint64_t b = (bits & 0x000fffffffffffffull) | (uint64_t)(0x3c0 + bits % 0x70) << 52;
            memcpy(&x, &b, sizeof x); /* a positive value from 1e-19 to 1e15 */
        } else if (k % 3 == 1) {
            x = (double)(1 + bits % 999999) / pow(10.0, (double)(bits >> 40 & 7));
        } else {
            x = ldexp((double)(bits >> 11 | 1), -(int)(60 + bits % 40));
        }
        char want[40], line[128];
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(want, sizeof want, "%.*g", prec, x);
            if (strtod(want, NULL) == x)
                break;
        }
        snprintf(line, sizeof line, "layerNorm in=[4],[4],[4] eps=%.17g seed=1", x);
        cc_case c;
        cc_parse_error err;
        memset(&err, 0, sizeof err);
        if (cc_case_parse(line, &defaults, &c, &err))
            fail_msg("'%s' did not parse: %s", line, err.msg);
        char printed[CC_CASE_LINE_MAX], token[64];
        cc_case_print(&c, printed, sizeof printed);
        snprintf(token, sizeof token, " eps=%s ", want);
        if (!strstr(printed, token))
            fail_msg("x = %a: want%sin '%s'", x, token, printed);
    }
}

static void test_roundtrip_canonical(void **state)
{
    (void)state;
    roundtrip("softmax in=[4,7] axis=-1 seed=42",
              "softmax dtype=f32 device=cpu in=[4,7] axis=-1 stream=2 layout=contig check=both "
              "seed=42"); /* every printed line names its stream: 2, the default */
    roundtrip("  layerNorm   dtype=f64 in=[2,3],[3],[3] axis=1 eps=0.001 layout=stride2 # note",
              "layerNorm dtype=f64 device=cpu in=[2,3],[3],[3] axis=1 eps=0.001 stream=2 "
              "layout=stride2 check=both seed=0");
    roundtrip("matmul in=[7],[7] dtype=f64 seed=18446744073709551615 check=fwd", NULL);
    roundtrip("layerNorm in=[2,3],[3],[3] axis=1", /* the op's default eps is printed */
              "layerNorm dtype=f32 device=cpu in=[2,3],[3],[3] axis=1 eps=1e-05 stream=2 "
              "layout=contig check=both seed=0");
    roundtrip("relu in=[3] stream=1 seed=2", /* the old stream, named */
              "relu dtype=f32 device=cpu in=[3] stream=1 layout=contig check=both seed=2");
    roundtrip("reduceSum in=[2,0,3] axis=2 layout=bcast", NULL);
    roundtrip("linear in=[5],[4,5],[4] device=cuda layout=transpose", NULL);
}

static void test_generator_lines_expand_deterministically(void **state)
{
    (void)state;
    const char *text = "# comment\n\nsoftmax count=5 dtype=f32,f64 layout=contig,bcast seed=9\n"
                       "add in=[3],[3]\n";
    cc_case_list a = {0}, b = {0};
    cc_parse_error err;
    assert_int_equal(cc_cases_parse_text(text, "t", &defaults, &a, &err), 0);
    assert_int_equal(cc_cases_parse_text(text, "t", &defaults, &b, &err), 0);
    assert_int_equal(a.n, 5 * 2 * 2 + 1);
    int layouts[CC_LAYOUT_COUNT] = {0}, dtypes[CC_DTYPE_COUNT] = {0};
    for (size_t i = 0; i < a.n; i++) {
        char x[CC_CASE_LINE_MAX], y[CC_CASE_LINE_MAX];
        cc_case_print(&a.v[i], x, sizeof x);
        cc_case_print(&b.v[i], y, sizeof y);
        assert_string_equal(x, y);
        layouts[a.v[i].layout]++;
        dtypes[a.v[i].dtype]++;
        /* a generated case printed and parsed back is the same case */
        cc_case c;
        assert_int_equal(cc_case_parse(x, &defaults, &c, &err), 0);
        cc_case_print(&c, y, sizeof y);
        assert_string_equal(x, y);
    }
    assert_int_equal(layouts[CC_LAYOUT_CONTIG], 11);
    assert_int_equal(layouts[CC_LAYOUT_BCAST], 10);
    assert_int_equal(dtypes[CC_F64], 10);
    /* seeds differ between cases and depend on the base seed */
    assert_true(a.v[0].seed != a.v[1].seed);
    assert_int_equal(a.v[0].seed, cc_generated_seed(9, "softmax", 0, 0));
    cc_case_list_free(&a);
    cc_case_list_free(&b);
}

static void expect_error(const char *line, int column, const char *fragment)
{
    cc_case c;
    cc_parse_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(cc_case_parse(line, &defaults, &c, &err), -1);
    if (!strstr(err.msg, fragment))
        fail_msg("'%s': message '%s' lacks '%s'", line, err.msg, fragment);
    if (err.column != column)
        fail_msg("'%s': column %d, expected %d (%s)", line, err.column, column, err.msg);
}

static void test_error_messages_name_the_column(void **state)
{
    (void)state;
    expect_error("sofmax in=[2]", 1, "unknown op 'sofmax'");
    expect_error("softmax in=[2,x]", 12, "malformed shape list");
    expect_error("softmax in=[2,3", 12, "malformed shape list");
    expect_error("softmax in=[-1]", 12, "malformed shape list");
    expect_error("softmax in=[2] dtype=f8", 22, "unknown dtype 'f8'");
    expect_error("softmax in=[2] device=tpx", 23, "unknown device 'tpx' (TorchLean's devices at "
                                                  "996dda0: cpu cuda rocm");
    expect_error("softmax in=[2] device=tpu", 23, "device 'tpu' is a TorchLean device "
                                                  "(NN.Backend.Device.tpu) that no capcheck "
                                                  "provider runs on");
    expect_error("softmax in=[2] layout=diagonal", 23, "unknown layout");
    expect_error("softmax in=[2] eps=1", 16, "softmax takes no parameter 'eps'");
    expect_error("softmax in=[2] bogus=1", 16, "unknown key 'bogus'");
    expect_error("softmax in=[2] axis=two", 21, "'axis' wants an integer");
    expect_error("softmax in=[2] seed=-4", 21, "'seed' wants an unsigned integer");
    expect_error("softmax in=[2] axis=3", 12, "axis 3 is out of range");
    expect_error("matmul in=[2,3],[4,5]", 11, "inner extents differ");
    expect_error("add in=[2]", 8, "takes 2 to 2 inputs");
    expect_error("softmax axis=0", 9, "needs its input shapes");
    expect_error("softmax in=[2] stray", 16, "expected key=value");
    expect_error("in=[2]", 1, "starts with an op name");
}

/* Every device TorchLean names is either one capcheck runs (gpu is TorchLean's alias of cuda)
 * or "known, no capcheck provider": never "unknown". */
static void test_torchlean_device_names(void **state)
{
    (void)state;
    cc_torchlean tl;
    cc_parse_error err;
    char msg[512], why[512], line[64];
    if (cc_torchlean_load(NULL, &tl, msg, sizeof msg))
        fail_msg("%s", msg);
    const cc_tl_row *dev = cc_tl_find(&tl, "inductive", "NN.Backend.Device");
    const cc_tl_row *gpu = cc_tl_find(&tl, "alias", "NN.Backend.Device.gpu");
    assert_non_null(dev);
    assert_non_null(gpu);
    assert_string_equal(gpu->value, "cuda");
    int known = 0, runs = 0;
    for (const char *s = dev->value; *s;) {
        char name[32];
        size_t n = strcspn(s, " ");
        snprintf(name, sizeof name, "%.*s", (int)n, s);
        s += n + (s[n] == ' ');
        cc_device d;
        if (cc_device_parse(name, &d) == 0) {
            runs++;
            continue;
        }
        cc_device_unknown_msg(name, why, sizeof why);
        if (!strstr(why, "is a TorchLean device"))
            fail_msg("%s: %s", name, why);
        known++;
    }
    assert_int_equal(runs, 2);
    assert_int_equal(known, 7); /* rocm metal wasm tpu trainium custom external */
    cc_torchlean_free(&tl);
    /* in a generator's device list too */
    cc_case_list l = {0};
    memset(&err, 0, sizeof err);
    assert_int_equal(cc_cases_parse_text("softmax count=1 device=cpu,rocm\n", "g.cases", &defaults,
                                         &l, &err),
                     -1);
    assert_non_null(strstr(err.msg, "bad device list 'cpu,rocm' (cpu,cuda): device 'rocm' is a "
                                    "TorchLean device"));
    cc_case_list_free(&l);
    /* the alias parses as cuda and prints as cuda */
    cc_case c;
    assert_int_equal(cc_case_parse("relu in=[3] device=gpu seed=1", &defaults, &c, &err), 0);
    assert_int_equal(c.device, CC_CUDA);
    cc_case_print(&c, line, sizeof line);
    assert_non_null(strstr(line, "device=cuda"));
}

static void test_file_errors_name_file_and_line(void **state)
{
    (void)state;
    cc_case_list l = {0};
    cc_parse_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(cc_cases_parse_text("add in=[2],[2]\n\nexp in=[2] axis=1\n", "f.cases",
                                         &defaults, &l, &err),
                     -1);
    assert_string_equal(err.file, "f.cases");
    assert_int_equal(err.line, 3);
    assert_int_equal(err.column, 12);
    cc_case_list_free(&l);
    memset(&err, 0, sizeof err);
    assert_int_equal(cc_cases_parse_file("no/such/file.cases", &defaults, &l, &err), -1);
    assert_string_equal(err.file, "no/such/file.cases");
    assert_non_null(strstr(err.msg, "cannot open"));
    assert_int_equal(cc_cases_parse_text("exp count=x\n", "g", &defaults, &l, &err), -1);
    assert_non_null(strstr(err.msg, "'count' wants a whole number"));
    assert_int_equal(cc_cases_parse_text("nop count=2\n", "g", &defaults, &l, &err), -1);
    assert_non_null(strstr(err.msg, "unknown op 'nop'"));
    cc_case_list_free(&l);
}

/* Every input of a generated case holds at most max(size, REF_SAMPLE_MIN_BUDGET) elements at
 * every size class and rank request, and so does linear's output (its out extent once grew as
 * sqrt(size) on top of a full-size x: a 10^9-element weight at size=large); the primary input
 * at most `size`. */
static void test_generated_inputs_stay_in_budget(void **state)
{
    (void)state;
    static const char *const sizes[] = {"tiny", "small", "medium", "large"};
    static const int64_t elems[] = {16, 256, 4096, 1 << 20};
    for (int s = 0; s < 4; s++)
        for (int rank = -1; rank <= 4; rank++) {
            char text[128];
            if (rank < 0)
                snprintf(text, sizeof text, "* count=24 size=%s zero=1 seed=%d\n", sizes[s], s);
            else
                snprintf(text, sizeof text, "* count=6 size=%s rank=%d seed=%d\n", sizes[s],
                         rank, 10 * s + rank);
            cc_case_list l = {0};
            cc_parse_error err;
            memset(&err, 0, sizeof err);
            if (cc_cases_parse_text(text, "budget", &defaults, &l, &err))
                fail_msg("%s: %s", text, err.msg);
            int64_t budget = elems[s] > REF_SAMPLE_MIN_BUDGET ? elems[s] : REF_SAMPLE_MIN_BUDGET;
            for (size_t k = 0; k < l.n; k++) {
                const cc_case *c = &l.v[k];
                char line[CC_CASE_LINE_MAX];
                cc_case_print(c, line, sizeof line);
                if (c->n_in > 0 && ref_numel(&c->shape[0]) > elems[s])
                    fail_msg("primary input beyond size=%s: %s", sizes[s], line);
                for (int i = 1; i < c->n_in; i++)
                    if (ref_numel(&c->shape[i]) > budget)
                        fail_msg("input %d beyond %lld elements: %s", i, (long long)budget, line);
                ref_shape out;
                ref_err e = {{0}};
                assert_int_equal(c->op->shape(&c->params, c->n_in, c->shape, &out, &e), REF_OK);
                if (strcmp(c->op->name, "linear") == 0 && ref_numel(&out) > budget)
                    fail_msg("linear output beyond %lld elements: %s", (long long)budget, line);
            }
            cc_case_list_free(&l);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_canonical),
        cmocka_unit_test(test_generator_lines_expand_deterministically),
        cmocka_unit_test(test_error_messages_name_the_column),
        cmocka_unit_test(test_torchlean_device_names),
        cmocka_unit_test(test_file_errors_name_file_and_line),
        cmocka_unit_test(test_generated_inputs_stay_in_budget),
        cmocka_unit_test(test_double_parameters_print_shortest),
    };
    return cmocka_run_group_tests_name("case_lines", tests, NULL, NULL);
}
