#define _POSIX_C_SOURCE 200809L
#include "harness/run/runner.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "core/clock.h"
#include "harness/run/compare.h"
#include "core/dtype.h"
#include "core/json.h"
#include "harness/case/materialize.h"
#include "harness/run/sample.h"
#include "harness/run/zero_trust.h"
#include "core/text.h"
#include "core/guard.h"
#include "reference/ref_parallel.h"

static const char *const status_names[CC_RES_COUNT] = {
    "pass", "fail", "unsupported", "error", "crash", "timeout", "out-of-bounds", "nondeterministic"};

long cc_count_errors(const long *counts)
{
    return counts[CC_RES_ERROR] + counts[CC_RES_CRASH] + counts[CC_RES_TIMEOUT] +
           counts[CC_RES_OUT_OF_BOUNDS] + counts[CC_RES_NONDETERMINISTIC];
}

int cc_result_nonfinite_miss(const cc_result *r)
{
    return r->status == CC_RES_FAIL && r->worst_output[0] &&
           (!isfinite(r->expected) || !isfinite(r->got));
}

const char *cc_result_status_name(cc_result_status s)
{
    return s < CC_RES_COUNT ? status_names[s] : "?";
}


/* Multi-index text of flat index i in shape s. */
static void format_index(const ref_shape *s, int64_t i, char *buf, size_t n)
{
    int64_t idx[REF_MAX_RANK];
    for (int a = s->rank - 1; a >= 0; a--) {
        int64_t d = s->dim[a] > 0 ? s->dim[a] : 1;
        idx[a] = i % d;
        i /= d;
    }
    ref_shape t = {s->rank, {0}};
    memcpy(t.dim, idx, sizeof(int64_t) * (size_t)s->rank);
    ref_shape_fmt(&t, buf, n);
}

/* Keep a comparison as the case's worst if it is: its figures now, its index and inputs as
 * text once the case is judged (describe_worst; most comparisons are overtaken). */
static void note_worst(cc_result *r, const cc_comparison *cmp, const char *what,
                       const ref_shape *shape, const ref_shape **worst_shape)
{
    if (cmp->n == 0 || (r->worst_output[0] && !(cmp->worst_ratio > r->worst_ratio)))
        return;
    r->worst_ratio = cmp->worst_ratio;
    cc_text_join(r->worst_output, sizeof r->worst_output, what, NULL);
    r->worst_flat = cmp->worst_index;
    *worst_shape = shape;
    r->expected = cmp->expected;
    r->got = cmp->got;
    r->bound = cmp->bound;
    r->worst_by_prob = cmp->worst_by_prob;
}

/* The worst element's multi-index, and the inputs of that output's shape at it. */
static void describe_worst(cc_result *r, const cc_case *c, const cc_inputs *in,
                           const ref_shape *shape)
{
    if (!r->worst_output[0] || !shape)
        return;
    format_index(shape, r->worst_flat, r->worst_index, sizeof r->worst_index);
    /* "a=1.5 b=-2": appended as snprintf would (cut to fit; then nothing more) */
    size_t used = 0, cap = sizeof r->worst_inputs;
    for (int i = 0; i < c->n_in; i++) {
        if (!ref_shape_eq(&c->shape[i], shape) || used >= cap)
            continue;
        char value[CC_JSON_NUMBER_MAX]; /* %.17g */
        cc_format_g17(in->ref_in[i].v[r->worst_flat], value);
        const char *parts[] = {used ? " " : "", cc_input_name(c->op, i), "=", value};
        for (int k = 0; k < 4; k++)
            for (const char *ch = parts[k]; *ch; ch++, used++)
                if (used < cap - 1)
                    r->worst_inputs[used] = *ch;
    }
    r->worst_inputs[used < cap ? used : cap - 1] = 0;
}

cc_status cc_provider_init(const cc_provider *p, cc_device d, char *msg, size_t len)
{
    if (!p->init)
        return CC_OK;
    memset(msg, 0, len);
    cc_status st = p->init(p->ctx, d, msg, len);
    cc_text_clean(msg, len);
    if (st != CC_OK && !msg[0])
        snprintf(msg, len, "%s", st == CC_UNSUPPORTED ? "unsupported" : "init failed");
    return st;
}

void cc_provider_describe(const cc_provider *p, char *buf, size_t len)
{
    memset(buf, 0, len);
    if (p->describe)
        p->describe(p->ctx, buf, len);
    cc_text_clean(buf, len);
    if (!buf[0])
        snprintf(buf, len, "%s", p->name);
}

/* A forward or VJP call's status: 0 for CC_OK, else 1 with the result's status and message
 * (the provider's text made a bounded sentence first). */
static int provider_failed(cc_status st, char *msg, size_t msg_len, const char *phase,
                           cc_result *r)
{
    if (st == CC_OK)
        return 0;
    cc_text_clean(msg, msg_len);
    /* a provider that checks its own buffers (the CUDA providers' canaries) says so first */
    int oob = st == CC_FAILED && strncmp(msg, "out-of-bounds:", 14) == 0;
    r->status = st == CC_UNSUPPORTED ? CC_RES_UNSUPPORTED
                : oob                ? CC_RES_OUT_OF_BOUNDS
                                     : CC_RES_ERROR;
    snprintf(r->message, sizeof r->message, "%s: %s", phase, msg[0] ? msg : "no message");
    return 1;
}

