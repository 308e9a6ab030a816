/* Guarded buffers (the placements, what they catch and the handler's protocol are in guard.h). */
#define _GNU_SOURCE /* REG_ERR in ucontext_t: whether a fault was a read or a write (x86-64) */
#include "core/guard.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "core/bulk.h"
#include "core/text.h"

/* The state the fault handler reads (guard.h says why it is static). */
static const cc_guard_set *volatile armed_set;
static cc_guard_note *volatile fault_note;
static struct sigaction previous[2]; /* SIGSEGV, SIGBUS as they were before cc_guard_install */

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

#define ALIAS_MAX_BYTES ((size_t)4 << 20) /* inputs below 4 MiB get a writable second view */
#define CANARY 0xa5 /* every slack byte: a byte pattern no float of a buffer's own is made of */

/* The first and the last slack byte that no longer holds the canary; 0 when all do. */
static int spoiled_span(const unsigned char *p, size_t n, size_t *first, size_t *last)
{
    /* intact slack, nearly always: every byte is the first one and the first is the canary
     * (one vectorized memcmp of the slack against itself shifted by a byte); the byte-exact
     * span only when not */
    if (n == 0 || (p[0] == CANARY && memcmp(p, p + 1, n - 1) == 0))
        return 0;
    uint64_t word;
    memset(&word, CANARY, sizeof word);
    size_t k = 0, lo = n, hi = 0;
    for (; k + 8 <= n; k += 8) { /* word at a time: the slack is up to a page per buffer */
        uint64_t w;
        memcpy(&w, p + k, 8);
        if (w == word)
            continue;
        for (size_t j = k; j < k + 8; j++)
            if (p[j] != CANARY) {
                lo = j < lo ? j : lo;
                hi = j;
            }
    }
    for (; k < n; k++)
        if (p[k] != CANARY) {
            lo = k < lo ? k : lo;
            hi = k;
        }
    *first = lo;
    *last = hi;
    return lo < n;
}

void cc_guard_set_init(cc_guard_set *s, int guarded)
{
    memset(s, 0, sizeof *s);
    s->guarded = guarded;
    s->call = "call";
    s->repeats = 1;
}

/* The slot of the cache holding a mapping of map_len bytes of the kind asked for (aliased: an
 * input's two views), taken out of the cache; -1 when none does. */
static int take_cached(cc_guard_cache *c, size_t map_len, int aliased, cc_guarded *b,
                       size_t *canary_lo, size_t *canary_hi)
{
    for (int k = 0; c && k < c->n; k++)
        if (c->slot[k].map_len == map_len && (c->slot[k].alias != NULL) == aliased) {
            b->map = c->slot[k].map;
            b->alias = c->slot[k].alias;
            b->readonly = c->slot[k].readonly;
            *canary_lo = c->slot[k].canary_lo;
            *canary_hi = c->slot[k].canary_hi;
            c->slot[k] = c->slot[--c->n];
            return 0;
        }
    return -1;
}

/* A fresh input mapping of `pages` data pages between two PROT_NONE guard pages, read-only,
 * and a second, writable mapping of the same pages (a memfd mapped twice); -1 where that cannot
 * be had (then the caller falls back to one mapping and mprotect). */
