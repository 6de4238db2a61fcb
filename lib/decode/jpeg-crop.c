/*
 * jpeg-crop.c - which pixels a JPEG decode produces: the caller's crop of
 * the upright image found in the stored one, the smallest DCT scale that
 * still covers the output, the resize plan on the decoded image, and the
 * rows (jpeg_skip_scanlines) and columns (jpeg_crop_scanline) that plan
 * reads. With libjpeg-turbo's private header, the column filter also
 * stops the entropy decoder from storing the coefficients of MCUs outside
 * those columns. See jpeg-decoder.h.
 */
#include "config.h"

#include <math.h>

#include "common/assert.h"
#include "decode/jpeg-decoder.h"
#ifdef HAVE_JPEGINT_H
/* after jpeglib.h: the entropy decoder's struct, which
 * discard_unused_coefficients() wraps */
#include <jpegint.h>
#endif

/* ---- the crop and the scale ------------------------------------------ */

unsigned rf__jpeg_scale_for(double crop_w, double crop_h, uint32_t out_w,
                            uint32_t out_h)
{
    RF_ASSERT(out_w > 0 && out_h > 0); /* check_target() refused others */
    /* Only 1/8, 2/8, 4/8 and 8/8: libjpeg-turbo has SIMD inverse DCTs for
     * those alone, and its plain-C 3/8, 5/8, 6/8 and 7/8 ones are slower
     * than a SIMD 8/8 (measured: 10% more images/s on the train
     * transform at 224 with this rule). */
    for (unsigned m = 1; m < 8; m *= 2)
        if (crop_w * m / 8 >= out_w && crop_h * m / 8 >= out_h)
            return m;
    return 8;
}

/* An upright interval [upright[0], upright[1]) as stored pixels of an
 * axis of `size` pixels that may run backwards. */
static void stored_interval(const double upright[2], uint32_t size,
                            bool reverse, double *lo, double *hi)
{
    *lo = reverse ? size - upright[1] : upright[0];
    *hi = reverse ? size - upright[0] : upright[1];
}

/* The output's window [skip, skip + out) of an upright axis resized to
 * `resized`, as the start of the window along a stored axis that may
 * run backwards. */
static uint64_t stored_window(uint64_t resized, uint64_t skip, uint32_t out,
                              bool reverse)
{
    /* a window inside the resized axis (rf__transform_crop's) */
    if (skip > resized || out > resized - skip)
        return UINT64_MAX; /* refused by the plan */
    return reverse ? resized - skip - out : skip;
}

/* The crop's window along the stored axes: job->resized and job->first. */
static void stored_windows(struct rf__jpeg_job *job)
{
    const struct rf__crop *c = &job->crop;
    const struct rf__jpeg_orientation *o = &job->orient;
    const uint32_t out_w = job->target->out_width;
    const uint32_t out_h = job->target->out_height;
    const uint64_t up_resized[2] = {rf__crop_resized_width(c, out_w),
                                    rf__crop_resized_height(c, out_h)};
    const uint64_t up_skip[2] = {c->skip_x, c->skip_y};
    const uint32_t up_out[2] = {out_w, out_h};
    for (int axis = 0; axis < 2; axis++) {
        const int up = o->transpose ? 1 - axis : axis;
        const bool reverse = axis == 0 ? o->reverse_x : o->reverse_y;
        job->resized[axis] = up_resized[up];
        job->first[axis] =
            stored_window(up_resized[up], up_skip[up], up_out[up], reverse);
    }
}

static bool crop_is_sane(const struct rf__crop *c)
{
    return isfinite(c->x) && isfinite(c->y) && isfinite(c->width) &&
           isfinite(c->height) && c->width > 0 && c->height > 0;
}

