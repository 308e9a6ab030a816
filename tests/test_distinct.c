/* Evidence that cannot be inflated (harness/report/identity.h), through the binary: a case counts
 * once however often it ran. The smoke suite given three times, and 150 copies of one line, give
 * exactly the verdicts, rows and evidence of the distinct cases alone (and the report, the gate
 * and the terminal say how many repeats they folded), also when the copies are dealt to shards;
 * a case split into check=fwd / check=vjp / ref=full lines is one passing case; a repeat that
 * disagrees with its first run (another status, or other bits on the CPU) is nondeterministic;
 * and a capsule whose passing cases hold fewer distinct shapes than min_distinct_shapes is not
 * checked, its reason saying so. Each wrong implementation these kill: the gate counting every
 * record (3x the smoke then checks capsules the smoke alone does not), counting identities
 * rather than inputs, ignoring shapes, breaking a tie between disagreeing repeats. */
#include "cli_util.h"

#include "harness/report/report.h"
#include "harness/run/exit_code.h"

#include <dirent.h>
#include <sys/stat.h>

static char tmp[256], smoke[600], any[600];
static char out[1 << 20], out2[1 << 20];

/* The built-in policy judging the reference: any libtorch, the oracle's capsules required. */
static void write_any_policy(void)
{
    char path[700];
    snprintf(path, sizeof path, "%s/reports/policy.conf", CAPCHECK_SOURCE_DIR);
    char *text = cc_t_slurp(path, NULL);
    assert_non_null(text);
    char *a = cc_t_replace_first(text, "libtorch_version 2.15.0", "libtorch_version any");
    char *b = cc_t_replace_first(a, "require capcheck.aten_cpu.*", "require capcheck.oracle.*");
    snprintf(any, sizeof any, "%s/any.conf", tmp);
    cc_t_write(any, b);
    free(text);
    free(a);
    free(b);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/capcheck_distinct_XXXXXX");
    if (!mkdtemp(tmp))
        return -1;
    snprintf(smoke, sizeof smoke, "%s/cases/smoke.cases", CAPCHECK_SOURCE_DIR);
    write_any_policy();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return cc_t_remove_dir(tmp);
}

