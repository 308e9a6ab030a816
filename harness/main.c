/* Room harness/ (top): only the CLI (main.c, commands.c, help.c): the command line,
 * calling into every room (docs/contributing/layout.md; scripts/check-layers). */
/* capcheck command line: run, repro, shrink, bench, list, help (the evidence commands are in
 * commands.c; every command's help in help.c). Exit codes of run and repro
 * (harness/run/exit_code.h, what git bisect run reads): 0 all passed, 1 some case did not pass,
 * 2 a malformed command line or case (unknown op, malformed line, missing case file, no case to
 * run), 125 nothing could be judged (a provider or plugin that does not load or initialise, an
 * absent device, an unsupported case, memory or disk exhausted), 128 + N after signal N. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness/tools/bench.h"
#include "harness/case/case.h"
#include "harness/certify.h"
#include "harness/commands.h"
#include "core/dtype.h"
#include "core/torchlean.h"
#include "harness/evidence/diff.h"
#include "harness/evidence/merge.h"
#include "harness/report/capsules.h"
#include "harness/report/expect.h"
#include "harness/run/platform.h"
#include "harness/run/pool.h"
#include "harness/evidence/report_html.h"
#include "harness/evidence/shard_auto.h"
#include "harness/evidence/signature.h"
#include "harness/help.h"
#include "harness/report/provenance.h"
#include "harness/report/report.h"
#include "harness/report/repro.h"
#include "harness/run/exit_code.h"
#include "harness/run/plugin.h"
#include "harness/run/runner.h"
#include "harness/run/witness.h"
#include "harness/session/session.h"
#include "harness/tools/reproducer.h"
#include "harness/tools/shrink.h"
#include "harness/tools/power_table.h"
#include "providers/aten_build.h"
#include "providers/cuda/cuda_providers.h"
#include "providers/openblas/openblas_provider.h"
#include "reference/ref_families.h"

extern const char cc_embedded_smoke_cases[]; /* cases/smoke.cases, embedded at build time */

/* What run, list and bench take without a file: the smoke suite (certify: cc_evidence_suite). */
static const cc_suite_file SMOKE_SUITE[] = {{"smoke.cases", cc_embedded_smoke_cases}, {0, 0}};
#define MAX_SUITE_FILES 16

typedef struct {
    const char *provider, *device, *out, *op_filter;
    const char *provider_lib; /* --provider-lib: a plugin (harness/run/plugin.h), not --provider */
    const char *libtorch;     /* --libtorch DIR: ATen from the libtorch in DIR (aten_build.h) */
    const char *script;       /* shrink/repro --script: where the Python reproducer goes */
    cc_plugin *plugin;        /* loaded by main() from provider_lib, closed there */
    unsigned long long seed;
    int jobs;           /* -j: worker processes (0: one per CPU) */
    double timeout;     /* --timeout: base per-case limit in seconds (0: the pool's default) */
    const char *resume; /* --resume DIR */
    const char *shard;  /* --shard I/N */
    const char *tf32, *deterministic, *attention; /* math modes (apply_math_modes) */
    const char *min_time, *reps, *max_elements, *json; /* bench (parsed by cmd_bench) */
    const char *policy;  /* --policy F: the gate's verdicts in report.html */
    const char *cpu_capability; /* --cpu-capability LIST|all, resolved by main into: */
    int cpu_levels[CC_MAX_LEVELS];
    int n_cpu_levels;
    const char *aten_threads_spec; /* --aten-threads LIST|all, resolved by main into: */
    int aten_threads[CC_MAX_ATEN_THREADS];
    int n_aten_threads;
    const char *accumulation;      /* --accumulation strict|relaxed, parsed into: */
    cc_accumulation accumulation_mode;
    int power;                     /* --power */
    const char *witness; /* --witness LIST, resolved by open_witnesses into: */
    const cc_provider *witnesses[CC_MAX_WITNESSES];
    cc_plugin *witness_plugins[CC_MAX_WITNESSES]; /* the plugin witnesses, closed by main() */
    int n_witnesses;
    int no_fork;        /* --no-fork */
    int ratio_only;     /* bench --ratio-only: the provider and capcheck loops alone */
    cc_ref_mode ref;    /* --ref auto|full|sampled */
    int ref_threads;    /* --ref-threads N (0: the command's default) */
    int force;          /* --force: run into a folder holding an earlier run */
    cc_repro repro;     /* what reruns a case as this command runs it (harness/repro.h) */
    const char *baseline; /* --baseline DIR */
    int repeat;         /* --repeat N: provider calls per check on the same inputs */
    int no_guard;       /* --no-guard: plain heap buffers for the provider */
    int expect;         /* --expect: judge results by the files' "#! seen" directives */
    int verbose, quiet; /* run -v: every case's line; -q: the closing line alone */
    const char *files[64];
    int n_files;
    const char *line;
    int certify;                   /* capcheck certify: run the evidence suite, then judge it */
    const cc_suite_file *embedded; /* the cases without a file: SMOKE_SUITE, cc_evidence_suite */
    const char *torchlean, *catalog; /* certify: --torchlean, --catalog (NULL: built in) */
    const char *sign; /* --sign KEY: the finished run signed (harness/evidence/signature.h) */
} options;

/* The commands of this file, as bits: which options each takes. */
enum { C_RUN = 1, C_REPRO = 2, C_SHRINK = 4, C_BENCH = 8, C_LIST = 16, C_PLATFORMS = 32,
       C_CERTIFY = 64 };
#define C_PROVIDER (C_RUN | C_REPRO | C_SHRINK | C_BENCH)
/* the options of a run that certify takes too (its cases are the suite's: no --op, --seed...) */
#define C_SUITE (C_RUN | C_CERTIFY)

typedef enum { V_TEXT, V_FLAG, V_JOBS, V_SECONDS, V_SEED, V_REPEAT, V_REF, V_THREADS } value_kind;

typedef struct {
    const char *name;
    unsigned commands;
    value_kind kind;
    size_t field; /* offsetof(options, ...) */
} option_spec;

#define OPT(name, cmds, kind, field) {name, cmds, kind, offsetof(options, field)}
static const option_spec OPTIONS[] = {
    OPT("--provider", C_PROVIDER | C_PLATFORMS | C_CERTIFY, V_TEXT, provider),
    OPT("--provider-lib", C_PROVIDER | C_PLATFORMS | C_CERTIFY, V_TEXT, provider_lib),
    OPT("--device", C_PROVIDER | C_LIST | C_PLATFORMS | C_CERTIFY, V_TEXT, device),
    OPT("--libtorch", C_PROVIDER | C_PLATFORMS | C_CERTIFY, V_TEXT, libtorch),
    OPT("--out", C_SUITE, V_TEXT, out),
    OPT("--op", C_SUITE | C_BENCH | C_LIST, V_TEXT, op_filter),
    OPT("--script", C_SHRINK | C_REPRO, V_TEXT, script),
    OPT("--resume", C_SUITE, V_TEXT, resume),
    OPT("--shard", C_RUN, V_TEXT, shard),
    OPT("--baseline", C_RUN, V_TEXT, baseline),
    OPT("--force", C_SUITE, V_FLAG, force),
    OPT("--tf32", C_PROVIDER | C_CERTIFY, V_TEXT, tf32),
    OPT("--deterministic", C_PROVIDER | C_CERTIFY, V_TEXT, deterministic),
    OPT("--attention", C_PROVIDER | C_CERTIFY, V_TEXT, attention),
    OPT("--witness", C_RUN | C_REPRO, V_TEXT, witness),
    OPT("--policy", C_SUITE, V_TEXT, policy),
    OPT("--sign", C_SUITE, V_TEXT, sign),
    OPT("--torchlean", C_CERTIFY, V_TEXT, torchlean),
    OPT("--catalog", C_CERTIFY, V_TEXT, catalog),
    OPT("--cpu-capability", C_SUITE | C_REPRO | C_SHRINK, V_TEXT, cpu_capability),
    OPT("--aten-threads", C_SUITE | C_REPRO | C_SHRINK, V_TEXT, aten_threads_spec),
    OPT("--expect", C_RUN, V_FLAG, expect),
    OPT("--repeat", C_SUITE | C_REPRO, V_REPEAT, repeat),
    OPT("--no-guard", C_RUN | C_REPRO, V_FLAG, no_guard),
    OPT("--accumulation", C_RUN | C_REPRO, V_TEXT, accumulation),
    OPT("--power", C_RUN, V_FLAG, power),
    OPT("--min-time", C_BENCH, V_TEXT, min_time),
    OPT("--reps", C_BENCH, V_TEXT, reps),
    OPT("--max-elements", C_RUN | C_BENCH | C_LIST, V_TEXT, max_elements),
    OPT("--json", C_BENCH, V_TEXT, json),
    OPT("--ratio-only", C_BENCH, V_FLAG, ratio_only),
    OPT("--ref", C_RUN | C_REPRO | C_BENCH, V_REF, ref),
    OPT("--ref-threads", C_RUN | C_REPRO | C_BENCH, V_THREADS, ref_threads),
    OPT("--no-fork", C_RUN | C_REPRO | C_PLATFORMS, V_FLAG, no_fork),
    OPT("-v", C_SUITE, V_FLAG, verbose),
    OPT("--verbose", C_SUITE, V_FLAG, verbose),
    OPT("-q", C_SUITE, V_FLAG, quiet),
    OPT("--quiet", C_SUITE, V_FLAG, quiet),
    OPT("-j", C_SUITE, V_JOBS, jobs),
    OPT("--jobs", C_SUITE, V_JOBS, jobs),
    OPT("--timeout", C_PROVIDER | C_CERTIFY, V_SECONDS, timeout),
    OPT("--seed", C_PROVIDER | C_LIST, V_SEED, seed),
};
#undef OPT

