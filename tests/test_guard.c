/* Guarded buffers and repeat runs through the capcheck binary and its worker pool: the planted
 * bugs of tests/plugins/mutants.c that read or write one element outside a buffer come back as
 * `out-of-bounds` naming the buffer, on every run; ones wrong on every third and every 30th call
 * pass a plain repro and are caught by the --repeat their frequency asks for; one whose bits
 * vary between calls is `nondeterministic`, one whose bits depend only on its buffer's
 * alignment is placement-sensitive (a pass, flagged); the unmutated plugin and the reference
 * stay clean under --repeat. */
#include "cli_util.h"
#include "core/guard.h"
#include "harness/report/report.h"
#include "harness/report/results_read.h"

#include <math.h>

#define MUTANTS "--provider-lib " CAPCHECK_PLUGIN_DIR "/mutants.so"
#define EXP_LINE "'exp dtype=f32 in=[37] seed=1'"

static char out[1 << 16];

/* capcheck repro LINE under CAPCHECK_MUTANT=mutant with extra options; the exit code. */
static int repro(const char *mutant, const char *line, const char *opts)
{
    char prefix[128], args[1024];
    snprintf(prefix, sizeof prefix, "CAPCHECK_MUTANT=%s ", mutant);
    snprintf(args, sizeof args, "repro %s " MUTANTS " %s", line, opts);
    return cc_t_run(prefix, args, out, sizeof out);
}

static void expect_in_output(const char *want)
{
    if (!strstr(out, want))
        fail_msg("expected \"%s\" in:\n%s", want, out);
}

/* Each planted out-of-bounds access, three runs each: the same result every time. */
static void expect_out_of_bounds_on(const char *mutant, const char *line, const char *opts,
                                    const char *what)
{
    for (int run = 0; run < 3; run++) {
        assert_int_equal(repro(mutant, line, opts), 1);
        expect_in_output("status:   out-of-bounds");
        expect_in_output(what);
    }
}

static void expect_out_of_bounds(const char *mutant, const char *opts, const char *what)
{
    expect_out_of_bounds_on(mutant, EXP_LINE, opts, what);
}

static void test_read_past_the_end(void **state)
{
    (void)state;
    expect_out_of_bounds("exp_read_past_end", "",
                         "forward read memory 1 byte past the end of input x (a buffer of 148 "
                         "bytes; caught by its guard page)");
}

static void test_write_past_the_end(void **state)
{
    (void)state;
    expect_out_of_bounds("exp_write_past_end", "",
                         "forward wrote memory 1 byte past the end of output y (a buffer of 148 "
                         "bytes; caught by its guard page)");
}

/* An in-bounds write into an input: its pages are read-only while the provider runs (on every
 * case of a run too: the workers' inputs are kept mapped from case to case, read-only). */
static void test_write_into_an_input(void **state)
{
    (void)state;
    expect_out_of_bounds("exp_writes_its_input", "",
                         "forward wrote into the read-only input x (a buffer of 148 bytes; "
                         "inputs are read-only)");
}

/* The same above 4 MiB, where an input is one mapping sealed by mprotect (guard.h). */
static void test_write_into_a_large_input(void **state)
{
    (void)state;
    expect_out_of_bounds_on("exp_writes_its_input", "'exp dtype=f32 in=[1200000] seed=2'", "",
                            "forward wrote into the read-only input x (a buffer of 4800000 "
                            "bytes; inputs are read-only)");
}

static void test_write_before_the_start(void **state)
{
    (void)state;
    expect_out_of_bounds("exp_write_before_start", "",
                         "forward wrote up to 4 bytes before the start of output y");
}

/* x[-1] lies in the slack of a buffer placed flush with its end: unseen by one call, caught by
 * the second call of --repeat 2, which places every buffer flush with its start. */
static void test_read_before_the_start_needs_the_other_placement(void **state)
{
    (void)state;
    assert_int_equal(repro("exp_read_before_start", EXP_LINE, ""), 0);
    expect_in_output("status:   pass");
    expect_out_of_bounds("exp_read_before_start", "--repeat 2",
                         "forward (call 2 of 2) read memory 4 bytes before the start of input x");
}

/* 1 when the record at p (up to end) is of a case with an empty input (a 0 in in=[...]). */
static int empty_case(const char *p, const char *end)
{
    const char *in = strstr(p, "in=[");
    if (!in || (end && in > end))
        return 0;
    for (const char *q = in + 3; *q && *q != ' ' && *q != '"'; q++)
        if (*q == '0' && (q[-1] == '[' || q[-1] == ',') && (q[1] == ']' || q[1] == ','))
            return 1;
    return 0;
}

