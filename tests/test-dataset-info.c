/*
 * test-dataset-info.c - rf_dataset_get_info(): what a folder, a pack of
 * JPEG bytes, a pack of zstd frames with a dictionary, a mixed pack and
 * an empty pack say they are and hold (format, samples, classes, samples
 * of each kind, stored shape, dictionary size, listing digest), that the
 * shape it gives
 * configures a decoder that reads the pack, and its ABI promises: NULL
 * refused, the reserved tail written as zeros, the size fixed. Uses the
 * public API and libzstd only, as a tool would.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "empty-pack.h"
#include "harness.h"
#include "scratch.h"
#include "test.h"

/* The scratch folder every case writes below (scratch_setup() makes it,
 * in the parent; scratch_teardown() removes it, whatever the cases
 * left). */
static char scratch[512];

/* scratch/name, in test.h's rotating buffers. */
#define at(name) test_path(scratch, "%s", name)

SCRATCH_FOLDER_FIXTURE(scratch, "dataset-info")

/* ---- making datasets ----------------------------------------------------- */

static rf_dataset *open_or_die(const char *path)
{
    rf_dataset *ds = NULL;
    char *why = NULL;
    const int rc = rf_dataset_open(&ds, path, &why);
    if (rc < 0)
        fprintf(stderr, "open %s: %s\n", path, why ? why : "");
    free(why);
    CHECK_OK(rc);
    return ds;
}

static rf_pack_writer *create_or_die(const char *path, uint32_t height,
                                     uint32_t width, rf_layout layout,
                                     const void *dict, size_t dict_size)
{
    const uint32_t channels = height ? 3 : 0; /* a shape, or none */
    return test_create_pack(path, height, width, channels, layout, dict,
                            dict_size);
}

static void add_or_die(rf_pack_writer *w, rf_sample_kind kind, const void *data,
                       size_t size, int64_t label)
{
    const int rc = rf_pack_writer_add(w, kind, data, size, label, NULL);
    if (rc < 0)
        fprintf(stderr, "add: %s\n", rf_pack_writer_error(w));
    CHECK_OK(rc);
}

/* Synthetic JPEG `index` (small, 24x16), malloc'd. */
static void *jpeg_bytes(uint64_t index, size_t *size)
{
    void *jpeg = NULL;
    CHECK_OK(rf_synthetic_jpeg(7, index, 24, 16, &jpeg, size));
    return jpeg;
}

static void add_jpeg(rf_pack_writer *w, uint64_t index, int64_t label)
{
    size_t size = 0;
    void *jpeg = jpeg_bytes(index, &size);
    add_or_die(w, RF_SAMPLE_JPEG, jpeg, size, label);
    free(jpeg);
}

/* A zstd frame of height x width x 3 pixels (synthetic sample `index`),
 * compressed with dict when there is one. */
static void add_zstd(rf_pack_writer *w, uint32_t height, uint32_t width,
                     rf_layout layout, const void *dict, size_t dict_size,
                     uint64_t index, int64_t label)
{
    const size_t bytes = (size_t)height * width * 3;
    uint8_t *pixels = malloc(bytes);
    const size_t capacity = ZSTD_compressBound(bytes);
    void *frame = malloc(capacity);
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    CHECK(pixels && frame && cctx);
    rf_synthetic_fill(3, index, 10, height, width, 3, layout, pixels);
    const size_t n = ZSTD_compress_usingDict(cctx, frame, capacity, pixels,
                                             bytes, dict, dict_size, 3);
    CHECK(!ZSTD_isError(n));
    add_or_die(w, RF_SAMPLE_ZSTD, frame, n, label);
    ZSTD_freeCCtx(cctx);
    free(frame);
    free(pixels);
}

