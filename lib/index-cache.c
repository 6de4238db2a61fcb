/*
 * index-cache.c - RF_PARAM_INDEX_CACHE: a folder's listing kept in
 * FOLDER/.ringfeed-index, so that a restarted run does not list a million
 * files again. The cache file holds the listing (the folder index format
 * of lib/pack.h), then a trailer naming every folder the listing walked;
 * its mtime is set to the time the listing started, by the file system's
 * clock. It is used only while the class folders are the same and every
 * folder walked last changed (ctime: adding, removing or renaming an
 * entry changes it, and unlike mtime it cannot be set back) strictly
 * before that time; otherwise the folder is listed and the cache
 * rewritten. A cache that cannot be written (read-only data) is simply
 * not kept.
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

#include "dataset.h"
#include "internal.h"
#include "pack.h"

#define CACHE_NAME ".ringfeed-index"
/* The trailer: magic, u64 bytes of the folder list, u32 its CRC-32C,
 * u32 zero; then the list. */
#define TRAILER_MAGIC "RFDIRS01"
#define TRAILER_SIZE 24u

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

/* True when the classes are the same and no folder walked changed since
 * the listing started (`listed`). */
static bool cache_is_fresh(const char *folder, const char *list, size_t size,
                           const struct timespec *listed)
{
    if (size == 0 || list[size - 1] != '\0' ||
        !same_classes(folder, list, size))
        return false;
    for (size_t at = 0; at < size; at += strlen(list + at) + 1) {
        struct stat st;
        char path[RF__PATH_MAX + 256];
        rf__format(path, sizeof(path), "%s/%s", folder, list + at);
        if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode) ||
            !before(&st.st_ctim, listed))
            return false;
    }
    return true;
}

/* The listing part of a cache (`size` bytes mapped at `cache`), copied
 * into a memfd for rf__dataset_open_indexed(), which checks all of it;
 * -1 when the trailer is wrong or the folder changed since `listed`. */
static int fresh_listing_fd(const char *folder, const uint8_t *cache,
                            size_t size, const struct timespec *listed)
{
    struct rf__index_header h;
    char why[RF__DETAIL]; /* a refused cache is listed again */
    if (size < RF__INDEX_HEADER_SIZE + TRAILER_SIZE ||
        rf__index_header_decode(&h, cache, why, sizeof(why)) < 0 ||
        h.total_size < RF__INDEX_HEADER_SIZE ||
        h.total_size > size - TRAILER_SIZE)
        return -1;
    const size_t listing = (size_t)h.total_size;
    const uint8_t *trailer = cache + listing;
    const uint64_t list_size = rf__get_le64(trailer + 8);
    struct rf__crc32c crc;
    rf__crc32c_init(&crc);
    if (memcmp(trailer, TRAILER_MAGIC, 8) != 0 ||
        list_size != size - listing - TRAILER_SIZE ||
        rf__crc32c(&crc, 0, trailer + TRAILER_SIZE, list_size) !=
            rf__get_le32(trailer + 16) ||
        !cache_is_fresh(folder, (const char *)trailer + TRAILER_SIZE, list_size,
                        listed))
        return -1;
    const int fd = memfd_create("ringfeed-cache", MFD_CLOEXEC);
    if (fd >= 0 && rf__pwrite_all(fd, cache, listing, 0) == 0)
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

static int open_from_cache(rf_dataset **out, const char *folder,
                           const char *cache)
{
    struct stat st;
    const int fd = open(cache, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    void *map = MAP_FAILED;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (uint64_t)st.st_size <= SIZE_MAX)
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return -ESTALE;
    const int listing =
        fresh_listing_fd(folder, map, (size_t)st.st_size, &st.st_mtim);
    munmap(map, (size_t)st.st_size);
    if (listing < 0)
        return -ESTALE;
    char why[RF__DETAIL]; /* a refused cache is listed again */
    const int rc =
        rf__dataset_open_indexed(out, folder, -1, listing, why, sizeof(why));
    close(listing);
    return rc;
}

/* The cache's file, made before the folder is listed (see
 * write_cache()): unnamed (O_TMPFILE) where the file system allows, so
 * that a process killed while listing leaves nothing behind; else under
 * the name tmp (NFS, for one). */
static int open_unfinished(const char *folder, const char *tmp, bool *named)
{
    int fd = open(folder, O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
    *named = fd < 0;
    if (fd < 0)
        fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    return fd;
}

/* Gives the finished unnamed file the cache's name, where the old cache
 * was (linkat() cannot replace a file): a reader in between finds none
 * and lists the folder itself, and a writer that raced this one and won
 * keeps its own. */
static void link_finished(int fd, const char *cache)
{
    char self[64];
    rf__format(self, sizeof(self), "/proc/self/fd/%d", fd);
    if (unlink(cache) == 0 || errno == ENOENT)
        (void)linkat(AT_FDCWD, self, AT_FDCWD, cache, AT_SYMLINK_FOLLOW);
}

/* Best effort, and never seen half-written: named when finished. The file
 * is made before the folder is listed: its mtime, the listing's start by
 * the file system's clock, becomes the cache's. */
static void write_cache(const rf_dataset *ds, int fd, bool named,
                        const char *tmp, const char *cache)
{
    struct stat st;
    size_t list_size = 0;
    const char *list = rf__dataset_folders(ds, &list_size);
    char why[RF__DETAIL];
    bool ok = list && fstat(fd, &st) == 0 &&
              rf__dataset_index_write(ds, fd, why, sizeof(why)) == 0;
    if (ok) {
        struct rf__crc32c crc;
        uint8_t trailer[TRAILER_SIZE] = {0};
        const off_t end = lseek(fd, 0, SEEK_END);
        rf__crc32c_init(&crc);
        memcpy(trailer, TRAILER_MAGIC, 8);
        rf__put_le64(trailer + 8, list_size);
        rf__put_le32(trailer + 16, rf__crc32c(&crc, 0, list, list_size));
        ok = end > 0 &&
             rf__pwrite_all(fd, trailer, TRAILER_SIZE, (uint64_t)end) == 0 &&
             rf__pwrite_all(fd, list, list_size,
                            (uint64_t)end + TRAILER_SIZE) == 0;
    }
    if (ok) {
        const struct timespec times[2] = {st.st_mtim, st.st_mtim};
        ok = futimens(fd, times) == 0;
    }
    if (!named) {
        if (ok)
            link_finished(fd, cache);
        close(fd);
        return;
    }
    /* close() first: on NFS it is where a failed write shows */
    if (close(fd) != 0 || !ok || rename(tmp, cache) != 0)
        unlink(tmp);
}

int rf__dataset_open_cached(rf_dataset **out, const char *path, char **errp)
{
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
        return rf_dataset_open(out, path, errp);
    char cache[RF__PATH_MAX + 32], tmp[RF__PATH_MAX + 64];
    rf__format(cache, sizeof(cache), "%s/%s", path, CACHE_NAME);
    if (open_from_cache(out, path, cache) == 0)
        return 0;
    rf__format(tmp, sizeof(tmp), "%s.%d.tmp", cache, (int)getpid());
    bool named = false;
    const int fd = open_unfinished(path, tmp, &named);
    const int rc = rf_dataset_open(out, path, errp);
    if (rc == 0 && fd >= 0) {
        write_cache(*out, fd, named, tmp, cache);
    } else if (fd >= 0) {
        close(fd);
        if (named)
            unlink(tmp);
    }
    return rc;
}
