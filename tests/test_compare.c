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
    /* the ratio is |got - expected| / bound, as the doubles give it */
    double r = cc_element_ratio(1.0, 1.0 + bound, 1.0, CC_F32, &m, NULL);
    assert_true(r == ((1.0 + bound) - 1.0) / bound);
    assert_true(cc_element_ratio(1.0, 1.0 + 3 * bound, 1.0, CC_F32, &m, NULL) ==
                ((1.0 + 3 * bound) - 1.0) / bound);
    /* the magnitude scales the bound: a cancelling sum may err by u * sum|x| */
    assert_true(cc_element_ratio(1e-3, 1e-3 + 1e-6, 100.0, CC_F32, &m, NULL) ==
                fabs((1e-3 + 1e-6) - 1e-3) / (2.0 * m.u * 100.0 + m.floor));
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
    /* bound = c_op u m + floor = 2 (2^-24 + 2^-53) 4 + 2^-126; the ratio is about 209.4 */
    double bound = 2.0 * (0x1p-24 + 0x1p-53) * 4.0 + 0x1p-126;
    assert_true(c.bound == bound && c.magnitude == 4.0);
    assert_true(c.worst_ratio == ((double)4.0001f - 4.0) / bound);
    assert_true(c.got == (double)4.0001f && c.expected == 4.0);
    assert_true(c.suspect_ratio ==
                ((double)4.0001f - 4.0) / (2.0 * (0x1p-24 + 0x1p-53) * (6.0 * 4.0) + 0x1p-126));
    cc_view empty = cc_t_vector_view(CC_F32, got, 0);
    cc_compare(expected, &(ref_mag){mag, NULL, NULL}, &empty, &m, &c);
    assert_int_equal(c.n, 0);
    assert_int_equal(c.worst_index, -1);
    assert_true(c.worst_ratio == 0);
}

/* Each bound model's constants and each element bound, as the formulas of compare.h give them:
 *   bound   = c_op u m + floor                    (f64, f32, relaxed f16/bf16)
 *   bound   = c_op (u_acc m + u dtype_i) + floor  (strict f16/bf16)
 *   suspect = the same with lambda prob_i (lambda = 6) in place of m
 * u = u(dtype) (or the declared compute roundoff when coarser) + 2^-53, u_acc = 2^-24 + 2^-53,
 * floor = the dtype's smallest normal. */
