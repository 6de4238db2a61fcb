/*
 * synthetic-jpeg.c - rf_synthetic_jpeg(): ImageNet-like JPEG files made
 * from (seed, index), for benchmarks and tests that need real decoding
 * work without a dataset on disk.
 *
 * White noise would make absurdly large files, and flat colour absurdly
 * small ones, so the picture is built like a photo: a smooth gradient
 * between four corner colours, a few soft-edged ellipses, fractal "value
 * noise" (random lattices at several scales, smoothly interpolated, with
 * the larger scales stronger, like the 1/f spectrum of natural images)
 * and mild grain. At ImageNet's sizes that gives files of 40-150 KB, like
 * ImageNet's own. Everything comes from rf__mix64 keyed on (seed, index);
 * no global state, no libm.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "common/internal.h"

#define MAX_SIDE                                                               \
    65500u /* libjpeg-turbo's JPEG_MAX_DIMENSION (the format's is 65535) */
#define SHAPES_MAX 6
/* How strong the fine texture is, for 4:4:4 at quality 95 and for 4:2:0
 * at 90 (which keeps far less of it), at ImageNet's average size. */
#define DETAIL_444 1.8f
#define DETAIL_420 4.0f
#define REF_PIXELS 150000.0f /* ImageNet's average image, about 430 x 350 */

/* Scales of the value noise, in pixels between lattice points, and the
 * strength of each (pixel levels, luminance and colour). */
static const struct octave {
    float spacing, luma, chroma;
} octaves[] = {
    {96.0f, 34.0f, 16.0f}, {40.0f, 22.0f, 8.0f}, {16.0f, 16.0f, 5.0f},
    {6.0f, 13.0f, 0.0f},   {2.5f, 10.0f, 0.0f},
};
#define OCTAVES (sizeof(octaves) / sizeof(octaves[0]))

/* Counter-mode randomness: word k of the stream keyed on `key`. */
struct stream {
    uint64_t key, counter;
};

static uint64_t next_word(struct stream *s)
{
    return rf__mix64(s->key, s->counter++);
}

/* Uniform in [0, 1). */
static float next_unit(struct stream *s)
{
    return (float)(next_word(s) >> 40) * (1.0f / 16777216.0f);
}

/* Uniform in [lo, hi). */
static float next_between(struct stream *s, float lo, float hi)
{
    return lo + (hi - lo) * next_unit(s);
}

struct ellipse {
    float cx, cy, inv_rx2, inv_ry2, softness, color[3];
    float reach; /* half the width of its box, rim included */
};

/* One scale of value noise: a lattice of random values in [-1, 1] for
 * luminance and two colour differences. */
struct lattice {
    uint32_t columns, rows;
    float spacing;
    float *values; /* rows x columns x 3 */
};

struct painting {
    uint32_t width, height;
    float corners[4][3]; /* top left, top right, bottom left, bottom right */
    struct ellipse shapes[SHAPES_MAX];
    unsigned shape_count;
    struct lattice lattices[OCTAVES];
    uint64_t grain_key;
    float grain;
    float detail; /* strength of the fine octaves and of the grain */
};

/* ---- choosing ----------------------------------------------------------- */

/* ImageNet-like sizes: short side 256..500, width / height in 3/4..4/3. */
static void choose_size(struct stream *s, uint32_t *width, uint32_t *height)
{
    const uint32_t short_side = 256 + (uint32_t)(next_word(s) % 245);
    const float aspect = next_between(s, 0.75f, 4.0f / 3.0f);
    if (aspect >= 1.0f) {
        *height = short_side;
        *width = (uint32_t)((float)short_side * aspect + 0.5f);
    } else {
        *width = short_side;
        *height = (uint32_t)((float)short_side / aspect + 0.5f);
    }
}

static void choose_shapes(struct painting *p, struct stream *s)
{
    const float short_side =
        (float)(p->width < p->height ? p->width : p->height);
    p->shape_count = 3 + (unsigned)(next_word(s) % (SHAPES_MAX - 2));
    for (unsigned i = 0; i < p->shape_count; i++) {
        struct ellipse *e = &p->shapes[i];
        const float rx = short_side * next_between(s, 0.05f, 0.4f);
        const float ry = short_side * next_between(s, 0.05f, 0.4f);
        e->cx = next_between(s, 0.0f, (float)p->width);
        e->cy = next_between(s, 0.0f, (float)p->height);
        e->inv_rx2 = 1.0f / (rx * rx);
        e->inv_ry2 = 1.0f / (ry * ry);
        e->softness = next_between(s, 0.05f, 0.6f);
        for (int c = 0; c < 3; c++)
            e->color[c] = next_between(s, 20.0f, 235.0f);
        /* the rim ends at rx * sqrt(1 + softness) < rx * (1 + softness) */
        e->reach = rx * (1.0f + e->softness) + 1.0f;
    }
}

