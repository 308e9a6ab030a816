/* What a run prints, through the binary: a small run looks as it always did (each case that
 * does not pass on two lines, then the counts and where the report is: the README's planted
 * wrong-axis softmax, 132 failing cases of 201); a large one stops its case lines (after the
 * CC_CASE_LINES_SHOWN-th failing case, or from the start when it holds more than CC_LARGE_RUN
 * cases) and ends with one line per op x dtype row that did not pass with the command that
 * reruns its worst case, then a closing line; -v prints every case line, -q the closing line
 * alone. And the worst case shown is the one that shows the bug: with a wrong-axis softmax,
 * report.md, report.html and the summary each show a finite value missed beyond its bound for
 * every dtype, never a NaN/Inf pattern miss (expected nan, got 0.32), while those are counted
 * apart and still shown. */
#include "cli_util.h"

#include "harness/session/session.h"

static char tmpdir[256];

#define MUTANT "CAPCHECK_MUTANT=softmax_axis "
#define MUTANTS_SO "--provider-lib " CAPCHECK_PLUGIN_DIR "/mutants.so"

static int count_lines(const char *text)
{
    int n = 0;
    for (const char *s = text; *s; s++)
        n += *s == '\n';
    return n;
}

/* The last line of text (without its newline), into buf. */
static void last_line(const char *text, char *buf, size_t n)
{
    size_t len = strlen(text);
    while (len && text[len - 1] == '\n')
        len--;
    size_t start = len;
    while (start && text[start - 1] != '\n')
        start--;
    snprintf(buf, n, "%.*s", (int)(len - start), text + start);
}

/* The README's small runs: the counts, where the report is and report.html, nothing more. */
static void test_a_small_run_looks_as_before(void **state)
{
    (void)state;
    char args[1024], out[8192];
    snprintf(args, sizeof args,
             "run " CAPCHECK_SOURCE_DIR "/cases/smoke.cases --op softmax --provider reference "
             "--out %s/softmax",
             tmpdir);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    /* the counts, the report, report.html, and the gate's one line (a reference run: refused,
     * with why) */
    assert_int_equal(count_lines(out), 4);
    assert_non_null(strstr(out, "capcheck: 201 cases on reference in "));
    assert_non_null(strstr(out, ": 201 passed, 0 failed, 0 unsupported, 0 errors (0 crashed, "
                                "0 timed out)\ncapcheck: report in "));
    assert_non_null(strstr(out, "/softmax (report.md, report.json, report.junit.xml, "
                                "results.jsonl)\ncapcheck: report.html in "));
    assert_null(strstr(out, "cases passed"));
    /* the README's planted bug: 132 of 201 cases fail, each its two lines, no summary */
    static char many[1 << 17];
    snprintf(args, sizeof args,
             "run " CAPCHECK_SOURCE_DIR "/cases/smoke.cases --op softmax " MUTANTS_SO
             " --out %s/bug",
             tmpdir);
    assert_int_equal(cc_t_run(MUTANT, args, many, sizeof many), 1);
    assert_int_equal(cc_t_count(many, "fail: "), 132);
    assert_int_equal(cc_t_count(many, "\n  " MUTANT CAPCHECK_BIN " repro 'softmax "), 132);
    assert_int_equal(count_lines(many), 132 * 2 + 4); /* + the counts, report, report.html, gate */
    assert_non_null(strstr(many, ": 69 passed, 132 failed, 0 unsupported, 0 errors (0 crashed, "
                                 "0 timed out)\ncapcheck: report in "));
    assert_null(strstr(many, "more than"));
    assert_null(strstr(many, "rows did not pass"));
    assert_null(strstr(many, "cases passed"));
}

/* The wrong-axis softmax over tmp/FILE into tmp/DIR. */
static int run_mutant(const char *file, const char *dir, const char *flags, char *out, size_t n)
{
    char args[1024];
    snprintf(args, sizeof args, "run %s/%s " MUTANTS_SO " --out %s/%s %s", tmpdir, file, tmpdir,
             dir, flags);
    return cc_t_run(MUTANT, args, out, n);
}

