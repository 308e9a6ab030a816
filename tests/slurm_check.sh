#!/usr/bin/env bash
# tests/slurm_check.sh CAPCHECK — the nightly on a real Slurm: a single-node cluster (munged,
# slurmctld and slurmd, started here from a generated slurm.conf in a temporary folder, stopped at
# the end) runs ci/slurm/nightly.sbatch as the array job it is, over a small case set in 3 shards
# (capcheck run --shard auto from SLURM_ARRAY_TASK_*), then ci/slurm/merge.sbatch after it
# (--dependency=afterok: capcheck merge, gate, history); the merged shards' verdicts (gate --all)
# and rows must equal one process's run of the same cases.
#
# The cluster: root runs every daemon (SlurmUser and SlurmdUser root), no cgroups
# (proctrack/linuxproc, task/none: a container has no cgroup to give), no accounting, munge with
# a key and socket of its own, ports the kernel says are free: several of these may run at once.
# Options on sbatch's command line override the script's own (--gres=none, one CPU a task, the
# logs in the temporary folder); the environment sets the binary, the cases and the device.
#
# Exit: 0 equal; 1 not, or a cluster that should start and did not (its logs are printed);
# 77 (CTest's skip) when this machine cannot run Slurm: not root, or slurm-wlm and munge are
# not installed (scripts/setup installs them), or capcheck was built without ATen.
set -uo pipefail

capcheck=$(realpath "${1:?usage: tests/slurm_check.sh path/to/capcheck}")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { printf 'slurm_check: %s\n' "$*"; }
# "skipped: <why>" at the start of its line, as scripts/check-skips reads a skip's reason
skip() { printf 'skipped: %s\n' "$*"; exit 77; }

[[ $(id -u) -eq 0 ]] || skip "not root (slurmd starts jobs as their user; the test runs every daemon as root)"
for tool in munged slurmctld slurmd sbatch squeue scontrol sinfo; do
    command -v "$tool" >/dev/null || skip "no $tool (Debian: slurm-wlm and munge; scripts/setup installs them)"
done
"$capcheck" list platforms --provider aten >/dev/null 2>&1 ||
    skip "capcheck was built without the ATen provider: $capcheck cannot run it"