/* FOLDER/class_c/img_i.jpg, `classes` x `per_class` synthetic JPEGs. */
static void make_folder(const char *folder, int classes, int per_class)
{
    CHECK_EQ(mkdir(folder, 0755), 0);
    for (int c = 0; c < classes; c++) {
        char dir[1100], file[1200];
        snprintf(dir, sizeof(dir), "%s/class_%d", folder, c);
        CHECK_EQ(mkdir(dir, 0755), 0);
        for (int i = 0; i < per_class; i++) {
            size_t size = 0;
            void *jpeg = jpeg_bytes(
                (uint64_t)c * (uint64_t)per_class + (uint64_t)i, &size);
            snprintf(file, sizeof(file), "%s/img_%d.jpg", dir, i);
            FILE *f = fopen(file, "wb");
            CHECK(f != NULL);
            CHECK_EQ(fwrite(jpeg, 1, size, f), size);
            CHECK_EQ(fclose(f), 0);
            free(jpeg);
        }
    }
}

/* The info of the dataset at path, with `out` first filled with 0xa5 so
 * that a field left unwritten shows. */
static rf_dataset_info info_of(const char *path)
{
    rf_dataset_info info;
    memset(&info, 0xa5, sizeof(info));
    rf_dataset *ds = open_or_die(path);
    CHECK_OK(rf_dataset_get_info(ds, &info));
    CHECK_EQ(info.samples, rf_dataset_size(ds));
    CHECK_EQ(info.classes, rf_dataset_classes(ds));
    rf_dataset_close(ds);
    for (size_t i = 0; i < sizeof(info.reserved) / sizeof(info.reserved[0]);
         i++)
        CHECK_EQ(info.reserved[i], 0);
    CHECK_EQ(info.jpeg_samples + info.zstd_samples, info.samples);
    return info;
}

/* What the dataset is and holds: its format, samples, classes and the
 * samples of each kind. */
static void check_counts(const rf_dataset_info *info, rf_dataset_format format,
                         uint64_t samples, uint32_t classes,
                         uint64_t jpeg_samples, uint64_t zstd_samples)
{
    CHECK_EQ(info->format, format);
    CHECK_EQ(info->samples, samples);
    CHECK_EQ(info->classes, classes);
    CHECK_EQ(info->jpeg_samples, jpeg_samples);
    CHECK_EQ(info->zstd_samples, zstd_samples);
}

/* The stored sample shape. */
static void check_shape(const rf_dataset_info *info, uint32_t height,
                        uint32_t width, uint32_t channels, rf_layout layout)
{
    CHECK_EQ(info->height, height);
    CHECK_EQ(info->width, width);
    CHECK_EQ(info->channels, channels);
    CHECK_EQ(info->layout, layout);
}

/* A folder's, or a pack's that was written without a shape. */
static void check_no_shape(const rf_dataset_info *info)
{
    check_shape(info, 0, 0, 0, RF_LAYOUT_NHWC);
}

/* ---- the cases ------------------------------------------------------------
 */

TEST_CASE_LIMIT(test_folder, "folder", "a folder of JPEG files", 30)
{
    make_folder(at("folder"), 3, 4);
    const rf_dataset_info info = info_of(at("folder"));
    check_counts(&info, RF_DATASET_FOLDER, 12, 3, 12, 0);
    check_no_shape(&info);
    CHECK_EQ(info.dict_size, 0);
}

TEST_CASE_LIMIT(test_jpeg_pack, "pack", "a pack of JPEG bytes", 30)
{
    rf_pack_writer *w =
        create_or_die(at("jpeg.pack"), 0, 0, RF_LAYOUT_NHWC, NULL, 0);
    for (int i = 0; i < 5; i++)
        add_jpeg(w, (uint64_t)i, i % 2);
    test_finish_pack(w);
    const rf_dataset_info info = info_of(at("jpeg.pack"));
    check_counts(&info, RF_DATASET_PACK, 5, 2, 5, 0);
    check_no_shape(&info);
    CHECK_EQ(info.dict_size, 0);
}

