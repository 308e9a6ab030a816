#define _POSIX_C_SOURCE 200809L
#include "harness/report/provenance.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/case/values.h"
#include "harness/run/witness.h"

#if __has_include("capcheck_git.h")
#include "capcheck_git.h" /* generated at build time by cmake/git_commit.cmake */
#endif
#ifndef CAPCHECK_GIT_COMMIT
#define CAPCHECK_GIT_COMMIT "unknown"
#endif

const char *cc_git_commit(void)
{
    return CAPCHECK_GIT_COMMIT;
}

static void cpu_model(char *buf, size_t n)
{
    snprintf(buf, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        /* x86: "model name"; some arm kernels: "Model" or "Hardware" */
        if (strncmp(line, "model name", 10) && strncmp(line, "Model", 5) &&
            strncmp(line, "Hardware", 8))
            continue;
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        v[strcspn(v, "\r\n")] = 0;
        if (*v) {
            snprintf(buf, n, "%s", v);
            break;
        }
    }
    fclose(f);
}

int cc_provenance_collect(cc_provenance *p, int n, const char *const *paths,
                          const char *const *texts, char *msg, size_t len)
{
    memset(p, 0, sizeof *p);
    p->present = 1;
    p->default_stream = CC_STREAM_DEFAULT;
    snprintf(p->capcheck_version, sizeof p->capcheck_version, "%s", CC_VERSION);
    snprintf(p->git_commit, sizeof p->git_commit, "%s", cc_git_commit());
    cpu_model(p->cpu_model, sizeof p->cpu_model);
    if (n > CC_PROV_MAX_FILES) {
        snprintf(msg, len, "at most %d case files", CC_PROV_MAX_FILES);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        cc_prov_file *f = &p->files[p->n_files++];
        snprintf(f->path, sizeof f->path, "%s", paths[i]);
        if (texts && texts[i])
            cc_sha256_hex(texts[i], strlen(texts[i]), f->sha256);
        else if (cc_sha256_file(paths[i], f->sha256)) {
            snprintf(msg, len, "%s: cannot read the case file to hash it: %s", paths[i],
                     strerror(errno));
            return -1;
        }
    }
    return 0;
}

int cc_provider_identity_set(cc_provider_identity *id, const char *name, const char *library,
                             char *msg, size_t len)
{
    memset(id, 0, sizeof *id);
    snprintf(id->name, sizeof id->name, "%s", name);
    snprintf(id->kind, sizeof id->kind, "%s", library ? "plugin" : "builtin");
    if (!library)
        return 0;
    snprintf(id->library, sizeof id->library, "%s", library);
    if (cc_sha256_file(library, id->sha256)) {
        snprintf(msg, len, "%s: cannot read the provider library to hash it: %s", library,
                 strerror(errno));
        return -1;
    }
    return 0;
}

/* The libtorch a report may name: the built-in ATen provider's (or, in a report that does not
 * record who ran, whatever the description says); never a plugin's. */
static int states_libtorch(const cc_provenance *p)
{
    return p->provider.kind[0] == 0 ||
           (strcmp(p->provider.kind, "builtin") == 0 && strcmp(p->provider.name, "aten") == 0);
}

static void jstr_or_null(FILE *f, const char *s)
{
    if (s[0])
        cc_json_write_string(f, s);
    else
        fputs("null", f);
}

static const char *const STATED[] = {"libtorch", "cuda", "cudnn", "gpu"};
static const char *const STATED_JSON[] = {"libtorch_version", "cuda_version", "cudnn_version",
                                          "gpu"};
/* math modes: the attention backend ("composed (no SDPA)" for ATen) came later, so a report
 * without it still reads (schema: optional) */
static const char *const MODES[] = {"tf32", "deterministic", "threads", "attention"};
#define N_MODES 4

