/*
 * test-pack-accepted.c - which packs rf_pack_writer and the reader accept.
 *
 * Shapes no loader can be configured for are refused by the writer, and
 * by the reader in a header, naming the file; JPEG samples are refused in
 * a pack of 2 or 4 channels. The dictionary can be set after the writer
 * is created, not after its first sample, and one whose copy cannot be
 * allocated leaves the old one. Each case works in an empty folder of its
 * own (pack-folder.h).
 */
#include "config.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zstd.h>

#include "common/internal.h"
#include "source/dataset.h"
#include "source/pack.h"
#include "harness.h"
#include "pack-folder.h"
#include "proc.h"
#include "test.h"

/* ---- which packs are accepted ------------------------------------------- */

static void check_shape_refused(uint32_t height, uint32_t width,
                                uint32_t channels, const char *needle)
{
    rf_pack_writer *w = NULL;
    char *why = NULL;
    CHECK_EQ(rf_pack_writer_create(&w, at("shape.pack"), height, width,
                                   channels, RF_LAYOUT_NHWC, NULL, 0, &why),
             -EINVAL);
    CHECK(w == NULL);
    CHECK_CONTAINS(why, needle);
    CHECK_CONTAINS(why, "a height of 1..65536, a width of 1..65536 and 1..4 "
                        "channels");
    printf("  refused as expected: %s\n", why);
    free(why);
}

/* The limits are the loader's (RF_PARAM_HEIGHT, WIDTH, CHANNELS): a pack
 * with a larger shape could be written but never loaded. */
TEST_CASE(test_shape_limits, "shape", "the writer takes the loader's limits")
{
    own_folder();
    check_shape_refused(100000, 224, 3, "shape 100000 x 224 x 3");
    check_shape_refused(224, 65537, 3, "shape 224 x 65537 x 3");
    check_shape_refused(224, 224, 5, "shape 224 x 224 x 5");
    check_shape_refused(224, 0, 3, "shape 224 x 0 x 3");
    rf_pack_writer_abort(create_or_die(at("largest.pack"), 65536, 65536, 4));
    check_folder_holds(0);
    printf("shape: the loader's limits\n");
}

/* A JPEG decodes to 1 or 3 channels: in a pack of 2 or 4 it could never
 * be decoded, since a loader must be configured for the pack's shape. */
TEST_CASE(test_jpeg_channels, "shape", "JPEGs only in packs of 1 or 3 channels")
{
    own_folder();
    for (uint32_t channels = 1; channels <= 4; channels++) {
        rf_pack_writer *w = create_or_die(at("jpeg.pack"), 8, 8, channels);
        const int rc = rf_pack_writer_add(w, RF_SAMPLE_JPEG, "\xff\xd8\xff", 3,
                                          0, "x.jpg");
        if (channels == 1 || channels == 3) {
            CHECK_OK(rc);
        } else {
            CHECK_EQ(rc, -EINVAL);
            CHECK_CONTAINS(rf_pack_writer_error(w), "sample 0 (x.jpg): a JPEG "
                                                    "sample decodes to 1 or 3 "
                                                    "channels");
            CHECK_CONTAINS(rf_pack_writer_error(w), "create the pack with 1 "
                                                    "or 3 channels");
            printf("  refused as expected: %s\n", rf_pack_writer_error(w));
            uint8_t pixels[8 * 8 * 4] = {0}, frame[256];
            const size_t n = ZSTD_compress(frame, sizeof(frame), pixels,
                                           (size_t)8 * 8 * channels, 1);
            CHECK(!ZSTD_isError(n));
            CHECK_OK(rf_pack_writer_add(w, RF_SAMPLE_ZSTD, frame, n, 0, "z"));
        }
        rf_pack_writer_abort(w);
    }
    check_folder_holds(0);
    printf("jpeg samples: in packs of 1 or 3 channels only\n");
}

/* A header whose shape no loader takes is refused when the pack is
 * opened, naming the file; it used to open, and `ringfeed-pack --verify`
 * then died in rf_config_set() naming no file. */
TEST_CASE(test_reader_refuses_unloadable_shape, "shape",
          "the reader refuses one no loader takes")
{
    own_folder();
    struct rf__pack_header h = {.version = RF__PACK_VERSION,
                                .header_size = RF__PACK_HEADER_SIZE,
                                .entry_size = RF__PACK_ENTRY_SIZE,
                                .height = 100000,
                                .width = 224,
                                .channels = 3,
                                .index_offset = RF__PACK_HEADER_SIZE,
                                .names_offset = RF__PACK_HEADER_SIZE,
                                .dict_offset = RF__PACK_HEADER_SIZE,
                                .file_size = RF__PACK_HEADER_SIZE};
    uint8_t bytes[RF__PACK_HEADER_SIZE];
    rf__pack_header_encode(&h, bytes);
    write_file(at("tall.pack"), bytes, sizeof(bytes));
    rf_dataset *ds = NULL;
    char *why = NULL;
    CHECK_EQ(rf_dataset_open(&ds, at("tall.pack"), &why), RF_E_CORRUPT_SAMPLE);
    char expected[1100];
    rf__format(expected, sizeof(expected),
               "%s: the header's sample shape 100000 x 224 x 3",
               at("tall.pack"));
    CHECK_CONTAINS(why, expected);
    printf("  refused as expected: %s\n", why);
    free(why);
    h.height = 224; /* the same header with a loadable shape opens */
    rf__pack_header_encode(&h, bytes);
    write_file(at("tall.pack"), bytes, sizeof(bytes));
    CHECK_OK(rf_dataset_open(&ds, at("tall.pack"), NULL));
    rf_dataset_close(ds);
    clear_folder();
    printf("reader: a header's shape outside the loader's limits refused\n");
}

