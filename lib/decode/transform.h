/*
 * transform.h - where in the source image a sample's pixels come from:
 * the crop box and flip of the `train` transform (torchvision's
 * RandomResizedCrop + RandomHorizontalFlip, exactly its algorithm), of
 * `eval` (resize of the short side + centre crop) and of `none`.
 *
 * Every random choice comes from a counter-based generator keyed on
 * (seed, epoch, sample index), never from the producer: the same sample
 * gets the same crop whatever the number of producers, and a resumed run
 * repeats it. Pure functions; no state, no allocation.
 */
#ifndef RF_TRANSFORM_H
#define RF_TRANSFORM_H

#include <stdbool.h>
#include <stdint.h>

#include "ringfeed.h"

/* A box of the source image, in source pixels, possibly fractional (as
 * PIL's resize(box=...) takes it), and whether to mirror the result
 * horizontally. With resized_width 0 (train, none) the box is resized
 * to the output size. Otherwise (eval: torchvision's Resize then
 * CenterCrop, which PIL does as a resize of the whole image and then a
 * crop) the box is resized to resized_width x resized_height and the
 * output is the part of that from (skip_x, skip_y) on. Zero-filled
 * initialisers (RF_CROP_BOX) are plain boxes. */
struct rf__crop {
    double x, y, width, height;
    bool flip;
    /* 64 bits: Resize(65536) of a 1-pixel-wide PNG 70000 high is 4.6e9 */
    uint64_t resized_width, resized_height, skip_x, skip_y;
    /* The box is resized along y first, then x, as Pillow 13 does where
     * the height loses more than twice as many pixels as the width (eval
     * with RF_PARAM_PILLOW 13 or more); x first otherwise, as Pillow 12
     * and older always do. Each pass rounds to 8 bits, so the order
     * moves some pixels by 1. */
    bool y_first;
};

/* Whether Pillow 13 resizes a width x height image to resized_w x
 * resized_h along y first (its Resample.c): when the height loses more
 * than twice as many pixels as the width. */
bool rf__crop_pillow13_y_first(uint32_t width, uint32_t height,
                               uint64_t resized_w, uint64_t resized_h);

/* A plain box (no window), as an initialiser: RF_CROP_BOX(x, y, w, h, flip). */
#define RF_CROP_BOX(bx, by, bw, bh, bflip)                                     \
    {                                                                          \
        .x = (bx), .y = (by), .width = (bw), .height = (bh), .flip = (bflip)   \
    }

/* The width and height the box is resized to before the output's part
 * is cut out: out_w x out_h for a plain box. */
uint64_t rf__crop_resized_width(const struct rf__crop *c, uint32_t out_w);
uint64_t rf__crop_resized_height(const struct rf__crop *c, uint32_t out_h);

/* The part of the source image an out_w x out_h output shows, as a plain
 * box: the box itself, or the window's share of it. For choosing a DCT
 * scale and for the rows a decode must reach. */
struct rf__crop rf__crop_shown(const struct rf__crop *c, uint32_t out_w,
                               uint32_t out_h);

struct rf__transform_spec {
    /* train: RandomResizedCrop(scale=(scale_min, scale_max),
     * ratio=(ratio_min, ratio_max)), then a flip with probability flip_p */
    double scale_min, scale_max, ratio_min, ratio_max, flip_p;
    rf_transform kind;
    uint32_t out_width, out_height;
    /* eval: the short side is resized to `resize`, then the centre
     * out_width x out_height is cut out, in the pass order of Pillow
     * release `pillow` (RF_PARAM_PILLOW) */
    uint32_t resize, pillow;
};

/* Fills *t from the parameters (RF_PARAM_TRANSFORM, HEIGHT, WIDTH,
 * RESIZE, ...). */
void rf__transform_from_params(struct rf__transform_spec *t,
                               const int64_t *params);

/* The crop of sample `index` in epoch `epoch` for an image of width x
 * height pixels (after EXIF orientation, when applied). For `none` the
 * whole image. Deterministic in (seed, epoch, index). */
void rf__transform_crop(const struct rf__transform_spec *t, uint64_t seed,
                        uint64_t epoch, uint64_t index, uint32_t width,
                        uint32_t height, struct rf__crop *out);

/* What rf__transform_crop() keys a sample's crop on, for a decoder's crop
 * chooser (decode/jpeg.h's rf__crop_chooser). */
struct rf__crop_key {
    const struct rf__transform_spec *spec;
    uint64_t seed, epoch, index;
};

/* rf__transform_crop() as an rf__crop_chooser: key is a struct
 * rf__crop_key. The library's decoder and bench-decode both choose crops
 * through it, so that the bench crops exactly as the producers do. */
void rf__transform_choose_crop(void *key, uint32_t width, uint32_t height,
                               struct rf__crop *out);

#endif /* RF_TRANSFORM_H */
