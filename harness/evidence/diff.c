#include "harness/evidence/diff.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/dtype.h"
#include "harness/evidence/merge.h"
#include "harness/run/platform.h"

typedef struct {
    char capsule[80];
    char op[32], dtype[8], device[8], provider[32];
    char platform[48]; /* "" for a report that names none */
    long cases, pass, bad, unsupported;
    double worst;
    char first_failure[CC_CASE_LINE_MAX]; /* its worst failing case (older reports: first) */
    int seen; /* matched in the other report */
} diff_row;

enum { ROW_PASSING, ROW_FAILING, ROW_UNSUPPORTED };

static int row_state(const diff_row *r)
{
    if (r->bad)
        return ROW_FAILING;
    return r->pass > 0 && r->pass == r->cases ? ROW_PASSING : ROW_UNSUPPORTED;
}

static int load_rows(const cc_run *run, const cc_catalog *cat, diff_row **out, size_t *n,
                     char *msg, size_t len)
{
    const cc_json *rows = cc_json_get(run->json, "rows");
    *out = NULL;
    *n = 0;
    if (!rows || rows->type != CC_JSON_ARRAY) {
        snprintf(msg, len, "%s has no \"rows\" list", run->report_path);
        return -1;
    }
    size_t cap = 0;
    for (const cc_json *o = rows->child; o; o = o->next)
        cap++;
    *out = calloc(cap ? cap : 1, sizeof **out);
    if (!*out) {
        snprintf(msg, len, "out of memory");
        return -1;
    }
    for (const cc_json *o = rows->child; o; o = o->next) {
        diff_row *r = &(*out)[(*n)++];
        const char *op, *dtype, *device, *provider, *vjp = "", *ff = "";
        int64_t cases, pass, fail, unsup, error, crash, timeout;
        if (cc_json_string(o, "op", &op) || cc_json_string(o, "dtype", &dtype) ||
            cc_json_string(o, "device", &device) || cc_json_string(o, "provider", &provider) ||
            cc_json_i64(o, "cases", &cases) || cc_json_i64(o, "pass", &pass) ||
            cc_json_i64(o, "fail", &fail) || cc_json_i64(o, "unsupported", &unsup) ||
            cc_json_i64(o, "error", &error) || cc_json_i64(o, "crash", &crash) ||
            cc_json_i64(o, "timeout", &timeout) || cc_json_double(o, "worst_ratio", &r->worst)) {
            snprintf(msg, len, "%s: row %zu lacks op, dtype, device, provider, a status count "
                               "or worst_ratio",
                     run->report_path, *n);
            free(*out);
            *out = NULL;
            return -1;
        }
        const char *platform = "";
        cc_json_string(o, "vjp_mode", &vjp);
        if (cc_json_string(o, "worst_failure", &ff)) /* a report before worst_failure: first */
            cc_json_string(o, "first_failure", &ff);
        cc_json_string(o, "platform", &platform);
        snprintf(r->platform, sizeof r->platform, "%s", platform);
        cc_capsule adhoc;
        const cc_capsule *c =
            cc_catalog_resolve(cat, &run->prov.provider, provider, device, op, vjp, &adhoc);
        snprintf(r->capsule, sizeof r->capsule, "%s", c->name);
        snprintf(r->op, sizeof r->op, "%s", op);
        snprintf(r->dtype, sizeof r->dtype, "%s", dtype);
        snprintf(r->device, sizeof r->device, "%s", device);
        snprintf(r->provider, sizeof r->provider, "%s", provider);
        snprintf(r->first_failure, sizeof r->first_failure, "%s", ff);
        r->cases = (long)cases;
        r->pass = (long)pass;
        int64_t oob = 0, nondet = 0; /* absent from reports written before these statuses */
        cc_json_i64(o, "out-of-bounds", &oob);
        cc_json_i64(o, "nondeterministic", &nondet);
        r->bad = (long)(fail + error + crash + timeout + oob + nondet);
        r->unsupported = (long)unsup;
    }
    return 0;
}

/* The platform keys the rows of a report name, in order of first appearance. */
typedef struct {
    int n;
    char key[CC_MAX_PLATFORMS * 2][48];
} platform_set;

static int platform_in(const platform_set *s, const char *key)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->key[i], key) == 0)
            return 1;
    return 0;
}

static void platforms_of(const diff_row *r, size_t n, platform_set *s)
{
    s->n = 0;
    for (size_t i = 0; i < n; i++)
        if (!platform_in(s, r[i].platform) && s->n < (int)(sizeof s->key / sizeof s->key[0]))
            snprintf(s->key[s->n++], sizeof s->key[0], "%s", r[i].platform);
}

static void platform_list(const platform_set *s, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < s->n && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "",
                                 s->key[i][0] ? s->key[i] : "(none named)");
}

