/* The entry of libcapcheck_cuda.so, the CUDA providers as a module (cuda_providers.h): what
 * providers/cuda/cuda_loader.c looks up after loading it. */
#include "providers/cuda/cuda_providers.h"

__attribute__((visibility("default"))) const cc_provider *
capcheck_cuda_entry(const char *name, char *msg, size_t msg_len)
{
    return cc_cuda_provider(name, msg, msg_len);
}
