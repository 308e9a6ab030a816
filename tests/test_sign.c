/* Signed runs through the binary, tried as an attacker would (harness/evidence/signature.h).
 * Keys are made by ssh-keygen in a mkdtemp folder: ci (allowed), runner (allowed), stranger (not
 * allowed) and locked (a passphrase, no agent).
 *
 * What a seal alone lets through, first: a run whose result is edited and re-sealed (results
 * digest and report.json.sha256 recomputed, as the source says how) is taken by the gate without
 * --allowed-signers. Then each forgery below is refused with exit 2 and one sentence naming the
 * file and the signer, by the gate with --allowed-signers: that edit and re-seal; another run's
 * report.json swapped in; a results.jsonl truncated after signing; another run's manifest and
 * signature replayed; another run's signature alone; a manifest edited to list a new digest; a
 * signature for another namespace; a key the file does not allow; a signed manifest that does not
 * list results.jsonl; a shard dropped from a signed merge (its line, or its copy); a shard signer
 * the file does not allow. An unsigned run gates as before (one line more with
 * --allowed-signers), and is refused under require_signature yes. A signed certify run verifies
 * by hand (ssh-keygen -Y verify, sha256sum -c) and through the gate, and its evidence names the
 * signer ssh-keygen -l names. Signing that cannot happen (a key with a passphrase and no agent, no
 * key, an ssh-keygen that hangs) is one sentence, before the run, never a prompt or a hang. */
#include "cli_util.h"

#include <sys/stat.h>

#include "core/sha256.h"
#include "core/sshsig.h"
#include "harness/report/provenance.h"
#include "harness/report/results_read.h"

static char tmp[256], out[1 << 16], cmd[8192];
static char fp_ci[64], fp_runner[64]; /* as ssh-keygen -l prints them */

/* `sh -c line` in tmp; its exit code, stdout and stderr in out. */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char line[6000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "cd '%s' && (%s) 2>&1", tmp, line);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t got = fread(out, 1, sizeof out - 1, p);
    out[got] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* capcheck ARGS in tmp; its exit code, output in out. */
static int cap(const char *args)
{
    char prefix[400];
    snprintf(prefix, sizeof prefix, "cd '%s' && ", tmp);
    return cc_t_run(prefix, args, out, sizeof out);
}

/* out is one line: prefix, then every word of `words` ('|' between them). */
static void one_sentence(const char *prefix, const char *words)
{
    if (strncmp(out, prefix, strlen(prefix)) != 0 || strchr(out, '\n') != out + strlen(out) - 1)
        fail_msg("not one sentence starting '%s':\n%s", prefix, out);
    char w[512];
    snprintf(w, sizeof w, "%s", words);
    for (char *s = strtok(w, "|"); s; s = strtok(NULL, "|"))
        if (!strstr(out, s))
            fail_msg("'%s' not in: %s", s, out);
}

/* capcheck gate DIR --allowed-signers allowed under the any-libtorch policy: refused, one sentence
 * naming each of words. */
static void refused(const char *dir, const char *words)
{
    char args[600];
    snprintf(args, sizeof args, "gate %s --policy any.conf --allowed-signers allowed", dir);
    int rc = cap(args);
    if (rc != 2)
        fail_msg("gate %s: exit %d, want 2:\n%s", dir, rc, out);
    one_sentence("capcheck gate: refused: ", words);
}

static void keygen(const char *name, const char *comment, const char *passphrase)
{
    if (sh("ssh-keygen -q -t ed25519 -N '%s' -C %s -f %s < /dev/null", passphrase, comment,
           name))
        fail_msg("ssh-keygen cannot make a key (scripts/setup installs openssh-client): %s", out);
}

