/*
 * test-jpeg.c - lib/decode/jpeg.c and lib/decode/resize.c against references.
 *
 *  (a) Full decodes, every fixture kind, must equal TurboJPEG's
 *      tjDecompress2 (the same libjpeg-turbo, ISLOW, fancy upsampling) to
 *      the byte, at 8/8 and at every DCT scale; crops read through
 *      jpeg_crop_scanline / jpeg_skip_scanlines must equal the same pixels
 *      of the full decode. A hard-coded FNV-1a notices a libjpeg change.
 *  (b) Crops and resizes against PIL (tests/pil_reference.py).
 *  (c) Bad input: every case fails with its own reason, never crashes,
 *      and leaves the decoder usable.
 *  (d) CMYK, Adobe's inverted CMYK and YCCK become the expected RGB.
 *  (e) EXIF orientation.
 *
 * Fixtures are made here from a deterministic image, with TurboJPEG's
 * tjCompress2 or libjpeg's compress API where TurboJPEG cannot (arithmetic
 * coding, restart markers, CMYK, APP1).
 *
 * The cases of (b), and the PIL halves of (d) and (e), skip without a
 * python3 that has PIL (python3-pil); the others run without it. Setup
 * makes the fixtures and the decoder once; every case's child inherits
 * them.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

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
static uint32_t wave(uint32_t v, uint32_t period)
{
    const uint32_t phase = v % period;
    const uint32_t half = period / 2;
    return (phase < half ? phase : period - phase) * 255 / half;
}

/* Smooth gradients and waves, with a patch of fine stripes in the lower
 * right quarter so that antialiasing and DCT scaling have detail to get
 * wrong. */
