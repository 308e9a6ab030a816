# The ATen calls capcheck's ATen provider makes, op by op, forward and VJP, in plain PyTorch:
# the same functions (torch.ops.aten, with the overload the C++ shim's call resolves to), in the
# same order, in the same dtypes and layouts as providers/aten/aten_<family>.cpp. capcheck embeds
# this file in the reproducers `capcheck shrink --script` and `capcheck repro --script` write
# (the prelude and the section of the case's op: harness/tools/reproducer.c), so a reproducer
# needs torch alone. It must not drift from the shim: test_aten_smoke runs every smoke case
# through both, in one Python process, and compares their outputs bit for bit
# (tests/aten_lowering_check.py).
#
# Sections start with a line "# ==== ops NAME..." naming the ops they serve; everything before
# the first one is the prelude every reproducer carries.
import math

import torch

aten = torch.ops.aten


class Unsupported(Exception):
    """What the shim reports as CC_UNSUPPORTED (a case it does not run: no verdict)."""


class Failed(Exception):
    """A contract check of the shim's own (CC_FAILED: the case is an error)."""


# ATen's ways of saying a kernel does not exist for a dtype (aten_provider.cpp,
# says_unsupported_dtype): such an error is CC_UNSUPPORTED, any other CC_FAILED.
UNSUPPORTED_PHRASES = ("not implemented for", "Unsupported dtype", "unsupported dtype",
                       "does not have a deterministic implementation",
                       "doesn't support tensors of type",
                       "is only supported for half, float and double tensors")


def says_unsupported(message):
    return any(p in message for p in UNSUPPORTED_PHRASES)


class Args:
    """One provider call (aten_common.h, Args): inputs as ATen views, the op's parameters, the
    case dtype and device, and the output's shape as capcheck derived it."""

    def __init__(self, inputs, params, dtype, device, out_sizes):
        self.inp = inputs
        self.n = len(inputs)
        self.p = params
        self.dtype = dtype
        self.device = device
        self.out_sizes = list(out_sizes)

    def opts(self, dtype=None):
        return {"dtype": dtype or self.dtype, "device": self.device}


def norm_axis(axis, rank):
    r = rank if rank > 0 else 1
    a = axis + r if axis < 0 else axis
    if a < 0 or a >= r:
        raise Failed("axis %d is out of range for rank %d" % (axis, rank))
    return a


def want_inputs(a, n, what):
    if a.n != n:
        raise Failed("%s takes %d inputs, the call has %d" % (what, n, a.n))


def dense(t):
    return t.contiguous()


def numel(sizes):
    return math.prod(sizes)


# The overloads a C++ call with a Scalar argument resolves to.
def add_s(t, v):
    return aten.add.Scalar(t, v)


def mul_s(t, v):
    return aten.mul.Scalar(t, v)


def div_s(t, v):
    return aten.div.Scalar(t, v)


OPS = {}  # ref_op name -> (forward(a), vjp(a, g, want) -> list of gradients or None)


def op(name):
    def register(fwd):
        OPS[name] = [fwd, None]
        return fwd
    return register


def vjp_of(name):
    def register(fn):
        OPS[name][1] = fn
        return fn
    return register


# ==== ops randUniform bernoulliMask custom
# TorchLean's splitmix64 stream with int64 tensor ops (aten_random.cpp).
def bits(v):
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def lshr(z, s):
    return aten.bitwise_and.Scalar(aten.bitwise_right_shift.Tensor_Scalar(z, s),
                                   bits(((1 << 64) - 1) >> s))


def stream(a):
    n = numel(a.out_sizes)
    z = add_s(aten.arange(n, **a.opts(torch.int64)), bits(a.p["rng_seed"]))
    z = add_s(z, bits(0x9e3779b97f4a7c15))
    z = mul_s(aten.bitwise_xor.Tensor(z, lshr(z, 30)), bits(0xbf58476d1ce4e5b9))
    z = mul_s(aten.bitwise_xor.Tensor(z, lshr(z, 27)), bits(0x94d049bb133111eb))
    z = aten.bitwise_xor.Tensor(z, lshr(z, 31))
    u = aten.bitwise_and.Scalar(z, bits(0xffffffff))
    return div_s(u.to(torch.float64), 4294967296.0).reshape(a.out_sizes)


def check_target(a):
    if list(a.p["target"]) != a.out_sizes:
        raise Failed("the output buffer does not have the target shape (to=)")


@op("randUniform")
def rand_uniform_fwd(a):
    check_target(a)
    return stream(a).to(a.dtype)


@op("bernoulliMask")
def bernoulli_mask_fwd(a):
    check_target(a)
    p = a.p["keep_prob"]
    if not p > 0:
        return aten.zeros(a.out_sizes, **a.opts())
    if not 1 > p:
        return aten.ones(a.out_sizes, **a.opts())
    return aten.lt.Scalar(stream(a), p).to(a.dtype)


def check_custom(a):
    if a.p["custom_name"] != "demo_cube":
        raise Unsupported("custom op '%s' has no ATen implementation (ops.md L: a plugin is "
                          "compared with its own reference only)" % a.p["custom_name"])
    want_inputs(a, 1, "demo_cube")


@op("custom")
def custom_fwd(a):
    check_custom(a)
    x = a.inp[0]
    return aten.mul.Tensor(aten.mul.Tensor(x, x), x)


@vjp_of("custom")
def custom_vjp(a, g, want):
    check_custom(a)
    x = a.inp[0]
    return [aten.mul.Tensor(aten.mul.Tensor(mul_s(x, 3.0), x), g) if want[0] else None]


# ==== ops add sub mul div neg scale abs sqrt clamp max min inv
# Pointwise arithmetic (aten_pointwise.cpp): same shapes, VJPs composed.
def same_shape(a):
    if a.inp[0].shape != a.inp[1].shape:
        raise Failed("input shapes %s and %s differ (no implicit broadcasting)"
                     % (list(a.inp[0].shape), list(a.inp[1].shape)))


def scalar_tensor(a, v):
    return aten.scalar_tensor(v, **a.opts())


@op("add")
def add_fwd(a):
    same_shape(a)
    return aten.add.Tensor(a.inp[0], a.inp[1])


@vjp_of("add")
def add_vjp(a, g, want):
    same_shape(a)
    return [g if want[0] else None, g if want[1] else None]


@op("sub")
def sub_fwd(a):
    same_shape(a)
    return aten.sub.Tensor(a.inp[0], a.inp[1])


@vjp_of("sub")
def sub_vjp(a, g, want):
    same_shape(a)
    return [g if want[0] else None, aten.neg(g) if want[1] else None]


@op("mul")
def mul_fwd(a):
    same_shape(a)
    return aten.mul.Tensor(a.inp[0], a.inp[1])


@vjp_of("mul")
def mul_vjp(a, g, want):
    same_shape(a)
    return [aten.mul.Tensor(g, a.inp[1]) if want[0] else None,
            aten.mul.Tensor(g, a.inp[0]) if want[1] else None]


@op("div")
def div_fwd(a):
    same_shape(a)
    return aten.div.Tensor(a.inp[0], a.inp[1])


@vjp_of("div")
def div_vjp(a, g, want):
    same_shape(a)
    x, y = a.inp[0], a.inp[1]
    return [aten.div.Tensor(g, y) if want[0] else None,
            aten.neg(aten.mul.Tensor(g, aten.div.Tensor(aten.div.Tensor(x, y), y)))
            if want[1] else None]


@op("neg")
def neg_fwd(a):
    return aten.neg(a.inp[0])


@vjp_of("neg")
def neg_vjp(a, g, want):
    return [aten.neg(g) if want[0] else None]


