#define _POSIX_C_SOURCE 200809L
#include "harness/run/runner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "core/bulk.h"
#include "core/clock.h"
#include "harness/run/compare.h"
#include "core/dtype.h"
#include "harness/case/materialize.h"
#include "harness/run/sample.h"
#include "harness/run/zero_trust.h"
#include "reference/ref_parallel.h"

static const char *const status_names[CC_RES_COUNT] = {"pass",  "fail",  "unsupported",
                                                       "error", "crash", "timeout"};

const char *cc_result_status_name(cc_result_status s)
{
    return s < CC_RES_COUNT ? status_names[s] : "?";
}

static const char *input_name(const ref_op *op, int i)
{
    int k = i < op->max_inputs ? i : op->max_inputs - 1;
    if (k >= REF_MAX_INPUTS)
        k = REF_MAX_INPUTS - 1;
    return op->input_names[k] ? op->input_names[k] : "x";
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

/* Keep a comparison as the case's worst if it is. */
static void note_worst(cc_result *r, const cc_case *c, const cc_inputs *in,
                       const cc_comparison *cmp, const char *what, const ref_shape *shape)
{
    if (cmp->n == 0 || (r->worst_output[0] && !(cmp->worst_ratio > r->worst_ratio)))
        return;
    r->worst_ratio = cmp->worst_ratio;
    snprintf(r->worst_output, sizeof r->worst_output, "%s", what);
    r->worst_flat = cmp->worst_index;
    format_index(shape, cmp->worst_index, r->worst_index, sizeof r->worst_index);
    r->expected = cmp->expected;
    r->got = cmp->got;
    r->bound = cmp->bound;
    size_t used = 0;
    r->worst_inputs[0] = 0;
    for (int i = 0; i < c->n_in; i++)
        if (ref_shape_eq(&c->shape[i], shape) && used < sizeof r->worst_inputs)
            used += (size_t)snprintf(r->worst_inputs + used, sizeof r->worst_inputs - used,
                                     "%s%s=%.17g", used ? " " : "", input_name(c->op, i),
                                     in->ref_in[i].v[cmp->worst_index]);
}

static int provider_failed(cc_status st, const char *msg, const char *phase, cc_result *r)
{
    if (st == CC_OK)
        return 0;
    r->status = st == CC_UNSUPPORTED ? CC_RES_UNSUPPORTED : CC_RES_ERROR;
    snprintf(r->message, sizeof r->message, "%s: %s", phase, msg[0] ? msg : "no message");
    return 1;
}

/* The inputs as zero-trust sources (plus the cotangent g for gradients). */
static int zt_sources(const cc_case *c, const cc_inputs *in, int with_g, cc_zt_source *src)
{
    int k = 0;
    for (int i = 0; i < c->n_in; i++)
        src[k++] = (cc_zt_source){input_name(c->op, i), in->ref_in[i].v,
                                  ref_numel(&in->ref_in[i].shape)};
    if (with_g)
        src[k++] = (cc_zt_source){"the cotangent g", in->g.v, ref_numel(&in->g.shape)};
    return k;
}

/* The case's bound model: its dtype and compute roundoff, and the non-finite rule of the NaN and
 * Inf edge classes (compare.h). */
static cc_bound_model case_bound(const cc_case *c, double compute_u, double c_op)
{
    cc_bound_model bm = cc_bound_for_compute(c->dtype, compute_u, c_op);
    bm.nonfinite_alike = (c->edges & (1u << CC_EDGE_NAN | 1u << CC_EDGE_INF)) != 0;
    return bm;
}

/* The reference of one output under judgement: every element (at == NULL), or the picked
 * elements of a sampled check (at[e] the flat index of expected[e] and mag[e]). */
typedef struct {
    const double *expected, *mag;
    const int64_t *at;
    int64_t count;
} expected_values;

/* Judge the provider's output `got` (named `what`, of shape `shape`) against the reference. */
static void judge(const cc_case *c, const cc_inputs *in, const char *what, const ref_shape *shape,
                  const cc_view *got, const expected_values *ev, const cc_bound_model *bm,
                  double c_op, int with_g, double *ratio, cc_probe *probe, cc_result *r,
                  char *zt, size_t zt_len)
{
    cc_comparison cmp;
    cc_compare_at(ev->expected, ev->mag, ev->at, ev->count, got, bm, &cmp);
    if (cmp.worst_ratio > *ratio)
        *ratio = cmp.worst_ratio;
    note_worst(r, c, in, &cmp, what, shape);
    if (probe && strcmp(probe->output, what) == 0) { /* the probed element, if judged here */
        int64_t e = -1;
        if (!ev->at && probe->index >= 0 && probe->index < cmp.n)
            e = probe->index;
        for (int64_t k = 0; ev->at && k < ev->count && e < 0; k++)
            if (ev->at[k] == probe->index)
                e = k;
        if (e >= 0) {
            probe->found = 1;
            probe->got = cc_load(got->dtype, got->data, probe->index);
            probe->ratio = cc_element_ratio(probe->compare_with, probe->got, ev->mag[e],
                                            got->dtype, bm, NULL);
        }
    }
    cc_zt_source src[REF_MAX_INPUTS + 1];
    int ns = zt_sources(c, in, with_g, src);
    if (!zt[0])
        cc_zero_trust_at(what, ev->expected, ev->mag, ev->at, ev->count, c_op, got, src, ns, zt,
                         zt_len);
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
                      malloc(sizeof(double) * (size_t)(plan->count + 1))};
    return pk->v && pk->mag ? 0 : -1;
}