static void fingerprint(const char *name, char fp[64])
{
    assert_int_equal(sh("ssh-keygen -l -f %s.pub | cut -d' ' -f2", name), 0);
    snprintf(fp, 64, "%.*s", (int)strcspn(out, "\n"), out);
    assert_int_equal(strncmp(fp, "SHA256:", 7), 0);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/capcheck_sign_XXXXXX");
    if (!mkdtemp(tmp))
        return -1;
    keygen("ci", "ci@example", "");
    keygen("runner", "runner@example", "");
    keygen("stranger", "stranger@example", "");
    keygen("locked", "locked@example", "secret");
    fingerprint("ci", fp_ci);
    fingerprint("runner", fp_runner);
    /* any.conf: any libtorch (the reference states none), and little evidence checks a capsule,
     * so that evidence names the signer; required.conf: the same, signatures required */
    if (sh("echo \"ci@example $(cut -d' ' -f1,2 ci.pub)\" > allowed && "
           "echo \"runner@example $(cut -d' ' -f1,2 runner.pub)\" >> allowed && "
           "head -1 allowed > allowed_ci && "
           "printf 'format capcheck-policy/1\\nlibtorch_version any\\nrequire_signature no\\n"
           "min_passing 1\\nmin_vjp_passing 0\\nmin_distinct_shapes 1\\nshape_classes none\\n"
           "layout_classes none\\nedge_classes none\\n' > any.conf && "
           "sed 's/^require_signature no/require_signature yes/' any.conf > required.conf && "
           "grep -q '^require_signature yes' required.conf && "
           "printf 'add count=12 dtype=f32,f64 size=small\\nrelu count=12 dtype=f32 "
           "size=small\\n' > a.cases && printf 'mul count=10 dtype=f32 size=small\\n' > "
           "b.cases"))
        return -1;
    /* A and B: two signed runs of the reference provider; U: an unsigned one */
    const char *runs[] = {"run a.cases --provider reference --out A --sign ci -q",
                          "run b.cases --provider reference --out B --sign ci -q",
                          "run a.cases --provider reference --out U -q"};
    for (int i = 0; i < 3; i++)
        if (cap(runs[i]) != 0) {
            fprintf(stderr, "%s: %s", runs[i], out);
            return -1;
        }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return cc_t_remove_dir(tmp);
}

/* A fresh copy of the run `from` as `name`. */
static void copy_of(const char *from, const char *name)
{
    assert_int_equal(sh("rm -rf %s && cp -r %s %s", name, from, name), 0);
}

/* A copy of `from` as `name`, forged by the shell line `edit` (run in tmp), refused by the gate
 * with one sentence naming each of words. */
static void forged(const char *from, const char *name, const char *edit, const char *words)
{
    copy_of(from, name);
    if (sh("%s", edit) != 0)
        fail_msg("could not forge %s (%s): %s", name, edit, out);
    refused(name, words);
}