/* capcheck ARGS (printf-style) into buf; its exit code. */
static int capcheck(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int capcheck(char *buf, size_t n, const char *fmt, ...)
{
    char args[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return cc_t_run(NULL, args, buf, n);
}

/* text without the lines holding any of the NULL-terminated needles, and with every
 * "report sha256:<16 hex>" blanked (malloc'd) */
static char *without(const char *text, const char *const *needles)
{
    char *t = strdup(text);
    for (int i = 0; needles[i]; i++) {
        char *next = cc_t_without_lines(t, needles[i]);
        free(t);
        t = next;
    }
    for (char *s = strstr(t, "report sha256:"); s; s = strstr(s + 1, "report sha256:"))
        memset(s + 14, 'x', strspn(s + 14, "0123456789abcdef"));
    return t;
}

/* The gate's verdicts (--all) without what names the report: they must be equal. */
static void expect_same_verdicts(const char *a, const char *b)
{
    static const char *const naming[] = {"results digest matches", "repeated case line", NULL};
    char *x = without(a, naming), *y = without(b, naming);
    if (strcmp(x, y) != 0)
        fail_msg("the verdicts differ:\n---\n%.3000s\n---\n%.3000s", x, y);
    free(x);
    free(y);
}

/* report.json from `from` on (its totals and rows), of run folder dir (malloc'd) */
static char *report_from(const char *dir, const char *from)
{
    char *t = cc_t_slurp_in(tmp, dir, "report.json");
    const char *at = strstr(t, from);
    if (!at)
        fail_msg("no %s in %s/report.json", from, dir);
    char *part = strdup(at);
    free(t);
    return part;
}

static void expect_same_rows(const char *a, const char *b)
{
    char *ra = report_from(a, "  \"rows\": ["), *rb = report_from(b, "  \"rows\": [");
    char *ta = report_from(a, "  \"totals\": "), *tb = report_from(b, "  \"totals\": ");
    *strchr(ta, '\n') = 0;
    *strchr(tb, '\n') = 0;
    assert_string_equal(ra, rb);
    assert_string_equal(ta, tb);
    free(ra);
    free(rb);
    free(ta);
    free(tb);
}

/* Every capsule's evidence.json rows ("dtypes") equal in two evidence folders, but for the
 * repeats each counted; returns how many capsules were compared. */
static int expect_same_evidence(const char *a, const char *b)
{
    char da[700];
    snprintf(da, sizeof da, "%s/%s", tmp, a);
    DIR *d = opendir(da);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char pa[400], pb[400];
        snprintf(pa, sizeof pa, "%s/%s/evidence.json", a, e->d_name);
        snprintf(pb, sizeof pb, "%s/%s/evidence.json", b, e->d_name);
        char *ta = cc_t_slurp_in(tmp, "", pa), *tb = cc_t_slurp_in(tmp, "", pb);
        char *xa = strstr(ta, "\"dtypes\": ["), *xb = strstr(tb, "\"dtypes\": [");
        assert_non_null(xa);
        assert_non_null(xb);
        *strstr(xa, "\"contracts\"") = 0;
        *strstr(xb, "\"contracts\"") = 0;
        for (char *s = xb; (s = strstr(s, "\"repeated_case_lines\": ")); s++) {
            s += 23;
            size_t digits = strspn(s, "0123456789");
            memmove(s + 1, s + digits, strlen(s + digits) + 1);
            *s = '0';
        }
        if (strcmp(xa, xb) != 0)
            fail_msg("%s: evidence differs:\n%s\n---\n%s", e->d_name, xa, xb);
        free(ta);
        free(tb);
        n++;
    }
    closedir(d);
    return n;
}

/* ---- the smoke three times ------------------------------------------------------------------ */

static void test_the_smoke_three_times_is_the_smoke(void **state)
{
    (void)state;
    assert_int_equal(capcheck(out, sizeof out, "run %s --provider reference --out %s/s1 --policy %s",
                              smoke, tmp, any), 0);
    assert_null(strstr(out, "repeated"));
    assert_int_equal(capcheck(out, sizeof out,
                              "run %s %s %s --provider reference --out %s/s3 --policy %s", smoke,
                              smoke, smoke, tmp, any), 0);
    /* the terminal says what it folded: every line of the smoke ran three times */
    expect_in(out, "capcheck: 26526 cases on reference in ");
    expect_in(out, " of 8842 distinct cases\n");
    expect_in(out, "capcheck: 17,684 repeated case lines counted once (each ran; statuses, rows "
                   "and the gate count the 8842 distinct cases once); 0 disagreed with their "
                   "first run (nondeterministic)\n");
    /* so do report.json and report.md; the rows and totals are the smoke's */
    char *rep = cc_t_slurp_in(tmp, "s3", "report.json");
    expect_in(rep, "\"cases\": 26526,");
    expect_in(rep, "\"repeated\": {\"case_lines\": 17684, \"distinct_cases\": 8842, "
                   "\"disagreeing\": 0},");
    free(rep);
    rep = cc_t_slurp_in(tmp, "s1", "report.json");
    assert_null(strstr(rep, "\"repeated\""));
    free(rep);
    char *md = cc_t_slurp_in(tmp, "s3", "report.md");
    expect_in(md, "**Verdict: all 8842 cases passed**");
    expect_in(md, "17,684 repeated case lines counted once: 26526 case lines ran, 8842 distinct");
    free(md);
    expect_same_rows("s1", "s3");
    assert_int_equal(capcheck(out, sizeof out, "validate %s/s3/report.json", tmp), 0);

    /* the gate: the same verdicts (the smoke checks nothing; three smokes neither) */
    int rc1 = capcheck(out, sizeof out, "gate %s/s1 --policy %s --all", tmp, any);
    int rc3 = capcheck(out2, sizeof out2, "gate %s/s3 --policy %s --all", tmp, any);
    assert_int_equal(rc1, 1);
    assert_int_equal(rc3, 1);
    expect_in(out, "capcheck gate: 0 of the 112 required capsule x dtype x platform checked");
    expect_in(out2, "capcheck gate: 17,684 repeated case lines counted once: 8842 distinct "
                    "cases, each counted once; 0 disagreed with their first run");
    expect_same_verdicts(out, out2);

    /* evidence.json: the same rows; each capsule says how many repeats it folded */
    assert_int_equal(capcheck(out, sizeof out, "evidence %s/s1 --out %s/e1 --policy %s", tmp, tmp,
                              any), 0);
    assert_int_equal(capcheck(out, sizeof out, "evidence %s/s3 --out %s/e3 --policy %s", tmp, tmp,
                              any), 0);
    assert_true(expect_same_evidence("e1", "e3") > 50);
    char *ev = cc_t_slurp_in(tmp, "e3/capcheck.oracle.add", "evidence.json");
    char *cases = strstr(ev, "\"cases\": ");
    assert_non_null(cases);
    long n = strtol(cases + 9, NULL, 10);
    char want[64];
    snprintf(want, sizeof want, "\"repeated_case_lines\": %ld}", 2 * n);
    expect_in(ev, want);
    free(ev);
}

/* ---- 150 copies of one line, in one run and dealt to shards ------------------------------- */

static void write_copies(const char *name, int copies, const char *line)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < copies; i++)
        fprintf(f, "%s\n", line);
    fclose(f);
}

