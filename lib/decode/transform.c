/*
 * transform.c - the crop box and flip of each sample: torchvision's
 * RandomResizedCrop + RandomHorizontalFlip for `train`, Resize + CenterCrop
 * for `eval`, the whole image for `none`.
 *
 * Both follow torchvision step for step (transforms.py get_params,
 * functional.py center_crop and _compute_resized_output_size), down to
 * Python's rounding: round() there rounds halves to even and int() of a
 * non-negative number truncates.
 *
 * The library links no libm, so the little arithmetic this needs beyond
 * + - * / is written here: Python's round() and int(round(sqrt(v))) bit
 * for bit, exp() and log() to within a few ulps (they only shape
 * random draws).
 *
 * Where torchvision calls torch's global generator, we draw from a
 * counter-based one keyed on (seed, epoch, index): word k of a sample is
 * mix(key, k), so any sample's crop is computed alone, in any process and
 * in any order, with no state kept between calls. torch draws the area
 * and log-ratio in float32; we keep doubles, which changes no crop's odds
 * by more than float32's 6e-8.
 */
#include "config.h"

#include <string.h>

#include "common/assert.h"
#include "common/internal.h"
#include "decode/transform.h"

/* ---- arithmetic without libm ------------------------------------------ */

#define LN2 0.693147180559945309417
#define SQRT2 1.41421356237309504880

/* Python's round() of 0 <= x < 2^52: adding 2^52 leaves no bit below the
 * units, and IEEE round-to-nearest sends halves to the even neighbour.
 * volatile stops an x87 FPU from keeping the sum in extra precision. */
static double round_half_even(double x)
{
    const double shift = 0x1p52;
    volatile double shifted = x + shift;
    return shifted - shift;
}

