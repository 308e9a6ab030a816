/* Provider plugins: a shared library that exports
 *
 *     const cc_provider *capcheck_provider_v1(void);      (cc_provider_entry_fn)
 *
 * returning a table whose abi_version is CC_PROVIDER_ABI_VERSION (abi/capcheck_provider.h). The
 * library is opened with dlopen(RTLD_NOW | RTLD_LOCAL), so an unresolved symbol is reported at
 * load time, not in the middle of a run, and two plugins never see each other's symbols. The
 * table must stay valid until cc_plugin_close. */
#ifndef CAPCHECK_PLUGIN_H
#define CAPCHECK_PLUGIN_H

#include <stddef.h>

#include "abi/capcheck_provider.h"

#define CC_PLUGIN_ENTRY "capcheck_provider_v1"

typedef struct cc_plugin cc_plugin;

/* Open the library at `path` (a bare file name means ./name, never a search of the loader
 * path) and check its table. Returns the handle, or NULL with one sentence in msg naming the
 * library and what is wrong: missing or unreadable file, not a loadable library, no entry
 * symbol, a NULL table, an ABI version outside CC_PROVIDER_ABI_MIN_VERSION ..
 * CC_PROVIDER_ABI_VERSION, a missing name/forward, a name that is one of capcheck's built-in
 * providers (cc_builtin_providers: a plugin may not take their evidence by name). A version-1
 * table is copied up to vjp_mode only (its compute_roundoff is NULL). */
cc_plugin *cc_plugin_open(const char *path, char *msg, size_t msg_len);
/* The same, loading the library first in a child process (its constructors and entry point run
 * there): a crash, an exit or a hang past limit_s seconds (0: CC_PLUGIN_LOAD_LIMIT_S; never less
 * than CC_PLUGIN_LOAD_MIN_S) there is a refusal naming what happened, and the library is never
 * loaded into capcheck. cc_plugin_open is this with limit_s 0. */
#define CC_PLUGIN_LOAD_LIMIT_S 60.0
#define CC_PLUGIN_LOAD_MIN_S 5.0
cc_plugin *cc_plugin_open_within(const char *path, double limit_s, char *msg, size_t msg_len);
const cc_provider *cc_plugin_provider(const cc_plugin *pl);
const char *cc_plugin_path(const cc_plugin *pl);
/* dlclose and free (NULL is fine). The provider table is invalid afterwards. */
void cc_plugin_close(cc_plugin *pl);

/* capcheck's built-in provider names, NULL-terminated: a plugin may not take one of them; and
 * them as one ", "-separated list. */
extern const char *const cc_builtin_providers[];
int cc_is_builtin_provider(const char *name);
void cc_builtin_provider_list(char *buf, size_t n);

/* The provider a command asked for: a plugin when lib is non-NULL (then *plugin receives the
 * handle to close), else a built-in by name ("aten", "reference"). NULL with one sentence in
 * msg when it cannot be had. Does not call init. */
const cc_provider *cc_provider_select(const char *name, const char *lib, cc_plugin **plugin,
                                      char *msg, size_t msg_len);

#endif
