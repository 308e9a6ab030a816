/* Nothing silent, nothing misleading (issue 15), through the capcheck binary:
 *   - bad input: one table of command lines, each refused with exit 2 and its sentence;
 *   - a misbehaving provider (tests/plugins/misbehave.c): hangs, segfaults and exit(0) in init
 *     and in forward under run, repro, shrink and bench are each one sentence or a result,
 *     never a hang or capcheck's own death; an unterminated, non-UTF-8 message stays bounded
 *     and every file capcheck writes stays valid UTF-8; a wrong forward without a VJP fails;
 *   - a worker killed from outside is retried once and the report says so; crashes of workers
 *     killed twice run again on --resume;
 *   - every repro line printed for a plugin run (log, report.md, JUnit, gate, diff, shrink)
 *     reproduces the failure when pasted into an environment without the plugin's variable;
 *   - output folders: a failed init leaves none, merge never writes into its shards or over a
 *     run without --force, a full disk during the report is no success;
 *   - help for every command, built-in defaults from any folder, Ctrl-C says how to resume,
 *     the progress line's ETA, report.md's opening, layerNorm's axis, list ops' parameters.
 * Commands run several at a time (each capcheck start loads libtorch); hangs use 0.5 s limits. */
#include "cli_util.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "core/text.h"
#include "skip_util.h"

#define PLUGIN CAPCHECK_PLUGIN_DIR "/misbehave.so"
#define MUTANTS CAPCHECK_PLUGIN_DIR "/mutants.so"
#define PARALLEL 4

static char tmp[256];

/* ---- running many commands at once ------------------------------------------------------- */

typedef struct {
    char cmd[4096]; /* a shell command; "capcheck" at the start of a word is the binary */
    int want_rc;    /* -1: any */
    const char *want[3]; /* fragments the output must hold */
    char *out;      /* stdout and stderr */
    int rc;
} job;

static void job_set(job *j, int want_rc, const char *want0, const char *want1, const char *fmt,
                    ...) __attribute__((format(printf, 5, 6)));
static void job_set(job *j, int want_rc, const char *want0, const char *want1, const char *fmt,
                    ...)
{
    memset(j, 0, sizeof *j);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->cmd, sizeof j->cmd, fmt, ap);
    va_end(ap);
    j->want_rc = want_rc;
    j->want[0] = want0;
    j->want[1] = want1;
}

/* `capcheck` (a word of its own) replaced by the binary's path. */
static void with_binary(const char *cmd, char *buf, size_t n)
{
    size_t o = 0;
    for (const char *s = cmd; *s && o + 1 < n;) {
        int word = (s == cmd || strchr(" (;\"'", s[-1])) &&
                   strncmp(s, "capcheck ", 9) == 0;
        if (word) {
            o += (size_t)snprintf(buf + o, n - o, "%s ", CAPCHECK_BIN);
            s += 9;
        } else
            buf[o++] = *s++;
    }
    buf[o < n ? o : n - 1] = 0;
}

static void run_jobs(job *jobs, int n)
{
    pid_t pid[PARALLEL] = {0};
    int slot_job[PARALLEL];
    char path[PARALLEL][600];
    for (int next = 0, running = 0; next < n || running;) {
        if (next < n && running < PARALLEL) {
            int s = 0;
            while (pid[s])
                s++;
            snprintf(path[s], sizeof path[s], "%s/job%d.out", tmp, next);
            char cmd[8192], full[11000];
            with_binary(jobs[next].cmd, cmd, sizeof cmd);
            snprintf(full, sizeof full, "(%s) > '%s' 2>&1", cmd, path[s]);
            fflush(NULL);
            pid[s] = fork();
            assert_true(pid[s] >= 0);
            if (pid[s] == 0) {
                execl("/bin/sh", "sh", "-c", full, (char *)NULL);
                _exit(127);
            }
            slot_job[s] = next++;
            running++;
            continue;
        }
        int st;
        pid_t done = wait(&st);
        assert_true(done > 0);
        for (int s = 0; s < PARALLEL; s++)
            if (pid[s] == done) {
                job *j = &jobs[slot_job[s]];
                j->rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                j->out = cc_t_slurp(path[s], NULL);
                assert_non_null(j->out);
                unlink(path[s]);
                pid[s] = 0;
                running--;
            }
    }
    int bad = 0;
    for (int i = 0; i < n; i++) {
        job *j = &jobs[i];
        int ok = j->want_rc < 0 || j->rc == j->want_rc;
        for (int k = 0; k < 3; k++)
            ok = ok && (!j->want[k] || strstr(j->out, j->want[k]));
        if (!ok) {
            print_error("%s\n  -> exit %d (want %d), output:\n%s\n  wanted: '%s' '%s'\n",
                        j->cmd, j->rc, j->want_rc, j->out, j->want[0] ? j->want[0] : "",
                        j->want[1] ? j->want[1] : "");
            bad++;
        }
    }
    if (bad)
        fail_msg("%d of %d commands did not answer as expected", bad, n);
}

static void free_jobs(job *jobs, int n)
{
    for (int i = 0; i < n; i++)
        free(jobs[i].out);
}

static void file(const char *name, const char *text, size_t len)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
}
#define FILE_TEXT(name, text) file(name, text, sizeof text - 1)

/* ---- bad input: exit 2 and one sentence ------------------------------------------------- */

