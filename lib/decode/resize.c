/*
 * resize.c - PIL's bilinear resampling (ImagingResample), streaming: see
 * resize.h. The arithmetic follows PIL step by step (float box, double
 * weights normalised per output pixel, 22-bit fixed point, horizontal
 * pass rounded to uint8 before the vertical pass) because "the same
 * pixels as PIL" is what lets a model trained on these batches be
 * evaluated with torchvision, and the other way round.
 *
 * This file holds the plan (the weights of each axis), the destination's
 * steps, the plain C passes and the dispatch: which of the SIMD kernels
 * of resize-simd.c each pass runs, at the level rf__resizer_begin() chose
 * for the CPU. Every level writes the same bytes.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "decode/resize-simd.h"
#include "decode/resize.h"

/* Sizes beyond any JPEG (65535) are refused before a double becomes an
 * int, which would be undefined behaviour. */
#define MAX_AXIS 1000000

static double triangle(double x)
{
    if (x < 0.0)
        x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* ceil() of a positive double below MAX_AXIS, without libm. */
static uint32_t ceil_u32(double x)
{
    const uint32_t n = (uint32_t)x;
    return n + (x > (double)n);
}

/* Grows *buf to at least `want` elements of `size` bytes. */
static int grow(void **buf, size_t *cap, size_t want, size_t size)
{
    if (want <= *cap)
        return 0;
    void *p = realloc(*buf, want * size);
    if (!p)
        return -ENOMEM;
    *buf = p;
    *cap = want;
    return 0;
}

static int axis_reserve(struct rf__resample_axis *axis, uint32_t out_size,
                        uint32_t ksize)
{
    /* first and count share out_cap: grow both before recording it */
    size_t first_cap = axis->out_cap, count_cap = axis->out_cap;
    if (grow((void **)&axis->first, &first_cap, out_size, sizeof(int32_t)) ||
        grow((void **)&axis->count, &count_cap, out_size, sizeof(int32_t)))
        return -ENOMEM;
    axis->out_cap = first_cap;
    const size_t pairs = (size_t)out_size * ((ksize + 1) / 2);
    size_t hi_cap = axis->pairs_cap, lo_cap = axis->pairs_cap;
    if (grow((void **)&axis->pairs_hi, &hi_cap, pairs, sizeof(int32_t)) ||
        grow((void **)&axis->pairs_lo, &lo_cap, pairs, sizeof(int32_t)))
        return -ENOMEM;
    axis->pairs_cap = hi_cap;
    return grow((void **)&axis->weights, &axis->weights_cap,
                (size_t)out_size * ksize, sizeof(int32_t));
}

/* The clamp of PIL's (int)(x + 0.5) to [0, limit]; C's conversion
 * truncates toward zero, as PIL's does, before the clamp. */
static int32_t round_clamped(double x, uint32_t limit)
{
    if (!(x > 0.0))
        return 0;
    if (x >= (double)limit)
        return (int32_t)limit;
    return (int32_t)x;
}

/* One output pixel's taps: PIL computes the double weights, normalises
 * them by their sum, then rounds each to fixed point. */
static void plan_pixel(struct rf__resample_axis *axis, uint32_t o,
                       uint32_t in_size, double center, double support,
                       double filterscale)
{
    const double ss = 1.0 / filterscale;
    const int32_t xmin = round_clamped(center - support + 0.5, in_size);
    const int32_t xmax = round_clamped(center + support + 0.5, in_size);
    const int32_t n = xmax > xmin ? xmax - xmin : 0;
    int32_t *k = axis->weights + (size_t)o * axis->ksize;
    double ww = 0.0;
    for (int32_t x = 0; x < n; x++)
        ww += triangle((x + xmin - center + 0.5) * ss);
    for (int32_t x = 0; x < n; x++) {
        double w = triangle((x + xmin - center + 0.5) * ss);
        if (ww != 0.0)
            w /= ww;
        k[x] = (int32_t)(0.5 + w * (1 << RF_RESIZE_PRECISION_BITS));
    }
    axis->first[o] = xmin;
    axis->count[o] = n;
}

/* Two 16-bit halves in one int32, low half first (memory order). */
static int32_t two_int16(int32_t first, int32_t second)
{
    return (int32_t)((uint32_t)first | (uint32_t)second << 16);
}

/* The weights of output o split for pmaddwd, which multiplies int16 by
 * int16 into exact int32 sums of pairs: a 22-bit weight k is hi * 256 +
 * lo with hi <= 16384 and lo < 256, and sum(p * k) = (sum(p * hi) << 8)
 * + sum(p * lo) exactly, with no intermediate above 2^31. */
static void split_pixel(struct rf__resample_axis *axis, uint32_t o)
{
    const int32_t *k = axis->weights + (size_t)o * axis->ksize;
    const int32_t n = axis->count[o];
    int32_t *hi = axis->pairs_hi + (size_t)o * axis->kpairs;
    int32_t *lo = axis->pairs_lo + (size_t)o * axis->kpairs;
    for (uint32_t q = 0; q < axis->kpairs; q++) {
        const int32_t t = 2 * (int32_t)q;
        const int32_t k0 = t < n ? k[t] : 0, k1 = t + 1 < n ? k[t + 1] : 0;
        hi[q] = two_int16(k0 >> 8, k1 >> 8);
        lo[q] = two_int16(k0 & 255, k1 & 255);
    }
}

/* Splits every output's weights for the SIMD passes and records the
 * widest window, once the taps are in. */
static void split_all(struct rf__resample_axis *axis)
{
    axis->max_count = 0;
    for (uint32_t o = 0; o < axis->out_size; o++) {
        split_pixel(axis, o);
        if ((uint32_t)axis->count[o] > axis->max_count)
            axis->max_count = (uint32_t)axis->count[o];
    }
}

int rf__resample_axis_plan(struct rf__resample_axis *axis, uint32_t in_size,
                           double in0, double in1, uint32_t out_size)
{
    return rf__resample_axis_plan_window(axis, in_size, in0, in1, out_size, 0,
                                         out_size);
}

int rf__resample_axis_plan_window(struct rf__resample_axis *axis,
                                  uint32_t in_size, double in0, double in1,
                                  uint64_t resized, uint64_t first,
                                  uint32_t out_size)
{
    /* PIL takes the box as four C floats */
    const float in0f = (float)in0, in1f = (float)in1;
    /* `resized` may pass MAX_AXIS, even 2^32 (a sliver of an image
     * enlarged): only out_size pixels are planned, each from a centre
     * inside the box; below 2^53, it and first + o are exact doubles. */
    if (out_size == 0 || out_size > MAX_AXIS || in_size > MAX_AXIS ||
        resized > (UINT64_C(1) << 53) || first > resized ||
        out_size > resized - first || !(in1f > in0f) || !(in0f > -MAX_AXIS) ||
        !(in1f < MAX_AXIS))
        return -EINVAL;
    const double scale = (double)(in1f - in0f) / (double)resized;
    const double filterscale = scale < 1.0 ? 1.0 : scale;
    const double support = 1.0 * filterscale;
    const uint32_t ksize = ceil_u32(support) * 2 + 1;
    if (axis_reserve(axis, out_size, ksize) < 0)
        return -ENOMEM;
    axis->out_size = out_size;
    axis->ksize = ksize;
    axis->kpairs = (ksize + 1) / 2;
    for (uint32_t o = 0; o < out_size; o++)
        plan_pixel(axis, o, in_size, in0f + ((double)(first + o) + 0.5) * scale,
                   support, filterscale);
    split_all(axis);
    return 0;
}

int rf__resample_axis_custom(struct rf__resample_axis *axis, uint32_t out_size,
                             uint32_t ksize, const int32_t *first,
                             const int32_t *count, const int32_t *weights)
{
    if (out_size == 0 || ksize == 0)
        return -EINVAL;
    for (uint32_t o = 0; o < out_size; o++)
        if (count[o] < 0 || (uint32_t)count[o] > ksize)
            return -EINVAL;
    if (axis_reserve(axis, out_size, ksize) < 0)
        return -ENOMEM;
    axis->out_size = out_size;
    axis->ksize = ksize;
    axis->kpairs = (ksize + 1) / 2;
    memcpy(axis->first, first, out_size * sizeof(*first));
    memcpy(axis->count, count, out_size * sizeof(*count));
    memcpy(axis->weights, weights, (size_t)out_size * ksize * sizeof(*weights));
    split_all(axis);
    return 0;
}

void rf__resample_axis_span(const struct rf__resample_axis *axis, uint32_t *lo,
                            uint32_t *hi)
{
    uint32_t a = UINT32_MAX, b = 0;
    for (uint32_t o = 0; o < axis->out_size; o++) {
        if (axis->count[o] == 0)
            continue;
        const uint32_t first = (uint32_t)axis->first[o];
        const uint32_t end = first + (uint32_t)axis->count[o];
        a = first < a ? first : a;
        b = end > b ? end : b;
    }
    *lo = a < b ? a : 0;
    *hi = a < b ? b : 0;
}

void rf__resample_axis_shift(struct rf__resample_axis *axis, uint32_t delta)
{
    /* Outputs that read nothing (a box leaving the image) move too,
     * stopping at 0: the vertical pass writes a row once its first input
     * row is in, and a box past the bottom edge would otherwise wait for
     * a row that never comes. first[] stays non-decreasing. */
    for (uint32_t o = 0; o < axis->out_size; o++) {
        const int32_t d = (int32_t)delta;
        /* the new start is at or before every pixel that is read */
        RF_ASSERT(axis->count[o] == 0 || axis->first[o] >= d);
        if (axis->count[o] > 0 || axis->first[o] >= d)
            axis->first[o] -= d;
        else
            axis->first[o] = 0;
    }
}

void rf__resample_axis_free(struct rf__resample_axis *axis)
{
    free(axis->first);
    free(axis->count);
    free(axis->weights);
    free(axis->pairs_hi);
    free(axis->pairs_lo);
    memset(axis, 0, sizeof(*axis));
}

/* ---- destination ------------------------------------------------------ */

/* Steps of the target's x and y axes, mirrored or not. */
static void dest_axes(const struct rf__resize_dest *d, ptrdiff_t *x_step,
                      ptrdiff_t *y_step, ptrdiff_t *origin)
{
    const ptrdiff_t pixel = d->layout == RF_LAYOUT_NHWC ? d->channels : 1;
    const ptrdiff_t row = (ptrdiff_t)d->width * pixel;
    *x_step = d->mirror_x ? -pixel : pixel;
    *y_step = d->mirror_y ? -row : row;
    *origin = (d->mirror_x ? (ptrdiff_t)(d->width - 1) * pixel : 0) +
              (d->mirror_y ? (ptrdiff_t)(d->height - 1) * row : 0);
}

static int dest_steps(struct rf__resizer *rs, const struct rf__resize_dest *d)
{
    const uint32_t cols = rs->horizontal.out_size;
    const uint32_t rows = rs->vertical.out_size;
    if (d->transpose ? cols != d->height || rows != d->width
                     : cols != d->width || rows != d->height)
        return -EINVAL;
    if (d->channels != rs->channels && !(rs->channels == 1 && d->channels == 3))
        return -EINVAL;
    ptrdiff_t x_step, y_step;
    dest_axes(d, &x_step, &y_step, &rs->origin);
    rs->step_i = d->transpose ? x_step : y_step;
    rs->step_j = d->transpose ? y_step : x_step;
    rs->step_c = d->layout == RF_LAYOUT_NHWC
                     ? 1
                     : (ptrdiff_t)d->width * (ptrdiff_t)d->height;
    rs->dst = d->dst;
    rs->dst_channels = d->channels;
    /* a mirrored NHWC row is written directly, by a mirrored pass */
    rs->reverse = d->channels == rs->channels && rs->step_c == 1 &&
                  rs->step_j == -(ptrdiff_t)rs->channels;
    return 0;
}

/* Every buffer of one image, grown as needed. */
static int reserve_rows(struct rf__resizer *rs)
{
    const size_t c = rs->channels;
    const size_t out_row = (size_t)rs->horizontal.out_size * c;
    const size_t in_row = (size_t)rs->input_width * c;
    const size_t kept = rs->vertical_first ? in_row : out_row;
    int rc = grow((void **)&rs->rows, &rs->rows_cap, rs->rows_needed * kept, 1);
    if (rc == 0 && rs->vertical_first)
        rc = grow((void **)&rs->between, &rs->between_cap, in_row, 1);
    if (rc == 0)
        rc = grow((void **)&rs->result, &rs->result_cap, out_row, 1);
    return rc;
}

/* Every input column the horizontal pass reads must be in the rows. */
static bool axis_fits(const struct rf__resample_axis *axis, uint32_t size)
{
    uint32_t lo, hi;
    rf__resample_axis_span(axis, &lo, &hi);
    return hi <= size;
}

int rf__resizer_begin(struct rf__resizer *rs, uint32_t channels,
                      uint32_t input_width, const struct rf__resize_dest *dest)
{
    if (channels != 1 && channels != 3)
        return -EINVAL;
    /* both axes planned: each writes at least one pixel */
    RF_ASSERT(rs->horizontal.out_size > 0 && rs->vertical.out_size > 0);
    rs->simd = rf__resize_simd_available();
    if (rs->simd_limit != RF_RESIZE_SIMD_BEST && rs->simd > rs->simd_limit)
        rs->simd = rs->simd_limit;
    rs->channels = channels;
    rs->input_width = input_width;
    /* upright y first is stored x first when the orientation transposes */
    rs->vertical_first = dest->transpose != dest->y_first;
    int rc = dest_steps(rs, dest);
    if (rc < 0)
        return rc;
    if (!axis_fits(&rs->horizontal, input_width))
        return -EINVAL;
    uint32_t lo;
    rf__resample_axis_span(&rs->vertical, &lo, &rs->rows_needed);
    rs->rows_in = 0;
    rs->next_out = 0;
    return reserve_rows(rs);
}

/* ---- the two passes ----------------------------------------------------- */
/* The horizontal pass of one RGB row of `width` pixels; output pixel o
 * goes to out + o * step (step -3 mirrors the row). Everything the loop
 * reads is copied into restrict locals first: the uint8_t stores could
 * alias any of it, and reloading it every tap was slow. */
static void horizontal_rgb(const struct rf__resample_axis *axis,
                           const uint8_t *restrict in, uint8_t *restrict out,
                           ptrdiff_t step)
{
    const uint32_t n = axis->out_size, ksize = axis->ksize;
    const int32_t *restrict first = axis->first;
    const int32_t *restrict count = axis->count;
    for (uint32_t o = 0; o < n; o++, out += step)
        rf__resize_rgb_pixel(in + (size_t)first[o] * 3,
                             axis->weights + (size_t)o * ksize, count[o], out);
}

static void horizontal_grey(const struct rf__resample_axis *axis,
                            const uint8_t *restrict in, uint8_t *restrict out,
                            ptrdiff_t step)
{
    const uint32_t n = axis->out_size, ksize = axis->ksize;
    const int32_t *restrict first = axis->first;
    const int32_t *restrict count = axis->count;
    const int32_t *restrict weights = axis->weights;
    for (uint32_t o = 0; o < n; o++) {
        const int32_t *restrict k = weights + (size_t)o * ksize;
        const uint8_t *restrict p = in + first[o];
        int32_t v = RF_RESIZE_ROUNDING_HALF;
        for (int32_t t = 0; t < count[o]; t++)
            v += p[t] * k[t];
        out[(ptrdiff_t)o * step] = rf__resize_clip8(v);
    }
}

/* Where output pixel 0 of a horizontal pass into row `out` goes, and
 * the step to the next: right to left when the pass mirrors the row. */
static uint8_t *first_pixel(const struct rf__resizer *rs, uint8_t *out,
                            ptrdiff_t *step)
{
    const ptrdiff_t c = rs->channels;
    *step = rs->reverse ? -c : c;
    return rs->reverse ? out + (ptrdiff_t)(rs->horizontal.out_size - 1) * c
                       : out;
}

static void horizontal(const struct rf__resizer *rs, const uint8_t *in,
                       uint8_t *out)
{
    ptrdiff_t step;
    out = first_pixel(rs, out, &step);
    if (rs->channels == 1)
        horizontal_grey(&rs->horizontal, in, out, step);
#ifdef RF_RESIZE_SSE2
    else if (rs->simd >= RF_RESIZE_SIMD_SSE2)
        rf__resize_horizontal_rgb_sse2(&rs->horizontal, rs->input_width, in,
                                       out, step);
#endif
    else
        horizontal_rgb(&rs->horizontal, in, out, step);
}

/* Result row i of the vertical pass over the kept rows of n bytes each:
 * 32 bytes at a time with AVX2, then 16 with SSE2, the rest in blocks of
 * 8 that keep their sums in registers across the taps. */
static void vertical(const struct rf__resizer *rs, uint32_t i, size_t n,
                     uint8_t *restrict out)
{
    const struct rf__resample_axis *axis = &rs->vertical;
    const int32_t *restrict k = axis->weights + (size_t)i * axis->ksize;
    const int32_t taps = axis->count[i];
    const uint8_t *restrict rows =
        rs->rows + (taps > 0 ? (size_t)axis->first[i] * n : 0);
    size_t x = 0;
#ifdef RF_RESIZE_SSE2
    const int32_t *hi = axis->pairs_hi + (size_t)i * axis->kpairs;
    const int32_t *lo = axis->pairs_lo + (size_t)i * axis->kpairs;
#ifdef RF_RESIZE_AVX2
    if (rs->simd >= RF_RESIZE_SIMD_AVX2)
        x = rf__resize_vertical_avx2(rows, n, hi, lo, taps, out);
#endif
    if (rs->simd >= RF_RESIZE_SIMD_SSE2)
        x = rf__resize_vertical_sse2(rows, n, x, hi, lo, taps, out);
#endif
    for (; x + 8 <= n; x += 8) {
        int32_t sum[8];
        for (int j = 0; j < 8; j++)
            sum[j] = RF_RESIZE_ROUNDING_HALF;
        for (int32_t t = 0; t < taps; t++)
            for (int j = 0; j < 8; j++)
                sum[j] += rows[(size_t)t * n + x + j] * k[t];
        for (int j = 0; j < 8; j++)
            out[x + j] = rf__resize_clip8(sum[j]);
    }
    for (; x < n; x++) {
        int32_t sum = RF_RESIZE_ROUNDING_HALF;
        for (int32_t t = 0; t < taps; t++)
            sum += rows[(size_t)t * n + x] * k[t];
        out[x] = rf__resize_clip8(sum);
    }
}

/* Scatters result row i through the destination's steps (mirrored,
 * planar or replicated targets). */
static void store_row(const struct rf__resizer *rs, uint32_t i)
{
    uint8_t *restrict base = rs->dst + rs->origin + (ptrdiff_t)i * rs->step_i;
    const uint8_t *restrict from = rs->result;
    const uint32_t cols = rs->horizontal.out_size;
    const uint32_t in_channels = rs->channels;
    const ptrdiff_t sj = rs->step_j, sc = rs->step_c;
    for (uint32_t j = 0; j < cols; j++, base += sj) {
        for (uint32_t c = 0; c < rs->dst_channels; c++)
            /* one working channel is replicated into three */
            base[(ptrdiff_t)c * sc] = from[in_channels == 1 ? j : 3 * j + c];
    }
}

/* Whether result rows can be written into the target as they are (an
 * NHWC target of the working channels, mirrored by the horizontal pass if
 * need be) rather than through the scratch row and store_row(). */
static bool writes_direct(const struct rf__resizer *rs)
{
    return rs->dst_channels == rs->channels && rs->step_c == 1 &&
           (rs->step_j == (ptrdiff_t)rs->channels || rs->reverse);
}

/* Where result row i goes when writes_direct(). */
static uint8_t *target_row(const struct rf__resizer *rs, uint32_t i)
{
    ptrdiff_t at = rs->origin + (ptrdiff_t)i * rs->step_i;
    if (rs->reverse) /* the row's leftmost pixel is its last */
        at += (ptrdiff_t)(rs->horizontal.out_size - 1) * rs->step_j;
    return rs->dst + at;
}

static void write_result_row(struct rf__resizer *rs, uint32_t i)
{
    const size_t c = rs->channels;
    const bool direct = writes_direct(rs);
    uint8_t *out = direct ? target_row(rs, i) : rs->result;
    if (rs->vertical_first) {
        vertical(rs, i, (size_t)rs->input_width * c, rs->between);
        horizontal(rs, rs->between, out);
    } else {
        vertical(rs, i, (size_t)rs->horizontal.out_size * c, out);
    }
    if (!direct)
        store_row(rs, i);
}

/* Writes every result row whose input rows are all in. */
static void write_ready_rows(struct rf__resizer *rs)
{
    const struct rf__resample_axis *v = &rs->vertical;
    while (rs->next_out < v->out_size &&
           (uint32_t)(v->first[rs->next_out] + v->count[rs->next_out]) <=
               rs->rows_in)
        write_result_row(rs, rs->next_out++);
}

void rf__resizer_push_row(struct rf__resizer *rs, const uint8_t *row)
{
    if (rs->rows_in >= rs->rows_needed)
        return;
    const size_t c = rs->channels;
    if (rs->vertical_first) {
        const size_t n = (size_t)rs->input_width * c;
        memcpy(rs->rows + (size_t)rs->rows_in * n, row, n);
    } else {
        const size_t n = (size_t)rs->horizontal.out_size * c;
        horizontal(rs, row, rs->rows + (size_t)rs->rows_in * n);
    }
    rs->rows_in++;
    write_ready_rows(rs);
}

void rf__resizer_push_rows(struct rf__resizer *rs, const uint8_t *rows,
                           unsigned count, size_t stride)
{
    unsigned r = 0;
#ifdef RF_RESIZE_SSE2
    const size_t n = (size_t)rs->horizontal.out_size * 3;
    for (; r + 1 < count && rs->simd >= RF_RESIZE_SIMD_SSE2 &&
           rs->channels == 3 && !rs->vertical_first &&
           rs->rows_in + 1 < rs->rows_needed;
         r += 2) {
        ptrdiff_t step;
        uint8_t *out =
            first_pixel(rs, rs->rows + (size_t)rs->rows_in * n, &step);
        const uint8_t *in0 = rows + r * stride, *in1 = in0 + stride;
#ifdef RF_RESIZE_AVX2
        if (rs->simd >= RF_RESIZE_SIMD_AVX2)
            rf__resize_horizontal_rgb2_avx2(&rs->horizontal, rs->input_width,
                                            in0, in1, out, out + n, step);
        else
#endif
            rf__resize_horizontal_rgb2_sse2(&rs->horizontal, rs->input_width,
                                            in0, in1, out, out + n, step);
        rs->rows_in += 2;
        write_ready_rows(rs);
    }
#endif
    for (; r < count; r++)
        rf__resizer_push_row(rs, rows + r * stride);
}

bool rf__resizer_done(const struct rf__resizer *rs)
{
    return rs->next_out >= rs->vertical.out_size;
}

void rf__resizer_free(struct rf__resizer *rs)
{
    rf__resample_axis_free(&rs->horizontal);
    rf__resample_axis_free(&rs->vertical);
    free(rs->rows);
    free(rs->between);
    free(rs->result);
    memset(rs, 0, sizeof(*rs));
}