static uint8_t sample(uint32_t x, uint32_t y, uint32_t c, uint32_t w,
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

static struct image make_image(uint32_t width, uint32_t height,
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

static struct blob tj_encode(const struct image *im, int subsamp, int quality,
                             int flags)
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
};

static struct blob lj_encode(const struct image *im, const struct lj_options *o)
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
static uint8_t *tj_decode(const struct blob *b, uint32_t width, uint32_t height,
                          uint32_t channels)
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

static void choose(void *user, uint32_t width, uint32_t height,
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

static struct rf__jpeg_options default_options(void)
{
    return (struct rf__jpeg_options){.max_pixels = 89478485,
                                     .max_scans = 100,
                                     .warnings_are_errors = true,
                                     .exif_orientation = false};
}

static char reason[512];

/* Decodes into a fresh buffer (NHWC or NCHW); NULL on failure, with the
 * reason in `reason`. */
static uint8_t *decode_with(struct rf__jpeg_decoder *dec, const struct blob *b,
                            const struct rf__jpeg_options *opt,
                            struct chooser *ch, uint32_t width, uint32_t height,
                            uint32_t channels, rf_layout layout)
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

static uint8_t *decode_crop(struct rf__jpeg_decoder *dec, const struct blob *b,
                            struct rf__crop crop, uint32_t width,
                            uint32_t height, uint32_t channels,
                            rf_layout layout)
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

static uint8_t *decode_whole(struct rf__jpeg_decoder *dec, const struct blob *b,
                             uint32_t width, uint32_t height, uint32_t channels)
{
    const struct rf__crop crop = RF_CROP_BOX(0, 0, width, height, false);
    return decode_crop(dec, b, crop, width, height, channels, RF_LAYOUT_NHWC);
}

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

static uint8_t *nchw_to_nhwc(const uint8_t *in, uint32_t width, uint32_t height,
                             uint32_t channels)
{
    const size_t plane = (size_t)width * height;
    uint8_t *out = malloc(plane * channels);
    CHECK(out);
    for (size_t i = 0; i < plane; i++)
        for (uint32_t c = 0; c < channels; c++)
            out[i * channels + c] = in[c * plane + i];
    return out;
}

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* ---- (a) full decodes and exact crops ---------------------------------- */

struct fixture {
    const char *name;
    struct blob jpeg;
    uint32_t channels; /* of the source image */
};

#define FIXTURES 13

static struct fixture fixtures[FIXTURES];

static void make_fixtures(const struct image *rgb, const struct image *gray)
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

static void check_same(const uint8_t *a, const uint8_t *b, size_t n,
                       const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            fprintf(stderr, "%s: byte %zu differs: %u vs %u\n", what, i, a[i],
                    b[i]);
            CHECK(a[i] == b[i]);
        }
}

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

/* ---- (b) crops and resizes against PIL ------------------------------- */

/*
 * Tolerances. At 8/8 the decoded pixels are PIL's (same libjpeg-turbo,
 * ISLOW, fancy upsampling) and the resampler is PIL's arithmetic, so at
 * most float rounding of a weight could differ: max 1 level, mean 0.1
 * (measured: 0 and 0, fractional boxes and flips included).
 *
 * With DCT scaling (M < 8) there are two references:
 *  - PIL resizing TurboJPEG's own M/8 decode with the box scaled by M/8:
 *    the same pixels in, so the same exact tolerance. This is what proves
 *    the box mapping (box * M/8 minus the crop offsets) and the cropped,
 *    skipped scaled decode right.
 *  - PIL on the full-size image, what torchvision users get. The reduced
 *    IDCT is a different antialiasing filter from PIL's triangle (sharper:
 *    it keeps every frequency below the new Nyquist), so this only bounds
 *    the cost of the speed-up. Measured: these fixtures (waves plus 2-pixel
 *    stripes, the worst case for any reduction; chroma 4:2:0 worst) mean
 *    <= 3.9 levels, max 59; two real photos (720 x 477, 120 random
 *    RandomResizedCrop boxes each) mean <= 4.1, max 35, typically 0.7 to
 *    2. Bounds with a little room: mean 5, max 80.
 */
#define EXACT_MAX 1
#define EXACT_MEAN 0.1
#define SCALED_MAX 80
#define SCALED_MEAN 5.0

static char python[256];
static char script[1024];

/* An interpreter that has PIL: $PYTHON, python3, or the system's own
 * (a pyenv python3 may lack the distribution's python3-pil). */
static bool find_python(void)
{
    const char *candidates[] = {getenv("PYTHON"), "python3",
                                "/usr/bin/python3"};
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        if (!candidates[i] || !candidates[i][0])
            continue;
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "%s -c 'import PIL' >/dev/null 2>&1",
                 candidates[i]);
        if (system(cmd) == 0) {
            snprintf(python, sizeof(python), "%s", candidates[i]);
            return true;
        }
    }
    return false;
}

/* Finds PIL and the script, or skips the running case. */
static void require_pil(void)
{
    if (!find_python())
        TEST_SKIP_BECAUSE("no python3 with PIL (python3-pil)");
    test_source_file(script, sizeof(script), "pil_reference.py");
    printf("  PIL through %s\n", python);
}

/* A temporary file holding head then body; the caller unlinks it. */
static void write_temp(const void *head, size_t head_len, const void *body,
                       size_t body_len, char *path, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(path, len, "%s/rf-test-jpeg-XXXXXX", tmp ? tmp : "/tmp");
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK_EQ(write(fd, head, head_len), (long long)head_len);
    CHECK_EQ(write(fd, body, body_len), (long long)body_len);
    CHECK_EQ(close(fd), 0);
}

static void write_temp_jpeg(const struct blob *b, char *path, size_t len)
{
    write_temp(b->data, b->size, "", 0, path, len);
}

/* PIL's resize of the crop's box of the image at path, to width x height,
 * or to the crop's resized size and then cut to its window. */
static uint8_t *pil_resize(const char *path, const struct rf__crop *c,
                           uint32_t width, uint32_t height, bool exif)
{
    char cmd[2048], window[128] = "";
    if (c->resized_width)
        snprintf(window, sizeof(window), " %llu %llu %llu %llu",
                 (unsigned long long)rf__crop_resized_width(c, width),
                 (unsigned long long)rf__crop_resized_height(c, height),
                 (unsigned long long)c->skip_x, (unsigned long long)c->skip_y);
    /* %.17g: Python reads back the very doubles the decoder used */
    snprintf(cmd, sizeof(cmd),
             "%s '%s' '%s' %.17g %.17g %.17g %.17g %u %u %d %d%s", python,
             script, path, c->x, c->y, c->x + c->width, c->y + c->height, width,
             height, c->flip, exif, window);
    return test_command_output(cmd, (size_t)width * height * 3);
}

