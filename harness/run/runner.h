/* Room harness/run/: one case through a provider to a cc_result: runner, compare,
 * zero_trust, pool (workers), witness, plugin. May call harness/case/ and below. */
/* Run one case end to end: materialize, reference, provider, compare. */
#ifndef CAPCHECK_RUNNER_H
#define CAPCHECK_RUNNER_H

#include <stdint.h>

#include "harness/case/case.h"
#include "harness/run/compare.h"
#include "harness/run/power.h"
#include "harness/run/zero_trust.h"

typedef enum {
    CC_RES_PASS = 0,
    CC_RES_FAIL,        /* some element over its bound, or a NaN/Inf mismatch */
    CC_RES_UNSUPPORTED, /* the provider does not implement this op/dtype/device */
    CC_RES_ERROR,       /* the provider raised an error, or the case could not be built */
    CC_RES_CRASH,       /* the worker died (signal) */
    CC_RES_TIMEOUT,
    CC_RES_OUT_OF_BOUNDS,    /* the provider read or wrote outside a buffer (harness/guard.h) */
    CC_RES_NONDETERMINISTIC, /* repeated calls on the same inputs gave different bits */
    CC_RES_COUNT
} cc_result_status;

/* One comparison of an output with its reference, handed to cc_run_options.tap after it is
 * made: what capcheck compared (cc_compare_at's arguments) and what it gave. A reproducer keeps
 * the first call's outputs to carry capcheck's expected values and bounds
 * (harness/tools/reproducer.h); tests/test_judge.c holds the judge to its definition on every
 * comparison runs really make. */
typedef struct {
    const char *what;            /* "y" or "grad:<input name>" */
    const cc_view *got;          /* the provider's output: dense, the case dtype */
    const double *expected;      /* the reference: count values */
    const ref_mag *mag;          /* their magnitudes */
    const int64_t *at;           /* flat indices of a sampled check; NULL: every element */
    int64_t count;
    const cc_bound_model *bound; /* the bound of element e: cc_element_bound(bound, mag at e) */
    double c_op;
    const cc_zt_source *sources; /* what the output must not merely copy (zero_trust.h); on
                                    the first call only (n_sources 0 on the others) */
    int n_sources;
    int call;                    /* the provider call (0: the first; --repeat's are 1, 2, ...) */
    const cc_comparison *cmp;    /* what cc_compare_at gave */
} cc_judged_output;

typedef struct cc_judge_tap {
    void (*seen)(void *ctx, const cc_judged_output *o);
    void *ctx;
} cc_judge_tap;

/* How a case is run (zero-initialised: the defaults). */
typedef struct {
    int repeat;         /* provider calls per check on the same inputs; 0 or 1: one */
    int unguarded;      /* 1: plain heap buffers, no guard pages or canaries (bench, --no-guard) */
    int deterministic;  /* 1: deterministic algorithms are on (--deterministic on): repeats must
                           agree bit for bit on every device; on CPU they must anyway */
    struct cc_guard_cache *guard_cache; /* mappings kept between cases (core/guard.h); NULL:
                                           none */
    int threads;        /* for drawing inputs and the reference (<= 1: this thread only) */
    cc_ref_mode ref;    /* the run's --ref: CC_REF_AUTO leaves each case's own ref= */
    cc_accumulation accumulation; /* how f16/bf16 sums are judged (compare.h); 0: strict */
    int power;                    /* also measure each case's detection power (power.h) */
    /* 1: judge by the worst-case bound alone, as runs did before the probabilistic bound's
     * verdict and the rounding-bias test (compare.h): what tests compare those two with */
    int worst_case_only;
    struct cc_vjp_modes *vjp_modes; /* the providers' vjpModes asked so far, kept between
                                       cases (a worker's); NULL: asked every case */
    const cc_judge_tap *tap; /* told every comparison a check makes; NULL: none */
} cc_run_options;

/* The vjpMode text a provider gave for an op (a capsule's property, abi/capcheck_provider.h),
 * kept per provider and op: the ATen shim finds it by a linear search of its tables, 1 % of a
 * small case. Direct-mapped by op; zero-initialised: empty. */
#define CC_VJP_MODES_KEPT 64
typedef struct cc_vjp_modes {
    struct {
        const cc_provider *provider; /* NULL: an empty slot */
        const ref_op *op;
        char mode[24];
    } slot[CC_VJP_MODES_KEPT];
} cc_vjp_modes;

