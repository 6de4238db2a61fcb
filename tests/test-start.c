/*
 * test-start.c - what rf_loader_open() refuses, with a reason that says
 * what to change, and what a start needs: a value out of range, a run
 * that leaves no batch or more batches than a handle counts, a missing
 * helper, a ring larger than memory, a missing or empty dataset, JPEGs
 * into 4 channels; the fd budget is exact (refused one below the
 * limit it asks for, runs at it) and producers start near RLIMIT_NOFILE.
 *
 * Setup makes a small folder of JPEGs for the cases that need a dataset.
 */
#include "config.h"

#include <errno.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/internal.h"
#include "empty-pack.h"
#include "harness.h"
#include "proc.h"
#include "scratch.h"
#include "test.h"

static char base[256], root[300];

static void setup(void)
{
    scratch_make(base, sizeof(base), "start");
    rf__format(root, sizeof(root), "%s/folder", base);
    CHECK_EQ(mkdir(root, 0755), 0);
    fill_jpeg_folder(root, 9, 3, 8);
}

static void teardown(void)
{
    remove_tree(base);
}

static rf_config *folder_config(int64_t producers, rf_transform transform)
{
    return jpeg_folder_config(root, producers, transform);
}

TEST_CASE_LIMIT(test_set_refuses_bad_values, "config",
                "a value out of range is refused by set", 10)
{
    rf_config *cfg = rf_config_create();
    CHECK_EQ(rf_config_set(cfg, RF_PARAM_BATCH_SIZE, 0), -EINVAL);
    CHECK_CONTAINS(rf_config_error(cfg), "rf_config_set: RF_PARAM_BATCH_SIZE "
                                         "0 is out of range; use 1..65536");
    /* a choice's values by their C names, a flag's as 0 or 1 */
    CHECK_EQ(rf_config_set(cfg, RF_PARAM_LAYOUT, 5), -EINVAL);
    CHECK_CONTAINS(rf_config_error(cfg),
                   "RF_PARAM_LAYOUT 5 is out of range; use RF_LAYOUT_NHWC "
                   "(0) or RF_LAYOUT_NCHW (1)");
    CHECK_EQ(rf_config_set(cfg, RF_PARAM_JPEG_WARNINGS, -1), -EINVAL);
    CHECK_CONTAINS(rf_config_error(cfg),
                   "use RF_JPEG_AS_PIL (0), RF_JPEG_LENIENT (1) or "
                   "RF_JPEG_STRICT (2)");
    CHECK_EQ(rf_config_set(cfg, RF_PARAM_DROP_LAST, 2), -EINVAL);
    CHECK_CONTAINS(rf_config_error(cfg),
                   "RF_PARAM_DROP_LAST 2 is out of range; use 0 or 1");
    CHECK_EQ(rf_config_set(cfg, (rf_param)999, 1), -EINVAL);
    CHECK_CONTAINS(rf_config_error(cfg), "not a parameter");
    int64_t v = 0;
    CHECK_OK(rf_config_get(cfg, RF_PARAM_BATCH_SIZE, &v));
    CHECK_EQ(v, 32); /* unchanged by the failed set */
    rf_config_free(cfg);
}

TEST_CASE_LIMIT(test_no_batch_is_refused, "config",
                "a run that leaves no batch", 10)
{
    rf_config *cfg =
        TEST_CONFIG({RF_PARAM_SAMPLES, 10}, {RF_PARAM_DROP_LAST, 1});
    char *err = test_open_refused(cfg, -EINVAL);
    CHECK_CONTAINS(err, "leave no batch");
    free(err);
    rf_config_free(cfg);
}

TEST_CASE_LIMIT(test_too_many_batches_refused, "config",
                "more batches than a run counts", 10)
{
    /* 2^38 one-sample batches x 2^26 epochs would wrap a 64-bit count;
     * a run counts 2^40 - 1 batches (a handle's 40 bits), so 4 epochs of
     * 2^38 are one too many. */
    rf_config *cfg = TEST_CONFIG({RF_PARAM_SAMPLES, INT64_C(1) << 38},
                                 {RF_PARAM_BATCH_SIZE, 1},
                                 {RF_PARAM_EPOCHS, INT64_C(1) << 26});
    char *err = test_open_refused(cfg, -EINVAL);
    CHECK_CONTAINS(err, "more than a run can count (2^40 - 1 batches); "
                        "lower RF_PARAM_EPOCHS");
    free(err);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_EPOCHS, 4));
    free(test_open_refused(cfg, -EINVAL));
    /* Without an end, resuming at or beyond the last sequence number is
     * refused too, naming the epoch to lower (the last one was accepted,
     * and its run gave no batch). */
    CHECK_OK(rf_config_set(cfg, RF_PARAM_EPOCHS, 0));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_START_EPOCH, 3));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_START_BATCH, (INT64_C(1) << 38) - 1));
    err = test_open_refused(cfg, -EINVAL);
    CHECK_CONTAINS(err, "cannot resume at batch 274877906943 of epoch 3: "
                        "past the end of a run");
    CHECK_CONTAINS(err, "lower RF_PARAM_START_EPOCH");
    free(err);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_START_BATCH,
                           (INT64_C(1) << 38) - 2)); /* the last batch */
    rf_loader *l = test_open_loader(cfg);
    rf_batch b;
    CHECK_EQ(rf_loader_next(l, &b), 1);
    CHECK_OK(rf_loader_release(l, &b));
    CHECK_EQ(rf_loader_next(l, &b), 0);
    rf_loader_close(l);
    rf_config_free(cfg);
}

