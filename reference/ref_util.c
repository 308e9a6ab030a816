/* Shared helpers of the reference: rng, shapes, errors, the op registry. */
#include "ref.h"
#include "ref_families.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t ref_rng_next(ref_rng *r)
{
    r->state += 1;
    return ref_splitmix64(r->state);
}

int64_t ref_rng_range(ref_rng *r, int64_t lo, int64_t hi_inclusive)
{
    if (hi_inclusive <= lo)
        return lo;
    uint64_t span = (uint64_t)(hi_inclusive - lo) + 1;
    return lo + (int64_t)(ref_rng_next(r) % span);
}

double ref_rng_uniform(ref_rng *r)
{
    return (double)(ref_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

int64_t ref_numel(const ref_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= s->dim[i];
    return n;
}

int ref_shape_eq(const ref_shape *a, const ref_shape *b)
{
    if (a->rank != b->rank)
        return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dim[i] != b->dim[i])
            return 0;
    return 1;
}

const char *ref_decimal_u64(char buf[REF_DECIMAL_MAX], uint64_t v)
{
    char *p = buf + REF_DECIMAL_MAX;
    *--p = 0;
    do
        *--p = (char)('0' + v % 10);
    while (v /= 10);
    return p;
}

const char *ref_decimal_i64(char buf[REF_DECIMAL_MAX], int64_t v)
{
    char *p = (char *)ref_decimal_u64(buf, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
    if (v < 0)
        *--p = '-';
    return p;
}

void ref_shape_fmt(const ref_shape *s, char *buf, size_t n)
{
    if (n == 0)
        return;
    size_t used = 0;
    for (int i = -1; i <= s->rank; i++) { /* '[', each extent after its comma, ']' */
        char digits[REF_DECIMAL_MAX];
        const char *part = i < 0 ? "[" : i == s->rank ? "]" : ref_decimal_i64(digits, s->dim[i]);
        if (i > 0 && i < s->rank && used < n - 1)
            buf[used++] = ',';
        for (; *part && used < n - 1; part++)
            buf[used++] = *part;
    }
    buf[used] = 0;
}

ref_status ref_err_set(ref_err *e, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return REF_EINVAL;
}

int ref_norm_axis(int axis, int rank)
{
    if (axis < 0)
        axis += rank;
    return (axis >= 0 && axis < rank) ? axis : -1;
}

void ref_default_domain(const ref_op *op, const ref_params *p, int n, const ref_shape *in, int i,
                        ref_domain *d)
{
    memset(d, 0, sizeof *d);
    int k = i < REF_MAX_INPUTS ? i : REF_MAX_INPUTS - 1;
    switch (op->input_kind[k]) {
    case REF_IN_INDEX:
        d->kind = REF_DOM_INDEX;
        d->hi = 1;
        break;
    case REF_IN_MASK:
        d->kind = REF_DOM_MASK;
        d->lo = 0.7;
        break;
    default:
        d->kind = REF_DOM_NORMAL;
        break;
    }
    if (op->domain)
        op->domain(p, n, in, i, d);
}

double *ref_mag_worst(const ref_mag *mag)
{
    return mag ? mag->worst : NULL;
}

void ref_mag_set(const ref_mag *mag, int64_t i, double worst, double dtype, double prob)
{
    mag->worst[i] = worst;
    if (mag->dtype)
        mag->dtype[i] = dtype;
    if (mag->prob)
        mag->prob[i] = prob;
}

void ref_mag_prefill(const ref_mag *mag, int64_t n)
{
    double *planes[2] = {mag->dtype, mag->prob};
    for (int k = 0; k < 2; k++)
        for (int64_t i = 0; planes[k] && i < n; i++)
            planes[k][i] = NAN;
}

void ref_mag_complete(const ref_mag *mag, int64_t n)
{
    double *planes[2] = {mag->dtype, mag->prob};
    for (int k = 0; k < 2; k++) {
        double *p = planes[k];
        for (int64_t i = 0; p && i < n; i++)
            p[i] = isnan(p[i]) ? mag->worst[i] : p[i];
    }
}

int ref_mag_alloc(int64_t n, ref_mag *mag)
{
    size_t k = (size_t)(n > 0 ? n : 1);
    double *v = malloc(3 * k * sizeof(double));
    *mag = (ref_mag){NULL, NULL, NULL};
    if (!v)
        return -1;
    memset(v, 0, k * sizeof(double)); /* m_i starts at 0; the other planes at NaN (unset) */
    *mag = (ref_mag){v, v + k, v + 2 * k};
    ref_mag_prefill(mag, n);
    return 0;
}

void ref_mag_free(ref_mag *mag)
{
    free(mag->worst); /* the block's start */
    *mag = (ref_mag){NULL, NULL, NULL};
}

void ref_sample_shape(ref_rng *r, int rank, int64_t max_elems, int zero_dim, ref_shape *s)
{
    int64_t budget = max_elems < 1 ? 1 : max_elems;
    s->rank = rank;
    for (int i = 0; i < rank; i++) {
        /* each remaining axis may take up to the (rank - i)-th root of what is left */
        int64_t cap = (int64_t)floor(pow((double)budget, 1.0 / (double)(rank - i)) + 1e-9);
        if (cap < 1)
            cap = 1;
        int64_t d = ref_rng_range(r, 1, cap);
        s->dim[i] = d;
        budget /= d;
    }
    if (zero_dim && rank > 0)
        s->dim[ref_rng_range(r, 0, rank - 1)] = 0;
}

/* ---- registry ---------------------------------------------------------------------------- */

/* Spec order of the vocabulary (ops.md; the 47 BackendOps and the 9 capcheck additions). */
static const char *const spec_order[] = {
    "randUniform", "bernoulliMask", "add", "sub", "mul", "div", "neg", "scale", "abs",
    "sqrt", "clamp", "max", "min", "relu", "gelu", "sigmoid", "silu", "tanh", "softplus",
    "exp", "log", "sin", "cos", "inv", "safeLog", "logSoftmax", "softmax",
    "hardMaskedSoftmax", "topKMask", "reduceSum", "reduceMean", "reshape", "permute",
    "broadcast", "concat", "slice", "gather", "scatterAdd", "matmul", "scaledMatmul",
    "softmaxMatmul", "linear", "mseLoss", "crossEntropy", "distill", "layerNorm", "batchNorm",
    "conv", "convTranspose", "maxPool", "smoothMaxPool", "avgPool", "fftFno", "selectiveScan",
    "attention", "custom"};

/* The capcheck additions: not TorchLean BackendOps (ops.md marks them Proposal or not a
 * BackendOp), so no TorchLean ContractClaim can name them. */
static const char *const not_backend_ops[] = {"div",           "neg",           "silu",
                                              "topKMask",      "scaledMatmul",  "softmaxMatmul",
                                              "crossEntropy",  "distill",       "custom"};

int ref_is_backend_op(const char *name)
{
    for (size_t i = 0; i < sizeof not_backend_ops / sizeof not_backend_ops[0]; i++)
        if (strcmp(name, not_backend_ops[i]) == 0)
            return 0;
    return 1;
}

int ref_spec_op_count(void)
{
    return (int)(sizeof spec_order / sizeof spec_order[0]);
}

const char *ref_spec_op_name(int i)
{
    return (i >= 0 && i < ref_spec_op_count()) ? spec_order[i] : NULL;
}

static const ref_op *find_in_families(const char *name)
{
    for (int f = 0; ref_families[f].ops; f++)
        for (int i = 0; i < *ref_families[f].count; i++) {
            const ref_op *op = &ref_families[f].ops[i];
            if (strcmp(op->name, name) == 0 || strcmp(op->report_name, name) == 0)
                return op;
        }
    return NULL;
}

/* Ops present in the families, in spec order. */
int ref_op_count(void)
{
    int n = 0;
    for (int i = 0; i < ref_spec_op_count(); i++)
        if (find_in_families(spec_order[i]))
            n++;
    return n;
}

const ref_op *ref_op_at(int k)
{
    for (int i = 0; i < ref_spec_op_count(); i++) {
        const ref_op *op = find_in_families(spec_order[i]);
        if (op && k-- == 0)
            return op;
    }
    return NULL;
}

const ref_op *ref_op_find(const char *name)
{
    return name ? find_in_families(name) : NULL;
}
