/* core/grow.h — the one growing array: every list that takes elements one at a time grows by
 * doubling through cc_grow. Header-only; calls nothing above libc. */
#ifndef CAPCHECK_CORE_GROW_H
#define CAPCHECK_CORE_GROW_H

#include <stddef.h>
#include <stdlib.h>

/* The array v (elements of elem bytes, capacity *cap) with room for element n: v itself when
 * n < *cap, else v reallocated to twice *cap (first when *cap is 0) and *cap updated. NULL when
 * memory runs out; v and *cap are then as they were (the caller still owns v). */
static inline void *cc_grow(void *v, size_t n, size_t *cap, size_t elem, size_t first)
{
    if (n < *cap)
        return v;
    size_t grown = *cap ? 2 * *cap : first;
    void *w = realloc(v, grown * elem);
    if (w)
        *cap = grown;
    return w;
}

#endif
