/* capcheck diff BASE NEW: what changed between two reports, per capsule x dtype x platform
 * (rows of report.json mapped to capsules through the catalog; the platform key each row names,
 * harness/run/platform.h).
 *
 * Like with like: rows are compared only on the platforms both reports have; a platform only
 * one report has is named ("only in base/new ... not compared") and never counts as a
 * regression or a new failure. Two reports with no platform in common are refused (exit 2): a
 * kernel that differs between an AMX and an AVX2 machine is not a regression.
 *
 * A row is passing when every case passed (and it has one), failing when a case failed,
 * errored, crashed or timed out, and otherwise unsupported-only. Named changes:
 *   regression   passing in BASE, failing or absent in NEW (absent: no case of it any more);
 *   fixed        failing in BASE, passing in NEW;
 *   new failure  failing in NEW, and not in BASE (absent or unsupported-only there);
 *   drift        passing in both, worst bound ratio moved by more than the factor F (default
 *                4, --drift F) either way; ratios below 0.01 count as 0.01 (a change among
 *                near-exact results is noise, not drift);
 *   new          a row NEW has and BASE had not, passing.
 * What it reads: the rows of each side's report.json. A side that is a run (its folder holds
 * what capcheck run or merge leaves beside the report: results.jsonl, run.json, report.html or
 * report.junit.xml) must hold its results.jsonl, matching the report's results digest; a report
 * kept alone (report.json and its seal, as scripts/baseline keeps reports/baseline) is read as
 * it is. The first two lines say which each side was.
 * Exit code: 1 when there is a regression or a new failure (or drift, with --fail-on-drift),
 * 0 otherwise, 2 for unusable input (unreadable, not a report, a broken .sha256 seal, a run
 * whose results.jsonl is missing or does not match, a shard of a run; a report without a seal
 * is read, and said to be unsealed). */
#ifndef CAPCHECK_DIFF_H
#define CAPCHECK_DIFF_H

#include <stdio.h>

#include "harness/evidence/merge.h"
#include "harness/report/capsules.h"

#define CC_DIFF_DEFAULT_DRIFT 4.0
#define CC_DIFF_RATIO_FLOOR 0.01

/* One side of a diff (a folder or its report.json) as described above. 0, or -1 with msg. */
int cc_diff_load(const char *path, cc_run *run, char *msg, size_t len);

int cc_diff_command(const char *base, const char *new_path, double drift, int fail_on_drift,
                    const cc_catalog *cat, FILE *out, FILE *err);

#endif
