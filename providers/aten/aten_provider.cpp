// The ATen provider: the extern "C" surface, the op lookup over the family tables, and the
// buffer plumbing (from_blob views of the harness's buffers, result checks, copy-out).
//
// Every call runs under c10::InferenceMode on the CPU device; no exception crosses the C
// boundary: c10::Error and std::exception become CC_FAILED with ATen's message, or
// CC_UNSUPPORTED when the message says a kernel is "not implemented for" the dtype.
#include "providers/aten/aten_common.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/InferenceMode.h>

#if __has_include(<torch/headeronly/version.h>)
#include <torch/headeronly/version.h>
#elif __has_include(<torch/version.h>)
#include <torch/version.h>
#endif
#ifndef TORCH_VERSION
#define TORCH_VERSION "unknown"
#endif

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace ccaten {

const char VJP_BACKEND[] = "backendVJP";
const char VJP_TAPE[] = "torchLeanTape";
const char VJP_NONE[] = "none";

std::string fmt_sizes(at::IntArrayRef s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); i++) {
        if (i)
            r += ", ";
        r += std::to_string(s[i]);
    }
    return r + "]";
}

namespace {

// Every family, in lookup order. A new family file adds one line here.
const OpTable *const kTables[] = {&random_table,  &pointwise_table, &activation_table,
                                  &softmax_table, &reduce_table,    &shape_table,
                                  &linalg_table,  &loss_table,      &norm_table,
                                  &conv_table,    &pool_table,      &composite_table};

const char kNoCuda[] = "the ATen provider was built without CUDA (torch_cpu only)";

const OpEntry *find_op(const char *name) {
    if (!name)
        return nullptr;
    for (const OpTable *t : kTables)
        for (size_t i = 0; i < t->n; i++) {
            const OpEntry &e = t->ops[i];
            if (std::strcmp(e.name, name) == 0 ||
                (e.report_name && std::strcmp(e.report_name, name) == 0))
                return &e;
        }
    return nullptr;
}

cc_status say(char *msg, size_t len, cc_status st, const char *fmt, ...) {
    if (msg && len) {
        va_list ap;
        va_start(ap, fmt);
        std::vsnprintf(msg, len, fmt, ap);
        va_end(ap);
    }
    return st;
}

// One line: ATen messages may span lines (hints, "Exception raised from ..." in what()).
std::string one_line(const char *s) {
    std::string r(s ? s : "");
    for (char &c : r)
        if (c == '\n' || c == '\r' || c == '\t')
            c = ' ';
    while (!r.empty() && r.back() == ' ')
        r.pop_back();
    return r;
}

// ATen's ways of saying that a kernel does not exist for a dtype (dispatch macros: "..." not
// implemented for 'Half'; the FFT front end: Unsupported dtype Half; MKL FFT: doesn't support
// tensors of type: Half; view_as_complex for BFloat16).
bool says_unsupported_dtype(const std::string &m) {
    static const char *const kPhrases[] = {
        "not implemented for", "Unsupported dtype", "unsupported dtype",
        "doesn't support tensors of type",                  // MKL FFT
        "is only supported for half, float and double tensors"}; // view_as_complex
    for (const char *p : kPhrases)
        if (m.find(p) != std::string::npos)
            return true;
    return false;
}

cc_status aten_error(char *msg, size_t len, const char *op, const char *what) {
    std::string m = one_line(what);
    cc_status st = says_unsupported_dtype(m) ? CC_UNSUPPORTED : CC_FAILED;
    return say(msg, len, st, "%s: ATen: %s", op ? op : "?", m.c_str());
}

// The one place that maps a harness device to an ATen device. Adding CUDA: return
// at::Device(at::kCUDA, index) here, drop the refusals in check_call and aten_init, link
// torch_cuda. Op bodies never name a device (they use Args::opts and *_like), and wrap_input /
// store already take `dev`: they assume the harness's buffers live on that device (host-staged
// buffers would instead be copied to / from `dev` in those two functions).
at::Device device_of(cc_device d) {
    switch (d) {
    case CC_CPU: return at::Device(at::kCPU);
    default: break;
    }
    throw Unsupported(std::string("the ATen provider has no device ") + cc_device_name(d));
}

at::ScalarType scalar_of(cc_dtype t) {
    switch (t) {
    case CC_F64: return at::kDouble;
    case CC_F32: return at::kFloat;
    case CC_F16: return at::kHalf;
    case CC_BF16: return at::kBFloat16;
    case CC_I64: return at::kLong;
    case CC_U8: return at::kBool; // harness masks: one byte, 0 or 1
    default: break;
    }
    throw Failed("invalid cc_dtype " + std::to_string((int)t));
}

void check_rank(const cc_view &v, const std::string &what) {
    if (v.rank < 0 || v.rank > REF_MAX_RANK)
        throw Failed(what + " has rank " + std::to_string(v.rank) + " (0.." +
                     std::to_string(REF_MAX_RANK) + " allowed)");
    for (int d = 0; d < v.rank; d++)
        if (v.shape[d] < 0)
            throw Failed(what + " has a negative extent on axis " + std::to_string(d));
}

int64_t numel_of(const cc_view &v) {
    int64_t n = 1;
    for (int d = 0; d < v.rank; d++)
        n *= v.shape[d];
    return n;
}

// A zero-copy ATen view of a harness input: exactly its sizes and element strides (0 = a
// broadcast axis). ATen tensors cannot have negative strides.
at::Tensor wrap_input(const cc_view &v, at::Device dev, const std::string &what) {
    check_rank(v, what);
    at::TensorOptions opts = at::TensorOptions().dtype(scalar_of(v.dtype)).device(dev);
    at::IntArrayRef sizes(v.shape, (size_t)v.rank);
    for (int d = 0; d < v.rank; d++)
        if (v.strides[d] < 0)
            throw Unsupported(what + " has a negative stride on axis " + std::to_string(d) +
                              " (ATen tensors cannot view negative strides)");
    if (numel_of(v) == 0)
        return at::empty(sizes, opts); // no element is ever read; data may be NULL
    if (!v.data)
        throw Failed(what + " has no data");
    return at::from_blob(v.data, sizes, at::IntArrayRef(v.strides, (size_t)v.rank), opts);
}

// Copy an op result into a harness-owned dense buffer, after checking that ATen produced exactly
// the dtype and shape the harness expects (never converting silently).
void store(const at::Tensor &r, const cc_view &dst, at::Device dev, const std::string &what) {
    check_rank(dst, what);
    at::ScalarType want = scalar_of(dst.dtype);
    if (!r.defined())
        throw Failed("ATen produced no " + what);
    if (r.scalar_type() != want)
        throw Failed("ATen returned " + std::string(c10::toString(r.scalar_type())) + " for the " +
                     what + ", the case dtype is " + c10::toString(want));
    if (r.device() != dev)
        throw Failed("ATen returned the " + what + " on " + r.device().str() + ", not " +
                     dev.str());
    at::IntArrayRef sizes(dst.shape, (size_t)dst.rank);
    if (r.sizes() != sizes)
        throw Failed("ATen returned shape " + fmt_sizes(r.sizes()) + " for the " + what +
                     ", the harness expects " + fmt_sizes(sizes));
    // provider.h: outputs are dense row-major. Accept a strides field that says so (or that was
    // left all zero); refuse anything else rather than guess.
    int64_t dense[REF_MAX_RANK];
    bool all_zero = true, is_dense = true;
    for (int d = dst.rank - 1, s = 1; d >= 0; d--) {
        dense[d] = s;
        s *= dst.shape[d] > 0 ? dst.shape[d] : 1;
        if (dst.strides[d] != 0)
            all_zero = false;
        if (dst.shape[d] > 1 && dst.strides[d] != dense[d])
            is_dense = false;
    }
    if (!all_zero && !is_dense)
        throw Failed("the " + what + " buffer is not dense row-major");
    if (numel_of(dst) == 0)
        return;
    if (!dst.data)
        throw Failed("the " + what + " buffer has no data");
    at::TensorOptions opts = at::TensorOptions().dtype(want).device(dev);
    at::Tensor out = at::from_blob(dst.data, sizes, at::IntArrayRef(dense, (size_t)dst.rank), opts);
    out.copy_(r);
}

const ref_params kNoParams{};

Args make_args(const cc_call *call, const at::Tensor *in, at::Device dev, at::IntArrayRef out) {
    at::ScalarType t = scalar_of(call->dtype);
    return Args{call, call->params ? call->params : &kNoParams, call->n_in, in, t, dev,
                at::TensorOptions().dtype(t).device(dev), out};
}

// Checks common to forward and vjp; throws.
void check_call(const cc_call *call, const OpEntry &e) {
    if (call->device != CC_CPU)
        throw Unsupported(kNoCuda);
    if (call->n_in < e.min_in || call->n_in > e.max_in || call->n_in > REF_MAX_INPUTS) {
        std::string want = e.min_in == e.max_in
                               ? std::to_string(e.min_in)
                               : std::to_string(e.min_in) + ".." + std::to_string(e.max_in);
        throw Failed("takes " + want + " inputs, the call has " + std::to_string(call->n_in));
    }
    if (call->n_in > 0 && !call->in)
        throw Failed("the call has no input views");
}

// Map an exception in flight to a status. Only call from a catch block.
cc_status map_exception(char *msg, size_t len, const char *op) {
    const char *o = op ? op : "?";
    try {
        throw;
    } catch (const Unsupported &e) {
        return say(msg, len, CC_UNSUPPORTED, "%s: %s", o, one_line(e.what()).c_str());
    } catch (const Failed &e) {
        return say(msg, len, CC_FAILED, "%s: %s", o, one_line(e.what()).c_str());
    } catch (const c10::Error &e) {
        return aten_error(msg, len, o, e.what_without_backtrace());
    } catch (const std::exception &e) {
        return aten_error(msg, len, o, e.what());
    } catch (...) {
        return say(msg, len, CC_FAILED, "%s: unknown C++ exception", o);
    }
}

cc_status unknown_op(char *msg, size_t len, const char *op) {
    return say(msg, len, CC_UNSUPPORTED, "aten provider has no %s", op ? op : "(null op)");
}

// ---- the cc_provider functions --------------------------------------------------------------

cc_status aten_init(void *, cc_device device, char *msg, size_t len) {
    if (device == CC_CUDA)
        return say(msg, len, CC_UNSUPPORTED, "%s", kNoCuda);
    if (device != CC_CPU)
        return say(msg, len, CC_UNSUPPORTED, "the ATen provider has no device %d", (int)device);
    try {
        at::set_num_threads(1);
        return CC_OK;
    } catch (...) {
        return map_exception(msg, len, "init");
    }
}

cc_status aten_forward(void *, const cc_call *call, cc_view *out, char *msg, size_t len) {
    if (!call || !out)
        return say(msg, len, CC_FAILED, "aten forward: NULL call or output");
    const OpEntry *e = find_op(call->op);
    if (!e)
        return unknown_op(msg, len, call->op);
    try {
        check_call(call, *e);
        c10::InferenceMode guard;
        at::Device dev = device_of(call->device);
        at::Tensor in[REF_MAX_INPUTS];
        for (int i = 0; i < call->n_in; i++)
            in[i] = wrap_input(call->in[i], dev, "input " + std::to_string(i));
        check_rank(*out, "output");
        Args a = make_args(call, in, dev, at::IntArrayRef(out->shape, (size_t)out->rank));
        at::Tensor r = e->fwd(a);
        store(r, *out, dev, "output");
        return CC_OK;
    } catch (...) {
        return map_exception(msg, len, call->op);
    }
}

cc_status aten_vjp(void *, const cc_call *call, const cc_view *g, cc_view *grads, char *msg,
                   size_t len) {
    if (!call || !g)
        return say(msg, len, CC_FAILED, "aten vjp: NULL call or cotangent");
    const OpEntry *e = find_op(call->op);
    if (!e)
        return unknown_op(msg, len, call->op);
    if (!e->vjp)
        return say(msg, len, CC_UNSUPPORTED, "aten provider has no VJP for %s (vjpMode %s)",
                   call->op, e->vjp_mode ? e->vjp_mode : VJP_NONE);
    try {
        check_call(call, *e);
        bool want[REF_MAX_INPUTS] = {false};
        bool any = false;
        for (int i = 0; i < call->n_in; i++) {
            want[i] = grads && grads[i].data != nullptr;
            any = any || want[i];
        }
        if (!any)
            return CC_OK;
        c10::InferenceMode guard;
        at::Device dev = device_of(call->device);
        at::Tensor in[REF_MAX_INPUTS];
        for (int i = 0; i < call->n_in; i++)
            in[i] = wrap_input(call->in[i], dev, "input " + std::to_string(i));
        at::Tensor gt = wrap_input(*g, dev, "cotangent");
        Args a = make_args(call, in, dev, gt.sizes());
        at::Tensor gr[REF_MAX_INPUTS];
        e->vjp(a, gt, want, gr);
        for (int i = 0; i < call->n_in; i++)
            if (want[i])
                store(gr[i], grads[i], dev, "gradient of input " + std::to_string(i));
        return CC_OK;
    } catch (...) {
        return map_exception(msg, len, call->op);
    }
}

void aten_describe(void *, char *buf, size_t len) {
    if (!buf || !len)
        return;
    int threads = -1, deterministic = -1;
    try {
        threads = at::get_num_threads();
        deterministic = at::globalContext().deterministicAlgorithms() ? 1 : 0;
    } catch (...) {
    }
    /* "key value" items (harness/provenance.h reads them into the report's provenance); TF32
     * is a CUDA math mode, and this provider never runs CUDA */
    std::snprintf(buf, len,
                  "libtorch %s; threads %d; device cpu; cuda none (torch_cpu only); tf32 off "
                  "(no CUDA); deterministic %s",
                  TORCH_VERSION, threads,
                  deterministic < 0 ? "unknown" : deterministic ? "on" : "off");
}

const char *aten_vjp_mode(void *, const char *op) {
    const OpEntry *e = find_op(op);
    return e ? e->vjp_mode : nullptr;
}

const cc_provider kProvider = {
    CC_PROVIDER_ABI_VERSION, "aten", nullptr, aten_init, aten_forward, aten_vjp, aten_describe,
    aten_vjp_mode,
};

} // namespace
} // namespace ccaten

extern "C" const cc_provider *cc_aten_provider(void) { return &ccaten::kProvider; }

extern "C" const char *cc_aten_note(const char *op) {
    const ccaten::OpEntry *e = ccaten::find_op(op);
    return e ? e->note : nullptr;
}

extern "C" int cc_aten_has_op(const char *op) { return ccaten::find_op(op) != nullptr; }
