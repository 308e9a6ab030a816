#define _XOPEN_SOURCE 700 /* realpath */
#include "harness/report/repro.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/json.h"
#include "harness/case/values.h"

extern char **environ;

void cc_shell_quote(const char *s, char *buf, size_t n)
{
    if (!n)
        return;
    int safe = *s != 0;
    for (const char *p = s; *p && safe; p++)
        safe = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:,=+-@%",
                      *p) != NULL;
    if (safe) {
        snprintf(buf, n, "%s", s);
        return;
    }
    size_t o = 0;
    buf[o++] = '\'';
    for (const char *p = s; *p && o + 5 < n; p++) {
        if (*p == '\'') { /* close, an escaped quote, reopen */
            memcpy(buf + o, "'\\''", 4);
            o += 4;
        } else
            buf[o++] = *p;
    }
    if (o + 1 < n)
        buf[o++] = '\'';
    buf[o < n ? o : n - 1] = 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The variables a repro line carries as assignments: the run's CAPCHECK_* (the math modes go
 * as options; --shard auto's scheduling variables choose which cases run, not how one runs)
 * and the ones that select ATen's and oneDNN's CPU kernels. */
static int carried(const char *entry)
{
    static const char *const not_carried[] = {"CAPCHECK_TF32=", "CAPCHECK_DETERMINISTIC=",
                                              "CAPCHECK_ATTENTION=", "CAPCHECK_SHARD_",
                                              "CAPCHECK_JOB_"};
    for (size_t k = 0; k < sizeof not_carried / sizeof not_carried[0]; k++)
        if (strncmp(entry, not_carried[k], strlen(not_carried[k])) == 0)
            return 0;
    return strncmp(entry, "CAPCHECK_", 9) == 0 ||
           strncmp(entry, "ATEN_CPU_CAPABILITY=", 20) == 0 ||
           strncmp(entry, "ONEDNN_MAX_CPU_ISA=", 19) == 0;
}

/* Append " word" (or "word" to an empty buf); a word that does not fit whole is left out. */
static void append(char *buf, size_t n, const char *word)
{
    size_t used = strlen(buf), len = strlen(word), sep = used ? 1 : 0;
    if (used + sep + len + 1 > n)
        return;
    if (sep)
        buf[used++] = ' ';
    memcpy(buf + used, word, len + 1);
}

/* The word that starts a repro command, as a shell word: "capcheck" when the first capcheck on
 * PATH is this very executable, else this executable's absolute path, so that a line pasted
 * into a fresh shell runs the capcheck that printed it. */
static void this_program(char *buf, size_t n)
{
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        snprintf(buf, n, "capcheck");
        return;
    }
    exe[len] = 0;
    struct stat self;
    const char *path = getenv("PATH");
    if (path && stat(exe, &self) == 0)
        for (const char *d = path; *d;) {
            size_t dl = strcspn(d, ":");
            char cand[PATH_MAX];
            struct stat st;
            snprintf(cand, sizeof cand, "%.*s/capcheck", (int)dl, dl ? d : ".");
            if (dl && access(cand, X_OK) == 0 && stat(cand, &st) == 0) {
                if (st.st_dev == self.st_dev && st.st_ino == self.st_ino) {
                    snprintf(buf, n, "capcheck");
                    return;
                }
                break; /* another capcheck answers to the bare name */
            }
            d += dl + (d[dl] == ':');
        }
    cc_shell_quote(exe, buf, n);
}

void cc_repro_collect(cc_repro *r, const char *provider, const char *plugin_path, double timeout)
{
    memset(r, 0, sizeof *r);
    this_program(r->program, sizeof r->program);
    const char *picked[64];
    size_t n = 0;
    for (char **e = environ; e && *e && n < 64; e++)
        if (carried(*e))
            picked[n++] = *e;
    qsort(picked, n, sizeof *picked, name_cmp);
    for (size_t k = 0; k < n; k++) {
        const char *eq = strchr(picked[k], '=');
        char value[256], word[320];
        cc_shell_quote(eq + 1, value, sizeof value);
        snprintf(word, sizeof word, "%.*s=%s", (int)(eq - picked[k]), picked[k], value);
        append(r->env, sizeof r->env, word);
    }
    char word[PATH_MAX + 32], quoted[PATH_MAX + 16];
    if (plugin_path) {
        char abs[PATH_MAX];
        cc_shell_quote(realpath(plugin_path, abs) ? abs : plugin_path, quoted, sizeof quoted);
        snprintf(word, sizeof word, "--provider-lib %s", quoted);
    } else {
        cc_shell_quote(provider ? provider : "aten", quoted, sizeof quoted);
        snprintf(word, sizeof word, "--provider %s", quoted);
    }
    append(r->args, sizeof r->args, word);
    const char *tf32 = getenv("CAPCHECK_TF32"), *det = getenv("CAPCHECK_DETERMINISTIC"),
               *att = getenv("CAPCHECK_ATTENTION");
    if (tf32 && (!strcmp(tf32, "1") || !strcmp(tf32, "0")))
        append(r->args, sizeof r->args, !strcmp(tf32, "1") ? "--tf32 on" : "--tf32 off");
    if (det && (!strcmp(det, "1") || !strcmp(det, "0")))
        append(r->args, sizeof r->args,
               !strcmp(det, "1") ? "--deterministic on" : "--deterministic off");
    if (att && *att) {
        cc_shell_quote(att, quoted, sizeof quoted);
        snprintf(word, sizeof word, "--attention %s", quoted);
        append(r->args, sizeof r->args, word);
    }
    if (timeout > 0) {
        snprintf(word, sizeof word, "--timeout %g", timeout);
        append(r->args, sizeof r->args, word);
    }
}

