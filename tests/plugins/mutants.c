/* The planted-bug provider: the float64 reference behind the plugin ABI, with one deliberate
 * bug switched on by the environment variable CAPCHECK_MUTANT=<name> (unset or empty: no bug,
 * and the plugin must then pass every case). tests/test_mutants.c runs the smoke suite and
 * tests/mutants.cases through it once per mutant and checks that the harness catches each one.
 *
 * Each mutant is a bug a real kernel has had: a wrong axis, an off-by-one loop bound, a dropped
 * gradient term, a wrong tie rule, a few ulp too loose, a stride ignored, a crash on an empty
 * tensor, a softmax that overflows without its max subtraction (caught by edge=huge/inf); and
 * the classes of issue 14: softplus's threshold at moderate x, a one-pass variance on large-mean
 * rows, an f64 parameter rounded to float32, a rank-3 kernel given rank 4, one layout assumed
 * for every input, reads and writes one element outside a buffer (the guard pages), kernels
 * wrong on every third and every 30th call and one whose bits vary from call to call
 * (--repeat); and what the worst-case bound cannot see: a long blocked sum that loses a block,
 * adds it twice or sums it in float16 (the probabilistic bound), a matmul that truncates its
 * float32 result to f16/bf16 (the rounding-bias test). Beside the mutants, correct variants (a
 * float32 left fold, a blocked sum, a float32 matmul rounded once, a flash-style attention, an
 * alignment-dependent reduceSum) that must pass everything.
 *
 * Beside the mutants, a hold for the tests that kill a run part way (tests/cli_util.h,
 * cc_t_run_and_kill): with MUTANTS_HOLD_FILE=<path> and MUTANTS_HOLD_AFTER=<n>, the first n
 * forward calls of the whole run (every worker process counted in the file, one '.' a call) go
 * through and every later one writes an 'h' there and sleeps until its process is killed: the
 * run stops after exactly n forward calls, however fast the machine. (Not CAPCHECK_*: how a test
 * stops a run is no part of how a case runs, and a repro line carries only CAPCHECK_*.) */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/dtype.h"
#include "core/view.h"
#include "abi/capcheck_provider.h"

#define EXPORT __attribute__((visibility("default")))

/* The variable that selects the mutant, and the provider's name. A second build of this file,
 * mutants_witness.so (CMakeLists.txt), reads CAPCHECK_WITNESS_MUTANT and is "mutants-witness":
 * a witness whose bug is planted independently of the primary's (tests/test_witness.c: the same
 * bug in both is a planted reference-suspect case, another bug a disputed one). */
#ifndef CC_MUTANT_ENV
#define CC_MUTANT_ENV "CAPCHECK_MUTANT"
#endif
#ifndef CC_MUTANT_PROVIDER
#define CC_MUTANT_PROVIDER "mutants"
#endif
/* Two more builds test how evidence binds to the provider that ran (CMakeLists.txt):
 * mutants_aten.so calls itself "aten" (the loader must refuse it), mutants_odd.so has a name
 * that is hard on Lean text ("2fast-/a_b") and a description that claims a libtorch version
 * (CC_MUTANT_CLAIMS_LIBTORCH: the report must not believe it); it also takes its name and a
 * description from CAPCHECK_MUTANT_NAME and CAPCHECK_MUTANT_DESCRIPTION when they are set
 * (CC_MUTANT_NAME_FROM_ENV: tests/check_lean_emit.py runs it under names hard on Lean text). */
#ifdef CC_MUTANT_CLAIMS_LIBTORCH
#define CC_MUTANT_DESCRIPTION_HEAD "libtorch 2.15.0; cuda 12.1; "
#else
#define CC_MUTANT_DESCRIPTION_HEAD ""
#endif

/* ---- helpers ------------------------------------------------------------------------------- */

static const cc_provider *ref(void)
{
    return cc_reference_provider();
}

static int64_t view_numel(const cc_view *v)
{
    int64_t n = 1;
    for (int a = 0; a < v->rank; a++)
        n *= v->shape[a];
    return n;
}

/* A dense float64 view over x with the shape of `like`. */
static cc_view f64_view(const cc_view *like, double *x)
{
    cc_view v = *like;
    v.dtype = CC_F64;
    v.data = x;
    ref_shape s = {like->rank, {0}};
    memcpy(s.dim, like->shape, sizeof(int64_t) * (size_t)like->rank);
    cc_dense_strides(&s, v.strides);
    return v;
}

static double *dense(const cc_view *v)
{
    ref_shape s;
    return cc_view_to_dense(v, &s);
}

/* The reference forward of `call` into a fresh dense float64 buffer shaped like out. */
static double *ref_forward_f64(const cc_call *call, const cc_view *out, char *msg, size_t len,
                               cc_status *st)
{
    int64_t n = view_numel(out);
    double *y = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (!y) {
        *st = CC_FAILED;
        return NULL;
    }
    cc_view t = f64_view(out, y);
    *st = ref()->forward(NULL, call, &t, msg, len);
    if (*st != CC_OK) {
        free(y);
        return NULL;
    }
    return y;
}

static void store_all(cc_view *out, const double *y)
{
    int64_t n = view_numel(out);
    for (int64_t i = 0; i < n; i++)
        cc_store(out->dtype, out->data, i, y[i]);
}

/* outer x len x inner around axis ax of v. */
static void split_axis(const cc_view *v, int ax, int64_t *outer, int64_t *len, int64_t *inner)
{
    *outer = *inner = 1;
    *len = v->shape[ax];
    for (int a = 0; a < v->rank; a++)
        if (a < ax)
            *outer *= v->shape[a];
        else if (a > ax)
            *inner *= v->shape[a];
}

static double round_tf32(double x) /* float32 range, 10 explicit mantissa bits, nearest-even */
{
    if (x == 0 || !isfinite(x))
        return x;
    int e;
    double m = frexp(x, &e); /* |m| in [0.5, 1) */
    return ldexp(nearbyint(m * 2048.0) / 2048.0, e);
}

/* ---- the mutants ----------------------------------------------------------------------------- */

typedef cc_status (*fwd_fn)(const cc_call *call, cc_view *out, char *msg, size_t len);
typedef cc_status (*vjp_fn)(const cc_call *call, const cc_view *g, cc_view *grads, char *msg,
                            size_t len);

/* softmax over the next axis instead of the requested one (forward and VJP agree). */
static int next_axis(const cc_call *call, ref_params *p)
{
    int r = call->in[0].rank;
    int ax = ref_norm_axis(call->params->axis, r);
    if (r < 2 || ax < 0)
        return 0;
    *p = *call->params;
    p->axis = (ax + 1) % r;
    return 1;
}

static cc_status softmax_axis_fwd(const cc_call *call, cc_view *out, char *msg, size_t len)
{
    cc_call c = *call;
    ref_params p;
    if (next_axis(call, &p))
        c.params = &p;
    return ref()->forward(NULL, &c, out, msg, len);
}

static cc_status softmax_axis_vjp(const cc_call *call, const cc_view *g, cc_view *grads,
                                  char *msg, size_t len)
{
    cc_call c = *call;
    ref_params p;
    if (next_axis(call, &p))
        c.params = &p;
    return ref()->vjp(NULL, &c, g, grads, msg, len);
}

/* reduceSum's loop stops one short: the last element along the axis is never added. */
static cc_status reducesum_off_by_one_fwd(const cc_call *call, cc_view *out, char *msg, size_t len)
{
    cc_call c = *call;
    cc_view in[REF_MAX_INPUTS];
    memcpy(in, call->in, sizeof(cc_view) * (size_t)call->n_in);
    int ax = ref_norm_axis(call->params->axis, in[0].rank);
    if (ax >= 0 && in[0].shape[ax] > 0)
        in[0].shape[ax]--;
    c.in = in;
    return ref()->forward(NULL, &c, out, msg, len);
}

/* linear reads w [out, in] as if it were stored transposed ([in, out] row-major). */
static cc_status linear_transposed_w_fwd(const cc_call *call, cc_view *out, char *msg, size_t len)
{
    const cc_view *w = &call->in[1];
    if (w->rank != 2)
        return ref()->forward(NULL, call, out, msg, len);
    int64_t O = w->shape[0], I = w->shape[1];
    double *wd = dense(w), *wt = calloc((size_t)(O * I > 0 ? O * I : 1), sizeof(double));
    cc_status st = CC_FAILED;
    if (wd && wt) {
        for (int64_t o = 0; o < O; o++)
            for (int64_t i = 0; i < I; i++)
                wt[o * I + i] = wd[i * O + o];
        cc_call c = *call;
        cc_view in[REF_MAX_INPUTS];
        memcpy(in, call->in, sizeof(cc_view) * (size_t)call->n_in);
        in[1] = f64_view(w, wt);
        c.in = in;
        st = ref()->forward(NULL, &c, out, msg, len);
    }
    free(wd);
    free(wt);
    return st;
}