tmp=$(mktemp -d /tmp/capcheck_slurm_XXXXXX)
pids=()
# shellcheck disable=SC2317 # called by the trap
stop() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
    rm -rf "$tmp"
}
trap stop EXIT
fail() {
    say "FAILED: $*"
    for log in "$tmp"/log/*; do
        [[ -s $log ]] && { echo "--- $log"; tail -n 30 "$log"; }
    done
    exit 1
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# --- the cluster ---------------------------------------------------------------------------
mkdir -p "$tmp"/{munge,state,spool,log,night,nights}
chmod 755 "$tmp" "$tmp/munge"
head -c 1024 /dev/urandom >"$tmp/munge/munge.key"
chmod 400 "$tmp/munge/munge.key"
socket=$tmp/munge/munge.socket
munged --foreground --force --socket="$socket" --key-file="$tmp/munge/munge.key" \
    --pid-file="$tmp/munge/munged.pid" --seed-file="$tmp/munge/seed" \
    --log-file="$tmp/log/munged.log" >"$tmp/log/munged.out" 2>&1 &
pids+=($!)
host=$(hostname -s)
cat >"$tmp/slurm.conf" <<EOF
ClusterName=capcheck
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
NodeName=capcheck NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=capcheck Nodes=capcheck Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$tmp/slurm.conf
for _ in $(seq 50); do [[ -S $socket ]] && break; sleep 0.1; done
[[ -S $socket ]] || fail "munged made no socket"
slurmctld -D -f "$SLURM_CONF" >"$tmp/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -N capcheck -f "$SLURM_CONF" >"$tmp/log/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 150); do
    [[ $(sinfo -h -o %t 2>/dev/null) == idle ]] && break
    sleep 0.2
done
[[ $(sinfo -h -o %t 2>/dev/null) == idle ]] || fail "the node never came up idle ($(sinfo -h -o %t 2>&1))"
say "$(sinfo -V) up: node capcheck idle with $(nproc) CPUs"

# --- the small nightly: the same case twice in a file (a repeat shards may split) ----------
cases=$tmp/small.cases
cat >"$cases" <<'EOF'
add count=12 dtype=f32,f64 layout=contig,transpose size=small seed=1 stream=2
softmax count=12 dtype=f32 layout=contig,transpose size=small seed=2 stream=2
matmul count=6 dtype=f64 size=small seed=3 stream=2
add dtype=f32 in=[3,4],[3,4] seed=7
add dtype=f32 in=[3,4],[3,4] seed=7
add dtype=f32 in=[3,4],[3,4] seed=7
EOF
policy=$tmp/small.policy
cat >"$policy" <<'EOF'
format capcheck-policy/1
libtorch_version any
require capcheck.aten_cpu.add f32 f64
require capcheck.aten_cpu.softmax f32
min_passing 20
min_vjp_passing 20
min_distinct_shapes 10
shape_classes none
layout_classes contig transpose
edge_classes none
EOF

# one process
"$capcheck" run "$cases" --device cpu --out "$tmp/single" >"$tmp/log/single.out" 2>&1
"$capcheck" gate "$tmp/single" --policy "$policy" --all >"$tmp/single.all.txt"
single_rc=$?
"$capcheck" gate "$tmp/single" --policy "$policy" >"$tmp/single.gate.txt"

# the array job, then the merge after it, as ci/slurm documents them (from the checkout)
cd "$root" || fail "no checkout at $root"
common=(--export="ALL,CAPCHECK=$capcheck,CAPCHECK_RUN=$tmp/night,CAPCHECK_CASES=$cases,CAPCHECK_DEVICE=cpu,CAPCHECK_POLICY=$policy,CAPCHECK_NIGHTS=$tmp/nights")
jid=$(sbatch --parsable --array=1-3 --cpus-per-task=1 --gres=none \
    --output="$tmp/log/nightly-%A_%a.out" "${common[@]}" ci/slurm/nightly.sbatch) ||
    fail "sbatch refused ci/slurm/nightly.sbatch"
mid=$(sbatch --parsable --dependency=afterok:"$jid" --cpus-per-task=1 \
    --output="$tmp/log/merge-%j.out" "${common[@]}" ci/slurm/merge.sbatch) ||
    fail "sbatch refused ci/slurm/merge.sbatch"
say "submitted array job $jid (3 shards) and merge job $mid after it"
for _ in $(seq 600); do
    [[ -z $(squeue -h -j "$jid,$mid" 2>/dev/null) ]] && break
    sleep 0.5
done
[[ -z $(squeue -h -j "$jid,$mid" 2>/dev/null) ]] && state=$(scontrol show job "$mid" | grep -o 'JobState=[A-Z]*')
[[ ${state:-} == JobState=COMPLETED ]] || fail "the merge job did not complete (${state:-still queued or running})"

# --- the same verdicts ---------------------------------------------------------------------
for k in 1 2 3; do
    grep -q "\"index\": $k, \"count\": 3" "$tmp/night/shard-$k/report.json" ||
        fail "shard-$k is not shard $k/3 of the run"
done
merged=$tmp/night/merged
[[ -s $merged/gate.txt && -d $tmp/nights ]] || fail "merge.sbatch left no gate.txt"
strip() { grep -v 'results digest matches' "$1" | sed 's/report sha256:[0-9a-f]*/report sha256:-/'; }
# ci/nightly-merge.sh's gate.txt, every verdict of the merged report, and of the shards gated
# together without a merge: each as one process's
"$capcheck" gate "$merged" --policy "$policy" --all >"$tmp/merged.all.txt"
"$capcheck" gate "$tmp"/night/shard-{1,2,3} --policy "$policy" --all >"$tmp/shards.all.txt"
for pair in single.gate.txt:night/merged/gate.txt single.all.txt:merged.all.txt \
    single.all.txt:shards.all.txt; do
    diff <(strip "$tmp/${pair%%:*}") <(strip "$tmp/${pair#*:}") >"$tmp/log/verdicts.diff" ||
        fail "the verdicts of ${pair#*:} differ from one process's ${pair%%:*} (log/verdicts.diff)"
done
rows() { sed -n '/"totals"/p; /"rows": \[/,$p' "$1/report.json"; }
diff <(rows "$tmp/single") <(rows "$merged") >"$tmp/log/rows.diff" ||
    fail "the merged report's rows differ from one process's"
grep -q 'repeated case lines counted once' "$merged/gate.txt" ||
    fail "the merged gate does not say it folded the repeated lines"
((single_rc == 0)) || fail "the small nightly should check every capsule it requires (gate exit $single_rc)"
say "3 shards on Slurm, merged: the same verdicts as one process ($(head -n 1 "$merged/gate.txt"))"
exit 0
