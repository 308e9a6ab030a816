// Normalization (ops.md I): layerNorm over the suffix x.shape[axis:] with ATen's
// native_layer_norm / native_layer_norm_backward; batchNorm on ONE sample [C, spatial...] with
// native_batch_norm / native_batch_norm_backward on the sample given a unit batch axis.
#include "providers/aten/aten_common.h"

#include <ATen/ops/native_layer_norm.h>
#include <ATen/ops/native_layer_norm_backward.h>
#include <ATen/ops/native_batch_norm.h>
#include <ATen/ops/native_batch_norm_backward.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include <tuple>

namespace ccaten {
namespace {

// The ATen CPU kernels index their operands as dense buffers: pass contiguous copies (of
// exactly the values the strided views show; a no-op for a dense view).
struct LayerNormArgs {
    at::Tensor x, gamma, beta;
    at::IntArrayRef shape; // normalized_shape = x.shape[axis:] (refers to x's sizes)
    double eps;
};

LayerNormArgs layer_norm_args(const Args &a) {
    LayerNormArgs r;
    r.x = a.in[0].contiguous();
    int64_t ax = norm_axis(a.p->axis, r.x.dim());
    r.shape = r.x.sizes().slice((size_t)ax);
    if (a.in[1].sizes() != r.shape || a.in[2].sizes() != r.shape)
        throw Failed("gamma " + fmt_sizes(a.in[1].sizes()) + " and beta " +
                     fmt_sizes(a.in[2].sizes()) + " must have the normalized shape " +
                     fmt_sizes(r.shape));
    r.gamma = a.in[1].contiguous();
    r.beta = a.in[2].contiguous();
    r.eps = a.p->eps;
    return r;
}

at::Tensor layer_norm_fwd(const Args &a) {
    LayerNormArgs l = layer_norm_args(a);
    return std::get<0>(at::native_layer_norm(l.x, l.shape, l.gamma, l.beta, l.eps));
}

void layer_norm_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    LayerNormArgs l = layer_norm_args(a);
    at::Tensor y, mean, rstd;
    std::tie(y, mean, rstd) = at::native_layer_norm(l.x, l.shape, l.gamma, l.beta, l.eps);
    auto r = at::native_layer_norm_backward(g.contiguous(), l.x, l.shape, mean, rstd, l.gamma,
                                            l.beta, {true, true, true});
    if (want[0])
        grad[0] = std::get<0>(r);
    if (want[1])
        grad[1] = std::get<1>(r);
    if (want[2])
        grad[2] = std::get<2>(r);
}

// ---- batchNorm ---------------------------------------------------------------------------------
// training != 0: x, gamma, beta; batch statistics over the spatial positions of the one sample
// (one position allowed: zero variance; native_batch_norm has no "more than 1 value per channel"
// check, that one lives in torch.nn.functional). training == 0: x, gamma, beta, running_mean,
// running_var; the running variance is clamped at 0 first (the contract's max(var, 0)).

struct BatchNormArgs {
    at::Tensor x, gamma, beta, rmean, rvar; // x with the unit batch axis: [1, C, spatial...]
    bool training;
    double eps;
};

BatchNormArgs batch_norm_args(const Args &a) {
    BatchNormArgs r;
    r.training = a.p->training != 0;
    want_inputs(a, r.training ? 3 : 5, r.training ? "batchNorm (training)" : "batchNorm (eval)");
    const at::Tensor &x = a.in[0];
    if (x.dim() < 1)
        throw Failed("batchNorm wants x [C, spatial...], got " + fmt_sizes(x.sizes()));
    for (int k = 1; k < a.n; k++)
        if (a.in[k].dim() != 1 || a.in[k].size(0) != x.size(0))
            throw Failed("batchNorm input " + std::to_string(k) + " must be [C] = [" +
                         std::to_string(x.size(0)) + "], got " + fmt_sizes(a.in[k].sizes()));
    r.x = dense(x).unsqueeze(0);
    r.gamma = dense(a.in[1]);
    r.beta = dense(a.in[2]);
    if (!r.training) {
        r.rmean = dense(a.in[3]);
        r.rvar = at::clamp_min(a.in[4], 0.0).contiguous();
    }
    r.eps = a.p->eps;
    return r;
}

// Probe (see aten_common.h): native_batch_norm on one value of one channel.
void probe_batch_norm(const Args &a) {
    at::Tensor one = at::zeros({1}, a.opts);
    (void)at::native_batch_norm(at::zeros({1, 1, 1}, a.opts), one, one, {}, {}, true, 0.0, 1e-5);
}

at::Tensor batch_norm_fwd(const Args &a) {
    BatchNormArgs b = batch_norm_args(a);
    if (b.x.numel() == 0) {
        probe_batch_norm(a);
        return at::zeros_like(a.in[0]);
    }
    at::Tensor y = std::get<0>(at::native_batch_norm(b.x, b.gamma, b.beta, b.rmean, b.rvar,
                                                     b.training, 0.0, b.eps));
    return y.squeeze(0);
}

void batch_norm_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    BatchNormArgs b = batch_norm_args(a);
    if (b.x.numel() == 0) { // nothing to reduce: zero gradients of the right shapes
        probe_batch_norm(a);
        for (int i = 0; i < 3; i++)
            if (want[i])
                grad[i] = at::zeros_like(a.in[i]);
        return;
    }
    at::Tensor y, save_mean, save_invstd;
    std::tie(y, save_mean, save_invstd) = at::native_batch_norm(
        b.x, b.gamma, b.beta, b.rmean, b.rvar, b.training, 0.0, b.eps);
    auto r = at::native_batch_norm_backward(dense(g).unsqueeze(0), b.x, b.gamma, b.rmean, b.rvar,
                                            save_mean, save_invstd, b.training, b.eps,
                                            {want[0], want[1], want[2]});
    if (want[0])
        grad[0] = std::get<0>(r).squeeze(0);
    if (want[1])
        grad[1] = std::get<1>(r);
    if (want[2])
        grad[2] = std::get<2>(r);
}

const OpEntry kOps[] = {
    {"layerNorm", "layer_norm", 3, 3, layer_norm_fwd, layer_norm_vjp, VJP_BACKEND,
     "native_layer_norm over x.shape[axis:] (one-pass variance, no re-centring or clamp)"},
    {"batchNorm", "batch_norm", 3, 5, batch_norm_fwd, batch_norm_vjp, VJP_BACKEND,
     "native_batch_norm(_backward) on x.unsqueeze(0) (one sample), momentum 0; eval clamps "
     "running_var at 0; empty x -> zeros"},
};

} // namespace

const OpTable norm_table = {"norm", kOps, sizeof kOps / sizeof kOps[0]};

} // namespace ccaten