/* The inputs as zero-trust sources (plus the cotangent g for gradients). */
static int zt_sources(const cc_case *c, const cc_inputs *in, int with_g, cc_zt_source *src)
{
    int k = 0;
    for (int i = 0; i < c->n_in; i++)
        src[k++] = (cc_zt_source){cc_input_name(c->op, i), in->ref_in[i].v,
                                  ref_numel(&in->ref_in[i].shape)};
    if (with_g)
        src[k++] = (cc_zt_source){"the cotangent g", in->g.v, ref_numel(&in->g.shape)};
    return k;
}

/* Whether the case's values repeat or are few: an input in the bcast layout (the same values
 * again along axis 0) or edge=ties (every value from a small set). Results built from them sit
 * at structured places between the dtype's values and round one way more often than the other:
 * the reference's own bf16 matmul gradient of a bcast operand, rounded to nearest, errs toward
 * zero at 151 of 202 values (z = 7.0; tests/mutants.cases), so the rounding-bias test is off. */
static int values_round_alike(const cc_case *c)
{
    if (c->edges & (1u << CC_EDGE_TIES))
        return 1;
    for (int i = 0; i < c->n_in; i++)
        if (cc_case_input_layout(c, i).kind == CC_LAYOUT_BCAST && c->shape[i].rank >= 2 &&
            c->shape[i].dim[0] > 1)
            return 1;
    return 0;
}

/* The case's bound model: its dtype, compute roundoff and accumulation mode, the oracle's share
 * where its sums are compensated, the non-finite rule of the NaN and Inf edge classes, and the
 * rounding-bias test, off where values round alike (compare.h). With worst_case_only, neither the probabilistic bound's verdict nor the
 * rounding-bias test runs. */
static cc_bound_model case_bound(const cc_case *c, double compute_u, double c_op,
                                 cc_accumulation acc, int worst_case_only, int compensated)
{
    cc_bound_model bm = cc_bound_for_judging(c->dtype, compute_u, c_op, acc);
    if (compensated)
        cc_bound_oracle_compensated(&bm);
    bm.nonfinite_alike = (c->edges & (1u << CC_EDGE_NAN | 1u << CC_EDGE_INF)) != 0;
    if (worst_case_only)
        bm.prob_judges = 0;
    if (worst_case_only || values_round_alike(c))
        bm.bias_test = 0;
    return bm;
}

/* One case's run: what every provider call of it shares. */
typedef struct {
    const cc_provider *p;
    const cc_case *c;
    const cc_call *call;
    cc_inputs *in;
    const cc_run_options *o;
    const ref_params *params; /* the case's, with the reference's threads */
    int sampled;              /* the reference at a sample of the elements (harness/run/sample.h) */
    int threads;              /* for the sampled reference's picks */
    int repeats;    /* provider calls per check (--repeat) */
    int must_agree; /* calls at one buffer placement must give the same bits */
    double cu;      /* the provider's compute roundoff for this case */
    cc_probe *probe;
    cc_result *r;
    const ref_shape *worst_shape; /* the shape of the output the worst element is in */
    char zt[384]; /* the first zero-trust verdict, if any */
    char biased[384]; /* the first rounding-bias verdict, if any */
    /* the first call that disagreed with an earlier call at its buffer placement (a race):
     * calls differs_base and differs_call (0-based) of `calls` made */
    int differs, differs_base, differs_call, calls;
    char differs_what[32];
    int64_t differs_index;
    double differs_first, differs_now;
} case_run;

/* The flat index of the first element where a and b (same shape and dtype) differ in their
 * bits, any NaN equal to any NaN; -1 when none does. */
static int64_t first_difference(const cc_view *a, const cc_view *b)
{
    size_t es = cc_dtype_size(a->dtype);
    int64_t n = 1;
    for (int k = 0; k < a->rank; k++)
        n *= a->shape[k];
    for (int64_t i = 0; i < n; i++) {
        const char *x = (const char *)a->data + (size_t)i * es, *y = (const char *)b->data + (size_t)i * es;
        if (memcmp(x, y, es) == 0)
            continue;
        if (cc_dtype_is_float(a->dtype) && isnan(cc_load(a->dtype, a->data, i)) &&
            isnan(cc_load(b->dtype, b->data, i)))
            continue;
        return i;
    }
    return -1;
}

/* A race: call `call` gave other bits than call `base` at the same buffer placement. */
static void note_difference(case_run *cr, int base, int call, const char *what,
                            const cc_view *earlier, const cc_view *now)
{
    if (cr->differs)
        return;
    int64_t i = first_difference(earlier, now);
    if (i < 0)
        return;
    cr->differs = 1;
    cr->differs_base = base;
    cr->differs_call = call;
    snprintf(cr->differs_what, sizeof cr->differs_what, "%s", what);
    cr->differs_index = i;
    cr->differs_first = cc_load(earlier->dtype, earlier->data, i);
    cr->differs_now = cc_load(now->dtype, now->data, i);
}

/* Where call k's buffers sit: every second call moves them to the other placement (guard.h);
 * unguarded buffers (--no-guard) are never moved, so every call counts as the first's. */
