/* The trust gate on real runs (the capcheck binary, --provider reference; the mutants plugin
 * for failures): it upgrades exactly the capsules the policy allows and names what is missing
 * for the rest; it refuses evidence it cannot trust (an altered or unsealed report, results
 * that do not match their report, another libtorch version, a lone shard, a shard missing or
 * given twice), each with its reason and exit 2; evidence.json conforms to its schema. */
#include "cli_util.h"

#include "harness/report/jschema.h"
#include "harness/report/report_out.h"
#include "core/sha256.h"

#include <sys/stat.h>

static char tmp[256], run_dir[512], cases[512];
static char out[1 << 17];
static char here[64]; /* " on <this machine's platform key>", as the verdicts name it */

static const char CASES[] =
    "add count=3 dtype=f32,f64 layout=contig,transpose,stride2,bcast size=small\n"
    "add dtype=f32 in=[7],[7] seed=1\nadd dtype=f32 in=[3,4],[3,4] seed=2\n"
    "add dtype=f64 in=[7],[7] seed=1\nadd dtype=f64 in=[3,4],[3,4] seed=2\n"
    "add count=1 dtype=f32,f64 edge=nan size=small\n"
    "softmax count=6 dtype=f32 layout=contig,stride2 size=small\n"
    "softmax dtype=f32 in=[4,6] axis=1 seed=3\n"
    "matmul count=2 dtype=f64 size=small\n";

/* a policy: the common head, then `extra` */
static void policy(const char *name, const char *extra, char *path, size_t n)
{
    snprintf(path, n, "%s/%s", tmp, name);
    char text[8192];
    snprintf(text, sizeof text,
             "format capcheck-policy/1\n%s\nmin_passing 10\nmin_vjp_passing 10\n"
             "shape_classes vector matrix\nlayout_classes contig transpose stride2 bcast\n"
             "edge_classes none\n%s",
             strstr(extra, "libtorch_version") ? "" : "libtorch_version any", extra);
    cc_t_write(path, text);
}

/* Run the gate --all (every verdict listed); out gets its output with this machine's
 * " on <platform>" taken out of the verdict lines (the platform tests look at it themselves). */
static int gate(const char *policy_path, const char *reports)
{
    char args[4096];
    snprintf(args, sizeof args, "gate %s --policy %s --all", reports, policy_path);
    int rc = cc_t_run(NULL, args, out, sizeof out);
    size_t hl = strlen(here);
    for (char *s = strstr(out, here); hl && s; s = strstr(s, here))
        memmove(s, s + hl, strlen(s + hl) + 1);
    return rc;
}

static int gate_raw(const char *policy_path, const char *reports)
{
    char args[4096];
    snprintf(args, sizeof args, "gate %s --policy %s --all", reports, policy_path);
    return cc_t_run(NULL, args, out, sizeof out);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/capcheck_gate_XXXXXX");
    if (!mkdtemp(tmp))
        return -1;
    snprintf(cases, sizeof cases, "%s/g.cases", tmp);
    cc_t_write(cases, CASES);
    snprintf(run_dir, sizeof run_dir, "%s/run", tmp);
    char args[1200];
    snprintf(args, sizeof args, "run %s --provider reference --out %s", cases, run_dir);
    if (cc_t_run(NULL, args, out, sizeof out) != 0)
        return -1;
    snprintf(args, sizeof args, "%s/results.jsonl", run_dir);
    char *rec = cc_t_slurp(args, NULL);
    const char *pl = rec ? strstr(rec, "\"platform\":\"") : NULL;
    if (pl)
        snprintf(here, sizeof here, " on %.*s", (int)strcspn(pl + 12, "\""), pl + 12);
    free(rec);
    return pl ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return cc_t_remove_dir(tmp);
}

/* a copy of the run to spoil */
static void copy_run(const char *name, char *dir, size_t n)
{
    snprintf(dir, n, "%s/%s", tmp, name);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "rm -rf %s && cp -r %s %s", dir, run_dir, dir);
    assert_int_equal(system(cmd), 0);
}