struct diff {
    int max;
    double mean;
};

static struct diff compare(const uint8_t *a, const uint8_t *b, size_t n)
{
    struct diff d = {0, 0};
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const int e = a[i] > b[i] ? a[i] - b[i] : b[i] - a[i];
        d.max = e > d.max ? e : d.max;
        total += (uint64_t)e;
    }
    d.mean = (double)total / (double)n;
    return d;
}

static void check_diff(struct diff d, int max, double mean)
{
    CHECK_LE(d.max, max);
    CHECK(d.mean <= mean);
}

/* The size of the fixtures' image */
enum { FIXTURE_W = 500, FIXTURE_H = 375 };

struct pil_case {
    const char *name;
    struct rf__crop crop;
    uint32_t width, height;
};

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

/* The DCT scale the decoder picks for the case. */
static unsigned scale_of(const struct pil_case *pc)
{
    const struct rf__crop shown =
        rf__crop_shown(&pc->crop, pc->width, pc->height);
    return rf__jpeg_scale_for(shown.width, shown.height, pc->width, pc->height);
}

/* Ours in both layouts, as NHWC. */
static uint8_t *decode_layout(struct rf__jpeg_decoder *dec,
                              const struct blob *b,
                              const struct rf__jpeg_options *opt,
                              const struct pil_case *pc, rf_layout layout)
{
    struct chooser ch = {.whole = false, .crop = pc->crop};
    uint8_t *px =
        decode_with(dec, b, opt, &ch, pc->width, pc->height, 3, layout);
    if (!px)
        fprintf(stderr, "%s: %s\n", pc->name, reason);
    CHECK(px);
    if (layout == RF_LAYOUT_NHWC)
        return px;
    uint8_t *t = nchw_to_nhwc(px, pc->width, pc->height, 3);
    free(px);
    return t;
}

/* PIL's resize of TurboJPEG's M/8 decode, the box scaled by M/8 exactly
 * as lib/jpeg.c scales it. */
static uint8_t *pil_on_scaled(const struct blob *b, uint32_t img_w,
                              uint32_t img_h, unsigned m,
                              const struct pil_case *pc)
{
    const uint32_t sw = (img_w * m + 7) / 8, sh = (img_h * m + 7) / 8;
    uint8_t *scaled = tj_decode(b, sw, sh, 3);
    char head[64], path[512];
    snprintf(head, sizeof(head), "P6\n%u %u\n255\n", sw, sh);
    write_temp(head, strlen(head), scaled, (size_t)sw * sh * 3, path,
               sizeof(path));
    const struct rf__crop *c = &pc->crop;
    const double k = m / 8.0;
    struct rf__crop at_scale = *c;
    at_scale.x *= k;
    at_scale.y *= k;
    at_scale.width *= k;
    at_scale.height *= k;
    uint8_t *ref = pil_resize(path, &at_scale, pc->width, pc->height, false);
    unlink(path);
    free(scaled);
    return ref;
}

