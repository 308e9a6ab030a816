// Convolution (ops.md J): conv and convTranspose on ONE sample x [C, spatial...] (spatial rank
// 1..3, no batch axis): at::convolution on x.unsqueeze(0), backward at::convolution_backward
// (backendVJP). Adaptations to the contract, each a small rewrite of the call:
//   - dilation 0 (the contract: every tap of that axis reads the same cell; ATen rejects it):
//     the weight is summed over that kernel axis and the axis runs with one tap, dilation 1;
//     the weight gradient is broadcast back over the summed taps;
//   - empty geometries ATen rejects (an empty output, stride 0 or a zero kernel of
//     convTranspose, no input channels or cells): empty output, or the bias broadcast when
//     there is an output but no input term; gradients are zeros and db = sum of g.
#include "providers/aten/aten_common.h"

#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/util/accumulate.h>

#include <tuple>
#include <vector>

namespace ccaten {
namespace {

struct ConvArgs {
    int sr;                                   // spatial rank
    std::vector<int64_t> stride, pad, dil;    // per spatial axis, dilation 0 mapped to 1
    std::vector<int64_t> out_pad;             // zeros
    std::vector<int64_t> summed;              // spatial axes whose taps were summed (dil 0)
    at::Tensor x;                             // [1, C, spatial...]
    at::Tensor w;                             // the weight, taps summed where dil was 0
    bool degenerate;                          // ATen cannot run it: handled by hand
};

ConvArgs conv_args(const Args &a, bool transposed) {
    const ref_params *p = a.p;
    ConvArgs c;
    c.sr = p->spatial;
    if (c.sr < 1 || c.sr > 3)
        throw Failed("spatial rank must be 1, 2 or 3, got " + std::to_string(c.sr));
    const at::Tensor &x = a.in[0], &w = a.in[1], &b = a.in[2];
    if (x.dim() != c.sr + 1 || w.dim() != c.sr + 2 || b.dim() != 1)
        throw Failed("wants x [C, " + std::to_string(c.sr) + " spatial axes], weight of rank " +
                     std::to_string(c.sr + 2) + ", bias [outC]; got " + fmt_sizes(x.sizes()) +
                     ", " + fmt_sizes(w.sizes()) + ", " + fmt_sizes(b.sizes()));
    if (p->groups < 1)
        throw Failed("groups must be >= 1, got " + std::to_string(p->groups));
    c.x = x.unsqueeze(0);
    c.w = w;
    c.degenerate = x.numel() == 0 || w.numel() == 0 || a.out_sizes.empty() ||
                   c10::multiply_integers(a.out_sizes) == 0;
    for (int i = 0; i < c.sr; i++) {
        if (p->kernel[i] != 0 && p->kernel[i] != w.size(i + 2))
            throw Failed("kernel[" + std::to_string(i) + "] = " + std::to_string(p->kernel[i]) +
                         " disagrees with the weight's extent " + std::to_string(w.size(i + 2)));
        c.stride.push_back(p->stride[i]);
        c.pad.push_back(p->pad[i]);
        c.out_pad.push_back(0);
        if (p->stride[i] == 0)
            c.degenerate = true; // convTranspose stride 0: an empty output
        if (p->dil[i] == 0) {
            c.summed.push_back(i + 2);
            c.dil.push_back(1);
        } else {
            c.dil.push_back(p->dil[i]);
        }
    }
    if (!c.summed.empty() && !c.degenerate)
        c.w = at::sum(w, c.summed, /*keepdim=*/true);
    (void)transposed;
    return c;
}

// Probe (see aten_common.h): the same convolution kind and spatial rank on one cell.
void probe_conv(const Args &a, const ConvArgs &c, bool transposed) {
    std::vector<int64_t> shape((size_t)c.sr + 2, 1), one((size_t)c.sr, 1), zero((size_t)c.sr, 0);
    at::Tensor x = at::zeros(shape, a.opts);
    (void)at::convolution(x, x, {}, one, zero, one, transposed, zero, 1);
}

// Output with no input term: the bias at every output position (or an empty tensor).
at::Tensor bias_only(const Args &a) {
    at::Tensor y = at::zeros(a.out_sizes, a.opts);
    if (y.numel() == 0)
        return y;
    std::vector<int64_t> shape(a.out_sizes.size(), 1);
    shape[0] = a.in[2].size(0);
    return a.in[2].reshape(shape).expand(a.out_sizes).clone();
}

at::Tensor conv_fwd_impl(const Args &a, bool transposed) {
    ConvArgs c = conv_args(a, transposed);
    if (c.degenerate) {
        probe_conv(a, c, transposed);
        return bias_only(a);
    }
    at::Tensor y = at::convolution(c.x, c.w, a.in[2], c.stride, c.pad, c.dil, transposed,
                                   c.out_pad, a.p->groups);
    return y.squeeze(0);
}

void conv_vjp_impl(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad,
                   bool transposed) {
    ConvArgs c = conv_args(a, transposed);
    if (c.degenerate) {
        probe_conv(a, c, transposed);
        if (want[0])
            grad[0] = at::zeros_like(a.in[0]);
        if (want[1])
            grad[1] = at::zeros_like(a.in[1]);
        if (want[2]) {
            std::vector<int64_t> spatial;
            for (int i = 1; i < g.dim(); i++)
                spatial.push_back(i);
            grad[2] = g.numel() == 0 ? at::zeros_like(a.in[2]) : at::sum(g, spatial, false);
        }
        return;
    }
    int64_t bias_size = a.in[2].size(0);
    auto r = at::convolution_backward(dense(g).unsqueeze(0), c.x, c.w,
                                      at::IntArrayRef(&bias_size, 1), c.stride, c.pad, c.dil,
                                      transposed, c.out_pad, a.p->groups,
                                      {want[0], want[1], want[2]});
    if (want[0])
        grad[0] = std::get<0>(r).squeeze(0);
    if (want[1]) {
        at::Tensor dw = std::get<1>(r);
        grad[1] = c.summed.empty() ? dw : dw.expand(a.in[1].sizes());
    }
    if (want[2])
        grad[2] = std::get<2>(r);
}

at::Tensor conv_fwd(const Args &a) { return conv_fwd_impl(a, false); }
void conv_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    conv_vjp_impl(a, g, want, grad, false);
}
at::Tensor conv_t_fwd(const Args &a) { return conv_fwd_impl(a, true); }
void conv_t_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    conv_vjp_impl(a, g, want, grad, true);
}

const OpEntry kOps[] = {
    {"conv", "conv", 3, 3, conv_fwd, conv_vjp, VJP_BACKEND,
     "at::convolution / convolution_backward on x.unsqueeze(0); dilation 0 -> taps summed into "
     "one; no input term -> bias broadcast"},
    {"convTranspose", "conv_transpose", 3, 3, conv_t_fwd, conv_t_vjp, VJP_BACKEND,
     "at::convolution(transposed, output_padding 0) / convolution_backward on x.unsqueeze(0); "
     "dilation 0 -> taps summed; stride 0 or empty geometry -> empty or bias"},
};

} // namespace

const OpTable conv_table = {"conv", kOps, sizeof kOps / sizeof kOps[0]};

} // namespace ccaten
