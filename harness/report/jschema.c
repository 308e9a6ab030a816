#define _POSIX_C_SOURCE 200809L
#include "harness/report/jschema.h"

#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const cc_json *root;
    char *msg;
    size_t len;
    int schema_error;
} ctx;

static int schema_bad(ctx *c, const char *path, const char *what)
{
    snprintf(c->msg, c->len, "schema error at %s: %s", path, what);
    c->schema_error = 1;
    return -1;
}

static int doc_bad(ctx *c, const char *path, const char *what)
{
    snprintf(c->msg, c->len, "%s: %s", path, what);
    return -1;
}

static const char *type_name(const cc_json *v)
{
    switch (v->type) {
    case CC_JSON_NULL: return "null";
    case CC_JSON_FALSE:
    case CC_JSON_TRUE: return "boolean";
    case CC_JSON_NUMBER: return "number";
    case CC_JSON_STRING: return "string";
    case CC_JSON_ARRAY: return "array";
    default: return "object";
    }
}

static int is_integer(const cc_json *v)
{
    return v->type == CC_JSON_NUMBER && !strpbrk(v->text, ".eE");
}

static int has_type(const cc_json *v, const char *t)
{
    if (strcmp(t, "integer") == 0)
        return is_integer(v);
    return strcmp(type_name(v), t) == 0;
}

static int equal(const cc_json *a, const cc_json *b)
{
    int ab = a->type == CC_JSON_TRUE || a->type == CC_JSON_FALSE;
    if (a->type != b->type)
        return 0;
    if (ab || a->type == CC_JSON_NULL)
        return 1;
    if (a->type == CC_JSON_NUMBER)
        return a->num == b->num;
    if (a->type == CC_JSON_STRING)
        return strcmp(a->text, b->text) == 0;
    const cc_json *x = a->child, *y = b->child;
    for (; x && y; x = x->next, y = y->next) {
        if (a->type == CC_JSON_OBJECT) {
            const cc_json *m = cc_json_get(b, x->key);
            if (!m || !equal(x, m))
                return 0;
        } else if (!equal(x, y))
            return 0;
    }
    return !x && !y;
}

static int validate(ctx *c, const cc_json *s, const cc_json *v, const char *path, int depth);

static const cc_json *resolve_ref(ctx *c, const char *ref, const char *path)
{
    if (strncmp(ref, "#/$defs/", 8) != 0) {
        schema_bad(c, path, "only \"$ref\": \"#/$defs/NAME\" is supported");
        return NULL;
    }
    const cc_json *defs = cc_json_get(c->root, "$defs");
    const cc_json *t = defs ? cc_json_get(defs, ref + 8) : NULL;
    if (!t)
        schema_bad(c, path, "\"$ref\" names a definition that does not exist");
    return t;
}

/* Every keyword of schema object s is one this validator knows. */
static int known_keywords(ctx *c, const cc_json *s, const char *path)
{
    static const char *const known[] = {
        "type", "properties", "required", "additionalProperties", "items", "enum", "const",
        "minimum", "maximum", "minLength", "pattern", "minItems", "maxItems", "anyOf", "$ref",
        "$schema", "$id", "$defs", "title", "description", "$comment", NULL};
    for (const cc_json *k = s->child; k; k = k->next) {
        int ok = 0;
        for (int i = 0; known[i] && !ok; i++)
            ok = strcmp(k->key, known[i]) == 0;
        if (!ok) {
            char buf[512];
            snprintf(buf, sizeof buf, "keyword \"%s\" is not supported by this validator", k->key);
            return schema_bad(c, path, buf);
        }
    }
    return 0;
}

