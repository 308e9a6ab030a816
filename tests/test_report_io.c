/* Evidence input and output: sha256 against FIPS 180-4 vectors; the capsule catalog (TorchLean's
 * 92 capsules and capcheck's own, every result mapped, ad-hoc names for other providers);
 * produced reports conform to reports/schema.json and the validator catches what does not;
 * capcheck diff catches a planted regression (an edited row, and a real planted bug through the
 * mutants plugin) and reports drift; report.md puts the worst rows first and report.junit.xml
 * carries each failure's repro line; the golden fixture's gate output and Lean text are pinned
 * (tests/golden; tests/golden/regenerate rewrites them after a deliberate change). */
#include "cli_util.h"

#include "harness/report/capsules.h"
#include "harness/report/jschema.h"
#include "core/json.h"
#include "core/sha256.h"
#include "reference/ref.h"

static char tmp[256], cases[512], good[512], bad[512];
static char out[1 << 17];

static const char CASES[] = "add count=3 dtype=f32 layout=contig,stride2 size=small\n"
                            "softmax count=4 dtype=f32 layout=contig,transpose size=small\n"
                            "linear count=3 dtype=f64 size=small\n";

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/capcheck_io_XXXXXX");
    if (!mkdtemp(tmp))
        return -1;
    snprintf(cases, sizeof cases, "%s/io.cases", tmp);
    cc_t_write(cases, CASES);
    char args[2048];
    snprintf(good, sizeof good, "%s/good", tmp);
    snprintf(bad, sizeof bad, "%s/bad", tmp);
    snprintf(args, sizeof args, "run %s --provider-lib %s/mutants.so --out %s", cases,
             CAPCHECK_PLUGIN_DIR, good);
    if (cc_t_run("CAPCHECK_MUTANT= ", args, out, sizeof out) != 0)
        return -1;
    snprintf(args, sizeof args, "run %s --provider-lib %s/mutants.so --out %s", cases,
             CAPCHECK_PLUGIN_DIR, bad);
    return cc_t_run("CAPCHECK_MUTANT=softmax_axis ", args, out, sizeof out) == 1 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return cc_t_remove_dir(tmp);
}