static void picks_free(ref_picks *pk)
{
    free(pk->v);
    free(pk->mag);
    memset(pk, 0, sizeof *pk);
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
                                  w->mag ? w->mag + a : NULL};
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
    return j.failed ? -1 : 0;
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

static void run_forward(const cc_provider *p, const cc_case *c, const cc_call *call,
                        cc_inputs *in, const ref_tensor *y, const double *mag, double cu,
                        int sampled, int threads, cc_probe *probe, cc_result *r, char *zt,
                        size_t zt_len)
{
    cc_view out;
    if (cc_alloc_output(c->dtype, &in->out_shape, &out)) {
        r->status = CC_RES_ERROR;
        snprintf(r->message, sizeof r->message, "out of memory");
        return;
    }
    char msg[256] = "";
    cc_status st = p->forward(p->ctx, call, &out, msg, sizeof msg);
    if (!provider_failed(st, msg, "forward", r)) {
        cc_bound_model bm = case_bound(c, cu, c->op->c_fwd);
        expected_values ev = {y->v, mag, NULL, 0};
        cc_sample plan = {0};
        ref_picks pk = {0};
        if (sampled) {
            if (sample_picks(c, -1, &in->out_shape, &out, probe, "y", &plan, &pk) ||
                evaluate_picks(c, in, 0, threads, &pk)) {
                r->status = CC_RES_ERROR;
                snprintf(r->message, sizeof r->message, "sampled reference forward failed");
            }
            ev = (expected_values){pk.v, pk.mag, plan.at, plan.count};
            note_sample(r, &plan);
        }
        if (r->status == CC_RES_PASS) {
            r->checked_fwd = 1;
            judge(c, in, "y", &in->out_shape, &out, &ev, &bm, c->op->c_fwd, 0, &r->fwd_ratio,
                  probe, r, zt, zt_len);
        }
        cc_sample_free(&plan);
        picks_free(&pk);
    }
    cc_free_big(out.data);
}

