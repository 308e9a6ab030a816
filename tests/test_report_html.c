/* report.html without a browser (tests/html_check.py renders it in one): a run with a planted
 * bug (the mutants plugin, softmax over the wrong axis) writes report.html beside report.md,
 * self-contained (its Content-Security-Policy, no URL, no external reference), with one heat
 * cell per row of report.json, one failure heading per failing op x dtype and min(3, failing)
 * repro lines under each, every one a failing case of results.jsonl; the gate section holds the
 * verdicts under a policy and says why there are none without one; fields other writers add to
 * results.jsonl ("platform", "vacuous") become column groups and counts; capcheck report
 * rewrites the same page, and refuses a missing folder or policy with one sentence (exit 2), as
 * capcheck run refuses a policy it cannot read before it runs a case. */
#include "cli_util.h"

#include <sys/stat.h>

static char tmp[256], planted[512];
static char out[1 << 16];

static const char CASES[] = "softmax count=4 dtype=f32,f64 layout=contig,transpose size=small\n"
                            "add count=3 dtype=f32,f16 size=small\n"
                            "linear count=3 dtype=f64 size=small\n";

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/capcheck_html_XXXXXX");
    if (!mkdtemp(tmp))
        return -1;
    char cases[600], policy[600], args[2048];
    snprintf(cases, sizeof cases, "%s/h.cases", tmp);
    cc_t_write(cases, CASES);
    /* a policy any run can meet but for its failures: no libtorch, no coverage classes */
    snprintf(policy, sizeof policy, "%s/policy.conf", tmp);
    cc_t_write(policy, "format capcheck-policy/1\nmin_passing 1\nmin_vjp_passing 1\n"
                       "shape_classes none\nlayout_classes none\nedge_classes none\n");
    snprintf(planted, sizeof planted, "%s/planted", tmp);
    snprintf(args, sizeof args, "run %s --provider-lib %s/mutants.so --out %s --policy %s -j 1",
             cases, CAPCHECK_PLUGIN_DIR, planted, policy);
    return cc_t_run("CAPCHECK_MUTANT=softmax_axis ", args, out, sizeof out) == 1 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return cc_t_remove_dir(tmp);
}

static char *page_of(const char *dir)
{
    char path[800];
    snprintf(path, sizeof path, "%s/report.html", dir);
    char *t = cc_t_slurp(path, NULL);
    if (!t)
        fail_msg("no %s", path);
    return t;
}

static void test_page_of_a_failing_run(void **state)
{
    (void)state;
    assert_non_null(strstr(out, "capcheck: report.html in "));
    /* the gate's line says why: failures, not thin evidence (so no command to gather more) */
    expect_in(out, "capcheck: gate: 3 of 5 capsule x dtype x platform checked under ");
    expect_in(out, ": 2 of the 2 held back have a case that did not pass (the first, "
                   "plugin.mutants.cpu.softmax f32 on cpu:");
    expect_in(out, "4 of 8 cases did not pass");
    assert_null(strstr(out, "certify"));
    char *html = page_of(planted);
    /* self-contained */
    assert_non_null(strstr(html, "Content-Security-Policy\" content=\"default-src 'none'"));
    assert_null(strstr(html, "http://"));
    assert_null(strstr(html, "https://"));
    assert_null(strstr(html, " src="));
    assert_null(strstr(html, "<link"));
    /* one heat cell per row of report.json (op x dtype here: one provider, one device) */
    char path[700];
    snprintf(path, sizeof path, "%s/report.json", planted);
    char *report = cc_t_slurp(path, NULL);
    assert_int_equal(cc_t_count(html, " cell\" data-op="), cc_t_count(report, "{\"op\": "));
    assert_int_equal(cc_t_count(report, "{\"op\": "), 5);
    free(report);
    /* the failing cells: softmax f32 and f64, each with its 3 worst repro lines */
    assert_int_equal(cc_t_count(html, "<h3 class=\"failcell\""), 2);
    assert_non_null(strstr(html, "data-dtype=\"f32\" data-op=\"softmax\""));
    assert_non_null(strstr(html, "data-dtype=\"f64\" data-op=\"softmax\""));
    /* each the whole command: the plugin's variable, the line, the plugin (harness/report/repro.h) */
    const char *repro =
        "<code class=\"repro\">CAPCHECK_MUTANT=softmax_axis " CAPCHECK_BIN " repro &#39;";
    assert_int_equal(cc_t_count(html, repro), 6);
    snprintf(path, sizeof path, "%s/results.jsonl", planted);
    char *results = cc_t_slurp(path, NULL);
    for (const char *s = html; (s = strstr(s, repro));) {
        s += strlen(repro);
        const char *end = strstr(s, "&#39;");
        assert_int_equal(strncmp(end, "&#39; --provider-lib ", 21), 0);
        char needle[1200];
        snprintf(needle, sizeof needle, "\"case\":\"%.*s\"", (int)(end - s), s);
        const char *rec = strstr(results, needle);
        if (!rec)
            fail_msg("repro line %.*s is no case of results.jsonl", (int)(end - s), s);
        const char *eol = strchr(rec, '\n');
        const char *st = strstr(rec, "\"status\":\"fail\"");
        if (!st || st > eol)
            fail_msg("repro line %.*s is not a failing case", (int)(end - s), s);
    }
    free(results);
    /* the verdict, the gate's verdicts: softmax held back by its failures */
    assert_non_null(strstr(html, "cases did not pass, in 2 op \xc3\x97 dtype cells"));
    assert_non_null(strstr(html, "id=\"gate-summary\""));
    assert_non_null(strstr(html, "<b>3 of 5</b> capsule \xc3\x97 dtype \xc3\x97 platform checked"));
    assert_int_equal(cc_t_count(html, "mutants.cpu.softmax</td>"), 2);
    /* what each verdict's evidence spans: linear f64 has 3 passing cases */
    expect_in(html, "<td>3 passing inputs; 3 shapes, 1 layouts, 0 edge classes</td>");
    free(html);
}

