/* Sampled checks: above a cost threshold, the float64 reference of the ops that have a sampled
 * form (ref_op.forward_at / vjp_at: matmul, scaledMatmul, linear, softmaxMatmul, attention,
 * conv, convTranspose, fftFno) computes a stratified sample of each output's elements, exactly
 * the values the full reference gives there; the provider's whole output is still read.
 *
 * Which elements. An output of n elements is seen as a matrix [R, C]: its leading axes as rows,
 * the rest as columns, split where max(R, C) is least (matmul [.., m, n]: rows are the batched
 * rows; conv [C, spatial]: channels by positions; a weight [O, I, k..]: O by the rest). The
 * sample, a pure function of the case (its seed, the output, the shape), holds
 *   every row and every column: element (t mod R, t mod C) for t < max(R, C);
 *   a lattice: the rows r = rho (mod Tr), in each such row the columns c = gamma_r (mod Tc) with
 *     its own offset gamma_r: every Tr x Tc window of the matrix, aligned or not, holds one
 *     (Tr, Tc powers of two from 8, doubled until the lattice holds about n/1024 elements);
 *   the boundaries: rows and columns 0, 1, the last two, and both sides of the first and the
 *     last tile boundary of every tile size 4..128 (the vector widths and blockings of
 *     kernels), every such row with every such column;
 *   and 256 elements drawn at random.
 * When the runner judges the provider's output it adds every element where the provider wrote
 * NaN or Inf (the inputs are finite in a sampled case, so the reference is finite everywhere:
 * every non-finite value is judged against it exactly), and the zero-trust checks read the whole
 * output against the sample.
 *
 * When. A case is sampled when its `ref=` (or the run's --ref) says sampled, or says auto and
 * the full reference would cost more than CC_SAMPLE_THRESHOLD multiply-adds, the op has both
 * sampled forms its check needs, every input and the cotangent are finite, and the sample's
 * reference work is at most a quarter of the full reference's. The record then carries "sampled": the fraction of elements
 * checked and the window (Tr x Tc) that every bug must exceed to be certain of a checked
 * element. */
#ifndef CAPCHECK_SAMPLE_H
#define CAPCHECK_SAMPLE_H

#include <stdint.h>

#include "harness/case/case.h"
#include "harness/case/materialize.h"

/* Above this many multiply-adds of full reference work (output and gradients), ref=auto
 * samples: about a tenth of a second of the float64 reference on one core. */
#define CC_SAMPLE_THRESHOLD 1.0e8

typedef struct {
    int64_t *at;     /* ascending flat indices into the output */
    int64_t count;
    int64_t total;   /* the output's element count */
    int64_t rows, cols;          /* the matrix view */
    int64_t window_rows, window_cols; /* Tr, Tc of the lattice */
} cc_sample;

/* The full reference's work for case c in multiply-adds (its forward and, when its check
 * includes the VJP, its gradients), from the op's work(); 0 for an op without sampled forms. */
double cc_reference_work(const cc_case *c);
/* Whether case c is checked on samples under reference mode `mode` (the run's --ref, or
 * CC_REF_AUTO for the case's own), its inputs as materialized. */
int cc_sampling_chosen(const cc_case *c, cc_ref_mode mode, const cc_inputs *in);
/* The sample of output `output` (-1 for y, i for the gradient of input i) of shape s.
 * Returns 0, or -1 when out of memory. */
int cc_sample_plan(const cc_case *c, int output, const ref_shape *s, cc_sample *out);
/* Adds indices (any order, repeats allowed) to the sample, keeping it ascending and unique. */
int cc_sample_add(cc_sample *s, const int64_t *extra, int64_t n);
void cc_sample_free(cc_sample *s);

#endif
