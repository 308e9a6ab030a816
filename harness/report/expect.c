/* Expectations scoped to platforms (expect.h). */
#define _POSIX_C_SOURCE 200809L
#include "harness/report/expect.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/files.h"
#include "core/grow.h"
#include "harness/report/results_read.h"

static const char *const OUTCOME_NAMES[CC_EXPECT_COUNT] = {
    "none", "reproduced", "not-this-time", "did-not-reproduce", "also-seen",
    "broken", "crash", "unexpected"};

const char *cc_expect_outcome_name(cc_expect_outcome o)
{
    return (unsigned)o < CC_EXPECT_COUNT ? OUTCOME_NAMES[o] : "?";
}

int cc_expect_is_failure(cc_expect_outcome o)
{
    return o == CC_EXPECT_BROKEN || o == CC_EXPECT_CRASH || o == CC_EXPECT_UNEXPECTED;
}

void cc_expect_free(cc_expectations *e)
{
    free(e->v);
    memset(e, 0, sizeof *e);
}

/* A platform key: "<kind>:<name>", lower-case letters, digits and + . _ - */
static int valid_key(const char *k)
{
    const char *colon = strchr(k, ':');
    if (!colon || colon == k || !colon[1] || strlen(k) >= CC_PLATFORM_KEY_MAX)
        return 0;
    for (const char *s = k; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || strchr(":+._-", *s)))
            return 0;
    return strchr(colon + 1, ':') == NULL;
}

typedef struct {
    int active;
    cc_result_status status;
    int placement; /* placement-sensitive: a pass with the flag */
    int n_keys;
    char keys[CC_EXPECT_MAX_KEYS][CC_PLATFORM_KEY_MAX];
    int intermittent;
    char where[280];
} directive;

#define PLACEMENT_SEEN "placement-sensitive"

static int say(cc_parse_error *err, const char *name, int line, int column, const char *fmt,
               const char *arg)
{
    snprintf(err->file, sizeof err->file, "%s", name);
    err->line = line;
    err->column = column;
    snprintf(err->msg, sizeof err->msg, fmt, arg);
    return -1;
}

/* "#! seen STATUS on KEY... [intermittent]" (text after "#!"). */
static int parse_directive(const char *text, const char *name, int lineno, directive *d,
                           cc_parse_error *err)
{
    memset(d, 0, sizeof *d);
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", text);
    char *save = NULL, *w = strtok_r(buf, " \t\r", &save);
    int col = 3;
    if (!w || strcmp(w, "seen") != 0)
        return say(err, name, lineno, col,
                   "unknown directive '%s' (the one directive is '#! seen STATUS on KEY...')",
                   w ? w : "");
    w = strtok_r(NULL, " \t\r", &save);
    d->placement = w && strcmp(w, PLACEMENT_SEEN) == 0;
    if (d->placement)
        d->status = CC_RES_PASS;
    else if (!w || (cc_result_status_parse(w, &d->status) != 0) || d->status == CC_RES_PASS ||
             d->status == CC_RES_ERROR)
        return say(err, name, lineno, col,
                   "'#! seen' wants a status: fail, crash, timeout, unsupported, "
                   "nondeterministic or placement-sensitive, not '%s'",
                   w ? w : "");
    w = strtok_r(NULL, " \t\r", &save);
    if (!w || strcmp(w, "on") != 0)
        return say(err, name, lineno, col, "'#! seen %s' wants 'on KEY...' next",
                   d->placement ? PLACEMENT_SEEN : cc_result_status_name(d->status));
    while ((w = strtok_r(NULL, " \t\r,", &save))) {
        if (strcmp(w, "intermittent") == 0) {
            d->intermittent = 1;
            continue;
        }
        if (!valid_key(w))
            return say(err, name, lineno, col,
                       "'%s' is not a platform key (cpu:amx, cpu:avx2, cuda:sm90, ...: lower case "
                       "letters, digits and + . _ -, one ':')",
                       w);
        if (d->n_keys == CC_EXPECT_MAX_KEYS)
            return say(err, name, lineno, col, "more than %s platform keys on one directive",
                       "12");
        snprintf(d->keys[d->n_keys++], CC_PLATFORM_KEY_MAX, "%s", w);
    }
    if (!d->n_keys)
        return say(err, name, lineno, col, "'#! seen ... on' names no platform key%s", "");
    d->active = 1;
    snprintf(d->where, sizeof d->where, "%.250s:%d", name, lineno);
    return 0;
}

static int add(cc_expectations *out, const directive *d, const cc_case *c)
{
    cc_expectation *grown = cc_grow(out->v, out->n, &out->cap, sizeof *grown, 16);
    if (!grown)
        return -1;
    out->v = grown;
    cc_expectation *e = &out->v[out->n++];
    memset(e, 0, sizeof *e);
    cc_case_print(c, e->line, sizeof e->line);
    e->status = d->status;
    e->placement = d->placement;
    e->n_keys = d->n_keys;
    memcpy(e->keys, d->keys, sizeof e->keys);
    e->intermittent = d->intermittent;
    memcpy(e->where, d->where, sizeof e->where);
    return 0;
}

