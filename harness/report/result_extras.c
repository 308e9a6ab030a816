#define _POSIX_C_SOURCE 200809L
#include "harness/report/result_extras.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"

static const struct {
    const char *key, *meaning;
} FLAGS[CC_RESULT_FLAG_COUNT] = {
    [CC_RESULT_VACUOUS] = {"vacuous", "checks that could not have failed: the bound exceeds the "
                                      "values compared"},
    [CC_RESULT_SUSPECT] = {"suspect", "passed, but the verdict is in doubt"},
    [CC_RESULT_RETRIED] = {"retried", "the worker died from outside and the case ran again"},
    [CC_RESULT_PLACEMENT] = {"placement_sensitive", "other bits when --repeat moved the buffers, "
                                                    "the same again where they were: not a race"},
};

const char *cc_result_flag_name(int flag)
{
    return flag >= 0 && flag < CC_RESULT_FLAG_COUNT ? FLAGS[flag].key : "?";
}

const char *cc_result_flag_meaning(int flag)
{
    return flag >= 0 && flag < CC_RESULT_FLAG_COUNT ? FLAGS[flag].meaning : "?";
}

static int platform_id(cc_result_extras *x, const char *name)
{
    for (int k = 0; k < x->n_platforms; k++)
        if (strcmp(x->platforms[k], name) == 0)
            return k;
    if (x->n_platforms == CC_EXTRAS_MAX_PLATFORMS)
        return CC_EXTRAS_MAX_PLATFORMS - 1; /* the last one stands for the rest */
    snprintf(x->platforms[x->n_platforms], sizeof x->platforms[0], "%s", name);
    return x->n_platforms++;
}

/* Whether the line may carry one of the keys at all: most lines of most runs carry none, and
 * need no parse. */
static int mentions_a_key(const char *line)
{
    if (strstr(line, "\"platform\""))
        return 1;
    for (int k = 0; k < CC_RESULT_FLAG_COUNT; k++) {
        char quoted[40];
        snprintf(quoted, sizeof quoted, "\"%s\"", FLAGS[k].key);
        if (strstr(line, quoted))
            return 1;
    }
    return 0;
}

int cc_result_extras_read(const char *dir, size_t n, cc_result_extras *x, char *msg, size_t len)
{
    memset(x, 0, sizeof *x);
    x->n = n;
    x->flags = calloc(n ? n : 1, 1);
    x->platform = malloc(n ? n : 1);
    if (!x->flags || !x->platform) {
        cc_result_extras_free(x);
        snprintf(msg, len, "out of memory");
        return -1;
    }
    memset(x->platform, -1, n);
    char path[1100];
    snprintf(path, sizeof path, "%s/results.jsonl", dir);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(msg, len, "cannot read %s: %s", path, strerror(errno));
        cc_result_extras_free(x);
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    while ((got = getline(&line, &cap, f)) > 0) {
        if (!mentions_a_key(line))
            continue;
        char why[128];
        cc_json *rec = cc_json_parse(line, (size_t)got, why, sizeof why);
        int64_t index;
        if (rec && cc_json_i64(rec, "index", &index) == 0 && index >= 0 && (uint64_t)index < n) {
            const char *platform;
            if (cc_json_string(rec, "platform", &platform) == 0 && platform[0])
                x->platform[index] = (signed char)platform_id(x, platform);
            for (int k = 0; k < CC_RESULT_FLAG_COUNT; k++) {
                int v;
                if (cc_json_bool(rec, FLAGS[k].key, &v) == 0) {
                    x->have_flag[k] = 1;
                    x->flags[index] |= (unsigned char)(v ? 1u << k : 0);
                }
            }
        }
        cc_json_free(rec);
    }
    free(line);
    fclose(f);
    return 0;
}

void cc_result_extras_free(cc_result_extras *x)
{
    free(x->flags);
    free(x->platform);
    memset(x, 0, sizeof *x);
}

const char *cc_result_extras_platform(const cc_result_extras *x, size_t i)
{
    return i < x->n && x->platform[i] >= 0 ? x->platforms[(int)x->platform[i]] : NULL;
}

int cc_result_extras_flag(const cc_result_extras *x, size_t i, int flag)
{
    return i < x->n && (x->flags[i] >> flag & 1);
}
