"""git bisect run with a repro line capcheck printed (CTest: bisect_plugin).

A throwaway git repository (mkdtemp) holds a small plugin (providers/plugins/example_plugin.c)
over nine commits: good ones, one that does not build (its build step exits 125), one that
builds a library capcheck cannot load (no entry point: capcheck exits 125), one that mends it,
the commit that plants a bug (the last element of add's output dropped), and later ones. At the last commit capcheck runs a case file on the plugin; the repro line its log
prints for the failure is pasted, as printed, into the bisect step `./build.sh && <line>`, and
`git bisect run` must name the planted commit as the first bad one, skipping what it visits of
the unbuildable and the unloadable commits (git bisect log: "skip"; at each of the two the step
exits 125). Exit 0 when it does, 1 otherwise, 77 (skipped)
without git or a C compiler.

    tests/bisect_check.py --capcheck build/capcheck
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sh(cmd, cwd, env=None, check=True):
    r = subprocess.run(cmd, cwd=cwd, env=env, shell=isinstance(cmd, str), capture_output=True,
                       text=True)
    if check and r.returncode != 0:
        raise SystemExit("bisect_check: FAILED: %s (exit %d):\n%s%s"
                         % (cmd, r.returncode, r.stdout, r.stderr))
    return r


def commit(repo, message, env):
    sh(["git", "add", "-A"], repo, env)
    sh(["git", "commit", "-q", "-m", message], repo, env)
    return sh(["git", "rev-parse", "HEAD"], repo, env).stdout.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--capcheck", required=True)
    capcheck = os.path.abspath(ap.parse_args().capcheck)
    cc = shutil.which("cc") or shutil.which("gcc")
    if not shutil.which("git") or not cc:
        print("skipped: bisect_check needs git and a C compiler")
        return 77
    tmp = tempfile.mkdtemp(prefix="capcheck-bisect-")
    try:
        repo = os.path.join(tmp, "plugin")
        os.mkdir(repo)
        env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
                   GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com",
                   GIT_CONFIG_NOSYSTEM="1", HOME=tmp)
        env.pop("CAPCHECK_MUTANT", None)
        sh(["git", "init", "-q", "-b", "main"], repo, env)
        source = open(os.path.join(ROOT, "providers/plugins/example_plugin.c")).read()
        plugin = os.path.join(repo, "example_plugin.c")

        def write(text):
            with open(plugin, "w") as f:
                f.write(text)

        with open(os.path.join(repo, "build.sh"), "w") as f:
            f.write("#!/bin/sh\n# the plugin's build; a commit that does not build exits 125, "
                    "which git bisect run skips\n"
                    "%s -std=c11 -O2 -fPIC -shared -I%s example_plugin.c -o plugin.so || exit 125\n"
                    % (cc, ROOT))
        os.chmod(os.path.join(repo, "build.sh"), 0o755)
        with open(os.path.join(repo, ".gitignore"), "w") as f:
            f.write("plugin.so\n")
        write(source)
        shas = [commit(repo, "the plugin", env)]
        write(source + "/* add and relu */\n")
        shas.append(commit(repo, "a comment", env))
        write(source + "/* add and relu, f32 and f64 */\n")
        shas.append(commit(repo, "another comment", env))
        broken = source + "/* add and relu, f32 and f64 */\nthis line is not C\n"
        write(broken)
        shas.append(commit(repo, "does not build", env))
        write(source.replace("capcheck_provider_v1(void)", "capcheck_provider_v0(void)", 1) +
              "/* add and relu, f32 and f64 */\n")
        shas.append(commit(repo, "builds, but exports no entry point: capcheck cannot load it",
                           env))
        write(source + "/* add and relu, f32 and f64 */\n")
        shas.append(commit(repo, "loads again", env))
        planted = source.replace("cc_plugin_store(out, i, y);",
                                 "cc_plugin_store(out, i, i == n - 1 ? 0.0 : y);", 1)
        if planted == source:
            raise SystemExit("bisect_check: FAILED: example_plugin.c has no "
                             "'cc_plugin_store(out, i, y);' to plant the bug at")
        write(planted + "/* add and relu, f32 and f64 */\n")
        bad = commit(repo, "faster add (drops its last element: the planted bug)", env)
        shas.append(bad)
        write(planted + "/* add and relu, f32 and f64; ABI 2 */\n")
        shas.append(commit(repo, "a later comment", env))
        write(planted + "/* add and relu, f32 and f64; ABI 2; cpu */\n")
        shas.append(commit(repo, "the last commit", env))

        # the failure, at the last commit, as a user meets it: capcheck's log names the repro
        sh(["./build.sh"], repo, env)
        with open(os.path.join(tmp, "add.cases"), "w") as f:
            f.write("add dtype=f32 in=[6],[6] seed=3\n")
        run = sh([capcheck, "run", "add.cases", "--provider-lib", os.path.join(repo, "plugin.so"),
                  "--out", "run"], tmp, env, check=False)
        if run.returncode != 1:
            raise SystemExit("bisect_check: FAILED: the run at the last commit exits %d, want 1:\n"
                             "%s%s" % (run.returncode, run.stdout, run.stderr))
        lines = [l.strip() for l in run.stderr.splitlines() if " repro '" in l]
        if not lines:
            raise SystemExit("bisect_check: FAILED: no repro line in the run's log:\n" + run.stderr)
        repro = lines[0]
        print("bisect_check: the printed repro line: " + repro)
        with open(os.path.join(tmp, "step.sh"), "w") as f:
            f.write("./build.sh && %s\n" % repro)
        sh(["git", "bisect", "start", shas[-1], shas[0]], repo, env)
        r = sh(["git", "bisect", "run", "sh", os.path.join(tmp, "step.sh")], repo, env,
               check=False)
        log = sh(["git", "bisect", "log"], repo, env).stdout
        found = re.search(r"^([0-9a-f]{40}) is the first bad commit", r.stdout, re.M)
        print(r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "(no output)")
        faults = []
        if r.returncode != 0 or not found or found.group(1) != bad:
            faults.append("git bisect run did not name the planted commit %s (exit %d):\n%s%s"
                          % (bad, r.returncode, r.stdout, r.stderr))
        if "# skip: [" not in log:
            faults.append("no commit was skipped on the way:\n%s" % log)
        sh(["git", "bisect", "reset"], repo, env)
        # whichever of them bisect visits, each of the two is skipped: the step exits 125 there
        for k, why in ((3, "unbuildable (build.sh: 125)"), (4, "unloadable (capcheck: 125)")):
            sh(["git", "checkout", "-q", shas[k]], repo, env)
            step = sh(["sh", os.path.join(tmp, "step.sh")], repo, env, check=False)
            if step.returncode != 125:
                faults.append("at the %s commit the step exits %d, want 125 (skip):\n%s%s"
                              % (why, step.returncode, step.stdout, step.stderr))
        for f in faults:
            print("bisect_check: FAILED: " + f)
        if not faults:
            print("bisect_check: OK: git bisect run named %s, skipping the unbuildable %s and "
                  "the unloadable %s" % (bad[:12], shas[3][:12], shas[4][:12]))
        return 1 if faults else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