/* linear's VJP forgets the bias gradient (writes zeros). */
static cc_status linear_no_bias_grad_vjp(const cc_call *call, const cc_view *g, cc_view *grads,
                                         char *msg, size_t len)
{
    cc_status st = ref()->vjp(NULL, call, g, grads, msg, len);
    if (st == CC_OK && call->n_in > 2 && grads[2].data)
        for (int64_t i = 0, n = view_numel(&grads[2]); i < n; i++)
            cc_store(grads[2].dtype, grads[2].data, i, 0.0);
    return st;
}

/* maxPool's VJP routes a tied window's gradient to the last maximum, not the first: the inputs
 * get a ramp far below any float32/bfloat16 spacing, so only exact ties change winner. */
static cc_status maxpool_tie_last_vjp(const cc_call *call, const cc_view *g, cc_view *grads,
                                      char *msg, size_t len)
{
    double *x = dense(&call->in[0]);
    if (!x)
        return CC_FAILED;
    for (int64_t j = 0, n = view_numel(&call->in[0]); j < n; j++)
        if (isfinite(x[j]))
            x[j] += (x[j] != 0 ? fabs(x[j]) : 0x1p-900) * (double)j * 0x1p-50;
    cc_call c = *call;
    cc_view in[REF_MAX_INPUTS];
    memcpy(in, call->in, sizeof(cc_view) * (size_t)call->n_in);
    in[0] = f64_view(&call->in[0], x);
    c.in = in;
    cc_status st = ref()->vjp(NULL, &c, g, grads, msg, len);
    free(x);
    return st;
}

/* layerNorm by hand: (x - mu) / (sqrt(var) + eps) (eps_outside) or with the unbiased
 * variance sum/(N-1) (unbiased). */
static cc_status layernorm_variant(const cc_call *call, cc_view *out, int unbiased)
{
    const cc_view *xv = &call->in[0];
    int ax = ref_norm_axis(call->params->axis, xv->rank);
    int64_t R = 1, N = 1;
    for (int a = 0; a < xv->rank; a++)
        *(a < ax ? &R : &N) *= xv->shape[a];
    double *x = dense(xv), *gm = dense(&call->in[1]), *bt = dense(&call->in[2]);
    double *y = calloc((size_t)(R * N > 0 ? R * N : 1), sizeof(double));
    cc_status st = CC_FAILED;
    if (x && gm && bt && y) {
        double eps = call->params->eps;
        for (int64_t r = 0; r < R; r++) {
            const double *row = x + r * N;
            double mu = 0, var = 0;
            for (int64_t j = 0; j < N; j++)
                mu += row[j];
            mu /= (double)N;
            for (int64_t j = 0; j < N; j++)
                var += (row[j] - mu) * (row[j] - mu);
            double sd = unbiased ? sqrt(var / (double)(N > 1 ? N - 1 : 1) + eps)
                                 : sqrt(var / (double)N) + eps;
            for (int64_t j = 0; j < N; j++)
                y[r * N + j] = (row[j] - mu) / sd * gm[j] + bt[j];
        }
        store_all(out, y);
        st = CC_OK;
    }
    free(x);
    free(gm);
    free(bt);
    free(y);
    return st;
}

static cc_status layernorm_eps_outside_fwd(const cc_call *call, cc_view *out, char *msg,
                                           size_t len)
{
    (void)msg;
    (void)len;
    return layernorm_variant(call, out, 0);
}

static cc_status layernorm_unbiased_var_fwd(const cc_call *call, cc_view *out, char *msg,
                                            size_t len)
{
    (void)msg;
    (void)len;
    return layernorm_variant(call, out, 1);
}

/* gelu in its erf form, where TorchLean's contract is the tanh approximation. */
static cc_status gelu_erf_fwd(const cc_call *call, cc_view *out, char *msg, size_t len)
{
    (void)msg;
    (void)len;
    double *x = dense(&call->in[0]);
    if (!x)
        return CC_FAILED;
    int64_t n = view_numel(out);
    for (int64_t i = 0; i < n; i++)
        x[i] = 0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0)));
    store_all(out, x);
    free(x);
    return CC_OK;
}

/* an epilogue that "sanitizes" its output: NaN becomes 0 (any op). */
static cc_status nan_to_zero_fwd(const cc_call *call, cc_view *out, char *msg, size_t len)
{
    cc_status st;
    double *y = ref_forward_f64(call, out, msg, len, &st);
    if (!y)
        return st;
    for (int64_t i = 0, n = view_numel(out); i < n; i++)
        if (isnan(y[i]))
            y[i] = 0.0;
    store_all(out, y);
    free(y);
    return CC_OK;
}

/* float32 exp 8 ulp high (a polynomial with a biased constant). */
static cc_status exp_8ulp_f32_fwd(const cc_call *call, cc_view *out, char *msg, size_t len)
{
    cc_status st = ref()->forward(NULL, call, out, msg, len);
    if (st != CC_OK || out->dtype != CC_F32)
        return st;
    float *y = out->data;
    for (int64_t i = 0, n = view_numel(out); i < n; i++)
        if (isfinite(y[i]) && y[i] != 0)
            for (int k = 0; k < 8; k++)
                y[i] = nextafterf(y[i], INFINITY);
    return CC_OK;
}

/* every floating input read as if it were dense row-major (strides ignored); what lies past
 * the real buffer reads as NaN (instead of running off the allocation). */
static int contiguous_reads(const cc_call *call, cc_view *in, double **bufs)
{
    memset(bufs, 0, sizeof(double *) * REF_MAX_INPUTS);
    for (int i = 0; i < call->n_in; i++) {
        in[i] = call->in[i];
        if (!cc_dtype_is_float(in[i].dtype))
            continue;
        int64_t n = view_numel(&in[i]), phys = n > 0 ? 1 : 0;
        for (int a = 0; a < in[i].rank && n > 0; a++)
            phys += (in[i].shape[a] - 1) * in[i].strides[a];
        bufs[i] = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
        if (!bufs[i])
            return -1;
        for (int64_t j = 0; j < n; j++)
            bufs[i][j] = j < phys ? cc_load(in[i].dtype, in[i].data, j) : NAN;
        in[i] = f64_view(&call->in[i], bufs[i]);
    }
    return 0;
}

static cc_status ignore_stride_fwd(const cc_call *call, cc_view *out, char *msg, size_t len)
{
    cc_view in[REF_MAX_INPUTS];
    double *bufs[REF_MAX_INPUTS];
    cc_status st = CC_FAILED;
    if (contiguous_reads(call, in, bufs) == 0) {
        cc_call c = *call;
        c.in = in;
        st = ref()->forward(NULL, &c, out, msg, len);
    }
    for (int i = 0; i < REF_MAX_INPUTS; i++)
        free(bufs[i]);
    return st;
}

static cc_status ignore_stride_vjp(const cc_call *call, const cc_view *g, cc_view *grads,
                                   char *msg, size_t len)
{
    cc_view in[REF_MAX_INPUTS];
    double *bufs[REF_MAX_INPUTS];
    cc_status st = CC_FAILED;
    if (contiguous_reads(call, in, bufs) == 0) {
        cc_call c = *call;
        c.in = in;
        st = ref()->vjp(NULL, &c, g, grads, msg, len);
    }
    for (int i = 0; i < REF_MAX_INPUTS; i++)
        free(bufs[i]);
    return st;
}

/* matmul's inner loop runs k < K - 1: the last product term is dropped. */
static cc_status matmul_drop_last_k_fwd(const cc_call *call, cc_view *out, char *msg, size_t len)
{
    cc_call c = *call;
    cc_view in[REF_MAX_INPUTS];
    memcpy(in, call->in, sizeof(cc_view) * (size_t)call->n_in);
    if (in[0].rank >= 1 && in[1].rank >= 1 && in[0].shape[in[0].rank - 1] > 0) {
        in[0].shape[in[0].rank - 1]--;
        in[1].shape[in[1].rank >= 2 ? in[1].rank - 2 : 0]--;
    }
    c.in = in;
    return ref()->forward(NULL, &c, out, msg, len);
}