static void test_bad_input_table(void **state)
{
    (void)state;
    FILE_TEXT("empty.cases", "");
    FILE_TEXT("comments.cases", "# only a comment\n\n   # and another\n");
    FILE_TEXT("count0.cases", "add count=0\n");
    FILE_TEXT("dupgen.cases", "add count=2 dtype=f32 dtype=f64\n");
    FILE_TEXT("nul.cases", "add in=[2],[2]\0 dtype=f64\n");
    FILE_TEXT("genvjp.cases", "randUniform count=2 check=vjp\n");
    FILE_TEXT("huge.cases", "# a generator that would not fit in memory\n"
                            "* count=1000000 dtype=f32,f64\n");
    FILE_TEXT("bad_utf8.json", "{\"a\": \"caf\xc3\"}");
    FILE_TEXT("surrogate.json", "{\"a\": \"\\ud800\"}");
    char long_line[1200];
    memset(long_line, ' ', sizeof long_line);
    memcpy(long_line, "add", 3);
    long_line[sizeof long_line - 2] = '\n';
    file("long.cases", long_line, sizeof long_line - 1);
    char held[600];
    snprintf(held, sizeof held, "%s/held", tmp);
    mkdir(held, 0777);
    FILE_TEXT("held/results.jsonl", "{\"index\":0}\n");
    const char *T = tmp;
    /* {exit code, fragment, command}; %1$s is the temporary folder, %2$s the plugin folder */
    static const struct {
        const char *want, *fmt;
    } rows[] = {
        {"/dev/null: holds no case", "run /dev/null --provider reference"},
        {"empty.cases: holds no case", "run %1$s/empty.cases --provider reference"},
        {"comments.cases: holds no case", "run %1$s/comments.cases --provider reference"},
        {"count0.cases:1:11: 'count' wants a whole number from 1", "run %1$s/count0.cases"},
        {"matches none of the 1 cases", "run %1$s/one.cases --op softmax --provider reference"},
        {"1:15: 'dtype' is given twice (first at column 5)",
         "repro 'add dtype=f32 dtype=f64 in=[2],[2]'"},
        {"'in' is given twice", "repro 'add in=[2],[2] in=[3],[3]'"},
        {"'axis' is given twice", "repro 'softmax in=[2,3] axis=0 axis=1'"},
        {"dupgen.cases:1:23: 'dtype' is given twice", "run %1$s/dupgen.cases"},
        {"nul.cases:1:15: a NUL byte", "run %1$s/nul.cases"},
        {"randUniform has no VJP: check=vjp cannot be run", "repro 'randUniform to=[3] check=vjp'"},
        {"bernoulliMask has no VJP: check=both", "repro 'bernoulliMask to=[3] check=both'"},
        {"genvjp.cases:1:27: randUniform has no VJP", "run %1$s/genvjp.cases"},
        {"--seed wants an unsigned integer below 2^64, not '-1'", "run --seed -1"},
        {"--seed wants an unsigned integer below 2^64, not '0x'", "list cases --seed 0x"},
        {"'seed' wants an unsigned integer, got '-1'", "repro 'add in=[2],[2] seed=-1'"},
        {"clamp takes 'lo' and 'hi' together: the line gives 'lo' alone", "repro 'clamp in=[3] lo=0'"},
        {"slice takes 'start' and 'len' together: the line gives 'len' alone",
         "repro 'slice in=[4] axis=0 len=2'"},
        {"is a folder, not a case file", "run %1$s"},
        {"huge.cases:2:1: this generator line expands to 112000000 cases", "list cases %1$s/huge.cases"},
        {"long.cases:1:1: line is longer than", "run %1$s/long.cases"},
        {"unknown option --frobnicate", "run --frobnicate"},
        {"unknown option -x", "run -x"},
        {"--out does not apply to repro", "repro 'add in=[2],[2]' --out x"},
        {"--witness does not apply to bench", "bench --witness reference"},
        {"--op is given twice", "run --op add --op exp"},
        {"--timeout wants a positive number of seconds", "run --timeout -1"},
        {"--timeout wants a positive number of seconds", "repro 'add in=[2],[2]' --timeout inf"},
        {"-j wants a number of worker processes", "run -j -1"},
        {"--force starts over and --resume finishes", "run --force --resume %1$s/held"},
        {"--provider or --provider-lib, not both",
         "run --provider reference --provider-lib %2$s/example_plugin.so"},
        {"unknown device 'npu'", "run --device npu --provider reference"},
        {"--shard wants I/N", "run %1$s/one.cases --provider reference --shard 3/2"},
        {"--tf32 wants on or off, not 'maybe'", "run --tf32 maybe"},
        {"--reps: at most 64", "bench %1$s/one.cases --reps 65"},
        {"--max-elements wants a positive whole number", "list cases %1$s/one.cases --max-elements 0"},
        {"give exactly one case line", "repro 'add in=[2],[2]' 'add in=[2],[2]'"},
        {"--script needs a value", "shrink 'add in=[2],[2]' --script"},
        {"nothing to resume in", "run --resume %1$s/nowhere %1$s/one.cases --provider reference"},
        {"--baseline: ", "run %1$s/one.cases --provider reference --baseline %1$s/nowhere --out %1$s/nb"},
        {"holds an earlier run (results.jsonl): --resume", "run %1$s/one.cases --provider reference --out %1$s/held"},
        {"no such command", "help nope"},
        {"one command at a time", "help run gate"},
        {"unknown command 'frob'", "frob"},
        {"try 'capcheck list ops'", "list opz"},
        {"gate: unknown option --frob", "gate %1$s/held --frob"},
        {"--force does not apply to gate", "gate %1$s/held --force"},
        {"--drift wants a factor above 1", "diff a b --drift 1"},
        {"--policy is given twice", "gate a --policy x --policy y"},
        {"--torchlean is given twice", "emit-lean a --torchlean 3447b74 --torchlean 3447b74"},
        {"--torchlean does not apply to gate", "gate a --torchlean 3447b74"},
        {"bad_utf8.json is not JSON (a string holds a byte (0xc3) that is not UTF-8",
         "validate %1$s/bad_utf8.json"},
        {"lone surrogate (U+D800)", "validate %1$s/surrogate.json"},
    };
    enum { N = sizeof rows / sizeof rows[0] };
    job *jobs = calloc(N, sizeof *jobs);
    assert_non_null(jobs);
    for (int i = 0; i < N; i++) {
        char args[2048];
        snprintf(args, sizeof args, rows[i].fmt, T, CAPCHECK_PLUGIN_DIR);
        job_set(&jobs[i], 2, rows[i].want, NULL, "capcheck %s", args);
    }
    run_jobs(jobs, N);
    /* one sentence: each refusal is a single line (the usage of repro aside, none is longer) */
    for (int i = 0; i < N; i++)
        if (cc_t_count(jobs[i].out, "\n") != 1)
            fail_msg("%s: more than one line:\n%s", jobs[i].cmd, jobs[i].out);
    print_message("%d bad inputs refused with exit 2 and one sentence each\n", (int)N);
    free_jobs(jobs, N);
    free(jobs);
}