static void check_against_pil(struct rf__jpeg_decoder *dec,
                              const struct blob *b, const char *path,
                              const struct pil_case *pc,
                              const struct rf__jpeg_options *opt, bool exif)
{
    const size_t n = (size_t)pc->width * pc->height * 3;
    uint8_t *full = pil_resize(path, &pc->crop, pc->width, pc->height, exif);
    const unsigned m = scale_of(pc);
    struct chooser probe = {.whole = true};
    uint8_t *scaled = NULL;
    if (m < 8 && !exif) {
        /* the image size, from a cheap whole decode to 8 x 8 */
        free(decode_with(dec, b, opt, &probe, 8, 8, 3, RF_LAYOUT_NHWC));
        scaled = pil_on_scaled(b, probe.seen_width, probe.seen_height, m, pc);
    }
    for (int layout = 0; layout < 2; layout++) {
        uint8_t *ours = decode_layout(dec, b, opt, pc, (rf_layout)layout);
        const struct diff d = compare(ours, full, n);
        const struct diff ds = scaled ? compare(ours, scaled, n) : d;
        if (layout == 0 && scaled)
            printf("  %-28s M=%u/8 max %2d mean %.3f; same-scale PIL "
                   "max %d mean %.3f\n",
                   pc->name, m, d.max, d.mean, ds.max, ds.mean);
        else if (layout == 0)
            printf("  %-28s M=%u/8 max %2d mean %.3f\n", pc->name, m, d.max,
                   d.mean);
        if (m == 8)
            check_diff(d, EXACT_MAX, EXACT_MEAN);
        else
            check_diff(d, SCALED_MAX, SCALED_MEAN);
        if (scaled)
            check_diff(ds, EXACT_MAX, EXACT_MEAN);
        free(ours);
    }
    free(full);
    free(scaled);
}

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

/* ---- (c) bad input ------------------------------------------------------ */

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
    const struct blob empty = {(uint8_t *)png, 0};
    const struct blob rnd = {(uint8_t *)random10, sizeof(random10)};
    const struct blob p = {(uint8_t *)png, sizeof(png)};
    const struct blob g = {(uint8_t *)gif, sizeof(gif)};
    const struct blob o = {(uint8_t *)one, sizeof(one)};
    expect_failure(dec, &empty, opt, "empty file (0 bytes)");
    expect_failure(dec, &rnd, opt,
                   "not a JPEG file (starts with 3a 91 07 c4: unknown");
    expect_failure(dec, &p, opt,
                   "not a JPEG file (starts with 89 50 4e 47: "
                   "PNG)");
    expect_failure(dec, &g, opt, "starts with 47 49 46 38: GIF");
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

/* Sanitizers whose allocator aborts on a failed allocation instead of
 * returning NULL (and whose shadow memory fills any cap). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ALLOCATOR_ABORTS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||     \
    __has_feature(memory_sanitizer)
#define ALLOCATOR_ABORTS 1
#endif
#endif

/* The address space this process has mapped, in bytes. */
static uint64_t mapped_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    CHECK(f);
    char line[128];
    CHECK(fgets(line, sizeof(line), f));
    fclose(f);
    char *end = NULL;
    const unsigned long long pages = strtoull(line, &end, 10);
    CHECK(end != line);
    return pages * (uint64_t)sysconf(_SC_PAGESIZE);
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

/* ---- (e) EXIF orientation ------------------------------------------------ */

/* An APP1 Exif block holding IFD0 with one entry: Orientation, a SHORT
 * as the standard says, or a LONG as some writers store it. */
static void exif_block(uint8_t out[32], int orientation, bool big_endian,
                       bool as_long)
{
    static const uint8_t little[32] = {
        'E',  'x',  'i', 'f', 0, 0, 'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0,
        0x12, 0x01, 3,   0,   1, 0, 0,   0,   0,  0, 0, 0, 0, 0, 0, 0};
    static const uint8_t big[32] = {
        'E',  'x',  'i', 'f', 0, 0, 'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1,
        0x01, 0x12, 0,   3,   0, 0, 0,   1,   0, 0,  0, 0, 0, 0, 0, 0};
    memcpy(out, big_endian ? big : little, 32);
    if (as_long)
        out[big_endian ? 19 : 18] = 4; /* the type */
    /* the value: its last byte, big-endian */
    out[!big_endian ? 24 : as_long ? 27 : 25] = (uint8_t)orientation;
}

/* The stored pixel that upright pixel (x, y) shows, for orientation o of
 * a stored w x h image. */
