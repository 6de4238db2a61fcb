/*
 * test-transform.c - the crop boxes of the train, eval and none
 * transforms: deterministic in (seed, epoch, index), always inside the
 * image, flips at the configured rate, eval boxes exact, and train crops
 * distributed as torchvision's RandomResizedCrop, checked against an
 * independent Python model of it (tests/rrc_reference.py).
 *
 * The statistical cases (one per image shape) skip without python3 or
 * the script.
 */
#include "config.h"

#include <sys/wait.h>
#include <unistd.h>

#include "common/internal.h"
#include "decode/transform.h"
#include "harness.h"
#include "test.h"

/* The library and its tests link no libm. */
static double magnitude(double x)
{
    return x < 0 ? -x : x;
}

static bool is_whole(double x)
{
    return x >= 0 && x == (double)(uint64_t)x;
}

#define CHECK_NEAR(a, b)                                                       \
    do {                                                                       \
        const double a_ = (a), b_ = (b);                                       \
        if (!(magnitude(a_ - b_) <= 1e-9 * (1 + magnitude(b_)))) {             \
            fprintf(stderr, "%s:%d: %s == %s failed: %.12g vs %.12g\n",        \
                    __FILE__, __LINE__, #a, #b, a_, b_);                       \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* A transform spec built the way the library builds it: from a config
 * holding the defaults plus the given changes. */
static struct rf__transform_spec spec_of(rf_transform kind, int64_t height,
                                         int64_t width, int64_t resize,
                                         int64_t flip)
{
    rf_config *cfg = rf_config_create();
    CHECK(cfg);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_TRANSFORM, kind));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_HEIGHT, height));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_WIDTH, width));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_RESIZE, resize));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_FLIP, flip));
    struct rf__transform_spec t;
    rf__transform_from_params(&t, cfg->params);
    rf_config_free(cfg);
    return t;
}

static struct rf__transform_spec train_spec(void)
{
    return spec_of(RF_TRANSFORM_TRAIN, 224, 224, 0, 1);
}

static bool same_crop(const struct rf__crop *a, const struct rf__crop *b)
{
    return a->x == b->x && a->y == b->y && a->width == b->width &&
           a->height == b->height && a->flip == b->flip &&
           a->resized_width == b->resized_width &&
           a->resized_height == b->resized_height && a->skip_x == b->skip_x &&
           a->skip_y == b->skip_y && a->y_first == b->y_first;
}

TEST_CASE_LIMIT(test_params, "train", "torchvision's parameters", 10)
{
    struct rf__transform_spec t = train_spec();
    CHECK_EQ(t.kind, RF_TRANSFORM_TRAIN);
    CHECK(t.scale_min == 0.08 && t.scale_max == 1.0);
    CHECK(t.ratio_min == 0.75 && t.ratio_max == 4.0 / 3.0);
    CHECK(t.flip_p == 0.5);
    CHECK_EQ(t.resize, 256); /* 224 * 8 / 7 */
    CHECK(spec_of(RF_TRANSFORM_TRAIN, 224, 224, 0, 0).flip_p == 0.0);
    t = spec_of(RF_TRANSFORM_EVAL, 100, 400, 0, 1);
    CHECK_EQ(t.out_height, 100);
    CHECK_EQ(t.out_width, 400);
    CHECK_EQ(t.resize, 114); /* 100 * 8 / 7 = 114.29, from the short side */
    CHECK_EQ(spec_of(RF_TRANSFORM_EVAL, 224, 224, 300, 1).resize, 300);
}

