/* Every clone of the hot loops, not only the one this CPU's dispatch picks. The loops marked
 * REF_VECTOR_CLONES (reference/ref_parallel.h) are compiled for default x86-64, AVX2 and
 * x86-64-v4 and one is chosen when the program loads: on an AVX-512 machine the AVX2 and default
 * clones would never run in the tests, on an AVX2 one the AVX-512 clone. Each clone is called
 * here by name (cc_dtype_array_loops_isa, cc_draw_range_isa, ref_row_times_isa; the judge's in
 * tests/test_judge.c) on every instruction set this CPU runs, and held bit for bit to the plain
 * definitions: cc_round_to and cc_store for the dtype loops, cc_normal_at, cc_normal2_at and the
 * dispatched draw for the values, a plain loop for the reference's row times matrix. A clone
 * this CPU cannot run is named as not run (its instructions would fault); a build whose
 * compiler names its clones otherwise skips. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/dtype.h"
#include "harness/case/values.h"
#include "reference/ref_families.h"
#include "reference/ref_parallel.h"
#include "skip_util.h"

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* The instruction sets whose clones run here, printed once; the count. */
static int clones_here(const char *what)
{
    int n = 0;
    char ran[128] = "", not_run[128] = "";
    for (int isa = 0; isa < REF_ISA_COUNT; isa++) {
        char *to = ref_isa_runs(isa) ? ran : not_run;
        snprintf(to + strlen(to), 128 - strlen(to), "%s%s", to[0] ? ", " : "", ref_isa_name(isa));
        n += ref_isa_runs(isa);
    }
    printf("%s: clones run: %s%s%s\n", what, ran, not_run[0] ? "; not on this CPU: " : "",
           not_run);
    return n;
}

/* A double whose value lands anywhere in the dtype's range and beyond: any bit pattern, ties,
 * subnormals, NaN with a payload, +-Inf, +-0. */
static double any_value(uint64_t k, cc_dtype t)
{
    uint64_t b = mix(k);
    double x;
    switch (k % 6) {
    case 0:
        memcpy(&x, &b, sizeof x);
        return x;
    case 1: { /* a tie between two neighbours of the dtype */
        double v = cc_round_to(t, ldexp((double)(b >> 11) * 0x1p-53 + 0.5, (int)(b % 40) - 20));
        return v + 0.5 * cc_ulp(t, v);
    }
    case 2:
        return ldexp((double)(b >> 11) * 0x1p-53, -(int)(b % 40) - 120); /* subnormal in f32 */
    case 3: {
        const double v[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 65504.0, 65520.0,
                            3.4028235677973366e38, 1e39};
        return v[b % 10];
    }
    default:
        return ldexp((double)(b >> 11) * 0x1p-53 - 0.5, (int)(b % 60) - 30);
    }
}

