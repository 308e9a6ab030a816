/* Expectations scoped to platforms: the known deviations, crashes and unsupported combinations
 * kept in case files (cases/regressions/, cases/aten_unsupported.cases) say on which platform
 * keys (harness/run/platform.h) they were seen, so that a run on any machine can tell "still there"
 * from "ATen changed" from "this platform never takes that kernel".
 *
 * A directive is a comment line, so the case lines (and `capcheck repro` of them) stay as they
 * are:
 *     #! seen STATUS on KEY [KEY...] [intermittent]
 * STATUS is fail, crash, timeout, unsupported or nondeterministic, or placement-sensitive (a pass
 * whose bits depended on where --repeat put its buffers: cc_result.placement_sensitive); each
 * KEY a platform key (cpu:amx, cuda:sm90).
 * It applies to every case line after it up to the next directive (or the end of the file); a
 * case line before any directive has no expectation (it is expected to pass). `intermittent`
 * marks a deviation that does not show on every run (a pass there is no news).
 *
 * Judging one result of a case on the platform the result names:
 *   listed platform, same status         reproduced        (as expected)
 *   listed platform, pass, intermittent  not this time     (as expected)
 *   listed platform, anything else       BROKEN            ATen changed: fix the directive and
 *                                                          docs/aten.md's table
 *   other platform, pass                 did not reproduce (an unexpected pass: reported, never
 *                                                          a failure)
 *   other platform, same status          also seen         (reported: add the key)
 *   other platform, crash or timeout     CRASH             a crash is a crash where none was seen
 *   other platform, anything else        UNEXPECTED        (an error, another status)
 *   no expectation, pass                 -                 (nothing to say)
 *   no expectation, anything else        UNEXPECTED
 * BROKEN, CRASH and UNEXPECTED are failures (capcheck run --expect exits 1). */
#ifndef CAPCHECK_EXPECT_H
#define CAPCHECK_EXPECT_H

#include <stddef.h>

#include "harness/case/case.h"
#include "harness/run/platform.h"
#include "harness/run/runner.h"

#define CC_EXPECT_MAX_KEYS 12

typedef struct {
    char line[CC_CASE_LINE_MAX]; /* canonical line of one case (a generator gives several) */
    cc_result_status status;     /* what was seen */
    int placement;               /* seen placement-sensitive (status pass) */
    int n_keys;
    char keys[CC_EXPECT_MAX_KEYS][CC_PLATFORM_KEY_MAX]; /* where it was seen */
    int intermittent;
    char where[280]; /* file:line of the directive */
} cc_expectation;

typedef struct {
    cc_expectation *v;
    size_t n, cap;
} cc_expectations;

typedef enum {
    CC_EXPECT_NONE = 0,         /* no expectation and a pass */
    CC_EXPECT_REPRODUCED,       /* seen here, seen again */
    CC_EXPECT_NOT_THIS_TIME,    /* seen here, intermittent, passed this run */
    CC_EXPECT_NOT_REPRODUCED,   /* not seen here, and it passed: "did not reproduce on KEY" */
    CC_EXPECT_ALSO_SEEN,        /* not listed here, and it did the same */
    CC_EXPECT_BROKEN,           /* seen here, and now it does not: a failure */
    CC_EXPECT_CRASH,            /* crashed or timed out where no such thing was seen: a failure */
    CC_EXPECT_UNEXPECTED,       /* any other result that is not a pass: a failure */
    CC_EXPECT_COUNT
} cc_expect_outcome;

/* "reproduced", "did-not-reproduce", "broken", ... */
const char *cc_expect_outcome_name(cc_expect_outcome o);
int cc_expect_is_failure(cc_expect_outcome o);

/* Read the directives of case-file text (`name` labels errors) and add one expectation per
 * case of every line they cover, each case parsed with `def` as a run parses it. Returns 0, or
 * -1 with err (file, line, column, sentence): a malformed directive or case line. */
int cc_expect_parse_text(const char *text, const char *name, const cc_case_defaults *def,
                         cc_expectations *out, cc_parse_error *err);
int cc_expect_load(const char *path, const cc_case_defaults *def, cc_expectations *out,
                   cc_parse_error *err);
void cc_expect_free(cc_expectations *e);
/* The expectation of a canonical case line; NULL when it has none. */
const cc_expectation *cc_expect_find(const cc_expectations *e, const char *line);

/* Judge result r (its platform is r->platform) against e (NULL: none), with one sentence for
 * people in msg (e.g. "did not reproduce on cpu:avx2 (seen fail on cpu:amx,
 * cases/regressions/conv.cases:8)"; "" for CC_EXPECT_NONE). */
cc_expect_outcome cc_expect_judge(const cc_expectation *e, const cc_result *r, char *msg,
                                  size_t len);

#endif
