/* Three-way reports: when the reference and the provider under test (the primary) disagree,
 * other providers (witnesses, `--witness openblas,reference,./lib.so`) run the same case on the
 * same materialized inputs, so a reader sees at once who is wrong.
 *
 * A witness runs only on a case whose primary result is fail, error, crash or timeout (not pass,
 * not unsupported: nothing disagrees there), in a worker like the primary's (harness/run/pool.h: a
 * witness that crashes or hangs is recorded as such and never changes the primary's result).
 * Each witness records its own status and worst bound ratio against the reference, and its value
 * at the primary's worst element (same output, same index) with the ratio of its difference from
 * the primary's value to that element's bound.
 *
 * The verdict, over the witnesses that ran (status pass or fail; unsupported, error, crash and
 * timeout witnesses say nothing about the values):
 *   no-witness         none ran;
 *   provider-outlier   every one passes: they agree with the reference, the primary does not;
 *   reference-suspect  every one fails, the primary failed too, and each one's value at the
 *                      primary's worst element is within that element's bound of the primary's:
 *                      the providers agree with each other, not with the reference;
 *   disputed           anything else (witnesses split, or failing in other ways).
 * Witnesses are information only: the gate and evidence count the primary's results alone. */
#ifndef CAPCHECK_WITNESS_H
#define CAPCHECK_WITNESS_H

#include <stddef.h>

#include "harness/case/case.h"
#include "harness/run/runner.h"

/* "provider-outlier", "reference-suspect", "disputed", "no-witness"; "" for CC_VERDICT_NONE. */
const char *cc_verdict_name(cc_three_way_verdict v);
/* A verdict name back to the verdict; -1 when unknown (or ""). */
int cc_verdict_parse(const char *s, cc_three_way_verdict *out);

/* 1 when witnesses are asked about this primary result (fail, error, crash, timeout). */
int cc_witness_wanted(const cc_result *primary);
/* What a witness is asked: the primary's worst element and value (output "" when it has none). */
void cc_witness_probe_of(const cc_result *primary, cc_probe *probe);
/* Run case c on witness provider w (initialised) with the probe, one guarded call under the run's
 * reference threads, --ref and accumulation mode from o (NULL: defaults); describe what it gave. */
void cc_witness_run(const cc_provider *w, const cc_case *c, const cc_run_options *o,
                    const cc_probe *asked, cc_witness *out);
/* A witness that gave no result of its own (it cannot run on the device, or its worker crashed
 * or timed out): its status and the sentence saying why. */
void cc_witness_set_missing(cc_witness *out, const char *provider, cc_result_status status,
                            const char *why);
/* The verdict over primary->witnesses (the rules above). */
cc_three_way_verdict cc_witness_verdict(const cc_result *primary);
/* One line for people: "provider-outlier: reference pass (ratio 0, got 1.5), openblas ...". */
void cc_witness_summary(const cc_result *r, char *buf, size_t n);

#endif
