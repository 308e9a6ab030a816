/* What produced a report (DESIGN.md section 7): capcheck version and git commit, the
 * provider's own description (libtorch, CUDA and cuDNN versions, GPU, math modes), the CPU, the
 * base seed and the sha256 of every case file; for a shard of a sharded run, which shard of
 * which run. Written into report.json as "provenance" (and "shard"), with "results_digest":
 * a sha256 over every result in case-index order (cc_results_digest_add), so a report commits
 * to the results.jsonl beside it while staying independent of timing and completion order.
 *
 * The provider-stated fields are read from its describe() text, a list of "key value" items
 * separated by "; " (e.g. "libtorch 2.15.0; threads 1; tf32 off; deterministic off; cuda none"):
 * libtorch, cuda, cudnn, gpu, tf32, deterministic, threads, attention (the attention backend,
 * e.g. "composed (no SDPA)"). A value starting with "none" and an item the provider does not
 * state are both written as null. The platforms (harness/run/platform.h) are listed with their facts:
 * ATen's CPU capability, oneDNN's version and ISA, the BLAS, the CPU flags, the overrides, and on
 * CUDA the GPU and library versions.
 *
 * The provider's identity ("provider": name, kind builtin or plugin, and for a plugin its
 * library's path and sha256) binds the evidence to what ran (harness/report/capsules.h). The
 * libtorch version is the built-in ATen provider's alone, read from the library it loaded: a
 * plugin's description cannot claim one (written as null whatever it says). */
#ifndef CAPCHECK_PROVENANCE_H
#define CAPCHECK_PROVENANCE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/json.h"
#include "harness/run/platform.h"
#include "harness/run/runner.h"
#include "core/sha256.h"
#include "harness/report/capsules.h"

#define CC_VERSION "0.1.0" /* the capcheck version every report and run.json carries */
#define CC_PROV_MAX_FILES 64

typedef struct {
    char path[256];  /* as given on the command line, or "embedded:smoke.cases" */
    char sha256[65];
} cc_prov_file;

/* A shard of a sharded run (--shard index/count); present = 0 for a whole run. */
typedef struct {
    int present;
    int index, count;     /* 1-based index of count */
    uint64_t total;       /* cases of the whole run */
    uint64_t case_hash;   /* cc_case_list_hash of the whole run's cases */
    size_t n;             /* this shard's cases */
    uint64_t *global;     /* global[k]: index in the whole run of this shard's case k */
} cc_shard_info;

typedef struct {
    int present;
    char capcheck_version[16];
    char git_commit[48];
    char cpu_model[128];
    int n_files;
    cc_prov_file files[CC_PROV_MAX_FILES];
    /* the value stream (harness/case/values.h) a case line without stream= drew when the run
     * was made: CC_STREAM_DEFAULT for a run of this capcheck; 1 for a report that does not say
     * (written before the default moved to 2); 0 (zeroed) writes as CC_STREAM_DEFAULT */
    int default_stream;
    cc_shard_info shard; /* global is owned by whoever filled it (cc_provenance_free for read) */
    /* stated by the provider (filled by cc_provenance_from_json; the writer derives them from
     * the provider description every time); "" = not stated or none */
    char libtorch[48], cuda[48], cudnn[48], gpu[128], tf32[64], deterministic[48], threads[16];
    char attention[48];
    cc_provider_identity provider; /* kind "" when the report does not record it */
    /* what selects the kernels (harness/run/platform.h), one entry per platform the results name,
     * in run order; written as "platforms" when there is one */
    int n_platforms;
    cc_platform platforms[CC_MAX_PLATFORMS];
} cc_provenance;

/* This build's version and commit, this machine's CPU model, and the hash of every case file:
 * paths[i] is read from disk unless texts && texts[i], which is then hashed instead (the
 * embedded smoke cases). Returns 0, or -1 with a sentence naming an unreadable file. */
int cc_provenance_collect(cc_provenance *p, int n, const char *const *paths,
                          const char *const *texts, char *msg, size_t len);
const char *cc_git_commit(void); /* the commit capcheck was built from, "-dirty" if modified */
/* The identity of a built-in provider (library NULL) or of the plugin loaded from `library`
 * (its sha256 is computed here). Returns 0, or -1 with a sentence (an unreadable library). */
int cc_provider_identity_set(cc_provider_identity *id, const char *name, const char *library,
                             char *msg, size_t len);

/* cc_describe_item (a description's "key value" items) is in harness/run/platform.h. */

/* report.json's "provenance", optional "shard" and "results_digest" members, each on its own
 * line(s) beginning with two spaces and ending with ",\n". */
void cc_provenance_write_json(FILE *f, const cc_provenance *p, const char *provider_description,
                              unsigned long long base_seed, const cc_sha256_ctx *digest);

/* Read them back from a parsed report. Returns 0; 1 when the report has no "provenance";
 * -1 with msg when it is malformed. Free with cc_provenance_free (the shard's indices). */
int cc_provenance_from_json(const cc_json *report, cc_provenance *p, char *msg, size_t len);
void cc_provenance_free(cc_provenance *p);

/* One result into the digest: canonical line, status, checked flags and bound ratios. */
void cc_results_digest_add(cc_sha256_ctx *d, const cc_result *r);

#endif
