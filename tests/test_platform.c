/* Platforms and platform-scoped expectations, without libtorch: the key derivation from stated
 * facts and CPU flags (every tier, the ATen mismatch suffix, CUDA), oneDNN's effective ISA under
 * a cap, the dispatch levels (parsing, support, environment caps), the "#! seen" directive
 * grammar and its errors, and the expectation logic fed results recorded on other platforms:
 * pass elsewhere -> "did not reproduce", fail where seen -> reproduced, a crash elsewhere is
 * still a crash. Then `capcheck run --expect` end to end on the reference provider. */
#include "cli_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/report/expect.h"
#include "harness/run/platform.h"
#include "harness/run/runner.h"
#include "skip_util.h"

/* CPU flags of real machines, as cc_cpu_flags lists them. */
#define HASWELL "sse4_1 avx avx2 fma f16c"
#define SKYLAKE_SP HASWELL " avx512f avx512dq avx512bw avx512vl"
#define ZEN4 SKYLAKE_SP " avx512_vnni avx512_bf16"
#define SAPPHIRE_RAPIDS                                                                       \
    HASWELL " avx_vnni avx512f avx512dq avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16 "   \
            "amx_tile amx_int8 amx_bf16"

#define ATEN(cap) "libtorch 2.15.0; threads 1; cpu_capability " cap "; onednn 3.13.3; blas mkl 2024.2"

static void key_of(const char *desc, cc_device dev, const char *flags, const char *cap,
                   char *key)
{
    cc_platform p;
    cc_platform_derive(desc, dev, flags, cap, "", "native", &p);
    strcpy(key, p.key);
}

static void test_keys_from_facts(void **state)
{
    (void)state;
    char k[CC_PLATFORM_KEY_MAX];
    key_of(ATEN("AVX512"), CC_CPU, SAPPHIRE_RAPIDS, NULL, k);
    assert_string_equal(k, "cpu:amx");
    key_of(ATEN("AVX512"), CC_CPU, ZEN4, NULL, k);
    assert_string_equal(k, "cpu:avx512-bf16");
    key_of(ATEN("AVX512"), CC_CPU, SKYLAKE_SP, NULL, k);
    assert_string_equal(k, "cpu:avx512");
    key_of(ATEN("AVX2"), CC_CPU, HASWELL, NULL, k);
    assert_string_equal(k, "cpu:avx2");
    /* caps: the effective dispatch, not the hardware */
    key_of(ATEN("AVX512"), CC_CPU, SAPPHIRE_RAPIDS, "AVX512_CORE", k);
    assert_string_equal(k, "cpu:avx512");
    key_of(ATEN("AVX512"), CC_CPU, SAPPHIRE_RAPIDS, "avx512_core_fp16", k); /* the alias */
    assert_string_equal(k, "cpu:avx512-fp16");
    key_of(ATEN("AVX512"), CC_CPU, SAPPHIRE_RAPIDS, "AVX512_CORE_BF16", k);
    assert_string_equal(k, "cpu:avx512-bf16");
    key_of(ATEN("DEFAULT"), CC_CPU, SAPPHIRE_RAPIDS, "SSE41", k);
    assert_string_equal(k, "cpu:default");
    /* ATen's capability apart from oneDNN's tier is named */
    key_of(ATEN("AVX512"), CC_CPU, SAPPHIRE_RAPIDS, "AVX2", k);
    assert_string_equal(k, "cpu:avx2+aten-avx512");
    key_of(ATEN("DEFAULT"), CC_CPU, SAPPHIRE_RAPIDS, NULL, k);
    assert_string_equal(k, "cpu:amx+aten-default");
    /* a cap oneDNN does not know caps nothing (oneDNN ignores it too) */
    key_of(ATEN("AVX512"), CC_CPU, SAPPHIRE_RAPIDS, "PENTIUM", k);
    assert_string_equal(k, "cpu:amx");
    /* ATen's intra-op threads: more than one is another path, named; one keeps the bare key */
    key_of("libtorch 2.15.0; threads 2; cpu_capability AVX512; onednn 3.13.3", CC_CPU, ZEN4,
           NULL, k);
    assert_string_equal(k, "cpu:avx512-bf16+t2");
    key_of("libtorch 2.15.0; threads 16; cpu_capability DEFAULT; onednn 3.13.3", CC_CPU,
           SAPPHIRE_RAPIDS, NULL, k);
    assert_string_equal(k, "cpu:amx+aten-default+t16");
    key_of("OpenBLAS 0.3.28; threads 4; device cpu", CC_CPU, HASWELL, NULL, k);
    assert_string_equal(k, "cpu:avx2+t4");
    /* and read back from the key (a reproducer runs ATen at the count its case's key names) */
    assert_int_equal(cc_platform_key_threads("cpu:amx+aten-default+t16"), 16);
    assert_int_equal(cc_platform_key_threads("cpu:avx512-bf16+t2"), 2);
    assert_int_equal(cc_platform_key_threads("cpu:amx+aten-default"), 1);
    assert_int_equal(cc_platform_key_threads("cpu:avx512-bf16"), 1);
    assert_int_equal(cc_platform_key_threads("cpu:x+t2x"), 1);
    assert_int_equal(cc_platform_key_threads(""), 1);
    assert_int_equal(cc_platform_key_threads(NULL), 1);
    key_of("mychip 1.0; threads 8; platform npu:mychip-v2", CC_CPU, ZEN4, NULL, k);
    assert_string_equal(k, "npu:mychip-v2"); /* a stated key is the provider's own */
    key_of("libtorch 2.15.0; threads 4; gpu NVIDIA H200 (sm_90)", CC_CUDA, ZEN4, NULL, k);
    assert_string_equal(k, "cuda:sm90"); /* host threads select no CUDA kernel */
    /* a provider without ATen: the tier alone */
    key_of("reference float64", CC_CPU, ZEN4, NULL, k);
    assert_string_equal(k, "cpu:avx512-bf16");
    /* a provider that states its platform */
    key_of("mychip 1.0; platform npu:mychip-v2", CC_CPU, ZEN4, NULL, k);
    assert_string_equal(k, "npu:mychip-v2");
    /* CUDA: the compute capability the provider states */
    key_of("cuda 13.2; driver 580.1; cudnn 9.26.0; gpu NVIDIA H200 (sm_90)", CC_CUDA, ZEN4, NULL,
           k);
    assert_string_equal(k, "cuda:sm90");
    key_of("cublas 13.4.1; cuda 13.2; driver none; gpu none (no CUDA device)", CC_CUDA, "", NULL,
           k);
    assert_string_equal(k, "cuda:unknown");
}

