/*
 * index-cache.c - RF_PARAM_INDEX_CACHE: a folder's listing kept in
 * FOLDER/.ringfeed-index, so that a restarted run does not list a million
 * files again. The cache file holds the listing (the folder index format
 * of pack-format.h), then a trailer: the time the listing started, by the
 * file system's clock (the cache file's creation time, kept inside it so
 * that touching the file changes nothing), every folder the listing
 * walked, and the device and inode each of those names led to, the
 * dataset's own folder first. It is used only while the class folders
 * are the same, every name leads to the same folder (a re-pointed
 * symbolic link does not), and every folder below the dataset's last changed
 * (ctime: adding, removing or renaming an entry changes it, and unlike
 * mtime it cannot be set back) strictly before the listing started;
 * otherwise the folder is listed and the cache rewritten. A cache that
 * cannot be written (read-only data, a full disk) is not kept, and the
 * loader says why (resolve.c).
 */
#include "config.h"

#include <dirent.h>
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
#include "source/atomic-file.h"
#include "source/crc32c.h"
#include "source/dataset.h"
#include "source/file-io.h"
#include "source/little-endian.h"
#include "source/pack-format.h"

#define CACHE_NAME ".ringfeed-index"
/* The trailer: magic, u32 the CRC-32C of everything after that field,
 * u32 folders (the list's plus the dataset's own, so at least 1), u64
 * bytes of the folder list, i64 seconds and u32 nanoseconds of the
 * listing's start, u32 zero; then the list (names, each ended by a NUL),
 * then for each folder, the dataset's own first, u64 device and u64
 * inode. */
static const uint8_t trailer_magic[8] = {'R', 'F', 'D', 'I',
                                         'R', 'S', '0', '2'};
#define TRAILER_SIZE 40u
#define CRC_FROM 12u /* the trailer's bytes the CRC covers start here */
#define FOLDER_RECORD 16u

/* Where a cache's trailer says things are. */
struct trailer {
    const char *list; /* names of the folders walked, below the dataset */
    size_t list_size;
    const uint8_t *records; /* [folders] device, inode */
    uint32_t folders;
    struct timespec listed; /* when the listing started */
};

static bool before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec ||
           (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* Whether `name` is a class folder of `folder`, as the listing decides
 * (any name but . and .., links followed). */
static bool is_class(const char *folder, const char *name)
{
    struct stat st;
    char path[RF__PATH_MAX + 256];
    if (rf__is_dot_or_dotdot(name))
        return false;
    rf__format(path, sizeof(path), "%s/%s", folder, name);
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Whether `name` is one of the top-level (class) folders of the list. */
static bool listed_class(const char *list, size_t size, const char *name)
{
    for (size_t at = 0; at < size; at += strlen(list + at) + 1)
        if (strcmp(list + at, name) == 0)
            return true;
    return false;
}

/* The class folders are those of the list: none added, none removed. */
static bool same_classes(const char *folder, const char *list, size_t size)
{
    size_t listed = 0, found = 0;
    for (size_t at = 0; at < size; at += strlen(list + at) + 1)
        listed += strchr(list + at, '/') == NULL;
    DIR *d = opendir(folder);
    if (!d)
        return false;
    bool same = true;
    const struct dirent *e;
    while (same && (e = readdir(d)))
        if (is_class(folder, e->d_name)) {
            found++;
            same = listed_class(list, size, e->d_name);
        }
    closedir(d);
    return same && found == listed;
}

/* Whether `path` still leads to the folder of `record` (device, inode),
 * and, with `listed`, one unchanged since. */
static bool folder_unchanged(const char *path, const uint8_t *record,
                             const struct timespec *listed)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) &&
           (uint64_t)st.st_dev == rf__get_le64(record) &&
           (uint64_t)st.st_ino == rf__get_le64(record + 8) &&
           (!listed || before(&st.st_ctim, listed));
}

