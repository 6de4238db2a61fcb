/*
 * dataset-files.h - what the rf_dataset programs share (test-dataset,
 * test-index-cache, test-pack-format, test-pack-damage): files made in the
 * program's scratch folder, `base`, which its setup makes; a whole file
 * read into memory; and datasets opened, or refused with a reason that is
 * checked.
 */
#ifndef RF_TEST_DATASET_FILES_H
#define RF_TEST_DATASET_FILES_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/internal.h"
#include "scratch.h"
#include "test.h"

static char base[256]; /* the scratch folder of this run (setup) */

/* base/<formatted>, in test.h's rotating buffers. */
#define at(...) test_path(base, __VA_ARGS__)

static inline void make_dir(const char *path)
{
    if (mkdir(path, 0755) != 0) {
        fprintf(stderr, "mkdir %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

/* Writes "contents of <name>" into the file, so reads can be checked. */
static inline void make_file(const char *rel)
{
    char text[256];
    rf__format(text, sizeof(text), "contents of %s", rel);
    write_file(at("%s", rel), text, strlen(text));
}

static inline void make_link(const char *target, const char *rel)
{
    CHECK_EQ(symlink(target, at("%s", rel)), 0);
}

typedef int (*dataset_opener)(rf_dataset **, const char *, char **);

/* Opens path with `open` (named `what` in a failure) or fails the test. */
static inline rf_dataset *open_with_or_die(dataset_opener open,
                                           const char *what, const char *path)
{
    rf_dataset *ds = NULL;
    char *why = NULL;
    const int rc = open(&ds, path, &why);
    if (rc < 0)
        fprintf(stderr, "%s(%s): %s\n", what, path, why);
    CHECK_OK(rc);
    free(why);
    return ds;
}

static inline rf_dataset *open_or_die(const char *path)
{
    return open_with_or_die(rf_dataset_open, "rf_dataset_open", path);
}

/* Opens path expecting failure `code`, and a reason containing both
 * `needle` and the path. */
static inline void check_open_fails(const char *path, int code,
                                    const char *needle)
{
    rf_dataset *ds = NULL;
    char *why = NULL;
    const int rc = rf_dataset_open(&ds, path, &why);
    CHECK_EQ(rc, code);
    CHECK(ds == NULL);
    CHECK_CONTAINS(why, needle);
    CHECK_CONTAINS(why, path);
    printf("  refused as expected: %s\n", why);
    free(why);
}

/* The file's bytes, in malloc'd memory with one byte to spare. */
static inline uint8_t *read_whole(const char *path, size_t *size)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    CHECK(fd >= 0 && fstat(fd, &st) == 0);
    *size = (size_t)st.st_size;
    uint8_t *bytes = malloc(*size + 1);
    CHECK(bytes);
    CHECK_EQ(read(fd, bytes, *size), (long long)*size);
    close(fd);
    return bytes;
}

#endif /* RF_TEST_DATASET_FILES_H */