/* float32 matmul silently on TF32 inputs (10 mantissa bits). */
static cc_status matmul_tf32_fwd(const cc_call *call, cc_view *out, char *msg, size_t len)
{
    if (call->dtype != CC_F32)
        return ref()->forward(NULL, call, out, msg, len);
    double *a = dense(&call->in[0]), *b = dense(&call->in[1]);
    cc_status st = CC_FAILED;
    if (a && b) {
        for (int64_t i = 0, n = view_numel(&call->in[0]); i < n; i++)
            a[i] = round_tf32(a[i]);
        for (int64_t i = 0, n = view_numel(&call->in[1]); i < n; i++)
            b[i] = round_tf32(b[i]);
        cc_call c = *call;
        cc_view in[2] = {f64_view(&call->in[0], a), f64_view(&call->in[1], b)};
        c.in = in;
        st = ref()->forward(NULL, &c, out, msg, len);
    }
    free(a);
    free(b);
    return st;
}

/* relu's VJP passes g through everywhere (the x <= 0 select is missing). */
static cc_status relu_grad_leak_vjp(const cc_call *call, const cc_view *g, cc_view *grads,
                                    char *msg, size_t len)
{
    (void)call;
    (void)msg;
    (void)len;
    if (!grads[0].data)
        return CC_OK;
    double *gd = dense(g);
    if (!gd)
        return CC_FAILED;
    store_all(&grads[0], gd);
    free(gd);
    return CC_OK;
}

/* mul's VJP with the operands swapped: da = g * a, db = g * b. */
static cc_status mul_vjp_swap_vjp(const cc_call *call, const cc_view *g, cc_view *grads,
                                  char *msg, size_t len)
{
    cc_call c = *call;
    cc_view in[2] = {call->in[1], call->in[0]};
    c.in = in;
    return ref()->vjp(NULL, &c, g, grads, msg, len);
}

/* softmax's VJP without the sum term: dx = y * g instead of y * (g - sum(y * g)). */
static cc_status softmax_vjp_no_sum_vjp(const cc_call *call, const cc_view *g, cc_view *grads,
                                        char *msg, size_t len)
{
    if (!grads[0].data)
        return CC_OK;
    cc_status st;
    double *y = ref_forward_f64(call, g, msg, len, &st), *gd = dense(g);
    if (y && gd) {
        for (int64_t i = 0, n = view_numel(g); i < n; i++)
            y[i] *= gd[i];
        store_all(&grads[0], y);
        st = CC_OK;
    } else if (y || gd) {
        st = CC_FAILED;
    }
    free(y);
    free(gd);
    return st;
}

/* The sum of n values x[j stride] as a kernel forms it; `how` says which way (its own enum). */
typedef double (*lane_sum_fn)(const double *x, int64_t n, int64_t stride, int how);

/* reduceSum with every lane (the values along the axis at one outer and inner index) summed by
 * `sum`. */
static cc_status reducesum_by_lanes(const cc_call *call, cc_view *out, char *msg, size_t len,
                                    lane_sum_fn sum, int how)
{
    const cc_view *xv = &call->in[0];
    int ax = ref_norm_axis(call->params->axis, xv->rank);
    if (ax < 0)
        return ref()->forward(NULL, call, out, msg, len);
    int64_t outer, L, inner;
    split_axis(xv, ax, &outer, &L, &inner);
    double *x = dense(xv);
    if (!x)
        return CC_FAILED;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++)
            cc_store(out->dtype, out->data, o * inner + i, sum(x + o * L * inner + i, L, inner, how));
    free(x);
    return CC_OK;
}

/* Folded left with every partial sum rounded to dtype `fold`. */
static double folded_sum(const double *x, int64_t n, int64_t stride, int fold)
{
    double acc = 0;
    for (int64_t j = 0; j < n; j++)
        acc = cc_round_to((cc_dtype)fold, acc + x[j * stride]);
    return acc;
}

/* reduceSum folded left with every partial sum rounded to `fold`. */
static cc_status folded_reducesum(const cc_call *call, cc_view *out, char *msg, size_t len,
                                  cc_dtype fold)
{
    return reducesum_by_lanes(call, out, msg, len, folded_sum, (int)fold);
}

/* float32 reduceSum accumulating in a bfloat16 register. */
static cc_status reducesum_bf16_accum_fwd(const cc_call *call, cc_view *out, char *msg,
                                          size_t len)
{
    return call->dtype == CC_F32 ? folded_reducesum(call, out, msg, len, CC_BF16)
                                 : ref()->forward(NULL, call, out, msg, len);
}

/* f16/bf16 reduceSum folded in the dtype itself (every partial sum rounded to f16/bf16): what the
 * relaxed accumulation mode allows and the strict default (float32 accumulation) does not. */
static cc_status reducesum_dtype_accum_fwd(const cc_call *call, cc_view *out, char *msg,
                                           size_t len)
{
    return call->dtype == CC_F16 || call->dtype == CC_BF16
               ? folded_reducesum(call, out, msg, len, call->dtype)
               : ref()->forward(NULL, call, out, msg, len);
}

/* a kernel that dereferences the data pointer of an empty tensor (any op). */
static cc_status crash_on_empty_fwd(const cc_call *call, cc_view *out, char *msg, size_t len)
{
    for (int i = 0; i < call->n_in; i++)
        if (view_numel(&call->in[i]) == 0)
            raise(SIGSEGV);
    return ref()->forward(NULL, call, out, msg, len);
}

/* exp's output loop stops one short: the last element is never written. */
static cc_status exp_skip_last_fwd(const cc_call *call, cc_view *out, char *msg, size_t len)
{
    cc_status st;
    double *y = ref_forward_f64(call, out, msg, len, &st);
    if (!y)
        return st;
    for (int64_t i = 0, n = view_numel(out); i + 1 < n; i++)
        cc_store(out->dtype, out->data, i, y[i]);
    free(y);
    return CC_OK;
}

/* softmax without the max subtraction, in the case dtype: exp overflows for large logits. */
static cc_status softmax_no_max_sub_fwd(const cc_call *call, cc_view *out, char *msg, size_t len)
{
    const cc_view *xv = &call->in[0];
    int ax = ref_norm_axis(call->params->axis, xv->rank);
    if (ax < 0)
        return ref()->forward(NULL, call, out, msg, len);
    int64_t outer, L, inner;
    split_axis(xv, ax, &outer, &L, &inner);
    double *x = dense(xv);
    if (!x)
        return CC_FAILED;
    cc_dtype t = call->dtype;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double s = 0;
            for (int64_t j = 0; j < L; j++)
                s = cc_round_to(t, s + cc_round_to(t, exp(x[(o * L + j) * inner + i])));
            for (int64_t j = 0; j < L; j++) {
                int64_t k = (o * L + j) * inner + i;
                cc_store(out->dtype, out->data, k, cc_round_to(t, exp(x[k])) / s);
            }
        }
    free(x);
    (void)msg;
    (void)len;
    return CC_OK;
}

/* logSoftmax as log(softmax(x)) with the softmax rounded to the dtype: underflows to -inf. */
static cc_status logsoftmax_via_log_fwd(const cc_call *call, cc_view *out, char *msg, size_t len)
{
    int64_t n = view_numel(out);
    cc_view t = *out;
    t.data = calloc((size_t)(n > 0 ? n : 1), cc_dtype_size(out->dtype));
    if (!t.data)
        return CC_FAILED;
    cc_call c = *call;
    c.op = "softmax";
    cc_status st = ref()->forward(NULL, &c, &t, msg, len);
    if (st == CC_OK)
        for (int64_t i = 0; i < n; i++)
            cc_store(out->dtype, out->data, i, log(cc_load(t.dtype, t.data, i)));
    free(t.data);
    return st;
}


/* ---- value classes, layouts, rank, memory, repeats (issue 14) ---------------------------------- */

/* softplus with PyTorch's default threshold: x itself above 20 (ops.md: TorchLean's softplus has
 * none). Off by log(1 + e^-x) ~ 2e-9 at x = 20: only f64 at moderate x sees it. */