/* "ENV CAPCHECK WORDS ARGS TAIL" (r may be NULL: a bare capcheck, no ENV) */
static void command_line(const cc_repro *r, const char *words, const char *args,
                         const char *tail, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s%s %s%s%s%s%s", r && r->env[0] ? r->env : "", r && r->env[0] ? " " : "",
             r && r->program[0] ? r->program : "capcheck", words, args[0] ? " " : "", args,
             tail[0] ? " " : "", tail);
}

void cc_repro_command(const cc_repro *r, const char *line, char *buf, size_t n)
{
    char named[CC_REPRO_LINE_MAX + 16]; /* a line of an older report names its stream */
    if (r && r->plain_stream == CC_STREAM_LIBM && !strstr(line, " stream=")) {
        snprintf(named, sizeof named, "%s stream=1", line);
        line = named;
    }
    char quoted[2 * CC_REPRO_LINE_MAX + 40] = "repro '";
    cc_shell_quote(line, quoted + 7, sizeof quoted - 8);
    /* a case line always goes in quotes, as the documentation writes it */
    if (quoted[7] == '\'')
        memmove(quoted + 6, quoted + 7, strlen(quoted + 7) + 1);
    else
        strcat(quoted, "'");
    command_line(r, quoted, r ? r->args : "", "", buf, n);
}

/* The length of the provider's part of args: the words before the first of the run options
 * cc_repro_add_arg appends (a quoted word is one word, whatever it holds). */
static size_t provider_part(const char *args)
{
    static const char *const run_options[] = {"--repeat", "--no-guard", "--accumulation"};
    size_t end = 0;
    for (const char *w = args; *w;) {
        const char *e = w;
        for (int quoted = 0; *e && (quoted || *e != ' '); e++) {
            if (*e == '\\' && !quoted && e[1])
                e++; /* \' outside quotes: a quote character */
            else
                quoted ^= *e == '\'';
        }
        for (size_t k = 0; k < sizeof run_options / sizeof run_options[0]; k++)
            if ((size_t)(e - w) == strlen(run_options[k]) && !strncmp(w, run_options[k], e - w))
                return end;
        end = (size_t)(e - args);
        w = *e ? e + 1 : e;
    }
    return end;
}

void cc_repro_certify(const cc_repro *r, const char *tail, char *buf, size_t n)
{
    char args[sizeof r->args];
    snprintf(args, sizeof args, "%.*s", (int)provider_part(r->args), r->args);
    command_line(r, "certify", args, tail, buf, n);
}

void cc_repro_write_json(FILE *f, const cc_repro *r)
{
    fputs("{\"env\": ", f);
    cc_json_write_string(f, r->env);
    fputs(", \"args\": ", f);
    cc_json_write_string(f, r->args);
    fputc('}', f);
}

void cc_repro_from_json(const cc_json *obj, cc_repro *r)
{
    memset(r, 0, sizeof *r);
    this_program(r->program, sizeof r->program); /* the capcheck that prints the line */
    const char *env, *args;
    if (obj && obj->type == CC_JSON_OBJECT && !cc_json_string(obj, "env", &env) &&
        !cc_json_string(obj, "args", &args)) {
        snprintf(r->env, sizeof r->env, "%s", env);
        snprintf(r->args, sizeof r->args, "%s", args);
    }
}

void cc_repro_command_on(const cc_repro *r, const char *line, const char *key,
                         const cc_platform *platforms, int n_platforms, char *buf, size_t n)
{
    cc_repro_command(r, line, buf, n);
    for (int i = 0; key && key[0] && i < n_platforms; i++) {
        const cc_platform *p = &platforms[i];
        if (strcmp(p->key, key) == 0 && p->level[0] && strcmp(p->level, cc_level_name(0)) != 0) {
            size_t used = strlen(buf);
            snprintf(buf + used, n > used ? n - used : 0, " --cpu-capability %s", p->level);
            return;
        }
    }
}

void cc_repro_add_arg(cc_repro *r, const char *word)
{
    append(r->args, sizeof r->args, word);
}
