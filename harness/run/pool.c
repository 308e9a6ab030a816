/* The worker pool (the protocol and the rules are in pool.h). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS: the guard-note page a worker shares with the pool */
#include "harness/run/pool.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/signalfd.h>
#endif

#include "core/clock.h"
#include "core/files.h"
#include "core/grow.h"
#include "core/text.h"
#include "core/guard.h"
#include "harness/run/witness.h"
#include <sys/mman.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#ifdef CAPCHECK_COVERAGE
void __gcov_dump(void); /* a worker leaves with _exit: write its coverage counters first */
#endif

#define MSG_MAGIC 0x31706363u /* "ccp1" */
enum { MSG_HELLO = 1, MSG_RESULT = 2, MSG_WITNESS = 3 };

#define PRIMARY_JOB (-1) /* job_msg.witness of a case run on the provider itself */

typedef struct {
    uint32_t magic, kind;
    uint64_t tag;
    int32_t witness; /* PRIMARY_JOB, or the index of the witness to run the case on */
    cc_probe probe;  /* a witness job: the primary's worst element */
    cc_case c;
} job_msg;

typedef struct {
    uint32_t magic, kind;
    uint64_t tag;
    int32_t init_ok;
    char text[512];        /* hello: the init failure sentence */
    char description[512]; /* hello: provider describe() */
    cc_platform platform[CC_DEVICE_COUNT]; /* hello: per initialised device (key "" if not) */
    cc_result r;           /* result */
    cc_witness witness;    /* witness */
} res_msg;

enum { W_DEAD = 0, W_STARTING, W_IDLE, W_BUSY };

typedef struct {
    pid_t pid;
    int job_fd, res_fd, state;
    double started, deadline, limit;
    uint64_t tag;
    int witness; /* the job's witness index, or PRIMARY_JOB */
    int retry;   /* the job is a case's second run (its first worker was killed from outside) */
    cc_case c;
    size_t have;
    char platform[CC_DEVICE_COUNT][CC_PLATFORM_KEY_MAX]; /* from its hello */
    res_msg in;
    cc_guard_note *note; /* shared with the worker: what its guard-fault handler found */
} worker;

typedef struct {
    uint64_t tag;
    cc_result r;
} done_item;

/* A primary result waiting for its witnesses, and a witness job waiting for a worker. */
typedef struct {
    uint64_t tag;
    cc_result r;
    int outstanding;
} held_item;

/* A job waiting for a worker ahead of new cases: a witness job, or (witness == PRIMARY_JOB) the
 * retry of a case whose worker was killed from outside. */
typedef struct {
    uint64_t tag;
    int witness;
    cc_probe probe;
    cc_case c;
} queued_job;

/* Per witness and device: "" when it initialised, else the sentence saying why it cannot run. */
typedef struct {
    char why[CC_MAX_WITNESSES][CC_DEVICE_COUNT][256];
} witness_readiness;

struct cc_pool {
    cc_pool_config cfg;
    worker *w;
    int n;
    done_item *q;
    size_t q_head, q_n, q_cap;
    size_t pending;
    pid_t parent;
    int fatal;
    char fatal_msg[512];
    char description[512];
    cc_platform platform[CC_DEVICE_COUNT]; /* the first worker's (key "": not initialised) */
    struct sigaction old_pipe;
    int pipe_saved;
    held_item *held;
    size_t n_held, cap_held;
    queued_job *wq; /* witness jobs and retries */
    size_t wq_head, wq_n, wq_cap;
    witness_readiness ready; /* --no-fork: the witnesses as this process initialised them */
    int interrupted;         /* the signal read from cfg.interrupt_fd, or 0 */
};

/* ---- small helpers ------------------------------------------------------------------------ */

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

int cc_online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (n > 1024 ? 1024 : (int)n) : 1;
}

static void case_elements(const cc_case *c, int64_t *in_total, int64_t *out)
{
    *in_total = 0;
    for (int i = 0; i < c->n_in; i++)
        *in_total += ref_numel(&c->shape[i]);
    ref_shape os;
    ref_err e = {{0}};
    *out = c->op && c->op->shape(&c->params, c->n_in, c->shape, &os, &e) == REF_OK
               ? ref_numel(&os)
               : 0;
}

double cc_case_timeout(const cc_case *c, double base)
{
    if (!(base > 0))
        base = CC_POOL_DEFAULT_TIMEOUT;
    int64_t in, out;
    case_elements(c, &in, &out);
    return base + 1e-6 * (double)(in + out) * (double)(c->n_in > 0 ? c->n_in : 1);
}