static cc_guard_place call_place(const case_run *cr, int k)
{
    return cr->in->mem.guarded && k % 2 ? CC_PLACE_START : CC_PLACE_END;
}

/* Call k's output `now` (0-based k; named what, of shape s) against the calls before it, where
 * bits must agree. At call 1's placement it must equal call 1 (else a race). Call 2, the first
 * at the other placement, may differ from call 1: it is then kept in *moved and noted as a
 * placement difference (returns 1), and the loop makes sure each placement has a second call
 * (calls_to_make) to tell the placement from a race. Later calls at the other placement must
 * equal *moved (or call 1, when call 2 did). */
static int compare_call(case_run *cr, int k, const char *what, const ref_shape *s,
                        const cc_view *first, cc_view *moved, const cc_view *now)
{
    if (!cr->must_agree || cr->differs)
        return 0;
    if (call_place(cr, k) == call_place(cr, 0)) {
        note_difference(cr, 0, k, what, first, now);
        return 0;
    }
    if (k > 1) {
        note_difference(cr, moved->data ? 1 : 0, k, what, moved->data ? moved : first, now);
        return 0;
    }
    int64_t i = first_difference(first, now);
    if (i < 0)
        return 0;
    *moved = *now;
    cc_result *r = cr->r;
    if (!r->placement_sensitive) { /* the first element of the first output that moved */
        r->placement_sensitive = 1;
        snprintf(r->placement_output, sizeof r->placement_output, "%s", what);
        format_index(s, i, r->placement_index, sizeof r->placement_index);
        r->placement_first = cc_load(first->dtype, first->data, i);
        r->placement_moved = cc_load(now->dtype, now->data, i);
    }
    return 1;
}

/* Before provider call k (0-based) of `calls`: every second one moves the provider's input
 * buffers to the other placement (call_place), so an under-run read of call 0's slack faults
 * there (guard.h). */
static int place_for_call(case_run *cr, int k, int calls, const char *what)
{
    cc_guard_set *m = &cr->in->mem;
    m->call = what;
    m->repeat = k;
    m->repeats = calls;
    cc_guard_place want = call_place(cr, k);
    if (m->guarded && m->place != want && cc_inputs_replace(cr->c, cr->in, want)) {
        cr->r->status = CC_RES_ERROR;
        snprintf(cr->r->message, sizeof cr->r->message, "out of memory moving the inputs");
        return -1;
    }
    return 0;
}

/* After a provider call: its canaries. */
static int guard_spoiled(case_run *cr)
{
    char msg[384];
    if (cc_guard_check(&cr->in->mem, msg, sizeof msg) == 0)
        return 0;
    cr->r->status = CC_RES_OUT_OF_BOUNDS;
    snprintf(cr->r->message, sizeof cr->r->message, "%s", msg);
    return 1;
}

/* The reference of one output under judgement: every element (at == NULL), or the picked
 * elements of a sampled check (at[e] the flat index of expected[e] and of element e of mag's
 * planes). */
typedef struct {
    const double *expected;
    const ref_mag *mag;
    const int64_t *at;
    int64_t count;
} expected_values;

/* The rounding-bias test of output `what`: the record keeps the test of largest |z|, and the
 * first output it finds biased makes the verdict (compare.h). */
static void note_bias(case_run *cr, const char *what, const cc_bias *b)
{
    cc_result *r = cr->r;
    if (b->n < 0 && !cr->biased[0]) {
        snprintf(cr->biased, sizeof cr->biased,
                 "rounding bias: out of memory for the test of %s", what);
        return;
    }
    if (b->n > 0 && (r->bias.n == 0 || fabs(b->z) > fabs(r->bias.z))) {
        r->bias = *b;
        snprintf(r->bias_output, sizeof r->bias_output, "%s", what);
    }
    if (b->biased && !cr->biased[0]) {
        int zero = fabs((double)(2 * b->toward_zero - b->n)) >= fabs((double)(2 * b->below - b->n));
        int64_t k = zero ? b->toward_zero : b->below;
        const char *way = zero ? (2 * k > b->n ? "toward zero" : "away from zero")
                               : (2 * k > b->n ? "below the exact value" : "above the exact value");
        snprintf(cr->biased, sizeof cr->biased,
                 "rounding bias: %s's final rounding errs %s at %lld of its %lld distinct values "
                 "not representable in the dtype (mean %.3g ulp away from zero; z = %.3g, round "
                 "to nearest exceeds %.3g with probability %g)",
                 what, way, (long long)(2 * k > b->n ? k : b->n - k), (long long)b->n,
                 b->mean_ulp, b->z, cc_bias_z_threshold(), CC_BIAS_ALPHA);
    }
}

/* Judge the provider's output `got` (named `what`, of shape `shape`) of call k against the
 * reference: its bound ratio into *ratio (the largest over the calls), and on the first call
 * what every compared output adds beyond its ratio (the suspect ratio, vacuity, with --power the
 * detection power), the probed element and the zero-trust checks. */
