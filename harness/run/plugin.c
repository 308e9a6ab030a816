/* Provider plugins: dlopen, dlsym(capcheck_provider_v1), check the table (see plugin.h). */
#define _POSIX_C_SOURCE 200809L
#include "harness/run/plugin.h"

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/files.h"
#include "harness/run/watch.h"


struct cc_plugin {
    void *dl;
    cc_provider table; /* a copy: a missing vjp is filled with a stub that says so */
    char path[1024];
};

static cc_status no_vjp(void *ctx, const cc_call *call, const cc_view *g, cc_view *grads,
                        char *msg, size_t msg_len)
{
    (void)ctx;
    (void)g;
    (void)grads;
    snprintf(msg, msg_len, "the plugin has no VJP (its table's vjp is NULL) for %s", call->op);
    return CC_UNSUPPORTED;
}

/* dlerror() text is long and repeats the path; keep the part after the last ": ". */
static const char *dl_reason(void)
{
    const char *e = dlerror();
    if (!e)
        return "unknown loader error";
    const char *tail = e, *p = e;
    while ((p = strstr(p, ": ")) != NULL) {
        p += 2;
        if (*p)
            tail = p;
    }
    return tail;
}

const char *const cc_builtin_providers[] = {"aten",  "reference", "openblas", "cublas",
                                            "cublas-tf32", "cudnn", "cufft", NULL};

int cc_is_builtin_provider(const char *name)
{
    for (int i = 0; cc_builtin_providers[i]; i++)
        if (strcmp(name, cc_builtin_providers[i]) == 0)
            return 1;
    return 0;
}

void cc_builtin_provider_list(char *buf, size_t n)
{
    buf[0] = 0;
    for (int i = 0; cc_builtin_providers[i]; i++) {
        size_t used = strlen(buf);
        snprintf(buf + used, n - used, "%s%s", i ? ", " : "", cc_builtin_providers[i]);
    }
}

/* In the probe child: load the library and call its entry point. A library that does not load
 * or has no entry is not the probe's business: the parent's own load says why. */
static int load_in_child(cc_watch *w, void *file)
{
    (void)w;
    int real_stdout = cc_stdout_divert(); /* what the library prints goes to stderr */
    void *dl = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    void *sym = dl ? dlsym(dl, CC_PLUGIN_ENTRY) : NULL;
    if (sym) {
        cc_provider_entry_fn entry;
        memcpy(&entry, &sym, sizeof entry);
        (void)entry();
    }
    cc_stdout_restore(real_stdout);
    return 0;
}

/* Load the library in a watched child first (harness/run/watch.h): its constructors and its
 * entry point run there, so a crash, an exit or a hang while loading ends that child, not
 * capcheck. 0 when the child loaded it, -1 with one sentence in msg otherwise. */
static int probe_load(const char *file, const char *shown, double limit_s, char *msg,
                      size_t msg_len)
{
    /* --timeout is a case's limit; a load may take longer (a library linking libtorch takes
     * about a second): never under CC_PLUGIN_LOAD_MIN_S */
    double limit = limit_s <= 0                     ? CC_PLUGIN_LOAD_LIMIT_S
                   : limit_s < CC_PLUGIN_LOAD_MIN_S ? CC_PLUGIN_LOAD_MIN_S
                                                    : limit_s;
    char who[1100], why[1400];
    snprintf(who, sizeof who, "the provider library %s", shown);
    if (cc_watch_run(load_in_child, (void *)file, who, limit,
                     "loading (its constructors or " CC_PLUGIN_ENTRY "())", why, sizeof why) == 0)
        return 0;
    snprintf(msg, msg_len, "%s: capcheck does not load it", why);
    return -1;
}

cc_plugin *cc_plugin_open(const char *path, char *msg, size_t msg_len)
{
    return cc_plugin_open_within(path, 0, msg, msg_len);
}

