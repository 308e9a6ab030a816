// Composite ops (ops.md K), all composed from ATen primitives (torchLeanTape):
//   fftFno        at::fft_rfft / at::fft_irfft with the packed (re, im) layout; the spectral
//                 mixing and every adjoint written out in real arithmetic;
//   selectiveScan the sequential left-to-right recurrence (ATen has no scan kernel);
//   attention     bmm + TorchLean's (hard-masked) row softmax + bmm, no SDPA; the VJP through
//                 the products and _softmax_backward_data on the saved probabilities.
#include "providers/aten/aten_common.h"

#include <ATen/ops/_softmax.h>
#include <ATen/ops/_softmax_backward_data.h>
#include <ATen/ops/add.h>
#include <ATen/ops/any.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/fft_irfft.h>
#include <ATen/ops/fft_rfft.h>
#include <ATen/ops/full.h>
#include <ATen/ops/le.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/masked_fill.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/view_as_complex.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include <cmath>
#include <limits>
#include <vector>

namespace ccaten {
namespace {

// ==== fftFno ===================================================================================
// Packed spectra [..., K, 2], K = n/2 + 1; bin k is an endpoint at k = 0 and 2k = n.

// Per-bin weights [K, 2] (re, im) in the case dtype: re = wr(k), im = endpoint ? 0 : wi(k), with
// (wr, wi) = (1, 1) at endpoints scaled by `end`, interior by `mid`.
at::Tensor bin_weights(const Args &a, int64_t K, int64_t n, double end, double mid) {
    at::Tensor k = at::arange(K, a.long_opts());
    at::Tensor endpoint = at::logical_or(at::eq(k, 0), at::eq(at::mul(k, 2), n));
    at::Tensor re = at::where(endpoint, end, at::full({K}, mid, a.opts));
    at::Tensor im = at::where(endpoint, 0.0, at::full({K}, mid, a.opts));
    return at::stack({re, im}, -1);
}

// Packed real [.., K, 2] (dense copy) -> complex [.., K].
at::Tensor to_complex(const at::Tensor &t) { return at::view_as_complex(t.contiguous()); }
at::Tensor to_packed(const at::Tensor &c) { return at::view_as_real(c); }

void check_variant(const Args &a) {
    // probe: ATen's CPU FFT exists for f32/f64 only; let it say so even when the case would not
    // reach a transform (zero modes, empty width)
    (void)at::fft_rfft(at::zeros({2}, a.opts));
    int v = a.p->variant;
    if (v < 0 || v > 2)
        throw Failed("variant must be 0 (spectralConv), 1 (rfft1d) or 2 (irfft1d), got " +
                     std::to_string(v));
    want_inputs(a, v == 0 ? 3 : 1, v == 0 ? "spectralConv" : (v == 1 ? "rfft1d" : "irfft1d"));
}

// spectralConv pieces: X (first `modes` bins of the rfft of every channel, over the grid axis).
struct Spectral {
    int64_t n, w, M, K;
    at::Tensor Xr, Xi; // [M, w]
    at::Tensor Wr, Wi; // [M, w, w]
};

Spectral spectral(const Args &a) {
    Spectral s;
    const at::Tensor &x = a.in[0];
    if (x.dim() != 2 || x.size(0) < 1)
        throw Failed("spectralConv wants x [grid, width], got " + fmt_sizes(x.sizes()));
    s.n = x.size(0);
    s.w = x.size(1);
    s.K = s.n / 2 + 1;
    s.M = a.p->modes;
    if (s.M < 0 || s.M > s.K)
        throw Failed("modes " + std::to_string(s.M) + " is not in 0.." + std::to_string(s.K));
    s.Wr = a.in[1];
    s.Wi = a.in[2];
    if (s.M > 0 && s.w > 0) {
        at::Tensor X = to_packed(at::fft_rfft(x, s.n, 0, "backward")).narrow(0, 0, s.M);
        s.Xr = X.select(-1, 0);
        s.Xi = X.select(-1, 1);
    }
    return s;
}

// [M, w] spectrum halves padded with zero bins to [K, w] and made complex.
at::Tensor pad_bins(const Spectral &s, const at::Tensor &re, const at::Tensor &im) {
    at::Tensor z = at::stack({re, im}, -1);                 // [M, w, 2]
    z = at::constant_pad_nd(z, {0, 0, 0, 0, 0, s.K - s.M}, 0); // [K, w, 2]
    return z;
}

at::Tensor fft_fno_fwd(const Args &a) {
    check_variant(a);
    const at::Tensor &x = a.in[0];
    if (a.p->variant == 1) { // rfft1d: x [B, n] -> [B, K, 2], unnormalized
        if (x.dim() != 2 || x.size(1) < 1)
            throw Failed("rfft1d wants x [batch, n], got " + fmt_sizes(x.sizes()));
        return to_packed(at::fft_rfft(x, x.size(1), 1, "backward"));
    }
    if (a.p->variant == 2) { // irfft1d: z [B, K, 2] -> [B, n], normalized, endpoint imag ignored
        int64_t n = a.p->length;
        if (n < 1 || x.dim() != 3 || x.size(1) != n / 2 + 1 || x.size(2) != 2)
            throw Failed("irfft1d of length " + std::to_string(n) + " wants z [batch, " +
                         std::to_string(n / 2 + 1) + ", 2], got " + fmt_sizes(x.sizes()));
        at::Tensor z = at::mul(x, bin_weights(a, x.size(1), n, 1.0, 1.0));
        return at::fft_irfft(to_complex(z), n, 1, "backward");
    }
    Spectral s = spectral(a);
    if (s.M == 0 || s.w == 0)
        return at::zeros_like(x);
    // Y_k[o] = sum_i X_k[i] (Wr + i Wi)[k, i, o] as batched real products over the bins
    at::Tensor xr = s.Xr.unsqueeze(1), xi = s.Xi.unsqueeze(1); // [M, 1, w]
    at::Tensor Yr = at::sub(at::bmm(xr, s.Wr), at::bmm(xi, s.Wi)).squeeze(1);
    at::Tensor Yi = at::add(at::bmm(xr, s.Wi), at::bmm(xi, s.Wr)).squeeze(1);
    at::Tensor Y = at::mul(pad_bins(s, Yr, Yi), bin_weights(a, s.K, s.n, 1.0, 1.0).unsqueeze(1));
    return at::fft_irfft(to_complex(Y), s.n, 0, "backward");
}

void fft_fno_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    check_variant(a);
    const at::Tensor &x = a.in[0];
    if (a.p->variant == 1) { // rfft adjoint: unnormalized irfft of G (1/m_k, endpoint imag 0)
        if (!want[0])
            return;
        int64_t n = x.size(1), K = n / 2 + 1;
        at::Tensor G = at::mul(g, bin_weights(a, K, n, 1.0, 0.5));
        grad[0] = at::fft_irfft(to_complex(G), n, 1, "forward");
        return;
    }
    if (a.p->variant == 2) { // irfft adjoint: (m_k / n) rfft(g), endpoint imag 0
        if (!want[0])
            return;
        int64_t n = a.p->length, K = n / 2 + 1;
        at::Tensor G = to_packed(at::fft_rfft(g, n, 1, "backward"));
        grad[0] = at::mul(G, bin_weights(a, K, n, 1.0 / (double)n, 2.0 / (double)n));
        return;
    }
    Spectral s = spectral(a);
    if (s.M == 0 || s.w == 0) {
        for (int i = 0; i < 3; i++)
            if (want[i])
                grad[i] = at::zeros_like(a.in[i]);
        return;
    }
    // GY_k = (m_k / n) rfft(g)_k over the grid, endpoint imaginary 0, first M bins [M, w]
    at::Tensor GY = at::mul(to_packed(at::fft_rfft(g, s.n, 0, "backward")),
                            bin_weights(a, s.K, s.n, 1.0 / (double)s.n, 2.0 / (double)s.n)
                                .unsqueeze(1))
                        .narrow(0, 0, s.M);
    at::Tensor gr = GY.select(-1, 0), gi = GY.select(-1, 1);
    at::Tensor xr = s.Xr.unsqueeze(2), xi = s.Xi.unsqueeze(2);   // [M, w, 1]
    at::Tensor gr1 = gr.unsqueeze(1), gi1 = gi.unsqueeze(1);     // [M, 1, w]
    if (want[1]) // dWr[k,i,o] = GYr Xr + GYi Xi
        grad[1] = at::add(at::bmm(xr, gr1), at::bmm(xi, gi1));
    if (want[2]) // dWi[k,i,o] = GYi Xr - GYr Xi
        grad[2] = at::sub(at::bmm(xr, gi1), at::bmm(xi, gr1));
    if (want[0]) {
        at::Tensor gr2 = gr.unsqueeze(2), gi2 = gi.unsqueeze(2); // [M, w, 1]
        // dXr_k[i] = sum_o GYr Wr + GYi Wi; dXi_k[i] = sum_o GYi Wr - GYr Wi
        at::Tensor dXr = at::add(at::bmm(s.Wr, gr2), at::bmm(s.Wi, gi2)).squeeze(2);
        at::Tensor dXi = at::sub(at::bmm(s.Wr, gi2), at::bmm(s.Wi, gr2)).squeeze(2);
        at::Tensor dX = at::mul(pad_bins(s, dXr, dXi),
                                bin_weights(a, s.K, s.n, 1.0, 0.5).unsqueeze(1));
        grad[0] = at::fft_irfft(to_complex(dX), s.n, 0, "forward"); // rfft adjoint
    }
}

// ==== selectiveScan ============================================================================
// h_t = a_t h_{t-1} + b_t x_t, h_{-1} = h0; a, b shared [D] or token-dependent [T, D]. For
// f16/bf16 the recurrence (an accumulation) runs in float32 and each result is rounded once
// (the accumulation contract); the inputs are converted up front.

struct Scan {
    int64_t T, D;
    bool shared;
};

Scan scan_dims(const Args &a) {
    const at::Tensor &A = a.in[0], &B = a.in[1], &x = a.in[2], &h0 = a.in[3];
    if (x.dim() != 2 || h0.dim() != 1 || h0.size(0) != x.size(1) || A.sizes() != B.sizes())
        throw Failed("selectiveScan wants a, b [D] or [T, D], x [T, D], h0 [D]; got " +
                     fmt_sizes(A.sizes()) + ", " + fmt_sizes(B.sizes()) + ", " +
                     fmt_sizes(x.sizes()) + ", " + fmt_sizes(h0.sizes()));
    Scan s{x.size(0), x.size(1), A.dim() == 1};
    if (!(s.shared ? A.size(0) == s.D : A.sizes() == x.sizes()))
        throw Failed("selectiveScan a " + fmt_sizes(A.sizes()) + " is neither [D] nor [T, D]");
    return s;
}

at::Tensor coef(const Scan &s, const at::Tensor &c, int64_t t) {
    return s.shared ? c : c.select(0, t);
}

// The four inputs in the type the recurrence runs in: float32 for f16/bf16, else as they are.
std::vector<at::Tensor> scan_inputs(const Args &a) {
    bool narrow = a.dtype == at::kHalf || a.dtype == at::kBFloat16;
    std::vector<at::Tensor> in;
    for (int i = 0; i < 4; i++)
        in.push_back(narrow ? a.in[i].to(at::kFloat) : a.in[i]);
    return in;
}

// The states h_0..h_{T-1}.
std::vector<at::Tensor> scan_states(const std::vector<at::Tensor> &in, const Scan &s) {
    std::vector<at::Tensor> h;
    at::Tensor prev = in[3];
    for (int64_t t = 0; t < s.T; t++) {
        prev = at::add(at::mul(coef(s, in[0], t), prev),
                       at::mul(coef(s, in[1], t), in[2].select(0, t)));
        h.push_back(prev);
    }
    return h;
}

at::Tensor scan_fwd(const Args &a) {
    Scan s = scan_dims(a);
    if (s.T == 0)
        return at::zeros_like(a.in[2]);
    return at::stack(scan_states(scan_inputs(a), s), 0).to(a.dtype);
}

// G_{T-1} = g_{T-1}, G_t = g_t + a_{t+1} G_{t+1}; da_t = G_t h_{t-1}; db_t = G_t x_t;
// dx_t = G_t b_t; dh0 = G_0 a_0; shared da, db summed over time in reverse order.
void scan_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    Scan s = scan_dims(a);
    if (s.T == 0) {
        for (int i = 0; i < 4; i++)
            if (want[i])
                grad[i] = at::zeros_like(a.in[i]);
        return;
    }
    std::vector<at::Tensor> in = scan_inputs(a);
    std::vector<at::Tensor> h = scan_states(in, s);
    std::vector<at::Tensor> da((size_t)s.T), db((size_t)s.T), dx((size_t)s.T);
    at::Tensor G, sa, sb, gf = g.to(in[2].scalar_type());
    for (int64_t t = s.T - 1; t >= 0; t--) {
        at::Tensor gt = gf.select(0, t);
        G = t + 1 < s.T ? at::add(gt, at::mul(coef(s, in[0], t + 1), G)) : gt;
        at::Tensor hp = t > 0 ? h[(size_t)t - 1] : in[3];
        at::Tensor dat = at::mul(G, hp), dbt = at::mul(G, in[2].select(0, t));
        if (s.shared) {
            sa = t + 1 < s.T ? at::add(sa, dat) : dat;
            sb = t + 1 < s.T ? at::add(sb, dbt) : dbt;
        } else {
            da[(size_t)t] = dat;
            db[(size_t)t] = dbt;
        }
        dx[(size_t)t] = at::mul(G, coef(s, in[1], t));
    }
    if (want[0])
        grad[0] = (s.shared ? sa : at::stack(da, 0)).to(a.dtype);
    if (want[1])
        grad[1] = (s.shared ? sb : at::stack(db, 0)).to(a.dtype);
    if (want[2])
        grad[2] = at::stack(dx, 0).to(a.dtype);
    if (want[3])
        grad[3] = at::mul(G, coef(s, in[0], 0)).to(a.dtype);
}

