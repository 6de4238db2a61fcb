/*
 * image-resize.c - a whole decoded image (PNG, WebP; image.h) into its
 * place in the slot: the transform's crop box resized by the resampler
 * (resize.h, PIL's antialiased bilinear to the byte) and mirrored when the
 * crop flips. That is torchvision's RandomResizedCrop, Resize +
 * CenterCrop or nothing on a PIL image: im.convert("RGB").resize(size,
 * BILINEAR, box) then FLIP_LEFT_RIGHT. Only the rows and columns the
 * resampler reads are pushed, straight from the decoder's buffer.
 */
#include "config.h"

#include <errno.h>
#include <math.h>

#include "common/internal.h"
#include "decode/image-resize.h"

/* The resampler's SIMD loads read past a row into the image's slack. */
_Static_assert(RF_IMAGE_SLACK >= RF_RESIZE_ROW_SLACK,
               "decoded images keep the slack the resampler reads");

static bool crop_is_sane(const struct rf__crop *c)
{
    return isfinite(c->x) && isfinite(c->y) && isfinite(c->width) &&
           isfinite(c->height) && c->width > 0 && c->height > 0;
}

/* PIL's weights for the box on both axes, shifted so that the first
 * pixel either reads is 0; [*x_lo, *x_hi) x [*y_lo, *y_hi) is what they
 * read. Returns 0 or -1 with the reason. */
static int plan_axes(struct rf__resizer *rs, const struct rf__image *im,
                     const struct rf__crop *crop, uint32_t out_w,
                     uint32_t out_h, uint32_t span[4], char *err,
                     size_t err_len)
{
    if (rf__resample_axis_plan_window(
            &rs->horizontal, im->width, crop->x, crop->x + crop->width,
            rf__crop_resized_width(crop, out_w), crop->skip_x, out_w) < 0 ||
        rf__resample_axis_plan_window(
            &rs->vertical, im->height, crop->y, crop->y + crop->height,
            rf__crop_resized_height(crop, out_h), crop->skip_y, out_h) < 0) {
        rf__format(err, err_len, "cannot resample the crop (out of memory?)");
        return -1;
    }
    rf__resample_axis_span(&rs->horizontal, &span[0], &span[2]);
    rf__resample_axis_span(&rs->vertical, &span[1], &span[3]);
    if (span[2] <= span[0] || span[3] <= span[1]) {
        rf__format(err, err_len,
                   "the crop box %g x %g at (%g, %g) is outside the %u x %u "
                   "image",
                   crop->width, crop->height, crop->x, crop->y, im->width,
                   im->height);
        return -1;
    }
    rf__resample_axis_shift(&rs->horizontal, span[0]);
    rf__resample_axis_shift(&rs->vertical, span[1]);
    return 0;
}

int rf__image_resize_into(struct rf__resizer *rs, const struct rf__image *im,
                          const struct rf__crop *crop,
                          const struct rf__jpeg_target *target, char *err,
                          size_t err_len)
{
    if (!crop_is_sane(crop)) {
        rf__format(err, err_len, "empty crop box %g x %g at (%g, %g)",
                   crop->width, crop->height, crop->x, crop->y);
        return -1;
    }
    uint32_t span[4]; /* x_lo, y_lo, x_hi, y_hi */
    if (plan_axes(rs, im, crop, target->out_width, target->out_height, span,
                  err, err_len) < 0)
        return -1;
    struct rf__resize_dest dest = rf__jpeg_target_dest(target);
    dest.mirror_x = crop->flip;
    dest.y_first = crop->y_first;
    const int rc =
        rf__resizer_begin(rs, im->channels, span[2] - span[0], &dest);
    if (rc < 0) {
        rf__format(err, err_len, "%s",
                   rc == -ENOMEM
                       ? "out of memory for the resize buffers"
                       : "internal error: the resizer refused its target");
        return -1;
    }
    const uint8_t *first = im->pixels + (size_t)span[1] * im->stride +
                           (size_t)span[0] * im->channels;
    rf__resizer_push_rows(rs, first, span[3] - span[1], im->stride);
    if (!rf__resizer_done(rs)) {
        rf__format(err, err_len,
                   "internal error: the resizer wrote only part of the "
                   "sample");
        return -1;
    }
    return 0;
}
