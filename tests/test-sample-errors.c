/*
 * test-sample-errors.c - bad samples through real producers. Bad files
 * (empty, truncated, random bytes, a PNG named .jpg, an image over the
 * pixel limit) fail the batch with an error naming the sample, the file
 * and the reason, or are left out and listed under the skip policy,
 * until a limit is crossed; also a file removed after open, the decode
 * memory limit, and reasons kept whole beside long paths. (Good samples:
 * test-samples.c.)
 *
 * Setup makes the folder of good JPEGs once, and a copy with the bad
 * files (tests/sample-folders.h); each case copies what it changes.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/internal.h"
#include "consumer/failures.h"
#include "harness.h"
#include "proc.h"
#include "sample-folders.h"
#include "scratch.h"
#include "test.h"

/* The case reads the folder with bad files. */
static void use_bad_folder(void)
{
    memcpy(root, bad_root, sizeof(root));
}
/* A config over the folder with bad files (use_bad_folder()), with the
 * pixel limit of 10,000 that makes its huge.jpg a bad file too. */
static rf_config *bad_folder_config(int64_t producers, rf_transform transform)
{
    use_bad_folder();
    rf_config *cfg = folder_config(producers, transform);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_MAX_PIXELS, 10000));
    return cfg;
}

TEST_CASE(test_bad_file_fails_with_its_name, "bad",
          "a bad file fails the run with its path")
{
    rf_config *cfg = bad_folder_config(2, RF_TRANSFORM_EVAL);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SHUFFLE, 0));
    rf_loader *l = test_open_loader(cfg);
    CHECK_EQ(test_drain(l, NULL, NULL), RF_E_CORRUPT_SAMPLE);
    rf_batch b;
    /* Unshuffled, the first bad sample in order is class_0/huge.jpg,
     * named by its whole path. */
    char whole[400];
    rf__format(whole, sizeof(whole), "(%s/class_0/huge.jpg)", root);
    CHECK_CONTAINS(rf_loader_error(l), whole);
    CHECK_CONTAINS(rf_loader_error(l), "sample ");
    CHECK_CONTAINS(rf_loader_error(l), "RF_PARAM_MAX_PIXELS");
    CHECK_CONTAINS(rf_loader_error(l), "RF_ON_ERROR_SKIP");
    CHECK_EQ(rf_loader_next(l, &b), RF_E_CORRUPT_SAMPLE);
    rf_loader_close(l);
    rf_config_free(cfg);
}

/* Messages that say a sample was left out, each kept whole. */
struct skip_reports {
    int count;
    char text[16][600];
};

static void collect_skip_report(void *user, const char *text)
{
    struct skip_reports *r = user;
    if (strncmp(text, "left out (", 10) == 0 && r->count < 16)
        rf__format(r->text[r->count++], sizeof(r->text[0]), "%s", text);
}

TEST_CASE(test_bad_files_skipped_and_listed, "bad",
          "skipped, said and listed once each")
{
    const int bad = BAD_FILES;
    rf_config *cfg = bad_folder_config(2, RF_TRANSFORM_TRAIN);
    struct skip_reports said = {0};
    CHECK_OK(rf_config_set_message_handler(cfg, collect_skip_report, &said));
    rf_loader *l = open_skipping(cfg, 0, 500000);
    uint64_t samples = 0, skipped = 0;
    CHECK_EQ(test_drain(l, &samples, &skipped), 0);
    CHECK_EQ(samples, 2 * CLASSES * PER_CLASS);
    CHECK_EQ(skipped, 2 * (uint64_t)bad);
    rf_sample_error errors[16];
    CHECK_EQ(rf_loader_sample_errors(l, errors, 16), (uint64_t)bad);
    const char *names[] = {"empty.jpg", "noise.jpg", "png.jpg", "truncated.jpg",
                           "huge.jpg"};
    for (int k = 0; k < bad; k++) {
        int found = 0;
        for (int e = 0; e < bad; e++)
            found += strstr(errors[e].message, names[k]) != NULL;
        CHECK_EQ(found, 1); /* listed once, though it failed in each epoch */
        found = 0;
        for (int e = 0; e < said.count; e++)
            found += strstr(said.text[e], names[k]) != NULL;
        CHECK_EQ(found, 1); /* said once, the first time (it was not) */
    }
    CHECK_EQ(said.count, bad);
    rf_stats st;
    CHECK_OK(rf_loader_stats(l, &st));
    CHECK_EQ(st.failed_samples, 2 * (uint64_t)bad);
    rf_loader_close(l);
}

