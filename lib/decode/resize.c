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

#include "decode/resize.h"

/* SSE2 is part of x86-64, so its passes need no -m flag. The AVX2 passes
 * are compiled for AVX2 function by function and chosen at run time, when
 * the CPU has it (rf__resizer_begin); elsewhere the scalar passes compute
 * the same bytes. Tests run every level on the same input. */
#if defined(__SSE2__) && !defined(RF_RESIZE_SCALAR)
#include <emmintrin.h>
#define RF_RESIZE_SSE2 1
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define RF_RESIZE_AVX2 1
#define AVX2_FUNCTION __attribute__((target("avx2")))
/* for the kernels that must be specialised on a constant argument */
#define AVX2_INLINE __attribute__((target("avx2"), always_inline)) inline
#endif
#endif

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
        k[x] = (int32_t)(0.5 + w * (1 << PRECISION_BITS));
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
    axis->kpairs = (ksize + 1) / 2;
    for (uint32_t o = 0; o < out_size; o++)
        plan_pixel(axis, o, in_size, in0f + (o + 0.5) * scale, support,
                   filterscale);
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

enum rf__resize_simd rf__resize_simd_available(void)
{
#ifdef RF_RESIZE_AVX2
    /* __builtin_cpu_supports reads what the CPU was found to have at
     * start-up; cheap enough to ask once per image */
    if (__builtin_cpu_supports("avx2"))
        return RF_RESIZE_SIMD_AVX2;
#endif
#ifdef RF_RESIZE_SSE2
    return RF_RESIZE_SIMD_SSE2;
#else
    return RF_RESIZE_SIMD_SCALAR;
#endif
}