static void judge(case_run *cr, int k, const char *what, const ref_shape *shape, const cc_view *got,
                  const expected_values *ev, const cc_bound_model *bm, double c_op, int with_g,
                  double *ratio)
{
    const cc_case *c = cr->c;
    cc_comparison cmp;
    cc_compare_at(ev->expected, ev->mag, ev->at, ev->count, got, bm, &cmp);
    cc_zt_source src[REF_MAX_INPUTS + 1];
    int ns = k == 0 ? zt_sources(c, cr->in, with_g, src) : 0;
    if (cr->o->tap)
        cr->o->tap->seen(cr->o->tap->ctx,
                         &(cc_judged_output){what, got, ev->expected, ev->mag, ev->at, ev->count,
                                             bm, c_op, src, ns, k, &cmp});
    if (cmp.worst_ratio > *ratio)
        *ratio = cmp.worst_ratio;
    note_worst(cr->r, &cmp, what, shape, &cr->worst_shape);
    if (k > 0)
        return;
    cc_result *r = cr->r;
    if (cmp.suspect_ratio > r->suspect_ratio)
        r->suspect_ratio = cmp.suspect_ratio;
    /* each output once (judge sees it at k = 0 once per check), whole names only */
    size_t used = strlen(r->vacuous_outputs);
    if (cmp.vacuous && used + 1 + strlen(what) < sizeof r->vacuous_outputs)
        snprintf(r->vacuous_outputs + used, sizeof r->vacuous_outputs - used, "%s%s",
                 used ? " " : "", what);
    r->vacuous |= cmp.vacuous;
    r->prob_judged += cmp.n_prob;
    note_bias(cr, what, &cmp.bias);
    if (cr->o->power)
        cc_power_of_check_at(ev->expected, ev->mag, ev->at, ev->count, got, bm, &r->power);
    cc_probe *probe = cr->probe;
    if (probe && strcmp(probe->output, what) == 0) { /* the probed element, if judged here */
        int64_t e = -1;
        if (!ev->at && probe->index >= 0 && probe->index < cmp.n)
            e = probe->index;
        for (int64_t j = 0; ev->at && j < ev->count && e < 0; j++)
            if (ev->at[j] == probe->index)
                e = j;
        if (e >= 0) {
            probe->found = 1;
            probe->got = cc_load(got->dtype, got->data, probe->index);
            double bound = cc_element_judging_bound(bm, cc_element_mag_at(ev->mag, e),
                                                    ev->expected[e], cmp.own_max, got->dtype,
                                                    NULL);
            probe->ratio = cc_element_ratio_of(probe->compare_with, probe->got, bound,
                                               got->dtype, bm);
        }
    }
    if (!cr->zt[0])
        cc_zero_trust_at(what, ev->expected, ev->mag->worst, ev->at, ev->count, c_op, got, src,
                         ns, cr->zt, sizeof cr->zt);
}

/* A sampled check's picks of one output: its plan, every element where the provider wrote NaN
 * or Inf, and the element a probe asks about; room for the reference's values there. */
#define MAX_NONFINITE_PICKS 4096 /* enough to judge; the first is already a failure */

static int sample_picks(const cc_case *c, int wrt, const ref_shape *s, const cc_view *got,
                        const cc_probe *probe, const char *what, cc_sample *plan, ref_picks *pk)
{
    memset(pk, 0, sizeof *pk);
    if (cc_sample_plan(c, wrt, s, plan))
        return -1;
    int64_t extra[MAX_NONFINITE_PICKS + 1], ne = 0;
    for (int64_t i = 0; i < plan->total && ne < MAX_NONFINITE_PICKS; i++) {
        i = cc_find_nonfinite(got->dtype, got->data, i, plan->total - i);
        if (i < 0)
            break;
        extra[ne++] = i;
    }
    if (probe && strcmp(probe->output, what) == 0 && probe->index >= 0 &&
        probe->index < plan->total)
        extra[ne++] = probe->index;
    if (cc_sample_add(plan, extra, ne))
        return -1;
    *pk = (ref_picks){plan->count, plan->at, malloc(sizeof(double) * (size_t)(plan->count + 1)),
                      {NULL, NULL, NULL}};
    return pk->v && !ref_mag_alloc(plan->count, &pk->mag) ? 0 : -1;
}

/* The reference at the picks: the output's (vjp 0: pk[0]) or every gradient's at once (vjp 1:
 * pk[i] for input i), the picks of each output dealt into `parts` ranges, one per thread. */
typedef struct {
    const cc_case *c;
    const ref_params *params;
    const cc_inputs *in;
    int vjp, parts;
    ref_picks *pk;
    int failed;
} picks_job;

static void picks_part(void *ctx, int64_t lo, int64_t hi)
{
    picks_job *j = ctx;
    const ref_op *op = j->c->op;
    int outputs = j->vjp ? j->c->n_in : 1;
    for (int64_t t = lo; t < hi; t++) {
        ref_picks part[REF_MAX_INPUTS];
        for (int k = 0; k < outputs; k++) {
            const ref_picks *w = &j->pk[k];
            int64_t a = w->count * t / j->parts, b = w->count * (t + 1) / j->parts;
            part[k] = (ref_picks){b - a, w->at ? w->at + a : NULL, w->v ? w->v + a : NULL,
                                  {w->mag.worst ? w->mag.worst + a : NULL,
                                   w->mag.dtype ? w->mag.dtype + a : NULL,
                                   w->mag.prob ? w->mag.prob + a : NULL}};
        }
        ref_status st = j->vjp ? op->vjp_at(j->params, j->c->n_in, j->in->ref_in, &j->in->g, part)
                               : op->forward_at(j->params, j->c->n_in, j->in->ref_in, part);
        if (st != REF_OK)
            j->failed = 1;
    }
}

