/*
 * test-samples.c - real samples through real producers: a folder of JPEG
 * files and a packed file of zstd frames. Every sample arrives once per
 * epoch with the bytes rf_dataset_decode() gives and its class label,
 * whatever the number of producers; the index cache is written and
 * trusted, a big file does not stay resident, DCT scaling switches. (Bad
 * files and the skip policy: test-sample-errors.c; the dataset changing
 * on disk during a run: test-change.c.)
 *
 * Setup makes the folder of good JPEGs once, and a copy with the bad
 * files (tests/sample-folders.h); each case copies what it changes.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <zstd.h>

#include "common/internal.h"
#include "consumer/failures.h"
#include "harness.h"
#include "proc.h"
#include "sample-folders.h"
#include "scratch.h"
#include "test.h"

#define OUT 24 /* output height and width: jpeg_folder_config's */

/* Runs to the end checking each sample against rf_dataset_decode();
 * returns a digest of everything delivered. */
static uint64_t run_and_check(const rf_config *cfg)
{
    rf_dataset *ds = NULL;
    CHECK_OK(rf_dataset_open(&ds, root, NULL));
    const uint64_t n = rf_dataset_size(ds);
    CHECK_EQ(n, CLASSES * PER_CLASS);
    rf_loader *l = test_open_loader(cfg);
    uint8_t *seen = calloc(2 * n, 1), expect[OUT * OUT * 3];
    uint64_t digest = 0;
    rf_batch b;
    int rc;
    while ((rc = rf_loader_next(l, &b)) > 0) {
        for (uint32_t i = 0; i < b.samples; i++) {
            const uint64_t index = b.indices[i];
            CHECK_EQ(seen[b.epoch * n + index]++, 0);
            CHECK_EQ(b.labels[i], (int64_t)(index / PER_CLASS));
            CHECK_OK(rf_dataset_decode(ds, cfg, b.epoch, index, expect));
            CHECK(memcmp((uint8_t *)b.data + i * b.sample_bytes, expect,
                         b.sample_bytes) == 0);
            digest = rf__mix64(digest, index);
        }
        for (size_t k = 0; k < b.bytes; k++)
            digest = rf__mix64(digest, ((uint8_t *)b.data)[k]);
        CHECK_OK(rf_loader_release(l, &b));
    }
    CHECK_EQ(rc, 0);
    for (uint64_t k = 0; k < 2 * n; k++)
        CHECK_EQ(seen[k], 1);
    free(seen);
    rf_loader_close(l);
    rf_dataset_close(ds);
    return digest;
}

/* One producer and three deliver the same samples, each once an epoch,
 * with the pixels rf_dataset_decode() gives. */
static void check_exactly_once_any_producers(rf_transform transform)
{
    rf_config *one = folder_config(1, transform);
    rf_config *three = folder_config(3, transform);
    CHECK_EQ(run_and_check(one), run_and_check(three));
    rf_config_free(one);
    rf_config_free(three);
}

TEST_CASE(test_folder_train_exactly_once, "folder",
          "train: each sample once, any producers")
{
    check_exactly_once_any_producers(RF_TRANSFORM_TRAIN);
}

TEST_CASE(test_folder_eval_exactly_once, "folder",
          "eval: each sample once, any producers")
{
    check_exactly_once_any_producers(RF_TRANSFORM_EVAL);
}

/* ---- zstd frames in a packed file ------------------------------------- */

static void add_frame(rf_pack_writer *w, uint64_t index, size_t bytes)
{
    uint8_t raw[8 * 8 * 3 + 16];
    rf_synthetic_fill(5, index, 4, 8, 8, 3, RF_LAYOUT_NHWC, raw);
    uint8_t frame[1024];
    const size_t size = ZSTD_compress(frame, sizeof(frame), raw, bytes, 3);
    CHECK(!ZSTD_isError(size));
    CHECK_OK(rf_pack_writer_add(w, RF_SAMPLE_ZSTD, frame, size,
                                (int64_t)index % 4, NULL));
}

