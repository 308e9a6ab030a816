#include "harness/commands.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/report/capsules.h"
#include "harness/evidence/diff.h"
#include "harness/evidence/gate.h"
#include "harness/report/jschema.h"
#include "harness/evidence/merge.h"
#include "harness/evidence/history.h"
#include "harness/evidence/lean_out.h"
#include "harness/evidence/report_html.h"
#include "harness/evidence/signature.h"

static const char *const COMMANDS[] = {"gate",   "evidence", "emit-lean", "diff", "merge",
                                       "report", "history",  "validate",  "sign", NULL};

int cc_is_evidence_command(const char *name)
{
    for (int i = 0; COMMANDS[i]; i++)
        if (strcmp(name, COMMANDS[i]) == 0)
            return 1;
    return 0;
}

typedef struct {
    /* NULL: the built-in ones (torchlean: the newest providers/torchlean/<commit>.tsv) */
    const char *policy, *catalog, *out, *evidence, *schema, *torchlean, *package;
    const char *allowed_signers; /* --allowed-signers FILE (harness/evidence/signature.h) */
    const char *sign;            /* merge --sign KEY, sign --key KEY */
    double drift;
    int fail_on_drift, all, force, in_torchlean;
    int seen_drift;
    const char *pos[256];
    int n_pos;
} opts;

static int parse(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->drift = CC_DIFF_DEFAULT_DRIFT;
    const char *cmd = argv[1];
    int gates = !strcmp(cmd, "gate") || !strcmp(cmd, "evidence") || !strcmp(cmd, "emit-lean");
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = NULL;
        int *flag = NULL, applies = 1;
        if (strcmp(a, "--policy") == 0)
            slot = &o->policy, applies = gates || !strcmp(cmd, "merge") || !strcmp(cmd, "report");
        else if (strcmp(a, "--catalog") == 0)
            slot = &o->catalog, applies = gates || !strcmp(cmd, "diff");
        else if (strcmp(a, "--out") == 0)
            slot = &o->out, applies = !strcmp(cmd, "evidence") || !strcmp(cmd, "merge") ||
                                      !strcmp(cmd, "history");
        else if (strcmp(a, "--evidence") == 0)
            slot = &o->evidence, applies = !strcmp(cmd, "gate");
        else if (strcmp(a, "--allowed-signers") == 0)
            slot = &o->allowed_signers, applies = gates || !strcmp(cmd, "diff") ||
                                                  !strcmp(cmd, "history") || !strcmp(cmd, "merge");
        else if (strcmp(a, "--sign") == 0 || strcmp(a, "--key") == 0)
            slot = &o->sign, applies = !strcmp(cmd, a[2] == 's' ? "merge" : "sign");
        else if (strcmp(a, "--schema") == 0)
            slot = &o->schema, applies = !strcmp(cmd, "validate");
        else if (strcmp(a, "--torchlean") == 0)
            slot = &o->torchlean, applies = !strcmp(cmd, "emit-lean");
        else if (strcmp(a, "--package") == 0)
            slot = &o->package, applies = !strcmp(cmd, "emit-lean");
        else if (strcmp(a, "--in-torchlean") == 0)
            flag = &o->in_torchlean, applies = !strcmp(cmd, "emit-lean");
        else if (strcmp(a, "--fail-on-drift") == 0)
            flag = &o->fail_on_drift, applies = !strcmp(cmd, "diff");
        else if (strcmp(a, "--all") == 0)
            flag = &o->all, applies = !strcmp(cmd, "gate");
        else if (strcmp(a, "--force") == 0)
            flag = &o->force, applies = !strcmp(cmd, "merge");
        else if (strcmp(a, "--drift") == 0) {
            int drifts = !strcmp(cmd, "diff") || !strcmp(cmd, "history");
            if (!drifts || o->seen_drift++) {
                fprintf(stderr, "capcheck %s: --drift %s\n", cmd,
                        !drifts ? "applies to diff and history only" : "is given twice");
                return -1;
            }
            char *end = NULL;
            o->drift = i + 1 < argc ? strtod(argv[++i], &end) : 0;
            if (!(o->drift > 1 && o->drift < 1e300) || !end || *end) {
                fprintf(stderr, "capcheck: --drift wants a factor above 1 (default 4)\n");
                return -1;
            }
            continue;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "capcheck %s: unknown option %s (capcheck help %s lists them)\n",
                    cmd, a, cmd);
            return -1;
        } else {
            if (o->n_pos == 256) {
                fprintf(stderr, "capcheck %s: at most 256 reports\n", argv[1]);
                return -1;
            }
            o->pos[o->n_pos++] = a;
            continue;
        }
        if (!applies) {
            fprintf(stderr, "capcheck %s: %s does not apply to %s (capcheck help %s lists its "
                            "options)\n",
                    cmd, a, cmd, cmd);
            return -1;
        }
        if (flag ? *flag : *slot != NULL) {
            fprintf(stderr, "capcheck %s: %s is given twice\n", cmd, a);
            return -1;
        }
        if (flag) {
            *flag = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "capcheck %s: %s needs a value\n", cmd, a);
            return -1;
        }
        *slot = argv[++i];
    }
    return 0;
}

