/* What the gate certifies, written out: evidence.json per capsule (gate.h) and a Lean file
 * for the capsules it upgraded. Both in TorchLean's vocabulary (ops.md section 1):
 *   ContractClaim     shapeSafety op | layoutCompatibility op layout | valueRefinement op |
 *                     vjpRefinement op mode | vjpUnavailable op
 *   ContractEvidence  testSuite name | trustedBoundary reason | notApplicable
 * A capsule is upgraded when at least one dtype is checked (on some platform: evidence is per
 * capsule x dtype x platform); its testSuite evidence names the report (sha256) and lists
 * exactly the checked dtypes and, per dtype, the platforms it was checked on, with their case
 * counts, seed and worst bound ratio. A capsule with no checked dtype keeps trustedBoundary evidence whose reason is
 * the gate's list of what is missing. */
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
#include "harness/report/report_out.h"

#define SHAPES cc_shape_class_names
#define LAYOUTS cc_layout_names
#define EDGES cc_edge_class_names

/* The verdicts of one capsule, in report order. */
static size_t capsule_verdicts(const cc_gate *g, const char *name, const cc_verdict **out,
                               size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < g->n && n < max; i++)
        if (g->v[i].stats && strcmp(g->v[i].capsule.name, name) == 0)
            out[n++] = &g->v[i];
    return n;
}

static int first_of_capsule(const cc_gate *g, size_t i)
{
    if (!g->v[i].stats)
        return 0;
    for (size_t j = 0; j < i; j++)
        if (g->v[j].stats && strcmp(g->v[j].capsule.name, g->v[i].capsule.name) == 0)
            return 0;
    return 1;
}

/* The testSuite name of a capsule's evidence in this report. */
static void suite_name(const cc_gate *g, const cc_capsule *c, char *buf, size_t n)
{
    snprintf(buf, n, "capcheck:%s@sha256:%.16s", c->name, g->report_sha256);
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
    char name[160];
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
    fprintf(f, ", \"report_sha256\": \"%s\"}}", g->report_sha256);
}

static int write_one(const cc_gate *g, const cc_policy *pol, const cc_verdict **v, size_t nv,
                     FILE *f)
{
    const cc_capsule *c = &v[0]->capsule;
    const ref_op *op = ref_op_find(c->op);
    int upgraded = 0;
    for (size_t i = 0; i < nv; i++)
        upgraded |= v[i]->checked;
    fputs("{\n  \"schema\": \"capcheck-evidence/1\",\n  \"capsule\": {\"name\": ", f);
    cc_json_write_string(f, c->name);
    fputs(", \"op\": ", f);
    cc_json_write_string(f, c->op);
    fputs(", \"report_name\": ", f);
    cc_json_write_string(f, op ? op->report_name : c->op);
    fputs(", \"backend_op\": ", f);
    /* the nine ops that are not TorchLean BackendOps (ops.md section 0) */
    static const char *const not_backend[] = {"div", "neg", "silu", "topKMask", "scaledMatmul",
                                              "softmaxMatmul", "crossEntropy", "distill",
                                              "custom"};
    int backend = 1;
    for (int i = 0; i < 9; i++)
        backend &= strcmp(c->op, not_backend[i]) != 0;
    fputs(backend ? "true" : "false", f);
    fputs(",\n    \"provider\": ", f);
    cc_json_write_string(f, c->provider);
    fputs(", \"device\": ", f);
    cc_json_write_string(f, c->device);
    fputs(", \"catalog_trust\": ", f);
    cc_json_write_string(f, c->trust);
    fputs(", \"vjp_mode\": ", f);
    cc_json_write_string(f, c->vjp_mode);
    fputs(", \"reduction\": ", f);
    cc_json_write_string(f, c->reduction);
    fputs(", \"layout\": ", f);
    cc_json_write_string(f, c->layout);
    fputs(", \"source\": ", f);
    cc_json_write_string(f, c->source);
    fprintf(f, "},\n  \"trust\": \"%s\",\n  \"dtypes\": [\n", upgraded ? "checked" : "trustedExternal");
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
        fputs(",\n     \"missing\": [", f);
        for (int k = 0; k < v[i]->n_reasons; k++) {
            if (k)
                fputs(", ", f);
            cc_json_write_string(f, v[i]->reasons[k]);
        }
        fprintf(f, "]}%s\n", i + 1 < nv ? "," : "");
    }
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
    if (strcmp(c->vjp_mode, "none") == 0 || (op && !op->requires_vjp && !op->vjp)) {
        fputs("{\"claim\": {\"vjpUnavailable\": {\"op\": ", f);
        cc_json_write_string(f, c->op);
        fputs("}}, \"evidence\": {\"notApplicable\": {}}}", f);
    } else {
        fputs("{\"claim\": {\"vjpRefinement\": {\"op\": ", f);
        cc_json_write_string(f, c->op);
        fputs(", \"mode\": ", f);
        cc_json_write_string(f, c->vjp_mode);
        fputs("}}, \"evidence\": ", f);
        write_evidence_value(f, g, c, v, nv, 1);
        fputc('}', f);
    }
    fputs("\n  },\n  \"report\": {\"sha256\": ", f);
    cc_json_write_string(f, g->report_sha256);
    fputs(", \"source\": ", f);
    cc_json_write_string(f, g->source);
    fprintf(f, ", \"cases\": %ld, \"base_seed\": %llu, \"case_files\": ", g->run.cases,
            g->run.base_seed);
    cc_json_write_string(f, g->run.case_files);
    fputs(", \"provider_description\": ", f);
    cc_json_write_string(f, g->run.provider_description);
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
    fputs("},\n  \"policy\": ", f);
    cc_json_write_string(f, pol->name);
    fputs("\n}\n", f);
    return ferror(f) ? -1 : 0;
}

