/* Bounds that reject (issue 13): vacuous bounds are found and never evidence; an f16 kernel that
 * folds its sum in f16 fails the strict default and passes --accumulation relaxed, and the
 * results and report say which mode judged them; an error over the probabilistic bound but
 * inside the worst case makes a passing case suspect (counted, and a failure where the policy
 * says so); the power measurement rejects a perturbation at the ladder step the bound predicts,
 * and `capcheck power` tabulates a run made with --power. Providers: the reference itself, the
 * reference with a planted error, and the mutants plugin (no libtorch). */
#include "cli_util.h"

#include <math.h>

#include "core/dtype.h"
#include "harness/evidence/evidence.h"
#include "harness/evidence/gate.h"
#include "harness/report/capsules.h"
#include "harness/report/report.h"
#include "harness/run/compare.h"
#include "harness/run/plugin.h"
#include "harness/run/power.h"
#include "harness/run/runner.h"
#include "abi/capcheck_provider.h"
#include "test_util.h"

/* this test's folder (mkdtemp: other checkouts run their tests at the same time), and the
 * prefix that runs capcheck in it (paths in commands are relative to it) */
static char tmp[64], in_tmp[128];

/* ---- vacuity ------------------------------------------------------------------------------- */

static void test_vacuous_elements_and_checks(void **state)
{
    (void)state;
    cc_bound_model m = cc_bound_for(CC_BF16, 1.0);
    /* every finite value: the bound reaches past the largest bf16 */
    assert_true(cc_bound_is_vacuous(1.0, 4e38, 1.0, CC_BF16, &m));
    /* every value of the output's own magnitude: 0, -y and anything up to max|y| pass */
    assert_true(cc_bound_is_vacuous(-6.69, 315.0, 20.6, CC_BF16, &m));
    assert_false(cc_bound_is_vacuous(-6.69, 3.0, 20.6, CC_BF16, &m));
    /* an output that is zero has no magnitude of its own: only the first rule */
    assert_false(cc_bound_is_vacuous(0.0, 1.0, 0.0, CC_BF16, &m));
    /* non-finite expected values are judged exactly */
    assert_false(cc_bound_is_vacuous(NAN, INFINITY, 1.0, CC_BF16, &m));

    /* a check is vacuous when every element is */
    double expected[3] = {1.0, -2.0, 0.5}, big[3] = {1e6, 1e6, 1e6}, small[3] = {1, 2, 0.5};
    uint16_t got[3];
    for (int i = 0; i < 3; i++)
        cc_store(CC_BF16, got, i, expected[i]);
    cc_view v = cc_t_vector_view(CC_BF16, got, 3);
    cc_comparison c;
    cc_compare(expected, &(ref_mag){big, NULL, NULL}, &v, &m, &c);
    assert_true(c.vacuous);
    assert_int_equal(c.n_vacuous, 3);
    cc_compare(expected, &(ref_mag){small, NULL, NULL}, &v, &m, &c);
    assert_false(c.vacuous);
    assert_int_equal(c.n_vacuous, 0);
}

/* One case run twice by provider p: judged strict into *rs, relaxed into *rr. */
static void run_strict_and_relaxed(const cc_provider *p, const char *line, cc_result *rs,
                                   cc_result *rr)
{
    cc_case c = cc_t_parse_case(line);
    cc_run_options strict = {.accumulation = CC_ACC_STRICT},
                   relaxed = {.accumulation = CC_ACC_RELAXED};
    cc_run_case_probed(p, &c, &strict, NULL, rs);
    cc_run_case_probed(p, &c, &relaxed, NULL, rr);
}

/* A long bf16 sum: relaxed (n u(bf16) sum|x|) admits any value of the output's magnitude, strict
 * (float32 accumulation, one rounding) does not. A vacuous pass is no evidence in the gate. */
