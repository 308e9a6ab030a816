#define _POSIX_C_SOURCE 200809L
#include "harness/session/session.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "harness/session/journal.h"
#include "harness/run/pool.h"
#include "harness/report/report.h"
#include "harness/report/report_out.h"
#include "harness/run/witness.h"

static void remove_in(const char *dir, const char *name)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    remove(path);
}

typedef struct {
    const cc_session_opts *o;
    cc_journal *journal;
    size_t done, total, passed;
    double last_progress;
    int failed; /* the journal could not be written */
    char msg[512];
} run_state;

static void on_result(run_state *s, size_t index, const cc_result *r)
{
    FILE *log = s->o->log;
    if (cc_journal_append(s->journal, index, r, s->msg, sizeof s->msg))
        s->failed = 1;
    s->done++;
    s->passed += r->status == CC_RES_PASS;
    if (!log)
        return;
    if (r->status != CC_RES_PASS) {
        if (s->o->tty)
            fprintf(log, "\r\033[K");
        fprintf(log, "%s: %s\n  capcheck repro '%s'\n", cc_result_status_name(r->status),
                r->message, r->line);
        if (r->n_witnesses) {
            char said[1024];
            cc_witness_summary(r, said, sizeof said);
            fprintf(log, "  witnesses: %s\n", said);
        }
    }
    double t = cc_monotonic_seconds();
    if (s->o->tty && (t - s->last_progress > 0.1 || s->done == s->total)) {
        fprintf(log, "\r\033[K[%zu/%zu] %s %s: %zu passed, %zu not", s->done, s->total, r->op,
                cc_dtype_name(r->dtype), s->passed, s->done - s->passed);
        fflush(log);
        s->last_progress = t;
    }
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
    if (strcmp(was->provider, o->provider->name) != 0) {
        snprintf(msg, len,
                 "%s/run.json is a run on provider '%s'; this command asks for '%s': resume "
                 "with the same provider, or start a new run without --resume",
                 o->out_dir, was->provider, o->provider->name);
        return -1;
    }
    if (strcmp(was->judging, cc_judging_describe(&o->judging)) != 0) {
        snprintf(msg, len,
                 "%s/run.json is a run judged '%s'; this command judges '%s': resume with the "
                 "same --accumulation and --power, or start a new run without --resume",
                 o->out_dir, was->judging, cc_judging_describe(&o->judging));
        return -1;
    }
    char names[256];
    witness_names(o, names, sizeof names);
    if (strcmp(was->witnesses, names) != 0) {
        snprintf(msg, len,
                 "%s/run.json is a run with witnesses '%s'; this command names '%s': resume "
                 "with the same --witness, or start a new run without --resume",
                 o->out_dir, was->witnesses, names);
        return -1;
    }
    return 0;
}

