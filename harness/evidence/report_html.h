/* report.html: the page a person opens after a run, written beside report.md by capcheck run
 * and capcheck merge, and again by `capcheck report DIR [--policy F]`. One self-contained file
 * (harness/html.h: no network, inline CSS and SVG, one line of script), drawn from the sealed
 * run it sits in (report.json and results.jsonl, read back with cc_run_load):
 *
 *   summary     cases by status (and vacuous / suspect / retried cases when results say so),
 *               a banner that says whether everything passed, the platforms;
 *   failures    first: every op x dtype x column with a case that did not pass, its worst
 *               cases (at most 5 each, 400 in all) with their worst element, message and the
 *               `capcheck repro '...'` line, selectable with one click;
 *   heat map    the worst bound ratio per op (rows) x dtype, one column group per provider and
 *               platform (or device); a cell per op x dtype x column that has cases;
 *   distribution  per cell, a histogram of the cases' worst bound ratios by decade, the bound
 *               (ratio 1) marked: how close to their bound the cases sit;
 *   gate        with a policy: each capsule x dtype checked, or trustedExternal with what holds
 *               it back (cc_gate_run; a refusal is shown as the gate's sentence);
 *   provenance  capcheck version and commit, provider, libtorch / CUDA / GPU / CPU, math modes,
 *               seed, case files and their sha256, the report's sha256 and results digest.
 *
 * Result fields other writers may add are read when present, by name: "platform" (a column
 * group per platform), and the flags "vacuous", "suspect", "retried" (counted); a status this
 * file does not know is shown by its name and counted as not passing. */
#ifndef CAPCHECK_REPORT_HTML_H
#define CAPCHECK_REPORT_HTML_H

#include <stddef.h>

#include "harness/evidence/gate.h"

/* Write dir/report.html for the run in dir. policy: the gate's policy file; NULL for the policy
 * built into capcheck (reports/policy.conf, harness/evidence/gate.h); one that cannot be read
 * is an error. Returns 0 with the page's size in *bytes and the gate's summary in gate (may be
 * NULL): its line "gate: ..." (cc_gate_line, or why there are no verdicts), and when thin evidence
 * holds a capsule back a second line naming the command that would check capsules; or -1 with a
 * sentence in msg. */
int cc_report_html_write(const char *dir, const char *policy, long *bytes,
                         char *gate, size_t gate_len, char *msg, size_t len);

/* The same page for a run already gated (g under pol, with the catalog cat it used), written
 * into g's folder without a summary line. Returns 0, or -1 with a sentence in msg. */
int cc_report_html_write_gated(const cc_gate *g, const cc_policy *pol, const cc_catalog *cat,
                               long *bytes, char *msg, size_t len);

#endif
