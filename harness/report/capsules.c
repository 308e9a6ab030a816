#include "harness/report/capsules.h"

#include "core/files.h"
#include "core/grow.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/torchlean.h"
#include "reference/ref.h"

extern const char cc_embedded_capsules_tsv[]; /* providers/capsules.tsv, embedded at build */

void cc_catalog_free(cc_catalog *c)
{
    free(c->v);
    memset(c, 0, sizeof *c);
}

static int one_of(const char *s, const char *const *set)
{
    for (; *set; set++)
        if (strcmp(s, *set) == 0)
            return 1;
    return 0;
}

static const char *const TRUST[] = {"checked", "trustedExternal", NULL};
static const char *const VJP[] = {"none", "torchLeanTape", "backendVJP", NULL};
static const char *const RED[] = {"fixedLeft", "implementationDefined", "notApplicable", NULL};
static const char *const LAYOUT[] = {"canonicalTensor", "flatRowMajor", "libTorchCudaView", NULL};
static const char *const DEVICE[] = {"cpu", "cuda", NULL};
static const char *const SOURCE[] = {"torchlean", "capcheck", "oracle", NULL};

static int is_pin(const char *s)
{
    return strncmp(s, "sha256:", 7) == 0 && strlen(s + 7) == 64 &&
           strspn(s + 7, "0123456789abcdef") == 64;
}

/* The row of this provider, device, op and pin ("" for a built-in's row), or NULL. */
static const cc_capsule *find_pinned(const cc_catalog *c, const char *provider, const char *device,
                                     const char *op, const char *pin)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->v[i].capcheck_provider, provider) == 0 &&
            strcmp(c->v[i].device, device) == 0 && strcmp(c->v[i].op, op) == 0 &&
            strcmp(c->v[i].pin, pin) == 0)
            return &c->v[i];
    return NULL;
}

int cc_catalog_parse(const char *text, const char *name, cc_catalog *out, char *msg, size_t len)
{
    memset(out, 0, sizeof *out);
    cc_torchlean tl; /* the provider column names one of TorchLean's Provider constructors */
    if (cc_torchlean_load(NULL, &tl, msg, len))
        return -1;
    int lineno = 0;
    for (const char *p = text; *p;) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        lineno++;
        char line[1024];
        if (n >= sizeof line) {
            snprintf(msg, len, "%s:%d: line too long", name, lineno);
            goto bad;
        }
        memcpy(line, p, n);
        line[n] = 0;
        if (n && line[n - 1] == '\r')
            line[--n] = 0;
        p = eol ? eol + 1 : p + n;
        if (!line[0] || line[0] == '#')
            continue;
        char *col[12];
        int k = 0;
        for (char *s = line; k < 12;) {
            col[k++] = s;
            char *tab = strchr(s, '\t');
            if (!tab)
                break;
            *tab = 0;
            s = tab + 1;
        }
        if (k != 10 && k != 11) {
            snprintf(msg, len, "%s:%d: %d tab-separated columns, want 10 or 11 (name op provider "
                               "device trust vjpMode reduction layout source capcheck_provider "
                               "[pin])",
                     name, lineno, k);
            goto bad;
        }
        cc_capsule c;
        memset(&c, 0, sizeof c);
        char *dst[10] = {c.name, c.op, c.provider, c.device, c.trust, c.vjp_mode, c.reduction,
                         c.layout, c.source, c.capcheck_provider};
        size_t cap[10] = {sizeof c.name, sizeof c.op, sizeof c.provider, sizeof c.device,
                          sizeof c.trust, sizeof c.vjp_mode, sizeof c.reduction, sizeof c.layout,
                          sizeof c.source, sizeof c.capcheck_provider};
        for (int i = 0; i < 10; i++) {
            if (!col[i][0] || strlen(col[i]) >= cap[i]) {
                snprintf(msg, len, "%s:%d: column %d is %s", name, lineno, i + 1,
                         col[i][0] ? "too long" : "empty");
                goto bad;
            }
            memcpy(dst[i], col[i], strlen(col[i]) + 1);
        }
        if (k == 11 && !is_pin(col[10])) {
            snprintf(msg, len, "%s:%d: capsule %s: the pin is sha256:<64 hex digits> of a plugin "
                               "library, not '%s'",
                     name, lineno, c.name, col[10]);
            goto bad;
        }
        if (k == 11)
            snprintf(c.pin, sizeof c.pin, "%s", col[10]);
        const char *what = !ref_op_find(c.op)               ? "op"
                           : !cc_tl_has_ctor(&tl, "Provider", c.provider) &&
                                     !(strcmp(c.provider, "-") == 0 && strcmp(c.source, "oracle") == 0)
                               ? "provider (one of TorchLean's NN.Backend.Provider constructors; '-' "
                                 "for the oracle)"
                           : !one_of(c.device, DEVICE)      ? "device"
                           : !one_of(c.trust, TRUST)        ? "trust level"
                           : !one_of(c.vjp_mode, VJP)       ? "vjpMode"
                           : !one_of(c.reduction, RED)      ? "reduction policy"
                           : !one_of(c.layout, LAYOUT)      ? "layout"
                           : !one_of(c.source, SOURCE)      ? "source"
                                                            : NULL;
        if (what) {
            snprintf(msg, len, "%s:%d: capsule %s: unknown %s", name, lineno, c.name, what);
            goto bad;
        }
        if (strcmp(ref_op_find(c.op)->name, c.op) != 0) {
            snprintf(msg, len, "%s:%d: capsule %s: op '%s' is spelled '%s' here", name, lineno,
                     c.name, c.op, ref_op_find(c.op)->name);
            goto bad;
        }
        if (cc_catalog_by_name(out, c.name)) {
            snprintf(msg, len, "%s:%d: capsule %s is listed twice", name, lineno, c.name);
            goto bad;
        }
        const cc_capsule *same = find_pinned(out, c.capcheck_provider, c.device, c.op, c.pin);
        if (same && strcmp(c.capcheck_provider, "-") != 0) {
            snprintf(msg, len, "%s:%d: capsule %s maps the same results (%s, %s, %s) as %s", name,
                     lineno, c.name, c.capcheck_provider, c.device, c.op, same->name);
            goto bad;
        }
        cc_capsule *grown = cc_grow(out->v, out->n, &out->cap, sizeof *grown, 128);
        if (!grown) {
            snprintf(msg, len, "out of memory");
            goto bad;
        }
        out->v = grown;
        out->v[out->n++] = c;
    }
    cc_torchlean_free(&tl);
    return 0;