@op("scale")
def scale_fwd(a):
    return mul_s(a.inp[0], a.p["alpha"])


@vjp_of("scale")
def scale_vjp(a, g, want):
    return [mul_s(g, a.p["alpha"]) if want[0] else None]


@op("abs")
def abs_fwd(a):
    return aten.abs(a.inp[0])


@vjp_of("abs")
def abs_vjp(a, g, want):
    if not want[0]:
        return [None]
    x = a.inp[0]
    sign = aten.sub.Tensor(aten.gt.Scalar(x, 0).to(a.dtype), aten.lt.Scalar(x, 0).to(a.dtype))
    return [aten.mul.Tensor(sign, g)]


@op("sqrt")
def sqrt_fwd(a):
    x = a.inp[0]
    return aten.sqrt(aten.where.ScalarSelf(aten.le.Scalar(x, 0), 0.0, x))


@vjp_of("sqrt")
def sqrt_vjp(a, g, want):
    if not want[0]:
        return [None]
    x = a.inp[0]
    pos = aten.gt.Scalar(x, 0)
    r = aten.reciprocal(mul_s(aten.sqrt(aten.where.ScalarOther(pos, x, 1.0)), 2.0))
    return [aten.where.ScalarOther(pos, aten.mul.Tensor(r, g), 0.0)]


@op("clamp")
def clamp_fwd(a):
    return aten.fmin(aten.fmax(a.inp[0], scalar_tensor(a, a.p["lo"])),
                     scalar_tensor(a, a.p["hi"]))


@vjp_of("clamp")
def clamp_vjp(a, g, want):
    if not want[0]:
        return [None]
    x = a.inp[0]
    inside = aten.logical_and(aten.lt.Tensor(scalar_tensor(a, a.p["lo"]), x),
                              aten.lt.Tensor(x, scalar_tensor(a, a.p["hi"])))
    return [aten.where.ScalarOther(inside, g, 0.0)]


@op("max")
def max_fwd(a):
    same_shape(a)
    return aten.fmax(a.inp[0], a.inp[1])


@op("min")
def min_fwd(a):
    same_shape(a)
    return aten.fmin(a.inp[0], a.inp[1])


def split_vjp(first, second, g, want):
    half = mul_s(g, 0.5)
    return [aten.where.self(first, g, aten.where.ScalarSelf(second, 0.0, half)) if want[0] else None,
            aten.where.self(second, g, aten.where.ScalarSelf(first, 0.0, half)) if want[1] else None]


@vjp_of("max")
def max_vjp(a, g, want):
    same_shape(a)
    return split_vjp(aten.gt.Tensor(a.inp[0], a.inp[1]), aten.gt.Tensor(a.inp[1], a.inp[0]), g,
                     want)


@vjp_of("min")
def min_vjp(a, g, want):
    same_shape(a)
    return split_vjp(aten.lt.Tensor(a.inp[0], a.inp[1]), aten.lt.Tensor(a.inp[1], a.inp[0]), g,
                     want)


@op("inv")
def inv_fwd(a):
    return aten.reciprocal(a.inp[0])


@vjp_of("inv")
def inv_vjp(a, g, want):
    if not want[0]:
        return [None]
    r = aten.reciprocal(a.inp[0])
    return [mul_s(aten.mul.Tensor(g, aten.mul.Tensor(r, r)), -1.0)]


# ==== ops relu gelu sigmoid silu tanh softplus exp log sin cos safeLog
# Activations and transcendental ops (aten_activation.cpp).
@op("relu")
def relu_fwd(a):
    return aten.relu(a.inp[0])


@vjp_of("relu")
def relu_vjp(a, g, want):
    if not want[0]:
        return [None]
    x = a.inp[0]
    return [aten.masked_fill.Scalar(aten.threshold_backward(g, x, 0), aten.isnan(x), 0.0)]


@op("gelu")
def gelu_fwd(a):
    return aten.gelu(a.inp[0], approximate="tanh")


@vjp_of("gelu")
def gelu_vjp(a, g, want):
    return [aten.gelu_backward(g, a.inp[0], approximate="tanh") if want[0] else None]


@op("sigmoid")
def sigmoid_fwd(a):
    return aten.sigmoid(a.inp[0])


@vjp_of("sigmoid")
def sigmoid_vjp(a, g, want):
    return [aten.sigmoid_backward(g, aten.sigmoid(a.inp[0])) if want[0] else None]


@op("silu")
def silu_fwd(a):
    return aten.silu(a.inp[0])


@vjp_of("silu")
def silu_vjp(a, g, want):
    return [aten.silu_backward(g, a.inp[0]) if want[0] else None]


@op("tanh")
def tanh_fwd(a):
    return aten.tanh(a.inp[0])


@vjp_of("tanh")
def tanh_vjp(a, g, want):
    return [aten.tanh_backward(g, aten.tanh(a.inp[0])) if want[0] else None]


def softplus_of(a, x):
    e = aten.exp(aten.neg(aten.abs(x)))
    return aten.add.Tensor(aten.fmax(x, aten.scalar_tensor(0.0, **a.opts())),
                           aten.log(add_s(e, 1.0)))


@op("softplus")
def softplus_fwd(a):
    return softplus_of(a, a.inp[0])


@vjp_of("softplus")
def softplus_vjp(a, g, want):
    return [aten.mul.Tensor(aten.sigmoid(a.inp[0]), g) if want[0] else None]


@op("exp")
def exp_fwd(a):
    return aten.exp(a.inp[0])


@vjp_of("exp")
def exp_vjp(a, g, want):
    return [aten.mul.Tensor(g, aten.exp(a.inp[0])) if want[0] else None]


@op("log")
def log_fwd(a):
    return aten.log(a.inp[0])


@vjp_of("log")
def log_vjp(a, g, want):
    return [aten.mul.Tensor(g, aten.reciprocal(a.inp[0])) if want[0] else None]


@op("sin")
def sin_fwd(a):
    return aten.sin(a.inp[0])


@vjp_of("sin")
def sin_vjp(a, g, want):
    return [aten.mul.Tensor(aten.cos(a.inp[0]), g) if want[0] else None]


@op("cos")
def cos_fwd(a):
    return aten.cos(a.inp[0])


@vjp_of("cos")
def cos_vjp(a, g, want):
    return [aten.mul.Tensor(mul_s(aten.sin(a.inp[0]), -1.0), g) if want[0] else None]


@op("safeLog")
def safe_log_fwd(a):
    return aten.log(add_s(softplus_of(a, a.inp[0]), a.p["eps"]))


@vjp_of("safeLog")
def safe_log_vjp(a, g, want):
    if not want[0]:
        return [None]
    x = a.inp[0]
    s = add_s(softplus_of(a, x), a.p["eps"])
    return [aten.mul.Tensor(aten.div.Tensor(aten.sigmoid(x), s), g)]


# ==== ops softmax logSoftmax hardMaskedSoftmax topKMask
# The softmax family (aten_softmax.cpp).
@op("softmax")
def softmax_fwd(a):
    x = a.inp[0]
    return aten._softmax(x, norm_axis(a.p["axis"], x.dim()), False)


@vjp_of("softmax")
def softmax_vjp(a, g, want):
    if not want[0]:
        return [None]
    x = a.inp[0]
    ax = norm_axis(a.p["axis"], x.dim())
    y = aten._softmax(x, ax, False)
    return [aten._softmax_backward_data(g, y, ax, x.dtype)]


@op("logSoftmax")
def log_softmax_fwd(a):
    x = a.inp[0]
    return aten._log_softmax(x, norm_axis(a.p["axis"], x.dim()), False)


