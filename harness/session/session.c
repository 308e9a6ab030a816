#define _POSIX_C_SOURCE 200809L
#include "harness/session/session.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/signalfd.h>
#endif

#include "core/clock.h"
#include "harness/report/manifest.h"
#include "harness/report/report.h"
#include "harness/report/report_out.h"
#include "harness/run/exit_code.h"
#include "harness/report/report_terminal.h"
#include "harness/run/pool.h"
#include "harness/run/witness.h"
#include "harness/session/journal.h"

static void remove_in(const char *dir, const char *name)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    remove(path);
}

typedef struct {
    const cc_session_opts *o;
    const cc_repro *repro; /* the run's (run.json's on a resume) */
    cc_journal *journal;
    size_t done, total, passed;
    size_t level_done, level_passed; /* of the level running */
    const char *level;               /* its name when --cpu-capability gave levels, else NULL */
    double started, last_progress;
    int failed; /* the journal could not be written */
    char msg[512];
    size_t case_lines;    /* cases whose line was due (CC_CASE_LINES_SHOWN) */
    int large;            /* the run is large (session.h): its case lines give way */
    size_t progress_done; /* done at the last progress line not on a terminal */
} run_state;

/* "12 s", "3 min 20 s", "1 h 05 min": a duration for the progress line. */
static void format_duration(double s, char *buf, size_t n)
{
    long t = s > 0 && s < 1e9 ? (long)(s + 0.5) : 0;
    if (t < 60)
        snprintf(buf, n, "%ld s", t);
    else if (t < 3600)
        snprintf(buf, n, "%ld min %02ld s", t / 60, t % 60);
    else
        snprintf(buf, n, "%ld h %02ld min", t / 3600, t / 60 % 60);
}

/* The command that reruns r as this run ran it (harness/report/repro.h), at its level. */
static void repro_of(const run_state *s, const cc_result *r, char *cmd, size_t n)
{
    cc_repro_command(s->repro, r->line, cmd, n);
    if (s->level) {
        size_t used = strlen(cmd);
        snprintf(cmd + used, n - used, " --cpu-capability %s", s->level);
    }
}

/* The line of a case that does not pass (with --expect: whose outcome is news) and the
 * command that reruns it, on the log: every one with --verbose, else those of a run that is not
 * large; the case that makes a run large says once that the rest give way (session.h). */
static void print_case_line(run_state *s, const cc_result *r)
{
    FILE *log = s->o->log;
    char said[1024];
    cc_expect_outcome judged = CC_EXPECT_NONE;
    if (s->o->expect)
        judged = cc_expect_judge(cc_expect_find(s->o->expect, r->line), r, said, sizeof said);
    int news = s->o->expect ? judged != CC_EXPECT_NONE && judged != CC_EXPECT_REPRODUCED
                            : r->status != CC_RES_PASS;
    if (!news)
        return;
    if (++s->case_lines > CC_CASE_LINES_SHOWN && !s->large) {
        s->large = 1;
        if (s->o->verbosity <= 0) {
            if (s->o->tty)
                fprintf(log, "\r\033[K");
            fprintf(log, "capcheck: more than %d cases to report: their lines stop here (-v "
                         "prints every one); the run ends with the worst case of each op x "
                         "dtype that did not pass\n",
                    CC_CASE_LINES_SHOWN);
        }
    }
    if (s->large && s->o->verbosity <= 0)
        return;
    char cmd[2700];
    repro_of(s, r, cmd, sizeof cmd);
    const char *twice = r->retried ? " (its first worker was killed from outside: ran twice)" : "";
    if (s->o->tty)
        fprintf(log, "\r\033[K");
    if (s->o->expect) {
        fprintf(log, "%s: %s%s\n  %s\n", cc_expect_outcome_name(judged), said, twice, cmd);
        return;
    }
    if (s->level)
        fprintf(log, "%s on %s: %s%s\n  %s\n", cc_result_status_name(r->status), r->platform,
                r->message, twice, cmd);
    else
        fprintf(log, "%s: %s%s\n  %s\n", cc_result_status_name(r->status), r->message, twice,
                cmd);
    if (r->n_witnesses) {
        cc_witness_summary(r, said, sizeof said);
        fprintf(log, "  witnesses: %s\n", said);
    }
}

/* On a terminal, the progress line, redrawn at most every 0.1 s; elsewhere, once the run is
 * large, a line per tenth of the run at most every CC_PROGRESS_SECONDS. */
static int progress_due(const run_state *s, double t)
{
    if (s->o->tty)
        return t - s->last_progress > 0.1 || s->done == s->total;
    double since = t - (s->last_progress > 0 ? s->last_progress : s->started);
    return s->large && s->done < s->total &&
           since >= CC_PROGRESS_SECONDS && (s->done - s->progress_done) * 10 >= s->total;
}

