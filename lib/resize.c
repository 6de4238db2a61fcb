/*
 * resize.c - PIL's bilinear resampling (ImagingResample), streaming: see
 * resize.h. The arithmetic follows PIL step by step (float box, double
 * weights normalised per output pixel, 22-bit fixed point, horizontal
 * pass rounded to uint8 before the vertical pass) because "the same
 * pixels as PIL" is what lets a model trained on these batches be
 * evaluated with torchvision, and the other way round.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "resize.h"

/* PIL's PRECISION_BITS for 8-bit images: 32 - 8 bits of sample - 2 bits
 * of headroom for weights above 1 (other filters than bilinear). */
#define PRECISION_BITS 22
#define ROUNDING_HALF (1 << (PRECISION_BITS - 1))

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

static uint8_t clip8(int32_t sum)
{
    const int32_t v = sum >> PRECISION_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
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
        k[x] = (int32_t)(0.5 + w * (1 << PRECISION_BITS));
    }
    axis->first[o] = xmin;
    axis->count[o] = n;
}

int rf__resample_axis_plan(struct rf__resample_axis *axis, uint32_t in_size,
                           double in0, double in1, uint32_t out_size)
{
    /* PIL takes the box as four C floats */
    const float in0f = (float)in0, in1f = (float)in1;
    if (out_size == 0 || out_size > MAX_AXIS || in_size > MAX_AXIS ||
        !(in1f > in0f) || !(in0f > -MAX_AXIS) || !(in1f < MAX_AXIS))
        return -EINVAL;
    const double scale = (double)(in1f - in0f) / out_size;
    const double filterscale = scale < 1.0 ? 1.0 : scale;
    const double support = 1.0 * filterscale;
    const uint32_t ksize = ceil_u32(support) * 2 + 1;
    if (axis_reserve(axis, out_size, ksize) < 0)
        return -ENOMEM;
    axis->out_size = out_size;
    axis->ksize = ksize;
    for (uint32_t o = 0; o < out_size; o++)
        plan_pixel(axis, o, in_size, in0f + (o + 0.5) * scale, support,
                   filterscale);
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
    for (uint32_t o = 0; o < axis->out_size; o++)
        if (axis->count[o] > 0)
            axis->first[o] -= (int32_t)delta;
}

void rf__resample_axis_free(struct rf__resample_axis *axis)
{
    free(axis->first);
    free(axis->count);
    free(axis->weights);
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
    rs->channels = channels;
    rs->input_width = input_width;
    rs->vertical_first = dest->transpose;
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

/* The horizontal pass of one RGB row of `width` pixels. Everything the
 * loop reads is copied into restrict locals first: the uint8_t stores
 * could alias any of it, and reloading it every tap was slow. */
static void horizontal_rgb(const struct rf__resample_axis *axis, uint32_t width,
                           const uint8_t *restrict in, uint8_t *restrict out)
{
    const uint32_t n = axis->out_size, ksize = axis->ksize;
    const int32_t *restrict first = axis->first;
    const int32_t *restrict count = axis->count;
    const int32_t *restrict weights = axis->weights;
    for (uint32_t o = 0; o < n; o++) {
        const int32_t *restrict k = weights + (size_t)o * ksize;
        const uint8_t *restrict p = in + (size_t)first[o] * 3;
        int32_t r = ROUNDING_HALF, g = ROUNDING_HALF, b = ROUNDING_HALF;
        for (int32_t t = 0; t < count[o]; t++, p += 3) {
            r += p[0] * k[t];
            g += p[1] * k[t];
            b += p[2] * k[t];
        }
        out[3 * o] = clip8(r);
        out[3 * o + 1] = clip8(g);
        out[3 * o + 2] = clip8(b);
    }
}

static void horizontal_grey(const struct rf__resample_axis *axis,
                            const uint8_t *restrict in, uint8_t *restrict out)
{
    const uint32_t n = axis->out_size, ksize = axis->ksize;
    const int32_t *restrict first = axis->first;
    const int32_t *restrict count = axis->count;
    const int32_t *restrict weights = axis->weights;
    for (uint32_t o = 0; o < n; o++) {
        const int32_t *restrict k = weights + (size_t)o * ksize;
        const uint8_t *restrict p = in + first[o];
        int32_t v = ROUNDING_HALF;
        for (int32_t t = 0; t < count[o]; t++)
            v += p[t] * k[t];
        out[o] = clip8(v);
    }
}

static void horizontal(const struct rf__resizer *rs, const uint8_t *in,
                       uint8_t *out)
{
    if (rs->channels == 3)
        horizontal_rgb(&rs->horizontal, rs->input_width, in, out);
    else
        horizontal_grey(&rs->horizontal, in, out);
}

/* Result row i of the vertical pass over the kept rows of n bytes each.
 * Blocks of 8 bytes keep their sums in registers across the taps. */
static void vertical(const struct rf__resizer *rs, uint32_t i, size_t n,
                     uint8_t *restrict out)
{
    const struct rf__resample_axis *axis = &rs->vertical;
    const int32_t *restrict k = axis->weights + (size_t)i * axis->ksize;
    const int32_t taps = axis->count[i];
    const uint8_t *restrict rows =
        rs->rows + (taps > 0 ? (size_t)axis->first[i] * n : 0);
    size_t x = 0;
    for (; x + 8 <= n; x += 8) {
        int32_t sum[8];
        for (int j = 0; j < 8; j++)
            sum[j] = ROUNDING_HALF;
        for (int32_t t = 0; t < taps; t++)
            for (int j = 0; j < 8; j++)
                sum[j] += rows[(size_t)t * n + x + j] * k[t];
        for (int j = 0; j < 8; j++)
            out[x + j] = clip8(sum[j]);
    }
    for (; x < n; x++) {
        int32_t sum = ROUNDING_HALF;
        for (int32_t t = 0; t < taps; t++)
            sum += rows[(size_t)t * n + x] * k[t];
        out[x] = clip8(sum);
    }
}

/* Scatters result row i through the destination's steps: a plain copy
 * for the usual NHWC unmirrored target. */
static void store_row(const struct rf__resizer *rs, uint32_t i)
{
    uint8_t *restrict base = rs->dst + rs->origin + (ptrdiff_t)i * rs->step_i;
    const uint8_t *restrict from = rs->result;
    const uint32_t cols = rs->horizontal.out_size;
    const uint32_t in_channels = rs->channels;
    const ptrdiff_t sj = rs->step_j, sc = rs->step_c;
    if (in_channels == rs->dst_channels && sj == in_channels && sc == 1) {
        memcpy(base, from, (size_t)cols * in_channels);
        return;
    }
    for (uint32_t j = 0; j < cols; j++, base += sj) {
        for (uint32_t c = 0; c < rs->dst_channels; c++)
            /* one working channel is replicated into three */
            base[(ptrdiff_t)c * sc] = from[in_channels == 1 ? j : 3 * j + c];
    }
}

static void write_result_row(struct rf__resizer *rs, uint32_t i)
{
    const size_t c = rs->channels;
    if (rs->vertical_first) {
        vertical(rs, i, (size_t)rs->input_width * c, rs->between);
        horizontal(rs, rs->between, rs->result);
    } else {
        vertical(rs, i, (size_t)rs->horizontal.out_size * c, rs->result);
    }
    store_row(rs, i);
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
    const struct rf__resample_axis *v = &rs->vertical;
    while (rs->next_out < v->out_size &&
           (uint32_t)(v->first[rs->next_out] + v->count[rs->next_out]) <=
               rs->rows_in)
        write_result_row(rs, rs->next_out++);
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
