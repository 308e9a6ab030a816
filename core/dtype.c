#include "core/dtype.h"

#include <math.h>
#include <string.h>

#include "reference/ref_parallel.h"

typedef struct {
    const char *name;
    size_t size;
    int precision; /* significand bits including the implicit one */
    int emin, emax;
    double max_finite; /* (2 - 2^(1-precision)) * 2^emax */
} format_info;

static const format_info formats[CC_DTYPE_COUNT] = {
    [CC_F64] = {"f64", 8, 53, -1022, 1023, 0x1.fffffffffffffp1023},
    [CC_F32] = {"f32", 4, 24, -126, 127, 0x1.fffffep127},
    [CC_F16] = {"f16", 2, 11, -14, 15, 0x1.ffcp15},
    [CC_BF16] = {"bf16", 2, 8, -126, 127, 0x1.fep127},
    [CC_I64] = {"i64", 8, 0, 0, 0, 0},
    [CC_U8] = {"u8", 1, 0, 0, 0, 0}};

/* 2^e for -1022 <= e <= 1023, built from its bits: the per-element paths below run once per
 * input element of every case, where frexp/ldexp showed in the profile. */
static double pow2(int e)
{
    uint64_t bits = (uint64_t)(e + 1023) << 52;
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* floor(log2 |x|) of a normal double, from its exponent field (-1023 for zero and subnormals) */
static int binade(double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    return (int)((bits >> 52) & 0x7ff) - 1023;
}

size_t cc_dtype_size(cc_dtype t)
{
    return t < CC_DTYPE_COUNT ? formats[t].size : 0;
}

const char *cc_dtype_name(cc_dtype t)
{
    return t < CC_DTYPE_COUNT ? formats[t].name : "?";
}

const char *cc_device_name(cc_device d)
{
    return d == CC_CUDA ? "cuda" : "cpu";
}

int cc_dtype_is_float(cc_dtype t)
{
    return t == CC_F64 || t == CC_F32 || t == CC_F16 || t == CC_BF16;
}

int cc_dtype_parse(const char *s, cc_dtype *out)
{
    for (int t = 0; t < CC_DTYPE_COUNT; t++)
        if (cc_dtype_is_float((cc_dtype)t) && strcmp(s, formats[t].name) == 0) {
            *out = (cc_dtype)t;
            return 0;
        }
    return -1;
}

int cc_device_parse(const char *s, cc_device *out)
{
    if (strcmp(s, "cpu") == 0)
        *out = CC_CPU;
    else if (strcmp(s, "cuda") == 0 || strcmp(s, "gpu") == 0) /* TorchLean's Device.gpu alias */
        *out = CC_CUDA;
    else
        return -1;
    return 0;
}

double cc_max_finite(cc_dtype t)
{
    return formats[t].max_finite;
}

double cc_smallest_normal(cc_dtype t)
{
    return ldexp(1.0, formats[t].emin);
}

double cc_unit_roundoff(cc_dtype t)
{
    return ldexp(1.0, -formats[t].precision);
}

double cc_ulp(cc_dtype t, double x)
{
    const format_info *f = &formats[t];
    int e = x == 0.0 || !isfinite(x) ? f->emin : ilogb(x);
    return ldexp(1.0, (e < f->emin ? f->emin : e) - (f->precision - 1));
}

/* Round to a binary format with `precision` significand bits: scale so the format's quantum at
 * x's binade (fixed below emin: subnormals) is 1, round half to even, scale back (both scalings
 * are exact powers of two). */
double cc_round_to(cc_dtype t, double x)
{
    if (t == CC_F64 || t >= CC_I64 || !isfinite(x) || x == 0.0) /* not rounded */
        return x;
    if (t == CC_F32) /* C's conversion is this rounding: to nearest even, subnormals, Inf */
        return (double)(float)x;
    const format_info *f = &formats[t];
    int lead = binade(x) < f->emin ? f->emin : binade(x);
    int quantum_exp = lead - (f->precision - 1);
    /* |x / quantum| < 2^precision: adding and subtracting 1.5 * 2^52 rounds it to an integer,
     * half to even (the double's own rounding), as nearbyint would */
    const double magic = 0x1.8p52;
    double r = ((x * pow2(-quantum_exp) + magic) - magic) * pow2(quantum_exp);
    if (fabs(r) > f->max_finite)
        return copysign(INFINITY, x);
    return r == 0.0 ? copysign(0.0, x) : r;
}

static uint16_t half_bits(double r)
{
    uint16_t sign = signbit(r) ? 0x8000 : 0;
    if (isnan(r))
        return 0x7e00;
    if (isinf(r))
        return sign | 0x7c00;
    double a = fabs(r);
    if (a == 0.0)
        return sign;
    int lead = binade(a);
    if (lead < -14) /* subnormal: a multiple of 2^-24 */
        return sign | (uint16_t)(a * 0x1p24);
    uint64_t bits; /* r is an f16 value: its 10 fraction bits are the double's top ones */
    memcpy(&bits, &a, sizeof bits);
    return sign | (uint16_t)((lead + 15) << 10) | (uint16_t)((bits >> 42) & 0x3ff);
}

/* The bits of a bf16 value r (NaN as the quiet NaN 0x7fc0). */
static inline uint16_t bf16_bits(double r)
{
    float fv = (float)r; /* exact: a bf16 value is the top half of an f32 */
    uint32_t bits;
    memcpy(&bits, &fv, 4);
    return r == r ? (uint16_t)(bits >> 16) : 0x7fc0;
}

static double half_value(uint16_t h)
{
    int sign = h >> 15, ex = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v;
    if (ex == 0x1f)
        v = mant ? NAN : INFINITY;
    else if (ex == 0)
        v = (double)mant * 0x1p-24;
    else
        v = (1.0 + mant / 1024.0) * pow2(ex - 15);
    return sign ? -v : v;
}

void cc_store(cc_dtype t, void *buf, int64_t i, double x)
{
    switch (t) {
    case CC_F64:
        ((double *)buf)[i] = x;
        break;
    case CC_F32:
        ((float *)buf)[i] = (float)x; /* C's conversion rounds to nearest even */
        break;
    case CC_F16:
        ((uint16_t *)buf)[i] = half_bits(cc_round_to(CC_F16, x));
        break;
    case CC_BF16:
        ((uint16_t *)buf)[i] = bf16_bits(cc_round_to(CC_BF16, x));
        break;
    case CC_I64:
        ((int64_t *)buf)[i] = (int64_t)x;
        break;
    case CC_U8:
        ((uint8_t *)buf)[i] = x != 0.0;
        break;
    default:
        break;
    }
}

double cc_load(cc_dtype t, const void *buf, int64_t i)
{
    switch (t) {
    case CC_F64:
        return ((const double *)buf)[i];
    case CC_F32:
        return ((const float *)buf)[i];
    case CC_F16:
        return half_value(((const uint16_t *)buf)[i]);
    case CC_BF16: {
        uint32_t bits = (uint32_t)((const uint16_t *)buf)[i] << 16;
        float fv;
        memcpy(&fv, &bits, 4);
        return fv;
    }
    case CC_I64:
        return (double)((const int64_t *)buf)[i];
    case CC_U8:
        return ((const uint8_t *)buf)[i] ? 1.0 : 0.0;
    default:
        return NAN;
    }
}

/* ---- whole arrays ------------------------------------------------------------------------- */

/* Round to nearest even at `drop` fewer significand bits than a double, on the bits: adding
 * half a quantum minus one, plus the kept last bit, carries exactly when the dropped part is
 * above half or a tie at an odd last bit (a carry into the exponent is the next binade, as it
 * should be). Valid where the format's quantum follows x's binade: its normal range. */
static inline double round_bits(double x, int drop)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    b += ((UINT64_C(1) << (drop - 1)) - 1) + ((b >> drop) & 1);
    b &= ~((UINT64_C(1) << drop) - 1);
    memcpy(&x, &b, sizeof x);
    return x;
}