static int evaluate_picks(const cc_case *c, const cc_inputs *in, int vjp, int threads,
                          ref_picks *pk)
{
    ref_params params = c->params;
    params.threads = 1;
    int64_t most = 0;
    for (int k = 0; k < (vjp ? c->n_in : 1); k++)
        most = pk[k].count > most ? pk[k].count : most;
    int parts = threads < 1 ? 1 : (int64_t)threads > most / 64 + 1 ? (int)(most / 64 + 1) : threads;
    picks_job j = {c, &params, in, vjp, parts, pk, 0};
    ref_parallel_for(parts, parts, 1, picks_part, &j);
    for (int k = 0; k < (vjp ? c->n_in : 1); k++) /* planes an op left NaN read as worst */
        if (pk[k].mag.worst)
            ref_mag_complete(&pk[k].mag, pk[k].count);
    return j.failed ? -1 : 0;
}

/* The sampled reference of a call's outputs (the forward's y, or every gradient): the plans and
 * the reference's values at their picks. A repeated call whose plans come out the same (the
 * same non-finite elements) reuses the values. */
typedef struct {
    int n;
    cc_sample plan[REF_MAX_INPUTS];
    ref_picks pk[REF_MAX_INPUTS];
} sampled_ref;

static void sampled_ref_free(sampled_ref *s)
{
    for (int i = 0; i < s->n; i++) {
        cc_sample_free(&s->plan[i]);
        free(s->pk[i].v);
        ref_mag_free(&s->pk[i].mag);
    }
    memset(s, 0, sizeof *s);
}

static int same_plans(const sampled_ref *a, const sampled_ref *b)
{
    if (a->n != b->n)
        return 0;
    for (int i = 0; i < a->n; i++)
        if (a->plan[i].count != b->plan[i].count ||
            (a->plan[i].count && memcmp(a->plan[i].at, b->plan[i].at,
                                        sizeof(int64_t) * (size_t)a->plan[i].count) != 0))
            return 0;
    return 1;
}

/* The sampled reference for outputs got[0..n) (n = 1: y; else one per input, those without
 * data skipped) into *s, kept when s already holds the same plans. Returns 0, or -1 (then the
 * result says why). */
static int sample_reference(case_run *cr, int vjp, const cc_view *got, char what[][32],
                            sampled_ref *s)
{
    const cc_case *c = cr->c;
    sampled_ref now;
    memset(&now, 0, sizeof now);
    now.n = vjp ? c->n_in : 1;
    int fail = 0;
    for (int i = 0; i < now.n && !fail; i++)
        fail = got[i].data &&
               sample_picks(c, vjp ? i : -1, vjp ? &c->shape[i] : &cr->in->out_shape, &got[i],
                            cr->probe, what[i], &now.plan[i], &now.pk[i]);
    if (!fail && s->n && same_plans(&now, s)) {
        sampled_ref_free(&now);
        return 0;
    }
    sampled_ref_free(s);
    *s = now;
    if (fail || evaluate_picks(c, cr->in, vjp, cr->threads, s->pk)) {
        cr->r->status = CC_RES_ERROR;
        snprintf(cr->r->message, sizeof cr->r->message, "sampled reference %s failed",
                 vjp ? "VJP" : "forward");
        return -1;
    }
    return 0;
}

static void note_sample(cc_result *r, const cc_sample *plan)
{
    r->sampled = 1;
    r->sample_checked += plan->count;
    r->sample_total += plan->total;
    if (plan->window_rows * plan->window_cols > r->window_rows * r->window_cols) {
        r->window_rows = plan->window_rows;
        r->window_cols = plan->window_cols;
    }
}

/* How many calls a check makes, seen after a call: the --repeat asked, and at least 4 once call
 * 2 differed at the other placement (moved) and no race was seen: two calls at each placement.
 * A placement-sensitive kernel gives call 1's bits again at call 1's placement and call 2's at
 * the other; a race that spoiled call 1 or call 2 alone gives other bits at one of them (with a
 * second call at call 1's placement only, a spoiled call 2 would pass as placement-sensitive). */
enum { CALLS_WHEN_PLACEMENTS_DIFFER = 4 };

static int calls_to_make(const case_run *cr, int calls, int moved)
{
    return moved && !cr->differs && calls < CALLS_WHEN_PLACEMENTS_DIFFER
               ? CALLS_WHEN_PLACEMENTS_DIFFER
               : calls;
}

