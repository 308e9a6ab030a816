/* The worker pool (harness/run/pool.h): a provider that segfaults on one op, aborts on another and
 * hangs on a third leaves every other result intact; the three become crash (with the signal
 * name) and timeout results carrying the case's repro line; dead workers are replaced and the
 * run goes on. Provider init and every provider call happen in a worker, never here. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness/case/case.h"
#include "harness/run/pool.h"
#include "harness/run/runner.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1 /* ASan turns a SIGSEGV into exit(1) after its report */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

typedef struct {
    pid_t test_pid; /* this process: no provider function may run here */
    int init_crashes;
} bad_ctx;

static cc_status bad_init(void *ctx, cc_device d, char *msg, size_t len)
{
    const bad_ctx *b = ctx;
    if (getpid() == b->test_pid) {
        snprintf(msg, len, "init ran in the parent process");
        return CC_FAILED;
    }
    if (b->init_crashes)
        raise(SIGSEGV);
    const cc_provider *ref = cc_reference_provider();
    return ref->init(ref->ctx, d, msg, len);
}

static cc_status bad_forward(void *ctx, const cc_call *call, cc_view *out, char *msg,
                             size_t len)
{
    const bad_ctx *b = ctx;
    if (getpid() == b->test_pid) {
        snprintf(msg, len, "forward ran in the parent process");
        return CC_FAILED;
    }
    if (strcmp(call->op, "exp") == 0) {
        volatile int *nowhere = NULL;
        *nowhere = 1; /* a segfault */
    }
    if (strcmp(call->op, "mul") == 0)
        abort();
    if (strcmp(call->op, "relu") == 0)
        for (;;)
            pause(); /* a hang */
    const cc_provider *ref = cc_reference_provider();
    return ref->forward(ref->ctx, call, out, msg, len);
}

static cc_status bad_vjp(void *ctx, const cc_call *call, const cc_view *g, cc_view *grads,
                         char *msg, size_t len)
{
    (void)ctx;
    const cc_provider *ref = cc_reference_provider();
    return ref->vjp(ref->ctx, call, g, grads, msg, len);
}

static void bad_describe(void *ctx, char *buf, size_t len)
{
    const bad_ctx *b = ctx;
    snprintf(buf, len, "bad provider, described in %s", getpid() == b->test_pid ? "the parent"
                                                                                 : "a worker");
}

static cc_provider bad_provider(bad_ctx *b)
{
    cc_provider p = *cc_reference_provider();
    p.name = "bad";
    p.ctx = b;
    p.init = bad_init;
    p.forward = bad_forward;
    p.vjp = bad_vjp;
    p.describe = bad_describe;
    return p;
}

static const char *cases_text = "add count=6 dtype=f32,f64 size=tiny seed=1\n"
                                "exp count=2 dtype=f32 size=tiny seed=2\n"
                                "softmax count=6 dtype=f32 size=tiny seed=3\n"
                                "relu count=2 dtype=f32 size=tiny seed=4\n"
                                "mul count=2 dtype=f64 size=tiny seed=5\n"
                                "matmul count=4 dtype=f32 size=small seed=6\n";

static void parse_cases(cc_case_list *l)
{
    cc_case_defaults def = {CC_CPU, 0};
    cc_parse_error err;
    memset(l, 0, sizeof *l);
    if (cc_cases_parse_text(cases_text, "pool", &def, l, &err))
        fail_msg("%s:%d: %s", err.file, err.line, err.msg);
}

/* Run every case through a pool; results[i] is case i's. */
static void run_all(const cc_pool_config *cfg, const cc_case_list *l, cc_result *results,
                    char *desc, size_t desc_len)
{
    cc_pool *pool;
    char msg[512];
    if (cc_pool_start(cfg, &pool, msg, sizeof msg))
        fail_msg("cc_pool_start: %s", msg);
    snprintf(desc, desc_len, "%s", cc_pool_description(pool));
    char *seen = calloc(l->n, 1);
    size_t got = 0;
    uint64_t tag;
    cc_result r;
    for (size_t i = 0; i < l->n; i++) {
        if (cc_pool_submit(pool, i, &l->v[i], msg, sizeof msg))
            fail_msg("cc_pool_submit: %s", msg);
        while (cc_pool_poll(pool, &tag, &r) == 0) {
            assert_true(tag < l->n && !seen[tag]);
            seen[tag] = 1;
            results[tag] = r;
            got++;
        }
    }
    int rc;
    while ((rc = cc_pool_wait(pool, &tag, &r, msg, sizeof msg)) == 0) {
        assert_true(tag < l->n && !seen[tag]);
        seen[tag] = 1;
        results[tag] = r;
        got++;
    }
    if (rc < 0)
        fail_msg("cc_pool_wait: %s", msg);
    assert_int_equal(got, l->n);
    assert_int_equal(cc_pool_pending(pool), 0);
    free(seen);
    cc_pool_close(pool);
}

