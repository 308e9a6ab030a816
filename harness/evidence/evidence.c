#include "harness/evidence/evidence.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/grow.h"
#include "core/keyset.h"
#include "harness/report/identity.h"

const char *const cc_shape_class_names[CC_SHAPE_COUNT] = {"scalar", "vector", "matrix",
                                                          "high-rank", "empty"};

void cc_case_line_classes(const char *line, unsigned *shapes, unsigned *edges)
{
    cc_case c;
    cc_parse_error err;
    cc_case_defaults def = {CC_CPU, 0};
    *shapes = *edges = 0;
    if (cc_case_parse(line, &def, &c, &err))
        return;
    *edges = c.edges;
    ref_shape out;
    ref_err e;
    int have_out = c.op->shape(&c.params, c.n_in, c.shape, &out, &e) == REF_OK;
    const ref_shape *primary = c.n_in > 0 ? &c.shape[0] : have_out ? &out : NULL;
    if (!primary)
        return;
    unsigned m = 1u << (primary->rank == 0   ? CC_SHAPE_SCALAR
                        : primary->rank == 1 ? CC_SHAPE_VECTOR
                        : primary->rank == 2 ? CC_SHAPE_MATRIX
                                             : CC_SHAPE_HIGHRANK);
    int empty = have_out && ref_numel(&out) == 0;
    for (int i = 0; i < c.n_in; i++)
        empty |= ref_numel(&c.shape[i]) == 0;
    if (empty)
        m |= 1u << CC_SHAPE_EMPTY;
    *shapes = m;
}

void cc_evidence_free(cc_evidence *ev)
{
    free(ev->v);
    memset(ev, 0, sizeof *ev);
}

const cc_capsule_stats *cc_evidence_find(const cc_evidence *ev, const char *capsule,
                                         cc_dtype dtype, const char *platform)
{
    for (size_t i = 0; i < ev->n; i++)
        if (ev->v[i].dtype == dtype && strcmp(ev->v[i].capsule.name, capsule) == 0 &&
            strcmp(ev->v[i].platform, platform) == 0)
            return &ev->v[i];
    return NULL;
}

int cc_list_next(const char **p, char *buf, size_t n)
{
    if (!**p)
        return 0;
    size_t item = strcspn(*p, ",");
    snprintf(buf, n, "%.*s", (int)item, *p);
    *p += item;
    while (**p == ',' || **p == ' ')
        (*p)++;
    return 1;
}

void cc_list_add(char *list, size_t n, const char *items)
{
    char item[128], have[128];
    for (const char *p = items; cc_list_next(&p, item, sizeof item);) {
        int seen = 0;
        for (const char *q = list; !seen && cc_list_next(&q, have, sizeof have);)
            seen = strcmp(have, item) == 0;
        size_t used = strlen(list);
        if (!seen && item[0])
            snprintf(list + used, n - used, "%s%s", used ? ", " : "", item);
    }
}

int cc_evidence_edge_classes(const cc_capsule_stats *s)
{
    int n = 0;
    for (int k = 0; k < CC_EDGE_COUNT; k++)
        n += s->edge_n[k] > 0;
    return n;
}

/* The value of " KEY=" in a case line (its first), or "" when the line has none. */
static void line_value(const char *line, const char *key, char *buf, size_t n)
{
    char pat[16];
    snprintf(pat, sizeof pat, " %s=", key);
    const char *at = strstr(line, pat);
    if (!at) {
        snprintf(buf, n, "%s", "");
        return;
    }
    at += strlen(pat);
    snprintf(buf, n, "%.*s", (int)strcspn(at, " "), at);
}

/* What one capsule x dtype x platform has seen once: its passing inputs, shapes, layouts, the
 * inputs whose forward and VJP a passing case checked. Keys carry the stats' index. */
typedef struct {
    cc_keyset inputs, shapes, layouts, fwd, vjp;
} seen_sets;

/* 1 when key (prefixed by the stats' index) is new to set, 0 when seen, -1 out of memory. */
static int first_time(cc_keyset *set, size_t stats, const char *key)
{
    char k[CC_CASE_LINE_MAX + 200];
    int n = snprintf(k, sizeof k, "%zu\t%s", stats, key), added;
    return cc_keyset_add(set, k, n > 0 && (size_t)n < sizeof k ? (size_t)n : sizeof k - 1,
                         &added) < 0
               ? -1
               : added;
}

/* A passing, non-vacuous case of s (index si) as evidence: counted once per inputs, its
 * shapes, layout and classes noted. 0, or -1 out of memory. */