int cc_expect_parse_text(const char *text, const char *name, const cc_case_defaults *def,
                         cc_expectations *out, cc_parse_error *err)
{
    memset(err, 0, sizeof *err);
    directive d;
    memset(&d, 0, sizeof d);
    int lineno = 0;
    for (const char *s = text; *s;) {
        size_t len = strcspn(s, "\n");
        lineno++;
        char line[CC_CASE_LINE_MAX + 2];
        if (len > CC_CASE_LINE_MAX)
            return say(err, name, lineno, 1, "a line longer than %s characters", "1024");
        memcpy(line, s, len);
        line[len] = 0;
        s += len + (s[len] == '\n');
        const char *t = line + strspn(line, " \t");
        if (strncmp(t, "#!", 2) == 0) {
            if (parse_directive(t + 2, name, lineno, &d, err))
                return -1;
            continue;
        }
        if (!d.active || !*t || *t == '#' || *t == '\r')
            continue;
        /* the line alone expands as it does in the file: a case never depends on the others */
        cc_case_list one = {0};
        cc_parse_error e1;
        if (cc_cases_parse_text(line, name, def, &one, &e1)) {
            *err = e1;
            err->line = lineno;
            cc_case_list_free(&one);
            return -1;
        }
        for (size_t i = 0; i < one.n; i++)
            if (add(out, &d, &one.v[i])) {
                cc_case_list_free(&one);
                return say(err, name, lineno, 1, "out of memory%s", "");
            }
        cc_case_list_free(&one);
    }
    return 0;
}

int cc_expect_load(const char *path, const cc_case_defaults *def, cc_expectations *out,
                   cc_parse_error *err)
{
    char *text = cc_read_file(path, NULL);
    if (!text) {
        memset(err, 0, sizeof *err);
        snprintf(err->file, sizeof err->file, "%s", path);
        snprintf(err->msg, sizeof err->msg, "cannot read: %s", strerror(errno));
        return -1;
    }
    int rc = cc_expect_parse_text(text, path, def, out, err);
    free(text);
    return rc;
}

const cc_expectation *cc_expect_find(const cc_expectations *e, const char *line)
{
    for (size_t i = 0; e && i < e->n; i++)
        if (strcmp(e->v[i].line, line) == 0)
            return &e->v[i];
    return NULL;
}

/* "fail on cpu:amx cpu:avx512-fp16, cases/x.cases:8" */
static void seen_text(const cc_expectation *e, char *buf, size_t n)
{
    size_t used = (size_t)snprintf(buf, n, "%s on",
                                   e->placement ? PLACEMENT_SEEN : cc_result_status_name(e->status));
    for (int k = 0; k < e->n_keys && used < n; k++)
        used += (size_t)snprintf(buf + used, n - used, " %s", e->keys[k]);
    if (used < n)
        snprintf(buf + used, n - used, "%s, %s", e->intermittent ? " (intermittent)" : "",
                 e->where);
}

cc_expect_outcome cc_expect_judge(const cc_expectation *e, const cc_result *r, char *msg,
                                  size_t len)
{
    const char *key = r->platform[0] ? r->platform : "an unnamed platform";
    int placement = r->status == CC_RES_PASS && r->placement_sensitive;
    const char *got = placement ? PLACEMENT_SEEN : cc_result_status_name(r->status);
    int crashed = r->status == CC_RES_CRASH || r->status == CC_RES_TIMEOUT;
    msg[0] = 0;
    if (!e) {
        if (r->status == CC_RES_PASS)
            return CC_EXPECT_NONE;
        snprintf(msg, len, "%s on %s where nothing is expected", got, key);
        return crashed ? CC_EXPECT_CRASH : CC_EXPECT_UNEXPECTED;
    }
    char seen[600];
    seen_text(e, seen, sizeof seen);
    int listed = 0;
    for (int k = 0; k < e->n_keys; k++)
        listed |= strcmp(e->keys[k], r->platform) == 0;
    /* the result is what was seen: the status, and for placement-sensitive a flagged pass */
    int same = r->status == e->status && placement == e->placement;
    if (listed && same) {
        snprintf(msg, len, "%s on %s, as seen (%s)", got, key, seen);
        return CC_EXPECT_REPRODUCED;
    }
    if (listed && e->intermittent && r->status == CC_RES_PASS) {
        snprintf(msg, len, "passed on %s this time (intermittent; seen %s)", key, seen);
        return CC_EXPECT_NOT_THIS_TIME;
    }
    if (listed) {
        snprintf(msg, len,
                 "%s on %s, where it was seen %s: the kernel changed; update the directive "
                 "and the table of docs/aten.md",
                 got, key, seen);
        return CC_EXPECT_BROKEN;
    }
    if (r->status == CC_RES_PASS && !same) {
        snprintf(msg, len, "did not reproduce on %s (seen %s)", key, seen);
        return CC_EXPECT_NOT_REPRODUCED;
    }
    if (crashed) { /* even where a crash was seen elsewhere: a crash is never news to wave by */
        snprintf(msg, len, "%s on %s, where it was not seen (seen %s)", got, key, seen);
        return CC_EXPECT_CRASH;
    }
    if (same) {
        snprintf(msg, len, "%s on %s too, which the directive does not list (seen %s): add %s",
                 got, key, seen, key);
        return CC_EXPECT_ALSO_SEEN;
    }
    snprintf(msg, len, "%s on %s (seen %s)", got, key, seen);
    return CC_EXPECT_UNEXPECTED;
}