/* Witnesses (harness/run/witness.h): other providers run on a case the primary did not pass, so a
 * reader sees who is wrong. At most CC_MAX_WITNESSES per run. */
#define CC_MAX_WITNESSES 4

typedef enum {
    CC_VERDICT_NONE = 0,         /* no witness was asked (no --witness, or the primary passed) */
    CC_VERDICT_PROVIDER_OUTLIER, /* every witness that ran agrees with the reference */
    CC_VERDICT_REFERENCE_SUSPECT, /* every witness that ran fails, agreeing with the primary */
    CC_VERDICT_DISPUTED,         /* otherwise */
    CC_VERDICT_NO_WITNESS,       /* no witness could run the case */
    CC_VERDICT_COUNT
} cc_three_way_verdict;

/* What one witness gave on the primary's case (same materialized inputs). */
typedef struct {
    char provider[32];
    cc_result_status status; /* its own result against the reference */
    double worst_ratio;      /* its own worst bound ratio against the reference */
    int has_value;           /* it produced the primary's worst output: got and agree_ratio */
    double got;              /* its value at the primary's worst element (output and index) */
    double agree_ratio;      /* |got - the primary's got| / that element's bound (<= 1 agrees) */
    char message[192];       /* why it did not pass, when it did not (cut to fit) */
} cc_witness;

typedef struct {
    char line[CC_CASE_LINE_MAX]; /* canonical repro line */
    char op[32];
    cc_dtype dtype;
    cc_device device;
    cc_layout layout;
    char provider[32];
    /* the platform key (harness/run/platform.h) of the worker that ran the case, stamped by the
     * worker pool; "" for a case run in process without one */
    char platform[48];
    char vjp_mode[24];
    cc_result_status status;
    char message[384];
    int checked_fwd, checked_vjp;
    double fwd_ratio, vjp_ratio, worst_ratio;
    char worst_output[32];     /* "y" or "grad:<input name>" */
    char worst_index[96];      /* multi-index, e.g. [1,2] */
    char worst_inputs[256];    /* inputs at that index where their shape matches */
    double expected, got, bound;
    /* how it was judged (compare.h): f16/bf16 accumulation strict or relaxed; the worst error
     * over the suspect bound, and whether a passing case exceeds it there; whether an output or
     * gradient had a vacuous bound at every element (never evidence) */
    cc_accumulation accumulation;
    double suspect_ratio;
    int suspect, vacuous;
    char vacuous_outputs[96]; /* the vacuous ones, space-separated ("grad:q grad:k"); "" in a
                                 record written before they were named */
    /* elements judged by their probabilistic bound (their worst-case bound was vacuous), and
     * whether the worst element is one of them; the rounding-bias test of largest |z| over the
     * outputs (bias.n = 0: none ran) and the output it is of */
    int64_t prob_judged;
    int worst_by_prob;
    cc_bias bias;
    char bias_output[32];
    int has_power;  /* run with --power: the detection power figures (power.h) */
    cc_power power;
    int64_t elements; /* output elements */
    int repeat;       /* provider calls per check (--repeat); 0 or 1: one, and not recorded */
    /* --repeat: call 2, at the other buffer placement, gave other bits than call 1 while every
     * call at each placement gave that placement's bits again (cc_run_case_probed): a kernel
     * whose bits depend on where its buffers sit, not a race. The first element that moved: its
     * output ("y", "grad:x"), multi-index, and its values at the two placements */
    int placement_sensitive;
    char placement_output[32];
    char placement_index[96];
    double placement_first, placement_moved;
    double seconds;
    /* a sampled check (harness/run/sample.h): the share of the output and gradient elements whose
     * reference was computed (0 < fraction < 1), and the window every bug must exceed to be
     * sure of a checked element; sampled = 0 for a full check (then no "sampled" member) */
    int sampled;
    double checked_fraction;
    int64_t window_rows, window_cols;
    int64_t sample_checked, sample_total; /* in memory only: the fraction's parts */
    /* 1: the case's first worker was killed from outside (SIGKILL or SIGTERM the pool did not
     * send: the OOM killer, an operator) and this is its second run (harness/pool.h); the
     * record then carries "retried":true */
    int retried;
    /* flat row-major index of the worst element in worst_output; in memory only (witnesses are
     * asked about it before the record is written), not part of the record */
    int64_t worst_flat;
    int n_witnesses; /* 0 unless witnesses ran: then the record carries them and the verdict */
    cc_witness witnesses[CC_MAX_WITNESSES];
    cc_three_way_verdict verdict;
} cc_result;