void rf__jpeg_choose_crop(struct rf__jpeg_decoder *dec,
                          struct rf__jpeg_job *job)
{
    const j_decompress_ptr ci = &dec->cinfo;
    const struct rf__jpeg_orientation *o = &job->orient;
    const uint32_t w = o->transpose ? ci->image_height : ci->image_width;
    const uint32_t h = o->transpose ? ci->image_width : ci->image_height;
    struct rf__crop *c = &job->crop;
    *c = (struct rf__crop)RF_CROP_BOX(0, 0, w, h, false);
    if (job->choose)
        job->choose(job->user, w, h, c);
    if (!crop_is_sane(c))
        rf__jpeg_raise(dec, "empty crop box %g x %g at (%g, %g)", c->width,
                       c->height, c->x, c->y);
    const double ux[2] = {c->x, c->x + c->width};
    const double uy[2] = {c->y, c->y + c->height};
    stored_interval(o->transpose ? uy : ux, ci->image_width, o->reverse_x,
                    &job->box[0], &job->box[2]);
    stored_interval(o->transpose ? ux : uy, ci->image_height, o->reverse_y,
                    &job->box[1], &job->box[3]);
    stored_windows(job);
    const uint32_t out_w = job->target->out_width;
    const uint32_t out_h = job->target->out_height;
    const struct rf__crop shown = rf__crop_shown(c, out_w, out_h);
    job->scale =
        job->opt->full_scale
            ? 8
            : rf__jpeg_scale_for(shown.width, shown.height, out_w, out_h);
}

/* ---- only the pixels the resampler reads ----------------------------- */

/* The size in pixels of one block's IDCT output, of the smallest of them
 * and of a component's: named differently from libjpeg's jpeg7 API on
 * (JPEG_LIB_VERSION 70). libjpeg-turbo scales across and down alike. */
#if JPEG_LIB_VERSION >= 70
#define MIN_DCT_SCALED_SIZE(ci) ((ci)->min_DCT_h_scaled_size)
#define DCT_SCALED_SIZE(comp) ((comp)->DCT_h_scaled_size)
#else
#define MIN_DCT_SCALED_SIZE(ci) ((ci)->min_DCT_scaled_size)
#define DCT_SCALED_SIZE(comp) ((comp)->DCT_scaled_size)
#endif

/* A cropped decode treats the crop's edges as the image's, so the fancy
 * upsampling of subsampled chroma differs there from a full decode; two
 * more columns on each side keep every needed pixel identical to it. */
#define UPSAMPLING_MARGIN 2

#ifdef HAVE_JPEGINT_H
/* libjpeg's entropy decoder, told to discard the coefficients of an MCU
 * outside the crop's columns, as it does for skipped rows. */
static boolean decode_mcu_in_columns(j_decompress_ptr ci, JBLOCKROW *mcu)
{
    struct rf__jpeg_column_filter *f =
        &rf__jpeg_decoder_of((j_common_ptr)ci)->columns;
    const JDIMENSION col = f->next;
    const bool used = col >= f->first && col <= f->last;
    const boolean done = f->decode_mcu(ci, used ? mcu : NULL);
    if (done && ++f->next == ci->MCUs_per_row)
        f->next = 0;
    return done;
}

/*
 * A cropped decode still entropy-decodes every MCU of a row, as a
 * baseline stream has no way to step over one, and libjpeg-turbo stores
 * all their coefficients though it turns only the crop's columns into
 * pixels. Decoding the others with no place to store them (MCU_data
 * NULL, as jpeg_skip_scanlines() does for whole rows) gives the same
 * pixels for about 1.5% less decode time (README, "The ceiling").
 *
 * The wrapper counts MCUs, which libjpeg decodes in raster order, one
 * call each; a call that returns FALSE (a suspension, which a memory
 * source never asks for) decoded nothing and is not counted. Only
 * single-scan Huffman files, the case measured and tested: multi-scan
 * files decode into a whole-image buffer first. The columns mirror
 * jpeg_crop_scanline()'s own iMCU alignment (recomputed, not read from
 * libjpeg's master struct, whose layout changed in 3.0), and libjpeg
 * makes a new entropy decoder for every image, so nothing is undone.
 */
static void discard_unused_coefficients(struct rf__jpeg_decoder *dec,
                                        JDIMENSION x)
{
    j_decompress_ptr ci = &dec->cinfo;
    /* a progressive file always has several scans */
    if (ci->arith_code || jpeg_has_multiple_scans(ci))
        return;
    const bool one_component =
        ci->comps_in_scan == 1 && ci->num_components == 1;
    const JDIMENSION mcu_width =
        (JDIMENSION)MIN_DCT_SCALED_SIZE(ci) *
        (one_component ? 1 : (JDIMENSION)ci->max_h_samp_factor);
    dec->columns = (struct rf__jpeg_column_filter){
        .decode_mcu = ci->entropy->decode_mcu,
        .next = 0,
        .first = x / mcu_width,
        .last = (x + ci->output_width - 1) / mcu_width,
    };
    ci->entropy->decode_mcu = decode_mcu_in_columns;
}
#else
static void discard_unused_coefficients(struct rf__jpeg_decoder *dec,
                                        JDIMENSION x)
{
    (void)dec;
    (void)x;
}
#endif

