/* The Python reproducer of one case on ATen (reproducer.h). */
#define _POSIX_C_SOURCE 200809L
#include "harness/tools/reproducer.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/dtype.h"
#include "core/json.h"
#include "harness/report/repro.h"
#include "harness/run/pool.h"

#ifndef CAPCHECK_TORCH_PYTHON
#define CAPCHECK_TORCH_PYTHON "" /* the venv of the torch capcheck was built against */
#endif

/* ---- the judged outputs --------------------------------------------------------------------- */

/* The zero-trust verdict (zero_trust.c) on an output of n elements of dtype t holding `fill`
 * (values[i], or the constant c when values is NULL): a synthetic output tells which of the
 * checks the reference rules out, by the same code that judges real ones. */
static cc_zt_verdict zt_on(const cc_judged_output *o, const double *values, double c, void *buf,
                           int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        cc_store(o->got->dtype, buf, i, values ? values[i] : c);
    cc_view v = *o->got;
    v.data = buf;
    char msg[384];
    return cc_zero_trust(o->what, o->expected, o->mag ? o->mag->worst : NULL, o->c_op, &v,
                         o->sources, o->n_sources, msg, sizeof msg);
}

static void collect(void *ctx, const cc_judged_output *o)
{
    cc_repro_outputs *outs = ctx;
    if (o->call > 0)
        return; /* the first call's outputs are the reproducer's */
    if (outs->n >= REF_MAX_INPUTS + 1 || o->at) { /* reproducers judge every element */
        outs->failed |= o->at != NULL;
        return;
    }
    cc_repro_output *r = &outs->out[outs->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->what, sizeof r->what, "%s", o->what);
    r->dtype = o->got->dtype;
    r->rank = o->got->rank;
    memcpy(r->shape, o->got->shape, sizeof r->shape);
    r->n = 1;
    for (int d = 0; d < r->rank; d++)
        r->n *= r->shape[d];
    size_t es = cc_dtype_size(r->dtype), n = (size_t)(r->n > 0 ? r->n : 1);
    r->expected = malloc(n * sizeof(double));
    r->bound = malloc(n * sizeof(double));
    r->overflow_ok = calloc(n, 1);
    r->bias_candidate = calloc(n, 1);
    r->got = malloc(n * es);
    void *scratch = malloc(n * es);
    if (!r->expected || !r->bound || !r->overflow_ok || !r->bias_candidate || !r->got ||
        !scratch) {
        outs->failed = 1;
        free(scratch);
        return;
    }
    memcpy(r->got, o->got->data ? o->got->data : r->got, (size_t)r->n * es);
    /* each element's bound is the one that judges it: its probabilistic bound where the
     * worst-case bound is vacuous and the model holds (cc_element_judging_bound) */
    double out_max = cc_output_own_max(o->expected, o->mag->worst, r->n, o->bound);
    r->bias_test = o->bound->bias_test;
    for (int64_t i = 0; i < r->n; i++) {
        cc_element_mag mag = cc_element_mag_at(o->mag, i);
        double e = o->expected[i];
        double b = cc_element_judging_bound(o->bound, mag, e, out_max, r->dtype, NULL);
        r->expected[i] = e;
        r->bound[i] = b;
        r->overflow_ok[i] = isfinite(e) && isinf(cc_round_to(r->dtype, e + copysign(b, e)));
        /* a candidate of the rounding-bias test once the value it gets is finite (0.0 here) */
        r->bias_candidate[i] = (unsigned char)cc_bias_candidate(o->bound, mag, e, 0.0, r->dtype);
    }
    r->zt_all_zero = zt_on(o, NULL, 0.0, scratch, r->n) == CC_ZT_ALL_ZERO;
    r->zt_all_equal = zt_on(o, NULL, 1.0, scratch, r->n) == CC_ZT_ALL_EQUAL;
    for (int s = 0; s < o->n_sources && s < 32; s++)
        if (o->sources[s].v && o->sources[s].n == r->n &&
            zt_on(o, o->sources[s].v, 0.0, scratch, r->n) != CC_ZT_OK)
            r->zt_copy_of |= 1u << s;
    free(scratch);
}

