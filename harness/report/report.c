#include "harness/report/report.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/files.h"
#include "core/grow.h"
#include "core/json.h"
#include "core/sha256.h"
#include "harness/run/exit_code.h"
#include "harness/run/witness.h"

/* The "witnesses" list of a result, compact (results.jsonl) or spaced (report.json). */
static void put_witness_list(cc_strbuf *b, const cc_result *r, int spaced)
{
    const char *colon = spaced ? ": " : ":", *comma = spaced ? ", " : ",";
    cc_strbuf_printf(b, "\"witnesses\"%s[", colon);
    for (int k = 0; k < r->n_witnesses; k++) {
        const cc_witness *w = &r->witnesses[k];
        cc_strbuf_printf(b, "%s{\"provider\"%s", k ? comma : "", colon);
        cc_json_put_string(b, w->provider);
        cc_strbuf_printf(b, "%s\"status\"%s\"%s\"%s\"worst_ratio\"%s", comma, colon,
                         cc_result_status_name(w->status), comma, colon);
        cc_json_put_number(b, w->worst_ratio);
        if (w->has_value) {
            cc_strbuf_printf(b, "%s\"got\"%s", comma, colon);
            cc_json_put_number(b, w->got);
            cc_strbuf_printf(b, "%s\"agree_ratio\"%s", comma, colon);
            cc_json_put_number(b, w->agree_ratio);
        }
        if (w->message[0]) {
            cc_strbuf_printf(b, "%s\"message\"%s", comma, colon);
            cc_json_put_string(b, w->message);
        }
        cc_strbuf_putc(b, '}');
    }
    cc_strbuf_putc(b, ']');
}

/* A member ,"key":"value" (value escaped) or ,"key":number; key a literal (its length known). */
#define put_string_member(b, key, value) (cc_strbuf_lit(b, key), cc_json_put_string(b, value))
#define put_number_member(b, key, value) (cc_strbuf_lit(b, key), cc_json_put_number(b, value))

/* The record's members after its opening brace, through "}\n". Written for every case of every
 * run (a worker's hot path): appended to a buffer, numbers without printf (core/json.h). */
void cc_result_put_json_members(cc_strbuf *b, const cc_result *r)
{
    put_string_member(b, "\"case\":", r->line);
    put_string_member(b, ",\"op\":", r->op);
    cc_strbuf_lit(b, ",\"dtype\":\"");
    cc_strbuf_puts(b, cc_dtype_name(r->dtype));
    cc_strbuf_lit(b, "\",\"device\":\"");
    cc_strbuf_puts(b, cc_device_name(r->device));
    cc_strbuf_lit(b, "\",\"layout\":\"");
    cc_strbuf_puts(b, cc_layout_name(r->layout));
    put_string_member(b, "\",\"provider\":", r->provider);
    if (r->platform[0])
        put_string_member(b, ",\"platform\":", r->platform);
    put_string_member(b, ",\"vjp_mode\":", r->vjp_mode);
    cc_strbuf_lit(b, ",\"status\":\"");
    cc_strbuf_puts(b, cc_result_status_name(r->status));
    if (r->checked_fwd)
        cc_strbuf_lit(b, "\",\"checked_fwd\":true");
    else
        cc_strbuf_lit(b, "\",\"checked_fwd\":false");
    if (r->checked_vjp)
        cc_strbuf_lit(b, ",\"checked_vjp\":true");
    else
        cc_strbuf_lit(b, ",\"checked_vjp\":false");
    put_number_member(b, ",\"fwd_ratio\":", r->fwd_ratio);
    put_number_member(b, ",\"vjp_ratio\":", r->vjp_ratio);
    put_number_member(b, ",\"worst_ratio\":", r->worst_ratio);
    cc_strbuf_lit(b, ",\"accumulation\":\"");
    cc_strbuf_puts(b, cc_accumulation_name(r->accumulation));
    put_number_member(b, "\",\"suspect_ratio\":", r->suspect_ratio);
    if (r->suspect)
        cc_strbuf_lit(b, ",\"suspect\":true");
    if (r->vacuous)
        cc_strbuf_lit(b, ",\"vacuous\":true");
    if (r->vacuous_outputs[0])
        put_string_member(b, ",\"vacuous_outputs\":", r->vacuous_outputs);
    if (r->placement_sensitive) { /* only when seen: a record without keeps its bytes */
        put_string_member(b, ",\"placement_sensitive\":true,\"placement\":{\"output\":",
                          r->placement_output);
        put_string_member(b, ",\"index\":", r->placement_index);
        put_number_member(b, ",\"first\":", r->placement_first);
        put_number_member(b, ",\"moved\":", r->placement_moved);
        cc_strbuf_putc(b, '}');
    }
    if (r->prob_judged > 0) { /* only where the probabilistic bound judged */
        cc_strbuf_lit(b, ",\"prob_judged\":");
        cc_strbuf_put_i64(b, r->prob_judged);
    }
    if (r->bias.n > 0) { /* only where the rounding-bias test ran (f16/bf16) */
        put_string_member(b, ",\"bias\":{\"output\":", r->bias_output);
        cc_strbuf_lit(b, ",\"n\":");
        cc_strbuf_put_i64(b, r->bias.n);
        cc_strbuf_lit(b, ",\"toward_zero\":");
        cc_strbuf_put_i64(b, r->bias.toward_zero);
        cc_strbuf_lit(b, ",\"below\":");
        cc_strbuf_put_i64(b, r->bias.below);
        put_number_member(b, ",\"mean_ulp\":", r->bias.mean_ulp);
        put_number_member(b, ",\"z\":", r->bias.z);
        cc_strbuf_putc(b, '}');
    }
    if (r->has_power) {
        put_number_member(b, ",\"power\":{\"k\":", r->power.k_fail);
        put_number_member(b, ",\"k_suspect\":", r->power.k_suspect);
        put_number_member(b, ",\"ulp\":", r->power.ulp_fail);
        put_number_member(b, ",\"ulp_suspect\":", r->power.ulp_suspect);
        if (!isnan(r->power.trunc)) { /* where the rounding-bias test reached a value */
            put_number_member(b, ",\"trunc_bound\":", r->power.trunc_bound);
            put_number_member(b, ",\"trunc\":", r->power.trunc);
        }
        cc_strbuf_putc(b, '}');
    }
    if (r->worst_output[0]) {
        put_string_member(b, ",\"worst\":{\"output\":", r->worst_output);
        put_string_member(b, ",\"index\":", r->worst_index);
        put_number_member(b, ",\"expected\":", r->expected);
        put_number_member(b, ",\"got\":", r->got);
        put_number_member(b, ",\"bound\":", r->bound);
        if (r->worst_by_prob)
            cc_strbuf_lit(b, ",\"probabilistic\":true");
        put_string_member(b, ",\"inputs\":", r->worst_inputs);
        cc_strbuf_putc(b, '}');
    }
    if (r->message[0])
        put_string_member(b, ",\"message\":", r->message);
    if (r->n_witnesses > 0) { /* only when witnesses ran: a run without writes what it always did */
        cc_strbuf_putc(b, ',');
        put_witness_list(b, r, 0);
        cc_strbuf_lit(b, ",\"verdict\":\"");
        cc_strbuf_puts(b, cc_verdict_name(r->verdict));
        cc_strbuf_putc(b, '"');
    }
    if (r->sampled) { /* a sampled check (harness/run/sample.h); full checks write nothing here */
        put_number_member(b, ",\"sampled\":{\"fraction\":", r->checked_fraction);
        cc_strbuf_lit(b, ",\"window\":[");
        cc_strbuf_put_i64(b, r->window_rows);
        cc_strbuf_putc(b, ',');
        cc_strbuf_put_i64(b, r->window_cols);
        cc_strbuf_lit(b, "]}");
    }
    if (r->retried)
        cc_strbuf_lit(b, ",\"retried\":true");
    if (r->repeat > 1) { /* only when repeated: a run without --repeat writes what it always did */
        cc_strbuf_lit(b, ",\"repeat\":");
        cc_strbuf_put_i64(b, r->repeat);
    }
    cc_strbuf_lit(b, ",\"elements\":");
    cc_strbuf_put_i64(b, r->elements);
    cc_strbuf_lit(b, ",\"seconds\":");
    cc_strbuf_put_fixed6(b, r->seconds);
    cc_strbuf_lit(b, "}\n");
}