/* The keywords that hold for a value of any type: $ref, type, const, enum, anyOf. */
static int validate_any_type(ctx *c, const cc_json *s, const cc_json *v, const char *path,
                             int depth)
{
    char buf[512];
    const cc_json *kw;
    if ((kw = cc_json_get(s, "$ref"))) {
        if (kw->type != CC_JSON_STRING)
            return schema_bad(c, path, "\"$ref\" is a string");
        const cc_json *t = resolve_ref(c, kw->text, path);
        if (!t || validate(c, t, v, path, depth + 1))
            return -1;
    }
    if ((kw = cc_json_get(s, "type"))) {
        int ok = 0;
        if (kw->type == CC_JSON_STRING)
            ok = has_type(v, kw->text);
        else if (kw->type == CC_JSON_ARRAY)
            for (const cc_json *t = kw->child; t && !ok; t = t->next) {
                if (t->type != CC_JSON_STRING)
                    return schema_bad(c, path, "\"type\" lists strings");
                ok = has_type(v, t->text);
            }
        else
            return schema_bad(c, path, "\"type\" is a string or a list of strings");
        if (!ok) {
            snprintf(buf, sizeof buf, "a %s where the schema wants another type", type_name(v));
            return doc_bad(c, path, buf);
        }
    }
    if ((kw = cc_json_get(s, "const")) && !equal(kw, v))
        return doc_bad(c, path, "not the value the schema fixes (const)");
    if ((kw = cc_json_get(s, "enum"))) {
        if (kw->type != CC_JSON_ARRAY)
            return schema_bad(c, path, "\"enum\" is a list");
        int ok = 0;
        for (const cc_json *e = kw->child; e && !ok; e = e->next)
            ok = equal(e, v);
        if (!ok) {
            snprintf(buf, sizeof buf, "%s%s%s is not one of the allowed values",
                     v->type == CC_JSON_STRING ? "\"" : "", v->text ? v->text : type_name(v),
                     v->type == CC_JSON_STRING ? "\"" : "");
            return doc_bad(c, path, buf);
        }
    }
    if ((kw = cc_json_get(s, "anyOf"))) {
        if (kw->type != CC_JSON_ARRAY || !kw->child)
            return schema_bad(c, path, "\"anyOf\" is a non-empty list");
        int ok = 0;
        for (const cc_json *alt = kw->child; alt && !ok; alt = alt->next) {
            ok = validate(c, alt, v, path, depth + 1) == 0;
            if (c->schema_error)
                return -1;
        }
        if (!ok)
            return doc_bad(c, path, "matches none of the alternatives (anyOf)");
    }
    return 0;
}

/* minimum, maximum of a number. */
static int validate_number(ctx *c, const cc_json *s, const cc_json *v, const char *path)
{
    const cc_json *kw;
    if ((kw = cc_json_get(s, "minimum")) && kw->type == CC_JSON_NUMBER && v->num < kw->num)
        return doc_bad(c, path, "below the minimum");
    if ((kw = cc_json_get(s, "maximum")) && kw->type == CC_JSON_NUMBER && v->num > kw->num)
        return doc_bad(c, path, "above the maximum");
    return 0;
}

/* minLength, pattern of a string. */
static int validate_string(ctx *c, const cc_json *s, const cc_json *v, const char *path)
{
    const cc_json *kw;
    if ((kw = cc_json_get(s, "minLength")) && kw->type == CC_JSON_NUMBER &&
        (double)strlen(v->text) < kw->num)
        return doc_bad(c, path, "shorter than minLength");
    if ((kw = cc_json_get(s, "pattern"))) {
        if (kw->type != CC_JSON_STRING)
            return schema_bad(c, path, "\"pattern\" is a string");
        regex_t re;
        if (regcomp(&re, kw->text, REG_EXTENDED | REG_NOSUB))
            return schema_bad(c, path, "\"pattern\" is not a POSIX extended regex");
        int m = regexec(&re, v->text, 0, NULL, 0);
        regfree(&re);
        if (m) {
            char buf[512];
            snprintf(buf, sizeof buf, "\"%.200s\" does not match the pattern %.200s", v->text,
                     kw->text);
            return doc_bad(c, path, buf);
        }
    }
    return 0;
}

/* minItems, maxItems, items of an array. */
static int validate_array(ctx *c, const cc_json *s, const cc_json *v, const char *path,
                          int depth)
{
    const cc_json *kw;
    size_t n = 0;
    for (const cc_json *e = v->child; e; e = e->next)
        n++;
    if ((kw = cc_json_get(s, "minItems")) && kw->type == CC_JSON_NUMBER && (double)n < kw->num)
        return doc_bad(c, path, "fewer items than minItems");
    if ((kw = cc_json_get(s, "maxItems")) && kw->type == CC_JSON_NUMBER && (double)n > kw->num)
        return doc_bad(c, path, "more items than maxItems");
    if ((kw = cc_json_get(s, "items"))) {
        char sub[1024];
        size_t i = 0;
        for (const cc_json *e = v->child; e; e = e->next, i++) {
            snprintf(sub, sizeof sub, "%s[%zu]", path, i);
            if (validate(c, kw, e, sub, depth + 1))
                return -1;
        }
    }
    return 0;
}

