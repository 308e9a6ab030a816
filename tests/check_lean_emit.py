#!/usr/bin/env python3
"""capcheck emit-lean through the binary: what tests/check_lean_module.py checks of the goldens,
on modules made here, and what emit-lean does besides printing one.

  check_lean_emit.py --capcheck BIN --plugins DIR --cuda-run BIN    (CTest: test_lean_emit)

- `capcheck list torchlean` names every commit of providers/torchlean/, newest (by the date each
  file states) first, marked the default;
- a run the gate upgrades nothing of, and one whose upgraded capsules are all capcheck's oracle:
  exit 1, one sentence on stderr, nothing on stdout;
- TorchLean 996dda0 gets div and neg KernelCapsules from the checked golden run, 3447b74 says in
  notEmitted why it cannot;
- `--package DIR` for each commit: the folder read back (lakefile's require and root, the
  module's path, name, namespace and imports, README) agrees, and a package with its module
  moved, its root renamed or another commit required is rejected;
- `--in-torchlean`: the module for NN/Tests/ passes TorchLean's lint there, and fails it
  without the copyright header;
- a run on CUDA (the checked golden run made a CUDA one by tests/lean_cuda_run.c, add's f32
  results failed): the capsules build on the profile TorchLean maintains for cuda at each commit
  (checkedCuda at 3447b74, libTorchCuda at 996dda0) under its name + "+capcheck", their shape
  and layout evidence is TorchLean's runtime guard, and add checked in f64 only is a
  KernelCapsule at 996dda0 but, at 3447b74, whose libTorchCudaView guard admits f32 only, says
  why not;
- names hard on Lean text: the planted-bug plugin (mutants_odd.so) run under provider names
  and a description with quotes, backslashes, "-/" and "/-", a backquoted path, "$$", "\\(",
  braces, an em-dash, a line separator, other Unicode, and the longest names capcheck takes,
  pinned to capsules named likewise (and two that differ in case only): for each commit the
  module passes the lint and the signature check, its name literals read back as exactly the
  capsule names, every planted fault is still rejected, and no two identifiers are equal.
Exit 0 when all holds, 1 with one line per problem.
"""
import argparse
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_lean_module as clm  # noqa: E402
import lean_lint  # noqa: E402

G = "tests/golden"
TSV = "providers/torchlean"
PROBLEMS = []


def bad(msg):
    PROBLEMS.append(msg)


def run(args, env=None, cwd=None):
    p = subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    return p.returncode, p.stdout, p.stderr


def commits():
    """The commits of providers/torchlean/, newest first (the date row, then the commit)."""
    dated = []
    for path in glob.glob(os.path.join(TSV, "*.tsv")):
        date = re.search(r"^date\t-\t[^\t]*\t(\S+)$", open(path, encoding="utf-8").read(), re.M)
        dated.append((date.group(1), os.path.basename(path)[:-4]))
    return [c for _d, c in sorted(dated, reverse=True)]


def check_list(cc):
    rc, out, err = run([cc, "list", "torchlean"])
    listed = re.findall(r"^  ([0-9a-f]{40})  (\d{4}-\d\d-\d\d) or later", out, re.M)
    if rc != 0 or [c for c, _d in listed] != commits():
        bad(f"list torchlean: exit {rc}, lists {listed}, want {commits()} newest first: {out}{err}")
    elif "(the default)" not in out.splitlines()[1]:
        bad(f"list torchlean: the newest is not marked the default: {out}")


