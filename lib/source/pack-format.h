/*
 * pack-format.h - ringfeed's two on-disk formats, as docs/packed-format.md
 * describes them byte by byte: the packed file (header, payloads, index,
 * names, zstd dictionary) and the folder index (a folder's listing, handed
 * from the consumer to its producers in a memfd). Both are little-endian
 * with 64-bit offsets and CRC-32C checksums. pack-format.c holds their
 * codecs and the rules a packed file's header and entries must keep
 * (shared by the writer, pack-writer.c, and the reader, pack-reader.c);
 * folder.c checks a folder index as it reads one.
 */
#ifndef RF_PACK_FORMAT_H
#define RF_PACK_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringfeed.h"

/* ---- the packed file ---------------------------------------------------- */

#define RF__PACK_MAGIC "RFPACK01" /* 8 bytes, no terminator in the file */
#define RF__PACK_VERSION 1u
#define RF__PACK_HEADER_SIZE 128u
#define RF__PACK_ENTRY_SIZE 40u
/* Longest sample name kept, in bytes without the terminator. */
#define RF__PACK_NAME_MAX 4095u
/* The largest zstd dictionary a packed file may carry (zstd's trainer
 * makes them of 100 KB or so; --dict-size is rarely above a few MB). */
#define RF__PACK_DICT_MAX (UINT64_C(64) << 20)

/* The most bytes one sample may have, wherever it is: a file of a folder
 * (refused when read), a pack's payload (refused by rf_pack_writer_add(),
 * and by a reader in any index entry). One rule, so that whatever a
 * folder yields can be packed and whatever a pack holds could have come
 * from a folder. No image the decoders accept comes near it, and a
 * mistaken multi-gigabyte file would otherwise be read into memory. */
#define RF__SAMPLE_MAX (UINT64_C(1) << 30)
#define RF__SAMPLE_MAX_TEXT "1 GiB"

/* Header flags; any other bit set makes a reader refuse the file. */
#define RF__PACK_FLAG_NAMES 1u /* at least one sample has a name */
#define RF__PACK_FLAG_DICT 2u  /* dict_size > 0 */
#define RF__PACK_FLAGS_KNOWN (RF__PACK_FLAG_NAMES | RF__PACK_FLAG_DICT)

/* The header, decoded. The metadata (index, names, dictionary) follows
 * the payloads and runs to the end of the file, in that order. */
struct rf__pack_header {
    uint32_t version, header_size, flags, entry_size;
    uint64_t samples;
    uint32_t classes; /* largest label + 1; 0 when empty */
    uint32_t height, width, channels, layout; /* RF_SAMPLE_ZSTD shape */
    uint64_t index_offset, names_offset, names_size;
    uint64_t dict_offset, dict_size, file_size;
    uint32_t meta_crc;   /* CRC-32C of [index_offset, file_size) */
    uint32_t header_crc; /* CRC-32C of the header, this field as zero */
};

/* One index entry, decoded. */
struct rf__pack_entry {
    uint64_t offset;      /* of the payload, from the start of the file */
    uint64_t name_offset; /* in the names area; 0 when name_length is 0 */
    int64_t label;
    uint32_t size;        /* payload bytes */
    uint32_t crc;         /* CRC-32C of the payload */
    uint32_t name_length; /* 0: no name */
    uint8_t kind;         /* rf_sample_kind */
    uint8_t reserved[3];  /* 0 in version 1; a reader refuses others */
};

/* What the header decoders and checks below found wrong. */
enum rf__format_problem {
    RF__FORMAT_DAMAGED = -1, /* the checks failed */
    RF__FORMAT_FOREIGN = -2, /* not this format at all (magic) */
    RF__FORMAT_NEWER = -3    /* a later version of the format */
};

/* Writes h into out, computing header_crc (h->header_crc is ignored). */
void rf__pack_header_encode(const struct rf__pack_header *h,
                            uint8_t out[RF__PACK_HEADER_SIZE]);

/* Decodes and checks magic, version, sizes, flags and header_crc; what
 * the header says about the rest of the file is checked by
 * rf__pack_check_areas(). Returns 0 or an rf__format_problem with the
 * reason (without the file name) in why. */
