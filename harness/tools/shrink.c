/* Shrinking a failing case (see shrink.h) and writing a standalone torch reproducer. */
#define _POSIX_C_SOURCE 200809L
#include "harness/tools/shrink.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/dtype.h"
#include "core/grow.h"
#include "harness/case/materialize.h"
#include "harness/run/pool.h"

/* ---- the order of cases --------------------------------------------------------------------- */

int64_t cc_case_input_elements(const cc_case *c)
{
    int64_t n = 0;
    for (int i = 0; i < c->n_in; i++)
        n += ref_numel(&c->shape[i]);
    return n;
}

/* 0 for 0, 1 for +-1, 2 for a value with at most two significant digits, 3 otherwise. */
static double real_cost(double v)
{
    if (v == 0)
        return 0;
    if (v == 1 || v == -1)
        return 1;
    char buf[32];
    snprintf(buf, sizeof buf, "%.2g", v);
    return strtod(buf, NULL) == v ? 2 : 3;
}

static double param_cost(const cc_case *c)
{
    const ref_params *p = &c->params;
    unsigned b = c->op->params;
    double s = 0;
    if (b & REF_P_WINDOW)
        for (int a = 0; a < p->spatial && a < 3; a++)
            s += (double)(llabs(p->kernel[a] - 1) + llabs(p->stride[a] - 1) + llabs(p->pad[a]) +
                          llabs(p->dil[a] - 1));
    if (b & REF_P_K)
        s += (double)llabs(p->k);
    if (b & REF_P_GROUPS)
        s += (double)llabs(p->groups - 1);
    if (b & REF_P_RANGE)
        s += (double)(llabs(p->start) + llabs(p->count));
    if (b & REF_P_MODES)
        s += (double)llabs(p->modes);
    if (b & REF_P_EPS)
        s += real_cost(p->eps);
    if (b & REF_P_LOHI)
        s += real_cost(p->lo) + real_cost(p->hi);
    if (b & REF_P_ALPHA)
        s += real_cost(p->alpha);
    if (b & REF_P_BETA)
        s += real_cost(p->beta);
    if (b & REF_P_TEMP)
        s += real_cost(p->temperature);
    if (b & REF_P_KEEP)
        s += real_cost(p->keep_prob);
    if (b & REF_P_RSEED)
        s += p->rng_seed != 0;
    if (b & REF_P_TRAINING)
        s += p->training != 0;
    if (b & REF_P_CAUSAL)
        s += p->causal != 0;
    if (b & REF_P_VARIANT)
        s += abs(p->variant);
    return s;
}

/* How far a case's layout is from dense: inputs not contiguous (each counts). */
static int layout_cost(const cc_case *c)
{
    int n = 0;
    for (int i = 0; i < c->n_in; i++)
        n += cc_case_input_layout(c, i).kind != CC_LAYOUT_CONTIG;
    return n;
}

/* -1 when a is strictly smaller than b in the shrink order. */
static int case_cmp(const cc_case *a, const cc_case *b)
{
    int64_t ea = cc_case_input_elements(a), eb = cc_case_input_elements(b);
    if (ea != eb)
        return ea < eb ? -1 : 1;
    int ra = 0, rb = 0;
    for (int i = 0; i < a->n_in; i++)
        ra += a->shape[i].rank;
    for (int i = 0; i < b->n_in; i++)
        rb += b->shape[i].rank;
    if (ra != rb)
        return ra < rb ? -1 : 1;
    int la = layout_cost(a), lb = layout_cost(b);
    if (la != lb)
        return la < lb ? -1 : 1;
    int ca = a->check == CC_CHECK_BOTH, cb = b->check == CC_CHECK_BOTH;
    if (ca != cb)
        return ca < cb ? -1 : 1;
    double pa = param_cost(a), pb = param_cost(b);
    if (pa != pb)
        return pa < pb ? -1 : 1;
    if (a->seed != b->seed)
        return a->seed < b->seed ? -1 : 1;
    return 0;
}

/* ---- candidates ----------------------------------------------------------------------------- */

typedef struct {
    cc_case *v;
    size_t n, cap;
} cand_list;

static int valid_case(const cc_case *c)
{
    if (c->n_in < c->op->min_inputs || c->n_in > c->op->max_inputs)
        return 0;
    for (int i = 0; i < c->n_in; i++) {
        if (c->shape[i].rank < 0 || c->shape[i].rank > REF_MAX_RANK)
            return 0;
        for (int a = 0; a < c->shape[i].rank; a++)
            if (c->shape[i].dim[a] < 0)
                return 0;
    }
    ref_shape out;
    ref_err e = {{0}};
    return c->op->shape(&c->params, c->n_in, c->shape, &out, &e) == REF_OK;
}