static void print_progress(run_state *s, const cc_result *r)
{
    FILE *log = s->o->log;
    double t = cc_monotonic_seconds();
    int tty = s->o->tty;
    if (!progress_due(s, t))
        return;
    char elapsed[32], eta[32];
    format_duration(t - s->started, elapsed, sizeof elapsed);
    format_duration((t - s->started) / (double)s->done * (double)(s->total - s->done), eta,
                    sizeof eta);
    if (tty) {
        fprintf(log, "\r\033[K[%zu/%zu] %s %s: %zu passed, %zu not; %s, ETA %s", s->done,
                s->total, r->op, cc_dtype_name(r->dtype), s->passed, s->done - s->passed,
                elapsed, eta);
        fflush(log);
        s->last_progress = t;
        return;
    }
    fprintf(log, "capcheck: [%zu/%zu] %zu passed, %zu not; %s, ETA %s\n", s->done, s->total,
            s->passed, s->done - s->passed, elapsed, eta);
    fflush(log);
    s->last_progress = t;
    s->progress_done = s->done;
}

static void on_result(run_state *s, size_t index, const cc_result *r)
{
    if (cc_journal_append(s->journal, index, r, s->msg, sizeof s->msg))
        s->failed = 1;
    s->done++;
    s->passed += r->status == CC_RES_PASS;
    s->level_done++;
    s->level_passed += r->status == CC_RES_PASS;
    if (!s->o->log)
        return;
    print_case_line(s, r);
    print_progress(s, r);
}

/* The witnesses' names, comma-separated (run.json's "witnesses"). */
static void witness_names(const cc_session_opts *o, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
    for (int k = 0; k < o->n_witnesses && used < n; k++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", k ? "," : "",
                                 o->witnesses[k]->name);
}

/* The levels' names, comma-separated (run.json's "cpu_capability"; "" without levels). */
static void level_names(const cc_session_opts *o, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
    for (int k = 0; k < o->n_cpu_levels && used < n; k++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", k ? "," : "",
                                 cc_level_name(o->cpu_levels[k]));
}

/* run.json's `was` and this command's `now` of one field must agree for a resume: 0, or -1 with
 * msg "DIR/run.json is a run <ran> 'was'; this command <asks> 'now': resume with the same
 * <same>, or start a new run without --resume" ("" shown as "(none)"). */
static int refuse_other(const cc_session_opts *o, const char *ran, const char *was,
                        const char *asks, const char *now, const char *same, char *msg,
                        size_t len)
{
    if (strcmp(was, now) == 0)
        return 0;
    snprintf(msg, len,
             "%s/run.json is a run %s '%s'; this command %s '%s': resume with the same %s, or "
             "start a new run without --resume",
             o->out_dir, ran, was[0] ? was : "(none)", asks, now[0] ? now : "(none)", same);
    return -1;
}

/* Check that DIR/run.json describes this run; -1 with msg when it does not. */
static int check_same_run(const cc_session_opts *o, const cc_run_info *was, uint64_t hash,
                          char *msg, size_t len)
{
    if (was->n_cases != o->n_cases || was->case_hash != hash) {
        snprintf(msg, len,
                 "%s/run.json is a run of %llu cases (case-list hash %016llx); this command "
                 "gives %zu cases (hash %016llx): the case list changed (files, --op, --seed, "
                 "--device or capcheck itself); start a new run without --resume",
                 o->out_dir, (unsigned long long)was->n_cases,
                 (unsigned long long)was->case_hash, o->n_cases, (unsigned long long)hash);
        return -1;
    }
    char witnesses[256], levels[256];
    witness_names(o, witnesses, sizeof witnesses);
    level_names(o, levels, sizeof levels);
    if (refuse_other(o, "on provider", was->provider, "asks for", o->provider->name, "provider",
                     msg, len) ||
        refuse_other(o, "judged", was->judging, "judges",
                     cc_judging_describe(o->run.accumulation, o->run.power),
                     "--accumulation and --power", msg, len) ||
        refuse_other(o, "with witnesses", was->witnesses, "names", witnesses, "--witness", msg,
                     len) ||
        refuse_other(o, "at --cpu-capability", was->cpu_levels, "asks for", levels, "levels",
                     msg, len))
        return -1;
    return 0;
}

/* A fresh run must not silently truncate another run's journal: a folder holding run.json or
 * a non-empty results.jsonl is refused unless --force. 0, or -1 with msg. */
