/* The CUDA providers' host-side logic, on any machine (no GPU, no CUDA runtime):
 *   - the GEMM lowering with f16/bf16 operands and a float32 accumulator (what cublas runs through
 *     cublasGemmEx) over a host backend with GemmEx's arithmetic: the f16/bf16 matmul,
 *     scaledMatmul and linear lines of cases/cuda_providers.cases pass; a backend that drops
 *     beta's accumulation is caught; a half-precision accumulator is refused;
 *   - the fftFno lowering (all three variants, cufft's) over a plain DFT with cuFFT's R2C/C2R
 *     conventions: every fftFno line of cases/cuda_providers.cases passes; a conjugated R2C and a
 *     C2R that forgets the Hermitian doubling are caught;
 *   - the cuDNN pooling plan: dims, the rank-1 lift, empty outputs, refusals (ties for the VJP,
 *     NaN, all -inf windows, dilation), and a host pooling that reads nothing but the plan's cuDNN
 *     view (dims, window, pad, stride, mode) passes every pooling line of the case file, while
 *     the same with count_exclude_pad averaging is caught;
 *   - the batchNorm plan and the running-variance clamp;
 *   - cases/cuda_providers.cases covers every op x dtype x layout the CUDA providers claim. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/case/case.h"
#include "core/dtype.h"
#include "harness/run/runner.h"
#include "providers/cuda/cudnn_plan.h"
#include "providers/cuda/fft_lowering.h"
#include "providers/openblas/gemm_lowering.h"
#include "providers/provider_util.h"
#include "test_util.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static cc_case_list cases; /* cases/cuda_providers.cases */

static int setup(void **state)
{
    (void)state;
    return cc_t_load_cases("cases/cuda_providers.cases", &cases);
}

static int teardown(void **state)
{
    (void)state;
    cc_case_list_free(&cases);
    return 0;
}

static const char *vjp_mode_backend(void *ctx, const char *op)
{
    (void)ctx, (void)op;
    return "backendVJP";
}

/* The cases of the file for which keep() says yes, run on p: how many, how many passed, the
 * first that did not. */
static cc_t_tally run_selected(const cc_provider *p, int (*keep)(const cc_case *))
{
    cc_case_list sel = {NULL, 0, 0};
    for (size_t i = 0; i < cases.n; i++)
        if (keep(&cases.v[i])) {
            if (sel.n == sel.cap) {
                sel.cap = sel.cap ? 2 * sel.cap : 64;
                sel.v = realloc(sel.v, sel.cap * sizeof *sel.v);
                assert_non_null(sel.v);
            }
            sel.v[sel.n++] = cases.v[i];
        }
    cc_t_tally t = cc_t_run_all(p, &sel, NULL);
    free(sel.v);
    return t;
}

static int is_half(cc_dtype t)
{
    return t == CC_F16 || t == CC_BF16;
}

/* ==== GEMM lowering in f16/bf16 ============================================================ */

/* cublasGemmEx with CUBLAS_COMPUTE_32F_PEDANTIC on the host: operands read in their dtype,
 * products and sums in float32, C float32 (beta applied in float32). */
typedef struct {
    cc_dtype t, acc;
    int drop_beta; /* planted bug: C = alpha AB, forgetting what C held */
} hg_backend;

static cc_status hg_gemm(void *self, int ta, int tb, int64_t m, int64_t n, int64_t k,
                         double alpha, const void *A, int64_t lda, const void *B, int64_t ldb,
                         double beta, void *C, int64_t ldc, char *msg, size_t len)
{
    const hg_backend *b = self;
    (void)msg, (void)len;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float s = 0.0f;
            for (int64_t p = 0; p < k; p++) {
                float a = (float)cc_load(b->t, A, ta ? p * lda + i : i * lda + p);
                float v = (float)cc_load(b->t, B, tb ? j * ldb + p : p * ldb + j);
                s += a * v;
            }
            float c = (float)cc_load(b->acc, C, i * ldc + j);
            float r = (float)alpha * s + (b->drop_beta ? 0.0f : (float)beta * c);
            cc_store(b->acc, C, i * ldc + j, r);
        }
    return CC_OK;
}

static cc_status hg_input(void *self, const void *host, int64_t count, const void **dev,
                          char *msg, size_t len)
{
    (void)self, (void)count, (void)msg, (void)len;
    *dev = host;
    return CC_OK;
}

static cc_status hg_output(void *self, void *host, int64_t count, void **dev, char *msg,
                           size_t len)
{
    const hg_backend *b = self;
    (void)msg, (void)len;
    memset(host, 0, (size_t)count * cc_dtype_size(b->acc));
    *dev = host;
    return CC_OK;
}

static cc_status hg_finish(void *self, cc_status st, char *msg, size_t len)
{
    (void)self, (void)msg, (void)len;
    return st;
}

typedef struct {
    int drop_beta;
    int half_accumulator; /* declare the case dtype as the accumulator (the lowering refuses) */
} hg_opts;

static cc_gemm_backend hg_of(hg_backend *b, const hg_opts *o, cc_dtype t)
{
    b->t = t;
    b->acc = is_half(t) && !o->half_accumulator ? CC_F32 : t;
    b->drop_beta = o->drop_beta;
    cc_gemm_backend bk = {.self = b, .dtype = t, .acc_dtype = b->acc, .gemm = hg_gemm,
                          .input = hg_input, .output = hg_output, .finish = hg_finish};
    return bk;
}

