/*
 * test-api-args.c - the public calls' argument checks: a NULL where an
 * object, an out-parameter or a buffer belongs is -EINVAL, never a crash
 * (each case runs in its own process, so a crash fails only that case),
 * with the detail where an object or errp exists to hold it; every call
 * of ringfeed.h given a NULL object returns what its comment says (0 for
 * a count, "" for a string, nothing done by a free or a fill); a NULL
 * dictionary of some bytes is refused by rf_pack_writer_create() as by
 * rf_pack_writer_set_dictionary(); rf_config_get() names itself in its
 * error; and rf_dataset_decode() says -EINVAL, naming the parameter, for
 * a configuration that does not fit the dataset, never blaming the
 * sample. Uses the public API only, as a program would.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "scratch.h"
#include "test.h"

/* The scratch folder every case writes below (scratch_setup() makes it,
 * in the parent; scratch_teardown() removes it, whatever the cases
 * left). */
static char scratch[512];

/* scratch/name, in test.h's rotating buffers. */
#define at(name) test_path(scratch, "%s", name)

SCRATCH_FOLDER_FIXTURE(scratch, "api-args")

/* A pack at path of two small synthetic JPEGs (24 x 16), opened. */
static rf_dataset *jpeg_pack(const char *path)
{
    rf_pack_writer *w =
        test_create_pack(path, 0, 0, 0, RF_LAYOUT_NHWC, NULL, 0);
    for (uint64_t i = 0; i < 2; i++) {
        void *jpeg = NULL;
        size_t size = 0;
        CHECK_OK(rf_synthetic_jpeg(7, i, 24, 16, &jpeg, &size));
        CHECK_OK(rf_pack_writer_add(w, RF_SAMPLE_JPEG, jpeg, size, (int64_t)i,
                                    NULL));
        free(jpeg);
    }
    test_finish_pack(w);
    rf_dataset *ds = NULL;
    CHECK_OK(rf_dataset_open(&ds, path, NULL));
    return ds;
}

/* A config for 8 x 8 x channels, the whole image (no random crop). */
static rf_config *small_config(int64_t channels)
{
    rf_config *cfg = rf_config_create();
    CHECK(cfg != NULL);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_HEIGHT, 8));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_WIDTH, 8));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_CHANNELS, channels));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_TRANSFORM, RF_TRANSFORM_NONE));
    return cfg;
}

/* ---- rf_config ----------------------------------------------------------- */

TEST_CASE_LIMIT(test_config_null, "config", "NULL config or value", 10)
{
    int64_t value = 0;
    CHECK_EQ(rf_config_set(NULL, RF_PARAM_BATCH_SIZE, 1), -EINVAL);
    CHECK_EQ(rf_config_get(NULL, RF_PARAM_BATCH_SIZE, &value), -EINVAL);
    CHECK_EQ(rf_config_set_path(NULL, "x"), -EINVAL);
    rf_config *cfg = rf_config_create();
    CHECK(cfg != NULL);
    CHECK_EQ(rf_config_get(cfg, RF_PARAM_BATCH_SIZE, NULL), -EINVAL);
    CHECK_CONTAINS(rf_config_error(cfg), "rf_config_get: value is NULL");
    CHECK_EQ(rf_config_set_path(cfg, NULL), -EINVAL);
    rf_config_free(cfg);
}

TEST_CASE_LIMIT(test_config_get_unknown, "config",
                "an unknown parameter, said by get", 10)
{
    rf_config *cfg = rf_config_create();
    CHECK(cfg != NULL);
    int64_t value = 0;
    /* set first, so that a get that left the text alone would show set's */
    CHECK_EQ(rf_config_set(cfg, (rf_param)43, 1), -EINVAL);
    CHECK_EQ(rf_config_get(cfg, (rf_param)43, &value), -EINVAL);
    CHECK_CONTAINS(rf_config_error(cfg),
                   "rf_config_get: 43 is not a parameter");
    rf_config_free(cfg);
}

TEST_CASE_LIMIT(test_config_every_call_null, "config",
                "every call with a NULL config or info", 10)
{
    CHECK_EQ(strcmp(rf_config_error(NULL), ""), 0);
    CHECK_EQ(strcmp(rf_config_get_path(NULL), ""), 0);
    CHECK_EQ(rf_config_set_message_handler(NULL, NULL, NULL), -EINVAL);
    CHECK_EQ(rf_config_continue(NULL, NULL), -EINVAL);
    CHECK_EQ(rf_param_at(0, NULL), -EINVAL);
    CHECK_EQ(rf_param_lookup(RF_PARAM_BATCH_SIZE, NULL), -EINVAL);
    rf_config_free(NULL);
}

