/* capcheck history over a synthetic series of five sealed nights, made from one real run (the
 * reference provider) whose results are rewritten per night and written as capcheck writes a
 * run (cc_run_write: results, sealed report, digest):
 *   n1..n5       every result compared, bound ratios 0.010 .. 0.022 (median 0.016);
 *   softmax f32  x30 from n4, the night libtorch goes 2.15.0 -> 2.16.0: drift, worse, at n4,
 *                at a stack change;
 *   add f64      x6 from n3: drift, worse, at n3, no stack change;
 *   exp f32      x(1 + k/2) on night k (at most x3): no drift at the default 4x; with
 *                --drift 2, drift at n4 (x2.5; x2 at n3 is not beyond 2);
 *   linear f32   one case fails from n3 on: first failing night n3, still failing;
 *   exp f32      one case crashes on n2 only: first and last failing night n2, passing now;
 *   every other series: no drift, no failure.
 * And the refusals: an unsealed night, a shard. CAPCHECK_HISTORY_KEEP=DIR keeps the nights in
 * DIR (scripts/screenshot and tests/html_check.py draw the history page from them). */
#include "cli_util.h"

#include <math.h>
#include <sys/stat.h>

#include "core/json.h"
#include "harness/evidence/merge.h"

static char tmp[256], nights[512];
static char out[1 << 16];
static int keep;

#define N_NIGHTS 5

static double base_ratio(size_t i)
{
    return 0.010 + 0.002 * (double)(i % 7);
}

static void plant(cc_run *night, const cc_run *base, int k /* 1-based */)
{
    snprintf(night->provider_description, sizeof night->provider_description,
             "synthetic nightly (reference results rewritten); libtorch %s",
             k >= 4 ? "2.16.0" : "2.15.0");
    /* as a report that does not record who ran: its description's libtorch is read as written
     * (a recorded built-in reference states none: report/provenance.h) */
    memset(&night->prov.provider, 0, sizeof night->prov.provider);
    int linear_failed = 0, exp_crashed = 0;
    for (size_t i = 0; i < night->n_results; i++) {
        cc_result *r = &night->results[i];
        *r = base->results[i];
        double x = base_ratio(i);
        if (!strcmp(r->op, "softmax") && r->dtype == CC_F32 && k >= 4)
            x *= 30;
        if (!strcmp(r->op, "add") && r->dtype == CC_F64 && k >= 3)
            x *= 6;
        if (!strcmp(r->op, "exp") && r->dtype == CC_F32)
            x *= 1 + 0.5 * (k - 1);
        r->status = CC_RES_PASS;
        r->checked_fwd = 1;
        r->fwd_ratio = r->worst_ratio = x;
        if (!strcmp(r->op, "linear") && r->dtype == CC_F32 && k >= 3 && !linear_failed++) {
            r->status = CC_RES_FAIL;
            r->fwd_ratio = r->worst_ratio = 3.0;
            snprintf(r->message, sizeof r->message, "planted failure");
        }
        if (!strcmp(r->op, "exp") && r->dtype == CC_F32 && k == 2 && !exp_crashed++) {
            r->status = CC_RES_CRASH;
            r->checked_fwd = 0;
            r->fwd_ratio = r->worst_ratio = 0;
            snprintf(r->message, sizeof r->message, "worker died: SIGSEGV (planted)");
        }
    }
}

static int setup(void **state)
{
    (void)state;
    const char *kept = getenv("CAPCHECK_HISTORY_KEEP");
    keep = kept && *kept;
    snprintf(tmp, sizeof tmp, "/tmp/capcheck_history_XXXXXX");
    if (!mkdtemp(tmp))
        return -1;
    snprintf(nights, sizeof nights, "%s", keep ? kept : tmp);
    mkdir(nights, 0777);
    char cases[600], args[2048];
    snprintf(cases, sizeof cases, "%s/h.cases", tmp);
    cc_t_write(cases, "softmax count=5 dtype=f32,f64 size=small\n"
                      "add count=5 dtype=f32,f64 size=small\n"
                      "exp count=5 dtype=f32 size=small\n"
                      "linear count=4 dtype=f32 size=small\n");
    snprintf(args, sizeof args, "run %s --provider reference --out %s/base -j 1", cases, tmp);
    if (cc_t_run(NULL, args, out, sizeof out) != 0)
        return -1;
    char dir[700], msg[1024];
    snprintf(dir, sizeof dir, "%s/base", tmp);
    cc_run base, night;
    if (cc_run_load(dir, CC_LOAD_SEAL | CC_LOAD_RESULTS | CC_LOAD_PROVENANCE, &base, msg,
                    sizeof msg)) {
        fprintf(stderr, "%s\n", msg);
        return -1;
    }
    night = base;
    night.json = NULL;
    night.results = calloc(base.n_results, sizeof *night.results);
    for (int k = 1; k <= N_NIGHTS; k++) {
        plant(&night, &base, k);
        snprintf(dir, sizeof dir, "%s/n%d", nights, k);
        if (cc_run_write(&night, dir, NULL, msg, sizeof msg)) {
            fprintf(stderr, "%s\n", msg);
            return -1;
        }
    }
    free(night.results);
    cc_run_free(&base);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return cc_t_remove_dir(tmp);
}

