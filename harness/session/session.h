/* Room harness/session/: a whole `capcheck run`: its journal (run.json, results.jsonl)
 * and the session driving the pool. May call harness/report/ and below. */
/* `capcheck run` as a resumable session: the cases go through the worker pool (pool.h), every
 * result is journaled as it finishes (journal.h), and the report is built from the complete
 * journal in case-index order, so an interrupted run finished with --resume reports exactly
 * what an uninterrupted one does (wall-clock figures live apart, in the report's "timing").
 *
 * A fresh run: a folder holding an earlier run (run.json, or a non-empty results.jsonl) is
 * refused unless `force`; fork the workers (they initialise the provider: one that cannot run
 * leaves no folder behind), create the folder, start DIR/results.jsonl empty, write
 * DIR/run.json, remove any old report, run every case, write the report.
 * A resume (--resume DIR): DIR/run.json must describe the same run (case count, case-list
 * hash, provider name, and the provider's describe() text when cases remain); the journal's
 * recorded cases are skipped, a torn tail is cut off, damaged lines are dropped and their cases
 * run again (journal.h), crashes of workers killed from outside run again, and the report is
 * written from the whole journal. With witnesses, run.json names them and a resume must name
 * the same ones (in order). The report's provenance (command, case files, base seed,
 * provider description, repro options) is the run's, from run.json.
 *
 * CPU dispatch levels (--cpu-capability, harness/run/platform.h): every case runs once per level,
 * level after level, each level in a pool of its own whose workers set the level before they
 * initialise the provider. Each level's workers report their platform; two levels that give
 * the same platform key are refused (the second would only repeat the first). run.json records
 * the levels and the platforms, and a resume must name the same levels and find the same
 * platforms. The report lists the platforms and has rows per platform.
 *
 * Ctrl-C (SIGINT), SIGTERM and SIGHUP stop the run between results: what is recorded stays,
 * and the log says the command that finishes it (exit 128 + the signal).
 *
 * What a run prints: the line of each case that does not pass (with --expect: whose outcome is
 * news) on the log as it finishes, with the command that reruns it, and on a terminal a
 * progress line; at the end the counts and where the report is, on stdout. A run is large when
 * it holds more than CC_LARGE_RUN results (cases x levels: a nightly; one line says so when it
 * starts, and it prints no case line) or when more than CC_CASE_LINES_SHOWN of its cases do not
 * pass (one line says so after that many). A large run's case lines give way (verbosity 1
 * prints every one) to progress (not on a terminal: a line per tenth of the run, at most one
 * each CC_PROGRESS_SECONDS), and its closing lines list each op x dtype row that did not pass
 * with the command that reruns its worst case (harness/report/report_terminal.h); the caller
 * then ends with the closing line (cc_session_print_closing). Verbosity -1 prints nothing but
 * errors (and the interrupt's command): the caller prints the closing line alone. */
#ifndef CAPCHECK_SESSION_H
#define CAPCHECK_SESSION_H

#include <stdio.h>

#include "harness/case/case.h"
#include "harness/report/expect.h"
#include "harness/report/provenance.h"
#include "harness/report/repro.h"
#include "harness/run/runner.h"

#define CC_LARGE_RUN 10000       /* results of a run large from its start (the smoke: 8842) */
#define CC_CASE_LINES_SHOWN 200  /* case lines a run prints before it is large: every failing
                                    case of one op's share of the smoke (about 200 cases) */
#define CC_PROGRESS_SECONDS 30   /* at most one progress line this often, not on a terminal */

/* What a run that wrote its report counted, for the closing line. */
typedef struct {
    int written; /* the run wrote its report (the other members are set) */
    int large;   /* the run was large (see above) */
    long cases, counts[CC_RES_COUNT];
    long unjudged; /* cases that could not be judged (harness/run/exit_code.h) */
} cc_session_tally;

typedef struct {
    const cc_provider *provider; /* selected, not initialised (the workers do that) */
    const cc_case *cases;        /* the run's cases, in order (already --op filtered) */
    size_t n_cases;
    cc_device default_device;    /* initialised when there are no cases */
    const char *out_dir;
    int resume;
    int workers;         /* <= 0: online CPUs */
    double timeout_base; /* <= 0: the pool's default */
    int in_process;      /* --no-fork */
    const char *case_files;
    unsigned long long base_seed;
    const char *command; /* the command line, for the report */
    FILE *log;           /* failures and progress (stderr) */
    int tty;             /* log is a terminal: a live progress line */
    const cc_provenance *provenance; /* what produced the run, for the report (NULL: none) */
    const cc_provider *const *witnesses; /* --witness (harness/run/witness.h); not initialised */
    int n_witnesses;
    const int *cpu_levels; /* --cpu-capability (harness/run/platform.h levels), in run order */
    int n_cpu_levels;      /* 0: the machine as it is (one pass, no level set) */
    /* --expect: judge every result against the case files' "#! seen" directives
     * (harness/report/expect.h): the log names what is news, report.md lists the outcomes, and the
     * exit code is 1 only for a broken expectation, a crash or an unexpected result */
    const cc_expectations *expect;
    cc_run_options run; /* --repeat, --no-guard, --deterministic, --ref, --ref-threads
                           (threads <= 0: the CPUs the workers leave idle) */
    int force;                  /* --force: a fresh run may discard an earlier run's journal */
    const cc_repro *repro;      /* what reruns a case (repro.h); a resume keeps run.json's */
    const char *baseline;       /* --baseline DIR: report.md says what changed since it */
    /* the comparison with the baseline (the CLI's: capcheck diff sits above the session):
     * malloc'd text for report.md and its summary line, or NULL with why in summary */
    char *(*since_baseline)(const char *baseline, const char *dir, char *summary, size_t n);
    const char *resume_command; /* the command that finishes this run, for an interrupt */
    int verbosity;              /* -1 --quiet, 0 the default, 1 --verbose (see above) */
    cc_session_tally *tally;    /* out (NULL: not wanted): what the closing line says */
} cc_session_opts;

/* Exit code (harness/run/exit_code.h; each case counted once however often it ran,
 * harness/report/identity.h): 0 every case passed (with expect: every result met its
 * expectation), 1 some case did not, 125 some case could not be judged and none failed, or the
 * run could not go on (one sentence on log: a provider that cannot initialise, an absent device,
 * an unwritable folder or a full disk), 2 a run.json or journal of another run or a folder
 * holding an earlier run (one sentence), 128 + N when signal N interrupted it. */
int cc_session_run(const cc_session_opts *o);

/* A large or quiet run's last line: "capcheck: 119602 of 123178 cases passed (1968 failed,
 * 1608 unsupported, 0 errors); read DIR/report.md, DIR/report.html; every case:
 * DIR/results.jsonl". */
void cc_session_print_closing(const cc_session_tally *t, const char *dir, FILE *out);

/* One case in a worker of its own (or in this process when in_process), for repro: a crash or
 * hang is a result, not the end of capcheck; with witnesses (n_witnesses > 0) they run on it
 * too when it does not pass; run (NULL: defaults) with threads <= 0 gives the reference every
 * CPU. Returns 0, or -1 with msg when the provider cannot run (init) or no worker can be
 * started. */
int cc_run_case_in_worker(const cc_provider *p, const cc_case *c, double timeout_base,
                          int in_process, const cc_provider *const *witnesses, int n_witnesses,
                          int cpu_level, const cc_run_options *run, cc_result *r, char *msg,
                          size_t msg_len);

#endif
