/* Tensor views: dense strides and dense float64 copies (view.h). */
#include "core/view.h"

#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"

void cc_dense_strides(const ref_shape *s, int64_t *strides)
{
    int64_t st = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        strides[i] = st;
        st *= s->dim[i] > 0 ? s->dim[i] : 1;
    }
}

double *cc_view_to_dense(const cc_view *v, ref_shape *shape)
{
    shape->rank = v->rank;
    memcpy(shape->dim, v->shape, sizeof(int64_t) * (size_t)v->rank);
    int64_t n = ref_numel(shape);
    double *x = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (!x)
        return NULL;
    int64_t idx[REF_MAX_RANK] = {0};
    for (int64_t j = 0; j < n; j++) {
        int64_t off = 0;
        for (int a = 0; a < v->rank; a++)
            off += idx[a] * v->strides[a];
        x[j] = cc_load(v->dtype, v->data, off);
        for (int a = v->rank - 1; a >= 0; a--) {
            if (++idx[a] < v->shape[a])
                break;
            idx[a] = 0;
        }
    }
    return x;
}