int rf__resizer_begin(struct rf__resizer *rs, uint32_t channels,
                      uint32_t input_width, const struct rf__resize_dest *dest)
{
    if (channels != 1 && channels != 3)
        return -EINVAL;
    rs->simd = rf__resize_simd_available();
    if (rs->simd_limit != RF_RESIZE_SIMD_BEST && rs->simd > rs->simd_limit)
        rs->simd = rs->simd_limit;
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

/* One RGB output pixel from its taps. */
static void rgb_pixel(const uint8_t *restrict p, const int32_t *restrict k,
                      int32_t taps, uint8_t *restrict out)
{
    int32_t r = ROUNDING_HALF, g = ROUNDING_HALF, b = ROUNDING_HALF;
    for (int32_t t = 0; t < taps; t++, p += 3) {
        r += p[0] * k[t];
        g += p[1] * k[t];
        b += p[2] * k[t];
    }
    out[0] = clip8(r);
    out[1] = clip8(g);
    out[2] = clip8(b);
}

#ifdef RF_RESIZE_SSE2
/* RGB pixels t and t + 1 at p as int16 pairs (red t, red t+1), (green..),
 * (blue..) and a spare pair: four bytes at p and at p + 3, interleaved
 * byte by byte, then widened (one unpack fewer than widening each). */
static inline __m128i rgb_pairs(const uint8_t *p)
{
    int32_t a, b;
    memcpy(&a, p, sizeof(a));
    memcpy(&b, p + 3, sizeof(b));
    const __m128i ab =
        _mm_unpacklo_epi8(_mm_cvtsi32_si128(a), _mm_cvtsi32_si128(b));
    return _mm_unpacklo_epi8(ab, _mm_setzero_si128());
}

/* PIL's rounding and shift of sums kept as (hi, lo) halves. */
static inline __m128i finish_sums(__m128i hi, __m128i lo)
{
    const __m128i sum = _mm_add_epi32(_mm_slli_epi32(hi, 8), lo);
    return _mm_srai_epi32(_mm_add_epi32(sum, _mm_set1_epi32(ROUNDING_HALF)),
                          PRECISION_BITS);
}

/* One RGB output pixel, two taps per pmaddwd: lanes hold (tap t, tap t+1)
 * pairs of red, green, blue and a fourth byte that is thrown away. An odd
 * count reads one tap more, whose weight is 0: the caller makes sure that
 * the pixel after the last tap and one byte more are readable. */
static uint32_t rgb_pixel_sse2(const uint8_t *p, const int32_t *hi,
                               const int32_t *lo, int32_t taps)
{
    __m128i sum_hi = _mm_setzero_si128(), sum_lo = _mm_setzero_si128();
    for (int32_t q = 0; 2 * q < taps; q++, p += 6) {
        const __m128i ab = rgb_pairs(p);
        sum_hi =
            _mm_add_epi32(sum_hi, _mm_madd_epi16(ab, _mm_set1_epi32(hi[q])));
        sum_lo =
            _mm_add_epi32(sum_lo, _mm_madd_epi16(ab, _mm_set1_epi32(lo[q])));
    }
    const __m128i v = finish_sums(sum_hi, sum_lo);
    const __m128i bytes = _mm_packus_epi16(_mm_packs_epi32(v, v), v);
    return (uint32_t)_mm_cvtsi128_si32(bytes);
}

/* The same output pixel of two rows at once: the weights are loaded once
 * for both, and the two sums are independent chains. */
static void rgb_pixel2_sse2(const uint8_t *p0, const uint8_t *p1,
                            const int32_t *hi, const int32_t *lo, int32_t taps,
                            uint32_t *rgbx0, uint32_t *rgbx1)
{
    const __m128i zero = _mm_setzero_si128();
    __m128i hi0 = zero, lo0 = zero, hi1 = zero, lo1 = zero;
    for (int32_t q = 0; 2 * q < taps; q++, p0 += 6, p1 += 6) {
        const __m128i wh = _mm_set1_epi32(hi[q]), wl = _mm_set1_epi32(lo[q]);
        const __m128i a = rgb_pairs(p0), b = rgb_pairs(p1);
        hi0 = _mm_add_epi32(hi0, _mm_madd_epi16(a, wh));
        lo0 = _mm_add_epi32(lo0, _mm_madd_epi16(a, wl));
        hi1 = _mm_add_epi32(hi1, _mm_madd_epi16(b, wh));
        lo1 = _mm_add_epi32(lo1, _mm_madd_epi16(b, wl));
    }
    const __m128i v0 = finish_sums(hi0, lo0), v1 = finish_sums(hi1, lo1);
    const __m128i bytes = _mm_packus_epi16(_mm_packs_epi32(v0, v1), zero);
    *rgbx0 = (uint32_t)_mm_cvtsi128_si32(bytes);
    *rgbx1 = (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(bytes, 4));
}

/* Stores the RGB of rgbx (red in the low byte) at out, one of a row's
 * pixels written in the direction of `step`. A 3-byte store costs a
 * split and a detour through the stack, so all but the row's last pixel
 * store 4 bytes, the spare one on the neighbour written next. */
static inline void put_rgb(uint8_t *out, uint32_t rgbx, ptrdiff_t step,
                           bool last)
{
    if (last) {
        memcpy(out, &rgbx, 3);
    } else if (step > 0) {
        memcpy(out, &rgbx, 4);
    } else {
        const uint32_t xrgb = rgbx << 8;
        memcpy(out - 1, &xrgb, 4);
    }
}

/* Sums of one tap pair over 16 bytes: eight int32 accumulators, (hi,
 * lo) for each quarter. Named variables, not arrays: with arrays the
 * compiler kept the sums on the stack and reloaded them every tap. */
struct vsums {
    __m128i h0, h1, h2, h3, l0, l1, l2, l3;
};

/* Adds rows a and b (taps t and t + 1) times their weight halves. */
static inline void vertical_pair(struct vsums *s, __m128i a, __m128i b,
                                 __m128i wh, __m128i wl)
{
    const __m128i zero = _mm_setzero_si128();
    const __m128i a0 = _mm_unpacklo_epi8(a, zero);
    const __m128i a1 = _mm_unpackhi_epi8(a, zero);
    const __m128i b0 = _mm_unpacklo_epi8(b, zero);
    const __m128i b1 = _mm_unpackhi_epi8(b, zero);
    const __m128i p0 = _mm_unpacklo_epi16(a0, b0);
    const __m128i p1 = _mm_unpackhi_epi16(a0, b0);
    const __m128i p2 = _mm_unpacklo_epi16(a1, b1);
    const __m128i p3 = _mm_unpackhi_epi16(a1, b1);
    s->h0 = _mm_add_epi32(s->h0, _mm_madd_epi16(p0, wh));
    s->l0 = _mm_add_epi32(s->l0, _mm_madd_epi16(p0, wl));
    s->h1 = _mm_add_epi32(s->h1, _mm_madd_epi16(p1, wh));
    s->l1 = _mm_add_epi32(s->l1, _mm_madd_epi16(p1, wl));
    s->h2 = _mm_add_epi32(s->h2, _mm_madd_epi16(p2, wh));
    s->l2 = _mm_add_epi32(s->l2, _mm_madd_epi16(p2, wl));
    s->h3 = _mm_add_epi32(s->h3, _mm_madd_epi16(p3, wh));
    s->l3 = _mm_add_epi32(s->l3, _mm_madd_epi16(p3, wl));
}

/* 16 bytes of a vertical result row from `taps` rows n bytes apart. */
static void vertical_block_sse2(const uint8_t *rows, size_t n,
                                const int32_t *hi, const int32_t *lo,
                                int32_t taps, uint8_t *out)
{
    const __m128i zero = _mm_setzero_si128();
    struct vsums s = {zero, zero, zero, zero, zero, zero, zero, zero};
    int32_t t = 0;
    for (; t + 1 < taps; t += 2) {
        const uint8_t *row = rows + (size_t)t * n;
        vertical_pair(&s, _mm_loadu_si128((const __m128i *)row),
                      _mm_loadu_si128((const __m128i *)(row + n)),
                      _mm_set1_epi32(hi[t / 2]), _mm_set1_epi32(lo[t / 2]));
    }
    /* an odd last tap pairs with zeros: the row after it may not exist */
    if (t < taps)
        vertical_pair(&s, _mm_loadu_si128((const __m128i *)(rows + t * n)),
                      zero, _mm_set1_epi32(hi[t / 2]),
                      _mm_set1_epi32(lo[t / 2]));
    const __m128i v01 =
        _mm_packs_epi32(finish_sums(s.h0, s.l0), finish_sums(s.h1, s.l1));
    const __m128i v23 =
        _mm_packs_epi32(finish_sums(s.h2, s.l2), finish_sums(s.h3, s.l3));
    _mm_storeu_si128((__m128i *)out, _mm_packus_epi16(v01, v23));
}
#endif

#ifdef RF_RESIZE_AVX2
/* 16 bytes of row 0 in the low 128-bit lane, 16 of row 1 in the high. */
AVX2_FUNCTION static inline __m256i two_rows(const uint8_t *p0,
                                             const uint8_t *p1)
{
    const __m128i a = _mm_loadu_si128((const __m128i *)p0);
    const __m128i b = _mm_loadu_si128((const __m128i *)p1);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
}

/* Adds one tap pair to the (hi, lo) sums: `shuffle` picks the pair's
 * bytes out of the 16 loaded per lane as int16 pairs (red t, red t+1),
 * (green ..), (blue ..), (0, 0). */
AVX2_FUNCTION static inline void add_tap_pair(__m256i *sum_hi, __m256i *sum_lo,
                                              __m256i pixels, __m256i shuffle,
                                              int32_t hi, int32_t lo)
{
    const __m256i pairs = _mm256_shuffle_epi8(pixels, shuffle);
    *sum_hi = _mm256_add_epi32(*sum_hi,
                               _mm256_madd_epi16(pairs, _mm256_set1_epi32(hi)));
    *sum_lo = _mm256_add_epi32(*sum_lo,
                               _mm256_madd_epi16(pairs, _mm256_set1_epi32(lo)));
}

AVX2_FUNCTION static inline __m256i finish_sums256(__m256i hi, __m256i lo)
{
    const __m256i sum = _mm256_add_epi32(_mm256_slli_epi32(hi, 8), lo);
    return _mm256_srai_epi32(
        _mm256_add_epi32(sum, _mm256_set1_epi32(ROUNDING_HALF)),
        PRECISION_BITS);
}

/* Bytes that pixel_sums_avx2() reads from each row for `pairs` tap
 * pairs: one 16-byte load covers taps 0 to 3 (12 bytes), a second one
 * from tap 4 on covers taps 4 to 7. */
static inline size_t avx2_window_bytes(int pairs)
{
    return pairs <= 2 ? 16 : 12 + 16;
}

/* The finished (rounded, shifted) sums of one output pixel of two rows,
 * row 0 in the low lane and row 1 in the high one, over `pairs` tap pairs
 * (2 to 4) of the windows at p0 and p1: one load and one byte shuffle per
 * tap pair, where SSE2 needs four loads and unpacks per row. Taps past
 * the pixel's own count have weight 0, so the bytes they read do not
 * matter. Inlined with a constant `pairs`, it has no branch. */
AVX2_INLINE static __m256i pixel_sums_avx2(const uint8_t *p0, const uint8_t *p1,
                                           const int32_t *hi, const int32_t *lo,
                                           int pairs)
{
#define Z (-128) /* pshufb: a zero byte */
    const __m256i first_pair =
        _mm256_setr_epi8(0, Z, 3, Z, 1, Z, 4, Z, 2, Z, 5, Z, Z, Z, Z, Z, 0, Z,
                         3, Z, 1, Z, 4, Z, 2, Z, 5, Z, Z, Z, Z, Z);
    const __m256i second_pair =
        _mm256_setr_epi8(6, Z, 9, Z, 7, Z, 10, Z, 8, Z, 11, Z, Z, Z, Z, Z, 6, Z,
                         9, Z, 7, Z, 10, Z, 8, Z, 11, Z, Z, Z, Z, Z);
#undef Z
    __m256i sum_hi = _mm256_setzero_si256(), sum_lo = _mm256_setzero_si256();
    __m256i pixels = two_rows(p0, p1);
    add_tap_pair(&sum_hi, &sum_lo, pixels, first_pair, hi[0], lo[0]);
    add_tap_pair(&sum_hi, &sum_lo, pixels, second_pair, hi[1], lo[1]);
    if (pairs > 2) {
        pixels = two_rows(p0 + 12, p1 + 12);
        add_tap_pair(&sum_hi, &sum_lo, pixels, first_pair, hi[2], lo[2]);
    }
    if (pairs > 3)
        add_tap_pair(&sum_hi, &sum_lo, pixels, second_pair, hi[3], lo[3]);
    return finish_sums256(sum_hi, sum_lo);
}

/* Output pixels o to o + 3 of two rows, each with `pairs` tap pairs,
 * stored as 12 bytes per row: left to right from out0 and out1, or, when
 * `reverse`, right to left (pixel o at out0, pixel o + 3 nine bytes
 * before it). */
AVX2_INLINE static void four_pixels_avx2(const struct rf__resample_axis *axis,
                                         uint32_t o, const uint8_t *in0,
                                         const uint8_t *in1, uint8_t *out0,
                                         uint8_t *out1, bool reverse, int pairs)
{
#define SUMS(j)                                                                \
    pixel_sums_avx2(in0 + (size_t)axis->first[o + (j)] * 3,                    \
                    in1 + (size_t)axis->first[o + (j)] * 3,                    \
                    axis->pairs_hi + (size_t)(o + (j)) * axis->kpairs,         \
                    axis->pairs_lo + (size_t)(o + (j)) * axis->kpairs, pairs)
    const __m256i v0 = SUMS(0), v1 = SUMS(1), v2 = SUMS(2), v3 = SUMS(3);
#undef SUMS
    /* per lane: pixel j's red, green, blue and a spare byte at 4j */
    const __m256i rgbx = _mm256_packus_epi16(_mm256_packs_epi32(v0, v1),
                                             _mm256_packs_epi32(v2, v3));
#define Z (-128)
    const __m256i forward =
        _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, Z, Z, Z, Z, 0,
                         1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, Z, Z, Z, Z);
    const __m256i backward =
        _mm256_setr_epi8(12, 13, 14, 8, 9, 10, 4, 5, 6, 0, 1, 2, Z, Z, Z, Z, 12,
                         13, 14, 8, 9, 10, 4, 5, 6, 0, 1, 2, Z, Z, Z, Z);
#undef Z
    const __m256i rgb = _mm256_shuffle_epi8(rgbx, reverse ? backward : forward);
    const __m128i row0 = _mm256_castsi256_si128(rgb);
    const __m128i row1 = _mm256_extracti128_si256(rgb, 1);
    uint8_t *at0 = reverse ? out0 - 9 : out0, *at1 = reverse ? out1 - 9 : out1;
    const uint32_t tail0 = (uint32_t)_mm_extract_epi32(row0, 2);
    const uint32_t tail1 = (uint32_t)_mm_extract_epi32(row1, 2);
    _mm_storel_epi64((__m128i *)at0, row0);
    memcpy(at0 + 8, &tail0, 4);
    _mm_storel_epi64((__m128i *)at1, row1);
    memcpy(at1 + 8, &tail1, 4);
}

