/* Composite ops (ops.md K): fftFno, selectiveScan, attention. Not written yet: the registry reports these ops as missing. */
#include "ref_families.h"

const ref_op ref_family_composite[1];
const int ref_family_composite_count = 0;