/* One element a run is asked to read back: a witness asked about the primary's worst element. */
typedef struct {
    char output[32];     /* "y" or "grad:<input name>" (cc_result.worst_output); "" asks nothing */
    int64_t index;       /* flat row-major index into that output (cc_result.worst_flat) */
    double compare_with; /* the value to judge it against (the primary's got) */
    int found;           /* out: 1 when the run produced that output */
    double got, ratio;   /* out: the value there; |got - compare_with| / that element's bound */
} cc_probe;

const char *cc_result_status_name(cc_result_status s);

/* The provider calls whose text capcheck keeps. Every message and description a provider writes
 * is made a bounded one-line UTF-8 sentence (harness/text.h) before anything reads it.
 * cc_provider_init: init on one device (CC_OK when the provider has none); an empty message
 * becomes "unsupported" or "init failed". cc_provider_describe: describe() into buf, or the
 * provider's name when it states nothing. */
cc_status cc_provider_init(const cc_provider *p, cc_device d, char *msg, size_t len);
void cc_provider_describe(const cc_provider *p, char *buf, size_t len);
/* Of per-status counts: the provider faults that are not a wrong value (error, crash, timeout,
 * out-of-bounds, nondeterministic), which reports count as "errors". */
long cc_count_errors(const long *counts);
/* 1 when r failed on a NaN/Inf pattern: its worst element expected NaN or an infinity and got a
 * finite value, or the reverse (a NaN, or an Inf that is not the overflow of the expected
 * value). Reports count these apart and rank them after a finite expected value missed beyond
 * its bound, the mismatch that shows a wrong kernel (an edge=nan case fails on its NaNs under
 * almost any bug). */
int cc_result_nonfinite_miss(const cc_result *r);
/* The identity part of a result (canonical line, op, dtype, device, layout, provider,
 * vjp_mode), everything else zero and status pass: what cc_run_case starts from, and what the
 * worker pool fills in for a case whose worker crashed or timed out. */
void cc_result_begin(const cc_provider *p, const cc_case *c, cc_result *r);
/* The same, the vjpMode taken from `kept` when it holds it (asked and kept otherwise; NULL:
 * asked). */
void cc_result_begin_kept(const cc_provider *p, const cc_case *c, cc_vjp_modes *kept,
                          cc_result *r);
/* Never fails: every problem becomes the result's status and message. Default options. */
void cc_run_case(const cc_provider *p, const cc_case *c, cc_result *r);
/* The same under options `o` (NULL: defaults), also reading back the element `probe` names
 * (NULL: none) under the op's error model of this run (cc_element_ratio with compare_with in
 * place of the expected value).
 * With o->repeat = N > 1 each provider call runs N times on the same inputs, every second time
 * with the buffers at the other placement (core/guard.h); each output is judged against its
 * bound. Where repeats must agree (every CPU case; CUDA cases under o->deterministic) calls at
 * one placement must give the same bits (any NaN equals any NaN, as TorchLean's AgreeUpToNaN):
 * a call that differs from an earlier one at its placement makes the case `nondeterministic`
 * (a race). Calls at the two placements may differ: when call 2 (at the other placement)
 * differs from call 1, at least 4 calls are made (N < 4: one or two more), two at each
 * placement; if every call gives its placement's first bits, the kernel depends on where its
 * buffers sit (MKL without Conditional Numerical Reproducibility), and the case keeps its
 * status with r->placement_sensitive set; else it is `nondeterministic`.
 * Unguarded buffers (o->unguarded) are never moved: every call is at the first placement. */
void cc_run_case_probed(const cc_provider *p, const cc_case *c, const cc_run_options *o,
                        cc_probe *probe, cc_result *r);
/* Keep freed memory in this process (glibc hands large blocks back to the kernel, and the next
 * case of the same size then faults every page in again): for processes that run cases. */
void cc_runner_keep_memory(void);

#endif
