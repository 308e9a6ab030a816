/* Room harness/report/: results as records and files (result lines, report.json/.md,
 * junit, seal), provenance, capsule names, jschema, the pages' HTML parts (html) and the result
 * fields read by name (result_extras). May call harness/run/ and below. */
/* Results as evidence: one JSON line per case (results.jsonl), and the aggregate report
 * (report.json, report.md) per op x dtype x device x provider. */
#ifndef CAPCHECK_REPORT_H
#define CAPCHECK_REPORT_H

#include <stdio.h>

#include "core/sha256.h"
#include "core/strbuf.h"
#include "harness/report/expect.h"
#include "harness/report/identity.h"
#include "harness/report/provenance.h"
#include "harness/report/repro.h"
#include "harness/run/runner.h"

#define CC_REPORT_SCHEMA "capcheck-report/2" /* reports/schema.json */

void cc_result_write_json(FILE *f, const cc_result *r);
/* The same record's members (after its '{', through "}\n") appended to b: the journal's form. */
void cc_result_put_json_members(cc_strbuf *b, const cc_result *r);

/* One row per op x dtype x device x provider x platform (harness/run/platform.h; "" for results
 * that name none). */
typedef struct {
    char op[32];
    cc_dtype dtype;
    cc_device device;
    char provider[32];
    char platform[48];
    char vjp_mode[24];
    long counts[CC_RES_COUNT];
    long cases;
    long vacuous, suspect; /* cases judged vacuous (never evidence), passing cases judged suspect */
    char first_vacuous[CC_CASE_LINE_MAX]; /* the first vacuous case, and its vacuous outputs */
    char first_vacuous_outputs[96];
    /* cases whose bits depend on the buffers' placement (cc_result.placement_sensitive), and
     * the first: its line and "y[3,1]: 0.25 at the first placement, 0.2500001 at the other" */
    long placement;
    char first_placement[CC_CASE_LINE_MAX];
    char first_placement_at[320];
    long retried; /* results that ran twice (cc_result.retried) */
    /* the case with the largest bound ratio (report.json's worst_case), a NaN/Inf pattern miss
     * only when no other case has a ratio (see worst_failure) */
    double worst_ratio;
    int worst_line_nonfinite;
    char worst_line[CC_CASE_LINE_MAX];
    char first_failure[CC_CASE_LINE_MAX]; /* the first case that did not pass (any status) */
    char first_failure_msg[384];
    long sampled;            /* cases checked on a sample of their elements (harness/run/sample.h) */
    double least_fraction;   /* the smallest share of elements one of them checked */
    /* the worst case that failed, errored, crashed or timed out, what report.md, JUnit, the gate
     * and the run's closing summary show; "" when none did. Worst: a NaN/Inf pattern miss
     * (cc_result_nonfinite_miss) only when the row has no other failure, then the largest
     * bound ratio, the first of equals */
    char worst_failure[CC_CASE_LINE_MAX];
    char worst_failure_msg[384];
    cc_result_status worst_failure_status;
    double worst_failure_ratio;
    cc_three_way_verdict worst_failure_verdict;
    int worst_failure_nonfinite;
    /* the failures on a NaN/Inf pattern, counted apart, and the first of them */
    long nonfinite;
    char first_nonfinite[CC_CASE_LINE_MAX];
    char first_nonfinite_msg[384];
} cc_report_row;

/* A row with a case that failed, errored, crashed or timed out. */
int cc_report_row_failing(const cc_report_row *row);
/* "3 fail, 1 crash": of per-status counts, those of the statuses that are neither a pass nor
 * unsupported, the ones that occur. */
void cc_report_not_passed_counts(const long *counts, char *buf, size_t n);
/* The same for a row, its NaN/Inf pattern misses counted apart: "36 fail; 3 of the fails on a
 * NaN/Inf pattern". */
void cc_report_row_not_passed(const cc_report_row *row, char *buf, size_t n);

