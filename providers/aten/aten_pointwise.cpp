// Pointwise family (ops.md B, C): add, mul, exp, relu.
#include "providers/aten/aten_common.h"

#include <ATen/ops/add.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/threshold_backward.h>

namespace ccaten {
namespace {

// TorchLean's binary pointwise ops have no implicit broadcasting (broadcast is its own op); a
// stride-0 input view is fine, differing shapes are not.
void same_shape(const Args &a) {
    if (a.in[0].sizes() != a.in[1].sizes())
        throw Failed("input shapes " + fmt_sizes(a.in[0].sizes()) + " and " +
                     fmt_sizes(a.in[1].sizes()) + " differ (no implicit broadcasting)");
}

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

at::Tensor exp_fwd(const Args &a) { return at::exp(a.in[0]); }
void exp_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (want[0])
        grad[0] = at::mul(g, at::exp(a.in[0]));
}

at::Tensor relu_fwd(const Args &a) { return at::relu(a.in[0]); }
void relu_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (want[0]) // where(x > 0, g, 0): selects, so an Inf/NaN g at x <= 0 gives 0
        grad[0] = at::threshold_backward(g, a.in[0], 0);
}

const OpEntry kOps[] = {
    // name, report_name, min_in, max_in, fwd, vjp, vjp_mode, note
    {"add", "add", 2, 2, add_fwd, add_vjp, VJP_TAPE, nullptr},
    {"mul", "mul", 2, 2, mul_fwd, mul_vjp, VJP_TAPE, nullptr},
    {"exp", "exp", 1, 1, exp_fwd, exp_vjp, VJP_TAPE, nullptr},
    {"relu", "relu", 1, 1, relu_fwd, relu_vjp, VJP_BACKEND, nullptr},
};

} // namespace

const OpTable pointwise_table = {"pointwise", kOps, sizeof kOps / sizeof kOps[0]};

} // namespace ccaten