static size_t stored_index(int o, uint32_t x, uint32_t y, uint32_t w,
                           uint32_t h)
{
    uint32_t sx = x, sy = y;
    switch (o) {
    case 2:
        sx = w - 1 - x;
        break;
    case 3:
        sx = w - 1 - x;
        sy = h - 1 - y;
        break;
    case 4:
        sy = h - 1 - y;
        break;
    case 5:
        sx = y;
        sy = x;
        break;
    case 6:
        sx = y;
        sy = h - 1 - x;
        break;
    case 7:
        sx = w - 1 - y;
        sy = h - 1 - x;
        break;
    case 8:
        sx = w - 1 - y;
        sy = x;
        break;
    default:
        break;
    }
    return (size_t)sy * w + sx;
}

static void check_oriented(struct rf__jpeg_decoder *dec, const struct blob *b,
                           int o, const uint8_t *stored, uint32_t w, uint32_t h,
                           const struct rf__crop *crop)
{
    struct rf__jpeg_options opt = default_options();
    opt.exif_orientation = true;
    const uint32_t cw = (uint32_t)crop->width, ch_ = (uint32_t)crop->height;
    struct chooser ch = {.whole = false, .crop = *crop};
    uint8_t *px =
        decode_with(dec, b, &opt, &ch, cw, ch_, 3, (rf_layout)(o % 2));
    CHECK(px);
    if (o % 2) {
        uint8_t *t = nchw_to_nhwc(px, cw, ch_, 3);
        free(px);
        px = t;
    }
    const bool transposed = o >= 5;
    CHECK_EQ(ch.seen_width, transposed ? h : w);
    CHECK_EQ(ch.seen_height, transposed ? w : h);
    for (uint32_t y = 0; y < ch_; y++)
        for (uint32_t x = 0; x < cw; x++) {
            const uint32_t ux = (uint32_t)crop->x + x,
                           uy = (uint32_t)crop->y + y;
            const uint32_t fx = crop->flip ? cw - 1 - x : x;
            const size_t s = stored_index(o, ux, uy, w, h);
            if (memcmp(px + ((size_t)y * cw + fx) * 3, stored + s * 3, 3) !=
                0) {
                fprintf(stderr, "orientation %d: pixel %u,%u differs\n", o, x,
                        y);
                CHECK(!"oriented pixels");
            }
        }
    free(px);
}

/* Orientations 1..8 (stored as SHORTs and as LONGs, in both byte
 * orders), whole and cropped, turn the stored pixels as EXIF says; with
 * `against_pil`, they also match PIL's exif_transpose. */
static void test_exif(struct rf__jpeg_decoder *dec, bool against_pil)
{
    if (against_pil)
        require_pil();
    const uint32_t w = 120, h = 80;
    const struct image im = make_image(w, h, 3);
    for (int o = 1; o <= 8; o++) {
        uint8_t app1[32];
        exif_block(app1, o, o % 3 == 0, o % 2 == 0);
        const struct lj_options lo = {JCS_RGB, JCS_YCbCr, 90, .app1 = app1,
                                      .app1_len = sizeof(app1)};
        const struct blob b = lj_encode(&im, &lo);
        uint8_t *stored = tj_decode(&b, w, h, 3);
        const uint32_t uw = o >= 5 ? h : w, uh = o >= 5 ? w : h;
        const struct rf__crop whole = RF_CROP_BOX(0, 0, uw, uh, false);
        const struct rf__crop part = RF_CROP_BOX(5, 7, 50, 30, o % 2 == 0);
        check_oriented(dec, &b, o, stored, w, h, &whole);
        check_oriented(dec, &b, o, stored, w, h, &part);
        /* ignored unless asked for */
        uint8_t *plain = decode_whole(dec, &b, w, h, 3);
        check_same(plain, stored, (size_t)w * h * 3, "orientation off");
        free(plain);
        if (against_pil) {
            char path[512];
            write_temp_jpeg(&b, path, sizeof(path));
            struct rf__jpeg_options opt = default_options();
            opt.exif_orientation = true;
            const struct pil_case pc[3] = {
                {"EXIF, 8/8", RF_CROP_BOX(3.5, 4.25, 60, 50, true), 56, 48},
                {"EXIF, DCT-scaled", RF_CROP_BOX(0, 0, uw, uh, false), 24, 24},
                {"EXIF, resize then crop",
                 {.width = uw,
                  .height = uh,
                  .resized_width = 70,
                  .resized_height = 60,
                  .skip_x = 7,
                  .skip_y = 5,
                  .y_first = rf__crop_pillow13_y_first(uw, uh, 70, 60)},
                 56,
                 48}};
            printf("  orientation %d:\n", o);
            for (int i = 0; i < 3; i++)
                check_against_pil(dec, &b, path, &pc[i], &opt, true);
            unlink(path);
        }
        free(stored);
        free(b.data);
    }
    printf("  orientations 1..8 = the full decode turned (whole, crops)\n");
    free(im.px);
}

