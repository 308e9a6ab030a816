/* ref_parallel_for (ref_parallel.h): one pthread per extra range, joined before returning; no
 * pool and no state outlives a call. */
#define _POSIX_C_SOURCE 200809L
#include "ref_parallel.h"

#include <pthread.h>
#include <unistd.h>

#define MAX_THREADS 256

typedef struct {
    ref_range_fn fn;
    void *ctx;
    int64_t lo, hi;
} range_job;

static void *run_range(void *arg)
{
    range_job *j = arg;
    j->fn(j->ctx, j->lo, j->hi);
    return NULL;
}

void ref_parallel_for(int threads, int64_t n, int64_t grain, ref_range_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    int64_t parts = threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
    if (parts > n / grain)
        parts = n / grain > 0 ? n / grain : 1;
    if (parts <= 1) {
        fn(ctx, 0, n);
        return;
    }
    range_job jobs[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int64_t k = 0; k < parts; k++)
        jobs[k] = (range_job){fn, ctx, n * k / parts, n * (k + 1) / parts};
    for (int64_t k = 1; k < parts; k++)
        started[k] = pthread_create(&tid[k], NULL, run_range, &jobs[k]) == 0;
    run_range(&jobs[0]);
    for (int64_t k = 1; k < parts; k++) {
        if (started[k])
            pthread_join(tid[k], NULL);
        else
            run_range(&jobs[k]);
    }
}

int ref_online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (n > MAX_THREADS ? MAX_THREADS : (int)n) : 1;
}

const char *ref_isa_name(int isa)
{
    static const char *const names[REF_ISA_COUNT] = {"default", "avx2", "x86-64-v4"};
    return isa >= 0 && isa < REF_ISA_COUNT ? names[isa] : "?";
}

int ref_isa_runs(int isa)
{
    if (isa == REF_ISA_DEFAULT)
        return 1;
#if REF_HAVE_VECTOR_CLONES && !defined(REF_CLONE_NAMES_UNKNOWN)
    __builtin_cpu_init();
    if (isa == REF_ISA_AVX2)
        return __builtin_cpu_supports("avx2") != 0;
    if (isa == REF_ISA_X86_64_V4) /* what the clone's dispatcher asks for it */
        return __builtin_cpu_supports("x86-64-v4") != 0;
#endif
    return 0;
}
