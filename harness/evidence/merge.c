#define _POSIX_C_SOURCE 200809L
#include "harness/evidence/merge.h"

#include "core/files.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness/case/values.h"
#include "harness/session/journal.h"
#include "harness/run/pool.h"
#include "harness/report/manifest.h"
#include "harness/report/report_out.h"
#include "harness/report/results_read.h"

/* ---- sharding ------------------------------------------------------------------------------ */

int cc_shard_parse(const char *spec, int *index, int *count, char *msg, size_t len)
{
    char *end;
    long i = strtol(spec, &end, 10), n = 0;
    if (end != spec && *end == '/') {
        const char *s = end + 1;
        n = strtol(s, &end, 10);
        if (end == s)
            n = 0;
    }
    if (*end || n < 1 || n > 4096 || i < 1 || i > n) {
        snprintf(msg, len, "--shard wants I/N with 1 <= I <= N <= 4096 (e.g. --shard 2/4), not '%s'",
                 spec);
        return -1;
    }
    *index = (int)i;
    *count = (int)n;
    return 0;
}

typedef struct {
    double cost;
    uint64_t hash;
    size_t pos;
} deal;

static int deal_cmp(const void *pa, const void *pb)
{
    const deal *a = pa, *b = pb;
    if (a->cost != b->cost)
        return a->cost > b->cost ? -1 : 1;
    if (a->hash != b->hash)
        return a->hash < b->hash ? -1 : 1;
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}

static uint64_t line_hash(const cc_case *c)
{
    char line[CC_CASE_LINE_MAX];
    cc_case_print(c, line, sizeof line);
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *s = line; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

int cc_shard_select(cc_case_list *cases, int index, int count, cc_shard_info *out, char *msg,
                    size_t len)
{
    memset(out, 0, sizeof *out);
    size_t n = cases->n;
    deal *d = malloc((n ? n : 1) * sizeof *d);
    double *load = calloc((size_t)count, sizeof *load);
    int *owner = malloc((n ? n : 1) * sizeof *owner);
    out->global = malloc((n ? n : 1) * sizeof *out->global);
    if (!d || !load || !owner || !out->global) {
        free(d);
        free(load);
        free(owner);
        free(out->global);
        out->global = NULL;
        snprintf(msg, len, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        /* the pool's time estimate less its fixed part: elements x inputs */
        d[i].cost = cc_case_timeout(&cases->v[i], 1.0) - 1.0;
        d[i].hash = line_hash(&cases->v[i]);
        d[i].pos = i;
    }
    qsort(d, n, sizeof *d, deal_cmp);
    for (size_t k = 0; k < n; k++) {
        int best = 0;
        for (int s = 1; s < count; s++)
            if (load[s] < load[best])
                best = s;
        /* a zero-cost case still counts, so equal cases spread round-robin */
        load[best] += d[k].cost + 1e-9;
        owner[d[k].pos] = best;
    }
    out->present = 1;
    out->index = index;
    out->count = count;
    out->total = n;
    out->case_hash = cc_case_list_hash(cases->v, n);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (owner[i] == index - 1) {
            out->global[kept] = i;
            cases->v[kept++] = cases->v[i];
        }
    cases->n = kept;
    out->n = kept;
    free(d);
    free(load);
    free(owner);
    return 0;
}

/* ---- reading a run back -------------------------------------------------------------------- */

void cc_run_free(cc_run *r)
{
    cc_json_free(r->json);
    cc_provenance_free(&r->prov);
    free(r->results);
    memset(r, 0, sizeof *r);
}

static int get_str(const cc_json *o, const char *key, char *buf, size_t n)
{
    const char *s;
    if (cc_json_string(o, key, &s))
        return -1;
    snprintf(buf, n, "%s", s);
    return 0;
}

static int read_results(cc_run *r, char *msg, size_t len)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/results.jsonl", r->dir);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(msg, len, "%s: cannot read the results beside the report: %s", path,
                 strerror(errno));
        return -1;
    }
    size_t n = (size_t)r->cases;
    r->results = calloc(n ? n : 1, sizeof *r->results);
    char *have = calloc(n ? n : 1, 1);
    if (!r->results || !have) {
        fclose(f);
        free(have);
        snprintf(msg, len, "out of memory");
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    long lineno = 0;
    int rc = 0;
    cc_result res;
    while (rc == 0 && (got = getline(&line, &cap, f)) > 0) {
        lineno++;
        int64_t index;
        char why[256];
        if (cc_result_parse_line(line, (size_t)got, &res, &index, why, sizeof why)) {
            snprintf(msg, len, "%s:%ld: not a result record (%s)", path, lineno, why);
            rc = -1;
        } else if (index < 0 || (uint64_t)index >= n) {
            snprintf(msg, len, "%s:%ld: record index %lld is not a case of this %zu-case report",
                     path, lineno, (long long)index, n);
            rc = -1;
        } else if (!have[index]) { /* a case recorded twice keeps its first record (journal.h) */
            have[index] = 1;
            r->results[index] = res;
        }
    }
    free(line);
    fclose(f);
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (!have[i]) {
            snprintf(msg, len, "%s has no record of case %zu of the report's %zu", path, i, n);
            rc = -1;
        }
    free(have);
    if (rc)
        return -1;
    r->n_results = n;
    /* the report commits to its results: check the digest */
    cc_sha256_ctx d;
    cc_sha256_init(&d);
    for (size_t i = 0; i < n; i++)
        cc_results_digest_add(&d, &r->results[i]);
    char hex[65], want[80];
    cc_sha256_final_hex(&d, hex);
    if (get_str(r->json, "results_digest", want, sizeof want) || strncmp(want, "sha256:", 7) ||
        strcmp(want + 7, hex) != 0) {
        snprintf(msg, len,
                 "%s does not match %s: the report's results digest is %.23s, the results give "
                 "sha256:%.16s (results changed after the report was written, or from another "
                 "run)",
                 path, r->report_path, want[0] ? want : "(none)", hex);
        return -1;
    }
    return 0;
}

