/*
 * little-endian.h - reading and writing little-endian integers at any
 * byte address, as both on-disk formats (pack-format.h), the index
 * cache's trailer and the portable CRC-32C store them. Depends on
 * nothing; the compiler turns each into one load or store.
 */
#ifndef RF_LITTLE_ENDIAN_H
#define RF_LITTLE_ENDIAN_H

#include <stdint.h>

static inline uint32_t rf__get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static inline uint64_t rf__get_le64(const uint8_t *p)
{
    return (uint64_t)rf__get_le32(p) | (uint64_t)rf__get_le32(p + 4) << 32;
}

static inline void rf__put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void rf__put_le64(uint8_t *p, uint64_t v)
{
    rf__put_le32(p, (uint32_t)v);
    rf__put_le32(p + 4, (uint32_t)(v >> 32));
}

#endif /* RF_LITTLE_ENDIAN_H */
