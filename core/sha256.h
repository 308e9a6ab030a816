/* SHA-256 (FIPS 180-4), for report hashes and case-file provenance. Plain C, no state outside
 * the caller's context. */
#ifndef CAPCHECK_SHA256_H
#define CAPCHECK_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];
    uint64_t bytes; /* message length so far */
    unsigned char buf[64];
    size_t fill;
} cc_sha256_ctx;

void cc_sha256_init(cc_sha256_ctx *c);
void cc_sha256_update(cc_sha256_ctx *c, const void *data, size_t n);
/* The 32-byte digest; the context is spent afterwards (copy it first to keep going). */
void cc_sha256_final(cc_sha256_ctx *c, unsigned char out[32]);
void cc_sha256_final_hex(cc_sha256_ctx *c, char hex[65]);
/* Lower-case hex of a whole buffer's digest: 64 characters and a NUL. */
void cc_sha256_hex(const void *data, size_t n, char hex[65]);
/* The digest of a file's bytes; -1 (errno set) when it cannot be read. */
int cc_sha256_file(const char *path, char hex[65]);

#endif
