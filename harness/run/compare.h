/* Compare a provider's output with the reference under the op's error model:
 *   element i passes when |got_i - expected_i| <= bound_i,
 *   bound_i = c_op * u * m_i + floor                          (f64, f32, relaxed f16/bf16)
 *   bound_i = c_op * (u_acc * m_i + u * dtype_i) + floor      (strict f16/bf16, u_acc = 2^-24)
 * (u and u_acc include the float64 oracle's 2^-53, or, where the oracle's sums are compensated,
 * c_op 2^-53 (dtype_i + 2^-20 m_i) is added instead: cc_bound_oracle_compensated)
 * (ref.h: m_i every rounding, dtype_i the share a correct kernel makes in the dtype itself),
 * NaN positions must match, and +-Inf must match in sign (or be the dtype's overflow of a
 * finite expected value beyond the largest finite number). The figure kept is the worst bound
 * ratio |got - expected| / bound (<= 1 passes), with the element that produced it.
 *
 * The probabilistic bound: prob_i (m_i with each accumulation length n replaced by sqrt(n))
 * scaled by CC_SUSPECT_LAMBDA in place of m_i. It judges in two ways:
 *   judging  where an element's worst-case bound is vacuous (below) and the case's values meet
 *            the probabilistic model's assumptions (cc_bound_model.prob_judges), the element
 *            is judged by its probabilistic bound instead (when that is the smaller): a long
 *            sum that the worst-case bound cannot judge fails above it;
 *   suspect  everywhere else the same error against it is a hint that never fails a case by
 *            itself: a passing case over it is `suspect` (a policy may count it as a failure).
 * An output is vacuous when the bound that judges it, at every element, admits every finite
 * value of the dtype or every value of the output's own magnitude: it proves nothing and is
 * never evidence (cc_output_is_vacuous: Inf and NaN expected values are judged by their
 * pattern, and an output of Inf inputs is judged by that pattern).
 *
 * The rounding-bias test (cc_bound_model.bias_test: f16/bf16): a kernel that rounds its float32
 * result to the dtype by truncation errs by under one ulp, inside every bound with c_op >= 2,
 * but always toward zero. Over the distinct expected values of an output whose final rounding
 * is its only rounding in the dtype (dtype_i <= |y_i|), in the dtype's normal range and not
 * representable in the dtype nor halfway between two of its values, a round-to-nearest kernel
 * errs up or down, toward zero or away from it, each with probability 1/2 (its rounding errors
 * are symmetric and independent from element to element). A sign test of each direction: with
 * N such values of which K err one way, z = (2K - N) / sqrt(N); Hoeffding's inequality bounds
 * P(|z| >= t) by 2 exp(-t^2 / 2) under round to nearest, so |z| > cc_bias_z_threshold() (that
 * probability CC_BIAS_ALPHA) rejects it. A truncating kernel errs toward zero at every such
 * value: z = sqrt(N), rejected from N = 43 values on. */
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

/* The rounding-bias test's false-alarm rate per output and direction, and its threshold on
 * |z|: sqrt(2 ln(2 / alpha)) = 6.545 (compare.c computes it from the rate). */
#define CC_BIAS_ALPHA 1e-9
double cc_bias_z_threshold(void);

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
    /* 1: an element whose worst-case bound is vacuous is judged by its probabilistic bound
     * (when that is the smaller). The model's assumption: the accumulation rounds to nearest in
     * float32 or finer (u_acc <= 2^-24 + 2^-53), its roundings mean-zero and independent of
     * each other; cc_bound_for_judging sets it where u_acc allows. Where it judges is where the
     * model's other assumptions hold: a worst-case bound of fewer than 1/(c u) terms is
     * vacuous only where the sum cancels (|y| < c u m_i), and sums of one sign or of one
     * repeated value, whose roundings drift one way, do not (docs/judging.md). */
    int prob_judges;
    /* 1: the rounding-bias test runs (f16/bf16; the runner clears it where the case's values
     * repeat or are few: the bcast layout, edge=ties) */
    int bias_test;
    /* 0, or 2^-53 for an op whose oracle sums with compensation (cc_bound_oracle_compensated):
     * the oracle's own share is then c_op 2^-53 (dtype_i + 2^-20 m_i), not in u and u_acc */
    double oracle_dtype;
} cc_bound_model;

/* One element's magnitudes (ref_mag's planes at one index). */
typedef struct {
    double worst, dtype, prob;
} cc_element_mag;

