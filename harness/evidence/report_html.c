#define _XOPEN_SOURCE 700 /* realpath */
#include "harness/evidence/report_html.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness/report/capsules.h"
#include "harness/evidence/gate.h"
#include "harness/report/html.h"
#include "core/json.h"
#include "harness/evidence/merge.h"
#include "harness/report/repro.h"
#include "harness/report/result_extras.h"

/* ---- how statuses look ---------------------------------------------------------------------- */

/* One entry per status: its badge class and whether it counts as not passing. A status not in
 * the table (a newer writer's) is shown by name, as not passing. */
static const struct {
    const char *name, *cls, *means;
    int bad;
} STATUSES[] = {
    {"pass", "ok", "every element within its bound", 0},
    {"fail", "bad", "an element over its bound, or a NaN/Inf mismatch", 1},
    {"unsupported", "skip", "the provider does not implement the op, dtype or device", 0},
    {"error", "bad", "the provider raised an error, or the case could not be built", 1},
    {"crash", "bad", "the worker died from a signal", 1},
    {"timeout", "bad", "the case ran past its time limit", 1},
    {"out-of-bounds", "bad", "the provider wrote outside its output", 1},
    {"nondeterministic", "bad", "the same inputs gave different outputs", 1},
};
#define N_STATUSES (sizeof STATUSES / sizeof STATUSES[0])

static int status_style(cc_result_status s)
{
    const char *name = cc_result_status_name(s);
    for (size_t k = 0; k < N_STATUSES; k++)
        if (strcmp(STATUSES[k].name, name) == 0)
            return (int)k;
    return -1;
}

static int status_bad(cc_result_status s)
{
    int k = status_style(s);
    return k < 0 || STATUSES[k].bad;
}

static void status_badge(FILE *f, cc_result_status s)
{
    int k = status_style(s);
    fprintf(f, "<span class=\"st %s\">", k < 0 ? "bad" : STATUSES[k].cls);
    cc_html_text(f, cc_result_status_name(s));
    fputs("</span>", f);
}

static int compared(const cc_result *r)
{
    return r->checked_fwd || r->checked_vjp;
}

/* a worse than b: NaN is the worst ratio, then the larger */
static int ratio_worse(double a, double b)
{
    return !isnan(b) && (isnan(a) || a > b);
}

/* ---- the histogram of bound ratios ------------------------------------------------------- */

/* Bins of a compared case's worst bound ratio: exact, under 1e-6, one per decade up to 1 (the
 * bound: [0.1, 1] is the last within it), (1, 10], over 10 or NaN. */
#define N_BINS 10
#define FIRST_OVER_BIN 8
static const char *const BIN_LABELS[N_BINS] = {"0",         "<1e-6",     "1e-6..1e-5",
                                               "1e-5..1e-4", "1e-4..1e-3", "1e-3..0.01",
                                               "0.01..0.1", "0.1..1",    "1..10",
                                               ">10 or NaN"};

static int ratio_bin(double r)
{
    if (r == 0)
        return 0;
    if (!(r <= 10))
        return N_BINS - 1;
    if (r > 1)
        return FIRST_OVER_BIN;
    if (r < 1e-6)
        return 1;
    int b = 2 + (int)floor(log10(r) + 6);
    return b < 2 ? 2 : b > 7 ? 7 : b;
}

/* ---- the page's model ----------------------------------------------------------------------- */

/* A column group: one provider on one platform (or device, when results name no platform). */
typedef struct {
    char provider[32], where[64];
    unsigned dtypes; /* bit per cc_dtype present */
} group;

typedef struct {
    group g;
    cc_dtype dtype;
} column;

/* One op x column: its cases. */
typedef struct {
    long cases, bad, counts[CC_RES_COUNT], flags[CC_RESULT_FLAG_COUNT];
    long compared, bins[N_BINS];
    double worst;
    long worst_at; /* result index of the worst compared case; -1: none */
    char capsule[80];
} cell;

#define MAX_GROUPS 64
#define MAX_OPS 128
#define MAX_FAILURES_SHOWN 400
#define MAX_FAILURES_PER_CELL 3

typedef struct {
    const char *dir;
    const cc_run *run;
    cc_result_extras x;
    const cc_gate *gate; /* NULL: no verdicts (gate_note says why) */
    const cc_policy *policy;
    char gate_note[1200];
    int n_ops, n_groups, n_cols;
    char ops[MAX_OPS][32];
    group groups[MAX_GROUPS];
    column cols[MAX_GROUPS * CC_DTYPE_COUNT];
    cell *cells;    /* n_ops x n_cols */
    int *cell_of;   /* per result: its cell (-1: a repeat, folded into its case) */
    cc_folded fold; /* each case once (harness/report/identity.h) */
    long totals[CC_RES_COUNT], flag_totals[CC_RESULT_FLAG_COUNT], bad_total, bad_cells;
} page;

static void where_of(const page *p, size_t i, char *buf, size_t n)
{
    const char *platform = cc_result_extras_platform(&p->x, i);
    snprintf(buf, n, "%s", platform ? platform : cc_device_name(p->run->results[i].device));
}