/* 800 small softmax cases: 501 fail on the wrong axis, more than CC_CASE_LINES_SHOWN. */
static void test_a_large_run_ends_with_a_summary(void **state)
{
    (void)state;
    static char out[1 << 20];
    char path[512];
    snprintf(path, sizeof path, "%s/many.cases", tmpdir);
    cc_t_write(path, "softmax count=400 dtype=f32,f64 size=tiny\n");
    assert_int_equal(run_mutant("many.cases", "large", "", out, sizeof out), 1);
    assert_non_null(strstr(out, ": 299 passed, 501 failed, 0 unsupported"));
    assert_int_equal(cc_t_count(out, "fail: "), CC_CASE_LINES_SHOWN);
    assert_int_equal(cc_t_count(out, "capcheck: more than 200 cases to report: their lines stop "
                                     "here (-v prints every one)"),
                     1);
    assert_non_null(strstr(out, "capcheck: 2 of 2 op x dtype rows did not pass; the worst case "
                                "of each reruns with:\n"));
    const char *dtypes[] = {"f64", "f32"};
    for (int k = 0; k < 2; k++) {
        char row[64];
        snprintf(row, sizeof row, "\n  softmax %s: ", dtypes[k]);
        const char *at = strstr(out, row);
        if (!at)
            fail_msg("no summary row for softmax %s in:\n%s", dtypes[k], out);
        const char *eol = strchr(at + 1, '\n');
        char *line = strndup(at + 1, (size_t)(eol - at - 1));
        assert_non_null(strstr(line, " of 400 did not pass ("));
        assert_non_null(strstr(line, "): " MUTANT CAPCHECK_BIN " repro 'softmax dtype="));
        free(line);
    }
    char last[1024], want[1024];
    last_line(out, last, sizeof last);
    snprintf(want, sizeof want,
             "capcheck: 299 of 800 cases passed (501 failed, 0 unsupported, 0 errors); read "
             "%s/large/report.md, %s/large/report.html; every case: %s/large/results.jsonl",
             tmpdir, tmpdir, tmpdir);
    assert_string_equal(last, want);
    /* 200 cases' two lines, "more than 200", the counts, the rows' head and two rows, the
     * report, report.html, the gate's line and the closing line */
    assert_int_equal(count_lines(out), 2 * CC_CASE_LINES_SHOWN + 1 + 1 + 1 + 2 + 4);

    /* -v: every case's line, and the same summary */
    assert_int_equal(run_mutant("many.cases", "verbose", "-v", out, sizeof out), 1);
    assert_int_equal(cc_t_count(out, "fail: "), 501);
    assert_null(strstr(out, "more than"));
    assert_non_null(strstr(out, "2 of 2 op x dtype rows did not pass"));

    /* -q: the closing line alone (stdout and stderr together) */
    assert_int_equal(run_mutant("many.cases", "quiet", "--quiet", out, sizeof out), 1);
    assert_int_equal(count_lines(out), 1);
    snprintf(want, sizeof want,
             "capcheck: 299 of 800 cases passed (501 failed, 0 unsupported, 0 errors); read "
             "%s/quiet/report.md, %s/quiet/report.html; every case: %s/quiet/results.jsonl\n",
             tmpdir, tmpdir, tmpdir);
    assert_string_equal(out, want);
    /* a clean quiet run, and the options refused together */
    char args[1024];
    snprintf(args, sizeof args, "run --op relu --provider reference -q --out %s/clean", tmpdir);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    assert_int_equal(count_lines(out), 1);
    assert_non_null(strstr(out, "capcheck: 184 of 184 cases passed; read "));
    assert_int_equal(cc_t_run(NULL, "run -q -v --provider reference", out, sizeof out), 2);
    assert_non_null(strstr(out, "-v prints every case's line and -q only the last line: give "
                                "one"));
    /* an error still says itself under -q */
    assert_int_equal(cc_t_run(NULL, "run /no/such.cases -q", out, sizeof out), 2);
    assert_non_null(strstr(out, "cannot open the case file"));
}

/* More than CC_LARGE_RUN cases: large from the start, no case line even for the few that fail. */
static void test_a_run_of_many_cases_is_large_from_its_start(void **state)
{
    (void)state;
    static char out[1 << 16];
    char path[512];
    snprintf(path, sizeof path, "%s/nightly.cases", tmpdir);
    cc_t_write(path, "relu count=9990 size=tiny\nsoftmax count=20 dtype=f32 size=tiny\n");
    assert_int_equal(run_mutant("nightly.cases", "nightly", "", out, sizeof out), 1);
    assert_int_equal(strncmp(out, "capcheck: 10010 cases, more than 10000: the lines of cases "
                                  "that do not pass give way to progress (-v prints them)",
                             90),
                     0);
    assert_int_equal(cc_t_count(out, "fail: "), 0);
    assert_non_null(strstr(out, ": 9999 passed, 11 failed, 0 unsupported"));
    assert_non_null(strstr(out, "capcheck: 1 of 2 op x dtype rows did not pass; the worst case "
                                "of each reruns with:\n  softmax f32: 11 of 20 did not pass (11 "
                                "fail): " MUTANT CAPCHECK_BIN " repro 'softmax dtype=f32 "));
    assert_non_null(strstr(out, "capcheck: 9999 of 10010 cases passed (11 failed, 0 unsupported, "
                                "0 errors); read "));
    assert_int_equal(count_lines(out), 1 + 1 + 1 + 1 + 4); /* ... report.html, the gate's line */
}

/* The worst-case line of every softmax row of report.md ("- **softmax f32 ...": ...). */
static char *md_row(const char *md, const char *dtype)
{
    char head[64];
    snprintf(head, sizeof head, "- **softmax %s ", dtype);
    const char *at = strstr(md, head);
    if (!at)
        fail_msg("report.md has no failing row for softmax %s", dtype);
    const char *eol = strchr(at, '\n');
    return strndup(at, (size_t)(eol - at));
}

