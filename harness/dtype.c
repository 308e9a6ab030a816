#include "harness/dtype.h"

#include <math.h>
#include <string.h>

typedef struct {
    const char *name;
    size_t size;
    int precision; /* significand bits including the implicit one */
    int emin, emax;
} format_info;

static const format_info formats[CC_DTYPE_COUNT] = {
    [CC_F64] = {"f64", 8, 53, -1022, 1023}, [CC_F32] = {"f32", 4, 24, -126, 127},
    [CC_F16] = {"f16", 2, 11, -14, 15},     [CC_BF16] = {"bf16", 2, 8, -126, 127},
    [CC_I64] = {"i64", 8, 0, 0, 0},         [CC_U8] = {"u8", 1, 0, 0, 0}};

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
    else if (strcmp(s, "cuda") == 0)
        *out = CC_CUDA;
    else
        return -1;
    return 0;
}

double cc_max_finite(cc_dtype t)
{
    const format_info *f = &formats[t];
    return ldexp(2.0 - ldexp(1.0, 1 - f->precision), f->emax);
}

double cc_smallest_normal(cc_dtype t)
{
    return ldexp(1.0, formats[t].emin);
}

double cc_unit_roundoff(cc_dtype t)
{
    return ldexp(1.0, -formats[t].precision);
}

/* Round to a binary format with `precision` significand bits: scale so the format's quantum at
 * x's binade (fixed below emin: subnormals) is 1, round half to even, scale back (both scalings
 * are exact powers of two). */
double cc_round_to(cc_dtype t, double x)
{
    if (t == CC_F64 || !cc_dtype_is_float(t) || !isfinite(x) || x == 0.0)
        return x;
    const format_info *f = &formats[t];
    int e;
    frexp(x, &e);
    int lead = e - 1 < f->emin ? f->emin : e - 1;
    double quantum = ldexp(1.0, lead - (f->precision - 1));
    double r = nearbyint(x / quantum) * quantum;
    if (fabs(r) > cc_max_finite(t))
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
    int e;
    frexp(a, &e);
    int lead = e - 1;
    if (lead < -14) /* subnormal: a multiple of 2^-24 */
        return sign | (uint16_t)nearbyint(a / ldexp(1.0, -24));
    uint16_t mant = (uint16_t)nearbyint((a / ldexp(1.0, lead) - 1.0) * 1024.0);
    return sign | (uint16_t)((lead + 15) << 10) | mant;
}

static double half_value(uint16_t h)
{
    int sign = h >> 15, ex = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v;
    if (ex == 0x1f)
        v = mant ? NAN : INFINITY;
    else if (ex == 0)
        v = ldexp((double)mant, -24);
    else
        v = ldexp(1.0 + mant / 1024.0, ex - 15);
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
