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
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

/* A cc_t_run prefix that puts the binary's folder first on PATH: capcheck then prints its repro
 * lines with a bare `capcheck` (harness/report/repro.h), as an installed capcheck does. */
#define CC_T_ON_PATH "PATH=\"$(dirname '" CAPCHECK_BIN "'):$PATH\" "
#include "core/json.h"

/* Run `sh -c "<command> 2>&1"`; returns the exit code, with stdout and stderr together in out. */
static __attribute__((unused)) int cc_t_sh(const char *command, char *out, size_t n)
{
    char cmd[10000];
    snprintf(cmd, sizeof cmd, "%s 2>&1", command);
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

/* Run `sh -c "<prefix> capcheck <args>"`; returns the exit code, with stdout and stderr
 * together in out. prefix may set a folder or environment ("cd X && ", "VAR=1 "). */
static __attribute__((unused)) int cc_t_run(const char *prefix, const char *args, char *out, size_t n)
{
    char cmd[9900];
    snprintf(cmd, sizeof cmd, "%s%s %s", prefix ? prefix : "", CAPCHECK_BIN, args);
    return cc_t_sh(cmd, out, n);
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

/* The JSON file at path, parsed; fails the test when it cannot be read or parsed. */
static __attribute__((unused)) cc_json *cc_t_json_file(const char *path)
{
    char msg[256];
    size_t n;
    char *text = cc_t_slurp(path, &n);
    if (!text)
        fail_msg("cannot read %s", path);
    cc_json *j = cc_json_parse(text, n, msg, sizeof msg);
    free(text);
    if (!j)
        fail_msg("%s: %s", path, msg);
    return j;
}

static __attribute__((unused)) void cc_t_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The whole file root/dir/name, NUL-terminated; fails the test when it cannot be read. */
static __attribute__((unused)) char *cc_t_slurp_in(const char *root, const char *dir,
                                                   const char *name)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s/%s", root, dir, name);
    char *t = cc_t_slurp(path, NULL);
    if (!t)
        fail_msg("cannot read %s", path);
    return t;
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

/* text with its first `from` replaced by `to` (malloc'd); fails the test when there is none. */
static __attribute__((unused)) char *cc_t_replace_first(const char *text, const char *from,
                                                        const char *to)
{
    const char *at = strstr(text, from);
    if (!at)
        fail_msg("'%s' not in the text", from);
    size_t head = (size_t)(at - text), n_to = strlen(to), n_from = strlen(from);
    size_t tail = strlen(at + n_from);
    char *out = malloc(head + n_to + tail + 1);
    assert_non_null(out);
    memcpy(out, text, head);
    memcpy(out + head, to, n_to);
    memcpy(out + head + n_to, at + n_from, tail + 1);
    return out;
}

/* Replace the first `from` in the file with `to`; fails the test when there is none. */
static __attribute__((unused)) void cc_t_edit(const char *path, const char *from, const char *to)
{
    char *t = cc_t_slurp(path, NULL);
    assert_non_null(t);
    if (!strstr(t, from))
        fail_msg("'%s' not in %s", from, path);
    char *edited = cc_t_replace_first(t, from, to);
    cc_t_write(path, edited);
    free(edited);
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

static __attribute__((unused)) long cc_t_count_lines(const char *path)
{
    size_t n;
    char *t = cc_t_slurp(path, &n);
    if (!t)
        return 0;
    long lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += t[i] == '\n';
    free(t);
    return lines;
}

/* Start capcheck with `args` (NULL-terminated, after the program name; the environment is this
 * process's), held after exactly `after` forward calls by the mutants plugin's hold
 * (tests/plugins/mutants.c: the run must use that plugin, make one forward call per case and
 * give a --timeout longer than the test takes), and SIGKILL it once each of its `workers`
 * workers is held and its journal (dir/results.jsonl) holds the `after` records of the cases
 * that finished: the state a kill at that moment leaves, on any machine, fast or loaded. Fails
 * the test when the run ends by itself, journals another number of records or leaves a report.
 * Returns the records journaled (`after`). */
static __attribute__((unused)) long cc_t_run_and_kill(const char *dir, const char *const *args,
                                                      long after, int workers)
{
    char journal[600], report[600], hold[620], count[32];
    snprintf(journal, sizeof journal, "%s/results.jsonl", dir);
    snprintf(report, sizeof report, "%s/report.json", dir);
    snprintf(hold, sizeof hold, "%s.hold", dir);
    snprintf(count, sizeof count, "%ld", after);
    remove(hold);
    const char *argv[64] = {CAPCHECK_BIN};
    for (int i = 0; args[i] && i < 62; i++)
        argv[i + 1] = args[i];
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("MUTANTS_HOLD_FILE", hold, 1);
        setenv("MUTANTS_HOLD_AFTER", count, 1);
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        execv(CAPCHECK_BIN, (char *const *)argv);
        _exit(127);
    }
    /* no clock: the run cannot go on once every worker is held (CTest's timeout ends a hang) */
    int st = 0;
    for (;;) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            fail_msg("the run ended (%s %d) before it was held after %ld calls",
                     WIFEXITED(st) ? "exit" : "signal",
                     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), after);
        char *h = cc_t_slurp(hold, NULL);
        int held = h ? cc_t_count(h, "h") : 0;
        free(h);
        if (held >= workers && cc_t_count_lines(journal) >= after)
            break;
        struct timespec ms = {0, 2000000L};
        nanosleep(&ms, NULL);
    }
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    long got = cc_t_count_lines(journal);
    assert_int_equal(got, after);             /* the finished cases, and nothing else */
    assert_int_equal(access(report, F_OK), -1); /* no report from an interrupted run */
    remove(hold);
    return got;
}

#define expect_in(hay, needle)                                                                \
    do {                                                                                      \
        if (!strstr((hay), (needle)))                                                         \
            fail_msg("expected '%s' in:\n%s", (needle), (hay));                               \
    } while (0)

#endif
