/* Internal to reference/: each op family file exports one table; ref_util.c lists them. */
#ifndef CAPCHECK_REF_FAMILIES_H
#define CAPCHECK_REF_FAMILIES_H

#include "ref.h"

typedef struct {
    const ref_op *ops;
    const int *count;
} ref_family;

#define REF_FAMILY(name)                                                                         \
    extern const ref_op ref_family_##name[];                                                     \
    extern const int ref_family_##name##_count;

REF_FAMILY(pointwise)
REF_FAMILY(softmax)
REF_FAMILY(reduce)
REF_FAMILY(linalg)
REF_FAMILY(norm)
REF_FAMILY(random)
REF_FAMILY(shape)
REF_FAMILY(loss)
REF_FAMILY(conv)
REF_FAMILY(pool)
REF_FAMILY(composite)
REF_FAMILY(custom)

#undef REF_FAMILY

/* NULL-terminated list of the families (ref_families.c). */
extern const ref_family ref_families[];

/* The spec vocabulary, including ops not implemented yet (reported as missing). */
int ref_spec_op_count(void);
const char *ref_spec_op_name(int i);

/* Helpers shared by families. */
ref_status ref_same_shape(int n, const ref_shape *in, ref_shape *out, ref_err *e);
ref_status ref_sample_same_shapes(ref_rng *r, const ref_sample_req *req, int n_inputs,
                                  int *n, ref_shape *in);

/* Strided view of one axis: a tensor of shape s seen as (outer, len, inner) around `axis`. */
typedef struct {
    int64_t outer, len, inner;
} ref_axis_split;
ref_axis_split ref_split_axis(const ref_shape *s, int axis);

#endif