TEST_CASE(test_deterministic, "train", "deterministic in seed, epoch and index")
{
    const struct rf__transform_spec t = train_spec();
    unsigned same_epoch = 0, same_index = 0, same_seed = 0;
    for (uint64_t index = 0; index < 1000; index++) {
        struct rf__crop a, b, c, d, e;
        rf__transform_crop(&t, 42, 3, index, 500, 375, &a);
        rf__transform_crop(&t, 42, 3, index, 500, 375, &b);
        CHECK(same_crop(&a, &b));
        rf__transform_crop(&t, 42, 4, index, 500, 375, &c);
        rf__transform_crop(&t, 42, 3, index + 1000, 500, 375, &d);
        rf__transform_crop(&t, 43, 3, index, 500, 375, &e);
        same_epoch += same_crop(&a, &c);
        same_index += same_crop(&a, &d);
        same_seed += same_crop(&a, &e);
    }
    /* two independent crops of a 500x375 image almost never coincide */
    CHECK_LE(same_epoch, 2);
    CHECK_LE(same_index, 2);
    CHECK_LE(same_seed, 2);
}

/* The box get_params falls back to, written again from torchvision's
 * code; test_fallback_boxes checks it against boxes worked out by hand. */
static void fallback_box(uint32_t w, uint32_t h, struct rf__crop *box)
{
    /* 4w/3 and 4h/3 are never halves: adding 1/2 and truncating rounds
     * them as Python's round() does */
    double bw = w, bh = h;
    if ((double)w / h < 0.75)
        bh = (uint32_t)(bw / 0.75 + 0.5);
    else if ((double)w / h > 4.0 / 3.0)
        bw = (uint32_t)(bh * (4.0 / 3.0) + 0.5);
    box->width = bw;
    box->height = bh;
    /* get_params' // on integers */
    const uint32_t left = (w - (uint32_t)bw) / 2, top = (h - (uint32_t)bh) / 2;
    box->x = left;
    box->y = top;
    box->flip = false;
}

static void check_inside(const struct rf__crop *c, uint32_t w, uint32_t h)
{
    CHECK(c->resized_width == 0 && c->resized_height == 0);
    CHECK(c->x >= 0 && c->y >= 0);
    CHECK(c->width > 0 && c->height > 0);
    CHECK(c->x + c->width <= w * (1 + 1e-12));
    CHECK(c->y + c->height <= h * (1 + 1e-12));
}

/* A resize-then-crop (eval) or a plain box (none): the box inside the
 * image and the output's window inside the resized box. */
static void check_window(const struct rf__crop *c,
                         const struct rf__transform_spec *t, uint32_t w,
                         uint32_t h)
{
    struct rf__crop box = *c;
    box.resized_width = box.resized_height = box.skip_x = box.skip_y = 0;
    check_inside(&box, w, h);
    CHECK_LE((uint64_t)c->skip_x + t->out_width,
             rf__crop_resized_width(c, t->out_width));
    CHECK_LE((uint64_t)c->skip_y + t->out_height,
             rf__crop_resized_height(c, t->out_height));
    const struct rf__crop shown =
        rf__crop_shown(c, t->out_width, t->out_height);
    check_inside(&shown, w, h);
}

static void check_train_crop(const struct rf__crop *c, uint32_t w, uint32_t h)
{
    check_inside(c, w, h);
    /* train boxes are whole pixels */
    CHECK(is_whole(c->x) && is_whole(c->y));
    CHECK(is_whole(c->width) && is_whole(c->height));
}

/* Images so narrow or so flat that no random box fits: every crop is the
 * central fallback. 10x5000: ratio 0.002 < 3/4, so w = 10 and
 * h = round(10 / 0.75) = round(13.33) = 13, top = (5000 - 13) // 2 = 2493.
 * 5000x10 is its transpose; 1x1 can only be itself. */
TEST_CASE(test_fallback_boxes, "train", "fallback boxes worked out by hand")
{
    const struct rf__transform_spec t = train_spec();
    const struct {
        uint32_t w, h;
        struct rf__crop box;
    } boxes[] = {
        {10, 5000, RF_CROP_BOX(0, 2493, 10, 13, false)},
        {5000, 10, RF_CROP_BOX(2493, 0, 13, 10, false)},
        {1, 1, RF_CROP_BOX(0, 0, 1, 1, false)},
        {1, 5000, RF_CROP_BOX(0, 2499, 1, 1, false)}, /* round(1.33) = 1 */
    };
    for (size_t k = 0; k < sizeof boxes / sizeof boxes[0]; k++) {
        struct rf__crop expect = {0};
        fallback_box(boxes[k].w, boxes[k].h, &expect);
        CHECK(same_crop(&expect, &boxes[k].box));
        for (uint64_t index = 0; index < 1000; index++) {
            struct rf__crop c;
            rf__transform_crop(&t, 7, 0, index, boxes[k].w, boxes[k].h, &c);
            c.flip = false;
            CHECK(same_crop(&c, &expect));
        }
    }
}