static cc_status hg_forward(void *ctx, const cc_call *call, cc_view *out, char *msg, size_t len)
{
    hg_backend b;
    cc_gemm_backend bk = hg_of(&b, ctx, call->dtype);
    return cc_gemm_forward(&bk, call, out, msg, len);
}

static cc_status hg_vjp(void *ctx, const cc_call *call, const cc_view *g, cc_view *grads,
                        char *msg, size_t len)
{
    hg_backend b;
    cc_gemm_backend bk = hg_of(&b, ctx, call->dtype);
    return cc_gemm_vjp(&bk, call, g, grads, msg, len);
}

static cc_provider gemm_host(hg_opts *o)
{
    cc_provider p = {CC_PROVIDER_ABI_VERSION, "gemm-host", o, NULL, hg_forward, hg_vjp, NULL,
                     vjp_mode_backend, NULL};
    return p;
}

static int half_gemm_case(const cc_case *c)
{
    return cc_gemm_has_op(c->op->name) && is_half(c->dtype);
}

static void test_gemm_lowering_halves_pass(void **state)
{
    (void)state;
    hg_opts o = {0, 0};
    cc_provider p = gemm_host(&o);
    cc_t_tally t = run_selected(&p, half_gemm_case);
    printf("f16/bf16 GEMM lines on the lowering over host GemmEx: %ld cases, %ld passed\n",
           t.cases, t.passed);
    assert_true(t.cases >= 80);
    if (t.not_passed)
        fail_msg("%ld cases did not pass; first: %s", t.not_passed, t.first_failure);
}

static void test_gemm_lowering_halves_teeth(void **state)
{
    (void)state;
    /* the bias and the batch sums accumulate into C with beta = 1: dropping it is caught */
    hg_opts drop = {1, 0};
    cc_provider p = gemm_host(&drop);
    cc_result r;
    cc_t_run_line(&p, "linear dtype=f16 in=[2,3,64],[16,64],[16] seed=96", &r);
    assert_int_equal(r.status, CC_RES_FAIL);
    cc_t_run_line(&p, "matmul dtype=bf16 in=[1,3,5,4],[2,1,4,6] check=vjp seed=93", &r);
    assert_int_equal(r.status, CC_RES_FAIL);
    /* a half-precision accumulator is refused with a reason, never run */
    hg_opts half = {0, 1};
    p = gemm_host(&half);
    cc_t_run_line(&p, "matmul dtype=f16 in=[3,4],[4,2] seed=1", &r);
    assert_int_equal(r.status, CC_RES_ERROR);
    assert_non_null(strstr(r.message, "accumulates in f32"));
}

/* ==== fftFno lowering ===================================================================== */

/* cuFFT's unnormalized R2C / C2R by the definition, accumulated in double, stored in the dtype. */
typedef struct {
    cc_dtype t;
    int conjugate_r2c; /* planted bug: e^{+i} in the forward transform */
    int no_doubling;   /* planted bug: C2R weights interior bins 1 instead of 2 */
} hf_backend;

static double twiddle_angle(int64_t t, int64_t k, int64_t n)
{
    return 2.0 * M_PI * (double)((t * k) % n) / (double)n;
}

static cc_status hf_r2c(void *self, int64_t n, int64_t batch, const void *in, void *out,
                        char *msg, size_t len)
{
    const hf_backend *b = self;
    (void)msg, (void)len;
    int64_t K = n / 2 + 1;
    for (int64_t r = 0; r < batch; r++)
        for (int64_t k = 0; k < K; k++) {
            double re = 0.0, im = 0.0;
            for (int64_t t = 0; t < n; t++) {
                double x = cc_load(b->t, in, r * n + t), th = twiddle_angle(t, k, n);
                re += x * cos(th);
                im -= x * sin(th);
            }
            cc_store(b->t, out, (r * K + k) * 2, re);
            cc_store(b->t, out, (r * K + k) * 2 + 1, b->conjugate_r2c ? -im : im);
        }
    return CC_OK;
}

static cc_status hf_c2r(void *self, int64_t n, int64_t batch, const void *in, void *out,
                        char *msg, size_t len)
{
    const hf_backend *b = self;
    (void)msg, (void)len;
    int64_t K = n / 2 + 1;
    for (int64_t r = 0; r < batch; r++)
        for (int64_t t = 0; t < n; t++) {
            double s = 0.0;
            for (int64_t k = 0; k < K; k++) {
                double re = cc_load(b->t, in, (r * K + k) * 2);
                double im = cc_load(b->t, in, (r * K + k) * 2 + 1);
                double m = k == 0 || 2 * k == n || b->no_doubling ? 1.0 : 2.0;
                double th = twiddle_angle(t, k, n);
                s += m * (re * cos(th) - im * sin(th));
            }
            cc_store(b->t, out, r * n + t, s);
        }
    return CC_OK;
}

static cc_status hf_forward(void *ctx, const cc_call *call, cc_view *out, char *msg, size_t len)
{
    hf_backend b = *(const hf_backend *)ctx;
    b.t = call->dtype;
    cc_fft_backend bk = {&b, call->dtype, hf_r2c, hf_c2r};
    return cc_fft_forward(&bk, call, out, msg, len);
}

