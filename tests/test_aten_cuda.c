/* The ATen provider on CUDA (CAPCHECK_ATEN_CUDA=ON builds only).
 *
 * Built without it, the test links the ATen stub, prints "skipped: no CUDA device (...)" and
 * returns 77, which CTest reports as skipped (SKIP_RETURN_CODE), never as a pass. Built with
 * it, it first checks what needs no GPU: the math modes go from the environment into ATen and
 * come back out in describe() and compute_roundoff (TF32 declares 2^-11 for f32 matmul-family
 * and conv cases on cuda, nothing else), a malformed mode is refused, an SDPA backend is
 * refused for the composed attention capsule. Then init on cuda: without a device (this
 * machine: no driver) that must be CC_UNSUPPORTED "no CUDA device: <reason>", and the test
 * skips (77). On a GPU it runs every op x f32/f64/f16/bf16 x every layout class on the device
 * (no fail or error; unsupported only for f16/bf16), and checks TF32 with teeth: an f32 matmul
 * with TF32 on differs from IEEE f32 on the device, passes under the declared 2^-11 and fails
 * the f32 error model when the declaration is removed. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/case/case.h"
#include "harness/run/runner.h"
#include "abi/capcheck_provider.h"

#if CAPCHECK_HAVE_ATEN_CUDA

static const cc_provider *aten(void)
{
    const cc_provider *p = cc_aten_provider();
    assert_non_null(p);
    assert_non_null(p->compute_roundoff);
    return p;
}

static cc_status init_with(const char *tf32, const char *det, const char *attention,
                           cc_device d, char *msg, size_t len)
{
    setenv("CAPCHECK_TF32", tf32, 1);
    setenv("CAPCHECK_DETERMINISTIC", det, 1);
    if (attention)
        setenv("CAPCHECK_ATTENTION", attention, 1);
    else
        unsetenv("CAPCHECK_ATTENTION");
    const cc_provider *p = aten();
    return p->init(p->ctx, d, msg, len);
}

/* No GPU needed: the modes are ATen context settings. */
static void test_math_modes(void **state)
{
    (void)state;
    const cc_provider *p = aten();
    char msg[512] = "", d[512] = "";
    assert_int_equal(init_with("1", "1", NULL, CC_CPU, msg, sizeof msg), CC_OK);
    p->describe(p->ctx, d, sizeof d);
    printf("tf32 on: %s\n", d);
    assert_non_null(strstr(d, "; tf32 on"));
    assert_non_null(strstr(d, "; deterministic on"));
    assert_non_null(strstr(d, "; attention composed (no SDPA)"));
    const double tf32 = ldexp(1.0, -11);
    static const char *const declared[] = {"matmul", "scaledMatmul", "softmaxMatmul", "linear",
                                           "attention", "fftFno", "conv", "convTranspose"};
    for (size_t i = 0; i < sizeof declared / sizeof declared[0]; i++) {
        assert_true(p->compute_roundoff(p->ctx, declared[i], CC_F32, CC_CUDA) == tf32);
        assert_true(p->compute_roundoff(p->ctx, declared[i], CC_F64, CC_CUDA) == 0.0);
        assert_true(p->compute_roundoff(p->ctx, declared[i], CC_F32, CC_CPU) == 0.0);
        assert_true(p->compute_roundoff(p->ctx, declared[i], CC_F16, CC_CUDA) == 0.0);
    }
    assert_true(p->compute_roundoff(p->ctx, "exp", CC_F32, CC_CUDA) == 0.0);
    assert_true(p->compute_roundoff(p->ctx, "softmax", CC_F32, CC_CUDA) == 0.0);

    assert_int_equal(init_with("0", "0", "composed", CC_CPU, msg, sizeof msg), CC_OK);
    p->describe(p->ctx, d, sizeof d);
    printf("tf32 off: %s\n", d);
    assert_non_null(strstr(d, "; tf32 off"));
    assert_non_null(strstr(d, "; deterministic off"));
    for (size_t i = 0; i < sizeof declared / sizeof declared[0]; i++)
        assert_true(p->compute_roundoff(p->ctx, declared[i], CC_F32, CC_CUDA) == 0.0);

    assert_int_equal(init_with("yes", "0", NULL, CC_CPU, msg, sizeof msg), CC_FAILED);
    assert_non_null(strstr(msg, "CAPCHECK_TF32=yes"));
    assert_int_equal(init_with("0", "0", "flash", CC_CPU, msg, sizeof msg), CC_UNSUPPORTED);
    assert_non_null(strstr(msg, "no SDPA"));
    assert_int_equal(init_with("0", "0", NULL, CC_CPU, msg, sizeof msg), CC_OK);
}