static int check_fresh_folder(const cc_session_opts *o, char *msg, size_t len)
{
    const char *held = cc_dir_holds_run(o->out_dir);
    if (o->force || !held)
        return 0;
    snprintf(msg, len,
             "%s holds an earlier run (%s): --resume %s finishes it (or writes its report "
             "again), --force starts over and discards it, or give another --out",
             o->out_dir, held, o->out_dir);
    return -1;
}

/* The signals that end a run (Ctrl-C, a scheduler's SIGTERM, a closed terminal) are blocked
 * and read from a signalfd the pool watches, so the run stops between events and says how to
 * finish it. Linux only; elsewhere they keep their default action. */
typedef struct {
    int fd;
    sigset_t old;
} interrupts;

static void interrupts_open(interrupts *in)
{
    in->fd = -1;
#ifdef __linux__
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &set, &in->old) == 0) {
        in->fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
        if (in->fd < 0)
            sigprocmask(SIG_SETMASK, &in->old, NULL);
    }
#endif
}

static void interrupts_close(interrupts *in)
{
    if (in->fd < 0)
        return;
    close(in->fd);
    sigprocmask(SIG_SETMASK, &in->old, NULL); /* a signal still pending now acts as usual */
    in->fd = -1;
}

/* The platforms a level's pool reports go into the run's list: a platform of this level and
 * device the run recorded before must be the same one (a resume on a changed machine or
 * environment is refused), and no other level may have given the same key. Returns 1 when the
 * list grew, 0 when it did not, -1 with msg. */
static int note_platforms(const cc_session_opts *o, const cc_pool *pool, unsigned devices,
                          const char *level, cc_run_info *info, char *msg, size_t len)
{
    int grew = 0;
    for (int d = 0; d < CC_DEVICE_COUNT; d++) {
        const cc_platform *p = (devices >> d & 1) ? cc_pool_platform(pool, (cc_device)d) : NULL;
        if (!p)
            continue;
        int known = 0;
        for (int i = 0; i < info->n_platforms; i++) {
            const cc_platform *q = &info->platforms[i];
            if (strcmp(q->device, p->device) != 0)
                continue;
            int same_level = strcmp(q->level, p->level) == 0;
            if (same_level && strcmp(q->key, p->key) != 0) {
                snprintf(msg, len,
                         "%s/run.json: level %s gave platform %s when the run started; its "
                         "workers now report %s (the machine or the dispatch environment "
                         "changed): resume where it started, or start a new run",
                         o->out_dir, level, q->key, p->key);
                return -1;
            }
            if (!same_level && strcmp(q->key, p->key) == 0) {
                snprintf(msg, len,
                         "--cpu-capability: levels %s and %s both give platform %s on %s (%s "
                         "does not dispatch on them): run one of them",
                         q->level, level, p->key, p->device, o->provider->name);
                return -1;
            }
            known |= same_level;
        }
        if (known)
            continue;
        if (info->n_platforms == CC_MAX_PLATFORMS) {
            snprintf(msg, len, "more than %d platforms in one run", CC_MAX_PLATFORMS);
            return -1;
        }
        info->platforms[info->n_platforms++] = *p;
        grew = 1;
    }
    return grew;
}

/* A resumed journal keeps every good record: damaged lines and the records of crashes to run
 * again go (the damaged file stays beside it), and it is read again; what was found is said
 * on the log. Nothing to do for a fresh run. 0, or -1 with msg. */
static int salvage_journal(const cc_session_opts *o, cc_journal_scan *scan, size_t total,
                           int n_levels, char *msg, size_t len)
{
    if (!o->resume)
        return 0;
    int damaged = scan->damaged_lines, reruns = (int)scan->n_rerun, torn = scan->torn_lines;
    long first_damaged = scan->first_damaged_line;
    char why[256];
    snprintf(why, sizeof why, "%s", scan->damaged_why);
    if (damaged || reruns || scan->duplicates) {
        if (cc_journal_compact(o->out_dir, scan, msg, len))
            return -1;
        cc_journal_scan_free(scan);
        if (cc_journal_scan_dir(o->out_dir, o->cases, o->n_cases, (size_t)n_levels, scan, msg,
                                len))
            return -1;
    }
    if (!o->log)
        return 0;
    fprintf(o->log, "capcheck: resuming %s: %zu of %zu cases already recorded\n", o->out_dir,
            scan->n_done, total);
    if (damaged)
        fprintf(o->log, "capcheck: %d damaged line%s of its results.jsonl (the first, line %ld: "
                        "%s) dropped; every good record around them kept, their cases run "
                        "again (the damaged file is %s/results.jsonl.damaged)\n",
                damaged, damaged == 1 ? "" : "s", first_damaged, why, o->out_dir);
    if (reruns)
        fprintf(o->log, "capcheck: %d crash%s of workers killed from outside run again\n",
                reruns, reruns == 1 ? "" : "es");
    if (torn)
        fprintf(o->log, "capcheck: a torn last record was dropped and will be rerun\n");
    return 0;
}