void cc_repro_outputs_tap(cc_repro_outputs *outs, cc_judge_tap *tap)
{
    memset(outs, 0, sizeof *outs);
    tap->seen = collect;
    tap->ctx = outs;
}

void cc_repro_outputs_free(cc_repro_outputs *outs)
{
    for (int k = 0; k < outs->n; k++) {
        free(outs->out[k].expected);
        free(outs->out[k].bound);
        free(outs->out[k].overflow_ok);
        free(outs->out[k].bias_candidate);
        free(outs->out[k].got);
    }
    memset(outs, 0, sizeof *outs);
}

/* ---- DATA ------------------------------------------------------------------------------------ */

/* A double as JSON that Python reads back to the same bits, always with a '.' or an exponent
 * (-0.0 keeps its sign); NaN, Infinity, -Infinity as Python's json module writes them (the
 * script defines those names). */
static void put_real(FILE *f, double x)
{
    if (isnan(x)) {
        fputs("NaN", f);
        return;
    }
    if (isinf(x)) {
        fputs(x > 0 ? "Infinity" : "-Infinity", f);
        return;
    }
    char tmp[40];
    for (int prec = 1; prec <= 17; prec++) { /* the shortest text that reads back exactly */
        snprintf(tmp, sizeof tmp, "%.*g", prec, x);
        if (strtod(tmp, NULL) == x)
            break;
    }
    fputs(tmp, f);
    if (!strpbrk(tmp, ".eE"))
        fputs(".0", f);
}

/* The indices i < n whose flag is set, as a JSON list. */
static void put_flagged(FILE *f, const unsigned char *flag, int64_t n)
{
    fputc('[', f);
    for (int64_t i = 0, first = 1; i < n; i++)
        if (flag[i]) {
            fprintf(f, "%s%lld", first ? "" : ", ", (long long)i);
            first = 0;
        }
    fputc(']', f);
}

