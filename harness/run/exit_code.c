#include "harness/run/exit_code.h"

#include <string.h>

int cc_result_unjudged(const cc_result *r)
{
    const char *m = r->message;
    return r->status == CC_RES_UNSUPPORTED ||
           (r->status == CC_RES_ERROR &&
            (strstr(m, "out of memory") || strstr(m, "not enough memory")));
}

int cc_exit_code_of(long failed, long unjudged)
{
    return failed > 0 ? CC_EXIT_NOT_PASSED : unjudged > 0 ? CC_EXIT_UNJUDGED : CC_EXIT_PASSED;
}

int cc_result_exit_code(const cc_result *r)
{
    int unjudged = r->status != CC_RES_PASS && cc_result_unjudged(r);
    return cc_exit_code_of(r->status != CC_RES_PASS && !unjudged, unjudged);
}
