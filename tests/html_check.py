#!/usr/bin/env python3
"""capcheck's pages in a real headless browser (Debian's chromium, scripts/headless.py; CTest:
html_browser):

  report.html of a run with planted failures (the mutants plugin, softmax over the wrong axis)
      renders with no console error, no exception and no request but the file itself; the
      verdict names the failures; the failures section lists every planted failing op x dtype,
      each with min(3, failing) repro lines that are failing cases of results.jsonl; the heat
      map has exactly one cell per op x dtype of report.json's rows (and of results.jsonl), the
      failing ones red and every other one white to green; the page prints (a PDF)
  report.html of an all-pass run: no failures section, an all-passed verdict, every heat cell
      white to green (never a warning colour), the legend's passing classes white to green and
      deeper with the ratio
  history.html over the synthetic nights of test_history (CAPCHECK_HISTORY_KEEP): renders clean;
      the drift table holds the two planted drifts (softmax f32 at n4 with the stack change,
      add f64 at n3), the failures table linear f32 from n3 (still failing) and exp f32 from n2

Usage: tests/html_check.py --capcheck build/capcheck --plugins build/plugins
       --history-test build/test_history      (exit 77 when there is no chromium)
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import headless  # noqa: E402

CASES = """softmax count=4 dtype=f32,f64 layout=contig,transpose size=small
add count=3 dtype=f32,f16 size=small
exp count=3 dtype=f32,bf16 size=small
linear count=3 dtype=f64 size=small
"""


def fail(msg):
    print("html_check: FAILED: " + msg)
    sys.exit(1)


def capcheck(binary, args, env=None, ok=(0,)):
    r = subprocess.run([binary] + args, env=env, capture_output=True, text=True, cwd=ROOT)
    if r.returncode not in ok:
        fail("capcheck %s: exit %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def clean(page, path):
    if page.errors:
        fail("%s: the browser reported %s" % (path, page.errors))
    url = "file://" + path
    others = [u for u in page.requests if u != url]
    if others:
        fail("%s made requests beyond itself: %s" % (path, others))


def rgb(css):
    m = re.match(r"rgba?\((\d+), (\d+), (\d+)", css)
    if not m:
        fail("not a colour: %s" % css)
    return tuple(int(x) for x in m.groups())


def passing_colour(c):
    """White or a green: green the largest channel (no yellow, orange or red)."""
    r, g, b = c
    return g >= r and g >= b


def heat_cells(page):
    """[op, dtype, class, background rgb] of every cell of the heat map."""
    cells = page.eval("""Array.from(document.querySelectorAll('#heatmap td.cell')).map(
        td => [td.dataset.op, td.dataset.dtype, td.className, getComputedStyle(td).backgroundColor])""")
    return [(op, dt, cls, rgb(bg)) for op, dt, cls, bg in cells]


def check_heat_colours(cells, what):
    """Failing cells red, the others (passing, nothing compared) white to green."""
    for op, dt, cls, c in cells:
        if "hx" in cls.split():
            if not (c[0] >= 150 and c[1] < 100 and c[2] < 100):
                fail("%s: failing heat cell %s %s is not red: rgb%s" % (what, op, dt, c))
        elif "hu" not in cls.split() and not passing_colour(c):
            fail("%s: passing heat cell %s %s (%s) is not white to green: rgb%s"
                 % (what, op, dt, cls, c))


def check_legend(page):
    """The passing classes h0..h6 from white to green, each deeper than the one before."""
    legend = page.eval("""Array.from(document.querySelectorAll('.legend span')).map(
        s => [s.className, getComputedStyle(s).backgroundColor])""")
    shades = [(cls, rgb(bg)) for cls, bg in legend if re.fullmatch(r"h[0-6]", cls)]
    if [cls for cls, _ in shades] != ["h%d" % k for k in range(7)]:
        fail("the legend's passing classes are %s" % [cls for cls, _ in shades])
    if shades[0][1] != (255, 255, 255):
        fail("the legend's exact class is not white: rgb%s" % (shades[0][1],))
    light = [sum(c) for _, c in shades]
    for (cls, c), before, now in zip(shades[1:], light, light[1:]):
        if not passing_colour(c) or now >= before:
            fail("legend class %s rgb%s is not a green deeper than the one before" % (cls, c))


def results_of(run_dir):
    with open(os.path.join(run_dir, "results.jsonl")) as f:
        return [json.loads(line) for line in f]


def check_failing_report(b, args, tmp):
    out = os.path.join(tmp, "planted")
    cases = os.path.join(tmp, "html.cases")
    open(cases, "w").write(CASES)
    env = dict(os.environ, CAPCHECK_MUTANT="softmax_axis")
    capcheck(args.capcheck, ["run", cases, "--provider-lib", os.path.join(args.plugins, "mutants.so"),
                             "--out", out, "-j", "1"], env, ok=(1,))
    results = results_of(out)
    bad = [r for r in results if r["status"] not in ("pass", "unsupported")]
    failing = {}
    for r in bad:
        failing.setdefault((r["op"], r["dtype"]), []).append(r["case"])
    if not failing or set(op for op, _ in failing) != {"softmax"}:
        fail("the planted bug should fail softmax cases only: %s" % sorted(failing))
    rows = json.load(open(os.path.join(out, "report.json")))["rows"]
    cells = {(r["op"], r["dtype"]) for r in rows}
    if cells != {(r["op"], r["dtype"]) for r in results}:
        fail("report.json's rows and results.jsonl name different op x dtype")

    path = os.path.join(out, "report.html")
    page = b.open("file://" + path)
    clean(page, path)
    verdict = page.eval("document.getElementById('verdict').textContent")
    if "%d of %d cases did not pass" % (len(bad), len(results)) not in verdict:
        fail("verdict '%s' does not count %d of %d" % (verdict, len(bad), len(results)))
    shown = page.eval("""Array.from(document.querySelectorAll('h3.failcell')).map(h => [
        h.dataset.op, h.dataset.dtype,
        Array.from(h.nextElementSibling.querySelectorAll('code.repro')).map(c => c.textContent)])""")
    if {(op, dt) for op, dt, _ in shown} != set(failing):
        fail("failures section lists %s, the planted failures are %s"
             % (sorted((op, dt) for op, dt, _ in shown), sorted(failing)))
    for op, dt, repros in shown:
        want = min(3, len(failing[(op, dt)]))
        if len(repros) != want:
            fail("%s %s: %d repro lines shown, want %d" % (op, dt, len(repros), want))
        for line in repros:  # the whole command: [ENV...] capcheck repro 'LINE' [ARGS...]
            m = re.search(r"capcheck repro '([^']*)'", line)
            if not (m and m.group(1) in failing[(op, dt)] and "--provider-lib " in line):
                fail("%s %s: '%s' is not the repro command of a failing case" % (op, dt, line))
    heat = page.eval("""Array.from(document.querySelectorAll('#heatmap td.cell')).map(
        td => [td.dataset.op, td.dataset.dtype, td.className])""")
    if len(heat) != len(cells) or {(op, dt) for op, dt, _ in heat} != cells:
        fail("heat map has %d cells %s; report.json has %d op x dtype rows %s"
             % (len(heat), sorted(heat), len(cells), sorted(cells)))
    red = {(op, dt) for op, dt, cls in heat if "hx" in cls.split()}
    if red != set(failing):
        fail("red heat cells %s are not the failing ones %s" % (sorted(red), sorted(failing)))
    check_heat_colours(heat_cells(page), "planted")
    pdf = page.pdf()
    if not pdf.startswith(b"%PDF") or len(pdf) < 10000:
        fail("printing report.html gave no PDF")
    return "planted: %d failing cases in %d op x dtype listed, %d heat cells, prints (%d KB PDF)" % (
        len(bad), len(failing), len(heat), len(pdf) // 1024)


def check_passing_report(b, args, tmp):
    out = os.path.join(tmp, "clean")
    cases = os.path.join(tmp, "html.cases")
    capcheck(args.capcheck, ["run", cases, "--provider", "reference", "--out", out, "-j", "1"])
    path = os.path.join(out, "report.html")
    page = b.open("file://" + path)
    clean(page, path)
    if page.eval("document.getElementById('failures')") is not None:
        fail("an all-pass report.html has a failures section")
    if "passed" not in page.eval("document.getElementById('verdict').textContent"):
        fail("an all-pass report.html does not say so")
    cells = heat_cells(page)
    if not cells:
        fail("an all-pass report.html has no heat map")
    check_heat_colours(cells, "all-pass")
    if any("hx" in cls.split() for _, _, cls, _ in cells):
        fail("an all-pass report.html has a red heat cell")
    check_legend(page)
    return "all-pass: no failures section; %d heat cells white to green" % len(cells)


def check_history(b, args, tmp):
    nights = os.path.join(tmp, "nights")
    r = subprocess.run([args.history_test], env=dict(os.environ, CAPCHECK_HISTORY_KEEP=nights),
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("test_history (making the nights): " + r.stdout + r.stderr)
    out = os.path.join(tmp, "history")
    capcheck(args.capcheck, ["history"] + [os.path.join(nights, "n%d" % k) for k in range(1, 6)]
             + ["--out", out])
    path = os.path.join(out, "history.html")
    page = b.open("file://" + path)
    clean(page, path)
    drift = page.eval("""Array.from(document.querySelectorAll('tr.drifted')).map(tr =>
        [tr.cells[0].textContent.split('.').pop(), tr.cells[1].textContent,
         tr.querySelector('.drift-night').textContent])""")
    want = {("softmax", "f32", "n4 stack changed"), ("add", "f64", "n3")}
    if {tuple(d) for d in drift} != want:
        fail("drift table %s, planted %s" % (drift, sorted(want)))
    firsts = page.eval("""Array.from(document.querySelectorAll('tr.failure')).map(tr =>
        [tr.cells[0].textContent.split('.').pop(), tr.cells[1].textContent,
         tr.querySelector('.first-night').textContent, tr.cells[5].textContent])""")
    want = {("exp", "f32", "n2", "passing"), ("linear", "f32", "n3", "still failing")}
    if {tuple(f) for f in firsts} != want:
        fail("failures table %s, planted %s" % (firsts, sorted(want)))
    return "history: 2 planted drifts, 2 first failing nights"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--capcheck", required=True)
    ap.add_argument("--plugins", required=True)
    ap.add_argument("--history-test", required=True)
    args = ap.parse_args()
    args.capcheck = os.path.abspath(args.capcheck)
    if not headless.find_chromium():
        print("skipped: no chromium (scripts/setup installs Debian's chromium)")
        return 77
    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="capcheck-html-")
    try:
        with headless.Browser() as b:
            for check in (check_failing_report, check_passing_report, check_history):
                print("html_check: " + check(b, args, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("html_check: OK in %.1f s (chromium included)" % (time.monotonic() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