/* capcheck history n1..n5 --out tmp/<to> [extra]; its exit code. */
static int history(const char *to, const char *extra)
{
    char args[4096];
    int used = snprintf(args, sizeof args, "history");
    for (int k = 1; k <= N_NIGHTS; k++)
        used += snprintf(args + used, sizeof args - (size_t)used, " %s/n%d", nights, k);
    snprintf(args + used, sizeof args - (size_t)used, " --out %s/%s %s", tmp, to, extra);
    return cc_t_run(NULL, args, out, sizeof out);
}

static cc_json *history_json(const char *to)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s/history.json", tmp, to);
    cc_json *j = cc_t_json_file(path);
    const char *schema;
    assert_int_equal(cc_json_string(j, "schema", &schema), 0);
    assert_string_equal(schema, "capcheck-history/1");
    return j;
}

static const cc_json *find_series(const cc_json *j, const char *op, const char *dtype)
{
    for (const cc_json *s = cc_json_get(j, "series")->child; s; s = s->next) {
        const char *o, *d;
        if (!cc_json_string(s, "op", &o) && !cc_json_string(s, "dtype", &d) && !strcmp(o, op) &&
            !strcmp(d, dtype))
            return s;
    }
    fail_msg("no series %s %s in history.json", op, dtype);
    return NULL;
}

/* The series' drift night ("" when none), direction and stack-change flag. */
static void drift_of(const cc_json *s, const char **night, const char **dir, int *at_change)
{
    const cc_json *d = cc_json_get(s, "drift");
    *night = "";
    *dir = "";
    *at_change = -1;
    if (d && d->type == CC_JSON_OBJECT) {
        assert_int_equal(cc_json_string(d, "night", night), 0);
        assert_int_equal(cc_json_string(d, "direction", dir), 0);
        assert_int_equal(cc_json_bool(d, "at_stack_change", at_change), 0);
    }
}

static const char *str(const cc_json *o, const char *key)
{
    const char *s;
    return cc_json_string(o, key, &s) ? "" : s;
}

