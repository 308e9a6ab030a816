/* The three-way report (harness/run/witness.h): witnesses run a case the primary did not pass, on
 * the same inputs, and the verdict says who is wrong.
 *   - the verdict rules, one by one;
 *   - the planted matmul bug (mutants plugin, matmul_drop_last_k) as the primary, reference and
 *     openblas as witnesses: provider-outlier, the witnesses' values at the primary's worst
 *     element within the reference's bound, the primary's result unchanged; report.json (valid
 *     against reports/schema.json, whose validator refuses a spoiled verdict), report.md's
 *     table, and the gate and evidence counting the primary alone;
 *   - the same bug planted in a witness too (mutants_witness.so): reference-suspect; with the
 *     reference as a second witness: disputed; a witness without the op: unsupported, no-witness;
 *   - in the worker pool, a witness that crashes, one that hangs and one that cannot initialise
 *     are recorded as such while the primary's results stay as they are without witnesses (a
 *     crashed primary still gets its witnesses), in workers and in-process;
 *   - resume after a kill and merge of shards keep every witness field; results.jsonl records
 *     round-trip and malformed ones are refused; runs without --witness write no new field;
 *     the CLI refuses bad --witness lists in one sentence. */
#include "cli_util.h"

#include <math.h>
#include <sys/stat.h>

#include "core/dtype.h"
#include "harness/report/jschema.h"
#include "harness/run/pool.h"
#include "harness/report/report.h"
#include "harness/report/results_read.h"
#include "harness/run/witness.h"

#ifndef CAPCHECK_HAVE_OPENBLAS
#define CAPCHECK_HAVE_OPENBLAS 0
#endif
#if CAPCHECK_HAVE_OPENBLAS
#define LIBRARY_WITNESSES "reference,openblas"
#define N_LIBRARY_WITNESSES 2
#else
#define LIBRARY_WITNESSES "reference"
#define N_LIBRARY_WITNESSES 1
#endif

#define MUTANT "CAPCHECK_MUTANT=matmul_drop_last_k "
#define PLUGINS CAPCHECK_PLUGIN_DIR

static char tmp[256], cases_path[512];
static char out[1 << 17];

/* two matmul cases the planted bug fails, and an add it passes */
static const char CASES[] = "matmul dtype=f32 in=[4,6],[6,5] seed=1\n"
                            "matmul dtype=f64 in=[3,7],[7,2] layout=transpose seed=2\n"
                            "add dtype=f32 in=[5],[5] seed=3\n";
#define N_CASES 3

/* `capcheck run` of the cases into tmp/<name> (from inside it: --out ., so reports of
 * different folders may compare equal); returns the exit code. */
static int run_into(const char *name, const char *env, const char *extra)
{
    char prefix[1024], args[2048];
    snprintf(prefix, sizeof prefix, "mkdir -p %s/%s && cd %s/%s && %s", tmp, name, tmp, name,
             env ? env : "");
    snprintf(args, sizeof args, "run %s --provider-lib %s/mutants.so --out . %s", cases_path,
             PLUGINS, extra);
    return cc_t_run(prefix, args, out, sizeof out);
}

static char *file_of(const char *name, const char *file)
{
    char path[800];
    snprintf(path, sizeof path, "%s/%s/%s", tmp, name, file);
    char *t = cc_t_slurp(path, NULL);
    if (!t)
        fail_msg("cannot read %s", path);
    return t;
}

/* The records of tmp/<name>/results.jsonl by case index (every case once). */
static void read_records(const char *name, cc_result *r, int n)
{
    char *text = file_of(name, "results.jsonl");
    int seen = 0;
    for (char *line = text, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        assert_non_null(nl);
        cc_result one;
        int64_t index;
        char why[256];
        if (cc_result_parse_line(line, (size_t)(nl - line), &one, &index, why, sizeof why))
            fail_msg("%s: %s", line, why);
        assert_true(index >= 0 && index < n);
        r[index] = one;
        seen++;
    }
    assert_int_equal(seen, n);
    free(text);
}

static const cc_witness *witness_named(const cc_result *r, const char *provider)
{
    for (int k = 0; k < r->n_witnesses; k++)
        if (strcmp(r->witnesses[k].provider, provider) == 0)
            return &r->witnesses[k];
    fail_msg("no witness %s on %s", provider, r->line);
    return NULL;
}

/* ---- the rules ------------------------------------------------------------------------------- */

static cc_witness w_of(cc_result_status s, int has_value, double agree)
{
    cc_witness w;
    memset(&w, 0, sizeof w);
    snprintf(w.provider, sizeof w.provider, "w");
    w.status = s;
    w.has_value = has_value;
    w.agree_ratio = agree;
    return w;
}

