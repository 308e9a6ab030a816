/* Helpers shared by the tests that run cases in-process (parse a line or a case file, run it on a
 * provider, tally a suite) and build views. Header-only, static; include after <cmocka.h>. */
#ifndef CAPCHECK_TESTS_TEST_UTIL_H
#define CAPCHECK_TESTS_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "harness/case/case.h"
#include "harness/run/runner.h"

/* A case line parsed with the defaults CPU, seed 0; fails the test when it does not parse. */
static __attribute__((unused)) cc_case cc_t_parse_case(const char *line)
{
    cc_case_defaults def = {CC_CPU, 0};
    cc_case c;
    cc_parse_error err;
    memset(&err, 0, sizeof err);
    if (cc_case_parse(line, &def, &c, &err))
        fail_msg("%s: %s", line, err.msg);
    return c;
}

/* cc_run_case on a case line (cc_t_parse_case). */
static __attribute__((unused)) void cc_t_run_line(const cc_provider *p, const char *line,
                                                  cc_result *r)
{
    cc_case c = cc_t_parse_case(line);
    cc_run_case(p, &c, r);
}

/* Appends the cases of a case file (defaults CPU, seed 0) to l; -1 after printing
 * "file:line:column: message" to stderr when it does not parse. */
static __attribute__((unused)) int cc_t_load_cases(const char *path, cc_case_list *l)
{
    cc_case_defaults def = {CC_CPU, 0};
    cc_parse_error err;
    memset(&err, 0, sizeof err);
    if (cc_cases_parse_file(path, &def, l, &err)) {
        fprintf(stderr, "%s:%d:%d: %s\n", err.file, err.line, err.column, err.msg);
        return -1;
    }
    return 0;
}

/* How a suite fared on a provider, with the first case that did not pass. */
typedef struct {
    long cases, passed, not_passed;
    long suspect; /* passing cases over the probabilistic bound (compare.h) */
    char first_failure[2 * CC_CASE_LINE_MAX];
} cc_t_tally;

/* Runs every case of l (only those of op only_op, unless NULL) on p. */
static __attribute__((unused)) cc_t_tally cc_t_run_all(const cc_provider *p,
                                                       const cc_case_list *l,
                                                       const char *only_op)
{
    cc_t_tally t = {0, 0, 0, 0, ""};
    for (size_t i = 0; i < l->n; i++) {
        if (only_op && strcmp(l->v[i].op->name, only_op) != 0)
            continue;
        cc_result r;
        cc_run_case(p, &l->v[i], &r);
        t.cases++;
        if (r.status == CC_RES_PASS) {
            t.passed++;
            t.suspect += r.suspect != 0;
        } else {
            t.not_passed++;
            if (!t.first_failure[0])
                snprintf(t.first_failure, sizeof t.first_failure, "%s -> %s: %s", r.line,
                         cc_result_status_name(r.status), r.message);
        }
    }
    return t;
}

/* A dense rank-1 view of n values of dtype t at data. */
static __attribute__((unused)) cc_view cc_t_vector_view(cc_dtype t, void *data, int64_t n)
{
    cc_view v;
    memset(&v, 0, sizeof v);
    v.dtype = t;
    v.rank = 1;
    v.shape[0] = n;
    v.strides[0] = 1;
    v.data = data;
    return v;
}

#endif