/* Whether option `name` was given (seen[] as parse_options fills it). */
static int seen_option(const char *const *seen, const char *name)
{
    for (size_t k = 0; k < sizeof OPTIONS / sizeof OPTIONS[0]; k++)
        if (seen[k] && strcmp(OPTIONS[k].name, name) == 0)
            return 1;
    return 0;
}

/* Options after the command (argv[first...]); `command` is the command's bit and `name` its
 * name. Every option once, and only where it applies: nothing is accepted with no effect. */
static int parse_options(int argc, char **argv, int first, unsigned command, const char *name,
                         options *o)
{
    memset(o, 0, sizeof *o);
    o->provider = "aten";
    o->device = "cpu";
    o->out = command == C_CERTIFY ? "out/certify" : "out";
    o->certify = command == C_CERTIFY;
    o->embedded = command == C_CERTIFY ? cc_evidence_suite : SMOKE_SUITE;
    const char *seen[sizeof OPTIONS / sizeof OPTIONS[0]] = {0};
    for (int i = first; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        size_t k = 0;
        for (; k < sizeof OPTIONS / sizeof OPTIONS[0]; k++)
            if (strcmp(a, OPTIONS[k].name) == 0 ||
                (OPTIONS[k].kind == V_JOBS && !strcmp(OPTIONS[k].name, "-j") &&
                 strncmp(a, "-j", 2) == 0 && isdigit((unsigned char)a[2])))
                break;
        if (k == sizeof OPTIONS / sizeof OPTIONS[0]) {
            if (a[0] == '-' && a[1]) { /* a file whose name starts with '-': write ./-name */
                fprintf(stderr, "capcheck %s: unknown option %s (capcheck help %s lists them)\n",
                        name, a, name);
                return -1;
            }
            if (command == C_CERTIFY) {
                fprintf(stderr, "capcheck certify: '%s': certify runs the evidence suite built "
                                "into capcheck and takes no case file (capcheck run FILE... "
                                "runs files)\n",
                        a);
                return -1;
            }
            if (o->n_files >= 64) {
                fprintf(stderr, "capcheck: at most 64 case files\n");
                return -1;
            }
            o->files[o->n_files++] = a;
            continue;
        }
        const option_spec *spec = &OPTIONS[k];
        if (!(spec->commands & command)) {
            fprintf(stderr, "capcheck %s: %s does not apply to %s (capcheck help %s lists its "
                            "options)\n",
                    name, spec->name, name, name);
            return -1;
        }
        const char *canonical = spec->kind == V_JOBS ? "-j" : spec->name;
        for (size_t j = 0; j < k; j++) /* -j and --jobs are one option */
            if (seen[j] && OPTIONS[j].field == spec->field)
                canonical = NULL;
        if (seen[k] || !canonical) {
            fprintf(stderr, "capcheck %s: %s is given twice\n", name, spec->name);
            return -1;
        }
        seen[k] = a;
        char *field = (char *)o + spec->field;
        if (spec->kind == V_FLAG) {
            *(int *)field = 1;
            continue;
        }
        if (spec->kind == V_JOBS && a[1] == 'j' && a[2])
            v = a + 2;
        else if (i + 1 < argc)
            v = argv[++i];
        else {
            fprintf(stderr, "capcheck %s: %s needs a value\n", name, a);
            return -1;
        }
        char *end;
        errno = 0;
        if (spec->kind == V_TEXT) {
            *(const char **)field = v;
        } else if (spec->kind == V_SEED) {
            /* strtoull reads "-1" as 2^64 - 1: a sign is refused, not wrapped */
            unsigned long long x = strtoull(v, &end, 0);
            if (!isdigit((unsigned char)v[0]) || *end || errno) {
                fprintf(stderr, "capcheck %s: --seed wants an unsigned integer below 2^64, not "
                                "'%s'\n", name, v);
                return -1;
            }
            *(unsigned long long *)field = x;
        } else if (spec->kind == V_REPEAT || spec->kind == V_THREADS) {
            int repeat = spec->kind == V_REPEAT;
            long x = strtol(v, &end, 10), most = repeat ? 1000 : 256;
            if (!*v || *end || errno || x < 1 || x > most) {
                fprintf(stderr, "capcheck %s: %s wants a whole number of %s from 1 to %ld, not "
                                "'%s'\n", name, spec->name, repeat ? "calls" : "threads", most, v);
                return -1;
            }
            *(int *)field = (int)x;
        } else if (spec->kind == V_REF) {
            int m = -1;
            for (int r = 0; r < CC_REF_MODE_COUNT; r++)
                if (strcmp(v, cc_ref_mode_names[r]) == 0)
                    m = r;
            if (m < 0) {
                fprintf(stderr, "capcheck %s: --ref wants auto, full or sampled, not '%s'\n",
                        name, v);
                return -1;
            }
            *(cc_ref_mode *)field = (cc_ref_mode)m;
        } else {
            double x = strtod(v, &end);
            int jobs = spec->kind == V_JOBS;
            if (!*v || *end ||
                (jobs ? !(x >= 0 && x <= 4096 && x == (int)x) : !(x > 0 && x < 1e6))) {
                fprintf(stderr, "capcheck %s: %s wants %s, not '%s'\n", name, a,
                        jobs ? "a number of worker processes (0: one per CPU)"
                             : "a positive number of seconds (below 10^6)", v);
                return -1;
            }
            if (jobs)
                *(int *)field = (int)x;
            else
                *(double *)field = x;
        }
    }
    if (o->force && o->resume) {
        fprintf(stderr, "capcheck %s: --force starts over and --resume finishes: give one\n",
                name);
        return -1;
    }
    if (o->resume && seen_option(seen, "--out")) {
        fprintf(stderr, "capcheck %s: --resume %s finishes the run in %s and writes its report "
                        "there, so --out does not apply: give --resume alone\n",
                name, o->resume, o->resume);
        return -1;
    }
    if (o->verbose && o->quiet) {
        fprintf(stderr, "capcheck %s: -v prints every case's line and -q only the last line: "
                        "give one\n",
                name);
        return -1;
    }
    if (o->provider_lib && seen[0]) {
        fprintf(stderr, "capcheck %s: give --provider or --provider-lib, not both\n", name);
        return -1;
    }
    if (o->accumulation && cc_accumulation_parse(o->accumulation, &o->accumulation_mode)) {
        fprintf(stderr, "capcheck %s: --accumulation wants strict or relaxed, not '%s'\n", name,
                o->accumulation);
        return -1;
    }
    return 0;
}

