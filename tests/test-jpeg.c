/*
 * test-jpeg.c - lib/decode/jpeg.c's full decodes and exact crops against
 * TurboJPEG (section (a) of the JPEG tests; the others are test-jpeg-pil,
 * test-jpeg-bad, test-jpeg-cmyk and test-jpeg-exif).
 *
 * Full decodes, every fixture kind (tests/jpeg-fixtures.h), must equal
 * TurboJPEG's tjDecompress2 (the same libjpeg-turbo, ISLOW, fancy
 * upsampling) to the byte, at 8/8 and at every DCT scale; crops read
 * through jpeg_crop_scanline / jpeg_skip_scanlines must equal the same
 * pixels of the full decode. A hard-coded FNV-1a notices a libjpeg
 * change. Also the DCT scale chosen for a crop. Setup makes the fixtures
 * and the decoder once; every case's child inherits them.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jpeg-fixtures.h"

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* ---- (a) full decodes and exact crops ---------------------------------- */

static void test_full_decodes(struct rf__jpeg_decoder *dec, uint32_t w,
                              uint32_t h)
{
    for (int f = 0; f < FIXTURES; f++) {
        const struct fixture *fx = &fixtures[f];
        for (uint32_t channels = 1; channels <= 3; channels += 2) {
            uint8_t *ours = decode_whole(dec, &fx->jpeg, w, h, channels);
            uint8_t *ref = tj_decode(&fx->jpeg, w, h, channels);
            check_same(ours, ref, (size_t)w * h * channels, fx->name);
            free(ours);
            free(ref);
        }
        printf("  %-30s full decode = tjDecompress2 (RGB and grey)\n",
               fx->name);
    }
}

/* Every DCT scale the decoder uses (1/8, 2/8, 4/8, 8/8): the whole image
 * resized to exactly W * M/8 is the identity on the scaled decode, so it
 * must equal TurboJPEG's. */
static void test_scaled_decodes(struct rf__jpeg_decoder *dec)
{
    const struct image im = make_image(320, 240, 3);
    struct blob jpegs[2] = {tj_encode(&im, TJSAMP_420, 90, 0),
                            tj_encode(&im, TJSAMP_420, 90, TJFLAG_PROGRESSIVE)};
    for (int j = 0; j < 2; j++)
        for (uint32_t m = 1; m <= 8; m *= 2) {
            const uint32_t w = 320 * m / 8, h = 240 * m / 8;
            CHECK_EQ(rf__jpeg_scale_for(320, 240, w, h), m);
            const struct rf__crop crop = RF_CROP_BOX(0, 0, 320, 240, false);
            uint8_t *ours =
                decode_crop(dec, &jpegs[j], crop, w, h, 3, RF_LAYOUT_NHWC);
            uint8_t *ref = tj_decode(&jpegs[j], w, h, 3);
            check_same(ours, ref, (size_t)w * h * 3, "scaled decode");
            free(ours);
            free(ref);
        }
    printf("  DCT scales 1/8..8/8 (baseline, progressive) = tjDecompress2\n");
    free(jpegs[0].data);
    free(jpegs[1].data);
    free(im.px);
}

/* A crop of whole 8x8 source blocks, resized to M/8 of its size, is
 * decoded at scale M/8 and is then the identity on that scale: it must be
 * TurboJPEG's own M/8 decode of those pixels. Away from the image's
 * edges, so that jpeg_crop_scanline() narrows the decode and the MCU
 * columns left and right of it are entropy-decoded without being kept
 * (discard_unused_coefficients() in lib/jpeg.c, whose columns scale with
 * M). */
