#define _GNU_SOURCE /* MAP_ANONYMOUS, syscall (the journal writer) */
#include "harness/session/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/files.h"
#include "core/json.h"
#include "harness/report/results_read.h"

#define RUN_SCHEMA "capcheck-run/1"

static void path_in(const char *dir, const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", dir, name);
}

/* Make a new directory entry durable. */
static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* flock(fd, how), waiting up to CC_JOURNAL_LOCK_WAIT seconds for a holder to let go: a run's
 * journal holds it exclusively through the open file its writer process shares, so it is held
 * until the last record is written, even after the run itself was killed. 0, or -1 with errno
 * (EWOULDBLOCK: still held). */
static int lock_waiting(int fd, int how)
{
    for (int tries = 0;; tries++) {
        if (flock(fd, how | LOCK_NB) == 0)
            return 0;
        if (errno != EWOULDBLOCK && errno != EINTR)
            return -1;
        if (tries >= (int)(CC_JOURNAL_LOCK_WAIT * 100)) {
            errno = EWOULDBLOCK;
            return -1;
        }
        struct timespec nap = {0, 10000000};
        nanosleep(&nap, NULL);
    }
}

/* Why the lock of path could not be had, as a sentence. */
static void lock_refused(const char *path, char *msg, size_t msg_len)
{
    if (errno == EWOULDBLOCK)
        snprintf(msg, msg_len, "another capcheck is writing %s (two runs cannot share a folder)",
                 path);
    else
        snprintf(msg, msg_len, "cannot lock %s: %s (capcheck needs a file system with file locks)",
                 path, strerror(errno));
}

/* ---- run.json ----------------------------------------------------------------------------- */

uint64_t cc_case_list_hash(const cc_case *cases, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    char line[CC_CASE_LINE_MAX];
    for (size_t i = 0; i < n; i++) {
        cc_case_print(&cases[i], line, sizeof line);
        for (const char *s = line;; s++) {
            unsigned char ch = *s ? (unsigned char)*s : '\n';
            h ^= ch;
            h *= 0x100000001b3ull;
            if (!*s)
                break;
        }
    }
    return h;
}

