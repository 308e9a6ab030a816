/* What the gate certifies, written out: evidence.json per capsule (gate.h; the Lean module is
 * harness/evidence/lean_out.c). In TorchLean's vocabulary (ops.md section 1):
 *   ContractClaim     shapeSafety op | layoutCompatibility op layout | valueRefinement op |
 *                     vjpRefinement op mode | vjpUnavailable op
 *   ContractEvidence  testSuite name | trustedBoundary reason | notApplicable
 * A capsule is upgraded when at least one dtype is checked (on some platform: evidence is per
 * capsule x dtype x platform); its testSuite evidence names the report (sha256) and lists
 * exactly the checked dtypes and, per dtype, the platforms it was checked on, with their case
 * counts, seed and worst bound ratio, and for a run whose signature was verified, the signer's
 * key fingerprint and the signed manifest's sha256 (the name says them too). A capsule with no checked dtype keeps trustedBoundary
 * evidence whose reason is the gate's list of what is missing. The capsule's vjp_mode is the mode
 * the results state (what the provider ran); the catalog's is kept as catalog_vjp_mode. */
#define _POSIX_C_SOURCE 200809L
#include "harness/evidence/gate.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/dtype.h"
#include "core/files.h"
#include "core/json.h"
#include "harness/evidence/signature.h"
#include "harness/report/report_out.h"

#define SHAPES cc_shape_class_names
#define LAYOUTS cc_layout_names
#define EDGES cc_edge_class_names

/* The testSuite name of a capsule's evidence in this report: the sealed report itself. */
static void suite_name(const cc_gate *g, const cc_capsule *c, char *buf, size_t n)
{
    (void)c;
    cc_gate_suite_name(g, buf, n);
}

/* ---- evidence.json ------------------------------------------------------------------------- */

static void class_counts(FILE *f, const long *n, int count, const char *const *names)
{
    fputc('{', f);
    for (int k = 0; k < count; k++)
        fprintf(f, "%s\"%s\": %ld", k ? ", " : "", names[k], n[k]);
    fputc('}', f);
}

static void write_evidence_value(FILE *f, const cc_gate *g, const cc_capsule *c,
                                 const cc_verdict **v, size_t nv, int vjp)
{
    long cases = 0, passing = 0, vjp_passing = 0;
    double worst = 0;
    int any = 0;
    for (size_t i = 0; i < nv; i++)
        if (v[i]->checked) {
            any = 1;
            cases += v[i]->stats->cases;
            passing += v[i]->stats->counts[CC_RES_PASS];
            vjp_passing += v[i]->stats->vjp_passing;
            if (v[i]->stats->worst_ratio > worst || isnan(v[i]->stats->worst_ratio))
                worst = v[i]->stats->worst_ratio;
        }
    if (!any) {
        fputs("{\"trustedBoundary\": {\"reason\": ", f);
        char why[1024] = "capcheck evidence insufficient:";
        for (size_t i = 0; i < nv; i++)
            for (int k = 0; k < v[i]->n_reasons; k++) {
                size_t used = strlen(why);
                snprintf(why + used, sizeof why - used, " %s%s%s: %s;",
                         cc_dtype_name(v[i]->dtype), v[i]->platform[0] ? " on " : "",
                         v[i]->platform, v[i]->reasons[k]);
            }
        cc_json_write_string(f, why);
        fputs("}}", f);
        return;
    }
    char name[CC_GATE_SUITE_NAME_MAX];
    suite_name(g, c, name, sizeof name);
    fputs("{\"testSuite\": {\"name\": ", f);
    cc_json_write_string(f, name);
    fputs(", \"dtypes\": [", f);
    int k = 0, named = 0;
    for (int d = 0; d < CC_DTYPE_COUNT; d++)
        for (size_t i = 0; i < nv; i++)
            if (v[i]->checked && v[i]->dtype == (cc_dtype)d) {
                fprintf(f, "%s\"%s\"", k++ ? ", " : "", cc_dtype_name(v[i]->dtype));
                break;
            }
    fputs("]", f);
    for (size_t i = 0; i < nv; i++)
        named |= v[i]->checked && v[i]->platform[0];
    if (named) { /* per dtype, the platforms it holds for */
        fputs(", \"platforms\": {", f);
        k = 0;
        for (int d = 0; d < CC_DTYPE_COUNT; d++) {
            int j = 0;
            for (size_t i = 0; i < nv; i++) {
                if (!v[i]->checked || v[i]->dtype != (cc_dtype)d || !v[i]->platform[0])
                    continue;
                if (j++)
                    fputs(", ", f);
                else
                    fprintf(f, "%s\"%s\": [", k++ ? ", " : "", cc_dtype_name((cc_dtype)d));
                cc_json_write_string(f, v[i]->platform);
            }
            if (j)
                fputs("]", f);
        }
        fputs("}", f);
    }
    fprintf(f, ", \"cases\": %ld, \"passing\": %ld", cases, passing);
    if (vjp)
        fprintf(f, ", \"vjp_passing\": %ld", vjp_passing);
    fprintf(f, ", \"seed\": %llu, \"worst_bound_ratio\": ", g->run.base_seed);
    cc_json_write_number(f, worst);
    fprintf(f, ", \"report_sha256\": \"%s\"", g->report_sha256);
    if (g->signer[0]) /* who vouched for the run: its key, and the manifest it signed */
        fprintf(f, ", \"signer\": \"%s\", \"manifest_sha256\": \"%s\"", g->signer,
                g->manifest_sha256);
    fputs("}}", f);
}