/* A folder with many bad files: the first ten left out are said, the
 * tenth saying that the rest are counted and listed, not said. */
TEST_CASE(test_many_skips_said_up_to_ten, "bad",
          "the first ten samples left out are said, not more")
{
    char folder[400], file[500];
    rf__format(folder, sizeof(folder), "%s-many-bad", root);
    copy_tree(root, folder);
    for (int k = 0; k < 14; k++) {
        rf__format(file, sizeof(file), "%s/class_0/bad%02d.jpg", folder, k);
        write_file(file, "not a picture", 13);
    }
    rf_config *cfg = jpeg_folder_config(folder, 1, RF_TRANSFORM_EVAL);
    struct skip_reports said = {0};
    CHECK_OK(rf_config_set_message_handler(cfg, collect_skip_report, &said));
    rf_loader *l = open_skipping(cfg, 0, 1000000);
    uint64_t samples = 0, skipped = 0;
    CHECK_EQ(test_drain(l, &samples, &skipped), 0);
    CHECK_EQ(skipped, 2 * 14);
    CHECK_EQ(said.count, 10);
    CHECK(strstr(said.text[8], "not said") == NULL);
    CHECK_CONTAINS(said.text[9], "; the samples left out after this one are "
                                 "counted (rf_stats.failed_samples) and "
                                 "listed (rf_loader_sample_errors()), not "
                                 "said");
    rf_stats st;
    CHECK_OK(rf_loader_stats(l, &st));
    CHECK_EQ(st.failed_samples, 2 * 14);
    rf_loader_close(l);
    remove_tree(folder);
}

/* All five bad files in one unshuffled batch: the slot keeps four
 * reasons, yet every failure is listed under its own index and file (the
 * fifth saying that its reason was not kept), never under another
 * sample's. */
TEST_CASE(test_many_failures_in_one_batch, "bad",
          "five failures in one batch, each under its index")
{
    const int bad = BAD_FILES;
    rf_config *cfg = bad_folder_config(1, RF_TRANSFORM_EVAL);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SHUFFLE, 0));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_BATCH_SIZE, 64));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_EPOCHS, 1));
    rf_loader *l = open_skipping(cfg, 0, 500000);
    uint64_t samples = 0, skipped = 0;
    CHECK_EQ(test_drain(l, &samples, &skipped), 0);
    CHECK_EQ(skipped, (uint64_t)bad);
    rf_dataset *ds = NULL;
    CHECK_OK(rf_dataset_open(&ds, root, NULL));
    rf_sample_error errors[8];
    CHECK_EQ(rf_loader_sample_errors(l, errors, 8), (uint64_t)bad);
    int not_kept = 0;
    for (int e = 0; e < bad; e++) {
        rf_sample_info info;
        CHECK_OK(rf_dataset_read(ds, errors[e].index, &info));
        CHECK(strstr(info.name, "img_") == NULL); /* a bad file's index */
        for (int k = 0; k < e; k++)
            CHECK(errors[k].index != errors[e].index);
        /* and says how to get the reason, in C's terms */
        if (strstr(errors[e].message, "its reason was not kept")) {
            CHECK_CONTAINS(errors[e].message,
                           "failed); rf_dataset_decode() of it says why");
            not_kept++;
        }
        /* named even then (it was "sample 28: its reason was not kept") */
        CHECK_CONTAINS(errors[e].message, info.name);
    }
    CHECK_EQ(not_kept, bad - 4);
    rf_dataset_close(ds);
    rf_loader_close(l);
}

