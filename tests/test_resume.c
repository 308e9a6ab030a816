/* Never lose a result: a run killed with SIGKILL part way (plus a torn last record) and
 * finished with --resume writes the same report as an uninterrupted run (minus "timing"),
 * with every case recorded exactly once; a resume of another case list, of a tampered
 * journal, or of a folder without a run is refused with one sentence. Runs the real capcheck
 * binary (CAPCHECK_BIN) on the planted-bug plugin with no bug planted (the float64 reference
 * behind the plugin ABI), whose hold stops the run after exactly 40 cases for the kill. */
#include "cli_util.h"

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

static char tmpdir[256];
static char cases_path[512], run_dir[512];
/* the provider of every run here; the timeout outlasts the held calls of the killed run */
#define PROVIDER "--provider-lib " CAPCHECK_PLUGIN_DIR "/mutants.so --timeout 600"
/* explicit lines (no generator: their cost must not depend on the samplers), ~1 ms each */
#define N_CASES 300
static void write_cases(FILE *f)
{
    for (int k = 0; k < N_CASES; k++)
        fprintf(f, "matmul dtype=%s in=[64,80],[80,64] layout=%s seed=%d\n", k % 2 ? "f64" : "f32",
                k % 3 ? "contig" : "transpose", k + 1);
}

/* The file without the lines that start with `drop` (the report's timing). */
static char *without_lines(const char *path, const char *drop)
{
    char *text = cc_t_slurp(path, NULL);
    if (!text)
        fail_msg("cannot read %s", path);
    char *out = malloc(strlen(text) + 1), *o = out;
    for (char *line = text; *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line + 1) : strlen(line);
        if (strncmp(line, drop, strlen(drop)) != 0) {
            memcpy(o, line, len);
            o += len;
        }
        line += len;
    }
    *o = 0;
    free(text);
    return out;
}

static void in_dir(const char *dir, const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", dir, name);
}

/* Start `capcheck run` on the cases into dir, held after `after` cases on both workers, and
 * SIGKILL it. Returns the records journaled when it died (`after`). */
static long run_and_kill(const char *dir, long after)
{
    const char *args[] = {"run", cases_path, "--provider-lib", CAPCHECK_PLUGIN_DIR "/mutants.so",
                          "--timeout", "600", "--out", dir, "-j", "2", NULL};
    return cc_t_run_and_kill(dir, args, after, 2);
}

/* Every case recorded exactly once. */
static void expect_complete_journal(const char *dir)
{
    char journal[600], line[8192];
    in_dir(dir, "results.jsonl", journal, sizeof journal);
    FILE *f = fopen(journal, "r");
    assert_non_null(f);
    char seen[N_CASES] = {0};
    long n = 0;
    while (fgets(line, sizeof line, f)) {
        long idx = -1;
        assert_int_equal(sscanf(line, "{\"index\":%ld,", &idx), 1);
        assert_true(idx >= 0 && idx < N_CASES);
        assert_false(seen[idx]);
        seen[idx] = 1;
        n++;
    }
    fclose(f);
    assert_int_equal(n, N_CASES);
}

static void test_killed_run_resumes_to_the_same_report(void **state)
{
    (void)state;
    char out[16384], args[2048], path[600];
    long before = run_and_kill(run_dir, 40);
    assert_int_equal(before, 40);

    /* a write torn by the kill: half a record, no newline */
    in_dir(run_dir, "results.jsonl", path, sizeof path);
    FILE *j = fopen(path, "a");
    assert_non_null(j);
    fputs("{\"index\":299,\"case\":\"matmul dtype=f", j);
    fclose(j);

    snprintf(args, sizeof args, "run --resume %s %s " PROVIDER " -j 1", run_dir, cases_path);
    if (cc_t_run(NULL, args, out, sizeof out) != 0)
        fail_msg("resume failed: %s", out);
    assert_non_null(strstr(out, "already recorded"));
    assert_non_null(strstr(out, "torn"));
    expect_complete_journal(run_dir);
    char json[600], md[600];
    in_dir(run_dir, "report.json", json, sizeof json);
    in_dir(run_dir, "report.md", md, sizeof md);
    char *full_json = cc_t_slurp(json, NULL);
    assert_non_null(strstr(full_json, "\"resumed\": true"));
    free(full_json);
    char *resumed_json = without_lines(json, "  \"timing\":");
    char *resumed_md = without_lines(md, "- timing:");

    /* a resume of a finished run only rewrites the same report */
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    char *again = without_lines(json, "  \"timing\":");
    assert_string_equal(again, resumed_json);
    free(again);

    /* the same command uninterrupted, into the same folder: refused without --force (it holds
     * a run), done with it */
    snprintf(args, sizeof args, "run %s " PROVIDER " --out %s -j 2", cases_path, run_dir);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    expect_in(out, "holds an earlier run (results.jsonl): --resume");
    strcat(args, " --force");
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    assert_non_null(strstr(out, "300 cases on mutants"));
    char *fresh_json = without_lines(json, "  \"timing\":");
    char *fresh_md = without_lines(md, "- timing:");
    assert_string_equal(resumed_json, fresh_json);
    assert_string_equal(resumed_md, fresh_md);
    assert_non_null(strstr(fresh_json, "\"cases\": 300"));
    free(resumed_json);
    free(resumed_md);
    free(fresh_json);
    free(fresh_md);
}