int cc_run_info_write(const char *dir, const cc_run_info *ri, char *msg, size_t msg_len)
{
    char path[1024];
    path_in(dir, "run.json", path, sizeof path);
    cc_write_atomic w;
    FILE *f = cc_write_atomic_open(&w, path);
    if (!f) {
        snprintf(msg, msg_len, "cannot write %s: %s", w.tmp, strerror(errno));
        return -1;
    }
    fprintf(f, "{\n  \"schema\": \"%s\",\n  \"capcheck_version\": \"%s\",\n", RUN_SCHEMA,
            CC_VERSION);
    fprintf(f, "  \"cases\": %" PRIu64 ",\n  \"case_list_hash\": \"fnv1a64:%016" PRIx64 "\",\n",
            ri->n_cases, ri->case_hash);
    fputs("  \"provider\": ", f);
    cc_json_write_string(f, ri->provider);
    fputs(",\n  \"provider_description\": ", f);
    cc_json_write_string(f, ri->provider_description);
    fputs(",\n  \"case_files\": ", f);
    cc_json_write_string(f, ri->case_files);
    fprintf(f, ",\n  \"base_seed\": %llu,\n  \"command\": ", ri->base_seed);
    cc_json_write_string(f, ri->command);
    fputs(",\n  \"judging\": ", f);
    cc_json_write_string(f, ri->judging);
    if (ri->witnesses[0]) {
        fputs(",\n  \"witnesses\": ", f);
        cc_json_write_string(f, ri->witnesses);
    }
    fputs(",\n  \"repro\": ", f);
    cc_repro_write_json(f, &ri->repro);
    if (ri->cpu_levels[0]) {
        fputs(",\n  \"cpu_capability\": ", f);
        cc_json_write_string(f, ri->cpu_levels);
    }
    if (ri->aten_threads[0]) {
        fputs(",\n  \"aten_threads\": ", f);
        cc_json_write_string(f, ri->aten_threads);
    }
    if (ri->n_platforms) {
        fputs(",\n  \"platforms\": ", f);
        cc_platforms_write_json(f, ri->platforms, ri->n_platforms);
    }
    fputs("\n}\n", f);
    if (cc_write_atomic_close(&w, 0, CC_WRITE_SYNC)) {
        snprintf(msg, msg_len, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    sync_dir(dir);
    return 0;
}

int cc_run_info_read(const char *dir, cc_run_info *ri, char *msg, size_t msg_len)
{
    memset(ri, 0, sizeof *ri);
    char path[1024];
    path_in(dir, "run.json", path, sizeof path);
    size_t len = 0;
    char *text = cc_read_file(path, &len);
    if (!text) {
        if (errno == ENOENT)
            return 1;
        snprintf(msg, msg_len, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    char why[256];
    cc_json *o = cc_json_parse(text, len, why, sizeof why);
    free(text);
    if (!o) {
        snprintf(msg, msg_len, "%s is not JSON (%s)", path, why);
        return -1;
    }
    const char *schema = "", *hash = "", *s;
    int rc = 0;
    cc_json_string(o, "schema", &schema);
    uint64_t seed = 0;
    if (strcmp(schema, RUN_SCHEMA) != 0) {
        snprintf(msg, msg_len, "%s is not a capcheck run file (schema \"%s\", want \"%s\")",
                 path, schema, RUN_SCHEMA);
        rc = -1;
    } else if (cc_json_u64(o, "cases", &ri->n_cases) ||
               cc_json_string(o, "case_list_hash", &hash) || strncmp(hash, "fnv1a64:", 8) != 0 ||
               cc_json_u64(o, "base_seed", &seed)) {
        snprintf(msg, msg_len, "%s lacks \"cases\", \"case_list_hash\" or \"base_seed\"", path);
        rc = -1;
    } else {
        ri->case_hash = strtoull(hash + 8, NULL, 16);
        ri->base_seed = seed;
        if (!cc_json_string(o, "provider", &s))
            snprintf(ri->provider, sizeof ri->provider, "%s", s);
        if (!cc_json_string(o, "provider_description", &s))
            snprintf(ri->provider_description, sizeof ri->provider_description, "%s", s);
        if (!cc_json_string(o, "case_files", &s))
            snprintf(ri->case_files, sizeof ri->case_files, "%s", s);
        if (!cc_json_string(o, "command", &s))
            snprintf(ri->command, sizeof ri->command, "%s", s);
        if (!cc_json_string(o, "witnesses", &s))
            snprintf(ri->witnesses, sizeof ri->witnesses, "%s", s);
        snprintf(ri->judging, sizeof ri->judging, "%s",
                 cc_json_string(o, "judging", &s) ? "strict" : s);
        cc_repro_from_json(cc_json_get(o, "repro"), &ri->repro);
        if (!cc_json_string(o, "cpu_capability", &s))
            snprintf(ri->cpu_levels, sizeof ri->cpu_levels, "%s", s);
        if (!cc_json_string(o, "aten_threads", &s))
            snprintf(ri->aten_threads, sizeof ri->aten_threads, "%s", s);
        const cc_json *pl = cc_json_get(o, "platforms");
        char pwhy[256];
        if (pl && cc_platforms_from_json(pl, ri->platforms, CC_MAX_PLATFORMS, &ri->n_platforms,
                                         pwhy, sizeof pwhy)) {
            snprintf(msg, msg_len, "%s: %s", path, pwhy);
            rc = -1;
        }
    }
    cc_json_free(o);
    return rc;
}

/* ---- scanning the journal ----------------------------------------------------------------- */

void cc_journal_scan_free(cc_journal_scan *s)
{
    free(s->offset);
    free(s->rerun);
    memset(s, 0, sizeof *s);
}

/* A record that is kept but runs again: its case crashed because its worker was killed from
 * outside, twice (the pool retries once, harness/pool.h). */
static int wants_rerun(const cc_result *r)
{
    return r->status == CC_RES_CRASH && r->retried;
}

int cc_journal_scan_dir(const char *dir, const cc_case *cases, size_t cases_n, size_t copies,
                        cc_journal_scan *out, char *msg, size_t msg_len)
{
    memset(out, 0, sizeof *out);
    size_t n = cases_n * (copies ? copies : 1);
    out->n_cases = n;
    out->offset = malloc((n ? n : 1) * sizeof *out->offset);
    out->rerun = calloc(n ? n : 1, 1);
    if (!out->offset || !out->rerun) {
        snprintf(msg, msg_len, "out of memory");
        cc_journal_scan_free(out);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        out->offset[i] = -1;
    char path[1024];
    path_in(dir, "results.jsonl", path, sizeof path);
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT)
            return 0;
        snprintf(msg, msg_len, "cannot read %s: %s", path, strerror(errno));
        cc_journal_scan_free(out);
        return -1;
    }
    /* read once no journal writes it: a killed run's writer may still be writing its last
     * records (the lock is released when it exits) */
    if (lock_waiting(fileno(f), LOCK_SH)) {
        lock_refused(path, msg, msg_len);
        fclose(f);
        cc_journal_scan_free(out);
        return -1;
    }
    char *line = NULL, canon[CC_CASE_LINE_MAX];
    size_t cap = 0;
    ssize_t len;
    int64_t off = 0;
    int unreadable = 0; /* unreadable lines since the last good record */
    long lineno = 0, run_line = 0;
    char run_why[256] = "";
    int rc = 0;
    while ((len = getline(&line, &cap, f)) > 0) {
        lineno++;
        int64_t here = off;
        off += len;
        int whole = line[len - 1] == '\n';
        cc_result r;
        int64_t index = -1;
        char why[256];
        if (!whole || cc_result_parse_line(line, (size_t)(len - whole), &r, &index, why,
                                           sizeof why)) {
            if (unreadable++ == 0) {
                run_line = lineno;
                snprintf(run_why, sizeof run_why, "%s", whole ? why : "no newline at its end");
            }
            continue;
        }
        if (unreadable) { /* good records follow unreadable lines: damage, salvaged around */
            out->damaged_lines += unreadable;
            if (!out->first_damaged_line) {
                out->first_damaged_line = run_line;
                snprintf(out->damaged_why, sizeof out->damaged_why, "%s", run_why);
            }
            unreadable = 0;
        }
        if (index < 0) {
            snprintf(msg, msg_len,
                     "%s line %ld has no \"index\": it was not written by a resumable run", path,
                     lineno);
            rc = -1;
            break;
        }
        if ((uint64_t)index >= n) {
            snprintf(msg, msg_len,
                     "%s line %ld records case %lld but this run has %zu cases: the case list "
                     "changed; start a new run (without --resume)",
                     path, lineno, (long long)index, n);
            rc = -1;
            break;
        }
        cc_case_print(&cases[(size_t)index % cases_n], canon, sizeof canon);
        if (strcmp(canon, r.line) != 0) {
            snprintf(msg, msg_len,
                     "%s line %ld records case %lld as '%s' but this run's case %lld is '%s': "
                     "the case list changed; start a new run (without --resume)",
                     path, lineno, (long long)index, r.line, (long long)index, canon);
            rc = -1;
            break;
        }
        out->valid_end = off;
        if (out->offset[index] >= 0 && !out->rerun[index]) {
            out->duplicates++;
            continue;
        }
        /* the first record of a case counts; a later one replaces only a record to rerun */
        if (out->offset[index] < 0)
            out->n_done++;
        else
            out->n_rerun--;
        out->offset[index] = here;
        out->rerun[index] = (char)wants_rerun(&r);
        out->n_rerun += out->rerun[index];
    }
    out->torn_lines = unreadable;
    if (rc == 0 && ferror(f)) {
        snprintf(msg, msg_len, "cannot read %s: %s", path, strerror(errno));
        rc = -1;
    }
    out->file_size = off;
    free(line);
    fclose(f);
    if (rc)
        cc_journal_scan_free(out);
    return rc;
}

static int offset_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int cc_journal_compact(const char *dir, const cc_journal_scan *s, char *msg, size_t msg_len)
{
    char path[1024], tmp[1100], kept[1100];
    path_in(dir, "results.jsonl", path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    snprintf(kept, sizeof kept, "%s.damaged", path);
    int64_t *offs = malloc((s->n_cases ? s->n_cases : 1) * sizeof *offs);
    size_t n = 0;
    for (size_t i = 0; offs && i < s->n_cases; i++)
        if (s->offset[i] >= 0 && !s->rerun[i])
            offs[n++] = s->offset[i];
    FILE *in = offs ? fopen(path, "rb") : NULL, *out = in ? fopen(tmp, "wb") : NULL;
    int bad = !out;
    if (!bad) {
        qsort(offs, n, sizeof *offs, offset_cmp); /* the records keep their journal order */
        char *line = NULL;
        size_t cap = 0;
        for (size_t k = 0; k < n && !bad; k++) {
            ssize_t len;
            bad = fseeko(in, (off_t)offs[k], SEEK_SET) || (len = getline(&line, &cap, in)) <= 0 ||
                  fwrite(line, 1, (size_t)len, out) != (size_t)len;
        }
        free(line);
        bad = bad || fflush(out) || ferror(out) || fsync(fileno(out));
    }
    int saved = errno;
    if (out && fclose(out))
        bad = 1;
    if (in)
        fclose(in);
    free(offs);
    /* the damaged journal stays beside the new one, for whoever wants to see what broke */
    if (!bad && s->damaged_lines && rename(path, kept))
        bad = 1, saved = errno;
    if (!bad && rename(tmp, path))
        bad = 1, saved = errno;
    if (bad) {
        snprintf(msg, msg_len, "cannot rewrite %s without its damaged or rerun records: %s",
                 path, strerror(saved));
        remove(tmp);
        return -1;
    }
    sync_dir(dir);
    return 0;
}

int cc_journal_report(const char *dir, const cc_journal_scan *s, cc_report *rep, char *msg,
                      size_t msg_len)
{
    char path[1024];
    path_in(dir, "results.jsonl", path, sizeof path);
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (s->n_done == 0)
            return 0;
        snprintf(msg, msg_len, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    for (size_t i = 0; i < s->n_cases && rc == 0; i++) {
        if (s->offset[i] < 0)
            continue;
        cc_result r;
        int64_t index;
        char why[256];
        ssize_t len;
        if (fseeko(f, (off_t)s->offset[i], SEEK_SET) || (len = getline(&line, &cap, f)) <= 0 ||
            cc_result_parse_line(line, (size_t)len, &r, &index, why, sizeof why) ||
            index != (int64_t)i) {
            snprintf(msg, msg_len, "cannot read back the record of case %zu from %s", i, path);
            rc = -1;
        } else if (cc_report_add(rep, &r)) {
            snprintf(msg, msg_len, "out of memory");
            rc = -1;
        }
    }
    free(line);
    fclose(f);
    return rc;
}

/* ---- appending ---------------------------------------------------------------------------- */

/* Records reach the file through a writer process of the journal's own: the appender copies a
 * record into a ring of shared memory and moves its head; the writer, polling every few
 * milliseconds, writes what is new (one write per batch) and fsyncs once a second. Why: on a
 * VM's ext4 a write(2) per record was 1.9 us of a small case's ~30 (and an fsync in line, 20 ms
 * once a second), while the copy costs nothing next to the case. Nothing is lost that one write
 * per record kept: the ring outlives the appender, so when capcheck is killed the writer (in a
 * process group of its own, deaf to the terminal's signals) notices its parent gone, writes
 * every whole record the ring holds and exits; a record is in the ring whole or not at all (the
 * head moves after the copy), so no torn line comes from a killed appender either. A machine
 * crash loses the last second or so, as before. Without a writer (fork failed) the appender
 * writes and syncs in line, as it does once a dead writer's ring is full. The writer takes
 * nothing from its parent but the file and its wake-up socket (every other descriptor closed: a
 * worker's pipe held open there would keep the worker from seeing its end), and only
 * async-signal-safe calls (the parent may have threads). */
#define RING_BYTES ((size_t)1 << 20)
#define WRITER_ACTIVE_POLL_MS 2   /* between polls while records come */
#define WRITER_IDLE_POLL_MS 50    /* once none came for a while */

typedef struct {
    _Atomic uint64_t head;   /* bytes put into the ring so far (the appender's) */
    _Atomic uint64_t tail;   /* bytes of them in the file (the writer's) */
    _Atomic int closing;     /* set by close: write the rest and exit */
    _Atomic int write_errno; /* the writer's failed write (it has exited) */
    _Atomic int sync_failed;
    char data[RING_BYTES];
} journal_ring;

struct cc_journal {
    int fd;
    cc_strbuf record; /* the record being written, its memory kept from one to the next */
    char path[1024];
    journal_ring *ring; /* shared with the writer; NULL: in line */
    pid_t writer;
    int wake_fd;       /* the wake-up socket's end (the writer has the other) */
    int sync_failed;   /* in line, or the parent's own last sync */
    double last_sync;  /* in line */
};

/* Write bytes [from, to) of the ring's stream to fd; 0, or an errno. Not cc_write_fully: the
 * tail moves after every write(2), so a writer that dies mid-batch leaves the run (which
 * writes the rest, stop_writer) exactly what it had not written. */
static int write_ring(int fd, journal_ring *ring, uint64_t from, uint64_t to)
{
    while (from < to) {
        size_t at = (size_t)(from % RING_BYTES), len = (size_t)(to - from);
        if (len > RING_BYTES - at)
            len = RING_BYTES - at;
        ssize_t w = write(fd, ring->data + at, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO;
        from += (uint64_t)w;
        atomic_store_explicit(&ring->tail, from, memory_order_release);
    }
    return 0;
}

/* Descriptors 0-2 and the two given stay; every other goes (the two are moved to 3 and 4). */
static void keep_only(int *a, int *b)
{
    int ha = fcntl(*a, F_DUPFD, 1000), hb = fcntl(*b, F_DUPFD, 1000);
    if (ha < 0 || hb < 0 || dup2(ha, 3) < 0 || dup2(hb, 4) < 0)
        return; /* then everything stays open: slower ends for workers, nothing wrong */
    *a = 3;
    *b = 4;
#ifdef SYS_close_range
    if (syscall(SYS_close_range, 5u, ~0u, 0u) == 0)
        return;
#endif
    long max = sysconf(_SC_OPEN_MAX);
    for (long fd = 5; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
        close((int)fd);
}

static _Noreturn void writer_main(int fd, int wake_fd, journal_ring *ring, pid_t parent)
{
    setpgid(0, 0); /* a kill of capcheck's process group leaves it to finish the file */
#ifdef __linux__
    prctl(PR_SET_NAME, "capcheck-writer"); /* what ps and top show (and pkill -x capcheck spares) */
#endif
    static const int deaf[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2};
    for (size_t k = 0; k < sizeof deaf / sizeof deaf[0]; k++)
        signal(deaf[k], SIG_IGN);
    keep_only(&fd, &wake_fd);
    double last_sync = cc_monotonic_seconds();
    uint64_t synced = atomic_load(&ring->tail);
    int idle_polls = 0;
    for (;;) {
        struct pollfd pf = {wake_fd, POLLIN, 0};
        int timeout = idle_polls > 100 ? WRITER_IDLE_POLL_MS : WRITER_ACTIVE_POLL_MS;
        if (poll(&pf, 1, timeout) > 0) {
            char sink[64];
            if (read(wake_fd, sink, sizeof sink) == 0) /* every write end gone: so is the parent */
                pf.fd = -1;
        }
        int last = atomic_load(&ring->closing) || getppid() != parent || pf.fd < 0;
        uint64_t head = atomic_load_explicit(&ring->head, memory_order_acquire);
        uint64_t tail = atomic_load(&ring->tail);
        idle_polls = head == tail ? idle_polls + 1 : 0;
        int err = write_ring(fd, ring, tail, head);
        if (err) {
            atomic_store(&ring->write_errno, err);
            _exit(1);
        }
        if (last) /* the parent syncs after a close; a dead parent's file is synced here */
            _exit(atomic_load(&ring->closing) ? 0 : (fsync(fd) == 0 ? 0 : 1));
        if (head != synced && cc_monotonic_seconds() - last_sync >= CC_JOURNAL_SYNC_SECONDS) {
            if (fsync(fd))
                atomic_store(&ring->sync_failed, 1);
            synced = head;
            last_sync = cc_monotonic_seconds();
        }
    }
}

/* The writer started, or the journal left in line (no shared memory, no pipe, no fork). */
static void start_writer(cc_journal *j)
{
    journal_ring *ring = mmap(NULL, sizeof *ring, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ring == MAP_FAILED)
        return;
    int wake[2]; /* a socket pair, not a pipe: a send to a dead writer is EPIPE, not SIGPIPE */
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, wake)) {
        munmap(ring, sizeof *ring);
        return;
    }
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        close(wake[1]);
        writer_main(j->fd, wake[0], ring, parent);
    }
    close(wake[0]);
    if (pid < 0) {
        close(wake[1]);
        munmap(ring, sizeof *ring);
        return;
    }
    setpgid(pid, pid); /* also done by the writer; here before any record can be appended */
    fcntl(wake[1], F_SETFD, FD_CLOEXEC);
    j->ring = ring;
    j->writer = pid;
    j->wake_fd = wake[1];
}

static void wake_writer(cc_journal *j)
{
    char b = 0;
    ssize_t ignored = send(j->wake_fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT); /* full: awake */
    (void)ignored;
}

/* Wait for the writer and take the ring back: what it left unwritten (it died) is written here;
 * 0, or an errno. */
static int stop_writer(cc_journal *j)
{
    journal_ring *ring = j->ring;
    atomic_store(&ring->closing, 1);
    wake_writer(j);
    int st;
    while (j->writer > 0 && waitpid(j->writer, &st, 0) < 0 && errno == EINTR)
        ; /* (writer 0: already reaped; never waitpid(-1), which would take a worker) */
    j->writer = 0;
    close(j->wake_fd);
    int err = atomic_load(&ring->write_errno);
    if (!err)
        err = write_ring(j->fd, ring, atomic_load(&ring->tail), atomic_load(&ring->head));
    if (atomic_load(&ring->sync_failed))
        j->sync_failed = 1;
    munmap(ring, sizeof *ring);
    j->ring = NULL;
    return err;
}

int cc_journal_open(const char *dir, int64_t keep_bytes, cc_journal **out, char *msg,
                    size_t msg_len)
{
    *out = NULL;
    cc_journal *j = calloc(1, sizeof *j);
    if (!j) {
        snprintf(msg, msg_len, "out of memory");
        return -1;
    }
    path_in(dir, "results.jsonl", j->path, sizeof j->path);
    j->fd = open(j->path, O_WRONLY | O_CREAT | O_APPEND, 0666);
    if (j->fd >= 0 && lock_waiting(j->fd, LOCK_EX)) { /* before anything is cut */
        lock_refused(j->path, msg, msg_len);
        close(j->fd);
        free(j);
        return -1;
    }
    if (j->fd < 0 || ftruncate(j->fd, (off_t)(keep_bytes < 0 ? 0 : keep_bytes))) {
        snprintf(msg, msg_len, "cannot write %s: %s", j->path, strerror(errno));
        if (j->fd >= 0)
            close(j->fd);
        free(j);
        return -1;
    }
    fcntl(j->fd, F_SETFD, FD_CLOEXEC);
    fsync(j->fd);
    sync_dir(dir);
    j->last_sync = cc_monotonic_seconds();
    start_writer(j);
    *out = j;
    return 0;
}

/* Put the record into the ring, waiting while it is full; 0, or the writer's errno. A record
 * larger than half the ring waits for the writer to empty it and goes out in line. */
static int put_in_ring(cc_journal *j, const char *rec, size_t len)
{
    journal_ring *ring = j->ring;
    uint64_t head = atomic_load_explicit(&ring->head, memory_order_relaxed);
    size_t room = len > RING_BYTES / 2 ? RING_BYTES : len;
    for (;;) {
        int err = atomic_load(&ring->write_errno);
        if (err)
            return err;
        if (head - atomic_load_explicit(&ring->tail, memory_order_acquire) + room <= RING_BYTES)
            break;
        if (waitpid(j->writer, NULL, WNOHANG) == j->writer) { /* gone: the rest in line */
            j->writer = 0;
            err = stop_writer(j);
            return err ? err : cc_write_fully(j->fd, rec, len);
        }
        wake_writer(j);
        struct timespec nap = {0, 100000};
        nanosleep(&nap, NULL);
    }
    if (room == RING_BYTES) /* the ring is empty and the writer idle: this one in line */
        return cc_write_fully(j->fd, rec, len);
    size_t at = (size_t)(head % RING_BYTES), first = len < RING_BYTES - at ? len : RING_BYTES - at;
    memcpy(ring->data + at, rec, first);
    memcpy(ring->data, rec + first, len - first);
    atomic_store_explicit(&ring->head, head + len, memory_order_release);
    return 0;
}

int cc_journal_append(cc_journal *j, size_t index, const cc_result *r, char *msg,
                      size_t msg_len)
{
    /* the result record as report.c writes it, with the index first, one whole line */
    cc_strbuf *rec = &j->record;
    cc_strbuf_clear(rec);
    cc_strbuf_puts(rec, "{\"index\":");
    cc_strbuf_put_i64(rec, (int64_t)index);
    cc_strbuf_putc(rec, ',');
    cc_result_put_json_members(rec, r);
    if (rec->failed) {
        snprintf(msg, msg_len, "out of memory formatting the record of case %zu", index);
        return -1;
    }
    int err = j->ring ? put_in_ring(j, rec->data, rec->len)
                      : cc_write_fully(j->fd, rec->data, rec->len);
    if (err) {
        snprintf(msg, msg_len, "cannot append to %s: %s", j->path, strerror(err));
        return -1;
    }
    if (!j->ring && cc_monotonic_seconds() - j->last_sync >= CC_JOURNAL_SYNC_SECONDS) {
        if (fsync(j->fd))
            j->sync_failed = 1;
        j->last_sync = cc_monotonic_seconds();
    }
    return 0;
}

int cc_journal_close(cc_journal *j)
{
    if (!j)
        return 0;
    int bad = j->ring && stop_writer(j) != 0;
    if (fsync(j->fd))
        bad = 1;
    if (j->sync_failed || close(j->fd))
        bad = 1;
    cc_strbuf_free(&j->record);
    free(j);
    return bad ? -1 : 0;
}
