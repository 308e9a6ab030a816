#define _POSIX_C_SOURCE 200809L
#include "harness/tools/bench.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/bulk.h"
#include "core/clock.h"
#include "core/files.h"
#include "core/json.h"
#include "core/text.h"
#include "harness/case/materialize.h"
#include "harness/run/pool.h"
#include "harness/run/runner.h"
#include "harness/run/sample.h"
#include "harness/run/watch.h"
#include "harness/session/journal.h"

/* One case made ready for every loop: inputs, the provider's output buffers, the reference's. */
typedef struct {
    const cc_case *c;
    size_t index; /* in the run's case list (the journal record's index) */
    cc_inputs in;
    cc_call call;
    int fwd, vjp; /* which calls the case makes (its check= and whether the op has a VJP) */
    cc_view out, grads[REF_MAX_INPUTS];
    ref_tensor y, grad[REF_MAX_INPUTS];
    ref_mag mag, gmag[REF_MAX_INPUTS];
    /* a case the run samples (harness/run/sample.h): the reference loop evaluates these picks of
     * the output (plan[0]) and of each gradient (plan[1 + i]), values into picks[] */
    int sampled;
    cc_sample plan[1 + REF_MAX_INPUTS];
    ref_picks picks[1 + REF_MAX_INPUTS];
} prepared;

typedef struct {
    const cc_provider *p;
    cc_run_options run;
    prepared *cases;
    size_t n;
    cc_journal *journal;
    size_t status_count[CC_RES_COUNT]; /* the capcheck loop's results, first round */
    cc_guard_cache guard_cache;        /* the capcheck loop's mappings, kept as a worker's are */
    cc_vjp_modes vjp_modes;            /* and its vjpModes */
    int counted;
    int failed;      /* a loop saw a call fail that had succeeded before */
    char msg[512];
} bench_state;

static void prepared_free(prepared *pc)
{
    cc_inputs_free(&pc->in);
    cc_free_big(pc->out.data);
    free(pc->y.v);
    ref_mag_free(&pc->mag);
    for (int i = 0; i < REF_MAX_INPUTS; i++) {
        cc_free_big(pc->grads[i].data);
        free(pc->grad[i].v);
        ref_mag_free(&pc->gmag[i]);
    }
    for (int k = 0; k <= REF_MAX_INPUTS; k++) {
        cc_sample_free(&pc->plan[k]);
        free(pc->picks[k].v);
        ref_mag_free(&pc->picks[k].mag);
    }
}

static int is_data_input(const ref_op *op, int i)
{
    int k = i < op->max_inputs ? i : op->max_inputs - 1;
    return op->input_kind[k < REF_MAX_INPUTS ? k : REF_MAX_INPUTS - 1] == REF_IN_DATA;
}

static double *zeros(int64_t n)
{
    return calloc((size_t)(n > 0 ? n : 1), sizeof(double));
}

/* The provider's calls on a prepared case (the provider loop's body); CC_OK or its status. */
static cc_status provider_calls(const cc_provider *p, prepared *pc, char *msg, size_t len)
{
    cc_status st = CC_OK;
    if (pc->fwd)
        st = p->forward(p->ctx, &pc->call, &pc->out, msg, len);
    if (st == CC_OK && pc->vjp)
        st = p->vjp(p->ctx, &pc->call, &pc->in.g_view, pc->grads, msg, len);
    if (st != CC_OK)
        cc_text_clean(msg, len);
    return st;
}

/* The reference as the run evaluates it: the sampled forms at the plan's picks, or in full. */
static ref_status reference_calls(prepared *pc)
{
    const cc_case *c = pc->c;
    if (pc->sampled) {
        ref_status rs = REF_OK;
        if (pc->fwd)
            rs = c->op->forward_at(&c->params, c->n_in, pc->in.ref_in, &pc->picks[0]);
        if (rs == REF_OK && pc->vjp)
            rs = c->op->vjp_at(&c->params, c->n_in, pc->in.ref_in, &pc->in.g, &pc->picks[1]);
        return rs;
    }
    ref_status rs = c->op->forward(&c->params, c->n_in, pc->in.ref_in, &pc->y, &pc->mag);
    if (rs == REF_OK && pc->vjp)
        rs = c->op->vjp(&c->params, c->n_in, pc->in.ref_in, &pc->y, &pc->in.g, pc->grad,
                        pc->gmag);
    return rs;
}

/* Prepare case c; 0 when it takes part, 1 when it is too large, 2 when the provider or the
 * reference does not run it, -1 when out of memory. */
