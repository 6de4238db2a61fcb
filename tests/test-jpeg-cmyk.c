/*
 * test-jpeg-cmyk.c - lib/decode/jpeg.c on CMYK JPEGs (section (d) of the
 * JPEG tests): plain CMYK, Adobe's inverted CMYK and YCCK files of flat
 * inks become the RGB (and grey) the inks mean; the Adobe ones PIL's very
 * bytes too (the pil/ cases, skipped without a python3 that has PIL).
 * Setup makes the decoder once; every case's child inherits it.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jpeg-decode.h"
#include "jpeg-pil.h"

/* ---- (d) CMYK ----------------------------------------------------------- */

/* Inks (C, M, Y, K) of 4 x 3 flat 16 x 16 blocks. */
static const uint8_t inks[12][4] = {
    {0, 0, 0, 0},       {255, 0, 0, 0},     {0, 255, 0, 0},
    {0, 0, 255, 0},     {0, 0, 0, 255},     {40, 80, 120, 30},
    {200, 30, 10, 100}, {128, 128, 128, 0}, {10, 220, 60, 180},
    {90, 0, 250, 60},   {255, 255, 255, 0}, {30, 60, 90, 220},
};

/* RGB of an ink as PIL's CMYK -> RGB means it: ink removes paper. */
static void ink_rgb(const uint8_t ink[4], int rgb[3])
{
    for (int c = 0; c < 3; c++)
        rgb[c] = ((255 - ink[c]) * (255 - ink[3]) + 127) / 255;
}

/* PIL reads every CMYK JPEG as Adobe's inverted CMYK and converts it with
 * the same formula: for Adobe files the bytes must agree. */
static void check_cmyk_against_pil(const struct blob *b, const uint8_t *rgb)
{
    char path[512];
    write_temp_jpeg(b, path, sizeof(path));
    const struct rf__crop whole = RF_CROP_BOX(0, 0, 64, 48, false);
    uint8_t *ref = pil_resize(path, &whole, 64, 48, false);
    const struct diff d = compare(rgb, ref, (size_t)64 * 48 * 3);
    printf("  %-32s PIL: max %d mean %.3f\n", "", d.max, d.mean);
    CHECK_EQ(d.max, 0);
    unlink(path);
    free(ref);
}

/* A CMYK or YCCK file of flat inks decodes to the RGB (and grey) the inks
 * mean; with `against_pil`, to PIL's very bytes too. */
static void check_cmyk(struct rf__jpeg_decoder *dec, const char *name,
                       J_COLOR_SPACE space, bool adobe, bool against_pil)
{
    if (against_pil)
        require_pil();
    struct image im = {64, 48, 4, malloc((size_t)64 * 48 * 4)};
    CHECK(im.px);
    for (uint32_t y = 0; y < 48; y++)
        for (uint32_t x = 0; x < 64; x++)
            for (int c = 0; c < 4; c++) {
                const uint8_t ink = inks[(y / 16) * 4 + x / 16][c];
                im.px[(y * 64 + x) * 4 + c] = adobe ? 255 - ink : ink;
            }
    const struct lj_options o = {JCS_CMYK, space, 100, .adobe = adobe};
    const struct blob b = lj_encode(&im, &o);
    uint8_t *rgb = decode_whole(dec, &b, 64, 48, 3);
    uint8_t *grey = decode_whole(dec, &b, 64, 48, 1);
    int worst = 0;
    for (uint32_t y = 0; y < 48; y++)
        for (uint32_t x = 0; x < 64; x++) {
            if (x % 16 < 3 || x % 16 > 12 || y % 16 < 3 || y % 16 > 12)
                continue; /* upsampled chroma blurs the block edges */
            int want[3];
            ink_rgb(inks[(y / 16) * 4 + x / 16], want);
            const int luma =
                (want[0] * 299 + want[1] * 587 + want[2] * 114 + 500) / 1000;
            for (int c = 0; c < 3; c++) {
                const int e = abs(rgb[(y * 64 + x) * 3 + c] - want[c]);
                worst = e > worst ? e : worst;
            }
            const int e = abs(grey[y * 64 + x] - luma);
            worst = e > worst ? e : worst;
        }
    printf("  %-32s worst error %d\n", name, worst);
    CHECK_LE(worst, 2);
    if (against_pil)
        check_cmyk_against_pil(&b, rgb);
    free(rgb);
    free(grey);
    free(b.data);
    free(im.px);
}

/* ---- the cases ----------------------------------------------------------- */

JPEG_DECODER_FIXTURE()

/* Case case_<what>(): check_cmyk() of a SPACE JPEG, with or without an
 * Adobe marker, against the expected pixels (PIL's cases are below). */
#define CMYK_CASE(fn, name, space, adobe)                                      \
    TEST_CASE(fn, "cmyk", name)                                                \
    {                                                                          \
        check_cmyk(decoder, name, space, adobe, false);                        \
    }

CMYK_CASE(case_cmyk_plain, "CMYK, no Adobe marker", JCS_CMYK, false)
CMYK_CASE(case_cmyk_adobe, "CMYK, Adobe (inverted)", JCS_CMYK, true)
CMYK_CASE(case_ycck_adobe, "YCCK, Adobe (inverted)", JCS_YCCK, true)

TEST_CASE(case_pil_cmyk_adobe, "pil", "CMYK, Adobe: PIL's bytes")
{
    check_cmyk(decoder, "CMYK, Adobe (inverted)", JCS_CMYK, true, true);
}

TEST_CASE(case_pil_ycck_adobe, "pil", "YCCK, Adobe: PIL's bytes")
{
    check_cmyk(decoder, "YCCK, Adobe (inverted)", JCS_YCCK, true, true);
}

int main(int argc, char **argv)
{
    return TEST_MAIN_WITH(argc, argv, decoder_setup, decoder_teardown);
}