/* True when the classes are the same and every folder walked is the one
 * listed and unchanged since. The dataset's own folder must be the same
 * one, but it changes when the cache is linked into it; its class
 * folders are compared by name, and each leads to the folder listed. */
static bool cache_is_fresh(const char *folder, const struct trailer *t)
{
    if (t->list_size == 0 || t->list[t->list_size - 1] != '\0' ||
        !same_classes(folder, t->list, t->list_size) ||
        !folder_unchanged(folder, t->records, NULL))
        return false;
    uint32_t n = 1;
    for (size_t at = 0; at < t->list_size; at += strlen(t->list + at) + 1) {
        char path[RF__PATH_MAX + 256];
        rf__format(path, sizeof(path), "%s/%s", folder, t->list + at);
        if (n >= t->folders ||
            !folder_unchanged(path, t->records + (size_t)n * FOLDER_RECORD,
                              &t->listed))
            return false;
        n++;
    }
    return n == t->folders;
}

/* Reads the trailer at `at` (`size` bytes to the end of the cache);
 * false when it is damaged. */
static bool read_trailer(const uint8_t *at, size_t size, struct trailer *t)
{
    if (size < TRAILER_SIZE || memcmp(at, trailer_magic, 8) != 0)
        return false;
    t->folders = rf__get_le32(at + 12);
    t->list_size = rf__get_le64(at + 16);
    t->listed.tv_sec = (time_t)rf__get_le64(at + 24);
    t->listed.tv_nsec = (long)rf__get_le32(at + 32);
    const size_t after = size - TRAILER_SIZE;
    if (t->folders == 0 || t->list_size > after ||
        (after - t->list_size) / FOLDER_RECORD != t->folders ||
        (after - t->list_size) % FOLDER_RECORD != 0)
        return false;
    struct rf__crc32c crc;
    rf__crc32c_init(&crc);
    if (rf__crc32c(&crc, 0, at + CRC_FROM, size - CRC_FROM) !=
        rf__get_le32(at + 8))
        return false;
    t->list = (const char *)at + TRAILER_SIZE;
    t->records = at + TRAILER_SIZE + t->list_size;
    return true;
}

/* The entries of a piece of the listing as it is copied (`at` counts
 * from the first entry): one with an empty name, as a hole in a sparse
 * file reads, stops the copy, so that such a cache costs one piece. */
static int check_listing_piece(void *ctx, const uint8_t *data, uint64_t at,
                               size_t size)
{
    const struct rf__index_header *h = ctx;
    for (uint64_t o = at;
         o < at + size && o / RF__INDEX_ENTRY_SIZE < h->samples;
         o += RF__INDEX_ENTRY_SIZE) {
        struct rf__index_entry e;
        rf__index_entry_decode(&e, data + (o - at));
        if (e.name_length == 0)
            return -1;
    }
    return 0;
}

_Static_assert(RF__COPY_PIECE % RF__INDEX_ENTRY_SIZE == 0,
               "a piece holds whole listing entries");

/* The listing of the cache file at fd (its header `head`, decoded in *h),
 * copied into a memfd a piece at a time: checked against body_crc before
 * it is handed on, never copied whole first, and without pages for
 * zeros, so that a damaged cache costs no more memory than it holds.
 * Returns the memfd or -1. */
static int copy_listing(int fd, const uint8_t *head, struct rf__index_header *h)
{
    struct rf__crc32c crc32c;
    rf__crc32c_init(&crc32c);
    const int mfd =
        rf__fd_off_stdio(memfd_create("ringfeed-cache", MFD_CLOEXEC));
    const struct rf__copy copy = {.from = fd,
                                  .offset = RF__INDEX_HEADER_SIZE,
                                  .size = h->total_size - RF__INDEX_HEADER_SIZE,
                                  .to = mfd,
                                  .to_offset = RF__INDEX_HEADER_SIZE,
                                  .crc32c = &crc32c,
                                  .check = {check_listing_piece, h}};
    uint32_t crc = 0;
    uint64_t copied = 0;
    if (mfd >= 0 && ftruncate(mfd, (off_t)h->total_size) == 0 &&
        rf__pwrite_all(mfd, head, RF__INDEX_HEADER_SIZE, 0) == 0 &&
        rf__copy_region(&copy, &crc, &copied) == 0 && crc == h->body_crc)
        return mfd;
    if (mfd >= 0)
        close(mfd);
    return -1;
}