/* a policy of the common head and `extra` */
static void small_policy(const char *name, const char *extra, char *path, size_t n)
{
    snprintf(path, n, "%s/%s", tmp, name);
    char text[4096];
    snprintf(text, sizeof text,
             "format capcheck-policy/1\nlibtorch_version any\nrequire capcheck.oracle.add f32\n"
             "shape_classes none\nlayout_classes none\nedge_classes none\n%s",
             extra);
    cc_t_write(path, text);
}

static void test_150_copies_of_one_line_are_one_case(void **state)
{
    (void)state;
    const char *line = "add dtype=f32 in=[3,4],[3,4] seed=7";
    write_copies("one.cases", 1, line);
    write_copies("copies.cases", 150, line);
    char p[700];
    small_policy("p2.conf", "min_passing 2\nmin_vjp_passing 2\nmin_distinct_shapes 1\n", p,
                 sizeof p);
    assert_int_equal(capcheck(out, sizeof out, "run %s/one.cases --provider reference --out %s/c1",
                              tmp, tmp), 0);
    assert_int_equal(capcheck(out, sizeof out,
                              "run %s/copies.cases --provider reference --out %s/c150", tmp, tmp),
                     0);
    expect_in(out, "capcheck: 149 repeated case lines counted once");
    expect_same_rows("c1", "c150");
    /* one passing case, however many copies: never the two the policy wants */
    assert_int_equal(capcheck(out, sizeof out, "gate %s/c1 --policy %s --all", tmp, p), 1);
    assert_int_equal(capcheck(out2, sizeof out2, "gate %s/c150 --policy %s --all", tmp, p), 1);
    expect_in(out2, "  - 1 passing cases; the policy wants at least 2\n");
    expect_in(out2, "  - 1 passing cases checked the VJP; the policy wants at least 2\n");
    expect_same_verdicts(out, out2);

    /* the copies dealt to three shards (equal cost: round robin, every shard has some) */
    for (int k = 1; k <= 3; k++)
        assert_int_equal(capcheck(out, sizeof out, "run %s/copies.cases --provider reference "
                                                   "--shard %d/3 --out %s/sh%d",
                                  tmp, k, tmp, k), 0);
    assert_int_equal(capcheck(out2, sizeof out2, "gate %s/sh1 %s/sh2 %s/sh3 --policy %s --all",
                              tmp, tmp, tmp, p), 1);
    expect_in(out2, "149 repeated case lines counted once");
    assert_int_equal(capcheck(out, sizeof out, "gate %s/c1 --policy %s --all", tmp, p), 1);
    expect_same_verdicts(out, out2);
    assert_int_equal(capcheck(out, sizeof out, "merge %s/sh1 %s/sh2 %s/sh3 --out %s/merged "
                                               "--policy %s",
                              tmp, tmp, tmp, tmp, p), 0);
    expect_in(out, "capcheck merge: 3 shards, 1 cases: 1 passed, 0 not; report in ");
    expect_in(out, "capcheck merge: 149 repeated case lines counted once (150 case lines ran); "
                   "0 disagreed");
    expect_same_rows("c1", "merged");
}