@vjp_of("logSoftmax")
def log_softmax_vjp(a, g, want):
    if not want[0]:
        return [None]
    x = a.inp[0]
    ax = norm_axis(a.p["axis"], x.dim())
    y = aten._log_softmax(x, ax, False)
    return [aten._log_softmax_backward_data(g, y, ax, x.dtype)]


def check_mask(a):
    if a.inp[1].shape != a.inp[0].shape:
        raise Failed("mask %s must have the shape of x %s"
                     % (list(a.inp[1].shape), list(a.inp[0].shape)))


def masked_softmax(a):
    check_mask(a)
    x = a.inp[0]
    allowed = a.inp[1].to(torch.bool)
    if x.dim() == 0:
        return aten.masked_fill.Scalar(aten.ones_like(x), aten.logical_not(allowed), 0.0)
    blocked = aten.logical_not(allowed)
    empty_row = aten.logical_not(aten.any.dim(allowed, -1, True))
    s = aten.masked_fill.Scalar(x, blocked, -math.inf)
    s = aten.masked_fill.Scalar(s, empty_row, 0.0)
    y = aten._softmax(s, -1, False)
    return aten.masked_fill.Scalar(y, empty_row, 0.0)


@op("hardMaskedSoftmax")
def masked_softmax_fwd(a):
    return masked_softmax(a)


@vjp_of("hardMaskedSoftmax")
def masked_softmax_vjp(a, g, want):
    if not want[0]:
        return [None, None]
    y = masked_softmax(a)
    if y.dim() == 0:
        return [aten.zeros_like(y), None]
    return [aten._softmax_backward_data(g, y, -1, y.dtype), None]


@op("topKMask")
def topk_fwd(a):
    x = a.inp[0]
    k = a.p["k"]
    if k < 0:
        raise Failed("k must be >= 0, got %d" % k)
    xs = x.reshape([1]) if x.dim() == 0 else x
    ax = norm_axis(a.p["axis"], xs.dim())
    length = xs.size(ax)
    if k == 0 or xs.numel() == 0:
        y = aten.zeros_like(xs)
    elif k >= length:
        y = aten.ones_like(xs)
    else:
        idx = aten.sort.stable(xs, stable=True, dim=ax, descending=True)[1]
        y = aten.scatter.value(aten.zeros_like(xs), ax, aten.narrow(idx, ax, 0, k), 1.0)
    return y.reshape(x.shape)


@vjp_of("topKMask")
def topk_vjp(a, g, want):
    return [aten.zeros_like(a.inp[0]) if want[0] else None]


# ==== ops reduceSum reduceMean
# Reductions over one nonempty axis (aten_reduce.cpp).
def reduce_axis(a):
    x = a.inp[0]
    if x.dim() == 0:
        raise Failed("axis %d is out of range for rank 0" % a.p["axis"])
    ax = norm_axis(a.p["axis"], x.dim())
    if x.size(ax) == 0:
        raise Failed("axis %d is empty (TorchLean requires a nonempty reduction axis)"
                     % a.p["axis"])
    return ax


@op("reduceSum")
def reduce_sum_fwd(a):
    return aten.sum.dim_IntList(a.inp[0], [reduce_axis(a)], False)


@vjp_of("reduceSum")
def reduce_sum_vjp(a, g, want):
    ax = reduce_axis(a)
    return [g.unsqueeze(ax).expand(a.inp[0].shape) if want[0] else None]


@op("reduceMean")
def reduce_mean_fwd(a):
    return aten.mean.dim(a.inp[0], [reduce_axis(a)], False)


@vjp_of("reduceMean")
def reduce_mean_vjp(a, g, want):
    ax = reduce_axis(a)
    x = a.inp[0]
    return [div_s(g, float(x.size(ax))).unsqueeze(ax).expand(x.shape) if want[0] else None]


# ==== ops reshape permute broadcast concat slice gather scatterAdd
# Shape, view and indexing ops (aten_shape.cpp).
@op("reshape")
def reshape_fwd(a):
    return a.inp[0].reshape(a.p["target"])


@vjp_of("reshape")
def reshape_vjp(a, g, want):
    return [g.reshape(a.inp[0].shape) if want[0] else None]


def perm_of(a):
    r = a.inp[0].dim()
    perm = a.p["perm"]
    if len(perm) != r:
        raise Failed("perm has %d entries, x has rank %d" % (len(perm), r))
    return [norm_axis(p, r) for p in perm]


@op("permute")
def permute_fwd(a):
    return a.inp[0].permute(perm_of(a))


@vjp_of("permute")
def permute_vjp(a, g, want):
    if not want[0]:
        return [None]
    p = perm_of(a)
    inv = [0] * len(p)
    for i, pi in enumerate(p):
        inv[pi] = i
    return [g.permute(inv)]


@op("broadcast")
def broadcast_fwd(a):
    return a.inp[0].expand(a.p["target"])


@vjp_of("broadcast")
def broadcast_vjp(a, g, want):
    return [g.sum_to_size(a.inp[0].shape) if want[0] else None]


def concat_axis(a):
    if a.n < 2:
        raise Failed("concat takes at least 2 inputs, the call has %d" % a.n)
    if a.inp[0].dim() == 0:
        raise Failed("concat needs rank >= 1 inputs")
    return norm_axis(a.p["axis"], a.inp[0].dim())


@op("concat")
def concat_fwd(a):
    return aten.cat(list(a.inp), concat_axis(a))


@vjp_of("concat")
def concat_vjp(a, g, want):
    ax, start, grads = concat_axis(a), 0, []
    for k in range(a.n):
        length = a.inp[k].size(ax)
        grads.append(aten.narrow(g, ax, start, length) if want[k] else None)
        start += length
    return grads


def slice_args(a):
    x = a.inp[0]
    if x.dim() == 0:
        raise Failed("slice needs a rank >= 1 input")
    ax, start, count = norm_axis(a.p["axis"], x.dim()), a.p["start"], a.p["count"]
    if start < 0 or count < 0 or start + count > x.size(ax):
        raise Failed("slice [%d, +%d) does not fit axis extent %d" % (start, count, x.size(ax)))
    return ax, start, count


@op("slice")
def slice_fwd(a):
    ax, start, count = slice_args(a)
    return aten.narrow(a.inp[0], ax, start, count)


@vjp_of("slice")
def slice_vjp(a, g, want):
    ax, start, count = slice_args(a)
    return [aten.slice_backward(g, a.inp[0].shape, ax, start, start + count, 1) if want[0]
            else None]


def gather_args(a):
    x, idx = a.inp[0], a.inp[1]
    if x.dim() == 0:
        raise Failed("gather needs a rank >= 1 input")
    if idx.dim() > 1:
        raise Failed("the index must be a vector or a scalar, got rank %d" % idx.dim())
    return norm_axis(a.p["axis"], x.dim()), idx.reshape([-1]), idx.dim() == 0


@op("gather")
def gather_fwd(a):
    ax, idx, select = gather_args(a)
    y = aten.index_select(a.inp[0], ax, idx)
    return y.squeeze(ax) if select else y


@vjp_of("gather")
def gather_vjp(a, g, want):
    ax, idx, select = gather_args(a)
    if not want[0]:
        return [None, None]
    return [aten.index_select_backward(g.unsqueeze(ax) if select else g, a.inp[0].shape, ax, idx),
            None]


def scatter_axis(a):
    base = a.inp[0]
    if base.dim() == 0:
        raise Failed("scatterAdd needs a rank >= 1 base")
    if a.inp[1].dim() != 1:
        raise Failed("the index must be a vector, got rank %d" % a.inp[1].dim())
    return norm_axis(a.p["axis"], base.dim())


