// Shape, view and indexing ops (ops.md F): reshape, permute, broadcast, concat, slice, gather
// (index_select semantics), scatterAdd (index_add semantics). Views are copied out by the
// provider's store; nothing writes through an input view.
#include "providers/aten/aten_common.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/index_add.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/index_select_backward.h>
#include <ATen/ops/narrow.h>
#include <ATen/ops/slice_backward.h>

#include <vector>

namespace ccaten {
namespace {

at::IntArrayRef target_of(const Args &a) {
    const ref_shape &t = a.p->target;
    if (t.rank < 0 || t.rank > REF_MAX_RANK)
        throw Failed("target shape has rank " + std::to_string(t.rank));
    return at::IntArrayRef(t.dim, (size_t)t.rank);
}

// ---- reshape: explicit target, row-major order kept ------------------------------------------

at::Tensor reshape_fwd(const Args &a) { return a.in[0].reshape(target_of(a)); }
void reshape_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (want[0])
        grad[0] = g.reshape(a.in[0].sizes());
}

// ---- permute: output axis i = input axis perm[i] ---------------------------------------------

std::vector<int64_t> perm_of(const Args &a) {
    int64_t r = a.in[0].dim();
    if (a.p->perm_len != r)
        throw Failed("perm has " + std::to_string(a.p->perm_len) + " entries, x has rank " +
                     std::to_string(r));
    std::vector<int64_t> p((size_t)r);
    for (int64_t i = 0; i < r; i++)
        p[(size_t)i] = norm_axis(a.p->perm[i], r);
    return p;
}

at::Tensor permute_fwd(const Args &a) { return a.in[0].permute(perm_of(a)); }
void permute_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (!want[0])
        return;
    std::vector<int64_t> p = perm_of(a), inv(p.size());
    for (size_t i = 0; i < p.size(); i++)
        inv[(size_t)p[i]] = (int64_t)i;
    grad[0] = g.permute(inv);
}

// ---- broadcast: NumPy right-aligned expand; VJP sums over the broadcast axes ------------------

at::Tensor broadcast_fwd(const Args &a) { return a.in[0].expand(target_of(a)); }
void broadcast_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (want[0]) // expand's own adjoint: sum the new leading axes and the expanded unit axes
        grad[0] = g.sum_to_size(a.in[0].sizes());
}

// ---- concat along axis; VJP narrows g back into the pieces -------------------------------------

int64_t concat_axis(const Args &a) {
    if (a.n < 2)
        throw Failed("concat takes at least 2 inputs, the call has " + std::to_string(a.n));
    if (a.in[0].dim() == 0)
        throw Failed("concat needs rank >= 1 inputs");
    return norm_axis(a.p->axis, a.in[0].dim());
}

at::Tensor concat_fwd(const Args &a) {
    int64_t ax = concat_axis(a);
    std::vector<at::Tensor> parts(a.in, a.in + a.n);
    return at::cat(parts, ax);
}
void concat_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    int64_t ax = concat_axis(a), start = 0;
    for (int k = 0; k < a.n; k++) {
        int64_t len = a.in[k].size(ax);
        if (want[k])
            grad[k] = at::narrow(g, ax, start, len);
        start += len;
    }
}

// ---- slice [start, start + count) along axis; VJP ATen's slice_backward ------------------------

struct SliceArgs {
    int64_t ax, start, count;
};

SliceArgs slice_args(const Args &a) {
    const at::Tensor &x = a.in[0];
    if (x.dim() == 0)
        throw Failed("slice needs a rank >= 1 input");
    SliceArgs s{norm_axis(a.p->axis, x.dim()), a.p->start, a.p->count};
    if (s.start < 0 || s.count < 0 || s.start + s.count > x.size(s.ax))
        throw Failed("slice [" + std::to_string(s.start) + ", +" + std::to_string(s.count) +
                     ") does not fit axis extent " + std::to_string(x.size(s.ax)));
    return s;
}

