// Pooling (ops.md J) on ONE sample x [C, spatial...] (spatial rank 1..3, no batch axis):
//   maxPool   max_pool{2,3}d_with_indices / *_with_indices_backward (padded cells are -inf in
//             ATen, i.e. ignored; strict > keeps the first row-major winner);
//   avgPool   avg_pool{2,3}d / *_backward with count_include_pad = true, no divisor override;
//   smoothMaxPool  no ATen primitive: composed per kernel offset over the zero-padded input.
// The sample gets a unit batch axis; a 1-D pool runs as 2-D with an inserted unit axis (kernel,
// stride 1, padding 0 there). Geometries the contract maps to an empty output (pad > k/2, a zero
// kernel or extent) never reach ATen, which rejects them: the output is empty and the gradient 0.
#include "providers/aten/aten_common.h"

#include <ATen/ops/add.h>
#include <ATen/ops/any.h>
#include <ATen/ops/avg_pool2d.h>
#include <ATen/ops/avg_pool2d_backward.h>
#include <ATen/ops/avg_pool3d.h>
#include <ATen/ops/avg_pool3d_backward.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/div.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/fmax.h>
#include <ATen/ops/fmin.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/log.h>
#include <ATen/ops/max_pool2d_with_indices.h>
#include <ATen/ops/max_pool2d_with_indices_backward.h>
#include <ATen/ops/max_pool3d_with_indices.h>
#include <ATen/ops/max_pool3d_with_indices_backward.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/util/accumulate.h>

#include <cmath>
#include <tuple>
#include <vector>

