/* The fast input path against the simple one it replaced.
 *
 * The simple path is written out here as it was (d7d5838): every element drawn alone
 * (cc_normal_at, cc_uniform_at and the domain's transform), rounded with cc_round_to, stored
 * with cc_store at its strided offset into a NaN-filled buffer (the layouts, per-input strides
 * and offsets of main's materialize: chlast, sliced, explicit strides that may alias). The
 * fast path (bulk draws, the bucketed cosines of stream 1, the array rounding, the layout
 * stores, several threads) must give the same bits: the dense float64 values, the cotangent
 * and every byte of every provider buffer, gaps included, over every case of the smoke suite
 * and a slice of the nightly and edge files.
 * Stream 2 is checked against its one-element definition, against fixed bits (any compiler or
 * flag that changed them would change every stream-2 case), and as a normal distribution. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/bulk.h"
#include "core/dtype.h"
#include "harness/case/edges.h"
#include "harness/case/materialize.h"
#include "core/sha256.h"
#include "harness/case/values.h"
#include "test_util.h"

/* ---- the simple path ------------------------------------------------------------------------ */

/* Stream 2's positive domain, exp(z/2) by its own polynomial, as it was first written (one
 * element at a time): the staged bulk transform must give these bits. */
static double exp_portable_definition(double y)
{
    static const double c[] = {1.0 / 6227020800, 1.0 / 479001600, 1.0 / 39916800,
                               1.0 / 3628800,    1.0 / 362880,    1.0 / 40320,
                               1.0 / 5040,       1.0 / 720,       1.0 / 120,
                               1.0 / 24,         1.0 / 6,         0.5,
                               1.0,              1.0};
    double k = floor(y * 1.4426950408889634 + 0.5);
    double r = (y - k * 0x1.62e42feep-1) - k * 0x1.a39ef35793c76p-33;
    double p = c[0];
    for (size_t i = 1; i < sizeof c / sizeof c[0]; i++)
        p = p * r + c[i];
    uint64_t bits = (uint64_t)((int64_t)k + 1023) << 52;
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* Element j of domain d in value stream `stream`, one element at a time, by the definitions. */
static double simple_value(const ref_domain *d, int stream, uint64_t key, int64_t j)
{
    double x;
    int portable = stream == CC_STREAM_PORTABLE;
    switch (d->kind) {
    case REF_DOM_POSITIVE:
        x = portable ? exp_portable_definition(0.5 * cc_normal2_at(key, j))
                     : exp(0.5 * cc_normal_at(key, j));
        break;
    case REF_DOM_UNIT:
        x = cc_uniform_at(key, j);
        if (x == 0.0)
            x = 0.5;
        break;
    case REF_DOM_INDEX:
        x = d->hi >= 1 ? floor(cc_uniform_at(key, j) * floor(d->hi)) : 0.0;
        break;
    case REF_DOM_MASK:
        x = cc_uniform_at(key, j) < d->lo ? 1.0 : 0.0;
        break;
    default:
        x = portable ? cc_normal2_at(key, j) : cc_normal_at(key, j);
        break;
    }
    for (int a = 0; a < d->n_avoid && a < 2; a++)
        if (fabs(x - d->avoid[a]) < d->gap)
            x = d->avoid[a] + (x >= d->avoid[a] ? 2.0 : -2.0) * d->gap;
    return x;
}

/* Lays dense x out as the simple path did, through the view's strides from element `offset` of
 * a NaN-filled buffer of `phys` elements, one element at a time in row-major order (a place
 * several indices share keeps the last value); returns the buffer (the caller frees). */
static void *simple_lay_out(const cc_view *v, int64_t phys, int64_t offset, const double *x)
{
    ref_shape shape = {v->rank, {0}};
    memcpy(shape.dim, v->shape, sizeof(int64_t) * (size_t)v->rank);
    int64_t n = ref_numel(&shape);
    void *buf = calloc((size_t)(phys > 0 ? phys : 1), cc_dtype_size(v->dtype));
    for (int64_t i = 0; i < phys; i++)
        cc_store(v->dtype, buf, i, cc_dtype_is_float(v->dtype) ? NAN : 0);
    int64_t idx[REF_MAX_RANK] = {0};
    for (int64_t j = 0; j < n; j++) {
        int64_t off = offset;
        for (int a = 0; a < v->rank; a++)
            off += idx[a] * v->strides[a];
        cc_store(v->dtype, buf, off, x[j]);
        for (int a = v->rank - 1; a >= 0; a--) {
            if (++idx[a] < v->shape[a])
                break;
            idx[a] = 0;
        }
    }
    return buf;
}

/* x[j] read back from the simple buffer (an input whose explicit strides alias elements: the
 * reference gets what the provider sees). */
static void simple_read_back(const cc_view *v, const void *buf, int64_t offset, double *x)
{
    int64_t n = 1, idx[REF_MAX_RANK] = {0};
    for (int a = 0; a < v->rank; a++)
        n *= v->shape[a];
    for (int64_t j = 0; j < n; j++) {
        int64_t off = offset;
        for (int a = 0; a < v->rank; a++)
            off += idx[a] * v->strides[a];
        x[j] = cc_load(v->dtype, buf, off);
        for (int a = v->rank - 1; a >= 0; a--) {
            if (++idx[a] < v->shape[a])
                break;
            idx[a] = 0;
        }
    }
}

/* Compares the fast materialization of c (on `threads` threads) with the simple one; returns 0
 * or prints the first difference and returns -1. */
static int same_as_simple(const cc_case *c, int threads)
{
    cc_inputs in;
    char msg[256];
    if (cc_materialize_threads(c, threads, &in, msg, sizeof msg))
        return 0; /* a case the op refuses is refused by both paths alike */
    char line[CC_CASE_LINE_MAX];
    cc_case_print(c, line, sizeof line);
    int bad = 0;
    for (int i = 0; i <= c->n_in && !bad; i++) {
        int cot = i == c->n_in; /* the output cotangent last */
        const ref_shape *s = cot ? &in.out_shape : &c->shape[i];
        int64_t n = ref_numel(s);
        double *x = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
        ref_domain d = {REF_DOM_NORMAL, 0, 0, 0, {0, 0}, 0};
        if (!cot)
            ref_default_domain(c->op, &c->params, c->n_in, c->shape, i, &d);
        cc_input_layout lay = cc_case_input_layout(c, cot ? 0 : i);
        int bcast = !cot && lay.kind == CC_LAYOUT_BCAST && s->rank >= 2 && s->dim[0] > 1;
        int64_t distinct = bcast ? n / s->dim[0] : n;
        uint64_t key = cc_input_key(c->seed, cot ? 100 : i);
        if (d.kind == REF_DOM_DISTINCT)
            cc_draw_values(&d, key, distinct, x); /* a permutation: drawn whole either way */
        else
            for (int64_t j = 0; j < distinct; j++)
                x[j] = simple_value(&d, cc_case_stream(c), key, j);
        if (!cot)
            cc_edge_inject(c, i, &d, s, x, distinct);
        for (int64_t j = distinct; j < n; j++)
            x[j] = x[j % distinct];
        cc_dtype t = cot ? c->dtype : cc_input_dtype(c, i);
        if (cc_dtype_is_float(t))
            for (int64_t j = 0; j < n; j++)
                x[j] = cc_round_to(t, x[j]);
        const cc_view *v = cot ? &in.g_view : &in.view[i];
        const double *fast = cot ? in.g.v : in.ref_in[i].v;
        int64_t phys = cot ? n : in.storage_len[i], offset = cot ? 0 : in.offset[i];
        const void *storage = cot ? in.g_storage : in.storage[i];
        void *buf = simple_lay_out(v, phys, offset, x);
        int aliased = 0;
        for (int a = 0; !cot && lay.kind == CC_LAYOUT_STRIDED && a < s->rank; a++)
            aliased |= lay.strides[a] == 0 && s->dim[a] > 1;
        if (aliased)
            simple_read_back(v, buf, offset, x);
        if (n && memcmp(x, fast, sizeof(double) * (size_t)n) != 0) {
            fprintf(stderr, "dense values of %s %d differ: %s\n", cot ? "cotangent" : "input", i,
                    line);
            bad = 1;
        } else if (phys && memcmp(buf, storage, (size_t)phys * cc_dtype_size(t)) != 0) {
            fprintf(stderr, "provider buffer of %s %d differs: %s\n",
                    cot ? "cotangent" : "input", i, line);
            bad = 1;
        }
        free(buf);
        free(x);
    }
    cc_inputs_free(&in);
    return bad ? -1 : 0;
}

/* Every `every`-th case of a file, as written and in each value stream (the generated suites
 * draw stream 2; published lines, stream 1): both streams' fast paths on every op, dtype, layout
 * and edge class. */
static void check_file(const char *path, size_t every, int threads)
{
    cc_case_list l = {0};
    assert_int_equal(cc_t_load_cases(path, &l), 0);
    size_t checked = 0;
    for (size_t k = 0; k < l.n; k += every, checked++)
        for (int stream = 0; stream <= CC_STREAM_PORTABLE; stream++) { /* 0: as written */
            cc_case c = l.v[k];
            if (stream)
                c.stream = stream;
            if (same_as_simple(&c, threads))
                fail_msg("the fast input path differs from the simple one on %s", path);
        }
    fprintf(stderr, "%s: %zu cases in both value streams, bit-identical inputs\n", path, checked);
    assert_true(checked > 0);
    cc_case_list_free(&l);
}

static void test_smoke_inputs_are_bit_identical(void **state)
{
    (void)state;
    check_file(CAPCHECK_SOURCE_DIR "/cases/smoke.cases", 1, 1);
}

/* Every 8th nightly case (every op, dtype, layout and edge class appears) and every edge-file
 * case; scripts/bench-reference compares all of them with the old build. */
static void test_nightly_and_edge_inputs_are_bit_identical(void **state)
{
    (void)state;
    check_file(CAPCHECK_SOURCE_DIR "/cases/nightly.cases", 8, 1);
    check_file(CAPCHECK_SOURCE_DIR "/cases/edge/shapes.cases", 1, 1);
    check_file(CAPCHECK_SOURCE_DIR "/cases/edge/params.cases", 1, 1);
}

/* Large inputs are drawn on several threads: the same bits, in every layout and dtype (classes,
 * per-input layouts, explicit strides with an offset, an aliasing stride 0). */
static void test_threaded_inputs_are_bit_identical(void **state)
{
    (void)state;
    static const char *const lines[] = {
        "matmul dtype=f32 in=[300,700],[700,300] seed=1",
        "matmul dtype=bf16 in=[300,700],[700,300] layout=transpose seed=2",
        "matmul dtype=f16 in=[300,700],[700,300] layout=stride2 stream=2 seed=3",
        "add dtype=f64 in=[64,4096],[64,4096] layout=bcast seed=4",
        "log dtype=f32 in=[200000] stream=2 seed=5",
        "log dtype=bf16 in=[200000] edge=huge seed=6",
        "matmul dtype=f32 in=[300,700],[700,300] layout=chlast/sliced seed=7",
        "add dtype=bf16 in=[64,4096],[64,4096] layout=[0,1]/[8200,2]+5 seed=8", /* aliased */
        "mul dtype=f16 in=[64,4096],[64,4096] edge=nan layout=[1,64]/sliced seed=9",
    };
    for (size_t k = 0; k < sizeof lines / sizeof lines[0]; k++) {
        cc_case c = cc_t_parse_case(lines[k]);
        if (same_as_simple(&c, 4))
            fail_msg("threaded inputs differ from the simple path: %s", lines[k]);
        cc_inputs one, four;
        char msg[256];
        assert_int_equal(cc_materialize_threads(&c, 1, &one, msg, sizeof msg), 0);
        assert_int_equal(cc_materialize_threads(&c, 4, &four, msg, sizeof msg), 0);
        for (int i = 0; i < c.n_in; i++) {
            assert_memory_equal(one.ref_in[i].v, four.ref_in[i].v,
                                sizeof(double) * (size_t)ref_numel(&c.shape[i]));
            /* the provider buffers too (blocks are stored as they are drawn, on every thread) */
            assert_int_equal(one.storage_len[i], four.storage_len[i]);
            assert_memory_equal(one.storage[i], four.storage[i],
                                (size_t)one.storage_len[i] * cc_dtype_size(one.view[i].dtype));
        }
        assert_memory_equal(one.g.v, four.g.v,
                            sizeof(double) * (size_t)ref_numel(&one.out_shape));
        cc_inputs_free(&one);
        cc_inputs_free(&four);
    }
}

/* Bulk draws equal the one-element definitions, from any start and across block edges. */
static void test_bulk_draws_match_their_definition(void **state)
{
    (void)state;
    enum { N = 1500 };
    double out[N];
    static const int64_t starts[] = {0, 1, 2, 511, 512, 1000001, 77777777};
    for (size_t s = 0; s < sizeof starts / sizeof starts[0]; s++)
        for (int64_t n = 0; n <= N; n += n < 20 ? 1 : 373) {
            uint64_t key = cc_input_key(0xabcdefULL + (uint64_t)s, (int)n);
            cc_draw_normal(CC_STREAM_LIBM, key, starts[s], n, out);
            for (int64_t t = 0; t < n; t++)
                assert_true(out[t] == cc_normal_at(key, starts[s] + t));
            cc_draw_normal(CC_STREAM_PORTABLE, key, starts[s], n, out);
            for (int64_t t = 0; t < n; t++)
                assert_true(out[t] == cc_normal2_at(key, starts[s] + t));
            cc_draw_uniform(key, starts[s], n, out);
            for (int64_t t = 0; t < n; t++)
                assert_true(out[t] == cc_uniform_at(key, starts[s] + t));
        }
}

static void test_stream2_positive_matches_its_definition(void **state)
{
    (void)state;
    enum { N = 3000 };
    double out[N];
    ref_domain d = {REF_DOM_POSITIVE, 0, 0, 0, {0, 0}, 0};
    static const int64_t starts[] = {0, 1, 255, 1000001};
    for (size_t s = 0; s < sizeof starts / sizeof starts[0]; s++)
        for (int64_t n = 0; n <= N; n += n < 20 ? 1 : 257) {
            uint64_t key = cc_input_key(0x5eedULL + (uint64_t)s, (int)n);
            cc_draw_range(&d, CC_STREAM_PORTABLE, key, starts[s], n, out);
            for (int64_t t = 0; t < n; t++)
                assert_true(out[t] ==
                            exp_portable_definition(0.5 * cc_normal2_at(key, starts[s] + t)));
        }
}

/* Printed by this test when its stream-2 kernel was first written (gcc 12 and clang 14, -O0 to
 * -O3, scalar, AVX2 and AVX-512 code all gave these bits). */
#define STREAM2_FIRST0 0x1.abc182691b6d5p-1
#define STREAM2_FIRST1 -0x1.6cffefe25942fp-1
#define STREAM2_FIRST2 0x1.6d754b93b1068p-3
#define STREAM2_DIGEST "0fb378787094c7b7e6ec55851bc0595c86fb29a72547fa4ae6a83b0062f3554b"

/* Stream 2's bits are fixed: its first values under one key, and a digest of a million. */
static void test_stream2_bits_are_fixed(void **state)
{
    (void)state;
    enum { N = 1 << 20 };
    double *x = malloc(sizeof(double) * N);
    assert_non_null(x);
    uint64_t key = cc_input_key(42, 0);
    cc_draw_normal(CC_STREAM_PORTABLE, key, 0, N, x);
    char hex[65];
    cc_sha256_ctx h;
    cc_sha256_init(&h);
    cc_sha256_update(&h, x, sizeof(double) * N);
    cc_sha256_final_hex(&h, hex);
    fprintf(stderr, "stream 2, seed 42 input 0: %a %a %a ...; sha256 of 2^20 values: %s\n",
            x[0], x[1], x[2], hex);
    assert_true(x[0] == STREAM2_FIRST0 && x[1] == STREAM2_FIRST1 && x[2] == STREAM2_FIRST2);
    assert_string_equal(hex, STREAM2_DIGEST);
    /* N(0,1): mean, variance and the share within one sigma, each at 6 standard errors */
    double s1 = 0, s2 = 0, within = 0;
    for (int j = 0; j < N; j++) {
        s1 += x[j];
        s2 += x[j] * x[j];
        within += fabs(x[j]) < 1.0;
    }
    double mean = s1 / N, var = s2 / N - mean * mean, share = within / N;
    assert_true(fabs(mean) < 6.0 / sqrt((double)N));
    assert_true(fabs(var - 1.0) < 6.0 * sqrt(2.0 / N));
    assert_true(fabs(share - 0.6826894921370859) < 6.0 * sqrt(0.2166 / N));
    free(x);
}

/* sha256 over the dense float64 inputs and the cotangent of a case line (what both sides see). */
static void inputs_digest(const char *line, char hex[65])
{
    cc_case c = cc_t_parse_case(line);
    cc_inputs in;
    char msg[256];
    assert_int_equal(cc_materialize(&c, &in, msg, sizeof msg), 0);
    cc_sha256_ctx h;
    cc_sha256_init(&h);
    for (int i = 0; i < in.n_in; i++)
        cc_sha256_update(&h, in.ref_in[i].v, sizeof(double) * (size_t)ref_numel(&in.ref_in[i].shape));
    cc_sha256_update(&h, in.g.v, sizeof(double) * (size_t)ref_numel(&in.g.shape));
    cc_sha256_final_hex(&h, hex);
    cc_inputs_free(&in);
}

/* A hand-written line without stream= draws stream 2, the portable stream: its values are
 * pinned here (the same bits with every libm, compiler and CPU), equal to the line with stream=2
 * and unlike stream=1's. */
#define PLAIN_LINE_DIGEST "f165612e22cf78289b4c8a649e4386219f958d930940f4956f127b053133e318"
static void test_a_line_without_stream_draws_stream_2(void **state)
{
    (void)state;
    char plain[65], two[65], one[65];
    inputs_digest("layerNorm dtype=f32 in=[64,257],[257],[257] seed=11", plain);
    inputs_digest("layerNorm dtype=f32 in=[64,257],[257],[257] stream=2 seed=11", two);
    inputs_digest("layerNorm dtype=f32 in=[64,257],[257],[257] stream=1 seed=11", one);
    fprintf(stderr, "a line without stream=: inputs sha256 %s\n", plain);
    assert_string_equal(plain, PLAIN_LINE_DIGEST);
    assert_string_equal(plain, two);
    assert_string_not_equal(plain, one);
}

/* The array conversions equal the one-element ones on every kind of value. */
/* cc_find_nonfinite reads bits a block at a time: it finds every NaN and Inf (in order, in the
 * first block, at block edges, at the end) and nothing else, in every format. */
static void test_find_nonfinite(void **state)
{
    (void)state;
    enum { N = 20000 };
    static const int64_t at[] = {0, 4095, 4096, 4097, 8191, 12345, N - 1};
    static const cc_dtype types[] = {CC_F64, CC_F32, CC_F16, CC_BF16, CC_I64, CC_U8};
    void *buf = malloc(8 * (size_t)N);
    assert_non_null(buf);
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        cc_dtype t = types[k];
        for (int j = 0; j < N; j++) /* finite, up to the largest finite value of t */
            cc_store(t, buf, j, j % 3 == 0 ? cc_max_finite(t) : -(double)(j % 97) * 0.25);
        assert_int_equal(cc_find_nonfinite(t, buf, 0, N), -1);
        if (!cc_dtype_is_float(t))
            continue;
        for (size_t a = 0; a < sizeof at / sizeof at[0]; a++)
            cc_store(t, buf, at[a], a % 3 == 0 ? NAN : a % 3 == 1 ? INFINITY : -INFINITY);
        int64_t from = 0;
        for (size_t a = 0; a < sizeof at / sizeof at[0]; a++) {
            from = cc_find_nonfinite(t, buf, from, N - from);
            assert_int_equal(from, at[a]);
            from++;
        }
        assert_int_equal(cc_find_nonfinite(t, buf, from, N - from), -1);
        assert_int_equal(cc_find_nonfinite(t, buf, 1, 4094), -1); /* a range between two */
        assert_int_equal(cc_find_nonfinite(t, buf, 12340, 10), 12345);
    }
    free(buf);
}

