/*
 * scratch.h - files for the tests that need some on disk: a scratch folder
 * of the test's own under $TMPDIR (made once, in a harness.h setup, and
 * removed whole in its teardown, whatever the cases left), files written
 * in one call, and a small ImageFolder tree of synthetic JPEGs with a
 * loader's config for it.
 */
#ifndef RF_TEST_SCRATCH_H
#define RF_TEST_SCRATCH_H

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

/* Makes $TMPDIR/rf-NAME-XXXXXX (or under /tmp) into `out`. */
static inline void scratch_make(char *out, size_t len, const char *name)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(out, len, "%s/rf-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
    CHECK(mkdtemp(out) != NULL);
}

/* For a program whose only fixture is its scratch folder: defines
 * scratch_setup(), which makes FOLDER (a char array) as
 * $TMPDIR/rf-NAME-XXXXXX, and scratch_teardown(), which removes it whole,
 * for TEST_MAIN_WITH(argc, argv, scratch_setup, scratch_teardown). */
#define SCRATCH_FOLDER_FIXTURE(folder, name)                                   \
    static void scratch_setup(void)                                            \
    {                                                                          \
        scratch_make(folder, sizeof(folder), name);                            \
    }                                                                          \
    static void scratch_teardown(void)                                         \
    {                                                                          \
        remove_tree(folder);                                                   \
    }

static inline void write_file(const char *path, const void *data, size_t size)
{
    const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    CHECK_EQ(write(fd, data, size), (long long)size);
    close(fd);
}

/* Copies a tree (cp -a): a case changes its own copy of a dataset. */
static inline void copy_tree(const char *from, const char *to)
{
    char cmd[2 * 4096 + 16]; /* two paths, quoted */
    snprintf(cmd, sizeof(cmd), "cp -a '%s' '%s'", from, to);
    CHECK_EQ(system(cmd), 0);
}

static inline int remove_entry_(const char *path, const struct stat *st,
                                int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* Removes a tree without following its links. */
static inline void remove_tree(const char *path)
{
    CHECK_EQ(nftw(path, remove_entry_, 64, FTW_DEPTH | FTW_PHYS), 0);
}

/* PATH: synthetic JPEG `index` of `seed` (rf_synthetic_jpeg()), width x
 * height. */
static inline void write_synthetic_jpeg(const char *path, uint64_t seed,
                                        uint64_t index, uint32_t width,
                                        uint32_t height)
{
    void *jpeg = NULL;
    size_t size = 0;
    CHECK_OK(rf_synthetic_jpeg(seed, index, width, height, &jpeg, &size));
    write_file(path, jpeg, size);
    free(jpeg);
}

/* FOLDER/class_c/img_i.jpg for `classes` x `per_class` small synthetic
 * JPEGs of varied shape (40 + 7i by 30 + 5c), whose pixels depend on the
 * seed. FOLDER exists. */
static inline void fill_jpeg_folder(const char *folder, uint64_t seed,
                                    int classes, int per_class)
{
    for (int c = 0; c < classes; c++) {
        char dir[512];
        snprintf(dir, sizeof(dir), "%s/class_%d", folder, c);
        CHECK_EQ(mkdir(dir, 0755), 0);
        for (int i = 0; i < per_class; i++) {
            char path[600];
            snprintf(path, sizeof(path), "%s/img_%d.jpg", dir, i);
            write_synthetic_jpeg(path, seed, (uint64_t)c * 100 + (uint64_t)i,
                                 40 + 7 * (uint32_t)i, 30 + 5 * (uint32_t)c);
        }
    }
}

/* A loader's config for such a folder: batches of 5 at 24 x 24, two
 * epochs, seed 3. */
static inline rf_config *jpeg_folder_config(const char *folder,
                                            int64_t producers,
                                            rf_transform transform)
{
    rf_config *cfg = rf_config_create();
    CHECK(cfg);
    CHECK_OK(rf_config_set_path(cfg, folder));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_PRODUCERS, producers));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_BATCH_SIZE, 5));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_HEIGHT, 24));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_WIDTH, 24));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_TRANSFORM, transform));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_EPOCHS, 2));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SEED, 3));
    return cfg;
}

#endif /* RF_TEST_SCRATCH_H */
