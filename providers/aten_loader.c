/* cc_aten_provider(): the ATen shim is a library of its own (libcapcheck_aten.so, built beside
 * capcheck), loaded the first time a command asks for it. libtorch's start (its operator
 * registrations: about 0.3 s and 165 MB here) is then paid only by runs on ATen, once, in the
 * process that asks: `capcheck run` asks in the parent before it forks its workers, which
 * share the loaded library. Loading registers libtorch's operators and nothing more: no CUDA
 * context, and ATen's CPU dispatch level (ATEN_CPU_CAPABILITY) and oneDNN's ISA are read at
 * their first kernel call, in each worker, so a worker may still set its own before its init.
 *
 * Where: $CAPCHECK_ATEN_LIB when set (and then nowhere else), else, with $CAPCHECK_LIBTORCH
 * (--libtorch DIR), the shim built for that libtorch in the cache (providers/aten_build.h: the
 * CLI builds it first), else libcapcheck_aten.so in the folder of the running executable, else
 * the build folder's (CAPCHECK_ATEN_MODULE). A build without ATen has none. */
#define _GNU_SOURCE
#include "abi/capcheck_provider.h"
#include "providers/aten_build.h"
#include "providers/module_path.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef CAPCHECK_ATEN_MODULE
#define CAPCHECK_ATEN_MODULE "libcapcheck_aten.so"
#endif

typedef const cc_provider *(*aten_entry_fn)(void);

/* AddressSanitizer refuses RTLD_DEEPBIND (scripts/sanitize builds without ATen by default; with
 * SANITIZE_ATEN=ON the gemm symbols are then left to the loader's global order). */
#if defined(__SANITIZE_ADDRESS__)
#define ATEN_DEEPBIND 0
#else
#define ATEN_DEEPBIND RTLD_DEEPBIND
#endif

#if CAPCHECK_HAVE_ATEN
static int module_paths(char paths[3][PATH_MAX])
{
    const char *lib = getenv("CAPCHECK_ATEN_LIB"), *libtorch = getenv("CAPCHECK_LIBTORCH");
    char folder[PATH_MAX], why[256];
    if (!(lib && *lib) && libtorch && *libtorch &&
        cc_aten_shim_paths(libtorch, folder, sizeof folder, paths[0], PATH_MAX, why,
                           sizeof why) == 0)
        return 1;
    return cc_module_paths("libcapcheck_aten.so", "CAPCHECK_ATEN_LIB", CAPCHECK_ATEN_MODULE, paths);
}
#endif

const cc_provider *cc_aten_provider_load(char *msg, size_t msg_len)
{
#if !CAPCHECK_HAVE_ATEN
    snprintf(msg, msg_len, "this build has no ATen provider (configure with libtorch: run "
                           "scripts/setup)");
    return NULL;
#else
    char paths[3][PATH_MAX], why[512];
    int n = module_paths(paths);
    /* RTLD_DEEPBIND: libtorch calls its BLAS (MKL, linked into libtorch_cpu) through
     * dgemm_/sgemm_, which capcheck's own OpenBLAS also exports and, loaded first, would answer:
     * ATen would then run on OpenBLAS's gemm while stating MKL. Deep binding resolves libtorch's
     * symbols inside the module's own libraries first, as when libtorch was linked into the
     * executable. */
    void *sym = cc_module_entry(paths, n, RTLD_NOW | RTLD_LOCAL | ATEN_DEEPBIND,
                                "capcheck_aten_entry", why, sizeof why);
    aten_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    const cc_provider *p = entry ? entry() : NULL;
    if (p)
        return p;
    if (entry)
        snprintf(why, sizeof why, "its entry capcheck_aten_entry gave no provider");
    if (why[0])
        snprintf(msg, msg_len, "cannot load the ATen provider: %s", why);
    else
        snprintf(msg, msg_len, "cannot find the ATen provider %.300s (libcapcheck_aten.so beside "
                               "the capcheck executable, or CAPCHECK_ATEN_LIB): rebuild capcheck",
                 n == 1 ? paths[0] : "libcapcheck_aten.so");
    return NULL;
#endif
}

const cc_provider *cc_aten_provider(void)
{
    char msg[16];
    return cc_aten_provider_load(msg, sizeof msg);
}

int cc_aten_loaded(void)
{
#if !CAPCHECK_HAVE_ATEN
    return 0;
#else
    char paths[3][PATH_MAX];
    int n = module_paths(paths);
    for (int k = 0; k < n; k++) {
        void *dl = dlopen(paths[k], RTLD_NOW | RTLD_NOLOAD);
        if (dl) {
            dlclose(dl); /* drops the count RTLD_NOLOAD added; the library stays */
            return 1;
        }
    }
    return 0;
#endif
}
