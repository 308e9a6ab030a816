/* libFuzzer target: the results.jsonl reader (harness/report/results_read.c over core/json.c).
 *
 * Properties: cc_json_parse and cc_result_parse_line never crash, leak or trip UBSan; a record
 * that reads is written back by cc_result_write_json, and that line reads again and writes
 * identically (write . read is a fixpoint). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "harness/report/report.h"
#include "harness/report/results_read.h"

/* cc_result_write_json's line for r (caller frees); NULL when out of memory. */
static char *write_line(const cc_result *r, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        return NULL;
    cc_result_write_json(f, r);
    fclose(f);
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char msg[512];
    cc_json *j = cc_json_parse((const char *)data, size, msg, sizeof msg);
    cc_json_free(j);

    cc_result r;
    int64_t index;
    if (cc_result_parse_line((const char *)data, size, &r, &index, msg, sizeof msg) != 0)
        return 0;
    size_t n1, n2;
    char *a = write_line(&r, &n1);
    if (!a)
        return 0;
    cc_result r2;
    if (cc_result_parse_line(a, n1, &r2, &index, msg, sizeof msg) != 0) {
        fprintf(stderr, "a record written back does not read: %s\n  %s", msg, a);
        abort();
    }
    char *b = write_line(&r2, &n2);
    if (b && (n1 != n2 || memcmp(a, b, n1) != 0)) {
        fprintf(stderr, "write(read(write(r))) differs:\n  %s  %s", a, b);
        abort();
    }
    free(a);
    free(b);
    return 0;
}
