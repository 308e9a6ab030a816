#define _POSIX_C_SOURCE 200809L
#include "harness/report/manifest.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/files.h"
#include "core/grow.h"
#include "core/sha256.h"

void cc_manifest_free(cc_manifest *m)
{
    free(m->files);
    free(m->shards);
    memset(m, 0, sizeof *m);
}

/* A path a manifest may name: relative, inside its folder, printable, no blank. */
static int safe_path(const char *p)
{
    if (!p[0] || p[0] == '/' || strlen(p) >= sizeof ((cc_manifest_file *)0)->path)
        return 0;
    for (const char *s = p; *s; s++)
        if ((unsigned char)*s <= ' ' || *s == 127 || *s == '\\')
            return 0;
    for (const char *s = p; s; s = strchr(s, '/')) {
        s += *s == '/';
        if (strncmp(s, "..", 2) == 0 && (s[2] == '/' || !s[2]))
            return 0;
    }
    return 1;
}

static int add_line(cc_manifest *m, const char *rel, const char *sha, char *msg, size_t len)
{
    cc_manifest_file *v = cc_grow(m->files, m->n_files, &m->cap_files, sizeof *v, 8);
    if (!v) {
        snprintf(msg, len, "out of memory");
        return -1;
    }
    m->files = v;
    cc_manifest_file *f = &m->files[m->n_files++];
    snprintf(f->path, sizeof f->path, "%s", rel);
    snprintf(f->sha256, sizeof f->sha256, "%s", sha);
    return 0;
}