static void cand_push(cand_list *l, const cc_case *c_in, const cc_case *cur)
{
    cc_case fitted = *c_in, *c = &fitted;
    cc_case_refit_layout(c, cur); /* explicit strides follow the shapes they describe */
    char why[160];
    if (!valid_case(c) || cc_case_layout_problem(c, why, sizeof why) || case_cmp(c, cur) >= 0)
        return;
    cc_case *grown = cc_grow(l->v, l->n, &l->cap, sizeof *grown, 64);
    if (!grown)
        return;
    l->v = grown;
    l->v[l->n++] = *c;
}

static void drop_axis(ref_shape *s, int a)
{
    for (int k = a; k + 1 < s->rank; k++)
        s->dim[k] = s->dim[k + 1];
    s->rank--;
}

/* After axis a of a rank-R primary input is dropped: the same logical axis parameter (where
 * it survives), in the sign convention the line used. Returns 0 when it did not survive. */
static int adjust_axis(int axis, int R, int a, int *out)
{
    int n = ref_norm_axis(axis, R);
    if (n < 0 || n == a)
        return 0;
    int m = n > a ? n - 1 : n;
    *out = axis >= 0 ? m : m - (R - 1);
    return 1;
}

/* The permutation of permute after input axis a is dropped. */
static void adjust_perm(ref_params *p, int a)
{
    int k = 0;
    for (int i = 0; i < p->perm_len; i++) {
        if (p->perm[i] == a)
            continue;
        p->perm[k++] = p->perm[i] > a ? p->perm[i] - 1 : p->perm[i];
    }
    p->perm_len = k;
}

/* Push c with the axis/perm parameters adjusted for axis a of a rank-R input 0 dropped, and
 * with the axis left as it was. */
static void push_dropped(cand_list *l, cc_case *c, const cc_case *cur, int a, int R, int primary)
{
    unsigned b = c->op->params;
    if (primary && (b & REF_P_PERM)) {
        ref_params saved = c->params;
        adjust_perm(&c->params, a);
        cand_push(l, c, cur);
        c->params = saved;
        return;
    }
    if (primary && (b & REF_P_AXIS)) {
        int ax;
        if (adjust_axis(c->params.axis, R, a, &ax) && ax != c->params.axis) {
            int saved = c->params.axis;
            c->params.axis = ax;
            cand_push(l, c, cur);
            c->params.axis = saved;
        }
    }
    cand_push(l, c, cur);
}

static void rank_candidates(cand_list *l, const cc_case *cur)
{
    for (int i = 0; i < cur->n_in; i++)
        for (int a = 0; a < cur->shape[i].rank; a++) {
            int R = cur->shape[i].rank;
            /* every input of the same rank loses axis a */
            cc_case c = *cur;
            int others = 0;
            for (int j = 0; j < c.n_in; j++)
                if (c.shape[j].rank == R) {
                    drop_axis(&c.shape[j], a);
                    others += j != i;
                }
            if (others)
                push_dropped(l, &c, cur, a, R, cur->shape[0].rank == R);
            /* every input loses its axis at the same distance from the end */
            c = *cur;
            int back = R - a, n_back = 0;
            for (int j = 0; j < c.n_in; j++)
                if (c.shape[j].rank >= back) {
                    drop_axis(&c.shape[j], c.shape[j].rank - back);
                    n_back++;
                }
            if (n_back > 1)
                push_dropped(l, &c, cur, cur->shape[0].rank - back, cur->shape[0].rank,
                             cur->shape[0].rank >= back);
            /* this input alone */
            c = *cur;
            drop_axis(&c.shape[i], a);
            push_dropped(l, &c, cur, a, R, i == 0);
        }
}

static void dim_candidates(cand_list *l, const cc_case *cur)
{
    for (int i = 0; i < cur->n_in; i++)
        for (int a = 0; a < cur->shape[i].rank; a++) {
            int64_t d = cur->shape[i].dim[a];
            if (d <= 1)
                continue;
            /* 1, d/2, then d - d/4, d - d/8, ..., d - 1: the most aggressive first, so the
             * greedy search takes O(log d) kept steps per axis */
            int64_t to[66];
            int nt = 0;
            to[nt++] = 1;
            to[nt++] = d / 2;
            for (int64_t q = 4; d / q >= 1 && nt < 64; q *= 2)
                to[nt++] = d - d / q;
            to[nt++] = d - 1;
            for (int t = 0; t < nt; t++) {
                if (to[t] < 1 || to[t] >= d || (t > 0 && to[t] <= to[t - 1]))
                    continue;
                /* linked: every axis (and target axis) of the same extent */
                cc_case c = *cur;
                int linked = 0;
                for (int j = 0; j < c.n_in; j++)
                    for (int b = 0; b < c.shape[j].rank; b++)
                        if (c.shape[j].dim[b] == d) {
                            c.shape[j].dim[b] = to[t];
                            linked += j != i || b != a;
                        }
                if (c.op->params & REF_P_TARGET)
                    for (int b = 0; b < c.params.target.rank; b++)
                        if (c.params.target.dim[b] == d) {
                            c.params.target.dim[b] = to[t];
                            linked++;
                        }
                if (linked)
                    cand_push(l, &c, cur);
                c = *cur;
                c.shape[i].dim[a] = to[t];
                cand_push(l, &c, cur);
            }
        }
}

