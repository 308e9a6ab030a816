#!/usr/bin/env python3
"""scripts/peer.py: what a user would write instead of capcheck, timed beside it by scripts/bench.

For every case line (the canonical lines `capcheck list cases FILE` prints), the peer does what
PyTorch's own tests do:
  forward   the op in the case dtype against the same op on float64 copies of the same rounded
            inputs, with torch.testing.assert_close at its default tolerances for the dtype;
  VJP       backward in the case dtype with a random cotangent against float64 backward,
            assert_close again; and torch.autograd.gradcheck of the float64 op (analytic against
            finite-difference Jacobians).
It supports the ops of cases/bench.cases (those with a one-call torch counterpart), contiguous
layouts, every floating dtype. It is a peer for timing, not an oracle: its float64 side is
torch itself, and its tolerances are assert_close's, not capcheck's error model.

usage: scripts/peer.py LINES_FILE [--strict]
  LINES_FILE  canonical case lines, one per line ('-' for stdin); '#' comments ignored
  --strict    exit 1 when any case fails (default: report, exit 0, so hyperfine times it)
Prints one summary line: cases, passed, failed, unsupported, wall seconds and cases/s (with
and without the time `import torch` took).
"""
import re
import sys
import time

T_START = time.perf_counter()
import torch  # noqa: E402  (timed: a user pays for it too)
import torch.nn.functional as F  # noqa: E402
from torch.autograd.gradcheck import GradcheckError  # noqa: E402

T_IMPORTED = time.perf_counter()

DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16}


def parse(line):
    """op, dtype, input shapes and the other key=value fields of a canonical case line."""
    words = line.split()
    case = {"op": words[0]}
    for w in words[1:]:
        key, _, value = w.partition("=")
        case[key] = value
    shapes = re.findall(r"\[([^\]]*)\]", case["in"])
    case["shapes"] = [tuple(int(d) for d in s.split(",") if d) for s in shapes]
    return case


def ints(text):
    return [int(v) for v in text.strip("[]").split(",") if v]


def conv(x, w, b=None, *, stride, pad, dil, groups):
    """TorchLean's conv is one sample, channels first: add the batch axis PyTorch wants."""
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[x.dim() - 1]
    return fn(x.unsqueeze(0), w, b, stride, pad, dil, groups).squeeze(0)


# ops whose torch counterpart takes the inputs as they are
PLAIN = {"add": torch.add, "mul": torch.mul, "relu": torch.relu, "sigmoid": torch.sigmoid,
         "tanh": torch.tanh, "exp": torch.exp, "matmul": torch.matmul, "linear": F.linear,
         "mseLoss": F.mse_loss}


def op_function(case):
    """The op as a function of its input tensors, with the line's parameters bound."""
    op = case["op"]
    axis = int(case.get("axis", 0))
    if op in PLAIN:
        return PLAIN[op]
    if op == "gelu":  # TorchLean's gelu is the tanh form
        return lambda x: F.gelu(x, approximate="tanh")
    if op == "softmax":
        return lambda x: torch.softmax(x, axis)
    if op == "logSoftmax":
        return lambda x: torch.log_softmax(x, axis)
    if op == "reduceSum":
        return lambda x: x.sum(axis)
    if op == "layerNorm":
        eps = float(case.get("eps", "1e-5"))

        def layer_norm(x, *affine):
            first = axis if axis >= 0 else x.dim() + axis
            return F.layer_norm(x, x.shape[first:], *affine, eps=eps)

        return layer_norm
    if op == "conv":
        return lambda *t: conv(*t, stride=ints(case["stride"]), pad=ints(case["pad"]),
                               dil=ints(case["dil"]), groups=int(case["groups"]))
    raise NotImplementedError(f"peer.py has no {op}")


def run_case(case):
    """'pass', or 'fail: why', or 'unsupported: why'."""
    try:
        fn = op_function(case)
    except NotImplementedError as e:
        return f"unsupported: {e}"
    dtype = DTYPES[case["dtype"]]
    gen = torch.Generator().manual_seed(int(case["seed"]) % (1 << 63))
    # inputs drawn in float64, rounded to the dtype; the float64 side gets the rounded values
    low = [torch.randn(s, generator=gen, dtype=torch.float64).to(dtype) for s in case["shapes"]]
    inputs = [t.detach().requires_grad_() for t in low]
    inputs64 = [t.detach().double().requires_grad_() for t in low]
    try:
        out = fn(*inputs)
    except (RuntimeError, NotImplementedError) as e:
        return f"unsupported: {str(e).splitlines()[0]}"
    out64 = fn(*inputs64)
    try:
        torch.testing.assert_close(out, out64.to(dtype))
        g = torch.randn(out64.shape, generator=gen, dtype=torch.float64).to(dtype)
        grads = torch.autograd.grad(out, inputs, g)
        grads64 = torch.autograd.grad(out64, inputs64, g.double())
        for got, want in zip(grads, grads64):
            torch.testing.assert_close(got, want.to(dtype))
        fresh64 = [t.detach().requires_grad_() for t in inputs64]
        torch.autograd.gradcheck(fn, fresh64)
    except (AssertionError, GradcheckError) as e:
        return "fail: " + str(e).strip().splitlines()[0]
    return "pass"


def main(argv):
    args = [a for a in argv[1:] if a != "--strict"]
    if len(args) != 1:
        sys.stderr.write(__doc__)
        return 2
    src = sys.stdin if args[0] == "-" else open(args[0], encoding="utf-8")
    lines = [ln.strip() for ln in src if ln.strip() and not ln.lstrip().startswith("#")]
    torch.set_num_threads(1)  # as capcheck's workers: one thread per process
    counts = {"pass": 0, "fail": 0, "unsupported": 0}
    t0 = time.perf_counter()
    for line in lines:
        verdict = run_case(parse(line))
        kind = verdict.split(":")[0]
        counts[kind] += 1
        if kind != "pass":
            print(f"peer: {verdict}\n      {line}", file=sys.stderr)
    t1 = time.perf_counter()
    wall = t1 - T_START
    print(f"peer: {len(lines)} cases, {counts['pass']} passed, {counts['fail']} failed, "
          f"{counts['unsupported']} unsupported; {wall:.2f} s ({len(lines) / wall:.1f} cases/s), "
          f"{t1 - t0:.2f} s without the {T_IMPORTED - T_START:.2f} s import "
          f"({len(lines) / (t1 - t0):.1f} cases/s)")
    return 1 if "--strict" in argv and counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
