#define _POSIX_C_SOURCE 200809L
#include "harness/evidence/signature.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/files.h"
#include "core/sha256.h"
#include "harness/evidence/merge.h"
#include "harness/report/provenance.h"
#include "harness/report/report_out.h"

/* The files of a run a manifest lists, when they are there; the first two are what the gate
 * reads, so a run's manifest must list them. */
static const char *const RUN_FILES[] = {"report.json", "results.jsonl", "report.json.sha256",
                                        "run.json"};
#define READ_BY_THE_GATE 2

/* The folder of a run given as a folder or as its report.json. */
static void run_dir(const char *path, char *dir, size_t n)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(dir, n, "%s", path);
        return;
    }
    const char *slash = strrchr(path, '/');
    snprintf(dir, n, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
}

static int exists(const char *dir, const char *name)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

void cc_run_signer_name(const cc_run_signature *s, char *buf, size_t n)
{
    if (s->principal[0])
        snprintf(buf, n, "%s (%s)", s->principal, s->fingerprint);
    else
        snprintf(buf, n, "%s", s->fingerprint);
}

/* ---- signing ------------------------------------------------------------------------------- */

int cc_sign_probe(const char *key, char fp[64], char *msg, size_t len)
{
    const char *tmpdir = getenv("TMPDIR");
    char path[1100], sig[1200];
    snprintf(path, sizeof path, "%s/capcheck-sign-probe-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) {
        snprintf(msg, len, "cannot make a scratch file to test the key: %s", strerror(errno));
        return -1;
    }
    int wrote = write(fd, "capcheck\n", 9) == 9;
    close(fd);
    cc_ssh_tool t;
    cc_ssh_tool_default(&t);
    snprintf(sig, sizeof sig, "%s.sig", path);
    cc_ssh_sig_info info;
    int rc = -1;
    if (!wrote)
        snprintf(msg, len, "cannot write %s: %s", path, strerror(errno));
    else if (cc_ssh_sign(&t, key, "capcheck-probe@capcheck", path, msg, len) == 0)
        rc = cc_ssh_sig_read(sig, &info, msg, len);
    if (rc == 0)
        snprintf(fp, 64, "%s", info.fingerprint);
    remove(sig);
    remove(path);
    return rc;
}

/* Sign DIR/name (a manifest) with key in namespace ns, and say what was signed in out. */
static int sign_manifest(const char *dir, const char *name, const char *key, const char *ns,
                         cc_run_signature *out, char *msg, size_t len)
{
    char path[1200], sig[1300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(sig, sizeof sig, "%s.sig", path);
    cc_ssh_tool t;
    cc_ssh_tool_default(&t);
    cc_ssh_sig_info info;
    if (cc_ssh_sign(&t, key, ns, path, msg, len) || cc_ssh_sig_read(sig, &info, msg, len) ||
        cc_sha256_file(path, out->manifest_sha256)) {
        if (!msg[0])
            snprintf(msg, len, "cannot read %s back: %s", path, strerror(errno));
        remove(path); /* no manifest without its signature */
        remove(sig);
        return -1;
    }
    out->present = 1;
    snprintf(out->dir, sizeof out->dir, "%s", dir);
    snprintf(out->fingerprint, sizeof out->fingerprint, "%s", info.fingerprint);
    snprintf(out->key_type, sizeof out->key_type, "%s", info.key_type);
    return 0;
}

/* The copies of a signed shard's manifest and signature in a merged run's folder. */
static void shard_copy(const cc_run_signature *s, char *manifest, char *sig, size_t n)
{
    snprintf(manifest, n, "%s/%d-of-%d.%s", CC_MANIFEST_SHARDS_DIR, s->shard_index, s->shard_count,
             CC_MANIFEST_FILE);
    snprintf(sig, n, "%s/%d-of-%d.%s", CC_MANIFEST_SHARDS_DIR, s->shard_index, s->shard_count,
             CC_MANIFEST_SIG_FILE);
}

int cc_run_sign(const char *dir, const char *key, const cc_run_signature *shards, size_t n_shards,
                cc_run_signature *out, char *msg, size_t len)
{
    memset(out, 0, sizeof *out);
    msg[0] = 0;
    cc_run r;
    if (cc_run_load(dir, CC_LOAD_SEAL | CC_LOAD_PROVENANCE, &r, msg, len))
        return -1;
    cc_manifest m;
    memset(&m, 0, sizeof m);
    snprintf(m.kind, sizeof m.kind, "run");
    snprintf(m.capcheck_version, sizeof m.capcheck_version, "%s", r.prov.capcheck_version);
    snprintf(m.git_commit, sizeof m.git_commit, "%s", r.prov.git_commit);
    for (int i = 0, used = 0; i < r.prov.n_platforms && used < (int)sizeof m.platforms; i++)
        used += snprintf(m.platforms + used, sizeof m.platforms - (size_t)used, "%s%s",
                         i ? " " : "", r.prov.platforms[i].key);
    out->shard_index = r.prov.shard.present ? r.prov.shard.index : 0;
    out->shard_count = r.prov.shard.present ? r.prov.shard.count : 0;
    cc_run_free(&r);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof RUN_FILES / sizeof RUN_FILES[0]; i++)
        if (i < READ_BY_THE_GATE || exists(dir, RUN_FILES[i]))
            rc = cc_manifest_add_file(&m, dir, RUN_FILES[i], msg, len);
    for (size_t i = 0; rc == 0 && i < n_shards; i++) {
        const cc_run_signature *s = &shards[i];
        cc_manifest_shard line = {s->shard_index, s->shard_count, "", ""};
        char copy[600], copy_sig[600];
        if (s->verified) {
            snprintf(line.manifest_sha256, sizeof line.manifest_sha256, "%s", s->manifest_sha256);
            snprintf(line.signer, sizeof line.signer, "%s", s->fingerprint);
            shard_copy(s, copy, copy_sig, sizeof copy);
            rc = cc_manifest_add_file(&m, dir, copy, msg, len) ||
                 cc_manifest_add_file(&m, dir, copy_sig, msg, len);
        }
        rc = rc || cc_manifest_add_shard(&m, &line, msg, len);
    }
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, CC_MANIFEST_FILE);
    rc = rc || cc_manifest_write(&m, path, msg, len) ||
         sign_manifest(dir, CC_MANIFEST_FILE, key, CC_SIGN_NAMESPACE, out, msg, len);
    cc_manifest_free(&m);
    return rc ? -1 : 0;
}

