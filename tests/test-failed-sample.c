/*
 * test-failed-sample.c - rf_loader_failed_sample(): the sample whose
 * failure ended a run, given apart (its index, its file's path whole, its
 * name in a pack, the reason alone), for a folder and a pack, under the
 * fail policy and past the skip policy's limit. The names tried hold what
 * a message's own punctuation holds ("): ", ", packed offset 7) of "),
 * and paths longer than a message keeps whole: taking the message apart
 * cannot give these back, the fields must.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/internal.h"
#include "harness.h"
#include "proc.h"
#include "scratch.h"
#include "test.h"

#define CLASSES 2
#define PER_CLASS 4

/* The scratch folder, and in it the folder of good JPEGs. */
static char base[256], root[300];

/* A file name a message cannot be taken apart at. */
#define TRICKY_NAME "best (2019)): of cats, packed offset 7) of x.jpg"

/* Writes a JPEG cut short at path. */
static void write_truncated_jpeg(const char *path, uint64_t index)
{
    void *jpeg = NULL;
    size_t size = 0;
    CHECK_OK(rf_synthetic_jpeg(5, index, 64, 48, &jpeg, &size));
    write_file(path, jpeg, size / 2);
    free(jpeg);
}

/* The reason rf_dataset_decode() gives for sample index of path: its
 * error with "sample N (...): " taken off, found by the description the
 * dataset itself writes (not by parsing: the test knows the name). */
static void decode_reason(const char *path, const rf_config *cfg,
                          uint64_t index, const char *described, char *out,
                          size_t len)
{
    rf_dataset *ds = NULL;
    CHECK_OK(rf_dataset_open(&ds, path, NULL));
    uint8_t px[24 * 24 * 3];
    CHECK_EQ(rf_dataset_decode(ds, cfg, 0, index, px), RF_E_CORRUPT_SAMPLE);
    const char *error = rf_dataset_error(ds);
    const char *after = strstr(error, described);
    CHECK(after);
    rf__format(out, len, "%s", after + strlen(described));
    rf_dataset_close(ds);
}

/* The index of the sample stored as `name` below folder. */
static uint64_t index_of(const char *folder, const char *name)
{
    rf_dataset *ds = NULL;
    CHECK_OK(rf_dataset_open(&ds, folder, NULL));
    const uint64_t n = rf_dataset_size(ds);
    for (uint64_t i = 0; i < n; i++) {
        rf_sample_info info;
        if (rf_dataset_read(ds, i, &info) < 0)
            continue; /* not the one: its name is in the listing too */
        if (strcmp(info.name, name) == 0) {
            rf_dataset_close(ds);
            return i;
        }
    }
    rf_dataset_close(ds);
    CHECK(!"sample not found");
    return 0;
}

/* A copy of the good folder, named `copy`, with one JPEG cut short, in
 * a class folder whose name takes the path past what a message keeps
 * whole. Returns the copy in `folder` and the bad file's path below it
 * in `name`. */
static void folder_with_a_bad_file(const char *copy, char *folder,
                                   size_t folder_len, char *name,
                                   size_t name_len)
{
    rf__format(folder, folder_len, "%s/%s", base, copy);
    copy_tree(root, folder);
    char cls[240], dir[900], file[1200];
    memset(cls, 'c', 200);
    memcpy(cls + 200, " (1): x", sizeof(" (1): x"));
    rf__format(dir, sizeof(dir), "%s/%s", folder, cls);
    CHECK_EQ(mkdir(dir, 0755), 0);
    rf__format(name, name_len, "%s/%s", cls, TRICKY_NAME);
    rf__format(file, sizeof(file), "%s/%s", folder, name);
    write_truncated_jpeg(file, 1);
}

