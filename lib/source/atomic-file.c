/*
 * atomic-file.c - files that get their name only once complete; see
 * atomic-file.h for what is guaranteed and why.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/fds.h"
#include "common/internal.h"
#include "source/atomic-file.h"

/* How many unique names are tried: each one is already taken only when
 * someone plants files on purpose. */
#define UNIQUE_NAME_TRIES 100

/* A path that names a folder, or something other than a file, would
 * only fail at the rename, after all the work: refused before. */
static int check_target(const char *path, char *why, size_t why_len)
{
    struct stat st;
    const size_t len = strlen(path);
    const bool exists = len > 0 && stat(path, &st) == 0;
    if (len == 0) {
        rf__format(why, why_len,
                   "the path is empty; give the name of the file to write");
        return -ENOENT;
    }
    if (path[len - 1] == '/' || (exists && S_ISDIR(st.st_mode))) {
        rf__format(why, why_len,
                   "%s is a folder; give the name of the file to write, "
                   "inside that folder or elsewhere",
                   path);
        return -EISDIR;
    }
    if (exists && !S_ISREG(st.st_mode)) {
        rf__format(why, why_len,
                   "%s exists and is not a regular file; choose another "
                   "name, or remove it",
                   path);
        return -EEXIST;
    }
    return 0;
}

/* PATH.XXXXXXXX.tmp, with 8 hex digits that differ between processes and
 * between calls. */
static void unique_name(const char *path, char *out, size_t len)
{
    static unsigned calls; /* writers may run in several threads */
    const unsigned call = __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    const uint64_t key =
        rf__mix64((uint64_t)getpid() << 32 | call,
                  (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec);
    rf__format(out, len, "%s.%08x.tmp", path, (unsigned)key);
}

/* Gives f->temp a unique name next to f->path that `make` can create
 * (it returns 0, or -errno: -EEXIST tries another name). On failure
 * f->temp is NULL again; returns 0 or -errno. */
static int claim_unique_name(struct rf__atomic_file *f,
                             int (*make)(struct rf__atomic_file *f))
{
    const size_t len = strlen(f->path) + sizeof(".XXXXXXXX.tmp");
    f->temp = malloc(len);
    if (!f->temp)
        return -ENOMEM;
    int rc = -EEXIST;
    for (int tries = 0; tries < UNIQUE_NAME_TRIES && rc == -EEXIST; tries++) {
        unique_name(f->path, f->temp, len);
        rc = make(f);
    }
    if (rc < 0) {
        free(f->temp);
        f->temp = NULL;
    }
    return rc;
}

/* O_EXCL never opens a file that is already there, O_NOFOLLOW never a
 * planted link. */
static int create_exclusive(struct rf__atomic_file *f)
{
    f->fd = rf__fd_off_stdio(open(
        f->temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    return f->fd >= 0 ? 0 : -errno;
}

/* What to do about a file that cannot be created for the cause err: a
 * full file system fails with ENOSPC when its inodes are all used, with
 * bytes to spare, and a read-only one would not let any folder in it be
 * written to. */
static const char *create_advice(int err)
{
    if (err == ENOSPC || err == EDQUOT)
        return "the file system has no room or no inodes left (df, df -i): "
               "free some, or write it on another file system";
    if (err == EROFS)
        return "the file system is mounted read-only: write it on another "
               "one";
    return "choose a folder that exists and that you can write to";
}

/* Creates a new file under a unique name next to path. */
static int open_named(struct rf__atomic_file *f, char *why, size_t why_len)
{
    const int rc = claim_unique_name(f, create_exclusive);
    if (rc == 0)
        return 0;
    const int err = -rc;
    rf__format(why, why_len, "%s: cannot create a file in its folder: %s; %s",
               f->path, strerror(err), create_advice(err));
    return -err;
}

/* An unnamed file in the folder of path, or -1 where the file system or
 * the kernel has none (or /proc, through which it gets its name, is not
 * mounted): the caller then writes under a name. */
static int open_unnamed(const char *path)
{
    char *copy = strdup(path);
    if (!copy || access("/proc/self/fd", X_OK) != 0) {
        free(copy);
        return -1;
    }
    const int fd = rf__fd_off_stdio(
        open(dirname(copy), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644));
    free(copy);
    return fd;
}

int rf__atomic_file_open(struct rf__atomic_file *f, const char *path,
                         unsigned flags, char *why, size_t why_len)
{
    *f = (struct rf__atomic_file){.fd = -1};
    int rc = check_target(path, why, why_len);
    if (rc < 0)
        return rc;
    f->path = strdup(path);
    if (!f->path) {
        rf__format(why, why_len, "%s: out of memory", path);
        return -ENOMEM;
    }
    if (!(flags & RF__ATOMIC_FILE_NAMED))
        f->fd = open_unnamed(path);
    /* Any failure of O_TMPFILE is tried again with a name: a folder that
     * is missing or read-only fails that too, with the real reason. */
    rc = f->fd >= 0 ? 0 : open_named(f, why, why_len);
    if (rc < 0)
        rf__atomic_file_discard(f);
    return rc;
}

/* Links the unnamed file in under f->temp. */
static int link_as_temp(struct rf__atomic_file *f)
{
    char self[64];
    rf__format(self, sizeof(self), "/proc/self/fd/%d", f->fd);
    return linkat(AT_FDCWD, self, AT_FDCWD, f->temp, AT_SYMLINK_FOLLOW) == 0
               ? 0
               : -errno;
}

/* Gives the unnamed file a unique temporary name in its folder. */
static int link_unnamed(struct rf__atomic_file *f)
{
    return claim_unique_name(f, link_as_temp);
}

/* The rename must be on disk before success is reported, and must never
 * point at blocks that did not reach it: the file is flushed before, its
 * folder after (best effort: some file systems refuse it on folders). */
static void sync_folder(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return;
    const int fd = rf__fd_off_stdio(
        open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(copy);
}

int rf__atomic_file_commit(struct rf__atomic_file *f, char *why, size_t why_len)
{
    const char *step = "flush it to disk";
    int rc = fsync(f->fd) < 0 ? -errno : 0;
    if (rc == 0 && !f->temp) {
        step = "give it a name in its folder";
        rc = link_unnamed(f);
    }
    if (rc == 0) {
        step = "close it"; /* on NFS, where a failed write shows */
        rc = close(f->fd) < 0 ? -errno : 0;
        f->fd = -1;
    }
    if (rc == 0) {
        step = "rename it into place";
        rc = rename(f->temp, f->path) < 0 ? -errno : 0;
    }
    if (rc < 0) {
        rf__format(why, why_len,
                   "%s: cannot %s: %s; free some space, or write it "
                   "elsewhere",
                   f->path, step, strerror(-rc));
        rf__atomic_file_discard(f);
        return rc;
    }
    free(f->temp);
    f->temp = NULL; /* renamed: nothing to remove any more */
    sync_folder(f->path);
    rf__atomic_file_discard(f);
    return 0;
}

void rf__atomic_file_discard(struct rf__atomic_file *f)
{
    if (f->fd >= 0)
        close(f->fd);
    if (f->temp)
        unlink(f->temp);
    free(f->temp);
    free(f->path);
    *f = (struct rf__atomic_file){.fd = -1};
}