TEST_CASE(test_error_limit_ends_the_run, "bad", "error limit ends the run")
{
    rf_config *cfg = bad_folder_config(2, RF_TRANSFORM_EVAL);
    rf_loader *l = open_skipping(cfg, 2, 1000000);
    CHECK_EQ(test_drain(l, NULL, NULL), RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(rf_loader_error(l), "samples have failed, more than "
                                       "RF_PARAM_MAX_ERRORS 2 allows: raise "
                                       "it");
    rf_loader_close(l);
}

/* The epoch's limit is a share (RF_PARAM_MAX_ERROR_PPM) turned into a
 * count of the epoch's samples, rounded down: the message gives both,
 * so that the count is not read as the parameter's value. 1 bad file of
 * 2 at 400000 ppm: 0 failures allowed. Over 2 ranks the count is of the
 * rank's share, and said so (it said "this epoch's"); a share of that one
 * bad file is an epoch with nothing to deliver, said so. */
TEST_CASE(test_epoch_limit_says_share_and_count, "bad",
          "the epoch's limit says its share and its count")
{
    char folder[400], file[450];
    rf__format(folder, sizeof(folder), "%s/two", base);
    CHECK_EQ(mkdir(folder, 0755), 0);
    rf__format(file, sizeof(file), "%s/c", folder);
    CHECK_EQ(mkdir(file, 0755), 0);
    void *jpeg = NULL;
    size_t size = 0;
    CHECK_OK(rf_synthetic_jpeg(9, 1, 64, 48, &jpeg, &size));
    rf__format(file, sizeof(file), "%s/c/a.jpg", folder);
    write_file(file, jpeg, size);
    rf__format(file, sizeof(file), "%s/c/b.jpg", folder);
    write_file(file, jpeg, size / 2); /* cut short */
    free(jpeg);
    rf_config *cfg = jpeg_folder_config(folder, 1, RF_TRANSFORM_EVAL);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_BATCH_SIZE, 1));
    rf_loader *l = open_skipping(cfg, 0, 400000);
    CHECK_EQ(test_drain(l, NULL, NULL), RF_E_CORRUPT_SAMPLE);
    const char *msg = rf_loader_error(l);
    printf("  %s\n", msg);
    CHECK_CONTAINS(msg, "1 sample of epoch 0 has failed, more than "
                        "RF_PARAM_MAX_ERROR_PPM 400000 allows (none among "
                        "this epoch's 2 samples): raise it to 500000 for "
                        "one failure");
    CHECK_CONTAINS(msg, "b.jpg");
    rf_loader_close(l);
    cfg = jpeg_folder_config(folder, 1, RF_TRANSFORM_EVAL);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_BATCH_SIZE, 1));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SHUFFLE, 0));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_RANK, 1)); /* b.jpg's */
    CHECK_OK(rf_config_set(cfg, RF_PARAM_WORLD_SIZE, 2));
    l = open_skipping(cfg, 0, 400000);
    CHECK_EQ(test_drain(l, NULL, NULL), RF_E_CORRUPT_SAMPLE);
    msg = rf_loader_error(l);
    printf("  %s\n", msg);
    /* the rank's one sample failed: no share to raise ("raise it to
     * 1000000", which would end the run all the same) */
    CHECK_CONTAINS(msg, "the only sample of epoch 0 (this rank's share) "
                        "failed, so the epoch has nothing to deliver");
    rf_loader_close(l);
    /* two more good files: rank 1 has b.jpg and d.jpg */
    CHECK_OK(rf_synthetic_jpeg(9, 1, 64, 48, &jpeg, &size));
    rf__format(file, sizeof(file), "%s/c/c.jpg", folder);
    write_file(file, jpeg, size);
    rf__format(file, sizeof(file), "%s/c/d.jpg", folder);
    write_file(file, jpeg, size);
    free(jpeg);
    cfg = jpeg_folder_config(folder, 1, RF_TRANSFORM_EVAL);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_BATCH_SIZE, 1));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SHUFFLE, 0));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_RANK, 1));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_WORLD_SIZE, 2));
    l = open_skipping(cfg, 0, 400000);
    CHECK_EQ(test_drain(l, NULL, NULL), RF_E_CORRUPT_SAMPLE);
    msg = rf_loader_error(l);
    printf("  %s\n", msg);
    CHECK_CONTAINS(msg, "RF_PARAM_MAX_ERROR_PPM 400000 allows (none among "
                        "this rank's 2 samples of the epoch): raise it to "
                        "500000 for one failure");
    CHECK_CONTAINS(msg, "b.jpg");
    rf_loader_close(l);
    remove_tree(folder);
}

