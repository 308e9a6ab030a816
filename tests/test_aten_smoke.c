/* The integration test that loads libtorch: the smoke suite passes on ATen CPU with zero
 * failures under strict accumulation (and cases/smoke_relaxed.cases, the f16/bf16 directions
 * whose ATen kernels fold sums in the dtype, under relaxed), and three planted bugs wrapped around the ATen provider are each caught:
 * softmax over the wrong axis, linear's VJP dropping the bias gradient, exp 64 ULP off in f32.
 * (The planted bugs live here, not in the product.) The known deviations, crashes and
 * unsupported combinations meet their platform-scoped expectations here, and at every CPU
 * dispatch level this machine supports, where the smoke suite passes too. The Python
 * reproducers (harness/tools/reproducer.h) make the shim's calls: every smoke case through both
 * gives the same bits and the same verdict; one reproducer per op exits 0 passing, 1 under a
 * perturbed bound, 125 where nothing can be judged (tests/aten_lowering_check.py). */
#include "cli_util.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>

#include "harness/case/case.h"
#include "harness/report/expect.h"
#include "harness/run/platform.h"
#include "core/dtype.h"
#include "harness/case/materialize.h"
#include "harness/run/pool.h"
#include "harness/run/runner.h"
#include "harness/tools/reproducer.h"
#include "reference/ref_families.h"
#include "skip_util.h"
#include "test_util.h"

#define VENV_PYTHON CAPCHECK_SOURCE_DIR "/.venv/bin/python"

static cc_case_list smoke;
static const cc_provider *aten;
static cc_platform here; /* this process's platform: the machine as it is */

static int setup(void **state)
{
    (void)state;
    aten = cc_aten_provider();
    if (!aten)
        return -1;
    char msg[256];
    if (aten->init(aten->ctx, CC_CPU, msg, sizeof msg) != CC_OK)
        return -1;
    char desc[512];
    aten->describe(aten->ctx, desc, sizeof desc);
    cc_platform_detect(desc, CC_CPU, "native", &here);
    printf("platform here: %s\n", here.key);
    return cc_t_load_cases("cases/smoke.cases", &smoke);
}

static int teardown(void **state)
{
    (void)state;
    cc_case_list_free(&smoke);
    return 0;
}

/* ---- the Python reproducers: the same ATen calls as the shim -------------------------------- */

/* Run `tests/aten_lowering_check.py MODE ARG` with the project's Python; its exit code, -1 when
 * there is no such Python (then nothing is checked, and the test says so). */
static int lowering_check(const char *mode, const char *arg)
{
    if (access(VENV_PYTHON, X_OK) != 0) {
        printf("no %s: the reproducers' Python side is not checked here\n", VENV_PYTHON);
        return -1;
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' -W ignore " CAPCHECK_SOURCE_DIR
                              "/tests/aten_lowering_check.py %s '%s'",
             VENV_PYTHON, mode, arg);
    fflush(NULL);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
}

/* lowering_check(mode, path), then path removed (unless CAPCHECK_KEEP_RECORDS is set, to look at
 * it); a fault there fails the test with `what`. */
static void lowering_check_then_remove(const char *mode, const char *path, const char *what)
{
    int rc = lowering_check(mode, path);
    if (!getenv("CAPCHECK_KEEP_RECORDS"))
        cc_t_remove_dir(path);
    if (rc > 0)
        fail_msg("%s (lines above)", what);
}

/* Case c run on ATen here (every element judged) into *r, and its record for the lowering
 * check on f: its DATA with the shim's output bytes and capcheck's verdict. */
static void run_and_record(FILE *f, const cc_case *c, cc_result *out)
{
    cc_repro_outputs outs;
    cc_judge_tap tap;
    cc_repro_outputs_tap(&outs, &tap);
    cc_run_options o = {.threads = 1, .ref = CC_REF_FULL, .tap = &tap};
    cc_result r;
    cc_run_case_probed(aten, c, &o, NULL, &r);
    *out = r;
    cc_inputs in; /* laid out as the run laid them out: the same alignment */
    char msg[256], said[600];
    if (cc_materialize_in(c, 1, NULL, CC_PLACE_END, 1, &in, msg, sizeof msg))
        fail_msg("%s: %s", r.line, msg);
    snprintf(said, sizeof said, "%s: %s", cc_result_status_name(r.status), r.message);
    cc_reproducer_info info = {.capcheck_said = said, .with_got = 1, .one_line = 1};
    assert_int_equal(outs.failed, 0);
    assert_int_equal(cc_reproducer_write_data(f, c, &in, &outs, &info), 0);
    fputc('\n', f);
    cc_inputs_free(&in);
    cc_repro_outputs_free(&outs);
}

/* The records of the smoke cases and the known unsupported combinations for
 * test_reproducer_lowering_is_the_shims (written by the smoke run: one ATen pass for both). */
static char records[128];

static void test_smoke_passes_on_aten_cpu(void **state)
{
    (void)state;
    snprintf(records, sizeof records, "/tmp/capcheck_lowering.%d.jsonl", (int)getpid());
    FILE *f = fopen(records, "w");
    assert_non_null(f);
    long passed = 0, suspect = 0, not_passed = 0;
    char first[2 * CC_CASE_LINE_MAX] = "";
    for (size_t i = 0; i < smoke.n; i++) {
        cc_result r;
        run_and_record(f, &smoke.v[i], &r);
        passed += r.status == CC_RES_PASS;
        suspect += r.status == CC_RES_PASS && r.suspect;
        if (r.status != CC_RES_PASS && !not_passed++)
            snprintf(first, sizeof first, "%s -> %s: %s", r.line, cc_result_status_name(r.status),
                     r.message);
    }
    cc_case_list unsup = {0};
    assert_int_equal(cc_t_load_cases("cases/aten_unsupported.cases", &unsup), 0);
    for (size_t i = 0; i < unsup.n; i++) {
        cc_result r;
        run_and_record(f, &unsup.v[i], &r);
    }
    cc_case_list_free(&unsup);
    assert_int_equal(fclose(f), 0);
    printf("smoke on ATen CPU: %zu cases, %ld passed, %ld suspect\n", smoke.n, passed, suspect);
    assert_true(smoke.n >= 400);
    if (not_passed)
        fail_msg("%ld smoke cases did not pass on ATen CPU; first: %s", not_passed, first);
    assert_int_equal(suspect, 0);
}