/* The listing part of a cache (`size` bytes mapped at `cache`, open at
 * fd) in a memfd for rf__dataset_open_indexed(), which checks all of it;
 * -1 when the trailer is wrong or the folder changed since the listing. */
static int fresh_listing_fd(const char *folder, int fd, const uint8_t *cache,
                            size_t size)
{
    struct rf__index_header h;
    char why[RF__DETAIL]; /* a refused cache is listed again */
    if (size < RF__INDEX_HEADER_SIZE + TRAILER_SIZE ||
        rf__index_header_decode(&h, cache, why, sizeof(why)) < 0 ||
        h.total_size < RF__INDEX_HEADER_SIZE ||
        h.total_size > size - TRAILER_SIZE)
        return -1;
    const size_t listing = (size_t)h.total_size;
    struct trailer t;
    if (!read_trailer(cache + listing, size - listing, &t) ||
        !cache_is_fresh(folder, &t))
        return -1;
    return copy_listing(fd, cache, &h);
}

static int open_from_cache(rf_dataset **out, const char *folder,
                           const char *cache)
{
    struct stat st;
    const int fd = rf__fd_off_stdio(open(cache, O_RDONLY | O_CLOEXEC));
    if (fd < 0)
        return -errno;
    /* Mapped for its header and trailer; the listing between them is
     * read from fd, a piece at a time. */
    void *map = MAP_FAILED;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (uint64_t)st.st_size <= SIZE_MAX)
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int listing =
        map == MAP_FAILED
            ? -1
            : fresh_listing_fd(folder, fd, map, (size_t)st.st_size);
    if (map != MAP_FAILED)
        munmap(map, (size_t)st.st_size);
    close(fd);
    if (listing < 0)
        return -ESTALE;
    char why[RF__DETAIL]; /* a refused cache is listed again */
    const int rc =
        rf__dataset_open_indexed(out, folder, -1, listing, why, sizeof(why));
    close(listing);
    return rc;
}

/* Gives the finished unnamed file the cache's name, where the old cache
 * was (linkat() cannot replace a file). Not linked in under a temporary
 * name and renamed, which would replace the old cache in one step: a
 * process killed between the two would leave that name behind, in every
 * dataset folder it cached. Here a reader in between finds no cache and
 * lists the folder itself, and a writer that raced this one and won
 * keeps its own. Returns 0 (also when that writer won) or -errno. */
static int link_finished(int fd, const char *cache)
{
    char self[64];
    rf__format(self, sizeof(self), "/proc/self/fd/%d", fd);
    if (unlink(cache) < 0 && errno != ENOENT)
        return -errno;
    if (linkat(AT_FDCWD, self, AT_FDCWD, cache, AT_SYMLINK_FOLLOW) < 0 &&
        errno != EEXIST)
        return -errno;
    return 0;
}

/* The trailer for a listing that walked `walked` and started at
 * `listed`, in a malloc'd block of *size bytes; NULL without memory. */
static uint8_t *make_trailer(const struct rf__walked *walked,
                             const struct timespec *listed, size_t *size)
{
    const size_t folders = walked->count + 1;
    *size = TRAILER_SIZE + walked->names_size + folders * FOLDER_RECORD;
    uint8_t *t = calloc(1, *size);
    if (!t)
        return NULL;
    memcpy(t, trailer_magic, 8);
    rf__put_le32(t + 12, (uint32_t)folders);
    rf__put_le64(t + 16, walked->names_size);
    rf__put_le64(t + 24, (uint64_t)listed->tv_sec);
    rf__put_le32(t + 32, (uint32_t)listed->tv_nsec);
    memcpy(t + TRAILER_SIZE, walked->names, walked->names_size);
    uint8_t *record = t + TRAILER_SIZE + walked->names_size;
    for (size_t k = 0; k < 2 * folders; k++)
        rf__put_le64(record + 8 * k, walked->ids[k]);
    struct rf__crc32c crc;
    rf__crc32c_init(&crc);
    rf__put_le32(t + 8, rf__crc32c(&crc, 0, t + CRC_FROM, *size - CRC_FROM));
    return t;
}

