/* capcheck reference: the float64 oracle for every TorchLean BackendOp.
 *
 * Plain C11 + libm. No dependency on the harness. Every op is one descriptor (ref_op) with
 *   shape    : validates parameters and input shapes, derives the output shape;
 *   forward  : y = f(x) in float64, plus the error-model magnitude m_i of every output;
 *   vjp      : the cotangent of every differentiable input, plus its magnitude;
 *   sample   : draws a valid random case (shapes and parameters) for generators and tests.
 * Tensors are dense row-major float64 (strides are a provider concern: the harness hands the
 * reference a dense copy of exactly the values the provider sees). Index and mask inputs are
 * float64 too (exact integers, 0/1).
 *
 * Error model (DESIGN.md, Compare): a provider value y'_i passes when
 *   |y'_i - y_i| <= c_op * u(dtype) * m_i + floor(dtype),
 * where m_i is written by forward/vjp. Convention used by every op: m_i already includes the
 * accumulation length where a sum is involved (the worst-case bound of a length-n sum in any
 * order is (n-1)*u*sum|terms|), so c_op is a small constant for the final rounding steps.
 *
 * Strict accumulation (spec/ops.md, accumulation contract). For f16/bf16 a correct kernel makes
 * its sums, dot products, softmax denominators, norm statistics and window sums in float32 and
 * rounds to the dtype once at the end, so an op splits its roundings (ref_mag below): m_i counts
 * every rounding at one unit roundoff, dtype_i the share a correct kernel makes in the dtype
 * itself (the final rounding |y_i|, and intermediates a composite stores in the dtype). The
 * harness bounds a strict f16/bf16 element by c_op * (2^-24 m_i + u(dtype) dtype_i) + floor, a
 * relaxed one (accumulation in the dtype) by c_op * u(dtype) m_i + floor as above. prob_i is m_i
 * with the length n of every accumulation replaced by sqrt(n): the scale of the error when
 * roundings are independent, which the harness's `suspect` verdict uses.
 */
#ifndef CAPCHECK_REF_H
#define CAPCHECK_REF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define REF_MAX_RANK 8
#define REF_MAX_INPUTS 8

typedef struct {
    int rank;
    int64_t dim[REF_MAX_RANK];
} ref_shape;

typedef struct {
    ref_shape shape;
    double *v; /* dense row-major; NULL where absent (for example an unrequested gradient) */
} ref_tensor;

typedef enum {
    REF_OK = 0,
    REF_EINVAL = 1, /* bad shape or parameter: ref_err says which */
    REF_ENOMEM = 2,
    REF_EDOMAIN = 3, /* input outside the op's domain (TorchLean rejects it, e.g. log(x<=0)) */
    REF_ENOTAPPLICABLE = 4 /* a sampler cannot satisfy the request (e.g. zero-size dims) */
} ref_status;

typedef struct {
    char msg[256];
} ref_err;

/* The error-model magnitudes of one output, one value per element (see "Error model" above).
 * worst (m) is always wanted when the struct is passed; dtype and prob may be NULL. An op with
 * no accumulation (pointwise, shape ops) writes worst only: its roundings are all in the dtype,
 * and the harness, which fills dtype and prob with NaN before the call, reads an element left
 * NaN as worst (ref_mag_complete). */
typedef struct {
    double *worst; /* m_i: every rounding, each at one unit roundoff */
    double *dtype; /* the share of m_i's roundings a correct kernel makes in the dtype itself */
    double *prob;  /* m_i with each accumulation length n replaced by sqrt(n) */
} ref_mag;

/* mag->worst, or NULL for a NULL mag. */
double *ref_mag_worst(const ref_mag *mag);
/* One output element's three magnitudes at once (dtype and prob only where wanted). */
void ref_mag_set(const ref_mag *mag, int64_t i, double worst, double dtype, double prob);
/* NaN in the n elements of dtype and prob (before an op runs), then, after it ran, the elements
 * it left NaN set to worst. */
void ref_mag_prefill(const ref_mag *mag, int64_t n);
void ref_mag_complete(const ref_mag *mag, int64_t n);
/* All three planes of n elements in one block, worst zeroed, the others prefilled; -1 (mag
 * zeroed) when out of memory. ref_mag_free releases them (a zeroed mag is fine). */
