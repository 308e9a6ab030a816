/* libFuzzer target: the case-line parser and the "#! seen" directives of case files
 * (harness/report/expect.h) (scripts/fuzz runs it).
 *
 * Properties: cc_case_parse, cc_cases_parse_text and cc_expect_parse_text never crash, leak or
 * trip UBSan on any input; a line that parses prints back (cc_case_print) to a canonical line that fits a
 * result's line buffer, parses again, and prints identically (print . parse is a fixpoint). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/case/case.h"
#include "harness/report/expect.h"

/* Generator lines expand into count x dtypes x devices x layouts (x every op for '*') cases:
 * keep the expansion small so one input stays fast. Returns 0 when the text may expand a lot. */
static int small_expansion(const char *s)
{
    int seen = 0;
    for (const char *p = strstr(s, "count="); p; p = strstr(p + 6, "count=")) {
        long long v = strtoll(p + 6, NULL, 0);
        if (++seen > 2 || v < 0 || v > 3)
            return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    cc_case_defaults def = {CC_CPU, 1};
    cc_parse_error err;

    cc_case c;
    if (cc_case_parse(text, &def, &c, &err) == 0) {
        char a[4 * CC_CASE_LINE_MAX], b[4 * CC_CASE_LINE_MAX];
        cc_case_print(&c, a, sizeof a);
        if (strlen(a) >= CC_CASE_LINE_MAX) {
            fprintf(stderr, "canonical line of %zu characters (max %d): %s\n", strlen(a),
                    CC_CASE_LINE_MAX - 1, a);
            abort();
        }
        cc_case c2;
        if (cc_case_parse(a, &def, &c2, &err) != 0) {
            fprintf(stderr, "the canonical line does not parse: %s\n  %s (column %d)\n", a,
                    err.msg, err.column);
            abort();
        }
        cc_case_print(&c2, b, sizeof b);
        if (strcmp(a, b) != 0) {
            fprintf(stderr, "print(parse(print(c))) differs:\n  %s\n  %s\n", a, b);
            abort();
        }
    }
    if (small_expansion(text)) {
        cc_case_list l = {0};
        cc_cases_parse_text(text, "fuzz", &def, &l, &err);
        cc_case_list_free(&l);
        cc_expectations e = {0};
        cc_expect_parse_text(text, "fuzz", &def, &e, &err);
        cc_expect_free(&e);
    }
    free(text);
    return 0;
}