/* Groups of four output pixels while the last one's window stays inside
 * the row and its slack (always, with RF_RESIZE_ROW_SLACK of 32 bytes);
 * returns the first pixel not done. */
AVX2_INLINE static uint32_t groups_avx2(const struct rf__resample_axis *axis,
                                        size_t row_bytes, const uint8_t *in0,
                                        const uint8_t *in1, uint8_t *out0,
                                        uint8_t *out1, ptrdiff_t step,
                                        int pairs)
{
    const size_t window = avx2_window_bytes(pairs);
    uint32_t o = 0;
    for (; o + 4 <= axis->out_size && (size_t)axis->first[o + 3] * 3 + window <=
                                          row_bytes + RF_RESIZE_ROW_SLACK;
         o += 4)
        four_pixels_avx2(axis, o, in0, in1, out0 + (ptrdiff_t)o * step,
                         out1 + (ptrdiff_t)o * step, step < 0, pairs);
    return o;
}

/* vertical_pair() on 32 bytes: the unpacks and packs work within each
 * 128-bit lane, so the bytes come back in their order. */
struct vsums256 {
    __m256i h0, h1, h2, h3, l0, l1, l2, l3;
};

AVX2_FUNCTION static inline void vertical_pair256(struct vsums256 *s, __m256i a,
                                                  __m256i b, __m256i wh,
                                                  __m256i wl)
{
    const __m256i zero = _mm256_setzero_si256();
    const __m256i a0 = _mm256_unpacklo_epi8(a, zero);
    const __m256i a1 = _mm256_unpackhi_epi8(a, zero);
    const __m256i b0 = _mm256_unpacklo_epi8(b, zero);
    const __m256i b1 = _mm256_unpackhi_epi8(b, zero);
    const __m256i p0 = _mm256_unpacklo_epi16(a0, b0);
    const __m256i p1 = _mm256_unpackhi_epi16(a0, b0);
    const __m256i p2 = _mm256_unpacklo_epi16(a1, b1);
    const __m256i p3 = _mm256_unpackhi_epi16(a1, b1);
    s->h0 = _mm256_add_epi32(s->h0, _mm256_madd_epi16(p0, wh));
    s->l0 = _mm256_add_epi32(s->l0, _mm256_madd_epi16(p0, wl));
    s->h1 = _mm256_add_epi32(s->h1, _mm256_madd_epi16(p1, wh));
    s->l1 = _mm256_add_epi32(s->l1, _mm256_madd_epi16(p1, wl));
    s->h2 = _mm256_add_epi32(s->h2, _mm256_madd_epi16(p2, wh));
    s->l2 = _mm256_add_epi32(s->l2, _mm256_madd_epi16(p2, wl));
    s->h3 = _mm256_add_epi32(s->h3, _mm256_madd_epi16(p3, wh));
    s->l3 = _mm256_add_epi32(s->l3, _mm256_madd_epi16(p3, wl));
}

