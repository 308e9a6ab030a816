#define _POSIX_C_SOURCE 200809L
#include "core/torchlean.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* providers/torchlean/<commit>.tsv, embedded at build time, NULL-terminated */
extern const char *const cc_torchlean_embedded[];

static const char *const KINDS[] = {"commit",    "date",      "repository", "header",
                                    "module",    "namespace", "inductive",  "alias",
                                    "structure", "def",       "label",      "availability",
                                    "profile",   "layout",    "handler",    "runtimeGuard",
                                    NULL};

void cc_torchlean_free(cc_torchlean *t)
{
    free(t->text);
    memset(t, 0, sizeof *t);
}

int cc_torchlean_parse(const char *text, const char *name, cc_torchlean *out, char *msg,
                       size_t len)
{
    memset(out, 0, sizeof *out);
    out->text = strdup(text);
    if (!out->text) {
        snprintf(msg, len, "out of memory");
        return -1;
    }
    int lineno = 0;
    for (char *p = out->text, *eol; p && *p; p = eol) {
        eol = strchr(p, '\n');
        if (eol)
            *eol++ = 0;
        lineno++;
        size_t n = strlen(p);
        if (n && p[n - 1] == '\r')
            p[n - 1] = 0;
        if (!*p || *p == '#')
            continue;
        char *col[4];
        int k = 0;
        for (char *s = p; k < 4 && s; k++) {
            col[k] = s;
            s = strchr(s, '\t');
            if (s && k < 3)
                *s++ = 0;
            else
                s = NULL;
        }
        int known = 0;
        for (int i = 0; KINDS[i]; i++)
            known |= k == 4 && strcmp(col[0], KINDS[i]) == 0;
        if (!known || !col[1][0] || !col[3][0]) {
            snprintf(msg, len, "%s:%d: want kind, name, source and value separated by tabs, the "
                               "kind one of commit, date, repository, header, module, namespace, "
                               "inductive, alias, structure, def, label, availability, profile, "
                               "layout, handler, runtimeGuard",
                     name, lineno);
            goto bad;
        }
        if (out->n == CC_TL_MAX_ROWS) {
            snprintf(msg, len, "%s:%d: more than %d rows", name, lineno, CC_TL_MAX_ROWS);
            goto bad;
        }
        cc_tl_row *r = &out->rows[out->n++];
        r->kind = col[0];
        r->name = col[1];
        r->source = col[2];
        r->value = col[3];
        r->line = lineno;
        if (strcmp(r->kind, "commit") == 0)
            out->commit = r->value;
        if (strcmp(r->kind, "date") == 0) {
            out->date = r->value;
            out->date_source = r->source;
        }
    }
    if (!out->commit || strlen(out->commit) != 40 || strspn(out->commit, "0123456789abcdef") != 40) {
        snprintf(msg, len, "%s: no commit row with a 40-digit commit", name);
        goto bad;
    }
    int y, m, d;
    char tail;
    if (!out->date || sscanf(out->date, "%4d-%2d-%2d%c", &y, &m, &d, &tail) != 3 ||
        strlen(out->date) != 10 || m < 1 || m > 12 || d < 1 || d > 31) {
        snprintf(msg, len, "%s: no date row with a date YYYY-MM-DD", name);
        goto bad;
    }
    if (!cc_tl_find(out, "inductive", "NN.Backend.BackendOp") ||
        !cc_tl_find(out, "structure", "NN.Backend.KernelCapsule")) {
        snprintf(msg, len, "%s: no BackendOp or KernelCapsule row", name);
        goto bad;
    }
    return 0;
bad:
    cc_torchlean_free(out);
    return -1;
}

/* Newest first: the later date, then the greater commit (a tie between two files of one day
 * still orders the same on every machine). */
static int newer_first(const void *a, const void *b)
{
    const cc_torchlean *x = a, *y = b;
    int c = strcmp(y->date, x->date);
    return c ? c : strcmp(y->commit, x->commit);
}

