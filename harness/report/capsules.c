#include "harness/report/capsules.h"

#include "core/files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
static const char *const SOURCE[] = {"torchlean", "capcheck", NULL};

int cc_catalog_parse(const char *text, const char *name, cc_catalog *out, char *msg, size_t len)
{
    memset(out, 0, sizeof *out);
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
        char *col[11];
        int k = 0;
        for (char *s = line; k < 11;) {
            col[k++] = s;
            char *tab = strchr(s, '\t');
            if (!tab)
                break;
            *tab = 0;
            s = tab + 1;
        }
        if (k != 10) {
            snprintf(msg, len, "%s:%d: %d tab-separated columns, want 10 (name op provider device "
                               "trust vjpMode reduction layout source capcheck_provider)",
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
        const char *what = !ref_op_find(c.op)               ? "op"
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
        const cc_capsule *same = cc_catalog_find(out, c.capcheck_provider, c.device, c.op);
        if (same) {
            snprintf(msg, len, "%s:%d: capsule %s maps the same results (%s, %s, %s) as %s", name,
                     lineno, c.name, c.capcheck_provider, c.device, c.op, same->name);
            goto bad;
        }
        if (out->n == out->cap) {
            size_t nc = out->cap ? 2 * out->cap : 128;
            cc_capsule *v = realloc(out->v, nc * sizeof *v);
            if (!v) {
                snprintf(msg, len, "out of memory");
                goto bad;
            }
            out->v = v;
            out->cap = nc;
        }
        out->v[out->n++] = c;
    }
    return 0;
bad:
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
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->v[i].capcheck_provider, provider) == 0 &&
            strcmp(c->v[i].device, device) == 0 && strcmp(c->v[i].op, op) == 0)
            return &c->v[i];
    return NULL;
}

const cc_capsule *cc_catalog_by_name(const cc_catalog *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->v[i].name, name) == 0)
            return &c->v[i];
    return NULL;
}

const cc_capsule *cc_catalog_resolve(const cc_catalog *c, const char *provider, const char *device,
                                     const char *op, const char *vjp_mode, cc_capsule *adhoc)
{
    const cc_capsule *row = cc_catalog_find(c, provider, device, op);
    if (row)
        return row;
    const ref_op *o = ref_op_find(op);
    memset(adhoc, 0, sizeof *adhoc);
    snprintf(adhoc->name, sizeof adhoc->name, "%s.%s.%s", provider, device,
             o ? o->report_name : op);
    snprintf(adhoc->op, sizeof adhoc->op, "%s", op);
    snprintf(adhoc->provider, sizeof adhoc->provider, "%s", provider);
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