static void test_facts_and_isa(void **state)
{
    (void)state;
    cc_platform p;
    cc_platform_derive(ATEN("AVX512"), CC_CPU, SAPPHIRE_RAPIDS, "AVX512_CORE_BF16",
                       "ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16", "avx512-bf16", &p);
    assert_string_equal(p.aten_cpu_capability, "AVX512");
    assert_string_equal(p.onednn_version, "3.13.3");
    assert_string_equal(p.onednn_isa, "avx512_core_bf16");
    assert_string_equal(p.blas, "mkl 2024.2");
    assert_string_equal(p.level, "avx512-bf16");
    assert_string_equal(p.overrides, "ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16");
    assert_string_equal(p.threads, "1");
    char line[1024];
    cc_platform_summary(&p, line, sizeof line);
    assert_non_null(strstr(line, "oneDNN 3.13.3 avx512_core_bf16"));
    assert_non_null(strstr(line, "ATen AVX512 at 1 thread,"));
    /* what a provider says whatever the pass: no dispatch level, no thread count */
    cc_describe_without_platform(ATEN("AVX512"), line, sizeof line);
    assert_string_equal(line, "libtorch 2.15.0; onednn 3.13.3; blas mkl 2024.2");
    cc_platform_derive("cuda 13.2; driver 580.1; cudnn 9.26.0; cublas 13.4.1; gpu NVIDIA H200 "
                       "(sm_90)",
                       CC_CUDA, "", NULL, "", "", &p);
    assert_string_equal(p.gpu, "NVIDIA H200 (sm_90)");
    assert_string_equal(p.cudnn, "9.26.0");
    assert_string_equal(p.cublas, "13.4.1");
    assert_string_equal(p.driver, "580.1");
    char isa[32];
    /* within the cap is a subset of oneDNN's feature bits: avx2_vnni is not within avx512_core */
    cc_onednn_effective_isa(HASWELL " avx_vnni", "AVX512_CORE", isa, sizeof isa);
    assert_string_equal(isa, "avx2");
    cc_onednn_effective_isa(HASWELL " avx_vnni", NULL, isa, sizeof isa);
    assert_string_equal(isa, "avx2_vnni");
    cc_onednn_effective_isa(SAPPHIRE_RAPIDS, "avx10_1_512_AMX", isa, sizeof isa);
    assert_string_equal(isa, "avx10_1_512_amx");
    cc_onednn_effective_isa("asimd fphp sve", NULL, isa, sizeof isa);
    assert_string_equal(isa, "");
    /* flags from /proc/cpuinfo text: only the kernel-selecting ones, in a fixed order */
    char flags[256];
    cc_cpu_flags_from_text("processor\t: 0\nflags\t\t: fpu avx512f sse4_1 avx2 amx_tile avx "
                           "pse\nbugs\t: x\n",
                           flags, sizeof flags);
    assert_string_equal(flags, "sse4_1 avx avx2 avx512f amx_tile");
    cc_cpu_flags_from_text("Features\t: fp asimd sve bf16\n", flags, sizeof flags);
    assert_string_equal(flags, "asimd bf16 sve");
}