/* The array loops below are written without calls or branches per element so they vectorize,
 * and compiled for the widest vectors the CPU has: a conversion or a compare is IEEE's at
 * every width, so every clone gives the same bits (REF_VECTOR_CLONES). */

/* The rare elements (zero, subnormals, NaN, Inf, past the largest finite value) go through the
 * one-element functions; the loops find them a chunk at a time (a flag per chunk, no branch
 * per element) and revisit only a chunk that has one. */
enum { CHUNK = 256 };

/* |v| in the normal range [lo, hi] of a narrow format (NaN is not) */
static inline int in_normal_range(double v, double lo, double hi)
{
    return fabs(v) >= lo && fabs(v) <= hi;
}

/* f16 and bf16 (drop = 42 or 45, lo = the smallest normal, hi = the largest finite value):
 * the bit rounding over the normal range, in a loop without calls or branches so it
 * vectorizes, leaving what lies outside (zero, subnormals, NaN, Inf, values past hi) as it was;
 * nonzero when some element is outside the normal range afterwards (those cc_round_to takes). */
static inline uint64_t round_narrow(double *x, int64_t n, int drop, double lo, double hi)
{
    uint64_t outside = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = fabs(x[i]), r = round_bits(x[i], drop);
        r = fabs(r) > hi ? copysign(INFINITY, x[i]) : r;
        r = a >= lo && a <= hi ? r : x[i];
        x[i] = r;
        outside |= (uint64_t)!in_normal_range(r, lo, hi);
    }
    return outside;
}

