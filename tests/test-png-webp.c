/*
 * test-png-webp.c - lib/decode/png.c and webp.c (whole images, see
 * lib/decode/image.h) against PIL, which torchvision opens images with.
 *
 * Each kind of file is made here with the libraries' own encoders
 * (libpng's write API, libwebp's encoder; an animation is assembled by
 * hand from libwebp's frames) and written to a temporary file; PIL's
 * Image.open(f).convert("RGB") and convert("L") of it, read back from
 * /usr/bin/python3 (or $PYTHON), must equal the decoder's pixels to the
 * byte. Damaged and truncated files are refused with a reason, as PIL
 * refuses them, with nothing on stderr; the limits refuse an image before
 * its pixels are allocated. A case that needs PIL skips without it, and
 * the cases of a library configure did not find skip.
 */
#include "config.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#ifdef HAVE_PNG
#include <png.h>
#endif
#ifdef HAVE_WEBP
#include <webp/encode.h>
#endif

#include "common/params.h"
#include "decode/image.h"
#include "decode/transform.h"
#include "harness.h"
#include "test.h"

/* ---- files in memory and on disk --------------------------------------- */

struct blob {
    uint8_t *data;
    size_t size, cap;
};

static void blob_append(struct blob *b, const void *data, size_t n)
{
    if (n == 0)
        return;
    if (b->size + n > b->cap) {
        b->cap = (b->size + n) * 2;
        b->data = realloc(b->data, b->cap);
        CHECK(b->data);
    }
    memcpy(b->data + b->size, data, n);
    b->size += n;
}

static void blob_le(struct blob *b, uint32_t v, unsigned bytes)
{
    for (unsigned i = 0; i < bytes; i++) {
        const uint8_t byte = (uint8_t)(v >> (8 * i));
        blob_append(b, &byte, 1);
    }
}

/* The blob in a temporary file; the caller unlinks it. */
static void write_temp(const struct blob *b, char *path, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(path, len, "%s/rf-test-png-webp-XXXXXX", tmp ? tmp : "/tmp");
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK_EQ(write(fd, b->data, b->size), (long long)b->size);
    CHECK_EQ(close(fd), 0);
}

/* A deterministic byte for (x, y, c) and a seed. */
static uint32_t noise(uint32_t x, uint32_t y, uint32_t c, uint32_t seed)
{
    uint32_t h = x * 0x9e3779b1u ^ y * 0x85ebca77u ^ c * 0xc2b2ae3du ^ seed;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    return h;
}

/* Smooth gradients with noise on top: lossy codecs get something to
 * round, PIL's and libwebp's upsampling something to disagree on. */
static uint8_t picture(uint32_t x, uint32_t y, uint32_t c, uint32_t w,
                       uint32_t h)
{
    const uint32_t base = (x * 255 / w + y * 255 / h + c * 85) % 256;
    return (uint8_t)((base + (noise(x, y, c, 7) & 31)) % 256);
}

/* ---- PIL ---------------------------------------------------------------- */

static const char pil_script[] =
    "import sys\n"
    "from PIL import Image\n"
    "with Image.open(sys.argv[1]) as im:\n"
    "    sys.stdout.buffer.write(im.convert(sys.argv[2]).tobytes())\n";

static char python[256];

/* An interpreter that has PIL: $PYTHON, python3, or the system's own (a
 * pyenv python3 may lack the distribution's python3-pil). */
static bool have_python(void)
{
    const char *candidates[] = {getenv("PYTHON"), "python3",
                                "/usr/bin/python3"};
    for (size_t i = 0; !python[0] && i < 3; i++) {
        if (!candidates[i] || !candidates[i][0])
            continue;
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "%s -c 'import PIL' >/dev/null 2>&1",
                 candidates[i]);
        if (system(cmd) == 0)
            snprintf(python, sizeof(python), "%s", candidates[i]);
    }
    return python[0] != '\0';
}

static void need_python(void)
{
    if (!have_python())
        TEST_SKIP_BECAUSE("no python3 with PIL (apt-get install python3-pil)");
}

