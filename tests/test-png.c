/*
 * test-png.c - lib/decode/png.c (whole images, see lib/decode/image.h)
 * against PIL, which torchvision opens images with.
 *
 * Each kind of PNG (palette, grey at 1 to 16 bits, grey+alpha, RGB and
 * RGBA at 8 and 16 bits, Adam7, colour chunks) is made with libpng's write
 * API (image-png.h) and written to a temporary file; PIL's
 * Image.open(f).convert("RGB") and convert("L") of it must equal the
 * decoder's pixels to the byte (image-pil.h). Truncated and damaged files
 * are refused with a reason, as PIL refuses them, with nothing on stderr,
 * and where PIL and libpng differ PIL's verdict is the one taken; the
 * limits refuse an image before its pixels are allocated, and running out
 * of memory blames the process, not the file. A case that needs PIL skips
 * without it. Built when configure found libpng.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <png.h>

#include "decode/image.h"
#include "harness.h"
#include "image-pil.h"
#include "image-png.h"
#include "proc.h"
#include "test.h"

/* ---- PNG ----------------------------------------------------------------- */

/* One kind of PNG against PIL; odd sizes, so that packed rows end
 * mid-byte. */
static void check_png(int color_type, int bit_depth, bool interlaced,
                      unsigned palette_size, unsigned trns, const char *what)
{
    const struct png_spec s = {.width = 37,
                               .height = 23,
                               .color_type = color_type,
                               .bit_depth = bit_depth,
                               .interlaced = interlaced,
                               .palette_size = palette_size,
                               .trns = trns};
    struct blob b = make_png(&s);
    CHECK_EQ(compare_with_pil(PNG, &b, what), 0);
    free(b.data);
}

TEST_CASE_LIMIT(test_png_palette, "png",
                "palette, with and without tRNS, 1 to 8 bits", 60)
{
    check_png(PNG_COLOR_TYPE_PALETTE, 8, false, 200, 0, "palette 8-bit");
    check_png(PNG_COLOR_TYPE_PALETTE, 8, false, 256, 100, "palette + tRNS");
    check_png(PNG_COLOR_TYPE_PALETTE, 4, false, 13, 5, "palette 4-bit");
    check_png(PNG_COLOR_TYPE_PALETTE, 2, false, 4, 4, "palette 2-bit");
    check_png(PNG_COLOR_TYPE_PALETTE, 1, false, 2, 0, "palette 1-bit");
}

TEST_CASE_LIMIT(test_png_grey, "png", "grey 1 to 8 bits", 60)
{
    check_png(PNG_COLOR_TYPE_GRAY, 1, false, 0, 0, "grey 1-bit");
    check_png(PNG_COLOR_TYPE_GRAY, 2, false, 0, 0, "grey 2-bit");
    check_png(PNG_COLOR_TYPE_GRAY, 4, false, 0, 1, "grey 4-bit + tRNS");
    check_png(PNG_COLOR_TYPE_GRAY, 8, false, 0, 0, "grey 8-bit");
    check_png(PNG_COLOR_TYPE_GRAY, 8, false, 0, 1, "grey 8-bit + tRNS");
}

TEST_CASE_LIMIT(test_png_grey16, "png", "grey 16-bit clipped as PIL's I mode",
                60)
{
    check_png(PNG_COLOR_TYPE_GRAY, 16, false, 0, 0, "grey 16-bit");
    check_png(PNG_COLOR_TYPE_GRAY, 16, false, 0, 1, "grey 16-bit + tRNS");
}

TEST_CASE_LIMIT(test_png_grey_alpha, "png", "grey+alpha 8 and 16 bits", 60)
{
    check_png(PNG_COLOR_TYPE_GRAY_ALPHA, 8, false, 0, 0, "grey+alpha 8-bit");
    check_png(PNG_COLOR_TYPE_GRAY_ALPHA, 16, false, 0, 0, "grey+alpha 16-bit");
}

TEST_CASE_LIMIT(test_png_rgb, "png", "RGB and RGBA, 8 and 16 bits", 60)
{
    check_png(PNG_COLOR_TYPE_RGB, 8, false, 0, 0, "RGB 8-bit");
    check_png(PNG_COLOR_TYPE_RGB, 8, false, 0, 1, "RGB 8-bit + tRNS");
    check_png(PNG_COLOR_TYPE_RGB, 16, false, 0, 0, "RGB 16-bit");
    check_png(PNG_COLOR_TYPE_RGB_ALPHA, 8, false, 0, 0, "RGBA 8-bit");
    check_png(PNG_COLOR_TYPE_RGB_ALPHA, 16, false, 0, 0, "RGBA 16-bit");
}

