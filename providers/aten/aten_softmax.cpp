// Softmax family (ops.md D): softmax and logSoftmax over any axis with ATen's backward kernels,
// hardMaskedSoftmax in TorchLean's LibTorch recipe, topKMask (Proposal) via a stable sort.
#include "providers/aten/aten_common.h"

#include <ATen/ops/_log_softmax.h>
#include <ATen/ops/_log_softmax_backward_data.h>
#include <ATen/ops/_softmax.h>
#include <ATen/ops/_softmax_backward_data.h>
#include <ATen/ops/any.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/masked_fill.h>
#include <ATen/ops/narrow.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/scatter.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/zeros_like.h>

#include <limits>
#include <tuple>

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

// ---- hardMaskedSoftmax: last axis, mask true = allowed ----------------------------------------
// TorchLean's LibTorch recipe, with one change: scores masked_fill(~allowed, -inf); rows with no
// allowed entry filled with 0 (so softmax sees finite values); row softmax; then
// masked_fill(empty row, 0). The recipe also zeroes blocked entries afterwards; the contract
// (ops.md) keeps ordinary arithmetic there (exactly 0 over the row sum), which is what softmax of
// -inf gives: 0 in a finite row, NaN in a row whose allowed scores make the sum NaN. VJP: the row
// softmax backward at the masked output (blocked entries have y = 0, hence 0 gradient).

void check_mask(const Args &a) {
    if (a.in[1].sizes() != a.in[0].sizes())
        throw Failed("mask " + fmt_sizes(a.in[1].sizes()) + " must have the shape of x " +
                     fmt_sizes(a.in[0].sizes()));
}

at::Tensor masked_softmax(const Args &a) {
    check_mask(a);
    const at::Tensor &x = a.in[0];
    at::Tensor allowed = a.in[1].to(at::kBool);
    if (x.dim() == 0) // a scalar: 1 if allowed else 0
        return at::masked_fill(at::ones_like(x), at::logical_not(allowed), 0.0);
    at::Tensor blocked = at::logical_not(allowed);
    at::Tensor empty_row = at::logical_not(at::any(allowed, -1, /*keepdim=*/true));
    at::Tensor s = at::masked_fill(x, blocked, -std::numeric_limits<double>::infinity());
    s = at::masked_fill(s, empty_row, 0.0);
    at::Tensor y = at::_softmax(s, -1, false);
    return at::masked_fill(y, empty_row, 0.0);
}

at::Tensor masked_softmax_fwd(const Args &a) { return masked_softmax(a); }
void masked_softmax_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (!want[0])
        return;
    at::Tensor y = masked_softmax(a);
    if (y.dim() == 0) { // the output is constant
        grad[0] = at::zeros_like(y);
        return;
    }
    grad[0] = at::_softmax_backward_data(g, y, -1, y.scalar_type());
}

// ---- topKMask (Proposal): 1 at the k largest entries of each slice, ties to the lower index ---
// at::topk leaves the tie order unspecified; a stable descending sort puts equal values in
// index order, so its first k indices are exactly the contract's winners.

at::Tensor topk_fwd(const Args &a) {
    const at::Tensor &x = a.in[0];
    int64_t k = a.p->k;
    if (k < 0)
        throw Failed("k must be >= 0, got " + std::to_string(k));
    at::Tensor xs = x.dim() == 0 ? x.reshape({1}) : x; // a scalar is one slice of length 1
    int64_t ax = norm_axis(a.p->axis, xs.dim());
    int64_t len = xs.size(ax);
    at::Tensor y;
    if (k == 0 || xs.numel() == 0)
        y = at::zeros_like(xs);
    else if (k >= len)
        y = at::ones_like(xs);
    else {
        at::Tensor idx = std::get<1>(at::sort(xs, /*stable=*/true, ax, /*descending=*/true));
        y = at::scatter(at::zeros_like(xs), ax, at::narrow(idx, ax, 0, k), 1.0);
    }
    return y.reshape(x.sizes());
}
// requiresVJP is false (a piecewise-constant mask): the VJP is zero.
void topk_vjp(const Args &a, const at::Tensor &, const bool *want, at::Tensor *grad) {
    if (want[0])
        grad[0] = at::zeros_like(a.in[0]);
}

const OpEntry kOps[] = {
    {"softmax", "softmax", 1, 1, softmax_fwd, softmax_vjp, VJP_BACKEND, nullptr},
    {"logSoftmax", "log_softmax", 1, 1, log_softmax_fwd, log_softmax_vjp, VJP_BACKEND, nullptr},
    {"hardMaskedSoftmax", "hard_masked_softmax", 2, 2, masked_softmax_fwd, masked_softmax_vjp,
     VJP_BACKEND,
     "TorchLean recipe: masked_fill(~mask,-inf), empty rows filled 0, _softmax, masked_fill("
     "empty,0) (fully blocked row -> 0, not NaN; blocked entries of a row with non-finite "
     "allowed scores stay NaN as in the contract, the recipe would zero them); VJP "
     "_softmax_backward_data on it"},
    {"topKMask", "top_k_mask", 1, 1, topk_fwd, topk_vjp, VJP_NONE,
     "stable descending at::sort + scatter of ones (not at::topk, whose tie order is "
     "unspecified): ties go to the lower index; VJP zero (requiresVJP false)"},
};

} // namespace

const OpTable softmax_table = {"softmax", kOps, sizeof kOps / sizeof kOps[0]};

} // namespace ccaten