static cc_three_way_verdict judge(cc_result_status primary, int n, const cc_witness *w)
{
    cc_result r;
    memset(&r, 0, sizeof r);
    r.status = primary;
    if (primary == CC_RES_FAIL)
        snprintf(r.worst_output, sizeof r.worst_output, "y");
    r.n_witnesses = n;
    memcpy(r.witnesses, w, sizeof *w * (size_t)n);
    return cc_witness_verdict(&r);
}

static void test_verdict_rules(void **state)
{
    (void)state;
    cc_witness pass = w_of(CC_RES_PASS, 1, 40), agreeing = w_of(CC_RES_FAIL, 1, 0.5),
               apart = w_of(CC_RES_FAIL, 1, 3), no_value = w_of(CC_RES_FAIL, 0, 0),
               nan_agree = w_of(CC_RES_FAIL, 1, NAN), unsup = w_of(CC_RES_UNSUPPORTED, 0, 0),
               crash = w_of(CC_RES_CRASH, 0, 0), err = w_of(CC_RES_ERROR, 1, 0);
    cc_witness two[2];
    /* no witness ran: no-witness */
    two[0] = unsup, two[1] = crash;
    assert_int_equal(judge(CC_RES_FAIL, 2, two), CC_VERDICT_NO_WITNESS);
    two[0] = err; /* an error says nothing about values, even with a value read */
    assert_int_equal(judge(CC_RES_FAIL, 2, two), CC_VERDICT_NO_WITNESS);
    /* every one that ran passes: the primary is the outlier, whatever it did */
    two[0] = pass, two[1] = unsup;
    assert_int_equal(judge(CC_RES_FAIL, 2, two), CC_VERDICT_PROVIDER_OUTLIER);
    assert_int_equal(judge(CC_RES_CRASH, 2, two), CC_VERDICT_PROVIDER_OUTLIER);
    /* every one that ran fails agreeing with the primary's value: the reference is suspect */
    two[0] = agreeing, two[1] = agreeing;
    assert_int_equal(judge(CC_RES_FAIL, 2, two), CC_VERDICT_REFERENCE_SUSPECT);
    two[1] = unsup;
    assert_int_equal(judge(CC_RES_FAIL, 2, two), CC_VERDICT_REFERENCE_SUSPECT);
    /* ... but not when the primary gave no value to agree with */
    assert_int_equal(judge(CC_RES_CRASH, 1, &agreeing), CC_VERDICT_DISPUTED);
    /* split, or failing differently: disputed */
    two[0] = pass, two[1] = agreeing;
    assert_int_equal(judge(CC_RES_FAIL, 2, two), CC_VERDICT_DISPUTED);
    two[0] = agreeing, two[1] = apart;
    assert_int_equal(judge(CC_RES_FAIL, 2, two), CC_VERDICT_DISPUTED);
    assert_int_equal(judge(CC_RES_FAIL, 1, &no_value), CC_VERDICT_DISPUTED);
    assert_int_equal(judge(CC_RES_FAIL, 1, &nan_agree), CC_VERDICT_DISPUTED);
    /* who gets witnesses: not a pass, not unsupported */
    cc_result r;
    memset(&r, 0, sizeof r);
    const cc_result_status wanted[] = {CC_RES_FAIL, CC_RES_ERROR, CC_RES_CRASH, CC_RES_TIMEOUT};
    for (size_t i = 0; i < 4; i++) {
        r.status = wanted[i];
        assert_true(cc_witness_wanted(&r));
    }
    r.status = CC_RES_PASS;
    assert_false(cc_witness_wanted(&r));
    r.status = CC_RES_UNSUPPORTED;
    assert_false(cc_witness_wanted(&r));
    /* names both ways */
    for (int v = 1; v < CC_VERDICT_COUNT; v++) {
        cc_three_way_verdict back;
        assert_int_equal(cc_verdict_parse(cc_verdict_name((cc_three_way_verdict)v), &back), 0);
        assert_int_equal(back, v);
    }
    cc_three_way_verdict back;
    assert_int_equal(cc_verdict_parse("", &back), -1);
    assert_int_equal(cc_verdict_parse("guilty", &back), -1);
}

/* ---- the planted bug, witnessed ------------------------------------------------------------- */