static void test_sha256_vectors(void **state)
{
    (void)state;
    char hex[65];
    cc_sha256_hex("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    cc_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    cc_sha256_hex(two, strlen(two), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* a million 'a', fed in uneven pieces */
    cc_sha256_ctx c;
    cc_sha256_init(&c);
    char a[1000];
    memset(a, 'a', sizeof a);
    size_t left = 1000000, step = 1;
    while (left) {
        size_t n = step < left ? step : left;
        cc_sha256_update(&c, a, n);
        left -= n;
        step = step % 900 + 61;
    }
    cc_sha256_final_hex(&c, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_catalog(void **state)
{
    (void)state;
    cc_catalog cat;
    char msg[512];
    if (cc_catalog_load(NULL, &cat, msg, sizeof msg))
        fail_msg("%s", msg);
    int torchlean = 0, libtorch = 0, reference = 0;
    for (size_t i = 0; i < cat.n; i++) {
        if (strcmp(cat.v[i].source, "torchlean") != 0)
            continue;
        torchlean++;
        libtorch += strncmp(cat.v[i].name, "libtorch.", 9) == 0;
        reference += strncmp(cat.v[i].name, "reference.", 10) == 0;
        assert_string_equal(cat.v[i].trust, "checked"); /* ops.md: none trustedExternal */
    }
    assert_int_equal(torchlean, 92);
    assert_int_equal(libtorch, 47);
    assert_int_equal(reference, 45);
    /* every op of the reference has a capsule on ATen CPU and ATen CUDA */
    for (int i = 0; i < ref_op_count(); i++) {
        const char *op = ref_op_at(i)->name;
        if (!cc_catalog_find(&cat, "aten", "cpu", op) || !cc_catalog_find(&cat, "aten", "cuda", op))
            fail_msg("op %s lacks a capsule", op);
    }
    assert_string_equal(cc_catalog_find(&cat, "aten", "cuda", "attention")->name,
                        "libtorch.direct_attention");
    assert_string_equal(cc_catalog_find(&cat, "aten", "cpu", "logSoftmax")->name,
                        "capcheck.aten_cpu.log_softmax");
    /* TorchLean's reference capsules are its Lean runtime: capcheck's oracle never maps there */
    for (int i = 0; i < ref_op_count(); i++) {
        const cc_capsule *c = cc_catalog_find(&cat, "reference", "cpu", ref_op_at(i)->name);
        if (!c || strncmp(c->name, "capcheck.oracle.", 16) || strcmp(c->source, "oracle") ||
            strcmp(c->provider, "-"))
            fail_msg("op %s: the oracle's capsule is %s", ref_op_at(i)->name, c ? c->name : "none");
    }
    cc_capsule adhoc;
    const cc_capsule *c;
    /* cuBLAS, cuDNN and cuFFT capsules carry TorchLean's own provider constructors */
    assert_string_equal(cc_catalog_find(&cat, "cublas", "cuda", "matmul")->provider, "cuBLAS");
    assert_string_equal(cc_catalog_find(&cat, "cudnn", "cuda", "conv")->provider, "cuDNN");
    assert_string_equal(cc_catalog_find(&cat, "cufft", "cuda", "fftFno")->provider, "cuFFT");
    /* a plugin gets capsules under its own name, whatever it calls itself */
    cc_provider_identity plugin = {"aten", "plugin", "/x/aten.so", ""};
    memset(plugin.sha256, 'a', 64);
    c = cc_catalog_resolve(&cat, &plugin, "aten", "cuda", "softmax", "backendVJP", &adhoc);
    assert_string_equal(c->name, "plugin.aten.cuda.softmax");
    assert_string_equal(c->trust, "trustedExternal");
    assert_string_equal(c->provider, "external");
    c = cc_catalog_resolve(&cat, &plugin, "mutants", "cpu", "logSoftmax", "backendVJP", &adhoc);
    assert_string_equal(c->name, "plugin.mutants.cpu.log_softmax");
    /* a report that does not record who ran is read by name */
    c = cc_catalog_resolve(&cat, NULL, "aten", "cuda", "softmax", "backendVJP", &adhoc);
    assert_string_equal(c->name, "libtorch.softmax");
    cc_catalog_free(&cat);
    /* ... unless the catalog pins the plugin's library by sha256 to a capsule */
    char pinned[512];
    snprintf(pinned, sizeof pinned,
             "tl.softmax\tsoftmax\ttorchLean\tcpu\tchecked\tbackendVJP\tfixedLeft\t"
             "canonicalTensor\ttorchlean\tmine\tsha256:%.64s\n",
             "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
    if (cc_catalog_parse(pinned, "pin.tsv", &cat, msg, sizeof msg))
        fail_msg("%s", msg);
    cc_provider_identity mine = {"mine", "plugin", "/x/mine.so", ""};
    memset(mine.sha256, 'b', 64);
    assert_string_equal(cc_catalog_resolve(&cat, &mine, "mine", "cpu", "softmax", "backendVJP",
                                           &adhoc)->name,
                        "tl.softmax");
    mine.sha256[0] = 'c'; /* another build of it: its own name again */
    assert_string_equal(cc_catalog_resolve(&cat, &mine, "mine", "cpu", "softmax", "backendVJP",
                                           &adhoc)->name,
                        "plugin.mine.cpu.softmax");
    cc_catalog_free(&cat);
    /* bad rows are one sentence naming the line */
    assert_int_equal(cc_catalog_parse("a\tfrob\texternal\tcpu\tchecked\tnone\tnotApplicable\t"
                                      "flatRowMajor\tcapcheck\tx\n",
                                      "t.tsv", &cat, msg, sizeof msg),
                     -1);
    expect_in(msg, "t.tsv:1: capsule a: unknown op");
    assert_int_equal(cc_catalog_parse("a\tadd\tnvidiaMagic\tcpu\tchecked\tnone\tnotApplicable\t"
                                      "flatRowMajor\tcapcheck\tx\n",
                                      "t.tsv", &cat, msg, sizeof msg),
                     -1);
    expect_in(msg, "t.tsv:1: capsule a: unknown provider (one of TorchLean's");
    assert_int_equal(cc_catalog_parse("a\tadd\texternal\tcpu\tchecked\tnone\tnotApplicable\t"
                                      "flatRowMajor\tcapcheck\tx\tsha256:12\n",
                                      "t.tsv", &cat, msg, sizeof msg),
                     -1);
    expect_in(msg, "t.tsv:1: capsule a: the pin is sha256:<64 hex digits>");
    assert_int_equal(cc_catalog_parse("a\tadd\texternal\tcpu\tchecked\tnone\tnotApplicable\tflatRowMajor"
                                      "\tcapcheck\tx\nb\tadd\texternal\tcpu\tchecked\tnone\t"
                                      "notApplicable\tflatRowMajor\tcapcheck\tx\n",
                                      "t.tsv", &cat, msg, sizeof msg),
                     -1);
    expect_in(msg, "t.tsv:2: capsule b maps the same results (x, cpu, add) as a");
}

static void validate_text(const char *doc, int want, const char *fragment)
{
    char msg[1024], why[256];
    size_t n;
    char *s = cc_t_slurp("reports/schema.json", &n);
    assert_non_null(s);
    cc_json *schema = cc_json_parse(s, n, why, sizeof why);
    free(s);
    if (!schema)
        fail_msg("reports/schema.json is not JSON: %s", why);
    cc_json *d = cc_json_parse(doc, strlen(doc), why, sizeof why);
    assert_non_null(d);
    int rc = cc_jschema_validate(schema, d, msg, sizeof msg);
    if (rc != want)
        fail_msg("validation gave %d, want %d: %s", rc, want, msg);
    if (fragment)
        expect_in(msg, fragment);
    cc_json_free(d);
    cc_json_free(schema);
}

static void test_reports_conform_to_the_schema(void **state)
{
    (void)state;
    char path[700], msg[1024];
    const char *reports[] = {good, bad, "tests/golden/gate_run"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/report.json", reports[i]);
        if (cc_jschema_validate_files("reports/schema.json", path, msg, sizeof msg))
            fail_msg("%s", msg);
    }
    /* the CLI says the same */
    char args[1024];
    snprintf(args, sizeof args, "validate %s/report.json", bad);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    expect_in(out, "conforms to built-in:reports/schema.json");
    /* and the validator has teeth */
    snprintf(path, sizeof path, "%s/report.json", good);
    char *t = cc_t_slurp(path, NULL);
    assert_non_null(t);
    char *spoiled = cc_t_replace_first(t, "{\"op\": \"", "{\"oops\": 1, \"op\": \"");
    validate_text(spoiled, 1, "$.rows[0].oops: a member the schema does not allow");
    free(spoiled);
    spoiled = cc_t_replace_first(t, "\"results_digest\": \"sha256:", "\"results_digest\": \"md5:");
    validate_text(spoiled, 1, "$.results_digest: \"md5:");
    free(spoiled);
    spoiled = cc_t_replace_first(t, "\"worst_ratio\": ", "\"worst_ratio\": \"huge\", \"x\": ");
    validate_text(spoiled, 1, "$.rows[0].worst_ratio: matches none of the alternatives");
    free(spoiled);
    validate_text("{\"schema\": \"capcheck-report/2\"}", 1, "$: lacks the required member");
    free(t);
    /* a schema keyword the validator does not know is the schema's error */
    cc_json *s = cc_json_parse("{\"oneOf\": []}", 13, msg, sizeof msg);
    cc_json *d = cc_json_parse("1", 1, msg, sizeof msg);
    assert_int_equal(cc_jschema_validate(s, d, msg, sizeof msg), 2);
    expect_in(msg, "keyword \"oneOf\" is not supported");
    cc_json_free(s);
    cc_json_free(d);
}

/* expect "<head> on <key><tail>" in out */
static void expect_row(const char *hay, const char *head, const char *key, const char *tail)
{
    char want[512];
    snprintf(want, sizeof want, "%s on %s%s", head, key, tail);
    expect_in(hay, want);
}

static void test_diff_catches_a_planted_regression(void **state)
{
    (void)state;
    char args[2048], path[700], edited[700];
    /* the same run twice: nothing to say */
    snprintf(args, sizeof args, "diff %s %s", good, good);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    expect_in(out, "0 regressions, 0 fixed, 0 new failures, 0 drifts beyond 4x");
    /* like with like: rows compare on the platforms both reports have */
    snprintf(path, sizeof path, "%s/report.json", good);
    char *orig = cc_t_slurp(path, NULL);
    const char *pk = strstr(orig, "\"platform\": \"");
    assert_non_null(pk);
    char key[80], from[120];
    snprintf(key, sizeof key, "%.*s", (int)strcspn(pk + 13, "\""), pk + 13);
    snprintf(from, sizeof from, "\"platform\": \"%s\"", key);
    char other[700];
    snprintf(other, sizeof other, "%s/other_platform.json", tmp);
    FILE *of = fopen(other, "w"); /* every row on another platform */
    for (const char *s = orig, *at; s; s = at ? at + strlen(from) : NULL) {
        at = strstr(s, from);
        fprintf(of, "%.*s%s", at ? (int)(at - s) : (int)strlen(s), s,
                at ? "\"platform\": \"cpu:elsewhere\"" : "");
    }
    fclose(of);
    snprintf(args, sizeof args, "diff %s %s", good, other);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    expect_in(out, "no platform in common");
    expect_in(out, "for cpu:elsewhere");
    /* one row moved to another platform: gone from this one (a regression here), and the other
     * platform is named, not compared */
    cc_t_write(other, orig);
    cc_t_edit(other, "\"op\": \"softmax\", \"report_name\": \"softmax\", \"dtype\": \"f32\", "
                     "\"device\": \"cpu\", \"provider\": \"mutants\", \"platform\": \"cpu:",
              "\"op\": \"softmax\", \"report_name\": \"softmax\", \"dtype\": \"f32\", "
              "\"device\": \"cpu\", \"provider\": \"mutants\", \"platform\": \"cpu:elsewhere\", \"x\": \"");
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 1);
    expect_in(out, "platform     cpu:elsewhere: only in new (1 rows), not compared");
    char want[200];
    snprintf(want, sizeof want, "regression   plugin.mutants.cpu.softmax f32 on %s: passing (8/8) -> no "
                                "cases", key);
    expect_in(out, want);
    expect_in(out, "on 1 platforms compared: exit 1");
    free(orig);
    /* an edited row: softmax f32 loses two passes, linear's worst ratio jumps */
    snprintf(path, sizeof path, "%s/report.json", good);
    snprintf(edited, sizeof edited, "%s/edited.json", tmp);
    char *t = cc_t_slurp(path, NULL);
    /* the row of softmax f32 (its platform key is this machine's) */
    char *sm = strstr(t, "{\"op\": \"softmax\", \"report_name\": \"softmax\", \"dtype\": \"f32\", "
                         "\"device\": \"cpu\", \"provider\": \"mutants\", \"platform\": \"cpu:");
    assert_non_null(sm);
    char *counts = strstr(sm, "\"cases\": 8, \"pass\": 8, \"fail\": 0");
    assert_non_null(counts);
    FILE *ef = fopen(edited, "w");
    fprintf(ef, "%.*s\"cases\": 8, \"pass\": 6, \"fail\": 2%s", (int)(counts - t), t,
            counts + strlen("\"cases\": 8, \"pass\": 8, \"fail\": 0"));
    fclose(ef);
    free(t);
    snprintf(args, sizeof args, "diff %s %s", good, edited);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 1);
    expect_in(out, "(unsealed, 17 cases; a report kept alone, no results)");
    expect_row(out, "regression   plugin.mutants.cpu.softmax f32", key,
               ": passing (8/8) -> failing (2 of 8 did not pass)");
    expect_in(out, "1 regressions, 0 fixed, 0 new failures");
    /* the other way round it is a fix */
    snprintf(args, sizeof args, "diff %s %s", edited, good);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    expect_row(out, "fixed        plugin.mutants.cpu.softmax f32", key, ":");
    /* drift beyond the factor: add f32's worst ratio edited to 0.999 */
    t = cc_t_slurp(edited, NULL);
    char *row = strstr(t, "{\"op\": \"add\", \"report_name\": \"add\", \"dtype\": \"f32\"");
    assert_non_null(row);
    char *w = strstr(row, "\"worst_ratio\": ") + 15, *end = strchr(w, ',');
    FILE *f = fopen(edited, "w");
    fprintf(f, "%.*s0.999%s", (int)(w - t), t, end);
    fclose(f);
    free(t);
    snprintf(args, sizeof args, "diff %s %s --drift 1.5", good, edited);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 1);
    expect_row(out, "drift        plugin.mutants.cpu.add f32", key, ": worst bound ratio");
    expect_in(out, "worse, beyond 1.5x)");
    /* a real planted bug: the softmax_axis mutant */
    snprintf(args, sizeof args, "diff %s %s", good, bad);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 1);
    expect_row(out, "regression   plugin.mutants.cpu.softmax f32", key, ": passing (8/8) -> failing (");
    /* the repro line names the capcheck that printed it: pasted anywhere, it runs */
    expect_in(out, "; worst: CAPCHECK_MUTANT=softmax_axis " CAPCHECK_BIN " repro 'softmax dtype=f32 "
                   "device=cpu");
    /* a sealed report whose seal does not match is refused */
    snprintf(path, sizeof path, "%s/report.json", bad);
    cc_t_edit(path, "\"cases\": 17", "\"cases\": 18");
    snprintf(args, sizeof args, "diff %s %s", good, bad);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    expect_in(out, "does not match its hash");
    cc_t_edit(path, "\"cases\": 18", "\"cases\": 17");
}

