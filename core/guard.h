/* Guarded buffers: every buffer a CPU provider reads or writes (its input views, the output
 * cotangent, its outputs and gradients) sits in a mapping of its own between two inaccessible
 * guard pages, so an access outside it faults at once instead of corrupting the allocator.
 *
 *   [guard page][canary slack | buffer bytes][guard page]      placement CC_PLACE_END (default)
 *   [guard page][buffer bytes | canary slack][guard page]      placement CC_PLACE_START
 *
 * A buffer cannot be flush with both page boundaries (its size is rarely a whole number of
 * pages), so one side has slack: up to a page less one element. The slack holds a canary pattern
 * that is checked after every provider call, and input buffers are made read-only once filled.
 * What that catches, and what not:
 *   - a read or write past the end of any buffer (CC_PLACE_END): faults on the first byte;
 *   - a write before the start of an output (any placement) or past its end (CC_PLACE_START):
 *     the canary check after the call, or the guard page when it reaches that far;
 *   - any write to an input (in bounds or not): faults (the pages are read-only);
 *   - a read before the start of a buffer: faults when it reaches the guard page (always on
 *     CC_PLACE_START, which --repeat uses on every second call); within the slack of a
 *     CC_PLACE_END buffer it reads the canary and goes unseen on that call;
 *   - an access that jumps over a guard page into other memory, or reads inside a strided
 *     view's own gaps (those hold NaN: the comparison sees it), is not a fault.
 *
 * A fault in a guard page (or a write to a read-only input) runs the handler installed by
 * cc_guard_install: it writes a note naming the buffer, the side, the distance in bytes, read or
 * write (x86-64 only; elsewhere "accessed"), the provider call (forward or vjp) and its repeat,
 * into the page the pool shares with the worker, then lets the fault kill the worker; the pool
 * turns the note into an `out-of-bounds` result. Any other fault is left to the handler that was
 * there before (a crash, as ever).
 *
 * The one piece of process-wide state in capcheck outside main: a signal handler has no
 * argument, so the armed set of buffers and the note page are reached through two static
 * pointers (guard.c); they are set only in worker processes (and by in-process runs), around
 * provider calls. */
#ifndef CAPCHECK_GUARD_H
#define CAPCHECK_GUARD_H

#include <stddef.h>
#include <stdint.h>

typedef enum { CC_PLACE_END = 0, CC_PLACE_START = 1 } cc_guard_place;

#define CC_GUARD_MAX_BUFFERS 48 /* a case's inputs, cotangent, output and gradients, twice */
#define CC_GUARD_NOTE_MAGIC 0x6f6f6263u /* "cboo" */

/* What the fault handler leaves for the parent (in a page shared between worker and pool). */
typedef struct {
    uint32_t magic; /* CC_GUARD_NOTE_MAGIC when a guard fault was recorded */
    uint32_t pad;
    uint64_t tag;   /* the job it happened in (cc_guard_note_expect) */
    char message[320];
} cc_guard_note;

typedef struct {
    void *map;      /* the whole mapping, guard pages included; NULL for a heap buffer */
    size_t map_len;
    unsigned char *data; /* the buffer (an input's: its read-only view) */
    /* an input's second, writable view of the same pages (NULL where there is none): capcheck
     * fills it there while the provider's view stays read-only, case after case, with no
     * mprotect (each one a TLB shootdown across the CPUs) */
    unsigned char *alias;
    size_t bytes;
    unsigned char *slack; /* the canary bytes beside it */
    size_t slack_len;
    int readonly;   /* an input: read-only while the provider runs */
    /* an output's canary was found intact by cc_guard_check after the last provider call (an
     * input's cannot be written): kept with its mapping, so a reuse writes only what changed */
    int canary_ok;
    char name[40];  /* "input x", "output y", "grad:x", "the cotangent g" */
} cc_guarded;

/* Mappings kept for the next case: a worker runs thousands of cases, and mapping, protecting,
 * faulting in and unmapping fresh pages for each buffer of each case costs more than the case
 * (scripts/bench). A mapping is reused for a buffer of the same number of pages; its guard pages
 * stay inaccessible, only its slack's canary is written again. Owned by whoever runs the cases
 * (a worker, bench, a test), never shared between processes. */
#define CC_GUARD_CACHE_SLOTS 64
typedef struct cc_guard_cache {
    int n;
    struct {
        void *map;
        size_t map_len;
        int readonly;
        void *alias; /* an input mapping's writable view of its data pages, or NULL */
        /* bytes [canary_lo, canary_hi) of its data pages hold the canary, intact when it was
         * released (its last slack); a reuse fills only the rest of its new slack */
        size_t canary_lo, canary_hi;
    } slot[CC_GUARD_CACHE_SLOTS];
} cc_guard_cache;

/* The buffers of one case run. guarded = 0 makes every buffer a plain heap block (no guard). */
typedef struct {
    int guarded;
    cc_guard_cache *cache; /* NULL: every buffer mapped and unmapped afresh */
    cc_guard_place place;
    const char *call;  /* "forward" / "vjp": the provider call in flight, for the note */
    int repeat, repeats;
    int n;
    cc_guarded b[CC_GUARD_MAX_BUFFERS];
} cc_guard_set;

void cc_guard_set_init(cc_guard_set *s, int guarded);
/* A buffer of `bytes` named `name` (copied), at the set's placement; its contents are
 * unspecified (callers fill it). NULL when out of memory or the set is full. */
void *cc_guard_alloc(cc_guard_set *s, size_t bytes, const char *name);
/* Free one buffer of the set (by its data pointer; a NULL or unknown pointer is ignored). */
void cc_guard_free(cc_guard_set *s, void *data);
void cc_guard_free_all(cc_guard_set *s);
/* Unmap every mapping a cache holds. */
void cc_guard_cache_clear(cc_guard_cache *c);
/* An input's buffer: like cc_guard_alloc, but what it returns is where capcheck writes the
 * values; cc_guard_seal then gives the address the provider reads (guarded sets: read-only
 * pages). Below 4 MiB, where the system can map the pages twice (memfd), the writable view is
 * a second mapping and sealing costs no system call; elsewhere it is the buffer itself, made
 * read-only by mprotect. */
void *cc_guard_alloc_input(cc_guard_set *s, size_t bytes, const char *name);
/* Seal a filled input buffer (by the address cc_guard_alloc_input returned, or that of a
 * cc_guard_alloc buffer): read-only from now on; the address the provider is to read it at
 * (the same one for unguarded sets and mprotect'ed buffers). */
void *cc_guard_seal(cc_guard_set *s, void *data);
/* After a provider call: 0 when every canary is intact, else -1 with a sentence in msg naming
 * the buffer and the side that was written. */
int cc_guard_check(cc_guard_set *s, char *msg, size_t len);

/* The fault handler (SIGSEGV, SIGBUS) of this process, writing into `note` (NULL: record
 * nothing, just let guard faults kill the process). Returns 0, or -1 when sigaction fails. */
int cc_guard_install(cc_guard_note *note);
/* The job the next note belongs to; clears the note. */
void cc_guard_note_expect(uint64_t tag);
/* Arm the handler with set s around a provider call (NULL disarms); the call may write any
 * output's canary, so none counts as intact until cc_guard_check has read it again. */
void cc_guard_arm(cc_guard_set *s);

#endif