/* vertical_block_sse2() on 32 bytes. */
AVX2_FUNCTION static void vertical_block_avx2(const uint8_t *rows, size_t n,
                                              const int32_t *hi,
                                              const int32_t *lo, int32_t taps,
                                              uint8_t *out)
{
    const __m256i zero = _mm256_setzero_si256();
    struct vsums256 s = {zero, zero, zero, zero, zero, zero, zero, zero};
    int32_t t = 0;
    for (; t + 1 < taps; t += 2) {
        const uint8_t *row = rows + (size_t)t * n;
        vertical_pair256(&s, _mm256_loadu_si256((const __m256i *)row),
                         _mm256_loadu_si256((const __m256i *)(row + n)),
                         _mm256_set1_epi32(hi[t / 2]),
                         _mm256_set1_epi32(lo[t / 2]));
    }
    if (t < taps)
        vertical_pair256(
            &s, _mm256_loadu_si256((const __m256i *)(rows + (size_t)t * n)),
            zero, _mm256_set1_epi32(hi[t / 2]), _mm256_set1_epi32(lo[t / 2]));
    const __m256i v01 = _mm256_packs_epi32(finish_sums256(s.h0, s.l0),
                                           finish_sums256(s.h1, s.l1));
    const __m256i v23 = _mm256_packs_epi32(finish_sums256(s.h2, s.l2),
                                           finish_sums256(s.h3, s.l3));
    _mm256_storeu_si256((__m256i *)out, _mm256_packus_epi16(v01, v23));
}