TEST_CASE_LIMIT(test_png_interlaced, "png", "Adam7 interlaced", 60)
{
    check_png(PNG_COLOR_TYPE_RGB, 8, true, 0, 0, "Adam7 RGB");
    check_png(PNG_COLOR_TYPE_RGB_ALPHA, 16, true, 0, 0, "Adam7 RGBA 16-bit");
    check_png(PNG_COLOR_TYPE_PALETTE, 4, true, 16, 3, "Adam7 palette 4-bit");
    check_png(PNG_COLOR_TYPE_GRAY, 16, true, 0, 0, "Adam7 grey 16-bit");
    check_png(PNG_COLOR_TYPE_GRAY, 1, true, 0, 0, "Adam7 grey 1-bit");
}

TEST_CASE_LIMIT(test_png_colour_chunks, "png", "gAMA, cHRM and sRGB ignored",
                60)
{
    const struct png_spec s = {.width = 40,
                               .height = 30,
                               .color_type = PNG_COLOR_TYPE_RGB_ALPHA,
                               .bit_depth = 8,
                               .colour_chunks = true};
    struct blob b = make_png(&s);
    CHECK_EQ(compare_with_pil(PNG, &b, "RGBA with gAMA, cHRM, sRGB"), 0);
    free(b.data);
}

static struct blob rgb_png(uint32_t width, uint32_t height)
{
    const struct png_spec s = {.width = width,
                               .height = height,
                               .color_type = PNG_COLOR_TYPE_RGB,
                               .bit_depth = 8};
    return make_png(&s);
}

/* A file whose IDAT begins at byte 33 (signature 8, IHDR 25). */
#define PNG_FIRST_IDAT 33

TEST_CASE_LIMIT(test_png_truncated, "png", "truncated files refused", 60)
{
    struct blob b = rgb_png(64, 48);
    const size_t cuts[] = {0,          7,          20, PNG_FIRST_IDAT + 4,
                           b.size / 2, b.size - 30};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        struct blob cut = {b.data, cuts[i], cuts[i]};
        check_refused(PNG, &cut, NULL);
    }
    struct blob end = {b.data, b.size / 2, 0};
    check_refused(PNG, &end, "ends early");
    /* without IEND, the pixels are whole: PIL takes them, and so do we */
    struct blob no_iend = {b.data, b.size - 12, 0};
    CHECK_EQ(compare_with_pil(PNG, &no_iend, "no IEND"), 0);
    free(b.data);
}

/* `b` cut by 12 to 20 bytes (IEND, then IDAT's CRC, then zlib's Adler-32)
 * decodes to the whole file's pixels; cut by `lost` bytes, a row is gone
 * and the file refused. With PIL, every cut up to 32 bytes gets PIL's
 * verdict and, when taken, PIL's pixels. */
static void check_cut_after_last_row(const struct blob *b, size_t lost,
                                     const char *what)
{
    struct rf__image whole, im;
    char err[256] = "";
    CHECK_EQ(decode(PNG, b, &default_limits, 3, &whole, err, sizeof(err), NULL),
             0);
    for (size_t cut = 12; cut <= 20; cut++) {
        struct blob c = {b->data, b->size - cut, 0};
        if (decode(PNG, &c, &default_limits, 3, &im, err, sizeof(err), NULL) !=
            0) {
            fprintf(stderr, "%s, %zu bytes cut: %s\n", what, cut, err);
            CHECK(!"a file whole to its last row was refused");
        }
        CHECK_EQ(image_bytes(&im), image_bytes(&whole));
        CHECK(memcmp(im.pixels, whole.pixels, image_bytes(&im)) == 0);
        free((void *)im.pixels);
    }
    const size_t whole_bytes = image_bytes(&whole);
    free((void *)whole.pixels);
    struct blob short_of_a_row = {b->data, b->size - lost, 0};
    check_refused(PNG, &short_of_a_row, "ends early");
    if (!have_python())
        return;
    for (size_t cut = 12; cut <= 32; cut++) {
        struct blob c = {b->data, b->size - cut, 0};
        char path[512];
        write_temp(&c, path, sizeof(path));
        const int rc =
            decode(PNG, &c, &default_limits, 3, &im, err, sizeof(err), NULL);
        uint8_t *pil = pil_pixels(path, "RGB", whole_bytes);
        unlink(path);
        printf("  %s, %zu bytes cut: PIL %s it, ringfeed %s it\n", what, cut,
               pil ? "takes" : "refuses", rc == 0 ? "takes" : "refuses");
        CHECK_EQ(rc == 0, pil != NULL);
        if (rc == 0) {
            CHECK(memcmp(im.pixels, pil, whole_bytes) == 0);
            free((void *)im.pixels);
        }
        free(pil);
    }
}

