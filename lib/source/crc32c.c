/*
 * crc32c.c - CRC-32C (Castagnoli): the hardware instruction, the
 * slicing-by-8 tables, and the bitwise form for headers; see crc32c.h.
 */
#include "config.h"

#include "source/crc32c.h"
#include "source/little-endian.h"

#define CRC32C_POLY 0x82f63b78u /* Castagnoli, bit-reversed */

void rf__crc32c_init(struct rf__crc32c *c)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t crc = i;
        for (int bit = 0; bit < 8; bit++)
            crc = (crc >> 1) ^ (CRC32C_POLY & (0u - (crc & 1)));
        c->table[0][i] = crc;
    }
    /* table[k][i]: the CRC of byte i followed by k zero bytes, so that
     * eight bytes are folded in with eight lookups ("slicing by 8"). */
    for (int k = 1; k < 8; k++)
        for (int i = 0; i < 256; i++) {
            const uint32_t prev = c->table[k - 1][i];
            c->table[k][i] = (prev >> 8) ^ c->table[0][prev & 0xff];
        }
#if defined(__x86_64__)
    c->hardware = __builtin_cpu_supports("sse4.2");
#else
    c->hardware = false;
#endif
}

#if defined(__x86_64__)
/* The crc32 instruction computes exactly CRC-32C, 8 bytes a cycle. */
__attribute__((target("sse4.2"))) static uint32_t
crc32c_hardware(uint32_t crc, const uint8_t *p, size_t size)
{
    uint64_t wide = crc;
    for (; size >= 8; p += 8, size -= 8)
        wide = __builtin_ia32_crc32di(wide, rf__get_le64(p));
    crc = (uint32_t)wide;
    for (; size > 0; p++, size--)
        crc = __builtin_ia32_crc32qi(crc, *p);
    return crc;
}
#endif

static uint32_t crc32c_tables(const struct rf__crc32c *c, uint32_t crc,
                              const uint8_t *p, size_t size)
{
    const uint32_t(*t)[256] = c->table;
    for (; size >= 8; p += 8, size -= 8) {
        const uint64_t w = rf__get_le64(p) ^ crc;
        crc = t[7][w & 0xff] ^ t[6][(w >> 8) & 0xff] ^ t[5][(w >> 16) & 0xff] ^
              t[4][(w >> 24) & 0xff] ^ t[3][(w >> 32) & 0xff] ^
              t[2][(w >> 40) & 0xff] ^ t[1][(w >> 48) & 0xff] ^ t[0][w >> 56];
    }
    for (; size > 0; p++, size--)
        crc = (crc >> 8) ^ t[0][(crc ^ *p) & 0xff];
    return crc;
}

uint32_t rf__crc32c(const struct rf__crc32c *c, uint32_t crc, const void *data,
                    size_t size)
{
    crc = ~crc;
#if defined(__x86_64__)
    if (c->hardware)
        return ~crc32c_hardware(crc, data, size);
#endif
    return ~crc32c_tables(c, crc, data, size);
}

uint32_t rf__crc32c_bitwise(const void *data, size_t size)
{
    const uint8_t *p = data;
    uint32_t crc = UINT32_MAX;
    for (size_t i = 0; i < size; i++) {
        crc ^= p[i];
        for (int bit = 0; bit < 8; bit++)
            crc = (crc >> 1) ^ (CRC32C_POLY & (0u - (crc & 1)));
    }
    return ~crc;
}