/* emit-lean after the gate: the module on stdout, or the Lake package; exit 1 with one
 * sentence when it would hold no KernelCapsule. */
static int emit_lean(const cc_gate *g, const cc_policy *pol, const opts *o)
{
    char msg[2048], path[4096];
    if (o->package && o->in_torchlean) {
        fprintf(stderr, "capcheck emit-lean: --package writes a package of its own, --in-torchlean "
                        "a module for TorchLean's tree: give one\n");
        return 2;
    }
    cc_torchlean tl;
    if (cc_torchlean_load(o->torchlean, &tl, msg, sizeof msg)) {
        fprintf(stderr, "capcheck emit-lean: --torchlean: %s\n", msg);
        return 2;
    }
    int rc = 0;
    if (cc_lean_capsule_count(g, pol, &tl, msg, sizeof msg) == 0) {
        fprintf(stderr, "capcheck emit-lean: nothing to emit: %s\n", msg);
        rc = 1;
    } else if (o->package) {
        if (cc_lean_write_package(g, pol, &tl, o->package, path, sizeof path, msg, sizeof msg)) {
            fprintf(stderr, "capcheck emit-lean: %s\n", msg);
            rc = 2;
        } else
            printf("capcheck emit-lean: wrote a Lake package in %s: lakefile.lean (TorchLean "
                   "%.12s), %s and README.md; run `lake build` there (README.md says how)\n",
                   o->package, tl.commit, path);
    } else if (cc_lean_write_module(g, pol, &tl, o->in_torchlean, stdout) || fflush(stdout)) {
        fprintf(stderr, "capcheck emit-lean: cannot write the module\n");
        rc = 2;
    }
    cc_torchlean_free(&tl);
    return rc;
}

/* The signatures of the runs a command reads (harness/evidence/signature.h), sigs[i] for
 * o->pos[i], each verified as --allowed-signers and the policy's require_signature (pol NULL:
 * none) say; a line for each that has something to say in note. 0, or -1 after one sentence
 * (exit 2). */
static int check_signatures(const char *cmd, const opts *o, const cc_policy *pol,
                            cc_run_signature *sigs, char *note, size_t n)
{
    cc_trust t = {o->allowed_signers, pol && pol->require_signature, pol ? pol->name : NULL, 0};
    char msg[2048], line[1200];
    note[0] = 0;
    if (t.require && !t.allowed_signers) {
        fprintf(stderr, "capcheck %s: the policy %s requires signed runs (require_signature "
                        "yes): give --allowed-signers FILE, the keys it trusts\n",
                cmd, pol->name);
        return -1;
    }
    for (int i = 0; i < o->n_pos; i++) {
        if (cc_run_verify(o->pos[i], &t, &sigs[i], msg, sizeof msg)) {
            fprintf(stderr, "capcheck %s: refused: %s\n", cmd, msg);
            return -1;
        }
        cc_run_signature_line(&sigs[i], &t, line, sizeof line);
        size_t used = strlen(note);
        if (line[0] && used + 1 < n)
            snprintf(note + used, n - used, "%s%s", used ? "\n" : "", line);
    }
    return 0;
}

/* Each line of note, after "capcheck CMD: ". */
static void print_note(FILE *f, const char *cmd, const char *note)
{
    for (const char *s = note; *s;) {
        size_t k = strcspn(s, "\n");
        fprintf(f, "capcheck %s: %.*s\n", cmd, (int)k, s);
        s += k + (s[k] == '\n');
    }
}