/* The pack at path holds exactly that dictionary. */
static void check_stored_dictionary(const char *path, const void *dict,
                                    size_t dict_size)
{
    rf_dataset *ds = NULL;
    CHECK_OK(rf_dataset_open(&ds, path, NULL));
    size_t size = 0;
    const void *stored = rf__dataset_dict(ds, &size);
    CHECK_EQ(size, dict_size);
    CHECK(memcmp(stored, dict, size) == 0);
    rf_dataset_close(ds);
}

/* The dictionary can be given after the writer is created (ringfeed-pack
 * creates it before training one), but not once samples were added. */
TEST_CASE(test_set_dictionary, "dictionary",
          "set after create, refused after the first sample")
{
    own_folder();
    uint8_t dict[300];
    for (size_t i = 0; i < sizeof(dict); i++)
        dict[i] = (uint8_t)(i * 7);
    rf_pack_writer *w = create_or_die(at("dict.pack"), 4, 4, 3);
    CHECK_OK(rf_pack_writer_set_dictionary(w, "first", 5));
    CHECK_OK(rf_pack_writer_set_dictionary(w, dict, sizeof(dict)));
    uint8_t pixels[4 * 4 * 3] = {0}, frame[128];
    const size_t n = ZSTD_compress(frame, sizeof(frame), pixels, 48, 1);
    CHECK_OK(rf_pack_writer_add(w, RF_SAMPLE_ZSTD, frame, n, 0, "z"));
    CHECK_EQ(rf_pack_writer_set_dictionary(w, NULL, 0), -EINVAL);
    CHECK_CONTAINS(rf_pack_writer_error(w), "before the first sample");
    test_finish_pack(w);
    /* Larger than readers accept: refused (the size is checked first,
     * so the bytes behind `dict` are never read). */
    w = create_or_die(at("big.pack"), 4, 4, 3);
    CHECK_EQ(rf_pack_writer_set_dictionary(w, dict, RF__PACK_DICT_MAX + 1),
             -EINVAL);
    CHECK_CONTAINS(rf_pack_writer_error(w), "larger than the 67108864 bytes");
    rf_pack_writer_abort(w); /* no sample: finish would refuse it */
    check_stored_dictionary(at("dict.pack"), dict, sizeof(dict));
    clear_folder();
    printf("dictionary: set after create, refused after the first sample\n");
}

#ifndef ALLOCATOR_ABORTS
/* The child's exit status when its hard limit leaves no room to test. */
#define CHILD_SKIPPED 77

/* In a child, whose address space is capped (the soft limit only, for
 * the one call) so that the copy of a 64 MiB dictionary cannot be
 * allocated: -ENOMEM with a detail, and the writer keeps the dictionary
 * it had (the pack written still holds it). */
static void dictionary_without_memory(void)
{
    const size_t big = (size_t)RF__PACK_DICT_MAX;
    void *huge = mmap(NULL, big, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(huge != MAP_FAILED);
    rf_pack_writer *w = create_or_die(at("nomem.pack"), 4, 4, 3);
    CHECK_OK(rf_pack_writer_set_dictionary(w, "first", 5));
    struct rlimit old;
    CHECK_EQ(getrlimit(RLIMIT_AS, &old), 0);
    const rlim_t cap = (rlim_t)mapped_bytes() + (16u << 20);
    if (old.rlim_max != RLIM_INFINITY && old.rlim_max < cap)
        _exit(CHILD_SKIPPED);
    const struct rlimit capped = {cap, old.rlim_max};
    CHECK_EQ(setrlimit(RLIMIT_AS, &capped), 0);
    const int rc = rf_pack_writer_set_dictionary(w, huge, big);
    CHECK_EQ(setrlimit(RLIMIT_AS, &old), 0);
    CHECK_EQ(rc, -ENOMEM);
    CHECK_CONTAINS(rf_pack_writer_error(w), "no memory for a 67108864-byte");
    CHECK_CONTAINS(rf_pack_writer_error(w), "a smaller dictionary");
    /* a sample, as finish refuses a pack without one */
    CHECK_OK(rf_pack_writer_add(w, RF_SAMPLE_JPEG, "jpeg", 4, 0, NULL));
    test_finish_pack(w);
    check_stored_dictionary(at("nomem.pack"), "first", 5);
    CHECK_EQ(unlink(at("nomem.pack")), 0);
    _exit(0);
}
#endif /* ALLOCATOR_ABORTS */

TEST_CASE(test_dictionary_without_memory, "dictionary",
          "no memory for its copy: -ENOMEM, the old one kept")
{
    own_folder();
#ifdef ALLOCATOR_ABORTS
    TEST_SKIP_BECAUSE("a sanitizer's allocator aborts instead of returning "
                      "NULL");
#else
    /* nothing buffered for the child to print again */
    fflush(stdout);
    fflush(stderr);
    const pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0)
        dictionary_without_memory();
    const int status = exit_status_of(child);
    if (status == CHILD_SKIPPED)
        TEST_SKIP_BECAUSE("the hard address-space limit leaves no room for "
                          "the test");
    CHECK_EQ(status, 0);
    printf("dictionary: no memory for its copy gives -ENOMEM and keeps the "
           "old one\n");
#endif
}

int main(int argc, char **argv)
{
    return TEST_MAIN_WITH(argc, argv, scratch_setup, scratch_teardown);
}
