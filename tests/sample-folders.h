/*
 * sample-folders.h - what the real-sample programs share (test-samples,
 * test-sample-errors): the scratch folder of good JPEGs (CLASSES x
 * PER_CLASS) and its copy with the bad files added, made once by
 * samples_setup(); a config over the folder `root` points at; a loader
 * opened under the skip policy; a progressive JPEG written through
 * libjpeg.
 */
#ifndef RF_TEST_SAMPLE_FOLDERS_H
#define RF_TEST_SAMPLE_FOLDERS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <stdio.h> /* jpeglib.h needs FILE and size_t first */
#include <jpeglib.h>

#include "common/internal.h"
#include "harness.h"
#include "scratch.h"
#include "test.h"

#define CLASSES 3
#define PER_CLASS 8

/* The scratch folder; in it, the folder of good JPEGs every case starts
 * from, and a copy with bad files added (made once, by setup). A case
 * points `root` at the one it reads. */
static char base[256], root[300], bad_root[300];

enum { BAD_FILES = 5 };

static inline rf_config *folder_config(int64_t producers,
                                       rf_transform transform)
{
    return jpeg_folder_config(root, producers, transform);
}

/* Opens a loader with cfg under the skip policy (test_set_skip()'s limits),
 * then frees cfg. */
static inline rf_loader *open_skipping(rf_config *cfg, int64_t max_errors,
                                       int64_t max_ppm)
{
    test_set_skip(cfg, max_errors, max_ppm);
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    return l;
}

/* Adds to FOLDER the bad files every loader must survive; returns how
 * many. */
static inline int add_bad_files(const char *folder)
{
    char path[600];
    rf__format(path, sizeof(path), "%s/class_1/empty.jpg", folder);
    write_file(path, "", 0);
    rf__format(path, sizeof(path), "%s/class_1/noise.jpg", folder);
    write_file(path, "\x13\x37 random bytes, not an image", 29);
    rf__format(path, sizeof(path), "%s/class_2/png.jpg", folder);
    write_file(path, "\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16);
    void *jpeg = NULL;
    size_t size = 0;
    CHECK_OK(rf_synthetic_jpeg(1, 1, 64, 64, &jpeg, &size));
    rf__format(path, sizeof(path), "%s/class_2/truncated.jpg", folder);
    write_file(path, jpeg, size / 2);
    free(jpeg);
    /* Over the limit bad_folder_config() sets (10,000 pixels). */
    CHECK_OK(rf_synthetic_jpeg(1, 2, 200, 100, &jpeg, &size));
    rf__format(path, sizeof(path), "%s/class_0/huge.jpg", folder);
    write_file(path, jpeg, size);
    free(jpeg);
    return 5;
}

/* A progressive JPEG of side x side, 4:4:4, through libjpeg. */
static inline void write_progressive_jpeg(const char *path, uint32_t side)
{
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr); /* a failure exits the test */
    jpeg_create_compress(&ci);
    FILE *f = fopen(path, "wb");
    CHECK(f);
    jpeg_stdio_dest(&ci, f);
    ci.image_width = ci.image_height = side;
    ci.input_components = 3;
    ci.in_color_space = JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, 75, TRUE);
    for (int c = 0; c < 3; c++)
        ci.comp_info[c].h_samp_factor = ci.comp_info[c].v_samp_factor = 1;
    jpeg_simple_progression(&ci);
    jpeg_start_compress(&ci, TRUE);
    uint8_t *row = malloc((size_t)side * 3);
    CHECK(row);
    while (ci.next_scanline < side) {
        for (uint32_t x = 0; x < side * 3; x++)
            row[x] = (uint8_t)(x ^ ci.next_scanline);
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    CHECK_EQ(fclose(f), 0);
    free(row);
}

static inline void samples_setup(void)
{
    scratch_make(base, sizeof(base), "samples");
    rf__format(root, sizeof(root), "%s/good", base);
    rf__format(bad_root, sizeof(bad_root), "%s/bad", base);
    CHECK_EQ(mkdir(root, 0755), 0);
    fill_jpeg_folder(root, 9, CLASSES, PER_CLASS);
    copy_tree(root, bad_root);
    CHECK_EQ(add_bad_files(bad_root), BAD_FILES);
}

static inline void samples_teardown(void)
{
    remove_tree(base);
}

#endif /* RF_TEST_SAMPLE_FOLDERS_H */
