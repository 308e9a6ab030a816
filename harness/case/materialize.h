/* Materialize a case: draw every input in float64 from the case seed, round it to the case
 * dtype, and lay it out for the provider in the case's layout. The reference gets dense float64
 * copies of exactly the rounded values the provider sees. */
#ifndef CAPCHECK_MATERIALIZE_H
#define CAPCHECK_MATERIALIZE_H

#include "core/guard.h"
#include "core/view.h"
#include "harness/case/case.h"

typedef struct {
    int n_in;
    ref_tensor ref_in[REF_MAX_INPUTS]; /* dense float64, rounded to the dtype */
    cc_view view[REF_MAX_INPUTS];      /* what the provider reads */
    void *storage[REF_MAX_INPUTS];     /* the buffers behind the views (in mem) */
    int64_t storage_len[REF_MAX_INPUTS]; /* elements of each buffer */
    int64_t offset[REF_MAX_INPUTS];      /* the element of storage[i] that view[i].data is */
    ref_shape out_shape;
    ref_tensor g;   /* output cotangent, dense float64 rounded to the dtype */
    cc_view g_view; /* the same values, dense, in the dtype */
    void *g_storage;
    cc_guard_set mem; /* every provider buffer of the case: guarded or plain heap blocks */
} cc_inputs;

/* The name of input i of op ("x", "w", ...; the last name repeats, as concat's do). */
const char *cc_input_name(const ref_op *op, int i);
/* The provider dtype of input i (data: case dtype; index: i64; mask: u8). */
cc_dtype cc_input_dtype(const cc_case *c, int i);
/* Draw and lay out the inputs in plain heap buffers. */
int cc_materialize(const cc_case *c, cc_inputs *in, char *msg, size_t msg_len);
/* The same, every provider buffer guarded (harness/guard.h) at placement `place`, inputs
 * read-only, when `guarded`. */
int cc_materialize_in(const cc_case *c, int guarded, cc_guard_cache *cache,
                      cc_guard_place place, cc_inputs *in, char *msg, size_t msg_len);
/* Move the provider's input buffers (and the cotangent) to new ones at `place`, the same values
 * and strides (--repeat alternates placements). Returns 0, or -1 when out of memory. */
int cc_inputs_replace(const cc_case *c, cc_inputs *in, cc_guard_place place);
void cc_inputs_free(cc_inputs *in);

/* A dense output buffer of the given shape/dtype, prefilled with NaN so an unwritten element
 * can never pass: in the case's buffer set (cc_alloc_output_in, named for the guard's notes), or
 * a plain heap block the caller frees (cc_alloc_output). */
int cc_alloc_output(cc_dtype t, const ref_shape *s, cc_view *out);
int cc_alloc_output_in(cc_inputs *in, const char *name, cc_dtype t, const ref_shape *s,
                       cc_view *out);
/* cc_view_to_dense and cc_dense_strides: core/view.h */

#endif
