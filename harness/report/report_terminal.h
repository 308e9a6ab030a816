/* The rows of a report as a large run's closing summary shows them on the terminal
 * (harness/session/session.h): every row that did not pass on one line, worst first, with the
 * command that reruns its worst case (report.h's rank: a finite value missed beyond its bound
 * before a NaN/Inf pattern), then every row with unsupported cases on one line. */
#ifndef CAPCHECK_REPORT_TERMINAL_H
#define CAPCHECK_REPORT_TERMINAL_H

#include <stdio.h>

#include "harness/report/report.h"

#define CC_TERMINAL_ROWS 30        /* failing rows listed; the rest are counted */
#define CC_TERMINAL_UNSUPPORTED 10 /* unsupported rows named on their line */

/* Nothing when every row passed; dir names where report.md lists every row. */
void cc_report_print_rows(const cc_report *rep, const char *dir, FILE *out);

#endif
