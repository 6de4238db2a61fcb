/*
 * synthetic.c - the synthetic source: every pixel and label is a function
 * of (seed, sample index, classes), so a consumer can recompute and check
 * any sample it receives (rf_synthetic_fill(), rf_synthetic_label()).
 */
#include "config.h"

#include <string.h>

#include "common/internal.h"

/* Words of a class's pattern; the pattern repeats every 8 * this bytes. */
#define PATTERN_WORDS 64

/* Each byte is noise in 0..127 plus 0 or 32 by its class's pattern: the
 * two halves of a word must not carry into each other's bytes. */
#define NOISE_MASK 0x7f7f7f7f7f7f7f7full
#define PATTERN_MASK 0x2020202020202020ull

/* What a sample's bytes are computed from. */
struct sample_source {
    uint64_t key;
    uint64_t pattern[PATTERN_WORDS];
};

static uint64_t sample_key(uint64_t seed, uint64_t index)
{
    return rf__mix64(rf__mix64(seed, 0x53594e5448ull), index);
}

/*
 * Pixels must depend on the label, or nothing could learn from them (the
 * examples train a classifier on this source): each class has a pattern
 * that lifts some bytes by 32, under noise that differs per sample.
 */
static void init_source(struct sample_source *s, uint64_t seed, uint64_t index,
                        uint32_t classes, size_t bytes)
{
    s->key = sample_key(seed, index);
    const uint64_t class_key =
        rf__mix64(rf__mix64(seed, 0x434c415353ull),
                  (uint64_t)rf_synthetic_label(seed, index, classes));
    for (size_t k = 0; k < PATTERN_WORDS && k * 8 < bytes; k++)
        s->pattern[k] = rf__mix64(class_key, k) & PATTERN_MASK;
}

/* Bytes 8k..8k+7 of the NHWC sample, little-endian: any byte can be
 * computed on its own, so NCHW is the same image transposed. */
static uint64_t sample_word(const struct sample_source *s, size_t k)
{
    return ((rf__mix64(s->key, k) >> 1) & NOISE_MASK) +
           s->pattern[k % PATTERN_WORDS];
}

static void fill_nhwc(const struct sample_source *s, size_t bytes, uint8_t *out)
{
    size_t k = 0;
    for (; (k + 1) * 8 <= bytes; k++) {
        const uint64_t v = sample_word(s, k);
        memcpy(out + k * 8, &v, 8);
    }
    if (k * 8 == bytes)
        return;
    const uint64_t last = sample_word(s, k);
    for (size_t b = k * 8; b < bytes; b++)
        out[b] = (uint8_t)(last >> (8 * (b - k * 8)));
}

static void fill_nchw(const struct sample_source *s, size_t pixels,
                      uint32_t channels, uint8_t *out)
{
    const size_t bytes = pixels * channels;
    for (size_t k = 0; k * 8 < bytes; k++) {
        const uint64_t v = sample_word(s, k);
        for (size_t b = k * 8; b < bytes && b < k * 8 + 8; b++) {
            const size_t pixel = b / channels, channel = b % channels;
            out[channel * pixels + pixel] = (uint8_t)(v >> (8 * (b - k * 8)));
        }
    }
}

void rf_synthetic_fill(uint64_t seed, uint64_t index, uint32_t classes,
                       uint32_t height, uint32_t width, uint32_t channels,
                       rf_layout layout, void *dst)
{
    if (!dst)
        return;
    const size_t pixels = (size_t)height * width;
    struct sample_source s;
    init_source(&s, seed, index, classes, pixels * channels);
    if (layout == RF_LAYOUT_NCHW)
        fill_nchw(&s, pixels, channels, dst);
    else
        fill_nhwc(&s, pixels * channels, dst);
}

int64_t rf_synthetic_label(uint64_t seed, uint64_t index, uint32_t classes)
{
    if (classes == 0)
        return 0;
    return (int64_t)(rf__mix64(sample_key(seed, index), UINT64_MAX) % classes);
}
