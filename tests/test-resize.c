/*
 * test-resize.c - lib/resize.c's SIMD levels against each other.
 *
 * The resampler has a plain C pass, an SSE2 pass and an AVX2 pass, chosen
 * at run time; all must write the same bytes. test-jpeg-pil checks the level
 * this CPU picks against PIL; this test feeds random pixels through every
 * level the CPU can run and requires identical output, over random boxes
 * (shrinking by up to 5x, which needs more taps than the AVX2 windows
 * hold, and enlarging), 1 and 3 channels, NHWC and NCHW, mirrored and
 * transposed targets, and rows pushed in random bunches. Each input image
 * is its own allocation of exactly its size plus RF_RESIZE_ROW_SLACK, so
 * that a SIMD load past that is an out-of-bounds read under ASan (CI runs
 * this test so). A case per kind of resize; each skips on a CPU with no
 * SIMD level.
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode/resize.h"
#include "harness.h"
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
    /* custom horizontal taps instead of PIL's (custom_case) */
    bool custom;
    uint32_t ksize;
    int32_t *first, *count, *weights;
    /* as lib/jpeg.c feeds it (jpeg_shaped_case): only the columns
     * [crop_x, crop_x + crop_width) and rows [rows_lo, rows_hi) are
     * decoded, and they come in batches of 16 rows with 32 bytes of slack
     * after the last */
    bool jpeg_shaped;
    uint32_t crop_x, crop_width, rows_lo, rows_hi;
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

/* Plans both axes of a case into rs, as the case says. */
static void plan_axes(const struct resize_case *c, struct rf__resizer *rs)
{
    const bool t = c->dest.transpose;
    const uint32_t cols = t ? c->dest.height : c->dest.width;
    const uint32_t rows = t ? c->dest.width : c->dest.height;
    if (c->custom)
        CHECK_EQ(rf__resample_axis_custom(&rs->horizontal, cols, c->ksize,
                                          c->first, c->count, c->weights),
                 0);
    else
        CHECK_EQ(rf__resample_axis_plan(&rs->horizontal, c->in_width, c->box[0],
                                        c->box[2], cols),
                 0);
    CHECK_EQ(rf__resample_axis_plan(&rs->vertical, c->in_height, c->box[1],
                                    c->box[3], rows),
             0);
    if (c->jpeg_shaped) {
        rf__resample_axis_shift(&rs->horizontal, c->crop_x);
        rf__resample_axis_shift(&rs->vertical, c->rows_lo);
    }
}

/* Pushes the decoded rows as lib/jpeg.c does: copied into a buffer of 16
 * rows plus the slack, allocated to exactly that size. */
static void push_like_jpeg(const struct resize_case *c, const uint8_t *image,
                           struct rf__resizer *rs)
{
    const size_t in_row = (size_t)c->in_width * c->channels;
    const size_t row_bytes = (size_t)c->crop_width * c->channels;
    uint8_t *batch = malloc(16 * row_bytes + RF_RESIZE_ROW_SLACK);
    CHECK(batch != NULL);
    for (uint32_t y = c->rows_lo; y < c->rows_hi;) {
        uint32_t n = c->rows_hi - y;
        if (n > 16)
            n = 16;
        for (uint32_t r = 0; r < n; r++)
            memcpy(batch + r * row_bytes,
                   image + (size_t)(y + r) * in_row +
                       (size_t)c->crop_x * c->channels,
                   row_bytes);
        memset(batch + n * row_bytes, 0, RF_RESIZE_ROW_SLACK);
        rf__resizer_push_rows(rs, batch, n, row_bytes);
        y += n;
    }
    free(batch);
}

/* Pushes whole rows straight from the image, in random bunches of 1 to 16
 * as libjpeg hands them out. */
static void push_whole_rows(const struct resize_case *c, const uint8_t *image,
                            struct rf__resizer *rs)
{
    const size_t row_bytes = (size_t)c->in_width * c->channels;
    uint32_t y = 0;
    while (y < c->in_height && !rf__resizer_done(rs)) {
        uint32_t n = 1 + random_below(16);
        if (n > c->in_height - y)
            n = c->in_height - y;
        if (n == 1)
            rf__resizer_push_row(rs, image + (size_t)y * row_bytes);
        else
            rf__resizer_push_rows(rs, image + (size_t)y * row_bytes, n,
                                  row_bytes);
        y += n;
    }
}

