/* The planted-bug suite: the smoke cases and tests/mutants.cases through the mutants plugin
 * (tests/plugins/mutants.c), once with no mutant (every case must pass: no false alarms), once
 * per correct variant (each must pass every case of its op too), and once per mutant (each must
 * be caught: at least one case fails, errs or crashes). Each mutant runs in a child process, so
 * a mutant that crashes is caught as a crash. Prints the kill rate "mutants killed: K/N"; every
 * mutant must be killed. A mutant only the probabilistic bound or the rounding-bias test sees
 * also runs judged by the worst-case bound alone (as before them), where it must pass. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/guard.h"
#include "harness/case/edge_class.h"
#include "harness/case/case.h"
#include "harness/run/plugin.h"
#include "harness/run/runner.h"
#include "test_util.h"

#define MUTANTS_LIB CAPCHECK_PLUGIN_DIR "/mutants.so"

typedef const char *(*catalogue_fn)(int);
typedef int (*repeat_fn)(int);
typedef const char *(*op_fn)(int);
typedef const char *(*seen_by_fn)(int);

typedef struct {
    long counts[CC_RES_COUNT];
    long placement; /* cases flagged placement-sensitive (runner.h) */
    char first[CC_CASE_LINE_MAX]; /* the first case that did not pass */
    char first_msg[384];
} tally;

static cc_case_list load_cases(void)
{
    cc_case_list l = {0};
    const char *files[] = {CAPCHECK_SOURCE_DIR "/cases/smoke.cases",
                           CAPCHECK_SOURCE_DIR "/tests/mutants.cases"};
    for (size_t i = 0; i < 2; i++)
        if (cc_t_load_cases(files[i], &l))
            fail_msg("cannot parse %s", files[i]);
    return l;
}

static void run_all(const cc_provider *p, const cc_case_list *l, int repeat,
                    int worst_case_only, tally *t)
{
    memset(t, 0, sizeof *t);
    cc_guard_cache cache = {0}; /* kept from case to case, as a worker keeps its mappings */
    cc_run_options o = {.repeat = repeat, .guard_cache = &cache,
                        .worst_case_only = worst_case_only};
    for (size_t i = 0; i < l->n; i++) {
        cc_result r;
        cc_run_case_probed(p, &l->v[i], &o, NULL, &r);
        t->counts[r.status]++;
        t->placement += r.placement_sensitive != 0;
        if (r.status != CC_RES_PASS && !t->first[0]) {
            snprintf(t->first, sizeof t->first, "%s", r.line);
            snprintf(t->first_msg, sizeof t->first_msg, "%s", r.message);
        }
    }
}

/* Run the suite under CAPCHECK_MUTANT=name (NULL: unset) in a child, `repeat` provider calls per
 * check. Returns 0 with *t, or the signal that ended the child (a guard page's fault, in this
 * process without the pool's handler, ends it with SIGSEGV). */
static int run_mutant(const cc_provider *p, const cc_case_list *l, const char *name, int repeat,
                      int worst_case_only, tally *t)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        /* cmocka traps these to report a failed test; here a crash must end the child */
        int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
        for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++)
            signal(sigs[k], SIG_DFL);
        if (name)
            setenv("CAPCHECK_MUTANT", name, 1);
        else
            unsetenv("CAPCHECK_MUTANT");
        char msg[256] = "";
        if (p->init(p->ctx, CC_CPU, msg, sizeof msg) != CC_OK) {
            fprintf(stderr, "init: %s\n", msg);
            _exit(3);
        }
        tally res;
        run_all(p, l, repeat, worst_case_only, &res);
        ssize_t w = write(fd[1], &res, sizeof res);
        _exit(w == (ssize_t)sizeof res ? 0 : 4);
    }
    close(fd[1]);
    memset(t, 0, sizeof *t);
    size_t have = 0;
    while (have < sizeof *t) {
        ssize_t n = read(fd[0], (char *)t + have, sizeof *t - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        have += (size_t)n;
    }
    close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFSIGNALED(status))
        return WTERMSIG(status);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(have, sizeof *t);
    return 0;
}

typedef struct {
    cc_plugin *plugin;
    void *dl;
    catalogue_fn name;
    repeat_fn repeat;
    op_fn op;
    seen_by_fn seen_by;
    catalogue_fn variant;
    op_fn variant_op;
    cc_case_list cases;
} fixture;

/* A catalogue function of the plugin, or NULL. */
static void *symbol(void *dl, const char *name)
{
    return dlsym(dl, name);
}

