/* Built instead of providers/aten/ when CAPCHECK_WITH_ATEN=OFF (or no shim sources exist):
 * the ATen provider is absent, and the harness reports that rather than failing to link. */
#include "providers/provider.h"

const cc_provider *cc_aten_provider(void) { return NULL; }