static int rows_on(const diff_row *r, size_t n, const char *key)
{
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += strcmp(r[i].platform, key) == 0;
    return k;
}

static void describe(char *buf, size_t n, const diff_row *r)
{
    if (!r)
        snprintf(buf, n, "no cases");
    else if (row_state(r) == ROW_PASSING)
        snprintf(buf, n, "passing (%ld/%ld)", r->pass, r->cases);
    else if (row_state(r) == ROW_FAILING)
        snprintf(buf, n, "failing (%ld of %ld did not pass)", r->bad, r->cases);
    else
        snprintf(buf, n, "unsupported (%ld of %ld)", r->unsupported, r->cases);
}

/* What a run or merge leaves beside its report; scripts/baseline keeps none of it. */
static int is_run_folder(const char *dir)
{
    static const char *const LEFT[] = {"results.jsonl", "run.json", "report.html",
                                       "report.junit.xml"};
    for (size_t i = 0; i < sizeof LEFT / sizeof LEFT[0]; i++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/%s", dir, LEFT[i]);
        if (access(path, F_OK) == 0)
            return 1;
    }
    return 0;
}

int cc_diff_load(const char *path, cc_run *run, char *msg, size_t len)
{
    if (cc_run_load(path, 0, run, msg, len))
        return -1;
    if (run->prov.shard.present) {
        snprintf(msg, len, "%s is shard %d/%d of a run: diff the report capcheck merge makes of "
                           "its %d shard folders",
                 run->report_path, run->prov.shard.index, run->prov.shard.count,
                 run->prov.shard.count);
        cc_run_free(run);
        return -1;
    }
    if (!is_run_folder(run->dir))
        return 0; /* a report kept alone: its rows */
    cc_run_free(run);
    return cc_run_load(path, CC_LOAD_RESULTS, run, msg, len);
}

/* "sealed, 8842 cases; its results.jsonl matches": what was read of one side. */
static void side_said(const cc_run *r, char *buf, size_t n)
{
    snprintf(buf, n, "%s, %ld cases; %s", r->sealed ? "sealed" : "unsealed", r->cases,
             r->n_results ? "its results.jsonl matches" : "a report kept alone, no results");
}

