/* Case-line parser, printer and generator expansion (grammar in case.h and docs/cases.md). */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include "harness/case/case.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/dtype.h"
#include "core/files.h"
#include "core/grow.h"
#include "core/text.h"
#include "core/torchlean.h"
#include "harness/case/values.h"

const char *const cc_layout_names[CC_LAYOUT_COUNT] = {"contig", "transpose", "stride2", "bcast",
                                                       "chlast", "sliced",    "mixed",   "strided"};
#define N_LAYOUT_CLASSES 6 /* contig .. sliced: what one input (or every input) can be */
static const char *const check_names[] = {"both", "fwd", "vjp"};
const char *const cc_ref_mode_names[CC_REF_MODE_COUNT] = {"auto", "full", "sampled"};

int cc_case_stream(const cc_case *c)
{
    return c->stream == CC_STREAM_LIBM ? CC_STREAM_LIBM : CC_STREAM_DEFAULT;
}

const char *cc_layout_name(cc_layout l)
{
    return l < CC_LAYOUT_COUNT ? cc_layout_names[l] : "?";
}

/* ---- parameter table: key, the op's REF_P_* bit, kind, field ----------------------------- */

typedef enum { PK_INT, PK_I64, PK_U64, PK_DOUBLE, PK_WINDOW, PK_PERM, PK_SHAPE, PK_NAME } param_kind;

typedef struct {
    const char *key;
    unsigned bit;
    param_kind kind;
    size_t offset;
} param_spec;

#define P(key, bit, kind, field) {key, bit, kind, offsetof(ref_params, field)}
static const param_spec param_specs[] = {
    P("axis", REF_P_AXIS, PK_INT, axis),
    P("eps", REF_P_EPS, PK_DOUBLE, eps),
    P("lo", REF_P_LOHI, PK_DOUBLE, lo),
    P("hi", REF_P_LOHI, PK_DOUBLE, hi),
    P("alpha", REF_P_ALPHA, PK_DOUBLE, alpha),
    P("beta", REF_P_BETA, PK_DOUBLE, beta),
    P("temp", REF_P_TEMP, PK_DOUBLE, temperature),
    P("keep", REF_P_KEEP, PK_DOUBLE, keep_prob),
    P("rseed", REF_P_RSEED, PK_U64, rng_seed),
    P("k", REF_P_K, PK_I64, k),
    P("start", REF_P_RANGE, PK_I64, start),
    P("len", REF_P_RANGE, PK_I64, count),
    P("kernel", REF_P_WINDOW, PK_WINDOW, kernel),
    P("stride", REF_P_WINDOW, PK_WINDOW, stride),
    P("pad", REF_P_WINDOW, PK_WINDOW, pad),
    P("dil", REF_P_WINDOW, PK_WINDOW, dil),
    P("groups", REF_P_GROUPS, PK_I64, groups),
    P("training", REF_P_TRAINING, PK_INT, training),
    P("causal", REF_P_CAUSAL, PK_INT, causal),
    P("perm", REF_P_PERM, PK_PERM, perm),
    P("to", REF_P_TARGET, PK_SHAPE, target),
    P("modes", REF_P_MODES, PK_I64, modes),
    P("variant", REF_P_VARIANT, PK_INT, variant),
    P("length", REF_P_LENGTH, PK_I64, length),
    P("custom", REF_P_CUSTOM, PK_NAME, custom_name),
};
#undef P
#define N_PARAM_SPECS (sizeof param_specs / sizeof param_specs[0])

static const param_spec *find_param(const char *key)
{
    for (size_t i = 0; i < N_PARAM_SPECS; i++)
        if (strcmp(param_specs[i].key, key) == 0)
            return &param_specs[i];
    return NULL;
}

/* ---- errors ------------------------------------------------------------------------------- */

static int fail(cc_parse_error *err, int column, const char *fmt, ...)
{
    if (err) {
        err->column = column;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* ---- value parsers (each returns 0 and consumes the whole string, or -1) ------------------- */

static int parse_i64(const char *s, int64_t *out)
{
    if (!*s)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (*end || errno)
        return -1;
    *out = v;
    return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
    if (!*s || *s == '-')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (*end || errno)
        return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *s, double *out)
{
    if (!*s)
        return -1;
    char *end;
    double v = strtod(s, &end);
    if (*end)
        return -1;
    *out = v;
    return 0;
}

/* "[a,b,c]" into up to `max` integers; *n receives the count. *s advances past ']'. */
static int parse_int_list(const char **s, int64_t *vals, int max, int *n)
{
    const char *p = *s;
    if (*p != '[')
        return -1;
    p++;
    *n = 0;
    if (*p == ']') {
        *s = p + 1;
        return 0;
    }
    for (;;) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || *n >= max)
            return -1;
        vals[(*n)++] = v;
        p = end;
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p == ']') {
            *s = p + 1;
            return 0;
        }
        return -1;
    }
}

/* Every prefix product of the extents stays within CC_CASE_MAX_ELEMENTS (so ref_numel, which
 * multiplies left to right, never overflows, and a zero extent cannot hide huge ones). */
static int shape_size_ok(const ref_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) {
        int64_t d = s->dim[i];
        if (d < 0 || d > CC_CASE_MAX_ELEMENTS)
            return 0;
        if (d > 0 && n > CC_CASE_MAX_ELEMENTS / d)
            return 0;
        if (d > 0)
            n *= d;
    }
    return 1;
}

