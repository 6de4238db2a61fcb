/*
 * test-jpeg-exif.c - lib/decode/jpeg.c's EXIF orientation (section (e) of
 * the JPEG tests): orientations 1..8, stored as SHORTs and as LONGs in
 * both byte orders, whole and cropped, turn the stored pixels as EXIF
 * says and are ignored unless asked for; an orientation stored as PIL's
 * exif_transpose() reads it (other types, counts, a second entry) turns
 * them too, and one of each TIFF type is read as Pillow 9.4 reads it
 * (rationals and floats that are whole numbers turn, bytes and text do
 * not, the last entry read counts, damage stops the reading), in the
 * block PIL reads (the first APP1 that begins "Exif\0") and from each
 * start of a TIFF that PIL takes ("MM*\0" too). The pil/
 * cases also match PIL's pixels (skipped without a python3 that has
 * PIL). Setup makes the decoder once; every case's child inherits it.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jpeg-decode.h"
#include "jpeg-pil.h"

/* ---- (e) EXIF orientation ------------------------------------------------ */

/* An APP1 Exif block holding IFD0 with one entry: Orientation, a SHORT
 * as the standard says, or a LONG as some writers store it. */
static void exif_block(uint8_t out[32], int orientation, bool big_endian,
                       bool as_long)
{
    static const uint8_t little[32] = {
        'E',  'x',  'i', 'f', 0, 0, 'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0,
        0x12, 0x01, 3,   0,   1, 0, 0,   0,   0,  0, 0, 0, 0, 0, 0, 0};
    static const uint8_t big[32] = {
        'E',  'x',  'i', 'f', 0, 0, 'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1,
        0x01, 0x12, 0,   3,   0, 0, 0,   1,   0, 0,  0, 0, 0, 0, 0, 0};
    memcpy(out, big_endian ? big : little, 32);
    if (as_long)
        out[big_endian ? 19 : 18] = 4; /* the type */
    /* the value: its last byte, big-endian */
    out[!big_endian ? 24 : as_long ? 27 : 25] = (uint8_t)orientation;
}

/* The stored pixel that upright pixel (x, y) shows, for orientation o of
 * a stored w x h image. */
static size_t stored_index(int o, uint32_t x, uint32_t y, uint32_t w,
                           uint32_t h)
{
    uint32_t sx = x, sy = y;
    switch (o) {
    case 2:
        sx = w - 1 - x;
        break;
    case 3:
        sx = w - 1 - x;
        sy = h - 1 - y;
        break;
    case 4:
        sy = h - 1 - y;
        break;
    case 5:
        sx = y;
        sy = x;
        break;
    case 6:
        sx = y;
        sy = h - 1 - x;
        break;
    case 7:
        sx = w - 1 - y;
        sy = h - 1 - x;
        break;
    case 8:
        sx = w - 1 - y;
        sy = x;
        break;
    default:
        break;
    }
    return (size_t)sy * w + sx;
}

static void check_oriented(struct rf__jpeg_decoder *dec, const struct blob *b,
                           int o, const uint8_t *stored, uint32_t w, uint32_t h,
                           const struct rf__crop *crop)
{
    struct rf__jpeg_options opt = default_options();
    opt.exif_orientation = true;
    const uint32_t cw = (uint32_t)crop->width, ch_ = (uint32_t)crop->height;
    struct chooser ch = {.whole = false, .crop = *crop};
    uint8_t *px =
        decode_with(dec, b, &opt, &ch, cw, ch_, 3, (rf_layout)(o % 2));
    CHECK(px);
    if (o % 2) {
        uint8_t *t = nchw_to_nhwc(px, cw, ch_, 3);
        free(px);
        px = t;
    }
    const bool transposed = o >= 5;
    CHECK_EQ(ch.seen_width, transposed ? h : w);
    CHECK_EQ(ch.seen_height, transposed ? w : h);
    for (uint32_t y = 0; y < ch_; y++)
        for (uint32_t x = 0; x < cw; x++) {
            const uint32_t ux = (uint32_t)crop->x + x,
                           uy = (uint32_t)crop->y + y;
            const uint32_t fx = crop->flip ? cw - 1 - x : x;
            const size_t s = stored_index(o, ux, uy, w, h);
            if (memcmp(px + ((size_t)y * cw + fx) * 3, stored + s * 3, 3) !=
                0) {
                fprintf(stderr, "orientation %d: pixel %u,%u differs\n", o, x,
                        y);
                CHECK(!"oriented pixels");
            }
        }
    free(px);
}

