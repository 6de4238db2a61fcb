/*
 * resize-simd.c - the resampler's SSE2 and AVX2 kernels (see
 * resize-simd.h): the horizontal pass of RGB rows, one or two at a time,
 * and the vertical pass in 16- and 32-byte blocks. Each writes exactly the
 * bytes of the plain C passes in resize.c, which choose among them
 * (rf__resize_simd_available) and compute whatever they leave.
 *
 * PIL's 22-bit weights do not fit the 16-bit multiplies of pmaddwd, so
 * each is split in two halves (resize.c, split_pixel()): the sums of both
 * are exact in 32 bits and recombine into PIL's sum, bit for bit.
 */
#include "config.h"

#include <stdbool.h>
#include <string.h>

#include "decode/resize-simd.h"

#ifdef RF_RESIZE_SSE2
#include <emmintrin.h>
#endif
#ifdef RF_RESIZE_AVX2
#include <immintrin.h>
#define AVX2_FUNCTION __attribute__((target("avx2")))
/* for the kernels that must be specialised on a constant argument */
#define AVX2_INLINE __attribute__((target("avx2"), always_inline)) inline
#endif

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

#ifdef RF_RESIZE_SSE2

/* ---- SSE2 ------------------------------------------------------------- */

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
    return _mm_srai_epi32(
        _mm_add_epi32(sum, _mm_set1_epi32(RF_RESIZE_ROUNDING_HALF)),
        RF_RESIZE_PRECISION_BITS);
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
size_t rf__resize_vertical_sse2(const uint8_t *rows, size_t n, size_t x,
                                const int32_t *hi, const int32_t *lo,
                                int32_t taps, uint8_t *out)
{
    for (; x + 16 <= n; x += 16)
        vertical_block_sse2(rows + x, n, hi, lo, taps, out + x);
    return x;
}

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
        rf__resize_rgb_pixel(in0 + at, k, taps, out0);
        rf__resize_rgb_pixel(in1 + at, k, taps, out1);
    }
}

void rf__resize_horizontal_rgb2_sse2(const struct rf__resample_axis *axis,
                                     uint32_t width, const uint8_t *in0,
                                     const uint8_t *in1, uint8_t *out0,
                                     uint8_t *out1, ptrdiff_t step)
{
    for (uint32_t o = 0; o < axis->out_size; o++, out0 += step, out1 += step)
        pixel2_sse2(axis, o, width, in0, in1, out0, out1, step);
}

/* Copies into restrict locals what the loop reads: the uint8_t stores
 * could alias any of it, and reloading it every pixel was slow. */
void rf__resize_horizontal_rgb_sse2(const struct rf__resample_axis *axis,
                                    uint32_t width, const uint8_t *in,
                                    uint8_t *out, ptrdiff_t step)
{
    const uint32_t n = axis->out_size, ksize = axis->ksize;
    const int32_t *restrict first = axis->first;
    const int32_t *restrict count = axis->count;
    for (uint32_t o = 0; o < n; o++, out += step) {
        const uint8_t *p = in + (size_t)first[o] * 3;
        /* the SIMD pixel may read the pixel after its taps, plus a byte */
        if ((uint32_t)(first[o] + count[o]) + 1 < width) {
            const size_t q = (size_t)o * axis->kpairs;
            put_rgb(out,
                    rgb_pixel_sse2(p, axis->pairs_hi + q, axis->pairs_lo + q,
                                   count[o]),
                    step, o + 1 == n);
            continue;
        }
        rf__resize_rgb_pixel(p, axis->weights + (size_t)o * ksize, count[o],
                             out);
    }
}

#endif /* RF_RESIZE_SSE2 */

#ifdef RF_RESIZE_AVX2

/* ---- AVX2 ------------------------------------------------------------- */

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
        _mm256_add_epi32(sum, _mm256_set1_epi32(RF_RESIZE_ROUNDING_HALF)),
        RF_RESIZE_PRECISION_BITS);
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

AVX2_FUNCTION size_t rf__resize_vertical_avx2(const uint8_t *rows, size_t n,
                                              const int32_t *hi,
                                              const int32_t *lo, int32_t taps,
                                              uint8_t *out)
{
    size_t x = 0;
    for (; x + 32 <= n; x += 32)
        vertical_block_avx2(rows + x, n, hi, lo, taps, out + x);
    return x;
}

/* Four output pixels at a time, with as many tap pairs as the widest
 * window has; the last one to three pixels as the SSE2 pass does them.
 * The first inputs only grow with the output pixel, so the fourth pixel's
 * window is the one to check. */
AVX2_FUNCTION void rf__resize_horizontal_rgb2_avx2(
    const struct rf__resample_axis *axis, uint32_t width, const uint8_t *in0,
    const uint8_t *in1, uint8_t *out0, uint8_t *out1, ptrdiff_t step)
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

#endif /* RF_RESIZE_AVX2 */
