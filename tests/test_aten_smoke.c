/* The integration test that loads libtorch: the smoke suite passes on ATen CPU with zero
 * failures under strict accumulation (and cases/smoke_relaxed.cases, the f16/bf16 directions
 * whose ATen kernels fold sums in the dtype, under relaxed), and three planted bugs wrapped around the ATen provider are each caught:
 * softmax over the wrong axis, linear's VJP dropping the bias gradient, exp 64 ULP off in f32.
 * (The planted bugs live here, not in the product.) The known deviations, crashes and
 * unsupported combinations meet their platform-scoped expectations here, and at every CPU
 * dispatch level this machine supports, where the smoke suite passes too. */
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
#include "harness/run/pool.h"
#include "harness/run/runner.h"
#include "skip_util.h"
#include "test_util.h"

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

static void test_smoke_passes_on_aten_cpu(void **state)
{
    (void)state;
    cc_t_tally t = cc_t_run_all(aten, &smoke, NULL);
    printf("smoke on ATen CPU: %ld cases, %ld passed, %ld suspect\n", t.cases, t.passed,
           t.suspect);
    assert_true(t.cases >= 400);
    if (t.not_passed)
        fail_msg("%ld smoke cases did not pass on ATen CPU; first: %s", t.not_passed,
                 t.first_failure);
    assert_int_equal(t.suspect, 0);
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

/* ATen's intra-op threads are platforms (--aten-threads all: 1 and this machine's CPUs, at least
 * 2): the smoke suite passes at both, each pass's workers state their count, the rows and the
 * key name it (+tN past one thread), each count's cases are cases of their own (not repeats of
 * the other's), and a case that fails at N threads prints a repro line that runs it at N threads
 * again. */
static void test_aten_threads_are_platforms(void **state)
{
    (void)state;
    static char out[1 << 16];
    char args[2048], dir[] = "/tmp/capcheck_threads_XXXXXX", path[256];
    assert_non_null(mkdtemp(dir));
    int most = cc_online_cpus() > 2 ? cc_online_cpus() : 2;
    snprintf(args, sizeof args, "run --aten-threads all -j 2 --out %s/smoke", dir);
    int rc = cc_t_run(NULL, args, out, sizeof out);
    if (rc != 0)
        fail_msg("the smoke suite does not pass at every ATen thread count:\n%.4000s", out);
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
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 1);
    snprintf(want, sizeof want, "--aten-threads %d\n", most);
    const char *repro = strstr(out, "capcheck repro '");
    if (!repro || !strstr(out, want))
        fail_msg("no repro line at %d threads:\n%.3000s", most, out);
    char line[2048];
    snprintf(line, sizeof line, "%.*s", (int)strcspn(repro + 9, "\n"), repro + 9);
    assert_int_equal(cc_t_run(NULL, line, out, sizeof out), 1);
    snprintf(want, sizeof want, "at %d ATen threads)", most);
    expect_in(out, want);
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
        cmocka_unit_test(test_smoke_passes_on_aten_cpu),
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
    };
    return cc_t_exit_code(
        cmocka_run_group_tests_name("aten_smoke_and_planted_bugs", tests, setup, teardown));
}