/* PIL's pixels of the file in mode "RGB" or "L" (count bytes), or NULL
 * when PIL refuses the file. */
static uint8_t *pil_pixels(const char *path, const char *mode, size_t count)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "%s -c '%s' '%s' %s 2>/dev/null", python,
             pil_script, path, mode);
    FILE *p = popen(cmd, "r");
    CHECK(p);
    uint8_t *px = malloc(count + 1);
    CHECK(px);
    const size_t got = fread(px, 1, count + 1, p);
    const int status = pclose(p);
    if (status != 0) {
        free(px);
        return NULL;
    }
    CHECK_EQ(got, count);
    return px;
}

/* ---- decoding ---------------------------------------------------------- */

enum format { PNG, WEBP };

static const struct rf__image_limits default_limits = {89478485, 1ull << 30};

/* The bytes of the image's rows, stride included. */
static size_t image_bytes(const struct rf__image *im)
{
    return (size_t)im->height * im->stride;
}

/* A malloc'd copy of n bytes: a decoder's pixels live in its buffer, which
 * the next decode or the decoder's free reuses, and a test keeps them
 * longer. */
static uint8_t *copy_of(const uint8_t *pixels, size_t n)
{
    uint8_t *copy = malloc(n);
    CHECK(copy);
    memcpy(copy, pixels, n);
    return copy;
}

/* Decodes with either decoder; on failure the reason is in err. */
static int decode(enum format f, const struct blob *b,
                  const struct rf__image_limits *limits, uint32_t channels,
                  struct rf__image *out, char *err, size_t err_len,
                  size_t *buffer_size)
{
    int rc = -1;
#ifdef HAVE_PNG
    if (f == PNG) {
        struct rf__png_decoder *dec = rf__png_decoder_new();
        CHECK(dec);
        rc = rf__png_decode(dec, b->data, b->size, limits, channels, out, err,
                            err_len);
        if (buffer_size)
            *buffer_size = rf__png_decoder_buffer_size(dec);
        if (rc == 0)
            out->pixels = copy_of(out->pixels, image_bytes(out));
        rf__png_decoder_free(dec);
    }
#endif
#ifdef HAVE_WEBP
    if (f == WEBP) {
        struct rf__webp_decoder *dec = rf__webp_decoder_new();
        CHECK(dec);
        rc = rf__webp_decode(dec, b->data, b->size, limits, channels, out, err,
                             err_len);
        if (buffer_size)
            *buffer_size = rf__webp_decoder_buffer_size(dec);
        if (rc == 0)
            out->pixels = copy_of(out->pixels, image_bytes(out));
        rf__webp_decoder_free(dec);
    }
#endif
    return rc;
}

/* The image as `channels` channels per pixel: L repeated into RGB, as
 * PIL's convert("RGB") of a grey image. */
static uint8_t *as_channels(const struct rf__image *im, uint32_t channels)
{
    const size_t count = (size_t)im->width * im->height;
    uint8_t *px = malloc(count * channels);
    CHECK(px);
    for (size_t y = 0; y < im->height; y++)
        for (size_t x = 0; x < im->width; x++)
            for (uint32_t c = 0; c < channels; c++) {
                const uint8_t *p = im->pixels + y * im->stride;
                px[(y * im->width + x) * channels + c] =
                    p[x * im->channels + (im->channels == 1 ? 0 : c)];
            }
    return px;
}

/* Decodes the file with 3 and 1 channels and compares each with PIL's
 * convert("RGB") and convert("L"); prints the largest difference and
 * returns it. */
