/* Materialize a case: draw every input in float64 from the case seed, round it to the case
 * dtype, and lay it out for the provider in the case's layout. The reference gets dense float64
 * copies of exactly the rounded values the provider sees. */
#ifndef CAPCHECK_MATERIALIZE_H
#define CAPCHECK_MATERIALIZE_H

#include "core/view.h"
#include "harness/case/case.h"

typedef struct {
    int n_in;
    ref_tensor ref_in[REF_MAX_INPUTS]; /* dense float64, rounded to the dtype */
    cc_view view[REF_MAX_INPUTS];      /* what the provider reads */
    void *storage[REF_MAX_INPUTS];     /* owned buffers behind the views */
    ref_shape out_shape;
    ref_tensor g;   /* output cotangent, dense float64 rounded to the dtype */
    cc_view g_view; /* the same values, dense, in the dtype */
    void *g_storage;
} cc_inputs;

/* The provider dtype of input i (data: case dtype; index: i64; mask: u8). */
cc_dtype cc_input_dtype(const cc_case *c, int i);
int cc_materialize(const cc_case *c, cc_inputs *in, char *msg, size_t msg_len);
void cc_inputs_free(cc_inputs *in);

/* A dense output buffer of the given shape/dtype, prefilled with NaN so an unwritten element
 * can never pass. */
int cc_alloc_output(cc_dtype t, const ref_shape *s, cc_view *out);
/* cc_view_to_dense and cc_dense_strides: core/view.h */

#endif