/* The math modes reach the providers through the environment their worker processes inherit
 * (the provider ABI stays as it is): CAPCHECK_TF32 and CAPCHECK_DETERMINISTIC are "1" or "0",
 * CAPCHECK_ATTENTION names a backend. A mode not given on the command line is set to its default
 * unless the environment already sets it (CAPCHECK_TF32=1 capcheck run ... keeps working), so
 * every run states a mode rather than inheriting an unknown one. Each provider sets what it
 * can, refuses what it cannot honour in init (one sentence, exit 2), and states the modes in
 * its description, which the report records. Returns 0, or -1 after one sentence. */
static int on_off(const char *opt, const char *v, const char *env)
{
    if (!v) {
        const char *e = getenv(env);
        return e && *e ? 0 : setenv(env, "0", 1);
    }
    if (strcmp(v, "on") && strcmp(v, "off")) {
        fprintf(stderr, "capcheck: %s wants on or off, not '%s'\n", opt, v);
        return -1;
    }
    return setenv(env, strcmp(v, "on") == 0 ? "1" : "0", 1);
}

static int apply_math_modes(const options *o)
{
    static const char *const backends[] = {"composed", "math", "flash", "efficient", "cudnn"};
    if (on_off("--tf32", o->tf32, "CAPCHECK_TF32") ||
        on_off("--deterministic", o->deterministic, "CAPCHECK_DETERMINISTIC"))
        return -1;
    if (o->attention) {
        int known = 0;
        for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
            known |= strcmp(o->attention, backends[i]) == 0;
        if (!known) {
            fprintf(stderr, "capcheck: --attention wants composed, math, flash, efficient or "
                            "cudnn, not '%s'\n", o->attention);
            return -1;
        }
        return setenv("CAPCHECK_ATTENTION", o->attention, 1);
    }
    return 0;
}

/* How every case runs: --repeat, --no-guard, whether deterministic algorithms are on (after
 * apply_math_modes has settled CAPCHECK_DETERMINISTIC), --ref and --ref-threads (0: the
 * command's default), --accumulation and --power. */
static cc_run_options run_options(const options *o)
{
    const char *det = getenv("CAPCHECK_DETERMINISTIC");
    cc_run_options r = {.repeat = o->repeat, .unguarded = o->no_guard,
                        .deterministic = det && strcmp(det, "1") == 0,
                        .threads = o->ref_threads, .ref = o->ref,
                        .accumulation = o->accumulation_mode, .power = o->power};
    return r;
}

static void print_parse_error(const cc_parse_error *e)
{
    if (e->line > 0)
        fprintf(stderr, "%s:%d:%d: %s\n", e->file, e->line, e->column, e->msg);
    else
        fprintf(stderr, "%s: %s\n", e->file, e->msg);
}

/* --libtorch DIR, or CAPCHECK_LIBTORCH=DIR (a pasted repro line): ATen from the libtorch in DIR,
 * its shim built into the cache on first use (providers/aten_build.h). CAPCHECK_LIBTORCH then
 * holds DIR's absolute path: the workers' loader reads it, every repro line carries it. 0, or
 * an exit code after one sentence (2: not for this provider; 125: no such libtorch, or its
 * headers do not build the shim). */
static int use_libtorch(const options *o)
{
    const char *dir = o->libtorch ? o->libtorch : getenv("CAPCHECK_LIBTORCH");
    if (!dir || !*dir)
        return 0;
    if (o->provider_lib || (o->provider && strcmp(o->provider, "aten") != 0)) {
        if (!o->libtorch)
            return 0; /* the variable of another run: only ATen reads it */
        fprintf(stderr, "capcheck: --libtorch applies to the ATen provider (--provider aten)\n");
        return CC_EXIT_USAGE;
    }
    char abs[PATH_MAX], shim[PATH_MAX], msg[1024];
    if (!realpath(dir, abs)) {
        fprintf(stderr, "capcheck: --libtorch %s: %s\n", dir, strerror(errno));
        return CC_EXIT_UNJUDGED;
    }
    if (setenv("CAPCHECK_LIBTORCH", abs, 1) || cc_aten_shim_for(abs, shim, sizeof shim, stderr, msg,
                                                                 sizeof msg)) {
        fprintf(stderr, "capcheck: %s\n", msg);
        return CC_EXIT_UNJUDGED;
    }
    return 0;
}

/* Pick the provider (the plugin main() loaded, else --provider by name), not initialised;
 * NULL (after one clear sentence) when there is none. run and repro hand it to worker
 * processes, which initialise it themselves (harness/run/pool.h). */
static const cc_provider *provider_named(const char *name, char *msg, size_t len)
{
    if (name && !strcmp(name, "openblas"))
        return cc_openblas_provider(msg, len);
    if (cc_cuda_provider_known(name))
        return cc_cuda_provider(name, msg, len);
    const cc_provider *p = cc_provider_select(name, NULL, NULL, msg, len);
    if (!p && name && !cc_is_builtin_provider(name)) { /* say what TorchLean calls it */
        char list[160];
        cc_builtin_provider_list(list, sizeof list);
        cc_provider_unknown_msg(name, list, msg, len);
    }
    return p;
}

static const cc_provider *select_provider(const options *o)
{
    char msg[512] = "";
    const cc_provider *p =
        o->plugin ? cc_plugin_provider(o->plugin) : provider_named(o->provider, msg, sizeof msg);
    if (!p)
        fprintf(stderr, "capcheck: %s\n", msg);
    return p;
}

/* The exit code when select_provider gave none: a name capcheck knows whose library did not
 * load is the environment's (125: nothing could be judged); any other name is a mistake in the
 * command line (2). */
static int no_provider_code(const options *o)
{
    const char *name = o->provider;
    return name && (cc_is_builtin_provider(name) || cc_cuda_provider_known(name))
               ? CC_EXIT_UNJUDGED
               : CC_EXIT_USAGE;
}

/* --witness a,b,...: each a provider name or a plugin path (anything with a '/'), none the
 * provider under test, none twice, at most CC_MAX_WITNESSES. Returns 0, or an exit code after
 * one sentence: 125 when a witness (or the provider) did not load, 2 for a malformed list. */
static int open_witnesses(options *o)
{
    if (!o->witness)
        return 0;
    const cc_provider *primary = select_provider(o);
    if (!primary)
        return no_provider_code(o);
    int code = CC_EXIT_USAGE;
    char list[1024], msg[1024] = "";
    snprintf(list, sizeof list, "%s", o->witness);
    for (char *item = list, *next; item; item = next) {
        next = strchr(item, ',');
        if (next)
            *next++ = 0;
        const cc_provider *w = NULL;
        if (!*item)
            snprintf(msg, sizeof msg, "--witness wants provider names or plugin paths separated "
                                      "by commas, not '%.200s'", o->witness);
        else if (o->n_witnesses == CC_MAX_WITNESSES)
            snprintf(msg, sizeof msg, "--witness: at most %d witnesses", CC_MAX_WITNESSES);
        else if (strchr(item, '/')) {
            cc_plugin *pl = cc_plugin_open_within(item, o->timeout, msg, sizeof msg);
            o->witness_plugins[o->n_witnesses] = pl;
            w = pl ? cc_plugin_provider(pl) : NULL;
            code = CC_EXIT_UNJUDGED;
        } else {
            w = provider_named(item, msg, sizeof msg);
            if (cc_is_builtin_provider(item) || cc_cuda_provider_known(item))
                code = CC_EXIT_UNJUDGED;
        }
        if (w)
            code = CC_EXIT_USAGE;
        if (w && !strcmp(w->name, primary->name)) {
            snprintf(msg, sizeof msg, "--witness %.200s: that is the provider under test; a "
                                      "witness is another provider", item);
            w = NULL;
        }
        for (int k = 0; w && k < o->n_witnesses; k++)
            if (!strcmp(o->witnesses[k]->name, w->name)) {
                snprintf(msg, sizeof msg, "--witness names %s twice", w->name);
                w = NULL;
            }
        if (!w) {
            fprintf(stderr, "capcheck: %s%s\n", strncmp(msg, "--witness", 9) ? "--witness: " : "",
                    msg);
            return code;
        }
        o->witnesses[o->n_witnesses++] = w;
    }
    return 0;
}