/* The rounding-bias test of one output: n distinct values entered it, toward_zero of them
 * came back nearer zero than expected and below of them below it; mean_ulp is the mean of
 * their signed errors in ulps of the dtype at the expected value, counted away from zero
 * (a truncating kernel: about -0.5); z the larger |z| of the two directions, signed as its
 * direction's (2K - N) / sqrt(N) (K: toward zero, or below when that is the larger); biased
 * when |z| > cc_bias_z_threshold(). */
typedef struct {
    int64_t n, toward_zero, below;
    double mean_ulp, z;
    int biased;
} cc_bias;

typedef struct {
    int64_t n, n_over;     /* elements compared, elements over their bound */
    int64_t n_nan_mismatch;
    double worst_ratio;    /* 0 for an empty or exact output */
    int64_t worst_index;   /* -1 when n == 0 */
    double expected, got, bound, magnitude;
    int worst_by_prob;     /* the worst element was judged by its probabilistic bound */
    double suspect_ratio;  /* the worst |got - expected| / suspect bound */
    int64_t n_vacuous;     /* elements whose bound (the one that judged them) is vacuous */
    int vacuous;           /* cc_output_is_vacuous */
    int64_t n_prob;        /* elements judged by their probabilistic bound */
    double own_max;        /* the output's own magnitude (cc_output_own_max) */
    cc_bias bias;          /* the rounding-bias test (bias.n = 0: no element entered it) */
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
/* The model of a check whose oracle rounds only where its dtype share counts (reference/ref.h,
 * ref_op.compensated: its sums compensated, within 2^-53 |s| + gamma_n^2 sum|t| of the exact
 * sum s; gamma_n^2 <= 2^-20 n 2^-53 for n <= 2^33 terms): u and u_acc lose the oracle's 2^-53
 * and the bound gains c_op 2^-53 (dtype_i + 2^-20 m_i) in its place. For an f64 case that
 * halves the bound of a sum; for f32 and narrower it changes the last bits. */
void cc_bound_oracle_compensated(cc_bound_model *m);
/* The coarsest compute roundoff a provider may declare: bf16's 2^-8. */
#define CC_MAX_COMPUTE_ROUNDOFF 0x1p-8
/* 1 when a declared compute roundoff is usable: 0 (none) up to CC_MAX_COMPUTE_ROUNDOFF; NaN,
 * negative and coarser values are not (the runner makes such a case an error). */
int cc_compute_roundoff_valid(double compute_u);

/* The bound of one element, and its suspect bound. A magnitude that is NaN holds the element to
 * the floor. */
double cc_element_bound(const cc_bound_model *m, cc_element_mag mag);
double cc_element_suspect_bound(const cc_bound_model *m, cc_element_mag mag);
/* The bound that judges an element of an output whose own magnitude is out_max
 * (cc_output_own_max): its suspect bound when m->prob_judges, its bound is vacuous
 * (cc_bound_is_vacuous) and the suspect bound is the smaller (*by_prob = 1); else its bound
 * (*by_prob = 0). by_prob may be NULL. */
double cc_element_judging_bound(const cc_bound_model *m, cc_element_mag mag, double expected,
                                double out_max, cc_dtype t, int *by_prob);
/* The output's own magnitude: its largest finite |expected_i| that is not within the
 * reference's own float64 error, 2 c_op 2^-53 worst_i, of zero (0 when none is). */
double cc_output_own_max(const double *expected, const double *worst, int64_t n,
                         const cc_bound_model *m);
/* Whether an element enters the rounding-bias test (compare.h's header: m->bias_test, finite
 * values, |expected| in the dtype's normal range, not representable nor a tie, and the final
 * rounding its only rounding in the dtype: mag.dtype <= |expected|). */
int cc_bias_candidate(const cc_bound_model *m, cc_element_mag mag, double expected, double got,
                      cc_dtype t);
/* The test's verdict from its counts (cc_bias: n, toward_zero, below; mean_ulp left alone):
 * z and biased. */
void cc_bias_decide(cc_bias *b);
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
/* Whether an output of n elements is vacuous: it has n_finite finite expected values and every
 * one is vacuous (n_vacuous, cc_bound_is_vacuous by the bound that judged it), unless each of
 * them has an infinite bound (n_unbounded: an Inf or NaN input reaches it, and the contract pins
 * only that the value is finite, e.g. the DC imaginary part of the spectrum of an Inf input)
 * beside Inf or NaN expected values: an output of non-finite inputs, judged by its NaN/Inf
 * pattern, exactly, element by element, and not vacuous. An output whose finite values have
 * finite bounds that admit everything stays vacuous whatever Inf or NaN stands beside them. */
int cc_output_is_vacuous(int64_t n, int64_t n_finite, int64_t n_vacuous, int64_t n_unbounded);
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
    int by_prob; /* judged by its probabilistic bound */
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