static cc_status hf_vjp(void *ctx, const cc_call *call, const cc_view *g, cc_view *grads,
                        char *msg, size_t len)
{
    hf_backend b = *(const hf_backend *)ctx;
    b.t = call->dtype;
    cc_fft_backend bk = {&b, call->dtype, hf_r2c, hf_c2r};
    return cc_fft_vjp(&bk, call, g, grads, msg, len);
}

static cc_provider fft_host(hf_backend *b)
{
    cc_provider p = {CC_PROVIDER_ABI_VERSION, "fft-host", b, NULL, hf_forward, hf_vjp, NULL,
                     vjp_mode_backend, NULL};
    return p;
}

static int fft_case(const cc_case *c)
{
    return cc_fft_has_op(c->op->name);
}

static void test_fft_lowering_passes(void **state)
{
    (void)state;
    hf_backend b = {CC_F32, 0, 0};
    cc_provider p = fft_host(&b);
    cc_t_tally t = run_selected(&p, fft_case);
    printf("fftFno lines on the lowering over a host DFT: %ld cases, %ld passed\n", t.cases,
           t.passed);
    assert_true(t.cases >= 50);
    if (t.not_passed)
        fail_msg("%ld cases did not pass; first: %s", t.not_passed, t.first_failure);
    /* f16 has no transform: unsupported, not a failure */
    cc_result r;
    cc_t_run_line(&p, "fftFno dtype=f16 in=[3,8] variant=1 seed=7", &r);
    assert_int_equal(r.status, CC_RES_UNSUPPORTED);
}

static void test_fft_lowering_teeth(void **state)
{
    (void)state;
    static const char *const lines[] = {
        "fftFno dtype=f64 in=[8,3],[5,3,3],[5,3,3] variant=0 modes=5 seed=51",
        "fftFno dtype=f64 in=[8,3],[5,3,3],[5,3,3] variant=0 modes=5 check=vjp seed=51",
        "fftFno dtype=f32 in=[3,8] variant=1 seed=1",
    };
    hf_backend conj = {CC_F32, 1, 0}, flat = {CC_F32, 0, 1};
    for (int bug = 0; bug < 2; bug++) {
        cc_provider p = fft_host(bug ? &flat : &conj);
        for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
            cc_result r;
            cc_t_run_line(&p, lines[i], &r);
            if (bug == 1 && i == 2)
                continue; /* an R2C alone never calls C2R */
            if (r.status != CC_RES_FAIL)
                fail_msg("planted %s not caught by %s: %s", bug ? "C2R without doubling"
                                                                : "conjugated R2C",
                         lines[i], cc_result_status_name(r.status));
        }
    }
}

static void test_fft_adjust_spectrum(void **state)
{
    (void)state;
    /* n = 4: bins 0 (DC), 1, 2 (Nyquist); one row */
    double s[6] = {1.0, 5.0, 3.0, -6.0, 2.0, 7.0};
    cc_fft_adjust_spectrum(CC_F64, s, 1, 4, 0, 0); /* zero endpoint imaginaries only */
    const double zeroed[6] = {1.0, 0.0, 3.0, -6.0, 2.0, 0.0};
    assert_memory_equal(s, zeroed, sizeof s);
    cc_fft_adjust_spectrum(CC_F64, s, 1, 4, 1, 0); /* halve the interior bin */
    const double halved[6] = {1.0, 0.0, 1.5, -3.0, 2.0, 0.0};
    assert_memory_equal(s, halved, sizeof s);
    cc_fft_adjust_spectrum(CC_F64, s, 1, 4, 0, 1); /* m_k / n: 1/4 at endpoints, 2/4 inside */
    const double weighted[6] = {0.25, 0.0, 0.75, -1.5, 0.5, 0.0};
    assert_memory_equal(s, weighted, sizeof s);
    /* n = 5 (odd): no Nyquist bin, bin 2 is interior */
    float f[6] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
    cc_fft_adjust_spectrum(CC_F32, f, 1, 5, 1, 0);
    const float odd[6] = {1.0f, 0.0f, 0.5f, 0.5f, 0.5f, 0.5f};
    assert_memory_equal(f, odd, sizeof f);
}

/* ==== cuDNN pooling plan ====================================================================== */

static cc_call pool_call(const cc_case *c, cc_view *x, void *data)
{
    memset(x, 0, sizeof *x);
    x->dtype = c->dtype;
    x->rank = c->shape[0].rank;
    int64_t s = 1;
    for (int a = x->rank - 1; a >= 0; a--) {
        x->shape[a] = c->shape[0].dim[a];
        x->strides[a] = s;
        s *= x->shape[a];
    }
    x->data = data;
    cc_call call = {c->op->name, &c->params, CC_CUDA, c->dtype, 1, x};
    return call;
}

static ccu_pool_plan plan_of(const char *line, cc_status want, char *msg, size_t len)
{
    cc_case c = cc_t_parse_case(line);
    cc_view x;
    cc_call call = pool_call(&c, &x, NULL);
    ccu_pool_plan pl;
    cc_status st = ccu_pool_plan_make(&call, &pl, msg, len);
    if (st != want)
        fail_msg("%s: status %d, wanted %d (%s)", line, (int)st, (int)want, msg);
    return pl;
}

