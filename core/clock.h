/* The one clock capcheck times with: monotonic seconds (wall-clock steps do not move it). The
 * including file defines _POSIX_C_SOURCE before any header, as every harness file does. */
#ifndef CAPCHECK_CLOCK_H
#define CAPCHECK_CLOCK_H

#include <time.h>

static inline double cc_monotonic_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