TEST_CASE(test_folder_fields, "fields",
          "a folder's file: its path whole, the reason apart")
{
    char folder[400], name[600];
    folder_with_a_bad_file("fail", folder, sizeof(folder), name, sizeof(name));
    rf_config *cfg = jpeg_folder_config(folder, 1, RF_TRANSFORM_EVAL);
    rf_loader *l = test_open_loader(cfg);
    rf_failed_sample *f = malloc(sizeof(*f));
    CHECK(f);
    CHECK_EQ(rf_loader_failed_sample(l, f), -ENOENT); /* nothing failed */
    CHECK_EQ(test_drain(l, NULL, NULL), RF_E_CORRUPT_SAMPLE);
    CHECK_OK(rf_loader_failed_sample(l, f));
    const uint64_t index = index_of(folder, name);
    CHECK_EQ(f->index, index);
    char whole[1200], reason[512], described[64];
    rf__format(whole, sizeof(whole), "%s/%s", folder, name);
    CHECK_STR_EQ(f->path, whole);
    CHECK(strlen(f->path) > RF__SAMPLE_NAME_MAX); /* the message elides it */
    CHECK_CONTAINS(rf_loader_error(l), "...");
    CHECK_STR_EQ(f->name, "");
    rf__format(described, sizeof(described), "x.jpg): ");
    decode_reason(folder, cfg, index, described, reason, sizeof(reason));
    CHECK_STR_EQ(f->reason, reason);
    CHECK_CONTAINS(rf_loader_error(l), f->reason);
    printf("index %llu, reason: %s\n", (unsigned long long)f->index, f->reason);
    free(f);
    rf_loader_close(l);
    rf_config_free(cfg);
    remove_tree(folder);
}

TEST_CASE(test_pack_fields, "fields",
          "a packed sample: the pack, its stored name, the reason apart")
{
    char pack[400];
    rf__format(pack, sizeof(pack), "%s/tricky (1): a.pack", base);
    rf_pack_writer *w = NULL;
    CHECK_OK(rf_pack_writer_create(&w, pack, 0, 0, 0, RF_LAYOUT_NHWC, NULL, 0,
                                   NULL));
    for (uint64_t i = 0; i < 12; i++) {
        void *jpeg = NULL;
        size_t size = 0;
        CHECK_OK(rf_synthetic_jpeg(5, i, 40, 30, &jpeg, &size));
        /* sample 7 is cut short, under the tricky name */
        CHECK_OK(rf_pack_writer_add(w, RF_SAMPLE_JPEG, jpeg,
                                    i == 7 ? size / 2 : size, (int64_t)(i % 2),
                                    i == 7 ? TRICKY_NAME : "good.jpg"));
        free(jpeg);
    }
    CHECK_OK(rf_pack_writer_finish(w, NULL));
    rf_config *cfg = jpeg_folder_config(pack, 2, RF_TRANSFORM_EVAL);
    rf_loader *l = test_open_loader(cfg);
    CHECK_EQ(test_drain(l, NULL, NULL), RF_E_CORRUPT_SAMPLE);
    rf_failed_sample f;
    CHECK_OK(rf_loader_failed_sample(l, &f));
    CHECK_EQ(f.index, 7);
    CHECK_STR_EQ(f.path, pack);
    CHECK_STR_EQ(f.name, TRICKY_NAME);
    char reason[512];
    decode_reason(pack, cfg, 7, "a.pack: ", reason, sizeof(reason));
    CHECK_STR_EQ(f.reason, reason);
    CHECK(f.epoch == 0 || f.epoch == 1);
    rf_loader_close(l);
    rf_config_free(cfg);
    unlink(pack);
}

TEST_CASE(test_skip_limit_fields, "fields",
          "past the skip limit: the sample that went past it")
{
    char folder[400], name[600], second[800];
    folder_with_a_bad_file("skip", folder, sizeof(folder), name, sizeof(name));
    rf__format(second, sizeof(second), "%s/class_0/also bad.jpg", folder);
    write_truncated_jpeg(second, 2);
    rf_config *cfg = jpeg_folder_config(folder, 1, RF_TRANSFORM_EVAL);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SHUFFLE, 0));
    test_set_skip(cfg, 1, 1000000); /* the second bad file ends the run */
    rf_loader *l = test_open_loader(cfg);
    CHECK_EQ(test_drain(l, NULL, NULL), RF_E_CORRUPT_SAMPLE);
    rf_failed_sample f;
    CHECK_OK(rf_loader_failed_sample(l, &f));
    rf_sample_error first;
    CHECK_EQ(rf_loader_sample_errors(l, &first, 1), 2);
    /* in order (no shuffle): the long class folder sorts first */
    CHECK_EQ(first.index, index_of(folder, name));
    CHECK_EQ(f.index, index_of(folder, "class_0/also bad.jpg"));
    CHECK_STR_EQ(f.path, second);
    CHECK_CONTAINS(rf_loader_error(l), f.reason);
    CHECK(strncmp(f.reason, "premature end of data", 21) == 0);
    rf_loader_close(l);
    rf_config_free(cfg);
    remove_tree(folder);
}