REF_VECTOR_CLONES void cc_round_array(cc_dtype t, double *x, int64_t n)
{
    if (t == CC_F32)
        for (int64_t i = 0; i < n; i++) {
            double r = (double)(float)x[i]; /* computed for all, chosen without a branch */
            x[i] = x[i] == x[i] ? r : x[i]; /* a NaN keeps its bits */
        }
    else if (t == CC_F16 || t == CC_BF16) {
        const format_info *f = &formats[t];
        double lo = pow2(f->emin), hi = f->max_finite;
        for (int64_t b = 0; b < n; b += CHUNK) {
            int64_t m = n - b < CHUNK ? n - b : CHUNK;
            double *c = x + b;
            uint64_t outside = t == CC_F16 ? round_narrow(c, m, 53 - 11, lo, hi)
                                           : round_narrow(c, m, 53 - 8, lo, hi);
            if (outside)
                for (int64_t i = 0; i < m; i++)
                    if (!in_normal_range(c[i], lo, hi))
                        c[i] = cc_round_to(t, c[i]);
        }
    }
}

/* A normal f16 value's bits: its exponent rebiased and its top 10 fraction bits (valid where
 * f16_normal holds; the rest, zero, subnormals, NaN and Inf, are half_bits') */
static inline int f16_normal(double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    uint64_t mag = b & 0x7fffffffffffffffULL;
    return mag >= 0x3f10000000000000ULL && mag <= 0x40effc0000000000ULL;
}

static inline uint16_t f16_normal_bits(double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    uint64_t mag = b & 0x7fffffffffffffffULL;
    return (uint16_t)((b >> 48 & 0x8000) | ((mag >> 52) - 1008) << 10 | (mag >> 42 & 0x3ff));
}

/* The 16-bit patterns of m (<= CHUNK) f16 or bf16 values into bits[] */
static inline void narrow_bits(cc_dtype t, const double *x, int64_t m, uint16_t *bits)
{
    if (t == CC_BF16) {
        for (int64_t i = 0; i < m; i++)
            bits[i] = bf16_bits(x[i]);
        return;
    }
    uint64_t odd = 0;
    for (int64_t i = 0; i < m; i++) {
        bits[i] = f16_normal_bits(x[i]);
        odd |= (uint64_t)!f16_normal(x[i]);
    }
    if (odd)
        for (int64_t i = 0; i < m; i++)
            if (!f16_normal(x[i]))
                bits[i] = half_bits(x[i]);
}