static void test_a_signed_run_verifies(void **state)
{
    (void)state;
    char *m = cc_t_slurp_in(tmp, "A", "manifest");
    expect_in(m, "capcheck-manifest/1\nkind run\ncapcheck " CC_VERSION " commit ");
    expect_in(m, "  report.json\n");
    expect_in(m, "  results.jsonl\n");
    expect_in(m, "  report.json.sha256\n");
    expect_in(m, "  run.json\n");
    free(m);
    /* by hand, as docs/evidence.md shows it */
    assert_int_equal(sh("ssh-keygen -Y verify -f allowed -I ci@example -n capcheck-run@capcheck "
                        "-s A/manifest.sig < A/manifest"),
                     0);
    expect_in(out, fp_ci);
    assert_int_equal(sh("cd A && grep -E '^[0-9a-f]{64}  ' manifest | sha256sum -c --quiet"), 0);
    /* and through the gate, whose evidence names the signer */
    int rc = cap("gate A --policy any.conf --allowed-signers allowed");
    assert_true(rc == 0 || rc == 1);
    char want[400];
    snprintf(want, sizeof want, "capcheck gate: A: signed by ci@example with the ssh-ed25519 key "
                                "%s, which allowed allows; manifest sha256:", fp_ci);
    expect_in(out, want);
    /* without --allowed-signers nothing vouches for it: the gate says so, the evidence names the
     * report as before */
    rc = cap("gate A --policy any.conf");
    assert_true(rc == 0 || rc == 1);
    snprintf(want, sizeof want, "capcheck gate: A is signed by %s, not checked: "
                                "--allowed-signers FILE checks it", fp_ci);
    expect_in(out, want);
    assert_int_equal(cap("evidence A --policy any.conf --out evA --allowed-signers allowed"), 0);
    assert_int_equal(cap("evidence A --policy any.conf --out evA_plain"), 0);
    char manifest_sha[65], path[600], suite[512];
    snprintf(path, sizeof path, "%s/A/manifest", tmp);
    assert_int_equal(cc_sha256_file(path, manifest_sha), 0);
    char *e = cc_t_slurp_in(tmp, "evA", "capcheck.oracle.add/evidence.json");
    snprintf(suite, sizeof suite, "\"testSuite\": {\"name\": \"capcheck run signed by %s manifest "
                                  "sha256:%s\"", fp_ci, manifest_sha);
    expect_in(e, suite);
    snprintf(suite, sizeof suite, "\"signature\": {\"signer\": \"%s\", \"manifest_sha256\": \"%s\", "
                                  "\"namespace\": \"capcheck-run@capcheck\"}", fp_ci, manifest_sha);
    expect_in(e, suite);
    free(e);
    e = cc_t_slurp_in(tmp, "evA_plain", "capcheck.oracle.add/evidence.json");
    expect_in(e, "\"testSuite\": {\"name\": \"capcheck report sha256:");
    assert_null(strstr(e, "signed by"));
    free(e);
    assert_int_equal(cap("validate evA/capcheck.oracle.add/evidence.json --schema "
                         CAPCHECK_SOURCE_DIR "/reports/evidence.schema.json"),
                     0);
}

/* results.jsonl with the first passing case made a failure, and the report's results digest and
 * seal recomputed: what anyone can do with the recipe in the source. */
static void edit_and_reseal(const char *dir)
{
    char path[600], report[600];
    snprintf(path, sizeof path, "%s/%s/results.jsonl", tmp, dir);
    snprintf(report, sizeof report, "%s/%s/report.json", tmp, dir);
    cc_t_edit(path, "\"status\":\"pass\"", "\"status\":\"fail\"");
    char *text = cc_t_slurp(path, NULL);
    cc_result *r = calloc(64, sizeof *r);
    size_t n = 0;
    assert_non_null(r);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        int64_t index; /* the journal's order is the workers': each record where its index says */
        char msg[256];
        cc_result one;
        assert_int_equal(cc_result_parse_line(line, strlen(line), &one, &index, msg, sizeof msg), 0);
        assert_true(index >= 0 && index < 64);
        r[index] = one;
        n++;
    }
    free(text);
    cc_sha256_ctx d;
    cc_sha256_init(&d);
    for (size_t i = 0; i < n; i++)
        cc_results_digest_add(&d, &r[i]);
    free(r);
    char hex[65], digest[128], *rep = cc_t_slurp(report, NULL);
    cc_sha256_final_hex(&d, hex);
    snprintf(digest, sizeof digest, "\"results_digest\": \"sha256:%s\"", hex);
    char *at = strstr(rep, "\"results_digest\": \"sha256:");
    assert_non_null(at);
    memcpy(at, digest, strlen(digest));
    cc_t_write(report, rep);
    free(rep);
    assert_int_equal(sh("cd %s && sha256sum report.json > report.json.sha256", dir), 0);
}

