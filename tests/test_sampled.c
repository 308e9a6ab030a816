/* Sampled checks and the threaded reference (harness/run/sample.h, reference/ref_parallel.h).
 *
 *   (that the sampled forms and the threads give the full serial reference's bits is
 *   tests/test_ref_sampled.c);
 *   - a planted bug confined to one row, one column or one window of the sample's lattice,
 *     anywhere in an output or a gradient, is caught by the sampled check (and by the full
 *     one), and the unmutated provider passes;
 *   - on the smoke cases of those ops, a sampled check gives the full check's verdict, with the
 *     reference provider and under each planted bug of the mutants plugin that reaches them. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/dtype.h"
#include "core/guard.h"
#include "harness/case/materialize.h"
#include "harness/run/plugin.h"
#include "harness/run/sample.h"
#include "test_util.h"

static int is_data(const ref_op *op, int i)
{
    int k = i < op->max_inputs ? i : op->max_inputs - 1;
    return op->input_kind[k < REF_MAX_INPUTS ? k : REF_MAX_INPUTS - 1] == REF_IN_DATA;
}

/* ---- planted bugs -------------------------------------------------------------------------- */

typedef enum { BUG_NONE, BUG_ROW, BUG_COLUMN, BUG_WINDOW } bug_kind;

typedef struct {
    bug_kind kind;
    int output;           /* -1: y; i: the gradient of input i */
    int64_t rows, cols;   /* the matrix view of that output (cc_sample_plan) */
    int64_t r0, c0, h, w; /* the rows and columns it corrupts */
} planted_bug;

static void corrupt(const planted_bug *b, cc_view *v)
{
    for (int64_t r = b->r0; r < b->r0 + b->h; r++)
        for (int64_t col = b->c0; col < b->c0 + b->w; col++) {
            int64_t i = r * b->cols + col;
            double x = cc_load(v->dtype, v->data, i);
            cc_store(v->dtype, v->data, i, x + 64.0 * (1.0 + fabs(x))); /* far past any bound */
        }
}

static cc_status bug_forward(void *ctx, const cc_call *call, cc_view *out, char *msg, size_t len)
{
    const cc_provider *ref = cc_reference_provider();
    cc_status st = ref->forward(ref->ctx, call, out, msg, len);
    const planted_bug *b = ctx;
    if (st == CC_OK && b->kind != BUG_NONE && b->output < 0)
        corrupt(b, out);
    return st;
}

static cc_status bug_vjp(void *ctx, const cc_call *call, const cc_view *g, cc_view *grads,
                         char *msg, size_t len)
{
    const cc_provider *ref = cc_reference_provider();
    cc_status st = ref->vjp(ref->ctx, call, g, grads, msg, len);
    const planted_bug *b = ctx;
    if (st == CC_OK && b->kind != BUG_NONE && b->output >= 0)
        corrupt(b, &grads[b->output]);
    return st;
}

static const char *const bug_names[] = {"none", "one row", "one column", "one window"};

/* Plants `kind` at a position drawn from r in `output` of c; returns the verdict of a sampled
 * check (and asserts that the full check fails too when a bug was planted). */
static cc_result_status run_bug(const cc_case *c, int output, bug_kind kind, ref_rng *r,
                                double *fraction)
{
    ref_shape out;
    ref_err e;
    assert_int_equal(c->op->shape(&c->params, c->n_in, c->shape, &out, &e), REF_OK);
    cc_sample plan;
    assert_int_equal(cc_sample_plan(c, output, output < 0 ? &out : &c->shape[output], &plan), 0);
    planted_bug b = {kind, output, plan.rows, plan.cols, 0, 0, 0, 0};
    if (kind == BUG_ROW)
        b = (planted_bug){kind, output, plan.rows, plan.cols, ref_rng_range(r, 0, plan.rows - 1),
                          0, 1, plan.cols};
    else if (kind == BUG_COLUMN)
        b = (planted_bug){kind, output, plan.rows, plan.cols, 0,
                          ref_rng_range(r, 0, plan.cols - 1), plan.rows, 1};
    else if (kind == BUG_WINDOW) /* a window of the lattice's size, anywhere, aligned or not */
        b = (planted_bug){kind, output, plan.rows, plan.cols,
                          ref_rng_range(r, 0, plan.rows - plan.window_rows),
                          ref_rng_range(r, 0, plan.cols - plan.window_cols), plan.window_rows,
                          plan.window_cols};
    cc_sample_free(&plan);
    cc_provider p = *cc_reference_provider();
    p.name = "planted";
    p.ctx = &b;
    p.forward = bug_forward;
    p.vjp = bug_vjp;
    cc_run_options sampled = {.threads = 1, .ref = CC_REF_SAMPLED},
                   full = {.threads = 1, .ref = CC_REF_FULL};
    cc_result rs, rf;
    cc_run_case_probed(&p, c, &sampled, NULL, &rs);
    assert_true(rs.sampled);
    *fraction = rs.checked_fraction;
    cc_run_case_probed(&p, c, &full, NULL, &rf);
    assert_false(rf.sampled);
    if (kind != BUG_NONE && rf.status != CC_RES_FAIL)
        fail_msg("the full check missed a planted bug (%s, output %d: %s %s): %s", bug_names[kind],
                 output, cc_result_status_name(rf.status), rf.message, rs.line);
    if (kind != BUG_NONE && rs.status != CC_RES_FAIL)
        fail_msg("the sampled check missed a planted bug (%s, rows %lld+%lld, columns %lld+%lld "
                 "of output %d): %s",
                 bug_names[kind], (long long)b.r0, (long long)b.h, (long long)b.c0,
                 (long long)b.w, output, rs.line);
    return rs.status;
}