/* Orientations 1..8 (stored as SHORTs and as LONGs, in both byte
 * orders), whole and cropped, turn the stored pixels as EXIF says; with
 * `against_pil`, they also match PIL's exif_transpose. */
static void test_exif(struct rf__jpeg_decoder *dec, bool against_pil)
{
    if (against_pil)
        require_pil();
    const uint32_t w = 120, h = 80;
    const struct image im = make_image(w, h, 3);
    for (int o = 1; o <= 8; o++) {
        uint8_t app1[32];
        exif_block(app1, o, o % 3 == 0, o % 2 == 0);
        const struct lj_options lo = {JCS_RGB, JCS_YCbCr, 90, .app1 = app1,
                                      .app1_len = sizeof(app1)};
        const struct blob b = lj_encode(&im, &lo);
        uint8_t *stored = tj_decode(&b, w, h, 3);
        const uint32_t uw = o >= 5 ? h : w, uh = o >= 5 ? w : h;
        const struct rf__crop whole = RF_CROP_BOX(0, 0, uw, uh, false);
        const struct rf__crop part = RF_CROP_BOX(5, 7, 50, 30, o % 2 == 0);
        check_oriented(dec, &b, o, stored, w, h, &whole);
        check_oriented(dec, &b, o, stored, w, h, &part);
        /* ignored unless asked for */
        uint8_t *plain = decode_whole(dec, &b, w, h, 3);
        check_same(plain, stored, (size_t)w * h * 3, "orientation off");
        free(plain);
        if (against_pil) {
            char path[512];
            write_temp_jpeg(&b, path, sizeof(path));
            struct rf__jpeg_options opt = default_options();
            opt.exif_orientation = true;
            const struct pil_case pc[3] = {
                {"EXIF, 8/8", RF_CROP_BOX(3.5, 4.25, 60, 50, true), 56, 48},
                {"EXIF, DCT-scaled", RF_CROP_BOX(0, 0, uw, uh, false), 24, 24},
                {"EXIF, resize then crop",
                 {.width = uw,
                  .height = uh,
                  .resized_width = 70,
                  .resized_height = 60,
                  .skip_x = 7,
                  .skip_y = 5,
                  .y_first = rf__crop_pillow13_y_first(uw, uh, 70, 60)},
                 56,
                 48}};
            printf("  orientation %d:\n", o);
            for (int i = 0; i < 3; i++)
                check_against_pil(dec, &b, path, &pc[i], &opt, true);
            unlink(path);
        }
        free(stored);
        free(b.data);
    }
    printf("  orientations 1..8 = the full decode turned (whole, crops)\n");
    free(im.px);
}

/* v at p, in the byte order `big` says. */
static void put_u16(uint8_t *p, uint32_t v, bool big)
{
    p[big ? 0 : 1] = (uint8_t)(v >> 8);
    p[big ? 1 : 0] = (uint8_t)v;
}

static void put_u32(uint8_t *p, uint32_t v, bool big)
{
    put_u16(p + (big ? 0 : 2), v >> 16, big);
    put_u16(p + (big ? 2 : 0), v & 0xffff, big);
}

/* An APP1 Exif block whose Orientation is `count` values of TIFF type
 * `type` (SHORT 3, LONG 4, SSHORT 8, SLONG 9), the first `orientation`
 * and the rest 0, after the IFD when they do not fit in its 4 bytes;
 * returns its length (at most 64). */
static size_t exif_block_stored_as(uint8_t out[64], int orientation, bool big,
                                   uint32_t type, uint32_t count)
{
    const uint32_t size = type == 3 || type == 8 ? 2 : 4;
    const size_t ifd_end = 8 + 2 + 12 + 4; /* in the TIFF structure */
    const size_t values = (size_t)count * size;
    const size_t len = 6 + ifd_end + (values > 4 ? values : 0);
    CHECK(len <= 64);
    memset(out, 0, 64);
    static const uint8_t exif_id[6] = {'E', 'x', 'i', 'f', 0, 0};
    static const uint8_t ii[4] = {'I', 'I', 42, 0}, mm[4] = {'M', 'M', 0, 42};
    memcpy(out, exif_id, sizeof(exif_id));
    uint8_t *tiff = out + 6;
    memcpy(tiff, big ? mm : ii, 4);
    put_u32(tiff + 4, 8, big); /* IFD0 */
    put_u16(tiff + 8, 1, big); /* one entry */
    put_u16(tiff + 10, 0x0112, big);
    put_u16(tiff + 12, type, big);
    put_u32(tiff + 14, count, big);
    uint8_t *value = tiff + 18;
    if (values > 4) {
        put_u32(tiff + 18, (uint32_t)ifd_end, big);
        value = tiff + ifd_end;
    }
    if (size == 2)
        put_u16(value, (uint32_t)orientation, big);
    else
        put_u32(value, (uint32_t)orientation, big);
    return len;
}

