/* capcheck command line: run, repro, list. Exit codes: 0 all passed, 1 some case did not pass,
 * 2 bad input or environment (unknown op, malformed line, missing file, absent device). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness/case.h"
#include "harness/dtype.h"
#include "harness/report.h"
#include "harness/runner.h"
#include "reference/ref_families.h"

extern const char cc_embedded_smoke_cases[]; /* cases/smoke.cases, embedded at build time */

static void usage(FILE *f)
{
    fprintf(f,
            "usage:\n"
            "  capcheck run [FILE...] [--provider aten|reference] [--device cpu|cuda]\n"
            "               [--out DIR] [--seed N] [--op NAME]\n"
            "      run case files (default: the embedded smoke cases) and write\n"
            "      DIR/results.jsonl, DIR/report.json, DIR/report.md (DIR default: out)\n"
            "  capcheck repro 'CASE LINE' [--provider ...] [--device ...]\n"
            "      rerun one case alone and show its worst element\n"
            "  capcheck list ops\n"
            "      every op of the vocabulary with its forward/VJP status in the reference\n");
}

typedef struct {
    const char *provider, *device, *out, *op_filter;
    unsigned long long seed;
    const char *files[64];
    int n_files;
    const char *line;
} options;

static int parse_options(int argc, char **argv, int first, options *o)
{
    memset(o, 0, sizeof *o);
    o->provider = "aten";
    o->device = "cpu";
    o->out = "out";
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = NULL;
        if (strcmp(a, "--provider") == 0)
            slot = &o->provider;
        else if (strcmp(a, "--device") == 0)
            slot = &o->device;
        else if (strcmp(a, "--out") == 0)
            slot = &o->out;
        else if (strcmp(a, "--op") == 0)
            slot = &o->op_filter;
        else if (strcmp(a, "--seed") == 0) {
            char *end;
            if (i + 1 >= argc || (o->seed = strtoull(argv[i + 1], &end, 0), *end)) {
                fprintf(stderr, "capcheck: --seed wants an unsigned integer\n");
                return -1;
            }
            i++;
            continue;
        } else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "capcheck: unknown option %s\n", a);
            return -1;
        } else {
            if (o->n_files >= 64) {
                fprintf(stderr, "capcheck: at most 64 case files\n");
                return -1;
            }
            o->files[o->n_files++] = a;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "capcheck: %s needs a value\n", a);
            return -1;
        }
        *slot = argv[++i];
    }
    return 0;
}

static void print_parse_error(const cc_parse_error *e)
{
    if (e->line > 0)
        fprintf(stderr, "%s:%d:%d: %s\n", e->file, e->line, e->column, e->msg);
    else
        fprintf(stderr, "%s: %s\n", e->file, e->msg);
}

/* Pick and initialise the provider; NULL (after one clear sentence) when it cannot run. */
static const cc_provider *open_provider(const char *name, cc_device device)
{
    const cc_provider *p = NULL;
    if (strcmp(name, "aten") == 0) {
        p = cc_aten_provider();
        if (!p) {
            fprintf(stderr, "capcheck: this build has no ATen provider (configure with libtorch: "
                            "run scripts/setup)\n");
            return NULL;
        }
    } else if (strcmp(name, "reference") == 0) {
        p = cc_reference_provider();
    } else {
        fprintf(stderr, "capcheck: unknown provider '%s' (aten, reference)\n", name);
        return NULL;
    }
    char msg[256] = "";
    if (p->init && p->init(p->ctx, device, msg, sizeof msg) != CC_OK) {
        fprintf(stderr, "capcheck: provider %s cannot run on %s: %s\n", p->name,
                cc_device_name(device), msg);
        return NULL;
    }
    return p;
}

