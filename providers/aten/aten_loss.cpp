// Losses (ops.md H): mseLoss (mse_loss / mse_loss_backward), crossEntropy and distill
// (Proposals, composed around ATen's loss front ends). Each returns a scalar; g is its cotangent.
#include "providers/aten/aten_common.h"

#include <ATen/core/Reduction.h>
#include <ATen/ops/_log_softmax.h>
#include <ATen/ops/_log_softmax_backward_data.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/div.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/kl_div.h>
#include <ATen/ops/mse_loss.h>
#include <ATen/ops/mse_loss_backward.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

namespace ccaten {
namespace {

void same_shapes(const Args &a, const char *op) {
    if (a.in[0].sizes() != a.in[1].sizes())
        throw Failed(std::string(op) + " inputs have shapes " + fmt_sizes(a.in[0].sizes()) +
                     " and " + fmt_sizes(a.in[1].sizes()) + " (same shape required)");
}

at::Tensor scalar_zero(const Args &a) { return at::zeros({}, a.opts); }

// Probes (see aten_common.h) for the empty-input shortcuts: the loss kernel on one element.
void probe_mse(const Args &a) {
    at::Tensor z = at::zeros({1}, a.opts);
    (void)at::mse_loss(z, z, at::Reduction::Mean);
}
void probe_ce(const Args &a) {
    at::Tensor z = at::zeros({1, 1}, a.opts);
    (void)at::cross_entropy_loss(z, z, {}, at::Reduction::Mean, -100, 0.0);
}
void probe_kl(const Args &a) {
    at::Tensor z = at::zeros({1}, a.opts);
    (void)at::kl_div(at::_log_softmax(z, 0, false), z, at::Reduction::Sum, true);
}

// ---- mseLoss: mean of squared residuals; an empty tensor gives 0 (ATen's mean: NaN) ---------

at::Tensor mse_fwd(const Args &a) {
    same_shapes(a, "mseLoss");
    if (a.in[0].numel() == 0) {
        probe_mse(a);
        return scalar_zero(a);
    }
    return at::mse_loss(a.in[0], a.in[1], at::Reduction::Mean);
}
void mse_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    same_shapes(a, "mseLoss");
    if (a.in[0].numel() == 0) {
        probe_mse(a);
        for (int i = 0; i < 2; i++)
            if (want[i])
                grad[i] = at::zeros_like(a.in[i]);
        return;
    }
    at::Tensor d = at::mse_loss_backward(g, a.in[0], a.in[1], at::Reduction::Mean);
    if (want[0])
        grad[0] = d;
    if (want[1]) // LibTorch's dyhat * (-1)
        grad[1] = at::neg(d);
}

// ---- shared by crossEntropy and distill: the class axis and the slice count S ------------------

struct ClassAxis {
    int64_t ax;
    double S; // slices off the class axis (meanDenominator: 1 when there are none)
};

ClassAxis class_axis(const Args &a, const char *op) {
    same_shapes(a, op);
    const at::Tensor &x = a.in[0];
    if (x.dim() == 0)
        throw Failed(std::string(op) + " needs a class axis (rank >= 1)");
    ClassAxis c{norm_axis(a.p->axis, x.dim()), 1.0};
    int64_t C = x.size(c.ax);
    int64_t slices = C > 0 ? x.numel() / C : 0;
    if (C == 0) { // numel is 0: count the other extents directly
        slices = 1;
        for (int64_t i = 0; i < x.dim(); i++)
            if (i != c.ax)
                slices *= x.size(i);
    }
    c.S = slices > 0 ? (double)slices : 1.0;
    return c;
}

// ---- crossEntropy (Proposal b): -(sum target * logSoftmax(logits, axis)) / S ------------------
// Forward: ATen's cross_entropy_loss with probability targets (mean reduction divides by
// numel / C = S) on the class axis moved to dim 1. VJP along ATen's autograd route:
// d logp = -t g / S, then _log_softmax_backward_data.

at::Tensor ce_fwd(const Args &a) {
    ClassAxis c = class_axis(a, "crossEntropy");
    const at::Tensor &z = a.in[0], &t = a.in[1];
    if (z.numel() == 0) {
        probe_ce(a);
        return scalar_zero(a);
    }
    if (z.dim() == 1)
        return at::cross_entropy_loss(z, t, {}, at::Reduction::Mean, -100, 0.0);
    return at::cross_entropy_loss(z.movedim(c.ax, 1), t.movedim(c.ax, 1), {},
                                  at::Reduction::Mean, -100, 0.0);
}
void ce_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    ClassAxis c = class_axis(a, "crossEntropy");
    if (!want[0])
        return;
    const at::Tensor &z = a.in[0], &t = a.in[1];
    if (z.numel() == 0) {
        probe_ce(a);
        grad[0] = at::zeros_like(z);
        return;
    }
    at::Tensor logp = at::_log_softmax(z, c.ax, false);
    at::Tensor dlogp = at::mul(at::neg(t), at::div(g, c.S));
    grad[0] = at::_log_softmax_backward_data(dlogp, logp, c.ax, logp.scalar_type());
}