/* RF_PARAM_SOURCE set to a path with no path given: said so (it was
 * "cannot open dataset '': No such file or directory"). */
TEST_CASE_LIMIT(test_path_source_without_a_path, "config",
                "a path source without a path", 10)
{
    rf_config *cfg = rf_config_create();
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SOURCE, RF_SOURCE_PATH));
    char *err = test_open_refused(cfg, -EINVAL);
    CHECK_CONTAINS(err, "no path was set; give the dataset with "
                        "rf_config_set_path()");
    free(err);
    rf_config_free(cfg);
}

/* ---- rf_loader ----------------------------------------------------------- */

TEST_CASE_LIMIT(test_loader_every_call_null, "loader",
                "every call with a NULL loader", 10)
{
    rf_loader *l = (rf_loader *)&l; /* not NULL: open must clear it */
    char *why = (char *)"x";
    CHECK_EQ(rf_loader_open(&l, NULL, &why), -EINVAL);
    CHECK(l == NULL);
    CHECK(why == NULL);
    rf_config *cfg = rf_config_create();
    CHECK(cfg != NULL);
    CHECK_EQ(rf_loader_open(NULL, cfg, NULL), -EINVAL);
    rf_config_free(cfg);
    rf_batch b = {0};
    CHECK_EQ(rf_loader_next(NULL, &b), -EINVAL);
    CHECK_EQ(rf_loader_interrupt(NULL), -EINVAL);
    CHECK_EQ(rf_loader_release(NULL, &b), -EINVAL);
    void *base = NULL;
    size_t bytes = 0;
    CHECK_EQ(rf_loader_arena(NULL, &base, &bytes), -EINVAL);
    CHECK_EQ(rf_loader_keep_arena(NULL), -EINVAL);
    CHECK_EQ(strcmp(rf_loader_error(NULL), ""), 0);
    rf_stats st;
    CHECK_EQ(rf_loader_stats(NULL, &st), -EINVAL);
    char line[64];
    CHECK_EQ(rf_loader_cpu_budget(NULL, line, sizeof(line)), -EINVAL);
    CHECK_EQ(rf_loader_class_name(NULL, 0, line, sizeof(line)), -EINVAL);
    rf_sample_error errors[1];
    CHECK_EQ(rf_loader_sample_errors(NULL, errors, 1), 0);
    rf_failed_sample failed;
    CHECK_EQ(rf_loader_failed_sample(NULL, &failed), -EINVAL);
    rf_loader_close(NULL);
}

/* A NULL batch is said in the loader's detail: a caller that prints
 * rf_loader_error() after a failed call showed an older, unrelated
 * error. */
TEST_CASE_LIMIT(test_loader_null_batch_is_said, "loader",
                "NULL batch is said, not an older error", 30)
{
    rf_loader *l = TEST_OPEN_LOADER({RF_PARAM_PRODUCERS, 1},
                                    {RF_PARAM_HEIGHT, 8}, {RF_PARAM_WIDTH, 8});
    rf_batch b = {0};
    CHECK_EQ(rf_loader_release(l, &b), -EINVAL); /* a detail to replace */
    CHECK_EQ(rf_loader_next(l, NULL), -EINVAL);
    CHECK_CONTAINS(rf_loader_error(l), "rf_loader_next: batch is NULL");
    CHECK_EQ(rf_loader_release(l, &b), -EINVAL);
    CHECK_EQ(rf_loader_release(l, NULL), -EINVAL);
    CHECK_CONTAINS(rf_loader_error(l), "rf_loader_release: batch is NULL");
    rf_loader_close(l);
}

/* ---- rf_pack_writer ------------------------------------------------------ */

TEST_CASE_LIMIT(test_writer_null, "writer", "NULL writer or out", 10)
{
    char *why = NULL;
    CHECK_EQ(rf_pack_writer_create(NULL, at("x.pack"), 0, 0, 0, RF_LAYOUT_NHWC,
                                   NULL, 0, &why),
             -EINVAL);
    CHECK_CONTAINS(why, "out is NULL");
    free(why);
    CHECK_EQ(rf_pack_writer_create(NULL, at("x.pack"), 0, 0, 0, RF_LAYOUT_NHWC,
                                   NULL, 0, NULL),
             -EINVAL);
    CHECK_EQ(access(at("x.pack"), F_OK), -1);
    CHECK_EQ(rf_pack_writer_add(NULL, RF_SAMPLE_JPEG, "x", 1, 0, NULL),
             -EINVAL);
    CHECK_EQ(rf_pack_writer_set_dictionary(NULL, NULL, 0), -EINVAL);
}