static int setup(void **state)
{
    static fixture fx;
    char msg[512];
    fx.plugin = cc_plugin_open(MUTANTS_LIB, msg, sizeof msg);
    if (!fx.plugin) {
        fprintf(stderr, "%s\n", msg);
        return -1;
    }
    fx.dl = dlopen(MUTANTS_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!fx.dl)
        return -1;
    void *a = dlsym(fx.dl, "capcheck_mutant_name");
    if (!a)
        return -1;
    memcpy(&fx.name, &a, sizeof a);
    void *b = dlsym(fx.dl, "capcheck_mutant_repeat");
    if (!b)
        return -1;
    memcpy(&fx.repeat, &b, sizeof b);
    void *c = dlsym(fx.dl, "capcheck_mutant_op");
    if (!c)
        return -1;
    memcpy(&fx.op, &c, sizeof c);
    void *sb = symbol(fx.dl, "capcheck_mutant_seen_by"), *vn = symbol(fx.dl, "capcheck_variant_name"),
         *vo = symbol(fx.dl, "capcheck_variant_op");
    if (!sb || !vn || !vo)
        return -1;
    memcpy(&fx.seen_by, &sb, sizeof sb);
    memcpy(&fx.variant, &vn, sizeof vn);
    memcpy(&fx.variant_op, &vo, sizeof vo);
    fx.cases = load_cases();
    *state = &fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    cc_case_list_free(&fx->cases);
    dlclose(fx->dl);
    cc_plugin_close(fx->plugin);
    return 0;
}

static void test_no_false_alarms(void **state)
{
    fixture *fx = *state;
    tally t;
    assert_int_equal(run_mutant(cc_plugin_provider(fx->plugin), &fx->cases, NULL, 1, 0, &t), 0);
    printf("unmutated: %ld of %zu cases passed\n", t.counts[CC_RES_PASS], fx->cases.n);
    if (t.first[0])
        printf("  first not passing: %s\n  %s\n", t.first, t.first_msg);
    assert_int_equal(t.counts[CC_RES_PASS], (long)fx->cases.n);
}

/* The cases of l whose op is `op` (every case: op NULL) into *mine. */
static void cases_of(const cc_case_list *l, const char *op, cc_case_list *mine)
{
    memset(mine, 0, sizeof *mine);
    for (size_t i = 0; i < l->n; i++)
        if ((!op || strcmp(l->v[i].op->name, op) == 0) && cc_case_list_push(mine, &l->v[i]))
            fail_msg("out of memory");
}