/* Every DIR/sub/<folder>/evidence.json, in name order, into m. */
static int add_evidence_files(cc_manifest *m, const char *dir, const char *sub, char *msg,
                              size_t len)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    struct dirent **names = NULL;
    int n = scandir(path, &names, NULL, alphasort);
    if (n < 0)
        return errno == ENOENT ? 0 : (snprintf(msg, len, "cannot list %s: %s", path,
                                               strerror(errno)), -1);
    int rc = 0;
    for (int i = 0; i < n; i++) {
        char rel[800];
        snprintf(rel, sizeof rel, "%s/%s/evidence.json", sub, names[i]->d_name);
        if (rc == 0 && names[i]->d_name[0] != '.' && exists(dir, rel))
            rc = cc_manifest_add_file(m, dir, rel, msg, len);
        free(names[i]);
    }
    free(names);
    return rc;
}

int cc_evidence_sign(const char *dir, const char *key, char *msg, size_t len)
{
    static const char *const files[] = {CC_MANIFEST_FILE, CC_MANIFEST_SIG_FILE, "gate.txt",
                                        "Evidence.lean"};
    msg[0] = 0;
    cc_manifest m;
    memset(&m, 0, sizeof m);
    snprintf(m.kind, sizeof m.kind, "evidence");
    snprintf(m.capcheck_version, sizeof m.capcheck_version, "%s", CC_VERSION);
    snprintf(m.git_commit, sizeof m.git_commit, "%s", cc_git_commit());
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof files / sizeof files[0]; i++)
        if (i < 2 || exists(dir, files[i]))
            rc = cc_manifest_add_file(&m, dir, files[i], msg, len);
    rc = rc || add_evidence_files(&m, dir, "evidence", msg, len);
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, CC_EVIDENCE_MANIFEST_FILE);
    cc_run_signature out;
    memset(&out, 0, sizeof out);
    rc = rc || cc_manifest_write(&m, path, msg, len) ||
         sign_manifest(dir, CC_EVIDENCE_MANIFEST_FILE, key, CC_SIGN_EVIDENCE_NAMESPACE, &out, msg,
                       len);
    cc_manifest_free(&m);
    return rc ? -1 : 0;
}

/* ---- verifying ----------------------------------------------------------------------------- */

/* The signature sig (of DIR/manifest_name) checked as t says: by an allowed key (principal set)
 * or, with check_unknown_keys and no allowed signers, by the key it carries. `what` names the
 * manifest in sentences. 0, or -1 with msg. */
