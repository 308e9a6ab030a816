/* Value streams (values.h). CMake compiles this file with -O3 -fno-math-errno -fno-trapping-math (outside coverage
 * builds) so the stream-2 kernel is vectorized; neither flag changes a value: no contraction
 * (-ffp-contract=off everywhere), no reassociation, and sqrt is IEEE's either way. */
#include "harness/case/values.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference/ref_parallel.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define TWO_POW_M53 (1.0 / 9007199254740992.0)

/* The vectorized loops of a draw (REF_VECTOR_CLONES, below): the dispatched clones, or one
 * instruction set's (cc_draw_range_isa). */
typedef struct {
    void (*uniforms1)(uint64_t key, int64_t j0, int n, double *u1, double *angle,
                      unsigned char *slice);
    void (*pairs2)(uint64_t key, int64_t p0, int64_t np, double *out);
    void (*exp_half)(double *x, int64_t n);
} value_loops;

uint64_t cc_input_key(uint64_t seed, int input_index)
{
    return ref_splitmix64(seed ^ ref_splitmix64(0xc0ffee00ULL + (uint64_t)input_index));
}

static inline double uniform53(uint64_t h)
{
    return (double)(h >> 11) * TWO_POW_M53;
}

double cc_uniform_at(uint64_t key, int64_t j)
{
    return uniform53(ref_splitmix64(key + (uint64_t)j));
}

void cc_draw_uniform(uint64_t key, int64_t j0, int64_t n, double *out)
{
    for (int64_t t = 0; t < n; t++)
        out[t] = uniform53(ref_splitmix64(key + (uint64_t)(j0 + t)));
}

/* ---- stream 1 ------------------------------------------------------------------------------- */