/* The cases of the command's files (none: the embedded smoke cases), --op filtered, and the
 * files' names for the report. 0, or -1 after one sentence (the list is then empty). */
static int load_cases(const options *o, cc_device *device, cc_case_list *cases, char *files,
                      size_t files_len)
{
    memset(cases, 0, sizeof *cases);
    files[0] = 0;
    if (cc_device_parse(o->device, device)) {
        char why[512];
        cc_device_unknown_msg(o->device, why, sizeof why);
        fprintf(stderr, "capcheck: --device: %s\n", why);
        return -1;
    }
    const ref_op *want = o->op_filter ? ref_op_find(o->op_filter) : NULL;
    if (o->op_filter && !want) {
        fprintf(stderr, "capcheck: --op: unknown op '%s'\n", o->op_filter);
        return -1;
    }
    cc_case_defaults def = {*device, o->seed};
    cc_parse_error err;
    memset(&err, 0, sizeof err);
    for (int i = 0; o->n_files == 0 && o->embedded[i].name; i++) {
        char name[160];
        snprintf(name, sizeof name, "embedded:%s", o->embedded[i].name);
        if (cc_cases_parse_text(o->embedded[i].text, name, &def, cases, &err)) {
            print_parse_error(&err);
            cc_case_list_free(cases);
            return -1;
        }
        size_t used = strlen(files);
        snprintf(files + used, files_len - used, "%s%s", used ? " " : "", name);
    }
    for (int i = 0; i < o->n_files; i++) {
        size_t before = cases->n;
        if (cc_cases_parse_file(o->files[i], &def, cases, &err)) {
            print_parse_error(&err);
            cc_case_list_free(cases);
            return -1;
        }
        /* a file that gives nothing to run is a mistake (the wrong file, an empty pipe), never
         * a run that passes because nothing ran */
        if (cases->n == before) {
            fprintf(stderr, "%s: holds no case (only blank lines and comments, or nothing): "
                            "nothing to run\n", o->files[i]);
            cc_case_list_free(cases);
            return -1;
        }
        size_t used = strlen(files);
        snprintf(files + used, files_len - used, "%s%s", used ? " " : "", o->files[i]);
    }
    if (want) { /* the run's cases are the ones it runs */
        size_t k = 0;
        for (size_t i = 0; i < cases->n; i++)
            if (cases->v[i].op == want)
                cases->v[k++] = cases->v[i];
        if (k == 0) {
            fprintf(stderr, "capcheck: --op %s matches none of the %zu cases of %s: nothing to "
                            "run\n", want->name, cases->n, files);
            cc_case_list_free(cases);
            return -1;
        }
        cases->n = k;
    }
    return 0;
}

/* --shard I/N, or --shard auto: from the engine that launched the job (harness/shard_auto.h),
 * which is named on stderr. */
static int shard_of(const char *spec, int *index, int *count, char *msg, size_t len)
{
    if (strcmp(spec, "auto") != 0)
        return cc_shard_parse(spec, index, count, msg, len);
    char source[256];
    if (cc_shard_auto(cc_shard_auto_getenv, NULL, index, count, source, sizeof source, msg, len))
        return -1;
    fprintf(stderr, "capcheck: --shard auto: shard %d/%d (%s)\n", *index, *count, source);
    return 0;
}

/* A positive number from an option's text (NULL: dflt); -1 after one sentence when it is not. */
static double positive_option(const char *name, const char *v, double dflt, int whole)
{
    if (!v)
        return dflt;
    char *end;
    double x = strtod(v, &end);
    if (!*v || *end || !(x > 0 && x < 1e15) || (whole && x != (double)(int64_t)x)) {
        fprintf(stderr, "capcheck: %s wants a positive %s, not '%s'\n", name,
                whole ? "whole number" : "number", v);
        return -1;
    }
    return x;
}

/* The cases with no tensor above max_elements (0: every case). */
static void keep_at_most(cc_case_list *cases, double max_elements)
{
    size_t k = 0;
    for (size_t i = 0; i < cases->n; i++) {
        int64_t largest = cc_case_largest_tensor(&cases->v[i]);
        if (max_elements <= 0 || (largest >= 0 && (double)largest <= max_elements))
            cases->v[k++] = cases->v[i];
    }
    cases->n = k;
}

/* report.md's "Since the baseline" (cc_session_opts.since_baseline): capcheck diff BASELINE
 * DIR into text, its summary line into summary. */
static char *diff_with_baseline(const char *baseline, const char *dir, char *summary, size_t n)
{
    char *text = NULL, *errs = NULL, msg[256];
    size_t len = 0, elen = 0;
    cc_catalog cat;
    summary[0] = 0;
    if (cc_catalog_load(NULL, &cat, msg, sizeof msg)) {
        snprintf(summary, n, "no comparison with the baseline: %s", msg);
        return NULL;
    }
    FILE *out = open_memstream(&text, &len), *err = open_memstream(&errs, &elen);
    if (out && err)
        cc_diff_command(baseline, dir, CC_DIFF_DEFAULT_DRIFT, 0, &cat, out, err);
    if (out)
        fclose(out);
    if (err)
        fclose(err);
    cc_catalog_free(&cat);
    if (errs && errs[0]) {
        snprintf(summary, n, "no comparison with the baseline: %s", errs);
        summary[strcspn(summary, "\n")] = 0;
        free(text);
        text = NULL;
    } else if (text) { /* the diff's last line is its summary */
        size_t end = strlen(text);
        while (end && text[end - 1] == '\n')
            end--;
        size_t start = end;
        while (start && text[start - 1] != '\n')
            start--;
        snprintf(summary, n, "%.*s", (int)(end - start), text + start);
    }
    free(errs);
    return text;
}

/* The run's provenance: the case files (or the embedded suite) and their hashes, this build,
 * this machine, the provider's identity; and with --shard, the shard (cases keeps its cases).
 * 0, or -1 after one sentence. */
static int run_provenance(const options *o, const cc_provider *named, cc_case_list *cases,
                          cc_provenance *prov)
{
    char msg[512], names[MAX_SUITE_FILES][160];
    const char *paths[MAX_SUITE_FILES], *texts[MAX_SUITE_FILES];
    int n = 0;
    for (; !o->n_files && n < MAX_SUITE_FILES && o->embedded[n].name; n++) {
        snprintf(names[n], sizeof names[n], "embedded:%s", o->embedded[n].name);
        paths[n] = names[n];
        texts[n] = o->embedded[n].text;
    }
    if (cc_provenance_collect(prov, o->n_files ? o->n_files : n, o->n_files ? o->files : paths,
                              o->n_files ? NULL : texts, msg, sizeof msg) ||
        cc_provider_identity_set(&prov->provider, named->name,
                                 o->plugin ? cc_plugin_path(o->plugin) : NULL, msg, sizeof msg) ||
        (o->shard && (shard_of(o->shard, &prov->shard.index, &prov->shard.count, msg,
                               sizeof msg) ||
                      cc_shard_select(cases, prov->shard.index, prov->shard.count, &prov->shard,
                                      msg, sizeof msg)))) {
        fprintf(stderr, "capcheck: %s\n", msg);
        return -1;
    }
    return 0;
}

/* --sign KEY: the finished run's manifest signed (harness/evidence/signature.h); certify's own
 * summary names it. 0, or -1 after one sentence. */
static int sign_run(const options *o, const char *dir)
{
    char msg[2048], who[400];
    cc_run_signature s;
    if (cc_run_sign(dir, o->sign, NULL, 0, &s, msg, sizeof msg)) {
        fprintf(stderr, "capcheck: the run in %s is complete but unsigned: %s\n", dir, msg);
        return -1;
    }
    cc_run_signer_name(&s, who, sizeof who);
    if (!o->quiet && !o->certify)
        printf("capcheck: signed by %s: %s/%s and %s/%s\n", who, dir, CC_MANIFEST_FILE, dir,
               CC_MANIFEST_SIG_FILE);
    return 0;
}

/* capcheck run (and certify's run): its exit code (harness/run/exit_code.h); what the run
 * counted into *tally (written: it wrote its report). */
