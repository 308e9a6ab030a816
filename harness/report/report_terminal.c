#include "harness/report/report_terminal.h"

#include <stdlib.h>
#include <string.h>

/* "softmax f32", with the platform when the run has several, and the device when not the CPU. */
static void row_label(const cc_report *rep, const cc_report_row *row, char *buf, size_t n)
{
    snprintf(buf, n, "%s %s%s%s%s%s", row->op, cc_dtype_name(row->dtype),
             rep->provenance.n_platforms > 1 && row->platform[0] ? " " : "",
             rep->provenance.n_platforms > 1 ? row->platform : "",
             row->device != CC_CPU ? " " : "", row->device != CC_CPU ? cc_device_name(row->device) : "");
}

static void print_failing_rows(const cc_report *rep, const size_t *order, size_t failing,
                               const char *dir, FILE *out)
{
    fprintf(out, "capcheck: %zu of %zu op x dtype rows did not pass; the worst case of each "
                 "reruns with:\n",
            failing, rep->n);
    size_t listed = 0;
    for (size_t k = 0; k < rep->n && listed < CC_TERMINAL_ROWS; k++) {
        const cc_report_row *row = &rep->rows[order[k]];
        if (!cc_report_row_failing(row))
            continue;
        char label[128], counts[200], cmd[2600];
        row_label(rep, row, label, sizeof label);
        cc_report_row_not_passed(row, counts, sizeof counts);
        cc_repro_command_on(&rep->repro, row->worst_failure, row->platform,
                            rep->provenance.platforms, rep->provenance.n_platforms, cmd,
                            sizeof cmd);
        fprintf(out, "  %s: %ld of %ld did not pass (%s): %s\n", label,
                row->cases - row->counts[CC_RES_PASS] - row->counts[CC_RES_UNSUPPORTED],
                row->cases, counts, cmd);
        listed++;
    }
    if (listed < failing)
        fprintf(out, "  and %zu more rows: %s/report.md lists every one\n", failing - listed, dir);
}

static void print_unsupported_rows(const cc_report *rep, const size_t *order, size_t unsupported,
                                   FILE *out)
{
    fprintf(out, "capcheck: unsupported (never a pass) in %zu row%s:", unsupported,
            unsupported == 1 ? "" : "s");
    size_t named = 0;
    for (size_t k = 0; k < rep->n && named < CC_TERMINAL_UNSUPPORTED; k++) {
        const cc_report_row *row = &rep->rows[order[k]];
        if (!row->counts[CC_RES_UNSUPPORTED])
            continue;
        char label[128];
        row_label(rep, row, label, sizeof label);
        fprintf(out, "%s %s %ld of %ld", named++ ? "," : "", label,
                row->counts[CC_RES_UNSUPPORTED], row->cases);
    }
    if (named < unsupported)
        fprintf(out, " and %zu more", unsupported - named);
    fputc('\n', out);
}

void cc_report_print_rows(const cc_report *rep, const char *dir, FILE *out)
{
    size_t failing = 0, unsupported = 0;
    for (size_t i = 0; i < rep->n; i++) {
        failing += cc_report_row_failing(&rep->rows[i]) != 0;
        unsupported += rep->rows[i].counts[CC_RES_UNSUPPORTED] > 0;
    }
    size_t *order = malloc((rep->n ? rep->n : 1) * sizeof *order);
    if (!order)
        return;
    cc_report_order_worst(rep, order);
    if (failing)
        print_failing_rows(rep, order, failing, dir, out);
    if (unsupported)
        print_unsupported_rows(rep, order, unsupported, out);
    free(order);
}