/* The 32-byte blocks of a vertical result row: returns how many bytes
 * were written. */
AVX2_FUNCTION static size_t vertical_avx2(const uint8_t *rows, size_t n,
                                          const int32_t *hi, const int32_t *lo,
                                          int32_t taps, uint8_t *out)
{
    size_t x = 0;
    for (; x + 32 <= n; x += 32)
        vertical_block_avx2(rows + x, n, hi, lo, taps, out + x);
    return x;
}
#endif

/* The horizontal pass of one RGB row of `width` pixels; output pixel o
 * goes to out + o * step (step -3 mirrors the row). Everything the loop
 * reads is copied into restrict locals first: the uint8_t stores could
 * alias any of it, and reloading it every tap was slow. */
static void horizontal_rgb(const struct rf__resample_axis *axis, uint32_t width,
                           const uint8_t *restrict in, uint8_t *restrict out,
                           ptrdiff_t step, enum rf__resize_simd simd)
{
    const uint32_t n = axis->out_size, ksize = axis->ksize;
    const int32_t *restrict first = axis->first;
    const int32_t *restrict count = axis->count;
    (void)width; /* read by the SIMD pixel only */
    (void)simd;
    for (uint32_t o = 0; o < n; o++, out += step) {
        const uint8_t *p = in + (size_t)first[o] * 3;
#ifdef RF_RESIZE_SSE2
        /* the SIMD pixel may read the pixel after its taps, plus a byte */
        if (simd >= RF_RESIZE_SIMD_SSE2 &&
            (uint32_t)(first[o] + count[o]) + 1 < width) {
            const size_t q = (size_t)o * axis->kpairs;
            put_rgb(out,
                    rgb_pixel_sse2(p, axis->pairs_hi + q, axis->pairs_lo + q,
                                   count[o]),
                    step, o + 1 == n);
            continue;
        }
#endif
        rgb_pixel(p, axis->weights + (size_t)o * ksize, count[o], out);
    }
}

