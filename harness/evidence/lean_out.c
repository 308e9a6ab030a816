/* capcheck emit-lean: the capsules the gate upgraded, as a TorchLean module that a TorchLean
 * tree can import and hand to its planner (docs/torchlean.md).
 *
 * The module targets one TorchLean commit (core/torchlean.h: every constructor, field,
 * namespace and module name it writes is in that commit's data, which
 * tests/check_lean_module.py checks) and holds:
 *   - a `KernelCapsule` per capsule with a checked dtype whose op, provider and device TorchLean
 *     names: trustLevel .checked; vjpMode the mode the provider ran (the results say; never the
 *     catalog's); shape and layout evidence TorchLean's own runtimeGuard where TorchLean's
 *     executor for that provider and device has one, else this report's testSuite; value and
 *     VJP evidence the testSuite "capcheck report sha256:<hex>" (the sealed report); summaries
 *     that state the dtypes, platforms, case counts and worst bound ratios. Its name is
 *     "capcheck." + the catalog name (TorchLean's maintained capsule keeps its own identity);
 *   - `capsuleModule`, the CapsuleModule of them, and per device a profile that admits them:
 *     TorchLean's maintained profile for the device (AssurancePolicy.checked) with the module
 *     added by BackendProfile.withCapsuleModules, its availability widened to the capsules'
 *     providers where the maintained one lacks them;
 *   - `notEmitted`: every upgraded capsule that is not a TorchLean capsule, with why (an op
 *     TorchLean's BackendOp lacks, capcheck's oracle checking itself, a VJP mode the results do
 *     not state, a float32 LibTorch contract checked in other dtypes only), and in comments the
 *     capsules the report does not upgrade, TorchLean-checked ones flagged.
 * Lean text is escaped: string literals (quotes, backslashes, control bytes, invalid UTF-8),
 * comments (no "/-" or "-/" survives) and identifiers (an injective mangling into
 * [A-Za-z0-9_] behind a fixed prefix: "a-b" and "a_b" stay apart, "2fast" is no problem). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "harness/evidence/gate.h"

#define SHAPES cc_shape_class_names
#define LAYOUTS cc_layout_names
#define EDGES cc_edge_class_names

/* ---- escaping ------------------------------------------------------------------------------ */

/* The length of the valid UTF-8 sequence at s (1 for ASCII), or 0 when the bytes there are not
 * one. */
static size_t utf8_len(const unsigned char *s)
{
    size_t n = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3 : (s[0] >> 3) == 30 ? 4 : 0;
    if (n == 0 || (n == 2 && s[0] < 0xc2))
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] >> 6) != 2)
            return 0;
    return n;
}

/* A Lean string literal. */
static void lean_string(FILE *f, const char *text)
{
    fputc('"', f);
    for (const unsigned char *s = (const unsigned char *)text; *s;) {
        size_t n = utf8_len(s);
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if (*s == '\n')
            fputs("\\n", f);
        else if (*s == '\t')
            fputs("\\t", f);
        else if (n == 0 || *s < 0x20 || *s == 0x7f)
            fprintf(f, "\\x%02x", *s); /* a control or stray byte: as the code point it is */
        else
            fwrite(s, 1, n, f);
        s += n ? n : 1;
    }
    fputc('"', f);
}

/* Text inside a Lean comment: Lean's block comments nest, so neither "/-" nor "-/" may
 * appear; control bytes and invalid UTF-8 become '?', newlines stay. */
static void lean_comment(FILE *f, const char *text)
{
    for (const unsigned char *s = (const unsigned char *)text; *s;) {
        size_t n = utf8_len(s);
        if ((s[0] == '/' && s[1] == '-') || (s[0] == '-' && s[1] == '/')) {
            fprintf(f, "%c %c", s[0], s[1]);
            s += 2;
            continue;
        }
        if (n == 0 || (*s < 0x20 && *s != '\n') || *s == 0x7f)
            fputc('?', f);
        else
            fwrite(s, 1, n, f);
        s += n ? n : 1;
    }
}

