/* core/keyset.h — a set of byte strings, each numbered in the order it was first added (0, 1,
 * ...): "have I seen this text before?" asked a hundred thousand times (a run's case identities),
 * exactly (keys are compared byte for byte, never by hash alone). FNV-1a 64 into an open-addressing
 * table, the keys copied into one growing buffer. Calls nothing above libc. */
#ifndef CAPCHECK_CORE_KEYSET_H
#define CAPCHECK_CORE_KEYSET_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    size_t *slot;        /* cap entries: a key's number + 1, or 0 for an empty slot */
    size_t cap;          /* a power of two, at least twice n */
    uint64_t *hash;      /* per key */
    size_t *offset;      /* per key, and one more: where it starts in text (its end: the next) */
    size_t n, hash_cap, offset_cap;
    char *text;
    size_t text_len, text_cap;
} cc_keyset;

/* FNV-1a 64 of n bytes. */
uint64_t cc_fnv1a64(const void *data, size_t n);

/* The number of key (len bytes) in the set, added when it was not there: *added is then 1, else
 * 0. -1 (the set unchanged) when memory runs out. A zeroed cc_keyset is an empty set. */
long cc_keyset_add(cc_keyset *s, const char *key, size_t len, int *added);
void cc_keyset_free(cc_keyset *s);

#endif
