/*
 * test-change.c - the dataset changing on disk while loaders read it.
 * Producers read the folder or packed file the loader opened, whatever
 * its path names later: a folder or pack replaced, or chdir() under a
 * relative path, changes nothing for producers started after it. A
 * loader names the classes of its own listing. A run started again from
 * another loader (rf_config_continue(), as the Python package does at
 * each restart) reads the samples that loader listed, and goes on with
 * its record of failed samples.
 *
 * Setup makes the folder of good JPEGs once; each case copies what it
 * changes.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/internal.h"
#include "harness.h"
#include "proc.h"
#include "scratch.h"
#include "test.h"

#define CLASSES 3
#define PER_CLASS 8
#define OUT 24 /* output height and width: jpeg_folder_config's */

/* The scratch folder, and in it the folder of good JPEGs. */
static char base[256], root[300];

static rf_config *folder_config(int64_t producers, rf_transform transform)
{
    return jpeg_folder_config(root, producers, transform);
}

/* Runs cfg to the end. Once the first batch is in, `change` runs and then
 * every producer is killed, so that their replacements start after the
 * change. Every sample must still be `reference`'s, the dataset as it was
 * when the loader opened it (open before the change). */
static void run_across_change(const rf_config *cfg, rf_dataset *reference,
                              void (*change)(void))
{
    rf_loader *l = test_open_loader(cfg);
    uint8_t expect[OUT * OUT * 3];
    uint64_t samples = 0;
    rf_batch b;
    int rc;
    while ((rc = rf_loader_next(l, &b)) > 0) {
        for (uint32_t i = 0; i < b.samples; i++) {
            CHECK_EQ(b.labels[i], (int64_t)(b.indices[i] / PER_CLASS));
            CHECK_OK(rf_dataset_decode(reference, cfg, b.epoch, b.indices[i],
                                       expect));
            CHECK(memcmp((uint8_t *)b.data + i * b.sample_bytes, expect,
                         b.sample_bytes) == 0);
        }
        samples += b.samples;
        CHECK_OK(rf_loader_release(l, &b));
        if (change) {
            change();
            change = NULL;
            int pids[8];
            const int n = list_children(pids, 8);
            CHECK_EQ(n, 2);
            for (int k = 0; k < n; k++)
                CHECK_EQ(kill(pids[k], SIGKILL), 0);
        }
    }
    if (rc < 0)
        fprintf(stderr, "%s\n", rf_loader_error(l));
    CHECK_EQ(rc, 0);
    CHECK_EQ(samples, 2 * CLASSES * PER_CLASS);
    rf_stats st;
    CHECK_OK(rf_loader_stats(l, &st));
    CHECK_GE(st.respawns, 2);
    rf_loader_close(l);
}

static char moving[300], moved[300], other[300], pack[300], new_pack[300];

/* A folder moved away and another, with other pixels under the same
 * names, put in its place (a new version of the dataset). */
static void replace_folder(void)
{
    CHECK_EQ(rename(moving, moved), 0);
    CHECK_EQ(rename(other, moving), 0);
}

/* A packed file replaced by rename, as ringfeed-pack writes one. */
static void replace_pack(void)
{
    CHECK_EQ(rename(new_pack, pack), 0);
}

/* The caller changes folder: the relative path now names nothing. */
static void leave_folder(void)
{
    CHECK_EQ(chdir("/"), 0);
}

/* FOLDER's samples, in order, into a packed file. */
static void pack_folder(const char *folder, const char *path)
{
    rf_dataset *ds = NULL;
    CHECK_OK(rf_dataset_open(&ds, folder, NULL));
    rf_pack_writer *w = NULL;
    CHECK_OK(rf_pack_writer_create(&w, path, 0, 0, 0, RF_LAYOUT_NHWC, NULL, 0,
                                   NULL));
    for (uint64_t i = 0; i < rf_dataset_size(ds); i++) {
        rf_sample_info info;
        CHECK_OK(rf_dataset_read(ds, i, &info));
        CHECK_OK(rf_pack_writer_add(w, info.kind, info.data, info.size,
                                    info.label, info.name));
    }
    CHECK_OK(rf_pack_writer_finish(w, NULL));
    rf_dataset_close(ds);
}

/* Producers read the dataset the loader opened, whatever its path names
 * later: a replacement that opened the path again would read the new
 * version (pixels that differ from the reference), fail on a pack whose
 * index is not the one handed over, or find nothing after chdir(). */
static void run_path_across_change(const char *path, void (*change)(void))
{
    rf_config *cfg = folder_config(2, RF_TRANSFORM_TRAIN);
    rf_dataset *reference = NULL;
    CHECK_OK(rf_config_set_path(cfg, path));
    CHECK_OK(rf_dataset_open(&reference, path, NULL));
    run_across_change(cfg, reference, change);
    rf_dataset_close(reference);
    rf_config_free(cfg);
}