/* ---- the exit codes git bisect run reads ----------------------------------------------------- */

/* Every row of the exit-code table (harness/run/exit_code.h, `capcheck help run`) through the
 * binary, for run and repro: 0 passed; 1 fail, error, crash, timeout, out-of-bounds,
 * nondeterministic; 125 a plugin that does not load or initialise, an absent device, an
 * unsupported case, memory exhausted, and a run that mixes passes with unsupported cases; 1 for a
 * run that mixes a failure with unsupported cases; --expect keeping a clean run of known
 * unsupported cases at 0; 2 a malformed case line or command line, a folder holding a run. */
static void test_exit_codes_git_bisect_reads(void **state)
{
    (void)state;
    FILE_TEXT("mixed_unsup.cases", "add in=[3],[3] seed=1\nrelu in=[3] seed=1\n");
    FILE_TEXT("mixed_fail.cases", "softmax dtype=f32 in=[2,6] axis=0 seed=1\nexp in=[3] seed=1\n");
    FILE_TEXT("expect_unsup.cases", "add in=[3],[3] seed=1\n");
    char held[600];
    snprintf(held, sizeof held, "%s/xheld", tmp);
    mkdir(held, 0777);
    FILE_TEXT("xheld/results.jsonl", "{\"index\":0}\n");
    /* {exit code, fragment, command}: %1$s the temporary folder, %2$s the misbehaving plugin,
     * %3$s the mutants plugin, %4$s the plugin folder; each run writes a folder of its own */
    static const struct {
        int rc;
        const char *want, *fmt;
    } rows[] = {
        {0, "1 passed", "capcheck run %1$s/one.cases --provider-lib %2$s --out %1$s/x0"},
        {0, "status:   pass", "capcheck repro 'add in=[3],[3] seed=1' --provider-lib %2$s"},
        {1, "1 failed", "CAPCHECK_MUTANT=softmax_axis capcheck run %1$s/mixed_fail.cases --op "
                        "softmax --provider-lib %3$s --out %1$s/x1"},
        {1, "status:   fail", "CAPCHECK_MUTANT=softmax_axis capcheck repro 'softmax dtype=f32 "
                              "in=[2,6] axis=0 seed=1' --provider-lib %3$s"},
        {1, "status:   error", "CAPCHECK_MISBEHAVE=error-forward capcheck repro 'add in=[3],[3]' "
                               "--provider-lib %2$s"},
        {1, "1 errors", "CAPCHECK_MISBEHAVE=error-forward capcheck run %1$s/one.cases "
                        "--provider-lib %2$s --out %1$s/x2"},
        {1, "status:   crash", "CAPCHECK_MISBEHAVE=segv-forward capcheck repro 'add in=[3],[3]' "
                               "--provider-lib %2$s"},
        {1, "1 crashed", "CAPCHECK_MISBEHAVE=segv-forward capcheck run %1$s/one.cases "
                         "--provider-lib %2$s --out %1$s/x3"},
        {1, "status:   timeout", "CAPCHECK_MISBEHAVE=hang-forward capcheck repro 'add in=[3],[3]' "
                                 "--provider-lib %2$s --timeout 0.5"},
        {1, "status:   out-of-bounds", "CAPCHECK_MUTANT=exp_write_past_end capcheck repro 'exp "
                                       "in=[5] seed=1' --provider-lib %3$s"},
        {1, "status:   nondeterministic", "CAPCHECK_MUTANT=reducesum_order_varies capcheck repro "
                                          "'reduceSum in=[64,64] axis=1 seed=1' --provider-lib "
                                          "%3$s --repeat 2"},
        {125, "does not export capcheck_provider_v1",
         "capcheck repro 'add in=[3],[3]' --provider-lib %4$s/no_entry.so"},
        {125, "cannot load the provider library", "capcheck run %1$s/one.cases --provider-lib "
                                                  "%1$s/missing.so --out %1$s/x4"},
        {125, "killed by SIGSEGV", "CAPCHECK_MISBEHAVE=segv-init capcheck repro 'add in=[3],[3]' "
                                   "--provider-lib %2$s"},
        {125, "killed by SIGSEGV", "CAPCHECK_MISBEHAVE=segv-init capcheck run %1$s/one.cases "
                                   "--provider-lib %2$s --out %1$s/x5"},
        {125, "cannot run on cuda", "capcheck repro 'add in=[3],[3]' --provider reference "
                                    "--device cuda"},
        {125, "cannot run on cuda", "capcheck run %1$s/one.cases --provider reference --device "
                                    "cuda --out %1$s/x6"},
        {125, "status:   unsupported", "capcheck repro 'relu in=[3]' --provider-lib %2$s"},
        {125, "status:   error", "CAPCHECK_MISBEHAVE=oom-forward capcheck repro 'add in=[3],[3]' "
                               "--provider-lib %2$s"},
        {125, "1 errors", "CAPCHECK_MISBEHAVE=oom-forward capcheck run %1$s/one.cases "
                          "--provider-lib %2$s --out %1$s/x7"},
        {125, "1 passed, 0 failed, 1 unsupported", "capcheck run %1$s/mixed_unsup.cases "
                                                   "--provider-lib %2$s --out %1$s/x8"},
        {1, "1 failed, 1 unsupported", "CAPCHECK_MISBEHAVE=zeros-novjp capcheck run "
                                       "%1$s/mixed_unsup.cases --provider-lib %2$s --out "
                                       "%1$s/x9"},
        {2, "case line:1:", "capcheck repro 'add in=[3' --provider-lib %2$s"},
        {2, "unknown option --frob", "capcheck run %1$s/one.cases --frob"},
        {2, "holds an earlier run", "capcheck run %1$s/one.cases --provider reference --out "
                                    "%1$s/xheld"},
    };
    enum { N = sizeof rows / sizeof rows[0] };
    job jobs[N + 2];
    for (int i = 0; i < N; i++) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, rows[i].fmt, tmp, PLUGIN, MUTANTS, CAPCHECK_PLUGIN_DIR);
        job_set(&jobs[i], rows[i].rc, rows[i].want, NULL, "%s", cmd);
    }
    /* known unsupported cases (ATen's f16 fftFno and the rest, "#! seen unsupported" on every
     * CPU platform): 125 as a plain run, 0 with --expect, as it always was */
    job_set(&jobs[N], 125, "0 passed, 0 failed, 32 unsupported", NULL,
            "capcheck run cases/aten_unsupported.cases --out %s/x10", tmp);
    job_set(&jobs[N + 1], 0, "reproduced 32,", NULL,
            "capcheck run cases/aten_unsupported.cases --expect --out %s/x11", tmp);
    run_jobs(jobs, N + 2 * CAPCHECK_HAVE_ATEN);
    free_jobs(jobs, N + 2 * CAPCHECK_HAVE_ATEN);
}