void cc_result_write_json(FILE *f, const cc_result *r)
{
    cc_strbuf b = {0};
    cc_strbuf_putc(&b, '{');
    cc_result_put_json_members(&b, r);
    if (!b.failed)
        fwrite(b.data, 1, b.len, f);
    else
        fputs("{\"error\":\"out of memory writing a result\"}\n", f);
    cc_strbuf_free(&b);
}

/* ---- aggregation --------------------------------------------------------------------------- */

const char *cc_report_accumulation(const cc_report *rep)
{
    return rep->mixed_accumulation ? "mixed" : cc_accumulation_name(rep->accumulation);
}

void cc_report_init(cc_report *rep)
{
    memset(rep, 0, sizeof *rep);
    cc_sha256_init(&rep->digest);
}

void cc_report_free(cc_report *rep)
{
    cc_fold_free(&rep->fold);
    free(rep->rows);
    free(rep->witnessed);
    free(rep->judged);
    memset(rep, 0, sizeof *rep);
}

static cc_report_row *find_row(cc_report *rep, const cc_result *r)
{
    for (size_t i = 0; i < rep->n; i++) {
        cc_report_row *row = &rep->rows[i];
        if (strcmp(row->op, r->op) == 0 && row->dtype == r->dtype && row->device == r->device &&
            strcmp(row->provider, r->provider) == 0 && strcmp(row->platform, r->platform) == 0)
            return row;
    }
    cc_report_row *grown = cc_grow(rep->rows, rep->n, &rep->cap, sizeof *grown, 32);
    if (!grown)
        return NULL;
    rep->rows = grown;
    cc_report_row *row = &rep->rows[rep->n++];
    memset(row, 0, sizeof *row);
    snprintf(row->op, sizeof row->op, "%s", r->op);
    snprintf(row->provider, sizeof row->provider, "%s", r->provider);
    memcpy(row->platform, r->platform, sizeof row->platform);
    snprintf(row->vjp_mode, sizeof row->vjp_mode, "%s", r->vjp_mode);
    row->dtype = r->dtype;
    row->device = r->device;
    return row;
}

static int judge(cc_report *rep, const cc_result *r)
{
    char msg[1024];
    cc_expect_outcome o = cc_expect_judge(cc_expect_find(rep->expect, r->line), r, msg,
                                          sizeof msg);
    rep->expect_counts[o]++;
    rep->expect_failed_unjudged += cc_expect_is_failure(o) && cc_result_unjudged(r);
    if (o == CC_EXPECT_NONE)
        return 0;
    cc_report_judged *grown =
        cc_grow(rep->judged, rep->n_judged, &rep->cap_judged, sizeof *grown, 16);
    if (!grown)
        return -1;
    rep->judged = grown;
    cc_report_judged *j = &rep->judged[rep->n_judged++];
    memcpy(j->line, r->line, sizeof j->line);
    memcpy(j->platform, r->platform, sizeof j->platform);
    j->outcome = o;
    snprintf(j->msg, sizeof j->msg, "%s", msg);
    return 0;
}

/* Does a case (nonfinite: a NaN/Inf pattern miss; its bound ratio) rank before the one kept?
 * A finite miss first, however large a NaN/Inf miss's ratio (inf): the finite one says by how
 * much the kernel is off, and the NaN/Inf misses are counted apart; then the larger ratio, the
 * first of equals. */
static int ranks_before(int nonfinite, double ratio, int kept_nonfinite, double kept_ratio)
{
    if (nonfinite != kept_nonfinite)
        return nonfinite < kept_nonfinite;
    return ratio > kept_ratio;
}

/* A case that failed, errored, crashed or timed out: the row's worst failure when it ranks
 * before the one kept (cc_report_row), and the NaN/Inf pattern misses counted apart. */