static void lower_i64(cand_list *l, const cc_case *cur, cc_case *c, int64_t *field,
                      int64_t floor_v)
{
    int64_t v = *field, to[3] = {floor_v, v / 2, v - 1};
    for (int t = 0; t < 3; t++)
        if (to[t] >= floor_v && to[t] < v) {
            *field = to[t];
            cand_push(l, c, cur);
            *field = v;
        }
}

static void lower_real(cand_list *l, const cc_case *cur, cc_case *c, double *field)
{
    double v = *field, to[4] = {0, 1, 0, 0};
    char buf[32];
    snprintf(buf, sizeof buf, "%.1g", v);
    to[2] = strtod(buf, NULL);
    snprintf(buf, sizeof buf, "%.2g", v);
    to[3] = strtod(buf, NULL);
    for (int t = 0; t < 4; t++) {
        *field = to[t];
        cand_push(l, c, cur);
    }
    *field = v;
}

static void param_candidates(cand_list *l, const cc_case *cur)
{
    cc_case c = *cur;
    ref_params *p = &c.params;
    unsigned b = c.op->params;
    if (b & REF_P_WINDOW)
        for (int a = 0; a < p->spatial && a < 3; a++) {
            lower_i64(l, cur, &c, &p->kernel[a], 1);
            lower_i64(l, cur, &c, &p->stride[a], 1);
            lower_i64(l, cur, &c, &p->pad[a], 0);
            lower_i64(l, cur, &c, &p->dil[a], 1);
        }
    if (b & REF_P_K)
        lower_i64(l, cur, &c, &p->k, 0);
    if (b & REF_P_GROUPS)
        lower_i64(l, cur, &c, &p->groups, 1);
    if (b & REF_P_RANGE) {
        lower_i64(l, cur, &c, &p->start, 0);
        lower_i64(l, cur, &c, &p->count, 0);
    }
    if (b & REF_P_MODES)
        lower_i64(l, cur, &c, &p->modes, 0);
    if (b & REF_P_EPS)
        lower_real(l, cur, &c, &p->eps);
    if (b & REF_P_LOHI) {
        lower_real(l, cur, &c, &p->lo);
        lower_real(l, cur, &c, &p->hi);
    }
    if (b & REF_P_ALPHA)
        lower_real(l, cur, &c, &p->alpha);
    if (b & REF_P_BETA)
        lower_real(l, cur, &c, &p->beta);
    if (b & REF_P_TEMP)
        lower_real(l, cur, &c, &p->temperature);
    if (b & REF_P_KEEP)
        lower_real(l, cur, &c, &p->keep_prob);
    if (b & REF_P_RSEED) {
        uint64_t v = p->rng_seed;
        p->rng_seed = 0;
        cand_push(l, &c, cur);
        p->rng_seed = v;
    }
    int *flags[3] = {(b & REF_P_TRAINING) ? &p->training : NULL,
                     (b & REF_P_CAUSAL) ? &p->causal : NULL,
                     (b & REF_P_VARIANT) ? &p->variant : NULL};
    for (int k = 0; k < 3; k++)
        if (flags[k] && *flags[k]) {
            int v = *flags[k];
            *flags[k] = 0;
            cand_push(l, &c, cur);
            *flags[k] = v;
        }
}

/* check narrowed to the part that fails (then the other), and the plain layout. */
static void mode_candidates(cand_list *l, const cc_case *cur, const cc_result *fail)
{
    cc_case c = *cur;
    if (cur->check == CC_CHECK_BOTH) {
        int grad = strncmp(fail->worst_output, "grad:", 5) == 0;
        c.check = grad ? CC_CHECK_VJP : CC_CHECK_FWD;
        cand_push(l, &c, cur);
        c.check = grad ? CC_CHECK_FWD : CC_CHECK_VJP;
        cand_push(l, &c, cur);
        c = *cur;
    }
    if (cur->layout != CC_LAYOUT_CONTIG) {
        c.layout = CC_LAYOUT_CONTIG;
        cc_case_normalize_layout(&c);
        cand_push(l, &c, cur);
    }
    for (int i = 0; cur->layout == CC_LAYOUT_MIXED && i < cur->n_in; i++) {
        if (cur->in_layout[i].kind == CC_LAYOUT_CONTIG)
            continue;
        c = *cur; /* one input's layout made dense, the others kept */
        memset(&c.in_layout[i], 0, sizeof c.in_layout[i]);
        cc_case_normalize_layout(&c);
        cand_push(l, &c, cur);
    }
}