static void test_upgrades_exactly_what_the_policy_allows(void **state)
{
    (void)state;
    char p[512];
    policy("p1.conf", "require capcheck.oracle.add f32 f64\n", p, sizeof p);
    assert_int_equal(gate(p, run_dir), 0);
    expect_in(out, "results digest matches");
    /* add passes everything in both dtypes; nothing else qualifies */
    assert_int_equal(cc_t_count(out, "\nchecked "), 2);
    expect_in(out, "checked          capcheck.oracle.add f32 (required): 15 passing of 15, VJP 15");
    expect_in(out, "checked          capcheck.oracle.add f64 (required): 15 passing of 15, VJP 15");
    expect_in(out, "; edges nan; distinct: ");
    expect_in(out, " layouts, 1 edge classes; seed 0; report sha256:");
    expect_in(out, "trustedExternal  capcheck.oracle.softmax f32 (catalog: trustedExternal):\n"
                   "  - layout classes not covered by a passing case: transpose, bcast\n");
    expect_in(out, "trustedExternal  capcheck.oracle.matmul f64 (catalog: trustedExternal):\n"
                   "  - 2 passing cases; the policy wants at least 10\n"
                   "  - 2 passing cases checked the VJP; the policy wants at least 10\n");
    expect_in(out, "capcheck gate: 2 of the 2 required capsule x dtype x platform checked (2 of 4 "
                   "in all): exit 0\n");
    /* without --all: the summary first, then only what holds a required capsule back */
    char args[2048];
    snprintf(args, sizeof args, "gate %s --policy %s", run_dir, p);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    assert_int_equal(strncmp(out, "capcheck gate: 2 of the 2 required", 34), 0);
    assert_int_equal(cc_t_count(out, "\nchecked "), 0);
    assert_int_equal(cc_t_count(out, "\ntrustedExternal "), 0);
    expect_in(out, "capcheck gate: 4 more capsule x dtype x platform (checked, or not required) "
                   "not listed: --all lists every one\n");

    /* a section relaxes softmax's layouts: it is upgraded too; requiring everything fails */
    policy("p2.conf", "require capcheck.oracle.* f32\n[op softmax]\nlayout_classes contig stride2\n", p,
           sizeof p);
    assert_int_equal(gate(p, run_dir), 1);
    assert_int_equal(cc_t_count(out, "\nchecked "), 3);
    expect_in(out, "checked          capcheck.oracle.softmax f32 (required): 13 passing of 13");
    /* the default listing: exactly the required ones not checked */
    snprintf(args, sizeof args, "gate %s --policy %s", run_dir, p);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 1);
    assert_int_equal(cc_t_count(out, "\nchecked "), 0);
    expect_in(out, "trustedExternal  capcheck.oracle.relu f32 (required)");
    assert_null(strstr(out, "capcheck.oracle.matmul f64")); /* not required */
    /* a required capsule the run has no case of */
    expect_in(out, "trustedExternal  capcheck.oracle.relu f32 (required) (catalog: trustedExternal):\n"
                   "  - no case in the report\n");

    /* an edge class counts only where a passing case carries it: add has edge=nan cases, no
     * edge=ties ones */
    policy("p3.conf", "[op add]\nedge_classes nan ties\n", p, sizeof p);
    assert_int_equal(gate(p, run_dir), 1);
    expect_in(out, "trustedExternal  capcheck.oracle.add f32 (catalog: trustedExternal):\n"
                   "  - edge classes not covered by a passing case: ties\n");
    assert_int_equal(cc_t_count(out, "\nchecked "), 0);
    policy("p3b.conf", "[op add]\nedge_classes nan\n", p, sizeof p);
    assert_int_equal(gate(p, run_dir), 1); /* add is checked, the run's other ops are not */
    expect_in(out, "capcheck gate: 2 of 4 capsule x dtype x platform checked (no require lines: "
                   "every one must be): exit 1\n");
    expect_in(out, "checked          capcheck.oracle.add f32: 15 passing of 15");

    /* stricter counts and shape classes name each shortfall */
    policy("p4.conf", "min_passing 20\nshape_classes scalar vector matrix high-rank empty\n", p,
           sizeof p);
    assert_int_equal(gate(p, run_dir), 1);
    expect_in(out, "  - 15 passing cases; the policy wants at least 20\n");
    expect_in(out, "  - shape classes not covered by a passing case: scalar, empty\n");
}

/* Evidence is per platform: a policy that names platforms wants each required capsule x dtype
 * checked on each of them; one the report has no case on is named missing. */