@op("scatterAdd")
def scatter_add_fwd(a):
    return aten.index_add(a.inp[0], scatter_axis(a), a.inp[1], a.inp[2])


@vjp_of("scatterAdd")
def scatter_add_vjp(a, g, want):
    ax = scatter_axis(a)
    return [g if want[0] else None, None,
            aten.index_select(g, ax, a.inp[1]) if want[2] else None]


# ==== ops matmul scaledMatmul softmaxMatmul linear
# Linear algebra (aten_linalg.cpp): VJPs composed from ATen products.
@op("matmul")
def matmul_fwd(a):
    return aten.matmul(a.inp[0], a.inp[1])


def matmul_grads(a, g, want):
    A, B = a.inp[0], a.inp[1]
    if A.dim() == 0 or B.dim() == 0:
        raise Failed("both operands must be at least 1-D")
    A2 = A.unsqueeze(0) if A.dim() == 1 else A
    B2 = B.unsqueeze(-1) if B.dim() == 1 else B
    g2 = g
    if B.dim() == 1:
        g2 = g2.unsqueeze(-1)
    if A.dim() == 1:
        g2 = g2.unsqueeze(-2)
    return [aten.matmul(g2, B2.transpose(-2, -1)).sum_to_size(A2.shape).reshape(A.shape)
            if want[0] else None,
            aten.matmul(A2.transpose(-2, -1), g2).sum_to_size(B2.shape).reshape(B.shape)
            if want[1] else None]


@vjp_of("matmul")
def matmul_vjp(a, g, want):
    return matmul_grads(a, g, want)


@op("scaledMatmul")
def scaled_matmul_fwd(a):
    return mul_s(aten.matmul(a.inp[0], a.inp[1]), a.p["alpha"])


@vjp_of("scaledMatmul")
def scaled_matmul_vjp(a, g, want):
    return [mul_s(t, a.p["alpha"]) if t is not None else None for t in matmul_grads(a, g, want)]


def check_smm(a):
    S, V = a.inp[0], a.inp[1]
    if (S.dim() < 2 or V.dim() != S.dim() or S.shape[:-2] != V.shape[:-2]
            or S.size(-1) != V.size(-2)):
        raise Failed("softmaxMatmul wants S [..., n, m] and V [..., m, d] with equal leading "
                     "axes, got %s and %s" % (list(S.shape), list(V.shape)))


@op("softmaxMatmul")
def softmax_matmul_fwd(a):
    check_smm(a)
    return aten.matmul(aten._softmax(a.inp[0], -1, False), a.inp[1])


@vjp_of("softmaxMatmul")
def softmax_matmul_vjp(a, g, want):
    check_smm(a)
    P = aten._softmax(a.inp[0], -1, False)
    grads = [None, None]
    if want[0]:
        dP = aten.matmul(g, a.inp[1].transpose(-2, -1))
        grads[0] = aten._softmax_backward_data(dP, P, -1, P.dtype)
    if want[1]:
        grads[1] = aten.matmul(P.transpose(-2, -1), g)
    return grads


def linear_dims(a):
    x, w, b = a.inp[0], a.inp[1], a.inp[2]
    if w.dim() != 2 or b.dim() != 1 or x.dim() < 1:
        raise Failed("expects x [..., in], w [out, in], b [out]")
    out, inn = w.size(0), w.size(1)
    if x.size(-1) != inn or b.size(0) != out:
        raise Failed("x, w, b do not agree")
    return out, inn, math.prod(x.shape[:-1])


@op("linear")
def linear_fwd(a):
    linear_dims(a)
    return aten.linear(a.inp[0], a.inp[1], a.inp[2])


@vjp_of("linear")
def linear_vjp(a, g, want):
    out, inn, rows = linear_dims(a)
    x, w = a.inp[0], a.inp[1]
    grads = [aten.matmul(g, w) if want[0] else None, None, None]
    g2 = g.reshape([rows, out])
    if want[1]:
        grads[1] = aten.mm(g2.t(), x.reshape([rows, inn]))
    if want[2]:
        grads[2] = aten.sum.dim_IntList(g2, [0], False)
    return grads


# ==== ops mseLoss crossEntropy distill
# Losses (aten_loss.cpp); reduction Mean = 1, Sum = 2 (at::Reduction).
MEAN, SUM = 1, 2


def same_shapes(a, name):
    if a.inp[0].shape != a.inp[1].shape:
        raise Failed("%s inputs have shapes %s and %s (same shape required)"
                     % (name, list(a.inp[0].shape), list(a.inp[1].shape)))


def scalar_zero(a):
    return aten.zeros([], **a.opts())


def probe_mse(a):
    z = aten.zeros([1], **a.opts())
    aten.mse_loss(z, z, MEAN)


def probe_ce(a):
    z = aten.zeros([1, 1], **a.opts())
    aten.cross_entropy_loss(z, z, None, MEAN, -100, 0.0)


def probe_kl(a):
    z = aten.zeros([1], **a.opts())
    aten.kl_div(aten._log_softmax(z, 0, False), z, SUM, log_target=True)


@op("mseLoss")
def mse_fwd(a):
    same_shapes(a, "mseLoss")
    if a.inp[0].numel() == 0:
        probe_mse(a)
        return scalar_zero(a)
    return aten.mse_loss(a.inp[0], a.inp[1], MEAN)


@vjp_of("mseLoss")
def mse_vjp(a, g, want):
    same_shapes(a, "mseLoss")
    if a.inp[0].numel() == 0:
        probe_mse(a)
        return [aten.zeros_like(a.inp[i]) if want[i] else None for i in range(2)]
    d = aten.mse_loss_backward(g, a.inp[0], a.inp[1], MEAN)
    return [d if want[0] else None, aten.neg(d) if want[1] else None]


def class_axis(a, name):
    same_shapes(a, name)
    x = a.inp[0]
    if x.dim() == 0:
        raise Failed("%s needs a class axis (rank >= 1)" % name)
    ax = norm_axis(a.p["axis"], x.dim())
    C = x.size(ax)
    slices = x.numel() // C if C > 0 else 0
    if C == 0:
        slices = math.prod(x.size(i) for i in range(x.dim()) if i != ax)
    return ax, float(slices) if slices > 0 else 1.0


@op("crossEntropy")
def ce_fwd(a):
    ax, S = class_axis(a, "crossEntropy")
    z, t = a.inp[0], a.inp[1]
    if z.numel() == 0:
        probe_ce(a)
        return scalar_zero(a)
    if z.dim() == 1:
        return aten.cross_entropy_loss(z, t, None, MEAN, -100, 0.0)
    return aten.cross_entropy_loss(z.movedim(ax, 1), t.movedim(ax, 1), None, MEAN, -100, 0.0)


@vjp_of("crossEntropy")
def ce_vjp(a, g, want):
    ax, S = class_axis(a, "crossEntropy")
    if not want[0]:
        return [None, None]
    z, t = a.inp[0], a.inp[1]
    if z.numel() == 0:
        probe_ce(a)
        return [aten.zeros_like(z), None]
    logp = aten._log_softmax(z, ax, False)
    dlogp = aten.mul.Tensor(aten.neg(t), div_s(g, S))
    return [aten._log_softmax_backward_data(dlogp, logp, ax, logp.dtype), None]


@op("distill")
def distill_fwd(a):
    ax, S = class_axis(a, "distill")
    T = a.p["temperature"]
    if a.inp[0].numel() == 0:
        probe_kl(a)
        return scalar_zero(a)
    b = aten._log_softmax(div_s(a.inp[0], T), ax, False)
    q = aten._log_softmax(div_s(a.inp[1], T), ax, False)
    kl = aten.kl_div(b, q, SUM, log_target=True)
    return mul_s(div_s(kl, S), T * T)