static void check_scaled_crop(struct rf__jpeg_decoder *dec,
                              const struct blob *jpeg, const struct image *im,
                              uint32_t m)
{
    const uint32_t box[4] = {96, 64, 160, 96}; /* x y w h, source pixels */
    const uint32_t sw = im->width * m / 8, sh = im->height * m / 8;
    const uint32_t w = box[2] * m / 8, h = box[3] * m / 8;
    const uint32_t ch = im->channels;
    CHECK_EQ(rf__jpeg_scale_for(box[2], box[3], w, h), m);
    const struct rf__crop crop =
        RF_CROP_BOX(box[0], box[1], box[2], box[3], false);
    uint8_t *ours = decode_crop(dec, jpeg, crop, w, h, ch, RF_LAYOUT_NHWC);
    uint8_t *whole = tj_decode(jpeg, sw, sh, ch);
    const uint32_t x0 = box[0] * m / 8, y0 = box[1] * m / 8;
    for (uint32_t y = 0; y < h; y++)
        check_same(ours + (size_t)y * w * ch,
                   whole + (((size_t)(y0 + y) * sw) + x0) * ch, (size_t)w * ch,
                   "scaled crop");
    free(ours);
    free(whole);
}

static void test_scaled_crops(struct rf__jpeg_decoder *dec)
{
    const struct image rgb = make_image(320, 240, 3);
    const struct image grey = make_image(320, 240, 1);
    /* Luma sampled 4x2 or 2x4 over 1x1 chroma: at 2/8 and 4/8 libjpeg
     * enlarges the chroma's IDCT and still upsamples it, which its
     * jpeg_crop_scanline() gets wrong (see crop_scanline_is_exact()). */
    const struct lj_options h4v2 = {JCS_RGB, JCS_YCbCr, 90, .luma_h = 4,
                                    .luma_v = 2};
    const struct lj_options h2v4 = {JCS_RGB, JCS_YCbCr, 90, .luma_h = 2,
                                    .luma_v = 4};
    struct {
        struct blob jpeg;
        const struct image *im;
    } files[] = {
        {tj_encode(&rgb, TJSAMP_420, 90, 0), &rgb},
        {tj_encode(&rgb, TJSAMP_422, 90, 0), &rgb},
        {tj_encode(&rgb, TJSAMP_444, 90, 0), &rgb},
        {tj_encode(&grey, TJSAMP_GRAY, 90, 0), &grey},
        {tj_encode(&rgb, TJSAMP_420, 90, TJFLAG_PROGRESSIVE), &rgb},
        {lj_encode(&rgb, &h4v2), &rgb},
        {lj_encode(&rgb, &h2v4), &rgb},
    };
    for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
        for (uint32_t m = 1; m <= 8; m *= 2)
            check_scaled_crop(dec, &files[f].jpeg, files[f].im, m);
        free(files[f].jpeg.data);
    }
    printf("  crops of the middle at DCT scales 1/8..8/8 (4:2:0, 4:2:2, "
           "4:4:4, grey, progressive, luma 4x2 and 2x4) = tjDecompress2\n");
    free(rgb.px);
    free(grey.px);
}

/* An integer crop resized to its own size is the identity: it must be
 * the full decode's pixels, wherever the crop's edges fall relative to
 * the iMCU grid (jpeg_crop_scanline widens, jpeg_skip_scanlines skips). */
static void check_exact_crop(struct rf__jpeg_decoder *dec,
                             const struct fixture *fx, const uint8_t *full,
                             uint32_t img_w, const uint32_t box[4],
                             rf_layout layout)
{
    const uint32_t cw = box[2], ch = box[3];
    const struct rf__crop crop = RF_CROP_BOX(box[0], box[1], cw, ch, false);
    uint8_t *ours = decode_crop(dec, &fx->jpeg, crop, cw, ch, 3, layout);
    if (layout == RF_LAYOUT_NCHW) {
        uint8_t *t = nchw_to_nhwc(ours, cw, ch, 3);
        free(ours);
        ours = t;
    }
    for (uint32_t y = 0; y < ch; y++) {
        const uint8_t *want =
            full + (((size_t)(box[1] + y) * img_w) + box[0]) * 3;
        const uint8_t *got = ours + (size_t)y * cw * 3;
        if (memcmp(want, got, (size_t)cw * 3) != 0) {
            fprintf(stderr, "%s: crop %u,%u %ux%u differs in row %u\n",
                    fx->name, box[0], box[1], cw, ch, y);
            CHECK(!"crop equals the full decode");
        }
    }
    free(ours);
}

