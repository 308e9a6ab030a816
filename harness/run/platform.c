/* Platform keys, facts and CPU dispatch levels (platform.h). */
#define _POSIX_C_SOURCE 200809L
#include "harness/run/platform.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>

#include "harness/run/runner.h"

_Static_assert(sizeof(((cc_result *)0)->platform) == CC_PLATFORM_KEY_MAX,
               "cc_result.platform holds a platform key");

/* ---- CPU flags ----------------------------------------------------------------------------- */

/* The flags that change which kernels ATen, oneDNN or MKL run (x86, then arm), in this order. */
static const char *const KERNEL_FLAGS[] = {
    "sse4_1",      "avx",        "avx2",         "fma",          "f16c",
    "avx_vnni",    "avx_vnni_int8", "avx_ne_convert", "avx512f", "avx512dq",
    "avx512bw",    "avx512vl",   "avx512_vnni",  "avx512_bf16",  "avx512_fp16",
    "amx_tile",    "amx_int8",   "amx_bf16",     "amx_fp16",
    "asimd",       "asimdhp",    "fphp",         "bf16",         "i8mm",
    "sve",         "sve2",       "sme"};
#define N_KERNEL_FLAGS (sizeof KERNEL_FLAGS / sizeof KERNEL_FLAGS[0])

/* Whether `word` is one of the blank-separated words of `list`. */
static int has_word(const char *list, const char *word)
{
    size_t wl = strlen(word);
    for (const char *s = list; s && *s;) {
        while (*s == ' ' || *s == '\t')
            s++;
        size_t l = strcspn(s, " \t\n");
        if (l == wl && strncmp(s, word, wl) == 0)
            return 1;
        s += l;
    }
    return 0;
}

void cc_cpu_flags_from_text(const char *cpuinfo, char *buf, size_t n)
{
    buf[0] = 0;
    const char *line = cpuinfo ? cpuinfo : "";
    const char *flags = NULL;
    size_t flags_len = 0;
    while (*line && !flags) { /* the first "flags" (x86) or "Features" (arm) line */
        size_t l = strcspn(line, "\n");
        if ((strncmp(line, "flags", 5) == 0 || strncmp(line, "Features", 8) == 0)) {
            const char *colon = memchr(line, ':', l);
            if (colon) {
                flags = colon + 1;
                flags_len = l - (size_t)(colon + 1 - line);
            }
        }
        line += l + (line[l] == '\n');
    }
    if (!flags)
        return;
    char have[4096];
    snprintf(have, sizeof have, "%.*s", (int)(flags_len < sizeof have ? flags_len : sizeof have - 1),
             flags);
    size_t used = 0;
    for (size_t k = 0; k < N_KERNEL_FLAGS && used < n; k++)
        if (has_word(have, KERNEL_FLAGS[k]))
            used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? " " : "",
                                     KERNEL_FLAGS[k]);
}

void cc_cpu_flags(char *buf, size_t n)
{
    buf[0] = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    /* the first processor's block is enough: every core of a machine has the same flags */
    char text[16384];
    size_t got = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[got] = 0;
    cc_cpu_flags_from_text(text, buf, n);
}

/* ---- oneDNN's ISA -------------------------------------------------------------------------- */

/* oneDNN's x86 ISAs, best first: the cap names it accepts for each (ONEDNN_MAX_CPU_ISA, case
 * insensitive; the second is the older alias), the CPU flags it needs, and the feature bits it
 * consists of, so that "within the cap" is a subset test as in oneDNN (avx2_vnni is not within
 * avx512_core). */
enum { F_SSE41 = 1, F_AVX = 2, F_AVX2 = 4, F_VNNI256 = 8, F_VNNI2 = 16, F_A512 = 32,
       F_VNNI512 = 64, F_BF16 = 128, F_FP16 = 256, F_AMX = 512, F_AMXFP16 = 1024 };
#define AVX2_SET (F_SSE41 | F_AVX | F_AVX2)
#define A512_SET (AVX2_SET | F_A512)

typedef struct {
    const char *isa, *alias;
    const char *needs;
    unsigned bits;
    const char *tier; /* the key's tier */
} onednn_isa;