TEST_CASE_LIMIT(test_writer_null_dictionary, "writer",
                "a NULL dictionary of 5 bytes is refused by create", 10)
{
    rf_pack_writer *w = NULL;
    char *why = NULL;
    CHECK_EQ(rf_pack_writer_create(&w, at("d.pack"), 4, 4, 3, RF_LAYOUT_NHWC,
                                   NULL, 5, &why),
             -EINVAL);
    CHECK(w == NULL);
    CHECK_CONTAINS(why, "5-byte dictionary at NULL");
    free(why);
    CHECK_EQ(access(at("d.pack"), F_OK), -1);
    /* as set_dictionary() refuses it */
    w = test_create_pack(at("d.pack"), 4, 4, 3, RF_LAYOUT_NHWC, NULL, 0);
    CHECK_EQ(rf_pack_writer_set_dictionary(w, NULL, 5), -EINVAL);
    CHECK_CONTAINS(rf_pack_writer_error(w), "5-byte dictionary at NULL");
    rf_pack_writer_abort(w);
}

TEST_CASE_LIMIT(test_writer_every_call_null, "writer",
                "every call with a NULL writer", 10)
{
    CHECK_EQ(strcmp(rf_pack_writer_error(NULL), ""), 0);
    char *why = NULL;
    CHECK_EQ(rf_pack_writer_finish(NULL, &why), -EINVAL);
    CHECK_CONTAINS(why, "NULL");
    free(why);
    CHECK_EQ(rf_pack_writer_finish(NULL, NULL), -EINVAL);
    rf_pack_writer_abort(NULL);
}

/* ---- rf_dataset ---------------------------------------------------------- */

TEST_CASE_LIMIT(test_dataset_open_null, "dataset", "NULL out or path", 10)
{
    rf_dataset *ds = (rf_dataset *)&ds; /* not NULL: open must clear it */
    char *why = NULL;
    CHECK_EQ(rf_dataset_open(NULL, scratch, &why), -EINVAL);
    CHECK_CONTAINS(why, "out is NULL");
    free(why);
    why = NULL;
    CHECK_EQ(rf_dataset_open(&ds, NULL, &why), -EINVAL);
    CHECK(ds == NULL);
    CHECK_CONTAINS(why, "path is NULL");
    free(why);
    CHECK_EQ(rf_dataset_open(NULL, scratch, NULL), -EINVAL);
    CHECK_EQ(rf_dataset_open(&ds, NULL, NULL), -EINVAL);
}

TEST_CASE_LIMIT(test_dataset_read_null, "dataset", "NULL dataset or info", 30)
{
    rf_sample_info info;
    char name[16];
    CHECK_EQ(rf_dataset_read(NULL, 0, &info), -EINVAL);
    CHECK_EQ(rf_dataset_class_name(NULL, 0, name, sizeof(name)), -EINVAL);
    rf_dataset *ds = jpeg_pack(at("r.pack"));
    CHECK_EQ(rf_dataset_read(ds, 0, NULL), -EINVAL);
    CHECK_CONTAINS(rf_dataset_error(ds), "info is NULL");
    CHECK_OK(rf_dataset_read(ds, 0, &info)); /* still usable */
    rf_dataset_close(ds);
}

TEST_CASE_LIMIT(test_dataset_every_call_null, "dataset",
                "every call with a NULL dataset", 10)
{
    CHECK_EQ(rf_dataset_size(NULL), 0);
    CHECK_EQ(rf_dataset_classes(NULL), 0);
    rf_dataset_info info;
    CHECK_EQ(rf_dataset_get_info(NULL, &info), -EINVAL);
    CHECK_EQ(strcmp(rf_dataset_error(NULL), ""), 0);
    rf_dataset_close(NULL);
}

TEST_CASE_LIMIT(test_decode_null, "decode", "NULL dataset, config or dst", 30)
{
    rf_dataset *ds = jpeg_pack(at("n.pack"));
    rf_config *cfg = small_config(3);
    uint8_t dst[8 * 8 * 3];
    CHECK_EQ(rf_dataset_decode(NULL, cfg, 0, 0, dst), -EINVAL);
    CHECK_EQ(rf_dataset_decode(ds, NULL, 0, 0, dst), -EINVAL);
    CHECK_CONTAINS(rf_dataset_error(ds), "cfg is NULL");
    CHECK_EQ(rf_dataset_decode(ds, cfg, 0, 0, NULL), -EINVAL);
    CHECK_CONTAINS(rf_dataset_error(ds), "dst is NULL");
    CHECK_OK(rf_dataset_decode(ds, cfg, 0, 0, dst)); /* the sample is fine */
    rf_config_free(cfg);
    rf_dataset_close(ds);
}

