/* Edge-value classes (DESIGN.md, Materialize): the vocabulary of the edge= key and the rule of
 * which inputs take each class. The parser (case.c) refuses a class that reaches no input of a
 * case, the generator leaves such draws out, and edges.c puts the values in: all three read the
 * rule here. A case may name one class; its inputs then carry the class's values at positions
 * fixed by the seed. A case's `edges` is a bit mask of classes (1u << CC_EDGE_NAN ...); 0 is an
 * ordinary case.
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
#ifndef CAPCHECK_EDGE_CLASS_H
#define CAPCHECK_EDGE_CLASS_H

#include "reference/ref.h"

enum {
    CC_EDGE_NAN,         /* NaN */
    CC_EDGE_INF,         /* +-Inf */
    CC_EDGE_SIGNED_ZERO, /* +0 and -0 */
    CC_EDGE_SUBNORMAL,   /* the dtype's subnormals, both signs */
    CC_EDGE_HUGE,        /* |x| up to the cube root of the dtype's largest finite value */
    CC_EDGE_TIES,        /* every value from a small set holding the op's kinks: ties, kinks */
    CC_EDGE_MASKED_ROW,  /* mask inputs with fully blocked rows */
    CC_EDGE_MODERATE,    /* |x| in [10, 100): activation thresholds, overflow guards */
    CC_EDGE_LARGE_MEAN,  /* a large offset, spread 1: where a one-pass variance cancels */
    CC_EDGE_COUNT
};
extern const char *const cc_edge_class_names[CC_EDGE_COUNT]; /* "nan", "inf", ... */

/* 1 when input domain d of op takes class cls (the table's second column). */
int cc_edge_input_takes(const ref_op *op, const ref_domain *d, int cls);
/* 1 when class cls puts values into at least one input that has elements, of an op with these
 * parameters and input shapes (a case's op, params, n_in, shape). */
int cc_edge_applies(const ref_op *op, const ref_params *p, int n_in, const ref_shape *shape,
                    int cls);

#endif