/* A Lean identifier for a capsule name: "cap_" and the name with letters and digits kept, '_'
 * doubled and any other byte as '_' and two hex digits. Injective (the code is prefix-free), so
 * two capsule names never share an identifier; never a keyword; never starts with a digit. */
static void lean_ident(const char *name, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "cap_");
    for (const unsigned char *s = (const unsigned char *)name; *s && k + 4 < n; s++) {
        if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9'))
            buf[k++] = (char)*s;
        else if (*s == '_')
            k += (size_t)snprintf(buf + k, n - k, "__");
        else
            k += (size_t)snprintf(buf + k, n - k, "_%02x", *s);
    }
    buf[k < n ? k : n - 1] = 0;
}

/* ---- what each capsule becomes ------------------------------------------------------------- */

#define MAX_V (CC_DTYPE_COUNT * CC_MAX_PLATFORMS) /* a capsule's verdicts: dtype x platform */

typedef struct {
    const cc_capsule *c;
    const cc_verdict *v[MAX_V];
    size_t nv;
    int upgraded;       /* some dtype checked */
    long vjp_checks;    /* passing VJP checks over the checked dtypes */
    char dtypes[64];    /* the checked dtypes */
    char ran[24];       /* the VJP mode the checked dtypes' results state ("mixed": they differ) */
    char mode[24];      /* the mode claimed: ran, or none when no VJP check passed */
    char platforms[256];
    char why_not[512];  /* "" when it becomes a KernelCapsule */
    char name[96];      /* the KernelCapsule's name */
    char ident[320];
} lean_capsule;

static int is_mode(const char *m)
{
    return !strcmp(m, "none") || !strcmp(m, "torchLeanTape") || !strcmp(m, "backendVJP");
}

static void classify(const cc_gate *g, const cc_torchlean *tl, lean_capsule *e)
{
    const cc_capsule *c = e->c;
    e->ran[0] = 0;
    for (size_t i = 0; i < e->nv; i++) {
        if (!e->v[i]->checked)
            continue;
        const cc_capsule_stats *s = e->v[i]->stats;
        cc_list_add(e->dtypes, sizeof e->dtypes, cc_dtype_name(e->v[i]->dtype));
        cc_list_add(e->platforms, sizeof e->platforms, e->v[i]->platform);
        if (!e->ran[0])
            snprintf(e->ran, sizeof e->ran, "%s", s->vjp_mode);
        else if (strcmp(e->ran, s->vjp_mode) != 0)
            snprintf(e->ran, sizeof e->ran, "mixed");
        e->upgraded = 1;
        e->vjp_checks += s->vjp_passing;
    }
    /* no VJP claim without a passing VJP check: TorchLean then plans it for inference only */
    snprintf(e->mode, sizeof e->mode, "%s", e->vjp_checks ? e->ran : "none");
    snprintf(e->name, sizeof e->name, "%s%s", strncmp(c->name, "capcheck.", 9) ? "capcheck." : "",
             c->name);
    lean_ident(e->name, e->ident, sizeof e->ident);
    char t[16];
    snprintf(t, sizeof t, "%.7s", tl->commit);
    if (strcmp(c->source, "oracle") == 0 && cc_tl_has_ctor(tl, "BackendOp", c->op))
        snprintf(e->why_not, sizeof e->why_not,
                 "capcheck's float64 oracle checked against itself: a self-check of the harness, "
                 "not evidence for TorchLean's reference.%s capsule (TorchLean's Lean reference "
                 "runtime, which capcheck does not run)",
                 ref_op_find(c->op) ? ref_op_find(c->op)->report_name : c->op);
    else if (strcmp(c->source, "oracle") == 0)
        snprintf(e->why_not, sizeof e->why_not,
                 "capcheck's float64 oracle checked against itself: a self-check of the harness; "
                 "`%s` is not a constructor of NN.Backend.BackendOp at TorchLean %s either",
                 c->op, t);
    else if (!cc_tl_has_ctor(tl, "BackendOp", c->op))
        snprintf(e->why_not, sizeof e->why_not,
                 "`%s` is not a constructor of NN.Backend.BackendOp at TorchLean %s: no "
                 "KernelCapsule can name the op",
                 c->op, t);
    else if (!cc_tl_has_ctor(tl, "Provider", c->provider))
        snprintf(e->why_not, sizeof e->why_not,
                 "provider `%s` is not a constructor of NN.Backend.Provider at TorchLean %s",
                 c->provider, t);
    else if (!cc_tl_has_ctor(tl, "Device", c->device))
        snprintf(e->why_not, sizeof e->why_not,
                 "device `%s` is not a constructor of NN.Backend.Device at TorchLean %s", c->device,
                 t);
    else if (!is_mode(e->ran))
        snprintf(e->why_not, sizeof e->why_not,
                 "the results state no single VJP mode the provider ran (%s): the catalog's %s "
                 "was not what was tested",
                 e->ran[0] ? e->ran : "none given", c->vjp_mode);
    else if (strcmp(c->layout, "libTorchCudaView") == 0 && !strstr(e->dtypes, "f32"))
        snprintf(e->why_not, sizeof e->why_not,
                 "TorchLean's libTorchCudaView layout is contiguous CUDA float32 tensors, and this "
                 "report checks the capsule for %s only",
                 e->dtypes);
    (void)g;
}