cc_plugin *cc_plugin_open_within(const char *path, double limit_s, char *msg, size_t msg_len)
{
    if (!path || !*path) {
        snprintf(msg, msg_len, "--provider-lib needs the path of a shared library");
        return NULL;
    }
    cc_plugin *pl = calloc(1, sizeof *pl);
    if (!pl) {
        snprintf(msg, msg_len, "out of memory loading the provider library %s", path);
        return NULL;
    }
    /* dlopen searches LD_LIBRARY_PATH and the system folders for a name without '/': a plugin
     * named on the command line is a file, so anchor it at the working directory. */
    snprintf(pl->path, sizeof pl->path, "%s%s", strchr(path, '/') ? "" : "./", path);
    struct stat st;
    if (stat(pl->path, &st) != 0) {
        snprintf(msg, msg_len, "cannot load the provider library %s: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(msg, msg_len, "cannot load the provider library %s: it is not a regular file",
                 path);
        goto fail;
    }
    if (probe_load(pl->path, path, limit_s, msg, msg_len) != 0)
        goto fail;
    dlerror();
    int real_stdout = cc_stdout_divert(); /* its constructors' and entry's prints: stderr */
    pl->dl = dlopen(pl->path, RTLD_NOW | RTLD_LOCAL);
    const cc_provider *t = NULL;
    void *sym = NULL;
    if (pl->dl) {
        dlerror();
        sym = dlsym(pl->dl, CC_PLUGIN_ENTRY);
    }
    if (sym) {
        cc_provider_entry_fn entry;
        /* POSIX guarantees a data pointer from dlsym converts to a function pointer */
        memcpy(&entry, &sym, sizeof entry);
        t = entry();
    }
    cc_stdout_restore(real_stdout);
    if (!pl->dl) {
        snprintf(msg, msg_len, "cannot load the provider library %s: %s", path, dl_reason());
        goto fail;
    }
    if (!sym) {
        snprintf(msg, msg_len,
                 "the provider library %s does not export %s (a plugin defines "
                 "const cc_provider *%s(void), see abi/capcheck_provider.h)",
                 path, CC_PLUGIN_ENTRY, CC_PLUGIN_ENTRY);
        goto fail;
    }
    if (!t) {
        snprintf(msg, msg_len, "the provider library %s: %s() returned NULL", path,
                 CC_PLUGIN_ENTRY);
        goto fail;
    }
    if (t->abi_version < CC_PROVIDER_ABI_MIN_VERSION || t->abi_version > CC_PROVIDER_ABI_VERSION) {
        snprintf(msg, msg_len,
                 "the provider library %s was built for provider ABI version %d, but this "
                 "capcheck speaks versions %d to %d: rebuild it against this "
                 "abi/capcheck_provider.h",
                 path, t->abi_version, CC_PROVIDER_ABI_MIN_VERSION, CC_PROVIDER_ABI_VERSION);
        goto fail;
    }
    if (!t->name || !*t->name || !t->forward) {
        snprintf(msg, msg_len, "the provider library %s returned a table without %s", path,
                 !t->forward ? "a forward function" : "a name");
        goto fail;
    }
    /* evidence binds to the provider that ran: a plugin keeps its own name (harness/report/capsules.h) */
    if (cc_is_builtin_provider(t->name)) {
        snprintf(msg, msg_len,
                 "the provider library %s calls itself '%s', the name of capcheck's built-in "
                 "provider: a plugin's results are evidence under its own name only (rename its "
                 "table, or pin its library's sha256 to a capsule in the catalog)",
                 path, t->name);
        goto fail;
    }
    /* a version-1 table ends at vjp_mode: read no further (the copy's later fields stay NULL) */
    if (t->abi_version == 1)
        memcpy(&pl->table, t, offsetof(cc_provider, compute_roundoff));
    else
        pl->table = *t;
    if (!pl->table.vjp)
        pl->table.vjp = no_vjp;
    return pl;
fail:
    cc_plugin_close(pl);
    return NULL;
}

const cc_provider *cc_plugin_provider(const cc_plugin *pl)
{
    return pl ? &pl->table : NULL;
}

const char *cc_plugin_path(const cc_plugin *pl)
{
    return pl ? pl->path : NULL;
}

void cc_plugin_close(cc_plugin *pl)
{
    if (!pl)
        return;
    if (pl->dl)
        dlclose(pl->dl);
    free(pl);
}

const cc_provider *cc_provider_select(const char *name, const char *lib, cc_plugin **plugin,
                                      char *msg, size_t msg_len)
{
    if (plugin)
        *plugin = NULL;
    if (lib) {
        cc_plugin *pl = cc_plugin_open(lib, msg, msg_len);
        if (!pl)
            return NULL;
        if (plugin)
            *plugin = pl;
        return cc_plugin_provider(pl);
    }
    if (!name)
        name = "aten";
    if (strcmp(name, "aten") == 0)
        return cc_aten_provider_load(msg, msg_len);
    if (strcmp(name, "reference") == 0)
        return cc_reference_provider();
    char list[160];
    cc_builtin_provider_list(list, sizeof list);
    snprintf(msg, msg_len, "unknown provider '%s' (%s, or --provider-lib PATH)", name, list);
    return NULL;
}