static int count_passing(cc_capsule_stats *s, size_t si, const cc_result *r, seen_sets *seen)
{
    char key[CC_CASE_LINE_MAX + 160], shape[CC_CASE_LINE_MAX], layout[CC_CASE_LINE_MAX];
    cc_case_inputs_key(r, key, sizeof key);
    line_value(r->line, "in", shape, sizeof shape);
    if (!shape[0]) /* ops without inputs: the output's shape */
        line_value(r->line, "to", shape, sizeof shape);
    line_value(r->line, "layout", layout, sizeof layout);
    int in = first_time(&seen->inputs, si, key), sh = first_time(&seen->shapes, si, shape),
        la = first_time(&seen->layouts, si, layout),
        fw = r->checked_fwd ? first_time(&seen->fwd, si, key) : 0,
        vj = r->checked_vjp ? first_time(&seen->vjp, si, key) : 0;
    if (in < 0 || sh < 0 || la < 0 || fw < 0 || vj < 0)
        return -1;
    s->passing_checks++;
    s->passing += in;
    s->distinct_shapes += sh;
    s->distinct_layouts += la;
    s->fwd_passing += fw;
    s->vjp_passing += vj;
    unsigned m, edges;
    cc_case_line_classes(r->line, &m, &edges);
    for (int k = 0; k < CC_SHAPE_COUNT; k++)
        s->shape_n[k] += (m >> k) & 1;
    for (int k = 0; k < CC_EDGE_COUNT; k++)
        s->edge_n[k] += (edges >> k) & 1;
    s->layout_n[r->layout]++;
    return 0;
}

/* The stats of r's capsule x dtype x platform, added when new; NULL out of memory. */
static cc_capsule_stats *stats_of(cc_evidence *ev, const cc_run *run, const cc_catalog *cat,
                                  const cc_result *r)
{
    cc_capsule adhoc;
    const cc_capsule *cap = cc_catalog_resolve(cat, &run->prov.provider, r->provider,
                                               cc_device_name(r->device), r->op, r->vjp_mode,
                                               &adhoc);
    cc_capsule_stats *s = (cc_capsule_stats *)cc_evidence_find(ev, cap->name, r->dtype,
                                                               r->platform);
    if (s)
        return s;
    cc_capsule_stats *grown = cc_grow(ev->v, ev->n, &ev->cap, sizeof *grown, 32);
    if (!grown)
        return NULL;
    ev->v = grown;
    s = &ev->v[ev->n++];
    memset(s, 0, sizeof *s);
    s->capsule = *cap;
    s->dtype = r->dtype;
    memcpy(s->platform, r->platform, sizeof s->platform);
    snprintf(s->vjp_mode, sizeof s->vjp_mode, "%s", r->vjp_mode);
    return s;
}

/* One case (the first record of its identity, status its folded status) into s. 0, or -1. */
static int count_case(cc_capsule_stats *s, size_t si, const cc_result *r,
                      cc_result_status status, const char *why, int count_sampled,
                      seen_sets *seen)
{
    s->cases++;
    if (r->sampled && status == CC_RES_PASS && !count_sampled) {
        s->sampled_left_out++;
        return 0;
    }
    s->counts[status]++;
    s->relaxed += r->accumulation == CC_ACC_RELAXED;
    if (!s->worst_line[0] || r->worst_ratio > s->worst_ratio ||
        (isnan(r->worst_ratio) && !isnan(s->worst_ratio))) {
        s->worst_ratio = r->worst_ratio;
        snprintf(s->worst_line, sizeof s->worst_line, "%s", r->line);
    }
    if (status != CC_RES_PASS) {
        if (!s->first_failure[0] && status != CC_RES_UNSUPPORTED) {
            snprintf(s->first_failure, sizeof s->first_failure, "%s", r->line);
            snprintf(s->first_failure_msg, sizeof s->first_failure_msg, "%s",
                     why[0] ? why : r->message);
        }
        return 0;
    }
    int calls = r->repeat > 1 ? r->repeat : 1;
    if (!s->least_repeat || calls < s->least_repeat)
        s->least_repeat = calls;
    if (r->suspect && !s->suspect++)
        snprintf(s->first_suspect, sizeof s->first_suspect, "%s", r->line);
    if (r->vacuous) {
        s->vacuous++;
        return 0;
    }
    return count_passing(s, si, r, seen);
}

int cc_evidence_collect(const cc_run *run, const cc_catalog *cat, int count_sampled,
                        cc_evidence *ev, char *msg, size_t len)
{
    memset(ev, 0, sizeof *ev);
    cc_folded fold;
    seen_sets seen;
    memset(&seen, 0, sizeof seen);
    int rc = cc_fold_run(run->results, run->n_results, run->prov.deterministic, &fold);
    for (size_t i = 0; rc == 0 && i < run->n_results; i++) {
        const cc_result *r = &run->results[i];
        cc_capsule_stats *s = stats_of(ev, run, cat, r);
        if (!s) {
            rc = -1;
            break;
        }
        if (strcmp(s->vjp_mode, r->vjp_mode) != 0)
            snprintf(s->vjp_mode, sizeof s->vjp_mode, "mixed");
        if (fold.first[i] != i)
            s->repeats++;
        else
            rc = count_case(s, (size_t)(s - ev->v), r, cc_folded_status(&fold, run->results, i),
                            cc_folded_why(&fold, i), count_sampled, &seen);
    }
    ev->distinct = fold.distinct;
    ev->repeats = fold.repeats;
    ev->disagreeing = fold.disagreeing;
    cc_folded_free(&fold);
    cc_keyset_free(&seen.inputs);
    cc_keyset_free(&seen.shapes);
    cc_keyset_free(&seen.layouts);
    cc_keyset_free(&seen.fwd);
    cc_keyset_free(&seen.vjp);
    if (rc) {
        snprintf(msg, len, "out of memory");
        cc_evidence_free(ev);
    }
    return rc;
}
