/*
 * image.h - whole images decoded in memory: the PNG decoder (png.c,
 * through libpng) and the WebP decoder (webp.c, through libwebp), what
 * they return, the limits they apply before allocating, and the helpers
 * they share (image.c: format sniffing, the pixel buffer, RGB to L).
 *
 * Unlike JPEG (jpeg.c, which decodes only the crop's rows and columns),
 * these formats are decoded whole into a buffer the decoder owns and
 * reuses; the caller then crops and resizes from it. Pixels are those of
 * PIL's Image.open(f).convert("RGB") (or convert("L")) to the byte: alpha
 * is dropped without compositing, gamma, iCCP and sRGB chunks are ignored.
 * A decoder is used by one thread at a time; every failure is -1 with a
 * one-line reason, never a crash or a message on stderr.
 */
#ifndef RF_IMAGE_H
#define RF_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/* A decoded image: row y starts at pixels + y * stride, width * channels
 * bytes of 8-bit L (channels 1) or RGB (channels 3). At least
 * RF_IMAGE_SLACK readable bytes follow the last row (the resizer's SIMD
 * loads run past a row's end into taps of weight 0). Valid until the
 * decoder's next call. */
struct rf__image {
    const uint8_t *pixels;
    size_t stride;
    uint32_t width, height, channels;
};

#define RF_IMAGE_SLACK 64

/* Refused before anything the size of the image is allocated. */
struct rf__image_limits {
    uint64_t max_pixels;        /* refuse images with more pixels */
    uint64_t max_decode_memory; /* refuse decodes needing more bytes (the
                                   pixels and the library's own buffers,
                                   estimated from the header); 0 = none */
};

/* ---- what a file is, from its first bytes -------------------------------
 */

enum rf__image_format {
    RF_IMAGE_UNKNOWN = 0,
    RF_IMAGE_JPEG,
    RF_IMAGE_PNG,
    RF_IMAGE_WEBP,
    RF_IMAGE_GIF,
    RF_IMAGE_BMP,
    RF_IMAGE_TIFF,
    RF_IMAGE_PNM, /* PBM, PGM, PPM, PAM (P1..P7) */
};

/* The format whose signature starts the bytes (never the file name). */
enum rf__image_format rf__image_sniff(const uint8_t *data, size_t size);

/* "PNG", "WebP", "BMP", ...; "unknown" for RF_IMAGE_UNKNOWN. */
const char *rf__image_format_name(enum rf__image_format format);

/* ---- shared by the decoders --------------------------------------------
 */

/* The pixel buffer of a decoder: it grows, and shrinks only from above
 * RF_IMAGE_KEEP bytes to an image under a quarter of it. */
struct rf__image_buffer {
    uint8_t *bytes;
    size_t cap;
};

#define RF_IMAGE_KEEP ((size_t)64 << 20)

/* At least bytes + RF_IMAGE_SLACK bytes (the slack zeroed), or NULL when
 * out of memory. */
uint8_t *rf__image_buffer_reserve(struct rf__image_buffer *buffer,
                                  size_t bytes);

/* Frees the bytes (the struct is the caller's). */
void rf__image_buffer_free(struct rf__image_buffer *buffer);

/* Refuses an image above the pixel limit, or a decode that needs more
 * than the memory limit, with the reason ("a PNG of 20000 x 10000 pixels
 * is above the limit of ..."). Returns 0 or -1. */
int rf__image_check_limits(const struct rf__image_limits *limits,
                           const char *format, uint32_t width, uint32_t height,
                           uint64_t need_bytes, char *err, size_t err_len);

/* Turns `count` RGB pixels into L in place (pixel i's L lands at byte i),
 * as PIL's convert("L"): (R * 19595 + G * 38470 + B * 7471 + 0x8000) >> 16
 * (ITU-R 601-2), the same sums as libjpeg's RGB to grey. */
void rf__image_rgb_to_luma(uint8_t *pixels, size_t count);

/* ---- PNG (png.c, built when configure found libpng) ----------------------
 */

struct rf__png_decoder;

/* A decoder, or NULL when out of memory. */
struct rf__png_decoder *rf__png_decoder_new(void);

/* NULL is fine. */
void rf__png_decoder_free(struct rf__png_decoder *dec);

/*
 * Decodes the whole PNG of `size` bytes at `data` (never reading past
 * them). With channels 1 the image is L; with channels 3 it is RGB, or L
 * when the file is grey (PIL's convert("RGB") repeats L: the caller
 * replicates it). Palettes (with tRNS or not), grey of 1 to 16 bits,
 * grey+alpha, RGB, RGBA, 16-bit samples and Adam7 interlacing all decode;
 * 16-bit samples keep their high byte, except 16-bit grey without alpha,
 * which PIL opens as a 32-bit "I" image and clips to 255. Returns 0 with
 * *out filled, or -1 with a one-line reason in err (libpng's message for a
 * damaged file, "the file ends early" for a truncated one).
 */
int rf__png_decode(struct rf__png_decoder *dec, const uint8_t *data,
                   size_t size, const struct rf__image_limits *limits,
                   uint32_t channels, struct rf__image *out, char *err,
                   size_t err_len);

/* The bytes of the decoder's pixel buffer now (0 before any image is
 * decoded): tests check that a refused image allocated nothing. */
size_t rf__png_decoder_buffer_size(const struct rf__png_decoder *dec);

/* ---- WebP (webp.c, built when configure found libwebp) -------------------
 */

struct rf__webp_decoder;

/* A decoder, or NULL when out of memory. */
struct rf__webp_decoder *rf__webp_decoder_new(void);

/* NULL is fine. */
void rf__webp_decoder_free(struct rf__webp_decoder *dec);

/*
 * Decodes the whole WebP (lossy or lossless, with alpha or not; of an
 * animation, the first frame on its canvas, as PIL opens it) of `size`
 * bytes at `data` into RGB (channels 3) or L (channels 1). Returns 0 with
 * *out filled, or -1 with a one-line reason in err.
 */
int rf__webp_decode(struct rf__webp_decoder *dec, const uint8_t *data,
                    size_t size, const struct rf__image_limits *limits,
                    uint32_t channels, struct rf__image *out, char *err,
                    size_t err_len);

/* As rf__png_decoder_buffer_size(). */
size_t rf__webp_decoder_buffer_size(const struct rf__webp_decoder *dec);

#endif /* RF_IMAGE_H */