// ==== attention ================================================================================
// Q [..., nQ, d], K [..., nK, d], V [..., nK, dv] with equal leading axes, folded to one batch
// axis; optional mask [nQ, nK] (true = allowed) broadcast over it; params.causal blocks k > i.
// Logits as TorchLean's capsule: s = 1/sqrt(d) (1 for d = 0); |s| < 1: (sqrt(s) Q)(sqrt(s) K)^T,
// else (Q K^T) s. With any blocking, P is the hard-masked softmax (TorchLean's recipe) and fully
// blocked rows give zero output rows.

struct Attn {
    int64_t B, nQ, nK, d, dv;
    double s;
    bool split; // s < 1: sqrt(s) on both operands
    at::Tensor Q, K, V; // folded [B, n, .]
    at::Tensor allowed, empty_row; // [1, nQ, nK], [1, nQ, 1]; undefined without blocking
};

Attn attn_args(const Args &a) {
    const at::Tensor &q = a.in[0], &k = a.in[1], &v = a.in[2];
    int64_t R = q.dim();
    if (R < 2 || k.dim() != R || v.dim() != R || k.size(-1) != q.size(-1) ||
        v.size(-2) != k.size(-2) || q.sizes().slice(0, R - 2) != k.sizes().slice(0, R - 2) ||
        q.sizes().slice(0, R - 2) != v.sizes().slice(0, R - 2))
        throw Failed("attention wants Q [..., nQ, d], K [..., nK, d], V [..., nK, dv] with "
                     "equal leading axes, got " + fmt_sizes(q.sizes()) + ", " +
                     fmt_sizes(k.sizes()) + ", " + fmt_sizes(v.sizes()));
    Attn t;
    t.nQ = q.size(-2);
    t.nK = k.size(-2);
    t.d = q.size(-1);
    t.dv = v.size(-1);
    t.B = 1;
    for (int64_t i = 0; i + 2 < R; i++)
        t.B *= q.size(i);
    t.s = t.d > 0 ? 1.0 / std::sqrt((double)t.d) : 1.0;
    t.split = std::fabs(t.s) < 1.0;
    t.Q = q.reshape({t.B, t.nQ, t.d});
    t.K = k.reshape({t.B, t.nK, t.d});
    t.V = v.reshape({t.B, t.nK, t.dv});
    bool masked = a.n == 4, causal = a.p->causal != 0;
    if (masked || causal) {
        at::Tensor allowed = at::ones({t.nQ, t.nK}, a.opts.dtype(at::kBool));
        if (masked) {
            const at::Tensor &m = a.in[3];
            if (m.dim() != 2 || m.size(0) != t.nQ || m.size(1) != t.nK)
                throw Failed("attention mask must be [nQ, nK] = [" + std::to_string(t.nQ) +
                             ", " + std::to_string(t.nK) + "], got " + fmt_sizes(m.sizes()));
            allowed = m.to(at::kBool);
        }
        if (causal) // key j <= query i, top-left aligned
            allowed = at::logical_and(allowed, at::le(at::arange(t.nK, a.long_opts()).unsqueeze(0),
                                                      at::arange(t.nQ, a.long_opts()).unsqueeze(1)));
        t.allowed = allowed.unsqueeze(0);
        t.empty_row = at::logical_not(at::any(t.allowed, -1, /*keepdim=*/true));
    }
    return t;
}

