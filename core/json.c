#include "core/json.h"

#include "core/text.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

typedef struct {
    const char *s;
    size_t n, i;
    char *msg;
    size_t msg_len;
    int failed;
} parser;

static void fail(parser *p, const char *fmt, ...)
{
    if (p->failed)
        return;
    p->failed = 1;
    if (!p->msg || !p->msg_len)
        return;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(p->msg, p->msg_len, "%s at byte %zu", what, p->i);
}

static void skip_ws(parser *p)
{
    while (p->i < p->n &&
           (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static cc_json *node(parser *p, cc_json_type t)
{
    cc_json *v = calloc(1, sizeof *v);
    if (!v)
        fail(p, "out of memory");
    else
        v->type = t;
    return v;
}

static int hex4(parser *p, unsigned *out)
{
    if (p->i + 4 > p->n) {
        fail(p, "truncated \\u escape");
        return -1;
    }
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p->s[p->i++];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else {
            fail(p, "bad hex digit in \\u escape");
            return -1;
        }
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* At the opening quote; returns a malloc'ed decoded string. */
static char *parse_string(parser *p)
{
    p->i++; /* the quote */
    size_t start = p->i, end = start;
    while (end < p->n && p->s[end] != '"') {
        if (p->s[end] == '\\')
            end++;
        end++;
    }
    if (end >= p->n) {
        fail(p, "unterminated string");
        return NULL;
    }
    /* decoded text is never longer than the source (a \uXXXX is 6 bytes, at most 4 out) */
    char *out = malloc(end - start + 1);
    if (!out) {
        fail(p, "out of memory");
        return NULL;
    }
    size_t o = 0;
    while (p->i < end) {
        unsigned char c = (unsigned char)p->s[p->i];
        if (c < 0x20) {
            fail(p, "control character in a string");
            free(out);
            return NULL;
        }
        if (c >= 0x80) { /* RFC 8259 text is UTF-8: a byte outside a well-formed character is
                            refused, not passed on */
            size_t k = cc_utf8_char_len((const unsigned char *)p->s + p->i, end - p->i);
            if (!k) {
                fail(p, "a string holds a byte (0x%02x) that is not UTF-8", c);
                free(out);
                return NULL;
            }
            memcpy(out + o, p->s + p->i, k);
            o += k;
            p->i += k;
            continue;
        }
        if (c != '\\') {
            out[o++] = (char)c;
            p->i++;
            continue;
        }
        p->i++;
        char e = p->s[p->i++];
        switch (e) {
        case '"': out[o++] = '"'; break;
        case '\\': out[o++] = '\\'; break;
        case '/': out[o++] = '/'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (hex4(p, &cp)) {
                free(out);
                return NULL;
            }
            if (cp >= 0xD800 && cp < 0xDC00 && p->i + 6 <= end && p->s[p->i] == '\\' &&
                p->s[p->i + 1] == 'u') {
                size_t save = p->i;
                p->i += 2;
                unsigned lo;
                if (hex4(p, &lo)) {
                    free(out);
                    return NULL;
                }
                if (lo >= 0xDC00 && lo < 0xE000)
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                else
                    p->i = save;
            }
            if (cp >= 0xD800 && cp < 0xE000) { /* it would decode to text that is not UTF-8 */
                fail(p, "a \\u escape names a lone surrogate (U+%04X)", cp);
                free(out);
                return NULL;
            }
            o += put_utf8(out + o, cp);
            break;
        }
        default:
            p->i--;
            fail(p, "bad escape \\%c", e);
            free(out);
            return NULL;
        }
    }
    out[o] = 0;
    p->i = end + 1;
    return out;
}

static cc_json *parse_value(parser *p, int depth);

static cc_json *parse_container(parser *p, int depth, int object)
{
    cc_json *v = node(p, object ? CC_JSON_OBJECT : CC_JSON_ARRAY);
    if (!v)
        return NULL;
    p->i++; /* [ or { */
    cc_json **tail = &v->child;
    skip_ws(p);
    char close = object ? '}' : ']';
    if (p->i < p->n && p->s[p->i] == close) {
        p->i++;
        return v;
    }
    for (;;) {
        char *key = NULL;
        skip_ws(p);
        if (object) {
            if (p->i >= p->n || p->s[p->i] != '"') {
                fail(p, "expected a member name");
                break;
            }
            if (!(key = parse_string(p)))
                break;
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') {
                free(key);
                fail(p, "expected ':'");
                break;
            }
            p->i++;
        }
        cc_json *item = parse_value(p, depth + 1);
        if (!item) {
            free(key);
            break;
        }
        item->key = key;
        *tail = item;
        tail = &item->next;
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == close) {
            p->i++;
            return v;
        }
        fail(p, "expected ',' or '%c'", close);
        break;
    }
    cc_json_free(v);
    return NULL;
}

static cc_json *parse_number(parser *p)
{
    size_t start = p->i;
    const char *s = p->s;
    size_t i = p->i;
    if (i < p->n && s[i] == '-')
        i++;
    if (i < p->n && s[i] == '0')
        i++;
    else if (i < p->n && s[i] >= '1' && s[i] <= '9')
        while (i < p->n && s[i] >= '0' && s[i] <= '9')
            i++;
    else {
        fail(p, "unexpected character '%c'", i < p->n ? s[i] : '?');
        return NULL;
    }
    if (i < p->n && s[i] == '.') {
        i++;
        if (!(i < p->n && s[i] >= '0' && s[i] <= '9')) {
            p->i = i;
            fail(p, "digit expected after '.'");
            return NULL;
        }
        while (i < p->n && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    if (i < p->n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < p->n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (!(i < p->n && s[i] >= '0' && s[i] <= '9')) {
            p->i = i;
            fail(p, "digit expected in exponent");
            return NULL;
        }
        while (i < p->n && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    cc_json *v = node(p, CC_JSON_NUMBER);
    if (!v)
        return NULL;
    v->text = malloc(i - start + 1);
    if (!v->text) {
        free(v);
        fail(p, "out of memory");
        return NULL;
    }
    memcpy(v->text, s + start, i - start);
    v->text[i - start] = 0;
    v->num = strtod(v->text, NULL);
    p->i = i;
    return v;
}

static cc_json *parse_value(parser *p, int depth)
{
    skip_ws(p);
    if (depth > MAX_DEPTH) {
        fail(p, "nested deeper than %d", MAX_DEPTH);
        return NULL;
    }
    if (p->i >= p->n) {
        fail(p, "unexpected end of text");
        return NULL;
    }
    char c = p->s[p->i];
    if (c == '{' || c == '[')
        return parse_container(p, depth, c == '{');
    if (c == '"') {
        char *s = parse_string(p);
        if (!s)
            return NULL;
        cc_json *v = node(p, CC_JSON_STRING);
        if (!v) {
            free(s);
            return NULL;
        }
        v->text = s;
        return v;
    }
    static const struct {
        const char *word;
        cc_json_type t;
    } words[] = {{"true", CC_JSON_TRUE}, {"false", CC_JSON_FALSE}, {"null", CC_JSON_NULL}};
    for (size_t k = 0; k < 3; k++) {
        size_t len = strlen(words[k].word);
        if (p->n - p->i >= len && memcmp(p->s + p->i, words[k].word, len) == 0) {
            p->i += len;
            return node(p, words[k].t);
        }
    }
    return parse_number(p);
}

cc_json *cc_json_parse(const char *text, size_t len, char *msg, size_t msg_len)
{
    parser p = {text, len, 0, msg, msg_len, 0};
    if (msg && msg_len)
        msg[0] = 0;
    cc_json *v = parse_value(&p, 0);
    if (!v)
        return NULL;
    skip_ws(&p);
    if (p.i != p.n) {
        fail(&p, "text after the value");
        cc_json_free(v);
        return NULL;
    }
    return v;
}

void cc_json_free(cc_json *v)
{
    while (v) {
        cc_json *next = v->next;
        cc_json_free(v->child);
        free(v->key);
        free(v->text);
        free(v);
        v = next;
    }
}

const cc_json *cc_json_get(const cc_json *obj, const char *key)
{
    if (!obj || obj->type != CC_JSON_OBJECT)
        return NULL;
    for (const cc_json *m = obj->child; m; m = m->next)
        if (m->key && strcmp(m->key, key) == 0)
            return m;
    return NULL;
}

int cc_json_string(const cc_json *obj, const char *key, const char **out)
{
    const cc_json *v = cc_json_get(obj, key);
    if (!v || v->type != CC_JSON_STRING)
        return -1;
    *out = v->text;
    return 0;
}

int cc_json_double(const cc_json *obj, const char *key, double *out)
{
    const cc_json *v = cc_json_get(obj, key);
    if (!v)
        return -1;
    if (v->type == CC_JSON_NUMBER) {
        *out = v->num;
        return 0;
    }
    if (v->type == CC_JSON_STRING) {
        if (strcmp(v->text, "NaN") == 0)
            *out = NAN;
        else if (strcmp(v->text, "Infinity") == 0)
            *out = INFINITY;
        else if (strcmp(v->text, "-Infinity") == 0)
            *out = -INFINITY;
        else
            return -1;
        return 0;
    }
    return -1;
}

int cc_json_i64(const cc_json *obj, const char *key, int64_t *out)
{
    const cc_json *v = cc_json_get(obj, key);
    if (!v || v->type != CC_JSON_NUMBER)
        return -1;
    char *end;
    errno = 0;
    long long x = strtoll(v->text, &end, 10);
    if (*end || errno)
        return -1;
    *out = x;
    return 0;
}

int cc_json_u64(const cc_json *obj, const char *key, uint64_t *out)
{
    const cc_json *v = cc_json_get(obj, key);
    if (!v || v->type != CC_JSON_NUMBER || v->text[0] == '-')
        return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v->text, &end, 10);
    if (*end || errno)
        return -1;
    *out = x;
    return 0;
}

int cc_json_bool(const cc_json *obj, const char *key, int *out)
{
    const cc_json *v = cc_json_get(obj, key);
    if (!v || (v->type != CC_JSON_TRUE && v->type != CC_JSON_FALSE))
        return -1;
    *out = v->type == CC_JSON_TRUE;
    return 0;
}

/* 1 when none of the 8 bytes of w needs a look of its own: none below 0x20, none from 0x80
 * (UTF-8), no '"', no '\\' (the classic SWAR tests: a byte below n sets its high bit in
 * (w - n*ones) & ~w, and a zero byte of w ^ c*ones finds c). */
static int plain_bytes(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    uint64_t quote = w ^ (ones * '"'), backslash = w ^ (ones * '\\');
    uint64_t marks = ((w - ones * 0x20) & ~w) | w | ((quote - ones) & ~quote) |
                     ((backslash - ones) & ~backslash);
    return (marks & highs) == 0;
}

void cc_json_put_string(cc_strbuf *b, const char *s)
{
    cc_strbuf_putc(b, '"');
    const char *run = s; /* characters that need no escape go out in one piece */
    const char *end = s + strlen(s);
    for (;; s++) {
        for (uint64_t w; end - s >= 8 && (memcpy(&w, s, 8), plain_bytes(w));) /* a word at a time */
            s += 8;
        unsigned char ch = (unsigned char)*s;
        if (ch >= 0x20 && ch < 0x80 && ch != '"' && ch != '\\')
            continue;
        /* (a length of 4 is safe: the check stops at the string's NUL) */
        size_t k = ch >= 0x80 ? cc_utf8_char_len((const unsigned char *)s, 4) : 0;
        if (k) { /* a well-formed UTF-8 character goes out as it is */
            s += k - 1;
            continue;
        }
        cc_strbuf_put(b, run, (size_t)(s - run));
        if (!ch)
            break;
        if (ch >= 0x80) /* a byte that is not UTF-8: the replacement character */
            cc_strbuf_puts(b, "\\ufffd");
        else if (ch == '\n')
            cc_strbuf_puts(b, "\\n");
        else if (ch < 0x20)
            cc_strbuf_printf(b, "\\u%04x", ch);
        else {
            cc_strbuf_putc(b, '\\');
            cc_strbuf_putc(b, (char)ch);
        }
        run = s + 1;
    }
    cc_strbuf_putc(b, '"');
}

void cc_json_write_string(FILE *f, const char *s)
{
    cc_strbuf b = {0};
    cc_json_put_string(&b, s);
    if (b.failed) /* out of memory: what is there, unescaped, rather than nothing */
        fprintf(f, "\"%s\"", s);
    else
        fwrite(b.data, 1, b.len, f);
    cc_strbuf_free(&b);
}

/* %.17g of a finite x, the same text printf writes, without printf where the exact value is
 * cheap to reach: for 1e-16 <= |x| < 1e17, x = m 2^e (m < 2^53) and k = 16 - X (X the decimal
 * exponent), the 17 digits are m 5^k 2^(e+k) rounded to an integer, half to even as printf
 * rounds (capcheck never changes the rounding mode); m 5^k < 2^128 for k <= 32. Elsewhere
 * printf itself. test_journal checks it against printf on millions of values, ties included. */
size_t cc_format_g17(double x, char out[CC_JSON_NUMBER_MAX])
{
    static const uint64_t five[28] = {
        1ull, 5ull, 25ull, 125ull, 625ull, 3125ull, 15625ull, 78125ull, 390625ull, 1953125ull,
        9765625ull, 48828125ull, 244140625ull, 1220703125ull, 6103515625ull, 30517578125ull,
        152587890625ull, 762939453125ull, 3814697265625ull, 19073486328125ull,
        95367431640625ull, 476837158203125ull, 2384185791015625ull, 11920928955078125ull,
        59604644775390625ull, 298023223876953125ull, 1490116119384765625ull,
        7450580596923828125ull};
    const uint64_t lo = 10000000000000000ull, hi = 100000000000000000ull; /* 10^16, 10^17 */
    double a = fabs(x);
    if (a == 0.0) { /* the commonest number of a record (ratios of what was not checked) */
        size_t len = 0;
        if (signbit(x))
            out[len++] = '-';
        out[len++] = '0';
        out[len] = 0;
        return len;
    }
    if (!(a >= 1e-16 && a < 1e17))
        return (size_t)snprintf(out, 32, "%.17g", x);
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int biased = (int)((bits >> 52) & 0x7ff);
    uint64_t m = (bits & ((1ull << 52) - 1)) | (uint64_t)(biased != 0) << 52;
    int e = biased ? biased - 1075 : -1074;
    /* X = floor(log10 a), guessed from the binary exponent: floor(E log10 2) (78913 / 2^18 is
     * log10 2 closely enough for these exponents), one more where a reaches the next power of
     * ten; the exact digits below correct a guess that is off */
    static const double ten_to[] = {1e-15, 1e-14, 1e-13, 1e-12, 1e-11, 1e-10, 1e-9, 1e-8,
                                    1e-7,  1e-6,  1e-5,  1e-4,  1e-3,  1e-2,  1e-1,  1e0,
                                    1e1,   1e2,   1e3,   1e4,   1e5,   1e6,   1e7,   1e8,
                                    1e9,   1e10,  1e11,  1e12,  1e13,  1e14,  1e15,  1e16,
                                    1e17};
    int binary = ilogb(a), X = (binary * 78913) >> 18; /* -17 <= X <= 16 in this range */
    if (X + 1 >= -15 && X + 1 <= 17 && a >= ten_to[X + 1 + 15]) /* (-16: the loop corrects) */
        X++;
    uint64_t q = 0;
    for (int tries = 0;; tries++) {
        int k = 16 - X;
        if (k < 0 || k > 32 || tries == 3)
            return (size_t)snprintf(out, 32, "%.17g", x);
        unsigned __int128 p = (unsigned __int128)m *
                              (k < 28 ? five[k] : (unsigned __int128)five[27] * five[k - 27]);
        int s = e + k, up = 0;
        uint64_t head;
        if (s >= 0) {
            head = (uint64_t)(p << s); /* an integer below 10^18 here */
        } else {
            int t = -s; /* <= 127 in this range */
            unsigned __int128 h = p >> t, rem = p - (h << t), half = (unsigned __int128)1 << (t - 1);
            head = (uint64_t)h;
            up = rem > half || (rem == half && (head & 1));
        }
        if (head >= hi || head < lo) { /* the guess was one off */
            X += head >= hi ? 1 : -1;
            continue;
        }
        q = head + (uint64_t)up;
        if (q == hi) { /* rounded up to the next power of ten */
            q = lo;
            X++;
        }
        break;
    }
    char d[17];
    for (int i = 16; i >= 0; i--, q /= 10)
        d[i] = (char)('0' + q % 10);
    int last = 16; /* %g drops trailing zeros */
    while (last > 0 && d[last] == '0')
        last--;
    char *o = out;
    if (signbit(x))
        *o++ = '-';
    if (X >= -4 && X < 17) { /* fixed notation */
        if (X < 0) {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -X - 1; i++)
                *o++ = '0';
        }
        for (int i = 0; i <= (X < 0 ? last : X); i++) {
            *o++ = d[i];
            if (i == X && last > X)
                *o++ = '.';
        }
        for (int i = X + 1; X >= 0 && i <= last; i++)
            *o++ = d[i];
    } else { /* d.ddde+XX */
        *o++ = d[0];
        if (last > 0)
            *o++ = '.';
        for (int i = 1; i <= last; i++)
            *o++ = d[i];
        int ax = X < 0 ? -X : X;
        *o++ = 'e';
        *o++ = X < 0 ? '-' : '+';
        if (ax >= 100)
            *o++ = (char)('0' + ax / 100);
        *o++ = (char)('0' + ax / 10 % 10);
        *o++ = (char)('0' + ax % 10);
    }
    *o = 0;
    return (size_t)(o - out);
}

size_t cc_json_format_number(double x, char out[CC_JSON_NUMBER_MAX])
{
    const char *word = isnan(x) ? "\"NaN\"" : isinf(x) ? (x > 0 ? "\"Infinity\"" : "\"-Infinity\"") : NULL;
    if (word) {
        size_t n = strlen(word);
        memcpy(out, word, n + 1);
        return n;
    }
    return cc_format_g17(x, out);
}

void cc_json_put_number(cc_strbuf *b, double x)
{
    char text[CC_JSON_NUMBER_MAX];
    cc_strbuf_put(b, text, cc_json_format_number(x, text));
}

void cc_json_write_number(FILE *f, double x)
{
    char text[CC_JSON_NUMBER_MAX];
    fwrite(text, 1, cc_json_format_number(x, text), f);
}