/* An APP1 Exif block with two Orientation entries: type `first_type`
 * holding `first`, then a SHORT holding `second`; returns its length. */
static size_t exif_block_twice(uint8_t out[64], uint32_t first_type, int first,
                               int second, bool big)
{
    size_t n = exif_block_stored_as(out, first, big, first_type, 1);
    uint8_t *tiff = out + 6;
    put_u16(tiff + 8, 2, big); /* two entries: the second where the next
                                  IFD's offset was, then that offset */
    put_u16(tiff + 22, 0x0112, big);
    put_u16(tiff + 24, 3, big);
    put_u32(tiff + 26, 1, big);
    put_u16(tiff + 30, (uint32_t)second, big);
    put_u32(tiff + 34, 0, big);
    n += 12;
    CHECK(n <= 64);
    return n;
}

/* Orientation 6 stored as PIL's exif_transpose() reads it, in both byte
 * orders: as a LONG, SSHORT or SLONG, as two or three values (the first
 * counts), or in a second entry after one holding 1 or an UNDEFINED
 * (the last counts) turns the pixels; with a count of 0 there is none. */
static void test_exif_stored_as(struct rf__jpeg_decoder *dec)
{
    const uint32_t w = 64, h = 40;
    const struct image im = make_image(w, h, 3);
    static const struct {
        uint32_t type, count;
        bool turns;
    } ways[] = {{4, 1, true}, {8, 1, true},  {9, 1, true}, {4, 2, true},
                {3, 3, true}, {3, 0, false}, {4, 0, false}};
    for (size_t i = 0; i < sizeof(ways) / sizeof(ways[0]); i++)
        for (int big = 0; big < 2; big++) {
            uint8_t app1[64];
            const size_t n =
                exif_block_stored_as(app1, 6, big, ways[i].type, ways[i].count);
            const struct lj_options lo = {JCS_RGB, JCS_YCbCr, 90, .app1 = app1,
                                          .app1_len = n};
            const struct blob b = lj_encode(&im, &lo);
            uint8_t *stored = tj_decode(&b, w, h, 3);
            const int o = ways[i].turns ? 6 : 1;
            const uint32_t uw = o == 6 ? h : w, uh = o == 6 ? w : h;
            const struct rf__crop whole = RF_CROP_BOX(0, 0, uw, uh, false);
            check_oriented(dec, &b, o, stored, w, h, &whole);
            free(stored);
            free(b.data);
        }
    for (int big = 0; big < 2; big++) /* the last entry counts */
        for (uint32_t first_type = 3; first_type <= 7; first_type += 4) {
            uint8_t app1[64];
            const size_t n = exif_block_twice(app1, first_type, 1, 6, big);
            const struct lj_options lo = {JCS_RGB, JCS_YCbCr, 90, .app1 = app1,
                                          .app1_len = n};
            const struct blob b = lj_encode(&im, &lo);
            uint8_t *stored = tj_decode(&b, w, h, 3);
            const struct rf__crop whole = RF_CROP_BOX(0, 0, h, w, false);
            check_oriented(dec, &b, 6, stored, w, h, &whole);
            free(stored);
            free(b.data);
        }
    printf("  orientation 6 as LONG, SSHORT, SLONG, 2 and 3 values, or after "
           "another entry: turned; a count of 0: not\n");
    free(im.px);
}

/* One IFD0 entry of exif_block_of(): `count` values of TIFF type `type`
 * under `tag` (0: Orientation), the first `num` (over `den` for the
 * rationals; as a float for FLOAT and DOUBLE; a byte for BYTE, ASCII,
 * SBYTE and UNDEFINED), the rest 0; past 4 bytes they go after the IFD,
 * or at `offset` when it is not 0 (past the block's end: damage). */