/* The classes the checked dtypes' passing cases cover, as "a, b" ("none" if none). */
static void covered(const lean_capsule *e, char what, char *buf, size_t n)
{
    buf[0] = 0;
    int count = what == 's' ? CC_SHAPE_COUNT : what == 'l' ? CC_LAYOUT_COUNT : CC_EDGE_COUNT;
    const char *const *names = what == 's' ? SHAPES : what == 'l' ? LAYOUTS : EDGES;
    for (int k = 0; k < count; k++) {
        long any = 0;
        for (size_t i = 0; i < e->nv; i++) {
            const cc_capsule_stats *s = e->v[i]->stats;
            if (e->v[i]->checked)
                any += what == 's' ? s->shape_n[k] : what == 'l' ? s->layout_n[k] : s->edge_n[k];
        }
        if (any)
            cc_list_add(buf, n, names[k]);
    }
    if (!buf[0])
        snprintf(buf, n, "none");
}

/* "f32: 12 of 12 cases passing, VJP 12, worst bound ratio 0.489; f64: ..." */
static void counts(const lean_capsule *e, char *buf, size_t n)
{
    buf[0] = 0;
    for (size_t i = 0; i < e->nv; i++) {
        const cc_capsule_stats *s = e->v[i]->stats;
        if (!e->v[i]->checked)
            continue;
        size_t used = strlen(buf);
        snprintf(buf + used, n - used, "%s%s%s%s: %ld of %ld cases passing, VJP checked in %ld, "
                                       "worst bound ratio %.4g",
                 used ? "; " : "", cc_dtype_name(e->v[i]->dtype),
                 e->v[i]->platform[0] ? " on " : "", e->v[i]->platform, s->counts[CC_RES_PASS],
                 s->cases, s->vjp_passing, s->worst_ratio);
    }
}

static void descriptor(FILE *f, const char *field, const char *claim, const char *summary,
                       const char *evidence, const char *name)
{
    fprintf(f, "  %s :=\n    { claim := %s\n      summary := ", field, claim);
    lean_string(f, summary);
    fprintf(f, "\n      evidence := %s", evidence);
    if (name) {
        fputc(' ', f);
        lean_string(f, name);
    }
    fputs(" }\n", f);
}