int cc_gate_write_evidence(const cc_gate *g, const cc_policy *pol, const char *dir, char *msg,
                           size_t len)
{
    const cc_verdict *v[CC_DTYPE_COUNT * CC_MAX_PLATFORMS];
    for (size_t i = 0; i < g->n; i++) {
        if (!first_of_capsule(g, i))
            continue;
        size_t nv = capsule_verdicts(g, g->v[i].capsule.name, v, sizeof v / sizeof v[0]);
        char sub[1200], path[1300];
        snprintf(sub, sizeof sub, "%s/%s", dir, g->v[i].capsule.name);
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

/* ---- Lean ---------------------------------------------------------------------------------- */

static void lean_ident(const char *name, const char *suffix, char *buf, size_t n)
{
    size_t k = 0;
    for (const char *s = name; *s && k + 1 < n; s++)
        buf[k++] = (char)((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                                  (*s >= '0' && *s <= '9') || *s == '_'
                              ? *s
                              : '_');
    buf[k] = 0;
    snprintf(buf + k, n - k, "_%s", suffix);
}

/* A Lean string literal: quotes and backslashes escaped. */
static void lean_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s == '\n' ? ' ' : *s, f);
    }
    fputc('"', f);
}

static void lean_descriptor(FILE *f, const char *ident, const char *claim, const char *summary,
                            const char *evidence_kind, const char *suite)
{
    fprintf(f, "def %s : ContractDescriptor where\n  claim := %s\n  summary := ", ident, claim);
    lean_string(f, summary);
    fprintf(f, "\n  evidence := %s", evidence_kind);
    if (suite) {
        fputc(' ', f);
        lean_string(f, suite);
    }
    fputs("\n  provenance := #[]\n\n", f);
}

enum { COVERED_SHAPES, COVERED_LAYOUTS, COVERED_EDGES };

/* The shape, layout or edge classes the checked dtypes' passing cases cover. */
static void covered(const cc_verdict **v, size_t nv, int what, char *buf, size_t n)
{
    buf[0] = 0;
    int count = what == COVERED_SHAPES    ? CC_SHAPE_COUNT
                : what == COVERED_LAYOUTS ? CC_LAYOUT_COUNT
                                          : CC_EDGE_COUNT;
    const char *const *names = what == COVERED_SHAPES    ? SHAPES
                               : what == COVERED_LAYOUTS ? LAYOUTS
                                                         : EDGES;
    for (int k = 0; k < count; k++) {
        long any = 0;
        for (size_t i = 0; i < nv; i++) {
            const cc_capsule_stats *s = v[i]->stats;
            if (v[i]->checked)
                any += what == COVERED_SHAPES    ? s->shape_n[k]
                       : what == COVERED_LAYOUTS ? s->layout_n[k]
                                                 : s->edge_n[k];
        }
        if (any) {
            size_t used = strlen(buf);
            snprintf(buf + used, n - used, "%s%s", used ? ", " : "", names[k]);
        }
    }
    if (!buf[0])
        snprintf(buf, n, "none");
}