static void test_levels(void **state)
{
    (void)state;
    unsetenv("ONEDNN_MAX_CPU_ISA");
    unsetenv("DNNL_MAX_CPU_ISA");
    unsetenv("ATEN_CPU_CAPABILITY");
    int lv[CC_MAX_LEVELS];
    char msg[512];
    /* all: every supported level; native only where no level gives its tier */
    int n = cc_levels_parse("all", SAPPHIRE_RAPIDS, lv, CC_MAX_LEVELS, msg, sizeof msg);
    const char *want_spr[] = {"amx", "avx512-fp16", "avx512-bf16", "avx512", "avx2", "default"};
    assert_int_equal(n, 6);
    for (int i = 0; i < n; i++)
        assert_string_equal(cc_level_name(lv[i]), want_spr[i]);
    n = cc_levels_parse("all", HASWELL, lv, CC_MAX_LEVELS, msg, sizeof msg);
    assert_int_equal(n, 2);
    assert_string_equal(cc_level_name(lv[0]), "avx2");
    n = cc_levels_parse("all", "asimd sve", lv, CC_MAX_LEVELS, msg, sizeof msg);
    assert_int_equal(n, 1);
    assert_string_equal(cc_level_name(lv[0]), "native");
    n = cc_levels_parse("avx2,native", ZEN4, lv, CC_MAX_LEVELS, msg, sizeof msg);
    assert_int_equal(n, 2);
    /* refusals, one sentence each */
    assert_int_equal(cc_levels_parse("amx", ZEN4, lv, CC_MAX_LEVELS, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "cannot run level amx"));
    assert_int_equal(cc_levels_parse("avx3", ZEN4, lv, CC_MAX_LEVELS, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "unknown level 'avx3'"));
    assert_int_equal(cc_levels_parse("avx2,avx2", ZEN4, lv, CC_MAX_LEVELS, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "twice"));
    /* a lesser machine simulated by the environment keeps to its levels */
    setenv("ONEDNN_MAX_CPU_ISA", "AVX2", 1);
    n = cc_levels_parse("all", SAPPHIRE_RAPIDS, lv, CC_MAX_LEVELS, msg, sizeof msg);
    assert_int_equal(n, 2);
    assert_string_equal(cc_level_name(lv[0]), "avx2");
    assert_int_equal(cc_levels_parse("avx512", SAPPHIRE_RAPIDS, lv, CC_MAX_LEVELS, msg,
                                     sizeof msg),
                     -1);
    assert_non_null(strstr(msg, "caps oneDNN at AVX2"));
    unsetenv("ONEDNN_MAX_CPU_ISA");
    setenv("ATEN_CPU_CAPABILITY", "default", 1);
    n = cc_levels_parse("all", SAPPHIRE_RAPIDS, lv, CC_MAX_LEVELS, msg, sizeof msg);
    assert_int_equal(n, 2); /* native (cpu:amx+aten-default) and default */
    assert_string_equal(cc_level_name(lv[0]), "native");
    unsetenv("ATEN_CPU_CAPABILITY");
    /* a level's settings reach the environment */
    cc_level_apply(cc_level_find("avx2"));
    assert_string_equal(getenv("ATEN_CPU_CAPABILITY"), "avx2");
    assert_string_equal(getenv("ONEDNN_MAX_CPU_ISA"), "AVX2");
    unsetenv("ATEN_CPU_CAPABILITY");
    unsetenv("ONEDNN_MAX_CPU_ISA");
    unsetenv("MKL_ENABLE_INSTRUCTIONS");
}

