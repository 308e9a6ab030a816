/* Random sources (ops.md A): randUniform, bernoulliMask. Not written yet: the registry reports these ops as missing. */
#include "ref_families.h"

const ref_op ref_family_random[1];
const int ref_family_random_count = 0;
