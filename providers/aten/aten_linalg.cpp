// Linear algebra (ops.md G): matmul (torch.matmul semantics) and linear, VJPs composed from
// ATen products ("standard products": torchLeanTape).
#include "providers/aten/aten_common.h"

#include <ATen/ops/linear.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/sum.h>

namespace ccaten {
namespace {

at::Tensor matmul_fwd(const Args &a) { return at::matmul(a.in[0], a.in[1]); }

// dA = g·Bᵀ, dB = Aᵀ·g on the promoted operands (a 1-D A is [1, k], a 1-D B is [k, 1]; g gets
// the matching unit axes back), each summed over the batch axes it was broadcast along.
void matmul_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
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
    {"linear", "linear", 3, 3, linear_fwd, linear_vjp, VJP_TAPE, nullptr},
};

} // namespace

const OpTable linalg_table = {"linalg", kOps, sizeof kOps / sizeof kOps[0]};

} // namespace ccaten