static void test_bounds_are_the_formulas(void **state)
{
    (void)state;
    const double oracle = 0x1p-53;
    assert_true(CC_SUSPECT_LAMBDA == 6.0);
    cc_bound_model f32 = cc_bound_for(CC_F32, 3.0);
    assert_true(f32.c_op == 3.0 && f32.u == 0x1p-24 + oracle && f32.u_acc == f32.u &&
                f32.floor == 0x1p-126 && f32.lambda == 6.0 && !f32.nonfinite_alike);
    cc_element_mag mag = {10.0, 4.0, 2.5};
    assert_true(cc_element_bound(&f32, mag) == 3.0 * (0x1p-24 + oracle) * 10.0 + 0x1p-126);
    assert_true(cc_element_suspect_bound(&f32, mag) ==
                3.0 * (0x1p-24 + oracle) * (6.0 * 2.5) + 0x1p-126);
    cc_bound_model f16 = cc_bound_for(CC_F16, 2.0);
    assert_true(f16.u == 0x1p-11 + oracle && f16.u_acc == 0x1p-24 + oracle &&
                f16.floor == 0x1p-14);
    assert_true(cc_element_bound(&f16, mag) ==
                2.0 * ((0x1p-24 + oracle) * 10.0 + (0x1p-11 + oracle) * 4.0) + 0x1p-14);
    assert_true(cc_element_suspect_bound(&f16, mag) ==
                2.0 * ((0x1p-24 + oracle) * (6.0 * 2.5) + (0x1p-11 + oracle) * 4.0) + 0x1p-14);
    cc_bound_model relaxed = cc_bound_for_judging(CC_BF16, 0.0, 2.0, CC_ACC_RELAXED);
    assert_true(relaxed.u == 0x1p-8 + oracle && relaxed.u_acc == relaxed.u &&
                relaxed.floor == 0x1p-126);
    assert_true(cc_element_bound(&relaxed, mag) == 2.0 * (0x1p-8 + oracle) * 10.0 + 0x1p-126);
    /* a declared compute roundoff: coarser replaces u(dtype), finer changes nothing */
    cc_bound_model tf32 = cc_bound_for_compute(CC_F32, 0x1p-11, 1.0);
    assert_true(tf32.u == 0x1p-11 + oracle && tf32.u_acc == tf32.u);
    assert_true(cc_bound_for_compute(CC_F32, 0x1p-30, 1.0).u == f32.u);
    cc_bound_model f16_tf = cc_bound_for_compute(CC_F16, 0x1p-11, 1.0);
    assert_true(f16_tf.u_acc == 0x1p-11 + oracle);
    /* a zero magnitude leaves the floor alone: a value within it of an exact zero passes */
    assert_true(cc_element_bound(&f32, (cc_element_mag){0, 0, 0}) == 0x1p-126);
    assert_true(cc_element_bound(&f16, (cc_element_mag){0, 0, 0}) == 0x1p-14);
    assert_true(cc_element_ratio(0.0, 0x1p-127, 0.0, CC_F32, &f32, NULL) == 0.5);
    /* a magnitude that is not a number holds the element to the floor */
    assert_true(cc_element_bound(&f32, (cc_element_mag){NAN, NAN, NAN}) == 0x1p-126);
    assert_true(cc_element_bound(&f32, (cc_element_mag){INFINITY, 1, 1}) == INFINITY);
    cc_bound_model f64 = cc_bound_for(CC_F64, 1.0);
    assert_true(f64.u == 2 * oracle && f64.floor == 0x1p-1022 && f64.oracle_dtype == 0.0);
    /* an oracle whose sums are compensated: its share c_op 2^-53 (dtype_i + 2^-20 m_i) in
     * place of the 2^-53 in u and u_acc */
    cc_bound_model comp = cc_bound_for(CC_F64, 2.0);
    cc_bound_oracle_compensated(&comp);
    assert_true(comp.u == oracle && comp.u_acc == oracle && comp.oracle_dtype == oracle);
    assert_true(cc_element_bound(&comp, mag) ==
                2.0 * oracle * 10.0 + 2.0 * oracle * (4.0 + 0x1p-20 * 10.0) + 0x1p-1022);
    assert_true(cc_element_suspect_bound(&comp, mag) ==
                2.0 * oracle * (6.0 * 2.5) + 2.0 * oracle * (4.0 + 0x1p-20 * (6.0 * 2.5)) +
                    0x1p-1022);
    cc_bound_oracle_compensated(&comp); /* once is all */
    assert_true(comp.u == oracle && comp.oracle_dtype == oracle);
    cc_bound_model comp16 = cc_bound_for(CC_F16, 2.0);
    cc_bound_oracle_compensated(&comp16);
    assert_true(comp16.u == 0x1p-11 && comp16.u_acc == 0x1p-24 && comp16.prob_judges);
    assert_true(cc_element_bound(&comp16, mag) ==
                2.0 * (0x1p-24 * 10.0 + 0x1p-11 * 4.0) + 2.0 * oracle * (4.0 + 0x1p-20 * 10.0) +
                    0x1p-14);
}

/* The ratio of an error of k units of the bound is k, exactly where k is; one bound passes
 * (ratio 1 is not over it), the next value up does not. */
static void test_ratio_at_the_bound(void **state)
{
    (void)state;
    cc_bound_model m = cc_bound_for(CC_F64, 1.0);
    double bound = cc_element_bound(&m, (cc_element_mag){1.0, 1.0, 1.0});
    assert_true(bound == 0x1p-52 + 0x1p-1022);
    assert_true(cc_element_ratio_of(1.0, 1.0 + 0x1p-52, bound, CC_F64, &m) ==
                0x1p-52 / bound);
    double expected[3] = {0.5, 1024.0, -3.0}, mag[3] = {0.5, 1024.0, 3.0};
    double got[3] = {0.5, 1024.0, -3.0};
    /* 1024 + bound(1024) exactly, then one ulp more */
    double b1024 = cc_element_bound(&m, (cc_element_mag){1024.0, 1024.0, 1024.0});
    got[1] = 1024.0 + b1024;
    assert_true(got[1] - 1024.0 == b1024); /* representable: the error is the bound exactly */
    cc_view v = cc_t_vector_view(CC_F64, got, 3);
    cc_comparison c;
    cc_compare(expected, &(ref_mag){mag, NULL, NULL}, &v, &m, &c);
    assert_true(c.worst_ratio == 1.0);
    assert_int_equal(c.n_over, 0);
    assert_int_equal(c.worst_index, 1);
    got[1] = nextafter(got[1], INFINITY);
    cc_compare(expected, &(ref_mag){mag, NULL, NULL}, &v, &m, &c);
    assert_true(c.worst_ratio == (got[1] - 1024.0) / b1024 && c.worst_ratio > 1.0);
    assert_int_equal(c.n_over, 1);
}