static int group_index(page *p, const cc_result *r, const char *where)
{
    for (int g = 0; g < p->n_groups; g++)
        if (!strcmp(p->groups[g].provider, r->provider) && !strcmp(p->groups[g].where, where))
            return g;
    if (p->n_groups == MAX_GROUPS)
        return MAX_GROUPS - 1; /* more than 64 platforms: the last column group takes the rest */
    group *g = &p->groups[p->n_groups];
    snprintf(g->provider, sizeof g->provider, "%s", r->provider);
    snprintf(g->where, sizeof g->where, "%s", where);
    return p->n_groups++;
}

static int op_index(page *p, const char *op)
{
    for (int k = 0; k < p->n_ops; k++)
        if (!strcmp(p->ops[k], op))
            return k;
    if (p->n_ops == MAX_OPS)
        return MAX_OPS - 1;
    snprintf(p->ops[p->n_ops], sizeof p->ops[0], "%s", op);
    return p->n_ops++;
}

static int column_index(const page *p, int g, cc_dtype d)
{
    for (int c = 0; c < p->n_cols; c++)
        if (!strcmp(p->cols[c].g.provider, p->groups[g].provider) &&
            !strcmp(p->cols[c].g.where, p->groups[g].where) && p->cols[c].dtype == d)
            return c;
    return -1;
}

/* Whether result i is a case (the first record of its identity), not a repeat of one. */
static int is_case(const page *p, size_t i)
{
    return p->fold.first[i] == i;
}

/* The status case i stands for (nondeterministic when its repeats disagreed). */
static cc_result_status status_of(const page *p, size_t i)
{
    return cc_folded_status(&p->fold, p->run->results, i);
}

/* Two passes: the ops, column groups and dtypes; then every case into its cell. */
static int build(page *p, const cc_catalog *cat)
{
    const cc_run *run = p->run;
    size_t n = run->n_results;
    if (cc_fold_run(run->results, n, run->prov.deterministic, &p->fold))
        return -1;
    int *grp = malloc((n ? n : 1) * sizeof *grp), *opk = malloc((n ? n : 1) * sizeof *opk);
    p->cell_of = malloc((n ? n : 1) * sizeof *p->cell_of);
    if (!grp || !opk || !p->cell_of) {
        free(grp);
        free(opk);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const cc_result *r = &run->results[i];
        char where[64];
        where_of(p, i, where, sizeof where);
        grp[i] = group_index(p, r, where);
        opk[i] = op_index(p, r->op);
        p->groups[grp[i]].dtypes |= 1u << r->dtype;
    }
    for (int g = 0; g < p->n_groups; g++)
        for (int d = 0; d < CC_DTYPE_COUNT; d++)
            if (p->groups[g].dtypes >> d & 1)
                p->cols[p->n_cols++] = (column){p->groups[g], (cc_dtype)d};
    size_t n_cells = (size_t)p->n_ops * (size_t)p->n_cols;
    p->cells = calloc(n_cells ? n_cells : 1, sizeof *p->cells);
    if (!p->cells) {
        free(grp);
        free(opk);
        return -1;
    }
    for (int k = 0; k < p->n_ops * p->n_cols; k++)
        p->cells[k].worst_at = -1;
    for (size_t i = 0; i < n; i++) {
        const cc_result *r = &run->results[i];
        int c = column_index(p, grp[i], r->dtype);
        int at = opk[i] * p->n_cols + c;
        cell *e = &p->cells[at];
        p->cell_of[i] = is_case(p, i) ? at : -1;
        if (!is_case(p, i))
            continue;
        cc_result_status status = status_of(p, i);
        if (!e->cases) {
            cc_capsule adhoc;
            const cc_capsule *cap =
                cc_catalog_resolve(cat, &run->prov.provider, r->provider,
                                   cc_device_name(r->device), r->op, r->vjp_mode, &adhoc);
            snprintf(e->capsule, sizeof e->capsule, "%s", cap->name);
        }
        e->cases++;
        e->counts[status]++;
        p->totals[status]++;
        if (status_bad(status)) {
            p->bad_cells += e->bad == 0;
            e->bad++;
            p->bad_total++;
        }
        for (int k = 0; k < CC_RESULT_FLAG_COUNT; k++)
            if (cc_result_extras_flag(&p->x, i, k)) {
                e->flags[k]++;
                p->flag_totals[k]++;
            }
        if (compared(r)) {
            e->compared++;
            e->bins[ratio_bin(r->worst_ratio)]++;
            if (e->worst_at < 0 || ratio_worse(r->worst_ratio, e->worst)) {
                e->worst = r->worst_ratio;
                e->worst_at = (long)i;
            }
        }
    }
    free(grp);
    free(opk);
    return 0;
}

/* ---- sections ------------------------------------------------------------------------------- */

static void column_label(FILE *f, const group *g)
{
    cc_html_text(f, g->provider);
    fputs(" \xc2\xb7 ", f);
    cc_html_text(f, g->where);
}