static void test_planted_drift_and_failures(void **state)
{
    (void)state;
    assert_int_equal(history("h", ""), 0);
    assert_non_null(strstr(out, "capcheck history: 5 nights, 6 capsule x dtype series: 2 failed "
                                "on some night (1 on the last), 2 drifted beyond 4x"));
    cc_json *j = history_json("h");
    const char *night, *dir;
    int at_change;
    drift_of(find_series(j, "softmax", "f32"), &night, &dir, &at_change);
    assert_string_equal(night, "n4");
    assert_string_equal(dir, "worse");
    assert_int_equal(at_change, 1);
    drift_of(find_series(j, "add", "f64"), &night, &dir, &at_change);
    assert_string_equal(night, "n3");
    assert_string_equal(dir, "worse");
    assert_int_equal(at_change, 0);
    static const char *const calm[][2] = {{"softmax", "f64"}, {"add", "f32"}, {"exp", "f32"},
                                          {"linear", "f32"}};
    for (size_t k = 0; k < sizeof calm / sizeof calm[0]; k++) {
        drift_of(find_series(j, calm[k][0], calm[k][1]), &night, &dir, &at_change);
        if (night[0])
            fail_msg("%s %s drifted at %s, planted no drift", calm[k][0], calm[k][1], night);
    }
    /* failures: linear f32 from n3, still failing; exp f32 on n2 only */
    const cc_json *lin = find_series(j, "linear", "f32"), *ex = find_series(j, "exp", "f32");
    int now;
    assert_string_equal(str(lin, "first_failing_night"), "n3");
    assert_string_equal(str(lin, "last_failing_night"), "n5");
    assert_int_equal(cc_json_bool(lin, "failing_last_night", &now), 0);
    assert_int_equal(now, 1);
    assert_non_null(strstr(str(lin, "first_failure"), "linear dtype=f32"));
    assert_string_equal(str(ex, "first_failing_night"), "n2");
    assert_string_equal(str(ex, "last_failing_night"), "n2");
    assert_int_equal(cc_json_bool(ex, "failing_last_night", &now), 0);
    assert_int_equal(now, 0);
    assert_null(cc_json_get(find_series(j, "add", "f32"), "first_failing_night")->text);
    /* the stack changed on n4, and only there */
    int k = 1;
    for (const cc_json *nt = cc_json_get(j, "nights")->child; nt; nt = nt->next, k++) {
        const char *change = str(nt, "stack_change");
        if (k == 4)
            assert_non_null(strstr(change, "libtorch 2.15.0 \xe2\x86\x92 2.16.0"));
        else if (change[0])
            fail_msg("night n%d: stack change '%s', planted none", k, change);
        assert_string_equal(str(nt, "libtorch"), k >= 4 ? "2.16.0" : "2.15.0");
    }
    /* medians and worsts: add f64 on n1 is 0.016 and 0.022 (7 ratios 0.010 .. 0.022 spread over
     * 10 cases), x6 on n3 */
    const cc_json *pts = cc_json_get(find_series(j, "add", "f64"), "nights");
    double w1, w3;
    assert_int_equal(cc_json_double(pts->child, "worst", &w1), 0);
    assert_int_equal(cc_json_double(pts->child->next->next, "worst", &w3), 0);
    assert_true(w1 > 0.009 && w1 < 0.0221);
    assert_true(fabs(w3 / w1 - 6) < 1e-9);
    cc_json_free(j);
    /* the page says the same */
    char path[700];
    snprintf(path, sizeof path, "%s/h/history.html", tmp);
    char *html = cc_t_slurp(path, NULL);
    assert_non_null(html);
    assert_int_equal(cc_t_count(html, "<tr class=\"drifted\">"), 2);
    assert_int_equal(cc_t_count(html, "<tr class=\"failure\">"), 2);
    assert_non_null(strstr(html, "<span class=\"st bad\">still failing</span>"));
    assert_null(strstr(html, "http://"));
    assert_null(strstr(html, "https://"));
    free(html);
}

static void test_drift_factor_is_honoured(void **state)
{
    (void)state;
    assert_int_equal(history("h2", "--drift 2"), 0);
    cc_json *j = history_json("h2");
    const char *night, *dir;
    int at_change;
    drift_of(find_series(j, "exp", "f32"), &night, &dir, &at_change);
    assert_string_equal(night, "n4");
    double factor;
    assert_int_equal(cc_json_double(j, "drift_factor", &factor), 0);
    assert_true(factor == 2);
    cc_json_free(j);
}

static void test_refusals(void **state)
{
    (void)state;
    char path[700], moved[720];
    /* an unsealed night */
    snprintf(path, sizeof path, "%s/n2/report.json.sha256", nights);
    snprintf(moved, sizeof moved, "%s.away", path);
    assert_int_equal(rename(path, moved), 0);
    assert_int_equal(history("h3", ""), 2);
    assert_non_null(strstr(out, "capcheck history: "));
    assert_non_null(strstr(out, "has no"));
    assert_non_null(strstr(out, "seal"));
    assert_int_equal(rename(moved, path), 0);
    /* a shard */
    char args[2048];
    snprintf(args, sizeof args, "run --provider reference --op add --shard 1/2 --out %s/shard",
             tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    snprintf(args, sizeof args, "history %s/n1 %s/shard --out %s/h4", nights, tmp, tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    assert_non_null(strstr(out, "is shard 1/2 of a run: give history the folder capcheck merge "
                                "makes"));
    /* no --out */
    snprintf(args, sizeof args, "history %s/n1", nights);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    assert_non_null(strstr(out, "--out DIR"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_planted_drift_and_failures),
        cmocka_unit_test(test_drift_factor_is_honoured),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
