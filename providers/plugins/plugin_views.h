/* Reading and writing the views a plugin gets (abi/capcheck_provider.h), for float32 and float64:
 * the three helpers every simple plugin needs, header-only so a plugin built outside the project
 * needs nothing but -I<capcheck>. Inputs are strided (strides in elements, 0 on a broadcast axis);
 * outputs and gradients are dense row-major. */
#ifndef CAPCHECK_PLUGIN_VIEWS_H
#define CAPCHECK_PLUGIN_VIEWS_H

#include "abi/capcheck_provider.h"

/* Element `i` (row-major over the view's shape) of a strided f32/f64 view, as a double. */
static inline double cc_plugin_load(const cc_view *v, int64_t i)
{
    int64_t off = 0;
    for (int a = v->rank - 1; a >= 0; a--) {
        int64_t d = v->shape[a];
        off += (i % d) * v->strides[a];
        i /= d;
    }
    return v->dtype == CC_F64 ? ((const double *)v->data)[off]
                              : (double)((const float *)v->data)[off];
}

/* Element i of a dense f32/f64 output: rounded once to its dtype. */
static inline void cc_plugin_store(cc_view *v, int64_t i, double x)
{
    if (v->dtype == CC_F64)
        ((double *)v->data)[i] = x;
    else
        ((float *)v->data)[i] = (float)x;
}

static inline int64_t cc_plugin_numel(const cc_view *v)
{
    int64_t n = 1;
    for (int a = 0; a < v->rank; a++)
        n *= v->shape[a];
    return n;
}

#endif