static void seed_candidates(cand_list *l, const cc_case *cur, int max_seed)
{
    cc_case c = *cur;
    for (int s = 0; s < max_seed && (uint64_t)s < cur->seed; s++) {
        c.seed = (uint64_t)s;
        cand_push(l, &c, cur);
    }
}

/* ---- the search ----------------------------------------------------------------------------- */

/* The failure is the same: status, and for fail the same output; for error the same phase. */
static int same_failure(const cc_result *a, const cc_result *b)
{
    if (a->status != b->status)
        return 0;
    if (a->status == CC_RES_FAIL)
        return strcmp(a->worst_output, b->worst_output) == 0;
    if (a->status == CC_RES_ERROR) {
        size_t na = strcspn(a->message, ":"), nb = strcspn(b->message, ":");
        return na == nb && strncmp(a->message, b->message, na) == 0;
    }
    return 1;
}

/* Lines already run (and rejected): FNV-1a hashes in an open-addressing table. */
typedef struct {
    uint64_t *v;
    size_t cap, n;
} seen_set;

static uint64_t line_hash(const cc_case *c)
{
    char line[CC_CASE_LINE_MAX];
    cc_case_print(c, line, sizeof line);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const char *s = line; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h ? h : 1;
}

static int seen_test_and_add(seen_set *s, uint64_t h)
{
    if (2 * (s->n + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 1024;
        uint64_t *v = calloc(cap, sizeof *v);
        if (!v)
            return 0;
        for (size_t i = 0; i < s->cap; i++)
            if (s->v[i])
                for (size_t k = s->v[i] & (cap - 1);; k = (k + 1) & (cap - 1))
                    if (!v[k]) {
                        v[k] = s->v[i];
                        break;
                    }
        free(s->v);
        s->v = v;
        s->cap = cap;
    }
    for (size_t k = h & (s->cap - 1);; k = (k + 1) & (s->cap - 1)) {
        if (s->v[k] == h)
            return 1;
        if (!s->v[k]) {
            s->v[k] = h;
            s->n++;
            return 0;
        }
    }
}

static int shrink_in(cc_pool *pool, const cc_provider *p, const cc_case *c,
                     const cc_shrink_opts *o, cc_shrink_result *out, char *msg, size_t msg_len);

int cc_shrink(const cc_provider *p, const cc_case *c, const cc_shrink_opts *o,
              cc_shrink_result *out, char *msg, size_t msg_len)
{
    cc_shrink_opts opt = o ? *o : (cc_shrink_opts){0};
    if (opt.max_runs <= 0)
        opt.max_runs = 4000;
    if (opt.max_seed <= 0)
        opt.max_seed = 16;
    memset(out, 0, sizeof *out);
    /* every run in a worker of the pool: init there too, under the same limit, so a provider
     * that hangs, crashes or exits in init or in a call is a sentence or a result */
    cc_pool_config pc = {p,    1,    1u << c->device, opt.timeout_s, opt.timeout_s, 0,
                         NULL, 0,    0,               {0}, -1, 0};
    cc_pool *pool;
    if (cc_pool_start(&pc, &pool, msg, msg_len))
        return -1;
    int rc = shrink_in(pool, p, c, &opt, out, msg, msg_len);
    cc_pool_close(pool);
    return rc;
}

static int shrink_in(cc_pool *pool, const cc_provider *p, const cc_case *c,
                     const cc_shrink_opts *o, cc_shrink_result *out, char *msg, size_t msg_len)
{
    cc_shrink_opts opt = *o;
    if (cc_pool_run_one(pool, c, &out->original, msg, msg_len))
        return -1;
    out->runs = 1;
    if (out->original.status == CC_RES_PASS || out->original.status == CC_RES_UNSUPPORTED) {
        snprintf(msg, msg_len, "the case %s on provider %s: nothing to shrink",
                 out->original.status == CC_RES_PASS ? "passes" : "is unsupported", p->name);
        return 1;
    }
    cc_case cur = *c;
    cc_result cur_r = out->original;
    seen_set seen = {0};
    seen_test_and_add(&seen, line_hash(&cur));
    cand_list l = {0};
    for (;;) {
        l.n = 0;
        mode_candidates(&l, &cur, &cur_r);
        rank_candidates(&l, &cur);
        dim_candidates(&l, &cur);
        param_candidates(&l, &cur);
        seed_candidates(&l, &cur, opt.max_seed);
        int kept = 0;
        for (size_t k = 0; k < l.n && !kept; k++) {
            if (seen_test_and_add(&seen, line_hash(&l.v[k])))
                continue;
            if (out->runs >= opt.max_runs) {
                out->budget_spent = 1;
                break;
            }
            cc_result r;
            if (cc_pool_run_one(pool, &l.v[k], &r, msg, msg_len)) {
                free(l.v);
                free(seen.v);
                return -1;
            }
            out->runs++;
            if (!same_failure(&out->original, &r))
                continue;
            cur = l.v[k];
            cur_r = r;
            out->kept++;
            kept = 1;
            if (opt.log)
                fprintf(opt.log, "shrink: %s (%lld input elements)\n", r.line,
                        (long long)cc_case_input_elements(&cur));
        }
        if (!kept)
            break;
    }
    free(l.v);
    free(seen.v);
    out->minimal = cur;
    out->last = cur_r;
    return 0;
}

/* ---- the Python reproducer ------------------------------------------------------------------ */

static const char *torch_dtype(cc_dtype t)
{
    switch (t) {
    case CC_F64:
        return "torch.float64";
    case CC_F32:
        return "torch.float32";
    case CC_F16:
        return "torch.float16";
    case CC_BF16:
        return "torch.bfloat16";
    case CC_I64:
        return "torch.int64";
    case CC_U8:
        return "torch.uint8";
    default:
        return "None";
    }
}

static void py_real(FILE *f, double x)
{
    if (isnan(x))
        fputs("nan", f);
    else if (isinf(x))
        fputs(x > 0 ? "inf" : "-inf", f);
    else {
        char tmp[40];
        for (int prec = 1; prec <= 17; prec++) { /* shortest text that reads back exactly */
            snprintf(tmp, sizeof tmp, "%.*g", prec, x);
            if (strtod(tmp, NULL) == x)
                break;
        }
        fputs(tmp, f);
    }
}

static void py_ints(FILE *f, const int64_t *v, int n)
{
    fputc('(', f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%lld", i ? ", " : "", (long long)v[i]);
    fputs(n == 1 ? ",)" : ")", f);
}

/* A buffer of `len` elements as a Python list (what lies around a view, NaN gaps included). */
static void py_buffer(FILE *f, cc_dtype t, const void *base, int64_t len)
{
    const cc_view view = {t, 0, {0}, {0}, (void *)base};
    const cc_view *v = &view;
    fputc('[', f);
    for (int64_t j = 0; j < len; j++) {
        if (j)
            fputs(j % 8 ? ", " : ",\n    ", f);
        double x = cc_load(v->dtype, v->data, j);
        if (cc_dtype_is_float(v->dtype))
            py_real(f, x);
        else
            fprintf(f, "%lld", (long long)x);
    }
    fputc(']', f);
}

/* The torch expression of an op on the list X of inputs, or NULL. */
static const char *py_op_expr(const char *op)
{
    static const char *const table[][2] = {
        {"add", "X[0] + X[1]"},
        {"sub", "X[0] - X[1]"},
        {"mul", "X[0] * X[1]"},
        {"div", "X[0] / X[1]"},
        {"neg", "torch.neg(X[0])"},
        {"abs", "torch.abs(X[0])"},
        {"sqrt", "torch.sqrt(X[0])"},
        {"exp", "torch.exp(X[0])"},
        {"log", "torch.log(X[0])"},
        {"sin", "torch.sin(X[0])"},
        {"cos", "torch.cos(X[0])"},
        {"tanh", "torch.tanh(X[0])"},
        {"sigmoid", "torch.sigmoid(X[0])"},
        {"inv", "torch.reciprocal(X[0])"},
        {"relu", "torch.relu(X[0])"},
        {"gelu", "F.gelu(X[0], approximate='tanh')"},
        {"silu", "F.silu(X[0])"},
        {"scale", "X[0] * ALPHA"},
        {"clamp", "torch.clamp(X[0], LO, HI)"},
        {"max", "torch.maximum(X[0], X[1])"},
        {"min", "torch.minimum(X[0], X[1])"},
        {"softmax", "torch.softmax(X[0], dim=AXIS)"},
        {"logSoftmax", "torch.log_softmax(X[0], dim=AXIS)"},
        {"reduceSum", "torch.sum(X[0], dim=AXIS)"},
        {"reduceMean", "torch.mean(X[0], dim=AXIS)"},
        {"matmul", "torch.matmul(X[0], X[1])"},
        {"linear", "F.linear(X[0], X[1], X[2])"},
        {"layerNorm", "F.layer_norm(X[0], X[0].shape[AXIS:], X[1], X[2], EPS)"},
        {"maxPool", "MAXPOOL(X[0], KERNEL, STRIDE, PAD)"},
        {"avgPool", "AVGPOOL(X[0], KERNEL, STRIDE, PAD, False, True)"},
        {"conv", "CONV(X[0], X[1], X[2], STRIDE, PAD, DIL, GROUPS)"},
        {"convTranspose", "CONVT(X[0], X[1], X[2], STRIDE, PAD, 0, GROUPS, DIL)"},
        {"permute", "X[0].permute(PERM)"},
        {"reshape", "X[0].reshape(TARGET)"},
        {"broadcast", "torch.broadcast_to(X[0], TARGET)"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i][0], op) == 0)
            return table[i][1];
    return NULL;
}

static void py_params(FILE *f, const cc_case *c)
{
    const ref_params *p = &c->params;
    unsigned b = c->op->params;
    if (b & REF_P_AXIS)
        fprintf(f, "AXIS = %d\n", p->axis);
    if (b & REF_P_EPS) {
        fputs("EPS = ", f);
        py_real(f, p->eps);
        fputc('\n', f);
    }
    if (b & REF_P_LOHI) {
        fputs("LO, HI = ", f);
        py_real(f, p->lo);
        fputs(", ", f);
        py_real(f, p->hi);
        fputc('\n', f);
    }
    if (b & REF_P_ALPHA) {
        fputs("ALPHA = ", f);
        py_real(f, p->alpha);
        fputc('\n', f);
    }
    if (b & REF_P_WINDOW) {
        fputs("KERNEL = ", f);
        py_ints(f, p->kernel, p->spatial);
        fputs("\nSTRIDE = ", f);
        py_ints(f, p->stride, p->spatial);
        fputs("\nPAD = ", f);
        py_ints(f, p->pad, p->spatial);
        fputs("\nDIL = ", f);
        py_ints(f, p->dil, p->spatial);
        /* torch takes the channels-first single sample as an unbatched input */
        int sr = p->spatial > 0 && p->spatial <= 3 ? p->spatial : 0;
        fprintf(f, "\nMAXPOOL = [None, F.max_pool1d, F.max_pool2d, F.max_pool3d][%d]\n", sr);
        fprintf(f, "AVGPOOL = [None, F.avg_pool1d, F.avg_pool2d, F.avg_pool3d][%d]\n", sr);
        fprintf(f, "CONV = [None, F.conv1d, F.conv2d, F.conv3d][%d]\n", sr);
        fprintf(f, "CONVT = [None, F.conv_transpose1d, F.conv_transpose2d, "
                   "F.conv_transpose3d][%d]\n", sr);
    }
    if (b & REF_P_GROUPS)
        fprintf(f, "GROUPS = %lld\n", (long long)p->groups);
    if (b & REF_P_PERM) {
        int64_t v[REF_MAX_RANK];
        for (int i = 0; i < p->perm_len; i++)
            v[i] = p->perm[i];
        fputs("PERM = ", f);
        py_ints(f, v, p->perm_len);
        fputc('\n', f);
    }
    if (b & REF_P_TARGET) {
        fputs("TARGET = ", f);
        py_ints(f, p->target.dim, p->target.rank);
        fputc('\n', f);
    }
}

static const char py_tail[] =
    "\n\n"
    "def run(dtype, device):\n"
    "    \"\"\"Forward (and VJP) in `dtype` on `device`, from exactly the values above.\"\"\"\n"
    "    X, leaves = [], []\n"
    "    for (buf, kind, shape, strides, offset), data in zip(INPUTS, DIFFERENTIABLE):\n"
    "        if dtype is torch.float64 and kind.is_floating_point:\n"
    "            kind = torch.float64  # the reference: the same values, in float64\n"
    "        storage = torch.tensor(buf, dtype=torch.float64).to(kind).to(device)\n"
    "        x = torch.as_strided(storage, shape, strides, offset)\n"
    "        if WANT_VJP and data:\n"
    "            x = x.detach().requires_grad_(True)\n"
    "            leaves.append(x)\n"
    "        X.append(x)\n"
    "    y = op(X)\n"
    "    out = {'y': y.detach()}\n"
    "    if WANT_VJP and leaves:\n"
    "        g = torch.tensor(G, dtype=torch.float64).to(dtype)\n"
    "        y.backward(g.to(device).reshape(y.shape))\n"
    "        names = [n for n, d in zip(INPUT_NAMES, DIFFERENTIABLE) if d]\n"
    "        for name, x in zip(names, leaves):\n"
    "            out['grad:' + name] = x.grad.detach()\n"
    "    return out\n"
    "\n"
    "\n"
    "def mismatch(got, ref):\n"
    "    got, ref = got.to('cpu', torch.float64), ref.to('cpu', torch.float64)\n"
    "    both_nan = torch.isnan(got) & torch.isnan(ref)\n"
    "    err = (got - ref).abs()\n"
    "    err = torch.where(both_nan | (got == ref), torch.zeros_like(err), err)\n"
    "    err = torch.where(torch.isnan(err), torch.full_like(err, math.inf), err)\n"
    "    return got, ref, err\n"
    "\n"
    "\n"
    "def main():\n"
    "    print('case:', CASE)\n"
    "    got_all = run(DTYPE, DEVICE)\n"
    "    ref_all = run(torch.float64, 'cpu')\n"
    "    reproduced = False\n"
    "    for name in got_all:\n"
    "        got, ref, err = mismatch(got_all[name], ref_all[name])\n"
    "        if err.numel() == 0:\n"
    "            print(f'{name}: empty')\n"
    "            continue\n"
    "        k = int(torch.argmax(err.reshape(-1)))\n"
    "        idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(k), err.shape)) if err.dim() else ()\n"
    "        print(f'{name}: max |{DTYPE_NAME} - float64| = {float(err.reshape(-1)[k]):.6g} at {list(idx)}: '\n"
    "              f'got {float(got.reshape(-1)[k])!r}, float64 reference {float(ref.reshape(-1)[k])!r}')\n"
    "        if name == WORST_OUTPUT and WORST_INDEX is not None and err.dim() == len(WORST_INDEX):\n"
    "            e = float(err[WORST_INDEX])\n"
    "            print(f'{name}{list(WORST_INDEX)}: here |err| = {e:.6g}; capcheck bound {BOUND:.6g} '\n"
    "                  f'(capcheck saw expected {EXPECTED!r}, got {GOT!r} from provider {PROVIDER})')\n"
    "            reproduced = reproduced or e > BOUND\n"
    "    if WORST_INDEX is None:\n"
    "        print('(no capcheck result recorded here: judge the differences above)')\n"
    "        return 0\n"
    "    print('mismatch reproduced on ATen' if reproduced else\n"
    "          'ATen agrees with the float64 reference within capcheck\\'s bound at its worst element')\n"
    "    return 1 if reproduced else 0\n"
    "\n"
    "\n"
    "if __name__ == '__main__':\n"
    "    sys.exit(main())\n";

/* "[1,2]" into a Python tuple; "None" when empty or malformed. */
static void py_index(FILE *f, const char *s)
{
    if (!s || *s != '[') {
        fputs("None", f);
        return;
    }
    int64_t v[REF_MAX_RANK];
    int n = 0;
    const char *q = s + 1;
    while (*q && *q != ']' && n < REF_MAX_RANK) {
        char *end;
        v[n++] = strtoll(q, &end, 10);
        if (end == q) {
            fputs("None", f);
            return;
        }
        q = *end == ',' ? end + 1 : end;
    }
    py_ints(f, v, n);
}

int cc_shrink_write_python(const cc_case *c, const cc_result *r, FILE *f, char *msg,
                           size_t msg_len)
{
    cc_inputs in;
    char m[256] = "";
    if (cc_materialize(c, &in, m, sizeof m)) {
        snprintf(msg, msg_len, "cannot materialize the case: %s", m);
        return -1;
    }
    char line[CC_CASE_LINE_MAX];
    cc_case_print(c, line, sizeof line);
    const char *expr = py_op_expr(c->op->name);
    fprintf(f,
            "#!/usr/bin/env python3\n"
            "# Standalone reproducer written by `capcheck shrink` (needs only torch).\n"
            "#   %s\n"
            "# The inputs are exactly the values capcheck materialized for this case, laid out\n"
            "# with the same storage, strides and offsets (layout=%s: gaps hold NaN).\n"
            "# It runs the ATen op in %s on %s, then the same op in float64 from the same values,\n"
            "# and prints the largest difference of every output.\n"
            "import math\nimport sys\n\nimport torch\nimport torch.nn.functional as F\n\n"
            "nan, inf = math.nan, math.inf\n",
            line, cc_layout_name(c->layout), cc_dtype_name(c->dtype), cc_device_name(c->device));
    fprintf(f, "CASE = %s%s%s\n", "'", line, "'");
    fprintf(f, "DTYPE, DTYPE_NAME = %s, '%s'\nDEVICE = '%s'\n", torch_dtype(c->dtype),
            cc_dtype_name(c->dtype), c->device == CC_CUDA ? "cuda" : "cpu");
    int want_vjp = c->check != CC_CHECK_FWD && c->op->vjp;
    fprintf(f, "WANT_VJP = %s\n", want_vjp ? "True" : "False");
    py_params(f, c);
    fputs("INPUT_NAMES = [", f);
    for (int i = 0; i < c->n_in; i++) {
        int k = i < c->op->max_inputs ? i : c->op->max_inputs - 1;
        if (k >= REF_MAX_INPUTS)
            k = REF_MAX_INPUTS - 1;
        fprintf(f, "%s'%s'", i ? ", " : "", c->op->input_names[k] ? c->op->input_names[k] : "x");
    }
    fputs("]\nDIFFERENTIABLE = [", f);
    for (int i = 0; i < c->n_in; i++) {
        int k = i < c->op->max_inputs ? i : c->op->max_inputs - 1;
        if (k >= REF_MAX_INPUTS)
            k = REF_MAX_INPUTS - 1;
        fprintf(f, "%s%s", i ? ", " : "",
                c->op->input_kind[k] == REF_IN_DATA ? "True" : "False");
    }
    fputs("]\n# (storage values, dtype, shape, strides and storage offset in elements) of every "
          "input\nINPUTS = [\n",
          f);
    for (int i = 0; i < c->n_in; i++) {
        const cc_view *v = &in.view[i];
        fputs("  (", f);
        py_buffer(f, v->dtype, in.storage[i], in.storage_len[i]);
        fprintf(f, ",\n   %s, ", torch_dtype(v->dtype));
        py_ints(f, v->shape, v->rank);
        fputs(", ", f);
        py_ints(f, v->strides, v->rank);
        fprintf(f, ", %lld),\n", (long long)in.offset[i]);
    }
    fputs("]\n# the output cotangent of the VJP (dense, output shape)\nG = ", f);
    py_buffer(f, in.g_view.dtype, in.g_view.data, ref_numel(&in.out_shape));
    fputs("\n# what capcheck saw\n", f);
    fprintf(f, "PROVIDER = '%s'\nWORST_OUTPUT = '%s'\nWORST_INDEX = ", r ? r->provider : "?",
            r && r->worst_output[0] ? r->worst_output : "y");
    py_index(f, r ? r->worst_index : NULL);
    fputs("\nEXPECTED, GOT, BOUND = ", f);
    py_real(f, r ? r->expected : 0);
    fputs(", ", f);
    py_real(f, r ? r->got : 0);
    fputs(", ", f);
    py_real(f, r ? r->bound : INFINITY);
    fputs("\n\n\ndef op(X):\n", f);
    if (expr)
        fprintf(f, "    return %s\n", expr);
    else
        fprintf(f, "    raise NotImplementedError('capcheck shrink has no torch expression for "
                   "%s yet: write it here')\n",
                c->op->name);
    fputs(py_tail, f);
    cc_inputs_free(&in);
    if (!expr) {
        snprintf(msg, msg_len, "no torch expression for %s: the script has the inputs but "
                               "raises NotImplementedError",
                 c->op->name);
        return -1;
    }
    return ferror(f) ? (snprintf(msg, msg_len, "write error"), -1) : 0;
}

/* ---- the command ---------------------------------------------------------------------------- */

int cc_shrink_command(const cc_provider *p, const cc_case *c, const char *script_path,
                      double timeout_s, const cc_repro *repro, FILE *out, FILE *err)
{
    cc_shrink_opts o = {0, timeout_s, 0, err};
    cc_shrink_result res;
    char msg[512] = "";
    char line[CC_CASE_LINE_MAX];
    cc_case_print(c, line, sizeof line);
    int rc = cc_shrink(p, c, &o, &res, msg, sizeof msg);
    if (rc) {
        fprintf(err, "capcheck shrink: %s\n  %s\n", msg, line);
        return rc > 0 ? 1 : 2;
    }
    fprintf(out, "original: %s\n          %s: %s (%lld input elements)\n", line,
            cc_result_status_name(res.original.status), res.original.message,
            (long long)cc_case_input_elements(c));
    fprintf(out, "minimal:  %s\n          %s: %s (%lld input elements)\n", res.last.line,
            cc_result_status_name(res.last.status), res.last.message,
            (long long)cc_case_input_elements(&res.minimal));
    fprintf(out, "          %d candidates run, %d kept%s\n", res.runs, res.kept,
            res.budget_spent ? " (run budget spent before the fixpoint)" : "");
    char cmd[2600];
    cc_repro_command(repro, res.last.line, cmd, sizeof cmd);
    fprintf(out, "  %s\n", cmd);
    FILE *f = out;
    if (script_path) {
        f = fopen(script_path, "w");
        if (!f) {
            fprintf(err, "capcheck shrink: cannot write %s: %s\n", script_path, strerror(errno));
            return 2;
        }
    } else {
        fputs("---- reproducer (python3, torch) ----\n", out);
    }
    rc = cc_shrink_write_python(&res.minimal, &res.last, f, msg, sizeof msg);
    if (script_path) {
        if (fclose(f) != 0)
            rc = -1;
        else
            fprintf(out, "reproducer: %s (python3 %s)\n", script_path, script_path);
    }
    if (rc)
        fprintf(err, "capcheck shrink: reproducer: %s\n", msg);
    return 0;
}
