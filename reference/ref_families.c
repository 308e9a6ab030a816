/* The list of op families and the helpers they share. Adding a family: one line here and one
 * REF_FAMILY line in ref_families.h. */
#include "ref_families.h"

#define FAMILY(name) {ref_family_##name, &ref_family_##name##_count}

const ref_family ref_families[] = {
    FAMILY(random), FAMILY(pointwise), FAMILY(softmax), FAMILY(reduce), FAMILY(shape),
    FAMILY(linalg),  FAMILY(loss),      FAMILY(norm),    FAMILY(conv),   FAMILY(pool),
    FAMILY(composite), FAMILY(custom),  {0, 0}};

ref_status ref_same_shape(int n, const ref_shape *in, ref_shape *out, ref_err *e)
{
    for (int i = 1; i < n; i++)
        if (!ref_shape_eq(&in[0], &in[i])) {
            char a[96], b[96];
            ref_shape_fmt(&in[0], a, sizeof a);
            ref_shape_fmt(&in[i], b, sizeof b);
            return ref_err_set(e, "input %d has shape %s but input 0 has %s (same shape required)",
                               i, b, a);
        }
    *out = in[0];
    return REF_OK;
}

ref_status ref_sample_same_shapes(ref_rng *r, const ref_sample_req *req, int n_inputs, int *n,
                                  ref_shape *in)
{
    int rank = req->rank >= 0 ? req->rank : (int)ref_rng_range(r, 1, 3);
    ref_sample_shape(r, rank, req->max_elems, req->zero_dim, &in[0]);
    for (int i = 1; i < n_inputs; i++)
        in[i] = in[0];
    *n = n_inputs;
    return REF_OK;
}

ref_axis_split ref_split_axis(const ref_shape *s, int axis)
{
    ref_axis_split a = {1, 1, 1};
    for (int i = 0; i < s->rank; i++) {
        if (i < axis)
            a.outer *= s->dim[i];
        else if (i == axis)
            a.len = s->dim[i];
        else
            a.inner *= s->dim[i];
    }
    return a;
}
