/* Text that crosses a trust boundary: a provider's message or description, a case file's bytes.
 * What capcheck writes (results.jsonl, report.json, report.md, JUnit) is valid UTF-8, one line
 * per message, whatever a plugin put in its buffer. */
#ifndef CAPCHECK_TEXT_H
#define CAPCHECK_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* The length (1 to 4) of the well-formed UTF-8 character at s[0..n) (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), or 0 when s does not start with one. */
size_t cc_utf8_char_len(const unsigned char *s, size_t n);
/* The offset of the first byte of s[0..n) that does not start a well-formed character; n when
 * every byte does. */
size_t cc_utf8_valid_prefix(const char *s, size_t n);

/* Make buf[0..cap) a bounded one-line sentence in valid UTF-8, in place: a buffer a provider
 * filled without a terminating NUL is cut at cap - 1; each byte that does not belong to a
 * well-formed UTF-8 character becomes '?', and each control character a space. */
void cc_text_clean(char *buf, size_t cap);

/* snprintf(dst, cap, "%s%s", a, b) without printf (b may be NULL): names and words copied for
 * every case of a run. */
void cc_text_join(char *dst, size_t cap, const char *a, const char *b);

/* FNV-1a 64 of s, continuing from h (0xcbf29ce484222325 to start). */
uint64_t cc_text_fnv1a(uint64_t h, const char *s);

#endif