def check_nothing_to_emit(cc, tmp):
    strict = os.path.join(tmp, "strict.policy")
    with open(strict, "w") as f:
        f.write("format capcheck-policy/1\nlibtorch_version any\nmin_passing 1000\n")
    for what, args, words in [
        ("an oracle run", [f"{G}/gate_run", "--policy", f"{G}/golden.policy"],
         "none of them a TorchLean capsule"),
        ("a run nothing is upgraded of", [f"{G}/checked_run", "--policy", strict],
         "the gate upgrades none of this report's")]:
        rc, out, err = run([cc, "emit-lean"] + args)
        if rc != 1 or out or err.count("\n") != 1 or words not in err or \
                not err.startswith("capcheck emit-lean: nothing to emit: "):
            bad(f"emit-lean on {what}: exit {rc}, stdout {out[:80]!r}, stderr {err!r}; want exit 1 "
                f"and one sentence saying {words!r}")


def emit(cc, commit, *extra, run_dir=f"{G}/checked_run", policy=f"{G}/lean.policy", env=None):
    rc, out, err = run([cc, "emit-lean", run_dir, "--policy", policy, "--torchlean", commit] +
                       list(extra), env=env)
    if rc != 0:
        bad(f"emit-lean {run_dir} {' '.join(extra)} at {commit[:7]}: exit {rc}: {err}")
    return out


def check_div_neg(cc):
    newest, sigs = commits()[0], clm.load_sigs(TSV)
    for commit in commits():
        text = emit(cc, commit)
        has = {op for op in ("div", "neg") if f"  op := .{op}\n" in text}
        ops = set(sigs[commit].inductive["NN.Backend.BackendOp"])
        for op in ("div", "neg"):
            reason = f"BackendOp has no constructor {op} at TorchLean {commit[:7]}"
            if op in ops and op not in has:
                bad(f"{commit[:7]} has BackendOp.{op}, but the module emits no {op} capsule")
            if op not in ops and (op in has or reason not in text):
                bad(f"{commit[:7]} has no BackendOp.{op}: the module must say so, not emit it")
    if not {"div", "neg"} <= set(sigs[newest].inductive["NN.Backend.BackendOp"]):
        bad(f"the newest commit, {newest[:7]}, is expected to have div and neg")


def check_package(cc, tmp):
    for commit in commits():
        pkg = os.path.join(tmp, f"pkg-{commit[:7]}")
        rc, out, err = run([cc, "emit-lean", f"{G}/checked_run", "--policy", f"{G}/lean.policy",
                            "--torchlean", commit, "--package", pkg])
        if rc != 0 or "lake build" not in out or err:
            bad(f"emit-lean --package at {commit[:7]}: exit {rc}: {out}{err}")
            continue
        found = clm.check_package(pkg, TSV)
        if found:
            bad(f"the package of {commit[:7]} does not read back: {found}")
            continue
        text = open(os.path.join(pkg, "lakefile.lean"), encoding="utf-8").read()
        module = re.search(r"roots := #\[`([\w.]+)\]", text).group(1)
        rel = module.replace(".", "/") + ".lean"
        other = [c for c in commits() if c != commit][0]
        for what, lakefile, moved in [
                ("its module moved", text, rel[:-5] + "_moved.lean"),
                ("its root renamed", text.replace(f"`{module}]", f"`{module}x]"), rel),
                ("another commit required", text.replace(f'@ "{commit}"', f'@ "{other}"'), rel)]:
            copy = os.path.join(tmp, "planted")
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(pkg, copy)
            with open(os.path.join(copy, "lakefile.lean"), "w", encoding="utf-8") as f:
                f.write(lakefile)
            os.rename(os.path.join(copy, rel), os.path.join(copy, moved))
            if not clm.check_package(copy, TSV):
                bad(f"a package with {what} passes")
    rc, _out, err = run([cc, "emit-lean", f"{G}/checked_run", "--package", tmp, "--in-torchlean"])
    if rc != 2 or "give one" not in err:
        bad(f"--package with --in-torchlean: exit {rc}, {err!r}; want exit 2 and one sentence")


