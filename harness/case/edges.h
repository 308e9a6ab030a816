/* Edge-value classes (case.h, CC_EDGE_*): which inputs of a case take a class's values,
 * and where. Part of materializing a case: the positions and values depend only on (seed, input,
 * element), like every other drawn value, so an edge case reproduces alone.
 *
 *   class        inputs that take it                    share of elements  values
 *   nan          data inputs drawn from N(0,1)          1/16               NaN
 *   inf          N(0,1); positive domains (+Inf only)   1/16               +-Inf
 *   signed-zero  N(0,1) and distinct-value inputs       1/4                +0, -0
 *   subnormal    every data input (positive domains: +) 1/4                the dtype's subnormals
 *   huge         N(0,1), positive, distinct inputs      1/16               |x| in [M^(1/3)/4,
 *                                                                          M^(1/3)), M the dtype's
 *                                                                          largest finite value
 *   ties         every data input                       all                {-1, -1/2, 0, 1/2, 1}
 *                                                                          and the op's kinks (each
 *                                                                          domain its own set)
 *   masked-row   mask inputs                            1/4 of the rows    a row (last axis) of 0s
 *   moderate     N(0,1); positive domains (+ only)      1/4                |x| in [10, 100),
 *                                                                          log-uniform
 *   large-mean   N(0,1) and positive inputs of ops      all                M + x: one offset M
 *                taking a statistic over an axis
 *                                                                          per input, |M| in
 *                                                                          [1, 2) x 2^k, k = 26
 *                                                                          (f64), 12 (f32), 6
 *                                                                          (f16), 4 (bf16)
 *
 * Huge is the cube root of the range: exp overflows (so softmax must subtract its max) while
 * squares, products and sums of such values stay finite in the dtype. Closer to M, a correct
 * kernel that evaluates in the dtype overflows intermediates whose exact result fits, which the
 * float64 oracle cannot tell from a bug.
 * Index inputs never take edge values. Every input that takes a class and has elements gets at
 * least one edge element. A domain excludes what the op's contract rejects or what makes no
 * sense there: log's strictly positive input takes no NaN, zero or negative values (TorchLean
 * rejects them: REF_EDOMAIN), a probability target in (0,1) takes only subnormals and ties, and
 * topKMask's inputs take no NaN (ops.md: NaN is kept out of its comparisons).
 * Moderate magnitudes are where activation thresholds (softplus's 20, a saturating tanh) and
 * overflow guards act (exp overflows f16 past 11, f32 past 88). Large-mean inputs keep their
 * N(0,1) spread beside an offset of 2^k, k about half the dtype's precision, so every row and
 * every slice has a large mean and a small spread: a one-pass variance E[x^2] - E[x]^2 loses
 * all of it (relative error about u * 2^2k >= 1) while a two-pass or Welford one keeps it.
 * The output cotangent of a VJP check never takes edge values. */
#ifndef CAPCHECK_EDGES_H
#define CAPCHECK_EDGES_H

#include <stdint.h>

#include "harness/case/case.h"

/* 1 when edge class `cls` puts values into at least one input of c that has elements. */
int cc_edge_applies(const cc_case *c, int cls);
/* Apply the case's edge classes to the values drawn for input i (domain d, n values before any
 * broadcast replication; shape s). */
void cc_edge_inject(const cc_case *c, int i, const ref_domain *d, const ref_shape *s, double *x,
                    int64_t n);

#endif
