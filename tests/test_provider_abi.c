/* Provider ABI version 2 and the declared compute roundoff (abi/capcheck_provider.h,
 * compute_roundoff; harness/run/compare.h, cc_bound_for_compute).
 *
 *   - the bound model: u = max(declared, u(dtype)) + 2^-53; nothing declared (0) or a finer
 *     declaration is the dtype's bound; the usable range is 0 .. 2^-8;
 *   - teeth: an f32 matmul on TF32-rounded inputs (10 mantissa bits, what tensor cores do)
 *     passes when its provider declares 2^-11 and fails the f32 model when it does not (the
 *     mutants plugin's undeclared matmul_tf32 is the same bug, caught); a provider declaring
 *     a roundoff coarser than bf16's, or NaN, makes the case an error with one sentence;
 *   - a version-1 plugin (table ending at vjp_mode) still loads, runs, and gets no
 *     compute_roundoff from bytes past its table; an ABI from the future is refused;
 *   - the math modes from the command line (--tf32, --deterministic, --attention) reach the
 *     ATen provider through CAPCHECK_TF32 / CAPCHECK_DETERMINISTIC / CAPCHECK_ATTENTION and
 *     come back in report.json's provenance.math_modes; bad values are one sentence, exit 2;
 *   - vjp_mode is asked once per provider and op by a worker that keeps the answers
 *     (cc_vjp_modes), and two providers' answers for one op stay each their own. */
#include "tests/cli_util.h" /* first: it sets _POSIX_C_SOURCE and includes cmocka */
#include "tests/skip_util.h"

#include <math.h>

#include "harness/case/case.h"
#include "harness/run/compare.h"
#include "core/dtype.h"
#include "harness/run/plugin.h"
#include "harness/run/runner.h"

static void test_bound_model(void **state)
{
    (void)state;
    const double u64 = ldexp(1.0, -53);
    cc_bound_model f32 = cc_bound_for(CC_F32, 2.0);
    assert_true(f32.u == ldexp(1.0, -24) + u64);
    assert_true(cc_bound_for_compute(CC_F32, 0.0, 2.0).u == f32.u);
    assert_true(cc_bound_for_compute(CC_F32, ldexp(1.0, -11), 2.0).u == ldexp(1.0, -11) + u64);
    assert_true(cc_bound_for_compute(CC_F32, ldexp(1.0, -11), 2.0).floor == f32.floor);
    assert_true(cc_bound_for_compute(CC_F32, ldexp(1.0, -11), 3.0).c_op == 3.0);
    /* finer than the dtype: the output is still rounded to the dtype */
    assert_true(cc_bound_for_compute(CC_F16, ldexp(1.0, -24), 1.0).u ==
                cc_bound_for(CC_F16, 1.0).u);
    assert_true(cc_compute_roundoff_valid(0.0));
    assert_true(cc_compute_roundoff_valid(ldexp(1.0, -11)));
    assert_true(cc_compute_roundoff_valid(ldexp(1.0, -8)));
    assert_false(cc_compute_roundoff_valid(ldexp(1.0, -7)));
    assert_false(cc_compute_roundoff_valid(-1e-9));
    assert_false(cc_compute_roundoff_valid(NAN));
}

/* ---- an in-process provider: the reference with TF32-rounded f32 matmul operands ------------ */

typedef struct {
    double declared; /* what compute_roundoff answers for f32 matmul */
} tf32_ctx;

static double round_tf32(double x) /* float32 range, 10 explicit mantissa bits, nearest-even */
{
    if (x == 0 || !isfinite(x))
        return x;
    int e;
    double m = frexp(x, &e);
    return ldexp(nearbyint(m * 2048.0) / 2048.0, e);
}

