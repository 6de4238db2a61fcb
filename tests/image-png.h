/*
 * image-png.h - PNG files of every kind made with libpng's write API, for
 * test-png and test-png-webp: a png_spec says the size, colour type, bit
 * depth, interlacing, palette, tRNS and extra chunks, and make_png()
 * writes the file into a blob.
 */
#ifndef RF_TEST_IMAGE_PNG_H
#define RF_TEST_IMAGE_PNG_H

#include <png.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "image-pil.h"
#include "test.h"

struct png_spec {
    uint32_t width, height;
    int color_type, bit_depth;
    bool interlaced;
    unsigned palette_size; /* entries of PLTE */
    unsigned trns;         /* palette: alpha entries; else 1 = a tRNS colour */
    bool colour_chunks;    /* gAMA, cHRM, sRGB: ignored by PIL */
    bool index_beyond;     /* palette indices past PLTE's entries too */
    bool unknown_chunks;   /* a tEXt, and an unknown critical chunk "ABCD"
                              after PLTE, before IDAT */
    bool header_only;      /* no pixels: the chunks before IDAT, then an
                              IDAT's start (all that the limits read) */
};

static inline void write_blob(png_structp png, png_bytep data, size_t n)
{
    blob_append(png_get_io_ptr(png), data, n);
}

static inline void flush_blob(png_structp png)
{
    (void)png;
}

static inline unsigned png_channels(int color_type)
{
    switch (color_type) {
    case PNG_COLOR_TYPE_GRAY_ALPHA:
        return 2;
    case PNG_COLOR_TYPE_RGB:
        return 3;
    case PNG_COLOR_TYPE_RGB_ALPHA:
        return 4;
    default:
        return 1;
    }
}

/* Sample (x, y, c) of the spec's bit depth: palette indices within the
 * palette, 16-bit grey often under 256 (PIL clips the rest). */
static inline uint32_t png_sample(const struct png_spec *s, uint32_t x,
                                  uint32_t y, uint32_t c)
{
    const uint32_t n = noise(x, y, c, 11);
    if (s->color_type == PNG_COLOR_TYPE_PALETTE)
        return n % (s->index_beyond ? 1u << s->bit_depth : s->palette_size);
    if (s->bit_depth < 8)
        return n & ((1u << s->bit_depth) - 1);
    const uint32_t smooth = picture(x, y, c, s->width, s->height);
    if (s->bit_depth == 8)
        return c == 3 || (c == 1 && png_channels(s->color_type) == 2)
                   ? n & 255 /* alpha: all sorts, 0 and 255 included */
                   : smooth;
    if (s->color_type == PNG_COLOR_TYPE_GRAY)
        return n % 3 == 0 ? n & 0xffff : n & 0xff;
    return smooth << 8 | (n & 0xff);
}

/* One row in the file's packing: MSB first below 8 bits, big-endian at
 * 16. */
static inline void png_row(const struct png_spec *s, uint32_t y, uint8_t *row,
                           size_t row_bytes)
{
    const unsigned ch = png_channels(s->color_type);
    memset(row, 0, row_bytes);
    for (uint32_t x = 0; x < s->width; x++)
        for (uint32_t c = 0; c < ch; c++) {
            const uint32_t v = png_sample(s, x, y, c);
            const size_t i = (size_t)x * ch + c;
            if (s->bit_depth == 16) {
                row[2 * i] = (uint8_t)(v >> 8);
                row[2 * i + 1] = (uint8_t)v;
            } else if (s->bit_depth == 8) {
                row[i] = (uint8_t)v;
            } else {
                const size_t bit = i * (size_t)s->bit_depth;
                row[bit / 8] |= (uint8_t)(v << (8 - s->bit_depth - bit % 8));
            }
        }
}

static inline void png_set_extras(png_structp png, png_infop info,
                                  const struct png_spec *s)
{
    if (s->color_type == PNG_COLOR_TYPE_PALETTE) {
        png_color colours[256];
        png_byte alpha[256];
        for (unsigned i = 0; i < s->palette_size; i++) {
            colours[i].red = (png_byte)noise(i, 0, 0, 3);
            colours[i].green = (png_byte)noise(i, 0, 1, 3);
            colours[i].blue = (png_byte)noise(i, 0, 2, 3);
            alpha[i] = (png_byte)(i * 37);
        }
        png_set_PLTE(png, info, colours, (int)s->palette_size);
        if (s->trns)
            png_set_tRNS(png, info, alpha, (int)s->trns, NULL);
    } else if (s->trns) {
        png_color_16 colour = {0};
        colour.gray = (png_uint_16)png_sample(s, 1, 1, 0);
        colour.red = (png_uint_16)png_sample(s, 1, 1, 0);
        colour.green = (png_uint_16)png_sample(s, 1, 1, 1);
        colour.blue = (png_uint_16)png_sample(s, 1, 1, 2);
        png_set_tRNS(png, info, NULL, 0, &colour);
    }
    if (s->colour_chunks)
        png_set_sRGB_gAMA_and_cHRM(png, info, PNG_sRGB_INTENT_PERCEPTUAL);
    if (s->unknown_chunks) {
        png_text text = {0};
        text.compression = PNG_TEXT_COMPRESSION_NONE;
        text.key = (png_charp) "Comment";
        text.text = (png_charp) "made by test-png-webp";
        png_set_text(png, info, &text, 1);
    }
}

static inline struct blob make_png(const struct png_spec *s)
{
    struct blob b = {0};
    png_structp png =
        png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    CHECK(png && info);
    if (setjmp(png_jmpbuf(png)))
        CHECK(!"libpng could not write the fixture");
    png_set_write_fn(png, &b, write_blob, flush_blob);
    png_set_IHDR(png, info, s->width, s->height, s->bit_depth, s->color_type,
                 s->interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_extras(png, info, s);
    if (s->index_beyond)
        png_set_check_for_invalid_index(png, 0);
    png_write_info(png, info);
    if (s->unknown_chunks)
        png_write_chunk(png, (png_const_bytep) "ABCD", (png_const_bytep) "xy",
                        2);
    if (s->header_only) {
        png_destroy_write_struct(&png, &info);
        blob_append(&b, "\0\0\0\x10IDAT", 8);
        return b;
    }
    const size_t row_bytes = png_get_rowbytes(png, info);
    uint8_t *pixels = malloc(row_bytes * s->height);
    png_bytep *rows = malloc(s->height * sizeof(*rows));
    CHECK(pixels && rows);
    for (uint32_t y = 0; y < s->height; y++) {
        rows[y] = pixels + y * row_bytes;
        png_row(s, y, rows[y], row_bytes);
    }
    png_write_image(png, rows); /* all 7 passes when interlaced */
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    free(rows);
    free(pixels);
    return b;
}

#endif /* RF_TEST_IMAGE_PNG_H */