/* The NaN and Inf rules on the path runs use (cc_compare_at, vectorized, a chunk of 256 at a
 * time): an output of 600 f32 values, exact but for planted elements on both sides of the chunk
 * boundaries, each element's ratio as the rules say. */
static void test_nan_and_inf_rules_on_the_vectorized_path(void **state)
{
    (void)state;
    enum { N = 600 };
    static double expected[N], mag[N];
    static float got[N];
    for (int i = 0; i < N; i++) {
        expected[i] = (double)(float)(1.0 + i / 8.0);
        mag[i] = expected[i];
        got[i] = (float)expected[i];
    }
    static const struct {
        int at;
        double expected;
        float got;
        double ratio;  /* strict rules */
        double alike;  /* nonfinite_alike (edge=nan, edge=inf cases) */
    } planted[] = {
        {3, NAN, NAN, 0, 0},                          /* NaN where NaN is expected */
        {100, NAN, 1.0f, INFINITY, INFINITY},         /* a number where NaN is expected */
        {255, 7.0, NAN, INFINITY, INFINITY},          /* NaN where a number is expected */
        {256, INFINITY, -INFINITY, INFINITY, 0},      /* Inf of the wrong sign */
        {257, INFINITY, INFINITY, 0, 0},              /* Inf of the right sign */
        {258, -INFINITY, NAN, INFINITY, 0},           /* NaN where -Inf is expected */
        {300, 1e39, INFINITY, 0, 0},                  /* the f32 overflow of 1e39 */
        {301, 1e39, -INFINITY, INFINITY, INFINITY},   /* ... not of its sign */
        {302, 5.0, INFINITY, INFINITY, INFINITY},     /* Inf for a value that does not overflow */
        {511, -INFINITY, 3.0f, INFINITY, INFINITY},   /* a number where -Inf is expected */
        {512, NAN, INFINITY, INFINITY, 0},            /* Inf where NaN is expected */
        {599, 2.0, -INFINITY, INFINITY, INFINITY},    /* the last element */
    };
    const int n_planted = (int)(sizeof planted / sizeof planted[0]);
    for (int k = 0; k < n_planted; k++) {
        expected[planted[k].at] = planted[k].expected;
        got[planted[k].at] = planted[k].got;
        mag[planted[k].at] = isfinite(planted[k].expected) ? fabs(planted[k].expected) : 1.0;
    }
    cc_view v = cc_t_vector_view(CC_F32, got, N);
    for (int alike = 0; alike < 2; alike++) {
        cc_bound_model m = cc_bound_for(CC_F32, 2.0);
        m.nonfinite_alike = alike;
        static cc_element_judgement each[N];
        cc_comparison c;
        cc_compare_at_each(expected, &(ref_mag){mag, NULL, NULL}, NULL, 0, &v, &m, &c, each);
        int over = 0, first_over = -1;
        for (int i = 0; i < N; i++) {
            double want = 0.0;
            for (int k = 0; k < n_planted; k++)
                if (planted[k].at == i)
                    want = alike ? planted[k].alike : planted[k].ratio;
            if (!(each[i].ratio == want))
                fail_msg("element %d (expected %g, got %g), nonfinite_alike %d: ratio %g, the "
                         "rules say %g",
                         i, expected[i], (double)got[i], alike, each[i].ratio, want);
            assert_true(each[i].suspect_ratio == want); /* the same rules */
            over += want > 1.0;
            if (want > 1.0 && first_over < 0)
                first_over = i;
        }
        assert_int_equal(c.n, N);
        assert_int_equal(c.n_over, over);
        assert_int_equal(c.n_over, alike ? 6 : 9);
        assert_int_equal(c.n_nan_mismatch, 4); /* at 100, 255, 258 and 512 */
        assert_int_equal(c.worst_index, first_over);
        assert_int_equal(c.worst_index, 100);
        assert_true(c.worst_ratio == INFINITY && isnan(c.expected) && c.got == 1.0);
        assert_true(c.suspect_ratio == INFINITY);
    }
}

