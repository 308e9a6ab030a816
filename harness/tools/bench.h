/* `capcheck bench`: how fast is capcheck's per-case path next to the provider's own calls?
 *
 * On the same small cases (every input and the output at most max_elements elements), in this
 * process, one thread, four loops measured side by side:
 *   provider     the provider's forward and VJP calls alone, on inputs and output buffers
 *                prepared beforehand: the floor, what a bare loop of ATen calls costs
 *   capcheck     the full per-case path of `capcheck run`: materialize, reference, provider,
 *                compare, zero-trust, and the result appended to a journal
 *                (harness/session/journal.h)
 *   materialize  drawing and laying out the inputs alone
 *   reference    the float64 reference forward and VJP alone
 * Each loop runs whole rounds over the cases until min_seconds have passed; the loops take
 * turns, `repetitions` times, and each reports the median of its repetitions in cases/s, so
 * a machine that slows down mid-run slows every loop alike. The ratio capcheck / provider is
 * the figure of merit (issue 7 asks for at least 1/3 on cases of <= 1024 elements).
 *
 * Cases the provider does not run (unsupported, or an error on the first call) are left out of
 * every loop and counted; larger cases are left out and counted. The whole bench (the
 * provider's init included) runs in one forked child the parent watches (harness/watch.h):
 * init within timeout_base (default 60 s), each case's first calls within its case limit, each
 * loop within min_seconds plus ten preparation rounds; a crash, a hang or an exit() in the
 * provider is one sentence and exit 2, never capcheck's own crash. */
#ifndef CAPCHECK_BENCH_H
#define CAPCHECK_BENCH_H

#include <stdio.h>

#include "harness/case/case.h"

typedef struct {
    double min_seconds;   /* per loop and repetition (<= 0: 0.2) */
    int repetitions;      /* (<= 0: 5) */
    int64_t max_elements; /* (<= 0: 1024) */
    const char *source;   /* where the cases came from, for the header */
    const char *json_path; /* NULL, or where to write the figures as JSON (capcheck-bench/1) */
    double timeout_base;   /* --timeout (<= 0: the pool's defaults, harness/pool.h) */
} cc_bench_opts;

/* p not initialised (the child does that, for the first case's device). Prints the table to
 * out, progress and problems to log. Returns 0, or 2 (after one sentence on log) when the
 * provider cannot run, crashed or hung, no case can be measured, or a file cannot be written. */
int cc_bench_command(const cc_provider *p, const cc_case *cases, size_t n,
                     const cc_bench_opts *o, FILE *out, FILE *log);

#endif