int ref_mag_alloc(int64_t n, ref_mag *mag);
void ref_mag_free(ref_mag *mag);

/* Op parameters. One flat record; each op names the fields it reads in ref_op.params
 * (REF_P_* bits), and only those are parsed from and printed into a case line. */
typedef struct {
    int axis;             /* REF_P_AXIS: softmax family, reductions, concat, slice, gather... */
    double eps;           /* REF_P_EPS: layerNorm, batchNorm, safeLog */
    double lo, hi;        /* REF_P_LOHI: clamp */
    double alpha;         /* REF_P_ALPHA: scale's constant c, scaledMatmul's alpha */
    double beta;          /* REF_P_BETA: smoothMaxPool */
    double temperature;   /* REF_P_TEMP: distill */
    double keep_prob;     /* REF_P_KEEP: bernoulliMask */
    uint64_t rng_seed;    /* REF_P_RSEED: randUniform, bernoulliMask key */
    int64_t k;            /* REF_P_K: topKMask */
    int64_t start, count; /* REF_P_RANGE: slice */
    int spatial;          /* REF_P_WINDOW: spatial rank 1..3 of conv/pool */
    int64_t kernel[3], stride[3], pad[3], dil[3]; /* REF_P_WINDOW */
    int64_t groups;       /* REF_P_GROUPS */
    int training;         /* REF_P_TRAINING: batchNorm */
    int causal;           /* REF_P_CAUSAL: attention */
    int perm_len;         /* REF_P_PERM: permute */
    int perm[REF_MAX_RANK];
    ref_shape target;     /* REF_P_TARGET: reshape/broadcast target shape */
    int64_t modes;        /* REF_P_MODES: fftFno spectral modes kept */
    int variant;          /* REF_P_VARIANT: which form of a multi-form op (fftFno, batchNorm...) */
    int64_t length;       /* REF_P_LENGTH: explicit signal length (irfft) */
    char custom_name[48]; /* REF_P_CUSTOM: the registered custom op */
    /* Not a parameter of the op, never parsed or printed: how many threads the forward and VJP
     * may use (0 or 1: this one). Ops that use them split their outer loops over threads
     * (ref_parallel.h); every element is computed by the same steps whatever the count. */
    int threads;
    /* Not a parameter of the op either: 1 evaluates every compensated sum (ref_sum,
     * ref_families.h) as the plain left fold it carries, the simple reference that tests hold
     * the compensated one to (tests/test_ref_compensated.c). 0: compensated. */
    int plain_sums;
} ref_params;

enum { REF_COMPENSATED_FWD = 1u << 0, REF_COMPENSATED_VJP = 1u << 1 };

enum {
    REF_P_AXIS = 1u << 0,
    REF_P_EPS = 1u << 1,
    REF_P_LOHI = 1u << 2,
    REF_P_ALPHA = 1u << 3,
    REF_P_BETA = 1u << 4,
    REF_P_TEMP = 1u << 5,
    REF_P_KEEP = 1u << 6,
    REF_P_RSEED = 1u << 7,
    REF_P_K = 1u << 8,
    REF_P_RANGE = 1u << 9,
    REF_P_WINDOW = 1u << 10,
    REF_P_GROUPS = 1u << 11,
    REF_P_TRAINING = 1u << 12,
    REF_P_CAUSAL = 1u << 13,
    REF_P_PERM = 1u << 14,
    REF_P_TARGET = 1u << 15,
    REF_P_MODES = 1u << 16,
    REF_P_VARIANT = 1u << 17,
    REF_P_LENGTH = 1u << 18,
    REF_P_CUSTOM = 1u << 19
};

/* What an input holds, which decides its provider dtype and how values are drawn. */
typedef enum {
    REF_IN_DATA = 0, /* floating point in the case dtype, differentiable */
    REF_IN_CONST,    /* floating point in the case dtype, not differentiated (e.g. a teacher) */
    REF_IN_INDEX,    /* int64 indices, stored as exact float64 integers */
    REF_IN_MASK      /* Boolean, stored as 0.0/1.0; true (1) = allowed */
} ref_input_kind;