/* ---- one case under several checks --------------------------------------------------------- */

static void test_one_case_under_several_checks_is_one_passing_case(void **state)
{
    (void)state;
    char path[700], p[700];
    snprintf(path, sizeof path, "%s/split.cases", tmp);
    cc_t_write(path, "add dtype=f32 in=[3,4],[3,4] seed=7\n"
                     "add dtype=f32 in=[3,4],[3,4] check=fwd seed=7\n"
                     "add dtype=f32 in=[3,4],[3,4] check=vjp seed=7\n"
                     "add dtype=f32 in=[3,4],[3,4] ref=full seed=7\n");
    small_policy("p2s.conf", "min_passing 2\nmin_vjp_passing 1\nmin_distinct_shapes 1\n", p,
                 sizeof p);
    assert_int_equal(capcheck(out, sizeof out, "run %s --provider reference --out %s/split", path,
                              tmp), 0);
    /* ref=full of a case never sampled is the same check as ref=auto: a repeat */
    expect_in(out, "capcheck: 1 repeated case line counted once");
    assert_int_equal(capcheck(out, sizeof out, "gate %s/split --policy %s --all", tmp, p), 1);
    expect_in(out, "  - 1 passing cases (2 more passing checks of inputs already counted: one "
                   "case under another check= or reference mode); the policy wants at least 2\n");
    expect_in(out, "  evidence: 1 passing of 3 cases; distinct: 1 shapes, 1 layouts, 0 edge "
                   "classes\n");
    /* two draws of inputs are two passing cases */
    snprintf(path, sizeof path, "%s/two.cases", tmp);
    cc_t_write(path, "add dtype=f32 in=[3,4],[3,4] check=fwd seed=7\n"
                     "add dtype=f32 in=[3,4],[3,4] seed=8\n");
    assert_int_equal(capcheck(out, sizeof out, "run %s --provider reference --out %s/two", path,
                              tmp), 0);
    assert_int_equal(capcheck(out, sizeof out, "gate %s/two --policy %s --all", tmp, p), 0);
    expect_in(out, "checked          capcheck.oracle.add f32");
}

/* ---- repeats that disagree ----------------------------------------------------------------- */

static const char TWICE[] = "add dtype=f64 in=[5],[5] check=fwd seed=3\n"
                           "add dtype=f64 in=[5],[5] check=fwd seed=3\n"
                           "add dtype=f64 in=[4],[4] check=fwd seed=3\n";

/* the misbehave plugin in `mode` on the cases of `text`, one worker */
static int misbehave_run(const char *mode, const char *dir, const char *text)
{
    char path[700], env[1400];
    snprintf(path, sizeof path, "%s/%s.cases", tmp, dir);
    cc_t_write(path, text);
    snprintf(env, sizeof env, "CAPCHECK_MISBEHAVE=%s CAPCHECK_MISBEHAVE_MARK=%s/%s.mark ", mode,
             tmp, dir);
    char args[2048];
    snprintf(args, sizeof args, "run %s --provider-lib %s/misbehave.so --out %s/%s -j 1", path,
             CAPCHECK_PLUGIN_DIR, tmp, dir);
    return cc_t_run(env, args, out, sizeof out);
}