static cc_status softplus_threshold_fwd(const cc_call *call, cc_view *out, char *msg, size_t len)
{
    cc_status st;
    double *y = ref_forward_f64(call, out, msg, len, &st), *x = dense(&call->in[0]);
    if (y && x) {
        for (int64_t i = 0, n = view_numel(out); i < n; i++)
            if (x[i] > 20.0)
                y[i] = x[i];
        store_all(out, y);
        st = CC_OK;
    } else if (y || x) {
        st = CC_FAILED;
    }
    free(y);
    free(x);
    return st;
}

/* The compute type of a kernel that follows the accumulation contract: float32 for f16/bf16. */
static cc_dtype compute_type(cc_dtype t)
{
    return t == CC_F64 ? CC_F64 : CC_F32;
}

/* layerNorm over the rows of x (the axes from `axis` on), each row's mean and variance from
 * `stats` in the case dtype t; y = (x - mean) / sqrt(max(var, 0) + eps) * gamma + beta. */
typedef void (*row_stats_fn)(const double *row, int64_t n, cc_dtype t, double *mean,
                             double *var);

static cc_status layernorm_rows(const cc_call *call, cc_view *out, row_stats_fn stats)
{
    const cc_view *xv = &call->in[0];
    int ax = ref_norm_axis(call->params->axis, xv->rank);
    int64_t R = 1, N = 1;
    for (int a = 0; a < xv->rank; a++)
        *(a < ax ? &R : &N) *= xv->shape[a];
    double *x = dense(xv), *gm = dense(&call->in[1]), *bt = dense(&call->in[2]);
    double *y = calloc((size_t)(R * N > 0 ? R * N : 1), sizeof(double));
    cc_status st = CC_FAILED;
    if (x && gm && bt && y) {
        for (int64_t r = 0; r < R; r++) {
            const double *row = x + r * N;
            double mu, var;
            stats(row, N, call->dtype, &mu, &var);
            double sd = sqrt((var > 0 ? var : 0) + call->params->eps);
            for (int64_t j = 0; j < N; j++)
                y[r * N + j] = (row[j] - mu) / sd * gm[j] + bt[j];
        }
        store_all(out, y);
        st = CC_OK;
    }
    free(x), free(gm), free(bt), free(y);
    return st;
}

/* A one-pass variance, E[x^2] - E[x]^2, accumulated as the kernel's registers would: in the case
 * dtype (float32 for f16/bf16, as the accumulation contract says). Exact on centred data;
 * cancels on rows with a large mean and a small spread. */
static void one_pass_stats(const double *row, int64_t n, cc_dtype t, double *mean, double *var)
{
    cc_dtype acc = compute_type(t);
    double s = 0, s2 = 0;
    for (int64_t j = 0; j < n; j++) {
        s = cc_round_to(acc, s + row[j]);
        s2 = cc_round_to(acc, s2 + cc_round_to(acc, row[j] * row[j]));
    }
    *mean = cc_round_to(acc, s / (double)n);
    *var = cc_round_to(acc, s2 / (double)n - *mean * *mean);
}

static cc_status layernorm_one_pass_var_fwd(const cc_call *call, cc_view *out, char *msg,
                                            size_t len)
{
    (void)msg, (void)len;
    return layernorm_rows(call, out, one_pass_stats);
}

/* scale with its constant rounded to float32 on the way in (TorchLean's CUDA ABI rounds host
 * doubles so): exact for 0.5 or 3, off by up to 2^-25 relative for 0.51 in an f64 case. */
static cc_status scale_alpha_f32_fwd(const cc_call *call, cc_view *out, char *msg, size_t len)
{
    ref_params p = *call->params;
    p.alpha = (double)(float)p.alpha;
    cc_call c = *call;
    c.params = &p;
    return ref()->forward(NULL, &c, out, msg, len);
}

/* softmax written for rank <= 3: the axis's inner extent is taken from at most the two axes
 * after it, so rank >= 4 with three or more axes after the axis groups the wrong elements. */
static cc_status softmax_rank3_inner_fwd(const cc_call *call, cc_view *out, char *msg,
                                         size_t len)
{
    const cc_view *xv = &call->in[0];
    int r = xv->rank, ax = ref_norm_axis(call->params->axis, r);
    if (ax < 0 || r - 1 - ax <= 2)
        return ref()->forward(NULL, call, out, msg, len);
    int64_t n = view_numel(xv), L = xv->shape[ax], inner = xv->shape[r - 1] * xv->shape[r - 2];
    if (n == 0 || L == 0 || inner == 0)
        return ref()->forward(NULL, call, out, msg, len);
    double *x = dense(xv);
    if (!x)
        return CC_FAILED;
    int64_t outer = n / (L * inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double m = -INFINITY, s = 0;
            for (int64_t j = 0; j < L; j++)
                m = fmax(m, x[(o * L + j) * inner + i]);
            for (int64_t j = 0; j < L; j++)
                s += exp(x[(o * L + j) * inner + i] - m);
            for (int64_t j = 0; j < L; j++) {
                int64_t k = (o * L + j) * inner + i;
                cc_store(out->dtype, out->data, k, exp(x[k] - m) / s);
            }
        }
    free(x);
    return CC_OK;
}

/* A kernel that walks every operand shaped like the first with the first one's strides (it
 * assumed one layout for all, as TensorIterator-less code does): right while layouts agree. */
static cc_status first_input_strides_fwd(const cc_call *call, cc_view *out, char *msg,
                                         size_t len)
{
    cc_call c = *call;
    cc_view in[REF_MAX_INPUTS];
    memcpy(in, call->in, sizeof(cc_view) * (size_t)call->n_in);
    for (int i = 1; i < call->n_in; i++)
        if (in[i].rank == in[0].rank &&
            !memcmp(in[i].shape, in[0].shape, sizeof(int64_t) * (size_t)in[0].rank))
            memcpy(in[i].strides, in[0].strides, sizeof(int64_t) * (size_t)in[0].rank);
    c.in = in;
    return ref()->forward(NULL, &c, out, msg, len);
}

/* The furthest element of a view from its first, in elements (-1 when it has none). */
static int64_t last_offset(const cc_view *v)
{
    int64_t off = 0;
    for (int a = 0; a < v->rank; a++) {
        if (v->shape[a] == 0)
            return -1;
        off += (v->shape[a] - 1) * v->strides[a];
    }
    return off;
}

/* exp whose store loop runs one element too far: y[n] is written (a zero). */
static cc_status exp_write_past_end_fwd(const cc_call *call, cc_view *out, char *msg, size_t len)
{
    cc_status st = ref()->forward(NULL, call, out, msg, len);
    if (st == CC_OK)
        cc_store(out->dtype, out->data, view_numel(out), 0.0);
    return st;
}

/* exp computed in place: its first result lands in x[0] before y is written (an in-place
 * kernel handed an input that is not its own). Inputs are read-only: a fault. */
static cc_status exp_writes_its_input_fwd(const cc_call *call, cc_view *out, char *msg,
                                          size_t len)
{
    const cc_view *x = &call->in[0];
    cc_status st = ref()->forward(NULL, call, out, msg, len);
    if (st == CC_OK && view_numel(out) > 0)
        cc_store(x->dtype, x->data, 0, cc_load(out->dtype, out->data, 0));
    return st;
}

/* exp whose vector loop loads a whole vector past the tail of x and drops the extra lanes: the
 * values are right, only the read one element past the end of the buffer is wrong. */
static cc_status exp_read_past_end_fwd(const cc_call *call, cc_view *out, char *msg, size_t len)
{
    const cc_view *x = &call->in[0];
    volatile double sink = cc_load(x->dtype, x->data, last_offset(x) + 1);
    (void)sink;
    return ref()->forward(NULL, call, out, msg, len);
}

/* exp that reads x[-1] (a loop peeled from the wrong end): caught where the buffer sits flush
 * against its leading guard page, which --repeat's second call does. */
static cc_status exp_read_before_start_fwd(const cc_call *call, cc_view *out, char *msg,
                                           size_t len)
{
    const cc_view *x = &call->in[0];
    volatile double sink = cc_load(x->dtype, x->data, -1);
    (void)sink;
    return ref()->forward(NULL, call, out, msg, len);
}

/* exp that also clears y[-1] (an off-by-one in a backwards loop). */
static cc_status exp_write_before_start_fwd(const cc_call *call, cc_view *out, char *msg,
                                            size_t len)
{
    cc_status st = ref()->forward(NULL, call, out, msg, len);
    if (st == CC_OK)
        cc_store(out->dtype, out->data, -1, 0.0);
    return st;
}

