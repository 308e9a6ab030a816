/* capcheck certify: from a provider to checked capsules in one command. The evidence suite (what
 * checks capsules today: cases/nightly.cases and every cases/edge/ file, embedded in capcheck so it
 * runs from any folder) runs for one provider, device and set of dispatch levels as `capcheck
 * run` runs it (main.c: progress, --resume, a journal that never loses a result); then this file
 * judges it once and writes what the four commands of the recipe wrote (run, gate, evidence,
 * emit-lean), all in the run's folder:
 *
 *   report.html        the run's page with the gate's verdicts
 *   gate.txt           capcheck gate --all: every capsule x dtype x platform and why
 *   evidence/          <capsule>/evidence.json (capcheck evidence)
 *   Evidence.lean      the TorchLean module of the capsules it upgrades (capcheck emit-lean)
 *   evidence.manifest  with --sign KEY: these files' sha256 and the run's signed manifest, and
 *                      its .sig (harness/evidence/signature.h); the evidence and the module name
 *                      the run's signer and its manifest's sha256
 *
 * and ends with one summary: how many capsule x dtype x platform are checked of how many, each
 * required one that is not with its first reason, and the paths. Exit (harness/run/exit_code.h):
 * the gate's (0 every required capsule checked, 1 not) once the run wrote its report, whatever
 * its own exit (1: a case failed, 125: a case could not be judged); 2 for bad input (a policy,
 * catalog or TorchLean commit that cannot be read, a malformed command line); 125 when nothing
 * could be judged (the provider did not load or initialise, the device is absent, no case of
 * the suite ran on the provider, a file that would not be written); 128 + N after signal N. */
#ifndef CAPCHECK_CERTIFY_H
#define CAPCHECK_CERTIFY_H

#include <stdio.h>

/* One embedded case file: its path under cases/ and its text. */
typedef struct {
    const char *name, *text;
} cc_suite_file;

/* The evidence suite, NULL-terminated (generated into the capcheck executable). */
extern const cc_suite_file cc_evidence_suite[];

typedef struct {
    const char *out_dir;                      /* the run's folder */
    const char *policy, *catalog, *torchlean; /* NULL: the built-in ones (the newest TorchLean) */
    const char *sign; /* --sign KEY: the run was signed with it; the evidence names its signer,
                         and what certify wrote is signed too (evidence.manifest) */
} cc_certify_opts;

/* Before the suite runs: the policy, the catalog and the TorchLean vocabulary load. 0, or -1
 * after one sentence on err. */
int cc_certify_check(const cc_certify_opts *o, FILE *err);

/* After the run: the verdicts, the files above and the summary on out. Returns the exit code:
 * the gate's 0 or 1, 2 when the gate refused the run or an input did not load, 125 when memory
 * ran out or a file would not be written (one sentence on err). */
int cc_certify_finish(const cc_certify_opts *o, FILE *out, FILE *err);

#endif
