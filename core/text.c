#include "core/text.h"

#include <string.h>

size_t cc_utf8_char_len(const unsigned char *s, size_t n)
{
    if (n == 0)
        return 0;
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xBF; /* the range of the second byte */
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0; /* no overlong 3-byte forms */
        if (c == 0xED)
            hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90; /* no overlong 4-byte forms */
        if (c == 0xF4)
            hi = 0x8F; /* nothing above U+10FFFF */
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++)
        if (s[k] < 0x80 || s[k] > 0xBF)
            return 0;
    return len;
}

size_t cc_utf8_valid_prefix(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t k = cc_utf8_char_len((const unsigned char *)s + i, n - i);
        if (!k)
            return i;
        i += k;
    }
    return n;
}

void cc_text_clean(char *buf, size_t cap)
{
    if (!buf || !cap)
        return;
    if (!memchr(buf, 0, cap))
        buf[cap - 1] = 0;
    unsigned char *s = (unsigned char *)buf;
    size_t n = strlen(buf);
    for (size_t i = 0; i < n;) {
        size_t k = cc_utf8_char_len(s + i, n - i);
        if (!k) {
            s[i++] = '?';
            continue;
        }
        if (k == 1 && (s[i] < 0x20 || s[i] == 0x7F))
            s[i] = ' ';
        i += k;
    }
}

void cc_text_join(char *dst, size_t cap, const char *a, const char *b)
{
    if (!cap)
        return;
    size_t used = 0;
    for (const char *part = a; part; part = part == a ? b : NULL) {
        size_t len = strlen(part), k = len < cap - 1 - used ? len : cap - 1 - used;
        memcpy(dst + used, part, k);
        used += k;
    }
    dst[used] = 0;
}

uint64_t cc_text_fnv1a(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}