/* A ring over the 2^46 bytes a ring may have, of slots that are each
 * fine, names the slots (it blamed one slot's size, "lower the batch
 * size or sample shape"); one slot over 2^40 bytes names the batch. */
TEST_CASE_LIMIT(test_ring_too_large_names_its_cause, "config",
                "a ring too large says whether slots or batch", 10)
{
    rf_config *cfg =
        TEST_CONFIG({RF_PARAM_SAMPLES, 1024}, {RF_PARAM_BATCH_SIZE, 512},
                    {RF_PARAM_HEIGHT, 1024}, {RF_PARAM_WIDTH, 1024},
                    {RF_PARAM_CHANNELS, 4}, {RF_PARAM_SLOTS, 65536});
    char *err = test_open_refused(cfg, -EINVAL);
    CHECK_CONTAINS(err, "over the 70368744177664 bytes a ring may have; use "
                        "fewer slots (RF_PARAM_SLOTS)");
    free(err);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SLOTS, 16));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_BATCH_SIZE, 65536));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_HEIGHT, 65536));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SAMPLES, 65536));
    err = test_open_refused(cfg, -EINVAL);
    CHECK_CONTAINS(err, "is over 2^40 bytes; lower RF_PARAM_BATCH_SIZE");
    free(err);
    rf_config_free(cfg);
}

TEST_CASE(test_missing_producer_binary, "helper",
          "a missing helper is named, with what to do")
{
    const char *saved = getenv("RINGFEED_PRODUCER");
    char *copy = saved ? strdup(saved) : NULL;
    setenv("RINGFEED_PRODUCER", "/nonexistent/ringfeed-producer", 1);
    rf_config *cfg = rf_config_create();
    char *err = test_open_refused(cfg, RF_E_NO_PRODUCER_BINARY);
    CHECK_CONTAINS(err, "/nonexistent/ringfeed-producer");
    CHECK_CONTAINS(err, "(RINGFEED_PRODUCER)");
    CHECK_CONTAINS(err, "or unset it to use the installed helper");
    free(err);
    /* Unset, the build tree's own helper is used (test-faults checks
     * that), else the installed one: where neither is there, the advice
     * is to install. */
    unsetenv("RINGFEED_PRODUCER");
    rf_loader *l = NULL;
    err = NULL;
    const int rc = rf_loader_open(&l, cfg, &err);
    if (rc == RF_E_NO_PRODUCER_BINARY) {
        CHECK_CONTAINS(err, "(installed path)");
        CHECK_CONTAINS(err, "reinstall ringfeed");
    } else {
        CHECK_OK(rc); /* an installed ringfeed-producer */
        printf("the build tree's (or an installed) helper is there: the "
               "refusal is not checked\n");
        rf_loader_close(l);
    }
    free(err);
    rf_config_free(cfg);
    if (copy)
        setenv("RINGFEED_PRODUCER", copy, 1);
    free(copy);
}

TEST_CASE(test_ring_larger_than_memory, "ring", "larger than memory")
{
    /* 64 slots of 4096 samples of 1024 x 1024 x 3: about 768 GiB. */
    rf_config *cfg =
        TEST_CONFIG({RF_PARAM_SLOTS, 64}, {RF_PARAM_BATCH_SIZE, 4096},
                    {RF_PARAM_HEIGHT, 1024}, {RF_PARAM_WIDTH, 1024});
    char *err = test_open_refused(cfg, -ENOMEM);
    CHECK_CONTAINS(err, "the ring needs 824638");
    CHECK_CONTAINS(err, "use fewer slots");
    free(err);
    rf_config_free(cfg);
}

TEST_CASE(test_jpeg_channels_refused_at_open, "dataset",
          "JPEGs into 4 channels")
{
    rf_config *cfg = folder_config(1, RF_TRANSFORM_EVAL);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_CHANNELS, 4));
    char *err = test_open_refused(cfg, -EINVAL);
    CHECK_CONTAINS(err, "1 or 3 channels");
    free(err);
    rf_config_free(cfg);
}

