/*
 * crc32c.h - CRC-32C (Castagnoli), the checksum of the packed file, the
 * folder index and the index cache (docs/packed-format.md): the SSE4.2
 * instruction where the CPU has it, else tables ("slicing by 8"); and a
 * table-free bitwise form for the few bytes of a header.
 */
#ifndef RF_CRC32C_H
#define RF_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Tables for the portable code; the SSE4.2 instruction is used instead
 * where the CPU has it. One per object, so that no global is needed. */
struct rf__crc32c {
    uint32_t table[8][256];
    bool hardware;
};

void rf__crc32c_init(struct rf__crc32c *c);

/* Extends crc (0 to start) over size bytes: crc(crc(0, a), b) equals
 * crc(0, a followed by b). crc(0, "123456789") is 0xe3069283. */
uint32_t rf__crc32c(const struct rf__crc32c *c, uint32_t crc, const void *data,
                    size_t size);

/* The CRC-32C of size bytes, computed a bit at a time without tables:
 * for headers, which need no speed, so that their codecs keep no state.
 * Equals rf__crc32c(c, 0, data, size). */
uint32_t rf__crc32c_bitwise(const void *data, size_t size);

#endif /* RF_CRC32C_H */