/* A whole run under `mutant` goes on past the faults: every exp case out-of-bounds (the
 * workers keep their buffers' mappings from case to case), everything else passes; with
 * empty_pass, cases of an empty input pass (the mutant has no element to write). */
static void run_with_every_exp_case_out_of_bounds(const char *mutant, int empty_pass)
{
    char dir[] = "/tmp/capcheck_guard_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char prefix[128], args[512];
    snprintf(prefix, sizeof prefix, "CAPCHECK_MUTANT=%s ", mutant);
    snprintf(args, sizeof args, "run --op exp " MUTANTS " -j 2 --out %s/run", dir);
    assert_int_equal(cc_t_run(prefix, args, out, sizeof out), 1);
    char path[600];
    snprintf(path, sizeof path, "%s/run/results.jsonl", dir);
    char *text = cc_t_slurp(path, NULL);
    assert_non_null(text);
    long cases = 0, oob = 0, empty = 0;
    for (char *p = text; (p = strstr(p, "{\"index\"")); p++) {
        cases++;
        char *end = strchr(p, '\n');
        int is_oob = strstr(p, "\"status\":\"out-of-bounds\"") &&
                     (!end || strstr(p, "\"status\":\"out-of-bounds\"") < end);
        oob += is_oob;
        if (empty_pass && empty_case(p, end)) {
            assert_false(is_oob);
            empty++;
        }
    }
    free(text);
    printf("%s: exp cases: %ld, out-of-bounds: %ld, empty: %ld\n", mutant, cases, oob, empty);
    assert_true(cases > 100);
    assert_true(!empty_pass || empty > 0);
    assert_int_equal(oob, cases - empty);
    expect_in_output("out-of-bounds");
    cc_t_remove_dir(dir);
}

static void test_a_run_records_every_fault_and_goes_on(void **state)
{
    (void)state;
    run_with_every_exp_case_out_of_bounds("exp_write_past_end", 0); /* empty outputs too */
}

/* The same for a write into the input: not one case where the read-only view slipped. */
static void test_a_run_catches_every_write_into_an_input(void **state)
{
    (void)state;
    run_with_every_exp_case_out_of_bounds("exp_writes_its_input", 1);
}

/* Wrong on every third call: a fresh worker's repro passes, --repeat 3 catches it. */
static void test_every_third_call_needs_repeat(void **state)
{
    (void)state;
    assert_int_equal(repro("exp_every_third_call", EXP_LINE, ""), 0);
    assert_int_equal(repro("exp_every_third_call", EXP_LINE, "--repeat 3"), 1);
    expect_in_output("status:   nondeterministic");
    expect_in_output("y[0] differs between call 1 and call 3 of 3 on the same inputs");
}

/* Wrong on one call in 30 (p = 1/30): --repeat N catches a race of frequency p with probability
 * 1 - (1 - p)^N (docs/reliability.md), so 95 % wants N = ceil(ln 0.05 / ln(29/30)) = 89 calls;
 * --repeat 3 (65 % of the time 0 of 3 calls) passes in a fresh worker. The repeats share one
 * worker and provider: the counter the race lives in is the planted bug's process state. In a
 * run the cases share the worker too: 30 calls of any cases reach it without --repeat. */
static void test_rare_race_needs_the_repeat_its_frequency_asks(void **state)
{
    (void)state;
    int n = (int)ceil(log(1 - 0.95) / log(1 - 1.0 / 30));
    assert_int_equal(n, 89);
    char repeat[32];
    snprintf(repeat, sizeof repeat, "--repeat %d", n);
    assert_int_equal(repro("exp_once_in_30_calls", EXP_LINE, "--repeat 3"), 0);
    assert_int_equal(repro("exp_once_in_30_calls", EXP_LINE, repeat), 1);
    expect_in_output("status:   nondeterministic");
    expect_in_output("y[0] differs between call 1 and call 30 of 89 on the same inputs");
    char dir[] = "/tmp/capcheck_guard_XXXXXX", args[512];
    assert_non_null(mkdtemp(dir));
    snprintf(args, sizeof args, "run --op exp " MUTANTS " -j 1 --out %s/run", dir);
    assert_int_equal(cc_t_run("CAPCHECK_MUTANT=exp_once_in_30_calls ", args, out, sizeof out), 1);
    cc_t_remove_dir(dir);
}