/* Five bad files in one batch, past the four reasons a slot keeps: the
 * fifth, which goes past RF_PARAM_MAX_ERRORS 4, has no reason kept, and
 * its reason says so without its (long) description in front. */
TEST_CASE(test_reason_not_kept_fields, "fields",
          "past the reasons a batch keeps: the reason without the name")
{
    char folder[400], cls[700];
    rf__format(folder, sizeof(folder), "%s/five", base);
    copy_tree(root, folder);
    char long_name[260];
    memset(long_name, 'b', 250); /* sorts before class_0 */
    long_name[250] = '\0';
    rf__format(cls, sizeof(cls), "%s/%s", folder, long_name);
    CHECK_EQ(mkdir(cls, 0755), 0);
    for (uint64_t i = 0; i < 5; i++) {
        char file[800];
        rf__format(file, sizeof(file), "%s/%llu.jpg", cls,
                   (unsigned long long)i);
        write_truncated_jpeg(file, i);
    }
    rf_config *cfg = jpeg_folder_config(folder, 1, RF_TRANSFORM_EVAL);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SHUFFLE, 0));
    test_set_skip(cfg, 4, 1000000);
    rf_loader *l = test_open_loader(cfg);
    CHECK_EQ(test_drain(l, NULL, NULL), RF_E_CORRUPT_SAMPLE);
    rf_failed_sample f;
    CHECK_OK(rf_loader_failed_sample(l, &f));
    CHECK_EQ(f.index, 4);
    CHECK(strncmp(f.reason, "its reason was not kept", 23) == 0);
    char whole[800];
    rf__format(whole, sizeof(whole), "%s/4.jpg", cls);
    CHECK_STR_EQ(f.path, whole);
    rf_loader_close(l);
    rf_config_free(cfg);
    remove_tree(folder);
}

/* A run that another failure ended (a producer killed, no respawn left)
 * has no failed sample: -ENOENT, and out as it was. */
TEST_CASE(test_other_error_has_no_sample, "fields",
          "another error ends the run: -ENOENT")
{
    /* synthetic batches, more than the run can make before the kill */
    rf_loader *l = TEST_OPEN_LOADER(
        {RF_PARAM_PRODUCERS, 1}, {RF_PARAM_MAX_RESPAWNS, 0},
        {RF_PARAM_HEIGHT, 8}, {RF_PARAM_WIDTH, 8}, {RF_PARAM_QUIET, 1});
    int pid = 0;
    CHECK_EQ(list_children(&pid, 1), 1);
    CHECK_EQ(kill(pid, SIGKILL), 0);
    CHECK_EQ(test_drain(l, NULL, NULL), RF_E_PRODUCER_DIED);
    rf_failed_sample f;
    memset(&f, 0x5a, sizeof(f));
    f.index = 77;
    CHECK_EQ(rf_loader_failed_sample(l, &f), -ENOENT);
    CHECK_EQ(f.index, 77);
    rf_loader_close(l);
}

TEST_CASE(test_bad_arguments, "args", "NULL loader or out is -EINVAL")
{
    rf_failed_sample f;
    CHECK_EQ(rf_loader_failed_sample(NULL, &f), -EINVAL);
    rf_config *cfg = jpeg_folder_config(root, 1, RF_TRANSFORM_EVAL);
    rf_loader *l = test_open_loader(cfg);
    CHECK_EQ(rf_loader_failed_sample(l, NULL), -EINVAL);
    rf_loader_close(l);
    rf_config_free(cfg);
}

static void setup(void)
{
    scratch_make(base, sizeof(base), "failed-sample");
    rf__format(root, sizeof(root), "%s/good", base);
    CHECK_EQ(mkdir(root, 0755), 0);
    fill_jpeg_folder(root, 9, CLASSES, PER_CLASS);
}

static void teardown(void)
{
    remove_tree(base);
}

int main(int argc, char **argv)
{
    return TEST_MAIN_WITH(argc, argv, setup, teardown);
}
