/*
 * synthetic.c - the synthetic source: every pixel and label is a function
 * of (seed, sample index), so a consumer can recompute and check any
 * sample it receives (rf_synthetic_fill(), rf_synthetic_label()).
 */
#include "config.h"

#include "internal.h"

static uint64_t sample_key(uint64_t seed, uint64_t index)
{
    return rf__mix64(rf__mix64(seed, 0x53594e5448ull), index);
}

void rf_synthetic_fill(uint64_t seed, uint64_t index, uint32_t height,
                       uint32_t width, uint32_t channels, rf_layout layout,
                       void *dst)
{
    const uint64_t key = sample_key(seed, index);
    const size_t pixels = (size_t)height * width;
    uint8_t *out = dst;
    /* Pixel p, channel c is byte c of mix(key, p), in either layout. */
    if (layout == RF_LAYOUT_NCHW) {
        for (size_t p = 0; p < pixels; p++) {
            const uint64_t v = rf__mix64(key, p);
            for (uint32_t c = 0; c < channels; c++)
                out[c * pixels + p] = (uint8_t)(v >> (8 * c));
        }
        return;
    }
    for (size_t p = 0; p < pixels; p++) {
        const uint64_t v = rf__mix64(key, p);
        for (uint32_t c = 0; c < channels; c++)
            *out++ = (uint8_t)(v >> (8 * c));
    }
}

int64_t rf_synthetic_label(uint64_t seed, uint64_t index, uint32_t classes)
{
    if (classes == 0)
        return 0;
    return (int64_t)(rf__mix64(sample_key(seed, index), UINT64_MAX) % classes);
}
