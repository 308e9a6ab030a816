/* Running in-process work that calls a provider (capcheck bench times provider calls in one
 * process, so it cannot use the worker pool) in a forked child the parent watches: the child
 * announces each phase with a time limit; a phase that outlives its limit gets the child
 * killed, and a child that dies (a signal, or exit() inside a provider) is one sentence naming
 * the phase. capcheck itself never hangs, never dies with the provider, and never exits 0
 * because a provider did. */
#ifndef CAPCHECK_WATCH_H
#define CAPCHECK_WATCH_H

#include <stddef.h>

typedef struct cc_watch cc_watch;

/* In the child: fn(w, arg), whose return value (0..255) becomes the child's exit status. In
 * the parent: wait for it, enforcing the phases' limits (the first phase, `first_what`, gets
 * first_limit seconds). Returns that status, or -1 with a sentence in msg ("provider X crashed
 * (SIGSEGV) while <phase>", "... did not finish <phase> within S s", "... exited with status N
 * while <phase>"). stdout and stderr are the child's too; they are flushed before the fork. */
int cc_watch_run(int (*fn)(cc_watch *w, void *arg), void *arg, const char *who,
                 double first_limit, const char *first_what, char *msg, size_t msg_len);
/* In the child: a new phase, `what` (a short phrase: "initialising", "the first calls of
 * 'LINE'"), with limit_s seconds from now. */
void cc_watch_phase(cc_watch *w, double limit_s, const char *what);

#endif