static int compare_with_pil(enum format f, const struct blob *b,
                            const char *what)
{
    need_python();
    char path[512];
    write_temp(b, path, sizeof(path));
    int worst = 0;
    for (int pass = 0; pass < 2; pass++) {
        const uint32_t channels = pass == 0 ? 3 : 1;
        struct rf__image im;
        char err[256] = "";
        if (decode(f, b, &default_limits, channels, &im, err, sizeof(err),
                   NULL) != 0) {
            fprintf(stderr, "%s: %s\n", what, err);
            CHECK(!"the decode failed");
        }
        CHECK(channels == 3 || im.channels == 1);
        const size_t n = (size_t)im.width * im.height * channels;
        uint8_t *mine = as_channels(&im, channels);
        uint8_t *pil = pil_pixels(path, channels == 3 ? "RGB" : "L", n);
        CHECK(pil);
        int max = 0;
        size_t first = n;
        for (size_t i = 0; i < n; i++) {
            const int d = abs((int)mine[i] - (int)pil[i]);
            if (d > max)
                max = d;
            if (d && first == n)
                first = i;
        }
        if (max)
            printf("  %s %s: max difference %d, first at byte %zu (%u vs "
                   "%u)\n",
                   what, channels == 3 ? "RGB" : "L", max, first, mine[first],
                   pil[first]);
        worst = max > worst ? max : worst;
        free(mine);
        free(pil);
        free((void *)im.pixels);
    }
    unlink(path);
    printf("  %s: %s\n", what, worst ? "differs from PIL" : "PIL's pixels");
    return worst;
}

/* The file must be refused with a reason containing `words` (NULL: any),
 * as PIL refuses it, and print nothing on stderr. */
static void check_refused(enum format f, const struct blob *b,
                          const char *words)
{
    fflush(stderr);
    const int saved = dup(2);
    char log[512];
    const char *tmp = getenv("TMPDIR");
    snprintf(log, sizeof(log), "%s/rf-test-stderr-XXXXXX", tmp ? tmp : "/tmp");
    const int fd = mkstemp(log);
    CHECK(fd >= 0 && saved >= 0);
    CHECK(dup2(fd, 2) == 2);
    struct rf__image im;
    char err[256] = "";
    const int rc =
        decode(f, b, &default_limits, 3, &im, err, sizeof(err), NULL);
    fflush(stderr);
    CHECK(dup2(saved, 2) == 2);
    struct stat st;
    CHECK_EQ(fstat(fd, &st), 0);
    close(fd);
    close(saved);
    unlink(log);
    CHECK_EQ(st.st_size, 0); /* libraries print nothing */
    CHECK_EQ(rc, -1);
    CHECK(err[0] && !strchr(err, '\n'));
    if (words)
        CHECK_CONTAINS(err, words);
    printf("  refused: %s\n", err);
    if (have_python()) {
        char path[512];
        write_temp(b, path, sizeof(path));
        char cmd[2048];
        snprintf(cmd, sizeof(cmd), "%s -c '%s' '%s' RGB >/dev/null 2>&1",
                 python, pil_script, path);
        CHECK(system(cmd) != 0); /* PIL refuses it too */
        unlink(path);
    }
}

/* The limits either decoder keeps, each refused before its buffer grew:
 * `huge`, whose header claims too many pixels (its words say how many);
 * `b`, an image of 1000 x 1000, over a limit of fewer pixels and over
 * `little_memory` bytes, and taken with 1000000 pixels and `enough_memory`. */
static void check_limits(enum format f, const struct blob *huge,
                         const char *huge_words, const struct blob *b,
                         uint64_t little_memory, uint64_t enough_memory)
{
    struct rf__image im;
    char err[256];
    size_t buffer = 1;
    CHECK_EQ(
        decode(f, huge, &default_limits, 3, &im, err, sizeof(err), &buffer),
        -1);
    CHECK_CONTAINS(err, huge_words);
    CHECK_EQ(buffer, 0); /* refused before the pixels were allocated */

    const struct rf__image_limits few_pixels = {999999, 1ull << 30};
    CHECK_EQ(decode(f, b, &few_pixels, 3, &im, err, sizeof(err), &buffer), -1);
    CHECK_CONTAINS(err, "RF_PARAM_MAX_PIXELS");
    CHECK_EQ(buffer, 0);
    const struct rf__image_limits little = {89478485, little_memory};
    CHECK_EQ(decode(f, b, &little, 3, &im, err, sizeof(err), &buffer), -1);
    CHECK_CONTAINS(err, "RF_PARAM_MAX_DECODE_MEMORY");
    CHECK_EQ(buffer, 0);
    printf("  refused: %s\n", err);
    const struct rf__image_limits enough = {1000000, enough_memory};
    CHECK_EQ(decode(f, b, &enough, 3, &im, err, sizeof(err), &buffer), 0);
    free((void *)im.pixels);
}

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

