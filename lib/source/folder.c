/*
 * folder.c - the folder kind of rf_dataset (dataset-internal.h): a folder
 * of class folders, by its listing in the folder index format. The
 * listing is made here by folder-walk.c, or handed over by the consumer
 * (or the index cache) in a memfd and then checked whole before it is
 * used, so that a damaged or planted listing cannot make a producer read
 * files outside the folder. Samples are the files, read whole with
 * pread() through openat() below the folder's own fd.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fds.h"
#include "common/internal.h"
#include "source/dataset-internal.h"
#include "source/file-io.h"
#include "source/folder-walk.h"
#include "source/little-endian.h"
#include "source/pack-format.h"

/* ---- checking a listing from an index fd -------------------------------- */

/* A name from an index must stay inside the folder: relative and without
 * ".." components, so that a damaged or planted index cannot make a
 * producer read files elsewhere. */
static bool name_stays_inside(const char *name, size_t length)
{
    if (length == 0 || name[0] == '/')
        return false;
    for (size_t start = 0; start < length;) {
        size_t end = start;
        while (end < length && name[end] != '/')
            end++;
        if (end - start == 2 && name[start] == '.' && name[start + 1] == '.')
            return false;
        start = end + 1;
    }
    return true;
}

static const char *listing_entry_problem(const struct rf__index_header *h,
                                         const char *names,
                                         const struct rf__index_entry *e)
{
    if (e->label >= h->classes)
        return "its label is not below the number of classes";
    if (e->name_length > RF__INDEX_NAME_MAX)
        return "its name is longer than 4095 bytes";
    if (!rf__name_is_whole(names, h->names_size, e->name_offset,
                           e->name_length))
        return "its name lies outside the names area";
    if (!name_stays_inside(names + e->name_offset, e->name_length))
        return "its name leads out of the folder";
    return NULL;
}

static int check_listing_entries(const struct rf__index_header *h,
                                 const uint8_t *listing, char *why,
                                 size_t why_len)
{
    const char *names = (const char *)listing + h->names_offset;
    for (uint64_t i = 0; i < h->samples; i++) {
        struct rf__index_entry e;
        rf__index_entry_decode(&e, listing + RF__INDEX_HEADER_SIZE +
                                       i * RF__INDEX_ENTRY_SIZE);
        const char *problem = listing_entry_problem(h, names, &e);
        if (problem) {
            rf__format(why, why_len,
                       "entry %llu: %s (label %u, name at %llu, %u bytes)",
                       (unsigned long long)i, problem, e.label,
                       (unsigned long long)e.name_offset, e.name_length);
            return -1;
        }
    }
    return 0;
}

/* Checks everything a reader relies on: header, sizes, checksum, and
 * that every entry's name lies inside the names area. */
static int check_listing(const uint8_t *listing, size_t size,
                         const struct rf__crc32c *crc, char *why,
                         size_t why_len)
{
    struct rf__index_header h;
    if (size < RF__INDEX_HEADER_SIZE) {
        rf__format(why, why_len, "it has %zu bytes, less than a header", size);
        return -1;
    }
    if (rf__index_header_decode(&h, listing, why, why_len) < 0)
        return -1;
    const uint64_t room = (size - RF__INDEX_HEADER_SIZE) / RF__INDEX_ENTRY_SIZE;
    if (h.total_size != size || h.samples > room ||
        h.names_offset !=
            RF__INDEX_HEADER_SIZE + h.samples * RF__INDEX_ENTRY_SIZE ||
        h.names_size != size - h.names_offset) {
        rf__format(why, why_len,
                   "its header says %llu samples, names at %llu (%llu bytes) "
                   "and %llu bytes in all, but it has %zu bytes",
                   (unsigned long long)h.samples,
                   (unsigned long long)h.names_offset,
                   (unsigned long long)h.names_size,
                   (unsigned long long)h.total_size, size);
        return -1;
    }
    if (rf__crc32c(crc, 0, listing + RF__INDEX_HEADER_SIZE,
                   size - RF__INDEX_HEADER_SIZE) != h.body_crc) {
        rf__format(why, why_len, "its checksum does not match");
        return -1;
    }
    return check_listing_entries(&h, listing, why, why_len);
}