static const onednn_isa ISAS[] = {
    {"avx10_1_512_amx_fp16", "avx512_core_amx_fp16",
     "avx512f avx512bw avx512vl avx512dq avx512_vnni avx512_bf16 avx512_fp16 amx_tile amx_int8 "
     "amx_bf16 amx_fp16",
     A512_SET | F_VNNI512 | F_BF16 | F_FP16 | F_AMX | F_AMXFP16, "amx-fp16"},
    {"avx10_1_512_amx", "avx512_core_amx",
     "avx512f avx512bw avx512vl avx512dq avx512_vnni avx512_bf16 avx512_fp16 amx_tile amx_int8 "
     "amx_bf16",
     A512_SET | F_VNNI512 | F_BF16 | F_FP16 | F_AMX, "amx"},
    {"avx10_1_512", "avx512_core_fp16",
     "avx512f avx512bw avx512vl avx512dq avx512_vnni avx512_bf16 avx512_fp16",
     A512_SET | F_VNNI512 | F_BF16 | F_FP16, "avx512-fp16"},
    {"avx512_core_bf16", NULL, "avx512f avx512bw avx512vl avx512dq avx512_vnni avx512_bf16",
     A512_SET | F_VNNI512 | F_BF16, "avx512-bf16"},
    {"avx512_core_vnni", NULL, "avx512f avx512bw avx512vl avx512dq avx512_vnni",
     A512_SET | F_VNNI512, "avx512"},
    {"avx512_core", NULL, "avx512f avx512bw avx512vl avx512dq", A512_SET, "avx512"},
    {"avx2_vnni_2", NULL, "avx2 avx_vnni avx_vnni_int8 avx_ne_convert",
     AVX2_SET | F_VNNI256 | F_VNNI2, "avx2"},
    {"avx2_vnni", NULL, "avx2 avx_vnni", AVX2_SET | F_VNNI256, "avx2"},
    {"avx2", NULL, "avx2", AVX2_SET, "avx2"},
    {"avx", NULL, "avx", F_SSE41 | F_AVX, "default"},
    {"sse41", NULL, "sse4_1", F_SSE41, "default"},
};
#define N_ISAS (sizeof ISAS / sizeof ISAS[0])

static int has_all(const char *cpu_flags, const char *needs)
{
    char need[256];
    snprintf(need, sizeof need, "%s", needs);
    for (char *save = NULL, *w = strtok_r(need, " ", &save); w; w = strtok_r(NULL, " ", &save))
        if (!has_word(cpu_flags, w))
            return 0;
    return 1;
}

/* The cap's feature bits: all of them for no cap or a name oneDNN does not know. */
static unsigned cap_bits(const char *cap)
{
    if (!cap || !*cap || !strcasecmp(cap, "all") || !strcasecmp(cap, "default"))
        return ~0u;
    for (size_t k = 0; k < N_ISAS; k++)
        if (!strcasecmp(cap, ISAS[k].isa) || (ISAS[k].alias && !strcasecmp(cap, ISAS[k].alias)))
            return ISAS[k].bits;
    return ~0u;
}

static const onednn_isa *effective_isa(const char *cpu_flags, const char *cap)
{
    unsigned within = cap_bits(cap);
    for (size_t k = 0; k < N_ISAS; k++)
        if ((ISAS[k].bits & ~within) == 0 && has_all(cpu_flags, ISAS[k].needs))
            return &ISAS[k];
    return NULL;
}

void cc_onednn_effective_isa(const char *cpu_flags, const char *cap, char *buf, size_t n)
{
    const onednn_isa *e = effective_isa(cpu_flags ? cpu_flags : "", cap);
    snprintf(buf, n, "%s", e ? e->isa : "");
}

/* ---- levels -------------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    const char *needs_isa; /* the oneDNN ISA the CPU must support; NULL: any CPU */
    const char *env[4];
} level_def;

