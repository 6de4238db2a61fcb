/*
 * file-io.h - whole reads and writes at an offset (pread()/pwrite() until
 * done, through signals and short counts), and rf__copy_region(), which
 * copies a region of a file that a header describes (a pack's metadata,
 * a cached folder index) into a memfd a bounded piece at a time, checked
 * and checksummed as it goes. Used by the pack writer and reader, the
 * folder dataset and the index cache.
 */
#ifndef RF_FILE_IO_H
#define RF_FILE_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "source/crc32c.h"

/* pwrite() until all `size` bytes are at `offset`: a write may be cut
 * short by a signal or a full page cache, which is not an error. Returns
 * 0 or -errno. */
int rf__pwrite_all(int fd, const void *data, size_t size, uint64_t offset);

/* pread() until `size` bytes are read or the file ends. Returns the count
 * (short only at the end of the file) or -errno. */
ssize_t rf__pread_all(int fd, void *data, size_t size, uint64_t offset);

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

#endif /* RF_FILE_IO_H */
