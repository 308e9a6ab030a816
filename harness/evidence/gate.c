#define _POSIX_C_SOURCE 200809L
#include "harness/evidence/gate.h"

#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/grow.h"
#include "harness/report/identity.h"

/* ---- the policy file ----------------------------------------------------------------------- */

static int class_list(char **tok, int n, const char *const *names, int count, unsigned *mask,
                      const char **bad)
{
    *mask = 0;
    for (int i = 0; i < n; i++) {
        char item[256];
        snprintf(item, sizeof item, "%s", tok[i]);
        for (char *s = strtok(item, ","); s; s = strtok(NULL, ",")) {
            if (strcmp(s, "none") == 0)
                continue;
            if (strcmp(s, "all") == 0) {
                *mask = (1u << count) - 1;
                continue;
            }
            int k = 0;
            while (k < count && strcmp(s, names[k]) != 0)
                k++;
            if (k == count) {
                *bad = tok[i];
                return -1;
            }
            *mask |= 1u << k;
        }
    }
    return 0;
}

static int dtype_list(const char *s, unsigned *mask)
{
    *mask = 0;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        if (strcmp(t, "*") == 0 || strcmp(t, "all") == 0) {
            *mask |= (1u << CC_F64) | (1u << CC_F32) | (1u << CC_F16) | (1u << CC_BF16);
            continue;
        }
        cc_dtype d;
        if (cc_dtype_parse(t, &d) || d == CC_I64 || d == CC_U8)
            return -1;
        *mask |= 1u << d;
    }
    return *mask ? 0 : -1;
}

#define SHAPES cc_shape_class_names
#define LAYOUTS cc_layout_names
#define EDGES cc_edge_class_names

/* A key with one of two words: *flag = 1 for `on`, 0 for `off`; -1 for anything else. */
static int two_words(char **tok, int nt, const char *on, const char *off, int *flag)
{
    if (nt != 2 || (strcmp(tok[1], on) && strcmp(tok[1], off)))
        return -1;
    *flag = strcmp(tok[1], on) == 0;
    return 0;
}

/* Where the policy parser is: the file's name and line, for the sentence that refuses it. */
typedef struct {
    const char *name;
    int lineno;
    char *msg;
    size_t len;
} policy_where;

/* msg = "NAME:LINE: " and the sentence; returns -1. */
static int policy_refuse(const policy_where *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int policy_refuse(const policy_where *w, const char *fmt, ...)
{
    int used = snprintf(w->msg, w->len, "%s:%d: ", w->name, w->lineno);
    if (used < 0 || (size_t)used >= w->len)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg + used, w->len - (size_t)used, fmt, ap);
    va_end(ap);
    return -1;
}

/* A policy before its first line: named, and the requirements of a policy that sets none. */
static void policy_start(cc_policy *p, const char *name)
{
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->defaults.min_passing = 100;
    p->defaults.min_vjp_passing = 100;
    p->defaults.min_repeat = 1;
    p->defaults.min_distinct_shapes = -1; /* half of min_passing */
    p->defaults.shapes = (1u << CC_SHAPE_COUNT) - 1;
    /* the classes a policy asks for when it names none: the four layouts and seven edge
     * classes of the first policies (the later ones are asked for by name) */
    p->defaults.layouts = (1u << (CC_LAYOUT_BCAST + 1)) - 1;
    p->defaults.edges = (1u << (CC_EDGE_MASKED_ROW + 1)) - 1;
}

/* The line at *s into line (its comment cut off), split into at most max words; *s moves past
 * it. Returns the word count, or -1 when the line does not fit. */
static int policy_words(const char **s, char *line, size_t size, char **tok, int max)
{
    const char *eol = strchr(*s, '\n');
    size_t n = eol ? (size_t)(eol - *s) : strlen(*s);
    if (n >= size)
        return -1;
    memcpy(line, *s, n);
    line[n] = 0;
    *s = eol ? eol + 1 : *s + n;
    char *hash = strchr(line, '#');
    if (hash)
        *hash = 0;
    int nt = 0;
    for (char *t = strtok(line, " \t\r"); t && nt < max; t = strtok(NULL, " \t\r"))
        tok[nt++] = t;
    return nt;
}

/* [op NAME...] or [capsule GLOB...], optionally dtype=LIST: a new section, into *sec. */
static int parse_section_header(cc_policy *p, char **tok, int nt, const policy_where *w,
                                cc_policy_section **sec_out)
{
    char hdr[1024] = "";
    for (int i = 0; i < nt; i++) {
        strncat(hdr, tok[i], sizeof hdr - strlen(hdr) - 2);
        strcat(hdr, " ");
    }
    char *open = hdr + 1, *close = strrchr(hdr, ']');
    if (!close || close[1] != ' ' || close[2])
        return policy_refuse(w, "a section header is '[op NAME...]' or '[capsule GLOB...]', "
                                "with an optional dtype=LIST");
    *close = 0;
    if (p->n_sec == CC_POLICY_MAX_SECTIONS)
        return policy_refuse(w, "more than %d sections", CC_POLICY_MAX_SECTIONS);
    cc_policy_section *sec = *sec_out = &p->sec[p->n_sec++];
    memset(sec, 0, sizeof *sec);
    sec->line = w->lineno;
    char *kind = strtok(open, " ");
    if (!kind || (strcmp(kind, "op") && strcmp(kind, "capsule")))
        return policy_refuse(w, "a section is [op NAME...] or [capsule GLOB...]");
    sec->is_op = strcmp(kind, "op") == 0;
    for (char *t = strtok(NULL, " "); t; t = strtok(NULL, " ")) {
        if (strncmp(t, "dtype=", 6) == 0) {
            if (dtype_list(t + 6, &sec->dtypes))
                return policy_refuse(w, "bad dtype list '%s' (f64, f32, f16, bf16)", t + 6);
            continue;
        }
        if (sec->is_op && !ref_op_find(t))
            return policy_refuse(w, "unknown op '%s'", t);
        if (sec->n_pat == CC_POLICY_MAX_PATTERNS || strlen(t) >= sizeof sec->pat[0])
            return policy_refuse(w, "too many or too long names");
        snprintf(sec->pat[sec->n_pat++], sizeof sec->pat[0], "%s",
                 sec->is_op ? ref_op_find(t)->name : t);
    }
    if (!sec->n_pat)
        return policy_refuse(w, "the section names no %s", sec->is_op ? "op" : "capsule");
    return 0;
}