static const level_def LEVELS[] = {
    {"native", NULL, {NULL}},
    {"amx-fp16", "avx10_1_512_amx_fp16",
     {"ATEN_CPU_CAPABILITY=avx512", "ONEDNN_MAX_CPU_ISA=AVX10_1_512_AMX_FP16", NULL}},
    {"amx", "avx10_1_512_amx",
     {"ATEN_CPU_CAPABILITY=avx512", "ONEDNN_MAX_CPU_ISA=AVX10_1_512_AMX", NULL}},
    {"avx512-fp16", "avx10_1_512",
     {"ATEN_CPU_CAPABILITY=avx512", "ONEDNN_MAX_CPU_ISA=AVX10_1_512",
      "MKL_ENABLE_INSTRUCTIONS=AVX512", NULL}},
    {"avx512-bf16", "avx512_core_bf16",
     {"ATEN_CPU_CAPABILITY=avx512", "ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16",
      "MKL_ENABLE_INSTRUCTIONS=AVX512", NULL}},
    {"avx512", "avx512_core",
     {"ATEN_CPU_CAPABILITY=avx512", "ONEDNN_MAX_CPU_ISA=AVX512_CORE",
      "MKL_ENABLE_INSTRUCTIONS=AVX512", NULL}},
    {"avx2", "avx2",
     {"ATEN_CPU_CAPABILITY=avx2", "ONEDNN_MAX_CPU_ISA=AVX2", "MKL_ENABLE_INSTRUCTIONS=AVX2",
      NULL}},
    {"default", "sse41",
     {"ATEN_CPU_CAPABILITY=default", "ONEDNN_MAX_CPU_ISA=SSE41",
      "MKL_ENABLE_INSTRUCTIONS=SSE4_2", NULL}},
};
#define N_LEVELS ((int)(sizeof LEVELS / sizeof LEVELS[0]))

/* The variables a level sets, read back into the facts as "overrides". */
static const char *const DISPATCH_VARS[] = {"ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA",
                                            "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS"};

int cc_level_count(void)
{
    return N_LEVELS;
}

const char *cc_level_name(int level)
{
    return level >= 0 && level < N_LEVELS ? LEVELS[level].name : "?";
}

int cc_level_find(const char *name)
{
    for (int i = 0; i < N_LEVELS; i++)
        if (strcmp(LEVELS[i].name, name) == 0)
            return i;
    return -1;
}

const char *const *cc_level_env(int level)
{
    static const char *const none[] = {NULL};
    return level >= 0 && level < N_LEVELS ? LEVELS[level].env : none;
}

int cc_level_supported(int level, const char *cpu_flags)
{
    if (level < 0 || level >= N_LEVELS)
        return 0;
    const char *isa = LEVELS[level].needs_isa;
    if (!isa)
        return 1;
    for (size_t k = 0; k < N_ISAS; k++)
        if (strcmp(ISAS[k].isa, isa) == 0)
            return has_all(cpu_flags ? cpu_flags : "", ISAS[k].needs);
    return 0;
}

/* A level's value of one of its variables ("" when it sets none). */
static const char *level_value(int level, const char *var)
{
    size_t vl = strlen(var);
    for (const char *const *e = cc_level_env(level); *e; e++)
        if (strncmp(*e, var, vl) == 0 && (*e)[vl] == '=')
            return *e + vl + 1;
    return "";
}

static int aten_rank(const char *cap)
{
    static const char *const order[] = {"default", "avx2", "avx512"};
    for (int i = 0; i < 3; i++)
        if (!strcasecmp(cap, order[i]))
            return i;
    return 3; /* unset or another architecture's: no cap */
}

int cc_level_within_environment(int level, char *why, size_t n)
{
    const char *dnn = getenv("ONEDNN_MAX_CPU_ISA"), *aten = getenv("ATEN_CPU_CAPABILITY");
    if (!dnn || !*dnn)
        dnn = getenv("DNNL_MAX_CPU_ISA");
    unsigned within = cap_bits(dnn);
    unsigned wants = cap_bits(level_value(level, "ONEDNN_MAX_CPU_ISA"));
    if (level > 0 && (wants & ~within)) {
        snprintf(why, n, "this environment caps oneDNN at %s", dnn);
        return 0;
    }
    if (level > 0 && aten && *aten &&
        aten_rank(level_value(level, "ATEN_CPU_CAPABILITY")) > aten_rank(aten)) {
        snprintf(why, n, "this environment caps ATen at ATEN_CPU_CAPABILITY=%s", aten);
        return 0;
    }
    return 1;
}

