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
 *   wide         the N(0,1) inputs of the ops that form an intermediate a correct kernel keeps
 *                in range while a kernel that forms it in the dtype (or without its max
 *                subtraction) does not; the output stays finite:
 *                softmax, logSoftmax, hardMaskedSoftmax, crossEntropy (logits), distill
 *                (both), softmaxMatmul (scores): all dtypes, LOGITS; attention q, k: all
 *                dtypes, SCORES; sigmoid, silu, softplus, tanh, gelu: all dtypes, EXP_ARGS;
 *                layerNorm, batchNorm (x): f16, SQUARES; reduceMean: f16, SUM; mseLoss (a):
 *                f16, SQUARE_SUM (cc_wide_kind). bf16's range is float32's: a bf16 square or sum
 *                past it is past the accumulator's too, so those are f16's alone.
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

#include "core/dtype.h"
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
    CC_EDGE_WIDE,        /* intermediates past the dtype's range, outputs finite (below) */
    CC_EDGE_COUNT
};
extern const char *const cc_edge_class_names[CC_EDGE_COUNT]; /* "nan", "inf", ... */

/* How `wide` places its values in an input (CC_WIDE_NONE: it takes none). */
typedef enum {
    CC_WIDE_NONE,
    CC_WIDE_LOGITS,     /* the whole input offset by +-[1, 1.5) x T: exp past its overflow */
    CC_WIDE_EXP_ARGS,   /* 1/4 of the elements at +-[1, 2) x T: an activation's exp */
    CC_WIDE_SCORES,     /* every row of q and k one value +-W: s q.k = +-58,950 (f16),
                           +-1.5 T elsewhere */
    CC_WIDE_SQUARES,    /* f16: x times [512, 1024): squares past 65504 */
    CC_WIDE_SUM,        /* f16: an offset of +-[1024, 2048): the sum past 65504, the mean not */
    CC_WIDE_SQUARE_SUM  /* f16: 1/32 of the elements at +-[256, 300): a square past 65504 */
} cc_wide_kind;

/* T, the exp argument past which the dtype's compute type overflows: log of float32's largest
 * value (88.72) for f32 and for f16/bf16 (computed in float32, ops.md), log of float64's
 * (709.78) for f64. */
double cc_wide_exp_limit(cc_dtype t);
/* How `wide` reaches input `input` of op in dtype t (the table below). */
cc_wide_kind cc_wide_kind_of(const ref_op *op, cc_dtype t, int input);

/* 1 when input `input` of op in dtype t, drawn from domain d, takes class cls (the table's
 * second column). */
int cc_edge_input_takes(const ref_op *op, cc_dtype t, int input, const ref_domain *d, int cls);
/* 1 when class cls puts values into at least one input that has elements, of an op with these
 * parameters, dtype and input shapes (a case's op, params, dtype, n_in, shape). */
int cc_edge_applies(const ref_op *op, const ref_params *p, cc_dtype t, int n_in,
                    const ref_shape *shape, int cls);

#endif
