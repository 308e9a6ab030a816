/* The ATen shim for any libtorch (aten_build.h). */
#define _GNU_SOURCE
#include "providers/aten_build.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capcheck_git.h" /* generated: the commit these sources are (cmake/git_commit.cmake) */

#ifndef CAPCHECK_SOURCE_DIR
#define CAPCHECK_SOURCE_DIR "" /* the sources the shim is built from */
#endif

/* The whole (small) file, NUL-terminated, into buf; 0, or -1. */
static int read_small(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = 0;
    fclose(f);
    return 0;
}

/* The quoted value of `name = '...'` in Python source text ("" when absent). */
static void python_string(const char *text, const char *name, char *out, size_t n)
{
    out[0] = 0;
    for (const char *s = text; (s = strstr(s, name)); s++) {
        if (s != text && s[-1] != '\n')
            continue;
        const char *q = strpbrk(s + strlen(name), "'\"\n");
        if (!q || *q == '\n')
            continue;
        const char *end = strchr(q + 1, *q);
        if (end)
            snprintf(out, n, "%.*s", (int)(end - q - 1), q + 1);
        return;
    }
}

/* A name safe in a folder name: [A-Za-z0-9.+_-], anything else '_'. */
static void safe_name(char *s)
{
    for (; *s; s++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.+_-", *s))
            *s = '_';
}

int cc_libtorch_identity(const char *dir, char *version, size_t vlen, char *commit, size_t clen,
                         char *msg, size_t msg_len)
{
    char path[PATH_MAX], text[8192];
    snprintf(path, sizeof path, "%s/../share/cmake/Torch/TorchConfig.cmake", dir);
    if (access(path, R_OK) != 0) {
        snprintf(msg, msg_len, "--libtorch %s: not the lib folder of a libtorch (no "
                               "../share/cmake/Torch/TorchConfig.cmake beside it): give the "
                               "torch/lib of a wheel or of a PyTorch build tree",
                 dir);
        return -1;
    }
    version[0] = commit[0] = 0;
    snprintf(path, sizeof path, "%s/../version.py", dir); /* a wheel, a build tree */
    if (read_small(path, text, sizeof text) == 0) {
        python_string(text, "__version__", version, vlen);
        python_string(text, "git_version", commit, clen);
    }
    snprintf(path, sizeof path, "%s/../build-version", dir); /* a libtorch archive */
    if (!version[0] && read_small(path, text, sizeof text) == 0)
        snprintf(version, vlen, "%.*s", (int)strcspn(text, "\r\n"), text);
    snprintf(path, sizeof path, "%s/../build-hash", dir);
    if (!commit[0] && read_small(path, text, sizeof text) == 0)
        snprintf(commit, clen, "%.*s", (int)strcspn(text, "\r\n"), text);
    if (!version[0]) {
        snprintf(msg, msg_len, "--libtorch %s: the libtorch states no version (no ../version.py "
                               "or ../build-version beside it)",
                 dir);
        return -1;
    }
    if (!commit[0] || !strcmp(commit, "Unknown"))
        snprintf(commit, clen, "unknown");
    if (strlen(commit) > 12)
        commit[12] = 0;
    safe_name(version);
    safe_name(commit);
    return 0;
}

int cc_aten_shim_paths(const char *dir, char *folder, size_t flen, char *shim, size_t slen,
                       char *msg, size_t msg_len)
{
    char version[128], commit[64];
    if (cc_libtorch_identity(dir, version, sizeof version, commit, sizeof commit, msg, msg_len))
        return -1;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg)
        snprintf(folder, flen, "%s/capcheck/aten-%s-%s", xdg, version, commit);
    else if (home && *home)
        snprintf(folder, flen, "%s/.cache/capcheck/aten-%s-%s", home, version, commit);
    else {
        snprintf(msg, msg_len, "--libtorch: neither XDG_CACHE_HOME nor HOME is set: no cache to "
                               "build the ATen shim into");
        return -1;
    }
    snprintf(shim, slen, "%s/libcapcheck_aten.so", folder);
    return 0;
}

/* mkdir -p */
static int make_dirs(const char *path)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0777) && errno != EEXIST)
                return -1;
            *s = '/';
        }
    return mkdir(p, 0777) && errno != EEXIST ? -1 : 0;
}

/* Run argv with stdout and stderr appended to log_path; its exit status (-1: not run). */
static int run_logged(char *const argv[], const char *log_path)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* What built the cached shim: this capcheck's commit and sources (a shim built from
 * uncommitted changes is kept until the commit changes: remove its folder to rebuild it). */
static int stamp_matches(const char *stamp_path, const char *stamp)
{
    char old[1024];
    return read_small(stamp_path, old, sizeof old) == 0 && strcmp(old, stamp) == 0;
}