/* A decoder configured from the info's shape reads every sample: what
 * ringfeed-pack --verify does with it. Sample i is a zstd frame of
 * synthetic sample i where i % zstd_every == 0 (add_zstd()): those come
 * back as the very pixels packed. */
static void check_decodes_with_shape(const char *path,
                                     const rf_dataset_info *info,
                                     uint64_t zstd_every)
{
    rf_config *cfg = rf_config_create();
    CHECK(cfg != NULL);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_HEIGHT, info->height));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_WIDTH, info->width));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_CHANNELS, info->channels));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_LAYOUT, info->layout));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_TRANSFORM, RF_TRANSFORM_NONE));
    const size_t bytes = (size_t)info->height * info->width * info->channels;
    uint8_t *pixels = malloc(bytes), *packed = malloc(bytes);
    CHECK(pixels != NULL && packed != NULL);
    rf_dataset *ds = open_or_die(path);
    uint64_t compared = 0;
    for (uint64_t i = 0; i < info->samples; i++) {
        const int rc = rf_dataset_decode(ds, cfg, 0, i, pixels);
        if (rc < 0)
            fprintf(stderr, "%s\n", rf_dataset_error(ds));
        CHECK_OK(rc);
        if (i % zstd_every == 0) {
            rf_synthetic_fill(3, i, 10, info->height, info->width, 3,
                              info->layout, packed);
            CHECK(memcmp(pixels, packed, bytes) == 0);
            compared++;
        }
    }
    CHECK_EQ(compared, info->zstd_samples);
    rf_dataset_close(ds);
    free(packed);
    free(pixels);
    rf_config_free(cfg);
}

TEST_CASE_LIMIT(test_zstd_pack_with_dictionary, "pack",
                "a raw zstd pack with a dictionary", 30)
{
    uint8_t dict[2048]; /* raw content: frames name no dictionary ID */
    for (size_t i = 0; i < sizeof(dict); i++)
        dict[i] = (uint8_t)(i * 37 + i / 64);
    rf_pack_writer *w = create_or_die(at("zstd.pack"), 12, 10, RF_LAYOUT_NCHW,
                                      dict, sizeof(dict));
    for (int i = 0; i < 6; i++)
        add_zstd(w, 12, 10, RF_LAYOUT_NCHW, dict, sizeof(dict), (uint64_t)i,
                 i % 3);
    test_finish_pack(w);
    const rf_dataset_info info = info_of(at("zstd.pack"));
    check_counts(&info, RF_DATASET_PACK, 6, 3, 0, 6);
    check_shape(&info, 12, 10, 3, RF_LAYOUT_NCHW);
    CHECK_EQ(info.dict_size, sizeof(dict));
    check_decodes_with_shape(at("zstd.pack"), &info, 1);
}

TEST_CASE_LIMIT(test_mixed_pack, "pack",
                "a mixed pack of JPEG and zstd samples", 30)
{
    rf_pack_writer *w =
        create_or_die(at("mixed.pack"), 16, 16, RF_LAYOUT_NHWC, NULL, 0);
    for (int i = 0; i < 7; i++) {
        if (i % 3 == 0)
            add_zstd(w, 16, 16, RF_LAYOUT_NHWC, NULL, 0, (uint64_t)i, i % 4);
        else
            add_jpeg(w, (uint64_t)i, i % 4);
    }
    test_finish_pack(w);
    const rf_dataset_info info = info_of(at("mixed.pack"));
    check_counts(&info, RF_DATASET_PACK, 7, 4, 4, 3);
    check_shape(&info, 16, 16, 3, RF_LAYOUT_NHWC);
    CHECK_EQ(info.dict_size, 0);
    check_decodes_with_shape(at("mixed.pack"), &info, 3);
}

TEST_CASE_LIMIT(test_empty_pack, "pack", "an empty pack", 30)
{
    write_empty_pack(at("empty.pack"), 0, 0, 0); /* the writer refuses */
    const rf_dataset_info info = info_of(at("empty.pack"));
    check_counts(&info, RF_DATASET_PACK, 0, 0, 0, 0);
    check_no_shape(&info);
}