/* exp wrong on every period-th call counted by *calls (a race that loses one call in period):
 * a run fails a varying set of cases, and repro of one of them passes unless it repeats. */
static cc_status exp_wrong_every(const cc_call *call, cc_view *out, char *msg, size_t len,
                                 unsigned long *calls, unsigned long period)
{
    cc_status st = ref()->forward(NULL, call, out, msg, len);
    if (st == CC_OK && ++*calls % period == 0)
        for (int64_t i = 0, n = view_numel(out); i < n; i++)
            cc_store(out->dtype, out->data, i, 2.0 * cc_load(out->dtype, out->data, i) + 1.0);
    return st;
}

static cc_status exp_every_third_call_fwd(const cc_call *call, cc_view *out, char *msg,
                                          size_t len)
{
    static unsigned long calls; /* this planted bug's state: one counter per worker process */
    return exp_wrong_every(call, out, msg, len, &calls, 3);
}

/* One call in 30: the rare race --repeat is for (docs/reliability.md: N calls catch a race of
 * frequency p with probability 1 - (1 - p)^N). */
static cc_status exp_once_in_30_calls_fwd(const cc_call *call, cc_view *out, char *msg,
                                          size_t len)
{
    static unsigned long calls; /* this planted bug's state: one counter per worker process */
    return exp_wrong_every(call, out, msg, len, &calls, 30);
}

/* reduceSum along its axis in float32, the elements in one of three orders: forward,
 * backward, or the even positions then the odd ones. */
static cc_status reducesum_in_order(const cc_call *call, cc_view *out, int order)
{
    const cc_view *xv = &call->in[0];
    int ax = ref_norm_axis(call->params->axis, xv->rank);
    int64_t outer, L, inner;
    split_axis(xv, ax, &outer, &L, &inner);
    double *x = dense(xv);
    if (!x)
        return CC_FAILED;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double s = 0;
            for (int64_t k = 0; k < L; k++) {
                int64_t half = (L + 1) / 2;
                int64_t j = order == 0 ? k : order == 1 ? L - 1 - k
                                       : k < half  ? 2 * k
                                                   : 2 * (k - half) + 1;
                s = cc_round_to(CC_F32, s + x[(o * L + j) * inner + i]);
            }
            cc_store(out->dtype, out->data, o * inner + i, s);
        }
    free(x);
    return CC_OK;
}

/* reduceSum summing in another order on each call, three in turn (atomics finishing in
 * another order): every result within its bound, the bits not reproducible at any buffer
 * placement; only --repeat sees it (a race: nondeterministic, docs/reliability.md). Any two of
 * three calls in a row differ, so the call --repeat 2 adds at the first call's placement
 * differs from it too. */
static cc_status reducesum_order_varies_fwd(const cc_call *call, cc_view *out, char *msg,
                                            size_t len)
{
    static unsigned long calls; /* this planted bug's state: one counter per worker process */
    if (ref_norm_axis(call->params->axis, call->in[0].rank) < 0 || call->dtype == CC_F64)
        return ref()->forward(NULL, call, out, msg, len);
    return reducesum_in_order(call, out, (int)(calls++ % 3));
}

/* reduceSum summing backward on one call in 7, the 2nd, 9th, ... of its process (a rare race
 * within the bound: a thread pool's first parallel use, say): in a fresh worker --repeat 2's
 * call 2 is spoiled alone, which differs from call 1 at the other placement just as an
 * alignment-dependent kernel does; only a second call at that placement (call 4, the forward
 * order again) tells it for a race. */
static cc_status reducesum_reordered_once_in_7_fwd(const cc_call *call, cc_view *out,
                                                    char *msg, size_t len)
{
    static unsigned long calls; /* this planted bug's state: one counter per worker process */
    if (ref_norm_axis(call->params->axis, call->in[0].rank) < 0 || call->dtype == CC_F64)
        return ref()->forward(NULL, call, out, msg, len);
    return reducesum_in_order(call, out, ++calls % 7 == 2);
}

/* reduceSum whose order depends only on its input's alignment, as MKL's kernels do without
 * Conditional Numerical Reproducibility: a 64-byte aligned input sums forward (the vector
 * path), any other backward (a peeled loop). Every call on the same buffer gives the same bits;
 * --repeat's moved buffers give others, and the same again back at the first placement:
 * placement-sensitive, never nondeterministic. A correct kernel (each order within the bound). */
static cc_status reducesum_alignment_order_fwd(const cc_call *call, cc_view *out, char *msg,
                                               size_t len)
{
    if (ref_norm_axis(call->params->axis, call->in[0].rank) < 0 || call->dtype == CC_F64)
        return ref()->forward(NULL, call, out, msg, len);
    return reducesum_in_order(call, out, (uintptr_t)call->in[0].data % 64 != 0);
}

/* ---- kernels whose intermediates leave the dtype's range (edge=wide) ---------------------- */

/* A two-pass variance whose squares (x - mean)^2 are rounded to the dtype t before they are
 * summed in the compute type: past 65504 in f16 the variance is inf and the output beta. */
static void square_in_dtype_stats(const double *row, int64_t n, cc_dtype t, double *mean,
                                  double *var)
{
    cc_dtype acc = compute_type(t);
    double s = 0, s2 = 0;
    for (int64_t j = 0; j < n; j++)
        s = cc_round_to(acc, s + row[j]);
    *mean = cc_round_to(acc, s / (double)n);
    for (int64_t j = 0; j < n; j++)
        s2 = cc_round_to(acc, s2 + cc_round_to(t, (row[j] - *mean) * (row[j] - *mean)));
    *var = cc_round_to(acc, s2 / (double)n);
}

/* An f16 layerNorm that squares in f16 (other dtypes: the reference). */
static cc_status layernorm_square_in_dtype_fwd(const cc_call *call, cc_view *out, char *msg,
                                               size_t len)
{
    if (call->dtype != CC_F16)
        return ref()->forward(NULL, call, out, msg, len);
    return layernorm_rows(call, out, square_in_dtype_stats);
}

/* mseLoss whose squared differences are a tensor of the case dtype (then averaged in the
 * compute type): one square past 65504 in f16 makes the mean inf. */
static cc_status mseloss_square_in_dtype_fwd(const cc_call *call, cc_view *out, char *msg,
                                             size_t len)
{
    (void)msg, (void)len;
    int64_t n = view_numel(&call->in[0]);
    double *a = dense(&call->in[0]), *b = dense(&call->in[1]);
    cc_status st = CC_FAILED;
    if (a && b) {
        cc_dtype t = call->dtype, acc = compute_type(t);
        double s = 0;
        for (int64_t j = 0; j < n; j++)
            s = cc_round_to(acc, s + cc_round_to(t, (a[j] - b[j]) * (a[j] - b[j])));
        cc_store(out->dtype, out->data, 0, s / (double)(n > 0 ? n : 1));
        st = CC_OK;
    }
    free(a), free(b);
    return st;
}

/* softplus as log(1 + exp(x)) with exp in the compute type: inf past x = 88.7 (709.8 in f64),
 * where softplus(x) is x. */
static cc_status softplus_naive_fwd(const cc_call *call, cc_view *out, char *msg, size_t len)
{
    (void)msg, (void)len;
    int64_t n = view_numel(out);
    double *x = dense(&call->in[0]);
    if (!x)
        return CC_FAILED;
    cc_dtype acc = compute_type(call->dtype);
    for (int64_t j = 0; j < n; j++)
        cc_store(out->dtype, out->data, j, log1p(cc_round_to(acc, exp(x[j]))));
    free(x);
    return CC_OK;
}

/* ---- a flash-style attention ---------------------------------------------------------------- */

/* attention as FlashAttention computes it: per query row one pass over the keys in blocks of 2
 * with a running maximum m, a running sum l and an accumulator rescaled by exp(m_old - m_new);
 * blocked keys weigh exactly 0 (0 * V joins the accumulator, as the composed bmm's 0 * V does);
 * a row with no allowed key is written as 0 (FlashAttention's l = 0 guard; ops.md) when
 * `guard`, else as acc / l = 0/0. The VJP recomputes P from the row's final m and l and uses
 * FlashAttention's D = rowsum(dO * O); a fully blocked row adds no gradient term. In float64,
 * stored once to the dtype. Shapes as ops.md: Q [..., nQ, d], K [..., nK, d], V [..., nK, dv],
 * mask [nQ, nK] (true = allowed), causal blocks key j > query i. */