/* Bits that vary between calls, every value within its bound: only --repeat sees it. */
static void test_varying_bits_are_nondeterministic(void **state)
{
    (void)state;
    const char *line = "'reduceSum dtype=f32 in=[64,33] axis=0 seed=3'";
    assert_int_equal(repro("reducesum_order_varies", line, ""), 0);
    assert_int_equal(repro("reducesum_order_varies", line, "--repeat 2"), 1);
    expect_in_output("status:   nondeterministic");
    expect_in_output("repeats must agree bit for bit on cpu");
}

/* A race that spoils call 2 alone (the mutants plugin's reducesum_reordered_once_in_7, the
 * process's 2nd, 9th... call) differs from call 1 at the other placement as an
 * alignment-dependent kernel does; call 4, the second at that placement, gives other bits than
 * call 2: nondeterministic, never placement-sensitive. */
static void test_a_spoiled_second_call_is_a_race(void **state)
{
    (void)state;
    const char *v = "reducesum_reordered_once_in_7", *line = "'reduceSum dtype=f32 in=[64,33] axis=0 seed=3'";
    assert_int_equal(repro(v, line, ""), 0);
    assert_int_equal(repro(v, line, "--repeat 2"), 1);
    expect_in_output("status:   nondeterministic\n");
    expect_in_output(" differs between call 2 and call 4 of 4 on the same inputs: ");
    expect_in_output("call 2, at the other buffer placement, differed from call 1, so each "
                     "placement was called twice");
    assert_null(strstr(out, "placement-sensitive"));
}

/* The run's placement-sensitive record (in DIR/r/results.jsonl) reads back and writes the same
 * bytes; the reader refuses the flag without its element and the element without the flag. */
