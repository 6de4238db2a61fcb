/*
 * test-webp.c - lib/decode/webp.c (whole images, see lib/decode/image.h)
 * against PIL, which torchvision opens images with.
 *
 * Lossy and lossless files, with and without alpha, are made with
 * libwebp's encoder (image-webp.h), and an animation is assembled by hand
 * from libwebp's frames; PIL's Image.open(f).convert("RGB") and
 * convert("L") of each must equal the decoder's pixels to the byte
 * (image-pil.h), for an animation its first frame. Truncated and damaged
 * files are refused with a reason, as PIL refuses them, with nothing on
 * stderr; the limits refuse an image (an animation's canvas too) before
 * its pixels are allocated. A case that needs PIL skips without it. Built
 * when configure found libwebp.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <webp/encode.h>

#include "decode/image.h"
#include "harness.h"
#include "image-pil.h"
#include "image-webp.h"
#include "test.h"

/* ---- WebP ---------------------------------------------------------------- */

static void blob_chunk(struct blob *b, const char *fourcc, const void *data,
                       size_t size)
{
    blob_append(b, fourcc, 4);
    blob_le(b, (uint32_t)size, 4);
    blob_append(b, data, size);
    if (size & 1)
        blob_append(b, "", 1);
}

/* An ANMF chunk: a lossless frame of w x h at (x, y) of the canvas. */
static void blob_frame(struct blob *b, uint32_t x, uint32_t y, uint32_t w,
                       uint32_t h, uint32_t seed)
{
    uint8_t *rgba = rgba_picture(w, h, seed);
    uint8_t *file = NULL;
    const size_t size =
        WebPEncodeLosslessRGBA(rgba, (int)w, (int)h, (int)w * 4, &file);
    CHECK(size > 12);
    struct blob frame = {0};
    blob_le(&frame, x / 2, 3);
    blob_le(&frame, y / 2, 3);
    blob_le(&frame, w - 1, 3);
    blob_le(&frame, h - 1, 3);
    blob_le(&frame, 100, 3);                   /* duration, ms */
    blob_le(&frame, 0, 1);                     /* blend, no dispose */
    blob_append(&frame, file + 12, size - 12); /* its VP8L chunk */
    blob_chunk(b, "ANMF", frame.data, frame.size);
    free(frame.data);
    WebPFree(file);
    free(rgba);
}

/* An animation of two frames of fw x fh on a canvas of w x h: the first
 * at (4, 2), leaving the rest of the canvas uncovered, then one at the
 * origin. */
static struct blob make_animation(uint32_t w, uint32_t h, uint32_t fw,
                                  uint32_t fh)
{
    struct blob body = {0};
    blob_append(&body, "WEBP", 4);
    struct blob vp8x = {0};
    blob_le(&vp8x, 0x12, 4); /* animation, alpha */
    blob_le(&vp8x, w - 1, 3);
    blob_le(&vp8x, h - 1, 3);
    blob_chunk(&body, "VP8X", vp8x.data, vp8x.size);
    const uint8_t anim[6] = {0, 0, 0, 0, 0, 0}; /* background, loops */
    blob_chunk(&body, "ANIM", anim, sizeof(anim));
    blob_frame(&body, 4, 2, fw, fh, 1);
    blob_frame(&body, 0, 0, fw, fh, 2);
    struct blob b = {0};
    blob_append(&b, "RIFF", 4);
    blob_le(&b, (uint32_t)body.size, 4);
    blob_append(&b, body.data, body.size);
    free(vp8x.data);
    free(body.data);
    return b;
}

TEST_CASE_LIMIT(test_webp_lossy, "webp", "lossy, with and without alpha", 60)
{
    struct blob b = make_webp(LOSSY, 61, 47);
    CHECK_EQ(compare_with_pil(WEBP, &b, "lossy"), 0);
    free(b.data);
    b = make_webp(LOSSY_ALPHA, 61, 47);
    CHECK_EQ(compare_with_pil(WEBP, &b, "lossy + alpha"), 0);
    free(b.data);
}

TEST_CASE_LIMIT(test_webp_lossless, "webp", "lossless, with and without alpha",
                60)
{
    struct blob b = make_webp(LOSSLESS, 61, 47);
    CHECK_EQ(compare_with_pil(WEBP, &b, "lossless"), 0);
    free(b.data);
    b = make_webp(LOSSLESS_ALPHA, 61, 47);
    CHECK_EQ(compare_with_pil(WEBP, &b, "lossless + alpha"), 0);
    free(b.data);
}

TEST_CASE_LIMIT(test_webp_animation, "webp", "an animation's first frame", 60)
{
    struct blob b = make_animation(40, 30, 32, 24);
    CHECK_EQ(compare_with_pil(WEBP, &b, "animation, first frame"), 0);
    free(b.data);
}

TEST_CASE_LIMIT(test_webp_truncated, "webp", "truncated files refused", 60)
{
    const enum webp_kind kinds[] = {LOSSY, LOSSLESS_ALPHA};
    for (size_t k = 0; k < 2; k++) {
        struct blob b = make_webp(kinds[k], 64, 48);
        const size_t cuts[] = {0, 10, 25, b.size / 2, b.size - 1};
        for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
            struct blob cut = {b.data, cuts[i], 0};
            check_refused(WEBP, &cut, "WebP");
        }
        free(b.data);
    }
}

TEST_CASE_LIMIT(test_webp_damaged, "webp", "damaged files refused", 60)
{
    struct blob b = make_webp(LOSSY, 64, 48);
    /* the VP8 key frame's start code (9d 01 2a), after RIFF, WEBP, the
     * chunk header and the 3-byte frame tag */
    CHECK(b.data[23] == 0x9d);
    b.data[23] = 0;
    check_refused(WEBP, &b, "WebP");
    free(b.data);
    b = make_webp(LOSSLESS, 64, 48);
    b.data[20] = 0; /* VP8L's signature byte 0x2f */
    check_refused(WEBP, &b, "WebP");
    free(b.data);
}

TEST_CASE_LIMIT(test_webp_limits, "webp", "limits refuse before allocating", 60)
{
    /* an animation's canvas of 16384 x 16384: refused before libwebp
     * makes the canvas, and before our buffer */
    struct blob huge = make_animation(16384, 16384, 8, 8);
    struct blob b = make_webp(LOSSLESS, 1000, 1000);
    check_limits(WEBP, &huge, "16384 x 16384 pixels is above the limit", &b,
                 4u << 20, 16u << 20);
    free(huge.data);
    free(b.data);
}

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