namespace ccaten {
namespace {

struct PoolArgs {
    int sr;                                // the op's spatial rank
    std::vector<int64_t> kernel, stride, pad; // for the ATen call (1-D: the 2-D form)
    at::Tensor x;                          // [1, C, spatial...] (1-D: [1, C, 1, L]), dense
    bool empty;                            // the output has no element: ATen is not called
};

PoolArgs pool_args(const Args &a) {
    const ref_params *p = a.p;
    PoolArgs r;
    r.sr = p->spatial;
    if (r.sr < 1 || r.sr > 3)
        throw Failed("spatial rank must be 1, 2 or 3, got " + std::to_string(r.sr));
    const at::Tensor &x = a.in[0];
    if (x.dim() != r.sr + 1)
        throw Failed("wants x [C, " + std::to_string(r.sr) + " spatial axes], got " +
                     fmt_sizes(x.sizes()));
    for (int i = 0; i < r.sr; i++)
        if (p->dil[i] != 1)
            throw Failed("pools have dilation 1, dil[" + std::to_string(i) + "] = " +
                         std::to_string(p->dil[i]));
    if (r.sr == 1) {
        r.kernel = {1, p->kernel[0]};
        r.stride = {1, p->stride[0]};
        r.pad = {0, p->pad[0]};
        r.x = dense(x).unsqueeze(0).unsqueeze(2);
    } else {
        r.kernel.assign(p->kernel, p->kernel + r.sr);
        r.stride.assign(p->stride, p->stride + r.sr);
        r.pad.assign(p->pad, p->pad + r.sr);
        r.x = dense(x).unsqueeze(0);
    }
    r.empty = c10::multiply_integers(a.out_sizes) == 0;
    return r;
}

// The pool's output (or cotangent) in the ATen call's layout, and back.
at::Tensor to_call(const PoolArgs &r, const at::Tensor &t) {
    return r.sr == 1 ? dense(t).unsqueeze(0).unsqueeze(2) : dense(t).unsqueeze(0);
}
at::Tensor from_call(const PoolArgs &r, const at::Tensor &t) {
    return r.sr == 1 ? t.squeeze(2).squeeze(0) : t.squeeze(0);
}

const std::vector<int64_t> kDil2 = {1, 1}, kDil3 = {1, 1, 1};

// Probes (see aten_common.h): the pool kernel of this spatial rank on a one-cell input.
enum class PoolKind { Max, Avg };
void probe_pool(const Args &a, const PoolArgs &r, PoolKind k) {
    bool three = r.sr == 3;
    at::Tensor x = at::zeros(three ? std::vector<int64_t>{1, 1, 1, 1, 1}
                                   : std::vector<int64_t>{1, 1, 1, 1},
                             a.opts);
    std::vector<int64_t> one(three ? 3 : 2, 1), zero(three ? 3 : 2, 0);
    if (k == PoolKind::Max)
        (void)(three ? at::max_pool3d_with_indices(x, one, one, zero, kDil3, false)
                     : at::max_pool2d_with_indices(x, one, one, zero, kDil2, false));
    else
        (void)(three ? at::avg_pool3d(x, one, one, zero, false, true, std::nullopt)
                     : at::avg_pool2d(x, one, one, zero, false, true, std::nullopt));
}

// ---- maxPool ---------------------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor> max_pool(const PoolArgs &r) {
    if (r.sr == 3)
        return at::max_pool3d_with_indices(r.x, r.kernel, r.stride, r.pad, kDil3, false);
    return at::max_pool2d_with_indices(r.x, r.kernel, r.stride, r.pad, kDil2, false);
}

// ops.md maxPool: ATen lets a NaN win its window where TorchLean's strict > fold keeps the first
// real cell; NaN inputs are a declared-divergence class, reported unsupported, never compared.
void refuse_nan_input(const Args &a) {
    if (at::any(at::isnan(a.in[0])).item<bool>())
        throw Unsupported("declared divergence (ops.md maxPool): ATen's max pooling lets a NaN "
                          "win its window, TorchLean's strict > fold never lets it displace a "
                          "number");
}

at::Tensor max_pool_fwd(const Args &a) {
    refuse_nan_input(a);
    PoolArgs r = pool_args(a);
    if (r.empty) {
        probe_pool(a, r, PoolKind::Max);
        return at::zeros(a.out_sizes, a.opts);
    }
    return from_call(r, std::get<0>(max_pool(r)));
}
void max_pool_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (!want[0])
        return;
    refuse_nan_input(a);
    PoolArgs r = pool_args(a);
    if (r.empty) {
        probe_pool(a, r, PoolKind::Max);
        grad[0] = at::zeros_like(a.in[0]);
        return;
    }
    at::Tensor idx = std::get<1>(max_pool(r)), gc = to_call(r, g), dx;
    if (r.sr == 3)
        dx = at::max_pool3d_with_indices_backward(gc, r.x, r.kernel, r.stride, r.pad, kDil3,
                                                  false, idx);
    else
        dx = at::max_pool2d_with_indices_backward(gc, r.x, r.kernel, r.stride, r.pad, kDil2,
                                                  false, idx);
    grad[0] = from_call(r, dx);
}

// ---- avgPool ---------------------------------------------------------------------------------
// avg_pool3d (not 2d) refuses an input extent below the kernel even when the padding makes the
// window fit ("input image smaller than kernel size"). With count_include_pad = true a padded
// cell is a zero that counts in the divisor, so padding the input with zeros explicitly and
// pooling with padding 0 is the same map: done only in that case (the gradient is cropped back).

struct AvgCall {
    at::Tensor x;                 // what ATen pools
    std::vector<int64_t> pad;     // the padding it is given
    bool prepadded;
};

AvgCall avg_call(const PoolArgs &r) {
    AvgCall c{r.x, r.pad, false};
    if (r.sr != 3)
        return c;
    for (int i = 0; i < 3; i++)
        c.prepadded = c.prepadded || r.x.size(i + 2) < r.kernel[(size_t)i];
    if (!c.prepadded)
        return c;
    std::vector<int64_t> pads; // constant_pad_nd: last axis first
    for (int i = 2; i >= 0; i--) {
        pads.push_back(r.pad[(size_t)i]);
        pads.push_back(r.pad[(size_t)i]);
    }
    c.x = at::constant_pad_nd(r.x, pads, 0);
    c.pad = {0, 0, 0};
    return c;
}

