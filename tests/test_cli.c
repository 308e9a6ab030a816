/* The command line as a user meets it: bad input gives one sentence naming file, line and
 * column with exit code 2; a run writes its three outputs; repro reruns one line; list ops
 * names the whole vocabulary; list cases prints the lines a run runs; bench measures; a message
 * names the real problem (count= in one case line, a rank-9 shape, a file's byte-order mark,
 * validate given a folder). */
#define _XOPEN_SOURCE 700 /* realpath */
#include "cli_util.h"

#include <sys/stat.h>

#include "capcheck_git.h" /* generated: what a cached shim's built-by names (aten_build.c) */
#include "providers/aten_build.h"

static char tmpdir[256];

static void write_file(const char *name, const char *text, char *path, size_t n)
{
    snprintf(path, n, "%s/%s", tmpdir, name);
    cc_t_write(path, text);
}

static void expect_input_error(const char *name, const char *text, const char *where,
                               const char *fragment)
{
    char path[512], args[1024], out[8192];
    write_file(name, text, path, sizeof path);
    snprintf(args, sizeof args, "run %s --provider reference --out %s/o", path, tmpdir);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    char loc[600];
    snprintf(loc, sizeof loc, "%s:%s: ", path, where);
    if (!strstr(out, loc) || !strstr(out, fragment))
        fail_msg("expected '%s...%s' in: %s", loc, fragment, out);
}

static void test_bad_input_is_one_sentence_and_exit_2(void **state)
{
    (void)state;
    expect_input_error("op.cases", "add in=[2],[2]\nfrobnicate in=[2]\n", "2:1", "unknown op");
    expect_input_error("shape.cases", "# c\nsoftmax in=[2,,3]\n", "2:12", "malformed shape");
    expect_input_error("gen.cases", "exp count=3 dtype=f7\n", "1:19", "bad dtype list");
    char out[4096];
    assert_int_equal(cc_t_run(NULL, "run /no/such.cases --provider reference", out, sizeof out),
                     2);
    assert_non_null(strstr(out, "/no/such.cases: cannot open the case file"));
    assert_int_equal(cc_t_run(NULL, "run --provider nosuch", out, sizeof out), 2);
    assert_non_null(strstr(out, "unknown provider 'nosuch'"));
    /* TorchLean's provider and device names: known (with what capcheck runs for them) or not */
    assert_int_equal(cc_t_run(NULL, "run --provider cuDNN", out, sizeof out), 2);
    assert_non_null(strstr(out, "'cuDNN' is TorchLean's provider NN.Backend.Provider.cuDNN; "
                                "capcheck checks its capsules with --provider cudnn"));
    assert_int_equal(cc_t_run(NULL, "run --provider webgpu", out, sizeof out), 2);
    assert_non_null(strstr(out, "NN.Backend.Provider.webGpu, which no capcheck provider "
                                "implements: load one with --provider-lib"));
    assert_int_equal(cc_t_run(NULL, "run --provider reference --device metal", out, sizeof out), 2);
    assert_non_null(strstr(out, "--device: device 'metal' is a TorchLean device"));
    assert_int_equal(cc_t_run(NULL, "repro 'softmax in=[2] axis=5'", out, sizeof out), 2);
    assert_non_null(strstr(out, "axis 5 is out of range"));
    assert_int_equal(cc_t_run(NULL, "frob", out, sizeof out), 2);
    /* asking for CUDA where it cannot run is one sentence, never a silent CPU run; nothing could
     * be judged (125), not a malformed command */
    assert_int_equal(cc_t_run(NULL, "run --device cuda --provider reference", out, sizeof out),
                     125);
    assert_non_null(strstr(out, "cannot run on cuda"));
}

static void test_run_writes_results_and_reports(void **state)
{
    (void)state;
    char path[512], args[1024], out[8192];
    write_file("ok.cases", "add count=3 dtype=f32,f64 layout=contig,stride2\n"
                           "softmax in=[3,4] axis=1 seed=5\n",
               path, sizeof path);
    snprintf(args, sizeof args, "run %s --provider reference --out %s/run", path, tmpdir);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    assert_non_null(strstr(out, "13 cases on reference"));
    const char *files[] = {"results.jsonl", "report.json", "report.md"};
    for (int i = 0; i < 3; i++) {
        char f[600];
        snprintf(f, sizeof f, "%s/run/%s", tmpdir, files[i]);
        assert_int_equal(access(f, R_OK), 0);
    }
    char f[600], line[4096];
    snprintf(f, sizeof f, "%s/run/results.jsonl", tmpdir);
    FILE *jl = fopen(f, "r");
    int lines = 0;
    while (fgets(line, sizeof line, jl))
        lines += strstr(line, "\"status\":\"pass\"") != NULL;
    fclose(jl);
    assert_int_equal(lines, 13);
}

