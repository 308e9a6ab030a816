/* The evidence commands of the CLI: gate, evidence, emit-lean, diff, merge, report, history,
 * validate (their options are their own; main.c hands them argv). */
#ifndef CAPCHECK_COMMANDS_H
#define CAPCHECK_COMMANDS_H

#include <stdio.h>

int cc_is_evidence_command(const char *name);
/* argv[1] is the command. Returns the exit code. */
int cc_evidence_command(int argc, char **argv);

/* dir/report.html (harness/report_html.h) for capcheck run, merge and report, with the gate's
 * verdicts under `policy` (NULL: the built-in policy); one line saying where
 * and how big on out (NULL: none), or one sentence on err prefixed with `who`. Returns 0, or
 * -1. */
int cc_write_report_html(const char *dir, const char *policy, const char *who, FILE *out,
                         FILE *err);

#endif
