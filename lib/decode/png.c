/*
 * png.c - whole PNG images into memory through libpng (see image.h),
 * with PIL's pixels and PIL's verdicts. libpng's transforms expand
 * palettes and low bit depths, keep the high byte of 16-bit samples and
 * strip alpha; what libpng has no transform for (16-bit grey clipped to
 * 255, as PIL's "I" mode converts; RGB to PIL's L) is done on the rows
 * after. Where PIL and libpng judge a file differently, PIL's rule is
 * kept: the CRC of every chunk before the first IDAT is checked here,
 * IDAT's never (PIL reads it unchecked); unknown critical chunks are
 * skipped; palette indices past PLTE are grey (i, i, i), PIL's default
 * palette. A file cut short after its last row (in the zlib stream's
 * checksum, IDAT's CRC or IEND) is taken, as PIL, which stops reading
 * once it has every row, takes it.
 *
 * libpng reports an error by calling a function that must not return: the
 * error function below keeps the message and longjmps back to decode(),
 * the PNG's error bridge (jpeg.c has the JPEG one). Warnings are dropped,
 * as PIL ignores what libpng warns about (an sRGB profile it does not
 * know, extra compressed data). The input is read from memory by
 * read_input(), which never reads past it.
 */
#include "config.h"

#include <setjmp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>

#include "common/internal.h"
#include "decode/image.h"

#define REASON_LEN 200

/* What libpng's own buffers and zlib's state take besides the image: a
 * few rows (counted apart) plus the inflate window and tables. */
#define LIBPNG_FIXED_BYTES (64u << 10)

/* libpng's reads of IDAT data, set here so that read_input() knows them. */
#define IDAT_READ_SIZE 8192u

/* The bytes being decoded, read by read_input(), and how far the rows
 * got (count_row()). */
struct png_input {
    const uint8_t *data;
    size_t size, pos;
    bool ran_out;       /* libpng asked for bytes past the end */
    bool bytewise_tail; /* IDAT read a byte at a time near the end, so that
                           zlib gets every byte a cut file has */
    uint64_t rows_done, rows_expected; /* rows (of every pass) decoded */
};

/* How rows come out of libpng, and what finish() still does to them. */
struct png_plan {
    uint32_t width, height;
    uint32_t decoded_channels; /* 1 (grey) or 3 (RGB) */
    uint32_t sample_bytes;     /* 2 for 16-bit grey, clipped after; else 1 */
    uint32_t out_channels;     /* 1 or 3 */
    size_t raw_row_bytes;      /* a row as stored, for the memory estimate */
};

struct rf__png_decoder {
    struct rf__image_buffer pixels;
    png_bytep *rows;         /* one pointer per row of the current image */
    struct png_plan plan;    /* the current image's */
    char reason[REASON_LEN]; /* libpng's last error */
};

struct rf__png_decoder *rf__png_decoder_new(void)
{
    return calloc(1, sizeof(struct rf__png_decoder));
}

void rf__png_decoder_free(struct rf__png_decoder *dec)
{
    if (!dec)
        return;
    rf__image_buffer_free(&dec->pixels);
    free(dec);
}

size_t rf__png_decoder_buffer_size(const struct rf__png_decoder *dec)
{
    return dec->pixels.cap;
}

/* ---- libpng's callbacks ------------------------------------------------ */

static PNG_NORETURN void on_error(png_structp png, png_const_charp message)
{
    struct rf__png_decoder *dec = png_get_error_ptr(png);
    rf__format(dec->reason, sizeof(dec->reason), "%s", message);
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp message)
{
    (void)png;
    (void)message;
}

static void read_input(png_structp png, png_bytep out, size_t count)
{
    struct png_input *in = png_get_io_ptr(png);
    if (count > in->size - in->pos) {
        in->ran_out = true;
        png_error(png, "the file ends early (a truncated PNG); copy it "
                       "again or leave it out");
    }
    memcpy(out, in->data + in->pos, count);
    in->pos += count;
    /* no IDAT read from here on can ask for more than the file has */
    if (in->bytewise_tail && in->size - in->pos < IDAT_READ_SIZE)
        png_set_compression_buffer_size(png, 1);
}

/* A user transform that changes nothing: libpng calls it once a row's
 * data is whole, before it looks for what follows the last row. */
/* NOLINTNEXTLINE(readability-non-const-parameter): libpng's type */
static void count_row(png_structp png, png_row_infop row, png_bytep data)
{
    (void)row;
    (void)data;
    struct png_input *in = png_get_io_ptr(png);
    in->rows_done++;
}

