/*
 * test-png-webp.c - what lib/decode/image.h does for every format: formats
 * told by their first bytes, the pixel buffer reused and a huge one given
 * back; and PNG and WebP files in a folder dataset, decoded by
 * rf_dataset_decode() as a producer decodes them: cropped, resized and
 * flipped as PIL does, NCHW holding the same pixels, the format taken from
 * the bytes and not the file name, formats that do not decode named, the
 * limits and damage refused.
 *
 * The decoders alone against PIL are test-png and test-webp; image-pil.h,
 * image-png.h and image-webp.h hold what the three share. Built when
 * configure found libpng or libwebp; the decode cases need both (their
 * fixtures are of both kinds).
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/params.h"
#include "decode/image.h"
#include "decode/transform.h"
#include "harness.h"
#include "image-pil.h"
#ifdef HAVE_PNG
#include "image-png.h"
#endif
#ifdef HAVE_WEBP
#include "image-webp.h"
#endif
#include "test.h"

/* ---- sniffing ---------------------------------------------------------- */

TEST_CASE_LIMIT(test_sniff, "sniff", "formats told by their first bytes", 60)
{
    static const struct {
        const char *bytes;
        size_t len;
        enum rf__image_format format;
    } signatures[] = {
        {"\xff\xd8\xff\xe0", 4, RF_IMAGE_JPEG},
        {"\x89PNG\r\n\x1a\n", 8, RF_IMAGE_PNG},
        {"RIFF\x10\0\0\0WEBPVP8 ", 16, RF_IMAGE_WEBP},
        {"RIFF\x10\0\0\0WAVEfmt ", 16, RF_IMAGE_UNKNOWN},
        {"GIF89a", 6, RF_IMAGE_GIF},
        {"GIF87a", 6, RF_IMAGE_GIF},
        {"BM\x36\0", 4, RF_IMAGE_BMP},
        {"II*\0", 4, RF_IMAGE_TIFF},
        {"MM\0*", 4, RF_IMAGE_TIFF},
        {"P6\n3 2\n255\n", 11, RF_IMAGE_PNM},
        {"P5 3 2 255 ", 11, RF_IMAGE_PNM},
        {"P8\n", 3, RF_IMAGE_UNKNOWN},
        {"\x89PNG", 4, RF_IMAGE_UNKNOWN},
        {"", 0, RF_IMAGE_UNKNOWN},
    };
    for (size_t i = 0; i < sizeof(signatures) / sizeof(signatures[0]); i++)
        CHECK_EQ(rf__image_sniff((const uint8_t *)signatures[i].bytes,
                                 signatures[i].len),
                 signatures[i].format);
    CHECK(strcmp(rf__image_format_name(RF_IMAGE_BMP), "BMP") == 0);
    CHECK(strcmp(rf__image_format_name(RF_IMAGE_PNM), "PPM/PGM") == 0);
}

/* The pixel buffer is reused, and a huge one given back at the next
 * image that needs far less. */
TEST_CASE_LIMIT(test_buffer, "buffer", "reused, a huge one given back", 60)
{
    struct rf__image_buffer b = {0};
    uint8_t *p = rf__image_buffer_reserve(&b, 1000);
    CHECK(p && b.cap == 1000 + RF_IMAGE_SLACK);
    for (int i = 0; i < RF_IMAGE_SLACK; i++)
        CHECK_EQ(p[1000 + i], 0);
    CHECK(rf__image_buffer_reserve(&b, 10) == p); /* reused */
    CHECK_EQ(b.cap, 1000 + RF_IMAGE_SLACK);
    CHECK(rf__image_buffer_reserve(&b, RF_IMAGE_KEEP + 1));
    CHECK_EQ(b.cap, RF_IMAGE_KEEP + 1 + RF_IMAGE_SLACK);
    CHECK(rf__image_buffer_reserve(&b, RF_IMAGE_KEEP / 2)); /* kept */
    CHECK_EQ(b.cap, RF_IMAGE_KEEP + 1 + RF_IMAGE_SLACK);
    CHECK(rf__image_buffer_reserve(&b, 5000)); /* given back */
    CHECK_EQ(b.cap, 5000 + RF_IMAGE_SLACK);
    rf__image_buffer_free(&b);
    CHECK(!b.bytes && b.cap == 0);
}