static void choose_colors(struct painting *p, struct stream *s)
{
    float base[3];
    for (int c = 0; c < 3; c++)
        base[c] = next_between(s, 50.0f, 205.0f);
    for (int corner = 0; corner < 4; corner++)
        for (int c = 0; c < 3; c++)
            p->corners[corner][c] = base[c] + next_between(s, -50.0f, 50.0f);
}

static int make_lattice(struct lattice *l, float spacing, uint32_t width,
                        uint32_t height, struct stream *s)
{
    l->spacing = spacing;
    l->columns = (uint32_t)((float)width / spacing) + 2;
    l->rows = (uint32_t)((float)height / spacing) + 2;
    const size_t count = (size_t)l->columns * l->rows * 3;
    l->values = malloc(count * sizeof(*l->values));
    if (!l->values)
        return -ENOMEM;
    for (size_t i = 0; i < count; i++)
        l->values[i] = next_unit(s) * 2.0f - 1.0f;
    return 0;
}

static void free_painting(struct painting *p)
{
    for (size_t o = 0; o < OCTAVES; o++)
        free(p->lattices[o].values);
}

/* Smaller images get more detail per pixel, as photos scaled down from
 * a camera have: with DETAIL_* that keeps every file within ImageNet's
 * 40-150 KB. */
static int plan_painting(struct painting *p, struct stream *s, bool fine)
{
    p->detail = fine ? DETAIL_444 : DETAIL_420;
    const float ratio = REF_PIXELS / ((float)p->width * (float)p->height);
    p->detail *= ratio;
    choose_colors(p, s);
    choose_shapes(p, s);
    for (size_t o = 0; o < OCTAVES; o++)
        if (make_lattice(&p->lattices[o], octaves[o].spacing, p->width,
                         p->height, s) < 0)
            return -ENOMEM;
    p->grain_key = next_word(s);
    p->grain = next_between(s, 3.0f, 7.0f);
    return 0;
}

/* ---- painting ----------------------------------------------------------- */

static float smooth(float t)
{
    return t * t * (3.0f - 2.0f * t);
}

static void paint_background(const struct painting *p, uint32_t y, float *row)
{
    const float v = (float)y / (float)(p->height > 1 ? p->height - 1 : 1);
    const float du = 1.0f / (float)(p->width > 1 ? p->width - 1 : 1);
    for (int c = 0; c < 3; c++) {
        const float left =
            p->corners[0][c] + (p->corners[2][c] - p->corners[0][c]) * v;
        const float right =
            p->corners[1][c] + (p->corners[3][c] - p->corners[1][c]) * v;
        for (uint32_t x = 0; x < p->width; x++)
            row[3 * x + c] = left + (right - left) * (float)x * du;
    }
}

/* Ellipses with a soft rim: fully opaque inside 1 - softness (in units
 * of the squared normalised radius), fading out to 1 + softness. */
/* The columns [*first, *end) of a row that an ellipse may touch. */
static void shape_columns(const struct painting *p, const struct ellipse *e,
                          uint32_t *first, uint32_t *end)
{
    const float left = e->cx - e->reach, right = e->cx + e->reach;
    *first = left <= 0.0f ? 0 : (uint32_t)left;
    *end = right >= (float)p->width ? p->width : (uint32_t)right + 1;
}

static void paint_shapes(const struct painting *p, uint32_t y, float *row)
{
    for (unsigned i = 0; i < p->shape_count; i++) {
        const struct ellipse *e = &p->shapes[i];
        const float dy = (float)y - e->cy;
        const float dy2 = dy * dy * e->inv_ry2;
        if (dy2 >= 1.0f + e->softness)
            continue;
        uint32_t first, end;
        shape_columns(p, e, &first, &end);
        for (uint32_t x = first; x < end; x++) {
            const float dx = (float)x - e->cx;
            const float d2 = dx * dx * e->inv_rx2 + dy2;
            const float t = (1.0f + e->softness - d2) / (2.0f * e->softness);
            if (t <= 0.0f)
                continue;
            const float alpha = t >= 1.0f ? 1.0f : smooth(t);
            float *px = row + (size_t)3 * x;
            for (int c = 0; c < 3; c++)
                px[c] += (e->color[c] - px[c]) * alpha;
        }
    }
}