/*
 * Whether jpeg_crop_scanline() gives the same pixels as a full decode.
 * At a DCT scale below 8/8 libjpeg may give a subsampled component a
 * larger IDCT, which does part of its upsampling (chroma of 4:2:0 comes
 * out at full size at 4/8). libjpeg-turbo 2.1's jpeg_crop_scanline()
 * sizes a component's cropped rows from the sampling factors alone, so
 * when such a component still needs upsampling (luma sampled 4x2 or 2x4
 * over 1x1 chroma) the upsampler reads columns nothing wrote: wrong
 * pixels, different from run to run. Those images are decoded at their
 * full width.
 */
static bool crop_scanline_is_exact(j_decompress_ptr ci)
{
    const int min = MIN_DCT_SCALED_SIZE(ci);
    for (int c = 0; c < ci->num_components; c++) {
        const jpeg_component_info *comp = &ci->comp_info[c];
        const int size = DCT_SCALED_SIZE(comp);
        const bool upsampled =
            comp->h_samp_factor * size != ci->max_h_samp_factor * min ||
            comp->v_samp_factor * size != ci->max_v_samp_factor * min;
        if (size != min && upsampled)
            return false;
    }
    return true;
}

/* Decodes the columns [lo, hi) and a margin only. libjpeg moves the left
 * edge down to an iMCU boundary and says where it put it. */
static void crop_columns(struct rf__jpeg_decoder *dec, uint32_t lo, uint32_t hi)
{
    j_decompress_ptr ci = &dec->cinfo;
    JDIMENSION x = lo > UPSAMPLING_MARGIN ? lo - UPSAMPLING_MARGIN : 0;
    const JDIMENSION end = hi + UPSAMPLING_MARGIN < ci->output_width
                               ? hi + UPSAMPLING_MARGIN
                               : ci->output_width;
    JDIMENSION width = end - x;
    if (width < ci->output_width && crop_scanline_is_exact(ci)) {
        jpeg_crop_scanline(ci, &x, &width);
        discard_unused_coefficients(dec, x);
    } else
        x = 0;
    rf__resample_axis_shift(&dec->resizer.horizontal, x);
}

/* The box scaled by M/8: decoded pixel i covers source pixels
 * [8i/M, 8(i+1)/M). */
void rf__jpeg_plan_axes(struct rf__jpeg_decoder *dec, struct rf__jpeg_job *job)
{
    j_decompress_ptr ci = &dec->cinfo;
    struct rf__resizer *rs = &dec->resizer;
    const bool t = job->orient.transpose;
    const uint32_t cols = t ? job->target->out_height : job->target->out_width;
    const uint32_t rows = t ? job->target->out_width : job->target->out_height;
    RF_ASSERT(cols > 0 && rows > 0);
    RF_ASSERT(job->scale >= 1 && job->scale <= 8);
    const double k = job->scale / 8.0;
    if (rf__resample_axis_plan_window(
            &rs->horizontal, ci->output_width, job->box[0] * k, job->box[2] * k,
            job->resized[0], job->first[0], cols) < 0 ||
        rf__resample_axis_plan_window(&rs->vertical, ci->output_height,
                                      job->box[1] * k, job->box[3] * k,
                                      job->resized[1], job->first[1], rows) < 0)
        rf__jpeg_raise(dec, "cannot resample the crop (out of memory?)");
    uint32_t x_lo, x_hi, y_lo, y_hi;
    rf__resample_axis_span(&rs->horizontal, &x_lo, &x_hi);
    rf__resample_axis_span(&rs->vertical, &y_lo, &y_hi);
    if (x_hi <= x_lo || y_hi <= y_lo)
        rf__jpeg_raise(
            dec, "the crop box %g x %g at (%g, %g) is outside the image",
            job->crop.width, job->crop.height, job->crop.x, job->crop.y);
    crop_columns(dec, x_lo, x_hi);
    rf__resample_axis_shift(&rs->vertical, y_lo);
    job->rows_lo = y_lo;
    job->rows_hi = y_hi;
}