static int prepare(const cc_provider *p, const cc_case *c, size_t index, int64_t max_elements,
                   const cc_run_options *run, int ratio_only, prepared *pc)
{
    memset(pc, 0, sizeof *pc);
    pc->c = c;
    pc->index = index;
    char msg[256] = "";
    if (cc_case_largest_tensor(c) > max_elements)
        return 1;
    if (cc_materialize(c, &pc->in, msg, sizeof msg))
        return 2;
    pc->fwd = c->check != CC_CHECK_VJP;
    pc->vjp = c->check != CC_CHECK_FWD && c->op->vjp != NULL;
    pc->call = (cc_call){c->op->name, &c->params, c->device, c->dtype, c->n_in, pc->in.view};
    int64_t ny = ref_numel(&pc->in.out_shape);
    pc->y = (ref_tensor){pc->in.out_shape, zeros(ny)};
    if (!pc->y.v || ref_mag_alloc(ny, &pc->mag) || cc_alloc_output(c->dtype, &pc->in.out_shape, &pc->out))
        return -1;
    pc->sampled = cc_sampling_chosen(c, run->ref, &pc->in);
    for (int k = -1; pc->sampled && k < c->n_in; k++) {
        cc_sample *s = &pc->plan[k + 1];
        if (k >= 0 && !is_data_input(c->op, k))
            continue; /* no gradient: no picks */
        if (cc_sample_plan(c, k, k < 0 ? &pc->in.out_shape : &c->shape[k], s))
            return -1;
        pc->picks[k + 1] = (ref_picks){s->count, s->at,
                                       malloc(sizeof(double) * (size_t)(s->count + 1)),
                                       {NULL, NULL, NULL}};
        if (!pc->picks[k + 1].v || ref_mag_alloc(s->count, &pc->picks[k + 1].mag))
            return -1;
    }
    for (int i = 0; pc->vjp && i < c->n_in; i++) {
        pc->grad[i].shape = c->shape[i];
        if (!is_data_input(c->op, i))
            continue;
        int64_t n = ref_numel(&c->shape[i]);
        pc->grad[i].v = zeros(n);
        if (!pc->grad[i].v || ref_mag_alloc(n, &pc->gmag[i]) ||
            cc_alloc_output(c->dtype, &c->shape[i], &pc->grads[i]))
            return -1;
    }
    if (provider_calls(p, pc, msg, sizeof msg) != CC_OK ||
        (!ratio_only && reference_calls(pc) != REF_OK))
        return 2;
    return 0;
}

/* ---- the four loops: one round each, over every prepared case ---------------------------- */

static void round_provider(bench_state *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (provider_calls(s->p, &s->cases[i], s->msg, sizeof s->msg) != CC_OK)
            s->failed = 1;
}

/* The whole per-case path as run does it: guarded buffers (core/guard.h), or plain heap blocks
 * (--no-guard), the difference being the guards' cost. */
static void capcheck_path(bench_state *s, int guarded)
{
    cc_run_options o = s->run; /* --ref, --ref-threads; judged strict, no power */
    o.repeat = 1;
    o.unguarded = !guarded;
    o.guard_cache = &s->guard_cache;
    o.vjp_modes = &s->vjp_modes;
    o.accumulation = CC_ACC_STRICT;
    o.power = 0;
    for (size_t i = 0; i < s->n; i++) {
        cc_result r;
        cc_run_case_probed(s->p, s->cases[i].c, &o, NULL, &r);
        if (!s->counted && guarded)
            s->status_count[r.status]++;
        if (cc_journal_append(s->journal, s->cases[i].index, &r, s->msg, sizeof s->msg))
            s->failed = 1;
    }
    s->counted |= guarded;
}

static void round_capcheck(bench_state *s)
{
    capcheck_path(s, 1);
}

static void round_unguarded(bench_state *s)
{
    capcheck_path(s, 0);
}

static void round_materialize(bench_state *s)
{
    for (size_t i = 0; i < s->n; i++) {
        cc_inputs in;
        char msg[256];
        if (cc_materialize(s->cases[i].c, &in, msg, sizeof msg) == 0)
            cc_inputs_free(&in);
        else
            s->failed = 1;
    }
}

static void round_reference(bench_state *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (reference_calls(&s->cases[i]) != REF_OK)
            s->failed = 1;
}

enum { LOOP_PROVIDER, LOOP_CAPCHECK, LOOP_MATERIALIZE, LOOP_REFERENCE, LOOP_UNGUARDED,
       LOOP_COUNT };
static const char *const loop_names[LOOP_COUNT] = {"provider", "capcheck", "materialize",
                                                   "reference", "unguarded"};
static void (*const loop_rounds[LOOP_COUNT])(bench_state *) = {
    round_provider, round_capcheck, round_materialize, round_reference, round_unguarded};
