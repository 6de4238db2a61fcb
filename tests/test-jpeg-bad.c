/*
 * test-jpeg-bad.c - lib/decode/jpeg.c on bad input (section (c) of the
 * JPEG tests): not a JPEG, truncated or with bytes after the end, corrupt
 * entropy-coded data, the pixel, scan and decode-memory limits, the
 * process out of memory, 12-bit, bad crops. Every case fails with its own
 * reason, never crashes, and leaves the decoder usable: it then decodes a
 * good file as before. Setup makes the fixtures and the decoder once;
 * every case's child inherits them.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "jpeg-fixtures.h"
#include "proc.h"

/* ---- (c) bad input ------------------------------------------------------ */

/* Expects failure with a reason containing `needle`. */
static void expect_failure(struct rf__jpeg_decoder *dec, const struct blob *b,
                           const struct rf__jpeg_options *opt,
                           const char *needle)
{
    struct chooser ch = {.whole = true};
    uint8_t *px = decode_with(dec, b, opt, &ch, 32, 32, 3, RF_LAYOUT_NHWC);
    if (px)
        fprintf(stderr, "expected a failure with \"%s\"\n", needle);
    CHECK(px == NULL);
    CHECK_CONTAINS(reason, needle);
    printf("  refused: %s\n", reason);
}

/* SOS markers: entropy-coded data stuffs every 0xff with a 0x00, so
 * 0xff 0xda is always a marker. */
static unsigned count_scans(const struct blob *b)
{
    unsigned n = 0;
    for (size_t i = 0; i + 1 < b->size; i++)
        n += b->data[i] == 0xff && b->data[i + 1] == 0xda;
    return n;
}

/* The offset of the first SOFn marker segment. */
static size_t find_sof(const struct blob *b)
{
    for (size_t i = 2; i + 4 < b->size; i++)
        if (b->data[i] == 0xff && (b->data[i + 1] & 0xf0) == 0xc0 &&
            b->data[i + 1] != 0xc4 && b->data[i + 1] != 0xcc)
            return i;
    CHECK(!"a SOF marker");
    return 0;
}

static struct blob copy_blob(const struct blob *b, size_t size)
{
    struct blob c = {malloc(size ? size : 1), size};
    CHECK(c.data);
    memcpy(c.data, b->data, size < b->size ? size : b->size);
    return c;
}

/* The decoder must work as before after any failure. */
static void check_still_works(struct rf__jpeg_decoder *dec, const uint8_t *good,
                              uint32_t w, uint32_t h)
{
    uint8_t *px = decode_whole(dec, &fixtures[0].jpeg, w, h, 3);
    check_same(px, good, (size_t)w * h * 3, "decode after a failure");
    free(px);
}

static void test_not_jpeg(struct rf__jpeg_decoder *dec,
                          const struct rf__jpeg_options *opt)
{
    static const uint8_t random10[10] = {0x3a, 0x91, 0x07, 0xc4, 0x5e,
                                         0x22, 0xf0, 0x18, 0x6b, 0xd9};
    static const uint8_t png[16] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n',
                                    0,    0,   0,   13,  'I',  'H',  'D',  'R'};
    static const uint8_t gif[8] = {'G', 'I', 'F', '8', '9', 'a', 1, 0};
    static const uint8_t one[1] = {0xff};
    static const uint8_t apple_double[8] = {0, 5, 0x16, 7, 0, 2, 0, 0};
    const struct blob empty = {(uint8_t *)png, 0};
    const struct blob rnd = {(uint8_t *)random10, sizeof(random10)};
    const struct blob p = {(uint8_t *)png, sizeof(png)};
    const struct blob g = {(uint8_t *)gif, sizeof(gif)};
    const struct blob o = {(uint8_t *)one, sizeof(one)};
    const struct blob mac = {(uint8_t *)apple_double, sizeof(apple_double)};
    expect_failure(dec, &empty, opt, "empty file (0 bytes)");
    expect_failure(dec, &rnd, opt,
                   "not a JPEG file (starts with 3a 91 07 c4: unknown");
    expect_failure(dec, &p, opt,
                   "not a JPEG file (starts with 89 50 4e 47: "
                   "PNG)");
    expect_failure(dec, &g, opt, "starts with 47 49 46 38: GIF");
    expect_failure(dec, &mac, opt,
                   "starts with 00 05 16 07: macOS AppleDouble metadata, a "
                   "'._' file a Mac leaves");
    expect_failure(dec, &o, opt, "premature end of data");
}

