/* No quiet wrong answers, through the binary:
 *   history  a night whose case set differs from the night before's is marked, and a series
 *            that failed is "passing" only when the next night ran the same cases and they
 *            passed ("case set changed" otherwise); a folder given twice, or a copy of a
 *            night, is refused (exit 2);
 *   diff     a run must hold its results.jsonl, matching its report's digest (missing or
 *            edited: exit 2); a report kept alone is read as one, and the header says which
 *            each side was; a lone shard is refused as gate and merge refuse it;
 *   run      --resume A --out B is refused with one sentence, and B is not made;
 *   plugins  what a plugin prints to its stdout (printf and write(1)) never reaches capcheck's
 *            stdout: run, repro (also --no-fork), shrink and bench; it reaches stderr. */
#include "cli_util.h"


static char tmp[256];
static char out[1 << 16];

#define MUTANTS_SO CAPCHECK_PLUGIN_DIR "/mutants.so"
#define MISBEHAVE_SO CAPCHECK_PLUGIN_DIR "/misbehave.so"

static void write_in_tmp(const char *name, const char *text)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    cc_t_write(path, text);
}

/* A night: FILE's cases on the mutants plugin (its mutant MUTANT, "" for the plain reference)
 * into tmp/DIR. */
static void night(const char *file, const char *mutant, const char *dir, int want)
{
    char prefix[128], args[1200];
    snprintf(prefix, sizeof prefix, "CAPCHECK_MUTANT=%s ", mutant);
    snprintf(args, sizeof args, "run %s/%s --provider-lib " MUTANTS_SO " --out %s/%s -q", tmp,
             file, tmp, dir);
    int rc = cc_t_run(prefix, args, out, sizeof out);
    if (rc != want)
        fail_msg("night %s: exit %d, wanted %d: %s", dir, rc, want, out);
}

static cc_json *load_json(const char *dir, const char *name)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s/%s", tmp, dir, name);
    return cc_t_json_file(path);
}

/* The softmax series' failure_now in OUT/history.json. */
static const char *softmax_now(const cc_json *h)
{
    for (const cc_json *s = cc_json_get(h, "series")->child; s; s = s->next) {
        const char *op, *now;
        if (!cc_json_string(s, "op", &op) && !strcmp(op, "softmax"))
            return cc_json_string(s, "failure_now", &now) ? "(null)" : now;
    }
    fail_msg("no softmax series");
    return NULL;
}