/* A finite expected value and a finite got: "expected 0.0178, got 0.1097" has no nan or inf. */
static void assert_plain_number_miss(const char *text, const char *where)
{
    const char *e = strstr(text, "expected ");
    if (!e)
        fail_msg("%s: no expected value in: %s", where, text);
    char pair[160];
    snprintf(pair, sizeof pair, "%.159s", e);
    char *stop = strstr(pair, ", bound");
    if (stop)
        *stop = 0;
    if (strstr(pair, "nan") || strstr(pair, "inf"))
        fail_msg("%s: the worst case shown is a NaN/Inf pattern miss: %s", where, text);
}

static void test_the_worst_case_shows_the_bug(void **state)
{
    (void)state;
    static char out[1 << 20];
    /* the smoke's softmax cases (edge=nan among them), made a large run by 9,900 passing relu
     * cases, so that it ends with its summary */
    char args[1024];
    snprintf(args, sizeof args,
             "list cases " CAPCHECK_SOURCE_DIR "/cases/smoke.cases --op softmax > %1$s/worst.cases"
             " && echo 'relu count=9900 size=tiny' >> %1$s/worst.cases",
             tmpdir);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    assert_int_equal(run_mutant("worst.cases", "worst", "", out, sizeof out), 1);
    assert_non_null(strstr(out, "132 failed"));
    char *md = cc_t_slurp_in(tmpdir, "worst", "report.md");
    char *html = cc_t_slurp_in(tmpdir, "worst", "report.html");
    const char *dtypes[] = {"f64", "f32", "f16", "bf16"};
    long nonfinite_total = 0;
    for (int k = 0; k < 4; k++) {
        char *row = md_row(md, dtypes[k]);
        assert_plain_number_miss(strstr(row, "; worst: "), row);
        /* the NaN/Inf pattern misses counted apart, and the first of them shown after it */
        const char *n = strstr(row, " of the fails on a NaN/Inf pattern");
        if (!n)
            fail_msg("report.md does not count the NaN/Inf misses apart: %s", row);
        while (n > row && n[-1] != ' ')
            n--;
        nonfinite_total += atol(n);
        const char *first = strstr(strstr(md, row), "\n  first NaN/Inf pattern miss: ");
        assert_non_null(first);
        assert_true(strstr(first, "nan") || strstr(first, "inf"));
        /* the summary reruns the same worst case report.md names */
        const char *cmd = strstr(strstr(md, row), "\n  `") + 4;
        char *md_cmd = strndup(cmd, (size_t)(strchr(cmd, '`') - cmd));
        char summary_row[64];
        snprintf(summary_row, sizeof summary_row, "\n  softmax %s: ", dtypes[k]);
        const char *s = strstr(out, summary_row);
        assert_non_null(s);
        const char *eol = strchr(s + 1, '\n');
        char *line = strndup(s, (size_t)(eol - s));
        if (!strstr(line, md_cmd))
            fail_msg("the summary's softmax %s line does not rerun report.md's worst case:\n%s\n"
                     "%s",
                     dtypes[k], line, md_cmd);
        free(line);
        free(md_cmd);
        free(row);
    }
    assert_true(nonfinite_total > 0);
    /* report.json counts them apart too */
    char *json = cc_t_slurp_in(tmpdir, "worst", "report.json");
    assert_int_equal(cc_t_count(json, "\"nonfinite_failures\": "), 4);
    /* report.html: each cell's first case is a plain-number miss; a NaN/Inf one is still shown */
    const char *cell = html;
    int cells = 0;
    while ((cell = strstr(cell, "<h3 class=\"failcell\""))) {
        cells++;
        const char *h3_end = strstr(cell, "</h3>");
        assert_non_null(strstr(cell, "of them on a NaN/Inf pattern"));
        assert_true(strstr(cell, "of them on a NaN/Inf pattern") < h3_end);
        const char *first = strstr(cell, "<li class=\"failure\">");
        const char *end = strstr(first, "</li>");
        char *item = strndup(first, (size_t)(end - first));
        assert_plain_number_miss(item, "report.html's first case");
        free(item);
        const char *list_end = strstr(cell, "</ul>");
        char *list = strndup(cell, (size_t)(list_end - cell));
        if (!strstr(list, "expected <span class=\"mono\">nan") &&
            !strstr(list, "got <span class=\"mono\">nan"))
            fail_msg("report.html's cell shows no NaN/Inf pattern miss:\n%s", list);
        free(list);
        cell = list_end;
    }
    assert_int_equal(cells, 4);
    free(json);
    free(html);
    free(md);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/capcheck-summary-XXXXXX");
    if (!mkdtemp(tmpdir))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_small_run_looks_as_before),
        cmocka_unit_test(test_a_large_run_ends_with_a_summary),
        cmocka_unit_test(test_a_run_of_many_cases_is_large_from_its_start),
        cmocka_unit_test(test_the_worst_case_shows_the_bug),
    };
    int rc = cmocka_run_group_tests_name("summary", tests, NULL, NULL);
    if (cc_t_remove_dir(tmpdir) != 0)
        rc = rc ? rc : 1;
    return rc;
}