#ifdef RF_RESIZE_SSE2
/* Output pixel o of two rows: SSE2, or plain C near the row's end, where
 * the SIMD loads would read past it. */
static inline void pixel2_sse2(const struct rf__resample_axis *axis, uint32_t o,
                               uint32_t width, const uint8_t *in0,
                               const uint8_t *in1, uint8_t *out0, uint8_t *out1,
                               ptrdiff_t step)
{
    const int32_t first = axis->first[o], taps = axis->count[o];
    const size_t at = (size_t)first * 3;
    if ((uint32_t)(first + taps) + 1 < width) {
        const size_t q = (size_t)o * axis->kpairs;
        uint32_t rgbx0, rgbx1;
        rgb_pixel2_sse2(in0 + at, in1 + at, axis->pairs_hi + q,
                        axis->pairs_lo + q, taps, &rgbx0, &rgbx1);
        put_rgb(out0, rgbx0, step, o + 1 == axis->out_size);
        put_rgb(out1, rgbx1, step, o + 1 == axis->out_size);
    } else {
        const int32_t *k = axis->weights + (size_t)o * axis->ksize;
        rgb_pixel(in0 + at, k, taps, out0);
        rgb_pixel(in1 + at, k, taps, out1);
    }
}

/* horizontal_rgb() of two rows at once. */
static void horizontal_rgb2(const struct rf__resample_axis *axis,
                            uint32_t width, const uint8_t *in0,
                            const uint8_t *in1, uint8_t *out0, uint8_t *out1,
                            ptrdiff_t step)
{
    for (uint32_t o = 0; o < axis->out_size; o++, out0 += step, out1 += step)
        pixel2_sse2(axis, o, width, in0, in1, out0, out1, step);
}
#endif