/* The listing digest: never 0, the same for the same names and labels
 * wherever the folder lies, another when a file or class folder is
 * renamed or a file moves to another class with the count unchanged
 * (what a checkpoint could not tell from the sample count alone). */
TEST_CASE_LIMIT(test_folder_digest, "digest",
                "a folder's changes of names and labels", 30)
{
    make_folder(at("d1"), 3, 4);
    make_folder(at("d2"), 3, 4);
    const uint64_t d1 = info_of(at("d1")).listing_digest;
    CHECK(d1 != 0);
    CHECK_EQ(info_of(at("d2")).listing_digest, d1);
    const char *moves[][2] = {
        {"d1/class_0/img_0.jpg", "d1/class_0/img_9.jpg"},  /* a new name */
        {"d1/class_0/img_1.jpg", "d1/class_1/img_1b.jpg"}, /* a new class */
        {"d1/class_2", "d1/class_9"}, /* a class folder renamed */
    };
    for (size_t i = 0; i < sizeof(moves) / sizeof(moves[0]); i++) {
        char from[1100], to[1100];
        snprintf(from, sizeof(from), "%s", at(moves[i][0]));
        snprintf(to, sizeof(to), "%s", at(moves[i][1]));
        CHECK_EQ(rename(from, to), 0);
        const rf_dataset_info moved = info_of(at("d1"));
        CHECK_EQ(moved.samples, 12);
        CHECK(moved.listing_digest != d1);
        CHECK_EQ(rename(to, from), 0);
        CHECK_EQ(info_of(at("d1")).listing_digest, d1);
    }
}

/* A pack's digest follows its samples' names, labels and bytes. */
TEST_CASE_LIMIT(test_pack_digest, "digest",
                "a pack's changes of labels and bytes", 30)
{
    const char *names[] = {"same-1.pack", "same-2.pack", "label.pack",
                           "bytes.pack"};
    uint64_t digest[4];
    for (int p = 0; p < 4; p++) {
        rf_pack_writer *w =
            create_or_die(at(names[p]), 0, 0, RF_LAYOUT_NHWC, NULL, 0);
        for (int i = 0; i < 5; i++)
            add_jpeg(w, (uint64_t)(p == 3 && i == 4 ? 99 : i),
                     p == 2 && i == 4 ? 1 : i % 2);
        test_finish_pack(w);
        digest[p] = info_of(at(names[p])).listing_digest;
    }
    CHECK(digest[0] != 0);
    CHECK_EQ(digest[1], digest[0]);
    CHECK(digest[2] != digest[0]);
    CHECK(digest[3] != digest[0]);
}

/* NULL is refused and leaves out as it was; the size is the ABI's. */
TEST_CASE_LIMIT(test_null_and_size, "abi", "NULL refused, size fixed", 30)
{
    CHECK_EQ(sizeof(rf_dataset_info), 120);
    rf_dataset_info info;
    memset(&info, 0xa5, sizeof(info));
    CHECK_EQ(rf_dataset_get_info(NULL, &info), -EINVAL);
    CHECK_EQ(info.samples, UINT64_C(0xa5a5a5a5a5a5a5a5));
    rf_pack_writer *w =
        create_or_die(at("one.pack"), 0, 0, RF_LAYOUT_NHWC, NULL, 0);
    add_jpeg(w, 0, 0);
    test_finish_pack(w);
    rf_dataset *ds = open_or_die(at("one.pack"));
    CHECK_EQ(rf_dataset_get_info(ds, NULL), -EINVAL);
    rf_dataset_close(ds);
}

/* Each case writes what it reads in a few milliseconds: 30 s is ample. */

int main(int argc, char **argv)
{
    return TEST_MAIN_WITH(argc, argv, scratch_setup, scratch_teardown);
}