/* A folder whose every file is bad, under the skip policy with
 * RF_PARAM_MAX_ERROR_PPM 1000000 (any share may fail): the batches come
 * out empty, and the epoch's last failure ends the run, naming the epoch,
 * its count and a file; the next epoch is not begun. (It handed out
 * empty batches for as many epochs as were asked, and rf_loader_next()
 * then returned 0 as if the run had gone well.) */
TEST_CASE(test_every_sample_failing_ends_the_run, "bad",
          "an epoch whose every sample failed ends the run")
{
    char folder[400], file[450];
    rf__format(folder, sizeof(folder), "%s/all-bad", base);
    CHECK_EQ(mkdir(folder, 0755), 0);
    rf__format(file, sizeof(file), "%s/c", folder);
    CHECK_EQ(mkdir(file, 0755), 0);
    for (int k = 0; k < 7; k++) {
        rf__format(file, sizeof(file), "%s/c/bad%d.jpg", folder, k);
        write_file(file, "not a picture", 13);
    }
    rf_config *cfg = jpeg_folder_config(folder, 1, RF_TRANSFORM_EVAL);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_BATCH_SIZE, 2));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_EPOCHS, 3));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_QUIET, 1));
    rf_loader *l = open_skipping(cfg, 0, 1000000);
    rf_batch b;
    int rc, batches = 0;
    while ((rc = rf_loader_next(l, &b)) > 0) {
        CHECK_EQ(b.samples, 0);
        CHECK_EQ(b.epoch, 0);
        batches++;
        CHECK_OK(rf_loader_release(l, &b));
    }
    CHECK_EQ(rc, RF_E_CORRUPT_SAMPLE);
    CHECK_EQ(batches, 3); /* of 4: the fourth's failure ends it */
    const char *msg = rf_loader_error(l);
    printf("  %s\n", msg);
    CHECK_CONTAINS(msg, "all 7 samples of epoch 0 failed, so the epoch has "
                        "nothing to deliver: under RF_PARAM_ON_ERROR "
                        "RF_ON_ERROR_SKIP that ends the run, whatever "
                        "RF_PARAM_MAX_ERROR_PPM 1000000 allows");
    CHECK_CONTAINS(msg, "/c/bad");
    CHECK_EQ(rf_loader_next(l, &b), RF_E_CORRUPT_SAMPLE);
    rf_stats st;
    CHECK_OK(rf_loader_stats(l, &st));
    CHECK_EQ(st.failed_samples, 7);
    rf_loader_close(l);
    remove_tree(folder);
}

/* The count of an epoch with nothing to deliver: the samples its batches
 * hold (those of a short last batch dropped are never read), over one
 * epoch only; an epoch with one sample delivered goes on. */