/* Expects a crop of 40 rows from row `top` to fail. */
static void expect_crop_failure(struct rf__jpeg_decoder *dec,
                                const struct blob *b,
                                const struct rf__jpeg_options *opt, double top,
                                const char *needle)
{
    struct chooser ch = {.whole = false, .crop = {100, top, 200, 40, false}};
    uint8_t *px = decode_with(dec, b, opt, &ch, 100, 20, 3, RF_LAYOUT_NHWC);
    CHECK(px == NULL);
    CHECK_CONTAINS(reason, needle);
    printf("  refused (crop of rows %g to %g): %s\n", top, top + 40, reason);
}

/* The crop of the bottom 40 rows: the rows above it are skipped, yet
 * their damage must still be seen (jpeg_skip_scanlines entropy-decodes
 * what it skips). */
static void expect_bottom_crop_failure(struct rf__jpeg_decoder *dec,
                                       const struct blob *b,
                                       const struct rf__jpeg_options *opt,
                                       const char *needle)
{
    expect_crop_failure(dec, b, opt, 300, needle);
}

static void test_truncated(struct rf__jpeg_decoder *dec,
                           const struct rf__jpeg_options *opt)
{
    const struct blob *jpeg = &fixtures[0].jpeg;
    static const size_t percents[] = {50, 99};
    for (size_t i = 0; i < 2; i++) {
        struct blob cut = copy_blob(jpeg, jpeg->size * percents[i] / 100);
        expect_failure(dec, &cut, opt, "premature end of data");
        if (percents[i] == 50)
            expect_bottom_crop_failure(dec, &cut, opt, "premature end of data");
        /* a crop of the top rows does not decode down to the cut, but
         * the missing end marker gives the cut away: a cut file fails
         * whatever the crop, in every epoch */
        expect_crop_failure(dec, &cut, opt, 0, "no end-of-image marker");
        free(cut.data);
    }
    /* bytes after the end marker (some cameras append data, with FF
     * bytes in it) are no cut, whatever the crop */
    struct blob tail = copy_blob(jpeg, jpeg->size + 4096);
    for (size_t k = jpeg->size; k < tail.size; k++)
        tail.data[k] = (uint8_t)(k % 7 == 0 ? 0xff : k * 13);
    struct chooser top = {.whole = false, .crop = {100, 0, 200, 40, false}};
    uint8_t *px =
        decode_with(dec, &tail, opt, &top, 100, 20, 3, RF_LAYOUT_NHWC);
    if (!px)
        fprintf(stderr, "trailing data refused: %s\n", reason);
    CHECK(px != NULL);
    free(px);
    free(tail.data);
    struct blob header_only = copy_blob(jpeg, 300);
    expect_failure(dec, &header_only, opt, "premature end of data");
    free(header_only.data);
    /* the last two bytes (EOI) missing: seen at jpeg_finish_decompress */
    struct blob no_eoi = copy_blob(jpeg, jpeg->size - 2);
    expect_failure(dec, &no_eoi, opt, "premature end of data");
    free(no_eoi.data);
    /* the progressive file is read whole at start: a cut is always seen */
    const struct blob *prog = &fixtures[5].jpeg;
    struct blob cut = copy_blob(prog, prog->size * 80 / 100);
    expect_failure(dec, &cut, opt, "premature end of data");
    free(cut.data);
}

/* A file cut inside its header (here inside SOF) has no rows that
 * libjpeg could complete with grey: it is refused with or without
 * accept_truncated, and the reason offers no setting (the loader's
 * "jpeg_warnings='lenient' accepts it" would not). */
static void test_header_cut(struct rf__jpeg_decoder *dec,
                            const struct rf__jpeg_options *opt)
{
    const struct blob *jpeg = &fixtures[0].jpeg;
    struct blob head = copy_blob(jpeg, find_sof(jpeg) + 6);
    expect_failure(dec, &head, opt, "truncated inside its header");
    CHECK(strstr(reason, "LENIENT") == NULL);
    struct rf__jpeg_options lenient = *opt;
    lenient.accept_truncated = true;
    expect_failure(dec, &head, &lenient, "truncated inside its header");
    free(head.data);
}

