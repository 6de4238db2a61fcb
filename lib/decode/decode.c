/*
 * decode.c - one sample from its stored bytes to its place in the slot.
 * An image is told by its bytes' signature, never its file name: JPEG
 * goes through jpeg.c with the crop that transform.c picks for (seed,
 * epoch, index); PNG and WebP are decoded whole (png.c, webp.c) and the
 * same crop resized from them (image-resize.c); GIF, BMP, TIFF and
 * PPM/PGM are refused, naming the format. A zstd frame is decompressed
 * straight into the slot after its size is checked against the sample
 * shape. Owns the decoders, a resizer and a zstd context (and
 * dictionary), reused for every sample.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "common/internal.h"
#include "decode/decode.h"
#include "decode/image-resize.h"
#include "decode/image.h"
#include "source/dataset.h"
#include "source/pack.h"

struct rf__decoder {
    struct rf__jpeg_decoder *jpeg;
    struct rf__png_decoder *png;   /* NULL when built without libpng */
    struct rf__webp_decoder *webp; /* NULL when built without libwebp */
    struct rf__resizer resizer;    /* for the whole images */
    struct rf__image_limits image_limits;
    ZSTD_DCtx *zstd;
    ZSTD_DDict *dict;
    struct rf__transform_spec transform;
    struct rf__jpeg_options jpeg_options;
    struct rf__jpeg_target target; /* dst is set per sample */
    uint64_t seed;
    size_t sample_bytes;
};

/* The formats this build decodes, for the messages: all of them ("JPEG,
 * PNG and WebP"), or any of them ("JPEG, PNG or WebP"). */
static const char *decoded_formats(bool any)
{
#if defined(HAVE_PNG) && defined(HAVE_WEBP)
    return any ? "JPEG, PNG or WebP" : "JPEG, PNG and WebP";
#elif defined(HAVE_PNG)
    return any ? "JPEG or PNG" : "JPEG and PNG";
#elif defined(HAVE_WEBP)
    return any ? "JPEG or WebP" : "JPEG and WebP";
#else
    (void)any;
    return "JPEG";
#endif
}

static void read_params(struct rf__decoder *d, const int64_t *p)
{
    rf__transform_from_params(&d->transform, p);
    d->jpeg_options.max_pixels = (uint64_t)p[RF_PARAM_MAX_PIXELS];
    d->jpeg_options.max_scans = (uint32_t)p[RF_PARAM_MAX_SCANS];
    d->jpeg_options.max_decode_memory = (uint64_t)p[RF_PARAM_MAX_DECODE_MEMORY];
    d->jpeg_options.warnings_are_errors =
        p[RF_PARAM_JPEG_WARNINGS] == RF_JPEG_STRICT;
    d->jpeg_options.accept_truncated =
        p[RF_PARAM_JPEG_WARNINGS] == RF_JPEG_LENIENT;
    d->jpeg_options.exif_orientation = p[RF_PARAM_EXIF_ORIENTATION] != 0;
    d->jpeg_options.full_scale = p[RF_PARAM_DCT_SCALING] == 0;
    d->jpeg_options.decoded = decoded_formats(true);
    d->image_limits.max_pixels = d->jpeg_options.max_pixels;
    d->image_limits.max_decode_memory = d->jpeg_options.max_decode_memory;
    d->target.out_height = (uint32_t)p[RF_PARAM_HEIGHT];
    d->target.out_width = (uint32_t)p[RF_PARAM_WIDTH];
    d->target.channels = (uint32_t)p[RF_PARAM_CHANNELS];
    d->target.layout = (rf_layout)p[RF_PARAM_LAYOUT];
    d->seed = (uint64_t)p[RF_PARAM_SEED];
    d->sample_bytes =
        (size_t)d->target.out_height * d->target.out_width * d->target.channels;
}

/* A packed file of zstd samples must hold exactly the configured shape. */
static int check_raw_shape(const struct rf__decoder *d, const rf_dataset *ds,
                           char *why, size_t why_len)
{
    uint32_t h = 0, w = 0, c = 0;
    rf_layout layout = RF_LAYOUT_NHWC;
    rf__dataset_raw_shape(ds, &h, &w, &c, &layout);
    const struct rf__jpeg_target *t = &d->target;
    if (h == 0 || (h == t->out_height && w == t->out_width &&
                   c == t->channels && layout == t->layout))
        return 0;
    /* every parameter by its own name, so that each reads as a keyword
     * in Python (params.py's user_terms()) */
    rf__format(why, why_len,
               "the packed file '%s' holds %ux%ux%u %s samples but the "
               "loader is configured for %ux%ux%u %s; set RF_PARAM_HEIGHT "
               "to %u, RF_PARAM_WIDTH to %u, RF_PARAM_CHANNELS to %u and "
               "RF_PARAM_LAYOUT to %s to match",
               rf__dataset_path(ds), h, w, c,
               layout == RF_LAYOUT_NCHW ? "nchw" : "nhwc", t->out_height,
               t->out_width, t->channels,
               t->layout == RF_LAYOUT_NCHW ? "nchw" : "nhwc", h, w, c,
               layout == RF_LAYOUT_NCHW ? "RF_LAYOUT_NCHW" : "RF_LAYOUT_NHWC");
    return -EINVAL;
}