static void placement_record_reads_back(const char *dir)
{
    char *jsonl = cc_t_slurp_in(dir, "r", "results.jsonl");
    char *rec = strstr(jsonl, "\"placement_sensitive\":true");
    assert_non_null(rec);
    while (rec > jsonl && rec[-1] != '\n')
        rec--;
    size_t len = strcspn(rec, "\n") + 1;
    cc_result r;
    int64_t index;
    char msg[256], *back = NULL;
    size_t n = 0;
    assert_int_equal(cc_result_parse_line(rec, len, &r, &index, msg, sizeof msg), 0);
    assert_int_equal(r.placement_sensitive, 1);
    assert_string_equal(r.placement_output, "y");
    assert_true(r.placement_first != r.placement_moved);
    FILE *f = open_memstream(&back, &n);
    cc_result_write_json(f, &r);
    fclose(f);
    const char *fields = strstr(rec, "\"case\""); /* after the journal's {"index":N, */
    size_t n_fields = len - (size_t)(fields - rec);
    if (strlen(back) != n_fields + 1 || strncmp(back + 1, fields, n_fields) != 0)
        fail_msg("written back:\n%s\nread:\n%.*s", back, (int)len, rec);
    free(back);
    static const struct {
        const char *from, *to, *why;
    } bad[] = {
        {"\"placement_sensitive\":true,", "", "come together"},
        {"\"placement_sensitive\":true", "\"placement_sensitive\":false", "come together"},
        {"\"placement_sensitive\":true", "\"placement_sensitive\":1", "not true/false"},
        {"\"moved\":", "\"later\":", "is not {\"output\", \"index\", \"first\", \"moved\"}"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *text = cc_t_replace_first(rec, bad[i].from, bad[i].to);
        int rc = cc_result_parse_line(text, strcspn(text, "\n") + 1, &r, &index, msg, sizeof msg);
        if (rc == 0 || !strstr(msg, bad[i].why))
            fail_msg("'%s' into '%s': rc %d, '%s'", bad[i].from, bad[i].to, rc, msg);
        free(text);
    }
    free(jsonl);
}

/* A kernel whose bits depend only on its buffer's alignment (the mutants plugin's variant
 * reducesum_alignment_order, as MKL without MKL_CBWR): --repeat 2 moves the buffers on call 2,
 * which gives other bits, and the two calls it then adds give call 1's bits at call 1's
 * placement and call 2's at the other: placement-sensitive, a pass, never nondeterministic (the
 * races beside it are: test_varying_bits_are_nondeterministic,
 * test_a_spoiled_second_call_is_a_race). Not seen without a
 * repeat, nor where the placement does not change the alignment (a 64-byte multiple), nor
 * where capcheck does not place the buffers (--no-guard). Counted in the report and held back
 * by the gate only under placement_sensitive fail; under the default allow the verdict says it. */
static void test_alignment_dependent_bits_are_placement_sensitive(void **state)
{
    (void)state;
    const char *v = "reducesum_alignment_order";
    const char *odd = "'reduceSum dtype=f32 in=[63,33] axis=0 seed=3'"; /* 8316 bytes */
    assert_int_equal(repro(v, odd, "--repeat 2"), 0);
    expect_in_output("status:   pass, placement-sensitive\n");
    expect_in_output("placement: y[0] is ");
    expect_in_output("\"placement_sensitive\":true,\"placement\":{\"output\":\"y\",\"index\":\"[0]\"");
    assert_null(strstr(out, "nondeterministic"));
    assert_int_equal(repro(v, odd, "--repeat 3"), 0); /* one call added, at the other */
    expect_in_output("status:   pass, placement-sensitive\n");
    const char *plain[] = {"", "--repeat 2 --no-guard"};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(repro(v, odd, plain[k]), 0);
        expect_in_output("status:   pass\n");
        assert_null(strstr(out, "placement"));
    }
    assert_int_equal(repro(v, "'reduceSum dtype=f32 in=[64,33] axis=0 seed=3'", "--repeat 2"),
                     0); /* 8448 bytes: 64-byte aligned at both placements */
    assert_null(strstr(out, "placement"));

    char dir[] = "/tmp/capcheck_guard_XXXXXX", path[600], args[1024];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/a.cases", dir);
    cc_t_write(path, "reduceSum dtype=f32 in=[63,33] axis=0 seed=3\n"
                     "reduceSum dtype=f32 in=[5,7] axis=0 seed=4\n"
                     "reduceSum dtype=f32 in=[64,33] axis=0 seed=5\n");
    snprintf(args, sizeof args, "run %s " MUTANTS " --repeat 2 -j 1 --out %s/r", path, dir);
    assert_int_equal(cc_t_run("CAPCHECK_MUTANT=reducesum_alignment_order ", args, out, sizeof out),
                     0);
    char *rep = cc_t_slurp_in(dir, "r", "report.json");
    expect_in(rep, "\"vacuous\": 0, \"suspect\": 0, \"placement_sensitive\": 2},");
    expect_in(rep, "\"nondeterministic\": 0, \"vacuous\": 0, \"suspect\": 0, "
                   "\"placement_sensitive\": 2,");
    free(rep);
    char *md = cc_t_slurp_in(dir, "r", "report.md");
    expect_in(md, "- placement-sensitive: 2 cases");
    expect_in(md, "- **reduceSum f32 cpu:");
    expect_in(md, "**: 2 of 3; first: y[0]: ");
    free(md);
    snprintf(args, sizeof args, "validate %s/r", dir);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    placement_record_reads_back(dir);
    static const char *const words[] = {"fail", "allow"};
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s.conf", dir, words[k]);
        char policy[512];
        snprintf(policy, sizeof policy,
                 "format capcheck-policy/1\nlibtorch_version any\nrequire plugin.mutants.* "
                 "f32\nmin_passing 1\nmin_vjp_passing 0\nmin_distinct_shapes 1\n"
                 "shape_classes none\nlayout_classes none\nedge_classes none\n"
                 "placement_sensitive %s\n",
                 words[k]);
        cc_t_write(path, policy);
        snprintf(args, sizeof args, "gate %s/r --policy %s --all", dir, path);
        assert_int_equal(cc_t_run(NULL, args, out, sizeof out), k == 0 ? 1 : 0);
        expect_in_output(k == 0 ? "  - 2 passing cases are placement-sensitive (other bits when "
                                  "--repeat moved their buffers; the policy has "
                                  "placement_sensitive fail); first: "
                                  "CAPCHECK_MUTANT=reducesum_alignment_order " CAPCHECK_BIN " repro "
                                  "'reduceSum dtype=f32 device=cpu in=[63,33]"
                                : "  placement-sensitive: 2 passing cases gave other bits when "
                                  "--repeat moved their buffers (allowed: placement_sensitive "
                                  "allow)");
        /* the command reruns it as the run did: the plugin, its mutant, the repeat */
        expect_in_output("seed=3' --provider-lib " CAPCHECK_PLUGIN_DIR
                         "/mutants.so --tf32 off --deterministic off --repeat 2\n");
    }
    /* the evidence counts them, and conforms to its schema with the count */
    snprintf(args, sizeof args, "evidence %s/r --policy %s --out %s/ev", dir, path, dir);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    char *ev = cc_t_slurp_in(dir, "ev", "plugin.mutants.cpu.reduce_sum/evidence.json");
    expect_in(ev, "\"placement_sensitive\": 2,");
    free(ev);
    snprintf(args, sizeof args,
             "validate %s/ev/plugin.mutants.cpu.reduce_sum/evidence.json --schema "
             CAPCHECK_SOURCE_DIR "/reports/evidence.schema.json", dir);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    cc_t_remove_dir(dir);
}