TEST_CASE(test_empty_epoch_counts_the_batches_samples, "bad",
          "an empty epoch is counted on the samples its batches hold")
{
    const int64_t params[RF__PARAMS] = {[RF_PARAM_MAX_ERROR_PPM] = 1000000};
    struct rf__failures f;
    char why[512];
    /* 10 samples, batches of 4 with the last dropped: 8 handed out */
    rf__failures_init(&f, params, 10, 8);
    for (uint64_t index = 0; index < 7; index++)
        CHECK_EQ(
            rf__failures_add(&f, 0, index, "sample: bad", why, sizeof(why)), 1);
    /* 7 in epoch 1 too: across epochs they do not add up */
    for (uint64_t index = 0; index < 7; index++)
        CHECK_EQ(
            rf__failures_add(&f, 1, index, "sample: bad", why, sizeof(why)), 0);
    CHECK_EQ(
        rf__failures_add(&f, 0, 7, "sample 7 (x.jpg): bad", why, sizeof(why)),
        RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(why, "all 8 samples of epoch 0 failed");
    CHECK_CONTAINS(why, "the last: sample 7 (x.jpg): bad");
    rf__failures_free(&f);
    /* one sample, over 2 ranks */
    const int64_t sharded[RF__PARAMS] = {
        [RF_PARAM_MAX_ERROR_PPM] = 1000000, [RF_PARAM_WORLD_SIZE] = 2};
    rf__failures_init(&f, sharded, 1, 1);
    CHECK_EQ(rf__failures_add(&f, 3, 5, "sample 5: bad", why, sizeof(why)),
             RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(why, "the only sample of epoch 3 (this rank's share) "
                        "failed, so the epoch has nothing to deliver");
    rf__failures_free(&f);
}

/* An epoch whose every sample failed is said so whatever limit its last
 * failure also passes: the limits' words advise raising them, which would
 * not help (an epoch of one sample under the default share was told
 * "raise it to 1000000 for one failure"; 999999 ppm over 10 samples, or
 * 700000 over the 8 of batches of 4 with 2 dropped, the same). */
TEST_CASE(test_empty_epoch_is_said_before_the_limits, "bad",
          "an empty epoch is said, not a limit to raise")
{
    struct rf__failures f;
    char why[512];
    const int64_t fine[RF__PARAMS] = {[RF_PARAM_MAX_ERROR_PPM] = 10000};
    rf__failures_init(&f, fine, 1, 1);
    CHECK_EQ(rf__failures_add(&f, 0, 0, "sample 0: bad", why, sizeof(why)),
             RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(why, "the only sample of epoch 0 failed");
    CHECK(strstr(why, "raise it") == NULL);
    rf__failures_free(&f);
    const int64_t near[RF__PARAMS] = {[RF_PARAM_MAX_ERROR_PPM] = 999999};
    rf__failures_init(&f, near, 10, 10);
    for (uint64_t index = 0; index < 9; index++)
        CHECK_EQ(rf__failures_add(&f, 0, index, "bad", why, sizeof(why)), 1);
    CHECK_EQ(rf__failures_add(&f, 0, 9, "sample 9: bad", why, sizeof(why)),
             RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(why, "all 10 samples of epoch 0 failed");
    rf__failures_free(&f);
    const int64_t dropped[RF__PARAMS] = {
        [RF_PARAM_MAX_ERROR_PPM] = 700000, [RF_PARAM_MAX_ERRORS] = 7};
    rf__failures_init(&f, dropped, 10, 8);
    for (uint64_t index = 0; index < 7; index++)
        CHECK_EQ(rf__failures_add(&f, 0, index, "bad", why, sizeof(why)), 1);
    CHECK_EQ(rf__failures_add(&f, 0, 7, "sample 7: bad", why, sizeof(why)),
             RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(why, "all 8 samples of epoch 0 failed");
    rf__failures_free(&f);
}

/* The count limit is on samples, not on failures: the bad files fail in
 * each of 4 epochs (4 x bad failures), and a limit of `bad` samples lets
 * the run end normally. */
TEST_CASE(test_error_limit_counts_each_sample_once, "bad",
          "error limit counts each sample once")
{
    const int bad = BAD_FILES;
    rf_config *cfg = bad_folder_config(2, RF_TRANSFORM_EVAL);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_EPOCHS, 4));
    rf_loader *l = open_skipping(cfg, bad, 1000000);
    uint64_t skipped = 0;
    CHECK_EQ(test_drain(l, NULL, &skipped), 0);
    CHECK_EQ(skipped, 4 * (uint64_t)bad);
    CHECK_EQ(rf_loader_sample_errors(l, NULL, 0), (uint64_t)bad);
    rf_loader_close(l);
}

/* Over a long run the list is not filled with the same file's failures:
 * one sample failing in 5000 epochs, then another one in the last: both
 * are listed, each by its first failure. */
TEST_CASE(test_late_failure_is_still_listed, "bad",
          "a late failure is still listed")
{
    const int64_t params[RF__PARAMS] = {[RF_PARAM_MAX_ERROR_PPM] = 1000000};
    struct rf__failures f;
    rf__failures_init(&f, params, 1000000, 1000000);
    char why[256];
    for (uint64_t epoch = 0; epoch < 5000; epoch++)
        CHECK_OK(
            rf__failures_add(&f, epoch, 7, "sample 7: bad", why, sizeof(why)));
    for (uint64_t index = 100; index < 3100; index++) /* grows the set */
        CHECK_OK(rf__failures_add(&f, 4999, index, "sample: also bad", why,
                                  sizeof(why)));
    CHECK_OK(rf__failures_add(&f, 4999, 7, "sample 7: bad", why, sizeof(why)));
    rf_sample_error kept[2];
    CHECK_EQ(rf__failures_copy(&f, kept, 2), 3001);
    CHECK_EQ(f.total, 8001);
    CHECK(kept[0].index == 7 && kept[0].epoch == 0);
    CHECK(kept[1].index == 100 && kept[1].epoch == 4999);
    rf__failures_free(&f);
}

/* A file removed after open fails by its whole path, named once: the
 * dataset's read error already says "sample N (file)". */
TEST_CASE(test_file_removed_after_open, "bad",
          "a file removed after open is named once")
{
    char copy[300], victim[400];
    rf__format(copy, sizeof(copy), "%s-removed", root);
    rf__format(victim, sizeof(victim), "%s/class_1/img_3.jpg", copy);
    copy_tree(root, copy);
    rf_config *cfg = folder_config(1, RF_TRANSFORM_EVAL);
    CHECK_OK(rf_config_set_path(cfg, copy));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SHUFFLE, 0));
    rf_loader *l = test_open_loader(cfg);
    CHECK_EQ(unlink(victim), 0);
    CHECK_EQ(test_drain(l, NULL, NULL), RF_E_CORRUPT_SAMPLE);
    const char *msg = rf_loader_error(l);
    char expected[500];
    rf__format(expected, sizeof(expected), "sample %d (%s): cannot open it",
               PER_CLASS + 3, victim);
    CHECK_CONTAINS(msg, expected);
    CHECK(strstr(msg, ": sample ") == NULL);
    rf_loader_close(l);
    rf_config_free(cfg);
    remove_tree(copy);
}

/* RF_PARAM_MAX_DECODE_MEMORY reaches the producers: a progressive file
 * that needs 6 MiB of coefficients fails under a 1 MiB limit, naming
 * the file and the parameter, and decodes under the default. */
TEST_CASE(test_decode_memory_limit, "bad", "decode memory limit names the file")
{
    char copy[300], prog[400];
    rf__format(copy, sizeof(copy), "%s-prog", root);
    rf__format(prog, sizeof(prog), "%s/class_1/progressive.jpg", copy);
    copy_tree(root, copy);
    write_progressive_jpeg(prog, 1024);
    rf_config *cfg = folder_config(2, RF_TRANSFORM_TRAIN);
    CHECK_OK(rf_config_set_path(cfg, copy));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_EPOCHS, 1));
    rf_loader *l = test_open_loader(cfg);
    uint64_t samples = 0;
    CHECK_EQ(test_drain(l, &samples, NULL), 0);
    CHECK_EQ(samples, CLASSES * PER_CLASS + 1);
    rf_loader_close(l);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_MAX_DECODE_MEMORY, 1 << 20));
    CHECK_EQ(rf_config_set(cfg, RF_PARAM_MAX_DECODE_MEMORY, (1 << 20) - 1),
             -EINVAL);
    l = test_open_loader(cfg);
    CHECK_EQ(test_drain(l, NULL, NULL), RF_E_CORRUPT_SAMPLE);
    char whole[500];
    rf__format(whole, sizeof(whole), "(%s)", prog);
    CHECK_CONTAINS(rf_loader_error(l), whole);
    CHECK_CONTAINS(rf_loader_error(l),
                   "needs 6 MiB of memory to decode, above the limit of 1 "
                   "MiB; raise RF_PARAM_MAX_DECODE_MEMORY");
    printf("decode memory limit: %s\n", rf_loader_error(l));
    rf_loader_close(l);
    rf_config_free(cfg);
    remove_tree(copy);
}