typedef struct {
    int64_t B, nQ, nK, d, dv;
    double scale;
    double *q, *k, *v, *mask; /* dense float64 copies; mask NULL without one */
    int causal;
    cc_dtype qk; /* the unscaled q.k rounded to it before the scale (CC_F64: kept exact) */
} flash_geom;

static int flash_open(const cc_call *call, flash_geom *f)
{
    const cc_view *q = &call->in[0], *k = &call->in[1], *v = &call->in[2];
    int R = q->rank;
    f->nQ = q->shape[R - 2], f->d = q->shape[R - 1], f->nK = k->shape[R - 2];
    f->dv = v->shape[R - 1];
    f->B = 1;
    for (int a = 0; a + 2 < R; a++)
        f->B *= q->shape[a];
    f->scale = f->d > 0 ? 1.0 / sqrt((double)f->d) : 1.0;
    f->causal = call->params->causal != 0;
    f->qk = CC_F64;
    f->q = dense(q), f->k = dense(k), f->v = dense(v);
    f->mask = call->n_in > 3 ? dense(&call->in[3]) : NULL;
    return f->q && f->k && f->v && (call->n_in < 4 || f->mask) ? 0 : -1;
}

static void flash_close(flash_geom *f)
{
    free(f->q), free(f->k), free(f->v), free(f->mask);
}

static int flash_allowed(const flash_geom *f, int64_t i, int64_t j)
{
    return (!f->mask || f->mask[i * f->nK + j] != 0.0) && (!f->causal || j <= i);
}

static double flash_score(const flash_geom *f, int64_t b, int64_t i, int64_t j)
{
    double s = 0;
    for (int64_t l = 0; l < f->d; l++)
        s += f->q[(b * f->nQ + i) * f->d + l] * f->k[(b * f->nK + j) * f->d + l];
    return cc_round_to(f->qk, s) * f->scale;
}

/* Row (b, i): its output into o[dv] (or 0 when fully blocked and guarded), its final m and l;
 * returns whether the row has an allowed key. */
static int flash_row(const flash_geom *f, int64_t b, int64_t i, int guard, double *o, double *m,
                     double *l)
{
    int any = 0;
    *m = -INFINITY, *l = 0;
    for (int64_t c = 0; c < f->dv; c++)
        o[c] = 0;
    for (int64_t j0 = 0; j0 < f->nK; j0 += 2) {
        int64_t j1 = j0 + 2 < f->nK ? j0 + 2 : f->nK;
        double m_new = *m, s[2];
        for (int64_t j = j0; j < j1; j++) {
            int ok = flash_allowed(f, i, j);
            any |= ok;
            s[j - j0] = ok ? flash_score(f, b, i, j) : -INFINITY;
            m_new = fmax(m_new, s[j - j0]);
        }
        double at = m_new == -INFINITY ? 0.0 : m_new; /* exp(-inf - -inf) would be NaN */
        double alpha = exp(*m - at);
        *l *= alpha;
        for (int64_t c = 0; c < f->dv; c++)
            o[c] *= alpha;
        for (int64_t j = j0; j < j1; j++) {
            double p = flash_allowed(f, i, j) ? exp(s[j - j0] - at) : 0.0;
            *l += p;
            for (int64_t c = 0; c < f->dv; c++)
                o[c] += p * f->v[(b * f->nK + j) * f->dv + c];
        }
        *m = m_new;
    }
    for (int64_t c = 0; c < f->dv; c++)
        o[c] = !any && guard ? 0.0 : o[c] / *l;
    return any;
}

static cc_status flash_fwd(const cc_call *call, cc_view *out, int guard, cc_dtype qk)
{
    flash_geom f;
    double *y = calloc((size_t)(view_numel(out) > 0 ? view_numel(out) : 1), sizeof(double));
    cc_status st = CC_FAILED;
    if (flash_open(call, &f) == 0 && y) {
        f.qk = qk;
        for (int64_t b = 0; b < f.B; b++)
            for (int64_t i = 0; i < f.nQ; i++) {
                double m, l;
                flash_row(&f, b, i, guard, y + (b * f.nQ + i) * f.dv, &m, &l);
            }
        store_all(out, y);
        st = CC_OK;
    }
    flash_close(&f);
    free(y);
    return st;
}

static cc_status attention_flash_fwd(const cc_call *call, cc_view *out, char *msg, size_t len)
{
    (void)msg, (void)len;
    return flash_fwd(call, out, 1, CC_F64);
}

/* attention that forms the unscaled q.k in the case dtype and scales it after (the scale not
 * folded in first, as TorchLean's sqrt(s) split does): past 65504 in f16 while s q.k fits. */
static cc_status attention_qk_in_dtype_fwd(const cc_call *call, cc_view *out, char *msg,
                                           size_t len)
{
    (void)msg, (void)len;
    return flash_fwd(call, out, 1, call->dtype);
}

static cc_status attention_flash_no_guard_fwd(const cc_call *call, cc_view *out, char *msg,
                                              size_t len)
{
    (void)msg, (void)len;
    return flash_fwd(call, out, 0, CC_F64);
}

/* One row's gradient terms: P from the final m and l, dP = g V^T, D = rowsum(g * O),
 * dS = P (dP - D); dQ += s dS K, dK += s dS^T Q, dV += P^T g. */
static void flash_row_vjp(const flash_geom *f, int64_t b, int64_t i, const double *g,
                          double *o, double *dq, double *dk, double *dv)
{
    double m, l;
    if (!flash_row(f, b, i, 1, o, &m, &l))
        return; /* fully blocked: no gradient term */
    const double *gi = g + (b * f->nQ + i) * f->dv;
    double D = 0, at = m == -INFINITY ? 0.0 : m;
    for (int64_t c = 0; c < f->dv; c++)
        D += gi[c] * o[c];
    for (int64_t j = 0; j < f->nK; j++) {
        /* a blocked key's 0 is divided too: 0 / l is NaN in a row whose l is (ops.md) */
        double p = (flash_allowed(f, i, j) ? exp(flash_score(f, b, i, j) - at) : 0.0) / l;
        double dp = 0;
        for (int64_t c = 0; c < f->dv; c++) {
            dp += gi[c] * f->v[(b * f->nK + j) * f->dv + c];
            dv[(b * f->nK + j) * f->dv + c] += p * gi[c];
        }
        double ds = p * (dp - D) * f->scale;
        for (int64_t t = 0; t < f->d; t++) {
            dq[(b * f->nQ + i) * f->d + t] += ds * f->k[(b * f->nK + j) * f->d + t];
            dk[(b * f->nK + j) * f->d + t] += ds * f->q[(b * f->nQ + i) * f->d + t];
        }
    }
}

static cc_status attention_flash_vjp(const cc_call *call, const cc_view *g, cc_view *grads,
                                     char *msg, size_t len)
{
    (void)msg, (void)len;
    flash_geom f;
    double *gd = dense(g), *d[3] = {NULL, NULL, NULL}, *o = NULL;
    cc_status st = CC_FAILED;
    int ok = flash_open(call, &f) == 0 && gd;
    for (int t = 0; t < 3 && ok; t++)
        ok = (d[t] = calloc((size_t)(view_numel(&call->in[t]) + 1), sizeof(double))) != NULL;
    ok = ok && (o = calloc((size_t)f.dv + 1, sizeof(double))) != NULL;
    if (ok) {
        for (int64_t b = 0; b < f.B; b++)
            for (int64_t i = 0; i < f.nQ; i++)
                flash_row_vjp(&f, b, i, gd, o, d[0], d[1], d[2]);
        for (int t = 0; t < 3; t++)
            if (grads[t].data)
                store_all(&grads[t], d[t]);
        st = CC_OK;
    }
    flash_close(&f);
    free(gd), free(o);
    for (int t = 0; t < 3; t++)
        free(d[t]);
    return st;
}

/* ---- long sums and the final rounding: what only the probabilistic bound and the
 * rounding-bias test see (harness/run/compare.h) ---------------------------------------------- */

/* How a blocked reduceSum goes wrong: one block's partial sum lost, added twice, or accumulated
 * in float16; or nothing (a correct blocked kernel). */
typedef enum { BLOCK_RIGHT, BLOCK_DROPPED, BLOCK_TWICE, BLOCK_IN_F16 } block_bug;

/* A sum of n values x[j stride] the way a parallel kernel splits it: from 2^16 terms on, blocks
 * of 2^14 (a thread's share), each summed alone, their partial sums added at the end; below, one
 * block. The bug (a block_bug) strikes the last full block. */
