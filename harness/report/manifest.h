/* A run's manifest: the small text file a signature covers (harness/evidence/signature.h signs
 * and verifies it). It names what made the run and the sha256 of every file of the run that is
 * read back, one line each in sha256sum's format, so `sha256sum -c` checks the files by hand:
 *
 *   capcheck-manifest/1
 *   kind run                                   (or evidence: what capcheck certify judged)
 *   capcheck 0.1.0 commit 0123abcd...
 *   platforms cpu:avx512 cpu:avx2              (a run's: the report's platform keys, or none)
 *   shard 1/2 manifest sha256:<hex> signer SHA256:<fingerprint>   (a merge: each shard's)
 *   shard 2/2 unsigned
 *   <sha256 hex>  report.json
 *   <sha256 hex>  results.jsonl
 *
 * A file's path is relative to the manifest's folder, without "..", a leading '/', blanks or
 * control characters. */
#ifndef CAPCHECK_MANIFEST_H
#define CAPCHECK_MANIFEST_H

#include <stddef.h>

#define CC_MANIFEST_FORMAT "capcheck-manifest/1"
#define CC_MANIFEST_FILE "manifest"                   /* a run's, beside its report.json */
#define CC_MANIFEST_SIG_FILE "manifest.sig"           /* its signature */
#define CC_EVIDENCE_MANIFEST_FILE "evidence.manifest" /* certify's judgement of the run */
#define CC_EVIDENCE_MANIFEST_SIG_FILE "evidence.manifest.sig"
#define CC_MANIFEST_SHARDS_DIR "shards" /* a merge's copies: I-of-N.manifest and its .sig */

typedef struct {
    char path[512];
    char sha256[65];
} cc_manifest_file;

typedef struct {
    int index, count;
    char manifest_sha256[65]; /* of the shard's manifest ("" for an unsigned shard) */
    char signer[64];          /* the fingerprint of the key that signed it ("": unsigned) */
} cc_manifest_shard;

typedef struct {
    char kind[16]; /* "run" or "evidence" */
    char capcheck_version[32], git_commit[48];
    char platforms[1024]; /* keys separated by blanks, "" for none */
    cc_manifest_shard *shards;
    size_t n_shards, cap_shards;
    cc_manifest_file *files;
    size_t n_files, cap_files;
} cc_manifest;

void cc_manifest_free(cc_manifest *m);
/* Add dir/rel to the list with the sha256 of its bytes. 0, or -1 with msg. */
int cc_manifest_add_file(cc_manifest *m, const char *dir, const char *rel, char *msg, size_t len);
/* Add a shard line. 0, or -1 with msg (out of memory). */
int cc_manifest_add_shard(cc_manifest *m, const cc_manifest_shard *s, char *msg, size_t len);
/* Write the manifest to path (atomically). 0, or -1 with msg. */
int cc_manifest_write(const cc_manifest *m, const char *path, char *msg, size_t len);
/* Parse manifest text; `name` labels errors ("NAME:LINE: ..."). 0, or -1 with msg. */
int cc_manifest_parse(const char *text, const char *name, cc_manifest *m, char *msg, size_t len);
/* The file line for rel (NULL: none). */
const cc_manifest_file *cc_manifest_find(const cc_manifest *m, const char *rel);
/* Remove a run's manifests and their signatures from dir (a new run, a merge into it): a
 * signature of another run must not stay beside this one. */
void cc_manifest_remove(const char *dir);

#endif