void cc_provenance_write_json(FILE *f, const cc_provenance *p, const char *desc,
                              unsigned long long base_seed, const cc_sha256_ctx *digest)
{
    if (p && p->present) {
        fputs("  \"provenance\": {\"capcheck_version\": ", f);
        cc_json_write_string(f, p->capcheck_version);
        fputs(", \"git_commit\": ", f);
        cc_json_write_string(f, p->git_commit);
        char v[256];
        for (int i = 0; i < 4; i++) {
            cc_describe_item(desc, STATED[i], v, sizeof v);
            if (i == 0 && !states_libtorch(p))
                v[0] = 0;
            fprintf(f, ", \"%s\": ", STATED_JSON[i]);
            jstr_or_null(f, v);
        }
        fputs(",\n    \"cpu_model\": ", f);
        cc_json_write_string(f, p->cpu_model);
        fputs(", \"math_modes\": {", f);
        for (int i = 0; i < N_MODES; i++) {
            cc_describe_item(desc, MODES[i], v, sizeof v);
            fprintf(f, "%s\"%s\": ", i ? ", " : "", MODES[i]);
            jstr_or_null(f, v);
        }
        fputc('}', f);
        const cc_provider_identity *id = &p->provider;
        if (id->kind[0]) {
            fputs(",\n    \"provider\": {\"name\": ", f);
            cc_json_write_string(f, id->name);
            fputs(", \"kind\": ", f);
            cc_json_write_string(f, id->kind);
            if (id->library[0]) {
                fputs(", \"library\": ", f);
                cc_json_write_string(f, id->library);
                fprintf(f, ", \"sha256\": \"%s\"", id->sha256);
            }
            fputc('}', f);
        }
        /* the value stream a case line without stream= drew in the run */
        fprintf(f, ", \"base_seed\": %llu, \"default_stream\": %d,\n    \"case_files\": [",
                base_seed, p->default_stream ? p->default_stream : CC_STREAM_DEFAULT);
        for (int i = 0; i < p->n_files; i++) {
            fputs(i ? ", {\"path\": " : "{\"path\": ", f);
            cc_json_write_string(f, p->files[i].path);
            fprintf(f, ", \"sha256\": \"%s\"}", p->files[i].sha256);
        }
        fputs("]", f);
        if (p->n_platforms) {
            fputs(",\n    \"platforms\": ", f);
            cc_platforms_write_json(f, p->platforms, p->n_platforms);
        }
        fputs("},\n", f);
        const cc_shard_info *s = &p->shard;
        if (s->present) {
            fprintf(f,
                    "  \"shard\": {\"index\": %d, \"count\": %d, \"cases_total\": %" PRIu64
                    ", \"case_list_hash\": \"fnv1a64:%016" PRIx64 "\", \"indices\": [",
                    s->index, s->count, s->total, s->case_hash);
            for (size_t k = 0; k < s->n; k++)
                fprintf(f, "%s%" PRIu64, k ? "," : "", s->global[k]);
            fputs("]},\n", f);
        }
    }
    if (digest) {
        cc_sha256_ctx d = *digest;
        char hex[65];
        cc_sha256_final_hex(&d, hex);
        fprintf(f, "  \"results_digest\": \"sha256:%s\",\n", hex);
    }
}

static int copy_str(const cc_json *o, const char *key, char *buf, size_t n, int required,
                    char *msg, size_t len)
{
    const cc_json *v = cc_json_get(o, key);
    buf[0] = 0;
    if (!v || v->type == CC_JSON_NULL) {
        if (!required)
            return 0;
        snprintf(msg, len, "provenance lacks \"%s\"", key);
        return -1;
    }
    if (v->type != CC_JSON_STRING || strlen(v->text) >= n) {
        snprintf(msg, len, "provenance \"%s\" is not a string of at most %zu characters", key,
                 n - 1);
        return -1;
    }
    memcpy(buf, v->text, strlen(v->text) + 1);
    return 0;
}

void cc_provenance_free(cc_provenance *p)
{
    free(p->shard.global);
    p->shard.global = NULL;
}