static int check_signature(const cc_trust *t, const char *manifest, const char *sig,
                           cc_run_signature *s, char *msg, size_t len)
{
    cc_ssh_tool tool;
    cc_ssh_tool_default(&tool);
    char why[1024], who[400];
    int rc = t->allowed_signers ? cc_ssh_verify(&tool, t->allowed_signers, CC_SIGN_NAMESPACE,
                                                manifest, sig, s->principal,
                                                sizeof s->principal, why, sizeof why)
                                : cc_ssh_check(&tool, CC_SIGN_NAMESPACE, manifest, sig, why,
                                               sizeof why);
    if (rc == CC_SSH_VERIFIED)
        return 0;
    cc_run_signer_name(s, who, sizeof who);
    if (rc == CC_SSH_NOT_ALLOWED)
        snprintf(msg, len, "%s is signed by %s (%s), a key %s does not allow", manifest, who,
                 s->key_type, t->allowed_signers);
    else
        snprintf(msg, len, "%s does not verify against its signature by %s (%s): it changed "
                           "after signing, or the signature is another file's: %s",
                 manifest, who, sig, why);
    return -1;
}

/* Each file m lists, in dir, with the sha256 it lists. 0, or -1 naming the file and signer. */
static int check_files(const cc_manifest *m, const char *dir, const char *who, char *msg,
                       size_t len)
{
    for (size_t i = 0; i < m->n_files; i++) {
        char path[1600], sha[65];
        snprintf(path, sizeof path, "%s/%s", dir, m->files[i].path);
        if (cc_sha256_file(path, sha)) {
            snprintf(msg, len, "%s, which %s signed, cannot be read: %s", path, who,
                     strerror(errno));
            return -1;
        }
        if (strcmp(sha, m->files[i].sha256) != 0) {
            snprintf(msg, len, "%s is not the file %s signed (its sha256 is %.16s..., the "
                               "manifest's %.16s...): it changed after signing, or the manifest "
                               "is another run's",
                     path, who, sha, m->files[i].sha256);
            return -1;
        }
    }
    for (int i = 0; i < READ_BY_THE_GATE; i++)
        if (!cc_manifest_find(m, RUN_FILES[i])) {
            snprintf(msg, len, "%s/%s, signed by %s, does not list %s, which the gate reads: the "
                               "signature does not cover it",
                     dir, CC_MANIFEST_FILE, who, RUN_FILES[i]);
            return -1;
        }
    return 0;
}

/* A merged run's shard lines: each signed shard's copies (listed, so their bytes are checked)
 * hold the manifest digest and the signer the line names, and the signature is by a key t
 * allows. 0, or -1 with msg. */
static int check_shards(const cc_manifest *m, const char *dir, const cc_trust *t,
                        cc_run_signature *s, char *msg, size_t len)
{
    for (size_t i = 0; i < m->n_shards; i++) {
        const cc_manifest_shard *line = &m->shards[i];
        s->shards++;
        if (!line->signer[0])
            continue;
        s->signed_shards++;
        cc_run_signature shard;
        memset(&shard, 0, sizeof shard);
        shard.shard_index = line->index;
        shard.shard_count = line->count;
        char copy[600], copy_sig[600], path[1300], sig[1300], sha[65];
        shard_copy(&shard, copy, copy_sig, sizeof copy);
        snprintf(path, sizeof path, "%s/%s", dir, copy);
        snprintf(sig, sizeof sig, "%s/%s", dir, copy_sig);
        cc_ssh_sig_info info;
        if (!cc_manifest_find(m, copy) || !cc_manifest_find(m, copy_sig) ||
            cc_sha256_file(path, sha) || strcmp(sha, line->manifest_sha256) ||
            cc_ssh_sig_read(sig, &info, msg, len) || strcmp(info.fingerprint, line->signer)) {
            snprintf(msg, len, "%s/%s: shard %d/%d's manifest and signature by %s are not the "
                               "copies the merge listed (%s)",
                     dir, CC_MANIFEST_FILE, line->index, line->count, line->signer, copy);
            return -1;
        }
        snprintf(shard.fingerprint, sizeof shard.fingerprint, "%s", info.fingerprint);
        snprintf(shard.key_type, sizeof shard.key_type, "%s", info.key_type);
        char why[1600];
        if (t->allowed_signers && check_signature(t, path, sig, &shard, why, sizeof why)) {
            snprintf(msg, len, "shard %d/%d of the merged run %s: %s", line->index, line->count,
                     dir, why);
            return -1;
        }
    }
    return 0;
}