bad:
    cc_torchlean_free(&tl);
    cc_catalog_free(out);
    return -1;
}

int cc_catalog_load(const char *path, cc_catalog *out, char *msg, size_t len)
{
    if (!path)
        return cc_catalog_parse(cc_embedded_capsules_tsv, "embedded:capsules.tsv", out, msg, len);
    char *text = cc_read_file(path, NULL);
    if (!text) {
        snprintf(msg, len, "%s: cannot read the capsule catalog: %s", path, strerror(errno));
        return -1;
    }
    int rc = cc_catalog_parse(text, path, out, msg, len);
    free(text);
    return rc;
}

const cc_capsule *cc_catalog_find(const cc_catalog *c, const char *provider, const char *device,
                                  const char *op)
{
    return find_pinned(c, provider, device, op, "");
}

const cc_capsule *cc_catalog_by_name(const cc_catalog *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->v[i].name, name) == 0)
            return &c->v[i];
    return NULL;
}

const cc_capsule *cc_catalog_resolve(const cc_catalog *c, const cc_provider_identity *id,
                                     const char *provider, const char *device, const char *op,
                                     const char *vjp_mode, cc_capsule *adhoc)
{
    int plugin = id && strcmp(id->kind, "plugin") == 0;
    char pin[72] = "";
    if (plugin)
        snprintf(pin, sizeof pin, "sha256:%s", id->sha256);
    const cc_capsule *row = find_pinned(c, provider, device, op, pin);
    if (row)
        return row;
    const ref_op *o = ref_op_find(op);
    memset(adhoc, 0, sizeof *adhoc);
    snprintf(adhoc->name, sizeof adhoc->name, "%s%s.%s.%s", plugin ? "plugin." : "", provider,
             device, o ? o->report_name : op);
    snprintf(adhoc->op, sizeof adhoc->op, "%s", op);
    /* an implementation TorchLean does not name */
    snprintf(adhoc->provider, sizeof adhoc->provider, "external");
    snprintf(adhoc->device, sizeof adhoc->device, "%s", device);
    snprintf(adhoc->trust, sizeof adhoc->trust, "trustedExternal");
    snprintf(adhoc->vjp_mode, sizeof adhoc->vjp_mode, "%s",
             vjp_mode && vjp_mode[0] ? vjp_mode : "none");
    snprintf(adhoc->reduction, sizeof adhoc->reduction, "implementationDefined");
    snprintf(adhoc->layout, sizeof adhoc->layout, "flatRowMajor");
    snprintf(adhoc->source, sizeof adhoc->source, "adhoc");
    snprintf(adhoc->capcheck_provider, sizeof adhoc->capcheck_provider, "%s", provider);
    return adhoc;
}