/* platforms KEY... | platforms any */
static int parse_platforms(cc_policy *p, char **tok, int nt, const policy_where *w)
{
    for (int i = 1; i < nt; i++) {
        if (strcmp(tok[i], "any") == 0 && nt == 2)
            break;
        const char *colon = strchr(tok[i], ':');
        if (!colon || colon == tok[i] || !colon[1] || strlen(tok[i]) >= 48 ||
            p->n_platforms == CC_POLICY_MAX_PLATFORMS)
            return policy_refuse(w, "platforms wants platform keys (cpu:amx cpu:avx2 cuda:sm90 "
                                    "...) or any, not '%s'",
                                 tok[i]);
        snprintf(p->platforms[p->n_platforms++], sizeof p->platforms[0], "%s", tok[i]);
    }
    if (nt < 2)
        return policy_refuse(w, "platforms wants platform keys or any");
    return 0;
}

/* require GLOB DTYPES... */
static int parse_require(cc_policy *p, char **tok, int nt, const policy_where *w)
{
    if (nt < 3 || p->n_req == CC_POLICY_MAX_REQUIRE || strlen(tok[1]) >= 80)
        return policy_refuse(w, "require wants a capsule name or glob and dtypes "
                                "(require capcheck.aten_cpu.* f32 f64)");
    cc_policy_require *r = &p->req[p->n_req++];
    snprintf(r->glob, sizeof r->glob, "%s", tok[1]);
    r->line = w->lineno;
    for (int i = 2; i < nt; i++) {
        unsigned m;
        if (dtype_list(tok[i], &m))
            return policy_refuse(w, "bad dtype '%s' (f64, f32, f16, bf16, *)", tok[i]);
        r->dtypes |= m;
    }
    return 0;
}

/* The keys of the whole policy, before its first section (format, libtorch_version,
 * sampled_checks, require_signature, platforms, require). 1 when tok[0] is one of them and was
 * read, 0 when it is not one of them, -1 with msg. */
static int parse_policy_key(cc_policy *p, const cc_policy_section *sec, char **tok, int nt,
                            int *have_format, const policy_where *w)
{
    const char *key = tok[0];
    int global = strcmp(key, "format") == 0 || strcmp(key, "libtorch_version") == 0 ||
                 strcmp(key, "require") == 0 || strcmp(key, "platforms") == 0 ||
                 strcmp(key, "sampled_checks") == 0 || strcmp(key, "require_signature") == 0;
    if (!global)
        return 0;
    if (sec)
        return policy_refuse(w, "'%s' belongs before the first section", key);
    if (strcmp(key, "format") == 0) {
        if (nt != 2 || strcmp(tok[1], CC_POLICY_FORMAT) != 0)
            return policy_refuse(w, "this capcheck reads policy format %s", CC_POLICY_FORMAT);
        *have_format = 1;
    } else if (strcmp(key, "libtorch_version") == 0) {
        if (nt != 2 || strlen(tok[1]) >= sizeof p->libtorch_version)
            return policy_refuse(w, "libtorch_version wants one version string, or any");
        snprintf(p->libtorch_version, sizeof p->libtorch_version, "%s",
                 strcmp(tok[1], "any") == 0 ? "" : tok[1]);
    } else if (strcmp(key, "sampled_checks") == 0) {
        if (nt != 2 || (strcmp(tok[1], "count") && strcmp(tok[1], "ignore")))
            return policy_refuse(w, "sampled_checks is count or ignore");
        p->sampled_checks = strcmp(tok[1], "count") == 0;
    } else if (strcmp(key, "require_signature") == 0) {
        if (two_words(tok, nt, "yes", "no", &p->require_signature))
            return policy_refuse(w, "require_signature is yes or no");
    } else if (strcmp(key, "platforms") == 0) {
        if (parse_platforms(p, tok, nt, w))
            return -1;
    } else if (parse_require(p, tok, nt, w)) {
        return -1;
    }
    return 1;
}

/* A count key (min_repeat 1..1000, min_passing, min_vjp_passing, min_distinct_shapes >= 0)
 * into req; *bit says which requirement it set. */
static int parse_count_key(cc_requirements *req, char **tok, int nt, unsigned *bit,
                           const policy_where *w)
{
    const char *key = tok[0];
    char *end;
    long v = nt == 2 ? strtol(tok[1], &end, 10) : -1;
    if (strcmp(key, "min_repeat") == 0) {
        if (nt != 2 || *end || v < 1 || v > 1000)
            return policy_refuse(w, "min_repeat wants a number of calls from 1 to 1000");
        req->min_repeat = v;
        *bit = CC_REQ_REPEAT;
        return 0;
    }
    if (nt != 2 || *end || v < 0)
        return policy_refuse(w, "%s wants a count", key);
    if (strcmp(key, "min_distinct_shapes") == 0) {
        req->min_distinct_shapes = v;
        *bit = CC_REQ_DISTINCT_SHAPES;
    } else if (key[4] == 'p') {
        req->min_passing = v;
        *bit = CC_REQ_MIN;
    } else {
        req->min_vjp_passing = v;
        *bit = CC_REQ_MIN_VJP;
    }
    return 0;
}

