/*
 * jpeg-fixtures.h - the 13 fixtures of the JPEG programs that decode them
 * (test-jpeg, test-jpeg-pil, test-jpeg-bad): one 500 x 375 image (RGB and
 * grey) encoded 4:2:0, 4:4:4, 4:2:2, 4:4:0, grey, progressive,
 * arithmetic, with restart markers, 4:1:1, luma 3x2, grey 2x2 and
 * restarts every 5 MCUs; and the setup that makes them and the decoder
 * once, before every case's child inherits them.
 */
#ifndef RF_TEST_JPEG_FIXTURES_H
#define RF_TEST_JPEG_FIXTURES_H

#include "jpeg-decode.h"

struct fixture {
    const char *name;
    struct blob jpeg;
    uint32_t channels; /* of the source image */
};

#define FIXTURES 13

static struct fixture fixtures[FIXTURES];

static inline void make_fixtures(const struct image *rgb,
                                 const struct image *gray)
{
    const struct lj_options arith = {JCS_RGB, JCS_YCbCr, 90, .arith = true};
    const struct lj_options restart = {JCS_RGB, JCS_YCbCr, 90,
                                       .restart_rows = 1};
    const struct lj_options arith_prog = {JCS_RGB, JCS_YCbCr, 85, .arith = true,
                                          .progressive = true};
    fixtures[0] =
        (struct fixture){"4:2:0", tj_encode(rgb, TJSAMP_420, 90, 0), 3};
    fixtures[1] =
        (struct fixture){"4:4:4", tj_encode(rgb, TJSAMP_444, 90, 0), 3};
    fixtures[2] =
        (struct fixture){"4:2:2", tj_encode(rgb, TJSAMP_422, 90, 0), 3};
    fixtures[3] =
        (struct fixture){"4:4:0", tj_encode(rgb, TJSAMP_440, 90, 0), 3};
    fixtures[4] =
        (struct fixture){"grey", tj_encode(gray, TJSAMP_GRAY, 90, 0), 1};
    fixtures[5] =
        (struct fixture){"progressive 4:2:0",
                         tj_encode(rgb, TJSAMP_420, 90, TJFLAG_PROGRESSIVE), 3};
    fixtures[6] =
        (struct fixture){"arithmetic 4:2:0", lj_encode(rgb, &arith), 3};
    fixtures[7] =
        (struct fixture){"restart markers 4:2:0", lj_encode(rgb, &restart), 3};
    fixtures[8] = (struct fixture){"arithmetic progressive 4:2:0",
                                   lj_encode(rgb, &arith_prog), 3};
    /* MCUs 32 and 24 pixels wide, which the column filter of lib/jpeg.c
     * must count like libjpeg does */
    const struct lj_options h4v1 = {JCS_RGB, JCS_YCbCr, 90, .luma_h = 4,
                                    .luma_v = 1};
    const struct lj_options h3v2 = {JCS_RGB, JCS_YCbCr, 90, .luma_h = 3,
                                    .luma_v = 2};
    fixtures[9] = (struct fixture){"4:1:1", lj_encode(rgb, &h4v1), 3};
    fixtures[10] = (struct fixture){"luma 3x2", lj_encode(rgb, &h3v2), 3};
    /* one component sampled 2x2: its MCU is one block, not 2x2 of them */
    const struct lj_options grey2x2 = {JCS_GRAYSCALE, JCS_GRAYSCALE, 90,
                                       .luma_h = 2, .luma_v = 2};
    fixtures[11] = (struct fixture){"grey 2x2", lj_encode(gray, &grey2x2), 1};
    /* restarts that do not line up with the MCU rows */
    const struct lj_options odd_restarts = {JCS_RGB, JCS_YCbCr, 90,
                                            .restart_mcus = 5};
    fixtures[12] = (struct fixture){"restart every 5 MCUs 4:2:0",
                                    lj_encode(rgb, &odd_restarts), 3};
}

/* The size of the fixtures' image */
enum { FIXTURE_W = 500, FIXTURE_H = 375 };

/* The fixtures' size, and what setup makes once for every case. */
static struct image rgb_image, grey_image;
static struct rf__jpeg_decoder *decoder;

static inline void fixtures_setup(void)
{
    rgb_image = make_image(FIXTURE_W, FIXTURE_H, 3);
    grey_image = make_image(FIXTURE_W, FIXTURE_H, 1);
    make_fixtures(&rgb_image, &grey_image);
    decoder = rf__jpeg_decoder_new();
    CHECK(decoder);
}

static inline void fixtures_teardown(void)
{
    rf__jpeg_decoder_free(decoder);
    for (int f = 0; f < FIXTURES; f++)
        free(fixtures[f].jpeg.data);
    free(rgb_image.px);
    free(grey_image.px);
}

#endif /* RF_TEST_JPEG_FIXTURES_H */