/* ---- a misbehaving provider ----------------------------------------------------------------- */

static void test_misbehaving_plugin_is_a_sentence_or_a_result(void **state)
{
    (void)state;
    static const char *const modes[] = {"hang-init", "segv-init", "exit-init",
                                        "hang-forward", "segv-forward", "exit-forward"};
    enum { N = 6 * 4 };
    job jobs[N];
    for (int m = 0; m < 6; m++) {
        const char *mode = modes[m];
        int init = strstr(mode, "init") != NULL;
        const char *pool_said = !strncmp(mode, "hang", 4)   ? "did not finish initialising"
                                : !strncmp(mode, "segv", 4) ? "killed by SIGSEGV"
                                                            : "exited with status 0";
        const char *bench_said = !strncmp(mode, "hang", 4)   ? "did not finish"
                                 : !strncmp(mode, "segv", 4) ? "crashed (SIGSEGV"
                                                             : "exited with status 0 while";
        const char *fwd_said = !strncmp(mode, "hang", 4)   ? "timeout"
                               : !strncmp(mode, "segv", 4) ? "killed by SIGSEGV"
                                                           : "exited with status 0";
        const char *env = "CAPCHECK_MISBEHAVE";
        job *j = &jobs[4 * m];
        /* run: init faults leave no folder (checked below) and judge nothing (125), forward
         * faults are results */
        job_set(&j[0], init ? 125 : 1, init ? pool_said : fwd_said, NULL,
                "%s=%s capcheck run %s/one.cases --provider-lib %s --timeout 0.5 --out %s/mb-%s",
                env, mode, tmp, PLUGIN, tmp, mode);
        job_set(&j[1], init ? 125 : 1, init ? pool_said : fwd_said, NULL,
                "%s=%s capcheck repro 'add in=[2],[2] seed=0' --provider-lib %s --timeout 0.5", env,
                mode, PLUGIN);
        job_set(&j[2], init ? 125 : 0, init ? pool_said : "minimal:", init ? NULL : "capcheck repro",
                "%s=%s capcheck shrink 'add in=[2],[2] seed=0' --provider-lib %s --timeout 0.5",
                env, mode, PLUGIN);
        job_set(&j[3], 2, bench_said, init ? "initialising" : "the first calls of",
                "%s=%s capcheck bench %s/one.cases --provider-lib %s --timeout 0.5 --reps 1 "
                "--min-time 0.01",
                env, mode, tmp, PLUGIN);
        if (!init && strncmp(mode, "hang", 4) == 0)
            j[3].want[1] = "within 0.5";
    }
    run_jobs(jobs, N);
    for (int m = 0; m < 3; m++) { /* a provider that cannot start leaves no folder behind */
        char dir[600];
        snprintf(dir, sizeof dir, "%s/mb-%s", tmp, modes[m]);
        assert_int_equal(access(dir, F_OK), -1);
    }
    free_jobs(jobs, N);
}

/* A plugin whose constructor or entry point hangs, segfaults or exits is refused with one
 * sentence (exit 125: nothing could be judged): it is loaded in a probe child first, so
 * capcheck itself never dies of it.
 * A load is given at least CC_PLUGIN_LOAD_MIN_S (5 s), whatever --timeout says. */
static void test_a_plugin_that_dies_loading_is_a_sentence(void **state)
{
    (void)state;
    static const char *const modes[] = {"hang-load", "segv-load", "exit-load",
                                        "hang-entry", "segv-entry", "exit-entry"};
    enum { N = 6 + 2 };
    job jobs[N];
    for (int m = 0; m < 6; m++) {
        const char *said = !strncmp(modes[m], "hang", 4)
                               ? "did not finish loading (its constructors or "
                                 "capcheck_provider_v1()) within 5 s"
                           : !strncmp(modes[m], "segv", 4) ? "crashed (SIGSEGV"
                                                           : "exited with status 0 while loading";
        job_set(&jobs[m], 125, said, "capcheck does not load it",
                "CAPCHECK_MISBEHAVE=%s capcheck repro 'add in=[2],[2] seed=0' --provider-lib %s "
                "--timeout 0.5",
                modes[m], PLUGIN);
    }
    job_set(&jobs[6], 125, "crashed (SIGSEGV", "capcheck does not load it",
            "CAPCHECK_MISBEHAVE=segv-load capcheck run %s/one.cases --provider-lib %s --out "
            "%s/mb-load",
            tmp, PLUGIN, tmp);
    job_set(&jobs[7], 125, "exited with status 0 while loading", NULL,
            "CAPCHECK_MISBEHAVE=exit-entry capcheck run %s/one.cases --provider reference "
            "--witness %s --out %s/mb-witness",
            tmp, PLUGIN, tmp);
    run_jobs(jobs, N);
    for (int i = 0; i < N; i++) /* one sentence, nothing else */
        if (cc_t_count(jobs[i].out, "\n") != 1)
            fail_msg("%s: more than one line:\n%s", jobs[i].cmd, jobs[i].out);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/mb-load", tmp);
    assert_int_equal(access(dir, F_OK), -1);
    free_jobs(jobs, N);
}

