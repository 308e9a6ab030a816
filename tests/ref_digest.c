/* ref_digest: what the reference computes for every case of some case files, as one sha256 per
 * case, or how long it takes per op.
 *
 *   capcheck_ref_digest [--time] [--inputs] [--op NAME] FILE...
 *   capcheck_ref_digest --time-inputs [--op NAME] FILE...
 *
 * Each case is materialized as `capcheck run` does (same seeds, same rounded inputs); then the
 * reference forward runs with magnitudes and, unless the case is check=fwd, the VJP with the
 * gradient magnitudes of every data input, as the runner calls them. Default output, one line
 * per case in case order:
 *
 *   <sha256 of status, y, m, and each grad and its magnitude, bit for bit>  <case line>
 *
 * so two builds of the reference are bit-identical on a suite exactly when their outputs diff
 * clean (scripts/bench-reference). --inputs puts the materialized inputs into each digest first:
 * the dense float64 values both sides receive, the output cotangent, and the bytes of every
 * buffer the provider is handed (strided gaps included), so the digests also say whether two
 * builds draw, round and lay out the same inputs. --time-inputs times materializing alone: each
 * case is materialized (and freed) again and again for at least 0.2 s, and the drawn elements
 * (inputs and output cotangent) per second are printed per case and in total, so two builds'
 * input paths compare side by side (scripts/bench). --time prints instead, per op, the seconds spent in the
 * reference's forward and VJP alone (materializing excluded), most expensive first.
 *
 * Uses only the public harness and reference API, so the same file also builds against an
 * older tree (scripts/bench-reference compiles it there). Exit 0, or 2 for bad arguments or a
 * file that does not parse, 1 when out of memory. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness/case/case.h"
#include "harness/case/materialize.h"
#include "core/sha256.h"

#define MAX_OPS 128 /* more than the vocabulary holds */

typedef struct {
    const char *op;
    long cases;
    double fwd_s, vjp_s, worst_s;
    char worst_line[CC_CASE_LINE_MAX];
} op_time;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Values bit for bit, except that every NaN hashes as one NaN: its sign and payload are not a
 * result (a compiler may put either operand of a commutative + first, and x86 returns the first
 * NaN operand), and nothing in capcheck reads them. */
static void hash_doubles(cc_sha256_ctx *h, const double *v, int64_t n)
{
    enum { CHUNK = 512 };
    double buf[CHUNK];
    for (int64_t at = 0; v && at < n; at += CHUNK) {
        int64_t len = n - at < CHUNK ? n - at : CHUNK;
        for (int64_t i = 0; i < len; i++)
            buf[i] = v[at + i] != v[at + i] ? NAN : v[at + i];
        cc_sha256_update(h, buf, (size_t)len * sizeof(double));
    }
}

/* The bytes of a provider view's buffer: every element up to its last addressed one. */
static void hash_view(cc_sha256_ctx *h, const cc_view *v)
{
    int64_t extent = 1;
    for (int a = 0; a < v->rank; a++) {
        if (v->shape[a] == 0)
            return;
        extent += (v->shape[a] - 1) * v->strides[a];
    }
    cc_sha256_update(h, v->data, (size_t)extent * cc_dtype_size(v->dtype));
}

static void hash_inputs(const cc_inputs *in, cc_sha256_ctx *h)
{
    for (int i = 0; i < in->n_in; i++) {
        hash_doubles(h, in->ref_in[i].v, ref_numel(&in->ref_in[i].shape));
        hash_view(h, &in->view[i]);
    }
    hash_doubles(h, in->g.v, ref_numel(&in->g.shape));
    hash_view(h, &in->g_view);
}

/* scripts/bench compiles this file against an older tree (d7d5838) to time its input path:
 * REF_DIGEST_INPUTS_ONLY leaves out the reference digests, which use today's ref_mag. */
#ifndef REF_DIGEST_INPUTS_ONLY
/* The magnitudes: worst, then dtype and prob only where the op wrote them (they differ from
 * worst somewhere), so an op without a split digests as it did before ref_mag had the planes. */
static void hash_mag(cc_sha256_ctx *h, ref_mag *mag, int64_t n)
{
    if (!mag->worst || n <= 0)
        return;
    hash_doubles(h, mag->worst, n);
    ref_mag_complete(mag, n);
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&mag->dtype[i], &mag->worst[i], sizeof(double)) ||
            memcmp(&mag->prob[i], &mag->worst[i], sizeof(double))) {
            hash_doubles(h, mag->dtype, n);
            hash_doubles(h, mag->prob, n);
            return;
        }
}