@vjp_of("distill")
def distill_vjp(a, g, want):
    ax, S = class_axis(a, "distill")
    if not want[0]:
        return [None, None]
    T = a.p["temperature"]
    if a.inp[0].numel() == 0:
        probe_kl(a)
        return [aten.zeros_like(a.inp[0]), None]
    b = aten._log_softmax(div_s(a.inp[0], T), ax, False)
    la = aten._log_softmax(div_s(a.inp[1], T), ax, False)
    db = aten.mul.Tensor(aten.neg(aten.exp(la)), mul_s(div_s(g, S), T * T))
    return [div_s(aten._log_softmax_backward_data(db, b, ax, b.dtype), T), None]


# ==== ops layerNorm batchNorm
# Normalization (aten_norm.cpp): native_layer_norm / native_batch_norm and their backwards.
def layer_norm_args(a):
    x = a.inp[0].contiguous()
    ax = norm_axis(a.p["axis"], x.dim())
    shape = list(x.shape[ax:])
    if list(a.inp[1].shape) != shape or list(a.inp[2].shape) != shape:
        raise Failed("gamma and beta must have the normalized shape %s" % shape)
    return x, shape, a.inp[1].contiguous(), a.inp[2].contiguous(), a.p["eps"]


@op("layerNorm")
def layer_norm_fwd(a):
    x, shape, gamma, beta, eps = layer_norm_args(a)
    return aten.native_layer_norm(x, shape, gamma, beta, eps)[0]


@vjp_of("layerNorm")
def layer_norm_vjp(a, g, want):
    x, shape, gamma, beta, eps = layer_norm_args(a)
    y, mean, rstd = aten.native_layer_norm(x, shape, gamma, beta, eps)
    r = aten.native_layer_norm_backward(g.contiguous(), x, shape, mean, rstd, gamma, beta,
                                        [True, True, True])
    return [r[i] if want[i] else None for i in range(3)]


def batch_norm_args(a):
    training = a.p["training"] != 0
    want_inputs(a, 3 if training else 5, "batchNorm (training)" if training else "batchNorm (eval)")
    x = a.inp[0]
    if x.dim() < 1:
        raise Failed("batchNorm wants x [C, spatial...], got %s" % list(x.shape))
    for k in range(1, a.n):
        if a.inp[k].dim() != 1 or a.inp[k].size(0) != x.size(0):
            raise Failed("batchNorm input %d must be [C] = [%d]" % (k, x.size(0)))
    rmean = dense(a.inp[3]) if not training else None
    rvar = aten.clamp_min(a.inp[4], 0.0).contiguous() if not training else None
    return (dense(x).unsqueeze(0), dense(a.inp[1]), dense(a.inp[2]), rmean, rvar, training,
            a.p["eps"])


def probe_batch_norm(a):
    one = aten.zeros([1], **a.opts())
    aten.native_batch_norm(aten.zeros([1, 1, 1], **a.opts()), one, one, None, None, True, 0.0,
                           1e-5)


@op("batchNorm")
def batch_norm_fwd(a):
    x, gamma, beta, rmean, rvar, training, eps = batch_norm_args(a)
    if x.numel() == 0:
        probe_batch_norm(a)
        return aten.zeros_like(a.inp[0])
    return aten.native_batch_norm(x, gamma, beta, rmean, rvar, training, 0.0, eps)[0].squeeze(0)


@vjp_of("batchNorm")
def batch_norm_vjp(a, g, want):
    x, gamma, beta, rmean, rvar, training, eps = batch_norm_args(a)
    grads = [None] * a.n
    if x.numel() == 0:
        probe_batch_norm(a)
        for i in range(3):
            grads[i] = aten.zeros_like(a.inp[i]) if want[i] else None
        return grads
    y, save_mean, save_invstd = aten.native_batch_norm(x, gamma, beta, rmean, rvar, training,
                                                       0.0, eps)
    r = aten.native_batch_norm_backward(dense(g).unsqueeze(0), x, gamma, rmean, rvar, save_mean,
                                        save_invstd, training, eps,
                                        [bool(want[0]), bool(want[1]), bool(want[2])])
    grads[0] = r[0].squeeze(0) if want[0] else None
    grads[1] = r[1] if want[1] else None
    grads[2] = r[2] if want[2] else None
    return grads


# ==== ops conv convTranspose
# Convolution on one sample [C, spatial...] (aten_conv.cpp): at::convolution on x.unsqueeze(0);
# dilation 0 sums the weight's taps of that axis; geometries ATen rejects are answered by hand.
def conv_args(a):
    p = a.p
    sr = p["spatial"]
    if sr < 1 or sr > 3:
        raise Failed("spatial rank must be 1, 2 or 3, got %d" % sr)
    x, w, b = a.inp[0], a.inp[1], a.inp[2]
    if x.dim() != sr + 1 or w.dim() != sr + 2 or b.dim() != 1:
        raise Failed("wants x [C, %d spatial axes], weight of rank %d, bias [outC]" % (sr, sr + 2))
    if p["groups"] < 1:
        raise Failed("groups must be >= 1, got %d" % p["groups"])
    degenerate = (x.numel() == 0 or w.numel() == 0 or len(a.out_sizes) == 0
                  or numel(a.out_sizes) == 0)
    stride, pad, dil, out_pad, summed = [], [], [], [], []
    for i in range(sr):
        if p["kernel"][i] != 0 and p["kernel"][i] != w.size(i + 2):
            raise Failed("kernel[%d] = %d disagrees with the weight's extent %d"
                         % (i, p["kernel"][i], w.size(i + 2)))
        stride.append(p["stride"][i])
        pad.append(p["pad"][i])
        out_pad.append(0)
        if p["stride"][i] == 0:
            degenerate = True
        if p["dil"][i] == 0:
            summed.append(i + 2)
            dil.append(1)
        else:
            dil.append(p["dil"][i])
    if summed and not degenerate:
        w = aten.sum.dim_IntList(w, summed, True)
    return sr, stride, pad, dil, out_pad, summed, x.unsqueeze(0), w, degenerate


def probe_conv(a, sr, transposed):
    x = aten.zeros([1] * (sr + 2), **a.opts())
    aten.convolution(x, x, None, [1] * sr, [0] * sr, [1] * sr, transposed, [0] * sr, 1)


def bias_only(a):
    y = aten.zeros(a.out_sizes, **a.opts())
    if y.numel() == 0:
        return y
    shape = [1] * len(a.out_sizes)
    shape[0] = a.inp[2].size(0)
    return a.inp[2].reshape(shape).expand(a.out_sizes).clone()


def conv_fwd_impl(a, transposed):
    sr, stride, pad, dil, out_pad, summed, x, w, degenerate = conv_args(a)
    if degenerate:
        probe_conv(a, sr, transposed)
        return bias_only(a)
    return aten.convolution(x, w, a.inp[2], stride, pad, dil, transposed, out_pad,
                            a.p["groups"]).squeeze(0)


def conv_vjp_impl(a, g, want, transposed):
    sr, stride, pad, dil, out_pad, summed, x, w, degenerate = conv_args(a)
    grads = [None, None, None]
    if degenerate:
        probe_conv(a, sr, transposed)
        if want[0]:
            grads[0] = aten.zeros_like(a.inp[0])
        if want[1]:
            grads[1] = aten.zeros_like(a.inp[1])
        if want[2]:
            grads[2] = (aten.zeros_like(a.inp[2]) if g.numel() == 0
                        else aten.sum.dim_IntList(g, list(range(1, g.dim())), False))
        return grads
    r = aten.convolution_backward(dense(g).unsqueeze(0), x, w, [a.inp[2].size(0)], stride, pad,
                                  dil, transposed, out_pad, a.p["groups"],
                                  [bool(want[0]), bool(want[1]), bool(want[2])])
    if want[0]:
        grads[0] = r[0].squeeze(0)
    if want[1]:
        grads[1] = r[1] if not summed else r[1].expand(a.inp[1].shape)
    if want[2]:
        grads[2] = r[2]
    return grads


