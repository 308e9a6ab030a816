/* Compare a provider's output with the reference under the op's error model:
 *   element i passes when |got_i - expected_i| <= bound_i,
 *   bound_i = c_op * u * m_i + floor                          (f64, f32, relaxed f16/bf16)
 *   bound_i = c_op * (u_acc * m_i + u * dtype_i) + floor      (strict f16/bf16, u_acc = 2^-24)
 * (ref.h: m_i every rounding, dtype_i the share a correct kernel makes in the dtype itself),
 * NaN positions must match, and +-Inf must match in sign (or be the dtype's overflow of a
 * finite expected value beyond the largest finite number). The figure kept is the worst bound
 * ratio |got - expected| / bound (<= 1 passes), with the element that produced it.
 *
 * Beside it, two judgements that never fail a case by themselves:
 *   suspect  the same error against the probabilistic bound, prob_i (m_i with each
 *            accumulation length n replaced by sqrt(n)) scaled by CC_SUSPECT_LAMBDA in place of
 *            m_i; a passing case over it is `suspect` (a policy may count it as a failure);
 *   vacuous  an output whose bound, at every element, admits every finite value of the dtype
 *            or every value of the output's own magnitude: it proves nothing and is never
 *            evidence. */
#ifndef CAPCHECK_COMPARE_H
#define CAPCHECK_COMPARE_H

#include <stdint.h>

#include "abi/capcheck_provider.h"

/* How f16/bf16 accumulations are judged (spec/ops.md, accumulation contract). */
typedef enum {
    CC_ACC_STRICT = 0, /* in float32 (u_acc = 2^-24), rounded once to the dtype: the default */
    CC_ACC_RELAXED     /* folded in the dtype itself: every rounding at u(dtype) */
} cc_accumulation;

const char *cc_accumulation_name(cc_accumulation a); /* "strict", "relaxed" */
int cc_accumulation_parse(const char *s, cc_accumulation *out); /* 0, or -1 when unknown */

/* The suspect bound's lambda. The error of a sum with independent, mean-zero roundings
 * (|delta| <= u) is a martingale in the partial sums T_k; Azuma-Hoeffding gives
 *   P(|sum_k delta_k T_k| > lambda u sqrt(sum_k T_k^2)) <= 2 exp(-lambda^2 / 2),
 * and sqrt(sum T_k^2) <= sqrt(n) sum|x| (Higham & Mary 2019, Ipsen & Zhou 2020). lambda = 6
 * makes that probability 2 e^-18 = 3.0e-8 per element. */
#define CC_SUSPECT_LAMBDA 6.0

/* "strict", "relaxed", with ", power" for a power run (harness/run/power.h): how a run judges,
 * as run.json states it. */
const char *cc_judging_describe(cc_accumulation acc, int power);

typedef struct {
    double c_op, u, floor;
    /* the unit roundoff of the accumulation: u, or (strict f16/bf16) float32's 2^-24 plus the
     * oracle's 2^-53; dtype_i is then bounded at u and m_i at u_acc */
    double u_acc;
    double lambda; /* CC_SUSPECT_LAMBDA */
    /* Cases with NaN or Inf inputs (edge=nan, edge=inf): an expected NaN or +-Inf is matched by
     * any non-finite value. Algebraically equal evaluations of one formula differ there (Inf - Inf
     * is NaN in one order, Inf in another), so only finiteness is the contract's; a finite
     * expected value still needs a finite value within its bound. */
    int nonfinite_alike;
} cc_bound_model;

/* One element's magnitudes (ref_mag's planes at one index). */
typedef struct {
    double worst, dtype, prob;
} cc_element_mag;

typedef struct {
    int64_t n, n_over;     /* elements compared, elements over their bound */
    int64_t n_nan_mismatch;
    double worst_ratio;    /* 0 for an empty or exact output */
    int64_t worst_index;   /* -1 when n == 0 */
    double expected, got, bound, magnitude;
    double suspect_ratio;  /* the worst |got - expected| / suspect bound */
    int64_t n_vacuous;     /* elements whose bound is vacuous */
    int vacuous;           /* n > 0 and every element with a finite expected value is vacuous */
} cc_comparison;

/* Bound model of a case: u = the roundoff of the dtype the provider computes in plus the
 * float64 oracle's 2^-53, floor = the dtype's smallest normal (covers flushed subnormals);
 * strict accumulation. */
cc_bound_model cc_bound_for(cc_dtype t, double c_op);
/* The same for a provider that declares its compute roundoff (abi/capcheck_provider.h, compute_roundoff):
 * u = max(compute_u, u(dtype)) + 2^-53; compute_u = 0 is cc_bound_for. TF32 (f32 matmul or conv
 * on tensor cores) is compute_u = 2^-11. The accumulation's u_acc is max(compute_u, 2^-24) +
 * 2^-53 for a strict f16/bf16 case, u otherwise. */
