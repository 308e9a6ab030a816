/* Edge values into drawn inputs: the classes and the table of which inputs take them, what
 * share of elements and which values are in edge_class.h. Part of materializing a case: the
 * positions and values depend only on (seed, input, element), like every other drawn value, so
 * an edge case reproduces alone. */
#ifndef CAPCHECK_EDGES_H
#define CAPCHECK_EDGES_H

#include <stdint.h>

#include "harness/case/case.h"

/* Apply the case's edge classes to the values drawn for input i (domain d, n values before any
 * broadcast replication; shape s). */
void cc_edge_inject(const cc_case *c, int i, const ref_domain *d, const ref_shape *s, double *x,
                    int64_t n);

#endif
