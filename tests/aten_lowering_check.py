"""The reproducers' ATen lowering against the ATen shim, and the reproducers themselves
(tests/test_aten_smoke.c runs both modes, each in one Python process):

  aten_lowering_check.py records FILE.jsonl
      FILE holds one record per case (a reproducer's DATA, written by the shim's run in
      test_aten_smoke: capcheck's verdict and, per output, the shim's output bytes "got_hex").
      Every case runs through providers/aten/aten_lowering.py + harness/tools/reproducer.py,
      the text a reproducer carries: each output must equal the shim's bit for bit (any NaN
      equals any NaN, as capcheck compares repeats), an unsupported or failing case must raise
      the same, and the reproducer's judgement (every element against the shipped bounds, the
      zero-trust checks) must be capcheck's verdict.
  aten_lowering_check.py judge FILE.jsonl
      FILE holds synthetic outputs capcheck judged (compare.c, zero_trust.c): per row the
      values a reproducer ships (expected, the bound that judges each element, overflow_ok,
      the zero-trust facts, the rounding-bias test's candidates), the output, and capcheck's
      count of elements over their bound and its zero-trust and rounding-bias verdicts; the
      reproducer's judge must give the same count and verdict on every row.
  aten_lowering_check.py scripts DIR
      DIR/expect.txt lists "SCRIPT CODE" lines: each reproducer script, run as a program would
      run it (runpy, as __main__), must exit CODE; every one that exits 0 must exit 1 once the
      expected value of one element of each output is moved three bounds away (a perturbed
      bound check: the judgement has teeth); the first such script also runs as a real process
      (exit 0), its perturbed copy too (exit 1), and a copy asking for a CUDA device (exit 125
      where torch sees none).
Exit 0 when everything holds, 1 with one line per fault.
"""
import copy
import io
import json
import math
import os
import re
import runpy
import subprocess
import sys
import contextlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def namespace():
    """The lowering and the judge, as a reproducer carries them (one namespace)."""
    ns = {"__name__": "aten_lowering_check"}
    for rel in ("providers/aten/aten_lowering.py", "harness/tools/reproducer.py"):
        path = os.path.join(ROOT, rel)
        exec(compile(open(path).read(), path, "exec"), ns)
    return ns


def outcome(ns, data):
    """('ok', outputs, inputs), ('unsupported', msg) or ('error', msg): how the lowering ran."""
    torch = ns["torch"]
    try:
        out, inputs = ns["run"](data, data["device"])
        return "ok", out, inputs
    except ns["Unsupported"] as e:
        return "unsupported", str(e), None
    except ns["Failed"] as e:
        return "error", str(e), None
    except (RuntimeError, NotImplementedError, ValueError, IndexError, TypeError) as e:
        kind = "unsupported" if ns["says_unsupported"](str(e)) else "error"
        return kind, " ".join(str(e).split()), None


def same_bits(torch, got, hex_bytes):
    want = torch.frombuffer(bytearray.fromhex(hex_bytes), dtype=got.dtype) if hex_bytes else \
        torch.empty(0, dtype=got.dtype)
    g = got.detach().to("cpu").contiguous().reshape(-1)
    if g.numel() != want.numel():
        return False
    if g.numel() == 0:
        return True
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[g.element_size()]
    equal = g.view(ints) == want.view(ints)
    if g.dtype.is_floating_point:
        equal |= torch.isnan(g) & torch.isnan(want)
    return bool(equal.all())


def check_records(path):
    ns = namespace()
    torch = ns["torch"]
    torch.set_num_threads(1)
    faults, n, compared, unsupported = [], 0, 0, 0
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            n += 1
            status = rec["capcheck"].split(":")[0]
            if status in ("unsupported", "error"):  # no output was judged: make every call
                check = re.search(r" check=(\w+)", rec["case"]).group(1)
                names = ["y"] if check != "vjp" else []
                if check != "fwd":
                    names += ["grad:" + i["name"] for i in rec["inputs"] if i["differentiable"]]
                rec = dict(rec, outputs={name: None for name in names})
            kind, out, inputs = outcome(ns, rec)
            if kind != "ok":
                unsupported += kind == "unsupported"
                if kind != status:
                    faults.append("%s: capcheck says %s, the lowering %s (%s)"
                                  % (rec["case"], rec["capcheck"], kind, out))
                continue
            if status in ("unsupported", "error"):
                faults.append("%s: capcheck says %s, the lowering ran" % (rec["case"], rec["capcheck"]))
                continue
            for name, spec in rec["outputs"].items():
                compared += 1
                if not same_bits(torch, out[name], spec.get("got_hex", "")):
                    faults.append("%s: %s differs from the shim's bits" % (rec["case"], name))
            passed, lines = ns["judge"](rec, out, inputs)
            if passed != (status == "pass"):
                faults.append("%s: capcheck says %s, the reproducer judges %s: %s"
                              % (rec["case"], rec["capcheck"], "pass" if passed else "fail",
                                 "; ".join(lines)))
    differ = sum(" differs from the shim's bits" in x for x in faults)
    print("aten_lowering_check: %d cases: %d outputs equal to the shim's bit for bit, %d differ; "
          "%d unsupported alike; %d faults" % (n, compared - differ, differ, unsupported,
                                               len(faults)))
    return faults