static int is_data_input(const ref_op *op, int i)
{
    int k = i < op->max_inputs ? i : op->max_inputs - 1;
    if (k >= REF_MAX_INPUTS)
        k = REF_MAX_INPUTS - 1;
    return op->input_kind[k] == REF_IN_DATA;
}

/* Runs the reference on one materialized case; hashes what it computed into h and adds the
 * forward and VJP seconds. Returns -1 when out of memory. */
static int run_reference(const cc_case *c, const cc_inputs *in, cc_sha256_ctx *h, double *fwd_s,
                         double *vjp_s)
{
    const ref_op *op = c->op;
    int64_t ny = ref_numel(&in->out_shape);
    ref_tensor y = {in->out_shape, calloc((size_t)(ny > 0 ? ny : 1), sizeof(double))};
    ref_mag mag;
    int no_mag = ref_mag_alloc(ny, &mag);
    ref_tensor grad[REF_MAX_INPUTS];
    ref_mag gmag[REF_MAX_INPUTS];
    memset(grad, 0, sizeof grad);
    memset(gmag, 0, sizeof gmag);
    int rc = 0;
    if (!y.v || no_mag) {
        rc = -1;
        goto done;
    }
    double t0 = now_seconds();
    int fs = op->forward(&c->params, c->n_in, in->ref_in, &y, &mag);
    *fwd_s += now_seconds() - t0;
    cc_sha256_update(h, &fs, sizeof fs);
    if (fs != REF_OK)
        goto done;
    hash_doubles(h, y.v, ny);
    hash_mag(h, &mag, ny);
    if (c->check == CC_CHECK_FWD || !op->vjp)
        goto done;
    for (int i = 0; i < c->n_in; i++) {
        grad[i].shape = c->shape[i];
        if (!is_data_input(op, i))
            continue;
        int64_t n = ref_numel(&c->shape[i]);
        grad[i].v = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
        if (!grad[i].v || ref_mag_alloc(n, &gmag[i])) {
            rc = -1;
            goto done;
        }
    }
    t0 = now_seconds();
    int vs = op->vjp(&c->params, c->n_in, in->ref_in, &y, &in->g, grad, gmag);
    *vjp_s += now_seconds() - t0;
    cc_sha256_update(h, &vs, sizeof vs);
    if (vs == REF_OK)
        for (int i = 0; i < c->n_in; i++) {
            hash_doubles(h, grad[i].v, grad[i].v ? ref_numel(&c->shape[i]) : 0);
            hash_mag(h, &gmag[i], gmag[i].worst ? ref_numel(&c->shape[i]) : 0);
        }
done:
    free(y.v);
    ref_mag_free(&mag);
    for (int i = 0; i < REF_MAX_INPUTS; i++) {
        free(grad[i].v);
        ref_mag_free(&gmag[i]);
    }
    return rc;
}

static int by_total_desc(const void *a, const void *b)
{
    const op_time *x = a, *y = b;
    double tx = x->fwd_s + x->vjp_s, ty = y->fwd_s + y->vjp_s;
    return (tx < ty) - (tx > ty);
}

#endif

/* Elements drawn for case c: every input and the output cotangent. */
static double drawn_elements(const cc_inputs *in)
{
    double n = (double)ref_numel(&in->g.shape);
    for (int i = 0; i < in->n_in; i++)
        n += (double)ref_numel(&in->ref_in[i].shape);
    return n;
}

static int time_inputs(const cc_case_list *cases, const char *only_op)
{
#ifdef __GLIBC__
    /* keep freed blocks (as capcheck's workers do): time the input path, not the kernel
     * zeroing pages that glibc handed back after the previous repetition */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
    double total_elems = 0, total_s = 0;
    for (size_t k = 0; k < cases->n; k++) {
        const cc_case *c = &cases->v[k];
        if (only_op && strcmp(c->op->name, only_op) != 0)
            continue;
        char line[CC_CASE_LINE_MAX], msg[256];
        cc_case_print(c, line, sizeof line);
        cc_inputs in;
        double elems = 0, t0 = now_seconds(), t;
        long reps = 0;
        do {
            if (cc_materialize(c, &in, msg, sizeof msg)) {
                fprintf(stderr, "ref_digest: %s: %s\n", line, msg);
                return 1;
            }
            elems += drawn_elements(&in);
            cc_inputs_free(&in);
            reps++;
            t = now_seconds() - t0;
        } while (t < 0.2);
        printf("%10.1f M elements/s  %5ld reps  %s\n", elems / t / 1e6, reps, line);
        total_elems += elems;
        total_s += t;
    }
    printf("inputs: %.0f elements in %.3f s: %.1f M elements/s\n", total_elems, total_s,
           total_s > 0 ? total_elems / total_s / 1e6 : 0.0);
    return 0;
}