/* An image size from a word: mostly ordinary, sometimes extreme. */
static void random_size(uint64_t word, uint32_t *w, uint32_t *h)
{
    const uint32_t limit = (word & 3) == 0 ? 20000 : 2000;
    *w = 1 + (uint32_t)((word >> 8) % limit);
    *h = 1 + (uint32_t)((word >> 32) % limit);
    if ((word & 12) == 0) /* a sliver of one pixel or a few */
        *h = 1 + (uint32_t)((word >> 40) % 4);
}

TEST_CASE(test_always_inside, "train", "always inside the image")
{
    const struct rf__transform_spec kinds[] = {
        train_spec(),
        spec_of(RF_TRANSFORM_EVAL, 224, 224, 0, 1),
        spec_of(RF_TRANSFORM_EVAL, 100, 400, 0, 1),
        spec_of(RF_TRANSFORM_EVAL, 224, 224, 200, 1),
        spec_of(RF_TRANSFORM_NONE, 224, 224, 0, 1),
    };
    for (uint64_t n = 0; n < 20000; n++) {
        uint32_t w, h;
        random_size(rf__mix64(99, n), &w, &h);
        if (n % 2)
            random_size(rf__mix64(98, n), &h, &w);
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            struct rf__crop c;
            rf__transform_crop(&kinds[k], 5, n, n * 3, w, h, &c);
            if (kinds[k].kind == RF_TRANSFORM_TRAIN)
                check_train_crop(&c, w, h);
            else
                check_window(&c, &kinds[k], w, h);
        }
    }
}

/* Flips are Bernoulli(0.5): 100000 draws have a standard deviation of
 * sqrt(100000 * 0.25) = 158; 4 sigma is 632. */
TEST_CASE(test_flip_rate, "train", "flips at the configured rate")
{
    const struct rf__transform_spec on = train_spec();
    const struct rf__transform_spec off =
        spec_of(RF_TRANSFORM_TRAIN, 224, 224, 0, 0);
    const struct rf__transform_spec eval =
        spec_of(RF_TRANSFORM_EVAL, 224, 224, 0, 1);
    long flips = 0;
    for (uint64_t index = 0; index < 100000; index++) {
        struct rf__crop c;
        rf__transform_crop(&on, 11, 2, index, 640, 480, &c);
        flips += c.flip;
        rf__transform_crop(&off, 11, 2, index, 640, 480, &c);
        CHECK(!c.flip);
        rf__transform_crop(&eval, 11, 2, index, 640, 480, &c);
        CHECK(!c.flip);
    }
    CHECK_LE(labs(flips - 50000), 632);
}

/* The part of a w x h image that the output shows is the box (x, y, bw,
 * bh) in source pixels. */
static void check_box(const struct rf__transform_spec *t, uint32_t w,
                      uint32_t h, double x, double y, double bw, double bh)
{
    struct rf__crop c;
    rf__transform_crop(t, 1, 2, 3, w, h, &c);
    const struct rf__crop shown =
        rf__crop_shown(&c, t->out_width, t->out_height);
    CHECK_NEAR(shown.x, x);
    CHECK_NEAR(shown.y, y);
    CHECK_NEAR(shown.width, bw);
    CHECK_NEAR(shown.height, bh);
    CHECK(!c.flip);
}

