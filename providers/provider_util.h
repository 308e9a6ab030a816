/* Small helpers the built-in library providers share (OpenBLAS, cuBLAS, cuDNN, cuFFT and their
 * host-side lowerings). */
#ifndef CAPCHECK_PROVIDER_UTIL_H
#define CAPCHECK_PROVIDER_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "abi/capcheck_provider.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Write the sentence into msg (when there is one) and return st: `return cc_say(msg, len,
 * CC_UNSUPPORTED, "...")`. */
cc_status cc_say(char *msg, size_t len, cc_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* 0 <= v <= INT_MAX: the extent fits a library's int argument. */
int cc_fits_int(int64_t v);

/* What the CUDA runtime's device count means for a provider's init (the CUDA providers and the
 * ATen shim pass the outcome of cudaGetDeviceCount: failed, whether its error is
 * cudaErrorNoDevice, the error's text, the count):
 *   CC_OK           count > 0;
 *   CC_UNSUPPORTED  "no CUDA device: <why>": this machine has none (the call failed or found 0,
 *                   and dev_dir holds no NVIDIA device node nvidia0, nvidia1, ...), or the
 *                   runtime says none is visible to this process (CUDA_VISIBLE_DEVICES);
 *   CC_FAILED       a device node is there but the runtime cannot count it (a broken driver or
 *                   runtime on a GPU machine: an error to fix, never a skipped test).
 * dev_dir is "/dev" but for tests. */
cc_status cc_cuda_device_status(int failed, int none_visible, const char *error, int count,
                                const char *dev_dir, char *msg, size_t len);

#ifdef __cplusplus
}
#endif

#endif
