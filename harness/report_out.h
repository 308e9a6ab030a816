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

#include "harness/report.h"

/* All four files into dir. Returns 0, or -1 with a sentence in msg. */
int cc_report_write_outputs(const cc_report *rep, const char *dir, char *msg, size_t len);
int cc_report_write_junit(const cc_report *rep, const char *path);

/* The rows worst first: rows with a case that did not pass (fail, error, crash, timeout) before
 * the others, then by worst bound ratio (NaN first), ties in report order. order[] gets
 * rep->n row indices. */
void cc_report_order_worst(const cc_report *rep, size_t *order);

/* Write PATH.sha256 for the file at path. Returns 0, or -1. */
int cc_report_seal(const char *path);
/* Check PATH against PATH.sha256. Returns 0 when they match (hex receives the digest), 1 when
 * there is no sidecar (hex still receives the file's digest), -1 with a sentence in msg when
 * the file cannot be read or does not match. */
int cc_report_check_seal(const char *path, char hex[65], char *msg, size_t len);

/* Whether dir holds a run that writing a new one there would destroy: the name of the first of
 * run.json, a non-empty results.jsonl, report.json that it holds, or NULL. */
const char *cc_dir_holds_run(const char *dir);

/* mkdir -p: 0 when path is (now) a directory, else -1 with errno. */
int cc_make_dir(const char *path);

#endif