static void test_a_seal_is_no_signature(void **state)
{
    (void)state;
    copy_of("A", "resealed");
    edit_and_reseal("resealed");
    /* the seal and the digest match again: the gate alone takes the forgery */
    int rc = cap("gate resealed --policy any.conf");
    if (rc != 0 && rc != 1)
        fail_msg("the re-sealed run is refused without a signature check (exit %d):\n%s", rc, out);
    expect_in(out, "results digest matches");
    /* the signature does not */
    refused("resealed", "resealed/report.json is not the file ci@example (" "SHA256:|changed "
                        "after signing");
    /* another run's report.json, with its seal */
    forged("A", "swapped", "cp B/report.json B/report.json.sha256 swapped/",
           "swapped/report.json is not the file ci@example|the manifest is another run's");
    forged("A", "truncated", "head -c 500 A/results.jsonl > truncated/results.jsonl",
           "truncated/results.jsonl is not the file ci@example");
    forged("A", "gone", "rm gone/run.json", "gone/run.json, which ci@example");
    /* the same refusal in the commands that read runs back */
    assert_int_equal(cap("evidence truncated --policy any.conf --out x --allowed-signers allowed"), 2);
    one_sentence("capcheck evidence: refused: ", "truncated/results.jsonl");
    assert_int_equal(cap("emit-lean truncated --policy any.conf --allowed-signers allowed"), 2);
    one_sentence("capcheck emit-lean: refused: ", "truncated/results.jsonl");
    assert_int_equal(cap("diff A truncated --allowed-signers allowed"), 2);
    one_sentence("capcheck diff: refused: ", "truncated/results.jsonl");
    assert_int_equal(cap("history A truncated --out h --allowed-signers allowed"), 2);
    one_sentence("capcheck history: refused: ", "truncated/results.jsonl");
}

static void test_a_signature_stands_for_one_manifest(void **state)
{
    (void)state;
    /* B's manifest and signature: valid, of another run; B's signature over A's manifest */
    forged("A", "replayed", "cp B/manifest B/manifest.sig replayed/",
           "replayed/report.json is not the file ci@example|another run's");
    forged("A", "sig_only", "cp B/manifest.sig sig_only/",
           "sig_only/manifest does not verify against its signature by ci@example|changed after "
           "signing");
    copy_of("A", "relisted"); /* results edited, and the manifest made to list their digest */
    edit_and_reseal("relisted");
    assert_int_equal(sh("cd relisted && sed -i \"s/^[0-9a-f]*  results.jsonl$/$(sha256sum "
                        "results.jsonl | cut -d' ' -f1)  results.jsonl/\" manifest && "
                        "grep -q \"^$(sha256sum results.jsonl | cut -d' ' -f1)  results.jsonl\" "
                        "manifest"),
                     0);
    refused("relisted", "relisted/manifest does not verify|ci@example");
    /* a signature by an allowed key for another namespace: git's, or certify's own */
    forged("A", "git_ns",
           "rm git_ns/manifest.sig && ssh-keygen -q -Y sign -f ci -n git git_ns/manifest < /dev/null",
           "git_ns/manifest.sig|namespace 'git'|capcheck-run@capcheck");
    forged("A", "evidence_ns",
           "rm evidence_ns/manifest.sig && ssh-keygen -q -Y sign -f ci -n "
           "capcheck-evidence@capcheck evidence_ns/manifest < /dev/null",
           "namespace 'capcheck-evidence@capcheck'");
    /* signed with a key the file does not allow */
    assert_int_equal(cap("run a.cases --provider reference --out S --sign stranger -q"), 0);
    refused("S", "S/manifest is signed by SHA256:|a key allowed does not allow");
    /* a manifest signed by an allowed key that leaves out what the gate reads */
    forged("A", "partial",
           "cd partial && grep -v '  results.jsonl$' manifest > m && mv m manifest && rm "
           "manifest.sig && ssh-keygen -q -Y sign -f ../ci -n capcheck-run@capcheck manifest < "
           "/dev/null",
           "does not list results.jsonl, which the gate reads");
}