/* ---- through the loader's decode (decode.c) -------------------------------
 *
 * A folder dataset of PNG and WebP files (and others), decoded by
 * rf_dataset_decode() as a producer decodes them: the transform's crop,
 * resized into the sample, must be PIL's resize(size, BILINEAR, box) of
 * the file (tests/pil_reference.py, as test-jpeg-pil uses it), flipped when
 * the crop flips. Needs both libraries (its fixtures are of both kinds). */

#if defined(HAVE_PNG) && defined(HAVE_WEBP)
#define OUT_W 40u
#define OUT_H 30u

static char scratch[512];

/* A fresh folder with one class folder "c"; the case removes it. */
static void make_scratch(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(scratch, sizeof(scratch), "%s/rf-test-png-webp-XXXXXX",
             tmp ? tmp : "/tmp");
    CHECK(mkdtemp(scratch));
    char c[600];
    snprintf(c, sizeof(c), "%s/c", scratch);
    CHECK_EQ(mkdir(c, 0700), 0);
}

static void remove_scratch(void)
{
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", scratch);
    CHECK_EQ(system(cmd), 0);
}

static void put_file(const char *name, const struct blob *b)
{
    char path[700];
    snprintf(path, sizeof(path), "%s/c/%s", scratch, name);
    FILE *f = fopen(path, "wb");
    CHECK(f);
    CHECK_EQ(fwrite(b->data, 1, b->size, f), b->size);
    CHECK_EQ(fclose(f), 0);
}

/* PIL's crop, resize and flip of the file (OUT_W x OUT_H RGB); for eval
 * its resize of the whole image and then the centre crop. */
static uint8_t *pil_resized(const char *path, const struct rf__crop *c)
{
    char script[1024], cmd[4096], window[128] = "";
    test_source_file(script, sizeof(script), "pil_reference.py");
    if (c->resized_width) /* eval: resized, then the window cut out */
        snprintf(window, sizeof(window), " 0 %llu %llu %llu %llu",
                 (unsigned long long)rf__crop_resized_width(c, OUT_W),
                 (unsigned long long)rf__crop_resized_height(c, OUT_H),
                 (unsigned long long)c->skip_x, (unsigned long long)c->skip_y);
    /* %.17g: Python reads back the very doubles the decoder used */
    snprintf(cmd, sizeof(cmd),
             "%s -W ignore '%s' '%s' %.17g %.17g %.17g %.17g %u %u %d%s",
             python, script, path, c->x, c->y, c->x + c->width,
             c->y + c->height, OUT_W, OUT_H, c->flip, window);
    return test_command_output(cmd, (size_t)OUT_W * OUT_H * 3);
}

static rf_config *config_for(rf_transform transform, rf_layout layout)
{
    rf_config *cfg = rf_config_create();
    CHECK(cfg);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_HEIGHT, OUT_H));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_WIDTH, OUT_W));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_CHANNELS, 3));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_LAYOUT, layout));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_TRANSFORM, transform));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SEED, 1234));
    return cfg;
}

struct fixture {
    const char *name;
    uint32_t width, height;
};

/* Sample `index` decoded for `epoch` against PIL's crop of the file;
 * returns the largest difference. */
static int check_sample(rf_dataset *ds, const rf_config *cfg,
                        const struct fixture *fx, uint64_t epoch,
                        uint64_t index, double *mean)
{
    uint8_t got[OUT_W * OUT_H * 3];
    if (rf_dataset_decode(ds, cfg, epoch, index, got) != 0) {
        fprintf(stderr, "%s\n", rf_dataset_error(ds));
        CHECK(!"the sample did not decode");
    }
    struct rf__transform_spec spec;
    rf__transform_from_params(&spec, cfg->params);
    struct rf__crop crop;
    rf__transform_crop(&spec, (uint64_t)cfg->params[RF_PARAM_SEED], epoch,
                       index, fx->width, fx->height, &crop);
    char path[700];
    snprintf(path, sizeof(path), "%s/c/%s", scratch, fx->name);
    uint8_t *pil = pil_resized(path, &crop);
    int max = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < sizeof(got); i++) {
        const int d = abs((int)got[i] - (int)pil[i]);
        max = d > max ? d : max;
        total += (uint64_t)d;
    }
    *mean = (double)total / sizeof(got);
    free(pil);
    return max;
}