static void test_repro_reruns_one_line(void **state)
{
    (void)state;
    char out[8192];
    assert_int_equal(cc_t_run(NULL,
                              "repro 'matmul dtype=f64 in=[3,4],[4,2] seed=7' --provider reference",
                              out, sizeof out),
                     0);
    assert_non_null(strstr(out, "status:   pass"));
    assert_non_null(strstr(out, "case:     matmul dtype=f64 device=cpu in=[3,4],[4,2] "
                                "stream=2 layout=contig check=both seed=7"));
}

static void test_list_ops_names_the_vocabulary(void **state)
{
    (void)state;
    char out[16384];
    assert_int_equal(cc_t_run(NULL, "list ops", out, sizeof out), 0);
    const char *some[] = {"randUniform", "softmax", "layerNorm", "attention", "custom"};
    for (int i = 0; i < 5; i++)
        assert_non_null(strstr(out, some[i]));
    assert_non_null(strstr(out, "56 ops in the vocabulary"));
}

/* list cases expands generators into the lines run would run (and --max-elements keeps the
 * small ones); those lines run to the same results as the generator file. */
static void test_list_cases_prints_what_run_runs(void **state)
{
    (void)state;
    char path[512], args[1024], out[16384];
    write_file("gen.cases", "add count=3 dtype=f32,f64 layout=contig size=small\n"
                            "softmax in=[40,40] axis=1 seed=5\n",
               path, sizeof path);
    snprintf(args, sizeof args, "list cases %s --seed 9", path);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    int lines = 0;
    for (const char *p = out; (p = strchr(p, '\n')); p++)
        lines++;
    assert_int_equal(lines, 7);
    assert_non_null(strstr(out, "softmax dtype=f32 device=cpu in=[40,40] axis=1 stream=2 "
                                "layout=contig check=both seed=5\n"));
    char listed[512];
    write_file("listed.cases", out, listed, sizeof listed);
    snprintf(args, sizeof args, "list cases %s --max-elements 1024", listed);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    assert_null(strstr(out, "softmax")); /* 1600 elements */
    assert_non_null(strstr(out, "add dtype=f64"));
    snprintf(args, sizeof args, "list cases %s --max-elements 0", listed);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    assert_non_null(strstr(out, "--max-elements wants a positive whole number"));
}

/* bench measures what it says on the cases it can, writes its JSON, refuses bad options. The
 * figures themselves are the machine's: only their presence and consistency are asserted. */
static void test_bench_prints_the_loops_and_the_ratio(void **state)
{
    (void)state;
    char path[512], args[1024], out[16384];
    write_file("bench.cases", "add in=[4,8],[4,8] seed=1\nsoftmax in=[40,40] axis=1 seed=2\n"
                              "matmul dtype=f64 in=[3,4],[4,2] seed=3\n",
               path, sizeof path);
    snprintf(args, sizeof args,
             "bench %s --provider reference --min-time 0.01 --reps 3 --json %s/bench.json",
             path, tmpdir);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    assert_non_null(strstr(out, "bench: 2 of 3 cases from"));
    assert_non_null(strstr(out, "1 larger than 1024 elements, 0 not run by the provider"));
    const char *loops[] = {"provider ", "capcheck ", "materialize ", "reference "};
    for (int i = 0; i < 4; i++)
        assert_non_null(strstr(out, loops[i]));
    assert_non_null(strstr(out, "capcheck / provider = "));
    assert_non_null(strstr(out, "capcheck's results on these cases: 2 pass"));
    char f[600];
    snprintf(f, sizeof f, "%s/bench.json", tmpdir);
    char *json = cc_t_slurp(f, NULL);
    assert_non_null(json);
    assert_non_null(strstr(json, "\"schema\":\"capcheck-bench/1\""));
    assert_non_null(strstr(json, "\"measured\":2,\"too_large\":1"));
    double ratio = 0;
    const char *r = strstr(json, "\"ratio_capcheck_to_provider\":");
    assert_non_null(r);
    assert_int_equal(sscanf(r + strlen("\"ratio_capcheck_to_provider\":"), "%lf", &ratio), 1);
    assert_true(ratio > 0 && ratio < 1); /* the reference provider is one part of its own path */
    free(json);
    snprintf(args, sizeof args, "bench %s --provider reference --reps 0", path);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    assert_non_null(strstr(out, "--reps wants a positive whole number"));
    snprintf(args, sizeof args, "bench %s --provider reference --max-elements 2", path);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    assert_non_null(strstr(out, "none of the 3 cases can be measured (3 larger than 2"));
}