static int make_dir(const char *path)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(buf, 0777);
            *p = '/';
        }
    if (mkdir(buf, 0777) && errno != EEXIST)
        return -1;
    return 0;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmd_run(const options *o, int argc, char **argv)
{
    cc_device device;
    if (cc_device_parse(o->device, &device)) {
        fprintf(stderr, "capcheck: unknown device '%s' (cpu, cuda)\n", o->device);
        return 2;
    }
    cc_case_defaults def = {device, o->seed};
    cc_case_list cases = {0};
    cc_parse_error err;
    memset(&err, 0, sizeof err);
    char files[512] = "";
    if (o->n_files == 0) {
        snprintf(files, sizeof files, "embedded:smoke.cases");
        if (cc_cases_parse_text(cc_embedded_smoke_cases, "embedded:smoke.cases", &def, &cases,
                                &err)) {
            print_parse_error(&err);
            return 2;
        }
    }
    for (int i = 0; i < o->n_files; i++) {
        if (cc_cases_parse_file(o->files[i], &def, &cases, &err)) {
            print_parse_error(&err);
            cc_case_list_free(&cases);
            return 2;
        }
        size_t used = strlen(files);
        snprintf(files + used, sizeof files - used, "%s%s", used ? " " : "", o->files[i]);
    }
    if (o->op_filter && !ref_op_find(o->op_filter)) {
        fprintf(stderr, "capcheck: --op: unknown op '%s'\n", o->op_filter);
        cc_case_list_free(&cases);
        return 2;
    }
    /* every case's device must be one the provider can run on: check each distinct device */
    const cc_provider *p = NULL;
    int device_seen[CC_DEVICE_COUNT] = {0};
    for (size_t i = 0; i < cases.n; i++) {
        if (device_seen[cases.v[i].device]++)
            continue;
        if (!(p = open_provider(o->provider, cases.v[i].device))) {
            cc_case_list_free(&cases);
            return 2;
        }
    }
    if (!p && !(p = open_provider(o->provider, device))) {
        cc_case_list_free(&cases);
        return 2;
    }
    if (make_dir(o->out)) {
        fprintf(stderr, "capcheck: cannot create the output folder %s: %s\n", o->out,
                strerror(errno));
        cc_case_list_free(&cases);
        return 2;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/results.jsonl", o->out);
    FILE *journal = fopen(path, "w");
    if (!journal) {
        fprintf(stderr, "capcheck: cannot write %s: %s\n", path, strerror(errno));
        cc_case_list_free(&cases);
        return 2;
    }
    cc_report rep;
    cc_report_init(&rep);
    p->describe ? p->describe(p->ctx, rep.provider_description, sizeof rep.provider_description)
                : (void)snprintf(rep.provider_description, sizeof rep.provider_description, "%s",
                                 p->name);
    snprintf(rep.case_files, sizeof rep.case_files, "%s", files);
    rep.base_seed = o->seed;
    for (int i = 0, used = 0; i < argc && used < (int)sizeof rep.command - 1; i++)
        used += snprintf(rep.command + used, sizeof rep.command - (size_t)used, "%s%s",
                         i ? " " : "", argv[i]);

    int tty = isatty(STDERR_FILENO);
    double t0 = now_seconds(), last_progress = 0;
    size_t total = 0;
    for (size_t i = 0; i < cases.n; i++)
        total += !o->op_filter || cases.v[i].op == ref_op_find(o->op_filter);
    size_t done = 0;
    for (size_t i = 0; i < cases.n; i++) {
        const cc_case *c = &cases.v[i];
        if (o->op_filter && c->op != ref_op_find(o->op_filter))
            continue;
        cc_result r;
        cc_run_case(p, c, &r);
        cc_result_write_json(journal, &r);
        fflush(journal);
        cc_report_add(&rep, &r);
        done++;
        if (r.status != CC_RES_PASS) {
            if (tty)
                fprintf(stderr, "\r\033[K");
            fprintf(stderr, "%s: %s\n  capcheck repro '%s'\n", cc_result_status_name(r.status),
                    r.message, r.line);
        }
        double t = now_seconds();
        if (tty && (t - last_progress > 0.1 || done == total)) {
            fprintf(stderr, "\r\033[K[%zu/%zu] %s %s: %ld passed, %ld not", done, total, r.op,
                    cc_dtype_name(r.dtype), rep.counts[CC_RES_PASS],
                    rep.cases - rep.counts[CC_RES_PASS]);
            last_progress = t;
        }
    }
    if (tty)
        fprintf(stderr, "\n");
    fclose(journal);
    rep.wall_seconds = now_seconds() - t0;
    char json_path[1024], md_path[1024];
    snprintf(json_path, sizeof json_path, "%s/report.json", o->out);
    snprintf(md_path, sizeof md_path, "%s/report.md", o->out);
    int wrote = cc_report_write_json(&rep, json_path) == 0 &&
                cc_report_write_markdown(&rep, md_path) == 0;
    long not_passed = rep.cases - rep.counts[CC_RES_PASS];
    printf("capcheck: %ld cases on %s in %.2f s: %ld passed, %ld failed, %ld unsupported, "
           "%ld errors\n",
           rep.cases, p->name, rep.wall_seconds, rep.counts[CC_RES_PASS],
           rep.counts[CC_RES_FAIL], rep.counts[CC_RES_UNSUPPORTED],
           rep.counts[CC_RES_ERROR] + rep.counts[CC_RES_CRASH] + rep.counts[CC_RES_TIMEOUT]);
    printf("capcheck: report in %s (report.md, report.json, results.jsonl)\n", o->out);
    cc_report_free(&rep);
    cc_case_list_free(&cases);
    if (!wrote) {
        fprintf(stderr, "capcheck: could not write the report in %s\n", o->out);
        return 2;
    }
    return not_passed ? 1 : 0;
}

static int cmd_repro(const options *o)
{
    cc_device device;
    if (cc_device_parse(o->device, &device)) {
        fprintf(stderr, "capcheck: unknown device '%s' (cpu, cuda)\n", o->device);
        return 2;
    }
    if (o->n_files != 1) {
        fprintf(stderr, "capcheck repro: give exactly one case line in quotes\n");
        return 2;
    }
    cc_case_defaults def = {device, o->seed};
    cc_case c;
    cc_parse_error err;
    memset(&err, 0, sizeof err);
    if (cc_case_parse(o->files[0], &def, &c, &err)) {
        fprintf(stderr, "case line:1:%d: %s\n", err.column, err.msg);
        return 2;
    }
    const cc_provider *p = open_provider(o->provider, c.device);
    if (!p)
        return 2;
    cc_result r;
    cc_run_case(p, &c, &r);
    printf("case:     %s\nprovider: %s (vjpMode %s)\nstatus:   %s\n", r.line, r.provider,
           r.vjp_mode, cc_result_status_name(r.status));
    if (r.checked_fwd)
        printf("forward:  worst bound ratio %.4g\n", r.fwd_ratio);
    if (r.checked_vjp)
        printf("vjp:      worst bound ratio %.4g\n", r.vjp_ratio);
    if (r.worst_output[0])
        printf("worst:    %s%s expected %.17g got %.17g bound %.3g%s%s\n", r.worst_output,
               r.worst_index, r.expected, r.got, r.bound, r.worst_inputs[0] ? " at " : "",
               r.worst_inputs);
    if (r.message[0])
        printf("message:  %s\n", r.message);
    cc_result_write_json(stdout, &r);
    return r.status == CC_RES_PASS ? 0 : 1;
}

static int cmd_list_ops(void)
{
    int missing = 0;
    printf("%-18s %-20s %-8s %-8s %s\n", "op", "report name", "forward", "vjp", "inputs");
    for (int i = 0; i < ref_spec_op_count(); i++) {
        const char *name = ref_spec_op_name(i);
        const ref_op *op = ref_op_find(name);
        if (!op) {
            printf("%-18s %-20s %-8s %-8s\n", name, "-", "missing", "missing");
            missing++;
            continue;
        }
        char inputs[128] = "";
        for (int k = 0; k < op->max_inputs && k < REF_MAX_INPUTS; k++) {
            size_t used = strlen(inputs);
            snprintf(inputs + used, sizeof inputs - used, "%s%s", k ? "," : "",
                     op->input_names[k] ? op->input_names[k] : "?");
        }
        if (op->max_inputs > op->min_inputs && op->max_inputs == REF_MAX_INPUTS)
            strncat(inputs, ",...", sizeof inputs - strlen(inputs) - 1);
        const char *vjp = op->vjp ? "yes" : (op->requires_vjp ? "missing" : "n/a");
        if (!op->vjp && op->requires_vjp)
            missing++;
        printf("%-18s %-20s %-8s %-8s %s\n", op->name, op->report_name,
               op->forward ? "yes" : "missing", vjp, inputs);
    }
    printf("%d ops in the vocabulary, %d implemented, %d missing a forward or a required VJP\n",
           ref_spec_op_count(), ref_op_count(), missing);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("capcheck %s\n", CC_VERSION);
        return 0;
    }
    if (strcmp(argv[1], "list") == 0) {
        if (argc == 3 && strcmp(argv[2], "ops") == 0)
            return cmd_list_ops();
        fprintf(stderr, "capcheck: try 'capcheck list ops'\n");
        return 2;
    }
    options o;
    if (strcmp(argv[1], "run") == 0) {
        if (parse_options(argc, argv, 2, &o))
            return 2;
        return cmd_run(&o, argc, argv);
    }
    if (strcmp(argv[1], "repro") == 0) {
        if (parse_options(argc, argv, 2, &o))
            return 2;
        return cmd_repro(&o);
    }
    fprintf(stderr, "capcheck: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
