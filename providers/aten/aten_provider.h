/* The ATen provider's C surface (the shim itself is C++17 under providers/aten/).
 *
 * cc_aten_provider() is declared in providers/provider.h; this header adds what is specific to
 * the ATen shim and callable from C.
 */
#ifndef CAPCHECK_ATEN_PROVIDER_H
#define CAPCHECK_ATEN_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* provider.h and ref.h have no extern "C" guards of their own: include them with C linkage here,
 * so that C++ code that includes this header first sees cc_aten_provider() as extern "C". */
#include "abi/capcheck_provider.h"

/* One line on how the shim adapts the ATen call to TorchLean's contract for `op` (ref_op.name
 * or its report name), e.g. a parameter pinned to reproduce TorchLean's definition. NULL when the
 * op is a plain ATen call (no adaptation) or when the shim does not implement the op; the string
 * is static. */
const char *cc_aten_note(const char *op);

/* 1 when the shim implements `op` (forward at least), 0 otherwise. */
int cc_aten_has_op(const char *op);

#ifdef __cplusplus
}
#endif

#endif