static void test_provider_outlier(void **state)
{
    (void)state;
    assert_int_equal(run_into("outlier", MUTANT, "--witness " LIBRARY_WITNESSES), 1);
    expect_in(out, "witnesses: provider-outlier: reference pass");
    cc_result r[N_CASES];
    read_records("outlier", r, N_CASES);
    for (int i = 0; i < 2; i++) { /* the two matmul cases */
        /* the primary's own result stands: a fail, far over its bound */
        assert_int_equal(r[i].status, CC_RES_FAIL);
        assert_string_equal(r[i].provider, "mutants");
        assert_true(r[i].worst_ratio > 1e3);
        assert_int_equal(r[i].n_witnesses, N_LIBRARY_WITNESSES);
        assert_int_equal(r[i].verdict, CC_VERDICT_PROVIDER_OUTLIER);
        for (int k = 0; k < r[i].n_witnesses; k++) {
            const cc_witness *w = &r[i].witnesses[k];
            assert_int_equal(w->status, CC_RES_PASS);
            assert_true(w->worst_ratio <= 1.0);
            /* its value at the primary's worst element is the reference's, within the bound
             * there, and as far from the primary's as the primary is from the reference */
            assert_true(w->has_value);
            if (!(fabs(w->got - r[i].expected) <= r[i].bound))
                fail_msg("%s: witness %s got %.17g, reference %.17g, bound %.3g", r[i].line,
                         w->provider, w->got, r[i].expected, r[i].bound);
            assert_true(w->agree_ratio > 0.5 * r[i].worst_ratio);
        }
    }
    assert_string_equal(witness_named(&r[0], "reference")->provider, "reference");
    /* the passing case asked no witness, and its record is as it always was */
    assert_int_equal(r[2].status, CC_RES_PASS);
    assert_int_equal(r[2].n_witnesses, 0);
    char *jsonl = file_of("outlier", "results.jsonl");
    assert_int_equal(cc_t_count(jsonl, "\"witnesses\""), 2);
    assert_int_equal(cc_t_count(jsonl, "\"verdict\":\"provider-outlier\""), 2);
    free(jsonl);

    /* report.json: the verdict counts and each witnessed case; it conforms to the schema */
    char *json = file_of("outlier", "report.json");
    expect_in(json, "\"verdicts\": {\"provider-outlier\": 2, \"reference-suspect\": 0, "
                    "\"disputed\": 0, \"no-witness\": 0}");
    expect_in(json, "{\"case\": \"matmul dtype=f32 device=cpu in=[4,6],[6,5] stream=2 "
                    "layout=contig check=both seed=1\", \"provider\": \"mutants\", \"status\": "
                    "\"fail\"");
    char path[800], msg[1024];
    snprintf(path, sizeof path, "%s/outlier/report.json", tmp);
    if (cc_jschema_validate_files("reports/schema.json", path, msg, sizeof msg))
        fail_msg("%s", msg);
    /* the validator has teeth on the new member: a spoiled verdict, an unknown field */
    char *spoiled = malloc(strlen(json) + 64), *at = strstr(json, "\"verdict\": \"provider-");
    assert_non_null(at);
    sprintf(spoiled, "%.*s\"verdict\": \"guilty-%s", (int)(at - json), json, at + 21);
    snprintf(path, sizeof path, "%s/spoiled.json", tmp);
    cc_t_write(path, spoiled);
    assert_int_equal(cc_jschema_validate_files("reports/schema.json", path, msg, sizeof msg), 1);
    expect_in(msg, "$.witnessed.cases[0].verdict");
    at = strstr(json, "\"agree_ratio\": ");
    assert_non_null(at);
    sprintf(spoiled, "%.*s\"oops\": 1, %s", (int)(at - json), json, at);
    cc_t_write(path, spoiled);
    assert_int_equal(cc_jschema_validate_files("reports/schema.json", path, msg, sizeof msg), 1);
    expect_in(msg, "$.witnessed.cases[0].witnesses[0].oops");
    free(spoiled);
    free(json);

    /* report.md: the table of failing cases, a reader's answer at a glance */
    char *md = file_of("outlier", "report.md");
    expect_in(md, "## Witnesses: who is wrong");
    expect_in(md, "Verdicts: provider-outlier 2, reference-suspect 0, disputed 0, no-witness 0.");
#if CAPCHECK_HAVE_OPENBLAS
    expect_in(md, "| case | at | mutants got | reference expected | reference | openblas | "
                  "verdict |\n|---|---|---:|---:|---|---|---|\n");
#else
    expect_in(md, "| case | at | mutants got | reference expected | reference | verdict |\n");
#endif
    char row[2048];
    snprintf(row, sizeof row, "| `%s` | y%s | %.9g | %.9g | %.9g (pass, ratio %.3g) |", r[0].line,
             r[0].worst_index, r[0].got, r[0].expected, witness_named(&r[0], "reference")->got,
             witness_named(&r[0], "reference")->worst_ratio);
    expect_in(md, row);
    assert_int_equal(cc_t_count(md, "| **provider-outlier** |\n"), 2);
    assert_true(strstr(md, "## Witnesses") < strstr(md, "## Rows, worst first"));
    free(md);
}

