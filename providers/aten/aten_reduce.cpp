// Reductions (ops.md E): reduceSum and reduceMean over one nonempty axis, dropped (keepdim
// false). VJPs broadcast the cotangent back (torchLeanTape).
#include "providers/aten/aten_common.h"

#include <ATen/ops/div.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/sum.h>

namespace ccaten {
namespace {

// TorchLean reduces a nonempty axis of a rank >= 1 tensor (the reference rejects rank 0).
int64_t reduce_axis(const Args &a) {
    const at::Tensor &x = a.in[0];
    if (x.dim() == 0)
        throw Failed("axis " + std::to_string(a.p->axis) + " is out of range for rank 0");
    int64_t ax = norm_axis(a.p->axis, x.dim());
    if (x.size(ax) == 0)
        throw Failed("axis " + std::to_string(a.p->axis) +
                     " is empty (TorchLean requires a nonempty reduction axis)");
    return ax;
}

at::Tensor reduce_sum_fwd(const Args &a) {
    int64_t ax = reduce_axis(a);
    return at::sum(a.in[0], at::IntArrayRef(&ax, 1), /*keepdim=*/false);
}
void reduce_sum_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    int64_t ax = reduce_axis(a);
    if (want[0]) // broadcast g back along the removed axis
        grad[0] = g.unsqueeze(ax).expand(a.in[0].sizes());
}

at::Tensor reduce_mean_fwd(const Args &a) {
    int64_t ax = reduce_axis(a);
    return at::mean(a.in[0], at::IntArrayRef(&ax, 1), /*keepdim=*/false);
}
void reduce_mean_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    int64_t ax = reduce_axis(a);
    if (want[0]) // g / n, broadcast back
        grad[0] = at::div(g, (double)a.in[0].size(ax)).unsqueeze(ax).expand(a.in[0].sizes());
}

const OpEntry kOps[] = {
    {"reduceSum", "reduce_sum", 1, 1, reduce_sum_fwd, reduce_sum_vjp, VJP_TAPE, nullptr},
    {"reduceMean", "reduce_mean", 1, 1, reduce_mean_fwd, reduce_mean_vjp, VJP_TAPE,
     "at::mean over the (nonempty) axis; VJP g/n broadcast"},
};

} // namespace

const OpTable reduce_table = {"reduce", kOps, sizeof kOps / sizeof kOps[0]};

} // namespace ccaten
