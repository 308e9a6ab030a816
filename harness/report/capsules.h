/* The capsule catalog (providers/capsules.tsv, embedded at build time): TorchLean's capsules
 * (ops.md section 2) and capcheck's own, as data. Every result exercises one capsule, chosen by
 * the identity of the provider that ran (cc_provider_identity, recorded in the report):
 *   - a built-in provider: the row whose capcheck_provider, device and op match and that pins no
 *     library;
 *   - a plugin: only a row that pins the plugin's library by its sha256 (column 11,
 *     "sha256:<hex>"), so a plugin cannot claim a built-in provider's capsules by its name;
 *     without one it gets the ad-hoc capsule "plugin.<name>.<device>.<op report name>";
 *   - a built-in provider without a row: "<provider>.<device>.<op report name>".
 * capcheck's reference provider (the float64 oracle run against itself) has rows of its own,
 * capcheck.oracle.<op report name> (provider '-', source oracle): never TorchLean's
 * reference.<op>, which is TorchLean's Lean reference runtime, not run by capcheck.
 * Ad-hoc capsules have trust trustedExternal. A report that does not record the identity (made
 * before capcheck recorded it) is read by the provider's name, as a built-in. */
#ifndef CAPCHECK_CAPSULES_H
#define CAPCHECK_CAPSULES_H

#include <stddef.h>

typedef struct {
    char name[80];              /* e.g. "libtorch.softmax", "capcheck.aten_cpu.softmax" */
    char op[32];                /* TorchLean constructor name = capcheck op name */
    char provider[24];          /* TorchLean Provider constructor; "-" for the oracle */
    char device[8];             /* cpu, cuda */
    char trust[24];             /* checked, trustedExternal: what the catalog states */
    char vjp_mode[24];          /* none, torchLeanTape, backendVJP */
    char reduction[32];         /* fixedLeft, implementationDefined, notApplicable */
    char layout[24];            /* canonicalTensor, flatRowMajor, libTorchCudaView */
    char source[16];            /* torchlean, capcheck, oracle, adhoc */
    char capcheck_provider[32]; /* the capcheck provider whose results are its evidence; "-":
                                   none (TorchLean's reference capsules) */
    char pin[72];               /* "sha256:<hex>": only the plugin library with that hash; "" */
} cc_capsule;

/* Who produced a run's results (report.json provenance "provider"). */
typedef struct {
    char name[64];     /* the provider's name, as in every result */
    char kind[16];     /* "builtin", "plugin", or "" when the report does not say */
    char library[512]; /* plugin: the library's path as loaded */
    char sha256[65];   /* plugin: sha256 of that file */
} cc_provider_identity;

/* One sentence for a --provider name capcheck has no built-in provider of: TorchLean's provider
 * that capcheck checks through its own provider(s) of another name (from the embedded catalog),
 * TorchLean's provider with no capcheck provider (load a plugin), or an unknown name. `builtin`
 * lists capcheck's built-in provider names. */
void cc_provider_unknown_msg(const char *name, const char *builtin, char *buf, size_t n);

typedef struct {
    cc_capsule *v;
    size_t n, cap;
} cc_catalog;

/* Parse catalog text (the TSV format the file's header documents). `name` labels errors.
 * Returns 0, or -1 with "name:line: ..." in msg (unknown op, a provider that is not one of
 * TorchLean's Provider constructors, bad trust level, a malformed pin, a duplicate name or a
 * second row for the same provider x device x op x pin). */
int cc_catalog_parse(const char *text, const char *name, cc_catalog *out, char *msg, size_t len);
/* The embedded providers/capsules.tsv, or the file at `path` when it is not NULL. */
int cc_catalog_load(const char *path, cc_catalog *out, char *msg, size_t len);
void cc_catalog_free(cc_catalog *c);

/* The row a result of built-in provider `provider` on `device` for `op` maps to, or NULL. */
const cc_capsule *cc_catalog_find(const cc_catalog *c, const char *provider, const char *device,
                                  const char *op);
/* The row named `name`, or NULL. */
const cc_capsule *cc_catalog_by_name(const cc_catalog *c, const char *name);
/* The row for a result of the provider `id` (NULL, or a kind "": read by name, as a built-in),
 * or the ad-hoc capsule (written to *adhoc) when the catalog has none (see above); vjp_mode
 * labels the ad-hoc capsule (the provider's own answer, from the result). */
const cc_capsule *cc_catalog_resolve(const cc_catalog *c, const cc_provider_identity *id,
                                     const char *provider, const char *device, const char *op,
                                     const char *vjp_mode, cc_capsule *adhoc);

#endif
