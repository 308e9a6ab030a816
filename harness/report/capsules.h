/* The capsule catalog (providers/capsules.tsv, embedded at build time): TorchLean's capsules
 * (ops.md section 2) and capcheck's own, as data. Every result exercises one capsule: the row
 * whose capcheck_provider, device and op match the result's provider, device and op; a provider
 * without a row (a plugin, say) gets the ad-hoc capsule "<provider>.<device>.<op report name>"
 * with trust trustedExternal. */
#ifndef CAPCHECK_CAPSULES_H
#define CAPCHECK_CAPSULES_H

#include <stddef.h>

typedef struct {
    char name[80];              /* e.g. "libtorch.softmax", "capcheck.aten_cpu.softmax" */
    char op[32];                /* TorchLean constructor name = capcheck op name */
    char provider[24];          /* TorchLean Provider: libTorch, reference, or the ad-hoc name */
    char device[8];             /* cpu, cuda */
    char trust[24];             /* checked, trustedExternal: what the catalog states */
    char vjp_mode[24];          /* none, torchLeanTape, backendVJP */
    char reduction[32];         /* fixedLeft, implementationDefined, notApplicable */
    char layout[24];            /* canonicalTensor, flatRowMajor, libTorchCudaView */
    char source[16];            /* torchlean, capcheck, adhoc */
    char capcheck_provider[32]; /* the capcheck provider whose results are its evidence */
} cc_capsule;

typedef struct {
    cc_capsule *v;
    size_t n, cap;
} cc_catalog;

/* Parse catalog text (the TSV format the file's header documents). `name` labels errors.
 * Returns 0, or -1 with "name:line: ..." in msg (unknown op, bad trust level, a duplicate name
 * or a second row for the same provider x device x op). */
int cc_catalog_parse(const char *text, const char *name, cc_catalog *out, char *msg, size_t len);
/* The embedded providers/capsules.tsv, or the file at `path` when it is not NULL. */
int cc_catalog_load(const char *path, cc_catalog *out, char *msg, size_t len);
void cc_catalog_free(cc_catalog *c);

/* The row a result of capcheck provider `provider` on `device` for `op` maps to, or NULL. */
const cc_capsule *cc_catalog_find(const cc_catalog *c, const char *provider, const char *device,
                                  const char *op);
/* The row named `name`, or NULL. */
const cc_capsule *cc_catalog_by_name(const cc_catalog *c, const char *name);
/* The row for a result, or the ad-hoc capsule (written to *adhoc) when the catalog has none;
 * vjp_mode labels the ad-hoc capsule (the provider's own answer, from the result). */
const cc_capsule *cc_catalog_resolve(const cc_catalog *c, const char *provider, const char *device,
                                     const char *op, const char *vjp_mode, cc_capsule *adhoc);

#endif