/* ---- PNG ----------------------------------------------------------------- */

#ifdef HAVE_PNG
struct png_spec {
    uint32_t width, height;
    int color_type, bit_depth;
    bool interlaced;
    unsigned palette_size; /* entries of PLTE */
    unsigned trns;         /* palette: alpha entries; else 1 = a tRNS colour */
    bool colour_chunks;    /* gAMA, cHRM, sRGB: ignored by PIL */
    bool index_beyond;     /* palette indices past PLTE's entries too */
    bool unknown_chunks;   /* a tEXt, and an unknown critical chunk "ABCD"
                              after PLTE, before IDAT */
    bool header_only;      /* no pixels: the chunks before IDAT, then an
                              IDAT's start (all that the limits read) */
};

static void write_blob(png_structp png, png_bytep data, size_t n)
{
    blob_append(png_get_io_ptr(png), data, n);
}

static void flush_blob(png_structp png)
{
    (void)png;
}

static unsigned png_channels(int color_type)
{
    switch (color_type) {
    case PNG_COLOR_TYPE_GRAY_ALPHA:
        return 2;
    case PNG_COLOR_TYPE_RGB:
        return 3;
    case PNG_COLOR_TYPE_RGB_ALPHA:
        return 4;
    default:
        return 1;
    }
}

/* Sample (x, y, c) of the spec's bit depth: palette indices within the
 * palette, 16-bit grey often under 256 (PIL clips the rest). */
static uint32_t png_sample(const struct png_spec *s, uint32_t x, uint32_t y,
                           uint32_t c)
{
    const uint32_t n = noise(x, y, c, 11);
    if (s->color_type == PNG_COLOR_TYPE_PALETTE)
        return n % (s->index_beyond ? 1u << s->bit_depth : s->palette_size);
    if (s->bit_depth < 8)
        return n & ((1u << s->bit_depth) - 1);
    const uint32_t smooth = picture(x, y, c, s->width, s->height);
    if (s->bit_depth == 8)
        return c == 3 || (c == 1 && png_channels(s->color_type) == 2)
                   ? n & 255 /* alpha: all sorts, 0 and 255 included */
                   : smooth;
    if (s->color_type == PNG_COLOR_TYPE_GRAY)
        return n % 3 == 0 ? n & 0xffff : n & 0xff;
    return smooth << 8 | (n & 0xff);
}

/* One row in the file's packing: MSB first below 8 bits, big-endian at
 * 16. */
static void png_row(const struct png_spec *s, uint32_t y, uint8_t *row,
                    size_t row_bytes)
{
    const unsigned ch = png_channels(s->color_type);
    memset(row, 0, row_bytes);
    for (uint32_t x = 0; x < s->width; x++)
        for (uint32_t c = 0; c < ch; c++) {
            const uint32_t v = png_sample(s, x, y, c);
            const size_t i = (size_t)x * ch + c;
            if (s->bit_depth == 16) {
                row[2 * i] = (uint8_t)(v >> 8);
                row[2 * i + 1] = (uint8_t)v;
            } else if (s->bit_depth == 8) {
                row[i] = (uint8_t)v;
            } else {
                const size_t bit = i * (size_t)s->bit_depth;
                row[bit / 8] |= (uint8_t)(v << (8 - s->bit_depth - bit % 8));
            }
        }
}