/* The paths these cases use, beside the good folder. */
static void name_change_paths(void)
{
    rf__format(moving, sizeof(moving), "%s-moving", root);
    rf__format(moved, sizeof(moved), "%s-moved", root);
    rf__format(other, sizeof(other), "%s-other", root);
    rf__format(pack, sizeof(pack), "%s-a.pack", root);
    rf__format(new_pack, sizeof(new_pack), "%s-b.pack", root);
}

/* Another version of the dataset: other pixels under the same names. */
static void make_other_version(void)
{
    CHECK_EQ(mkdir(other, 0755), 0);
    fill_jpeg_folder(other, 10, CLASSES, PER_CLASS);
}

TEST_CASE(test_folder_replaced_during_run, "change",
          "folder replaced during the run")
{
    name_change_paths();
    copy_tree(root, moving);
    make_other_version();
    run_path_across_change(moving, replace_folder);
}

TEST_CASE(test_pack_replaced_during_run, "change",
          "pack replaced by rename during the run")
{
    name_change_paths();
    make_other_version();
    pack_folder(root, pack);
    pack_folder(other, new_pack);
    run_path_across_change(pack, replace_pack);
}

/* A loader names the classes of the listing its producers read: a class
 * folder added since (one that sorts first, so every label's name would
 * shift) is not among them, and opening the path again does see it. */
TEST_CASE(test_class_names_of_the_loaders_listing, "change",
          "class names are those of the loader's listing")
{
    char copy[400], added[500], name[64];
    rf__format(copy, sizeof(copy), "%s-classes", root);
    copy_tree(root, copy);
    rf_config *cfg = jpeg_folder_config(copy, 1, RF_TRANSFORM_TRAIN);
    rf_loader *l = test_open_loader(cfg);
    rf__format(added, sizeof(added), "%s/class_", copy); /* sorts first */
    CHECK_EQ(mkdir(added, 0755), 0);
    rf__format(added, sizeof(added), "%s/class_/a.jpg", copy);
    write_file(added, "x", 1);
    for (uint32_t c = 0; c < CLASSES; c++) {
        char want[32];
        rf__format(want, sizeof(want), "class_%u", c);
        CHECK_OK(rf_loader_class_name(l, c, name, sizeof(name)));
        CHECK_STR_EQ(name, want);
    }
    CHECK_EQ(rf_loader_class_name(l, CLASSES, name, sizeof(name)), -ERANGE);
    CHECK_EQ(rf_loader_class_name(l, 0, name, 0), -EINVAL);
    rf_dataset *now = NULL;
    CHECK_OK(rf_dataset_open(&now, copy, NULL));
    CHECK_OK(rf_dataset_class_name(now, 0, name, sizeof(name)));
    CHECK_STR_EQ(name, "class_");
    rf_dataset_close(now);
    rf_loader_close(l);
    rf_config_free(cfg);
    cfg = rf_config_create(); /* synthetic: no names */
    CHECK_OK(rf_config_set(cfg, RF_PARAM_PRODUCERS, 1));
    l = test_open_loader(cfg);
    CHECK_EQ(rf_loader_class_name(l, 0, name, sizeof(name)), -ENOTSUP);
    rf_loader_close(l);
    rf_config_free(cfg);
    remove_tree(copy);
}

TEST_CASE(test_relative_path_after_chdir, "change",
          "relative path, then chdir()")
{
    char copy[400];
    rf__format(copy, sizeof(copy), "%s-chdir", root);
    copy_tree(root, copy);
    CHECK_EQ(chdir(copy), 0);
    run_path_across_change(".", leave_folder);
}

/* ---- a run started again from another loader ---------------------------- */

/* The folder changes after the first loader listed it: a class folder
 * that sorts first (every label's name would shift) with a good image,
 * and one file removed. */
static void change_folder(const char *copy, const char *victim)
{
    char added[500];
    rf__format(added, sizeof(added), "%s/class_", copy);
    CHECK_EQ(mkdir(added, 0755), 0);
    rf__format(added, sizeof(added), "%s/class_/new.jpg", copy);
    write_synthetic_jpeg(added, 2, 7, 50, 40);
    CHECK_EQ(unlink(victim), 0);
}

/* Runs l to the end: every sample but the removed one, once an epoch,
 * under its first listing's label; the removed one skipped by its path. */