int cc_manifest_add_file(cc_manifest *m, const char *dir, const char *rel, char *msg, size_t len)
{
    char path[1600], sha[65];
    if (!safe_path(rel)) {
        snprintf(msg, len, "'%s' cannot be named in a manifest", rel);
        return -1;
    }
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    if (cc_sha256_file(path, sha)) {
        snprintf(msg, len, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    return add_line(m, rel, sha, msg, len);
}

int cc_manifest_add_shard(cc_manifest *m, const cc_manifest_shard *s, char *msg, size_t len)
{
    cc_manifest_shard *v = cc_grow(m->shards, m->n_shards, &m->cap_shards, sizeof *v, 8);
    if (!v) {
        snprintf(msg, len, "out of memory");
        return -1;
    }
    m->shards = v;
    m->shards[m->n_shards++] = *s;
    return 0;
}

int cc_manifest_write(const cc_manifest *m, const char *path, char *msg, size_t len)
{
    cc_write_atomic w;
    FILE *f = cc_write_atomic_open(&w, path);
    if (!f) {
        snprintf(msg, len, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, "%s\nkind %s\ncapcheck %s commit %s\n", CC_MANIFEST_FORMAT, m->kind,
            m->capcheck_version, m->git_commit);
    if (strcmp(m->kind, "run") == 0) /* what the run's results hold for */
        fprintf(f, "platforms %s\n", m->platforms[0] ? m->platforms : "none");
    for (size_t i = 0; i < m->n_shards; i++) {
        const cc_manifest_shard *s = &m->shards[i];
        if (s->signer[0])
            fprintf(f, "shard %d/%d manifest sha256:%s signer %s\n", s->index, s->count,
                    s->manifest_sha256, s->signer);
        else
            fprintf(f, "shard %d/%d unsigned\n", s->index, s->count);
    }
    for (size_t i = 0; i < m->n_files; i++)
        fprintf(f, "%s  %s\n", m->files[i].sha256, m->files[i].path);
    if (cc_write_atomic_close(&w, ferror(f) != 0, CC_WRITE_SYNC)) {
        snprintf(msg, len, "cannot write %s: %s", path, strerror(errno ? errno : EIO));
        return -1;
    }
    return 0;
}

static int is_hex64(const char *s)
{
    return strspn(s, "0123456789abcdef") == 64;
}

typedef struct {
    const char *name;
    int lineno;
    char *msg;
    size_t len;
} where;

static int refuse(const where *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(const where *w, const char *fmt, ...)
{
    int used = snprintf(w->msg, w->len, "%s:%d: ", w->name, w->lineno);
    va_list ap;
    va_start(ap, fmt);
    if (used >= 0 && (size_t)used < w->len)
        vsnprintf(w->msg + used, w->len - (size_t)used, fmt, ap);
    va_end(ap);
    return -1;
}

/* "shard I/N manifest sha256:<hex> signer SHA256:<b64>" or "shard I/N unsigned" */
static int parse_shard(cc_manifest *m, const char *line, const where *w)
{
    cc_manifest_shard s;
    memset(&s, 0, sizeof s);
    char sha[80] = "", signer[80] = "", rest[16] = "";
    int used = 0;
    if (sscanf(line, "shard %d/%d%n", &s.index, &s.count, &used) != 2 || s.index < 1 ||
        s.index > s.count)
        return refuse(w, "a shard line is 'shard I/N manifest sha256:HEX signer SHA256:...' or "
                         "'shard I/N unsigned'");
    line += used;
    if (strcmp(line, " unsigned") == 0)
        return cc_manifest_add_shard(m, &s, w->msg, w->len);
    if (sscanf(line, " manifest sha256:%79s signer %79s%15s", sha, signer, rest) != 2 ||
        !is_hex64(sha) || sha[64] || strncmp(signer, "SHA256:", 7) ||
        strlen(signer) >= sizeof s.signer)
        return refuse(w, "a shard line is 'shard I/N manifest sha256:HEX signer SHA256:...' or "
                         "'shard I/N unsigned'");
    memcpy(s.manifest_sha256, sha, 65);
    snprintf(s.signer, sizeof s.signer, "%s", signer);
    return cc_manifest_add_shard(m, &s, w->msg, w->len);
}

/* One line (NUL-terminated, no newline) into m. */
static int parse_line(cc_manifest *m, const char *line, const where *w)
{
    if (is_hex64(line) && line[64] == ' ' && line[65] == ' ') {
        char sha[65];
        memcpy(sha, line, 64);
        sha[64] = 0;
        if (!safe_path(line + 66))
            return refuse(w, "'%.200s' is not a path inside the run's folder", line + 66);
        if (cc_manifest_find(m, line + 66))
            return refuse(w, "%.200s is listed twice", line + 66);
        return add_line(m, line + 66, sha, w->msg, w->len);
    }
    if (strncmp(line, "kind ", 5) == 0) {
        if (strcmp(line + 5, "run") && strcmp(line + 5, "evidence"))
            return refuse(w, "kind is run or evidence");
        snprintf(m->kind, sizeof m->kind, "%.15s", line + 5);
        return 0;
    }
    if (strncmp(line, "capcheck ", 9) == 0) {
        char version[32], commit[48], extra[8];
        if (sscanf(line, "capcheck %31s commit %47s%7s", version, commit, extra) != 2)
            return refuse(w, "the capcheck line is 'capcheck VERSION commit COMMIT'");
        memcpy(m->capcheck_version, version, sizeof version);
        memcpy(m->git_commit, commit, sizeof commit);
        return 0;
    }
    if (strncmp(line, "platforms ", 10) == 0) {
        snprintf(m->platforms, sizeof m->platforms, "%.1023s",
                 strcmp(line + 10, "none") ? line + 10 : "");
        return 0;
    }
    if (strncmp(line, "shard ", 6) == 0)
        return parse_shard(m, line, w);
    return refuse(w, "'%.80s' is not a manifest line", line);
}

int cc_manifest_parse(const char *text, const char *name, cc_manifest *m, char *msg, size_t len)
{
    memset(m, 0, sizeof *m);
    where w = {name, 0, msg, len};
    for (const char *s = text; *s;) {
        const char *eol = strchr(s, '\n');
        size_t n = eol ? (size_t)(eol - s) : strlen(s);
        char line[1200];
        w.lineno++;
        if (n >= sizeof line || memchr(s, 0, n)) {
            cc_manifest_free(m);
            return refuse(&w, "line too long");
        }
        memcpy(line, s, n);
        line[n] = 0;
        s += n + (eol != NULL);
        int rc = 0;
        if (w.lineno > 1)
            rc = parse_line(m, line, &w);
        else if (strcmp(line, CC_MANIFEST_FORMAT) != 0)
            rc = refuse(&w, "a manifest starts with '%s'", CC_MANIFEST_FORMAT);
        if (rc) {
            cc_manifest_free(m);
            return -1;
        }
    }
    if (!m->kind[0] || !m->capcheck_version[0]) {
        snprintf(msg, len, "%s: %s", name,
                 w.lineno ? "the manifest lacks its kind or capcheck line" : "an empty manifest");
        cc_manifest_free(m);
        return -1;
    }
    return 0;
}

const cc_manifest_file *cc_manifest_find(const cc_manifest *m, const char *rel)
{
    for (size_t i = 0; i < m->n_files; i++)
        if (strcmp(m->files[i].path, rel) == 0)
            return &m->files[i];
    return NULL;
}

void cc_manifest_remove(const char *dir)
{
    static const char *const names[] = {CC_MANIFEST_FILE, CC_MANIFEST_SIG_FILE,
                                        CC_EVIDENCE_MANIFEST_FILE, CC_EVIDENCE_MANIFEST_SIG_FILE};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        remove(path);
    }
}
