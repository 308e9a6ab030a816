/* Signed runs: who vouched for a run, and that nothing changed since (docs/evidence.md, "Signed
 * runs").
 *
 * A run's seal (report.json.sha256) and results digest catch an accidental edit, not a
 * deliberate one: anyone who edits a file can recompute both. A signature cannot be recomputed
 * without the private key. `--sign KEY` (run, certify, merge, and `capcheck sign` for a finished
 * run) writes the run's manifest (harness/report/manifest.h: capcheck's version and commit, the
 * platform keys, and the sha256 of report.json, its seal, results.jsonl and run.json; a merge's
 * also each shard's manifest digest and signer, with copies of the shards' manifests and
 * signatures under shards/) and signs it with OpenSSH's ssh-keygen (core/sshsig.h) in the
 * namespace CC_SIGN_NAMESPACE: DIR/manifest and DIR/manifest.sig. certify signs what it wrote from
 * the run (gate.txt, evidence/, Evidence.lean, with the run's manifest and signature) as
 * DIR/evidence.manifest and its .sig, in CC_SIGN_EVIDENCE_NAMESPACE, so neither signature can
 * stand for the other.
 *
 * `--allowed-signers FILE` (gate, evidence, emit-lean, diff, history, merge; git's
 * gpg.ssh.allowedSignersFile format) verifies a signed run: the signature by a key the file
 * allows, for capcheck's namespace, over the manifest beside it; every file the manifest lists
 * with the sha256 it lists; report.json and results.jsonl among them (the files the gate reads);
 * in a merged run, each signed shard's copied signature by an allowed key too. Anything else is
 * refused with one sentence naming the file and the signer. The policy's `require_signature yes`
 * refuses an unsigned run as well; without it an unsigned run is judged as before, with a line
 * saying it is unsigned. */
#ifndef CAPCHECK_SIGNATURE_H
#define CAPCHECK_SIGNATURE_H

#include <stddef.h>

#include "core/sshsig.h"
#include "harness/report/manifest.h"

#define CC_SIGN_NAMESPACE "capcheck-run@capcheck"
#define CC_SIGN_EVIDENCE_NAMESPACE "capcheck-evidence@capcheck"

/* What is known of a run's signature. */
typedef struct {
    int present;              /* DIR/manifest.sig is there */
    int verified;             /* by an allowed key (or, for check_unknown_keys, by its own) and
                                 every file as signed */
    char dir[600];            /* the run's folder */
    char fingerprint[64];     /* of the signing key: "SHA256:<base64>" */
    char key_type[48];
    char principal[256];      /* what the allowed-signers file calls the key ("" unverified) */
    char manifest_sha256[65]; /* of DIR/manifest (verified or signed only) */
    char report_sha256[65];   /* report.json's, as the manifest lists it */
    int shard_index, shard_count; /* a shard's (0 when the run is none) */
    int shards, signed_shards;    /* a merged run's shard lines, and the signed ones */
} cc_run_signature;

/* What a command trusts. */
typedef struct {
    const char *allowed_signers; /* --allowed-signers FILE; NULL: none given */
    int require;                 /* the policy's require_signature yes */
    const char *policy_name;     /* for the sentence that refuses an unsigned run */
    int check_unknown_keys; /* without allowed_signers, still check a signature by the key it
                               carries, and the files (merge: the shards it vouches for) */
} cc_trust;

/* Before a run that will be signed: that key can sign (a scratch file is signed and removed), so
 * an hour-long run does not end unsigned. Its fingerprint in fp[64]. 0, or -1 with msg. */
int cc_sign_probe(const char *key, char fp[64], char *msg, size_t len);

/* Sign the finished run in dir with key: its manifest (a merge's lists each shard's line of
 * `shards`, n_shards of them, and the copies cc_merge_sign made), then DIR/manifest.sig. out says
 * what was signed. 0, or -1 with msg (then no manifest is left in dir). */
int cc_run_sign(const char *dir, const char *key, const cc_run_signature *shards, size_t n_shards,
                cc_run_signature *out, char *msg, size_t len);

/* certify: sign what it wrote from the signed run in dir (gate.txt, evidence/<capsule>/
 * evidence.json, Evidence.lean when there, the run's manifest and signature) as
 * DIR/evidence.manifest and DIR/evidence.manifest.sig. 0, or -1 with msg. */
int cc_evidence_sign(const char *dir, const char *key, char *msg, size_t len);

/* Verify the run at path (a folder or its report.json) as t says (see above). 0 with out filled
 * (present 0: unsigned; present but not verified: signed, no allowed signers given); -1 with one
 * sentence in msg when it is refused. */
int cc_run_verify(const char *path, const cc_trust *t, cc_run_signature *out, char *msg,
                  size_t len);

/* One line about s for a command's output: who signed and what was checked, or that the run is
 * unsigned; "" when there is nothing to say (unsigned, and no --allowed-signers given). */
void cc_run_signature_line(const cc_run_signature *s, const cc_trust *t, char *buf, size_t n);

/* "ci@example (SHA256:...)" or "SHA256:...": how a sentence names the signer. */
void cc_run_signer_name(const cc_run_signature *s, char *buf, size_t n);

/* merge, before it merges: each shard folder's signature (cc_run_verify, with
 * check_unknown_keys); sigs[i] for dirs[i]. 0, or -1 with msg. */
int cc_merge_check_shards(int n, const char *const *dirs, const cc_trust *t,
                          cc_run_signature *sigs, char *msg, size_t len);

/* merge, after it wrote out_dir: copies of the signed shards' manifests and signatures into
 * out_dir/shards/ (stale ones removed), then with a key, the merged run signed (out). 0, or -1
 * with msg. */
int cc_merge_sign(const char *out_dir, int n, const cc_run_signature *sigs, const char *key,
                  cc_run_signature *out, char *msg, size_t len);

#endif
