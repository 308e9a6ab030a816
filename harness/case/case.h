/* Room harness/case/: a case line becomes a case (case, edge_class), then its inputs
 * (values, edges, materialize). May call core/, abi/capcheck_provider.h and reference/. */
/* Case lines: one line of text names a whole case and reproduces it exactly.
 *
 *   <op> dtype=<f64|f32|f16|bf16> device=<cpu|cuda> in=[d,...],[d,...] <params...>
 *        [edge=<class>] [stream=<1|2>] [ref=<auto|full|sampled>]
 *        layout=<L> check=<both|fwd|vjp> seed=<u64>
 *
 * where L is one layout class for every input (contig, transpose, stride2, bcast, chlast,
 * sliced) or one entry per input joined by '/': a class, or explicit strides in elements with
 * an optional offset of element [0,...] in its buffer, e.g. layout=chlast/[1,6,2]+3/contig.
 *
 * Generator lines add count=N and expand into count cases for every combination of the listed
 * dtypes, devices and layouts (comma lists), with shapes and parameters drawn by the op's
 * sampler and per-case seeds hashed from (base seed, op, combination, index):
 *
 *   <op|*> count=<N> dtype=f32,f64 layout=contig,transpose size=<tiny|small|medium|large>
 *          [rank=R] [zero=1] [edge=none,nan,...|all] [stream=2] [ref=MODE] [seed=S]
 *
 * Blank lines and text after '#' are ignored. docs/cases.md documents the full grammar. */
#ifndef CAPCHECK_CASE_H
#define CAPCHECK_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "harness/case/edge_class.h"
#include "abi/capcheck_provider.h"
#include "reference/ref.h"

typedef enum {
    CC_LAYOUT_CONTIG = 0, /* dense row-major */
    CC_LAYOUT_TRANSPOSE,  /* last two axes stored swapped (a transposed view) */
    CC_LAYOUT_STRIDE2,    /* every other element of a wider buffer along the last axis */
    CC_LAYOUT_BCAST,      /* axis 0 of rank >= 2 inputs is a stride-0 broadcast */
    CC_LAYOUT_CHLAST,     /* axis 0 stored innermost: channels-last for [C, spatial...] */
    CC_LAYOUT_SLICED,     /* a view into a larger buffer: x[1:, ..., 1:-1], at an offset */
    CC_LAYOUT_MIXED,      /* a layout per input (cc_case.in_layout); on a generator line, a
                             class drawn per input from the six above */
    CC_LAYOUT_STRIDED,    /* per input: explicit strides and offset; on a generator line,
                             strides drawn per input (an axis order, gaps, an offset) */
    CC_LAYOUT_COUNT
} cc_layout;

/* One input's layout in a case whose layout is CC_LAYOUT_MIXED. */
typedef struct {
    int kind;                      /* a class (contig .. sliced) or CC_LAYOUT_STRIDED */
    int64_t offset;                /* STRIDED: element offset of [0,...,0] in its buffer */
    int64_t strides[REF_MAX_RANK]; /* STRIDED: in elements, >= 0, not overlapping */
} cc_input_layout;

typedef enum { CC_CHECK_BOTH = 0, CC_CHECK_FWD, CC_CHECK_VJP } cc_check;

/* How the reference is evaluated (`ref=` on a case line; harness/run/sample.h):
 *   auto     every element, unless the op has a sampled form and the case costs more than the
 *            sampling threshold: then a stratified sample of the elements (the default);
 *   full     every element;
 *   sampled  the sample whenever the op has a sampled form (tests compare it with full). */
typedef enum { CC_REF_AUTO = 0, CC_REF_FULL, CC_REF_SAMPLED, CC_REF_MODE_COUNT } cc_ref_mode;
extern const char *const cc_ref_mode_names[CC_REF_MODE_COUNT]; /* "auto", "full", "sampled" */

typedef struct {
    const ref_op *op;
    cc_dtype dtype;
    cc_device device;
    int n_in;
    ref_shape shape[REF_MAX_INPUTS];
    ref_params params;
    unsigned edges; /* edge-value classes (CC_EDGE_* bits); at most one per case today */
    cc_layout layout; /* every input's class, or MIXED: then in_layout says (zero otherwise) */
    cc_input_layout in_layout[REF_MAX_INPUTS];
    cc_check check;
    uint64_t seed;
    int stream;      /* value stream (harness/case/values.h): 1, or 0 for the default stream 2 */
    cc_ref_mode ref; /* how the reference is evaluated */
} cc_case;

/* The case's value stream, 1 or 2. */
int cc_case_stream(const cc_case *c);

typedef struct {
    char file[256];
    int line, column;
    char msg[384];
} cc_parse_error;

#define CC_CASE_LINE_MAX 1024
/* The largest element count of any input or output a case line may name (2^48): beyond it no
 * buffer can be allocated, and int64 products of the extents could overflow. */
#define CC_CASE_MAX_ELEMENTS (INT64_C(1) << 48)

/* The most cases one list (one run) holds: a case is about 1 KiB in memory, and a generator line
 * that would expand beyond this is refused before anything is drawn. */
#define CC_CASES_MAX 2000000

/* Defaults that a case line may omit (the CLI's --device, for instance). */
typedef struct {
    cc_device device;
    uint64_t base_seed;
} cc_case_defaults;

/* Parse one explicit case line. Returns 0, or -1 with err filled (column 1-based). */
int cc_case_parse(const char *line, const cc_case_defaults *def, cc_case *out,
                  cc_parse_error *err);
/* Canonical text of a case; parse(print(c)) == c and print(parse(line)) is canonical. */
void cc_case_print(const cc_case *c, char *buf, size_t n);

/* The parameters op reads with the values a line that omits them gets ("axis=-1 eps=1e-05";
 * window lists as "stride=[1,...]", a kernel that must be given as "kernel=[...]"). */
void cc_op_params_describe(const ref_op *op, char *buf, size_t n);

/* The element count of the case's largest tensor, an input or its output; -1 when the op
 * refuses its shapes. */
int64_t cc_case_largest_tensor(const cc_case *c);

/* A growable list of cases. */
typedef struct {
    cc_case *v;
    size_t n, cap;
} cc_case_list;

void cc_case_list_free(cc_case_list *l);
/* Append a copy of c; 0, or -1 when out of memory. */
int cc_case_list_push(cc_case_list *l, const cc_case *c);

/* Parse a whole file or text (explicit and generator lines). `name` labels errors. */
int cc_cases_parse_text(const char *text, const char *name, const cc_case_defaults *def,
                        cc_case_list *out, cc_parse_error *err);
int cc_cases_parse_file(const char *path, const cc_case_defaults *def, cc_case_list *out,
                        cc_parse_error *err);

const char *cc_layout_name(cc_layout l);
/* The layout of input i of c (its class, or its explicit strides). */
cc_input_layout cc_case_input_layout(const cc_case *c, int i);
/* NULL when c's per-input layouts fit its shapes, else a sentence saying why not. */
const char *cc_case_layout_problem(const cc_case *c, char *buf, size_t n);
/* A MIXED layout whose inputs all have one class becomes that class (the canonical form). */
void cc_case_normalize_layout(cc_case *c);
/* Explicit strides of a MIXED case refitted to its current shapes (after a shrink changed them):
 * the same axis order, gap factors and offset. */
void cc_case_refit_layout(cc_case *c, const cc_case *before);
extern const char *const cc_layout_names[CC_LAYOUT_COUNT];
/* The seed of generated case `index` of `op` in combination `combo` under a base seed. */
uint64_t cc_generated_seed(uint64_t base, const char *op, int combo, int64_t index);

#endif