TEST_CASE(test_zstd_pack, "pack", "zstd frames, one of a wrong size")
{
    char path[300];
    rf__format(path, sizeof(path), "%s-raw.pack", root);
    rf_pack_writer *w = NULL;
    CHECK_OK(rf_pack_writer_create(&w, path, 8, 8, 3, RF_LAYOUT_NHWC, NULL, 0,
                                   NULL));
    for (uint64_t i = 0; i < 20; i++)
        add_frame(w, i, i == 13 ? 100 : 8 * 8 * 3); /* 13: wrong size */
    CHECK_OK(rf_pack_writer_finish(w, NULL));

    rf_config *cfg = TEST_CONFIG({RF_PARAM_HEIGHT, 8}, {RF_PARAM_WIDTH, 8},
                                 {RF_PARAM_TRANSFORM, RF_TRANSFORM_NONE},
                                 {RF_PARAM_BATCH_SIZE, 3});
    CHECK_OK(rf_config_set_path(cfg, path));
    test_set_skip(cfg, 0, 100000);
    rf_loader *l = test_open_loader(cfg);
    rf_batch b;
    uint8_t expect[8 * 8 * 3];
    uint64_t samples = 0;
    while (rf_loader_next(l, &b) > 0) {
        for (uint32_t i = 0; i < b.samples; i++) {
            rf_synthetic_fill(5, b.indices[i], 4, 8, 8, 3, RF_LAYOUT_NHWC,
                              expect);
            CHECK(memcmp((uint8_t *)b.data + (size_t)i * 192, expect, 192) ==
                  0);
            CHECK_EQ(b.labels[i], (int64_t)b.indices[i] % 4);
        }
        samples += b.samples;
        CHECK_OK(rf_loader_release(l, &b));
    }
    CHECK_EQ(samples, 19);
    rf_sample_error e;
    CHECK_EQ(rf_loader_sample_errors(l, &e, 1), 1);
    CHECK_EQ(e.index, 13);
    CHECK_CONTAINS(e.message, "declares 100 bytes");
    rf_loader_close(l);

    /* The wrong shape is refused at open, not per sample, naming every
     * parameter to set (each reads as a keyword in Python). */
    CHECK_OK(rf_config_set(cfg, RF_PARAM_HEIGHT, 16));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_LAYOUT, RF_LAYOUT_NCHW));
    char *err = test_open_refused(cfg, -EINVAL);
    char named[320]; /* the file named, as the other messages do */
    rf__format(named, sizeof(named), "the packed file '%s' holds", path);
    CHECK_CONTAINS(err, named);
    CHECK_CONTAINS(err, "' holds 8x8x3 nhwc samples but the loader is "
                        "configured for 16x8x3 nchw; set RF_PARAM_HEIGHT to "
                        "8, RF_PARAM_WIDTH to 8, RF_PARAM_CHANNELS to 3 and "
                        "RF_PARAM_LAYOUT to RF_LAYOUT_NHWC to match");
    free(err);
    rf_config_free(cfg);
}

/* Opens a loader over the pack with this transform, takes one batch
 * (whose pixels are the stored ones, whatever the transform) and returns
 * the messages it sent. */
static struct test_messages open_raw_pack(const char *path,
                                          rf_transform transform)
{
    struct test_messages m = {0};
    rf_config *cfg =
        TEST_CONFIG({RF_PARAM_HEIGHT, 8}, {RF_PARAM_WIDTH, 8},
                    {RF_PARAM_TRANSFORM, transform}, {RF_PARAM_BATCH_SIZE, 3},
                    {RF_PARAM_SHUFFLE, 0});
    CHECK_OK(rf_config_set_path(cfg, path));
    CHECK_OK(rf_config_set_message_handler(cfg, test_collect_message, &m));
    rf_loader *l = test_open_loader(cfg);
    rf_batch b;
    CHECK_EQ(rf_loader_next(l, &b), 1);
    uint8_t expect[8 * 8 * 3];
    for (uint32_t i = 0; i < b.samples; i++) {
        rf_synthetic_fill(5, b.indices[i], 4, 8, 8, 3, RF_LAYOUT_NHWC, expect);
        CHECK(memcmp((uint8_t *)b.data + (size_t)i * 192, expect, 192) == 0);
    }
    CHECK_OK(rf_loader_release(l, &b));
    rf_loader_close(l);
    rf_config_free(cfg);
    return m;
}

/* A pack's zstd samples are delivered as stored: a transform other than
 * none (the default is train) does nothing to them, which used to go
 * unsaid (two epochs the same bytes). Open says it once, through the
 * message handler, naming the way to silence it; with none, nothing. */
TEST_CASE(test_zstd_pack_transform_said, "pack",
          "zstd samples under a transform: said once, at open")
{
    char path[300];
    rf__format(path, sizeof(path), "%s-said.pack", root);
    rf_pack_writer *w = NULL;
    CHECK_OK(rf_pack_writer_create(&w, path, 8, 8, 3, RF_LAYOUT_NHWC, NULL, 0,
                                   NULL));
    for (uint64_t i = 0; i < 6; i++)
        add_frame(w, i, (size_t)8 * 8 * 3);
    CHECK_OK(rf_pack_writer_finish(w, NULL));
    const rf_transform said[] = {RF_TRANSFORM_TRAIN, RF_TRANSFORM_EVAL};
    for (size_t i = 0; i < sizeof(said) / sizeof(said[0]); i++) {
        const struct test_messages m = open_raw_pack(path, said[i]);
        CHECK_EQ(m.count, 1);
        CHECK_CONTAINS(m.last, "all 6 samples of '");
        CHECK_CONTAINS(m.last, path);
        CHECK_CONTAINS(m.last, "are raw pixels (zstd): they are delivered as "
                               "stored, with no crop, resize or flip");
        CHECK_CONTAINS(m.last, "RF_PARAM_FLIP");
        CHECK_CONTAINS(m.last, "set RF_PARAM_TRANSFORM to RF_TRANSFORM_NONE "
                               "to say so and silence this message");
    }
    CHECK_EQ(open_raw_pack(path, RF_TRANSFORM_NONE).count, 0);
}

