/*
 * test-dataset.c - rf_dataset over folders and packed files, and
 * rf_synthetic_jpeg().
 *
 * A folder tree built to trip every rule (classes created out of order,
 * hidden and symlinked class folders, nested folders whose sort order is
 * not depth-first, mixed-case extensions, files that are not images,
 * symbolic link loops) lists exactly as torchvision's ImageFolder would
 * (the expected list is written out below). The folder listing survives
 * the memfd round trip to producers, and a damaged or planted listing is
 * refused. Packed files round-trip bytes, labels, kinds, names,
 * dictionary and shape; every kind of damage is refused with a reason
 * that names the file (and, for a size the file cannot hold, the field
 * and both numbers). An index cache whose listing is a hole is refused
 * without being copied. Listing 20,000 files is timed (printed, not
 * asserted). Setup makes the folder tree and the test pack once, in a
 * scratch folder; a case that adds to the tree takes it out again, and
 * the damaged packs are copies.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <turbojpeg.h>
#include <unistd.h>
#include <zdict.h>
#include <zstd.h>

#include "common/internal.h"
#include "source/dataset.h"
#include "source/pack.h"
#include "harness.h"
#include "scratch.h"
#include "test.h"

static char base[256]; /* the scratch folder of this run (setup) */

/* ---- helpers ------------------------------------------------------------ */

/* base/<formatted>, in test.h's rotating buffers. */
#define at(...) test_path(base, __VA_ARGS__)