static void png_set_extras(png_structp png, png_infop info,
                           const struct png_spec *s)
{
    if (s->color_type == PNG_COLOR_TYPE_PALETTE) {
        png_color colours[256];
        png_byte alpha[256];
        for (unsigned i = 0; i < s->palette_size; i++) {
            colours[i].red = (png_byte)noise(i, 0, 0, 3);
            colours[i].green = (png_byte)noise(i, 0, 1, 3);
            colours[i].blue = (png_byte)noise(i, 0, 2, 3);
            alpha[i] = (png_byte)(i * 37);
        }
        png_set_PLTE(png, info, colours, (int)s->palette_size);
        if (s->trns)
            png_set_tRNS(png, info, alpha, (int)s->trns, NULL);
    } else if (s->trns) {
        png_color_16 colour = {0};
        colour.gray = (png_uint_16)png_sample(s, 1, 1, 0);
        colour.red = (png_uint_16)png_sample(s, 1, 1, 0);
        colour.green = (png_uint_16)png_sample(s, 1, 1, 1);
        colour.blue = (png_uint_16)png_sample(s, 1, 1, 2);
        png_set_tRNS(png, info, NULL, 0, &colour);
    }
    if (s->colour_chunks)
        png_set_sRGB_gAMA_and_cHRM(png, info, PNG_sRGB_INTENT_PERCEPTUAL);
    if (s->unknown_chunks) {
        png_text text = {0};
        text.compression = PNG_TEXT_COMPRESSION_NONE;
        text.key = (png_charp) "Comment";
        text.text = (png_charp) "made by test-png-webp";
        png_set_text(png, info, &text, 1);
    }
}

static struct blob make_png(const struct png_spec *s)
{
    struct blob b = {0};
    png_structp png =
        png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    CHECK(png && info);
    if (setjmp(png_jmpbuf(png)))
        CHECK(!"libpng could not write the fixture");
    png_set_write_fn(png, &b, write_blob, flush_blob);
    png_set_IHDR(png, info, s->width, s->height, s->bit_depth, s->color_type,
                 s->interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_extras(png, info, s);
    if (s->index_beyond)
        png_set_check_for_invalid_index(png, 0);
    png_write_info(png, info);
    if (s->unknown_chunks)
        png_write_chunk(png, (png_const_bytep) "ABCD", (png_const_bytep) "xy",
                        2);
    if (s->header_only) {
        png_destroy_write_struct(&png, &info);
        blob_append(&b, "\0\0\0\x10IDAT", 8);
        return b;
    }
    const size_t row_bytes = png_get_rowbytes(png, info);
    uint8_t *pixels = malloc(row_bytes * s->height);
    png_bytep *rows = malloc(s->height * sizeof(*rows));
    CHECK(pixels && rows);
    for (uint32_t y = 0; y < s->height; y++) {
        rows[y] = pixels + y * row_bytes;
        png_row(s, y, rows[y], row_bytes);
    }
    png_write_image(png, rows); /* all 7 passes when interlaced */
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    free(rows);
    free(pixels);
    return b;
}

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
#endif /* HAVE_PNG */

/* ---- WebP ---------------------------------------------------------------- */

#ifdef HAVE_WEBP
enum webp_kind { LOSSY, LOSSY_ALPHA, LOSSLESS, LOSSLESS_ALPHA };

static uint8_t *rgba_picture(uint32_t w, uint32_t h, uint32_t seed)
{
    uint8_t *px = malloc((size_t)w * h * 4);
    CHECK(px);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++) {
            uint8_t *p = px + ((size_t)y * w + x) * 4;
            for (uint32_t c = 0; c < 3; c++)
                p[c] = picture(x + seed, y, c, w, h);
            /* transparent, opaque and partial areas */
            const uint32_t band = x * 4 / w;
            p[3] = band == 0   ? 0
                   : band == 3 ? 255
                               : (uint8_t)noise(x, y, 3, seed);
        }
    return px;
}