/* Runs one case at one level; returns the target's bytes (caller frees). */
static uint8_t *run_case(const struct resize_case *c, const uint8_t *image,
                         enum rf__resize_simd simd, size_t *size)
{
    struct rf__resizer rs;
    memset(&rs, 0, sizeof(rs));
    rs.simd_limit = simd;
    plan_axes(c, &rs);
    *size = (size_t)c->dest.width * c->dest.height * c->dest.channels;
    uint8_t *out = malloc(*size);
    CHECK(out != NULL);
    memset(out, 0xa5, *size);
    struct rf__resize_dest dest = c->dest;
    dest.dst = out;
    const uint32_t width = c->jpeg_shaped ? c->crop_width : c->in_width;
    CHECK_EQ(rf__resizer_begin(&rs, c->channels, width, &dest), 0);
    CHECK_EQ(rs.simd, simd);
    if (c->jpeg_shaped)
        push_like_jpeg(c, image, &rs);
    else
        push_whole_rows(c, image, &rs);
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
            if (c->custom)
                fprintf(stderr, "made-up taps, kernel of %u\n", c->ksize);
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

/* Horizontal taps made up rather than planned, so that every window is
 * as wide as its kernel: a planned pixel uses at most ksize - 1 taps, so
 * the last tap pair of the widest AVX2 windows would otherwise always
 * have weight 0 and a mistake there would go unseen. Weights are random,
 * at most 1 << 22 in all per pixel. */
static struct resize_case custom_case(void)
{
    struct resize_case c;
    memset(&c, 0, sizeof(c));
    c.custom = true;
    c.channels = 3;
    c.ksize = 2 + random_below(9); /* 2 to 10 taps: 1 to 5 pairs */
    c.in_width = c.ksize + random_below(300);
    c.in_height = 4 + random_below(40);
    c.dest.channels = 3;
    c.dest.layout = RF_LAYOUT_NHWC;
    c.dest.mirror_x = random_below(2) == 0;
    c.dest.width = 1 + random_below(120);
    c.dest.height = 1 + random_below(40);
    c.box[0] = 0;
    c.box[1] = 0;
    c.box[2] = c.in_width;
    c.box[3] = c.in_height;
    const uint32_t n = c.dest.width;
    c.first = calloc(n, sizeof(*c.first));
    c.count = calloc(n, sizeof(*c.count));
    c.weights = calloc((size_t)n * c.ksize, sizeof(*c.weights));
    CHECK(c.first && c.count && c.weights);
    int32_t at = 0;
    for (uint32_t o = 0; o < n; o++) {
        /* mostly full windows; first never decreases, as planned ones */
        c.count[o] = random_below(4) ? (int32_t)c.ksize
                                     : (int32_t)random_below(c.ksize + 1);
        at += (int32_t)random_below(3);
        if (at + (int32_t)c.ksize > (int32_t)c.in_width)
            at = (int32_t)c.in_width - (int32_t)c.ksize;
        c.first[o] = at;
        int32_t left = 1 << 22;
        for (int32_t t = 0; t < c.count[o]; t++) {
            const int32_t w = (int32_t)random_below((uint32_t)left + 1);
            c.weights[(size_t)o * c.ksize + t] = w;
            left -= w;
        }
    }
    return c;
}

/* A crop as the training transform and lib/jpeg.c make it: axes planned
 * on the whole image, the decode narrowed to the columns they read (the
 * left edge moved down to a multiple of 16, a margin kept) and to their
 * rows, then both axes shifted. The box may leave the image on any side,
 * which gives output pixels and rows that read nothing. */
static struct resize_case jpeg_shaped_case(void)
{
    struct resize_case c = training_case();
    c.jpeg_shaped = true;
    const double sx = random_between(-0.1, 0.1) * (c.box[2] - c.box[0]);
    const double sy = random_between(-0.1, 0.1) * (c.box[3] - c.box[1]);
    c.box[0] += sx;
    c.box[2] += sx;
    c.box[1] += sy;
    c.box[3] += sy;
    struct rf__resample_axis h, v;
    memset(&h, 0, sizeof(h));
    memset(&v, 0, sizeof(v));
    CHECK_EQ(rf__resample_axis_plan(&h, c.in_width, c.box[0], c.box[2],
                                    c.dest.width),
             0);
    CHECK_EQ(rf__resample_axis_plan(&v, c.in_height, c.box[1], c.box[3],
                                    c.dest.height),
             0);
    uint32_t x_lo, x_hi;
    rf__resample_axis_span(&h, &x_lo, &x_hi);
    rf__resample_axis_span(&v, &c.rows_lo, &c.rows_hi);
    const uint32_t margin = 2;
    c.crop_x = (x_lo > margin ? x_lo - margin : 0) / 16 * 16;
    const uint32_t end =
        x_hi + margin < c.in_width ? x_hi + margin : c.in_width;
    c.crop_width = end - c.crop_x;
    rf__resample_axis_free(&h);
    rf__resample_axis_free(&v);
    return c;
}

static void free_case(struct resize_case *c)
{
    free(c->first);
    free(c->count);
    free(c->weights);
}

/* The best level this CPU runs; skips the case where that is the scalar
 * pass, with nothing to compare it with. */
static enum rf__resize_simd best_level(void)
{
    const enum rf__resize_simd best = rf__resize_simd_available();
    if (best == RF_RESIZE_SIMD_SCALAR)
        TEST_SKIP_BECAUSE("no SIMD level to compare with the scalar pass");
    printf("best level on this CPU: %s\n", simd_name(best));
    return best;
}

enum { RESIZES = 300 };

TEST_CASE(test_random_boxes, "levels", "random boxes")
{
    const enum rf__resize_simd best = best_level();
    for (int i = 0; i < RESIZES; i++) {
        const struct resize_case c = random_case();
        check_levels_agree(&c, best);
    }
}

TEST_CASE(test_training_crops, "levels", "training crops")
{
    const enum rf__resize_simd best = best_level();
    for (int i = 0; i < RESIZES; i++) {
        const struct resize_case c = training_case();
        check_levels_agree(&c, best);
    }
}

TEST_CASE(test_made_up_full_width_taps, "levels", "made-up full-width taps")
{
    const enum rf__resize_simd best = best_level();
    for (int i = 0; i < RESIZES; i++) {
        struct resize_case c = custom_case();
        check_levels_agree(&c, best);
        free_case(&c);
    }
}

TEST_CASE(test_fed_as_jpeg_feeds_them, "levels",
          "rows fed as lib/jpeg.c feeds them")
{
    const enum rf__resize_simd best = best_level();
    for (int i = 0; i < RESIZES; i++) {
        const struct resize_case c = jpeg_shaped_case();
        check_levels_agree(&c, best);
    }
}

/* Every SIMD level this CPU runs writes the scalar pass's bytes, 300
 * resizes a case. */

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