static void emit_capsule(FILE *f, const cc_gate *g, const cc_torchlean *tl, const lean_capsule *e)
{
    const cc_capsule *c = e->c;
    const ref_op *op = ref_op_find(c->op);
    char suite[128], shapes[128], layouts[128], edges[160], cnt[1024], text[2048];
    cc_gate_suite_name(g, suite, sizeof suite);
    covered(e, 's', shapes, sizeof shapes);
    covered(e, 'l', layouts, sizeof layouts);
    covered(e, 'e', edges, sizeof edges);
    counts(e, cnt, sizeof cnt);
    const char *platforms = e->platforms[0] ? e->platforms : "not recorded in the results";
    const char *handler = cc_tl_handler(tl, c->provider, c->device);

    fputs("/-- ", f);
    lean_comment(f, c->name);
    fprintf(f, " (%s, %s, %s), checked for %s. ", c->op, c->provider, c->device, e->dtypes);
    if (strcmp(c->source, "torchlean") == 0 && strcmp(c->trust, "checked") == 0)
        fputs("TorchLean's catalog already marks it checked; this capsule adds capcheck's "
              "evidence under its own name. ",
              f);
    else
        fprintf(f, "Upgraded from %s (the catalog) to checked. ", c->trust);
    fprintf(f, "VJP mode the provider ran: %s (the catalog states %s)%s. ", e->ran, c->vjp_mode,
            strcmp(e->mode, e->ran) ? "; no VJP check passed, so no VJP claim" : "");
    if (handler)
        fprintf(f, "TorchLean runs it with its executor \"%s\". ", handler);
    else
        fprintf(f, "TorchLean %.7s links no executor for %s on %s: the planner selects it, the "
                   "eager runtime cannot run it yet. ",
                tl->commit, c->provider, c->device);
    for (size_t i = 0; i < e->nv; i++)
        if (!e->v[i]->checked) {
            fprintf(f, "Not checked for %s%s", cc_dtype_name(e->v[i]->dtype),
                    e->v[i]->platform[0] ? " on " : "");
            lean_comment(f, e->v[i]->platform);
            fputs(": ", f);
            lean_comment(f, e->v[i]->n_reasons ? e->v[i]->reasons[0] : "see capcheck gate");
            fputs(". ", f);
        }
    fprintf(f, "-/\ndef %s : KernelCapsule where\n  name := ", e->ident);
    lean_string(f, e->name);
    fprintf(f, "\n  op := .%s\n  provider := .%s\n  device := .%s\n  trustLevel := .checked\n"
               "  supportsForward := true\n  vjpMode := .%s\n",
            c->op, c->provider, c->device, e->mode);

    char claim[160];
    const char *guard = cc_tl_guard(tl, c->provider, c->device, c->op, "shape");
    snprintf(claim, sizeof claim, ".shapeSafety .%s", c->op);
    snprintf(text, sizeof text, "%scapcheck: outputs had the shapes the float64 reference's shape "
                                "rule derives, shape classes %s (%s)",
             guard ? "TorchLean's runtime guard; also " : "", shapes, e->dtypes);
    descriptor(f, "shapeContract", claim, text, guard ? ".runtimeGuard" : ".testSuite",
               guard ? guard : suite);
    guard = cc_tl_guard(tl, c->provider, c->device, c->op, "layout");
    snprintf(claim, sizeof claim, ".layoutCompatibility .%s .%s", c->op, c->layout);
    snprintf(text, sizeof text, "%scapcheck: inputs read as %s views (%s)",
             guard ? "TorchLean's runtime guard admits only its layout; also " : "", layouts,
             e->dtypes);
    descriptor(f, "layoutContract", claim, text, guard ? ".runtimeGuard" : ".testSuite",
               guard ? guard : suite);
    snprintf(claim, sizeof claim, ".valueRefinement .%s", c->op);
    snprintf(text, sizeof text, "capcheck: forward within the error model of the float64 "
                                "reference (%s); edge classes %s; platforms %s; provider ",
             cnt, edges, platforms);
    size_t used = strlen(text);
    snprintf(text + used, sizeof text - used, "%s", g->run.provider_description);
    descriptor(f, "valueContract", claim, text, ".testSuite", suite);
    if (strcmp(e->mode, "none") == 0) {
        snprintf(claim, sizeof claim, ".vjpUnavailable .%s", c->op);
        descriptor(f, "vjpContract", claim,
                   op && !op->requires_vjp ? "no reverse rule: the op is not differentiated"
                                           : "no reverse rule: no VJP check passed",
                   ".notApplicable", NULL);
    } else {
        snprintf(claim, sizeof claim, ".vjpRefinement .%s .%s", c->op, e->mode);
        snprintf(text, sizeof text, "capcheck: the VJP as the provider ran it (%s: %s) within the "
                                    "error model of the float64 reference, %ld passing VJP checks",
                 e->mode,
                 strcmp(e->mode, "backendVJP") == 0 ? "its own backward routine, e.g. an ATen "
                                                      "backward kernel"
                                                    : "composed from forward primitives",
                 e->vjp_checks);
        descriptor(f, "vjpContract", claim, text, ".testSuite", suite);
    }
    fprintf(f, "  numericalPolicy := { reduction := .%s }\n\n", c->reduction);
}