@op("conv")
def conv_fwd(a):
    return conv_fwd_impl(a, False)


@vjp_of("conv")
def conv_vjp(a, g, want):
    return conv_vjp_impl(a, g, want, False)


@op("convTranspose")
def conv_t_fwd(a):
    return conv_fwd_impl(a, True)


@vjp_of("convTranspose")
def conv_t_vjp(a, g, want):
    return conv_vjp_impl(a, g, want, True)


# ==== ops maxPool avgPool smoothMaxPool
# Pooling on one sample [C, spatial...] (aten_pool.cpp); a 1-D pool runs as 2-D with a unit axis.
def pool_args(a):
    p = a.p
    sr = p["spatial"]
    if sr < 1 or sr > 3:
        raise Failed("spatial rank must be 1, 2 or 3, got %d" % sr)
    x = a.inp[0]
    if x.dim() != sr + 1:
        raise Failed("wants x [C, %d spatial axes], got %s" % (sr, list(x.shape)))
    for i in range(sr):
        if p["dil"][i] != 1:
            raise Failed("pools have dilation 1, dil[%d] = %d" % (i, p["dil"][i]))
    if sr == 1:
        kernel, stride, pad = [1, p["kernel"][0]], [1, p["stride"][0]], [0, p["pad"][0]]
        x = dense(x).unsqueeze(0).unsqueeze(2)
    else:
        kernel, stride, pad = list(p["kernel"][:sr]), list(p["stride"][:sr]), list(p["pad"][:sr])
        x = dense(x).unsqueeze(0)
    return sr, kernel, stride, pad, x, numel(a.out_sizes) == 0


def to_call(sr, t):
    return dense(t).unsqueeze(0).unsqueeze(2) if sr == 1 else dense(t).unsqueeze(0)


def from_call(sr, t):
    return t.squeeze(2).squeeze(0) if sr == 1 else t.squeeze(0)


def probe_pool(a, sr, kind):
    three = sr == 3
    x = aten.zeros([1, 1, 1, 1, 1] if three else [1, 1, 1, 1], **a.opts())
    one, zero = [1] * (3 if three else 2), [0] * (3 if three else 2)
    if kind == "max":
        (aten.max_pool3d_with_indices if three else aten.max_pool2d_with_indices)(
            x, one, one, zero, one, False)
    else:
        (aten.avg_pool3d if three else aten.avg_pool2d)(x, one, one, zero, False, True, None)


def max_pool(sr, kernel, stride, pad, x):
    if sr == 3:
        return aten.max_pool3d_with_indices(x, kernel, stride, pad, [1, 1, 1], False)
    return aten.max_pool2d_with_indices(x, kernel, stride, pad, [1, 1], False)


def refuse_nan_input(a):
    if aten.any(aten.isnan(a.inp[0])).item():
        raise Unsupported("declared divergence (ops.md maxPool): ATen's max pooling lets a NaN "
                          "win its window, TorchLean's strict > fold never lets it displace a "
                          "number")


@op("maxPool")
def max_pool_fwd(a):
    refuse_nan_input(a)
    sr, kernel, stride, pad, x, empty = pool_args(a)
    if empty:
        probe_pool(a, sr, "max")
        return aten.zeros(a.out_sizes, **a.opts())
    return from_call(sr, max_pool(sr, kernel, stride, pad, x)[0])


@vjp_of("maxPool")
def max_pool_vjp(a, g, want):
    if not want[0]:
        return [None]
    refuse_nan_input(a)
    sr, kernel, stride, pad, x, empty = pool_args(a)
    if empty:
        probe_pool(a, sr, "max")
        return [aten.zeros_like(a.inp[0])]
    idx = max_pool(sr, kernel, stride, pad, x)[1]
    gc = to_call(sr, g)
    if sr == 3:
        dx = aten.max_pool3d_with_indices_backward(gc, x, kernel, stride, pad, [1, 1, 1], False,
                                                   idx)
    else:
        dx = aten.max_pool2d_with_indices_backward(gc, x, kernel, stride, pad, [1, 1], False, idx)
    return [from_call(sr, dx)]


def avg_call(sr, kernel, pad, x):
    if sr != 3 or not any(x.size(i + 2) < kernel[i] for i in range(3)):
        return x, pad, False
    pads = []
    for i in (2, 1, 0):
        pads += [pad[i], pad[i]]
    return aten.constant_pad_nd(x, pads, 0), [0, 0, 0], True


@op("avgPool")
def avg_pool_fwd(a):
    sr, kernel, stride, pad, x, empty = pool_args(a)
    if empty:
        probe_pool(a, sr, "avg")
        return aten.zeros(a.out_sizes, **a.opts())
    cx, cpad, _ = avg_call(sr, kernel, pad, x)
    pool = aten.avg_pool3d if sr == 3 else aten.avg_pool2d
    return from_call(sr, pool(cx, kernel, stride, cpad, False, True, None))


@vjp_of("avgPool")
def avg_pool_vjp(a, g, want):
    if not want[0]:
        return [None]
    sr, kernel, stride, pad, x, empty = pool_args(a)
    if empty:
        probe_pool(a, sr, "avg")
        return [aten.zeros_like(a.inp[0])]
    cx, cpad, prepadded = avg_call(sr, kernel, pad, x)
    gc = to_call(sr, g)
    backward = aten.avg_pool3d_backward if sr == 3 else aten.avg_pool2d_backward
    dx = backward(gc, cx, kernel, stride, cpad, False, True, None)
    if prepadded:
        for i in range(3):
            dx = dx.narrow(i + 2, pad[i], x.size(i + 2))
    return [from_call(sr, dx)]


def smooth_geom(a):
    p = a.p
    sr = p["spatial"]
    if sr < 1 or sr > 3 or a.inp[0].dim() != sr + 1:
        raise Failed("wants x [C, spatial...] with spatial rank 1..3")
    if not (math.isfinite(p["beta"]) and p["beta"] != 0.0):
        raise Failed("beta must be finite and nonzero")
    k, s, pd = list(p["kernel"][:sr]), list(p["stride"][:sr]), list(p["pad"][:sr])
    inn = [a.inp[0].size(i + 1) for i in range(sr)]
    out = [a.out_sizes[i + 1] for i in range(sr)]
    return sr, k, s, pd, inn, out, math.prod(k)


def window(geom, xp, j):
    sr, k, s, pd, inn, out, taps = geom
    off = [0, 0, 0]
    for i in range(sr - 1, -1, -1):
        off[i] = j % k[i]
        j //= k[i]
    v = xp
    for i in range(sr):
        start = off[i]
        v = aten.slice.Tensor(v, i + 1, start, start + (out[i] - 1) * s[i] + 1, s[i])
    return v


def padded(geom, x):
    sr, pd = geom[0], geom[3]
    pads = []
    for i in range(sr - 1, -1, -1):
        pads += [pd[i], pd[i]]
    return aten.constant_pad_nd(x, pads, 0)


