/*
 * index-cache.c - RF_PARAM_INDEX_CACHE: a folder's listing kept in
 * FOLDER/.ringfeed-index, so that a restarted run does not list a million
 * files again. The cache is used only while it is newer than the folder
 * and every class folder in it (adding or removing a file changes its
 * folder's mtime); otherwise the folder is listed and the cache rewritten.
 * A cache that cannot be written (read-only data) is simply not kept.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset.h"
#include "internal.h"
#include "pack.h"

#define CACHE_NAME ".ringfeed-index"

static bool newer(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec > b->tv_sec ||
           (a->tv_sec == b->tv_sec && a->tv_nsec >= b->tv_nsec);
}

/* True when no class folder (nor the folder) changed after the cache. */
static bool cache_is_fresh(const char *folder, const struct stat *cache)
{
    struct stat st;
    if (stat(folder, &st) < 0 || !newer(&cache->st_mtim, &st.st_mtim))
        return false;
    DIR *d = opendir(folder);
    if (!d)
        return false;
    bool fresh = true;
    const struct dirent *e;
    while (fresh && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[RF__PATH_MAX + 256];
        rf__format(path, sizeof(path), "%s/%s", folder, e->d_name);
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            fresh = newer(&cache->st_mtim, &st.st_mtim);
    }
    closedir(d);
    return fresh;
}

static int open_from_cache(rf_dataset **out, const char *folder,
                           const char *cache)
{
    struct stat st;
    const int fd = open(cache, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = -ESTALE;
    if (fstat(fd, &st) == 0 && cache_is_fresh(folder, &st)) {
        char why[RF__DETAIL]; /* a refused cache is listed again */
        rc = rf__dataset_open_indexed(out, folder, fd, why, sizeof(why));
    }
    close(fd);
    return rc;
}

/* Best effort: written beside the data through a temporary name, so a
 * reader never sees half a cache. */
static void write_cache(const rf_dataset *ds, const char *cache)
{
    char tmp[RF__PATH_MAX + 64];
    rf__format(tmp, sizeof(tmp), "%s.%d.tmp", cache, (int)getpid());
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    char why[RF__DETAIL];
    const bool ok = rf__dataset_index_write(ds, fd, why, sizeof(why)) == 0;
    if (close(fd) == 0 && ok && rename(tmp, cache) == 0)
        return;
    unlink(tmp);
}

int rf__dataset_open_cached(rf_dataset **out, const char *path, char **errp)
{
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
        return rf_dataset_open(out, path, errp);
    char cache[RF__PATH_MAX + 32];
    rf__format(cache, sizeof(cache), "%s/%s", path, CACHE_NAME);
    if (open_from_cache(out, path, cache) == 0)
        return 0;
    const int rc = rf_dataset_open(out, path, errp);
    if (rc == 0)
        write_cache(*out, cache);
    return rc;
}
