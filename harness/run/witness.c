#include "harness/run/witness.h"

#include <stdio.h>
#include <string.h>

static const char *const verdict_names[CC_VERDICT_COUNT] = {
    "", "provider-outlier", "reference-suspect", "disputed", "no-witness"};

const char *cc_verdict_name(cc_three_way_verdict v)
{
    return (unsigned)v < CC_VERDICT_COUNT ? verdict_names[v] : "?";
}

int cc_verdict_parse(const char *s, cc_three_way_verdict *out)
{
    for (int k = 1; k < CC_VERDICT_COUNT; k++)
        if (strcmp(s, verdict_names[k]) == 0) {
            *out = (cc_three_way_verdict)k;
            return 0;
        }
    return -1;
}

int cc_witness_wanted(const cc_result *primary)
{
    return primary->status != CC_RES_PASS && primary->status != CC_RES_UNSUPPORTED;
}

void cc_witness_probe_of(const cc_result *primary, cc_probe *probe)
{
    memset(probe, 0, sizeof *probe);
    snprintf(probe->output, sizeof probe->output, "%s", primary->worst_output);
    probe->index = primary->worst_flat;
    probe->compare_with = primary->got;
}

void cc_witness_run(const cc_provider *w, const cc_case *c, const cc_run_options *o,
                    const cc_probe *asked, cc_witness *out)
{
    cc_probe probe = *asked;
    probe.found = 0;
    cc_result r;
    cc_run_options mine = {0}; /* one call, guarded; the run's reference settings, judged as the
                                  primary is */
    if (o) {
        mine.threads = o->threads;
        mine.ref = o->ref;
        mine.accumulation = o->accumulation;
    }
    cc_run_case_probed(w, c, &mine, &probe, &r);
    memset(out, 0, sizeof *out);
    snprintf(out->provider, sizeof out->provider, "%s", w->name);
    out->status = r.status;
    out->worst_ratio = r.worst_ratio;
    out->has_value = probe.found;
    out->got = probe.found ? probe.got : 0.0;
    out->agree_ratio = probe.found ? probe.ratio : 0.0;
    snprintf(out->message, sizeof out->message, "%.*s", (int)sizeof out->message - 1, r.message);
}

void cc_witness_set_missing(cc_witness *out, const char *provider, cc_result_status status,
                            const char *why)
{
    memset(out, 0, sizeof *out);
    snprintf(out->provider, sizeof out->provider, "%s", provider);
    out->status = status;
    snprintf(out->message, sizeof out->message, "%.*s", (int)sizeof out->message - 1, why);
}

cc_three_way_verdict cc_witness_verdict(const cc_result *primary)
{
    int ran = 0, passed = 0, failed_agreeing = 0;
    for (int k = 0; k < primary->n_witnesses; k++) {
        const cc_witness *w = &primary->witnesses[k];
        if (w->status != CC_RES_PASS && w->status != CC_RES_FAIL)
            continue; /* unsupported, error, crash, timeout: no values to weigh */
        ran++;
        if (w->status == CC_RES_PASS)
            passed++;
        else if (w->has_value && w->agree_ratio <= 1.0) /* NaN ratio: not agreeing */
            failed_agreeing++;
    }
    if (ran == 0)
        return CC_VERDICT_NO_WITNESS;
    if (passed == ran)
        return CC_VERDICT_PROVIDER_OUTLIER;
    if (failed_agreeing == ran && primary->status == CC_RES_FAIL && primary->worst_output[0])
        return CC_VERDICT_REFERENCE_SUSPECT;
    return CC_VERDICT_DISPUTED;
}

void cc_witness_summary(const cc_result *r, char *buf, size_t n)
{
    /* appends with snprintf; `used` may pass n, after which nothing more is written */
    size_t used = (size_t)snprintf(buf, n, "%s:", cc_verdict_name(r->verdict));
#define APPEND(...)                                                                           \
    if (used < n)                                                                             \
    used += (size_t)snprintf(buf + used, n - used, __VA_ARGS__)
    for (int k = 0; k < r->n_witnesses; k++) {
        const cc_witness *w = &r->witnesses[k];
        int compared = w->status == CC_RES_PASS || w->status == CC_RES_FAIL;
        APPEND("%s %s %s", k ? "," : "", w->provider, cc_result_status_name(w->status));
        if (compared)
            APPEND(" (ratio %.3g%s", w->worst_ratio, w->has_value ? "; " : ")");
        if (w->has_value)
            APPEND("%sgot %.9g at the primary's worst)", compared ? "" : " (", w->got);
    }
#undef APPEND
}
