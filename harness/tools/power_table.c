#include "harness/tools/power_table.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/grow.h"
#include "harness/evidence/merge.h"
#include "harness/run/power.h"

/* ---- the table ----------------------------------------------------------------------------- */

typedef struct {
    char op[32];
    cc_dtype dtype;
    cc_device device;
    long cases, measured; /* results with power figures; those that passed (the ones that count) */
    cc_power min;         /* the smallest figures over the measured cases */
    /* every measured case's k (fail, suspect), for the median: how a typical case rejects */
    double *k_fail, *k_suspect;
    size_t n_fail, n_suspect, cap_fail, cap_suspect;
    /* measured cases the rounding-bias test reaches; of them, those that reject a truncating
     * kernel by the bound alone and with the test */
    long trunc_cases, trunc_by_bound, trunc_by_test;
} power_row;

typedef struct {
    power_row *v;
    size_t n, cap;
    char accumulation[16];
} power_table;

static power_row *power_row_of(power_table *t, const char *op, cc_dtype dtype, cc_device device,
                               int add)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->v[i].op, op) == 0 && t->v[i].dtype == dtype && t->v[i].device == device)
            return &t->v[i];
    if (!add)
        return NULL;
    power_row *grown = cc_grow(t->v, t->n, &t->cap, sizeof *grown, 64);
    if (!grown)
        return NULL;
    t->v = grown;
    power_row *row = &t->v[t->n++];
    memset(row, 0, sizeof *row);
    snprintf(row->op, sizeof row->op, "%s", op);
    row->dtype = dtype;
    row->device = device;
    cc_power_init(&row->min);
    return row;
}

static int push(double **v, size_t *n, size_t *cap, double x)
{
    if (isnan(x))
        return 0;
    double *grown = cc_grow(*v, *n, cap, sizeof *grown, 64);
    if (!grown)
        return -1;
    *v = grown;
    (*v)[(*n)++] = x;
    return 0;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of n values (sorted in place); NaN for none. */
static double median(double *v, size_t n)
{
    if (!n)
        return NAN;
    qsort(v, n, sizeof *v, by_value);
    return v[n / 2];
}

static void power_table_free(power_table *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].k_fail), free(t->v[i].k_suspect);
    free(t->v);
    memset(t, 0, sizeof *t);
}

/* The table of the run in dir; 0, or -1 after one sentence on err. */
static int power_table_load(const char *dir, power_table *t, FILE *err)
{
    memset(t, 0, sizeof *t);
    cc_run run;
    char msg[1024];
    if (cc_run_load(dir, CC_LOAD_RESULTS, &run, msg, sizeof msg)) {
        fprintf(err, "capcheck power: %s\n", msg);
        return -1;
    }
    int any = 0, rc = 0;
    for (size_t i = 0; i < run.n_results && rc == 0; i++) {
        const cc_result *r = &run.results[i];
        if (!r->has_power)
            continue;
        any = 1;
        snprintf(t->accumulation, sizeof t->accumulation, "%s",
                 cc_accumulation_name(r->accumulation));
        power_row *row = power_row_of(t, r->op, r->dtype, r->device, 1);
        if (!row) {
            fprintf(err, "capcheck power: out of memory\n");
            rc = -1;
            break;
        }
        row->cases++;
        if (r->status != CC_RES_PASS) /* a case that already fails measures nothing */
            continue;
        row->measured++;
        if (!isnan(r->power.trunc)) {
            row->trunc_cases++;
            row->trunc_by_bound += r->power.trunc_bound > 0;
            row->trunc_by_test += r->power.trunc > 0;
        }
        cc_power_keep_smaller(&row->min.k_fail, r->power.k_fail);
        cc_power_keep_smaller(&row->min.ulp_fail, r->power.ulp_fail);
        if (push(&row->k_fail, &row->n_fail, &row->cap_fail, r->power.k_fail))
            rc = -1;
        if (!r->suspect) { /* one that is already suspect measures nothing under suspect */
            cc_power_keep_smaller(&row->min.k_suspect, r->power.k_suspect);
            cc_power_keep_smaller(&row->min.ulp_suspect, r->power.ulp_suspect);
            if (push(&row->k_suspect, &row->n_suspect, &row->cap_suspect, r->power.k_suspect))
                rc = -1;
        }
        if (rc)
            fprintf(err, "capcheck power: out of memory\n");
    }
    if (rc == 0 && !any) {
        fprintf(err, "capcheck power: %s has no power figures (run it with --power)\n", dir);
        rc = -1;
    }
    cc_run_free(&run);
    if (rc)
        power_table_free(t);
    return rc;
}

/* A figure as the table prints it: "exact" (NaN: the provider made no error), "> 2^30" (+Inf:
 * nothing on the ladder), "-" (no measured case), else the ladder value. */
static void power_figure(FILE *f, double v, long measured)
{
    if (!measured)
        fputs("-", f);
    else if (isnan(v))
        fputs("exact", f);
    else if (isinf(v))
        fputs("> 2^30", f);
    else
        fprintf(f, "%.3g", v);
}

