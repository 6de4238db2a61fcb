/*
 * fuzz.h - what the fuzz targets in tests/fuzz/ share with each other, with
 * the replay driver (replay.c) and with the seed maker (make-seeds.c): the
 * libFuzzer entry point, the layout of the parameter bytes that lead an
 * input, and the zstd dictionary of the zstd target.
 *
 * Each fuzz-*.c defines LLVMFuzzerTestOneInput() and drives the library's
 * real code through its internal API. Linked with libFuzzer (tools/dev/fuzz.sh)
 * it explores; linked with replay.c it is a `make check` test that feeds
 * it every file of its corpus, tests/fuzz/corpus/TARGET/.
 */
#ifndef RF_FUZZ_H
#define RF_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* libFuzzer's entry point: returns 0; a bug is a crash or a sanitizer
 * report. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The bytes an input starts with, read one at a time; past the end they
 * read as 0, so that every input is usable. */
struct fuzz_bytes {
    const uint8_t *data;
    size_t size;
};

static inline uint8_t fuzz_take(struct fuzz_bytes *in)
{
    if (in->size == 0)
        return 0;
    in->size--;
    return *in->data++;
}

/* ---- fuzz-pack: PACK_PARAM_BYTES bytes, then the packed file ----------- */

#define PACK_PARAM_BYTES 1
/* Which checksums the target recomputes before the reader sees the file,
 * so that mutations get past them to the checks behind (a clear bit keeps
 * the stored value, so a mismatch is tested too). */
#define PACK_RESEAL_PAYLOADS 1u /* each entry's payload CRC */
#define PACK_RESEAL_META 2u     /* meta_crc, over index, names, dictionary */
#define PACK_RESEAL_HEADER 4u   /* header_crc */
#define PACK_RESEAL_ALL 7u

/* ---- fuzz-jpeg: JPEG_PARAM_BYTES bytes, then the JPEG file ------------- */

#define JPEG_PARAM_BYTES 8
/* byte 0: the bits below; 1: out height - 1 (mod 64); 2: out width - 1
 * (mod 64); 3: smallest crop area in 1/256; 4: eval resize (0: none);
 * 5, 6: seed; 7: sample index. */
#define JPEG_TRANSFORM_MASK 3u /* rf_transform (3 reads as train) */
#define JPEG_FLIP 4u
#define JPEG_NCHW 8u
#define JPEG_GRAY 16u
#define JPEG_EXIF 32u
#define JPEG_WARNINGS_OK 64u /* warnings do not fail the image */

/* ---- fuzz-zstd: ZSTD_PARAM_BYTES bytes, then the zstd frame ------------ */

#define ZSTD_PARAM_BYTES 4
/* byte 0: bit 0 decodes with the dictionary (and the DICT_ shape), bit 1
 * NCHW; bytes 1..3: height - 1, width - 1 (mod 64), channels - 1 (mod 4). */
#define ZSTD_WITH_DICT 1u
#define ZSTD_NCHW 2u

/* The shape of the packed file that holds the dictionary. */
#define DICT_HEIGHT 8u
#define DICT_WIDTH 8u
#define DICT_CHANNELS 3u
#define DICT_SIZE 512u

/* The dictionary: raw content (zstd takes any bytes as one) that looks
 * like the pixels the seeds compress, so that frames refer to it. */
static inline void fuzz_zstd_dict(uint8_t dict[DICT_SIZE])
{
    for (uint32_t i = 0; i < DICT_SIZE; i++)
        dict[i] = (uint8_t)(i * 7 + (i >> 5));
}

#endif /* RF_FUZZ_H */