TEST_CASE_LIMIT(test_decode_channels, "decode",
                "2 channels on JPEG samples is the config's mistake", 30)
{
    rf_dataset *ds = jpeg_pack(at("c.pack"));
    rf_config *cfg = small_config(2);
    uint8_t dst[8 * 8 * 4];
    CHECK_EQ(rf_dataset_decode(ds, cfg, 0, 0, dst), -EINVAL);
    CHECK_CONTAINS(rf_dataset_error(ds), "RF_PARAM_CHANNELS");
    CHECK(strstr(rf_dataset_error(ds), "sample 0") == NULL);
    /* rf_loader_open() refuses the same config the same way */
    CHECK_OK(rf_config_set_path(cfg, at("c.pack")));
    rf_loader *l = NULL;
    CHECK_EQ(rf_loader_open(&l, cfg, NULL), -EINVAL);
    rf_config_free(cfg);
    rf_dataset_close(ds);
}

/* ---- the synthetic source ------------------------------------------------ */

TEST_CASE_LIMIT(test_synthetic_jpeg_null, "synthetic", "NULL jpeg or size", 10)
{
    void *jpeg = NULL;
    size_t size = 1;
    CHECK_EQ(rf_synthetic_jpeg(0, 0, 0, 0, NULL, NULL), -EINVAL);
    CHECK_EQ(rf_synthetic_jpeg(0, 0, 0, 0, &jpeg, NULL), -EINVAL);
    CHECK(jpeg == NULL);
    CHECK_EQ(rf_synthetic_jpeg(0, 0, 0, 0, NULL, &size), -EINVAL);
    CHECK_EQ(size, 0);
}

TEST_CASE_LIMIT(test_synthetic_fill_null, "synthetic",
                "NULL dst: nothing written", 10)
{
    rf_synthetic_fill(0, 0, 10, 8, 8, 3, RF_LAYOUT_NHWC, NULL);
    rf_synthetic_fill(0, 0, 10, 8, 8, 3, RF_LAYOUT_NCHW, NULL);
    CHECK_EQ(rf_synthetic_label(0, 0, 0), 0);
}

/* ---- the producer's program ---------------------------------------------- */

TEST_CASE_LIMIT(test_producer_main_null, "producer",
                "NULL argv: the usage and 64", 10)
{
    /* the usage goes to /dev/null, a failed check's words to stderr */
    const int saved = dup(STDERR_FILENO);
    const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    CHECK(saved >= 0 && null >= 0);
    CHECK_EQ(dup2(null, STDERR_FILENO), STDERR_FILENO);
    const int with_argc = rf_producer_main(3, NULL);
    const int without = rf_producer_main(0, NULL);
    CHECK_EQ(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    CHECK_EQ(with_argc, 64);
    CHECK_EQ(without, 64);
    close(null);
    close(saved);
}

/* A NULL where an option or its value belongs, before argc: each place
 * of a short command line in turn (argv[0] included). */
TEST_CASE_LIMIT(test_producer_main_null_entry, "producer",
                "a NULL entry of argv before argc: the usage and 64", 10)
{
    char prog[] = "ringfeed-producer", opt[] = "--index", value[] = "0",
         help_opt[] = "--help";
    int codes[4];
    const int saved = dup(STDERR_FILENO);
    const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    CHECK(saved >= 0 && null >= 0);
    CHECK_EQ(dup2(null, STDERR_FILENO), STDERR_FILENO);
    for (int at = 0; at < 3; at++) {
        char *argv[] = {prog, opt, value, NULL};
        argv[at] = NULL;
        codes[at] = rf_producer_main(3, argv);
    }
    char *help[] = {prog, NULL, help_opt, NULL}; /* not reached */
    codes[3] = rf_producer_main(3, help);
    CHECK_EQ(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    for (int at = 0; at < 4; at++)
        CHECK_EQ(codes[at], 64);
    close(null);
    close(saved);
}

int main(int argc, char **argv)
{
    return TEST_MAIN_WITH(argc, argv, scratch_setup, scratch_teardown);
}