static void test_an_unsigned_run_gates_as_before(void **state)
{
    (void)state;
    static char plain[1 << 16];
    int rc = cap("gate U --policy any.conf");
    assert_true(rc == 0 || rc == 1);
    snprintf(plain, sizeof plain, "%s", out);
    assert_null(strstr(plain, "signed"));
    /* with --allowed-signers: the same verdicts, and one line saying nobody vouched for it */
    assert_int_equal(cap("gate U --policy any.conf --allowed-signers allowed"), rc);
    const char *line = "capcheck gate: U is unsigned (no manifest.sig): nobody vouched for it";
    char *at = strstr(out, line);
    assert_non_null(at);
    size_t n = strcspn(at, "\n") + 1;
    memmove(at, at + n, strlen(at + n) + 1);
    assert_string_equal(out, plain);
    /* a policy that requires signatures refuses it, and wants the keys it trusts */
    assert_int_equal(cap("gate U --policy required.conf --allowed-signers allowed"), 2);
    one_sentence("capcheck gate: refused: ", "U is unsigned|required.conf requires a run signed");
    assert_int_equal(cap("gate A --policy required.conf"), 2);
    one_sentence("capcheck gate: ", "requires signed runs (require_signature yes): give "
                                    "--allowed-signers FILE");
    rc = cap("gate A --policy required.conf --allowed-signers allowed");
    assert_true(rc == 0 || rc == 1);
    /* a bad value is the policy's line */
    assert_int_equal(sh("sed 's/^require_signature no/require_signature maybe/' any.conf > bad.conf"),
                     0);
    assert_int_equal(cap("gate A --policy bad.conf"), 2);
    one_sentence("capcheck gate: bad.conf:", "require_signature is yes or no");
}

static void test_signed_shards_stay_verifiable_after_merge(void **state)
{
    (void)state;
    assert_int_equal(cap("run a.cases --provider reference --shard 1/2 --out s1 --sign ci -q"), 0);
    assert_int_equal(cap("run a.cases --provider reference --shard 2/2 --out s2 --sign runner -q"),
                     0);
    /* merged without --sign: said, and judged unsigned */
    assert_int_equal(cap("merge s1 s2 --out plain_merge"), 0);
    expect_in(out, "capcheck merge: plain_merge is unsigned: 2 of its 2 shards were signed");
    int rc = cap("gate plain_merge --policy any.conf --allowed-signers allowed");
    assert_true(rc == 0 || rc == 1);
    expect_in(out, "plain_merge is unsigned");
    /* merged and signed: the manifest names each shard's signer and manifest */
    assert_int_equal(cap("merge s1 s2 --out M --sign ci"), 0);
    expect_in(out, "capcheck merge: M/manifest signed by ");
    char *m = cc_t_slurp_in(tmp, "M", "manifest"), line[300], sha[65], path[600];
    snprintf(path, sizeof path, "%s/s2/manifest", tmp);
    assert_int_equal(cc_sha256_file(path, sha), 0);
    snprintf(line, sizeof line, "shard 2/2 manifest sha256:%s signer %s\n", sha, fp_runner);
    expect_in(m, line);
    snprintf(line, sizeof line, "shard 1/2 manifest sha256:");
    expect_in(m, line);
    expect_in(m, "  shards/2-of-2.manifest.sig\n");
    free(m);
    rc = cap("gate M --policy any.conf --allowed-signers allowed");
    assert_true(rc == 0 || rc == 1);
    expect_in(out, "every file as signed; 2 shards, 2 of them signed by an allowed key");
    /* the shard copies verify by hand */
    assert_int_equal(sh("ssh-keygen -Y verify -f allowed -I runner@example -n "
                        "capcheck-run@capcheck -s M/shards/2-of-2.manifest.sig < "
                        "M/shards/2-of-2.manifest"),
                     0);
    /* a shard signer the file does not allow */
    assert_int_equal(cap("gate M --policy any.conf --allowed-signers allowed_ci"), 2);
    one_sentence("capcheck gate: refused: ", "shard 2/2 of the merged run M|a key allowed_ci does "
                                             "not allow");
    /* a shard dropped: its line out of the manifest, or its copy out of the folder */
    forged("M", "dropped", "grep -v '^shard 2/2' M/manifest > dropped/manifest",
           "dropped/manifest does not verify|ci@example");
    forged("M", "no_copy", "rm no_copy/shards/2-of-2.manifest",
           "no_copy/shards/2-of-2.manifest, which ci@example");
    /* merge checks what it vouches for: a shard changed after signing, a key not allowed */
    copy_of("s2", "s2_edited");
    edit_and_reseal("s2_edited");
    assert_int_equal(cap("merge s1 s2_edited --out M2 --sign ci"), 2);
    one_sentence("capcheck merge: refused: ", "s2_edited/report.json is not the file");
    assert_int_equal(cap("merge s1 s2 --out M3 --allowed-signers allowed_ci"), 2);
    one_sentence("capcheck merge: refused: ", "s2/manifest is signed by|allowed_ci does not allow");
    /* a merge over a signed folder leaves no signature of the old run behind */
    assert_int_equal(cap("merge s1 s2 --out M --force"), 0);
    struct stat st;
    snprintf(path, sizeof path, "%s/M/manifest.sig", tmp);
    assert_int_not_equal(stat(path, &st), 0);
}