/* Refuse an unsigned run when t requires a signature. 0, or -1 with msg. */
static int unsigned_run(const cc_trust *t, const char *dir, char *msg, size_t len)
{
    if (!t->require)
        return 0;
    snprintf(msg, len, "%s is unsigned (no %s beside its report): the policy %s requires a run "
                       "signed by a key %s allows (capcheck run --sign KEY signs one)",
             dir, CC_MANIFEST_SIG_FILE, t->policy_name ? t->policy_name : "",
             t->allowed_signers ? t->allowed_signers : "--allowed-signers FILE");
    return -1;
}

int cc_run_verify(const char *path, const cc_trust *t, cc_run_signature *out, char *msg,
                  size_t len)
{
    memset(out, 0, sizeof *out);
    run_dir(path, out->dir, sizeof out->dir);
    char manifest[1200], sig[1200], who[400];
    snprintf(manifest, sizeof manifest, "%s/%s", out->dir, CC_MANIFEST_FILE);
    snprintf(sig, sizeof sig, "%s/%s", out->dir, CC_MANIFEST_SIG_FILE);
    out->present = access(sig, F_OK) == 0;
    if (!out->present)
        return unsigned_run(t, out->dir, msg, len);
    cc_ssh_sig_info info;
    int readable = cc_ssh_sig_read(sig, &info, msg, len) == 0;
    if (!t->allowed_signers && !t->check_unknown_keys) { /* nothing to check it against */
        snprintf(out->fingerprint, sizeof out->fingerprint, "%s",
                 readable ? info.fingerprint : "a key (the signature does not parse)");
        return 0;
    }
    if (!readable)
        return -1;
    snprintf(out->fingerprint, sizeof out->fingerprint, "%s", info.fingerprint);
    snprintf(out->key_type, sizeof out->key_type, "%s", info.key_type);
    if (strcmp(info.ns, CC_SIGN_NAMESPACE) != 0) {
        snprintf(msg, len, "%s is a signature by %s for namespace '%s', not a run's ('%s'): it "
                           "signs something else than this run's manifest",
                 sig, out->fingerprint, info.ns, CC_SIGN_NAMESPACE);
        return -1;
    }
    if (access(manifest, R_OK)) {
        snprintf(msg, len, "%s is signed by %s, but its manifest %s cannot be read: %s", out->dir,
                 out->fingerprint, manifest, strerror(errno));
        return -1;
    }
    if (check_signature(t, manifest, sig, out, msg, len))
        return -1;
    cc_run_signer_name(out, who, sizeof who);
    size_t n;
    char *text = cc_read_file(manifest, &n);
    cc_manifest m;
    if (!text || cc_manifest_parse(text, manifest, &m, msg, len)) {
        if (!text)
            snprintf(msg, len, "cannot read %s: %s", manifest, strerror(errno));
        free(text);
        return -1;
    }
    cc_sha256_hex(text, n, out->manifest_sha256);
    free(text);
    int rc = 0;
    if (strcmp(m.kind, "run") != 0) {
        snprintf(msg, len, "%s, signed by %s, is the manifest of %s, not of a run", manifest, who,
                 m.kind);
        rc = -1;
    }
    rc = rc || check_files(&m, out->dir, who, msg, len) ||
         check_shards(&m, out->dir, t, out, msg, len);
    if (rc == 0)
        snprintf(out->report_sha256, sizeof out->report_sha256, "%s",
                 cc_manifest_find(&m, RUN_FILES[0])->sha256);
    cc_manifest_free(&m);
    out->verified = rc == 0;
    return rc ? -1 : 0;
}

void cc_run_signature_line(const cc_run_signature *s, const cc_trust *t, char *buf, size_t n)
{
    char who[400];
    cc_run_signer_name(s, who, sizeof who);
    buf[0] = 0;
    if (!s->present) {
        if (t->allowed_signers)
            snprintf(buf, n, "%s is unsigned (no %s): nobody vouched for it (a policy with "
                             "require_signature yes refuses such a run)",
                     s->dir, CC_MANIFEST_SIG_FILE);
        return;
    }
    if (!s->verified) {
        snprintf(buf, n, "%s is signed by %s, not checked: --allowed-signers FILE checks it (the "
                         "evidence names its signer only then)",
                 s->dir, who);
        return;
    }
    char trusted[700];
    if (t->allowed_signers)
        snprintf(trusted, sizeof trusted, "which %s allows", t->allowed_signers);
    else
        snprintf(trusted, sizeof trusted, "checked with the key the signature carries");
    int used = snprintf(buf, n, "%s: signed by %s%sthe %s key %s, %s; manifest sha256:%s, "
                                "every file as signed",
                        s->dir, s->principal, s->principal[0] ? " with " : "", s->key_type,
                        s->fingerprint, trusted, s->manifest_sha256);
    if (s->shards && used > 0 && (size_t)used < n)
        snprintf(buf + used, n - (size_t)used, "; %d shards, %d of them signed by an allowed key%s",
                 s->shards, s->signed_shards,
                 s->signed_shards < s->shards ? ", the rest unsigned (the merge vouched for them)"
                                              : "");
}

