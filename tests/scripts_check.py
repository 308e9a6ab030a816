#!/usr/bin/env python3
"""What scripts/test and its stages decide, each decision made to happen (CTest: scripts_check):

  STAGES          set but empty, an unknown stage, or none beside another stage: refused (exit 2)
                  before anything is configured or built
  skips           html_browser and ci_check on a PATH without chromium and shellcheck (the
                  machine after a setup that skipped them): both skip, and scripts/check-skips
                  fails naming both; the CUDA tests on a machine without an NVIDIA device node
                  skip as expected (on one with a node they run and are not listed)
  ATen            in a build with the ATen provider, test_aten_smoke whose module does not load
                  (CAPCHECK_ATEN_LIB at a missing file) fails naming why; it never skips
  scripts/smoke   against a stand-in capcheck: a baseline with no platform in common fails,
                  saying nothing was compared, unless ACCEPT_NO_BASELINE=1; a regression fails
  power-table     against a stand-in capcheck: a crash, a failure the relaxed model shares in the
                  slice, or a strict failure that is no f16/bf16 fold fails the run; a fold passes

Usage: tests/scripts_check.py --build BUILD_DIR --ctest CTEST --have-aten 0|1
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
failures = []


def check(ok, what, detail=""):
    print("scripts_check: %s %s" % ("ok    " if ok else "FAILED", what))
    if not ok:
        failures.append(what)
        if detail:
            print(detail)


def run(cmd, env=None, cwd=ROOT, timeout=600):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run(cmd, cwd=cwd, env=e, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def check_stages(tmp):
    build = os.path.join(tmp, "never-built")
    for stages, fragment in [("", "STAGES is set but empty"), ("   ", "STAGES is set but empty"),
                             ("smoke bogus", "unknown stage 'bogus'"),
                             ("none smoke", "none runs no stage, give it alone")]:
        rc, out = run([os.path.join(ROOT, "scripts/test")],
                      {"STAGES": stages, "BUILD_DIR": build})
        check(rc == 2 and fragment in out and not os.path.exists(build),
              "STAGES=%r refused before any build" % stages, "exit %d:\n%s" % (rc, out))


def path_without(tmp, hidden):
    """A PATH directory with every program of PATH but `hidden` (links)."""
    d = os.path.join(tmp, "bin")
    os.makedirs(d)
    for p in os.environ.get("PATH", "").split(os.pathsep):
        for f in glob.glob(os.path.join(p, "*")):
            name = os.path.basename(f)
            if name in hidden or any(name.startswith(h + "-") for h in hidden):
                continue
            if os.access(f, os.X_OK) and not os.path.exists(os.path.join(d, name)):
                os.symlink(f, os.path.join(d, name))
    return d


def ctest_junit(args, tmp, name, regex, env=None):
    """Run the tests matching regex from a copy of the build's CTest file (its own Testing/
    folder: the CTest run that runs this test keeps its own); the JUnit path and ctest's exit."""
    d = os.path.join(tmp, name)
    os.makedirs(d)
    shutil.copy(os.path.join(args.build, "CTestTestfile.cmake"), d)
    junit = os.path.join(d, "junit.xml")
    rc, out = run([args.ctest, "--test-dir", d, "-R", regex, "--output-junit", junit], env)
    return junit, rc, out