static void expect_ints(const int *got, const int *want, int n, const char *what)
{
    for (int i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("%s[%d] = %d, wanted %d", what, i, got[i], want[i]);
}

static void test_pool_plan_dims(void **state)
{
    (void)state;
    char msg[256] = "";
    /* rank 1 lifted: [1, C, 1, L], window/pad/stride with a unit leading entry */
    ccu_pool_plan pl = plan_of("maxPool dtype=f32 in=[3,10] kernel=[3] stride=[2] pad=[1]",
                               CC_OK, msg, sizeof msg);
    assert_false(pl.empty);
    assert_int_equal(pl.nd, 4);
    expect_ints(pl.x_dims, (const int[]){1, 3, 1, 10}, 4, "x_dims");
    expect_ints(pl.y_dims, (const int[]){1, 3, 1, 5}, 4, "y_dims"); /* (10 + 2 - 3)/2 + 1 */
    expect_ints(pl.window, (const int[]){1, 3}, 2, "window");
    expect_ints(pl.pad, (const int[]){0, 1}, 2, "pad");
    expect_ints(pl.stride, (const int[]){1, 2}, 2, "stride");
    assert_true(pl.is_max);
    pl = plan_of("avgPool dtype=f64 in=[2,7,6] kernel=[4,3] stride=[2,2] pad=[2,1]", CC_OK, msg,
                 sizeof msg);
    assert_false(pl.is_max);
    assert_int_equal(pl.nd, 4);
    expect_ints(pl.x_dims, (const int[]){1, 2, 7, 6}, 4, "x_dims");
    expect_ints(pl.y_dims, (const int[]){1, 2, 4, 3}, 4, "y_dims");
    expect_ints(pl.window, (const int[]){4, 3}, 2, "window");
    expect_ints(pl.pad, (const int[]){2, 1}, 2, "pad");
    pl = plan_of("maxPool dtype=f32 in=[2,4,5,3] kernel=[2,2,3] stride=[1,2,1] pad=[1,0,1]",
                 CC_OK, msg, sizeof msg);
    assert_int_equal(pl.nd, 5);
    expect_ints(pl.x_dims, (const int[]){1, 2, 4, 5, 3}, 5, "x_dims");
    expect_ints(pl.y_dims, (const int[]){1, 2, 5, 2, 3}, 5, "y_dims");
    assert_int_equal(pl.K, 12);
    /* the contract's empty outputs never reach cuDNN */
    static const char *const empty[] = {
        "maxPool dtype=f32 in=[2,6] kernel=[3] stride=[1] pad=[2]", /* pad > floor(k/2) */
        "avgPool dtype=f32 in=[2,6] kernel=[0] stride=[1] pad=[0]", /* kernel 0 */
        "avgPool dtype=f32 in=[2,0] kernel=[1] stride=[1] pad=[0]", /* no input cell */
        "maxPool dtype=f32 in=[2,1] kernel=[3] stride=[1] pad=[0]", /* in + 2p < k */
        "maxPool dtype=f32 in=[0,4,4] kernel=[2,2] stride=[1,1] pad=[0,0]", /* no channel */
    };
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        pl = plan_of(empty[i], CC_OK, msg, sizeof msg);
        if (!pl.empty)
            fail_msg("%s: not planned as empty", empty[i]);
    }
}

static void test_pool_plan_refuses_dilation(void **state)
{
    (void)state;
    /* the reference rejects dilation in pools before a provider runs; the plan refuses it on its
     * own too (a call built by hand) */
    cc_case c = cc_t_parse_case("maxPool dtype=f32 in=[2,9] kernel=[3] stride=[1] pad=[1]");
    c.params.dil[0] = 2;
    cc_view x;
    cc_call call = pool_call(&c, &x, NULL);
    ccu_pool_plan pl;
    char msg[256] = "";
    assert_int_equal(ccu_pool_plan_make(&call, &pl, msg, sizeof msg), CC_UNSUPPORTED);
    assert_non_null(strstr(msg, "dilation"));
}

/* The plan's output extents are the reference's, for every pooling case of the file. */
static void test_pool_plan_matches_reference_shapes(void **state)
{
    (void)state;
    long n = 0;
    for (size_t i = 0; i < cases.n; i++) {
        const cc_case *c = &cases.v[i];
        if (strcmp(c->op->name, "maxPool") && strcmp(c->op->name, "avgPool"))
            continue;
        ref_shape out;
        ref_err e;
        assert_int_equal(c->op->shape(&c->params, c->n_in, c->shape, &out, &e), REF_OK);
        cc_view x;
        cc_call call = pool_call(c, &x, NULL);
        ccu_pool_plan pl;
        char msg[256] = "";
        assert_int_equal(ccu_pool_plan_make(&call, &pl, msg, sizeof msg), CC_OK);
        assert_int_equal(out.dim[0], pl.C);
        for (int a = 0; a < pl.sr; a++)
            assert_int_equal(out.dim[a + 1], pl.out[a]);
        assert_int_equal(pl.empty, ref_numel(&out) == 0);
        n++;
    }
    assert_true(n >= 60);
}