struct test_entry {
    uint32_t type, count;
    double num;
    int64_t den;
    uint32_t tag, offset;
};

/* Bytes of one value of `type`, for the types the tests store. */
static uint32_t test_type_size(uint32_t type)
{
    static const uint8_t sizes[19] = {
        [1] = 1,  [2] = 1,  [3] = 2,  [4] = 4,  [5] = 8,  [6] = 1,
        [7] = 1,  [8] = 2,  [9] = 4,  [10] = 8, [11] = 4, [12] = 8,
        [13] = 4, [16] = 8, [17] = 8, [18] = 8};
    return type < sizeof(sizes) && sizes[type] ? sizes[type] : 4;
}

/* The first value of e at p, in the byte order `big` says. */
static void put_value(uint8_t *p, const struct test_entry *e, bool big)
{
    switch (e->type) {
    case 3:
    case 8:
        put_u16(p, (uint32_t)(int32_t)e->num, big);
        break;
    case 5:
    case 10:
        put_u32(p, (uint32_t)(int32_t)(int64_t)e->num, big);
        put_u32(p + 4, (uint32_t)(int32_t)e->den, big);
        break;
    case 11: {
        const float f = (float)e->num;
        uint32_t bits;
        memcpy(&bits, &f, sizeof(bits));
        put_u32(p, bits, big);
        break;
    }
    case 12: {
        uint64_t bits;
        memcpy(&bits, &e->num, sizeof(bits));
        put_u32(p + (big ? 0 : 4), (uint32_t)(bits >> 32), big);
        put_u32(p + (big ? 4 : 0), (uint32_t)bits, big);
        break;
    }
    case 16:
    case 17:
    case 18:
        put_u32(p + (big ? 4 : 0), (uint32_t)(int32_t)e->num, big);
        put_u32(p + (big ? 0 : 4), e->num < 0 ? 0xffffffffu : 0, big);
        break;
    case 1:
    case 2:
    case 6:
    case 7:
        p[0] = (uint8_t)(int8_t)e->num;
        break;
    default: /* LONG, SLONG, IFD, and types no reader knows */
        put_u32(p, (uint32_t)(int32_t)e->num, big);
        break;
    }
}

/* An APP1 Exif block whose IFD0 holds the n entries; returns its length
 * (at most 128). */
static size_t exif_block_of(uint8_t out[128], bool big,
                            const struct test_entry *entries, size_t n)
{
    memset(out, 0, 128);
    static const uint8_t exif_id[6] = {'E', 'x', 'i', 'f', 0, 0};
    static const uint8_t ii[4] = {'I', 'I', 42, 0}, mm[4] = {'M', 'M', 0, 42};
    memcpy(out, exif_id, sizeof(exif_id));
    uint8_t *tiff = out + 6;
    memcpy(tiff, big ? mm : ii, 4);
    put_u32(tiff + 4, 8, big); /* IFD0 */
    put_u16(tiff + 8, (uint32_t)n, big);
    size_t end = 8 + 2 + 12 * n + 4; /* values go after the IFD */
    for (size_t i = 0; i < n; i++) {
        const struct test_entry *e = &entries[i];
        uint8_t *at = tiff + 10 + 12 * i;
        put_u16(at, e->tag ? e->tag : 0x0112, big);
        put_u16(at + 2, e->type, big);
        put_u32(at + 4, e->count, big);
        const size_t values = (size_t)e->count * test_type_size(e->type);
        uint8_t *value = at + 8;
        if (e->offset) {
            put_u32(at + 8, e->offset, big);
            continue;
        }
        if (values > 4) {
            put_u32(at + 8, (uint32_t)end, big);
            value = tiff + end;
            end += values;
            CHECK(6 + end <= 128);
        }
        if (e->count)
            put_value(value, e, big);
    }
    put_u32(tiff + 10 + 12 * n, 0, big); /* no next IFD */
    return 6 + end;
}

/* How Pillow 9.4 (Debian 12's python3-pil) reads the Orientation of
 * each block below for ImageOps.exif_transpose(), found with blocks
 * built byte for byte as these (getexif()[0x0112], then whether the
 * image turned): 6 = turned as orientation 6, 1 = left upright. PIL
 * looks the value up in a dict of 2..8, where 6, 6.0 and the rational
 * 12/2 are one key, and bytes or text none. */