/* Box-Muller on two counter draws; u1 is kept away from 0 so log stays finite. */
double cc_normal_at(uint64_t key, int64_t j)
{
    double u1 = cc_uniform_at(key, 2 * j) + TWO_POW_M53;
    double u2 = cc_uniform_at(key, 2 * j + 1);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* The same values a block at a time, stage by stage: the hashes, uniforms and angles in one
 * loop without calls (compiled for the widest vectors: 64-bit multiplies and conversions are
 * exact at every width), then libm's log of each, the radii, the cosines, the products. libm's
 * cos takes one of several paths by the size of its argument, and random arguments make that
 * branch unpredictable (it doubled the cost of a value): the block's cosines are taken in the
 * order of their argument's top bits (a counting sort into 128 slices of [0, 2 pi)), so
 * neighbouring calls take the same path. Each value is still the very expression of
 * cc_normal_at, with the same arguments to log and cos. */
enum { STREAM1_BLOCK = 512, STREAM1_SLICES = 128 };

REF_VECTOR_CLONES
static void normal1_uniforms(uint64_t key, int64_t j0, int n, double *restrict u1,
                             double *restrict angle, unsigned char *restrict slice)
{
    for (int t = 0; t < n; t++) {
        uint64_t j = (uint64_t)(j0 + t);
        uint64_t h1 = ref_splitmix64(key + 2 * j), h2 = ref_splitmix64(key + 2 * j + 1);
        u1[t] = uniform53(h1) + TWO_POW_M53;
        angle[t] = 6.283185307179586 * uniform53(h2);
        slice[t] = (unsigned char)(h2 >> 57); /* floor(u2 * 128) */
    }
}

static void normal1_block(const value_loops *loops, uint64_t key, int64_t j0, int n,
                          double *out)
{
    double radius[STREAM1_BLOCK], angle[STREAM1_BLOCK], cosine[STREAM1_BLOCK];
    unsigned char slice[STREAM1_BLOCK];
    uint16_t order[STREAM1_BLOCK];
    int start[STREAM1_SLICES + 1] = {0};
    loops->uniforms1(key, j0, n, radius, angle, slice);
    for (int t = 0; t < n; t++)
        radius[t] = log(radius[t]);
    for (int t = 0; t < n; t++)
        radius[t] = sqrt(-2.0 * radius[t]);
    for (int t = 0; t < n; t++)
        start[slice[t] + 1]++;
    for (int s = 0; s < STREAM1_SLICES; s++)
        start[s + 1] += start[s];
    for (int t = 0; t < n; t++)
        order[start[slice[t]]++] = (uint16_t)t;
    for (int k = 0; k < n; k++)
        cosine[order[k]] = cos(angle[order[k]]);
    for (int t = 0; t < n; t++)
        out[t] = radius[t] * cosine[t];
}

/* ---- stream 2 ------------------------------------------------------------------------------- */

static inline double bits_to_double(uint64_t b)
{
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

static inline uint64_t double_to_bits(double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    return b;
}

/* An integer 0 <= v < 2^52 as a double, exactly: the bits of 2^52 + v, minus 2^52. */
static inline double small_int_to_double(uint64_t v)
{
    return bits_to_double(0x4330000000000000ULL | v) - 0x1p52;
}

/* c[0] x^(n-1) + c[1] x^(n-2) + ... + c[n-1] by Horner's rule, left to right. */
static inline double horner(const double *c, int n, double x)
{
    double p = c[0];
    for (int k = 1; k < n; k++)
        p = p * x + c[k];
    return p;
}

/* The polynomials of stream 2 (Taylor coefficients; written once, fixed forever) */
static const double atanh_odd[] = {1.0 / 17, 1.0 / 15, 1.0 / 13, 1.0 / 11, 1.0 / 9,
                                   1.0 / 7,  1.0 / 5,  1.0 / 3,  1.0};  /* in s^2 */
static const double sin_tail[] = {-1.0 / 1307674368000, 1.0 / 6227020800, -1.0 / 39916800,
                                  1.0 / 362880,         -1.0 / 5040,      1.0 / 120,
                                  -1.0 / 6}; /* (sin x - x) / x^3 in x^2 */
static const double cos_tail[] = {1.0 / 20922789888000, -1.0 / 87178291200, 1.0 / 479001600,
                                  -1.0 / 3628800,       1.0 / 40320,        -1.0 / 720,
                                  1.0 / 24,             -0.5}; /* (cos x - 1) / x^2 in x^2 */
static const double exp_all[] = {1.0 / 6227020800, 1.0 / 479001600, 1.0 / 39916800,
                                 1.0 / 3628800,    1.0 / 362880,    1.0 / 40320,
                                 1.0 / 5040,       1.0 / 720,       1.0 / 120,
                                 1.0 / 24,         1.0 / 6,         0.5,
                                 1.0,              1.0}; /* e^r to r^13 */
#define COUNT(a) ((int)(sizeof a / sizeof a[0]))

/* Pair p of stream 2: one draw h = splitmix64(key + p); u1 = (2 (h >> 32) + 1) 2^-33 in (0, 1),
 * the angle 2 pi (h mod 2^32) / 2^32. z0 = rho cos(angle) is element 2p, z1 = rho sin(angle)
 * element 2p + 1, rho = sqrt(-2 ln u1).
 *   ln u1 = (e - 33) ln 2 + ln m with v = 2 (h >> 32) + 1 = m 2^e, m in [sqrt(1/2), sqrt(2)),
 *           ln m = 2 atanh(s) = 2 (s + s^3/3 + ... + s^17/17), s = (m - 1)/(m + 1), |s| < 0.172
 *           (relative error below 2e-15);
 *   angle   = quadrant q (the top two bits) + pi/4 + x, x in [-pi/4, pi/4) from the other 30
 *           bits; sin x and cos x by their Taylor polynomials to x^13 and x^14 (error below
 *           1e-16), then sin and cos of pi/4 + x by the angle sum, then the quadrant's rotation.
 * Written branch-free so the loop below vectorizes; every operation is an IEEE double
 * operation, so every vector width gives the same bits. */
static inline void normal2_pair(uint64_t h, double *z0, double *z1)
{
    double v = small_int_to_double(((h >> 32) << 1) | 1);
    uint64_t vb = double_to_bits(v);
    double e = (double)((int64_t)(vb >> 52) - 1023);
    double m = bits_to_double((vb & 0xfffffffffffffULL) | 0x3ff0000000000000ULL);
    double big = m > 1.4142135623730951 ? 1.0 : 0.0;
    m = m * (1.0 - 0.5 * big);
    e = e + big - 33.0;
    double s = (m - 1.0) / (m + 1.0);
    double rho = sqrt(-2.0 * (e * 0.6931471805599453 +
                              2.0 * s * horner(atanh_odd, COUNT(atanh_odd), s * s)));

    uint64_t lo = h & 0xffffffffULL, q = lo >> 30;
    double x = (small_int_to_double(lo & 0x3fffffffULL) * 0x1p-30 - 0.5) * 1.5707963267948966;
    double x2 = x * x;
    double sin_x = x + x * x2 * horner(sin_tail, COUNT(sin_tail), x2);
    double cos_x = 1.0 + x2 * horner(cos_tail, COUNT(cos_tail), x2);
    double sin_phi = (sin_x + cos_x) * 0.7071067811865476; /* phi = pi/4 + x */
    double cos_phi = (cos_x - sin_x) * 0.7071067811865476;
    /* angle = q pi/2 + phi: odd quadrants swap sine and cosine; the cosine is negative in
     * quadrants 1 and 2, the sine in 2 and 3 */
    double c = (q & 1) ? sin_phi : cos_phi, sn = (q & 1) ? cos_phi : sin_phi;
    c = bits_to_double(double_to_bits(c) ^ (((q ^ (q >> 1)) & 1) << 63));
    sn = bits_to_double(double_to_bits(sn) ^ ((q >> 1) << 63));
    *z0 = rho * c;
    *z1 = rho * sn;
}

double cc_normal2_at(uint64_t key, int64_t j)
{
    double z0, z1;
    normal2_pair(ref_splitmix64(key + (uint64_t)(j >> 1)), &z0, &z1);
    return j & 1 ? z1 : z0;
}

/* Pairs p0 .. p0+np-1 into out[2t], out[2t+1], a block of pairs at a time and stage by stage.
 * Why staged: one pair is a few long chains of dependent operations (Horner steps of 9, 7 and
 * 8 multiply-adds, no contraction, then a divide and a sqrt), so a loop that takes each vector
 * of pairs from its hash to its values waits on latency: one such iteration fills the CPU's
 * reorder window alone (it ran at a third of the arithmetic's throughput). Here each stage is a
 * loop over the whole block (the hashes and the reduced arguments; then each Horner step; then
 * the radius, the angle sums and the quadrant's rotation), so neighbouring iterations are
 * independent and overlap. Every value still takes exactly normal2_pair's IEEE operations in
 * normal2_pair's order (horner_block is horner, step for step): only the order in which
 * different pairs' operations run has changed, which no value sees. test_values checks both
 * against each other and against fixed bits. */
enum { STREAM2_BLOCK = 256 };

/* p[t] = horner(c, n, x[t]) for t < m, one Horner step at a time over the block */
static inline void horner_block(const double *c, int n, const double *restrict x,
                                double *restrict p, int m)
{
    for (int t = 0; t < m; t++)
        p[t] = c[0];
    for (int k = 1; k < n; k++)
        for (int t = 0; t < m; t++)
            p[t] = p[t] * x[t] + c[k];
}

/* Compiled for the widest vectors the CPU has. */
REF_VECTOR_CLONES
static void normal2_pairs(uint64_t key, int64_t p0, int64_t np, double *restrict out)
{
    double e[STREAM2_BLOCK], s[STREAM2_BLOCK], s2[STREAM2_BLOCK], x[STREAM2_BLOCK],
        x2[STREAM2_BLOCK], pa[STREAM2_BLOCK], ps[STREAM2_BLOCK], pc[STREAM2_BLOCK];
    uint64_t q[STREAM2_BLOCK];
    for (int64_t b = 0; b < np; b += STREAM2_BLOCK) {
        int m = (int)(np - b < STREAM2_BLOCK ? np - b : STREAM2_BLOCK);
        double *restrict o = out + 2 * b;
        /* the hash; ln u1's exponent and reduced argument s; the angle's quadrant and x */
        for (int t = 0; t < m; t++) {
            uint64_t h = ref_splitmix64(key + (uint64_t)(p0 + b + t));
            double v = small_int_to_double(((h >> 32) << 1) | 1);
            uint64_t vb = double_to_bits(v);
            /* normal2_pair's (double)((int64_t)(vb >> 52) - 1023), an integer in [0, 32]: as
             * exact this way, and this way vectorizes without AVX-512's 64-bit conversion */
            double ex = small_int_to_double((vb >> 52) - 1023);
            double mt = bits_to_double((vb & 0xfffffffffffffULL) | 0x3ff0000000000000ULL);
            double big = mt > 1.4142135623730951 ? 1.0 : 0.0;
            mt = mt * (1.0 - 0.5 * big);
            e[t] = ex + big - 33.0;
            s[t] = (mt - 1.0) / (mt + 1.0);
            s2[t] = s[t] * s[t];
            uint64_t lo = h & 0xffffffffULL;
            q[t] = lo >> 30;
            x[t] = (small_int_to_double(lo & 0x3fffffffULL) * 0x1p-30 - 0.5) * 1.5707963267948966;
            x2[t] = x[t] * x[t];
        }
        horner_block(atanh_odd, COUNT(atanh_odd), s2, pa, m);
        horner_block(sin_tail, COUNT(sin_tail), x2, ps, m);
        horner_block(cos_tail, COUNT(cos_tail), x2, pc, m);
        /* rho, sin and cos of pi/4 + x, the quadrant's rotation: as in normal2_pair */
        for (int t = 0; t < m; t++) {
            double rho = sqrt(-2.0 * (e[t] * 0.6931471805599453 + 2.0 * s[t] * pa[t]));
            double sin_x = x[t] + x[t] * x2[t] * ps[t];
            double cos_x = 1.0 + x2[t] * pc[t];
            double sin_phi = (sin_x + cos_x) * 0.7071067811865476;
            double cos_phi = (cos_x - sin_x) * 0.7071067811865476;
            uint64_t qt = q[t];
            double c = (qt & 1) ? sin_phi : cos_phi, sn = (qt & 1) ? cos_phi : sin_phi;
            c = bits_to_double(double_to_bits(c) ^ (((qt ^ (qt >> 1)) & 1) << 63));
            sn = bits_to_double(double_to_bits(sn) ^ ((qt >> 1) << 63));
            o[2 * t] = rho * c;
            o[2 * t + 1] = rho * sn;
        }
    }
}

/* x[t] = e^y, y = 0.5 x[t], for t < n: stream 2's positive domain, exp(z/2), for |y| < 700:
 * 2^k e^r, k = round(y / ln 2), r = y - k ln 2 in two parts (the first is exact: ln2_hi has 32
 * bits), e^r by its Taylor polynomial to r^13 (|r| <= 0.35: error below 1e-16). Staged over
 * blocks as normal2_pairs is (the Horner chain of 13 steps is one long dependency per element);
 * each element takes these operations in this order. 2^k is built from its bits: k + 1023 is
 * an integer in [13, 2033], read off the double k + (2^52 + 1023) (an exact sum) rather than
 * converted to int64, which AVX2 has no vector instruction for. */
REF_VECTOR_CLONES
static void exp_half_portable(double *restrict x, int64_t n)
{
    double k[STREAM2_BLOCK], r[STREAM2_BLOCK], p[STREAM2_BLOCK];
    for (int64_t b = 0; b < n; b += STREAM2_BLOCK) {
        int m = (int)(n - b < STREAM2_BLOCK ? n - b : STREAM2_BLOCK);
        double *restrict o = x + b;
        for (int t = 0; t < m; t++) {
            double y = 0.5 * o[t];
            k[t] = floor(y * 1.4426950408889634 + 0.5);
            r[t] = (y - k[t] * 0x1.62e42feep-1) - k[t] * 0x1.a39ef35793c76p-33;
        }
        horner_block(exp_all, COUNT(exp_all), r, p, m);
        for (int t = 0; t < m; t++)
            o[t] = p[t] * bits_to_double(double_to_bits(k[t] + (0x1p52 + 1023.0)) << 52);
    }
}

REF_VECTOR_CLONE_DECLS(normal1_uniforms);
REF_VECTOR_CLONE_DECLS(normal2_pairs);
REF_VECTOR_CLONE_DECLS(exp_half_portable);

static value_loops dispatched_loops(void)
{
    return (value_loops){normal1_uniforms, normal2_pairs, exp_half_portable};
}

static void draw_normal(const value_loops *loops, int stream, uint64_t key, int64_t j0,
                        int64_t n, double *out)
{
    if (n <= 0)
        return;
    if (stream != CC_STREAM_PORTABLE) {
        for (int64_t t = 0; t < n; t += STREAM1_BLOCK)
            normal1_block(loops, key, j0 + t,
                          (int)(n - t < STREAM1_BLOCK ? n - t : STREAM1_BLOCK), out + t);
        return;
    }
    int64_t j = j0, end = j0 + n;
    if (j & 1) /* a range that starts on the sine of a pair */
        *out++ = cc_normal2_at(key, j++);
    int64_t pairs = (end - j) / 2;
    loops->pairs2(key, j / 2, pairs, out);
    out += 2 * pairs;
    j += 2 * pairs;
    if (j < end)
        *out = cc_normal2_at(key, j);
}

/* ---- domains -------------------------------------------------------------------------------- */

typedef struct {
    uint64_t key;
    int64_t j;
} shuffle_key;

static int by_key(const void *a, const void *b)
{
    uint64_t x = ((const shuffle_key *)a)->key, y = ((const shuffle_key *)b)->key;
    return x < y ? -1 : x > y;
}

/* Element j gets the quarter-step of its rank under a hash ordering: distinct values in a
 * reproducible random order. */
static void draw_distinct(uint64_t key, int64_t n, double *out)
{
    shuffle_key *k = malloc(sizeof *k * (size_t)(n > 0 ? n : 1));
    if (!k) { /* fall back to ordered distinct values */
        for (int64_t j = 0; j < n; j++)
            out[j] = ((double)j - (double)(n / 2)) / 4.0;
        return;
    }
    for (int64_t j = 0; j < n; j++) {
        k[j].key = ref_splitmix64(key + (uint64_t)j);
        k[j].j = j;
    }
    qsort(k, (size_t)n, sizeof *k, by_key);
    for (int64_t r = 0; r < n; r++)
        out[k[r].j] = ((double)r - (double)(n / 2)) / 4.0;
    free(k);
}

void cc_draw_normal(int stream, uint64_t key, int64_t j0, int64_t n, double *out)
{
    value_loops loops = dispatched_loops();
    draw_normal(&loops, stream, key, j0, n, out);
}

static void draw_range(const value_loops *loops, const ref_domain *d, int stream, uint64_t key,
                       int64_t j0, int64_t n, double *out);

void cc_draw_range(const ref_domain *d, int stream, uint64_t key, int64_t j0, int64_t n,
                   double *out)
{
    value_loops loops = dispatched_loops();
    draw_range(&loops, d, stream, key, j0, n, out);
}

int cc_draw_range_isa(int isa, const ref_domain *d, int stream, uint64_t key, int64_t j0,
                      int64_t n, double *out)
{
    if (!ref_isa_runs(isa))
        return -1;
    value_loops loops = {REF_VECTOR_CLONE(normal1_uniforms, isa),
                         REF_VECTOR_CLONE(normal2_pairs, isa),
                         REF_VECTOR_CLONE(exp_half_portable, isa)};
    draw_range(&loops, d, stream, key, j0, n, out);
    return 0;
}

static void draw_range(const value_loops *loops, const ref_domain *d, int stream, uint64_t key,
                       int64_t j0, int64_t n, double *out)
{
    if (d->kind == REF_DOM_DISTINCT) {
        draw_distinct(key, n, out);
        return;
    }
    /* the domain's base draw, in bulk, then its transform */
    if (d->kind == REF_DOM_NORMAL || d->kind == REF_DOM_POSITIVE)
        draw_normal(loops, stream, key, j0, n, out);
    else
        cc_draw_uniform(key, j0, n, out);
    switch (d->kind) {
    case REF_DOM_POSITIVE:
        if (stream == CC_STREAM_PORTABLE)
            loops->exp_half(out, n);
        else
            for (int64_t t = 0; t < n; t++)
                out[t] = exp(0.5 * out[t]);
        break;
    case REF_DOM_UNIT:
        for (int64_t t = 0; t < n; t++)
            if (out[t] == 0.0)
                out[t] = 0.5;
        break;
    case REF_DOM_INDEX:
        for (int64_t t = 0; t < n; t++)
            out[t] = d->hi >= 1 ? floor(out[t] * floor(d->hi)) : 0.0;
        break;
    case REF_DOM_MASK:
        for (int64_t t = 0; t < n; t++)
            out[t] = out[t] < d->lo ? 1.0 : 0.0;
        break;
    default:
        break;
    }
    /* keep off the op's kinks: push a value within gap of a kink to kink +- 2 gap */
    for (int a = 0; a < d->n_avoid && a < 2; a++)
        for (int64_t t = 0; t < n; t++)
            if (fabs(out[t] - d->avoid[a]) < d->gap)
                out[t] = d->avoid[a] + (out[t] >= d->avoid[a] ? 2.0 : -2.0) * d->gap;
}

void cc_draw_values(const ref_domain *d, uint64_t key, int64_t n, double *out)
{
    cc_draw_range(d, CC_STREAM_LIBM, key, 0, n, out);
}