static void test_long_bf16_sum_is_vacuous_only_when_relaxed(void **state)
{
    (void)state;
    const cc_provider *ref = cc_reference_provider();
    cc_result rs, rr;
    run_strict_and_relaxed(ref, "reduceSum dtype=bf16 in=[4096] axis=0 check=fwd seed=5", &rs,
                           &rr);
    assert_int_equal(rs.status, CC_RES_PASS);
    assert_int_equal(rr.status, CC_RES_PASS);
    assert_false(rs.vacuous);
    assert_true(rr.vacuous);
    assert_string_equal(rs.vacuous_outputs, "");
    assert_string_equal(rr.vacuous_outputs, "y"); /* the output that proved nothing, named */
    /* with its gradient checked too (a broadcast of g, judged exactly): y alone is named */
    cc_result bs, br;
    run_strict_and_relaxed(ref, "reduceSum dtype=bf16 in=[4096] axis=0 check=both seed=5", &bs,
                           &br);
    assert_true(br.vacuous && !bs.vacuous);
    assert_string_equal(br.vacuous_outputs, "y");
    printf("reduceSum bf16 [4096]: bound %.3g strict, %.3g relaxed (y = %.4g)\n", rs.bound,
           rr.bound, rs.expected);
    assert_true(rr.bound > 1e3 * rs.bound);

    /* evidence: the vacuous pass counts as vacuous, not as a passing check */
    cc_catalog cat;
    char msg[256];
    assert_int_equal(cc_catalog_load(NULL, &cat, msg, sizeof msg), 0);
    cc_result both[2] = {rs, rr};
    cc_run run;
    memset(&run, 0, sizeof run);
    run.results = both;
    run.n_results = 2;
    cc_evidence ev;
    assert_int_equal(cc_evidence_collect(&run, &cat, 1, &ev, msg, sizeof msg), 0);
    assert_int_equal(ev.n, 1);
    assert_int_equal(ev.v[0].counts[CC_RES_PASS], 2);
    assert_int_equal(ev.v[0].vacuous, 1);
    assert_int_equal(ev.v[0].fwd_passing, 1);
    assert_int_equal(ev.v[0].relaxed, 1); /* the gate wants strict unless the policy says */
    cc_evidence_free(&ev);
    cc_catalog_free(&cat);

    /* through the binary: the record names the output, report.md lists the row's first vacuous
     * case with the output and the command that reruns it as judged */
    char out[8192], path[256];
    snprintf(path, sizeof path, "%s/vacuous.cases", tmp);
    cc_t_write(path, "reduceSum dtype=bf16 in=[4096] axis=0 check=both seed=5\n");
    assert_int_equal(cc_t_run(in_tmp,
                              "run vacuous.cases --provider reference --accumulation relaxed -j 1 "
                              "--out vacuous",
                              out, sizeof out),
                     0);
    snprintf(path, sizeof path, "%s/vacuous/results.jsonl", tmp);
    char *rec = cc_t_slurp(path, NULL);
    assert_non_null(strstr(rec, "\"vacuous\":true,\"vacuous_outputs\":\"y\""));
    free(rec);
    snprintf(path, sizeof path, "%s/vacuous/report.md", tmp);
    char *md = cc_t_slurp(path, NULL);
    const char *section = strstr(md, "## Vacuous (1 cases");
    if (!section || !strstr(section, "- **reduceSum bf16 cpu") ||
        !strstr(section, "; the first vacuous in y\n") ||
        !strstr(section, "seed=5' --provider reference") ||
        !strstr(section, "--accumulation relaxed`"))
        fail_msg("report.md does not list the vacuous case:\n%.3000s", md);
    free(md);
}

/* ---- strict against relaxed ---------------------------------------------------------------- */

