#define _GNU_SOURCE
#include "providers/module_path.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cc_module_paths(const char *file, const char *env_var, const char *build_path,
                    char paths[3][PATH_MAX])
{
    int n = 0;
    const char *env = getenv(env_var);
    if (env && *env) {
        snprintf(paths[n++], PATH_MAX, "%s", env);
        return n;
    }
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(paths[n++], PATH_MAX, "%.3800s/%.200s", exe, file);
        }
    }
    snprintf(paths[n++], PATH_MAX, "%s", build_path);
    return n;
}

void *cc_module_entry(char paths[3][PATH_MAX], int n, int flags, const char *symbol, char *why,
                      size_t why_len)
{
    why[0] = 0;
    for (int k = 0; k < n; k++) {
        if (access(paths[k], F_OK) != 0)
            continue;
        void *dl = dlopen(paths[k], flags);
        if (!dl) {
            snprintf(why, why_len, "%s", dlerror());
            continue;
        }
        void *sym = dlsym(dl, symbol);
        if (sym)
            return sym;
        snprintf(why, why_len, "%.400s has no entry %s", paths[k], symbol);
    }
    return NULL;
}
