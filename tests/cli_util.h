/* Helpers for the tests that drive the capcheck binary (CAPCHECK_BIN): run it through the
 * shell, read and write files in a private temporary folder. Header-only, static. */
#ifndef CAPCHECK_TESTS_CLI_UTIL_H
#define CAPCHECK_TESTS_CLI_UTIL_H

#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

/* Run `sh -c "<prefix> capcheck <args>"`; returns the exit code, with stdout and stderr
 * together in out. prefix may set a folder or environment ("cd X && ", "VAR=1 "). */
static __attribute__((unused)) int cc_t_run(const char *prefix, const char *args, char *out, size_t n)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s%s %s 2>&1", prefix ? prefix : "", CAPCHECK_BIN, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t got = 0, r;
    while (got + 1 < n && (r = fread(out + got, 1, n - 1 - got, p)) > 0)
        got += r;
    out[got] = 0;
    char sink[4096];
    while (fread(sink, 1, sizeof sink, p) > 0)
        ;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The whole file, NUL-terminated (NULL when it cannot be read). */
static __attribute__((unused)) char *cc_t_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *b = malloc(cap + 1);
    while ((got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap)
            b = realloc(b, (cap *= 2) + 1);
    }
    fclose(f);
    b[n] = 0;
    if (len)
        *len = n;
    return b;
}

static __attribute__((unused)) void cc_t_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Text with every line containing `drop` removed (for comparing reports without "timing"). */
static __attribute__((unused)) char *cc_t_without_lines(const char *text, const char *drop)
{
    char *out = malloc(strlen(text) + 1), *o = out;
    for (const char *s = text; *s;) {
        const char *eol = strchr(s, '\n');
        size_t n = eol ? (size_t)(eol - s) + 1 : strlen(s);
        char *line = strndup(s, n);
        if (!strstr(line, drop)) {
            memcpy(o, s, n);
            o += n;
        }
        free(line);
        s += n;
    }
    *o = 0;
    return out;
}

/* Replace the first `from` in the file with `to`; fails the test when there is none. */
static __attribute__((unused)) void cc_t_edit(const char *path, const char *from, const char *to)
{
    char *t = cc_t_slurp(path, NULL);
    assert_non_null(t);
    char *at = strstr(t, from);
    if (!at)
        fail_msg("'%s' not in %s", from, path);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fwrite(t, 1, (size_t)(at - t), f);
    fputs(to, f);
    fputs(at + strlen(from), f);
    fclose(f);
    free(t);
}

/* rm -rf dir (a test's temporary folder): 0 on success, else -1. */
static __attribute__((unused)) int cc_t_remove_dir(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static __attribute__((unused)) int cc_t_count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *s = hay; (s = strstr(s, needle)); s += strlen(needle))
        n++;
    return n;
}

#define expect_in(hay, needle)                                                                \
    do {                                                                                      \
        if (!strstr((hay), (needle)))                                                         \
            fail_msg("expected '%s' in:\n%s", (needle), (hay));                               \
    } while (0)

#endif
