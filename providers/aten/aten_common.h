// Internal to the ATen shim: the per-op table entry every family file exports, and the
// small helpers the op bodies share. providers/aten/aten_lowering.py states every op body's ATen
// calls again in Python, for the reproducers capcheck writes: change both (test_aten_smoke runs
// every smoke case through both and compares their outputs bit for bit). Only per-op ATen headers are used across the shim
// (TORCH_ASSERT_ONLY_METHOD_OPERATORS makes an accidental <ATen/ATen.h>-style include fail):
// each family file includes <ATen/ops/<op>.h> for exactly the functions it calls.
// The shim's own code is C++17, but libtorch 2.15's headers need C++20 (std::bit_width,
// operator<=>; TorchConfig.cmake puts cxx_std_20 on the torch target): compile it as C++20.
#ifndef CAPCHECK_ATEN_COMMON_H
#define CAPCHECK_ATEN_COMMON_H

#ifndef TORCH_ASSERT_ONLY_METHOD_OPERATORS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#endif
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <stdexcept>
#include <string>

#include "providers/aten/aten_provider.h" // provider.h with C linkage

namespace ccaten {

// Messages of both exceptions are prefixed with the op name by the provider: don't repeat it.
// Thrown by an op body (or a helper) when a case is outside what the shim supports; the provider
// maps it to CC_UNSUPPORTED with the message. Any other exception becomes CC_FAILED.
struct Unsupported : std::runtime_error {
    explicit Unsupported(const std::string &m) : std::runtime_error(m) {}
};
// A contract violation detected by the shim itself (bad axis, wrong arity...): CC_FAILED.
struct Failed : std::runtime_error {
    explicit Failed(const std::string &m) : std::runtime_error(m) {}
};

// One provider call, inputs already wrapped with from_blob (strides honoured, no copy).
// Device handling is centralised here: an op body never names a device; it creates new tensors
// with `opts` (the case dtype on the call's device) or `like` other tensors. Adding CUDA means
// filling `device` (and the wrapping in aten_provider.cpp), not editing the op bodies.
struct Args {
    const cc_call *call;
    const ref_params *p; // never NULL (a zeroed record when the call had none)
    int n;               // number of inputs
    const at::Tensor *in;
    at::ScalarType dtype;    // the case dtype
    at::Device device;       // where the inputs live and new tensors go
    at::TensorOptions opts;  // dtype + device of the case
    // The output's shape as the harness derived it (forward: the output buffer; VJP: the
    // cotangent). Op bodies use it only where ATen cannot produce an output at all (random
    // sources, empty geometries ATen rejects); otherwise ATen's own shape is checked against it.
    at::IntArrayRef out_sizes;
    // Integer options (int64 indices, counters) on the same device.
    at::TensorOptions long_opts() const { return opts.dtype(at::kLong); }
};

// Forward: return the op's output; the provider checks its dtype and shape against the
// harness's output buffer and copies it in.
using FwdFn = at::Tensor (*)(const Args &a);
// VJP: g is the output cotangent (dense); for each i with want[i], set grad[i] to d/d in[i]
// (shape of in[i], case dtype). Entries with !want[i] may be left undefined.
using VjpFn = void (*)(const Args &a, const at::Tensor &g, const bool *want, at::Tensor *grad);

extern const char VJP_BACKEND[];   // "backendVJP": an ATen backward kernel is called
extern const char VJP_TAPE[];      // "torchLeanTape": the VJP is composed from ATen primitives
extern const char VJP_NONE[];      // "none": no reverse rule (requiresVJP = false)

// One op of one family. Widening the shim = one entry in a family file's table.
struct OpEntry {
    const char *name;        // ref_op.name, e.g. "logSoftmax"
    const char *report_name; // BackendOp.name, e.g. "log_softmax" (also accepted on lookup)
    int min_in, max_in;      // accepted input counts
    FwdFn fwd;
    VjpFn vjp;               // NULL: no VJP (vjp_mode must then be VJP_NONE)
    const char *vjp_mode;    // VJP_BACKEND, VJP_TAPE or VJP_NONE
    const char *note;        // how the call adapts ATen to TorchLean's contract; NULL if plain
};

struct OpTable {
    const char *family;
    const OpEntry *ops;
    size_t n;
};

// Family tables (one per aten_<family>.cpp); aten_provider.cpp lists them.
extern const OpTable random_table;     // aten_random.cpp: randUniform, bernoulliMask, custom
extern const OpTable pointwise_table;  // aten_pointwise.cpp: ops.md B
extern const OpTable activation_table; // aten_activation.cpp: ops.md C
extern const OpTable softmax_table;    // aten_softmax.cpp: ops.md D
extern const OpTable reduce_table;     // aten_reduce.cpp: ops.md E
extern const OpTable shape_table;      // aten_shape.cpp: ops.md F
extern const OpTable linalg_table;     // aten_linalg.cpp: ops.md G
extern const OpTable loss_table;       // aten_loss.cpp: ops.md H
extern const OpTable norm_table;       // aten_norm.cpp: ops.md I
extern const OpTable conv_table;       // aten_conv.cpp: ops.md J (conv, convTranspose)
extern const OpTable pool_table;       // aten_pool.cpp: ops.md J (pools)
extern const OpTable composite_table;  // aten_composite.cpp: ops.md K

// ---- helpers shared by op bodies -------------------------------------------------------------

// Normalise an axis for a rank-`rank` tensor: [-rank, rank) -> [0, rank). A rank-0 tensor takes
// axis 0 or -1 (ATen's convention) and any other value is rejected. Throws Failed.
inline int64_t norm_axis(int axis, int64_t rank) {
    int64_t r = rank > 0 ? rank : 1;
    int64_t a = axis < 0 ? axis + r : axis;
    if (a < 0 || a >= r)
        throw Failed("axis " + std::to_string(axis) +
                     " is out of range for rank " + std::to_string(rank));
    return a;
}

// Like norm_axis, but `rank` itself is allowed (a suffix start such as layerNorm's axis).
inline int64_t norm_suffix_axis(int axis, int64_t rank) {
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a > rank)
        throw Failed("axis " + std::to_string(axis) +
                     " is out of range for rank " + std::to_string(rank));
    return a;
}

// "[2, 3]" for messages.
std::string fmt_sizes(at::IntArrayRef s);

// The op's inputs must number exactly n (for entries whose min_in < max_in). Throws Failed.
inline void want_inputs(const Args &a, int n, const char *what) {
    if (a.n != n)
        throw Failed(std::string(what) + " takes " + std::to_string(n) + " inputs, the call has " +
                     std::to_string(a.n));
}

// Where an op body answers without calling its ATen kernel (an empty geometry ATen rejects, a
// zero-mode spectrum...), it first runs that kernel on a one-element input of the case dtype:
// a dtype ATen does not implement then fails the same way it would on real data (CC_UNSUPPORTED
// with ATen's message), never a pass. Family files define their own probe_* helpers.

// Dense row-major copy (a no-op for a dense view): for kernels that index their operands as
// dense buffers, or before a view op that needs a compatible stride pattern.
inline at::Tensor dense(const at::Tensor &t) { return t.contiguous(); }

} // namespace ccaten

#endif