static void test_crash_and_hang_leave_the_rest_intact(void **state)
{
    (void)state;
    cc_case_list l;
    parse_cases(&l);
    bad_ctx b = {getpid(), 0};
    cc_provider p = bad_provider(&b);
    cc_pool_config cfg = {&p, 2, 1u << CC_CPU, 0.3, 0, 0, NULL, 0, 0, {0}, -1};
    cc_result *res = calloc(l.n, sizeof *res);
    char desc[256];
    run_all(&cfg, &l, res, desc, sizeof desc); /* relu hangs forever: only the pool ends it */
    assert_string_equal(desc, "bad provider, described in a worker");
    int crashes = 0, timeouts = 0, passes = 0;
    for (size_t i = 0; i < l.n; i++) {
        char line[CC_CASE_LINE_MAX];
        cc_case_print(&l.v[i], line, sizeof line);
        const cc_result *r = &res[i];
        assert_string_equal(r->line, line); /* every result carries its repro line */
        assert_string_equal(r->provider, "bad");
        assert_string_equal(r->op, l.v[i].op->name);
        const char *op = l.v[i].op->name;
        if (strcmp(op, "exp") == 0 || strcmp(op, "mul") == 0) {
            if (r->status != CC_RES_CRASH)
                fail_msg("%s: expected crash, got %s: %s", line,
                         cc_result_status_name(r->status), r->message);
            const char *sig = strcmp(op, "exp") == 0 ? "killed by SIGSEGV" : "killed by SIGABRT";
            if (!strstr(r->message, sig) && !(UNDER_ASAN && strstr(r->message, "exited")))
                fail_msg("%s: expected '%s' in: %s", line, sig, r->message);
            assert_true(r->elements > 0);
            crashes++;
        } else if (strcmp(op, "relu") == 0) {
            if (r->status != CC_RES_TIMEOUT)
                fail_msg("%s: expected timeout, got %s: %s", line,
                         cc_result_status_name(r->status), r->message);
            assert_non_null(strstr(r->message, "time limit"));
            timeouts++;
        } else {
            if (r->status != CC_RES_PASS)
                fail_msg("%s: expected pass, got %s: %s", line,
                         cc_result_status_name(r->status), r->message);
            assert_true(r->checked_fwd);
            passes++;
        }
    }
    assert_int_equal(crashes, 4);
    assert_int_equal(timeouts, 2);
    assert_int_equal(passes, (int)l.n - 6);
    free(res);
    cc_case_list_free(&l);
}

/* The same cases on one worker, and in this process (--no-fork) for the ones that do not
 * kill it, give the same results as two workers. */
static void test_results_do_not_depend_on_the_pool(void **state)
{
    (void)state;
    cc_case_list l;
    parse_cases(&l);
    size_t k = 0; /* keep the cases a good provider is judged on */
    for (size_t i = 0; i < l.n; i++)
        if (strcmp(l.v[i].op->name, "exp") && strcmp(l.v[i].op->name, "mul") &&
            strcmp(l.v[i].op->name, "relu"))
            l.v[k++] = l.v[i];
    l.n = k;
    const cc_provider *ref = cc_reference_provider();
    cc_result *a = calloc(l.n, sizeof *a), *b = calloc(l.n, sizeof *b), *c = calloc(l.n, sizeof *c);
    char desc[256];
    cc_pool_config one = {ref, 1, 0, 0, 0, 0, NULL, 0, 0, {0}, -1}, three = {ref, 3, 0, 0, 0, 0, NULL, 0, 0, {0}, -1},
                   inproc = {ref, 0, 0, 0, 0, 1, NULL, 0, 0, {0}, -1};
    run_all(&one, &l, a, desc, sizeof desc);
    run_all(&three, &l, b, desc, sizeof desc);
    run_all(&inproc, &l, c, desc, sizeof desc);
    for (size_t i = 0; i < l.n; i++) {
        a[i].seconds = b[i].seconds = c[i].seconds = 0;
        assert_memory_equal(&a[i], &b[i], sizeof a[i]);
        assert_memory_equal(&a[i], &c[i], sizeof a[i]);
        assert_int_equal(a[i].status, CC_RES_PASS);
    }
    free(a);
    free(b);
    free(c);
    cc_case_list_free(&l);
}