/* The mutants plugin's reducesum_dtype_accum folds f16/bf16 reduceSum in the dtype. */
static void test_dtype_accumulation_fails_strict_passes_relaxed(void **state)
{
    (void)state;
    setenv("CAPCHECK_MUTANT", "reducesum_dtype_accum", 1);
    char msg[512];
    cc_plugin *pl = cc_plugin_open(CAPCHECK_PLUGIN_DIR "/mutants.so", msg, sizeof msg);
    if (!pl)
        fail_msg("%s", msg);
    const cc_provider *p = cc_plugin_provider(pl);
    if (p->init)
        assert_int_equal(p->init(p->ctx, CC_CPU, msg, sizeof msg), CC_OK);
    cc_result rs, rr;
    run_strict_and_relaxed(p, "reduceSum dtype=f16 in=[16,512] axis=1 check=fwd seed=2", &rs, &rr);
    printf("f16 fold: strict %s (ratio %.3g), relaxed %s (ratio %.3g)\n",
           cc_result_status_name(rs.status), rs.worst_ratio, cc_result_status_name(rr.status),
           rr.worst_ratio);
    assert_int_equal(rs.status, CC_RES_FAIL);
    assert_int_equal(rs.accumulation, CC_ACC_STRICT);
    assert_int_equal(rr.status, CC_RES_PASS);
    assert_int_equal(rr.accumulation, CC_ACC_RELAXED);
    cc_plugin_close(pl);

    /* through the binary: the record and the report say which mode judged it */
    char out[8192], path[256], mutant[256];
    snprintf(path, sizeof path, "%s/f16.cases", tmp);
    cc_t_write(path, "reduceSum dtype=f16 in=[16,512] axis=1 check=fwd seed=2\n");
    snprintf(mutant, sizeof mutant, "%sCAPCHECK_MUTANT=reducesum_dtype_accum ", in_tmp);
    const char *modes[2] = {"strict", "relaxed"};
    for (int k = 0; k < 2; k++) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd,
                 "run f16.cases --provider-lib " CAPCHECK_PLUGIN_DIR "/mutants.so "
                 "--accumulation %s --out %s -j 1",
                 modes[k], modes[k]);
        int rc = cc_t_run(mutant, cmd, out, sizeof out);
        assert_int_equal(rc, k == 0 ? 1 : 0);
        snprintf(path, sizeof path, "%s/%s/report.md", tmp, modes[k]);
        char *md = cc_t_slurp(path, NULL), want[128];
        assert_non_null(md);
        snprintf(want, sizeof want, "- judged: %s accumulation", modes[k]);
        if (!strstr(md, want))
            fail_msg("%s lacks '%s'", path, want);
        free(md);
        snprintf(path, sizeof path, "%s/%s/results.jsonl", tmp, modes[k]);
        char *rec = cc_t_slurp(path, NULL);
        snprintf(want, sizeof want, "\"accumulation\":\"%s\"", modes[k]);
        assert_non_null(strstr(rec, want));
        free(rec);
        snprintf(cmd, sizeof cmd, "validate %s/report.json", modes[k]);
        assert_int_equal(cc_t_run(in_tmp, cmd, out, sizeof out), 0);
        /* the repro command of a relaxed run judges relaxed too */
        snprintf(path, sizeof path, "%s/%s/report.json", tmp, modes[k]);
        char *rep = cc_t_slurp(path, NULL);
        assert_non_null(rep);
        assert_int_equal(strstr(rep, "--accumulation relaxed") != NULL, k == 1);
        free(rep);
    }
    /* a resume must judge the same way */
    int rc = cc_t_run(mutant,
                      "run f16.cases --provider-lib " CAPCHECK_PLUGIN_DIR "/mutants.so "
                      "--resume relaxed -j 1",
                      out, sizeof out);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "judged 'relaxed'"));
    assert_int_equal(cc_t_run(NULL, "run --accumulation loose", out, sizeof out), 2);
    assert_non_null(strstr(out, "--accumulation wants strict or relaxed"));
    unsetenv("CAPCHECK_MUTANT");
}

/* ---- suspect ------------------------------------------------------------------------------- */

/* The reference with an error of a quarter of reduceSum's worst-case f32 bound added to every
 * output: inside n u sum|x|, far over lambda sqrt(n) u sum|x| for n = 4096. */
static cc_status quarter_bound_fwd(void *ctx, const cc_call *call, cc_view *out, char *msg,
                                   size_t len)
{
    (void)ctx;
    const cc_provider *ref = cc_reference_provider();
    cc_status st = ref->forward(ref->ctx, call, out, msg, len);
    if (st != CC_OK || strcmp(call->op, "reduceSum") != 0 || call->dtype != CC_F32)
        return st;
    const cc_view *x = &call->in[0];
    double abs_sum = 0.0;
    int64_t n = x->shape[0];
    for (int64_t i = 0; i < n; i++)
        abs_sum += fabs(cc_load(x->dtype, x->data, i * x->strides[0]));
    double y = cc_load(out->dtype, out->data, 0);
    cc_store(out->dtype, out->data, 0, y + 0.25 * (double)n * 0x1p-24 * abs_sum);
    return CC_OK;
}