/* The gate's evidence names who vouched for the run it judged: one run folder whose signature
 * was verified, whose report.json, as the gate read it, is the one signed. 0, or -1 with msg. */
static int name_signer(const opts *o, const cc_run_signature *sigs, const char *note, cc_gate *g,
                       char *msg, size_t len)
{
    snprintf(g->signature_note, sizeof g->signature_note, "%s", note);
    if (o->n_pos != 1 || !sigs[0].verified)
        return 0;
    if (strcmp(sigs[0].report_sha256, g->run.sha256) != 0) {
        snprintf(msg, len, "%s changed while it was read: its sha256 is not the one signed",
                 g->run.report_path);
        return -1;
    }
    snprintf(g->signer, sizeof g->signer, "%s", sigs[0].fingerprint);
    snprintf(g->manifest_sha256, sizeof g->manifest_sha256, "%s", sigs[0].manifest_sha256);
    return 0;
}

static int gate_family(const char *cmd, const opts *o)
{
    char msg[2048];
    if (o->n_pos < 1) {
        fprintf(stderr, "capcheck %s: give a report (a run folder or its report.json)\n", cmd);
        return 2;
    }
    if (strcmp(cmd, "evidence") == 0 && !o->out) {
        fprintf(stderr, "capcheck evidence: --out DIR names where evidence.json files go\n");
        return 2;
    }
    cc_policy *pol = malloc(sizeof *pol); /* large: kept off the stack */
    cc_catalog cat;
    if (!pol || cc_policy_load(o->policy, pol, msg, sizeof msg)) {
        fprintf(stderr, "capcheck %s: %s\n", cmd, pol ? msg : "out of memory");
        free(pol);
        return 2;
    }
    if (cc_catalog_load(o->catalog, &cat, msg, sizeof msg)) {
        fprintf(stderr, "capcheck %s: %s\n", cmd, msg);
        free(pol);
        return 2;
    }
    cc_gate g;
    char note[2048];
    cc_run_signature *sigs = calloc((size_t)o->n_pos, sizeof *sigs);
    int refused = 1;
    if (!sigs)
        fprintf(stderr, "capcheck %s: out of memory\n", cmd);
    else if (check_signatures(cmd, o, pol, sigs, note, sizeof note) == 0) {
        if (cc_gate_run(pol, &cat, o->n_pos, o->pos, &g, msg, sizeof msg))
            fprintf(stderr, "capcheck %s: refused: %s\n", cmd, msg);
        else if (name_signer(o, sigs, note, &g, msg, sizeof msg)) {
            fprintf(stderr, "capcheck %s: refused: %s\n", cmd, msg);
            cc_gate_free(&g);
        } else
            refused = 0;
    }
    free(sigs);
    if (refused) {
        cc_catalog_free(&cat);
        free(pol);
        return 2;
    }
    /* the gate prints it in its header; emit-lean (its stdout is the module, whose header names
     * the signer) only what the module does not say: that a run it was to verify is unsigned */
    if (strcmp(cmd, "evidence") == 0 ||
        (strcmp(cmd, "emit-lean") == 0 && o->allowed_signers && !g.signer[0]))
        print_note(strcmp(cmd, "emit-lean") == 0 ? stderr : stdout, cmd, note);
    int rc = 0;
    if (strcmp(cmd, "gate") == 0) {
        cc_gate_print(&g, pol, o->all, stdout);
        rc = g.exit_code;
    } else if (strcmp(cmd, "emit-lean") == 0)
        rc = emit_lean(&g, pol, o);
    const char *dir = strcmp(cmd, "evidence") == 0 ? o->out : o->evidence;
    if (dir) {
        if (cc_gate_write_evidence(&g, pol, dir, msg, sizeof msg)) {
            fprintf(stderr, "capcheck %s: %s\n", cmd, msg);
            rc = 2;
        } else if (strcmp(cmd, "evidence") == 0)
            printf("capcheck evidence: %d of %zu capsule x dtype x platform checked; evidence.json per "
                   "capsule in %s\n",
                   g.n_checked, g.n, dir);
    }
    cc_gate_free(&g);
    cc_catalog_free(&cat);
    free(pol);
    return rc;
}