int cc_torchlean_load_all(cc_torchlean *out, int max, char *msg, size_t len)
{
    int n = 0;
    for (int i = 0; cc_torchlean_embedded[i]; i++) {
        char name[48];
        snprintf(name, sizeof name, "embedded TorchLean data %d", i);
        if (n == max) {
            snprintf(msg, len, "more than %d TorchLean commits embedded", max);
            goto bad;
        }
        if (cc_torchlean_parse(cc_torchlean_embedded[i], name, &out[n], msg, len))
            goto bad;
        n++;
    }
    qsort(out, (size_t)n, sizeof *out, newer_first);
    return n;
bad:
    while (n > 0)
        cc_torchlean_free(&out[--n]);
    return -1;
}

int cc_torchlean_load(const char *prefix, cc_torchlean *out, char *msg, size_t len)
{
    cc_torchlean *all = calloc(CC_TL_MAX_COMMITS, sizeof *all); /* large: kept off the stack */
    if (!all) {
        snprintf(msg, len, "out of memory");
        return -1;
    }
    int n = cc_torchlean_load_all(all, CC_TL_MAX_COMMITS, msg, len), found = -1;
    char have[512] = "";
    for (int i = 0; i < n; i++) {
        size_t used = strlen(have);
        snprintf(have + used, sizeof have - used, "%s%.12s", used ? ", " : "", all[i].commit);
        if (found < 0 && (prefix ? strlen(prefix) >= 7 &&
                                       strncmp(all[i].commit, prefix, strlen(prefix)) == 0
                                 : 1))
            found = i;
    }
    if (found >= 0) {
        *out = all[found];
        memset(&all[found], 0, sizeof all[found]);
    } else if (n >= 0)
        snprintf(msg, len, "no TorchLean data for commit '%s' (at least 7 hex digits of one of: "
                           "%s)",
                 prefix ? prefix : "", have[0] ? have : "none embedded");
    for (int i = 0; i < n; i++)
        cc_torchlean_free(&all[i]);
    free(all);
    return found >= 0 ? 0 : -1;
}

const cc_tl_row *cc_tl_find(const cc_torchlean *t, const char *kind, const char *name)
{
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->rows[i].kind, kind) == 0 && (!name || strcmp(t->rows[i].name, name) == 0))
            return &t->rows[i];
    return NULL;
}

int cc_tl_has_word(const char *list, const char *word)
{
    size_t wl = strlen(word);
    for (const char *s = list; *s;) {
        while (*s == ' ')
            s++;
        size_t item = strcspn(s, " ");
        size_t head = strcspn(s, " (=:");
        if (head > item)
            head = item;
        if (head == wl && strncmp(s, word, wl) == 0)
            return 1;
        s += item;
    }
    return 0;
}

/* The row of `kind` whose full name ends in "." + short (e.g. "Provider"). */
static const cc_tl_row *by_short_name(const cc_torchlean *t, const char *kind, const char *shrt)
{
    size_t sl = strlen(shrt);
    for (int i = 0; i < t->n; i++) {
        const cc_tl_row *r = &t->rows[i];
        size_t nl = strlen(r->name);
        if (strcmp(r->kind, kind) == 0 && nl > sl && r->name[nl - sl - 1] == '.' &&
            strcmp(r->name + nl - sl, shrt) == 0)
            return r;
    }
    return NULL;
}

int cc_tl_has_ctor(const cc_torchlean *t, const char *type, const char *ctor)
{
    const cc_tl_row *r = by_short_name(t, "inductive", type);
    return r && cc_tl_has_word(r->value, ctor);
}

void cc_tl_item(const char *value, const char *key, char *buf, size_t n)
{
    buf[0] = 0;
    size_t kl = strlen(key);
    for (const char *s = value; *s;) {
        while (*s == ' ')
            s++;
        size_t item = strcspn(s, " ");
        if (item > kl && strncmp(s, key, kl) == 0 && s[kl] == '=') {
            snprintf(buf, n, "%.*s", (int)(item - kl - 1), s + kl + 1);
            return;
        }
        s += item;
    }
}