/* Every byte capcheck wrote is UTF-8. */
static void expect_utf8(const char *path)
{
    size_t n;
    char *t = cc_t_slurp(path, &n);
    assert_non_null(t);
    if (cc_utf8_valid_prefix(t, n) != n)
        fail_msg("%s is not UTF-8 at byte %zu", path, cc_utf8_valid_prefix(t, n));
    free(t);
}

static void test_unterminated_message_and_a_forward_without_vjp(void **state)
{
    (void)state;
    job jobs[3];
    job_set(&jobs[0], 1, "error: forward: bad ?? bytes", NULL,
            "CAPCHECK_MISBEHAVE=unterminated capcheck run %s/one.cases --provider-lib %s --out "
            "%s/unterm; capcheck validate %s/unterm/report.json",
            tmp, PLUGIN, tmp, tmp);
    jobs[0].want_rc = 0; /* validate's: the report conforms */
    jobs[0].want[1] = "conforms to built-in:reports/schema.json";
    job_set(&jobs[1], 1, "fail: zero-trust: y is all zeros",
            "and the VJP was unsupported (vjp: the plugin has no VJP",
            "CAPCHECK_MISBEHAVE=zeros-novjp capcheck run %s/one.cases --provider-lib %s --out "
            "%s/novjp",
            tmp, PLUGIN, tmp);
    job_set(&jobs[2], 1, "status:   fail", "forward:  worst bound ratio",
            "CAPCHECK_MISBEHAVE=zeros-novjp capcheck repro 'add in=[5],[5] seed=3' "
            "--provider-lib %s",
            PLUGIN);
    run_jobs(jobs, 3);
    const char *files[] = {"results.jsonl", "report.json", "report.md", "report.junit.xml",
                           "report.html", "run.json"};
    for (int i = 0; i < 6; i++) {
        char p[700];
        snprintf(p, sizeof p, "%s/unterm/%s", tmp, files[i]);
        expect_utf8(p);
    }
    /* the message is bounded: the record is one line of reasonable length */
    char p[700];
    snprintf(p, sizeof p, "%s/unterm/results.jsonl", tmp);
    char *rec = cc_t_slurp(p, NULL);
    assert_true(strlen(rec) < 2000);
    assert_int_equal(cc_t_count(rec, "\n"), 1);
    free(rec);
    snprintf(p, sizeof p, "%s/novjp/report.json", tmp);
    char *rep = cc_t_slurp(p, NULL);
    expect_in(rep, "\"totals\": {\"pass\": 0, \"fail\": 1, \"unsupported\": 0");
    free(rep);
    free_jobs(jobs, 3);
}

/* ---- workers killed from outside ---------------------------------------------------------- */

static void test_a_worker_killed_from_outside_is_retried(void **state)
{
    (void)state;
    char dir[600], mark[600], cases[600], out_path[600];
    snprintf(dir, sizeof dir, "%s/killed", tmp);
    snprintf(mark, sizeof mark, "%s/kill.mark", tmp);
    snprintf(cases, sizeof cases, "%s/four.cases", tmp);
    snprintf(out_path, sizeof out_path, "%s/killed.out", tmp);
    FILE_TEXT("four.cases", "add count=4 dtype=f32 seed=7\n");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("CAPCHECK_MISBEHAVE", "wait-for-kill", 1);
        setenv("CAPCHECK_MISBEHAVE_MARK", mark, 1);
        freopen(out_path, "w", stdout);
        dup2(fileno(stdout), 2);
        execl(CAPCHECK_BIN, CAPCHECK_BIN, "run", cases, "--provider-lib", PLUGIN, "--out", dir,
              "-j", "2", "--timeout", "30", (char *)NULL);
        _exit(127);
    }
    /* the first forward call writes its worker's pid to the mark and waits: kill it, as the
     * OOM killer would */
    long victim = 0;
    for (int i = 0; i < 2000 && victim <= 0; i++) {
        char *t = cc_t_slurp(mark, NULL);
        if (t && strchr(t, '\n'))
            victim = strtol(t, NULL, 10);
        free(t);
        struct timespec ms = {0, 5000000L};
        nanosleep(&ms, NULL);
    }
    assert_true(victim > 0);
    assert_int_equal(kill((pid_t)victim, SIGKILL), 0);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    char *out = cc_t_slurp(out_path, NULL);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("the run did not pass: %s", out);
    expect_in(out, "4 passed");
    expect_in(out, "capcheck: 1 cases ran twice: their first worker was killed from outside");
    free(out);
    char p[700];
    snprintf(p, sizeof p, "%s/results.jsonl", dir);
    char *jl = cc_t_slurp(p, NULL);
    assert_int_equal(cc_t_count(jl, "\"retried\":true"), 1);
    free(jl);
    snprintf(p, sizeof p, "%s/report.json", dir);
    char *rep = cc_t_slurp(p, NULL);
    expect_in(rep, "\n  \"retried\": 1,\n");
    free(rep);
    snprintf(p, sizeof p, "%s/report.md", dir);
    char *md = cc_t_slurp(p, NULL);
    expect_in(md, "1 cases ran twice: their first worker was killed from outside");
    free(md);

    /* killed twice: a crash that says so, and --resume runs it again */
    job jobs[1];
    job_set(&jobs[0], 1, "killed from outside twice", NULL,
            "CAPCHECK_MISBEHAVE=sigkill-forward capcheck run %s/one.cases --provider-lib %s "
            "--out %s/twice",
            tmp, PLUGIN, tmp);
    run_jobs(jobs, 1);
    free_jobs(jobs, 1);
    snprintf(p, sizeof p, "%s/twice/results.jsonl", tmp);
    jl = cc_t_slurp(p, NULL);
    expect_in(jl, "\"status\":\"crash\"");
    expect_in(jl, "\"retried\":true");
    free(jl);
    job_set(&jobs[0], 0, "1 crash of workers killed from outside run again", "1 passed",
            "capcheck run --resume %s/twice %s/one.cases --provider-lib %s", tmp, tmp, PLUGIN);
    run_jobs(jobs, 1);
    free_jobs(jobs, 1);
    jl = cc_t_slurp(p, NULL);
    assert_int_equal(cc_t_count(jl, "\n"), 1);
    expect_in(jl, "\"status\":\"pass\"");
    free(jl);
}