def smooth_state(a, geom):
    beta, taps = a.p["beta"], geom[6]
    ctype = torch.float32 if a.dtype in (torch.float16, torch.bfloat16) else a.dtype
    xp = padded(geom, a.inp[0].to(ctype))
    pivot = window(geom, xp, 0)
    for j in range(1, taps):
        pivot = (aten.fmax if beta > 0 else aten.fmin)(pivot, window(geom, xp, j))
    S = None
    for j in range(taps):
        e = aten.exp(mul_s(aten.sub.Tensor(window(geom, xp, j), pivot), beta))
        S = e if j == 0 else aten.add.Tensor(S, e)
    return xp, pivot, S


@op("smoothMaxPool")
def smooth_pool_fwd(a):
    if numel(a.out_sizes) == 0:
        return aten.zeros(a.out_sizes, **a.opts())
    geom = smooth_geom(a)
    xp, pivot, S = smooth_state(a, geom)
    return aten.add.Tensor(pivot, div_s(aten.log(S), a.p["beta"])).to(a.dtype)


@vjp_of("smoothMaxPool")
def smooth_pool_vjp(a, g, want):
    if not want[0]:
        return [None]
    if numel(a.out_sizes) == 0:
        return [aten.zeros_like(a.inp[0])]
    geom = smooth_geom(a)
    xp, pivot, S = smooth_state(a, geom)
    beta = a.p["beta"]
    gp = aten.zeros_like(xp)
    for j in range(geom[6]):
        w = aten.div.Tensor(aten.exp(mul_s(aten.sub.Tensor(window(geom, xp, j), pivot), beta)), S)
        window(geom, gp, j).add_(aten.mul.Tensor(g.to(gp.dtype), w))
    dx = gp
    for i in range(geom[0]):
        dx = dx.narrow(i + 1, geom[3][i], geom[4][i])
    return [dx.to(a.dtype)]


# ==== ops fftFno
# fftFno (aten_composite.cpp): rfft/irfft on packed (re, im) spectra, the mixing in real bmm.
def bin_weights(a, K, n, end, mid):
    k = aten.arange(K, **a.opts(torch.int64))
    endpoint = aten.logical_or(aten.eq.Scalar(k, 0), aten.eq.Scalar(mul_s(k, 2), n))
    re = aten.where.ScalarSelf(endpoint, end, aten.full([K], mid, **a.opts()))
    im = aten.where.ScalarSelf(endpoint, 0.0, aten.full([K], mid, **a.opts()))
    return aten.stack([re, im], -1)


def to_complex(t):
    return aten.view_as_complex(t.contiguous())


def to_packed(c):
    return aten.view_as_real(c)


def check_variant(a):
    aten.fft_rfft(aten.zeros([2], **a.opts()))  # ATen's CPU FFT: f32/f64 only
    v = a.p["variant"]
    if v < 0 or v > 2:
        raise Failed("variant must be 0 (spectralConv), 1 (rfft1d) or 2 (irfft1d), got %d" % v)
    want_inputs(a, 3 if v == 0 else 1, ("spectralConv", "rfft1d", "irfft1d")[v])


def spectral(a):
    x = a.inp[0]
    if x.dim() != 2 or x.size(0) < 1:
        raise Failed("spectralConv wants x [grid, width], got %s" % list(x.shape))
    n, w = x.size(0), x.size(1)
    K, M = n // 2 + 1, a.p["modes"]
    if M < 0 or M > K:
        raise Failed("modes %d is not in 0..%d" % (M, K))
    Xr = Xi = None
    if M > 0 and w > 0:
        X = to_packed(aten.fft_rfft(x, n, 0, "backward")).narrow(0, 0, M)
        Xr, Xi = X.select(-1, 0), X.select(-1, 1)
    return n, w, M, K, Xr, Xi, a.inp[1], a.inp[2]


def pad_bins(K, M, re, im):
    z = aten.stack([re, im], -1)
    return aten.constant_pad_nd(z, [0, 0, 0, 0, 0, K - M], 0)