static void test_certify_signs_what_it_vouches_for(void **state)
{
    (void)state;
    char args[600];
#if CAPCHECK_HAVE_ATEN
    snprintf(args, sizeof args, "certify --op softmax --out C --sign ci");
#else
    snprintf(args, sizeof args, "certify --op softmax --out C --sign ci --provider reference "
                                "--policy any.conf");
#endif
    int rc = cap(args);
    assert_true(rc == 0 || rc == 1);
    expect_in(out, "capcheck certify: signed by      ");
    expect_in(out, fp_ci);
    /* by hand: the run, and what certify wrote from it */
    assert_int_equal(sh("ssh-keygen -Y verify -f allowed -I ci@example -n capcheck-run@capcheck "
                        "-s C/manifest.sig < C/manifest"),
                     0);
    assert_int_equal(sh("ssh-keygen -Y verify -f allowed -I ci@example -n "
                        "capcheck-evidence@capcheck -s C/evidence.manifest.sig < "
                        "C/evidence.manifest"),
                     0);
    assert_int_equal(sh("cd C && cat manifest evidence.manifest | grep -E '^[0-9a-f]{64}  ' | "
                        "sha256sum -c --quiet && grep -q '  Evidence.lean$' evidence.manifest"
#if !CAPCHECK_HAVE_ATEN
                        " || true"
#endif
                        " && grep -q '  gate.txt$' evidence.manifest"),
                     0);
    /* the run's signature is no signature of certify's files, nor the other way round */
    assert_int_not_equal(sh("ssh-keygen -Y verify -f allowed -I ci@example -n "
                            "capcheck-run@capcheck -s C/evidence.manifest.sig < "
                            "C/evidence.manifest"),
                         0);
    /* through the gate; the evidence names the signer ssh-keygen names */
#if CAPCHECK_HAVE_ATEN
    rc = cap("gate C --allowed-signers allowed");
#else
    rc = cap("gate C --policy any.conf --allowed-signers allowed");
#endif
    assert_true(rc == 0 || rc == 1);
    expect_in(out, "capcheck gate: C: signed by ci@example with the ssh-ed25519 key ");
    char path[600], sha[65], want[300];
    snprintf(path, sizeof path, "%s/C/manifest", tmp);
    assert_int_equal(cc_sha256_file(path, sha), 0);
    snprintf(want, sizeof want, "capcheck run signed by %s manifest sha256:%s", fp_ci, sha);
    char *gate = cc_t_slurp_in(tmp, "C", "gate.txt");
    expect_in(gate, "checked with the key the signature carries");
    free(gate);
#if CAPCHECK_HAVE_ATEN
    char *e = cc_t_slurp_in(tmp, "C", "evidence/capcheck.aten_cpu.softmax/evidence.json");
    expect_in(e, want);
    free(e);
    /* the Lean module's testSuite, its string gaps closed */
    char *lean = cc_t_slurp_in(tmp, "C", "Evidence.lean"), *joined = malloc(strlen(lean) + 1);
    char *o = joined;
    for (const char *s = lean; *s; s++) {
        if (s[0] == '\\' && s[1] == '\n') {
            s++;
            while (s[1] == ' ')
                s++;
            continue;
        }
        *o++ = *s;
    }
    *o = 0;
    char suite[400];
    snprintf(suite, sizeof suite, "evidence := .testSuite \"%s\"", want);
    assert_int_equal(cc_t_count(joined, suite), 4);
    assert_int_equal(cc_t_count(joined, ".testSuite \"capcheck report sha256:"), 0);
    free(lean);
    free(joined);
#else
    char *e = cc_t_slurp_in(tmp, "C", "evidence/capcheck.oracle.softmax/evidence.json");
    expect_in(e, want);
    free(e); /* the oracle's capsules are none of TorchLean's: no module to name the signer */
#endif
    /* a run certify signed, then changed, is refused like any other */
    assert_int_equal(sh("printf '\\n' >> C/run.json"), 0);
#if CAPCHECK_HAVE_ATEN
    assert_int_equal(cap("gate C --allowed-signers allowed"), 2);
#else
    assert_int_equal(cap("gate C --policy any.conf --allowed-signers allowed"), 2);
#endif
    one_sentence("capcheck gate: refused: ", "C/run.json is not the file ci@example");
}

