/*
 * pack.h - ringfeed's two on-disk formats, as docs/packed-format.md
 * describes them byte by byte: the packed file (header, payloads, index,
 * names, zstd dictionary) and the folder index (a folder's listing, handed
 * from the consumer to its producers in a memfd). Both are little-endian
 * with 64-bit offsets and CRC-32C checksums. lib/pack.c holds the codecs,
 * the checksum, the packed-file writer and the bounded copy of a file's
 * metadata into a memfd; lib/dataset.c the readers.
 */
#ifndef RF_PACK_H
#define RF_PACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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
};

/* What the header decoders below found wrong. */
enum rf__format_problem {
    RF__FORMAT_DAMAGED = -1, /* the checks failed */
    RF__FORMAT_FOREIGN = -2, /* not this format at all (magic) */
    RF__FORMAT_NEWER = -3    /* a later version of the format */
};

/* Writes h into out, computing header_crc (h->header_crc is ignored). */
void rf__pack_header_encode(const struct rf__pack_header *h,
                            uint8_t out[RF__PACK_HEADER_SIZE]);

/* Decodes and checks magic, version, sizes, flags and header_crc; what
 * the header says about the rest of the file is checked by the reader.
 * Returns 0 or an rf__format_problem with the reason (without the file
 * name) in why. */
int rf__pack_header_decode(struct rf__pack_header *h,
                           const uint8_t in[RF__PACK_HEADER_SIZE], char *why,
                           size_t why_len);

void rf__pack_entry_encode(const struct rf__pack_entry *e,
                           uint8_t out[RF__PACK_ENTRY_SIZE]);
void rf__pack_entry_decode(struct rf__pack_entry *e,
                           const uint8_t in[RF__PACK_ENTRY_SIZE]);

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

/* pwrite() until all `size` bytes are at `offset`: a write may be cut
 * short by a signal or a full page cache, which is not an error. Returns
 * 0 or -errno. */
int rf__pwrite_all(int fd, const void *data, size_t size, uint64_t offset);

/* pread() until `size` bytes are read or the file ends. Returns the count
 * (short only at the end of the file) or -errno. */
ssize_t rf__pread_all(int fd, void *data, size_t size, uint64_t offset);

/* Writes a folder dataset's listing in this format to fd, at offset 0
 * (fd is new and empty): the memfd of rf__dataset_index_fd(), or a cache file
 * that rf__dataset_open_indexed() reads back (it checks everything, so a
 * damaged or foreign file is refused, never trusted). Returns 0, -EINVAL
 * for a packed file, or -errno of the write, with the reason in why. */
int rf__dataset_index_write(const rf_dataset *ds, int fd, char *why,
                            size_t why_len);

/* ---- CRC-32C (Castagnoli), the checksum of both formats ----------------- */

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

/* ---- copying metadata out of a file, in bounded pieces ------------------ */

/* What rf__copy_region() reads at a time: whole index entries of both
 * formats (40 and 16 bytes) and whole 4096-byte pages, just under 1 MiB.
 * Whatever size a damaged header claims, reading it costs one piece. */
#define RF__COPY_PIECE ((size_t)20480 * 51)

/* Called on each piece before it is checksummed and written: `at` is the
 * piece's offset in the region (a multiple of RF__COPY_PIECE). Returns 0
 * to go on, or -1 (with its reason kept in ctx) to stop the copy. */
struct rf__copy_check {
    int (*piece)(void *ctx, const uint8_t *data, uint64_t at, size_t size);
    void *ctx;
};

/* rf__copy_region()'s result when check stopped it. */
#define RF__COPY_REFUSED 1

/* A region of a file to copy into a memfd. */
struct rf__copy {
    int from;              /* the file */
    uint64_t offset, size; /* the region of it */
    int to;                /* a memfd at least to_offset + size bytes long,
                              made by ftruncate(): all holes, no memory */
    uint64_t to_offset;    /* where the region goes in it */
    const struct rf__crc32c *crc32c;
    struct rf__copy_check check; /* check.piece may be NULL */
};

/* Copies c's region one RF__COPY_PIECE at a time, each checked (when
 * there is a check) before it is checksummed and written, and returns
 * the CRC-32C of the region in *crc and the bytes read in *copied. Pages
 * of zeros are not written: the memfd reads as zeros there already, so
 * the copy of a sparse or zeroed file takes no memory for its holes.
 * Returns 0; RF__COPY_REFUSED when the check stopped it; -ENODATA when
 * the file ends before the region does (at offset + *copied); or -errno
 * of a read or write. */
int rf__copy_region(const struct rf__copy *c, uint32_t *crc, uint64_t *copied);

/* ---- little-endian fields ----------------------------------------------- */

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

#endif /* RF_PACK_H */
