/* Where capcheck finds a module of its own (a provider built as a shared library beside the
 * executable and loaded on use: libcapcheck_aten.so, libcapcheck_cuda.so), so that a command
 * that does not use a provider never pays for loading its libraries. */
#ifndef CAPCHECK_MODULE_PATH_H
#define CAPCHECK_MODULE_PATH_H

#include <limits.h>
#include <stddef.h>

/* The candidate paths of module `file`, in order: $env_var when set (and then nowhere else),
 * else `file` in the folder of the running executable, else build_path (the build folder's
 * copy). Returns how many (1 to 3). */
int cc_module_paths(const char *file, const char *env_var, const char *build_path,
                    char paths[3][PATH_MAX]);

/* The entry `symbol` of the first of paths[0..n) that exists, opened with dlopen `flags` and
 * never closed (the provider tables it hands out live as long as it); NULL with a sentence in
 * why when one existed but would not load or lacks the symbol, with why empty when none
 * exists. */
void *cc_module_entry(char paths[3][PATH_MAX], int n, int flags, const char *symbol, char *why,
                      size_t why_len);

#endif
