/* The CUDA providers (cublas, cudnn, cufft). Without a CUDA device (this machine: no driver) the
 * test prints "skipped: no CUDA device" and returns 77, which CTest reports as skipped; built
 * without the CUDA providers it says so and skips too. On a GPU machine it runs a few cases of
 * every provider, forward and VJP, and asserts they pass under the reference's error model, that
 * the dtypes a provider does not claim are unsupported (f16/bf16 for cudnn and cufft; cublas
 * claims them), and that each provider states its library and math mode; then every case of
 * cases/openblas.cases and cases/cuda_providers.cases whose op a provider implements passes on it
 * with zero failures; and planted wrong parameters (avgPool run as maxPool, batchNorm's eps,
 * spectralConv's wre and wim swapped, an f16 matmul's operands swapped) are caught. The host-side
 * logic of these providers is tested without a GPU by test_cuda_host. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/case/case.h"
#include "harness/run/runner.h"
#include "providers/cuda/cuda_providers.h"
#include "skip_util.h"
#include "test_util.h"

static const cc_provider *open_provider(const char *name)
{
    char msg[512] = "";
    const cc_provider *p = cc_cuda_provider(name, msg, sizeof msg);
    if (!p) {
        if (strcmp(name, "cudnn") == 0 && strstr(msg, "without cuDNN")) {
            cc_t_skip("%s", msg); /* the cudnn parts: skipped, never passed */
            return NULL;
        }
        fail_msg("provider %s: %s", name, msg);
    }
    cc_status st = p->init(p->ctx, CC_CUDA, msg, sizeof msg);
    if (st != CC_OK)
        fail_msg("provider %s: init on cuda: %s", name, msg);
    return p;
}

/* The ops each provider implements, and whether it claims f16/bf16. */
typedef struct {
    const char *name;
    const char *ops[8];
    int halves;
} provider_claim;

static const provider_claim CLAIMS[] = {
    {"cublas", {"matmul", "scaledMatmul", "linear"}, 1},
    {"cudnn", {"conv", "convTranspose", "softmax", "logSoftmax", "maxPool", "avgPool", "batchNorm"},
     0},
    {"cufft", {"fftFno"}, 0},
};

static const provider_claim *claim_of(const char *name)
{
    for (size_t i = 0; i < sizeof CLAIMS / sizeof CLAIMS[0]; i++)
        if (!strcmp(CLAIMS[i].name, name))
            return &CLAIMS[i];
    fail_msg("no claim for provider %s", name);
    return NULL;
}

static int claims_op(const provider_claim *c, const char *op)
{
    for (int i = 0; i < 8 && c->ops[i]; i++)
        if (!strcmp(c->ops[i], op))
            return 1;
    return 0;
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
    const provider_claim *claim = claim_of(name);
    for (size_t i = 0; i < l.n; i++) {
        cc_result r;
        cc_run_case(p, &l.v[i], &r);
        int half = l.v[i].dtype == CC_F16 || l.v[i].dtype == CC_BF16;
        int ok = half && !claim->halves ? r.status == CC_RES_UNSUPPORTED
                                        : r.status == CC_RES_PASS;
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
              "matmul dtype=f16 in=[3,4],[4,2] seed=1\n"
              "matmul       count=3 dtype=f16,bf16 layout=contig,transpose,stride2,bcast size=small zero=1\n"
              "linear       count=2 dtype=f16,bf16 layout=contig,transpose,stride2,bcast size=small\n"
              "scaledMatmul dtype=bf16 in=[16,33],[33,9] alpha=-2.5 layout=transpose seed=95\n",
              80);
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
              "conv dtype=f16 in=[2,6],[2,2,3],[2] kernel=[3] seed=4\n"
              "maxPool       count=3 dtype=f32,f64 layout=contig,transpose,stride2,bcast size=small\n"
              "avgPool       count=3 dtype=f32,f64 layout=contig,transpose,stride2,bcast size=small\n"
              "batchNorm     count=3 dtype=f32,f64 layout=contig,transpose,stride2,bcast size=small\n"
              "maxPool dtype=f32 in=[2,4,5,3] kernel=[2,2,3] stride=[1,2,1] pad=[1,0,1] seed=63\n"
              "avgPool dtype=f64 in=[3,7,6] kernel=[4,3] stride=[2,2] pad=[2,1] seed=68\n"
              "batchNorm dtype=f32 in=[3],[3],[3] training=1 seed=81\n"
              "batchNorm dtype=f32 in=[3,5,4],[3],[3],[3],[3] training=0 seed=83\n"
              "maxPool dtype=bf16 in=[2,6] kernel=[2] stride=[2] pad=[0] seed=5\n",
              110);
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
              "fftFno dtype=f16 in=[3,8] variant=1 seed=7\n"
              "fftFno dtype=f32 in=[8,3],[5,3,3],[5,3,3] variant=0 modes=5 seed=51\n"
              "fftFno dtype=f64 in=[7,2],[4,2,2],[4,2,2] variant=0 modes=4 layout=transpose seed=52\n"
              "fftFno dtype=f32 in=[16,4],[3,4,4],[3,4,4] variant=0 modes=3 layout=stride2 seed=53\n"
              "fftFno dtype=f64 in=[6,3],[0,3,3],[0,3,3] variant=0 modes=0 seed=55\n",
              11);
}

/* Every case of the two suites whose op a provider implements passes on it: zero failures and
 * errors; unsupported only where cuDNN cannot run a convolution (dilation 0, no pinned GEMM-class
 * algorithm: stated, counted, printed), never for the pools, batchNorm, fftFno or the f16/bf16
 * GEMMs (the suites hold no tied max-pool window or NaN: test_cuda_host checks the same lines
 * against the plans). */
