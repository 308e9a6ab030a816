/* Reading results back: one results.jsonl record (as cc_result_write_json wrote it, optionally
 * with the journal's leading "index") into a cc_result. Every field the writer emits is read,
 * so write -> read -> write gives the same line (the per-case "seconds" keeps its 6 decimals). */
#ifndef CAPCHECK_RESULTS_READ_H
#define CAPCHECK_RESULTS_READ_H

#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "harness/run/runner.h"

/* From a parsed record. Returns 0, or -1 with a sentence in msg naming the field. */
int cc_result_from_json(const cc_json *obj, cc_result *r, char *msg, size_t msg_len);
/* Parse one line (no newline needed). *index receives the record's "index", or -1 when the
 * record has none. Returns 0, or -1 with a sentence in msg. */
int cc_result_parse_line(const char *line, size_t len, cc_result *r, int64_t *index, char *msg,
                         size_t msg_len);

/* Names back to enums; -1 when unknown. */
int cc_result_status_parse(const char *s, cc_result_status *out);
int cc_layout_parse(const char *s, cc_layout *out);

#endif