static int cmd_run(const options *o, int argc, char **argv, cc_session_tally *tally)
{
    cc_device device;
    cc_case_list cases;
    char files[512];
    if (o->policy && access(o->policy, R_OK)) { /* report.html's gate: refused before the run */
        fprintf(stderr, "capcheck: --policy %s: %s\n", o->policy, strerror(errno));
        return 2;
    }
    char fp[64], msg[2048];
    if (o->sign && cc_sign_probe(o->sign, fp, msg, sizeof msg)) { /* not after an hour's run */
        fprintf(stderr, "capcheck: --sign %s: %s\n", o->sign, msg);
        return 2;
    }
    if (o->baseline) { /* a baseline that cannot be read is refused before anything runs */
        cc_run base;
        char why[1024];
        if (cc_diff_load(o->baseline, &base, why, sizeof why)) {
            fprintf(stderr, "capcheck: --baseline: %s\n", why);
            return 2;
        }
        cc_run_free(&base);
    }
    double max_elements = positive_option("--max-elements", o->max_elements, 0, 1);
    if (max_elements < 0 || load_cases(o, &device, &cases, files, sizeof files))
        return 2;
    size_t before = cases.n;
    keep_at_most(&cases, max_elements);
    if (cases.n == 0) {
        fprintf(stderr, "capcheck: --max-elements %.0f leaves none of the %zu cases: nothing to "
                        "run\n", max_elements, before);
        cc_case_list_free(&cases);
        return 2;
    }
    if (cases.n < before)
        fprintf(stderr, "capcheck: --max-elements %.0f leaves out %zu of %zu cases\n", max_elements,
                before - cases.n, before);
    /* provenance: the case files' hashes, this build, this machine; and the shard */
    cc_provenance prov;
    const cc_provider *named = select_provider(o);
    if (!named) {
        cc_case_list_free(&cases);
        return no_provider_code(o);
    }
    if (run_provenance(o, named, &cases, &prov)) {
        cc_case_list_free(&cases);
        return 2;
    }
    /* not initialised here: the worker processes do that (a CUDA context does not survive
     * fork), and a provider that cannot run on a case's device is one sentence from them */
    const cc_provider *p = named;
    /* the command of the whole run: a shard's report says which shard it is in "shard";
     * --force changes no result */
    char command[512] = "";
    for (int i = 0, used = 0; i < argc && used < (int)sizeof command - 1; i++) {
        int value = strcmp(argv[i], "--shard") == 0 || strcmp(argv[i], "--sign") == 0;
        if (value || strcmp(argv[i], "--force") == 0) {
            i += value;
            continue;
        }
        used += snprintf(command + used, sizeof command - (size_t)used, "%s%s", used ? " " : "",
                         argv[i]);
    }
    /* the command that finishes this run after an interrupt: the same words, --resume DIR
     * in place of --out DIR and --force */
    const char *dir = o->resume ? o->resume : o->out;
    char resume[2048] = "", word[1100];
    for (int i = 0, used = 0; i < argc && used < (int)sizeof resume - 1; i++) {
        int value = i + 1 < argc && (!strcmp(argv[i], "--out") || !strcmp(argv[i], "--resume"));
        if (value || !strcmp(argv[i], "--force")) {
            i += value;
            continue;
        }
        cc_shell_quote(argv[i], word, sizeof word);
        used += snprintf(resume + used, sizeof resume - (size_t)used, "%s%s", used ? " " : "",
                         word);
    }
    cc_shell_quote(dir, word, sizeof word);
    size_t used = strlen(resume);
    snprintf(resume + used, sizeof resume - used, " --resume %s", word);
    *tally = (cc_session_tally){0};
    cc_session_opts so = {.provider = p,
                          .cases = cases.v,
                          .n_cases = cases.n,
                          .default_device = device,
                          .out_dir = dir,
                          .resume = o->resume != NULL,
                          .workers = o->jobs,
                          .timeout_base = o->timeout,
                          .in_process = o->no_fork,
                          .case_files = files,
                          .base_seed = o->seed,
                          .command = command,
                          .log = stderr,
                          .tty = isatty(STDERR_FILENO),
                          .provenance = &prov,
                          .witnesses = o->witnesses,
                          .n_witnesses = o->n_witnesses,
                          .cpu_levels = o->cpu_levels,
                          .n_cpu_levels = o->n_cpu_levels,
                          .aten_threads = o->aten_threads,
                          .n_aten_threads = o->n_aten_threads,
                          .force = o->force,
                          .repro = &o->repro,
                          .baseline = o->baseline,
                          .since_baseline = o->baseline ? diff_with_baseline : NULL,
                          .resume_command = resume,
                          .verbosity = o->quiet ? -1 : o->verbose,
                          .failures_elsewhere = o->certify,
                          .tally = tally,
                          .run = run_options(o)};
    if (o->quiet)
        so.log = NULL; /* errors still say themselves (cc_session_run) */
    cc_expectations expect = {0};
    cc_case_defaults def = {device, o->seed};
    for (int i = 0; o->expect && i < o->n_files; i++) {
        cc_parse_error err;
        if (cc_expect_load(o->files[i], &def, &expect, &err)) {
            print_parse_error(&err);
            cc_expect_free(&expect);
            cc_case_list_free(&cases);
            free(prov.shard.global);
            return 2;
        }
    }
    if (o->expect)
        so.expect = &expect;
    int rc = cc_session_run(&so);
    /* every run that wrote its report is signed: 0, 1, or 125 (a case could not be judged) */
    if (tally->written && o->sign && sign_run(o, so.out_dir))
        rc = CC_EXIT_USAGE;
    cc_expect_free(&expect);
    cc_case_list_free(&cases);
    free(prov.shard.global);
    /* a run that wrote its report (exit 0, 1, or 125 for an unjudged case) gets report.html;
     * certify writes its own, with its verdicts, and its summary says where all is */
    int page = tally->written && !o->certify;
    if (page &&
        cc_write_report_html(so.out_dir, o->policy, "capcheck", o->quiet ? NULL : stdout, stderr)) {
        rc = CC_EXIT_UNJUDGED; /* the results are safe; the disk would not take the page */
        page = 0;
    }
    if (page && (tally->large || o->quiet))
        cc_session_print_closing(tally, so.out_dir, stdout);
    return rc;
}

/* capcheck certify (harness/certify.h): what it reads is checked first, then the evidence suite
 * runs as capcheck run runs it, then it is judged. */
static int cmd_certify(const options *o, int argc, char **argv)
{
    cc_certify_opts co = {o->resume ? o->resume : o->out, o->policy, o->catalog, o->torchlean,
                          o->sign};
    if (cc_certify_check(&co, stderr))
        return CC_EXIT_USAGE;
    cc_session_tally tally;
    int rc = cmd_run(o, argc, argv, &tally);
    if (!tally.written) /* the run stopped before its report: 2, 125 or 128 + N, said */
        return rc;
    /* the run's 1 or 125 (a case failed, or could not be judged) is for the policy to judge */
    int verdict = cc_certify_finish(&co, stdout, stderr);
    if (verdict <= CC_EXIT_NOT_PASSED && tally.cases > 0 && tally.unjudged == tally.cases) {
        fprintf(stderr, "capcheck certify: nothing could be judged: none of the %ld cases ran "
                        "on %s (unsupported, or memory ran out; %s/report.md lists them)\n",
                tally.cases, o->provider_lib ? o->provider_lib : o->provider ? o->provider : "aten",
                co.out_dir);
        return CC_EXIT_UNJUDGED;
    }
    return verdict;
}

/* The one case line that repro and shrink take; 0, or -1 after one sentence on stderr. */
static int parse_case_argument(const options *o, const char *usage, cc_case *c)
{
    cc_device device;
    if (cc_device_parse(o->device, &device)) {
        char why[512];
        cc_device_unknown_msg(o->device, why, sizeof why);
        fprintf(stderr, "capcheck: --device: %s\n", why);
        return -1;
    }
    if (o->n_files != 1) {
        fprintf(stderr, "%s\n", usage);
        return -1;
    }
    cc_case_defaults def = {device, o->seed};
    cc_parse_error err;
    memset(&err, 0, sizeof err);
    if (cc_case_parse(o->files[0], &def, c, &err)) {
        fprintf(stderr, "case line:1:%d: %s\n", err.column, err.msg);
        return -1;
    }
    return 0;
}