/* core/bulk.h: large regions are kept and handed out again (no new pages for the next case of
 * the same size), small ones are malloc's, and everything reads and writes in full. */
static void test_bulk_regions(void **state)
{
    (void)state;
    cc_bulk_trim(); /* none kept from the tests before */
    size_t big = (size_t)9 << 20, small = 1000;
    unsigned char *a = cc_alloc_big(big), *b = cc_alloc_big(small);
    assert_non_null(a);
    assert_non_null(b);
    memset(a, 1, big), memset(b, 2, small);
    assert_int_equal(a[big - 1] + b[small - 1], 3);
    cc_free_big(a);
    cc_free_big(b);
    cc_free_big(NULL);
#ifdef __linux__
    unsigned char *c = cc_alloc_big(big - 4096); /* fits the kept region: the same one back */
    assert_ptr_equal(c, a);
    assert_int_equal(c[0], 1);
    unsigned char *d = cc_alloc_big(big * 3); /* a larger one: new */
    assert_ptr_not_equal(d, a);
    memset(d, 3, big * 3);
    cc_free_big(c);
    cc_free_big(d);
    cc_bulk_trim();
#endif
}

static void test_array_conversions_match_scalar_ones(void **state)
{
    (void)state;
    enum { N = 400000 };
    double *x = malloc(sizeof(double) * N), *y = malloc(sizeof(double) * N);
    double *back = malloc(sizeof(double) * N);
    void *buf = malloc(8 * (size_t)N * 2), *ref = malloc(8 * (size_t)N * 2);
    assert_true(x && y && back && buf && ref);
    ref_rng r = {7};
    for (int j = 0; j < N; j++) {
        uint64_t h = ref_rng_next(&r);
        switch (j % 8) {
        case 0: /* any double at all, NaN and Inf included */
            memcpy(&x[j], &h, sizeof h);
            break;
        case 1: /* ties and near ties of the narrow formats */
            x[j] = ldexp((double)(h >> 40) + 0.5, (int)(h % 64) - 40);
            break;
        case 2: /* subnormals of f16, bf16, f32 */
            x[j] = ldexp((double)(h >> 11) * 0x1p-53, -(int)(h % 160));
            break;
        case 3: /* around the largest finite values */
            x[j] = (h & 1 ? -1 : 1) * ldexp(1.0 + (double)(h >> 12) * 0x1p-52,
                                            (h >> 1 & 1) ? 15 : 127);
            break;
        default:
            x[j] = ((double)(h >> 11) * 0x1p-53 - 0.5) * ldexp(1.0, (int)(h % 40) - 20);
            break;
        }
    }
    static const cc_dtype types[] = {CC_F64, CC_F32, CC_F16, CC_BF16};
    for (size_t k = 0; k < 4; k++) {
        cc_dtype t = types[k];
        memcpy(y, x, sizeof(double) * N);
        cc_round_array(t, y, N);
        for (int j = 0; j < N; j++) {
            double want = cc_round_to(t, x[j]);
            if (memcmp(&want, &y[j], sizeof want) != 0)
                fail_msg("%s: cc_round_array(%a) = %a, cc_round_to gives %a", cc_dtype_name(t),
                         x[j], y[j], want);
        }
        for (int64_t stride = 1; stride <= 2; stride++) {
            cc_fill_nan(t, buf, 2 * N);
            for (int j = 0; j < 2 * N; j++)
                cc_store(t, ref, j, cc_dtype_is_float(t) ? NAN : 0);
            cc_store_array(t, buf, 0, stride, y, N);
            for (int j = 0; j < N; j++)
                cc_store(t, ref, j * stride, y[j]);
            assert_memory_equal(buf, ref, (size_t)(2 * N) * cc_dtype_size(t));
            cc_load_array(t, buf, 0, stride, back, N);
            for (int j = 0; j < N; j++) {
                double want = cc_load(t, ref, j * stride);
                assert_memory_equal(&want, &back[j], sizeof want);
            }
        }
    }
    free(x), free(y), free(back), free(buf), free(ref);
}