static double blocked_sum(const double *x, int64_t n, int64_t stride, int bug)
{
    const int64_t block = n >= (1 << 16) ? 1 << 14 : n;
    int64_t last_full = block > 0 ? (n / block - 1) * block : -1;
    double total = 0.0;
    for (int64_t lo = 0; lo < n; lo += block) {
        int hit = lo == last_full && block < n;
        double part = 0.0;
        for (int64_t j = lo; j < lo + block && j < n; j++)
            part = hit && bug == BLOCK_IN_F16 ? cc_round_to(CC_F16, part + x[j * stride])
                                              : part + x[j * stride];
        total += !hit || bug == BLOCK_RIGHT || bug == BLOCK_IN_F16 ? part
                 : bug == BLOCK_TWICE                             ? 2.0 * part
                                                                  : 0.0;
    }
    return total;
}

static cc_status blocked_reducesum(const cc_call *call, cc_view *out, char *msg, size_t len,
                                   block_bug bug)
{
    return reducesum_by_lanes(call, out, msg, len, blocked_sum, (int)bug);
}

static cc_status reducesum_drop_block_fwd(const cc_call *call, cc_view *out, char *msg,
                                          size_t len)
{
    return blocked_reducesum(call, out, msg, len, BLOCK_DROPPED);
}

static cc_status reducesum_block_twice_fwd(const cc_call *call, cc_view *out, char *msg,
                                           size_t len)
{
    return blocked_reducesum(call, out, msg, len, BLOCK_TWICE);
}

static cc_status reducesum_block_in_f16_fwd(const cc_call *call, cc_view *out, char *msg,
                                            size_t len)
{
    return blocked_reducesum(call, out, msg, len, BLOCK_IN_F16);
}

/* Correct: the blocked sum without its bug. */
static cc_status reducesum_blocked_fwd(const cc_call *call, cc_view *out, char *msg, size_t len)
{
    return blocked_reducesum(call, out, msg, len, BLOCK_RIGHT);
}

/* Correct: reduceSum folded left to right in float32 (TorchLean's fixed-left fold, a GPU
 * thread's serial loop), the result rounded to the dtype once: the order the worst case must
 * admit, judged by the probabilistic bound on long sums. */
static cc_status reducesum_f32_fold_fwd(const cc_call *call, cc_view *out, char *msg,
                                        size_t len)
{
    if (call->dtype == CC_F64)
        return ref()->forward(NULL, call, out, msg, len);
    return folded_reducesum(call, out, msg, len, CC_F32);
}

/* matmul accumulated in float32, left to right (f16/bf16 products are exact there), the result
 * converted to the dtype toward zero (truncated, the cheap conversion) or to nearest. */
static cc_status matmul_f32_then(const cc_call *call, cc_view *out, char *msg, size_t len,
                                 int truncate)
{
    const cc_view *av = &call->in[0], *bv = &call->in[1];
    if ((call->dtype != CC_F16 && call->dtype != CC_BF16) || av->rank != 2 || bv->rank != 2)
        return ref()->forward(NULL, call, out, msg, len);
    double *a = dense(av), *b = dense(bv);
    cc_status st = a && b ? CC_OK : CC_FAILED;
    int64_t M = av->shape[0], K = av->shape[1], N = bv->shape[1];
    for (int64_t i = 0; st == CC_OK && i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++)
                acc = cc_round_to(CC_F32, acc + a[i * K + k] * b[k * N + j]);
            double y = cc_round_to(call->dtype, acc);
            if (truncate && fabs(y) > fabs(acc))
                y -= copysign(cc_ulp(call->dtype, acc), acc);
            cc_store(out->dtype, out->data, i * N + j, y);
        }
    free(a);
    free(b);
    return st;
}

static cc_status matmul_truncate_fwd(const cc_call *call, cc_view *out, char *msg, size_t len)
{
    return matmul_f32_then(call, out, msg, len, 1);
}

static cc_status matmul_f32_round_once_fwd(const cc_call *call, cc_view *out, char *msg,
                                           size_t len)
{
    return matmul_f32_then(call, out, msg, len, 0);
}

typedef struct {
    const char *name, *op; /* op NULL: every op */
    fwd_fn fwd;            /* NULL: the reference */
    vjp_fn vjp;
    int repeat;            /* the --repeat the suite needs to see it (0: one call) */
} mutant;

static const mutant mutants[] = {
    {"softmax_axis", "softmax", softmax_axis_fwd, softmax_axis_vjp, 0},
    {"reducesum_off_by_one", "reduceSum", reducesum_off_by_one_fwd, NULL, 0},
    {"linear_transposed_w", "linear", linear_transposed_w_fwd, NULL, 0},
    {"linear_no_bias_grad", "linear", NULL, linear_no_bias_grad_vjp, 0},
    {"maxpool_tie_last", "maxPool", NULL, maxpool_tie_last_vjp, 0},
    {"layernorm_eps_outside", "layerNorm", layernorm_eps_outside_fwd, NULL, 0},
    {"layernorm_unbiased_var", "layerNorm", layernorm_unbiased_var_fwd, NULL, 0},
    {"gelu_erf", "gelu", gelu_erf_fwd, NULL, 0},
    {"nan_to_zero", NULL, nan_to_zero_fwd, NULL, 0},
    {"exp_8ulp_f32", "exp", exp_8ulp_f32_fwd, NULL, 0},
    {"ignore_stride", NULL, ignore_stride_fwd, ignore_stride_vjp, 0},
    {"matmul_drop_last_k", "matmul", matmul_drop_last_k_fwd, NULL, 0},
    {"matmul_tf32", "matmul", matmul_tf32_fwd, NULL, 0},
    {"relu_grad_leak", "relu", NULL, relu_grad_leak_vjp, 0},
    {"mul_vjp_swap", "mul", NULL, mul_vjp_swap_vjp, 0},
    {"softmax_vjp_no_sum", "softmax", NULL, softmax_vjp_no_sum_vjp, 0},
    {"reducesum_bf16_accum", "reduceSum", reducesum_bf16_accum_fwd, NULL, 0},
    {"crash_on_empty", NULL, crash_on_empty_fwd, NULL, 0},
    {"exp_skip_last", "exp", exp_skip_last_fwd, NULL, 0},
    {"softmax_no_max_sub", "softmax", softmax_no_max_sub_fwd, NULL, 0},
    {"logsoftmax_via_log", "logSoftmax", logsoftmax_via_log_fwd, NULL, 0},
    {"softplus_threshold", "softplus", softplus_threshold_fwd, NULL, 0},
    {"layernorm_one_pass_var", "layerNorm", layernorm_one_pass_var_fwd, NULL, 0},
    {"scale_alpha_f32", "scale", scale_alpha_f32_fwd, NULL, 0},
    {"softmax_rank3_inner", "softmax", softmax_rank3_inner_fwd, NULL, 0},
    {"first_input_strides", NULL, first_input_strides_fwd, NULL, 0},
    {"exp_write_past_end", "exp", exp_write_past_end_fwd, NULL, 0},
    {"exp_read_past_end", "exp", exp_read_past_end_fwd, NULL, 0},
    {"exp_writes_its_input", "exp", exp_writes_its_input_fwd, NULL, 0},
    {"exp_write_before_start", "exp", exp_write_before_start_fwd, NULL, 0},
    {"exp_read_before_start", "exp", exp_read_before_start_fwd, NULL, 2},
    {"exp_every_third_call", "exp", exp_every_third_call_fwd, NULL, 0},
    {"exp_once_in_30_calls", "exp", exp_once_in_30_calls_fwd, NULL, 0},
    {"reducesum_order_varies", "reduceSum", reducesum_order_varies_fwd, NULL, 2},
    {"reducesum_reordered_once_in_7", "reduceSum", reducesum_reordered_once_in_7_fwd, NULL, 2},
    {"reducesum_dtype_accum", "reduceSum", reducesum_dtype_accum_fwd, NULL, 0},
    {"attention_flash_no_guard", "attention", attention_flash_no_guard_fwd, attention_flash_vjp,
     0},
    {"layernorm_square_in_dtype", "layerNorm", layernorm_square_in_dtype_fwd, NULL, 0},
    {"attention_qk_in_dtype", "attention", attention_qk_in_dtype_fwd, NULL, 0},
    {"mseloss_square_in_dtype", "mseLoss", mseloss_square_in_dtype_fwd, NULL, 0},
    {"softplus_naive", "softplus", softplus_naive_fwd, NULL, 0},
    {"reducesum_drop_block", "reduceSum", reducesum_drop_block_fwd, NULL, 0},
    {"reducesum_block_twice", "reduceSum", reducesum_block_twice_fwd, NULL, 0},
    {"reducesum_block_in_f16", "reduceSum", reducesum_block_in_f16_fwd, NULL, 0},
    {"matmul_truncate", "matmul", matmul_truncate_fwd, NULL, 0},
};