/* libtorch is loaded by the commands that run ATen only: with the shim pointed at nothing,
 * everything else still works, and a run on ATen says in one sentence what is missing. */
static void test_only_aten_runs_load_the_shim(void **state)
{
    (void)state;
    char path[512], args[1024], out[16384];
    const char *none = "CAPCHECK_ATEN_LIB=/nonexistent/libcapcheck_aten.so ";
    write_file("few.cases", "relu in=[4,7] seed=1\nmatmul in=[8,16],[16,4] seed=2\n", path,
               sizeof path);
    assert_int_equal(cc_t_run(none, "list ops", out, sizeof out), 0);
    snprintf(args, sizeof args, "run %s --provider reference --out %s/few -j 1", path, tmpdir);
    assert_int_equal(cc_t_run(none, args, out, sizeof out), 0);
    snprintf(args, sizeof args, "run %s --out %s/few-aten -j 1", path, tmpdir);
    assert_int_equal(cc_t_run(none, args, out, sizeof out), 125); /* nothing could be judged */
#if CAPCHECK_HAVE_ATEN
    assert_non_null(strstr(out, "cannot find the ATen provider /nonexistent/libcapcheck_aten.so"));
#else
    assert_non_null(strstr(out, "this build has no ATen provider"));
#endif
}

/* NVIDIA's libraries likewise: no command but a run on a CUDA provider loads them (the dynamic
 * loader's own record of what it opened), and with the module pointed at nothing that run says
 * so in one sentence. */
static void test_only_cuda_runs_load_the_cuda_providers(void **state)
{
    (void)state;
    char args[1024], out[1 << 16];
    assert_int_equal(cc_t_run("LD_DEBUG=libs ", "list ops", out, sizeof out), 0);
    assert_non_null(strstr(out, "56 ops in the vocabulary"));
    assert_null(strstr(out, "libcublas"));
    assert_null(strstr(out, "libcudnn"));
    assert_null(strstr(out, "libcufft"));
    snprintf(args, sizeof args, "run --provider cublas --device cuda --out %s/cuda -j 1", tmpdir);
    assert_int_equal(cc_t_run("CAPCHECK_CUDA_LIB=/nonexistent/libcapcheck_cuda.so ", args, out,
                              sizeof out),
                     125);
    assert_true(strstr(out, "cannot find the CUDA providers' module "
                            "/nonexistent/libcapcheck_cuda.so") ||
                strstr(out, "capcheck was built without the CUDA providers"));
}

/* --ref and --ref-threads: a sampled repro says what it checked; bad values are one sentence;
 * --max-elements on run leaves out the large cases and says how many. */
static void test_ref_options(void **state)
{
    (void)state;
    char path[512], args[1024], out[16384];
    assert_int_equal(cc_t_run(NULL,
                              "repro 'matmul in=[40,50],[50,30] seed=4' --provider reference "
                              "--ref sampled --ref-threads 2",
                              out, sizeof out),
                     0);
    assert_non_null(strstr(out, "sampled:  "));
    assert_non_null(strstr(out, "\"sampled\":{\"fraction\":"));
    assert_int_equal(cc_t_run(NULL, "repro 'relu in=[4]' --ref most", out, sizeof out), 2);
    assert_non_null(strstr(out, "--ref wants auto, full or sampled, not 'most'"));
    assert_int_equal(cc_t_run(NULL, "repro 'relu in=[4]' --ref-threads 0", out, sizeof out), 2);
    assert_non_null(strstr(out, "--ref-threads wants a whole number of threads from 1 to 256"));
    write_file("two.cases", "relu in=[4,7] seed=1\nrelu in=[400,700] seed=2\n", path,
               sizeof path);
    snprintf(args, sizeof args, "run %s --provider reference --max-elements 100 --out %s/two",
             path, tmpdir);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    assert_non_null(strstr(out, "--max-elements 100 leaves out 1 of 2 cases"));
    assert_non_null(strstr(out, "capcheck: 1 cases on reference"));
}

