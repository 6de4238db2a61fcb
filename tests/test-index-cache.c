/*
 * test-index-cache.c - the index cache of a folder dataset
 * (rf__dataset_open_cached(), the .ringfeed-index file): reused while
 * nothing changed and never stale (files added in nested, hidden and
 * back-dated folders, a cache file touched, a class link re-pointed); a
 * damaged trailer or a listing that is a hole is listed again, the latter
 * without being copied; a writer SIGKILLed while it writes leaves nothing
 * behind in the folder; a cache that a full or read-only file system
 * cannot take is not kept, the folder is read all the same, and a loader
 * says why once per open (nothing where the cache is kept). Each case
 * makes its folders in the scratch folder.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/internal.h"
#include "source/dataset.h"
#include "source/pack.h"
#include "dataset-files.h"
#include "harness.h"
#include "scratch.h"
#include "test.h"

SCRATCH_FOLDER_FIXTURE(base, "index-cache")

/* ---- the index cache ---------------------------------------------------- */

/* Why the last open_cached() kept no cache: 0, or -errno. */
static int last_unkept;

/* rf__dataset_open_cached(), saying why no cache was kept in
 * last_unkept. */
static int open_cached(rf_dataset **out, const char *path, char **errp)
{
    return rf__dataset_open_cached(out, path, errp, &last_unkept);
}

/* Samples of the folder as rf__dataset_open_cached() sees it. */
static uint64_t cached_size(const char *path)
{
    rf_dataset *ds =
        open_with_or_die(open_cached, "rf__dataset_open_cached", path);
    const uint64_t samples = rf_dataset_size(ds);
    rf_dataset_close(ds);
    return samples;
}

static ino_t inode_of(const char *path)
{
    struct stat st;
    CHECK_EQ(stat(path, &st), 0);
    return st.st_ino;
}

/* A cache whose trailer is damaged in any byte of its fixed part is not
 * used: the folder is listed again (the cache is rewritten: a new inode)
 * and gives the same samples. The byte counts and the folder count are
 * covered by the CRC, so a damaged count cannot send the reader past the
 * end. */
static void test_index_cache_trailer_damage(const char *root, const char *cache,
                                            uint64_t samples)
{
    for (size_t k = 0; k < 40; k++) {
        size_t size;
        uint8_t *bytes = read_whole(cache, &size);
        struct rf__index_header h;
        char why[256];
        CHECK_OK(rf__index_header_decode(&h, bytes, why, sizeof(why)));
        CHECK(h.total_size + 40 <= size);
        bytes[h.total_size + k] ^= 0x01;
        const int fd = open(cache, O_WRONLY | O_CLOEXEC);
        CHECK(fd >= 0);
        CHECK_EQ(pwrite(fd, bytes, size, 0), (ssize_t)size);
        close(fd);
        free(bytes);
        const ino_t damaged_inode = inode_of(cache);
        CHECK_EQ(cached_size(root), samples);
        CHECK(inode_of(cache) != damaged_inode);
    }
}

/* The listing a damaged cache's header claims, most of it a hole. */
#define SPARSE_LISTING (UINT64_C(2) << 30)

/* Writes over cache one whose header claims a SPARSE_LISTING-byte
 * listing, all a hole but for that header, followed by the cache's intact
 * trailer: fresh, as far as the trailer can tell. */
static void make_sparse_cache(const char *cache)
{
    size_t size;
    uint8_t *bytes = read_whole(cache, &size);
    struct rf__index_header h;
    char why[256];
    CHECK_OK(rf__index_header_decode(&h, bytes, why, sizeof(why)));
    const uint64_t trailer_at = h.total_size;
    h.samples = (SPARSE_LISTING - RF__INDEX_HEADER_SIZE) / RF__INDEX_ENTRY_SIZE;
    h.names_offset = h.total_size =
        RF__INDEX_HEADER_SIZE + h.samples * RF__INDEX_ENTRY_SIZE;
    h.names_size = 0;
    uint8_t header[RF__INDEX_HEADER_SIZE];
    rf__index_header_encode(&h, header);
    const int fd = open(cache, O_WRONLY | O_TRUNC | O_CLOEXEC);
    CHECK(fd >= 0);
    CHECK_OK(rf__pwrite_all(fd, header, sizeof(header), 0));
    CHECK_OK(rf__pwrite_all(fd, bytes + trailer_at, size - trailer_at,
                            h.total_size));
    close(fd);
    free(bytes);
}

/* A cache made sparse (make_sparse_cache()) is not used, and costs
 * little: it is read a piece at a time and refused at its first empty
 * entry. It used to be copied whole, through a mapping of the file, into
 * a memfd before its checksum was compared: 2 GiB of memory. The folder
 * is listed again (the cache rewritten: a new inode). In a child, for its
 * peak RSS. */
