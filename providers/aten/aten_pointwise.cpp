// Pointwise arithmetic (ops.md B): add, sub, mul, div, neg, scale, abs, sqrt, clamp, max, min,
// inv. Same-shape operands (TorchLean has no implicit broadcasting). ATen has no backward kernel
// for any of them: every VJP is composed from ATen primitives (torchLeanTape), in the schedule
// ops.md gives for TorchLean's runtime where it names one.
#include "providers/aten/aten_common.h"

#include <ATen/ops/abs.h>
#include <ATen/ops/add.h>
#include <ATen/ops/div.h>
#include <ATen/ops/fmax.h>
#include <ATen/ops/fmin.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/le.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/where.h>

namespace ccaten {
namespace {

// TorchLean's binary pointwise ops have no implicit broadcasting (broadcast is its own op); a
// stride-0 input view is fine, differing shapes are not.
void same_shape(const Args &a) {
    if (a.in[0].sizes() != a.in[1].sizes())
        throw Failed("input shapes " + fmt_sizes(a.in[0].sizes()) + " and " +
                     fmt_sizes(a.in[1].sizes()) + " differ (no implicit broadcasting)");
}

// A 0-d tensor holding v in the case dtype (v rounded once, as TorchLean's capsule rounds its
// host double to float32), on the case device.
at::Tensor scalar_of(const Args &a, double v) { return at::scalar_tensor(v, a.opts); }

// ---- add / sub / mul ------------------------------------------------------------------------

at::Tensor add_fwd(const Args &a) {
    same_shape(a);
    return at::add(a.in[0], a.in[1]);
}
void add_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    same_shape(a);
    if (want[0])
        grad[0] = g;
    if (want[1])
        grad[1] = g;
}

at::Tensor sub_fwd(const Args &a) {
    same_shape(a);
    return at::sub(a.in[0], a.in[1]);
}
void sub_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    same_shape(a);
    if (want[0])
        grad[0] = g;
    if (want[1]) // LibTorch's g * (-1): -(+0) = -0 (the CPU tape's 0 - g gives +0; equal values)
        grad[1] = at::neg(g);
}

at::Tensor mul_fwd(const Args &a) {
    same_shape(a);
    return at::mul(a.in[0], a.in[1]);
}
void mul_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    same_shape(a);
    if (want[0])
        grad[0] = at::mul(g, a.in[1]);
    if (want[1])
        grad[1] = at::mul(g, a.in[0]);
}

// ---- div (not a BackendOp: TorchLean's tape op) ----------------------------------------------

at::Tensor div_fwd(const Args &a) {
    same_shape(a);
    return at::div(a.in[0], a.in[1]); // tensor divisor: no reciprocal-multiply shortcut
}
// da = g / b; db = -(g * ((a / b) / b)): successive divisions, deliberately not b^2.
void div_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    same_shape(a);
    const at::Tensor &x = a.in[0], &y = a.in[1];
    if (want[0])
        grad[0] = at::div(g, y);
    if (want[1])
        grad[1] = at::neg(at::mul(g, at::div(at::div(x, y), y)));
}

// ---- neg / scale --------------------------------------------------------------------------------

at::Tensor neg_fwd(const Args &a) { return at::neg(a.in[0]); }
void neg_vjp(const Args &, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (want[0])
        grad[0] = at::neg(g);
}

at::Tensor scale_fwd(const Args &a) { return at::mul(a.in[0], at::Scalar(a.p->alpha)); }
void scale_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (want[0])
        grad[0] = at::mul(g, at::Scalar(a.p->alpha));
}

// ---- abs: VJP sign(x) * g with a where-built sign (0 at x = 0 and for NaN), a product ---------

at::Tensor abs_fwd(const Args &a) { return at::abs(a.in[0]); }
void abs_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (!want[0])
        return;
    const at::Tensor &x = a.in[0];
    at::Tensor sign = at::sub(at::gt(x, 0).to(a.dtype), at::lt(x, 0).to(a.dtype));
    grad[0] = at::mul(sign, g);
}

// ---- sqrt(max(x, 0)) as TorchLean's capsule: sqrt(where(x <= 0, 0, x)) ------------------------

at::Tensor sqrt_fwd(const Args &a) {
    const at::Tensor &x = a.in[0];
    return at::sqrt(at::where(at::le(x, 0), 0.0, x)); // -0 and negatives -> +0, NaN stays NaN
}
// g * (1 / (2 sqrt x)) for x > 0, 0 selected elsewhere (an Inf/NaN g gives 0 there).
void sqrt_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (!want[0])
        return;
    const at::Tensor &x = a.in[0];
    at::Tensor pos = at::gt(x, 0);
    at::Tensor r = at::reciprocal(at::mul(at::sqrt(at::where(pos, x, 1.0)), 2.0));
    grad[0] = at::where(pos, at::mul(r, g), 0.0);
}