static void note_failure(cc_report_row *row, const cc_result *r)
{
    int nonfinite = cc_result_nonfinite_miss(r);
    if (nonfinite && !row->nonfinite++) {
        snprintf(row->first_nonfinite, sizeof row->first_nonfinite, "%s", r->line);
        snprintf(row->first_nonfinite_msg, sizeof row->first_nonfinite_msg, "%s", r->message);
    }
    if (row->worst_failure[0] && !ranks_before(nonfinite, r->worst_ratio,
                                               row->worst_failure_nonfinite,
                                               row->worst_failure_ratio))
        return;
    snprintf(row->worst_failure, sizeof row->worst_failure, "%s", r->line);
    snprintf(row->worst_failure_msg, sizeof row->worst_failure_msg, "%s", r->message);
    row->worst_failure_status = r->status;
    row->worst_failure_ratio = r->worst_ratio;
    row->worst_failure_verdict = r->n_witnesses ? r->verdict : CC_VERDICT_NONE;
    row->worst_failure_nonfinite = nonfinite;
}

/* A repeat that disagrees with its case's first record: the case, counted under the first
 * record's status, is now nondeterministic, and the row names it (seen: the fold's word). */
static void count_nondeterministic(cc_report *rep, cc_report_row *row, const cc_result *r,
                                   const cc_fold_seen *seen)
{
    row->counts[seen->first_status]--;
    row->counts[CC_RES_NONDETERMINISTIC]++;
    rep->counts[seen->first_status]--;
    rep->counts[CC_RES_NONDETERMINISTIC]++;
    rep->unjudged -= seen->first_unjudged; /* now a finding: judged */
    rep->disagreeing++;
    if (!row->first_failure[0] || seen->first_status == CC_RES_PASS ||
        seen->first_status == CC_RES_UNSUPPORTED) {
        snprintf(row->first_failure, sizeof row->first_failure, "%s", r->line);
        snprintf(row->first_failure_msg, sizeof row->first_failure_msg, "%s", seen->why);
    }
    double ratio = r->worst_ratio > seen->first_ratio ? r->worst_ratio : seen->first_ratio;
    if (!row->worst_failure[0] ||
        ranks_before(0, ratio, row->worst_failure_nonfinite, row->worst_failure_ratio)) {
        snprintf(row->worst_failure, sizeof row->worst_failure, "%s", r->line);
        snprintf(row->worst_failure_msg, sizeof row->worst_failure_msg, "%s", seen->why);
        row->worst_failure_status = CC_RES_NONDETERMINISTIC;
        row->worst_failure_ratio = ratio;
        row->worst_failure_verdict = CC_VERDICT_NONE;
        row->worst_failure_nonfinite = 0;
    }
}

/* The first record of a case into its row and the totals. */
static int count_case(cc_report *rep, cc_report_row *row, const cc_result *r)
{
    row->cases++;
    row->counts[r->status]++;
    if (r->sampled) {
        if (!row->sampled || r->checked_fraction < row->least_fraction)
            row->least_fraction = r->checked_fraction;
        row->sampled++;
    }
    if (r->vacuous && !row->vacuous++) {
        snprintf(row->first_vacuous, sizeof row->first_vacuous, "%s", r->line);
        snprintf(row->first_vacuous_outputs, sizeof row->first_vacuous_outputs, "%s",
                 r->vacuous_outputs[0] ? r->vacuous_outputs : "an output");
    }
    row->suspect += r->suspect != 0;
    rep->distinct++;
    rep->counts[r->status]++;
    rep->unjudged += cc_result_unjudged(r);
    rep->vacuous += r->vacuous != 0;
    rep->suspect += r->suspect != 0;
    rep->placement += r->placement_sensitive != 0;
    if (r->placement_sensitive && !row->placement++) {
        snprintf(row->first_placement, sizeof row->first_placement, "%s", r->line);
        snprintf(row->first_placement_at, sizeof row->first_placement_at,
                 "%s%s: %.17g at the first call's buffer placement, %.17g at the other",
                 r->placement_output, r->placement_index, r->placement_first,
                 r->placement_moved);
    }
    int nonfinite = cc_result_nonfinite_miss(r);
    if (!row->worst_line[0] ||
        ranks_before(nonfinite, r->worst_ratio, row->worst_line_nonfinite, row->worst_ratio)) {
        row->worst_ratio = r->worst_ratio;
        row->worst_line_nonfinite = nonfinite;
        snprintf(row->worst_line, sizeof row->worst_line, "%s", r->line);
    }
    if (r->status != CC_RES_PASS && !row->first_failure[0]) {
        snprintf(row->first_failure, sizeof row->first_failure, "%s", r->line);
        snprintf(row->first_failure_msg, sizeof row->first_failure_msg, "%s", r->message);
    }
    if (r->status != CC_RES_PASS && r->status != CC_RES_UNSUPPORTED)
        note_failure(row, r);
    if (r->n_witnesses > 0) {
        cc_result *grown =
            cc_grow(rep->witnessed, rep->n_witnessed, &rep->cap_witnessed, sizeof *grown, 8);
        if (!grown)
            return -1;
        rep->witnessed = grown;
        rep->witnessed[rep->n_witnessed++] = *r;
        rep->verdicts[(unsigned)r->verdict < CC_VERDICT_COUNT ? r->verdict : CC_VERDICT_NONE]++;
    }
    return 0;
}

int cc_report_add(cc_report *rep, const cc_result *r)
{
    cc_fold_seen seen;
    if (cc_fold_add(&rep->fold, r, (size_t)rep->cases,
                    cc_repeat_bits_must_agree(r, rep->provenance.deterministic), &seen))
        return -1;
    if (seen.kind == CC_FOLD_FIRST && rep->expect && judge(rep, r))
        return -1;
    cc_report_row *row = find_row(rep, r);
    if (!row)
        return -1;
    if (rep->cases == 0)
        rep->accumulation = r->accumulation;
    rep->mixed_accumulation |= r->accumulation != rep->accumulation;
    cc_results_digest_add(&rep->digest, r);
    rep->cases++;
    rep->retried += r->retried != 0;
    row->retried += r->retried != 0;
    rep->repeats = rep->fold.repeats;
    if (seen.kind == CC_FOLD_DISAGREES)
        count_nondeterministic(rep, row, r, &seen);
    return seen.kind == CC_FOLD_FIRST ? count_case(rep, row, r) : 0;
}