static int map_aliased(size_t pages, size_t pg, cc_guarded *b)
{
#if defined(__linux__) && defined(MFD_CLOEXEC)
    int fd = memfd_create("capcheck-input", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    void *map = MAP_FAILED, *alias = MAP_FAILED;
    if (ftruncate(fd, (off_t)(pages * pg)) == 0) {
        map = mmap(NULL, (pages + 2) * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (map != MAP_FAILED &&
            mmap((unsigned char *)map + pg, pages * pg, PROT_READ, MAP_SHARED | MAP_FIXED, fd,
                 0) != MAP_FAILED)
            alias = mmap(NULL, pages * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    close(fd);
    if (alias == MAP_FAILED) {
        if (map != MAP_FAILED)
            munmap(map, (pages + 2) * pg);
        return -1;
    }
    b->map = map;
    b->alias = alias;
    b->readonly = 1;
    return 0;
#else
    (void)pages, (void)pg, (void)b;
    return -1;
#endif
}

/* Where capcheck writes the byte at p of buffer b's data pages: its second view, if it has one. */
static unsigned char *writable(const cc_guarded *b, unsigned char *p)
{
    return b->alias ? b->alias + (p - ((unsigned char *)b->map + page_size())) : p;
}

/* Unmap a mapping of map_len bytes and its second view, if any (its data pages' worth). */
static void unmap(void *map, size_t map_len, void *alias)
{
    if (alias)
        munmap(alias, map_len - 2 * page_size());
    munmap(map, map_len);
}

/* A buffer of the set; aliased: an input's (see cc_guard_alloc_input). Returns where capcheck
 * writes it. */
static void *alloc_buffer(cc_guard_set *s, size_t bytes, const char *name, int aliased)
{
    if (s->n >= CC_GUARD_MAX_BUFFERS)
        return NULL;
    cc_guarded *b = &s->b[s->n];
    memset(b, 0, sizeof *b);
    cc_text_join(b->name, sizeof b->name, name, NULL);
    b->bytes = bytes;
    if (!s->guarded) { /* bulk memory: a large case's buffers stay mapped between cases */
        b->data = cc_alloc_big(bytes > 0 ? bytes : 1);
        if (!b->data)
            return NULL;
        s->n++;
        return b->data;
    }
    size_t pg = page_size(), pages = (bytes + pg - 1) / pg;
    b->map_len = (pages + 2) * pg;
    /* the second mapping for small inputs only: for a large one the mprotect costs nothing next
     * to its case, while shared memory's pages cost more to fault in than anonymous ones */
    aliased = aliased && pages > 0 && bytes < ALIAS_MAX_BYTES;
    size_t canary_lo = 0, canary_hi = 0; /* data-page bytes known to hold the canary */
    if (take_cached(s->cache, b->map_len, aliased, b, &canary_lo, &canary_hi) == 0) {
        /* its guard pages are still PROT_NONE; a plain one's data pages may be sealed */
        if (!b->alias && b->readonly &&
            mprotect((unsigned char *)b->map + pg, pages * pg, PROT_READ | PROT_WRITE)) {
            munmap(b->map, b->map_len);
            b->map = NULL;
            return NULL;
        }
        b->readonly = b->alias != NULL;
    } else if (!aliased || map_aliased(pages, pg, b)) {
        b->map = mmap(NULL, b->map_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (b->map == MAP_FAILED) {
            b->map = NULL;
            return NULL;
        }
        if (pages && mprotect((unsigned char *)b->map + pg, pages * pg, PROT_READ | PROT_WRITE)) {
            munmap(b->map, b->map_len);
            b->map = NULL;
            return NULL;
        }
    }
    unsigned char *first = (unsigned char *)b->map + pg;
    b->slack_len = pages * pg - bytes;
    if (s->place == CC_PLACE_END) {
        b->data = first + b->slack_len;
        b->slack = first;
    } else {
        b->data = first;
        b->slack = first + bytes;
    }
    /* the canary over the slack, but where a reused mapping's last slack already holds it
     * intact: the slack outside [canary_lo, canary_hi), on either side of it */
    size_t lo = (size_t)(b->slack - first), hi = lo + b->slack_len;
    size_t kept_lo = canary_lo > lo ? canary_lo : lo, kept_hi = canary_hi < hi ? canary_hi : hi;
    if (kept_lo >= kept_hi) /* nothing of it kept */
        kept_lo = kept_hi = hi;
    memset(writable(b, first + lo), CANARY, kept_lo - lo);
    memset(writable(b, first + kept_hi), CANARY, hi - kept_hi);
    s->n++;
    return writable(b, b->data);
}

void *cc_guard_alloc(cc_guard_set *s, size_t bytes, const char *name)
{
    return alloc_buffer(s, bytes, name, 0);
}

void *cc_guard_alloc_input(cc_guard_set *s, size_t bytes, const char *name)
{
    return alloc_buffer(s, bytes, name, 1);
}

static void release(cc_guard_set *s, cc_guarded *b)
{
    cc_guard_cache *c = s->cache;
    if (b->map && c && c->n < CC_GUARD_CACHE_SLOTS) {
        c->slot[c->n].map = b->map;
        c->slot[c->n].map_len = b->map_len;
        c->slot[c->n].readonly = b->readonly;
        c->slot[c->n].alias = b->alias;
        /* an input's slack (the provider cannot write it) or an output's checked one */
        int intact = b->readonly || b->canary_ok;
        size_t at = (size_t)(b->slack - ((unsigned char *)b->map + page_size()));
        c->slot[c->n].canary_lo = intact ? at : 0;
        c->slot[c->n].canary_hi = intact ? at + b->slack_len : 0;
        c->n++;
    } else if (b->map) {
        unmap(b->map, b->map_len, b->alias);
    } else {
        cc_free_big(b->data);
    }
    memset(b, 0, sizeof *b);
}

void cc_guard_cache_clear(cc_guard_cache *c)
{
    for (int k = 0; k < c->n; k++)
        unmap(c->slot[k].map, c->slot[k].map_len, c->slot[k].alias);
    c->n = 0;
}

void cc_guard_free(cc_guard_set *s, void *data)
{
    for (int i = 0; data && i < s->n; i++)
        if (s->b[i].data == data) {
            release(s, &s->b[i]);
            s->b[i] = s->b[--s->n];
            return;
        }
}

void cc_guard_free_all(cc_guard_set *s)
{
    for (int i = 0; i < s->n; i++)
        release(s, &s->b[i]);
    s->n = 0;
}

void *cc_guard_seal(cc_guard_set *s, void *data)
{
    size_t pg = page_size();
    for (int i = 0; data && i < s->n; i++) {
        cc_guarded *b = &s->b[i];
        if (!b->map)
            continue;
        if (b->alias && (writable(b, b->data) == data || b->data == data))
            return b->data; /* read-only since it was mapped */
        if (b->data != data)
            continue;
        b->readonly = 1;
        if (b->map_len > 2 * pg)
            mprotect((unsigned char *)b->map + pg, b->map_len - 2 * pg, PROT_READ);
        return b->data;
    }
    return data;
}

int cc_guard_check(cc_guard_set *s, char *msg, size_t len)
{
    for (int i = 0; i < s->n; i++) {
        cc_guarded *b = &s->b[i];
        if (!b->map || b->readonly)
            continue;
        int before = b->slack < b->data;
        size_t lo, hi;
        if (spoiled_span(b->slack, b->slack_len, &lo, &hi)) {
            /* the furthest spoiled canary byte from the buffer */
            long far = before ? (long)(b->slack_len - lo) : (long)hi + 1;
            snprintf(msg, len,
                     "out-of-bounds: the provider's %s wrote up to %ld byte%s %s %s (a buffer of "
                     "%zu bytes; its canary was overwritten)",
                     s->call, far, far == 1 ? "" : "s",
                     before ? "before the start of" : "past the end of", b->name, b->bytes);
            return -1;
        }
        b->canary_ok = 1;
    }
    return 0;
}

/* ---- the fault handler (async-signal-safe: no stdio, no allocation) ------------------------ */

typedef struct {
    char *p;
    size_t left;
} text;

static void put_s(text *t, const char *s)
{
    while (*s && t->left > 1) {
        *t->p++ = *s++;
        t->left--;
    }
    *t->p = 0;
}

static void put_u(text *t, unsigned long long v)
{
    char digits[24];
    int n = 0;
    do
        digits[n++] = (char)('0' + v % 10);
    while ((v /= 10) && n < (int)sizeof digits);
    char s[24];
    for (int k = 0; k < n; k++)
        s[k] = digits[n - 1 - k];
    s[n] = 0;
    put_s(t, s);
}

/* 1 write, 0 read, -1 unknown. */
static int fault_was_write(void *uctx)
{
#if defined(__x86_64__) && defined(REG_ERR)
    const ucontext_t *uc = uctx;
    return (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
    (void)uctx;
    return -1;
#endif
}

static void guard_handler(int sig, siginfo_t *info, void *uctx)
{
    const cc_guard_set *s = armed_set;
    cc_guard_note *note = fault_note;
    unsigned char *a = info ? (unsigned char *)info->si_addr : NULL;
    size_t pg = page_size();
    for (int i = 0; s && a && i < s->n; i++) {
        const cc_guarded *b = &s->b[i];
        if (!b->map)
            continue;
        unsigned char *lo = b->map, *hi = lo + b->map_len;
        if (a < lo || a >= hi)
            continue;
        int in_head = a < lo + pg, in_tail = a >= hi - pg;
        if (!in_head && !in_tail && !b->readonly)
            break; /* a fault inside its own pages is nothing of ours */
        if (note) {
            int w = fault_was_write(uctx);
            text t = {note->message, sizeof note->message};
            put_s(&t, "out-of-bounds: the provider's ");
            put_s(&t, s->call);
            if (s->repeats > 1) {
                put_s(&t, " (call ");
                put_u(&t, (unsigned long long)s->repeat + 1);
                put_s(&t, " of ");
                put_u(&t, (unsigned long long)s->repeats);
                put_s(&t, ")");
            }
            put_s(&t, w > 0 ? " wrote " : w == 0 ? " read " : " accessed ");
            if (in_head || in_tail) {
                unsigned long long d = in_head ? (unsigned long long)(b->data - a)
                                               : (unsigned long long)(a - (b->data + b->bytes)) + 1;
                put_s(&t, "memory ");
                put_u(&t, d);
                put_s(&t, d == 1 ? " byte " : " bytes ");
                put_s(&t, in_head ? "before the start of " : "past the end of ");
            } else {
                put_s(&t, "into the read-only ");
            }
            put_s(&t, b->name);
            put_s(&t, " (a buffer of ");
            put_u(&t, (unsigned long long)b->bytes);
            put_s(&t, in_head || in_tail ? " bytes; caught by its guard page)"
                                         : " bytes; inputs are read-only)");
            note->magic = CC_GUARD_NOTE_MAGIC;
        }
        break;
    }
    /* let the fault run its course under the handler that was there before: a fault happens
     * again when this returns; a signal sent (raise, kill) is sent again */
    sigaction(sig, &previous[sig == SIGBUS], NULL);
    if (!info || info->si_code <= 0)
        raise(sig);
}

int cc_guard_install(cc_guard_note *note)
{
    fault_note = note;
    struct sigaction now;
    if (sigaction(SIGSEGV, NULL, &now) == 0 && (now.sa_flags & SA_SIGINFO) &&
        now.sa_sigaction == guard_handler)
        return 0; /* installed already: keep the handler it replaced */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = guard_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &previous[0]) || sigaction(SIGBUS, &sa, &previous[1]))
        return -1;
    return 0;
}

void cc_guard_note_expect(uint64_t tag)
{
    cc_guard_note *note = fault_note;
    if (!note)
        return;
    note->magic = 0;
    note->tag = tag;
    note->message[0] = 0;
}

void cc_guard_arm(cc_guard_set *s)
{
    for (int i = 0; s && i < s->n; i++)
        s->b[i].canary_ok = 0;
    armed_set = s;
}