/* Vacuity (compare.h): a bound that admits every finite value of the dtype, or every value of
 * the output's own magnitude; the output is vacuous when every finite expected value is. */
static void test_vacuity_is_the_rule(void **state)
{
    (void)state;
    cc_bound_model m = cc_bound_for(CC_F16, 1.0);
    /* f16: max finite 65504. m = 1e9: bound = (2^-24+2^-53)*1e9 + (2^-11+2^-53)*1e9 + 2^-14,
     * far above 65504 + |x| */
    double expected[300], worst[300];
    uint16_t got[300];
    for (int i = 0; i < 300; i++) {
        expected[i] = 1.0;
        worst[i] = 1e9;
        cc_store(CC_F16, got, i, 1.0);
    }
    cc_view v = cc_t_vector_view(CC_F16, got, 300);
    cc_comparison c;
    cc_compare(expected, &(ref_mag){worst, NULL, NULL}, &v, &m, &c);
    assert_int_equal(c.n_vacuous, 300);
    assert_true(c.vacuous);
    /* one element of the last chunk judged by a real bound: the output is not vacuous */
    worst[299] = 1.0;
    cc_compare(expected, &(ref_mag){worst, NULL, NULL}, &v, &m, &c);
    assert_int_equal(c.n_vacuous, 299);
    assert_false(c.vacuous);
    /* a non-finite expected value is judged exactly: never vacuous, and not counted */
    expected[299] = NAN;
    cc_store(CC_F16, got, 299, NAN);
    cc_compare(expected, &(ref_mag){worst, NULL, NULL}, &v, &m, &c);
    assert_int_equal(c.n_vacuous, 299);
    assert_true(c.vacuous);
    /* the output's own magnitude: bound - floor >= |x| + out_max admits 0 and -x */
    cc_bound_model f32 = cc_bound_for(CC_F32, 1.0);
    double small[2] = {1.0, 2.0}, big_mag[2] = {3.0 * 0x1p24, 1.0};
    float g2[2] = {1.0f, 2.0f};
    cc_view v2 = cc_t_vector_view(CC_F32, g2, 2);
    cc_compare(small, &(ref_mag){big_mag, NULL, NULL}, &v2, &f32, &c);
    /* element 0: bound - floor = (2^-24+2^-53) 3 2^24 = 3 + 3 2^-29 >= 1 + out_max (2) */
    assert_int_equal(c.n_vacuous, 1);
    assert_false(c.vacuous);
    assert_true(cc_bound_is_vacuous(1.0, 3.0 + 0x1p-126, 2.0, CC_F32, &f32));
    assert_false(cc_bound_is_vacuous(1.0, nextafter(3.0, 0) + 0x1p-126, 2.0, CC_F32, &f32));
    /* an output that is zero has no magnitude of its own: only the dtype's rule applies */
    assert_false(cc_bound_is_vacuous(0.0, 1.0, 0.0, CC_F32, &f32));
    assert_true(cc_bound_is_vacuous(0.0, 0x1.fffffep127, 0.0, CC_F32, &f32));
}

/* An output of Inf inputs (compare.h, cc_output_is_vacuous): the spectrum of a row holding
 * +Inf, whose real parts are Inf or NaN and whose DC and Nyquist imaginary parts are 0 with an
 * infinite bound, is judged by its NaN/Inf pattern: not vacuous, and a finite value where Inf
 * is expected fails. Only that: finite values with finite, vacuous bounds beside it, or finite
 * values alone with infinite bounds, leave the output vacuous. */