/* PIL stops reading once it has every row, so a file cut after them is
 * taken, however little of IDAT's CRC or the zlib stream's checksum is
 * left; libpng alone would refuse it. */
TEST_CASE_LIMIT(test_png_cut_after_last_row, "png",
                "cut after the last row taken, as PIL", 120)
{
    struct blob b = rgb_png(300, 200);
    check_cut_after_last_row(&b, 200, "RGB cut after its last row");
    free(b.data);
    /* Adam7, its last pass with and without the last row */
    const uint32_t heights[] = {23, 24};
    for (size_t i = 0; i < 2; i++) {
        const struct png_spec s = {.width = 37,
                                   .height = heights[i],
                                   .color_type = PNG_COLOR_TYPE_RGB,
                                   .bit_depth = 8,
                                   .interlaced = true};
        b = make_png(&s);
        check_cut_after_last_row(&b, 60, "Adam7 cut after its last row");
        free(b.data);
    }
}

TEST_CASE_LIMIT(test_png_damaged, "png", "damaged files refused", 60)
{
    struct blob b = rgb_png(64, 48);
    /* a byte of the compressed pixels: zlib's stream breaks (IDAT's CRC
     * is not checked, as PIL does not) */
    b.data[PNG_FIRST_IDAT + 8 + 20] ^= 0x55;
    check_refused(PNG, &b, "PNG: IDAT");
    b.data[PNG_FIRST_IDAT + 8 + 20] ^= 0x55;
    /* the IHDR's width made zero: its CRC no longer matches */
    memset(b.data + 16, 0, 4);
    check_refused(PNG, &b, "PNG: IHDR: CRC error");
    uint8_t junk[100];
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (uint8_t)noise((uint32_t)i, 0, 0, 5);
    struct blob garbage = {junk, sizeof(junk), 0};
    check_refused(PNG, &garbage, "not a PNG");
    free(b.data);
}

/* The offset of the first chunk of that type (its length field). */
static size_t find_chunk(const struct blob *b, const char *type)
{
    size_t pos = 8;
    while (pos + 12 <= b->size) {
        if (memcmp(b->data + pos + 4, type, 4) == 0)
            return pos;
        const uint8_t *l = b->data + pos;
        pos += 12 + ((size_t)l[0] << 24 | (size_t)l[1] << 16 |
                     (size_t)l[2] << 8 | l[3]);
    }
    CHECK(!"no such chunk");
    return 0;
}

/* Flips a bit of the chunk's CRC. */
static void break_crc(struct blob *b, const char *type)
{
    const size_t pos = find_chunk(b, type);
    const uint8_t *l = b->data + pos;
    const size_t length =
        (size_t)l[0] << 24 | (size_t)l[1] << 16 | (size_t)l[2] << 8 | l[3];
    b->data[pos + 8 + length] ^= 1;
}

/* PNG with a tEXt and an unknown critical chunk "ABCD" before IDAT. */
static struct blob png_with_chunks(void)
{
    const struct png_spec s = {.width = 16,
                               .height = 8,
                               .color_type = PNG_COLOR_TYPE_RGB,
                               .bit_depth = 8,
                               .unknown_chunks = true};
    return make_png(&s);
}

/* Where PIL and libpng judge a file differently, PIL's verdict. */
TEST_CASE_LIMIT(test_png_pil_verdicts, "png",
                "PIL's verdicts where libpng's differ", 60)
{
    struct blob b = png_with_chunks();
    /* an unknown critical chunk: skipped (libpng alone would refuse) */
    CHECK_EQ(compare_with_pil(PNG, &b, "unknown critical chunk"), 0);
    /* IDAT's CRC: PIL does not check it */
    break_crc(&b, "IDAT");
    CHECK_EQ(compare_with_pil(PNG, &b, "bad IDAT CRC"), 0);
    /* a chunk before the pixels with a bad CRC: PIL refuses the file */
    break_crc(&b, "tEXt");
    check_refused(PNG, &b, "tEXt: CRC error");
    free(b.data);
    /* indices past PLTE: PIL's default palette, (i, i, i) */
    const struct png_spec s = {.width = 37,
                               .height = 23,
                               .color_type = PNG_COLOR_TYPE_PALETTE,
                               .bit_depth = 8,
                               .palette_size = 5,
                               .trns = 2,
                               .index_beyond = true};
    b = make_png(&s);
    CHECK_EQ(compare_with_pil(PNG, &b, "indices past PLTE"), 0);
    free(b.data);
}