int cc_aten_shim_for(const char *dir, char *shim, size_t slen, FILE *log, char *msg,
                     size_t msg_len)
{
    char folder[PATH_MAX], path[PATH_MAX + 64], stamp[1024], failed[PATH_MAX + 64];
    if (cc_aten_shim_paths(dir, folder, sizeof folder, shim, slen, msg, msg_len))
        return -1;
    snprintf(stamp, sizeof stamp, "capcheck %s %s\n", CAPCHECK_GIT_COMMIT, CAPCHECK_SOURCE_DIR);
    snprintf(path, sizeof path, "%s/built-by", folder);
    snprintf(failed, sizeof failed, "%s/failed-by", folder);
    if (access(shim, R_OK) == 0 && stamp_matches(path, stamp))
        return 0;
    if (stamp_matches(failed, stamp)) {
        snprintf(msg, msg_len, "the ATen shim does not build against the libtorch in %s (tried "
                               "before by this capcheck: see %s/build.log)",
                 dir, folder);
        return -1;
    }
    char cmakelists[PATH_MAX];
    snprintf(cmakelists, sizeof cmakelists, "%s/CMakeLists.txt", CAPCHECK_SOURCE_DIR);
    if (!CAPCHECK_SOURCE_DIR[0] || access(cmakelists, R_OK) != 0) {
        snprintf(msg, msg_len, "--libtorch: capcheck's sources (%s) are not here to build the ATen "
                               "shim from",
                 CAPCHECK_SOURCE_DIR[0] ? CAPCHECK_SOURCE_DIR : "unknown");
        return -1;
    }
    if (make_dirs(folder)) {
        snprintf(msg, msg_len, "--libtorch: cannot create the cache folder %s: %s", folder,
                 strerror(errno));
        return -1;
    }
    /* one build at a time per libtorch: a second capcheck waits, then finds it built */
    snprintf(path, sizeof path, "%s/lock", folder);
    int lock = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock < 0 || flock(lock, LOCK_EX)) {
        snprintf(msg, msg_len, "--libtorch: cannot lock %s: %s", path, strerror(errno));
        if (lock >= 0)
            close(lock);
        return -1;
    }
    snprintf(path, sizeof path, "%s/built-by", folder);
    if (access(shim, R_OK) == 0 && stamp_matches(path, stamp)) { /* built while we waited */
        close(lock);
        return 0;
    }
    char logp[PATH_MAX + 64], build[PATH_MAX + 64], prefix[PATH_MAX + 64], built[PATH_MAX + 96];
    snprintf(logp, sizeof logp, "%s/build.log", folder);
    snprintf(build, sizeof build, "%s/build", folder);
    snprintf(prefix, sizeof prefix, "-DCMAKE_PREFIX_PATH=%s/../share/cmake", dir);
    snprintf(built, sizeof built, "%s/libcapcheck_aten.so", build);
    remove(logp);
    if (log)
        fprintf(log, "capcheck: building the ATen shim against the libtorch in %s into %s (a few "
                     "minutes, once; log: %s)\n",
                dir, folder, logp);
    char jobs[24];
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(jobs, sizeof jobs, "%ld", cpus > 0 ? cpus : 1);
    time_t t0 = time(NULL);
    char *configure[] = {"cmake", "-S", CAPCHECK_SOURCE_DIR, "-B", build,
                         "-DCMAKE_BUILD_TYPE=RelWithDebInfo", prefix, "-DBUILD_TESTING=OFF",
                         "-DCAPCHECK_WITH_CUDA=OFF", "-DCAPCHECK_WITH_OPENBLAS=OFF",
                         "-DCAPCHECK_ATEN_CUDA_CHECK=OFF", NULL};
    char *compile[] = {"cmake", "--build", build, "--target", "capcheck_aten", "-j", jobs, NULL};
    int rc = run_logged(configure, logp);
    if (rc == 0)
        rc = run_logged(compile, logp);
    if (rc == 0 && rename(built, shim) != 0)
        rc = -1;
    if (rc != 0) {
        FILE *f = fopen(failed, "w");
        if (f) {
            fputs(stamp, f);
            fclose(f);
        }
        close(lock);
        snprintf(msg, msg_len, "%s", rc == 127 || rc == -1
                                         ? "--libtorch: cmake did not run (is it installed?)"
                                         : "");
        if (!msg[0])
            snprintf(msg, msg_len, "the ATen shim does not build against the libtorch in %s "
                                   "(its headers or CMake package: see %s)",
                     dir, logp);
        return -1;
    }
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(stamp, f);
        fclose(f);
    }
    remove(failed);
    close(lock);
    if (log)
        fprintf(log, "capcheck: built %s in %ld s\n", shim, (long)(time(NULL) - t0));
    return 0;
}