def check_skips(args, tmp):
    nodes = [p for p in glob.glob("/dev/nvidia*") if re.fullmatch(r"nvidia\d+", os.path.basename(p))]
    bin_dir = path_without(tmp, {"chromium", "chromium-browser", "google-chrome", "shellcheck"})
    junit, rc, out = ctest_junit(args, tmp, "no-tools", "^(html_browser|ci_check)$",
                                 {"PATH": bin_dir})
    check(rc == 0 and out.count("***Skipped") == 2,
          "without chromium and shellcheck, html_browser and ci_check skip", out)
    rc, out = run([sys.executable, os.path.join(ROOT, "scripts/check-skips"), junit, args.build],
                  {"ALLOW_SKIPS": ""})
    check(rc == 1 and re.search(r"html_browser +NOT EXPECTED: no chromium", out) and
          re.search(r"ci_check +NOT EXPECTED: no shellcheck", out) and "2 skips not expected" in out,
          "scripts/check-skips fails on both, naming chromium and shellcheck", out)
    rc, out = run([sys.executable, os.path.join(ROOT, "scripts/check-skips"), junit, args.build],
                  {"ALLOW_SKIPS": "html_browser ci_check"})
    check(rc == 0 and out.count("allowed by ALLOW_SKIPS") == 2,
          "ALLOW_SKIPS accepts them by name", out)
    junit, rc, out = ctest_junit(args, tmp, "cuda", "^(test_cuda_providers|test_aten_cuda)$")
    rc2, out2 = run([sys.executable, os.path.join(ROOT, "scripts/check-skips"), junit, args.build],
                    {"ALLOW_SKIPS": ""})
    if not nodes:
        check(rc == 0 and rc2 == 0 and "2 tests skipped" in out2 and
              re.search(r"test_cuda_providers +expected \((no NVIDIA device node on this machine|"
                        r"this build is without the CUDA providers)\)", out2) is not None,
              "no GPU here: the CUDA tests skip, listed as expected", out + out2)
    else:
        check(rc == 0 and "test_cuda_providers" not in out2,
              "a GPU here (%s): the CUDA tests ran" % nodes[0], out + out2)


def check_aten(args, tmp):
    rc, out = run([os.path.join(args.build, "test_aten_smoke")],
                  {"CAPCHECK_ATEN_LIB": os.path.join(tmp, "missing/libcapcheck_aten.so")})
    if args.have_aten:
        check(rc == 1 and "this build has the ATen provider but it did not load" in out and
              "missing/libcapcheck_aten.so" in out,
              "an ATen module that does not load fails test_aten_smoke", "exit %d:\n%s" % (rc, out))
    else:
        check(rc == 77 and "skipped: capcheck was built without the ATen provider" in out,
              "a build without ATen: test_aten_smoke skips, saying so", "exit %d:\n%s" % (rc, out))


FAKE = r"""#!/usr/bin/env python3
# a stand-in capcheck for scripts/smoke and scripts/power-table: what FAKE_* says
import json, os, sys
a = sys.argv[1:]
def arg(flag):
    return a[a.index(flag) + 1] if flag in a else None
if a[0] == "run":
    out = arg("--out")
    os.makedirs(out, exist_ok=True)
    acc = arg("--accumulation") or "strict"
    rows = json.loads(os.environ.get("FAKE_" + acc.upper(), "[]"))
    with open(os.path.join(out, "results.jsonl"), "w") as f:
        for case, status, dtype in rows:
            f.write(json.dumps({"index": 0, "case": case, "status": status, "dtype": dtype}) + "\n")
    print("capcheck: level default (platform cpu:default): 1 cases, 1 passed")
    print("capcheck: 1 cases on aten")
    sys.exit(int(os.environ.get("FAKE_RUN_RC", "0")))
if a[0] == "diff":
    mode = os.environ.get("FAKE_DIFF", "same")
    if mode == "disjoint":
        sys.stderr.write("capcheck diff: base holds for platform cpu:amx and new for cpu:neon: "
                         "no platform in common, so no row compares like with like\n")
        sys.exit(2)
    print("capcheck diff: %d regressions" % (mode == "regression"))
    sys.exit(1 if mode == "regression" else 0)
if a[0] == "power":
    with open(arg("--markdown"), "w") as f:
        f.write("| relu | f32 | cpu | 1 |\n")
    sys.exit(0)
if a[0] == "list":
    print("relu dtype=f32 device=cpu in=[2] seed=1")
    sys.exit(0)
sys.exit(3)
"""