/* Witnesses are information only: the gate and evidence know the primary's capsules alone. */
static void test_witnesses_are_not_evidence(void **state)
{
    (void)state;
    char args[2048], ev[600], policy[600];
    snprintf(policy, sizeof policy, "%s/any.policy", tmp);
    cc_t_write(policy, "format capcheck-policy/1\nlibtorch_version any\n");
    snprintf(args, sizeof args, "gate %s/outlier --policy %s", tmp, policy);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 1);
    /* the witnesses' passes count for nothing: the matmul capsules have no passing case */
    /* (each verdict names this machine's platform: "f32 on cpu:...") */
    expect_in(out, "trustedExternal  plugin.mutants.cpu.matmul f32 on cpu:");
    expect_in(out, " (catalog: trustedExternal):\n  - 1 of 1 cases did not pass (1 failed,");
    expect_in(out, "\n  - 0 passing cases; the policy wants");
    expect_in(out, "trustedExternal  plugin.mutants.cpu.add f32 on cpu:");
    expect_in(out, " (catalog: trustedExternal):\n  - 1 passing cases; the policy wants");
    if (strstr(out, "capcheck.oracle.matmul") || strstr(out, "openblas."))
        fail_msg("a witness counted as evidence:\n%s", out);
    snprintf(ev, sizeof ev, "%s/evidence", tmp);
    snprintf(args, sizeof args, "evidence %s/outlier --out %s --policy %s", tmp, ev, policy);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ls %s", ev);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char name[256];
    int n = 0;
    while (fgets(name, sizeof name, p)) {
        if (strncmp(name, "plugin.mutants.", 15) != 0)
            fail_msg("evidence for %s from a witnessed run", name);
        n++;
    }
    pclose(p);
    assert_int_equal(n, 2); /* plugin.mutants.cpu.matmul and plugin.mutants.cpu.add */
}

static void test_reference_suspect_disputed_and_unsupported(void **state)
{
    (void)state;
    cc_result r[N_CASES];
    /* the same bug in a witness: the providers agree with each other, not with the reference */
    assert_int_equal(run_into("suspect", MUTANT "CAPCHECK_WITNESS_MUTANT=matmul_drop_last_k ",
                              "--witness " PLUGINS "/mutants_witness.so"),
                     1);
    expect_in(out, "witnesses: reference-suspect: mutants-witness fail");
    read_records("suspect", r, N_CASES);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(r[i].status, CC_RES_FAIL);
        assert_int_equal(r[i].verdict, CC_VERDICT_REFERENCE_SUSPECT);
        const cc_witness *w = witness_named(&r[i], "mutants-witness");
        assert_int_equal(w->status, CC_RES_FAIL);
        assert_true(w->has_value);
        assert_true(w->got == r[i].got && w->agree_ratio == 0.0); /* the same code */
    }
    char *md = file_of("suspect", "report.md");
    assert_int_equal(cc_t_count(md, "| **reference-suspect** |\n"), 2);
    free(md);
    /* the reference as a second witness disagrees with that one: disputed */
    assert_int_equal(run_into("disputed", MUTANT "CAPCHECK_WITNESS_MUTANT=matmul_drop_last_k ",
                              "--witness reference," PLUGINS "/mutants_witness.so"),
                     1);
    read_records("disputed", r, N_CASES);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(r[i].verdict, CC_VERDICT_DISPUTED);
        assert_int_equal(witness_named(&r[i], "reference")->status, CC_RES_PASS);
        assert_int_equal(witness_named(&r[i], "mutants-witness")->status, CC_RES_FAIL);
    }
    /* a witness without the op says so, and then no witness could judge */
    assert_int_equal(run_into("unsupported", MUTANT, "--witness " PLUGINS "/example_plugin.so"), 1);
    read_records("unsupported", r, N_CASES);
    for (int i = 0; i < 2; i++) {
        const cc_witness *w = witness_named(&r[i], "example");
        assert_int_equal(w->status, CC_RES_UNSUPPORTED);
        assert_false(w->has_value);
        assert_true(w->message[0] != 0);
        assert_int_equal(r[i].verdict, CC_VERDICT_NO_WITNESS);
    }
    md = file_of("unsupported", "report.md");
    assert_int_equal(cc_t_count(md, " unsupported | **no-witness** |\n"), 2);
    free(md);
