/* The platform a result holds for: what selects the kernels that produced it.
 *
 * The same libtorch runs different kernels on different machines: ATen's own CPU kernels are
 * compiled per CPU capability (DEFAULT, AVX2, AVX512) and picked at first use; oneDNN (ATen's
 * conv, convTranspose and bf16/f16 matmul path on CPU) JIT-generates code for the best ISA the
 * CPU has (avx2, avx512_core, avx512_core_bf16, avx10_1_512 = avx512_core_fp16,
 * avx10_1_512_amx = avx512_core_amx, ...); on CUDA the GPU architecture and the library versions
 * choose. A deviation seen on one platform is an expectation for that platform only, and
 * evidence holds for the platforms it was gathered on.
 *
 * The platform KEY is short and stable (results.jsonl "platform", report rows, gate, baselines):
 *   cpu:<tier>             tier from oneDNN's effective ISA: amx-fp16, amx, avx512-fp16,
 *                          avx512-bf16, avx512, avx2, default (SSE4.1/AVX), or <arch> off x86
 *                          (cpu:aarch64); e.g. cpu:amx on Sapphire Rapids, cpu:avx512-bf16 on
 *                          Zen 4, cpu:avx512 on Skylake-SP or Ice Lake, cpu:avx2 on Haswell..Zen 3
 *   cpu:<tier>+aten-<cap>  when ATen's capability is not the one the tier implies (avx512 for the
 *                          avx512 and amx tiers, avx2 for avx2, default for default): e.g.
 *                          ONEDNN_MAX_CPU_ISA=AVX2 alone gives cpu:avx2+aten-avx512
 *   cuda:sm<NN>            the compute capability of the GPU the provider runs on (cuda:sm90)
 *   cuda:unknown           a CUDA provider that does not state its GPU
 *   ...+t<N>               a CPU key gains the provider's intra-op thread count when it states
 *                          more than one (describe item "threads N"): ATen past its grain of
 *                          32,768 elements splits the work over N threads and combines per-thread
 *                          partial sums, another code path (cpu:avx512-bf16+t2). One thread keeps
 *                          the bare key: every baseline and "#! seen" directive before threads
 *                          were part of the key was measured at one thread, ATen's default here.
 * A provider may state its own key with a describe() item "platform KEY" (a plugin's chip).
 *
 * The facts behind a key (report.json provenance "platforms"): ATen's CPU capability as ATen
 * reports it (describe item "cpu_capability"), oneDNN's version ("onednn") and the ISA it
 * dispatches to, the BLAS ("blas"), the CPU flags that change kernels, the dispatch overrides in
 * effect, and on CUDA the GPU, driver, CUDA, cuDNN and cuBLAS versions (items "gpu", "driver",
 * "cuda", "cudnn", "cublas"). oneDNN 3.13 inside libtorch exports no ISA query, so its effective
 * ISA is derived the way oneDNN documents it: the best ISA the CPU supports that is within
 * ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA). tests/test_aten_smoke checks the derivation
 * against what the kernels do (the AMX-only deviations reproduce exactly on cpu:amx).
 *
 * CPU dispatch LEVELS (--cpu-capability): each sets, in a worker before ATen or oneDNN first
 * runs, ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA and MKL_ENABLE_INSTRUCTIONS so that one machine
 * runs the kernels of a lesser one. Level names equal the tier of the key they give:
 *   native       nothing set: the machine as it is (and whatever the environment says)
 *   amx-fp16 amx avx512-fp16 avx512-bf16 avx512 avx2 default
 * A level is usable where the CPU has what it names and the environment's own
 * ONEDNN_MAX_CPU_ISA / ATEN_CPU_CAPABILITY (a simulated lesser machine) do not cap it.
 *
 * ATen THREADS (--aten-threads LIST|all): the intra-op thread count the ATen provider runs at
 * (at::set_num_threads in its init; 1 without the option). Each count is a pass of its own, a
 * worker pool whose workers set CC_ATEN_THREADS_ENV before they initialise the provider; with
 * levels, every level runs at every count. `all` is 1 and the machine's CPU count (at least 2,
 * oversubscribed on one CPU): the serial path and the parallel one at full width. */
#ifndef CAPCHECK_PLATFORM_H
#define CAPCHECK_PLATFORM_H

#include <stddef.h>
#include <stdio.h>

#include "core/json.h"
#include "abi/capcheck_provider.h"

#define CC_PLATFORM_KEY_MAX 48
#define CC_MAX_LEVELS 8    /* levels of one run */
#define CC_MAX_ATEN_THREADS 4 /* thread counts of one run */
#define CC_ATEN_THREADS_ENV "CAPCHECK_ATEN_THREADS" /* what a worker tells the ATen shim */
#define CC_MAX_PLATFORMS 16 /* platforms one report lists (levels x devices) */