static void test_vacuity_of_an_output_of_inf_inputs(void **state)
{
    (void)state;
    cc_bound_model m = cc_bound_for(CC_F32, 1.0);
    /* [re0, im0, re1, im1, re2, im2]: bins 0 and 2 are DC and Nyquist of a length-4 rfft */
    double spectrum[6] = {INFINITY, 0.0, NAN, NAN, INFINITY, 0.0};
    double mag[6] = {INFINITY, INFINITY, INFINITY, INFINITY, INFINITY, INFINITY};
    float got[6] = {INFINITY, 0.0f, NAN, NAN, INFINITY, 0.0f};
    cc_view v = cc_t_vector_view(CC_F32, got, 6);
    cc_comparison c;
    cc_compare(spectrum, &(ref_mag){mag, NULL, NULL}, &v, &m, &c);
    assert_int_equal(c.n_vacuous, 2);
    assert_false(c.vacuous);
    assert_int_equal(c.n_over, 0);
    got[4] = 3.0e38f; /* the Nyquist real part finite: the pattern rejects it */
    cc_compare(spectrum, &(ref_mag){mag, NULL, NULL}, &v, &m, &c);
    assert_int_equal(c.n_over, 1);
    got[4] = INFINITY;
    /* a finite value with a finite bound that admits everything: vacuous again */
    spectrum[4] = 1.0;
    got[4] = 1.0f;
    mag[4] = 1e47; /* bound c u m = 2^-24 1e47 > the largest float */
    cc_compare(spectrum, &(ref_mag){mag, NULL, NULL}, &v, &m, &c);
    assert_int_equal(c.n_vacuous, 3);
    assert_true(c.vacuous);
    /* finite values alone, every bound infinite: nothing but finiteness checked, vacuous */
    assert_true(cc_output_is_vacuous(2, 2, 2, 2));
    assert_false(cc_output_is_vacuous(3, 2, 2, 2));
    assert_true(cc_output_is_vacuous(3, 2, 2, 1));
    assert_false(cc_output_is_vacuous(3, 0, 0, 0));
}

/* The probabilistic bound judges an element where its worst-case bound is vacuous, the model
 * allows it (prob_judges) and it is the smaller; nowhere else. */
static void test_probabilistic_bound_judges_vacuous_elements(void **state)
{
    (void)state;
    const double u = 0x1p-24 + 0x1p-53, floor32 = 0x1p-126;
    cc_bound_model m = cc_bound_for(CC_F32, 1.0);
    assert_true(m.prob_judges && !m.bias_test);
    /* where the model allows it: f64, f32, strict f16/bf16 (float32 accumulation); not a fold
     * in the dtype (relaxed) nor a declared coarser arithmetic (TF32) */
    assert_true(cc_bound_for(CC_F64, 1.0).prob_judges && cc_bound_for(CC_BF16, 1.0).prob_judges);
    assert_false(cc_bound_for_judging(CC_BF16, 0.0, 1.0, CC_ACC_RELAXED).prob_judges);
    assert_false(cc_bound_for_compute(CC_F32, 0x1p-11, 1.0).prob_judges);
    assert_false(cc_bound_for_compute(CC_F16, 0x1p-11, 1.0).prob_judges);
    /* a sum of 10^8-scale magnitude and result 10: worst-case bound u 1e9 + floor (59.6) admits
     * 0 and -10 (vacuous against the output's own magnitude 20); the probabilistic bound
     * 6 u 1e5 + floor (0.0358) does not */
    cc_element_mag mag = {1e9, 10.0, 1e5};
    double worst = u * 1e9 + floor32, prob = u * (6.0 * 1e5) + floor32;
    int by_prob = -1;
    assert_true(cc_element_judging_bound(&m, mag, 10.0, 20.0, CC_F32, &by_prob) == prob);
    assert_int_equal(by_prob, 1);
    /* not vacuous (the output's own magnitude 100): the worst-case bound judges */
    assert_true(cc_element_judging_bound(&m, mag, 10.0, 100.0, CC_F32, &by_prob) == worst);
    assert_int_equal(by_prob, 0);
    /* the model does not allow it */
    cc_bound_model off = m;
    off.prob_judges = 0;
    assert_true(cc_element_judging_bound(&off, mag, 10.0, 20.0, CC_F32, &by_prob) == worst);
    assert_int_equal(by_prob, 0);
    /* a short sum: the probabilistic bound is the larger, the worst-case one stays */
    cc_element_mag short_sum = {1e9, 10.0, 1e9};
    assert_true(cc_element_judging_bound(&m, short_sum, 10.0, 20.0, CC_F32, NULL) == worst);
    /* on an output: elements 0 and 1 vacuous and judged by it, element 2 not vacuous */
    double expected[3] = {10.0, -10.0, 1.0}, wp[3] = {1e9, 1e9, 1.0}, dp[3] = {10, 10, 1},
           pp[3] = {1e5, 1e5, 1.0};
    float got[3] = {10.03f, -10.0f, 1.0f};
    cc_view v = cc_t_vector_view(CC_F32, got, 3);
    cc_comparison c;
    cc_compare(expected, &(ref_mag){wp, dp, pp}, &v, &m, &c);
    assert_int_equal(c.n_prob, 2);
    assert_true(c.own_max == 10.0);
    assert_int_equal(c.worst_index, 0);
    assert_true(c.worst_by_prob && c.bound == prob);
    assert_true(c.worst_ratio == ((double)10.03f - 10.0) / prob); /* 0.84: passes */
    assert_int_equal(c.n_vacuous, 0);
    assert_false(c.vacuous);
    got[0] = 10.04f; /* over the probabilistic bound, far inside the worst-case one */
    cc_compare(expected, &(ref_mag){wp, dp, pp}, &v, &m, &c);
    assert_true(c.worst_ratio > 1.0 && c.n_over == 1);
    cc_compare(expected, &(ref_mag){wp, dp, pp}, &v, &off, &c);
    assert_true(c.worst_ratio < 1e-3 && c.n_prob == 0 && c.n_vacuous == 2 && !c.worst_by_prob);
    /* vacuous even by the probabilistic bound: counted so */
    double pbig[3] = {1e9 / 6.0 * 0.9, 1e9 / 6.0 * 0.9, 1.0};
    cc_compare(expected, &(ref_mag){wp, dp, pbig}, &v, &m, &c);
    assert_int_equal(c.n_prob, 2);
    assert_int_equal(c.n_vacuous, 2);
}

