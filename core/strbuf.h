/* core/strbuf.h — text built in memory: a byte buffer that grows, for records written many times
 * a second (results.jsonl's lines), where a FILE (open_memstream, fprintf) costs more than the
 * text. An append that runs out of memory marks the buffer failed and is otherwise ignored;
 * the writer checks `failed` once at the end. */
#ifndef CAPCHECK_CORE_STRBUF_H
#define CAPCHECK_CORE_STRBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *data; /* NUL-terminated once anything was appended */
    size_t len, cap;
    int failed;
} cc_strbuf;

/* Empty the text, keeping the memory for the next one. */
void cc_strbuf_clear(cc_strbuf *b);
void cc_strbuf_free(cc_strbuf *b);
void cc_strbuf_put(cc_strbuf *b, const char *s, size_t n);
void cc_strbuf_puts(cc_strbuf *b, const char *s);
/* A string literal, its length known when compiled (no strlen: records append dozens a line). */
#define cc_strbuf_lit(b, lit) cc_strbuf_put((b), "" lit, sizeof(lit) - 1)
void cc_strbuf_putc(cc_strbuf *b, char ch);
void cc_strbuf_put_i64(cc_strbuf *b, int64_t v);
/* v as printf's %.6f writes it (the seconds of every record), without printf for 0 <= v < 2^33 */
void cc_strbuf_put_fixed6(cc_strbuf *b, double v);
void cc_strbuf_printf(cc_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