/* Entropy-coded data with 64 bytes inverted in the middle. Huffman codes
 * resynchronise by themselves, so a few damaged bytes often decode to
 * wrong pixels without any warning (libjpeg cannot see it); 64 bytes
 * leave the stream out of step, which shows at the next restart marker or
 * as extraneous bytes before EOI. */
static struct blob corrupt(const struct blob *jpeg)
{
    struct blob bad = copy_blob(jpeg, jpeg->size);
    CHECK(bad.size > 256);
    for (size_t i = bad.size / 2; i < bad.size / 2 + 64; i++) {
        bad.data[i] ^= 0xff;
        if (bad.data[i] == 0xff) /* no accidental marker */
            bad.data[i] = 0xfe;
    }
    return bad;
}

static void test_corrupt_entropy(struct rf__jpeg_decoder *dec,
                                 const struct rf__jpeg_options *opt, uint32_t w,
                                 uint32_t h)
{
    struct rf__jpeg_options relaxed = *opt;
    relaxed.warnings_are_errors = false;
    struct chooser ch = {.whole = true};
    static const int damaged[] = {0, 7}; /* plain; restart markers */
    for (int i = 0; i < 2; i++) {
        struct blob bad = corrupt(&fixtures[damaged[i]].jpeg);
        expect_failure(dec, &bad, opt, "libjpeg warning: Corrupt JPEG data");
        CHECK_CONTAINS(reason,
                       "(RF_PARAM_JPEG_WARNINGS RF_JPEG_STRICT refuses");
        /* without restart markers the damage shows only at the end of
         * the data, which a crop above the last rows never reaches */
        if (damaged[i] == 7)
            expect_bottom_crop_failure(dec, &bad, opt, "Corrupt JPEG data");
        uint8_t *px =
            decode_with(dec, &bad, &relaxed, &ch, w, h, 3, RF_LAYOUT_NHWC);
        CHECK(px != NULL);
        free(px);
        free(bad.data);
    }
    printf("  accepted with warnings_are_errors = false\n");
    /* A truncated file fails unless truncation is accepted (PIL refuses
     * it too); then libjpeg completes it with grey. */
    const struct blob *jpeg = &fixtures[0].jpeg;
    struct blob cut = copy_blob(jpeg, jpeg->size / 2);
    expect_failure(dec, &cut, &relaxed, "premature end of data");
    relaxed.accept_truncated = true;
    uint8_t *px =
        decode_with(dec, &cut, &relaxed, &ch, w, h, 3, RF_LAYOUT_NHWC);
    CHECK(px != NULL);
    free(px);
    free(cut.data);
}

static void test_limits(struct rf__jpeg_decoder *dec,
                        const struct rf__jpeg_options *opt)
{
    struct rf__jpeg_options small = *opt;
    small.max_pixels = 1000;
    expect_failure(dec, &fixtures[0].jpeg, &small,
                   "500 x 375 pixels is above the limit of 1000; raise "
                   "RF_PARAM_MAX_PIXELS");
    const struct blob *prog = &fixtures[5].jpeg;
    const unsigned scans = count_scans(prog);
    CHECK_GT(scans, 3);
    struct rf__jpeg_options few = *opt;
    few.max_scans = scans - 1;
    expect_failure(dec, prog, &few, "more than");
    expect_failure(dec, prog, &few, "raise RF_PARAM_MAX_SCANS");
    few.max_scans = scans; /* exactly enough */
    struct chooser ch = {.whole = true};
    uint8_t *px = decode_with(dec, prog, &few, &ch, 50, 50, 3, RF_LAYOUT_NHWC);
    CHECK(px != NULL);
    free(px);
    printf("  progressive file of %u scans: refused at max_scans %u, "
           "accepted at %u\n",
           scans, scans - 1, scans);
}

static bool decodes_under(struct rf__jpeg_decoder *dec, const struct blob *b,
                          const struct rf__jpeg_options *opt, uint64_t limit)
{
    struct rf__jpeg_options capped = *opt;
    capped.max_decode_memory = limit;
    struct chooser ch = {.whole = true};
    uint8_t *px = decode_with(dec, b, &capped, &ch, 64, 64, 3, RF_LAYOUT_NHWC);
    free(px);
    return px != NULL;
}

