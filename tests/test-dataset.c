/*
 * test-dataset.c - rf_dataset over folders, the folder listing handed to
 * producers, CRC-32C and rf_synthetic_jpeg().
 *
 * A folder tree built to trip every rule (classes created out of order,
 * hidden and symlinked class folders, nested folders whose sort order is
 * not depth-first, mixed-case extensions, files that are not images,
 * symbolic link loops) lists exactly as torchvision's ImageFolder would
 * (the expected list is written out below). The folder listing survives
 * the memfd round trip to producers, and a damaged or planted listing is
 * refused. Listing 20,000 files is timed (printed, not asserted). Setup
 * makes the folder tree once, in a scratch folder; a case that adds to
 * the tree takes it out again.
 *
 * The index cache (test-index-cache) and packed files (test-pack-format,
 * test-pack-damage) have programs of their own; dataset-files.h holds what
 * they share.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "common/internal.h"
#include "source/dataset.h"
#include "source/pack.h"
#include "dataset-files.h"
#include "harness.h"
#include "scratch.h"
#include "test.h"

/* ---- helpers ------------------------------------------------------------ */

static double seconds_since(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) +
           (double)(now.tv_nsec - start->tv_nsec) * 1e-9;
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
}

static void teardown(void)
{
    remove_tree(base);
}

int main(int argc, char **argv)
{
    return TEST_MAIN_WITH(argc, argv, setup, teardown);
}