/* The rows libpng decodes: with Adam7, those of each pass that has
 * columns (libpng skips the others, as PNG_PASS_COLS says). */
static uint64_t rows_expected(png_structp png, png_infop info)
{
    const uint32_t width = png_get_image_width(png, info);
    const uint32_t height = png_get_image_height(png, info);
    if (png_get_interlace_type(png, info) == PNG_INTERLACE_NONE)
        return height;
    uint64_t rows = 0;
    for (int pass = 0; pass < 7; pass++)
        if (PNG_PASS_COLS(width, pass) != 0)
            rows += PNG_PASS_ROWS(height, pass);
    return rows;
}

/* Unknown chunks, critical ones included, are skipped as PIL skips
 * them (libpng would refuse an unknown critical chunk). */
static int skip_unknown_chunk(png_structp png, png_unknown_chunkp chunk)
{
    (void)png;
    (void)chunk;
    return 1; /* handled */
}

/* ---- PIL's verdicts that libpng does not share ----------------------------
 */

static uint32_t read_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

/* The CRC-32 of PNG (and zlib): reflected polynomial 0xedb88320. */
static uint32_t png_crc(const uint8_t *data, size_t size)
{
    uint32_t table[256];
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
        table[n] = c;
    }
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < size; i++)
        crc = table[(crc ^ data[i]) & 0xff] ^ (crc >> 8);
    return crc ^ 0xffffffffu;
}

/* PIL refuses a file when a chunk before the pixels has a bad CRC, and
 * reads IDAT without checking its CRC; libpng checks every chunk. So the
 * chunks up to the first IDAT are checked here, and libpng told to use
 * what it reads (a damaged IDAT still fails in zlib, as in PIL). A chunk
 * cut short is left to libpng to report. */
static int check_header_crcs(const uint8_t *data, size_t size, char *err,
                             size_t err_len)
{
    size_t pos = 8;
    while (size - pos >= 12) {
        const uint32_t length = read_be32(data + pos);
        const uint8_t *type = data + pos + 4;
        if (memcmp(type, "IDAT", 4) == 0 || length > size - pos - 12)
            return 0;
        if (png_crc(type, 4 + (size_t)length) != read_be32(type + 4 + length)) {
            char name[5];
            for (int i = 0; i < 4; i++)
                name[i] =
                    (char)(type[i] >= 0x20 && type[i] < 0x7f ? type[i] : '?');
            name[4] = '\0';
            rf__format(err, err_len, "PNG: %s: CRC error (a damaged file)",
                       name);
            return -1;
        }
        pos += 12 + (size_t)length;
    }
    return 0;
}

/* Palette entries past those of PLTE are PIL's default, grey (i, i, i);
 * libpng would make them black. */
static void pad_palette(png_structp png, png_infop info)
{
    png_colorp stored = NULL;
    int count = 0;
    if (png_get_color_type(png, info) != PNG_COLOR_TYPE_PALETTE ||
        !png_get_PLTE(png, info, &stored, &count))
        return;
    const int entries = 1 << png_get_bit_depth(png, info);
    if (count >= entries)
        return;
    png_color full[256];
    /* copied first: png_set_PLTE frees the palette it replaces */
    memcpy(full, stored, (size_t)count * sizeof(full[0]));
    for (int i = count; i < entries; i++)
        full[i].red = full[i].green = full[i].blue = (png_byte)i;
    png_set_PLTE(png, info, full, entries);
}

/* ---- the plan: libpng's transforms for PIL's pixels -------------------- */

/* Sets the transforms for the file's colour type and returns what the
 * rows will hold. tRNS is never expanded (palette_to_rgb adds alpha from
 * it, which strip_alpha then drops): convert("RGB") ignores it. */