/* ---- provider names capcheck does not run --------------------------------------------- */

/* The capsule catalog's built-in capcheck providers for TorchLean provider `ctor`, as "a or b". */
static void catalog_providers(const char *ctor, char *buf, size_t n)
{
    buf[0] = 0;
    cc_catalog cat;
    char msg[256];
    if (cc_catalog_load(NULL, &cat, msg, sizeof msg))
        return;
    for (size_t i = 0; i < cat.n; i++) {
        const cc_capsule *c = &cat.v[i];
        if (strcmp(c->provider, ctor) != 0 || strcmp(c->capcheck_provider, "-") == 0 || c->pin[0])
            continue;
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            seen |= strcmp(cat.v[j].provider, ctor) == 0 && !cat.v[j].pin[0] &&
                    strcmp(cat.v[j].capcheck_provider, c->capcheck_provider) == 0;
        size_t used = strlen(buf);
        if (!seen)
            snprintf(buf + used, n - used, "%s%s", used ? " or " : "", c->capcheck_provider);
    }
    cc_catalog_free(&cat);
}

static int same_ignoring_case(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = *a >= 'A' && *a <= 'Z' ? (char)(*a - 'A' + 'a') : *a;
        char y = *b >= 'A' && *b <= 'Z' ? (char)(*b - 'A' + 'a') : *b;
        if (x != y)
            return 0;
    }
    return *a == *b;
}

void cc_provider_unknown_msg(const char *name, const char *builtin, char *buf, size_t n)
{
    cc_torchlean t;
    char why[256];
    if (cc_torchlean_load(NULL, &t, why, sizeof why)) {
        snprintf(buf, n, "unknown provider '%s' (%s, or --provider-lib PATH)", name, builtin);
        return;
    }
    /* TorchLean's Provider constructor this name spells: the constructor itself or its label
     * (Provider.label: cuBLAS is "cublas", customChip "custom-chip"), in any case */
    const cc_tl_row *prov = cc_tl_find(&t, "inductive", "NN.Backend.Provider");
    const cc_tl_row *label = cc_tl_find(&t, "label", "NN.Backend.Provider.label");
    char ctor[64] = "";
    for (const char *s = prov ? prov->value : ""; *s && !ctor[0];) {
        while (*s == ' ')
            s++;
        size_t item = strcspn(s, " ");
        char c[64], l[64] = "";
        snprintf(c, sizeof c, "%.*s", (int)item, s);
        if (label)
            cc_tl_item(label->value, c, l, sizeof l);
        if (same_ignoring_case(name, c) || (l[0] && same_ignoring_case(name, l)))
            snprintf(ctor, sizeof ctor, "%s", c);
        s += item;
    }
    if (!ctor[0])
        snprintf(buf, n, "unknown provider '%s' (capcheck's: %s, or --provider-lib PATH; "
                         "TorchLean's at %.7s: %s)",
                 name, builtin, t.commit, prov ? prov->value : "");
    else {
        char ours[256];
        catalog_providers(ctor, ours, sizeof ours);
        if (ours[0])
            snprintf(buf, n, "'%s' is TorchLean's provider NN.Backend.Provider.%s; capcheck checks "
                             "its capsules with --provider %s",
                     name, ctor, ours);
        else
            snprintf(buf, n, "'%s' is TorchLean's provider NN.Backend.Provider.%s, which no "
                             "capcheck provider implements: load one with --provider-lib LIB.so "
                             "(capcheck's own: %s)",
                     name, ctor, builtin);
    }
    cc_torchlean_free(&t);
}