static void put_ints(FILE *f, const int64_t *v, int n)
{
    fputc('[', f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%lld", i ? ", " : "", (long long)v[i]);
    fputc(']', f);
}

/* n values of a buffer of dtype t as a JSON list (integers for i64 and u8). */
static void put_values(FILE *f, cc_dtype t, const void *base, int64_t n)
{
    fputc('[', f);
    for (int64_t j = 0; j < n; j++) {
        if (j)
            fputs(", ", f);
        double x = cc_load(t, base, j);
        if (cc_dtype_is_float(t))
            put_real(f, x);
        else
            fprintf(f, "%lld", (long long)x);
    }
    fputc(']', f);
}

static void put_doubles(FILE *f, const double *v, int64_t n)
{
    fputc('[', f);
    for (int64_t j = 0; j < n; j++) {
        if (j)
            fputs(", ", f);
        put_real(f, v[j]);
    }
    fputc(']', f);
}

static void put_params(FILE *f, const ref_params *p)
{
    fprintf(f, "{\"axis\": %d, \"eps\": ", p->axis);
    put_real(f, p->eps);
    fputs(", \"lo\": ", f);
    put_real(f, p->lo);
    fputs(", \"hi\": ", f);
    put_real(f, p->hi);
    fputs(", \"alpha\": ", f);
    put_real(f, p->alpha);
    fputs(", \"beta\": ", f);
    put_real(f, p->beta);
    fputs(", \"temperature\": ", f);
    put_real(f, p->temperature);
    fputs(", \"keep_prob\": ", f);
    put_real(f, p->keep_prob);
    fprintf(f, ", \"rng_seed\": %llu, \"k\": %lld, \"start\": %lld, \"count\": %lld, "
               "\"spatial\": %d, \"kernel\": ",
            (unsigned long long)p->rng_seed, (long long)p->k, (long long)p->start,
            (long long)p->count, p->spatial);
    int sr = p->spatial > 0 && p->spatial <= 3 ? p->spatial : 0;
    put_ints(f, p->kernel, sr);
    fputs(", \"stride\": ", f);
    put_ints(f, p->stride, sr);
    fputs(", \"pad\": ", f);
    put_ints(f, p->pad, sr);
    fputs(", \"dil\": ", f);
    put_ints(f, p->dil, sr);
    fprintf(f, ", \"groups\": %lld, \"training\": %d, \"causal\": %d, \"perm\": ",
            (long long)p->groups, p->training, p->causal);
    int64_t perm[REF_MAX_RANK];
    for (int i = 0; i < p->perm_len && i < REF_MAX_RANK; i++)
        perm[i] = p->perm[i];
    put_ints(f, perm, p->perm_len > 0 && p->perm_len <= REF_MAX_RANK ? p->perm_len : 0);
    fputs(", \"target\": ", f);
    put_ints(f, p->target.dim, p->target.rank > 0 ? p->target.rank : 0);
    fprintf(f, ", \"modes\": %lld, \"variant\": %d, \"length\": %lld, \"custom_name\": ",
            (long long)p->modes, p->variant, (long long)p->length);
    char name[sizeof p->custom_name + 1];
    snprintf(name, sizeof name, "%.*s", (int)sizeof p->custom_name, p->custom_name);
    cc_json_write_string(f, name);
    fputc('}', f);
}

static const char *dtype_key(cc_dtype t)
{
    return t == CC_U8 ? "u8" : t == CC_I64 ? "i64" : cc_dtype_name(t);
}

int cc_reproducer_write_data(FILE *f, const cc_case *c, const cc_inputs *in,
                             const cc_repro_outputs *outs, const cc_reproducer_info *info)
{
    char line[CC_CASE_LINE_MAX];
    cc_case_print(c, line, sizeof line);
    const char *nl = info->one_line ? "" : "\n"; /* a record of a JSON-lines file is one line */
    fputs("{\"case\": ", f);
    cc_json_write_string(f, line);
    fputs(", \"op\": ", f);
    cc_json_write_string(f, c->op->name);
    fprintf(f, ", \"dtype\": \"%s\", \"device\": \"%s\", \"threads\": %d, \"tf32\": %s, "
               "\"deterministic\": %s, \"nonfinite_alike\": %s, \"libtorch\": ",
            cc_dtype_name(c->dtype), cc_device_name(c->device),
            info->threads > 1 ? info->threads : 1, info->tf32 ? "true" : "false",
            info->deterministic ? "true" : "false",
            (c->edges & (1u << CC_EDGE_NAN | 1u << CC_EDGE_INF)) ? "true" : "false");
    char lt[128] = "unknown";
    const char *d = info->provider_description;
    if (d && strncmp(d, "libtorch ", 9) == 0)
        snprintf(lt, sizeof lt, "%.*s", (int)strcspn(d + 9, ";"), d + 9);
    cc_json_write_string(f, lt);
    fputs(", \"capcheck\": ", f);
    cc_json_write_string(f, info->capcheck_said ? info->capcheck_said : "(no verdict recorded)");
    fprintf(f, ",%s \"params\": ", nl);
    put_params(f, &c->params);
    fprintf(f, ",%s \"out_shape\": ", nl);
    put_ints(f, in->out_shape.dim, in->out_shape.rank);
    fprintf(f, ",%s \"inputs\": [", nl);
    for (int i = 0; i < c->n_in; i++) {
        const cc_view *v = &in->view[i];
        int k = i < c->op->max_inputs ? i : c->op->max_inputs - 1;
        k = k < REF_MAX_INPUTS ? k : REF_MAX_INPUTS - 1;
        fprintf(f, "%s%s  {\"name\": ", i ? "," : "", nl);
        cc_json_write_string(f, cc_input_name(c->op, i));
        fprintf(f, ", \"dtype\": \"%s\", \"differentiable\": %s, \"shape\": ", dtype_key(v->dtype),
                c->op->input_kind[k] == REF_IN_DATA ? "true" : "false");
        put_ints(f, v->shape, v->rank);
        fputs(", \"strides\": ", f);
        put_ints(f, v->strides, v->rank);
        /* where in a cache line the buffer starts: MKL's dot products and matrix-vector
         * products peel to alignment, and their f32 sums round differently with it */
        fprintf(f, ", \"offset\": %lld, \"align\": %u,%s   \"storage\": ",
                (long long)in->offset[i], (unsigned)((uintptr_t)in->storage[i] % 64), nl);
        put_values(f, v->dtype, in->storage[i], in->storage_len[i]);
        fputc('}', f);
    }
    fprintf(f, "],%s \"g_align\": %u, \"g\": ", nl,
            (unsigned)((uintptr_t)in->g_view.data % 64));
    put_doubles(f, in->g.v, ref_numel(&in->g.shape));
    fprintf(f, ",%s \"outputs\": {", nl);
    for (int k = 0; k < outs->n; k++) {
        const cc_repro_output *r = &outs->out[k];
        fprintf(f, "%s%s  ", k ? "," : "", nl);
        cc_json_write_string(f, r->what);
        fputs(": {\"shape\": ", f);
        put_ints(f, r->shape, r->rank);
        fprintf(f, ", \"zero_trust\": {\"all_zero\": %s, \"all_equal\": %s, \"copy_of\": [",
                r->zt_all_zero ? "true" : "false", r->zt_all_equal ? "true" : "false");
        for (int s = 0, first = 1; s < 32; s++)
            if (r->zt_copy_of >> s & 1) {
                fprintf(f, "%s%d", first ? "" : ", ", s);
                first = 0;
            }
        fputs("]}, \"overflow_ok\": ", f);
        put_flagged(f, r->overflow_ok, r->n);
        if (r->bias_test) { /* the rounding-bias test (compare.h): its threshold, candidates */
            fputs(", \"bias\": {\"threshold\": ", f);
            put_real(f, cc_bias_z_threshold());
            fputs(", \"at\": ", f);
            put_flagged(f, r->bias_candidate, r->n);
            fputc('}', f);
        }
        fprintf(f, ",%s   \"expected\": ", nl);
        put_doubles(f, r->expected, r->n);
        fprintf(f, ",%s   \"bound\": ", nl);
        put_doubles(f, r->bound, r->n);
        if (info->with_got) {
            fprintf(f, ",%s   \"got_hex\": \"", nl);
            const unsigned char *b = r->got;
            for (size_t j = 0, nb = (size_t)r->n * cc_dtype_size(r->dtype); j < nb; j++)
                fprintf(f, "%02x", b[j]);
            fputc('"', f);
        }
        fputc('}', f);
    }
    fputs("}}", f);
    return ferror(f) ? -1 : 0;
}

/* ---- the script ------------------------------------------------------------------------------ */

/* The reference provider with the bound model of provider `p`: its compute roundoff. */
typedef struct {
    const cc_provider *ref, *p;
} judged_as;

static cc_status as_forward(void *ctx, const cc_call *call, cc_view *out, char *msg, size_t len)
{
    const judged_as *j = ctx;
    return j->ref->forward(j->ref->ctx, call, out, msg, len);
}

static cc_status as_vjp(void *ctx, const cc_call *call, const cc_view *g, cc_view *grads,
                        char *msg, size_t len)
{
    const judged_as *j = ctx;
    return j->ref->vjp(j->ref->ctx, call, g, grads, msg, len);
}

static double as_roundoff(void *ctx, const char *op, cc_dtype t, cc_device d)
{
    const judged_as *j = ctx;
    return j->p && j->p->compute_roundoff ? j->p->compute_roundoff(j->p->ctx, op, t, d) : 0.0;
}

/* The lowering's prelude (before its first "# ==== ops" line) and the section naming op. */
static int put_lowering(FILE *f, const char *op)
{
    const char *text = cc_embedded_aten_lowering, *marker = "\n# ==== ops ";
    const char *first = strstr(text, marker);
    if (!first)
        return -1;
    fwrite(text, 1, (size_t)(first - text + 1), f);
    int found = 0;
    for (const char *s = first; s; s = strstr(s + 1, marker)) {
        const char *names = s + strlen(marker), *eol = strchr(names, '\n');
        const char *next = strstr(s + 1, marker);
        size_t ln = strlen(op);
        int mine = 0;
        for (const char *w = names; w && w < eol; w = strchr(w, ' ') ? strchr(w, ' ') + 1 : NULL)
            mine |= strncmp(w, op, ln) == 0 && (w[ln] == ' ' || w + ln == eol);
        if (mine) {
            const char *end = next ? next + 1 : text + strlen(text);
            fwrite(s + 1, 1, (size_t)(end - (s + 1)), f);
            found = 1;
        }
    }
    return found ? 0 : -1;
}

int cc_reproducer_write(const cc_case *c, const cc_provider *p, cc_accumulation acc,
                        const cc_reproducer_info *info, FILE *f, char *msg, size_t msg_len)
{
    cc_inputs in;
    char m[256] = "";
    /* laid out as a run's worker lays them out (guarded, at the end of their pages): the same
     * alignment of every buffer */
    if (cc_materialize_in(c, 1, NULL, CC_PLACE_END, cc_online_cpus(), &in, m, sizeof m)) {
        snprintf(msg, msg_len, "cannot materialize the case: %s", m);
        return -1;
    }
    /* capcheck's judgement: the reference run under p's bound model, every element */
    judged_as ja = {cc_reference_provider(), p};
    cc_provider judge = *ja.ref;
    judge.ctx = &ja;
    judge.forward = as_forward;
    judge.vjp = as_vjp;
    judge.compute_roundoff = as_roundoff;
    if (p && p->init) /* the math modes the roundoff depends on (TF32), on the CPU */
        p->init(p->ctx, CC_CPU, m, sizeof m);
    cc_repro_outputs outs;
    cc_judge_tap tap;
    cc_repro_outputs_tap(&outs, &tap);
    cc_run_options o = {.unguarded = 1, .threads = cc_online_cpus(), .ref = CC_REF_FULL,
                        .accumulation = acc, .tap = &tap};
    cc_result r;
    cc_case one = *c; /* forward and VJP each on their own: a forward failure keeps the VJP */
    if (c->check != CC_CHECK_VJP) {
        one.check = CC_CHECK_FWD;
        cc_run_case_probed(&judge, &one, &o, NULL, &r);
    }
    if (c->check != CC_CHECK_FWD && c->op->vjp) {
        one.check = CC_CHECK_VJP;
        cc_run_case_probed(&judge, &one, &o, NULL, &r);
    }
    int rc = 0;
    if (outs.failed) {
        snprintf(msg, msg_len, "out of memory keeping the reference's values");
        rc = -1;
    } else if (outs.n == 0) { /* nothing to judge: the reference itself refused the case */
        snprintf(msg, msg_len, "the reference judged no output of the case: %s", r.message);
        rc = -1;
    }
    char line[CC_CASE_LINE_MAX];
    cc_case_print(c, line, sizeof line);
    const char *python = info->python ? info->python : "python3";
    fprintf(f,
            "#!%s%s\n"
            "# A reproducer written by capcheck: ATen's calls for one case, judged as capcheck\n"
            "# judges them. It needs torch alone (the libtorch to test: its Python).\n"
            "#   %s\n"
            "# Run it:  %s <this file>\n"
            "# Exit 0: every element within capcheck's bound; 1: an element over it, a NaN/Inf\n"
            "# mismatch, a zero-trust failure, or an error from ATen; 125: nothing could be\n"
            "# judged (no torch, no device, unsupported, out of memory). git bisect run reads\n"
            "# them as good, bad and skip.\n",
            python[0] == '/' ? "" : "/usr/bin/env ", python, line, python);
    if (info->repro_command)
        fprintf(f, "# The same case through capcheck:\n#   %s\n", info->repro_command);
    fputs("import math\nimport sys\nimport warnings\n\n"
          "warnings.filterwarnings('ignore', message='Failed to initialize NumPy')\n"
          "try:\n    import torch\nexcept ImportError as e:\n"
          "    print('status:   cannot judge: %s has no torch (%s): run this with the Python of "
          "the libtorch to test' % (sys.executable, e))\n    sys.exit(125)\n\n",
          f);
    if (put_lowering(f, c->op->name)) {
        snprintf(msg, msg_len, "the ATen lowering has no section for %s", c->op->name);
        rc = -1;
    }
    fputs(cc_embedded_reproducer_py, f);
    fputs("\n\nNaN, Infinity, true, false, null = math.nan, math.inf, True, False, None\n"
          "# capcheck's case: its inputs as laid out, and per output capcheck's float64\n"
          "# reference (expected) and the bound of every element\n"
          "DATA = ",
          f);
    if (cc_reproducer_write_data(f, c, &in, &outs, info))
        rc = -1;
    fputs("\n\nif __name__ == '__main__':\n    sys.exit(main(sys.argv[1:]))\n", f);
    cc_repro_outputs_free(&outs);
    cc_inputs_free(&in);
    if (ferror(f)) {
        snprintf(msg, msg_len, "write error");
        rc = -1;
    }
    return rc;
}

int cc_reproducer_python(char *buf, size_t n)
{
    const char *env = getenv("CAPCHECK_PYTHON"), *lib = getenv("CAPCHECK_LIBTORCH");
    char cand[3][4096];
    int k = 0;
    if (env && *env)
        snprintf(cand[k++], sizeof cand[0], "%s", env);
    if (lib && *lib) /* VENV/lib/python3.X/site-packages/torch/lib -> VENV/bin */
        snprintf(cand[k++], sizeof cand[0], "%s/../../../../../bin/python", lib);
    snprintf(cand[k++], sizeof cand[0], "%s", CAPCHECK_TORCH_PYTHON);
    for (int i = 0; i < k; i++)
        if (cand[i][0] == '/' && access(cand[i], X_OK) == 0) {
            snprintf(buf, n, "%s", cand[i]);
            return 1;
        }
    snprintf(buf, n, "python3");
    return 0;
}

int cc_reproducer_hand_out(const cc_case *c, const cc_provider *p, const cc_result *r,
                           const char *repro_cmd, const char *path, FILE *out, FILE *err)
{
    if (!p || strcmp(p->name, "aten") != 0) {
        fprintf(out, "reproducer: the repro line above: provider %s is not ATen, and a Python "
                     "reproducer would run ATen's calls, not %s's (none written)\n",
                p ? p->name : "?", p ? p->name : "its");
        return 0;
    }
    char python[4096], desc[512] = "", said[600] = "", msg[512] = "";
    int found = cc_reproducer_python(python, sizeof python);
    if (p->describe)
        p->describe(p->ctx, desc, sizeof desc);
    if (r)
        snprintf(said, sizeof said, "%s%s%s", cc_result_status_name(r->status),
                 r->message[0] ? ": " : "", r->message);
    const char *tf32 = getenv("CAPCHECK_TF32"), *det = getenv("CAPCHECK_DETERMINISTIC");
    cc_reproducer_info info = {.provider_description = desc[0] ? desc : NULL,
                               .capcheck_said = r ? said : NULL,
                               .repro_command = repro_cmd,
                               .python = python,
                               .tf32 = tf32 && !strcmp(tf32, "1"),
                               .deterministic = det && !strcmp(det, "1"),
                               .threads = r ? cc_platform_key_threads(r->platform) : 1};
    FILE *f = out;
    if (path && !(f = fopen(path, "w"))) {
        fprintf(err, "capcheck: cannot write the reproducer %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (!path)
        fprintf(out, "---- reproducer (%s, torch) ----\n", python);
    int rc = cc_reproducer_write(c, p, r ? r->accumulation : CC_ACC_STRICT, &info, f, msg,
                                 sizeof msg);
    if (path && fclose(f) != 0 && !rc) {
        snprintf(msg, sizeof msg, "cannot write %s: %s", path, strerror(errno));
        rc = -1;
    }
    if (rc) {
        fprintf(err, "capcheck: reproducer: %s\n", msg);
        return -1;
    }
    if (path) {
        chmod(path, 0755);
        char word[4200], py[4200];
        cc_shell_quote(path, word, sizeof word);
        cc_shell_quote(python, py, sizeof py);
        fprintf(out, "reproducer: %s (run: %s %s; exit 0 pass, 1 fail, 125 cannot judge)%s\n",
                path, py, word,
                found ? "" : " -- no Python with torch found: set CAPCHECK_PYTHON, or run it with "
                             "the Python of the libtorch to test");
    }
    return 0;
}
