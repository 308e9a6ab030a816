/* The trust gate (DESIGN.md section 6): a written policy (reports/policy.conf documents the
 * format) decides, per capsule and dtype, whether a run's evidence moves the capsule from
 * trustedExternal to checked.
 *
 * Before judging anything the gate refuses evidence it cannot trust, with one sentence each
 * (exit 2): a report without its .sha256 seal or whose bytes no longer match it, results that
 * do not match the report's digest, a report without provenance, a report naming another
 * libtorch version than the policy (or none), a lone shard, and a shard set with a shard
 * missing or given twice, or shards of different runs. Signatures (who vouched for the run, and
 * that nothing changed since) are checked before it, by the caller, with
 * harness/evidence/signature.h: the policy's require_signature says whether an unsigned run is
 * refused.
 *
 * Evidence is per capsule x dtype x platform (harness/run/platform.h): a run at several dispatch
 * levels has a verdict for each. With `platforms KEY...` in the policy, a required capsule x
 * dtype must be checked on each of those platforms (one it has no case on is named missing),
 * and a verdict on another platform is not required; without it, every platform the report has
 * is judged on its own.
 *
 * A sampled check (a record with "sampled", harness/run/sample.h) that passed is evidence only
 * when the policy says `sampled_checks count`; with `ignore` it is left out of every count (it
 * still blocks when it did not pass: a failure is a failure however it was found).
 *
 * Then, for every capsule x dtype x platform in the report and every one the policy requires:
 *   checked          every requirement holds: at least min_passing passing cases (a case
 *                    whose bound was vacuous is never evidence: it counts nowhere); no case
 *                    failed, errored, crashed or timed out; no unsupported case unless
 *                    allow_unsupported; where the op requires a VJP (TorchLean's requiresVJP)
 *                    the results state one vjpMode the provider ran (torchLeanTape or
 *                    backendVJP; the catalog's is not what was tested) and at least
 *                    min_vjp_passing passing cases checked it; each listed shape, layout and
 *                    edge class is covered by a passing case; with `suspect fail`, no passing
 *                    case is suspect; f16/bf16 results were judged with strict accumulation
 *                    (unless `accumulation relaxed`);
 *   trustedExternal  with one line per unmet requirement, naming what is missing.
 * Exit code: with `require` lines, 0 when every required capsule x dtype is checked, else 1;
 * without, 0 when every capsule x dtype of the report is checked (and there is one), else 1;
 * 2 for unusable input (a bad policy, a refused report). */
#ifndef CAPCHECK_GATE_H
#define CAPCHECK_GATE_H

#include <stdio.h>

#include "harness/report/capsules.h"
#include "harness/evidence/evidence.h"
#include "harness/evidence/merge.h"
#include "core/torchlean.h"

#define CC_POLICY_FORMAT "capcheck-policy/1"
#define CC_POLICY_MAX_SECTIONS 64
#define CC_POLICY_MAX_PATTERNS 16
#define CC_POLICY_MAX_REQUIRE 64
#define CC_GATE_MAX_REASONS 12
#define CC_POLICY_MAX_PLATFORMS 16

typedef struct {
    long min_passing, min_vjp_passing;
    long min_distinct_shapes; /* distinct input-shape tuples among the passing inputs; -1 (not
                                 set): half of min_passing, rounded up */
    unsigned shapes, layouts, edges; /* bit masks of required classes */
    int allow_unsupported;
    long min_repeat; /* every passing case ran at least this many provider calls (--repeat) */
    int suspect_fails; /* `suspect fail`: a suspect case keeps the capsule out, as a failure */
    int allow_relaxed; /* `accumulation relaxed`: f16/bf16 evidence judged relaxed counts */
} cc_requirements;

enum { CC_REQ_MIN = 1, CC_REQ_MIN_VJP = 2, CC_REQ_SHAPES = 4, CC_REQ_LAYOUTS = 8,
       CC_REQ_EDGES = 16, CC_REQ_UNSUPPORTED = 32, CC_REQ_REPEAT = 64, CC_REQ_SUSPECT = 128,
       CC_REQ_ACCUMULATION = 256, CC_REQ_DISTINCT_SHAPES = 512 };

/* What holds a verdict back, by kind (cc_verdict.why: a bit per kind of its reasons). */
enum { CC_WHY_NO_CASE, CC_WHY_NOT_PASSED, CC_WHY_REPEAT, CC_WHY_UNSUPPORTED, CC_WHY_RELAXED,
       CC_WHY_SUSPECT, CC_WHY_TOO_FEW, CC_WHY_VJP, CC_WHY_SHAPES, CC_WHY_CLASSES,
       CC_WHY_REQUIRE, CC_WHY_COUNT };

typedef struct {
    int is_op; /* [op NAME...] rather than [capsule GLOB...] */
    int n_pat;
    char pat[CC_POLICY_MAX_PATTERNS][80];
    unsigned dtypes; /* bit per cc_dtype; 0: every dtype */
    unsigned set;    /* CC_REQ_* keys this section sets */
    cc_requirements req;
    int line;
} cc_policy_section;

typedef struct {
    char glob[80];
    unsigned dtypes;
    int line;
} cc_policy_require;