static void test_policy_platforms(void **state)
{
    (void)state;
    char p[512], line[256];
    policy("pp1.conf", "platforms cpu:nowhere\nrequire capcheck.oracle.add f32\n", p, sizeof p);
    assert_int_equal(gate_raw(p, run_dir), 1);
    expect_in(out, "(libtorch any; platforms cpu:nowhere)");
    expect_in(out, "trustedExternal  capcheck.oracle.add f32 on cpu:nowhere (required) (catalog: trustedExternal):\n"
                   "  - no case on platform cpu:nowhere in the report\n");
    /* checked on this machine's platform, but not required there */
    snprintf(line, sizeof line, "checked          capcheck.oracle.add f32%s: 15 passing of 15", here);
    expect_in(out, line);
    expect_in(out, "0 of the 1 required capsule x dtype x platform checked (2 of 5 in all): exit 1");
    /* this machine's platform (and any) required: checked */
    char text[256];
    snprintf(text, sizeof text, "platforms%s\nrequire capcheck.oracle.add f32\n", here + 3);
    policy("pp2.conf", text, p, sizeof p);
    assert_int_equal(gate_raw(p, run_dir), 0);
    snprintf(line, sizeof line, "checked          capcheck.oracle.add f32%s (required)", here);
    expect_in(out, line);
    expect_in(out, "capcheck gate: platform cpu:");
    /* a key that is not one is bad input */
    policy("pp3.conf", "platforms amx\n", p, sizeof p);
    assert_int_equal(gate_raw(p, run_dir), 2);
    expect_in(out, "platforms wants platform keys");
}

static void test_failures_keep_a_capsule_out(void **state)
{
    (void)state;
    char dir[512], args[2048], p[512];
    snprintf(dir, sizeof dir, "%s/mutant", tmp);
    snprintf(args, sizeof args, "run %s --provider-lib %s/mutants.so --out %s", cases,
             CAPCHECK_PLUGIN_DIR, dir);
    assert_int_equal(cc_t_run("CAPCHECK_MUTANT=softmax_axis ", args, out, sizeof out), 1);
    policy("pm.conf", "[op softmax]\nlayout_classes none\nmin_passing 0\nmin_vjp_passing 0\n", p,
           sizeof p);
    assert_int_equal(gate(p, dir), 1);
    /* a provider without a catalog row: its ad-hoc capsule */
    expect_in(out, "trustedExternal  plugin.mutants.cpu.softmax f32 (catalog: trustedExternal):\n"
                   "  - ");
    expect_in(out, "cases did not pass (");
    expect_in(out, "capcheck repro 'softmax dtype=f32");
    expect_in(out, "checked          plugin.mutants.cpu.add f32");
}

