#include "core/dtype.h"

#include <math.h>
#include <string.h>

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
    case CC_BF16: {
        float fv = (float)cc_round_to(CC_BF16, x); /* exact in f32: bf16 is its top half */
        uint32_t bits;
        memcpy(&bits, &fv, 4);
        ((uint16_t *)buf)[i] = isnan(x) ? 0x7fc0 : (uint16_t)(bits >> 16);
        break;
    }
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
