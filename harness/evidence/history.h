/* capcheck history DIR... --out OUT [--drift F]: how a series of sealed runs (nightlies, given
 * oldest first) moves, as OUT/history.json (schema capcheck-history/1) and OUT/history.html.
 *
 * Each DIR is a whole run (a merged one for a sharded nightly), loaded as the gate loads it
 * (sealed report, results matching its digest, provenance). Per night: its provenance (capcheck
 * commit, libtorch, CUDA, cuDNN, GPU, CPU, the platforms its results name) and what changed
 * since the night before. Per series, a capsule x dtype x platform (or device when results name
 * no platform), and per night: cases, passing, not passing, and the worst and the median bound
 * ratio of its passing cases (a case that did not pass is a failure, listed as one). Then:
 *   failures  the first night a series had a case that did not pass (with that case's line),
 *             its last such night, and whether it still fails on the last night;
 *   drift     a series drifted when, on some night, its median or its worst bound ratio is
 *             more than F times (default 4, as capcheck diff) above or below the same figure
 *             on its first night; ratios under 0.001 count as 0.001 (noise, not drift). The
 *             first such night is named, and whether the stack changed that night;
 *   case set  a night whose cases (each result's line and platform) are not the night
 *             before's is marked ("case_set_changed"), and a series whose own cases changed
 *             breaks there: a failure before the break is not called fixed after it
 *             ("failure_now": "case set changed"), and drift is measured from the first night
 *             after its last break. The command's line names each change (123178 -> 8842).
 * A folder given twice, or two folders holding one sealed report, is refused (one night would
 * count twice). Exit 0 when written, 2 when a run is refused or OUT cannot be written. */
#ifndef CAPCHECK_HISTORY_H
#define CAPCHECK_HISTORY_H

#include <stdio.h>

#define CC_HISTORY_SCHEMA "capcheck-history/1"
#define CC_HISTORY_RATIO_FLOOR 1e-3

int cc_history_command(int n, const char *const *dirs, const char *out_dir, double drift,
                       FILE *out, FILE *err);

#endif
