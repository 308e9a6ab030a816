/* Provider plugins: the loader refuses what is not a plugin of this ABI with one sentence, the
 * CLI turns that into exit code 2, and the example plugin passes its ops and answers
 * unsupported for the rest. */
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

#include "harness/case/case.h"
#include "harness/run/plugin.h"
#include "harness/run/runner.h"
#include "test_util.h"

static void expect_refusal(const char *path, const char *what)
{
    char msg[1024] = "";
    cc_plugin *pl = cc_plugin_open(path, msg, sizeof msg);
    assert_null(pl);
    printf("%s\n", msg);
    assert_non_null(strstr(msg, what));
    assert_null(strchr(msg, '\n')); /* one sentence, one line */
}

static void test_refusals(void **state)
{
    (void)state;
    expect_refusal(CAPCHECK_PLUGIN_DIR "/does_not_exist.so", "No such file");
    expect_refusal("does_not_exist.so", "No such file"); /* a bare name is ./name */
    expect_refusal(CAPCHECK_PLUGIN_DIR, "not a regular file");
    expect_refusal(CAPCHECK_SOURCE_DIR "/CMakeLists.txt", "cannot load");
    expect_refusal(CAPCHECK_PLUGIN_DIR "/no_entry.so", "does not export capcheck_provider_v1");
    expect_refusal(CAPCHECK_PLUGIN_DIR "/bad_abi.so", "ABI version 99");
    expect_refusal("", "needs the path");
}

static void test_example_plugin(void **state)
{
    (void)state;
    char msg[1024] = "";
    cc_plugin *pl = cc_plugin_open(CAPCHECK_PLUGIN_DIR "/example_plugin.so", msg, sizeof msg);
    if (!pl)
        fail_msg("%s", msg);
    const cc_provider *p = cc_plugin_provider(pl);
    assert_string_equal(p->name, "example");
    assert_int_equal(p->abi_version, CC_PROVIDER_ABI_VERSION);
    assert_int_equal(p->init(p->ctx, CC_CPU, msg, sizeof msg), CC_OK);
    assert_int_equal(p->init(p->ctx, CC_CUDA, msg, sizeof msg), CC_UNSUPPORTED);

    /* its ops pass in every layout, both dtypes, forward and VJP */
    cc_case_list l = {0};
    cc_case_defaults def = {CC_CPU, 7};
    cc_parse_error err;
    assert_int_equal(
        cc_cases_parse_text("add count=8 dtype=f32,f64 layout=contig,transpose,stride2,bcast "
                            "zero=1\nrelu count=8 dtype=f32,f64 "
                            "layout=contig,transpose,stride2,bcast zero=1\n",
                            "example", &def, &l, &err),
        0);
    for (size_t i = 0; i < l.n; i++) {
        cc_result r;
        cc_run_case(p, &l.v[i], &r);
        if (r.status != CC_RES_PASS)
            fail_msg("%s: %s: %s", r.line, cc_result_status_name(r.status), r.message);
        assert_true(r.checked_fwd && r.checked_vjp);
    }
    cc_case_list_free(&l);

    cc_result r;
    cc_t_run_line(p, "exp dtype=f32 in=[3] seed=1", &r);
    assert_int_equal(r.status, CC_RES_UNSUPPORTED);
    cc_t_run_line(p, "add dtype=f16 in=[3],[3] seed=1", &r);
    assert_int_equal(r.status, CC_RES_UNSUPPORTED);
    cc_plugin_close(pl);
}

#ifdef CAPCHECK_BIN
static int cli(const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s > /dev/null 2>&1", CAPCHECK_BIN, args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli_exit_codes(void **state)
{
    (void)state;
    char dir[] = "/tmp/capcheck_plugin_XXXXXX", args[1024];
    assert_non_null(mkdtemp(dir));
    /* a plugin that does not load: nothing could be judged (125, git bisect's "skip") */
    snprintf(args, sizeof args, "run --provider-lib /nonexistent.so --out %s/t", dir);
    assert_int_equal(cli(args), 125);
    assert_int_equal(cli("run --provider-lib " CAPCHECK_PLUGIN_DIR "/bad_abi.so"), 125);
    assert_int_equal(cli("repro 'add dtype=f32 in=[2],[2]' --provider-lib " CAPCHECK_PLUGIN_DIR
                         "/no_entry.so"),
                     125);
    assert_int_equal(cli("repro 'add dtype=f32 in=[2,3],[2,3] layout=transpose seed=3' "
                         "--provider-lib " CAPCHECK_PLUGIN_DIR "/example_plugin.so"),
                     0);
    assert_int_equal(cli("repro 'exp dtype=f32 in=[2] seed=3' --provider-lib " CAPCHECK_PLUGIN_DIR
                         "/example_plugin.so"),
                     125); /* unsupported is not a pass: nothing could be judged */
    /* the example implements f32/f64 only: a run over those passes */
    char path[128];
    snprintf(path, sizeof path, "%s/relu.cases", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("relu count=4 dtype=f32,f64 layout=contig,transpose,stride2,bcast zero=1\n", f);
    assert_int_equal(fclose(f), 0);
    snprintf(args, sizeof args,
             "run %s --out %s/t --provider-lib " CAPCHECK_PLUGIN_DIR "/example_plugin.so", path,
             dir);
    assert_int_equal(cli(args), 0);
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    assert_int_equal(system(args), 0);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_example_plugin),
#ifdef CAPCHECK_BIN
        cmocka_unit_test(test_cli_exit_codes),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