static void test_exact_crops(struct rf__jpeg_decoder *dec, uint32_t w,
                             uint32_t h)
{
    static const uint32_t offsets[] = {
        0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 47, 150, 151, 159, 160, 161, 200};
    const size_t n = sizeof(offsets) / sizeof(offsets[0]);
    for (int f = 0; f < FIXTURES; f++) {
        const struct fixture *fx = &fixtures[f];
        uint8_t *full = tj_decode(&fx->jpeg, w, h, 3);
        for (size_t i = 0; i < n; i++) {
            const uint32_t a = offsets[i], b = offsets[(i * 7 + 3) % n];
            const uint32_t boxes[4][4] = {{a, b, 48, 40},
                                          {b, a, 65, 33},
                                          {a, b, w - a, h - b},
                                          {w - 40 - a / 8, h - 30, 40, 30}};
            for (int k = 0; k < 4; k++)
                check_exact_crop(dec, fx, full, w, boxes[k],
                                 (i + k) % 2 ? RF_LAYOUT_NCHW : RF_LAYOUT_NHWC);
        }
        free(full);
        printf("  %-30s %zu crops = the full decode's pixels\n", fx->name,
               4 * n);
    }
}

/* Notices when libjpeg-turbo's output changes (another version, another
 * SIMD path): then the goldens above still agree with TurboJPEG, and this
 * says that they moved. */
static void test_checksum(struct rf__jpeg_decoder *dec, uint32_t w, uint32_t h)
{
    uint8_t *px = decode_whole(dec, &fixtures[0].jpeg, w, h, 3);
    const uint64_t sum = fnv1a(px, (size_t)w * h * 3);
    printf("  FNV-1a of the 4:2:0 decode: %016llx\n", (unsigned long long)sum);
    CHECK_EQ(sum, 0x3dc24af9c2b8ad02ull);
    free(px);
}

/* ---- the cases ----------------------------------------------------------- */

TEST_CASE_LIMIT(test_scale_for, "scale", "the DCT scale that covers a crop", 10)
{
    /* Only the scales with SIMD inverse DCTs: 5/8 would cover (234 x
     * 234.4) but its plain-C IDCT is slower than 8/8. */
    CHECK_EQ(rf__jpeg_scale_for(500, 375, 224, 224), 8);
    CHECK_EQ(rf__jpeg_scale_for(900, 600, 224, 224), 4); /* 450 x 300 */
    CHECK_EQ(rf__jpeg_scale_for(260, 250, 224, 224), 8); /* 7/8: 218.75 */
    CHECK_EQ(rf__jpeg_scale_for(2000, 2000, 224, 224), 1);
    CHECK_EQ(rf__jpeg_scale_for(1792, 1792, 224, 224), 1); /* exactly */
    CHECK_EQ(rf__jpeg_scale_for(1791, 1792, 224, 224), 2);
    CHECK_EQ(rf__jpeg_scale_for(64, 48, 224, 224), 8); /* upscale */
}

TEST_CASE(case_full_decodes, "exact",
          "full decodes = tjDecompress2, every fixture")
{
    test_full_decodes(decoder, FIXTURE_W, FIXTURE_H);
}

TEST_CASE(case_scaled_decodes, "exact", "DCT scales 1/8..8/8 = tjDecompress2")
{
    test_scaled_decodes(decoder);
}

TEST_CASE(case_scaled_crops, "exact",
          "crops at every DCT scale = tjDecompress2")
{
    test_scaled_crops(decoder);
}

TEST_CASE(case_exact_crops, "exact", "integer crops = the full decode's pixels")
{
    test_exact_crops(decoder, FIXTURE_W, FIXTURE_H);
}

TEST_CASE_LIMIT(case_checksum, "exact", "FNV-1a of the 4:2:0 decode", 10)
{
    test_checksum(decoder, FIXTURE_W, FIXTURE_H);
}

int main(int argc, char **argv)
{
    return TEST_MAIN_WITH(argc, argv, fixtures_setup, fixtures_teardown);
}