static int repro_at_level(const options *o, const cc_provider *p, const cc_case *c, int level,
                          int aten_threads, int again, cc_result *r);

/* What reruns a case as the pass at CPU level `level` (0: native) and `aten_threads` ATen
 * threads (0: none set) ran it: the command's own repro words and that pass's. */
static cc_repro repro_of_pass(const options *o, int level, int aten_threads)
{
    cc_repro r = o->repro;
    char word[64];
    if (level) {
        snprintf(word, sizeof word, "--cpu-capability %s", cc_level_name(level));
        cc_repro_add_arg(&r, word);
    }
    if (aten_threads) {
        snprintf(word, sizeof word, "--aten-threads %d", aten_threads);
        cc_repro_add_arg(&r, word);
    }
    return r;
}

static int cmd_repro(const options *o)
{
    cc_case c;
    if (parse_case_argument(o, "capcheck repro: give exactly one case line in quotes", &c))
        return 2;
    const cc_provider *p = select_provider(o);
    if (!p)
        return no_provider_code(o);
    int failed = 0, unjudged = 0; /* over the levels and thread counts */
    cc_result r, pass;
    int counts = o->n_aten_threads ? o->n_aten_threads : 1, level = 0, threads = 0;
    for (int k = 0; k < (o->n_cpu_levels ? o->n_cpu_levels : 1) * counts; k++) {
        int at_level = o->n_cpu_levels ? o->cpu_levels[k / counts] : 0,
            at_threads = o->n_aten_threads ? o->aten_threads[k % counts] : 0;
        int rc = repro_at_level(o, p, &c, at_level, at_threads, k > 0, &pass);
        /* the script reproduces the first pass that did not pass (its level and thread
         * count), else the last */
        if (!failed) {
            r = pass;
            level = at_level;
            threads = at_threads;
        }
        failed += rc == CC_EXIT_NOT_PASSED;
        unjudged += rc == CC_EXIT_UNJUDGED;
    }
    if (o->script) { /* the case's standalone reproducer: for a bisect without capcheck */
        char cmd[2700];
        cc_repro at = repro_of_pass(o, level, threads);
        cc_repro_command(&at, r.line[0] ? r.line : o->files[0], cmd, sizeof cmd);
        if (cc_reproducer_hand_out(&c, p, r.line[0] ? &r : NULL, cmd, o->script, stdout,
                                   stderr))
            return CC_EXIT_UNJUDGED;
    }
    return cc_exit_code_of(failed, unjudged);
}

/* repro at one dispatch level (0: native) and ATen thread count (0: none set); its exit code
 * (125 when the provider could not start: init failed, the device is absent), its result in
 * *out (line "" when none). */
static int repro_at_level(const options *o, const cc_provider *p, const cc_case *c, int level,
                          int aten_threads, int again, cc_result *out)
{
    cc_result r;
    char msg[512];
    out->line[0] = 0;
    cc_run_options run = run_options(o);
    if (cc_run_case_in_worker(p, c, o->timeout, o->no_fork, o->witnesses, o->n_witnesses, level,
                              aten_threads, &run, &r, msg, sizeof msg)) {
        fprintf(stderr, "capcheck: %s\n", msg);
        return CC_EXIT_UNJUDGED;
    }
    if (again)
        printf("\n");
    printf("case:     %s\nprovider: %s (vjpMode %s)\n", r.line, r.provider, r.vjp_mode);
    char threads[32] = "";
    if (aten_threads)
        snprintf(threads, sizeof threads, " at %d ATen thread%s", aten_threads,
                 aten_threads > 1 ? "s" : "");
    if (r.platform[0] && (o->n_cpu_levels || aten_threads))
        printf("platform: %s (level %s%s)\n", r.platform, cc_level_name(level), threads);
    else if (r.platform[0])
        printf("platform: %s\n", r.platform);
    printf("status:   %s%s%s%s%s%s%s\njudged:   %s accumulation\n",
           cc_result_status_name(r.status), r.suspect ? ", suspect" : "",
           r.vacuous ? ", vacuous" : "", r.vacuous_outputs[0] ? " (" : "", r.vacuous_outputs,
           r.vacuous_outputs[0] ? ")" : "", r.placement_sensitive ? ", placement-sensitive" : "",
           cc_accumulation_name(r.accumulation));
    if (r.checked_fwd)
        printf("forward:  worst bound ratio %.4g\n", r.fwd_ratio);
    if (r.checked_vjp)
        printf("vjp:      worst bound ratio %.4g\n", r.vjp_ratio);
    if (r.sampled)
        printf("sampled:  %.3g%% of the elements checked against the reference; every %lld x "
               "%lld window holds one\n",
               100.0 * r.checked_fraction, (long long)r.window_rows, (long long)r.window_cols);
    if (r.checked_fwd || r.checked_vjp)
        printf("suspect:  worst ratio to the probabilistic bound %.4g (lambda %g)\n",
               r.suspect_ratio, CC_SUSPECT_LAMBDA);
    if (r.prob_judged > 0)
        printf("prob:     the probabilistic bound judged %lld element%s (the worst-case bound "
               "admits every value there)\n",
               (long long)r.prob_judged, r.prob_judged == 1 ? "" : "s");
    if (r.bias.n > 0)
        printf("bias:     %s's final rounding at %lld distinct values: %lld toward zero, %lld "
               "below; mean %.3g ulp away from zero; z = %.3g (round to nearest: |z| <= %.3g)\n",
               r.bias_output, (long long)r.bias.n, (long long)r.bias.toward_zero,
               (long long)r.bias.below, r.bias.mean_ulp, r.bias.z, cc_bias_z_threshold());
    if (r.worst_output[0])
        printf("worst:    %s%s expected %.17g got %.17g bound %.3g%s%s%s\n", r.worst_output,
               r.worst_index, r.expected, r.got, r.bound,
               r.worst_by_prob ? " (probabilistic)" : "", r.worst_inputs[0] ? " at " : "",
               r.worst_inputs);
    if (r.placement_sensitive)
        printf("placement: %s%s is %.17g at the first buffer placement and %.17g at the other; "
               "each placement gave its bits again: placement-sensitive, not a race "
               "(docs/reliability.md)\n",
               r.placement_output, r.placement_index, r.placement_first, r.placement_moved);
    if (r.message[0])
        printf("message:  %s\n", r.message);
    for (int k = 0; k < r.n_witnesses; k++) {
        const cc_witness *w = &r.witnesses[k];
        printf("witness:  %s %s", w->provider, cc_result_status_name(w->status));
        if (w->status == CC_RES_PASS || w->status == CC_RES_FAIL)
            printf(", worst bound ratio %.4g", w->worst_ratio);
        if (w->has_value)
            printf("; at %s%s got %.17g (%.4g bounds from the provider's)", r.worst_output,
                   r.worst_index, w->got, w->agree_ratio);
        printf("%s%s\n", w->message[0] ? "; " : "", w->message);
    }
    if (r.n_witnesses)
        printf("verdict:  %s\n", cc_verdict_name(r.verdict));
    cc_result_write_json(stdout, &r);
    *out = r;
    return cc_result_exit_code(&r);
}

static int cmd_shrink(const options *o)
{
    cc_case c;
    if (parse_case_argument(o, "capcheck shrink: give exactly one failing case line in quotes",
                            &c))
        return 2;
    if (o->n_cpu_levels > 1 || o->n_aten_threads > 1) {
        fprintf(stderr, "capcheck shrink: give one --cpu-capability level and one --aten-threads "
                        "count: the pass where the case failed\n");
        return 2;
    }
    const cc_provider *p = select_provider(o); /* initialised by the shrink's worker */
    if (!p)
        return no_provider_code(o);
    int level = o->n_cpu_levels ? o->cpu_levels[0] : 0,
        threads = o->n_aten_threads ? o->aten_threads[0] : 0;
    cc_shrink_opts so = {.timeout_s = o->timeout, .log = stderr, .cpu_level = level,
                         .aten_threads = threads};
    cc_repro at = repro_of_pass(o, level, threads);
    return cc_shrink_command(p, &c, o->script, &so, &at, stdout, stderr);
}