static double from_bits(uint64_t bits)
{
    double x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

static uint64_t to_bits(double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    return bits;
}

/* sqrt(v) for a normal v > 0, to an ulp or so: halving the exponent gives
 * a start within 6%, and each Newton step squares the error. */
static double sqrt_estimate(double v)
{
    double s = from_bits((to_bits(v) >> 1) + ((uint64_t)1023 << 51));
    for (int step = 0; step < 5; step++)
        s = 0.5 * (s + v / s);
    return s;
}

/* Whether Python's math.sqrt(v), correctly rounded, is exactly m, a
 * double of at most 26 bits: then v is within a few ulps of m^2, so
 * v - m^2 is exact, and sqrt(v) is within half an ulp u of m when that
 * difference lies in (-m u_below, m u_above]; the u^2 / 4 of
 * (m +- u/2)^2 is finer than v's precision. (No square root of a double
 * lies exactly halfway between two doubles.) */
static bool sqrt_rounds_to(double v, double m)
{
    const double below = m - from_bits(to_bits(m) - 1);
    const double above = from_bits(to_bits(m) + 1) - m;
    const double diff = v - m * m;
    return diff > -m * below && diff <= m * above;
}

/* int(round(math.sqrt(v))) for 0 <= v < 2^48, bit for bit. First the
 * integer n nearest the exact root: (n - 1/2)^2 <= v <= (n + 1/2)^2,
 * squares exact in a double for n up to 2^24. Python's answer differs
 * only when its rounded root is exactly n +- 1/2, which round() sends to
 * the even side. v stays far below 2^48: images have at most 2^40 pixels
 * (RF_PARAM_MAX_PIXELS). */
static double rounded_sqrt(double v)
{
    if (!(v > 0))
        return 0;
    double n = round_half_even(sqrt_estimate(v));
    while (v > (n + 0.5) * (n + 0.5))
        n++;
    while (n > 0 && v < (n - 0.5) * (n - 0.5))
        n--;
    if (sqrt_rounds_to(v, n + 0.5))
        return round_half_even(n + 0.5);
    if (n > 0 && sqrt_rounds_to(v, n - 0.5))
        return round_half_even(n - 0.5);
    return n;
}

/* e^x for |x| < 700: x = k ln2 + r with |r| <= ln2 / 2, e^r from 16 terms
 * of its series (the rest is below 1e-18), 2^k set in the exponent. */
static double exp_approx(double x)
{
    const double k = round_half_even(x / LN2 + 1024) - 1024;
    const double r = x - k * LN2;
    double sum = 1, term = 1;
    for (int n = 1; n <= 16; n++) {
        term *= r / n;
        sum += term;
    }
    return sum * from_bits((uint64_t)(k + 1023) << 52);
}

/* ln x for a normal x > 0: x = m 2^e with m in [sqrt(1/2), sqrt(2)), and
 * ln m = 2 atanh(z), z = (m - 1) / (m + 1), |z| < 0.172, from 14 terms of
 * its series (the rest is below 1e-20). */
static double log_approx(double x)
{
    const uint64_t bits = to_bits(x);
    int exponent = (int)((bits >> 52) & 0x7ff) - 1023;
    double m =
        from_bits((bits & ((UINT64_C(1) << 52) - 1)) | ((uint64_t)1023 << 52));
    if (m > SQRT2) {
        m /= 2;
        exponent++;
    }
    const double z = (m - 1) / (m + 1), z2 = z * z;
    double sum = 0, power = z;
    for (int n = 1; n < 28; n += 2) {
        sum += power / n;
        power *= z2;
    }
    return 2 * sum + exponent * LN2;
}

/* ---- random draws ------------------------------------------------------ */

/* Keys of the two independent streams of a sample. The flip has its own
 * stream so that it does not depend on how many attempts the crop took. */
#define STREAM_CROP 0x52524343524f50ull /* "RRCCROP" */
#define STREAM_FLIP 0x48464c4950ull     /* "HFLIP" */

/* RandomResizedCrop tries this many random boxes before the central one. */
#define CROP_ATTEMPTS 10

/* The random words of one sample: word k is mix(key, k). */
struct draws {
    uint64_t key;
    uint64_t next;
};

static struct draws draws_for(uint64_t seed, uint64_t epoch, uint64_t index,
                              uint64_t stream)
{
    struct draws d;
    d.key = rf__mix64(rf__mix64(rf__mix64(seed, stream), epoch), index);
    d.next = 0;
    return d;
}

static uint64_t draw_word(struct draws *d)
{
    return rf__mix64(d->key, d->next++);
}

/* Uniform in [0, 1) with 53 random bits, as Python's random.random(). */
static double draw_unit(struct draws *d)
{
    return (double)(draw_word(d) >> 11) * 0x1.0p-53;
}

/* Uniform in [lo, hi), computed as torch's uniform_ and Python's
 * random.uniform compute it. */
static double draw_uniform(struct draws *d, double lo, double hi)
{
    return lo + (hi - lo) * draw_unit(d);
}

/* Uniform integer in [0, n], both ends included (torch.randint(0, n + 1)).
 * Words below 2^64 mod (n + 1) are drawn again: the rest hold every
 * residue equally often, so the result has no modulo bias. */
static uint32_t draw_upto(struct draws *d, uint32_t n)
{
    const uint64_t range = (uint64_t)n + 1;
    const uint64_t reject_below = (0 - range) % range;
    uint64_t word;
    do
        word = draw_word(d);
    while (word < reject_below);
    return (uint32_t)(word % range);
}

/* An integer box in source pixels. */
struct box {
    uint32_t left, top, width, height;
};

/* One attempt of get_params: a random area and log-uniform aspect ratio,
 * kept when the box fits the image. Returns whether it did. */
static bool try_random_box(const struct rf__transform_spec *t, struct draws *d,
                           uint32_t width, uint32_t height, struct box *b)
{
    const double area = (double)width * (double)height;
    const double target_area =
        area * draw_uniform(d, t->scale_min, t->scale_max);
    const double aspect = exp_approx(
        draw_uniform(d, log_approx(t->ratio_min), log_approx(t->ratio_max)));
    const double w = rounded_sqrt(target_area * aspect);
    const double h = rounded_sqrt(target_area / aspect);
    if (!(w > 0 && w <= width && h > 0 && h <= height))
        return false;
    b->width = (uint32_t)w;
    b->height = (uint32_t)h;
    /* torchvision draws the top before the left; so do we */
    b->top = draw_upto(d, height - b->height);
    b->left = draw_upto(d, width - b->width);
    return true;
}

/* get_params' fallback: the largest centred box whose aspect ratio is
 * within range, or the whole image when its own ratio is. The rounded
 * side never exceeds the image: w / ratio_min < height when the image is
 * narrower than ratio_min, and likewise for the other side. */
static void central_box(const struct rf__transform_spec *t, uint32_t width,
                        uint32_t height, struct box *b)
{
    const double in_ratio = (double)width / (double)height;
    double w = width, h = height;
    if (in_ratio < t->ratio_min)
        h = round_half_even(w / t->ratio_min);
    else if (in_ratio > t->ratio_max)
        w = round_half_even(h * t->ratio_max);
    b->width = (uint32_t)w;
    b->height = (uint32_t)h;
    b->top = (height - b->height) / 2;
    b->left = (width - b->width) / 2;
}

static void train_crop(const struct rf__transform_spec *t, uint64_t seed,
                       uint64_t epoch, uint64_t index, uint32_t width,
                       uint32_t height, struct rf__crop *out)
{
    struct draws crop = draws_for(seed, epoch, index, STREAM_CROP);
    struct box b;
    bool found = false;
    for (int attempt = 0; attempt < CROP_ATTEMPTS && !found; attempt++)
        found = try_random_box(t, &crop, width, height, &b);
    if (!found)
        central_box(t, width, height, &b);
    /* either way a non-empty box inside the image (see central_box()) */
    RF_ASSERT(b.width >= 1 && b.left + b.width <= width);
    RF_ASSERT(b.height >= 1 && b.top + b.height <= height);
    /* RandomHorizontalFlip: flip when torch.rand(1) < p */
    struct draws flip = draws_for(seed, epoch, index, STREAM_FLIP);
    *out = (struct rf__crop)RF_CROP_BOX(b.left, b.top, b.width, b.height,
                                        draw_unit(&flip) < t->flip_p);
}

/* One axis of Resize + CenterCrop: the whole source extent is resized
 * to `resized` and the output is the centre `out` of that, from *skip
 * on. torchvision pads an image smaller than the crop with zeros; we
 * resize the source to `out` instead, so a tiny image is stretched
 * rather than framed in black. */
static void centre_axis(uint32_t out, uint64_t resized, uint64_t *resized_to,
                        uint64_t *skip)
{
    if (out > resized) {
        *resized_to = out;
        *skip = 0;
        return;
    }
    /* crop_top = int(round((image_height - crop_height) / 2.0)) */
    const double offset = round_half_even((double)(resized - out) / 2.0);
    /* a non-empty crop inside the resized image */
    RF_ASSERT(out >= 1 && offset + out <= (double)resized);
    *resized_to = resized;
    *skip = (uint64_t)offset;
}

/* Resize(size) with an int size: the short side becomes `size`, the long
 * one int(size * long / short), truncated as torchvision does. */
static uint64_t resized_long_side(uint32_t size, uint32_t long_side,
                                  uint32_t short_side)
{
    return (uint64_t)((double)((uint64_t)size * long_side) / short_side);
}

static void whole_image(uint32_t width, uint32_t height, struct rf__crop *out)
{
    *out = (struct rf__crop)RF_CROP_BOX(0, 0, width, height, false);
}

bool rf__crop_pillow13_y_first(uint32_t width, uint32_t height,
                               uint64_t resized_w, uint64_t resized_h)
{
    const int64_t lost_y = (int64_t)height - (int64_t)resized_h;
    const int64_t lost_x = (int64_t)width - (int64_t)resized_w;
    return lost_y > 0 && lost_y > lost_x * 2;
}

static void eval_crop(const struct rf__transform_spec *t, uint32_t width,
                      uint32_t height, struct rf__crop *out)
{
    const bool portrait = width <= height;
    const uint64_t resized_w =
        portrait ? t->resize : resized_long_side(t->resize, width, height);
    const uint64_t resized_h =
        portrait ? resized_long_side(t->resize, height, width) : t->resize;
    whole_image(width, height, out);
    centre_axis(t->out_width, resized_w, &out->resized_width, &out->skip_x);
    centre_axis(t->out_height, resized_h, &out->resized_height, &out->skip_y);
    /* the sizes resized to: an axis shorter than the crop is resized to
     * the crop instead (centre_axis) */
    out->y_first = t->pillow >= 13 &&
                   rf__crop_pillow13_y_first(width, height, out->resized_width,
                                             out->resized_height);
}

void rf__transform_crop(const struct rf__transform_spec *t, uint64_t seed,
                        uint64_t epoch, uint64_t index, uint32_t width,
                        uint32_t height, struct rf__crop *out)
{
    /* An empty image has nothing to crop (torchvision would divide by
     * zero); the decoder refuses such images before they get here. */
    if (width == 0 || height == 0 || t->kind == RF_TRANSFORM_NONE) {
        whole_image(width, height, out);
        return;
    }
    if (t->kind == RF_TRANSFORM_TRAIN)
        train_crop(t, seed, epoch, index, width, height, out);
    else if (t->kind == RF_TRANSFORM_EVAL && t->resize > 0)
        eval_crop(t, width, height, out);
    else
        whole_image(width, height, out);
}

void rf__transform_choose_crop(void *key, uint32_t width, uint32_t height,
                               struct rf__crop *out)
{
    const struct rf__crop_key *k = key;
    rf__transform_crop(k->spec, k->seed, k->epoch, k->index, width, height,
                       out);
}

/* 8/7 of the output's short side, rounded: 256 for 224, the ratio of
 * torchvision's ImageNet recipes. 8s/7 is never a half, so rounding up
 * from .5 is the same as any other rounding. */
static uint32_t default_resize(uint32_t out_short)
{
    return (uint32_t)(((uint64_t)out_short * 8 + 3) / 7);
}

void rf__transform_from_params(struct rf__transform_spec *t,
                               const int64_t *params)
{
    t->kind = (rf_transform)params[RF_PARAM_TRANSFORM];
    t->out_height = (uint32_t)params[RF_PARAM_HEIGHT];
    t->out_width = (uint32_t)params[RF_PARAM_WIDTH];
    t->scale_min = (double)params[RF_PARAM_MIN_SCALE_PPM] / 1e6;
    t->scale_max = 1.0;
    t->ratio_min = 3.0 / 4.0;
    t->ratio_max = 4.0 / 3.0;
    t->flip_p = params[RF_PARAM_FLIP] ? 0.5 : 0.0;
    const uint32_t out_short =
        t->out_height < t->out_width ? t->out_height : t->out_width;
    t->resize = params[RF_PARAM_RESIZE] ? (uint32_t)params[RF_PARAM_RESIZE]
                                        : default_resize(out_short);
    t->pillow = (uint32_t)params[RF_PARAM_PILLOW];
}

uint64_t rf__crop_resized_width(const struct rf__crop *c, uint32_t out_w)
{
    return c->resized_width ? c->resized_width : out_w;
}

uint64_t rf__crop_resized_height(const struct rf__crop *c, uint32_t out_h)
{
    return c->resized_height ? c->resized_height : out_h;
}

struct rf__crop rf__crop_shown(const struct rf__crop *c, uint32_t out_w,
                               uint32_t out_h)
{
    const double to_x = c->width / rf__crop_resized_width(c, out_w);
    const double to_y = c->height / rf__crop_resized_height(c, out_h);
    return (struct rf__crop)RF_CROP_BOX(c->x + c->skip_x * to_x,
                                        c->y + c->skip_y * to_y, out_w * to_x,
                                        out_h * to_y, c->flip);
}