/* A cell: the figure, or "before -> figure" beside a before table. */
static void power_cell(FILE *f, const power_row *b, double bv, const power_row *row, double v)
{
    fputc(' ', f);
    if (b) {
        power_figure(f, bv, b->measured);
        fputs(" → ", f);
    }
    power_figure(f, v, row->measured);
    fputs(" |", f);
}

/* The truncation cell: the share of the cases the rounding-bias test reaches that reject a
 * truncating kernel, by the bound alone -> with the test; "-" where it reaches none. */
static void truncation_cell(FILE *f, const power_row *row)
{
    if (!row->trunc_cases)
        fputs(" - |", f);
    else
        fprintf(f, " %.0f%% → %.0f%% |", 100.0 * (double)row->trunc_by_bound / (double)row->trunc_cases,
                100.0 * (double)row->trunc_by_test / (double)row->trunc_cases);
}

static void power_write(FILE *f, const char *dir, const power_table *t, const char *before_dir,
                        const power_table *before)
{
    fprintf(f, "Detection power of %s (%s accumulation)", dir, t->accumulation);
    if (before)
        fprintf(f, " beside %s (%s, \"before\": each cell before → after)", before_dir,
                before->accumulation);
    fprintf(f, ": per op x dtype, the smallest perturbation one of its passing cases rejects: k, "
               "each element's own error scaled by k (a kernel k times less accurate), and ulps "
               "of the dtype added to every element; failing, and counting suspect (lambda %g) "
               "as failing.\n\n",
            CC_SUSPECT_LAMBDA);
    fputs("k: the smallest over the cases (the suite rejects a kernel that much less accurate "
          "everywhere); median k: the median case's (how a typical case rejects). truncating: "
          "of the passing cases the rounding-bias test reaches, the share that reject a kernel "
          "converting the exact result to the dtype toward zero, by the bound alone → with the "
          "test.\n\n", f);
    fputs("| op | dtype | device | cases | passing | k fail | k suspect | median k fail | "
          "median k suspect | ulps fail | ulps suspect | truncating |\n"
          "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
          f);
    static const power_row none = {.min = {NAN, NAN, NAN, NAN, NAN, NAN}};
    for (size_t i = 0; i < t->n; i++) {
        power_row *row = &t->v[i];
        power_row *b = NULL;
        if (before) {
            b = power_row_of((power_table *)before, row->op, row->dtype, row->device, 0);
            if (!b)
                b = (power_row *)&none;
        }
        fprintf(f, "| %s | %s | %s | %ld | %ld |", row->op, cc_dtype_name(row->dtype),
                cc_device_name(row->device), row->cases, row->measured);
        power_cell(f, b, b ? b->min.k_fail : NAN, row, row->min.k_fail);
        power_cell(f, NULL, NAN, row, row->min.k_suspect);
        power_cell(f, b, b ? median(b->k_fail, b->n_fail) : NAN, row,
                   median(row->k_fail, row->n_fail));
        power_cell(f, NULL, NAN, row, median(row->k_suspect, row->n_suspect));
        power_cell(f, b, b ? b->min.ulp_fail : NAN, row, row->min.ulp_fail);
        power_cell(f, NULL, NAN, row, row->min.ulp_suspect);
        truncation_cell(f, row);
        fputc('\n', f);
    }
}

int cc_power_command(int argc, char **argv, FILE *out, FILE *err)
{
    const char *dir = NULL, *md_path = NULL, *before_dir = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--markdown") == 0 && i + 1 < argc)
            md_path = argv[++i];
        else if (strcmp(argv[i], "--before") == 0 && i + 1 < argc)
            before_dir = argv[++i];
        else if (argv[i][0] != '-' && !dir)
            dir = argv[i];
        else {
            fprintf(err, "capcheck power: usage: capcheck power DIR [--before DIR] [--markdown "
                         "FILE] (DIR: a run made with --power)\n");
            return 2;
        }
    }
    if (!dir) {
        fprintf(err, "capcheck power: give the folder of a run made with --power\n");
        return 2;
    }
    power_table t, b;
    memset(&b, 0, sizeof b);
    if (power_table_load(dir, &t, err))
        return 2;
    if (before_dir && power_table_load(before_dir, &b, err)) {
        power_table_free(&t);
        return 2;
    }
    int rc = 0;
    FILE *md = NULL;
    if (md_path && !(md = fopen(md_path, "w"))) {
        fprintf(err, "capcheck power: cannot write %s\n", md_path);
        rc = 2;
    }
    for (FILE *f = out; rc == 0 && f; f = f == out ? md : NULL)
        power_write(f, dir, &t, before_dir, before_dir ? &b : NULL);
    if (md && fclose(md)) {
        fprintf(err, "capcheck power: cannot write %s\n", md_path);
        rc = 2;
    }
    power_table_free(&t);
    power_table_free(&b);
    return rc;
}