/* One run from its folder to its report: the state the steps of cc_session_run share. Each
 * step returns 0, or -1 with msg (the run ends with msg on the log and exit 2, or 125 once the
 * workers were started: harness/run/exit_code.h), except where it says otherwise. */
typedef struct {
    const cc_session_opts *o;
    FILE *log;    /* o->log, or stderr: where the sentence that ends a run goes */
    double t0;
    char msg[2048]; /* room for two provider descriptions (a resume refused) */
    uint64_t hash;  /* of the case list */
    int n_levels;
    size_t total;      /* results the run holds when complete: cases x levels */
    size_t total_todo; /* of those, the ones this session runs */
    cc_run_info info;  /* run.json: read on a resume, written when it grows */
    cc_journal_scan scan;
    cc_pool *pool;       /* the level running */
    cc_journal *journal;
    size_t *todo, n_todo; /* the level's case indexes to run */
    int started;          /* the folder, the journal and run.json are there */
    int workers_failed;   /* the provider did not initialise, the device is absent */
    interrupts intr;
    run_state st;
} session;

/* The run's folder: on a resume, its run.json must be this run and its journal is read; a
 * fresh run's folder must hold no earlier run. Then what this session runs is counted. */
static int open_session(session *s)
{
    const cc_session_opts *o = s->o;
    if (o->resume) {
        int got = cc_run_info_read(o->out_dir, &s->info, s->msg, sizeof s->msg);
        if (got == 1)
            snprintf(s->msg, sizeof s->msg,
                     "nothing to resume in %s: it has no run.json (start the run with --out %s)",
                     o->out_dir, o->out_dir);
        if (got || check_same_run(o, &s->info, s->hash, s->msg, sizeof s->msg) ||
            cc_journal_scan_dir(o->out_dir, o->cases, o->n_cases, (size_t)s->n_levels, &s->scan,
                                s->msg, sizeof s->msg))
            return -1;
    } else if (check_fresh_folder(o, s->msg, sizeof s->msg))
        return -1;
    /* a run.json written before repro lines named their provider: this command's */
    if (!o->resume || !s->info.repro.args[0])
        s->info.repro = o->repro ? *o->repro : s->info.repro;
    s->todo = malloc((o->n_cases ? o->n_cases : 1) * sizeof *s->todo);
    if (!s->todo) {
        snprintf(s->msg, sizeof s->msg, "out of memory");
        return -1;
    }
    s->total_todo = 0;
    for (size_t g = 0; g < s->total; g++)
        s->total_todo += !o->resume || s->scan.offset[g] < 0 || s->scan.rerun[g];
    s->st = (run_state){.o = o,
                        .repro = &s->info.repro,
                        .total = s->total_todo,
                        .started = cc_monotonic_seconds(),
                        .large = s->total > CC_LARGE_RUN};
    if (s->st.large && o->log && o->verbosity == 0)
        fprintf(o->log, "capcheck: %zu cases, more than %d: the lines of cases that do not pass "
                        "give way to progress (-v prints them), and the run ends with the "
                        "worst case of each op x dtype that did not pass\n",
                s->total, CC_LARGE_RUN);
    return 0;
}

/* The cases of level k the journal lacks, into s->todo; returns the devices they run on (0:
 * the level is complete). */
static unsigned level_todo(session *s, int k)
{
    const cc_session_opts *o = s->o;
    size_t first = (size_t)k * o->n_cases;
    unsigned devices = 0;
    s->n_todo = 0;
    for (size_t i = 0; i < o->n_cases; i++)
        if (!o->resume || s->scan.offset[first + i] < 0 || s->scan.rerun[first + i]) {
            s->todo[s->n_todo++] = i;
            devices |= 1u << o->cases[i].device;
        }
    if (!o->n_cases && !o->resume)
        devices = 1u << o->default_device; /* a run of no cases still says who ran it */
    return devices;
}

/* The level's workers (they initialise the provider, so a provider that cannot run leaves the
 * folder as it was), which must describe the provider as the run's earlier workers did; their
 * platforms join run.json's. Returns 1 when the platforms grew, 0 when not, -1 with msg. */