static int parse_shape_list(const char *s, ref_shape *shapes, int max, int *n)
{
    *n = 0;
    while (*s) {
        if (*n >= max)
            return -1;
        int rank;
        if (parse_int_list(&s, shapes[*n].dim, REF_MAX_RANK, &rank) != 0)
            return -1;
        shapes[*n].rank = rank;
        if (!shape_size_ok(&shapes[*n]))
            return -1;
        (*n)++;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return *n > 0 ? 0 : -1;
}

/* Why a shape list that parse_shape_list refused is wrong, when it is a limit rather than its
 * writing: more inputs than `max`, or an input of more than REF_MAX_RANK dimensions. 0 when it
 * is neither (then it is malformed). */
static int shape_list_limit(const char *s, int max, char *why, size_t n)
{
    int inputs = 0, dims = 0, in_shape = 0;
    for (; *s; s++) {
        if (*s == '[') {
            in_shape = 1;
            dims = 0;
            inputs++;
        } else if (*s == ']') {
            in_shape = 0;
            if (dims > REF_MAX_RANK) {
                if (max == 1)
                    snprintf(why, n, "it has %d dimensions; a tensor has at most %d", dims,
                             REF_MAX_RANK);
                else
                    snprintf(why, n, "input %d has %d dimensions; a tensor has at most %d",
                             inputs, dims, REF_MAX_RANK);
                return 1;
            }
        } else if (in_shape && (dims == 0 || s[-1] == ','))
            dims += *s != ']';
    }
    if (inputs > max) {
        snprintf(why, n, "it gives %d shapes; an op takes at most %d inputs", inputs, max);
        return 1;
    }
    return 0;
}

/* ---- tokens -------------------------------------------------------------------------------- */

#define MAX_TOKENS 48

typedef struct {
    char text[CC_CASE_LINE_MAX];
    char *key[MAX_TOKENS], *val[MAX_TOKENS];
    int col[MAX_TOKENS], val_col[MAX_TOKENS];
    int n;
} tokens;

/* Split at white space; "key=value" tokens get key/val, a bare word gets val only. Text after
 * '#' is a comment. */
static int tokenize(const char *line, tokens *t, cc_parse_error *err)
{
    size_t len = strcspn(line, "#\n\r");
    if (len >= sizeof t->text)
        return fail(err, 1, "line is longer than %d characters", CC_CASE_LINE_MAX - 1);
    memcpy(t->text, line, len);
    t->text[len] = 0;
    t->n = 0;
    char *p = t->text;
    while (*p) {
        while (*p && isspace((unsigned char)*p))
            *p++ = 0;
        if (!*p)
            break;
        if (t->n >= MAX_TOKENS)
            return fail(err, (int)(p - t->text) + 1, "too many words on one line");
        int i = t->n++;
        t->col[i] = (int)(p - t->text) + 1;
        char *start = p;
        while (*p && !isspace((unsigned char)*p))
            p++;
        char *eq = memchr(start, '=', (size_t)(p - start));
        if (eq) {
            *eq = 0;
            t->key[i] = start;
            t->val[i] = eq + 1;
            t->val_col[i] = t->col[i] + (int)(eq + 1 - start);
            /* every key once: a second value would silently win (dtype=f32 dtype=f64) */
            for (int k = 0; k < i; k++)
                if (t->key[k] && strcmp(t->key[k], start) == 0)
                    return fail(err, t->col[i], "'%s' is given twice (first at column %d)",
                                start, t->col[k]);
        } else {
            t->key[i] = NULL;
            t->val[i] = start;
            t->val_col[i] = t->col[i];
        }
    }
    return 0;
}

static int find_token(const tokens *t, const char *key)
{
    for (int i = 0; i < t->n; i++)
        if (t->key[i] && strcmp(t->key[i], key) == 0)
            return i;
    return -1;
}

/* ---- shared key handling ------------------------------------------------------------------- */

static int parse_named(const char *s, const char *const *names, int count)
{
    for (int i = 0; i < count; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

static int set_param(const ref_op *op, const param_spec *ps, const char *val, int key_col,
                     int col, ref_params *p, int *spatial_seen, cc_parse_error *err)
{
    if (!(op->params & ps->bit))
        return fail(err, key_col, "%s takes no parameter '%s'", op->name, ps->key);
    char *field = (char *)p + ps->offset;
    int64_t i64;
    switch (ps->kind) {
    case PK_INT:
        if (parse_i64(val, &i64) || i64 < -1000000 || i64 > 1000000)
            return fail(err, col, "'%s' wants an integer, got '%s'", ps->key, val);
        *(int *)field = (int)i64;
        return 0;
    case PK_I64:
        if (parse_i64(val, (int64_t *)field))
            return fail(err, col, "'%s' wants an integer, got '%s'", ps->key, val);
        return 0;
    case PK_U64:
        if (parse_u64(val, (uint64_t *)field))
            return fail(err, col, "'%s' wants an unsigned integer, got '%s'", ps->key, val);
        return 0;
    case PK_DOUBLE:
        if (parse_double(val, (double *)field))
            return fail(err, col, "'%s' wants a number, got '%s'", ps->key, val);
        return 0;
    case PK_WINDOW: {
        const char *s = val;
        int n;
        if (parse_int_list(&s, (int64_t *)field, 3, &n) || *s || n < 1)
            return fail(err, col, "'%s' wants a list of 1 to 3 integers like [2,2], got '%s'",
                        ps->key, val);
        if (*spatial_seen && n != p->spatial)
            return fail(err, col, "'%s' has %d entries but an earlier window list has %d",
                        ps->key, n, p->spatial);
        p->spatial = n;
        *spatial_seen = 1;
        return 0;
    }
    case PK_PERM: {
        const char *s = val;
        int64_t v[REF_MAX_RANK];
        int n;
        if (parse_int_list(&s, v, REF_MAX_RANK, &n) || *s)
            return fail(err, col, "'perm' wants a list of axes like [1,0], got '%s'", val);
        p->perm_len = n;
        for (int i = 0; i < n; i++)
            p->perm[i] = (int)v[i];
        return 0;
    }
    case PK_SHAPE: {
        int n;
        char why[128];
        if (parse_shape_list(val, (ref_shape *)field, 1, &n))
            return shape_list_limit(val, 1, why, sizeof why)
                       ? fail(err, col, "'%s' wants one shape like [2,3]: %s", ps->key, why)
                       : fail(err, col,
                              "'%s' wants one shape like [2,3] (at most 2^48 elements), got '%s'",
                              ps->key, val);
        return 0;
    }
    case PK_NAME:
        if (!*val || strlen(val) >= sizeof p->custom_name)
            return fail(err, col, "'%s' wants a name of 1 to %zu characters", ps->key,
                        sizeof p->custom_name - 1);
        strcpy(field, val);
        return 0;
    }
    return -1;
}

/* stream=1|2 and ref=auto|full|sampled, shared by explicit and generator lines: 1 when the key
 * is one of them (set, or -1 with err), 0 when it is not. */
static int parse_run_key(const char *k, const char *v, int col, int *stream, cc_ref_mode *ref,
                         cc_parse_error *err)
{
    if (strcmp(k, "stream") == 0) {
        if (strcmp(v, "1") != 0 && strcmp(v, "2") != 0)
            return fail(err, col, "unknown value stream '%s' (2: portable, the default; 1: libm)",
                        v);
        /* 0 is the default stream's canonical form: a zeroed case draws stream 2 */
        *stream = v[0] == '1' ? CC_STREAM_LIBM : 0;
        return 1;
    }
    if (strcmp(k, "ref") == 0) {
        int m = parse_named(v, cc_ref_mode_names, CC_REF_MODE_COUNT);
        if (m < 0)
            return fail(err, col, "unknown reference mode '%s' (auto, full, sampled)", v);
        *ref = (cc_ref_mode)m;
        return 1;
    }
    return 0;
}

/* Keys that share one op parameter bit (lo/hi, start/len) are given together or not at all:
 * one alone would run with the other's default, a meaning the line does not state. The window
 * lists are the exception: stride, pad and dil have documented defaults (1, 0, 1). */
static int params_given_in_part(const tokens *t, const ref_op *op, cc_parse_error *err)
{
    for (size_t i = 0; i < N_PARAM_SPECS; i++) {
        const param_spec *a = &param_specs[i];
        int at = find_token(t, a->key);
        if (at < 0 || a->kind == PK_WINDOW || !(op->params & a->bit))
            continue;
        for (size_t j = 0; j < N_PARAM_SPECS; j++)
            if (j != i && param_specs[j].bit == a->bit && find_token(t, param_specs[j].key) < 0)
                return fail(err, t->col[at], "%s takes '%s' and '%s' together: the line gives "
                                             "'%s' alone",
                            op->name, i < j ? a->key : param_specs[j].key,
                            i < j ? param_specs[j].key : a->key, a->key);
    }
    return 0;
}

/* ---- layouts ------------------------------------------------------------------------------- */

cc_input_layout cc_case_input_layout(const cc_case *c, int i)
{
    if (c->layout == CC_LAYOUT_MIXED)
        return c->in_layout[i];
    cc_input_layout l;
    memset(&l, 0, sizeof l);
    l.kind = c->layout;
    return l;
}

const char *cc_case_layout_problem(const cc_case *c, char *buf, size_t n)
{
    if ((unsigned)c->layout >= CC_LAYOUT_COUNT || c->layout == CC_LAYOUT_STRIDED) {
        snprintf(buf, n, "layout %d is not a case's layout", (int)c->layout);
        return buf;
    }
    if (c->layout != CC_LAYOUT_MIXED)
        return NULL;
    for (int i = 0; i < c->n_in; i++) {
        const cc_input_layout *l = &c->in_layout[i];
        const ref_shape *s = &c->shape[i];
        if (l->kind < 0 || (l->kind >= N_LAYOUT_CLASSES && l->kind != CC_LAYOUT_STRIDED)) {
            snprintf(buf, n, "input %d has no layout class", i + 1);
            return buf;
        }
        if (l->kind != CC_LAYOUT_STRIDED)
            continue;
        if (l->offset < 0 || l->offset > CC_CASE_MAX_ELEMENTS) {
            snprintf(buf, n, "input %d: offset %lld is out of range (0 .. 2^48)", i + 1,
                     (long long)l->offset);
            return buf;
        }
        /* no two elements share a place, except along a stride-0 (broadcast) axis: sorted by
         * stride, each axis must step over the whole extent of the one inside it */
        int order[REF_MAX_RANK], m = 0;
        double span = (double)l->offset;
        for (int a = 0; a < s->rank; a++) {
            if (l->strides[a] < 0 || l->strides[a] > CC_CASE_MAX_ELEMENTS) {
                snprintf(buf, n, "input %d: stride %lld of axis %d is out of range (0 .. 2^48)",
                         i + 1, (long long)l->strides[a], a);
                return buf;
            }
            if (s->dim[a] > 1 && l->strides[a] > 0)
                order[m++] = a;
            if (s->dim[a] > 0)
                span += (double)(s->dim[a] - 1) * (double)l->strides[a];
        }
        if (span > (double)CC_CASE_MAX_ELEMENTS) {
            snprintf(buf, n, "input %d: its buffer would hold more than 2^48 elements", i + 1);
            return buf;
        }
        for (int x = 1; x < m; x++) /* insertion sort by stride */
            for (int y = x; y > 0 && l->strides[order[y]] < l->strides[order[y - 1]]; y--) {
                int t = order[y];
                order[y] = order[y - 1];
                order[y - 1] = t;
            }
        for (int k = 1; k < m; k++) {
            int in = order[k - 1], out = order[k];
            if (l->strides[out] < l->strides[in] * s->dim[in]) {
                snprintf(buf, n,
                         "input %d: strides overlap (axis %d, stride %lld, steps inside axis %d, "
                         "%lld x stride %lld)",
                         i + 1, out, (long long)l->strides[out], in, (long long)s->dim[in],
                         (long long)l->strides[in]);
                return buf;
            }
        }
    }
    return NULL;
}

void cc_case_normalize_layout(cc_case *c)
{
    if (c->layout != CC_LAYOUT_MIXED) {
        memset(c->in_layout, 0, sizeof c->in_layout);
        return;
    }
    int k = c->n_in > 0 ? c->in_layout[0].kind : CC_LAYOUT_CONTIG;
    for (int i = 0; i < c->n_in; i++)
        if (c->in_layout[i].kind != k || k == CC_LAYOUT_STRIDED)
            return;
    c->layout = (cc_layout)k;
    memset(c->in_layout, 0, sizeof c->in_layout);
}

void cc_case_refit_layout(cc_case *c, const cc_case *before)
{
    if (c->layout != CC_LAYOUT_MIXED)
        return;
    for (int i = 0; i < c->n_in; i++) {
        cc_input_layout *l = &c->in_layout[i];
        if (l->kind != CC_LAYOUT_STRIDED)
            continue;
        const ref_shape *was = i < before->n_in ? &before->shape[i] : NULL, *now = &c->shape[i];
        if (!was || was->rank != now->rank || before->layout != CC_LAYOUT_MIXED) {
            memset(l, 0, sizeof *l); /* another rank: that input goes dense */
            continue;
        }
        /* axes in stride order keep their order and their gap factors */
        int order[REF_MAX_RANK], m = 0;
        for (int a = 0; a < now->rank; a++)
            if (l->strides[a] > 0)
                order[m++] = a;
        for (int x = 1; x < m; x++)
            for (int y = x;
                 y > 0 && (l->strides[order[y]] < l->strides[order[y - 1]] ||
                           (l->strides[order[y]] == l->strides[order[y - 1]] &&
                            order[y] > order[y - 1]));
                 y--) {
                int t = order[y];
                order[y] = order[y - 1];
                order[y - 1] = t;
            }
        int64_t old_end = 1, new_end = 1;
        for (int k = 0; k < m; k++) {
            int a = order[k];
            int64_t q = l->strides[a] / old_end;
            q = q < 1 ? 1 : q;
            old_end = l->strides[a] * (was->dim[a] > 1 ? was->dim[a] : 1);
            l->strides[a] = q * new_end;
            new_end = l->strides[a] * (now->dim[a] > 1 ? now->dim[a] : 1);
        }
    }
    char why[160];
    if (cc_case_layout_problem(c, why, sizeof why)) /* cannot keep it: dense */
        c->layout = CC_LAYOUT_CONTIG;
    cc_case_normalize_layout(c);
}

/* "[s,...]" or "[s,...]+offset" for an input of rank `rank`. */
static int parse_strides(const char *v, int rank, cc_input_layout *l)
{
    const char *s = v;
    int64_t st[REF_MAX_RANK];
    int n;
    if (parse_int_list(&s, st, REF_MAX_RANK, &n) || n != rank)
        return -1;
    memset(l, 0, sizeof *l);
    l->kind = CC_LAYOUT_STRIDED;
    memcpy(l->strides, st, sizeof(int64_t) * (size_t)n);
    if (*s == '+') {
        if (parse_i64(s + 1, &l->offset))
            return -1;
    } else if (*s) {
        return -1;
    }
    return 0;
}

static int parse_layout_value(const char *v, int col, cc_case *c, cc_parse_error *err)
{
    static const char classes[] = "contig, transpose, stride2, bcast, chlast, sliced";
    if (!strchr(v, '/') && v[0] != '[') {
        int l = parse_named(v, cc_layout_names, N_LAYOUT_CLASSES);
        if (l < 0 && parse_named(v, cc_layout_names, CC_LAYOUT_COUNT) >= 0)
            return fail(err, col,
                        "layout=%s is a generator class: a case line names one layout per input, "
                        "like layout=chlast/[1,4]+2",
                        v);
        if (l < 0)
            return fail(err, col, "unknown layout '%s' (%s, or one per input joined by '/')", v,
                        classes);
        c->layout = (cc_layout)l;
        return 0;
    }
    char buf[CC_CASE_LINE_MAX];
    snprintf(buf, sizeof buf, "%s", v);
    int i = 0;
    c->layout = CC_LAYOUT_MIXED;
    for (char *save = NULL, *tok = strtok_r(buf, "/", &save); tok;
         tok = strtok_r(NULL, "/", &save), i++) {
        if (i >= c->n_in)
            return fail(err, col, "layout '%s' names more layouts than the case's %d inputs", v,
                        c->n_in);
        cc_input_layout *l = &c->in_layout[i];
        memset(l, 0, sizeof *l);
        if (tok[0] == '[') {
            if (parse_strides(tok, c->shape[i].rank, l))
                return fail(err, col,
                            "input %d's layout '%s' wants %d strides like [%s] and an optional "
                            "+offset",
                            i + 1, tok, c->shape[i].rank, c->shape[i].rank == 2 ? "1,4" : "...");
        } else {
            l->kind = parse_named(tok, cc_layout_names, N_LAYOUT_CLASSES);
            if (l->kind < 0)
                return fail(err, col, "input %d: unknown layout '%s' (%s, or [strides]+offset)",
                            i + 1, tok, classes);
        }
    }
    if (i != c->n_in)
        return fail(err, col, "layout '%s' names %d layouts for %d inputs (one per input)", v, i,
                    c->n_in);
    char why[256];
    if (cc_case_layout_problem(c, why, sizeof why))
        return fail(err, col, "layout '%s': %s", v, why);
    cc_case_normalize_layout(c);
    return 0;
}

/* ---- explicit case lines ------------------------------------------------------------------- */

/* The keys only a generator line (count=N ...) takes. */
static int is_generator_key(const char *k)
{
    static const char *const KEYS[] = {"count", "size", "rank", "zero", "params", "except"};
    for (size_t i = 0; i < sizeof KEYS / sizeof KEYS[0]; i++)
        if (strcmp(k, KEYS[i]) == 0)
            return 1;
    return 0;
}

static int parse_tokens(const tokens *t, const cc_case_defaults *def, cc_case *c,
                        cc_parse_error *err)
{
    memset(c, 0, sizeof *c);
    if (t->n == 0 || t->key[0])
        return fail(err, t->n ? t->col[0] : 1, "a case line starts with an op name");
    c->op = ref_op_find(t->val[0]);
    if (!c->op)
        return fail(err, t->col[0], "unknown op '%s' (capcheck list ops shows them)", t->val[0]);
    if (c->op->set_defaults)
        c->op->set_defaults(&c->params);
    c->dtype = CC_F32;
    c->device = def ? def->device : CC_CPU;
    c->check = c->op->requires_vjp ? CC_CHECK_BOTH : CC_CHECK_FWD;
    int have_in = 0, in_col = 1, spatial_seen = 0, edge_col = 1, layout_col = 1, run_key;
    const char *layout_val = NULL;
    for (int i = 1; i < t->n; i++) {
        const char *k = t->key[i], *v = t->val[i];
        int col = t->val_col[i];
        if (!k)
            return fail(err, t->col[i], "expected key=value, got '%s'", v);
        if (strcmp(k, "dtype") == 0) {
            if (cc_dtype_parse(v, &c->dtype))
                return fail(err, col, "unknown dtype '%s' (f64, f32, f16, bf16)", v);
        } else if (strcmp(k, "device") == 0) {
            if (cc_device_parse(v, &c->device)) {
                char why[512];
                cc_device_unknown_msg(v, why, sizeof why);
                return fail(err, col, "%s", why);
            }
        } else if (strcmp(k, "in") == 0) {
            char why[128];
            if (parse_shape_list(v, c->shape, REF_MAX_INPUTS, &c->n_in))
                return shape_list_limit(v, REF_MAX_INPUTS, why, sizeof why)
                           ? fail(err, col, "shape list '%s': %s", v, why)
                           : fail(err, col,
                                  "malformed shape list '%s' (write in=[2,3],[3]; at most %d "
                                  "inputs, extents >= 0, at most 2^48 elements each)",
                                  v, REF_MAX_INPUTS);
            have_in = 1;
            in_col = col;
        } else if (strcmp(k, "layout") == 0) {
            layout_val = v;
            layout_col = col;
        } else if (strcmp(k, "check") == 0) {
            int m = parse_named(v, check_names, 3);
            if (m < 0)
                return fail(err, col, "unknown check '%s' (both, fwd, vjp)", v);
            c->check = (cc_check)m;
        } else if (strcmp(k, "seed") == 0) {
            if (parse_u64(v, &c->seed))
                return fail(err, col, "'seed' wants an unsigned integer, got '%s'", v);
        } else if (strcmp(k, "edge") == 0) {
            int e = parse_named(v, cc_edge_class_names, CC_EDGE_COUNT);
            if (e < 0 && strcmp(v, "none") != 0)
                return fail(err, col,
                            "unknown edge class '%s' (none, nan, inf, signed-zero, subnormal, "
                            "huge, ties, masked-row, moderate, large-mean)",
                            v);
            c->edges = e < 0 ? 0 : 1u << e;
            edge_col = col;
        } else if ((run_key = parse_run_key(k, v, col, &c->stream, &c->ref, err)) != 0) {
            if (run_key < 0)
                return -1;
        } else {
            const param_spec *ps = find_param(k);
            if (!ps && is_generator_key(k))
                return fail(err, t->col[i],
                            "'%s' is for generator lines in case files; one case line (repro, "
                            "shrink) gives its shapes with in=[...] (capcheck list cases FILE "
                            "prints the lines a generator line expands to)",
                            k);
            if (!ps)
                return fail(err, t->col[i], "unknown key '%s'", k);
            if (set_param(c->op, ps, v, t->col[i], col, &c->params, &spatial_seen, err))
                return -1;
        }
    }
    if (!have_in && c->op->min_inputs > 0)
        return fail(err, t->n ? t->col[t->n - 1] : 1, "%s needs its input shapes: in=[...]",
                    c->op->name);
    if (c->n_in < c->op->min_inputs || c->n_in > c->op->max_inputs)
        return fail(err, in_col, "%s takes %d to %d inputs, the line gives %d", c->op->name,
                    c->op->min_inputs, c->op->max_inputs, c->n_in);
    int check_tok = find_token(t, "check");
    if (c->check != CC_CHECK_FWD && !c->op->vjp)
        return fail(err, check_tok >= 0 ? t->val_col[check_tok] : t->col[0],
                    "%s has no VJP: check=%s cannot be run (write check=fwd)", c->op->name,
                    check_names[c->check]);
    if (params_given_in_part(t, c->op, err))
        return -1;
    ref_shape out;
    ref_err e = {{0}};
    if (c->op->shape(&c->params, c->n_in, c->shape, &out, &e) != REF_OK)
        return fail(err, in_col, "%s: %s", c->op->name, e.msg);
    if (!shape_size_ok(&out))
        return fail(err, in_col, "%s: the output would have more than 2^48 elements",
                    c->op->name);
    for (int e = 0; e < CC_EDGE_COUNT; e++)
        if ((c->edges >> e & 1) && !cc_edge_applies(c->op, &c->params, c->n_in, c->shape, e))
            return fail(err, edge_col, "edge=%s puts no value into any input of this %s case",
                        cc_edge_class_names[e], c->op->name);
    if (layout_val && parse_layout_value(layout_val, layout_col, c, err))
        return -1;
    /* the canonical line is what results, reports and repro carry: it must fit their buffers */
    char canon[2 * CC_CASE_LINE_MAX];
    cc_case_print(c, canon, sizeof canon);
    if (strlen(canon) >= CC_CASE_LINE_MAX)
        return fail(err, 1, "the case's canonical line would be %zu characters, longer than %d",
                    strlen(canon), CC_CASE_LINE_MAX - 1);
    return 0;
}

int cc_case_parse(const char *line, const cc_case_defaults *def, cc_case *out,
                  cc_parse_error *err)
{
    tokens t;
    if (tokenize(line, &t, err))
        return -1;
    return parse_tokens(&t, def, out, err);
}

/* ---- printing ------------------------------------------------------------------------------ */

typedef struct {
    char *buf;
    size_t n, used;
} sink;

static void put(sink *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(s->buf + s->used, s->n > s->used ? s->n - s->used : 0, fmt, ap);
    va_end(ap);
    if (w > 0)
        s->used += (size_t)w;
}

/* put(s, "%s", text) and put(s, "%" PRId64, v) without printf: every result line prints its
 * case, so these are a worker's hot path. Truncation as snprintf's. */
static void put_str(sink *s, const char *text)
{
    size_t len = strlen(text);
    if (s->n > s->used) {
        size_t room = s->n - s->used - 1, k = len < room ? len : room;
        memcpy(s->buf + s->used, text, k);
        s->buf[s->used + k] = 0;
    }
    s->used += len;
}

static void put_u64(sink *s, uint64_t v)
{
    char digits[REF_DECIMAL_MAX];
    put_str(s, ref_decimal_u64(digits, v));
}

static void put_i64(sink *s, int64_t v)
{
    char digits[REF_DECIMAL_MAX];
    put_str(s, ref_decimal_i64(digits, v));
}

/* " key=" */
static void put_key(sink *s, const char *key)
{
    put_str(s, " ");
    put_str(s, key);
    put_str(s, "=");
}

/* Shortest decimal that reads back to exactly the same double. Whether %.{p}g reads back is
 * monotone in p (the p-digit decimals are among the p+1-digit ones, and %.{p+1}g is the
 * nearest of those), so the shortest p is found by bisection: 5 tries instead of up to 17. */
static void put_double(sink *s, double x)
{
    char tmp[40];
    int lo = 1, hi = 17; /* %.17g always reads back */
    while (lo < hi && !isnan(x)) {
        int mid = (lo + hi) / 2;
        snprintf(tmp, sizeof tmp, "%.*g", mid, x);
        if (strtod(tmp, NULL) == x)
            hi = mid;
        else
            lo = mid + 1;
    }
    snprintf(tmp, sizeof tmp, "%.*g", isnan(x) ? 1 : lo, x);
    put_str(s, tmp);
}

static void put_list(sink *s, const int64_t *v, int n)
{
    put_str(s, "[");
    for (int i = 0; i < n; i++) {
        if (i)
            put_str(s, ",");
        put_i64(s, v[i]);
    }
    put_str(s, "]");
}

/* " key=value" for every parameter op reads, in table order. `listing` (capcheck list ops)
 * shows a window list by its first entry, "[v,...]" (one entry per spatial axis), and a kernel
 * without a default as "[...]". */
static void put_params(sink *s, const ref_op *op, const ref_params *p, int listing)
{
    for (size_t i = 0; i < N_PARAM_SPECS; i++) {
        const param_spec *ps = &param_specs[i];
        if (!(op->params & ps->bit))
            continue;
        const char *field = (const char *)p + ps->offset;
        if (listing && ps->kind == PK_WINDOW) {
            int64_t v = *(const int64_t *)field;
            if (v == 0 && strcmp(ps->key, "kernel") == 0)
                put(s, " kernel=[...]");
            else
                put(s, " %s=[%" PRId64 ",...]", ps->key, v);
            continue;
        }
        switch (ps->kind) {
        case PK_INT:
            put_key(s, ps->key);
            put_i64(s, *(const int *)field);
            break;
        case PK_I64:
            put_key(s, ps->key);
            put_i64(s, *(const int64_t *)field);
            break;
        case PK_U64:
            put_key(s, ps->key);
            put_u64(s, *(const uint64_t *)field);
            break;
        case PK_DOUBLE:
            put_key(s, ps->key);
            put_double(s, *(const double *)field);
            break;
        case PK_WINDOW:
            if (p->spatial > 0) {
                put_key(s, ps->key);
                put_list(s, (const int64_t *)field, p->spatial);
            }
            break;
        case PK_PERM: {
            int64_t v[REF_MAX_RANK];
            for (int j = 0; j < p->perm_len; j++)
                v[j] = p->perm[j];
            put_str(s, " perm=");
            put_list(s, v, p->perm_len);
            break;
        }
        case PK_SHAPE: {
            const ref_shape *sh = (const ref_shape *)field;
            put_key(s, ps->key);
            put_list(s, sh->dim, sh->rank);
            break;
        }
        case PK_NAME:
            put_key(s, ps->key);
            put_str(s, field);
            break;
        }
    }
}

void cc_op_params_describe(const ref_op *op, char *buf, size_t n)
{
    ref_params p;
    memset(&p, 0, sizeof p);
    if (op->set_defaults)
        op->set_defaults(&p);
    sink s = {buf, n, 0};
    if (n)
        buf[0] = 0;
    put_params(&s, op, &p, 1);
    if (s.used && n) /* drop the leading space */
        memmove(buf, buf + 1, strlen(buf));
}

void cc_case_print(const cc_case *c, char *buf, size_t n)
{
    sink s = {buf, n, 0};
    if (n)
        buf[0] = 0;
    put_str(&s, c->op->name);
    put_str(&s, " dtype=");
    put_str(&s, cc_dtype_name(c->dtype));
    put_str(&s, " device=");
    put_str(&s, cc_device_name(c->device));
    for (int i = 0; i < c->n_in; i++) {
        put_str(&s, i ? "," : " in=");
        put_list(&s, c->shape[i].dim, c->shape[i].rank);
    }
    put_params(&s, c->op, &c->params, 0);
    for (int e = 0; e < CC_EDGE_COUNT; e++) {
        if (c->edges >> e & 1) {
            put_str(&s, " edge=");
            put_str(&s, cc_edge_class_names[e]);
        }
    }
    /* always named: a line printed by any capcheck draws the same values in every other */
    put_str(&s, " stream=");
    put_i64(&s, cc_case_stream(c));
    if (c->ref != CC_REF_AUTO) {
        put_str(&s, " ref=");
        put_str(&s, cc_ref_mode_names[c->ref]);
    }
    if (c->layout != CC_LAYOUT_MIXED) {
        put_str(&s, " layout=");
        put_str(&s, cc_layout_name(c->layout));
    } else {
        put_str(&s, " layout=");
        for (int i = 0; i < c->n_in; i++) {
            const cc_input_layout *l = &c->in_layout[i];
            put_str(&s, i ? "/" : "");
            if (l->kind == CC_LAYOUT_STRIDED) {
                put_list(&s, l->strides, c->shape[i].rank);
                if (l->offset) {
                    put_str(&s, "+");
                    put_i64(&s, l->offset);
                }
            } else {
                put_str(&s, cc_layout_name((cc_layout)l->kind));
            }
        }
    }
    put_str(&s, " check=");
    put_str(&s, check_names[c->check]);
    put_str(&s, " seed=");
    put_u64(&s, c->seed);
}

/* ---- lists and generator lines ------------------------------------------------------------- */

void cc_case_list_free(cc_case_list *l)
{
    free(l->v);
    memset(l, 0, sizeof *l);
}

int cc_case_list_push(cc_case_list *l, const cc_case *c)
{
    cc_case *grown = cc_grow(l->v, l->n, &l->cap, sizeof *grown, 64);
    if (!grown)
        return -1;
    l->v = grown;
    l->v[l->n++] = *c;
    return 0;
}

/* FNV-1a of a name, to separate the seed streams of ops. */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

uint64_t cc_generated_seed(uint64_t base, const char *op, int combo, int64_t index)
{
    uint64_t h = ref_splitmix64(base ^ name_hash(op));
    h = ref_splitmix64(h ^ (uint64_t)combo * 0x9e3779b97f4a7c15ULL);
    return ref_splitmix64(h + (uint64_t)index);
}

/* Comma list of names into indices via `parse`; returns the count or -1. */
typedef int (*name_parser)(const char *s, int *out);

static int parse_dtype_name(const char *s, int *out)
{
    cc_dtype t;
    if (cc_dtype_parse(s, &t))
        return -1;
    *out = (int)t;
    return 0;
}

static int parse_device_name(const char *s, int *out)
{
    cc_device d;
    if (cc_device_parse(s, &d))
        return -1;
    *out = (int)d;
    return 0;
}

static int parse_layout_name(const char *s, int *out)
{
    *out = parse_named(s, cc_layout_names, CC_LAYOUT_COUNT);
    return *out < 0 ? -1 : 0;
}

static int parse_edge_name(const char *s, int *out)
{
    *out = strcmp(s, "none") == 0 ? -1 : parse_named(s, cc_edge_class_names, CC_EDGE_COUNT);
    return *out < 0 && strcmp(s, "none") != 0 ? -1 : 0;
}

static int parse_name_list(const char *val, name_parser parse, int *vals, int max)
{
    char buf[256];
    if (strlen(val) >= sizeof buf)
        return -1;
    strcpy(buf, val);
    int n = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (n >= max || parse(tok, &vals[n]))
            return -1;
        n++;
    }
    return n;
}

typedef struct {
    int64_t count;
    int dtypes[CC_DTYPE_COUNT], n_dtypes;
    int devices[CC_DEVICE_COUNT], n_devices;
    int layouts[CC_LAYOUT_COUNT], n_layouts;
    int edges[CC_EDGE_COUNT + 1], n_edges; /* edge classes; -1 is none */
    int edges_listed;                      /* edge= named its classes (not all) */
    int edge_col;
    int64_t max_elems;
    int rank, zero;
    int decimal; /* params=decimal: every real parameter a decimal not exact in binary */
    char except[256]; /* a '*' line's except=op,op: ops it leaves out */
    uint64_t seed;
    int check; /* -1: the op's default */
    int check_col;
    int stream;
    cc_ref_mode ref;
} gen_spec;

static int parse_generator(const tokens *t, const cc_case_defaults *def, gen_spec *g,
                           cc_parse_error *err)
{
    memset(g, 0, sizeof *g);
    g->dtypes[0] = CC_F32;
    g->n_dtypes = 1;
    g->devices[0] = def ? (int)def->device : CC_CPU;
    g->n_devices = 1;
    g->layouts[0] = CC_LAYOUT_CONTIG;
    g->n_layouts = 1;
    g->edges[0] = -1;
    g->n_edges = 1;
    g->max_elems = 256;
    g->rank = -1;
    g->seed = def ? def->base_seed : 0;
    g->check = -1;
    int run_key;
    for (int i = 1; i < t->n; i++) {
        const char *k = t->key[i], *v = t->val[i];
        int col = t->val_col[i];
        if (!k)
            return fail(err, t->col[i], "expected key=value, got '%s'", v);
        if (strcmp(k, "count") == 0) {
            if (parse_i64(v, &g->count) || g->count < 1 || g->count > CC_CASES_MAX)
                return fail(err, col, "'count' wants a whole number from 1 to %d, got '%s'",
                            CC_CASES_MAX, v);
        } else if (strcmp(k, "dtype") == 0) {
            if ((g->n_dtypes = parse_name_list(v, parse_dtype_name, g->dtypes, CC_DTYPE_COUNT)) < 1)
                return fail(err, col, "bad dtype list '%s' (f64,f32,f16,bf16)", v);
        } else if (strcmp(k, "device") == 0) {
            if ((g->n_devices = parse_name_list(v, parse_device_name, g->devices,
                                                CC_DEVICE_COUNT)) < 1) {
                char item[64], why[512] = "";
                for (const char *s = v; *s && !why[0]; s += strcspn(s, ",") + (s[strcspn(s, ",")] != 0)) {
                    cc_device d;
                    snprintf(item, sizeof item, "%.*s", (int)strcspn(s, ","), s);
                    if (cc_device_parse(item, &d))
                        cc_device_unknown_msg(item, why, sizeof why);
                }
                return fail(err, col, "bad device list '%s' (cpu,cuda)%s%s", v, why[0] ? ": " : "",
                            why);
            }
        } else if (strcmp(k, "layout") == 0) {
            if ((g->n_layouts = parse_name_list(v, parse_layout_name, g->layouts,
                                                CC_LAYOUT_COUNT)) < 1)
                return fail(err, col,
                            "bad layout list '%s' (contig,transpose,stride2,bcast,chlast,sliced,"
                            "mixed,strided)",
                            v);
        } else if (strcmp(k, "edge") == 0) {
            g->edge_col = col;
            g->edges_listed = strcmp(v, "all") != 0;
            if (!g->edges_listed) {
                g->n_edges = CC_EDGE_COUNT;
                for (int e = 0; e < CC_EDGE_COUNT; e++)
                    g->edges[e] = e;
            } else if ((g->n_edges = parse_name_list(v, parse_edge_name, g->edges,
                                                     CC_EDGE_COUNT + 1)) < 1) {
                return fail(err, col,
                            "bad edge class list '%s' (none, nan, inf, signed-zero, subnormal, "
                            "huge, ties, masked-row, moderate, large-mean, or all)",
                            v);
            }
        } else if (strcmp(k, "size") == 0) {
            static const char *const sizes[] = {"tiny", "small", "medium", "large"};
            static const int64_t elems[] = {16, 256, 4096, 1 << 20};
            int s = parse_named(v, sizes, 4);
            if (s < 0)
                return fail(err, col, "unknown size '%s' (tiny, small, medium, large)", v);
            g->max_elems = elems[s];
        } else if (strcmp(k, "rank") == 0) {
            int64_t r;
            if (parse_i64(v, &r) || r < 0 || r > REF_MAX_RANK)
                return fail(err, col, "'rank' wants 0 to %d, got '%s'", REF_MAX_RANK, v);
            g->rank = (int)r;
        } else if (strcmp(k, "zero") == 0) {
            g->zero = strcmp(v, "1") == 0;
        } else if (strcmp(k, "except") == 0) {
            if (strcmp(t->val[0], "*") != 0)
                return fail(err, t->col[i], "'except' belongs on a '*' line");
            if (strlen(v) + 2 >= sizeof g->except)
                return fail(err, col, "'except' lists too many ops");
            char list[256];
            snprintf(list, sizeof list, "%s", v);
            for (char *save = NULL, *op = strtok_r(list, ",", &save); op;
                 op = strtok_r(NULL, ",", &save))
                if (!ref_op_find(op))
                    return fail(err, col, "except: unknown op '%s' (capcheck list ops shows them)",
                                op);
            snprintf(g->except, sizeof g->except, ",%s,", v);
        } else if (strcmp(k, "params") == 0) {
            if (strcmp(v, "drawn") && strcmp(v, "decimal"))
                return fail(err, col, "'params' wants drawn or decimal, got '%s'", v);
            g->decimal = strcmp(v, "decimal") == 0;
        } else if (strcmp(k, "seed") == 0) {
            if (parse_u64(v, &g->seed))
                return fail(err, col, "'seed' wants an unsigned integer, got '%s'", v);
        } else if (strcmp(k, "check") == 0) {
            if ((g->check = parse_named(v, check_names, 3)) < 0)
                return fail(err, col, "unknown check '%s' (both, fwd, vjp)", v);
            g->check_col = col;
        } else if ((run_key = parse_run_key(k, v, col, &g->stream, &g->ref, err)) != 0) {
            if (run_key < 0)
                return -1;
        } else {
            return fail(err, t->col[i], "unknown key '%s' in a generator line", k);
        }
    }
    return 0;
}

/* x as a decimal of two significant digits that no binary format holds exactly (0.51, not 0.5):
 * a provider that rounds an f64 case's parameter to float32 on the way in is then off by up to
 * 2^-25 relative, which an f64 bound sees. The double nearest the decimal, as a case line reads
 * it back. Non-finite and zero values stay. */
static double non_dyadic(double x)
{
    if (!isfinite(x) || x == 0)
        return x;
    int e = (int)floor(log10(fabs(x))) - 1; /* the second significant digit's power of ten */
    long long m = llround(x / pow(10.0, e));
    char buf[48];
    snprintf(buf, sizeof buf, "%llde%d", m, e);
    double d = strtod(buf, NULL);
    if ((double)(float)d == d) { /* exact in binary (0.5, 2, 0.25): one more in the last digit */
        snprintf(buf, sizeof buf, "%llde%d", m + (x > 0 ? 1 : -1), e);
        d = strtod(buf, NULL);
    }
    return d;
}

/* params=decimal: the op's real parameters as non-dyadic decimals, kept in their ranges. */
static void decimal_params(cc_case *c)
{
    ref_params *p = &c->params;
    unsigned bits = c->op->params;
    if (bits & REF_P_ALPHA)
        p->alpha = non_dyadic(p->alpha);
    if (bits & REF_P_BETA)
        p->beta = non_dyadic(p->beta);
    if (bits & REF_P_EPS)
        p->eps = non_dyadic(p->eps);
    if (bits & REF_P_TEMP)
        p->temperature = non_dyadic(p->temperature);
    if (bits & REF_P_KEEP) {
        double k = non_dyadic(p->keep_prob);
        p->keep_prob = k > 1 ? 0.99 : k;
    }
    if (bits & REF_P_LOHI) {
        double lo = non_dyadic(p->lo), hi = non_dyadic(p->hi);
        if ((lo < hi) == (p->lo < p->hi)) {
            p->lo = lo;
            p->hi = hi;
        }
    }
}

/* A generated case of layout class mixed or strided gets one layout per input, drawn from its
 * seed: mixed a class out of the six, strided an axis order, gaps and an offset. */
static void draw_layouts(cc_case *c)
{
    if (c->layout != CC_LAYOUT_MIXED && c->layout != CC_LAYOUT_STRIDED)
        return;
    int strided = c->layout == CC_LAYOUT_STRIDED;
    c->layout = CC_LAYOUT_MIXED;
    for (int i = 0; i < c->n_in; i++) {
        ref_rng r = {ref_splitmix64(c->seed ^ (0x1a7000ULL + (uint64_t)i))};
        cc_input_layout *l = &c->in_layout[i];
        memset(l, 0, sizeof *l);
        if (!strided) {
            l->kind = (int)ref_rng_range(&r, 0, N_LAYOUT_CLASSES - 1);
            continue;
        }
        const ref_shape *s = &c->shape[i];
        int perm[REF_MAX_RANK];
        for (int a = 0; a < s->rank; a++)
            perm[a] = a;
        for (int a = s->rank - 1; a > 0; a--) {
            int b = (int)ref_rng_range(&r, 0, a), t = perm[a];
            perm[a] = perm[b];
            perm[b] = t;
        }
        l->kind = CC_LAYOUT_STRIDED;
        int64_t st = ref_rng_range(&r, 1, 2); /* the innermost axis: dense or every other */
        for (int k = s->rank - 1; k >= 0; k--) {
            int a = perm[k];
            l->strides[a] = st;
            st *= s->dim[a] > 1 ? s->dim[a] : 1;
            if (ref_rng_range(&r, 0, 3) == 0) /* a gap after this axis */
                st += ref_rng_range(&r, 1, 3);
        }
        l->offset = ref_rng_range(&r, 0, 3);
    }
    cc_case_normalize_layout(c);
}

/* One generated case of op for (dtype, device, layout, edge class) number `combo`, index i.
 * Returns 0, 1 when the drawn case takes no value of the combination's edge class (left out), or
 * -1 with err. */
static int generate_one(const ref_op *op, const gen_spec *g, int combo, int64_t i, cc_case *c,
                        cc_parse_error *err)
{
    memset(c, 0, sizeof *c);
    c->op = op;
    int nd = g->n_dtypes, nv = g->n_devices, nl = g->n_layouts;
    c->dtype = (cc_dtype)g->dtypes[combo % nd];
    c->device = (cc_device)g->devices[(combo / nd) % nv];
    c->layout = (cc_layout)g->layouts[(combo / (nd * nv)) % nl];
    int edge = g->edges[combo / (nd * nv * nl)];
    c->edges = edge < 0 ? 0 : 1u << edge;
    c->seed = cc_generated_seed(g->seed, op->name, combo, i);
    c->stream = g->stream;
    c->ref = g->ref;
    c->check = g->check >= 0 ? (cc_check)g->check
                             : (op->requires_vjp ? CC_CHECK_BOTH : CC_CHECK_FWD);
    if (!op->vjp)
        c->check = CC_CHECK_FWD;
    /* with zero=1 every 8th case (and the last of a shorter line) asks for a zero-size
     * dimension; fall back when the op forbids it, then to the op's own rank */
    int zero = g->zero && (i % 8 == 7 || (g->count < 8 && i == g->count - 1));
    ref_sample_req reqs[3] = {{g->rank, zero, g->max_elems},
                              {g->rank, 0, g->max_elems},
                              {-1, 0, g->max_elems}};
    /* a draw the edge class cannot reach (a zero-size input, an optional mask left out) is
     * redrawn from the next seed of the stream, a few times; the case keeps the seed it used */
    for (int attempt = 0; attempt < (edge >= 0 ? 8 : 1); attempt++) {
        for (int a = 0; a < 3; a++) {
            memset(&c->params, 0, sizeof c->params);
            if (op->set_defaults)
                op->set_defaults(&c->params);
            ref_rng r = {c->seed};
            if (op->sample(&r, &reqs[a], &c->params, &c->n_in, c->shape) != REF_OK)
                continue;
            ref_shape out;
            ref_err e = {{0}};
            if (op->shape(&c->params, c->n_in, c->shape, &out, &e) != REF_OK)
                return fail(err, 1, "%s's sampler drew an invalid case: %s", op->name, e.msg);
            if (edge >= 0 && !cc_edge_applies(c->op, &c->params, c->n_in, c->shape, edge))
                continue;
            draw_layouts(c);
            if (g->decimal)
                decimal_params(c);
            return 0;
        }
        c->seed = ref_splitmix64(c->seed);
    }
    if (edge >= 0)
        return 1;
    return fail(err, 1, "%s's sampler cannot draw a case for rank %d", op->name, g->rank);
}

static int expand_generator(const tokens *t, const cc_case_defaults *def, cc_case_list *out,
                            cc_parse_error *err)
{
    gen_spec g;
    if (parse_generator(t, def, &g, err))
        return -1;
    int all = strcmp(t->val[0], "*") == 0;
    const ref_op *one = all ? NULL : ref_op_find(t->val[0]);
    if (!all && !one)
        return fail(err, t->col[0], "unknown op '%s' (capcheck list ops shows them)", t->val[0]);
    if (one && !one->vjp && g.check >= 0 && g.check != CC_CHECK_FWD)
        return fail(err, g.check_col, "%s has no VJP: check=%s cannot be run (write check=fwd)",
                    one->name, check_names[g.check]);
    /* bound the expansion before drawing anything: a line can ask for more cases than memory
     * holds (each case is about 1 KiB) */
    double would = (double)g.count * g.n_dtypes * g.n_devices * g.n_layouts * g.n_edges *
                   (all ? ref_op_count() : 1);
    if ((double)out->n + would > CC_CASES_MAX) {
        char how[160];
        int used = snprintf(how, sizeof how, "count %lld", (long long)g.count);
        const int factor[] = {g.n_dtypes, g.n_devices, g.n_layouts, g.n_edges};
        const char *const what[] = {"dtypes", "devices", "layouts", "edge classes"};
        for (int k = 0; k < 4; k++)
            if (factor[k] > 1 && used < (int)sizeof how)
                used += snprintf(how + used, sizeof how - (size_t)used, " x %d %s", factor[k],
                                 what[k]);
        if (all && used < (int)sizeof how)
            snprintf(how + used, sizeof how - (size_t)used, " x %d ops", ref_op_count());
        return fail(err, 1,
                    "this generator line expands to %.0f cases (%s)%s; a run holds at most %d: "
                    "lower count or split the cases into files run one at a time",
                    would, how, out->n ? " after the cases before it" : "", CC_CASES_MAX);
    }
    /* the edge class varies slowest, so a line without edge= numbers its combinations (and
     * seeds its cases) as before edge classes existed */
    int per_edge = g.n_dtypes * g.n_devices * g.n_layouts;
    for (int k = 0; k < (all ? ref_op_count() : 1); k++) {
        const ref_op *op = all ? ref_op_at(k) : one;
        char quoted[64];
        snprintf(quoted, sizeof quoted, ",%s,", op->name);
        if (!op->sample || strstr(g.except, quoted) ||
            (!op->vjp && g.check == CC_CHECK_VJP)) /* '* check=vjp': the VJP ops */
            continue;
        for (int e = 0; e < g.n_edges; e++) {
            int64_t made = 0;
            for (int combo = e * per_edge; combo < (e + 1) * per_edge; combo++)
                for (int64_t i = 0; i < g.count; i++) {
                    cc_case c;
                    int rc = generate_one(op, &g, combo, i, &c, err);
                    if (rc < 0)
                        return -1;
                    if (rc == 0 && cc_case_list_push(out, &c))
                        return fail(err, 1, "out of memory after %zu cases", out->n);
                    made += rc == 0;
                }
            if (made == 0 && g.count > 0 && g.edges[e] >= 0 && g.edges_listed && !all)
                return fail(err, g.edge_col, "edge=%s puts no value into any input of %s",
                            cc_edge_class_names[g.edges[e]], op->name);
        }
    }
    return 0;
}

/* The lines of text[0..len): a NUL byte is an error (the rest of its line would be lost). A
 * UTF-8 byte-order mark that an editor put at the start of the file is not part of its first
 * line. */
static int parse_lines(const char *text, size_t len, const char *name,
                       const cc_case_defaults *def, cc_case_list *out, cc_parse_error *err)
{
    int line_no = 0;
    const char *p = text, *stop = text + len;
    if (len >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0)
        p += 3;
    while (p < stop) {
        line_no++;
        const char *eol = memchr(p, '\n', (size_t)(stop - p));
        size_t n = eol ? (size_t)(eol - p) : (size_t)(stop - p);
        const char *nul = memchr(p, 0, n);
        char line[CC_CASE_LINE_MAX + 1];
        int rc = 0;
        if (nul) {
            rc = fail(err, (int)(nul - p) + 1, "a NUL byte: a case file is text");
        } else if (n > CC_CASE_LINE_MAX) {
            rc = fail(err, 1, "line is longer than %d characters", CC_CASE_LINE_MAX);
        } else {
            memcpy(line, p, n);
            line[n] = 0;
            tokens t;
            rc = tokenize(line, &t, err);
            if (rc == 0 && t.n > 0) {
                if (find_token(&t, "count") >= 0)
                    rc = expand_generator(&t, def, out, err);
                else {
                    cc_case c;
                    rc = parse_tokens(&t, def, &c, err);
                    if (rc == 0 && cc_case_list_push(out, &c))
                        rc = fail(err, 1, "out of memory after %zu cases", out->n);
                    else if (rc == 0 && out->n > CC_CASES_MAX)
                        rc = fail(err, 1, "a run holds at most %d cases", CC_CASES_MAX);
                }
            }
        }
        if (rc) {
            if (err) {
                snprintf(err->file, sizeof err->file, "%s", name);
                err->line = line_no;
            }
            return -1;
        }
        p = eol ? eol + 1 : stop;
    }
    return 0;
}

int cc_cases_parse_text(const char *text, const char *name, const cc_case_defaults *def,
                        cc_case_list *out, cc_parse_error *err)
{
    return parse_lines(text, strlen(text), name, def, out, err);
}

static int file_error(cc_parse_error *err, const char *path, const char *fmt, const char *what)
{
    if (err) {
        snprintf(err->file, sizeof err->file, "%s", path);
        err->line = 0;
        err->column = 0;
        snprintf(err->msg, sizeof err->msg, fmt, what);
    }
    return -1;
}

int cc_cases_parse_file(const char *path, const cc_case_defaults *def, cc_case_list *out,
                        cc_parse_error *err)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return file_error(err, path, "%s", "is a folder, not a case file (name the .cases "
                                           "files in it, e.g. folder/*.cases)");
    size_t n = 0;
    char *text = cc_read_file(path, &n); /* to the end: a pipe or /dev/stdin has no size */
    if (!text)
        return file_error(err, path,
                          errno == ENOENT || errno == EACCES ? "cannot open the case file: %s"
                                                             : "cannot read the case file: %s",
                          strerror(errno));
    int rc = parse_lines(text, n, path, def, out, err);
    free(text);
    return rc;
}

int64_t cc_case_largest_tensor(const cc_case *c)
{
    ref_shape out;
    ref_err e = {{0}};
    if (c->op->shape(&c->params, c->n_in, c->shape, &out, &e) != REF_OK)
        return -1;
    int64_t most = ref_numel(&out);
    for (int i = 0; i < c->n_in; i++)
        if (ref_numel(&c->shape[i]) > most)
            most = ref_numel(&c->shape[i]);
    return most;
}