/* diff and history: the signature of each run they read, verified with --allowed-signers and
 * said on stdout (nothing for an unsigned run without it). 0, or -1 after one sentence. */
static int say_signatures(const char *cmd, const opts *o)
{
    char note[4096];
    cc_run_signature *sigs = calloc((size_t)o->n_pos, sizeof *sigs);
    if (!sigs) {
        fprintf(stderr, "capcheck %s: out of memory\n", cmd);
        return -1;
    }
    int rc = check_signatures(cmd, o, NULL, sigs, note, sizeof note);
    if (rc == 0)
        print_note(stdout, cmd, note);
    free(sigs);
    return rc;
}

/* capcheck merge: the shards' signatures checked (by allowed keys with --allowed-signers, else
 * each by its own key), the shards merged, the signed shards' manifests copied in, and with
 * --sign KEY the merged run signed. */
static int merge(const opts *o)
{
    char msg[2048], fp[64], who[400];
    if (o->n_pos < 1 || !o->out) {
        fprintf(stderr, "capcheck merge: give the shard folders and --out DIR\n");
        return 2;
    }
    if (o->policy && access(o->policy, R_OK)) {
        fprintf(stderr, "capcheck merge: --policy %s: %s\n", o->policy, strerror(errno));
        return 2;
    }
    if (o->sign && cc_sign_probe(o->sign, fp, msg, sizeof msg)) {
        fprintf(stderr, "capcheck merge: --sign %s: %s\n", o->sign, msg);
        return 2;
    }
    cc_trust t = {o->allowed_signers, 0, NULL, 1};
    cc_run_signature *sigs = calloc((size_t)o->n_pos, sizeof *sigs), merged;
    if (!sigs || cc_merge_check_shards(o->n_pos, o->pos, &t, sigs, msg, sizeof msg)) {
        fprintf(stderr, "capcheck merge: refused: %s\n", sigs ? msg : "out of memory");
        free(sigs);
        return 2;
    }
    int rc = cc_merge_command(o->n_pos, o->pos, o->out, o->force, stderr), signed_shards = 0;
    for (int i = 0; i < o->n_pos; i++)
        signed_shards += sigs[i].verified;
    if (rc != 2 && cc_merge_sign(o->out, o->n_pos, sigs, o->sign, &merged, msg, sizeof msg)) {
        fprintf(stderr, "capcheck merge: %s: merged, not signed: %s\n", o->out, msg);
        rc = 2;
    } else if (rc != 2 && o->sign) {
        cc_run_signer_name(&merged, who, sizeof who);
        printf("capcheck merge: %s/%s signed by %s (%d of the %d shards signed: their manifests "
               "and signatures in %s/%s/)\n",
               o->out, CC_MANIFEST_FILE, who, signed_shards, o->n_pos, o->out,
               CC_MANIFEST_SHARDS_DIR);
    } else if (rc != 2 && signed_shards)
        printf("capcheck merge: %s is unsigned: %d of its %d shards were signed (their "
               "manifests and signatures in %s/%s/), the merge is not: --sign KEY signs it\n",
               o->out, signed_shards, o->n_pos, o->out, CC_MANIFEST_SHARDS_DIR);
    free(sigs);
    if (rc != 2 && cc_write_report_html(o->out, o->policy, "capcheck merge", stdout, stderr))
        rc = 2;
    return rc;
}

/* capcheck sign DIR --key KEY: sign a finished run that nobody signed yet. */
static int sign(const opts *o)
{
    char msg[2048], who[400], sig[1200];
    if (o->n_pos != 1 || !o->sign) {
        fprintf(stderr, "capcheck sign: give one run folder and --key KEY\n");
        return 2;
    }
    snprintf(sig, sizeof sig, "%s/%s", o->pos[0], CC_MANIFEST_SIG_FILE);
    cc_run_signature s;
    if (access(sig, F_OK) == 0) {
        fprintf(stderr, "capcheck sign: %s is signed already: a second signature would replace "
                        "the first signer's (remove %s to sign it anew)\n",
                o->pos[0], sig);
        return 2;
    }
    if (cc_run_sign(o->pos[0], o->sign, NULL, 0, &s, msg, sizeof msg)) {
        fprintf(stderr, "capcheck sign: %s\n", msg);
        return 2;
    }
    cc_run_signer_name(&s, who, sizeof who);
    printf("capcheck sign: %s/%s signed by %s: %s\n", o->pos[0], CC_MANIFEST_FILE, who, sig);
    return 0;
}