/* The f16/bf16 directions ATen CPU folds in the dtype pass under the relaxed model, with no
 * suspect case (their strict failures are cases/regressions/accumulation.cases). */
static void test_relaxed_smoke_passes_on_aten_cpu(void **state)
{
    (void)state;
    cc_case_list l = {0};
    if (cc_t_load_cases("cases/smoke_relaxed.cases", &l))
        fail_msg("cannot parse cases/smoke_relaxed.cases");
    cc_run_options relaxed = {.accumulation = CC_ACC_RELAXED};
    long passed = 0;
    for (size_t i = 0; i < l.n; i++) {
        cc_result r;
        cc_run_case_probed(aten, &l.v[i], &relaxed, NULL, &r);
        assert_int_equal(r.accumulation, CC_ACC_RELAXED);
        if (r.status != CC_RES_PASS || r.suspect)
            fail_msg("%s: %s%s under relaxed accumulation: %s", r.line,
                     cc_result_status_name(r.status), r.suspect ? " (suspect)" : "", r.message);
        passed++;
    }
    printf("relaxed smoke on ATen CPU: %ld of %zu cases passed\n", passed, l.n);
    assert_true(l.n >= 100);
    cc_case_list_free(&l);
}

/* ---- planted bugs: each wraps the ATen provider and corrupts one op ---------------------- */

static cc_status softmax_wrong_axis_fwd(void *ctx, const cc_call *call, cc_view *out,
                                        char *msg, size_t len)
{
    (void)ctx;
    cc_call c = *call;
    ref_params p = *call->params;
    int rank = call->in[0].rank;
    if (strcmp(call->op, "softmax") == 0 && rank >= 2) {
        p.axis = (ref_norm_axis(p.axis, rank) + 1) % rank;
        c.params = &p;
    }
    return aten->forward(aten->ctx, &c, out, msg, len);
}

static cc_status linear_drops_bias_grad_vjp(void *ctx, const cc_call *call, const cc_view *g,
                                            cc_view *grads, char *msg, size_t len)
{
    (void)ctx;
    cc_status st = aten->vjp(aten->ctx, call, g, grads, msg, len);
    if (st == CC_OK && strcmp(call->op, "linear") == 0 && grads[2].data) {
        int64_t n = grads[2].shape[0];
        memset(grads[2].data, 0, (size_t)n * cc_dtype_size(call->dtype));
    }
    return st;
}

static cc_status exp_64ulp_fwd(void *ctx, const cc_call *call, cc_view *out, char *msg,
                               size_t len)
{
    (void)ctx;
    cc_status st = aten->forward(aten->ctx, call, out, msg, len);
    if (st == CC_OK && strcmp(call->op, "exp") == 0 && call->dtype == CC_F32) {
        int64_t n = 1;
        for (int i = 0; i < out->rank; i++)
            n *= out->shape[i];
        for (int64_t i = 0; i < n; i++) {
            float *f = (float *)out->data + i;
            if (isfinite(*f) && *f != 0) {
                uint32_t bits;
                memcpy(&bits, f, 4);
                bits += 64; /* 64 units in the last place, same sign */
                memcpy(f, &bits, 4);
            }
        }
    }
    return st;
}

static cc_status passthrough_fwd(void *ctx, const cc_call *call, cc_view *out, char *msg,
                                 size_t len)
{
    (void)ctx;
    return aten->forward(aten->ctx, call, out, msg, len);
}

static cc_status passthrough_vjp(void *ctx, const cc_call *call, const cc_view *g,
                                 cc_view *grads, char *msg, size_t len)
{
    (void)ctx;
    return aten->vjp(aten->ctx, call, g, grads, msg, len);
}

/* A copy of the ATen provider with one entry point replaced. */
static cc_provider planted(const char *name,
                           cc_status (*fwd)(void *, const cc_call *, cc_view *, char *, size_t),
                           cc_status (*vjp)(void *, const cc_call *, const cc_view *, cc_view *,
                                            char *, size_t))
{
    cc_provider p = *aten;
    p.name = name;
    p.forward = fwd ? fwd : passthrough_fwd;
    p.vjp = vjp ? vjp : passthrough_vjp;
    return p;
}

static void expect_caught(const cc_provider *bad, const char *op)
{
    cc_t_tally t = cc_t_run_all(bad, &smoke, op);
    printf("planted bug %s: caught by %ld of %ld %s cases\n", bad->name, t.not_passed, t.cases,
           op);
    assert_true(t.cases > 0);
    if (t.not_passed == 0)
        fail_msg("planted bug %s was not caught by any of the %ld %s smoke cases", bad->name,
                 t.cases, op);
    /* the wrapper without the bug raises no alarm */
    cc_provider clean = planted("passthrough", NULL, NULL);
    assert_int_equal(cc_t_run_all(&clean, &smoke, op).not_passed, 0);
}

static void test_softmax_wrong_axis_is_caught(void **state)
{
    (void)state;
    cc_provider bad = planted("softmax-wrong-axis", softmax_wrong_axis_fwd, NULL);
    expect_caught(&bad, "softmax");
}

/* Sampled checks give the full checks' verdicts on ATen's kernels too: every smoke case of an
 * op with a sampled form, checked on its sample, passes as it does in full (and cases/realistic
 * is sampled by default: tests/test_sampled.c covers planted bugs). */
