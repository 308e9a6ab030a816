#include "harness/evidence/evidence.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/grow.h"

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

int cc_evidence_collect(const cc_run *run, const cc_catalog *cat, int count_sampled,
                        cc_evidence *ev, char *msg, size_t len)
{
    memset(ev, 0, sizeof *ev);
    for (size_t i = 0; i < run->n_results; i++) {
        const cc_result *r = &run->results[i];
        cc_capsule adhoc;
        const cc_capsule *cap =
            cc_catalog_resolve(cat, &run->prov.provider, r->provider, cc_device_name(r->device),
                               r->op, r->vjp_mode, &adhoc);
        cc_capsule_stats *s =
            (cc_capsule_stats *)cc_evidence_find(ev, cap->name, r->dtype, r->platform);
        if (!s) {
            cc_capsule_stats *grown = cc_grow(ev->v, ev->n, &ev->cap, sizeof *grown, 32);
            if (!grown) {
                snprintf(msg, len, "out of memory");
                cc_evidence_free(ev);
                return -1;
            }
            ev->v = grown;
            s = &ev->v[ev->n++];
            memset(s, 0, sizeof *s);
            s->capsule = *cap;
            s->dtype = r->dtype;
            memcpy(s->platform, r->platform, sizeof s->platform);
            snprintf(s->vjp_mode, sizeof s->vjp_mode, "%s", r->vjp_mode);
        }
        if (strcmp(s->vjp_mode, r->vjp_mode) != 0)
            snprintf(s->vjp_mode, sizeof s->vjp_mode, "mixed");
        s->cases++;
        if (r->sampled && r->status == CC_RES_PASS && !count_sampled) {
            s->sampled_left_out++;
            continue;
        }
        s->counts[r->status]++;
        s->relaxed += r->accumulation == CC_ACC_RELAXED;
        if (!s->worst_line[0] || r->worst_ratio > s->worst_ratio ||
            (isnan(r->worst_ratio) && !isnan(s->worst_ratio))) {
            s->worst_ratio = r->worst_ratio;
            snprintf(s->worst_line, sizeof s->worst_line, "%s", r->line);
        }
        if (r->status != CC_RES_PASS) {
            if (!s->first_failure[0] && r->status != CC_RES_UNSUPPORTED) {
                snprintf(s->first_failure, sizeof s->first_failure, "%s", r->line);
                snprintf(s->first_failure_msg, sizeof s->first_failure_msg, "%s", r->message);
            }
            continue;
        }
        int calls = r->repeat > 1 ? r->repeat : 1;
        if (!s->least_repeat || calls < s->least_repeat)
            s->least_repeat = calls;
        if (r->suspect && !s->suspect++)
            snprintf(s->first_suspect, sizeof s->first_suspect, "%s", r->line);
        if (r->vacuous) {
            s->vacuous++;
            continue;
        }
        s->fwd_passing += r->checked_fwd != 0;
        s->vjp_passing += r->checked_vjp != 0;
        unsigned m, edges;
        cc_case_line_classes(r->line, &m, &edges);
        for (int k = 0; k < CC_SHAPE_COUNT; k++)
            s->shape_n[k] += (m >> k) & 1;
        for (int k = 0; k < CC_EDGE_COUNT; k++)
            s->edge_n[k] += (edges >> k) & 1;
        s->layout_n[r->layout]++;
    }
    return 0;
}