int cc_run_load(const char *path, unsigned flags, cc_run *out, char *msg, size_t len)
{
    memset(out, 0, sizeof *out);
    struct stat st;
    if (stat(path, &st)) {
        snprintf(msg, len, "%s: no such report or folder", path);
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(out->dir, sizeof out->dir, "%s", path);
        snprintf(out->report_path, sizeof out->report_path, "%s/report.json", path);
    } else {
        snprintf(out->report_path, sizeof out->report_path, "%s", path);
        const char *slash = strrchr(path, '/');
        if (slash)
            snprintf(out->dir, sizeof out->dir, "%.*s", (int)(slash - path), path);
        else
            snprintf(out->dir, sizeof out->dir, ".");
    }
    int seal = cc_report_check_seal(out->report_path, out->sha256, msg, len);
    if (seal < 0)
        goto bad;
    out->sealed = seal == 0;
    if (!out->sealed && (flags & CC_LOAD_SEAL)) {
        snprintf(msg, len,
                 "%s has no %s.sha256 seal: nothing shows it is the report capcheck wrote", 
                 out->report_path, out->report_path);
        goto bad;
    }
    size_t n;
    char *text = cc_read_file(out->report_path, &n);
    if (!text) {
        snprintf(msg, len, "cannot read %s: %s", out->report_path, strerror(errno));
        goto bad;
    }
    char why[256];
    out->json = cc_json_parse(text, n, why, sizeof why);
    free(text);
    if (!out->json) {
        snprintf(msg, len, "%s is not JSON (%s)", out->report_path, why);
        goto bad;
    }
    const char *schema = "";
    cc_json_string(out->json, "schema", &schema);
    if (strcmp(schema, CC_REPORT_SCHEMA) != 0) {
        snprintf(msg, len, "%s has schema \"%s\"; this capcheck reads \"%s\" (rerun the cases "
                           "with this capcheck)",
                 out->report_path, schema, CC_REPORT_SCHEMA);
        goto bad;
    }
    int64_t cases;
    const cc_json *timing = cc_json_get(out->json, "timing");
    if (get_str(out->json, "provider_description", out->provider_description,
                sizeof out->provider_description) ||
        get_str(out->json, "case_files", out->case_files, sizeof out->case_files) ||
        get_str(out->json, "command", out->command, sizeof out->command) ||
        cc_json_u64(out->json, "base_seed", (uint64_t *)&out->base_seed) ||
        cc_json_i64(out->json, "cases", &cases) || cases < 0 || !timing) {
        snprintf(msg, len, "%s lacks one of provider_description, case_files, command, "
                           "base_seed, cases, timing",
                 out->report_path);
        goto bad;
    }
    out->cases = (long)cases;
    const cc_json *judgement = cc_json_get(out->json, "judgement");
    const char *acc = "strict";
    if (judgement)
        cc_json_string(judgement, "accumulation", &acc);
    snprintf(out->accumulation, sizeof out->accumulation, "%s", acc);
    cc_repro_from_json(cc_json_get(out->json, "repro"), &out->repro);
    int64_t sc = 0;
    cc_json_double(timing, "wall_seconds", &out->wall_seconds);
    cc_json_i64(timing, "session_cases", &sc);
    cc_json_bool(timing, "resumed", &out->resumed);
    out->session_cases = (long)sc;
    char pmsg[256];
    int p = cc_provenance_from_json(out->json, &out->prov, pmsg, sizeof pmsg);
    if (p < 0 || (p == 1 && (flags & CC_LOAD_PROVENANCE))) {
        snprintf(msg, len, "%s: %s", out->report_path,
                 p < 0 ? pmsg : "no \"provenance\": the report does not say what produced it");
        goto bad;
    }
    out->repro.plain_stream = out->prov.present ? out->prov.default_stream : CC_STREAM_LIBM;
    if (out->prov.shard.present && out->prov.shard.n != (size_t)out->cases) {
        snprintf(msg, len, "%s: shard %d/%d lists %zu case indices for %ld cases",
                 out->report_path, out->prov.shard.index, out->prov.shard.count,
                 out->prov.shard.n, out->cases);
        goto bad;
    }
    if ((flags & CC_LOAD_RESULTS) && read_results(out, msg, len))
        goto bad;
    return 0;
bad:
    cc_run_free(out);
    return -1;
}

