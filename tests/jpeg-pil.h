/*
 * jpeg-pil.h - what the JPEG programs that compare with PIL share
 * (test-jpeg-pil, test-jpeg-cmyk, test-jpeg-exif): the tolerances, an
 * interpreter that has PIL (or the running case skips), temporary files,
 * tests/pil_reference.py's resize of a crop box, and one crop decoded in
 * both layouts compared with PIL on the full-size image and, under DCT
 * scaling, with PIL on TurboJPEG's own scaled decode.
 */
#ifndef RF_TEST_JPEG_PIL_H
#define RF_TEST_JPEG_PIL_H

#include <unistd.h>

#include "jpeg-decode.h"

/* ---- (b) crops and resizes against PIL ------------------------------- */

/*
 * Tolerances. At 8/8 the decoded pixels are PIL's (same libjpeg-turbo,
 * ISLOW, fancy upsampling) and the resampler is PIL's arithmetic, so at
 * most float rounding of a weight could differ: max 1 level, mean 0.1
 * (measured: 0 and 0, fractional boxes and flips included).
 *
 * With DCT scaling (M < 8) there are two references:
 *  - PIL resizing TurboJPEG's own M/8 decode with the box scaled by M/8:
 *    the same pixels in, so the same exact tolerance. This is what proves
 *    the box mapping (box * M/8 minus the crop offsets) and the cropped,
 *    skipped scaled decode right.
 *  - PIL on the full-size image, what torchvision users get. The reduced
 *    IDCT is a different antialiasing filter from PIL's triangle (sharper:
 *    it keeps every frequency below the new Nyquist), so this only bounds
 *    the cost of the speed-up. Measured: these fixtures (waves plus 2-pixel
 *    stripes, the worst case for any reduction; chroma 4:2:0 worst) mean
 *    <= 3.9 levels, max 59; two real photos (720 x 477, 120 random
 *    RandomResizedCrop boxes each) mean <= 4.1, max 35, typically 0.7 to
 *    2. Bounds with a little room: mean 5, max 80.
 */
#define EXACT_MAX 1
#define EXACT_MEAN 0.1
#define SCALED_MAX 80
#define SCALED_MEAN 5.0

static char python[256];
static char script[1024];

/* An interpreter that has PIL: $PYTHON, python3, or the system's own
 * (a pyenv python3 may lack the distribution's python3-pil). */
static inline bool find_python(void)
{
    const char *candidates[] = {getenv("PYTHON"), "python3",
                                "/usr/bin/python3"};
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        if (!candidates[i] || !candidates[i][0])
            continue;
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "%s -c 'import PIL' >/dev/null 2>&1",
                 candidates[i]);
        if (system(cmd) == 0) {
            snprintf(python, sizeof(python), "%s", candidates[i]);
            return true;
        }
    }
    return false;
}

/* Finds PIL and the script, or skips the running case. */
static inline void require_pil(void)
{
    if (!find_python())
        TEST_SKIP_BECAUSE("no python3 with PIL (python3-pil)");
    test_source_file(script, sizeof(script), "pil_reference.py");
    printf("  PIL through %s\n", python);
}

/* A temporary file holding head then body; the caller unlinks it. */
static inline void write_temp(const void *head, size_t head_len,
                              const void *body, size_t body_len, char *path,
                              size_t len)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(path, len, "%s/rf-test-jpeg-XXXXXX", tmp ? tmp : "/tmp");
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK_EQ(write(fd, head, head_len), (long long)head_len);
    CHECK_EQ(write(fd, body, body_len), (long long)body_len);
    CHECK_EQ(close(fd), 0);
}

static inline void write_temp_jpeg(const struct blob *b, char *path, size_t len)
{
    write_temp(b->data, b->size, "", 0, path, len);
}

/* PIL's resize of the crop's box of the image at path, to width x height,
 * or to the crop's resized size and then cut to its window. */
static inline uint8_t *pil_resize(const char *path, const struct rf__crop *c,
                                  uint32_t width, uint32_t height, bool exif)
{
    char cmd[2048], window[128] = "";
    if (c->resized_width)
        snprintf(window, sizeof(window), " %llu %llu %llu %llu",
                 (unsigned long long)rf__crop_resized_width(c, width),
                 (unsigned long long)rf__crop_resized_height(c, height),
                 (unsigned long long)c->skip_x, (unsigned long long)c->skip_y);
    /* %.17g: Python reads back the very doubles the decoder used */
    snprintf(cmd, sizeof(cmd),
             "%s '%s' '%s' %.17g %.17g %.17g %.17g %u %u %d %d%s", python,
             script, path, c->x, c->y, c->x + c->width, c->y + c->height, width,
             height, c->flip, exif, window);
    return test_command_output(cmd, (size_t)width * height * 3);
}