static void test_suites_pass(void **state)
{
    (void)state;
    cc_case_list l = {NULL, 0, 0};
    if (cc_t_load_cases("cases/openblas.cases", &l) || cc_t_load_cases("cases/cuda_providers.cases", &l))
        fail_msg("the case files do not parse");
    for (size_t i = 0; i < l.n; i++)
        l.v[i].device = CC_CUDA;
    long bad_total = 0;
    char first[2 * CC_CASE_LINE_MAX] = "";
    for (size_t k = 0; k < sizeof CLAIMS / sizeof CLAIMS[0]; k++) {
        const cc_provider *p = open_provider(CLAIMS[k].name);
        if (!p)
            continue;
        long n = 0, passed = 0, conv_unsupported = 0;
        for (size_t i = 0; i < l.n; i++) {
            const cc_case *c = &l.v[i];
            int half = c->dtype == CC_F16 || c->dtype == CC_BF16;
            if (!claims_op(&CLAIMS[k], c->op->name) || (half && !CLAIMS[k].halves))
                continue;
            cc_result r;
            cc_run_case(p, c, &r);
            n++;
            int conv = !strcmp(c->op->name, "conv") || !strcmp(c->op->name, "convTranspose");
            if (r.status == CC_RES_PASS) {
                passed++;
            } else if (r.status == CC_RES_UNSUPPORTED && conv) {
                printf("unsupported: %s: %s\n", r.line, r.message);
                conv_unsupported++;
            } else if (!bad_total++)
                snprintf(first, sizeof first, "%s on %s -> %s: %s", r.line, CLAIMS[k].name,
                         cc_result_status_name(r.status), r.message);
        }
        printf("suites on %s: %ld cases, %ld passed, %ld convolutions unsupported\n",
               CLAIMS[k].name, n, passed, conv_unsupported);
        assert_true(n >= 50); /* cufft's fftFno lines are the fewest: 64 */
    }
    cc_case_list_free(&l);
    if (bad_total)
        fail_msg("%ld cases did not pass; first: %s", bad_total, first);
}

/* Teeth: a wrapper that plants a wrong parameter into each call, then delegates. */
typedef enum { PLANT_AVG_AS_MAX, PLANT_BN_EPS, PLANT_SWAP_WRE_WIM, PLANT_SWAP_AB } plant;

typedef struct {
    const cc_provider *base;
    plant what;
} planted_ctx;

static void plant_call(const planted_ctx *pc, cc_call *call, ref_params *params, cc_view *in)
{
    *params = *call->params;
    memcpy(in, call->in, sizeof(cc_view) * (size_t)call->n_in);
    call->params = params;
    call->in = in;
    switch (pc->what) {
    case PLANT_AVG_AS_MAX:
        call->op = "maxPool";
        break;
    case PLANT_BN_EPS:
        params->eps *= 1e4;
        break;
    case PLANT_SWAP_WRE_WIM:
    case PLANT_SWAP_AB: {
        int i = pc->what == PLANT_SWAP_AB ? 0 : 1;
        cc_view t = in[i];
        in[i] = in[i + 1];
        in[i + 1] = t;
        break;
    }
    }
}

static cc_status planted_forward(void *ctx, const cc_call *call, cc_view *out, char *msg,
                                 size_t len)
{
    const planted_ctx *pc = ctx;
    cc_call c = *call;
    ref_params params;
    cc_view in[REF_MAX_INPUTS];
    plant_call(pc, &c, &params, in);
    return pc->base->forward(pc->base->ctx, &c, out, msg, len);
}

static void expect_caught(const char *provider, plant what, const char *line)
{
    const cc_provider *base = open_provider(provider);
    if (!base)
        return;
    planted_ctx pc = {base, what};
    /* forward only (the lines say check=fwd); vjp_mode ignores its ctx in every CUDA provider */
    cc_provider p = {CC_PROVIDER_ABI_VERSION, base->name, &pc, NULL, planted_forward, NULL, NULL,
                     base->vjp_mode, NULL};
    cc_result r;
    cc_t_run_line(&p, line, &r);
    printf("planted on %s: %s -> %s\n", provider, line, cc_result_status_name(r.status));
    if (r.status != CC_RES_FAIL)
        fail_msg("a planted wrong parameter was not caught: %s on %s -> %s: %s", line, provider,
                 cc_result_status_name(r.status), r.message);
}

static void test_planted_parameters_are_caught(void **state)
{
    (void)state;
    /* the unplanted lines pass (test_suites_pass runs them); planted, each fails */
    expect_caught("cudnn", PLANT_AVG_AS_MAX,
                  "avgPool dtype=f32 device=cuda in=[2,9] kernel=[3] stride=[2] pad=[1] check=fwd seed=67");
    expect_caught("cudnn", PLANT_BN_EPS,
                  "batchNorm dtype=f32 device=cuda in=[4,64],[4],[4] training=1 check=fwd seed=85");
    expect_caught("cufft", PLANT_SWAP_WRE_WIM,
                  "fftFno dtype=f32 device=cuda in=[8,3],[5,3,3],[5,3,3] variant=0 modes=5 check=fwd seed=51");
    expect_caught("cublas", PLANT_SWAP_AB,
                  "matmul dtype=f16 device=cuda in=[8,8],[8,8] check=fwd seed=99");
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
        cmocka_unit_test(test_suites_pass),
        cmocka_unit_test(test_planted_parameters_are_caught),
    };
    return cc_t_exit_code(cmocka_run_group_tests_name("cuda_providers", tests, NULL, NULL));
}