int cc_provenance_from_json(const cc_json *rep, cc_provenance *p, char *msg, size_t len)
{
    memset(p, 0, sizeof *p);
    const cc_json *o = cc_json_get(rep, "provenance");
    if (!o)
        return 1;
    if (o->type != CC_JSON_OBJECT) {
        snprintf(msg, len, "\"provenance\" is not an object");
        return -1;
    }
    p->present = 1;
    int64_t stream = CC_STREAM_LIBM; /* a report that does not say predates the move to 2 */
    if (cc_json_get(o, "default_stream") &&
        (cc_json_i64(o, "default_stream", &stream) || stream < 1 || stream > 2)) {
        snprintf(msg, len, "provenance \"default_stream\" is neither 1 nor 2");
        return -1;
    }
    p->default_stream = (int)stream;
    char *stated[4] = {p->libtorch, p->cuda, p->cudnn, p->gpu};
    size_t stated_n[4] = {sizeof p->libtorch, sizeof p->cuda, sizeof p->cudnn, sizeof p->gpu};
    if (copy_str(o, "capcheck_version", p->capcheck_version, sizeof p->capcheck_version, 1, msg,
                 len) ||
        copy_str(o, "git_commit", p->git_commit, sizeof p->git_commit, 1, msg, len) ||
        copy_str(o, "cpu_model", p->cpu_model, sizeof p->cpu_model, 1, msg, len))
        return -1;
    for (int i = 0; i < 4; i++)
        if (copy_str(o, STATED_JSON[i], stated[i], stated_n[i], 0, msg, len))
            return -1;
    const cc_json *mm = cc_json_get(o, "math_modes");
    if (mm) {
        char *modes[N_MODES] = {p->tf32, p->deterministic, p->threads, p->attention};
        size_t modes_n[N_MODES] = {sizeof p->tf32, sizeof p->deterministic, sizeof p->threads,
                                   sizeof p->attention};
        for (int i = 0; i < N_MODES; i++)
            if (copy_str(mm, MODES[i], modes[i], modes_n[i], 0, msg, len))
                return -1;
    }
    const cc_json *id = cc_json_get(o, "provider");
    if (id) {
        cc_provider_identity *pi = &p->provider;
        if (id->type != CC_JSON_OBJECT ||
            copy_str(id, "name", pi->name, sizeof pi->name, 1, msg, len) ||
            copy_str(id, "kind", pi->kind, sizeof pi->kind, 1, msg, len) ||
            copy_str(id, "library", pi->library, sizeof pi->library, 0, msg, len) ||
            copy_str(id, "sha256", pi->sha256, sizeof pi->sha256, 0, msg, len) ||
            (strcmp(pi->kind, "builtin") && strcmp(pi->kind, "plugin")) ||
            (strcmp(pi->kind, "plugin") == 0 && strlen(pi->sha256) != 64)) {
            snprintf(msg, len, "provenance \"provider\" is malformed (name, kind builtin or "
                               "plugin, and a plugin's library and sha256)");
            return -1;
        }
    }
    if (!states_libtorch(p))
        p->libtorch[0] = 0; /* whatever the report says: only the built-in aten states one */
    const cc_json *files = cc_json_get(o, "case_files");
    if (!files || files->type != CC_JSON_ARRAY) {
        snprintf(msg, len, "provenance lacks the \"case_files\" list");
        return -1;
    }
    for (const cc_json *e = files->child; e; e = e->next) {
        if (p->n_files == CC_PROV_MAX_FILES) {
            snprintf(msg, len, "provenance lists more than %d case files", CC_PROV_MAX_FILES);
            return -1;
        }
        cc_prov_file *pf = &p->files[p->n_files++];
        if (copy_str(e, "path", pf->path, sizeof pf->path, 1, msg, len) ||
            copy_str(e, "sha256", pf->sha256, sizeof pf->sha256, 1, msg, len))
            return -1;
    }
    const cc_json *pl = cc_json_get(o, "platforms");
    if (pl && cc_platforms_from_json(pl, p->platforms, CC_MAX_PLATFORMS, &p->n_platforms, msg,
                                     len))
        return -1;
    const cc_json *s = cc_json_get(rep, "shard");
    if (s) {
        cc_shard_info *si = &p->shard;
        int64_t idx, cnt;
        const char *hash;
        const cc_json *ind = cc_json_get(s, "indices");
        if (cc_json_i64(s, "index", &idx) || cc_json_i64(s, "count", &cnt) ||
            cc_json_u64(s, "cases_total", &si->total) ||
            cc_json_string(s, "case_list_hash", &hash) || strncmp(hash, "fnv1a64:", 8) != 0 ||
            !ind || ind->type != CC_JSON_ARRAY || cnt < 1 || idx < 1 || idx > cnt) {
            snprintf(msg, len, "\"shard\" is malformed (index, count, cases_total, "
                               "case_list_hash, indices)");
            return -1;
        }
        si->present = 1;
        si->index = (int)idx;
        si->count = (int)cnt;
        si->case_hash = strtoull(hash + 8, NULL, 16);
        size_t n = 0;
        for (const cc_json *e = ind->child; e; e = e->next)
            n++;
        si->global = malloc((n ? n : 1) * sizeof *si->global);
        if (!si->global) {
            snprintf(msg, len, "out of memory");
            return -1;
        }
        for (const cc_json *e = ind->child; e; e = e->next) {
            char *end;
            if (e->type != CC_JSON_NUMBER ||
                (si->global[si->n] = strtoull(e->text, &end, 10), *end) ||
                si->global[si->n] >= si->total) {
                snprintf(msg, len, "\"shard\" indices must be integers below cases_total");
                cc_provenance_free(p);
                return -1;
            }
            si->n++;
        }
    }
    return 0;
}

