/* Room harness/evidence/: finished runs read back: merge (and --shard auto: shard_auto),
 * evidence, gate, diff, report.html (report_html), history, and their outputs (evidence_out).
 * May call harness/session/ and below. */
/* Evidence per capsule, dtype and platform (harness/run/platform.h: what selected the kernels;
 * "" for results that name none), aggregated from a run's results (results.jsonl, checked
 * against report.json's digest by cc_run_load): case counts by status, passing forward and VJP
 * checks, the worst bound ratio and its case, and the coverage classes of the passing cases:
 *
 *   shape classes   of the primary input (input 0; the output for ops without inputs):
 *                   scalar (rank 0), vector (rank 1), matrix (rank 2), high-rank (rank >= 3),
 *                   and empty (any input or the output has a zero-size dimension; a case is
 *                   then also counted under its rank's class);
 *   layout classes  the case's layout: contig, transpose, stride2, bcast;
 *   edge classes    the case's edge=<class> (harness/case/case.h): nan, inf, signed-zero,
 *                   subnormal, huge, ties, masked-row;
 * A passing case whose bound was vacuous (compare.h) proves nothing: it is counted as vacuous
 * and in no other evidence (checks, classes); a suspect one is counted as such and as evidence.
 *
 * Every case counts once however often it ran (harness/report/identity.h): a repeat is counted
 * in `repeats` only, and a case whose repeats disagree counts as nondeterministic. Passing
 * evidence counts inputs: a case checked under several check= or reference modes is one passing
 * case (the VJP counts where one of them checked it). Diversity: the distinct input-shape tuples
 * (the output's shape for ops without inputs) and layouts among the passing inputs, and the edge
 * classes they cover.
 *
 * Written out as evidence.json per capsule in TorchLean's vocabulary (ContractClaim,
 * ContractEvidence; ops.md section 1), and as a Lean file for the capsules the gate upgrades. */
#ifndef CAPCHECK_EVIDENCE_H
#define CAPCHECK_EVIDENCE_H

#include <stdio.h>

#include "harness/report/capsules.h"
#include "harness/evidence/merge.h"

enum { CC_SHAPE_SCALAR, CC_SHAPE_VECTOR, CC_SHAPE_MATRIX, CC_SHAPE_HIGHRANK, CC_SHAPE_EMPTY,
       CC_SHAPE_COUNT };

extern const char *const cc_shape_class_names[CC_SHAPE_COUNT];
/* Bit masks of the shape classes and the edge classes of a canonical case line; both 0 when it
 * does not parse. */
void cc_case_line_classes(const char *line, unsigned *shapes, unsigned *edges);

typedef struct {
    cc_capsule capsule;
    cc_dtype dtype;
    char platform[48];   /* the platform the results ran on ("" when they name none) */
    char vjp_mode[24];   /* the mode the results state (what the provider ran), "mixed" when
                            they disagree; the capsule's own is the catalog's */
    long cases, counts[CC_RES_COUNT]; /* distinct cases, by status (each case once) */
    long repeats;                  /* records that repeated one of its cases (counted once) */
    long passing;                  /* distinct inputs a passing, non-vacuous case checked */
    long passing_checks;           /* passing, non-vacuous cases (several per inputs: check=) */
    long fwd_passing, vjp_passing; /* distinct passing inputs whose forward / VJP was checked */
    long distinct_shapes, distinct_layouts; /* among the passing inputs */
    long sampled_left_out;         /* passing sampled checks the policy does not count */
    long vacuous, suspect;         /* passing cases with a vacuous bound; suspect ones */
    long relaxed;                  /* cases judged with relaxed accumulation (compare.h) */
    char first_suspect[CC_CASE_LINE_MAX];
    double worst_ratio;
    char worst_line[CC_CASE_LINE_MAX];
    char first_failure[CC_CASE_LINE_MAX];
    char first_failure_msg[384];
    long shape_n[CC_SHAPE_COUNT];   /* passing cases per class */
    long layout_n[CC_LAYOUT_COUNT];
    long edge_n[CC_EDGE_COUNT];
    int least_repeat; /* the fewest provider calls per check of a passing case (0: none) */
} cc_capsule_stats;

typedef struct {
    cc_capsule_stats *v; /* in order of first appearance in the run */
    size_t n, cap;
    long distinct, repeats, disagreeing; /* of the whole run (harness/report/identity.h) */
} cc_evidence;

/* ", "-separated lists (platform keys, dtypes): the next item of *p into buf (0 at the end), and
 * adding each item of `items` to `list` once. */
int cc_list_next(const char **p, char *buf, size_t n);
void cc_list_add(char *list, size_t n, const char *items);

/* The distinct edge classes a capsule's passing inputs cover. */
int cc_evidence_edge_classes(const cc_capsule_stats *s);

/* count_sampled: whether a passing sampled check (harness/run/sample.h) is evidence; when not,
 * it is counted in `cases` and `sampled_left_out` only (one that did not pass counts as usual). */
int cc_evidence_collect(const cc_run *run, const cc_catalog *cat, int count_sampled,
                        cc_evidence *ev, char *msg, size_t len);
void cc_evidence_free(cc_evidence *ev);
const cc_capsule_stats *cc_evidence_find(const cc_evidence *ev, const char *capsule,
                                         cc_dtype dtype, const char *platform);

#endif
