// The ATen provider: the extern "C" surface, the op lookup over the family tables, the
// buffer plumbing (from_blob views of the harness's buffers, result checks, copy-out), the
// device (CPU; CUDA with CAPCHECK_ATEN_CUDA=ON) and the math modes.
//
// Every call runs under c10::InferenceMode on the case's device; no exception crosses the C
// boundary: c10::Error and std::exception become CC_FAILED with ATen's message, or
// CC_UNSUPPORTED when the message says a kernel is "not implemented for" the dtype (or has no
// deterministic implementation while deterministic algorithms are on).
//
// CUDA (CAPCHECK_ATEN_CUDA=1): the harness's buffers are host memory. An input view is copied
// to the device with its layout: the host storage span it covers (gaps of a stride2 view,
// which hold NaN, included) becomes a device buffer of the same size, and the view is rebuilt
// there with as_strided, so the kernels see exactly the strided (or stride-0 broadcast) view the
// CPU path sees, not a compacted copy. Results come back with copy_ into the harness's dense
// host buffer; the device is synchronised and checked for errors after the op body and after
// the copy-back (aten_device.h). A case on a device this build cannot run is CC_UNSUPPORTED:
// there is no CPU fallback.
//
// Math modes (set in init from the environment of the worker, stated by describe, used by
// compute_roundoff; capcheck run --tf32 / --deterministic set the variables):
//   CAPCHECK_TF32=1|0           TF32 for float32 on CUDA: cuBLAS matmul and cuDNN conv
//                               (setAllowTF32CuBLAS / setAllowTF32CuDNN, i.e. fp32_precision
//                               "tf32" or "ieee" of the CUDA matmul and conv ops); default 0.
//                               With it on, f32 cases of the matmul family (matmul,
//                               scaledMatmul, softmaxMatmul, linear, attention, fftFno's
//                               spectral bmm) and of conv/convTranspose on cuda are judged at
//                               TF32's u = 2^-11.
//   CAPCHECK_DETERMINISTIC=1|0  at::globalContext().setDeterministicAlgorithms (error, not
//                               warn, for an op without a deterministic kernel: such a case is
//                               unsupported) and deterministic cuDNN; default 0. On, it also
//                               sets CUBLAS_WORKSPACE_CONFIG=:4096:8 unless already set.
//   CAPCHECK_ATTENTION=NAME     the attention backend. The attention capsule is composed
//                               (bmm + masked softmax + bmm): no SDPA backend is involved, so
//                               only "composed" (or unset) is accepted; any other name fails
//                               init with CC_UNSUPPORTED. describe says "attention composed
//                               (no SDPA)".
// Always: cuDNN benchmark (autotuning) off; cuBLAS fp16/bf16 reduced-precision reductions off.
#include "providers/aten/aten_common.h"
#include "providers/aten/aten_device.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
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

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
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

const char kNoCuda[] = "the ATen provider was built without CUDA (torch_cpu only; configure "
                       "with -DCAPCHECK_ATEN_CUDA=ON against a CUDA libtorch)";

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
        "does not have a deterministic implementation", // deterministic algorithms on
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

// The one place that maps a harness device to an ATen device. Op bodies never name a device
// (they use Args::opts and *_like); wrap_input and store copy host buffers to and from `dev`.
at::Device device_of(cc_device d) {
    switch (d) {
    case CC_CPU: return at::Device(at::kCPU);
#if CAPCHECK_ATEN_CUDA
    case CC_CUDA: return at::Device(at::kCUDA, 0); // init selected device 0
#else
    case CC_CUDA: throw Unsupported(kNoCuda);
#endif
    default: break;
    }
    throw Unsupported(std::string("the ATen provider has no device ") + cc_device_name(d));
}

// Synchronise and check after a launch on dev (a no-op on the CPU).
void sync_after(at::Device dev, const std::string &what) {
#if CAPCHECK_ATEN_CUDA
    if (dev.is_cuda())
        cuda::sync(what);
#else
    (void)dev;
    (void)what;
#endif
}