/* "capsule": the capsule as the catalog names it, with the VJP mode its results state (ran). */
static void write_capsule(FILE *f, const cc_capsule *c, const ref_op *op, const char *ran)
{
    fputs("{\n  \"schema\": \"capcheck-evidence/1\",\n  \"capsule\": {\"name\": ", f);
    cc_json_write_string(f, c->name);
    fputs(", \"op\": ", f);
    cc_json_write_string(f, c->op);
    fputs(", \"report_name\": ", f);
    cc_json_write_string(f, op ? op->report_name : c->op);
    fputs(", \"backend_op\": ", f);
    fputs(ref_is_backend_op(c->op) ? "true" : "false", f);
    fputs(",\n    \"provider\": ", f);
    cc_json_write_string(f, c->provider);
    fputs(", \"device\": ", f);
    cc_json_write_string(f, c->device);
    fputs(", \"catalog_trust\": ", f);
    cc_json_write_string(f, c->trust);
    fputs(", \"vjp_mode\": ", f);
    cc_json_write_string(f, ran);
    fputs(", \"catalog_vjp_mode\": ", f);
    cc_json_write_string(f, c->vjp_mode);
    fputs(", \"reduction\": ", f);
    cc_json_write_string(f, c->reduction);
    fputs(", \"layout\": ", f);
    cc_json_write_string(f, c->layout);
    fputs(", \"source\": ", f);
    cc_json_write_string(f, c->source);
}

/* "dtypes": one row per verdict (dtype, platform): counts, worst case, classes, what is missing. */
static void write_dtype_rows(FILE *f, const cc_verdict **v, size_t nv)
{
    for (size_t i = 0; i < nv; i++) {
        const cc_capsule_stats *s = v[i]->stats;
        fprintf(f, "    {\"dtype\": \"%s\", ", cc_dtype_name(v[i]->dtype));
        if (v[i]->platform[0]) {
            fputs("\"platform\": ", f);
            cc_json_write_string(f, v[i]->platform);
            fputs(", ", f);
        }
        fprintf(f, "\"verdict\": \"%s\", \"cases\": %ld, \"passing\": %ld, "
                   "\"failed\": %ld, \"errors\": %ld, \"crashed\": %ld, \"timed_out\": %ld, "
                   "\"unsupported\": %ld, \"vjp_passing\": %ld,\n     \"worst_bound_ratio\": ",
                v[i]->checked ? "checked" : "trustedExternal",
                s->cases, s->counts[CC_RES_PASS], s->counts[CC_RES_FAIL],
                s->counts[CC_RES_ERROR], s->counts[CC_RES_CRASH], s->counts[CC_RES_TIMEOUT],
                s->counts[CC_RES_UNSUPPORTED], s->vjp_passing);
        cc_json_write_number(f, s->worst_ratio);
        fputs(", \"worst_case\": ", f);
        cc_json_write_string(f, s->worst_line);
        fputs(",\n     \"shape_classes\": ", f);
        class_counts(f, s->shape_n, CC_SHAPE_COUNT, SHAPES);
        fputs(", \"layout_classes\": ", f);
        class_counts(f, s->layout_n, CC_LAYOUT_COUNT, LAYOUTS);
        fputs(", \"edge_classes\": ", f);
        class_counts(f, s->edge_n, CC_EDGE_COUNT, EDGES);
        fprintf(f, ",\n     \"distinct\": {\"passing_inputs\": %ld, \"shapes\": %ld, "
                   "\"layouts\": %ld, \"edge_classes\": %d, \"repeated_case_lines\": %ld}",
                s->passing, s->distinct_shapes, s->distinct_layouts, cc_evidence_edge_classes(s),
                s->repeats);
        fputs(",\n     \"missing\": [", f);
        for (int k = 0; k < v[i]->n_reasons; k++) {
            if (k)
                fputs(", ", f);
            cc_json_write_string(f, v[i]->reasons[k]);
        }
        fprintf(f, "]}%s\n", i + 1 < nv ? "," : "");
    }
}

