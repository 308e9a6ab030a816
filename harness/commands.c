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

static const char *const COMMANDS[] = {"gate",   "evidence", "emit-lean", "diff",    "merge",
                                       "report", "history",  "validate",  NULL};

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
    if (cc_gate_run(pol, &cat, o->n_pos, o->pos, &g, msg, sizeof msg)) {
        fprintf(stderr, "capcheck %s: refused: %s\n", cmd, msg);
        cc_catalog_free(&cat);
        free(pol);
        return 2;
    }
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
        int rc = cc_diff_command(o.pos[0], o.pos[1], o.drift, o.fail_on_drift, &cat, stdout,
                                 stderr);
        cc_catalog_free(&cat);
        return rc;
    }
    if (strcmp(cmd, "merge") == 0) {
        if (o.n_pos < 1 || !o.out) {
            fprintf(stderr, "capcheck merge: give the shard folders and --out DIR\n");
            return 2;
        }
        if (o.policy && access(o.policy, R_OK)) {
            fprintf(stderr, "capcheck merge: --policy %s: %s\n", o.policy, strerror(errno));
            return 2;
        }
        int rc = cc_merge_command(o.n_pos, o.pos, o.out, o.force, stderr);
        if (rc != 2 && cc_write_report_html(o.out, o.policy, "capcheck merge", stdout, stderr))
            rc = 2;
        return rc;
    }
    if (strcmp(cmd, "history") == 0) {
        if (o.n_pos < 1 || !o.out) {
            fprintf(stderr, "capcheck history: give the run folders, oldest first, and --out DIR\n");
            return 2;
        }
        return cc_history_command(o.n_pos, o.pos, o.out, o.drift, stdout, stderr);
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
    char msg[1024], gate[2048];
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