/* A sample whose path is longer than a message can hold is named by the
 * start of the path and its file name, and the reason is kept whole. */
TEST_CASE(test_long_path_keeps_the_reason, "bad",
          "a long path keeps the reason")
{
    char long_base[400], dir[1024], file[1400];
    rf__format(long_base, sizeof(long_base), "%s-long", root);
    CHECK_EQ(mkdir(long_base, 0755), 0);
    const int n = snprintf(dir, sizeof(dir), "%s/", long_base);
    memset(dir + n, 'c', 200);
    dir[n + 200] = '\0';
    CHECK_EQ(mkdir(dir, 0755), 0);
    char cls[1100];
    rf__format(cls, sizeof(cls), "%s/%s", dir, "class_a");
    CHECK_EQ(mkdir(cls, 0755), 0);
    void *jpeg = NULL;
    size_t size = 0;
    CHECK_OK(rf_synthetic_jpeg(9, 1, 64, 48, &jpeg, &size));
    const int m = snprintf(file, sizeof(file), "%s/", cls);
    memset(file + m, 'f', 200);
    memcpy(file + m + 200, ".jpg", sizeof(".jpg"));
    write_file(file, jpeg, size / 2); /* cut short */
    free(jpeg);
    rf_config *cfg = folder_config(1, RF_TRANSFORM_EVAL);
    CHECK_OK(rf_config_set_path(cfg, dir));
    rf_loader *l = test_open_loader(cfg);
    CHECK_EQ(test_drain(l, NULL, NULL), RF_E_CORRUPT_SAMPLE);
    const char *msg = rf_loader_error(l);
    CHECK_CONTAINS(msg, "...");
    CHECK_CONTAINS(msg, "ffff.jpg): ");
    CHECK_CONTAINS(msg, "truncated");
    rf_loader_close(l);
    rf_config_free(cfg);
    remove_tree(long_base);
}