/* --libtorch DIR (providers/aten_build.h): no such folder, a folder that is no libtorch and a
 * libtorch whose CMake package does not build the shim are 125 with one sentence (the last
 * after its progress line), the cache keyed by version and commit; the option is the ATen
 * provider's only (2). With the shim for the venv's own torch already in the cache (a copy of
 * this build's: the same libtorch), a run loads that one, its provenance names the libtorch's
 * folder and its repro lines carry CAPCHECK_LIBTORCH. Building the shim (minutes) is the
 * opt-in stage `libtorch` of scripts/test. */
static void test_libtorch_option(void **state)
{
    (void)state;
    char args[9000], out[16384], dir[4096], env[700];
    snprintf(env, sizeof env, "XDG_CACHE_HOME=%s/cache ", tmpdir);
    assert_int_equal(cc_t_run(env, "repro 'relu in=[3]' --libtorch /nonexistent", out, sizeof out),
                     125);
    expect_in(out, "--libtorch /nonexistent: No such file or directory");
    snprintf(args, sizeof args, "repro 'relu in=[3]' --libtorch %s", tmpdir);
    assert_int_equal(cc_t_run(env, args, out, sizeof out), 125);
    expect_in(out, "not the lib folder of a libtorch");
    assert_int_equal(cc_t_count(out, "\n"), 1);
    snprintf(args, sizeof args, "repro 'relu in=[3]' --libtorch %s --provider reference", tmpdir);
    assert_int_equal(cc_t_run(env, args, out, sizeof out), 2);
    expect_in(out, "--libtorch applies to the ATen provider");
    /* a libtorch whose package does not build the shim */
    snprintf(dir, sizeof dir, "%s/fake/torch/share/cmake/Torch", tmpdir);
    char mk[4096];
    snprintf(mk, sizeof mk, "mkdir -p '%.1000s' '%s/fake/torch/lib'", dir, tmpdir);
    assert_int_equal(system(mk), 0);
    write_file("fake/torch/version.py",
               "__version__ = '9.9.9+fake'\ngit_version = 'abcdef0123456789abcdef'\n", mk,
               sizeof mk);
    write_file("fake/torch/share/cmake/Torch/TorchConfig.cmake",
               "message(FATAL_ERROR \"these headers do not build the shim\")\n", mk, sizeof mk);
    snprintf(args, sizeof args, "repro 'relu in=[3]' --libtorch %s/fake/torch/lib", tmpdir);
    assert_int_equal(cc_t_run(env, args, out, sizeof out), 125);
    const char *last = strstr(out, "capcheck: the ATen shim does not build against the libtorch in");
    assert_non_null(last);
    assert_int_equal(cc_t_count(last, "\n"), 1);
    snprintf(dir, sizeof dir, "%s/cache/capcheck/aten-9.9.9+fake-abcdef012345/build.log", tmpdir);
    char *log = cc_t_slurp(dir, NULL);
    assert_non_null(log);
    expect_in(log, "these headers do not build the shim");
    free(log);
#if CAPCHECK_HAVE_ATEN
    /* the shim for the venv's torch, already cached: loaded from the cache, named */
    char folder[4096], shim[4096], msg[512];
    setenv("XDG_CACHE_HOME", tmpdir, 1);
    snprintf(dir, sizeof dir, "%s", CAPCHECK_TORCH_LIB);
    int paths = cc_aten_shim_paths(dir, folder, sizeof folder, shim, sizeof shim, msg, sizeof msg);
    unsetenv("XDG_CACHE_HOME");
    if (paths)
        fail_msg("%s", msg);
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "mkdir -p '%.2000s' && cp \"$(dirname '" CAPCHECK_BIN
                              "')/libcapcheck_aten.so\" '%.2000s' && printf 'capcheck %%s %%s\\n' "
                              "'%s' '%s' > '%.2000s/built-by'",
             folder, shim, CAPCHECK_GIT_COMMIT, CAPCHECK_SOURCE_DIR, folder);
    assert_int_equal(system(cmd), 0);
    snprintf(env, sizeof env, "XDG_CACHE_HOME=%s LD_DEBUG=files ", tmpdir);
    write_file("lt.cases", "relu in=[3] seed=1\n", mk, sizeof mk);
    snprintf(args, sizeof args, "run %.1000s --libtorch %s --out %s/lt -j 1", mk,
             CAPCHECK_TORCH_LIB, tmpdir);
    static char big[1 << 20];
    assert_int_equal(cc_t_run(env, args, big, sizeof big), 0);
    if (!strstr(big, shim))
        fail_msg("the cached shim %s was not loaded", shim);
    expect_in(big, "1 passed");
    snprintf(dir, sizeof dir, "%s/lt/report.json", tmpdir);
    char *rep = cc_t_slurp(dir, NULL);
    assert_non_null(rep);
    char real[4096], want[4200];
    assert_non_null(realpath(CAPCHECK_TORCH_LIB, real));
    snprintf(want, sizeof want, "; libtorch_dir %s", real);
    expect_in(rep, want);
    snprintf(want, sizeof want, "CAPCHECK_LIBTORCH=%s", real);
    expect_in(rep, want); /* in "repro": every repro line of the run carries it */
    free(rep);
