/* The help of every command (help.h). */
#include "harness/help.h"

#include <string.h>

#include "harness/certify.h"
#include "harness/session/session.h"

#define CC_STR_(x) #x
#define CC_STR(x) CC_STR_(x) /* a number #defined, as text */

#define PROVIDERS                                                                                \
    "Providers (--provider NAME):\n"                                                             \
    "  aten         ATen through libtorch, CPU and (built with CAPCHECK_ATEN_CUDA) CUDA; the\n" \
    "               default\n"                                                                   \
    "  reference    capcheck's own float64 reference (it passes everything: for testing)\n"     \
    "  openblas     OpenBLAS on the CPU: matmul, scaledMatmul, linear, conv, convTranspose\n"   \
    "               in f32/f64 (CAPCHECK_OPENBLAS_THREADS=N; default 1 thread)\n"               \
    "  cublas       cuBLAS on CUDA: matmul, scaledMatmul, linear (CAPCHECK_TF32=1: TF32)\n"      \
    "  cublas-tf32  cuBLAS with TF32 forced on (f32 judged at TF32's u = 2^-11)\n"               \
    "  cudnn        cuDNN on CUDA: conv, convTranspose, softmax, logSoftmax, pools, batchNorm\n" \
    "  cufft        cuFFT on CUDA: fftFno variants 0, 1, 2\n"                                   \
    "  --provider-lib PATH  a plugin: a shared library exporting capcheck_provider_v1\n"         \
    "               (abi/capcheck_provider.h; example: build/plugins/example_plugin.so);\n"      \
    "               one named like a built-in is refused; its capsules are\n"                    \
    "               plugin.NAME.DEVICE.OP unless a catalog row pins its library's sha256\n"      \
    "The reference's capsules are capcheck.oracle.OP (the oracle checking itself). A provider\n" \
    "capcheck was built without answers with one sentence saying so; so does a TorchLean\n"      \
    "provider name (cuDNN: --provider cudnn; mps: none, load one with --provider-lib).\n"

#define EXIT_RUN                                                                                 \
    "Exit codes: (run, repro and shrink's reproducer alike; git bisect run reads 0 as good,\n" \
    "125 as skip and 1 as bad)\n"                                                               \
    "  0    every case passed\n"                                                               \
    "  1    a case did not pass: failed, error, crash, timeout, out-of-bounds, nondeterministic\n"\
    "  125  nothing could be judged: the provider or plugin did not load or initialise, the\n" \
    "       device is absent, a case is unsupported by the provider, memory or disk ran out\n"  \
    "  2    a malformed command line or case line, a missing case file, no case to run, a\n"    \
    "       folder holding an earlier run\n"                                                    \
    "  128+N  signal N (Ctrl-C: 130) interrupted the run\n"                                     \
    "A run of many cases: 1 when any case did not pass, else 125 when any could not be judged\n"\
    "(unsupported, out of memory), else 0. With --expect a result that meets its '#! seen'\n"  \
    "line counts as passed (known unsupported cases: 0), one that breaks it as not passed.\n"

#define MATH_MODES                                                                               \
    "  --tf32 on|off, --deterministic on|off, --attention composed|math|flash|efficient|cudnn\n" \
    "      math modes, passed to the provider's workers as CAPCHECK_TF32=1|0,\n"                 \
    "      CAPCHECK_DETERMINISTIC=1|0 and CAPCHECK_ATTENTION and stated in the report; a mode\n"  \
    "      not given keeps its variable when set, else is off (attention: composed, bmm +\n"     \
    "      softmax, no SDPA). With TF32 on, f32 matmul/conv cases are judged at u = 2^-11\n"

#define PROVIDER_OPTS                                                                            \
    "  --provider NAME | --provider-lib PATH    what runs the cases (providers below)\n"         \
    "  --libtorch DIR       ATen from the libtorch in DIR (the torch/lib of a wheel or of a\n"  \
    "                       PyTorch build tree; CAPCHECK_LIBTORCH=DIR alike): its shim is\n"   \
    "                       built on first use into ~/.cache/capcheck/aten-VERSION-COMMIT\n"    \
    "  --device cpu|cuda    the device of lines that name none (default cpu; gpu, TorchLean's\n" \
    "                       alias, is cuda; TorchLean's other devices: one sentence)\n"