at::Tensor avg_pool_fwd(const Args &a) {
    PoolArgs r = pool_args(a);
    if (r.empty) {
        probe_pool(a, r, PoolKind::Avg);
        return at::zeros(a.out_sizes, a.opts);
    }
    AvgCall c = avg_call(r);
    at::Tensor y = r.sr == 3 ? at::avg_pool3d(c.x, r.kernel, r.stride, c.pad, false, true,
                                              std::nullopt)
                             : at::avg_pool2d(c.x, r.kernel, r.stride, c.pad, false, true,
                                              std::nullopt);
    return from_call(r, y);
}
void avg_pool_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    if (!want[0])
        return;
    PoolArgs r = pool_args(a);
    if (r.empty) {
        probe_pool(a, r, PoolKind::Avg);
        grad[0] = at::zeros_like(a.in[0]);
        return;
    }
    AvgCall c = avg_call(r);
    at::Tensor gc = to_call(r, g);
    at::Tensor dx = r.sr == 3 ? at::avg_pool3d_backward(gc, c.x, r.kernel, r.stride, c.pad,
                                                        false, true, std::nullopt)
                              : at::avg_pool2d_backward(gc, c.x, r.kernel, r.stride, c.pad,
                                                        false, true, std::nullopt);
    if (c.prepadded)
        for (int i = 0; i < 3; i++)
            dx = dx.narrow(i + 2, r.pad[(size_t)i], r.x.size(i + 2));
    grad[0] = from_call(r, dx);
}

// ---- smoothMaxPool (composed) --------------------------------------------------------------------
// Over the zero-padded input xp, window offset j (row-major over the kernel) is the strided slice
// V_j = xp[:, j + s*o] (o over the output positions). pivot = fmax-fold (beta > 0) or fmin-fold
// (beta < 0) of the V_j seeded with V_0; S = sum_j exp(beta (V_j - pivot)); y = pivot + log(S)
// / beta. VJP: g * exp(beta (V_j - pivot)) / S added back into a zero-padded gradient at the
// same slices, then the padding is cropped (padded cells take no gradient). For f16/bf16 the
// composition runs in float32 and the result is rounded once (the accumulation contract: the
// window sum S and the scattered gradient sums are not folded in the dtype).

struct SmoothGeom {
    int sr;
    std::vector<int64_t> k, s, p, in, out;
    int64_t taps;
};

SmoothGeom smooth_geom(const Args &a) {
    const ref_params *p = a.p;
    SmoothGeom g;
    g.sr = p->spatial;
    if (g.sr < 1 || g.sr > 3 || a.in[0].dim() != g.sr + 1)
        throw Failed("wants x [C, spatial...] with spatial rank 1..3, got " +
                     fmt_sizes(a.in[0].sizes()));
    if (!(std::isfinite(p->beta) && p->beta != 0.0))
        throw Failed("beta must be finite and nonzero");
    g.taps = 1;
    for (int i = 0; i < g.sr; i++) {
        g.k.push_back(p->kernel[i]);
        g.s.push_back(p->stride[i]);
        g.p.push_back(p->pad[i]);
        g.in.push_back(a.in[0].size(i + 1));
        g.out.push_back(a.out_sizes[(size_t)i + 1]);
        g.taps *= p->kernel[i];
    }
    return g;
}

// The slice of a padded [C, spatial...] tensor read by window offset j (flat, row-major).
at::Tensor window(const SmoothGeom &g, const at::Tensor &xp, int64_t j) {
    int64_t off[3] = {0, 0, 0};
    for (int i = g.sr - 1; i >= 0; i--) {
        off[i] = j % g.k[(size_t)i];
        j /= g.k[(size_t)i];
    }
    at::Tensor v = xp;
    for (int i = 0; i < g.sr; i++) {
        int64_t start = off[i], len = g.out[(size_t)i], st = g.s[(size_t)i];
        v = v.slice(i + 1, start, start + (len - 1) * st + 1, st);
    }
    return v;
}

at::Tensor padded(const SmoothGeom &g, const at::Tensor &x) {
    std::vector<int64_t> pads; // constant_pad_nd: last axis first, (before, after) pairs
    for (int i = g.sr - 1; i >= 0; i--) {
        pads.push_back(g.p[(size_t)i]);
        pads.push_back(g.p[(size_t)i]);
    }
    return at::constant_pad_nd(x, pads, 0);
}