/* The files of the folder, in ImageFolder's (sorted) order. */
static const struct fixture fixtures[] = {
    {"a-rgb.png", 150, 100},         {"b-palette.png", 97, 131},
    {"c-grey16-adam7.png", 120, 90}, {"d-grey.png", 64, 200},
    {"e-lossy.webp", 160, 120},      {"f-lossless-alpha.webp", 101, 77},
};

static void write_fixtures(void)
{
    const struct png_spec specs[] = {
        {.width = 150,
         .height = 100,
         .color_type = PNG_COLOR_TYPE_RGB,
         .bit_depth = 8},
        {.width = 97,
         .height = 131,
         .color_type = PNG_COLOR_TYPE_PALETTE,
         .bit_depth = 8,
         .palette_size = 256,
         .trns = 30},
        {.width = 120,
         .height = 90,
         .color_type = PNG_COLOR_TYPE_GRAY,
         .bit_depth = 16,
         .interlaced = true},
        {.width = 64,
         .height = 200,
         .color_type = PNG_COLOR_TYPE_GRAY,
         .bit_depth = 8},
    };
    for (size_t i = 0; i < 4; i++) {
        struct blob b = make_png(&specs[i]);
        put_file(fixtures[i].name, &b);
        free(b.data);
    }
    struct blob b = make_webp(LOSSY, 160, 120);
    put_file(fixtures[4].name, &b);
    free(b.data);
    b = make_webp(LOSSLESS_ALPHA, 101, 77);
    put_file(fixtures[5].name, &b);
    free(b.data);
}

/* Every fixture under train (several epochs: other crops, flips), eval
 * and none, against PIL: exact, as the resampler is PIL's. */
TEST_CASE_LIMIT(test_decode_resized, "decode", "cropped and resized as PIL",
                120)
{
    need_python();
    make_scratch();
    write_fixtures();
    rf_dataset *ds = NULL;
    CHECK_OK(rf_dataset_open(&ds, scratch, NULL));
    CHECK_EQ(rf_dataset_size(ds), 6);
    const rf_transform transforms[] = {RF_TRANSFORM_TRAIN, RF_TRANSFORM_EVAL,
                                       RF_TRANSFORM_NONE};
    int worst = 0;
    double worst_mean = 0;
    for (size_t t = 0; t < 3; t++) {
        rf_config *cfg = config_for(transforms[t], RF_LAYOUT_NHWC);
        const uint64_t epochs = transforms[t] == RF_TRANSFORM_TRAIN ? 4 : 1;
        for (uint64_t e = 0; e < epochs; e++)
            for (uint64_t i = 0; i < 6; i++) {
                double mean = 0;
                const int max =
                    check_sample(ds, cfg, &fixtures[i], e, i, &mean);
                worst = max > worst ? max : worst;
                worst_mean = mean > worst_mean ? mean : worst_mean;
            }
        rf_config_free(cfg);
    }
    printf("  after crop and resize: max difference %d, mean at most %.3f\n",
           worst, worst_mean);
    /* test-jpeg-pil's bound at full scale (EXACT_MAX, EXACT_MEAN) */
    CHECK_LE(worst, 1);
    CHECK(worst_mean <= 0.1);
    rf_dataset_close(ds);
    remove_scratch();
}

/* NCHW holds the NHWC pixels as planes. */
TEST_CASE_LIMIT(test_decode_nchw, "decode", "NCHW holds the same pixels", 60)
{
    make_scratch();
    write_fixtures();
    rf_dataset *ds = NULL;
    CHECK_OK(rf_dataset_open(&ds, scratch, NULL));
    rf_config *hwc = config_for(RF_TRANSFORM_TRAIN, RF_LAYOUT_NHWC);
    rf_config *chw = config_for(RF_TRANSFORM_TRAIN, RF_LAYOUT_NCHW);
    for (uint64_t i = 0; i < 6; i++) {
        uint8_t a[OUT_W * OUT_H * 3], b[OUT_W * OUT_H * 3];
        CHECK_OK(rf_dataset_decode(ds, hwc, 1, i, a));
        CHECK_OK(rf_dataset_decode(ds, chw, 1, i, b));
        const size_t plane = (size_t)OUT_W * OUT_H;
        for (size_t p = 0; p < plane; p++)
            for (size_t c = 0; c < 3; c++)
                CHECK_EQ(a[p * 3 + c], b[c * plane + p]);
    }
    rf_config_free(hwc);
    rf_config_free(chw);
    rf_dataset_close(ds);
    remove_scratch();
}

