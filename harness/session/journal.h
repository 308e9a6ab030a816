/* The run directory and its journal: what makes an interrupted run resumable.
 *
 *   DIR/run.json       the identity of the run, written (atomically) when it starts:
 *                      {"schema":"capcheck-run/1", "cases":N, "case_list_hash":"fnv1a64:...",
 *                       "provider":..., "provider_description":..., "case_files":...,
 *                       "base_seed":..., "command":..., "judging":"strict"
 *                       [, "witnesses":"openblas,reference"]
 *                       [, "cpu_capability":"avx2,default"][, "aten_threads":"1,2"]
 *                       [, "platforms":[...]]}
 *                      judging: the accumulation mode, ", power" added for --power (a run.json
 *                      without it is a strict run of a capcheck that had no other).
 *                      With --cpu-capability, the run is every case once per level, level by
 *                      level: record index = level position x cases + case index; with
 *                      --aten-threads once per level and thread count (a pass), the counts
 *                      inner: pass = level position x counts + count position. "platforms"
 *                      (harness/run/platform.h) grows as each level's workers report theirs, so a
 *                      resume knows the platform of a level it does not run again.
 *                      The hash is FNV-1a 64 over the canonical line of every case of the run,
 *                      in order, each followed by '\n' (after --op filtering: the run's cases
 *                      are the ones it runs).
 *   DIR/results.jsonl  the journal: one record per finished case, appended in completion
 *                      order, each one write(2) of one whole line: the result record of
 *                      cc_result_write_json with the case's index in the run first,
 *                        {"index":17,"case":"<canonical line>","op":...,"status":...}
 *                      Records reach the file as they finish through the journal's writer
 *                      process (journal.c): the appender copies each into shared memory that
 *                      outlives it, so a killed capcheck (its process group too) loses nothing
 *                      it appended; fsync runs every CC_JOURNAL_SYNC_SECONDS while records come,
 *                      in the writer, and at close: a power cut loses about the last second of
 *                      results at most, which --resume runs again. (A write(2) per record in
 *                      line cost 1.9 us of a small case's ~30; a count-based sync, every 64
 *                      records, 10-15 %; a timed one in line, 5 %.)
 *
 * Resume rules (cc_journal_scan): a record counts when its index is one of the run's and its
 * "case" is exactly that case's canonical line; any record naming another case means the case
 * list changed, and resuming is refused. Unreadable lines are dropped wherever they are: a torn
 * tail (a last line without its newline, or unreadable lines that only end the file) is cut
 * off before appending; unreadable lines followed by good records are damage: every good
 * record around them is kept, the journal is rewritten without them (the damaged file is kept
 * as results.jsonl.damaged) and their cases run again. A case recorded twice keeps its first
 * record, except a crash whose worker was killed from outside twice ("retried":true,
 * harness/pool.h): resuming runs it again, and its new record replaces it. */
#ifndef CAPCHECK_JOURNAL_H
#define CAPCHECK_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "harness/case/case.h"
#include "harness/report/report.h"
#include "harness/report/repro.h"
#include "harness/run/runner.h"

#define CC_JOURNAL_SYNC_SECONDS 1.0
#define CC_JOURNAL_LOCK_WAIT 5.0

typedef struct {
    uint64_t n_cases;
    uint64_t case_hash;
    char provider[64];
    char provider_description[512];
    char case_files[512];
    char command[512];
    unsigned long long base_seed;
    char witnesses[256]; /* the witness providers' names, comma-separated; "" (and no member in
                            run.json) for a run without witnesses */
    char judging[32];    /* "strict", "relaxed", "strict, power", ... (cc_judging_describe) */
    char cpu_levels[128]; /* --cpu-capability, the levels in run order ("" without it) */
    char aten_threads[64]; /* --aten-threads, the counts in run order ("" without it) */
    int n_platforms;      /* the platforms the run's workers reported, in level order */
    cc_platform platforms[CC_MAX_PLATFORMS];
    cc_repro repro;      /* what reruns one of its cases (harness/repro.h); "repro" in run.json */
} cc_run_info;

uint64_t cc_case_list_hash(const cc_case *cases, size_t n);
/* DIR/run.json, written to a temporary file, synced and renamed. */
int cc_run_info_write(const char *dir, const cc_run_info *ri, char *msg, size_t msg_len);
/* Returns 0; 1 when DIR/run.json does not exist; -1 with msg when it cannot be read. */
int cc_run_info_read(const char *dir, cc_run_info *ri, char *msg, size_t msg_len);

/* What the journal already holds for a run of `n` cases. */
typedef struct {
    size_t n_cases, n_done; /* n_done: cases with a record (those to rerun included) */
    size_t n_rerun;         /* recorded crashes to run again (rerun[i]) */
    int64_t *offset;    /* offset[i]: byte offset of case i's record, -1 when it has none */
    char *rerun;        /* rerun[i]: case i's record is a crash from outside kills: run it again */
    int64_t valid_end;  /* length of the journal up to the end of its last good line */
    int64_t file_size;
    int torn_lines;     /* unreadable lines ending the file (a torn tail) */
    int damaged_lines;  /* unreadable lines with good records after them */
    long first_damaged_line; /* 1-based, the first damaged line (0: none) */
    char damaged_why[256];   /* what is wrong with it */
    int duplicates;     /* later records of an already recorded case, ignored */
} cc_journal_scan;

/* Scan DIR/results.jsonl against the run's cases, run `copies` times (the dispatch levels; 1
 * without them): record index k is case k % n (a missing journal is an empty one).
 * Returns 0, or -1 with one sentence in msg: a record of another case list or without an
 * index, an unreadable file. */
int cc_journal_scan_dir(const char *dir, const cc_case *cases, size_t n, size_t copies,
                        cc_journal_scan *out, char *msg, size_t msg_len);
/* Rewrite DIR/results.jsonl with the scan's kept records only (not its damaged lines, torn
 * tail, duplicates or records to rerun), in their journal order, atomically; a damaged journal
 * is kept as results.jsonl.damaged. Scan again afterwards (offsets change). 0, or -1 with
 * msg. */
int cc_journal_compact(const char *dir, const cc_journal_scan *s, char *msg, size_t msg_len);
void cc_journal_scan_free(cc_journal_scan *s);

/* Add every recorded result to rep in case-index order (deterministic whatever order the
 * cases finished in). Returns 0, or -1 with msg when a record cannot be read back. */
int cc_journal_report(const char *dir, const cc_journal_scan *s, cc_report *rep, char *msg,
                      size_t msg_len);

typedef struct cc_journal cc_journal;

/* Open DIR/results.jsonl for appending: keep_bytes < 0 starts it empty; otherwise the file is
 * cut to keep_bytes (a scan's valid_end: the torn tail goes) and appended to. The file stays
 * locked (flock, exclusive) while open and until its writer process has written the last record:
 * a second run into the same folder is refused, not interleaved (a resume right after a kill
 * waits up to CC_JOURNAL_LOCK_WAIT seconds for the killed run's writer; so does the scan). */
int cc_journal_open(const char *dir, int64_t keep_bytes, cc_journal **out, char *msg,
                    size_t msg_len);
/* Append the record of case `index` (one whole line; a failed write of the writer's is said by
 * the next append, or by close). */
int cc_journal_append(cc_journal *j, size_t index, const cc_result *r, char *msg,
                      size_t msg_len);
/* Sync and close (NULL is fine). Returns -1 when the last sync failed. */
int cc_journal_close(cc_journal *j);

#endif
