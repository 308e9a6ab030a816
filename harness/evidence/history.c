#define _XOPEN_SOURCE 700 /* realpath */
#include "harness/evidence/history.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "harness/report/capsules.h"
#include "harness/report/html.h"
#include "harness/report/identity.h"
#include "core/json.h"
#include "core/text.h"
#include "harness/evidence/merge.h"
#include "harness/report/report_out.h"
#include "harness/report/result_extras.h"

/* ---- the model ------------------------------------------------------------------------------ */

/* What a night ran on; a change in any of these between two nights is marked. */
static const char *const STACK_NAMES[] = {"capcheck", "libtorch", "CUDA", "cuDNN", "GPU", "CPU",
                                          "platforms"};
enum { ST_CAPCHECK, ST_LIBTORCH, ST_CUDA, ST_CUDNN, ST_GPU, ST_CPU, ST_PLATFORMS, ST_COUNT };

typedef struct {
    char label[128], dir[512], sha256[65];
    char provider[512]; /* the run's provider_description */
    char stack[ST_COUNT][128];
    char change[600]; /* "libtorch 2.15.0 -> 2.16.0; ..." ("" on the first night, or none) */
    long cases, passed, bad;
    cc_repro repro; /* what reruns one of its cases (harness/report/repro.h) */
    uint64_t set;    /* its case set: the sum of a hash of each result's line and platform */
    int set_changed; /* not the case set of the night before */
} night;

/* compared, worst and median: over the passing cases that compared a value (a failure is a
 * failure, listed as one; drift is accuracy moving within the bound) */
typedef struct {
    long cases, passed, bad, compared;
    double worst, median;
    uint64_t set;    /* the series' case set that night (as night.set) */
    int set_changed; /* not the series' case set of the night before: the series breaks */
} point;

typedef struct {
    char capsule[80], op[32], where[64];
    cc_dtype dtype;
    point *pts; /* per night; cases == 0: the night had no case of it */
    int first_failing, last_failing, nights_failing; /* -1: never */
    char first_failure[CC_CASE_LINE_MAX];
    int drift_night; /* -1: no drift */
    double drift_factor; /* > 1 worse, < 1 better: the figure over its first night's */
    const char *drift_figure; /* "median" or "worst" */
} series;

typedef struct {
    night *nights;
    int n_nights;
    series *s;
    size_t n_series, cap_series;
    double drift;
} history;

static int is_bad(cc_result_status s)
{
    return s != CC_RES_PASS && s != CC_RES_UNSUPPORTED;
}

static int series_index(history *h, const char *capsule, cc_dtype dtype, const char *where,
                        const char *op)
{
    for (size_t k = 0; k < h->n_series; k++)
        if (h->s[k].dtype == dtype && !strcmp(h->s[k].capsule, capsule) &&
            !strcmp(h->s[k].where, where))
            return (int)k;
    series *grown = cc_grow(h->s, h->n_series, &h->cap_series, sizeof *grown, 64);
    if (!grown)
        return -1;
    h->s = grown;
    series *e = &h->s[h->n_series];
    memset(e, 0, sizeof *e);
    e->pts = calloc((size_t)h->n_nights, sizeof *e->pts);
    if (!e->pts)
        return -1;
    snprintf(e->capsule, sizeof e->capsule, "%s", capsule);
    snprintf(e->op, sizeof e->op, "%s", op);
    snprintf(e->where, sizeof e->where, "%s", where);
    e->dtype = dtype;
    e->first_failing = e->last_failing = e->drift_night = -1;
    return (int)h->n_series++;
}

typedef struct {
    int series;
    double ratio;
} sample;

static int sample_cmp(const void *pa, const void *pb)
{
    const sample *a = pa, *b = pb;
    if (a->series != b->series)
        return a->series < b->series ? -1 : 1;
    /* NaN sorts last (the worst) */
    int na = isnan(a->ratio) != 0, nb = isnan(b->ratio) != 0;
    if (na != nb)
        return na ? 1 : -1;
    return na ? 0 : (a->ratio > b->ratio) - (a->ratio < b->ratio);
}

static void night_label(night *nt, const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s", dir);
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        path[--n] = 0;
    if (n > 12 && !strcmp(path + n - 12, "/report.json")) /* a report.json given: its folder */
        path[n - 12] = 0;
    const char *slash = strrchr(path, '/');
    snprintf(nt->label, sizeof nt->label, "%s", slash && slash[1] ? slash + 1 : path);
}

