/* Tensor views (abi/capcheck_provider.h's cc_view) as the harness, the providers and the plugins
 * all read them: dense row-major strides for a shape, and a dense float64 copy of any strided
 * view. */
#ifndef CAPCHECK_VIEW_H
#define CAPCHECK_VIEW_H

#include <stdint.h>

#include "abi/capcheck_provider.h"

/* Dense float64 copy of a strided view (caller frees); NULL when out of memory. */
double *cc_view_to_dense(const cc_view *v, ref_shape *shape);
/* Dense view strides for a shape. */
void cc_dense_strides(const ref_shape *s, int64_t *strides);

#endif