#define ALLOWED_SIGNERS                                                                          \
    "  --allowed-signers FILE  trust runs signed by these keys (git's allowedSignersFile format:\n" \
    "                   'principal keytype base64key' a line): a signed run is verified (the\n"    \
    "                   signature, then every file it lists) and the evidence names its signer;\n" \
    "                   a bad signature, another key, a changed file is refused (exit 2); an\n"  \
    "                   unsigned run is judged as before, unless the policy says\n"              \
    "                   require_signature yes\n"

static const struct {
    const char *name, *summary, *text;
} HELP[] = {
    {"run", "run case files and write the report",
     "usage: capcheck run [FILE...] [options]\n"
     "Run the cases of FILE... (default: the smoke cases embedded in capcheck) and write\n"
     "DIR/results.jsonl (one record per case, as it finishes), DIR/report.md (failures\n"
     "first), DIR/report.json (+ .sha256 seal), DIR/report.junit.xml and DIR/report.html.\n"
     "Options:\n" PROVIDER_OPTS
     "  --out DIR        the run's folder (default out); a folder holding an earlier run is\n"
     "                   refused: --resume DIR finishes it, --force starts over\n"
     "  --force          start over in a folder that holds an earlier run (it is discarded)\n"
     "  --resume DIR     with the same arguments: run only what DIR's journal lacks (damaged\n"
     "                   lines and crashes of workers killed from outside run again) and\n"
     "                   write the report an uninterrupted run writes, in DIR (no --out)\n"
     "  --baseline DIR   report.md says what changed since that run (capcheck diff)\n"
     "  --op NAME        only the cases of op NAME (refused when none is left)\n"
     "  --seed N         the base seed of generator lines without seed= (default 0)\n"
     "  -j N             worker processes (default one per CPU)\n"
     "  --timeout S      a case's limit: S seconds (default 10) + 1 us per element per input;\n"
     "                   also each worker's provider init limit (default 60 s)\n"
     "  --shard I/N      run shard I of N (cases dealt by cost; capcheck merge joins them);\n"
     "                   --shard auto: I and N from GitLab parallel, a Kubernetes Indexed Job,\n"
     "                   a Slurm array, Buildkite or CAPCHECK_SHARD_INDEX/COUNT\n"
     "  --policy F       report.html's gate verdicts under F (default: the built-in policy)\n"
     "  --sign KEY       sign the finished run: DIR/manifest (the sha256 of its files) and\n"
     "                   DIR/manifest.sig (ssh-keygen -Y sign with the OpenSSH key KEY, or its\n"
     "                   .pub when ssh-agent holds it); KEY is tried before the run starts\n"
     "  --cpu-capability LEVEL[,LEVEL...]|all\n"
     "                   every case once per CPU dispatch level (native, amx-fp16, amx,\n"
     "                   avx512-fp16, avx512-bf16, avx512, avx2, default; all: every level this\n"
     "                   CPU supports), set in the workers before ATen and oneDNN start; rows\n"
     "                   per platform key (capcheck list platforms shows this machine's)\n"
     "  --aten-threads N[,N...]|all\n"
     "                   every case once per ATen intra-op thread count (default 1; all: 1 and\n"
     "                   this machine's CPUs, at least 2), with every level; past ATen's grain\n"
     "                   (32768 elements) the work splits over threads: key cpu:...+tN\n"
     "  --expect         judge each result by the files' '#! seen STATUS on KEY...' lines: exit\n"
     "                   1 only for a broken expectation, a crash or an unexpected result (125\n"
     "                   when that result is unsupported or out of memory)\n"
     "  --repeat N       N provider calls per check on the same inputs (1 to 1000): results\n"
     "                   that differ are `nondeterministic`\n"
     "  --no-guard       plain heap buffers (no guard pages or canaries: `out-of-bounds`)\n"
     "  --ref auto|full|sampled\n"
     "                   how the float64 reference is evaluated: auto (default: each case's\n"
     "                   ref=; matmul, linear, conv, attention... cases above 1e8 multiply-adds\n"
     "                   with finite inputs are checked on a stratified sample of elements),\n"
     "                   full (every element), sampled (the sample wherever the op has one)\n"
     "  --ref-threads N  threads per worker for drawing inputs and the reference (1 to 256;\n"
     "                   default: the CPUs divided among the workers)\n"
     "  --max-elements N leave out the cases with a tensor above N elements (e.g. a CPU\n"
     "                   nightly's cap on cases/realistic.cases)\n"
     "  --accumulation strict|relaxed\n"
     "                   how f16/bf16 sums, dot products, softmax denominators, norm\n"
     "                   statistics and window sums are judged: strict (default) as float32\n"
     "                   plus one rounding to the dtype, relaxed as folds in the dtype; every\n"
     "                   result, the report and run.json say which\n"
     "  --power          also measure how large an error each case rejects (capcheck power)\n"
     "  --witness P[,P]  each case that does not pass runs again on up to 4 other providers\n"
     "                   (names, or plugin paths with a '/'): who is wrong\n"
     "  --no-fork        run in this process (for a debugger; no crash isolation)\n"
     "  -v, --verbose    print the line of every case that does not pass\n"
     "  -q, --quiet      print only the closing line (errors still say themselves)\n" MATH_MODES
     "A crash or hang of a provider is that case's result; a worker killed from outside (the\n"
     "OOM killer) runs its case once more (\"retried\": true). Each case that does not pass\n"
     "(with --expect: each result that is news) prints its line and the command that reruns\n"
     "it, unless the run is large: more than " CC_STR(CC_LARGE_RUN) " cases (then from its start), or more\n"
     "than " CC_STR(CC_CASE_LINES_SHOWN) " cases that do not pass (then from the next). A large run's case lines\n"
     "give way (-v: all) to progress (not on a terminal: a line per tenth of the run, at most\n"
     "every " CC_STR(CC_PROGRESS_SECONDS) " s), and it ends with each op x dtype row that did not pass and the\n"
     "command that reruns its worst case, then a closing line: the counts and where\n"
     "report.md, report.html and results.jsonl are. Ctrl-C stops the run and prints the\n"
     "command that finishes it.\n"
     EXIT_RUN PROVIDERS},
    {"certify", "run the evidence suite, then gate, evidence.json and the Lean module",
     "usage: capcheck certify [options]\n"
     "From a provider to checked capsules in one command: run the evidence suite built into\n"
     "capcheck (cases/nightly.cases and cases/edge/*.cases: what checks capsules), then judge\n"
     "it under the policy and write, in the run's folder: report.html (with the verdicts),\n"
     "gate.txt (capcheck gate --all), evidence/<capsule>/evidence.json and Evidence.lean (the\n"
     "TorchLean module of the capsules it upgrades). It ends with one summary: how many\n"
     "capsule x dtype x platform are checked of how many, each required one that is not with\n"
     "its first reason, and where the files are. The same verdicts as capcheck run of those\n"
     "files (at the same --repeat and --aten-threads), then gate, evidence and emit-lean.\n"
     "Options:\n" PROVIDER_OPTS
     "  --out DIR        the run's folder (default out/certify); one holding an earlier run is\n"
     "                   refused: --resume DIR finishes it, --force starts over\n"
     "  --force          start over in a folder that holds an earlier run\n"
     "  --resume DIR     with the same arguments: run only what DIR's journal lacks, then judge\n"
     "  --op NAME        only the suite's cases of op NAME (one capsule's evidence; the other\n"
     "                   required capsules are then held back: no case in the report)\n"
     "  --cpu-capability LEVEL[,LEVEL...]|all\n"
     "                   the suite once per CPU dispatch level: verdicts per platform\n"
     "  --aten-threads N[,N...]|all\n"
     "                   the suite once per ATen intra-op thread count (default on the CPU: "
     CC_CERTIFY_ATEN_THREADS ",\n"
     "                   as the nightly: 1 and this machine's CPUs; key cpu:...+tN past one)\n"
     "  --repeat N       provider calls per check (default " CC_STR(CC_CERTIFY_REPEAT) ", as the nightly): calls that\n"
     "                   differ are `nondeterministic` (or placement-sensitive: docs/reliability.md)\n"
     "  --policy F       the gate's policy (default: the built-in reports/policy.conf)\n"
     "  --catalog F      the capsule catalog (default: the built-in providers/capsules.tsv)\n"
     "  --torchlean C    the TorchLean commit the module targets (default: the newest)\n"
     "  --sign KEY       sign the run (DIR/manifest, as run --sign) and what certify wrote\n"
     "                   (DIR/evidence.manifest); evidence.json and the module name the signer\n"
     "  -j N             worker processes (default one per CPU)\n"
     "  --timeout S      a case's limit, as for run\n" MATH_MODES
     "Progress: a live line on a terminal, a line every 10 s otherwise; a failing case is in\n"
     "report.md and report.html, not on the terminal. Ctrl-C stops it and prints the command\n"
     "that finishes it.\n"
     "Exit codes: 0 every required capsule x dtype (x platform) is checked; 1 one is not (the\n"
     "run's failing or unsupported cases are the policy's to judge); 2 bad input (a policy,\n"
     "catalog or TorchLean commit that cannot be read, a malformed option, a folder holding an\n"
     "earlier run); 125 nothing could be judged (the provider did not load or initialise, the\n"
     "device is absent, no case of the suite ran on the provider, a file that would not be\n"
     "written); 128+N after signal N.\n"
     PROVIDERS},
    {"repro", "rerun one case line alone and show its worst element",
     "usage: capcheck repro 'CASE LINE' [options]\n"
     "Rerun one case in a worker process (a crash or hang is its result) and print its status,\n"
     "bound ratios, worst element (index, inputs, expected, got, bound) and its JSON record.\n"
     "Options:\n" PROVIDER_OPTS
     "  --timeout S      the case's limit (default 10 s + 1 us per element per input), also\n"
     "                   the provider init's (default 60 s)\n"
     "  --witness P[,P]  run the case on other providers too when it does not pass\n"
     "  --cpu-capability LEVEL[,LEVEL...]|all   once per CPU dispatch level\n"
     "  --aten-threads N[,N...]|all   once per ATen thread count\n"
     "  --repeat N, --no-guard, --ref MODE, --accumulation strict|relaxed   as for run\n"
     "  --ref-threads N  threads for drawing inputs and the reference (default: every CPU)\n"
     "  --seed N         seed of a line without seed=\n"
     "  --script FILE    also write the case's standalone Python reproducer (ATen only: torch\n"
     "                   alone, the shim's ATen calls, every element judged against capcheck's\n"
     "                   bounds; exit codes as below; for another provider the repro line is\n"
     "                   the reproducer and none is written)\n"
     "  --no-fork        run in this process\n" MATH_MODES
     EXIT_RUN PROVIDERS},
    {"shrink", "reduce a failing case while it keeps failing the same way",
     "usage: capcheck shrink 'FAILING LINE' [options]\n"
     "Reduce the case (axes, extents, layout, check, parameters, seed) while it fails the same\n"
     "way; print the minimal line, the command that reruns it and its reproducer: on ATen a\n"
     "standalone Python script (torch alone: the ATen calls capcheck's shim makes, every element\n"
     "judged against capcheck's bounds, shipped in it; exit 0 pass, 1 fail, 125 cannot judge),\n"
     "on any other provider (a plugin) the repro line itself. Every candidate runs in a worker\n"
     "process under the time limit.\n"
     "Options:\n" PROVIDER_OPTS
     "  --script FILE    write the Python reproducer to FILE, executable, and print the command\n"
     "                   that runs it with the Python that has torch (default: stdout)\n"
     "  --timeout S      each candidate's limit (default 10 s + 1 us per element per input),\n"
     "                   also the provider init's (default 60 s)\n"
     "  --cpu-capability LEVEL, --aten-threads N   the pass where the case failed (one level,\n"
     "                   one count, as its repro line names them): every candidate runs there,\n"
     "                   and the reproducer runs ATen at N threads\n" MATH_MODES
     "Exit codes: 0 a minimal failing case was printed; 1 the case does not fail; 125 a\n"
     "provider that cannot run, or a script that cannot be written; 2 bad input.\n" PROVIDERS},
    {"bench", "time the provider's calls alone against capcheck's per-case path",
     "usage: capcheck bench [FILE...] [options]\n"
     "In one process (forked from capcheck, so a crash or hang is a sentence, not the end of\n"
     "capcheck), one thread, five loops over the same cases taking turns: the provider's\n"
     "calls alone, capcheck's whole per-case path (guarded buffers), drawing the inputs, the\n"
     "reference, and the per-case path with plain heap buffers. Prints cases/s of each and\n"
     "the ratio capcheck / provider.\n"
     "Options:\n" PROVIDER_OPTS
     "  --op NAME          only op NAME's cases\n"
     "  --max-elements N   only cases whose tensors hold at most N elements (default 1024)\n"
     "  --min-time S       seconds per loop and repetition (default 0.2)\n"
     "  --reps N           repetitions (default 5, at most 64)\n"
     "  --json FILE        the figures as JSON (capcheck-bench/1)\n"
     "  --ref MODE         the reference of the capcheck and reference loops: auto (default),\n"
     "                     full or sampled, as for run\n"
     "  --ref-threads N    threads for inputs and the reference in those loops (default 1)\n"
     "  --ratio-only       the provider and capcheck loops alone, no warm-up round (cases too\n"
     "                     slow to run more than once or twice)\n"
     "  --timeout S        the provider init's limit, and each first call's (default 10 s +\n"
     "                     1 us per element per input)\n"
     "Exit codes: 0 measured; 2 bad input, no case to measure, or a provider that cannot run,\n"
     "crashed or hung.\n" PROVIDERS},
    {"power", "how large an error a --power run's cases reject, per op x dtype",
     "usage: capcheck power DIR [--before DIR] [--markdown FILE]\n"
     "From a run made with --power: per op x dtype x device, over the passing cases, the\n"
     "smallest k (every element's error scaled by k: a kernel k times less accurate) and\n"
     "ulps of the dtype the cases reject, the median case's k, failing and with suspect\n"
     "counted as failing.\n"
     "  --before DIR     the same cases run with --power another way (e.g. --accumulation\n"
     "                   relaxed): each cell before -> after\n"
     "  --markdown FILE  also write the table as Markdown (scripts/power-table)\n"
     "Exit codes: 0 printed; 2 a folder without --power results, or unreadable.\n"},
    {"list", "list ops, the cases files expand to, platforms, or TorchLean commits",
     "usage: capcheck list ops\n"
     "       capcheck list cases [FILE...] [--op NAME] [--seed N] [--device D] "
     "[--max-elements N]\n"
     "       capcheck list platforms [--provider P | --provider-lib PATH] [--device D]\n"
     "       capcheck list torchlean\n"
     "list ops: every op of the vocabulary: report name, forward and VJP status in the\n"
     "reference, inputs (optional ones in [brackets]) and parameters with their defaults.\n"
     "list cases: the canonical line of every case the files expand to (generators drawn), one\n"
     "per line: what run would run. --max-elements keeps cases of at most N elements.\n"
     "list platforms: every CPU dispatch level, whether this CPU supports it, and the platform\n"
     "key and facts the provider's workers report at each supported level.\n"
     "list torchlean: the TorchLean commits emit-lean has names for, newest first, each with the\n"
     "newest date its own files state (the commit is that old or younger); the first is\n"
     "emit-lean's default.\n"
     "Exit codes: 0 listed; 2 bad input.\n"},
    {"gate", "per capsule x dtype: checked, or trustedExternal with what is missing",
     "usage: capcheck gate REPORT... [--policy F] [--evidence DIR] [--catalog F] [--all]\n"
     "                     [--allowed-signers FILE]\n"
     "REPORT is a run folder or its report.json, or every shard folder of a sharded run. The\n"
     "gate refuses evidence it cannot trust (unsealed or altered reports, results not matching,\n"
     "results naming another provider than the report's provenance, another libtorch, a lone\n"
     "or incomplete shard set), then judges every capsule x dtype x platform under the policy\n"
     "(default: the policy built into capcheck, reports/policy.conf).\n"
     "It prints its summary first, then what holds a required capsule back (every capsule\n"
     "that is not checked when the policy requires none); --all lists every capsule.\n"
     "Each case counts once however often it ran (a file given twice, a case in two shards):\n"
     "the gate says how many repeated case lines it counted once, and a case whose repeats\n"
     "disagree is nondeterministic. Passing cases count once per inputs (check= and ref= do\n"
     "not make more); min_distinct_shapes asks for distinct input shapes among them.\n"
     "  --evidence DIR   also write DIR/<capsule>/evidence.json\n"
     "  --catalog F      the capsule catalog (default: the built-in providers/capsules.tsv)\n"
     ALLOWED_SIGNERS
     "Exit codes: 0 every required capsule x dtype is checked; 1 one is not; 2 the evidence or\n"
     "the policy is refused.\n"},
    {"evidence", "write evidence.json per capsule in TorchLean's vocabulary",
     "usage: capcheck evidence REPORT... --out DIR [--policy F] [--catalog F]\n"
     "                         [--allowed-signers FILE]\n"
     "DIR/<capsule>/evidence.json for every capsule (reports/evidence.schema.json), with the\n"
     "provider that ran; the capsule name made one safe folder name (other bytes as %XX).\n"
     ALLOWED_SIGNERS
     "Exit codes: 0 written; 2 refused or unwritable.\n"},
    {"emit-lean", "print a TorchLean module of the capsules the gate upgrades",
     "usage: capcheck emit-lean REPORT... [--policy F] [--catalog F] [--torchlean COMMIT]\n"
     "                          [--package DIR | --in-torchlean] [--allowed-signers FILE]\n"
     "Print a TorchLean module, Capcheck.Evidence.Report_<sha16>: a KernelCapsule\n"
     "(capcheck.<capsule>, trustLevel .checked, the VJP mode the results state, evidence the\n"
     "sealed report's sha256) per capsule the gate upgrades, a CapsuleModule of them, the\n"
     "profiles TorchLean maintains with them admitted (checkedCpuWithEvidence, named\n"
     "checked_cpu+capcheck, ...), and notEmitted: why each other upgraded capsule is none. Every\n"
     "line passes TorchLean's lint (100 columns). It belongs in a Lake library's source folder as\n"
     "Capcheck/Evidence/Report_<sha16>.lean. The gate is capcheck gate's (default: the built-in\n"
     "policy and catalog).\n"
     "  --torchlean COMMIT  TorchLean's names at COMMIT (7 or more hex digits of one that\n"
     "                      capcheck list torchlean names; default: the newest)\n"
     "  --package DIR       write a Lake package instead: DIR/lakefile.lean requiring\n"
     "                      TorchLean at COMMIT, the module, and DIR/README.md (`lake build`\n"
     "                      there builds it)\n"
     "  --in-torchlean      the module for TorchLean's own tree: NN.Tests.Capcheck.Evidence.<..>,\n"
     "                      the file NN/Tests/Capcheck/Evidence/Report_<sha16>.lean, with the\n"
     "                      copyright header TorchLean's lint asks of every file under NN/\n"
     ALLOWED_SIGNERS
     "Exit codes: 0 written; 1 nothing to emit (no upgraded capsule is a TorchLean capsule: one\n"
     "sentence says why); 2 refused (the evidence, the policy, or a TorchLean commit without\n"
     "data).\n"},
    {"diff", "what changed between two reports",
     "usage: capcheck diff BASE NEW [--drift F] [--fail-on-drift] [--allowed-signers FILE]\n"
     "Regressions, fixes, new failures and bound-ratio drift beyond F (default 4) per capsule x\n"
     "dtype between two run folders or report.json files: the rows of each report.json. A run\n"
     "folder (results.jsonl, run.json, report.html or report.junit.xml beside the report) must\n"
     "hold its results.jsonl, matching the report's digest; a report kept alone (report.json\n"
     "and its seal, as reports/baseline) is read as it is; a shard of a run is refused.\n"
     "  --allowed-signers FILE  verify each signed run (a bad signature is refused) and say\n"
     "                   which are unsigned\n"
     "Exit codes: 0 nothing regressed; 1 a regression or a new failure (or drift, with\n"
     "--fail-on-drift); 2 unusable input.\n"},
    {"merge", "join the folders of a --shard I/N run into one report",
     "usage: capcheck merge DIR... --out OUT [--force] [--policy F] [--sign KEY]\n"
     "                      [--allowed-signers FILE]\n"
     "Checks the shard set (one run, every shard once, every case once) and writes OUT as the\n"
     "unsharded run would (report.html's gate under F, default the built-in policy). OUT may\n"
     "not be one of the shards; a folder holding a run is refused unless --force.\n"
     "A signed shard's signature is checked (by the key it carries; with --allowed-signers, by\n"
     "a key the file allows) with its files, and its manifest and signature are copied to\n"
     "OUT/shards/I-of-N.manifest(.sig).\n"
     "  --sign KEY       sign OUT: its manifest lists each shard's manifest sha256 and signer\n"
     "                   (without it, OUT is unsigned, and merge says so when shards were not)\n"
     "Exit codes: 0 merged, every case passed; 1 merged, some case did not pass; 2 refused.\n"},
    {"report", "write a run folder's report.html again",
     "usage: capcheck report DIR [--policy F]\n"
     "DIR/report.html from the run in DIR: failures first with their worst element and repro\n"
     "line, bound ratios per op x dtype x platform, the gate's verdicts under F (default: the\n"
     "built-in policy), provenance. capcheck run and merge write it already.\n"
     "Exit codes: 0 written; 2 refused or unwritable.\n"},
    {"history", "the trend over a series of sealed runs",
     "usage: capcheck history DIR... --out OUT [--drift F] [--allowed-signers FILE]\n"
     "Over runs given oldest first (nightlies): per capsule x dtype the worst and median bound\n"
     "ratio per night, the night each failure first appeared, drift beyond F (default 4) from\n"
     "the first night, where the stack changed; OUT/history.html and OUT/history.json. A night\n"
     "whose case set differs from the night before's is marked, and a series whose cases\n"
     "changed breaks there: a failure before is not called fixed after, drift is measured\n"
     "afresh. A folder (or a copy of a run) given twice is refused.\n"
     "  --allowed-signers FILE  verify each signed run (a bad signature is refused) and say\n"
     "                   which are unsigned\n"
     "Exit codes: 0 written; 2 refused or unwritable.\n"},
    {"sign", "sign a finished run that nobody signed yet",
     "usage: capcheck sign DIR --key KEY\n"
     "Write DIR/manifest (capcheck's version and commit, the platform keys, the sha256 of\n"
     "report.json, its seal, results.jsonl and run.json) and sign it with the OpenSSH key KEY\n"
     "(ssh-keygen -Y sign, namespace capcheck-run@capcheck): DIR/manifest.sig. What run --sign\n"
     "does at the end of a run. A folder signed already is refused: its signer's signature\n"
     "would be replaced.\n"
     "Exit codes: 0 signed; 2 not a sealed run, already signed, or the key cannot sign.\n"},
    {"validate", "check a JSON file against a JSON Schema",
     "usage: capcheck validate FILE|DIR [--schema F]\n"
     "Default schema: the report schema built into capcheck (reports/schema.json). A run\n"
     "folder DIR: its report.json. Text that is not UTF-8 is refused.\n"
     "Exit codes: 0 it conforms; 1 it does not; 2 unreadable.\n"},
    {"help", "this help, or one command's",
     "usage: capcheck help [COMMAND]    (or: capcheck COMMAND --help)\n"},
};

#define N_HELP (sizeof HELP / sizeof HELP[0])

int cc_help_known(const char *command)
{
    for (size_t i = 0; i < N_HELP; i++)
        if (strcmp(HELP[i].name, command) == 0)
            return 1;
    return 0;
}

int cc_help_print(FILE *f, const char *command)
{
    if (command) {
        for (size_t i = 0; i < N_HELP; i++)
            if (strcmp(HELP[i].name, command) == 0) {
                fputs(HELP[i].text, f);
                return 0;
            }
        return -1;
    }
    fputs("capcheck: conformance and differential testing of TorchLean's backend capsules\n"
          "usage: capcheck COMMAND [ARGS...]    (capcheck help COMMAND: its options)\n\n"
          "Commands:\n",
          f);
    for (size_t i = 0; i < N_HELP; i++)
        fprintf(f, "  %-10s %s\n", HELP[i].name, HELP[i].summary);
    fputs("\n" EXIT_RUN "(Each command's help gives its own exit codes.)\n\n" PROVIDERS, f);
    return 0;
}
