/* The bound-ratio error model: exact values pass with ratio 0, an error of exactly one bound
 * has ratio 1, NaN positions and Inf signs must match, a finite value that overflows the dtype
 * may come back as Inf of its sign, and the worst element is the one reported. Also the dtype
 * conversions the model rests on. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "harness/run/compare.h"
#include "core/dtype.h"
#include "test_util.h"

static void test_ratio_is_error_over_bound(void **state)
{
    (void)state;
    cc_bound_model m = cc_bound_for(CC_F32, 2.0);
    assert_true(m.u == ldexp(1.0, -24) + ldexp(1.0, -53)); /* provider + oracle roundoff */
    assert_true(cc_bound_for(CC_F64, 1.0).u == ldexp(1.0, -52));
    double bound;
    assert_true(cc_element_ratio(1.0, 1.0, 1.0, CC_F32, &m, &bound) == 0.0);
    assert_true(bound == 2.0 * m.u + m.floor);
    double r = cc_element_ratio(1.0, 1.0 + bound, 1.0, CC_F32, &m, NULL);
    assert_true(fabs(r - 1.0) < 1e-12);
    assert_true(cc_element_ratio(1.0, 1.0 + 3 * bound, 1.0, CC_F32, &m, NULL) > 2.9);
    /* the magnitude scales the bound: a cancelling sum may err by u * sum|x| */
    assert_true(cc_element_ratio(1e-3, 1e-3 + 1e-6, 100.0, CC_F32, &m, NULL) < 1.0);
}

static void test_nan_and_inf_must_match(void **state)
{
    (void)state;
    cc_bound_model m = cc_bound_for(CC_F32, 2.0);
    assert_true(cc_element_ratio(NAN, NAN, 0, CC_F32, &m, NULL) == 0.0);
    assert_true(isinf(cc_element_ratio(NAN, 1.0, 1, CC_F32, &m, NULL)));
    assert_true(isinf(cc_element_ratio(1.0, NAN, 1, CC_F32, &m, NULL)));
    assert_true(cc_element_ratio(INFINITY, INFINITY, 0, CC_F32, &m, NULL) == 0.0);
    assert_true(isinf(cc_element_ratio(INFINITY, -INFINITY, 0, CC_F32, &m, NULL)));
    assert_true(isinf(cc_element_ratio(-INFINITY, -3e38, 1, CC_F32, &m, NULL)));
    /* exact 1e39 overflows f32: +Inf is the right answer, -Inf and a finite value are not */
    assert_true(cc_element_ratio(1e39, INFINITY, 1e39, CC_F32, &m, NULL) == 0.0);
    assert_true(isinf(cc_element_ratio(1e39, -INFINITY, 1e39, CC_F32, &m, NULL)));
    assert_true(isinf(cc_element_ratio(1.0, INFINITY, 1.0, CC_F32, &m, NULL)));
}

static void test_compare_keeps_the_worst_element(void **state)
{
    (void)state;
    double expected[4] = {1, 2, 3, 4}, mag[4] = {1, 2, 3, 4};
    float got[4] = {1, 2, 3.0000002f /* 1 ulp, within 2u*3 */, 4.0001f};
    cc_view v = cc_t_vector_view(CC_F32, got, 4);
    cc_bound_model m = cc_bound_for(CC_F32, 2.0);
    cc_comparison c;
    cc_compare(expected, &(ref_mag){mag, NULL, NULL}, &v, &m, &c);
    assert_int_equal(c.n, 4);
    assert_int_equal(c.worst_index, 3);
    assert_int_equal(c.n_over, 1);
    assert_true(c.worst_ratio > 100);
    assert_true(c.got == (double)4.0001f && c.expected == 4.0);
    cc_view empty = cc_t_vector_view(CC_F32, got, 0);
    cc_compare(expected, &(ref_mag){mag, NULL, NULL}, &empty, &m, &c);
    assert_int_equal(c.n, 0);
    assert_int_equal(c.worst_index, -1);
    assert_true(c.worst_ratio == 0);
}

