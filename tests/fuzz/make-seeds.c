/*
 * make-seeds.c - writes the seed corpora of the fuzz targets into
 * FOLDER/{jpeg,zstd,pack,segment}/ (tools/dev/fuzz.sh seeds FOLDER; the
 * committed tests/fuzz/corpus/ came from it, plus the regression inputs
 * the fuzzers found). Small inputs, each a different path through the
 * code: JPEG in every colour space, subsampling and coding libjpeg
 * writes, with EXIF and restart markers, and broken ones (truncated, a
 * PNG, corrupt entropy data, absurd dimensions); zstd frames with and
 * without the dictionary and content size, of the right and wrong size;
 * packed files of JPEG and zstd samples, empty, truncated and damaged;
 * control segments of a few layouts, and damaged ones.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <jpeglib.h>

#include "fuzz.h"
#include "channel/segment.h"
#include "common/internal.h"
#include "source/pack-format.h"

static const char *out_dir;

static void die(const char *what)
{
    fprintf(stderr, "make-seeds: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* Writes prefix (may be empty) followed by data as FOLDER/target/name. */
static void put(const char *target, const char *name, const void *prefix,
                size_t prefix_size, const void *data, size_t size)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", out_dir, target);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/%s/%s", out_dir, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(prefix, 1, prefix_size, f) != prefix_size ||
        fwrite(data, 1, size, f) != size || fclose(f) != 0)
        die(path);
}

/* ---- JPEG --------------------------------------------------------------- */

struct blob {
    uint8_t *data;
    size_t size;
};

/* A malloc'd copy of b's bytes; dies without memory. */
static uint8_t *copy_of(const struct blob *b)
{
    uint8_t *copy = malloc(b->size);
    if (!copy)
        die("malloc");
    memcpy(copy, b->data, b->size);
    return copy;
}

/* put()s the first `size` bytes of b, the byte at flip_at (when below
 * size) XORed with `mask`. */
static void put_damaged(const char *target, const char *name,
                        const void *prefix, size_t prefix_size,
                        const struct blob *b, size_t size, size_t flip_at,
                        uint8_t mask)
{
    uint8_t *copy = copy_of(b);
    if (flip_at < size)
        copy[flip_at] ^= mask;
    put(target, name, prefix, prefix_size, copy, size);
    free(copy);
}

struct jpeg_recipe {
    unsigned width, height, components; /* 1, 3 or 4 input components */
    J_COLOR_SPACE in_space, jpeg_space;
    int h_samp, v_samp; /* luma sampling: 1,1 = 4:4:4; 2,2 = 4:2:0 */
    bool progressive, arith, adobe;
    unsigned restart_rows;
    const uint8_t *app1;
    size_t app1_size;
};

/* Smooth gradients with a few edges, like a small photo. */
static void fill_pixels(uint8_t *px, const struct jpeg_recipe *r)
{
    for (unsigned y = 0; y < r->height; y++)
        for (unsigned x = 0; x < r->width; x++)
            for (unsigned c = 0; c < r->components; c++)
                *px++ = (uint8_t)(x * 5 + y * 3 * (c + 1) +
                                  ((x / 8 + y / 8) % 2) * 60);
}

static struct blob encode_jpeg(const struct jpeg_recipe *r)
{
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr); /* a failure exits: seeds are fixed */
    jpeg_create_compress(&ci);
    unsigned char *out = NULL;
    unsigned long size = 0;
    jpeg_mem_dest(&ci, &out, &size);
    ci.image_width = r->width;
    ci.image_height = r->height;
    ci.input_components = (int)r->components;
    ci.in_color_space = r->in_space;
    jpeg_set_defaults(&ci);
    jpeg_set_colorspace(&ci, r->jpeg_space);
    jpeg_set_quality(&ci, 85, TRUE);
    ci.comp_info[0].h_samp_factor = r->h_samp ? r->h_samp : 1;
    ci.comp_info[0].v_samp_factor = r->v_samp ? r->v_samp : 1;
    ci.arith_code = r->arith;
    ci.restart_in_rows = (int)r->restart_rows;
    ci.write_Adobe_marker = r->adobe;
    if (r->progressive)
        jpeg_simple_progression(&ci);
    jpeg_start_compress(&ci, TRUE);
    if (r->app1)
        jpeg_write_marker(&ci, JPEG_APP0 + 1, r->app1, (unsigned)r->app1_size);
    const size_t stride = (size_t)r->width * r->components;
    uint8_t *px = malloc(stride * r->height);
    if (!px)
        die("malloc");
    fill_pixels(px, r);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = px + ci.next_scanline * stride;
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    free(px);
    return (struct blob){out, size};
}