static int start_level_pool(session *s, int level, unsigned devices)
{
    const cc_session_opts *o = s->o;
    cc_pool_config pc = {o->provider, o->workers, devices, o->timeout_base, o->timeout_base,
                         o->in_process, o->witnesses, o->n_witnesses, level, o->run, s->intr.fd};
    if (pc.workers <= 0)
        pc.workers = cc_online_cpus();
    if ((size_t)pc.workers > (s->n_todo ? s->n_todo : 1))
        pc.workers = s->n_todo ? (int)s->n_todo : 1;
    if (pc.run.threads <= 0) /* the CPUs the workers leave idle go to the reference */
        pc.run.threads = cc_online_cpus() / pc.workers > 1 ? cc_online_cpus() / pc.workers : 1;
    if (cc_pool_start(&pc, &s->pool, s->msg, sizeof s->msg)) {
        s->workers_failed = 1;
        return -1;
    }
    char desc[512];
    cc_describe_without_platform(cc_pool_description(s->pool), desc, sizeof desc);
    if ((o->resume || s->started) && strcmp(desc, s->info.provider_description) != 0) {
        snprintf(s->msg, sizeof s->msg,
                 "%s/run.json was started with provider %s described as '%.400s'; the "
                 "workers of %s%s say '%.400s': resume on the same set-up, or start a new "
                 "run without --resume",
                 o->out_dir, s->info.provider, s->info.provider_description,
                 o->n_cpu_levels ? "level " : "this session",
                 o->n_cpu_levels ? cc_level_name(level) : "", desc);
        return -1;
    }
    snprintf(s->info.provider_description, sizeof s->info.provider_description, "%s", desc);
    return note_platforms(o, s->pool, devices, cc_level_name(level), &s->info, s->msg,
                          sizeof s->msg);
}

/* Once the first workers stand: the folder, its journal (a resumed one salvaged), no report of
 * an older run beside it, and a fresh run's run.json fields. */
static int start_journal(session *s)
{
    const cc_session_opts *o = s->o;
    s->started = 1;
    /* the folder only now: a provider that cannot start leaves none behind */
    if (!o->resume && cc_make_dir(o->out_dir)) {
        snprintf(s->msg, sizeof s->msg, "cannot create the output folder %s: %s", o->out_dir,
                 strerror(errno));
        return -1;
    }
    if (salvage_journal(o, &s->scan, s->total, s->n_levels, s->msg, sizeof s->msg))
        return -1;
    if (cc_journal_open(o->out_dir, o->resume ? s->scan.valid_end : -1, &s->journal, s->msg,
                        sizeof s->msg))
        return -1;
    s->st.journal = s->journal;
    /* no report of an older run beside a new journal */
    remove_in(o->out_dir, "report.json");
    remove_in(o->out_dir, "report.md");
    remove_in(o->out_dir, "report.json.sha256");
    remove_in(o->out_dir, "report.junit.xml");
    cc_manifest_remove(o->out_dir); /* nor the signature of one */
    if (o->resume)
        return 0;
    cc_run_info *info = &s->info;
    info->n_cases = o->n_cases;
    info->case_hash = s->hash;
    snprintf(info->provider, sizeof info->provider, "%s", o->provider->name);
    snprintf(info->case_files, sizeof info->case_files, "%s", o->case_files ? o->case_files : "");
    snprintf(info->command, sizeof info->command, "%s", o->command ? o->command : "");
    info->base_seed = o->base_seed;
    witness_names(o, info->witnesses, sizeof info->witnesses);
    snprintf(info->judging, sizeof info->judging, "%s",
             cc_judging_describe(o->run.accumulation, o->run.power));
    level_names(o, info->cpu_levels, sizeof info->cpu_levels);
    return 0;
}

#define SESSION_POOL_LOST 1 /* a step's return: the pool failed or was interrupted; msg says */

/* The level's cases through its pool, each result journaled and logged as it comes (first
 * is the level's first global index). 0 (s->st.failed set when the journal failed), or
 * SESSION_POOL_LOST. */
static int feed_level(session *s, size_t first)
{
    run_state *st = &s->st;
    for (size_t j = 0; j < s->n_todo && !st->failed; j++) {
        if (cc_pool_submit(s->pool, first + s->todo[j], &s->o->cases[s->todo[j]], s->msg,
                           sizeof s->msg))
            return SESSION_POOL_LOST;
        uint64_t tag;
        cc_result r;
        while (!st->failed && cc_pool_poll(s->pool, &tag, &r) == 0)
            on_result(st, (size_t)tag, &r);
    }
    while (!st->failed && cc_pool_pending(s->pool)) {
        uint64_t tag;
        cc_result r;
        int w = cc_pool_wait(s->pool, &tag, &r, s->msg, sizeof s->msg);
        if (w < 0)
            return SESSION_POOL_LOST;
        if (w == 0)
            on_result(st, (size_t)tag, &r);
    }
    return 0;
}

/* One level (k-th of --cpu-capability's, or the machine as it is): the cases the journal
 * lacks, in a pool of its own. 0, -1 with msg, or SESSION_POOL_LOST. */
