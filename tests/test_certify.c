/* capcheck certify through the binary, from a folder outside the checkout: the evidence suite
 * embedded in capcheck (here its softmax cases, --op softmax) gives the same verdicts, evidence
 * and TorchLean module as the four-command recipe over the checkout's files (run, gate --all,
 * evidence, emit-lean); its summary says how many are checked, each required one that is not
 * with its reason, and where the files are; --resume of a finished run judges it again; bad
 * input is one sentence and exit 2 before anything runs; nothing to judge is 125, unsupported
 * cases beside judged ones leave the verdict to the policy; the certify command a run's gate
 * line prints runs when pasted. On ATen CPU when capcheck has it, else on the reference under
 * the built-in policy with any libtorch (then no Lean module: the oracle's capsules are no
 * TorchLean capsules, and emit-lean has nothing to emit either). */
#include "cli_util.h"

#include <dirent.h>
#include <sys/stat.h>

/* the provider certify runs here: ATen where capcheck has it, else the reference */
#if CAPCHECK_HAVE_ATEN
#define PROVIDER_NAME "aten"
#else
#define PROVIDER_NAME "reference"
#endif

static char tmp[256], elsewhere[300], provider[900];
static char any[600]; /* the built-in policy with libtorch_version any: judges plugins too */
static char out[1 << 18], out2[1 << 18];

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/capcheck_certify_XXXXXX");
    if (!mkdtemp(tmp))
        return -1;
    snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", tmp);
    if (mkdir(elsewhere, 0755))
        return -1;
    char path[700];
    snprintf(path, sizeof path, "%s/reports/policy.conf", CAPCHECK_SOURCE_DIR);
    char *text = cc_t_slurp(path, NULL);
    char *edited = cc_t_replace_first(text, "libtorch_version 2.15.0", "libtorch_version any");
    snprintf(any, sizeof any, "%s/any.conf", tmp);
    cc_t_write(any, edited);
    free(text);
    free(edited);
#if CAPCHECK_HAVE_ATEN
    snprintf(provider, sizeof provider, "--provider " PROVIDER_NAME);
#else
    /* the reference states no libtorch: the built-in policy with libtorch_version any */
    snprintf(provider, sizeof provider, "--provider " PROVIDER_NAME " --policy %s", any);
#endif
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return cc_t_remove_dir(tmp);
}

/* `args` run by capcheck in folder dir (NULL: here); its exit code, output in buf */
static int in(const char *dir, char *buf, size_t n, const char *args)
{
    char prefix[400];
    snprintf(prefix, sizeof prefix, "cd '%s' && ", dir ? dir : ".");
    return cc_t_run(prefix, args, buf, n);
}

/* text with each sha256 in `shas` (and its first 16 digits) replaced by x's, and the lines
 * holding any of `drop` left out (malloc'd) */
static char *normalised(const char *text, const char *const *shas, const char *const *drop)
{
    char *t = strdup(text);
    for (int i = 0; drop[i]; i++) {
        char *next = cc_t_without_lines(t, drop[i]);
        free(t);
        t = next;
    }
    for (int i = 0; shas[i]; i++) { /* whole, then the 16 digits names and headers use */
        char head[17];
        snprintf(head, sizeof head, "%.16s", shas[i]);
        for (char *s = strstr(t, shas[i]); s; s = strstr(s, shas[i]))
            memset(s, 'x', strlen(shas[i]));
        for (char *s = strstr(t, head); s; s = strstr(s, head))
            memset(s, 'x', strlen(head));
    }
    for (char *s = strstr(t, "report sha256:"); s; s = strstr(s + 1, "report sha256:"))
        memset(s + 14, 'x', strspn(s + 14, "0123456789abcdef"));
    return t;
}

/* the sha256 a run folder's seal holds (static storage per slot) */
static const char *seal_of(const char *dir, int slot)
{
    static char sha[2][65];
    char path[700];
    snprintf(path, sizeof path, "%s/report.json.sha256", dir);
    char *t = cc_t_slurp(path, NULL);
    assert_non_null(t);
    snprintf(sha[slot], sizeof sha[slot], "%.64s", t);
    free(t);
    return sha[slot];
}

static void expect_equal_files(const char *a, const char *b, const char *const *shas,
                               const char *const *drop)
{
    char *ta = cc_t_slurp(a, NULL), *tb = cc_t_slurp(b, NULL);
    if (!ta || !tb)
        fail_msg("cannot read %s or %s", a, b);
    char *na = normalised(ta, shas, drop), *nb = normalised(tb, shas, drop);
    if (strcmp(na, nb) != 0)
        fail_msg("%s and %s differ:\n%.2000s\n---\n%.2000s", a, b, na, nb);
    free(ta);
    free(tb);
    free(na);
    free(nb);
}

