/* Built without the CUDA providers (CAPCHECK_WITH_CUDA=OFF or no CUDA toolkit at configure). */
#include <stdio.h>
#include <string.h>

#include "providers/cuda/cuda_providers.h"

const cc_provider *cc_cuda_provider(const char *name, char *msg, size_t msg_len)
{
    if (msg && msg_len)
        snprintf(msg, msg_len, cc_cuda_provider_known(name)
                                   ? "capcheck was built without the CUDA providers (configure "
                                     "with -DCAPCHECK_WITH_CUDA=ON and a CUDA toolkit) so there "
                                     "is no provider %s"
                                   : "unknown CUDA provider '%s'",
                 name ? name : "(null)");
    return NULL;
}