/* eval resizes the whole w x h image to rw x rh, as torchvision's Resize
 * does, and the output is the part from (sx, sy) on, its CenterCrop. y
 * first: Pillow 13's pass order, where the height loses more than twice
 * as many pixels as the width. */
static void check_resize_then_crop(const struct rf__transform_spec *t,
                                   uint32_t w, uint32_t h, uint64_t rw,
                                   uint64_t rh, uint64_t sx, uint64_t sy,
                                   bool y_first)
{
    struct rf__crop c;
    rf__transform_crop(t, 1, 2, 3, w, h, &c);
    const struct rf__crop want = {.width = w,
                                  .height = h,
                                  .resized_width = rw,
                                  .resized_height = rh,
                                  .skip_x = sx,
                                  .skip_y = sy,
                                  .y_first = y_first};
    CHECK(same_crop(&c, &want));
}

/* Resize(256) then CenterCrop(224), by hand:
 *  500x375: the short side 375 -> 256, the long 500 -> int(256 * 500 / 375)
 *  = int(341.33) = 341. Top = round((256 - 224) / 2) = 16; left =
 *  round((341 - 224) / 2) = round(58.5) = 58, Python rounding half to
 *  even. Back in source pixels: x = 58 * 500 / 341, y = 16 * 375 / 256,
 *  width = 224 * 500 / 341, height = 224 * 375 / 256.
 *  375x500 is the transpose. 256x256: no resize, the box (16, 16, 224,
 *  224). 333x1000: 333 -> 256, 1000 -> int(768.77) = 768; top =
 *  round(544 / 2) = 272: y = 272 * 1000 / 768, x = 16 * 333 / 256. */
TEST_CASE(test_eval_boxes, "eval", "boxes exact")
{
    const struct rf__transform_spec t =
        spec_of(RF_TRANSFORM_EVAL, 224, 224, 0, 1);
    check_box(&t, 500, 375, 58.0 * 500 / 341, 16.0 * 375 / 256,
              224.0 * 500 / 341, 224.0 * 375 / 256);
    check_box(&t, 375, 500, 16.0 * 375 / 256, 58.0 * 500 / 341,
              224.0 * 375 / 256, 224.0 * 500 / 341);
    check_box(&t, 256, 256, 16, 16, 224, 224);
    check_box(&t, 333, 1000, 16.0 * 333 / 256, 272.0 * 1000 / 768,
              224.0 * 333 / 256, 224.0 * 1000 / 768);
    /* 59.5 rounds to 60, the even neighbour: 500x373 -> 256 x int(343.16)
     * = 343; left = round(119 / 2) = 60 */
    check_box(&t, 500, 373, 60.0 * 500 / 343, 16.0 * 373 / 256,
              224.0 * 500 / 343, 224.0 * 373 / 256);
    check_resize_then_crop(&t, 500, 375, 341, 256, 58, 16, false);
    check_resize_then_crop(&t, 375, 500, 256, 341, 16, 58, false);
    check_resize_then_crop(&t, 256, 256, 256, 256, 16, 16, false);
    check_resize_then_crop(&t, 333, 1000, 256, 768, 16, 272, true);
    check_resize_then_crop(&t, 500, 373, 343, 256, 60, 16, false);
}

/* Output 100 high, 400 wide with resize 114: a square 50x50 image becomes
 * 114x114, narrower than 400. torchvision would pad the sides; we take the
 * whole width. Vertically: top = round((114 - 100) / 2) = 7.
 * Output 224x224 with resize 200: 80x60 becomes int(200 * 80 / 60) = 266
 * by 200, too short for 224: the whole height; left = round(42 / 2) =
 * 21. */