static const char *const loop_what[LOOP_COUNT] = {
    "the provider's forward and VJP calls alone",
    "capcheck's whole per-case path, journaled (guarded buffers)",
    "drawing and laying out the inputs",
    "the float64 reference forward and VJP, sampled where the run samples",
    "capcheck's per-case path with plain heap buffers (--no-guard)"};

/* Whole rounds until min_seconds have passed; cases per second. */
static double measure(bench_state *s, int loop, double min_seconds)
{
    double t0 = cc_monotonic_seconds(), t;
    long rounds = 0;
    do {
        loop_rounds[loop](s);
        rounds++;
        t = cc_monotonic_seconds() - t0;
    } while (t < min_seconds);
    return (double)rounds * (double)s->n / t;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int write_json(const char *path, const cc_provider *p, const cc_case *first,
                      const bench_state *s, size_t n_total, size_t too_large, size_t not_run,
                      size_t sampled, const cc_bench_opts *o, const double *rate, FILE *log)
{
    cc_write_atomic w;
    FILE *f = cc_write_atomic_open(&w, path);
    if (!f) {
        fprintf(log, "capcheck bench: cannot write %s: %s\n", w.tmp, strerror(errno));
        return -1;
    }
    fprintf(f, "{\"schema\":\"capcheck-bench/1\",\"provider\":");
    cc_json_write_string(f, p->name);
    fprintf(f, ",\"device\":\"%s\",\"source\":", cc_device_name(first->device));
    cc_json_write_string(f, o->source);
    fprintf(f, ",\"cases\":%zu,\"measured\":%zu,\"too_large\":%zu,\"not_run\":%zu,"
               "\"max_elements\":%lld,\"min_seconds\":%g,\"repetitions\":%d,"
               "\"ref\":\"%s\",\"ref_threads\":%d,\"sampled\":%zu,\"cases_per_second\":{",
            n_total, s->n, too_large, not_run, (long long)o->max_elements, o->min_seconds,
            o->repetitions, cc_ref_mode_names[s->run.ref], s->run.threads, sampled);
    for (int k = 0; k < LOOP_COUNT; k++)
        if (rate[k] > 0) /* a loop --ratio-only left out has none */
            fprintf(f, "%s\"%s\":%.6g", k ? "," : "", loop_names[k], rate[k]);
    fprintf(f, "},\"ratio_capcheck_to_provider\":%.6g}\n",
            rate[LOOP_CAPCHECK] / rate[LOOP_PROVIDER]);
    if (cc_write_atomic_close(&w, 0, 0)) {
        fprintf(log, "capcheck bench: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

typedef struct {
    const cc_provider *p;
    const cc_case *cases;
    size_t n;
    const cc_bench_opts *opts;
    FILE *out, *log;
} bench_args;

/* The options with their defaults filled in (and repetitions at most 64, the samples' room). */
static cc_bench_opts bench_defaults(const cc_bench_opts *given)
{
    cc_bench_opts o = *given;
    if (o.min_seconds <= 0)
        o.min_seconds = 0.2;
    if (o.repetitions <= 0)
        o.repetitions = 5;
    if (o.repetitions > 64)
        o.repetitions = 64;
    if (o.max_elements <= 0)
        o.max_elements = 1024;
    return o;
}

/* What preparing the cases left out, and how many of the measured ones the reference samples. */
typedef struct {
    size_t sampled, too_large, not_run;
} bench_tally;

/* Every case prepared (its first calls made, each under a limit), the measurable ones into
 * s->cases. 0, or -1 when memory ran out (said on log). */
static int prepare_cases(cc_watch *w, bench_state *s, const cc_case *cases, size_t n,
                         const cc_bench_opts *o, bench_tally *t, FILE *log)
{
    for (size_t i = 0; i < n; i++) {
        char line[CC_CASE_LINE_MAX], what[CC_CASE_LINE_MAX + 32];
        cc_case_print(&cases[i], line, sizeof line);
        snprintf(what, sizeof what, "the first calls of '%.200s'", line);
        cc_watch_phase(w, cc_case_timeout(&cases[i], o->timeout_base), what);
        int k = prepare(s->p, &cases[i], i, o->max_elements, &s->run, o->ratio_only,
                        &s->cases[s->n]);
        if (k < 0) {
            prepared_free(&s->cases[s->n]);
            fprintf(log, "capcheck bench: out of memory preparing the cases\n");
            return -1;
        }
        if (k == 0) {
            t->sampled += s->cases[s->n].sampled;
            s->n++;
            continue;
        }
        prepared_free(&s->cases[s->n]);
        *(k == 1 ? &t->too_large : &t->not_run) += 1;
    }
    return 0;
}

/* What is measured, how: the lines above the table. */
static void print_bench_header(FILE *out, const bench_state *s, const cc_case *cases, size_t n,
                               const cc_bench_opts *o, const bench_tally *t)
{
    const cc_provider *p = s->p;
    char desc[256];
    cc_provider_describe(p, desc, sizeof desc);
    int own = strcmp(desc, p->name) != 0; /* it describes itself */
    fprintf(out, "bench: %zu of %zu cases from %s on %s %s%s%s%s\n", s->n, n, o->source, p->name,
            cc_device_name(cases[0].device), own ? " (" : "", own ? desc : "", own ? ")" : "");
    fprintf(out, "       left out: %zu larger than %lld elements, %zu not run by the provider\n",
            t->too_large, (long long)o->max_elements, t->not_run);
    fprintf(out, "       reference: --ref %s, %d thread%s; %zu of the %zu cases sampled\n",
            cc_ref_mode_names[s->run.ref], s->run.threads, s->run.threads == 1 ? "" : "s",
            t->sampled, s->n);
    fprintf(out, "       %d repetitions of >= %.2g s per loop, loops taking turns; medians\n",
            o->repetitions, o->min_seconds);
}

/* The loops, taking turns for o->repetitions rounds after a warm-up, each under a limit;
 * rate[k] the median cases/s of loop k (the first `loops`). t_prepare: what preparing took. */
static void time_loops(cc_watch *w, bench_state *s, const cc_bench_opts *o, double t_prepare,
                       int loops, double *rate, FILE *log)
{
    /* a loop's measurement takes min_seconds and at most one more round; a round costs about
     * what preparing took (one call of each case): ten times that, plus a case's base limit.
     * --ratio-only prepares without the reference, whose cost is then unknown: a round may take
     * what run gives its cases (cc_case_timeout) */
    double round_limit = 10 * t_prepare +
                         (o->timeout_base > 0 ? o->timeout_base : CC_POOL_DEFAULT_TIMEOUT);
    for (size_t i = 0; o->ratio_only && i < s->n; i++)
        round_limit += cc_case_timeout(s->cases[i].c, o->timeout_base);
    double loop_limit = o->min_seconds + round_limit;
    double samples[LOOP_COUNT][64];
    cc_watch_phase(w, LOOP_COUNT * loop_limit, "the warm-up rounds");
    for (int k = 0; k < loops && !o->ratio_only; k++) /* warm-up: caches, lazy initialisation */
        loop_rounds[k](s);
    int tty = isatty(fileno(log));
    for (int rep = 0; rep < o->repetitions; rep++) {
        if (tty)
            fprintf(log, "bench: repetition %d/%d\r", rep + 1, o->repetitions);
        for (int k = 0; k < loops; k++) {
            char what[64];
            snprintf(what, sizeof what, "timing the %s loop", loop_names[k]);
            cc_watch_phase(w, loop_limit, what);
            samples[k][rep] = measure(s, k, o->min_seconds);
        }
    }
    if (tty)
        fprintf(log, "%*s\r", 40, "");
    for (int k = 0; k < loops; k++)
        rate[k] = median(samples[k], o->repetitions);
}

/* The table of the loops, the ratio against the goals, and capcheck's results. */
static void print_bench_results(FILE *out, const bench_state *s, const double *rate, int loops)
{
    fprintf(out, "\n%-12s %12s %10s %12s  %s\n", "loop", "cases/s", "us/case", "vs provider",
            "what it times");
    for (int k = 0; k < loops; k++)
        fprintf(out, "%-12s %12.0f %10.2f %12.3f  %s\n", loop_names[k], rate[k], 1e6 / rate[k],
                rate[k] / rate[LOOP_PROVIDER], loop_what[k]);
    double ratio = rate[LOOP_CAPCHECK] / rate[LOOP_PROVIDER];
    /* issue 17's goals: half the bare calls' rate on small cases, a third on realistic sizes
     * (where a case is the kernel's work, not capcheck's fixed cost) */
    fprintf(out, "\ncapcheck / provider = %.3f (goal: >= 0.5 on small cases, %s; >= 1/3 on "
                 "realistic sizes, %s)\n",
            ratio, ratio >= 0.5 ? "met" : "not met", ratio >= 1.0 / 3.0 ? "met" : "not met");
    fprintf(out, "capcheck's results on these cases:");
    for (int k = 0; k < CC_RES_COUNT; k++)
        if (s->status_count[k])
            fprintf(out, " %zu %s", s->status_count[k], cc_result_status_name((cc_result_status)k));
    fprintf(out, "\n");
}

/* The bench itself, in the watched child (harness/watch.h): init, then every phase under a
 * limit, so a provider that hangs or dies is one sentence from the parent. */
static int bench_in_child(cc_watch *w, void *arg)
{
    const bench_args *a = arg;
    const cc_provider *p = a->p;
    const cc_case *cases = a->cases;
    size_t n = a->n;
    FILE *out = a->out, *log = a->log;
    /* the bench's lines keep the real stdout; the provider's prints go to stderr (this child
     * exits after it: the copy is flushed then) */
    if (out == stdout) {
        int real_stdout = cc_stdout_divert();
        FILE *own = real_stdout >= 0 ? fdopen(real_stdout, "w") : NULL;
        if (own)
            out = own;
        else
            cc_stdout_restore(real_stdout);
    }
    char why[384];
    if (cc_provider_init(p, cases[0].device, why, sizeof why) != CC_OK) {
        fprintf(log, "capcheck bench: provider %s cannot run on %s: %s\n", p->name,
                cc_device_name(cases[0].device), why);
        return 2;
    }
    cc_bench_opts o = bench_defaults(a->opts);
    cc_runner_keep_memory(); /* as the workers of a run do */
    bench_state s = {.p = p, .run = o.run, .cases = calloc(n ? n : 1, sizeof(prepared))};
    if (s.run.threads <= 0)
        s.run.threads = 1;
    if (!s.cases) {
        fprintf(log, "capcheck bench: out of memory\n");
        return 2;
    }
    bench_tally t = {0, 0, 0};
    int rc = 2;
    char dir[] = "/tmp/capcheck-bench.XXXXXX";
    int have_dir = 0;
    double t_prepare = cc_monotonic_seconds();
    if (prepare_cases(w, &s, cases, n, &o, &t, log))
        goto done;
    if (s.n == 0) {
        fprintf(log, "capcheck bench: none of the %zu cases can be measured (%zu larger than %lld "
                     "elements, %zu not run by provider %s)\n",
                n, t.too_large, (long long)o.max_elements, t.not_run, p->name);
        goto done;
    }
    /* the capcheck loop journals like a run does, into a scratch folder removed at the end */
    if (!mkdtemp(dir)) {
        fprintf(log, "capcheck bench: cannot make a scratch folder: %s\n", strerror(errno));
        goto done;
    }
    have_dir = 1;
    if (cc_journal_open(dir, -1, &s.journal, s.msg, sizeof s.msg)) {
        fprintf(log, "capcheck bench: %s\n", s.msg);
        goto done;
    }
    print_bench_header(out, &s, cases, n, &o, &t);
    double rate[LOOP_COUNT] = {0};
    int loops = o.ratio_only ? LOOP_CAPCHECK + 1 : LOOP_COUNT; /* the first `loops` loops run */
    time_loops(w, &s, &o, cc_monotonic_seconds() - t_prepare, loops, rate, log);
    if (s.failed) {
        fprintf(log, "capcheck bench: a call that had succeeded failed on a later round: %s\n",
                s.msg);
        goto done;
    }
    print_bench_results(out, &s, rate, loops);
    rc = o.json_path && write_json(o.json_path, p, &cases[0], &s, n, t.too_large, t.not_run,
                                   t.sampled, &o, rate, log)
             ? 2
             : 0;
done:
    if (s.journal)
        cc_journal_close(s.journal);
    if (have_dir) {
        char path[64];
        snprintf(path, sizeof path, "%s/results.jsonl", dir);
        unlink(path);
        rmdir(dir);
    }
    for (size_t i = 0; i < s.n; i++)
        prepared_free(&s.cases[i]);
    free(s.cases);
    cc_guard_cache_clear(&s.guard_cache);
    return rc;
}

int cc_bench_command(const cc_provider *p, const cc_case *cases, size_t n,
                     const cc_bench_opts *opts, FILE *out, FILE *log)
{
    if (!n) {
        fprintf(log, "capcheck bench: no cases\n");
        return 2;
    }
    bench_args a = {p, cases, n, opts, out, log};
    char who[128], msg[1024];
    snprintf(who, sizeof who, "provider %s", p->name);
    double init_limit = opts->timeout_base > 0 ? opts->timeout_base : CC_POOL_DEFAULT_INIT_TIMEOUT;
    int rc = cc_watch_run(bench_in_child, &a, who, init_limit, "initialising", msg, sizeof msg);
    if (rc < 0) {
        fprintf(log, "capcheck bench: %s (capcheck run on these cases isolates each case)\n",
                msg);
        return 2;
    }
    return rc;
}