/* ---- merging ------------------------------------------------------------------------------- */

/* "cpu:amx cpu:avx2": the platform keys a run's provenance lists, in order. */
static void platform_keys(const cc_provenance *p, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < p->n_platforms && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? " " : "", p->platforms[i].key);
}

static int same_setup(const cc_run *a, const cc_run *b, char *msg, size_t len)
{
    char ka[CC_MAX_PLATFORMS * 50], kb[CC_MAX_PLATFORMS * 50];
    platform_keys(&a->prov, ka, sizeof ka);
    platform_keys(&b->prov, kb, sizeof kb);
    const char *what = NULL, *va = "", *vb = "";
#define CMP(field, name)                                                                     \
    if (!what && strcmp(a->field, b->field) != 0) {                                          \
        what = name;                                                                         \
        va = a->field;                                                                       \
        vb = b->field;                                                                       \
    }
    CMP(provider_description, "provider")
    CMP(accumulation, "accumulation mode")
    CMP(case_files, "case files")
    CMP(repro.args, "provider options")
    CMP(repro.env, "environment")
    CMP(prov.git_commit, "capcheck commit")
    CMP(prov.capcheck_version, "capcheck version")
    CMP(prov.provider.kind, "provider kind (built-in or plugin)")
    CMP(prov.provider.sha256, "provider library (sha256)")
    if (!what && strcmp(ka, kb) != 0) /* shards of one run run on the same platforms */
        what = "platforms", va = ka, vb = kb;
#undef CMP
    if (!what && a->base_seed != b->base_seed)
        what = "base seed", va = "", vb = "";
    if (!what && (a->prov.shard.count != b->prov.shard.count ||
                  a->prov.shard.total != b->prov.shard.total ||
                  a->prov.shard.case_hash != b->prov.shard.case_hash))
        what = "run (shard count, case count or case-list hash)", va = "", vb = "";
    for (int i = 0; !what && i < a->prov.n_files; i++)
        if (a->prov.n_files != b->prov.n_files ||
            strcmp(a->prov.files[i].sha256, b->prov.files[i].sha256) != 0)
            what = "case file contents", va = "", vb = "";
    if (!what)
        return 0;
    snprintf(msg, len, "%s and %s are not shards of one run: their %s differ%s%s%s%s%s",
             a->dir, b->dir, what, va[0] ? " ('" : "", va, va[0] ? "' vs '" : "", vb,
             va[0] ? "')" : "");
    return -1;
}

