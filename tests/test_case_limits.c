/* Case-line limits found by fuzzing (tests/fuzz/fuzz_case.c): extents whose products overflow
 * int64 (UB in ref_numel, reached from the parser through op->shape), a zero extent hiding
 * huge ones, an output too large to exist: all are one-sentence parse errors now. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "harness/case/case.h"

static int parses(const char *line, char *msg, size_t n)
{
    cc_case c;
    cc_parse_error err;
    memset(&err, 0, sizeof err);
    cc_case_defaults def = {CC_CPU, 0};
    int rc = cc_case_parse(line, &def, &c, &err);
    snprintf(msg, n, "%s", err.msg);
    return rc == 0;
}

static void test_extent_products(void **state)
{
    (void)state;
    char msg[384];
    assert_false(parses("add in=[9223372036854775807,2],[9223372036854775807,2]", msg, sizeof msg));
    assert_non_null(strstr(msg, "2^48"));
    assert_false(parses("reduceSum in=[3037000500,3037000500] axis=0", msg, sizeof msg));
    /* a zero extent does not make huge ones harmless (ref_numel multiplies left to right) */
    assert_false(parses("add in=[281474976710656,0,281474976710656],[281474976710656,0,"
                        "281474976710656]",
                        msg, sizeof msg));
    assert_false(parses("broadcast in=[1] to=[9223372036854775807,9223372036854775807]", msg,
                        sizeof msg));
    /* at the limit: fine (nothing is allocated by parsing) */
    assert_true(parses("add in=[281474976710656],[281474976710656]", msg, sizeof msg));
    assert_true(parses("add in=[0,5],[0,5]", msg, sizeof msg));
}

static void test_output_limit(void **state)
{
    (void)state;
    char msg[384];
    assert_true(parses("matmul in=[16777216,1],[1,16777216]", msg, sizeof msg)); /* 2^48 */
    assert_false(parses("matmul in=[33554432,1],[1,16777216]", msg, sizeof msg)); /* 2^49 */
    assert_non_null(strstr(msg, "output"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_extent_products),
        cmocka_unit_test(test_output_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