static void test_signing_fails_in_one_sentence_before_the_run(void **state)
{
    (void)state;
    /* a key with a passphrase and no agent: refused at once, never a prompt */
    assert_int_equal(sh("env -u SSH_AUTH_SOCK %s run a.cases --provider reference --out L "
                        "--sign locked < /dev/null",
                        CAPCHECK_BIN),
                     2);
    one_sentence("capcheck: --sign locked: ", "passphrase|ssh-agent");
    struct stat st;
    char path[600];
    snprintf(path, sizeof path, "%s/L", tmp);
    assert_int_not_equal(stat(path, &st), 0); /* nothing ran */
    assert_int_equal(cap("run a.cases --provider reference --out L --sign no-such-key"), 2);
    one_sentence("capcheck: --sign no-such-key: ", "no-such-key cannot be read");
    assert_int_equal(sh("CAPCHECK_SSH_KEYGEN=/no/ssh-keygen %s run a.cases --provider reference "
                        "--out L --sign ci",
                        CAPCHECK_BIN),
                     2);
    one_sentence("capcheck: --sign ci: ", "cannot run /no/ssh-keygen");
    /* signing a run twice would replace its signer */
    assert_int_equal(cap("sign A --key runner"), 2);
    one_sentence("capcheck sign: ", "A is signed already");
    assert_int_equal(cap("sign U --key runner"), 0);
    assert_int_equal(sh("ssh-keygen -Y verify -f allowed -I runner@example -n "
                        "capcheck-run@capcheck -s U/manifest.sig < U/manifest"),
                     0);
    /* a run started over drops the old run's signature */
    assert_int_equal(cap("run a.cases --provider reference --out U --force -q"), 0);
    snprintf(path, sizeof path, "%s/U/manifest.sig", tmp);
    assert_int_not_equal(stat(path, &st), 0);
    /* an ssh-keygen that hangs is stopped at the limit */
    char hang[600], file[600], msg[512];
    snprintf(hang, sizeof hang, "%s/hang.sh", tmp);
    cc_t_write(hang, "#!/bin/sh\nsleep 30\n");
    assert_int_equal(chmod(hang, 0755), 0);
    snprintf(file, sizeof file, "%s/a.cases", tmp);
    cc_ssh_tool t = {hang, 1.0};
    time_t t0 = time(NULL);
    assert_int_equal(cc_ssh_sign(&t, file, "x@capcheck", file, msg, sizeof msg), -1);
    assert_true(time(NULL) - t0 < 20);
    expect_in(msg, "did not finish within 1 s and was stopped");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_signed_run_verifies),
        cmocka_unit_test(test_a_seal_is_no_signature),
        cmocka_unit_test(test_a_signature_stands_for_one_manifest),
        cmocka_unit_test(test_an_unsigned_run_gates_as_before),
        cmocka_unit_test(test_signed_shards_stay_verifiable_after_merge),
        cmocka_unit_test(test_certify_signs_what_it_vouches_for),
        cmocka_unit_test(test_signing_fails_in_one_sentence_before_the_run),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
