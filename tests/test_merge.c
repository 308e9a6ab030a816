/* Sharding and merging: the smoke cases (cases/smoke.cases) run whole and as 4 shards with
 * --provider reference; capcheck merge of the shards writes the report the whole run wrote
 * (report.json and report.md equal but for their timing line; report.junit.xml equal), with
 * every case in exactly one shard, shards balanced by cost and dealt the same way every time;
 * merge refuses a set with a shard missing or given twice, shards of different runs, and a
 * folder that is not a shard. */
#include "cli_util.h"

#include <sys/stat.h>

#include "harness/run/platform.h"
#include "skip_util.h"

static char tmp[256], smoke[512];
static char out[1 << 16];

static int run_in(const char *dir, const char *extra)
{
    char prefix[700], args[2048];
    mkdir(dir, 0777);
    snprintf(prefix, sizeof prefix, "cd %s && ", dir);
    /* the same command line in every folder (--out .), so the reports may compare equal */
    snprintf(args, sizeof args, "run %s --provider reference --out . %s", smoke, extra);
    return cc_t_run(prefix, args, out, sizeof out);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/capcheck_merge_XXXXXX");
    if (!mkdtemp(tmp))
        return -1;
    snprintf(smoke, sizeof smoke, "%s/cases/smoke.cases", CAPCHECK_SOURCE_DIR);
    char dir[600], extra[64];
    snprintf(dir, sizeof dir, "%s/whole", tmp);
    if (run_in(dir, ""))
        return -1;
    for (int i = 1; i <= 4; i++) {
        snprintf(dir, sizeof dir, "%s/s%d", tmp, i);
        snprintf(extra, sizeof extra, "--shard %d/4", i);
        if (run_in(dir, extra))
            return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return cc_t_remove_dir(tmp);
}

static char *file_in(const char *dir, const char *name)
{
    return cc_t_slurp_in(tmp, dir, name);
}

static void same_but(const char *a, const char *b, const char *name, const char *drop)
{
    char *x = file_in(a, name), *y = file_in(b, name);
    char *xs = cc_t_without_lines(x, drop), *ys = cc_t_without_lines(y, drop);
    if (strcmp(xs, ys) != 0)
        fail_msg("%s/%s and %s/%s differ (beyond \"%s\" lines)", a, name, b, name, drop);
    free(x);
    free(y);
    free(xs);
    free(ys);
}

static int merge(const char *dirs, const char *to)
{
    char args[8192];
    snprintf(args, sizeof args, "merge %s --out %s/%s", dirs, tmp, to);
    return cc_t_run(NULL, args, out, sizeof out);
}

/* The number of cases of the whole (unsharded) run, from its report. */
static long whole_cases(void)
{
    char *r = file_in("whole", "report.json");
    char *c = strstr(r, "\n  \"cases\": ");
    assert_non_null(c);
    long n = strtol(c + 12, NULL, 10);
    free(r);
    assert_true(n > 100);
    return n;
}

static void test_merged_shards_equal_the_whole_run(void **state)
{
    (void)state;
    long n = whole_cases();
    char expected[160];
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s/s3 %s/s1 %s/s4 %s/s2", tmp, tmp, tmp, tmp);
    assert_int_equal(merge(dirs, "merged"), 0);
    snprintf(expected, sizeof expected, "capcheck merge: 4 shards, %ld cases: %ld passed", n, n);
    expect_in(out, expected);
    same_but("whole", "merged", "report.json", "\"timing\"");
    same_but("whole", "merged", "report.md", "- timing:");
    same_but("whole", "merged", "report.junit.xml", "\x01"); /* no timing in it at all */
    /* a whole run's report says nothing of shards; each shard's does */
    char *w = file_in("whole", "report.json"), *s = file_in("s2", "report.json");
    assert_null(strstr(w, "\"shard\""));
    snprintf(expected, sizeof expected,
             "\"shard\": {\"index\": 2, \"count\": 4, \"cases_total\": %ld,", n);
    expect_in(s, expected);
    /* the recorded command is the whole run's, without --shard */
    assert_null(strstr(s, "--shard"));
    free(w);
    free(s);
    /* the merged folder is a whole run: gate and diff read it like one */
    char args[1024];
    snprintf(args, sizeof args, "diff %s/whole %s/merged", tmp, tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    expect_in(out, "0 regressions, 0 fixed, 0 new failures, 0 drifts");
}

static void test_every_case_in_one_shard_balanced_and_stable(void **state)
{
    (void)state;
    long cases[4];
    for (int i = 0; i < 4; i++) {
        char d[8];
        snprintf(d, sizeof d, "s%d", i + 1);
        char *r = file_in(d, "report.json");
        char *c = strstr(r, "\n  \"cases\": ");
        assert_non_null(c);
        cases[i] = strtol(c + 12, NULL, 10);
        free(r);
    }
    long n = whole_cases();
    assert_int_equal(cases[0] + cases[1] + cases[2] + cases[3], n);
    for (int i = 0; i < 4; i++) /* cost-balanced: no shard far from a quarter */
        assert_true(cases[i] > n / 4 / 3 && cases[i] < n * 3 / 4);
    /* dealt the same way again */
    char dir[600];
    snprintf(dir, sizeof dir, "%s/s2again", tmp);
    assert_int_equal(run_in(dir, "--shard 2/4"), 0);
    same_but("s2", "s2again", "report.json", "\"timing\"");
    /* bad shard specs are one sentence */
    assert_int_equal(run_in(dir, "--shard 5/4"), 2);
    expect_in(out, "--shard wants I/N with 1 <= I <= N");
    assert_int_equal(run_in(dir, "--shard 1"), 2);
}

static void test_merge_refuses_broken_sets(void **state)
{
    (void)state;
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s/s1 %s/s2 %s/s4", tmp, tmp, tmp);
    assert_int_equal(merge(dirs, "m1"), 2);
    expect_in(out, "shard 3/4 is missing: the set has 3 of the 4 shards");
    snprintf(dirs, sizeof dirs, "%s/s1 %s/s2 %s/s3 %s/s4 %s/s2again", tmp, tmp, tmp, tmp, tmp);
    assert_int_equal(merge(dirs, "m2"), 2);
    expect_in(out, "shard 2/4 is given twice");
    snprintf(dirs, sizeof dirs, "%s/s1 %s/whole", tmp, tmp);
    assert_int_equal(merge(dirs, "m3"), 2);
    expect_in(out, "whole is not a shard");
    /* a shard of another run (another base seed) */
    char dir[600];
    snprintf(dir, sizeof dir, "%s/other", tmp);
    assert_int_equal(run_in(dir, "--shard 4/4 --seed 9"), 0);
    snprintf(dirs, sizeof dirs, "%s/s1 %s/s2 %s/s3 %s/other", tmp, tmp, tmp, tmp);
    assert_int_equal(merge(dirs, "m4"), 2);
    expect_in(out, "are not shards of one run");
    /* a shard run at another dispatch level: another platform, not the same run */
    char flags[256];
    cc_cpu_flags(flags, sizeof flags);
    if (cc_level_supported(cc_level_find("avx2"), flags)) { /* default then differs */
        snprintf(dir, sizeof dir, "%s/level", tmp);
        assert_int_equal(run_in(dir, "--shard 4/4 --cpu-capability default"), 0);
        snprintf(dirs, sizeof dirs, "%s/s1 %s/s2 %s/s3 %s/level", tmp, tmp, tmp, tmp);
        assert_int_equal(merge(dirs, "m5"), 2);
        expect_in(out, "their platforms differ ('cpu:");
        expect_in(out, "' vs 'cpu:default')");
    } else {
        cc_t_skip("this CPU has no AVX2: no second platform to refuse a merge of shards across");
    }
    struct stat st;
    char m[700];
    snprintf(m, sizeof m, "%s/m1/report.json", tmp);
    assert_int_not_equal(stat(m, &st), 0); /* nothing written for a refused set */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merged_shards_equal_the_whole_run),
        cmocka_unit_test(test_every_case_in_one_shard_balanced_and_stable),
        cmocka_unit_test(test_merge_refuses_broken_sets),
    };
    return cc_t_exit_code(cmocka_run_group_tests(tests, setup, teardown));
}
