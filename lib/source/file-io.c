/*
 * file-io.c - whole pread()/pwrite() and the bounded, checked copy of a
 * file's region into a memfd that leaves pages of zeros as holes; see
 * file-io.h.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "source/file-io.h"

int rf__pwrite_all(int fd, const void *data, size_t size, uint64_t offset)
{
    const uint8_t *p = data;
    while (size > 0) {
        const ssize_t n = pwrite(fd, p, size, (off_t)offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        p += n;
        size -= (size_t)n;
        offset += (uint64_t)n;
    }
    return 0;
}

/* The page the zero test goes by: a memfd's pages are at least this
 * large, so a page of zeros left unwritten is memory not taken. */
#define COPY_PAGE 4096u

static bool all_zero(const uint8_t *p, size_t size)
{
    return size == 0 || (p[0] == 0 && memcmp(p, p + 1, size - 1) == 0);
}

ssize_t rf__pread_all(int fd, void *data, size_t size, uint64_t offset)
{
    size_t done = 0;
    while (done < size) {
        const ssize_t n = pread(fd, (uint8_t *)data + done, size - done,
                                (off_t)(offset + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        done += (size_t)n;
    }
    return (ssize_t)done;
}

/* Writes the pages of data that hold anything but zeros to fd at `at`,
 * in runs; the rest of fd stays a hole. (Where `at` is a multiple of
 * COPY_PAGE, each page of zeros skipped is a page of fd not taken.) */
static int write_nonzero_pages(int fd, const uint8_t *data, size_t size,
                               uint64_t at)
{
    size_t run = 0; /* where the pages not yet written begin */
    for (size_t page = 0; page < size; page += COPY_PAGE) {
        const size_t n = size - page < COPY_PAGE ? size - page : COPY_PAGE;
        if (!all_zero(data + page, n))
            continue;
        const int rc =
            page > run ? rf__pwrite_all(fd, data + run, page - run, at + run)
                       : 0;
        if (rc < 0)
            return rc;
        run = page + n;
    }
    return size > run ? rf__pwrite_all(fd, data + run, size - run, at + run)
                      : 0;
}

/* One piece of rf__copy_region(): `size` bytes at *copied into the
 * region, read into `piece`. */
static int copy_piece(const struct rf__copy *c, uint8_t *piece, size_t size,
                      uint32_t *crc, uint64_t *copied)
{
    const ssize_t got =
        rf__pread_all(c->from, piece, size, c->offset + *copied);
    if (got < 0)
        return (int)got;
    if ((size_t)got < size) {
        *copied += (uint64_t)got;
        return -ENODATA;
    }
    if (c->check.piece &&
        c->check.piece(c->check.ctx, piece, *copied, size) < 0)
        return RF__COPY_REFUSED;
    *crc = rf__crc32c(c->crc32c, *crc, piece, size);
    const int rc =
        write_nonzero_pages(c->to, piece, size, c->to_offset + *copied);
    if (rc == 0)
        *copied += size;
    return rc;
}

int rf__copy_region(const struct rf__copy *c, uint32_t *crc, uint64_t *copied)
{
    *crc = 0;
    *copied = 0;
    if (c->size == 0)
        return 0;
    /* One piece at a time, never the whole region: its size comes from a
     * header, and the file may hold far less (a sparse file's holes). */
    uint8_t *piece =
        malloc(c->size < RF__COPY_PIECE ? c->size : RF__COPY_PIECE);
    int rc = piece ? 0 : -ENOMEM;
    while (rc == 0 && *copied < c->size) {
        const uint64_t left = c->size - *copied;
        rc = copy_piece(c, piece, left < RF__COPY_PIECE ? left : RF__COPY_PIECE,
                        crc, copied);
    }
    free(piece);
    return rc;
}