static void test_certify_is_the_recipe(void **state)
{
    (void)state;
    char args[2048], a[900], b[900];
    snprintf(args, sizeof args, "certify %s --op softmax --out c", provider);
    int rc = in(elsewhere, out, sizeof out, args);
    assert_int_equal(rc, 1); /* the other required capsules have no case */
    /* the run's counts (progress off a terminal is a large run's: test_summary), then the
     * summary */
    expect_in(out, "capcheck: 2335 cases on " PROVIDER_NAME " in ");
    expect_in(out, " capsule x dtype x platform checked under ");
    expect_in(out, "required, not checked (each with its first reason):\n");
    expect_in(out, ": no case in the report\n");
    expect_in(out, " more: every one in c/gate.txt\n");
    expect_in(out, "capcheck certify: report.html    c/report.html\n");
    expect_in(out, "capcheck certify: verdicts       c/gate.txt (capcheck gate --all)\n");
    expect_in(out, "capcheck certify: evidence.json  c/evidence/<capsule>/evidence.json (1 "
                   "capsules, 1 with a checked dtype)\n");
#if CAPCHECK_HAVE_ATEN
    expect_in(out, "capcheck certify: Lean module    c/Evidence.lean (TorchLean ");
    const char *cases[] = {"report.html", "gate.txt", "Evidence.lean", "report.md", NULL};
#else /* the oracle's capsules (capcheck.oracle.*) are no TorchLean capsules: emit-lean's rule */
    expect_in(out, "capcheck certify: Lean module    none written: the gate upgrades 1 capsule, "
                   "none of them a TorchLean capsule");
    snprintf(a, sizeof a, "%s/c/Evidence.lean", elsewhere);
    if (access(a, F_OK) == 0)
        fail_msg("certify wrote %s with nothing to emit", a);
    const char *cases[] = {"report.html", "gate.txt", "report.md", NULL};
#endif
    assert_null(strstr(out, "\nfail: ")); /* failures are in the report, not on the terminal */
    for (int i = 0; cases[i]; i++) {
        snprintf(a, sizeof a, "%s/c/%s", elsewhere, cases[i]);
        if (access(a, R_OK))
            fail_msg("certify wrote no %s", a);
    }

    /* the four commands of the recipe, over the checkout's files */
    snprintf(args, sizeof args,
             "run %s/cases/nightly.cases %s/cases/edge/*.cases %s --op softmax --out %s/r",
             CAPCHECK_SOURCE_DIR, CAPCHECK_SOURCE_DIR, provider, tmp);
    int run_rc = in(NULL, out2, sizeof out2, args);
    assert_true(run_rc == 0 || run_rc == 1);
    const char *policy = strstr(provider, "--policy") ? strstr(provider, "--policy") : "";
    snprintf(args, sizeof args, "gate %s/r --all %s > %s/r.gate.txt", tmp, policy, tmp);
    assert_int_equal(in(NULL, out2, sizeof out2, args), rc);
    snprintf(args, sizeof args, "evidence %s/r --out %s/r.evidence %s", tmp, tmp, policy);
    assert_int_equal(in(NULL, out2, sizeof out2, args), 0);
    snprintf(args, sizeof args, "emit-lean %s/r %s > %s/r.lean", tmp, policy, tmp);
    assert_int_equal(in(NULL, out2, sizeof out2, args), CAPCHECK_HAVE_ATEN ? 0 : 1);

    char c_dir[600], r_dir[600];
    snprintf(c_dir, sizeof c_dir, "%s/c", elsewhere);
    snprintf(r_dir, sizeof r_dir, "%s/r", tmp);
    const char *shas[] = {seal_of(c_dir, 0), seal_of(r_dir, 1), NULL};
    const char *source[] = {"results digest matches", "Source:", ".cases", NULL};
    snprintf(a, sizeof a, "%s/gate.txt", c_dir);
    snprintf(b, sizeof b, "%s/r.gate.txt", tmp);
    expect_equal_files(a, b, shas, source);
#if CAPCHECK_HAVE_ATEN
    snprintf(a, sizeof a, "%s/Evidence.lean", c_dir);
    snprintf(b, sizeof b, "%s/r.lean", tmp);
    expect_equal_files(a, b, shas, source);
#else /* emit-lean's sentence went where its module would have */
    snprintf(b, sizeof b, "%s/r.lean", tmp);
    char *said = cc_t_slurp(b, NULL);
    assert_non_null(said);
    expect_in(said, "capcheck emit-lean: nothing to emit: ");
    free(said);
#endif
    snprintf(a, sizeof a, "%s/evidence", c_dir);
    DIR *d = opendir(a);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        const char *fields[] = {"\"source\": ", "\"case_files\": ", NULL};
        snprintf(a, sizeof a, "%s/evidence/%.200s/evidence.json", c_dir, e->d_name);
        snprintf(b, sizeof b, "%s/r.evidence/%.200s/evidence.json", tmp, e->d_name);
        expect_equal_files(a, b, shas, fields);
        n++;
    }
    closedir(d);
    assert_int_equal(n, 1);

    /* a finished run resumed: nothing runs, the same summary */
    snprintf(args, sizeof args, "certify %s --op softmax --resume c", provider);
    assert_int_equal(in(elsewhere, out2, sizeof out2, args), rc);
    const char *ran = strstr(out, "capcheck: "); /* "capcheck: N cases on ...": all recorded */
    assert_non_null(ran);
    char cases_line[64];
    snprintf(cases_line, sizeof cases_line, "%.*s", (int)(strstr(ran, " on ") - ran), ran);
    expect_in(out2, cases_line);
    const char *verdict = strstr(out, "capcheck certify: "), *again = strstr(out2, "capcheck certify: ");
    assert_non_null(verdict);
    assert_non_null(again);
    assert_string_equal(strstr(again, " capsule x dtype"), strstr(verdict, " capsule x dtype"));
    /* a second run into the same folder is refused, and says how to go on */
    snprintf(args, sizeof args, "certify %s --op softmax --out c", provider);
    assert_int_equal(in(elsewhere, out2, sizeof out2, args), 2);
    expect_in(out2, "c holds an earlier run");
}