/* Points the dataset at a listing (already checked) that it now owns. */
static void use_listing(rf_dataset *ds, uint8_t *listing, size_t size,
                        bool mapped)
{
    ds->listing = listing;
    ds->listing_size = size;
    ds->listing_mapped = mapped;
    ds->samples = rf__get_le64(listing + 24);
    ds->classes = rf__get_le32(listing + 20);
    ds->entries = listing + RF__INDEX_HEADER_SIZE;
    ds->names = (const char *)listing + rf__get_le64(listing + 32);
    ds->names_size = rf__get_le64(listing + 40);
    /* rf__folder_read() gives every file's bytes as RF_SAMPLE_JPEG. */
    ds->samples_of_kind[RF_SAMPLE_JPEG] = ds->samples;
}

static int map_listing(rf_dataset *ds, int index_fd, char *why, size_t why_len)
{
    struct stat st;
    if (fstat(index_fd, &st) < 0 || st.st_size <= 0) {
        rf__format(why, why_len,
                   "%s: the listing handed over (fd %d) "
                   "cannot be read",
                   ds->path, index_fd);
        return -EBADF;
    }
    const size_t size = (size_t)st.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, index_fd, 0);
    if (map == MAP_FAILED) {
        const int rc = -errno;
        rf__format(why, why_len, "%s: cannot map its listing (fd %d): %s",
                   ds->path, index_fd, strerror(errno));
        return rc;
    }
    char reason[RF__DETAIL / 2];
    if (check_listing(map, size, &ds->crc, reason, sizeof(reason)) < 0) {
        munmap(map, size);
        rf__format(why, why_len,
                   "%s: its listing (fd %d) is refused: %s; list the folder "
                   "again (delete its index cache file, if it has one)",
                   ds->path, index_fd, reason);
        return RF_E_CORRUPT_SAMPLE;
    }
    use_listing(ds, map, size, true);
    return 0;
}

int rf__folder_open(rf_dataset *ds, int index_fd, char *why, size_t why_len)
{
    ds->kind = RF__DATASET_FOLDER;
    if (index_fd >= 0)
        return map_listing(ds, index_fd, why, why_len);
    uint8_t *listing = NULL;
    size_t size = 0;
    const int rc = rf__folder_list(ds->fd, ds->path, &ds->crc, &listing, &size,
                                   &ds->walked, why, why_len);
    if (rc == 0)
        use_listing(ds, listing, size, false);
    return rc;
}

void rf__folder_close(rf_dataset *ds)
{
    if (ds->listing_mapped)
        munmap(ds->listing, ds->listing_size);
    else
        free(ds->listing);
    free(ds->walked.names);
    free(ds->walked.ids);
}

/* ---- the listing for producers ------------------------------------------ */

int rf__dataset_index_write(const rf_dataset *ds, int fd, char *why,
                            size_t why_len)
{
    if (ds->kind != RF__DATASET_FOLDER) {
        rf__format(why, why_len, "%s: a packed file has no folder listing",
                   ds->path);
        return -EINVAL;
    }
    const int rc = rf__pwrite_all(fd, ds->listing, ds->listing_size, 0);
    if (rc < 0)
        rf__format(why, why_len, "%s: cannot write its listing: %s", ds->path,
                   strerror(-rc));
    return rc;
}

/* The memfd is sealed once written: a producer that maps it can trust
 * that it never changes size (no SIGBUS) nor content. */

/* The memfd is sealed once written: a producer that maps it can trust
 * that it never changes size (no SIGBUS) nor content. */
