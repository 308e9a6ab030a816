#define _POSIX_C_SOURCE 200809L
#include "harness/certify.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/dtype.h"
#include "core/files.h"
#include "core/torchlean.h"
#include "harness/evidence/gate.h"
#include "harness/evidence/lean_out.h"
#include "harness/evidence/report_html.h"
#include "harness/evidence/signature.h"
#include "harness/report/capsules.h"
#include "harness/run/exit_code.h"

#define SUMMARY_HELD_BACK 20 /* required capsules the summary names; gate.txt has every one */

/* What certify loads besides the run (freed by unload). */
typedef struct {
    cc_policy *pol;
    cc_catalog cat;
    cc_torchlean tl;
    int have_cat, have_tl;
} inputs;

static void unload(inputs *in)
{
    if (in->have_tl)
        cc_torchlean_free(&in->tl);
    if (in->have_cat)
        cc_catalog_free(&in->cat);
    free(in->pol);
    memset(in, 0, sizeof *in);
}

/* 0, or -1 after one sentence on err. */
static int load(const cc_certify_opts *o, inputs *in, FILE *err)
{
    char msg[1024];
    memset(in, 0, sizeof *in);
    in->pol = malloc(sizeof *in->pol); /* large: kept off the stack */
    if (!in->pol || cc_policy_load(o->policy, in->pol, msg, sizeof msg)) {
        fprintf(err, "capcheck certify: %s\n", in->pol ? msg : "out of memory");
        unload(in);
        return -1;
    }
    if (cc_catalog_load(o->catalog, &in->cat, msg, sizeof msg)) {
        fprintf(err, "capcheck certify: --catalog: %s\n", msg);
        unload(in);
        return -1;
    }
    in->have_cat = 1;
    if (cc_torchlean_load(o->torchlean, &in->tl, msg, sizeof msg)) {
        fprintf(err, "capcheck certify: --torchlean: %s\n", msg);
        unload(in);
        return -1;
    }
    in->have_tl = 1;
    return 0;
}

int cc_certify_check(const cc_certify_opts *o, FILE *err)
{
    inputs in;
    if (load(o, &in, err))
        return -1;
    unload(&in);
    return 0;
}

/* `what` written to DIR/name by fn (atomically); 0, or -1 with msg. */
typedef int (*write_fn)(const cc_gate *g, const inputs *in, FILE *f);