long cc_report_not_passed(const cc_report *rep)
{
    return rep->distinct - rep->counts[CC_RES_PASS];
}

int cc_report_exit_code(const cc_report *rep)
{
    if (!rep->expect)
        return cc_exit_code_of(cc_report_not_passed(rep) - rep->unjudged, rep->unjudged);
    long failed = 0;
    for (int k = 0; k < CC_EXPECT_COUNT; k++)
        failed += cc_expect_is_failure((cc_expect_outcome)k) ? rep->expect_counts[k] : 0;
    return cc_exit_code_of(failed - rep->expect_failed_unjudged, rep->expect_failed_unjudged);
}

/* ---- writers ------------------------------------------------------------------------------- */

typedef void (*writer_fn)(const cc_report *rep, FILE *f);

static int write_atomically(const char *path, writer_fn fn, const cc_report *rep)
{
    cc_write_atomic w;
    FILE *f = cc_write_atomic_open(&w, path);
    if (!f)
        return -1;
    fn(rep, f);
    return cc_write_atomic_close(&w, 0, 0);
}

/* "witnessed": the verdict counts and, per witnessed case in case order, the primary's worst
 * element and every witness (only when a witness ran: other reports are unchanged). */
static void write_witnessed_json(const cc_report *rep, FILE *f)
{
    if (!rep->n_witnessed)
        return;
    fputs("  \"witnessed\": {\n    \"verdicts\": {", f);
    for (int v = 1; v < CC_VERDICT_COUNT; v++)
        fprintf(f, "%s\"%s\": %ld", v > 1 ? ", " : "", cc_verdict_name((cc_three_way_verdict)v),
                rep->verdicts[v]);
    fputs("},\n    \"cases\": [\n", f);
    for (size_t i = 0; i < rep->n_witnessed; i++) {
        const cc_result *r = &rep->witnessed[i];
        fputs("      {\"case\": ", f);
        cc_json_write_string(f, r->line);
        fputs(", \"provider\": ", f);
        cc_json_write_string(f, r->provider);
        fprintf(f, ", \"status\": \"%s\", \"worst_ratio\": ", cc_result_status_name(r->status));
        cc_json_write_number(f, r->worst_ratio);
        if (r->worst_output[0]) {
            fputs(", \"output\": ", f);
            cc_json_write_string(f, r->worst_output);
            fputs(", \"index\": ", f);
            cc_json_write_string(f, r->worst_index);
            fputs(", \"expected\": ", f);
            cc_json_write_number(f, r->expected);
            fputs(", \"got\": ", f);
            cc_json_write_number(f, r->got);
            fputs(", \"bound\": ", f);
            cc_json_write_number(f, r->bound);
        }
        if (r->message[0]) {
            fputs(", \"message\": ", f);
            cc_json_write_string(f, r->message);
        }
        fprintf(f, ", \"verdict\": \"%s\", ", cc_verdict_name(r->verdict));
        cc_strbuf list = {0};
        put_witness_list(&list, r, 1);
        fwrite(list.data, 1, list.failed ? 0 : list.len, f);
        cc_strbuf_free(&list);
        fprintf(f, "}%s\n", i + 1 < rep->n_witnessed ? "," : "");
    }
    fputs("    ]\n  }\n", f);
}

static void write_json(const cc_report *rep, FILE *f)
{
    fprintf(f, "{\n  \"schema\": \"%s\",\n  \"capcheck_version\": \"%s\",\n", CC_REPORT_SCHEMA,
            CC_VERSION);
    /* one line, so a comparison of two reports can drop it (see report.h) */
    fprintf(f, "  \"timing\": {\"wall_seconds\": %.3f, \"session_cases\": %ld, \"resumed\": %s},\n",
            rep->wall_seconds, rep->session_cases, rep->resumed ? "true" : "false");
    fputs("  \"provider_description\": ", f);
    cc_json_write_string(f, rep->provider_description);
    fputs(",\n  \"case_files\": ", f);
    cc_json_write_string(f, rep->case_files);
    fputs(",\n  \"command\": ", f);
    cc_json_write_string(f, rep->command);
    fputs(",\n  \"repro\": ", f);
    cc_repro_write_json(f, &rep->repro);
    fprintf(f, ",\n  \"base_seed\": %llu,\n  \"cases\": %ld,\n", rep->base_seed, rep->cases);
    cc_provenance_write_json(f, &rep->provenance, rep->provider_description, rep->base_seed,
                             &rep->digest);
    fputs("  \"totals\": {", f);
    for (int s = 0; s < CC_RES_COUNT; s++)
        fprintf(f, "%s\"%s\": %ld", s ? ", " : "", cc_result_status_name((cc_result_status)s),
                rep->counts[s]);
    fprintf(f, "},\n  \"judgement\": {\"accumulation\": \"%s\", \"suspect_lambda\": %g, "
               "\"vacuous\": %ld, \"suspect\": %ld",
            cc_report_accumulation(rep), CC_SUSPECT_LAMBDA, rep->vacuous, rep->suspect);
    if (rep->placement) /* only when seen: other reports keep their bytes */
        fprintf(f, ", \"placement_sensitive\": %ld", rep->placement);
    fputs("},\n", f);
    if (rep->repeats) /* only when it happened: other reports keep their bytes */
        fprintf(f, "  \"repeated\": {\"case_lines\": %ld, \"distinct_cases\": %ld, "
                   "\"disagreeing\": %ld},\n",
                rep->repeats, rep->distinct, rep->disagreeing);
    if (rep->retried) /* only when it happened: other reports keep their bytes */
        fprintf(f, "  \"retried\": %ld,\n", rep->retried);
    fputs("  \"rows\": [\n", f);
    for (size_t i = 0; i < rep->n; i++) {
        const cc_report_row *row = &rep->rows[i];
        const ref_op *op = ref_op_find(row->op);
        fputs("    {\"op\": ", f);
        cc_json_write_string(f, row->op);
        fprintf(f, ", \"report_name\": \"%s\", \"dtype\": \"%s\", \"device\": \"%s\", \"provider\": ",
                op ? op->report_name : row->op, cc_dtype_name(row->dtype),
                cc_device_name(row->device));
        cc_json_write_string(f, row->provider);
        if (row->platform[0]) {
            fputs(", \"platform\": ", f);
            cc_json_write_string(f, row->platform);
        }
        fputs(", \"vjp_mode\": ", f);
        cc_json_write_string(f, row->vjp_mode);
        fprintf(f, ", \"cases\": %ld", row->cases);
        for (int s = 0; s < CC_RES_COUNT; s++)
            fprintf(f, ", \"%s\": %ld", cc_result_status_name((cc_result_status)s),
                    row->counts[s]);
        fprintf(f, ", \"vacuous\": %ld, \"suspect\": %ld", row->vacuous, row->suspect);
        if (row->placement)
            fprintf(f, ", \"placement_sensitive\": %ld", row->placement);
        if (row->retried)
            fprintf(f, ", \"retried\": %ld", row->retried);
        fputs(", \"worst_ratio\": ", f);
        cc_json_write_number(f, row->worst_ratio);
        fputs(", \"worst_case\": ", f);
        cc_json_write_string(f, row->worst_line);
        if (row->first_failure[0]) {
            fputs(", \"first_failure\": ", f);
            cc_json_write_string(f, row->first_failure);
            fputs(", \"first_failure_message\": ", f);
            cc_json_write_string(f, row->first_failure_msg);
        }
        if (row->sampled) { /* only rows with sampled checks: other reports are unchanged */
            fprintf(f, ", \"sampled\": {\"cases\": %ld, \"least_fraction\": ", row->sampled);
            cc_json_write_number(f, row->least_fraction);
            fputc('}', f);
        }
        if (row->worst_failure[0]) {
            fputs(", \"worst_failure\": ", f);
            cc_json_write_string(f, row->worst_failure);
            fprintf(f, ", \"worst_failure_status\": \"%s\", \"worst_failure_message\": ",
                    cc_result_status_name(row->worst_failure_status));
            cc_json_write_string(f, row->worst_failure_msg);
        }
        if (row->nonfinite) /* only rows that have one: other reports keep their bytes */
            fprintf(f, ", \"nonfinite_failures\": %ld", row->nonfinite);
        if (op && op->note) {
            fputs(", \"contract_note\": ", f);
            cc_json_write_string(f, op->note);
        }
        fprintf(f, "}%s\n", i + 1 < rep->n ? "," : "");
    }
    fputs(rep->n_witnessed ? "  ],\n" : "  ]\n", f);
    write_witnessed_json(rep, f);
    fputs("}\n", f);
}

