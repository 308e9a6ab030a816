#include "core/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference/ref.h"

void cc_strbuf_clear(cc_strbuf *b)
{
    b->len = 0;
    b->failed = 0;
    if (b->data)
        b->data[0] = 0;
}

void cc_strbuf_free(cc_strbuf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* Room for n more bytes and the NUL; 0, or -1 (failed) when memory runs out. */
static int reserve(cc_strbuf *b, size_t n)
{
    if (b->failed)
        return -1;
    if (b->len + n + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1)
        cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
        b->failed = 1;
        return -1;
    }
    b->data = d;
    b->cap = cap;
    return 0;
}

void cc_strbuf_put(cc_strbuf *b, const char *s, size_t n)
{
    if (reserve(b, n))
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

void cc_strbuf_puts(cc_strbuf *b, const char *s)
{
    cc_strbuf_put(b, s, strlen(s));
}

void cc_strbuf_putc(cc_strbuf *b, char ch)
{
    cc_strbuf_put(b, &ch, 1);
}

void cc_strbuf_put_i64(cc_strbuf *b, int64_t v)
{
    char digits[REF_DECIMAL_MAX];
    cc_strbuf_puts(b, ref_decimal_i64(digits, v));
}

void cc_strbuf_printf(cc_strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        cc_strbuf_put(b, small, (size_t)n);
        return;
    }
    if (reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}