void cc_level_apply(int level)
{
    for (const char *const *e = cc_level_env(level); *e; e++) {
        char name[64];
        const char *eq = strchr(*e, '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
        setenv(name, eq + 1, 1);
    }
}

/* v (written `item`) appended to the list of one option (its `flag`) of *n of at most max
 * `things`; 0, or -1 with one sentence when the list names it already or is full. */
static int list_add(int *list, int *n, int max, int v, const char *flag, const char *item,
                    const char *things, char *msg, size_t len)
{
    for (int k = 0; k < *n; k++)
        if (list[k] == v) {
            snprintf(msg, len, "%s names %s twice", flag, item);
            return -1;
        }
    if (*n == max) {
        snprintf(msg, len, "%s: at most %d %s", flag, max, things);
        return -1;
    }
    list[(*n)++] = v;
    return 0;
}

int cc_aten_threads_parse(const char *spec, int cpus, int *counts, int max, char *msg,
                          size_t len)
{
    if (strcmp(spec, "all") == 0) {
        counts[0] = 1;
        counts[1] = cpus > 2 ? cpus : 2;
        return 2;
    }
    int n = 0;
    char list[256];
    snprintf(list, sizeof list, "%s", spec);
    for (char *item = list, *next; item; item = next) {
        next = strchr(item, ',');
        if (next)
            *next++ = 0;
        char *end;
        long v = strtol(item, &end, 10);
        if (!*item || *end || v < 1 || v > 256) {
            snprintf(msg, len, "--aten-threads wants all or a comma-separated list of thread "
                               "counts from 1 to 256, not '%.40s'", item);
            return -1;
        }
        if (list_add(counts, &n, max, (int)v, "--aten-threads", item, "thread counts", msg, len))
            return -1;
    }
    return n;
}

void cc_aten_threads_apply(int n)
{
    if (n <= 0)
        return;
    char v[16];
    snprintf(v, sizeof v, "%d", n);
    setenv(CC_ATEN_THREADS_ENV, v, 1);
}

int cc_levels_parse(const char *spec, const char *cpu_flags, int *levels, int max, char *msg,
                    size_t len)
{
    int n = 0;
    if (strcmp(spec, "all") == 0) {
        /* native only where no level of the table already gives its tier (a CPU beyond the
         * table, or not x86): the rest would repeat a platform */
        const char *cap = getenv("ONEDNN_MAX_CPU_ISA");
        const onednn_isa *native = effective_isa(cpu_flags ? cpu_flags : "",
                                                 cap && *cap ? cap : getenv("DNNL_MAX_CPU_ISA"));
        char why[128];
        int covered = 0;
        for (int i = 1; i < N_LEVELS; i++)
            covered |= native && cc_level_supported(i, cpu_flags) &&
                       cc_level_within_environment(i, why, sizeof why) &&
                       strcmp(LEVELS[i].name, native->tier) == 0;
        if (!covered)
            levels[n++] = 0;
        for (int i = 1; i < N_LEVELS && n < max; i++)
            if (cc_level_supported(i, cpu_flags) && cc_level_within_environment(i, why, sizeof why))
                levels[n++] = i;
        return n;
    }
    char list[256];
    snprintf(list, sizeof list, "%s", spec);
    for (char *item = list, *next; item; item = next) {
        next = strchr(item, ',');
        if (next)
            *next++ = 0;
        int lv = cc_level_find(item);
        char known[256] = "";
        for (int i = 0; i < N_LEVELS; i++) {
            size_t used = strlen(known);
            snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", LEVELS[i].name);
        }
        if (lv < 0) {
            snprintf(msg, len, "--cpu-capability: unknown level '%.40s' (all, or a comma-separated "
                               "list of %s)",
                     item, known);
            return -1;
        }
        if (!cc_level_supported(lv, cpu_flags)) {
            snprintf(msg, len, "--cpu-capability: this CPU cannot run level %s (it needs oneDNN's "
                               "%s; this CPU has: %s)",
                     item, LEVELS[lv].needs_isa, cpu_flags && *cpu_flags ? cpu_flags : "no flags");
            return -1;
        }
        char why[128];
        if (!cc_level_within_environment(lv, why, sizeof why)) {
            snprintf(msg, len, "--cpu-capability: level %s is above what %s (unset it to run "
                               "the level)",
                     item, why);
            return -1;
        }
        if (list_add(levels, &n, max, lv, "--cpu-capability", item, "levels", msg, len))
            return -1;
    }
    return n;
}

/* ---- facts and keys ------------------------------------------------------------------------ */

void cc_describe_item(const char *desc, const char *key, char *buf, size_t n)
{
    buf[0] = 0;
    size_t kl = strlen(key);
    for (const char *s = desc ? desc : ""; *s;) {
        while (*s == ' ' || *s == ';')
            s++;
        size_t item = strcspn(s, ";");
        if (item > kl && strncmp(s, key, kl) == 0 && s[kl] == ' ') {
            const char *v = s + kl + 1;
            size_t vl = item - kl - 1;
            while (vl && v[vl - 1] == ' ')
                vl--;
            if (vl >= 4 && strncmp(v, "none", 4) == 0)
                return;
            snprintf(buf, n, "%.*s", (int)vl, v);
            return;
        }
        s += item;
    }
}

void cc_describe_without_platform(const char *desc, char *buf, size_t n)
{
    static const char *const dropped[] = {"cpu_capability", "threads", "platform"};
    size_t used = 0;
    buf[0] = 0;
    for (const char *s = desc ? desc : ""; *s;) {
        while (*s == ' ' || *s == ';')
            s++;
        size_t item = strcspn(s, ";");
        int drop = 0;
        for (size_t k = 0; k < sizeof dropped / sizeof dropped[0]; k++) {
            size_t kl = strlen(dropped[k]);
            drop |= item > kl && strncmp(s, dropped[k], kl) == 0 && s[kl] == ' ';
        }
        while (item && s[item - 1] == ' ')
            item--;
        if (!drop && item && used < n)
            used += (size_t)snprintf(buf + used, n - used, "%s%.*s", used ? "; " : "", (int)item,
                                     s);
        s += strcspn(s, ";");
    }
}


static void lower(char *s)
{
    for (; *s; s++)
        *s = (char)tolower((unsigned char)*s);
}

/* The ATen capability a tier implies (lower case). */
static const char *tier_aten(const char *tier)
{
    if (!strncmp(tier, "amx", 3) || !strncmp(tier, "avx512", 6))
        return "avx512";
    if (!strcmp(tier, "avx2"))
        return "avx2";
    return "default";
}

static void cpu_key(const cc_platform *p, const char *cpu_flags, const char *onednn_cap,
                    char *key, size_t n)
{
    const onednn_isa *e = effective_isa(cpu_flags, onednn_cap);
    char tier[20];
    if (e)
        snprintf(tier, sizeof tier, "%s", e->tier);
    else { /* no x86 ISA: name the architecture */
        struct utsname u;
        snprintf(tier, sizeof tier, "%.19s", uname(&u) == 0 ? u.machine : "unknown");
        lower(tier);
    }
    char aten[16];
    snprintf(aten, sizeof aten, "%s", p->aten_cpu_capability);
    lower(aten);
    if (aten[0] && e && strcmp(aten, tier_aten(tier)) != 0)
        snprintf(key, n, "cpu:%s+aten-%s", tier, aten);
    else if (aten[0] && !e && strcmp(aten, "default") != 0)
        snprintf(key, n, "cpu:%s-%s", tier, aten);
    else
        snprintf(key, n, "cpu:%s", tier);
}

/* "NVIDIA H200 (sm_90)" -> "90"; "" when the text names no sm_. */
static void sm_of(const char *gpu, char *buf, size_t n)
{
    buf[0] = 0;
    const char *s = strstr(gpu, "sm_");
    if (!s)
        return;
    s += 3;
    size_t d = strspn(s, "0123456789");
    if (d)
        snprintf(buf, n, "%.*s", (int)d, s);
}

void cc_platform_derive(const char *desc, cc_device dev, const char *cpu_flags,
                        const char *onednn_cap, const char *overrides, const char *level,
                        cc_platform *p)
{
    memset(p, 0, sizeof *p);
    snprintf(p->device, sizeof p->device, "%s", cc_device_name(dev));
    snprintf(p->cpu_flags, sizeof p->cpu_flags, "%s", cpu_flags ? cpu_flags : "");
    snprintf(p->overrides, sizeof p->overrides, "%s", overrides ? overrides : "");
    char stated[CC_PLATFORM_KEY_MAX];
    cc_describe_item(desc, "platform", stated, sizeof stated);
    if (dev == CC_CUDA) {
        cc_describe_item(desc, "gpu", p->gpu, sizeof p->gpu);
        cc_describe_item(desc, "driver", p->driver, sizeof p->driver);
        cc_describe_item(desc, "cuda", p->cuda, sizeof p->cuda);
        cc_describe_item(desc, "cudnn", p->cudnn, sizeof p->cudnn);
        cc_describe_item(desc, "cublas", p->cublas, sizeof p->cublas);
        char sm[16];
        sm_of(p->gpu, sm, sizeof sm);
        snprintf(p->key, sizeof p->key, "cuda:%s%s", sm[0] ? "sm" : "unknown", sm);
    } else {
        snprintf(p->level, sizeof p->level, "%s", level && *level ? level : "native");
        cc_describe_item(desc, "cpu_capability", p->aten_cpu_capability,
                         sizeof p->aten_cpu_capability);
        cc_describe_item(desc, "onednn", p->onednn_version, sizeof p->onednn_version);
        cc_describe_item(desc, "blas", p->blas, sizeof p->blas);
        if (p->onednn_version[0])
            cc_onednn_effective_isa(p->cpu_flags, onednn_cap, p->onednn_isa,
                                    sizeof p->onednn_isa);
        cpu_key(p, p->cpu_flags, onednn_cap, p->key, sizeof p->key);
        cc_describe_item(desc, "threads", p->threads, sizeof p->threads);
        long threads = strtol(p->threads, NULL, 10);
        size_t used = strlen(p->key);
        if (threads > 1) /* the parallel path: one thread keeps the bare key (read back by
                            cc_platform_key_threads) */
            snprintf(p->key + used, sizeof p->key - used, "+t%ld", threads);
    }
    if (stated[0]) { /* the provider's own key, in the key alphabet: kind:name, lower case */
        char *colon = strchr(stated, ':');
        if (!colon || colon == stated || !colon[1]) /* no kind: it is the provider's */
            snprintf(p->key, sizeof p->key, "provider:%.38s", stated);
        else
            snprintf(p->key, sizeof p->key, "%s", stated);
        lower(p->key);
        colon = strchr(p->key, ':');
        for (char *c = p->key; *c; c++)
            if (c != colon && !((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
                                strchr("+._-", *c)))
                *c = '-';
    }
}

void cc_platform_detect(const char *desc, cc_device dev, const char *level, cc_platform *p)
{
    char flags[256], overrides[192] = "";
    cc_cpu_flags(flags, sizeof flags);
    size_t used = 0;
    for (size_t k = 0; k < sizeof DISPATCH_VARS / sizeof DISPATCH_VARS[0]; k++) {
        const char *v = getenv(DISPATCH_VARS[k]);
        if (v && *v && used < sizeof overrides)
            used += (size_t)snprintf(overrides + used, sizeof overrides - used, "%s%s=%s",
                                     used ? " " : "", DISPATCH_VARS[k], v);
    }
    const char *cap = getenv("ONEDNN_MAX_CPU_ISA");
    if (!cap || !*cap)
        cap = getenv("DNNL_MAX_CPU_ISA");
    cc_platform_derive(desc, dev, flags, cap, overrides, level, p);
}

void cc_platform_summary(const cc_platform *p, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
#define ADD(...)                                                                              \
    do {                                                                                      \
        if (used < n)                                                                         \
            used += (size_t)snprintf(buf + used, n - used, __VA_ARGS__);                      \
    } while (0)
    if (!strcmp(p->device, "cuda")) {
        ADD("GPU %s; CUDA %s, driver %s, cuDNN %s, cuBLAS %s", p->gpu[0] ? p->gpu : "not stated",
            p->cuda[0] ? p->cuda : "-", p->driver[0] ? p->driver : "-",
            p->cudnn[0] ? p->cudnn : "-", p->cublas[0] ? p->cublas : "-");
        return;
    }
    ADD("level %s; ATen %s", p->level[0] ? p->level : "native",
        p->aten_cpu_capability[0] ? p->aten_cpu_capability : "not stated");
    if (p->threads[0])
        ADD(" at %s thread%s", p->threads, strcmp(p->threads, "1") ? "s" : "");
    if (p->onednn_version[0])
        ADD(", oneDNN %s %s", p->onednn_version, p->onednn_isa[0] ? p->onednn_isa : "(no x86 ISA)");
    if (p->blas[0])
        ADD(", BLAS %s", p->blas);
    ADD("; overrides %s; CPU flags %s", p->overrides[0] ? p->overrides : "none",
        p->cpu_flags[0] ? p->cpu_flags : "none");
#undef ADD
}

/* ---- JSON ---------------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    size_t off, size;
} field;

#define FIELD(json, member) {json, offsetof(cc_platform, member), sizeof(((cc_platform *)0)->member)}
static const field FIELDS[] = {
    FIELD("key", key),
    FIELD("device", device),
    FIELD("level", level),
    FIELD("aten_cpu_capability", aten_cpu_capability),
    FIELD("onednn_version", onednn_version),
    FIELD("onednn_isa", onednn_isa),
    FIELD("blas", blas),
    FIELD("cpu_flags", cpu_flags),
    FIELD("overrides", overrides),
    FIELD("threads", threads),
    FIELD("aten_threads", aten_threads),
    FIELD("gpu", gpu),
    FIELD("driver", driver),
    FIELD("cuda_version", cuda),
    FIELD("cudnn_version", cudnn),
    FIELD("cublas_version", cublas),
};
#undef FIELD
#define N_FIELDS (sizeof FIELDS / sizeof FIELDS[0])

void cc_platform_end_strings(cc_platform *p)
{
    for (size_t k = 0; k < N_FIELDS; k++)
        ((char *)p + FIELDS[k].off)[FIELDS[k].size - 1] = 0;
}

void cc_platforms_write_json(FILE *f, const cc_platform *p, int n)
{
    fputs("[", f);
    for (int i = 0; i < n; i++) {
        fputs(i ? ",\n      {" : "\n      {", f);
        for (size_t k = 0; k < N_FIELDS; k++) {
            const char *v = (const char *)&p[i] + FIELDS[k].off;
            fprintf(f, "%s\"%s\": ", k ? ", " : "", FIELDS[k].name);
            if (v[0] || k < 2)
                cc_json_write_string(f, v);
            else
                fputs("null", f);
        }
        fputs("}", f);
    }
    fputs("]", f);
}

int cc_platforms_from_json(const cc_json *list, cc_platform *p, int max, int *n, char *msg,
                           size_t len)
{
    *n = 0;
    if (!list || list->type != CC_JSON_ARRAY) {
        snprintf(msg, len, "provenance \"platforms\" is not a list");
        return -1;
    }
    for (const cc_json *e = list->child; e; e = e->next) {
        if (*n == max) {
            snprintf(msg, len, "provenance lists more than %d platforms", max);
            return -1;
        }
        cc_platform *q = &p[(*n)++];
        memset(q, 0, sizeof *q);
        for (size_t k = 0; k < N_FIELDS; k++) {
            const cc_json *v = cc_json_get(e, FIELDS[k].name);
            char *dst = (char *)q + FIELDS[k].off;
            if ((!v || v->type == CC_JSON_NULL) && k >= 2)
                continue;
            if (!v || v->type != CC_JSON_STRING || strlen(v->text) >= FIELDS[k].size) {
                snprintf(msg, len, "provenance platform %d: \"%s\" is not a string of at most %zu "
                                   "characters",
                         *n, FIELDS[k].name, FIELDS[k].size - 1);
                return -1;
            }
            memcpy(dst, v->text, strlen(v->text) + 1);
        }
    }
    return 0;
}

int cc_platform_key_threads(const char *key)
{
    const char *t = key ? strrchr(key, '+') : NULL;
    if (!t || t[1] != 't' || t[2] < '1' || t[2] > '9')
        return 1;
    char *end;
    long n = strtol(t + 2, &end, 10);
    return *end == 0 && n > 1 && n <= 4096 ? (int)n : 1;
}