def check_judge(path):
    ns = namespace()
    torch = ns["torch"]
    faults, n = [], 0
    for line in open(path):
        row = json.loads(line)
        n += 1
        got = torch.tensor(row["got"], dtype=torch.float64)
        r = ns["element_ratios"](got, torch.tensor(row["expected"], dtype=torch.float64),
                                 torch.tensor(row["bound"], dtype=torch.float64),
                                 row["overflow_ok"], row["nonfinite_alike"])
        over = int(ns["over_bound"](r).sum())
        sources = [("x", torch.tensor(row["source"], dtype=torch.float64))]
        spec = dict(row, shape=[got.numel()])
        passed, said = ns["output_verdict"]("y", got, spec, sources, row["nonfinite_alike"])
        capcheck_passed = row["n_over"] == 0 and not row["zero_trust_fails"] and \
            not row["biased"]
        if over != row["n_over"] or passed != capcheck_passed:
            faults.append("row %d: capcheck counts %d over the bound%s%s, the reproducer %d (%s)"
                          % (n, row["n_over"],
                             ", fails zero-trust" if row["zero_trust_fails"] else "",
                             ", calls it biased" if row["biased"] else "", over,
                             "; ".join(said)))
    print("aten_lowering_check: %d judged rows, %d faults" % (n, len(faults)))
    return faults


def data_span(text):
    """The (start, end) of the JSON after 'DATA = ' in a reproducer's text."""
    start = text.index("\nDATA = ") + len("\nDATA = ")
    end = text.index("\n\nif __name__ == '__main__':", start)
    return start, end


def perturbed(data):
    """DATA with one finite expected value of every output moved three bounds away (at least
    one unit in its last place: an exact op's bound is the dtype's smallest normal)."""
    d = copy.deepcopy(data)
    for spec in d["outputs"].values():
        for i, (e, b) in enumerate(zip(spec["expected"], spec["bound"])):
            if math.isfinite(e) and math.isfinite(b):
                moved = e + 3 * b
                spec["expected"][i] = moved if moved != e else math.nextafter(e, math.inf)
                break
    return d


def run_script(path):
    """Exit code of a reproducer run as __main__ in this process (its output swallowed)."""
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else 1, sink.getvalue()
    return 0, sink.getvalue()


def check_scripts(folder):
    faults, first_passing = [], None
    entries = [l.split() for l in open(os.path.join(folder, "expect.txt")) if l.strip()]
    for name, want in entries:
        path = os.path.join(folder, name)
        code, said = run_script(path)
        if code != int(want):
            faults.append("%s: exit %s, want %s:\n%s" % (name, code, want, said))
            continue
        if code != 0:
            continue
        first_passing = first_passing or path
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink):
            ns = runpy.run_path(path, run_name="reproducer")
            again = ns["main"]([], perturbed(ns["DATA"]))
        if again != 1:
            faults.append("%s: a perturbed bound still exits %s:\n%s" % (name, again,
                                                                        sink.getvalue()))
    if first_passing:  # as real processes: the exit codes a shell (and git bisect) sees
        text = open(first_passing).read()
        start, end = data_span(text)
        data = json.loads(text[start:end])
        import torch
        variants = [("", data, 0), ("perturbed", perturbed(data), 1)]
        cuda = dict(data, device="cuda")
        variants.append(("cuda", cuda, None if torch.cuda.is_available() else 125))
        for label, d, want in variants:
            path = first_passing
            if label:
                path = first_passing[:-3] + "_" + label + ".py"
                with open(path, "w") as f:
                    f.write(text[:start] + json.dumps(d) + text[end:])
            r = subprocess.run([sys.executable, path], capture_output=True, text=True)
            if want is not None and r.returncode != want:
                faults.append("%s as a process: exit %d, want %d:\n%s%s"
                              % (path, r.returncode, want, r.stdout, r.stderr))
    print("aten_lowering_check: %d reproducers, %d faults" % (len(entries), len(faults)))
    return faults


def main(argv):
    checks = {"records": check_records, "judge": check_judge, "scripts": check_scripts}
    if len(argv) != 2 or argv[0] not in checks:
        print(__doc__)
        return 2
    faults = checks[argv[0]](argv[1])
    for f in faults[:40]:
        print("FAULT: " + f)
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