/* ---- the module ---------------------------------------------------------------------------- */

static const char *or_none(const char *s)
{
    return s && s[0] ? s : "none";
}

static void header(FILE *f, const cc_gate *g, const cc_policy *pol, const cc_torchlean *tl)
{
    const cc_provenance *p = &g->run.prov;
    const cc_provider_identity *id = &p->provider;
    fputs("/-\ncapcheck evidence for TorchLean kernel capsules, as a TorchLean module.\n"
          "Generated by `capcheck emit-lean`; do not edit.\n\n", f);
    const cc_tl_row *repo = cc_tl_find(tl, "repository", NULL);
    fprintf(f, "TorchLean: %s at commit %s (the names used here: capcheck's\n"
               "           providers/torchlean/%s.tsv)\n",
            repo ? repo->value : "TorchLean", tl->commit, tl->commit);
    fprintf(f, "Report:    sha256:%s (%ld cases), %s\n", g->report_sha256, g->run.cases,
            g->run.prov.shard.present ? "a shard" : "sealed");
    fputs("Source:    ", f);
    lean_comment(f, g->source);
    fprintf(f, "\nMade by:   capcheck %s, commit %s\n", p->capcheck_version, p->git_commit);
    fputs("Provider:  ", f);
    if (!id->kind[0])
        fputs("not recorded (a report made before capcheck recorded who ran)", f);
    else if (strcmp(id->kind, "plugin") == 0) {
        fputs("plugin ", f);
        lean_comment(f, id->name);
        fputs(" loaded from ", f);
        lean_comment(f, id->library);
        fprintf(f, " (sha256:%s)", id->sha256);
    } else {
        fputs("built-in ", f);
        lean_comment(f, id->name);
    }
    fputs("\n           ", f);
    lean_comment(f, g->run.provider_description);
    fprintf(f, "\nMachine:   cpu %s; gpu %s; cuda %s; cudnn %s; libtorch %s; tf32 %s; "
               "deterministic %s\n",
            p->cpu_model, or_none(p->gpu), or_none(p->cuda), or_none(p->cudnn),
            or_none(p->libtorch), p->tf32[0] ? p->tf32 : "not stated",
            p->deterministic[0] ? p->deterministic : "not stated");
    if (!p->n_platforms)
        fputs("Platforms: not recorded in the results\n", f);
    for (int i = 0; i < p->n_platforms; i++) { /* what selected the kernels (run/platform.h) */
        char facts[512];
        cc_platform_summary(&p->platforms[i], facts, sizeof facts);
        fputs("Platform:  ", f);
        lean_comment(f, p->platforms[i].key);
        fputs(": ", f);
        lean_comment(f, facts);
        fputc('\n', f);
    }
    fputs("Cases:     ", f);
    lean_comment(f, g->run.case_files);
    fprintf(f, "; base seed %llu\n", g->run.base_seed);
    for (int i = 0; i < p->n_files; i++) {
        fputs("           ", f);
        lean_comment(f, p->files[i].path);
        fprintf(f, " sha256:%s\n", p->files[i].sha256);
    }
    fputs("Policy:    ", f);
    lean_comment(f, pol->name);
    fputs("\n-/\n", f);
    for (int i = 0; i < tl->n; i++)
        if (strcmp(tl->rows[i].kind, "header") == 0 && strcmp(tl->rows[i].value, "module") == 0)
            fprintf(f, "%s\n\n", tl->rows[i].value);
    for (int i = 0; i < tl->n; i++)
        if (strcmp(tl->rows[i].kind, "header") == 0 &&
            strncmp(tl->rows[i].value, "public import ", 14) == 0)
            fprintf(f, "%s\n", tl->rows[i].value);
}

