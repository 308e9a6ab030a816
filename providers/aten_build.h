/* The ATen shim for any libtorch (`--libtorch DIR`, CAPCHECK_LIBTORCH=DIR): DIR is the lib folder
 * of a libtorch (the torch/lib of a wheel or of a PyTorch build tree, the lib of a libtorch
 * archive), beside which lie its CMake package (DIR/../share/cmake/Torch) and its version
 * (DIR/../version.py, or build-version and build-hash). The shim is built from capcheck's
 * sources against that libtorch on first use, into a cache keyed by its version and commit:
 *
 *     $XDG_CACHE_HOME/capcheck/aten-<version>-<commit>/libcapcheck_aten.so   (else ~/.cache)
 *
 * with the build's log beside it (build.log) and the capcheck that built it (built-by: its commit
 * and sources; a shim of another capcheck is built again, one built from uncommitted changes is
 * kept until the commit changes). The shim's RUNPATH names DIR, so it loads that libtorch. A
 * libtorch whose headers do not build the shim is one sentence (and a note in the cache, so the
 * next run says it without building again). */
#ifndef CAPCHECK_ATEN_BUILD_H
#define CAPCHECK_ATEN_BUILD_H

#include <stddef.h>
#include <stdio.h>

/* The version and commit of the libtorch in dir (commit "unknown" when it states none). 0, or
 * -1 with one sentence when dir is not a libtorch's lib folder. */
int cc_libtorch_identity(const char *dir, char *version, size_t vlen, char *commit, size_t clen,
                         char *msg, size_t msg_len);

/* The cache folder of dir's shim and the shim's path in it (no build). 0, or -1 with one
 * sentence. */
int cc_aten_shim_paths(const char *dir, char *folder, size_t flen, char *shim, size_t slen,
                       char *msg, size_t msg_len);

/* The shim for dir, built when the cache lacks it or holds another capcheck's (progress on log:
 * a few minutes, once), into *shim. 0, or -1 with one sentence in msg: not a libtorch, no
 * sources to build from, no cmake, or headers that do not build the shim. */
int cc_aten_shim_for(const char *dir, char *shim, size_t slen, FILE *log, char *msg,
                     size_t msg_len);

#endif
