/* --shard auto (harness/shard_auto.h): every engine's variables, for every shard of a 3-shard
 * and a 4-shard run, give the shard --shard I/N names (the function, and capcheck run's
 * results and report); a Slurm array with a step and an offset maps onto 1..N; no engine, a
 * missing count, a malformed or out-of-range value, an array with gaps and two engines that
 * disagree are each refused with their sentence (exit 2); two that agree are accepted. */
#include "cli_util.h"

#include <sys/stat.h>

#include "harness/evidence/shard_auto.h"

/* A fake environment: NAME=VALUE strings, NULL-terminated. */
static const char *lookup(const char *name, void *ctx)
{
    size_t n = strlen(name);
    for (const char *const *e = ctx; *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

/* The variables of engine `k` for shard i (1-based) of n, into env (static storage). */
enum { GITLAB, KUBERNETES, SLURM, BUILDKITE, GITHUB, N_ENGINES };
static const char *const ENGINE_NAMES[N_ENGINES] = {"GitLab CI parallel",
                                                    "a Kubernetes Indexed Job",
                                                    "a Slurm job array", "Buildkite parallel jobs",
                                                    "a GitHub Actions matrix"};

static void engine_env(int k, int i, int n, char vars[6][64], const char *env[7])
{
    int m = 0;
    switch (k) {
    case GITLAB:
        snprintf(vars[m++], 64, "CI_NODE_INDEX=%d", i);
        snprintf(vars[m++], 64, "CI_NODE_TOTAL=%d", n);
        break;
    case KUBERNETES:
        snprintf(vars[m++], 64, "JOB_COMPLETION_INDEX=%d", i - 1);
        snprintf(vars[m++], 64, "CAPCHECK_JOB_COMPLETIONS=%d", n);
        break;
    case SLURM: /* --array=10-(10+3(n-1)):3 */
        snprintf(vars[m++], 64, "SLURM_ARRAY_TASK_ID=%d", 10 + 3 * (i - 1));
        snprintf(vars[m++], 64, "SLURM_ARRAY_TASK_MIN=10");
        snprintf(vars[m++], 64, "SLURM_ARRAY_TASK_MAX=%d", 10 + 3 * (n - 1));
        snprintf(vars[m++], 64, "SLURM_ARRAY_TASK_STEP=3");
        snprintf(vars[m++], 64, "SLURM_ARRAY_TASK_COUNT=%d", n);
        break;
    case BUILDKITE:
        snprintf(vars[m++], 64, "BUILDKITE_PARALLEL_JOB=%d", i - 1);
        snprintf(vars[m++], 64, "BUILDKITE_PARALLEL_JOB_COUNT=%d", n);
        break;
    default:
        snprintf(vars[m++], 64, "CAPCHECK_SHARD_INDEX=%d", i);
        snprintf(vars[m++], 64, "CAPCHECK_SHARD_COUNT=%d", n);
    }
    for (int j = 0; j < m; j++)
        env[j] = vars[j];
    env[m] = NULL;
}

static void test_every_engine_gives_the_shard(void **state)
{
    (void)state;
    for (int k = 0; k < N_ENGINES; k++)
        for (int n = 1; n <= 4; n++)
            for (int i = 1; i <= n; i++) {
                char vars[6][64], source[256], msg[512];
                const char *env[7];
                engine_env(k, i, n, vars, env);
                int gi = 0, gn = 0;
                if (cc_shard_auto(lookup, env, &gi, &gn, source, sizeof source, msg, sizeof msg))
                    fail_msg("%s shard %d/%d refused: %s", ENGINE_NAMES[k], i, n, msg);
                assert_int_equal(gi, i);
                assert_int_equal(gn, n);
                assert_non_null(strstr(source, ENGINE_NAMES[k]));
            }
}

/* cc_shard_auto on env must refuse with a message containing `want`. */
static void refused(const char *const *env, const char *want)
{
    int i = -1, n = -1;
    char source[256] = "", msg[512] = "";
    if (cc_shard_auto(lookup, (void *)env, &i, &n, source, sizeof source, msg, sizeof msg) == 0)
        fail_msg("accepted (%d/%d from %s); wanted a refusal naming '%s'", i, n, source, want);
    if (!strstr(msg, want))
        fail_msg("refusal '%s' does not name '%s'", msg, want);
}

static void test_refusals(void **state)
{
    (void)state;
    const char *none[] = {"CI_NODE_TOTAL=1", "PATH=/bin", NULL}; /* GitLab without parallel */
    refused(none, "no engine gives this job a shard");
    const char *no_count[] = {"JOB_COMPLETION_INDEX=2", NULL};
    refused(no_count, "JOB_COMPLETION_INDEX is set (a Kubernetes Indexed Job) but "
                      "CAPCHECK_JOB_COMPLETIONS is not");
    const char *bad_number[] = {"CI_NODE_INDEX=2x", "CI_NODE_TOTAL=4", NULL};
    refused(bad_number, "CI_NODE_INDEX is '2x', not a whole number");
    const char *negative[] = {"BUILDKITE_PARALLEL_JOB=-1", "BUILDKITE_PARALLEL_JOB_COUNT=4", NULL};
    refused(negative, "BUILDKITE_PARALLEL_JOB is '-1', not a whole number");
    const char *past_end[] = {"BUILDKITE_PARALLEL_JOB=4", "BUILDKITE_PARALLEL_JOB_COUNT=4", NULL};
    refused(past_end, "BUILDKITE_PARALLEL_JOB=4 is not one of the 4 shards");
    const char *zero_based_gitlab[] = {"CI_NODE_INDEX=0", "CI_NODE_TOTAL=4", NULL};
    refused(zero_based_gitlab, "CI_NODE_INDEX=0 is not one of the 4 shards");
    const char *too_many[] = {"CAPCHECK_SHARD_INDEX=1", "CAPCHECK_SHARD_COUNT=5000", NULL};
    refused(too_many, "capcheck runs 1 to 4096 shards");
    /* --array=1,2,9: three tasks, not evenly spaced */
    const char *gaps[] = {"SLURM_ARRAY_TASK_ID=9", "SLURM_ARRAY_TASK_MIN=1",
                          "SLURM_ARRAY_TASK_MAX=9", "SLURM_ARRAY_TASK_STEP=1",
                          "SLURM_ARRAY_TASK_COUNT=3", NULL};
    refused(gaps, "a Slurm job array is not an evenly spaced range");
    const char *off_step[] = {"SLURM_ARRAY_TASK_ID=2", "SLURM_ARRAY_TASK_MIN=0",
                              "SLURM_ARRAY_TASK_MAX=9", "SLURM_ARRAY_TASK_STEP=3",
                              "SLURM_ARRAY_TASK_COUNT=4", NULL};
    refused(off_step, "SLURM_ARRAY_TASK_ID=2 is not one of the 4 shards");
    const char *disagree[] = {"CI_NODE_INDEX=2", "CI_NODE_TOTAL=4", "CAPCHECK_SHARD_INDEX=3",
                              "CAPCHECK_SHARD_COUNT=4", NULL};
    refused(disagree, "two engines disagree: GitLab CI parallel says shard 2/4");
    /* two that agree: accepted */
    const char *agree[] = {"CI_NODE_INDEX=2", "CI_NODE_TOTAL=4", "BUILDKITE_PARALLEL_JOB=1",
                           "BUILDKITE_PARALLEL_JOB_COUNT=4", NULL};
    int i, n;
    char source[256], msg[512];
    assert_int_equal(cc_shard_auto(lookup, (void *)agree, &i, &n, source, sizeof source, msg,
                                   sizeof msg), 0);
    assert_int_equal(i, 2);
    assert_int_equal(n, 4);
}

/* ---- through capcheck run ------------------------------------------------------------------ */

static char tmp[256], cases[512];
static char out[1 << 16];

/* No engine variable of the machine running the tests leaks in. */
#define CLEAN_ENV                                                                              \
    "env -u CI_NODE_INDEX -u CI_NODE_TOTAL -u JOB_COMPLETION_INDEX -u CAPCHECK_JOB_COMPLETIONS " \
    "-u SLURM_ARRAY_TASK_ID -u SLURM_ARRAY_TASK_MIN -u SLURM_ARRAY_TASK_MAX "                  \
    "-u SLURM_ARRAY_TASK_STEP -u SLURM_ARRAY_TASK_COUNT -u BUILDKITE_PARALLEL_JOB "            \
    "-u BUILDKITE_PARALLEL_JOB_COUNT -u CAPCHECK_SHARD_INDEX -u CAPCHECK_SHARD_COUNT "

/* capcheck run of the test's cases into tmp/<dir> (run from there, so every report's command
 * line is the same) with `shard` and the environment `env`; returns the exit code. */
static int run_shard(const char *dir, const char *env, const char *shard)
{
    char path[600], prefix[1400], args[1200];
    snprintf(path, sizeof path, "%s/%s", tmp, dir);
    mkdir(path, 0777);
    snprintf(prefix, sizeof prefix, "cd %s && " CLEAN_ENV "%s ", path, env);
    snprintf(args, sizeof args, "run %s --provider reference --out . --shard %s -j 1", cases,
             shard);
    return cc_t_run(prefix, args, out, sizeof out);
}

static char *file_in(const char *dir, const char *name)
{
    return cc_t_slurp_in(tmp, dir, name);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/capcheck_shard_auto_XXXXXX");
    if (!mkdtemp(tmp))
        return -1;
    snprintf(cases, sizeof cases, "%s/a.cases", tmp);
    cc_t_write(cases, "add count=4 dtype=f32,f64 size=small\n"
                      "softmax count=3 dtype=f32 layout=contig,transpose size=small\n"
                      "matmul count=2 dtype=f64 size=medium\n");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return cc_t_remove_dir(tmp);
}

/* Each engine for one shard of 3 (the function's test above covers every shard of each): the
 * same cases and the same report as --shard I/3. */
static void test_run_with_each_engine_equals_shard_i_of_n(void **state)
{
    (void)state;
    const int n = 3;
    for (int i = 1; i <= n; i++) {
        char want_dir[32], spec[16];
        snprintf(want_dir, sizeof want_dir, "want%d", i);
        snprintf(spec, sizeof spec, "%d/%d", i, n);
        assert_int_equal(run_shard(want_dir, "", spec), 0);
    }
    for (int k = 0; k < N_ENGINES; k++) {
        int i = k % n + 1;
        char vars[6][64], env[512] = "", dir[32], want_dir[32];
        const char *e[7];
        engine_env(k, i, n, vars, e);
        for (int j = 0; e[j]; j++) {
            strcat(env, e[j]);
            strcat(env, " ");
        }
        snprintf(dir, sizeof dir, "auto%d", k);
        if (run_shard(dir, env, "auto") != 0)
            fail_msg("%s: capcheck run --shard auto failed: %s", env, out);
        char expect[128];
        snprintf(expect, sizeof expect, "--shard auto: shard %d/%d (%s", i, n, ENGINE_NAMES[k]);
        if (!strstr(out, expect))
            fail_msg("%s: no '%s' in %s", env, expect, out);
        snprintf(want_dir, sizeof want_dir, "want%d", i);
        char *want_results = file_in(want_dir, "results.jsonl");
        char *want_report = file_in(want_dir, "report.json");
        char *results = file_in(dir, "results.jsonl"), *report = file_in(dir, "report.json");
        /* the same cases: every case line of the --shard I/N run, and as many records */
        assert_true(strlen(want_results) > 0);
        assert_int_equal(cc_t_count(results, "\n"), cc_t_count(want_results, "\n"));
        for (const char *s = want_results; (s = strstr(s, "\"case\":\"")); s += 8) {
            const char *end = strchr(s + 8, '"');
            char line[1100];
            snprintf(line, sizeof line, "%.*s", (int)(end - s) + 1, s);
            if (!strstr(results, line))
                fail_msg("%s: shard %d/%d lacks %s", env, i, n, line);
        }
        /* and the same report (its "shard" names the index, count and case indices) */
        char *r = cc_t_without_lines(report, "\"timing\""),
             *want_r = cc_t_without_lines(want_report, "\"timing\"");
        if (strcmp(r, want_r) != 0)
            fail_msg("%s: report.json differs from --shard %d/%d's (beyond timing)", env, i, n);
        free(results);
        free(report);
        free(r);
        free(want_results);
        free(want_report);
        free(want_r);
    }
}

static void test_run_refuses_without_an_engine(void **state)
{
    (void)state;
    assert_int_equal(run_shard("none", "", "auto"), 2);
    assert_non_null(strstr(out, "capcheck: --shard auto: no engine gives this job a "
                                              "shard"));
    assert_int_equal(run_shard("clash", "CI_NODE_INDEX=1 CI_NODE_TOTAL=2 "
                                        "BUILDKITE_PARALLEL_JOB=1 BUILDKITE_PARALLEL_JOB_COUNT=2",
                               "auto"),
                     2);
    assert_non_null(strstr(out, "two engines disagree"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_engine_gives_the_shard),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_run_with_each_engine_equals_shard_i_of_n),
        cmocka_unit_test(test_run_refuses_without_an_engine),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
