/* Built without OpenBLAS (CAPCHECK_WITH_OPENBLAS=OFF or no libopenblas found at configure). */
#include <stdio.h>

#include "providers/openblas/openblas_provider.h"

const cc_provider *cc_openblas_provider(char *msg, size_t msg_len)
{
    if (msg && msg_len)
        snprintf(msg, msg_len, "capcheck was built without OpenBLAS (install libopenblas-dev and "
                               "configure with -DCAPCHECK_WITH_OPENBLAS=ON)");
    return NULL;
}