/* x rounded to bf16 toward zero, and to nearest. */
static double bf16_toward_zero(double x)
{
    double r = cc_round_to(CC_BF16, x);
    return fabs(r) > fabs(x) ? r - copysign(cc_ulp(CC_BF16, x), x) : r;
}

/* n distinct bf16-inexact values (1 + (2k+1)/2^12, signs alternating), magnitudes of an
 * accumulation (m = 100|y|, dtype = |y|, prob = 10|y|); got converted toward zero (trunc) or
 * to nearest. Returns the comparison. */
static cc_comparison bias_of(int n, int trunc, const cc_bound_model *m)
{
    double e[128], w[128], d[128], p[128];
    uint16_t got[128];
    for (int k = 0; k < n; k++) {
        e[k] = (1.0 + (2.0 * k + 1.0) / 4096.0) * (k % 2 ? -1.0 : 1.0);
        w[k] = 100.0 * fabs(e[k]);
        d[k] = fabs(e[k]);
        p[k] = 10.0 * fabs(e[k]);
        cc_store(CC_BF16, got, k, trunc ? bf16_toward_zero(e[k]) : e[k]);
    }
    cc_view v = cc_t_vector_view(CC_BF16, got, n);
    cc_comparison c;
    cc_compare(e, &(ref_mag){w, d, p}, &v, m, &c);
    return c;
}

/* The rounding-bias test (compare.h): the sign test's threshold, its minimum count, a
 * truncating conversion rejected, round to nearest not, and which elements enter it. */