/* Stores of already rounded values; stride 1 has its own loops (they vectorize). */
REF_VECTOR_CLONES void cc_store_array(cc_dtype t, void *buf, int64_t off, int64_t stride,
                                  const double *x, int64_t n)
{
    switch (t) {
    case CC_F64: {
        double *d = (double *)buf + off;
        if (stride == 1)
            memcpy(d, x, sizeof(double) * (size_t)n);
        else
            for (int64_t i = 0; i < n; i++)
                d[i * stride] = x[i];
        break;
    }
    case CC_F32: {
        float *d = (float *)buf + off;
        if (stride == 1)
            for (int64_t i = 0; i < n; i++)
                d[i] = (float)x[i];
        else
            for (int64_t i = 0; i < n; i++)
                d[i * stride] = (float)x[i];
        break;
    }
    case CC_F16:
    case CC_BF16: { /* the bits a chunk at a time (vectorized), then stored through the stride */
        uint16_t *d = (uint16_t *)buf + off, bits[CHUNK];
        for (int64_t b = 0; b < n; b += CHUNK) {
            int64_t m = n - b < CHUNK ? n - b : CHUNK;
            if (stride == 1) {
                narrow_bits(t, x + b, m, d + b);
                continue;
            }
            narrow_bits(t, x + b, m, bits);
            for (int64_t i = 0; i < m; i++)
                d[(b + i) * stride] = bits[i];
        }
        break;
    }
    default:
        for (int64_t i = 0; i < n; i++)
            cc_store(t, buf, off + i * stride, x[i]);
        break;
    }
}

/* The places of a column of the rows lie side by side (row_stride small, as in a transposed
 * buffer): storing row by row would touch a new cache line with every element, so the rows are
 * converted into a tile (rows x w, at stride 1, the vectorized loops) and the tile is written a
 * column at a time. Each element gets the bits cc_store_array gives it at any stride. */
#define SCATTER_TILE(type)                                                                         \
    for (int64_t c = 0; c < w; c++)                                                                \
        for (int64_t q = 0; q < rows; q++)                                                         \
            ((type *)buf)[off + q * row_stride + (c0 + c) * stride] =                             \
                ((const type *)tile)[q * w + c]

void cc_store_rows(cc_dtype t, void *buf, int64_t off, int64_t row_stride, int64_t stride,
                   const double *x, int64_t rows, int64_t cols)
{
    enum { TILE = 2048 }; /* elements */
    int64_t cw = TILE / (rows > 0 ? rows : 1);
    size_t es = cc_dtype_size(t);
    if (cw < 8 || (es != 1 && es != 2 && es != 4 && es != 8)) {
        for (int64_t q = 0; q < rows; q++)
            cc_store_array(t, buf, off + q * row_stride, stride, x + q * cols, cols);
        return;
    }
    uint64_t tile[TILE]; /* room for TILE elements of 8 bytes */
    for (int64_t c0 = 0; c0 < cols; c0 += cw) {
        int64_t w = cols - c0 < cw ? cols - c0 : cw;
        for (int64_t q = 0; q < rows; q++)
            cc_store_array(t, tile, q * w, 1, x + q * cols + c0, w);
        switch (es) {
        case 1:
            SCATTER_TILE(uint8_t);
            break;
        case 2:
            SCATTER_TILE(uint16_t);
            break;
        case 4:
            SCATTER_TILE(uint32_t);
            break;
        default:
            SCATTER_TILE(uint64_t);
            break;
        }
    }
}
#undef SCATTER_TILE

REF_VECTOR_CLONES void cc_round_store_array(cc_dtype t, double *x, int64_t n, void *buf,
                                            int64_t off)
{
    if (t == CC_F32) { /* one pass: (float)x is the stored value, and (double) of it the rounded */
        float *d = (float *)buf + off;
        for (int64_t i = 0; i < n; i++) {
            float f = (float)x[i];
            x[i] = x[i] == x[i] ? (double)f : x[i]; /* a NaN keeps its bits */
            d[i] = f;
        }
        return;
    }
    for (int64_t b = 0; b < n; b += CHUNK) { /* a chunk rounded and stored while in the cache */
        int64_t m = n - b < CHUNK ? n - b : CHUNK;
        cc_round_array(t, x + b, m);
        cc_store_array(t, buf, off + b, 1, x + b, m);
    }
}

REF_VECTOR_CLONE_DECLS(cc_round_array);
REF_VECTOR_CLONE_DECLS(cc_store_array);
REF_VECTOR_CLONE_DECLS(cc_round_store_array);

int cc_dtype_array_loops_isa(int isa, cc_dtype_array_loops *out)
{
    if (!ref_isa_runs(isa))
        return -1;
    *out = (cc_dtype_array_loops){REF_VECTOR_CLONE(cc_round_array, isa),
                                  REF_VECTOR_CLONE(cc_store_array, isa),
                                  REF_VECTOR_CLONE(cc_round_store_array, isa)};
    return 0;
}