static cc_status tf32_forward(void *ctx, const cc_call *call, cc_view *out, char *msg, size_t len)
{
    (void)ctx;
    const cc_provider *ref = cc_reference_provider();
    if (strcmp(call->op, "matmul") || call->dtype != CC_F32 || call->n_in != 2)
        return ref->forward(ref->ctx, call, out, msg, len);
    cc_view in[2];
    float *buf[2] = {NULL, NULL};
    cc_status st = CC_OK;
    for (int k = 0; k < 2 && st == CC_OK; k++) {
        const cc_view *v = &call->in[k];
        int64_t n = 1;
        for (int d = 0; d < v->rank; d++)
            n *= v->shape[d];
        buf[k] = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
        if (!buf[k]) {
            st = CC_FAILED;
            break;
        }
        for (int64_t i = 0; i < n; i++) { /* the strided element i, TF32-rounded, dense */
            int64_t off = 0, rest = i;
            for (int d = v->rank - 1; d >= 0; d--) {
                off += (rest % v->shape[d]) * v->strides[d];
                rest /= v->shape[d];
            }
            buf[k][i] = (float)round_tf32(((const float *)v->data)[off]);
        }
        in[k] = *v;
        in[k].data = buf[k];
        for (int d = v->rank - 1, s = 1; d >= 0; d--) {
            in[k].strides[d] = s;
            s *= (int)v->shape[d];
        }
    }
    if (st == CC_OK) {
        cc_call c = *call;
        c.in = in;
        st = ref->forward(ref->ctx, &c, out, msg, len);
    }
    free(buf[0]);
    free(buf[1]);
    return st;
}

static double tf32_roundoff(void *ctx, const char *op, cc_dtype dtype, cc_device device)
{
    (void)device;
    return dtype == CC_F32 && strcmp(op, "matmul") == 0 ? ((tf32_ctx *)ctx)->declared : 0.0;
}

static cc_provider tf32_provider(tf32_ctx *ctx, int declares)
{
    const cc_provider *ref = cc_reference_provider();
    cc_provider p = *ref;
    p.name = "tf32-test";
    p.ctx = ctx;
    p.init = NULL;
    p.forward = tf32_forward;
    p.describe = NULL;
    p.compute_roundoff = declares ? tf32_roundoff : NULL;
    return p;
}

static void run_line(const cc_provider *p, const char *line, cc_result *r)
{
    cc_case_defaults def = {CC_CPU, 0};
    cc_case c;
    cc_parse_error err;
    memset(&err, 0, sizeof err);
    if (cc_case_parse(line, &def, &c, &err))
        fail_msg("%s: column %d: %s", line, err.column, err.msg);
    cc_run_case(p, &c, r);
}

static void test_tf32_declared_and_undeclared(void **state)
{
    (void)state;
    static const char *const lines[] = {
        "matmul dtype=f32 in=[32,16],[16,32] check=fwd seed=3",
        "matmul dtype=f32 in=[2,8,24],[24,8] layout=transpose check=fwd seed=4",
        "matmul dtype=f32 in=[16,12],[12,16] layout=stride2 check=fwd seed=5",
    };
    tf32_ctx ctx = {ldexp(1.0, -11)};
    cc_provider declared = tf32_provider(&ctx, 1), bare = tf32_provider(&ctx, 0);
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        cc_result with, without;
        run_line(&declared, lines[i], &with);
        run_line(&bare, lines[i], &without);
        printf("%s: declared %s ratio %.3g, undeclared %s ratio %.3g\n", lines[i],
               cc_result_status_name(with.status), with.fwd_ratio,
               cc_result_status_name(without.status), without.fwd_ratio);
        assert_int_equal(with.status, CC_RES_PASS);
        assert_int_equal(without.status, CC_RES_FAIL);
        assert_true(without.fwd_ratio > 1.0);
    }
    /* f64 and other ops are untouched by the declaration: the reference itself passes */
    cc_result r;
    run_line(&declared, "matmul dtype=f64 in=[8,8],[8,8] seed=6", &r);
    assert_int_equal(r.status, CC_RES_PASS);
    /* out of range declarations are errors, not looser bounds */
    ctx.declared = 1.0;
    run_line(&declared, lines[0], &r);
    assert_int_equal(r.status, CC_RES_ERROR);
    assert_non_null(strstr(r.message, "declares a compute roundoff of 1"));
    ctx.declared = NAN;
    run_line(&declared, lines[0], &r);
    assert_int_equal(r.status, CC_RES_ERROR);
}