#define MD_WITNESS_COLUMNS 16 /* distinct witness names a table shows (a run has at most 4) */
#define MD_WITNESSED_ROWS 200  /* rows of the table; report.json has every witnessed case */

/* A witness's table cell: its value at the primary's worst element, its status and ratio. */
static void witness_cell(FILE *f, const cc_witness *w)
{
    int compared = w->status == CC_RES_PASS || w->status == CC_RES_FAIL;
    if (w->has_value)
        fprintf(f, "%.9g ", w->got);
    else if (compared)
        fputs("- ", f);
    fputs(compared ? "(" : "", f);
    fputs(cc_result_status_name(w->status), f);
    if (compared)
        fprintf(f, ", ratio %.3g)", w->worst_ratio);
}

/* The three-way table: each witnessed case, the primary's worst element, what the reference
 * expected there and what each witness gave, and the verdict. */
static void write_witnessed_markdown(const cc_report *rep, FILE *f)
{
    if (!rep->n_witnessed)
        return;
    const char *names[MD_WITNESS_COLUMNS];
    int n_names = 0;
    for (size_t i = 0; i < rep->n_witnessed; i++)
        for (int k = 0; k < rep->witnessed[i].n_witnesses; k++) {
            const char *name = rep->witnessed[i].witnesses[k].provider;
            int seen = 0;
            for (int j = 0; j < n_names; j++)
                seen |= strcmp(names[j], name) == 0;
            if (!seen && n_names < MD_WITNESS_COLUMNS)
                names[n_names++] = name;
        }
    fprintf(f, "\n## Witnesses: who is wrong\n\n");
    fprintf(f, "Each case that did not pass ran again, on the same inputs, on the witnesses. A "
               "witness's cell is its value at the primary's worst element, then its own status "
               "and worst bound ratio against the reference. Verdicts:");
    for (int v = 1; v < CC_VERDICT_COUNT; v++)
        fprintf(f, " %s %ld%s", cc_verdict_name((cc_three_way_verdict)v), rep->verdicts[v],
                v + 1 < CC_VERDICT_COUNT ? "," : ".\n\n");
    fprintf(f, "| case | at | %s got | reference expected |", rep->witnessed[0].provider);
    for (int j = 0; j < n_names; j++)
        fprintf(f, " %s |", names[j]);
    fputs(" verdict |\n|---|---|---:|---:|", f);
    for (int j = 0; j < n_names; j++)
        fputs("---|", f);
    fputs("---|\n", f);
    for (size_t i = 0; i < rep->n_witnessed && i < MD_WITNESSED_ROWS; i++) {
        const cc_result *r = &rep->witnessed[i];
        fprintf(f, "| `%s` | ", r->line);
        if (r->worst_output[0])
            fprintf(f, "%s%s | %.9g | %.9g |", r->worst_output, r->worst_index, r->got,
                    r->expected);
        else
            fprintf(f, "- | %s | - |", cc_result_status_name(r->status));
        for (int j = 0; j < n_names; j++) {
            const cc_witness *w = NULL;
            for (int k = 0; k < r->n_witnesses && !w; k++)
                if (strcmp(r->witnesses[k].provider, names[j]) == 0)
                    w = &r->witnesses[k];
            fputc(' ', f);
            if (w)
                witness_cell(f, w);
            else
                fputs("-", f);
            fputs(" |", f);
        }
        fprintf(f, " **%s** |\n", cc_verdict_name(r->verdict));
    }
    if (rep->n_witnessed > MD_WITNESSED_ROWS)
        fprintf(f, "\n(%zu more witnessed cases in report.json.)\n",
                rep->n_witnessed - MD_WITNESSED_ROWS);
}

