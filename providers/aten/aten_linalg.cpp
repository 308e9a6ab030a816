// Linear algebra (ops.md G): matmul (torch.matmul semantics), scaledMatmul and softmaxMatmul
// (Proposals), linear. VJPs composed from ATen products (torchLeanTape).
#include "providers/aten/aten_common.h"

#include <ATen/ops/_softmax.h>
#include <ATen/ops/_softmax_backward_data.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sum.h>

namespace ccaten {
namespace {

at::Tensor matmul_fwd(const Args &a) { return at::matmul(a.in[0], a.in[1]); }

// dA = g·Bᵀ, dB = Aᵀ·g on the promoted operands (a 1-D A is [1, k], a 1-D B is [k, 1]; g gets
// the matching unit axes back), each summed over the batch axes it was broadcast along.
void matmul_grads(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    const at::Tensor &A = a.in[0], &B = a.in[1];
    if (A.dim() == 0 || B.dim() == 0)
        throw Failed("both operands must be at least 1-D");
    at::Tensor A2 = A.dim() == 1 ? A.unsqueeze(0) : A;  // [..., n, k]
    at::Tensor B2 = B.dim() == 1 ? B.unsqueeze(-1) : B; // [..., k, m]
    at::Tensor g2 = g;
    if (B.dim() == 1)
        g2 = g2.unsqueeze(-1); // restore m = 1
    if (A.dim() == 1)
        g2 = g2.unsqueeze(-2); // restore n = 1
    if (want[0])
        grad[0] = at::matmul(g2, B2.transpose(-2, -1)).sum_to_size(A2.sizes()).reshape(A.sizes());
    if (want[1])
        grad[1] = at::matmul(A2.transpose(-2, -1), g2).sum_to_size(B2.sizes()).reshape(B.sizes());
}

void matmul_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    matmul_grads(a, g, want, grad);
}

// ---- scaledMatmul (Proposal): alpha * (A @ B); VJP alpha g Bᵀ, alpha Aᵀ g ----------------------

at::Tensor scaled_matmul_fwd(const Args &a) {
    return at::mul(at::matmul(a.in[0], a.in[1]), at::Scalar(a.p->alpha));
}
void scaled_matmul_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    matmul_grads(a, g, want, grad);
    for (int i = 0; i < 2; i++)
        if (want[i])
            grad[i] = at::mul(grad[i], at::Scalar(a.p->alpha));
}

// ---- softmaxMatmul (Proposal): softmax(S, -1) @ V, equal leading axes ------------------------
// VJP: dV = Pᵀ g; dP = g Vᵀ; dS = the softmax backward of dP at P (_softmax_backward_data).

void check_smm(const Args &a) {
    const at::Tensor &S = a.in[0], &V = a.in[1];
    if (S.dim() < 2 || V.dim() != S.dim() || S.sizes().slice(0, S.dim() - 2) !=
                                                   V.sizes().slice(0, V.dim() - 2) ||
        S.size(-1) != V.size(-2))
        throw Failed("softmaxMatmul wants S [..., n, m] and V [..., m, d] with equal leading "
                     "axes, got " + fmt_sizes(S.sizes()) + " and " + fmt_sizes(V.sizes()));
}

at::Tensor softmax_matmul_fwd(const Args &a) {
    check_smm(a);
    return at::matmul(at::_softmax(a.in[0], -1, false), a.in[1]);
}
void softmax_matmul_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    check_smm(a);
    at::Tensor P = at::_softmax(a.in[0], -1, false);
    if (want[0]) {
        at::Tensor dP = at::matmul(g, a.in[1].transpose(-2, -1));
        grad[0] = at::_softmax_backward_data(dP, P, -1, P.scalar_type());
    }
    if (want[1])
        grad[1] = at::matmul(P.transpose(-2, -1), g);
}

// ---- linear ------------------------------------------------------------------------------------

struct LinearDims {
    int64_t out, in, rows; // rows = product of x's leading extents (1 for a 1-D x)
};

LinearDims linear_dims(const Args &a) {
    const at::Tensor &x = a.in[0], &w = a.in[1], &b = a.in[2];
    if (w.dim() != 2 || b.dim() != 1 || x.dim() < 1)
        throw Failed("expects x [..., in], w [out, in], b [out]; got x " +
                     fmt_sizes(x.sizes()) + ", w " + fmt_sizes(w.sizes()) + ", b " +
                     fmt_sizes(b.sizes()));
    LinearDims d{w.size(0), w.size(1), 1};
    if (x.size(-1) != d.in || b.size(0) != d.out)
        throw Failed("x " + fmt_sizes(x.sizes()) + ", w " + fmt_sizes(w.sizes()) +
                     ", b " + fmt_sizes(b.sizes()) + " do not agree");
    for (int64_t i = 0; i + 1 < x.dim(); i++)
        d.rows *= x.size(i);
    return d;
}

at::Tensor linear_fwd(const Args &a) {
    linear_dims(a);
    return at::linear(a.in[0], a.in[1], a.in[2]); // x·wᵀ + b
}

void linear_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    LinearDims d = linear_dims(a);
    const at::Tensor &x = a.in[0], &w = a.in[1];
    if (want[0])
        grad[0] = at::matmul(g, w); // [..., out]·[out, in]
    at::Tensor g2 = g.reshape({d.rows, d.out});
    if (want[1])
        grad[1] = at::mm(g2.t(), x.reshape({d.rows, d.in})); // Σ_rows g ⊗ x
    if (want[2]) {
        int64_t dim0 = 0;
        grad[2] = at::sum(g2, at::IntArrayRef(&dim0, 1), false); // Σ_rows g
    }
}

const OpEntry kOps[] = {
    {"matmul", "matmul", 2, 2, matmul_fwd, matmul_vjp, VJP_TAPE, nullptr},
    {"scaledMatmul", "scaled_matmul", 2, 2, scaled_matmul_fwd, scaled_matmul_vjp, VJP_TAPE,
     "at::matmul then mul by alpha (no split-sqrt scaling)"},
    {"softmaxMatmul", "softmax_matmul", 2, 2, softmax_matmul_fwd, softmax_matmul_vjp, VJP_TAPE,
     "_softmax(S, -1) then at::matmul; VJP composed, softmax part via _softmax_backward_data"},
    {"linear", "linear", 3, 3, linear_fwd, linear_vjp, VJP_TAPE, nullptr},
};

} // namespace

const OpTable linalg_table = {"linalg", kOps, sizeof kOps / sizeof kOps[0]};

} // namespace ccaten