static void test_refuses_an_altered_or_unsealed_report(void **state)
{
    (void)state;
    char dir[512], path[700], p[512];
    policy("pr.conf", "", p, sizeof p);
    copy_run("tampered", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/report.json", dir);
    cc_t_edit(path, "\"pass\": 15,", "\"pass\": 16,");
    assert_int_equal(gate(p, dir), 2);
    expect_in(out, "refused: ");
    expect_in(out, "does not match its hash");

    copy_run("unsealed", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/report.json.sha256", dir);
    assert_int_equal(remove(path), 0);
    assert_int_equal(gate(p, dir), 2);
    expect_in(out, ".sha256 seal");

    /* a seal that is not a whole hash: refused as such, not compared (a prefix would match) */
    copy_run("garbled", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/report.json.sha256", dir);
    char *seal = cc_t_slurp(path, NULL);
    assert_non_null(seal);
    seal[12] = 0;
    cc_t_write(path, seal);
    free(seal);
    assert_int_equal(gate(p, dir), 2);
    expect_in(out, "report.json.sha256 is not a sha256 line");

    /* the report is intact, the results beside it are not */
    copy_run("results", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/results.jsonl", dir);
    cc_t_edit(path, "\"status\":\"pass\"", "\"status\":\"fail\"");
    assert_int_equal(gate(p, dir), 2);
    expect_in(out, "results digest");
}

static void test_refuses_another_libtorch(void **state)
{
    (void)state;
    char dir[512], path[700], p[512];
    policy("pv.conf", "libtorch_version 2.15.0\n", p, sizeof p);
    assert_int_equal(gate(p, run_dir), 2);
    /* which provider, and which rule of the policy */
    expect_in(out, "names no libtorch version: its provider is reference (capcheck float64 "
                   "reference");
    expect_in(out, "(libtorch_version: a policy with libtorch_version any, given with --policy, "
                   "judges this run)");
    expect_in(out, "requires libtorch 2.15.0");
    /* a report from another libtorch, sealed as capcheck would have sealed it; one that does
     * not record who ran (an older capcheck), since a built-in reference's or a plugin's
     * libtorch_version is never read */
    copy_run("libtorch", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/report.json", dir);
    cc_t_edit(path, "\"libtorch_version\": null", "\"libtorch_version\": \"2.14.0\"");
    assert_int_equal(cc_report_seal(path), 0);
    assert_int_equal(gate(p, dir), 2);
    expect_in(out, "names no libtorch version");
    cc_t_edit(path, ",\n    \"provider\": {\"name\": \"reference\", \"kind\": \"builtin\"}", "");
    assert_int_equal(cc_report_seal(path), 0);
    assert_int_equal(gate(p, dir), 2);
    expect_in(out, "is from libtorch 2.14.0; the policy");
    expect_in(out, "requires libtorch 2.15.0");
    policy("pv2.conf", "libtorch_version 2.14.0\n", p, sizeof p);
    assert_int_equal(gate(p, dir), 1); /* accepted, then judged */
    expect_in(out, "libtorch 2.14.0;");
}

static void test_refuses_a_broken_shard_set(void **state)
{
    (void)state;
    char args[2048], p[512], set[2048];
    for (int i = 1; i <= 3; i++) {
        snprintf(args, sizeof args, "run %s --provider reference --out %s/s%d --shard %d/3",
                 cases, tmp, i, i);
        assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    }
    policy("ps.conf", "require capcheck.oracle.add f32 f64\n", p, sizeof p);
    snprintf(set, sizeof set, "%s/s1", tmp);
    assert_int_equal(gate(p, set), 2);
    expect_in(out, "is shard 1/3 of a run: gate all 3 shard folders together");
    snprintf(set, sizeof set, "%s/s1 %s/s2", tmp, tmp);
    assert_int_equal(gate(p, set), 2);
    expect_in(out, "refused: shard 3/3 is missing");
    snprintf(set, sizeof set, "%s/s1 %s/s2 %s/s2 %s/s3", tmp, tmp, tmp, tmp);
    assert_int_equal(gate(p, set), 2);
    expect_in(out, "refused: shard 2/3 is given twice");
    /* the whole set is the whole run: the same verdicts, the same report hash */
    snprintf(set, sizeof set, "%s/s3 %s/s1 %s/s2", tmp, tmp, tmp);
    assert_int_equal(gate(p, set), 0);
    expect_in(out, "3 shards merged");
    expect_in(out, "2 of the 2 required capsule x dtype x platform checked (2 of 4 in all)");
}

static void test_bad_policy_is_one_sentence(void **state)
{
    (void)state;
    char p[512];
    snprintf(p, sizeof p, "%s/bad.conf", tmp);
    cc_t_write(p, "format capcheck-policy/1\nmin_passing 3\nfrobnicate 2\n");
    assert_int_equal(gate(p, run_dir), 2);
    expect_in(out, "bad.conf:3: unknown key 'frobnicate'");
    cc_t_write(p, "min_passing 3\n");
    assert_int_equal(gate(p, run_dir), 2);
    expect_in(out, "bad.conf:1: a policy starts with 'format capcheck-policy/1'");
    cc_t_write(p, "format capcheck-policy/1\n[op frob]\n");
    assert_int_equal(gate(p, run_dir), 2);
    expect_in(out, "unknown op 'frob'");
    /* the shipped policy parses, and is strict: the smoke-sized run upgrades nothing */
    assert_int_equal(gate("reports/policy.conf", run_dir), 2); /* it names libtorch 2.15.0 */
    expect_in(out, "requires libtorch 2.15.0");
}

static void test_evidence_json_conforms(void **state)
{
    (void)state;
    char args[2048], p[512], ev[600], path[800], msg[1024];
    policy("pe.conf", "", p, sizeof p);
    snprintf(ev, sizeof ev, "%s/evidence", tmp);
    snprintf(args, sizeof args, "evidence %s --policy %s --out %s", run_dir, p, ev);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    expect_in(out, "2 of 4 capsule x dtype x platform checked");
    const char *caps[] = {"capcheck.oracle.add", "capcheck.oracle.softmax", "capcheck.oracle.matmul"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s/evidence.json", ev, caps[i]);
        int rc = cc_jschema_validate_files("reports/evidence.schema.json", path, msg, sizeof msg);
        if (rc)
            fail_msg("%s", msg);
    }
    snprintf(path, sizeof path, "%s/capcheck.oracle.add/evidence.json", ev);
    char *t = cc_t_slurp(path, NULL);
    expect_in(t, "\"trust\": \"checked\"");
    expect_in(t, "\"value\": {\"claim\": {\"valueRefinement\": {\"op\": \"add\"}}, "
                 "\"evidence\": {\"testSuite\": {\"name\": \"capcheck report sha256:");
    expect_in(t, "\"vjpRefinement\": {\"op\": \"add\", \"mode\": \"torchLeanTape\"}");
    /* the platform each dtype's evidence holds for */
    char want[256];
    snprintf(want, sizeof want, "\"platforms\": {\"f64\": [\"%s\"], \"f32\": [\"%s\"]}", here + 4,
             here + 4);
    expect_in(t, want);
    snprintf(want, sizeof want, "{\"dtype\": \"f32\", \"platform\": \"%s\", \"verdict\": \"checked\"",
             here + 4);
    expect_in(t, want);
    free(t);
    snprintf(path, sizeof path, "%s/capcheck.oracle.matmul/evidence.json", ev);
    t = cc_t_slurp(path, NULL);
    expect_in(t, "\"trust\": \"trustedExternal\"");
    snprintf(want, sizeof want, "{\"trustedBoundary\": {\"reason\": \"capcheck evidence "
                                "insufficient: f64%s: 2 passing cases; the policy wants at least 10;",
             here);
    expect_in(t, want);
    free(t);
}

/* Evidence binds to the provider that ran: a plugin may not call itself by a built-in's name;
 * its description cannot claim a libtorch version; its results map to a catalog capsule only
 * where the catalog pins its library's sha256, else to capsules under its own name. */
static void test_evidence_binds_to_the_provider_that_ran(void **state)
{
    (void)state;
    char args[4096], dir[512], p[512], lib[512], sha[65], cat[600], path[700];
    snprintf(dir, sizeof dir, "%s/imp", tmp);
    snprintf(args, sizeof args, "run %s --provider-lib %s/mutants_aten.so --out %s", cases,
             CAPCHECK_PLUGIN_DIR, dir);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 125); /* a plugin that did not load */
    expect_in(out, "mutants_aten.so calls itself 'aten', the name of capcheck's built-in provider");
    struct stat st;
    assert_int_equal(stat(dir, &st), -1); /* refused before anything ran */

    /* "libtorch 2.15.0; cuda 12.1; ..." from a plugin: the report states no libtorch */
    snprintf(dir, sizeof dir, "%s/odd", tmp);
    snprintf(args, sizeof args, "run %s --provider-lib %s/mutants_odd.so --out %s", cases,
             CAPCHECK_PLUGIN_DIR, dir);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    snprintf(path, sizeof path, "%s/report.json", dir);
    char *rep = cc_t_slurp(path, NULL);
    expect_in(rep, "\"provider_description\": \"libtorch 2.15.0; cuda 12.1;");
    expect_in(rep, "\"libtorch_version\": null");
    expect_in(rep, "\"provider\": {\"name\": \"2fast-/a_b\", \"kind\": \"plugin\", \"library\": ");
    free(rep);
    policy("pv_odd.conf", "libtorch_version 2.15.0\n", p, sizeof p);
    assert_int_equal(gate(p, dir), 2);
    expect_in(out, "names no libtorch version: its provider is the plugin 2fast-/a_b (libtorch "
                   "2.15.0; cuda 12.1;");
    /* ... and no built-in's capsules: its own */
    policy("pv_any.conf", "", p, sizeof p);
    assert_int_equal(gate(p, dir), 1); /* its add checked, its softmax not */
    expect_in(out, "capcheck gate: 2 of 4 capsule x dtype x platform checked");
    expect_in(out, "plugin.2fast-/a_b.cpu.add f32");
    if (strstr(out, "capcheck.aten_cpu") || strstr(out, "libtorch."))
        fail_msg("a plugin's results became a built-in's evidence:\n%s", out);
    /* the platform the results ran on reaches the Lean module's header and summaries (read
     * with the string gaps that wrap its long literals closed up, as Lean reads them) */
    snprintf(args, sizeof args, "emit-lean %s --policy %s", dir, p);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    size_t kept = 0;
    for (size_t i = 0; out[i]; i++) {
        if (out[i] == '\\' && out[i + 1] == '\n') {
            for (i += 2; out[i] == ' '; i++)
                ;
            i--;
            continue;
        }
        out[kept++] = out[i];
    }
    out[kept] = 0;
    char want[256];
    snprintf(want, sizeof want, "\nPlatform:  %s: ", here + 4);
    expect_in(out, want);
    snprintf(want, sizeof want, "(f32 on %s: 15 of 15 cases passing", here + 4);
    expect_in(out, want);
    snprintf(want, sizeof want, "; platforms %s; provider libtorch 2.15.0;", here + 4);
    expect_in(out, want);
    /* its evidence folder is one safe name: the '/' of "2fast-/a_b" becomes %2F */
    char ev[600], msg[1024];
    snprintf(ev, sizeof ev, "%s/odd_ev", tmp);
    snprintf(args, sizeof args, "evidence %s --policy %s --out %s", dir, p, ev);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    snprintf(path, sizeof path, "%s/plugin.2fast-%%2Fa_b.cpu.add/evidence.json", ev);
    if (cc_jschema_validate_files("reports/evidence.schema.json", path, msg, sizeof msg))
        fail_msg("%s", msg);

    /* a report whose recorded provider is not the one its results name is refused */
    char moved[512];
    snprintf(moved, sizeof moved, "%s/renamed", tmp);
    snprintf(args, sizeof args, "rm -rf %s && cp -r %s %s", moved, dir, moved);
    assert_int_equal(system(args), 0);
    snprintf(path, sizeof path, "%s/report.json", moved);
    cc_t_edit(path, "\"provider\": {\"name\": \"2fast-/a_b\", \"kind\": \"plugin\"",
              "\"provider\": {\"name\": \"aten\", \"kind\": \"plugin\"");
    assert_int_equal(cc_report_seal(path), 0);
    assert_int_equal(gate(p, moved), 2);
    expect_in(out, "its results are of provider '2fast-/a_b', its provenance names 'aten'");

    /* pinned by sha256: the catalog's capsule; another library: its own name again */
    snprintf(lib, sizeof lib, "%s/mutants.so", CAPCHECK_PLUGIN_DIR);
    assert_int_equal(cc_sha256_file(lib, sha), 0);
    snprintf(dir, sizeof dir, "%s/pinned", tmp);
    snprintf(args, sizeof args, "run %s --provider-lib %s --out %s", cases, lib, dir);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    snprintf(cat, sizeof cat, "%s/pinned.tsv", tmp);
    char row[512];
    snprintf(row, sizeof row, "tl.add\tadd\ttorchLean\tcpu\tchecked\ttorchLeanTape\t"
                              "notApplicable\tcanonicalTensor\ttorchlean\tmutants\tsha256:%s\n",
             sha);
    cc_t_write(cat, row);
    snprintf(args, sizeof args, "gate %s --policy %s --catalog %s --all", dir, p, cat);
    /* exit 1 each time: of the run's two ops only add is checked (2 of 4 capsule x dtype) */
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 1);
    expect_in(out, "capcheck gate: 2 of 4 capsule x dtype x platform checked");
    char line[256];
    snprintf(line, sizeof line, "checked          tl.add f32%s: 15 passing of 15", here);
    expect_in(out, line);
    expect_in(out, "plugin.mutants.cpu.softmax f32");
    row[strlen(row) - 2] = row[strlen(row) - 2] == '0' ? '1' : '0'; /* another build's hash */
    cc_t_write(cat, row);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 1);
    expect_in(out, "capcheck gate: 2 of 4 capsule x dtype x platform checked");
    snprintf(line, sizeof line, "checked          plugin.mutants.cpu.add f32%s: 15 passing of 15",
             here);
    expect_in(out, line);
    if (strstr(out, "tl.add"))
        fail_msg("a pin for another library held:\n%s", out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_upgrades_exactly_what_the_policy_allows),
        cmocka_unit_test(test_policy_platforms),
        cmocka_unit_test(test_failures_keep_a_capsule_out),
        cmocka_unit_test(test_refuses_an_altered_or_unsealed_report),
        cmocka_unit_test(test_refuses_another_libtorch),
        cmocka_unit_test(test_refuses_a_broken_shard_set),
        cmocka_unit_test(test_bad_policy_is_one_sentence),
        cmocka_unit_test(test_evidence_json_conforms),
        cmocka_unit_test(test_evidence_binds_to_the_provider_that_ran),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
