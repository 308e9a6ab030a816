# ---- the reproducer: capcheck's judgement of the case (harness/tools/reproducer.py) -------------
# The lowering above computes what capcheck's ATen provider computes; below, every element of
# every output is judged against capcheck's float64 reference and its bound, shipped in DATA
# (written by capcheck: the expected values, the bound that judges each element (c_op * u * m_i
# + floor, or its probabilistic bound where that one is vacuous), the rounding-bias test's
# candidates of an f16/bf16 output, and the zero-trust facts of harness/run/zero_trust.h),
# exactly as capcheck judges it (harness/run/compare.h). Exit codes, as capcheck's (git bisect run reads 0 as good, 125 as
# skip, 1 as bad): 0 every element passed; 1 an element is over its bound, NaN/Inf do not
# match, the output is an implausible stand-in (zero-trust), or ATen raised an error; 125
# nothing could be judged (no torch, no such device, ATen does not implement the case, out of
# memory).
import sys

EXIT_PASSED, EXIT_NOT_PASSED, EXIT_UNJUDGED = 0, 1, 125
DTYPES = {"f64": torch.float64, "f32": torch.float32, "f16": torch.float16,
          "bf16": torch.bfloat16, "i64": torch.int64, "u8": torch.bool}


def values_of(values, t):
    if t.is_floating_point:
        return torch.tensor(values, dtype=torch.float64).to(t)
    return torch.tensor(values, dtype=t)


