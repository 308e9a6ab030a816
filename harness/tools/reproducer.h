/* The Python reproducer of one case on ATen (`capcheck shrink --script`, `capcheck repro
 * --script`): a standalone script that needs torch alone, runs the ATen calls capcheck's ATen
 * provider makes for the case (providers/aten/aten_lowering.py: the prelude and the section of
 * the op, embedded at build time), in the same dtypes and layouts, on exactly the case's inputs
 * (storage, strides, offsets), and judges every element of every output against capcheck's
 * float64 reference and the bound that judges it (its probabilistic bound where the worst-case
 * one is vacuous), shipped in the script as data (DATA), with capcheck's ratio rules, its
 * rounding-bias test of f16/bf16 outputs and zero-trust checks (harness/tools/reproducer.py). It exits 0 when every
 * element passes, 1 when one does not (or ATen raised an error), 125 when nothing could be
 * judged (no torch, no device, the case unsupported, out of memory): the codes `capcheck repro`
 * gives (harness/run/exit_code.h), so either can drive `git bisect run`.
 *
 * The expected values and bounds come from running the case in this process on the reference
 * provider with the bound model of the provider given (its compute roundoff: TF32) and the
 * accumulation mode given, every element in full (--ref full). */
#ifndef CAPCHECK_REPRODUCER_H
#define CAPCHECK_REPRODUCER_H

#include <stdio.h>

#include "harness/case/case.h"
#include "harness/case/materialize.h"
#include "harness/run/runner.h"

/* One judged output, copied out of a check (cc_judged_output): what a reproducer ships. */
typedef struct {
    char what[32];     /* "y" or "grad:<input name>" */
    cc_dtype dtype;
    int rank;
    int64_t shape[REF_MAX_RANK];
    int64_t n;
    double *expected, *bound; /* n each: the reference, the bound that judges the element */
    unsigned char *overflow_ok; /* n: a finite expected value whose bound reaches the dtype's
                                   overflow (an Inf of its sign passes) */
    int bias_test;                 /* the rounding-bias test judges this output (compare.h) */
    unsigned char *bias_candidate; /* n: the element enters that test if its value is finite */
    int zt_all_zero, zt_all_equal; /* zero_trust.c would flag an all-zeros / constant output */
    unsigned zt_copy_of;           /* bit k: flag an exact copy of source k (inputs, then g) */
    void *got; /* the provider's output bytes (n elements of dtype) */
} cc_repro_output;

typedef struct {
    int n;
    cc_repro_output out[REF_MAX_INPUTS + 1];
    int failed; /* out of memory while copying */
} cc_repro_outputs;

/* A tap (cc_run_options.tap) that copies every output a check judges into `outs` (zeroed
 * here); cc_repro_outputs_free releases what it kept. */
void cc_repro_outputs_tap(cc_repro_outputs *outs, cc_judge_tap *tap);
void cc_repro_outputs_free(cc_repro_outputs *outs);

/* What a reproducer states beyond the case. */
typedef struct {
    const char *provider_description; /* the libtorch that ran (NULL: unknown) */
    const char *capcheck_said;        /* capcheck's verdict on the case, one line (NULL: none) */
    const char *repro_command;        /* the capcheck line that reruns the case (NULL: none) */
    const char *python;               /* the interpreter of the shebang (NULL: python3) */
    int tf32, deterministic;          /* the math modes of the run */
    int threads;                      /* ATen's intra-op threads (0: 1), as the result's
                                         platform key names them */
    int with_got;                     /* DATA carries each output's "got_hex" (the lowering
                                         check's record: what the shim computed) */
    int one_line;                     /* DATA on one line (a record of a JSON-lines file) */
} cc_reproducer_info;

/* DATA's JSON object (one line, no newline) for case c with inputs `in` and the judged
 * outputs `outs`. Returns 0, or -1 on a write error. */
int cc_reproducer_write_data(FILE *f, const cc_case *c, const cc_inputs *in,
                             const cc_repro_outputs *outs, const cc_reproducer_info *info);

/* The whole script for case c: the judged outputs from the reference run in this process
 * under p's compute roundoff (p may be NULL: the dtype's u) and accumulation `acc`. Returns 0,
 * or -1 with one sentence in msg (the case cannot be materialized, out of memory, write
 * error). */
int cc_reproducer_write(const cc_case *c, const cc_provider *p, cc_accumulation acc,
                        const cc_reproducer_info *info, FILE *f, char *msg, size_t msg_len);

/* The reproducer of case c as a command hands it out (shrink's minimal case, repro's case): for
 * the ATen provider `p`, the script written to `path` (made executable) or, path NULL, to
 * `out` after a header line, then "reproducer: PATH (run: PYTHON PATH ...)" on out; for any
 * other provider (a plugin, a library provider) no script: one line on out saying that the
 * capcheck repro line is its reproducer (the Python one would run ATen's calls, not the
 * provider's). `r` (may be NULL) is capcheck's result of the case, repro_cmd (may be NULL) its
 * repro line. Returns 0, or -1 after one sentence on err (the script could not be written). */
int cc_reproducer_hand_out(const cc_case *c, const cc_provider *p, const cc_result *r,
                           const char *repro_cmd, const char *path, FILE *out, FILE *err);

/* The interpreter a reproducer names: $CAPCHECK_PYTHON, else the Python of the libtorch in
 * $CAPCHECK_LIBTORCH (the venv's bin/python above its lib/python3.X/site-packages/torch/lib),
 * else the one of the
 * torch capcheck was built against (its venv), when it exists; else "python3". Returns 1 when
 * buf holds an existing absolute path, 0 for the bare fallback. */
int cc_reproducer_python(char *buf, size_t n);

/* The Python sources a reproducer is made of (embedded at build time). */
extern const char cc_embedded_aten_lowering[];
extern const char cc_embedded_reproducer_py[];

#endif