static void test_repeats_that_disagree_are_nondeterministic(void **state)
{
    (void)state;
    char p[700];
    small_policy("p1.conf", "min_passing 1\nmin_vjp_passing 0\nmin_distinct_shapes 1\n", p,
                 sizeof p);
    /* another status: the second run of the case writes zeros */
    assert_int_equal(misbehave_run("flaky-forward", "flaky", TWICE), 1);
    expect_in(out, "1 passed, 0 failed, 0 unsupported, 1 errors (0 crashed, 0 timed out) of 2 "
                   "distinct cases");
    expect_in(out, "1 disagreed with their first run (nondeterministic)");
    char *rep = cc_t_slurp_in(tmp, "flaky", "report.json");
    expect_in(rep, "\"pass\": 1, \"fail\": 0,");
    expect_in(rep, "\"nondeterministic\": 1,");
    expect_in(rep, "repeated runs of this case disagree: the first was pass (worst bound ratio "
                   "0), a repeat fail");
    free(rep);
    /* the same bits or not: both pass, one an ulp off; on the CPU that is a finding too */
    assert_int_equal(misbehave_run("ulp-forward", "ulp", TWICE), 1);
    rep = cc_t_slurp_in(tmp, "ulp", "report.json");
    expect_in(rep, "\"nondeterministic\": 1,");
    expect_in(rep, "repeated runs of this case gave different bits: both pass");
    free(rep);
    /* the gate keeps the capsule out, naming the case */
    assert_int_equal(capcheck(out, sizeof out, "gate %s/ulp --policy %s --all", tmp, p), 1);
    expect_in(out, "plugin.misbehave.cpu.add f64");
    expect_in(out, "1 of 2 cases did not pass (0 failed, 0 errors, 0 crashed, 0 timed out, 0 "
                   "out-of-bounds, 1 nondeterministic); first: ");
    expect_in(out, "add dtype=f64 device=cpu in=[5],[5] stream=2 layout=contig check=fwd seed=3");
    /* the ulp alone is within the bound: without a repeat to compare, every case passes */
    assert_int_equal(misbehave_run("ulp-forward", "ulp_once",
                                   "add dtype=f64 in=[5],[5] check=fwd seed=3\n"
                                   "add dtype=f64 in=[5],[5] check=fwd seed=4\n"),
                     0);
    assert_null(strstr(out, "nondeterministic"));
}

/* ---- diverse evidence ---------------------------------------------------------------------- */

static void test_many_seeds_of_one_shape_are_one_shape(void **state)
{
    (void)state;
    char path[700], p[700];
    snprintf(path, sizeof path, "%s/seeds.cases", tmp);
    FILE *f = fopen(path, "w");
    for (int k = 1; k <= 100; k++)
        fprintf(f, "add dtype=f32 in=[3,4],[3,4] seed=%d\n", k);
    fclose(f);
    snprintf(path, sizeof path, "%s/shapes.cases", tmp);
    f = fopen(path, "w");
    for (int k = 1; k <= 100; k++)
        fprintf(f, "add dtype=f32 in=[%d,3],[%d,3] seed=%d\n", k, k, k);
    fclose(f);
    snprintf(path, sizeof path, "%s/seeds.cases", tmp);
    assert_int_equal(capcheck(out, sizeof out, "run %s --provider reference --out %s/seeds", path,
                              tmp), 0);
    snprintf(path, sizeof path, "%s/shapes.cases", tmp);
    assert_int_equal(capcheck(out, sizeof out, "run %s --provider reference --out %s/shapes",
                              path, tmp), 0);
    /* the default: half of min_passing */
    small_policy("pd.conf", "min_passing 100\nmin_vjp_passing 100\n", p, sizeof p);
    assert_int_equal(capcheck(out, sizeof out, "gate %s/seeds --policy %s --all", tmp, p), 1);
    expect_in(out, "  - 1 distinct input shapes among the passing cases; the policy wants at "
                   "least 50 (min_distinct_shapes: many seeds of one shape are not many "
                   "shapes)\n");
    assert_int_equal(capcheck(out, sizeof out, "gate %s/shapes --policy %s --all", tmp, p), 0);
    expect_in(out, "checked          capcheck.oracle.add f32");
    expect_in(out, "; distinct: 100 shapes, 1 layouts, 0 edge classes;");
    /* set, and set per op (a later section wins) */
    small_policy("p101.conf", "min_passing 100\nmin_vjp_passing 100\nmin_distinct_shapes 101\n",
                 p, sizeof p);
    assert_int_equal(capcheck(out, sizeof out, "gate %s/shapes --policy %s --all", tmp, p), 1);
    expect_in(out, "  - 100 distinct input shapes among the passing cases; the policy wants at "
                   "least 101");
    small_policy("pop.conf", "min_passing 100\nmin_vjp_passing 100\n[op add]\n"
                             "min_distinct_shapes 1\n",
                 p, sizeof p);
    assert_int_equal(capcheck(out, sizeof out, "gate %s/seeds --policy %s --all", tmp, p), 0);
    /* the shipped policy's own value */
    assert_int_equal(capcheck(out, sizeof out, "gate %s/seeds --policy %s --all", tmp, any), 1);
    expect_in(out, "the policy wants at least 50 (min_distinct_shapes");
    /* a bad value is bad input */
    small_policy("pbad.conf", "min_distinct_shapes -1\n", p, sizeof p);
    assert_int_equal(capcheck(out, sizeof out, "gate %s/seeds --policy %s", tmp, p), 2);
    expect_in(out, "pbad.conf:7: min_distinct_shapes wants a count");
}

