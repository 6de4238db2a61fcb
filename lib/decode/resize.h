/*
 * resize.h - the antialiased resampler behind JPEG decoding: PIL's
 * Image.resize(size, BILINEAR, box=...) (its ImagingResample), fed one
 * decoded row at a time.
 *
 * The filter is a triangle of support 1, widened by the scale when
 * shrinking; each output pixel's weights are normalised and rounded to
 * 22-bit fixed point, and the image is resampled horizontally into an
 * intermediate uint8 image first, then vertically, with PIL's rounding.
 * So at the same input the result is PIL's to the byte.
 *
 * The horizontal pass runs as each decoded row arrives; the vertical pass
 * writes each output row as soon as the rows it needs are in: straight
 * into an NHWC target (mirrored ones too: the horizontal pass writes its
 * pixels right to left), else through one row of scratch that is
 * scattered by address arithmetic (NCHW, transposed, grey replicated into
 * RGB), never through an image-sized copy. Transposed targets (EXIF
 * orientations 5 to 8) swap the order of the passes, as PIL's would be on the
 * upright image. All buffers belong to the resizer and only grow, so after the
 * first images no call allocates.
 *
 * On x86-64 both passes use SSE2, or AVX2 where the CPU has it (pmaddwd
 * on the weights split into 16-bit halves: still exact); elsewhere plain
 * C computes the same bytes.
 */
#ifndef RF_RESIZE_H
#define RF_RESIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringfeed.h"

/* The weights of one axis: output pixel o reads `count[o]` input pixels
 * from `first[o]` on, with weights `weights[o * ksize ...]` (sum 1 << 22);
 * no count is above `max_count` (at most ksize, mostly ksize - 1).
 * The same weights split for SIMD: `pairs_hi[o * kpairs + q]` holds the
 * high parts (weight >> 8) of taps 2q and 2q + 1 as two int16 (missing
 * taps are 0), `pairs_lo` the low parts (weight & 255). */
struct rf__resample_axis {
    uint32_t out_size, ksize, kpairs, max_count;
    int32_t *first, *count, *weights;
    int32_t *pairs_hi, *pairs_lo;
    size_t out_cap, weights_cap, pairs_cap; /* entries; only grow */
};

/* Where result pixel (i, j) goes: i counts the resampled rows and j the
 * columns, both in the decoded image's own orientation. With `transpose`,
 * rows become target columns (EXIF orientations 5 to 8); then `mirror_x`
 * and `mirror_y` reverse the target's x and y. The target is width x
 * height x channels bytes in `layout`; one working channel is replicated
 * when channels is 3. */
struct rf__resize_dest {
    uint8_t *dst;
    uint32_t width, height, channels;
    rf_layout layout;
    bool transpose, mirror_x, mirror_y;
    /* PIL resizes the upright image's y before its x (struct rf__crop's
     * y_first): the pass order, and so the rounding between the passes */
    bool y_first;
};

/* The SIMD code the passes run; every level computes the same bytes. */
enum rf__resize_simd {
    RF_RESIZE_SIMD_BEST = 0, /* as a limit: none */
    RF_RESIZE_SIMD_SCALAR,
    RF_RESIZE_SIMD_SSE2,
    RF_RESIZE_SIMD_AVX2,
};

/* The best level this build can run on this CPU. */
enum rf__resize_simd rf__resize_simd_available(void);

struct rf__resizer {
    /* The level the passes use: the best available, capped by
     * simd_limit when that is set (tests compare the levels). Chosen by
     * rf__resizer_begin. */
    enum rf__resize_simd simd, simd_limit;
    struct rf__resample_axis horizontal, vertical;
    uint32_t channels;    /* working channels of the rows pushed: 1 or 3 */
    uint32_t input_width; /* pixels of each row pushed */
    /* PIL resizes the upright image's x first, or its y where the crop
     * says so (y_first). When the first is the stored image's y, rows are
     * kept as pushed and resampled vertically first, so that the rounding
     * between the passes is PIL's too. */
    bool vertical_first;
    uint32_t rows_in;     /* rows pushed so far */
    uint32_t rows_needed; /* rows the vertical pass reads */
    uint32_t next_out;    /* next result row to write */
    /* rows_needed rows: resampled horizontally, or as pushed when
     * vertical_first */
    uint8_t *rows;
    size_t rows_cap;
    uint8_t *between; /* vertical_first: a row between the passes */
    size_t between_cap;
    uint8_t *result; /* one result row, before it is scattered */
    size_t result_cap;
    /* the destination as steps: target byte offset of result pixel (i, j)
     * channel c is origin + i * step_i + j * step_j + c * step_c */
    uint8_t *dst;
    ptrdiff_t origin, step_i, step_j, step_c;
    uint32_t dst_channels;
    /* the horizontal pass writes its pixels right to left, so that a
     * mirrored NHWC target takes result rows as they are, unscattered */
    bool reverse;
};

