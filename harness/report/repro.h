/* Repro commands: the one line that reruns a case exactly as a run ran it.
 *
 *     [ENV...] CAPCHECK repro '<case line>' [ARGS...]
 *
 * CAPCHECK: the capcheck that prints the line: `capcheck` when the first capcheck on PATH is
 * that executable, else its absolute path (a line pasted into a fresh shell, in any folder, runs
 * it; a bare `capcheck` there would be "command not found").
 * ENV: every CAPCHECK_* variable of the run (a plugin may read any, e.g. CAPCHECK_MUTANT) but
 * the math modes and --shard auto's CAPCHECK_SHARD_* and CAPCHECK_JOB_*, and ATen's dispatch
 * variables (ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA), as
 * shell assignments. ARGS: the provider (--provider NAME, or --provider-lib with the plugin's
 * absolute path), the math modes as options (--tf32, --deterministic, --attention: the values
 * the run's workers had), and --timeout when the run gave one (a timeout reproduces only under
 * the same limit). Every repro line capcheck prints (the run's log, report.md, JUnit, gate,
 * diff, shrink) comes from cc_repro_command, so pasting one reruns what failed. A run keeps its
 * ENV and ARGS in run.json and report.json ("repro"), so a resumed or merged run prints what
 * the original run would have. */
#ifndef CAPCHECK_REPRO_H
#define CAPCHECK_REPRO_H

#include <stddef.h>
#include <stdio.h>

#include "harness/run/platform.h"

#define CC_REPRO_LINE_MAX 1024 /* a case line's length (CC_CASE_LINE_MAX) */

typedef struct {
    char env[512];   /* shell assignments, space-separated; "" when there are none */
    char args[1024]; /* options after the line */
    /* the capcheck that prints the line, as a shell word: "capcheck" when the first capcheck on
     * PATH is it, else its absolute path (never written to JSON: whoever prints a line names
     * itself, so a line printed by gate, diff or merge runs where it was printed) */
    char program[1024];
    /* the value stream a line without stream= drew in the run (a report's
     * provenance.default_stream): 1 for a report made before stream 2 became the default, when
     * such a line then gets " stream=1" in its command; 0: this capcheck's default */
    int plain_stream;
} cc_repro;

/* From this process: the provider's name, or the plugin's path when plugin_path is not NULL;
 * timeout > 0 when --timeout was given; the environment as the run's workers inherit it (call
 * after the math modes are set). */
void cc_repro_collect(cc_repro *r, const char *provider, const char *plugin_path, double timeout);
/* One more option after the line (run options such as --repeat N that change how a case runs). */
void cc_repro_add_arg(cc_repro *r, const char *word);
/* "ENV CAPCHECK repro '<line>' ARGS" into buf (r may be NULL: a bare capcheck, no ENV, no
 * ARGS). */
void cc_repro_command(const cc_repro *r, const char *line, char *buf, size_t n);
/* "ENV CAPCHECK certify ARGS TAIL": the evidence suite for the run's provider and math modes
 * (ARGS without the run options cc_repro_add_arg appended: certify runs the suite as the policy
 * wants it), pasted as the repro lines are; TAIL certify's own options ("" for none). */
void cc_repro_certify(const cc_repro *r, const char *tail, char *buf, size_t n);
/* The same for a result on platform `key` (harness/run/platform.h; "" or NULL: none) of a run
 * whose platforms are given: " --cpu-capability LEVEL" follows when that platform's level is
 * not the native one (a run with --cpu-capability ran the case once per level). */
void cc_repro_command_on(const cc_repro *r, const char *line, const char *key,
                         const cc_platform *platforms, int n_platforms, char *buf, size_t n);
/* {"env": ..., "args": ...} (run.json and report.json), and back: a missing or malformed
 * member reads as no ENV and no ARGS (a report written before repro lines named providers). */
void cc_repro_write_json(FILE *f, const cc_repro *r);
struct cc_json;
void cc_repro_from_json(const struct cc_json *obj, cc_repro *r);
/* s as one shell word: unchanged when it holds only safe characters, else single-quoted. */
void cc_shell_quote(const char *s, char *buf, size_t n);

#endif