/* One result judged against its expectation. */
typedef struct {
    char line[CC_CASE_LINE_MAX];
    char platform[48];
    cc_expect_outcome outcome;
    char msg[1024];
} cc_report_judged;

typedef struct {
    cc_report_row *rows;
    size_t n, cap;
    /* cases: the records added (results.jsonl's lines: every case line run). Rows, counts and
     * every figure but the digest, accumulation and retried count each case once however often
     * it ran (harness/report/identity.h): distinct cases, of which `repeats` more records were
     * folded, and `disagreeing` cases whose repeats disagreed (counted nondeterministic) */
    long cases, counts[CC_RES_COUNT];
    long distinct, repeats, disagreeing;
    cc_fold fold;
    long vacuous, suspect, placement; /* placement: placement-sensitive cases */
    /* how the results were judged: the accumulation mode of the first, and whether another
     * result had the other one (written "mixed") */
    cc_accumulation accumulation;
    int mixed_accumulation;
    long retried; /* results that ran twice: their first worker was killed from outside */
    /* distinct cases that could not judge the provider (harness/run/exit_code.h: unsupported,
     * out of memory; not once a repeat disagreed: then nondeterministic), and the failed
     * expectations among them */
    long unjudged, expect_failed_unjudged;
    /* timing: wall-clock figures of the session that wrote the report. They are kept apart
     * (JSON "timing" on one line of its own, Markdown "- timing:" line) so that reports of the
     * same run compare equal without them; everything else depends only on the results. */
    double wall_seconds;
    long session_cases; /* cases this session ran (fewer than cases after --resume) */
    int resumed;
    char provider_description[512];
    char case_files[512];
    unsigned long long base_seed;
    char command[512];
    cc_repro repro; /* what reruns one of its cases (harness/repro.h): every repro line */
    /* report.md's "Since the baseline" section (capcheck diff against --baseline), or NULL;
     * not owned */
    const char *since_baseline;
    cc_provenance provenance; /* written as "provenance"/"shard" when present (provenance.h) */
    cc_sha256_ctx digest;     /* "results_digest": every added result, in the order added */
    /* the added results whose witnesses ran (harness/run/witness.h), in the order added: written
     * as "witnessed" and a Markdown table only when there is one */
    cc_result *witnessed;
    size_t n_witnessed, cap_witnessed;
    long verdicts[CC_VERDICT_COUNT];
    /* expectations (harness/report/expect.h; NULL: none): every added result is judged against
     * them; report.md lists each judged case that has an expectation or did not pass */
    const cc_expectations *expect;
    long expect_counts[CC_EXPECT_COUNT];
    cc_report_judged *judged;
    size_t n_judged, cap_judged;
} cc_report;

void cc_report_init(cc_report *rep);
/* "strict", "relaxed", or "mixed" when the results were judged in both modes. */
const char *cc_report_accumulation(const cc_report *rep);
void cc_report_free(cc_report *rep);
/* Add the next record (in case order). A repeat of a case is folded into it (its provenance's
 * deterministic mode decides whether bits must agree: set rep->provenance first). 0, or -1 when
 * memory runs out. */
int cc_report_add(cc_report *rep, const cc_result *r);
/* The cases that did not pass, each case counted once. */
long cc_report_not_passed(const cc_report *rep);
/* The exit code of the run it reports (harness/run/exit_code.h), each case counted once
 * however often it ran: 1 when a case did not pass (with expectations: an expectation failed on
 * a judged result), else 125 when a case could not be judged (with expectations: such a case
 * failed its expectation), else 0. */
int cc_report_exit_code(const cc_report *rep);
void cc_report_write_json_stream(const cc_report *rep, FILE *f);
/* Written to a temporary file beside `path`, then renamed: never half a report. The JSON
 * report is then sealed: PATH.sha256 holds its hash (cc_report_seal). */
int cc_report_write_json(const cc_report *rep, const char *path);
int cc_report_write_markdown(const cc_report *rep, const char *path);

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

#endif