/* ---- merging signed shards ----------------------------------------------------------------- */

int cc_merge_check_shards(int n, const char *const *dirs, const cc_trust *t,
                          cc_run_signature *sigs, char *msg, size_t len)
{
    cc_trust check = *t;
    check.check_unknown_keys = 1;
    check.require = 0;
    for (int i = 0; i < n; i++) {
        if (cc_run_verify(dirs[i], &check, &sigs[i], msg, len))
            return -1;
        cc_run r;
        if (cc_run_load(sigs[i].dir, CC_LOAD_PROVENANCE, &r, msg, len))
            return -1;
        sigs[i].shard_index = r.prov.shard.present ? r.prov.shard.index : 0;
        sigs[i].shard_count = r.prov.shard.present ? r.prov.shard.count : 0;
        cc_run_free(&r);
    }
    return 0;
}

/* Copy the file at from to to (atomically). 0, or -1 with msg. */
static int copy_file(const char *from, const char *to, char *msg, size_t len)
{
    size_t n;
    char *text = cc_read_file(from, &n);
    cc_write_atomic w;
    FILE *f = text ? cc_write_atomic_open(&w, to) : NULL;
    int failed = !f || fwrite(text, 1, n, f) != n;
    if (!f || cc_write_atomic_close(&w, failed, 0)) {
        snprintf(msg, len, "cannot copy %s to %s: %s", from, to, strerror(errno ? errno : EIO));
        free(text);
        return -1;
    }
    free(text);
    return 0;
}

/* Empty out_dir/shards/ of an earlier merge's copies (and the folder, when that empties it). */
static void remove_shard_copies(const char *out_dir)
{
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/%s", out_dir, CC_MANIFEST_SHARDS_DIR);
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (strstr(e->d_name, "-of-") && ((l > 9 && !strcmp(e->d_name + l - 9, ".manifest")) ||
                                          (l > 13 && !strcmp(e->d_name + l - 13, ".manifest.sig")))) {
            char path[1600];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            remove(path);
        }
    }
    closedir(d);
    rmdir(dir);
}

int cc_merge_sign(const char *out_dir, int n, const cc_run_signature *sigs, const char *key,
                  cc_run_signature *out, char *msg, size_t len)
{
    memset(out, 0, sizeof *out);
    remove_shard_copies(out_dir);
    for (int i = 0; i < n; i++) {
        if (!sigs[i].verified)
            continue;
        char copy[600], copy_sig[600], from[1300], to[1300], dir[1200];
        shard_copy(&sigs[i], copy, copy_sig, sizeof copy);
        snprintf(dir, sizeof dir, "%s/%s", out_dir, CC_MANIFEST_SHARDS_DIR);
        if (cc_make_dir(dir)) {
            snprintf(msg, len, "cannot create %s: %s", dir, strerror(errno));
            return -1;
        }
        snprintf(from, sizeof from, "%s/%s", sigs[i].dir, CC_MANIFEST_FILE);
        snprintf(to, sizeof to, "%s/%s", out_dir, copy);
        if (copy_file(from, to, msg, len))
            return -1;
        snprintf(from, sizeof from, "%s/%s", sigs[i].dir, CC_MANIFEST_SIG_FILE);
        snprintf(to, sizeof to, "%s/%s", out_dir, copy_sig);
        if (copy_file(from, to, msg, len))
            return -1;
    }
    if (!key)
        return 0;
    /* the shard lines in shard order */
    cc_run_signature *order = calloc((size_t)(n > 0 ? n : 1), sizeof *order);
    if (!order) {
        snprintf(msg, len, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        int k = sigs[i].shard_index - 1;
        order[k >= 0 && k < n ? k : i] = sigs[i];
    }
    int rc = cc_run_sign(out_dir, key, order, (size_t)n, out, msg, len);
    free(order);
    return rc;
}