/* A requirement key (of the defaults, or of a section) into req; *bit says which one. */
static int parse_requirement(cc_requirements *req, char **tok, int nt, unsigned *bit,
                             const policy_where *w)
{
    const char *key = tok[0], *bad = NULL;
    int is_class = 1;
    int rc = 0;
    if (strcmp(key, "min_repeat") == 0 || strcmp(key, "min_passing") == 0 ||
        strcmp(key, "min_vjp_passing") == 0 || strcmp(key, "min_distinct_shapes") == 0)
        return parse_count_key(req, tok, nt, bit, w);
    if (strcmp(key, "shape_classes") == 0) {
        *bit = CC_REQ_SHAPES;
        rc = class_list(tok + 1, nt - 1, SHAPES, CC_SHAPE_COUNT, &req->shapes, &bad);
    } else if (strcmp(key, "layout_classes") == 0) {
        *bit = CC_REQ_LAYOUTS;
        /* strided is a per-input layout, never a result's class: a case with explicit
         * strides is "mixed" */
        rc = class_list(tok + 1, nt - 1, LAYOUTS, CC_LAYOUT_STRIDED, &req->layouts, &bad);
    } else if (strcmp(key, "edge_classes") == 0) {
        *bit = CC_REQ_EDGES;
        rc = class_list(tok + 1, nt - 1, EDGES, CC_EDGE_COUNT, &req->edges, &bad);
    } else {
        is_class = 0;
        if (strcmp(key, "allow_unsupported") == 0) {
            *bit = CC_REQ_UNSUPPORTED;
            rc = two_words(tok, nt, "yes", "no", &req->allow_unsupported);
        } else if (strcmp(key, "accumulation") == 0) {
            *bit = CC_REQ_ACCUMULATION;
            rc = two_words(tok, nt, "relaxed", "strict", &req->allow_relaxed);
        } else if (strcmp(key, "suspect") == 0) {
            *bit = CC_REQ_SUSPECT;
            rc = two_words(tok, nt, "fail", "allow", &req->suspect_fails);
        } else if (strcmp(key, "placement_sensitive") == 0) {
            *bit = CC_REQ_PLACEMENT;
            rc = two_words(tok, nt, "fail", "allow", &req->placement_fails);
        } else {
            return policy_refuse(w, "unknown key '%s' (format, libtorch_version, platforms, "
                                    "require, require_signature, min_passing, "
                                    "min_vjp_passing, "
                                    "min_distinct_shapes, shape_classes, "
                                    "layout_classes, edge_classes, allow_unsupported, "
                                    "min_repeat, suspect, placement_sensitive, "
                                    "accumulation)",
                                 key);
        }
    }
    if (!rc)
        return 0;
    if (is_class)
        return policy_refuse(w, "%s: unknown class '%s'", key, bad);
    return policy_refuse(w, "%s is %s", key,
                         *bit == CC_REQ_UNSUPPORTED    ? "yes or no"
                         : *bit == CC_REQ_ACCUMULATION ? "strict or relaxed"
                                                       : "fail or allow");
}

int cc_policy_parse(const char *text, const char *name, cc_policy *p, char *msg, size_t len)
{
    policy_start(p, name);
    policy_where w = {name, 0, msg, len};
    int have_format = 0;
    cc_policy_section *sec = NULL;
    for (const char *s = text; *s;) {
        char line[1024], *tok[40];
        w.lineno++;
        int nt = policy_words(&s, line, sizeof line, tok, 40);
        if (nt < 0)
            return policy_refuse(&w, "line too long");
        if (!nt)
            continue;
        if (!have_format && strcmp(tok[0], "format") != 0)
            return policy_refuse(&w, "a policy starts with 'format %s'", CC_POLICY_FORMAT);
        if (tok[0][0] == '[') {
            if (parse_section_header(p, tok, nt, &w, &sec))
                return -1;
            continue;
        }
        int global = parse_policy_key(p, sec, tok, nt, &have_format, &w);
        if (global < 0)
            return -1;
        if (global)
            continue;
        unsigned bit = 0;
        if (parse_requirement(sec ? &sec->req : &p->defaults, tok, nt, &bit, &w))
            return -1;
        if (sec)
            sec->set |= bit;
    }
    if (!have_format) {
        snprintf(msg, len, "%s: empty policy (it starts with 'format %s')", name,
                 CC_POLICY_FORMAT);
        return -1;
    }
    return 0;
}

extern const char cc_embedded_policy_conf[]; /* reports/policy.conf, built in */

int cc_policy_load(const char *path, cc_policy *p, char *msg, size_t len)
{
    if (!path)
        return cc_policy_parse(cc_embedded_policy_conf, CC_POLICY_BUILT_IN, p, msg, len);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(msg, len, "%s: cannot open the policy: %s", path, strerror(errno));
        return -1;
    }
    char *text = malloc(1 << 20);
    size_t n = text ? fread(text, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    if (!text) {
        snprintf(msg, len, "out of memory");
        return -1;
    }
    text[n] = 0;
    int rc = cc_policy_parse(text, path, p, msg, len);
    free(text);
    return rc;
}

static int section_matches(const cc_policy_section *s, const cc_capsule *c, cc_dtype dtype)
{
    if (s->dtypes && !(s->dtypes & (1u << dtype)))
        return 0;
    for (int i = 0; i < s->n_pat; i++)
        if (s->is_op ? strcmp(s->pat[i], c->op) == 0 : fnmatch(s->pat[i], c->name, 0) == 0)
            return 1;
    return 0;
}

