/*
 * atomic-file.h - a file that appears under its name only once it is
 * complete, and then in one step, replacing any file of that name.
 *
 * It is written as an unnamed file (O_TMPFILE) in the folder it is for, so
 * that a process killed while writing (SIGINT, SIGKILL, a crash) leaves
 * nothing behind. When finished it is linked in under a unique temporary
 * name and renamed over the final one: linkat() cannot replace a file,
 * rename() replaces it atomically. Where the file system has no O_TMPFILE
 * (NFS, for one) or /proc is not mounted, it is written under a unique
 * name, PATH.XXXXXXXX.tmp, created with O_EXCL | O_NOFOLLOW (never a file
 * or link that was already there) and removed when it is discarded.
 *
 * Two processes writing the same path never share a file: each one's is
 * whole, and the last to commit wins.
 */
#ifndef RF_ATOMIC_FILE_H
#define RF_ATOMIC_FILE_H

#include <stddef.h>

struct rf__atomic_file {
    int fd;     /* open for writing; -1 once committed or discarded */
    char *path; /* the name the file gets when committed */
    char *temp; /* its name while it is written; NULL while unnamed */
};

/* Skip O_TMPFILE and write under a unique name from the start: what
 * happens on file systems without O_TMPFILE, on request (for tests). */
#define RF__ATOMIC_FILE_NAMED 1u

/* Starts the file that will become `path`. Refuses at once, with -EISDIR
 * or -EEXIST, a path that names a folder or anything but a regular file,
 * and reports a folder that does not exist or cannot be written to now,
 * before any work is done for the file. Returns 0 or -errno with the
 * reason, naming path, in why. */
int rf__atomic_file_open(struct rf__atomic_file *f, const char *path,
                         unsigned flags, char *why, size_t why_len);

/* Flushes the file to disk, gives it its name (replacing any file there)
 * and flushes the folder; closes and frees it either way. Returns 0 or
 * -errno with the reason, naming path, in why (the file is then gone). */
int rf__atomic_file_commit(struct rf__atomic_file *f, char *why,
                           size_t why_len);

/* Abandons the file: nothing of it is left. Safe to call again, and after
 * a failed open or a commit (which leave fd at -1). */
void rf__atomic_file_discard(struct rf__atomic_file *f);

#endif /* RF_ATOMIC_FILE_H */