/* How the harness draws an input's values. */
typedef enum {
    REF_DOM_NORMAL = 0, /* N(0,1) */
    REF_DOM_POSITIVE,   /* exp(N(0,1)/2): strictly positive, moderate */
    REF_DOM_UNIT,       /* uniform in (0,1) */
    REF_DOM_INDEX,      /* uniform integer in [0, hi) */
    REF_DOM_MASK,       /* 1 with probability lo, else 0 */
    REF_DOM_DISTINCT    /* a shuffle of distinct quarter-steps (j - n/2)/4: tie-free in every
                           dtype up to a few hundred elements (ops whose tie rule providers
                           leave unspecified) */
} ref_domain_kind;

typedef struct {
    ref_domain_kind kind;
    double lo, hi;      /* INDEX: hi = bound; MASK: lo = probability of 1 */
    int n_avoid;        /* values are kept at least `gap` away from these kinks */
    double avoid[2];
    double gap;
} ref_domain;

/* A small counter-free splitmix64 stream, used by samplers and by randUniform's definition. */
typedef struct {
    uint64_t state;
} ref_rng;

/* splitmix64 as TorchLean defines it (ops.md, randUniform): all arithmetic mod 2^64. Inline:
 * the harness draws every input value from it. */
static inline uint64_t ref_splitmix64(uint64_t x)
{
    uint64_t z = x + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
uint64_t ref_rng_next(ref_rng *r);
int64_t ref_rng_range(ref_rng *r, int64_t lo, int64_t hi_inclusive);
double ref_rng_uniform(ref_rng *r); /* in [0,1) */

/* What a sampler is asked for. max_elems bounds the primary input's element count; every other
 * input (and linear's output) holds at most max(max_elems, REF_SAMPLE_MIN_BUDGET) elements. The
 * floor leaves the smaller size classes drawing the wide operands they always drew (linear's
 * weight reaches 64 x 4096 elements at size=medium) at no risk (2 MiB of float64); above it the
 * bound keeps a large case's memory and reference time proportional to its size. */
#define REF_SAMPLE_MIN_BUDGET (INT64_C(1) << 18)
typedef struct {
    int rank;          /* preferred rank of the primary input, or -1 for the op's choice */
    int zero_dim;      /* nonzero: include a zero-size dimension (REF_ENOTAPPLICABLE if the op forbids it) */
    int64_t max_elems; /* upper bound on the primary input's element count (see above) */
} ref_sample_req;

/* Sampled evaluation: a few elements of one output (or gradient), each computed alone with the
 * very steps forward/vjp take for it, so their values and magnitudes are the same bits. */
typedef struct {
    int64_t count;
    const int64_t *at; /* flat row-major indices into the output, ascending */
    double *v;         /* out: the value at each index */
    ref_mag mag;       /* out: its three error-model magnitudes, element e of each plane for
                          at[e] (mag.worst NULL: not wanted; dtype, prob NULL as in ref_mag) */
} ref_picks;

typedef struct ref_op {
    const char *name;        /* TorchLean constructor name, e.g. "logSoftmax" */
    const char *report_name; /* BackendOp.name, e.g. "log_softmax" */
    int min_inputs, max_inputs;
    const char *input_names[REF_MAX_INPUTS]; /* for concat the last name repeats */
    ref_input_kind input_kind[REF_MAX_INPUTS];
    unsigned params;      /* REF_P_* bits this op reads */
    int requires_vjp;     /* TorchLean's requiresVJP (topKMask: ours, false) */
    double c_fwd, c_vjp;  /* error-model constants; see each op's comment */
    /* REF_COMPENSATED_FWD, _VJP: that direction's oracle rounds only where its dtype share
     * counts a rounding (the final one, the intermediates a strict kernel stores in the dtype),
     * its sums being compensated (ref_sum): it errs by at most 2^-53 (dtype_i + 2^-20 m_i), not
     * 2^-53 m_i, and the harness bounds its own share so (harness/run/compare.h). */
    unsigned compensated;
    const char *note;     /* one line: where this op's contract differs from ATen, if anywhere */

    void (*set_defaults)(ref_params *p); /* optional */
    ref_status (*shape)(const ref_params *p, int n, const ref_shape *in, ref_shape *out,
                        ref_err *e);
    /* Draw value domains for input i (optional; default NORMAL for data, INDEX/MASK otherwise). */
    void (*domain)(const ref_params *p, int n, const ref_shape *in, int i, ref_domain *d);
    /* y and, when mag != NULL, the magnitudes of each output element. */
    ref_status (*forward)(const ref_params *p, int n, const ref_tensor *in, ref_tensor *out,
                          const ref_mag *mag);
    /* grad[i].v != NULL for each requested input; gmag[i] (when gmag != NULL and
     * gmag[i].worst != NULL) receives that gradient's magnitudes. y is forward's output for
     * these inputs. */
    ref_status (*vjp)(const ref_params *p, int n, const ref_tensor *in, const ref_tensor *y,
                      const ref_tensor *g, ref_tensor *grad, const ref_mag *gmag);
    ref_status (*sample)(ref_rng *r, const ref_sample_req *req, ref_params *p, int *n,
                         ref_shape *in);
    /* Optional, for ops whose elements are each a long sum (matmul, conv, attention...): the
     * elements `pk` names of the output (forward_at), or pk[i] of input i's gradient for every
     * input at once (vjp_at; count 0 where none is asked: gradients may share their work),
     * equal to what forward and vjp write there; and the work of one element of that output
     * (wrt < 0) or gradient in multiply-adds, which decides when the harness samples
     * (harness/run/sample.h). The three come together. */
    ref_status (*forward_at)(const ref_params *p, int n, const ref_tensor *in, ref_picks *pk);
    ref_status (*vjp_at)(const ref_params *p, int n, const ref_tensor *in, const ref_tensor *g,
                         ref_picks *pk);
    double (*work)(const ref_params *p, int n, const ref_shape *in, int wrt);
} ref_op;

/* The registry: every op the reference defines, in spec order. */
int ref_op_count(void);
const ref_op *ref_op_at(int i);
const ref_op *ref_op_find(const char *name); /* by name or report_name */
/* 1 for TorchLean's BackendOps, 0 for the 9 ops capcheck adds (div, neg, silu, topKMask,
 * scaledMatmul, softmaxMatmul, crossEntropy, distill, custom), which no ContractClaim names. */
int ref_is_backend_op(const char *name);

/* Shape helpers shared by the ops. */
int64_t ref_numel(const ref_shape *s);
int ref_shape_eq(const ref_shape *a, const ref_shape *b);
/* "[2,3,4]" into buf[0..n), cut to fit; without printf: shape checks format their operands
 * for the error they may give on every call. */
void ref_shape_fmt(const ref_shape *s, char *buf, size_t n);
/* v in decimal ('-' first when negative), NUL-terminated, at the returned place inside buf:
 * what %" PRId64 " / %" PRIu64 " print, without printf (shapes here; case lines and records of
 * every case in the harness). */
#define REF_DECIMAL_MAX 24
const char *ref_decimal_u64(char buf[REF_DECIMAL_MAX], uint64_t v);
const char *ref_decimal_i64(char buf[REF_DECIMAL_MAX], int64_t v);
ref_status ref_err_set(ref_err *e, const char *fmt, ...);
void ref_default_domain(const ref_op *op, const ref_params *p, int n, const ref_shape *in, int i,
                        ref_domain *d);
int ref_norm_axis(int axis, int rank); /* -1 -> rank-1; returns -1 if out of range */
/* a * b for error magnitudes: a term that is exactly zero carries no error whatever its other
 * factor, so 0 * Inf (an exactly-zero weight beside an infinite input) is 0, not NaN. */
static inline double ref_mag_prod(double a, double b)
{
    return a == 0.0 || b == 0.0 ? 0.0 : a * b;
}

/* Sampling helpers: a random shape of the given rank within max_elems. */
void ref_sample_shape(ref_rng *r, int rank, int64_t max_elems, int zero_dim, ref_shape *s);

#ifdef __cplusplus
}
#endif

#endif
