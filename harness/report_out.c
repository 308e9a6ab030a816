#define _POSIX_C_SOURCE 200809L
#include "harness/report_out.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/capsules.h"
#include "harness/dtype.h"
#include "harness/sha256.h"

#include <sys/stat.h>

/* ---- the sidecar hash ---------------------------------------------------------------------- */

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int cc_report_seal(const char *path)
{
    char hex[65], side[1100], tmp[1200];
    if (cc_sha256_file(path, hex))
        return -1;
    snprintf(side, sizeof side, "%s.sha256", path);
    snprintf(tmp, sizeof tmp, "%s.tmp", side);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    fprintf(f, "%s  %s\n", hex, base_name(path));
    int bad = ferror(f);
    if (fclose(f) || bad || rename(tmp, side)) {
        remove(tmp);
        return -1;
    }
    return 0;
}

int cc_report_check_seal(const char *path, char hex[65], char *msg, size_t len)
{
    if (cc_sha256_file(path, hex)) {
        snprintf(msg, len, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    char side[1100], line[256];
    snprintf(side, sizeof side, "%s.sha256", path);
    FILE *f = fopen(side, "r");
    if (!f)
        return 1;
    int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!got || strlen(line) < 64 || strspn(line, "0123456789abcdef") != 64) {
        snprintf(msg, len, "%s is not a sha256 line (\"<64 hex digits>  %s\")", side,
                 base_name(path));
        return -1;
    }
    if (strncmp(line, hex, 64) != 0) {
        snprintf(msg, len,
                 "%s does not match its hash: its content has sha256 %.16s..., %s says "
                 "%.16s...; the report was changed after it was written",
                 path, hex, side, line);
        return -1;
    }
    return 0;
}

/* ---- ordering ------------------------------------------------------------------------------ */

static int row_bad(const cc_report_row *r)
{
    return r->counts[CC_RES_FAIL] + r->counts[CC_RES_ERROR] + r->counts[CC_RES_CRASH] +
               r->counts[CC_RES_TIMEOUT] >
           0;
}

/* a before b? */
static int worse(const cc_report_row *a, const cc_report_row *b)
{
    if (row_bad(a) != row_bad(b))
        return row_bad(a);
    int na = isnan(a->worst_ratio) != 0, nb = isnan(b->worst_ratio) != 0;
    if (na != nb)
        return na;
    return !na && a->worst_ratio > b->worst_ratio;
}

void cc_report_order_worst(const cc_report *rep, size_t *order)
{
    /* insertion sort: stable, and reports have tens to hundreds of rows */
    for (size_t i = 0; i < rep->n; i++) {
        size_t j = i;
        while (j > 0 && worse(&rep->rows[i], &rep->rows[order[j - 1]])) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
}

/* ---- JUnit XML ----------------------------------------------------------------------------- */

static void xml(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        switch (ch) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            if (ch < 0x20 && ch != '\n' && ch != '\t')
                fputc(' ', f);
            else
                fputc(ch, f);
        }
    }
}

static void write_junit(const cc_report *rep, const cc_catalog *cat, FILE *f)
{
    long failures = 0, errors = 0, skipped = 0;
    for (size_t i = 0; i < rep->n; i++) {
        const cc_report_row *r = &rep->rows[i];
        if (r->counts[CC_RES_ERROR] + r->counts[CC_RES_CRASH] + r->counts[CC_RES_TIMEOUT])
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
    xml(f, rep->case_files);
    fprintf(f, "\" tests=\"%zu\" failures=\"%ld\" errors=\"%ld\" skipped=\"%ld\">\n", rep->n,
            failures, errors, skipped);
    fprintf(f, "    <properties>\n      <property name=\"provider\" value=\"");
    xml(f, rep->provider_description);
    fprintf(f, "\"/>\n      <property name=\"base_seed\" value=\"%llu\"/>\n    </properties>\n",
            rep->base_seed);
    for (size_t i = 0; i < rep->n; i++) {
        const cc_report_row *r = &rep->rows[i];
        cc_capsule adhoc;
        const cc_capsule *cap =
            cc_catalog_resolve(cat, &rep->provenance.provider, r->provider,
                               cc_device_name(r->device), r->op, r->vjp_mode, &adhoc);
        fprintf(f, "    <testcase classname=\"");
        xml(f, cap->name);
        fprintf(f, "\" name=\"%s %s %s\">\n", r->op, cc_dtype_name(r->dtype),
                cc_device_name(r->device));
        long errs = r->counts[CC_RES_ERROR] + r->counts[CC_RES_CRASH] + r->counts[CC_RES_TIMEOUT];
        if (errs || r->counts[CC_RES_FAIL]) {
            const char *tag = errs ? "error" : "failure";
            fprintf(f, "      <%s type=\"%s\" message=\"%ld of %ld cases did not pass (%ld failed, "
                       "%ld errors, %ld crashed, %ld timed out); worst bound ratio %.4g\">",
                    tag, errs ? "error" : "fail", r->cases - r->counts[CC_RES_PASS], r->cases,
                    r->counts[CC_RES_FAIL], r->counts[CC_RES_ERROR], r->counts[CC_RES_CRASH],
                    r->counts[CC_RES_TIMEOUT], r->worst_ratio);
            xml(f, r->first_failure_msg);
            fputs("\ncapcheck repro '", f);
            xml(f, r->first_failure);
            fprintf(f, "'</%s>\n", tag);
        } else if (r->counts[CC_RES_PASS] == 0) {
            fprintf(f, "      <skipped message=\"%ld cases unsupported by the provider\"/>\n",
                    r->counts[CC_RES_UNSUPPORTED]);
        }
        fprintf(f, "      <system-out>%ld cases, %ld passed, %ld unsupported; worst bound ratio "
                   "%.4g: capcheck repro '",
                r->cases, r->counts[CC_RES_PASS], r->counts[CC_RES_UNSUPPORTED], r->worst_ratio);
        xml(f, r->worst_line);
        fprintf(f, "'</system-out>\n    </testcase>\n");
    }
    fprintf(f, "  </testsuite>\n</testsuites>\n");
}

int cc_report_write_junit(const cc_report *rep, const char *path)
{
    cc_catalog cat;
    char msg[256];
    if (cc_catalog_load(NULL, &cat, msg, sizeof msg))
        memset(&cat, 0, sizeof cat); /* every row then gets its ad-hoc capsule name */
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    int rc = -1;
    if (f) {
        write_junit(rep, &cat, f);
        int bad = ferror(f);
        rc = fclose(f) || bad || rename(tmp, path) ? -1 : 0;
        if (rc)
            remove(tmp);
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