static ccu_maxpool_scan scan_1d(const double *x, int64_t C, int64_t L, const char *params)
{
    char line[256];
    snprintf(line, sizeof line, "maxPool dtype=f64 in=[%lld,%lld] %s", (long long)C,
             (long long)L, params);
    char msg[256] = "";
    ccu_pool_plan pl = plan_of(line, CC_OK, msg, sizeof msg);
    ccu_maxpool_scan s;
    ccu_maxpool_scan_x(&pl, CC_F64, x, &s);
    return s;
}

static void test_maxpool_scan(void **state)
{
    (void)state;
    /* windows {1,3} {3,0} {-inf,-inf}: one all -inf window, no tie */
    const double a[6] = {1, 3, 3, 0, -INFINITY, -INFINITY};
    ccu_maxpool_scan s = scan_1d(a, 1, 6, "kernel=[2] stride=[2] pad=[0]");
    assert_int_equal(s.tie_windows, 0);
    assert_int_equal(s.nan_windows, 0);
    assert_int_equal(s.neg_inf_windows, 1);
    /* overlapping windows {1,3} {3,3} {3,0}: the middle one ties */
    s = scan_1d(a, 1, 4, "kernel=[2] stride=[1] pad=[0]");
    assert_int_equal(s.tie_windows, 1);
    /* a tie below the maximum is no tie; -0 and +0 are */
    const double b[6] = {2, 2, 5, -0.0, 0.0, -1};
    s = scan_1d(b, 1, 6, "kernel=[3] stride=[3] pad=[0]");
    assert_int_equal(s.tie_windows, 1);
    /* padded cells never count: {pad,-1,-2} {-1,-2,pad} have unique maxima, and a window of
     * one real -inf beside padding is an all -inf window */
    const double c[2] = {-1, -2};
    s = scan_1d(c, 1, 2, "kernel=[3] stride=[1] pad=[1]");
    assert_int_equal(s.tie_windows + s.nan_windows + s.neg_inf_windows, 0);
    const double d[2] = {-INFINITY, 4};
    s = scan_1d(d, 1, 2, "kernel=[2] stride=[2] pad=[1]"); /* {pad,-inf} {4,pad} */
    assert_int_equal(s.neg_inf_windows, 1);
    /* a NaN no window reads is harmless; one it reads is counted (per channel) */
    const double e[10] = {1, 2, 9, 4, NAN, 7, 7, 0, 1, NAN};
    s = scan_1d(e, 2, 5, "kernel=[2] stride=[2] pad=[0]"); /* {1,2} {9,4} | {7,7} {0,1} */
    assert_int_equal(s.nan_windows, 0);
    assert_int_equal(s.tie_windows, 1);
    s = scan_1d(e, 1, 10, "kernel=[2] stride=[2] pad=[0]");
    assert_int_equal(s.nan_windows, 2);
    /* 2-D: the window walk visits every real cell of every window */
    char msg[256] = "";
    ccu_pool_plan pl = plan_of("maxPool dtype=f32 in=[1,3,3] kernel=[2,2] stride=[1,1] "
                               "pad=[0,0]", CC_OK, msg, sizeof msg);
    const float f[9] = {0, 1, 2, 3, 8, 5, 6, 7, 8}; /* the 8s share only the bottom-right window */
    ccu_maxpool_scan_x(&pl, CC_F32, f, &s);
    assert_int_equal(s.tie_windows, 1);
    /* what is refused, and for which direction */
    pl = plan_of("maxPool dtype=f64 in=[1,4] kernel=[2] stride=[1] pad=[0]", CC_OK, msg,
                 sizeof msg);
    assert_int_equal(ccu_maxpool_expressible(&pl, CC_F64, a, 0, msg, sizeof msg), CC_OK);
    assert_int_equal(ccu_maxpool_expressible(&pl, CC_F64, a, 1, msg, sizeof msg), CC_UNSUPPORTED);
    assert_non_null(strstr(msg, "tied maximum"));
    const double nan4[4] = {1, NAN, 0, 0.5};
    assert_int_equal(ccu_maxpool_expressible(&pl, CC_F64, nan4, 0, msg, sizeof msg),
                     CC_UNSUPPORTED);
    assert_non_null(strstr(msg, "NaN"));
}

/* A pooling computed from nothing but the plan's cuDNN view (tensor dims, window, pad, stride and
 * the mode), as cuDNN is asked to: the descriptors the provider builds are what the contract
 * means. Max ignores padded cells and routes to the (unique: ties are refused) maximum; average
 * divides by the window volume, or, planted, by the real cells only (count_exclude_pad). */
typedef struct {
    int exclude_pad;
} hp_opts;

typedef struct {
    const ccu_pool_plan *pl;
    int64_t sp[3], y[3], w[3], pd[3], st[3]; /* cuDNN's spatial axes (nd - 2 of them) */
    int ns;
} hp_view;

static hp_view hp_view_of(const ccu_pool_plan *pl)
{
    hp_view v;
    memset(&v, 0, sizeof v);
    v.pl = pl;
    v.ns = pl->nd - 2;
    for (int a = 0; a < v.ns; a++) {
        v.sp[a] = pl->x_dims[a + 2], v.y[a] = pl->y_dims[a + 2];
        v.w[a] = pl->window[a], v.pd[a] = pl->pad[a], v.st[a] = pl->stride[a];
    }
    return v;
}

static int hp_next(int64_t *idx, const int64_t *ext, int r)
{
    for (int a = r - 1; a >= 0; a--) {
        if (++idx[a] < ext[a])
            return 1;
        idx[a] = 0;
    }
    return 0;
}