/* Copy the finished run to a scratch folder, apply `sed` to its journal, and expect a resume
 * of it to be refused with `fragment` in its sentence. */
static void expect_refused_with(const char *name, const char *sed, const char *extra_case,
                                const char *last_case, const char *options,
                                const char *fragment);

static void expect_refused(const char *name, const char *sed, const char *extra_case,
                           const char *fragment)
{
    expect_refused_with(name, sed, extra_case, NULL, PROVIDER, fragment);
}

/* The same, the last case replaced by `last_case` (NULL: kept), the run's options `options`. */
static void expect_refused_with(const char *name, const char *sed, const char *extra_case,
                                const char *last_case, const char *options,
                                const char *fragment)
{
    char dir[600], cmd[3000], out[16384], args[2048], cases[600];
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, name);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", dir, run_dir, dir);
    assert_int_equal(system(cmd), 0);
    if (sed) {
        snprintf(cmd, sizeof cmd, "sed -i '%s' '%s/results.jsonl'", sed, dir);
        assert_int_equal(system(cmd), 0);
    }
    snprintf(cases, sizeof cases, "%s", cases_path);
    if (extra_case || last_case) {
        snprintf(cases, sizeof cases, "%s/%s.cases", tmpdir, name);
        FILE *f = fopen(cases, "w");
        assert_non_null(f);
        write_cases(f);
        if (extra_case)
            fprintf(f, "%s\n", extra_case);
        assert_int_equal(fclose(f), 0);
        if (last_case) {
            snprintf(cmd, sizeof cmd, "sed -i '%ds/.*/%s/' '%s'", N_CASES, last_case, cases);
            assert_int_equal(system(cmd), 0);
        }
    }
    snprintf(args, sizeof args, "run --resume %s %s %s", dir, cases, options);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    if (!strstr(out, fragment))
        fail_msg("expected '%s' in: %s", fragment, out);
}

static void test_resume_refuses_another_run(void **state)
{
    (void)state;
    /* the case list changed */
    expect_refused("more", NULL, "add dtype=f32 in=[3],[3] seed=1", "the case list changed");
    /* a record names another case at its index */
    expect_refused("tampered", "5s/seed=[0-9]*/seed=999999/", NULL, "the case list changed");
    /* as many cases, one of them another (its record not yet written): the list's hash */
    expect_refused_with("same-length", "/\"index\":299,/d", NULL,
                        "add dtype=f64 in=[4],[4] seed=77", PROVIDER,
                        "the case list changed");
    /* the same cases on another provider, or judged otherwise */
    expect_refused_with("provider", NULL, NULL, NULL, "--provider reference",
                        "is a run on provider 'mutants'; this command asks for 'reference'");
    expect_refused_with("judging", NULL, NULL, NULL, PROVIDER " --accumulation relaxed",
                        "is a run judged 'strict'; this command judges 'relaxed'");
    expect_refused_with("power", NULL, NULL, NULL, PROVIDER " --power",
                        "is a run judged 'strict'; this command judges 'strict, power'");
    /* nothing to resume */
    char out[4096], args[1024];
    snprintf(args, sizeof args, "run --resume %s/nothing %s " PROVIDER, tmpdir, cases_path);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    assert_non_null(strstr(out, "nothing to resume"));
}

/* Damage in the middle of a journal (unreadable lines with good records after them, one of
 * them text that is not UTF-8) costs only the damaged records: a resume keeps every good
 * record around them, reruns the damaged cases, keeps the damaged file beside the new one and
 * writes the report of the uninterrupted run. */
