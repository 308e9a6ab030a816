#include "harness/report.h"

#include <stdlib.h>
#include <string.h>

#include "harness/dtype.h"
#include "harness/json.h"
#include "harness/report_out.h"

void cc_result_write_json(FILE *f, const cc_result *r)
{
    fputs("{\"case\":", f);
    cc_json_write_string(f, r->line);
    fputs(",\"op\":", f);
    cc_json_write_string(f, r->op);
    fprintf(f, ",\"dtype\":\"%s\",\"device\":\"%s\",\"layout\":\"%s\",\"provider\":",
            cc_dtype_name(r->dtype), cc_device_name(r->device), cc_layout_name(r->layout));
    cc_json_write_string(f, r->provider);
    fputs(",\"vjp_mode\":", f);
    cc_json_write_string(f, r->vjp_mode);
    fprintf(f, ",\"status\":\"%s\",\"checked_fwd\":%s,\"checked_vjp\":%s,\"fwd_ratio\":",
            cc_result_status_name(r->status), r->checked_fwd ? "true" : "false",
            r->checked_vjp ? "true" : "false");
    cc_json_write_number(f, r->fwd_ratio);
    fputs(",\"vjp_ratio\":", f);
    cc_json_write_number(f, r->vjp_ratio);
    fputs(",\"worst_ratio\":", f);
    cc_json_write_number(f, r->worst_ratio);
    if (r->worst_output[0]) {
        fputs(",\"worst\":{\"output\":", f);
        cc_json_write_string(f, r->worst_output);
        fputs(",\"index\":", f);
        cc_json_write_string(f, r->worst_index);
        fputs(",\"expected\":", f);
        cc_json_write_number(f, r->expected);
        fputs(",\"got\":", f);
        cc_json_write_number(f, r->got);
        fputs(",\"bound\":", f);
        cc_json_write_number(f, r->bound);
        fputs(",\"inputs\":", f);
        cc_json_write_string(f, r->worst_inputs);
        fputc('}', f);
    }
    if (r->message[0]) {
        fputs(",\"message\":", f);
        cc_json_write_string(f, r->message);
    }
    fprintf(f, ",\"elements\":%lld,\"seconds\":%.6f}\n", (long long)r->elements, r->seconds);
}

/* ---- aggregation --------------------------------------------------------------------------- */

void cc_report_init(cc_report *rep)
{
    memset(rep, 0, sizeof *rep);
    cc_sha256_init(&rep->digest);
}

void cc_report_free(cc_report *rep)
{
    free(rep->rows);
    memset(rep, 0, sizeof *rep);
}

static cc_report_row *find_row(cc_report *rep, const cc_result *r)
{
    for (size_t i = 0; i < rep->n; i++) {
        cc_report_row *row = &rep->rows[i];
        if (strcmp(row->op, r->op) == 0 && row->dtype == r->dtype && row->device == r->device &&
            strcmp(row->provider, r->provider) == 0)
            return row;
    }
    if (rep->n == rep->cap) {
        size_t cap = rep->cap ? 2 * rep->cap : 32;
        cc_report_row *rows = realloc(rep->rows, cap * sizeof *rows);
        if (!rows)
            return NULL;
        rep->rows = rows;
        rep->cap = cap;
    }
    cc_report_row *row = &rep->rows[rep->n++];
    memset(row, 0, sizeof *row);
    snprintf(row->op, sizeof row->op, "%s", r->op);
    snprintf(row->provider, sizeof row->provider, "%s", r->provider);
    snprintf(row->vjp_mode, sizeof row->vjp_mode, "%s", r->vjp_mode);
    row->dtype = r->dtype;
    row->device = r->device;
    return row;
}

int cc_report_add(cc_report *rep, const cc_result *r)
{
    cc_report_row *row = find_row(rep, r);
    if (!row)
        return -1;
    row->cases++;
    row->counts[r->status]++;
    cc_results_digest_add(&rep->digest, r);
    rep->cases++;
    rep->counts[r->status]++;
    if (!row->worst_line[0] || r->worst_ratio > row->worst_ratio) {
        row->worst_ratio = r->worst_ratio;
        snprintf(row->worst_line, sizeof row->worst_line, "%s", r->line);
    }
    if (r->status != CC_RES_PASS && !row->first_failure[0]) {
        snprintf(row->first_failure, sizeof row->first_failure, "%s", r->line);
        snprintf(row->first_failure_msg, sizeof row->first_failure_msg, "%s", r->message);
    }
    return 0;
}

/* ---- writers ------------------------------------------------------------------------------- */

typedef void (*writer_fn)(const cc_report *rep, FILE *f);