/* Night k: load the run, then its provenance and every result into its series. */
static int add_night(history *h, int k, const char *dir, const cc_catalog *cat, char *msg,
                     size_t len)
{
    night *nt = &h->nights[k];
    cc_run run;
    if (cc_run_load(dir, CC_LOAD_SEAL | CC_LOAD_RESULTS | CC_LOAD_PROVENANCE, &run, msg, len))
        return -1;
    int rc = -1;
    cc_result_extras x;
    memset(&x, 0, sizeof x);
    sample *v = malloc((run.n_results ? run.n_results : 1) * sizeof *v);
    if (run.prov.shard.present) {
        snprintf(msg, len, "%s is shard %d/%d of a run: give history the folder capcheck merge "
                           "makes of the shards",
                 run.report_path, run.prov.shard.index, run.prov.shard.count);
        goto out;
    }
    if (!v) {
        snprintf(msg, len, "out of memory");
        goto out;
    }
    if (cc_result_extras_read(run.dir, run.n_results, &x, msg, len))
        goto out;
    snprintf(nt->dir, sizeof nt->dir, "%s", dir);
    night_label(nt, dir);
    memcpy(nt->sha256, run.sha256, sizeof nt->sha256);
    snprintf(nt->provider, sizeof nt->provider, "%s", run.provider_description);
    nt->repro = run.repro;
    const cc_provenance *p = &run.prov;
    snprintf(nt->stack[ST_CAPCHECK], sizeof nt->stack[0], "%s %s", p->capcheck_version,
             p->git_commit);
    snprintf(nt->stack[ST_LIBTORCH], sizeof nt->stack[0], "%s", p->libtorch);
    snprintf(nt->stack[ST_CUDA], sizeof nt->stack[0], "%s", p->cuda);
    snprintf(nt->stack[ST_CUDNN], sizeof nt->stack[0], "%s", p->cudnn);
    snprintf(nt->stack[ST_GPU], sizeof nt->stack[0], "%s", p->gpu);
    snprintf(nt->stack[ST_CPU], sizeof nt->stack[0], "%s", p->cpu_model);
    for (int q = 0; q < x.n_platforms; q++) {
        size_t used = strlen(nt->stack[ST_PLATFORMS]);
        snprintf(nt->stack[ST_PLATFORMS] + used, sizeof nt->stack[0] - used, "%s%s",
                 q ? " " : "", x.platforms[q]);
    }
    size_t n_samples = 0;
    int last = -1;
    cc_folded fold; /* each case once (harness/report/identity.h) */
    if (cc_fold_run(run.results, run.n_results, run.prov.deterministic, &fold)) {
        snprintf(msg, len, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < run.n_results; i++) {
        const cc_result *r = &run.results[i];
        if (fold.first[i] != i)
            continue;
        cc_result_status status = cc_folded_status(&fold, run.results, i);
        const char *platform = cc_result_extras_platform(&x, i);
        const char *where = platform ? platform : cc_device_name(r->device);
        cc_capsule adhoc;
        const cc_capsule *cap =
            cc_catalog_resolve(cat, &run.prov.provider, r->provider, cc_device_name(r->device),
                               r->op, r->vjp_mode, &adhoc);
        int si = last >= 0 && h->s[last].dtype == r->dtype && !strcmp(h->s[last].capsule, cap->name) &&
                         !strcmp(h->s[last].where, where)
                     ? last
                     : series_index(h, cap->name, r->dtype, where, r->op);
        if (si < 0) {
            snprintf(msg, len, "out of memory");
            cc_folded_free(&fold);
            goto out;
        }
        last = si;
        series *e = &h->s[si];
        point *pt = &e->pts[k];
        uint64_t id = cc_text_fnv1a(cc_text_fnv1a(0xcbf29ce484222325ULL, r->line), where);
        pt->set += id;
        nt->set += id;
        pt->cases++;
        nt->cases++;
        if (status == CC_RES_PASS) {
            pt->passed++;
            nt->passed++;
        }
        if (is_bad(status)) {
            pt->bad++;
            nt->bad++;
            if (e->first_failing < 0 || e->first_failing == k) {
                if (e->first_failing < 0)
                    snprintf(e->first_failure, sizeof e->first_failure, "%s", r->line);
                e->first_failing = k;
            }
        }
        if (status == CC_RES_PASS && (r->checked_fwd || r->checked_vjp))
            v[n_samples++] = (sample){si, r->worst_ratio};
    }
    cc_folded_free(&fold);
    /* worst and median per series, from its samples in order */
    qsort(v, n_samples, sizeof *v, sample_cmp);
    for (size_t a = 0; a < n_samples;) {
        size_t b = a;
        while (b < n_samples && v[b].series == v[a].series)
            b++;
        point *pt = &h->s[v[a].series].pts[k];
        size_t m = b - a;
        pt->compared = (long)m;
        pt->worst = v[b - 1].ratio;
        pt->median = m % 2 ? v[a + m / 2].ratio : (v[a + m / 2 - 1].ratio + v[a + m / 2].ratio) / 2;
        a = b;
    }
    for (size_t q = 0; q < h->n_series; q++) {
        series *e = &h->s[q];
        if (e->pts[k].bad) {
            e->last_failing = k;
            e->nights_failing++;
        }
    }
    if (k > 0) {
        const night *prev = &h->nights[k - 1];
        for (int f = 0; f < ST_COUNT; f++)
            if (strcmp(prev->stack[f], nt->stack[f])) {
                size_t used = strlen(nt->change);
                snprintf(nt->change + used, sizeof nt->change - used, "%s%s %s \xe2\x86\x92 %s",
                         used ? "; " : "", STACK_NAMES[f], prev->stack[f][0] ? prev->stack[f] : "none",
                         nt->stack[f][0] ? nt->stack[f] : "none");
            }
    }
    rc = 0;
out:
    free(v);
    cc_result_extras_free(&x);
    cc_run_free(&run);
    return rc;
}

/* A night whose case set is not the night before's, and each series whose own cases changed
 * (present one night and not the next, or other cases): the series breaks there. A failure
 * before a break is not "fixed" after it, and drift is measured from the first night after
 * the last break. */
static void mark_case_set_changes(history *h)
{
    for (int k = 1; k < h->n_nights; k++)
        h->nights[k].set_changed = h->nights[k].cases != h->nights[k - 1].cases ||
                                   h->nights[k].set != h->nights[k - 1].set;
    for (size_t q = 0; q < h->n_series; q++) {
        series *e = &h->s[q];
        for (int k = 1; k < h->n_nights; k++) {
            const point *a = &e->pts[k - 1];
            point *b = &e->pts[k];
            b->set_changed = a->cases != b->cases || a->set != b->set;
        }
    }
}

/* Where a series that failed stands on the last night: NULL when it never failed; "passing"
 * only when the night after its last failure ran the same cases and they passed. */
static const char *failure_now(const history *h, const series *e)
{
    if (e->first_failing < 0)
        return NULL;
    if (e->last_failing == h->n_nights - 1)
        return "failing";
    return e->pts[e->last_failing + 1].set_changed ? "case set changed" : "passing";
}

static double floored(double r)
{
    return isnan(r) ? INFINITY : r < CC_HISTORY_RATIO_FLOOR ? CC_HISTORY_RATIO_FLOOR : r;
}

/* The first night a series' median or worst ratio moved beyond the factor from its first
 * night's. */
static void find_drift(history *h, series *e)
{
    int base = -1;
    for (int k = 0; k < h->n_nights; k++) {
        const point *pt = &e->pts[k];
        if (pt->set_changed)
            base = -1; /* other cases: measured afresh */
        if (!pt->compared)
            continue;
        if (base < 0) {
            base = k;
            continue;
        }
        static const char *const FIGURES[] = {"median", "worst"};
        for (int which = 0; which < 2; which++) {
            double now = floored(which ? pt->worst : pt->median);
            double then = floored(which ? e->pts[base].worst : e->pts[base].median);
            double factor = isinf(now) && isinf(then) ? 1 : isinf(now) ? INFINITY : now / then;
            if (factor > h->drift || factor < 1 / h->drift) {
                e->drift_night = k;
                e->drift_factor = factor;
                e->drift_figure = FIGURES[which];
                return;
            }
        }
    }
}

/* ---- history.json --------------------------------------------------------------------------- */

static void json_key_string(FILE *f, const char *key, const char *value, const char *after)
{
    fprintf(f, "\"%s\": ", key);
    if (value && value[0])
        cc_json_write_string(f, value);
    else
        fputs("null", f);
    fputs(after, f);
}

static void write_json(FILE *f, const void *ctx)
{
    const history *h = ctx;
    fprintf(f, "{\n  \"schema\": \"%s\",\n  \"drift_factor\": ", CC_HISTORY_SCHEMA);
    cc_json_write_number(f, h->drift);
    fputs(",\n  \"ratio_floor\": ", f);
    cc_json_write_number(f, CC_HISTORY_RATIO_FLOOR);
    fputs(",\n  \"nights\": [\n", f);
    for (int k = 0; k < h->n_nights; k++) {
        const night *nt = &h->nights[k];
        fputs("    {", f);
        json_key_string(f, "label", nt->label, ", ");
        json_key_string(f, "dir", nt->dir, ", ");
        fprintf(f, "\"report_sha256\": \"%s\", ", nt->sha256);
        json_key_string(f, "provider", nt->provider, ", ");
        for (int s = 0; s < ST_COUNT; s++) {
            char key[32];
            snprintf(key, sizeof key, "%s", STACK_NAMES[s]);
            for (char *c = key; *c; c++)
                *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
            json_key_string(f, key, nt->stack[s], ", ");
        }
        fprintf(f, "\"cases\": %ld, \"passed\": %ld, \"not_passed\": %ld, "
                   "\"case_set_changed\": %s, ",
                nt->cases, nt->passed, nt->bad, nt->set_changed ? "true" : "false");
        json_key_string(f, "stack_change", nt->change, "}");
        fprintf(f, "%s\n", k + 1 < h->n_nights ? "," : "");
    }
    fputs("  ],\n  \"series\": [\n", f);
    for (size_t q = 0; q < h->n_series; q++) {
        const series *e = &h->s[q];
        fputs("    {", f);
        json_key_string(f, "capsule", e->capsule, ", ");
        json_key_string(f, "op", e->op, ", ");
        fprintf(f, "\"dtype\": \"%s\", ", cc_dtype_name(e->dtype));
        json_key_string(f, "platform", e->where, ", ");
        fputs("\"nights\": [", f);
        for (int k = 0; k < h->n_nights; k++) {
            const point *pt = &e->pts[k];
            fputs(k ? ", " : "", f);
            if (!pt->cases) {
                fputs("null", f);
                continue;
            }
            fprintf(f, "{\"cases\": %ld, \"passed\": %ld, \"not_passed\": %ld, \"compared\": %ld",
                    pt->cases, pt->passed, pt->bad, pt->compared);
            if (pt->compared) {
                fputs(", \"worst\": ", f);
                cc_json_write_number(f, pt->worst);
                fputs(", \"median\": ", f);
                cc_json_write_number(f, pt->median);
            }
            fputc('}', f);
        }
        fputs("], ", f);
        json_key_string(f, "first_failing_night",
                        e->first_failing >= 0 ? h->nights[e->first_failing].label : NULL, ", ");
        json_key_string(f, "first_failure", e->first_failing >= 0 ? e->first_failure : NULL, ", ");
        json_key_string(f, "last_failing_night",
                        e->last_failing >= 0 ? h->nights[e->last_failing].label : NULL, ", ");
        fprintf(f, "\"failing_last_night\": %s, ",
                e->last_failing == h->n_nights - 1 && e->last_failing >= 0 ? "true" : "false");
        json_key_string(f, "failure_now", failure_now(h, e), ", ");
        fputs("\"case_set_changed_on\": [", f);
        for (int k = 1, n = 0; k < h->n_nights; k++)
            if (e->pts[k].set_changed) {
                fputs(n++ ? ", " : "", f);
                cc_json_write_string(f, h->nights[k].label);
            }
        fputs("], \"drift\": ", f);
        if (e->drift_night < 0)
            fputs("null", f);
        else {
            fputc('{', f);
            json_key_string(f, "night", h->nights[e->drift_night].label, ", ");
            fprintf(f, "\"figure\": \"%s\", \"direction\": \"%s\", \"factor\": ", e->drift_figure,
                    e->drift_factor > 1 ? "worse" : "better");
            cc_json_write_number(f, e->drift_factor);
            fprintf(f, ", \"at_stack_change\": %s}",
                    h->nights[e->drift_night].change[0] ? "true" : "false");
        }
        fprintf(f, "}%s\n", q + 1 < h->n_series ? "," : "");
    }
    fputs("  ]\n}\n", f);
}

/* ---- history.html --------------------------------------------------------------------------- */

/* A sparkline over the nights: worst (orange) and median (blue) bound ratio on a log scale from
 * 1e-6 (bottom) to 100 (top), the bound (1) dashed, nights where a case did not pass as red
 * dots on top, nights where the stack changed as grey lines. */
#define SPARK_H 32

/* pixels between two nights: a sparkline about 200 px wide, 4 to 40 px a night */
static int spark_step(const history *h)
{
    int step = h->n_nights > 1 ? 200 / (h->n_nights - 1) : 40;
    return step < 4 ? 4 : step > 40 ? 40 : step;
}

static double spark_y(double r)
{
    double l = isnan(r) || r > 100 ? 2 : r < 1e-6 ? -6 : log10(r);
    return 2 + (2 - l) * (SPARK_H - 4) / 8.0;
}

static void spark_line(FILE *f, const history *h, const series *e, int worst, const char *color)
{
    int pen = 0, step = spark_step(h);
    for (int k = 0; k < h->n_nights; k++) {
        const point *pt = &e->pts[k];
        if (!pt->compared) {
            pen = 0;
            continue;
        }
        if (!pen)
            fprintf(f, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" d=\"", color);
        fprintf(f, "%c%d %.1f", pen ? 'L' : 'M', 3 + k * step,
                spark_y(worst ? pt->worst : pt->median));
        /* a lone point still shows */
        int next = k + 1 < h->n_nights && e->pts[k + 1].compared;
        if (!pen && !next)
            fputs("h1", f);
        pen = 1;
        if (!next) {
            fputs("\"/>", f);
            pen = 0;
        }
    }
}

static void sparkline(FILE *f, const history *h, const series *e)
{
    int step = spark_step(h), w = 6 + (h->n_nights - 1) * step;
    fprintf(f, "<svg class=\"spark\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">", w,
            SPARK_H, w, SPARK_H);
    for (int k = 1; k < h->n_nights; k++)
        if (h->nights[k].change[0])
            fprintf(f, "<path stroke=\"#9aa3ad\" d=\"M%d 0v%d\"/>", 3 + k * step - step / 2,
                    SPARK_H);
    fprintf(f, "<path stroke=\"#333\" stroke-dasharray=\"2 2\" d=\"M0 %.1fH%d\"/>", spark_y(1), w);
    spark_line(f, h, e, 1, "#e07b00"); /* the median over the worst where they meet */
    spark_line(f, h, e, 0, "#2b6cb0");
    for (int k = 0; k < h->n_nights; k++)
        if (e->pts[k].bad)
            fprintf(f, "<circle fill=\"#c62828\" cx=\"%d\" cy=\"3\" r=\"2.5\"/>", 3 + k * step);
    fputs("</svg>", f);
}

static void ratio_cell(FILE *f, double r, long compared)
{
    char buf[24];
    if (!compared) {
        fputs("<td class=\"mute\">\xe2\x80\x93</td>", f);
        return;
    }
    cc_html_format_ratio(r, buf, sizeof buf);
    fprintf(f, "<td class=\"%s\">%s</td>", cc_html_heat_class(r), buf);
}

static const point *last_point(const history *h, const series *e)
{
    for (int k = h->n_nights - 1; k >= 0; k--)
        if (e->pts[k].cases)
            return &e->pts[k];
    return NULL;
}

static void series_name(FILE *f, const series *e)
{
    fputs("<td class=\"mono\">", f);
    cc_html_text(f, e->capsule);
    fprintf(f, "</td><td>%s</td><td>", cc_dtype_name(e->dtype));
    cc_html_text(f, e->where);
    fputs("</td>", f);
}

static void write_nights(FILE *f, const history *h)
{
    fputs("<h2 id=\"nights\">Nights</h2>\n<table class=\"list\" id=\"nights-table\"><tr><th>night"
          "</th><th>cases</th><th>passed</th><th>not passing</th><th>libtorch</th><th>platforms / "
          "CPU</th><th>capcheck</th><th>changed since the night before</th></tr>\n",
          f);
    for (int k = 0; k < h->n_nights; k++) {
        const night *nt = &h->nights[k];
        fprintf(f, "<tr%s><td>", nt->change[0] || nt->set_changed ? " class=\"changed\"" : "");
        cc_html_text(f, nt->label);
        fprintf(f, "</td><td>%ld</td><td>%ld</td><td%s>%ld</td><td>", nt->cases, nt->passed,
                nt->bad ? " class=\"hx\"" : "", nt->bad);
        cc_html_text(f, nt->stack[ST_LIBTORCH][0] ? nt->stack[ST_LIBTORCH] : "\xe2\x80\x94");
        fputs("</td><td>", f);
        cc_html_text(f, nt->stack[ST_PLATFORMS][0] ? nt->stack[ST_PLATFORMS] : nt->stack[ST_CPU]);
        fputs("</td><td class=\"mono\">", f);
        cc_html_text(f, nt->stack[ST_CAPCHECK]);
        fputs("</td><td>", f);
        if (nt->set_changed)
            fprintf(f, "<span class=\"st warn case-set\">case set changed</span> %ld \xe2\x86\x92 "
                       "%ld cases%s",
                    h->nights[k - 1].cases, nt->cases, nt->change[0] ? "; " : "");
        cc_html_text(f, nt->change);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void write_failures(FILE *f, const history *h)
{
    int any = 0;
    for (int k = 0; k < h->n_nights; k++) /* by the night they first failed */
        for (size_t q = 0; q < h->n_series; q++) {
            const series *e = &h->s[q];
            if (e->first_failing != k)
                continue;
            if (!any++)
                fputs("<h2 id=\"failures\">Failures: the night each first appeared</h2>\n"
                      "<table class=\"list\" id=\"failures-table\"><tr><th>capsule</th>"
                      "<th>dtype</th><th>platform</th><th>first failing night</th><th>nights "
                      "failing</th><th>last night</th><th>first failing case</th></tr>\n",
                      f);
            const char *now = failure_now(h, e);
            fputs("<tr class=\"failure\">", f);
            series_name(f, e);
            fputs("<td class=\"first-night\">", f);
            cc_html_text(f, h->nights[k].label);
            if (h->nights[k].change[0])
                fputs(" <span class=\"st warn\">stack changed</span>", f);
            fprintf(f, "</td><td>%d</td><td>%s</td><td><code class=\"repro\">",
                    e->nights_failing,
                    !strcmp(now, "failing") ? "<span class=\"st bad\">still failing</span>"
                    : !strcmp(now, "passing")
                        ? "<span class=\"st ok\">passing</span>"
                        : "<span class=\"st warn\" title=\"its cases changed after it failed: "
                          "not comparable\">case set changed</span>");
            char cmd[2600];
            cc_repro_command(&h->nights[k].repro, e->first_failure, cmd, sizeof cmd);
            cc_html_text(f, cmd);
            fputs("</code></td></tr>\n", f);
        }
    if (any)
        fputs("</table>\n", f);
    else
        fputs("<h2 id=\"failures\">Failures</h2>\n<p class=\"note\">No case failed on any night."
              "</p>\n",
              f);
}

static void write_drift(FILE *f, const history *h)
{
    fprintf(f, "<h2 id=\"drift\">Drift beyond %g\xc3\x97</h2>\n<p class=\"note\">A capsule "
               "\xc3\x97 dtype drifted when the median or worst bound ratio of its passing cases "
               "moved more than "
               "%g\xc3\x97 from its first night's (ratios under %g count as %g). Lines: worst "
               "(orange) and median (blue) bound ratio per night, log scale 1e-6 \xe2\x80\xa6 100, "
               "the bound dashed, grey where the stack changed, red dots on nights with a failing "
               "case.</p>\n",
            h->drift, h->drift, CC_HISTORY_RATIO_FLOOR, CC_HISTORY_RATIO_FLOOR);
    int any = 0;
    for (size_t q = 0; q < h->n_series; q++) {
        const series *e = &h->s[q];
        if (e->drift_night < 0)
            continue;
        if (!any++)
            fputs("<table class=\"list\" id=\"drift-table\"><tr><th>capsule</th><th>dtype</th>"
                  "<th>platform</th><th>night</th><th>moved</th><th>over the nights</th></tr>\n",
                  f);
        const night *nt = &h->nights[e->drift_night];
        fputs("<tr class=\"drifted\">", f);
        series_name(f, e);
        fputs("<td class=\"drift-night\">", f);
        cc_html_text(f, nt->label);
        if (nt->change[0]) {
            fputs(" <span class=\"st warn\" title=\"", f);
            cc_html_text(f, nt->change);
            fputs("\">stack changed</span>", f);
        }
        char factor[24];
        cc_html_format_ratio(e->drift_factor > 1 ? e->drift_factor : 1 / e->drift_factor, factor,
                             sizeof factor);
        fprintf(f, "</td><td><span class=\"st %s\">%s</span> %s %s\xc3\x97</td><td>",
                e->drift_factor > 1 ? "bad" : "ok", e->drift_factor > 1 ? "worse" : "better",
                e->drift_figure, factor);
        sparkline(f, h, e);
        fputs("</td></tr>\n", f);
    }
    if (any)
        fputs("</table>\n", f);
    else
        fputs("<p class=\"note\" id=\"no-drift\">No capsule drifted.</p>\n", f);
}

static void write_all(FILE *f, const history *h)
{
    fprintf(f, "<h2 id=\"all\">Every capsule \xc3\x97 dtype</h2>\n<details><summary>%zu series: "
               "worst and median bound ratio over the nights, and on the last night</summary>\n"
               "<table class=\"list\" id=\"series-table\"><tr><th>capsule</th><th>dtype</th>"
               "<th>platform</th><th>over the nights</th><th>worst</th><th>median</th></tr>\n",
            h->n_series);
    for (size_t q = 0; q < h->n_series; q++) {
        const series *e = &h->s[q];
        const point *pt = last_point(h, e);
        fputs("<tr>", f);
        series_name(f, e);
        fputs("<td>", f);
        sparkline(f, h, e);
        fputs("</td>", f);
        ratio_cell(f, pt ? pt->worst : 0, pt ? pt->compared : 0);
        ratio_cell(f, pt ? pt->median : 0, pt ? pt->compared : 0);
        fputs("</tr>\n", f);
    }
    fputs("</table></details>\n", f);
}

static void write_html(FILE *f, const void *ctx)
{
    const history *h = ctx;
    char title[400];
    snprintf(title, sizeof title, "capcheck history: %d nights, %s \xe2\x80\xa6 %s", h->n_nights,
             h->nights[0].label, h->nights[h->n_nights - 1].label);
    cc_html_begin(f, title);
    fputs("<nav><a href=\"#failures\">failures</a> \xc2\xb7 <a href=\"#drift\">drift</a> \xc2\xb7 "
          "<a href=\"#nights\">nights</a> \xc2\xb7 <a href=\"#all\">every capsule</a></nav>\n",
          f);
    long failing = 0, drifted = 0, changes = 0, set_changes = 0, unknown = 0;
    for (size_t q = 0; q < h->n_series; q++) {
        const char *now = failure_now(h, &h->s[q]);
        failing += now && !strcmp(now, "failing");
        unknown += now && !strcmp(now, "case set changed");
        drifted += h->s[q].drift_night >= 0;
    }
    for (int k = 1; k < h->n_nights; k++) {
        changes += h->nights[k].change[0] != 0;
        set_changes += h->nights[k].set_changed;
    }
    fprintf(f, "<div class=\"banner %s\" id=\"verdict\">On the last night %ld capsule \xc3\x97 "
               "dtype series fail; %ld drifted beyond %g\xc3\x97; the stack changed on %ld of %d "
               "nights",
            failing || drifted ? "bad" : set_changes ? "warn" : "ok", failing, drifted, h->drift,
            changes, h->n_nights);
    if (set_changes)
        fprintf(f, "; the case set changed on %ld: %ld series that failed before their cases "
                   "changed are not called fixed",
                set_changes, unknown);
    fputs(".</div>\n", f);
    write_failures(f, h);
    write_drift(f, h);
    write_nights(f, h);
    write_all(f, h);
    cc_html_end(f);
}

/* ---- the command ---------------------------------------------------------------------------- */

/* The run folder a history argument names (DIR, or DIR/report.json), resolved; "" when it
 * cannot be (add_night then says why). */
static void night_folder(const char *arg, char *buf, size_t n)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", arg);
    size_t len = strlen(path);
    if (!strcmp(path, "report.json"))
        snprintf(path, sizeof path, ".");
    else if (len > 12 && !strcmp(path + len - 12, "/report.json"))
        path[len - 12] = 0;
    char real[PATH_MAX];
    if (!realpath(path, real))
        real[0] = 0;
    snprintf(buf, n, "%s", real);
}

/* A folder given twice would count one night as two. */
static int refuse_twice(int n, const char *const *dirs, char *msg, size_t len)
{
    char a[PATH_MAX], b[PATH_MAX];
    for (int i = 0; i < n; i++) {
        night_folder(dirs[i], a, sizeof a);
        for (int j = i + 1; a[0] && j < n; j++) {
            night_folder(dirs[j], b, sizeof b);
            if (!strcmp(a, b)) {
                snprintf(msg, len, "%.600s and %.600s are the same run folder (%.700s): give "
                                   "each night once",
                         dirs[i], dirs[j], a);
                return -1;
            }
        }
    }
    return 0;
}

/* Two folders holding one sealed report (a copy of a night) would count it twice too. */
static int refuse_same_run(const history *h, char *msg, size_t len)
{
    for (int i = 0; i < h->n_nights; i++)
        for (int j = i + 1; j < h->n_nights; j++)
            if (!strcmp(h->nights[i].sha256, h->nights[j].sha256)) {
                snprintf(msg, len, "%s and %s hold the same run (report sha256 %.12s...): give "
                                   "each night once",
                         h->nights[i].dir, h->nights[j].dir, h->nights[i].sha256);
                return -1;
            }
    return 0;
}

/* The command's line: the series, their failures (those whose case set changed after they
 * failed apart: not fixed, not comparable), drift, the case-set changes, where the files are. */
static void print_summary(const history *h, const char *out_dir, long bytes, FILE *out)
{
    long failing = 0, ever = 0, drifted = 0, unknown = 0;
    for (size_t q = 0; q < h->n_series; q++) {
        const char *now = failure_now(h, &h->s[q]);
        ever += now != NULL;
        failing += now && !strcmp(now, "failing");
        unknown += now && !strcmp(now, "case set changed");
        drifted += h->s[q].drift_night >= 0;
    }
    fprintf(out, "capcheck history: %d nights, %zu capsule x dtype series: %ld failed on some "
                 "night (%ld on the last",
            h->n_nights, h->n_series, ever, failing);
    if (unknown)
        fprintf(out, "; %ld whose cases changed after they failed, not called fixed", unknown);
    fprintf(out, "), %ld drifted beyond %gx", drifted, h->drift);
    for (int k = 1; k < h->n_nights; k++)
        if (h->nights[k].set_changed)
            fprintf(out, "; the case set changed on %s (%ld -> %ld cases)", h->nights[k].label,
                    h->nights[k - 1].cases, h->nights[k].cases);
    fprintf(out, "; history.html (%ld KB) and history.json in %s\n", (bytes + 1023) / 1024,
            out_dir);
}

int cc_history_command(int n, const char *const *dirs, const char *out_dir, double drift,
                       FILE *out, FILE *err)
{
    char msg[2048];
    history h;
    memset(&h, 0, sizeof h);
    h.drift = drift;
    h.n_nights = n;
    cc_catalog cat;
    memset(&cat, 0, sizeof cat);
    int rc = 2;
    if (n < 1 || !out_dir) {
        snprintf(msg, sizeof msg, "give the run folders, oldest first, and --out DIR");
        goto out;
    }
    h.nights = calloc((size_t)n, sizeof *h.nights);
    if (!h.nights) {
        snprintf(msg, sizeof msg, "out of memory");
        goto out;
    }
    if (cc_catalog_load(NULL, &cat, msg, sizeof msg))
        goto out;
    if (refuse_twice(n, dirs, msg, sizeof msg))
        goto out;
    for (int k = 0; k < n; k++)
        if (add_night(&h, k, dirs[k], &cat, msg, sizeof msg))
            goto out;
    if (refuse_same_run(&h, msg, sizeof msg))
        goto out;
    mark_case_set_changes(&h);
    for (size_t q = 0; q < h.n_series; q++)
        find_drift(&h, &h.s[q]);
    if (cc_make_dir(out_dir)) {
        snprintf(msg, sizeof msg, "cannot create %s: %s", out_dir, strerror(errno));
        goto out;
    }
    char path[1100];
    long bytes = 0;
    snprintf(path, sizeof path, "%s/history.json", out_dir);
    if (cc_write_file_with(path, write_json, &h, NULL)) {
        snprintf(msg, sizeof msg, "cannot write %s: %s", path, strerror(errno));
        goto out;
    }
    snprintf(path, sizeof path, "%s/history.html", out_dir);
    if (cc_write_file_with(path, write_html, &h, &bytes)) {
        snprintf(msg, sizeof msg, "cannot write %s: %s", path, strerror(errno));
        goto out;
    }
    print_summary(&h, out_dir, bytes, out);
    rc = 0;
out:
    if (rc)
        fprintf(err, "capcheck history: %s\n", msg);
    for (size_t q = 0; q < h.n_series; q++)
        free(h.s[q].pts);
    free(h.s);
    free(h.nights);
    cc_catalog_free(&cat);
    return rc;
}