static void test_every_mutant_is_killed(void **state)
{
    fixture *fx = *state;
    const cc_provider *p = cc_plugin_provider(fx->plugin);
    int n = 0, killed = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (const char *name; (name = fx->name(n)) != NULL; n++) {
        tally t;
        int repeat = fx->repeat(n);
        /* a mutant of one op changes nothing else: the suite's other cases run exactly as the
         * unmutated plugin's, which pass (test_no_false_alarms), so only its op's cases run */
        const char *op = fx->op(n);
        cc_case_list mine = {0};
        if (op)
            cases_of(&fx->cases, op, &mine);
        size_t ran = op ? mine.n : fx->cases.n;
        int sig = run_mutant(p, op ? &mine : &fx->cases, name, repeat, 0, &t);
        const char *seen_by = fx->seen_by(n);
        if (seen_by[0]) { /* judged by the worst-case bound alone, as before: it passes */
            tally before;
            assert_int_equal(run_mutant(p, op ? &mine : &fx->cases, name, repeat, 1, &before), 0);
            printf("         %-24s judged by the worst-case bound alone: %ld of %zu pass (only "
                   "%s sees it)\n", name, before.counts[CC_RES_PASS], ran, seen_by);
            if (before.first[0])
                printf("  first not passing: %s\n  %s\n", before.first, before.first_msg);
            assert_int_equal(before.counts[CC_RES_PASS], (long)ran);
        }
        cc_case_list_free(&mine);
        long caught = t.counts[CC_RES_FAIL] + cc_count_errors(t.counts);
        int dead = sig != 0 || caught > 0;
        killed += dead;
        if (sig)
            printf("killed   %-24s crashed the run (signal %d, %s)%s\n", name, sig,
                   strsignal(sig), repeat > 1 ? " with --repeat 2" : "");
        else if (dead)
            printf("killed   %-24s %ld fail, %ld error of %zu%s; first: %s\n", name,
                   t.counts[CC_RES_FAIL], cc_count_errors(t.counts), ran,
                   repeat > 1 ? " with --repeat 2" : "", t.first);
        else
            printf("SURVIVED %-24s no case failed\n", name);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("mutants killed: %d/%d (%.2f s)\n", killed, n,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    assert_true(n >= 32);
    assert_int_equal(killed, n); /* every planted bug is caught */
}

/* The correct alternative implementations (the plugin's variants: a flash-style attention
 * that writes fully blocked rows as 0; a reduceSum whose order follows its input's alignment;
 * a float32 fold, a blocked sum, a float32 matmul rounded once) pass every case of their op at
 * their repeat, NaN and Inf in blocked V included, the alignment-dependent sum through --repeat
 * 2's moved buffers, and the long sums and f16/bf16 matmuls with no false alarm of the
 * probabilistic bound or the rounding-bias test; the flash attention's mutated twin (no
 * zero-row guard) is among the mutants above. */
static void test_every_variant_passes(void **state)
{
    fixture *fx = *state;
    void *c = dlsym(fx->dl, "capcheck_variant_repeat");
    assert_non_null(c);
    repeat_fn repeat_of;
    memcpy(&repeat_of, &c, sizeof c);
    int n = 0;
    for (const char *name; (name = fx->variant(n)) != NULL; n++) {
        cc_case_list mine;
        cases_of(&fx->cases, fx->variant_op(n), &mine);
        tally t;
        int repeat = repeat_of(n);
        assert_int_equal(run_mutant(cc_plugin_provider(fx->plugin), &mine, name, repeat, 0, &t), 0);
        printf("variant  %-24s %ld of %zu cases passed at --repeat %d, %ld placement-sensitive\n",
               name, t.counts[CC_RES_PASS], mine.n, repeat, t.placement);
        if (t.first[0])
            fail_msg("%s: %s\n  %s", name, t.first, t.first_msg);
        assert_true(mine.n >= 100);
        assert_int_equal(t.counts[CC_RES_PASS], (long)mine.n);
        if (repeat > 1) /* the moved buffers did change its bits: the path was taken */
            assert_true(t.placement > 0);
        cc_case_list_free(&mine);
    }
    assert_true(n >= 5);
}

/* edge=wide (harness/case/edge_class.h) kills the planted kernels whose intermediates leave the
 * dtype's range while the output fits: on the wide cases of their op alone, and for those that
 * only range shows, with every other case of their op passing. */
static void test_wide_catches_intermediates_past_the_range(void **state)
{
    fixture *fx = *state;
    static const struct {
        const char *name, *op;
        int only_wide; /* every non-wide case of the op passes */
    } planted[] = {
        {"layernorm_square_in_dtype", "layerNorm", 1}, /* f16 squares past 65504 */
        {"attention_qk_in_dtype", "attention", 1},     /* f16 q.k past 65504, s q.k not */
        {"mseloss_square_in_dtype", "mseLoss", 1},     /* f16 squared differences */
        {"softmax_no_max_sub", "softmax", 0},          /* exp past 88.7 (709.8 in f64) */
        {"softplus_naive", "softplus", 0},             /* log(1 + exp(x)) */
    };
    for (size_t m = 0; m < sizeof planted / sizeof planted[0]; m++) {
        cc_case_list wide = {0}, rest = {0};
        for (size_t i = 0; i < fx->cases.n; i++) {
            const cc_case *c = &fx->cases.v[i];
            if (strcmp(c->op->name, planted[m].op) == 0 &&
                cc_case_list_push((c->edges >> CC_EDGE_WIDE & 1) ? &wide : &rest, c))
                fail_msg("out of memory");
        }
        tally w, r;
        assert_true(wide.n > 0);
        assert_int_equal(run_mutant(cc_plugin_provider(fx->plugin), &wide, planted[m].name, 1, 0, &w),
                         0);
        assert_int_equal(run_mutant(cc_plugin_provider(fx->plugin), &rest, planted[m].name, 1, 0, &r),
                         0);
        printf("wide     %-26s %ld of %zu wide cases caught; %ld of %zu others\n", planted[m].name,
               w.counts[CC_RES_FAIL] + cc_count_errors(w.counts), wide.n,
               r.counts[CC_RES_FAIL] + cc_count_errors(r.counts), rest.n);
        assert_true(w.counts[CC_RES_FAIL] + cc_count_errors(w.counts) > 0);
        if (planted[m].only_wide)
            assert_int_equal(r.counts[CC_RES_PASS], (long)rest.n);
        cc_case_list_free(&wide);
        cc_case_list_free(&rest);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_false_alarms),
        cmocka_unit_test(test_every_mutant_is_killed),
        cmocka_unit_test(test_every_variant_passes),
        cmocka_unit_test(test_wide_catches_intermediates_past_the_range),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