/* An Exif block whose IFD0 has Orientation = 6 (rotate 90 clockwise). */
static const uint8_t exif_rotate[] = {
    'E',  'x',  'i', 'f', 0, 0, 'M', 'M', 0, 42, 0, 0, 0, 8, /* TIFF header */
    0,    1,                                                 /* 1 entry */
    0x01, 0x12, 0,   3,   0, 0, 0,   1,   0, 6,  0, 0, /* Orientation SHORT 6 */
    0,    0,    0,   0};                               /* no next IFD */

#define RGB(w, h)                                                              \
    .width = (w), .height = (h), .components = 3, .in_space = JCS_RGB,         \
    .jpeg_space = JCS_YCbCr
#define CMYK(w, h, space)                                                      \
    .width = (w), .height = (h), .components = 4, .in_space = JCS_CMYK,        \
    .jpeg_space = (space)
#define GRAY(w, h)                                                             \
    .width = (w), .height = (h), .components = 1, .in_space = JCS_GRAYSCALE,   \
    .jpeg_space = JCS_GRAYSCALE
#define S420 .h_samp = 2, .v_samp = 2

static const struct {
    const char *name;
    struct jpeg_recipe recipe;
    uint8_t params[JPEG_PARAM_BYTES];
} jpeg_seeds[] = {
    {"baseline-444", {RGB(48, 40)}, {1, 31, 31, 20, 0, 1, 0, 0}},
    {"baseline-420-odd-size",
     {RGB(33, 17), S420},
     {2 | JPEG_NCHW, 15, 23, 0, 20, 0, 0, 1}},
    {"baseline-422",
     {RGB(40, 24), .h_samp = 2, .v_samp = 1},
     {0, 63, 63, 0, 0, 0, 0, 0}},
    {"gray", {GRAY(24, 24)}, {1 | JPEG_GRAY, 7, 7}},
    {"gray-to-rgb", {GRAY(24, 16)}, {2, 9, 5, 0, 3}},
    {"progressive-420",
     {RGB(40, 32), S420, .progressive = true},
     {1 | JPEG_FLIP, 11, 13, 128, 0, 7, 0, 3}},
    {"arithmetic", {RGB(32, 32), .arith = true}, {0, 15, 15}},
    {"arithmetic-progressive",
     {RGB(24, 40), S420, .progressive = true, .arith = true},
     {1, 3, 3, 255, 0, 9, 9, 9}},
    {"restart-markers",
     {RGB(48, 48), S420, .restart_rows = 1},
     {2, 20, 20, 0, 40}},
    {"cmyk-adobe", {CMYK(16, 16, JCS_CMYK), .adobe = true}, {0, 15, 15}},
    {"cmyk-adobe-gray-out",
     {CMYK(16, 24, JCS_CMYK), .adobe = true},
     {1 | JPEG_GRAY | JPEG_NCHW, 5, 5}},
    {"cmyk-no-adobe", {CMYK(16, 16, JCS_CMYK)}, {2, 7, 7}},
    {"ycck", {CMYK(24, 16, JCS_YCCK), .adobe = true}, {1, 23, 15}},
    {"exif-rotated",
     {RGB(40, 16), .app1 = exif_rotate, .app1_size = sizeof(exif_rotate)},
     {1 | JPEG_EXIF, 15, 39, 30, 0, 2}},
    {"one-pixel", {RGB(1, 1)}, {1, 63, 0, 0, 0, 4}},
};

/* Copies b with its size cut or its bytes changed. */
static void put_variant(const char *name, const uint8_t *params,
                        const struct blob *b, size_t size, size_t flip_at)
{
    put_damaged("jpeg", name, params, JPEG_PARAM_BYTES, b, size, flip_at, 0x5a);
}

/* Where b's first SOF0 marker is (its FF byte); dies without one. */
static size_t sof0_at(const struct blob *b)
{
    for (size_t i = 0; i + 9 < b->size; i++)
        if (b->data[i] == 0xff && b->data[i + 1] == 0xc0)
            return i;
    die("no SOF0 marker");
    return 0;
}