static int cmd_bench(const options *o)
{
    double min_time = positive_option("--min-time", o->min_time, 0.2, 0),
           reps = positive_option("--reps", o->reps, 5, 1),
           max_elements = positive_option("--max-elements", o->max_elements, 1024, 1);
    if (min_time < 0 || reps < 0 || max_elements < 0)
        return 2;
    if (reps > 64) {
        fprintf(stderr, "capcheck: --reps: at most 64\n");
        return 2;
    }
    cc_device device;
    cc_case_list cases;
    char files[512];
    if (load_cases(o, &device, &cases, files, sizeof files))
        return 2;
    int rc = 2;
    const cc_provider *p = select_provider(o); /* initialised in the bench's watched child */
    if (p) {
        cc_bench_opts bo = {min_time, (int)reps, (int64_t)max_elements, files, o->json,
                            run_options(o), o->ratio_only, o->timeout};
        rc = cc_bench_command(p, cases.v, cases.n, &bo, stdout, stderr);
    }
    cc_case_list_free(&cases);
    return rc;
}

static int cmd_list_cases(const options *o)
{
    double max_elements = positive_option("--max-elements", o->max_elements, 0, 1);
    cc_device device;
    cc_case_list cases;
    char files[512];
    if (max_elements < 0 || load_cases(o, &device, &cases, files, sizeof files))
        return 2;
    keep_at_most(&cases, max_elements);
    for (size_t i = 0; i < cases.n; i++) {
        char line[CC_CASE_LINE_MAX];
        cc_case_print(&cases.v[i], line, sizeof line);
        printf("%s\n", line);
    }
    cc_case_list_free(&cases);
    return fflush(stdout) || ferror(stdout) ? 2 : 0;
}

/* Every op: report name, forward and VJP in the reference, inputs (optional ones in
 * [brackets], "..." when more may follow) and parameters with the values a line that omits
 * them gets. */
/* The TorchLean commits emit-lean has names for, newest first: what --torchlean takes. */
static int cmd_list_torchlean(void)
{
    char msg[512];
    cc_torchlean *all = calloc(CC_TL_MAX_COMMITS, sizeof *all);
    int n = all ? cc_torchlean_load_all(all, CC_TL_MAX_COMMITS, msg, sizeof msg) : -1;
    if (n < 0) {
        fprintf(stderr, "capcheck list torchlean: %s\n", all ? msg : "out of memory");
        free(all);
        return 2;
    }
    printf("TorchLean commits capcheck emit-lean has names for, newest first (--torchlean takes "
           "7 or more digits):\n");
    for (int i = 0; i < n; i++) {
        const cc_tl_row *repo = cc_tl_find(&all[i], "repository", NULL);
        printf("  %s  %s or later (the newest date its files state: %s)  %s%s\n", all[i].commit,
               all[i].date, all[i].date_source, repo ? repo->value : "",
               i == 0 ? "  (the default)" : "");
        cc_torchlean_free(&all[i]);
    }
    free(all);
    return 0;
}

static int cmd_list_ops(void)
{
    int missing = 0;
    printf("%-18s %-20s %-7s %-7s %-26s %s\n", "op", "report name", "forward", "vjp", "inputs",
           "parameters (defaults)");
    for (int i = 0; i < ref_spec_op_count(); i++) {
        const char *name = ref_spec_op_name(i);
        const ref_op *op = ref_op_find(name);
        if (!op) {
            printf("%-18s %-20s %-7s %-7s\n", name, "-", "missing", "missing");
            missing++;
            continue;
        }
        char inputs[160] = "";
        int variadic = op->max_inputs == REF_MAX_INPUTS && op->max_inputs > op->min_inputs;
        int shown = variadic ? op->min_inputs + 1 : op->max_inputs;
        for (int k = 0; k < shown && k < REF_MAX_INPUTS; k++) {
            size_t used = strlen(inputs);
            const char *in = op->input_names[k] ? op->input_names[k] : "?";
            snprintf(inputs + used, sizeof inputs - used, "%s%s%s%s", k ? "," : "",
                     k >= op->min_inputs ? "[" : "", in, k >= op->min_inputs ? "]" : "");
        }
        if (variadic)
            strncat(inputs, ",...", sizeof inputs - strlen(inputs) - 1);
        if (!inputs[0])
            snprintf(inputs, sizeof inputs, "none (to= gives the shape)");
        char params[400];
        cc_op_params_describe(op, params, sizeof params);
        const char *vjp = op->vjp ? "yes" : (op->requires_vjp ? "missing" : "n/a");
        if (!op->vjp && op->requires_vjp)
            missing++;
        printf("%-18s %-20s %-7s %-7s %-26s %s\n", op->name, op->report_name,
               op->forward ? "yes" : "missing", vjp, inputs, params[0] ? params : "-");
    }
    printf("%d ops in the vocabulary, %d implemented, %d missing a forward or a required VJP\n",
           ref_spec_op_count(), ref_op_count(), missing);
    return fflush(stdout) || ferror(stdout) ? 2 : 0;
}

/* "--help" or "-h" anywhere after the command asks for its help. */
static int asks_for_help(int argc, char **argv)
{
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}

/* --cpu-capability: the levels (harness/run/platform.h) this CPU can run; 0, or -1 after one
 * sentence. */
static int resolve_levels(options *o, int is_run)
{
    if (!o->cpu_capability)
        return 0;
    char flags[256], msg[512];
    cc_cpu_flags(flags, sizeof flags);
    o->n_cpu_levels =
        cc_levels_parse(o->cpu_capability, flags, o->cpu_levels, CC_MAX_LEVELS, msg, sizeof msg);
    if (o->n_cpu_levels < 0) {
        fprintf(stderr, "capcheck: %s\n", msg);
        return -1;
    }
    if (o->no_fork && o->n_cpu_levels > 1) {
        fprintf(stderr, "capcheck: --no-fork runs in this process, where ATen and oneDNN fix "
                        "their dispatch at first use: give --cpu-capability one level\n");
        return -1;
    }
    if (is_run && o->shard && o->n_cpu_levels > 1) {
        fprintf(stderr, "capcheck: --shard takes one --cpu-capability level: shard each "
                        "level's run and merge each level's shards\n");
        return -1;
    }
    return 0;
}

/* --aten-threads: the ATen provider's intra-op thread counts, each a pass of its own; 0, or -1
 * after one sentence. */
static int resolve_aten_threads(options *o, int is_run)
{
    if (!o->aten_threads_spec)
        return 0;
    char msg[256];
    o->n_aten_threads = cc_aten_threads_parse(o->aten_threads_spec, cc_online_cpus(),
                                              o->aten_threads, CC_MAX_ATEN_THREADS, msg,
                                              sizeof msg);
    if (o->n_aten_threads < 0) {
        fprintf(stderr, "capcheck: %s\n", msg);
        return -1;
    }
    if (o->provider_lib || strcmp(o->provider, "aten") != 0) {
        fprintf(stderr, "capcheck: --aten-threads sets the ATen provider's intra-op threads; "
                        "provider %s has none to set\n",
                o->provider_lib ? o->provider_lib : o->provider);
        return -1;
    }
    int passes = o->n_aten_threads * (o->n_cpu_levels ? o->n_cpu_levels : 1);
    if (o->no_fork && o->n_aten_threads > 1) {
        fprintf(stderr, "capcheck: --no-fork runs in this process, where ATen keeps the thread "
                        "count of its first init: give --aten-threads one count\n");
        return -1;
    }
    if (is_run && o->shard && passes > 1) {
        fprintf(stderr, "capcheck: --shard takes one --aten-threads count and one "
                        "--cpu-capability level: shard each pass's run and merge its shards\n");
        return -1;
    }
    if (passes > CC_MAX_PLATFORMS) {
        fprintf(stderr, "capcheck: %d levels at %d ATen thread counts are %d platforms; one "
                        "run holds at most %d\n",
                o->n_cpu_levels, o->n_aten_threads, passes, CC_MAX_PLATFORMS);
        return -1;
    }
    return 0;
}

