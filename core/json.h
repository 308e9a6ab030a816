/* A small JSON reader (RFC 8259) for what capcheck writes: results.jsonl records, run.json,
 * reports. It builds a tree; numbers keep their text so 64-bit integers survive exactly. */
#ifndef CAPCHECK_JSON_H
#define CAPCHECK_JSON_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "core/strbuf.h"

typedef enum {
    CC_JSON_NULL = 0,
    CC_JSON_FALSE,
    CC_JSON_TRUE,
    CC_JSON_NUMBER,
    CC_JSON_STRING,
    CC_JSON_ARRAY,
    CC_JSON_OBJECT
} cc_json_type;

typedef struct cc_json {
    cc_json_type type;
    char *key;   /* member name when the parent is an object, else NULL */
    char *text;  /* STRING: the decoded value (UTF-8, NUL-terminated); NUMBER: its source text */
    double num;  /* NUMBER */
    struct cc_json *child, *next; /* ARRAY/OBJECT: first element; siblings */
} cc_json;

/* Parse exactly one value from text[0..len) (surrounding whitespace allowed). NULL with a
 * sentence (naming the byte offset) in msg when the text is not one well-formed value. */
cc_json *cc_json_parse(const char *text, size_t len, char *msg, size_t msg_len);
void cc_json_free(cc_json *v);

/* Member `key` of an object (NULL when absent or not an object). */
const cc_json *cc_json_get(const cc_json *obj, const char *key);
/* Typed access: 0 on success, -1 when absent or of another type. A number may also be read
 * from the strings "NaN", "Infinity", "-Infinity" (how capcheck writes non-finite values). */
int cc_json_string(const cc_json *obj, const char *key, const char **out);
int cc_json_double(const cc_json *obj, const char *key, double *out);
int cc_json_i64(const cc_json *obj, const char *key, int64_t *out);
int cc_json_u64(const cc_json *obj, const char *key, uint64_t *out);
int cc_json_bool(const cc_json *obj, const char *key, int *out);

/* Writing: a JSON string literal (quotes, backslashes and control characters escaped), and a
 * number as capcheck writes one (%.17g's text, made without printf where it can be; NaN and
 * +-Inf as the strings "NaN", "Infinity", "-Infinity", which cc_json_double reads back), to a
 * FILE or appended to a cc_strbuf. */
#define CC_JSON_NUMBER_MAX 32
void cc_json_write_string(FILE *f, const char *s);
void cc_json_write_number(FILE *f, double x);
void cc_json_put_string(cc_strbuf *b, const char *s);
void cc_json_put_number(cc_strbuf *b, double x);
/* The number's text into out (NUL-terminated); its length. */
size_t cc_json_format_number(double x, char out[CC_JSON_NUMBER_MAX]);
/* printf's %.17g of any double (nan, inf too) into out; its length. */
size_t cc_format_g17(double x, char out[CC_JSON_NUMBER_MAX]);

#endif
