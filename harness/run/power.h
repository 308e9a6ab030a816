/* Detection power: the smallest error the judge rejects, measured on a correct provider.
 *
 * For every output and gradient a case compares, the provider's own values are perturbed and
 * judged again under the same bound model (rounded to the dtype, as a provider would store them):
 *   k    expected_i + k * (got_i - expected_i): "a kernel k times less accurate than this one",
 *        each element's error scaled by k (the typical error of a correct kernel is the one it
 *        made on that element; an element it got exactly right stays right);
 *   ulp  got_i + j * ulp(got_i) * s_i, s_i the sign of element i's own error (+ where it is
 *        exact): "a kernel off by j more ulps everywhere".
 * The figure of a check is the smallest k (on the ladder 1, 1.41, 2, 2.83, .. 2^30) and the
 * smallest j (1, 2, 4, .. 2^30) that make it fail, and the same with suspect counted as a
 * failure; a case keeps the smallest over its checks. 0: the unperturbed output is already
 * rejected; +Inf: nothing on the ladder is; NaN (k only): the provider was exact on every
 * element of every check, so k times its error is no error.
 * And where the rounding-bias test reaches (an f16/bf16 output with values it tests): whether a
 * kernel that truncates the exact result to the dtype (toward zero) is rejected, by the bound
 * alone (trunc_bound) and with the rounding-bias test (trunc): 1 or 0, the largest over the
 * checks; NaN where the test reaches no value.
 * `capcheck power` (harness/tools/power_table.h) reads these figures from results.jsonl (a run
 * with --power) and writes the table per op x dtype. */
#ifndef CAPCHECK_POWER_H
#define CAPCHECK_POWER_H

#include "harness/run/compare.h"

typedef struct {
    double k_fail, k_suspect;     /* in units of the typical error */
    double ulp_fail, ulp_suspect; /* in ulps of the dtype */
    double trunc_bound, trunc;    /* a truncating kernel rejected: 1, 0, NaN (not measured) */
} cc_power;

/* Every figure +Inf except k and the truncation figures: NaN until a check with an error (a
 * value the rounding-bias test reaches) comes. */
void cc_power_init(cc_power *pw);
/* *slot = v when v is larger (NaN never replaces anything; anything replaces NaN). */
void cc_power_keep_larger(double *slot, double v);
/* *slot = v when v is smaller (NaN never replaces anything; anything replaces NaN). */
void cc_power_keep_smaller(double *slot, double v);
/* Merge the figures of one compared output into pw (the smaller figure wins; a NaN k never). */
void cc_power_of_check(const double *expected, const ref_mag *mag, const cc_view *got,
                       const cc_bound_model *m, cc_power *pw);
/* The same on the sampled elements at[0 .. count) of got (expected and mag's planes indexed as
 * cc_compare_at's); at == NULL: every element. */
void cc_power_of_check_at(const double *expected, const ref_mag *mag, const int64_t *at,
                          int64_t count, const cc_view *got, const cc_bound_model *m,
                          cc_power *pw);

#endif