/* Makes `levels` folders named `name`, each in the one before, below
 * the folder open as fd; returns their fds, deepest last (paths this
 * long cannot be named whole: the kernel refuses them). */
static void make_nested(int fd, const char *name, int levels, int *fds)
{
    for (int i = 0; i < levels; i++) {
        CHECK_EQ(mkdirat(fd, name, 0755), 0);
        fd = openat(fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(fd >= 0);
        fds[i] = fd;
    }
}

/* Removes what make_nested() made, deepest first, below the folder
 * open as fd. */
static void remove_nested(int fd, const char *name, int levels, const int *fds)
{
    for (int i = levels - 1; i >= 0; i--) {
        close(fds[i]);
        CHECK_EQ(unlinkat(i ? fds[i - 1] : fd, name, AT_REMOVEDIR), 0);
    }
}

/* A class folder nested so deep that its path passes 4096 bytes is
 * refused with the reason and the advice whole, the path cut in its
 * middle instead (the message was cut at about 1 KB, mid-path). */
TEST_CASE(test_deep_folder_keeps_the_reason, "bad",
          "a folder too deep to list keeps the reason")
{
    enum { LEVELS = 41 };
    char folder[400], cls[450], name[101];
    rf__format(folder, sizeof(folder), "%s/deep", base);
    CHECK_EQ(mkdir(folder, 0755), 0);
    rf__format(cls, sizeof(cls), "%s/c", folder);
    CHECK_EQ(mkdir(cls, 0755), 0);
    char file[500];
    rf__format(file, sizeof(file), "%s/a.jpg", cls);
    write_synthetic_jpeg(file, 9, 1, 64, 48);
    memset(name, 'd', 100);
    name[100] = '\0';
    const int cls_fd = open(cls, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(cls_fd >= 0);
    int fds[LEVELS];
    make_nested(cls_fd, name, LEVELS, fds);
    rf_config *cfg = folder_config(1, RF_TRANSFORM_EVAL);
    CHECK_OK(rf_config_set_path(cfg, folder));
    rf_loader *l = NULL;
    char *err = NULL;
    const int rc = rf_loader_open(&l, cfg, &err);
    rf_loader_close(l); /* NULL, unless it opened */
    rf_config_free(cfg);
    /* removed before the checks: teardown's nftw() cannot name them */
    remove_nested(cls_fd, name, LEVELS, fds);
    close(cls_fd);
    CHECK_EQ(rc, -ENAMETOOLONG);
    CHECK(err);
    printf("  %s\n", err);
    CHECK_CONTAINS(err, "cannot open dataset");
    CHECK_CONTAINS(err, "/c/dddd");
    CHECK_CONTAINS(err, "...");
    CHECK_CONTAINS(err, "dddd: cannot list it: File name too long; fix it or "
                        "move it out of the dataset");
    free(err);
    remove_tree(folder);
}

int main(int argc, char **argv)
{
    return TEST_MAIN_WITH(argc, argv, samples_setup, samples_teardown);
}
