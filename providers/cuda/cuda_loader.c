/* cc_cuda_provider() in the capcheck executable: loads libcapcheck_cuda.so (the CUDA providers
 * with cuBLAS, cuDNN, cuFFT and the CUDA runtime, linked into the module) on first use, so that
 * every other command starts without them (cuda_providers.h). Where: $CAPCHECK_CUDA_LIB when
 * set, else beside the executable, else the build folder's (CAPCHECK_CUDA_MODULE). */
#define _GNU_SOURCE
#include "providers/cuda/cuda_providers.h"

#include <dlfcn.h>
#include <stdio.h>

#include "providers/module_path.h"

#ifndef CAPCHECK_CUDA_MODULE
#define CAPCHECK_CUDA_MODULE "libcapcheck_cuda.so"
#endif

typedef const cc_provider *(*cuda_entry_fn)(const char *name, char *msg, size_t msg_len);

const cc_provider *cc_cuda_provider(const char *name, char *msg, size_t msg_len)
{
    char scratch[8];
    if (!msg || !msg_len) {
        msg = scratch;
        msg_len = sizeof scratch;
    }
    if (!cc_cuda_provider_known(name)) {
        snprintf(msg, msg_len, "unknown CUDA provider '%s' (cublas, cublas-tf32, cudnn, cufft)",
                 name ? name : "(null)");
        return NULL;
    }
    char paths[3][PATH_MAX], why[512];
    int n = cc_module_paths("libcapcheck_cuda.so", "CAPCHECK_CUDA_LIB", CAPCHECK_CUDA_MODULE,
                            paths);
    void *sym = cc_module_entry(paths, n, RTLD_NOW | RTLD_LOCAL, "capcheck_cuda_entry", why,
                                sizeof why);
    cuda_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    if (entry)
        return entry(name, msg, msg_len);
    if (why[0])
        snprintf(msg, msg_len, "cannot load the CUDA providers: %s", why);
    else
        snprintf(msg, msg_len, "cannot find the CUDA providers' module %.300s "
                               "(libcapcheck_cuda.so beside the capcheck executable, or "
                               "CAPCHECK_CUDA_LIB): rebuild capcheck",
                 n == 1 ? paths[0] : "libcapcheck_cuda.so");
    return NULL;
}
