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
 * Every run (the given case and each candidate) goes to a worker of the pool (harness/pool.h),
 * which initialises the provider itself: a provider that crashes, hangs or exits in init is one
 * sentence, and one that does so in a call is shrunk like a wrong one (crash, timeout). */
#ifndef CAPCHECK_SHRINK_H
#define CAPCHECK_SHRINK_H

#include <stdio.h>

#include "harness/case/case.h"
#include "harness/report/repro.h"
#include "harness/run/runner.h"

typedef struct {
    int max_runs;     /* candidate runs at most; 0: 4000 */
    double timeout_s; /* the base of each run's limit (cc_case_timeout) and init's; 0: the
                         pool's defaults */
    int max_seed;     /* seeds 0..max_seed-1 are tried; 0: 16 */
    FILE *log;        /* one line per kept candidate, or NULL */
    int cpu_level;    /* the worker's CPU dispatch level (harness/run/platform.h; 0 native) */
    int aten_threads; /* the worker's ATen thread count (0: none set, ATen's one) */
} cc_shrink_opts;

typedef struct {
    cc_case minimal;
    cc_result original; /* the run of the given case */
    cc_result last;     /* the run of the minimal case */
    int runs, kept;     /* candidates run, candidates kept */
    int budget_spent;   /* max_runs reached before the fixpoint */
} cc_shrink_result;

/* Shrink c on provider p (not initialised: the pool's worker does that). Returns 0; 1 with a
 * sentence in msg when c does not fail (pass or unsupported: nothing to shrink); -1 with a
 * sentence when the provider cannot run (init failed, crashed or hung) or no worker starts. */
int cc_shrink(const cc_provider *p, const cc_case *c, const cc_shrink_opts *o,
              cc_shrink_result *out, char *msg, size_t msg_len);

/* Total input elements of a case (the first key of the shrink order). */
int64_t cc_case_input_elements(const cc_case *c);

/* `capcheck shrink`: shrink (o: its limits, level and thread count; o->log its progress), print
 * the minimal line, the command that reruns it (repro, may be NULL: harness/repro.h; it names
 * o's level and thread count already) and its result to out, then its reproducer
 * (harness/tools/reproducer.h: on ATen the Python script, to script_path or to out when NULL;
 * on any other provider the repro line, said so). Exit code: 0 a minimal failing case was
 * printed, 1 the case does not fail, 125 the provider cannot run or the reproducer could not
 * be written. */
int cc_shrink_command(const cc_provider *p, const cc_case *c, const char *script_path,
                      const cc_shrink_opts *o, const cc_repro *repro, FILE *out, FILE *err);

#endif
