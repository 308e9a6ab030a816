/* custom (ops.md L): a registered user-supplied op. Not written yet: the registry reports these ops as missing. */
#include "ref_families.h"

const ref_op ref_family_custom[1];
const int ref_family_custom_count = 0;