/* v at p, in the byte order `big` says. */
static void put_u16(uint8_t *p, uint32_t v, bool big)
{
    p[big ? 0 : 1] = (uint8_t)(v >> 8);
    p[big ? 1 : 0] = (uint8_t)v;
}

static void put_u32(uint8_t *p, uint32_t v, bool big)
{
    put_u16(p + (big ? 0 : 2), v >> 16, big);
    put_u16(p + (big ? 2 : 0), v & 0xffff, big);
}

/* An APP1 Exif block whose Orientation is `count` values of TIFF type
 * `type` (SHORT 3, LONG 4, SSHORT 8, SLONG 9), the first `orientation`
 * and the rest 0, after the IFD when they do not fit in its 4 bytes;
 * returns its length (at most 64). */
static size_t exif_block_stored_as(uint8_t out[64], int orientation, bool big,
                                   uint32_t type, uint32_t count)
{
    const uint32_t size = type == 3 || type == 8 ? 2 : 4;
    const size_t ifd_end = 8 + 2 + 12 + 4; /* in the TIFF structure */
    const size_t values = (size_t)count * size;
    const size_t len = 6 + ifd_end + (values > 4 ? values : 0);
    CHECK(len <= 64);
    memset(out, 0, 64);
    static const uint8_t exif_id[6] = {'E', 'x', 'i', 'f', 0, 0};
    static const uint8_t ii[4] = {'I', 'I', 42, 0}, mm[4] = {'M', 'M', 0, 42};
    memcpy(out, exif_id, sizeof(exif_id));
    uint8_t *tiff = out + 6;
    memcpy(tiff, big ? mm : ii, 4);
    put_u32(tiff + 4, 8, big); /* IFD0 */
    put_u16(tiff + 8, 1, big); /* one entry */
    put_u16(tiff + 10, 0x0112, big);
    put_u16(tiff + 12, type, big);
    put_u32(tiff + 14, count, big);
    uint8_t *value = tiff + 18;
    if (values > 4) {
        put_u32(tiff + 18, (uint32_t)ifd_end, big);
        value = tiff + ifd_end;
    }
    if (size == 2)
        put_u16(value, (uint32_t)orientation, big);
    else
        put_u32(value, (uint32_t)orientation, big);
    return len;
}

/* An APP1 Exif block with two Orientation entries: type `first_type`
 * holding `first`, then a SHORT holding `second`; returns its length. */
static size_t exif_block_twice(uint8_t out[64], uint32_t first_type, int first,
                               int second, bool big)
{
    size_t n = exif_block_stored_as(out, first, big, first_type, 1);
    uint8_t *tiff = out + 6;
    put_u16(tiff + 8, 2, big); /* two entries: the second where the next
                                  IFD's offset was, then that offset */
    put_u16(tiff + 22, 0x0112, big);
    put_u16(tiff + 24, 3, big);
    put_u32(tiff + 26, 1, big);
    put_u16(tiff + 30, (uint32_t)second, big);
    put_u32(tiff + 34, 0, big);
    n += 12;
    CHECK(n <= 64);
    return n;
}

/* Orientation 6 stored as PIL's exif_transpose() reads it, in both byte
 * orders: as a LONG, SSHORT or SLONG, as two or three values (the first
 * counts), or in a second entry after one holding 1 or an UNDEFINED
 * (the last counts) turns the pixels; with a count of 0 there is none. */
