#include "providers/provider_util.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>

cc_status cc_say(char *msg, size_t len, cc_status st, const char *fmt, ...)
{
    if (msg && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, len, fmt, ap);
        va_end(ap);
    }
    return st;
}

int cc_fits_int(int64_t v)
{
    return v >= 0 && v <= INT_MAX;
}