/* b with `count` bytes from `at` set to `value`, as seed `name`. */
static void put_patched(const char *name, const uint8_t *params,
                        const struct blob *b, size_t at, size_t count,
                        uint8_t value)
{
    uint8_t *copy = copy_of(b);
    memset(copy + at, value, count);
    put("jpeg", name, params, JPEG_PARAM_BYTES, copy, b->size);
    free(copy);
}

/* The SOF marker's height and width set to absurd values. */
static void put_huge_dimensions(const uint8_t *params, const struct blob *b)
{
    put_patched("huge-dimensions", params, b, sof0_at(b) + 5, 4, 0xfe);
}

/* The first SOF0 marker made SOF3 (lossless), which libjpeg-turbo 2.1
 * refuses: its error path. */
static void put_lossless(const uint8_t *params, const struct blob *b)
{
    put_patched("lossless-sof3", params, b, sof0_at(b) + 1, 1, 0xc3);
}

/* A progressive file whose last scan comes 101 times more: over the
 * decoder's limit of 100 scans (warnings accepted, so that the repeated
 * refinement scans do not end it first). */
static void put_many_scans(const uint8_t *params, const struct blob *b)
{
    size_t last_sos = 0;
    for (size_t i = 0; i + 1 < b->size; i++)
        if (b->data[i] == 0xff && b->data[i + 1] == 0xda)
            last_sos = i;
    const size_t scan = b->size - 2 - last_sos; /* up to EOI */
    const size_t size = b->size + 101 * scan;
    uint8_t *copy = malloc(size);
    if (!copy || last_sos == 0)
        die("many scans");
    memcpy(copy, b->data, b->size - 2);
    for (size_t k = 1; k <= 101; k++)
        memcpy(copy + b->size - 2 + (k - 1) * scan, b->data + last_sos, scan);
    copy[size - 2] = 0xff; /* EOI */
    copy[size - 1] = 0xd9;
    put("jpeg", "progressive-many-scans", params, JPEG_PARAM_BYTES, copy, size);
    free(copy);
}

static struct blob jpeg_seed(const char *name)
{
    for (size_t i = 0; i < sizeof(jpeg_seeds) / sizeof(*jpeg_seeds); i++)
        if (strcmp(jpeg_seeds[i].name, name) == 0)
            return encode_jpeg(&jpeg_seeds[i].recipe);
    die(name);
    return (struct blob){0};
}

static void make_jpeg_seeds(void)
{
    for (size_t i = 0; i < sizeof(jpeg_seeds) / sizeof(*jpeg_seeds); i++) {
        struct blob b = encode_jpeg(&jpeg_seeds[i].recipe);
        put("jpeg", jpeg_seeds[i].name, jpeg_seeds[i].params, JPEG_PARAM_BYTES,
            b.data, b.size);
        free(b.data);
    }
    const uint8_t train[JPEG_PARAM_BYTES] = {1, 31, 31, 20, 0, 1, 0, 0};
    const uint8_t lenient[JPEG_PARAM_BYTES] = {JPEG_WARNINGS_OK | 2, 31, 31};
    /* transform none: every row is decoded, so damage anywhere is met */
    const uint8_t whole[JPEG_PARAM_BYTES] = {0, 31, 31};
    struct blob b = jpeg_seed("baseline-444");
    put_variant("truncated-half", train, &b, b.size / 2, SIZE_MAX);
    put_variant("truncated-lenient", lenient, &b, b.size * 3 / 4, SIZE_MAX);
    put_variant("corrupt-scan", whole, &b, b.size, b.size - 40);
    put_variant("corrupt-scan-lenient", lenient, &b, b.size, b.size - 40);
    put_variant("soi-only", train, &b, 2, SIZE_MAX);
    put_huge_dimensions(train, &b);
    put_lossless(train, &b);
    free(b.data);
    b = jpeg_seed("progressive-420");
    put_variant("progressive-truncated", lenient, &b, b.size - 100, SIZE_MAX);
    const uint8_t lenient_train[JPEG_PARAM_BYTES] = {JPEG_WARNINGS_OK | 1, 31,
                                                     31, 20};
    put_many_scans(lenient_train, &b);
    free(b.data);
    static const uint8_t png[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10"
                                 "\0\0\0\x10\x08\x02\0\0\0\x90\x91\x68\x36";
    put("jpeg", "png-named-jpg", train, sizeof(train), png, sizeof(png) - 1);
    put("jpeg", "empty", train, sizeof(train), "", 0);
}

/* ---- zstd --------------------------------------------------------------- */

static uint8_t raw_pixels[64 * 64 * 4];

static void fill_raw(size_t size)
{
    for (size_t i = 0; i < size; i++)
        raw_pixels[i] = (uint8_t)(i * 7 + (i >> 5) + (i % 13 == 0));
}

/* One zstd frame of `size` bytes of raw_pixels. */
static struct blob zstd_frame(size_t size, bool with_dict, bool content_size)
{
    uint8_t dict[DICT_SIZE];
    fuzz_zstd_dict(dict);
    ZSTD_CCtx *c = ZSTD_createCCtx();
    struct blob b = {malloc(ZSTD_compressBound(size)), 0};
    if (!c || !b.data)
        die("zstd");
    ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, content_size);
    ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 3);
    if (with_dict)
        ZSTD_CCtx_loadDictionary(c, dict, sizeof(dict));
    if (content_size)
        b.size = ZSTD_compress2(c, b.data, ZSTD_compressBound(size), raw_pixels,
                                size);
    else { /* streamed: the frame does not declare its size */
        ZSTD_inBuffer in = {raw_pixels, size, 0};
        ZSTD_outBuffer out = {b.data, ZSTD_compressBound(size), 0};
        ZSTD_compressStream2(c, &out, &in, ZSTD_e_end);
        b.size = out.pos;
    }
    if (ZSTD_isError(b.size))
        die("ZSTD_compress2");
    ZSTD_freeCCtx(c);
    return b;
}