static void test_v1_plugin(void **state)
{
    (void)state;
    char msg[1024] = "";
    cc_plugin *pl = cc_plugin_open(CAPCHECK_PLUGIN_DIR "/abi_v1.so", msg, sizeof msg);
    if (!pl)
        fail_msg("%s", msg);
    const cc_provider *p = cc_plugin_provider(pl);
    assert_int_equal(p->abi_version, 1);
    assert_string_equal(p->name, "abi-v1");
    assert_null(p->compute_roundoff); /* not the pointer that follows its table */
    cc_result r;
    run_line(p, "neg dtype=f64 in=[3,5] layout=transpose check=fwd seed=2", &r);
    assert_int_equal(r.status, CC_RES_PASS);
    cc_plugin_close(pl);
    assert_null(cc_plugin_open(CAPCHECK_PLUGIN_DIR "/bad_abi.so", msg, sizeof msg));
    assert_non_null(strstr(msg, "ABI version 99"));
    assert_non_null(strstr(msg, "versions 1 to 2"));
}

static void test_math_modes_cli(void **state)
{
    (void)state;
#if CAPCHECK_HAVE_ATEN
    char out[16384], dir[] = "/tmp/capcheck_modes_XXXXXX", in_dir[64];
    assert_non_null(mkdtemp(dir));
    snprintf(in_dir, sizeof in_dir, "cd %s && ", dir); /* every run's --out is its folder o */
    char det_env[128], clean_env[160], tf32_env[128];
    snprintf(det_env, sizeof det_env, "%sCAPCHECK_DETERMINISTIC=1 ", in_dir);
    snprintf(clean_env, sizeof clean_env, "%senv -u CAPCHECK_TF32 -u CAPCHECK_DETERMINISTIC ",
             in_dir);
    snprintf(tf32_env, sizeof tf32_env, "%sCAPCHECK_TF32=yes ", in_dir);
    assert_int_equal(cc_t_run(in_dir,
                              "run --op exp --tf32 on --deterministic on --attention composed "
                              "--out o -j 1 --force",
                              out, sizeof out),
                     0);
    char path[256];
    snprintf(path, sizeof path, "%s/o/report.json", dir);
    char *rep = cc_t_slurp(path, NULL);
    assert_non_null(rep);
    assert_non_null(strstr(rep, "\"deterministic\": \"on\""));
    assert_non_null(strstr(rep, "\"attention\": \"composed (no SDPA)\""));
#if CAPCHECK_HAVE_ATEN_CUDA
    assert_non_null(strstr(rep, "\"tf32\": \"on ("));
#else
    assert_non_null(strstr(rep, "\"tf32\": \"off (no CUDA: CAPCHECK_TF32=1 has no effect"));
#endif
    free(rep);
    snprintf(path, sizeof path, "%s/o/report.md", dir);
    rep = cc_t_slurp(path, NULL);
    assert_non_null(rep);
    assert_non_null(strstr(rep, "; deterministic on; attention composed (no SDPA)"));
    free(rep);
    /* the environment is honoured when no flag is given; the defaults are off */
    assert_int_equal(cc_t_run(det_env, "run --op neg --out o -j 1 --force",
                              out, sizeof out),
                     0);
    snprintf(path, sizeof path, "%s/o/report.json", dir);
    rep = cc_t_slurp(path, NULL);
    assert_non_null(strstr(rep, "\"deterministic\": \"on\""));
    free(rep);
    assert_int_equal(cc_t_run(clean_env,
                              "run --op neg --out o -j 1 --force", out, sizeof out),
                     0);
    rep = cc_t_slurp(path, NULL);
    assert_non_null(strstr(rep, "\"deterministic\": \"off\""));
    assert_non_null(strstr(rep, "\"tf32\": \"off ("));
    free(rep);
    /* refusals: one sentence each, exit 2 */
    assert_int_equal(cc_t_run(in_dir, "run --op neg --tf32 sometimes --out o --force",
                              out, sizeof out),
                     2);
    assert_non_null(strstr(out, "--tf32 wants on or off, not 'sometimes'"));
    assert_int_equal(cc_t_run(in_dir, "run --op neg --deterministic 1 --out o --force",
                              out, sizeof out),
                     2);
    assert_non_null(strstr(out, "--deterministic wants on or off"));
    assert_int_equal(cc_t_run(in_dir, "run --op neg --attention sdpa --out o --force",
                              out, sizeof out),
                     2);
    assert_non_null(strstr(out, "--attention wants composed, math, flash"));
    /* a mode the provider cannot honour: it does not initialise, nothing could be judged */
    assert_int_equal(cc_t_run(in_dir, "run --op neg --attention flash --out o --force",
                              out, sizeof out),
                     125);
    assert_non_null(strstr(out, "calls no SDPA backend"));
    assert_int_equal(cc_t_run(tf32_env, "run --op neg --out o --force",
                              out, sizeof out),
                     125);
    assert_non_null(strstr(out, "CAPCHECK_TF32=yes: set it to 1 (on) or 0 (off)"));
    /* no CUDA here: one sentence, never a run on the CPU */
    int rc = cc_t_run(in_dir, "run --op neg --device cuda --out o --force", out,
                      sizeof out);
    if (rc != 0 && rc != 1) {
        assert_int_equal(rc, 125);
#if CAPCHECK_HAVE_ATEN_CUDA
        assert_non_null(strstr(out, "provider aten cannot run on cuda: no CUDA device: "));
#else
        assert_non_null(strstr(out, "the ATen provider was built without CUDA"));
#endif
    }
    assert_int_equal(cc_t_remove_dir(dir), 0);
#else
    cc_t_skip("capcheck was built without the ATen provider: the CLI math-mode checks need it");
#endif
}

