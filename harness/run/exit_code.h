/* The exit codes of the commands that judge cases (`capcheck run`, `capcheck repro` and the
 * reproducer `capcheck shrink --script` writes), chosen so that `git bisect run` reads them
 * right: it takes 0 as good, 125 as "skip this commit" and any other code from 1 to 127 as bad.
 *
 *   0    every case passed (run --expect: every result met its expectation)
 *   1    a case did not pass: fail, error, crash, timeout, out-of-bounds, nondeterministic
 *        (run --expect: an expectation broke)
 *   2    a malformed command line or case line: never a verdict on the provider
 *   125  nothing could be judged: the provider or plugin did not load or initialise, the device
 *        is absent, the case is unsupported by the provider, memory ran out, the environment is
 *        unusable (a full disk, an unwritable folder)
 *
 * A run of many cases: 1 when any case did not pass; else 125 when any case could not be judged
 * (unsupported, out of memory: a verdict that is missing is not a pass); else 0. Under --expect
 * an unsupported case whose "#! seen unsupported" directive holds met its expectation, so a
 * suite of known unsupported combinations that is otherwise clean exits 0, as it always did
 * (harness/report/report.h: cc_report_exit_code). */
#ifndef CAPCHECK_EXIT_CODE_H
#define CAPCHECK_EXIT_CODE_H

#include "harness/run/runner.h"

enum {
    CC_EXIT_PASSED = 0,
    CC_EXIT_NOT_PASSED = 1,
    CC_EXIT_USAGE = 2,
    CC_EXIT_UNJUDGED = 125
};

/* 1 when a result says nothing about the provider's values: unsupported, or an error that
 * says memory ran out (capcheck's own "out of memory", CUDA's "CUDA out of memory", ATen's
 * allocator's "not enough memory"). */
int cc_result_unjudged(const cc_result *r);
/* The exit code of `failed` cases that did not pass and `unjudged` that could not be judged:
 * 1 when failed > 0, else 125 when unjudged > 0, else 0. One result: cc_result_exit_code. */
int cc_exit_code_of(long failed, long unjudged);
int cc_result_exit_code(const cc_result *r);

#endif