static void put_zstd(const char *name, uint8_t bits, unsigned h, unsigned w,
                     unsigned c, const struct blob *frame, size_t size)
{
    const uint8_t prefix[ZSTD_PARAM_BYTES] = {
        bits, (uint8_t)(h - 1), (uint8_t)(w - 1), (uint8_t)(c - 1)};
    put("zstd", name, prefix, sizeof(prefix), frame->data, size);
}

static void make_zstd_seeds(void)
{
    const size_t dict_bytes = (size_t)DICT_HEIGHT * DICT_WIDTH * DICT_CHANNELS;
    struct blob b = zstd_frame((size_t)8 * 8 * 3, false, true);
    put_zstd("nhwc-8x8x3", 0, 8, 8, 3, &b, b.size);
    put_zstd("declares-wrong-size", 0, 8, 8, 4, &b, b.size);
    put_zstd("truncated", 0, 8, 8, 3, &b, b.size - 3);
    free(b.data);
    b = zstd_frame((size_t)16 * 4 * 2, false, false);
    put_zstd("nchw-no-content-size", ZSTD_NCHW, 16, 4, 2, &b, b.size);
    put_zstd("no-content-size-too-big", 0, 4, 4, 2, &b, b.size);
    free(b.data);
    b = zstd_frame(dict_bytes, true, true);
    put_zstd("with-dictionary", ZSTD_WITH_DICT, DICT_HEIGHT, DICT_WIDTH,
             DICT_CHANNELS, &b, b.size);
    put_zstd("needs-dictionary", 0, DICT_HEIGHT, DICT_WIDTH, DICT_CHANNELS, &b,
             b.size);
    free(b.data);
    b = zstd_frame(dict_bytes, false, true);
    put_zstd("dictionary-unused", ZSTD_WITH_DICT, DICT_HEIGHT, DICT_WIDTH,
             DICT_CHANNELS, &b, b.size);
    /* two frames back to back: the second must not be written */
    uint8_t two[512];
    memcpy(two, b.data, b.size);
    memcpy(two + b.size, b.data, b.size);
    const struct blob both = {two, 2 * b.size};
    put_zstd("two-frames", 0, DICT_HEIGHT, DICT_WIDTH, DICT_CHANNELS, &both,
             both.size);
    free(b.data);
    static const uint8_t skippable[] = {0x50, 0x2a, 0x4d, 0x18, 4, 0,
                                        0,    0,    1,    2,    3, 4};
    const struct blob skip = {(uint8_t *)skippable, sizeof(skippable)};
    put_zstd("skippable-frame", 0, 1, 1, 1, &skip, skip.size);
    const struct blob junk = {(uint8_t *)"not a zstd frame", 16};
    put_zstd("not-zstd", 0, 2, 2, 1, &junk, junk.size);
}

