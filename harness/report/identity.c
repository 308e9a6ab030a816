#include "harness/report/identity.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "harness/run/exit_code.h"

/* What the first record of an identity said (and whether a repeat disagreed with it). */
struct cc_fold_case {
    size_t first;
    cc_result_status status;
    int unjudged; /* cc_result_unjudged of the first record */
    double fwd_ratio, vjp_ratio, worst_ratio, got;
    uint64_t worst_at; /* FNV-1a of the worst element's output and index */
    int nondeterministic;
};

/* line with every " KEY=value" token of the given keys left out */
static void line_without(const char *line, const char *const *keys, int n_keys, char *buf,
                         size_t n)
{
    size_t used = 0;
    for (const char *s = line; *s && used + 1 < n;) {
        const char *tok = s + (*s == ' '), *end = tok + strcspn(tok, " ");
        int drop = 0;
        for (int k = 0; k < n_keys && !drop; k++) {
            size_t kl = strlen(keys[k]);
            drop = *s == ' ' && strncmp(tok, keys[k], kl) == 0 && tok[kl] == '=';
        }
        size_t len = (size_t)(end - s);
        if (!drop) {
            if (len > n - 1 - used)
                len = n - 1 - used;
            memcpy(buf + used, s, len);
            used += len;
        }
        s = end;
    }
    buf[used] = 0;
}

void cc_case_identity(const cc_result *r, char *buf, size_t n)
{
    static const char *const keys[] = {"ref"};
    char line[CC_CASE_LINE_MAX];
    line_without(r->line, keys, 1, line, sizeof line);
    snprintf(buf, n, "%s\t%s\t%s\t%s\t%s", r->platform, r->provider,
             r->sampled ? "sampled" : "full", cc_accumulation_name(r->accumulation), line);
}

void cc_case_inputs_key(const cc_result *r, char *buf, size_t n)
{
    static const char *const keys[] = {"ref", "check"};
    char line[CC_CASE_LINE_MAX];
    line_without(r->line, keys, 2, line, sizeof line);
    snprintf(buf, n, "%s\t%s\t%s", r->platform, r->provider, line);
}

int cc_repeat_bits_must_agree(const cc_result *r, const char *deterministic)
{
    return r->device == CC_CPU || (deterministic && strncmp(deterministic, "on", 2) == 0);
}

/* Equal as the same bits would make them (any NaN equals any NaN). */
static int same(double a, double b)
{
    return a == b || (isnan(a) && isnan(b));
}

static uint64_t worst_at(const cc_result *r)
{
    char at[160];
    int n = snprintf(at, sizeof at, "%s%s", r->worst_output, r->worst_index);
    return cc_fnv1a64(at, n > 0 ? (size_t)n : 0);
}

/* Whether r disagrees with its identity's first record c; why says how. */
static int disagrees(const cc_fold_case *c, const cc_result *r, int bits, char *why, size_t n)
{
    const char *first = cc_result_status_name(c->status), *now = cc_result_status_name(r->status);
    if (c->status != r->status) {
        snprintf(why, n, "repeated runs of this case disagree: the first was %s (worst bound "
                         "ratio %.4g), a repeat %s (worst bound ratio %.4g)",
                 first, c->worst_ratio, now, r->worst_ratio);
        return 1;
    }
    if (!bits || (same(c->fwd_ratio, r->fwd_ratio) && same(c->vjp_ratio, r->vjp_ratio) &&
                  same(c->worst_ratio, r->worst_ratio) && same(c->got, r->got) &&
                  c->worst_at == worst_at(r)))
        return 0;
    snprintf(why, n, "repeated runs of this case gave different bits: both %s, the first with "
                     "worst bound ratio %.17g (value %.17g), a repeat %.17g (value %.17g)",
             now, c->worst_ratio, c->got, r->worst_ratio, r->got);
    return 1;
}

