/* Run one case end to end: materialize, reference, provider, compare. */
#ifndef CAPCHECK_RUNNER_H
#define CAPCHECK_RUNNER_H

#include <stdint.h>

#include "harness/case.h"

typedef enum {
    CC_RES_PASS = 0,
    CC_RES_FAIL,        /* some element over its bound, or a NaN/Inf mismatch */
    CC_RES_UNSUPPORTED, /* the provider does not implement this op/dtype/device */
    CC_RES_ERROR,       /* the provider raised an error, or the case could not be built */
    CC_RES_CRASH,       /* the worker died (signal) */
    CC_RES_TIMEOUT,
    CC_RES_COUNT
} cc_result_status;

typedef struct {
    char line[CC_CASE_LINE_MAX]; /* canonical repro line */
    char op[32];
    cc_dtype dtype;
    cc_device device;
    cc_layout layout;
    char provider[32];
    char vjp_mode[24];
    cc_result_status status;
    char message[384];
    int checked_fwd, checked_vjp;
    double fwd_ratio, vjp_ratio, worst_ratio;
    char worst_output[32];     /* "y" or "grad:<input name>" */
    char worst_index[96];      /* multi-index, e.g. [1,2] */
    char worst_inputs[256];    /* inputs at that index where their shape matches */
    double expected, got, bound;
    int64_t elements; /* output elements */
    double seconds;
} cc_result;

const char *cc_result_status_name(cc_result_status s);
/* The identity part of a result (canonical line, op, dtype, device, layout, provider,
 * vjp_mode), everything else zero and status pass: what cc_run_case starts from, and what the
 * worker pool fills in for a case whose worker crashed or timed out. */
void cc_result_begin(const cc_provider *p, const cc_case *c, cc_result *r);
/* Never fails: every problem becomes the result's status and message. */
void cc_run_case(const cc_provider *p, const cc_case *c, cc_result *r);

#endif
