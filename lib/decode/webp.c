/*
 * webp.c - whole WebP images into memory through libwebp (see image.h).
 *
 * A still image (lossy or lossless, with alpha or not) is decoded by
 * WebPDecode() as RGB straight into the decoder's buffer: the same RGB as
 * PIL, which decodes it as RGBA (not premultiplied) through libwebp's
 * animation decoder and then drops the alpha. An animation goes through
 * that animation decoder too, for the first frame on its canvas, as PIL
 * opens it. The header is read first, so that the limits refuse an image
 * before libwebp allocates anything of its size.
 */
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <webp/decode.h>
#include <webp/demux.h>

#include "common/internal.h"
#include "decode/image.h"

/* libwebp's memory besides what is counted per pixel: a lossy decode's
 * row caches and tables. */
#define LIBWEBP_FIXED_BYTES (1u << 20)

struct rf__webp_decoder {
    struct rf__image_buffer pixels;
};

struct rf__webp_decoder *rf__webp_decoder_new(void)
{
    return calloc(1, sizeof(struct rf__webp_decoder));
}

void rf__webp_decoder_free(struct rf__webp_decoder *dec)
{
    if (!dec)
        return;
    rf__image_buffer_free(&dec->pixels);
    free(dec);
}

size_t rf__webp_decoder_buffer_size(const struct rf__webp_decoder *dec)
{
    return dec->pixels.cap;
}

static const char *status_words(VP8StatusCode status)
{
    switch (status) {
    case VP8_STATUS_OUT_OF_MEMORY:
        return "out of memory";
    case VP8_STATUS_INVALID_PARAM:
        return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR:
        return "corrupt data (bitstream error)";
    case VP8_STATUS_UNSUPPORTED_FEATURE:
        return "a feature libwebp does not decode";
    case VP8_STATUS_NOT_ENOUGH_DATA:
        return "the file ends early (a truncated WebP); copy it again or "
               "leave it out";
    default:
        return "decoding failed";
    }
}

/* The bytes a decode takes: our RGB, plus libwebp's own per-pixel
 * buffers (lossless keeps the image as 32-bit ARGB, lossy with alpha an
 * alpha plane; an animation two RGBA canvases and its frame's decode). */
static uint64_t memory_needed(const WebPBitstreamFeatures *f)
{
    const uint64_t pixels = (uint64_t)f->width * (uint64_t)f->height;
    uint64_t library =
        f->format == 1 ? (f->has_alpha ? pixels : 0) : 4 * pixels;
    if (f->has_animation)
        library += 8 * pixels;
    return 3 * pixels + library + LIBWEBP_FIXED_BYTES;
}

/* libwebp's Init calls fail only when the ABI version webp/decode.h was
 * compiled with is not the library's: a build or install to be fixed. */
static int version_mismatch(char *err, size_t err_len)
{
    rf__format(err, err_len, "WebP: libwebp's version does not match");
    return -1;
}

/* A still image into buf (width x height RGB). */
static int decode_still(const uint8_t *data, size_t size, uint8_t *buf,
                        const WebPBitstreamFeatures *f, char *err,
                        size_t err_len)
{
    const size_t stride = (size_t)f->width * 3;
    WebPDecoderConfig config;
    if (!WebPInitDecoderConfig(&config))
        return version_mismatch(err, err_len);
    config.output.colorspace = MODE_RGB;
    config.output.is_external_memory = 1;
    config.output.u.RGBA.rgba = buf;
    config.output.u.RGBA.stride = (int)stride;
    config.output.u.RGBA.size = stride * (size_t)f->height;
    const VP8StatusCode status = WebPDecode(data, size, &config);
    WebPFreeDecBuffer(&config.output); /* external memory: frees nothing */
    if (status == VP8_STATUS_OK)
        return 0;
    rf__format(err, err_len, "WebP: %s", status_words(status));
    return -1;
}

/* Keeps R, G and B of each RGBA pixel. */
static void rgba_to_rgb(const uint8_t *rgba, uint8_t *rgb, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        rgb[3 * i] = rgba[4 * i];
        rgb[3 * i + 1] = rgba[4 * i + 1];
        rgb[3 * i + 2] = rgba[4 * i + 2];
    }
}

/* An animation's first frame on its canvas (what is outside the frame is
 * transparent black) into buf, as PIL's WebPAnimDecoder gives it. */
static int decode_first_frame(const uint8_t *data, size_t size, uint8_t *buf,
                              const WebPBitstreamFeatures *f, char *err,
                              size_t err_len)
{
    WebPAnimDecoderOptions options;
    if (!WebPAnimDecoderOptionsInit(&options))
        return version_mismatch(err, err_len);
    options.color_mode = MODE_RGBA;
    options.use_threads = 0;
    const WebPData whole = {data, size};
    WebPAnimDecoder *anim = WebPAnimDecoderNew(&whole, &options);
    uint8_t *canvas = NULL;
    int timestamp = 0;
    WebPAnimInfo info;
    const bool ok = anim && WebPAnimDecoderGetInfo(anim, &info) &&
                    info.canvas_width == (uint32_t)f->width &&
                    info.canvas_height == (uint32_t)f->height &&
                    WebPAnimDecoderGetNext(anim, &canvas, &timestamp);
    if (ok)
        rgba_to_rgb(canvas, buf, (size_t)f->width * (size_t)f->height);
    WebPAnimDecoderDelete(anim);
    if (ok)
        return 0;
    rf__format(err, err_len,
               "WebP: the animation's first frame does not decode (a "
               "damaged or truncated file)");
    return -1;
}

int rf__webp_decode(struct rf__webp_decoder *dec, const uint8_t *data,
                    size_t size, const struct rf__image_limits *limits,
                    uint32_t channels, struct rf__image *out, char *err,
                    size_t err_len)
{
    WebPBitstreamFeatures f;
    const VP8StatusCode status = WebPGetFeatures(data, size, &f);
    if (status != VP8_STATUS_OK) {
        rf__format(err, err_len, "WebP header: %s", status_words(status));
        return -1;
    }
    if (rf__image_check_limits(limits, "WebP", (uint32_t)f.width,
                               (uint32_t)f.height, memory_needed(&f), err,
                               err_len) < 0)
        return -1;
    const size_t count = (size_t)f.width * (size_t)f.height;
    uint8_t *buf = rf__image_buffer_reserve(&dec->pixels, 3 * count);
    if (!buf) {
        rf__format(err, err_len, "WebP: out of memory for the image");
        return -1;
    }
    const int rc = f.has_animation
                       ? decode_first_frame(data, size, buf, &f, err, err_len)
                       : decode_still(data, size, buf, &f, err, err_len);
    if (rc < 0)
        return -1;
    if (channels == 1) {
        rf__image_rgb_to_luma(buf, count);
        memset(buf + count, 0, RF_IMAGE_SLACK);
    }
    out->pixels = buf;
    out->width = (uint32_t)f.width;
    out->height = (uint32_t)f.height;
    out->channels = channels == 1 ? 1 : 3;
    out->stride = (size_t)f.width * out->channels;
    return 0;
}