static struct blob make_webp(enum webp_kind kind, uint32_t w, uint32_t h)
{
    uint8_t *rgba = rgba_picture(w, h, 0);
    uint8_t *rgb = malloc((size_t)w * h * 3);
    CHECK(rgb);
    for (size_t i = 0; i < (size_t)w * h; i++)
        memcpy(rgb + 3 * i, rgba + 4 * i, 3);
    uint8_t *out = NULL;
    size_t size = 0;
    const int stride3 = (int)w * 3, stride4 = (int)w * 4;
    switch (kind) {
    case LOSSY:
        size = WebPEncodeRGB(rgb, (int)w, (int)h, stride3, 80, &out);
        break;
    case LOSSY_ALPHA:
        size = WebPEncodeRGBA(rgba, (int)w, (int)h, stride4, 80, &out);
        break;
    case LOSSLESS:
        size = WebPEncodeLosslessRGB(rgb, (int)w, (int)h, stride3, &out);
        break;
    case LOSSLESS_ALPHA:
        size = WebPEncodeLosslessRGBA(rgba, (int)w, (int)h, stride4, &out);
        break;
    }
    CHECK(size > 0);
    struct blob b = {0};
    blob_append(&b, out, size);
    WebPFree(out);
    free(rgb);
    free(rgba);
    return b;
}

static void blob_chunk(struct blob *b, const char *fourcc, const void *data,
                       size_t size)
{
    blob_append(b, fourcc, 4);
    blob_le(b, (uint32_t)size, 4);
    blob_append(b, data, size);
    if (size & 1)
        blob_append(b, "", 1);
}

/* An ANMF chunk: a lossless frame of w x h at (x, y) of the canvas. */
static void blob_frame(struct blob *b, uint32_t x, uint32_t y, uint32_t w,
                       uint32_t h, uint32_t seed)
{
    uint8_t *rgba = rgba_picture(w, h, seed);
    uint8_t *file = NULL;
    const size_t size =
        WebPEncodeLosslessRGBA(rgba, (int)w, (int)h, (int)w * 4, &file);
    CHECK(size > 12);
    struct blob frame = {0};
    blob_le(&frame, x / 2, 3);
    blob_le(&frame, y / 2, 3);
    blob_le(&frame, w - 1, 3);
    blob_le(&frame, h - 1, 3);
    blob_le(&frame, 100, 3);                   /* duration, ms */
    blob_le(&frame, 0, 1);                     /* blend, no dispose */
    blob_append(&frame, file + 12, size - 12); /* its VP8L chunk */
    blob_chunk(b, "ANMF", frame.data, frame.size);
    free(frame.data);
    WebPFree(file);
    free(rgba);
}

/* An animation of two frames of fw x fh on a canvas of w x h: the first
 * at (4, 2), leaving the rest of the canvas uncovered, then one at the
 * origin. */
static struct blob make_animation(uint32_t w, uint32_t h, uint32_t fw,
                                  uint32_t fh)
{
    struct blob body = {0};
    blob_append(&body, "WEBP", 4);
    struct blob vp8x = {0};
    blob_le(&vp8x, 0x12, 4); /* animation, alpha */
    blob_le(&vp8x, w - 1, 3);
    blob_le(&vp8x, h - 1, 3);
    blob_chunk(&body, "VP8X", vp8x.data, vp8x.size);
    const uint8_t anim[6] = {0, 0, 0, 0, 0, 0}; /* background, loops */
    blob_chunk(&body, "ANIM", anim, sizeof(anim));
    blob_frame(&body, 4, 2, fw, fh, 1);
    blob_frame(&body, 0, 0, fw, fh, 2);
    struct blob b = {0};
    blob_append(&b, "RIFF", 4);
    blob_le(&b, (uint32_t)body.size, 4);
    blob_append(&b, body.data, body.size);
    free(vp8x.data);
    free(body.data);
    return b;
}

TEST_CASE_LIMIT(test_webp_lossy, "webp", "lossy, with and without alpha", 60)
{
    struct blob b = make_webp(LOSSY, 61, 47);
    CHECK_EQ(compare_with_pil(WEBP, &b, "lossy"), 0);
    free(b.data);
    b = make_webp(LOSSY_ALPHA, 61, 47);
    CHECK_EQ(compare_with_pil(WEBP, &b, "lossy + alpha"), 0);
    free(b.data);
}

