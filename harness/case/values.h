/* Counter-based value drawing: element j of input i of a case depends only on (seed, i, j),
 * never on what was drawn before, so any case reproduces alone. */
#ifndef CAPCHECK_VALUES_H
#define CAPCHECK_VALUES_H

#include <stdint.h>

#include "reference/ref.h"

/* The key of input `input_index` under a case seed. */
uint64_t cc_input_key(uint64_t seed, int input_index);
/* A uniform double in [0,1) and a standard normal for element j of the stream `key`. */
double cc_uniform_at(uint64_t key, int64_t j);
double cc_normal_at(uint64_t key, int64_t j);
/* Fill out[0..n) from the domain d. */
void cc_draw_values(const ref_domain *d, uint64_t key, int64_t n, double *out);

#endif
