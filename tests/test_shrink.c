/* capcheck shrink: planted failures (the mutants plugin) on large cases shrink to a few
 * elements, a crash shrinks as a crash, a passing case is refused, and the Python reproducer of
 * a case (harness/tools/reproducer.h) is written (and, where the project's .venv has torch,
 * runs and finds ATen within capcheck's bounds, exit 0). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/case/case.h"
#include "harness/run/plugin.h"
#include "harness/tools/reproducer.h"
#include "harness/tools/shrink.h"
#include "skip_util.h"
#include "test_util.h"

#define MUTANTS_LIB CAPCHECK_PLUGIN_DIR "/mutants.so"
#define VENV_PYTHON CAPCHECK_SOURCE_DIR "/.venv/bin/python"

static int setup(void **state)
{
    char msg[512];
    cc_plugin *pl = cc_plugin_open(MUTANTS_LIB, msg, sizeof msg);
    if (!pl) {
        fprintf(stderr, "%s\n", msg);
        return -1;
    }
    *state = pl;
    return 0;
}

static int teardown(void **state)
{
    cc_plugin_close(*state);
    unsetenv("CAPCHECK_MUTANT");
    return 0;
}

static cc_shrink_result shrink(void **state, const char *mutant, const char *line)
{
    setenv("CAPCHECK_MUTANT", mutant, 1);
    const cc_provider *p = cc_plugin_provider(*state);
    char msg[512] = "";
    assert_int_equal(p->init(p->ctx, CC_CPU, msg, sizeof msg), CC_OK);
    cc_case c = cc_t_parse_case(line);
    cc_shrink_result r;
    cc_shrink_opts o = {0};
    if (cc_shrink(p, &c, &o, &r, msg, sizeof msg))
        fail_msg("%s", msg);
    printf("%s: %s\n  -> %s (%lld input elements, %d runs)\n", mutant, line, r.last.line,
           (long long)cc_case_input_elements(&r.minimal), r.runs);
    assert_int_equal(r.last.status, r.original.status);
    assert_true(cc_case_input_elements(&r.minimal) <= cc_case_input_elements(&c));
    return r;
}

/* Run a reproducer with the project's Python; -1 when there is none. */
static int run_python(const char *path)
{
    if (access(VENV_PYTHON, X_OK) != 0) {
        cc_t_skip("no %s (scripts/setup makes it): the torch reproducer is not run", VENV_PYTHON);
        return -1;
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' '%s' > '%s.out' 2>&1", VENV_PYTHON, path, path);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
}

static void write_script(const cc_case *c, const cc_result *r, const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    char msg[256] = "";
    cc_reproducer_info info = {.python = VENV_PYTHON, .capcheck_said = r ? r->message : NULL};
    int rc = cc_reproducer_write(c, NULL, CC_ACC_STRICT, &info, f, msg, sizeof msg);
    fclose(f);
    if (rc)
        fail_msg("%s", msg);
}

/* A fresh folder for the scripts of one test (removed by rm_dir). */
static void make_dir(char *dir, size_t n)
{
    snprintf(dir, n, "/tmp/capcheck_shrink_XXXXXX");
    assert_non_null(mkdtemp(dir));
}

static void rm_dir(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_matmul_drop_last_k(void **state)
{
    cc_shrink_result r =
        shrink(state, "matmul_drop_last_k", "matmul dtype=f32 in=[64,128],[128,32] seed=15");
    assert_int_equal(r.last.status, CC_RES_FAIL);
    assert_true(cc_case_input_elements(&r.minimal) <= 8);
    assert_int_equal(r.minimal.check, CC_CHECK_FWD); /* the forward fails: check narrowed */

    char dir[64], path[96];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/repro.py", dir);
    write_script(&r.minimal, &r.last, path);
    int rc = run_python(path);
    if (rc >= 0)
        assert_int_equal(rc, 0); /* the bug is the plugin's: ATen is within capcheck's bounds */
    rm_dir(dir);
}

static void test_softmax_axis_transposed(void **state)
{
    cc_shrink_result r = shrink(state, "softmax_axis",
                                "softmax dtype=f32 in=[64,128] axis=1 layout=transpose seed=3");
    assert_int_equal(r.last.status, CC_RES_FAIL);
    assert_true(cc_case_input_elements(&r.minimal) <= 8);
    assert_int_equal(r.minimal.layout, CC_LAYOUT_CONTIG);
    assert_int_equal(r.minimal.shape[0].rank, 2); /* a wrong axis needs two axes */
}

/* A bug that only per-input layouts show keeps the one layout it needs: the first input goes
 * dense, the second keeps its sliced view; explicit strides follow the shrinking shapes. */
static void test_per_input_layouts_shrink_one_input_at_a_time(void **state)
{
    cc_shrink_result r = shrink(state, "first_input_strides",
                                "add dtype=f32 in=[5,7],[5,7] layout=[1,6]+2/sliced seed=3");
    assert_int_equal(r.last.status, CC_RES_FAIL);
    assert_true(cc_case_input_elements(&r.minimal) <= 4);
    assert_int_equal(r.minimal.layout, CC_LAYOUT_MIXED);
    assert_int_equal(r.minimal.in_layout[0].kind, CC_LAYOUT_CONTIG);
    assert_int_equal(r.minimal.in_layout[1].kind, CC_LAYOUT_SLICED);
    r = shrink(state, "first_input_strides",
               "mul dtype=f64 in=[4,6],[4,6] layout=contig/[1,8]+3 seed=5");
    assert_int_equal(r.last.status, CC_RES_FAIL);
    assert_int_equal(r.minimal.layout, CC_LAYOUT_MIXED);
    assert_int_equal(r.minimal.in_layout[1].kind, CC_LAYOUT_STRIDED);
    char why[160];
    assert_null(cc_case_layout_problem(&r.minimal, why, sizeof why));
}

static void test_vjp_failure_keeps_the_gradient(void **state)
{
    cc_shrink_result r =
        shrink(state, "linear_no_bias_grad", "linear dtype=f32 in=[2,3,64],[16,64],[16] seed=18");
    assert_int_equal(r.last.status, CC_RES_FAIL);
    assert_true(cc_case_input_elements(&r.minimal) <= 8);
    assert_string_equal(r.last.worst_output, "grad:b");
    assert_int_equal(r.minimal.check, CC_CHECK_VJP);
}

static void test_crash_shrinks_as_a_crash(void **state)
{
    cc_shrink_result r = shrink(state, "crash_on_empty", "add dtype=f64 in=[0,7],[0,7] seed=9");
    assert_int_equal(r.original.status, CC_RES_CRASH);
    assert_int_equal(r.last.status, CC_RES_CRASH);
    assert_int_equal(r.minimal.shape[0].rank, 1);
}

static void test_passing_case_is_refused(void **state)
{
    unsetenv("CAPCHECK_MUTANT");
    const cc_provider *p = cc_plugin_provider(*state);
    cc_case c = cc_t_parse_case("matmul dtype=f32 in=[4,5],[5,3] seed=1");
    cc_shrink_result r;
    char msg[512] = "";
    assert_int_equal(cc_shrink(p, &c, NULL, &r, msg, sizeof msg), 1);
    assert_non_null(strstr(msg, "passes"));
}

/* Strided layouts: the script rebuilds the storage (NaN gaps, stride-0 axis, swapped
 * strides) and ATen on it agrees with float64, forward and VJP. */
static void test_script_layouts(void **state)
{
    (void)state;
    const char *lines[] = {
        "softmax dtype=f32 in=[3,4] axis=0 layout=stride2 seed=4",
        "matmul dtype=f32 in=[2,3,4],[2,4,2] layout=bcast seed=5",
        "layerNorm dtype=f64 in=[3,5],[5],[5] axis=1 layout=transpose seed=6",
        "add dtype=f32 in=[3,4],[3,4] layout=sliced/[1,5]+2 seed=7",
        "conv dtype=f64 in=[2,4,5],[3,2,2,2],[3] kernel=[2,2] stride=[1,1] pad=[0,0] dil=[1,1] "
        "groups=1 layout=chlast/[12,1,6,3]+1/contig seed=8",
    };
    const int n_lines = (int)(sizeof lines / sizeof lines[0]);
    char dir[64];
    make_dir(dir, sizeof dir);
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        cc_case c = cc_t_parse_case(lines[i]);
        char one[96];
        snprintf(one, sizeof one, "%s/repro%zu.py", dir, i);
        write_script(&c, NULL, one);
        FILE *g = fopen(one, "r");
        assert_non_null(g);
        char buf[4096];
        size_t n = fread(buf, 1, sizeof buf - 1, g);
        buf[n] = 0;
        fclose(g);
        assert_non_null(strstr(buf, "import torch"));
        char canon[CC_CASE_LINE_MAX];
        cc_case_print(&c, canon, sizeof canon);
        assert_non_null(strstr(buf, canon));
        if (c.layout == CC_LAYOUT_STRIDE2 || c.layout == CC_LAYOUT_MIXED) {
            FILE *h = fopen(one, "r");
            char *all = malloc(1 << 20);
            size_t m = fread(all, 1, (1 << 20) - 1, h);
            all[m] = 0;
            fclose(h);
            assert_non_null(strstr(all, "NaN")); /* the gaps of the strided buffer */
            free(all);
        }
    }
    if (access(VENV_PYTHON, X_OK) == 0) { /* one interpreter for all: torch loads once */
        char cmd[1024];
        snprintf(cmd, sizeof cmd,
                 "'%s' -c \"import runpy,sys\nfor i in range(%d):\n"
                 "    try: runpy.run_path('%s/repro%%d.py' %% i, run_name='__main__')\n"
                 "    except SystemExit as e:\n"
                 "        if e.code: sys.exit(e.code)\n\" > '%s/out.txt' 2>&1 || "
                 "{ cat '%s/out.txt'; exit 1; }",
                 VENV_PYTHON, n_lines, dir, dir, dir);
        int st = system(cmd);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    } else {
        cc_t_skip("no %s (scripts/setup makes it): the torch reproducers are not run",
                  VENV_PYTHON);
    }
    rm_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_drop_last_k),
        cmocka_unit_test(test_softmax_axis_transposed),
        cmocka_unit_test(test_per_input_layouts_shrink_one_input_at_a_time),
        cmocka_unit_test(test_vjp_failure_keeps_the_gradient),
        cmocka_unit_test(test_crash_shrinks_as_a_crash),
        cmocka_unit_test(test_passing_case_is_refused),
        cmocka_unit_test(test_script_layouts),
    };
    return cc_t_exit_code(cmocka_run_group_tests(tests, setup, teardown));
}