static int run_level(session *s, int k)
{
    const cc_session_opts *o = s->o;
    int level = o->n_cpu_levels > 0 ? o->cpu_levels[k] : 0;
    unsigned devices = level_todo(s, k);
    if (!devices)
        return 0; /* this level is complete in the journal */
    int grew = start_level_pool(s, level, devices);
    if (grew < 0)
        return -1;
    if (!s->started) {
        if (start_journal(s))
            return -1;
        grew |= !o->resume;
    }
    if (grew && cc_run_info_write(o->out_dir, &s->info, s->msg, sizeof s->msg))
        return -1;
    s->st.level = o->n_cpu_levels ? cc_level_name(level) : NULL;
    s->st.level_done = s->st.level_passed = 0;
    int fed = feed_level(s, (size_t)k * o->n_cases);
    if (fed)
        return fed;
    if (o->tty && s->n_todo && o->log)
        fprintf(s->log, "\n");
    if (s->st.level && s->n_todo && o->verbosity >= 0) {
        const cc_platform *p = cc_pool_platform(s->pool, o->cases[s->todo[0]].device);
        printf("capcheck: level %s (platform %s): %zu cases, %zu passed\n", s->st.level,
               p ? p->key : "?", s->st.level_done, s->st.level_passed);
    }
    cc_pool_close(s->pool);
    s->pool = NULL;
    return 0;
}

/* Every level; then the journal is closed (opened first when nothing ran: a resume of a
 * complete run rebuilds its report) and read back whole. 0, -1 with msg, or
 * SESSION_POOL_LOST. */
static int run_levels(session *s)
{
    const cc_session_opts *o = s->o;
    for (int k = 0; k < s->n_levels && !s->st.failed; k++) {
        int ran = run_level(s, k);
        if (ran)
            return ran;
    }
    if (s->st.failed) {
        snprintf(s->msg, sizeof s->msg, "%s; the results before it are in %s/results.jsonl: "
                                        "free the space, then finish with --resume %s",
                 s->st.msg, o->out_dir, o->out_dir);
        return -1;
    }
    if (!s->started && cc_journal_open(o->out_dir, o->resume ? s->scan.valid_end : -1,
                                       &s->journal, s->msg, sizeof s->msg))
        return -1;
    int closed = cc_journal_close(s->journal);
    s->journal = NULL;
    if (closed) {
        snprintf(s->msg, sizeof s->msg, "cannot sync %s/results.jsonl", o->out_dir);
        return -1;
    }
    /* the report reads the whole journal in case-index order */
    cc_journal_scan_free(&s->scan);
    if (cc_journal_scan_dir(o->out_dir, o->cases, o->n_cases, (size_t)s->n_levels, &s->scan,
                            s->msg, sizeof s->msg))
        return -1;
    if (s->scan.n_done != s->total) {
        snprintf(s->msg, sizeof s->msg,
                 "%s/results.jsonl holds %zu of %zu results; rerun with --resume %s",
                 o->out_dir, s->scan.n_done, s->total, o->out_dir);
        return -1;
    }
    return 0;
}

/* The report of the whole journal, with the run's provenance (run.json's). rep is
 * initialised here and the caller frees it, also on -1. */
static int build_report(session *s, cc_report *rep)
{
    const cc_session_opts *o = s->o;
    cc_report_init(rep);
    rep->expect = o->expect;
    if (o->provenance) /* first: it says whether a repeated case's bits must agree */
        rep->provenance = *o->provenance;
    if (cc_journal_report(o->out_dir, &s->scan, rep, s->msg, sizeof s->msg))
        return -1;
    snprintf(rep->provider_description, sizeof rep->provider_description, "%s",
             s->info.provider_description);
    snprintf(rep->case_files, sizeof rep->case_files, "%s", s->info.case_files);
    snprintf(rep->command, sizeof rep->command, "%s", s->info.command);
    rep->repro = s->info.repro;
    rep->base_seed = s->info.base_seed;
    rep->provenance.n_platforms = s->info.n_platforms;
    memcpy(rep->provenance.platforms, s->info.platforms, sizeof s->info.platforms);
    rep->wall_seconds = cc_monotonic_seconds() - s->t0;
    rep->session_cases = (long)s->total_todo;
    rep->resumed = o->resume;
    return 0;
}

/* The report files, and report.md again with what changed since --baseline (the comparison's
 * one-line summary into since, its text into *diff_text for the caller to free). 1 when
 * written, 0 with msg. */
