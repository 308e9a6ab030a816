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
 * every loop and counted; larger cases are left out and counted. The provider runs in this
 * process: a crash ends the bench (run the cases with `capcheck run` to find which). */
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
} cc_bench_opts;

/* p initialised for the cases' device. Prints the table to out, progress and problems to log.
 * Returns 0, or 2 (after one sentence on log) when no case can be measured or a file cannot be
 * written. */
int cc_bench_command(const cc_provider *p, const cc_case *cases, size_t n,
                     const cc_bench_opts *o, FILE *out, FILE *log);

#endif