/* One output cell o of channel c: its value and, for max, the winning input cell. */
static double hp_window(const hp_view *v, const void *x, cc_dtype t, int64_t c, const int64_t *o,
                        int exclude_pad, int64_t *win, int64_t *count)
{
    int64_t nin = 1, vol = 1;
    for (int a = 0; a < v->ns; a++)
        nin *= v->sp[a], vol *= v->w[a];
    double best = -INFINITY, sum = 0.0;
    int64_t j[3] = {0, 0, 0}, real = 0;
    *win = -1;
    do {
        int64_t cell = 0, inside = 1;
        for (int a = 0; a < v->ns; a++) {
            int64_t i = o[a] * v->st[a] + j[a] - v->pd[a];
            inside &= i >= 0 && i < v->sp[a];
            cell = cell * v->sp[a] + i;
        }
        if (!inside)
            continue;
        double xv = cc_load(t, x, c * nin + cell);
        real++;
        sum += xv;
        if (*win < 0 || xv > best)
            best = xv, *win = cell;
    } while (hp_next(j, v->w, v->ns));
    *count = v->pl->is_max ? 1 : exclude_pad ? real : vol;
    return v->pl->is_max ? best : sum / (double)*count;
}

static cc_status hp_run(const hp_opts *o, const cc_call *call, cc_view *out, const cc_view *gv,
                        cc_view *grad, char *msg, size_t len)
{
    ccu_pool_plan pl;
    cc_status st = ccu_pool_plan_make(call, &pl, msg, len);
    if (st != CC_OK)
        return st;
    cc_dtype t = call->dtype;
    if (grad)
        memset(grad->data, 0, (size_t)(pl.C * pl.nin) * cc_dtype_size(t));
    if (pl.empty)
        return CC_OK;
    void *x = malloc((size_t)(pl.C * pl.nin) * cc_dtype_size(t));
    assert_non_null(x);
    cc_view_pack(&call->in[0], x);
    if (pl.is_max)
        st = ccu_maxpool_expressible(&pl, t, x, gv != NULL, msg, len);
    hp_view v = hp_view_of(&pl);
    int64_t nout = 1, nin = pl.nin;
    for (int a = 0; a < v.ns; a++)
        nout *= v.y[a];
    for (int64_t c = 0; st == CC_OK && c < pl.C; c++) {
        int64_t oi[3] = {0, 0, 0}, flat = 0;
        do {
            int64_t win, count;
            double y = hp_window(&v, x, t, c, oi, o->exclude_pad, &win, &count);
            if (out)
                cc_store(t, out->data, c * nout + flat, y);
            if (gv && pl.is_max) {
                double gsum = cc_load(t, grad->data, c * nin + win) +
                              cc_load(t, gv->data, c * nout + flat);
                cc_store(t, grad->data, c * nin + win, gsum);
            } else if (gv) { /* every real cell of the window takes g / count */
                int64_t j[3] = {0, 0, 0};
                do {
                    int64_t cell = 0, inside = 1;
                    for (int a = 0; a < v.ns; a++) {
                        int64_t i = oi[a] * v.st[a] + j[a] - v.pd[a];
                        inside &= i >= 0 && i < v.sp[a];
                        cell = cell * v.sp[a] + i;
                    }
                    if (inside)
                        cc_store(t, grad->data, c * nin + cell,
                                 cc_load(t, grad->data, c * nin + cell) +
                                     cc_load(t, gv->data, c * nout + flat) / (double)count);
                } while (hp_next(j, v.w, v.ns));
            }
            flat++;
        } while (hp_next(oi, v.y, v.ns));
    }
    free(x);
    return st;
}

static cc_status hp_forward(void *ctx, const cc_call *call, cc_view *out, char *msg, size_t len)
{
    return hp_run(ctx, call, out, NULL, NULL, msg, len);
}

static cc_status hp_vjp(void *ctx, const cc_call *call, const cc_view *g, cc_view *grads,
                        char *msg, size_t len)
{
    return grads[0].data ? hp_run(ctx, call, NULL, g, &grads[0], msg, len) : CC_OK;
}

static int pool_case(const cc_case *c)
{
    return !strcmp(c->op->name, "maxPool") || !strcmp(c->op->name, "avgPool");
}

static void test_pool_plan_view_computes_the_contract(void **state)
{
    (void)state;
    hp_opts o = {0};
    cc_provider p = {CC_PROVIDER_ABI_VERSION, "pool-plan-host", &o, NULL, hp_forward, hp_vjp,
                     NULL, vjp_mode_backend, NULL};
    cc_t_tally t = run_selected(&p, pool_case);
    printf("pooling lines on the plan's cuDNN view: %ld cases, %ld passed\n", t.cases, t.passed);
    assert_true(t.cases >= 60);
    if (t.not_passed)
        fail_msg("%ld cases did not pass; first: %s", t.not_passed, t.first_failure);
    /* ties: the forward runs, the VJP is refused (the bf16 tie case of tests/mutants.cases) */
    cc_result r;
    cc_t_run_line(&p, "maxPool dtype=bf16 in=[4,1024] kernel=[4] stride=[4] pad=[0] check=fwd "
                      "seed=1", &r);
    assert_int_equal(r.status, CC_RES_PASS);
    cc_t_run_line(&p, "maxPool dtype=bf16 in=[4,1024] kernel=[4] stride=[4] pad=[0] check=vjp "
                      "seed=1", &r);
    assert_int_equal(r.status, CC_RES_UNSUPPORTED);
    assert_non_null(strstr(r.message, "tied maximum"));
    /* planted: averaging over the real cells only (count_exclude_pad) */
    hp_opts bad = {1};
    p.ctx = &bad;
    cc_t_run_line(&p, "avgPool dtype=f32 in=[2,9] kernel=[3] stride=[2] pad=[1] seed=67", &r);
    assert_int_equal(r.status, CC_RES_FAIL);
}