static void run_forward(case_run *cr, const ref_tensor *y, const ref_mag *mag)
{
    const cc_case *c = cr->c;
    cc_inputs *in = cr->in;
    cc_result *r = cr->r;
    cc_view first;
    memset(&first, 0, sizeof first);
    sampled_ref sr;
    memset(&sr, 0, sizeof sr);
    char what[1][32] = {"y"};
    cc_view moved; /* call 2's output, when it differed from call 1's (compare_call) */
    memset(&moved, 0, sizeof moved);
    cc_bound_model bm = case_bound(c, cr->cu, c->op->c_fwd, cr->o->accumulation,
                                   cr->o->worst_case_only,
                                   (c->op->compensated & REF_COMPENSATED_FWD) != 0);
    int calls = cr->repeats;
    for (int k = 0; k < calls && r->status == CC_RES_PASS; k++) {
        if (place_for_call(cr, k, calls, "forward"))
            break;
        cc_view out;
        if (cc_alloc_output_in(in, "output y", c->dtype, &in->out_shape, &out)) {
            r->status = CC_RES_ERROR;
            snprintf(r->message, sizeof r->message, "out of memory");
            break;
        }
        char msg[256] = "";
        cc_guard_arm(&in->mem);
        cc_status st = cr->p->forward(cr->p->ctx, cr->call, &out, msg, sizeof msg);
        cc_guard_arm(NULL);
        if (provider_failed(st, msg, sizeof msg, "forward", r) || guard_spoiled(cr) ||
            (cr->sampled && sample_reference(cr, 0, &out, what, &sr))) {
            cc_guard_free(&in->mem, out.data);
            break;
        }
        expected_values ev = {y->v, mag, NULL, 0};
        if (cr->sampled) {
            ev = (expected_values){sr.pk[0].v, &sr.pk[0].mag, sr.plan[0].at, sr.plan[0].count};
            if (k == 0)
                note_sample(r, &sr.plan[0]);
        }
        r->checked_fwd = 1;
        judge(cr, k, "y", &in->out_shape, &out, &ev, &bm, c->op->c_fwd, 0, &r->fwd_ratio);
        if (k == 0)
            first = out;
        else if (!compare_call(cr, k, "y", &in->out_shape, &first, &moved, &out))
            cc_guard_free(&in->mem, out.data);
        calls = calls_to_make(cr, calls, moved.data != NULL);
    }
    cr->calls = cr->calls > calls ? cr->calls : calls;
    sampled_ref_free(&sr);
    cc_guard_free(&in->mem, first.data);
    cc_guard_free(&in->mem, moved.data);
}

static void run_vjp(case_run *cr, const ref_tensor *y)
{
    const cc_case *c = cr->c;
    cc_inputs *in = cr->in;
    cc_result *r = cr->r;
    const ref_op *op = c->op;
    ref_tensor grad[REF_MAX_INPUTS];
    ref_mag gmag[REF_MAX_INPUTS];
    memset(gmag, 0, sizeof gmag);
    cc_view first[REF_MAX_INPUTS], moved[REF_MAX_INPUTS]; /* calls 1 and 2 (run_forward) */
    int data[REF_MAX_INPUTS] = {0}; /* the inputs that have a gradient */
    char what[REF_MAX_INPUTS][32];
    sampled_ref sr;
    memset(grad, 0, sizeof grad);
    memset(first, 0, sizeof first);
    memset(moved, 0, sizeof moved);
    memset(&sr, 0, sizeof sr);
    int fail = 0, any_moved = 0;
    for (int i = 0; i < c->n_in; i++) {
        grad[i].shape = c->shape[i];
        cc_text_join(what[i], sizeof what[i], "grad:", cc_input_name(op, i));
        int k = i < op->max_inputs ? i : op->max_inputs - 1;
        if (op->input_kind[k < REF_MAX_INPUTS ? k : REF_MAX_INPUTS - 1] != REF_IN_DATA)
            continue;
        data[i] = 1;
        if (cr->sampled) /* a sampled check makes its picks' values after the call */
            continue;
        int64_t n = ref_numel(&c->shape[i]);
        grad[i].v = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
        if (!grad[i].v || ref_mag_alloc(n, &gmag[i]))
            fail = 1;
    }
    if (fail) {
        r->status = CC_RES_ERROR;
        snprintf(r->message, sizeof r->message, "out of memory");
        goto done;
    }
    if (!cr->sampled &&
        op->vjp(cr->params, c->n_in, in->ref_in, y, &in->g, grad, gmag) != REF_OK) {
        r->status = CC_RES_ERROR;
        snprintf(r->message, sizeof r->message, "reference VJP failed");
        goto done;
    }
    for (int i = 0; i < c->n_in; i++)
        if (grad[i].v)
            ref_mag_complete(&gmag[i], ref_numel(&c->shape[i]));
    cc_bound_model bm = case_bound(c, cr->cu, op->c_vjp, cr->o->accumulation,
                                   cr->o->worst_case_only,
                                   (op->compensated & REF_COMPENSATED_VJP) != 0);
    int calls = cr->repeats;
    for (int k = 0; k < calls && r->status == CC_RES_PASS; k++) {
        if (place_for_call(cr, k, calls, "vjp"))
            break;
        cc_view got[REF_MAX_INPUTS];
        memset(got, 0, sizeof got);
        for (int i = 0; i < c->n_in && !fail; i++)
            if (data[i] && cc_alloc_output_in(in, what[i], c->dtype, &c->shape[i], &got[i]))
                fail = 1;
        char msg[256] = "";
        cc_status st = CC_OK;
        if (!fail) {
            cc_guard_arm(&in->mem);
            st = cr->p->vjp(cr->p->ctx, cr->call, &in->g_view, got, msg, sizeof msg);
            cc_guard_arm(NULL);
        }
        if (fail) {
            r->status = CC_RES_ERROR;
            snprintf(r->message, sizeof r->message, "out of memory");
        } else if (!provider_failed(st, msg, sizeof msg, "vjp", r) && !guard_spoiled(cr) &&
                   !(cr->sampled && sample_reference(cr, 1, got, what, &sr))) {
            r->checked_vjp = 1;
            for (int i = 0; i < c->n_in; i++) {
                if (!data[i])
                    continue;
                expected_values ev = {grad[i].v, &gmag[i], NULL, 0};
                if (cr->sampled) {
                    ev = (expected_values){sr.pk[i].v, &sr.pk[i].mag, sr.plan[i].at,
                                           sr.plan[i].count};
                    if (k == 0)
                        note_sample(r, &sr.plan[i]);
                }
                judge(cr, k, what[i], &c->shape[i], &got[i], &ev, &bm, op->c_vjp, 1,
                      &r->vjp_ratio);
                if (k > 0 && compare_call(cr, k, what[i], &c->shape[i], &first[i], &moved[i],
                                          &got[i])) {
                    got[i].data = NULL; /* kept as moved[i] */
                    any_moved = 1;
                }
            }
        }
        for (int i = 0; i < c->n_in; i++) {
            if (k == 0 && r->status == CC_RES_PASS)
                first[i] = got[i];
            else
                cc_guard_free(&in->mem, got[i].data);
        }
        calls = calls_to_make(cr, calls, any_moved);
    }
    cr->calls = cr->calls > calls ? cr->calls : calls;
done:
    sampled_ref_free(&sr);
    for (int i = 0; i < REF_MAX_INPUTS; i++) {
        free(grad[i].v);
        ref_mag_free(&gmag[i]);
        cc_guard_free(&in->mem, first[i].data);
        cc_guard_free(&in->mem, moved[i].data);
    }
}