/* "contracts": shape, layout, value and vjp claims, each with its evidence (ran: the VJP mode
 * the results state). */
static void write_contracts(FILE *f, const cc_gate *g, const cc_capsule *c, const ref_op *op,
                            const cc_verdict **v, size_t nv, const char *ran)
{
    int one_mode = strcmp(ran, "torchLeanTape") == 0 || strcmp(ran, "backendVJP") == 0;
    fputs("  ],\n  \"contracts\": {\n    \"shape\": {\"claim\": {\"shapeSafety\": {\"op\": ", f);
    cc_json_write_string(f, c->op);
    fputs("}}, \"evidence\": ", f);
    write_evidence_value(f, g, c, v, nv, 0);
    fputs("},\n    \"layout\": {\"claim\": {\"layoutCompatibility\": {\"op\": ", f);
    cc_json_write_string(f, c->op);
    fputs(", \"layout\": ", f);
    cc_json_write_string(f, c->layout);
    fputs("}}, \"evidence\": ", f);
    write_evidence_value(f, g, c, v, nv, 0);
    fputs("},\n    \"value\": {\"claim\": {\"valueRefinement\": {\"op\": ", f);
    cc_json_write_string(f, c->op);
    fputs("}}, \"evidence\": ", f);
    write_evidence_value(f, g, c, v, nv, 0);
    fputs("},\n    \"vjp\": ", f);
    if (strcmp(ran, "none") == 0 || (op && !op->requires_vjp && !op->vjp)) {
        fputs("{\"claim\": {\"vjpUnavailable\": {\"op\": ", f);
        cc_json_write_string(f, c->op);
        fputs("}}, \"evidence\": {\"notApplicable\": {}}}", f);
    } else {
        fputs("{\"claim\": {\"vjpRefinement\": {\"op\": ", f);
        cc_json_write_string(f, c->op);
        fputs(", \"mode\": ", f);
        cc_json_write_string(f, one_mode ? ran : c->vjp_mode);
        fputs("}}, \"evidence\": ", f);
        if (one_mode)
            write_evidence_value(f, g, c, v, nv, 1);
        else {
            char why[160];
            snprintf(why, sizeof why, "the provider does not state one VJP mode it ran (results: "
                                      "%s); the catalog's mode was not what was tested",
                     ran[0] ? ran : "none given");
            fputs("{\"trustedBoundary\": {\"reason\": ", f);
            cc_json_write_string(f, why);
            fputs("}}", f);
        }
        fputc('}', f);
    }
}