/*
 * PIL's precompute_coeffs: weights for resampling the input interval
 * [in0, in1) of an axis of in_size pixels (the box, possibly fractional,
 * rounded to float as PIL takes it) onto out_size pixels. Returns 0 or
 * -ENOMEM (or -EINVAL for a degenerate size).
 */
int rf__resample_axis_plan(struct rf__resample_axis *axis, uint32_t in_size,
                           double in0, double in1, uint32_t out_size);

/*
 * PIL's resize and then a crop, on one axis: the interval [in0, in1) is
 * planned onto `resized` pixels, as rf__resample_axis_plan() would, and
 * only the out_size of them from `first` on are kept. Each kept pixel
 * gets the very weights of the whole resize, so the result is PIL's
 * resize followed by its crop, byte for byte (a box around the kept part
 * alone would round some weights differently). rf__resample_axis_plan()
 * is the case resized == out_size, first 0. Returns 0, -ENOMEM, or
 * -EINVAL for a degenerate size or a window outside `resized`.
 */
int rf__resample_axis_plan_window(struct rf__resample_axis *axis,
                                  uint32_t in_size, double in0, double in1,
                                  uint64_t resized, uint64_t first,
                                  uint32_t out_size);

/*
 * For tests: an axis of out_size pixels with the given taps instead of
 * PIL's: output o reads count[o] (at most ksize) pixels from first[o] on
 * with weights[o * ksize ...], each in [0, 1 << 22] and summing to at
 * most 1 << 22; first[] must not decrease, as in every planned axis.
 * Returns 0 or -ENOMEM (-EINVAL for a count above ksize).
 */
int rf__resample_axis_custom(struct rf__resample_axis *axis, uint32_t out_size,
                             uint32_t ksize, const int32_t *first,
                             const int32_t *count, const int32_t *weights);

/* The input pixels [*lo, *hi) that some output pixel reads. */
void rf__resample_axis_span(const struct rf__resample_axis *axis, uint32_t *lo,
                            uint32_t *hi);

/* Moves every output's first input pixel by -delta: the input now starts
 * at pixel `delta` of the axis the weights were planned for. */
void rf__resample_axis_shift(struct rf__resample_axis *axis, uint32_t delta);

/* Frees the axis's arrays. */
void rf__resample_axis_free(struct rf__resample_axis *axis);

/*
 * Starts one image: both axes are already planned and shifted so that
 * input row 0 and column 0 are the first pushed; each row pushed has
 * input_width pixels of `channels` (1 or 3) bytes. Returns 0, -ENOMEM, or
 * -EINVAL when the axes do not fit the destination or the rows.
 */
int rf__resizer_begin(struct rf__resizer *rs, uint32_t channels,
                      uint32_t input_width, const struct rf__resize_dest *dest);

/* Takes the next input row (the vertical axis's input rows 0, 1, ... in
 * order, each starting at the horizontal axis's input column 0) and writes
 * every result row that is now complete. */
void rf__resizer_push_row(struct rf__resizer *rs, const uint8_t *row);

/* Bytes past the end of the last row that rf__resizer_push_rows() may
 * read: its SIMD loads run over the row's end, into taps of weight 0, so
 * their values never matter, but they must be readable. */
#define RF_RESIZE_ROW_SLACK 32

/* rf__resizer_push_row() of `count` rows `stride` bytes apart; faster,
 * as the horizontal pass takes two rows at a time. The buffer must go on
 * for RF_RESIZE_ROW_SLACK bytes after the last row. */
void rf__resizer_push_rows(struct rf__resizer *rs, const uint8_t *rows,
                           unsigned count, size_t stride);

/* True once every result row is written. */
bool rf__resizer_done(const struct rf__resizer *rs);

/* Frees the resizer's buffers (the struct itself is the caller's). */
void rf__resizer_free(struct rf__resizer *rs);

#endif /* RF_RESIZE_H */