static struct png_plan plan_transforms(png_structp png, png_infop info,
                                       uint32_t channels)
{
    struct png_plan plan = {0};
    plan.width = png_get_image_width(png, info);
    plan.height = png_get_image_height(png, info);
    plan.raw_row_bytes = png_get_rowbytes(png, info);
    const int type = png_get_color_type(png, info);
    const int depth = png_get_bit_depth(png, info);
    plan.sample_bytes = 1;
    if (type == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (type == PNG_COLOR_TYPE_GRAY && depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (type == PNG_COLOR_TYPE_GRAY && depth == 16)
        plan.sample_bytes = 2; /* PIL's "I": clipped, not shifted */
    else if (depth == 16)
        png_set_strip_16(png); /* the high byte, as PIL's ";16B" modes */
    png_set_strip_alpha(png);
    if (png_get_interlace_type(png, info) != PNG_INTERLACE_NONE)
        png_set_interlace_handling(png);
    const bool grey =
        type == PNG_COLOR_TYPE_GRAY || type == PNG_COLOR_TYPE_GRAY_ALPHA;
    plan.decoded_channels = grey ? 1 : 3;
    plan.out_channels = grey || channels == 1 ? 1 : 3;
    return plan;
}

static size_t decoded_row_bytes(const struct png_plan *plan)
{
    return (size_t)plan->width * plan->decoded_channels * plan->sample_bytes;
}

/* The pixels, the row pointers and libpng's own rows and zlib state. */
static uint64_t memory_needed(const struct png_plan *plan)
{
    return (uint64_t)decoded_row_bytes(plan) * plan->height +
           (uint64_t)plan->height * sizeof(png_bytep) +
           3 * (uint64_t)plan->raw_row_bytes + LIBPNG_FIXED_BYTES;
}

/* The image buffer and the row pointers into it (made for each image:
 * one small allocation beside libpng's own); NULL when out of memory. */
static png_bytep *reserve_rows(struct rf__png_decoder *dec,
                               const struct png_plan *plan)
{
    const size_t row_bytes = decoded_row_bytes(plan);
    uint8_t *pixels =
        rf__image_buffer_reserve(&dec->pixels, row_bytes * plan->height);
    dec->rows = malloc(plan->height * sizeof(*dec->rows));
    if (!pixels || !dec->rows)
        return NULL;
    for (uint32_t y = 0; y < plan->height; y++)
        dec->rows[y] = pixels + (size_t)y * row_bytes;
    return dec->rows;
}

/* 16-bit grey (big-endian, as libpng gives it) to PIL's "I" -> "L":
 * values above 255 clip. Rows are packed to width bytes as they go; each
 * write lands at or before the bytes still to be read. */
static void clip_grey16(uint8_t *pixels, const struct png_plan *plan)
{
    const size_t count = (size_t)plan->width * plan->height;
    for (size_t i = 0; i < count; i++) {
        const uint8_t high = pixels[2 * i], low = pixels[2 * i + 1];
        pixels[i] = high ? 255 : low;
    }
}

/* What libpng has no transform for, then the result. */
static void finish(struct rf__png_decoder *dec, const struct png_plan *plan,
                   struct rf__image *out)
{
    uint8_t *pixels = dec->pixels.bytes;
    const size_t count = (size_t)plan->width * plan->height;
    if (plan->sample_bytes == 2)
        clip_grey16(pixels, plan);
    if (plan->decoded_channels == 3 && plan->out_channels == 1)
        rf__image_rgb_to_luma(pixels, count);
    /* the rows are packed now: the slack after them is re-zeroed */
    memset(pixels + count * plan->out_channels, 0, RF_IMAGE_SLACK);
    out->pixels = pixels;
    out->width = plan->width;
    out->height = plan->height;
    out->channels = plan->out_channels;
    out->stride = (size_t)plan->width * plan->out_channels;
}

/* ---- one image --------------------------------------------------------- */

/* An allocation failed: the process's memory, not the file, is at fault;
 * the plan's size is that of the image, or 0 before its header. */
static void out_of_memory(const struct png_plan *plan, char *err,
                          size_t err_len)
{
    char size[96] = "";
    if (plan->width != 0)
        rf__format(
            size, sizeof(size), " of %u x %u pixels, which needs %llu MiB",
            plan->width, plan->height,
            (unsigned long long)((memory_needed(plan) + (1u << 20) - 1) >> 20));
    rf__format(err, err_len,
               "PNG: the process ran out of memory decoding this PNG%s (the "
               "file is not at fault); raise its memory limit (ulimit -v, "
               "the container's limit), or lower RF_PARAM_MAX_DECODE_MEMORY "
               "or RF_PARAM_MAX_PIXELS to refuse such images",
               size);
}

/* libpng's words for a failed allocation of its own ("Out of memory",
 * "Insufficient memory ..."). */
static bool says_out_of_memory(const char *reason)
{
    return strstr(reason, "ut of memory") != NULL ||
           strstr(reason, "nsufficient memory") != NULL;
}

/* Everything libpng may longjmp out of. Returns 0, or -1 with the reason
 * in err (a refusal) or in dec->reason (libpng's error; *libpng_failed).
 * An error after every row was decoded (libpng looking for the end of
 * the zlib stream and IDAT's CRC) is no failure: PIL never reads that
 * far. No local is read after the longjmp. */
static int decode(struct rf__png_decoder *dec, png_structp png, png_infop info,
                  struct png_input *in, const struct rf__image_limits *limits,
                  uint32_t channels, struct rf__image *out, char *err,
                  size_t err_len, volatile bool *libpng_failed)
{
    if (setjmp(png_jmpbuf(png))) {
        if (in->rows_expected && in->rows_done == in->rows_expected) {
            finish(dec, &dec->plan, out);
            return 0;
        }
        *libpng_failed = true;
        return -1;
    }
    png_set_read_fn(png, in, read_input);
    png_set_compression_buffer_size(png, IDAT_READ_SIZE);
    png_set_read_user_transform_fn(png, count_row);
    /* ringfeed's pixel limit is the rule, not libpng's 1M-wide default */
    png_set_user_limits(png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
    png_set_crc_action(png, PNG_CRC_QUIET_USE, PNG_CRC_QUIET_USE);
    png_set_read_user_chunk_fn(png, NULL, skip_unknown_chunk);
    png_read_info(png, info);
    pad_palette(png, info);
    dec->plan = plan_transforms(png, info, channels);
    const struct png_plan *plan = &dec->plan;
    if (rf__image_check_limits(limits, "PNG", plan->width, plan->height,
                               memory_needed(plan), err, err_len) < 0)
        return -1;
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != decoded_row_bytes(plan))
        png_error(png, "libpng's rows are not the planned size (a bug)");
    png_bytep *rows = reserve_rows(dec, plan);
    if (!rows) {
        out_of_memory(plan, err, err_len);
        return -1;
    }
    in->rows_expected = rows_expected(png, info);
    png_read_image(png, rows);
    /* no png_read_end(): what follows the pixels (even a missing IEND)
     * does not change them, and PIL does not insist on it either */
    finish(dec, plan, out);
    return 0;
}

/* One try at the file with a libpng of its own. */
static int decode_once(struct rf__png_decoder *dec, struct png_input *in,
                       const struct rf__image_limits *limits, uint32_t channels,
                       struct rf__image *out, char *err, size_t err_len)
{
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, dec,
                                             on_error, on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    memset(&dec->plan, 0, sizeof(dec->plan));
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        out_of_memory(&dec->plan, err, err_len);
        return -1;
    }
    volatile bool libpng_failed = false;
    dec->reason[0] = '\0';
    const int rc = decode(dec, png, info, in, limits, channels, out, err,
                          err_len, &libpng_failed);
    png_destroy_read_struct(&png, &info, NULL);
    free(dec->rows);
    dec->rows = NULL;
    if (rc < 0 && libpng_failed && says_out_of_memory(dec->reason))
        out_of_memory(&dec->plan, err, err_len);
    else if (rc < 0 && libpng_failed)
        rf__format(err, err_len, "PNG: %s", dec->reason);
    return rc;
}

int rf__png_decode(struct rf__png_decoder *dec, const uint8_t *data,
                   size_t size, const struct rf__image_limits *limits,
                   uint32_t channels, struct rf__image *out, char *err,
                   size_t err_len)
{
    if (size < 8 || png_sig_cmp(data, 0, 8) != 0) {
        rf__format(err, err_len, "not a PNG file (%s signature)",
                   size < 8 ? "too short for a" : "no");
        return -1;
    }
    if (check_header_crcs(data, size, err, err_len) < 0)
        return -1;
    struct png_input in = {.data = data, .size = size};
    const int rc = decode_once(dec, &in, limits, channels, out, err, err_len);
    if (rc == 0 || !in.ran_out)
        return rc;
    /* Cut short. libpng reads IDAT in pieces, and a piece that runs past
     * the end never reaches zlib: once more with the last pieces a byte
     * each, so that rows the file holds whole are decoded (rare files,
     * decoded twice). */
    struct png_input again = {
        .data = data, .size = size, .bytewise_tail = true};
    if (decode_once(dec, &again, limits, channels, out, err, err_len) < 0)
        return -1;
    err[0] = '\0'; /* the first try's reason */
    return 0;
}