static void test_rounding_bias_test(void **state)
{
    (void)state;
    assert_true(cc_bias_z_threshold() == sqrt(2.0 * log(2.0 / 1e-9)));
    assert_true(cc_bias_z_threshold() > sqrt(42.0) && cc_bias_z_threshold() < sqrt(43.0));
    cc_bound_model m = cc_bound_for(CC_BF16, 2.0);
    assert_true(m.bias_test && cc_bound_for(CC_F16, 2.0).bias_test);
    assert_false(cc_bound_for(CC_F32, 2.0).bias_test || cc_bound_for(CC_F64, 2.0).bias_test);
    /* 64 values truncated: every one toward zero, z = (2 64 - 64) / 8 = 8 */
    cc_comparison c = bias_of(64, 1, &m);
    assert_int_equal(c.bias.n, 64);
    assert_int_equal(c.bias.toward_zero, 64);
    assert_true(c.bias.z == 8.0 && c.bias.biased);
    assert_true(c.bias.mean_ulp < -0.4 && c.bias.mean_ulp > -1.0);
    assert_true(c.worst_ratio <= 1.0); /* inside the bound: only the bias test sees it */
    /* the minimum count: 42 values all one way are not enough (sqrt(42) = 6.48), 43 are */
    c = bias_of(42, 1, &m);
    assert_true(c.bias.n == 42 && c.bias.toward_zero == 42 && !c.bias.biased);
    c = bias_of(43, 1, &m);
    assert_true(c.bias.biased);
    /* round to nearest: these values (1 + (2k+1)/2^12) round to 1 + k'/2^7 either way */
    c = bias_of(128, 0, &m);
    assert_int_equal(c.bias.n, 128);
    assert_false(c.bias.biased);
    assert_true(fabs(c.bias.z) <= cc_bias_z_threshold());
    /* the test off: nothing enters it */
    cc_bound_model off = m;
    off.bias_test = 0;
    c = bias_of(64, 1, &off);
    assert_true(c.bias.n == 0 && !c.bias.biased && c.bias.z == 0.0);
    /* which elements enter: 1 + 3/2^12 (inexact, accumulated: m = 100, prob = 10) does */
    cc_element_mag acc = {100.0, 1.0, 10.0};
    double x = 1.0 + 3.0 / 4096.0, rx = cc_round_to(CC_BF16, x);
    assert_true(cc_bias_candidate(&m, acc, x, rx, CC_BF16));
    assert_false(cc_bias_candidate(&m, acc, 1.5, 1.5, CC_BF16));           /* representable */
    assert_false(cc_bias_candidate(&m, acc, 1.0 + 1.0 / 256.0, 1.0, CC_BF16)); /* a tie */
    assert_false(cc_bias_candidate(&m, (cc_element_mag){100.0, 2.0, 10.0}, x, rx, CC_BF16));
    assert_false(cc_bias_candidate(&m, (cc_element_mag){100.0, 1.0, 60.0}, x, rx, CC_BF16));
    assert_false(cc_bias_candidate(&m, (cc_element_mag){1.0, 1.0, 1.0}, x, rx, CC_BF16));
    assert_false(cc_bias_candidate(&m, acc, x, NAN, CC_BF16));
    assert_false(cc_bias_candidate(&m, acc, 0x1.8p-130, 0x1p-130, CC_BF16)); /* subnormal */
    assert_false(cc_bias_candidate(&m, acc, NAN, NAN, CC_BF16));
    assert_false(cc_bias_candidate(&off, acc, x, rx, CC_BF16));
    /* repeated values count once: 64 elements of 8 distinct values, truncated */
    double e[64], w[64], d[64], p[64];
    uint16_t got[64];
    for (int k = 0; k < 64; k++) {
        e[k] = 1.0 + (2.0 * (k % 8) + 1.0) / 4096.0;
        w[k] = 100.0 * e[k];
        d[k] = e[k];
        p[k] = 10.0 * e[k];
        cc_store(CC_BF16, got, k, bf16_toward_zero(e[k]));
    }
    cc_view v = cc_t_vector_view(CC_BF16, got, 64);
    cc_compare(e, &(ref_mag){w, d, p}, &v, &m, &c);
    assert_true(c.bias.n == 8 && c.bias.toward_zero == 8 && !c.bias.biased);
    /* the verdict from counts alone (what a record read back decides again) */
    cc_bias b = {100, 80, 50, 0.0, 0.0, 0};
    cc_bias_decide(&b);
    assert_true(b.z == 6.0 && !b.biased);
    b = (cc_bias){100, 50, 17, 0.0, 0.0, 0};
    cc_bias_decide(&b);
    assert_true(b.z == -6.6 && b.biased);
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
        cmocka_unit_test(test_bounds_are_the_formulas),
        cmocka_unit_test(test_ratio_at_the_bound),
        cmocka_unit_test(test_nan_and_inf_rules_on_the_vectorized_path),
        cmocka_unit_test(test_vacuity_is_the_rule),
        cmocka_unit_test(test_vacuity_of_an_output_of_inf_inputs),
        cmocka_unit_test(test_probabilistic_bound_judges_vacuous_elements),
        cmocka_unit_test(test_rounding_bias_test),
        cmocka_unit_test(test_rounding_to_each_dtype),
        cmocka_unit_test(test_fast_rounding_matches_the_formula),
    };
    return cmocka_run_group_tests_name("compare_and_dtypes", tests, NULL, NULL);
}