static void tile(FILE *f, const char *cls, long n, const char *label, const char *title)
{
    fprintf(f, "<div class=\"tile %s\" title=\"", cls);
    cc_html_text(f, title);
    fprintf(f, "\"><b>%ld</b>", n);
    cc_html_text(f, label);
    fputs("</div>", f);
}

static void write_summary(FILE *f, const page *p)
{
    const cc_run *run = p->run;
    long cases = p->fold.distinct;
    if (p->bad_total == 0)
        fprintf(f, "<div class=\"banner ok\" id=\"verdict\">All %ld cases passed or were "
                   "unsupported (%ld passed).</div>\n",
                cases, p->totals[CC_RES_PASS]);
    else
        fprintf(f, "<div class=\"banner bad\" id=\"verdict\">%ld of %ld cases did not pass, in "
                   "%ld op \xc3\x97 dtype cells: they are listed first below.</div>\n",
                p->bad_total, cases, p->bad_cells);
    fputs("<div class=\"tiles\" id=\"totals\">", f);
    tile(f, "", cases, "cases", "every case of the run, each counted once");
    if (p->fold.repeats) {
        char said[64];
        cc_repeats_sentence(p->fold.repeats, said, sizeof said);
        tile(f, p->fold.disagreeing ? "bad" : "warn", p->fold.repeats, "repeated", said);
    }
    for (int s = 0; s < CC_RES_COUNT; s++) {
        int k = status_style((cc_result_status)s);
        /* pass, fail and unsupported always; the others when they happened */
        if (p->totals[s] == 0 && s != CC_RES_PASS && s != CC_RES_FAIL && s != CC_RES_UNSUPPORTED)
            continue;
        const char *cls = k < 0 || STATUSES[k].bad ? (p->totals[s] ? "bad" : "") : STATUSES[k].cls;
        tile(f, cls, p->totals[s], cc_result_status_name((cc_result_status)s),
             k < 0 ? "a status this page does not know" : STATUSES[k].means);
    }
    for (int k = 0; k < CC_RESULT_FLAG_COUNT; k++)
        if (p->x.have_flag[k])
            tile(f, p->flag_totals[k] ? "warn" : "", p->flag_totals[k], cc_result_flag_name(k),
                 cc_result_flag_meaning(k));
    fputs("</div>\n<p class=\"note\">", f);
    cc_html_text(f, run->provider_description);
    fputs("<br>case files: ", f);
    cc_html_text(f, run->case_files);
    fprintf(f, "; base seed %llu; columns: ", run->base_seed);
    for (int g = 0; g < p->n_groups; g++) {
        fputs(g ? ", " : "", f);
        column_label(f, &p->groups[g]);
    }
    fputs(". The bound ratio is error / (c_op \xc2\xb7 u(dtype) \xc2\xb7 m_i + floor): at most "
          "1 passes.</p>\n",
          f);
}

static void write_worst_element(FILE *f, const cc_result *r)
{
    char e[40], g[40], b[40], ratio[24];
    cc_html_format_ratio(r->worst_ratio, ratio, sizeof ratio);
    if (compared(r))
        fprintf(f, " worst bound ratio <b>%s</b>", ratio);
    if (!r->worst_output[0])
        return;
    snprintf(e, sizeof e, "%.9g", r->expected);
    snprintf(g, sizeof g, "%.9g", r->got);
    snprintf(b, sizeof b, "%.3g", r->bound);
    fputs(" at <span class=\"mono\">", f);
    cc_html_text(f, r->worst_output);
    cc_html_text(f, r->worst_index);
    fprintf(f, "</span>: expected <span class=\"mono\">%s</span>, got <span class=\"mono\">%s"
               "</span>, bound %s",
            e, g, b);
    if (r->worst_inputs[0]) {
        fputs(" (inputs there: <span class=\"mono\">", f);
        cc_html_text(f, r->worst_inputs);
        fputs("</span>)", f);
    }
}

typedef struct {
    int cell;
    int severity;  /* not compared (crash, timeout, error...) before compared */
    int nonfinite; /* a NaN/Inf pattern miss after a finite value missed (report.h's rank) */
    double ratio;
    size_t index;
} failure;