/* "a,b" (constructor names) as the Lean array "#[.a, .b]". */
static void ctor_array(FILE *f, const char *list)
{
    fputs("#[", f);
    for (const char *p = list; *p;) {
        size_t l = strcspn(p, ",");
        fprintf(f, "%s.%.*s", p == list ? "" : ", ", (int)l, p);
        p += l + (p[l] ? 1 : 0);
    }
    fputc(']', f);
}

/* The profile admitting the module on one device: TorchLean's maintained profile for it, with
 * the availability widened to the capsules' providers when it lacks one. */
static void emit_profile(FILE *f, const cc_torchlean *tl, const char *device,
                         const lean_capsule *e, size_t n, const char *ident)
{
    const cc_tl_row *prof = cc_tl_profile(tl, device);
    if (!prof)
        return;
    char avail_name[128], devices[128], providers[256];
    cc_tl_item(prof->value, "availability", avail_name, sizeof avail_name);
    const cc_tl_row *avail = cc_tl_find(tl, "availability", avail_name);
    cc_tl_item(avail ? avail->value : "", "devices", devices, sizeof devices);
    cc_tl_item(avail ? avail->value : "", "providers", providers, sizeof providers);
    int widened = 0;
    for (size_t i = 0; i < n; i++) {
        if (e[i].why_not[0] || strcmp(e[i].c->device, device) != 0)
            continue;
        char probe[300];
        snprintf(probe, sizeof probe, ",%s,", providers);
        char want[40];
        snprintf(want, sizeof want, ",%s,", e[i].c->provider);
        if (!strstr(probe, want)) {
            size_t used = strlen(providers);
            snprintf(providers + used, sizeof providers - used, "%s%s", used ? "," : "",
                     e[i].c->provider);
            widened = 1;
        }
    }
    const char *shrt = strrchr(prof->name, '.') ? strrchr(prof->name, '.') + 1 : prof->name;
    const char *in_ns = strncmp(prof->name, "NN.Backend.", 11) == 0 ? prof->name + 11 : prof->name;
    fprintf(f, "/-- TorchLean's `%s` (AssurancePolicy.checked) with `capsuleModule` first, so the "
               "planner picks these capsules for their ops on %s",
            shrt, device);
    if (widened)
        fprintf(f, "; its availability (%s) widened to the capsules' providers", avail_name);
    fprintf(f, ". -/\ndef %s : BackendProfile :=\n  BackendProfile.withCapsuleModules\n", ident);
    if (widened) {
        fprintf(f, "    { %s with\n      availability :=\n        { devices := ", in_ns);
        ctor_array(f, devices);
        fputs("\n          providers := ", f);
        ctor_array(f, providers);
        fputs(" } }\n", f);
    } else
        fprintf(f, "    %s\n", in_ns);
    fputs("    #[capsuleModule]\n\n", f);
}