static void test_dtype_array_loops(void **state)
{
    (void)state;
    int n_isa = clones_here("dtype loops");
    static const int64_t lengths[] = {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 255,
                                      256, 257, 1000, 5000};
    static const cc_dtype types[] = {CC_F64, CC_F32, CC_F16, CC_BF16};
    long checked = 0;
    for (int isa = 0; isa < REF_ISA_COUNT; isa++) {
        cc_dtype_array_loops loops;
        if (cc_dtype_array_loops_isa(isa, &loops) != 0)
            continue;
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
            for (int ti = 0; ti < 4; ti++) {
                int64_t n = lengths[li];
                cc_dtype t = types[ti];
                size_t size = cc_dtype_size(t);
                double *x = malloc(sizeof(double) * (size_t)(n + 1));
                double *r = malloc(sizeof(double) * (size_t)(n + 1));
                unsigned char *want = calloc((size_t)(3 * n + 3), size);
                unsigned char *got = calloc((size_t)(3 * n + 3), size);
                assert_true(x && r && want && got);
                for (int64_t i = 0; i < n; i++)
                    x[i] = any_value((uint64_t)(li * 7919 + ti * 104729) * 1000003u + (uint64_t)i,
                                     t);
                /* round: cc_round_to of each, NaN keeping its bits */
                memcpy(r, x, sizeof(double) * (size_t)n);
                loops.round_array(t, r, n);
                for (int64_t i = 0; i < n; i++) {
                    double w = cc_round_to(t, x[i]);
                    if (!same_bits(r[i], w) && !(isnan(r[i]) && isnan(w)))
                        fail_msg("%s round_array %s, element %lld of %lld: %a, cc_round_to %a",
                                 ref_isa_name(isa), cc_dtype_name(t), (long long)i, (long long)n,
                                 r[i], w);
                }
                /* store at stride 1 and 3, offset 2: cc_store's bytes, and nothing beside */
                for (int stride = 1; stride <= 3; stride += 2) {
                    memset(want, 0xa5, (size_t)(3 * n + 3) * size);
                    memset(got, 0xa5, (size_t)(3 * n + 3) * size);
                    for (int64_t i = 0; i < n; i++)
                        cc_store(t, want, 2 + i * stride, r[i]);
                    loops.store_array(t, got, 2, stride, r, n);
                    if (memcmp(want, got, (size_t)(3 * n + 3) * size) != 0)
                        fail_msg("%s store_array %s at stride %d, %lld elements: not cc_store's "
                                 "bytes",
                                 ref_isa_name(isa), cc_dtype_name(t), stride, (long long)n);
                }
                /* round and store in one pass */
                memset(want, 0xa5, (size_t)(3 * n + 3) * size);
                memset(got, 0xa5, (size_t)(3 * n + 3) * size);
                memcpy(r, x, sizeof(double) * (size_t)n);
                for (int64_t i = 0; i < n; i++)
                    cc_store(t, want, 1 + i, x[i]);
                loops.round_store_array(t, r, n, got, 1);
                if (memcmp(want, got, (size_t)(3 * n + 3) * size) != 0)
                    fail_msg("%s round_store_array %s, %lld elements: not cc_store's bytes",
                             ref_isa_name(isa), cc_dtype_name(t), (long long)n);
                for (int64_t i = 0; i < n; i++) {
                    double w = cc_round_to(t, x[i]);
                    if (!same_bits(r[i], w) && !(isnan(r[i]) && isnan(w)))
                        fail_msg("%s round_store_array %s: element %lld rounded to %a, not %a",
                                 ref_isa_name(isa), cc_dtype_name(t), (long long)i, r[i], w);
                }
                checked += n;
                free(x);
                free(r);
                free(want);
                free(got);
            }
    }
    printf("dtype loops: %ld values through each of %d clones\n", checked / n_isa, n_isa);
    assert_true(checked > 0);
}

static void test_value_draws(void **state)
{
    (void)state;
    int n_isa = clones_here("value draws");
    const ref_domain domains[] = {{REF_DOM_NORMAL, 0, 0, 0, {0, 0}, 0},
                                  {REF_DOM_POSITIVE, 0, 0, 0, {0, 0}, 0},
                                  {REF_DOM_UNIT, 0, 0, 0, {0, 0}, 0},
                                  {REF_DOM_INDEX, 0, 7, 0, {0, 0}, 0}};
    static const int64_t starts[] = {0, 1, 511, 512, 1000001};
    static const int64_t lengths[] = {0, 1, 2, 3, 7, 8, 9, 511, 512, 513, 1100};
    enum { MAX_N = 1100 };
    static double want[MAX_N], got[MAX_N];
    long checked = 0;
    for (int stream = CC_STREAM_LIBM; stream <= CC_STREAM_PORTABLE; stream++)
        for (size_t di = 0; di < sizeof domains / sizeof domains[0]; di++)
            for (size_t si = 0; si < sizeof starts / sizeof starts[0]; si++)
                for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
                    uint64_t key = mix(stream * 1000 + di * 100 + si * 10 + li);
                    int64_t j0 = starts[si], n = lengths[li];
                    cc_draw_range(&domains[di], stream, key, j0, n, want);
                    if (domains[di].kind == REF_DOM_NORMAL)
                        for (int64_t t = 0; t < n; t++) { /* the one-element definitions */
                            double w = stream == CC_STREAM_PORTABLE ? cc_normal2_at(key, j0 + t)
                                                                    : cc_normal_at(key, j0 + t);
                            assert_true(same_bits(want[t], w));
                        }
                    for (int isa = 0; isa < REF_ISA_COUNT; isa++) {
                        memset(got, 0xff, sizeof got);
                        if (cc_draw_range_isa(isa, &domains[di], stream, key, j0, n, got) != 0)
                            continue;
                        for (int64_t t = 0; t < n; t++)
                            if (!same_bits(got[t], want[t]))
                                fail_msg("stream %d, domain %d, element %lld of [%lld, +%lld): "
                                         "the %s clone draws %a, the dispatched draw %a",
                                         stream, (int)domains[di].kind, (long long)(j0 + t),
                                         (long long)j0, (long long)n, ref_isa_name(isa), got[t],
                                         want[t]);
                        checked += n;
                    }
                }
    printf("value draws: %ld values through each of %d clones\n", checked / n_isa, n_isa);
    assert_true(checked > 0);
}

