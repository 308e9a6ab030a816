#define _POSIX_C_SOURCE 200809L
#include "harness/run/watch.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "core/clock.h"
#include "harness/run/pool.h"

#define WHAT_MAX 240

/* One announcement on the pipe: a phase (limit >= 0) or the end (limit < 0: fn returned). */
typedef struct {
    double limit;
    char what[WHAT_MAX];
} phase_msg;

struct cc_watch {
    int fd; /* the child's end of the pipe */
};

static void announce(int fd, double limit, const char *what)
{
    phase_msg m;
    memset(&m, 0, sizeof m);
    m.limit = limit;
    snprintf(m.what, sizeof m.what, "%s", what);
    const char *b = (const char *)&m;
    for (size_t left = sizeof m; left;) { /* smaller than PIPE_BUF: one write in practice */
        ssize_t w = write(fd, b, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            _exit(3); /* the parent is gone */
        b += w;
        left -= (size_t)w;
    }
}

void cc_watch_phase(cc_watch *w, double limit_s, const char *what)
{
    announce(w->fd, limit_s > 0 ? limit_s : 0, what);
}

int cc_watch_run(int (*fn)(cc_watch *w, void *arg), void *arg, const char *who,
                 double first_limit, const char *first_what, char *msg, size_t msg_len)
{
    int fd[2];
    if (pipe(fd)) {
        snprintf(msg, msg_len, "cannot make a pipe: %s", strerror(errno));
        return -1;
    }
    fflush(NULL); /* the child must not write this process's buffered output again */
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(msg, msg_len, "cannot fork: %s", strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        close(fd[0]);
        setpgid(0, 0); /* killed with everything it started */
#ifdef __linux__
        prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
        cc_exit_leaves_at_once();
        cc_watch w = {fd[1]};
        int rc = fn(&w, arg);
        fflush(NULL);
        announce(fd[1], -1, "done");
        _exit(rc & 255);
    }
    setpgid(pid, pid);
    close(fd[1]);
    char what[WHAT_MAX];
    snprintf(what, sizeof what, "%s", first_what);
    double limit = first_limit, deadline = cc_monotonic_seconds() + first_limit;
    int done = 0, timed_out = 0;
    phase_msg m;
    size_t have = 0;
    for (;;) {
        double left = deadline - cc_monotonic_seconds();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd p = {fd[0], POLLIN, 0};
        int r = poll(&p, 1, left > 1e6 ? 1000000000 : (int)ceil(left * 1000));
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0)
            continue;
        ssize_t got = read(fd[0], (char *)&m + have, sizeof m - have);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break; /* the child is gone */
        have += (size_t)got;
        if (have < sizeof m)
            continue;
        have = 0;
        m.what[WHAT_MAX - 1] = 0;
        if (m.limit < 0) {
            done = 1;
            continue;
        }
        snprintf(what, sizeof what, "%s", m.what);
        limit = m.limit;
        deadline = cc_monotonic_seconds() + limit;
    }
    close(fd[0]);
    if (timed_out) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (timed_out) {
        snprintf(msg, msg_len, "%s did not finish %s within %g s (--timeout) and was killed", who,
                 what, limit);
        return -1;
    }
    if (WIFSIGNALED(st)) {
        snprintf(msg, msg_len, "%s crashed (%s, %s) while %s", who,
                 cc_signal_name(WTERMSIG(st)), strsignal(WTERMSIG(st)), what);
        return -1;
    }
    if (!done) {
        snprintf(msg, msg_len, "%s exited with status %d while %s (a provider that calls exit)",
                 who, WIFEXITED(st) ? WEXITSTATUS(st) : -1, what);
        return -1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