// After a call on cuda failed (ATen's own launch checks throw "CUDA error: ..."): clear a
// recoverable error so the next case starts clean; a sticky one ends the worker (aten_device.h).
// Only from a catch block; the exception in flight is still the one map_exception reports.
void recover_after_failure(cc_device d) {
#if CAPCHECK_ATEN_CUDA
    if (d != CC_CUDA)
        return;
    try {
        cuda::sync("after the failed call");
    } catch (...) {
    }
#else
    (void)d;
#endif
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

// An ATen view of a harness input: exactly its sizes and element strides (0 = a broadcast
// axis). On the CPU a zero-copy from_blob; on another device the storage span the view covers
// is copied there and the same view is rebuilt over the copy with as_strided (the file's head
// comment). ATen tensors cannot have negative strides.
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
    at::IntArrayRef strides(v.strides, (size_t)v.rank);
    if (dev.is_cpu())
        return at::from_blob(v.data, sizes, strides, opts);
    int64_t span = 1; // elements from [0,...,0] to the last element the view reaches
    for (int d = 0; d < v.rank; d++)
        span += (v.shape[d] - 1) * v.strides[d];
    at::Tensor host = at::from_blob(v.data, {span}, opts.device(at::kCPU));
    at::Tensor buf = host.to(dev, /*non_blocking=*/false, /*copy=*/true); // same span, same bytes
    sync_after(dev, "copying " + what + " to " + dev.str());
    at::Tensor view = buf.as_strided(sizes, strides);
    if (view.device() != dev || view.strides() != strides)
        throw Failed(what + ": the device copy does not have the view's strides");
    return view;
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
    // abi/capcheck_provider.h: outputs are dense row-major. Accept a strides field that says so (or that was
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
    // the harness's buffer is host memory: copy_ from the device is a synchronous transfer
    at::TensorOptions opts = at::TensorOptions().dtype(want).device(at::kCPU);
    at::Tensor out = at::from_blob(dst.data, sizes, at::IntArrayRef(dense, (size_t)dst.rank), opts);
    out.copy_(r);
    sync_after(dev, "copying the " + what + " back from " + dev.str());
}

const ref_params kNoParams{};

Args make_args(const cc_call *call, const at::Tensor *in, at::Device dev, at::IntArrayRef out) {
    at::ScalarType t = scalar_of(call->dtype);
    return Args{call, call->params ? call->params : &kNoParams, call->n_in, in, t, dev,
                at::TensorOptions().dtype(t).device(dev), out};
}

// Checks common to forward and vjp; throws.
void check_call(const cc_call *call, const OpEntry &e) {
    (void)device_of(call->device); // a device this build has no path for: Unsupported
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

// "1" on, "0" or unset off; anything else is refused (a typo must not silently mean off).
int env_flag(const char *name, char *msg, size_t len, bool *on) {
    const char *v = std::getenv(name);
    *on = v && std::strcmp(v, "1") == 0;
    if (!v || !*v || !std::strcmp(v, "0") || !std::strcmp(v, "1"))
        return 0;
    say(msg, len, CC_FAILED, "%s=%s: set it to 1 (on) or 0 (off)", name, v);
    return -1;
}

// The math modes, set explicitly on every init (the file's head comment).
cc_status set_math_modes(char *msg, size_t len) {
    bool tf32 = false, det = false;
    if (env_flag("CAPCHECK_TF32", msg, len, &tf32) ||
        env_flag("CAPCHECK_DETERMINISTIC", msg, len, &det))
        return CC_FAILED;
    const char *attention = std::getenv("CAPCHECK_ATTENTION");
    if (attention && *attention && std::strcmp(attention, "composed") != 0)
        return say(msg, len, CC_UNSUPPORTED,
                   "CAPCHECK_ATTENTION=%s (--attention) cannot be honoured: the ATen attention "
                   "capsule is composed (bmm + masked softmax + bmm) and calls no SDPA backend; "
                   "use composed",
                   attention);
    if (det && !std::getenv("CUBLAS_WORKSPACE_CONFIG")) // cuBLAS's deterministic workspaces
        setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0); // (workers: before any CUDA call)
    // The allow_tf32 setters (torch.backends.cuda.matmul.allow_tf32, cudnn.allow_tf32): in 2.15
    // they set the fp32_precision of the CUDA matmul and conv ops ("tf32" / "ieee"), and they
    // exist in every libtorch this shim may meet on a GPU machine (2.11 there).
    at::Context &ctx = at::globalContext();
    ctx.setAllowTF32CuBLAS(tf32);
    ctx.setAllowTF32CuDNN(tf32);
    ctx.setDeterministicAlgorithms(det, /*warn_only=*/false);
    ctx.setDeterministicCuDNN(det);
    ctx.setBenchmarkCuDNN(false);
    ctx.setAllowFP16ReductionCuBLAS(false);
    ctx.setAllowBF16ReductionCuBLAS(false);
    return CC_OK;
}

