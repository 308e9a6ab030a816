/* The journal and its reader (harness/session/journal.h, results_read.h, json.h): a result survives
 * write -> read exactly (NaN, +-Inf, -0, escapes); records appended in any order give the
 * report of case-index order; a torn tail is dropped and cut off; run.json round-trips; numbers
 * are written as printf's %.17g writes them (the fast path of core/json.c against printf);; the
 * journal's writer process loses nothing when capcheck's process group is killed, keeps none of
 * its parent's descriptors and keeps no close waiting. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <dirent.h>
#include <errno.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness/session/journal.h"
#include "core/json.h"
#include "core/strbuf.h"
#include "core/text.h"
#include "harness/report/report.h"
#include "harness/report/results_read.h"

static char tmpdir[256];

static void sample_result(cc_result *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->line, sizeof r->line, "softmax dtype=f32 device=cpu in=[2,3] axis=1 "
                                      "layout=transpose check=both seed=18446744073709551615");
    snprintf(r->op, sizeof r->op, "softmax");
    r->dtype = CC_BF16;
    r->device = CC_CPU;
    r->layout = CC_LAYOUT_TRANSPOSE;
    snprintf(r->provider, sizeof r->provider, "plug\"in");
    snprintf(r->vjp_mode, sizeof r->vjp_mode, "backendVJP");
    r->status = CC_RES_CRASH;
    snprintf(r->message, sizeof r->message, "line one\nline \"two\"\t\\ \x01 caf\xc3\xa9");
    r->checked_fwd = 1;
    r->fwd_ratio = INFINITY;
    r->vjp_ratio = -INFINITY;
    r->worst_ratio = 0.1 + 0.2;
    snprintf(r->worst_output, sizeof r->worst_output, "grad:x");
    snprintf(r->worst_index, sizeof r->worst_index, "[1,2]");
    snprintf(r->worst_inputs, sizeof r->worst_inputs, "x=-0 y=1e-310");
    r->expected = NAN;
    r->got = -0.0;
    r->bound = 4.9406564584124654e-324;
    r->accumulation = CC_ACC_RELAXED;
    r->suspect_ratio = 1.5;
    r->suspect = r->vacuous = 1;
    snprintf(r->vacuous_outputs, sizeof r->vacuous_outputs, "grad:q grad:k");
    r->has_power = 1;
    r->power = (cc_power){NAN, 2.8284271247461903, INFINITY, 0, 0.0, 1.0};
    r->prob_judged = 3;
    r->worst_by_prob = 1;
    r->bias = (cc_bias){100, 80, 50, -0.25, 0.0, 0};
    cc_bias_decide(&r->bias);
    snprintf(r->bias_output, sizeof r->bias_output, "grad:x");
    r->elements = 6;
    r->seconds = 0.25;
}

static void test_result_round_trip(void **state)
{
    (void)state;
    cc_result a, b;
    sample_result(&a);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    cc_result_write_json(m, &a);
    fclose(m);
    int64_t index = 7;
    char msg[256];
    if (cc_result_parse_line(buf, len, &b, &index, msg, sizeof msg))
        fail_msg("%s in %s", msg, buf);
    assert_int_equal(index, -1);
    assert_memory_equal(&a, &b, sizeof a);
    free(buf);
    /* every status reads back, the longest name too ("nondeterministic": a run of --repeat's
     * findings had ended "results.jsonl holds 0 of 1 results") */
    for (int st = 0; st < CC_RES_COUNT; st++) {
        a.status = (cc_result_status)st;
        a.repeat = 2;
        buf = NULL;
        m = open_memstream(&buf, &len);
        cc_result_write_json(m, &a);
        fclose(m);
        if (cc_result_parse_line(buf, len, &b, &index, msg, sizeof msg))
            fail_msg("status %s: %s in %s", cc_result_status_name(a.status), msg, buf);
        assert_memory_equal(&a, &b, sizeof a);
        free(buf);
    }
    sample_result(&a);
    buf = NULL;
    m = open_memstream(&buf, &len);
    cc_result_write_json(m, &a);
    fclose(m);

    /* the reader says what is wrong */
    assert_int_equal(cc_result_parse_line("{\"case\":1}", 10, &b, &index, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "\"case\" is not a string"));
    assert_int_equal(cc_result_parse_line("{\"case\":\"x", 10, &b, &index, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "not JSON"));

    /* a duration must be a finite, non-negative number (the fuzzer's finding: "Infinity" and
     * "NaN" are numbers to the JSON reader, and a negative one had passed) */
    static const char *const durations[] = {"\"Infinity\"", "\"NaN\"", "-1", "\"-Infinity\""};
    for (size_t i = 0; i < sizeof durations / sizeof durations[0]; i++) {
        const char *at = strstr(buf, "\"seconds\":"); /* the good record's last field */
        assert_non_null(at);
        char line[4096];
        snprintf(line, sizeof line, "%.*s\"seconds\":%s}", (int)(at - buf), buf, durations[i]);
        assert_int_equal(cc_result_parse_line(line, strlen(line), &b, &index, msg, sizeof msg),
                         -1);
        assert_non_null(strstr(msg, "\"seconds\" is not a finite duration"));
    }
    free(buf);
}