// The logits' two operands with the scaling folded in as the capsule does.
at::Tensor attn_logits(const Attn &t) {
    if (t.split) {
        double r = std::sqrt(t.s);
        return at::bmm(at::mul(t.Q, r), at::mul(t.K, r).transpose(1, 2));
    }
    return at::mul(at::bmm(t.Q, t.K.transpose(1, 2)), t.s);
}

at::Tensor attn_probs(const Attn &t) {
    at::Tensor S = attn_logits(t);
    if (!t.allowed.defined())
        return at::_softmax(S, -1, false);
    at::Tensor blocked = at::logical_not(t.allowed);
    S = at::masked_fill(S, blocked, -std::numeric_limits<double>::infinity());
    S = at::masked_fill(S, t.empty_row, 0.0);
    return at::masked_fill(at::_softmax(S, -1, false), at::logical_or(blocked, t.empty_row), 0.0);
}

at::Tensor attn_fwd(const Args &a) {
    Attn t = attn_args(a);
    at::Tensor out = at::bmm(attn_probs(t), t.V);
    if (t.empty_row.defined()) // fully blocked rows: zero output (guards 0 * Inf)
        out = at::masked_fill(out, t.empty_row, 0.0);
    return out.reshape(a.out_sizes);
}

void attn_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    Attn t = attn_args(a);
    at::Tensor P = attn_probs(t);
    at::Tensor G = g.reshape({t.B, t.nQ, t.dv});
    if (want[2]) // dV = P^T g
        grad[2] = at::bmm(P.transpose(1, 2), G).reshape(a.in[2].sizes());
    if (!want[0] && !want[1])
        return;
    at::Tensor dP = at::bmm(G, t.V.transpose(1, 2));
    at::Tensor dS = at::_softmax_backward_data(dP, P, -1, P.scalar_type());
    if (t.allowed.defined()) // dP kept only where P is nonzero (blocked, fully blocked rows)
        dS = at::masked_fill(dS, at::logical_or(at::logical_not(t.allowed), t.empty_row), 0.0);
    double r = t.split ? std::sqrt(t.s) : t.s;
    at::Tensor Kf = t.split ? at::mul(t.K, r) : t.K, Qf = t.split ? at::mul(t.Q, r) : t.Q;
    if (t.empty_row.defined()) // a fully blocked row's Q adds nothing to dK (0 * NaN is NaN)
        Qf = at::masked_fill(Qf, t.empty_row, 0.0);
    if (want[0]) { // dQ = s dS K, zero on fully blocked rows whatever K holds
        at::Tensor dQ = at::mul(at::bmm(dS, Kf), r);
        if (t.empty_row.defined())
            dQ = at::masked_fill(dQ, t.empty_row, 0.0);
        grad[0] = dQ.reshape(a.in[0].sizes());
    }
    if (want[1]) // dK = s dS^T Q
        grad[1] = at::mul(at::bmm(dS.transpose(1, 2), Qf), r).reshape(a.in[1].sizes());
}

const OpEntry kOps[] = {
    {"fftFno", "fft_fno", 1, 3, fft_fno_fwd, fft_fno_vjp, VJP_TAPE,
     "at::fft_rfft/fft_irfft (\"backward\"; \"forward\" for the unnormalized adjoints) on "
     "view_as_real/complex packs, endpoint imaginaries zeroed; spectral mixing by real bmm"},
    {"selectiveScan", "selective_scan", 4, 4, scan_fwd, scan_vjp, VJP_TAPE,
     "no ATen scan: sequential recurrence h = a*h + b*x; VJP the reverse recurrence, shared "
     "coefficients summed in reverse time; f16/bf16 run in float32, rounded once"},
    {"attention", "attention", 3, 4, attn_fwd, attn_vjp, VJP_TAPE,
     "bmm + TorchLean's hard-masked softmax + bmm (no SDPA), sqrt(s) split on Q and K when "
     "s < 1; fully blocked rows -> 0 (output and gradients); VJP via _softmax_backward_data"},
};

} // namespace

const OpTable composite_table = {"composite", kOps, sizeof kOps / sizeof kOps[0]};

} // namespace ccaten