typedef struct {
    char name[512];
    char libtorch_version[48]; /* "" = any */
    /* platforms KEY...: the platform keys (harness/run/platform.h) the evidence must hold on; none
     * (or `any`): each platform the report has is judged on its own */
    int n_platforms;
    char platforms[CC_POLICY_MAX_PLATFORMS][48];
    int sampled_checks; /* sampled_checks count|ignore: 1 = count (harness/run/sample.h) */
    /* require_signature yes|no: 1 = a run must be signed by a key --allowed-signers allows
     * (harness/evidence/signature.h) */
    int require_signature;
    cc_requirements defaults;
    int n_sec, n_req;
    cc_policy_section sec[CC_POLICY_MAX_SECTIONS];
    cc_policy_require req[CC_POLICY_MAX_REQUIRE];
} cc_policy;

/* Parse policy text; `name` labels errors ("name:line: ..."). Returns 0 or -1 with msg. */
int cc_policy_parse(const char *text, const char *name, cc_policy *p, char *msg, size_t len);
/* path NULL: the policy built into capcheck (reports/policy.conf at build time). */
int cc_policy_load(const char *path, cc_policy *p, char *msg, size_t len);
#define CC_POLICY_BUILT_IN "built-in:reports/policy.conf"

/* The requirements for one capsule x dtype: the defaults, then every matching section in file
 * order (a later section overrides the keys it sets). */
void cc_policy_requirements(const cc_policy *p, const cc_capsule *c, cc_dtype dtype,
                            cc_requirements *out);

typedef struct {
    cc_capsule capsule;
    cc_dtype dtype;             /* CC_DTYPE_COUNT: a require line that matched nothing */
    char platform[48];          /* the platform the evidence holds for ("" when none named) */
    const cc_capsule_stats *stats; /* NULL: no case in the report */
    int required, checked;
    cc_requirements req;
    int n_reasons;
    char reasons[CC_GATE_MAX_REASONS][1024];
    unsigned char reason_kind[CC_GATE_MAX_REASONS]; /* CC_WHY_* of each reason */
    unsigned why; /* bit CC_WHY_* per kind of its reasons */
} cc_verdict;

typedef struct {
    cc_run run;            /* what was gated (merged when several shards were given) */
    char report_sha256[65];
    char source[1024];
    cc_evidence ev;
    cc_verdict *v;
    size_t n;
    int n_required, n_required_checked, n_checked;
    int exit_code; /* 0 or 1 (see above) */
    /* the run's signature, set by the caller after cc_gate_run (harness/evidence/signature.h):
     * the signing key's fingerprint and the signed manifest's sha256 when it was verified
     * against allowed signers ("" otherwise); the header's lines about it ("" for none) */
    char signer[64], manifest_sha256[65];
    char signature_note[2048];
} cc_gate;

/* Load, check and judge. Returns 0, or -1 with the refusal in msg (exit 2). */
int cc_gate_run(const cc_policy *pol, const cc_catalog *cat, int n, const char *const *paths,
                cc_gate *g, char *msg, size_t len);
void cc_gate_free(cc_gate *g);
/* The verdict first (checked counts and the exit code), then the run it judged, then the
 * capsule x dtype that hold the gate back: required ones not checked (every one not checked
 * when the policy requires none); all != 0 lists every capsule x dtype. */
void cc_gate_print(const cc_gate *g, const cc_policy *pol, int all, FILE *f);
/* What a verdict counts: "capsule x dtype x platform" when the results name their platforms
 * (verdicts are then per platform), else "capsule x dtype". */
const char *cc_gate_unit(const cc_gate *g);
/* One line for a run's closing summary: "gate: C of N <unit> checked under POLICY", and when
 * a required one (any one, without require lines) is held back, why: the commonest kind of
 * reason among them, how many it holds back, and the first of them with its reason. Returns
 * that kind (CC_WHY_*), or -1 when nothing is held back. */
int cc_gate_line(const cc_gate *g, const cc_policy *pol, char *buf, size_t n);
/* Whether a kind of reason is thin evidence (too few cases, shapes, classes, VJP checks, or
 * none): what a larger suite (capcheck certify) would supply, unlike a failure. */
int cc_gate_why_is_thin(int kind);
/* The verdicts (with results) of the capsule of g->v[i], one per dtype in report order, when i
 * is that capsule's first verdict; else 0. */
size_t cc_gate_capsule(const cc_gate *g, size_t i, const cc_verdict **out, size_t max);
/* The testSuite name of every capsule's evidence from this run: who vouched for it, "capcheck
 * run signed by SHA256:<key fingerprint> manifest sha256:<64 hex>" when its signature was
 * verified, else the sealed report itself, "capcheck report sha256:<64 hex>". */
#define CC_GATE_SUITE_NAME_MAX 256 /* room for either name */
void cc_gate_suite_name(const cc_gate *g, char *buf, size_t n);

/* DIR/<capsule>/evidence.json for every capsule of the report, the capsule name made one safe
 * folder name (every byte but letters, digits, '.', '_', '-', and a leading '.', as %XX: a
 * plugin named "../x" writes nothing outside DIR). Returns 0 or -1 with msg. */
int cc_gate_write_evidence(const cc_gate *g, const cc_policy *pol, const char *dir, char *msg,
                           size_t len);

#endif