int cc_run_merge(cc_run *s, int n, cc_run *out, char *msg, size_t len)
{
    memset(out, 0, sizeof *out);
    if (n < 1) {
        snprintf(msg, len, "no shards to merge");
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (!s[i].prov.shard.present) {
            snprintf(msg, len, "%s is not a shard (its report has no \"shard\"): merge takes the "
                               "folders of one run's --shard I/N runs",
                     s[i].dir);
            return -1;
        }
    for (int i = 1; i < n; i++)
        if (same_setup(&s[0], &s[i], msg, len))
            return -1;
    int count = s[0].prov.shard.count;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (s[i].prov.shard.index == s[j].prov.shard.index) {
                snprintf(msg, len, "shard %d/%d is given twice (%s and %s)", s[i].prov.shard.index,
                         count, s[j].dir, s[i].dir);
                return -1;
            }
    for (int k = 1; k <= count; k++) {
        int found = 0;
        for (int i = 0; i < n; i++)
            found |= s[i].prov.shard.index == k;
        if (!found) {
            snprintf(msg, len, "shard %d/%d is missing: the set has %d of the %d shards", k, count,
                     n, count);
            return -1;
        }
    }
    size_t total = (size_t)s[0].prov.shard.total;
    int *from = malloc((total ? total : 1) * sizeof *from);
    out->results = calloc(total ? total : 1, sizeof *out->results);
    if (!from || !out->results) {
        free(from);
        free(out->results);
        out->results = NULL;
        snprintf(msg, len, "out of memory");
        return -1;
    }
    for (size_t g = 0; g < total; g++)
        from[g] = -1;
    for (int i = 0; i < n; i++) {
        const cc_shard_info *si = &s[i].prov.shard;
        if (s[i].n_results != si->n) {
            snprintf(msg, len, "%s: the shard's results were not read", s[i].dir);
            goto bad;
        }
        for (size_t k = 0; k < si->n; k++) {
            uint64_t g = si->global[k];
            if (from[g] >= 0) {
                snprintf(msg, len, "case %" PRIu64 " of the run is in shard %d/%d (%s) and in "
                                   "shard %d/%d (%s)",
                         g, s[from[g]].prov.shard.index, count, s[from[g]].dir, si->index, count,
                         s[i].dir);
                goto bad;
            }
            from[g] = i;
            out->results[g] = s[i].results[k];
        }
    }
    for (size_t g = 0; g < total; g++)
        if (from[g] < 0) {
            snprintf(msg, len, "case %zu of the run's %zu is in no shard", g, total);
            goto bad;
        }
    free(from);
    from = NULL;
    out->n_results = total;
    out->cases = (long)total;
    snprintf(out->dir, sizeof out->dir, "%s", s[0].dir);
    snprintf(out->report_path, sizeof out->report_path, "(%d merged shards)", n);
    memcpy(out->provider_description, s[0].provider_description, sizeof out->provider_description);
    memcpy(out->case_files, s[0].case_files, sizeof out->case_files);
    memcpy(out->command, s[0].command, sizeof out->command);
    out->repro = s[0].repro;
    out->base_seed = s[0].base_seed;
    out->prov = s[0].prov;
    memset(&out->prov.shard, 0, sizeof out->prov.shard);
    for (int i = 0; i < n; i++) {
        out->wall_seconds += s[i].wall_seconds;
        out->session_cases += s[i].session_cases;
        out->resumed |= s[i].resumed;
        /* shards may run on different machines: name every CPU model once */
        if (!strstr(out->prov.cpu_model, s[i].prov.cpu_model)) {
            size_t used = strlen(out->prov.cpu_model);
            snprintf(out->prov.cpu_model + used, sizeof out->prov.cpu_model - used, " | %s",
                     s[i].prov.cpu_model);
        }
    }
    return 0;
bad:
    free(from);
    free(out->results);
    out->results = NULL;
    return -1;
}

int cc_run_report(const cc_run *r, cc_report *rep, char *msg, size_t len)
{
    cc_report_init(rep);
    rep->provenance = r->prov; /* first: it says whether a repeated case's bits must agree */
    for (size_t i = 0; i < r->n_results; i++)
        if (cc_report_add(rep, &r->results[i])) {
            snprintf(msg, len, "out of memory");
            cc_report_free(rep);
            return -1;
        }
    memcpy(rep->provider_description, r->provider_description, sizeof rep->provider_description);
    memcpy(rep->case_files, r->case_files, sizeof rep->case_files);
    memcpy(rep->command, r->command, sizeof rep->command);
    rep->repro = r->repro;
    rep->base_seed = r->base_seed;
    rep->wall_seconds = r->wall_seconds;
    rep->session_cases = r->session_cases;
    rep->resumed = r->resumed;
    rep->provenance = r->prov;
    rep->provenance.shard.global = NULL; /* not owned by the report */
    rep->provenance.shard.present = 0;
    return 0;
}

int cc_report_json_sha256(const cc_report *rep, char hex[65])
{
    char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    if (!m)
        return -1;
    cc_report_write_json_stream(rep, m);
    if (fclose(m)) {
        free(buf);
        return -1;
    }
    cc_sha256_hex(buf, n, hex);
    free(buf);
    return 0;
}

int cc_run_write(const cc_run *r, const char *dir, cc_run_counts *counts, char *msg, size_t len)
{
    cc_report rep;
    cc_journal *j = NULL;
    if (cc_run_report(r, &rep, msg, len))
        return -1;
    int rc = -1;
    if (cc_make_dir(dir)) {
        snprintf(msg, len, "cannot create the output folder %s: %s", dir, strerror(errno));
        goto out;
    }
    if (cc_journal_open(dir, -1, &j, msg, len))
        goto out;
    char old_run[1100]; /* a replaced run's run.json would describe another run */
    snprintf(old_run, sizeof old_run, "%s/run.json", dir);
    remove(old_run);
    cc_manifest_remove(dir); /* so would a signature of the run that was there */
    for (size_t i = 0; i < r->n_results; i++)
        if (cc_journal_append(j, i, &r->results[i], msg, len))
            goto out;
    int closed = cc_journal_close(j);
    j = NULL;
    if (closed) {
        snprintf(msg, len, "cannot sync %s/results.jsonl", dir);
        goto out;
    }
    if (cc_report_write_outputs(&rep, dir, msg, len))
        goto out;
    if (counts)
        *counts = (cc_run_counts){rep.distinct, rep.counts[CC_RES_PASS], rep.repeats,
                                  rep.disagreeing};
    rc = 0;
out:
    cc_journal_close(j);
    cc_report_free(&rep);
    return rc;
}


/* merge writes OUT whole: never into one of the shards it reads, and into a folder holding a
 * run only with --force. 0, or -1 with msg. */
static int check_merge_out(int n, const char *const *dirs, const char *out_dir, int force,
                           char *msg, size_t len)
{
    struct stat o;
    if (stat(out_dir, &o) != 0)
        return 0; /* a new folder */
    for (int i = 0; i < n; i++) {
        struct stat s;
        char dir[1100];
        snprintf(dir, sizeof dir, "%s", dirs[i]);
        size_t l = strlen(dir); /* a shard given as its report.json: its folder */
        if (l > 12 && strcmp(dir + l - 12, "/report.json") == 0)
            dir[l - 12] = 0;
        if (stat(dir, &s) == 0 && s.st_dev == o.st_dev && s.st_ino == o.st_ino) {
            snprintf(msg, len,
                     "--out %s is the shard folder %s: merging into one of its inputs would "
                     "overwrite that shard; give another --out",
                     out_dir, dirs[i]);
            return -1;
        }
    }
    const char *held = cc_dir_holds_run(out_dir);
    if (held && !force) {
        snprintf(msg, len, "--out %s holds a run (%s): --force replaces it, or give another --out",
                 out_dir, held);
        return -1;
    }
    return 0;
}

int cc_merge_command(int n, const char *const *dirs, const char *out_dir, int force, FILE *log)
{
    char msg[1024] = "";
    int rc = 2, loaded = 0;
    cc_run *s = calloc((size_t)(n > 0 ? n : 1), sizeof *s);
    cc_run m;
    memset(&m, 0, sizeof m);
    cc_run_counts counts = {0};
    if (!s) {
        snprintf(msg, sizeof msg, "out of memory");
        goto out;
    }
    if (check_merge_out(n, dirs, out_dir, force, msg, sizeof msg))
        goto out;
    for (; loaded < n; loaded++)
        if (cc_run_load(dirs[loaded], CC_LOAD_SEAL | CC_LOAD_RESULTS | CC_LOAD_PROVENANCE,
                        &s[loaded], msg, sizeof msg))
            goto out;
    if (cc_run_merge(s, n, &m, msg, sizeof msg) ||
        cc_run_write(&m, out_dir, &counts, msg, sizeof msg))
        goto out;
    printf("capcheck merge: %d shards, %ld cases: %ld passed, %ld not; report in %s\n", n,
           counts.distinct, counts.passed, counts.distinct - counts.passed, out_dir);
    if (counts.repeats) {
        char said[64];
        cc_repeats_sentence(counts.repeats, said, sizeof said);
        printf("capcheck merge: %s (%ld case lines ran); %ld disagreed with their first run "
               "(nondeterministic)\n",
               said, m.cases, counts.disagreeing);
    }
    rc = counts.distinct > counts.passed ? 1 : 0;
out:
    if (rc == 2)
        fprintf(log, "capcheck merge: %s\n", msg);
    free(m.results);
    for (int i = 0; i < loaded; i++)
        cc_run_free(&s[i]);
    free(s);
    return rc;
}