static void test_markdown_and_junit(void **state)
{
    (void)state;
    char path[700];
    snprintf(path, sizeof path, "%s/report.md", bad);
    char *md = cc_t_slurp(path, NULL);
    /* the failing row first, its repro line above the table */
    char *table = strstr(md, "## Rows, worst first");
    assert_non_null(table);
    char *first_row = strstr(table, "\n| softmax |"), *other = strstr(table, "\n| add |");
    assert_non_null(first_row);
    assert_non_null(other);
    assert_true(first_row < other);
    char *np = strstr(md, "## Failures");
    assert_non_null(np);
    assert_true(np < table);
    free(md);
    snprintf(path, sizeof path, "%s/report.junit.xml", bad);
    char *x = cc_t_slurp(path, NULL);
    expect_in(x, "<testsuites name=\"capcheck\" tests=\"3\" failures=\"1\" errors=\"0\"");
    expect_in(x, "<testcase classname=\"plugin.mutants.cpu.softmax\" name=\"softmax f32 cpu on cpu:");
    expect_in(x, "<property name=\"platform cpu:");
    expect_in(x, "<failure type=\"fail\" message=\"");
    expect_in(x, "capcheck repro &#39;softmax dtype=f32 device=cpu");
    assert_int_equal(cc_t_count(x, "<testcase "), 3);
    assert_int_equal(cc_t_count(x, "<failure "), 1);
    free(x);
}