/* Best effort: 0, or -errno when the listing or its trailer could not
 * be written (-ENOSPC: the disk is full). The file was made before the
 * folder was listed: its mtime is the listing's start by the file
 * system's clock, which the trailer keeps. */
static int write_cache(const rf_dataset *ds, int fd)
{
    struct stat st;
    size_t trailer_size = 0;
    const struct rf__walked *walked = rf__dataset_walked(ds);
    char why[RF__DETAIL];
    if (!walked || walked->count >= UINT32_MAX)
        return -EOVERFLOW;
    if (fstat(fd, &st) < 0)
        return -errno;
    uint8_t *trailer = make_trailer(walked, &st.st_mtim, &trailer_size);
    if (!trailer)
        return -ENOMEM;
    int rc = rf__dataset_index_write(ds, fd, why, sizeof(why));
    if (rc == 0) {
        const off_t end = lseek(fd, 0, SEEK_END);
        rc = end < 0 ? -errno
             : end == 0
                 ? -EIO
                 : rf__pwrite_all(fd, trailer, trailer_size, (uint64_t)end);
    }
    free(trailer);
    return rc;
}

/*
 * The cache's file is made before the folder is listed (see
 * write_cache()). It has no name (O_TMPFILE) where the file system
 * allows, so that a process killed while listing leaves nothing behind,
 * and is linked in when whole. Elsewhere (NFS, for one) it is an atomic
 * file (atomic-file.h) with the fallback's unique name, opened with
 * O_EXCL | O_NOFOLLOW: never a file or link already there, which in a
 * shared dataset folder could have been planted. A cache that cannot be
 * written (read-only data, a full disk) is not kept, and the listing is
 * used all the same; *unkept says why (-EROFS, -ENOSPC, -EACCES), for the
 * loader to tell the user, and is 0 when the cache was used or written.
 */
int rf__dataset_open_cached(rf_dataset **out, const char *path, char **errp,
                            int *unkept)
{
    struct stat st;
    *unkept = 0;
    if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
        return rf_dataset_open(out, path, errp);
    char cache[RF__PATH_MAX + 32];
    rf__format(cache, sizeof(cache), "%s/%s", path, CACHE_NAME);
    if (open_from_cache(out, path, cache) == 0)
        return 0;
    struct rf__atomic_file named = {.fd = -1};
    char why[RF__DETAIL];
    int made = 0; /* why the file could not be made */
    int fd = rf__fd_off_stdio(open(path, O_TMPFILE | O_RDWR | O_CLOEXEC, 0644));
    if (fd < 0) {
        made = rf__atomic_file_open(&named, cache, RF__ATOMIC_FILE_NAMED, why,
                                    sizeof(why));
        fd = named.fd;
    }
    const int rc = rf_dataset_open(out, path, errp);
    if (rc < 0) { /* the open's error is said; the cache's would not be */
        if (named.fd >= 0)
            rf__atomic_file_discard(&named);
        else if (fd >= 0)
            close(fd);
        return rc;
    }
    int kept = fd >= 0 ? write_cache(*out, fd) : made < 0 ? made : -EIO;
    if (named.fd >= 0) {
        if (kept == 0)
            kept = rf__atomic_file_commit(&named, why, sizeof(why));
        else
            rf__atomic_file_discard(&named);
    } else if (fd >= 0) {
        if (kept == 0)
            kept = link_finished(fd, cache);
        close(fd);
    }
    *unkept = kept;
    return rc;
}