int main(int argc, char **argv)
{
    int timing = 0, inputs = 0, time_only_inputs = 0;
    const char *only_op = NULL;
    cc_case_defaults def = {CC_CPU, 0};
    cc_case_list cases = {0};
    int files = 0;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--time") == 0) {
            timing = 1;
        } else if (strcmp(argv[a], "--inputs") == 0) {
            inputs = 1;
        } else if (strcmp(argv[a], "--time-inputs") == 0) {
            time_only_inputs = 1;
        } else if (strcmp(argv[a], "--op") == 0 && a + 1 < argc) {
            only_op = argv[++a];
        } else if (argv[a][0] == '-') {
            fprintf(stderr, "ref_digest: unknown option %s (usage: [--time | --time-inputs] [--inputs] [--op NAME] "
                            "FILE...)\n",
                    argv[a]);
            return 2;
        } else {
            cc_parse_error err;
            memset(&err, 0, sizeof err);
            if (cc_cases_parse_file(argv[a], &def, &cases, &err)) {
                fprintf(stderr, "%s:%d:%d: %s\n", err.file, err.line, err.column, err.msg);
                return 2;
            }
            files++;
        }
    }
    if (!files) {
        fprintf(stderr, "ref_digest: no case file given (usage: [--time | --time-inputs] [--inputs] [--op NAME] "
                        "FILE...)\n");
        return 2;
    }

    if (time_only_inputs) {
        int rc = time_inputs(&cases, only_op);
        cc_case_list_free(&cases);
        return rc;
    }
#ifdef REF_DIGEST_INPUTS_ONLY
    fprintf(stderr, "ref_digest: this build times inputs only (--time-inputs)\n");
    cc_case_list_free(&cases);
    return 2;
#else
    static op_time times[MAX_OPS];
    int n_ops = 0;
    for (size_t k = 0; k < cases.n; k++) {
        const cc_case *c = &cases.v[k];
        if (only_op && strcmp(c->op->name, only_op) != 0)
            continue;
        char line[CC_CASE_LINE_MAX];
        cc_case_print(c, line, sizeof line);
        cc_inputs in;
        char msg[256] = "";
        cc_sha256_ctx h;
        cc_sha256_init(&h);
        double fwd_s = 0, vjp_s = 0;
        if (cc_materialize(c, &in, msg, sizeof msg)) {
            cc_sha256_update(&h, msg, strlen(msg)); /* a refused case is part of the record */
        } else {
            if (inputs)
                hash_inputs(&in, &h);
            int rc = run_reference(c, &in, &h, &fwd_s, &vjp_s);
            cc_inputs_free(&in);
            if (rc) {
                fprintf(stderr, "ref_digest: out of memory on %s\n", line);
                return 1;
            }
        }
        if (!timing) {
            char hex[65];
            cc_sha256_final_hex(&h, hex);
            printf("%s  %s\n", hex, line);
            continue;
        }
        int j = 0;
        while (j < n_ops && strcmp(times[j].op, c->op->name) != 0)
            j++;
        if (j == n_ops) {
            if (n_ops == MAX_OPS)
                continue;
            times[n_ops++].op = c->op->name;
        }
        times[j].cases++;
        times[j].fwd_s += fwd_s;
        times[j].vjp_s += vjp_s;
        if (fwd_s + vjp_s > times[j].worst_s) {
            times[j].worst_s = fwd_s + vjp_s;
            snprintf(times[j].worst_line, sizeof times[j].worst_line, "%s", line);
        }
    }
    if (timing) {
        qsort(times, (size_t)n_ops, sizeof times[0], by_total_desc);
        double total = 0;
        for (int j = 0; j < n_ops; j++)
            total += times[j].fwd_s + times[j].vjp_s;
        printf("reference seconds (forward + VJP, materializing excluded): %.3f\n", total);
        printf("%-18s %7s %9s %9s %9s  %s\n", "op", "cases", "forward", "vjp", "worst",
               "worst case");
        for (int j = 0; j < n_ops; j++)
            printf("%-18s %7ld %9.3f %9.3f %9.3f  %s\n", times[j].op, times[j].cases,
                   times[j].fwd_s, times[j].vjp_s, times[j].worst_s, times[j].worst_line);
    }
    cc_case_list_free(&cases);
    return 0;
#endif
}
