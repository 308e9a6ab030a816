/* A part of a test that cannot run on this machine or in this build says so and is counted: the
 * test binary then ends with CTest's skip code (77, SKIP_RETURN_CODE) unless a test failed, so
 * a skip is never reported as a pass; scripts/test lists every skip with its reason and fails on
 * one this machine does not explain (scripts/check-skips). Header-only; include after
 * <cmocka.h>. */
#ifndef CAPCHECK_TESTS_SKIP_UTIL_H
#define CAPCHECK_TESTS_SKIP_UTIL_H

#include <stdarg.h>
#include <stdio.h>

#define CC_T_SKIP_CODE 77

/* The skips of this process (a test binary is one process; cmocka runs its tests in it). */
static int cc_t_skips;

/* Say "skipped: <why>" (the line scripts/check-skips reads) and count it. */
static __attribute__((unused, format(printf, 1, 2))) void cc_t_skip(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("skipped: ");
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
    cc_t_skips++;
}

/* What main returns after cmocka's count of failed tests: that count, else 77 when a part was
 * skipped, else 0. */
static __attribute__((unused)) int cc_t_exit_code(int failed)
{
    return failed ? failed : cc_t_skips ? CC_T_SKIP_CODE : 0;
}

#endif
