/*
 * image.c - what the whole-image decoders (png.c, webp.c) share: telling
 * a format by its first bytes, the pixel buffer that only grows, the
 * limits checked before it grows, and PIL's RGB to L. See image.h.
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/internal.h"
#include "decode/image.h"

struct signature {
    size_t offset, len;
    const char *bytes;
    enum rf__image_format format;
};

static bool is_pnm(const uint8_t *data, size_t size)
{
    /* "P1".."P7" then whitespace, as netpbm and PIL read it */
    return size >= 3 && data[0] == 'P' && data[1] >= '1' && data[1] <= '7' &&
           (data[2] == ' ' || data[2] == '\t' || data[2] == '\n' ||
            data[2] == '\r');
}

enum rf__image_format rf__image_sniff(const uint8_t *data, size_t size)
{
    static const struct signature signatures[] = {
        {0, 2, "\xff\xd8", RF_IMAGE_JPEG},
        {0, 8, "\x89PNG\r\n\x1a\n", RF_IMAGE_PNG},
        {8, 4, "WEBP", RF_IMAGE_WEBP}, /* after "RIFF" and a size */
        {0, 6, "GIF87a", RF_IMAGE_GIF},
        {0, 6, "GIF89a", RF_IMAGE_GIF},
        {0, 2, "BM", RF_IMAGE_BMP},
        {0, 4, "II*\0", RF_IMAGE_TIFF},
        {0, 4, "MM\0*", RF_IMAGE_TIFF},
    };
    for (size_t i = 0; i < sizeof(signatures) / sizeof(signatures[0]); i++) {
        const struct signature *s = &signatures[i];
        if (size < s->offset + s->len ||
            memcmp(data + s->offset, s->bytes, s->len) != 0)
            continue;
        if (s->format == RF_IMAGE_WEBP && memcmp(data, "RIFF", 4) != 0)
            continue;
        return s->format;
    }
    return is_pnm(data, size) ? RF_IMAGE_PNM : RF_IMAGE_UNKNOWN;
}

const char *rf__image_format_name(enum rf__image_format format)
{
    switch (format) {
    case RF_IMAGE_JPEG:
        return "JPEG";
    case RF_IMAGE_PNG:
        return "PNG";
    case RF_IMAGE_WEBP:
        return "WebP";
    case RF_IMAGE_GIF:
        return "GIF";
    case RF_IMAGE_BMP:
        return "BMP";
    case RF_IMAGE_TIFF:
        return "TIFF";
    case RF_IMAGE_PNM:
        return "PPM/PGM";
    default:
        return "unknown";
    }
}

uint8_t *rf__image_buffer_reserve(struct rf__image_buffer *buffer, size_t bytes)
{
    if (bytes > SIZE_MAX - RF_IMAGE_SLACK)
        return NULL;
    const size_t want = bytes + RF_IMAGE_SLACK;
    /* a buffer far above what images need is given back: one huge image
     * must not pin its memory in a producer for the rest of the run */
    const bool oversized =
        buffer->cap > RF_IMAGE_KEEP && want < buffer->cap / 4;
    if (want > buffer->cap || oversized) {
        /* no realloc: the old pixels are never needed again */
        uint8_t *fresh = malloc(want);
        if (!fresh)
            return NULL;
        free(buffer->bytes);
        buffer->bytes = fresh;
        buffer->cap = want;
    }
    /* the slack is read by SIMD loads with weight 0: defined, for the
     * memory checkers */
    memset(buffer->bytes + bytes, 0, RF_IMAGE_SLACK);
    return buffer->bytes;
}

void rf__image_buffer_free(struct rf__image_buffer *buffer)
{
    free(buffer->bytes);
    buffer->bytes = NULL;
    buffer->cap = 0;
}

int rf__image_check_limits(const struct rf__image_limits *limits,
                           const char *format, uint32_t width, uint32_t height,
                           uint64_t need_bytes, char *err, size_t err_len)
{
    const uint64_t pixels = (uint64_t)width * height;
    if (pixels > limits->max_pixels) {
        rf__format(err, err_len,
                   "a %s of %u x %u pixels is above the limit of %llu; raise "
                   "RF_PARAM_MAX_PIXELS",
                   format, width, height,
                   (unsigned long long)limits->max_pixels);
        return -1;
    }
    if (limits->max_decode_memory != 0 &&
        need_bytes > limits->max_decode_memory) {
        rf__format(err, err_len,
                   "a %s of %u x %u pixels needs %llu MiB of memory to "
                   "decode, above the limit of %llu MiB; raise "
                   "RF_PARAM_MAX_DECODE_MEMORY",
                   format, width, height,
                   (unsigned long long)((need_bytes + (1u << 20) - 1) >> 20),
                   (unsigned long long)(limits->max_decode_memory >> 20));
        return -1;
    }
    return 0;
}

void rf__image_rgb_to_luma(uint8_t *pixels, size_t count)
{
    /* pixel i is read (bytes 3i..3i+2) before byte i is written, and
     * i <= 3i: in place is safe */
    for (size_t i = 0; i < count; i++) {
        const uint8_t *p = pixels + 3 * i;
        pixels[i] = (uint8_t)((p[0] * 19595u + p[1] * 38470u + p[2] * 7471u +
                               0x8000u) >>
                              16);
    }
}