/* ==== batchNorm plan ======================================================================== */

static ccu_bn_plan bn_plan_of(const char *line, cc_status want, char *msg, size_t len)
{
    cc_case c = cc_t_parse_case(line);
    cc_view v[5];
    memset(v, 0, sizeof v);
    for (int i = 0; i < c.n_in; i++) {
        v[i].dtype = c.dtype;
        v[i].rank = c.shape[i].rank;
        memcpy(v[i].shape, c.shape[i].dim, sizeof(int64_t) * (size_t)v[i].rank);
    }
    cc_call call = {c.op->name, &c.params, CC_CUDA, c.dtype, c.n_in, v};
    ccu_bn_plan pl;
    cc_status st = ccu_bn_plan_make(&call, &pl, msg, len);
    if (st != want)
        fail_msg("%s: status %d, wanted %d (%s)", line, (int)st, (int)want, msg);
    return pl;
}

static void test_bn_plan(void **state)
{
    (void)state;
    char msg[256] = "";
    ccu_bn_plan pl = bn_plan_of("batchNorm dtype=f32 in=[3,4,5],[3],[3] training=1", CC_OK, msg,
                                sizeof msg);
    assert_true(pl.training);
    assert_false(pl.empty);
    expect_ints(pl.x_dims, (const int[]){1, 3, 20, 1}, 4, "x_dims");
    assert_true(pl.eps == 1e-5); /* TorchLean's default, passed as it is */
    pl = bn_plan_of("batchNorm dtype=f64 in=[4],[4],[4] training=1", CC_OK, msg, sizeof msg);
    expect_ints(pl.x_dims, (const int[]){1, 4, 1, 1}, 4, "x_dims"); /* one position */
    pl = bn_plan_of("batchNorm dtype=f32 in=[2,3,4,5],[2],[2],[2],[2] training=0 eps=0.25", CC_OK,
                    msg, sizeof msg);
    assert_false(pl.training);
    expect_ints(pl.x_dims, (const int[]){1, 2, 60, 1}, 4, "x_dims");
    assert_true(pl.eps == 0.25);
    pl = bn_plan_of("batchNorm dtype=f64 in=[2,0],[2],[2],[2],[2] training=0", CC_OK, msg,
                    sizeof msg);
    assert_true(pl.empty);
    pl = bn_plan_of("batchNorm dtype=f64 in=[0,3],[0],[0] training=1", CC_OK, msg, sizeof msg);
    assert_true(pl.empty);
    /* the running variance as the contract reads it */
    double v[4] = {-1.5, -0.0, 2.0, NAN};
    ccu_bn_clamp_variance(CC_F64, v, 4);
    assert_true(v[0] == 0.0 && v[1] == 0.0 && v[2] == 2.0 && isnan(v[3]));
    float f[2] = {-3.0f, 0.5f};
    ccu_bn_clamp_variance(CC_F32, f, 2);
    assert_true(f[0] == 0.0f && f[1] == 0.5f);
}

/* ==== the case file covers what the providers claim ======================================= */

static int has_zero_dim(const cc_case *c)
{
    for (int i = 0; i < c->n_in; i++)
        for (int a = 0; a < c->shape[i].rank; a++)
            if (c->shape[i].dim[a] == 0)
                return 1;
    return 0;
}

static void expect_cover(const char *op, cc_dtype d0, cc_dtype d1)
{
    int seen[2][CC_LAYOUT_COUNT] = {{0}}, zero = 0;
    for (size_t i = 0; i < cases.n; i++) {
        const cc_case *c = &cases.v[i];
        if (strcmp(c->op->name, op) || (c->dtype != d0 && c->dtype != d1))
            continue;
        seen[c->dtype == d1][c->layout]++;
        zero += has_zero_dim(c);
    }
    for (int d = 0; d < 2; d++)
        for (int l = 0; l <= CC_LAYOUT_BCAST; l++) /* the four classes of the case file */
            if (!seen[d][l])
                fail_msg("cases/cuda_providers.cases has no %s %s case with layout %s", op,
                         cc_dtype_name(d ? d1 : d0), cc_layout_name((cc_layout)l));
    if (!zero)
        fail_msg("cases/cuda_providers.cases has no %s case with a zero-size dimension", op);
}

