/* A plugin built for a provider ABI this capcheck does not speak: the loader must refuse it. */
#include "abi/capcheck_provider.h"

__attribute__((visibility("default"))) const cc_provider *capcheck_provider_v1(void)
{
    /* version 99: far beyond CC_PROVIDER_ABI_VERSION (test_plugin expects "ABI version 99") */
    static const cc_provider p = {.abi_version = 99, .name = "from-the-future"};
    return &p;
}