static void test_index_cache_sparse_listing(const char *root, const char *cache,
                                            uint64_t samples)
{
    make_sparse_cache(cache);
    const ino_t damaged_inode = inode_of(cache);
    fflush(stdout);
    const pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        alarm(60);
        _exit(cached_size(root) == samples ? 0 : 1);
    }
    int status = 0;
    struct rusage ru;
    CHECK_EQ(wait4(child, &status, 0, &ru), child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    printf("  a cache claiming a %llu-byte listing, a hole: listed again, "
           "peak RSS %ld KiB\n",
           (unsigned long long)SPARSE_LISTING, ru.ru_maxrss);
    CHECK_LT((uint64_t)ru.ru_maxrss * 1024, UINT64_C(256) << 20);
    CHECK(inode_of(cache) != damaged_inode);
}

/* The cache must notice every change a new listing would see: files
 * added in a nested folder, in a hidden class folder, and in a folder
 * whose mtime was set back afterwards (rsync -a, tar, cp -a do that). */
TEST_CASE(test_index_cache_never_stale, "cache",
          "never stale: nested, hidden, back-dated, re-pointed")
{
    make_dir(at("cached"));
    make_dir(at("cached/c0"));
    make_dir(at("cached/c0/sub"));
    make_dir(at("cached/.hidden"));
    make_dir(at("cached/c1"));
    make_file("cached/c0/sub/a.jpg");
    make_file("cached/.hidden/b.jpg");
    make_file("cached/c1/c.jpg");
    char root[1024], cache[1024]; /* at()'s buffers are reused */
    rf__format(root, sizeof(root), "%s", at("cached"));
    rf__format(cache, sizeof(cache), "%s", at("cached/.ringfeed-index"));
    usleep(50000); /* past the timestamp tick of the folders' creation */
    CHECK_EQ(cached_size(root), 3);
    const ino_t written = inode_of(cache);
    CHECK_EQ(cached_size(root), 3);
    CHECK_EQ(inode_of(cache), written); /* reused, not written again */
    usleep(50000);
    make_file("cached/c0/sub/new.jpg");
    CHECK_EQ(cached_size(root), 4);
    usleep(50000);
    make_file("cached/.hidden/new.jpg");
    CHECK_EQ(cached_size(root), 5);
    usleep(50000);
    make_file("cached/c1/new.jpg");
    const struct timespec old[2] = {{1577836800, 0}, {1577836800, 0}};
    CHECK_EQ(utimensat(AT_FDCWD, at("cached/c1"), old, 0), 0);
    CHECK_EQ(cached_size(root), 6);
    /* The cache file's own times mean nothing: moved forward (touch, a
     * sweep that keeps scratch files from being purged), a change made
     * before is still seen. */
    usleep(50000);
    make_file("cached/c1/newer.jpg");
    const struct timespec later[2] = {{4102444800, 0}, {4102444800, 0}};
    CHECK_EQ(utimensat(AT_FDCWD, cache, later, 0), 0);
    CHECK_EQ(cached_size(root), 7);
    /* A class folder reached through a symbolic link that is pointed at
     * another folder (one older than the cache): the name leads to
     * other files. */
    make_dir(at("first"));
    make_file("first/1.jpg");
    make_file("first/2.jpg");
    make_dir(at("second"));
    make_file("second/3.jpg");
    make_link("../first", "cached/linked");
    usleep(50000);
    CHECK_EQ(cached_size(root), 9);
    CHECK_EQ(cached_size(root), 9);
    CHECK_EQ(unlink(at("cached/linked")), 0);
    make_link("../second", "cached/linked");
    CHECK_EQ(cached_size(root), 8);
    printf("index cache: nested, hidden, back-dated changes, a cache file "
           "touched and a re-pointed class link seen\n");
}

/* base/NAME with 3 samples in 2 class folders, and its cache written:
 * root and cache get their paths. */
static void make_cached_folder(const char *name, char *root, char *cache,
                               size_t len)
{
    static const char *const files[] = {"c0/a.jpg", "c1/b.jpg", "c1/c.jpg"};
    rf__format(root, len, "%s", at("%s", name));
    rf__format(cache, len, "%s/.ringfeed-index", root);
    make_dir(root);
    make_dir(at("%s/c0", name));
    make_dir(at("%s/c1", name));
    for (size_t i = 0; i < 3; i++) {
        char rel[64];
        rf__format(rel, sizeof(rel), "%s/%s", name, files[i]);
        make_file(rel);
    }
    CHECK_EQ(cached_size(root), 3);
    CHECK_EQ(access(cache, R_OK), 0);
}