def check_in_torchlean(cc):
    sigs = clm.load_sigs(TSV)
    for commit in commits():
        text = emit(cc, commit, "--in-torchlean")
        c = clm.Checker(sigs[commit], text, None)
        found = c.run()
        if found or not (c.rel_path or "").startswith("NN/Tests/Capcheck/Evidence/"):
            bad(f"--in-torchlean at {commit[:7]}: {found} (path {c.rel_path})")
            continue
        bare = re.sub(r"\A/-\nCopyright.*?-/\n\n", "", text, flags=re.S)
        if bare == text or not any("copyright" in p for p in lean_lint.lint(bare, c.rel_path)):
            bad("a module under NN/ without TorchLean's copyright header passes the lint")


HOSTILE_PROVIDERS = ['p"\\-/`$$\\(\u00fc\u2014\u2028x{}', "\u0142" * 15 + "x"]
# spaces enough that a string gap must fall among them (a gap swallows the spaces after it)
HOSTILE_DESCRIPTION = ('desc "q" \\ -/ /- `NN/x.lean` $$ \\[ {.nativeSymbol {}} \u2014 \u2028 end' +
                       " " * 120 + "tail")
HOSTILE_CAPSULES = [
    ('q."quote\\back\\slash-/end/-', "add"),
    ("u.\u00fcn\u00efc\u00f8d\u00e9\u2014dash\u2028sep\u0301", "mul"),
    ("b.`NN/Fake.lean`{.nativeSymbol {x}}$$\\(m\\[", "relu"),
    ("l." + "Ab-" * 25, "sub"),
    ("c.AB", "exp"),
    ("c.ab", "tanh"),
    ("n./-open -/close--dash", "sigmoid"),
    # no BackendOp at 3447b74: two notEmitted items, their "$$" around a line starting "* "
    ("d.$$display", "div"),
    ("e.$$math", "neg"),
]


def check_hostile(cc, plugins, tmp):
    lib = os.path.join(plugins, "mutants_odd.so")
    sha = hashlib.sha256(open(lib, "rb").read()).hexdigest()
    cases = os.path.join(tmp, "hostile.cases")
    with open(cases, "w") as f:
        for _n, op in HOSTILE_CAPSULES:
            f.write(f"{op} count=2 dtype=f32 layout=contig,transpose,stride2,bcast size=tiny\n")
    sigs = clm.load_sigs(TSV)
    for k, provider in enumerate(HOSTILE_PROVIDERS):
        if len(provider.encode()) > 31 or any(len(n.encode()) > 79 for n, _o in HOSTILE_CAPSULES):
            bad("a hostile name is longer than capcheck takes: the test must use names it takes")
        out = os.path.join(tmp, f"hostile{k}")
        env = dict(os.environ, CAPCHECK_MUTANT_NAME=provider,
                   CAPCHECK_MUTANT_DESCRIPTION=HOSTILE_DESCRIPTION)
        rc, o, e = run([cc, "run", cases, "--provider-lib", lib, "--out", out, "-j", "1"], env=env)
        if rc != 0:
            bad(f"the run of the plugin named {provider!r}: exit {rc}: {o}{e}")
            continue
        catalog = os.path.join(tmp, f"hostile{k}.tsv")
        with open(catalog, "w", encoding="utf-8") as f:
            for name, op in HOSTILE_CAPSULES:
                f.write("\t".join([name, op, "customChip", "cpu", "trustedExternal",
                                   "torchLeanTape", "notApplicable", "flatRowMajor", "capcheck",
                                   provider, "sha256:" + sha]) + "\n")
        results = [clm.json.loads(l) for l in open(os.path.join(out, "results.jsonl")) if l.strip()]
        for commit in commits():
            text = emit(cc, commit, "--catalog", catalog, run_dir=out, env=env)
            c = clm.Checker(sigs[commit], text, results)
            found = c.run()
            if found:
                bad(f"plugin {provider!r} at {commit[:7]}: {found}")
                continue
            ops = sigs[commit].inductive["NN.Backend.BackendOp"]
            names = {f["name"] for _i, f in c.capsules}
            want = {"capcheck." + n for n, o in HOSTILE_CAPSULES if o in ops}
            kept_out = {n for n, o in HOSTILE_CAPSULES if o not in ops}
            if names != want or not kept_out <= set(c.strings):
                bad(f"plugin {provider!r} at {commit[:7]}: the name literals read back as "
                    f"{sorted(names)}, not {sorted(want)} (and {sorted(kept_out)} in notEmitted)")
            summaries = [f["valueContract"]["summary"] for _i, f in c.capsules]
            if not all(HOSTILE_DESCRIPTION in s for s in summaries):
                bad(f"plugin {provider!r} at {commit[:7]}: a value summary does not read back "
                    f"with the provider's description whole: {summaries[0]!r}")
            idents = [i for i, _f in c.capsules]
            if len(set(idents)) != len(idents) or max(len(i) for i in idents) > 72:
                bad(f"identifiers not unique or too long: {idents}")
            found = clm.self_test(sigs[commit], text, results, sigs.values())
            if found:
                bad(f"plugin {provider!r} at {commit[:7]}, planted faults: {found}")