/* p's vjpMode text for op into out (n bytes): "unknown" when it states none. */
static void ask_vjp_mode(const cc_provider *p, const ref_op *op, char *out, size_t n)
{
    const char *mode = p->vjp_mode ? p->vjp_mode(p->ctx, op->name) : NULL;
    cc_text_join(out, n, mode ? mode : "unknown", NULL);
}

void cc_result_begin(const cc_provider *p, const cc_case *c, cc_result *r)
{
    cc_result_begin_kept(p, c, NULL, r);
}

void cc_result_begin_kept(const cc_provider *p, const cc_case *c, cc_vjp_modes *kept,
                          cc_result *r)
{
    memset(r, 0, sizeof *r);
    cc_case_print(c, r->line, sizeof r->line);
    cc_text_join(r->op, sizeof r->op, c->op->name, NULL);
    cc_text_join(r->provider, sizeof r->provider, p->name, NULL);
    _Static_assert(sizeof kept->slot[0].mode == sizeof r->vjp_mode, "one vjpMode text size");
    if (!kept) {
        ask_vjp_mode(p, c->op, r->vjp_mode, sizeof r->vjp_mode);
    } else {
        size_t k = (size_t)((uintptr_t)c->op / sizeof(void *) % CC_VJP_MODES_KEPT);
        if (kept->slot[k].provider != p || kept->slot[k].op != c->op) {
            ask_vjp_mode(p, c->op, kept->slot[k].mode, sizeof kept->slot[k].mode);
            kept->slot[k].provider = p;
            kept->slot[k].op = c->op;
        }
        memcpy(r->vjp_mode, kept->slot[k].mode, sizeof r->vjp_mode);
    }
    r->dtype = c->dtype;
    r->device = c->device;
    r->layout = c->layout;
    r->status = CC_RES_PASS;
}

void cc_runner_keep_memory(void)
{
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 32 << 20); /* glibc's largest: blocks below stay in the heap */
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

void cc_run_case(const cc_provider *p, const cc_case *c, cc_result *r)
{
    cc_run_case_probed(p, c, NULL, NULL, r);
}