static void test_sampled_checks_pass_on_aten_cpu(void **state)
{
    (void)state;
    cc_run_options sampled = {.threads = 1, .ref = CC_REF_SAMPLED};
    long cases = 0, was_sampled = 0;
    for (size_t i = 0; i < smoke.n; i++) {
        if (!smoke.v[i].op->forward_at)
            continue;
        cc_result r;
        cc_run_case_probed(aten, &smoke.v[i], &sampled, NULL, &r);
        if (r.status != CC_RES_PASS)
            fail_msg("sampled on ATen: %s (%s): %s", cc_result_status_name(r.status), r.message,
                     r.line);
        cases++;
        was_sampled += r.sampled;
    }
    printf("smoke cases of the sampled ops on ATen CPU, checked on samples: %ld passed (%ld "
           "sampled; the rest have non-finite inputs)\n",
           cases, was_sampled);
    assert_true(cases > 0 && was_sampled > cases / 2);
}

static void test_linear_dropped_bias_gradient_is_caught(void **state)
{
    (void)state;
    cc_provider bad = planted("linear-drops-bias-grad", NULL, linear_drops_bias_grad_vjp);
    expect_caught(&bad, "linear");
}

static void test_exp_64_ulp_is_caught(void **state)
{
    (void)state;
    cc_provider bad = planted("exp-64-ulp-f32", exp_64ulp_fwd, NULL);
    expect_caught(&bad, "exp");
}

/* ---- known deviations, crashes and unsupported combinations, on this machine's platform ---- */

/* Run every case of `path` here, on this machine's platform, and judge each result against the
 * file's "#! seen" directives (harness/report/expect.h); counts[outcome] += 1 per case. Every case
 * must have a directive. */
static void judge_file(const char *path, long *total, long counts[CC_EXPECT_COUNT])
{
    cc_case_list l = {0};
    if (cc_t_load_cases(path, &l))
        fail_msg("cannot parse %s", path);
    cc_expectations e = {0};
    cc_case_defaults def = {CC_CPU, 0};
    cc_parse_error err;
    if (cc_expect_load(path, &def, &e, &err))
        fail_msg("%s:%d: %s", err.file, err.line, err.msg);
    for (size_t i = 0; i < l.n; i++) {
        cc_result r;
        cc_run_case(aten, &l.v[i], &r);
        snprintf(r.platform, sizeof r.platform, "%s", here.key);
        const cc_expectation *x = cc_expect_find(&e, r.line);
        if (!x)
            fail_msg("%s: '%s' has no '#! seen' directive", path, r.line);
        char msg[1024];
        cc_expect_outcome o = cc_expect_judge(x, &r, msg, sizeof msg);
        counts[o]++;
        if (o != CC_EXPECT_REPRODUCED)
            printf("  %s: %s\n    %s\n", cc_expect_outcome_name(o), msg, r.line);
    }
    *total += (long)l.n;
    cc_expect_free(&e);
    cc_case_list_free(&l);
}

static void assert_no_broken(const char *what, long total, const long counts[CC_EXPECT_COUNT])
{
    printf("%s on %s: %ld cases: %ld reproduced, %ld did not reproduce, %ld also seen, %ld "
           "broken, %ld crash, %ld unexpected\n",
           what, here.key, total, counts[CC_EXPECT_REPRODUCED], counts[CC_EXPECT_NOT_REPRODUCED],
           counts[CC_EXPECT_ALSO_SEEN], counts[CC_EXPECT_BROKEN], counts[CC_EXPECT_CRASH],
           counts[CC_EXPECT_UNEXPECTED]);
    for (int o = 0; o < CC_EXPECT_COUNT; o++)
        if (cc_expect_is_failure((cc_expect_outcome)o) && counts[o])
            fail_msg("%s: %ld %s on %s", what, counts[o],
                     cc_expect_outcome_name((cc_expect_outcome)o), here.key);
}

/* What ATen does not implement comes back unsupported where that was seen: never a pass where
 * it was seen, never a crash. */
static void test_unimplemented_combinations_are_unsupported(void **state)
{
    (void)state;
    long total = 0, counts[CC_EXPECT_COUNT] = {0};
    judge_file("cases/aten_unsupported.cases", &total, counts);
    assert_true(total > 0);
    assert_no_broken("unsupported combinations", total, counts);
}

/* The known ATen deviations kept in cases/regressions/ still fail on the platforms they were
 * seen on (when one starts passing there, ATen changed and docs/aten.md's list must follow);
 * elsewhere a pass is "did not reproduce", never a failure. */
static void test_known_aten_deviations_still_fail(void **state)
{
    (void)state;
    DIR *d = opendir("cases/regressions");
    assert_non_null(d);
    long total = 0, counts[CC_EXPECT_COUNT] = {0};
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 7 || strcmp(e->d_name + n - 6, ".cases") != 0)
            continue;
        char path[512];
        snprintf(path, sizeof path, "cases/regressions/%s", e->d_name);
        judge_file(path, &total, counts);
    }
    closedir(d);
    assert_true(total >= 5);
    assert_no_broken("known ATen deviations", total, counts);
}

/* The ATen crashes kept in cases/regressions/crashes/ still crash where they were seen, each
 * isolated in a worker of the capcheck binary (the run goes on and reports them); elsewhere
 * they do not reproduce, and a crash there would be a failure. */
