#define _POSIX_C_SOURCE 200809L
#include "harness/run/runner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "harness/run/compare.h"
#include "core/dtype.h"
#include "harness/case/materialize.h"
#include "harness/run/zero_trust.h"

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

/* Read the probed element if this output is the one it names. */
static void read_probe(cc_probe *pr, const char *what, const cc_view *got, int64_t n,
                       const ref_mag *mag, const cc_bound_model *bm)
{
    if (!pr || strcmp(pr->output, what) != 0 || pr->index < 0 || pr->index >= n)
        return;
    pr->found = 1;
    pr->got = cc_load(got->dtype, got->data, pr->index);
    double bound = cc_element_bound(bm, cc_element_mag_at(mag, pr->index));
    pr->ratio = cc_element_ratio_of(pr->compare_with, pr->got, bound, got->dtype, bm);
}

/* What every compared output adds to the result beyond its ratio: the suspect ratio, vacuity,
 * and (with --power) the detection power. */
static void judge_check(cc_result *r, const cc_judging *j, const cc_comparison *cmp,
                        const double *expected, const ref_mag *mag, const cc_view *got,
                        const cc_bound_model *bm)
{
    if (cmp->suspect_ratio > r->suspect_ratio)
        r->suspect_ratio = cmp->suspect_ratio;
    r->vacuous |= cmp->vacuous;
    if (j->power)
        cc_power_of_check(expected, mag, got, bm, &r->power);
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

/* The case's bound model: its dtype, compute roundoff and accumulation mode, and the non-finite
 * rule of the NaN and Inf edge classes (compare.h). */
static cc_bound_model case_bound(const cc_case *c, double compute_u, double c_op,
                                 const cc_judging *j)
{
    cc_bound_model bm = cc_bound_for_judging(c->dtype, compute_u, c_op, j->accumulation);
    bm.nonfinite_alike = (c->edges & (1u << CC_EDGE_NAN | 1u << CC_EDGE_INF)) != 0;
    return bm;
}

static void run_forward(const cc_provider *p, const cc_case *c, const cc_judging *j,
                        const cc_call *call, cc_inputs *in, const ref_tensor *y,
                        const ref_mag *mag, double cu, cc_probe *probe, cc_result *r, char *zt,
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
        cc_bound_model bm = case_bound(c, cu, c->op->c_fwd, j);
        cc_comparison cmp;
        cc_compare(y->v, mag, &out, &bm, &cmp);
        r->checked_fwd = 1;
        r->fwd_ratio = cmp.worst_ratio;
        note_worst(r, c, in, &cmp, "y", &in->out_shape);
        judge_check(r, j, &cmp, y->v, mag, &out, &bm);
        read_probe(probe, "y", &out, cmp.n, mag, &bm);
        cc_zt_source src[REF_MAX_INPUTS + 1];
        int ns = zt_sources(c, in, 0, src);
        if (!zt[0])
            cc_zero_trust("y", y->v, mag->worst, c->op->c_fwd, &out, src, ns, zt, zt_len);
    }
    free(out.data);
}