int cc_gate_emit_lean(const cc_gate *g, const cc_policy *pol, const cc_catalog *cat,
                      const cc_torchlean *tl, FILE *f)
{
    (void)cat;
    lean_capsule *e = calloc(g->n ? g->n : 1, sizeof *e);
    if (!e)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < g->n; i++) {
        e[n].nv = cc_gate_capsule(g, i, e[n].v, MAX_V);
        if (!e[n].nv)
            continue;
        e[n].c = &e[n].v[0]->capsule;
        classify(g, tl, &e[n]);
        n++;
    }
    header(f, g, pol, tl);
    char ns[64];
    snprintf(ns, sizeof ns, "Capcheck.Evidence.Report_%.16s", g->report_sha256);
    fprintf(f, "\n/-!\n# capcheck evidence, report sha256:%.16s\n\n"
               "`capsuleModule` holds a `KernelCapsule` (trustLevel .checked) for every capsule "
               "this report\nupgrades whose op, provider and device TorchLean %.7s names; its "
               "value and VJP evidence is\n`testSuite \"capcheck report sha256:...\"`, the sealed "
               "report, and its vjpMode the mode the\nprovider ran. To admit them, import this "
               "module and plan with one of the profiles below\n(TorchLean's maintained profile "
               "with `BackendProfile.withCapsuleModules #[capsuleModule]`),\ne.g. "
               "`checkedCpuWithEvidence.planReport #[.softmax]` names the capsule the planner picks. "
               "`notEmitted`\nlists the upgraded capsules that are not TorchLean capsules, with "
               "why.\n-/\n\n",
            g->report_sha256, tl->commit);
    for (int i = 0; i < tl->n; i++)
        if (strcmp(tl->rows[i].kind, "header") == 0 && strstr(tl->rows[i].value, "section"))
            fprintf(f, "%s\n\n", tl->rows[i].value);
    fprintf(f, "namespace %s\n\nopen NN.Backend\n\n", ns);
    size_t emitted = 0;
    for (size_t i = 0; i < n; i++)
        if (e[i].upgraded && !e[i].why_not[0]) {
            emit_capsule(f, g, tl, &e[i]);
            emitted++;
        }
    fprintf(f, "/-- The capsules this report upgrades, as one capsule module (%zu). -/\n"
               "def capsuleModule : Registry.CapsuleModule :=\n  { name := ",
            emitted);
    char modname[96];
    snprintf(modname, sizeof modname, "capcheck:%.16s", g->report_sha256);
    lean_string(f, modname);
    fputs("\n    capsules := #[", f);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (e[i].upgraded && !e[i].why_not[0])
            fprintf(f, "%s%s", k++ ? ",\n      " : "", e[i].ident);
    fputs("] }\n\n", f);
    static const char *const devices[] = {"cpu", "cuda"};
    static const char *const idents[] = {"checkedCpuWithEvidence", "checkedCudaWithEvidence"};
    for (int d = 0; d < 2; d++) {
        int any = 0;
        for (size_t i = 0; i < n; i++)
            any |= e[i].upgraded && !e[i].why_not[0] && strcmp(e[i].c->device, devices[d]) == 0;
        if (any)
            emit_profile(f, tl, devices[d], e, n, idents[d]);
    }
    fputs("/-! ## Not emitted as TorchLean capsules\n\nUpgraded by this report, but not a "
          "TorchLean capsule:\n",
          f);
    k = 0;
    for (size_t i = 0; i < n; i++)
        if (e[i].upgraded && e[i].why_not[0]) {
            fputs("* `", f);
            lean_comment(f, e[i].c->name);
            fprintf(f, "` (checked for %s): ", e[i].dtypes);
            lean_comment(f, e[i].why_not);
            fputs("\n", f);
            k++;
        }
    if (!k)
        fputs("(none)\n", f);
    fputs("\nNot upgraded by this report (capcheck gate says why):\n", f);
    k = 0;
    for (size_t i = 0; i < n; i++) {
        if (e[i].upgraded && !e[i].why_not[0])
            continue;
        for (size_t j = 0; j < e[i].nv; j++) {
            const cc_verdict *v = e[i].v[j];
            if (v->checked)
                continue;
            fputs("* `", f);
            lean_comment(f, e[i].c->name);
            fprintf(f, "` %s%s", cc_dtype_name(v->dtype), v->platform[0] ? " on " : "");
            lean_comment(f, v->platform);
            fprintf(f, "%s: ",
                    strcmp(e[i].c->source, "torchlean") == 0 && strcmp(e[i].c->trust, "checked") == 0
                        ? " (TorchLean's catalog marks it checked; this report does not support that)"
                        : "");
            lean_comment(f, v->n_reasons ? v->reasons[0] : "not checked");
            fputs("\n", f);
            k++;
        }
    }
    if (!k)
        fputs("(none)\n", f);
    fputs("-/\n\n/-- The upgraded capsules that are not TorchLean capsules, with why. -/\n"
          "def notEmitted : List (String × String) := [",
          f);
    k = 0;
    for (size_t i = 0; i < n; i++)
        if (e[i].upgraded && e[i].why_not[0]) {
            fputs(k++ ? ",\n  (" : "\n  (", f);
            lean_string(f, e[i].c->name);
            fputs(", ", f);
            lean_string(f, e[i].why_not);
            fputc(')', f);
        }
    fprintf(f, "%s]\n\nend %s\n", k ? "\n" : "", ns);
    free(e);
    return ferror(f) ? -1 : 0;
}