void cc_policy_requirements(const cc_policy *p, const cc_capsule *c, cc_dtype dtype,
                            cc_requirements *out)
{
    *out = p->defaults;
    for (int i = 0; i < p->n_sec; i++) {
        const cc_policy_section *s = &p->sec[i];
        if (!section_matches(s, c, dtype))
            continue;
        if (s->set & CC_REQ_MIN)
            out->min_passing = s->req.min_passing;
        if (s->set & CC_REQ_MIN_VJP)
            out->min_vjp_passing = s->req.min_vjp_passing;
        if (s->set & CC_REQ_SHAPES)
            out->shapes = s->req.shapes;
        if (s->set & CC_REQ_LAYOUTS)
            out->layouts = s->req.layouts;
        if (s->set & CC_REQ_EDGES)
            out->edges = s->req.edges;
        if (s->set & CC_REQ_UNSUPPORTED)
            out->allow_unsupported = s->req.allow_unsupported;
        if (s->set & CC_REQ_REPEAT)
            out->min_repeat = s->req.min_repeat;
        if (s->set & CC_REQ_SUSPECT)
            out->suspect_fails = s->req.suspect_fails;
        if (s->set & CC_REQ_PLACEMENT)
            out->placement_fails = s->req.placement_fails;
        if (s->set & CC_REQ_ACCUMULATION)
            out->allow_relaxed = s->req.allow_relaxed;
        if (s->set & CC_REQ_DISTINCT_SHAPES)
            out->min_distinct_shapes = s->req.min_distinct_shapes;
    }
    if (out->min_distinct_shapes < 0) /* not set anywhere: half the passing cases asked for */
        out->min_distinct_shapes = (out->min_passing + 1) / 2;
}

/* ---- judging ------------------------------------------------------------------------------- */