/* Formats torchvision's ImageFolder lists that ringfeed does not decode:
 * a per-sample error naming the format. A GIF named .png is found by its
 * bytes. */
TEST_CASE_LIMIT(test_decode_other_formats, "decode",
                "BMP, PPM/PGM, TIFF, GIF named", 60)
{
    static const struct {
        const char *name, *bytes, *format;
        size_t len;
    } others[] = {
        {"a.bmp", "BM\x46\0\0\0\0\0\0\0\x36\0\0\0", "a BMP file", 14},
        {"b.ppm", "P6\n2 2\n255\n\1\2\3\4\5\6\7\10\11\12\13\14",
         "a PPM/PGM file", 23},
        {"c.pgm", "P5\n2 2\n255\n\1\2\3\4", "a PPM/PGM file", 15},
        {"d.tif", "II*\0\x08\0\0\0\0\0", "a TIFF file", 10},
        {"e.png", "GIF89a\2\0\2\0\0\0\0;", "a GIF file", 14},
    };
    make_scratch();
    for (size_t i = 0; i < 5; i++) {
        const struct blob b = {(uint8_t *)others[i].bytes, others[i].len, 0};
        put_file(others[i].name, &b);
    }
    rf_dataset *ds = NULL;
    CHECK_OK(rf_dataset_open(&ds, scratch, NULL));
    CHECK_EQ(rf_dataset_size(ds), 5);
    rf_config *cfg = config_for(RF_TRANSFORM_TRAIN, RF_LAYOUT_NHWC);
    for (uint64_t i = 0; i < 5; i++) {
        uint8_t out[OUT_W * OUT_H * 3];
        CHECK_EQ(rf_dataset_decode(ds, cfg, 0, i, out), RF_E_CORRUPT_SAMPLE);
        const char *why = rf_dataset_error(ds);
        CHECK_CONTAINS(why, others[i].name);
        CHECK_CONTAINS(why, others[i].format);
        CHECK_CONTAINS(why, ": ringfeed decodes JPEG");
        printf("  %s\n", why);
    }
    rf_config_free(cfg);
    rf_dataset_close(ds);
    remove_scratch();
}

/* What is no image at all (an empty file, HTML saved under an image's
 * name) is refused naming the formats that would have decoded (it said
 * "not a JPEG" of a .png). */
TEST_CASE_LIMIT(test_decode_names_what_decodes, "decode",
                "not an image: the formats that decode named", 60)
{
#if defined(HAVE_PNG) && defined(HAVE_WEBP)
    const char *decoded = "JPEG, PNG or WebP";
#elif defined(HAVE_PNG)
    const char *decoded = "JPEG or PNG";
#else
    const char *decoded = "JPEG or WebP";
#endif
    make_scratch();
    const struct blob empty = {(uint8_t *)"", 0, 0};
    const struct blob html = {(uint8_t *)"<html></html>", 13, 0};
    put_file("a.png", &empty);
    put_file("b.webp", &html);
    rf_dataset *ds = NULL;
    CHECK_OK(rf_dataset_open(&ds, scratch, NULL));
    rf_config *cfg = config_for(RF_TRANSFORM_EVAL, RF_LAYOUT_NHWC);
    uint8_t out[OUT_W * OUT_H * 3];
    char want[128];
    CHECK_EQ(rf_dataset_decode(ds, cfg, 0, 0, out), RF_E_CORRUPT_SAMPLE);
    snprintf(want, sizeof(want), "a.png): empty file (0 bytes): not a %s file",
             decoded);
    CHECK_CONTAINS(rf_dataset_error(ds), want);
    CHECK_EQ(rf_dataset_decode(ds, cfg, 0, 1, out), RF_E_CORRUPT_SAMPLE);
    snprintf(want, sizeof(want),
             "b.webp): not a %s file (starts with 3c 68 74 6d: HTML or XML "
             "text)",
             decoded);
    CHECK_CONTAINS(rf_dataset_error(ds), want);
    rf_config_free(cfg);
    rf_dataset_close(ds);
    remove_scratch();
}

