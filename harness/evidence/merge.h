/* Sharding and merging, and reading a finished run back (for merge, gate and diff).
 *
 * --shard I/N (1 <= I <= N) keeps the cases of shard I of N. Every case has a cost, the
 * pool's estimate of its time (cc_case_timeout: elements x inputs), and a hash (FNV-1a of its
 * canonical line). Cases are dealt, most costly first (ties by hash, then by position), each
 * to the shard with the least cost so far (ties to the lowest shard): deterministic, balanced,
 * and the same whatever machine computes it. A shard keeps its cases in run order; its report
 * carries "shard" {index, count, cases_total, case_list_hash of the whole run, indices: the
 * whole-run index of each of its cases}, and its recorded command omits "--shard I/N".
 *
 * capcheck merge DIR... --out OUT reads the shard folders (report.json, its .sha256 seal,
 * results.jsonl), refuses a set it cannot trust (one sentence each: an unsealed or altered
 * report, results that do not match their report's digest, shards of different runs, set-ups or
 * platforms,
 * a shard missing or given twice, cases in two shards or in none), and writes OUT as one
 * unsharded run would have: results.jsonl in case order, report.json (equal to the unsharded
 * report but for "timing"), report.json.sha256, report.md, report.junit.xml. */
#ifndef CAPCHECK_MERGE_H
#define CAPCHECK_MERGE_H

#include <stddef.h>

#include "core/json.h"
#include "harness/case/case.h"
#include "harness/report/provenance.h"
#include "harness/report/report.h"
#include "harness/report/repro.h"

/* "I/N" -> index, count. Returns 0, or -1 with a sentence in msg. */
int cc_shard_parse(const char *spec, int *index, int *count, char *msg, size_t len);
/* Keep shard index/count of cases (compacted in place) and describe it in *out (out->global
 * is malloc'd: free it). Returns 0, or -1 with msg (out of memory). */
int cc_shard_select(cc_case_list *cases, int index, int count, cc_shard_info *out, char *msg,
                    size_t len);

/* A finished run read back. */
typedef struct {
    char dir[512];
    char report_path[600];
    char sha256[65]; /* of report.json's bytes */
    int sealed;      /* 1: report.json.sha256 exists and matches; 0: there is none */
    cc_json *json;   /* the parsed report (NULL for a merge made in memory) */
    cc_provenance prov;
    char provider_description[512], case_files[512], command[512];
    char accumulation[16]; /* report.json's judgement.accumulation ("strict" when absent) */
    cc_repro repro; /* "repro" of the report (empty for a report written before it existed) */
    unsigned long long base_seed;
    long cases;
    double wall_seconds;
    long session_cases;
    int resumed;
    cc_result *results; /* by case index; n_results == cases when read */
    size_t n_results;
} cc_run;

enum {
    CC_LOAD_SEAL = 1,       /* refuse a report without its .sha256 seal */
    CC_LOAD_RESULTS = 2,    /* read results.jsonl and check it against "results_digest" */
    CC_LOAD_PROVENANCE = 4, /* refuse a report without "provenance" */
};

/* Read the run at `path` (a folder, or its report.json). A seal that does not match is always
 * refused. Returns 0, or -1 with one sentence in msg. */
int cc_run_load(const char *path, unsigned flags, cc_run *out, char *msg, size_t len);
void cc_run_free(cc_run *r);
/* Combine a complete shard set into one run (results in whole-run order). */
int cc_run_merge(cc_run *shards, int n, cc_run *out, char *msg, size_t len);
/* The report of a run (rows, totals, digest, provenance), as capcheck run would build it. */
int cc_run_report(const cc_run *r, cc_report *rep, char *msg, size_t len);
/* sha256 of the report.json text that rep writes. */
int cc_report_json_sha256(const cc_report *rep, char hex[65]);

/* Write the run (results in case order) into dir as capcheck run does: results.jsonl,
 * report.json and its seal, report.md, report.junit.xml (a run.json of a run that was there is
 * removed: it would describe another run). counts (may be NULL) receives what the report
 * counts (each case once, harness/report/identity.h).
 * Returns 0, or -1 with a sentence in msg. */
typedef struct {
    long distinct, passed; /* cases, each counted once; of them passing */
    long repeats, disagreeing; /* records folded into an earlier one; cases they disagreed with */
} cc_run_counts;
int cc_run_write(const cc_run *r, const char *dir, cc_run_counts *counts, char *msg, size_t len);

/* capcheck merge: returns the exit code (0 merged, every case passed; 1 merged, some case did
 * not; 2 refused or unwritable: out_dir is one of the shards, or holds a run and !force). */
int cc_merge_command(int n, const char *const *dirs, const char *out_dir, int force, FILE *log);

#endif