/* The synthetic JPEG source has no dataset: its check is the loader's. */
TEST_CASE(test_synthetic_jpeg_channels_refused_at_open, "dataset",
          "synthetic JPEGs into 2 channels")
{
    rf_config *cfg = TEST_CONFIG({RF_PARAM_SOURCE, RF_SOURCE_SYNTHETIC_JPEG},
                                 {RF_PARAM_CHANNELS, 2});
    char *err = test_open_refused(cfg, -EINVAL);
    CHECK_CONTAINS(err, "1 or 3 channels, not 2");
    free(err);
    rf_config_free(cfg);
}

TEST_CASE(test_missing_dataset, "dataset",
          "a missing or empty dataset is named")
{
    rf_config *cfg = rf_config_create();
    CHECK_OK(rf_config_set_path(cfg, "/nonexistent/imagenet/train"));
    rf_loader *l = NULL;
    char *err = NULL;
    CHECK_LT(rf_loader_open(&l, cfg, &err), 0);
    CHECK_CONTAINS(err, "/nonexistent/imagenet/train");
    free(err);

    /* A packed file without samples: the advice fits a packed file. */
    char empty[300];
    rf__format(empty, sizeof(empty), "%s-empty.pack", root);
    write_empty_pack(empty, 0, 0, 0); /* by hand: the writer refuses */
    CHECK_OK(rf_config_set_path(cfg, empty));
    err = test_open_refused(cfg, -ENOENT);
    CHECK_CONTAINS(err, "has no samples");
    CHECK_CONTAINS(err, "or a packed file written from one");
    free(err);
    CHECK_EQ(unlink(empty), 0);
    rf_config_free(cfg);
}

/* Near RLIMIT_NOFILE: with the loader's fds at the top of the table and
 * only a few numbers free, a producer must still start (its fds are
 * moved straight down to 3..8; moving them above the highest first, as
 * when one sits where a target goes, needed numbers past the limit). */
TEST_CASE(test_spawn_near_fd_limit, "fds", "producers start near RLIMIT_NOFILE")
{
    const pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        const struct rlimit limit = {64, 64};
        CHECK_EQ(setrlimit(RLIMIT_NOFILE, &limit), 0);
        int fd;
        do
            fd = open("/dev/null", O_RDONLY);
        while (fd >= 0 && fd < 64 - 12);
        rf_config *cfg = folder_config(1, RF_TRANSFORM_EVAL);
        rf_loader *l = test_open_loader(cfg);
        CHECK_EQ(test_drain(l, NULL, NULL), 0);
        rf_loader_close(l);
        rf_config_free(cfg);
        _exit(0);
    }
    CHECK_EQ(exit_status_of(child), 0);
}

/* In a child: opens a folder loader under an fd limit `spare` above
 * what the budget says it needs (open fds, the dataset's 2, and
 * 6 + producers), and runs it. Returns open's result. */
static int open_with_fd_room(int64_t producers, rf_start_mode mode, int spare)
{
    const pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        const int open_fds = count_entries("/proc/self/fd") - 1;
        const rlim_t n = (rlim_t)(open_fds + 2 + 6 + producers + spare);
        const struct rlimit limit = {n, n};
        CHECK_EQ(setrlimit(RLIMIT_NOFILE, &limit), 0);
        rf_config *cfg = folder_config(producers, RF_TRANSFORM_EVAL);
        CHECK_OK(rf_config_set(cfg, RF_PARAM_START_MODE, mode));
        rf_loader *l = NULL;
        char *err = NULL;
        const int rc = rf_loader_open(&l, cfg, &err);
        if (rc == 0)
            CHECK_EQ(test_drain(l, NULL, NULL), 0);
        else
            CHECK_CONTAINS(err, "file descriptors");
        free(err);
        rf_loader_close(l);
        rf_config_free(cfg);
        _exit(rc == 0 ? 0 : 3);
    }
    const int status = exit_status_of(child);
    CHECK(status == 0 || status == 3);
    return status == 0 ? 0 : -EMFILE;
}

/* The budget counts the dataset's fds once (it counted them twice: a
 * folder was refused with room to spare), and the limit it asks for is
 * enough to run: refused one below, runs at it, in both start modes. */
TEST_CASE(test_fd_budget_is_exact, "fds",
          "the fd budget is exact, spawn and fork modes")
{
    static const int64_t producers[] = {1, 4};
    for (int m = 0; m < 2; m++)
        for (int i = 0; i < 2; i++) {
            const rf_start_mode mode = m ? RF_START_FORK : RF_START_SPAWN;
            CHECK_EQ(open_with_fd_room(producers[i], mode, -1), -EMFILE);
            CHECK_EQ(open_with_fd_room(producers[i], mode, 0), 0);
        }
}

int main(int argc, char **argv)
{
    return TEST_MAIN_WITH(argc, argv, setup, teardown);
}
