/* Losses (ops.md H). Not written yet: the registry reports these ops as missing. */
#include "ref_families.h"

const ref_op ref_family_loss[1];
const int ref_family_loss_count = 0;