void cc_run_case_probed(const cc_provider *p, const cc_case *c, const cc_run_options *o,
                        cc_probe *probe, cc_result *r)
{
    static const cc_run_options defaults = {0};
    if (!o)
        o = &defaults;
    double t0 = cc_monotonic_seconds();
    cc_result_begin_kept(p, c, o->vjp_modes, r);
    r->accumulation = o->accumulation;
    r->has_power = o->power;
    if (o->power)
        cc_power_init(&r->power);
    int threads = o->threads > 1 ? o->threads : 1;

    cc_inputs in;
    char msg[256] = "";
    if (cc_materialize_in(c, !o->unguarded, o->guard_cache, CC_PLACE_END, threads, &in, msg,
                          sizeof msg)) {
        r->status = CC_RES_ERROR;
        snprintf(r->message, sizeof r->message, "materialize: %s", msg);
        r->seconds = cc_monotonic_seconds() - t0;
        return;
    }
    r->elements = ref_numel(&in.out_shape);
    ref_params params = c->params;
    params.threads = threads;
    int64_t ny = r->elements;
    ref_tensor y = {in.out_shape, NULL};
    ref_mag mag = {NULL, NULL, NULL};
    cc_call call = {c->op->name, &c->params, c->device, c->dtype, c->n_in, in.view};
    case_run cr;
    memset(&cr, 0, sizeof cr);
    cr.p = p;
    cr.c = c;
    cr.call = &call;
    cr.in = &in;
    cr.o = o;
    cr.params = &params;
    cr.sampled = cc_sampling_chosen(c, o->ref, &in);
    cr.threads = threads;
    cr.repeats = cr.calls = o->repeat > 1 ? o->repeat : 1;
    r->repeat = cr.repeats;
    cr.must_agree = c->device == CC_CPU || o->deterministic;
    cr.probe = probe;
    cr.r = r;
    /* the provider's compute roundoff for this op/dtype/device (TF32...): 0 = u(dtype) */
    cr.cu = p->compute_roundoff ? p->compute_roundoff(p->ctx, c->op->name, c->dtype, c->device)
                                : 0.0;
    ref_status rs = REF_OK;
    if (!cr.sampled) { /* the full reference forward (the VJP reads y) */
        y.v = calloc((size_t)(ny > 0 ? ny : 1), sizeof(double));
        int no_mag = ref_mag_alloc(ny, &mag);
        rs = y.v && !no_mag ? c->op->forward(&params, c->n_in, in.ref_in, &y, &mag) : REF_ENOMEM;
        if (rs == REF_OK)
            ref_mag_complete(&mag, ny);
    }
    if (rs != REF_OK) {
        r->status = CC_RES_ERROR;
        snprintf(r->message, sizeof r->message, "reference forward failed (%s)",
                 rs == REF_EDOMAIN ? "input outside the op's domain" : "status");
    } else if (!cc_compute_roundoff_valid(cr.cu)) {
        r->status = CC_RES_ERROR;
        snprintf(r->message, sizeof r->message,
                 "provider %s declares a compute roundoff of %g for %s %s on %s: outside 0 "
                 "(none) .. 2^-8 (bf16)",
                 p->name, cr.cu, c->op->name, cc_dtype_name(c->dtype), cc_device_name(c->device));
    } else {
        cc_result_status vjp_status = CC_RES_PASS;
        if (c->check != CC_CHECK_VJP)
            run_forward(&cr, &y, &mag);
        int forward_failed = r->status == CC_RES_PASS && r->checked_fwd &&
                             (cr.zt[0] || r->fwd_ratio > 1.0);
        if (r->status == CC_RES_PASS && c->check != CC_CHECK_FWD && c->op->vjp)
            run_vjp(&cr, &y);
        describe_worst(r, c, &in, cr.worst_shape);
        /* a wrong forward is a fail whatever the VJP then said: a provider without a VJP (or
         * whose VJP raised an error) does not hide it behind `unsupported` or `error` */
        char vjp_said[sizeof r->message] = "";
        if (forward_failed && r->status != CC_RES_PASS) {
            snprintf(vjp_said, sizeof vjp_said, "%s", r->message);
            vjp_status = r->status;
            r->status = CC_RES_PASS;
        }
        if (cr.differs && (r->status == CC_RES_PASS || r->status == CC_RES_FAIL)) {
            r->status = CC_RES_NONDETERMINISTIC;
            r->placement_sensitive = 0; /* a race, whatever the placements also did */
            snprintf(r->message, sizeof r->message,
                     "%s[%lld] differs between call %d and call %d of %d on the same inputs: "
                     "%.9g then %.9g (repeats must agree bit for bit %s%s); worst bound ratio "
                     "%.3g",
                     cr.differs_what, (long long)cr.differs_index, cr.differs_base + 1,
                     cr.differs_call + 1, cr.calls, cr.differs_first, cr.differs_now,
                     c->device == CC_CPU ? "on cpu" : "with deterministic algorithms on",
                     cr.calls > cr.repeats ? "; call 2, at the other buffer placement, "
                                             "differed from call 1, so each placement was "
                                             "called twice"
                                           : "",
                     r->worst_ratio);
        } else if (r->status == CC_RES_PASS && cr.zt[0]) {
            r->status = CC_RES_FAIL;
            snprintf(r->message, sizeof r->message, "%s", cr.zt);
        } else if (r->status == CC_RES_PASS && r->worst_ratio > 1.0) {
            r->status = CC_RES_FAIL;
            snprintf(r->message, sizeof r->message,
                     "%s%s exceeds its %sbound: expected %.9g, got %.9g, bound %.3g (ratio %.3g)",
                     r->worst_output, r->worst_index, r->worst_by_prob ? "probabilistic " : "",
                     r->expected, r->got, r->bound, r->worst_ratio);
        } else if (r->status == CC_RES_PASS && cr.biased[0]) {
            r->status = CC_RES_FAIL;
            snprintf(r->message, sizeof r->message, "%s", cr.biased);
        }
        if (r->status == CC_RES_FAIL && cr.calls > 1)
            snprintf(r->message + strlen(r->message), sizeof r->message - strlen(r->message),
                     " (worst of %d calls)", cr.calls);
        if (vjp_said[0] && r->status == CC_RES_FAIL) {
            size_t used = strlen(r->message);
            snprintf(r->message + used, sizeof r->message - used, "; and the VJP was %s (%s)",
                     cc_result_status_name(vjp_status), vjp_said);
        }
        r->suspect = r->status == CC_RES_PASS && r->suspect_ratio > 1.0;
    }
    if (r->sampled)
        r->checked_fraction = r->sample_total > 0 ? (double)r->sample_checked /
                                                        (double)r->sample_total
                                                  : 0.0;
    free(y.v);
    ref_mag_free(&mag);
    cc_inputs_free(&in);
    r->seconds = cc_monotonic_seconds() - t0;
}