static void test_exif_stored_as(struct rf__jpeg_decoder *dec)
{
    const uint32_t w = 64, h = 40;
    const struct image im = make_image(w, h, 3);
    static const struct {
        uint32_t type, count;
        bool turns;
    } ways[] = {{4, 1, true}, {8, 1, true},  {9, 1, true}, {4, 2, true},
                {3, 3, true}, {3, 0, false}, {4, 0, false}};
    for (size_t i = 0; i < sizeof(ways) / sizeof(ways[0]); i++)
        for (int big = 0; big < 2; big++) {
            uint8_t app1[64];
            const size_t n =
                exif_block_stored_as(app1, 6, big, ways[i].type, ways[i].count);
            const struct lj_options lo = {JCS_RGB, JCS_YCbCr, 90, .app1 = app1,
                                          .app1_len = n};
            const struct blob b = lj_encode(&im, &lo);
            uint8_t *stored = tj_decode(&b, w, h, 3);
            const int o = ways[i].turns ? 6 : 1;
            const uint32_t uw = o == 6 ? h : w, uh = o == 6 ? w : h;
            const struct rf__crop whole = RF_CROP_BOX(0, 0, uw, uh, false);
            check_oriented(dec, &b, o, stored, w, h, &whole);
            free(stored);
            free(b.data);
        }
    for (int big = 0; big < 2; big++) /* the last entry counts */
        for (uint32_t first_type = 3; first_type <= 7; first_type += 4) {
            uint8_t app1[64];
            const size_t n = exif_block_twice(app1, first_type, 1, 6, big);
            const struct lj_options lo = {JCS_RGB, JCS_YCbCr, 90, .app1 = app1,
                                          .app1_len = n};
            const struct blob b = lj_encode(&im, &lo);
            uint8_t *stored = tj_decode(&b, w, h, 3);
            const struct rf__crop whole = RF_CROP_BOX(0, 0, h, w, false);
            check_oriented(dec, &b, 6, stored, w, h, &whole);
            free(stored);
            free(b.data);
        }
    printf("  orientation 6 as LONG, SSHORT, SLONG, 2 and 3 values, or after "
           "another entry: turned; a count of 0: not\n");
    free(im.px);
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

/* The fixtures' size, and what setup makes once for every case. */
static struct image rgb_image, grey_image;
static struct rf__jpeg_decoder *decoder;

static void setup(void)
{
    rgb_image = make_image(FIXTURE_W, FIXTURE_H, 3);
    grey_image = make_image(FIXTURE_W, FIXTURE_H, 1);
    make_fixtures(&rgb_image, &grey_image);
    decoder = rf__jpeg_decoder_new();
    CHECK(decoder);
}

static void teardown(void)
{
    rf__jpeg_decoder_free(decoder);
    for (int f = 0; f < FIXTURES; f++)
        free(fixtures[f].jpeg.data);
    free(rgb_image.px);
    free(grey_image.px);
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

TEST_CASE(case_exif, "exif", "orientations 1..8 turn the stored pixels")
{
    test_exif(decoder, false);
}

TEST_CASE(case_exif_stored_as, "exif",
          "an orientation stored as PIL reads it, other types and counts")
{
    test_exif_stored_as(decoder);
}

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

TEST_CASE(case_pil_cmyk_adobe, "pil", "CMYK, Adobe: PIL's bytes")
{
    check_cmyk(decoder, "CMYK, Adobe (inverted)", JCS_CMYK, true, true);
}

TEST_CASE(case_pil_ycck_adobe, "pil", "YCCK, Adobe: PIL's bytes")
{
    check_cmyk(decoder, "YCCK, Adobe (inverted)", JCS_YCCK, true, true);
}

TEST_CASE(case_pil_exif, "pil", "EXIF orientations 1..8: PIL's pixels")
{
    test_exif(decoder, true);
}

int main(int argc, char **argv)
{
    return TEST_MAIN_WITH(argc, argv, setup, teardown);
}
