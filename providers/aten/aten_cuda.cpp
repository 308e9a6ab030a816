// The ATen shim's CUDA backend (aten_device.h): device count, selection, synchronise-and-check,
// provenance. Built into the shim only with CAPCHECK_ATEN_CUDA=ON (then it links torch_cuda and
// c10_cuda). Plain C++ against torch's and the toolkit's headers, no nvcc: the default build
// compiles it too (target capcheck_aten_cuda_check, not linked) whenever a CUDA toolkit is
// found, so a compile error here fails every build, not only the GPU machine's.
#ifndef CAPCHECK_ATEN_CUDA
#define CAPCHECK_ATEN_CUDA 1 // this file is the CUDA backend: compiled alone it checks that path
#endif
#include "providers/aten/aten_common.h"
#include "providers/aten/aten_device.h"
#include "providers/provider_util.h"

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>

namespace ccaten::cuda {

namespace {

std::string cuda_error(const std::string &what, cudaError_t e) {
    return what + ": CUDA error " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
}

std::string version_text(long v) { // 13020 -> "13.2"; cuDNN 91002 -> "9.10.2"
    if (v <= 0)
        return "unknown";
    if (v >= 10000 && v < 90000) // CUDA: major * 1000 + minor * 10
        return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
    return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." +
           std::to_string(v % 100); // cuDNN 9: major * 10000 + minor * 100 + patch
}

} // namespace

cc_status init(std::string &why) {
    int count = 0; // a failing call leaves it unset (no driver: cudaErrorInsufficientDriver)
    cudaError_t e = c10::cuda::GetDeviceCount(&count);
    if (e != cudaSuccess)
        (void)cudaGetLastError(); // clear it: nothing else in this process should see it
    char msg[512] = "";
    // no device here: unsupported; a device node the runtime cannot count: a failure
    cc_status st = cc_cuda_device_status(e != cudaSuccess, e == cudaErrorNoDevice,
                                         cudaGetErrorString(e), count, "/dev", msg, sizeof msg);
    if (st != CC_OK) {
        why = msg;
        return st;
    }
    if (!at::globalContext().hasCUDA()) {
        why = "the CUDA runtime sees " + std::to_string(count) +
              " device(s) but ATen's CUDA backend is not loaded (libtorch_cuda.so was not "
              "linked in with --no-as-needed)";
        return CC_FAILED;
    }
    c10::cuda::set_device(0);
    // the context, through ATen's caching allocator (the path every case's tensors take)
    at::Tensor probe = at::empty({1}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, 0));
    if (!probe.is_cuda())
        throw Failed("at::empty on cuda:0 returned a " + probe.device().str() + " tensor");
    sync("creating the CUDA context on device 0");
    why.clear();
    return CC_OK;
}

void sync(const std::string &what) {
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess)
        e = cudaGetLastError();
    if (e == cudaSuccess)
        return;
    std::string m = cuda_error(what, e);
    (void)cudaGetLastError();
    if (cudaDeviceSynchronize() != cudaSuccess) { // still failing: the error is sticky
        std::fprintf(stderr, "capcheck aten: %s; the CUDA context is lost: ending this worker\n",
                     m.c_str());
        std::fflush(stderr);
        std::abort();
    }
    throw Failed(m);
}

std::string describe() {
    const at::CUDAHooksInterface &hooks = at::detail::getCUDAHooks();
    std::string r = "cuda " + version_text(hooks.versionCUDART());
    int drv = 0;
    if (cudaDriverGetVersion(&drv) == cudaSuccess && drv > 0)
        r += "; driver " + version_text(drv);
    else
        r += "; driver none";
    r += "; cudnn ";
    r += hooks.hasCuDNN() ? version_text(hooks.versionCuDNN()) : "none"; // as torch was built
    // cuBLAS as loaded (libtorch_cuda's dependency): looked up at run time, so the shim needs
    // no link against it; its libraryPropertyType values are MAJOR 0, MINOR 1, PATCH 2
    using get_property_fn = int (*)(int, int *);
    auto get = reinterpret_cast<get_property_fn>(dlsym(RTLD_DEFAULT, "cublasGetProperty"));
    int v[3] = {0, 0, 0};
    if (get && get(0, &v[0]) == 0 && get(1, &v[1]) == 0 && get(2, &v[2]) == 0)
        r += "; cublas " + std::to_string(v[0]) + "." + std::to_string(v[1]) + "." +
             std::to_string(v[2]);
    else
        r += "; cublas none (not loaded)";
    int count = 0;
    cudaDeviceProp prop;
    if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0 &&
        cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
        r += std::string("; gpu ") + prop.name + " (sm_" + std::to_string(prop.major) +
             std::to_string(prop.minor) + ")";
    else
        r += "; gpu none (no CUDA device)";
    (void)cudaGetLastError(); // what a failing query left
    return r;
}

} // namespace ccaten::cuda