static void test_json_reader(void **state)
{
    (void)state;
    char msg[256];
    const char *t = " {\"a\": [1, -2.5e3, true, false, null], \"s\": \"\\u00e9\\ud83d\\ude00\\/\","
                    " \"n\": 18446744073709551615, \"o\": {}} ";
    cc_json *v = cc_json_parse(t, strlen(t), msg, sizeof msg);
    assert_non_null(v);
    const cc_json *a = cc_json_get(v, "a");
    assert_int_equal(a->type, CC_JSON_ARRAY);
    assert_true(a->child->next->num == -2500.0);
    assert_int_equal(a->child->next->next->type, CC_JSON_TRUE);
    const char *s;
    assert_int_equal(cc_json_string(v, "s", &s), 0);
    assert_string_equal(s, "\xc3\xa9\xf0\x9f\x98\x80/");
    uint64_t n;
    assert_int_equal(cc_json_u64(v, "n", &n), 0);
    assert_true(n == UINT64_MAX);
    assert_int_equal(cc_json_get(v, "o")->type, CC_JSON_OBJECT);
    cc_json_free(v);
    const char *bad[] = {"{\"a\" 1}", "[1,]", "{\"a\":1} x", "\"\\q\"", "01", "-", "[1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_null(cc_json_parse(bad[i], strlen(bad[i]), msg, sizeof msg));
        assert_non_null(strstr(msg, "at byte"));
    }
}