/* The cases judged against the case files' "#! seen" directives (harness/report/expect.h). */
static void write_expectations_markdown(const cc_report *rep, FILE *f)
{
    if (!rep->expect)
        return;
    fprintf(f, "\n## Expectations (\"#! seen\" in the case files)\n\n");
    for (int o = 1; o < CC_EXPECT_COUNT; o++)
        fprintf(f, "%s%s %ld%s", o == 1 ? "Outcomes: " : "",
                cc_expect_outcome_name((cc_expect_outcome)o), rep->expect_counts[o],
                o + 1 < CC_EXPECT_COUNT ? ", " : ". ");
    fprintf(f, "Broken, crash and unexpected are failures; did-not-reproduce (an expected deviation "
               "passed on a platform where it was never seen) and also-seen are news, not "
               "failures.\n\n");
    if (!rep->n_judged)
        return;
    fprintf(f, "| outcome | platform | case | what |\n|---|---|---|---|\n");
    for (size_t i = 0; i < rep->n_judged; i++) {
        const cc_report_judged *j = &rep->judged[i];
        fprintf(f, "| %s%s%s | %s | `%s` | %s |\n", cc_expect_is_failure(j->outcome) ? "**" : "",
                cc_expect_outcome_name(j->outcome), cc_expect_is_failure(j->outcome) ? "**" : "",
                j->platform[0] ? j->platform : "-", j->line, j->msg);
    }
}

int cc_report_row_failing(const cc_report_row *row)
{
    return row->counts[CC_RES_FAIL] + cc_count_errors(row->counts) > 0;
}

void cc_report_not_passed_counts(const long *counts, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
    for (int s = 0; s < CC_RES_COUNT && used < n; s++)
        if (counts[s] && s != CC_RES_PASS && s != CC_RES_UNSUPPORTED)
            used += (size_t)snprintf(buf + used, n - used, "%s%ld %s", used ? ", " : "",
                                     counts[s], cc_result_status_name((cc_result_status)s));
}

void cc_report_row_not_passed(const cc_report_row *row, char *buf, size_t n)
{
    cc_report_not_passed_counts(row->counts, buf, n);
    size_t used = strlen(buf);
    if (!row->nonfinite || used >= n)
        return;
    if (row->nonfinite == row->counts[CC_RES_FAIL])
        snprintf(buf + used, n - used, ", all on a NaN/Inf pattern");
    else
        snprintf(buf + used, n - used, "; %ld of the fails on a NaN/Inf pattern", row->nonfinite);
}

/* A failing row of report.md: its counts, its worst case (a finite value missed beyond its
 * bound before a NaN/Inf pattern) and the command that reruns it; the NaN/Inf pattern misses
 * counted apart, and the first of them shown too when the worst case is another kind. */
static void write_failing_row(const cc_report *rep, const cc_report_row *row, FILE *f)
{
    char counts[200], cmd[2600];
    cc_report_row_not_passed(row, counts, sizeof counts);
    cc_repro_command_on(&rep->repro, row->worst_failure, row->platform,
                        rep->provenance.platforms, rep->provenance.n_platforms, cmd, sizeof cmd);
    fprintf(f, "- **%s %s %s**: %ld of %ld did not pass (%s); worst: %s: %s", row->op,
            cc_dtype_name(row->dtype), row->platform[0] ? row->platform
                                                        : cc_device_name(row->device),
            row->cases - row->counts[CC_RES_PASS] - row->counts[CC_RES_UNSUPPORTED], row->cases,
            counts, cc_result_status_name(row->worst_failure_status), row->worst_failure_msg);
    if (row->worst_failure_verdict != CC_VERDICT_NONE)
        fprintf(f, "; witnesses: **%s**", cc_verdict_name(row->worst_failure_verdict));
    fprintf(f, "\n  `%s`\n", cmd);
    if (!row->nonfinite || row->worst_failure_nonfinite)
        return;
    cc_repro_command_on(&rep->repro, row->first_nonfinite, row->platform,
                        rep->provenance.platforms, rep->provenance.n_platforms, cmd, sizeof cmd);
    fprintf(f, "  first NaN/Inf pattern miss: %s\n  `%s`\n", row->first_nonfinite_msg, cmd);
}

/* A row's cases of one kind (placement-sensitive, vacuous): how many, the first's line and what
 * report.md says of it. */
typedef struct {
    long n;
    const char *first, *said;
} flagged_cases;

static flagged_cases placement_of(const cc_report_row *row)
{
    return (flagged_cases){row->placement, row->first_placement, row->first_placement_at};
}

static flagged_cases vacuous_of(const cc_report_row *row)
{
    return (flagged_cases){row->vacuous, row->first_vacuous, row->first_vacuous_outputs};
}

/* Each row with cases of(row) counts: how many, `lead` and what is said of the first, and the
 * command that reruns it on the row's platform. */
static void write_flagged_rows(const cc_report *rep, const size_t *order,
                               flagged_cases (*of)(const cc_report_row *), const char *lead,
                               FILE *f)
{
    char cmd[2600];
    for (size_t k = 0; k < rep->n; k++) {
        const cc_report_row *row = &rep->rows[order[k]];
        flagged_cases c = of(row);
        if (!c.n)
            continue;
        cc_repro_command_on(&rep->repro, c.first, row->platform, rep->provenance.platforms,
                            rep->provenance.n_platforms, cmd, sizeof cmd);
        fprintf(f, "- **%s %s %s**: %ld of %ld; %s%s\n  `%s`\n", row->op,
                cc_dtype_name(row->dtype),
                row->platform[0] ? row->platform : cc_device_name(row->device), c.n, row->cases,
                lead, c.said, cmd);
    }
}

/* The rows with placement-sensitive cases (runner.h: --repeat found their bits depend on where
 * the buffers sit, not a race): how many, the first with its element and the command that
 * reruns it. Nothing when there are none. */
static void write_placement_markdown(const cc_report *rep, const size_t *order, FILE *f)
{
    if (!rep->placement)
        return;
    fprintf(f, "\n## Placement-sensitive (%ld cases: other bits when --repeat moved the buffers, "
               "the same bits again at the first call's placement; not a race, a kernel whose "
               "bits depend on alignment; the gate's policy item placement_sensitive)\n\n",
            rep->placement);
    write_flagged_rows(rep, order, placement_of, "first: ", f);
}

