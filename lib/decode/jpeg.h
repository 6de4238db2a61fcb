/*
 * jpeg.h - JPEG decoding straight into a batch slot, through
 * libjpeg-turbo's libjpeg API.
 *
 * Once the header is read, the caller's chooser picks the crop box. The
 * decoder then reads only the MCU rows and columns the box needs
 * (jpeg_crop_scanline, jpeg_skip_scanlines), at the smallest DCT scale M/8
 * (M = 1, 2, 4 or 8: the scales with SIMD code) whose output still covers
 * the output size, and an antialiased resize
 * (PIL-style bilinear, the filter widened when shrinking) writes the
 * pixels into dst. No buffer of the whole image is ever made.
 *
 * A decoder owns libjpeg's state and its scratch rows, reused from one
 * image to the next; it is used by one thread at a time. Every failure is
 * a return value with a reason: a corrupt, truncated or unsupported file
 * never crashes the process, and libjpeg's warnings count as errors
 * unless the options relax that.
 */
#ifndef RF_JPEG_H
#define RF_JPEG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringfeed.h"
#include "decode/resize.h"
#include "decode/transform.h"

struct rf__jpeg_options {
    uint64_t max_pixels;        /* refuse images with more pixels */
    uint32_t max_scans;         /* refuse progressive files with more scans */
    uint64_t max_decode_memory; /* refuse files whose decode needs more
                                   bytes (multi-scan ones); 0 = no limit */
    bool accept_truncated;      /* a file cut short decodes, the missing
                                   rows grey (else it fails, as in PIL) */
    bool warnings_are_errors;   /* libjpeg warnings (corrupt data it could
                                   decode around) fail the sample */
    bool exif_orientation;      /* apply the EXIF orientation tag */
    bool full_scale;            /* never decode at a DCT scale below 8/8 */
    const char *decoded;        /* what would have decoded, for a file
                                   that is no JPEG ("JPEG, PNG or WebP");
                                   NULL: "JPEG" */
};

/* Where the output goes: out_height x out_width x channels (1 or 3) uint8,
 * in `layout`, starting at dst. For NCHW, plane c starts at
 * dst + c * out_height * out_width. */
struct rf__jpeg_target {
    uint32_t out_height, out_width, channels;
    rf_layout layout;
    uint8_t *dst;
};

/* The target as the resizer sees it, neither transposed nor mirrored: a
 * JPEG's orientation and a whole image's flip then set what they need. */
struct rf__resize_dest rf__jpeg_target_dest(const struct rf__jpeg_target *t);

/* Picks the crop for an image of width x height (after orientation). */
typedef void (*rf__crop_chooser)(void *user, uint32_t width, uint32_t height,
                                 struct rf__crop *crop);

struct rf__jpeg_decoder;

/* A decoder, or NULL when out of memory. */
struct rf__jpeg_decoder *rf__jpeg_decoder_new(void);

/* NULL is fine. */
void rf__jpeg_decoder_free(struct rf__jpeg_decoder *dec);

/*
 * Decodes `size` bytes of JPEG at `data` into the target. Returns 0, or -1
 * with a one-line reason in err (e.g. "premature end of data", "not a JPEG
 * file (starts with 89 50 4e 47: PNG)", "12-bit JPEG is not supported",
 * "18000 x 12000 pixels is above the limit of 89478485; raise
 * RF_PARAM_MAX_PIXELS"). On error the target's content is unspecified.
 * Grayscale, CMYK and YCCK (Adobe's inverted CMYK included) become RGB;
 * with channels == 1 the output is luminance.
 */
int rf__jpeg_decode(struct rf__jpeg_decoder *dec, const uint8_t *data,
                    size_t size, const struct rf__jpeg_options *opt,
                    rf__crop_chooser choose, void *user,
                    const struct rf__jpeg_target *target, char *err,
                    size_t err_len);

/* Refuses what is plainly not a JPEG by its first bytes, naming what it
 * looks like: -1 with the reason in why ("not a JPEG file (starts with
 * 47 49 46 38: GIF)", "empty file (0 bytes): not a JPEG file"), else 0.
 * `decoded` names what would have been decoded in those messages ("JPEG";
 * "JPEG, PNG or WebP" from a decoder that tells those apart first).
 * rf__jpeg_decode() begins with it, naming its options' `decoded`. */
int rf__jpeg_check_signature(const uint8_t *data, size_t size,
                             const char *decoded, char *why, size_t why_len);

/* The DCT scale numerator M (of M/8; 1, 2, 4 or 8) that rf__jpeg_decode()
 * uses for a crop of crop_w x crop_h source pixels and an output of
 * out_w x out_h: the smallest whose scaled crop still covers the output.
 * Exposed for tests. */
unsigned rf__jpeg_scale_for(double crop_w, double crop_h, uint32_t out_w,
                            uint32_t out_h);

#endif /* RF_JPEG_H */