void cc_gate_emit_lean(const cc_gate *g, const cc_policy *pol, FILE *f)
{
    const cc_provenance *p = &g->run.prov;
    fputs("/-\ncapcheck evidence for TorchLean kernel capsules.\n"
          "Generated by `capcheck emit-lean`; do not edit.\n\n", f);
    fprintf(f, "Report:   sha256:%s (%ld cases)\n", g->report_sha256, g->run.cases);
    fprintf(f, "Made by:  capcheck %s, commit %s\n", p->capcheck_version, p->git_commit);
    fprintf(f, "Provider: %s\n", g->run.provider_description);
    fprintf(f, "Machine:  cpu %s; gpu %s; cuda %s; cudnn %s; tf32 %s; deterministic %s\n",
            p->cpu_model, p->gpu[0] ? p->gpu : "none", p->cuda[0] ? p->cuda : "none",
            p->cudnn[0] ? p->cudnn : "none", p->tf32[0] ? p->tf32 : "not stated",
            p->deterministic[0] ? p->deterministic : "not stated");
    for (int i = 0; i < p->n_platforms; i++) {
        char facts[1024];
        cc_platform_summary(&p->platforms[i], facts, sizeof facts);
        fprintf(f, "Platform: %s: %s\n", p->platforms[i].key, facts);
    }
    fprintf(f, "Cases:    %s; base seed %llu\n", g->run.case_files, g->run.base_seed);
    for (int i = 0; i < p->n_files; i++)
        fprintf(f, "          %s sha256:%s\n", p->files[i].path, p->files[i].sha256);
    fprintf(f, "Policy:   %s\n\n", pol->name);
    fputs("Each capsule below was upgraded from trustedExternal to checked by the capcheck gate:\n"
          "its contracts carry `testSuite` evidence naming this report. The evidence covers the\n"
          "dtypes listed for it, on the platforms listed with them, and nothing else.\n-/\n", f);
    fputs("import NN.Backend.Capsule\n\nnamespace NN.Backend.CapcheckEvidence\n\n"
          "open NN.Backend\n\n", f);
    const cc_verdict *v[CC_DTYPE_COUNT * CC_MAX_PLATFORMS];
    int upgraded = 0;
    for (size_t i = 0; i < g->n; i++) {
        if (!first_of_capsule(g, i))
            continue;
        size_t nv = capsule_verdicts(g, g->v[i].capsule.name, v, sizeof v / sizeof v[0]);
        const cc_capsule *c = &v[0]->capsule;
        char dtypes[1024] = "", counts[4096] = "";
        long vjp = 0;
        for (size_t k = 0; k < nv; k++) {
            if (!v[k]->checked)
                continue;
            const cc_capsule_stats *s = v[k]->stats;
            size_t used = strlen(dtypes);
            snprintf(dtypes + used, sizeof dtypes - used, "%s%s%s%s", used ? ", " : "",
                     cc_dtype_name(v[k]->dtype), v[k]->platform[0] ? " on " : "",
                     v[k]->platform);
            used = strlen(counts);
            snprintf(counts + used, sizeof counts - used,
                     "%s%s%s%s: %ld of %ld cases passing, VJP %ld, worst bound ratio %.4g",
                     used ? "; " : "", cc_dtype_name(v[k]->dtype),
                     v[k]->platform[0] ? " on " : "", v[k]->platform, s->counts[CC_RES_PASS],
                     s->cases, s->vjp_passing, s->worst_ratio);
            vjp += s->vjp_passing;
        }
        if (!dtypes[0])
            continue;
        upgraded++;
        const ref_op *op = ref_op_find(c->op);
        fprintf(f, "/-! ## `%s` (%s, %s, %s): checked for %s\n%s; seed %llu. -/\n\n", c->name,
                c->op, c->provider, c->device, dtypes, counts, g->run.base_seed);
        if (!ref_is_backend_op(c->op)) {
            fprintf(f, "-- `%s` is not a TorchLean BackendOp: no ContractClaim can name it.\n\n",
                    c->op);
            continue;
        }
        char suite[160], ident[200], claim[200], summary[5200], shapes[128], layouts[128],
            edges[128];
        covered(v, nv, COVERED_SHAPES, shapes, sizeof shapes);
        covered(v, nv, COVERED_LAYOUTS, layouts, sizeof layouts);
        covered(v, nv, COVERED_EDGES, edges, sizeof edges);
        suite_name(g, c, suite, sizeof suite);
        lean_ident(c->name, "shape", ident, sizeof ident);
        snprintf(claim, sizeof claim, ".shapeSafety .%s", c->op);
        snprintf(summary, sizeof summary, "capcheck: outputs of the shapes the float64 "
                                          "reference's shape rule derives, on shape classes %s (%s)",
                 shapes, dtypes);
        lean_descriptor(f, ident, claim, summary, ".testSuite", suite);
        lean_ident(c->name, "layout", ident, sizeof ident);
        snprintf(claim, sizeof claim, ".layoutCompatibility .%s .%s", c->op, c->layout);
        snprintf(summary, sizeof summary, "capcheck: inputs as %s views (%s)", layouts, dtypes);
        lean_descriptor(f, ident, claim, summary, ".testSuite", suite);
        lean_ident(c->name, "value", ident, sizeof ident);
        snprintf(claim, sizeof claim, ".valueRefinement .%s", c->op);
        snprintf(summary, sizeof summary, "capcheck: within the bound-ratio model of the float64 "
                                          "reference (%s); edge-value classes %s",
                 counts, edges);
        lean_descriptor(f, ident, claim, summary, ".testSuite", suite);
        lean_ident(c->name, "vjp", ident, sizeof ident);
        if (strcmp(c->vjp_mode, "none") == 0 || (op && !op->requires_vjp && !op->vjp)) {
            snprintf(claim, sizeof claim, ".vjpUnavailable .%s", c->op);
            lean_descriptor(f, ident, claim, "no reverse rule", ".notApplicable", NULL);
        } else {
            snprintf(claim, sizeof claim, ".vjpRefinement .%s .%s", c->op, c->vjp_mode);
            snprintf(summary, sizeof summary, "capcheck: VJP within the bound-ratio model of the "
                                              "float64 reference (%ld passing VJP checks)",
                     vjp);
            lean_descriptor(f, ident, claim, summary, ".testSuite", suite);
        }
    }
    fputs("/-- Every capsule this report upgrades, with the dtypes its evidence covers. -/\n"
          "def upgraded : List (String × List String) := [", f);
    int k = 0;
    for (size_t i = 0; i < g->n; i++) {
        if (!first_of_capsule(g, i))
            continue;
        size_t nv = capsule_verdicts(g, g->v[i].capsule.name, v, sizeof v / sizeof v[0]);
        int any = 0;
        for (size_t j = 0; j < nv; j++)
            any |= v[j]->checked;
        if (!any)
            continue;
        fprintf(f, "%s\n  (", k++ ? "," : "");
        lean_string(f, g->v[i].capsule.name);
        fputs(", [", f);
        int d = 0; /* each checked dtype once, whatever platforms it holds for */
        for (int t = 0; t < CC_DTYPE_COUNT; t++)
            for (size_t j = 0; j < nv; j++)
                if (v[j]->checked && v[j]->dtype == (cc_dtype)t) {
                    fputs(d++ ? ", " : "", f);
                    lean_string(f, cc_dtype_name(v[j]->dtype));
                    break;
                }
        fputs("])", f);
    }
    fprintf(f, "%s]\n\nend NN.Backend.CapcheckEvidence\n", k ? "\n" : "");
    (void)upgraded;
}
