/* A provider that misbehaves on request, for the hardening tests (tests/test_harden.c). Without a
 * mode it is a correct provider of add (f32, f64, any strided view) with its VJP; every other op
 * is unsupported. CAPCHECK_MISBEHAVE=<mode> picks one fault:
 *
 *   hang-init, segv-init, exit-init            init sleeps forever, segfaults, or exit(0)s
 *   hang-forward, segv-forward, exit-forward   the same in forward
 *   hang-load, segv-load, exit-load            the same in the library's constructor (dlopen)
 *   hang-entry, segv-entry, exit-entry         the same in capcheck_provider_v1()
 *   unterminated    forward fails with a message that fills its buffer with no NUL and bytes
 *                   that are not UTF-8; describe() does the same to its buffer
 *   zeros-novjp     the table has no vjp, and forward writes all zeros (wrong, ratio >> 1)
 *   error-forward   forward fails with an error of its own (CC_FAILED: the case is `error`)
 *   oom-forward     forward fails as a kernel out of device memory does ("CUDA out of
 *                   memory. Tried to allocate ..."): the case could not be judged
 *   sigkill-forward forward raises SIGKILL every time, as the OOM killer would send it
 *   wait-for-kill   the first forward call anywhere (CAPCHECK_MISBEHAVE_MARK names a file the
 *                   call creates, holding its pid) sleeps until something outside kills its
 *                   process; every later call is correct
 *   stdout          prints "misbehave: stdout from WHERE" to its stdout in the constructor,
 *                   the entry point, init, forward, vjp and describe, once through printf
 *                   (left in stdio's buffer) and once with write(1, ...); its forward is
 *                   correct up to 16 elements and one off beyond (something to shrink)
 *   flaky-forward   forward calls are counted in CAPCHECK_MISBEHAVE_MARK (a byte each, in every
 *                   process); every second one anywhere writes zeros (a case run twice: one
 *                   pass, one fail)
 *   ulp-forward     the same, every second call one ulp above the sum (both pass, in other bits)
 *
 * It depends on abi/capcheck_provider.h alone, like any plugin. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "providers/plugins/plugin_views.h"
#include "abi/capcheck_provider.h"

static int mode_is(const char *name)
{
    const char *m = getenv("CAPCHECK_MISBEHAVE");
    return m && strcmp(m, name) == 0;
}

static void sleep_forever(void)
{
    for (;;) {
        struct timespec s = {3600, 0};
        nanosleep(&s, NULL);
    }
}

/* What every fault mode does at `where` ("load", "entry", "init" or "forward"). */
static void misbehave(const char *where)
{
    if (mode_is("stdout")) {
        char line[80];
        int n = snprintf(line, sizeof line, "misbehave: stdout from %s (write)\n", where);
        printf("misbehave: stdout from %s (printf)\n", where);
        if (write(STDOUT_FILENO, line, (size_t)n) != n)
            _exit(9);
    }
    char mode[32];
    snprintf(mode, sizeof mode, "hang-%s", where);
    if (mode_is(mode))
        sleep_forever();
    snprintf(mode, sizeof mode, "segv-%s", where);
    if (mode_is(mode))
        raise(SIGSEGV);
    snprintf(mode, sizeof mode, "exit-%s", where);
    if (mode_is(mode))
        exit(0);
}

/* A buffer filled to its last byte with text that is not UTF-8 and has no terminating NUL. */
static void fill_unterminated(char *buf, size_t len)
{
    static const char pattern[] = "bad \xff\xfe bytes \xc3 ";
    for (size_t i = 0; i < len; i++)
        buf[i] = pattern[i % (sizeof pattern - 1)];
}

static cc_status mb_init(void *ctx, cc_device device, char *msg, size_t len)
{
    (void)ctx;
    misbehave("init");
    if (device != CC_CPU) {
        snprintf(msg, len, "the misbehave plugin runs on the CPU only");
        return CC_UNSUPPORTED;
    }
    return CC_OK;
}