/* ---- packed files ------------------------------------------------------- */

static char tmp_dir[] = "/tmp/rf-make-seeds-XXXXXX";

static struct blob read_file(const char *path)
{
    struct stat st;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0)
        die(path);
    struct blob b = {malloc((size_t)st.st_size + 1), (size_t)st.st_size};
    if (!b.data || read(fd, b.data, b.size) != (ssize_t)b.size)
        die(path);
    close(fd);
    unlink(path);
    return b;
}

struct pack_sample {
    rf_sample_kind kind;
    struct blob data;
    int64_t label;
    const char *name;
};

/* A packed file of the samples, as rf_pack_writer writes it. */
static struct blob write_pack(unsigned h, unsigned w, unsigned c,
                              rf_layout layout, bool dict,
                              const struct pack_sample *samples, size_t n)
{
    char path[sizeof(tmp_dir) + 16];
    snprintf(path, sizeof(path), "%s/seed.pack", tmp_dir);
    uint8_t d[DICT_SIZE];
    fuzz_zstd_dict(d);
    rf_pack_writer *pw = NULL;
    char *why = NULL;
    if (rf_pack_writer_create(&pw, path, h, w, c, layout, dict ? d : NULL,
                              dict ? sizeof(d) : 0, &why) < 0)
        die(why);
    for (size_t i = 0; i < n; i++)
        if (rf_pack_writer_add(pw, samples[i].kind, samples[i].data.data,
                               samples[i].data.size, samples[i].label,
                               samples[i].name) < 0)
            die(rf_pack_writer_error(pw));
    if (rf_pack_writer_finish(pw, &why) < 0)
        die(why);
    return read_file(path);
}

/* A packed file of no samples, as rf_pack_writer wrote one before
 * rf_pack_writer_finish() refused to: the header alone, every area empty
 * at its end, the CRC of nothing (0) over them. Readers still take it. */
static struct blob empty_pack(void)
{
    const struct rf__pack_header h = {
        .version = RF__PACK_VERSION,
        .header_size = RF__PACK_HEADER_SIZE,
        .entry_size = RF__PACK_ENTRY_SIZE,
        .index_offset = RF__PACK_HEADER_SIZE,
        .names_offset = RF__PACK_HEADER_SIZE,
        .dict_offset = RF__PACK_HEADER_SIZE,
        .file_size = RF__PACK_HEADER_SIZE,
    };
    struct blob b = {malloc(RF__PACK_HEADER_SIZE), RF__PACK_HEADER_SIZE};
    if (!b.data)
        die("malloc");
    rf__pack_header_encode(&h, b.data);
    return b;
}

/* With the leading byte of fuzz-pack, which says which checksums to
 * recompute (for a good file, a no-op). */
static void put_pack(const char *name, const struct blob *pack, size_t size,
                     size_t flip_at, uint8_t bits)
{
    put_damaged("pack", name, &bits, sizeof(bits), pack, size, flip_at, 0x21);
}

static void make_pack_seeds(void)
{
    struct pack_sample jpegs[] = {
        {RF_SAMPLE_JPEG, jpeg_seed("baseline-420-odd-size"), 0, "a/one.jpg"},
        {RF_SAMPLE_JPEG, jpeg_seed("progressive-420"), 1, NULL},
        {RF_SAMPLE_JPEG, jpeg_seed("cmyk-adobe"), 2, "c/three.jpg"},
    };
    struct blob pack = write_pack(0, 0, 0, RF_LAYOUT_NHWC, false, jpegs, 3);
    put_pack("jpeg-3-samples", &pack, pack.size, SIZE_MAX, PACK_RESEAL_ALL);
    put_pack("truncated", &pack, pack.size - 10, SIZE_MAX, 0);
    put_pack("payload-damaged", &pack, pack.size, 300, 0);
    put_pack("header-damaged", &pack, pack.size, 60, 0);
    /* damage behind resealed checksums: the structural checks must see it */
    put_pack("index-offset-resealed", &pack, pack.size, 57, PACK_RESEAL_ALL);
    put_pack("payload-resealed", &pack, pack.size, 300, PACK_RESEAL_ALL);
    free(pack.data);
    const size_t raw = (size_t)DICT_HEIGHT * DICT_WIDTH * DICT_CHANNELS;
    struct pack_sample frames[] = {
        {RF_SAMPLE_ZSTD, zstd_frame(raw, true, true), 0, "dict/0"},
        {RF_SAMPLE_ZSTD, zstd_frame(raw, false, false), 1, NULL},
        {RF_SAMPLE_ZSTD, zstd_frame(raw - 5, false, true), 1, "short"},
        {RF_SAMPLE_JPEG, jpeg_seed("gray"), 3, "gray.jpg"},
    };
    pack = write_pack(DICT_HEIGHT, DICT_WIDTH, DICT_CHANNELS, RF_LAYOUT_NHWC,
                      true, frames, 4);
    put_pack("zstd-with-dictionary", &pack, pack.size, SIZE_MAX,
             PACK_RESEAL_ALL);
    free(pack.data);
    struct pack_sample planes[] = {
        {RF_SAMPLE_ZSTD, zstd_frame((size_t)4 * 4 * 2, false, true), 0, NULL}};
    pack = write_pack(4, 4, 2, RF_LAYOUT_NCHW, false, planes, 1);
    put_pack("zstd-nchw", &pack, pack.size, SIZE_MAX, PACK_RESEAL_ALL);
    free(pack.data);
    pack = empty_pack();
    put_pack("empty", &pack, pack.size, SIZE_MAX, PACK_RESEAL_ALL);
    free(pack.data);
    for (size_t i = 0; i < 3; i++)
        free(jpegs[i].data.data);
    for (size_t i = 0; i < 4; i++)
        free(frames[i].data.data);
    free(planes[0].data.data);
}