static void test_known_aten_crashes_still_crash(void **state)
{
    (void)state;
    const char *path = CAPCHECK_SOURCE_DIR "/cases/regressions/crashes/convTranspose.cases";
    char out[16384], args[1024], dir[] = "/tmp/capcheck_aten_crashes_XXXXXX";
    assert_non_null(mkdtemp(dir)); /* tests of other checkouts run too */
    snprintf(args, sizeof args,
             "run " CAPCHECK_SOURCE_DIR "/cases/regressions/crashes/convTranspose.cases "
             "-j 1 --expect --out %s/run", dir);
    int rc = cc_t_run(NULL, args, out, sizeof out);
    cc_t_remove_dir(dir);
    if (rc != 0)
        fail_msg("the crash expectations do not hold on %s:\n%s", here.key, out);
    expect_in(out, "2 cases on aten");
    cc_expectations e = {0};
    cc_case_defaults def = {CC_CPU, 0};
    cc_parse_error err;
    assert_int_equal(cc_expect_load(path, &def, &e, &err), 0);
    assert_int_equal(e.n, 2);
    int seen_here = 0;
    for (int k = 0; k < e.v[0].n_keys; k++)
        seen_here |= strcmp(e.v[0].keys[k], here.key) == 0;
    cc_expect_free(&e);
    if (seen_here) {
        expect_in(out, "(2 crashed, 0 timed out)");
        expect_in(out, "reproduced 2,");
    } else {
        expect_in(out, "did-not-reproduce 2,");
    }
    printf("the crash cases on %s: %s\n", here.key, seen_here ? "crashed, as seen" :
                                                                "did not reproduce");
}

/* The reproducers' lowering (providers/aten/aten_lowering.py) makes the shim's calls: every
 * smoke case and every known unsupported combination through both, in one Python process,
 * outputs equal bit for bit, unsupported and failing alike, and the reproducers' judgement of
 * every element equal to capcheck's verdict. */
static void test_reproducer_lowering_is_the_shims(void **state)
{
    (void)state;
    if (!records[0])
        fail_msg("no records: test_smoke_passes_on_aten_cpu writes them");
    lowering_check_then_remove("records", records,
                               "the reproducers' lowering and the ATen shim disagree");
}

/* A number as JSON with Python's names of the non-finite ones. */
static void put_num(FILE *f, const char *sep, double x)
{
    if (isnan(x))
        fprintf(f, "%sNaN", sep);
    else if (isinf(x))
        fprintf(f, "%s%sInfinity", sep, x < 0 ? "-" : "");
    else
        fprintf(f, "%s%.17g", sep, x);
}

/* One synthetic output judged by capcheck (compare.c, zero_trust.c) as a record of the judge
 * check: what a reproducer ships of it (the tap's copy) and capcheck's own verdict on `got`. */
static cc_comparison judge_record_in(FILE *f, cc_dtype t, const cc_bound_model *model,
                            const double *expected, const double *got, const ref_mag *m,
                            int64_t n, int nonfinite, const double *source)
{
    cc_view v = {t, 1, {n}, {1}, malloc(cc_dtype_size(t) * (size_t)(n ? n : 1))};
    for (int64_t i = 0; i < n; i++)
        cc_store(t, v.data, i, got[i]);
    cc_bound_model bm = *model;
    bm.nonfinite_alike = nonfinite;
    cc_zt_source src = {"x", source, n};
    cc_comparison cmp;
    cc_compare(expected, m, &v, &bm, &cmp);
    cc_judged_output o = {"y", &v, expected, m, NULL, n, &bm, 2.0, &src, source ? 1 : 0, 0, &cmp};
    cc_repro_outputs outs;
    cc_judge_tap tap;
    cc_repro_outputs_tap(&outs, &tap);
    tap.seen(tap.ctx, &o);
    char msg[384];
    cc_zt_verdict zt = cc_zero_trust("y", expected, m->worst, 2.0, &v, &src, source ? 1 : 0, msg,
                                     sizeof msg);
    const cc_repro_output *r = &outs.out[0];
    fprintf(f, "{\"n_over\": %lld, \"zero_trust_fails\": %s, \"biased\": %s, "
               "\"nonfinite_alike\": %s, "
               "\"zero_trust\": {\"all_zero\": %s, \"all_equal\": %s, \"copy_of\": %s}, ",
            (long long)cmp.n_over, zt != CC_ZT_OK ? "true" : "false",
            cmp.bias.biased ? "true" : "false", nonfinite ? "true" : "false",
            r->zt_all_zero ? "true" : "false", r->zt_all_equal ? "true" : "false",
            r->zt_copy_of & 1 ? "[0]" : "[]");
    if (r->bias_test) {
        fprintf(f, "\"bias\": {\"threshold\": %.17g, \"at\": [", cc_bias_z_threshold());
        for (int64_t i = 0, first = 1; i < n; i++)
            if (r->bias_candidate[i]) {
                fprintf(f, "%s%lld", first ? "" : ", ", (long long)i);
                first = 0;
            }
        fputs("]}, ", f);
    }
    fputs("\"got\": [", f);
    for (int64_t i = 0; i < n; i++)
        put_num(f, i ? ", " : "", cc_load(t, v.data, i));
    fputs("], \"source\": [", f);
    for (int64_t i = 0; source && i < n; i++)
        put_num(f, i ? ", " : "", source[i]);
    fputs("], \"expected\": [", f);
    for (int64_t i = 0; i < n; i++)
        put_num(f, i ? ", " : "", r->expected[i]);
    fputs("], \"bound\": [", f);
    for (int64_t i = 0; i < n; i++)
        put_num(f, i ? ", " : "", r->bound[i]);
    fputs("], \"overflow_ok\": [", f);
    for (int64_t i = 0, first = 1; i < n; i++)
        if (r->overflow_ok[i]) {
            fprintf(f, "%s%lld", first ? "" : ", ", (long long)i);
            first = 0;
        }
    fputs("]}\n", f);
    cc_repro_outputs_free(&outs);
    free(v.data);
    return cmp;
}

/* judge_record_in for an f32 output of c_op 2 whose magnitudes are `mag` alone. */
static void judge_record(FILE *f, const double *expected, const double *got, const double *mag,
                         int64_t n, int nonfinite, const double *source)
{
    cc_bound_model bm = cc_bound_for(CC_F32, 2.0);
    ref_mag m = {(double *)mag, NULL, NULL};
    (void)judge_record_in(f, CC_F32, &bm, expected, got, &m, n, nonfinite, source);
}