static void test_fields_of_other_writers(void **state)
{
    (void)state;
    /* a copy of the run whose records name two platforms and one vacuous check; the results
     * digest covers the platform (a report commits to where its results hold), so the copy's
     * report is rebuilt from its journal (--resume with every case recorded) */
    char copy[700], cmd[2048], path[800];
    snprintf(copy, sizeof copy, "%s/extras", tmp);
    snprintf(cmd, sizeof cmd, "cp -r %s %s", planted, copy);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof path, "%s/results.jsonl", copy);
    char *t = cc_t_slurp(path, NULL);
    FILE *f = fopen(path, "w");
    int k = 0;
    for (char *line = strtok(t, "\n"); line; line = strtok(NULL, "\n"), k++) {
        /* a platform the writer already put there (issue 12) gives way to the planted one */
        char *own = strstr(line, ",\"platform\":\"");
        if (own) {
            char *end = strchr(own + 13, '"') + 1;
            memmove(own, end, strlen(end) + 1);
        }
        fprintf(f, "%.*s,\"platform\":\"%s\"%s}\n", (int)strlen(line) - 1, line,
                k % 2 ? "cpu:avx2" : "cpu:avx512", k == 3 ? ",\"vacuous\":true" : "");
    }
    fclose(f);
    free(t);
    snprintf(cmd, sizeof cmd, "run %s/h.cases --provider-lib %s/mutants.so --resume %s -j 1",
             tmp, CAPCHECK_PLUGIN_DIR, copy);
    assert_int_equal(cc_t_run("CAPCHECK_MUTANT=softmax_axis ", cmd, out, sizeof out), 1);
    snprintf(cmd, sizeof cmd, "report %s --policy %s/policy.conf", copy, tmp);
    assert_int_equal(cc_t_run(NULL, cmd, out, sizeof out), 0);
    char *html = page_of(copy);
    assert_non_null(strstr(html, "class=\"group\">mutants \xc2\xb7 cpu:avx512</th>"));
    assert_non_null(strstr(html, "class=\"group\">mutants \xc2\xb7 cpu:avx2</th>"));
    assert_non_null(strstr(html, "<b>1</b>vacuous</div>"));
    assert_non_null(strstr(html, "<td>cpu:avx512, cpu:avx2</td>"));
    /* cells now per platform: more of them than rows of report.json */
    assert_true(cc_t_count(html, " cell\" data-op=") > 5);
    free(html);
}

static void test_report_command(void **state)
{
    (void)state;
    char args[2048], path[700];
    /* the same page again */
    char *before = page_of(planted);
    snprintf(args, sizeof args, "report %s --policy %s/policy.conf", planted, tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    char *after = page_of(planted);
    assert_string_equal(before, after);
    free(before);
    free(after);
    /* from a folder without reports/policy.conf: the policy built into capcheck all the same */
    snprintf(args, sizeof args, "report %s", planted);
    snprintf(path, sizeof path, "cd %s && ", tmp);
    assert_int_equal(cc_t_run(path, args, out, sizeof out), 0);
    char *html = page_of(planted);
    assert_non_null(strstr(html, "built-in:reports/policy.conf"));
    free(html);
    /* refusals */
    snprintf(args, sizeof args, "report %s --policy %s/nope.conf", planted, tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    assert_non_null(strstr(out, "capcheck report: report.html: "));
    assert_non_null(strstr(out, "nope.conf"));
    snprintf(args, sizeof args, "report %s/none", tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    assert_non_null(strstr(out, "no such report or folder"));
    assert_int_equal(cc_t_run(NULL, "report", out, sizeof out), 2);
    assert_non_null(strstr(out, "give one run folder"));
    /* run refuses a policy it cannot read before running anything */
    snprintf(args, sizeof args, "run --provider reference --op add --out %s/never --policy %s/nope",
             tmp, tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    assert_non_null(strstr(out, "capcheck: --policy "));
    snprintf(path, sizeof path, "%s/never", tmp);
    struct stat st;
    assert_int_not_equal(stat(path, &st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_page_of_a_failing_run),
        cmocka_unit_test(test_fields_of_other_writers),
        cmocka_unit_test(test_report_command),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