int cc_fold_add(cc_fold *f, const cc_result *r, size_t pos, int bits_must_agree,
                cc_fold_seen *seen)
{
    char key[CC_CASE_LINE_MAX + 160];
    cc_case_identity(r, key, sizeof key);
    int added;
    long id = cc_keyset_add(&f->ids, key, strlen(key), &added);
    if (id < 0)
        return -1;
    memset(seen, 0, sizeof *seen);
    if (added) {
        cc_fold_case *grown = cc_grow(f->v, (size_t)id, &f->cap, sizeof *grown, 1024);
        if (!grown)
            return -1;
        f->v = grown;
        f->v[id] = (cc_fold_case){pos,           r->status, cc_result_unjudged(r), r->fwd_ratio,
                                  r->vjp_ratio,  r->worst_ratio, r->got, worst_at(r), 0};
        seen->kind = CC_FOLD_FIRST;
        seen->first = pos;
        return 0;
    }
    cc_fold_case *c = &f->v[id];
    f->repeats++;
    seen->first = c->first;
    seen->first_status = c->status;
    seen->first_unjudged = c->unjudged;
    seen->first_ratio = c->worst_ratio;
    seen->kind = CC_FOLD_REPEAT;
    if (!c->nondeterministic && disagrees(c, r, bits_must_agree, seen->why, sizeof seen->why)) {
        c->nondeterministic = 1;
        f->disagreeing++;
        seen->kind = CC_FOLD_DISAGREES;
    }
    return 0;
}

void cc_fold_free(cc_fold *f)
{
    cc_keyset_free(&f->ids);
    free(f->v);
    memset(f, 0, sizeof *f);
}

int cc_fold_run(const cc_result *results, size_t n, const char *deterministic, cc_folded *out)
{
    memset(out, 0, sizeof *out);
    out->first = malloc((n ? n : 1) * sizeof *out->first);
    out->nondeterministic = calloc(n ? n : 1, 1);
    size_t cap = 0;
    cc_fold f = {0};
    int rc = out->first && out->nondeterministic ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        cc_fold_seen seen;
        rc = cc_fold_add(&f, &results[i], i,
                         cc_repeat_bits_must_agree(&results[i], deterministic), &seen);
        out->first[i] = seen.first;
        if (rc || seen.kind != CC_FOLD_DISAGREES)
            continue;
        struct cc_fold_disagreement *grown =
            cc_grow(out->disagreement, (size_t)f.disagreeing - 1, &cap, sizeof *grown, 8);
        if (!grown) {
            rc = -1;
            break;
        }
        out->disagreement = grown;
        grown[f.disagreeing - 1].first = seen.first;
        memcpy(grown[f.disagreeing - 1].why, seen.why, sizeof seen.why);
        out->nondeterministic[seen.first] = 1;
    }
    out->repeats = f.repeats;
    out->disagreeing = f.disagreeing;
    out->distinct = (long)f.ids.n;
    cc_fold_free(&f);
    if (rc)
        cc_folded_free(out);
    return rc;
}

void cc_folded_free(cc_folded *f)
{
    free(f->first);
    free(f->nondeterministic);
    free(f->disagreement);
    memset(f, 0, sizeof *f);
}

cc_result_status cc_folded_status(const cc_folded *f, const cc_result *results, size_t i)
{
    return f->nondeterministic[i] ? CC_RES_NONDETERMINISTIC : results[i].status;
}

const char *cc_folded_why(const cc_folded *f, size_t i)
{
    for (long k = 0; f->nondeterministic[i] && k < f->disagreeing; k++)
        if (f->disagreement[k].first == i)
            return f->disagreement[k].why;
    return "";
}

void cc_repeats_sentence(long repeats, char *buf, size_t n)
{
    char digits[32], grouped[48];
    int len = snprintf(digits, sizeof digits, "%ld", repeats), k = 0;
    for (int i = 0; i < len; i++) {
        if (i && (len - i) % 3 == 0)
            grouped[k++] = ',';
        grouped[k++] = digits[i];
    }
    grouped[k] = 0;
    snprintf(buf, n, "%s repeated case line%s counted once", grouped, repeats == 1 ? "" : "s");
}