def check_smoke(tmp):
    fake = os.path.join(tmp, "capcheck")
    with open(fake, "w") as f:
        f.write(FAKE)
    os.chmod(fake, 0o755)
    out_dir = os.path.join(tmp, "smoke")
    smoke = os.path.join(ROOT, "scripts/smoke")
    base = {"BIN": fake, "OUT": out_dir, "ACCEPT_NO_BASELINE": ""}  # "": the default
    rc, out = run([smoke], dict(base, FAKE_DIFF="disjoint"))
    check(rc == 1 and "compared nothing" in out and "ACCEPT_NO_BASELINE=1" in out,
          "smoke: a baseline with no platform in common fails, saying so", out)
    rc, out = run([smoke], dict(base, FAKE_DIFF="disjoint", ACCEPT_NO_BASELINE="1"))
    check(rc == 0 and "NOTHING WAS COMPARED; accepted" in out,
          "smoke: ACCEPT_NO_BASELINE=1 accepts it, saying so", out)
    rc, out = run([smoke], dict(base, FAKE_DIFF="disjoint", ACCEPT_NO_BASELINE="yes"))
    check(rc == 2 and "give 0 or 1" in out, "smoke: ACCEPT_NO_BASELINE=yes refused", out)
    rc, out = run([smoke], dict(base, FAKE_DIFF="regression"))
    check(rc == 1 and "FAILED: capcheck diff" in out, "smoke: a regression fails", out)
    rc, out = run([smoke], dict(base, FAKE_RUN_RC="1"))
    check(rc == 1 and "did not pass at every level" in out, "smoke: a failing case fails", out)
    rc, out = run([smoke], dict(base, FAKE_DIFF="same"))
    check(rc == 0 and "matches" in out, "smoke: a clean diff passes", out)
    return fake


def check_power(tmp, fake):
    # power-table writes under out/ of the tree: a copy of the script in a scratch tree
    tree = os.path.join(tmp, "tree")
    os.makedirs(os.path.join(tree, "scripts"))
    os.makedirs(os.path.join(tree, "cases"))
    shutil.copy(os.path.join(ROOT, "scripts/power-table"), os.path.join(tree, "scripts"))
    shutil.copy(os.path.join(ROOT, "cases/power_slice.cases"), os.path.join(tree, "cases"))
    script = os.path.join(tree, "scripts/power-table")
    fold = ["gather dtype=f16 seed=1", "fail", "f16"]
    fold_relaxed = ["gather dtype=f16 seed=1", "pass", "f16"]
    ok = ["relu dtype=f32 seed=2", "pass", "f32"]
    tests = [
        ("an f16 accumulation fold under strict passes", [ok, fold_relaxed], [ok, fold], 0),
        ("a crash fails", [ok], [["exp dtype=f32 seed=3", "crash", "f32"]], 1),
        ("an error fails", [["exp dtype=f32 seed=3", "error", "f32"]], [ok], 1),
        ("a strict f32 failure fails", [ok, ["mul dtype=f32 seed=4", "pass", "f32"]],
         [ok, ["mul dtype=f32 seed=4", "fail", "f32"]], 1),
        ("a relaxed failure fails the slice", [["gelu dtype=f16 seed=5", "fail", "f16"]],
         [["gelu dtype=f16 seed=5", "fail", "f16"]], 1),
    ]
    for what, relaxed, strict, want in tests:
        rc, out = run([script, "--slice"], {"BIN": fake, "FAKE_RELAXED": json.dumps(relaxed),
                                            "FAKE_STRICT": json.dumps(strict), "FAKE_RUN_RC": "1"},
                      cwd=tree)
        check((rc != 0) == bool(want) and ("not explained" in out) == bool(want),
              "power-table --slice: " + what, "exit %d:\n%s" % (rc, out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--ctest", required=True)
    ap.add_argument("--have-aten", type=int, required=True)
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    tmp = tempfile.mkdtemp(prefix="capcheck-scripts-")
    try:
        check_stages(tmp)
        check_skips(args, tmp)
        check_aten(args, tmp)
        fake = check_smoke(tmp)
        check_power(tmp, fake)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("scripts_check: %d FAILED" % len(failures))
        return 1
    print("scripts_check: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
