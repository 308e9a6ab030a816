/* The CUDA providers (cublas, cudnn, cufft). Without a CUDA device (this machine: no driver) the
 * test prints "skipped: no CUDA device" and returns 77, which CTest reports as skipped; built
 * without the CUDA providers it says so and skips too. On a GPU machine it runs a few cases of
 * every provider, forward and VJP, and asserts they pass under the reference's error model,
 * that f16 is unsupported, and that each provider states its library and math mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/case.h"
#include "harness/runner.h"
#include "providers/cuda/cuda_providers.h"

static const cc_provider *open_provider(const char *name)
{
    char msg[512] = "";
    const cc_provider *p = cc_cuda_provider(name, msg, sizeof msg);
    if (!p) {
        if (strcmp(name, "cudnn") == 0 && strstr(msg, "without cuDNN")) {
            printf("%s\n", msg);
            return NULL; /* built without cuDNN: nothing to check */
        }
        fail_msg("provider %s: %s", name, msg);
    }
    cc_status st = p->init(p->ctx, CC_CUDA, msg, sizeof msg);
    if (st != CC_OK)
        fail_msg("provider %s: init on cuda: %s", name, msg);
    return p;
}

static void run_cases(const char *name, const char *text, long min_cases)
{
    const cc_provider *p = open_provider(name);
    if (!p)
        return;
    char d[512] = "";
    p->describe(p->ctx, d, sizeof d);
    printf("%s: %s\n", name, d);
    assert_non_null(strstr(d, "gpu "));
    cc_case_defaults def = {CC_CUDA, 0};
    cc_parse_error err;
    cc_case_list l;
    memset(&err, 0, sizeof err);
    memset(&l, 0, sizeof l);
    if (cc_cases_parse_text(text, name, &def, &l, &err))
        fail_msg("%s:%d:%d: %s", err.file, err.line, err.column, err.msg);
    long bad = 0;
    char first[2 * CC_CASE_LINE_MAX] = "";
    for (size_t i = 0; i < l.n; i++) {
        cc_result r;
        cc_run_case(p, &l.v[i], &r);
        int half = l.v[i].dtype == CC_F16 || l.v[i].dtype == CC_BF16;
        int ok = half ? r.status == CC_RES_UNSUPPORTED : r.status == CC_RES_PASS;
        if (!ok && !bad++)
            snprintf(first, sizeof first, "%s -> %s: %s", r.line, cc_result_status_name(r.status),
                     r.message);
    }
    printf("%s: %zu cases, %ld not as expected\n", name, l.n, bad);
    assert_true((long)l.n >= min_cases);
    cc_case_list_free(&l);
    if (bad)
        fail_msg("%ld %s cases did not pass; first: %s", bad, name, first);
}

static void test_cublas(void **state)
{
    (void)state;
    run_cases("cublas",
              "matmul       count=3 dtype=f32,f64 layout=contig,transpose,stride2,bcast size=small zero=1\n"
              "scaledMatmul count=2 dtype=f32,f64 layout=contig,transpose size=small\n"
              "linear       count=3 dtype=f32,f64 layout=contig,transpose,stride2,bcast size=small zero=1\n"
              "matmul dtype=f32 in=[64,128],[128,32] seed=15\n"
              "matmul dtype=f64 in=[2,3,5,4],[3,4,6] layout=transpose seed=21\n"
              "linear dtype=f32 in=[2,3,64],[16,64],[16] seed=18\n"
              "matmul dtype=f16 in=[3,4],[4,2] seed=1\n",
              40);
    if (!getenv("CAPCHECK_TF32")) { /* the default math mode is stated as pedantic */
        const cc_provider *p = cc_cuda_provider("cublas", NULL, 0);
        char d[512] = "";
        p->describe(p->ctx, d, sizeof d);
        assert_non_null(strstr(d, "tf32 off"));
    }
}

static void test_cudnn(void **state)
{
    (void)state;
    run_cases("cudnn",
              "conv          count=3 dtype=f32,f64 layout=contig,transpose,stride2,bcast size=small\n"
              "convTranspose count=2 dtype=f32,f64 layout=contig,transpose size=small\n"
              "softmax       count=3 dtype=f32,f64 layout=contig,transpose,stride2,bcast size=small zero=1\n"
              "logSoftmax    count=2 dtype=f32,f64 layout=contig,stride2 size=small\n"
              "conv dtype=f32 in=[4,9,8],[6,2,3,2],[6] kernel=[3,2] stride=[2,1] pad=[1,0] dil=[1,2] groups=2 seed=34\n"
              "conv dtype=f32 in=[0,5],[3,0,2],[3] kernel=[2] seed=38\n"
              "conv dtype=f16 in=[2,6],[2,2,3],[2] kernel=[3] seed=4\n",
              40);
}

static void test_cufft(void **state)
{
    (void)state;
    run_cases("cufft",
              "fftFno dtype=f32 in=[3,8] variant=1 seed=1\n"
              "fftFno dtype=f64 in=[2,7] variant=1 layout=transpose seed=2\n"
              "fftFno dtype=f32 in=[4,16] variant=1 layout=stride2 seed=3\n"
              "fftFno dtype=f32 in=[3,5,2] variant=2 length=8 seed=4\n"
              "fftFno dtype=f64 in=[2,4,2] variant=2 length=7 layout=stride2 seed=5\n"
              "fftFno dtype=f64 in=[0,6] variant=1 seed=6\n"
              "fftFno dtype=f16 in=[3,8] variant=1 seed=7\n",
              7);
}

int main(void)
{
    char msg[512] = "";
    const cc_provider *p = cc_cuda_provider("cublas", msg, sizeof msg);
    if (!p) {
        printf("skipped: %s\n", msg);
        return 77;
    }
    if (p->init(p->ctx, CC_CUDA, msg, sizeof msg) != CC_OK) {
        if (strncmp(msg, "no CUDA device", 14) == 0) {
            printf("skipped: %s\n", msg); /* "no CUDA device: <cudaGetErrorString>" */
            return 77;
        }
        fprintf(stderr, "cublas init failed: %s\n", msg);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cublas),
        cmocka_unit_test(test_cudnn),
        cmocka_unit_test(test_cufft),
    };
    return cmocka_run_group_tests_name("cuda_providers", tests, NULL, NULL);
}
