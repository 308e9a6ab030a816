#include "providers/provider_util.h"

#include <dirent.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

cc_status cc_say(char *msg, size_t len, cc_status st, const char *fmt, ...)
{
    if (msg && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, len, fmt, ap);
        va_end(ap);
    }
    return st;
}

int cc_fits_int(int64_t v)
{
    return v >= 0 && v <= INT_MAX;
}

/* The first NVIDIA device node (nvidia<digits>) in dir into name; 0 when there is none. */
static int nvidia_device_node(const char *dir, char *name, size_t len)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int found = 0;
    while (d && !found && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "nvidia", 6) == 0 && e->d_name[6] &&
            strspn(e->d_name + 6, "0123456789") == strlen(e->d_name + 6)) {
            snprintf(name, len, "%s/%s", dir, e->d_name);
            found = 1;
        }
    if (d)
        closedir(d);
    return found;
}

cc_status cc_cuda_device_status(int failed, int none_visible, const char *error, int count,
                                const char *dev_dir, char *msg, size_t len)
{
    if (!failed && count > 0)
        return CC_OK;
    char node[300];
    if (!none_visible && nvidia_device_node(dev_dir, node, sizeof node))
        return cc_say(msg, len, CC_FAILED,
                      "this machine has a GPU (%s) but the CUDA runtime cannot count it: %s "
                      "(a broken driver or runtime, not a machine without CUDA)",
                      node, failed ? error : "cudaGetDeviceCount found 0");
    return cc_say(msg, len, CC_UNSUPPORTED, "no CUDA device: %s",
                  failed ? error : "cudaGetDeviceCount found 0");
}
