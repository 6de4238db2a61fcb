/*
 * image-webp.h - WebP files made with libwebp's encoder, for test-webp and
 * test-png-webp: lossy and lossless, with and without alpha, of a picture
 * with transparent, opaque and partial areas.
 */
#ifndef RF_TEST_IMAGE_WEBP_H
#define RF_TEST_IMAGE_WEBP_H

#include <stdlib.h>
#include <string.h>
#include <webp/encode.h>

#include "image-pil.h"
#include "test.h"

enum webp_kind { LOSSY, LOSSY_ALPHA, LOSSLESS, LOSSLESS_ALPHA };

static inline uint8_t *rgba_picture(uint32_t w, uint32_t h, uint32_t seed)
{
    uint8_t *px = malloc((size_t)w * h * 4);
    CHECK(px);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++) {
            uint8_t *p = px + ((size_t)y * w + x) * 4;
            for (uint32_t c = 0; c < 3; c++)
                p[c] = picture(x + seed, y, c, w, h);
            /* transparent, opaque and partial areas */
            const uint32_t band = x * 4 / w;
            p[3] = band == 0   ? 0
                   : band == 3 ? 255
                               : (uint8_t)noise(x, y, 3, seed);
        }
    return px;
}

static inline struct blob make_webp(enum webp_kind kind, uint32_t w, uint32_t h)
{
    uint8_t *rgba = rgba_picture(w, h, 0);
    uint8_t *rgb = malloc((size_t)w * h * 3);
    CHECK(rgb);
    for (size_t i = 0; i < (size_t)w * h; i++)
        memcpy(rgb + 3 * i, rgba + 4 * i, 3);
    uint8_t *out = NULL;
    size_t size = 0;
    const int stride3 = (int)w * 3, stride4 = (int)w * 4;
    switch (kind) {
    case LOSSY:
        size = WebPEncodeRGB(rgb, (int)w, (int)h, stride3, 80, &out);
        break;
    case LOSSY_ALPHA:
        size = WebPEncodeRGBA(rgba, (int)w, (int)h, stride4, 80, &out);
        break;
    case LOSSLESS:
        size = WebPEncodeLosslessRGB(rgb, (int)w, (int)h, stride3, &out);
        break;
    case LOSSLESS_ALPHA:
        size = WebPEncodeLosslessRGBA(rgba, (int)w, (int)h, stride4, &out);
        break;
    }
    CHECK(size > 0);
    struct blob b = {0};
    blob_append(&b, out, size);
    WebPFree(out);
    free(rgb);
    free(rgba);
    return b;
}

#endif /* RF_TEST_IMAGE_WEBP_H */