static int modes_asked[2];
static const char *mode_a(void *ctx, const char *op)
{
    (void)ctx, (void)op;
    modes_asked[0]++;
    return "backendVJP";
}
static const char *mode_b(void *ctx, const char *op)
{
    (void)ctx;
    modes_asked[1]++;
    return strcmp(op, "add") == 0 ? "torchLeanTape" : NULL;
}

static void test_vjp_modes_kept(void **state)
{
    (void)state;
    cc_provider a = {.abi_version = CC_PROVIDER_ABI_VERSION, .name = "a", .vjp_mode = mode_a};
    cc_provider b = {.abi_version = CC_PROVIDER_ABI_VERSION, .name = "b", .vjp_mode = mode_b};
    cc_case_defaults def = {CC_CPU, 0};
    cc_case_list l = {0};
    cc_parse_error err;
    assert_int_equal(cc_cases_parse_text("add count=2 dtype=f32 size=tiny\n"
                                         "relu count=2 dtype=f32 size=tiny\n",
                                         "t", &def, &l, &err),
                     0);
    cc_vjp_modes kept;
    memset(&kept, 0, sizeof kept);
    cc_result r;
    /* one provider, each op's cases in a row (add, add, relu, relu), three rounds: asked at
     * most once per op and round (once per op unless the two share a slot), not per case */
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < l.n; i++) {
            cc_result_begin_kept(&a, &l.v[i], &kept, &r);
            assert_string_equal(r.vjp_mode, "backendVJP");
        }
    assert_true(modes_asked[0] >= 2 && modes_asked[0] <= 6);
    /* two providers taking turns on one memo: each gets its own answer, never the other's */
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < l.n; i++) {
            int is_add = strcmp(l.v[i].op->name, "add") == 0;
            cc_result_begin_kept(&b, &l.v[i], &kept, &r);
            assert_string_equal(r.vjp_mode, is_add ? "torchLeanTape" : "unknown");
            cc_result_begin_kept(&a, &l.v[i], &kept, &r);
            assert_string_equal(r.vjp_mode, "backendVJP");
            cc_result_begin(&b, &l.v[i], &r); /* without a memo: asked, the same text */
            assert_string_equal(r.vjp_mode, is_add ? "torchLeanTape" : "unknown");
        }
    cc_case_list_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bound_model),
        cmocka_unit_test(test_tf32_declared_and_undeclared),
        cmocka_unit_test(test_v1_plugin),
        cmocka_unit_test(test_math_modes_cli),
        cmocka_unit_test(test_vjp_modes_kept),
    };
    return cc_t_exit_code(cmocka_run_group_tests_name("provider_abi", tests, NULL, NULL));
}