static int write_atomically(const char *path, writer_fn fn, const cc_report *rep)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    fn(rep, f);
    int bad = ferror(f);
    if (fclose(f) || bad || rename(tmp, path)) {
        remove(tmp);
        return -1;
    }
    return 0;
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
    fprintf(f, ",\n  \"base_seed\": %llu,\n  \"cases\": %ld,\n", rep->base_seed, rep->cases);
    cc_provenance_write_json(f, &rep->provenance, rep->provider_description, rep->base_seed,
                             &rep->digest);
    fputs("  \"totals\": {", f);
    for (int s = 0; s < CC_RES_COUNT; s++)
        fprintf(f, "%s\"%s\": %ld", s ? ", " : "", cc_result_status_name((cc_result_status)s),
                rep->counts[s]);
    fputs("},\n  \"rows\": [\n", f);
    for (size_t i = 0; i < rep->n; i++) {
        const cc_report_row *row = &rep->rows[i];
        const ref_op *op = ref_op_find(row->op);
        fputs("    {\"op\": ", f);
        cc_json_write_string(f, row->op);
        fprintf(f, ", \"report_name\": \"%s\", \"dtype\": \"%s\", \"device\": \"%s\", \"provider\": ",
                op ? op->report_name : row->op, cc_dtype_name(row->dtype),
                cc_device_name(row->device));
        cc_json_write_string(f, row->provider);
        fputs(", \"vjp_mode\": ", f);
        cc_json_write_string(f, row->vjp_mode);
        fprintf(f, ", \"cases\": %ld", row->cases);
        for (int s = 0; s < CC_RES_COUNT; s++)
            fprintf(f, ", \"%s\": %ld", cc_result_status_name((cc_result_status)s),
                    row->counts[s]);
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
        if (op && op->note) {
            fputs(", \"contract_note\": ", f);
            cc_json_write_string(f, op->note);
        }
        fprintf(f, "}%s\n", i + 1 < rep->n ? "," : "");
    }
    fputs("  ]\n}\n", f);
}

static void write_markdown(const cc_report *rep, FILE *f)
{
    fprintf(f, "# capcheck report\n\n");
    fprintf(f, "- capcheck %s; provider: %s\n- cases: %s; base seed %llu; %ld cases\n",
            CC_VERSION, rep->provider_description, rep->case_files, rep->base_seed, rep->cases);
    fprintf(f, "- totals:");
    for (int s = 0; s < CC_RES_COUNT; s++)
        fprintf(f, " %s %ld%s", cc_result_status_name((cc_result_status)s), rep->counts[s],
                s + 1 < CC_RES_COUNT ? "," : "\n");
    fprintf(f, "- timing: %.2f s wall for the %ld cases this session ran%s\n", rep->wall_seconds,
            rep->session_cases, rep->resumed ? " (a resumed run)" : "");
    if (rep->provenance.present)
        fprintf(f, "- built from commit %s; cpu %s\n", rep->provenance.git_commit,
                rep->provenance.cpu_model);
    fprintf(f, "\nThe bound ratio is error / (c_op * u(dtype) * m_i + floor): at most 1 passes.\n");
    size_t *order = malloc((rep->n ? rep->n : 1) * sizeof *order);
    if (!order)
        return;
    cc_report_order_worst(rep, order); /* worst first: rows that did not pass, then by ratio */
    int any = 0;
    for (size_t k = 0; k < rep->n; k++) {
        const cc_report_row *row = &rep->rows[order[k]];
        if (!row->first_failure[0])
            continue;
        if (!any++)
            fprintf(f, "\n## Not passing (first case of each row; rerun with capcheck repro)\n\n");
        fprintf(f, "- %s %s: %s\n  `capcheck repro '%s'`\n", row->op, cc_dtype_name(row->dtype),
                row->first_failure_msg, row->first_failure);
    }
    fprintf(f, "\n## Rows, worst first\n\n");
    fprintf(f, "| op | dtype | device | provider | vjpMode | cases | passed | failed | "
               "unsupported | errors | worst ratio | worst case |\n");
    fprintf(f, "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---|\n");
    for (size_t k = 0; k < rep->n; k++) {
        const cc_report_row *row = &rep->rows[order[k]];
        fprintf(f, "| %s | %s | %s | %s | %s | %ld | %ld | %ld | %ld | %ld | %.3g | `%s` |\n",
                row->op, cc_dtype_name(row->dtype), cc_device_name(row->device), row->provider,
                row->vjp_mode, row->cases, row->counts[CC_RES_PASS], row->counts[CC_RES_FAIL],
                row->counts[CC_RES_UNSUPPORTED],
                row->counts[CC_RES_ERROR] + row->counts[CC_RES_CRASH] +
                    row->counts[CC_RES_TIMEOUT],
                row->worst_ratio, row->worst_line);
    }
    free(order);
    any = 0;
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
