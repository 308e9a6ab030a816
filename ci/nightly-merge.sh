#!/usr/bin/env bash
# ci/nightly-merge.sh SHARDS OUT — the step after the shards of a nightly, the same on every
# engine (ci/github/nightly.yml, ci/kubernetes/merge-job.yaml, ci/slurm/merge.sbatch):
#
#   1. capcheck merge SHARDS/shard-* --out OUT   the report an unsharded run writes, report.html
#                                               with the gate's verdicts, report.junit.xml
#   2. capcheck gate OUT                        OUT/gate.txt, OUT/evidence/<capsule>/evidence.json
#   3. capcheck diff BASELINE OUT               OUT/diff.txt, when CAPCHECK_BASELINE names a run
#   4. capcheck history NIGHTS/* OUT            OUT/history/history.html and .json, when
#                                               CAPCHECK_NIGHTS names a folder of earlier nightlies
#                                               (one sealed run per subfolder, names sorting by date)
#
# Environment: CAPCHECK (default build/capcheck), CAPCHECK_POLICY (default reports/policy.conf),
# CAPCHECK_BASELINE, CAPCHECK_NIGHTS; CAPCHECK_ALLOWED_SIGNERS, the keys trusted (git's
# allowedSignersFile format: merge checks each signed shard against them; gate, diff and history
# verify with them), and CAPCHECK_SIGN_KEY, the OpenSSH key OUT is signed with (docs/ci.md,
# "Signing the nightly"). Exit: 2 when a step refused its input (a shard missing, an unsealed
# report, a signature that does not verify, ...); else 1 when the gate holds a required capsule
# back or the diff finds a regression or a new failure; else 0.
set -uo pipefail

if [[ $# -ne 2 ]]; then
    echo "usage: ci/nightly-merge.sh SHARDS_DIR OUT_DIR" >&2
    exit 2
fi
shards=$1 out=$2
capcheck=${CAPCHECK:-build/capcheck}
policy=${CAPCHECK_POLICY:-reports/policy.conf}
say() { printf 'nightly-merge: %s\n' "$*"; }

shopt -s nullglob
parts=("$shards"/shard-*)
if ((${#parts[@]} == 0)); then
    say "no $shards/shard-* folders to merge" >&2
    exit 2
fi

trust=() sign=()
if [[ -n "${CAPCHECK_ALLOWED_SIGNERS:-}" ]]; then
    trust=(--allowed-signers "$CAPCHECK_ALLOWED_SIGNERS")
fi
if [[ -n "${CAPCHECK_SIGN_KEY:-}" ]]; then
    sign=(--sign "$CAPCHECK_SIGN_KEY")
fi

rc=0
"$capcheck" merge "${parts[@]}" --out "$out" --policy "$policy" ${trust[@]+"${trust[@]}"} \
    ${sign[@]+"${sign[@]}"} || rc=$?
if ((rc >= 2)); then
    exit "$rc"
fi
rc=0
"$capcheck" gate "$out" --policy "$policy" --evidence "$out/evidence" ${trust[@]+"${trust[@]}"} \
    >"$out/gate.txt" || rc=$?
tail -n 1 "$out/gate.txt"
if ((rc >= 2)); then
    exit "$rc"
fi

if [[ -n "${CAPCHECK_BASELINE:-}" ]]; then
    drc=0
    "$capcheck" diff "$CAPCHECK_BASELINE" "$out" ${trust[@]+"${trust[@]}"} >"$out/diff.txt" ||
        drc=$?
    tail -n 1 "$out/diff.txt"
    if ((drc >= 2)); then
        exit "$drc"
    fi
    ((drc > rc)) && rc=$drc
else
    say "no CAPCHECK_BASELINE: diff skipped"
fi

if [[ -n "${CAPCHECK_NIGHTS:-}" ]]; then
    nights=("$CAPCHECK_NIGHTS"/*/)
    "$capcheck" history "${nights[@]}" "$out" --out "$out/history" ${trust[@]+"${trust[@]}"} ||
        exit 2
else
    say "no CAPCHECK_NIGHTS: history skipped"
fi
say "report: $out/report.html; JUnit: $out/report.junit.xml; exit $rc"
exit "$rc"