#endif
}

/* Messages that name the real problem (each once named the wrong one). */
static void test_messages_name_the_real_problem(void **state)
{
    (void)state;
    char out[8192], args[1024], path[512];
    /* count= is a generator key: valid in a file, not in the one line repro takes */
    assert_int_equal(cc_t_run(NULL, "repro 'relu count=3' --provider reference", out, sizeof out),
                     2);
    assert_non_null(strstr(out, "case line:1:6: 'count' is for generator lines in case files; "
                                "one case line (repro, shrink) gives its shapes with in=[...]"));
    assert_null(strstr(out, "unknown key"));
    /* a rank-9 shape is over the rank limit, not over the inputs' */
    assert_int_equal(cc_t_run(NULL, "repro 'relu in=[1,1,1,1,1,1,1,1,1]' --provider reference",
                              out, sizeof out),
                     2);
    assert_non_null(strstr(out, "shape list '[1,1,1,1,1,1,1,1,1]': input 1 has 9 dimensions; a "
                                "tensor has at most 8"));
    assert_null(strstr(out, "inputs"));
    assert_int_equal(cc_t_run(NULL, "repro 'concat in=[1],[1],[1],[1],[1],[1],[1],[1],[1]' "
                                    "--provider reference",
                              out, sizeof out),
                     2);
    assert_non_null(strstr(out, "it gives 9 shapes; an op takes at most 8 inputs"));
    /* a file an editor saved with a UTF-8 byte-order mark */
    write_file("bom.cases", "\xef\xbb\xbfrelu in=[3] seed=1\nrelu in=[2] seed=2\n", path,
               sizeof path);
    snprintf(args, sizeof args, "run %s --provider reference --out %s/bom", path, tmpdir);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    assert_non_null(strstr(out, "2 cases on reference"));
    snprintf(args, sizeof args, "list cases %s", path);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    assert_int_equal(strncmp(out, "relu dtype=f32 device=cpu in=[3] ", 33), 0);
    /* validate given a run folder reads its report.json; a folder without one is said so */
    snprintf(args, sizeof args, "validate %s/bom", tmpdir);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    char want[700];
    snprintf(want, sizeof want, "capcheck validate: %s/bom/report.json conforms to ", tmpdir);
    assert_non_null(strstr(out, want));
    snprintf(path, sizeof path, "%s/empty", tmpdir);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(args, sizeof args, "validate %s", path);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    snprintf(want, sizeof want, "capcheck validate: %s is a folder, not a JSON file, and holds no "
                                "report.json", path);
    assert_non_null(strstr(out, want));
    assert_null(strstr(out, "is not JSON"));
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/capcheck-cli-XXXXXX");
    if (!mkdtemp(tmpdir))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_input_is_one_sentence_and_exit_2),
        cmocka_unit_test(test_run_writes_results_and_reports),
        cmocka_unit_test(test_repro_reruns_one_line),
        cmocka_unit_test(test_list_ops_names_the_vocabulary),
        cmocka_unit_test(test_list_cases_prints_what_run_runs),
        cmocka_unit_test(test_bench_prints_the_loops_and_the_ratio),
        cmocka_unit_test(test_only_aten_runs_load_the_shim),
        cmocka_unit_test(test_only_cuda_runs_load_the_cuda_providers),
        cmocka_unit_test(test_ref_options),
        cmocka_unit_test(test_libtorch_option),
        cmocka_unit_test(test_messages_name_the_real_problem),
    };
    int rc = cmocka_run_group_tests_name("cli", tests, NULL, NULL);
    if (cc_t_remove_dir(tmpdir) != 0)
        rc = rc ? rc : 1;
    return rc;
}
