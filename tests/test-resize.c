/*
 * test-resize.c - lib/resize.c's SIMD levels against each other.
 *
 * The resampler has a plain C pass, an SSE2 pass and an AVX2 pass, chosen
 * at run time; all must write the same bytes. test-jpeg checks the level
 * this CPU picks against PIL; this test feeds random pixels through every
 * level the CPU can run and requires identical output, over random boxes
 * (shrinking by up to 5x, which needs more taps than the AVX2 windows
 * hold, and enlarging), 1 and 3 channels, NHWC and NCHW, mirrored and
 * transposed targets, and rows pushed in random bunches. Each input image
 * is its own allocation of exactly its size plus RF_RESIZE_ROW_SLACK, so
 * that a SIMD load past that is an out-of-bounds read under ASan (CI runs
 * this test so).
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resize.h"
#include "test.h"

/* xorshift64*: the test's own reproducible randomness */
static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t next_random(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1du;
}

static uint32_t random_below(uint32_t n)
{
    return (uint32_t)(next_random() % n);
}

/* In [lo, hi). */
static double random_between(double lo, double hi)
{
    return lo + (hi - lo) * (double)(next_random() >> 11) / 9007199254740992.0;
}

struct resize_case {
    uint32_t in_width, in_height, channels;
    double box[4]; /* x0, y0, x1, y1 in input pixels */
    struct rf__resize_dest dest;
};

static const char *simd_name(enum rf__resize_simd simd)
{
    switch (simd) {
    case RF_RESIZE_SIMD_SCALAR:
        return "scalar";
    case RF_RESIZE_SIMD_SSE2:
        return "SSE2";
    case RF_RESIZE_SIMD_AVX2:
        return "AVX2";
    default:
        return "best";
    }
}

/* Runs one case at one level; returns the target's bytes (caller frees). */
static uint8_t *run_case(const struct resize_case *c, const uint8_t *image,
                         enum rf__resize_simd simd, size_t *size)
{
    struct rf__resizer rs;
    memset(&rs, 0, sizeof(rs));
    rs.simd_limit = simd;
    const bool t = c->dest.transpose;
    const uint32_t cols = t ? c->dest.height : c->dest.width;
    const uint32_t rows = t ? c->dest.width : c->dest.height;
    CHECK_EQ(rf__resample_axis_plan(&rs.horizontal, c->in_width, c->box[0],
                                    c->box[2], cols),
             0);
    CHECK_EQ(rf__resample_axis_plan(&rs.vertical, c->in_height, c->box[1],
                                    c->box[3], rows),
             0);
    *size = (size_t)c->dest.width * c->dest.height * c->dest.channels;
    uint8_t *out = malloc(*size);
    CHECK(out != NULL);
    memset(out, 0xa5, *size);
    struct rf__resize_dest dest = c->dest;
    dest.dst = out;
    CHECK_EQ(rf__resizer_begin(&rs, c->channels, c->in_width, &dest), 0);
    CHECK_EQ(rs.simd, simd);
    const size_t row_bytes = (size_t)c->in_width * c->channels;
    uint32_t y = 0;
    while (y < c->in_height && !rf__resizer_done(&rs)) {
        /* bunches of 1 to 16 rows, as libjpeg hands them out */
        uint32_t n = 1 + random_below(16);
        if (n > c->in_height - y)
            n = c->in_height - y;
        if (n == 1)
            rf__resizer_push_row(&rs, image + (size_t)y * row_bytes);
        else
            rf__resizer_push_rows(&rs, image + (size_t)y * row_bytes, n,
                                  row_bytes);
        y += n;
    }
    CHECK(rf__resizer_done(&rs));
    rf__resizer_free(&rs);
    return out;
}

static void describe(const struct resize_case *c)
{
    fprintf(stderr,
            "case: %ux%u x%u, box (%.3f, %.3f, %.3f, %.3f) -> %ux%u x%u "
            "%s%s%s%s\n",
            c->in_width, c->in_height, c->channels, c->box[0], c->box[1],
            c->box[2], c->box[3], c->dest.width, c->dest.height,
            c->dest.channels,
            c->dest.layout == RF_LAYOUT_NCHW ? "NCHW" : "NHWC",
            c->dest.transpose ? " transposed" : "",
            c->dest.mirror_x ? " mirror-x" : "",
            c->dest.mirror_y ? " mirror-y" : "");
}