static long run_text(const cc_provider *p, const char *text, long min_cases, int strict)
{
    cc_case_defaults def = {CC_CUDA, 0};
    cc_parse_error err;
    cc_case_list l;
    memset(&err, 0, sizeof err);
    memset(&l, 0, sizeof l);
    if (cc_cases_parse_text(text, "test_aten_cuda", &def, &l, &err))
        fail_msg("%s:%d:%d: %s", err.file, err.line, err.column, err.msg);
    long bad = 0, passed = 0, unsupported = 0;
    for (size_t i = 0; i < l.n; i++) {
        assert_int_equal(l.v[i].device, CC_CUDA);
        cc_result r;
        cc_run_case(p, &l.v[i], &r);
        int half = l.v[i].dtype == CC_F16 || l.v[i].dtype == CC_BF16;
        int ok = r.status == CC_RES_PASS ||
                 (r.status == CC_RES_UNSUPPORTED && (half || !strict));
        passed += r.status == CC_RES_PASS;
        unsupported += r.status == CC_RES_UNSUPPORTED;
        if (!ok && bad++ < 10)
            printf("NOT OK %s -> %s: %s\n", r.line, cc_result_status_name(r.status), r.message);
    }
    printf("%zu cases on cuda: %ld passed, %ld unsupported, %ld not as expected\n", l.n, passed,
           unsupported, bad);
    assert_true((long)l.n >= min_cases);
    cc_case_list_free(&l);
    return bad;
}

/* Every op, every dtype, every layout class (a stride2 view's gaps hold NaN: a device copy
 * that compacted the view, or a kernel that ignored strides, fails loudly). */
static void test_every_op_on_cuda(void **state)
{
    (void)state;
    const cc_provider *p = aten();
    char d[512] = "";
    p->describe(p->ctx, d, sizeof d);
    printf("%s\n", d);
    assert_non_null(strstr(d, "; gpu "));
    assert_null(strstr(d, "gpu none"));
    long bad = run_text(p,
                        "* count=1 dtype=f32,f64,f16,bf16 layout=contig,transpose,stride2,bcast "
                        "size=small zero=1\n"
                        "matmul dtype=f32 in=[64,128],[128,32] seed=15\n"
                        "conv dtype=f32 in=[4,9,8],[6,2,3,2],[6] kernel=[3,2] stride=[2,1] "
                        "pad=[1,0] dil=[1,2] groups=2 seed=34\n",
                        56 * 16, 1);
    if (bad)
        fail_msg("%ld cases on cuda did not pass (first ones above)", bad);
}

/* Deterministic algorithms on: every case passes or is unsupported ("does not have a
 * deterministic implementation"), none fails or errors. */
static void test_deterministic_on_cuda(void **state)
{
    (void)state;
    char msg[512];
    assert_int_equal(init_with("0", "1", NULL, CC_CUDA, msg, sizeof msg), CC_OK);
    long bad = run_text(aten(),
                        "* count=1 dtype=f32,f64 layout=contig,stride2 size=small\n", 56 * 4, 0);
    assert_int_equal(init_with("0", "0", NULL, CC_CUDA, msg, sizeof msg), CC_OK);
    if (bad)
        fail_msg("%ld cases failed with deterministic algorithms on", bad);
}