static void test_bad_input_is_one_sentence_before_anything_runs(void **state)
{
    (void)state;
    assert_int_equal(in(elsewhere, out, sizeof out, "certify --policy /nonexistent --out b1"), 2);
    expect_in(out, "capcheck certify: /nonexistent: cannot open the policy: ");
    assert_int_equal(in(elsewhere, out, sizeof out, "certify --torchlean 0000000 --out b2"), 2);
    expect_in(out, "capcheck certify: --torchlean: ");
    assert_int_equal(in(elsewhere, out, sizeof out, "certify some.cases --out b3"), 2);
    expect_in(out, "capcheck certify: 'some.cases': certify runs the evidence suite built into "
                   "capcheck and takes no case file");
    assert_int_equal(in(elsewhere, out, sizeof out, "certify --shard 1/2"), 2);
    expect_in(out, "--shard does not apply to certify");
    assert_int_equal(in(elsewhere, out, sizeof out, "certify --op nosuchop --out b4"), 2);
    for (int i = 1; i <= 4; i++) {
        char dir[400];
        snprintf(dir, sizeof dir, "%s/b%d", elsewhere, i);
        if (access(dir, F_OK) == 0)
            fail_msg("a refused certify left %s behind", dir);
    }
}

/* The exit codes git bisect run reads (harness/run/exit_code.h): a provider that does not load
 * is 125 (nothing could be judged), as is a suite none of whose cases the provider runs; a run
 * with unsupported cases beside judged ones (its own exit 125) is judged by the policy (0/1). */
static void test_exit_codes(void **state)
{
    (void)state;
    char args[2048];
    assert_int_equal(in(elsewhere, out, sizeof out, "certify --provider-lib /nonexistent.so "
                                                    "--out e1"),
                     125);
    expect_in(out, "/nonexistent.so");
    /* the example plugin (add and relu, f32 and f64) runs no softmax case */
    snprintf(args, sizeof args,
             "certify --provider-lib " CAPCHECK_PLUGIN_DIR "/example_plugin.so --op softmax "
             "--policy %s --out e2",
             any);
    assert_int_equal(in(elsewhere, out, sizeof out, args), 125);
    expect_in(out, "capcheck certify: nothing could be judged: none of the ");
    expect_in(out, " cases ran on " CAPCHECK_PLUGIN_DIR "/example_plugin.so");
    /* its add cases: f16 and bf16 unsupported (the run alone would exit 125), the rest judged */
    snprintf(args, sizeof args,
             "certify --provider-lib " CAPCHECK_PLUGIN_DIR "/example_plugin.so --op add "
             "--policy %s --out e3",
             any);
    assert_int_equal(in(elsewhere, out, sizeof out, args), 1);
    expect_in(out, " unsupported");
    expect_in(out, "capcheck certify: report.html    e3/report.html\n");
    assert_null(strstr(out, "nothing could be judged"));
}