/* The rows with vacuous cases (an output whose bound admitted every value: docs/judging.md,
 * never evidence): how many, the first with the outputs that proved nothing and the command that
 * reruns it. Nothing when there are none. */
static void write_vacuous_markdown(const cc_report *rep, const size_t *order, FILE *f)
{
    if (!rep->vacuous)
        return;
    fprintf(f, "\n## Vacuous (%ld cases: an output whose bound admitted every value of its "
               "magnitude proved nothing there; never evidence; docs/judging.md)\n\n",
            rep->vacuous);
    write_flagged_rows(rep, order, vacuous_of, "the first vacuous in ", f);
}

/* report.md's verdict line (bad: the cases that did not pass, counts: their statuses), and the
 * repeated case lines it counted once. */
static void write_verdict(const cc_report *rep, FILE *f, long bad, const char *counts,
                          size_t failing_rows)
{
    if (bad)
        fprintf(f, "**Verdict: %ld of %ld cases did not pass** (%s) in %zu of %zu rows%s; exit "
                   "code 1.\n",
                bad, rep->distinct, counts, failing_rows, rep->n,
                rep->counts[CC_RES_UNSUPPORTED] ? "; some cases are unsupported (below)" : "");
    else if (rep->counts[CC_RES_UNSUPPORTED])
        fprintf(f, "**Verdict: no case failed, but %ld of %ld cases are unsupported by the "
                   "provider** (never a pass); exit code 1.\n",
                rep->counts[CC_RES_UNSUPPORTED], rep->distinct);
    else
        fprintf(f, "**Verdict: all %ld cases passed**; exit code 0.\n", rep->distinct);
    if (rep->repeats) {
        char said[64];
        cc_repeats_sentence(rep->repeats, said, sizeof said);
        fprintf(f, "\n%s: %ld case lines ran, %ld distinct cases; every count here is of "
                   "distinct cases. %ld case%s disagreed with its first run (counted "
                   "nondeterministic).\n",
                said, rep->cases, rep->distinct, rep->disagreeing,
                rep->disagreeing == 1 ? "" : "s");
    }
}

/* The report opens with what a reader came for: the verdict, then every failing row with its
 * worst case and the command that reruns it, then what changed since the baseline; unsupported
 * rows come after, apart (they are not failures, and they are not passes). */
static void write_markdown(const cc_report *rep, FILE *f)
{
    size_t *order = malloc((rep->n ? rep->n : 1) * sizeof *order);
    if (!order)
        return;
    cc_report_order_worst(rep, order); /* worst first: rows that did not pass, then by ratio */
    long bad = rep->counts[CC_RES_FAIL] + cc_count_errors(rep->counts);
    size_t failing_rows = 0, unsupported_rows = 0;
    for (size_t i = 0; i < rep->n; i++) {
        failing_rows += cc_report_row_failing(&rep->rows[i]) != 0;
        unsupported_rows += !cc_report_row_failing(&rep->rows[i]) &&
                            rep->rows[i].counts[CC_RES_UNSUPPORTED] > 0;
    }
    char counts[160];
    cc_report_not_passed_counts(rep->counts, counts, sizeof counts);
    fprintf(f, "# capcheck report\n\n");
    write_verdict(rep, f, bad, counts, failing_rows);
    if (rep->retried)
        fprintf(f, "\n%ld cases ran twice: their first worker was killed from outside (SIGKILL "
                   "or SIGTERM capcheck did not send, e.g. the OOM killer); their results are "
                   "the second run's (\"retried\": true in results.jsonl).\n",
                rep->retried);
    if (failing_rows) {
        fprintf(f, "\n## Failures (worst case of each row; the command reruns it)\n\n");
        for (size_t k = 0; k < rep->n; k++)
            if (cc_report_row_failing(&rep->rows[order[k]]))
                write_failing_row(rep, &rep->rows[order[k]], f);
    }
    write_placement_markdown(rep, order, f);
    if (rep->since_baseline)
        fprintf(f, "\n## Since the baseline\n\n```\n%s```\n", rep->since_baseline);
    if (unsupported_rows) {
        fprintf(f, "\n## Unsupported (not failures, never passes; first message of each row)\n\n");
        for (size_t k = 0; k < rep->n; k++) {
            const cc_report_row *row = &rep->rows[order[k]];
            if (cc_report_row_failing(row) || !row->counts[CC_RES_UNSUPPORTED])
                continue;
            fprintf(f, "- %s %s %s: %ld of %ld unsupported: %s\n", row->op,
                    cc_dtype_name(row->dtype),
                    row->platform[0] ? row->platform : cc_device_name(row->device),
                    row->counts[CC_RES_UNSUPPORTED], row->cases, row->first_failure_msg);
        }
    }
    fprintf(f, "\n## The run\n\n");
    fprintf(f, "- capcheck %s; provider: %s\n- cases: %s; base seed %llu; %ld cases\n",
            CC_VERSION, rep->provider_description, rep->case_files, rep->base_seed, rep->distinct);
    if (rep->repeats)
        fprintf(f, "- repeated: %ld case lines ran; %ld of them repeated an earlier one and are "
                   "counted once; %ld disagreed\n",
                rep->cases, rep->repeats, rep->disagreeing);
    fprintf(f, "- totals:");
    for (int s = 0; s < CC_RES_COUNT; s++)
        fprintf(f, " %s %ld%s", cc_result_status_name((cc_result_status)s), rep->counts[s],
                s + 1 < CC_RES_COUNT ? "," : "\n");
    fprintf(f, "- timing: %.2f s wall for the %ld cases this session ran%s\n", rep->wall_seconds,
            rep->session_cases, rep->resumed ? " (a resumed run)" : "");
    long sampled = 0;
    double least = 1.0;
    for (size_t i = 0; i < rep->n; i++)
        if (rep->rows[i].sampled) {
            sampled += rep->rows[i].sampled;
            least = rep->rows[i].least_fraction < least ? rep->rows[i].least_fraction : least;
        }
    if (sampled)
        fprintf(f, "- sampled: %ld cases were checked on a sample of their elements (at least "
                   "%.2g%% of them; every NaN, Inf and zero-trust check on all): the reference's "
                   "values there are the full reference's\n",
                sampled, 100.0 * least);
    if (rep->provenance.present)
        fprintf(f, "- built from commit %s; cpu %s\n", rep->provenance.git_commit,
                rep->provenance.cpu_model);
    fprintf(f, "- judged: %s accumulation (%s); vacuous %ld (a bound that admits every value: "
               "never evidence), suspect %ld (passing, but over the probabilistic bound, "
               "lambda %g)\n",
            cc_report_accumulation(rep),
            rep->mixed_accumulation                 ? "results judged in both modes"
            : rep->accumulation == CC_ACC_RELAXED ? "f16/bf16 sums folded in the dtype"
                                                  : "f16/bf16 sums in float32, one rounding to "
                                                    "the dtype",
            rep->vacuous, rep->suspect, CC_SUSPECT_LAMBDA);
    if (rep->placement)
        fprintf(f, "- placement-sensitive: %ld cases (their bits depend on where the buffers "
                   "sit: below)\n",
                rep->placement);
    for (int i = 0; i < rep->provenance.n_platforms; i++) {
        char facts[1024];
        cc_platform_summary(&rep->provenance.platforms[i], facts, sizeof facts);
        fprintf(f, "- platform **%s**: %s\n", rep->provenance.platforms[i].key, facts);
    }
    fprintf(f, "\nThe bound ratio is error / (c_op * u(dtype) * m_i + floor): at most 1 passes.\n");
    write_witnessed_markdown(rep, f);
    write_expectations_markdown(rep, f);
    fprintf(f, "\n## Rows, worst first\n\n");
    fprintf(f, "| op | dtype | device | platform | provider | vjpMode | cases | passed | failed | "
               "unsupported | errors | vacuous | suspect | worst ratio | worst case |\n");
    fprintf(f, "|---|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for (size_t k = 0; k < rep->n; k++) {
        const cc_report_row *row = &rep->rows[order[k]];
        fprintf(f,
                "| %s | %s | %s | %s | %s | %s | %ld | %ld | %ld | %ld | %ld | %ld | %ld | %.3g | "
                "`%s` |\n",
                row->op, cc_dtype_name(row->dtype), cc_device_name(row->device),
                row->platform[0] ? row->platform : "-", row->provider,
                row->vjp_mode, row->cases, row->counts[CC_RES_PASS], row->counts[CC_RES_FAIL],
                row->counts[CC_RES_UNSUPPORTED],
                cc_count_errors(row->counts), row->vacuous, row->suspect, row->worst_ratio,
                row->worst_line);
    }
    write_vacuous_markdown(rep, order, f); /* below the rows: a note on passes, not a finding */
    free(order);
    int any = 0;
    for (size_t i = 0; i < rep->n; i++) {
        const ref_op *op = ref_op_find(rep->rows[i].op);
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            seen |= strcmp(rep->rows[j].op, rep->rows[i].op) == 0;
        if (!op || !op->note || seen)
            continue;
        if (!any++)
            fprintf(f, "\n## Where TorchLean's contract differs from plain ATen\n\n");
        fprintf(f, "- %s: %s\n", op->name, op->note);
    }
}

