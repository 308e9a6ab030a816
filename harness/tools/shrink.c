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
#include "harness/run/exit_code.h"
#include "harness/run/pool.h"
#include "harness/tools/reproducer.h"

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
                         NULL, 0,    opt.cpu_level,   {0}, -1, opt.aten_threads};
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

/* ---- the command ---------------------------------------------------------------------------- */

int cc_shrink_command(const cc_provider *p, const cc_case *c, const char *script_path,
                      const cc_shrink_opts *o, const cc_repro *repro, FILE *out, FILE *err)
{
    cc_shrink_result res;
    char msg[512] = "";
    char line[CC_CASE_LINE_MAX];
    cc_case_print(c, line, sizeof line);
    int rc = cc_shrink(p, c, o, &res, msg, sizeof msg);
    if (rc) {
        fprintf(err, "capcheck shrink: %s\n  %s\n", msg, line);
        return rc > 0 ? 1 : CC_EXIT_UNJUDGED; /* < 0: the provider could not run */
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
    return cc_reproducer_hand_out(&res.minimal, p, &res.last, cmd, script_path, out, err)
               ? CC_EXIT_UNJUDGED
               : 0;
}