int cc_diff_command(const char *base_path, const char *new_path, double drift, int fail_on_drift,
                    const cc_catalog *cat, FILE *out, FILE *err)
{
    char msg[1024];
    cc_run base, neu;
    diff_row *br = NULL, *nr = NULL;
    size_t nb = 0, nn = 0;
    if (cc_diff_load(base_path, &base, msg, sizeof msg)) {
        fprintf(err, "capcheck diff: %s\n", msg);
        return 2;
    }
    if (cc_diff_load(new_path, &neu, msg, sizeof msg)) {
        fprintf(err, "capcheck diff: %s\n", msg);
        cc_run_free(&base);
        return 2;
    }
    if (load_rows(&base, cat, &br, &nb, msg, sizeof msg) ||
        load_rows(&neu, cat, &nr, &nn, msg, sizeof msg)) {
        fprintf(err, "capcheck diff: %s\n", msg);
        free(br);
        cc_run_free(&base);
        cc_run_free(&neu);
        return 2;
    }
    char said[160];
    side_said(&base, said, sizeof said);
    fprintf(out, "capcheck diff: base %s (%s)\n", base.report_path, said);
    side_said(&neu, said, sizeof said);
    fprintf(out, "capcheck diff: new  %s (%s)\n", neu.report_path, said);
    if (strcmp(base.provider_description, neu.provider_description) != 0)
        fprintf(out, "capcheck diff: the provider changed: '%s' -> '%s'\n",
                base.provider_description, neu.provider_description);
    /* like with like: rows are compared on the platforms both reports have */
    platform_set bp, np;
    platforms_of(br, nb, &bp);
    platforms_of(nr, nn, &np);
    int common = 0;
    for (int i = 0; i < bp.n; i++)
        common += platform_in(&np, bp.key[i]);
    if (!common && (nb || nn)) {
        char bl[512], nl[512];
        platform_list(&bp, bl, sizeof bl);
        platform_list(&np, nl, sizeof nl);
        fprintf(err,
                "capcheck diff: %s holds for platform %s and %s for %s: no platform in common, "
                "so no row compares like with like (a kernel that differs between platforms is "
                "no regression); diff a report of the same platform (capcheck run "
                "--cpu-capability LEVEL gives one)\n",
                base.report_path, bl, neu.report_path, nl);
        free(br);
        free(nr);
        cc_run_free(&base);
        cc_run_free(&neu);
        return 2;
    }
    for (int i = 0; i < bp.n; i++)
        if (!platform_in(&np, bp.key[i]))
            fprintf(out, "platform     %s: only in base (%d rows), not compared\n",
                    bp.key[i][0] ? bp.key[i] : "(none named)", rows_on(br, nb, bp.key[i]));
    for (int i = 0; i < np.n; i++)
        if (!platform_in(&bp, np.key[i]))
            fprintf(out, "platform     %s: only in new (%d rows), not compared\n",
                    np.key[i][0] ? np.key[i] : "(none named)", rows_on(nr, nn, np.key[i]));
    int regressions = 0, fixed = 0, new_failures = 0, drifts = 0, added = 0;
    char was[128], now[128], cmd[2600];
    for (size_t i = 0; i < nb; i++) {
        diff_row *b = &br[i], *m = NULL;
        if (!platform_in(&np, b->platform))
            continue;
        for (size_t j = 0; j < nn && !m; j++)
            if (strcmp(nr[j].capsule, b->capsule) == 0 && strcmp(nr[j].dtype, b->dtype) == 0 &&
                strcmp(nr[j].platform, b->platform) == 0)
                m = &nr[j];
        if (m)
            m->seen = 1;
        char at[64];
        snprintf(at, sizeof at, "%s%s", b->platform[0] ? " on " : "", b->platform);
        describe(was, sizeof was, b);
        describe(now, sizeof now, m);
        int bs = row_state(b), ns = m ? row_state(m) : -1;
        if (bs == ROW_PASSING && ns != ROW_PASSING && ns != ROW_UNSUPPORTED) {
            regressions++;
            fprintf(out, "regression   %s %s%s: %s -> %s", b->capsule, b->dtype, at, was, now);
            if (m && m->first_failure[0]) {
                cc_repro_command_on(&neu.repro, m->first_failure, m->platform,
                                    neu.prov.platforms, neu.prov.n_platforms, cmd, sizeof cmd);
                fprintf(out, "; worst: %s", cmd);
            }
            fputc('\n', out);
        } else if (bs == ROW_PASSING && ns == ROW_UNSUPPORTED) {
            regressions++;
            fprintf(out, "regression   %s %s%s: %s -> %s\n", b->capsule, b->dtype, at, was, now);
        } else if (bs == ROW_FAILING && ns == ROW_PASSING) {
            fixed++;
            fprintf(out, "fixed        %s %s%s: %s -> %s\n", b->capsule, b->dtype, at, was, now);
        } else if (bs != ROW_FAILING && ns == ROW_FAILING) {
            new_failures++;
            cc_repro_command_on(&neu.repro, m->first_failure, m->platform, neu.prov.platforms,
                                neu.prov.n_platforms, cmd, sizeof cmd);
            fprintf(out, "new failure  %s %s%s: %s -> %s; worst: %s\n", b->capsule, b->dtype,
                    at, was, now, cmd);
        } else if (bs == ROW_PASSING && ns == ROW_PASSING) {
            double x = fmax(b->worst, CC_DIFF_RATIO_FLOOR), y = fmax(m->worst, CC_DIFF_RATIO_FLOOR);
            double factor = y > x ? y / x : x / y;
            if (factor > drift || isnan(factor)) {
                drifts++;
                fprintf(out, "drift        %s %s%s: worst bound ratio %.4g -> %.4g (%.3gx %s, "
                             "beyond %gx)\n",
                        b->capsule, b->dtype, at, b->worst, m->worst, factor,
                        y > x ? "worse" : "better", drift);
            }
        }
    }
    for (size_t j = 0; j < nn; j++) {
        if (nr[j].seen || !platform_in(&bp, nr[j].platform))
            continue;
        char at[64];
        snprintf(at, sizeof at, "%s%s", nr[j].platform[0] ? " on " : "", nr[j].platform);
        describe(now, sizeof now, &nr[j]);
        if (row_state(&nr[j]) == ROW_FAILING) {
            new_failures++;
            cc_repro_command_on(&neu.repro, nr[j].first_failure, nr[j].platform,
                                neu.prov.platforms, neu.prov.n_platforms, cmd, sizeof cmd);
            fprintf(out, "new failure  %s %s%s: no cases -> %s; worst: %s\n", nr[j].capsule,
                    nr[j].dtype, at, now, cmd);
        } else {
            added++;
            fprintf(out, "new          %s %s%s: %s\n", nr[j].capsule, nr[j].dtype, at, now);
        }
    }
    int rc = regressions || new_failures || (fail_on_drift && drifts) ? 1 : 0;
    fprintf(out, "capcheck diff: %d regressions, %d fixed, %d new failures, %d drifts beyond %gx, "
                 "%d new rows on %d platforms compared: exit %d\n",
            regressions, fixed, new_failures, drifts, drift, added, common, rc);
    free(br);
    free(nr);
    cc_run_free(&base);
    cc_run_free(&neu);
    return rc;
}