#if CAPCHECK_HAVE_OPENBLAS
    /* repro too: openblas has no f16 GEMM, the reference witness does */
    assert_int_equal(cc_t_run(MUTANT, "repro 'matmul dtype=f16 in=[3,4],[4,2] seed=5' "
                                      "--provider-lib " PLUGINS "/mutants.so "
                                      "--witness openblas,reference",
                              out, sizeof out),
                     1);
    expect_in(out, "witness:  openblas unsupported; forward: matmul: OpenBLAS has no f16 GEMM");
    expect_in(out, "witness:  reference pass, worst bound ratio ");
    expect_in(out, "verdict:  provider-outlier\n");
#endif
}

/* ---- witnesses in the worker pool ------------------------------------------------------------ */

/* The primary: twice the reference's output in f32, a crash in f64. */
static cc_status doubler_forward(void *ctx, const cc_call *call, cc_view *out, char *msg,
                                 size_t len)
{
    (void)ctx;
    if (call->dtype == CC_F64)
        abort();
    const cc_provider *ref = cc_reference_provider();
    cc_status st = ref->forward(ref->ctx, call, out, msg, len);
    int64_t n = 1;
    for (int a = 0; a < out->rank; a++)
        n *= out->shape[a];
    for (int64_t i = 0; st == CC_OK && i < n; i++)
        cc_store(out->dtype, out->data, i, 2.0 * cc_load(out->dtype, out->data, i));
    return st;
}

static cc_status crasher_forward(void *ctx, const cc_call *call, cc_view *out, char *msg,
                                 size_t len)
{
    (void)ctx, (void)call, (void)out, (void)msg, (void)len;
    abort();
}

static cc_status sleeper_forward(void *ctx, const cc_call *call, cc_view *out, char *msg,
                                 size_t len)
{
    (void)ctx, (void)call, (void)out, (void)msg, (void)len;
    while (pause() == -1) /* a hang, until the pool's time limit kills the worker */
        ;
    return CC_FAILED;
}

static cc_status refusing_init(void *ctx, cc_device d, char *msg, size_t len)
{
    (void)ctx, (void)d;
    snprintf(msg, len, "no such device here");
    return CC_UNSUPPORTED;
}

static cc_provider provider_like_reference(const char *name)
{
    cc_provider p = *cc_reference_provider();
    p.name = name;
    return p;
}

static const char POOL_CASES[] = "add dtype=f32 in=[4],[4] seed=1\n"
                                 "add dtype=f64 in=[4],[4] seed=2\n"
                                 "add dtype=f32 in=[3,2],[3,2] layout=transpose seed=3\n";

static void run_pool(const cc_pool_config *cfg, const cc_case_list *l, cc_result *results)
{
    cc_pool *pool;
    char msg[512];
    if (cc_pool_start(cfg, &pool, msg, sizeof msg))
        fail_msg("%s", msg);
    for (size_t i = 0; i < l->n; i++)
        if (cc_pool_submit(pool, i, &l->v[i], msg, sizeof msg))
            fail_msg("%s", msg);
    uint64_t tag;
    cc_result r;
    int rc;
    while ((rc = cc_pool_wait(pool, &tag, &r, msg, sizeof msg)) == 0)
        results[tag] = r;
    if (rc < 0)
        fail_msg("%s", msg);
    cc_pool_close(pool);
}

