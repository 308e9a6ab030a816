// Softmax family (ops.md D): softmax, logSoftmax over any axis, with ATen's backward kernels.
#include "providers/aten/aten_common.h"

#include <ATen/ops/_log_softmax.h>
#include <ATen/ops/_log_softmax_backward_data.h>
#include <ATen/ops/_softmax.h>
#include <ATen/ops/_softmax_backward_data.h>

namespace ccaten {
namespace {

at::Tensor softmax_fwd(const Args &a) {
    const at::Tensor &x = a.in[0];
    return at::_softmax(x, norm_axis(a.p->axis, x.dim()), /*half_to_float=*/false);
}
void softmax_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (!want[0])
        return;
    const at::Tensor &x = a.in[0];
    int64_t ax = norm_axis(a.p->axis, x.dim());
    at::Tensor y = at::_softmax(x, ax, false);
    grad[0] = at::_softmax_backward_data(g, y, ax, x.scalar_type());
}

at::Tensor log_softmax_fwd(const Args &a) {
    const at::Tensor &x = a.in[0];
    return at::_log_softmax(x, norm_axis(a.p->axis, x.dim()), false);
}
void log_softmax_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (!want[0])
        return;
    const at::Tensor &x = a.in[0];
    int64_t ax = norm_axis(a.p->axis, x.dim());
    at::Tensor y = at::_log_softmax(x, ax, false);
    grad[0] = at::_log_softmax_backward_data(g, y, ax, x.scalar_type());
}

const OpEntry kOps[] = {
    {"softmax", "softmax", 1, 1, softmax_fwd, softmax_vjp, VJP_BACKEND, nullptr},
    {"logSoftmax", "log_softmax", 1, 1, log_softmax_fwd, log_softmax_vjp, VJP_BACKEND, nullptr},
};

} // namespace

const OpTable softmax_table = {"softmax", kOps, sizeof kOps / sizeof kOps[0]};

} // namespace ccaten
