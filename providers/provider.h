/* Kept for plugins written before the provider ABI moved below core/: the ABI is
 * abi/capcheck_provider.h; nothing in this project includes this file (scripts/check-layers). */
#include "../abi/capcheck_provider.h"