/* The reproducers judge as capcheck judges (compare.c, zero_trust.c): on a table of
 * synthetic outputs (every element rule: within, just over and far over the bound, NaN, +-Inf,
 * the overflow of a finite value, the non-finite rule of edge=nan/inf; all zeros, a constant, a
 * copy of an input, each where the reference rules it out and where it does not) the Python
 * judge counts the same elements over their bound and fails zero-trust the same way. */
static void test_reproducer_judges_as_capcheck(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "/tmp/capcheck_judge.%d.jsonl", (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    const double inf = INFINITY, big = 3.3e38, tiny = 1e-40;
    const double es[] = {0.0, 1.0, -2.5, tiny, NAN, inf, -inf, big, -big};
    int rows = 0;
    for (int nf = 0; nf < 2; nf++)
        for (size_t k = 0; k < sizeof es / sizeof es[0]; k++) {
            double e = es[k], m = isfinite(e) ? fabs(e) + 1.0 : 1.0;
            cc_bound_model f32_model = cc_bound_for(CC_F32, 2.0);
            double b = cc_element_bound(&f32_model, (cc_element_mag){m, m, m});
            double gs[] = {e, e + 0.5 * b, e + 1.5 * b, e + 40 * b, NAN, inf, -inf, 0.0};
            enum { N = sizeof gs / sizeof gs[0] };
            double exp[N], mag[N];
            for (int i = 0; i < N; i++)
                exp[i] = e, mag[i] = m;
            judge_record(f, exp, gs, mag, N, nf, NULL);
            rows++;
        }
    const double ref[] = {1.0, 2.0, 3.0, 4.0}, zero[] = {0, 0, 0, 0}, one[] = {1, 1, 1, 1};
    /* magnitudes that make every bound admit all these values: zero-trust alone decides */
    const double mag4[] = {1e9, 1e9, 1e9, 1e9}, src[] = {5, 6, 7, 8};
    judge_record(f, ref, zero, mag4, 4, 0, NULL);  /* all zeros where the reference is not */
    judge_record(f, zero, zero, mag4, 4, 0, NULL); /* all zeros where it is */
    judge_record(f, one, zero, mag4, 4, 0, NULL);  /* all zeros where it is constant, not 0 */
    judge_record(f, ref, one, mag4, 4, 0, NULL);   /* a constant where it is not */
    judge_record(f, one, one, mag4, 4, 0, NULL);   /* a constant where it is */
    judge_record(f, ref, src, mag4, 4, 0, src);    /* a copy of x where the reference differs */
    judge_record(f, src, src, mag4, 4, 0, src);    /* a copy of x where it does not */
    /* A long sum that cancels: its worst-case bound (m_i = 1e9) admits every value, its
     * probabilistic bound (sqrt(n) for n: prob_i = 1e3) judges; one element 3.6 of those
     * bounds off, one 0.01 of it. */
    const double prob_exp[] = {1.0, -1.0, 0.5, 2.0}, prob_worst[] = {1e9, 1e9, 1e9, 1e9};
    const double prob_prob[] = {1e3, 1e3, 1e3, 1e3};
    double prob_bound = 6.0 * (0x1p-24 + 0x1p-53) * 1e3;
    const double prob_got[] = {1.0 + 3.6 * prob_bound, -1.0, 0.5 + 0.01 * prob_bound, 2.0};
    cc_bound_model f32 = cc_bound_for(CC_F32, 2.0);
    assert_true(f32.prob_judges);
    ref_mag prob_mag = {(double *)prob_worst, (double *)prob_worst, (double *)prob_prob};
    cc_comparison c = judge_record_in(f, CC_F32, &f32, prob_exp, prob_got, &prob_mag, 4, 0, NULL);
    assert_true(c.n_over == 1 && c.n_prob == 4 && c.worst_by_prob);
    /* An f16 output of 64 distinct values, half of them negative, 0.3 or 0.7 of an ulp past
     * the f16 grid in magnitude, final roundings of a float32 accumulation of 16 terms (dtype_i
     * = |y|, m_i = 16 |y|, prob_i = 4 |y|): rounded to nearest (half toward zero, half below)
     * and truncated (all 64 toward zero, z = 8, but half below: the test must look both ways;
     * every element within its bound). */
    enum { NB = 64 };
    double be[NB], bw[NB], bd[NB], bp[NB], nearest[NB], truncated[NB];
    for (int i = 0; i < NB; i++) {
        double sign = i % 4 < 2 ? 1.0 : -1.0;
        be[i] = sign * (1.0 + (i + (i % 2 ? 0.7 : 0.3)) * 0x1p-10);
        bd[i] = fabs(be[i]), bw[i] = 16.0 * bd[i], bp[i] = 4.0 * bd[i];
        nearest[i] = cc_round_to(CC_F16, be[i]);
        truncated[i] = sign * (1.0 + i * 0x1p-10);
    }
    cc_bound_model f16 = cc_bound_for_judging(CC_F16, 0.0, 2.0, CC_ACC_STRICT);
    assert_true(f16.bias_test);
    ref_mag bias_mag = {bw, bd, bp};
    c = judge_record_in(f, CC_F16, &f16, be, nearest, &bias_mag, NB, 0, NULL);
    assert_true(c.n_over == 0 && c.bias.n == NB && !c.bias.biased);
    c = judge_record_in(f, CC_F16, &f16, be, truncated, &bias_mag, NB, 0, NULL);
    assert_true(c.n_over == 0 && c.bias.n == NB && c.bias.toward_zero == NB &&
                c.bias.below == NB / 2 && c.bias.biased);
    assert_int_equal(fclose(f), 0);
    printf("%d element rows, 7 zero-trust rows, a row the probabilistic bound judges and 2 rows "
           "of the rounding-bias test judged by capcheck and by the reproducer\n", rows);
    lowering_check_then_remove("judge", path, "the reproducer's judgement is not capcheck's");
}

/* A reproducer for every op the ATen provider runs: one smoke case per op (a plain one: no edge
 * class, no empty tensor, forward and VJP where the op has one) passes on it (exit 0) and fails
 * once one expected value of each output moves three bounds (exit 1); a combination ATen does
 * not implement cannot be judged (exit 125); a known deviation seen on this platform fails
 * (exit 1). As processes: a passing one, its perturbed copy, and one on an absent device. */
/* DIR/NAME.py: the reproducer of case c, and its line "NAME.py CODE" in the manifest m. */
static void write_reproducer(const char *dir, const char *name, const cc_case *c, FILE *m,
                             int code)
{
    char script[256], msg[256];
    snprintf(script, sizeof script, "%s/%s.py", dir, name);
    FILE *f = fopen(script, "w");
    assert_non_null(f);
    cc_reproducer_info info = {.python = VENV_PYTHON};
    if (cc_reproducer_write(c, aten, CC_ACC_STRICT, &info, f, msg, sizeof msg))
        fail_msg("%s: %s", name, msg);
    assert_int_equal(fclose(f), 0);
    fprintf(m, "%s.py %d\n", name, code);
}

static void test_a_reproducer_for_every_op(void **state)
{
    (void)state;
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/capcheck_reproducers_XXXXXX");
    assert_non_null(mkdtemp(dir));
    char manifest[128];
    snprintf(manifest, sizeof manifest, "%s/expect.txt", dir);
    FILE *m = fopen(manifest, "w");
    assert_non_null(m);
    int ops = 0;
    for (int i = 0; i < ref_spec_op_count(); i++) {
        const char *name = ref_spec_op_name(i);
        const cc_case *pick = NULL; /* forward and VJP where a plain case checks both */
        for (int both = 1; both >= 0 && !pick; both--)
            for (size_t k = 0; k < smoke.n && !pick; k++) {
                const cc_case *c = &smoke.v[k];
                int empty = 0;
                for (int j = 0; j < c->n_in; j++)
                    empty |= ref_numel(&c->shape[j]) == 0;
                if (strcmp(c->op->name, name) == 0 && !c->edges && !empty &&
                    (!both || c->check == CC_CHECK_BOTH))
                    pick = c;
            }
        if (!pick)
            fail_msg("no plain smoke case of %s for its reproducer", name);
        write_reproducer(dir, name, pick, m, 0);
        ops++;
    }
    /* nothing to judge: ATen has no f16 FFT on the CPU */
    cc_case_list l = {0};
    assert_int_equal(cc_t_load_cases("cases/aten_unsupported.cases", &l), 0);
    write_reproducer(dir, "unsupported", &l.v[0], m, 125);
    cc_case_list_free(&l);
    /* a deviation this platform shows: the reproducer fails as capcheck does */
    cc_expectations e = {0};
    cc_case_defaults def = {CC_CPU, 0};
    cc_parse_error err;
    assert_int_equal(cc_expect_load("cases/regressions/accumulation.cases", &def, &e, &err), 0);
    const cc_expectation *seen = NULL;
    for (size_t k = 0; k < e.n && !seen; k++)
        for (int j = 0; j < e.v[k].n_keys; j++)
            if (e.v[k].status == CC_RES_FAIL && !e.v[k].intermittent &&
                strcmp(e.v[k].keys[j], here.key) == 0)
                seen = &e.v[k];
    if (seen) {
        cc_case c;
        assert_int_equal(cc_case_parse(seen->line, &def, &c, &err), 0);
        write_reproducer(dir, "deviation", &c, m, 1);
        printf("the deviation seen on %s: %s\n", here.key, seen->line);
    } else {
        printf("no deviation of cases/regressions/accumulation.cases is seen on %s\n", here.key);
    }
    cc_expect_free(&e);
    assert_int_equal(fclose(m), 0);
    printf("%d reproducers, one per op\n", ops);
    assert_int_equal(ops, ref_spec_op_count());
    lowering_check_then_remove("scripts", dir, "a reproducer did not exit as expected");
}

/* Every CPU dispatch level this machine supports: the smoke suite passes at each, and every
 * regression, crash and unsupported expectation holds at each (through the binary: each level
 * is set in its workers before ATen starts). */
static void test_every_dispatch_level(void **state)
{
    (void)state;
    char flags[256], msg[256];
    cc_cpu_flags(flags, sizeof flags);
    int levels[CC_MAX_LEVELS];
    int n = cc_levels_parse("all", flags, levels, CC_MAX_LEVELS, msg, sizeof msg);
    assert_true(n >= 1);
    static char out[1 << 16];
    char args[2048], dir[] = "/tmp/capcheck_levels_XXXXXX";
    assert_non_null(mkdtemp(dir));
    snprintf(args, sizeof args, "run --cpu-capability all -j 2 --out %s/smoke", dir);
    int rc = cc_t_run(NULL, args, out, sizeof out);
    if (rc != 0)
        fail_msg("the smoke suite does not pass at every level:\n%.4000s", out);
    for (int k = 0; k < n; k++) {
        char want[64];
        snprintf(want, sizeof want, "level %s (platform ", cc_level_name(levels[k]));
        expect_in(out, want);
    }
    snprintf(args, sizeof args,
             "run " CAPCHECK_SOURCE_DIR "/cases/regressions/*.cases " CAPCHECK_SOURCE_DIR
             "/cases/regressions/crashes/*.cases " CAPCHECK_SOURCE_DIR
             "/cases/aten_unsupported.cases --cpu-capability all --expect -j 2 --out %s/expect",
             dir);
    rc = cc_t_run(NULL, args, out, sizeof out);
    cc_t_remove_dir(dir);
    if (rc != 0)
        fail_msg("the regression expectations do not hold at every level:\n%.6000s", out);
    expect_in(out, "broken 0, crash 0, unexpected 0");
    const char *line = strstr(out, "capcheck: expectations:");
    printf("%d levels; %.*s\n", n, line ? (int)strcspn(line, "\n") : 4, line ? line : "none");
}

/* Results that depend on where the buffers sit (cases/regressions/repeat/: MKL's alignment-
 * dependent kernels) show under --repeat 2, whose second call moves every buffer: through the
 * binary, as the nightly runs them, every expectation holds on this machine's platform. */
static void test_address_dependent_results_show_under_repeat(void **state)
{
    (void)state;
    static char out[1 << 15];
    char args[1024], dir[] = "/tmp/capcheck_repeat_XXXXXX";
    assert_non_null(mkdtemp(dir));
    snprintf(args, sizeof args,
             "run " CAPCHECK_SOURCE_DIR "/cases/regressions/repeat/*.cases --repeat 2 --expect "
             "-j 2 --out %s/r",
             dir);
    int rc = cc_t_run(NULL, args, out, sizeof out);
    cc_t_remove_dir(dir);
    if (rc != 0)
        fail_msg("the --repeat expectations do not hold:\n%.4000s", out);
    expect_in(out, "broken 0, crash 0, unexpected 0");
}

/* The platforms where the smoke suite was seen to pass at 1 ATen thread and at every CPU (the
 * machine's level; elsewhere another thread count splits ATen's sums otherwise, and a failure
 * there is a finding this test prints, not a failure of capcheck). */
static const char *const SMOKE_PASSES_AT_EVERY_THREAD_COUNT_ON[] = {"cpu:avx512-bf16", NULL};
/* The platforms where ATen's f16 distill deviation (cases/regressions/distill.cases) was seen at
 * N threads; elsewhere its absence there is a finding, and the paths below are not exercised. */
static const char *const DISTILL_F16_FAILS_AT_N_THREADS_ON[] = {"cpu:avx512-bf16", NULL};

/* Whether this machine's platform is one of keys (NULL-terminated). */
static int here_is_one_of(const char *const *keys)
{
    for (int k = 0; keys[k]; k++)
        if (strcmp(here.key, keys[k]) == 0)
            return 1;
    return 0;
}

/* ATen's intra-op threads are platforms (--aten-threads all: 1 and this machine's CPUs, at least
 * 2): the smoke suite passes at both (where seen: above), each pass's workers state their count,
 * the rows and the key name it (+tN past one thread), each count's cases are cases of their own
 * (not repeats of the other's), and a case that fails at N threads prints a repro line that runs
 * it at N threads again, whose Python reproducer runs ATen at N threads; shrink runs at that
 * pass too. */
static void test_aten_threads_are_platforms(void **state)
{
    (void)state;
    static char out[1 << 16];
    char args[2048], dir[] = "/tmp/capcheck_threads_XXXXXX", path[256];
    assert_non_null(mkdtemp(dir));
    int most = cc_online_cpus() > 2 ? cc_online_cpus() : 2;
    snprintf(args, sizeof args, "run --aten-threads all -j 2 --out %s/smoke", dir);
    int rc = cc_t_run(NULL, args, out, sizeof out);
    if (rc != 0 && (here_is_one_of(SMOKE_PASSES_AT_EVERY_THREAD_COUNT_ON) || rc != 1))
        fail_msg("the smoke suite does not pass at every ATen thread count:\n%.4000s", out);
    if (rc != 0) /* cases failed on a platform where no one has run this yet */
        printf("the smoke suite at every ATen thread count on %s, not seen before: some cases "
               "fail (a finding for docs/aten.md):\n%.2000s\n",
               here.key, out);
    char want[160];
    snprintf(want, sizeof want, "level native at 1 ATen thread (platform cpu:");
    expect_in(out, want);
    snprintf(want, sizeof want, "level native at %d ATen threads (platform cpu:", most);
    expect_in(out, want);
    snprintf(path, sizeof path, "%s/smoke/report.json", dir);
    char *rep = cc_t_slurp(path, NULL);
    snprintf(want, sizeof want, "\"threads\": \"%d\", \"aten_threads\": \"%d\"", most, most);
    expect_in(rep, want); /* the workers' own at::get_num_threads(), and the pass asked */
    expect_in(rep, "\"threads\": \"1\", \"aten_threads\": \"1\"");
    snprintf(want, sizeof want, "+t%d\"", most);
    expect_in(rep, want);
    /* a case at 1 thread and at N is two cases (its identity holds the platform key, +tN and
     * all), never a repeat of one: folded, a kernel whose bits change with the thread count
     * would read as nondeterministic, and the evidence would count half the cases */
    assert_null(strstr(rep, "\"repeated\""));
    assert_null(strstr(out, "repeated case line"));
    free(rep);
    /* a failure at N threads (ATen's f16 logSoftmax deviation) reproduces at N threads */
    snprintf(args, sizeof args,
             "run " CAPCHECK_SOURCE_DIR "/cases/regressions/distill.cases --op distill "
             "--aten-threads %d -j 1 --out %s/fail",
             most, dir);
    rc = cc_t_run(NULL, args, out, sizeof out);
    if (rc == 0 && !here_is_one_of(DISTILL_F16_FAILS_AT_N_THREADS_ON)) {
        printf("ATen's f16 distill deviation does not show at %d threads on %s (seen on "
               "cpu:avx512-bf16; a finding for docs/aten.md): repro, its script and shrink at N "
               "threads are not exercised here\n",
               most, here.key);
        cc_t_remove_dir(dir);
        return;
    }
    assert_int_equal(rc, 1);
    snprintf(want, sizeof want, "--aten-threads %d\n", most);
    const char *repro = strstr(out, "capcheck repro '");
    if (!repro || !strstr(out, want))
        fail_msg("no repro line at %d threads:\n%.3000s", most, out);
    char line[2048];
    snprintf(line, sizeof line, "%.*s", (int)strcspn(repro + 9, "\n"), repro + 9);
    assert_int_equal(cc_t_run(NULL, line, out, sizeof out), 1);
    snprintf(want, sizeof want, "at %d ATen threads)", most);
    expect_in(out, want);
    /* and its Python reproducer runs ATen at N threads too, and fails there as capcheck does */
    char script[300], with_script[2400];
    snprintf(script, sizeof script, "%s/fail.py", dir);
    snprintf(with_script, sizeof with_script, "%s --script %s", line, script);
    assert_int_equal(cc_t_run(NULL, with_script, out, sizeof out), 1);
    char *py = cc_t_slurp(script, NULL);
    snprintf(want, sizeof want, "\"threads\": %d,", most);
    expect_in(py, want);
    free(py);
    if (access(VENV_PYTHON, X_OK) == 0) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "'%s' -W ignore '%s' > '%s/fail.out' 2>&1", VENV_PYTHON, script,
                 dir);
        fflush(NULL);
        int st = system(cmd);
        snprintf(path, sizeof path, "%s/fail.out", dir);
        char *said = cc_t_slurp(path, NULL);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 1)
            fail_msg("the reproducer at %d threads did not exit 1:\n%.2000s", most, said);
        snprintf(want, sizeof want, "threads:  %d ATen threads", most);
        expect_in(said, want);
        free(said);
    } else {
        printf("no %s: the reproducer at %d threads is written, not run\n", VENV_PYTHON, most);
    }
    /* shrink at that pass: its candidates, its repro line and its reproducer at N threads */
    snprintf(script, sizeof script, "%s/shrunk.py", dir);
    snprintf(args, sizeof args,
             "shrink 'distill dtype=f16 in=[200000],[200000] axis=0 temp=10 seed=1 stream=1' "
             "--aten-threads %d --script %s",
             most, script);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    expect_in(out, "minimal:  distill dtype=f16");
    snprintf(want, sizeof want, "--aten-threads %d\n", most);
    expect_in(out, want);
    py = cc_t_slurp(script, NULL);
    snprintf(want, sizeof want, "\"threads\": %d,", most);
    expect_in(py, want);
    free(py);
    assert_int_equal(cc_t_run(NULL, "shrink 'exp dtype=f16 in=[3]' --aten-threads 1,2", out,
                              sizeof out),
                     2);
    expect_in(out, "one --aten-threads count");
    cc_t_remove_dir(dir);
}