static void test_journal_order_and_torn_tail(void **state)
{
    (void)state;
    char dir[300], msg[1024];
    snprintf(dir, sizeof dir, "%s/j", tmpdir);
    mkdir(dir, 0777);
    cc_case_defaults def = {CC_CPU, 0};
    cc_case_list l = {0};
    cc_parse_error err;
    assert_int_equal(cc_cases_parse_text("add count=3 dtype=f32,f64 size=tiny\n"
                                         "softmax count=3 dtype=f32 size=tiny\n",
                                         "t", &def, &l, &err),
                     0);
    size_t n = l.n;
    assert_true(n == 9);
    const cc_provider *ref = cc_reference_provider();
    cc_result *res = calloc(n, sizeof *res);
    for (size_t i = 0; i < n; i++) {
        cc_run_case(ref, &l.v[i], &res[i]);
        if (i % 3 == 1) { /* variety for the rows: failures of several kinds */
            res[i].status = i % 2 ? CC_RES_TIMEOUT : CC_RES_FAIL;
            snprintf(res[i].message, sizeof res[i].message, "planted %zu", i);
        }
    }
    /* the report of index order, built directly */
    cc_report want;
    cc_report_init(&want);
    for (size_t i = 0; i < n; i++)
        cc_report_add(&want, &res[i]);

    /* journal: completion order reversed, one case missing, then a torn write */
    cc_journal *j;
    assert_int_equal(cc_journal_open(dir, -1, &j, msg, sizeof msg), 0);
    for (size_t k = n; k-- > 0;)
        if (k != 4)
            assert_int_equal(cc_journal_append(j, k, &res[k], msg, sizeof msg), 0);
    assert_int_equal(cc_journal_close(j), 0);
    char path[400];
    snprintf(path, sizeof path, "%s/results.jsonl", dir);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    off_t good = st.st_size;
    FILE *f = fopen(path, "a");
    fputs("{\"index\":4,\"case\":\"add dt", f);
    fclose(f);

    cc_journal_scan s;
    if (cc_journal_scan_dir(dir, l.v, n, 1, &s, msg, sizeof msg))
        fail_msg("%s", msg);
    assert_int_equal(s.n_done, n - 1);
    assert_int_equal(s.offset[4], -1);
    assert_int_equal(s.torn_lines, 1);
    assert_int_equal(s.valid_end, good);
    /* reopening for the resume cuts the torn tail off; the missing case is appended */
    assert_int_equal(cc_journal_open(dir, s.valid_end, &j, msg, sizeof msg), 0);
    assert_int_equal(cc_journal_append(j, 4, &res[4], msg, sizeof msg), 0);
    assert_int_equal(cc_journal_close(j), 0);
    cc_journal_scan_free(&s);
    assert_int_equal(cc_journal_scan_dir(dir, l.v, n, 1, &s, msg, sizeof msg), 0);
    assert_int_equal(s.n_done, n);
    assert_int_equal(s.torn_lines, 0);

    cc_report got;
    cc_report_init(&got);
    assert_int_equal(cc_journal_report(dir, &s, &got, msg, sizeof msg), 0);
    assert_int_equal(got.n, want.n);
    assert_int_equal(got.cases, (long)n);
    assert_memory_equal(got.counts, want.counts, sizeof got.counts);
    for (size_t i = 0; i < got.n; i++)
        assert_memory_equal(&got.rows[i], &want.rows[i], sizeof got.rows[i]);
    cc_report_free(&got);
    cc_report_free(&want);
    cc_journal_scan_free(&s);

    /* run.json */
    cc_run_info ri = {.n_cases = n, .case_hash = cc_case_list_hash(l.v, n),
                      .provider = "reference", .provider_description = "desc \"quoted\"",
                      .case_files = "a.cases", .command = "capcheck run a.cases",
                      .base_seed = 18446744073709551615ull, .witnesses = "openblas,reference",
                      .cpu_levels = "avx2,default", .n_platforms = 2, .judging = "relaxed",
                      .repro = {"CAPCHECK_MUTANT='a b'", "--provider-lib /p/x.so --tf32 off"}},
                back;
    /* the platforms of a run at two levels: every fact survives the round trip */
    cc_platform_derive("libtorch 2.15.0; cpu_capability AVX2; onednn 3.13.3; blas mkl 2024.2",
                       CC_CPU, "sse4_1 avx avx2 fma", "AVX2", "ONEDNN_MAX_CPU_ISA=AVX2", "avx2",
                       &ri.platforms[0]);
    cc_platform_derive("cuda 13.2; driver 580.1; cudnn 9.26.0; gpu NVIDIA H200 (sm_90)", CC_CUDA,
                       "", NULL, "", "", &ri.platforms[1]);
    assert_int_equal(cc_run_info_write(dir, &ri, msg, sizeof msg), 0);
    assert_int_equal(cc_run_info_read(dir, &back, msg, sizeof msg), 0);
    /* the repro program is never written: a reader names itself (harness/report/repro.h) */
    assert_non_null(strstr(back.repro.program, "test_journal"));
    memcpy(ri.repro.program, back.repro.program, sizeof ri.repro.program);
    assert_memory_equal(&ri, &back, sizeof ri);
    char none[400];
    snprintf(none, sizeof none, "%s/none", tmpdir);
    assert_int_equal(cc_run_info_read(none, &back, msg, sizeof msg), 1);
    /* the hash sees every line and their order */
    cc_case tmp = l.v[0];
    l.v[0] = l.v[1];
    l.v[1] = tmp;
    assert_true(cc_case_list_hash(l.v, n) != ri.case_hash);
    free(res);
    cc_case_list_free(&l);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/capcheck_journal_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* xorshift64: the values of the number test, the same on every machine */
static uint64_t next_bits(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* cc_json_format_number against printf's %.17g, character for character, on 3 million values:
 * any bit pattern, 53-bit integers times powers of two, values at powers of ten (where the
 * exponent guess is off by one), exact ties at the 17th digit (18 digits ending in 5, rounded
 * half to even), ratios, and a log-uniform spread. */
static void test_numbers_are_printf_text(void **state)
{
    (void)state;
    uint64_t s = 88172645463325252ull;
    long differ = 0, ties = 0;
    for (long i = 0; i < 3000000; i++) {
        uint64_t r = next_bits(&s), r2 = next_bits(&s);
        double x;
        switch (i % 6) {
        case 0:
            memcpy(&x, &r, sizeof x);
            break;
        case 1:
            x = ldexp((double)(r >> 11), (int)(r2 % 120) - 110);
            break;
        case 2:
            x = pow(10.0, (double)(r2 % 36) - 17.0) *
                (1.0 + ((double)(r >> 11) * 0x1p-53 - 0.5) * 1e-15);
            break;
        case 3: { /* (q + 1/2) 10^-k, q of 17 digits: j / 2^(k+1) for odd j = (2q + 1) / 5^k */
            int k = 1 + (int)(r2 % 24);
            double lo = ceil(2e16 / pow(5.0, k)), hi = fmin(2e17 / pow(5.0, k), 0x1p53);
            double j = lo + (double)(r % (uint64_t)(hi - lo));
            x = ldexp(fmod(j, 2.0) == 1.0 ? j : j + 1.0, -(k + 1));
            ties++;
            break;
        }
        case 4:
            x = (double)(r % 100000) / (double)(1 + r2 % 1000);
            break;
        default:
            x = exp(((double)(r >> 11) * 0x1p-53 - 0.5) * 90.0);
            break;
        }
        if (r2 & 1)
            x = -x;
        char want[64], got[CC_JSON_NUMBER_MAX];
        if (isnan(x) || isinf(x))
            continue;
        snprintf(want, sizeof want, "%.17g", x);
        cc_json_format_number(x, got);
        if (strcmp(want, got) != 0 && differ++ < 5)
            print_message("x = %a: printf %s, capcheck %s\n", x, want, got);
    }
    assert_int_equal(differ, 0);
    assert_true(ties == 500000);
    char t[CC_JSON_NUMBER_MAX];
    cc_json_format_number(-0.0, t);
    assert_string_equal(t, "-0");
    cc_json_format_number(NAN, t);
    assert_string_equal(t, "\"NaN\"");
    cc_json_format_number(-INFINITY, t);
    assert_string_equal(t, "\"-Infinity\"");
    const double special[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-300, 4.9e-324, 1e300};
    for (size_t k = 0; k < sizeof special / sizeof special[0]; k++) { /* printf's own words */
        char want[64];
        snprintf(want, sizeof want, "%.17g", special[k]);
        cc_format_g17(special[k], t);
        assert_string_equal(t, want);
    }
}

/* A record's seconds (cc_strbuf_put_fixed6) against printf's %.6f, character for character, on a
 * million values: timings of every size, 53-bit integers times powers of two, exact ties at the
 * sixth decimal (j / 2^(k+1), odd j a multiple of 5^6: rounded half to even), tiny and whole
 * values, and the ones printf writes itself (negative, huge, not finite). */
static void test_seconds_are_printf_text(void **state)
{
    (void)state;
    uint64_t s = 1181783497276652981ull;
    long differ = 0;
    for (long i = 0; i < 1000000; i++) {
        uint64_t r = next_bits(&s), r2 = next_bits(&s);
        double x;
        switch (i % 5) {
        case 0:
            x = exp(((double)(r >> 11) * 0x1p-53) * 30.0 - 20.0); /* 2e-9 .. 2e4 s */
            break;
        case 1:
            x = ldexp((double)(r >> 11), (int)(r2 % 90) - 120);
            break;
        case 2: { /* (q + 1/2) 10^-6 exactly */
            int k = 7 + (int)(r2 % 20);
            x = ldexp((double)(15625 * (2 * (r % (1u << 20)) + 1)), -k);
            break;
        }
        case 3:
            x = (double)(r % 100000) * 0x1p-20;
            break;
        default:
            x = (double)(r % 20000000) * 1e-6;
            break;
        }
        char want[64];
        snprintf(want, sizeof want, "%.6f", x);
        cc_strbuf b = {0};
        cc_strbuf_put_fixed6(&b, x);
        if (strcmp(want, b.data) != 0 && differ++ < 5)
            print_message("x = %a: printf %s, capcheck %s\n", x, want, b.data);
        cc_strbuf_free(&b);
    }
    assert_int_equal(differ, 0);
    const double special[] = {0.0, -0.0, 0x1p33, 0x1p33 - 1, 8589934591.9999995, 1e300,
                              4.9e-324, -1.5, NAN, INFINITY, -INFINITY, 0.0078125, 0.0234375};
    for (size_t k = 0; k < sizeof special / sizeof special[0]; k++) {
        char want[400];
        snprintf(want, sizeof want, "%.6f", special[k]);
        cc_strbuf b = {0};
        cc_strbuf_put_fixed6(&b, special[k]);
        assert_string_equal(b.data, want);
        cc_strbuf_free(&b);
    }
}

/* Lines of DIR/results.jsonl, once it has `want` (or after `seconds`): what a reader finds. */
static size_t lines_within(const char *dir, size_t want, double seconds)
{
    char path[400];
    snprintf(path, sizeof path, "%s/results.jsonl", dir);
    size_t lines = 0;
    for (int tries = 0; tries <= (int)(seconds * 100); tries++) {
        FILE *f = fopen(path, "r");
        lines = 0;
        int ch, last = '\n';
        while (f && (ch = fgetc(f)) != EOF) {
            lines += ch == '\n';
            last = ch;
        }
        if (f)
            fclose(f);
        if (lines >= want) {
            assert_int_equal(last, '\n'); /* no torn line once written */
            break;
        }
        struct timespec nap = {0, 10000000};
        nanosleep(&nap, NULL);
    }
    return lines;
}

/* The child of `parent` other than `not` (the journal's writer), from /proc; -1 when none. */
static pid_t writer_of(pid_t parent, pid_t not)
{
    for (int tries = 0; tries < 200; tries++) {
        DIR *d = opendir("/proc");
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            pid_t pid = (pid_t)atoi(e->d_name);
            char path[64], stat[512];
            snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
            FILE *f = pid > 0 && pid != not ? fopen(path, "r") : NULL;
            if (!f)
                continue;
            size_t n = fread(stat, 1, sizeof stat - 1, f);
            fclose(f);
            stat[n] = 0;
            const char *close_paren = strrchr(stat, ')');
            int ppid = 0;
            if (close_paren && sscanf(close_paren + 1, " %*c %d", &ppid) == 1 && ppid == parent) {
                closedir(d);
                return pid;
            }
        }
        if (d)
            closedir(d);
        struct timespec nap = {0, 5000000};
        nanosleep(&nap, NULL);
    }
    return -1;
}

static void one_result(cc_case_list *l, cc_result *r)
{
    cc_case_defaults def = {CC_CPU, 0};
    cc_parse_error err;
    assert_int_equal(cc_cases_parse_text("add count=1 dtype=f32 size=tiny\n", "t", &def, l, &err),
                     0);
    cc_run_case(cc_reference_provider(), &l->v[0], r);
}

/* The journal's writer process: every record appended reaches the file when capcheck's whole
 * process group is killed right after; it holds no descriptor of its parent's but its own (a
 * worker's pipe stays closable); a forked process holding the parent's descriptors does not
 * keep close waiting; records keep their order across its syncs. No clock is asserted: the
 * holders below never end by themselves, so a close that waited for one would never return
 * (CTest's timeout), and each is checked alive after the close. */
static void test_writer_process(void **state)
{
    (void)state;
    char dir[300], msg[1024];
    cc_case_list l = {0};
    cc_result r;
    one_result(&l, &r);

    /* killed with its group after appending: the writer (a group of its own) writes it all */
    snprintf(dir, sizeof dir, "%s/killed", tmpdir);
    mkdir(dir, 0777);
    enum { KILLED_RECORDS = 5000 }; /* 3 MB: past the ring, the writer still busy at the kill */
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        cc_journal *j;
        if (cc_journal_open(dir, -1, &j, msg, sizeof msg))
            _exit(3);
        for (size_t i = 0; i < KILLED_RECORDS; i++)
            if (cc_journal_append(j, i, &r, msg, sizeof msg))
                _exit(4);
        kill(0, SIGKILL);
        _exit(5);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    /* a resume's scan, at once: it waits for the writer's last record (its lock) */
    cc_case_list many = {0};
    for (size_t i = 0; i < KILLED_RECORDS; i++)
        assert_int_equal(cc_case_list_push(&many, &l.v[0]), 0);
    cc_journal_scan s;
    assert_int_equal(cc_journal_scan_dir(dir, many.v, many.n, 1, &s, msg, sizeof msg), 0);
    assert_int_equal(s.n_done, KILLED_RECORDS);
    assert_int_equal(s.torn_lines, 0);
    cc_journal_scan_free(&s);
    cc_case_list_free(&many);
    assert_int_equal(lines_within(dir, KILLED_RECORDS, 0), KILLED_RECORDS);

    /* descriptors: a pipe's write end made before the journal is closed here, and then the
     * pipe reads as ended at once (the writer did not keep its copy) */
    snprintf(dir, sizeof dir, "%s/writer", tmpdir);
    mkdir(dir, 0777);
    int p[2];
    assert_int_equal(pipe(p), 0);
    cc_journal *j;
    assert_int_equal(cc_journal_open(dir, -1, &j, msg, sizeof msg), 0);
    close(p[1]);
    struct pollfd pf = {p[0], POLLIN, 0}; /* held open elsewhere: a timeout, not a hang */
    assert_int_equal(poll(&pf, 1, 2000), 1);
    char b;
    assert_int_equal(read(p[0], &b, 1), 0);
    close(p[0]);

    /* the journal holds the folder: another open of the file cannot lock it, even shared */
    char path[400];
    snprintf(path, sizeof path, "%s/results.jsonl", dir);
    int other = open(path, O_RDONLY);
    assert_true(other >= 0);
    assert_int_equal(flock(other, LOCK_SH | LOCK_NB), -1);
    assert_int_equal(errno, EWOULDBLOCK);

    /* a process forked meanwhile (a worker) holds every descriptor of this one; records go on
     * across the writer's first sync, in order */
    pid_t holder = fork();
    if (holder == 0)
        for (;;)
            pause(); /* until killed below */
    size_t appended = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        assert_int_equal(cc_journal_append(j, appended, &r, msg, sizeof msg), 0);
        appended++;
        struct timespec nap = {0, 1000000};
        nanosleep(&nap, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) <
             1.3 * CC_JOURNAL_SYNC_SECONDS);
    assert_int_equal(cc_journal_close(j), 0);
    assert_int_equal(waitpid(holder, NULL, WNOHANG), 0); /* closed with the holder alive */
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    assert_int_equal(flock(other, LOCK_SH | LOCK_NB), 0); /* closed: the folder is free */
    close(other);
    assert_int_equal(lines_within(dir, appended, 0), appended);
    for (size_t i = 0; i < appended; i++)
        assert_int_equal(cc_case_list_push(&many, &l.v[0]), 0);
    assert_int_equal(cc_journal_scan_dir(dir, many.v, many.n, 1, &s, msg, sizeof msg), 0);
    assert_int_equal(s.n_done, appended);
    for (size_t i = 1; i < appended; i++)
        assert_true(s.offset[i] > s.offset[i - 1]); /* in the order appended */
    cc_journal_scan_free(&s);
    cc_case_list_free(&many);

    /* the writer killed under a run: once the ring is full the run writes in line, and every
     * record arrives (no wait for any other child: a forked holder is still alive) */
    snprintf(dir, sizeof dir, "%s/orphaned", tmpdir);
    mkdir(dir, 0777);
    holder = fork();
    if (holder == 0)
        for (;;)
            pause();
    assert_int_equal(cc_journal_open(dir, -1, &j, msg, sizeof msg), 0);
    pid_t writer = writer_of(getpid(), holder);
    assert_true(writer > 0);
    kill(writer, SIGKILL);
    enum { PAST_THE_RING = 2500 }; /* ~1.6 MB of records */
    for (size_t i = 0; i < PAST_THE_RING; i++)
        assert_int_equal(cc_journal_append(j, i, &r, msg, sizeof msg), 0);
    assert_int_equal(cc_journal_close(j), 0);
    assert_int_equal(waitpid(holder, NULL, WNOHANG), 0); /* it did not wait for the holder */
    assert_int_equal(lines_within(dir, PAST_THE_RING, 0), PAST_THE_RING);
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    cc_case_list_free(&l);
}