static void test_witness_crash_hang_and_init_failure_leave_the_primary_alone(void **state)
{
    (void)state;
    cc_provider doubler = provider_like_reference("doubler");
    doubler.forward = doubler_forward;
    cc_provider crasher = provider_like_reference("crasher"),
                sleeper = provider_like_reference("sleeper"),
                refusing = provider_like_reference("refusing");
    crasher.forward = crasher_forward;
    sleeper.forward = sleeper_forward;
    refusing.init = refusing_init;
    const cc_provider *witnesses[] = {cc_reference_provider(), &crasher, &sleeper, &refusing};
    cc_case_list l;
    memset(&l, 0, sizeof l);
    cc_case_defaults def = {CC_CPU, 0};
    cc_parse_error err;
    if (cc_cases_parse_text(POOL_CASES, "pool", &def, &l, &err))
        fail_msg("%s", err.msg);
    cc_result alone[3], seen[3];
    cc_pool_config bare = {&doubler, 2, 0, 0.3, 0, 0, NULL, 0, 0, {0}, -1};
    cc_pool_config witnessed = {&doubler, 2, 0, 0.3, 0, 0, witnesses, 4, 0, {0}, -1};
    run_pool(&bare, &l, alone);
    run_pool(&witnessed, &l, seen);
    for (int i = 0; i < 3; i++) {
        /* the primary's result is what it is without witnesses */
        assert_int_equal(seen[i].status, alone[i].status);
        assert_string_equal(seen[i].message, alone[i].message);
        assert_true(seen[i].worst_ratio == alone[i].worst_ratio);
        assert_int_equal(alone[i].n_witnesses, 0);
        assert_int_equal(seen[i].n_witnesses, 4);
        const cc_witness *w = seen[i].witnesses;
        assert_string_equal(w[0].provider, "reference");
        assert_int_equal(w[0].status, CC_RES_PASS);
        assert_int_equal(w[1].status, CC_RES_CRASH);
        expect_in(w[1].message, "on witness crasher");
        assert_int_equal(w[2].status, CC_RES_TIMEOUT);
        expect_in(w[2].message, "time limit");
        assert_int_equal(w[3].status, CC_RES_UNSUPPORTED);
        expect_in(w[3].message, "witness refusing cannot run on cpu: no such device here");
        assert_int_equal(seen[i].verdict, CC_VERDICT_PROVIDER_OUTLIER);
    }
    assert_int_equal(seen[0].status, CC_RES_FAIL);
    assert_true(seen[0].witnesses[0].has_value && seen[0].witnesses[0].agree_ratio > 1.0);
    /* a crashed primary still has witnesses; there is no worst element to ask them about */
    assert_int_equal(seen[1].status, CC_RES_CRASH);
    assert_false(seen[1].witnesses[0].has_value);
    /* in-process (--no-fork), with the witnesses that do not crash or hang */
    const cc_provider *calm[] = {cc_reference_provider(), &refusing};
    cc_pool_config inproc = {&doubler, 1, 0, 0, 0, 1, calm, 2, 0, {0}, -1};
    cc_case_list f32 = {&l.v[2], 1, 1};
    run_pool(&inproc, &f32, seen);
    assert_int_equal(seen[0].status, CC_RES_FAIL);
    assert_int_equal(seen[0].n_witnesses, 2);
    assert_int_equal(seen[0].witnesses[1].status, CC_RES_UNSUPPORTED);
    assert_int_equal(seen[0].verdict, CC_VERDICT_PROVIDER_OUTLIER);
    cc_case_list_free(&l);
}

/* ---- records, resume, merge, and runs without witnesses ------------------------------------- */

static void test_record_round_trip_and_refusals(void **state)
{
    (void)state;
    const char *good = "{\"case\":\"add dtype=f32 device=cpu in=[1],[1] layout=contig "
                       "check=both seed=0\",\"op\":\"add\",\"dtype\":\"f32\",\"device\":\"cpu\","
                       "\"layout\":\"contig\",\"provider\":\"p\",\"vjp_mode\":\"none\","
                       "\"status\":\"crash\",\"checked_fwd\":false,\"checked_vjp\":false,"
                       "\"fwd_ratio\":0,\"vjp_ratio\":0,\"worst_ratio\":0,"
                       "\"accumulation\":\"strict\",\"suspect_ratio\":0,\"message\":\"m\","
                       "\"witnesses\":[{\"provider\":\"a\",\"status\":\"fail\",\"worst_ratio\":"
                       "\"Infinity\",\"got\":\"NaN\",\"agree_ratio\":0},{\"provider\":\"b\","
                       "\"status\":\"timeout\",\"worst_ratio\":0,\"message\":\"slow\"}],"
                       "\"verdict\":\"disputed\",\"elements\":1,\"seconds\":0.000001}\n";
    cc_result r;
    int64_t index;
    char msg[256], *line = NULL;
    size_t n = 0;
    assert_int_equal(cc_result_parse_line(good, strlen(good), &r, &index, msg, sizeof msg), 0);
    assert_int_equal(r.n_witnesses, 2);
    assert_true(r.witnesses[0].has_value && isnan(r.witnesses[0].got));
    assert_false(r.witnesses[1].has_value);
    assert_int_equal(r.verdict, CC_VERDICT_DISPUTED);
    FILE *f = open_memstream(&line, &n);
    cc_result_write_json(f, &r);
    fclose(f);
    assert_string_equal(line, good);
    free(line);
    /* what the reader refuses, each with its sentence */
    static const struct {
        const char *from, *to, *why;
    } bad[] = {
        {",\"verdict\":\"disputed\"", "", "come together"},
        {"\"verdict\":\"disputed\"", "\"verdict\":\"guilty\"", "not a known verdict"},
        {",\"agree_ratio\":0", "", "\"got\" and \"agree_ratio\" come together"},
        {"\"status\":\"timeout\"", "\"status\":\"late\"", "unknown witness status"},
        {"\"witnesses\":[{\"provider\":\"a\"", "\"witnesses\":[],\"x\":[{\"provider\":\"a\"",
         "not a non-empty list"},
        {"{\"provider\":\"b\"", "{\"provider\":\"c\",\"status\":\"pass\"},{\"provider\":\"d\","
                               "\"status\":\"pass\"},{\"provider\":\"e\",\"status\":\"pass\"},"
                               "{\"provider\":\"f\",\"status\":\"pass\"},{\"provider\":\"b\"",
         "more than 4 witnesses"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[4096];
        const char *at = strstr(good, bad[i].from);
        assert_non_null(at);
        snprintf(text, sizeof text, "%.*s%s%s", (int)(at - good), good, bad[i].to,
                 at + strlen(bad[i].from));
        if (cc_result_parse_line(text, strlen(text), &r, &index, msg, sizeof msg) == 0)
            fail_msg("read: %s", text);
        expect_in(msg, bad[i].why);
    }
}

static void same_but_timing(const char *a, const char *b)
{
    char *x = file_of(a, "report.json"), *y = file_of(b, "report.json");
    char *xs = cc_t_without_lines(x, "\"timing\""), *ys = cc_t_without_lines(y, "\"timing\"");
    if (strcmp(xs, ys) != 0)
        fail_msg("%s/report.json and %s/report.json differ beyond timing", a, b);
    free(x);
    free(y);
    free(xs);
    free(ys);
}

/* Enough failing cases that a kill lands part way, each one witnessed. */
static void write_many(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int k = 0; k < 200; k++)
        fprintf(f, "matmul dtype=%s in=[48,64],[64,40] seed=%d\n", k % 2 ? "f64" : "f32", k + 1);
    fclose(f);
}