const char *cc_signal_name(int sig)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {{SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
                 {SIGILL, "SIGILL"},   {SIGABRT, "SIGABRT"}, {SIGKILL, "SIGKILL"},
                 {SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"},   {SIGHUP, "SIGHUP"},
                 {SIGQUIT, "SIGQUIT"}, {SIGTRAP, "SIGTRAP"}, {SIGSYS, "SIGSYS"},
                 {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGXCPU, "SIGXCPU"},
                 {SIGXFSZ, "SIGXFSZ"}, {SIGUSR1, "SIGUSR1"}, {SIGUSR2, "SIGUSR2"}};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (names[k].sig == sig)
            return names[k].name;
    return "an unnamed signal";
}

/* 1: all n bytes; 0: EOF before the first byte; -1: error or EOF part way. */
static int read_full(int fd, void *buf, size_t n)
{
    size_t have = 0;
    while (have < n) {
        ssize_t r = read(fd, (char *)buf + have, n - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r == 0 && have == 0 ? 0 : -1;
        have += (size_t)r;
    }
    return 1;
}

static void __attribute__((format(printf, 2, 3))) set_fatal(cc_pool *pool, const char *fmt, ...)
{
    if (pool->fatal)
        return;
    pool->fatal = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pool->fatal_msg, sizeof pool->fatal_msg, fmt, ap);
    va_end(ap);
}

/* A signal on the caller's interrupt fd stops the pool (fatal, with the signal's name). */
static void check_interrupt(cc_pool *pool)
{
#ifdef __linux__
    struct signalfd_siginfo si;
    if (pool->cfg.interrupt_fd > 0 && !pool->interrupted &&
        read(pool->cfg.interrupt_fd, &si, sizeof si) == (ssize_t)sizeof si) {
        pool->interrupted = (int)si.ssi_signo;
        set_fatal(pool, "interrupted by %s", cc_signal_name(pool->interrupted));
    }
#else
    (void)pool;
#endif
}

int cc_pool_interrupted(const cc_pool *pool)
{
    return pool ? pool->interrupted : 0;
}

static int push_result(cc_pool *pool, uint64_t tag, const cc_result *r)
{
    if (pool->q_head > 0 && pool->q_head == pool->q_n)
        pool->q_head = pool->q_n = 0;
    if (pool->q_n == pool->q_cap) {
        if (pool->q_head > 0) {
            memmove(pool->q, pool->q + pool->q_head, (pool->q_n - pool->q_head) * sizeof *pool->q);
            pool->q_n -= pool->q_head;
            pool->q_head = 0;
        } else {
            done_item *grown = cc_grow(pool->q, pool->q_n, &pool->q_cap, sizeof *grown, 8);
            if (!grown) {
                set_fatal(pool, "out of memory queueing a result");
                return -1;
            }
            pool->q = grown;
        }
    }
    pool->q[pool->q_n].tag = tag;
    pool->q[pool->q_n].r = *r;
    pool->q_n++;
    return 0;
}

/* ---- witnesses (harness/run/witness.h) ----------------------------------------------------- */

static void init_witnesses(const cc_pool_config *cfg, witness_readiness *ready)
{
    memset(ready, 0, sizeof *ready);
    for (int k = 0; k < cfg->n_witnesses; k++)
        for (int d = 0; d < CC_DEVICE_COUNT; d++) {
            const cc_provider *w = cfg->witnesses[k];
            if (!(cfg->devices & (1u << d)))
                continue;
            char msg[200];
            if (cc_provider_init(w, (cc_device)d, msg, sizeof msg) != CC_OK)
                snprintf(ready->why[k][d], sizeof ready->why[k][d],
                         "witness %s cannot run on %s: %s", w->name,
                         cc_device_name((cc_device)d), msg);
        }
}

static void run_witness_job(const cc_pool_config *cfg, const witness_readiness *ready, int k,
                            const cc_case *c, const cc_probe *probe, cc_witness *out)
{
    const cc_provider *w = cfg->witnesses[k];
    const char *why = ready->why[k][c->device < CC_DEVICE_COUNT ? c->device : 0];
    if (why[0])
        cc_witness_set_missing(out, w->name, CC_RES_UNSUPPORTED, why);
    else
        cc_witness_run(w, c, &cfg->run, probe, out);
}

/* The witnesses are all in: name them (the parent's names, not a worker's) and judge. */
static void finish_witnessed(const cc_pool_config *cfg, cc_result *r)
{
    r->n_witnesses = cfg->n_witnesses;
    for (int k = 0; k < cfg->n_witnesses; k++)
        snprintf(r->witnesses[k].provider, sizeof r->witnesses[k].provider, "%s",
                 cfg->witnesses[k]->name);
    r->verdict = cc_witness_verdict(r);
}

/* Room for n more queued jobs: the first of them (the queue grows by n), or NULL (fatal). */
static queued_job *queue_jobs(cc_pool *pool, size_t n)
{
    size_t need = pool->wq_n + n;
    if (need > pool->wq_cap) {
        size_t cap = pool->wq_cap ? 2 * pool->wq_cap : 16;
        while (cap < need)
            cap *= 2;
        queued_job *q = realloc(pool->wq, cap * sizeof *q);
        if (!q) {
            set_fatal(pool, "out of memory queueing a job");
            return NULL;
        }
        pool->wq = q;
        pool->wq_cap = cap;
    }
    queued_job *first = &pool->wq[pool->wq_n];
    memset(first, 0, n * sizeof *first);
    pool->wq_n = need;
    return first;
}

/* A primary result of case c: delivered now, or held while its witnesses run. */
static void primary_done(cc_pool *pool, uint64_t tag, const cc_case *c, const cc_result *r)
{
    if (pool->cfg.n_witnesses == 0 || !cc_witness_wanted(r)) {
        push_result(pool, tag, r);
        return;
    }
    held_item *grown = cc_grow(pool->held, pool->n_held, &pool->cap_held, sizeof *grown, 8);
    if (!grown) {
        set_fatal(pool, "out of memory holding a result for its witnesses");
        return;
    }
    pool->held = grown;
    queued_job *jobs = queue_jobs(pool, pool->cfg.n_witnesses);
    if (!jobs)
        return;
    held_item *h = &pool->held[pool->n_held++];
    h->tag = tag;
    h->r = *r;
    h->r.n_witnesses = 0;
    h->outstanding = pool->cfg.n_witnesses;
    cc_probe probe;
    cc_witness_probe_of(r, &probe);
    for (int k = 0; k < pool->cfg.n_witnesses; k++) {
        queued_job *j = &jobs[k];
        j->tag = tag;
        j->witness = k;
        j->probe = probe;
        j->c = *c;
    }
}

/* Witness k of the held result `tag` is in; the result goes out with the last one. */
static void witness_done(cc_pool *pool, uint64_t tag, int k, const cc_witness *w)
{
    for (size_t i = 0; i < pool->n_held; i++) {
        held_item *h = &pool->held[i];
        if (h->tag != tag)
            continue;
        h->r.witnesses[k] = *w;
        if (--h->outstanding > 0)
            return;
        finish_witnessed(&pool->cfg, &h->r);
        push_result(pool, tag, &h->r);
        pool->held[i] = pool->held[--pool->n_held];
        return;
    }
}

/* ---- platforms ------------------------------------------------------------------------------ */

/* After init, in the process that ran it: the platform of every device the pool initialised. */
static void detect_platforms(const cc_pool_config *cfg, const char *desc,
                             cc_platform out[CC_DEVICE_COUNT])
{
    for (int d = 0; d < CC_DEVICE_COUNT; d++) {
        memset(&out[d], 0, sizeof out[d]);
        if (cfg->devices & (1u << d))
            cc_platform_detect(desc[0] ? desc : cfg->provider->name, (cc_device)d,
                               cc_level_name(cfg->cpu_level), &out[d]);
    }
}

static void stamp(cc_result *r, const char keys[CC_DEVICE_COUNT][CC_PLATFORM_KEY_MAX])
{
    snprintf(r->platform, sizeof r->platform, "%s",
             (unsigned)r->device < CC_DEVICE_COUNT ? keys[r->device] : "");
}

/* ---- the worker process ------------------------------------------------------------------- */

#ifdef __GLIBC__
int on_exit(void (*fn)(int, void *), void *arg); /* glibc; not declared under strict POSIX */
static void leave_now(int status, void *arg)
{
    (void)arg;
    _exit(status);
}
#else
static void leave_now(void)
{
    _exit(0); /* the status exit() was given is not known here */
}
#endif

void cc_exit_leaves_at_once(void)
{
    /* registered last, so it runs first: exit() in a provider ends the process with its
     * status at once, instead of running the destructors of everything this process inherited
     * (libtorch's take seconds, and may wait for threads a forked child does not have) */
#ifdef __GLIBC__
    on_exit(leave_now, NULL);
#else
    atexit(leave_now);
#endif
}

static _Noreturn void worker_exit(int code)
{
#ifdef CAPCHECK_COVERAGE
    __gcov_dump();
#endif
    _exit(code);
}

static _Noreturn void worker_main(const cc_pool *pool, int job_fd, int res_fd,
                                  cc_guard_note *note)
{
    setpgid(0, 0);
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    if (getppid() != pool->parent) /* the parent died before the line above */
        worker_exit(0);
    /* a crash must end the worker: handlers this process inherited (a test framework's, a
     * sanitizer's) are reset, and nothing stays blocked; init may install its own */
    static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE,  SIGILL, SIGABRT, SIGTRAP,
                                        SIGSYS,  SIGPIPE, SIGTERM, SIGINT, SIGHUP,  SIGQUIT,
                                        SIGALRM, SIGXCPU, SIGXFSZ, SIGCHLD};
    for (size_t k = 0; k < sizeof crash_signals / sizeof crash_signals[0]; k++)
        signal(crash_signals[k], SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    cc_exit_leaves_at_once();
    cc_level_apply(pool->cfg.cpu_level); /* before ATen or oneDNN first read it */
    cc_runner_keep_memory();
    const cc_provider *p = pool->cfg.provider;
    res_msg m;
    memset(&m, 0, sizeof m);
    m.magic = MSG_MAGIC;
    m.kind = MSG_HELLO;
    m.init_ok = 1;
    for (int d = 0; d < CC_DEVICE_COUNT && m.init_ok; d++) {
        if (!(pool->cfg.devices & (1u << d)))
            continue;
        char msg[384];
        if (cc_provider_init(p, (cc_device)d, msg, sizeof msg) != CC_OK) {
            m.init_ok = 0;
            snprintf(m.text, sizeof m.text, "provider %s cannot run on %s: %s", p->name,
                     cc_device_name((cc_device)d), msg);
        }
    }
    if (m.init_ok) {
        cc_provider_describe(p, m.description, sizeof m.description);
        detect_platforms(&pool->cfg, m.description, m.platform);
    }
    witness_readiness ready;
    if (m.init_ok)
        init_witnesses(&pool->cfg, &ready);
    if (cc_write_fully(res_fd, &m, sizeof m) || !m.init_ok)
        worker_exit(0);
    cc_guard_install(note); /* after init: a provider's own handlers stay behind it */
    cc_guard_cache cache = {0};
    cc_vjp_modes modes;
    memset(&modes, 0, sizeof modes);
    cc_run_options run = pool->cfg.run;
    run.guard_cache = &cache; /* this worker's mappings, reused from case to case */
    run.vjp_modes = &modes;   /* and the vjpModes its providers gave */
    job_msg j;
    for (;;) {
        int rc = read_full(job_fd, &j, sizeof j);
        if (rc == 0)
            worker_exit(0); /* the parent closed the pool */
        if (rc < 0 || j.magic != MSG_MAGIC)
            worker_exit(3);
        memset(&m, 0, sizeof m);
        m.magic = MSG_MAGIC;
        m.tag = j.tag;
        cc_guard_note_expect(j.tag);
        if (j.witness == PRIMARY_JOB) {
            m.kind = MSG_RESULT;
            cc_run_case_probed(p, &j.c, &run, NULL, &m.r);
        } else if (j.witness >= 0 && j.witness < pool->cfg.n_witnesses) {
            m.kind = MSG_WITNESS;
            run_witness_job(&pool->cfg, &ready, j.witness, &j.c, &j.probe, &m.witness);
        } else {
            worker_exit(3);
        }
        if (cc_write_fully(res_fd, &m, sizeof m))
            worker_exit(3);
    }
}

/* ---- the parent side ---------------------------------------------------------------------- */

static void close_fds(worker *w)
{
    if (w->job_fd >= 0)
        close(w->job_fd);
    if (w->res_fd >= 0)
        close(w->res_fd);
    w->job_fd = w->res_fd = -1;
}

static int spawn(cc_pool *pool, int k)
{
    worker *w = &pool->w[k];
    int jp[2], rp[2];
    if (!w->note) { /* one note page per worker slot, kept across replacements */
        void *pg = mmap(NULL, sizeof(cc_guard_note), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (pg == MAP_FAILED)
            return -1;
        w->note = pg;
    }
    memset(w->note, 0, sizeof *w->note);
    if (pipe(jp))
        return -1;
    if (pipe(rp)) {
        close(jp[0]);
        close(jp[1]);
        return -1;
    }
    fflush(NULL); /* a child must not write out this process's buffered output again */
    pid_t pid = fork();
    if (pid < 0) {
        close(jp[0]);
        close(jp[1]);
        close(rp[0]);
        close(rp[1]);
        return -1;
    }
    if (pid == 0) {
        /* the provider's prints go to stderr, a line at a time (a worker ends with _exit: a
         * buffer would be lost) */
        int real_stdout = cc_stdout_divert();
        if (real_stdout >= 0)
            close(real_stdout);
        setvbuf(stdout, NULL, _IOLBF, BUFSIZ);
        /* only this worker may hold the write end of its result pipe: the parent sees EOF
         * exactly when the worker is gone */
        for (int i = 0; i < pool->n; i++)
            if (i != k)
                close_fds(&pool->w[i]);
        if (pool->cfg.interrupt_fd > 0) /* the parent's signals are the parent's */
            close(pool->cfg.interrupt_fd);
        close(jp[1]);
        close(rp[0]);
        worker_main(pool, jp[0], rp[1], w->note);
    }
    setpgid(pid, pid); /* also done by the child; whichever runs first */
    close(jp[0]);
    close(rp[1]);
    fcntl(jp[1], F_SETFD, FD_CLOEXEC);
    fcntl(rp[0], F_SETFD, FD_CLOEXEC);
    fcntl(rp[0], F_SETFL, fcntl(rp[0], F_GETFL) | O_NONBLOCK);
    w->pid = pid;
    w->job_fd = jp[1];
    w->res_fd = rp[0];
    w->state = W_STARTING;
    w->have = 0;
    w->started = cc_monotonic_seconds();
    w->deadline = w->started + pool->cfg.init_timeout;
    return 0;
}

static void kill_worker(const worker *w)
{
    kill(-w->pid, SIGKILL);
    kill(w->pid, SIGKILL);
}

/* Reap a worker whose result pipe closed and say how it ended; one that lingers after closing
 * it is killed. */
static void reap(worker *w, char *why, size_t n, int *signal_out)
{
    int st = 0;
    *signal_out = 0;
    for (int waited = 0;; waited++) {
        pid_t r = waitpid(w->pid, &st, WNOHANG);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(why, n, "ended");
            return;
        }
        if (r == w->pid)
            break;
        if (waited >= 2000) {
            kill_worker(w);
            while (waitpid(w->pid, &st, 0) < 0 && errno == EINTR)
                ;
            snprintf(why, n, "closed its result pipe without a result (and was killed)");
            return;
        }
        sleep_ms(1);
    }
    if (WIFSIGNALED(st)) {
        *signal_out = WTERMSIG(st);
        snprintf(why, n, "was killed by %s (%s)", cc_signal_name(WTERMSIG(st)),
                 strsignal(WTERMSIG(st)));
    }
    else if (WIFEXITED(st))
        snprintf(why, n, "exited with status %d", WEXITSTATUS(st));
    else
        snprintf(why, n, "ended");
}

/* "aten", or "aten (and witnesses openblas, reference)": what a worker initialises. */
static void provider_names(const cc_pool_config *cfg, char *buf, size_t n)
{
    size_t used = (size_t)snprintf(buf, n, "%s", cfg->provider->name);
    for (int k = 0; k < cfg->n_witnesses && used < n; k++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", k ? ", " : " (and witnesses ",
                                 cfg->witnesses[k]->name);
    if (cfg->n_witnesses && used < n)
        snprintf(buf + used, n - used, ")");
}

static void made_up_result(const cc_pool *pool, const worker *w, cc_result_status s,
                           const char *msg, cc_result *r)
{
    cc_result_begin(pool->cfg.provider, &w->c, r);
    int64_t in, out;
    case_elements(&w->c, &in, &out);
    r->elements = out;
    r->status = s;
    snprintf(r->message, sizeof r->message, "%s", msg);
    r->seconds = cc_monotonic_seconds() - w->started;
    stamp(r, w->platform);
}

/* A worker ended by SIGKILL or SIGTERM that the pool did not send was killed from outside (the
 * OOM killer, an operator), not by its case: the case runs once more before it is a crash. */
static int killed_from_outside(int sig)
{
    return sig == SIGKILL || sig == SIGTERM;
}

/* Worker k is gone (`why` says how, unless it timed out; `sig` the signal that ended it, 0 for
 * none or one the pool sent); its case becomes a crash or timeout result, or runs again when an
 * outside kill ended its first run, and a replacement is forked. */
static void worker_gone(cc_pool *pool, int k, const char *why, int timed_out, int sig)
{
    worker *w = &pool->w[k];
    int was = w->state;
    close_fds(w);
    w->state = W_DEAD;
    if (was == W_STARTING) {
        char names[256];
        provider_names(&pool->cfg, names, sizeof names);
        if (timed_out)
            set_fatal(pool, "a worker did not finish initialising provider %s within %g s (the "
                            "limit is --timeout, %g s without it); it was killed",
                      names, pool->cfg.init_timeout, CC_POOL_DEFAULT_INIT_TIMEOUT);
        else
            set_fatal(pool, "a worker initialising provider %s %s", names, why);
        return;
    }
    /* a guard fault left its note: the case read or wrote outside a buffer */
    int oob = !timed_out && w->note && w->note->magic == CC_GUARD_NOTE_MAGIC &&
              w->note->tag == w->tag;
    if (oob)
        w->note->message[sizeof w->note->message - 1] = 0;
    if (was == W_BUSY && w->witness != PRIMARY_JOB) {
        /* a witness's crash or hang is that witness's result; the primary's stands */
        const char *name = pool->cfg.witnesses[w->witness]->name;
        char msg[256];
        if (oob)
            snprintf(msg, sizeof msg, "%.250s", w->note->message);
        else if (timed_out)
            snprintf(msg, sizeof msg,
                     "no result within this case's time limit of %.6g s; the worker running "
                     "witness %s was killed",
                     w->limit, name);
        else
            snprintf(msg, sizeof msg, "the worker running this case on witness %s %s", name,
                     why);
        cc_witness wit;
        cc_witness_set_missing(&wit, name,
                               oob ? CC_RES_OUT_OF_BOUNDS
                                   : timed_out ? CC_RES_TIMEOUT : CC_RES_CRASH,
                               msg);
        witness_done(pool, w->tag, w->witness, &wit);
    } else if (was == W_BUSY && !timed_out && killed_from_outside(sig) && !w->retry) {
        queued_job *j = queue_jobs(pool, 1);
        if (j) {
            j->tag = w->tag;
            j->witness = PRIMARY_JOB;
            j->c = w->c;
        }
    } else if (was == W_BUSY) {
        cc_result r;
        char msg[384];
        if (timed_out) {
            int64_t in, out;
            case_elements(&w->c, &in, &out);
            snprintf(msg, sizeof msg,
                     "no result within this case's time limit of %.6g s (%.6g s + 1 us x %lld "
                     "elements x %d inputs); the worker was killed",
                     w->limit, pool->cfg.timeout_base, (long long)(in + out), w->c.n_in);
            made_up_result(pool, w, CC_RES_TIMEOUT, msg, &r);
        } else if (oob) {
            made_up_result(pool, w, CC_RES_OUT_OF_BOUNDS, w->note->message, &r);
        } else if (w->retry && killed_from_outside(sig)) {
            snprintf(msg, sizeof msg, "the worker running this case %s, and so was the worker "
                                      "that ran it again: killed from outside twice (the OOM "
                                      "killer?), not known to be the case's fault", why);
            made_up_result(pool, w, CC_RES_CRASH, msg, &r);
        } else {
            snprintf(msg, sizeof msg, "the worker running this case %s", why);
            made_up_result(pool, w, CC_RES_CRASH, msg, &r);
        }
        r.retried = w->retry;
        primary_done(pool, w->tag, &w->c, &r); /* a crashed case may still have witnesses */
    }
    if (!pool->fatal && spawn(pool, k))
        set_fatal(pool, "cannot fork a replacement worker: %s", strerror(errno));
}

/* Kill worker k now (a timeout, or a message the protocol does not allow). */
static void kill_and_reap(cc_pool *pool, int k, int timed_out)
{
    worker *w = &pool->w[k];
    kill_worker(w);
    while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
        ;
    worker_gone(pool, k, "sent a message the pool protocol does not allow (and was killed)",
                timed_out, 0);
}

static void handle_message(cc_pool *pool, int k)
{
    worker *w = &pool->w[k];
    res_msg *m = &w->in;
    w->have = 0;
    if (m->magic == MSG_MAGIC && m->kind == MSG_HELLO && w->state == W_STARTING) {
        if (!m->init_ok) {
            cc_text_clean(m->text, sizeof m->text);
            set_fatal(pool, "%s", m->text);
            kill_worker(w);
            while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
                ;
            close_fds(w);
            w->state = W_DEAD;
            return;
        }
        for (int d = 0; d < CC_DEVICE_COUNT; d++) {
            cc_platform_end_strings(&m->platform[d]); /* plain data from another process */
            memcpy(w->platform[d], m->platform[d].key, sizeof w->platform[d]);
        }
        if (!pool->description[0]) {
            cc_text_clean(m->description, sizeof m->description);
            snprintf(pool->description, sizeof pool->description, "%s",
                     m->description[0] ? m->description : pool->cfg.provider->name);
            memcpy(pool->platform, m->platform, sizeof pool->platform);
        }
        w->state = W_IDLE;
        return;
    }
    cc_result *r = &m->r;
    if (m->magic == MSG_MAGIC && m->kind == MSG_RESULT && w->state == W_BUSY &&
        w->witness == PRIMARY_JOB && m->tag == w->tag && (unsigned)r->status < CC_RES_COUNT &&
        (unsigned)r->dtype < CC_DTYPE_COUNT && (unsigned)r->device < CC_DEVICE_COUNT &&
        (unsigned)r->layout < CC_LAYOUT_COUNT) {
        /* a result is plain data from another process: keep its strings ended */
        r->line[sizeof r->line - 1] = r->op[sizeof r->op - 1] = 0;
        r->provider[sizeof r->provider - 1] = r->vjp_mode[sizeof r->vjp_mode - 1] = 0;
        r->worst_output[sizeof r->worst_output - 1] = 0;
        cc_text_clean(r->message, sizeof r->message);
        r->worst_index[sizeof r->worst_index - 1] = r->worst_inputs[sizeof r->worst_inputs - 1] = 0;
        r->n_witnesses = 0;
        r->retried = w->retry;
        stamp(r, w->platform);
        primary_done(pool, w->tag, &w->c, r);
        w->state = W_IDLE;
        return;
    }
    cc_witness *wit = &m->witness;
    if (m->magic == MSG_MAGIC && m->kind == MSG_WITNESS && w->state == W_BUSY &&
        w->witness != PRIMARY_JOB && m->tag == w->tag && (unsigned)wit->status < CC_RES_COUNT) {
        wit->provider[sizeof wit->provider - 1] = 0;
        cc_text_clean(wit->message, sizeof wit->message);
        witness_done(pool, w->tag, w->witness, wit);
        w->state = W_IDLE;
        return;
    }
    kill_and_reap(pool, k, 0); /* a message the protocol does not allow: treat as a crash */
}

static void handle_readable(cc_pool *pool, int k)
{
    worker *w = &pool->w[k];
    for (;;) {
        ssize_t r = read(w->res_fd, (char *)&w->in + w->have, sizeof w->in - w->have);
        if (r > 0) {
            w->have += (size_t)r;
            if (w->have == sizeof w->in) {
                handle_message(pool, k);
                if (w->state == W_DEAD || w->res_fd < 0)
                    return;
            }
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        char why[256];
        int sig;
        reap(w, why, sizeof why, &sig);
        worker_gone(pool, k, why, 0, sig);
        return;
    }
}

static int idle_worker(const cc_pool *pool)
{
    for (int i = 0; i < pool->n; i++)
        if (pool->w[i].state == W_IDLE)
            return i;
    return -1;
}

/* Hand a job to idle worker k. Returns 0, or -1 when the worker had died while idle (nothing
 * of the job ran; it is replaced and the caller tries again). */
static int send_job(cc_pool *pool, int k, uint64_t tag, int witness, const cc_probe *probe,
                    const cc_case *c)
{
    worker *w = &pool->w[k];
    job_msg j;
    memset(&j, 0, sizeof j);
    j.magic = MSG_MAGIC;
    j.kind = 0;
    j.tag = tag;
    j.witness = witness;
    if (probe)
        j.probe = *probe;
    j.c = *c;
    w->tag = tag;
    w->witness = witness;
    w->retry = 0;
    w->c = *c;
    w->started = cc_monotonic_seconds();
    w->limit = cc_case_timeout(c, pool->cfg.timeout_base);
    w->deadline = w->started + w->limit;
    if (cc_write_fully(w->job_fd, &j, sizeof j)) {
        kill_worker(w);
        while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        worker_gone(pool, k, "died while idle", 0, 0);
        return -1;
    }
    w->state = W_BUSY;
    return 0;
}

/* Queued jobs (witness jobs, retries) go to idle workers before any new case: a held result
 * or a pending case waits on them. */
static void dispatch_queued(cc_pool *pool)
{
    while (pool->wq_head < pool->wq_n && !pool->fatal) {
        int k = idle_worker(pool);
        if (k < 0)
            return;
        const queued_job *q = &pool->wq[pool->wq_head];
        if (send_job(pool, k, q->tag, q->witness, &q->probe, &q->c) == 0) {
            pool->w[k].retry = q->witness == PRIMARY_JOB;
            pool->wq_head++;
        }
    }
    if (pool->wq_head == pool->wq_n)
        pool->wq_head = pool->wq_n = 0;
}

/* Wait for the next event (a message, a death, a deadline) and handle it. */
static void pump(cc_pool *pool)
{
    struct pollfd *pf = calloc((size_t)pool->n + 1, sizeof *pf);
    int *idx = calloc((size_t)pool->n + 1, sizeof *idx);
    if (!pf || !idx) {
        free(pf);
        free(idx);
        set_fatal(pool, "out of memory");
        return;
    }
    int nf = 0;
    double next = INFINITY, now = cc_monotonic_seconds();
    for (int k = 0; k < pool->n; k++) {
        worker *w = &pool->w[k];
        if (w->state == W_DEAD)
            continue;
        pf[nf].fd = w->res_fd;
        pf[nf].events = POLLIN;
        idx[nf++] = k;
        if ((w->state == W_STARTING || w->state == W_BUSY) && w->deadline < next)
            next = w->deadline;
    }
    if (nf == 0) {
        set_fatal(pool, "no worker is left");
        free(pf);
        free(idx);
        return;
    }
    int watched = nf; /* the workers; then the caller's interrupt fd, when there is one */
    if (pool->cfg.interrupt_fd > 0) {
        pf[nf].fd = pool->cfg.interrupt_fd;
        pf[nf].events = POLLIN;
        idx[nf++] = -1;
    }
    int ms = -1;
    if (isfinite(next)) {
        double wait = (next - now) * 1000.0 + 1.0;
        ms = wait <= 0 ? 0 : wait > INT_MAX ? INT_MAX : (int)wait;
    }
    int rc = poll(pf, (nfds_t)nf, ms);
    if (rc < 0 && errno != EINTR)
        set_fatal(pool, "poll failed: %s", strerror(errno));
    for (int i = 0; rc > 0 && i < watched; i++)
        if (pf[i].revents && pool->w[idx[i]].res_fd == pf[i].fd)
            handle_readable(pool, idx[i]);
    if (rc > 0 && nf > watched && pf[watched].revents)
        check_interrupt(pool);
    now = cc_monotonic_seconds();
    for (int k = 0; k < pool->n && !pool->fatal; k++) {
        worker *w = &pool->w[k];
        if ((w->state == W_STARTING || w->state == W_BUSY) && now >= w->deadline)
            kill_and_reap(pool, k, 1);
    }
    free(pf);
    free(idx);
    dispatch_queued(pool);
}

/* ---- the API ------------------------------------------------------------------------------ */

static void stop_workers(cc_pool *pool)
{
    for (int k = 0; k < pool->n; k++) {
        worker *w = &pool->w[k];
        if (w->state == W_DEAD)
            continue;
        if (w->state == W_BUSY || w->state == W_STARTING)
            kill_worker(w);
        close(w->job_fd); /* an idle worker leaves at EOF */
        w->job_fd = -1;
    }
    double until = cc_monotonic_seconds() + 2.0;
    for (int k = 0; k < pool->n; k++) {
        worker *w = &pool->w[k];
        if (w->state == W_DEAD)
            continue;
        for (;;) {
            pid_t r = waitpid(w->pid, NULL, WNOHANG);
            if (r == w->pid || (r < 0 && errno != EINTR))
                break;
            if (cc_monotonic_seconds() > until) {
                kill_worker(w);
                while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
                    ;
                break;
            }
            sleep_ms(1);
        }
        close_fds(w);
        w->state = W_DEAD;
    }
}

int cc_pool_start(const cc_pool_config *cfg, cc_pool **out, char *msg, size_t msg_len)
{
    *out = NULL;
    if (!cfg->provider) {
        snprintf(msg, msg_len, "no provider");
        return -1;
    }
    if (cfg->n_witnesses < 0 || cfg->n_witnesses > CC_MAX_WITNESSES ||
        (cfg->n_witnesses && !cfg->witnesses)) {
        snprintf(msg, msg_len, "at most %d witnesses", CC_MAX_WITNESSES);
        return -1;
    }
    cc_pool *pool = calloc(1, sizeof *pool);
    if (!pool) {
        snprintf(msg, msg_len, "out of memory");
        return -1;
    }
    pool->cfg = *cfg;
    if (pool->cfg.workers <= 0)
        pool->cfg.workers = cc_online_cpus();
    if (!pool->cfg.devices)
        pool->cfg.devices = 1u << CC_CPU;
    if (!(pool->cfg.timeout_base > 0))
        pool->cfg.timeout_base = CC_POOL_DEFAULT_TIMEOUT;
    if (!(pool->cfg.init_timeout > 0))
        pool->cfg.init_timeout = CC_POOL_DEFAULT_INIT_TIMEOUT;
    pool->parent = getpid();
    const cc_provider *p = cfg->provider;
    if (pool->cfg.in_process) {
        cc_level_apply(pool->cfg.cpu_level); /* this process is the worker */
        cc_runner_keep_memory();
        int real_stdout = cc_stdout_divert();
        for (int d = 0; d < CC_DEVICE_COUNT; d++) {
            if (!(pool->cfg.devices & (1u << d)))
                continue;
            char why[384];
            if (cc_provider_init(p, (cc_device)d, why, sizeof why) != CC_OK) {
                cc_stdout_restore(real_stdout);
                snprintf(msg, msg_len, "provider %s cannot run on %s: %s", p->name,
                         cc_device_name((cc_device)d), why);
                free(pool);
                return -1;
            }
        }
        init_witnesses(&pool->cfg, &pool->ready);
        cc_provider_describe(p, pool->description, sizeof pool->description);
        detect_platforms(&pool->cfg, pool->description, pool->platform);
        cc_stdout_restore(real_stdout);
        *out = pool;
        return 0;
    }
    pool->n = pool->cfg.workers;
    pool->w = calloc((size_t)pool->n, sizeof *pool->w);
    if (!pool->w) {
        free(pool);
        snprintf(msg, msg_len, "out of memory");
        return -1;
    }
    for (int k = 0; k < pool->n; k++)
        pool->w[k].job_fd = pool->w[k].res_fd = -1;
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    pool->pipe_saved = sigaction(SIGPIPE, &ign, &pool->old_pipe) == 0;
    for (int k = 0; k < pool->n && !pool->fatal; k++)
        if (spawn(pool, k))
            set_fatal(pool, "cannot start a worker process: %s", strerror(errno));
    for (;;) {
        int starting = 0;
        for (int k = 0; k < pool->n; k++)
            starting += pool->w[k].state == W_STARTING;
        if (pool->fatal || !starting)
            break;
        pump(pool);
    }
    if (pool->fatal) {
        snprintf(msg, msg_len, "%s", pool->fatal_msg);
        cc_pool_close(pool);
        return -1;
    }
    if (!pool->description[0])
        snprintf(pool->description, sizeof pool->description, "%s", p->name);
    *out = pool;
    return 0;
}

const char *cc_pool_description(const cc_pool *pool)
{
    return pool->description;
}

const cc_platform *cc_pool_platform(const cc_pool *pool, cc_device dev)
{
    return (unsigned)dev < CC_DEVICE_COUNT && pool->platform[dev].key[0] ? &pool->platform[dev]
                                                                         : NULL;
}

int cc_pool_size(const cc_pool *pool)
{
    return pool->cfg.in_process ? 1 : pool->n;
}

size_t cc_pool_pending(const cc_pool *pool)
{
    return pool->pending;
}

int cc_pool_submit(cc_pool *pool, uint64_t tag, const cc_case *c, char *msg, size_t msg_len)
{
    if (pool->cfg.in_process) {
        check_interrupt(pool);
        if (pool->fatal) {
            snprintf(msg, msg_len, "%s", pool->fatal_msg);
            return -1;
        }
        cc_result r;
        int real_stdout = cc_stdout_divert();
        cc_run_case_probed(pool->cfg.provider, c, &pool->cfg.run, NULL, &r);
        snprintf(r.platform, sizeof r.platform, "%s",
                 (unsigned)r.device < CC_DEVICE_COUNT ? pool->platform[r.device].key : "");
        if (pool->cfg.n_witnesses && cc_witness_wanted(&r)) {
            cc_probe probe;
            cc_witness_probe_of(&r, &probe);
            for (int k = 0; k < pool->cfg.n_witnesses; k++)
                run_witness_job(&pool->cfg, &pool->ready, k, c, &probe, &r.witnesses[k]);
            finish_witnessed(&pool->cfg, &r);
        }
        cc_stdout_restore(real_stdout);
        if (push_result(pool, tag, &r)) {
            snprintf(msg, msg_len, "%s", pool->fatal_msg);
            return -1;
        }
        pool->pending++;
        return 0;
    }
    for (;;) {
        if (pool->fatal) {
            snprintf(msg, msg_len, "%s", pool->fatal_msg);
            return -1;
        }
        dispatch_queued(pool);
        int k = idle_worker(pool);
        if (k < 0) {
            pump(pool);
            continue;
        }
        if (send_job(pool, k, tag, PRIMARY_JOB, NULL, c))
            continue; /* it died while idle: nothing of this case ran; try another */
        pool->pending++;
        return 0;
    }
}

int cc_pool_poll(cc_pool *pool, uint64_t *tag, cc_result *r)
{
    if (pool->q_head == pool->q_n)
        return 1;
    done_item *d = &pool->q[pool->q_head++];
    if (tag)
        *tag = d->tag;
    *r = d->r;
    pool->pending--;
    return 0;
}

int cc_pool_wait(cc_pool *pool, uint64_t *tag, cc_result *r, char *msg, size_t msg_len)
{
    for (;;) {
        if (cc_pool_poll(pool, tag, r) == 0)
            return 0;
        if (pool->fatal) {
            snprintf(msg, msg_len, "%s", pool->fatal_msg);
            return -1;
        }
        if (pool->pending == 0)
            return 1;
        pump(pool);
    }
}

int cc_pool_run_one(cc_pool *pool, const cc_case *c, cc_result *r, char *msg, size_t msg_len)
{
    uint64_t tag = 0;
    if (cc_pool_submit(pool, UINT64_MAX, c, msg, msg_len))
        return -1;
    for (;;) {
        int rc = cc_pool_wait(pool, &tag, r, msg, msg_len);
        if (rc > 0)
            snprintf(msg, msg_len, "the case was lost by the pool");
        if (rc)
            return -1;
        if (tag == UINT64_MAX)
            return 0;
    }
}

void cc_pool_close(cc_pool *pool)
{
    if (!pool)
        return;
    if (pool->w) {
        stop_workers(pool);
        for (int k = 0; k < pool->n; k++)
            if (pool->w[k].note)
                munmap(pool->w[k].note, sizeof(cc_guard_note));
        free(pool->w);
    }
    if (pool->pipe_saved)
        sigaction(SIGPIPE, &pool->old_pipe, NULL);
    free(pool->q);
    free(pool->held);
    free(pool->wq);
    free(pool);
}