// ---- distill (Proposal): T^2 / S * sum KL(softmax(t/T) || softmax(s/T)) ------------------------
// Forward: kl_div(log_softmax(s/T), log_softmax(t/T), reduction=sum, log_target=true) * T^2 / S
// (ATen's batchmean would divide by size(0), not by the slice count S). VJP along ATen's
// autograd route: d b = -exp(a) g T^2 / S, _log_softmax_backward_data, then / T.

at::Tensor distill_fwd(const Args &a) {
    ClassAxis c = class_axis(a, "distill");
    double T = a.p->temperature;
    if (a.in[0].numel() == 0) {
        probe_kl(a);
        return scalar_zero(a);
    }
    at::Tensor b = at::_log_softmax(at::div(a.in[0], T), c.ax, false);
    at::Tensor q = at::_log_softmax(at::div(a.in[1], T), c.ax, false);
    at::Tensor kl = at::kl_div(b, q, at::Reduction::Sum, /*log_target=*/true);
    return at::mul(at::div(kl, c.S), T * T);
}
void distill_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    ClassAxis c = class_axis(a, "distill");
    if (!want[0])
        return;
    double T = a.p->temperature;
    if (a.in[0].numel() == 0) {
        probe_kl(a);
        grad[0] = at::zeros_like(a.in[0]);
        return;
    }
    at::Tensor b = at::_log_softmax(at::div(a.in[0], T), c.ax, false);
    at::Tensor la = at::_log_softmax(at::div(a.in[1], T), c.ax, false);
    at::Tensor db = at::mul(at::neg(at::exp(la)), at::mul(at::div(g, c.S), T * T));
    grad[0] = at::div(at::_log_softmax_backward_data(db, b, c.ax, b.scalar_type()), T);
}

const OpEntry kOps[] = {
    {"mseLoss", "mse_loss", 2, 2, mse_fwd, mse_vjp, VJP_BACKEND,
     "mse_loss(Mean) / mse_loss_backward; dtarget = -dyhat; an empty input gives 0 (ATen: NaN)"},
    {"crossEntropy", "cross_entropy", 2, 2, ce_fwd, ce_vjp, VJP_TAPE,
     "cross_entropy_loss with probability targets on the class axis moved to dim 1 (mean over "
     "the S slices); empty -> 0; VJP -t*g/S through _log_softmax_backward_data"},
    {"distill", "distill", 2, 2, distill_fwd, distill_vjp, VJP_TAPE,
     "kl_div(log_softmax(s/T), log_softmax(t/T), sum, log_target) * T^2 / S (not batchmean); "
     "VJP composed through _log_softmax_backward_data"},
};

} // namespace

const OpTable loss_table = {"loss", kOps, sizeof kOps / sizeof kOps[0]};

} // namespace ccaten