static void test_rounding_to_each_dtype(void **state)
{
    (void)state;
    /* ties to even, subnormals, overflow, and the loads invert the stores */
    assert_true(cc_round_to(CC_F16, 1.0 + ldexp(1.0, -11)) == 1.0);
    assert_true(cc_round_to(CC_F16, 1.0 + 3 * ldexp(1.0, -11)) == 1.0 + ldexp(1.0, -9));
    assert_true(cc_round_to(CC_F16, 65504.0) == 65504.0);
    assert_true(isinf(cc_round_to(CC_F16, 65520.0)));
    assert_true(cc_round_to(CC_F16, 65519.0) == 65504.0);
    assert_true(cc_round_to(CC_F16, ldexp(1.0, -24)) == ldexp(1.0, -24));
    assert_true(cc_round_to(CC_F16, ldexp(1.0, -26)) == 0.0);
    assert_true(cc_round_to(CC_BF16, 1.0 + ldexp(1.0, -8)) == 1.0);
    double big = cc_round_to(CC_BF16, 3.0e38);
    assert_true(isfinite(big) && fabs(big - 3.0e38) <= ldexp(1.0, -8) * 3.0e38);
    assert_true(cc_round_to(CC_F32, 0.1) == (double)0.1f);
    const cc_dtype types[] = {CC_F64, CC_F32, CC_F16, CC_BF16};
    const double values[] = {0.0, -0.0, 1.0, -2.5, 1e-3, 65504.0, 1e-6, 3.14159};
    for (int t = 0; t < 4; t++)
        for (int i = 0; i < 8; i++) {
            unsigned char buf[8];
            cc_store(types[t], buf, 0, values[i]);
            double back = cc_load(types[t], buf, 0);
            assert_true(back == cc_round_to(types[t], values[i]));
            assert_int_equal(signbit(back), signbit(values[i]));
        }
    unsigned char buf[8];
    cc_store(CC_F16, buf, 0, NAN);
    assert_true(isnan(cc_load(CC_F16, buf, 0)));
    cc_store(CC_BF16, buf, 0, -INFINITY);
    assert_true(cc_load(CC_BF16, buf, 0) == -INFINITY);
    assert_true(cc_unit_roundoff(CC_BF16) == ldexp(1.0, -8));
    assert_true(cc_unit_roundoff(CC_F16) == ldexp(1.0, -11));
    assert_true(cc_unit_roundoff(CC_F64) == ldexp(1.0, -53));
}

/* The textbook rounding (scale so the quantum of x's binade is 1, nearbyint, scale back), which
 * cc_round_to replaced with bit arithmetic for speed: they must agree on every value. */
static double round_by_formula(int precision, int emin, double max_finite, double x)
{
    if (!isfinite(x) || x == 0.0)
        return x;
    int e;
    frexp(x, &e);
    int lead = e - 1 < emin ? emin : e - 1;
    double quantum = ldexp(1.0, lead - (precision - 1));
    double r = nearbyint(x / quantum) * quantum;
    if (fabs(r) > max_finite)
        return copysign(INFINITY, x);
    return r == 0.0 ? copysign(0.0, x) : r;
}

static void test_fast_rounding_matches_the_formula(void **state)
{
    (void)state;
    const struct {
        cc_dtype t;
        int precision, emin;
    } fmt[] = {{CC_F32, 24, -126}, {CC_F16, 11, -14}, {CC_BF16, 8, -126}};
    uint64_t z = 0x9e3779b97f4a7c15u;
    long checked = 0;
    for (int f = 0; f < 3; f++) {
        double max = cc_max_finite(fmt[f].t);
        int emax = fmt[f].t == CC_F16 ? 15 : 127;
        assert_true(max == ldexp(2.0 - ldexp(1.0, 1 - fmt[f].precision), emax));
        for (int i = 0; i < 200000; i++) {
            z = z * 6364136223846793005u + 1442695040888963407u;
            /* random bits within the format's range (and beyond it), ties and halfway points */
            int e = (int)((z >> 33) % 300) - 160;
            double m = 1.0 + (double)(z >> 40) / 16777216.0;
            double x = ldexp(m, e) * ((z >> 20) & 1 ? -1.0 : 1.0);
            if (i % 4 == 1) /* an exact tie between two neighbours of the format */
                x = ldexp(round_by_formula(fmt[f].precision, fmt[f].emin, max, x), 0) +
                    ldexp(1.0, (e < fmt[f].emin ? fmt[f].emin : e) - fmt[f].precision);
            double want = round_by_formula(fmt[f].precision, fmt[f].emin, max, x);
            double got = cc_round_to(fmt[f].t, x);
            assert_true(got == want || (isnan(got) && isnan(want)));
            assert_int_equal(signbit(got), signbit(want));
            unsigned char buf[8];
            cc_store(fmt[f].t, buf, 0, x);
            double back = cc_load(fmt[f].t, buf, 0);
            assert_true(back == want && signbit(back) == signbit(want));
            checked++;
        }
    }
    assert_int_equal(checked, 600000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ratio_is_error_over_bound),
        cmocka_unit_test(test_nan_and_inf_must_match),
        cmocka_unit_test(test_compare_keeps_the_worst_element),
        cmocka_unit_test(test_rounding_to_each_dtype),
        cmocka_unit_test(test_fast_rounding_matches_the_formula),
    };
    return cmocka_run_group_tests_name("compare_and_dtypes", tests, NULL, NULL);
}