static void test_suspect_is_flagged_counted_and_a_policy_failure(void **state)
{
    (void)state;
    cc_provider planted = *cc_reference_provider();
    planted.name = "quarter-bound";
    planted.forward = quarter_bound_fwd;
    const char *line = "reduceSum dtype=f32 in=[4096] axis=0 check=fwd seed=3";
    cc_result good, bad;
    cc_t_run_line(cc_reference_provider(), line, &good);
    cc_t_run_line(&planted, line, &bad);
    printf("suspect: reference ratio %.3g (suspect %.3g); planted ratio %.3g (suspect %.3g)\n",
           good.worst_ratio, good.suspect_ratio, bad.worst_ratio, bad.suspect_ratio);
    assert_int_equal(good.status, CC_RES_PASS);
    assert_false(good.suspect);
    assert_int_equal(bad.status, CC_RES_PASS);
    assert_true(bad.worst_ratio < 0.3);
    assert_true(bad.suspect_ratio > 1.0);
    assert_true(bad.suspect);

    /* the record says it, the report row and the judgement count it */
    cc_report rep;
    cc_report_init(&rep);
    assert_int_equal(cc_report_add(&rep, &bad), 0);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    cc_result_write_json(f, &bad);
    cc_report_write_json_stream(&rep, f);
    fclose(f);
    assert_non_null(strstr(buf, "\"suspect\":true"));
    assert_non_null(strstr(buf, "\"vacuous\": 0, \"suspect\": 1"));
    assert_non_null(strstr(buf, "\"suspect_lambda\": 6"));
    free(buf);
    cc_report_free(&rep);

    /* the gate: suspect allowed by default, a failure under `suspect fail` */
    cc_policy pol;
    char msg[256];
    const char *text = "format capcheck-policy/1\nsuspect fail\n[op reduceSum dtype=f64]\n"
                       "suspect allow\n";
    assert_int_equal(cc_policy_parse(text, "t", &pol, msg, sizeof msg), 0);
    cc_capsule cap;
    memset(&cap, 0, sizeof cap);
    snprintf(cap.op, sizeof cap.op, "reduceSum");
    cc_requirements q;
    cc_policy_requirements(&pol, &cap, CC_F32, &q);
    assert_true(q.suspect_fails);
    cc_policy_requirements(&pol, &cap, CC_F64, &q);
    assert_false(q.suspect_fails);
    assert_int_equal(cc_policy_parse("format capcheck-policy/1\nsuspect maybe\n", "t", &pol, msg,
                                     sizeof msg),
                     -1);
    assert_non_null(strstr(msg, "suspect is fail or allow"));
    /* relaxed evidence counts only where the policy says so */
    assert_int_equal(cc_policy_parse("format capcheck-policy/1\n[op reduceSum]\naccumulation "
                                     "relaxed\n",
                                     "t", &pol, msg, sizeof msg),
                     0);
    cc_policy_requirements(&pol, &cap, CC_F16, &q);
    assert_true(q.allow_relaxed);
    snprintf(cap.op, sizeof cap.op, "matmul");
    cc_policy_requirements(&pol, &cap, CC_F16, &q);
    assert_false(q.allow_relaxed);
    assert_int_equal(cc_policy_parse("format capcheck-policy/1\naccumulation loose\n", "t", &pol,
                                     msg, sizeof msg),
                     -1);
    assert_non_null(strstr(msg, "accumulation is strict or relaxed"));
}

/* ---- detection power ----------------------------------------------------------------------- */

/* One f32 element with expected 1 and error e, bound 2 (2^-24 + 2^-53) * 1 + floor: scaling the
 * error by k is rejected at the first ladder step k with k e > bound; j ulps at 2^-23 apart. */