static void test_planted_bugs_are_caught(void **state)
{
    (void)state;
    static const char *const lines[] = {
        "matmul in=[2,96,160],[160,112] seed=21",
        "scaledMatmul dtype=f64 in=[130,77],[77,90] alpha=0.75 seed=22",
        "linear in=[150,96],[120,96],[120] layout=transpose seed=23",
        "conv in=[16,30,30],[24,16,3,3],[24] kernel=[3,3] stride=[1,1] pad=[1,1] dil=[1,1] groups=1 seed=24",
        "convTranspose in=[12,20,20],[12,8,4,4],[8] kernel=[4,4] stride=[2,2] pad=[1,1] dil=[1,1] groups=1 seed=25",
        "attention in=[4,64,32],[4,80,32],[4,80,24] causal=1 seed=26",
        "softmaxMatmul in=[3,70,90],[3,90,40] seed=27",
        "fftFno in=[6,300] modes=0 variant=1 length=0 seed=28",
        "fftFno in=[128,12],[40,12,12],[40,12,12] modes=40 variant=0 length=0 seed=29",
    };
    ref_rng r = {2026};
    long planted = 0, caught = 0;
    double least = 1.0, most = 0.0;
    for (size_t k = 0; k < sizeof lines / sizeof lines[0]; k++) {
        cc_case c = cc_t_parse_case(lines[k]);
        for (int output = -1; output < c.n_in; output++) {
            if (output >= 0 && !is_data(c.op, output))
                continue;
            double f;
            assert_int_equal(run_bug(&c, output, BUG_NONE, &r, &f), CC_RES_PASS);
            least = f < least ? f : least;
            most = f > most ? f : most;
            for (int kind = BUG_ROW; kind <= BUG_WINDOW; kind++)
                for (int rep = 0; rep < 3; rep++) {
                    planted++;
                    caught += run_bug(&c, output, (bug_kind)kind, &r, &f) == CC_RES_FAIL;
                }
        }
    }
    fprintf(stderr, "planted bugs caught by the sampled check: %ld/%ld (one row, one column, one "
                    "window; outputs and gradients); checked fractions %.3f .. %.3f\n",
            caught, planted, least, most);
    assert_int_equal(caught, planted);
}

/* ---- sampled verdicts = full verdicts on the smoke suite ----------------------------------- */

static void test_sampled_verdicts_equal_full_on_smoke(void **state)
{
    (void)state;
    char msg[512];
    cc_plugin *pl = cc_plugin_open(CAPCHECK_PLUGIN_DIR "/mutants.so", msg, sizeof msg);
    if (!pl)
        fail_msg("%s", msg);
    const cc_provider *p = cc_plugin_provider(pl);
    assert_int_equal(p->init(p->ctx, CC_CPU, msg, sizeof msg), CC_OK);
    cc_case_list l = {0};
    assert_int_equal(cc_t_load_cases(CAPCHECK_SOURCE_DIR "/cases/smoke.cases", &l), 0);
    /* no bug, and every planted bug of the plugin that reaches these ops without crashing, each
     * on the cases of the op it changes (tests/plugins/mutants.c; NULL: every op; elsewhere it
     * is the unmutated provider, which the first round checks) */
    static const struct {
        const char *name, *op;
    } mutants[] = {{"", NULL},
                   {"linear_transposed_w", "linear"},
                   {"linear_no_bias_grad", "linear"},
                   {"ignore_stride", NULL},
                   {"matmul_drop_last_k", "matmul"},
                   {"matmul_tf32", "matmul"},
                   {"nan_to_zero", NULL}};
    cc_guard_cache cache = {0}; /* the buffers' mappings kept from case to case, as a worker's */
    cc_run_options sampled = {.guard_cache = &cache, .threads = 1, .ref = CC_REF_SAMPLED},
                   full = {.guard_cache = &cache, .threads = 1, .ref = CC_REF_FULL};
    for (size_t m = 0; m < sizeof mutants / sizeof mutants[0]; m++) {
        setenv("CAPCHECK_MUTANT", mutants[m].name, 1);
        long cases = 0, sampled_cases = 0, failing = 0;
        for (size_t k = 0; k < l.n; k++) {
            if (!l.v[k].op->forward_at ||
                (mutants[m].op && strcmp(l.v[k].op->name, mutants[m].op) != 0))
                continue;
            cc_result rs, rf;
            cc_run_case_probed(p, &l.v[k], &sampled, NULL, &rs);
            cc_run_case_probed(p, &l.v[k], &full, NULL, &rf);
            if (rs.status != rf.status)
                fail_msg("mutant '%s': sampled %s, full %s (%s): %s", mutants[m].name,
                         cc_result_status_name(rs.status), cc_result_status_name(rf.status),
                         rf.message, rf.line);
            cases++;
            sampled_cases += rs.sampled;
            failing += rf.status != CC_RES_PASS;
        }
        fprintf(stderr, "mutant '%s': %ld smoke cases (%ld sampled), %ld not passing, same verdicts\n",
                mutants[m].name, cases, sampled_cases, failing);
        assert_true(cases > 0 && sampled_cases > 0);
    }
    unsetenv("CAPCHECK_MUTANT");
    cc_guard_cache_clear(&cache);
    cc_case_list_free(&l);
    cc_plugin_close(pl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_planted_bugs_are_caught),
        cmocka_unit_test(test_sampled_verdicts_equal_full_on_smoke),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
