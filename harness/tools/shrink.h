/* Room harness/tools/: tools around the pipeline: shrink (minimize a failing case),
 * bench. May call harness/evidence/ and below. */
/* Shrinking a failing case: greedy reduction of the case line while the failure persists.
 *
 * A candidate is the current case with one change: an axis dropped (alone, on every input of
 * the same rank, or aligned from the end), a dimension lowered to 1, half or one less (alone or
 * on every input axis of the same extent, so a shared k of matmul moves on both sides), the
 * layout made contig, check narrowed to the failing part (fwd or vjp), a window/count parameter
 * lowered, a real parameter made 0, 1 or shorter, or a smaller seed (values are drawn from the
 * seed, so small seeds stand for other value draws). A candidate is kept when op->shape accepts
 * it, it is smaller in (total input elements, total rank, layout, check, parameters, seed), and
 * it fails the same way: the same status (fail, error, crash, timeout) and, for fail, the same
 * output (y or grad:<input>). The first kept candidate restarts the search; a pass through all
 * candidates with none kept is the fixpoint.
 *
 * Every candidate runs in a forked child (with a time limit), so a crashing provider is shrunk
 * like a wrong one. */
#ifndef CAPCHECK_SHRINK_H
#define CAPCHECK_SHRINK_H

#include <stdio.h>

#include "harness/case/case.h"
#include "harness/run/runner.h"

typedef struct {
    int max_runs;     /* candidate runs at most; 0: 4000 */
    double timeout_s; /* per run, in its child; 0: 60 */
    int max_seed;     /* seeds 0..max_seed-1 are tried; 0: 16 */
    FILE *log;        /* one line per kept candidate, or NULL */
} cc_shrink_opts;

typedef struct {
    cc_case minimal;
    cc_result original; /* the run of the given case */
    cc_result last;     /* the run of the minimal case */
    int runs, kept;     /* candidates run, candidates kept */
    int budget_spent;   /* max_runs reached before the fixpoint */
} cc_shrink_result;

/* Run one case in a forked child within timeout_s: a signal becomes CC_RES_CRASH, the time
 * limit CC_RES_TIMEOUT. Never fails (a failing fork runs the case in this process). */
void cc_run_case_isolated(const cc_provider *p, const cc_case *c, double timeout_s,
                          cc_result *r);

/* Shrink c on provider p (already initialised). Returns 0, or -1 with a sentence in msg when
 * c does not fail (status pass or unsupported: nothing to shrink). */
int cc_shrink(const cc_provider *p, const cc_case *c, const cc_shrink_opts *o,
              cc_shrink_result *out, char *msg, size_t msg_len);

/* Total input elements of a case (the first key of the shrink order). */
int64_t cc_case_input_elements(const cc_case *c);

/* A standalone Python script (torch only, no capcheck) that builds exactly the case's input
 * values with their strides/layout, calls the ATen op in the case dtype on the case device,
 * computes a float64 reference with torch, and prints the mismatch. `r` (may be NULL) is a
 * capcheck result of the case; its worst element and bound are written into the script.
 * Returns 0, or -1 with msg (out of memory, an op the script generator does not know: the
 * script is then still written, with the inputs, and raises NotImplementedError). */
int cc_shrink_write_python(const cc_case *c, const cc_result *r, FILE *f, char *msg,
                           size_t msg_len);

/* `capcheck shrink`: shrink, print the minimal line and its result to out, and the script to
 * script_path (or to out when NULL). Exit code: 0 a minimal failing case was printed, 1 the
 * case does not fail, 2 the script could not be written. */
int cc_shrink_command(const cc_provider *p, const cc_case *c, const char *script_path,
                      FILE *out, FILE *err);

#endif