static void test_case_file_covers_the_claims(void **state)
{
    (void)state;
    static const char *const dnn[] = {"maxPool", "avgPool", "batchNorm", "softmax", "logSoftmax"};
    for (size_t i = 0; i < sizeof dnn / sizeof dnn[0]; i++)
        expect_cover(dnn[i], CC_F32, CC_F64);
    static const char *const blas[] = {"matmul", "scaledMatmul", "linear"};
    for (size_t i = 0; i < sizeof blas / sizeof blas[0]; i++)
        expect_cover(blas[i], CC_F16, CC_BF16);
    expect_cover("fftFno", CC_F32, CC_F64);
    /* the edge geometries named in the file */
    int spatial[4] = {0}, padded = 0, one_position = 0, training[2] = {0}, full = 0, none = 0;
    int variant0_layouts[CC_LAYOUT_COUNT] = {0};
    for (size_t i = 0; i < cases.n; i++) {
        const cc_case *c = &cases.v[i];
        const ref_params *p = &c->params;
        if (pool_case(c)) {
            spatial[p->spatial]++;
            for (int a = 0; a < p->spatial; a++)
                padded += p->pad[a] > 0 && p->stride[a] > 1;
        }
        if (!strcmp(c->op->name, "batchNorm")) {
            training[p->training != 0]++;
            int64_t n = 1;
            for (int a = 1; a < c->shape[0].rank; a++)
                n *= c->shape[0].dim[a];
            one_position += p->training && n == 1 && c->shape[0].dim[0] > 0;
        }
        if (!strcmp(c->op->name, "fftFno") && p->variant == 0) {
            full += p->modes == c->shape[0].dim[0] / 2 + 1;
            none += p->modes == 0;
            variant0_layouts[c->layout]++;
        }
    }
    assert_true(spatial[1] && spatial[2] && spatial[3] && padded);
    assert_true(training[0] && training[1] && one_position);
    assert_true(full >= 2 && none);
    for (int l = 0; l <= CC_LAYOUT_BCAST; l++)
        if (!variant0_layouts[l])
            fail_msg("no spectralConv case with layout %s", cc_layout_name((cc_layout)l));
}

/* Only a machine without a GPU skips the CUDA tests: a failing device count with an NVIDIA
 * device node present (a broken driver on a GPU runner) is a failure; "none visible"
 * (CUDA_VISIBLE_DEVICES) and a machine without nodes are "no CUDA device". */
static void test_only_no_device_is_a_skip(void **state)
{
    (void)state;
    char dir[] = "/tmp/capcheck_dev_XXXXXX", node[64], msg[512];
    assert_non_null(mkdtemp(dir));
    const char *driver = "CUDA driver version is insufficient for CUDA runtime version";
    assert_int_equal(cc_cuda_device_status(1, 0, driver, 0, dir, msg, sizeof msg),
                     CC_UNSUPPORTED);
    assert_string_equal(msg, "no CUDA device: CUDA driver version is insufficient for CUDA "
                             "runtime version");
    assert_int_equal(cc_cuda_device_status(0, 0, "no error", 0, dir, msg, sizeof msg),
                     CC_UNSUPPORTED);
    assert_string_equal(msg, "no CUDA device: cudaGetDeviceCount found 0");
    /* nodes that are not a device: the control and UVM nodes, a name with letters after */
    const char *not_devices[] = {"nvidiactl", "nvidia-uvm", "nvidia0x", "nvidia"};
    for (int i = 0; i < 4; i++) {
        snprintf(node, sizeof node, "%s/%s", dir, not_devices[i]);
        FILE *f = fopen(node, "w");
        assert_non_null(f);
        assert_int_equal(fclose(f), 0);
    }
    assert_int_equal(cc_cuda_device_status(1, 0, driver, 0, dir, msg, sizeof msg),
                     CC_UNSUPPORTED);
    snprintf(node, sizeof node, "%s/nvidia3", dir);
    FILE *f = fopen(node, "w");
    assert_non_null(f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(cc_cuda_device_status(1, 0, driver, 0, dir, msg, sizeof msg), CC_FAILED);
    if (!strstr(msg, "this machine has a GPU (") || !strstr(msg, "/nvidia3) but the CUDA runtime "
                                                                  "cannot count it: CUDA driver"))
        fail_msg("%s", msg);
    assert_int_equal(cc_cuda_device_status(0, 0, "no error", 0, dir, msg, sizeof msg), CC_FAILED);
    assert_int_equal(cc_cuda_device_status(1, 1, "no CUDA-capable device is detected", 0, dir,
                                           msg, sizeof msg),
                     CC_UNSUPPORTED); /* hidden from this process on purpose */
    assert_int_equal(cc_cuda_device_status(0, 0, "no error", 2, dir, msg, sizeof msg), CC_OK);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_lowering_halves_pass),
        cmocka_unit_test(test_gemm_lowering_halves_teeth),
        cmocka_unit_test(test_fft_lowering_passes),
        cmocka_unit_test(test_fft_lowering_teeth),
        cmocka_unit_test(test_fft_adjust_spectrum),
        cmocka_unit_test(test_pool_plan_dims),
        cmocka_unit_test(test_pool_plan_refuses_dilation),
        cmocka_unit_test(test_pool_plan_matches_reference_shapes),
        cmocka_unit_test(test_maxpool_scan),
        cmocka_unit_test(test_pool_plan_view_computes_the_contract),
        cmocka_unit_test(test_bn_plan),
        cmocka_unit_test(test_case_file_covers_the_claims),
        cmocka_unit_test(test_only_no_device_is_a_skip),
    };
    return cmocka_run_group_tests_name("cuda_host", tests, setup, teardown);
}