/* Encoded images decode to 1 or 3 channels: any other count is the
 * configuration's mistake, said before any sample is read. They are all
 * a dataset without a raw shape holds (only a pack of zstd samples has
 * one), or, without a dataset, all the synthetic JPEG source makes (the
 * zstd fuzzer, with no dataset and another source, feeds frames of any
 * channel count). */
static int check_image_channels(const struct rf__decoder *d,
                                const int64_t *params, const rf_dataset *ds,
                                char *why, size_t why_len)
{
    uint32_t h = 0, w = 0, c = 0;
    rf_layout layout = RF_LAYOUT_NHWC;
    if (ds)
        rf__dataset_raw_shape(ds, &h, &w, &c, &layout);
    const bool images_only =
        ds ? h == 0 : params[RF_PARAM_SOURCE] == RF_SOURCE_SYNTHETIC_JPEG;
    if (!images_only || d->target.channels == 1 || d->target.channels == 3)
        return 0;
    rf__format(why, why_len,
               "images (JPEG, PNG, WebP) decode to 1 or 3 channels, not %u; "
               "set RF_PARAM_CHANNELS to 1 or 3 (other counts are for a "
               "packed file of raw samples of that shape, ringfeed-pack "
               "--raw)",
               d->target.channels);
    return -EINVAL;
}

static int load_dictionary(struct rf__decoder *d, const rf_dataset *ds,
                           char *why, size_t why_len)
{
    size_t size = 0;
    const void *dict = rf__dataset_dict(ds, &size);
    if (!dict || size == 0)
        return 0;
    d->dict = ZSTD_createDDict(dict, size);
    if (d->dict)
        return 0;
    rf__format(why, why_len,
               "the packed file's zstd dictionary (%zu bytes) is unusable; "
               "rebuild the file with ringfeed-pack",
               size);
    return RF_E_CORRUPT_SAMPLE;
}

