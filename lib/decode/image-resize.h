/*
 * image-resize.h - a whole decoded image (image.h) cropped, resized and
 * flipped into its place in the slot, with PIL's pixels; see
 * image-resize.c.
 */
#ifndef RF_IMAGE_RESIZE_H
#define RF_IMAGE_RESIZE_H

#include <stddef.h>

#include "decode/image.h"
#include "decode/jpeg.h" /* struct rf__jpeg_target: where a sample goes */
#include "decode/resize.h"
#include "decode/transform.h"

/*
 * Resizes the crop box of `im` (in its pixels, possibly fractional) to
 * the target's size, mirrored when crop->flip, into target->dst, through
 * the caller's resizer (its buffers are reused). A one-channel image into
 * a three-channel target is replicated (PIL's convert("RGB") of L).
 * Returns 0, or -1 with the reason in err (an empty box, one outside the
 * image, out of memory).
 */
int rf__image_resize_into(struct rf__resizer *rs, const struct rf__image *im,
                          const struct rf__crop *crop,
                          const struct rf__jpeg_target *target, char *err,
                          size_t err_len);

#endif /* RF_IMAGE_RESIZE_H */
