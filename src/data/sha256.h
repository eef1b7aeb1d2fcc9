/* Portable SHA-256 (FIPS 180-4), used to verify downloaded datasets. */
#ifndef AF_SHA256_H
#define AF_SHA256_H

#include <stddef.h>
#include <stdint.h>
#include "aneforge.h"

typedef struct {
    uint32_t h[8];
    uint64_t bytes;      /* message length so far */
    uint8_t buf[64];
    size_t nbuf;
} data_sha256_ctx;

void data_sha256_init(data_sha256_ctx *c);
void data_sha256_update(data_sha256_ctx *c, const void *data, size_t len);
void data_sha256_final(data_sha256_ctx *c, uint8_t digest[32]);
/* One-shot digest of a buffer. */
void data_sha256(const void *data, size_t len, uint8_t digest[32]);
/* Lowercase hex of a digest; hex must hold 65 bytes. */
void data_sha256_hex(const uint8_t digest[32], char hex[65]);
/* Streams the file at path; on success hex holds its lowercase digest. */
af_status data_sha256_file(const char *path, char hex[65]);

#endif