/* The mutants only one judgement sees: a run judged by the worst-case bound alone passes them
 * (tests/test_mutants.c checks both ways). */
static const struct {
    const char *mutant, *seen_by;
} seen_only_by[] = {
    {"reducesum_drop_block", "the probabilistic bound"},
    {"reducesum_block_twice", "the probabilistic bound"},
    {"reducesum_block_in_f16", "the probabilistic bound"},
    {"matmul_truncate", "the rounding-bias test"},
};
#define N_MUTANTS (int)(sizeof mutants / sizeof mutants[0])

/* Correct alternative implementations, selected by the same variable: each must pass every
 * case of its op (tests/test_mutants.c), as the reference does, at its repeat (the
 * alignment-dependent reduceSum at --repeat 2: placement-sensitive, never nondeterministic). */
static const mutant variants[] = {
    {"attention_flash", "attention", attention_flash_fwd, attention_flash_vjp, 0},
    {"reducesum_alignment_order", "reduceSum", reducesum_alignment_order_fwd, NULL, 2},
    {"reducesum_f32_fold", "reduceSum", reducesum_f32_fold_fwd, NULL, 0},
    {"reducesum_blocked", "reduceSum", reducesum_blocked_fwd, NULL, 0},
    {"matmul_f32_round_once", "matmul", matmul_f32_round_once_fwd, NULL, 0},
};
#define N_VARIANTS (int)(sizeof variants / sizeof variants[0])

/* Entry i of a table of n (NULL past it), and the provider calls per check it asks for. */
static const mutant *entry(const mutant *table, int n, int i)
{
    return i >= 0 && i < n ? &table[i] : NULL;
}

static int calls_per_check(const mutant *m)
{
    return m && m->repeat > 1 ? m->repeat : 1;
}

EXPORT const char *capcheck_variant_name(int i)
{
    const mutant *m = entry(variants, N_VARIANTS, i);
    return m ? m->name : NULL;
}

EXPORT const char *capcheck_variant_op(int i)
{
    const mutant *m = entry(variants, N_VARIANTS, i);
    return m ? m->op : NULL;
}

/* The provider calls per check (--repeat) variant i must pass at: 1 for most. */
EXPORT int capcheck_variant_repeat(int i)
{
    return calls_per_check(entry(variants, N_VARIANTS, i));
}

/* "" for a mutant the worst-case bound catches; else the judgement that alone sees it. */
EXPORT const char *capcheck_mutant_seen_by(int i)
{
    for (size_t k = 0; i >= 0 && i < N_MUTANTS && k < sizeof seen_only_by / sizeof *seen_only_by;
         k++)
        if (strcmp(seen_only_by[k].mutant, mutants[i].name) == 0)
            return seen_only_by[k].seen_by;
    return "";
}

EXPORT const char *capcheck_mutant_name(int i)
{
    const mutant *m = entry(mutants, N_MUTANTS, i);
    return m ? m->name : NULL;
}

/* The op mutant i plants its bug in (NULL: every op). */
EXPORT const char *capcheck_mutant_op(int i)
{
    const mutant *m = entry(mutants, N_MUTANTS, i);
    return m ? m->op : NULL;
}

/* The provider calls per check (--repeat) the suite needs to catch mutant i: 1 for most. */
EXPORT int capcheck_mutant_repeat(int i)
{
    return calls_per_check(entry(mutants, N_MUTANTS, i));
}

/* The active mutant: NULL for none; *unknown set when CC_MUTANT_ENV names no mutant. */
static const mutant *active(int *unknown)
{
    const char *name = getenv(CC_MUTANT_ENV);
    *unknown = 0;
    if (!name || !*name)
        return NULL;
    for (int i = 0; i < N_MUTANTS; i++)
        if (strcmp(mutants[i].name, name) == 0)
            return &mutants[i];
    for (int i = 0; i < N_VARIANTS; i++)
        if (strcmp(variants[i].name, name) == 0)
            return &variants[i];
    *unknown = 1;
    return NULL;
}

static int applies(const mutant *m, const cc_call *call)
{
    return m && (!m->op || strcmp(m->op, call->op) == 0);
}

static cc_status mu_init(void *ctx, cc_device device, char *msg, size_t len)
{
    (void)ctx;
    int unknown;
    active(&unknown);
    if (unknown) {
        snprintf(msg, len, CC_MUTANT_ENV "=%s names no mutant of this plugin",
                 getenv(CC_MUTANT_ENV));
        return CC_FAILED;
    }
    return ref()->init(NULL, device, msg, len);
}

/* The hold (above): returns at once without MUTANTS_HOLD_FILE and MUTANTS_HOLD_AFTER, or for
 * the first n calls; never returns after them. */
static void hold_when_asked(void)
{
    const char *path = getenv("MUTANTS_HOLD_FILE"), *after = getenv("MUTANTS_HOLD_AFTER");
    if (!path || !after)
        return;
    int fd = open(path, O_RDWR | O_CREAT | O_APPEND, 0644);
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET}; /* the whole file */
    if (fd < 0 || fcntl(fd, F_SETLKW, &lock) != 0)
        _exit(9); /* a hold that cannot count: the test sees the worker die, not a pass */
    off_t calls = lseek(fd, 0, SEEK_END);
    int held = calls >= (off_t)strtol(after, NULL, 10);
    if (write(fd, held ? "h" : ".", 1) != 1)
        _exit(9);
    close(fd); /* and the lock with it */
    while (held) {
        struct timespec s = {3600, 0};
        nanosleep(&s, NULL);
    }
}

static cc_status mu_forward(void *ctx, const cc_call *call, cc_view *out, char *msg, size_t len)
{
    (void)ctx;
    hold_when_asked();
    int unknown;
    const mutant *m = active(&unknown);
    if (unknown) {
        snprintf(msg, len, CC_MUTANT_ENV " names no mutant");
        return CC_FAILED;
    }
    if (applies(m, call) && m->fwd)
        return m->fwd(call, out, msg, len);
    return ref()->forward(NULL, call, out, msg, len);
}

static cc_status mu_vjp(void *ctx, const cc_call *call, const cc_view *g, cc_view *grads,
                        char *msg, size_t len)
{
    (void)ctx;
    int unknown;
    const mutant *m = active(&unknown);
    if (unknown) {
        snprintf(msg, len, CC_MUTANT_ENV " names no mutant");
        return CC_FAILED;
    }
    if (applies(m, call) && m->vjp)
        return m->vjp(call, g, grads, msg, len);
    return ref()->vjp(NULL, call, g, grads, msg, len);
}

static void mu_describe(void *ctx, char *buf, size_t len)
{
    (void)ctx;
    int unknown;
    const mutant *m = active(&unknown);
    const char *extra = NULL;
#ifdef CC_MUTANT_NAME_FROM_ENV
    extra = getenv("CAPCHECK_MUTANT_DESCRIPTION");
#endif
    snprintf(buf, len,
             CC_MUTANT_DESCRIPTION_HEAD "%s%scapcheck planted-bug plugin (float64 reference), "
                                        "mutant %s",
             extra ? extra : "", extra ? "; " : "", m ? m->name : "none");
}

static const char *mu_vjp_mode(void *ctx, const char *op)
{
    (void)ctx;
    return ref()->vjp_mode(NULL, op);
}

EXPORT const cc_provider *capcheck_provider_v1(void)
{
    static cc_provider p = {CC_PROVIDER_ABI_VERSION, CC_MUTANT_PROVIDER, NULL, mu_init,
                            mu_forward, mu_vjp, mu_describe, mu_vjp_mode,
                            NULL /* compute_roundoff: its TF32 mutant declares nothing */};
#ifdef CC_MUTANT_NAME_FROM_ENV
    const char *name = getenv("CAPCHECK_MUTANT_NAME");
    if (name && *name)
        p.name = name;
#endif
    return &p;
}
