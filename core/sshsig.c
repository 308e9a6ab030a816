#define _POSIX_C_SOURCE 200809L
#include "core/sshsig.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/files.h"
#include "core/sha256.h"

extern char **environ;

void cc_ssh_tool_default(cc_ssh_tool *t)
{
    const char *env = getenv("CAPCHECK_SSH_KEYGEN");
    t->program = env && *env ? env : "ssh-keygen";
    t->timeout = CC_SSH_TIMEOUT;
}

/* ---- running ssh-keygen ------------------------------------------------------------------- */

/* The program's path: itself when it names a folder, else the first executable of that name on
 * PATH. 0, or -1 with msg. */
static int find_program(const char *program, char *path, size_t n, char *msg, size_t len)
{
    if (strchr(program, '/')) {
        snprintf(path, n, "%s", program);
        if (access(path, X_OK) == 0)
            return 0;
        snprintf(msg, len, "cannot run %s: %s", program, strerror(errno));
        return -1;
    }
    const char *dirs = getenv("PATH");
    for (const char *d = dirs && *dirs ? dirs : "/usr/bin:/bin"; *d;) {
        size_t k = strcspn(d, ":");
        snprintf(path, n, "%.*s%s%s", (int)k, d, k ? "/" : "", program);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0)
            return 0;
        d += k + (d[k] == ':');
    }
    snprintf(msg, len, "%s is not on PATH: signatures need OpenSSH's ssh-keygen (Debian: apt-get "
                       "install openssh-client; CAPCHECK_SSH_KEYGEN names another one)",
             program);
    return -1;
}

/* The environment without SSH_ASKPASS and SSH_ASKPASS_REQUIRE (built before the fork: the child
 * calls nothing that allocates). NULL when out of memory; free() the array only. */
static char **child_environment(void)
{
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **env = malloc((n + 1) * sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "SSH_ASKPASS=", 12) && strncmp(environ[i], "SSH_ASKPASS_REQUIRE=", 20))
            env[k++] = environ[i];
    env[k] = NULL;
    return env;
}

/* In the child: no terminal (a session of its own), stdin from `in`, stdout and stderr into the
 * pipes; then the program. Only async-signal-safe calls. */