bool tf32_matmul() { return at::globalContext().allowTF32CuBLAS(); }
bool tf32_conv() { return at::globalContext().allowTF32CuDNN(); }

cc_status aten_init(void *, cc_device device, char *msg, size_t len) {
    if (device != CC_CPU && device != CC_CUDA)
        return say(msg, len, CC_UNSUPPORTED, "the ATen provider has no device %d", (int)device);
#if !CAPCHECK_ATEN_CUDA
    if (device == CC_CUDA)
        return say(msg, len, CC_UNSUPPORTED, "%s", kNoCuda);
#endif
    try {
        at::set_num_threads(1);
        cc_status st = set_math_modes(msg, len);
        if (st != CC_OK)
            return st;
#if CAPCHECK_ATEN_CUDA
        if (device == CC_CUDA) {
            std::string why;
            st = cuda::init(why);
            if (st != CC_OK)
                return say(msg, len, st, "%s", why.c_str());
        }
#endif
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
        sync_after(dev, "the forward kernels");
        store(r, *out, dev, "output");
        return CC_OK;
    } catch (...) {
        recover_after_failure(call->device);
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
        sync_after(dev, "the VJP kernels");
        for (int i = 0; i < call->n_in; i++)
            if (want[i])
                store(gr[i], grads[i], dev, "gradient of input " + std::to_string(i));
        return CC_OK;
    } catch (...) {
        recover_after_failure(call->device);
        return map_exception(msg, len, call->op);
    }
}

// The word after `marker` in `text` up to one of `stops` ("" when the marker is absent).
std::string word_after(const std::string &text, const char *marker, const char *stops) {
    size_t at = text.find(marker);
    if (at == std::string::npos)
        return "";
    at += std::strlen(marker);
    return text.substr(at, text.find_first_of(stops, at) - at);
}

// What selects ATen's CPU kernels (harness/run/platform.h reads these items): the capability ATen
// dispatches its own kernels to, as it reports it ("AVX512"; ATEN_CPU_CAPABILITY lowers it), the
// oneDNN version (its ISA is derived from the CPU and ONEDNN_MAX_CPU_ISA by the harness: this
// libtorch exports no oneDNN query) and the BLAS.
std::string cpu_dispatch_items() {
    std::string r = "cpu_capability " + at::get_cpu_capability();
    std::string dnn = at::hasMKLDNN() ? word_after(at::get_mkldnn_version(), " v", " ") : "";
    r += "; onednn " + (dnn.empty() ? std::string("none") : dnn);
    std::string blas = word_after(at::show_config(), "BLAS_INFO=", ", \n");
    if (blas == "mkl" && at::hasMKL())
        blas += " " + word_after(at::get_mkl_version(), "Version ", "- ");
    return r + "; blas " + (blas.empty() ? std::string("none") : blas);
}

// The version and commit of the libtorch this process loaded, from the library's own build
// settings (at::show_config: "TORCH_VERSION=2.15.0, ... COMMIT_SHA=d0f2..."), not from the
// headers capcheck was compiled against: the report's libtorch is the library that ran. Falls
// back to the headers' version, saying so, when the library does not state it.
std::string loaded_libtorch() {
    std::string version, commit;
    try {
        const std::string cfg = at::show_config();
        version = word_after(cfg, "TORCH_VERSION=", ", \n");
        commit = word_after(cfg, "COMMIT_SHA=", ", \n");
    } catch (...) {
    }
    // one string appended to, no temporaries joined with +: GCC 12 takes the moves of those
    // for overflows (-Warray-bounds, a false positive once the shim's headers are precompiled)
    std::string s;
    if (version.empty()) {
        s = TORCH_VERSION;
        s += "; libtorch_commit unknown (headers' version: the library states none)";
        return s;
    }
    s = version;
    if (version != TORCH_VERSION)
        s += " (capcheck compiled against " TORCH_VERSION ")";
    s += "; libtorch_commit ";
    s += commit.empty() ? std::string("unknown") : commit.substr(0, 12);
    return s;
}