static void run_on_first_listing(rf_loader *l, const char *victim)
{
    const uint64_t gone = PER_CLASS + 3; /* class_1/img_3.jpg */
    uint64_t samples = 0, skipped = 0;
    rf_batch b;
    int rc;
    while ((rc = rf_loader_next(l, &b)) > 0) {
        for (uint32_t i = 0; i < b.samples; i++) {
            CHECK(b.indices[i] != gone);
            CHECK_EQ(b.labels[i], (int64_t)(b.indices[i] / PER_CLASS));
        }
        samples += b.samples;
        skipped += b.skipped;
        CHECK_OK(rf_loader_release(l, &b));
    }
    CHECK_EQ(rc, 0);
    CHECK_EQ(samples, 2 * (CLASSES * PER_CLASS - 1));
    CHECK_EQ(skipped, 2);
    rf_sample_error failed;
    CHECK_EQ(rf_loader_sample_errors(l, &failed, 1), 1);
    CHECK_EQ(failed.index, gone);
    CHECK_CONTAINS(failed.message, victim);
}

TEST_CASE(test_restart_reads_the_first_listing, "listing",
          "a run started from a loader's listing reads its samples")
{
    char copy[400], victim[500];
    rf__format(copy, sizeof(copy), "%s-kept", root);
    rf__format(victim, sizeof(victim), "%s/class_1/img_3.jpg", copy);
    copy_tree(root, copy);
    rf_config *cfg = jpeg_folder_config(copy, 1, RF_TRANSFORM_EVAL);
    test_set_skip(cfg, 0, 1000000); /* no limit */
    const int fds = count_entries("/proc/self/fd");
    rf_loader *first = test_open_loader(cfg);
    rf_stats listed, now;
    CHECK_OK(rf_loader_stats(first, &listed));
    CHECK_OK(rf_config_continue(cfg, first));
    CHECK_OK(rf_config_set_path(cfg, copy)); /* the same path: kept */
    rf_loader_close(first);
    CHECK_EQ(count_entries("/proc/self/fd"), fds + 2); /* the config's */
    change_folder(copy, victim);
    /* the index cache would list the changed folder: not used */
    CHECK_OK(rf_config_set(cfg, RF_PARAM_INDEX_CACHE, 1));
    rf_loader *l = test_open_loader(cfg);
    CHECK_OK(rf_loader_stats(l, &now));
    CHECK_EQ(now.dataset_samples, listed.dataset_samples);
    CHECK_EQ(now.listing_digest, listed.listing_digest);
    run_on_first_listing(l, victim);
    rf_loader_close(l);
    /* another path drops the listing: the folder is listed as it is now */
    CHECK_OK(rf_config_set_path(cfg, root));
    CHECK_OK(rf_config_set_path(cfg, copy));
    l = test_open_loader(cfg);
    CHECK_OK(rf_loader_stats(l, &now));
    CHECK(now.listing_digest != listed.listing_digest);
    rf_loader_close(l);
    l = test_open_loader(cfg);
    CHECK_OK(rf_config_continue(cfg, l));
    CHECK_OK(rf_config_continue(cfg, l)); /* the first two are closed */
    rf_loader_close(l);
    CHECK_EQ(count_entries("/proc/self/fd"), fds + 2);
    rf_config_free(cfg); /* closes the two fds it kept */
    CHECK_EQ(count_entries("/proc/self/fd"), fds);
    remove_tree(copy);
}

TEST_CASE(test_listing_refused_without_one, "listing",
          "no listing from a synthetic loader or NULL")
{
    rf_config *cfg = rf_config_create(), *synthetic = rf_config_create();
    CHECK_OK(rf_config_set(synthetic, RF_PARAM_PRODUCERS, 1));
    rf_loader *l = test_open_loader(synthetic);
    CHECK_EQ(rf_config_continue(cfg, l), -EINVAL);
    CHECK_CONTAINS(rf_config_error(cfg), "synthetic source has no listing");
    CHECK_EQ(rf_config_continue(cfg, NULL), -EINVAL);
    CHECK_CONTAINS(rf_config_error(cfg), "the loader is NULL");
    CHECK_EQ(rf_config_continue(NULL, l), -EINVAL);
    CHECK_STR_EQ(rf_config_get_path(cfg), ""); /* unchanged */
    rf_loader_close(l);
    rf_config_free(synthetic);
    rf_config_free(cfg);
}

/* A copy of the good folder where sample 0 (class_0/img_0.jpg) does not
 * decode, and a config over it that skips failures with no share limit
 * and runs epoch 0 only. */
static rf_config *skipping_copy(char *copy, size_t len, const char *name)
{
    char bad[500];
    rf__format(copy, len, "%s-%s", root, name);
    rf__format(bad, sizeof(bad), "%s/class_0/img_0.jpg", copy);
    copy_tree(root, copy);
    write_file(bad, "not a jpeg", 10);
    rf_config *cfg = jpeg_folder_config(copy, 1, RF_TRANSFORM_EVAL);
    test_set_skip(cfg, 0, 1000000);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_EPOCHS, 1));
    return cfg;
}