/* ---- control segments --------------------------------------------------- */

/* A control segment as the consumer formats it, in a malloc'd buffer. */
static struct blob format_segment(uint32_t producers, uint32_t slots,
                                  uint32_t batch, uint32_t height,
                                  uint32_t width, uint32_t channels)
{
    struct rf__layout lay;
    if (rf__layout_compute(&lay, producers, slots, batch,
                           (uint64_t)height * width * channels) < 0)
        die("rf__layout_compute");
    int64_t params[RF__PARAMS] = {0};
    params[RF_PARAM_HEIGHT] = height;
    params[RF_PARAM_WIDTH] = width;
    params[RF_PARAM_CHANNELS] = channels;
    params[RF_PARAM_BATCH_SIZE] = batch;
    struct blob b = {aligned_alloc(RF__PAGE, lay.control_size),
                     lay.control_size};
    if (!b.data)
        die("aligned_alloc");
    memset(b.data, 0, b.size);
    struct rf__segment seg = {.header = (struct rf__header *)b.data,
                              .control_size = lay.control_size};
    rf__segment_format(&seg, &lay, params, "/data/train.pack");
    return b;
}

static void make_segment_seeds(void)
{
    struct blob b = format_segment(1, 2, 1, 8, 8, 3);
    put("segment", "1-producer-2-slots", "", 0, b.data, b.size);
    struct rf__header *h = (struct rf__header *)b.data;
    h->magic ^= 1;
    put("segment", "wrong-magic", "", 0, b.data, b.size);
    free(b.data);
    b = format_segment(2, 4, 2, 16, 16, 1);
    put("segment", "2-producers-4-slots", "", 0, b.data, b.size);
    put("segment", "truncated", "", 0, b.data, RF__PAGE);
    h = (struct rf__header *)b.data;
    struct rf__segment seg = {.header = h, .layout = *h};
    rf__segment_full_ring(&seg, 1)->mask = 0xffff;
    put("segment", "ring-mask-too-big", "", 0, b.data, b.size);
    free(b.data);
    b = format_segment(3, 5, 4, 4, 4, 4);
    put("segment", "3-producers-5-slots", "", 0, b.data, b.size);
    h = (struct rf__header *)b.data;
    h->slot_data_bytes = (UINT64_C(1) << 63);
    h->slot_bytes = h->slot_data_bytes + RF__PAGE;
    put("segment", "slot-size-overflow", "", 0, b.data, b.size);
    free(b.data);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make-seeds FOLDER\n");
        return 2;
    }
    out_dir = argv[1];
    if (mkdir(out_dir, 0755) < 0 && errno != EEXIST)
        die(out_dir);
    if (!mkdtemp(tmp_dir))
        die(tmp_dir);
    fill_raw(sizeof(raw_pixels));
    make_jpeg_seeds();
    make_zstd_seeds();
    make_pack_seeds();
    make_segment_seeds();
    rmdir(tmp_dir);
    return 0;
}