/* No false alarms: the unmutated plugin and the reference under --repeat 3, guarded. */
static void test_clean_providers_repeat_clean(void **state)
{
    (void)state;
    char dir[] = "/tmp/capcheck_guard_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char args[512];
    snprintf(args, sizeof args, "run --op softmax " MUTANTS " --repeat 3 -j 2 --out %s/clean",
             dir);
    assert_int_equal(cc_t_run("CAPCHECK_MUTANT= ", args, out, sizeof out), 0);
    snprintf(args, sizeof args,
             "run --op layerNorm --provider reference --repeat 2 -j 2 --out %s/ref", dir);
    assert_int_equal(cc_t_run(NULL, args, out, sizeof out), 0);
    cc_t_remove_dir(dir);
}

/* 1 when every slack byte of buffer i holds the canary (0xa5). */
static int slack_all_canary(const cc_guard_set *s, int i)
{
    for (size_t k = 0; k < s->b[i].slack_len; k++)
        if (s->b[i].slack[k] != 0xa5)
            return 0;
    return 1;
}

/* A mapping kept for the next case keeps its canary where its last slack was intact and the
 * next slack overlaps it; whatever the sizes, placements and the last call did, the new slack
 * holds the canary on every byte: where the last buffer's data was, where a provider wrote
 * without a check reading it since, around an input's data. */
static void test_reused_mappings_hold_the_canary(void **state)
{
    (void)state;
    const size_t sizes[] = {1000, 200, 4000, 1, 4096, 3000, 64};
    for (int place = CC_PLACE_END; place <= CC_PLACE_START; place++)
        for (int input = 0; input <= 1; input++)
            for (int spoil = 0; spoil <= 2; spoil++) { /* none; checked; written, unchecked */
                cc_guard_cache cache = {0};
                for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
                    cc_guard_set s;
                    cc_guard_set_init(&s, 1);
                    s.cache = &cache;
                    s.place = (cc_guard_place)place;
                    unsigned char *w = input ? cc_guard_alloc_input(&s, sizes[k], "input x")
                                             : cc_guard_alloc(&s, sizes[k], "output y");
                    assert_non_null(w);
                    assert_true(slack_all_canary(&s, 0));
                    memset(w, 0x11, sizes[k]); /* data, later slack of a smaller buffer */
                    if (input)
                        cc_guard_seal(&s, w);
                    cc_guard_arm(&s);
                    if (!input && spoil == 2 && s.b[0].slack_len) /* a provider's stray write */
                        s.b[0].slack[s.b[0].slack_len / 2] = 0x22;
                    cc_guard_arm(NULL);
                    char msg[384];
                    if (spoil == 1)
                        assert_int_equal(cc_guard_check(&s, msg, sizeof msg), 0);
                    cc_guard_free_all(&s);
                }
                cc_guard_cache_clear(&cache);
            }
}

static void test_bad_repeat_is_refused(void **state)
{
    (void)state;
    assert_int_equal(cc_t_run(NULL, "repro " EXP_LINE " --repeat 0", out, sizeof out), 2);
    expect_in_output("--repeat wants a whole number of calls from 1 to 1000");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_past_the_end),
        cmocka_unit_test(test_write_past_the_end),
        cmocka_unit_test(test_write_into_an_input),
        cmocka_unit_test(test_write_into_a_large_input),
        cmocka_unit_test(test_write_before_the_start),
        cmocka_unit_test(test_read_before_the_start_needs_the_other_placement),
        cmocka_unit_test(test_a_run_records_every_fault_and_goes_on),
        cmocka_unit_test(test_a_run_catches_every_write_into_an_input),
        cmocka_unit_test(test_every_third_call_needs_repeat),
        cmocka_unit_test(test_rare_race_needs_the_repeat_its_frequency_asks),
        cmocka_unit_test(test_varying_bits_are_nondeterministic),
        cmocka_unit_test(test_alignment_dependent_bits_are_placement_sensitive),
        cmocka_unit_test(test_a_spoiled_second_call_is_a_race),
        cmocka_unit_test(test_clean_providers_repeat_clean),
        cmocka_unit_test(test_bad_repeat_is_refused),
        cmocka_unit_test(test_reused_mappings_hold_the_canary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