cc_bound_model cc_bound_for_compute(cc_dtype t, double compute_u, double c_op);
cc_bound_model cc_bound_for_judging(cc_dtype t, double compute_u, double c_op,
                                    cc_accumulation acc);
/* The coarsest compute roundoff a provider may declare: bf16's 2^-8. */
#define CC_MAX_COMPUTE_ROUNDOFF 0x1p-8
/* 1 when a declared compute roundoff is usable: 0 (none) up to CC_MAX_COMPUTE_ROUNDOFF; NaN,
 * negative and coarser values are not (the runner makes such a case an error). */
int cc_compute_roundoff_valid(double compute_u);

/* The bound of one element, and its suspect bound. A magnitude that is NaN holds the element to
 * the floor. */
double cc_element_bound(const cc_bound_model *m, cc_element_mag mag);
double cc_element_suspect_bound(const cc_bound_model *m, cc_element_mag mag);
/* Ratio of one element; +Inf for a NaN/Inf mismatch. A finite expected value whose magnitude is
 * NaN is held to the floor alone (it must come back nearly exact rather than pass whatever it
 * is); one whose magnitude overflowed to +Inf accepts any finite value, which is what the error
 * model says of it (only edge=huge and edge=inf cases reach this). cc_element_ratio takes m_i
 * alone (dtype_i = prob_i = m_i); cc_element_ratio_of the three, against `bound` (which
 * cc_element_bound or cc_element_suspect_bound gave). */
double cc_element_ratio(double expected, double got, double mag, cc_dtype t,
                        const cc_bound_model *m, double *bound_out);
double cc_element_ratio_of(double expected, double got, double bound, cc_dtype t,
                           const cc_bound_model *m);
/* The magnitudes at element i of ref_mag planes (a NULL dtype or prob plane reads as worst). */
cc_element_mag cc_element_mag_at(const ref_mag *mag, int64_t i);
/* Whether an element's bound is vacuous: it admits every finite value of the dtype
 * (bound >= max finite + |expected|), or every value of the output's own magnitude
 * (bound - floor >= |expected| + out_max, out_max > 0 the largest finite |expected| of the
 * output beyond the reference's own error, 2 c_op 2^-53 m_i: 0, -expected and any value that
 * large pass). An output that is zero (in exact arithmetic) has no magnitude of its own to
 * judge by: only the first rule applies to it. A non-finite expected
 * value is judged exactly: never vacuous. */
int cc_bound_is_vacuous(double expected, double bound, double out_max, cc_dtype t,
                        const cc_bound_model *m);
void cc_compare(const double *expected, const ref_mag *mag, const cc_view *got,
                const cc_bound_model *m, cc_comparison *out);
/* The same on some elements of a dense `got` (a sampled check, harness/run/sample.h): expected[e]
 * and the planes' element e are those of flat element at[e] (ascending); out->n is count and
 * worst_index a flat index into got; vacuity measures the output's own magnitude on the picks.
 * at == NULL compares every element (count is then ignored). */
void cc_compare_at(const double *expected, const ref_mag *mag, const int64_t *at, int64_t count,
                   const cc_view *got, const cc_bound_model *m, cc_comparison *out);
/* One element's judgement as cc_compare_at made it: its bound, bound ratio and suspect ratio
 * (cc_element_bound, cc_element_ratio_of against the bound and the suspect bound). */
typedef struct {
    double bound, ratio, suspect_ratio;
} cc_element_judgement;
/* cc_compare_at (the same code, the same bits), also keeping each compared element's judgement
 * in each[e] (each: NULL, or room for the count of elements compared): what tests hold to the
 * element rules above (tests/test_judge.c). */
void cc_compare_at_each(const double *expected, const ref_mag *mag, const int64_t *at,
                        int64_t count, const cc_view *got, const cc_bound_model *m,
                        cc_comparison *out, cc_element_judgement *each);
/* The same with the vectorized loops compiled for instruction set `isa` (REF_ISA_*,
 * reference/ref_parallel.h) whatever this CPU's dispatch picks: 0, or -1 (nothing done) when
 * this build or CPU has no such clone. Tests hold every clone to the same bits. */
int cc_compare_at_isa(int isa, const double *expected, const ref_mag *mag, const int64_t *at,
                      int64_t count, const cc_view *got, const cc_bound_model *m,
                      cc_comparison *out, cc_element_judgement *each);

#endif