/* ---- repro lines -------------------------------------------------------------------------- */

/* Each command `... capcheck repro '...' ...` in text (the program word whole: a path that ends
 * in capcheck, or capcheck), with the environment assignments before it, up to the end of its
 * line (or a closing backtick or tag), added to cmds[0..*n) unless it is there already. Returns
 * how many text holds. */
static int repro_commands(const char *text, char cmds[][3000], int max, int *n_out)
{
    int n = *n_out, found = 0;
    for (const char *at = text; (at = strstr(at, "capcheck repro '")) && n < max; at++) {
        found++;
        const char *start = at;
        while (start > text && !strchr(" \n`>", start[-1])) /* the program word's start */
            start--;
        for (;;) { /* NAME=VALUE words before it */
            const char *w = start;
            while (w > text && w[-1] == ' ')
                w--;
            const char *b = w;
            while (b > text && b[-1] != ' ' && b[-1] != '\n' && b[-1] != '`' && b[-1] != '>')
                b--;
            if (b == w || !strchr(b, '=') || strchr(b, '=') > w || b[0] < 'A' || b[0] > 'Z')
                break;
            start = b;
        }
        size_t len = strcspn(at, "\n`<");
        snprintf(cmds[n], 3000, "%.*s", (int)(at - start + len), start);
        int seen = 0;
        for (int k = 0; k < n; k++)
            seen |= strcmp(cmds[k], cmds[n]) == 0;
        n += !seen;
    }
    *n_out = n;
    return found;
}

/* Every repro line capcheck prints (the run's log, gate, diff, shrink, report.md, JUnit) runs
 * when pasted into a fresh shell (an empty environment: no CAPCHECK_MUTANT, no PATH to the build)
 * in the folder it was printed in, and in another folder: it names the capcheck that printed it
 * by its absolute path, the plugin by its absolute path and the plugin's variable. */
static void test_every_repro_line_reproduces(void **state)
{
    (void)state;
    FILE_TEXT("mut.cases", "softmax count=2 dtype=f32 size=tiny seed=1\nadd in=[3],[3] seed=1\n");
    FILE_TEXT("pm.conf", "format capcheck-policy/1\nlibtorch_version any\nmin_passing 1\n"
                         "min_vjp_passing 0\nshape_classes none\nlayout_classes none\n"
                         "edge_classes none\n");
    char printed[600];
    snprintf(printed, sizeof printed, "%s/printed", tmp);
    mkdir(printed, 0777);
    job jobs[5];
    job_set(&jobs[0], 0, "3 passed", NULL,
            "cd %s && capcheck run ../mut.cases --provider-lib %s --out mut-base", printed,
            MUTANTS);
    run_jobs(jobs, 1);
    free_jobs(jobs, 1);
    job_set(&jobs[0], 1, "capcheck repro '", "since the baseline",
            "cd %s && CAPCHECK_MUTANT=softmax_axis capcheck run ../mut.cases --provider-lib %s "
            "--out mut --timeout 5 --baseline mut-base",
            printed, MUTANTS);
    job_set(&jobs[1], 1, "capcheck repro '", NULL, "cd %s && capcheck gate mut --policy ../pm.conf",
            printed);
    job_set(&jobs[2], 1, "capcheck repro '", NULL, "cd %s && capcheck diff mut-base mut", printed);
    job_set(&jobs[3], 0, "minimal:", "capcheck repro '",
            "cd %s && CAPCHECK_MUTANT=softmax_axis capcheck shrink 'softmax dtype=f32 in=[3,4] "
            "axis=1 seed=2' --provider-lib %s --timeout 5",
            printed, MUTANTS);
    run_jobs(jobs, 1); /* the run first: gate and diff read it */
    run_jobs(jobs + 1, 3);
    static char cmds[40][3000];
    int n = 0;
    /* every source prints them: the run's log, gate, diff, shrink, report.md, JUnit */
    for (int i = 0; i < 4; i++)
        if (repro_commands(jobs[i].out, cmds, 40, &n) == 0)
            fail_msg("no repro line in the output of %s", jobs[i].cmd);
    char p[700];
    snprintf(p, sizeof p, "%s/mut/report.md", printed);
    char *t = cc_t_slurp(p, NULL);
    assert_non_null(t);
    assert_true(repro_commands(t, cmds, 40, &n) > 0);
    free(t);
    /* JUnit: the failures' lines (a passing row's system-out names its worst case, no failure),
     * as a reader of the XML sees them: entities decoded */
    snprintf(p, sizeof p, "%s/mut/report.junit.xml", printed);
    t = cc_t_slurp(p, NULL);
    assert_non_null(t);
    static const char *const entities[][2] = {{"&#39;", "'"}, {"&quot;", "\""}, {"&lt;", "<"},
                                              {"&gt;", ">"}, {"&amp;", "&"}};
    for (size_t e = 0; e < sizeof entities / sizeof entities[0]; e++)
        for (char *at; (at = strstr(t, entities[e][0]));) {
            size_t from = strlen(entities[e][0]), to = strlen(entities[e][1]);
            memcpy(at, entities[e][1], to);
            memmove(at + to, at + from, strlen(at + from) + 1);
        }
    int failures = 0;
    for (char *f = t; (f = strstr(f, "<failure ")); f++) {
        char *end = strstr(f, "</failure>");
        assert_non_null(end);
        *end = 0;
        assert_true(repro_commands(f, cmds, 40, &n) > 0);
        *end = '<';
        failures++;
    }
    assert_true(failures > 0);
    free(t);
    free_jobs(jobs, 4);
    print_message("%d distinct repro commands printed\n", n);
    assert_true(n >= 2); /* the run's failure and shrink's minimal case */
    job *rerun = calloc((size_t)(2 * n), sizeof *rerun);
    for (int i = 0; i < n; i++) {
        /* pasted where the plugin's variable is not set: the line must carry it, and the
         * capcheck that printed it (no capcheck is on PATH there) */
        expect_in(cmds[i], "CAPCHECK_MUTANT=softmax_axis " CAPCHECK_BIN " repro '");
        expect_in(cmds[i], "--provider-lib " MUTANTS);
        char pasted[700];
        snprintf(pasted, sizeof pasted, "%s/pasted%d.sh", tmp, i);
        FILE *f = fopen(pasted, "w");
        assert_non_null(f);
        fprintf(f, "%s\n", cmds[i]);
        fclose(f);
        /* a fresh shell: nothing of this environment, PATH without capcheck */
        job_set(&rerun[2 * i], 1, "status:   fail", NULL,
                "cd %s && env -i PATH=/usr/bin:/bin sh %s", printed, pasted);
        job_set(&rerun[2 * i + 1], 1, "status:   fail", NULL,
                "cd / && env -i PATH=/usr/bin:/bin sh %s", pasted);
    }
    run_jobs(rerun, 2 * n);
    free_jobs(rerun, 2 * n);
    free(rerun);
}