TEST_CASE(test_eval_smaller_than_crop, "eval", "image smaller than the crop")
{
    const struct rf__transform_spec t =
        spec_of(RF_TRANSFORM_EVAL, 100, 400, 0, 1);
    check_box(&t, 50, 50, 0, 7.0 * 50 / 114, 50, 100.0 * 50 / 114);
    const struct rf__transform_spec small =
        spec_of(RF_TRANSFORM_EVAL, 224, 224, 200, 1);
    check_box(&small, 80, 60, 21.0 * 80 / 266, 0, 224.0 * 80 / 266, 60);
    /* the short axis is resized to the output itself, no window */
    check_resize_then_crop(&t, 50, 50, 400, 114, 0, 7, false);
    check_resize_then_crop(&small, 80, 60, 266, 224, 21, 0, false);
    /* Resize(65536) of a 1 x 70000 image: 65536 x 4,587,520,000, past 32
     * bits; its centre 4 x 4 from (32766, 2293759998) */
    const struct rf__transform_spec huge =
        spec_of(RF_TRANSFORM_EVAL, 4, 4, 65536, 1);
    check_resize_then_crop(&huge, 1, 70000, 65536, UINT64_C(4587520000), 32766,
                           UINT64_C(2293759998), false);
}

/* The pass order of RF_PARAM_PILLOW's release, by Pillow 13's rule (y
 * first when the height loses more than twice the width's pixels) on
 * either side of its edge, and never before 13. Resize(50), CenterCrop(40):
 *  100x200 -> 50x100: loses 50 and 100, exactly twice: x first;
 *  100x202 -> 50x101: loses 50 and 101: y first;
 *  200x100 -> 100x50: the width loses more: x first;
 *  40x300 -> 50x375: enlarged, nothing lost: x first;
 *  500x1000 -> 50x100 (lost 450 and 900): x first; with Resize(38),
 *  shorter than the crop, 38x76 becomes 40x76 (lost 460 and 924): y
 *  first, by the sizes actually resized to. */
TEST_CASE(test_eval_pass_order, "eval", "pass order of the Pillow release")
{
    struct rf__transform_spec t = spec_of(RF_TRANSFORM_EVAL, 40, 40, 50, 1);
    CHECK_EQ(t.pillow, 13); /* the default */
    const struct {
        uint32_t w, h;
        bool y_first;
    } cases[] = {{100, 200, false},
                 {100, 202, true},
                 {200, 100, false},
                 {40, 300, false},
                 {500, 1000, false}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct rf__crop c;
        t.pillow = 13;
        rf__transform_crop(&t, 1, 2, 3, cases[i].w, cases[i].h, &c);
        CHECK_EQ(c.y_first, cases[i].y_first);
        t.pillow = 12;
        rf__transform_crop(&t, 1, 2, 3, cases[i].w, cases[i].h, &c);
        CHECK(!c.y_first);
    }
    const struct rf__transform_spec short_side =
        spec_of(RF_TRANSFORM_EVAL, 40, 40, 38, 1);
    struct rf__crop stretched;
    rf__transform_crop(&short_side, 1, 2, 3, 500, 1000, &stretched);
    CHECK_EQ(stretched.resized_width, 40);
    CHECK_EQ(stretched.resized_height, 76);
    CHECK(stretched.y_first);
    /* train crops are resized x first, whatever the release */
    const struct rf__transform_spec train = train_spec();
    for (uint64_t index = 0; index < 200; index++) {
        struct rf__crop c;
        rf__transform_crop(&train, 1, 2, index, 300, 900, &c);
        CHECK(!c.y_first);
    }
}

TEST_CASE(test_none, "none", "the whole image")
{
    const struct rf__transform_spec t =
        spec_of(RF_TRANSFORM_NONE, 224, 224, 0, 1);
    check_box(&t, 640, 480, 0, 0, 640, 480);
    check_box(&t, 1, 1, 0, 0, 1, 1);
}

/* ---- statistics against the Python model --------------------------- */

#define BINS 10
#define STAT_DRAWS 200000
#define STAT_SEED 20240611

enum feature { AREA, LOG_ASPECT, CENTRE_X, CENTRE_Y, FEATURES };

static const char *const feature_names[FEATURES] = {"area", "log_aspect",
                                                    "centre_x", "centre_y"};

struct crop_stats {
    long draws, fallback_box;
    long bins[FEATURES][BINS];
};