/* The file validate reads for its argument: the argument, or a run folder's report.json (the
 * line it prints names the file). -1 with one sentence for a folder without one. */
static int validated_file(const char *arg, char *doc, size_t n, char *msg, size_t len)
{
    struct stat st;
    snprintf(doc, n, "%s", arg);
    if (stat(arg, &st) != 0 || !S_ISDIR(st.st_mode))
        return 0; /* a file, or nothing there: the validator says which */
    snprintf(doc, n, "%s%sreport.json", arg, arg[0] && arg[strlen(arg) - 1] == '/' ? "" : "/");
    if (access(doc, F_OK) == 0)
        return 0;
    snprintf(msg, len, "%s is a folder, not a JSON file, and holds no report.json: give the "
                       "file to validate",
             arg);
    return -1;
}

int cc_evidence_command(int argc, char **argv)
{
    const char *cmd = argv[1];
    opts o;
    if (parse(argc, argv, &o))
        return 2;
    if (strcmp(cmd, "diff") == 0) {
        if (o.n_pos != 2) {
            fprintf(stderr, "capcheck diff: give BASE and NEW (run folders or report.json files)\n");
            return 2;
        }
        char msg[512];
        cc_catalog cat;
        if (cc_catalog_load(o.catalog, &cat, msg, sizeof msg)) {
            fprintf(stderr, "capcheck diff: %s\n", msg);
            return 2;
        }
        if (say_signatures(cmd, &o)) {
            cc_catalog_free(&cat);
            return 2;
        }
        int rc = cc_diff_command(o.pos[0], o.pos[1], o.drift, o.fail_on_drift, &cat, stdout,
                                 stderr);
        cc_catalog_free(&cat);
        return rc;
    }
    if (strcmp(cmd, "merge") == 0)
        return merge(&o);
    if (strcmp(cmd, "sign") == 0)
        return sign(&o);
    if (strcmp(cmd, "history") == 0) {
        if (o.n_pos < 1 || !o.out) {
            fprintf(stderr, "capcheck history: give the run folders, oldest first, and --out DIR\n");
            return 2;
        }
        return say_signatures(cmd, &o)
                   ? 2
                   : cc_history_command(o.n_pos, o.pos, o.out, o.drift, stdout, stderr);
    }
    if (strcmp(cmd, "report") == 0) {
        if (o.n_pos != 1 || o.out) {
            fprintf(stderr, "capcheck report: give one run folder (it gets report.html)\n");
            return 2;
        }
        return cc_write_report_html(o.pos[0], o.policy, "capcheck report", stdout, stderr)
                   ? 2
                   : 0;
    }
    if (strcmp(cmd, "validate") == 0) {
        if (o.n_pos != 1) {
            fprintf(stderr, "capcheck validate: give one JSON file\n");
            return 2;
        }
        char msg[1024], doc[1100];
        if (validated_file(o.pos[0], doc, sizeof doc, msg, sizeof msg)) {
            fprintf(stderr, "capcheck validate: %s\n", msg);
            return 2;
        }
        int rc = cc_jschema_validate_files(o.schema, doc, msg, sizeof msg);
        if (rc == 0)
            printf("capcheck validate: %s conforms to %s\n", doc,
                   o.schema ? o.schema : CC_SCHEMA_BUILT_IN);
        else
            fprintf(stderr, "capcheck validate: %s\n", msg);
        return rc;
    }
    return gate_family(cmd, &o);
}

int cc_write_report_html(const char *dir, const char *policy, const char *who, FILE *out,
                         FILE *err)
{
    char msg[1024], gate[6144]; /* the gate line, and a certify command as long as a repro line */
    long bytes = 0;
    if (cc_report_html_write(dir, policy, &bytes, gate, sizeof gate, msg, sizeof msg)) {
        fprintf(err, "%s: report.html: %s\n", who, msg);
        return -1;
    }
    if (out) {
        fprintf(out, "%s: report.html in %s (%ld KB)\n", who, dir, (bytes + 1023) / 1024);
        for (char *line = strtok(gate, "\n"); line; line = strtok(NULL, "\n"))
            fprintf(out, "%s: %s\n", who, line);
    }
    return 0;
}
