// Activations and transcendental pointwise ops (ops.md C): relu, gelu, sigmoid, silu, tanh,
// softplus, exp, log, sin, cos, safeLog. ATen's backward kernels where it has one for the
// contract's function (threshold_backward, gelu_backward "tanh", sigmoid/tanh/silu_backward);
// the others are composed (torchLeanTape).
#include "providers/aten/aten_common.h"

#include <ATen/ops/abs.h>
#include <ATen/ops/add.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/div.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/fmax.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/gelu_backward.h>
#include <ATen/ops/log.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/masked_fill.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sigmoid_backward.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/silu_backward.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/tanh_backward.h>
#include <ATen/ops/threshold_backward.h>

namespace ccaten {
namespace {

at::Tensor relu_fwd(const Args &a) { return at::relu(a.in[0]); }
void relu_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (want[0]) // x <= 0 -> 0 selected (an Inf/NaN g gives 0 there)
        // threshold_backward passes g at a NaN x; the contract's derivative (x > 0) gives 0 there
        grad[0] = at::masked_fill(at::threshold_backward(g, a.in[0], 0), at::isnan(a.in[0]), 0.0);
}

// gelu is the tanh form only (ATen's default is erf).
at::Tensor gelu_fwd(const Args &a) { return at::gelu(a.in[0], "tanh"); }
void gelu_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (want[0])
        grad[0] = at::gelu_backward(g, a.in[0], "tanh");
}

at::Tensor sigmoid_fwd(const Args &a) { return at::sigmoid(a.in[0]); }
void sigmoid_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (want[0]) // y recomputed from x, then g * y (1 - y)
        grad[0] = at::sigmoid_backward(g, at::sigmoid(a.in[0]));
}

at::Tensor silu_fwd(const Args &a) { return at::silu(a.in[0]); }
void silu_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (want[0])
        grad[0] = at::silu_backward(g, a.in[0]);
}

at::Tensor tanh_fwd(const Args &a) { return at::tanh(a.in[0]); }
void tanh_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (want[0]) // y recomputed from x, then g (1 - y^2)
        grad[0] = at::tanh_backward(g, at::tanh(a.in[0]));
}

// softplus with beta 1 and no threshold, as TorchLean's capsule composes it:
// max(x, 0) + log(1 + exp(-|x|)) (plain log of 1 + e, not log1p). at::softplus with
// threshold = +inf would overflow exp(x) for large x (its backward too: inf/inf = NaN).
at::Tensor softplus_of(const Args &a, const at::Tensor &x) {
    at::Tensor e = at::exp(at::neg(at::abs(x)));
    return at::add(at::fmax(x, at::scalar_tensor(0.0, a.opts)), at::log(at::add(e, 1.0)));
}

at::Tensor softplus_fwd(const Args &a) { return softplus_of(a, a.in[0]); }
void softplus_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (want[0])
        grad[0] = at::mul(at::sigmoid(a.in[0]), g);
}

at::Tensor exp_fwd(const Args &a) { return at::exp(a.in[0]); }
void exp_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (want[0])
        grad[0] = at::mul(g, at::exp(a.in[0]));
}

// log: no guard (ATen gives -Inf at 0, NaN below); the reference rejects x <= 0, so such cases
// never reach the provider.
at::Tensor log_fwd(const Args &a) { return at::log(a.in[0]); }
void log_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (want[0])
        grad[0] = at::mul(g, at::reciprocal(a.in[0]));
}

at::Tensor sin_fwd(const Args &a) { return at::sin(a.in[0]); }
void sin_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (want[0])
        grad[0] = at::mul(at::cos(a.in[0]), g);
}

at::Tensor cos_fwd(const Args &a) { return at::cos(a.in[0]); }
void cos_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (want[0]) // LibTorch's sin * (-1), then * g
        grad[0] = at::mul(at::mul(at::sin(a.in[0]), -1.0), g);
}

// safeLog: log(softplus(x) + eps), eps passed through as given.
at::Tensor safe_log_fwd(const Args &a) {
    return at::log(at::add(softplus_of(a, a.in[0]), a.p->eps));
}
void safe_log_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (!want[0])
        return;
    const at::Tensor &x = a.in[0];
    at::Tensor s = at::add(softplus_of(a, x), a.p->eps);
    grad[0] = at::mul(at::div(at::sigmoid(x), s), g);
}

const OpEntry kOps[] = {
    // name, report_name, min_in, max_in, fwd, vjp, vjp_mode, note
    {"relu", "relu", 1, 1, relu_fwd, relu_vjp, VJP_BACKEND,
     "at::relu keeps a NaN input (TorchLean's CUDA capsule gives 0); threshold_backward passes "
     "g at a NaN x, so its gradient is masked_fill(isnan(x), 0) (the contract gives 0)"},
    {"gelu", "gelu", 1, 1, gelu_fwd, gelu_vjp, VJP_BACKEND,
     "approximate=\"tanh\" for gelu and gelu_backward (ATen's default is the erf form)"},
    {"sigmoid", "sigmoid", 1, 1, sigmoid_fwd, sigmoid_vjp, VJP_BACKEND,
     "sigmoid_backward on y recomputed from x"},
    {"silu", "silu", 1, 1, silu_fwd, silu_vjp, VJP_BACKEND, nullptr},
    {"tanh", "tanh", 1, 1, tanh_fwd, tanh_vjp, VJP_BACKEND,
     "tanh_backward on y recomputed from x"},
    {"softplus", "softplus", 1, 1, softplus_fwd, softplus_vjp, VJP_TAPE,
     "composed fmax(x,0) + log(1 + exp(-|x|)) (beta 1, no threshold; at::softplus thresholds at "
     "20 and overflows without it); VJP sigmoid(x)*g"},
    {"exp", "exp", 1, 1, exp_fwd, exp_vjp, VJP_TAPE, nullptr},
    {"log", "log", 1, 1, log_fwd, log_vjp, VJP_TAPE,
     "no domain guard in ATen; x <= 0 is rejected by the reference before the provider runs"},
    {"sin", "sin", 1, 1, sin_fwd, sin_vjp, VJP_TAPE, nullptr},
    {"cos", "cos", 1, 1, cos_fwd, cos_vjp, VJP_TAPE, nullptr},
    {"safeLog", "safe_log", 1, 1, safe_log_fwd, safe_log_vjp, VJP_TAPE,
     "log(softplus(x) + eps) with the composed threshold-free softplus; not log(max(x, eps))"},
};

} // namespace

const OpTable activation_table = {"activation", kOps, sizeof kOps / sizeof kOps[0]};

} // namespace ccaten