/* TF32 with teeth: an f32 matmul really runs on TF32 when it is on, passes under the declared
 * 2^-11, and fails the f32 model when the declaration is taken away. A short inner extent
 * (K = 32) keeps the f32 bound 2 u K sum|ab| tight: TF32's input rounding (about 2^-11 per
 * product) is then ~30x over it, while IEEE f32 on the device stays under it; large M and N
 * make cuBLAS pick a tensor-core kernel. */
static void test_tf32_on_cuda(void **state)
{
    (void)state;
    char msg[512];
    const char *line = "matmul dtype=f32 device=cuda in=[1024,32],[32,1024] check=fwd seed=7";
    cc_case_defaults def = {CC_CUDA, 0};
    cc_case c;
    cc_parse_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(cc_case_parse(line, &def, &c, &err), 0);

    cc_result ieee, tf32, undeclared;
    assert_int_equal(init_with("0", "0", NULL, CC_CUDA, msg, sizeof msg), CC_OK);
    cc_run_case(aten(), &c, &ieee);
    assert_int_equal(init_with("1", "0", NULL, CC_CUDA, msg, sizeof msg), CC_OK);
    cc_run_case(aten(), &c, &tf32);
    cc_provider bare = *aten(); /* the same kernels, TF32 not declared */
    bare.compute_roundoff = NULL;
    cc_run_case(&bare, &c, &undeclared);
    assert_int_equal(init_with("0", "0", NULL, CC_CUDA, msg, sizeof msg), CC_OK);
    printf("IEEE f32: %s ratio %.3g; TF32 declared: %s ratio %.3g; undeclared: %s ratio %.3g\n",
           cc_result_status_name(ieee.status), ieee.fwd_ratio,
           cc_result_status_name(tf32.status), tf32.fwd_ratio,
           cc_result_status_name(undeclared.status), undeclared.fwd_ratio);
    assert_int_equal(ieee.status, CC_RES_PASS);
    assert_int_equal(tf32.status, CC_RES_PASS);
    if (undeclared.status == CC_RES_PASS)
        fail_msg("TF32 on left the f32 result within the f32 bound (ratio %.3g): cuBLAS ran no "
                 "TF32 kernel, so the TF32 error model is untested here", undeclared.fwd_ratio);
    /* the same results judged at u = 2^-24 instead of 2^-11: ~8192 x the ratio, over 1 */
    assert_true(undeclared.fwd_ratio > 1000.0 * tf32.fwd_ratio);
    assert_int_equal(undeclared.status, CC_RES_FAIL);
    assert_true(tf32.fwd_ratio * 8192.0 > 10.0 * ieee.fwd_ratio); /* TF32 really was on */
}

int main(void)
{
    const struct CMUnitTest modes[] = {cmocka_unit_test(test_math_modes)};
    if (cmocka_run_group_tests_name("aten_math_modes", modes, NULL, NULL))
        return 1;
    const cc_provider *p = cc_aten_provider();
    char msg[512] = "";
    cc_status st = p->init(p->ctx, CC_CUDA, msg, sizeof msg);
    if (st != CC_OK) {
        if (st == CC_UNSUPPORTED && strncmp(msg, "no CUDA device", 14) == 0) {
            printf("skipped: %s\n", msg); /* "no CUDA device: <reason>" */
            return 77;
        }
        fprintf(stderr, "aten init on cuda failed: %s\n", msg);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_op_on_cuda),
        cmocka_unit_test(test_deterministic_on_cuda),
        cmocka_unit_test(test_tf32_on_cuda),
    };
    return cmocka_run_group_tests_name("aten_cuda", tests, NULL, NULL);
}

#else /* the ATen shim was built without CUDA */

int main(void)
{
    printf("skipped: capcheck was built without CUDA in the ATen shim (configure with "
           "-DCAPCHECK_ATEN_CUDA=ON; scripts/gpu-check does)\n");
    return 77;
}

#endif