static void test_init_failures_are_one_sentence(void **state)
{
    (void)state;
    char msg[512];
    cc_pool *pool = NULL;
    /* the reference cannot run on CUDA: its init says so, from the worker */
    cc_pool_config cuda = {cc_reference_provider(), 2, 1u << CC_CUDA, 0, 0, 0, NULL, 0, 0, {0}, -1};
    assert_int_equal(cc_pool_start(&cuda, &pool, msg, sizeof msg), -1);
    assert_null(pool);
    assert_non_null(strstr(msg, "provider reference cannot run on cuda"));
    /* an init that crashes is named, and the start fails cleanly */
    bad_ctx b = {getpid(), 1};
    cc_provider p = bad_provider(&b);
    cc_pool_config crash = {&p, 2, 0, 0, 0, 0, NULL, 0, 0, {0}, -1};
    assert_int_equal(cc_pool_start(&crash, &pool, msg, sizeof msg), -1);
    if (!strstr(msg, "initialising provider bad") ||
        !(strstr(msg, "SIGSEGV") || (UNDER_ASAN && strstr(msg, "exited"))))
        fail_msg("unexpected message: %s", msg);
}

static void test_run_one_and_the_timeout_rule(void **state)
{
    (void)state;
    bad_ctx b = {getpid(), 0};
    cc_provider p = bad_provider(&b);
    cc_pool_config cfg = {&p, 1, 0, 0.2, 0, 0, NULL, 0, 0, {0}, -1};
    cc_pool *pool;
    char msg[512];
    if (cc_pool_start(&cfg, &pool, msg, sizeof msg))
        fail_msg("%s", msg);
    cc_case_defaults def = {CC_CPU, 0};
    cc_case c;
    cc_parse_error err;
    cc_result r;
    /* a crash, then the replacement worker serves the next case */
    assert_int_equal(cc_case_parse("exp dtype=f32 in=[3] seed=1", &def, &c, &err), 0);
    assert_int_equal(cc_pool_run_one(pool, &c, &r, msg, sizeof msg), 0);
    assert_int_equal(r.status, CC_RES_CRASH);
    assert_string_equal(r.line,
                        "exp dtype=f32 device=cpu in=[3] stream=2 layout=contig check=both seed=1");
    assert_int_equal(cc_case_parse("add dtype=f32 in=[3],[3] seed=1", &def, &c, &err), 0);
    assert_int_equal(cc_pool_run_one(pool, &c, &r, msg, sizeof msg), 0);
    assert_int_equal(r.status, CC_RES_PASS);
    cc_pool_close(pool);

    /* limit = base + 1 us x (input + output elements) x inputs */
    assert_int_equal(cc_case_parse("matmul dtype=f32 in=[100,200],[200,50] seed=1", &def, &c,
                                   &err),
                     0);
    double want = 10.0 + 1e-6 * (20000 + 10000 + 5000) * 2;
    assert_true(cc_case_timeout(&c, 10.0) > want - 1e-9 && cc_case_timeout(&c, 10.0) < want + 1e-9);
    assert_true(cc_case_timeout(&c, 0) > want - 1e-9 && cc_case_timeout(&c, 0) < want + 1e-9);
    assert_string_equal(cc_signal_name(SIGSEGV), "SIGSEGV");
    assert_string_equal(cc_signal_name(SIGABRT), "SIGABRT");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crash_and_hang_leave_the_rest_intact),
        cmocka_unit_test(test_results_do_not_depend_on_the_pool),
        cmocka_unit_test(test_init_failures_are_one_sentence),
        cmocka_unit_test(test_run_one_and_the_timeout_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