/* A box of 30% to 100% of each side, anywhere inside the image. */
static void random_box(struct resize_case *c)
{
    const double bw = c->in_width * random_between(0.3, 1.0);
    const double bh = c->in_height * random_between(0.3, 1.0);
    c->box[0] = random_between(0.0, c->in_width - bw);
    c->box[1] = random_between(0.0, c->in_height - bh);
    c->box[2] = c->box[0] + bw;
    c->box[3] = c->box[1] + bh;
}

static struct resize_case random_case(void)
{
    struct resize_case c;
    memset(&c, 0, sizeof(c));
    c.channels = random_below(4) == 0 ? 1 : 3;
    c.in_width = 8 + random_below(600);
    c.in_height = 8 + random_below(400);
    c.dest.transpose = random_below(6) == 0;
    c.dest.mirror_x = random_below(2) == 0;
    c.dest.mirror_y = random_below(5) == 0;
    c.dest.layout = random_below(4) == 0 ? RF_LAYOUT_NCHW : RF_LAYOUT_NHWC;
    c.dest.channels = c.channels == 1 && random_below(2) ? 3 : c.channels;
    /* outputs from a fifth of the input (many taps) to twice it */
    const uint32_t cols = 1 + (uint32_t)(c.in_width * random_between(0.2, 2.0));
    const uint32_t rows =
        1 + (uint32_t)(c.in_height * random_between(0.2, 2.0));
    c.dest.width = c.dest.transpose ? rows : cols;
    c.dest.height = c.dest.transpose ? cols : rows;
    random_box(&c);
    return c;
}

static uint8_t *random_image(const struct resize_case *c)
{
    const size_t n = (size_t)c->in_width * c->in_height * c->channels;
    uint8_t *image = malloc(n + RF_RESIZE_ROW_SLACK);
    CHECK(image != NULL);
    /* the slack too: its bytes meet zero weights, whatever they are */
    for (size_t i = 0; i < n + RF_RESIZE_ROW_SLACK; i++)
        image[i] = (uint8_t)next_random();
    return image;
}

/* Every level available here writes the bytes of the plain C pass. */
static void check_levels_agree(const struct resize_case *c,
                               enum rf__resize_simd best)
{
    uint8_t *image = random_image(c);
    size_t size, other_size;
    uint8_t *reference = run_case(c, image, RF_RESIZE_SIMD_SCALAR, &size);
    for (int level = RF_RESIZE_SIMD_SSE2; level <= (int)best; level++) {
        uint8_t *other =
            run_case(c, image, (enum rf__resize_simd)level, &other_size);
        CHECK_EQ(other_size, size);
        if (memcmp(reference, other, size) != 0) {
            size_t i = 0;
            while (reference[i] == other[i])
                i++;
            describe(c);
            fprintf(stderr, "%s differs from scalar at byte %zu: %u vs %u\n",
                    simd_name((enum rf__resize_simd)level), i, other[i],
                    reference[i]);
            exit(1);
        }
        free(other);
    }
    free(reference);
    free(image);
}

/* The shapes the training transform makes most: a crop of an
 * ImageNet-sized image onto 224 x 224, RGB, NHWC, flipped or not. */
static struct resize_case training_case(void)
{
    struct resize_case c;
    memset(&c, 0, sizeof(c));
    c.channels = 3;
    c.in_width = 100 + random_below(400);
    c.in_height = 100 + random_below(400);
    c.dest.channels = 3;
    c.dest.width = 224;
    c.dest.height = 224;
    c.dest.layout = RF_LAYOUT_NHWC;
    c.dest.mirror_x = random_below(2) == 0;
    random_box(&c);
    return c;
}

int main(void)
{
    const enum rf__resize_simd best = rf__resize_simd_available();
    printf("best level on this CPU: %s\n", simd_name(best));
    if (best == RF_RESIZE_SIMD_SCALAR) {
        puts("no SIMD level to compare with the scalar pass: skipped");
        return TEST_SKIP;
    }
    for (int i = 0; i < 300; i++) {
        const struct resize_case c = random_case();
        check_levels_agree(&c, best);
    }
    for (int i = 0; i < 300; i++) {
        const struct resize_case c = training_case();
        check_levels_agree(&c, best);
    }
    if (best < RF_RESIZE_SIMD_AVX2)
        puts("this CPU has no AVX2: only SSE2 was compared");
    puts("600 resizes: every SIMD level wrote the scalar pass's bytes");
    return 0;
}