/* The JSON string writer's word-at-a-time skip against a byte loop (the rules restated here):
 * plain ASCII as it is, '"' and '\\' escaped, '\n' as \n, other controls as \u00XX, whole
 * UTF-8 characters as they are, any other byte as \ufffd; random strings of those pieces, at
 * every length and alignment around the 8-byte words. */
static void escape_bytewise(const char *s, char *o)
{
    *o++ = '"';
    while (*s) {
        unsigned char ch = (unsigned char)*s;
        size_t k = ch >= 0x80 ? cc_utf8_char_len((const unsigned char *)s, 4) : 0;
        if (ch >= 0x20 && ch < 0x80 && ch != '"' && ch != '\\') {
            *o++ = (char)ch;
        } else if (k) {
            memcpy(o, s, k);
            o += k;
            s += k;
            continue;
        } else if (ch >= 0x80) {
            o += sprintf(o, "\\ufffd");
        } else if (ch == '\n') {
            o += sprintf(o, "\\n");
        } else if (ch < 0x20) {
            o += sprintf(o, "\\u%04x", ch);
        } else {
            *o++ = '\\';
            *o++ = (char)ch;
        }
        s++;
    }
    *o++ = '"';
    *o = 0;
}

static void test_strings_escape_as_bytewise(void **state)
{
    (void)state;
    static const char *const pieces[] = {"a", "Z", " ", "~", "0", "\"", "\\", "\n", "\x01",
                                         "\x1f", "\x7f", "\xc3\xa9", "\xe2\x82\xac",
                                         "\xf0\x9f\x98\x80", "\x80", "\xc3", "\xff", "abcdefgh",
                                         "in=[12,4],[12,4] stream=2 "};
    const size_t n_pieces = sizeof pieces / sizeof pieces[0];
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    cc_strbuf b = {0};
    for (int t = 0; t < 200000; t++) {
        char text[512] = "", want[4096];
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        int parts = (int)(rng >> 59); /* 0..31 */
        for (int k = 0; k < parts; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            strcat(text, pieces[(rng >> 33) % n_pieces]);
        }
        escape_bytewise(text, want);
        cc_strbuf_clear(&b);
        cc_json_put_string(&b, text);
        assert_false(b.failed);
        if (strcmp(b.data, want) != 0)
            fail_msg("escaped %s as %s (want %s)", text, b.data, want);
    }
    cc_strbuf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seconds_are_printf_text),
        cmocka_unit_test(test_result_round_trip),
        cmocka_unit_test(test_json_reader),
        cmocka_unit_test(test_numbers_are_printf_text),
        cmocka_unit_test(test_journal_order_and_torn_tail),
        cmocka_unit_test(test_writer_process),
        cmocka_unit_test(test_strings_escape_as_bytewise),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