struct SmoothState {
    at::Tensor xp, pivot, S;
};

// The dtype the composition computes in: float32 for f16/bf16, else the case's.
at::ScalarType smooth_compute_type(const Args &a) {
    return a.dtype == at::kHalf || a.dtype == at::kBFloat16 ? at::kFloat : a.dtype;
}

SmoothState smooth_state(const Args &a, const SmoothGeom &g) {
    double beta = a.p->beta;
    SmoothState st;
    st.xp = padded(g, a.in[0].to(smooth_compute_type(a)));
    st.pivot = window(g, st.xp, 0);
    for (int64_t j = 1; j < g.taps; j++)
        st.pivot = beta > 0 ? at::fmax(st.pivot, window(g, st.xp, j))
                            : at::fmin(st.pivot, window(g, st.xp, j));
    for (int64_t j = 0; j < g.taps; j++) {
        at::Tensor e = at::exp(at::mul(at::sub(window(g, st.xp, j), st.pivot), beta));
        st.S = j == 0 ? e : at::add(st.S, e);
    }
    return st;
}

at::Tensor smooth_pool_fwd(const Args &a) {
    if (c10::multiply_integers(a.out_sizes) == 0)
        return at::zeros(a.out_sizes, a.opts);
    SmoothGeom g = smooth_geom(a);
    SmoothState st = smooth_state(a, g);
    return at::add(st.pivot, at::div(at::log(st.S), a.p->beta)).to(a.dtype);
}
void smooth_pool_vjp(const Args &a, const at::Tensor &gt, const bool *want, at::Tensor *grad) {
    if (!want[0])
        return;
    if (c10::multiply_integers(a.out_sizes) == 0) {
        grad[0] = at::zeros_like(a.in[0]);
        return;
    }
    SmoothGeom g = smooth_geom(a);
    SmoothState st = smooth_state(a, g);
    double beta = a.p->beta;
    at::Tensor gp = at::zeros_like(st.xp);
    for (int64_t j = 0; j < g.taps; j++) {
        at::Tensor w = at::div(at::exp(at::mul(at::sub(window(g, st.xp, j), st.pivot), beta)),
                               st.S);
        window(g, gp, j).add_(at::mul(gt.to(gp.scalar_type()), w));
    }
    at::Tensor dx = gp;
    for (int i = 0; i < g.sr; i++)
        dx = dx.narrow(i + 1, g.p[(size_t)i], g.in[(size_t)i]);
    grad[0] = dx.to(a.dtype);
}

const OpEntry kOps[] = {
    {"maxPool", "max_pool", 1, 1, max_pool_fwd, max_pool_vjp, VJP_BACKEND,
     "max_pool{2,3}d_with_indices(+_backward) on x.unsqueeze(0), 1-D via a unit axis; ATen pads "
     "with -inf (ignored), first winner on ties, but NaN wins (NaN inputs: unsupported, a "
     "declared divergence); pad > k/2 -> empty"},
    {"smoothMaxPool", "smooth_max_pool", 1, 1, smooth_pool_fwd, smooth_pool_vjp, VJP_TAPE,
     "composed per kernel offset over constant_pad_nd(x, 0): fmax/fmin pivot, "
     "pivot + log(sum exp(beta (v - pivot)))/beta; VJP scattered back, padding cropped; "
     "f16/bf16 composed in float32 and rounded once"},
    {"avgPool", "avg_pool", 1, 1, avg_pool_fwd, avg_pool_vjp, VJP_BACKEND,
     "avg_pool{2,3}d(+_backward) count_include_pad=true, no divisor override, on "
     "x.unsqueeze(0), 1-D via a unit axis; 3-D extent < kernel: zero-padded explicitly (same "
     "map); pad > k/2 -> empty"},
};

} // namespace

const OpTable pool_table = {"pool", kOps, sizeof kOps / sizeof kOps[0]};

} // namespace ccaten