static void test_history_marks_a_changed_case_set(void **state)
{
    (void)state;
    write_in_tmp("s.cases", "softmax dtype=f32 in=[3,4] axis=0 seed=1\nrelu dtype=f32 in=[4] seed=1\n");
    write_in_tmp("t.cases", "softmax dtype=f32 in=[5,4] axis=0 seed=2\nrelu dtype=f32 in=[4] seed=1\n");
    night("s.cases", "softmax_axis", "n1", 1); /* softmax fails */
    night("s.cases", "", "n2", 0);             /* the same cases pass: fixed */
    night("s.cases", "softmax_axis", "n3", 1); /* fails again */
    night("t.cases", "", "n4", 0);             /* other cases pass: not comparable */
    char args[2048];
    snprintf(args, sizeof args, "history %1$s/n1 %1$s/n2 --out %1$s/h12", tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    assert_null(strstr(out, "case set changed"));
    cc_json *h = load_json("h12", "history.json");
    assert_string_equal(softmax_now(h), "passing");
    cc_json_free(h);

    snprintf(args, sizeof args, "history %1$s/n1 %1$s/n2 %1$s/n3 %1$s/n4 --out %1$s/h", tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    assert_non_null(strstr(out, "1 failed on some night (0 on the last; 1 whose cases changed "
                                "after they failed, not called fixed)"));
    assert_non_null(strstr(out, "; the case set changed on n4 (2 -> 2 cases);"));
    h = load_json("h", "history.json");
    assert_string_equal(softmax_now(h), "case set changed");
    int k = 0, changed[4];
    for (const cc_json *n = cc_json_get(h, "nights")->child; n; n = n->next, k++)
        assert_int_equal(cc_json_bool(n, "case_set_changed", &changed[k]), 0);
    assert_int_equal(k, 4);
    assert_true(!changed[0] && !changed[1] && !changed[2] && changed[3]);
    cc_json_free(h);
    char *html = cc_t_slurp_in(tmp, "h", "history.html");
    assert_non_null(strstr(html, "case set changed</span> 2 \xe2\x86\x92 2 cases"));
    free(html);

    /* one night twice: the same folder (another spelling), or a copy of it */
    snprintf(args, sizeof args, "history %1$s/n1 %1$s/n2 %1$s/n1/ --out %1$s/h2", tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    assert_non_null(strstr(out, "are the same run folder"));
    snprintf(args, sizeof args, "cp -r %1$s/n1 %1$s/n1copy", tmp);
    assert_int_equal(system(args), 0);
    snprintf(args, sizeof args, "history %1$s/n1 %1$s/n1copy --out %1$s/h3", tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    assert_non_null(strstr(out, "hold the same run (report sha256 "));
}

static void test_diff_reads_what_it_says(void **state)
{
    (void)state;
    char args[2048];
    write_in_tmp("d.cases", "add count=4 dtype=f32,f64 size=small\nrelu in=[4] seed=3\n");
    snprintf(args, sizeof args, "run %1$s/d.cases --provider reference --out %1$s/full -q", tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    snprintf(args, sizeof args, "cp -r %1$s/full %1$s/again", tmp);
    assert_int_equal(system(args), 0);
    snprintf(args, sizeof args, "diff %1$s/full %1$s/again", tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    assert_int_equal(cc_t_count(out, "; its results.jsonl matches)"), 2);

    /* a report kept alone (as reports/baseline): read as a report, and said so */
    snprintf(args, sizeof args, "mkdir %1$s/alone && cp %1$s/full/report.json "
                                "%1$s/full/report.json.sha256 %1$s/alone/", tmp);
    assert_int_equal(system(args), 0);
    snprintf(args, sizeof args, "diff %1$s/alone %1$s/full", tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    assert_non_null(strstr(out, " cases; a report kept alone, no results)\n"));
    assert_int_equal(cc_t_count(out, "; its results.jsonl matches)"), 1);

    /* a run without its results, or with results that are not the report's */
    snprintf(args, sizeof args, "rm %s/again/results.jsonl", tmp);
    assert_int_equal(system(args), 0);
    snprintf(args, sizeof args, "diff %1$s/full %1$s/again", tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    assert_non_null(strstr(out, "again/results.jsonl: cannot read the results beside the report"));
    assert_null(strstr(out, "regressions"));
    snprintf(args, sizeof args, "cp %1$s/full/results.jsonl %1$s/again/ && "
                                "sed -i '1s/\"status\":\"pass\"/\"status\":\"fail\"/' "
                                "%1$s/again/results.jsonl",
             tmp);
    assert_int_equal(system(args), 0);
    snprintf(args, sizeof args, "diff %1$s/again %1$s/full", tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    assert_non_null(strstr(out, "does not match"));

    /* a lone shard, either side */
    snprintf(args, sizeof args, "run %1$s/d.cases --provider reference --shard 1/2 "
                                "--out %1$s/shard1 -q", tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    snprintf(args, sizeof args, "diff %1$s/full %1$s/shard1", tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    assert_non_null(strstr(out, "shard1/report.json is shard 1/2 of a run: diff the report "
                                "capcheck merge makes of its 2 shard folders"));
    snprintf(args, sizeof args, "diff %1$s/shard1 %1$s/full", tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
}

static void test_resume_with_another_out_is_refused(void **state)
{
    (void)state;
    char args[2048], b[600];
    write_in_tmp("r.cases", "relu in=[4] seed=1\n");
    snprintf(args, sizeof args, "run %1$s/r.cases --provider reference --out %1$s/a -q", tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    snprintf(args, sizeof args, "run %1$s/r.cases --provider reference --resume %1$s/a "
                                "--out %1$s/b", tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    assert_non_null(strstr(out, "finishes the run in"));
    assert_non_null(strstr(out, "so --out does not apply: give --resume alone"));
    assert_int_equal(cc_t_count(out, "\n"), 1);
    snprintf(b, sizeof b, "%s/b", tmp);
    assert_int_equal(access(b, F_OK), -1);
}

/* capcheck ARGS with the stdout-printing plugin: its stdout alone (stream 1) or its stderr
 * alone (stream 2) into out. */
static int stream_of(int stream, const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s)", args, stream == 1 ? "2>/dev/null" : "2>&1 >/dev/null");
    return cc_t_run("(CAPCHECK_MISBEHAVE=stdout ", cmd, out, sizeof out);
}

static void test_a_plugin_stdout_is_not_capchecks(void **state)
{
    (void)state;
    char run_args[1024], shrink_args[1024];
    snprintf(run_args, sizeof run_args, "run --provider-lib " MISBEHAVE_SO " --op add --out %s/mb",
             tmp);
    snprintf(shrink_args, sizeof shrink_args,
             "shrink 'add dtype=f32 in=[30],[30]' --provider-lib " MISBEHAVE_SO
             " --script %s/mb.py",
             tmp);
    const struct {
        const char *args, *stdout_has;
        int rc;
    } cmds[] = {
        {run_args, "cases on misbehave", 1},
        {"repro 'add dtype=f32 in=[3],[3]' --provider-lib " MISBEHAVE_SO, "status:   pass", 0},
        {"repro 'add dtype=f32 in=[3],[3]' --provider-lib " MISBEHAVE_SO " --no-fork",
         "status:   pass", 0},
        {shrink_args, "minimal:  add dtype=f32 device=cpu in=[17],[17]", 0},
        {"bench --provider-lib " MISBEHAVE_SO " --op add --min-time 0.01 --reps 1 --ratio-only",
         "capcheck / provider = ", 0},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        if (i == 0) { /* run: a fresh folder each time */
            char rm[700];
            snprintf(rm, sizeof rm, "rm -rf %s/mb", tmp);
            assert_int_equal(system(rm), 0);
        }
        int rc = stream_of(1, cmds[i].args);
        if (rc != cmds[i].rc || !strstr(out, cmds[i].stdout_has) || strstr(out, "stdout from"))
            fail_msg("capcheck %s: exit %d (wanted %d); its stdout:\n%s", cmds[i].args, rc,
                     cmds[i].rc, out);
        if (i == 0) {
            char rm[700];
            snprintf(rm, sizeof rm, "rm -rf %s/mb", tmp);
            assert_int_equal(system(rm), 0);
        }
        stream_of(2, cmds[i].args);
        if (!strstr(out, "misbehave: stdout from forward (printf)") ||
            !strstr(out, "misbehave: stdout from forward (write)"))
            fail_msg("capcheck %s: the plugin's prints are not on stderr:\n%.2000s", cmds[i].args,
                     out);
    }
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/capcheck-quiet-XXXXXX");
    if (!mkdtemp(tmp))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_history_marks_a_changed_case_set),
        cmocka_unit_test(test_diff_reads_what_it_says),
        cmocka_unit_test(test_resume_with_another_out_is_refused),
        cmocka_unit_test(test_a_plugin_stdout_is_not_capchecks),
    };
    int rc = cmocka_run_group_tests_name("no_quiet_answers", tests, NULL, NULL);
    if (cc_t_remove_dir(tmp) != 0)
        rc = rc ? rc : 1;
    return rc;
}