/* certify runs the suite as the nightly does unless told otherwise (harness/certify.h): at its
 * repeat, and the ATen provider on the CPU at each of its thread counts. */
static void certify_defaults(options *o)
{
    if (!o->repeat)
        o->repeat = CC_CERTIFY_REPEAT;
    if (!o->aten_threads_spec && !o->provider_lib && strcmp(o->provider, "aten") == 0 &&
        strcmp(o->device, "cpu") == 0)
        o->aten_threads_spec = CC_CERTIFY_ATEN_THREADS;
}

/* capcheck list platforms: every level, whether this CPU can run it, and the platform the
 * provider's worker reports at it. */
static int cmd_list_platforms(const options *o)
{
    cc_device device;
    if (cc_device_parse(o->device, &device)) {
        fprintf(stderr, "capcheck: unknown device '%s' (cpu, cuda)\n", o->device);
        return 2;
    }
    const cc_provider *p = select_provider(o);
    if (!p)
        return 2;
    char flags[256], msg[512];
    cc_cpu_flags(flags, sizeof flags);
    int all[CC_MAX_LEVELS];
    int n_all = cc_levels_parse("all", flags, all, CC_MAX_LEVELS, msg, sizeof msg);
    printf("cpu flags: %s\n", flags[0] ? flags : "none");
    printf("%-12s %-4s %-3s %-24s %s\n", "level", "all", "ok", "platform", "facts");
    for (int lv = 0; lv < cc_level_count(); lv++) {
        int in_all = 0;
        for (int k = 0; k < n_all; k++)
            in_all |= all[k] == lv;
        char why[128];
        if (!cc_level_supported(lv, flags)) {
            printf("%-12s %-4s %-3s this CPU cannot run it\n", cc_level_name(lv), "-", "no");
            continue;
        }
        if (!cc_level_within_environment(lv, why, sizeof why)) {
            printf("%-12s %-4s %-3s %s\n", cc_level_name(lv), "-", "no", why);
            continue;
        }
        cc_pool_config pc = {p, 1, 1u << device, 0, 0, o->no_fork, NULL, 0, lv, run_options(o), -1, 0};
        cc_pool *pool;
        if (lv > 0 && o->no_fork) {
            printf("%-12s %-4s %-3s (not probed with --no-fork)\n", cc_level_name(lv),
                   in_all ? "yes" : "-", "yes");
            continue;
        }
        if (cc_pool_start(&pc, &pool, msg, sizeof msg)) {
            fprintf(stderr, "capcheck: %s\n", msg);
            return 2;
        }
        const cc_platform *pl = cc_pool_platform(pool, device);
        char facts[1024] = "";
        if (pl)
            cc_platform_summary(pl, facts, sizeof facts);
        printf("%-12s %-4s %-3s %-24s %s\n", cc_level_name(lv), in_all ? "yes" : "-", "yes",
               pl ? pl->key : "?", facts);
        cc_pool_close(pool);
    }
    return 0;
}

int main(int argc, char **argv)
{
    /* a file-size limit (ulimit -f) reached while writing is an error to report (EFBIG), like
     * a full disk, not a signal that ends capcheck without a word */
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        cc_help_print(argc < 2 ? stderr : stdout, NULL);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("capcheck %s\n", CC_VERSION);
        return 0;
    }
    if (strcmp(argv[1], "help") == 0) {
        if (argc > 3 || (argc == 3 && cc_help_print(stdout, argv[2]))) {
            fprintf(stderr, "capcheck help: %s: try capcheck help (the commands)\n",
                    argc > 3 ? "one command at a time" : "no such command");
            return 2;
        }
        return argc == 2 ? cc_help_print(stdout, NULL) : 0;
    }
    if (!cc_help_known(argv[1])) {
        fprintf(stderr, "capcheck: unknown command '%s' (capcheck help lists them)\n", argv[1]);
        return 2;
    }
    if (asks_for_help(argc, argv))
        return cc_help_print(stdout, argv[1]) ? 2 : 0;
    if (cc_is_evidence_command(argv[1]))
        return cc_evidence_command(argc, argv);
    if (strcmp(argv[1], "power") == 0)
        return cc_power_command(argc - 2, argv + 2, stdout, stderr);
    int is_list_cases = strcmp(argv[1], "list") == 0 && argc >= 3 && !strcmp(argv[2], "cases");
    int is_list_platforms =
        strcmp(argv[1], "list") == 0 && argc >= 3 && !strcmp(argv[2], "platforms");
    if (strcmp(argv[1], "list") == 0 && !is_list_cases && !is_list_platforms) {
        if (argc == 3 && strcmp(argv[2], "ops") == 0)
            return cmd_list_ops();
        if (argc == 3 && strcmp(argv[2], "torchlean") == 0)
            return cmd_list_torchlean();
        fprintf(stderr, "capcheck: try 'capcheck list ops', 'capcheck list cases FILE...', "
                        "'capcheck list platforms' or 'capcheck list torchlean'\n");
        return 2;
    }
    int is_run = strcmp(argv[1], "run") == 0, is_repro = strcmp(argv[1], "repro") == 0,
        is_shrink = strcmp(argv[1], "shrink") == 0, is_bench = strcmp(argv[1], "bench") == 0,
        is_certify = strcmp(argv[1], "certify") == 0;
    unsigned command = is_certify  ? C_CERTIFY
                       : is_run    ? C_RUN
                       : is_repro  ? C_REPRO
                       : is_shrink ? C_SHRINK
                       : is_bench  ? C_BENCH
                       : is_list_platforms ? C_PLATFORMS
                                   : C_LIST;
    options o;
    if (parse_options(argc, argv, is_list_cases || is_list_platforms ? 3 : 2, command, argv[1], &o) ||
        apply_math_modes(&o))
        return 2;
    if (is_certify)
        certify_defaults(&o);
    if (resolve_levels(&o, is_run || is_certify) || resolve_aten_threads(&o, is_run || is_certify))
        return 2;
    int libtorch_rc = use_libtorch(&o);
    if (libtorch_rc)
        return libtorch_rc;
    if (o.provider_lib) { /* --provider-lib replaces --provider */
        char msg[1024];
        if (!(o.plugin = cc_plugin_open_within(o.provider_lib, o.timeout, msg, sizeof msg))) {
            fprintf(stderr, "capcheck: %s\n", msg);
            return is_bench || is_list_platforms ? CC_EXIT_USAGE : CC_EXIT_UNJUDGED;
        }
    }
    /* after the math modes: what the workers inherit is what a repro line names */
    cc_repro_collect(&o.repro, o.provider, o.provider_lib, o.timeout);
    if (o.repeat > 1) { /* how every case ran: a repeat disagreement reproduces only repeated */
        char word[32];
        snprintf(word, sizeof word, "--repeat %d", o.repeat);
        cc_repro_add_arg(&o.repro, word);
    }
    if (o.no_guard)
        cc_repro_add_arg(&o.repro, "--no-guard");
    if (o.accumulation_mode == CC_ACC_RELAXED) /* a repro judges as the run judged */
        cc_repro_add_arg(&o.repro, "--accumulation relaxed");
    int rc = 2;
    if (is_list_cases)
        rc = cmd_list_cases(&o);
    else if (is_list_platforms)
        rc = cmd_list_platforms(&o);
    else if (is_bench)
        rc = cmd_bench(&o);
    else if ((rc = open_witnesses(&o)) == 0)
        rc = is_certify ? cmd_certify(&o, argc, argv)
             : is_run   ? cmd_run(&o, argc, argv, &(cc_session_tally){0})
             : is_repro ? cmd_repro(&o)
                        : cmd_shrink(&o);
    for (int k = 0; k < CC_MAX_WITNESSES; k++)
        cc_plugin_close(o.witness_plugins[k]);
    cc_plugin_close(o.plugin);
#if !defined(__SANITIZE_ADDRESS__) && !defined(CAPCHECK_COVERAGE)
    if (cc_aten_loaded()) { /* libtorch's exit deregisters every operator: 0.1 s for nothing */
        fflush(NULL);
        _exit(rc);
    }
#endif
    return rc;
}