/* Runs epoch 0 from cfg, then makes cfg continue that run at epoch 1. */
static void run_first_epoch_then_continue(rf_config *cfg)
{
    rf_loader *first = test_open_loader(cfg);
    CHECK_EQ(test_drain(first, NULL, NULL), 0);
    CHECK_OK(rf_config_continue(cfg, first));
    rf_loader_close(first);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_START_EPOCH, 1));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_EPOCHS, 2));
}

/* A file that fails in every epoch, started again at epoch 1: listed
 * once, counted once an epoch, said once in the whole run (each start
 * said it again, and listed only its own failures). */
TEST_CASE(test_restart_keeps_the_failures, "listing",
          "a run started again goes on with its failed samples")
{
    char copy[400];
    rf_config *cfg = skipping_copy(copy, sizeof(copy), "failing");
    struct test_messages said = {0};
    CHECK_OK(rf_config_set_message_handler(cfg, test_collect_message, &said));
    run_first_epoch_then_continue(cfg);
    CHECK_EQ(said.count, 1);
    CHECK_CONTAINS(said.last, "left out");
    rf_loader *l = test_open_loader(cfg);
    uint64_t skipped = 0;
    CHECK_EQ(test_drain(l, NULL, &skipped), 0);
    CHECK_EQ(skipped, 1);
    CHECK_EQ(said.count, 1); /* not said again */
    rf_sample_error failed[2];
    CHECK_EQ(rf_loader_sample_errors(l, failed, 2), 1);
    CHECK_EQ(failed[0].index, 0);
    CHECK_EQ(failed[0].epoch, 0); /* its first failure, in the first start */
    rf_stats st;
    CHECK_OK(rf_loader_stats(l, &st));
    CHECK_EQ(st.failed_samples, 2); /* once an epoch */
    rf_loader_close(l);
    rf_config_free(cfg);
    remove_tree(copy);
}

/* RF_PARAM_MAX_ERRORS counts the samples that failed before the restart:
 * sample 0 in epoch 0, then (sample 0 mended) another one removed, in
 * epoch 1, is the second of the run, one more than 1 allows. */
TEST_CASE(test_restart_counts_earlier_failures, "listing",
          "the run's error limit counts failures before the restart")
{
    char copy[400], path[500];
    rf_config *cfg = skipping_copy(copy, sizeof(copy), "limit");
    test_set_skip(cfg, 1, 1000000);
    run_first_epoch_then_continue(cfg);
    rf__format(path, sizeof(path), "%s/class_0/img_0.jpg", copy);
    write_synthetic_jpeg(path, 2, 7, 50, 40); /* mended */
    rf__format(path, sizeof(path), "%s/class_2/img_5.jpg", copy);
    CHECK_EQ(unlink(path), 0);
    rf_loader *l = test_open_loader(cfg);
    CHECK_EQ(test_drain(l, NULL, NULL), RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(rf_loader_error(l),
                   "2 samples have failed, more than RF_PARAM_MAX_ERRORS 1");
    rf_loader_close(l);
    rf_config_free(cfg);
    remove_tree(copy);
}

/* Out of fds, rf_config_continue() fails with the reason and leaves
 * nothing behind: with one fd free, the copy of the first of its two fds
 * is closed again, and the config lists its path as before. */
TEST_CASE(test_continue_out_of_fds, "listing",
          "out of fds: refused, the config unchanged")
{
    rf_config *cfg = jpeg_folder_config(root, 1, RF_TRANSFORM_EVAL);
    rf_loader *l = test_open_loader(cfg);
    struct rlimit saved, tight;
    CHECK_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
    int spare[64], n = 0;
    tight = saved;
    tight.rlim_cur = (rlim_t)count_entries("/proc/self/fd") + 1;
    CHECK_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
    while (n < 64 && (spare[n] = open("/dev/null", O_RDONLY)) >= 0)
        n++; /* every fd below the limit taken */
    CHECK_GT(n, 0);
    close(spare[--n]); /* but one: the first copy is made, then closed */
    const int fds = count_entries("/proc/self/fd");
    CHECK_EQ(rf_config_continue(cfg, l), -EMFILE);
    CHECK_EQ(count_entries("/proc/self/fd"), fds);
    CHECK_CONTAINS(rf_config_error(cfg), "cannot keep the dataset");
    while (n > 0)
        close(spare[--n]);
    CHECK_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
    rf_loader_close(l);
    CHECK_STR_EQ(rf_config_get_path(cfg), root);
    l = test_open_loader(cfg); /* lists the path: nothing was carried */
    rf_loader_close(l);
    rf_config_free(cfg);
}

static void setup(void)
{
    scratch_make(base, sizeof(base), "change");
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