int rf__folder_index_fd(rf_dataset *ds, int *fd)
{
    const int mfd = rf__fd_off_stdio(
        memfd_create("ringfeed-listing", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (mfd < 0) {
        const int rc = -errno;
        rf__format(ds->error, sizeof(ds->error),
                   "%s: cannot create a memfd for its listing: %s", ds->path,
                   strerror(errno));
        return rc;
    }
    int rc = rf__dataset_index_write(ds, mfd, ds->error, sizeof(ds->error));
    if (rc == 0 &&
        fcntl(mfd, F_ADD_SEALS,
              F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
        rc = -errno;
        rf__format(ds->error, sizeof(ds->error),
                   "%s: cannot seal the memfd of its listing: %s", ds->path,
                   strerror(errno));
    }
    if (rc < 0) {
        close(mfd);
        return rc;
    }
    *fd = mfd;
    return 0;
}

/* ---- reading samples ---------------------------------------------------- */

/* "sample 12 (/data/train/cls/a.jpg)", as every message names it. */
static void describe_folder_sample(const rf_dataset *ds, uint64_t index,
                                   const char *name, char *out, size_t len)
{
    char whole[2 * RF__PATH_MAX + 64];
    rf__format(whole, sizeof(whole), "sample %llu (%s/%s)",
               (unsigned long long)index, ds->path, name);
    rf__copy_elided(out, len, whole);
}

void rf__folder_describe(const rf_dataset *ds, uint64_t index, char *out,
                         size_t len)
{
    struct rf__index_entry e;
    rf__index_entry_decode(&e, ds->entries + index * RF__INDEX_ENTRY_SIZE);
    describe_folder_sample(ds, index, ds->names + e.name_offset, out, len);
}

static int folder_sample_failed(rf_dataset *ds, uint64_t index,
                                const char *name, const char *what, int rc)
{
    char who[RF__SAMPLE_NAME_MAX];
    describe_folder_sample(ds, index, name, who, sizeof(who));
    return rf__dataset_sample_failed(ds, who, what, rc);
}

/* Opens and checks the file of a folder sample; returns its fd and size. */
static int open_folder_sample(rf_dataset *ds, uint64_t index, const char *name,
                              size_t *size)
{
    struct stat st;
    const int fd = rf__fd_off_stdio(
        openat(ds->fd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
    if (fd < 0)
        return folder_sample_failed(ds, index, name, "cannot open it", -errno);
    int rc = 0;
    if (fstat(fd, &st) < 0)
        rc = folder_sample_failed(ds, index, name, "cannot stat it", -errno);
    else if (!S_ISREG(st.st_mode))
        rc = folder_sample_failed(ds, index, name,
                                  "is not a regular file; remove it",
                                  RF_E_CORRUPT_SAMPLE);
    else if ((uint64_t)st.st_size > RF__SAMPLE_MAX)
        rc = folder_sample_failed(ds, index, name,
                                  "is larger than " RF__SAMPLE_MAX_TEXT
                                  ", more than a sample may have (in a "
                                  "folder as in a pack); remove it",
                                  RF_E_CORRUPT_SAMPLE);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    *size = (size_t)st.st_size;
    return fd;
}

int rf__folder_read(rf_dataset *ds, uint64_t index, rf_sample_info *info)
{
    struct rf__index_entry e;
    size_t size = 0;
    rf__index_entry_decode(&e, ds->entries + index * RF__INDEX_ENTRY_SIZE);
    const char *name = ds->names + e.name_offset;
    const int fd = open_folder_sample(ds, index, name, &size);
    if (fd < 0)
        return fd;
    ssize_t got = rf__dataset_reserve_buffer(ds, size);
    if (got == 0)
        got = rf__pread_all(fd, ds->buffer, size, 0);
    close(fd);
    if (got < 0)
        return folder_sample_failed(ds, index, name, "cannot read it",
                                    (int)got);
    if ((size_t)got < size)
        return folder_sample_failed(ds, index, name,
                                    "it became shorter while it was read",
                                    RF_E_CORRUPT_SAMPLE);
    *info = (rf_sample_info){.data = ds->buffer,
                             .size = size,
                             .label = e.label,
                             .kind = RF_SAMPLE_JPEG,
                             .name = name};
    return 0;
}