/* Row y of a lattice, interpolated between its two lattice rows. */
static void lattice_line(const struct lattice *l, uint32_t y, float *line)
{
    const float gy = (float)y / l->spacing;
    const uint32_t j = (uint32_t)gy;
    const float t = smooth(gy - (float)j);
    const size_t n = (size_t)l->columns * 3;
    const float *above = l->values + j * n, *below = above + n;
    for (size_t i = 0; i < n; i++)
        line[i] = above[i] + (below[i] - above[i]) * t;
}

/* Where each column falls between lattice points: the left point and
 * the smoothed weight of the right one, the same for every row. */
struct columns {
    uint32_t *left;
    float *weight;
};

static void place_columns(const struct lattice *l, uint32_t width,
                          struct columns *c)
{
    const float step = 1.0f / l->spacing;
    for (uint32_t x = 0; x < width; x++) {
        const float gx = (float)x * step;
        c->left[x] = (uint32_t)gx;
        c->weight[x] = smooth(gx - (float)c->left[x]);
    }
}

/* The value noise of one row, summed over the octaves before it is
 * added to the pixels: luminance, and two colour differences (left out
 * of the fine octaves, where the eye and 4:2:0 barely see them). */
struct texture {
    float *luma, *color_a, *color_b;
};

static float lerp_at(const float *line, uint32_t left, float t)
{
    const float a = line[(size_t)3 * left], b = line[(size_t)3 * left + 3];
    return a + (b - a) * t;
}

static void add_octave(const struct painting *p, size_t o,
                       const struct columns *c, const float *restrict line,
                       const struct texture *restrict tex)
{
    const float chroma = octaves[o].chroma;
    const float luma = octaves[o].luma * (chroma == 0.0f ? p->detail : 1.0f);
    for (uint32_t x = 0; x < p->width; x++)
        tex->luma[x] += lerp_at(line, c->left[x], c->weight[x]) * luma;
    if (chroma == 0.0f)
        return;
    for (uint32_t x = 0; x < p->width; x++) {
        tex->color_a[x] += lerp_at(line + 1, c->left[x], c->weight[x]) * chroma;
        tex->color_b[x] += lerp_at(line + 2, c->left[x], c->weight[x]) * chroma;
    }
}

static void apply_texture(const struct painting *p,
                          const struct texture *restrict tex,
                          float *restrict row)
{
    for (uint32_t x = 0; x < p->width; x++) {
        const float l = tex->luma[x], a = tex->color_a[x], b = tex->color_b[x];
        float *px = row + (size_t)3 * x;
        px[0] += l + a;
        px[1] += l - 0.5f * (a + b);
        px[2] += l + b;
    }
}

/* Adds grain, a triangular distribution in +-grain from two random bytes
 * per channel. A 64-bit LCG seeded per row gives them: its top 48 bits
 * are good enough for grain, and it costs a multiply per pixel where a
 * full mix would cost five times that. */
static void add_grain(const struct painting *p, uint32_t y, float *row)
{
    const float scale = p->grain * p->detail / 255.0f;
    uint64_t state = rf__mix64(p->grain_key, y);
    for (size_t i = 0; i < (size_t)p->width * 3; i += 3) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const uint64_t w = state >> 16;
        for (int c = 0; c < 3; c++) {
            const int two = (int)((w >> (16 * c)) & 0xff) +
                            (int)((w >> (16 * c + 8)) & 0xff) - 255;
            row[i + c] += (float)two * scale;
        }
    }
}

static void store_row(const float *row, size_t count, uint8_t *out)
{
    for (size_t i = 0; i < count; i++) {
        const float v = row[i] + 0.5f;
        out[i] = v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)v;
    }
}

/* Scratch for painting: one row of floats, its texture, one interpolated
 * line per lattice, and the column placement of every lattice. */
struct scratch {
    float *row, *lines[OCTAVES];
    struct texture texture;
    struct columns columns[OCTAVES];
    float *floats;
    uint32_t *lefts;
};

