/*
 * test-jpeg-pil.c - lib/decode/jpeg.c's crops and resizes against PIL
 * (section (b) of the JPEG tests; tests/pil_reference.py, through
 * tests/jpeg-pil.h).
 *
 * Every PIL case (train boxes, flips, upscales, eval's resize then centre
 * crop) on the 4:2:0, 4:4:4, grey and progressive fixtures, in NHWC and
 * NCHW: PIL's pixels at 8/8, within the DCT-scaling bounds below it, and
 * PIL's exactly with DCT scaling off. The PIL halves of the CMYK and EXIF
 * tests are in test-jpeg-cmyk and test-jpeg-exif. Every case skips
 * without a python3 that has PIL (python3-pil). Setup makes the fixtures
 * and the decoder once; every case's child inherits them.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jpeg-fixtures.h"
#include "jpeg-pil.h"

/* ---- (b) crops and resizes against PIL ------------------------------- */

/* The whole fixture resized to rw x rh, the output cut from (sx, sy) */
#define WINDOW(rw, rh, sx, sy)                                                 \
    {                                                                          \
        .width = FIXTURE_W, .height = FIXTURE_H, .resized_width = (rw),        \
        .resized_height = (rh), .skip_x = (sx), .skip_y = (sy)                 \
    }

static const struct pil_case pil_cases[] = {
    {"barely shrinking, 8/8", RF_CROP_BOX(37, 21, 260, 250, false), 224, 224},
    {"barely shrinking, flipped", RF_CROP_BOX(37, 21, 260, 250, true), 224,
     224},
    {"large shrink (DCT 5/8)", RF_CROP_BOX(10, 5, 480, 360, false), 224, 224},
    {"large shrink, flipped", RF_CROP_BOX(10, 5, 480, 360, true), 224, 224},
    {"to 56 x 56 (DCT 2/8)", RF_CROP_BOX(0, 0, 500, 375, false), 56, 56},
    {"small crop, upscale", RF_CROP_BOX(100.5, 80.25, 64, 48, false), 224, 224},
    {"small crop, non-square out", RF_CROP_BOX(301.75, 190.5, 90, 150, true),
     160, 96},
    {"eval centre crop", RF_CROP_BOX(85.9375, 23.4375, 328.125, 328.125, false),
     224, 224},
    {"train box, 8/8", RF_CROP_BOX(123.3, 57.9, 240.7, 230.2, true), 224, 224},
    {"train box, DCT 7/8", RF_CROP_BOX(13.0, 40.0, 301.0, 270.0, false), 224,
     224},
    {"train box, DCT 3/8", RF_CROP_BOX(3.7, 1.2, 490.1, 370.4, true), 112, 128},
    /* eval's resize of the whole image, then its centre crop */
    {"Resize(256), CenterCrop(224)", WINDOW(341, 256, 58, 16), 224, 224},
    {"Resize(64), CenterCrop(56)", WINDOW(85, 64, 14, 4), 56, 56},
};

/* Every PIL case on fixture `f`, in both layouts. */
static void test_against_pil(struct rf__jpeg_decoder *dec, int f)
{
    require_pil();
    const struct rf__jpeg_options opt = default_options();
    const struct fixture *fx = &fixtures[f];
    char path[512];
    write_temp_jpeg(&fx->jpeg, path, sizeof(path));
    printf("  %s:\n", fx->name);
    for (size_t i = 0; i < sizeof(pil_cases) / sizeof(pil_cases[0]); i++)
        check_against_pil(dec, &fx->jpeg, path, &pil_cases[i], &opt, false);
    unlink(path);
}

/* RF_PARAM_DCT_SCALING 0: the cases that would be decoded at a smaller
 * DCT scale come out as PIL's own resize of the full image. */
static void test_full_scale_is_pil_exact(struct rf__jpeg_decoder *dec)
{
    require_pil();
    static const int used[] = {0, 1, 5}; /* 4:2:0 4:4:4 progressive */
    struct rf__jpeg_options opt = default_options();
    opt.full_scale = true;
    for (size_t u = 0; u < sizeof(used) / sizeof(used[0]); u++) {
        const struct fixture *fx = &fixtures[used[u]];
        char path[512];
        write_temp_jpeg(&fx->jpeg, path, sizeof(path));
        for (size_t i = 0; i < sizeof(pil_cases) / sizeof(pil_cases[0]); i++) {
            const struct pil_case *pc = &pil_cases[i];
            if (scale_of(pc) == 8)
                continue;
            uint8_t *pil =
                pil_resize(path, &pc->crop, pc->width, pc->height, false);
            uint8_t *ours =
                decode_layout(dec, &fx->jpeg, &opt, pc, RF_LAYOUT_NHWC);
            const struct diff d =
                compare(ours, pil, (size_t)pc->width * pc->height * 3);
            printf("  %s, %s, DCT scaling off: max %d mean %.3f\n", fx->name,
                   pc->name, d.max, d.mean);
            check_diff(d, EXACT_MAX, EXACT_MEAN);
            free(ours);
            free(pil);
        }
        unlink(path);
    }
}

/* ---- the cases ----------------------------------------------------------- */

/* Case case_pil_<what>(): test_against_pil() of fixtures[F] (0 4:2:0,
 * 1 4:4:4, 4 grey, 5 progressive 4:2:0). */
#define PIL_CASE(fn, name, f)                                                  \
    TEST_CASE(fn, "pil", name)                                                 \
    {                                                                          \
        test_against_pil(decoder, f);                                          \
    }

PIL_CASE(case_pil_420, "4:2:0 crops and resizes", 0)
PIL_CASE(case_pil_444, "4:4:4 crops and resizes", 1)
PIL_CASE(case_pil_grey, "grey crops and resizes", 4)
PIL_CASE(case_pil_progressive, "progressive crops and resizes", 5)

TEST_CASE(case_pil_full_scale, "pil", "DCT scaling off: PIL's pixels")
{
    test_full_scale_is_pil_exact(decoder);
}

int main(int argc, char **argv)
{
    return TEST_MAIN_WITH(argc, argv, fixtures_setup, fixtures_teardown);
}