at::Tensor slice_fwd(const Args &a) {
    SliceArgs s = slice_args(a);
    return at::narrow(a.in[0], s.ax, s.start, s.count);
}
void slice_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    SliceArgs s = slice_args(a);
    if (want[0])
        grad[0] = at::slice_backward(g, a.in[0].sizes(), s.ax, s.start, s.start + s.count, 1);
}

// ---- gather = index_select (a 0-d index selects one entry and drops the axis) -----------------

struct GatherArgs {
    int64_t ax;
    at::Tensor idx; // 1-D
    bool select;    // the index was 0-d
};

GatherArgs gather_args(const Args &a) {
    const at::Tensor &x = a.in[0], &idx = a.in[1];
    if (x.dim() == 0)
        throw Failed("gather needs a rank >= 1 input");
    if (idx.dim() > 1)
        throw Failed("the index must be a vector or a scalar, got rank " +
                     std::to_string(idx.dim()));
    return GatherArgs{norm_axis(a.p->axis, x.dim()), idx.reshape({-1}), idx.dim() == 0};
}

at::Tensor gather_fwd(const Args &a) {
    GatherArgs ga = gather_args(a);
    at::Tensor y = at::index_select(a.in[0], ga.ax, ga.idx);
    return ga.select ? y.squeeze(ga.ax) : y;
}
void gather_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    GatherArgs ga = gather_args(a);
    if (want[0]) // scatter-add of g into zeros at the indices (repeats accumulate)
        grad[0] = at::index_select_backward(ga.select ? g.unsqueeze(ga.ax) : g, a.in[0].sizes(),
                                            ga.ax, ga.idx);
}

// ---- scatterAdd = index_add: out = base + source rows added at the indexed positions ----------

int64_t scatter_axis(const Args &a) {
    const at::Tensor &base = a.in[0];
    if (base.dim() == 0)
        throw Failed("scatterAdd needs a rank >= 1 base");
    if (a.in[1].dim() != 1)
        throw Failed("the index must be a vector, got rank " + std::to_string(a.in[1].dim()));
    return norm_axis(a.p->axis, base.dim());
}

at::Tensor scatter_add_fwd(const Args &a) {
    int64_t ax = scatter_axis(a);
    return at::index_add(a.in[0], ax, a.in[1], a.in[2]);
}
void scatter_add_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    int64_t ax = scatter_axis(a);
    if (want[0])
        grad[0] = g;
    if (want[2])
        grad[2] = at::index_select(g, ax, a.in[1]);
}

const OpEntry kOps[] = {
    {"reshape", "reshape", 1, 1, reshape_fwd, reshape_vjp, VJP_TAPE, nullptr},
    {"permute", "permute", 1, 1, permute_fwd, permute_vjp, VJP_TAPE, nullptr},
    {"broadcast", "broadcast", 1, 1, broadcast_fwd, broadcast_vjp, VJP_TAPE,
     "expand to the target; VJP sum_to_size (expand's adjoint; ATen has no backward kernel)"},
    {"concat", "concat", 2, REF_MAX_INPUTS, concat_fwd, concat_vjp, VJP_TAPE, nullptr},
    {"slice", "slice", 1, 1, slice_fwd, slice_vjp, VJP_BACKEND,
     "narrow; VJP at::slice_backward"},
    {"gather", "gather", 2, 2, gather_fwd, gather_vjp, VJP_BACKEND,
     "at::index_select (not at::gather), a 0-d index squeezes the axis; VJP "
     "at::index_select_backward"},
    {"scatterAdd", "scatter_add", 3, 3, scatter_add_fwd, scatter_add_vjp, VJP_TAPE,
     "at::index_add along the axis (not at::scatter_add); VJP g and index_select(g)"},
};

} // namespace

const OpTable shape_table = {"shape", kOps, sizeof kOps / sizeof kOps[0]};

} // namespace ccaten