typedef struct {
    char key[CC_PLATFORM_KEY_MAX];
    char device[8];                 /* "cpu", "cuda" */
    char level[16];                 /* the --cpu-capability level; "" on cuda */
    char aten_cpu_capability[16];   /* as ATen reports it ("AVX512"); "" when not stated */
    char onednn_version[24];        /* "" when the provider uses no oneDNN */
    char onednn_isa[32];            /* oneDNN's effective ISA ("avx10_1_512_amx") */
    char blas[48];
    char cpu_flags[256];            /* the kernel-selecting flags of this CPU */
    char overrides[192];            /* "ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2"; "" */
    char threads[12];               /* the provider's intra-op threads as it states them; "" */
    char aten_threads[12];          /* the --aten-threads count of its pass; "" without one */
    char gpu[128], driver[24], cuda[24], cudnn[24], cublas[24]; /* cuda */
} cc_platform;

/* ---- levels -------------------------------------------------------------------------------- */

int cc_level_count(void);                /* native first, then best to worst */
const char *cc_level_name(int level);
int cc_level_find(const char *name);     /* -1 when unknown */
/* The NAME=VALUE settings of a level (NULL-terminated; empty for native). */
const char *const *cc_level_env(int level);
/* Whether a CPU with these flags (cc_cpu_flags) can run the level. */
int cc_level_supported(int level, const char *cpu_flags);
/* Whether this process's ONEDNN_MAX_CPU_ISA (DNNL_MAX_CPU_ISA) and ATEN_CPU_CAPABILITY allow
 * the level: a lesser machine simulated with them keeps to its own levels. 0 with the reason. */
int cc_level_within_environment(int level, char *why, size_t n);
/* "--cpu-capability LIST|all": LIST is comma-separated level names; all = every level this CPU
 * supports. Returns the count (>= 1) into levels[max], or -1 with one sentence
 * (an unknown name, a level this CPU cannot run or the environment caps, a name given twice);
 * `all` leaves out the levels the environment caps. native is in `all` only
 * where no supported level gives the tier the CPU has (it would repeat that level's platform). */
int cc_levels_parse(const char *spec, const char *cpu_flags, int *levels, int max, char *msg,
                    size_t len);
/* Apply a level's settings to this process's environment (a worker before init). */
void cc_level_apply(int level);

/* "--aten-threads LIST|all": LIST is comma-separated counts from 1 to 256; all = 1 and cpus (at
 * least 2). Returns how many (>= 1) into counts[max], or -1 with one sentence (not a count, a
 * count given twice, more than max). */
int cc_aten_threads_parse(const char *spec, int cpus, int *counts, int max, char *msg,
                          size_t len);
/* Tell the ATen shim of this process (a worker before init) to run at n threads; n <= 0: leave
 * its default. */
void cc_aten_threads_apply(int n);

/* ---- facts and keys ------------------------------------------------------------------------ */

/* A provider's describe() text is a list of "key value" items separated by "; ". The value of
 * item `key` ("" when absent or "none..."). */
void cc_describe_item(const char *desc, const char *key, char *buf, size_t n);
/* The ATen intra-op thread count a CPU platform KEY names: N of its "+tN" suffix, 1 without one
 * (one thread keeps the bare key). */
int cc_platform_key_threads(const char *key);

/* The description without the items that name a platform ("cpu_capability", "threads",
 * "platform"): what a provider says of itself whatever the dispatch level and thread count (the
 * platforms say the rest). */
void cc_describe_without_platform(const char *desc, char *buf, size_t n);

/* The kernel-selecting flags in /proc/cpuinfo text ("flags" on x86, "Features" on arm), in a
 * fixed order, space-separated; "" when there are none. */
void cc_cpu_flags_from_text(const char *cpuinfo, char *buf, size_t n);
void cc_cpu_flags(char *buf, size_t n); /* of this machine */
/* oneDNN's effective ISA on a CPU with these flags under this cap (ONEDNN_MAX_CPU_ISA's value;
 * NULL or "" or an unknown name: no cap). "" when no oneDNN x86 ISA applies. */
void cc_onednn_effective_isa(const char *cpu_flags, const char *cap, char *buf, size_t n);
/* The platform of a provider on a device from its describe() text and this CPU's facts:
 * onednn_cap is ONEDNN_MAX_CPU_ISA's value, overrides the dispatch settings in effect. */
void cc_platform_derive(const char *desc, cc_device dev, const char *cpu_flags,
                        const char *onednn_cap, const char *overrides, const char *level,
                        cc_platform *p);
/* The same, reading this process's environment and CPU (in a worker, after init). */
void cc_platform_detect(const char *desc, cc_device dev, const char *level, cc_platform *p);
/* One line of facts for people: "ATen AVX512, oneDNN 3.13.3 avx10_1_512_amx, BLAS mkl 2024.2". */
void cc_platform_summary(const cc_platform *p, char *buf, size_t n);

/* End every string of p within its field (p came from another process as plain data). */
void cc_platform_end_strings(cc_platform *p);

/* report.json provenance "platforms": the list, and reading it back. */
void cc_platforms_write_json(FILE *f, const cc_platform *p, int n);
int cc_platforms_from_json(const cc_json *list, cc_platform *p, int max, int *n, char *msg,
                           size_t len);

#endif
