/* Small helpers the built-in library providers share (OpenBLAS, cuBLAS, cuDNN, cuFFT and their
 * host-side lowerings). */
#ifndef CAPCHECK_PROVIDER_UTIL_H
#define CAPCHECK_PROVIDER_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "abi/capcheck_provider.h"

/* Write the sentence into msg (when there is one) and return st: `return cc_say(msg, len,
 * CC_UNSUPPORTED, "...")`. */
cc_status cc_say(char *msg, size_t len, cc_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* 0 <= v <= INT_MAX: the extent fits a library's int argument. */
int cc_fits_int(int64_t v);

#endif