struct diff {
    int max;
    double mean;
};

static inline struct diff compare(const uint8_t *a, const uint8_t *b, size_t n)
{
    struct diff d = {0, 0};
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const int e = a[i] > b[i] ? a[i] - b[i] : b[i] - a[i];
        d.max = e > d.max ? e : d.max;
        total += (uint64_t)e;
    }
    d.mean = (double)total / (double)n;
    return d;
}

static inline void check_diff(struct diff d, int max, double mean)
{
    CHECK_LE(d.max, max);
    CHECK(d.mean <= mean);
}

struct pil_case {
    const char *name;
    struct rf__crop crop;
    uint32_t width, height;
};

/* The DCT scale the decoder picks for the case. */
static inline unsigned scale_of(const struct pil_case *pc)
{
    const struct rf__crop shown =
        rf__crop_shown(&pc->crop, pc->width, pc->height);
    return rf__jpeg_scale_for(shown.width, shown.height, pc->width, pc->height);
}

/* Ours in both layouts, as NHWC. */
static inline uint8_t *decode_layout(struct rf__jpeg_decoder *dec,
                                     const struct blob *b,
                                     const struct rf__jpeg_options *opt,
                                     const struct pil_case *pc,
                                     rf_layout layout)
{
    struct chooser ch = {.whole = false, .crop = pc->crop};
    uint8_t *px =
        decode_with(dec, b, opt, &ch, pc->width, pc->height, 3, layout);
    if (!px)
        fprintf(stderr, "%s: %s\n", pc->name, reason);
    CHECK(px);
    if (layout == RF_LAYOUT_NHWC)
        return px;
    uint8_t *t = nchw_to_nhwc(px, pc->width, pc->height, 3);
    free(px);
    return t;
}

/* PIL's resize of TurboJPEG's M/8 decode, the box scaled by M/8 exactly
 * as lib/jpeg.c scales it. */
static inline uint8_t *pil_on_scaled(const struct blob *b, uint32_t img_w,
                                     uint32_t img_h, unsigned m,
                                     const struct pil_case *pc)
{
    const uint32_t sw = (img_w * m + 7) / 8, sh = (img_h * m + 7) / 8;
    uint8_t *scaled = tj_decode(b, sw, sh, 3);
    char head[64], path[512];
    snprintf(head, sizeof(head), "P6\n%u %u\n255\n", sw, sh);
    write_temp(head, strlen(head), scaled, (size_t)sw * sh * 3, path,
               sizeof(path));
    const struct rf__crop *c = &pc->crop;
    const double k = m / 8.0;
    struct rf__crop at_scale = *c;
    at_scale.x *= k;
    at_scale.y *= k;
    at_scale.width *= k;
    at_scale.height *= k;
    uint8_t *ref = pil_resize(path, &at_scale, pc->width, pc->height, false);
    unlink(path);
    free(scaled);
    return ref;
}

static inline void check_against_pil(struct rf__jpeg_decoder *dec,
                                     const struct blob *b, const char *path,
                                     const struct pil_case *pc,
                                     const struct rf__jpeg_options *opt,
                                     bool exif)
{
    const size_t n = (size_t)pc->width * pc->height * 3;
    uint8_t *full = pil_resize(path, &pc->crop, pc->width, pc->height, exif);
    const unsigned m = scale_of(pc);
    struct chooser probe = {.whole = true};
    uint8_t *scaled = NULL;
    if (m < 8 && !exif) {
        /* the image size, from a cheap whole decode to 8 x 8 */
        free(decode_with(dec, b, opt, &probe, 8, 8, 3, RF_LAYOUT_NHWC));
        scaled = pil_on_scaled(b, probe.seen_width, probe.seen_height, m, pc);
    }
    for (int layout = 0; layout < 2; layout++) {
        uint8_t *ours = decode_layout(dec, b, opt, pc, (rf_layout)layout);
        const struct diff d = compare(ours, full, n);
        const struct diff ds = scaled ? compare(ours, scaled, n) : d;
        if (layout == 0 && scaled)
            printf("  %-28s M=%u/8 max %2d mean %.3f; same-scale PIL "
                   "max %d mean %.3f\n",
                   pc->name, m, d.max, d.mean, ds.max, ds.mean);
        else if (layout == 0)
            printf("  %-28s M=%u/8 max %2d mean %.3f\n", pc->name, m, d.max,
                   d.mean);
        if (m == 8)
            check_diff(d, EXACT_MAX, EXACT_MEAN);
        else
            check_diff(d, SCALED_MAX, SCALED_MEAN);
        if (scaled)
            check_diff(ds, EXACT_MAX, EXACT_MEAN);
        free(ours);
    }
    free(full);
    free(scaled);
}

#endif /* RF_TEST_JPEG_PIL_H */