static int write_report(session *s, cc_report *rep, char *since, size_t since_len,
                        char **diff_text)
{
    const cc_session_opts *o = s->o;
    int wrote = cc_report_write_outputs(rep, o->out_dir, s->msg, sizeof s->msg) == 0;
    if (wrote && o->baseline && o->since_baseline) {
        *diff_text = o->since_baseline(o->baseline, o->out_dir, since, since_len);
        rep->since_baseline = *diff_text;
        char md[1100];
        snprintf(md, sizeof md, "%s/report.md", o->out_dir);
        if (*diff_text && cc_report_write_markdown(rep, md)) {
            snprintf(s->msg, sizeof s->msg, "cannot write %.900s: %s", md, strerror(errno));
            wrote = 0;
        }
    }
    return wrote;
}

/* The run's closing lines on stdout: the counts, expectations, retries, what changed since
 * the baseline, a large run's rows that did not pass, where the report is (when wrote). */
static void print_run_summary(session *s, const cc_report *rep, const char *since, int wrote,
                              int large)
{
    const cc_session_opts *o = s->o;
    /* the rate counts the cases this session ran (a resume runs only the missing ones); the
     * statuses count each case once (harness/report/identity.h) */
    char distinct[96] = "";
    if (rep->repeats)
        snprintf(distinct, sizeof distinct, " of %ld distinct cases", rep->distinct);
    printf("capcheck: %ld cases on %s in %.2f s (%.0f cases/s): %ld passed, %ld failed, "
           "%ld unsupported, %ld errors (%ld crashed, %ld timed out)%s\n",
           rep->cases, s->info.provider, rep->wall_seconds,
           rep->wall_seconds > 0 ? (double)rep->session_cases / rep->wall_seconds : 0.0,
           rep->counts[CC_RES_PASS], rep->counts[CC_RES_FAIL], rep->counts[CC_RES_UNSUPPORTED],
           cc_count_errors(rep->counts), rep->counts[CC_RES_CRASH],
           rep->counts[CC_RES_TIMEOUT], distinct);
    if (rep->repeats) {
        char said[64];
        cc_repeats_sentence(rep->repeats, said, sizeof said);
        printf("capcheck: %s (each ran; statuses, rows and the gate count the %ld distinct "
               "cases once); %ld disagreed with their first run (nondeterministic)\n",
               said, rep->distinct, rep->disagreeing);
    }
    if (rep->counts[CC_RES_OUT_OF_BOUNDS] + rep->counts[CC_RES_NONDETERMINISTIC])
        printf("capcheck: of those errors %ld out-of-bounds, %ld nondeterministic\n",
               rep->counts[CC_RES_OUT_OF_BOUNDS], rep->counts[CC_RES_NONDETERMINISTIC]);
    if (o->expect) {
        printf("capcheck: expectations:");
        for (int k = 1; k < CC_EXPECT_COUNT; k++)
            printf(" %s %ld%s", cc_expect_outcome_name((cc_expect_outcome)k),
                   rep->expect_counts[k], k + 1 < CC_EXPECT_COUNT ? "," : "\n");
    }
    if (rep->retried)
        printf("capcheck: %ld cases ran twice: their first worker was killed from outside\n",
               rep->retried);
    if (since[0])
        printf("capcheck: since the baseline %s: %s\n", o->baseline,
               strncmp(since, "capcheck diff: ", 15) == 0 ? since + 15 : since);
    if (large)
        cc_report_print_rows(rep, o->out_dir, stdout);
    if (wrote)
        printf("capcheck: report in %s (report.md, report.json, report.junit.xml, "
               "results.jsonl)\n",
               o->out_dir);
}

/* The results whose outcome is news: with --expect the broken or changed expectations, else
 * the cases that did not pass (each one's line was due on the log). */
static long news_of(const cc_session_opts *o, const cc_report *rep)
{
    if (!o->expect)
        return rep->cases - rep->counts[CC_RES_PASS];
    long news = 0;
    for (int k = 0; k < CC_EXPECT_COUNT; k++)
        news += k != CC_EXPECT_NONE && k != CC_EXPECT_REPRODUCED ? rep->expect_counts[k] : 0;
    return news;
}

/* The report of a complete journal, written and summed up. The exit code: 0, 1 or 125 by
 * cc_report_exit_code (harness/run/exit_code.h), or 2 with msg. */
