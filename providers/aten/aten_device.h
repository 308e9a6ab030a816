// Internal to the ATen shim: what aten_provider.cpp needs from a device backend beyond ATen's
// device-agnostic API. The CUDA backend is aten_cuda.cpp, built only with CAPCHECK_ATEN_CUDA=ON
// (it links torch_cuda and c10_cuda and calls the CUDA runtime through them); the CPU-only
// build (the default) defines CAPCHECK_ATEN_CUDA=0 and has none of it, so a CUDA case there is
// CC_UNSUPPORTED with one sentence, never a silent run on the CPU.
//
// Why a backend at all: host -> device copies of the harness's strided views, the copy back,
// and the synchronise-and-check after every launch are plain ATen (Tensor::to, copy_,
// as_strided: aten_provider.cpp). Counting devices with the reason a count fails, selecting the
// device, synchronising, telling a sticky error from a recoverable one, and naming the GPU need
// the CUDA runtime: that is this file's interface.
#ifndef CAPCHECK_ATEN_DEVICE_H
#define CAPCHECK_ATEN_DEVICE_H

#include <string>

#include "providers/aten/aten_provider.h" // cc_status

#ifndef CAPCHECK_ATEN_CUDA
#define CAPCHECK_ATEN_CUDA 0
#endif

namespace ccaten::cuda {

#if CAPCHECK_ATEN_CUDA
// Prepare device 0 in this (worker) process. The device count comes from the CUDA runtime
// through c10::cuda::GetDeviceCount with the count initialised to 0: a failing call (no driver:
// cudaErrorInsufficientDriver) or a zero count is CC_UNSUPPORTED "no CUDA device: <reason>" on a
// machine without an NVIDIA device node, CC_FAILED on one with (cc_cuda_device_status).
// Then ATen's CUDA hooks must be registered (libtorch_cuda really loaded: CC_FAILED otherwise),
// device 0 is selected and its context created by a one-element allocation, synchronised and
// checked. Returns CC_OK with why empty, or the status with one sentence in why.
cc_status init(std::string &why);

// cudaDeviceSynchronize, then cudaGetLastError (a launch error not yet reported). Throws
// Failed("<what>: CUDA error <name>: <string>") on an error the context survives. A sticky
// error (illegal address, launch failure: the context is lost, every later call in this process
// would fail) prints that sentence on stderr and aborts the worker: the harness records the
// case as a crash and forks a fresh worker, so no later case inherits a dead context.
void sync(const std::string &what);

// "cuda 13.2; driver 13.0; cudnn 9.10.2; gpu NVIDIA H200 (sm_90)": the CUDA runtime and cuDNN
// libtorch was built with, the driver, device 0 ("gpu none (no CUDA device)" without).
std::string describe();
#endif

} // namespace ccaten::cuda

#endif