/* ATen runs on the BLAS it states. libtorch_cpu calls its gemm through dgemm_/sgemm_, which the
 * executable's OpenBLAS exports too: a loader that let OpenBLAS answer them would make ATen's
 * results OpenBLAS's while the platform says MKL (seen once, when the shim became a module
 * loaded after the executable's libraries). Where libtorch states MKL, a gemm through the
 * binary, at the native level and at the lowest, must be MKL's (MKL_VERBOSE names each call). */
static void test_aten_gemm_is_the_blas_it_states(void **state)
{
    (void)state;
    static char out[1 << 14];
    assert_int_equal(cc_t_run(NULL, "list platforms", out, sizeof out), 0);
    if (!strstr(out, "BLAS mkl")) {
        cc_t_skip("libtorch states no MKL here: which BLAS its gemm calls is not checked");
        return;
    }
    static const char *const levels[] = {"native", "default"};
    for (int k = 0; k < 2; k++) {
        char args[512];
        snprintf(args, sizeof args,
                 "repro 'matmul dtype=f64 in=[16,27],[27,5] check=fwd seed=1' --no-fork "
                 "--cpu-capability %s",
                 levels[k]);
        assert_int_equal(cc_t_run("MKL_VERBOSE=1 ", args, out, sizeof out), 0);
        if (!strstr(out, "MKL_VERBOSE DGEMM"))
            fail_msg("ATen's f64 matmul at level %s did not call MKL's DGEMM:\n%.2000s",
                     levels[k], out);
    }
}