// ---- clamp: fmin(fmax(x, lo), hi) with scalar tensors; VJP strictly inside (lo, hi) ------------

at::Tensor clamp_fwd(const Args &a) {
    return at::fmin(at::fmax(a.in[0], scalar_of(a, a.p->lo)), scalar_of(a, a.p->hi));
}
void clamp_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (!want[0])
        return;
    const at::Tensor &x = a.in[0];
    at::Tensor inside =
        at::logical_and(at::lt(scalar_of(a, a.p->lo), x), at::lt(x, scalar_of(a, a.p->hi)));
    grad[0] = at::where(inside, g, 0.0);
}

// ---- max / min: fmax / fmin; VJP a>b -> (g, 0), b>a -> (0, g), tie or NaN -> (g/2, g/2) ---------

at::Tensor max_fwd(const Args &a) {
    same_shape(a);
    return at::fmax(a.in[0], a.in[1]);
}
at::Tensor min_fwd(const Args &a) {
    same_shape(a);
    return at::fmin(a.in[0], a.in[1]);
}
// first = the predicate under which operand 0 takes all of g (a > b for max, a < b for min).
void split_vjp(const at::Tensor &first, const at::Tensor &second, const at::Tensor &g,
               const bool *want, at::Tensor *grad) {
    at::Tensor half = at::mul(g, 0.5);
    if (want[0])
        grad[0] = at::where(first, g, at::where(second, 0.0, half));
    if (want[1])
        grad[1] = at::where(second, g, at::where(first, 0.0, half));
}
void max_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    same_shape(a);
    split_vjp(at::gt(a.in[0], a.in[1]), at::gt(a.in[1], a.in[0]), g, want, grad);
}
void min_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    same_shape(a);
    split_vjp(at::lt(a.in[0], a.in[1]), at::lt(a.in[1], a.in[0]), g, want, grad);
}

// ---- inv: reciprocal; VJP r = 1/x, r2 = r*r, t = g*r2, dx = t * (-1) (both runtimes) ----------

at::Tensor inv_fwd(const Args &a) { return at::reciprocal(a.in[0]); }
void inv_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (!want[0])
        return;
    at::Tensor r = at::reciprocal(a.in[0]);
    grad[0] = at::mul(at::mul(g, at::mul(r, r)), -1.0);
}

const OpEntry kOps[] = {
    // name, report_name, min_in, max_in, fwd, vjp, vjp_mode, note
    {"add", "add", 2, 2, add_fwd, add_vjp, VJP_TAPE, nullptr},
    {"sub", "sub", 2, 2, sub_fwd, sub_vjp, VJP_TAPE, nullptr},
    {"mul", "mul", 2, 2, mul_fwd, mul_vjp, VJP_TAPE, nullptr},
    {"div", "div", 2, 2, div_fwd, div_vjp, VJP_TAPE,
     "at::div with a tensor divisor; VJP composed in TorchLean's schedule db = -(g*((a/b)/b))"},
    {"neg", "neg", 1, 1, neg_fwd, neg_vjp, VJP_TAPE, nullptr},
    {"scale", "scale", 1, 1, scale_fwd, scale_vjp, VJP_TAPE, nullptr},
    {"abs", "abs", 1, 1, abs_fwd, abs_vjp, VJP_TAPE,
     "VJP composed as where-built sign(x) (0 at 0 and NaN) times g, not ATen's sgn(x)*g"},
    {"sqrt", "sqrt", 1, 1, sqrt_fwd, sqrt_vjp, VJP_TAPE,
     "sqrt(where(x<=0, 0, x)) (x<=0 -> +0); VJP where(x>0, g/(2 sqrt x), 0) selected, not "
     "ATen's NaN/Inf"},
    {"clamp", "clamp", 1, 1, clamp_fwd, clamp_vjp, VJP_TAPE,
     "fmin(fmax(x, lo), hi) with dtype scalar tensors (NaN -> lo), not at::clamp; VJP "
     "where(lo<x<hi, g, 0) strict interior"},
    {"max", "max", 2, 2, max_fwd, max_vjp, VJP_TAPE,
     "at::fmax (not maximum: the non-NaN operand wins); VJP selects g/0 and splits (g/2, g/2) "
     "on ties and NaN"},
    {"min", "min", 2, 2, min_fwd, min_vjp, VJP_TAPE,
     "at::fmin (not minimum: the non-NaN operand wins); VJP selects g/0 and splits (g/2, g/2) "
     "on ties and NaN"},
    {"inv", "inv", 1, 1, inv_fwd, inv_vjp, VJP_TAPE,
     "at::reciprocal; VJP in the runtime order ((g*(r*r))*(-1)), r = 1/x"},
};

} // namespace

const OpTable pointwise_table = {"pointwise", kOps, sizeof kOps / sizeof kOps[0]};

} // namespace ccaten