@op("fftFno")
def fft_fno_fwd(a):
    check_variant(a)
    x = a.inp[0]
    if a.p["variant"] == 1:
        if x.dim() != 2 or x.size(1) < 1:
            raise Failed("rfft1d wants x [batch, n], got %s" % list(x.shape))
        return to_packed(aten.fft_rfft(x, x.size(1), 1, "backward"))
    if a.p["variant"] == 2:
        n = a.p["length"]
        if n < 1 or x.dim() != 3 or x.size(1) != n // 2 + 1 or x.size(2) != 2:
            raise Failed("irfft1d of length %d wants z [batch, %d, 2], got %s"
                         % (n, n // 2 + 1, list(x.shape)))
        z = aten.mul.Tensor(x, bin_weights(a, x.size(1), n, 1.0, 1.0))
        return aten.fft_irfft(to_complex(z), n, 1, "backward")
    n, w, M, K, Xr, Xi, Wr, Wi = spectral(a)
    if M == 0 or w == 0:
        return aten.zeros_like(x)
    xr, xi = Xr.unsqueeze(1), Xi.unsqueeze(1)
    Yr = aten.sub.Tensor(aten.bmm(xr, Wr), aten.bmm(xi, Wi)).squeeze(1)
    Yi = aten.add.Tensor(aten.bmm(xr, Wi), aten.bmm(xi, Wr)).squeeze(1)
    Y = aten.mul.Tensor(pad_bins(K, M, Yr, Yi), bin_weights(a, K, n, 1.0, 1.0).unsqueeze(1))
    return aten.fft_irfft(to_complex(Y), n, 0, "backward")


@vjp_of("fftFno")
def fft_fno_vjp(a, g, want):
    check_variant(a)
    x = a.inp[0]
    grads = [None] * a.n
    if a.p["variant"] == 1:
        if want[0]:
            n = x.size(1)
            G = aten.mul.Tensor(g, bin_weights(a, n // 2 + 1, n, 1.0, 0.5))
            grads[0] = aten.fft_irfft(to_complex(G), n, 1, "forward")
        return grads
    if a.p["variant"] == 2:
        if want[0]:
            n = a.p["length"]
            G = to_packed(aten.fft_rfft(g, n, 1, "backward"))
            grads[0] = aten.mul.Tensor(G, bin_weights(a, n // 2 + 1, n, 1.0 / n, 2.0 / n))
        return grads
    n, w, M, K, Xr, Xi, Wr, Wi = spectral(a)
    if M == 0 or w == 0:
        return [aten.zeros_like(a.inp[i]) if want[i] else None for i in range(3)]
    GY = aten.mul.Tensor(to_packed(aten.fft_rfft(g, n, 0, "backward")),
                         bin_weights(a, K, n, 1.0 / n, 2.0 / n).unsqueeze(1)).narrow(0, 0, M)
    gr, gi = GY.select(-1, 0), GY.select(-1, 1)
    xr, xi = Xr.unsqueeze(2), Xi.unsqueeze(2)
    gr1, gi1 = gr.unsqueeze(1), gi.unsqueeze(1)
    if want[1]:
        grads[1] = aten.add.Tensor(aten.bmm(xr, gr1), aten.bmm(xi, gi1))
    if want[2]:
        grads[2] = aten.sub.Tensor(aten.bmm(xr, gi1), aten.bmm(xi, gr1))
    if want[0]:
        gr2, gi2 = gr.unsqueeze(2), gi.unsqueeze(2)
        dXr = aten.add.Tensor(aten.bmm(Wr, gr2), aten.bmm(Wi, gi2)).squeeze(2)
        dXi = aten.sub.Tensor(aten.bmm(Wr, gi2), aten.bmm(Wi, gr2)).squeeze(2)
        dX = aten.mul.Tensor(pad_bins(K, M, dXr, dXi), bin_weights(a, K, n, 1.0, 0.5).unsqueeze(1))
        grads[0] = aten.fft_irfft(to_complex(dX), n, 0, "forward")
    return grads


# ==== ops selectiveScan
# The sequential recurrence h_t = a_t h_{t-1} + b_t x_t (aten_composite.cpp); f16/bf16 run in
# float32 and are rounded once.
def scan_dims(a):
    A, B, x, h0 = a.inp[0], a.inp[1], a.inp[2], a.inp[3]
    if x.dim() != 2 or h0.dim() != 1 or h0.size(0) != x.size(1) or A.shape != B.shape:
        raise Failed("selectiveScan wants a, b [D] or [T, D], x [T, D], h0 [D]")
    T, D, shared = x.size(0), x.size(1), A.dim() == 1
    if not (A.size(0) == D if shared else A.shape == x.shape):
        raise Failed("selectiveScan a %s is neither [D] nor [T, D]" % list(A.shape))
    return T, D, shared


def coef(shared, c, t):
    return c if shared else c.select(0, t)


def scan_inputs(a):
    narrow = a.dtype in (torch.float16, torch.bfloat16)
    return [a.inp[i].to(torch.float32) if narrow else a.inp[i] for i in range(4)]


def scan_states(inp, T, shared):
    h, prev = [], inp[3]
    for t in range(T):
        prev = aten.add.Tensor(aten.mul.Tensor(coef(shared, inp[0], t), prev),
                               aten.mul.Tensor(coef(shared, inp[1], t), inp[2].select(0, t)))
        h.append(prev)
    return h


@op("selectiveScan")
def scan_fwd(a):
    T, D, shared = scan_dims(a)
    if T == 0:
        return aten.zeros_like(a.inp[2])
    return aten.stack(scan_states(scan_inputs(a), T, shared), 0).to(a.dtype)


@vjp_of("selectiveScan")
def scan_vjp(a, g, want):
    T, D, shared = scan_dims(a)
    if T == 0:
        return [aten.zeros_like(a.inp[i]) if want[i] else None for i in range(4)]
    inp = scan_inputs(a)
    h = scan_states(inp, T, shared)
    da, db, dx = [None] * T, [None] * T, [None] * T
    G = sa = sb = None
    gf = g.to(inp[2].dtype)
    for t in range(T - 1, -1, -1):
        gt = gf.select(0, t)
        G = aten.add.Tensor(gt, aten.mul.Tensor(coef(shared, inp[0], t + 1), G)) if t + 1 < T else gt
        hp = h[t - 1] if t > 0 else inp[3]
        dat, dbt = aten.mul.Tensor(G, hp), aten.mul.Tensor(G, inp[2].select(0, t))
        if shared:
            sa = aten.add.Tensor(sa, dat) if t + 1 < T else dat
            sb = aten.add.Tensor(sb, dbt) if t + 1 < T else dbt
        else:
            da[t], db[t] = dat, dbt
        dx[t] = aten.mul.Tensor(G, coef(shared, inp[1], t))
    return [(sa if shared else aten.stack(da, 0)).to(a.dtype) if want[0] else None,
            (sb if shared else aten.stack(db, 0)).to(a.dtype) if want[1] else None,
            aten.stack(dx, 0).to(a.dtype) if want[2] else None,
            aten.mul.Tensor(G, coef(shared, inp[0], 0)).to(a.dtype) if want[3] else None]


# ==== ops attention
# bmm + TorchLean's hard-masked row softmax + bmm, no SDPA (aten_composite.cpp).
def attn_args(a):
    q, k, v = a.inp[0], a.inp[1], a.inp[2]
    R = q.dim()
    if (R < 2 or k.dim() != R or v.dim() != R or k.size(-1) != q.size(-1)
            or v.size(-2) != k.size(-2) or q.shape[:-2] != k.shape[:-2]
            or q.shape[:-2] != v.shape[:-2]):
        raise Failed("attention wants Q [..., nQ, d], K [..., nK, d], V [..., nK, dv] with equal "
                     "leading axes")
    nQ, nK, d, dv = q.size(-2), k.size(-2), q.size(-1), v.size(-1)
    B = math.prod(q.shape[:-2])
    s = 1.0 / math.sqrt(d) if d > 0 else 1.0
    t = {"B": B, "nQ": nQ, "nK": nK, "d": d, "dv": dv, "s": s, "split": abs(s) < 1.0,
         "Q": q.reshape([B, nQ, d]), "K": k.reshape([B, nK, d]), "V": v.reshape([B, nK, dv]),
         "allowed": None, "empty_row": None}
    masked, causal = a.n == 4, a.p["causal"] != 0
    if masked or causal:
        allowed = aten.ones([nQ, nK], **a.opts(torch.bool))
        if masked:
            m = a.inp[3]
            if m.dim() != 2 or m.size(0) != nQ or m.size(1) != nK:
                raise Failed("attention mask must be [nQ, nK] = [%d, %d], got %s"
                             % (nQ, nK, list(m.shape)))
            allowed = m.to(torch.bool)
        if causal:
            allowed = aten.logical_and(allowed, aten.le.Tensor(
                aten.arange(nK, **a.opts(torch.int64)).unsqueeze(0),
                aten.arange(nQ, **a.opts(torch.int64)).unsqueeze(1)))
        t["allowed"] = allowed.unsqueeze(0)
        t["empty_row"] = aten.logical_not(aten.any.dim(t["allowed"], -1, True))
    return t


def attn_logits(t):
    if t["split"]:
        r = math.sqrt(t["s"])
        return aten.bmm(mul_s(t["Q"], r), mul_s(t["K"], r).transpose(1, 2))
    return mul_s(aten.bmm(t["Q"], t["K"].transpose(1, 2)), t["s"])


def attn_probs(t):
    S = attn_logits(t)
    if t["allowed"] is None:
        return aten._softmax(S, -1, False)
    blocked = aten.logical_not(t["allowed"])
    S = aten.masked_fill.Scalar(S, blocked, -math.inf)
    S = aten.masked_fill.Scalar(S, t["empty_row"], 0.0)
    return aten.masked_fill.Scalar(aten._softmax(S, -1, False),
                                   aten.logical_or(blocked, t["empty_row"]), 0.0)


@op("attention")
def attn_fwd(a):
    t = attn_args(a)
    out = aten.bmm(attn_probs(t), t["V"])
    if t["empty_row"] is not None:
        out = aten.masked_fill.Scalar(out, t["empty_row"], 0.0)
    return out.reshape(a.out_sizes)


@vjp_of("attention")
def attn_vjp(a, g, want):
    t = attn_args(a)
    P = attn_probs(t)
    G = g.reshape([t["B"], t["nQ"], t["dv"]])
    grads = [None] * a.n
    if want[2]:
        grads[2] = aten.bmm(P.transpose(1, 2), G).reshape(a.inp[2].shape)
    if not want[0] and not want[1]:
        return grads
    dP = aten.bmm(G, t["V"].transpose(1, 2))
    dS = aten._softmax_backward_data(dP, P, -1, P.dtype)
    if t["allowed"] is not None:
        dS = aten.masked_fill.Scalar(
            dS, aten.logical_or(aten.logical_not(t["allowed"]), t["empty_row"]), 0.0)
    r = math.sqrt(t["s"]) if t["split"] else t["s"]
    Kf = mul_s(t["K"], r) if t["split"] else t["K"]
    Qf = mul_s(t["Q"], r) if t["split"] else t["Q"]
    if want[0]:
        grads[0] = mul_s(aten.bmm(dS, Kf), r).reshape(a.inp[0].shape)
    if want[1]:
        grads[1] = mul_s(aten.bmm(dS.transpose(1, 2), Qf), r).reshape(a.inp[1].shape)
    return grads