static void digest_num(cc_sha256_ctx *d, double x)
{
    char buf[40];
    if (isnan(x))
        snprintf(buf, sizeof buf, "NaN");
    else if (isinf(x))
        snprintf(buf, sizeof buf, x > 0 ? "Infinity" : "-Infinity");
    else
        snprintf(buf, sizeof buf, "%.17g", x);
    cc_sha256_update(d, "\t", 1);
    cc_sha256_update(d, buf, strlen(buf));
}

void cc_results_digest_add(cc_sha256_ctx *d, const cc_result *r)
{
    cc_sha256_update(d, r->provider, strlen(r->provider));
    if (r->platform[0]) { /* only where stamped: digests of results without one unchanged */
        cc_sha256_update(d, "\tP\t", 3);
        cc_sha256_update(d, r->platform, strlen(r->platform));
    }
    cc_sha256_update(d, "\t", 1);
    cc_sha256_update(d, r->line, strlen(r->line));
    const char *st = cc_result_status_name(r->status);
    cc_sha256_update(d, "\t", 1);
    cc_sha256_update(d, st, strlen(st));
    cc_sha256_update(d, r->checked_fwd ? "\tF" : "\t-", 2);
    cc_sha256_update(d, r->checked_vjp ? "\tV" : "\t-", 2);
    digest_num(d, r->fwd_ratio);
    digest_num(d, r->vjp_ratio);
    digest_num(d, r->worst_ratio);
    if (r->retried) /* only where it happened: digests of other results unchanged */
        cc_sha256_update(d, "\tR", 2);
    /* witnesses (harness/run/witness.h) only where they ran: digests of other results unchanged */
    for (int k = 0; k < r->n_witnesses; k++) {
        const cc_witness *w = &r->witnesses[k];
        const char *ws = cc_result_status_name(w->status);
        cc_sha256_update(d, "\tW\t", 3);
        cc_sha256_update(d, w->provider, strlen(w->provider));
        cc_sha256_update(d, "\t", 1);
        cc_sha256_update(d, ws, strlen(ws));
        digest_num(d, w->worst_ratio);
        if (w->has_value) {
            digest_num(d, w->got);
            digest_num(d, w->agree_ratio);
        }
    }
    if (r->n_witnesses) {
        const char *v = cc_verdict_name(r->verdict);
        cc_sha256_update(d, "\tV\t", 3);
        cc_sha256_update(d, v, strlen(v));
    }
    if (r->sampled) { /* only sampled checks: digests of full ones unchanged */
        cc_sha256_update(d, "\tS", 2);
        digest_num(d, r->checked_fraction);
    }
    cc_sha256_update(d, "\n", 1);
}
