/* Internal to reference/: each op family file exports one table; ref_util.c lists them. */
#ifndef CAPCHECK_REF_FAMILIES_H
#define CAPCHECK_REF_FAMILIES_H

#include <math.h>

#include "ref.h"

typedef struct {
    const ref_op *ops;
    const int *count;
} ref_family;

#define REF_FAMILY(name)                                                                         \
    extern const ref_op ref_family_##name[];                                                     \
    extern const int ref_family_##name##_count;

REF_FAMILY(pointwise)
REF_FAMILY(softmax)
REF_FAMILY(reduce)
REF_FAMILY(linalg)
REF_FAMILY(norm)
REF_FAMILY(random)
REF_FAMILY(shape)
REF_FAMILY(loss)
REF_FAMILY(conv)
REF_FAMILY(pool)
REF_FAMILY(composite)
REF_FAMILY(custom)

#undef REF_FAMILY

/* NULL-terminated list of the families (ref_families.c). */
extern const ref_family ref_families[];

/* The spec vocabulary, including ops not implemented yet (reported as missing). */
int ref_spec_op_count(void);
const char *ref_spec_op_name(int i);

/* Helpers shared by families. */
ref_status ref_same_shape(int n, const ref_shape *in, ref_shape *out, ref_err *e);
ref_status ref_sample_same_shapes(ref_rng *r, const ref_sample_req *req, int n_inputs,
                                  int *n, ref_shape *in);

/* Strided view of one axis: a tensor of shape s seen as (outer, len, inner) around `axis`. */
typedef struct {
    int64_t outer, len, inner;
} ref_axis_split;
ref_axis_split ref_split_axis(const ref_shape *s, int axis);
/* The split of s around the axis named by params->axis (negative counts from the end). */
ref_axis_split ref_split_param_axis(const ref_params *p, const ref_shape *s);

/* Samplers of ops with an axis parameter. ref_sample_with_axis draws a shape of the requested
 * rank (or of rank 1..3) into *s with ref_sample_shape(zero_dim), then one of its axes into *ax;
 * a requested rank 0 is REF_ENOTAPPLICABLE (no axis to name). ref_sample_axis_param spells
 * axis ax of a rank-`rank` input for params->axis: negatively (ax - rank) one time in three. */
ref_status ref_sample_with_axis(ref_rng *r, const ref_sample_req *req, int zero_dim,
                                ref_shape *s, int *ax);
int ref_sample_axis_param(ref_rng *r, int ax, int rank);

/* The element budget of every input a sampler draws: max(max_elems, REF_SAMPLE_MIN_BUDGET)
 * (ref.h). Samplers draw as they always did, then cap the extent that makes an input other than
 * the primary one grow (so every draw already within budget stays the same case). */
int64_t ref_sample_budget(const ref_sample_req *req);
/* The largest extent axis `axis` of s may take with s holding at most `budget` elements: at
 * least 1, and INT64_MAX when another axis of s is 0 (s is empty whatever the extent). */
int64_t ref_extent_cap(const ref_shape *s, int axis, int64_t budget);

/* vjp_at of an op whose gradients share no work: `one` for each input with picks. */
typedef ref_status (*ref_vjp_at_one)(const ref_params *p, int n, const ref_tensor *in,
                                     const ref_tensor *g, int wrt, ref_picks *pk);
ref_status ref_vjp_at_each(ref_vjp_at_one one, const ref_params *p, int n, const ref_tensor *in,
                           const ref_tensor *g, ref_picks *pk);

/* out[c * rows + r] = a[r * cols + c]: a matrix's transpose, in tiles (the sampled forms read
 * columns as rows through it). A transpose moves values and computes nothing, so sums over
 * its rows are the sums the full loops form over the columns, bit for bit. */
void ref_transpose(const double *a, int64_t rows, int64_t cols, double *out);

/* out[k] = sum_l x[l] M[l ld + k] and out_abs[k] = sum_l |x[l] M[l ld + k]| for k < count: a
 * row vector times a matrix, each sum a left fold over l from 0 (0 + the first term, then the
 * next, ...), as a loop `for l: for k: out[k] += x[l] M[l ld + k]` forms them; eight k at a
 * time are kept in registers over the whole l loop, so out is written once, not once per l. */
void ref_row_times(const double *x, int64_t L, const double *M, int64_t ld, int64_t count,
                   double *out, double *out_abs);
/* The same with its wide loop compiled for instruction set isa (REF_ISA_*, ref_parallel.h)
 * whatever this CPU's dispatch picks: 0, or -1 (nothing done) when this build or CPU has no such
 * clone. Tests hold every clone to the plain loop, bit for bit. */
