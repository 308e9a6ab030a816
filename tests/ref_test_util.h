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

/* op->forward with m_i alone (mag NULL: no magnitudes). */
static __attribute__((unused)) ref_status ref_t_forward(const ref_op *op, const ref_params *p,
                                                         int n, const ref_tensor *in,
                                                         ref_tensor *out, double *mag)
{
    ref_mag m = {mag, NULL, NULL};
    return op->forward(p, n, in, out, mag ? &m : NULL);
}

/* op->vjp with m_i alone for each gradient (gmag NULL, or gmag[i] NULL: none). */
static __attribute__((unused)) ref_status ref_t_vjp(const ref_op *op, const ref_params *p, int n,
                                                     const ref_tensor *in, const ref_tensor *y,
                                                     const ref_tensor *g, ref_tensor *grad,
                                                     double *const *gmag)
{
    ref_mag m[REF_MAX_INPUTS];
    memset(m, 0, sizeof m);
    for (int i = 0; gmag && i < n && i < REF_MAX_INPUTS; i++)
        m[i].worst = gmag[i];
    return op->vjp(p, n, in, y, g, grad, gmag ? m : NULL);
}

#endif