static int make_scratch(const struct painting *p, struct scratch *s)
{
    size_t floats = (size_t)p->width * 6;
    for (size_t o = 0; o < OCTAVES; o++)
        floats += (size_t)p->lattices[o].columns * 3 + p->width;
    s->floats = malloc(floats * sizeof(*s->floats));
    s->lefts = malloc(OCTAVES * p->width * sizeof(*s->lefts));
    if (!s->floats || !s->lefts) {
        free(s->floats);
        free(s->lefts);
        return -ENOMEM;
    }
    float *f = s->floats;
    s->row = f;
    s->texture.luma = f + (size_t)p->width * 3;
    s->texture.color_a = s->texture.luma + p->width;
    s->texture.color_b = s->texture.color_a + p->width;
    f += (size_t)p->width * 6;
    for (size_t o = 0; o < OCTAVES; o++) {
        s->lines[o] = f;
        f += (size_t)p->lattices[o].columns * 3;
        s->columns[o].weight = f;
        f += p->width;
        s->columns[o].left = s->lefts + o * p->width;
        place_columns(&p->lattices[o], p->width, &s->columns[o]);
    }
    return 0;
}

static int paint(const struct painting *p, uint8_t *rgb)
{
    struct scratch s;
    if (make_scratch(p, &s) < 0)
        return -ENOMEM;
    for (uint32_t y = 0; y < p->height; y++) {
        paint_background(p, y, s.row);
        paint_shapes(p, y, s.row);
        memset(s.texture.luma, 0, (size_t)p->width * 3 * sizeof(float));
        for (size_t o = 0; o < OCTAVES; o++) {
            lattice_line(&p->lattices[o], y, s.lines[o]);
            add_octave(p, o, &s.columns[o], s.lines[o], &s.texture);
        }
        apply_texture(p, &s.texture, s.row);
        add_grain(p, y, s.row);
        store_row(s.row, (size_t)p->width * 3, rgb + (size_t)y * p->width * 3);
    }
    free(s.floats);
    free(s.lefts);
    return 0;
}

/* ---- encoding ----------------------------------------------------------- */

static int encode(const uint8_t *rgb, uint32_t width, uint32_t height,
                  bool fine, void **jpeg, size_t *size)
{
    const int subsampling = fine ? TJSAMP_444 : TJSAMP_420;
    const int quality = fine ? 95 : 90;
    unsigned long capacity = tjBufSize((int)width, (int)height, subsampling);
    unsigned char *out =
        capacity == (unsigned long)-1 ? NULL : malloc(capacity);
    tjhandle tj = tjInitCompress();
    int rc = !out || !tj ? -ENOMEM : 0;
    /* NOREALLOC: the buffer stays ours (malloc'd), so the caller can
     * free() it; tjBufSize() is the worst case, so it always fits. */
    if (rc == 0 &&
        tjCompress2(tj, rgb, (int)width, 0, (int)height, TJPF_RGB, &out,
                    &capacity, subsampling, quality, TJFLAG_NOREALLOC) != 0)
        rc = -EIO;
    if (tj)
        tjDestroy(tj);
    if (rc < 0) {
        free(out);
        return rc;
    }
    unsigned char *shrunk = realloc(out, capacity);
    if (shrunk) /* else the larger buffer serves as well */
        out = shrunk;
    *jpeg = out;
    *size = capacity;
    return 0;
}

int rf_synthetic_jpeg(uint64_t seed, uint64_t index, uint32_t width,
                      uint32_t height, void **jpeg, size_t *size)
{
    struct stream s = {rf__mix64(rf__mix64(seed, 0x4a504547ull), index), 0};
    struct painting p = {.width = width, .height = height};
    if (!jpeg || !size) {
        if (jpeg)
            *jpeg = NULL;
        if (size)
            *size = 0;
        return -EINVAL;
    }
    *jpeg = NULL;
    *size = 0;
    if ((width == 0) != (height == 0) || width > MAX_SIDE || height > MAX_SIDE)
        return -EINVAL;
    /* The size is drawn even when it is given, so that the stream of
     * random words, and so the subsampling and quality, does not depend
     * on it. */
    uint32_t drawn_width, drawn_height;
    choose_size(&s, &drawn_width, &drawn_height);
    const bool fine = next_word(&s) & 1;
    if (width == 0) {
        p.width = drawn_width;
        p.height = drawn_height;
    }
    uint8_t *rgb = malloc((size_t)p.width * p.height * 3);
    int rc = rgb ? plan_painting(&p, &s, fine) : -ENOMEM;
    if (rc == 0)
        rc = paint(&p, rgb);
    if (rc == 0)
        rc = encode(rgb, p.width, p.height, fine, jpeg, size);
    free(rgb);
    free_painting(&p);
    return rc;
}