static void child(const char *path, char *const *argv, char **env, const char *in, int out_fd,
                  int err_fd)
{
    setsid();
    int fd = open(in, O_RDONLY);
    if (fd < 0 || dup2(fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
        _exit(126);
    execve(path, argv, env);
    static const char said[] = "cannot start the program\n";
    if (write(2, said, sizeof said - 1) < 0)
        _exit(127);
    _exit(127);
}

/* Append what is readable on fd to buf (kept NUL-terminated, the excess dropped); 0 at EOF. */
static int drain(int fd, char *buf, size_t cap, size_t *used)
{
    char chunk[4096];
    ssize_t got = read(fd, chunk, sizeof chunk);
    if (got < 0)
        return errno == EINTR || errno == EAGAIN ? 1 : 0;
    if (got == 0)
        return 0;
    size_t room = *used + 1 < cap ? cap - 1 - *used : 0, take = (size_t)got < room ? (size_t)got : room;
    memcpy(buf + *used, chunk, take);
    *used += take;
    buf[*used] = 0;
    return 1;
}

/* Run argv (argv[0] the program) with stdin from `in` (NULL: /dev/null); its stdout into out,
 * its stderr into err. 0 with its exit status in *status; -1 with msg when it could not start,
 * died of a signal, or outlived t->timeout (then it is killed). */
static int run_tool(const cc_ssh_tool *t, const char **argv, const char *in, char *out,
                    size_t out_len, char *err, size_t err_len, int *status, char *msg,
                    size_t len)
{
    char path[4096];
    out[0] = err[0] = 0;
    if (find_program(t->program, path, sizeof path, msg, len))
        return -1;
    int po[2] = {-1, -1}, pe[2] = {-1, -1};
    char **env = child_environment();
    if (!env || pipe(po) || pipe(pe)) {
        snprintf(msg, len, "cannot start %s: %s", t->program, env ? strerror(errno) : "out of memory");
        free(env);
        for (int i = 0; i < 2; i++) {
            if (po[i] >= 0)
                close(po[i]);
            if (pe[i] >= 0)
                close(pe[i]);
        }
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(po[0]);
        close(pe[0]);
        child(path, (char *const *)argv, env, in ? in : "/dev/null", po[1], pe[1]);
    }
    free(env);
    close(po[1]);
    close(pe[1]);
    if (pid < 0) {
        close(po[0]);
        close(pe[0]);
        snprintf(msg, len, "cannot start %s: %s", t->program, strerror(errno));
        return -1;
    }
    size_t n_out = 0, n_err = 0;
    int open_out = 1, open_err = 1, late = 0;
    double deadline = cc_monotonic_seconds() + t->timeout;
    while ((open_out || open_err) && !late) {
        struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
        double left = deadline - cc_monotonic_seconds();
        late = left <= 0;
        int ready = late ? 0 : poll(fds, 2, (int)(left * 1000) + 1);
        if (ready < 0 && errno != EINTR)
            break;
        if (ready > 0 && open_out && fds[0].revents)
            open_out = drain(po[0], out, out_len, &n_out);
        if (ready > 0 && open_err && fds[1].revents)
            open_err = drain(pe[0], err, err_len, &n_err);
    }
    close(po[0]);
    close(pe[0]);
    if (late || open_out || open_err) {
        kill(-pid, SIGKILL); /* its session, and any child it started */
        kill(pid, SIGKILL);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (late) {
        snprintf(msg, len, "%s did not finish within %g s and was stopped", t->program, t->timeout);
        return -1;
    }
    if (!WIFEXITED(st)) {
        snprintf(msg, len, "%s died of signal %d", t->program, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        return -1;
    }
    *status = WEXITSTATUS(st);
    if (*status == 127 || *status == 126) {
        snprintf(msg, len, "cannot run %s", path);
        return -1;
    }
    return 0;
}

/* What ssh-keygen said on stderr, as one clause: its lines joined with "; ", without the
 * banners, prompts and progress lines that say nothing of the failure. */
static void said(const char *err, char *buf, size_t n)
{
    static const char *const noise[] = {"Enter passphrase", "Signing file ", "Write signature to ",
                                        "@@@", NULL};
    size_t used = 0;
    buf[0] = 0;
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", err);
    for (char *save = NULL, *line = strtok_r(copy, "\r\n", &save); line;
         line = strtok_r(NULL, "\r\n", &save)) {
        /* "Enter passphrase: Load key ...": the prompt and the failure share a line */
        for (int k = 0; noise[k]; k++)
            if (strncmp(line, noise[k], strlen(noise[k])) == 0) {
                char *colon = k == 0 ? strstr(line, ": ") : NULL;
                line = colon ? colon + 2 : line + strlen(line);
            }
        while (*line == ' ' || *line == '@') /* "@   WARNING: UNPROTECTED ...   @" */
            line++;
        for (size_t e = strlen(line); e && (line[e - 1] == ' ' || line[e - 1] == '@'); e--)
            line[e - 1] = 0;
        if (!*line || used + 3 >= n)
            continue;
        used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? "; " : "", line);
    }
    if (!buf[0])
        snprintf(buf, n, "no message");
    if (used >= n)
        buf[n - 1] = 0;
}

/* ---- reading a signature -------------------------------------------------------------------- */

static int b64_value(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Base64 text (blanks and line breaks skipped, '=' ends it) into out; the byte count, or -1. */
static long b64_decode(const char *s, size_t n, unsigned char *out, size_t cap)
{
    unsigned acc = 0;
    int bits = 0;
    size_t k = 0;
    for (size_t i = 0; i < n && s[i] != '='; i++) {
        if (s[i] == '\n' || s[i] == '\r' || s[i] == ' ')
            continue;
        int v = b64_value((unsigned char)s[i]);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (k == cap)
                return -1;
            out[k++] = (unsigned char)(acc >> bits);
        }
    }
    return (long)k;
}

/* Base64 without padding, as ssh-keygen prints fingerprints. */
static void b64_encode(const unsigned char *in, size_t n, char *out, size_t cap)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t k = 0;
    for (size_t i = 0; i < n && k + 5 < cap; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        out[k++] = alphabet[v >> 18 & 63];
        out[k++] = alphabet[v >> 12 & 63];
        if (i + 1 < n)
            out[k++] = alphabet[v >> 6 & 63];
        if (i + 2 < n)
            out[k++] = alphabet[v & 63];
    }
    out[k] = 0;
}

/* An SSH wire string at *p (4-byte big-endian length, then the bytes); *p moves past it. */
static int wire_string(const unsigned char **p, const unsigned char *end,
                       const unsigned char **s, size_t *n)
{
    if (end - *p < 4)
        return -1;
    uint32_t k = (uint32_t)(*p)[0] << 24 | (uint32_t)(*p)[1] << 16 | (uint32_t)(*p)[2] << 8 | (*p)[3];
    if ((size_t)(end - *p - 4) < k)
        return -1;
    *s = *p + 4;
    *n = k;
    *p += 4 + (size_t)k;
    return 0;
}

int cc_ssh_sig_read(const char *sig_path, cc_ssh_sig_info *out, char *msg, size_t len)
{
    static const char begin[] = "-----BEGIN SSH SIGNATURE-----", end[] = "-----END SSH SIGNATURE-----";
    memset(out, 0, sizeof *out);
    size_t n;
    char *text = cc_read_file(sig_path, &n);
    if (!text) {
        snprintf(msg, len, "cannot read %s: %s", sig_path, strerror(errno));
        return -1;
    }
    char *from = strstr(text, begin), *to = from ? strstr(from, end) : NULL;
    unsigned char blob[8192];
    long got = -1;
    if (from && to) {
        from += sizeof begin - 1;
        got = b64_decode(from, (size_t)(to - from), blob, sizeof blob);
    }
    free(text);
    const unsigned char *p = blob, *stop = blob + (got > 0 ? got : 0), *key, *ns, *type;
    size_t n_key, n_ns, n_type;
    /* "SSHSIG", version 1, the public key, the namespace (then what is not read here) */
    if (got < 10 || memcmp(blob, "SSHSIG", 6) || blob[6] || blob[7] || blob[8] || blob[9] != 1 ||
        (p += 10, wire_string(&p, stop, &key, &n_key)) || wire_string(&p, stop, &ns, &n_ns)) {
        snprintf(msg, len, "%s is not an OpenSSH signature (ssh-keygen -Y sign writes one)",
                 sig_path);
        return -1;
    }
    const unsigned char *kp = key;
    if (wire_string(&kp, key + n_key, &type, &n_type) || n_type >= sizeof out->key_type ||
        n_ns >= sizeof out->ns) {
        snprintf(msg, len, "%s: the signature's key or namespace is malformed", sig_path);
        return -1;
    }
    unsigned char digest[32];
    cc_sha256_ctx c;
    cc_sha256_init(&c);
    cc_sha256_update(&c, key, n_key);
    cc_sha256_final(&c, digest);
    char b64[48]; /* 43 characters for 32 bytes */
    b64_encode(digest, sizeof digest, b64, sizeof b64);
    snprintf(out->fingerprint, sizeof out->fingerprint, "SHA256:%s", b64);
    memcpy(out->key_type, type, n_type);
    memcpy(out->ns, ns, n_ns);
    for (char *s = out->ns; *s; s++) /* it is printed: no control character */
        if ((unsigned char)*s < 32 || *s == 127)
            *s = '?';
    return 0;
}

/* ---- signing and verifying ------------------------------------------------------------------ */

int cc_ssh_sign(const cc_ssh_tool *t, const char *key, const char *ns, const char *path,
                char *msg, size_t len)
{
    char sig[4200], out[1024], err[4096], why[1024];
    snprintf(sig, sizeof sig, "%s.sig", path);
    if (remove(sig) && errno != ENOENT) {
        snprintf(msg, len, "cannot replace %s: %s", sig, strerror(errno));
        return -1;
    }
    if (access(key, R_OK)) {
        snprintf(msg, len, "the key %s cannot be read: %s", key, strerror(errno));
        return -1;
    }
    const char *argv[] = {t->program, "-Y", "sign", "-f", key, "-n", ns, path, NULL};
    int status;
    if (run_tool(t, argv, NULL, out, sizeof out, err, sizeof err, &status, msg, len))
        return -1;
    if (status == 0 && access(sig, R_OK) == 0)
        return 0;
    said(err, why, sizeof why);
    snprintf(msg, len, "ssh-keygen could not sign with %s (%s)%s", key, why,
             strstr(err, "passphrase")
                 ? ": a key with a passphrase signs through ssh-agent (ssh-add it first, as "
                   "for git), never at a prompt"
                 : "");
    remove(sig);
    return -1;
}

/* ssh-keygen -Y verify or check-novalidate (argv) over the file data_path on stdin:
 * CC_SSH_VERIFIED, or CC_SSH_BAD with why in msg. */
static int verdict(const cc_ssh_tool *t, const char **argv, const char *data_path, char *msg,
                   size_t len)
{
    char out[4096], err[4096], why[1024];
    int status;
    if (run_tool(t, argv, data_path, out, sizeof out, err, sizeof err, &status, msg, len))
        return CC_SSH_BAD;
    if (status == 0)
        return CC_SSH_VERIFIED;
    said(err, why, sizeof why);
    snprintf(msg, len, "ssh-keygen -Y %s refuses it (%s)", argv[2], why);
    return CC_SSH_BAD;
}

int cc_ssh_verify(const cc_ssh_tool *t, const char *allowed, const char *ns,
                  const char *data_path, const char *sig_path, char *principal, size_t plen,
                  char *msg, size_t len)
{
    char out[4096], err[4096], why[1024];
    int status;
    principal[0] = 0;
    if (access(allowed, R_OK)) {
        snprintf(msg, len, "the allowed-signers file %s cannot be read: %s", allowed,
                 strerror(errno));
        return CC_SSH_BAD;
    }
    const char *find[] = {t->program, "-Y", "find-principals", "-s", sig_path, "-f", allowed, NULL};
    if (run_tool(t, find, NULL, out, sizeof out, err, sizeof err, &status, msg, len))
        return CC_SSH_BAD;
    /* one principal list a line; the first principal of the first line */
    size_t k = strcspn(out, ",\r\n");
    if (status != 0 || k == 0) {
        said(err, why, sizeof why);
        snprintf(msg, len, "%s names no principal for the key (%s)", allowed, why);
        return CC_SSH_NOT_ALLOWED;
    }
    snprintf(principal, plen, "%.*s", (int)k, out);
    const char *verify[] = {t->program, "-Y", "verify", "-f", allowed, "-I", principal, "-n", ns,
                            "-s", sig_path, NULL};
    return verdict(t, verify, data_path, msg, len);
}

int cc_ssh_check(const cc_ssh_tool *t, const char *ns, const char *data_path,
                 const char *sig_path, char *msg, size_t len)
{
    const char *check[] = {t->program, "-Y", "check-novalidate", "-n", ns, "-s", sig_path, NULL};
    return verdict(t, check, data_path, msg, len);
}