/* 2048 x 2048 is 256 x 256 blocks per full-size component, 128 bytes
 * each: a progressive 4:4:4 file keeps 24 MiB of coefficients, a 4:2:0
 * one 12 MiB, and a baseline one none. */
static void test_memory_limit(struct rf__jpeg_decoder *dec,
                              const struct rf__jpeg_options *opt)
{
    const uint64_t mib = 1u << 20;
    const struct image big = make_image(2048, 2048, 3);
    struct blob prog444 = tj_encode(&big, TJSAMP_444, 75, TJFLAG_PROGRESSIVE);
    struct blob prog420 = tj_encode(&big, TJSAMP_420, 75, TJFLAG_PROGRESSIVE);
    struct blob baseline = tj_encode(&big, TJSAMP_444, 75, 0);
    struct rf__jpeg_options capped = *opt;
    capped.max_decode_memory = 23 * mib;
    expect_failure(dec, &prog444, &capped,
                   "a multi-scan (progressive) JPEG of 2048 x 2048 pixels "
                   "needs 24 MiB of memory to decode, above the limit of 23 "
                   "MiB; raise RF_PARAM_MAX_DECODE_MEMORY");
    capped.max_decode_memory = 11 * mib;
    expect_failure(dec, &prog420, &capped, "needs 12 MiB");
    /* the coefficients alone fit; libjpeg's count adds its row buffers */
    capped.max_decode_memory = 24 * mib;
    expect_failure(dec, &prog444, &capped,
                   "needs more than the limit of 24 MiB of memory; raise "
                   "RF_PARAM_MAX_DECODE_MEMORY");
    CHECK(decodes_under(dec, &prog444, opt, 26 * mib));
    CHECK(decodes_under(dec, &prog420, opt, 13 * mib));
    CHECK(decodes_under(dec, &baseline, opt, 1 * mib));
    CHECK(decodes_under(dec, &prog444, opt, 0)); /* 0: no limit */
    printf("  2048 x 2048 progressive: refused under 24 MiB (4:4:4) and 12 "
           "MiB (4:2:0), decoded at 26 and 13; baseline decoded at 1 MiB\n");
    free(prog444.data);
    free(prog420.data);
    free(baseline.data);
    free(big.px);
}

/* A progressive file whose 24 MiB of coefficients fit the decode memory
 * limit but not the process's address space (capped, in this case's own
 * process, at what it maps plus 8 MiB): libjpeg's allocation fails, and
 * the reason blames the process's memory, not the file. */
static void test_out_of_memory(struct rf__jpeg_decoder *dec,
                               const struct rf__jpeg_options *opt)
{
#ifdef ALLOCATOR_ABORTS
    (void)dec;
    (void)opt;
    TEST_SKIP_BECAUSE("a sanitizer's allocator aborts instead of failing");
#else
    const struct image big = make_image(2048, 2048, 3);
    struct blob prog444 = tj_encode(&big, TJSAMP_444, 75, TJFLAG_PROGRESSIVE);
    struct rlimit old;
    CHECK_EQ(getrlimit(RLIMIT_AS, &old), 0);
    const rlim_t cap = (rlim_t)mapped_bytes() + (8u << 20);
    if (old.rlim_max != RLIM_INFINITY && old.rlim_max < cap)
        TEST_SKIP_BECAUSE("the hard RLIMIT_AS leaves no room to test");
    const struct rlimit capped = {cap, old.rlim_max};
    CHECK_EQ(setrlimit(RLIMIT_AS, &capped), 0);
    struct chooser ch = {.whole = true};
    uint8_t *px =
        decode_with(dec, &prog444, opt, &ch, 64, 64, 3, RF_LAYOUT_NHWC);
    CHECK_EQ(setrlimit(RLIMIT_AS, &old), 0);
    CHECK(px == NULL);
    printf("  refused: %s\n", reason);
    CHECK_CONTAINS(reason, "the process ran out of memory decoding this "
                           "progressive JPEG of 2048 x 2048 pixels (the file "
                           "is not at fault)");
    CHECK_CONTAINS(reason, "ulimit -v");
    CHECK_CONTAINS(reason, "RF_PARAM_MAX_DECODE_MEMORY");
    CHECK_CONTAINS(reason, "RF_PARAM_MAX_PIXELS");
    CHECK(strstr(reason, "damaged") == NULL);
    /* with the memory back, the same file decodes */
    px = decode_with(dec, &prog444, opt, &ch, 64, 64, 3, RF_LAYOUT_NHWC);
    CHECK(px != NULL);
    free(px);
    free(prog444.data);
    free(big.px);
#endif
}

