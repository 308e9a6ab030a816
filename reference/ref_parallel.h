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
#define REF_HAVE_VECTOR_CLONES 1
#endif
#endif
#ifndef REF_VECTOR_CLONES
#define REF_VECTOR_CLONES
#define REF_HAVE_VECTOR_CLONES 0
#endif

/* Each clone by name, for the tests that run every one whatever the CPU's dispatch would pick
 * (the dispatcher runs one clone per machine; the others would go untested). The instruction
 * sets of REF_VECTOR_CLONES, in order: */
enum { REF_ISA_DEFAULT = 0, REF_ISA_AVX2, REF_ISA_X86_64_V4, REF_ISA_COUNT };
/* "default", "avx2", "x86-64-v4" */
const char *ref_isa_name(int isa);
/* 1 when this build has clones for isa and this CPU runs them: the default always; the others
 * on x86-64 GCC builds (REF_HAVE_VECTOR_CLONES) whose CPU has the instructions. */
int ref_isa_runs(int isa);
/* In the file that defines a REF_VECTOR_CLONES function fn (its clones are local symbols there):
 * REF_VECTOR_CLONE_DECLS(fn) declares its clones under the names GCC gives them (fn.default,
 * fn.avx2, fn.arch_x86_64_v4; CMakeLists.txt checks the compiler names them so), and
 * REF_VECTOR_CLONE(fn, isa) is the clone for isa: without clones, fn itself. */
#if REF_HAVE_VECTOR_CLONES && !defined(REF_CLONE_NAMES_UNKNOWN)
#define REF_VECTOR_CLONE_DECLS(fn)                                                             \
    extern __typeof__(fn) fn##_clone_default __asm__(#fn ".default");                         \
    extern __typeof__(fn) fn##_clone_avx2 __asm__(#fn ".avx2");                               \
    extern __typeof__(fn) fn##_clone_v4 __asm__(#fn ".arch_x86_64_v4")
#define REF_VECTOR_CLONE(fn, isa)                                                              \
    ((isa) == REF_ISA_AVX2        ? fn##_clone_avx2                                            \
     : (isa) == REF_ISA_X86_64_V4 ? fn##_clone_v4                                              \
                                  : fn##_clone_default)
#else
#define REF_VECTOR_CLONE_DECLS(fn) extern int ref_no_clones_of_##fn
#define REF_VECTOR_CLONE(fn, isa) (fn)
#endif

#ifdef __cplusplus
}
#endif

#endif
