/* The worker pool: provider calls run in forked worker processes, so a segfault, abort or hang
 * in a kernel becomes a `crash` or `timeout` result for that one case and the run goes on.
 *
 * Lifecycle (DESIGN.md, "CUDA and fork"): cc_pool_start forks every worker before anything in
 * this process has called into the provider, and each worker calls provider->init itself for
 * every device the run needs, then reports back ("hello": init status and the provider's
 * describe() text). The parent never calls init, forward, vjp or describe; only vjp_mode (a
 * table lookup) to label a result it has to make up. A worker that dies is replaced by a fresh
 * fork of the parent, which is still free of any provider state.
 *
 * Protocol: one pipe each way per worker, fixed-size plain-data messages.
 *   parent -> worker  job    {magic, tag, cc_case}        (cc_case is plain data; its op
 *                                                          pointer is valid after fork)
 *   worker -> parent  hello  {magic, kind=hello, init status, sentence, description,
 *                             the platform of every device it initialised}
 *                     result {magic, kind=result, tag, cc_result}
 * A worker runs the whole case (materialize, reference, provider, compare: cc_run_case) and
 * writes one result per job.
 *
 * Witnesses (harness/run/witness.h; cfg.witnesses): each worker also initialises every witness on
 * every device (a witness that cannot run there answers `unsupported` for that device's cases;
 * it never stops the pool). A primary result that wants witnesses is held by the parent, which
 * queues one witness job per witness {tag, witness k, the primary's worst element as a probe,
 * the case}; idle workers take witness jobs before new cases and answer
 *                     witness {magic, kind=witness, tag, cc_witness}.
 * A witness job that crashes or times out becomes that witness's `crash` or `timeout`; the
 * primary's result is delivered, with its witnesses and verdict, when the last one is in. The parent polls every worker's result pipe with the earliest
 * deadline as the poll timeout:
 *   EOF or a malformed message  -> the worker died: reap it, result `crash` naming the signal
 *                                  ("killed by SIGSEGV (Segmentation fault)") or exit status;
 *   deadline passed             -> SIGKILL the worker (and its process group), result
 *                                  `timeout`;
 * either way the made-up result carries the case's canonical repro line, and a replacement
 * worker is forked. A worker killed by a fault in a guard page (harness/guard.h) has left a note
 * in a page it shares with the parent: that case's result is `out-of-bounds` with the note's
 * sentence (the buffer, the side, the distance) instead of `crash`. Messages name no pid and no elapsed time, so a crash or timeout result is
 * as deterministic as the case.
 *
 * Workers run in their own process group (a Ctrl-C at the terminal reaches only the parent,
 * which then dies without recording bogus crashes) and die with the parent (PR_SET_PDEATHSIG
 * on Linux; anywhere else they exit at EOF on their job pipe after the case in hand).
 *
 * Per-case timeout: cc_case_timeout(c, base) = base + 1 us x (input + output elements) x
 * (number of inputs); base defaults to CC_POOL_DEFAULT_TIMEOUT (10 s).
 *
 * The pool is single-threaded and keeps no global state; the only process-wide change is that
 * SIGPIPE is ignored while a pool is open (restored by cc_pool_close). */
#ifndef CAPCHECK_POOL_H
#define CAPCHECK_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "harness/case/case.h"
#include "harness/run/platform.h"
#include "harness/run/runner.h"

#define CC_POOL_DEFAULT_TIMEOUT 10.0
#define CC_POOL_DEFAULT_INIT_TIMEOUT 60.0

typedef struct cc_pool cc_pool;

