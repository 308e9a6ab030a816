/* Files written all or nothing: the one way capcheck writes a file that another process, a
 * later run or a person may read (reports, seals, run.json, evidence, bench figures); and the
 * one way it reads a whole file back (cc_read_file).
 *
 *     cc_write_atomic w;
 *     FILE *f = cc_write_atomic_open(&w, path);   // PATH.tmp, beside path
 *     ... write into f ...
 *     if (cc_write_atomic_close(&w, failed, 0)) ... // flush, close, rename over path
 *
 * rename(2) puts the finished file in place: a reader finds the old file or the whole new
 * one, never half of it, and a failed write leaves the old file as it was. A path that exists
 * and is not a regular file (/dev/stdout, /dev/null, a pipe) is written as it is: renaming over
 * it would replace the device (as root, /dev/null itself). */
#ifndef CAPCHECK_FILES_H
#define CAPCHECK_FILES_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
    FILE *f;
    const char *path; /* the caller's: it must outlive the write */
    char tmp[4096];   /* PATH.tmp (path itself when `direct`) */
    int direct;       /* path is not a regular file: written in place, never renamed over */
} cc_write_atomic;

enum { CC_WRITE_SYNC = 1 }; /* fsync the data before the rename (power-cut safe) */

/* Create PATH.tmp for writing. NULL (errno set) when it cannot be created; w->tmp names it. */
FILE *cc_write_atomic_open(cc_write_atomic *w, const char *path);
/* Finish: flush (and with CC_WRITE_SYNC fsync), close, and rename PATH.tmp over path, unless
 * `failed` (the caller's writing went wrong) or a step fails: then PATH.tmp is removed and
 * path is untouched. Returns 0, or -1 with errno saying why (0 when only `failed`). */
int cc_write_atomic_close(cc_write_atomic *w, int failed, unsigned flags);

/* The whole file at path, NUL-terminated (its length in *len when len is not NULL); free() it.
 * NULL with errno set (ENOENT: no such file, ENOMEM) when it cannot be read. */
char *cc_read_file(const char *path, size_t *len);

/* All n bytes of buf written to descriptor fd (a pipe, a journal), again after a signal or a
 * short write: 0, or the errno of the write that failed (EIO when one wrote nothing). */
int cc_write_fully(int fd, const void *buf, size_t n);

/* A provider's stdout is not capcheck's (whose stdout carries its own lines, or a Python
 * reproducer): while provider code runs in a process, what it writes to descriptor 1, printf
 * included, goes to stderr. cc_stdout_divert flushes stdout and points descriptor 1 at
 * descriptor 2, returning the descriptor that holds the real stdout (-1: nothing diverted);
 * cc_stdout_restore flushes what the provider left in stdout's buffer (to stderr) and puts the
 * real stdout back (nothing for -1). A worker process diverts for good and closes the saved
 * descriptor. */
int cc_stdout_divert(void);
void cc_stdout_restore(int saved);

#endif