TEST_CASE(test_index_cache_damaged_trailer, "cache",
          "a damaged trailer: listed again")
{
    char root[1024], cache[1024];
    make_cached_folder("trailer", root, cache, sizeof(root));
    test_index_cache_trailer_damage(root, cache, 3);
}

TEST_CASE(test_index_cache_sparse, "cache",
          "a listing that is a hole: refused, little memory")
{
    char root[1024], cache[1024];
    make_cached_folder("sparse", root, cache, sizeof(root));
    test_index_cache_sparse_listing(root, cache, 3);
}

/* Entries of folder other than its class folders c0..c9 and the cache:
 * what a writer killed half-way would have left. */
static int leftovers(const char *folder)
{
    DIR *dir = opendir(folder);
    CHECK(dir != NULL);
    int found = 0;
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        const char *n = e->d_name;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0 ||
            strcmp(n, ".ringfeed-index") == 0 ||
            (n[0] == 'c' && n[1] >= '0' && n[1] <= '9' && n[2] == '\0'))
            continue;
        printf("  left behind: %s\n", n);
        found++;
    }
    closedir(dir);
    return found;
}

/* A child writes the cache again and again (deleting it each time, so
 * that it lists the folder) and is SIGKILLed at random moments: nothing
 * it was writing may be left in the dataset's folder. Where the file
 * system has no O_TMPFILE (NFS) the cache is written under a temporary
 * name, and this is not checked. */