static uint64_t samples_seen_by_loader(void)
{
    rf_config *cfg = folder_config(1, RF_TRANSFORM_EVAL);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_INDEX_CACHE, 1));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_EPOCHS, 1));
    rf_loader *l = open_skipping(cfg, 0, 1000000);
    uint64_t samples = 0;
    CHECK_EQ(test_drain(l, &samples, &samples), 0);
    rf_loader_close(l);
    return samples;
}

TEST_CASE(test_index_cache, "folder",
          "index cache written, then trusted until stale")
{
    char copy[400], cache[300];
    rf__format(copy, sizeof(copy), "%s-cache", root);
    copy_tree(root, copy); /* this case adds a file */
    memcpy(root, copy, sizeof(root));
    rf__format(cache, sizeof(cache), "%s/.ringfeed-index", root);
    const uint64_t before = samples_seen_by_loader();
    CHECK_EQ(access(cache, R_OK), 0); /* written on the first open */
    CHECK_EQ(samples_seen_by_loader(), before);
    /* A new file changes its class folder: the cache is listed again. */
    sleep(1); /* mtimes of the same second could tie */
    char path[300];
    rf__format(path, sizeof(path), "%s/class_0/new.jpg", root);
    write_synthetic_jpeg(path, 2, 7, 50, 40);
    CHECK_EQ(samples_seen_by_loader(), before + 1);
    /* A damaged cache is listed again, never trusted. */
    write_file(cache, "not an index", 12);
    CHECK_EQ(samples_seen_by_loader(), before + 1);
}

/* Resident kB of process pid (VmRSS), or -1. */
static long resident_kb(int pid)
{
    char path[64], line[256];
    rf__format(path, sizeof(path), "/proc/%d/status", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    long kb = -1;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    fclose(f);
    return kb;
}

/* One file with 64 MiB of zeros after its end marker (it decodes fine)
 * must not keep 64 MiB resident in its producer for the rest of the run:
 * the read buffer shrinks back at the next ordinary file. */
TEST_CASE(test_big_file_does_not_pin_memory, "folder",
          "a 64 MiB file does not stay resident")
{
    char copy[300], big[400];
    rf__format(copy, sizeof(copy), "%s-big", root);
    rf__format(big, sizeof(big), "%s/class_0/img_0.jpg", copy);
    copy_tree(root, copy);
    const int fd = open(big, O_WRONLY | O_APPEND | O_CLOEXEC);
    CHECK(fd >= 0);
    static uint8_t zeros[1 << 20];
    for (int k = 0; k < 64; k++)
        CHECK_EQ(write(fd, zeros, sizeof(zeros)), (long long)sizeof(zeros));
    close(fd);
    rf_config *cfg = folder_config(1, RF_TRANSFORM_EVAL);
    CHECK_OK(rf_config_set_path(cfg, copy));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SHUFFLE, 0));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_EPOCHS, 1));
    rf_loader *l = test_open_loader(cfg);
    uint64_t samples = 0;
    CHECK_EQ(test_drain(l, &samples, NULL), 0);
    CHECK_EQ(samples, CLASSES * PER_CLASS);
    int pid = 0;
    CHECK_EQ(list_children(&pid, 1), 1);
    const long kb = resident_kb(pid);
    printf("a 64 MiB file read first: its producer keeps %ld kB resident\n",
           kb);
#ifdef __SANITIZE_ADDRESS__
    /* ASan's allocator keeps freed memory in quarantine, resident: the
     * figure says nothing about the buffer there. */
    CHECK(kb > 0);
#else
    CHECK(kb > 0 && kb < 32L * 1024);
#endif
    rf_loader_close(l);
    rf_config_free(cfg);
    remove_tree(copy);
}

/* RF_PARAM_DCT_SCALING reaches the producers: at 8 x 8 the crops of
 * these 40-89 pixel images are decoded at a DCT scale below 8/8 unless it
 * is off. Each run matches rf_dataset_decode() with its own setting, and
 * the two runs differ. */
TEST_CASE(test_dct_scaling_switch, "folder", "DCT scaling on and off")
{
    rf_config *cfg = folder_config(2, RF_TRANSFORM_EVAL);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_HEIGHT, 8));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_WIDTH, 8));
    const uint64_t scaled = run_and_check(cfg);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_DCT_SCALING, 0));
    const uint64_t full = run_and_check(cfg);
    CHECK(scaled != full);
    rf_config_free(cfg);
    printf("DCT scaling on and off: each run as rf_dataset_decode() says, "
           "and the two differ\n");
}

int main(int argc, char **argv)
{
    return TEST_MAIN_WITH(argc, argv, samples_setup, samples_teardown);
}
