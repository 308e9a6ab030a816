/* capcheck emit-lean: the capsules the gate upgraded, as a TorchLean module (harness/evidence/
 * lean_out.c; README, "Evidence TorchLean can import"), on its own or in a Lake package.
 *
 * The module targets one TorchLean commit (core/torchlean.h) and is written to pass TorchLean's
 * own repository lint (`lake lint`: no line over 100 characters, no trailing space or tab, no
 * stray comment or doc-math syntax, ...; tests/lean_lint.py restates its rules). Its name is
 * Capcheck.Evidence.Report_<first 16 hex digits of the report's sha256>, which is also its
 * namespace; in TorchLean's own tree (`in_torchlean`) it is NN.Tests.Capcheck.Evidence.<same>,
 * under the NNTests library's glob, with the copyright header TorchLean's lint asks of every
 * file under NN/. */
#ifndef CAPCHECK_LEAN_OUT_H
#define CAPCHECK_LEAN_OUT_H

#include <stddef.h>
#include <stdio.h>

#include "core/torchlean.h"
#include "harness/evidence/gate.h"

/* The number of KernelCapsules the module of this gate (under policy pol) holds at TorchLean
 * `tl`; when none, one sentence in why saying why: nothing upgraded (and the gate command that
 * says what each capsule lacks), or what kept the first upgraded capsule out. */
size_t cc_lean_capsule_count(const cc_gate *g, const cc_policy *pol, const cc_torchlean *tl,
                             char *why, size_t n);

/* The module, on f. Returns 0, or -1 when writing failed. */
int cc_lean_write_module(const cc_gate *g, const cc_policy *pol, const cc_torchlean *tl,
                         int in_torchlean, FILE *f);

/* A Lake package in dir (made when missing): lakefile.lean requiring TorchLean at tl's commit,
 * its `Capcheck` library whose root is the module, the module at Capcheck/Evidence/<Name>.lean,
 * and README.md saying how `lake build` builds it there. Each file is written whole or not at
 * all. Returns 0 with the module's path in module_path, or -1 with a sentence in msg. */
int cc_lean_write_package(const cc_gate *g, const cc_policy *pol, const cc_torchlean *tl,
                          const char *dir, char *module_path, size_t mp_len, char *msg,
                          size_t len);

#endif