/* required, properties, additionalProperties of an object. */
static int validate_object(ctx *c, const cc_json *s, const cc_json *v, const char *path,
                           int depth)
{
    const cc_json *kw;
    const cc_json *props = cc_json_get(s, "properties");
    if (props && props->type != CC_JSON_OBJECT)
        return schema_bad(c, path, "\"properties\" is an object");
    if ((kw = cc_json_get(s, "required"))) {
        if (kw->type != CC_JSON_ARRAY)
            return schema_bad(c, path, "\"required\" is a list");
        for (const cc_json *r = kw->child; r; r = r->next) {
            if (r->type != CC_JSON_STRING)
                return schema_bad(c, path, "\"required\" lists strings");
            if (!cc_json_get(v, r->text)) {
                char buf[512];
                snprintf(buf, sizeof buf, "lacks the required member \"%s\"", r->text);
                return doc_bad(c, path, buf);
            }
        }
    }
    const cc_json *extra = cc_json_get(s, "additionalProperties");
    for (const cc_json *m = v->child; m; m = m->next) {
        char sub[1024];
        snprintf(sub, sizeof sub, "%s.%s", path, m->key);
        const cc_json *ps = props ? cc_json_get(props, m->key) : NULL;
        if (ps) {
            if (validate(c, ps, m, sub, depth + 1))
                return -1;
        } else if (extra) {
            if (extra->type == CC_JSON_FALSE)
                return doc_bad(c, sub, "a member the schema does not allow");
            if (validate(c, extra, m, sub, depth + 1))
                return -1;
        }
    }
    return 0;
}

static int validate(ctx *c, const cc_json *s, const cc_json *v, const char *path, int depth)
{
    if (depth > 64)
        return schema_bad(c, path, "schema nesting deeper than 64 (a $ref cycle?)");
    if (s->type == CC_JSON_TRUE)
        return 0;
    if (s->type == CC_JSON_FALSE)
        return doc_bad(c, path, "no value is allowed here");
    if (s->type != CC_JSON_OBJECT)
        return schema_bad(c, path, "a schema is an object or a boolean");
    if (known_keywords(c, s, path) || validate_any_type(c, s, v, path, depth))
        return -1;
    switch (v->type) {
    case CC_JSON_NUMBER: return validate_number(c, s, v, path);
    case CC_JSON_STRING: return validate_string(c, s, v, path);
    case CC_JSON_ARRAY: return validate_array(c, s, v, path, depth);
    case CC_JSON_OBJECT: return validate_object(c, s, v, path, depth);
    default: return 0;
    }
}

int cc_jschema_validate(const cc_json *schema, const cc_json *doc, char *msg, size_t len)
{
    ctx c = {schema, msg, len, 0};
    msg[0] = 0;
    if (validate(&c, schema, doc, "$", 0) == 0)
        return 0;
    return c.schema_error ? 2 : 1;
}

static cc_json *load(const char *path, char *msg, size_t len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(msg, len, "%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0, got;
    char *b = malloc(cap);
    while (b && (got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb)
                free(b);
            b = nb;
        }
    }
    fclose(f);
    if (!b) {
        snprintf(msg, len, "out of memory");
        return NULL;
    }
    char why[256];
    cc_json *j = cc_json_parse(b, n, why, sizeof why);
    free(b);
    if (!j)
        snprintf(msg, len, "%s is not JSON (%s)", path, why);
    return j;
}

extern const char cc_embedded_report_schema[]; /* reports/schema.json, built in */

int cc_jschema_validate_files(const char *schema_path, const char *doc_path, char *msg,
                              size_t len)
{
    cc_json *s;
    if (schema_path)
        s = load(schema_path, msg, len);
    else {
        char why[256];
        s = cc_json_parse(cc_embedded_report_schema, strlen(cc_embedded_report_schema), why,
                          sizeof why);
        if (!s)
            snprintf(msg, len, "the built-in schema is not JSON (%s)", why);
        schema_path = CC_SCHEMA_BUILT_IN;
    }
    if (!s)
        return 2;
    cc_json *d = load(doc_path, msg, len);
    if (!d) {
        cc_json_free(s);
        return 2;
    }
    char inner[1024];
    int rc = cc_jschema_validate(s, d, inner, sizeof inner);
    if (rc)
        snprintf(msg, len, "%s against %s: %s", doc_path, schema_path, inner);
    cc_json_free(s);
    cc_json_free(d);
    return rc;
}