int rf__decoder_new(struct rf__decoder **out, const int64_t *params,
                    const rf_dataset *ds, char *why, size_t why_len)
{
    struct rf__decoder *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    read_params(d, params);
    d->jpeg = rf__jpeg_decoder_new();
    d->zstd = ZSTD_createDCtx();
    bool whole_decoders = true;
#ifdef HAVE_PNG
    d->png = rf__png_decoder_new();
    whole_decoders = whole_decoders && d->png;
#endif
#ifdef HAVE_WEBP
    d->webp = rf__webp_decoder_new();
    whole_decoders = whole_decoders && d->webp;
#endif
    int rc = 0;
    if (!d->jpeg || !d->zstd || !whole_decoders) {
        rf__format(why, why_len, "out of memory for the decoders");
        rc = -ENOMEM;
    }
    if (rc == 0)
        rc = check_image_channels(d, params, ds, why, why_len);
    if (rc == 0 && ds)
        rc = check_raw_shape(d, ds, why, why_len);
    if (rc == 0 && ds)
        rc = load_dictionary(d, ds, why, why_len);
    if (rc < 0) {
        rf__decoder_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

void rf__decoder_free(struct rf__decoder *d)
{
    if (!d)
        return;
    rf__jpeg_decoder_free(d->jpeg);
#ifdef HAVE_PNG
    rf__png_decoder_free(d->png);
#endif
#ifdef HAVE_WEBP
    rf__webp_decoder_free(d->webp);
#endif
    rf__resizer_free(&d->resizer);
    ZSTD_freeDCtx(d->zstd);
    ZSTD_freeDDict(d->dict);
    free(d);
}

/* A JPEG, a PNG or a WebP decodes to L or RGB only. */
static int check_channels(const struct rf__decoder *d, const char *what,
                          char *err, size_t err_len)
{
    if (d->target.channels == 1 || d->target.channels == 3)
        return 0;
    rf__format(err, err_len,
               "%s decodes to 1 or 3 channels, not %u; set RF_PARAM_CHANNELS",
               what, d->target.channels);
    return -1;
}

static int decode_jpeg(struct rf__decoder *d, const rf_sample_info *info,
                       uint64_t epoch, uint64_t index, uint8_t *dst, char *err,
                       size_t err_len)
{
    if (check_channels(d, "a JPEG", err, err_len) < 0)
        return -1;
    struct rf__crop_key key = {&d->transform, d->seed, epoch, index};
    struct rf__jpeg_target target = d->target;
    target.dst = dst;
    return rf__jpeg_decode(d->jpeg, info->data, info->size, &d->jpeg_options,
                           rf__transform_choose_crop, &key, &target, err,
                           err_len);
}

/* An image in a format this build does not decode: says which it is,
 * and how to get it decoded. */
static int refuse_format(enum rf__image_format format, char *err,
                         size_t err_len)
{
    const char *name = rf__image_format_name(format);
    if (format == RF_IMAGE_PNG || format == RF_IMAGE_WEBP)
        rf__format(err, err_len,
                   "a %s file: this ringfeed was built without %s; install "
                   "%s, then configure and build ringfeed again",
                   name, format == RF_IMAGE_PNG ? "libpng" : "libwebp",
                   format == RF_IMAGE_PNG ? "libpng-dev" : "libwebp-dev");
    else
        rf__format(err, err_len,
                   "a %s file: ringfeed decodes %s; convert it to one of "
                   "those",
                   name, decoded_formats(false));
    return -1;
}

/* The whole PNG or WebP into the decoder's buffer, when this build has
 * its library. */
static int decode_whole_image(struct rf__decoder *d,
                              enum rf__image_format format,
                              const rf_sample_info *info, struct rf__image *im,
                              char *err, size_t err_len)
{
    switch (format) {
#ifdef HAVE_PNG
    case RF_IMAGE_PNG:
        return rf__png_decode(d->png, info->data, info->size, &d->image_limits,
                              d->target.channels, im, err, err_len);
#endif
#ifdef HAVE_WEBP
    case RF_IMAGE_WEBP:
        return rf__webp_decode(d->webp, info->data, info->size,
                               &d->image_limits, d->target.channels, im, err,
                               err_len);
#endif
    default:
        return refuse_format(format, err, err_len);
    }
}

/* PNG and WebP: the whole image, then the transform's crop of it. */
static int decode_whole(struct rf__decoder *d, enum rf__image_format format,
                        const rf_sample_info *info, uint64_t epoch,
                        uint64_t index, uint8_t *dst, char *err, size_t err_len)
{
    const char *what = format == RF_IMAGE_PNG ? "a PNG" : "a WebP";
    struct rf__image im;
    if (check_channels(d, what, err, err_len) < 0 ||
        decode_whole_image(d, format, info, &im, err, err_len) < 0)
        return -1;
    struct rf__crop crop;
    rf__transform_crop(&d->transform, d->seed, epoch, index, im.width,
                       im.height, &crop);
    struct rf__jpeg_target target = d->target;
    target.dst = dst;
    return rf__image_resize_into(&d->resizer, &im, &crop, &target, err,
                                 err_len);
}

/* Whether this build has the decoder of a format that has one. */
static bool decoder_built(enum rf__image_format format)
{
#ifdef HAVE_PNG
    if (format == RF_IMAGE_PNG)
        return true;
#endif
#ifdef HAVE_WEBP
    if (format == RF_IMAGE_WEBP)
        return true;
#endif
    (void)format; /* built with neither */
    return false;
}

int rf__decode_check_signature(const uint8_t *data, size_t size, char *why,
                               size_t why_len)
{
    const enum rf__image_format format = rf__image_sniff(data, size);
    switch (format) {
    case RF_IMAGE_PNG:
    case RF_IMAGE_WEBP:
        return decoder_built(format) ? 0 : refuse_format(format, why, why_len);
    case RF_IMAGE_GIF:
    case RF_IMAGE_BMP:
    case RF_IMAGE_TIFF:
    case RF_IMAGE_PNM:
        return refuse_format(format, why, why_len);
    default:
        return rf__jpeg_check_signature(data, size, decoded_formats(true), why,
                                        why_len);
    }
}

/* An encoded image, by its signature: what is not PNG, WebP or a format
 * named here goes to the JPEG decoder, which names what it is not
 * (rf__decode_check_signature() tells the same formats apart). */
static int decode_image(struct rf__decoder *d, const rf_sample_info *info,
                        uint64_t epoch, uint64_t index, uint8_t *dst, char *err,
                        size_t err_len)
{
    const enum rf__image_format format =
        rf__image_sniff(info->data, info->size);
    switch (format) {
    case RF_IMAGE_PNG:
    case RF_IMAGE_WEBP:
        return decode_whole(d, format, info, epoch, index, dst, err, err_len);
    case RF_IMAGE_GIF:
    case RF_IMAGE_BMP:
    case RF_IMAGE_TIFF:
    case RF_IMAGE_PNM:
        return refuse_format(format, err, err_len);
    default:
        return decode_jpeg(d, info, epoch, index, dst, err, err_len);
    }
}

/* The frame must declare (when it declares) and hold exactly one sample's
 * bytes; it is decompressed straight into the slot. */
static int decode_zstd(struct rf__decoder *d, const rf_sample_info *info,
                       uint8_t *dst, char *err, size_t err_len)
{
    const unsigned long long declared =
        ZSTD_getFrameContentSize(info->data, info->size);
    if (declared == ZSTD_CONTENTSIZE_ERROR) {
        rf__format(err, err_len, "not a zstd frame (%zu bytes)", info->size);
        return -1;
    }
    if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != d->sample_bytes) {
        rf__format(err, err_len,
                   "zstd frame declares %llu bytes but the sample shape "
                   "needs %zu; repack with this shape or fix "
                   "RF_PARAM_HEIGHT, RF_PARAM_WIDTH and RF_PARAM_CHANNELS",
                   declared, d->sample_bytes);
        return -1;
    }
    char why[160];
    if (!rf__zstd_frame_fits_dict(info->data, info->size,
                                  d->dict ? ZSTD_getDictID_fromDDict(d->dict)
                                          : 0,
                                  why, sizeof(why))) {
        rf__format(err, err_len,
                   "%s; repack the file, passing the dictionary the samples "
                   "were compressed with",
                   why);
        return -1;
    }
    const size_t got = ZSTD_decompress_usingDDict(
        d->zstd, dst, d->sample_bytes, info->data, info->size, d->dict);
    if (ZSTD_isError(got)) {
        rf__format(err, err_len,
                   "zstd: %s; the stored frame does not decompress: list "
                   "every such sample with ringfeed-pack --verify, then "
                   "repack or leave them out",
                   ZSTD_getErrorName(got));
        return -1;
    }
    if (got != d->sample_bytes) {
        rf__format(err, err_len,
                   "zstd frame holds %zu bytes but the sample shape needs "
                   "%zu",
                   got, d->sample_bytes);
        return -1;
    }
    return 0;
}

int rf__decode_sample(struct rf__decoder *d, const rf_sample_info *info,
                      uint64_t epoch, uint64_t index, uint8_t *dst, char *err,
                      size_t err_len)
{
    switch (info->kind) {
    case RF_SAMPLE_JPEG: /* an encoded image: JPEG, PNG, WebP */
        return decode_image(d, info, epoch, index, dst, err, err_len);
    case RF_SAMPLE_ZSTD:
        return decode_zstd(d, info, dst, err, err_len);
    default:
        rf__format(err, err_len, "unknown sample kind %d", (int)info->kind);
        return -1;
    }
}

/* ---- the public one-off decode ------------------------------------------ */

int rf_dataset_decode(rf_dataset *ds, const rf_config *cfg, uint64_t epoch,
                      uint64_t index, void *dst)
{
    if (!ds)
        return -EINVAL;
    size_t len = 0;
    char *why = rf__dataset_error_buffer(ds, &len);
    if (!cfg || !dst) {
        rf__format(why, len, "rf_dataset_decode: %s is NULL",
                   !cfg ? "cfg" : "dst");
        return -EINVAL;
    }
    /* The configuration is checked against the dataset first (as
     * rf_loader_open() does, through the same rf__decoder_new()), so that
     * its mistakes are -EINVAL, never blamed on a sample. */
    struct rf__decoder *d = NULL;
    int rc = rf__decoder_new(&d, cfg->params, ds, why, len);
    if (rc < 0)
        return rc;
    rf_sample_info info;
    rc = rf_dataset_read(ds, index, &info);
    if (rc < 0) {
        rf__decoder_free(d);
        return rc;
    }
    char reason[RF__DETAIL];
    rc = rf__decode_sample(d, &info, epoch, index, dst, reason, sizeof(reason));
    rf__decoder_free(d);
    if (rc == 0)
        return 0;
    char who[RF__SAMPLE_NAME_MAX];
    rf__dataset_describe(ds, index, who, sizeof(who));
    rf__format(why, len, "%s: %s", who, reason);
    return RF_E_CORRUPT_SAMPLE;
}