#ifdef RF_RESIZE_AVX2
/* horizontal_rgb2() with AVX2: four output pixels at a time, with as many
 * tap pairs as the widest window has; the last one to three pixels as
 * there. The first inputs only grow with the output pixel, so the fourth
 * pixel's window is the one to check. */
AVX2_FUNCTION static void
horizontal_rgb2_avx2(const struct rf__resample_axis *axis, uint32_t width,
                     const uint8_t *in0, const uint8_t *in1, uint8_t *out0,
                     uint8_t *out1, ptrdiff_t step)
{
    const size_t row_bytes = (size_t)width * 3;
    uint32_t o = 0;
    /* As many pairs as the widest window needs, which is fewer than the
     * kernel's size suggests (a shrink by 1 to 2 has 5 taps but uses at
     * most 4); a constant in each call, so that each loop is branch-free.
     * Every pixel's pairs past its own count have weight 0. */
    uint32_t pairs = (axis->max_count + 1) / 2;
    if (pairs < 2) /* the AVX2 pixel reads two pairs at least */
        pairs = 2;
    switch (pairs <= axis->kpairs ? pairs : 0) {
    case 2:
        o = groups_avx2(axis, row_bytes, in0, in1, out0, out1, step, 2);
        break;
    case 3:
        o = groups_avx2(axis, row_bytes, in0, in1, out0, out1, step, 3);
        break;
    case 4:
        o = groups_avx2(axis, row_bytes, in0, in1, out0, out1, step, 4);
        break;
    default: /* more than 8 taps (shrinking by more than 4), or a kernel
                of fewer than 3 taps (not planned by PIL's rule): SSE2 */
        break;
    }
    /* The SSE2 and C code below is not VEX-encoded: clear the upper
     * halves first, as gcc 12 does not always do it here on its own. */
    _mm256_zeroupper();
    for (; o < axis->out_size; o++)
        pixel2_sse2(axis, o, width, in0, in1, out0 + (ptrdiff_t)o * step,
                    out1 + (ptrdiff_t)o * step, step);
}
#endif

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
        int32_t v = ROUNDING_HALF;
        for (int32_t t = 0; t < count[o]; t++)
            v += p[t] * k[t];
        out[(ptrdiff_t)o * step] = clip8(v);
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
    if (rs->channels == 3)
        horizontal_rgb(&rs->horizontal, rs->input_width, in, out, step,
                       rs->simd);
    else
        horizontal_grey(&rs->horizontal, in, out, step);
}

/* Result row i of the vertical pass over the kept rows of n bytes each:
 * 16 bytes at a time with SSE2, the rest in blocks of 8 that keep their
 * sums in registers across the taps. */
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
        x = vertical_avx2(rows, n, hi, lo, taps, out);
#endif
    for (; rs->simd >= RF_RESIZE_SIMD_SSE2 && x + 16 <= n; x += 16)
        vertical_block_sse2(rows + x, n, hi, lo, taps, out + x);
#endif
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
            horizontal_rgb2_avx2(&rs->horizontal, rs->input_width, in0, in1,
                                 out, out + n, step);
        else
#endif
            horizontal_rgb2(&rs->horizontal, rs->input_width, in0, in1, out,
                            out + n, step);
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
