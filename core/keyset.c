#include "core/keyset.h"

#include <stdlib.h>
#include <string.h>

#include "core/grow.h"

uint64_t cc_fnv1a64(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

void cc_keyset_free(cc_keyset *s)
{
    free(s->slot);
    free(s->hash);
    free(s->offset);
    free(s->text);
    memset(s, 0, sizeof *s);
}

/* The table at twice its size (first: 1024 slots), every key placed again. 0, or -1. */
static int rehash(cc_keyset *s)
{
    size_t cap = s->cap ? 2 * s->cap : 1024;
    size_t *slot = calloc(cap, sizeof *slot);
    if (!slot)
        return -1;
    for (size_t id = 0; id < s->n; id++)
        for (size_t k = (size_t)s->hash[id] & (cap - 1);; k = (k + 1) & (cap - 1))
            if (!slot[k]) {
                slot[k] = id + 1;
                break;
            }
    free(s->slot);
    s->slot = slot;
    s->cap = cap;
    return 0;
}

/* Room for one more key of len bytes (and its offset after it). 0, or -1. */
static int make_room(cc_keyset *s, size_t len)
{
    if (2 * (s->n + 1) > s->cap && rehash(s))
        return -1;
    uint64_t *hash = cc_grow(s->hash, s->n, &s->hash_cap, sizeof *hash, 256);
    if (!hash)
        return -1;
    s->hash = hash;
    size_t *offset = cc_grow(s->offset, s->n + 1, &s->offset_cap, sizeof *offset, 256);
    if (!offset)
        return -1;
    s->offset = offset;
    while (s->text_len + len > s->text_cap) {
        size_t cap = s->text_cap ? 2 * s->text_cap : 1 << 16;
        char *text = realloc(s->text, cap);
        if (!text)
            return -1;
        s->text = text;
        s->text_cap = cap;
    }
    return 0;
}

long cc_keyset_add(cc_keyset *s, const char *key, size_t len, int *added)
{
    *added = 0;
    uint64_t h = cc_fnv1a64(key, len);
    for (size_t k = s->cap ? (size_t)h & (s->cap - 1) : 0; s->cap; k = (k + 1) & (s->cap - 1)) {
        size_t id = s->slot[k];
        if (!id)
            break;
        id--;
        if (s->hash[id] == h && s->offset[id + 1] - s->offset[id] == len &&
            memcmp(s->text + s->offset[id], key, len) == 0)
            return (long)id;
    }
    if (make_room(s, len))
        return -1;
    size_t id = s->n;
    if (!s->n)
        s->offset[0] = 0;
    memcpy(s->text + s->text_len, key, len);
    s->text_len += len;
    s->hash[id] = h;
    s->offset[id + 1] = s->text_len;
    s->n++;
    for (size_t k = (size_t)h & (s->cap - 1);; k = (k + 1) & (s->cap - 1))
        if (!s->slot[k]) {
            s->slot[k] = id + 1;
            break;
        }
    *added = 1;
    return (long)id;
}
