/*
 * synthetic.c - the synthetic source: every pixel and label is a function
 * of (seed, sample index), so a consumer can recompute and check any
 * sample it receives (rf_synthetic_fill(), rf_synthetic_label()).
 */
#include "config.h"

#include <string.h>

#include "internal.h"

static uint64_t sample_key(uint64_t seed, uint64_t index)
{
    return rf__mix64(rf__mix64(seed, 0x53594e5448ull), index);
}

/*
 * The NHWC bytes of a sample are the little-endian bytes of the words
 * mix(key, 0), mix(key, 1), ...: one mix per 8 bytes, and any byte can be
 * computed on its own, so NCHW is the same image transposed.
 */
static void fill_nhwc(uint64_t key, size_t bytes, uint8_t *out)
{
    size_t k = 0;
    for (; (k + 1) * 8 <= bytes; k++) {
        const uint64_t v = rf__mix64(key, k);
        memcpy(out + k * 8, &v, 8);
    }
    const uint64_t last = rf__mix64(key, k);
    for (size_t b = k * 8; b < bytes; b++)
        out[b] = (uint8_t)(last >> (8 * (b - k * 8)));
}

static void fill_nchw(uint64_t key, size_t pixels, uint32_t channels,
                      uint8_t *out)
{
    const size_t bytes = pixels * channels;
    for (size_t k = 0; k * 8 < bytes; k++) {
        const uint64_t v = rf__mix64(key, k);
        for (size_t b = k * 8; b < bytes && b < k * 8 + 8; b++) {
            const size_t pixel = b / channels, channel = b % channels;
            out[channel * pixels + pixel] = (uint8_t)(v >> (8 * (b - k * 8)));
        }
    }
}

void rf_synthetic_fill(uint64_t seed, uint64_t index, uint32_t height,
                       uint32_t width, uint32_t channels, rf_layout layout,
                       void *dst)
{
    const uint64_t key = sample_key(seed, index);
    const size_t pixels = (size_t)height * width;
    if (layout == RF_LAYOUT_NCHW)
        fill_nchw(key, pixels, channels, dst);
    else
        fill_nhwc(key, pixels * channels, dst);
}

int64_t rf_synthetic_label(uint64_t seed, uint64_t index, uint32_t classes)
{
    if (classes == 0)
        return 0;
    return (int64_t)(rf__mix64(sample_key(seed, index), UINT64_MAX) % classes);
}