/* The record of case line `line` (one add case on the CPU) with the given status. */
static cc_result record(const char *line, cc_result_status status)
{
    cc_result r;
    memset(&r, 0, sizeof r);
    snprintf(r.line, sizeof r.line, "%s", line);
    snprintf(r.op, sizeof r.op, "add");
    snprintf(r.provider, sizeof r.provider, "example");
    snprintf(r.platform, sizeof r.platform, "cpu:avx2");
    r.dtype = CC_F32;
    r.device = CC_CPU;
    r.status = status;
    return r;
}

/* The exit code of records in this order (harness/run/exit_code.h: git bisect run reads it). */
static int exit_code_of(const cc_result *records, int n)
{
    cc_report rep;
    cc_report_init(&rep);
    for (int i = 0; i < n; i++)
        assert_int_equal(cc_report_add(&rep, &records[i]), 0);
    int rc = cc_report_exit_code(&rep);
    cc_report_free(&rep);
    return rc;
}

/* The exit code counts each case once however often it ran: an unsupported case run three
 * times beside one failing case is still a run with a failure (1, not 125: counted per record
 * it would outnumber the cases that did not pass); an unsupported case whose repeat passed is
 * nondeterministic, a finding (1), no longer a case that could not be judged. */
static void test_the_exit_code_counts_each_case_once(void **state)
{
    (void)state;
    const char *a = "add dtype=f32 device=cpu in=[2],[2] stream=2 layout=contig check=fwd seed=1";
    const char *b = "add dtype=f32 device=cpu in=[3],[3] stream=2 layout=contig check=fwd seed=2";
    cc_result u = record(a, CC_RES_UNSUPPORTED), p = record(a, CC_RES_PASS);
    cc_result f = record(b, CC_RES_FAIL), pb = record(b, CC_RES_PASS);
    assert_int_equal(exit_code_of((cc_result[]){u, u, u, f}, 4), CC_EXIT_NOT_PASSED);
    assert_int_equal(exit_code_of((cc_result[]){u, u, u, pb}, 4), CC_EXIT_UNJUDGED);
    assert_int_equal(exit_code_of((cc_result[]){u, p, pb}, 3), CC_EXIT_NOT_PASSED);
    assert_int_equal(exit_code_of((cc_result[]){p, p, pb, pb}, 4), CC_EXIT_PASSED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_smoke_three_times_is_the_smoke),
        cmocka_unit_test(test_150_copies_of_one_line_are_one_case),
        cmocka_unit_test(test_one_case_under_several_checks_is_one_passing_case),
        cmocka_unit_test(test_repeats_that_disagree_are_nondeterministic),
        cmocka_unit_test(test_many_seeds_of_one_shape_are_one_shape),
        cmocka_unit_test(test_the_exit_code_counts_each_case_once),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
