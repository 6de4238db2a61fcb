/*
 * jpeg-decode.h - what the JPEG programs share (test-jpeg, test-jpeg-pil,
 * test-jpeg-bad, test-jpeg-cmyk, test-jpeg-exif): a deterministic image,
 * encoded with TurboJPEG's tjCompress2 or, for what TurboJPEG cannot write
 * (arithmetic coding, restart markers, CMYK, APP1), libjpeg's compress
 * API; TurboJPEG's tjDecompress2 as the reference decoder; and decodes
 * through lib/decode/jpeg.c into fresh buffers, whole or cropped, NHWC or
 * NCHW, with the reason of a failure in `reason`.
 */
#ifndef RF_TEST_JPEG_DECODE_H
#define RF_TEST_JPEG_DECODE_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <turbojpeg.h>

#include "decode/jpeg.h"
#include "decode/resize.h"
#include "harness.h"
#include "test.h"

/* ---- images and fixtures ---------------------------------------------- */

struct image {
    uint32_t width, height, channels;
    uint8_t *px;
};

struct blob {
    uint8_t *data;
    size_t size;
};

/* A triangle wave 0..255 of the given period. */
static inline uint32_t wave(uint32_t v, uint32_t period)
{
    const uint32_t phase = v % period;
    const uint32_t half = period / 2;
    return (phase < half ? phase : period - phase) * 255 / half;
}

/* Smooth gradients and waves, with a patch of fine stripes in the lower
 * right quarter so that antialiasing and DCT scaling have detail to get
 * wrong. */
static inline uint8_t sample(uint32_t x, uint32_t y, uint32_t c, uint32_t w,
                             uint32_t h)
{
    uint32_t v;
    if (c == 0)
        v = x * 160 / w + wave(x + 2 * y, 53) * 90 / 255;
    else if (c == 1)
        v = y * 150 / h + wave(3 * x + y + 7, 37) * 100 / 255;
    else
        v = 40 + wave(x * y / 8 + x, 97) * 170 / 255;
    if (x > w / 2 && y > h / 2 && (x / 2 + y / 3) % 2)
        v = v / 2 + 90;
    return (uint8_t)(v > 255 ? 255 : v);
}

static inline struct image make_image(uint32_t width, uint32_t height,
                                      uint32_t channels)
{
    struct image im = {width, height, channels,
                       malloc((size_t)width * height * channels)};
    CHECK(im.px);
    for (uint32_t y = 0; y < height; y++)
        for (uint32_t x = 0; x < width; x++)
            for (uint32_t c = 0; c < channels; c++)
                im.px[((size_t)y * width + x) * channels + c] =
                    sample(x, y, channels == 1 ? 1 : c, width, height);
    return im;
}

static inline struct blob tj_encode(const struct image *im, int subsamp,
                                    int quality, int flags)
{
    tjhandle tj = tjInitCompress();
    CHECK(tj);
    unsigned char *out = NULL;
    unsigned long size = 0;
    const int pf = im->channels == 1 ? TJPF_GRAY : TJPF_RGB;
    CHECK_EQ(tjCompress2(tj, im->px, (int)im->width, 0, (int)im->height, pf,
                         &out, &size, subsamp, quality, flags),
             0);
    struct blob b = {malloc(size), size};
    CHECK(b.data);
    memcpy(b.data, out, size);
    tjFree(out);
    tjDestroy(tj);
    return b;
}

/* What TurboJPEG cannot write, through libjpeg's compress API. */
struct lj_options {
    J_COLOR_SPACE in_space, jpeg_space;
    int quality;
    bool arith, progressive, adobe;
    unsigned restart_rows;
    int luma_h, luma_v;    /* the first component's sampling factors, the
                              others' 1x1; 0 = libjpeg's default */
    unsigned restart_mcus; /* a restart marker every so many MCUs */
    const uint8_t *app1;   /* an APP1 marker's content, or NULL */
    size_t app1_len;
    const uint8_t *app1_next; /* a second APP1 marker after it, or NULL */
    size_t app1_next_len;
};

static inline struct blob lj_encode(const struct image *im,
                                    const struct lj_options *o)
{
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr); /* a failure exits the test */
    jpeg_create_compress(&ci);
    unsigned char *out = NULL;
    unsigned long size = 0;
    jpeg_mem_dest(&ci, &out, &size);
    ci.image_width = im->width;
    ci.image_height = im->height;
    ci.input_components = (int)im->channels;
    ci.in_color_space = o->in_space;
    jpeg_set_defaults(&ci);
    jpeg_set_colorspace(&ci, o->jpeg_space);
    jpeg_set_quality(&ci, o->quality, TRUE);
    ci.arith_code = o->arith;
    ci.restart_in_rows = (int)o->restart_rows;
    ci.restart_interval = o->restart_mcus;
    if (o->luma_h) {
        ci.comp_info[0].h_samp_factor = o->luma_h;
        ci.comp_info[0].v_samp_factor = o->luma_v;
    }
    if (o->jpeg_space == JCS_CMYK || o->jpeg_space == JCS_YCCK)
        ci.write_Adobe_marker = o->adobe;
    if (o->progressive)
        jpeg_simple_progression(&ci);
    jpeg_start_compress(&ci, TRUE);
    if (o->app1)
        jpeg_write_marker(&ci, JPEG_APP0 + 1, o->app1, (unsigned)o->app1_len);
    if (o->app1_next)
        jpeg_write_marker(&ci, JPEG_APP0 + 1, o->app1_next,
                          (unsigned)o->app1_next_len);
    const size_t stride = (size_t)im->width * im->channels;
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = im->px + ci.next_scanline * stride;
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    struct blob b = {malloc(size), size};
    CHECK(b.data);
    memcpy(b.data, out, size);
    free(out);
    return b;
}