TEST_CASE_LIMIT(test_webp_lossless, "webp", "lossless, with and without alpha",
                60)
{
    struct blob b = make_webp(LOSSLESS, 61, 47);
    CHECK_EQ(compare_with_pil(WEBP, &b, "lossless"), 0);
    free(b.data);
    b = make_webp(LOSSLESS_ALPHA, 61, 47);
    CHECK_EQ(compare_with_pil(WEBP, &b, "lossless + alpha"), 0);
    free(b.data);
}

TEST_CASE_LIMIT(test_webp_animation, "webp", "an animation's first frame", 60)
{
    struct blob b = make_animation(40, 30, 32, 24);
    CHECK_EQ(compare_with_pil(WEBP, &b, "animation, first frame"), 0);
    free(b.data);
}

TEST_CASE_LIMIT(test_webp_truncated, "webp", "truncated files refused", 60)
{
    const enum webp_kind kinds[] = {LOSSY, LOSSLESS_ALPHA};
    for (size_t k = 0; k < 2; k++) {
        struct blob b = make_webp(kinds[k], 64, 48);
        const size_t cuts[] = {0, 10, 25, b.size / 2, b.size - 1};
        for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
            struct blob cut = {b.data, cuts[i], 0};
            check_refused(WEBP, &cut, "WebP");
        }
        free(b.data);
    }
}

TEST_CASE_LIMIT(test_webp_damaged, "webp", "damaged files refused", 60)
{
    struct blob b = make_webp(LOSSY, 64, 48);
    /* the VP8 key frame's start code (9d 01 2a), after RIFF, WEBP, the
     * chunk header and the 3-byte frame tag */
    CHECK(b.data[23] == 0x9d);
    b.data[23] = 0;
    check_refused(WEBP, &b, "WebP");
    free(b.data);
    b = make_webp(LOSSLESS, 64, 48);
    b.data[20] = 0; /* VP8L's signature byte 0x2f */
    check_refused(WEBP, &b, "WebP");
    free(b.data);
}

TEST_CASE_LIMIT(test_webp_limits, "webp", "limits refuse before allocating", 60)
{
    /* an animation's canvas of 16384 x 16384: refused before libwebp
     * makes the canvas, and before our buffer */
    struct blob huge = make_animation(16384, 16384, 8, 8);
    struct blob b = make_webp(LOSSLESS, 1000, 1000);
    check_limits(WEBP, &huge, "16384 x 16384 pixels is above the limit", &b,
                 4u << 20, 16u << 20);
    free(huge.data);
    free(b.data);
}
#endif /* HAVE_WEBP */

/* ---- through the loader's decode (decode.c) -------------------------------
 *
 * A folder dataset of PNG and WebP files (and others), decoded by
 * rf_dataset_decode() as a producer decodes them: the transform's crop,
 * resized into the sample, must be PIL's resize(size, BILINEAR, box) of
 * the file (tests/pil_reference.py, as test-jpeg uses it), flipped when
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
    /* test-jpeg's bound at full scale (EXACT_MAX, EXACT_MEAN) */
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

#ifndef HAVE_PNG
static void no_png(void)
{
    TEST_SKIP_BECAUSE("built without libpng (apt-get install libpng-dev)");
}
#define test_png_palette no_png
#define test_png_grey no_png
#define test_png_grey16 no_png
#define test_png_grey_alpha no_png
#define test_png_rgb no_png
#define test_png_interlaced no_png
#define test_png_colour_chunks no_png
#define test_png_truncated no_png
#define test_png_cut_after_last_row no_png
#define test_png_out_of_memory no_png
#define test_png_damaged no_png
#define test_png_pil_verdicts no_png
#define test_png_limits no_png
#define test_png_reuse no_png
#endif
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
#ifndef HAVE_WEBP
static void no_webp(void)
{
    TEST_SKIP_BECAUSE("built without libwebp (apt-get install libwebp-dev)");
}
#define test_webp_lossy no_webp
#define test_webp_lossless no_webp
#define test_webp_animation no_webp
#define test_webp_truncated no_webp
#define test_webp_damaged no_webp
#define test_webp_limits no_webp
#endif

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