int rf__pack_header_decode(struct rf__pack_header *h,
                           const uint8_t in[RF__PACK_HEADER_SIZE], char *why,
                           size_t why_len);

void rf__pack_entry_encode(const struct rf__pack_entry *e,
                           uint8_t out[RF__PACK_ENTRY_SIZE]);
void rf__pack_entry_decode(struct rf__pack_entry *e,
                           const uint8_t in[RF__PACK_ENTRY_SIZE]);

/* Whether a RF_SAMPLE_ZSTD shape is one a loader can be configured for
 * (its RF_PARAM_HEIGHT, WIDTH, CHANNELS and LAYOUT), since it must be
 * configured for the pack's shape to read the pack; all zeros (JPEG
 * samples only) is too. Writer and reader share it: a pack with any
 * other shape could never be loaded. */
bool rf__pack_shape_is_loadable(uint32_t height, uint32_t width,
                                uint32_t channels, uint32_t layout);

/* "a height of 1..65536, a width of ... and 1..4 channels", from the
 * config's ranges, for the messages of both. */
void rf__describe_loadable_shapes(char *out, size_t len);

/* Whether the areas a decoded header names tile a file of `size` bytes
 * exactly (payloads from the header to the index, then index, names and
 * dictionary to the end), within the format's limits, and agree with its
 * flags. Every size is compared with the file's before anything is read
 * or allocated, and every offset checked before it is subtracted. Returns
 * 0 or RF__FORMAT_DAMAGED with the reason in why. */
int rf__pack_check_areas(const struct rf__pack_header *h, uint64_t size,
                         char *why, size_t why_len);

/* What is wrong with an index entry under header h, its name aside (that
 * needs the names area, which follows the index); NULL when nothing is. */
const char *rf__pack_entry_problem(const struct rf__pack_header *h,
                                   const struct rf__pack_entry *e);

/* "index entry N: PROBLEM (its fields)" into why. */
void rf__pack_describe_entry_problem(uint64_t i, const struct rf__pack_entry *e,
                                     const char *problem, char *why,
                                     size_t why_len);

/* Whether a name of `length` bytes at `offset` lies inside a names area
 * of names_size bytes, ends with its NUL there and holds no other (both
 * formats keep names so). */
bool rf__name_is_whole(const char *names, uint64_t names_size, uint64_t offset,
                       uint32_t length);

/* Whether a zstd frame can be decompressed with the packed file's
 * dictionary, whose ID is dict_id (0: none, or one of raw content, which
 * frames cannot name): a frame that names no dictionary always can. When
 * it cannot, says why in `why` (without the sample's name or advice). */
bool rf__zstd_frame_fits_dict(const void *frame, size_t size, unsigned dict_id,
                              char *why, size_t why_len);

/* ---- the folder index --------------------------------------------------- */

#define RF__INDEX_MAGIC "RFLIST01"
#define RF__INDEX_VERSION 1u
#define RF__INDEX_HEADER_SIZE 64u
#define RF__INDEX_ENTRY_SIZE 16u
/* Longest sample name below the folder, without the terminator. */
#define RF__INDEX_NAME_MAX 4095u

struct rf__index_header {
    uint32_t version, header_size, entry_size, classes;
    uint64_t samples;
    uint64_t names_offset, names_size, total_size;
    uint32_t body_crc;   /* CRC-32C of [header_size, total_size) */
    uint32_t header_crc; /* CRC-32C of the header, this field as zero */
};

struct rf__index_entry {
    uint64_t name_offset; /* in the names area */
    uint32_t label;
    uint32_t name_length; /* bytes before the terminating NUL */
};

void rf__index_header_encode(const struct rf__index_header *h,
                             uint8_t out[RF__INDEX_HEADER_SIZE]);
/* Like rf__pack_header_decode(): checks the header alone. */
int rf__index_header_decode(struct rf__index_header *h,
                            const uint8_t in[RF__INDEX_HEADER_SIZE], char *why,
                            size_t why_len);
void rf__index_entry_encode(const struct rf__index_entry *e,
                            uint8_t out[RF__INDEX_ENTRY_SIZE]);
void rf__index_entry_decode(struct rf__index_entry *e,
                            const uint8_t in[RF__INDEX_ENTRY_SIZE]);

#endif /* RF_PACK_FORMAT_H */
