/*
 * pack-folder.h - what the pack writer's programs share (test-pack,
 * test-pack-accepted, test-pack-sizes): the run's scratch folder and, in
 * it, an empty folder of each case's own, its entries counted and cleared;
 * writers created at a shape, fed text samples (their bytes also their
 * names), and finished.
 */
#ifndef RF_TEST_PACK_FOLDER_H
#define RF_TEST_PACK_FOLDER_H

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/internal.h"
#include "scratch.h"
#include "test.h"

/* The scratch folder of this run (setup), and in it the folder of the
 * running case, which starts empty: own_folder(). */
static char scratch[256], base[300];
SCRATCH_FOLDER_FIXTURE(scratch, "pack")

/* base/<formatted>, in test.h's rotating buffers. */
#define at(...) test_path(base, __VA_ARGS__)

/* Every case starts in an empty folder of its own, so that what a failed
 * case left behind cannot fail the next one's counts. */
static inline void own_folder(void)
{
    rf__format(base, sizeof(base), "%s/case-XXXXXX", scratch);
    CHECK(mkdtemp(base) != NULL);
}

/* The first `max - 1` bytes of a file, as a string. */
static inline void read_text(const char *path, char *out, size_t max)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    const ssize_t got = read(fd, out, max - 1);
    CHECK(got >= 0);
    out[got] = '\0';
    close(fd);
}

/* How many entries the run's folder holds; their names, for messages,
 * in names ("a b c ", in readdir's order). */
static inline int folder_entries(char *names, size_t len)
{
    DIR *d = opendir(base);
    CHECK(d);
    int count = 0;
    size_t used = 0;
    names[0] = '\0';
    for (const struct dirent *e = readdir(d); e; e = readdir(d)) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        count++;
        used += (size_t)snprintf(names + used, used < len ? len - used : 0,
                                 "%s ", e->d_name);
    }
    closedir(d);
    return count;
}

/* Empties the run's folder (it holds files and links only). */
static inline void clear_folder(void)
{
    DIR *d = opendir(base);
    CHECK(d);
    for (const struct dirent *e = readdir(d); e; e = readdir(d))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            CHECK_EQ(unlink(at("%s", e->d_name)), 0);
    closedir(d);
}

static inline void check_folder_holds(int expected)
{
    char names[4096];
    const int count = folder_entries(names, sizeof(names));
    if (count != expected) {
        fprintf(stderr, "the folder holds %d entries (%s), expected %d\n",
                count, names, expected);
        exit(1);
    }
}

static inline rf_pack_writer *create_or_die(const char *path, uint32_t height,
                                            uint32_t width, uint32_t channels)
{
    return test_create_pack(path, height, width, channels, RF_LAYOUT_NHWC, NULL,
                            0);
}

static inline void add_text(rf_pack_writer *w, const char *text, int64_t label)
{
    const int rc =
        rf_pack_writer_add(w, RF_SAMPLE_JPEG, text, strlen(text), label, text);
    if (rc < 0)
        fprintf(stderr, "add: %s\n", rf_pack_writer_error(w));
    CHECK_OK(rc);
}

/* Writes and finishes a pack at path of one sample, `text`, label 0. */
static inline void write_text_pack(const char *path, const char *text)
{
    rf_pack_writer *w = create_or_die(path, 0, 0, 0);
    add_text(w, text, 0);
    test_finish_pack(w);
}

#endif /* RF_TEST_PACK_FOLDER_H */
