/*
 * test-pack-format.c - packed files written by rf_pack_writer and read by
 * rf_dataset: the test pack round-trips bytes, labels, kinds, names,
 * dictionary and shape, and the writer refuses what it cannot pack
 * (frames that are not one zstd frame, or that name a dictionary the pack
 * does not carry), a bad shape or folder, a pack with no sample (which
 * readers still take); a frame
 * compressed with another dictionary is named on decode; producers open
 * the pack with the consumer's sealed copy of its index. Setup writes the
 * test pack (pack-samples.h) once, in a scratch folder.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#include "common/internal.h"
#include "source/dataset.h"
#include "source/pack.h"
#include "dataset-files.h"
#include "empty-pack.h"
#include "harness.h"
#include "pack-samples.h"
#include "scratch.h"
#include "test.h"

/* ---- packed files ------------------------------------------------------- */

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
    /* an empty pack (which the writer no longer makes: see below) is a
     * valid pack to a reader */
    write_empty_pack(at("empty.pack"), 0, 0, 0);
    rf_dataset *ds = open_or_die(at("empty.pack"));
    CHECK_EQ(rf_dataset_size(ds), 0);
    CHECK_EQ(rf_dataset_classes(ds), 0);
    rf_dataset_close(ds);
    printf("pack writer: bad shape, bad folder, abort, empty pack\n");
}

/* Every loader refuses a pack without samples ("has no samples"), so
 * rf_pack_writer_finish() refuses to write one, naming the path and what
 * to do, and leaves the file at the path as it was: a packer whose every
 * sample was filtered out learns it then, not when a run starts on the
 * file. (It wrote the empty pack over the old one.) Also with a
 * dictionary and a shape, and with no detail asked for. */
TEST_CASE(test_pack_writer_refuses_no_samples, "pack",
          "writer: finish with no sample is refused, the file there kept")
{
    const char *path = at("nothing.pack");
    write_file(path, "an older pack", 13);
    rf_pack_writer *w = NULL;
    char *why = NULL;
    CHECK_OK(rf_pack_writer_create(&w, path, 0, 0, 0, RF_LAYOUT_NHWC, NULL, 0,
                                   &why));
    CHECK_EQ(rf_pack_writer_finish(w, &why), -ENODATA);
    printf("  %s\n", why);
    char want[600];
    rf__format(want, sizeof(want),
               "%s: no sample was added, and a pack without samples is "
               "refused by every loader; add samples with "
               "rf_pack_writer_add() first (or, with nothing to pack, "
               "rf_pack_writer_abort()). No file was written",
               path);
    CHECK_STR_EQ(why, want);
    free(why);
    size_t size = 0;
    uint8_t *kept = read_whole(path, &size);
    CHECK(size == 13 && memcmp(kept, "an older pack", 13) == 0);
    free(kept);
    CHECK_OK(rf_pack_writer_create(&w, at("nothing-raw.pack"), RAW_H, RAW_W,
                                   RAW_C, RF_LAYOUT_NCHW, "dict", 4, NULL));
    CHECK_EQ(rf_pack_writer_finish(w, NULL), -ENODATA);
    CHECK_EQ(access(at("nothing-raw.pack"), F_OK), -1);
    /* and no temporary file beside them (path.XXXXXXXX.tmp) */
    DIR *d = opendir(base);
    CHECK(d != NULL);
    for (struct dirent *e; (e = readdir(d));)
        CHECK(strncmp(e->d_name, "nothing", 7) != 0 ||
              strcmp(e->d_name, "nothing.pack") == 0);
    closedir(d);
    CHECK_EQ(unlink(path), 0);
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

static void setup(void)
{
    scratch_make(base, sizeof(base), "pack-format");
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