void cc_report_write_json_stream(const cc_report *rep, FILE *f)
{
    write_json(rep, f);
}

int cc_report_write_json(const cc_report *rep, const char *path)
{
    return write_atomically(path, write_json, rep) || cc_report_seal(path) ? -1 : 0;
}

int cc_report_write_markdown(const cc_report *rep, const char *path)
{
    return write_atomically(path, write_markdown, rep);
}

/* ---- the sidecar hash ---------------------------------------------------------------------- */

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int cc_report_seal(const char *path)
{
    char hex[65], side[1100];
    if (cc_sha256_file(path, hex))
        return -1;
    snprintf(side, sizeof side, "%s.sha256", path);
    cc_write_atomic w;
    FILE *f = cc_write_atomic_open(&w, side);
    if (!f)
        return -1;
    fprintf(f, "%s  %s\n", hex, base_name(path));
    return cc_write_atomic_close(&w, 0, 0);
}

int cc_report_check_seal(const char *path, char hex[65], char *msg, size_t len)
{
    if (cc_sha256_file(path, hex)) {
        snprintf(msg, len, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    char side[1100], line[256];
    snprintf(side, sizeof side, "%s.sha256", path);
    FILE *f = fopen(side, "r");
    if (!f)
        return 1;
    int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!got || strlen(line) < 64 || strspn(line, "0123456789abcdef") != 64) {
        snprintf(msg, len, "%s is not a sha256 line (\"<64 hex digits>  %s\")", side,
                 base_name(path));
        return -1;
    }
    if (strncmp(line, hex, 64) != 0) {
        snprintf(msg, len,
                 "%s does not match its hash: its content has sha256 %.16s..., %s says "
                 "%.16s...; the report was changed after it was written",
                 path, hex, side, line);
        return -1;
    }
    return 0;
}

/* ---- ordering ------------------------------------------------------------------------------ */

/* a before b? Failing rows first, by their worst failures (ranks_before: a row whose worst
 * failure is a finite miss before a row of NaN/Inf misses only); then the rest by their worst
 * ratio, a NaN ratio (a case the judge could not rank) first. */
static int worse(const cc_report_row *a, const cc_report_row *b)
{
    if (cc_report_row_failing(a) != cc_report_row_failing(b))
        return cc_report_row_failing(a);
    if (cc_report_row_failing(a))
        return ranks_before(a->worst_failure_nonfinite, a->worst_failure_ratio,
                            b->worst_failure_nonfinite, b->worst_failure_ratio);
    int na = isnan(a->worst_ratio) != 0, nb = isnan(b->worst_ratio) != 0;
    if (na != nb)
        return na;
    return !na && a->worst_ratio > b->worst_ratio;
}

void cc_report_order_worst(const cc_report *rep, size_t *order)
{
    /* insertion sort: stable, and reports have tens to hundreds of rows */
    for (size_t i = 0; i < rep->n; i++) {
        size_t j = i;
        while (j > 0 && worse(&rep->rows[i], &rep->rows[order[j - 1]])) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
}