static void reason(cc_verdict *v, int kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void reason(cc_verdict *v, int kind, const char *fmt, ...)
{
    v->why |= 1u << kind;
    if (v->n_reasons == CC_GATE_MAX_REASONS)
        return;
    va_list ap;
    va_start(ap, fmt);
    v->reason_kind[v->n_reasons] = (unsigned char)kind;
    vsnprintf(v->reasons[v->n_reasons++], sizeof v->reasons[0], fmt, ap);
    va_end(ap);
}

static void missing_classes(cc_verdict *v, const char *what, unsigned want, const long *have,
                            int count, const char *const *names)
{
    char list[256] = "";
    for (int k = 0; k < count; k++)
        if ((want >> k & 1) && have[k] == 0) {
            size_t used = strlen(list);
            snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", names[k]);
        }
    if (list[0])
        reason(v, CC_WHY_CLASSES, "%s not covered by a passing case: %s", what, list);
}

/* Passing checks of inputs already counted (one case under another check= or reference
 * mode): " (...)", or "" when there are none. Repeats are said once, in the gate's header. */
static void folded_note(const cc_capsule_stats *s, char *buf, size_t n)
{
    long more = s->passing_checks - s->passing;
    if (!more)
        snprintf(buf, n, "%s", "");
    else
        snprintf(buf, n, " (%ld more passing check%s of inputs already counted: one case under "
                         "another check= or reference mode)",
                 more, more == 1 ? "" : "s");
}

/* The counts a policy asks for: passing inputs, VJP checks, distinct shapes. */
static void judge_counts(const cc_requirements *q, const cc_capsule_stats *s, cc_verdict *v)
{
    char note[400];
    folded_note(s, note, sizeof note);
    if (s->passing < q->min_passing && (s->vacuous || s->sampled_left_out))
        reason(v, CC_WHY_TOO_FEW,
               "%ld passing cases with a bound that rejects something%s (%ld more passed with a "
               "vacuous bound, never evidence; %ld passing sampled checks this policy does not "
               "count: sampled_checks ignore); the policy wants at least %ld",
               s->passing, note, s->vacuous, s->sampled_left_out, q->min_passing);
    else if (s->passing < q->min_passing)
        reason(v, CC_WHY_TOO_FEW, "%ld passing cases%s; the policy wants at least %ld",
               s->passing, note, q->min_passing);
    const ref_op *op = ref_op_find(v->capsule.op);
    if (op && op->requires_vjp) {
        /* the mode the provider ran (the results say), not the one the catalog states */
        const char *mode = s->vjp_mode;
        if (strcmp(mode, "mixed") == 0)
            reason(v, CC_WHY_VJP, "the results state different VJP modes for one capsule");
        else if (strcmp(mode, "torchLeanTape") != 0 && strcmp(mode, "backendVJP") != 0)
            reason(v, CC_WHY_VJP, "the op requires a VJP but the provider states vjpMode %s",
                   mode[0] ? mode : "(none given)");
        else if (s->vjp_passing < q->min_vjp_passing)
            reason(v, CC_WHY_VJP, "%ld passing cases checked the VJP; the policy wants at least "
                                  "%ld",
                   s->vjp_passing, q->min_vjp_passing);
    }
    if (s->distinct_shapes < q->min_distinct_shapes)
        reason(v, CC_WHY_SHAPES,
               "%ld distinct input shapes among the passing cases; the policy wants at least %ld "
               "(min_distinct_shapes: many seeds of one shape are not many shapes)",
               s->distinct_shapes, q->min_distinct_shapes);
}

/* The command that reruns `line` of v's capsule as the run ran it (provider, environment,
 * --repeat, the verdict's platform): what the gate prints after "first:". */
static void first_repro(const cc_run *run, const cc_verdict *v, const char *line, char *cmd,
                        size_t n)
{
    cc_repro_command_on(&run->repro, line, v->platform, run->prov.platforms, run->prov.n_platforms,
                        cmd, n);
}

/* A reason of the passing cases the policy fails (n of them, `are` what they are) with the
 * command that reruns the first of them. */
static void reason_with_first(const cc_run *run, cc_verdict *v, int kind, long n, const char *are,
                              const char *first_line)
{
    char cmd[2600];
    first_repro(run, v, first_line, cmd, sizeof cmd);
    reason(v, kind, "%ld passing cases %s; first: %.600s", n, are, cmd);
}

static void judge(const cc_policy *pol, const cc_run *run, cc_verdict *v)
{
    cc_policy_requirements(pol, &v->capsule, v->dtype, &v->req);
    const cc_requirements *q = &v->req;
    const cc_capsule_stats *s = v->stats;
    if (!s) {
        if (v->platform[0])
            reason(v, CC_WHY_NO_CASE, "no case on platform %s in the report", v->platform);
        else
            reason(v, CC_WHY_NO_CASE, "no case in the report");
        return;
    }
    long bad = s->counts[CC_RES_FAIL] + cc_count_errors(s->counts);
    if (bad) {
        char cmd[2600];
        first_repro(run, v, s->first_failure, cmd, sizeof cmd);
        reason(v, CC_WHY_NOT_PASSED,
               "%ld of %ld cases did not pass (%ld failed, %ld errors, %ld crashed, %ld timed "
               "out, %ld out-of-bounds, %ld nondeterministic); first: %.600s",
               bad, s->cases, s->counts[CC_RES_FAIL], s->counts[CC_RES_ERROR],
               s->counts[CC_RES_CRASH], s->counts[CC_RES_TIMEOUT],
               s->counts[CC_RES_OUT_OF_BOUNDS], s->counts[CC_RES_NONDETERMINISTIC], cmd);
    }
    if (q->min_repeat > 1 && s->least_repeat && s->least_repeat < q->min_repeat)
        reason(v, CC_WHY_REPEAT,
               "passing cases ran %d provider call%s per check; the policy wants %ld (capcheck "
               "run --repeat %ld)",
               s->least_repeat, s->least_repeat == 1 ? "" : "s", q->min_repeat, q->min_repeat);
    if (s->counts[CC_RES_UNSUPPORTED] && !q->allow_unsupported)
        reason(v, CC_WHY_UNSUPPORTED,
               "%ld cases unsupported by the provider (the policy has allow_unsupported no)",
               s->counts[CC_RES_UNSUPPORTED]);
    if (s->relaxed && !q->allow_relaxed && (v->dtype == CC_F16 || v->dtype == CC_BF16))
        reason(v, CC_WHY_RELAXED,
               "%ld cases were judged with relaxed accumulation (f16/bf16 sums folded in the "
               "dtype); the policy wants strict",
               s->relaxed);
    if (s->suspect && q->suspect_fails)
        reason_with_first(run, v, CC_WHY_SUSPECT, s->suspect,
                          "are suspect (over the probabilistic bound; the policy has suspect "
                          "fail)",
                          s->first_suspect);
    if (s->placement && q->placement_fails)
        reason_with_first(run, v, CC_WHY_PLACEMENT, s->placement,
                          "are placement-sensitive (other bits when --repeat moved their "
                          "buffers; the policy has placement_sensitive fail)",
                          s->first_placement);
    judge_counts(q, s, v);
    missing_classes(v, "shape classes", q->shapes, s->shape_n, CC_SHAPE_COUNT, SHAPES);
    missing_classes(v, "layout classes", q->layouts, s->layout_n, CC_LAYOUT_COUNT, LAYOUTS);
    missing_classes(v, "edge classes", q->edges, s->edge_n, CC_EDGE_COUNT, EDGES);
    v->checked = v->n_reasons == 0;
}

void cc_gate_free(cc_gate *g)
{
    cc_run_free(&g->run);
    cc_evidence_free(&g->ev);
    free(g->v);
    memset(g, 0, sizeof *g);
}

static cc_verdict *add_verdict(cc_gate *g, size_t *cap)
{
    cc_verdict *grown = cc_grow(g->v, g->n, cap, sizeof *grown, 64);
    if (!grown)
        return NULL;
    g->v = grown;
    cc_verdict *v = &g->v[g->n++];
    memset(v, 0, sizeof *v);
    return v;
}

static int required_by(const cc_policy *pol, const char *name, cc_dtype dtype,
                       const char *platform)
{
    int on_platform = pol->n_platforms == 0;
    for (int i = 0; i < pol->n_platforms; i++)
        on_platform |= strcmp(pol->platforms[i], platform) == 0;
    for (int i = 0; on_platform && i < pol->n_req; i++)
        if ((pol->req[i].dtypes >> dtype & 1) && fnmatch(pol->req[i].glob, name, 0) == 0)
            return 1;
    return 0;
}

/* Whether the gate has a verdict on capsule x dtype (on platform, unless platform is NULL). */
static int have_verdict(const cc_gate *g, const char *capsule, cc_dtype dtype,
                        const char *platform)
{
    for (size_t i = 0; i < g->n; i++)
        if (g->v[i].dtype == dtype && strcmp(g->v[i].capsule.name, capsule) == 0 &&
            (!platform || strcmp(g->v[i].platform, platform) == 0))
            return 1;
    return 0;
}

/* A verdict for every capsule x dtype (x platform) the policy requires and the report has no
 * case of, in catalog order; one for a require line that names no capsule. 0, or -1 out of
 * memory. */
static int add_required_missing(const cc_policy *pol, const cc_catalog *cat, cc_gate *g,
                                size_t *cap)
{
    /* required capsules the report has no case of, in catalog order */
    for (int r = 0; r < pol->n_req; r++) {
        int matched = 0;
        for (size_t i = 0; i < g->n; i++)
            matched |= fnmatch(pol->req[r].glob, g->v[i].capsule.name, 0) == 0;
        for (size_t c = 0; c < cat->n; c++) {
            if (fnmatch(pol->req[r].glob, cat->v[c].name, 0) != 0)
                continue;
            matched = 1;
            for (int d = 0; d < CC_DTYPE_COUNT; d++) {
                if (!(pol->req[r].dtypes >> d & 1))
                    continue;
                /* each required platform, or (with none named) any platform at all */
                for (int k = 0; k < (pol->n_platforms ? pol->n_platforms : 1); k++) {
                    const char *pl = pol->n_platforms ? pol->platforms[k] : NULL;
                    if (have_verdict(g, cat->v[c].name, (cc_dtype)d, pl))
                        continue;
                    cc_verdict *v = add_verdict(g, cap);
                    if (!v)
                        return -1;
                    v->capsule = cat->v[c];
                    v->dtype = (cc_dtype)d;
                    snprintf(v->platform, sizeof v->platform, "%s", pl ? pl : "");
                    v->required = 1;
                }
            }
        }
        if (!matched) {
            cc_verdict *v = add_verdict(g, cap);
            if (!v)
                return -1;
            snprintf(v->capsule.name, sizeof v->capsule.name, "%s", pol->req[r].glob);
            v->dtype = CC_DTYPE_COUNT;
            v->required = 1;
            reason(v, CC_WHY_REQUIRE, "%s:%d: require names no capsule of the catalog or the "
                                      "report",
                   pol->name, pol->req[r].line);
        }
    }
    return 0;
}

int cc_gate_run(const cc_policy *pol, const cc_catalog *cat, int n, const char *const *paths,
                cc_gate *g, char *msg, size_t len)
{
    memset(g, 0, sizeof *g);
    if (n < 1) {
        snprintf(msg, len, "no report to gate");
        return -1;
    }
    const unsigned flags = CC_LOAD_SEAL | CC_LOAD_RESULTS | CC_LOAD_PROVENANCE;
    if (n == 1) {
        if (cc_run_load(paths[0], flags, &g->run, msg, len))
            return -1;
        if (g->run.prov.shard.present) {
            snprintf(msg, len,
                     "%s is shard %d/%d of a run: gate all %d shard folders together, or the "
                     "report capcheck merge makes of them",
                     g->run.report_path, g->run.prov.shard.index, g->run.prov.shard.count,
                     g->run.prov.shard.count);
            cc_gate_free(g);
            return -1;
        }
        memcpy(g->report_sha256, g->run.sha256, sizeof g->report_sha256);
        snprintf(g->source, sizeof g->source, "%s", g->run.report_path);
    } else {
        cc_run *s = calloc((size_t)n, sizeof *s);
        if (!s) {
            snprintf(msg, len, "out of memory");
            return -1;
        }
        int loaded = 0, rc = 0;
        for (; loaded < n && rc == 0; loaded++)
            if (cc_run_load(paths[loaded], flags, &s[loaded], msg, len))
                rc = -1;
        if (rc == 0)
            rc = cc_run_merge(s, n, &g->run, msg, len);
        for (int i = 0; i < loaded; i++)
            cc_run_free(&s[i]);
        free(s);
        if (rc)
            return -1;
        cc_report rep;
        if (cc_run_report(&g->run, &rep, msg, len)) {
            cc_gate_free(g);
            return -1;
        }
        cc_report_json_sha256(&rep, g->report_sha256);
        cc_report_free(&rep);
        snprintf(g->source, sizeof g->source, "%d shards merged (the report capcheck merge "
                                               "writes of them)",
                 n);
    }
    /* the provider the report says ran is the one its results name */
    const cc_provider_identity *id = &g->run.prov.provider;
    for (size_t i = 0; id->kind[0] && i < g->run.n_results; i++)
        if (strcmp(g->run.results[i].provider, id->name) != 0) {
            snprintf(msg, len, "%s: its results are of provider '%s', its provenance names '%s'",
                     g->source, g->run.results[i].provider, id->name);
            cc_gate_free(g);
            return -1;
        }
    const char *have = g->run.prov.libtorch;
    if (pol->libtorch_version[0] && strcmp(have, pol->libtorch_version) != 0) {
        if (have[0])
            snprintf(msg, len, "%s is from libtorch %s; the policy %s requires libtorch %s",
                     g->source, have, pol->name, pol->libtorch_version);
        else
            snprintf(msg, len,
                     "%s names no libtorch version: its provider is %s%s (%s), and only the "
                     "built-in aten provider states the libtorch it loaded; the policy %s "
                     "requires libtorch %s (libtorch_version: a policy with libtorch_version "
                     "any, given with --policy, judges this run)",
                     g->source, id->kind[0] && strcmp(id->kind, "builtin") ? "the plugin " : "",
                     id->kind[0] ? id->name
                                 : g->run.n_results ? g->run.results[0].provider : "not named",
                     g->run.provider_description, pol->name,
                     pol->libtorch_version);
        cc_gate_free(g);
        return -1;
    }
    if (cc_evidence_collect(&g->run, cat, pol->sampled_checks, &g->ev, msg, len)) {
        cc_gate_free(g);
        return -1;
    }
    size_t cap = 0;
    for (size_t i = 0; i < g->ev.n; i++) {
        cc_verdict *v = add_verdict(g, &cap);
        if (!v)
            goto oom;
        v->capsule = g->ev.v[i].capsule;
        v->dtype = g->ev.v[i].dtype;
        memcpy(v->platform, g->ev.v[i].platform, sizeof v->platform);
        v->stats = &g->ev.v[i];
        v->required = required_by(pol, v->capsule.name, v->dtype, v->platform);
    }
    if (add_required_missing(pol, cat, g, &cap))
        goto oom;
    for (size_t i = 0; i < g->n; i++) {
        cc_verdict *v = &g->v[i];
        if (v->dtype != CC_DTYPE_COUNT)
            judge(pol, &g->run, v);
        g->n_checked += v->checked;
        g->n_required += v->required;
        g->n_required_checked += v->required && v->checked;
    }
    if (pol->n_req)
        g->exit_code = g->n_required_checked == g->n_required ? 0 : 1;
    else
        g->exit_code = g->ev.n > 0 && (size_t)g->n_checked == g->n ? 0 : 1;
    return 0;
oom:
    snprintf(msg, len, "out of memory");
    cc_gate_free(g);
    return -1;
}

size_t cc_gate_capsule(const cc_gate *g, size_t i, const cc_verdict **out, size_t max)
{
    if (!g->v[i].stats)
        return 0;
    const char *name = g->v[i].capsule.name;
    for (size_t j = 0; j < i; j++)
        if (g->v[j].stats && strcmp(g->v[j].capsule.name, name) == 0)
            return 0;
    size_t n = 0;
    for (size_t j = i; j < g->n && n < max; j++)
        if (g->v[j].stats && strcmp(g->v[j].capsule.name, name) == 0)
            out[n++] = &g->v[j];
    return n;
}

void cc_gate_suite_name(const cc_gate *g, char *buf, size_t n)
{
    if (g->signer[0])
        snprintf(buf, n, "capcheck run signed by %s manifest sha256:%s", g->signer,
                 g->manifest_sha256);
    else
        snprintf(buf, n, "capcheck report sha256:%s", g->report_sha256);
}

/* ---- printing ------------------------------------------------------------------------------ */

static void class_summary(FILE *f, const char *what, const long *n, int count,
                          const char *const *names)
{
    fprintf(f, "%s ", what);
    int any = 0;
    for (int k = 0; k < count; k++)
        if (n[k])
            fprintf(f, "%s%s", any++ ? "," : "", names[k]);
    if (!any)
        fputs("none", f);
}

static const char *or_none(const char *s)
{
    return s && s[0] ? s : "none";
}

/* One verdict's lines: checked with its evidence, or trustedExternal with each reason. */
static void print_verdict(const cc_gate *g, const cc_verdict *v, FILE *f)
{
    char dt[80];
    snprintf(dt, sizeof dt, "%s%s%s", v->dtype == CC_DTYPE_COUNT ? "*" : cc_dtype_name(v->dtype),
             v->platform[0] ? " on " : "", v->platform);
    if (v->checked) {
        const cc_capsule_stats *s = v->stats;
        const ref_op *op = ref_op_find(v->capsule.op);
        char vjp[48];
        if (op && !op->requires_vjp && !s->vjp_passing)
            snprintf(vjp, sizeof vjp, "no VJP required");
        else
            snprintf(vjp, sizeof vjp, "VJP %ld", s->vjp_passing);
        fprintf(f, "checked          %s %s%s: %ld passing of %ld, %s, worst bound ratio %.4g; ",
                v->capsule.name, dt, v->required ? " (required)" : "", s->counts[CC_RES_PASS],
                s->cases, vjp, s->worst_ratio);
        class_summary(f, "shapes", s->shape_n, CC_SHAPE_COUNT, SHAPES);
        fputs("; ", f);
        class_summary(f, "layouts", s->layout_n, CC_LAYOUT_COUNT, LAYOUTS);
        fputs("; ", f);
        class_summary(f, "edges", s->edge_n, CC_EDGE_COUNT, EDGES);
        fprintf(f, "; distinct: %ld shapes, %ld layouts, %d edge classes; seed %llu; report "
                   "sha256:%.16s\n",
                s->distinct_shapes, s->distinct_layouts, cc_evidence_edge_classes(s),
                g->run.base_seed, g->report_sha256);
        if (s->placement) { /* allowed (placement_sensitive allow), never left unsaid */
            char cmd[2600];
            first_repro(&g->run, v, s->first_placement, cmd, sizeof cmd);
            fprintf(f, "  placement-sensitive: %ld passing cases gave other bits when --repeat "
                       "moved their buffers (allowed: placement_sensitive allow); first: %s\n",
                    s->placement, cmd);
        }
        return;
    }
    fprintf(f, "trustedExternal  %s %s%s (catalog: %s):\n", v->capsule.name, dt,
            v->required ? " (required)" : "", v->capsule.trust[0] ? v->capsule.trust : "-");
    for (int k = 0; k < v->n_reasons; k++)
        fprintf(f, "  - %s\n", v->reasons[k]);
    const cc_capsule_stats *s = v->stats;
    if (s)
        fprintf(f, "  evidence: %ld passing of %ld cases; distinct: %ld shapes, %ld layouts, %d "
                   "edge classes\n",
                s->passing, s->cases, s->distinct_shapes, s->distinct_layouts,
                cc_evidence_edge_classes(s));
}

void cc_gate_print(const cc_gate *g, const cc_policy *pol, int all, FILE *f)
{
    const cc_run *r = &g->run;
    const cc_provenance *p = &r->prov;
    /* the verdict first: what a reader (and a CI log's last screen) needs */
    if (pol->n_req)
        fprintf(f, "capcheck gate: %d of the %d required capsule x dtype x platform checked (%d "
                   "of %zu in all): exit %d\n",
                g->n_required_checked, g->n_required, g->n_checked, g->n, g->exit_code);
    else
        fprintf(f, "capcheck gate: %d of %zu capsule x dtype x platform checked (no require "
                   "lines: every one must be): exit %d\n",
                g->n_checked, g->n, g->exit_code);
    fprintf(f, "capcheck gate: %s: sha256 %s, %ld cases, results digest matches\n", g->source,
            g->report_sha256, r->cases);
    for (const char *s = g->signature_note; *s;) { /* who signed it, or that no one did */
        size_t k = strcspn(s, "\n");
        fprintf(f, "capcheck gate: %.*s\n", (int)k, s);
        s += k + (s[k] == '\n');
    }
    if (g->ev.repeats) {
        char said[64];
        cc_repeats_sentence(g->ev.repeats, said, sizeof said);
        fprintf(f, "capcheck gate: %s: %ld distinct cases, each counted once; %ld disagreed "
                   "with their first run (nondeterministic)\n",
                said, g->ev.distinct, g->ev.disagreeing);
    }
    fprintf(f, "capcheck gate: provider %s\n", r->provider_description);
    fprintf(f, "capcheck gate: capcheck %s commit %s; libtorch %s; cuda %s; cudnn %s; gpu %s; "
               "cpu %s; tf32 %s; deterministic %s; base seed %llu\n",
            p->capcheck_version, p->git_commit, or_none(p->libtorch), or_none(p->cuda),
            or_none(p->cudnn), or_none(p->gpu), p->cpu_model,
            p->tf32[0] ? p->tf32 : "not stated",
            p->deterministic[0] ? p->deterministic : "not stated", r->base_seed);
    for (int i = 0; i < p->n_platforms; i++) {
        char facts[1024];
        cc_platform_summary(&p->platforms[i], facts, sizeof facts);
        fprintf(f, "capcheck gate: platform %s: %s\n", p->platforms[i].key, facts);
    }
    fprintf(f, "capcheck gate: policy %s (libtorch %s; platforms ", pol->name,
            pol->libtorch_version[0] ? pol->libtorch_version : "any");
    for (int i = 0; i < pol->n_platforms; i++)
        fprintf(f, "%s%s", i ? " " : "", pol->platforms[i]);
    fprintf(f, "%s)\n", pol->n_platforms ? "" : "any");
    /* then what holds the gate back (a required capsule, or any one when none is required);
     * --all: every capsule x dtype x platform */
    size_t left_out = 0;
    for (size_t i = 0; i < g->n; i++) {
        const cc_verdict *v = &g->v[i];
        if (all || (!v->checked && (v->required || !pol->n_req)))
            print_verdict(g, v, f);
        else
            left_out++;
    }
    if (left_out)
        fprintf(f, "capcheck gate: %zu more capsule x dtype x platform (%s) not listed: --all "
                   "lists every one\n",
                left_out, pol->n_req ? "checked, or not required" : "checked");
}

const char *cc_gate_unit(const cc_gate *g)
{
    for (size_t i = 0; i < g->n; i++)
        if (g->v[i].platform[0])
            return "capsule x dtype x platform";
    return "capsule x dtype";
}

/* How a kind of reason reads after "N of the M held back ...". */
static const char *const WHY_SAYS[CC_WHY_COUNT] = {
    [CC_WHY_NO_CASE] = "have no case in the report",
    [CC_WHY_NOT_PASSED] = "have a case that did not pass",
    [CC_WHY_REPEAT] = "ran fewer provider calls per check than the policy's min_repeat",
    [CC_WHY_UNSUPPORTED] = "have cases the provider does not support",
    [CC_WHY_RELAXED] = "were judged with relaxed accumulation",
    [CC_WHY_SUSPECT] = "have suspect passing cases (suspect fail)",
    [CC_WHY_PLACEMENT] = "have placement-sensitive passing cases (placement_sensitive fail)",
    [CC_WHY_TOO_FEW] = "have fewer passing cases than the policy's min_passing",
    [CC_WHY_VJP] = "lack the VJP evidence the policy wants",
    [CC_WHY_SHAPES] = "have fewer distinct shapes than the policy's min_distinct_shapes",
    [CC_WHY_CLASSES] = "leave shape, layout or edge classes uncovered",
    [CC_WHY_REQUIRE] = "are require lines that name no capsule",
};

int cc_gate_line(const cc_gate *g, const cc_policy *pol, char *buf, size_t n)
{
    int used = snprintf(buf, n, "gate: %d of %zu %s checked under %s", g->n_checked, g->n,
                        cc_gate_unit(g), pol->name);
    if (pol->n_req)
        used += snprintf(buf + used, n > (size_t)used ? n - (size_t)used : 0,
                         " (%d of the %d required)", g->n_required_checked, g->n_required);
    /* the verdicts that hold the exit code back, and the commonest kind of reason among them */
    long held = 0, of_kind[CC_WHY_COUNT] = {0};
    const cc_verdict *first[CC_WHY_COUNT] = {0};
    for (size_t i = 0; i < g->n; i++) {
        const cc_verdict *v = &g->v[i];
        if (v->checked || (pol->n_req && !v->required))
            continue;
        held++;
        for (int k = 0; k < CC_WHY_COUNT; k++)
            if (v->why >> k & 1) {
                of_kind[k]++;
                first[k] = first[k] ? first[k] : v;
            }
    }
    int top = 0;
    for (int k = 1; k < CC_WHY_COUNT; k++)
        if (of_kind[k] > of_kind[top])
            top = k;
    if (!held || !first[top] || (size_t)used >= n)
        return -1;
    const cc_verdict *v = first[top];
    const char *reason = "";
    for (int k = 0; k < v->n_reasons && !reason[0]; k++) /* its reason of that kind */
        if (v->reason_kind[k] == top)
            reason = v->reasons[k];
    snprintf(buf + used, n - (size_t)used, ": %ld of the %ld held back %s (the first, %s %s%s%s: "
                                           "%.700s)",
             of_kind[top], held, WHY_SAYS[top], v->capsule.name,
             v->dtype == CC_DTYPE_COUNT ? "*" : cc_dtype_name(v->dtype),
             v->platform[0] ? " on " : "", v->platform, reason);
    return top;
}

int cc_gate_why_is_thin(int kind)
{
    return kind == CC_WHY_NO_CASE || kind == CC_WHY_TOO_FEW || kind == CC_WHY_VJP ||
           kind == CC_WHY_SHAPES || kind == CC_WHY_CLASSES;
}
