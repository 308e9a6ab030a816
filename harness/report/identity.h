/* A case's identity, and a run's records folded by it: evidence that cannot be inflated by running
 * a case again (a file given twice, 150 copies of one line, overlapping shards, a resume).
 *
 * Identity: what determines a case's inputs and its check, beside where it ran. The canonical
 * case line (op, dtype, device, shapes, the layout of each input, parameters, edge class, value
 * stream, seed, check=), with ref= replaced by the reference mode that actually ran (full, or
 * sampled: the record's "sampled"), how it was judged (the accumulation mode: strict and relaxed
 * bounds are two checks), the platform and the provider. So `ref=auto` and `ref=full`
 * of a case too small ever to be sampled are one check (the same work, the same verdict), while
 * a sampled and a full check of one case are two: a sample may miss the element a full check
 * fails on, so their results may differ without anything being wrong.
 *
 * Every record after an identity's first is a repeat: counted once (as the first), and compared
 * with the first. Their statuses must agree; where the provider's bits must be reproducible
 * (every CPU case; CUDA cases with deterministic algorithms on, as --repeat has it, runner.h)
 * the figures that come from its bits must agree too (forward, VJP and worst bound ratios; the
 * worst element's output, index and value). A repeat that disagrees makes the case
 * `nondeterministic`: a finding, not a tie to break.
 *
 * Inputs key: the identity less its check= and its reference mode, one draw of inputs. Evidence
 * counts passing inputs (harness/evidence/evidence.h): a case split into check=fwd and check=vjp
 * lines, or checked full and sampled, is one passing case, not two. */
#ifndef CAPCHECK_IDENTITY_H
#define CAPCHECK_IDENTITY_H

#include <stddef.h>

#include "core/keyset.h"
#include "harness/run/runner.h"

/* "<platform>\t<provider>\t<full|sampled>\t<strict|relaxed>\t<line without ref=>" (at most n
 * bytes with its NUL). */
void cc_case_identity(const cc_result *r, char *buf, size_t n);
/* "<platform>\t<provider>\t<line without ref= and check=>" */
void cc_case_inputs_key(const cc_result *r, char *buf, size_t n);

/* Whether a repeat of r must give the same bits: on the CPU always; on CUDA when the run's
 * deterministic mode (its provenance, "on ..." or "off ...") is on. */
int cc_repeat_bits_must_agree(const cc_result *r, const char *deterministic);

typedef struct cc_fold_case cc_fold_case;

/* Records folded one at a time (a zeroed cc_fold is empty). */
typedef struct {
    cc_keyset ids;
    cc_fold_case *v; /* per identity: what its first record said */
    size_t cap;
    long repeats;     /* records that repeated an earlier one */
    long disagreeing; /* identities a repeat disagreed with */
} cc_fold;

typedef enum {
    CC_FOLD_FIRST = 0, /* the first record of its identity: the case */
    CC_FOLD_REPEAT,    /* a repeat that agrees (or of a case already nondeterministic) */
    CC_FOLD_DISAGREES  /* the first repeat to disagree: the case is now nondeterministic */
} cc_fold_kind;

typedef struct {
    cc_fold_kind kind;
    size_t first;                  /* the position (as given) of the identity's first record */
    cc_result_status first_status; /* the first record's status */
    int first_unjudged;            /* and whether it judged nothing (cc_result_unjudged) */
    double first_ratio;            /* and its worst bound ratio */
    char why[300];                 /* CC_FOLD_DISAGREES: what differs, one sentence */
} cc_fold_seen;

/* Fold record r, at position pos of its run. 0, or -1 when memory runs out. */
int cc_fold_add(cc_fold *f, const cc_result *r, size_t pos, int bits_must_agree,
                cc_fold_seen *seen);
void cc_fold_free(cc_fold *f);

/* A whole run's records folded (results in case order, deterministic: its provenance's mode). */
typedef struct {
    size_t *first;                  /* per record: its identity's first record */
    unsigned char *nondeterministic; /* per record: 1 at a first record whose repeats disagree */
    struct cc_fold_disagreement {
        size_t first;  /* the first record of the case */
        char why[300]; /* what differs */
    } *disagreement;   /* one per such case (few: each is a finding) */
    long repeats, disagreeing, distinct;
} cc_folded;

int cc_fold_run(const cc_result *results, size_t n, const char *deterministic, cc_folded *out);
void cc_folded_free(cc_folded *f);
/* The status the case of first record i stands for: its own, or nondeterministic. */
cc_result_status cc_folded_status(const cc_folded *f, const cc_result *results, size_t i);
/* Why the case of first record i is nondeterministic; "" when it is not. */
const char *cc_folded_why(const cc_folded *f, size_t i);

/* "1,234 repeated case lines counted once" (the count with thousands separators) into buf. */
void cc_repeats_sentence(long repeats, char *buf, size_t n);

#endif