/* "report", "provenance", "provider", "policy": what the evidence was taken from. */
static void write_sources(FILE *f, const cc_gate *g, const cc_policy *pol)
{
    fputs("\n  },\n  \"report\": {\"sha256\": ", f);
    cc_json_write_string(f, g->report_sha256);
    fputs(", \"source\": ", f);
    cc_json_write_string(f, g->source);
    fprintf(f, ", \"cases\": %ld, \"base_seed\": %llu, \"case_files\": ", g->run.cases,
            g->run.base_seed);
    cc_json_write_string(f, g->run.case_files);
    fputs(", \"provider_description\": ", f);
    cc_json_write_string(f, g->run.provider_description);
    if (g->signer[0])
        fprintf(f, ",\n    \"signature\": {\"signer\": \"%s\", \"manifest_sha256\": \"%s\", "
                   "\"namespace\": \"%s\"}",
                g->signer, g->manifest_sha256, CC_SIGN_NAMESPACE);
    fputs("},\n  \"provenance\": {\"capcheck_version\": ", f);
    const cc_provenance *p = &g->run.prov;
    cc_json_write_string(f, p->capcheck_version);
    fputs(", \"git_commit\": ", f);
    cc_json_write_string(f, p->git_commit);
    const char *vals[] = {p->libtorch, p->cuda, p->cudnn, p->gpu, p->tf32, p->deterministic};
    const char *keys[] = {"libtorch_version", "cuda_version", "cudnn_version", "gpu", "tf32",
                          "deterministic"};
    for (int i = 0; i < 6; i++) {
        fprintf(f, ", \"%s\": ", keys[i]);
        if (vals[i][0])
            cc_json_write_string(f, vals[i]);
        else
            fputs("null", f);
    }
    fputs(", \"cpu_model\": ", f);
    cc_json_write_string(f, p->cpu_model);
    fputs("},\n  \"provider\": {\"name\": ", f);
    const cc_provider_identity *id = &p->provider;
    cc_json_write_string(f, id->kind[0] ? id->name : g->run.results ? g->run.results[0].provider : "");
    fputs(", \"kind\": ", f);
    cc_json_write_string(f, id->kind[0] ? id->kind : "not recorded");
    if (id->library[0]) {
        fputs(", \"library\": ", f);
        cc_json_write_string(f, id->library);
        fprintf(f, ", \"sha256\": \"%s\"", id->sha256);
    }
    fputs("},\n  \"policy\": ", f);
    cc_json_write_string(f, pol->name);
    fputs("\n}\n", f);
}

/* One capsule's evidence.json: its verdicts v (one per dtype and platform). */
static int write_one(const cc_gate *g, const cc_policy *pol, const cc_verdict **v, size_t nv,
                     FILE *f)
{
    const cc_capsule *c = &v[0]->capsule;
    const ref_op *op = ref_op_find(c->op);
    int upgraded = 0;
    for (size_t i = 0; i < nv; i++)
        upgraded |= v[i]->checked;
    char ran[24]; /* the VJP mode the results state, over every dtype */
    snprintf(ran, sizeof ran, "%s", v[0]->stats->vjp_mode);
    for (size_t i = 1; i < nv; i++)
        if (strcmp(ran, v[i]->stats->vjp_mode) != 0)
            snprintf(ran, sizeof ran, "mixed");
    write_capsule(f, c, op, ran);
    fprintf(f, "},\n  \"trust\": \"%s\",\n  \"dtypes\": [\n",
            upgraded ? "checked" : "trustedExternal");
    write_dtype_rows(f, v, nv);
    write_contracts(f, g, c, op, v, nv, ran);
    write_sources(f, g, pol);
    return ferror(f) ? -1 : 0;
}

/* A capsule name as one folder name: letters, digits, '.', '_' and '-' kept, any other byte (a
 * '/' of a plugin's name, say) and a leading '.' as %XX. Injective, and never "..". */
static void folder_name(const char *name, char *buf, size_t n)
{
    size_t k = 0;
    for (const unsigned char *s = (const unsigned char *)name; *s && k + 4 < n; s++) {
        int keep = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
                   *s == '_' || *s == '-' || (*s == '.' && s != (const unsigned char *)name);
        k += keep ? (size_t)snprintf(buf + k, n - k, "%c", *s)
                  : (size_t)snprintf(buf + k, n - k, "%%%02X", *s);
    }
    buf[k < n ? k : n - 1] = 0;
}

int cc_gate_write_evidence(const cc_gate *g, const cc_policy *pol, const char *dir, char *msg,
                           size_t len)
{
    const cc_verdict *v[CC_DTYPE_COUNT * CC_MAX_PLATFORMS];
    for (size_t i = 0; i < g->n; i++) {
        size_t nv = cc_gate_capsule(g, i, v, sizeof v / sizeof v[0]);
        if (!nv)
            continue;
        char sub[1200], path[1300], folder[300];
        folder_name(g->v[i].capsule.name, folder, sizeof folder);
        snprintf(sub, sizeof sub, "%s/%s", dir, folder);
        snprintf(path, sizeof path, "%s/evidence.json", sub);
        if (cc_make_dir(sub)) {
            snprintf(msg, len, "cannot create %s: %s", sub, strerror(errno));
            return -1;
        }
        cc_write_atomic w;
        FILE *f = cc_write_atomic_open(&w, path);
        if (!f) {
            snprintf(msg, len, "cannot write %s: %s", w.tmp, strerror(errno));
            return -1;
        }
        if (cc_write_atomic_close(&w, write_one(g, pol, v, nv, f), 0)) {
            snprintf(msg, len, "cannot write %s", path);
            return -1;
        }
    }
    return 0;
}