static cc_status supported(const cc_call *call, char *msg, size_t len)
{
    if (strcmp(call->op, "add") != 0 || (call->dtype != CC_F32 && call->dtype != CC_F64)) {
        snprintf(msg, len, "the misbehave plugin implements add in f32 and f64 only");
        return CC_UNSUPPORTED;
    }
    return CC_OK;
}

/* wait-for-kill: the first call anywhere creates the mark (holding its pid) and waits. */
static void wait_for_kill_once(void)
{
    const char *mark = getenv("CAPCHECK_MISBEHAVE_MARK");
    if (!mode_is("wait-for-kill") || !mark)
        return;
    int fd = open(mark, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0)
        return; /* a later call: behave */
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (write(fd, pid, (size_t)n) != n)
        _exit(9);
    close(fd);
    sleep_forever();
}

/* flaky-forward, ulp-forward: whether this is an even-numbered forward call anywhere (the mark
 * file grows by a byte per call; its size after this call's byte is the count). */
static int even_call(void)
{
    const char *mark = getenv("CAPCHECK_MISBEHAVE_MARK");
    if (!mark || !(mode_is("flaky-forward") || mode_is("ulp-forward")))
        return 0;
    int fd = open(mark, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0)
        return 0;
    off_t size = write(fd, "x", 1) == 1 ? lseek(fd, 0, SEEK_END) : 1;
    close(fd);
    return size % 2 == 0;
}

static cc_status mb_forward(void *ctx, const cc_call *call, cc_view *out, char *msg, size_t len)
{
    (void)ctx;
    misbehave("forward");
    if (mode_is("sigkill-forward"))
        raise(SIGKILL);
    wait_for_kill_once();
    if (mode_is("unterminated")) {
        fill_unterminated(msg, len);
        return CC_FAILED;
    }
    if (mode_is("error-forward") || mode_is("oom-forward")) {
        snprintf(msg, len, "%s", mode_is("error-forward")
                                     ? "the kernel rejected its launch configuration"
                                     : "CUDA out of memory. Tried to allocate 2.00 GiB");
        return CC_FAILED;
    }
    cc_status st = supported(call, msg, len);
    if (st != CC_OK)
        return st;
    int even = even_call(), zeros = mode_is("zeros-novjp") || (even && mode_is("flaky-forward")),
        ulp = even && mode_is("ulp-forward");
    int64_t n = cc_plugin_numel(out);
    for (int64_t i = 0; i < n; i++) {
        double y = cc_plugin_load(&call->in[0], i) + cc_plugin_load(&call->in[1], i);
        if (ulp && call->dtype == CC_F64)
            y = nextafter(y, INFINITY);
        cc_plugin_store(out, i, zeros ? 0.0 : y);
    }
    if (mode_is("stdout") && n > 16)
        cc_plugin_store(out, 0, cc_plugin_load(out, 0) + 1.0);
    return CC_OK;
}

/* add: da = g, db = g. */
static cc_status mb_vjp(void *ctx, const cc_call *call, const cc_view *g, cc_view *grads,
                        char *msg, size_t len)
{
    (void)ctx;
    misbehave("vjp");
    cc_status st = supported(call, msg, len);
    if (st != CC_OK)
        return st;
    for (int k = 0; k < 2; k++)
        if (grads[k].data)
            for (int64_t i = 0, n = cc_plugin_numel(g); i < n; i++)
                cc_plugin_store(&grads[k], i, cc_plugin_load(g, i));
    return CC_OK;
}

static void mb_describe(void *ctx, char *buf, size_t len)
{
    (void)ctx;
    misbehave("describe");
    if (mode_is("unterminated"))
        fill_unterminated(buf, len);
    else /* the same words in every mode: a run resumed in another mode is the same set-up */
        snprintf(buf, len, "misbehave plugin");
}

static cc_provider table = {CC_PROVIDER_ABI_VERSION, "misbehave", NULL, mb_init, mb_forward,
                            mb_vjp, mb_describe, NULL, NULL};

__attribute__((constructor)) static void mb_loaded(void)
{
    misbehave("load");
}

__attribute__((visibility("default"))) const cc_provider *capcheck_provider_v1(void)
{
    misbehave("entry");
    table.vjp = mode_is("zeros-novjp") ? NULL : mb_vjp;
    return &table;
}