/* ---- output folders ----------------------------------------------------------------------- */

static void test_output_folders_are_never_overwritten_silently(void **state)
{
    (void)state;
    job jobs[3];
    job_set(&jobs[0], 0, NULL, NULL,
            "capcheck run %s/four.cases --provider reference --shard 1/2 --out %s/s1", tmp, tmp);
    job_set(&jobs[1], 0, NULL, NULL,
            "capcheck run %s/four.cases --provider reference --shard 2/2 --out %s/s2", tmp, tmp);
    job_set(&jobs[2], 125, "File too large", "no report: every result is in",
            "bash -c 'ulimit -f 1; exec \"$0\" \"$@\"' capcheck run %s/one.cases --provider "
            "reference --out %s/full",
            tmp, tmp);
    FILE_TEXT("four.cases", "add count=4 dtype=f32 seed=7\n");
    run_jobs(jobs, 3);
    assert_null(strstr(jobs[2].out, "report in")); /* a full disk is no success */
    free_jobs(jobs, 3);
    char old[600];
    snprintf(old, sizeof old, "%s/old", tmp);
    mkdir(old, 0777);
    FILE_TEXT("old/results.jsonl", "{\"index\":0}\n");
    FILE_TEXT("old/run.json", "{}\n");
    job_set(&jobs[0], 2, "is the shard folder", "merging into one of its inputs",
            "capcheck merge %s/s1 %s/s2 --out %s/s1", tmp, tmp, tmp);
    job_set(&jobs[1], 2, "holds a run (results.jsonl): --force replaces it", NULL,
            "capcheck merge %s/s1 %s/s2 --out %s/old", tmp, tmp, tmp);
    run_jobs(jobs, 2);
    free_jobs(jobs, 2);
    job_set(&jobs[0], 0, "capcheck merge: 2 shards, 4 cases", NULL,
            "capcheck merge %s/s1 %s/s2 --out %s/old --force", tmp, tmp, tmp);
    run_jobs(jobs, 1);
    free_jobs(jobs, 1);
    char p[700];
    snprintf(p, sizeof p, "%s/old/run.json", tmp); /* the replaced run's identity is gone */
    assert_int_equal(access(p, F_OK), -1);
}

/* ---- help, defaults, interrupts, progress, report.md -------------------------------------- */

static void test_help_for_every_command(void **state)
{
    (void)state;
    static const char *const commands[] = {"run",  "repro", "shrink",    "bench", "list",
                                           "gate", "evidence", "emit-lean", "diff", "merge",
                                           "report", "history", "validate"};
    enum { C = sizeof commands / sizeof commands[0], N = C + 5 };
    job jobs[N];
    for (int i = 0; i < C; i++)
        job_set(&jobs[i], 0, "usage: capcheck ", "Exit codes:", "capcheck %s %s", commands[i],
                i % 2 ? "-h" : "--help");
    job_set(&jobs[C], 0, "Commands:", "cufft", "capcheck help");
    jobs[C].want[2] = "125  nothing could be judged";
    job_set(&jobs[C + 1], 0, "--provider-lib PATH", "openblas", "capcheck help run");
    jobs[C + 1].want[2] = "cudnn";
    job_set(&jobs[C + 2], 0, "--all lists every capsule", NULL, "capcheck help gate");
    job_set(&jobs[C + 3], 0, "Commands:", "cublas-tf32", "capcheck --help");
    job_set(&jobs[C + 4], 0, "--torchlean COMMIT", "a TorchLean module", "capcheck help emit-lean");
    run_jobs(jobs, N);
    free_jobs(jobs, N);
}

static void test_defaults_are_built_in(void **state)
{
    (void)state;
    job jobs[2];
    /* from another folder: the schema and the policy come from the binary */
    job_set(&jobs[0], 0, "conforms to built-in:reports/schema.json", NULL,
            "cd / && capcheck validate %s/s1/report.json", tmp);
    job_set(&jobs[1], 2, "libtorch", NULL, "cd / && capcheck gate %s/s1 %s/s2", tmp, tmp);
    run_jobs(jobs, 2);
    assert_null(strstr(jobs[1].out, "cannot open the policy"));
    free_jobs(jobs, 2);
}