static const struct {
    const char *name;
    struct test_entry entries[2];
    size_t n;
    int pil;
} pil_reads[] = {
    /* one entry, orientation 6 stored as ... */
    {"BYTE (PIL: b'\\x06')", {{1, 1, 6, 0, 0, 0}}, 1, 1},
    {"ASCII (PIL: '\\x06')", {{2, 1, 6, 0, 0, 0}}, 1, 1},
    {"RATIONAL 6/1 (PIL: 6.0)", {{5, 1, 6, 1, 0, 0}}, 1, 6},
    {"RATIONAL 12/2 (PIL: 6.0)", {{5, 1, 12, 2, 0, 0}}, 1, 6},
    {"RATIONAL 13/2 (PIL: 6.5)", {{5, 1, 13, 2, 0, 0}}, 1, 1},
    {"RATIONAL 6/0 (PIL: nan)", {{5, 1, 6, 0, 0, 0}}, 1, 1},
    {"RATIONAL 6/1, 0/0 (PIL: the first)", {{5, 2, 6, 1, 0, 0}}, 1, 6},
    {"SBYTE 6 (PIL: 6)", {{6, 1, 6, 0, 0, 0}}, 1, 6},
    {"SBYTE -6 (PIL: -6)", {{6, 1, -6, 0, 0, 0}}, 1, 1},
    {"UNDEFINED (PIL: b'\\x06')", {{7, 1, 6, 0, 0, 0}}, 1, 1},
    {"SRATIONAL -6/-1 (PIL: 6.0)", {{10, 1, -6, -1, 0, 0}}, 1, 6},
    {"SRATIONAL 6/-1 (PIL: -6.0)", {{10, 1, 6, -1, 0, 0}}, 1, 1},
    {"FLOAT 6.0 (PIL: 6.0)", {{11, 1, 6, 0, 0, 0}}, 1, 6},
    {"FLOAT 6.5 (PIL: 6.5)", {{11, 1, 6.5, 0, 0, 0}}, 1, 1},
    {"FLOAT 6.0000005 (PIL: 6.000000476837158)",
     {{11, 1, 6.0000005, 0, 0, 0}},
     1,
     1},
    {"FLOAT 6.0, count 0 (PIL: none)", {{11, 0, 6, 0, 0, 0}}, 1, 1},
    {"DOUBLE 6.0 (PIL: 6.0)", {{12, 1, 6, 0, 0, 0}}, 1, 6},
    {"IFD 6 (PIL: 6)", {{13, 1, 6, 0, 0, 0}}, 1, 6},
    {"LONG8 6 (PIL: 6)", {{16, 1, 6, 0, 0, 0}}, 1, 6},
    {"SLONG8 6 (PIL: unknown type, none)", {{17, 1, 6, 0, 0, 0}}, 1, 1},
    {"IFD8 6 (PIL: unknown type, none)", {{18, 1, 6, 0, 0, 0}}, 1, 1},
    {"type 99 (PIL: unknown type, none)", {{99, 1, 6, 0, 0, 0}}, 1, 1},
    /* two entries: the last one read counts */
    {"SHORT 6, then UNDEFINED 6 (PIL: b'\\x06')",
     {{3, 1, 6, 0, 0, 0}, {7, 1, 6, 0, 0, 0}},
     2,
     1},
    {"SHORT 6, then BYTE 6 (PIL: b'\\x06')",
     {{3, 1, 6, 0, 0, 0}, {1, 1, 6, 0, 0, 0}},
     2,
     1},
    {"SHORT 6, then SHORT 0 (PIL: 0)",
     {{3, 1, 6, 0, 0, 0}, {3, 1, 0, 0, 0, 0}},
     2,
     1},
    {"SHORT 6, then SHORT of count 0 (PIL: 6, the second passed over)",
     {{3, 1, 6, 0, 0, 0}, {3, 0, 3, 0, 0, 0}},
     2,
     6},
    {"SHORT 6, then type 99 (PIL: 6, the second passed over)",
     {{3, 1, 6, 0, 0, 0}, {99, 1, 3, 0, 0, 0}},
     2,
     6},
    {"UNDEFINED 3, then FLOAT 6.0 (PIL: 6.0)",
     {{7, 1, 3, 0, 0, 0}, {11, 1, 6, 0, 0, 0}},
     2,
     6},
    /* values past the block's end: PIL stops reading the IFD there
     * ("Truncated File Read"), keeping the entries before */
    {"SHORT 6, then RATIONAL past the end (PIL: 6)",
     {{3, 1, 6, 0, 0, 0}, {5, 1, 3, 1, 0, 5000}},
     2,
     6},
    {"RATIONAL past the end, then SHORT 6 (PIL: none)",
     {{5, 1, 3, 1, 0, 5000}, {3, 1, 6, 0, 0, 0}},
     2,
     1},
    {"Make (0x010f) ASCII past the end, then SHORT 6 (PIL: none)",
     {{2, 100, 'x', 0, 0x010f, 5000}, {3, 1, 6, 0, 0, 0}},
     2,
     1},
};

