/* tests/lean_cuda_run.c: a run on CUDA made from a CPU run, for tests/check_lean_emit.py where no
 * GPU is (the CUDA side of emit-lean: the profile TorchLean maintains for cuda, its runtime
 * guards and executor, its libTorchCudaView layout).
 *
 *   lean_cuda_run SRC DST [--fail OP:DTYPE]
 *
 * Reads the sealed run SRC, sets every result's device (and its case line's device=) to cuda,
 * with --fail marks OP's DTYPE results failed (so the gate checks OP in the other dtypes only),
 * and writes DST as capcheck run does: results, report.json with its results digest, the seal.
 * Exit 0, or 2 with one sentence. The provenance still names the CPU machine: a fixture, not
 * evidence. */
#include <stdio.h>
#include <string.h>

#include "core/dtype.h"
#include "harness/evidence/merge.h"

int main(int argc, char **argv)
{
    char msg[1024], fail_op[32] = "";
    cc_dtype fail_dtype = CC_DTYPE_COUNT;
    if (argc == 5 && strcmp(argv[3], "--fail") == 0) {
        const char *colon = strchr(argv[4], ':');
        if (!colon || colon - argv[4] >= (int)sizeof fail_op ||
            cc_dtype_parse(colon + 1, &fail_dtype)) {
            fprintf(stderr, "lean_cuda_run: --fail wants OP:DTYPE\n");
            return 2;
        }
        snprintf(fail_op, sizeof fail_op, "%.*s", (int)(colon - argv[4]), argv[4]);
    } else if (argc != 3) {
        fprintf(stderr, "usage: lean_cuda_run SRC DST [--fail OP:DTYPE]\n");
        return 2;
    }
    cc_run r;
    if (cc_run_load(argv[1], CC_LOAD_SEAL | CC_LOAD_RESULTS | CC_LOAD_PROVENANCE, &r, msg,
                    sizeof msg)) {
        fprintf(stderr, "lean_cuda_run: %s\n", msg);
        return 2;
    }
    for (size_t i = 0; i < r.n_results; i++) {
        cc_result *res = &r.results[i];
        char *dev = strstr(res->line, " device=cpu");
        if (dev && strlen(res->line) + 2 < sizeof res->line) { /* one byte longer */
            memmove(dev + 12, dev + 11, strlen(dev + 11) + 1);
            memcpy(dev, " device=cuda", 12);
        }
        res->device = CC_CUDA;
        if (strcmp(res->op, fail_op) == 0 && res->dtype == fail_dtype)
            res->status = CC_RES_FAIL;
    }
    int rc = cc_run_write(&r, argv[2], NULL, msg, sizeof msg);
    if (rc)
        fprintf(stderr, "lean_cuda_run: %s\n", msg);
    cc_run_free(&r);
    return rc ? 2 : 0;
}
