// Random sources (ops.md A) and the custom op (ops.md L).
//   randUniform, bernoulliMask: TorchLean's splitmix64 stream reproduced with int64 tensor ops
//     (torch.rand is Philox and cannot match element-wise). Element j: u_j = splitmix64(key + j)
//     mod 2^32 with all arithmetic mod 2^64 (int64 wrap-around) and logical right shifts (ATen's
//     shifts are arithmetic on int64: the sign-extended bits are masked off); u_j / 2^32 in
//     float64, then one rounding to the case dtype. No VJP (requiresVJP false).
//   custom: ops.md L compares a plugin only with its own reference; the one built-in custom op
//     (demo_cube) is composed from at::mul so the custom path runs through this provider too.
#include "providers/aten/aten_common.h"

#include <ATen/ops/add.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/bitwise_and.h>
#include <ATen/ops/bitwise_right_shift.h>
#include <ATen/ops/bitwise_xor.h>
#include <ATen/ops/div.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <c10/util/accumulate.h>

#include <cstring>

namespace ccaten {
namespace {

// A uint64 constant as the int64 with the same bits (what ATen's int64 arithmetic wraps in).
at::Scalar bits(uint64_t v) {
    int64_t s;
    std::memcpy(&s, &v, sizeof s);
    return at::Scalar(s);
}

// z >> s as an unsigned (logical) shift of the 64-bit pattern.
at::Tensor lshr(const at::Tensor &z, int s) {
    return at::bitwise_and(at::bitwise_right_shift(z, s), bits((~0ULL) >> s));
}

// u_j / 2^32 in float64 for j = 0..N-1 of the stream `key`, shaped like the output.
at::Tensor stream(const Args &a) {
    int64_t N = c10::multiply_integers(a.out_sizes);
    at::Tensor z = at::add(at::arange(N, a.long_opts()), bits(a.p->rng_seed)); // key + j
    z = at::add(z, bits(0x9e3779b97f4a7c15ULL));
    z = at::mul(at::bitwise_xor(z, lshr(z, 30)), bits(0xbf58476d1ce4e5b9ULL));
    z = at::mul(at::bitwise_xor(z, lshr(z, 27)), bits(0x94d049bb133111ebULL));
    z = at::bitwise_xor(z, lshr(z, 31));
    at::Tensor u = at::bitwise_and(z, bits(0xffffffffULL));
    return at::div(u.to(at::kDouble), 4294967296.0).reshape(a.out_sizes);
}

void check_target(const Args &a) {
    const ref_shape &t = a.p->target;
    if (at::IntArrayRef(t.dim, (size_t)(t.rank > 0 ? t.rank : 0)) != a.out_sizes)
        throw Failed("the output buffer " + fmt_sizes(a.out_sizes) +
                     " does not have the target shape (to=)");
}

at::Tensor rand_uniform_fwd(const Args &a) {
    check_target(a);
    return stream(a).to(a.dtype);
}

// !(p > 0) (NaN too) -> 0; !(1 > p) -> 1; else 1 where p > u_j / 2^32, compared in float64.
at::Tensor bernoulli_mask_fwd(const Args &a) {
    check_target(a);
    double p = a.p->keep_prob;
    if (!(p > 0))
        return at::zeros(a.out_sizes, a.opts);
    if (!(1 > p))
        return at::ones(a.out_sizes, a.opts);
    return at::lt(stream(a), p).to(a.dtype);
}

// ---- custom -----------------------------------------------------------------------------------

bool is_demo_cube(const Args &a) {
    return std::strncmp(a.p->custom_name, "demo_cube", sizeof a.p->custom_name) == 0;
}

void check_custom(const Args &a) {
    if (!is_demo_cube(a))
        throw Unsupported("custom op '" + std::string(a.p->custom_name, strnlen(a.p->custom_name,
                                                                             sizeof a.p->custom_name)) +
                          "' has no ATen implementation (ops.md L: a plugin is compared with "
                          "its own reference only)");
    want_inputs(a, 1, "demo_cube");
}

at::Tensor custom_fwd(const Args &a) {
    check_custom(a);
    const at::Tensor &x = a.in[0];
    return at::mul(at::mul(x, x), x); // (x x) x
}
void custom_vjp(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad) {
    check_custom(a);
    const at::Tensor &x = a.in[0];
    if (want[0]) // ((3 x) x) g
        grad[0] = at::mul(at::mul(at::mul(x, 3.0), x), g);
}

const OpEntry kOps[] = {
    {"randUniform", "rand_uniform", 0, 0, rand_uniform_fwd, nullptr, VJP_NONE,
     "TorchLean's splitmix64 stream with int64 tensor ops (wrapping mul/add, arithmetic shifts "
     "masked to logical), u/2^32 in f64 then cast; not torch.rand"},
    {"bernoulliMask", "bernoulli_mask", 0, 0, bernoulli_mask_fwd, nullptr, VJP_NONE,
     "the same stream; keep where p > u/2^32 compared in f64 (TorchLean's CUDA capsule compares "
     "in f32); !(p>0) -> 0, !(1>p) -> 1"},
    {"custom", "custom", 1, REF_MAX_INPUTS, custom_fwd, custom_vjp, VJP_TAPE,
     "only the built-in demo_cube ((x*x)*x, VJP ((3x)x)g) via at::mul; plugin ops are compared "
     "with their own reference (unsupported here)"},
};

} // namespace

const OpTable random_table = {"random", kOps, sizeof kOps / sizeof kOps[0]};

} // namespace ccaten