static void test_reference_row_times(void **state)
{
    (void)state;
    int n_isa = clones_here("reference row times matrix");
    static const int64_t counts[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 100};
    static const int64_t Ls[] = {0, 1, 5, 64};
    enum { MAX_COUNT = 100, MAX_L = 64, LD = 131 };
    static double x[MAX_L], M[MAX_L * LD], out[MAX_COUNT], out_abs[MAX_COUNT];
    long checked = 0;
    for (int64_t i = 0; i < MAX_L; i++)
        x[i] = any_value((uint64_t)i * 31 + 4, CC_F64) * (i % 7 == 3 ? 0.0 : 1.0);
    for (int64_t i = 0; i < MAX_L * LD; i++)
        M[i] = ldexp((double)(mix((uint64_t)i) >> 11) * 0x1p-53 - 0.5, (int)(i % 9) - 4);
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
        for (size_t li = 0; li < sizeof Ls / sizeof Ls[0]; li++) {
            int64_t count = counts[ci], L = Ls[li];
            for (int isa = 0; isa < REF_ISA_COUNT; isa++) {
                if (ref_row_times_isa(isa, x, L, M, LD, count, out, out_abs) != 0)
                    continue;
                for (int64_t k = 0; k < count; k++) { /* the plain loop (ref_families.h) */
                    double s = 0.0, a = 0.0;
                    for (int64_t l = 0; l < L; l++) {
                        double t = x[l] * M[l * LD + k];
                        s += t;
                        a += fabs(t);
                    }
                    if (!same_bits(out[k], s) || !same_bits(out_abs[k], a))
                        fail_msg("%s clone, L %lld, column %lld of %lld: %a and %a, the plain "
                                 "loop %a and %a",
                                 ref_isa_name(isa), (long long)L, (long long)k,
                                 (long long)count, out[k], out_abs[k], s, a);
                }
                checked += count;
            }
        }
    printf("reference row times matrix: %ld columns through each of %d clones\n",
           checked / n_isa, n_isa);
    assert_true(checked > 0);
}

int main(void)
{
#if REF_HAVE_VECTOR_CLONES && defined(REF_CLONE_NAMES_UNKNOWN)
    cc_t_skip("this compiler names its target_clones clones otherwise than fn.avx2: only the "
              "clone its dispatch picks is tested");
#endif
    /* the clones are distinct code: each instruction set's is its own function */
    cc_dtype_array_loops a, b;
    for (int i = 0; i < REF_ISA_COUNT; i++)
        for (int j = i + 1; j < REF_ISA_COUNT; j++)
            if (!cc_dtype_array_loops_isa(i, &a) && !cc_dtype_array_loops_isa(j, &b) &&
                (a.round_array == b.round_array || a.store_array == b.store_array)) {
                fprintf(stderr, "FAILED: the %s and %s clones are one function\n",
                        ref_isa_name(i), ref_isa_name(j));
                return 1;
            }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_array_loops),
        cmocka_unit_test(test_value_draws),
        cmocka_unit_test(test_reference_row_times),
    };
    return cc_t_exit_code(cmocka_run_group_tests_name("clones", tests, NULL, NULL));
}