/* libjpeg-turbo's 8-bit library cannot write a 12-bit file; the header
 * of one is enough, since decoding stops at it: the SOF precision byte
 * of an 8-bit file set to 12. */
static void test_12_bit(struct rf__jpeg_decoder *dec,
                        const struct rf__jpeg_options *opt)
{
    struct blob b = copy_blob(&fixtures[0].jpeg, fixtures[0].jpeg.size);
    b.data[find_sof(&b) + 4] = 12;
    expect_failure(dec, &b, opt, "12-bit JPEG is not supported");
    free(b.data);
}

static void test_bad_crops(struct rf__jpeg_decoder *dec,
                           const struct rf__jpeg_options *opt)
{
    struct chooser ch = {.whole = false, .crop = {10, 10, 0, 50, false}};
    CHECK(!decode_with(dec, &fixtures[0].jpeg, opt, &ch, 32, 32, 3,
                       RF_LAYOUT_NHWC));
    CHECK_CONTAINS(reason, "empty crop box");
    ch.crop = (struct rf__crop)RF_CROP_BOX(900, 10, 50, 50, false);
    CHECK(!decode_with(dec, &fixtures[0].jpeg, opt, &ch, 32, 32, 3,
                       RF_LAYOUT_NHWC));
    CHECK_CONTAINS(reason, "is outside the image");
    ch.whole = true;
    CHECK(!decode_with(dec, &fixtures[0].jpeg, opt, &ch, 32, 32, 2,
                       RF_LAYOUT_NHWC));
    CHECK_CONTAINS(reason, "channels must be 1 or 3");
}

/* ---- the cases ----------------------------------------------------------- */

/* One kind of bad input; then the decoder must decode a good file as
 * before. */
static void bad_input_case(void (*fail)(struct rf__jpeg_decoder *,
                                        const struct rf__jpeg_options *))
{
    const struct rf__jpeg_options opt = default_options();
    uint8_t *good =
        decode_whole(decoder, &fixtures[0].jpeg, FIXTURE_W, FIXTURE_H, 3);
    fail(decoder, &opt);
    check_still_works(decoder, good, FIXTURE_W, FIXTURE_H);
    free(good);
}

static void corrupt_entropy(struct rf__jpeg_decoder *dec,
                            const struct rf__jpeg_options *opt)
{
    test_corrupt_entropy(dec, opt, FIXTURE_W, FIXTURE_H);
}

/* Case case_<what>(): bad_input_case() of FAIL. */
#define BAD_INPUT_CASE(fn, name, fail)                                         \
    TEST_CASE(fn, "bad", name)                                                 \
    {                                                                          \
        bad_input_case(fail);                                                  \
    }

BAD_INPUT_CASE(case_not_jpeg, "not a JPEG", test_not_jpeg)
BAD_INPUT_CASE(case_truncated, "truncated, or bytes after the end",
               test_truncated)
BAD_INPUT_CASE(case_header_cut, "cut inside the header: no setting offered",
               test_header_cut)
BAD_INPUT_CASE(case_corrupt_entropy, "corrupt entropy-coded data",
               corrupt_entropy)
BAD_INPUT_CASE(case_limits, "pixel and scan limits", test_limits)
BAD_INPUT_CASE(case_memory_limit, "decode memory limit", test_memory_limit)
BAD_INPUT_CASE(case_out_of_memory,
               "out of memory: the process's limit, not the file",
               test_out_of_memory)
BAD_INPUT_CASE(case_12_bit, "12-bit", test_12_bit)
BAD_INPUT_CASE(case_bad_crops, "empty and outside crops, 2 channels",
               test_bad_crops)

int main(int argc, char **argv)
{
    return TEST_MAIN_WITH(argc, argv, fixtures_setup, fixtures_teardown);
}