def placed(values, align):
    """values (1-D, CPU) copied into a buffer whose first element sits `align` bytes into a
    64-byte line, as in capcheck's buffer: MKL's dot and matrix-vector kernels peel to
    alignment, and an f32 sum rounds differently with it. Returns (buffer, first element)."""
    es = values.element_size()
    buf = torch.empty(values.numel() + 64 // es, dtype=values.dtype)
    k = (align - buf.data_ptr()) % 64 // es
    buf[k:k + values.numel()] = values
    return buf, k


def build_input(inp, device):
    """An input exactly as capcheck laid it out: its storage (gaps hold NaN), shape, strides and
    offset in elements, at the same alignment (the shim wraps capcheck's buffer with from_blob;
    on another device it copies the span the view covers and views that)."""
    t = DTYPES[inp["dtype"]]
    shape, strides, offset = inp["shape"], inp["strides"], inp["offset"]
    if math.prod(shape) == 0:
        return torch.empty(shape, dtype=t, device=device)
    storage = values_of(inp["storage"], t)
    if device != "cpu":
        span = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
        return storage[offset:offset + span].to(device).as_strided(shape, strides, 0)
    buf, k = placed(storage, inp.get("align", 0))
    return buf.as_strided(shape, strides, k + offset)


def dense_values(data, t, shape, device, align=0):
    if math.prod(shape) == 0:
        return torch.empty(shape, dtype=t, device=device)
    values = values_of(data, torch.float64).to(t)
    if device != "cpu":
        return values.to(device).reshape(shape)
    buf, k = placed(values, align)
    return buf[k:k + values.numel()].reshape(shape)


def checked(r, dtype, shape, what):
    """The shim's store(): ATen must return exactly the dtype and shape capcheck expects."""
    if r is None:
        raise Failed("ATen produced no %s" % what)
    if r.dtype != dtype:
        raise Failed("ATen returned %s for the %s, the case dtype is %s" % (r.dtype, what, dtype))
    if list(r.shape) != list(shape):
        raise Failed("ATen returned shape %s for the %s, the harness expects %s"
                     % (list(r.shape), what, list(shape)))
    return r


def run(data, device):
    """The provider calls of the case: the forward, then the VJP, as capcheck makes them. Returns
    {output name: tensor}, for the outputs DATA judges; the inputs (for the zero-trust copies)."""
    dtype = DTYPES[data["dtype"]]
    inputs = [build_input(inp, device) for inp in data["inputs"]]
    fwd, vjp = OPS[data["op"]]
    out = {}
    with torch.inference_mode():
        a = Args(inputs, data["params"], dtype, device, data["out_shape"])
        if "y" in data["outputs"]:
            out["y"] = checked(fwd(a), dtype, data["out_shape"], "output")
        names = ["grad:" + inp["name"] for inp in data["inputs"]]
        want = [name in data["outputs"] for name in names]
        if any(want):
            if vjp is None:
                raise Unsupported("aten provider has no VJP for %s" % data["op"])
            g = dense_values(data["g"], dtype, data["out_shape"], device, data.get("g_align", 0))
            grads = vjp(Args(inputs, data["params"], dtype, device, g.shape), g, want)
            for i, name in enumerate(names):
                if want[i]:
                    out[name] = checked(grads[i] if i < len(grads) else None, dtype,
                                        data["inputs"][i]["shape"], "gradient of input %d" % i)
    return out, inputs


def element_ratios(got, exp, bound, overflow_ok, nonfinite_alike):
    """capcheck's ratio of every element (compare.c, cc_element_ratio_of): |got - expected| /
    bound where both are finite; NaN must meet NaN and +-Inf its equal (or the overflow of a
    finite expected value the dtype rounds to Inf); with edge=nan/inf inputs a non-finite
    expected value is met by any non-finite value."""
    r = (got - exp).abs() / bound
    special = ~(torch.isfinite(got) & torch.isfinite(exp))
    ok_overflow = set(overflow_ok)
    for i in torch.nonzero(special).reshape(-1).tolist():
        e, g = float(exp[i]), float(got[i])
        if nonfinite_alike and not math.isfinite(e):
            r[i] = math.inf if math.isfinite(g) else 0.0
        elif math.isnan(e) or math.isnan(g):
            r[i] = 0.0 if math.isnan(e) and math.isnan(g) else math.inf
        elif e == g:
            r[i] = 0.0
        elif (math.isinf(g) and not math.isinf(e) and (g < 0) == (e < 0)
              and i in ok_overflow):
            r[i] = 0.0
        else:
            r[i] = math.inf
    return r


def over_bound(r):
    """The elements that fail: ratio above 1 (compare.h: <= 1 passes)."""
    return r > 1.0


def zero_trust(name, got, zt, sources):
    """capcheck's zero-trust checks (zero_trust.c): an all-zeros, constant or copied output the
    bound would let through; zt says which of them the reference rules out."""
    n = got.numel()
    if n < 2 or not zt:
        return None
    g0 = got[0]
    got_zero = bool((got == 0).all())
    got_const = bool(((got == g0) | (torch.isnan(got) & torch.isnan(g0))).all())
    if got_zero and zt["all_zero"]:
        return "zero-trust: %s is all zeros (%d elements) but the reference is not" % (name, n)
    if got_const and math.isfinite(float(g0)) and zt["all_equal"]:
        return ("zero-trust: %s is the constant %.9g in all %d elements but the reference is "
                "not constant" % (name, float(g0), n))
    for k in zt["copy_of"]:
        src_name, src = sources[k]
        if src.numel() == n and bool(((got == src) | (torch.isnan(got) & torch.isnan(src))).all()):
            return ("zero-trust: %s is an exact copy of %s (%d elements) but the reference "
                    "differs from it" % (name, src_name, n))
    return None


def unravel(i, shape):
    idx = []
    for d in reversed(shape):
        idx.append(i % d if d else 0)
        i = i // d if d else 0
    return list(reversed(idx))


def rounding_bias(got, exp, bias):
    """capcheck's rounding-bias test (compare.h): over the candidates whose value is finite, one
    per distinct expected value (its first element), the count that rounded toward zero and the
    count below; z = (2K - n) / sqrt(n) of the direction with the larger |z|; biased past the
    threshold, which round to nearest exceeds with probability 1e-9. Returns (n, z, biased)."""
    seen, tz, below = set(), 0, 0
    for i in bias["at"]:
        e, g = float(exp[i]), float(got[i])
        if not math.isfinite(g) or e in seen:
            continue
        seen.add(e)
        tz += abs(g) < abs(e)
        below += g < e
    n = len(seen)
    if n == 0:
        return 0, 0.0, False
    z_zero, z_below = (2 * tz - n) / math.sqrt(n), (2 * below - n) / math.sqrt(n)
    z = z_below if abs(z_below) > abs(z_zero) else z_zero
    return n, z, abs(z) > bias["threshold"]


def output_verdict(name, got, spec, sources, nonfinite_alike):
    """One output (float64, flat) against its spec: (passed, lines to print)."""
    if got.numel() == 0:
        return True, ["%s: empty" % name]
    exp = torch.tensor(spec["expected"], dtype=torch.float64)
    bound = torch.tensor(spec["bound"], dtype=torch.float64)
    r = element_ratios(got, exp, bound, spec.get("overflow_ok", []), nonfinite_alike)
    over = int(over_bound(r).sum())
    w = int(torch.argmax(torch.nan_to_num(r, nan=0.0)))
    lines = ["%s: %d of %d elements over their bound; worst %s%s expected %r got %r bound %.3g "
             "(ratio %.4g)" % (name, over, got.numel(), name, unravel(w, spec["shape"]),
                               float(exp[w]), float(got[w]), float(bound[w]), float(r[w]))]
    biased = False
    if "bias" in spec:
        n, z, biased = rounding_bias(got, exp, spec["bias"])
        if biased:
            lines.append("rounding bias: %s's final rounding leans one way at %d distinct values "
                         "(z = %.3g; round to nearest: |z| <= %.3g)"
                         % (name, n, z, spec["bias"]["threshold"]))
    zt = zero_trust(name, got, spec.get("zero_trust"), sources)
    if zt:
        lines.append(zt)
    return over == 0 and not zt and not biased, lines


def judge(data, out, inputs):
    """Every element of every output: returns (passed, lines to print)."""
    passed, lines = True, []
    sources = [(inp["name"], t.reshape(-1).to("cpu", torch.float64))
               for inp, t in zip(data["inputs"], inputs)]
    sources.append(("the cotangent g", torch.tensor(data["g"], dtype=torch.float64)))
    for name, spec in data["outputs"].items():
        got = out[name].to("cpu", torch.float64).reshape(-1)
        ok, said = output_verdict(name, got, spec, sources if name != "y" else sources[:-1],
                                  data["nonfinite_alike"])
        passed, lines = passed and ok, lines + said
    return passed, lines


def set_math_modes(data):
    """What the shim sets in init (aten_provider.cpp): the case's ATen thread count (1, or N
    of a +tN platform), the run's TF32 and deterministic modes, no cuDNN autotuning, no
    reduced-precision cuBLAS reductions."""
    torch.set_num_threads(data["threads"])
    torch.backends.cuda.matmul.allow_tf32 = data["tf32"]
    torch.backends.cudnn.allow_tf32 = data["tf32"]
    torch.use_deterministic_algorithms(data["deterministic"])
    torch.backends.cudnn.deterministic = data["deterministic"]
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False


def main(argv, data=None):
    data = data or DATA
    print("case:     %s" % data["case"])
    print("torch:    %s (%s); capcheck ran libtorch %s" % (torch.__version__,
                                                            torch.__file__, data["libtorch"]))
    if data["threads"] > 1:
        print("threads:  %d ATen threads (the case's platform; ATen splits work past its grain)"
              % data["threads"])
    device = data["device"]
    if device == "cuda" and not torch.cuda.is_available():
        print("status:   cannot judge: this torch sees no CUDA device")
        return EXIT_UNJUDGED
    set_math_modes(data)
    try:
        out, inputs = run(data, device)
    except Unsupported as e:
        print("status:   unsupported: %s" % e)
        return EXIT_UNJUDGED
    except Failed as e:
        print("status:   error: %s" % e)
        return EXIT_NOT_PASSED
    except (RuntimeError, NotImplementedError, ValueError, IndexError, TypeError) as e:
        message = " ".join(str(e).split())
        if isinstance(e, getattr(torch, "OutOfMemoryError", ())) or "out of memory" in message \
                or "not enough memory" in message:
            print("status:   cannot judge: out of memory: %s" % message)
            return EXIT_UNJUDGED
        if says_unsupported(message):
            print("status:   unsupported: ATen: %s" % message)
            return EXIT_UNJUDGED
        print("status:   error: ATen: %s" % message)
        return EXIT_NOT_PASSED
    passed, lines = judge(data, out, inputs)
    print("status:   %s" % ("pass" if passed else "fail"))
    for line in lines:
        print("  " + line)
    print("capcheck: %s" % data["capcheck"])
    return EXIT_PASSED if passed else EXIT_NOT_PASSED
