/*
 * resize-simd.h - what the resampler (resize.c) shares with its SIMD
 * kernels (resize-simd.c), inside lib/decode only: PIL's fixed-point
 * constants, the plain C pixel that both use, and the kernels, each of
 * which writes exactly the bytes of resize.c's plain C passes. resize.h
 * is the resampler's interface; nothing outside lib/decode includes this.
 */
#ifndef RF_RESIZE_SIMD_H
#define RF_RESIZE_SIMD_H

#include <stddef.h>
#include <stdint.h>

#include "decode/resize.h"

/* SSE2 is part of x86-64, so its kernels need no -m flag. The AVX2
 * kernels are compiled for AVX2 function by function and chosen at run
 * time, when the CPU has it (rf__resize_simd_available); elsewhere the
 * plain C passes compute the same bytes. RF_RESIZE_SCALAR builds them
 * out, to test the plain C passes alone. */
#if defined(__SSE2__) && !defined(RF_RESIZE_SCALAR)
#define RF_RESIZE_SSE2 1
#if defined(__x86_64__) && defined(__GNUC__)
#define RF_RESIZE_AVX2 1
#endif
#endif

/* PIL's PRECISION_BITS for 8-bit images: 32 - 8 bits of sample - 2 bits
 * of headroom for weights above 1 (other filters than bilinear). */
#define RF_RESIZE_PRECISION_BITS 22
#define RF_RESIZE_ROUNDING_HALF (1 << (RF_RESIZE_PRECISION_BITS - 1))

/* A fixed-point sum as PIL rounds it to a byte (the half is added in the
 * sum's initial value). */
static inline uint8_t rf__resize_clip8(int32_t sum)
{
    const int32_t v = sum >> RF_RESIZE_PRECISION_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* One RGB output pixel of the horizontal pass from its taps (weights k,
 * RGB pixels from p on). The SIMD kernels use it near a row's end, where
 * their loads would read past the row. */
static inline void rf__resize_rgb_pixel(const uint8_t *restrict p,
                                        const int32_t *restrict k, int32_t taps,
                                        uint8_t *restrict out)
{
    int32_t r = RF_RESIZE_ROUNDING_HALF, g = RF_RESIZE_ROUNDING_HALF,
            b = RF_RESIZE_ROUNDING_HALF;
    for (int32_t t = 0; t < taps; t++, p += 3) {
        r += p[0] * k[t];
        g += p[1] * k[t];
        b += p[2] * k[t];
    }
    out[0] = rf__resize_clip8(r);
    out[1] = rf__resize_clip8(g);
    out[2] = rf__resize_clip8(b);
}

#ifdef RF_RESIZE_SSE2
/* The horizontal pass of one RGB row of `width` pixels: output pixel o
 * goes to out + o * step (step -3 mirrors the row). */
void rf__resize_horizontal_rgb_sse2(const struct rf__resample_axis *axis,
                                    uint32_t width, const uint8_t *in,
                                    uint8_t *out, ptrdiff_t step);

/* The same pass over two rows at once (in0 into out0, in1 into out1),
 * which loads each pixel's weights once for both. */
void rf__resize_horizontal_rgb2_sse2(const struct rf__resample_axis *axis,
                                     uint32_t width, const uint8_t *in0,
                                     const uint8_t *in1, uint8_t *out0,
                                     uint8_t *out1, ptrdiff_t step);

/* Bytes [x, ...) of a vertical result row of n bytes, in 16-byte blocks,
 * from `taps` kept rows n bytes apart starting at `rows`, with the split
 * weights hi and lo. Returns the byte where the blocks stopped (less than
 * 16 before n): the caller computes the rest. */
size_t rf__resize_vertical_sse2(const uint8_t *rows, size_t n, size_t x,
                                const int32_t *hi, const int32_t *lo,
                                int32_t taps, uint8_t *out);
#endif

#ifdef RF_RESIZE_AVX2
/* rf__resize_horizontal_rgb2_sse2() with AVX2, on a CPU that has it. */
void rf__resize_horizontal_rgb2_avx2(const struct rf__resample_axis *axis,
                                     uint32_t width, const uint8_t *in0,
                                     const uint8_t *in1, uint8_t *out0,
                                     uint8_t *out1, ptrdiff_t step);

/* rf__resize_vertical_sse2() from byte 0 in 32-byte blocks, on a CPU
 * that has AVX2. */
size_t rf__resize_vertical_avx2(const uint8_t *rows, size_t n,
                                const int32_t *hi, const int32_t *lo,
                                int32_t taps, uint8_t *out);
#endif

#endif /* RF_RESIZE_SIMD_H */