int cc_session_run(const cc_session_opts *o)
{
    FILE *log = o->log ? o->log : stderr;
    double t0 = cc_monotonic_seconds();
    char msg[1024] = "";
    uint64_t hash = cc_case_list_hash(o->cases, o->n_cases);
    cc_run_info info;
    memset(&info, 0, sizeof info);
    cc_journal_scan scan;
    memset(&scan, 0, sizeof scan);
    cc_pool *pool = NULL;
    cc_journal *journal = NULL;
    size_t *todo = NULL, n_todo = 0;
    int rc = 2;

    if (o->resume) {
        int got = cc_run_info_read(o->out_dir, &info, msg, sizeof msg);
        if (got == 1)
            snprintf(msg, sizeof msg,
                     "nothing to resume in %s: it has no run.json (start the run with --out %s)",
                     o->out_dir, o->out_dir);
        if (got || check_same_run(o, &info, hash, msg, sizeof msg) ||
            cc_journal_scan_dir(o->out_dir, o->cases, o->n_cases, &scan, msg, sizeof msg))
            goto out;
    } else if (cc_make_dir(o->out_dir)) {
        snprintf(msg, sizeof msg, "cannot create the output folder %s: %s", o->out_dir,
                 strerror(errno));
        goto out;
    }
    todo = malloc((o->n_cases ? o->n_cases : 1) * sizeof *todo);
    if (!todo) {
        snprintf(msg, sizeof msg, "out of memory");
        goto out;
    }
    unsigned devices = 0;
    for (size_t i = 0; i < o->n_cases; i++)
        if (!o->resume || scan.offset[i] < 0) {
            todo[n_todo++] = i;
            devices |= 1u << o->cases[i].device;
        }
    if (!o->n_cases)
        devices = 1u << o->default_device;

    /* the workers first: they initialise the provider, and a provider that cannot run
     * leaves the folder as it was */
    if (devices) {
        cc_pool_config pc = {o->provider, o->workers, devices, o->timeout_base, 0,
                             o->in_process, o->witnesses, o->n_witnesses, o->judging};
        if (pc.workers <= 0)
            pc.workers = cc_online_cpus();
        if ((size_t)pc.workers > (n_todo ? n_todo : 1))
            pc.workers = n_todo ? (int)n_todo : 1;
        if (cc_pool_start(&pc, &pool, msg, sizeof msg))
            goto out;
    }
    const char *desc = pool ? cc_pool_description(pool) : info.provider_description;
    if (o->resume && pool && strcmp(desc, info.provider_description) != 0) {
        snprintf(msg, sizeof msg,
                 "%s/run.json was started with provider %s described as '%s'; this session's "
                 "provider says '%s': resume on the same set-up, or start a new run without "
                 "--resume",
                 o->out_dir, info.provider, info.provider_description, desc);
        goto out;
    }
    if (cc_journal_open(o->out_dir, o->resume ? scan.valid_end : -1, &journal, msg, sizeof msg))
        goto out;
    remove_in(o->out_dir, "report.json"); /* no report of an older run beside a new journal */
    remove_in(o->out_dir, "report.md");
    remove_in(o->out_dir, "report.json.sha256");
    remove_in(o->out_dir, "report.junit.xml");
    if (!o->resume) {
        info.n_cases = o->n_cases;
        info.case_hash = hash;
        snprintf(info.provider, sizeof info.provider, "%s", o->provider->name);
        snprintf(info.provider_description, sizeof info.provider_description, "%s", desc);
        snprintf(info.case_files, sizeof info.case_files, "%s", o->case_files ? o->case_files : "");
        snprintf(info.command, sizeof info.command, "%s", o->command ? o->command : "");
        info.base_seed = o->base_seed;
        witness_names(o, info.witnesses, sizeof info.witnesses);
        snprintf(info.judging, sizeof info.judging, "%s", cc_judging_describe(&o->judging));
        if (cc_run_info_write(o->out_dir, &info, msg, sizeof msg))
            goto out;
    } else if (o->log && (scan.torn_lines || scan.n_done)) {
        fprintf(log, "capcheck: resuming %s: %zu of %zu cases already recorded%s\n", o->out_dir,
                scan.n_done, o->n_cases,
                scan.torn_lines ? "; a torn last record was dropped and will be rerun" : "");
    }

    run_state st = {o, journal, 0, n_todo, 0, 0, 0, ""};
    for (size_t k = 0; k < n_todo && !st.failed; k++) {
        if (cc_pool_submit(pool, todo[k], &o->cases[todo[k]], msg, sizeof msg))
            goto lost_pool;
        uint64_t tag;
        cc_result r;
        while (!st.failed && cc_pool_poll(pool, &tag, &r) == 0)
            on_result(&st, (size_t)tag, &r);
    }
    while (!st.failed && pool && cc_pool_pending(pool)) {
        uint64_t tag;
        cc_result r;
        int w = cc_pool_wait(pool, &tag, &r, msg, sizeof msg);
        if (w < 0)
            goto lost_pool;
        if (w == 0)
            on_result(&st, (size_t)tag, &r);
    }
    if (o->tty && n_todo && o->log)
        fprintf(log, "\n");
    if (st.failed) {
        snprintf(msg, sizeof msg, "%s", st.msg);
        goto out;
    }
    cc_pool_close(pool);
    pool = NULL;
    if (cc_journal_close(journal)) {
        journal = NULL;
        snprintf(msg, sizeof msg, "cannot sync %s/results.jsonl", o->out_dir);
        goto out;
    }
    journal = NULL;

    /* the report, from the whole journal in case-index order */
    cc_journal_scan_free(&scan);
    if (cc_journal_scan_dir(o->out_dir, o->cases, o->n_cases, &scan, msg, sizeof msg))
        goto out;
    if (scan.n_done != o->n_cases) {
        snprintf(msg, sizeof msg,
                 "%s/results.jsonl holds %zu of %zu results; rerun with --resume %s",
                 o->out_dir, scan.n_done, o->n_cases, o->out_dir);
        goto out;
    }
    cc_report rep;
    cc_report_init(&rep);
    if (cc_journal_report(o->out_dir, &scan, &rep, msg, sizeof msg)) {
        cc_report_free(&rep);
        goto out;
    }
    snprintf(rep.provider_description, sizeof rep.provider_description, "%s",
             info.provider_description);
    snprintf(rep.case_files, sizeof rep.case_files, "%s", info.case_files);
    snprintf(rep.command, sizeof rep.command, "%s", info.command);
    rep.base_seed = info.base_seed;
    if (o->provenance)
        rep.provenance = *o->provenance;
    rep.wall_seconds = cc_monotonic_seconds() - t0;
    rep.session_cases = (long)n_todo;
    rep.resumed = o->resume;
    int wrote = cc_report_write_outputs(&rep, o->out_dir, msg, sizeof msg) == 0;
    long not_passed = rep.cases - rep.counts[CC_RES_PASS];
    /* the rate counts the cases this session ran (a resume runs only the missing ones) */
    printf("capcheck: %ld cases on %s in %.2f s (%.0f cases/s): %ld passed, %ld failed, "
           "%ld unsupported, %ld errors (%ld crashed, %ld timed out)\n",
           rep.cases, info.provider, rep.wall_seconds,
           rep.wall_seconds > 0 ? (double)rep.session_cases / rep.wall_seconds : 0.0,
           rep.counts[CC_RES_PASS],
           rep.counts[CC_RES_FAIL], rep.counts[CC_RES_UNSUPPORTED],
           rep.counts[CC_RES_ERROR] + rep.counts[CC_RES_CRASH] + rep.counts[CC_RES_TIMEOUT],
           rep.counts[CC_RES_CRASH], rep.counts[CC_RES_TIMEOUT]);
    printf("capcheck: report in %s (report.md, report.json, report.junit.xml, results.jsonl)\n",
           o->out_dir);
    cc_report_free(&rep);
    if (!wrote)
        goto out;
    rc = not_passed ? 1 : 0;
    goto out;

lost_pool:
    if (o->tty && o->log)
        fprintf(log, "\n");
    {
        char tail[256];
        snprintf(tail, sizeof tail, "; the results so far are in %s/results.jsonl: finish with "
                                    "--resume %s",
                 o->out_dir, o->out_dir);
        size_t used = strlen(msg);
        snprintf(msg + used, sizeof msg - used, "%s", tail);
    }
out:
    cc_pool_close(pool);
    cc_journal_close(journal);
    cc_journal_scan_free(&scan);
    free(todo);
    if (rc == 2)
        fprintf(log, "capcheck: %s\n", msg);
    return rc;
}

int cc_run_case_in_worker(const cc_provider *p, const cc_case *c, double timeout_base,
                          int in_process, const cc_provider *const *witnesses, int n_witnesses,
                          const cc_judging *judging, cc_result *r, char *msg, size_t msg_len)
{
    cc_pool_config pc = {p, 1, 1u << c->device, timeout_base, 0, in_process, witnesses,
                         n_witnesses, *judging};
    cc_pool *pool;
    if (cc_pool_start(&pc, &pool, msg, msg_len))
        return -1;
    int rc = cc_pool_run_one(pool, c, r, msg, msg_len);
    cc_pool_close(pool);
    return rc;
}
