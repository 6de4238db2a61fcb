/*
 * image-pil.h - what the PNG and WebP programs share (test-png, test-webp,
 * test-png-webp): files as blobs in memory and in temporary files, a
 * smooth and noisy picture to encode, PIL's pixels of a file (from
 * /usr/bin/python3, or $PYTHON), and lib/decode/png.c's and webp.c's
 * decoders run on a blob and compared with PIL: the same pixels, the same
 * refusals (with nothing on stderr), the limits kept before any pixel is
 * allocated.
 */
#ifndef RF_TEST_IMAGE_PIL_H
#define RF_TEST_IMAGE_PIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "decode/image.h"
#include "harness.h"
#include "test.h"

/* ---- files in memory and on disk --------------------------------------- */

struct blob {
    uint8_t *data;
    size_t size, cap;
};

static inline void blob_append(struct blob *b, const void *data, size_t n)
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

static inline void blob_le(struct blob *b, uint32_t v, unsigned bytes)
{
    for (unsigned i = 0; i < bytes; i++) {
        const uint8_t byte = (uint8_t)(v >> (8 * i));
        blob_append(b, &byte, 1);
    }
}

/* The blob in a temporary file; the caller unlinks it. */
static inline void write_temp(const struct blob *b, char *path, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(path, len, "%s/rf-test-png-webp-XXXXXX", tmp ? tmp : "/tmp");
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK_EQ(write(fd, b->data, b->size), (long long)b->size);
    CHECK_EQ(close(fd), 0);
}

/* A deterministic byte for (x, y, c) and a seed. */
static inline uint32_t noise(uint32_t x, uint32_t y, uint32_t c, uint32_t seed)
{
    uint32_t h = x * 0x9e3779b1u ^ y * 0x85ebca77u ^ c * 0xc2b2ae3du ^ seed;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    return h;
}

/* Smooth gradients with noise on top: lossy codecs get something to
 * round, PIL's and libwebp's upsampling something to disagree on. */
static inline uint8_t picture(uint32_t x, uint32_t y, uint32_t c, uint32_t w,
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
static inline bool have_python(void)
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

static inline void need_python(void)
{
    if (!have_python())
        TEST_SKIP_BECAUSE("no python3 with PIL (apt-get install python3-pil)");
}

/* PIL's pixels of the file in mode "RGB" or "L" (count bytes), or NULL
 * when PIL refuses the file. */
static inline uint8_t *pil_pixels(const char *path, const char *mode,
                                  size_t count)
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
static inline size_t image_bytes(const struct rf__image *im)
{
    return (size_t)im->height * im->stride;
}

/* A malloc'd copy of n bytes: a decoder's pixels live in its buffer, which
 * the next decode or the decoder's free reuses, and a test keeps them
 * longer. */
static inline uint8_t *copy_of(const uint8_t *pixels, size_t n)
{
    uint8_t *copy = malloc(n);
    CHECK(copy);
    memcpy(copy, pixels, n);
    return copy;
}

/* Decodes with either decoder; on failure the reason is in err. */
static inline int decode(enum format f, const struct blob *b,
                         const struct rf__image_limits *limits,
                         uint32_t channels, struct rf__image *out, char *err,
                         size_t err_len, size_t *buffer_size)
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
static inline uint8_t *as_channels(const struct rf__image *im,
                                   uint32_t channels)
{
    const size_t count = (size_t)im->width * im->height;
    /* zeroed, though the loops write every byte: clang-tidy's analyzer
     * (on test-png) took some for garbage */
    uint8_t *px = calloc(count, channels);
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
static inline int compare_with_pil(enum format f, const struct blob *b,
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
static inline void check_refused(enum format f, const struct blob *b,
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
static inline void check_limits(enum format f, const struct blob *huge,
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

#endif /* RF_TEST_IMAGE_PIL_H */
