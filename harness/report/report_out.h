/* The files of a finished run, written from one cc_report (report.h) by capcheck run and
 * capcheck merge alike:
 *   report.json         the evidence (schema reports/schema.json), sealed by
 *   report.json.sha256  its sha256, in sha256sum format ("<hex>  report.json"): a report whose
 *                       bytes no longer match is refused by gate, merge and diff;
 *   report.md           for people: the rows, worst first;
 *   report.junit.xml    for CI dashboards: one testcase per op x dtype x device, each failure
 *                       carrying the line that reproduces it. */
#ifndef CAPCHECK_REPORT_OUT_H
#define CAPCHECK_REPORT_OUT_H

#include <stddef.h>
#include <stdio.h>

#include "harness/report/report.h"

/* All four files into dir. Returns 0, or -1 with a sentence in msg. */
int cc_report_write_outputs(const cc_report *rep, const char *dir, char *msg, size_t len);
int cc_report_write_junit(const cc_report *rep, const char *path);

/* Whether dir holds a run that writing a new one there would destroy: the name of the first of
 * run.json, a non-empty results.jsonl, report.json that it holds, or NULL. */
const char *cc_dir_holds_run(const char *dir);

/* mkdir -p: 0 when path is (now) a directory, else -1 with errno. */
int cc_make_dir(const char *path);

#endif