int ref_row_times_isa(int isa, const double *x, int64_t L, const double *M, int64_t ld,
                      int64_t count, double *out, double *out_abs);

/* Dot products of picked rows: for e < count, v[e] += sum_i P[po[e] + i] Q[qo[e] + i] and
 * v_abs[e] += sum_i |P[po[e] + i] Q[qo[e] + i]| over i < len, each added term by term in
 * increasing i onto the value v[e] holds (0 for a fresh sum), exactly as one loop per pick
 * forms them; four picks go side by side so their additions overlap. */
void ref_dots(int64_t len, const double *P, const int64_t *po, const double *Q, const int64_t *qo,
              int64_t count, double *v, double *v_abs);

/* ---- compensated sums -----------------------------------------------------------------------
 * A sum kept as two doubles (Ogita, Rump & Oishi 2005: Sum2, Dot2). hi is the plain left fold
 * from 0; each term t enters it by TwoSum (Knuth), exact in float64:
 *   x = hi + t,  z = x - hi,  e = (hi - (x - z)) + (t - z):  hi + t = x + e exactly,
 * and e is added to lo; a product a b enters as p = a b with its exact remainder
 * r = fma(a, b, -p) (TwoProduct: a b = p + r) added to lo. The value hi + lo, rounded once, is
 * within 2^-53 |s| + gamma_n^2 sum|t| of the exact sum s (gamma_n = n 2^-53 / (1 - n 2^-53)):
 * as if summed in twice the precision and rounded once. A hi that is not finite (an Inf or NaN
 * term, an overflow) is the value, as the plain fold gives it. With `plain` (ref_params'
 * plain_sums) the value is hi alone: the simple reference.
 * Beside the value the accumulator keeps what the error model reads: n, sum|t|, sum t^2 and
 * max|t| (ref_sum_prob). */
typedef struct {
    double hi, lo;          /* the value hi + lo */
    double abs, sq, max;    /* sum|t|, sum t^2, max|t| */
    int64_t n;              /* terms */
} ref_sum;

static inline void ref_sum_add(ref_sum *s, double t)
{
    double x = s->hi + t, z = x - s->hi;
    s->lo += (s->hi - (x - z)) + (t - z);
    s->hi = x;
    double a = t < 0 ? -t : t;
    s->abs += a;
    s->sq += t * t;
    s->max = a > s->max ? a : s->max;
    s->n++;
}

static inline void ref_sum_add_prod(ref_sum *s, double a, double b)
{
    double p = a * b;
    ref_sum_add(s, p);
    s->lo += fma(a, b, -p);
}

static inline double ref_sum_value(const ref_sum *s, int plain)
{
    double hi = s->hi;
    return plain || !(hi - hi == 0.0) ? hi : hi + s->lo; /* hi - hi: NaN unless finite */
}

/* The probabilistic magnitude of a sum of the terms s holds: the smaller of sqrt(n) sum|t|
 * (any order; harness/run/compare.h) and the exchangeable form (ref_families.c), which also
 * asks that the summation order not depend on the values and the terms be exchangeable. */
double ref_sum_prob(const ref_sum *s);

/* Row-major index arithmetic over the 1..3 spatial axes of conv and pool. */
typedef struct {
    int rank;
    int64_t d[3];
} ref_sp_ext;
int64_t ref_sp_count(const ref_sp_ext *e);
void ref_sp_unravel(const ref_sp_ext *e, int64_t flat, int64_t idx[3]);
/* Row-major flat index of idx inside e, or -1 when a coordinate lies outside (a padded cell). */
int64_t ref_sp_ravel(const ref_sp_ext *e, const int64_t idx[3]);
/* Steps a row-major multi-index inside e to the next one (last axis fastest), so a walk over
 * every index needs no division; past the last index it wraps to zeros. */
void ref_sp_next(const ref_sp_ext *e, int64_t idx[3]);
/* The channels-first shape [C, e...]. */
void ref_sp_channels_shape(int64_t C, const ref_sp_ext *e, ref_shape *s);
/* Window defaults of conv and pool: stride 1, padding 0 and dilation 1 on every spatial axis. */
void ref_window_defaults(ref_params *p);
/* The spatial rank of a sampled x [C, spatial...]: the requested rank of x (or a random one in
 * 2..4) clamped to 2..4, less the channel axis. */
int ref_sample_spatial_rank(ref_rng *r, const ref_sample_req *req);

#endif