/* A PNG's signature and IHDR for width x height, then an IDAT's start:
 * all that the limits need to see. */
static struct blob huge_png_header(uint32_t width, uint32_t height)
{
    const struct png_spec s = {.width = width,
                               .height = height,
                               .color_type = PNG_COLOR_TYPE_RGB,
                               .bit_depth = 8,
                               .header_only = true};
    return make_png(&s);
}

TEST_CASE_LIMIT(test_png_limits, "png", "limits refuse before allocating", 60)
{
    struct blob huge = huge_png_header(50000, 50000);
    struct blob b = rgb_png(1000, 1000);
    check_limits(PNG, &huge, "50000 x 50000 pixels is above the limit", &b,
                 1u << 20, 4u << 20);
    free(huge.data);
    free(b.data);
}

/* A PNG of 5000 x 5000 whose 72 MiB of pixels fit the limits but not the
 * address space (capped, in this case's own process, at what it maps
 * plus 16 MiB): the reason blames the process's memory, not the file. */
TEST_CASE_LIMIT(test_png_out_of_memory, "png",
                "out of memory: the process's limit, not the file", 60)
{
#ifdef ALLOCATOR_ABORTS
    TEST_SKIP_BECAUSE("a sanitizer's allocator aborts instead of failing");
#else
    struct blob big = huge_png_header(5000, 5000);
    struct rlimit old;
    CHECK_EQ(getrlimit(RLIMIT_AS, &old), 0);
    const rlim_t cap = (rlim_t)mapped_bytes() + (16u << 20);
    if (old.rlim_max != RLIM_INFINITY && old.rlim_max < cap)
        TEST_SKIP_BECAUSE("the hard RLIMIT_AS leaves no room to test");
    const struct rlimit capped = {cap, old.rlim_max};
    CHECK_EQ(setrlimit(RLIMIT_AS, &capped), 0);
    struct rf__image im;
    char err[512] = "";
    const int rc =
        decode(PNG, &big, &default_limits, 3, &im, err, sizeof(err), NULL);
    CHECK_EQ(setrlimit(RLIMIT_AS, &old), 0);
    CHECK_EQ(rc, -1);
    printf("  refused: %s\n", err);
    CHECK_CONTAINS(err, "the process ran out of memory decoding this PNG of "
                        "5000 x 5000 pixels, which needs 72 MiB (the file is "
                        "not at fault)");
    CHECK_CONTAINS(err, "ulimit -v");
    CHECK_CONTAINS(err, "RF_PARAM_MAX_DECODE_MEMORY");
    CHECK_CONTAINS(err, "RF_PARAM_MAX_PIXELS");
    free(big.data);
#endif
}

/* One decoder over images of every size and kind in turn: the buffer it
 * reuses never leaks one image into the next. */
TEST_CASE_LIMIT(test_png_reuse, "png", "one decoder reused over many images",
                60)
{
    struct rf__png_decoder *dec = rf__png_decoder_new();
    CHECK(dec);
    const struct png_spec specs[] = {
        {.width = 300,
         .height = 200,
         .color_type = PNG_COLOR_TYPE_RGB,
         .bit_depth = 8},
        {.width = 20,
         .height = 10,
         .color_type = PNG_COLOR_TYPE_GRAY,
         .bit_depth = 16,
         .interlaced = true},
        {.width = 50,
         .height = 40,
         .color_type = PNG_COLOR_TYPE_PALETTE,
         .bit_depth = 8,
         .palette_size = 40},
    };
    struct rf__image first[3];
    for (int round = 0; round < 2; round++)
        for (size_t i = 0; i < 3; i++) {
            struct blob b = make_png(&specs[i]);
            struct rf__image im;
            char err[256];
            CHECK_EQ(rf__png_decode(dec, b.data, b.size, &default_limits, 3,
                                    &im, err, sizeof(err)),
                     0);
            const size_t n = image_bytes(&im);
            if (round == 0) {
                first[i] = im;
                first[i].pixels = copy_of(im.pixels, n);
            } else {
                CHECK(memcmp(first[i].pixels, im.pixels, n) == 0);
                free((void *)first[i].pixels);
            }
            free(b.data);
        }
    rf__png_decoder_free(dec);
}

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