TEST_CASE(test_index_cache_killed_leaves_nothing, "cache",
          "killed while written: nothing left behind")
{
    char root[1024], cache[1024];
    rf__format(root, sizeof(root), "%s", at("killed"));
    rf__format(cache, sizeof(cache), "%s", at("killed/.ringfeed-index"));
    make_dir(root);
    const int probe = open(root, O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
    if (probe < 0)
        TEST_SKIP_BECAUSE("no O_TMPFILE in %s (%s)", root, strerror(errno));
    close(probe);
    for (int c = 0; c < 10; c++) {
        make_dir(at("killed/c%d", c));
        for (int f = 0; f < 300; f++)
            write_file(at("killed/c%d/%03d.jpg", c, f), "", 0);
    }
    const int kills = 30;
    int written = 0;
    srand(7);
    for (int k = 0; k < kills; k++) {
        const pid_t child = fork();
        CHECK(child >= 0);
        if (child == 0) {
            for (;;) {
                unlink(cache);
                rf_dataset *ds = NULL;
                char *err = NULL;
                int unkept = 0;
                if (rf__dataset_open_cached(&ds, root, &err, &unkept) != 0)
                    _exit(1);
                rf_dataset_close(ds);
            }
        }
        usleep(1000 + (useconds_t)(rand() % 20000));
        CHECK_EQ(kill(child, SIGKILL), 0);
        int status;
        CHECK_EQ(waitpid(child, &status, 0), child);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        written += access(cache, F_OK) == 0;
        CHECK_EQ(leftovers(root), 0);
    }
    CHECK_EQ(cached_size(root), 3000);
    printf("index cache killed: %d kills while writing it, nothing left "
           "behind (%d times a finished cache)\n",
           kills, written);
}

/* Free blocks of the file system of path. */
static unsigned long long free_blocks(const char *path)
{
    struct statvfs fs;
    CHECK_EQ(statvfs(path, &fs), 0);
    return (unsigned long long)fs.f_bfree;
}

/* What a loader with RF_PARAM_INDEX_CACHE opened on folder (and closed
 * at once) said through its message handler. */
static struct test_messages loader_said(const char *folder)
{
    struct test_messages m = {0};
    rf_config *cfg = TEST_CONFIG(
        {RF_PARAM_HEIGHT, 8}, {RF_PARAM_WIDTH, 8}, {RF_PARAM_BATCH_SIZE, 2},
        {RF_PARAM_PRODUCERS, 1}, {RF_PARAM_INDEX_CACHE, 1});
    CHECK_OK(rf_config_set_path(cfg, folder));
    CHECK_OK(rf_config_set_message_handler(cfg, test_collect_message, &m));
    rf_loader_close(test_open_loader(cfg));
    rf_config_free(cfg);
    return m;
}

/* The loader's one message for a cache the folder at root cannot take:
 * the folder, the cause and what to do, in the C API's terms. */
static void check_unkept_said(const char *root, const char *cause,
                              const char *advice)
{
    const struct test_messages m = loader_said(root);
    CHECK_EQ(m.count, 1);
    CHECK_CONTAINS(m.last, "the index cache (RF_PARAM_INDEX_CACHE) of '");
    CHECK_CONTAINS(m.last, root);
    CHECK_CONTAINS(m.last, "is not kept: cannot write .ringfeed-index in it");
    CHECK_CONTAINS(m.last, cause);
    CHECK_CONTAINS(m.last, "so every open lists the folder again");
    CHECK_CONTAINS(m.last, advice);
    CHECK_CONTAINS(m.last, "or set RF_PARAM_INDEX_CACHE to 0 to stop trying");
}

/* A cache that does not fit (the disk fills up while it is written) or
 * cannot be made (a read-only file system, as shared datasets are
 * mounted) is not kept: the open still gives every sample, nothing is
 * left in the folder (no half-written cache, no temporary file) and the
 * space is given back; once there is room, the next open writes a whole
 * cache, which the one after reuses. rf__dataset_open_cached() says why
 * (-ENOSPC, -EROFS), and a loader says it once per open through its
 * message handler, with what to do. On a 64 KiB tmpfs (the listing of
 * 3000 files is about 80 KiB), in a mount namespace of this case's
 * process, so that the mount goes with it however the case ends;
 * skipped where one cannot be made (not root). */
TEST_CASE(test_index_cache_full_or_read_only, "cache",
          "a full or read-only file system: no cache, still read, said")
{
    char root[1024], cache[1024];
    rf__format(root, sizeof(root), "%s", at("small-fs"));
    rf__format(cache, sizeof(cache), "%s", at("small-fs/.ringfeed-index"));
    make_dir(root);
    if (unshare(CLONE_NEWNS) != 0 ||
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k") != 0)
        TEST_SKIP_BECAUSE("no small tmpfs (unshare or mount: %s; needs root)",
                          strerror(errno));
    for (int c = 0; c < 10; c++) {
        make_dir(at("small-fs/c%d", c));
        for (int f = 0; f < 300; f++) /* empty files take no blocks */
            write_file(at("small-fs/c%d/%03d.jpg", c, f), "", 0);
    }
    const unsigned long long free_before = free_blocks(root);
    for (int k = 0; k < 2; k++) {
        CHECK_EQ(cached_size(root), 3000);
        CHECK_EQ(last_unkept, -ENOSPC);
        CHECK_EQ(access(cache, F_OK), -1);
        CHECK_EQ(leftovers(root), 0);
        CHECK_EQ(free_blocks(root), free_before);
    }
    check_unkept_said(root, strerror(ENOSPC),
                      "free some space on its file system and open it once "
                      "to write the cache");
    CHECK_EQ(leftovers(root), 0);
    CHECK_EQ(mount(NULL, root, NULL, MS_REMOUNT, "size=1m"), 0);
    CHECK_EQ(cached_size(root), 3000);
    CHECK_EQ(last_unkept, 0);
    CHECK_EQ(access(cache, R_OK), 0);
    const ino_t written = inode_of(cache);
    CHECK_EQ(cached_size(root), 3000);
    CHECK_EQ(last_unkept, 0);
    CHECK_EQ(inode_of(cache), written); /* whole: reused */
    CHECK_EQ(unlink(cache), 0);
    CHECK_EQ(mount(NULL, root, NULL, MS_REMOUNT | MS_RDONLY, NULL), 0);
    for (int k = 0; k < 2; k++) {
        CHECK_EQ(cached_size(root), 3000);
        CHECK_EQ(last_unkept, -EROFS);
        CHECK_EQ(access(cache, F_OK), -1);
        CHECK_EQ(leftovers(root), 0);
    }
    for (int k = 0; k < 2; k++) /* once per open, every open */
        check_unkept_said(root, strerror(EROFS),
                          "remount it read-write and open it once to write "
                          "the cache");
    printf("index cache on a full, then read-only file system: not kept, "
           "nothing left behind, all 3000 samples read, said once per "
           "loader opened\n");
}

/* A folder that takes the cache: a loader says nothing of it, neither
 * when it writes the cache nor when it uses it. */
TEST_CASE(test_index_cache_kept_silently, "cache",
          "a writable folder: the cache written and used, nothing said")
{
    char root[256], cache[1024]; /* fill_jpeg_folder() adds to root */
    rf__format(root, sizeof(root), "%s", at("writable"));
    rf__format(cache, sizeof(cache), "%s", at("writable/.ringfeed-index"));
    make_dir(root);
    fill_jpeg_folder(root, 3, 2, 3);
    usleep(50000); /* past the timestamp tick of the folders' creation */
    CHECK_EQ(loader_said(root).count, 0); /* written */
    CHECK_EQ(access(cache, R_OK), 0);
    const ino_t written = inode_of(cache);
    CHECK_EQ(loader_said(root).count, 0); /* used */
    CHECK_EQ(inode_of(cache), written);
    CHECK_EQ(cached_size(root), 6);
    CHECK_EQ(last_unkept, 0);
}

int main(int argc, char **argv)
{
    return TEST_MAIN_WITH(argc, argv, scratch_setup, scratch_teardown);
}
