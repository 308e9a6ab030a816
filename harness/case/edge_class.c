/* Edge-value classes: their names and which inputs take them (the table in edge_class.h). */
#include "harness/case/edge_class.h"

#include <math.h>
#include <string.h>

const char *const cc_edge_class_names[CC_EDGE_COUNT] = {
    "nan", "inf", "signed-zero", "subnormal", "huge", "ties", "masked-row", "moderate",
    "large-mean", "wide"};

/* Whether an input drawn from domain d takes class cls (the table in edge_class.h). */
static int domain_takes(const ref_domain *d, int cls)
{
    if (d->kind == REF_DOM_MASK)
        return cls == CC_EDGE_MASKED_ROW;
    if (d->kind == REF_DOM_INDEX || cls == CC_EDGE_MASKED_ROW)
        return 0;
    switch (d->kind) {
    case REF_DOM_POSITIVE: /* log's input: TorchLean rejects x <= 0 and NaN */
        return cls == CC_EDGE_INF || cls == CC_EDGE_SUBNORMAL || cls == CC_EDGE_HUGE ||
               cls == CC_EDGE_TIES || cls == CC_EDGE_MODERATE || cls == CC_EDGE_LARGE_MEAN;
    case REF_DOM_UNIT: /* probabilities in (0,1) */
        return cls == CC_EDGE_SUBNORMAL || cls == CC_EDGE_TIES;
    case REF_DOM_DISTINCT: /* topKMask: NaN is kept out of its comparisons (ops.md), and values
                              drawn anew could tie */
        return cls != CC_EDGE_NAN && cls != CC_EDGE_MODERATE && cls != CC_EDGE_LARGE_MEAN;
    default:
        return 1;
    }
}

/* large-mean reaches the ops that take a statistic over an axis (a sum, a mean, a variance, a
 * maximum): where an offset must cancel. Elsewhere it only saturates (an activation of x ~ 2^12
 * is 0 or x) or overflows intermediates whose exact result fits, which says nothing new. */
static int takes_large_mean(const ref_op *op)
{
    static const char *const ops[] = {"reduceSum",     "reduceMean", "softmax",   "logSoftmax",
                                      "hardMaskedSoftmax", "layerNorm", "batchNorm", "mseLoss",
                                      "crossEntropy",  "distill",    "maxPool",   "avgPool",
                                      "smoothMaxPool"};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
        if (strcmp(op->name, ops[k]) == 0)
            return 1;
    return 0;
}

/* wide: which inputs of which ops in which dtypes, and how (the table in edge_class.h). */
typedef struct {
    const char *op;
    unsigned inputs;   /* bit i: input i takes it */
    int f16_only;      /* the intermediate crosses f16's range alone (bf16's is float32's) */
    cc_wide_kind kind;
} wide_rule;

static const wide_rule WIDE[] = {
    {"softmax", 1, 0, CC_WIDE_LOGITS},        {"logSoftmax", 1, 0, CC_WIDE_LOGITS},
    {"hardMaskedSoftmax", 1, 0, CC_WIDE_LOGITS}, {"crossEntropy", 1, 0, CC_WIDE_LOGITS},
    {"distill", 3, 0, CC_WIDE_LOGITS},        {"softmaxMatmul", 1, 0, CC_WIDE_LOGITS},
    {"attention", 3, 0, CC_WIDE_SCORES},      {"sigmoid", 1, 0, CC_WIDE_EXP_ARGS},
    {"silu", 1, 0, CC_WIDE_EXP_ARGS},         {"softplus", 1, 0, CC_WIDE_EXP_ARGS},
    {"tanh", 1, 0, CC_WIDE_EXP_ARGS},         {"gelu", 1, 0, CC_WIDE_EXP_ARGS},
    {"layerNorm", 1, 1, CC_WIDE_SQUARES},     {"batchNorm", 1, 1, CC_WIDE_SQUARES},
    {"reduceMean", 1, 1, CC_WIDE_SUM},        {"mseLoss", 1, 1, CC_WIDE_SQUARE_SUM},
};

double cc_wide_exp_limit(cc_dtype t)
{
    return log(cc_max_finite(t == CC_F64 ? CC_F64 : CC_F32));
}

cc_wide_kind cc_wide_kind_of(const ref_op *op, cc_dtype t, int input)
{
    for (size_t k = 0; k < sizeof WIDE / sizeof WIDE[0]; k++)
        if (strcmp(op->name, WIDE[k].op) == 0)
            return input >= 0 && input < 16 && (WIDE[k].inputs >> input & 1) &&
                           (!WIDE[k].f16_only || t == CC_F16)
                       ? WIDE[k].kind
                       : CC_WIDE_NONE;
    return CC_WIDE_NONE;
}

int cc_edge_input_takes(const ref_op *op, cc_dtype t, int input, const ref_domain *d, int cls)
{
    if (cls == CC_EDGE_WIDE)
        return d->kind == REF_DOM_NORMAL && cc_wide_kind_of(op, t, input) != CC_WIDE_NONE;
    return domain_takes(d, cls) && (cls != CC_EDGE_LARGE_MEAN || takes_large_mean(op));
}

int cc_edge_applies(const ref_op *op, const ref_params *p, cc_dtype t, int n_in,
                    const ref_shape *shape, int cls)
{
    for (int i = 0; i < n_in; i++) {
        ref_domain d;
        ref_default_domain(op, p, n_in, shape, i, &d);
        if (ref_numel(&shape[i]) > 0 && cc_edge_input_takes(op, t, i, &d, cls))
            return 1;
    }
    return 0;
}
