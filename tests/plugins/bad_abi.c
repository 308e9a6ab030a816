/* A plugin built for a provider ABI this capcheck does not speak: the loader must refuse it. */
#include "providers/provider.h"

__attribute__((visibility("default"))) const cc_provider *capcheck_provider_v1(void)
{
    static const cc_provider p = {CC_PROVIDER_ABI_VERSION + 98, "from-the-future", 0, 0, 0, 0,
                                  0, 0};
    return &p;
}