static void test_resume_after_kill_and_merge_keep_witnesses(void **state)
{
    (void)state;
    char many[600], dir[600], args[2048];
    snprintf(many, sizeof many, "%s/many.cases", tmp);
    write_many(many);
    /* the whole run, uninterrupted */
    snprintf(args, sizeof args,
             "run %s --provider-lib %s/mutants.so --timeout 600 --out . --witness reference -j 2",
             many, PLUGINS);
    char prefix[1024];
    snprintf(prefix, sizeof prefix, "mkdir -p %s/whole && cd %s/whole && " MUTANT, tmp, tmp);
    assert_int_equal(cc_t_run(prefix, args, out, sizeof out), 1);
    char *whole = file_of("whole", "report.json");
    assert_int_equal(cc_t_count(whole, "\"verdict\": \"provider-outlier\""), 200);
    free(whole);
    /* killed part way (SIGKILL), then resumed: the same report, witnesses and all */
    snprintf(dir, sizeof dir, "%s/killed", tmp);
    mkdir(dir, 0777);
    assert_int_equal(chdir(dir), 0);
    setenv("CAPCHECK_MUTANT", "matmul_drop_last_k", 1);
    /* held after 30 cases on both workers (the plugin's hold), the timeout past the hold */
    const char *run[] = {"run", many, "--provider-lib", PLUGINS "/mutants.so", "--timeout", "600",
                         "--out", ".", "--witness", "reference", "-j", "2", NULL};
    assert_int_equal(cc_t_run_and_kill(".", run, 30, 2), 30);
    char *kept = file_of("killed", "results.jsonl");
    assert_int_equal(cc_t_count(kept, "\"verdict\":\"provider-outlier\""), 30);
    free(kept);
    assert_int_equal(chdir(CAPCHECK_SOURCE_DIR), 0);
    /* a resume naming other witnesses is refused; the same ones finish the run */
    snprintf(prefix, sizeof prefix, "cd %s && " MUTANT, dir);
    snprintf(args, sizeof args,
             "run --resume . %s --provider-lib %s/mutants.so --witness openblas -j 2", many,
             PLUGINS);
    assert_int_equal(cc_t_run(prefix, args, out, sizeof out), 2);
    expect_in(out, "is a run with witnesses 'reference'; this command names 'openblas'");
    snprintf(args, sizeof args,
             "run --resume . %s --provider-lib %s/mutants.so --timeout 600 --witness reference "
             "-j 2",
             many, PLUGINS);
    assert_int_equal(cc_t_run(prefix, args, out, sizeof out), 1);
    expect_in(out, "already recorded");
    unsetenv("CAPCHECK_MUTANT");
    /* the report is the uninterrupted run's (its command is the run's, from run.json) */
    same_but_timing("whole", "killed");

    /* shards merged equal the unsharded run, witnessed cases included */
    for (int i = 1; i <= 2; i++) {
        char name[32], extra[128];
        snprintf(name, sizeof name, "shard%d", i);
        snprintf(extra, sizeof extra, "--witness reference --shard %d/2", i);
        assert_int_equal(run_into(name, MUTANT, extra), 1);
    }
    assert_int_equal(run_into("unsharded", MUTANT, "--witness reference"), 1);
    snprintf(args, sizeof args, "merge %s/shard1 %s/shard2 --out %s/merged", tmp, tmp, tmp);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 1);
    same_but_timing("unsharded", "merged");
    char *merged = file_of("merged", "report.json");
    assert_int_equal(cc_t_count(merged, "\"verdict\": \"provider-outlier\""), 2);
    free(merged);
}