static void test_ctrl_c_says_how_to_resume(void **state)
{
    (void)state;
    char dir[600], out_path[600], info[700];
    snprintf(dir, sizeof dir, "%s/interrupted", tmp);
    snprintf(out_path, sizeof out_path, "%s/interrupted.out", tmp);
    snprintf(info, sizeof info, "%s/run.json", dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("CAPCHECK_MISBEHAVE", "hang-forward", 1);
        freopen(out_path, "w", stdout);
        dup2(fileno(stdout), 2);
        char cases[600];
        snprintf(cases, sizeof cases, "%s/one.cases", tmp);
        execl(CAPCHECK_BIN, CAPCHECK_BIN, "run", cases, "--provider-lib", PLUGIN, "--out", dir,
              "--timeout", "60", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 2000 && access(info, F_OK) != 0; i++) {
        struct timespec ms = {0, 5000000L};
        nanosleep(&ms, NULL);
    }
    assert_int_equal(access(info, F_OK), 0);
    struct timespec ms = {0, 200000000L};
    nanosleep(&ms, NULL);
    kill(pid, SIGINT);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    char *out = cc_t_slurp(out_path, NULL);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 130)
        fail_msg("want exit 130: %s", out);
    expect_in(out, "interrupted by Ctrl-C (SIGINT): 0 of 1 cases are recorded in");
    expect_in(out, "--resume ");
    free(out);
}

static void test_progress_report_md_and_listings(void **state)
{
    (void)state;
    FILE_TEXT("ln.cases", "layerNorm in=[2,3],[3],[3]\n");
    FILE_TEXT("unsup.cases", "add in=[3],[3] seed=1\nsoftmax in=[3] axis=0 seed=1\n");
    job jobs[5];
    /* the progress line (on a terminal only) has elapsed time and an ETA */
    job_set(&jobs[0], 0, "ETA ", NULL,
            "script -qec \"capcheck run %s/four.cases --provider reference --out %s/tty\" "
            "/dev/null",
            tmp, tmp);
    job_set(&jobs[1], 0, "layerNorm dtype=f32 device=cpu in=[2,3],[3],[3] axis=-1 eps=1e-05", NULL,
            "capcheck list cases %s/ln.cases", tmp);
    job_set(&jobs[2], 0, "axis=-1 eps=1e-05", "q,k,v,[mask]", "capcheck list ops");
    job_set(&jobs[3], 125, "1 unsupported", NULL,
            "capcheck run %s/unsup.cases --provider-lib %s/example_plugin.so --out %s/unsup", tmp,
            CAPCHECK_PLUGIN_DIR, tmp);
    job_set(&jobs[4], 0, "conv ", "kernel=[...] stride=[1,...]", "capcheck list ops");
    int have_script = system("command -v script > /dev/null 2>&1") == 0;
    run_jobs(jobs + !have_script, 5 - !have_script);
    if (!have_script)
        cc_t_skip("no `script` (util-linux) here: the progress line on a terminal is not checked");
    free_jobs(jobs, 5);
    /* report.md: the verdict, then the failures with their worst case, then what changed since
     * the baseline, then the rest; unsupported rows apart from failures */
    char p[700];
    snprintf(p, sizeof p, "%s/printed/mut/report.md", tmp); /* test_every_repro_line_... */
    char *md = cc_t_slurp(p, NULL);
    assert_non_null(md);
    char *verdict = strstr(md, "**Verdict: "), *fails = strstr(md, "## Failures"),
         *since = strstr(md, "## Since the baseline"), *run = strstr(md, "## The run"),
         *rows = strstr(md, "## Rows, worst first");
    assert_true(verdict && fails && since && run && rows);
    assert_true(verdict < fails && fails < since && since < run && run < rows);
    expect_in(md, "did not pass (");
    expect_in(md, "worst: fail: ");
    assert_null(strstr(md, "## Unsupported"));
    free(md);
    snprintf(p, sizeof p, "%s/unsup/report.md", tmp);
    md = cc_t_slurp(p, NULL);
    expect_in(md, "**Verdict: no case failed, but 1 of 2 cases are unsupported");
    expect_in(md, "## Unsupported (not failures, never passes; first message of each row)\n\n"
                  "- softmax f32 cpu"); /* then the platform key, where the run names one */
    expect_in(md, ": 1 of 1 unsupported: forward: the example plugin implements add and relu");
    assert_null(strstr(md, "## Failures"));
    free(md);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/capcheck_harden_XXXXXX");
    if (!mkdtemp(tmp))
        return -1;
    char p[600];
    snprintf(p, sizeof p, "%s/one.cases", tmp);
    cc_t_write(p, "add in=[3],[3] seed=1\n");
    unsetenv("CAPCHECK_MUTANT");
    unsetenv("CAPCHECK_MISBEHAVE");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return cc_t_remove_dir(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_input_table),
        cmocka_unit_test(test_exit_codes_git_bisect_reads),
        cmocka_unit_test(test_misbehaving_plugin_is_a_sentence_or_a_result),
        cmocka_unit_test(test_a_plugin_that_dies_loading_is_a_sentence),
        cmocka_unit_test(test_unterminated_message_and_a_forward_without_vjp),
        cmocka_unit_test(test_a_worker_killed_from_outside_is_retried),
        cmocka_unit_test(test_every_repro_line_reproduces),
        cmocka_unit_test(test_output_folders_are_never_overwritten_silently),
        cmocka_unit_test(test_help_for_every_command),
        cmocka_unit_test(test_defaults_are_built_in),
        cmocka_unit_test(test_ctrl_c_says_how_to_resume),
        cmocka_unit_test(test_progress_report_md_and_listings),
    };
    return cc_t_exit_code(cmocka_run_group_tests(tests, setup, teardown));
}
