// Normalization (ops.md I): layerNorm over the suffix x.shape[axis:], with ATen's
// native_layer_norm / native_layer_norm_backward (backendVJP).
#include "providers/aten/aten_common.h"

#include <ATen/ops/native_layer_norm.h>
#include <ATen/ops/native_layer_norm_backward.h>

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

const OpEntry kOps[] = {
    {"layerNorm", "layer_norm", 3, 3, layer_norm_fwd, layer_norm_vjp, VJP_BACKEND, nullptr},
};

} // namespace

const OpTable norm_table = {"norm", kOps, sizeof kOps / sizeof kOps[0]};

} // namespace ccaten