static void make_dir(const char *path)
{
    if (mkdir(path, 0755) != 0) {
        fprintf(stderr, "mkdir %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

/* Writes "contents of <name>" into the file, so reads can be checked. */
static void make_file(const char *rel)
{
    char text[256];
    rf__format(text, sizeof(text), "contents of %s", rel);
    write_file(at("%s", rel), text, strlen(text));
}

static void make_link(const char *target, const char *rel)
{
    CHECK_EQ(symlink(target, at("%s", rel)), 0);
}

static double seconds_since(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) +
           (double)(now.tv_nsec - start->tv_nsec) * 1e-9;
}

typedef int (*dataset_opener)(rf_dataset **, const char *, char **);

/* Opens path with `open` (named `what` in a failure) or fails the test. */
static rf_dataset *open_with_or_die(dataset_opener open, const char *what,
                                    const char *path)
{
    rf_dataset *ds = NULL;
    char *why = NULL;
    const int rc = open(&ds, path, &why);
    if (rc < 0)
        fprintf(stderr, "%s(%s): %s\n", what, path, why);
    CHECK_OK(rc);
    free(why);
    return ds;
}

static rf_dataset *open_or_die(const char *path)
{
    return open_with_or_die(rf_dataset_open, "rf_dataset_open", path);
}

/* Opens path expecting failure `code`, and a reason containing both
 * `needle` and the path. */
static void check_open_fails(const char *path, int code, const char *needle)
{
    rf_dataset *ds = NULL;
    char *why = NULL;
    const int rc = rf_dataset_open(&ds, path, &why);
    CHECK_EQ(rc, code);
    CHECK(ds == NULL);
    CHECK_CONTAINS(why, needle);
    CHECK_CONTAINS(why, path);
    printf("  refused as expected: %s\n", why);
    free(why);
}

/* ---- the index cache ---------------------------------------------------- */

/* Samples of the folder as rf__dataset_open_cached() sees it. */
static uint64_t cached_size(const char *path)
{
    rf_dataset *ds = open_with_or_die(rf__dataset_open_cached,
                                      "rf__dataset_open_cached", path);
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

static uint8_t *read_whole(const char *path, size_t *size);

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
                if (rf__dataset_open_cached(&ds, root, &err) != 0)
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

/* ---- CRC-32C ------------------------------------------------------------ */

TEST_CASE_LIMIT(test_crc32c, "crc32c",
                "check value and pieces, hardware and tables", 10)
{
    struct rf__crc32c c;
    rf__crc32c_init(&c);
    uint8_t data[1000];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)(i * 7 + 3);
    for (int hardware = 0; hardware < 2; hardware++) {
        if (hardware && !c.hardware)
            break;
        struct rf__crc32c forced = c;
        forced.hardware = hardware;
        CHECK_EQ(rf__crc32c(&forced, 0, "123456789", 9), 0xe3069283u);
        CHECK_EQ(rf__crc32c(&forced, 0, "", 0), 0);
        /* in pieces, at every alignment, the same as in one go */
        const uint32_t whole = rf__crc32c(&forced, 0, data, sizeof(data));
        for (size_t cut = 0; cut < 17; cut++) {
            const uint32_t first = rf__crc32c(&forced, 0, data, cut);
            CHECK_EQ(rf__crc32c(&forced, first, data + cut, sizeof(data) - cut),
                     whole);
        }
    }
    printf("crc32c: check value and pieces (hardware %s)\n",
           c.hardware ? "and tables" : "absent; tables");
}

/* ---- folders ------------------------------------------------------------ */

/* Created in an order that is not the sorted one. */
static void make_tree(void)
{
    make_dir(at("tree"));
    make_dir(at("tree/zebra"));
    make_file("tree/zebra/b.JPG");
    make_file("tree/zebra/a.jpeg");
    make_file("tree/zebra/notes.txt");
    make_dir(at("tree/zebra/a"));
    make_dir(at("tree/zebra/a/x")); /* walked after zebra/a-b */
    make_file("tree/zebra/a/x/z.tiff");
    make_link("../..", "tree/zebra/a/x/back"); /* a loop to zebra */
    make_file("tree/zebra/a/x.png");
    make_dir(at("tree/zebra/a-b"));
    make_file("tree/zebra/a-b/y.Tif");
    make_link(".", "tree/zebra/loop"); /* a loop to itself */
    make_dir(at("tree/apple"));
    make_file("tree/apple/2.bmp");
    make_file("tree/apple/10.bmp");
    make_file("tree/apple/1.bmp");
    make_file("tree/apple/.hidden.jpg");
    make_file("tree/apple/IMG.JPEG.txt");
    make_file("tree/apple/jpg");
    make_file("tree/apple/x\x0ejpg"); /* 0x0E is no '.', however folded */
    make_dir(at("tree/Apple"));
    make_file("tree/Apple/img.webp");
    make_link("../zebra/b.JPG", "tree/Apple/link.jpg");
    make_link("nowhere", "tree/Apple/dangling.jpg");
    make_dir(at("outside"));
    make_file("outside/m.ppm");
    make_link("../outside", "tree/mango"); /* a class folder by link */
    make_file("tree/top.jpg");             /* in no class: left out */
    make_dir(at("tree/.cache"));           /* a class, for torchvision */
    make_file("tree/.cache/c.PGM");
}

/* What torchvision.datasets.ImageFolder(tree).samples holds (the loops
 * aside: os.walk would go round them until ELOOP, listing files again as
 * zebra/loop/a.jpeg, zebra/loop/loop/a.jpeg, ...). Classes: ".cache",
 * "Apple", "apple", "mango", "zebra". */
static const struct expected_sample {
    const char *name;
    int64_t label;
} expected_tree[] = {
    {".cache/c.PGM", 0},    {"Apple/dangling.jpg", 1}, {"Apple/img.webp", 1},
    {"Apple/link.jpg", 1},  {"apple/.hidden.jpg", 2},  {"apple/1.bmp", 2},
    {"apple/10.bmp", 2},    {"apple/2.bmp", 2},        {"mango/m.ppm", 3},
    {"zebra/a.jpeg", 4},    {"zebra/b.JPG", 4},        {"zebra/a/x.png", 4},
    {"zebra/a-b/y.Tif", 4}, {"zebra/a/x/z.tiff", 4},
};
#define EXPECTED_TREE (sizeof(expected_tree) / sizeof(expected_tree[0]))

static void check_tree_listing(rf_dataset *ds)
{
    CHECK_EQ(rf_dataset_size(ds), EXPECTED_TREE);
    CHECK_EQ(rf_dataset_classes(ds), 5);
    for (uint64_t i = 0; i < EXPECTED_TREE; i++) {
        rf_sample_info info;
        const int rc = rf_dataset_read(ds, i, &info);
        if (i == 1) { /* the dangling link fails when read, by name */
            CHECK_EQ(rc, -ENOENT);
            CHECK_CONTAINS(rf_dataset_error(ds), "Apple/dangling.jpg");
            CHECK_CONTAINS(rf_dataset_error(ds), "sample 1");
            continue;
        }
        CHECK_OK(rc);
        if (strcmp(info.name, expected_tree[i].name) != 0) {
            fprintf(stderr, "sample %llu is %s, expected %s\n",
                    (unsigned long long)i, info.name, expected_tree[i].name);
            exit(1);
        }
        CHECK_EQ(info.label, expected_tree[i].label);
        CHECK_EQ(info.kind, RF_SAMPLE_JPEG);
        CHECK(memcmp(info.data, "contents of ", 12) == 0);
    }
    rf_sample_info info;
    CHECK_EQ(rf_dataset_read(ds, EXPECTED_TREE, &info), -ERANGE);
    CHECK_CONTAINS(rf_dataset_error(ds), "out of range");
}

TEST_CASE(test_folder_order, "folder",
          "torchvision's order, labels and class names")
{
    rf_dataset *ds = open_or_die(at("tree"));
    check_tree_listing(ds);
    /* the link's target and the file itself read the same bytes */
    rf_sample_info info;
    CHECK_OK(rf_dataset_read(ds, 3, &info));
    CHECK_CONTAINS((const char *)info.data, "tree/zebra/b.JPG");
    size_t dict_size = 1;
    CHECK(rf__dataset_dict(ds, &dict_size) == NULL);
    CHECK_EQ(dict_size, 0);
    /* torchvision's dataset.classes; "Apple/dangling.jpg", its first
     * sample, cannot be read, and the name is there all the same */
    static const char *const classes[] = {".cache", "Apple", "apple", "mango",
                                          "zebra"};
    char name[16];
    for (uint32_t c = 0; c < 5; c++) {
        CHECK_OK(rf_dataset_class_name(ds, c, name, sizeof(name)));
        CHECK(strcmp(name, classes[c]) == 0);
    }
    CHECK_EQ(rf_dataset_class_name(ds, 5, name, sizeof(name)), -ERANGE);
    CHECK_EQ(rf_dataset_class_name(ds, 0, NULL, 0), -EINVAL);
    CHECK_OK(rf_dataset_class_name(ds, 4, name, 3)); /* cut short */
    CHECK(strcmp(name, "ze") == 0);
    rf_dataset_close(ds);
    printf("folder: %zu samples in torchvision's order and labels, and its "
           "class names\n",
           EXPECTED_TREE);
}

/* Class folders whose names are not all valid UTF-8 get torchvision's
 * labels: Python decodes them with surrogateescape (a stray byte b
 * becomes U+DC00 + b) and sorts by code point, not by byte. The order
 * below is Python's sorted() of those names. */
TEST_CASE(test_names_in_python_order, "folder",
          "class names that are not UTF-8 sort as in Python")
{
    static const char *const sorted_names[] = {
        "Zed",
        "plain",
        "\xc3\xa9_utf8",    /* U+00E9 */
        "\xb5_latin1",      /* U+DCB5 */
        "\xed\xa0\x80x",    /* an encoded surrogate: U+DCED U+DCA0 ... */
        "\xff",             /* U+DCFF */
        "\xf0\x9f\x98\x80", /* U+1F600 */
    };
    const size_t n = sizeof(sorted_names) / sizeof(sorted_names[0]);
    make_dir(at("names"));
    for (size_t i = n; i-- > 0;) {
        char rel[64];
        rf__format(rel, sizeof(rel), "names/%s/a.jpg", sorted_names[i]);
        make_dir(at("names/%s", sorted_names[i]));
        make_file(rel);
    }
    rf_dataset *ds = open_or_die(at("names"));
    CHECK_EQ(rf_dataset_size(ds), n);
    for (size_t i = 0; i < n; i++) {
        rf_sample_info info;
        CHECK_OK(rf_dataset_read(ds, i, &info));
        CHECK_EQ(info.label, (int64_t)i);
        CHECK(strncmp(info.name, sorted_names[i], strlen(sorted_names[i])) ==
              0);
        char name[32];
        CHECK_OK(rf_dataset_class_name(ds, (uint32_t)i, name, sizeof(name)));
        CHECK(strcmp(name, sorted_names[i]) == 0);
    }
    rf_dataset_close(ds);
    printf("folder: class names that are not UTF-8 sort as in Python\n");
}

TEST_CASE(test_folder_errors, "folder",
          "missing, flat and empty folders are refused")
{
    check_open_fails(at("no-such-folder"), -ENOENT, "No such file");
    make_dir(at("flat"));
    make_file("flat/a.jpg");
    check_open_fails(at("flat"), -ENOENT, "no class folders");
    make_dir(at("flat/empty"));
    make_dir(at("flat/full"));
    make_file("flat/full/b.jpg");
    make_dir(at("flat/texts"));
    make_file("flat/texts/a.txt");
    check_open_fails(at("flat"), -ENOENT,
                     "2 class folders without image files: 'empty', 'texts'");
    remove_tree(at("flat/empty"));
    remove_tree(at("flat/texts"));
    /* a file that disappears after the listing fails by name */
    rf_dataset *ds = open_or_die(at("flat"));
    CHECK_EQ(unlink(at("flat/full/b.jpg")), 0);
    rf_sample_info info;
    CHECK_EQ(rf_dataset_read(ds, 0, &info), -ENOENT);
    CHECK_CONTAINS(rf_dataset_error(ds), "flat/full/b.jpg");
    rf_dataset_close(ds);
    printf("folder: missing, flat and empty folders refused with reasons\n");
}

/* rf_dataset_open() of `folder` under an RLIMIT_NOFILE of 64 with every
 * descriptor below it taken but `spare`; returns its code, its reason
 * in *why (the caller frees it), and puts the limit back. */
static int open_with_fds_left(const char *folder, int spare, char **why)
{
    struct rlimit old;
    CHECK_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
    const struct rlimit low = {64, old.rlim_max};
    CHECK_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
    int taken[64], count = 0;
    for (int fd; (fd = dup(0)) >= 0;)
        taken[count++] = fd;
    CHECK_EQ(errno, EMFILE);
    CHECK(count >= spare);
    for (int i = 0; i < spare; i++)
        close(taken[--count]);
    rf_dataset *ds = NULL;
    *why = NULL;
    const int rc = rf_dataset_open(&ds, folder, why);
    rf_dataset_close(ds);
    while (count > 0)
        close(taken[--count]);
    CHECK_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
    CHECK(*why);
    printf("  %s\n", *why);
    return rc;
}

/* A listing that runs out of file descriptors names the process's limit
 * as what to change, not the dataset: RLIMIT_NOFILE lowered in this
 * case's own process, and every descriptor under it taken but one (the
 * dataset's own), so that the walk's first open fails with EMFILE; with
 * none left, the dataset's own folder does not open (the advice was to
 * pass a folder of class folders). */
TEST_CASE(test_folder_out_of_fds, "folder",
          "out of fds: the advice is the open-files limit")
{
    make_dir(at("fds"));
    make_dir(at("fds/c"));
    make_file("fds/c/a.jpg");
    char *why = NULL;
    CHECK_EQ(open_with_fds_left(at("fds"), 1, &why), -EMFILE);
    CHECK_CONTAINS(why, "Too many open files; the process has the 64 files "
                        "open that its limit allows: raise its open-files "
                        "limit (ulimit -n");
    CHECK(strstr(why, "move it out of the dataset") == NULL);
    free(why);
    CHECK_EQ(open_with_fds_left(at("fds"), 0, &why), -EMFILE);
    CHECK_CONTAINS(why, "raise its open-files limit (ulimit -n");
    CHECK(strstr(why, "pass a folder of class folders") == NULL);
    free(why);
    remove_tree(at("fds"));
}

/* ---- the folder index --------------------------------------------------- */

static int open_with_listing(const void *bytes, size_t size, char *why,
                             size_t why_len)
{
    const int fd = memfd_create("test-listing", MFD_CLOEXEC);
    CHECK(fd >= 0);
    CHECK_EQ(write(fd, bytes, size), (long long)size);
    rf_dataset *ds = NULL;
    const int rc =
        rf__dataset_open_indexed(&ds, at("tree"), -1, fd, why, why_len);
    close(fd);
    rf_dataset_close(ds);
    return rc;
}

static uint8_t *listing_bytes(rf_dataset *ds, size_t *size)
{
    int fd = -1;
    CHECK_OK(rf__dataset_index_fd(ds, &fd));
    struct stat st;
    CHECK_EQ(fstat(fd, &st), 0);
    *size = (size_t)st.st_size;
    uint8_t *bytes = malloc(*size);
    CHECK(bytes);
    CHECK_EQ(pread(fd, bytes, *size, 0), (long long)*size);
    close(fd);
    return bytes;
}

/* A well-formed listing of one sample called `name`. */
static size_t planted_listing(uint8_t *out, const char *name)
{
    struct rf__crc32c crc;
    rf__crc32c_init(&crc);
    const size_t length = strlen(name);
    struct rf__index_header h = {.version = RF__INDEX_VERSION,
                                 .header_size = RF__INDEX_HEADER_SIZE,
                                 .entry_size = RF__INDEX_ENTRY_SIZE,
                                 .classes = 1,
                                 .samples = 1,
                                 .names_offset = RF__INDEX_HEADER_SIZE +
                                                 RF__INDEX_ENTRY_SIZE,
                                 .names_size = length + 1};
    h.total_size = h.names_offset + h.names_size;
    const struct rf__index_entry e = {.name_length = (uint32_t)length};
    rf__index_entry_encode(&e, out + RF__INDEX_HEADER_SIZE);
    memcpy(out + h.names_offset, name, length + 1);
    h.body_crc = rf__crc32c(&crc, 0, out + RF__INDEX_HEADER_SIZE,
                            h.total_size - RF__INDEX_HEADER_SIZE);
    rf__index_header_encode(&h, out);
    return h.total_size;
}

TEST_CASE(test_index_round_trip, "listing",
          "the memfd and an index file give the same samples")
{
    rf_dataset *ds = open_or_die(at("tree"));
    int fd = -1;
    CHECK_OK(rf__dataset_index_fd(ds, &fd));
    CHECK(fd >= 0);
    CHECK(write(fd, "x", 1) < 0); /* sealed */
    /* a folder that changed since: the listing is used, not listed again */
    make_dir(at("tree/zzz"));
    make_file("tree/zzz/new.jpg");
    rf_dataset *copy = NULL;
    char why[RF__DETAIL];
    CHECK_OK(
        rf__dataset_open_indexed(&copy, at("tree"), -1, fd, why, sizeof(why)));
    close(fd);
    check_tree_listing(copy);
    rf_dataset_close(copy);
    /* the same bytes in a file (an index cache) */
    fd = open(at("listing"), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    CHECK_OK(rf__dataset_index_write(ds, fd, why, sizeof(why)));
    CHECK_OK(
        rf__dataset_open_indexed(&copy, at("tree"), -1, fd, why, sizeof(why)));
    close(fd);
    check_tree_listing(copy);
    rf_dataset_close(copy);
    remove_tree(at("tree/zzz"));
    rf_dataset_close(ds);
    printf("index: the memfd listing and an index file give the same "
           "samples\n");
}

static void check_listing_refused(const void *bytes, size_t size,
                                  const char *needle)
{
    char why[RF__DETAIL];
    CHECK_EQ(open_with_listing(bytes, size, why, sizeof(why)),
             RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(why, needle);
    CHECK_CONTAINS(why, "tree");
    printf("  refused as expected: %s\n", why);
}

TEST_CASE(test_index_damage, "listing",
          "damaged, truncated, foreign and planted ones are refused")
{
    rf_dataset *ds = open_or_die(at("tree"));
    size_t size;
    uint8_t *bytes = listing_bytes(ds, &size);
    char why[RF__DETAIL];
    CHECK_OK(open_with_listing(bytes, size, why, sizeof(why)));
    bytes[size - 3] ^= 0x20; /* a name's letter */
    check_listing_refused(bytes, size, "checksum does not match");
    bytes[size - 3] ^= 0x20;
    check_listing_refused(bytes, size - 5, "bytes");
    bytes[3] = 'X';
    check_listing_refused(bytes, size, "not a ringfeed folder index");
    uint8_t planted[256];
    const size_t n = planted_listing(planted, "zebra/../../outside/m.ppm");
    check_listing_refused(planted, n,
                          "entry 0: its name leads out of the folder");
    CHECK_OK(open_with_listing(
        planted, planted_listing(planted, "zebra/a.jpeg"), why, sizeof(why)));
    /* a name longer than any the listing makes (MAX_NAME) */
    static char long_name[4097];
    memset(long_name, 'n', sizeof(long_name) - 1);
    static uint8_t long_listing[sizeof(long_name) + 128];
    check_listing_refused(long_listing,
                          planted_listing(long_listing, long_name),
                          "entry 0: its name is longer than 4095 bytes");
    free(bytes);
    rf_dataset_close(ds);
    printf("index: damaged, truncated, foreign and planted listings "
           "refused\n");
}

/* ---- packed files ------------------------------------------------------- */

#define RAW_H 4
#define RAW_W 5
#define RAW_C 3
#define RAW_BYTES ((size_t)RAW_H * RAW_W * RAW_C)

static const char pack_dict[] = "any bytes: the writer keeps them as given";

/* The samples of the test pack; sizes and offsets are filled in. */
static struct pack_sample {
    rf_sample_kind kind;
    int64_t label;
    const char *name; /* NULL or "": none */
    uint8_t data[128];
    size_t size;
    uint64_t offset;
} pack_samples[] = {
    {RF_SAMPLE_JPEG, 2, "cls/a.jpg", {0}, 0, 0},
    {RF_SAMPLE_ZSTD, 0, NULL, {0}, 0, 0},
    {RF_SAMPLE_JPEG, 1, "", {0}, 0, 0},
    {RF_SAMPLE_ZSTD, 1, "raw/3", {0}, 0, 0},
};
#define PACK_SAMPLES (sizeof(pack_samples) / sizeof(pack_samples[0]))

static void make_pack_samples(void)
{
    uint64_t offset = RF__PACK_HEADER_SIZE;
    for (size_t i = 0; i < PACK_SAMPLES; i++) {
        struct pack_sample *s = &pack_samples[i];
        if (s->kind == RF_SAMPLE_ZSTD) {
            uint8_t raw[RAW_BYTES];
            for (size_t k = 0; k < RAW_BYTES; k++)
                raw[k] = (uint8_t)(k * i);
            s->size =
                ZSTD_compress(s->data, sizeof(s->data), raw, sizeof(raw), 3);
            CHECK(!ZSTD_isError(s->size));
        } else { /* sample 2 stays empty: a 0-byte file packs as is */
            s->size = i == 0 ? 20 : 0;
            memcpy(s->data, "\xff\xd8\xff not quite a JPEG", s->size);
        }
        s->offset = offset;
        offset += s->size;
    }
}

static void add_or_die(rf_pack_writer *w, const struct pack_sample *s)
{
    const int rc =
        rf_pack_writer_add(w, s->kind, s->data, s->size, s->label, s->name);
    if (rc < 0)
        fprintf(stderr, "add: %s\n", rf_pack_writer_error(w));
    CHECK_OK(rc);
}

/* A refused add leaves the writer as it was. */
static void check_add_refused(rf_pack_writer *w, rf_sample_kind kind,
                              const void *data, size_t size, int64_t label,
                              const char *needle)
{
    CHECK_EQ(rf_pack_writer_add(w, kind, data, size, label, "bad"), -EINVAL);
    CHECK_CONTAINS(rf_pack_writer_error(w), needle);
    printf("  refused as expected: %s\n", rf_pack_writer_error(w));
}

/* A zstd dictionary with an ID (frames compressed with it name it),
 * trained on patterned samples; returns its size. */
static size_t train_dictionary(uint8_t *dict, size_t capacity)
{
    enum { SAMPLES = 400, SAMPLE_BYTES = 64 };
    static uint8_t samples[SAMPLES * SAMPLE_BYTES];
    size_t sizes[SAMPLES];
    for (size_t i = 0; i < SAMPLES; i++) {
        for (size_t k = 0; k < SAMPLE_BYTES; k++)
            samples[i * SAMPLE_BYTES + k] =
                (uint8_t)("ringfeed"[k % 8] + i % 7);
        sizes[i] = SAMPLE_BYTES;
    }
    const size_t size =
        ZDICT_trainFromBuffer(dict, capacity, samples, sizes, SAMPLES);
    CHECK(!ZDICT_isError(size));
    CHECK(ZSTD_getDictID_fromDict(dict, size) != 0);
    return size;
}

/* raw compressed with dict into frame (capacity bytes); returns its size. */
static size_t compress_with_dictionary(const void *raw, size_t raw_size,
                                       const void *dict, size_t dict_size,
                                       uint8_t *frame, size_t capacity)
{
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    const size_t n = ZSTD_compress_usingDict(cctx, frame, capacity, raw,
                                             raw_size, dict, dict_size, 3);
    ZSTD_freeCCtx(cctx);
    CHECK(!ZSTD_isError(n));
    return n;
}

/* A frame naming a dictionary goes only into a pack that carries that
 * dictionary: the pack of write_test_pack() carries raw bytes, so the
 * frame is refused; and the check itself for a matching and another ID. */
static void check_dictionary_refusal(rf_pack_writer *w)
{
    uint8_t dict[1024], frame[256], raw[RAW_BYTES] = {0};
    const size_t dict_size = train_dictionary(dict, sizeof(dict));
    const unsigned id = ZSTD_getDictID_fromDict(dict, dict_size);
    const size_t n = compress_with_dictionary(raw, sizeof(raw), dict, dict_size,
                                              frame, sizeof(frame));
    CHECK_EQ(ZSTD_getDictID_fromFrame(frame, n), id);
    check_add_refused(w, RF_SAMPLE_ZSTD, frame, n, 0,
                      "has no dictionary with an ID; compress it with the "
                      "dictionary passed to rf_pack_writer_create()");
    char why[160];
    CHECK(rf__zstd_frame_fits_dict(frame, n, id, why, sizeof(why)));
    CHECK(!rf__zstd_frame_fits_dict(frame, n, id + 1, why, sizeof(why)));
    char expected[160];
    rf__format(expected, sizeof(expected),
               "compressed with dictionary %u, but the packed file's "
               "dictionary is %u",
               id, id + 1);
    CHECK_CONTAINS(why, expected);
}

static void add_refusals(rf_pack_writer *w)
{
    uint8_t frame[128], raw[RAW_BYTES] = {0};
    const size_t n = ZSTD_compress(frame, sizeof(frame), raw, sizeof(raw), 1);
    check_add_refused(w, RF_SAMPLE_ZSTD, frame, n - 1, 0,
                      "not exactly one zstd frame");
    check_add_refused(w, RF_SAMPLE_ZSTD, frame, n + 1, 0,
                      "more bytes follow it");
    check_add_refused(w, RF_SAMPLE_ZSTD, "not zstd", 8, 0,
                      "not exactly one zstd frame");
    check_add_refused(w, RF_SAMPLE_JPEG, "x", 1, -1, "label -1");
    check_add_refused(w, (rf_sample_kind)9, "x", 1, 0, "kind 9");
    check_dictionary_refusal(w);
}

/* The test pack at path; with `refusals`, the writer's refusals are
 * checked half-way (each must leave the writer as it was). */
static void write_test_pack(const char *path, bool refusals)
{
    rf_pack_writer *w =
        test_create_pack(path, RAW_H, RAW_W, RAW_C, RF_LAYOUT_NCHW, pack_dict,
                         sizeof(pack_dict));
    for (size_t i = 0; i < PACK_SAMPLES; i++) {
        add_or_die(w, &pack_samples[i]);
        if (i == 1 && refusals)
            add_refusals(w);
    }
    CHECK(access(path, F_OK) != 0); /* not there until finished */
    test_finish_pack(w);
    char tmp[1100];
    rf__format(tmp, sizeof(tmp), "%s.tmp", path);
    CHECK_EQ(access(tmp, F_OK), -1);
}

static void check_pack_sample(rf_dataset *ds, size_t i)
{
    const struct pack_sample *s = &pack_samples[i];
    rf_sample_info info;
    CHECK_OK(rf_dataset_read(ds, i, &info));
    CHECK_EQ(info.size, s->size);
    CHECK(s->size == 0 || memcmp(info.data, s->data, s->size) == 0);
    CHECK_EQ(info.label, s->label);
    CHECK_EQ(info.kind, s->kind);
    char name[64];
    if (s->name && s->name[0])
        rf__format(name, sizeof(name), "%s", s->name);
    else
        rf__format(name, sizeof(name), "packed offset %llu",
                   (unsigned long long)s->offset);
    if (strcmp(info.name, name) != 0) {
        fprintf(stderr, "sample %zu is named %s, expected %s\n", i, info.name,
                name);
        exit(1);
    }
}

TEST_CASE(test_pack_round_trip, "pack",
          "round trip: bytes, labels, names, dictionary, shape")
{
    write_test_pack(at("round-trip.pack"), true);
    rf_dataset *ds = open_or_die(at("round-trip.pack"));
    CHECK_EQ(rf_dataset_size(ds), PACK_SAMPLES);
    CHECK_EQ(rf_dataset_classes(ds), 3);
    for (size_t i = PACK_SAMPLES; i-- > 0;) /* random access */
        check_pack_sample(ds, i);
    /* class names from the stored names: label 1's first sample has none,
     * its second does; label 0's only sample has none */
    char name[16];
    CHECK_OK(rf_dataset_class_name(ds, 2, name, sizeof(name)));
    CHECK(strcmp(name, "cls") == 0);
    CHECK_OK(rf_dataset_class_name(ds, 1, name, sizeof(name)));
    CHECK(strcmp(name, "raw") == 0);
    CHECK_EQ(rf_dataset_class_name(ds, 0, name, sizeof(name)), -ENOENT);
    size_t dict_size = 0;
    const void *dict = rf__dataset_dict(ds, &dict_size);
    CHECK_EQ(dict_size, sizeof(pack_dict));
    CHECK(memcmp(dict, pack_dict, dict_size) == 0);
    uint32_t h, w, c;
    rf_layout layout;
    rf__dataset_raw_shape(ds, &h, &w, &c, &layout);
    CHECK(h == RAW_H && w == RAW_W && c == RAW_C && layout == RF_LAYOUT_NCHW);
    rf_dataset_close(ds);
    printf("pack: %zu samples round-trip with names, dictionary and shape\n",
           PACK_SAMPLES);
}

TEST_CASE(test_pack_writer_edges, "pack",
          "writer: bad shape, bad folder, abort, empty pack")
{
    rf_pack_writer *w = NULL;
    char *why = NULL;
    CHECK_EQ(rf_pack_writer_create(&w, at("x.pack"), 4, 0, 3, RF_LAYOUT_NHWC,
                                   NULL, 0, &why),
             -EINVAL);
    CHECK(w == NULL);
    CHECK_CONTAINS(why, "shape 4 x 0 x 3");
    free(why);
    CHECK_EQ(rf_pack_writer_create(&w, at("none/x.pack"), 0, 0, 0,
                                   RF_LAYOUT_NHWC, NULL, 0, &why),
             -ENOENT);
    CHECK_CONTAINS(why, "none/x.pack: cannot create a file in its folder");
    free(why);
    /* JPEG only: a zstd sample has no shape to hold */
    CHECK_OK(rf_pack_writer_create(&w, at("abort.pack"), 0, 0, 0,
                                   RF_LAYOUT_NHWC, NULL, 0, &why));
    CHECK_EQ(access(at("abort.pack.tmp"), F_OK), -1); /* unnamed until done */
    CHECK_EQ(rf_pack_writer_add(w, RF_SAMPLE_ZSTD, "x", 1, 0, NULL), -EINVAL);
    CHECK_CONTAINS(rf_pack_writer_error(w), "needs the sample shape");
    rf_pack_writer_abort(w);
    CHECK_EQ(access(at("abort.pack.tmp"), F_OK), -1);
    CHECK_EQ(access(at("abort.pack"), F_OK), -1);
    rf_pack_writer_abort(NULL);
    /* an empty pack is a valid pack */
    CHECK_OK(rf_pack_writer_create(&w, at("empty.pack"), 0, 0, 0,
                                   RF_LAYOUT_NHWC, NULL, 0, &why));
    CHECK_OK(rf_pack_writer_finish(w, &why));
    rf_dataset *ds = open_or_die(at("empty.pack"));
    CHECK_EQ(rf_dataset_size(ds), 0);
    CHECK_EQ(rf_dataset_classes(ds), 0);
    rf_dataset_close(ds);
    printf("pack writer: bad shape, bad folder, abort, empty pack\n");
}

/* ---- damaged packed files ----------------------------------------------- */

static uint8_t *read_whole(const char *path, size_t *size)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    CHECK(fd >= 0 && fstat(fd, &st) == 0);
    *size = (size_t)st.st_size;
    uint8_t *bytes = malloc(*size + 1);
    CHECK(bytes);
    CHECK_EQ(read(fd, bytes, *size), (long long)*size);
    close(fd);
    return bytes;
}

static const char *damaged(const uint8_t *bytes, size_t size)
{
    write_file(at("damaged.pack"), bytes, size);
    return at("damaged.pack");
}

/* Recomputes the checksums after an edit, so that the reader's other
 * checks are what stands between it and the damage. */
static void reseal(uint8_t *bytes, struct rf__pack_header *h)
{
    struct rf__crc32c crc;
    rf__crc32c_init(&crc);
    h->meta_crc = rf__crc32c(&crc, 0, bytes + h->index_offset,
                             h->file_size - h->index_offset);
    rf__pack_header_encode(h, bytes);
}

enum entry_field {
    ENTRY_OFFSET,
    ENTRY_KIND,
    ENTRY_LABEL,
    ENTRY_NAME,
    ENTRY_NAME_LENGTH
};

static void edit_entry(uint8_t *bytes, uint64_t i, enum entry_field field,
                       uint64_t value)
{
    struct rf__pack_header h;
    char why[256];
    CHECK_OK(rf__pack_header_decode(&h, bytes, why, sizeof(why)));
    uint8_t *raw = bytes + h.index_offset + i * RF__PACK_ENTRY_SIZE;
    struct rf__pack_entry e;
    rf__pack_entry_decode(&e, raw);
    if (field == ENTRY_OFFSET)
        e.offset = value;
    else if (field == ENTRY_KIND)
        e.kind = (uint8_t)value;
    else if (field == ENTRY_LABEL)
        e.label = (int64_t)value;
    else if (field == ENTRY_NAME_LENGTH)
        e.name_length = (uint32_t)value;
    else { /* a name that starts outside the names area */
        e.name_offset = value;
        e.name_length = 4;
    }
    rf__pack_entry_encode(&e, raw);
    reseal(bytes, &h);
}

static void test_pack_damage_to_entries(const uint8_t *good, size_t size)
{
    uint8_t *bytes = malloc(size);
    CHECK(bytes);
    const struct {
        enum entry_field field;
        uint64_t value;
        const char *reason;
    } edits[] = {
        {ENTRY_OFFSET, size, "index entry 2: its payload lies outside"},
        {ENTRY_OFFSET, 3, "index entry 2: its payload lies outside"},
        {ENTRY_KIND, 7, "index entry 2: its kind is unknown"},
        {ENTRY_LABEL, 3, "index entry 2: its label is outside"},
        {ENTRY_NAME, 1u << 20, "index entry 2: its name lies outside"},
        {ENTRY_NAME_LENGTH, 4096,
         "index entry 2: its name is longer than 4095 bytes"},
    };
    for (size_t k = 0; k < sizeof(edits) / sizeof(edits[0]); k++) {
        memcpy(bytes, good, size);
        edit_entry(bytes, 2, edits[k].field, edits[k].value);
        check_open_fails(damaged(bytes, size), RF_E_CORRUPT_SAMPLE,
                         edits[k].reason);
    }
    /* classes is the largest label + 1, no more: a count read from the
     * file that others size their tables by */
    memcpy(bytes, good, size);
    struct rf__pack_header h;
    char why[256];
    CHECK_OK(rf__pack_header_decode(&h, bytes, why, sizeof(why)));
    h.classes = 4;
    reseal(bytes, &h);
    check_open_fails(damaged(bytes, size), RF_E_CORRUPT_SAMPLE,
                     "its header's classes is 4, but its largest label is 2");
    free(bytes);
}

/* Each size or offset of a header that the file cannot hold is refused
 * before anything is read or allocated, naming the field and both numbers
 * (`bytes` holds the good file, h its header, both left damaged). */
static void test_pack_damage_to_sizes(const struct rf__pack_header *h,
                                      uint8_t *bytes, size_t size)
{
    char expected[256];
    struct rf__pack_header bad = *h;
    bad.version = 1;
    bad.samples = size; /* more entries than the file has bytes */
    rf__pack_header_encode(&bad, bytes);
    rf__format(expected, sizeof(expected),
               "its header's samples, %zu index entries of 40 bytes at "
               "index_offset %llu, do not fit its %zu bytes (room for %llu)",
               size, (unsigned long long)h->index_offset, size,
               (unsigned long long)((size - h->index_offset) / 40));
    check_open_fails(damaged(bytes, size), RF_E_CORRUPT_SAMPLE, expected);
    bad = *h;
    bad.version = 1;
    bad.names_size = size; /* and the dictionary after it */
    bad.dict_offset = bad.names_offset + bad.names_size;
    rf__pack_header_encode(&bad, bytes);
    rf__format(expected, sizeof(expected),
               "its header's names_size, %zu bytes at names_offset %llu, "
               "runs past the end of the file: it has %llu bytes after it",
               size, (unsigned long long)h->names_offset,
               (unsigned long long)(size - h->names_offset));
    check_open_fails(damaged(bytes, size), RF_E_CORRUPT_SAMPLE, expected);
    /* A dictionary above the limit, in a sparse file: refused from the
     * header alone. */
    bad = *h;
    bad.version = 1;
    bad.dict_size = RF__PACK_DICT_MAX + 1;
    bad.file_size = bad.dict_offset + bad.dict_size;
    rf__pack_header_encode(&bad, bytes);
    const char *path = damaged(bytes, (size_t)bad.dict_offset);
    CHECK_EQ(truncate(path, (off_t)bad.file_size), 0);
    check_open_fails(path, RF_E_CORRUPT_SAMPLE,
                     "its header's dict_size, 67108865 bytes, is more than "
                     "the 67108864 (64 MiB) a dictionary may have");
}

static void test_pack_damage_to_header(const uint8_t *good, size_t size)
{
    uint8_t *bytes = malloc(size + 1);
    CHECK(bytes);
    memcpy(bytes, good, size);
    bytes[0] = 'X';
    check_open_fails(damaged(bytes, size), RF_E_CORRUPT_SAMPLE,
                     "not a ringfeed packed file");
    memcpy(bytes, good, size);
    bytes[120] ^= 1; /* reserved, but covered by the checksum */
    check_open_fails(damaged(bytes, size), RF_E_CORRUPT_SAMPLE,
                     "header's checksum does not match");
    memcpy(bytes, good, size);
    check_open_fails(damaged(bytes, size - 1), RF_E_CORRUPT_SAMPLE,
                     "truncated");
    check_open_fails(damaged(bytes, RF__PACK_HEADER_SIZE - 1),
                     RF_E_CORRUPT_SAMPLE, "fewer than a header");
    bytes[size] = 0;
    check_open_fails(damaged(bytes, size + 1), RF_E_CORRUPT_SAMPLE, "appended");
    bytes[size - sizeof(pack_dict) - 2] ^= 1; /* in the names */
    check_open_fails(damaged(bytes, size), RF_E_CORRUPT_SAMPLE,
                     "checksum of its index does not match");
    memcpy(bytes, good, size);
    struct rf__pack_header h;
    char why[256];
    CHECK_OK(rf__pack_header_decode(&h, bytes, why, sizeof(why)));
    h.version = 2;
    rf__pack_header_encode(&h, bytes);
    check_open_fails(damaged(bytes, size), RF_E_CORRUPT_SAMPLE,
                     "format version 2 is newer");
    /* Areas that cannot be, refused before anything is copied: names
     * without samples, and an index beyond the end whose sizes wrap
     * around to look as if they fit. */
    struct rf__pack_header bad = h;
    bad.version = 1;
    bad.samples = 0;
    bad.names_offset = bad.index_offset;
    bad.names_size = size - bad.index_offset;
    bad.dict_offset = size;
    bad.dict_size = 0;
    bad.flags = RF__PACK_FLAG_NAMES;
    rf__pack_header_encode(&bad, bytes);
    char expected[160];
    rf__format(expected, sizeof(expected),
               "its header's names_size, %llu bytes, is more than 4096 bytes "
               "for each of its 0 samples",
               (unsigned long long)bad.names_size);
    check_open_fails(damaged(bytes, size), RF_E_CORRUPT_SAMPLE, expected);
    bad.index_offset = bad.names_offset = bad.dict_offset = size + 4096;
    bad.names_size = 0;
    bad.dict_size = (uint64_t)size - bad.dict_offset; /* wraps */
    bad.flags = RF__PACK_FLAG_DICT;
    rf__pack_header_encode(&bad, bytes);
    rf__format(expected, sizeof(expected),
               "its header's index_offset %zu is not between the end of its "
               "header (128) and the end of the file (%zu bytes)",
               size + 4096, size);
    check_open_fails(damaged(bytes, size), RF_E_CORRUPT_SAMPLE, expected);
    test_pack_damage_to_sizes(&h, bytes, size);
    /* A JPEG's first bytes, padded to a whole header. */
    uint8_t jpeg_like[RF__PACK_HEADER_SIZE];
    memset(jpeg_like, '.', sizeof(jpeg_like));
    const uint8_t soi_app0[4] = {0xff, 0xd8, 0xff, 0xe0};
    memcpy(jpeg_like, soi_app0, sizeof(soi_app0));
    check_open_fails(damaged(jpeg_like, sizeof(jpeg_like)), RF_E_CORRUPT_SAMPLE,
                     "(a JPEG file)");
    free(bytes);
}

/* Payload damage is found when the sample is read, with its name. */
static void test_pack_damage_to_payloads(const uint8_t *good, size_t size)
{
    uint8_t *bytes = malloc(size);
    CHECK(bytes);
    memcpy(bytes, good, size);
    bytes[pack_samples[0].offset + 5] ^= 0x10;
    bytes[pack_samples[1].offset + 5] ^= 0x10;
    rf_dataset *ds = open_or_die(damaged(bytes, size));
    rf_sample_info info;
    CHECK_EQ(rf_dataset_read(ds, 0, &info), RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(rf_dataset_error(ds), "sample 0 (cls/a.jpg, packed offset "
                                         "128)");
    CHECK_CONTAINS(rf_dataset_error(ds), "payload checksum mismatch");
    CHECK_CONTAINS(rf_dataset_error(ds), "damaged.pack");
    printf("  refused as expected: %s\n", rf_dataset_error(ds));
    char offset[64];
    rf__format(offset, sizeof(offset), "sample 1 (packed offset %llu)",
               (unsigned long long)pack_samples[1].offset);
    CHECK_EQ(rf_dataset_read(ds, 1, &info), RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(rf_dataset_error(ds), offset);
    CHECK_OK(rf_dataset_read(ds, 3, &info)); /* the rest reads fine */
    CHECK_EQ(rf_dataset_error(ds)[0], '\0');
    rf_dataset_close(ds);
    free(bytes);
}

/* One kind of damage to a copy of the test pack. */
static void damage_test_pack(void (*damage)(const uint8_t *, size_t))
{
    size_t size;
    uint8_t *good = read_whole(at("test.pack"), &size);
    damage(good, size);
    free(good);
}

TEST_CASE(test_pack_damaged_header, "pack", "damaged header refused")
{
    damage_test_pack(test_pack_damage_to_header);
}

TEST_CASE(test_pack_damaged_entries, "pack", "damaged index entries refused")
{
    damage_test_pack(test_pack_damage_to_entries);
}

TEST_CASE(test_pack_damaged_payloads, "pack",
          "damaged payloads named when read")
{
    damage_test_pack(test_pack_damage_to_payloads);
}

/* Decodes sample 0 of a zstd pack of RAW_H x RAW_W x RAW_C samples. */
static int decode_raw_sample(const char *path, uint8_t *out, char *why,
                             size_t why_len)
{
    rf_dataset *ds = open_or_die(path);
    rf_config *cfg = TEST_CONFIG(
        {RF_PARAM_HEIGHT, RAW_H}, {RF_PARAM_WIDTH, RAW_W},
        {RF_PARAM_CHANNELS, RAW_C}, {RF_PARAM_LAYOUT, RF_LAYOUT_NCHW},
        {RF_PARAM_TRANSFORM, RF_TRANSFORM_NONE});
    const int rc = rf_dataset_decode(ds, cfg, 0, 0, out);
    rf__format(why, why_len, "%s", rf_dataset_error(ds));
    rf_config_free(cfg);
    rf_dataset_close(ds);
    return rc;
}

/* A pack whose dictionary is not the one its frames were compressed with.
 * The writer refuses to make one, so the stored dictionary's ID is edited
 * afterwards (bytes 4 to 7 of a zstd dictionary, after its magic number):
 * decoding names both IDs and says to repack, rather than zstd's bare
 * "Dictionary mismatch". */
TEST_CASE(test_pack_dictionary_mismatch_on_decode, "pack",
          "another dictionary, named on decode")
{
    uint8_t dict[1024], frame[256], raw[RAW_BYTES], out[RAW_BYTES];
    for (size_t i = 0; i < RAW_BYTES; i++)
        raw[i] = (uint8_t)("ringfeed"[i % 8] + i % 7);
    const size_t dict_size = train_dictionary(dict, sizeof(dict));
    const unsigned id = ZSTD_getDictID_fromDict(dict, dict_size);
    const size_t n = compress_with_dictionary(raw, sizeof(raw), dict, dict_size,
                                              frame, sizeof(frame));
    rf_pack_writer *w = NULL;
    CHECK_OK(rf_pack_writer_create(&w, at("dict.pack"), RAW_H, RAW_W, RAW_C,
                                   RF_LAYOUT_NCHW, dict, dict_size, NULL));
    CHECK_OK(rf_pack_writer_add(w, RF_SAMPLE_ZSTD, frame, n, 0, "dict/a.raw"));
    CHECK_OK(rf_pack_writer_finish(w, NULL));
    char why[RF__DETAIL];
    CHECK_OK(decode_raw_sample(at("dict.pack"), out, why, sizeof(why)));
    CHECK(memcmp(out, raw, sizeof(raw)) == 0);

    size_t size;
    uint8_t *bytes = read_whole(at("dict.pack"), &size);
    uint8_t *stored = memmem(bytes, size, dict, dict_size);
    CHECK(stored);
    const unsigned other = id + 1;
    for (int k = 0; k < 4; k++)
        stored[4 + k] = (uint8_t)(other >> (8 * k));
    struct rf__pack_header h;
    CHECK_OK(rf__pack_header_decode(&h, bytes, why, sizeof(why)));
    reseal(bytes, &h);
    CHECK_EQ(decode_raw_sample(damaged(bytes, size), out, why, sizeof(why)),
             RF_E_CORRUPT_SAMPLE);
    char expected[160];
    rf__format(expected, sizeof(expected),
               "compressed with dictionary %u, but the packed file's "
               "dictionary is %u",
               id, other);
    CHECK_CONTAINS(why, expected);
    CHECK_CONTAINS(why, "(dict/a.raw, packed offset ");
    CHECK_CONTAINS(why, "damaged.pack:");
    CHECK_CONTAINS(why, "repack the file, passing the dictionary");
    printf("  refused as expected: %s\n", why);
    free(bytes);
}

/* ---- the index of a packed file, kept apart from the file ------------- */

/* Producers open the pack with the consumer's sealed copy of its index:
 * the same samples; a copy that is not sealed, or of another file, is
 * refused. */
TEST_CASE(test_pack_index_fd, "pack",
          "producers share the sealed copy of its index")
{
    rf_dataset *ds = open_or_die(at("test.pack"));
    int fd = -1;
    CHECK_OK(rf__dataset_index_fd(ds, &fd));
    CHECK_GE(fd, 0);
    CHECK_EQ(fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK, F_SEAL_SHRINK);
    rf_dataset_close(ds); /* the copy outlives the consumer's dataset */
    char why[RF__DETAIL];
    CHECK_OK(rf__dataset_open_indexed(&ds, at("test.pack"), -1, fd, why,
                                      sizeof(why)));
    for (size_t i = 0; i < PACK_SAMPLES; i++)
        check_pack_sample(ds, i);
    rf_dataset_close(ds);
    close(fd);

    const int plain = memfd_create("not-sealed", MFD_CLOEXEC);
    size_t size;
    uint8_t *bytes = read_whole(at("test.pack"), &size);
    struct rf__pack_header h;
    CHECK_OK(rf__pack_header_decode(&h, bytes, why, sizeof(why)));
    const size_t meta = size - h.index_offset;
    CHECK_EQ(write(plain, bytes + h.index_offset, meta), (long long)meta);
    CHECK_EQ(rf__dataset_open_indexed(&ds, at("test.pack"), -1, plain, why,
                                      sizeof(why)),
             RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(why, "not a sealed");
    close(plain);
    free(bytes);
    printf("pack: producers share the sealed copy of its index\n");
}

/* A pack truncated (or emptied) while open: samples past the new end fail
 * with a reason naming the file, the others still read, and nothing
 * touches the file's pages through a mapping (which would be a SIGBUS). */
TEST_CASE(test_pack_truncated_after_open, "pack",
          "truncated after open: an error per sample")
{
    size_t size;
    uint8_t *bytes = read_whole(at("test.pack"), &size);
    const char *path = damaged(bytes, size);
    rf_dataset *ds = open_or_die(path);
    CHECK_EQ(truncate(path, (off_t)pack_samples[1].offset), 0);
    rf_sample_info info;
    check_pack_sample(ds, 0);
    CHECK_EQ(rf_dataset_read(ds, 3, &info), RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(rf_dataset_error(ds), "truncated after it was opened");
    CHECK_CONTAINS(rf_dataset_error(ds), "sample 3 (raw/3");
    CHECK_CONTAINS(rf_dataset_error(ds), path);
    CHECK_EQ(truncate(path, 0), 0);
    for (size_t i = 0; i < PACK_SAMPLES; i++) {
        const int rc = rf_dataset_read(ds, i, &info);
        CHECK(rc == (pack_samples[i].size ? RF_E_CORRUPT_SAMPLE : 0));
    }
    printf("  refused as expected: %s\n", rf_dataset_error(ds));
    size_t dict_size = 0;
    const void *dict = rf__dataset_dict(ds, &dict_size);
    CHECK(dict_size == sizeof(pack_dict) &&
          memcmp(dict, pack_dict, dict_size) == 0);
    rf_dataset_close(ds);
    free(bytes);
    printf("pack: truncated after open: an error per sample, no SIGBUS\n");
}

/* ---- listing speed ------------------------------------------------------ */

#define SPEED_CLASSES 100
#define SPEED_FILES 20000

TEST_CASE(test_listing_speed, "folder", "20,000 files listed (timed)")
{
    make_dir(at("many"));
    for (int c = 0; c < SPEED_CLASSES; c++)
        make_dir(at("many/n%08d", c * 7919 % 100000000));
    for (int i = 0; i < SPEED_FILES; i++) {
        const int c = i % SPEED_CLASSES;
        const int fd = open(at("many/n%08d/img_%06d.JPEG", c * 7919, i),
                            O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        CHECK(fd >= 0);
        close(fd);
    }
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    rf_dataset *ds = open_or_die(at("many"));
    const double listing = seconds_since(&start);
    CHECK_EQ(rf_dataset_size(ds), SPEED_FILES);
    CHECK_EQ(rf_dataset_classes(ds), SPEED_CLASSES);
    clock_gettime(CLOCK_MONOTONIC, &start);
    int fd = -1;
    CHECK_OK(rf__dataset_index_fd(ds, &fd));
    rf_dataset *copy = NULL;
    char why[RF__DETAIL];
    CHECK_OK(
        rf__dataset_open_indexed(&copy, at("many"), -1, fd, why, sizeof(why)));
    const double mapping = seconds_since(&start);
    CHECK_EQ(rf_dataset_size(copy), SPEED_FILES);
    close(fd);
    rf_dataset_close(copy);
    rf_dataset_close(ds);
    printf("listing: %d files in %d classes in %.1f ms (%.0f files/s); "
           "memfd round trip %.1f ms\n",
           SPEED_FILES, SPEED_CLASSES, listing * 1e3, SPEED_FILES / listing,
           mapping * 1e3);
}

/* ---- synthetic JPEG ----------------------------------------------------- */

static void check_jpeg_header(const void *jpeg, size_t size, int *width,
                              int *height, int *subsampling)
{
    tjhandle tj = tjInitDecompress();
    CHECK(tj);
    int colorspace;
    CHECK_EQ(tjDecompressHeader3(tj, jpeg, (unsigned long)size, width, height,
                                 subsampling, &colorspace),
             0);
    tjDestroy(tj);
}

static void check_imagenet_like(uint64_t index, size_t *bytes, int *fine)
{
    void *jpeg = NULL, *again = NULL;
    size_t size = 0, size_again = 0;
    CHECK_OK(rf_synthetic_jpeg(5, index, 0, 0, &jpeg, &size));
    CHECK_OK(rf_synthetic_jpeg(5, index, 0, 0, &again, &size_again));
    CHECK_EQ(size, size_again);
    CHECK(memcmp(jpeg, again, size) == 0);
    int w, h, subsampling;
    check_jpeg_header(jpeg, size, &w, &h, &subsampling);
    const int short_side = w < h ? w : h, long_side = w < h ? h : w;
    CHECK(short_side >= 256 && short_side <= 500);
    CHECK_LE(long_side * 3, short_side * 4 + 2); /* 4/3, rounded */
    CHECK(subsampling == TJSAMP_444 || subsampling == TJSAMP_420);
    CHECK(size >= (size_t)40 << 10 && size <= (size_t)150 << 10);
    *fine += subsampling == TJSAMP_444;
    *bytes += size;
    free(jpeg);
    free(again);
}

TEST_CASE(test_synthetic_jpeg, "synthetic", "ImageNet-like JPEGs")
{
    const int count = 24;
    size_t bytes = 0;
    int fine = 0;
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int i = 0; i < count; i++)
        check_imagenet_like((uint64_t)i, &bytes, &fine);
    const double seconds = seconds_since(&start) / 2; /* each made twice */
    CHECK(fine > 0 && fine < count);
    void *a = NULL, *b = NULL;
    size_t size_a = 0, size_b = 0;
    CHECK_OK(rf_synthetic_jpeg(5, 1000, 64, 48, &a, &size_a));
    CHECK_OK(rf_synthetic_jpeg(6, 1000, 64, 48, &b, &size_b));
    CHECK(size_a != size_b || memcmp(a, b, size_a) != 0);
    int w, h, subsampling;
    check_jpeg_header(a, size_a, &w, &h, &subsampling);
    CHECK(w == 64 && h == 48);
    free(a);
    free(b);
    CHECK_EQ(rf_synthetic_jpeg(5, 1, 0, 10, &a, &size_a), -EINVAL);
    CHECK(a == NULL);
    /* above libjpeg-turbo's 65500: refused as the header says (-EIO from
     * the encoder, with no reason, from 65501 to 65535) */
    CHECK_EQ(rf_synthetic_jpeg(5, 1, 65501, 8, &a, &size_a), -EINVAL);
    CHECK(a == NULL);
    printf("synthetic jpeg: %d images, %.1f KB on average, %d of them 4:4:4, "
           "%.0f images/s\n",
           count, (double)bytes / count / 1024, fine, count / seconds);
}

static void setup(void)
{
    scratch_make(base, sizeof(base), "dataset");
    make_tree();
    make_pack_samples();
    write_test_pack(at("test.pack"), false);
}

static void teardown(void)
{
    remove_tree(base);
}

int main(int argc, char **argv)
{
    return TEST_MAIN_WITH(argc, argv, setup, teardown);
}