/* The file name never decides: a PNG named .jpg is a PNG, a JPEG named
 * .webp a JPEG. */
TEST_CASE_LIMIT(test_decode_by_signature, "decode",
                "by signature, not file name", 60)
{
    make_scratch();
    const struct png_spec spec = {.width = 50,
                                  .height = 40,
                                  .color_type = PNG_COLOR_TYPE_RGB,
                                  .bit_depth = 8};
    struct blob png = make_png(&spec);
    put_file("a.png", &png);
    put_file("b.jpg", &png);
    free(png.data);
    void *jpeg = NULL;
    size_t size = 0;
    CHECK_OK(rf_synthetic_jpeg(5, 0, 48, 36, &jpeg, &size));
    const struct blob j = {jpeg, size, 0};
    put_file("c.jpg", &j);
    put_file("d.webp", &j);
    free(jpeg);
    rf_dataset *ds = NULL;
    CHECK_OK(rf_dataset_open(&ds, scratch, NULL));
    rf_config *cfg = config_for(RF_TRANSFORM_EVAL, RF_LAYOUT_NHWC);
    uint8_t out[4][OUT_W * OUT_H * 3];
    for (uint64_t i = 0; i < 4; i++)
        CHECK_OK(rf_dataset_decode(ds, cfg, 0, i, out[i]));
    CHECK(memcmp(out[0], out[1], sizeof(out[0])) == 0);
    CHECK(memcmp(out[2], out[3], sizeof(out[2])) == 0);
    rf_config_free(cfg);
    rf_dataset_close(ds);
    remove_scratch();
}

/* RF_PARAM_MAX_PIXELS and a damaged file, through the loader's decode. */
TEST_CASE_LIMIT(test_decode_refusals, "decode", "limits and damage refused", 60)
{
    make_scratch();
    struct blob b = make_webp(LOSSLESS, 100, 80);
    put_file("a.webp", &b);
    b.size /= 2;
    put_file("b.webp", &b);
    free(b.data);
    rf_dataset *ds = NULL;
    CHECK_OK(rf_dataset_open(&ds, scratch, NULL));
    rf_config *cfg = config_for(RF_TRANSFORM_TRAIN, RF_LAYOUT_NHWC);
    uint8_t out[OUT_W * OUT_H * 3];
    CHECK_OK(rf_dataset_decode(ds, cfg, 0, 0, out));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_MAX_PIXELS, 7999));
    CHECK_EQ(rf_dataset_decode(ds, cfg, 0, 0, out), RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(rf_dataset_error(ds), "RF_PARAM_MAX_PIXELS");
    CHECK_OK(rf_config_set(cfg, RF_PARAM_MAX_PIXELS, 8000));
    CHECK_OK(rf_dataset_decode(ds, cfg, 0, 0, out));
    CHECK_EQ(rf_dataset_decode(ds, cfg, 0, 1, out), RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(rf_dataset_error(ds), "b.webp");
    CHECK_CONTAINS(rf_dataset_error(ds), "truncated WebP");
    printf("  %s\n", rf_dataset_error(ds));
    rf_config_free(cfg);
    rf_dataset_close(ds);
    remove_scratch();
}
#endif /* HAVE_PNG && HAVE_WEBP */

/* ---- the case list --------------------------------------------------------
 */

#if !defined(HAVE_PNG) || !defined(HAVE_WEBP)
static void no_png_or_webp(void)
{
    TEST_SKIP_BECAUSE("built without libpng or libwebp (apt-get install "
                      "libpng-dev libwebp-dev)");
}
#define test_decode_resized no_png_or_webp
#define test_decode_nchw no_png_or_webp
#define test_decode_other_formats no_png_or_webp
#define test_decode_by_signature no_png_or_webp
#define test_decode_refusals no_png_or_webp
#endif

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
