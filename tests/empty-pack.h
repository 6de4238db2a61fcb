/*
 * empty-pack.h - a packed file without samples, for the readers' cases
 * (test-dataset-info, test-start, test-pack-format): rf_pack_writer_finish()
 * refuses to write one, yet a reader must still take it (a file made by an
 * older ringfeed or by hand) and a loader refuse it by name. The header
 * alone, as the writer wrote it: 128 bytes, every area empty at 128, the
 * CRC of nothing (0) over the metadata.
 */
#ifndef RF_TEST_EMPTY_PACK_H
#define RF_TEST_EMPTY_PACK_H

#include <stdint.h>
#include <stdio.h>

#include "source/pack-format.h"
#include "test.h"

/* Writes at path a pack of no samples whose sample shape is height x
 * width x channels in NHWC (all 0: none). */
static inline void write_empty_pack(const char *path, uint32_t height,
                                    uint32_t width, uint32_t channels)
{
    const struct rf__pack_header h = {
        .version = RF__PACK_VERSION,
        .header_size = RF__PACK_HEADER_SIZE,
        .entry_size = RF__PACK_ENTRY_SIZE,
        .height = height,
        .width = width,
        .channels = channels,
        .layout = RF_LAYOUT_NHWC,
        .index_offset = RF__PACK_HEADER_SIZE,
        .names_offset = RF__PACK_HEADER_SIZE,
        .dict_offset = RF__PACK_HEADER_SIZE,
        .file_size = RF__PACK_HEADER_SIZE,
    };
    uint8_t bytes[RF__PACK_HEADER_SIZE];
    rf__pack_header_encode(&h, bytes);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK_EQ(fwrite(bytes, 1, sizeof(bytes), f), sizeof(bytes));
    CHECK_EQ(fclose(f), 0);
}

#endif /* RF_TEST_EMPTY_PACK_H */