void cc_load_array(cc_dtype t, const void *buf, int64_t off, int64_t stride, double *x,
                   int64_t n)
{
    switch (t) {
    case CC_F64: {
        const double *s = (const double *)buf + off;
        for (int64_t i = 0; i < n; i++)
            x[i] = s[i * stride];
        break;
    }
    case CC_F32: {
        const float *s = (const float *)buf + off;
        if (stride == 1)
            for (int64_t i = 0; i < n; i++)
                x[i] = s[i];
        else
            for (int64_t i = 0; i < n; i++)
                x[i] = s[i * stride];
        break;
    }
    case CC_BF16: {
        const uint16_t *s = (const uint16_t *)buf + off;
        for (int64_t i = 0; i < n; i++) {
            uint32_t bits = (uint32_t)s[i * stride] << 16;
            float fv;
            memcpy(&fv, &bits, 4);
            x[i] = fv;
        }
        break;
    }
    default:
        for (int64_t i = 0; i < n; i++)
            x[i] = cc_load(t, buf, off + i * stride);
        break;
    }
}

/* Elements [lo, hi) of a float format held in `type` whose exponent field is `mask`: any with
 * the exponent all ones? (no branch per element: the loop vectorizes) */
#define CC_ANY_NONFINITE(type, mask)                                                               \
    static int any_nonfinite_##type(const void *buf, int64_t lo, int64_t hi)                       \
    {                                                                                              \
        const unsigned char *s = buf;                                                              \
        type bad = 0;                                                                              \
        for (int64_t i = lo; i < hi; i++) {                                                        \
            type bits;                                                                             \
            memcpy(&bits, s + (size_t)i * sizeof bits, sizeof bits);                               \
            bad |= (type)((bits & (mask)) == (mask));                                              \
        }                                                                                          \
        return bad != 0;                                                                           \
    }
CC_ANY_NONFINITE(uint64_t, UINT64_C(0x7ff0000000000000))
CC_ANY_NONFINITE(uint32_t, UINT32_C(0x7f800000))
CC_ANY_NONFINITE(uint16_t, 0x7c00) /* f16 (bf16: its own mask below) */
#undef CC_ANY_NONFINITE

static int any_nonfinite(cc_dtype t, const void *buf, int64_t lo, int64_t hi)
{
    switch (t) {
    case CC_F64:
        return any_nonfinite_uint64_t(buf, lo, hi);
    case CC_F32:
        return any_nonfinite_uint32_t(buf, lo, hi);
    case CC_F16:
        return any_nonfinite_uint16_t(buf, lo, hi);
    case CC_BF16: {
        const unsigned char *s = buf;
        uint16_t bad = 0;
        for (int64_t i = lo; i < hi; i++) {
            uint16_t bits;
            memcpy(&bits, s + (size_t)i * 2, 2);
            bad |= (uint16_t)((bits & 0x7f80) == 0x7f80);
        }
        return bad != 0;
    }
    default:
        return 0; /* integers are always finite */
    }
}

int64_t cc_find_nonfinite(cc_dtype t, const void *buf, int64_t off, int64_t n)
{
    enum { BLOCK = 4096 };
    for (int64_t lo = off; lo < off + n; lo += BLOCK) {
        int64_t hi = off + n - lo < BLOCK ? off + n : lo + BLOCK;
        if (!any_nonfinite(t, buf, lo, hi))
            continue;
        for (int64_t i = lo; i < hi; i++) /* the block that has one: which */
            if (!isfinite(cc_load(t, buf, i)))
                return i;
    }
    return -1;
}

void cc_fill_nan(cc_dtype t, void *buf, int64_t n)
{
    switch (t) {
    case CC_F64:
        for (int64_t i = 0; i < n; i++)
            ((double *)buf)[i] = NAN;
        break;
    case CC_F32:
        for (int64_t i = 0; i < n; i++)
            ((float *)buf)[i] = NAN;
        break;
    case CC_F16:
    case CC_BF16: {
        uint16_t nan_bits = t == CC_F16 ? 0x7e00 : 0x7fc0;
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)buf)[i] = nan_bits;
        break;
    }
    default:
        memset(buf, 0, (size_t)n * cc_dtype_size(t));
        break;
    }
}