static void run_vjp(const cc_provider *p, const cc_case *c, const cc_judging *j,
                    const cc_call *call, cc_inputs *in, const ref_tensor *y, double cu,
                    cc_probe *probe, cc_result *r, char *zt, size_t zt_len)
{
    const ref_op *op = c->op;
    ref_tensor grad[REF_MAX_INPUTS];
    ref_mag gmag[REF_MAX_INPUTS];
    memset(gmag, 0, sizeof gmag);
    cc_view got[REF_MAX_INPUTS];
    memset(grad, 0, sizeof grad);
    memset(got, 0, sizeof got);
    int fail = 0;
    for (int i = 0; i < c->n_in; i++) {
        grad[i].shape = c->shape[i];
        int k = i < op->max_inputs ? i : op->max_inputs - 1;
        if (op->input_kind[k < REF_MAX_INPUTS ? k : REF_MAX_INPUTS - 1] != REF_IN_DATA)
            continue;
        int64_t n = ref_numel(&c->shape[i]);
        grad[i].v = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
        if (!grad[i].v || ref_mag_alloc(n, &gmag[i]) ||
            cc_alloc_output(c->dtype, &c->shape[i], &got[i]))
            fail = 1;
    }
    if (fail) {
        r->status = CC_RES_ERROR;
        snprintf(r->message, sizeof r->message, "out of memory");
        goto done;
    }
    if (op->vjp(&c->params, c->n_in, in->ref_in, y, &in->g, grad, gmag) != REF_OK) {
        r->status = CC_RES_ERROR;
        snprintf(r->message, sizeof r->message, "reference VJP failed");
        goto done;
    }
    char msg[256] = "";
    cc_status st = p->vjp(p->ctx, call, &in->g_view, got, msg, sizeof msg);
    if (provider_failed(st, msg, "vjp", r))
        goto done;
    cc_bound_model bm = case_bound(c, cu, op->c_vjp, j);
    r->checked_vjp = 1;
    for (int i = 0; i < c->n_in; i++) {
        if (!grad[i].v)
            continue;
        ref_mag_complete(&gmag[i], ref_numel(&c->shape[i]));
        cc_comparison cmp;
        cc_compare(grad[i].v, &gmag[i], &got[i], &bm, &cmp);
        if (cmp.worst_ratio > r->vjp_ratio)
            r->vjp_ratio = cmp.worst_ratio;
        char what[32];
        snprintf(what, sizeof what, "grad:%s", input_name(op, i));
        note_worst(r, c, in, &cmp, what, &c->shape[i]);
        judge_check(r, j, &cmp, grad[i].v, &gmag[i], &got[i], &bm);
        read_probe(probe, what, &got[i], cmp.n, &gmag[i], &bm);
        cc_zt_source src[REF_MAX_INPUTS + 1];
        int ns = zt_sources(c, in, 1, src);
        if (!zt[0])
            cc_zero_trust(what, grad[i].v, gmag[i].worst, op->c_vjp, &got[i], src, ns, zt,
                          zt_len);
    }
done:
    for (int i = 0; i < REF_MAX_INPUTS; i++) {
        free(grad[i].v);
        ref_mag_free(&gmag[i]);
        free(got[i].data);
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

void cc_run_case(const cc_provider *p, const cc_case *c, cc_result *r)
{
    cc_judging j = {CC_ACC_STRICT, 0};
    cc_run_case_probed(p, c, &j, NULL, r);
}

void cc_run_case_judged(const cc_provider *p, const cc_case *c, const cc_judging *j,
                        cc_result *r)
{
    cc_run_case_probed(p, c, j, NULL, r);
}

void cc_run_case_probed(const cc_provider *p, const cc_case *c, const cc_judging *j,
                        cc_probe *probe, cc_result *r)
{
    double t0 = cc_monotonic_seconds();
    cc_result_begin(p, c, r);
    r->accumulation = j->accumulation;
    r->has_power = j->power;
    if (j->power)
        cc_power_init(&r->power);

    cc_inputs in;
    char msg[256] = "";
    if (cc_materialize(c, &in, msg, sizeof msg)) {
        r->status = CC_RES_ERROR;
        snprintf(r->message, sizeof r->message, "materialize: %s", msg);
        r->seconds = cc_monotonic_seconds() - t0;
        return;
    }
    r->elements = ref_numel(&in.out_shape);
    int64_t ny = r->elements;
    ref_tensor y = {in.out_shape, calloc((size_t)(ny > 0 ? ny : 1), sizeof(double))};
    ref_mag mag;
    int no_mag = ref_mag_alloc(ny, &mag);
    cc_call call = {c->op->name, &c->params, c->device, c->dtype, c->n_in, in.view};
    /* the provider's compute roundoff for this op/dtype/device (TF32...): 0 = u(dtype) */
    double cu = p->compute_roundoff
                    ? p->compute_roundoff(p->ctx, c->op->name, c->dtype, c->device)
                    : 0.0;
    ref_status rs = y.v && !no_mag ? c->op->forward(&c->params, c->n_in, in.ref_in, &y, &mag)
                                   : REF_ENOMEM;
    if (rs == REF_OK)
        ref_mag_complete(&mag, ny);
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
            run_forward(p, c, j, &call, &in, &y, &mag, cu, probe, r, zt, sizeof zt);
        if (r->status == CC_RES_PASS && c->check != CC_CHECK_FWD && c->op->vjp)
            run_vjp(p, c, j, &call, &in, &y, cu, probe, r, zt, sizeof zt);
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
        r->suspect = r->status == CC_RES_PASS && r->suspect_ratio > 1.0;
    }
    free(y.v);
    ref_mag_free(&mag);
    cc_inputs_free(&in);
    r->seconds = cc_monotonic_seconds() - t0;
}