static int report_run(session *s)
{
    const cc_session_opts *o = s->o;
    cc_report rep;
    if (build_report(s, &rep)) {
        cc_report_free(&rep);
        return 2;
    }
    char since[512] = "";
    char *diff_text = NULL;
    int wrote = write_report(s, &rep, since, sizeof since, &diff_text);
    int large = s->total > CC_LARGE_RUN || news_of(o, &rep) > CC_CASE_LINES_SHOWN;
    if (o->verbosity >= 0)
        print_run_summary(s, &rep, since, wrote, large);
    if (o->tally && wrote) {
        o->tally->written = 1;
        o->tally->large = large;
        o->tally->cases = rep.distinct; /* the counts are of distinct cases */
        memcpy(o->tally->counts, rep.counts, sizeof rep.counts);
        o->tally->unjudged = rep.unjudged;
    }
    free(diff_text);
    int verdict = cc_report_exit_code(&rep);
    cc_report_free(&rep);
    if (!wrote) {
        size_t used = strlen(s->msg);
        snprintf(s->msg + used, sizeof s->msg - used,
                 "; no report: every result is in %s/results.jsonl, and --resume %s writes the "
                 "report once the disk has room",
                 o->out_dir, o->out_dir);
        return 2;
    }
    return verdict;
}

/* The pool failed or a signal stopped the run: what is recorded stays, and the log says how
 * to finish. The exit code: 128 + the signal, or 2 with msg. */
static int stop_lost_run(session *s)
{
    const cc_session_opts *o = s->o;
    if (o->tty && o->log)
        fprintf(s->log, "\n");
    int sig = cc_pool_interrupted(s->pool);
    if (sig) {
        cc_pool_close(s->pool);
        s->pool = NULL;
        cc_journal_close(s->journal);
        s->journal = NULL;
        fprintf(s->log, "capcheck: interrupted by %s: %zu of %zu cases are recorded in "
                        "%s/results.jsonl; finish the run with:\n  %s\n",
                sig == SIGINT ? "Ctrl-C (SIGINT)" : cc_signal_name(sig),
                s->total - s->total_todo + s->st.done, s->total, o->out_dir,
                o->resume_command ? o->resume_command : "capcheck run ... --resume DIR");
        return 128 + sig;
    }
    size_t used = strlen(s->msg);
    snprintf(s->msg + used, sizeof s->msg - used,
             "; the results so far are in %s/results.jsonl: finish with --resume %s", o->out_dir,
             o->out_dir);
    return 2;
}

int cc_session_run(const cc_session_opts *o)
{
    session s;
    memset(&s, 0, sizeof s);
    s.o = o;
    s.log = o->log ? o->log : stderr;
    s.t0 = cc_monotonic_seconds();
    s.hash = cc_case_list_hash(o->cases, o->n_cases);
    s.n_levels = o->n_cpu_levels > 0 ? o->n_cpu_levels : 1;
    s.total = o->n_cases * (size_t)s.n_levels;
    interrupts_open(&s.intr);

    int rc = 2;
    if (open_session(&s) == 0) {
        int ran = run_levels(&s);
        if (ran == SESSION_POOL_LOST)
            rc = stop_lost_run(&s);
        else if (ran == 0)
            rc = report_run(&s);
    }
    cc_pool_close(s.pool);
    cc_journal_close(s.journal);
    cc_journal_scan_free(&s.scan);
    free(s.todo);
    interrupts_close(&s.intr);
    if (rc == 2) {
        fprintf(s.log, "capcheck: %s\n", s.msg);
        /* past the checks of the command line and the folder, a failure is the environment's:
         * nothing could be judged (harness/run/exit_code.h) */
        if (s.started || s.workers_failed)
            rc = CC_EXIT_UNJUDGED;
    }
    return rc;
}

void cc_session_print_closing(const cc_session_tally *t, const char *dir, FILE *out)
{
    fprintf(out, "capcheck: %ld of %ld cases passed", t->counts[CC_RES_PASS], t->cases);
    if (t->counts[CC_RES_PASS] < t->cases)
        fprintf(out, " (%ld failed, %ld unsupported, %ld errors)", t->counts[CC_RES_FAIL],
                t->counts[CC_RES_UNSUPPORTED], cc_count_errors(t->counts));
    fprintf(out, "; read %s/report.md, %s/report.html; every case: %s/results.jsonl\n", dir, dir,
            dir);
}

int cc_run_case_in_worker(const cc_provider *p, const cc_case *c, double timeout_base,
                          int in_process, const cc_provider *const *witnesses, int n_witnesses,
                          int cpu_level, const cc_run_options *run, cc_result *r, char *msg,
                          size_t msg_len)
{
    cc_pool_config pc = {p, 1, 1u << c->device, timeout_base, timeout_base, in_process, witnesses,
                         n_witnesses, cpu_level, {0}, -1};
    if (run)
        pc.run = *run;
    if (pc.run.threads <= 0) /* one case: the reference on every CPU */
        pc.run.threads = cc_online_cpus();
    cc_pool *pool;
    if (cc_pool_start(&pc, &pool, msg, msg_len))
        return -1;
    int rc = cc_pool_run_one(pool, c, r, msg, msg_len);
    cc_pool_close(pool);
    return rc;
}