typedef struct {
    const cc_provider *provider; /* not yet initialised: the workers call init */
    int workers;                 /* <= 0: cc_online_cpus() */
    unsigned devices;            /* bit (1u << device) per device each worker initialises;
                                    0: CPU only */
    double timeout_base;         /* seconds; <= 0: CC_POOL_DEFAULT_TIMEOUT */
    double init_timeout;         /* seconds for a worker's init (capcheck passes --timeout);
                                    <= 0: CC_POOL_DEFAULT_INIT_TIMEOUT */
    int in_process;              /* --no-fork: init and run in this process, one case at a
                                    time, no crash isolation (for debuggers) */
    const cc_provider *const *witnesses; /* not initialised; the array outlives the pool */
    int n_witnesses;                     /* 0 .. CC_MAX_WITNESSES */
    int cpu_level; /* harness/run/platform.h: the CPU dispatch level each worker sets in its own
                      environment before it initialises anything; 0 (native) sets nothing */
    cc_run_options run;                  /* repeat, guard, determinism: every case's */
    int interrupt_fd; /* a signalfd the caller made for the signals that end a run (Ctrl-C),
                         watched beside the workers; -1 (or 0 in a zeroed config): none.
                         When it fires the pool stops: cc_pool_interrupted says which signal */
    int aten_threads; /* harness/run/platform.h: the ATen thread count each worker sets before
                         it initialises the provider (--aten-threads); 0 sets nothing */
} cc_pool_config;

int cc_online_cpus(void);
/* The time limit of one case: base + 1e-6 s x (input + output elements) x inputs. */
double cc_case_timeout(const cc_case *c, double base);
/* "SIGSEGV", "SIGABRT", ... or "signal N". */
const char *cc_signal_name(int sig);

/* In a process forked to run provider code: make exit() (a provider that calls it) end the
 * process at once with its status, as _exit would. */
void cc_exit_leaves_at_once(void);

/* Fork the workers and wait until each has initialised the provider on every device. Returns
 * 0, or -1 with one sentence in msg ("provider aten cannot run on cuda: ...", a worker that
 * crashed or hung in init, fork failures); no worker is left behind then. */
int cc_pool_start(const cc_pool_config *cfg, cc_pool **out, char *msg, size_t msg_len);
/* The provider's describe() text as a worker reported it (its name when it has none). */
const char *cc_pool_description(const cc_pool *pool);
/* The platform (harness/run/platform.h) the first worker derived on device dev after init, from
 * the provider's description, its environment and the CPU; NULL when the pool did not
 * initialise that device. Every result the pool returns carries its worker's platform key. */
const cc_platform *cc_pool_platform(const cc_pool *pool, cc_device dev);
int cc_pool_size(const cc_pool *pool);

/* Hand case c to a worker, waiting for one to be free (results that finish meanwhile are
 * queued for cc_pool_wait). `tag` comes back with the result. Returns 0, or -1 with msg when
 * the pool cannot go on (a replacement worker failed to initialise). */
int cc_pool_submit(cc_pool *pool, uint64_t tag, const cc_case *c, char *msg, size_t msg_len);
/* Cases submitted and not yet returned by cc_pool_wait. */
size_t cc_pool_pending(const cc_pool *pool);
/* Block until a submitted case is done; its result (every status, crash and timeout
 * included) and tag. Returns 0; 1 when nothing is pending; -1 with msg when the pool cannot go
 * on (the cases still in flight then have no result). */
int cc_pool_wait(cc_pool *pool, uint64_t *tag, cc_result *r, char *msg, size_t msg_len);
/* Take a queued result without blocking: 0 when one was ready, 1 when none. */
int cc_pool_poll(cc_pool *pool, uint64_t *tag, cc_result *r);
/* Submit one case and wait for it (for repro and shrink). */
int cc_pool_run_one(cc_pool *pool, const cc_case *c, cc_result *r, char *msg, size_t msg_len);
/* The signal that stopped the pool through cfg.interrupt_fd (SIGINT, ...), or 0. */
int cc_pool_interrupted(const cc_pool *pool);
/* Stop the workers (EOF on their job pipes; SIGKILL for any still busy) and reap them. */
void cc_pool_close(cc_pool *pool);

#endif