void aten_describe(void *, char *buf, size_t len) {
    if (!buf || !len)
        return;
    int threads = -1, deterministic = -1, tf32_mm = 0, tf32_cv = 0;
    std::string cuda = "cuda none (torch_cpu only)", dispatch = "cpu_capability unknown";
    const std::string libtorch = loaded_libtorch();
    try {
        dispatch = cpu_dispatch_items();
        threads = at::get_num_threads();
        deterministic = at::globalContext().deterministicAlgorithms() ? 1 : 0;
        tf32_mm = tf32_matmul();
        tf32_cv = tf32_conv();
#if CAPCHECK_ATEN_CUDA
        cuda = cuda::describe();
#endif
    } catch (...) {
    }
    /* "key value" items (harness/report/provenance.h reads them into the report's provenance) */
    const char *tf32;
#if CAPCHECK_ATEN_CUDA
    const char *devices = "cpu,cuda";
    tf32 = tf32_mm && tf32_cv ? "on (cuda f32 matmul and conv, f32 bound at u 2^-11)"
           : tf32_mm || tf32_cv ? "partial (see CAPCHECK_TF32)"
                                  : "off (IEEE f32 matmul and conv on cuda)";
#else
    const char *devices = "cpu";
    tf32 = tf32_mm || tf32_cv ? "off (no CUDA: CAPCHECK_TF32=1 has no effect on cpu)"
                                : "off (no CUDA)";
#endif
    // a libtorch chosen with --libtorch DIR (providers/aten_build.h) is named by its folder too
    const char *dir = std::getenv("CAPCHECK_LIBTORCH");
    std::string from = dir && *dir ? std::string("; libtorch_dir ") + dir : std::string();
    std::snprintf(buf, len,
                  "libtorch %s; threads %d; device %s; %s; tf32 %s; deterministic %s; "
                  "attention composed (no SDPA); %s%s",
                  libtorch.c_str(), threads, devices, cuda.c_str(), tf32,
                  deterministic < 0 ? "unknown" : deterministic ? "on" : "off", dispatch.c_str(),
                  from.c_str());
}

// TF32 (abi/capcheck_provider.h, compute_roundoff): f32 cases on cuda of the ops whose ATen calls go through
// cuBLAS GEMMs (matmul precision) or cuDNN convolutions (conv precision), while TF32 is set.
double aten_compute_roundoff(void *, const char *op, cc_dtype dtype, cc_device device) {
    static const char *const kMatmul[] = {"matmul", "scaledMatmul", "softmaxMatmul",
                                          "linear", "attention",    "fftFno"};
    static const char *const kConv[] = {"conv", "convTranspose"};
    if (dtype != CC_F32 || device != CC_CUDA || !op)
        return 0.0;
    try {
        for (const char *m : kMatmul)
            if (!std::strcmp(op, m))
                return tf32_matmul() ? std::ldexp(1.0, -11) : 0.0;
        for (const char *c : kConv)
            if (!std::strcmp(op, c))
                return tf32_conv() ? std::ldexp(1.0, -11) : 0.0;
    } catch (...) {
    }
    return 0.0;
}

const char *aten_vjp_mode(void *, const char *op) {
    const OpEntry *e = find_op(op);
    return e ? e->vjp_mode : nullptr;
}

const cc_provider kProvider = {
    CC_PROVIDER_ABI_VERSION, "aten", nullptr, aten_init, aten_forward, aten_vjp, aten_describe,
    aten_vjp_mode, aten_compute_roundoff,
};

} // namespace
} // namespace ccaten

/* The module's entry point (providers/aten_loader.c looks it up by this name). */
extern "C" __attribute__((visibility("default"))) const cc_provider *capcheck_aten_entry(void) {
    return &ccaten::kProvider;
}

extern "C" const char *cc_aten_note(const char *op) {
    const ccaten::OpEntry *e = ccaten::find_op(op);
    return e ? e->note : nullptr;
}

extern "C" int cc_aten_has_op(const char *op) { return ccaten::find_op(op) != nullptr; }