/* capcheck args exits with want_rc and prints tests/golden/file exactly. */
static void golden(const char *args, int want_rc, const char *file)
{
    char path[256];
    snprintf(path, sizeof path, "tests/golden/%s", file);
    char *want = cc_t_slurp(path, NULL);
    assert_non_null(want);
    int rc = cc_t_run(CC_T_ON_PATH, args, out, sizeof out); /* repro lines: a bare capcheck */
    if (rc != want_rc)
        fail_msg("capcheck %s: exit %d, want %d:\n%s", args, rc, want_rc, out);
    if (strcmp(out, want) != 0) {
        char got[300];
        snprintf(got, sizeof got, "%s/%s", tmp, file);
        cc_t_write(got, out);
        fail_msg("capcheck %s differs from %s (got: %s; diff them; tests/golden/regenerate "
                 "rewrites the fixture after a deliberate change)",
                 args, path, got);
    }
    free(want);
}

/* The golden TorchLean modules, one per run and TorchLean commit targeted (tests/golden/regenerate
 * writes them; tests/check_lean_module.py checks their names against TorchLean's and their lines
 * against its lint): a checked ATen run, a partly checked run of a plugin pinned to TorchLean's
 * reference capsules, and a run with names hard on Lean text; the checked run is signed, and its
 * modules name the signer (tests/golden/allowed_signers allows its key). A run of the oracle has
 * nothing to emit: one sentence, exit 1. */