int main(void)
{
    char why[768] = "";
    if (!cc_aten_provider_load(why, sizeof why)) {
#if CAPCHECK_HAVE_ATEN
        /* a build with ATen whose module does not load is broken, not without ATen */
        fprintf(stderr, "FAILED: this build has the ATen provider but it did not load: %s\n", why);
        return 1;
#else
        cc_t_skip("capcheck was built without the ATen provider (%s)", why);
        return CC_T_SKIP_CODE;
#endif
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smoke_passes_on_aten_cpu), /* writes the lowering's records */
        cmocka_unit_test(test_reproducer_lowering_is_the_shims),
        cmocka_unit_test(test_sampled_checks_pass_on_aten_cpu),
        cmocka_unit_test(test_relaxed_smoke_passes_on_aten_cpu),
        cmocka_unit_test(test_softmax_wrong_axis_is_caught),
        cmocka_unit_test(test_linear_dropped_bias_gradient_is_caught),
        cmocka_unit_test(test_exp_64_ulp_is_caught),
        cmocka_unit_test(test_unimplemented_combinations_are_unsupported),
        cmocka_unit_test(test_known_aten_deviations_still_fail),
        cmocka_unit_test(test_known_aten_crashes_still_crash),
        cmocka_unit_test(test_every_dispatch_level),
        cmocka_unit_test(test_aten_threads_are_platforms),
        cmocka_unit_test(test_address_dependent_results_show_under_repeat),
        cmocka_unit_test(test_aten_gemm_is_the_blas_it_states),
        cmocka_unit_test(test_reproducer_judges_as_capcheck),
        cmocka_unit_test(test_a_reproducer_for_every_op),
    };
    if (getenv("CAPCHECK_TEST_FILTER")) /* one test while working on it, e.g. "*judges*" */
        cmocka_set_test_filter(getenv("CAPCHECK_TEST_FILTER"));
    return cc_t_exit_code(
        cmocka_run_group_tests_name("aten_smoke_and_planted_bugs", tests, setup, teardown));
}