/* b, the JPEG of im with some Exif block, decoded whole with EXIF
 * orientation turns im as orientation `o` says (1: as stored); with
 * `against_pil`, instead, is byte-identical to PIL's exif_transpose() (at
 * 8/8), which proves `o`: where the two disagree the image's shape
 * differs, and PIL refuses the box. `say`: print the case's line. */
static void check_turned_as(struct rf__jpeg_decoder *dec, const struct blob *b,
                            const struct image *im, const char *name, int o,
                            bool against_pil, bool say)
{
    const uint32_t w = im->width, h = im->height;
    const uint32_t uw = o >= 5 ? h : w, uh = o >= 5 ? w : h;
    const struct rf__crop whole = RF_CROP_BOX(0, 0, uw, uh, false);
    if (say)
        printf("  %-62s %s\n", name, o == 1 ? "upright" : "turned");
    if (against_pil) {
        char path[512];
        write_temp_jpeg(b, path, sizeof(path));
        struct rf__jpeg_options opt = default_options();
        opt.exif_orientation = true;
        const struct pil_case pc = {name, whole, uw, uh};
        check_against_pil(dec, b, path, &pc, &opt, true);
        unlink(path);
    } else {
        uint8_t *stored = tj_decode(b, w, h, 3);
        check_oriented(dec, b, o, stored, w, h, &whole);
        free(stored);
    }
}

/* Each of pil_reads[] in both byte orders (against PIL, little-endian
 * only) turns the pixels as PIL does: see check_turned_as(). */
static void test_exif_types(struct rf__jpeg_decoder *dec, bool against_pil)
{
    if (against_pil)
        require_pil();
    const uint32_t w = 64, h = 40;
    const struct image im = make_image(w, h, 3);
    for (size_t i = 0; i < sizeof(pil_reads) / sizeof(pil_reads[0]); i++)
        for (int big = 0; big < (against_pil ? 1 : 2); big++) {
            uint8_t app1[128];
            const size_t n =
                exif_block_of(app1, big, pil_reads[i].entries, pil_reads[i].n);
            const struct lj_options lo = {JCS_RGB, JCS_YCbCr, 90, .app1 = app1,
                                          .app1_len = n};
            const struct blob b = lj_encode(&im, &lo);
            check_turned_as(dec, &b, &im, pil_reads[i].name, pil_reads[i].pil,
                            against_pil, !big);
            free(b.data);
        }
    free(im.px);
}

/* Which block PIL reads, and how it starts: Pillow 9.4 keeps the first
 * APP1 that begins "Exif\0" (JpegImagePlugin), reads a TIFF structure
 * after "Exif\0\0", and takes six starts (TiffImagePlugin.PREFIXES):
 * the standard two, "MM*\0" and "II\0*" in the order "MM" or "II" says,
 * "MM\0+" as a classic TIFF (BigTIFF only with '+' at byte 2), and
 * "II+\0", BigTIFF, which it cannot read from its 8-byte head (it
 * raises). `pil`: 6 turned, 1 upright; `raises`: PIL raises, so only
 * ours (upright) is checked. */