static int failure_cmp(const void *pa, const void *pb)
{
    const failure *a = pa, *b = pb;
    if (a->cell != b->cell)
        return a->cell < b->cell ? -1 : 1;
    if (a->severity != b->severity)
        return a->severity > b->severity ? -1 : 1;
    if (a->nonfinite != b->nonfinite)
        return a->nonfinite < b->nonfinite ? -1 : 1;
    int na = isnan(a->ratio) != 0, nb = isnan(b->ratio) != 0;
    if (na != nb)
        return na ? -1 : 1;
    if (!na && a->ratio != b->ratio)
        return a->ratio > b->ratio ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* One failing case of the list: its status, worst element, message and repro line. */
static void write_failure_item(FILE *f, const page *p, size_t index)
{
    const cc_run *run = p->run;
    const cc_result *r = &run->results[index];
    const char *why = cc_folded_why(&p->fold, index);
    fputs("<li class=\"failure\">", f);
    status_badge(f, status_of(p, index));
    write_worst_element(f, r);
    /* the message (or why a repeat made the case nondeterministic), unless it only restates
     * the worst element */
    if (why[0] ||
        (r->message[0] && !(r->worst_output[0] && strstr(r->message, "exceeds its bound")))) {
        fputs("<br><span class=\"mute\">", f);
        cc_html_text(f, why[0] ? why : r->message);
        fputs("</span>", f);
    }
    char cmd[2600];
    cc_repro_command_on(&run->repro, r->line, r->platform, run->prov.platforms,
                        run->prov.n_platforms, cmd, sizeof cmd);
    fputs("<code class=\"repro\">", f);
    cc_html_text(f, cmd);
    fputs("</code></li>\n", f);
}

static void write_failures(FILE *f, const page *p)
{
    if (!p->bad_total)
        return;
    const cc_run *run = p->run;
    failure *v = malloc((size_t)p->bad_total * sizeof *v);
    if (!v)
        return;
    size_t n = 0;
    for (size_t i = 0; i < run->n_results; i++) {
        const cc_result *r = &run->results[i];
        if (is_case(p, i) && status_bad(status_of(p, i)))
            v[n++] = (failure){p->cell_of[i], !compared(r), cc_result_nonfinite_miss(r),
                               r->worst_ratio, i};
    }
    qsort(v, n, sizeof *v, failure_cmp);
    fprintf(f, "<h2 id=\"failures\">Not passing: %ld cases</h2>\n<p class=\"note\">Per op "
               "\xc3\x97 dtype, its worst cases first (at most %d each). Click a repro line to "
               "select it; <code>capcheck repro</code> reruns the case alone with the same inputs."
               "</p>\n",
            p->bad_total, MAX_FAILURES_PER_CELL);
    /* an index of the cells first: op dtype (not passing / cases), each a link */
    fputs("<p class=\"chips\">", f);
    for (size_t k = 0; k < n;) {
        int at = v[k].cell;
        fprintf(f, "<a href=\"#cell%d\">", at);
        cc_html_text(f, p->ops[at / p->n_cols]);
        fprintf(f, " %s <b>%ld</b>/%ld</a> ", cc_dtype_name(p->cols[at % p->n_cols].dtype),
                p->cells[at].bad, p->cells[at].cases);
        while (k < n && v[k].cell == at)
            k++;
    }
    fputs("</p>\n", f);
    size_t shown = 0, hidden = 0;
    for (size_t k = 0; k < n;) {
        int at = v[k].cell;
        const cell *e = &p->cells[at];
        const column *col = &p->cols[at % p->n_cols];
        size_t end = k, nonfinite = 0;
        while (end < n && v[end].cell == at)
            nonfinite += v[end++].nonfinite;
        fprintf(f, "<h3 class=\"failcell\" id=\"cell%d\" data-dtype=\"%s\" data-op=\"", at,
                cc_dtype_name(col->dtype));
        cc_html_text(f, p->ops[at / p->n_cols]);
        fputs("\">", f);
        cc_html_text(f, p->ops[at / p->n_cols]);
        fprintf(f, " %s \xc2\xb7 ", cc_dtype_name(col->dtype));
        column_label(f, &col->g);
        fprintf(f, ": %ld of %ld cases did not pass", e->bad, e->cases);
        if (nonfinite) /* counted apart, listed after the finite misses */
            fprintf(f, ", %zu of them on a NaN/Inf pattern", nonfinite);
        fputs(" <span class=\"mute\">(", f);
        cc_html_text(f, e->capsule);
        fputs(")</span></h3>\n<ul class=\"fails\">\n", f);
        /* both kinds stay visible: when the cell's NaN/Inf pattern misses rank below its
         * other failures' shown slots, the last slot shows the first of them */
        size_t slots = end - k < MAX_FAILURES_PER_CELL ? end - k : MAX_FAILURES_PER_CELL;
        for (size_t j = 0; j < slots; j++) {
            if (shown >= MAX_FAILURES_SHOWN) {
                hidden += end - k - j;
                break;
            }
            size_t at_j = k + j;
            if (j + 1 == slots && nonfinite && at_j < end - nonfinite)
                at_j = end - nonfinite;
            write_failure_item(f, p, v[at_j].index);
            shown++;
        }
        if (end - k > MAX_FAILURES_PER_CELL && shown < MAX_FAILURES_SHOWN)
            fprintf(f, "<li class=\"mute\">%zu more in results.jsonl</li>\n",
                    end - k - MAX_FAILURES_PER_CELL);
        fputs("</ul>\n", f);
        k = end;
    }
    if (hidden)
        fprintf(f, "<p class=\"note\">The page stops at %d cases: %zu more did not pass in the "
                   "cells above; every one is in results.jsonl (a status other than pass and "
                   "unsupported).</p>\n",
                MAX_FAILURES_SHOWN, hidden);
    free(v);
}

static void cell_title(FILE *f, const page *p, int at)
{
    const cell *e = &p->cells[at];
    const column *col = &p->cols[at % p->n_cols];
    char ratio[24];
    cc_html_format_ratio(e->worst, ratio, sizeof ratio);
    cc_html_text(f, e->capsule);
    fprintf(f, " %s: %ld cases", cc_dtype_name(col->dtype), e->cases);
    for (int s = 0; s < CC_RES_COUNT; s++)
        if (e->counts[s])
            fprintf(f, ", %ld %s", e->counts[s], cc_result_status_name((cc_result_status)s));
    if (e->worst_at >= 0) {
        fprintf(f, "; worst bound ratio %s in ", ratio);
        cc_html_text(f, p->run->results[e->worst_at].line);
    }
}

/* The table head: a column group per provider and platform, under it a dtype, under that the
 * worst ratio's cell and the distribution's. */
static void grid_head(FILE *f, const page *p)
{
    fputs("<div class=\"scroll\"><table class=\"heat\" id=\"heatmap\"><thead><tr>"
          "<th class=\"op\" rowspan=\"2\">op</th>",
          f);
    for (int g = 0; g < p->n_groups; g++) {
        int span = 0;
        for (int d = 0; d < CC_DTYPE_COUNT; d++)
            span += p->groups[g].dtypes >> d & 1;
        fprintf(f, "<th colspan=\"%d\" class=\"group\">", 2 * span);
        column_label(f, &p->groups[g]);
        fputs("</th>", f);
    }
    fputs("</tr>\n<tr>", f);
    for (int c = 0; c < p->n_cols; c++)
        fprintf(f, "<th colspan=\"2\" class=\"group\">%s</th>", cc_dtype_name(p->cols[c].dtype));
    fputs("</tr></thead>\n<tbody>\n", f);
}

static void cell_attributes(FILE *f, const page *p, int at)
{
    const column *col = &p->cols[at % p->n_cols];
    fputs(" data-op=\"", f);
    cc_html_text(f, p->ops[at / p->n_cols]);
    fprintf(f, "\" data-dtype=\"%s\" data-column=\"", cc_dtype_name(col->dtype));
    column_label(f, &col->g);
    fputs("\" title=\"", f);
    cell_title(f, p, at);
    fputs("\"", f);
}

/* The worst ratio's cell: its heat class and text. */
static void heat_cell(FILE *f, const page *p, int at)
{
    const cell *e = &p->cells[at];
    char text[24];
    const char *cls;
    if (e->bad) {
        cls = "hx";
        snprintf(text, sizeof text, "%ld\xe2\x9c\x97", e->bad);
    } else if (e->worst_at < 0) {
        cls = "hu";
        snprintf(text, sizeof text, "\xe2\x80\x93");
    } else {
        cls = cc_html_heat_class(e->worst);
        cc_html_format_ratio(e->worst, text, sizeof text);
    }
    fprintf(f, "<td class=\"%s cell\"", cls);
    cell_attributes(f, p, at);
    fprintf(f, ">%s</td>", text);
}

/* A histogram of one cell: a bar per bin (height by the logarithm of its count, so one case
 * still shows), green within the bound, red beyond it; the bound drawn as a dashed line. */
static void histogram(FILE *f, const cell *e)
{
    const int bw = 6, h = 18, w = N_BINS * bw;
    long most = 0;
    for (int b = 0; b < N_BINS; b++)
        most = e->bins[b] > most ? e->bins[b] : most;
    fprintf(f, "<svg class=\"hist\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\"><title>", w,
            h, w, h);
    for (int b = 0, any = 0; b < N_BINS; b++)
        if (e->bins[b])
            fprintf(f, "%s%s: %ld", any++ ? " \xc2\xb7 " : "", BIN_LABELS[b], e->bins[b]);
    fprintf(f, "</title><path fill=\"#eef0f3\" d=\"M0 0h%dv%dh-%dz\"/>", w, h, w);
    for (int over = 0; over < 2; over++) {
        int any = 0;
        for (int b = over ? FIRST_OVER_BIN : 0; b < (over ? N_BINS : FIRST_OVER_BIN); b++) {
            if (!e->bins[b])
                continue;
            int bar = 1 + (int)lround((h - 2) * log1p((double)e->bins[b]) / log1p((double)most));
            if (!any++)
                fprintf(f, "<path fill=\"%s\" d=\"", over ? "#c62828" : "#4d9a5b");
            fprintf(f, "M%d %dh%dv%dh-%dz", b * bw, h - bar, bw - 1, bar, bw - 1);
        }
        if (any)
            fputs("\"/>", f);
    }
    fprintf(f, "<path stroke=\"#333\" stroke-dasharray=\"2 2\" d=\"M%d.5 0v%d\"/></svg>",
            FIRST_OVER_BIN * bw - 1, h);
}

static void write_heat_map(FILE *f, const page *p)
{
    fputs("<h2 id=\"heat\">Per op \xc3\x97 dtype: the worst case, and where the cases sit</h2>\n"
          "<p class=\"note\">The coloured cell is the worst bound ratio of that op and dtype "
          "(hover for its counts and case line); a red cell holds cases that did not pass, with "
          "their number (\xe2\x9c\x97). Beside it, the compared cases by worst bound ratio: one "
          "bar per decade from exact (left) through 1e-6 \xe2\x80\xa6 1 to beyond the bound "
          "(right of the dashed line, red), heights logarithmic in the count.</p>\n",
          f);
    cc_html_heat_legend(f);
    grid_head(f, p);
    for (int o = 0; o < p->n_ops; o++) {
        fputs("<tr><td class=\"op\">", f);
        cc_html_text(f, p->ops[o]);
        fputs("</td>", f);
        for (int c = 0; c < p->n_cols; c++) {
            int at = o * p->n_cols + c;
            const cell *e = &p->cells[at];
            if (!e->cases) {
                fputs("<td></td><td></td>", f);
                continue;
            }
            heat_cell(f, p, at);
            fputs("<td class=\"dist\">", f);
            if (e->compared)
                histogram(f, e);
            fputs("</td>", f);
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table></div>\n", f);
}

/* What a capsule x dtype's passing evidence spans: distinct inputs, shapes, layouts and edge
 * classes (harness/evidence/evidence.h). */
static void diversity(FILE *f, const cc_capsule_stats *s)
{
    fprintf(f, "%ld passing inputs; %ld shapes, %ld layouts, %d edge classes", s->passing,
            s->distinct_shapes, s->distinct_layouts, cc_evidence_edge_classes(s));
}

/* A verdict's dtype, and the platform it holds for when it names one. */
static void dtype_on(FILE *f, const cc_verdict *v)
{
    fputs(v->dtype == CC_DTYPE_COUNT ? "*" : cc_dtype_name(v->dtype), f);
    if (v->platform[0]) {
        fputs(" on ", f);
        cc_html_text(f, v->platform);
    }
}

static void write_gate(FILE *f, const page *p)
{
    fputs("<h2 id=\"gate\">The gate: which capsules this run checks</h2>\n", f);
    const cc_gate *g = p->gate;
    if (!g) {
        fputs("<p class=\"note\" id=\"gate-note\">", f);
        cc_html_text(f, p->gate_note);
        fputs("</p>\n", f);
        return;
    }
    fputs("<p class=\"note\" id=\"gate-summary\">Policy <code>", f);
    cc_html_text(f, p->policy->name);
    fprintf(f, "</code>: <b>%d of %zu</b> %s checked", g->n_checked, g->n,
            strcmp(cc_gate_unit(g), "capsule x dtype") ? "capsule \xc3\x97 dtype \xc3\x97 platform"
                                                      : "capsule \xc3\x97 dtype");
    if (p->policy->n_req)
        fprintf(f, "; %d of the %d required checked", g->n_required_checked, g->n_required);
    fprintf(f, " (capcheck gate exits %d). A capsule moves from trustedExternal to checked only "
               "when every requirement of the policy holds. Each case counts once however often "
               "it ran",
            g->exit_code);
    if (g->ev.repeats) {
        char said[64];
        cc_repeats_sentence(g->ev.repeats, said, sizeof said);
        fprintf(f, " (here %s; %ld disagreed with their first run)", said, g->ev.disagreeing);
    }
    fputs(".</p>\n", f);
    long held = 0;
    for (size_t i = 0; i < g->n; i++)
        held += !g->v[i].checked;
    if (held) {
        fprintf(f, "<h3>Held back: %ld</h3>\n<table class=\"list\" id=\"gate-held\"><tr><th>capsule"
                   "</th><th>dtype</th><th>required</th><th>what holds it back</th>"
                   "<th>its evidence</th></tr>\n",
                held);
        for (int pass = 0; pass < 2; pass++) /* required ones first */
            for (size_t i = 0; i < g->n; i++) {
                const cc_verdict *v = &g->v[i];
                if (v->checked || v->required != !pass)
                    continue;
                fputs("<tr><td class=\"mono\">", f);
                cc_html_text(f, v->capsule.name);
                fputs("</td><td>", f);
                dtype_on(f, v);
                fprintf(f, "</td><td>%s</td><td><ul>", v->required ? "yes" : "");
                for (int k = 0; k < v->n_reasons; k++) {
                    fputs("<li>", f);
                    cc_html_text(f, v->reasons[k]);
                    fputs("</li>", f);
                }
                fputs("</ul></td><td>", f);
                if (v->stats)
                    diversity(f, v->stats);
                fputs("</td></tr>\n", f);
            }
        fputs("</table>\n", f);
    }
    if (g->n_checked) {
        fprintf(f, "<details><summary>Checked: %d</summary>\n<table class=\"list\" "
                   "id=\"gate-checked\"><tr><th>capsule</th><th>dtype</th><th>passing</th>"
                   "<th>VJP checked</th><th>worst bound ratio</th><th>its evidence</th></tr>\n",
                g->n_checked);
        for (size_t i = 0; i < g->n; i++) {
            const cc_verdict *v = &g->v[i];
            if (!v->checked)
                continue;
            char ratio[24];
            cc_html_format_ratio(v->stats->worst_ratio, ratio, sizeof ratio);
            fputs("<tr><td class=\"mono\">", f);
            cc_html_text(f, v->capsule.name);
            fputs("</td><td>", f);
            dtype_on(f, v);
            fprintf(f, "</td><td>%ld of %ld</td><td>%ld</td><td>%s</td><td>",
                    v->stats->counts[CC_RES_PASS], v->stats->cases, v->stats->vjp_passing, ratio);
            diversity(f, v->stats);
            fputs("</td></tr>\n", f);
        }
        fputs("</table></details>\n", f);
    }
}

static void kv(FILE *f, const char *key, const char *value)
{
    fputs("<tr><td>", f);
    cc_html_text(f, key);
    fputs("</td><td>", f);
    cc_html_text(f, value && value[0] ? value : "\xe2\x80\x94");
    fputs("</td></tr>\n", f);
}

static void write_provenance(FILE *f, const page *p)
{
    const cc_run *run = p->run;
    const cc_provenance *pv = &run->prov;
    char buf[1024];
    fputs("<h2 id=\"provenance\">Provenance</h2>\n<table class=\"kv\" id=\"provenance-table\">\n",
          f);
    snprintf(buf, sizeof buf, "%s, commit %s", pv->capcheck_version, pv->git_commit);
    kv(f, "capcheck", pv->present ? buf : "not stated (a report without provenance)");
    kv(f, "provider", run->provider_description);
    kv(f, "libtorch", pv->libtorch);
    kv(f, "CUDA / cuDNN / GPU", pv->cuda[0] || pv->gpu[0]
                                   ? (snprintf(buf, sizeof buf, "%s / %s / %s",
                                               pv->cuda[0] ? pv->cuda : "-",
                                               pv->cudnn[0] ? pv->cudnn : "-",
                                               pv->gpu[0] ? pv->gpu : "-"),
                                      buf)
                                   : "none");
    kv(f, "CPU", pv->cpu_model);
    buf[0] = 0;
    for (int k = 0; k < p->x.n_platforms; k++)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", k ? ", " : "",
                 p->x.platforms[k]);
    kv(f, "platforms", buf[0] ? buf : "not stated by the results");
    snprintf(buf, sizeof buf, "tf32 %s; deterministic %s; attention %s; threads %s",
             pv->tf32[0] ? pv->tf32 : "-", pv->deterministic[0] ? pv->deterministic : "-",
             pv->attention[0] ? pv->attention : "-", pv->threads[0] ? pv->threads : "-");
    kv(f, "math modes", buf);
    snprintf(buf, sizeof buf, "%llu", run->base_seed);
    kv(f, "base seed", buf);
    kv(f, "command", run->command);
    for (int k = 0; k < pv->n_files; k++) {
        snprintf(buf, sizeof buf, "%s  sha256:%s", pv->files[k].path, pv->files[k].sha256);
        kv(f, k ? "" : "case files", buf);
    }
    snprintf(buf, sizeof buf, "sha256:%s (%s)", run->sha256,
             run->sealed ? "sealed by report.json.sha256" : "no seal beside it");
    kv(f, "report.json", buf);
    const char *digest = "";
    if (run->json)
        cc_json_string(run->json, "results_digest", &digest);
    kv(f, "results digest", digest);
    snprintf(buf, sizeof buf, "%.1f s wall for %ld cases%s", run->wall_seconds,
             run->session_cases, run->resumed ? " (resumed)" : "");
    kv(f, "timing", buf);
    fputs("</table>\n", f);
}

static void write_page(FILE *f, const void *ctx)
{
    const page *p = ctx;
    char title[600];
    snprintf(title, sizeof title, "capcheck report: %s", p->run->case_files);
    cc_html_begin(f, title);
    fputs("<nav>", f);
    if (p->bad_total)
        fputs("<a href=\"#failures\">not passing</a> \xc2\xb7 ", f);
    fputs("<a href=\"#heat\">per op \xc3\x97 dtype</a> \xc2\xb7 <a href=\"#gate\">gate</a> "
          "\xc2\xb7 <a href=\"#provenance\">provenance</a></nav>\n",
          f);
    write_summary(f, p);
    write_failures(f, p);
    write_heat_map(f, p);
    write_gate(f, p);
    write_provenance(f, p);
    cc_html_end(f);
}

/* ---- loading and writing -------------------------------------------------------------------- */

/* The gate's line (cc_gate_line) and, when thin evidence holds a capsule back, a second line
 * with the one command that runs the evidence suite for this run's provider, math modes, device,
 * dispatch levels and policy: as a repro line is, it names the capcheck that prints it and the
 * run's environment (harness/report/repro.h), so it runs when pasted into a fresh shell. */
static void gate_summary(const cc_gate *g, const cc_policy *pol, char *buf, size_t n)
{
    int why = cc_gate_line(g, pol, buf, n);
    if (!g->exit_code || !g->run.n_results || !cc_gate_why_is_thin(why))
        return;
    cc_repro r = g->run.repro;
    const cc_provider_identity *id = &g->run.prov.provider;
    if (!r.args[0]) { /* a report from before repro lines named their provider */
        char provider[sizeof r.args - 20];
        cc_shell_quote(id->library[0] ? id->library
                       : id->name[0]  ? id->name
                                      : g->run.results[0].provider,
                       provider, sizeof provider);
        snprintf(r.args, sizeof r.args, "%s %s", id->library[0] ? "--provider-lib" : "--provider",
                 provider);
    }
    char tail[1600];
    int used = snprintf(tail, sizeof tail, "--device %s", cc_device_name(g->run.results[0].device));
    /* the run's dispatch levels, when it ran at more than the machine's own */
    const cc_provenance *pv = &g->run.prov;
    for (int i = 0; i < pv->n_platforms && (pv->n_platforms > 1 || strcmp(pv->platforms[0].level,
                                                                          "native")); i++)
        if (pv->platforms[i].level[0] && used < (int)sizeof tail)
            used += snprintf(tail + used, sizeof tail - (size_t)used, "%s%s",
                             strstr(tail, "--cpu-capability") ? "," : " --cpu-capability ",
                             pv->platforms[i].level);
    /* a policy given by its file: the same rules judge the suite */
    char abs[PATH_MAX], quoted[PATH_MAX + 8];
    if (strncmp(pol->name, "built-in:", 9) != 0 && realpath(pol->name, abs) &&
        used < (int)sizeof tail) {
        cc_shell_quote(abs, quoted, sizeof quoted);
        snprintf(tail + used, sizeof tail - (size_t)used, " --policy %s", quoted);
    }
    char cmd[3400];
    cc_repro_certify(&r, tail, cmd, sizeof cmd);
    size_t len = strlen(buf);
    snprintf(buf + len, n - len, "\ngate: %s runs the evidence suite that checks capsules", cmd);
}

/* The page of p->run (with p->gate's verdicts, or p->gate_note) into its folder; the page's
 * own parts freed. 0, or -1 with msg. */
static int write_for(page *p, const cc_catalog *cat, long *bytes, char *msg, size_t len)
{
    int rc = -1;
    char path[1100];
    if (cc_result_extras_read(p->run->dir, p->run->n_results, &p->x, msg, len))
        goto out;
    if (build(p, cat)) {
        snprintf(msg, len, "out of memory");
        goto out;
    }
    snprintf(path, sizeof path, "%s/report.html", p->run->dir);
    if (cc_write_file_with(path, write_page, p, bytes)) {
        snprintf(msg, len, "cannot write %s: %s", path, strerror(errno));
        goto out;
    }
    rc = 0;
out:
    free(p->cells);
    free(p->cell_of);
    cc_folded_free(&p->fold);
    cc_result_extras_free(&p->x);
    return rc;
}

int cc_report_html_write_gated(const cc_gate *g, const cc_policy *pol, const cc_catalog *cat,
                               long *bytes, char *msg, size_t len)
{
    page *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(msg, len, "out of memory");
        return -1;
    }
    p->dir = g->run.dir;
    p->gate = g;
    p->policy = pol;
    p->run = &g->run;
    int rc = write_for(p, cat, bytes, msg, len);
    free(p);
    return rc;
}

int cc_report_html_write(const char *dir, const char *policy_path, long *bytes, char *gate_line,
                         size_t gate_len, char *msg, size_t len)
{
    page *p = calloc(1, sizeof *p);
    cc_policy *pol = calloc(1, sizeof *pol);
    cc_gate *g = calloc(1, sizeof *g);
    cc_run *plain = calloc(1, sizeof *plain);
    cc_catalog cat;
    memset(&cat, 0, sizeof cat);
    int rc = -1, have_gate = 0, have_plain = 0;
    if (!p || !pol || !g || !plain) {
        snprintf(msg, len, "out of memory");
        goto out;
    }
    p->dir = dir;
    if (cc_catalog_load(NULL, &cat, msg, len))
        goto out;
    char why[1024];
    if (cc_policy_load(policy_path, pol, msg, len)) /* NULL: the built-in policy */
        goto out;
    else if (cc_gate_run(pol, &cat, 1, &dir, g, why, sizeof why) == 0) {
        have_gate = 1;
        p->gate = g;
        p->policy = pol;
        p->run = &g->run;
    } else
        snprintf(p->gate_note, sizeof p->gate_note, "the gate refuses this run under %.300s: "
                                                     "%.600s",
                 pol->name, why);
    if (!p->run) {
        if (cc_run_load(dir, CC_LOAD_RESULTS, plain, msg, len))
            goto out;
        have_plain = 1;
        p->run = plain;
    }
    if (write_for(p, &cat, bytes, msg, len))
        goto out;
    if (gate_line && have_gate)
        gate_summary(g, pol, gate_line, gate_len);
    else if (gate_line)
        snprintf(gate_line, gate_len, "gate: no verdicts: %s", p->gate_note);
    rc = 0;
out:
    if (have_gate)
        cc_gate_free(g);
    if (have_plain)
        cc_run_free(plain);
    cc_catalog_free(&cat);
    free(p);
    free(pol);
    free(g);
    free(plain);
    return rc;
}
