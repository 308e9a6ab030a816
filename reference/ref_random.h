/* Statistical and structural checks for the random sources (ops.md A: randUniform,
 * bernoulliMask).
 *
 * The reference output of randUniform / bernoulliMask *is* TorchLean's exact splitmix64 stream,
 * so a provider that reproduces the stream is compared element by element like any other op.
 * A provider with its own generator (torch.rand, a plugin's RNG) cannot match element-wise; it
 * is judged by these checks instead: structure (range, exact 0/1 values, the endpoint rules)
 * and distribution (hypothesis tests at significance alpha, so a correct generator fails with
 * probability at most alpha). The statistics and critical values are documented in
 * ref_random.c. Both return 1 when the sample passes, 0 otherwise; `why` (when non-NULL)
 * receives one sentence with the statistics either way. */
#ifndef CAPCHECK_REF_RANDOM_H
#define CAPCHECK_REF_RANDOM_H

#include <stddef.h>
#include <stdint.h>

/* x[0..n) should be independent U[0,1] draws (the value 1 itself is allowed: float32 rounding
 * of the top draws). Checks: every value in [0,1] (NaN fails); for n >= 20 the mean and the
 * sample variance against 1/2 and 1/12; a Kolmogorov-Smirnov test against U[0,1]. alpha in
 * (0,1) is the total false-alarm probability (split over the three tests). */
int ref_check_uniform_sample(const double *x, int64_t n, double alpha, char *why, size_t len);

/* x[0..n) should be a bernoulliMask with keep probability keep_prob. Checks: every value is
 * exactly 0 or 1; !(keep_prob > 0) (including NaN) -> all 0; !(1 > keep_prob) -> all 1; else an
 * exact two-sided binomial test of the number of ones at significance alpha. */
int ref_check_mask_sample(const double *x, int64_t n, double keep_prob, double alpha, char *why,
                          size_t len);

#endif
