/*
 * jpeg-decoder.h - what the files of the JPEG decoder share, inside
 * lib/decode only: the decoder object, one image's plan, the way out of
 * libjpeg with a reason, and the steps each file owns. jpeg.h is the
 * decoder's interface.
 *
 *   jpeg.c         the decoder object, libjpeg's error bridge, the checks
 *                  before libjpeg, colour, rows into the resizer, finish;
 *   jpeg-header.c  the header: precision, pixel and memory limits, EXIF
 *                  orientation;
 *   jpeg-crop.c    the crop in stored pixels, the DCT scale, the resize
 *                  plan and the rows and columns it reads (the column
 *                  filter on libjpeg-turbo's entropy decoder).
 */
#ifndef RF_JPEG_DECODER_H
#define RF_JPEG_DECODER_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h> /* jpeglib.h needs FILE and size_t first */

#include <jpeglib.h>

#include "decode/jpeg.h"
#include "decode/resize.h"

#define RF__JPEG_REASON_LEN 256

/* libjpeg's error manager plus the way back out of the library. */
struct rf__jpeg_error_bridge {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    bool warnings_are_errors;
    bool accept_truncated;
    unsigned warnings; /* warnings of the current image */
    bool header_read;  /* the current image's size is in cinfo */
    char reason[RF__JPEG_REASON_LEN];
};

/* The MCU columns of a cropped decode that libjpeg turns into pixels, and
 * its entropy decoder, which jpeg-crop.c wraps to discard the others. */
struct rf__jpeg_column_filter {
    boolean (*decode_mcu)(j_decompress_ptr, JBLOCKROW *);
    JDIMENSION next;        /* the column of the next MCU decoded */
    JDIMENSION first, last; /* those turned into pixels */
};

struct rf__jpeg_decoder {
    struct jpeg_decompress_struct cinfo;
    struct rf__jpeg_error_bridge err;
    struct jpeg_progress_mgr progress;
    uint32_t max_scans;  /* of the current image; 0 = no limit */
    uint64_t max_memory; /* of the current image; 0 = no limit */
    struct rf__resizer resizer;
    uint8_t *row; /* decoded scanlines, a batch of them at most */
    size_t row_cap;
    uint8_t *converted; /* one CMYK scanline as RGB or luminance */
    size_t converted_cap;
    struct rf__jpeg_column_filter columns; /* of the current image */
};

/* How the stored pixels map onto the upright image (EXIF orientation):
 * upright x runs along source y when transposed, and a source axis may
 * run backwards. */
struct rf__jpeg_orientation {
    bool transpose, reverse_x, reverse_y;
};

/* One image's plan, filled step by step. */
struct rf__jpeg_job {
    const uint8_t *data;
    size_t size;
    const struct rf__jpeg_options *opt;
    rf__crop_chooser choose;
    void *user;
    const struct rf__jpeg_target *target;
    struct rf__jpeg_orientation orient;
    struct rf__crop crop; /* upright image, source pixels */
    double box[4];        /* the crop in stored source pixels: x0 y0 x1 y1 */
    /* along stored x and y: what the box is resized to, and where the
     * output's part of that starts (rf__crop's window) */
    uint64_t resized[2], first[2];
    unsigned scale;            /* DCT scale M of M/8 */
    bool cmyk, inverted;       /* decoded as CMYK; Adobe's inverted values */
    uint32_t channels;         /* working channels: 1 or 3 */
    uint32_t rows_lo, rows_hi; /* decoded rows the resampler reads */
};

/* The decoder that libjpeg's callbacks are called for. */
static inline struct rf__jpeg_decoder *rf__jpeg_decoder_of(j_common_ptr cinfo)
{
    return (struct rf__jpeg_decoder *)cinfo->client_data;
}

/* Leaves the decode with a reason (printf-style); only valid while a step
 * runs inside jpeg.c's guarded(), whose setjmp it jumps back to. */
void rf__jpeg_raise(struct rf__jpeg_decoder *dec, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));

/* jpeg-header.c: reads the header, refuses what is over the limits
 * (precision, pixels, memory), finds the EXIF orientation. */
void rf__jpeg_read_header(struct rf__jpeg_decoder *dec,
                          struct rf__jpeg_job *job);

/* jpeg-crop.c: asks the caller for the crop of the upright image, finds
 * it in the stored one and picks the DCT scale. */
void rf__jpeg_choose_crop(struct rf__jpeg_decoder *dec,
                          struct rf__jpeg_job *job);

/* jpeg-crop.c, once libjpeg has started: plans both resize passes on the
 * decoded image and narrows the decode to the rows and columns they read
 * (job->rows_lo, rows_hi; jpeg_crop_scanline for the columns). */
void rf__jpeg_plan_axes(struct rf__jpeg_decoder *dec, struct rf__jpeg_job *job);

#endif /* RF_JPEG_DECODER_H */
