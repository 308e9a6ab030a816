#include "core/strbuf.h"

#include <math.h>
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

void cc_strbuf_put_fixed6(cc_strbuf *b, double v)
{
    if (signbit(v) || !(v < 0x1p33)) { /* negative, -0, not finite or huge: printf's own way */
        cc_strbuf_printf(b, "%.6f", v);
        return;
    }
    /* v = f 2^e with f in [1/2, 1), so v = m 2^(e-53) exactly (m = f 2^53 < 2^53) and
     * v 10^6 = m 15625 2^(e-47) = p / 2^shift (p < 2^67): its nearest whole number, ties to
     * even as printf rounds in the default mode, in 128-bit integers */
    int e;
    double f = frexp(v, &e);
    uint64_t m = (uint64_t)ldexp(f, 53);
    unsigned __int128 p = (unsigned __int128)m * 15625u;
    int shift = 47 - e;
    uint64_t q;
    if (shift <= 0) {
        q = (uint64_t)(p << -shift);
    } else if (shift > 100) { /* p < 2^67: below a half */
        q = 0;
    } else {
        unsigned __int128 half = (unsigned __int128)1 << (shift - 1), rest = p & (2 * half - 1);
        q = (uint64_t)(p >> shift);
        q += rest > half || (rest == half && (q & 1));
    }
    char digits[REF_DECIMAL_MAX], frac[8];
    cc_strbuf_puts(b, ref_decimal_u64(digits, q / 1000000));
    uint64_t micro = q % 1000000;
    frac[0] = '.';
    for (int k = 6; k >= 1; k--, micro /= 10)
        frac[k] = (char)('0' + micro % 10);
    cc_strbuf_put(b, frac, 7);
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