/* No new field unless a witness ran: the reports of runs without --witness are as before. */
static void test_no_witness_fields_without_witnesses(void **state)
{
    (void)state;
    static const char *const files[] = {"results.jsonl", "report.json", "report.md",
                                        "run.json"};
    assert_int_equal(run_into("plain", MUTANT, ""), 1);
    for (int i = 0; i < 4; i++) {
        char *t = file_of("plain", files[i]);
        if (strstr(t, "\"witness") || strstr(t, "verdict") || strstr(t, "Witnesses"))
            fail_msg("plain/%s mentions witnesses:\n%s", files[i], t);
        free(t);
    }
    /* witnesses named but never asked (every case passes): the same report but its command */
    assert_int_equal(run_into("clean", "CAPCHECK_MUTANT= ", ""), 0);
    assert_int_equal(run_into("clean_witnessed", "CAPCHECK_MUTANT= ", "--witness reference"), 0);
    char *x = file_of("clean", "report.json"), *y = file_of("clean_witnessed", "report.json");
    char *xs = cc_t_without_lines(x, "\"timing\""), *ys = cc_t_without_lines(y, "\"timing\"");
    char *xc = cc_t_without_lines(xs, "\"command\""), *yc = cc_t_without_lines(ys, "\"command\"");
    assert_string_equal(xc, yc);
    assert_null(strstr(y, "\"witnessed\""));
    free(x), free(y), free(xs), free(ys), free(xc), free(yc);
}

static void test_cli_refuses_bad_witness_lists(void **state)
{
    (void)state;
    static const struct {
        const char *args, *why;
    } bad[] = {
        {"--witness nosuch", "--witness: unknown provider 'nosuch'"},
        {"--witness reference,reference", "--witness names reference twice"},
        {"--witness reference,", "--witness wants provider names or plugin paths"},
        {"--witness " PLUGINS "/mutants.so", "that is the provider under test"},
        {"--witness reference," PLUGINS "/example_plugin.so," PLUGINS "/mutants_witness.so," PLUGINS
         "/abi_v1.so,nosuch",
         "at most 4 witnesses"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[2048];
        snprintf(args, sizeof args, "repro 'add dtype=f32 in=[3],[3]' --provider-lib %s/mutants.so %s",
                 PLUGINS, bad[i].args);
        if (cc_t_run(NULL, args, out, sizeof out) != 2)
            fail_msg("%s: not refused: %s", bad[i].args, out);
        expect_in(out, bad[i].why);
        assert_int_equal(cc_t_count(out, "\n"), 1); /* one sentence */
    }
    /* a witness that does not load: nothing could be judged (125), in one sentence */
    char args[2048];
    snprintf(args, sizeof args, "repro 'add dtype=f32 in=[3],[3]' --provider-lib %s/mutants.so "
             "--witness ./nope.so", PLUGINS);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 125);
    expect_in(out, "--witness: cannot load the provider library ./nope.so");
    assert_int_equal(cc_t_count(out, "\n"), 1);
    assert_int_equal(cc_t_run(NULL, "shrink 'add dtype=f32 in=[3],[3]' --witness reference", out,
                              sizeof out),
                     2);
    expect_in(out, "--witness does not apply to shrink");
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/capcheck_witness_XXXXXX");
    if (!mkdtemp(tmp))
        return -1;
    snprintf(cases_path, sizeof cases_path, "%s/witness.cases", tmp);
    FILE *f = fopen(cases_path, "w");
    if (!f)
        return -1;
    fputs(CASES, f);
    fclose(f);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return cc_t_remove_dir(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verdict_rules),
        cmocka_unit_test(test_provider_outlier),
        cmocka_unit_test(test_witnesses_are_not_evidence),
        cmocka_unit_test(test_reference_suspect_disputed_and_unsupported),
        cmocka_unit_test(test_witness_crash_hang_and_init_failure_leave_the_primary_alone),
        cmocka_unit_test(test_record_round_trip_and_refusals),
        cmocka_unit_test(test_resume_after_kill_and_merge_keep_witnesses),
        cmocka_unit_test(test_no_witness_fields_without_witnesses),
        cmocka_unit_test(test_cli_refuses_bad_witness_lists),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