def check_cuda(cc, cuda_run, tmp):
    out = os.path.join(tmp, "cuda_run")
    rc, o, e = run([cuda_run, f"{G}/checked_run", out, "--fail", "add:f32"])
    if rc != 0:
        bad(f"lean_cuda_run: exit {rc}: {o}{e}")
        return
    results = [clm.json.loads(l) for l in open(os.path.join(out, "results.jsonl")) if l.strip()]
    sigs = clm.load_sigs(TSV)
    for commit in commits():
        sig, c7 = sigs[commit], commit[:7]
        text = emit(cc, commit, run_dir=out)
        found = clm.check(sig, text, results) or clm.self_test(sig, text, results, sigs.values())
        if found:
            bad(f"the CUDA module at {c7}: {found}")
        prof = [(n, p) for n, p in sig.profiles.items() if p["device"] == "cuda"][0]
        ident = prof[0].rsplit(".", 1)[1] + "WithEvidence"
        want = [f"def {ident} : BackendProfile :=", f"{{ BackendProfile.{ident[:-12]} with",
                f'name := "{prof[1]["name"]}+capcheck"', '.runtimeGuard "LibTorch bridge']
        for w in want:
            if w not in text:
                bad(f"the CUDA module at {c7} lacks {w!r}")
        emitted = re.search(r'\n  name := "capcheck\.libtorch\.add"', text)
        f32_only = "dtypes=f32" in open(os.path.join(TSV, commit + ".tsv")).read()
        reason = f"TorchLean {c7}'s libTorchCudaView layout admits f32 tensors only"
        flat = re.sub(r"\s+", " ", re.sub(r"\\\n\s*", "", text))  # gaps closed, lines joined
        if f32_only and (emitted or reason not in flat) or not f32_only and not emitted:
            bad(f"the CUDA module at {c7}: libtorch.add checked in f64 only is "
                f"{'emitted' if emitted else 'not emitted, or not said why'}")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capcheck", required=True)
    ap.add_argument("--plugins", required=True)
    ap.add_argument("--cuda-run", required=True)
    a = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="capcheck-lean-emit-")
    try:
        check_list(a.capcheck)
        check_nothing_to_emit(a.capcheck, tmp)
        check_div_neg(a.capcheck)
        check_package(a.capcheck, tmp)
        check_in_torchlean(a.capcheck)
        check_cuda(a.capcheck, a.cuda_run, tmp)
        check_hostile(a.capcheck, a.plugins, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for p in PROBLEMS:
        print(p)
    if not PROBLEMS:
        print(f"emit-lean at {len(commits())} TorchLean commits: list, nothing to emit, div and "
              f"neg, packages read back, TorchLean's tree, CUDA, and {len(HOSTILE_PROVIDERS)} hostile "
              f"providers x {len(HOSTILE_CAPSULES)} hostile capsule names: all hold")
    return 1 if PROBLEMS else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
