#!/usr/bin/env python3
"""test_readme_examples: scripts/readme-examples has teeth. Scratch pages whose shown output is
right must pass (a hash matching another of its length); a wrong count, a changed line, a missing
line, an extra line, a refused command, a wrong `exit N`, a loose rule stretched too far and a
broken link must each fail (exit 1) naming
the page, the block's line and what differs.

    tests/readme_examples_check.py --build BUILD_DIR     (needs BUILD_DIR/capcheck)

Only `capcheck list ops` and `capcheck repro` on the reference run (no libtorch): seconds.
"""
import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "readme-examples")

GOOD_OUTPUT = """```sh
build/capcheck list ops | tail -1
build/capcheck repro 'relu in=[2,3] seed=1' --provider reference | sed -n 1,3p
```
```text
56 ops in the vocabulary, 56 implemented, 0 missing a forward or a required VJP
case:     relu dtype=f32 device=cpu in=[2,3] stream=2 layout=contig check=both seed=1
provider: reference (vjpMode torchLeanTape)
platform: cpu:avx512-bf16
```
"""


def page(dirname, name, text):
    path = os.path.join(dirname, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write("# A page\n\nWhat it answers.\n\n## A heading\n\n" + text)
    return path


def check(build, path, want_rc, want_in=()):
    p = subprocess.run([sys.executable, SCRIPT, "--build", build, path], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    ok = p.returncode == want_rc and all(w in p.stdout for w in want_in)
    name = os.path.basename(path)
    print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {p.returncode} (want {want_rc})")
    if not ok:
        print(p.stdout)
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    build = os.path.realpath(ap.parse_args().build)
    if not os.access(os.path.join(build, "capcheck"), os.X_OK):
        print(f"skipped: no {build}/capcheck")
        return 77
    results = []
    with tempfile.TemporaryDirectory(prefix="capcheck-docs-test.") as d:
        # what is shown is what is printed (the platform key matched loosely)
        results.append(check(build, page(d, "good.md", GOOD_OUTPUT + "\n[up](good.md#a-heading)\n"), 0,
                             ["good.md:7: ok (2 commands, 4 lines shown)", "0 failed"]))
        # `...` stands for lines and for text
        results.append(check(build, page(d, "gaps.md", GOOD_OUTPUT.replace(
            "case:     relu dtype=f32 device=cpu in=[2,3] stream=2 layout=contig check=both seed=1\n"
            "provider: reference (vjpMode torchLeanTape)\n", "...\n").replace(
            "56 implemented,", "...,")), 0))
        # a wrong count fails, naming the block and both lines
        results.append(check(build, page(d, "count.md", GOOD_OUTPUT.replace("56 implemented", "55 implemented")), 1,
                             ["count.md:7: the output differs", "line 1",
                              "shown:   56 ops in the vocabulary, 55 implemented",
                              "printed: 56 ops in the vocabulary, 56 implemented"]))
        # the loose rules keep counts exact: a seed is no hash, "2,3" no timing
        results.append(check(build, page(d, "seed.md", GOOD_OUTPUT.replace("seed=1\nprovider", "seed=2\nprovider")), 1,
                             ["line 2"]))
        # a line left out without `...`
        results.append(check(build, page(d, "missing.md", GOOD_OUTPUT.replace(
            "provider: reference (vjpMode torchLeanTape)\n", "")), 1, ["missing.md:7: the output differs"]))
        # a line shown that is not printed
        results.append(check(build, page(d, "extra.md", GOOD_OUTPUT.replace(
            "platform: cpu:avx512-bf16\n", "platform: cpu:avx512-bf16\nstatus:   pass\n")), 1,
            ["shown:   status:   pass", "printed: (the end of the output)"]))
        # a platform key matches any CPU key (another machine's), not any text
        results.append(check(build, page(d, "otherkey.md", GOOD_OUTPUT.replace(
            "platform: cpu:avx512-bf16", "platform: cpu:zz9-test")), 0))
        results.append(check(build, page(d, "platform.md", GOOD_OUTPUT.replace(
            "platform: cpu:avx512-bf16", "platform: gpu:avx512-bf16")), 1, ["line 4"]))
        # a passing ratio matches any passing ratio (kernels differ per CPU); a failing one stays exact
        RATIOS = """```sh
build/capcheck repro 'relu in=[2,3] seed=1' --provider reference | sed -n 6,7p
```
```text
forward:  worst bound ratio 0.1199
vjp:      worst bound ratio %s
```
"""
        results.append(check(build, page(d, "ratio.md", RATIOS % "1"), 0))
        results.append(check(build, page(d, "ratio-fail.md", RATIOS % "1.5"), 1, ["line 2"]))
        results.append(check(build, page(d, "ratio-big.md", RATIOS % "2.3e+06"), 1, ["line 2"]))
        # a hash matches any hash of its length, also after an underscore (a module's name), and
        # only of its length
        HASH = "```sh\necho Report_0123abcd4567ef89.lean\n```\n```text\nReport_%s.lean\n```\n"
        results.append(check(build, page(d, "hash.md", HASH % "fedcba9876543210"), 0))
        results.append(check(build, page(d, "hash-length.md", HASH % "fedcba98765432"), 1, ["line 1"]))
        # an SSH key's fingerprint matches any fingerprint (each example makes its key), not any text
        FP = "```sh\necho 'signed by SHA256:%s.'\n```\n```text\nsigned by SHA256:%s.\n```\n"
        results.append(check(build, page(d, "fingerprint.md", FP % ("a+/" * 14 + "b", "Zz9" * 14 + "y")), 0))
        results.append(check(build, page(d, "fingerprint-short.md", FP % ("a+/" * 14 + "b", "Zz9" * 14)),
                             1, ["line 1"]))
        # a refused command fails its block
        results.append(check(build, page(d, "refused.md", "```sh\nbuild/capcheck repro 'relu dtype=f33'\n```\n"), 1,
                             ["refused.md:7: the block's command exited 2"]))
        # `exit 2` in the comment: the refusal is the example, and must happen
        results.append(check(build, page(d, "exit2.md", "```sh\nbuild/capcheck repro 'relu dtype=f33'   # exit 2\n```\n"), 0))
        results.append(check(build, page(d, "exit2-not.md", "```sh\nbuild/capcheck list ops > /dev/null   # exit 2\n```\n"), 1,
                             ["exit2-not.md:7: the block's command exited 0"]))
        # `# long` blocks are skipped, and counted
        results.append(check(build, page(d, "long.md", "```sh\nbuild/capcheck repro 'relu dtype=f33'   # long\n```\n"), 0,
                             ["skipped 1 # long"]))
        # links: a missing file, a missing heading
        results.append(check(build, page(d, "links.md", "[a](nowhere.md) and [b](links.md#no-such-heading)\n"), 1,
                             ["links.md:7: the link (nowhere.md) leads nowhere: no such file",
                              "links.md:7: the link (links.md#no-such-heading) leads nowhere: no heading"]))
    print(f"test_readme_examples: {sum(results)} of {len(results)} checks as expected")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
