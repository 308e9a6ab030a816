/* Edge-value classes: their names and which inputs take them (the table in edge_class.h). */
#include "harness/case/edge_class.h"

#include <string.h>

const char *const cc_edge_class_names[CC_EDGE_COUNT] = {
    "nan", "inf", "signed-zero", "subnormal", "huge", "ties", "masked-row", "moderate",
    "large-mean"};

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

int cc_edge_input_takes(const ref_op *op, const ref_domain *d, int cls)
{
    return domain_takes(d, cls) && (cls != CC_EDGE_LARGE_MEAN || takes_large_mean(op));
}

int cc_edge_applies(const ref_op *op, const ref_params *p, int n_in, const ref_shape *shape,
                    int cls)
{
    for (int i = 0; i < n_in; i++) {
        ref_domain d;
        ref_default_domain(op, p, n_in, shape, i, &d);
        if (ref_numel(&shape[i]) > 0 && cc_edge_input_takes(op, &d, cls))
            return 1;
    }
    return 0;
}
