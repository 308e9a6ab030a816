/* Helpers shared by the tests of the reference ops (reference/ only). Header-only, static;
 * include after <cmocka.h>. */
#ifndef CAPCHECK_TESTS_REF_TEST_UTIL_H
#define CAPCHECK_TESTS_REF_TEST_UTIL_H

#include <string.h>

#include "reference/ref.h"

/* The registered op of that name; fails the test when there is none. */
static __attribute__((unused)) const ref_op *ref_t_op(const char *name)
{
    const ref_op *op = ref_op_find(name);
    if (!op)
        fail_msg("op %s is not registered", name);
    return op;
}

/* The op's default parameters (all zero where it sets none). */
static __attribute__((unused)) ref_params ref_t_params(const ref_op *op)
{
    ref_params p;
    memset(&p, 0, sizeof p);
    if (op->set_defaults)
        op->set_defaults(&p);
    return p;
}

#endif
