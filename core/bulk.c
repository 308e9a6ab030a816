/* Bulk memory (bulk.h): large regions mapped on their own, a table of the live ones (their
 * lengths) and a short list of released ones kept for reuse. The table is small (a case holds a
 * few dozen buffers at most) and guarded by one mutex (materializing may run on threads). */
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS, madvise */
#include "core/bulk.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__linux__)
#include <sys/mman.h>
#define CC_BULK_MAPPED 1
#else
#define CC_BULK_MAPPED 0
#endif

#if CC_BULK_MAPPED
enum { LIVE = 64, KEPT = 16 };
#define BIG ((size_t)4 << 20)  /* from here up, regions of their own */
#define HUGE ((size_t)2 << 20) /* a transparent huge page */

typedef struct {
    void *p;
    size_t len;
} region;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static region live[LIVE], kept[KEPT];
static size_t kept_bytes;

static void *map_region(size_t len)
{
    /* len + HUGE mapped, the unaligned head and the tail unmapped: a 2 MiB-aligned region */
    size_t span = len + HUGE;
    unsigned char *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    size_t head = (HUGE - (uintptr_t)m % HUGE) % HUGE;
    if (head)
        munmap(m, head);
    if (span - head > len)
        munmap(m + head + len, span - head - len);
#ifdef MADV_HUGEPAGE
    (void)madvise(m + head, len, MADV_HUGEPAGE); /* advice: without it, small pages */
#endif
    return m + head;
}
#endif

void *cc_alloc_big(size_t bytes)
{
#if CC_BULK_MAPPED
    if (bytes >= BIG) {
        size_t len = (bytes + HUGE - 1) / HUGE * HUGE;
        region r = {NULL, 0};
        pthread_mutex_lock(&lock);
        int best = -1; /* the smallest kept region it fits, if not more than twice its size */
        for (int k = 0; k < KEPT; k++)
            if (kept[k].p && kept[k].len >= len && kept[k].len / 2 <= len &&
                (best < 0 || kept[k].len < kept[best].len))
                best = k;
        if (best >= 0) {
            r = kept[best];
            kept_bytes -= r.len;
            kept[best] = (region){NULL, 0};
        }
        pthread_mutex_unlock(&lock);
        if (!r.p) {
            r.len = len;
            r.p = map_region(len);
        }
        if (!r.p)
            return NULL;
        pthread_mutex_lock(&lock);
        int slot = -1;
        for (int k = 0; k < LIVE && slot < 0; k++)
            if (!live[k].p)
                slot = k;
        if (slot >= 0)
            live[slot] = r;
        pthread_mutex_unlock(&lock);
        if (slot < 0) { /* more live regions than the table holds: not expected; plain malloc */
            munmap(r.p, r.len);
            return malloc(bytes);
        }
        return r.p;
    }
#endif
    return malloc(bytes ? bytes : 1);
}

void cc_free_big(void *p)
{
    if (!p)
        return;
#if CC_BULK_MAPPED
    if ((uintptr_t)p % HUGE) { /* not a region (they start on a huge page): no lock, no search */
        free(p);
        return;
    }
    pthread_mutex_lock(&lock);
    region r = {NULL, 0};
    for (int k = 0; k < LIVE && !r.p; k++)
        if (live[k].p == p) {
            r = live[k];
            live[k] = (region){NULL, 0};
        }
    if (r.p) {
        /* keep it, making room by giving back the largest kept regions first */
        region drop[KEPT + 1];
        int nd = 0;
        while (r.len <= CC_BULK_KEEP && kept_bytes + r.len > CC_BULK_KEEP) {
            int big = -1;
            for (int k = 0; k < KEPT; k++)
                if (kept[k].p && (big < 0 || kept[k].len > kept[big].len))
                    big = k;
            if (big < 0)
                break;
            drop[nd++] = kept[big];
            kept_bytes -= kept[big].len;
            kept[big] = (region){NULL, 0};
        }
        int slot = -1;
        for (int k = 0; k < KEPT && slot < 0; k++)
            if (!kept[k].p)
                slot = k;
        if (slot >= 0 && r.len <= CC_BULK_KEEP) {
            kept[slot] = r;
            kept_bytes += r.len;
        } else {
            drop[nd++] = r;
        }
        pthread_mutex_unlock(&lock);
        for (int k = 0; k < nd; k++)
            munmap(drop[k].p, drop[k].len);
        return;
    }
    pthread_mutex_unlock(&lock);
#endif
    free(p);
}

void cc_bulk_trim(void)
{
#if CC_BULK_MAPPED
    pthread_mutex_lock(&lock);
    region drop[KEPT];
    int nd = 0;
    for (int k = 0; k < KEPT; k++)
        if (kept[k].p) {
            drop[nd++] = kept[k];
            kept[k] = (region){NULL, 0};
        }
    kept_bytes = 0;
    pthread_mutex_unlock(&lock);
    for (int k = 0; k < nd; k++)
        munmap(drop[k].p, drop[k].len);
#endif
}