static void test_damaged_journal_resumes_around_the_damage(void **state)
{
    (void)state;
    char dir[600], cmd[4000], out[16384], args[2048], json[700], fresh[700], kept[700];
    snprintf(dir, sizeof dir, "%s/damaged", tmpdir);
    snprintf(json, sizeof json, "%s/report.json", dir);
    snprintf(fresh, sizeof fresh, "%s/report.json", run_dir);
    snprintf(kept, sizeof kept, "%s/results.jsonl.damaged", dir);
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' && cp -r '%s' '%s' && rm '%s' && "
             "sed -i -e '7s/.*/garbage/' -e '150s/\"op\"/\"o\xff\"/' -e '151d' "
             "'%s/results.jsonl'",
             dir, run_dir, dir, json, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(args, sizeof args, "run --resume %s %s " PROVIDER " -j 2", dir, cases_path);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    expect_in(out, "resuming");
    expect_in(out, "297 of 300 cases already recorded");
    expect_in(out, "2 damaged lines of its results.jsonl (the first, line 7: not JSON");
    assert_int_equal(access(kept, R_OK), 0);
    expect_complete_journal(dir);
    char *resumed = without_lines(json, "  \"timing\":");
    char *whole = without_lines(fresh, "  \"timing\":");
    assert_string_equal(resumed, whole);
    free(resumed);
    free(whole);
}

/* With crashes in the mix (the planted-bug plugin's crash_on_empty mutant segfaults on every
 * empty input): a journal cut back part way (and torn) resumes to the report of the whole
 * run, first failures and crash counts included. */
static void test_crashes_resume_to_the_same_report(void **state)
{
    (void)state;
    const char *lib = CAPCHECK_PLUGIN_DIR "/mutants.so";
    if (access(lib, R_OK) != 0)
        fail_msg("no %s: the test plugins are built with the tests", lib);
    char dir[600], args[2048], out[16384], cmd[8192], json[700], journal[700];
    snprintf(dir, sizeof dir, "%s/crashes", tmpdir);
    snprintf(json, sizeof json, "%s/report.json", dir);
    snprintf(journal, sizeof journal, "%s/results.jsonl", dir);
    setenv("CAPCHECK_MUTANT", "crash_on_empty", 1);
    snprintf(args, sizeof args, "run %s/tests/mutants.cases --provider-lib %s --out %s -j 2",
             CAPCHECK_SOURCE_DIR, lib, dir);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 1);
    if (!strstr(out, "killed by SIGSEGV"))
        fail_msg("expected crashes in: %s", out);
    char *whole = without_lines(json, "  \"timing\":");
    const char *totals = strstr(whole, "\"totals\": {");
    assert_non_null(totals); /* the totals count the crashes */
    assert_true(strstr(totals, "\"crash\": 0,") == NULL ||
                strstr(totals, "\"crash\": 0,") > strchr(totals, '}'));
    snprintf(cmd, sizeof cmd,
             "head -n 20 '%s' > '%s.cut' && printf '{\"index\":3,\"ca' >> '%s.cut' && "
             "mv '%s.cut' '%s' && rm '%s'",
             journal, journal, journal, journal, journal, json);
    assert_int_equal(system(cmd), 0);
    snprintf(args, sizeof args, "run --resume %s %s/tests/mutants.cases --provider-lib %s -j 1",
             dir, CAPCHECK_SOURCE_DIR, lib);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 1);
    assert_non_null(strstr(out, "20 of"));
    char *resumed = without_lines(json, "  \"timing\":");
    assert_string_equal(resumed, whole);
    free(whole);
    free(resumed);
    unsetenv("CAPCHECK_MUTANT");
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/capcheck_resume_XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(cases_path, sizeof cases_path, "%s/kill.cases", tmpdir);
    snprintf(run_dir, sizeof run_dir, "%s/run", tmpdir);
    FILE *f = fopen(cases_path, "w");
    if (!f)
        return -1;
    write_cases(f);
    fclose(f);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return cc_t_remove_dir(tmpdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_killed_run_resumes_to_the_same_report),
        cmocka_unit_test(test_resume_refuses_another_run),
        cmocka_unit_test(test_damaged_journal_resumes_around_the_damage),
        cmocka_unit_test(test_crashes_resume_to_the_same_report),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