static const struct {
    const char *name;
    /* an APP1 before the one with orientation 6: 0 none, 1 "Exif\0\0"
     * alone, 2 "Exif\0\1" and a TIFF of orientation 3, 3 "Exif\0\0"
     * and that TIFF, 4 XMP */
    int first;
    int pil;
    bool raises;
    char start[5]; /* the TIFF's first four bytes; "" for the standard */
} pil_blocks[] = {
    {"start MM\\0* (the standard)", 0, 6, false, "MM\0*"},
    {"start II*\\0 (the standard)", 0, 6, false, "II*\0"},
    {"start MM*\\0 (PIL: big-endian)", 0, 6, false, "MM*\0"},
    {"start II\\0* (PIL: little-endian)", 0, 6, false, "II\0*"},
    {"start MM\\0+ (PIL: a classic TIFF)", 0, 6, false, "MM\0+"},
    {"start II+\\0 (PIL: BigTIFF, raises)", 0, 1, true, "II+\0"},
    {"start IX*\\0 (PIL: not a TIFF, raises)", 0, 1, true, "IX*\0"},
    {"\"Exif\\0\\0\" alone first (PIL: no tag)", 1, 1, false, ""},
    {"\"Exif\\0\\1\" first (PIL: raises)", 2, 1, true, ""},
    {"orientation 3 first (PIL: the first block's)", 3, 3, false, ""},
    {"XMP first (PIL: the Exif block)", 4, 6, false, ""},
};

/* Each of pil_blocks[] turns the pixels as PIL does: see
 * check_turned_as(). */
static void test_exif_blocks(struct rf__jpeg_decoder *dec, bool against_pil)
{
    if (against_pil)
        require_pil();
    const uint32_t w = 64, h = 40;
    const struct image im = make_image(w, h, 3);
    static const struct test_entry six = {3, 1, 6, 0, 0, 0};
    static const struct test_entry three = {3, 1, 3, 0, 0, 0};
    static const uint8_t xmp[] = "http://ns.adobe.com/xap/1.0/\0<x:xmpmeta/>";
    static const uint8_t exif_alone[6] = {'E', 'x', 'i', 'f', 0, 0};
    for (size_t i = 0; i < sizeof(pil_blocks) / sizeof(pil_blocks[0]); i++) {
        if (against_pil && pil_blocks[i].raises)
            continue;
        const char *start = pil_blocks[i].start;
        uint8_t app1[128], first[128];
        const size_t n = exif_block_of(app1, start[0] == 'M', &six, 1);
        if (start[0])
            memcpy(app1 + 6, start, 4);
        size_t first_len = 0;
        switch (pil_blocks[i].first) {
        case 1:
            memcpy(first, exif_alone, sizeof(exif_alone));
            first_len = sizeof(exif_alone);
            break;
        case 2:
            first_len = exif_block_of(first, false, &three, 1);
            first[5] = 1;
            break;
        case 3:
            first_len = exif_block_of(first, false, &three, 1);
            break;
        case 4:
            memcpy(first, xmp, sizeof(xmp));
            first_len = sizeof(xmp);
            break;
        default:
            break;
        }
        struct lj_options lo = {JCS_RGB, JCS_YCbCr, 90, .app1 = app1,
                                .app1_len = n};
        if (first_len) {
            lo.app1 = first;
            lo.app1_len = first_len;
            lo.app1_next = app1;
            lo.app1_next_len = n;
        }
        const struct blob b = lj_encode(&im, &lo);
        check_turned_as(dec, &b, &im, pil_blocks[i].name, pil_blocks[i].pil,
                        against_pil, true);
        free(b.data);
    }
    free(im.px);
}

/* ---- the cases ----------------------------------------------------------- */

JPEG_DECODER_FIXTURE()

TEST_CASE(case_exif, "exif", "orientations 1..8 turn the stored pixels")
{
    test_exif(decoder, false);
}

TEST_CASE(case_exif_stored_as, "exif",
          "an orientation stored as PIL reads it, other types and counts")
{
    test_exif_stored_as(decoder);
}

TEST_CASE(case_exif_types, "exif",
          "an orientation of each TIFF type, as Pillow 9.4 reads it")
{
    test_exif_types(decoder, false);
}

TEST_CASE(case_exif_blocks, "exif",
          "the Exif block and TIFF starts that Pillow 9.4 reads")
{
    test_exif_blocks(decoder, false);
}

TEST_CASE(case_pil_exif_blocks, "pil",
          "the Exif block and TIFF starts: PIL's pixels")
{
    test_exif_blocks(decoder, true);
}

TEST_CASE(case_pil_exif, "pil", "EXIF orientations 1..8: PIL's pixels")
{
    test_exif(decoder, true);
}

TEST_CASE(case_pil_exif_types, "pil",
          "an orientation of each TIFF type: PIL's pixels")
{
    test_exif_types(decoder, true);
}

int main(int argc, char **argv)
{
    return TEST_MAIN_WITH(argc, argv, decoder_setup, decoder_teardown);
}