/* Same operations, same order as rrc_reference.py: a crop lands in the
 * same bin on both sides. */
static int unit_bin(double value)
{
    const int bin = (int)(value * BINS);
    return bin < BINS - 1 ? bin : BINS - 1;
}

/* Bins of w/h between exp(-0.3 + 0.06 k), rounded to 4 digits: ten equal
 * steps of log(w/h) over [-0.3, 0.3], without calling log(). */
static int log_aspect_bin(double w, double h)
{
    static const double edges[BINS - 1] = {0.7866, 0.8353, 0.8869, 0.9418, 1.0,
                                           1.0618, 1.1275, 1.1972, 1.2712};
    const double ratio = w / h;
    int bin = 0;
    while (bin < BINS - 1 && ratio >= edges[bin])
        bin++;
    return bin;
}

static void add_crop(struct crop_stats *s, const struct rf__crop *c, uint32_t w,
                     uint32_t h, const struct rf__crop *fallback)
{
    s->draws++;
    s->fallback_box += c->x == fallback->x && c->y == fallback->y &&
                       c->width == fallback->width &&
                       c->height == fallback->height;
    s->bins[AREA][unit_bin(c->width * c->height / ((double)w * h))]++;
    s->bins[LOG_ASPECT][log_aspect_bin(c->width, c->height)]++;
    s->bins[CENTRE_X][unit_bin((c->x + c->width / 2) / w)]++;
    s->bins[CENTRE_Y][unit_bin((c->y + c->height / 2) / h)]++;
}

static void c_stats(uint32_t w, uint32_t h, struct crop_stats *s)
{
    const struct rf__transform_spec t = train_spec();
    struct rf__crop fallback;
    fallback_box(w, h, &fallback);
    memset(s, 0, sizeof *s);
    for (uint64_t index = 0; index < STAT_DRAWS; index++) {
        struct rf__crop c;
        rf__transform_crop(&t, STAT_SEED, 0, index, w, h, &c);
        add_crop(s, &c, w, h, &fallback);
    }
}

/* Reads "NAME c0 c1 ..." into the feature it names; other lines are
 * single numbers. Returns false on a line it does not understand. */
static bool parse_line(const char *line, struct crop_stats *s)
{
    char *end;
    for (int f = 0; f < FEATURES; f++) {
        const size_t len = strlen(feature_names[f]);
        if (strncmp(line, feature_names[f], len) != 0 || line[len] != ' ')
            continue;
        const char *p = line + len;
        for (int b = 0; b < BINS; b++, p = end) {
            s->bins[f][b] = strtol(p, &end, 10);
            if (end == p)
                return false;
        }
        return true;
    }
    if (strncmp(line, "draws ", 6) == 0)
        s->draws = strtol(line + 6, &end, 10);
    else if (strncmp(line, "fallback_box ", 13) == 0)
        s->fallback_box = strtol(line + 13, &end, 10);
    else
        return strncmp(line, "fallback ", 9) == 0;
    return true;
}

/* Runs the Python model. Returns 0, or TEST_SKIP when python3 or the
 * script is missing. */
static int python_stats(const char *script, uint32_t w, uint32_t h,
                        struct crop_stats *s)
{
    char command[4200], line[512];
    CHECK(!strchr(script, '\''));
    snprintf(command, sizeof command, "python3 '%s' %u %u %d %d", script, w, h,
             STAT_DRAWS, STAT_SEED);
    FILE *pipe = popen(command, "r");
    CHECK(pipe);
    memset(s, 0, sizeof *s);
    bool parsed = true;
    while (fgets(line, sizeof line, pipe))
        parsed = parse_line(line, s) && parsed;
    const int status = pclose(pipe);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        return TEST_SKIP; /* the shell found no python3 */
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(parsed);
    CHECK_EQ(s->draws, STAT_DRAWS);
    return 0;
}

/* Two-sample chi-square of equal-sized histograms, sum (a - b)^2 / (a + b)
 * over the bins either uses: chi-square with (bins used - 1) degrees of
 * freedom when both come from one distribution. */