/* The certify command in the gate's line of a run's output (malloc'd), or a failure. */
static char *certify_hint(const char *text)
{
    const char *end = strstr(text, " runs the evidence suite that checks capsules\n"), *at = end;
    while (at && at > text && at[-1] != '\n') /* to the start of the gate's second line */
        at--;
    if (!end || strncmp(at, "capcheck: gate: ", 16) != 0)
        fail_msg("no certify command on the gate's lines:\n%s", text);
    at += strlen("capcheck: gate: ");
    return strndup(at, (size_t)(end - at));
}

/* cmd with `tail` after it, pasted into a fresh shell in a new folder (no capcheck on PATH,
 * nothing of this environment): it must run certify and judge (0 or 1). */
static void paste(const char *cmd, const char *tail, const char *folder)
{
    char dir[400], file[500], sh[1200];
    snprintf(dir, sizeof dir, "%s/%s", tmp, folder);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(file, sizeof file, "%s/pasted.sh", dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fprintf(f, "%s %s\n", cmd, tail);
    assert_int_equal(fclose(f), 0);
    snprintf(sh, sizeof sh, "cd '%s' && env -i PATH=/usr/bin:/bin sh pasted.sh", dir);
    int rc = cc_t_sh(sh, out2, sizeof out2);
    if (rc != 0 && rc != 1)
        fail_msg("the pasted '%s %s' exited %d:\n%s", cmd, tail, rc, out2);
    expect_in(out2, " capsule x dtype x platform checked under ");
    expect_in(out2, "capcheck certify: report.html    p/report.html\n");
}

/* The certify command a run's gate line suggests for thin evidence runs when pasted into a
 * fresh shell in another folder: it names the capcheck that printed it, the run's environment,
 * provider (a plugin by its absolute path, quoted), math modes, device and policy, and leaves
 * out the run's own options certify does not take (--repeat, --accumulation). */
static void test_the_gate_lines_certify_runs_when_pasted(void **state)
{
    (void)state;
    char args[2048];
    snprintf(args, sizeof args, "run --op relu %s --accumulation relaxed --repeat 2 --out h",
             provider);
    int rc = in(elsewhere, out, sizeof out, args);
    if (rc != 0 && rc != 1)
        fail_msg("capcheck %s exited %d:\n%s", args, rc, out);
    char *cmd = certify_hint(out);
    expect_in(cmd, CAPCHECK_BIN " certify "); /* after the run's CAPCHECK_* variables, if any */
    assert_null(strstr(cmd, "--accumulation"));
    assert_null(strstr(cmd, "--repeat"));
    paste(cmd, "--op relu --out p", "fresh");
    free(cmd);
    /* a plugin in a folder whose name wants quoting, judged under a policy file */
    char plugin_dir[400], cp[1200];
    snprintf(plugin_dir, sizeof plugin_dir, "%s/it's here", tmp);
    assert_int_equal(mkdir(plugin_dir, 0755), 0);
    snprintf(cp, sizeof cp, "cp " CAPCHECK_PLUGIN_DIR "/example_plugin.so \"%s/ex.so\"",
             plugin_dir);
    assert_int_equal(system(cp), 0);
    snprintf(args, sizeof args,
             "run --op relu --provider-lib \"%s/ex.so\" --policy %s --repeat 2 --out hp",
             plugin_dir, any);
    rc = in(elsewhere, out, sizeof out, args);
    if (rc != 125) /* f16 and bf16 unsupported, the rest passes */
        fail_msg("capcheck %s exited %d:\n%s", args, rc, out);
    cmd = certify_hint(out);
    expect_in(cmd, "--provider-lib '");
    expect_in(cmd, " --policy ");
    assert_null(strstr(cmd, "--repeat"));
    paste(cmd, "--op relu --out p", "fresh-plugin");
    free(cmd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_certify_is_the_recipe),
        cmocka_unit_test(test_exit_codes),
        cmocka_unit_test(test_the_gate_lines_certify_runs_when_pasted),
        cmocka_unit_test(test_bad_input_is_one_sentence_before_anything_runs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
