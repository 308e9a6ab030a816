/* Name lookup of the CUDA providers (built with CAPCHECK_WITH_CUDA). */
#include "providers/cuda/cuda_providers.h"

#include <stdio.h>
#include <string.h>

const cc_provider *ccu_cublas_provider(int tf32);
const cc_provider *ccu_cufft_provider(void);
#if CAPCHECK_HAVE_CUDNN
const cc_provider *ccu_cudnn_provider(void);
#endif

const cc_provider *cc_cuda_provider(const char *name, char *msg, size_t msg_len)
{
    if (name && !strcmp(name, "cublas"))
        return ccu_cublas_provider(0);
    if (name && !strcmp(name, "cublas-tf32"))
        return ccu_cublas_provider(1);
    if (name && !strcmp(name, "cufft"))
        return ccu_cufft_provider();
    if (name && !strcmp(name, "cudnn")) {
#if CAPCHECK_HAVE_CUDNN
        return ccu_cudnn_provider();
#else
        if (msg && msg_len)
            snprintf(msg, msg_len, "capcheck was built without cuDNN (no cudnn.h / libcudnn "
                                   "found at configure; set CUDNN_ROOT) so there is no provider "
                                   "cudnn");
        return NULL;
#endif
    }
    if (msg && msg_len)
        snprintf(msg, msg_len, "unknown CUDA provider '%s' (cublas, cublas-tf32, cudnn, cufft)",
                 name ? name : "(null)");
    return NULL;
}