static void test_golden_gate_and_lean(void **state)
{
    (void)state;
    static const char *const commits[] = {"3447b74f6bf43f83ad50885851caf0bc01b4c53d",
                                          "996dda06ed8af8842d6126a8e403d16221e700ca"};
    const char *g = "tests/golden";
    char args[1024], file[64];
    static const char *const runs[][2] = {{"checked", "--allowed-signers tests/golden/allowed_signers"},
                                          {"partly", "--catalog tests/golden/partly.catalog.tsv"},
                                          {"unusual", "--catalog tests/golden/unusual.catalog.tsv"}};
    for (int c = 0; c < 2; c++) {
        for (int r = 0; r < 3; r++) {
            snprintf(args, sizeof args,
                     "emit-lean %s/%s_run --policy %s/lean.policy %s --torchlean %s", g,
                     runs[r][0], g, runs[r][1], commits[c]);
            snprintf(file, sizeof file, "%s_run.%.7s.lean", runs[r][0], commits[c]);
            golden(args, 0, file);
        }
        /* the oracle checking itself upgrades capsules, none of them TorchLean's: nothing to
         * emit, said in one sentence on stderr, nothing on stdout, exit 1 */
        snprintf(args, sizeof args,
                 "emit-lean %s/gate_run --policy %s/golden.policy --torchlean %s", g, g,
                 commits[c]);
        assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 1);
        char want[256];
        snprintf(want, sizeof want, "capcheck emit-lean: nothing to emit: the gate upgrades 4 "
                                    "capsules, none of them a TorchLean capsule at %.7s "
                                    "(capcheck.oracle.add: capcheck's float64 oracle checked "
                                    "against itself",
                 commits[c]);
        expect_in(out, want);
        if (strncmp(out, "capcheck emit-lean: nothing to emit: ", 37) != 0 ||
            strchr(out, '\n') != out + strlen(out) - 1)
            fail_msg("not one sentence alone (stdout and stderr together):\n%s", out);
    }
    /* exit 1: a required capsule of the golden run is not checked (its text says which) */
    golden("gate tests/golden/gate_run --policy tests/golden/golden.policy", 1,
           "gate_run.gate.txt");
    golden("gate tests/golden/gate_run --policy tests/golden/golden.policy --all", 1,
           "gate_run.gate_all.txt");
    /* a TorchLean commit capcheck has no data for is one sentence */
    snprintf(args, sizeof args, "emit-lean %s/checked_run --policy %s/lean.policy --torchlean "
                                "b2a2184",
             g, g);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 2);
    expect_in(out, "no TorchLean data for commit 'b2a2184' (at least 7 hex digits of one of: "
                   "996dda06ed8a, 3447b74f6bf4)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_catalog),
        cmocka_unit_test(test_reports_conform_to_the_schema),
        cmocka_unit_test(test_diff_catches_a_planted_regression),
        cmocka_unit_test(test_markdown_and_junit),
        cmocka_unit_test(test_golden_gate_and_lean),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
