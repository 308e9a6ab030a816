/* Bulk memory: the buffers of a case's inputs and outputs (materialized values, provider
 * buffers), which for a large case run to hundreds of MB each and come and go with every case. */
#ifndef CAPCHECK_BULK_H
#define CAPCHECK_BULK_H

#include <stddef.h>

/* Room for `bytes` bytes (contents undefined), NULL when out of memory; release it with
 * cc_free_big. Below 4 MiB: malloc. From 4 MiB up: pages of their own, marked for transparent
 * huge pages on Linux (filling 100 MB takes ~50 page faults, not ~25,000), and, once released,
 * kept for the next request they fit (up to CC_BULK_KEEP bytes in all), so a run of large cases
 * does not fault in and zero its buffers again for every case. */
void *cc_alloc_big(size_t bytes);
/* Release what cc_alloc_big gave (NULL is ignored). */
void cc_free_big(void *p);
/* Give every kept region back to the system (a process that has finished its cases). */
void cc_bulk_trim(void);

#define CC_BULK_KEEP ((size_t)1 << 30)

#endif
