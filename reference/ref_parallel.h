/* The reference on several threads: a parallel loop over independent ranges. An op that runs
 * its outer loop through ref_parallel_for computes every output element with exactly the steps
 * (and the order of steps) of its serial loop, only on another thread: the results are the
 * same bits whatever the thread count (tests/test_sampled.c checks it). */
#ifndef CAPCHECK_REF_PARALLEL_H
#define CAPCHECK_REF_PARALLEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* fn(ctx, lo, hi) over contiguous ranges covering [0, n), on up to `threads` threads (this one
 * included), each range at least `grain` long; returns when every range is done. threads <= 1,
 * or n <= grain, runs fn(ctx, 0, n) here. A thread that cannot be started leaves its range to
 * this one. */
typedef void (*ref_range_fn)(void *ctx, int64_t lo, int64_t hi);
void ref_parallel_for(int threads, int64_t n, int64_t grain, ref_range_fn fn, void *ctx);

/* The number of online CPUs (at least 1). */
int ref_online_cpus(void);

/* A function compiled for the widest vectors the CPU has, chosen when the program loads: for
 * loops written without calls or branches per element. Every clone gives the same bits (a vector
 * operation rounds each element as the scalar one does; no contraction anywhere). GCC only:
 * clang 14 leaves the clones of a function with external linkage without the dispatcher its
 * callers in other files name (the fuzz build links with clang); none under ASan. */
#if defined(__x86_64__) && defined(__has_attribute) && !defined(__clang__) &&                  \
    !defined(__SANITIZE_ADDRESS__)
#if __has_attribute(target_clones)
#define REF_VECTOR_CLONES __attribute__((target_clones("default", "avx2", "arch=x86-64-v4")))
#endif
#endif
#ifndef REF_VECTOR_CLONES
#define REF_VECTOR_CLONES
#endif

#ifdef __cplusplus
}
#endif

#endif