static double chi_square(const long *a, const long *b, int *used)
{
    double sum = 0;
    *used = 0;
    for (int k = 0; k < BINS; k++) {
        if (a[k] + b[k] == 0)
            continue;
        const double d = (double)(a[k] - b[k]);
        sum += d * d / (double)(a[k] + b[k]);
        ++*used;
    }
    return sum;
}

/* The chi-square with 9 degrees of freedom exceeds 45 with probability
 * 9e-7; fewer degrees of freedom make it rarer still. A correct
 * implementation fails one of the 20 histograms with odds near 1 in
 * 50000 (and since both sides are seeded, a pass is repeatable); a wrong
 * scale range, linear instead of log-uniform ratios or a right and bottom
 * edge the crop cannot touch give values from 100 to many thousands. */
#define CHI_SQUARE_LIMIT 45.0

static void print_bins(const char *label, const long *bins)
{
    fprintf(stderr, "  %-7s", label);
    for (int k = 0; k < BINS; k++)
        fprintf(stderr, " %ld", bins[k]);
    fprintf(stderr, "\n");
}

/* Compares every histogram of one image size and prints each statistic,
 * so that a failure shows all that differ. Returns how many do. */
static int compare_stats(uint32_t w, uint32_t h, const struct crop_stats *c,
                         const struct crop_stats *py)
{
    int failed = 0;
    for (int f = 0; f < FEATURES; f++) {
        int used;
        const double chi2 = chi_square(c->bins[f], py->bins[f], &used);
        const bool differ = chi2 > CHI_SQUARE_LIMIT;
        printf("%ux%u %-10s chi2 %8.2f (%d bins)%s\n", w, h, feature_names[f],
               chi2, used, differ ? " DIFFERENT" : "");
        if (differ) {
            print_bins("C", c->bins[f]);
            print_bins("Python", py->bins[f]);
            failed++;
        }
    }
    /* crops on the fallback box: two binomial counts of one rate p differ
     * with a variance of 2 N p (1 - p); allow 5 standard deviations (and
     * a count of 1), compared squared */
    const double p = (c->fallback_box + py->fallback_box) / (2.0 * c->draws);
    const double variance = 2.0 * c->draws * p * (1 - p);
    const double excess = labs(c->fallback_box - py->fallback_box) - 1.0;
    const bool differ = excess > 0 && excess * excess > 25 * variance;
    printf("%ux%u fallback box %ld vs %ld (variance %.0f)%s\n", w, h,
           c->fallback_box, py->fallback_box, variance,
           differ ? " DIFFERENT" : "");
    return failed + differ;
}

/* The C crops of a w x h image against the Python model's, histogram by
 * histogram; skips without python3 or the script. */
static void check_against_python(uint32_t w, uint32_t h)
{
    char script[4096];
    test_source_file(script, sizeof script, "rrc_reference.py");
    if (access(script, R_OK) != 0)
        TEST_SKIP_BECAUSE("no %s", script);
    struct crop_stats c, py;
    if (python_stats(script, w, h, &py) != 0)
        TEST_SKIP_BECAUSE("python3 not found");
    c_stats(w, h, &c);
    CHECK_EQ(compare_stats(w, h, &c, &py), 0);
}

TEST_CASE(test_python_500x375, "python",
          "500x375 crops distributed as the model's")
{
    check_against_python(500, 375);
}

TEST_CASE(test_python_375x500, "python",
          "375x500 crops distributed as the model's")
{
    check_against_python(375, 500);
}

TEST_CASE(test_python_64x1000, "python",
          "64x1000 crops distributed as the model's")
{
    check_against_python(64, 1000);
}

TEST_CASE(test_python_1000x64, "python",
          "1000x64 crops distributed as the model's")
{
    check_against_python(1000, 64);
}

TEST_CASE(test_python_250x1000, "python",
          "250x1000 crops distributed as the model's")
{
    check_against_python(250, 1000);
}

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
