/* Files written all or nothing (files.h). */
#define _POSIX_C_SOURCE 200809L
#include "core/files.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

FILE *cc_write_atomic_open(cc_write_atomic *w, const char *path)
{
    w->path = path;
    w->f = NULL;
    struct stat st;
    w->direct = stat(path, &st) == 0 && !S_ISREG(st.st_mode);
    if (snprintf(w->tmp, sizeof w->tmp, "%s%s", path, w->direct ? "" : ".tmp") >=
        (int)sizeof w->tmp) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    w->f = fopen(w->tmp, "w");
    return w->f;
}

int cc_write_atomic_close(cc_write_atomic *w, int failed, unsigned flags)
{
    if (!w->f)
        return -1;
    errno = 0;
    int bad = failed || fflush(w->f) || ferror(w->f) ||
              ((flags & CC_WRITE_SYNC) && fsync(fileno(w->f)));
    bad |= fclose(w->f) != 0;
    w->f = NULL;
    if (bad || (!w->direct && rename(w->tmp, w->path))) {
        int saved = errno; /* the reason, for the caller's sentence, not remove's */
        if (!w->direct)
            remove(w->tmp);
        errno = saved;
        return -1;
    }
    return 0;
}

char *cc_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *b = malloc(cap + 1);
    while (b && (got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(b, (cap *= 2) + 1);
            if (!nb)
                free(b);
            b = nb;
        }
    }
    int bad = ferror(f), saved = errno;
    fclose(f);
    if (!b || bad) {
        free(b);
        errno = !b ? ENOMEM : saved ? saved : EIO;
        return NULL;
    }
    b[n] = 0;
    if (len)
        *len = n;
    return b;
}

int cc_write_fully(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int cc_stdout_divert(void)
{
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    if (saved < 0)
        return -1;
    if (dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
        close(saved);
        return -1;
    }
    return saved;
}

void cc_stdout_restore(int saved)
{
    if (saved < 0)
        return;
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
}