static void run_vjp(const cc_provider *p, const cc_case *c, const cc_call *call, cc_inputs *in,
                    const ref_tensor *y, double cu, int sampled, int threads,
                    const ref_params *params, cc_probe *probe, cc_result *r, char *zt,
                    size_t zt_len)
{
    const ref_op *op = c->op;
    ref_tensor grad[REF_MAX_INPUTS];
    double *gmag[REF_MAX_INPUTS] = {0};
    cc_view got[REF_MAX_INPUTS];
    cc_sample plans[REF_MAX_INPUTS];
    ref_picks picks[REF_MAX_INPUTS];
    memset(grad, 0, sizeof grad);
    memset(got, 0, sizeof got);
    memset(plans, 0, sizeof plans);
    memset(picks, 0, sizeof picks);
    int fail = 0;
    for (int i = 0; i < c->n_in; i++) {
        grad[i].shape = c->shape[i];
        int k = i < op->max_inputs ? i : op->max_inputs - 1;
        if (op->input_kind[k < REF_MAX_INPUTS ? k : REF_MAX_INPUTS - 1] != REF_IN_DATA)
            continue;
        int64_t n = ref_numel(&c->shape[i]);
        if (!sampled) { /* a sampled check makes its picks' values later */
            grad[i].v = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
            gmag[i] = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
            if (!grad[i].v || !gmag[i])
                fail = 1;
        }
        if (cc_alloc_output(c->dtype, &c->shape[i], &got[i]))
            fail = 1;
    }
    if (fail) {
        r->status = CC_RES_ERROR;
        snprintf(r->message, sizeof r->message, "out of memory");
        goto done;
    }
    if (!sampled && op->vjp(params, c->n_in, in->ref_in, y, &in->g, grad, gmag) != REF_OK) {
        r->status = CC_RES_ERROR;
        snprintf(r->message, sizeof r->message, "reference VJP failed");
        goto done;
    }
    char msg[256] = "";
    cc_status st = p->vjp(p->ctx, call, &in->g_view, got, msg, sizeof msg);
    if (provider_failed(st, msg, "vjp", r))
        goto done;
    cc_bound_model bm = case_bound(c, cu, op->c_vjp);
    r->checked_vjp = 1;
    char what[REF_MAX_INPUTS][32];
    for (int i = 0; i < c->n_in; i++)
        snprintf(what[i], sizeof what[i], "grad:%s", input_name(op, i));
    if (sampled) { /* every gradient's picks, then the reference at all of them at once */
        for (int i = 0; i < c->n_in && !fail; i++)
            fail = got[i].data && sample_picks(c, i, &c->shape[i], &got[i], probe, what[i],
                                               &plans[i], &picks[i]);
        if (fail || evaluate_picks(c, in, 1, threads, picks)) {
            r->status = CC_RES_ERROR;
            snprintf(r->message, sizeof r->message, "sampled reference VJP failed");
            goto done;
        }
    }
    for (int i = 0; i < c->n_in && r->status == CC_RES_PASS; i++) {
        if (!got[i].data)
            continue;
        expected_values ev = {grad[i].v, gmag[i], NULL, 0};
        if (sampled) {
            ev = (expected_values){picks[i].v, picks[i].mag, plans[i].at, plans[i].count};
            note_sample(r, &plans[i]);
        }
        judge(c, in, what[i], &c->shape[i], &got[i], &ev, &bm, op->c_vjp, 1, &r->vjp_ratio,
              probe, r, zt, zt_len);
    }
done:
    for (int i = 0; i < REF_MAX_INPUTS; i++) {
        cc_sample_free(&plans[i]);
        picks_free(&picks[i]);
    }
    for (int i = 0; i < REF_MAX_INPUTS; i++) {
        free(grad[i].v);
        free(gmag[i]);
        cc_free_big(got[i].data);
    }
}

void cc_result_begin(const cc_provider *p, const cc_case *c, cc_result *r)
{
    memset(r, 0, sizeof *r);
    cc_case_print(c, r->line, sizeof r->line);
    snprintf(r->op, sizeof r->op, "%s", c->op->name);
    snprintf(r->provider, sizeof r->provider, "%s", p->name);
    const char *mode = p->vjp_mode ? p->vjp_mode(p->ctx, c->op->name) : NULL;
    snprintf(r->vjp_mode, sizeof r->vjp_mode, "%s", mode ? mode : "unknown");
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
    cc_run_case_opts(p, c, NULL, NULL, r);
}