static int write_in(const char *dir, const char *name, write_fn fn, const cc_gate *g,
                    const inputs *in, char *msg, size_t len)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    cc_write_atomic w;
    FILE *f = cc_write_atomic_open(&w, path);
    if (!f || cc_write_atomic_close(&w, fn(g, in, f), 0)) {
        snprintf(msg, len, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int write_gate_all(const cc_gate *g, const inputs *in, FILE *f)
{
    cc_gate_print(g, in->pol, 1, f);
    return ferror(f) ? -1 : 0;
}

static int write_lean(const cc_gate *g, const inputs *in, FILE *f)
{
    return cc_lean_write_module(g, in->pol, &in->tl, 0, f);
}

/* The capsules of the run, and those with a checked dtype (the module's). */
static void count_capsules(const cc_gate *g, int *capsules, int *upgraded)
{
    const cc_verdict *v[CC_DTYPE_COUNT * CC_MAX_PLATFORMS];
    *capsules = *upgraded = 0;
    for (size_t i = 0; i < g->n; i++) {
        size_t nv = cc_gate_capsule(g, i, v, sizeof v / sizeof v[0]);
        int any = 0;
        for (size_t k = 0; k < nv; k++)
            any |= v[k]->checked;
        *capsules += nv > 0;
        *upgraded += any;
    }
}

/* --sign: the run certify signed, checked with its own key, named by the gate's evidence. 0, or
 * -1 with msg. */
static int name_signer(const cc_certify_opts *o, cc_gate *g, char *msg, size_t len)
{
    cc_trust t = {NULL, 0, NULL, 1};
    cc_run_signature s;
    if (!o->sign)
        return 0;
    if (cc_run_verify(o->out_dir, &t, &s, msg, len))
        return -1;
    if (!s.verified || strcmp(s.report_sha256, g->run.sha256) != 0) {
        snprintf(msg, len, "%s/%s does not sign the report certify judged", o->out_dir,
                 CC_MANIFEST_FILE);
        return -1;
    }
    snprintf(g->signer, sizeof g->signer, "%s", s.fingerprint);
    snprintf(g->manifest_sha256, sizeof g->manifest_sha256, "%s", s.manifest_sha256);
    cc_run_signature_line(&s, &t, g->signature_note, sizeof g->signature_note);
    return 0;
}

/* The summary: the verdict, each required capsule held back with its first reason, the paths. */
static void summary(const cc_certify_opts *o, const cc_gate *g, const inputs *in,
                    size_t lean_capsules, const char *lean_why, FILE *out)
{
    const cc_policy *pol = in->pol;
    const char *unit = cc_gate_unit(g);
    fprintf(out, "capcheck certify: %d of %zu %s checked under %s", g->n_checked, g->n, unit,
            pol->name);
    if (pol->n_req)
        fprintf(out, "; %d of the %d required", g->n_required_checked, g->n_required);
    fprintf(out, ": exit %d\n", g->exit_code);
    long held = 0;
    for (size_t i = 0; i < g->n; i++) {
        const cc_verdict *v = &g->v[i];
        if (v->checked || (pol->n_req && !v->required))
            continue;
        if (held++ == 0)
            fprintf(out, "capcheck certify: %s, not checked (each with its first reason):\n",
                    pol->n_req ? "required" : "every one");
        if (held > SUMMARY_HELD_BACK)
            continue;
        fprintf(out, "  %s %s%s%s: %s\n", v->capsule.name,
                v->dtype == CC_DTYPE_COUNT ? "*" : cc_dtype_name(v->dtype),
                v->platform[0] ? " on " : "", v->platform,
                v->n_reasons ? v->reasons[0] : "(no reason recorded)");
    }
    if (held > SUMMARY_HELD_BACK)
        fprintf(out, "  ... and %ld more: every one in %s/gate.txt\n", held - SUMMARY_HELD_BACK,
                o->out_dir);
    int capsules, upgraded;
    count_capsules(g, &capsules, &upgraded);
    fprintf(out, "capcheck certify: report.html    %s/report.html\n", o->out_dir);
    fprintf(out, "capcheck certify: verdicts       %s/gate.txt (capcheck gate --all)\n",
            o->out_dir);
    fprintf(out, "capcheck certify: evidence.json  %s/evidence/<capsule>/evidence.json (%d "
                 "capsules, %d with a checked dtype)\n",
            o->out_dir, capsules, upgraded);
    if (lean_capsules)
        fprintf(out, "capcheck certify: Lean module    %s/Evidence.lean (TorchLean %.7s; %zu "
                     "KernelCapsules)\n",
                o->out_dir, in->tl.commit, lean_capsules);
    else /* emit-lean's rule: no module without a capsule in it */
        fprintf(out, "capcheck certify: Lean module    none written: %s\n", lean_why);
    if (g->signer[0])
        fprintf(out, "capcheck certify: signed by      %s: %s/%s (the run), %s/%s (these files)\n",
                g->signer, o->out_dir, CC_MANIFEST_FILE, o->out_dir, CC_EVIDENCE_MANIFEST_FILE);
}

int cc_certify_finish(const cc_certify_opts *o, FILE *out, FILE *err)
{
    inputs in;
    if (load(o, &in, err))
        return CC_EXIT_USAGE;
    cc_gate *g = calloc(1, sizeof *g);
    char msg[2048], dir[1200];
    long bytes = 0;
    int rc = CC_EXIT_UNJUDGED; /* memory, or a folder that would not take a file */
    snprintf(dir, sizeof dir, "%s/evidence", o->out_dir);
    if (!g)
        snprintf(msg, sizeof msg, "out of memory");
    else if (cc_gate_run(in.pol, &in.cat, 1, &o->out_dir, g, msg, sizeof msg) == 0) {
        if (!name_signer(o, g, msg, sizeof msg) &&
            !cc_report_html_write_gated(g, in.pol, &in.cat, &bytes, msg, sizeof msg) &&
            !write_in(o->out_dir, "gate.txt", write_gate_all, g, &in, msg, sizeof msg) &&
            !cc_gate_write_evidence(g, in.pol, dir, msg, sizeof msg)) {
            char why[1024];
            size_t lean = cc_lean_capsule_count(g, in.pol, &in.tl, why, sizeof why);
            if (lean == 0) { /* a module of an earlier run in this folder is not this one's */
                char path[1300];
                snprintf(path, sizeof path, "%s/Evidence.lean", o->out_dir);
                unlink(path);
            }
            if ((lean == 0 ||
                 !write_in(o->out_dir, "Evidence.lean", write_lean, g, &in, msg, sizeof msg)) &&
                (!o->sign || !cc_evidence_sign(o->out_dir, o->sign, msg, sizeof msg))) {
                summary(o, g, &in, lean, why, out);
                rc = g->exit_code;
            }
        }
        cc_gate_free(g);
    } else {
        fprintf(err, "capcheck certify: refused: %s\n", msg);
        msg[0] = 0;
        rc = CC_EXIT_USAGE;
    }
    if (rc == CC_EXIT_UNJUDGED && msg[0])
        fprintf(err, "capcheck certify: %s\n", msg);
    free(g);
    unload(&in);
    return rc;
}