static void test_power_ladder_matches_the_bound(void **state)
{
    (void)state;
    cc_bound_model m = cc_bound_for(CC_F32, 2.0);
    double expected[1] = {1.0}, mag[1] = {1.0};
    float got[1] = {1.0f + 0x1p-23f}; /* one ulp up: error 2^-23, ratio about 1 / 2.0000 */
    cc_view v = cc_t_vector_view(CC_F32, got, 1);
    cc_power pw;
    cc_power_init(&pw);
    cc_power_of_check(expected, &(ref_mag){mag, NULL, NULL}, &v, &m, &pw);
    /* the bound is 2 u = 2^-23 (+ tiny): k = 1 and 1.41 (which rounds back to one ulp) stay
     * inside, k = 2 (two ulps) is out */
    assert_true(pw.k_fail == 2.0);
    /* adding 1 ulp more makes 2 ulps, over the bound */
    assert_true(pw.ulp_fail == 1.0);
    /* the suspect bound of a pointwise magnitude is lambda times wider */
    assert_true(pw.ulp_suspect >= pw.ulp_fail);
    /* an exact output has no k (k times no error is no error) */
    got[0] = 1.0f;
    cc_power_init(&pw);
    cc_power_of_check(expected, &(ref_mag){mag, NULL, NULL}, &v, &m, &pw);
    assert_true(isnan(pw.k_fail));
    assert_true(pw.ulp_fail == 2.0);
}

static void test_power_command_tabulates_a_run(void **state)
{
    (void)state;
    char out[16384], path[256];
    snprintf(path, sizeof path, "%s/p.cases", tmp);
    cc_t_write(path, "reduceSum count=4 dtype=f32,f16 size=small\n"
                     "relu count=2 dtype=f32 size=small\n");
    int rc = cc_t_run(in_tmp, "run p.cases --provider reference --power -j 1 --out p", out,
                      sizeof out);
    assert_int_equal(rc, 0);
    rc = cc_t_run(in_tmp, "power p --markdown p.md", out, sizeof out);
    if (rc != 0)
        fail_msg("capcheck power: %s", out);
    assert_non_null(strstr(out, "| reduceSum | f16 | cpu | 4 | 4 |"));
    assert_non_null(strstr(out, "| relu | f32 | cpu | 2 | 2 | exact | exact |"));
    snprintf(path, sizeof path, "%s/p.md", tmp);
    char *md = cc_t_slurp(path, NULL);
    assert_non_null(md);
    assert_non_null(strstr(md, "| op | dtype | device | cases | passing | k fail"));
    free(md);
    /* beside the relaxed model's run: the f16 sum rejects a smaller k strict than relaxed */
    assert_int_equal(cc_t_run(in_tmp, "run p.cases --provider reference --power -j 1 "
                                      "--accumulation relaxed --out pr",
                              out, sizeof out),
                     0);
    assert_int_equal(cc_t_run(in_tmp, "power p --before pr", out, sizeof out), 0);
    assert_non_null(strstr(out, "(relaxed, \"before\": each cell before → after)"));
    assert_non_null(strstr(out, "| reduceSum | f16 | cpu | 4 | 4 | "));
    assert_non_null(strstr(out, " → "));
    /* a run without --power has nothing to tabulate; bad arguments are one sentence */
    assert_int_equal(cc_t_run(in_tmp, "run p.cases --provider reference -j 1 --out np", out,
                              sizeof out),
                     0);
    assert_int_equal(cc_t_run(in_tmp, "power np", out, sizeof out), 2);
    assert_non_null(strstr(out, "has no power figures"));
    assert_int_equal(cc_t_run(NULL, "power", out, sizeof out), 2);
    assert_int_equal(cc_t_run(in_tmp, "power none", out, sizeof out), 2);
    assert_int_equal(cc_t_run(NULL, "repro 'relu dtype=f32 in=[3]' --power", out, sizeof out), 2);
    assert_non_null(strstr(out, "--power does not apply to repro"));
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/capcheck_bounds_XXXXXX");
    if (!mkdtemp(tmp))
        return -1;
    snprintf(in_tmp, sizeof in_tmp, "cd %s && ", tmp);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return cc_t_remove_dir(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vacuous_elements_and_checks),
        cmocka_unit_test(test_long_bf16_sum_is_vacuous_only_when_relaxed),
        cmocka_unit_test(test_dtype_accumulation_fails_strict_passes_relaxed),
        cmocka_unit_test(test_suspect_is_flagged_counted_and_a_policy_failure),
        cmocka_unit_test(test_power_ladder_matches_the_bound),
        cmocka_unit_test(test_power_command_tabulates_a_run),
    };
    return cmocka_run_group_tests_name("bounds", tests, setup, teardown);
}