void cc_run_case_probed(const cc_provider *p, const cc_case *c, cc_probe *probe, cc_result *r)
{
    cc_run_case_opts(p, c, NULL, probe, r);
}

void cc_run_case_opts(const cc_provider *p, const cc_case *c, const cc_run_opts *o,
                      cc_probe *probe, cc_result *r)
{
    double t0 = cc_monotonic_seconds();
    cc_result_begin(p, c, r);
    int threads = o && o->threads > 1 ? o->threads : 1;

    cc_inputs in;
    char msg[256] = "";
    if (cc_materialize_threads(c, threads, &in, msg, sizeof msg)) {
        r->status = CC_RES_ERROR;
        snprintf(r->message, sizeof r->message, "materialize: %s", msg);
        r->seconds = cc_monotonic_seconds() - t0;
        return;
    }
    r->elements = ref_numel(&in.out_shape);
    int sampled = cc_sampling_chosen(c, o ? o->ref : CC_REF_AUTO, &in);
    ref_params params = c->params;
    params.threads = threads;
    int64_t ny = r->elements;
    ref_tensor y = {in.out_shape, NULL};
    double *mag = NULL;
    cc_call call = {c->op->name, &c->params, c->device, c->dtype, c->n_in, in.view};
    /* the provider's compute roundoff for this op/dtype/device (TF32...): 0 = u(dtype) */
    double cu = p->compute_roundoff
                    ? p->compute_roundoff(p->ctx, c->op->name, c->dtype, c->device)
                    : 0.0;
    ref_status rs = REF_OK;
    if (!sampled) { /* the full reference forward (the VJP reads y) */
        y.v = calloc((size_t)(ny > 0 ? ny : 1), sizeof(double));
        mag = calloc((size_t)(ny > 0 ? ny : 1), sizeof(double));
        rs = y.v && mag ? c->op->forward(&params, c->n_in, in.ref_in, &y, mag) : REF_ENOMEM;
    }
    if (rs != REF_OK) {
        r->status = CC_RES_ERROR;
        snprintf(r->message, sizeof r->message, "reference forward failed (%s)",
                 rs == REF_EDOMAIN ? "input outside the op's domain" : "status");
    } else if (!cc_compute_roundoff_valid(cu)) {
        r->status = CC_RES_ERROR;
        snprintf(r->message, sizeof r->message,
                 "provider %s declares a compute roundoff of %g for %s %s on %s: outside 0 "
                 "(none) .. 2^-8 (bf16)",
                 p->name, cu, c->op->name, cc_dtype_name(c->dtype), cc_device_name(c->device));
    } else {
        char zt[384] = ""; /* the first zero-trust verdict, if any */
        if (c->check != CC_CHECK_VJP)
            run_forward(p, c, &call, &in, &y, mag, cu, sampled, threads, probe, r, zt,
                        sizeof zt);
        if (r->status == CC_RES_PASS && c->check != CC_CHECK_FWD && c->op->vjp)
            run_vjp(p, c, &call, &in, &y, cu, sampled, threads, &params, probe, r, zt,
                    sizeof zt);
        if (r->status == CC_RES_PASS && zt[0]) {
            r->status = CC_RES_FAIL;
            snprintf(r->message, sizeof r->message, "%s", zt);
        } else if (r->status == CC_RES_PASS && r->worst_ratio > 1.0) {
            r->status = CC_RES_FAIL;
            snprintf(r->message, sizeof r->message,
                     "%s%s exceeds its bound: expected %.9g, got %.9g, bound %.3g (ratio %.3g)",
                     r->worst_output, r->worst_index, r->expected, r->got, r->bound,
                     r->worst_ratio);
        }
    }
    if (r->sampled)
        r->checked_fraction = r->sample_total > 0 ? (double)r->sample_checked /
                                                        (double)r->sample_total
                                                  : 0.0;
    free(y.v);
    free(mag);
    cc_inputs_free(&in);
    r->seconds = cc_monotonic_seconds() - t0;
}
