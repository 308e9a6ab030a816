#define _POSIX_C_SOURCE 200809L
#include "harness/report/report_out.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "harness/report/capsules.h"
#include "harness/report/html.h"
#include "core/dtype.h"
#include "core/files.h"

#include <sys/stat.h>

/* ---- JUnit XML ----------------------------------------------------------------------------- */

static void write_junit(const cc_report *rep, const cc_catalog *cat, FILE *f)
{
    long failures = 0, errors = 0, skipped = 0;
    for (size_t i = 0; i < rep->n; i++) {
        const cc_report_row *r = &rep->rows[i];
        if (cc_count_errors(r->counts))
            errors++;
        else if (r->counts[CC_RES_FAIL])
            failures++;
        else if (r->counts[CC_RES_PASS] == 0)
            skipped++;
    }
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<testsuites name=\"capcheck\" tests=\"%zu\" failures=\"%ld\" errors=\"%ld\" "
               "skipped=\"%ld\">\n",
            rep->n, failures, errors, skipped);
    fprintf(f, "  <testsuite name=\"capcheck ");
    cc_html_text(f, rep->case_files);
    fprintf(f, "\" tests=\"%zu\" failures=\"%ld\" errors=\"%ld\" skipped=\"%ld\">\n", rep->n,
            failures, errors, skipped);
    fprintf(f, "    <properties>\n      <property name=\"provider\" value=\"");
    cc_html_text(f, rep->provider_description);
    fprintf(f, "\"/>\n      <property name=\"base_seed\" value=\"%llu\"/>\n", rep->base_seed);
    for (int i = 0; i < rep->provenance.n_platforms; i++) {
        char facts[1024];
        cc_platform_summary(&rep->provenance.platforms[i], facts, sizeof facts);
        fputs("      <property name=\"platform ", f);
        cc_html_text(f, rep->provenance.platforms[i].key);
        fputs("\" value=\"", f);
        cc_html_text(f, facts);
        fputs("\"/>\n", f);
    }
    fputs("    </properties>\n", f);
    for (size_t i = 0; i < rep->n; i++) {
        const cc_report_row *r = &rep->rows[i];
        cc_capsule adhoc;
        const cc_capsule *cap =
            cc_catalog_resolve(cat, &rep->provenance.provider, r->provider,
                               cc_device_name(r->device), r->op, r->vjp_mode, &adhoc);
        fprintf(f, "    <testcase classname=\"");
        cc_html_text(f, cap->name);
        fprintf(f, "\" name=\"%s %s %s", r->op, cc_dtype_name(r->dtype),
                cc_device_name(r->device));
        if (r->platform[0]) {
            fputs(" on ", f);
            cc_html_text(f, r->platform);
        }
        fputs("\">\n", f);
        long errs = cc_count_errors(r->counts);
        if (errs || r->counts[CC_RES_FAIL]) {
            const char *tag = errs ? "error" : "failure";
            fprintf(f, "      <%s type=\"%s\" message=\"%ld of %ld cases did not pass (%ld failed, "
                       "%ld errors, %ld crashed, %ld timed out); worst bound ratio %.4g\">",
                    tag, errs ? "error" : "fail", r->cases - r->counts[CC_RES_PASS], r->cases,
                    r->counts[CC_RES_FAIL], r->counts[CC_RES_ERROR], r->counts[CC_RES_CRASH],
                    r->counts[CC_RES_TIMEOUT], r->worst_ratio);
            char cmd[2600];
            cc_repro_command_on(&rep->repro, r->worst_failure, r->platform,
                                rep->provenance.platforms, rep->provenance.n_platforms, cmd,
                                sizeof cmd);
            fprintf(f, "worst: %s: ", cc_result_status_name(r->worst_failure_status));
            cc_html_text(f, r->worst_failure_msg);
            fputc('\n', f);
            cc_html_text(f, cmd);
            fprintf(f, "</%s>\n", tag);
        } else if (r->counts[CC_RES_PASS] == 0) {
            fprintf(f, "      <skipped message=\"%ld cases unsupported by the provider\"/>\n",
                    r->counts[CC_RES_UNSUPPORTED]);
        }
        char cmd[2600];
        cc_repro_command_on(&rep->repro, r->worst_line, r->platform, rep->provenance.platforms,
                            rep->provenance.n_platforms, cmd, sizeof cmd);
        fprintf(f, "      <system-out>%ld cases, %ld passed, %ld unsupported; worst bound ratio "
                   "%.4g: ",
                r->cases, r->counts[CC_RES_PASS], r->counts[CC_RES_UNSUPPORTED], r->worst_ratio);
        cc_html_text(f, cmd);
        fprintf(f, "</system-out>\n    </testcase>\n");
    }
    fprintf(f, "  </testsuite>\n</testsuites>\n");
}

int cc_report_write_junit(const cc_report *rep, const char *path)
{
    cc_catalog cat;
    char msg[256];
    if (cc_catalog_load(NULL, &cat, msg, sizeof msg))
        memset(&cat, 0, sizeof cat); /* every row then gets its ad-hoc capsule name */
    cc_write_atomic w;
    FILE *f = cc_write_atomic_open(&w, path);
    int rc = -1;
    if (f) {
        write_junit(rep, &cat, f);
        rc = cc_write_atomic_close(&w, 0, 0);
    }
    cc_catalog_free(&cat);
    return rc;
}

/* ---- all outputs --------------------------------------------------------------------------- */

int cc_report_write_outputs(const cc_report *rep, const char *dir, char *msg, size_t len)
{
    static const char *const names[] = {"report.json", "report.md", "report.junit.xml"};
    for (int i = 0; i < 3; i++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        int rc = i == 0   ? cc_report_write_json(rep, path)
                 : i == 1 ? cc_report_write_markdown(rep, path)
                          : cc_report_write_junit(rep, path);
        if (rc) {
            snprintf(msg, len, "cannot write %s: %s", path, strerror(errno));
            return -1;
        }
    }
    return 0;
}

const char *cc_dir_holds_run(const char *dir)
{
    static const char *const names[] = {"results.jsonl", "run.json", "report.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat st;
        if (stat(path, &st) == 0 && (st.st_size > 0 || i > 0))
            return names[i];
    }
    return NULL;
}

int cc_make_dir(const char *path)
{
    char buf[2048];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(buf, 0777);
            *p = '/';
        }
    if (mkdir(buf, 0777) && errno != EEXIST)
        return -1;
    struct stat st;
    if (stat(buf, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    errno = ENOTDIR;
    return -1;
}