/* tjDecompress2 at width x height (a scaled size picks that scale). */
static inline uint8_t *tj_decode(const struct blob *b, uint32_t width,
                                 uint32_t height, uint32_t channels)
{
    tjhandle tj = tjInitDecompress();
    CHECK(tj);
    uint8_t *px = malloc((size_t)width * height * channels);
    CHECK(px);
    const int pf = channels == 1   ? TJPF_GRAY
                   : channels == 4 ? TJPF_CMYK
                                   : TJPF_RGB;
    CHECK_EQ(tjDecompress2(tj, b->data, b->size, px, (int)width, 0, (int)height,
                           pf, 0),
             0);
    tjDestroy(tj);
    return px;
}

/* ---- decoding through lib/jpeg.c -------------------------------------- */

struct chooser {
    bool whole; /* the whole image, else `crop` */
    struct rf__crop crop;
    uint32_t seen_width, seen_height;
};

static inline void choose(void *user, uint32_t width, uint32_t height,
                          struct rf__crop *crop)
{
    struct chooser *ch = user;
    ch->seen_width = width;
    ch->seen_height = height;
    if (ch->whole)
        *crop =
            (struct rf__crop)RF_CROP_BOX(0, 0, width, height, ch->crop.flip);
    else
        *crop = ch->crop;
}

static inline struct rf__jpeg_options default_options(void)
{
    return (struct rf__jpeg_options){.max_pixels = 89478485,
                                     .max_scans = 100,
                                     .warnings_are_errors = true,
                                     .exif_orientation = false};
}

static char reason[512];

/* Decodes into a fresh buffer (NHWC or NCHW); NULL on failure, with the
 * reason in `reason`. */
static inline uint8_t *decode_with(struct rf__jpeg_decoder *dec,
                                   const struct blob *b,
                                   const struct rf__jpeg_options *opt,
                                   struct chooser *ch, uint32_t width,
                                   uint32_t height, uint32_t channels,
                                   rf_layout layout)
{
    uint8_t *px = malloc((size_t)width * height * channels);
    CHECK(px);
    const struct rf__jpeg_target t = {height, width, channels, layout, px};
    reason[0] = '\0';
    if (rf__jpeg_decode(dec, b->data, b->size, opt, choose, ch, &t, reason,
                        sizeof(reason)) < 0) {
        free(px);
        return NULL;
    }
    return px;
}

static inline uint8_t *decode_crop(struct rf__jpeg_decoder *dec,
                                   const struct blob *b, struct rf__crop crop,
                                   uint32_t width, uint32_t height,
                                   uint32_t channels, rf_layout layout)
{
    const struct rf__jpeg_options opt = default_options();
    struct chooser ch = {.whole = false, .crop = crop};
    uint8_t *px =
        decode_with(dec, b, &opt, &ch, width, height, channels, layout);
    if (!px)
        fprintf(stderr, "decode failed: %s\n", reason);
    CHECK(px);
    return px;
}

static inline uint8_t *decode_whole(struct rf__jpeg_decoder *dec,
                                    const struct blob *b, uint32_t width,
                                    uint32_t height, uint32_t channels)
{
    const struct rf__crop crop = RF_CROP_BOX(0, 0, width, height, false);
    return decode_crop(dec, b, crop, width, height, channels, RF_LAYOUT_NHWC);
}

static inline uint8_t *nchw_to_nhwc(const uint8_t *in, uint32_t width,
                                    uint32_t height, uint32_t channels)
{
    const size_t plane = (size_t)width * height;
    uint8_t *out = malloc(plane * channels);
    CHECK(out);
    for (size_t i = 0; i < plane; i++)
        for (uint32_t c = 0; c < channels; c++)
            out[i * channels + c] = in[c * plane + i];
    return out;
}

static inline void check_same(const uint8_t *a, const uint8_t *b, size_t n,
                              const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            fprintf(stderr, "%s: byte %zu differs: %u vs %u\n", what, i, a[i],
                    b[i]);
            CHECK(a[i] == b[i]);
        }
}

/* The decoder a program's cases share, made by its setup: for the
 * programs without jpeg-fixtures.h's images, JPEG_DECODER_FIXTURE() then
 * TEST_MAIN_WITH(argc, argv, decoder_setup, decoder_teardown). */
#define JPEG_DECODER_FIXTURE()                                                 \
    static struct rf__jpeg_decoder *decoder;                                   \
    static void decoder_setup(void)                                            \
    {                                                                          \
        decoder = rf__jpeg_decoder_new();                                      \
        CHECK(decoder);                                                        \
    }                                                                          \
    static void decoder_teardown(void)                                         \
    {                                                                          \
        rf__jpeg_decoder_free(decoder);                                        \
    }

#endif /* RF_TEST_JPEG_DECODE_H */