/* stream= and ref= on case lines: a line without stream= draws stream 2, every printed line
 * names its stream (stream=1 only where a line says so), ref= is printed when not the default;
 * read back, bad values refused. */
static void test_stream_and_ref_keys(void **state)
{
    (void)state;
    char line[CC_CASE_LINE_MAX];
    cc_case c = cc_t_parse_case("relu in=[4] seed=3");
    assert_int_equal(cc_case_stream(&c), CC_STREAM_PORTABLE);
    cc_case_print(&c, line, sizeof line);
    assert_non_null(strstr(line, " stream=2 "));
    cc_case zeroed; /* a case built in code, zero-initialised, draws the default too */
    memset(&zeroed, 0, sizeof zeroed);
    assert_int_equal(cc_case_stream(&zeroed), CC_STREAM_PORTABLE);
    c = cc_t_parse_case("relu in=[4] stream=1 seed=3");
    assert_int_equal(cc_case_stream(&c), CC_STREAM_LIBM);
    cc_case_print(&c, line, sizeof line);
    assert_non_null(strstr(line, " stream=1 "));
    c = cc_t_parse_case("matmul in=[4,5],[5,6] stream=2 ref=full seed=3");
    cc_case_print(&c, line, sizeof line);
    assert_non_null(strstr(line, " stream=2 ref=full "));
    cc_case back = cc_t_parse_case(line);
    assert_memory_equal(&back, &c, sizeof c);
    cc_case_defaults def = {CC_CPU, 0};
    cc_parse_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(cc_case_parse("relu in=[4] stream=3", &def, &c, &err), -1);
    assert_non_null(strstr(err.msg, "value stream '3'"));
    assert_int_equal(err.column, 20);
    assert_int_equal(cc_case_parse("relu in=[4] ref=most", &def, &c, &err), -1);
    assert_non_null(strstr(err.msg, "reference mode 'most'"));
    cc_case_list l = {0};
    assert_int_equal(cc_cases_parse_text("relu count=3 stream=2 ref=sampled", "t", &def, &l, &err), 0);
    assert_int_equal(l.n, 3);
    for (size_t k = 0; k < l.n; k++)
        assert_true(cc_case_stream(&l.v[k]) == 2 && l.v[k].ref == CC_REF_SAMPLED);
    cc_case_list_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_and_ref_keys),
        cmocka_unit_test(test_bulk_draws_match_their_definition),
        cmocka_unit_test(test_stream2_bits_are_fixed),
        cmocka_unit_test(test_a_line_without_stream_draws_stream_2),
        cmocka_unit_test(test_stream2_positive_matches_its_definition),
        cmocka_unit_test(test_array_conversions_match_scalar_ones),
        cmocka_unit_test(test_find_nonfinite),
        cmocka_unit_test(test_bulk_regions),
        cmocka_unit_test(test_smoke_inputs_are_bit_identical),
        cmocka_unit_test(test_nightly_and_edge_inputs_are_bit_identical),
        cmocka_unit_test(test_threaded_inputs_are_bit_identical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