const char *cc_tl_guard(const cc_torchlean *t, const char *provider, const char *device,
                        const char *op, const char *field)
{
    const char *any_op = NULL; /* the provider x device x field row for every op ('*') */
    for (int i = 0; i < t->n; i++) {
        char p[32], d[32], o[32], f[32];
        const cc_tl_row *r = &t->rows[i];
        if (strcmp(r->kind, "runtimeGuard") != 0 ||
            sscanf(r->name, "%31s %31s %31s %31s", p, d, o, f) != 4 || strcmp(p, provider) ||
            strcmp(d, device) || strcmp(f, field))
            continue;
        if (strcmp(o, op) == 0)
            return r->value;
        if (strcmp(o, "*") == 0 && !any_op)
            any_op = r->value;
    }
    return any_op;
}

const char *cc_tl_handler(const cc_torchlean *t, const char *provider, const char *device)
{
    for (int i = 0; i < t->n; i++) {
        char p[32], d[32];
        const cc_tl_row *r = &t->rows[i];
        if (strcmp(r->kind, "handler") == 0 && sscanf(r->name, "%31s %31s", p, d) == 2 &&
            strcmp(p, provider) == 0 && strcmp(d, device) == 0)
            return r->value;
    }
    return NULL;
}

const cc_tl_row *cc_tl_profile(const cc_torchlean *t, const char *device)
{
    for (int i = 0; i < t->n; i++) {
        char d[32];
        if (strcmp(t->rows[i].kind, "profile") != 0)
            continue;
        cc_tl_item(t->rows[i].value, "device", d, sizeof d);
        if (strcmp(d, device) == 0)
            return &t->rows[i];
    }
    return NULL;
}

int cc_tl_layout_admits(const cc_torchlean *t, const char *layout, const char *dtype)
{
    for (int i = 0; i < t->n; i++) {
        const cc_tl_row *r = &t->rows[i];
        const char *dot = strrchr(r->name, '.');
        if (strcmp(r->kind, "layout") != 0 || !dot || strcmp(dot + 1, layout) != 0)
            continue;
        char dtypes[128];
        cc_tl_item(r->value, "dtypes", dtypes, sizeof dtypes);
        if (strcmp(dtypes, "any") == 0)
            return 1;
        size_t dl = strlen(dtype);
        for (const char *s = dtypes; *s;) { /* a comma-separated list */
            size_t item = strcspn(s, ",");
            if (item == dl && strncmp(s, dtype, dl) == 0)
                return 1;
            s += item + (s[item] ? 1 : 0);
        }
        return 0;
    }
    return 1;
}

/* ---- names capcheck does not run ---------------------------------------------------------- */

/* The newest embedded data, or none (then the sentences say less). */
static int newest(cc_torchlean *t)
{
    char msg[256];
    return cc_torchlean_load(NULL, t, msg, sizeof msg) == 0;
}

void cc_device_unknown_msg(const char *name, char *buf, size_t n)
{
    cc_torchlean t;
    if (!newest(&t)) {
        snprintf(buf, n, "unknown device '%s' (capcheck runs cpu and cuda)", name);
        return;
    }
    const cc_tl_row *dev = cc_tl_find(&t, "inductive", "NN.Backend.Device");
    const cc_tl_row *alias = cc_tl_find(&t, "alias", "NN.Backend.Device.gpu");
    char list[256];
    snprintf(list, sizeof list, "%s%s", dev ? dev->value : "", alias ? " gpu" : "");
    if (dev && cc_tl_has_word(dev->value, name))
        snprintf(buf, n, "device '%s' is a TorchLean device (NN.Backend.Device.%s) that no capcheck "
                         "provider runs on: capcheck runs cpu and cuda (gpu is TorchLean's alias "
                         "for cuda)",
                 name, name);
    else
        snprintf(buf, n, "unknown device '%s' (TorchLean's devices at %.7s: %s; capcheck runs cpu "
                         "and cuda)",
                 name, t.commit, list);
    cc_torchlean_free(&t);
}
