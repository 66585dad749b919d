/* CRC-32C (Castagnoli; reflected polynomial 0x82F63B78), the checksum of
 * TFRecord framing, which TensorBoard event files and TFRecord data shards use.
 * It is not zlib's CRC-32: checkpoints use that one, summaries and shards need
 * this one. */
#ifndef MW_COMMON_CRC32C_H
#define MW_COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of nbytes at data, continuing from crc (0 to start). Chainable:
 * mw_crc32c(mw_crc32c(0, a, n), b, m) equals the CRC of a then b. */
uint32_t mw_crc32c(uint32_t crc, const void *data, size_t nbytes);

/* TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8. Masking keeps
 * the CRC of data that itself holds CRCs from being degenerate. */
uint32_t mw_crc32c_mask(uint32_t crc);

#endif