static void test_aten_threads(void **state)
{
    (void)state;
    int t[CC_MAX_ATEN_THREADS];
    char msg[256];
    /* all: the serial path and the parallel one at full width, at least 2 (oversubscribed) */
    assert_int_equal(cc_aten_threads_parse("all", 16, t, CC_MAX_ATEN_THREADS, msg, sizeof msg), 2);
    assert_true(t[0] == 1 && t[1] == 16);
    assert_int_equal(cc_aten_threads_parse("all", 1, t, CC_MAX_ATEN_THREADS, msg, sizeof msg), 2);
    assert_true(t[0] == 1 && t[1] == 2);
    assert_int_equal(cc_aten_threads_parse("4,1", 2, t, CC_MAX_ATEN_THREADS, msg, sizeof msg), 2);
    assert_true(t[0] == 4 && t[1] == 1);
    static const char *const bad[][2] = {{"0", "not '0'"},       {"257", "not '257'"},
                                         {"2,", "not ''"},       {"x", "not 'x'"},
                                         {"2,3,2", "names 2 twice"}, {"1,2,3,4,5", "at most 4"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        assert_int_equal(cc_aten_threads_parse(bad[k][0], 2, t, CC_MAX_ATEN_THREADS, msg,
                                               sizeof msg),
                         -1);
        if (!strstr(msg, bad[k][1]))
            fail_msg("--aten-threads %s: '%s' lacks '%s'", bad[k][0], msg, bad[k][1]);
    }
    unsetenv(CC_ATEN_THREADS_ENV);
    cc_aten_threads_apply(0); /* none asked: the provider's own count */
    assert_null(getenv(CC_ATEN_THREADS_ENV));
    cc_aten_threads_apply(3);
    assert_string_equal(getenv(CC_ATEN_THREADS_ENV), "3");
    unsetenv(CC_ATEN_THREADS_ENV);
}

static void test_platforms_json_round_trip(void **state)
{
    (void)state;
    cc_platform p[2], back[2];
    cc_platform_derive(ATEN("AVX2"), CC_CPU, HASWELL, "AVX2", "ONEDNN_MAX_CPU_ISA=AVX2", "avx2",
                       &p[0]);
    strcpy(p[0].aten_threads, "1"); /* the pass's --aten-threads */
    cc_platform_derive("cuda 13.2; gpu A100 (sm_80); cudnn 9.1", CC_CUDA, "", NULL, "", "",
                       &p[1]);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cc_platforms_write_json(f, p, 2);
    fclose(f);
    char msg[256];
    cc_json *j = cc_json_parse(buf, len, msg, sizeof msg);
    assert_non_null(j);
    int n = 0;
    assert_int_equal(cc_platforms_from_json(j, back, 2, &n, msg, sizeof msg), 0);
    assert_int_equal(n, 2);
    assert_memory_equal(p, back, sizeof p);
    cc_json_free(j);
    free(buf);
}

/* ---- expectations ---------------------------------------------------------------------------- */

static const char REGRESSIONS[] = "# a comment before any directive\n"
                                  "relu dtype=f32 in=[4] seed=1\n"
                                  "#! seen fail on cpu:amx cpu:avx512-fp16\n"
                                  "# the comment explaining it\n"
                                  "conv dtype=bf16 in=[1,3,3],[2,1,2,2],[2] kernel=[2,2] "
                                  "stride=[1,1] pad=[0,0] dil=[1,1] groups=1 seed=1\n"
                                  "\n"
                                  "#! seen crash on cpu:amx\n"
                                  "exp count=3 dtype=f16 size=tiny\n"
                                  "#! seen fail on cpu:amx intermittent\n"
                                  "log dtype=f32 in=[3] seed=2\n"
                                  "#! seen placement-sensitive on cpu:amx\n"
                                  "matmul dtype=f32 in=[3],[3] seed=4\n";

/* REGRESSIONS' expectations (cc_expect_free them). */
static cc_expectations regressions(void)
{
    cc_expectations e = {0};
    cc_case_defaults def = {CC_CPU, 0};
    cc_parse_error err;
    assert_int_equal(cc_expect_parse_text(REGRESSIONS, "r.cases", &def, &e, &err), 0);
    return e;
}

static cc_result result_of(const cc_expectation *e, const char *platform, cc_result_status s)
{
    cc_result r;
    memset(&r, 0, sizeof r);
    snprintf(r.line, sizeof r.line, "%s", e ? e->line : "relu dtype=f32 device=cpu in=[4]");
    snprintf(r.platform, sizeof r.platform, "%s", platform);
    r.status = s;
    return r;
}

static cc_expect_outcome judge(const cc_expectation *e, const char *platform,
                               cc_result_status s, char *msg)
{
    cc_result r = result_of(e, platform, s);
    return cc_expect_judge(e, &r, msg, 1024);
}

static void test_directives(void **state)
{
    (void)state;
    cc_expectations e = regressions();
    assert_int_equal(e.n, 1 + 3 + 1 + 1); /* relu has none; the generator gives 3 */
    assert_int_equal(e.v[0].status, CC_RES_FAIL);
    assert_int_equal(e.v[0].n_keys, 2);
    assert_string_equal(e.v[0].keys[1], "cpu:avx512-fp16");
    assert_string_equal(e.v[0].where, "r.cases:3");
    assert_int_equal(e.v[1].status, CC_RES_CRASH);
    assert_int_equal(e.v[4].intermittent, 1);
    assert_int_equal(e.v[5].status, CC_RES_PASS); /* placement-sensitive: a flagged pass */
    assert_int_equal(e.v[5].placement, 1);
    assert_int_equal(e.v[0].placement, 0);
    /* the canonical line finds its expectation; a line without a directive has none */
    assert_non_null(cc_expect_find(&e, e.v[2].line));
    assert_null(cc_expect_find(&e, "relu dtype=f32 device=cpu in=[4] layout=contig check=both "
                                   "seed=1"));
    cc_expect_free(&e);
    /* malformed directives: one sentence with file and line */
    cc_case_defaults def = {CC_CPU, 0};
    cc_parse_error err;
    static const char *const bad[][2] = {
        {"#! expect fail on cpu:amx\n", "unknown directive 'expect'"},
        {"#! seen pass on cpu:amx\n", "wants a status"},
        {"#! seen fail cpu:amx\n", "wants 'on KEY...'"},
        {"#! seen placement-sensitive cpu:amx\n", "'#! seen placement-sensitive' wants 'on KEY"},
        {"#! seen placement on cpu:amx\n", "nondeterministic or placement-sensitive, not "
                                            "'placement'"},
        {"#! seen fail on\n", "names no platform key"},
        {"#! seen fail on AMX\n", "'AMX' is not a platform key"},
        {"#! seen fail on cpu:amx\nrelu dtype=f99 in=[3]\n", "f99"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&e, 0, sizeof e);
        assert_int_equal(cc_expect_parse_text(bad[i][0], "bad.cases", &def, &e, &err), -1);
        if (!strstr(err.msg, bad[i][1]))
            fail_msg("'%s': got '%s', want '%s'", bad[i][0], err.msg, bad[i][1]);
        assert_true(err.line >= 1);
        cc_expect_free(&e);
    }
}

/* The expectation logic fed deviations recorded for another platform. */
static void test_judging_across_platforms(void **state)
{
    (void)state;
    cc_expectations e = regressions();
    const cc_expectation *dev = &e.v[0], *crash = &e.v[1], *flaky = &e.v[4];
    char msg[1024];
    /* seen here and seen again: expected */
    assert_int_equal(judge(dev, "cpu:amx", CC_RES_FAIL, msg), CC_EXPECT_REPRODUCED);
    assert_int_equal(judge(crash, "cpu:amx", CC_RES_CRASH, msg), CC_EXPECT_REPRODUCED);
    /* a pass on another platform: did not reproduce, never a failure */
    assert_int_equal(judge(dev, "cpu:avx2", CC_RES_PASS, msg), CC_EXPECT_NOT_REPRODUCED);
    assert_non_null(strstr(msg, "did not reproduce on cpu:avx2"));
    assert_non_null(strstr(msg, "r.cases:3"));
    assert_false(cc_expect_is_failure(CC_EXPECT_NOT_REPRODUCED));
    assert_int_equal(judge(crash, "cuda:sm90", CC_RES_PASS, msg), CC_EXPECT_NOT_REPRODUCED);
    /* a pass where it was seen: the kernel changed, a failure */
    assert_int_equal(judge(dev, "cpu:amx", CC_RES_PASS, msg), CC_EXPECT_BROKEN);
    assert_true(cc_expect_is_failure(CC_EXPECT_BROKEN));
    assert_int_equal(judge(crash, "cpu:amx", CC_RES_FAIL, msg), CC_EXPECT_BROKEN);
    /* an unexpected crash elsewhere is still a crash, even of a case seen crashing elsewhere */
    assert_int_equal(judge(dev, "cpu:avx2", CC_RES_CRASH, msg), CC_EXPECT_CRASH);
    assert_int_equal(judge(crash, "cpu:avx2", CC_RES_CRASH, msg), CC_EXPECT_CRASH);
    assert_int_equal(judge(dev, "cpu:avx2", CC_RES_TIMEOUT, msg), CC_EXPECT_CRASH);
    assert_true(cc_expect_is_failure(CC_EXPECT_CRASH));
    /* the same deviation on a platform the directive does not list: news, not a failure */
    assert_int_equal(judge(dev, "cpu:avx512-bf16", CC_RES_FAIL, msg), CC_EXPECT_ALSO_SEEN);
    assert_non_null(strstr(msg, "add cpu:avx512-bf16"));
    assert_false(cc_expect_is_failure(CC_EXPECT_ALSO_SEEN));
    /* anything else elsewhere is unexpected */
    assert_int_equal(judge(dev, "cpu:avx2", CC_RES_ERROR, msg), CC_EXPECT_UNEXPECTED);
    /* intermittent: a pass where seen is no news */
    assert_int_equal(judge(flaky, "cpu:amx", CC_RES_PASS, msg), CC_EXPECT_NOT_THIS_TIME);
    assert_int_equal(judge(flaky, "cpu:amx", CC_RES_FAIL, msg), CC_EXPECT_REPRODUCED);
    /* no expectation: a pass says nothing, anything else is a failure */
    assert_int_equal(judge(NULL, "cpu:amx", CC_RES_PASS, msg), CC_EXPECT_NONE);
    assert_int_equal(judge(NULL, "cpu:amx", CC_RES_FAIL, msg), CC_EXPECT_UNEXPECTED);
    assert_int_equal(judge(NULL, "cpu:amx", CC_RES_CRASH, msg), CC_EXPECT_CRASH);
    cc_expect_free(&e);
}

/* A placement-sensitive result (a pass whose bits followed --repeat's buffer placement) against
 * the directives: it is what `#! seen placement-sensitive` saw, and a pass of a case seen
 * failing; a plain pass or a race where placement-sensitive was seen means the kernel changed. */
static void test_judging_placement_sensitive(void **state)
{
    (void)state;
    cc_expectations e = regressions();
    const cc_expectation *dev = &e.v[0], *flaky = &e.v[4], *placed = &e.v[5];
    char msg[1024];
    cc_result r = result_of(placed, "cpu:amx", CC_RES_PASS);
    r.placement_sensitive = 1;
    assert_int_equal(cc_expect_judge(placed, &r, msg, sizeof msg), CC_EXPECT_REPRODUCED);
    expect_in(msg, "placement-sensitive on cpu:amx, as seen (placement-sensitive on cpu:amx, ");
    snprintf(r.platform, sizeof r.platform, "cpu:avx2");
    assert_int_equal(cc_expect_judge(placed, &r, msg, sizeof msg), CC_EXPECT_ALSO_SEEN);
    assert_false(cc_expect_is_failure(CC_EXPECT_ALSO_SEEN));
    assert_int_equal(cc_expect_judge(NULL, &r, msg, sizeof msg), CC_EXPECT_NONE);
    /* seen failing: a placement-sensitive pass is a pass */
    assert_int_equal(cc_expect_judge(dev, &r, msg, sizeof msg), CC_EXPECT_NOT_REPRODUCED);
    snprintf(r.platform, sizeof r.platform, "cpu:amx");
    assert_int_equal(cc_expect_judge(dev, &r, msg, sizeof msg), CC_EXPECT_BROKEN);
    expect_in(msg, "placement-sensitive on cpu:amx, where it was seen fail on");
    assert_int_equal(cc_expect_judge(flaky, &r, msg, sizeof msg), CC_EXPECT_NOT_THIS_TIME);
    /* where it was seen: same bits at both placements, or a race, is a changed kernel */
    assert_int_equal(judge(placed, "cpu:amx", CC_RES_PASS, msg), CC_EXPECT_BROKEN);
    expect_in(msg, "pass on cpu:amx, where it was seen placement-sensitive on cpu:amx");
    assert_int_equal(judge(placed, "cpu:amx", CC_RES_NONDETERMINISTIC, msg), CC_EXPECT_BROKEN);
    assert_int_equal(judge(placed, "cpu:avx2", CC_RES_PASS, msg), CC_EXPECT_NOT_REPRODUCED);
    assert_int_equal(judge(placed, "cpu:avx2", CC_RES_NONDETERMINISTIC, msg),
                     CC_EXPECT_UNEXPECTED);
    cc_expect_free(&e);
}

/* capcheck run --expect on the reference provider: a deviation recorded for another platform
 * does not reproduce (exit 0, reported); one recorded for this platform that passes is broken
 * (exit 1); a case without a directive that fails is a failure. */
static void test_run_expect_cli(void **state)
{
    (void)state;
    char dir[] = "/tmp/capcheck_expect_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], cmd[1024], out[16384];
    snprintf(path, sizeof path, "%s/other.cases", dir);
    cc_t_write(path, "#! seen fail on cpu:elsewhere\nrelu dtype=f32 in=[5] seed=3\n");
    snprintf(cmd, sizeof cmd, "run %s --provider reference --expect -j 1 --out %s/o1", path, dir);
    int rc = cc_t_run(NULL, cmd, out, sizeof out);
    if (rc != 0)
        fail_msg("exit %d:\n%s", rc, out);
    expect_in(out, "did-not-reproduce: did not reproduce on cpu:");
    expect_in(out, "(seen fail on cpu:elsewhere, ");
    snprintf(path, sizeof path, "%s/o1/report.md", dir);
    char *md = cc_t_slurp(path, NULL);
    assert_non_null(md);
    expect_in(md, "## Expectations");
    expect_in(md, "| did-not-reproduce | cpu:");
    free(md);
    /* the same directive naming this machine's platform: the pass is a broken expectation */
    snprintf(path, sizeof path, "%s/o1/results.jsonl", dir);
    char *rec = cc_t_slurp(path, NULL);
    const char *pl = strstr(rec, "\"platform\":\"");
    assert_non_null(pl);
    char key[64];
    snprintf(key, sizeof key, "%.*s", (int)strcspn(pl + 12, "\""), pl + 12);
    free(rec);
    char text[256];
    snprintf(text, sizeof text, "#! seen fail on %s\nrelu dtype=f32 in=[5] seed=3\n", key);
    snprintf(path, sizeof path, "%s/here.cases", dir);
    cc_t_write(path, text);
    snprintf(cmd, sizeof cmd, "run %s --provider reference --expect -j 1 --out %s/o2", path, dir);
    assert_int_equal(cc_t_run(NULL, cmd, out, sizeof out), 1);
    expect_in(out, "broken: pass on");
    expect_in(out, "broken 1,");
    /* a bad directive is bad input */
    snprintf(path, sizeof path, "%s/bad.cases", dir);
    cc_t_write(path, "#! seen fial on cpu:amx\nrelu dtype=f32 in=[5]\n");
    snprintf(cmd, sizeof cmd, "run %s --provider reference --expect --out %s/o3", path, dir);
    assert_int_equal(cc_t_run(NULL, cmd, out, sizeof out), 2);
    expect_in(out, "bad.cases:1:");
    /* --cpu-capability with the reference: one level, its platform in the results */
    snprintf(path, sizeof path, "%s/other.cases", dir);
    snprintf(cmd, sizeof cmd, "run %s --provider reference --cpu-capability default -j 1 --out %s/o4",
             path, dir);
    assert_int_equal(cc_t_run(NULL, cmd, out, sizeof out), 0);
    expect_in(out, "level default (platform cpu:default)");
    snprintf(cmd, sizeof cmd, "run %s --provider reference --cpu-capability avx9 --out %s/o5",
             path, dir);
    assert_int_equal(cc_t_run(NULL, cmd, out, sizeof out), 2);
    expect_in(out, "unknown level 'avx9'");
    cc_t_remove_dir(dir);
}

/* A run at two levels: one report with rows per platform; cut short and resumed it writes the
 * same report; a resume with other levels is refused. (x86 with AVX2 only: elsewhere native
 * and default may be one platform.) */
static void test_levels_run_and_resume(void **state)
{
    (void)state;
    char flags[256];
    cc_cpu_flags(flags, sizeof flags);
    if (!cc_level_supported(cc_level_find("avx2"), flags)) { /* native then differs from default */
        cc_t_skip("this CPU has no AVX2: its dispatch levels native and default are one "
                  "platform, so a run at two levels is not checked");
        return;
    }
    char dir[] = "/tmp/capcheck_levels_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cases[256], cmd[1024], out[16384], path[512];
    snprintf(cases, sizeof cases, "%s/l.cases", dir);
    cc_t_write(cases, "relu count=4 dtype=f32,f64 size=tiny\nadd dtype=f32 in=[3],[3] seed=1\n");
    snprintf(cmd, sizeof cmd,
             "run %s --provider reference --cpu-capability native,default -j 2 --out %s/a", cases,
             dir);
    int rc = cc_t_run(NULL, cmd, out, sizeof out);
    if (rc)
        fail_msg("exit %d:\n%s", rc, out);
    expect_in(out, "capcheck: level native (platform cpu:");
    expect_in(out, "capcheck: level default (platform cpu:default): 9 cases, 9 passed");
    expect_in(out, "18 cases on reference");
    snprintf(path, sizeof path, "%s/a/report.json", dir);
    char *a = cc_t_slurp(path, NULL);
    expect_in(a, "\"platform\": \"cpu:default\"");
    expect_in(a, "\"key\": \"cpu:default\", \"device\": \"cpu\", \"level\": \"default\"");
    expect_in(a, "\"overrides\": \"ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41");
    assert_int_equal(cc_t_count(a, "\"op\": \"relu\""), 4); /* 2 dtypes x 2 platforms */
    /* cut the journal to its first 5 records and resume: the same report but for timing */
    snprintf(cmd, sizeof cmd,
             "cp -r %s/a %s/b && head -n 5 %s/a/results.jsonl > %s/b/results.jsonl", dir, dir,
             dir, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd,
             "run %s --provider reference --cpu-capability native,default -j 2 --resume %s/b",
             cases, dir);
    rc = cc_t_run(NULL, cmd, out, sizeof out);
    if (rc)
        fail_msg("resume: exit %d:\n%s", rc, out);
    expect_in(out, "5 of 18 cases already recorded");
    snprintf(path, sizeof path, "%s/b/report.json", dir);
    char *b = cc_t_slurp(path, NULL);
    char *a1 = cc_t_without_lines(a, "\"timing\""), *b1 = cc_t_without_lines(b, "\"timing\"");
    assert_string_equal(a1, b1);
    free(a1);
    free(b1);
    free(a);
    free(b);
    /* other levels than the run's: refused */
    snprintf(cmd, sizeof cmd, "run %s --provider reference --cpu-capability default --resume %s/b",
             cases, dir);
    assert_int_equal(cc_t_run(NULL, cmd, out, sizeof out), 2);
    expect_in(out, "is a run at --cpu-capability 'native,default'; this command asks for "
                   "'default'");
    /* --no-fork takes one level; --shard one level */
    snprintf(cmd, sizeof cmd, "run %s --provider reference --cpu-capability native,default "
                              "--no-fork --out %s/c", cases, dir);
    assert_int_equal(cc_t_run(NULL, cmd, out, sizeof out), 2);
    expect_in(out, "give --cpu-capability one level");
    snprintf(cmd, sizeof cmd, "run %s --provider reference --cpu-capability native,default "
                              "--shard 1/2 --out %s/c", cases, dir);
    assert_int_equal(cc_t_run(NULL, cmd, out, sizeof out), 2);
    expect_in(out, "--shard takes one --cpu-capability level");
    cc_t_remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_from_facts),
        cmocka_unit_test(test_facts_and_isa),
        cmocka_unit_test(test_levels),
        cmocka_unit_test(test_aten_threads),
        cmocka_unit_test(test_platforms_json_round_trip),
        cmocka_unit_test(test_directives),
        cmocka_unit_test(test_judging_across_platforms),
        cmocka_unit_test(test_judging_placement_sensitive),
        cmocka_unit_test(test_run_expect_cli),
        cmocka_unit_test(test_levels_run_and_resume),
    };
    return cc_t_exit_code(cmocka_run_group_tests_name("platform", tests, NULL, NULL));
}
