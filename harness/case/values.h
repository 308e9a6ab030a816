/* Counter-based value drawing: element j of input i of a case depends only on (seed, i, j),
 * never on what was drawn before, so any case reproduces alone (and any range of elements can
 * be drawn apart from the rest: by several threads, or a few elements at a time).
 *
 * Two value streams, named by the case (`stream=` on a case line; harness/case.h):
 *   1  the original: u = splitmix64(key + j) / 2^64 (53 bits); N(0,1) by Box-Muller's cosine
 *      branch with libm's log, sqrt and cos, one pair of uniforms per value. Its values are
 *      libm's: bit-identical on this libm (glibc picks its log and cos by CPU, FMA or not).
 *      Drawn only where a line says stream=1 (lines written before the default moved).
 *   2  capcheck's own arithmetic: both Box-Muller branches from one splitmix64 draw per pair of
 *      values (32-bit uniforms), with log, sin, cos and exp evaluated by fixed polynomials in
 *      IEEE double operations only (no libm, no contraction): the same bits on every machine
 *      and compiler, and several times faster (vectorized where the CPU allows; every
 *      vector width gives the same bits). The default: a line without stream= draws it.
 * Uniform draws (unit, index and mask domains, edge positions) are the same in both. */
#ifndef CAPCHECK_VALUES_H
#define CAPCHECK_VALUES_H

#include <stdint.h>

#include "reference/ref.h"

enum { CC_STREAM_LIBM = 1, CC_STREAM_PORTABLE = 2, CC_STREAM_COUNT = 3 };
/* What a case line without stream= draws: the portable stream (it was stream 1 before issue 28's
 * change; every line capcheck prints names its stream, so a printed line means one stream in
 * every capcheck that reads it). */
#define CC_STREAM_DEFAULT CC_STREAM_PORTABLE

/* The key of input `input_index` under a case seed. */
uint64_t cc_input_key(uint64_t seed, int input_index);
/* A uniform double in [0,1) for element j of the stream `key` (53 bits; both streams). */
double cc_uniform_at(uint64_t key, int64_t j);
/* Element j of the standard normal stream `key`: stream 1 (the definition: one element at a
 * time, as the bulk draws below must reproduce it) and stream 2. */
double cc_normal_at(uint64_t key, int64_t j);
double cc_normal2_at(uint64_t key, int64_t j);

/* Bulk draws, the one drawing path: out[t] = element j0 + t of the stream for t < n, equal bit
 * for bit to the one-element functions above. */
void cc_draw_uniform(uint64_t key, int64_t j0, int64_t n, double *out);
void cc_draw_normal(int stream, uint64_t key, int64_t j0, int64_t n, double *out);
/* Elements j0 .. j0+n-1 of an input drawn from domain d in value stream `stream`. The distinct
 * domain is a permutation of its whole input: it wants j0 = 0 and n the input's element count. */
void cc_draw_range(const ref_domain *d, int stream, uint64_t key, int64_t j0, int64_t n,
                   double *out);
/* cc_draw_range with its vectorized loops compiled for instruction set isa (REF_ISA_*,
 * reference/ref_parallel.h) whatever this CPU's dispatch picks: 0, or -1 (nothing drawn) when
 * this build or CPU has no such clone. Tests hold every clone to the same bits. */
int cc_draw_range_isa(int isa, const ref_domain *d, int stream, uint64_t key, int64_t j0,
                      int64_t n, double *out);
/* out[0..n) from domain d in stream 1 (cc_draw_range from element 0). */
void cc_draw_values(const ref_domain *d, uint64_t key, int64_t n, double *out);

#endif
