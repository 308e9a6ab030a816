/* --shard auto: the shard index and count from the engine that launched the job, so a CI
 * matrix or a batch array can run `capcheck run --shard auto` unchanged in every job.
 *
 *   engine                      index variable (first)        count variable
 *   GitLab CI `parallel: N`     CI_NODE_INDEX (1)             CI_NODE_TOTAL
 *   Kubernetes Indexed Job      JOB_COMPLETION_INDEX (0)      CAPCHECK_JOB_COMPLETIONS, set in
 *                                                             the manifest to spec.completions
 *   Slurm job array             SLURM_ARRAY_TASK_ID           SLURM_ARRAY_TASK_COUNT, with
 *                               (SLURM_ARRAY_TASK_MIN,        SLURM_ARRAY_TASK_MAX: the array
 *                               step SLURM_ARRAY_TASK_STEP)   must be an evenly spaced range
 *   Buildkite `parallelism`     BUILDKITE_PARALLEL_JOB (0)    BUILDKITE_PARALLEL_JOB_COUNT
 *   GitHub Actions matrix, or   CAPCHECK_SHARD_INDEX (1)      CAPCHECK_SHARD_COUNT
 *   any other launcher          (set by the workflow from the matrix: ci/github/nightly.yml)
 *
 * An engine is present when its index variable is set. Shard I of N is then the same shard
 * `--shard I/N` runs (1-based). Refused, with one sentence: no engine present; an engine whose
 * count is missing or whose values are not whole numbers in range; two engines that disagree
 * (two that agree are accepted). */
#ifndef CAPCHECK_SHARD_AUTO_H
#define CAPCHECK_SHARD_AUTO_H

#include <stddef.h>

/* How the environment is read: getenv in capcheck (cc_shard_auto_getenv), a table in tests. */
typedef const char *(*cc_env_lookup)(const char *name, void *ctx);
const char *cc_shard_auto_getenv(const char *name, void *ctx);

/* Returns 0 with *index (1-based) and *count, and in `source` the engine and the variables it
 * was read from ("GitLab CI parallel: CI_NODE_INDEX=3 CI_NODE_TOTAL=8"); or -1 with a sentence
 * in msg. */
int cc_shard_auto(cc_env_lookup get, void *ctx, int *index, int *count, char *source,
                  size_t source_len, char *msg, size_t len);

#endif
