/* The full reference of a case, forward and VJP, as tests of the reference's own forms hold
 * other forms to it (tests/test_ref_sampled.c, tests/test_ref_compensated.c). Header-only,
 * static; include after <cmocka.h>. */
#ifndef CAPCHECK_TESTS_FULL_REF_UTIL_H
#define CAPCHECK_TESTS_FULL_REF_UTIL_H

#include <stdlib.h>
#include <string.h>

#include "harness/case/materialize.h"

static __attribute__((unused)) int is_data(const ref_op *op, int i)
{
    int k = i < op->max_inputs ? i : op->max_inputs - 1;
    return op->input_kind[k < REF_MAX_INPUTS ? k : REF_MAX_INPUTS - 1] == REF_IN_DATA;
}

typedef struct {
    ref_tensor y;
    ref_mag mag;
    ref_tensor grad[REF_MAX_INPUTS];
    ref_mag gmag[REF_MAX_INPUTS];
} full_ref;

static __attribute__((unused)) void full_free(full_ref *f)
{
    free(f->y.v), ref_mag_free(&f->mag);
    for (int i = 0; i < REF_MAX_INPUTS; i++)
        free(f->grad[i].v), ref_mag_free(&f->gmag[i]);
}

/* The full reference of c (its values and magnitudes, every data input's gradient where the op
 * has a VJP) under
 * parameters p (c's, with the threads and plain_sums a test chooses); -1 when the reference
 * refuses the case. */
static __attribute__((unused)) int full_run(const cc_case *c, const cc_inputs *in,
                                            const ref_params *params, full_ref *f)
{
    memset(f, 0, sizeof *f);
    ref_params p = *params;
    int64_t ny = ref_numel(&in->out_shape);
    f->y = (ref_tensor){in->out_shape, calloc((size_t)ny + 1, sizeof(double))};
    assert_int_equal(ref_mag_alloc(ny, &f->mag), 0);
    if (c->op->forward(&p, c->n_in, in->ref_in, &f->y, &f->mag) != REF_OK)
        return -1;
    ref_mag_complete(&f->mag, ny);
    for (int i = 0; c->op->vjp && i < c->n_in; i++) {
        f->grad[i].shape = c->shape[i];
        if (!is_data(c->op, i))
            continue;
        int64_t n = ref_numel(&c->shape[i]);
        f->grad[i].v = calloc((size_t)n + 1, sizeof(double));
        assert_int_equal(ref_mag_alloc(n, &f->gmag[i]), 0);
    }
    if (c->op->vjp && c->op->vjp(&p, c->n_in, in->ref_in, &f->y, &in->g, f->grad, f->gmag) !=
                          REF_OK)
        return -1;
    for (int i = 0; i < c->n_in; i++)
        if (f->grad[i].v)
            ref_mag_complete(&f->gmag[i], ref_numel(&c->shape[i]));
    return 0;
}

#endif
