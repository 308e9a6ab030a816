#define _POSIX_C_SOURCE 200809L
#include "harness/evidence/shard_auto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SHARDS 4096 /* as --shard I/N (cc_shard_parse) */

/* One engine: its index is index_var - first (first fixed, or read from first_var), divided
 * by the step (1, or read from step_var), plus 1; its count is count_var. last_var, when
 * given, must agree with first, step and count (a Slurm array with gaps does not). */
typedef struct {
    const char *name;
    const char *index_var, *count_var;
    long first;
    const char *first_var, *step_var, *last_var;
    const char *count_hint; /* how to set a missing count */
} engine;

static const engine ENGINES[] = {
    {"GitLab CI parallel", "CI_NODE_INDEX", "CI_NODE_TOTAL", 1, NULL, NULL, NULL,
     "GitLab sets it with `parallel: N`"},
    {"a Kubernetes Indexed Job", "JOB_COMPLETION_INDEX", "CAPCHECK_JOB_COMPLETIONS", 0, NULL,
     NULL, NULL, "set it in the Job's env to spec.completions (ci/kubernetes/nightly-job.yaml)"},
    {"a Slurm job array", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", 0,
     "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_STEP", "SLURM_ARRAY_TASK_MAX",
     "sbatch --array sets it"},
    {"Buildkite parallel jobs", "BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT", 0,
     NULL, NULL, NULL, "Buildkite sets it with `parallelism: N`"},
    {"a GitHub Actions matrix or another launcher", "CAPCHECK_SHARD_INDEX",
     "CAPCHECK_SHARD_COUNT", 1, NULL, NULL, NULL,
     "set both from the matrix (ci/github/nightly.yml)"},
};
#define N_ENGINES (sizeof ENGINES / sizeof ENGINES[0])

const char *cc_shard_auto_getenv(const char *name, void *ctx)
{
    (void)ctx;
    return getenv(name);
}

static const char *value(cc_env_lookup get, void *ctx, const char *name)
{
    const char *v = name ? get(name, ctx) : NULL;
    return v && *v ? v : NULL;
}

/* A whole number in [0, 10^9]; -1 with msg when it is not. */
static int whole(const char *var, const char *v, long *out, char *msg, size_t len)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (end == v || *end || x < 0 || x > 1000000000L) {
        snprintf(msg, len, "--shard auto: %s is '%.40s', not a whole number", var, v);
        return -1;
    }
    *out = x;
    return 0;
}

/* Engine e's shard, when present: 1 found, 0 absent, -1 refused (msg). */
static int read_engine(const engine *e, cc_env_lookup get, void *ctx, long *index, long *count,
                       char *msg, size_t len)
{
    const char *iv = value(get, ctx, e->index_var);
    if (!iv)
        return 0;
    const char *cv = value(get, ctx, e->count_var);
    if (!cv) {
        snprintf(msg, len, "--shard auto: %s is set (%s) but %s is not: %s", e->index_var,
                 e->name, e->count_var, e->count_hint);
        return -1;
    }
    long id, n, first = e->first, step = 1;
    const char *fv = value(get, ctx, e->first_var), *sv = value(get, ctx, e->step_var),
               *lv = value(get, ctx, e->last_var);
    if (whole(e->index_var, iv, &id, msg, len) || whole(e->count_var, cv, &n, msg, len) ||
        (fv && whole(e->first_var, fv, &first, msg, len)) ||
        (sv && whole(e->step_var, sv, &step, msg, len)))
        return -1;
    if (e->first_var && !fv) {
        snprintf(msg, len, "--shard auto: %s is set (%s) but %s is not", e->index_var, e->name,
                 e->first_var);
        return -1;
    }
    if (n < 1 || n > MAX_SHARDS) {
        snprintf(msg, len, "--shard auto: %s=%ld; capcheck runs 1 to %d shards", e->count_var, n,
                 MAX_SHARDS);
        return -1;
    }
    if (step < 1) {
        snprintf(msg, len, "--shard auto: %s=%ld; a step is at least 1", e->step_var, step);
        return -1;
    }
    long last = first + (n - 1) * step, lastv;
    if (lv && whole(e->last_var, lv, &lastv, msg, len))
        return -1;
    if (lv && lastv != last) {
        snprintf(msg, len,
                 "--shard auto: %s is not an evenly spaced range (%s=%ld, %s=%ld, %s=%ld, "
                 "%s=%ld): give it as FIRST-LAST or FIRST-LAST:STEP",
                 e->name, e->first_var, first, e->last_var, lastv, e->step_var, step,
                 e->count_var, n);
        return -1;
    }
    if (id < first || id > last || (id - first) % step) {
        snprintf(msg, len, "--shard auto: %s=%s is not one of the %ld shards of %s (%ld to %ld%s)",
                 e->index_var, iv, n, e->name, first, last, step > 1 ? " by the step" : "");
        return -1;
    }
    *index = (id - first) / step + 1;
    *count = n;
    return 1;
}

int cc_shard_auto(cc_env_lookup get, void *ctx, int *index, int *count, char *source,
                  size_t source_len, char *msg, size_t len)
{
    const engine *found = NULL;
    long fi = 0, fn = 0;
    for (size_t k = 0; k < N_ENGINES; k++) {
        const engine *e = &ENGINES[k];
        long i, n;
        int got = read_engine(e, get, ctx, &i, &n, msg, len);
        if (got < 0)
            return -1;
        if (!got)
            continue;
        if (found && (i != fi || n != fn)) {
            snprintf(msg, len,
                     "--shard auto: two engines disagree: %s says shard %ld/%ld (%s, %s), %s "
                     "says %ld/%ld (%s, %s); unset one, or give --shard I/N",
                     found->name, fi, fn, found->index_var, found->count_var, e->name, i, n,
                     e->index_var, e->count_var);
            return -1;
        }
        if (!found) {
            found = e;
            fi = i;
            fn = n;
            snprintf(source, source_len, "%s: %s=%s %s=%s", e->name, e->index_var,
                     value(get, ctx, e->index_var), e->count_var, value(get, ctx, e->count_var));
        }
    }
    if (!found) {
        snprintf(msg, len,
                 "--shard auto: no engine gives this job a shard: none of CI_NODE_INDEX "
                 "(GitLab parallel), JOB_COMPLETION_INDEX (Kubernetes Indexed Job), "
                 "SLURM_ARRAY_TASK_ID (Slurm array), BUILDKITE_PARALLEL_JOB (Buildkite) or "
                 "CAPCHECK_SHARD_INDEX (GitHub Actions matrix, any launcher) is set; give "
                 "--shard I/N instead");
        return -1;
    }
    *index = (int)fi;
    *count = (int)fn;
    return 0;
}
