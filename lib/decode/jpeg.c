/*
 * jpeg.c - JPEG decoding straight into a batch slot (see jpeg.h), through
 * libjpeg-turbo's libjpeg API.
 *
 * One image goes: header -> checks (precision, pixel count) -> EXIF
 * orientation -> the caller's crop -> DCT scale M/8 -> start -> the
 * columns (jpeg_crop_scanline) and rows (jpeg_skip_scanlines) the
 * resampler needs -> each row into resize.c -> stop. libjpeg reports
 * errors by calling error_exit, which must not return: the error manager
 * below turns that, and warnings when they count as errors, into a
 * longjmp back to guarded(), the only setjmp of the project.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h> /* jpeglib.h needs FILE and size_t first */
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>
#ifdef HAVE_JPEGINT_H
/* after jpeglib.h: the entropy decoder's struct, which
 * discard_unused_coefficients() wraps */
#include <jpegint.h>
#endif

#include "common/internal.h"
#include "decode/jpeg.h"
#include "decode/resize.h"

#define REASON_LEN 256

/* libjpeg's error manager plus the way back out of the library. */
struct error_bridge {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    bool warnings_are_errors;
    unsigned warnings; /* warnings of the current image */
    char reason[REASON_LEN];
};

/* The MCU columns of a cropped decode that libjpeg turns into pixels, and
 * its entropy decoder, which discard_unused_coefficients() wraps. */
struct column_filter {
    boolean (*decode_mcu)(j_decompress_ptr, JBLOCKROW *);
    JDIMENSION next;        /* the column of the next MCU decoded */
    JDIMENSION first, last; /* those turned into pixels */
};

struct rf__jpeg_decoder {
    struct jpeg_decompress_struct cinfo;
    struct error_bridge err;
    struct jpeg_progress_mgr progress;
    uint32_t max_scans;  /* of the current image; 0 = no limit */
    uint64_t max_memory; /* of the current image; 0 = no limit */
    struct rf__resizer resizer;
    uint8_t *row; /* decoded scanlines, ROW_BATCH at most */
    size_t row_cap;
    uint8_t *converted; /* one CMYK scanline as RGB or luminance */
    size_t converted_cap;
    struct column_filter columns; /* of the current image */
};

/* How the stored pixels map onto the upright image (EXIF orientation):
 * upright x runs along source y when transposed, and a source axis may
 * run backwards. */
struct orientation {
    bool transpose, reverse_x, reverse_y;
};

static const struct orientation orientations[9] = {
    [1] = {false, false, false}, [2] = {false, true, false},
    [3] = {false, true, true},   [4] = {false, false, true},
    [5] = {true, false, false},  [6] = {true, false, true},
    [7] = {true, true, true},    [8] = {true, true, false},
};

/* One image's plan, filled step by step. */
struct decode_job {
    const uint8_t *data;
    size_t size;
    const struct rf__jpeg_options *opt;
    rf__crop_chooser choose;
    void *user;
    const struct rf__jpeg_target *target;
    struct orientation orient;
    struct rf__crop crop; /* upright image, source pixels */
    double box[4];        /* the crop in stored source pixels: x0 y0 x1 y1 */
    unsigned scale;       /* DCT scale M of M/8 */
    bool cmyk, inverted;  /* decoded as CMYK; Adobe's inverted values */
    uint32_t channels;    /* working channels: 1 or 3 */
    uint32_t rows_lo, rows_hi; /* decoded rows the resampler reads */
};

/* ---- errors --------------------------------------------------------- */

/* Leaves the decode with a reason; only valid inside guarded(). */
static void raise_error(struct rf__jpeg_decoder *dec, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));

static void raise_error(struct rf__jpeg_decoder *dec, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dec->err.reason, sizeof(dec->err.reason), fmt, ap);
    va_end(ap);
    longjmp(dec->err.jump, 1);
}

static struct rf__jpeg_decoder *decoder_of(j_common_ptr cinfo)
{
    return (struct rf__jpeg_decoder *)cinfo->client_data;
}

/* libjpeg's words for an error it raised, made specific where a common
 * cause has a plainer name. */
static void on_error(j_common_ptr cinfo)
{
    struct rf__jpeg_decoder *dec = decoder_of(cinfo);
    char text[JMSG_LENGTH_MAX];
    (*cinfo->err->format_message)(cinfo, text);
    switch (cinfo->err->msg_code) {
    case JERR_BAD_PRECISION:
        raise_error(dec, "%d-bit JPEG is not supported",
                    cinfo->err->msg_parm.i[0]);
    case JERR_INPUT_EOF:
        raise_error(dec, "premature end of data: the file is truncated");
    case JERR_NO_IMAGE:
        raise_error(dec, "no image in the JPEG data (truncated header?)");
    case JERR_NO_BACKING_STORE: /* libjpeg's own count, past ours */
        raise_error(dec,
                    "decoding this JPEG needs more than the limit of %llu "
                    "MiB of memory; raise RF_PARAM_MAX_DECODE_MEMORY or "
                    "re-encode it as baseline (not progressive)",
                    (unsigned long long)(dec->max_memory >> 20));
    default:
        raise_error(dec,
                    "libjpeg: %s (a damaged file, or a kind of JPEG "
                    "libjpeg-turbo cannot decode: re-encode it or leave it "
                    "out)",
                    text);
    }
}

/* Warnings are libjpeg decoding around damage (a truncated file is
 * completed with grey); they fail the image unless the options accept
 * them. Trace messages (level >= 0) are ignored. */
static void on_message(j_common_ptr cinfo, int level)
{
    struct rf__jpeg_decoder *dec = decoder_of(cinfo);
    if (level >= 0)
        return;
    dec->err.warnings++;
    if (!dec->err.warnings_are_errors)
        return;
    if (cinfo->err->msg_code == JWRN_JPEG_EOF)
        raise_error(dec, "premature end of data: the file is truncated; "
                         "copy it again or leave it out "
                         "(RF_PARAM_JPEG_WARNINGS=1 accepts it, the missing "
                         "rows grey)");
    char text[JMSG_LENGTH_MAX];
    (*cinfo->err->format_message)(cinfo, text);
    raise_error(dec,
                "libjpeg warning: %s (RF_PARAM_JPEG_WARNINGS=1 accepts "
                "such images)",
                text);
}

/* libjpeg's progress hook, called as it reads (once per iMCU row of each
 * scan while jpeg_start_decompress absorbs a multi-scan file): refuses
 * files with too many scans before they cost too much (a progressive
 * file of thousands of tiny scans is a decompression bomb). */
static void count_scans(j_common_ptr cinfo)
{
    struct rf__jpeg_decoder *dec = decoder_of(cinfo);
    const int scans = ((j_decompress_ptr)cinfo)->input_scan_number;
    if (dec->max_scans != 0 && scans > (int)dec->max_scans)
        raise_error(dec,
                    "JPEG with more than %u scans (a progressive-JPEG "
                    "bomb?); raise RF_PARAM_MAX_SCANS",
                    dec->max_scans);
}

/* Runs step(dec, arg) with libjpeg's errors caught: the project's only
 * setjmp. Nothing local lives across it, so no volatile is needed. */
static int guarded(struct rf__jpeg_decoder *dec,
                   void (*step)(struct rf__jpeg_decoder *, void *), void *arg)
{
    if (setjmp(dec->err.jump) != 0) {
        jpeg_abort_decompress(&dec->cinfo);
        return -1;
    }
    step(dec, arg);
    return 0;
}

/* ---- decoder object ------------------------------------------------- */

static void create_step(struct rf__jpeg_decoder *dec, void *unused)
{
    jpeg_create_decompress(&dec->cinfo);
}

struct rf__jpeg_decoder *rf__jpeg_decoder_new(void)
{
    struct rf__jpeg_decoder *dec = calloc(1, sizeof(*dec));
    if (!dec)
        return NULL;
    dec->cinfo.err = jpeg_std_error(&dec->err.pub);
    dec->err.pub.error_exit = on_error;
    dec->err.pub.emit_message = on_message;
    dec->cinfo.client_data = dec;
    if (guarded(dec, create_step, NULL) < 0) {
        jpeg_destroy_decompress(&dec->cinfo);
        free(dec);
        return NULL;
    }
    dec->cinfo.client_data = dec; /* jpeg_create_decompress clears it */
    dec->progress.progress_monitor = count_scans;
    dec->cinfo.progress = &dec->progress;
    return dec;
}

void rf__jpeg_decoder_free(struct rf__jpeg_decoder *dec)
{
    if (!dec)
        return;
    jpeg_destroy_decompress(&dec->cinfo);
    rf__resizer_free(&dec->resizer);
    free(dec->row);
    free(dec->converted);
    free(dec);
}

/* Grows a scratch buffer; only ever grows, so that decoding stops
 * allocating once the largest image has been seen. */
static void reserve(struct rf__jpeg_decoder *dec, uint8_t **buf, size_t *cap,
                    size_t want)
{
    if (want <= *cap)
        return;
    uint8_t *p = realloc(*buf, want);
    if (!p)
        raise_error(dec, "out of memory for %zu bytes of scratch", want);
    *buf = p;
    *cap = want;
}

/* ---- input checks before libjpeg ------------------------------------ */

struct magic {
    size_t offset, len;
    const char *bytes, *name;
};

/* What a file that is not a JPEG most likely is, for the message. */
static const char *guess_format(const uint8_t *data, size_t size)
{
    static const struct magic magics[] = {
        {0, 8, "\x89PNG\r\n\x1a\n", "PNG"},
        {0, 4, "GIF8", "GIF"},
        {8, 4, "WEBP", "WebP"},
        {4, 4, "ftyp", "HEIF/AVIF or MP4"},
        {0, 4, "II*\0", "TIFF"},
        {0, 4, "MM\0*", "TIFF"},
        {0, 2, "BM", "BMP"},
        {0, 4, "\x28\xb5\x2f\xfd", "zstd frame"},
        {0, 2, "\x1f\x8b", "gzip"},
        {0, 1, "<", "HTML or XML text"},
    };
    for (size_t i = 0; i < sizeof(magics) / sizeof(magics[0]); i++) {
        const struct magic *m = &magics[i];
        if (size >= m->offset + m->len &&
            memcmp(data + m->offset, m->bytes, m->len) == 0)
            return m->name;
    }
    return "unknown format";
}

/* The first bytes (at most 4) as "89 50 4e 47". */
static void hex_prefix(const uint8_t *data, size_t size, char *hex, size_t len)
{
    size_t used = 0;
    hex[0] = '\0';
    for (size_t i = 0; i < size && i < 4 && used + 4 <= len; i++) {
        rf__format(hex + used, len - used, "%s%02x", i ? " " : "", data[i]);
        used += i ? 3 : 2;
    }
}

/* Refuses what is plainly not a JPEG, naming what it looks like. */
static int check_signature(const uint8_t *data, size_t size, char *why,
                           size_t why_len)
{
    if (size == 0) {
        rf__format(why, why_len, "empty file (0 bytes): not a JPEG");
        return -1;
    }
    if (size >= 2 && data[0] == 0xff && data[1] == 0xd8)
        return 0;
    if (size == 1 && data[0] == 0xff) {
        rf__format(why, why_len, "premature end of data: 1 byte of JPEG");
        return -1;
    }
    char hex[16];
    hex_prefix(data, size, hex, sizeof(hex));
    rf__format(why, why_len, "not a JPEG file (starts with %s: %s)", hex,
               guess_format(data, size));
    return -1;
}

static int check_target(const struct rf__jpeg_target *t, char *why,
                        size_t why_len)
{
    if (t->dst && t->out_width > 0 && t->out_height > 0 &&
        (t->channels == 1 || t->channels == 3))
        return 0;
    rf__format(why, why_len,
               "unsupported JPEG target: %u x %u x %u (channels must be 1 "
               "or 3)",
               t->out_width, t->out_height, t->channels);
    return -1;
}

/* ---- header: limits and orientation -------------------------------- */

static uint32_t tiff_u16(const uint8_t *p, bool big_endian)
{
    return big_endian ? (uint32_t)p[0] << 8 | p[1] : (uint32_t)p[1] << 8 | p[0];
}

static uint32_t tiff_u32(const uint8_t *p, bool big_endian)
{
    return big_endian ? tiff_u16(p, true) << 16 | tiff_u16(p + 2, true)
                      : tiff_u16(p + 2, false) << 16 | tiff_u16(p, false);
}

/* The Orientation tag (0x0112, one SHORT) of IFD0 of an Exif block's
 * TIFF structure; 1 (upright) when absent or unreadable. Every offset is
 * checked against the block: the bytes come from the file. */
static int tiff_orientation(const uint8_t *tiff, size_t len)
{
    if (len < 8 ||
        (memcmp(tiff, "II*\0", 4) != 0 && memcmp(tiff, "MM\0*", 4) != 0))
        return 1;
    const bool big = tiff[0] == 'M';
    const uint32_t ifd = tiff_u32(tiff + 4, big);
    if (ifd > len - 2)
        return 1;
    const uint32_t entries = tiff_u16(tiff + ifd, big);
    for (uint32_t i = 0; i < entries; i++) {
        const size_t at = ifd + 2 + (size_t)12 * i;
        if (at + 12 > len)
            break;
        if (tiff_u16(tiff + at, big) != 0x0112)
            continue;
        const uint32_t value = tiff_u16(tiff + at + 8, big);
        const bool is_short = tiff_u16(tiff + at + 2, big) == 3;
        return is_short && value >= 1 && value <= 8 ? (int)value : 1;
    }
    return 1;
}

static int exif_orientation(j_decompress_ptr cinfo)
{
    for (jpeg_saved_marker_ptr m = cinfo->marker_list; m; m = m->next)
        if (m->marker == JPEG_APP0 + 1 && m->data_length > 6 &&
            memcmp(m->data, "Exif\0\0", 6) == 0)
            return tiff_orientation(m->data + 6, m->data_length - 6);
    return 1;
}

/* The DCT coefficients libjpeg keeps for a whole image: 64 of 2 bytes
 * per block, each component's blocks rounded up to whole MCUs (as
 * jdcoefct.c asks for them). A file of one scan needs none of this. */
static uint64_t coefficient_bytes(j_decompress_ptr ci)
{
    if (!jpeg_has_multiple_scans(ci))
        return 0;
    uint64_t blocks = 0;
    for (int c = 0; c < ci->num_components; c++) {
        const jpeg_component_info *comp = &ci->comp_info[c];
        const uint64_t h = (uint64_t)comp->h_samp_factor;
        const uint64_t v = (uint64_t)comp->v_samp_factor;
        blocks += (comp->width_in_blocks + h - 1) / h * h *
                  ((comp->height_in_blocks + v - 1) / v * v);
    }
    return blocks * DCTSIZE2 * sizeof(JCOEF);
}

/* A progressive or other multi-scan file is buffered whole before the
 * first row comes out, so its memory grows with the image: refused here,
 * before libjpeg allocates it, and again by libjpeg's own count (which
 * adds its smaller buffers) through max_memory_to_use. */
static void check_memory(struct rf__jpeg_decoder *dec)
{
    j_decompress_ptr ci = &dec->cinfo;
    ci->mem->max_memory_to_use =
        dec->max_memory > LONG_MAX ? LONG_MAX : (long)dec->max_memory;
    const uint64_t need = coefficient_bytes(ci);
    if (dec->max_memory != 0 && need > dec->max_memory)
        raise_error(dec,
                    "a multi-scan (progressive) JPEG of %u x %u pixels needs "
                    "%llu MiB of memory to decode, above the limit of %llu "
                    "MiB; raise RF_PARAM_MAX_DECODE_MEMORY or re-encode it "
                    "as baseline",
                    ci->image_width, ci->image_height,
                    (unsigned long long)((need + (1u << 20) - 1) >> 20),
                    (unsigned long long)(dec->max_memory >> 20));
}

static void read_header(struct rf__jpeg_decoder *dec, struct decode_job *job)
{
    j_decompress_ptr ci = &dec->cinfo;
    const bool exif = job->opt->exif_orientation;
    jpeg_mem_src(ci, job->data, (unsigned long)job->size);
    /* kept across images by libjpeg: set every time (0 = skip them) */
    jpeg_save_markers(ci, JPEG_APP0 + 1, exif ? 0xffff : 0);
    jpeg_read_header(ci, TRUE);
    if (ci->data_precision != 8)
        raise_error(dec, "%d-bit JPEG is not supported", ci->data_precision);
    const uint64_t pixels = (uint64_t)ci->image_width * ci->image_height;
    if (pixels > job->opt->max_pixels)
        raise_error(dec,
                    "%u x %u pixels is above the limit of %llu; raise "
                    "RF_PARAM_MAX_PIXELS",
                    ci->image_width, ci->image_height,
                    (unsigned long long)job->opt->max_pixels);
    check_memory(dec);
    job->orient = orientations[exif ? exif_orientation(ci) : 1];
}

/* ---- the crop and the scale ------------------------------------------ */

unsigned rf__jpeg_scale_for(double crop_w, double crop_h, uint32_t out_w,
                            uint32_t out_h)
{
    /* Only 1/8, 2/8, 4/8 and 8/8: libjpeg-turbo has SIMD inverse DCTs for
     * those alone, and its plain-C 3/8, 5/8, 6/8 and 7/8 ones are slower
     * than a SIMD 8/8 (measured: 10% more images/s on the train
     * transform at 224 with this rule). */
    for (unsigned m = 1; m < 8; m *= 2)
        if (crop_w * m / 8 >= out_w && crop_h * m / 8 >= out_h)
            return m;
    return 8;
}

/* An upright interval [upright[0], upright[1]) as stored pixels of an
 * axis of `size` pixels that may run backwards. */
static void stored_interval(const double upright[2], uint32_t size,
                            bool reverse, double *lo, double *hi)
{
    *lo = reverse ? size - upright[1] : upright[0];
    *hi = reverse ? size - upright[0] : upright[1];
}

static bool crop_is_sane(const struct rf__crop *c)
{
    return isfinite(c->x) && isfinite(c->y) && isfinite(c->width) &&
           isfinite(c->height) && c->width > 0 && c->height > 0;
}

/* Asks the caller for the crop of the upright image, then finds it in
 * the stored one. */
static void choose_crop(struct rf__jpeg_decoder *dec, struct decode_job *job)
{
    const j_decompress_ptr ci = &dec->cinfo;
    const struct orientation *o = &job->orient;
    const uint32_t w = o->transpose ? ci->image_height : ci->image_width;
    const uint32_t h = o->transpose ? ci->image_width : ci->image_height;
    struct rf__crop *c = &job->crop;
    *c = (struct rf__crop){0, 0, w, h, false};
    if (job->choose)
        job->choose(job->user, w, h, c);
    if (!crop_is_sane(c))
        raise_error(dec, "empty crop box %g x %g at (%g, %g)", c->width,
                    c->height, c->x, c->y);
    const double ux[2] = {c->x, c->x + c->width};
    const double uy[2] = {c->y, c->y + c->height};
    stored_interval(o->transpose ? uy : ux, ci->image_width, o->reverse_x,
                    &job->box[0], &job->box[2]);
    stored_interval(o->transpose ? ux : uy, ci->image_height, o->reverse_y,
                    &job->box[1], &job->box[3]);
    job->scale =
        job->opt->full_scale
            ? 8
            : rf__jpeg_scale_for(c->width, c->height, job->target->out_width,
                                 job->target->out_height);
}

/* RGB or luminance straight from libjpeg; CMYK and YCCK come out as CMYK
 * and are converted here, since libjpeg has no CMYK -> RGB. */
static void choose_color(struct rf__jpeg_decoder *dec, struct decode_job *job)
{
    j_decompress_ptr ci = &dec->cinfo;
    const bool grey_out = job->target->channels == 1;
    switch (ci->jpeg_color_space) {
    case JCS_GRAYSCALE:
        ci->out_color_space = JCS_GRAYSCALE;
        job->channels = 1; /* replicated into RGB by the resizer */
        break;
    case JCS_YCbCr:
    case JCS_RGB:
        ci->out_color_space = grey_out ? JCS_GRAYSCALE : JCS_EXT_RGB;
        job->channels = grey_out ? 1 : 3;
        break;
    case JCS_CMYK:
    case JCS_YCCK:
        ci->out_color_space = JCS_CMYK;
        job->cmyk = true;
        job->inverted = ci->saw_Adobe_marker;
        job->channels = job->target->channels;
        break;
    default:
        raise_error(dec, "unsupported JPEG colour space (%d components)",
                    ci->num_components);
    }
}

static void start(struct rf__jpeg_decoder *dec, struct decode_job *job)
{
    j_decompress_ptr ci = &dec->cinfo;
    ci->scale_num = job->scale;
    ci->scale_denom = 8;
    /* what TurboJPEG and PIL use by default: the same pixels as theirs */
    ci->dct_method = JDCT_ISLOW;
    ci->do_fancy_upsampling = TRUE;
    jpeg_start_decompress(ci);
}

/* ---- only the pixels the resampler reads ----------------------------- */

/* The size in pixels of one block's IDCT output, of the smallest of them
 * and of a component's: named differently from libjpeg's jpeg7 API on
 * (JPEG_LIB_VERSION 70). libjpeg-turbo scales across and down alike. */
#if JPEG_LIB_VERSION >= 70
#define MIN_DCT_SCALED_SIZE(ci) ((ci)->min_DCT_h_scaled_size)
#define DCT_SCALED_SIZE(comp) ((comp)->DCT_h_scaled_size)
#else
#define MIN_DCT_SCALED_SIZE(ci) ((ci)->min_DCT_scaled_size)
#define DCT_SCALED_SIZE(comp) ((comp)->DCT_scaled_size)
#endif

/* A cropped decode treats the crop's edges as the image's, so the fancy
 * upsampling of subsampled chroma differs there from a full decode; two
 * more columns on each side keep every needed pixel identical to it. */
#define UPSAMPLING_MARGIN 2

#ifdef HAVE_JPEGINT_H
/* libjpeg's entropy decoder, told to discard the coefficients of an MCU
 * outside the crop's columns, as it does for skipped rows. */
static boolean decode_mcu_in_columns(j_decompress_ptr ci, JBLOCKROW *mcu)
{
    struct column_filter *f = &decoder_of((j_common_ptr)ci)->columns;
    const JDIMENSION col = f->next;
    const bool used = col >= f->first && col <= f->last;
    const boolean done = f->decode_mcu(ci, used ? mcu : NULL);
    if (done && ++f->next == ci->MCUs_per_row)
        f->next = 0;
    return done;
}

/*
 * A cropped decode still entropy-decodes every MCU of a row, as a
 * baseline stream has no way to step over one, and libjpeg-turbo stores
 * all their coefficients though it turns only the crop's columns into
 * pixels. Decoding the others with no place to store them (MCU_data
 * NULL, as jpeg_skip_scanlines() does for whole rows) gives the same
 * pixels for about 1.5% less decode time (README, "The ceiling").
 *
 * The wrapper counts MCUs, which libjpeg decodes in raster order, one
 * call each; a call that returns FALSE (a suspension, which a memory
 * source never asks for) decoded nothing and is not counted. Only
 * single-scan Huffman files, the case measured and tested: multi-scan
 * files decode into a whole-image buffer first. The columns mirror
 * jpeg_crop_scanline()'s own iMCU alignment (recomputed, not read from
 * libjpeg's master struct, whose layout changed in 3.0), and libjpeg
 * makes a new entropy decoder for every image, so nothing is undone.
 */
static void discard_unused_coefficients(struct rf__jpeg_decoder *dec,
                                        JDIMENSION x)
{
    j_decompress_ptr ci = &dec->cinfo;
    /* a progressive file always has several scans */
    if (ci->arith_code || jpeg_has_multiple_scans(ci))
        return;
    const bool one_component =
        ci->comps_in_scan == 1 && ci->num_components == 1;
    const JDIMENSION mcu_width =
        (JDIMENSION)MIN_DCT_SCALED_SIZE(ci) *
        (one_component ? 1 : (JDIMENSION)ci->max_h_samp_factor);
    dec->columns = (struct column_filter){
        .decode_mcu = ci->entropy->decode_mcu,
        .next = 0,
        .first = x / mcu_width,
        .last = (x + ci->output_width - 1) / mcu_width,
    };
    ci->entropy->decode_mcu = decode_mcu_in_columns;
}
#else
static void discard_unused_coefficients(struct rf__jpeg_decoder *dec,
                                        JDIMENSION x)
{
    (void)dec;
    (void)x;
}
#endif

/*
 * Whether jpeg_crop_scanline() gives the same pixels as a full decode.
 * At a DCT scale below 8/8 libjpeg may give a subsampled component a
 * larger IDCT, which does part of its upsampling (chroma of 4:2:0 comes
 * out at full size at 4/8). libjpeg-turbo 2.1's jpeg_crop_scanline()
 * sizes a component's cropped rows from the sampling factors alone, so
 * when such a component still needs upsampling (luma sampled 4x2 or 2x4
 * over 1x1 chroma) the upsampler reads columns nothing wrote: wrong
 * pixels, different from run to run. Those images are decoded at their
 * full width.
 */
static bool crop_scanline_is_exact(j_decompress_ptr ci)
{
    const int min = MIN_DCT_SCALED_SIZE(ci);
    for (int c = 0; c < ci->num_components; c++) {
        const jpeg_component_info *comp = &ci->comp_info[c];
        const int size = DCT_SCALED_SIZE(comp);
        const bool upsampled =
            comp->h_samp_factor * size != ci->max_h_samp_factor * min ||
            comp->v_samp_factor * size != ci->max_v_samp_factor * min;
        if (size != min && upsampled)
            return false;
    }
    return true;
}

/* Decodes the columns [lo, hi) and a margin only. libjpeg moves the left
 * edge down to an iMCU boundary and says where it put it. */
static void crop_columns(struct rf__jpeg_decoder *dec, uint32_t lo, uint32_t hi)
{
    j_decompress_ptr ci = &dec->cinfo;
    JDIMENSION x = lo > UPSAMPLING_MARGIN ? lo - UPSAMPLING_MARGIN : 0;
    const JDIMENSION end = hi + UPSAMPLING_MARGIN < ci->output_width
                               ? hi + UPSAMPLING_MARGIN
                               : ci->output_width;
    JDIMENSION width = end - x;
    if (width < ci->output_width && crop_scanline_is_exact(ci)) {
        jpeg_crop_scanline(ci, &x, &width);
        discard_unused_coefficients(dec, x);
    } else
        x = 0;
    rf__resample_axis_shift(&dec->resizer.horizontal, x);
}

/* Plans both passes on the decoded image (the box scaled by M/8: decoded
 * pixel i covers source pixels [8i/M, 8(i+1)/M)), then narrows the decode
 * to the rows and columns they read. */
static void plan_axes(struct rf__jpeg_decoder *dec, struct decode_job *job)
{
    j_decompress_ptr ci = &dec->cinfo;
    struct rf__resizer *rs = &dec->resizer;
    const bool t = job->orient.transpose;
    const uint32_t cols = t ? job->target->out_height : job->target->out_width;
    const uint32_t rows = t ? job->target->out_width : job->target->out_height;
    const double k = job->scale / 8.0;
    if (rf__resample_axis_plan(&rs->horizontal, ci->output_width,
                               job->box[0] * k, job->box[2] * k, cols) < 0 ||
        rf__resample_axis_plan(&rs->vertical, ci->output_height,
                               job->box[1] * k, job->box[3] * k, rows) < 0)
        raise_error(dec, "cannot resample the crop (out of memory?)");
    uint32_t x_lo, x_hi, y_lo, y_hi;
    rf__resample_axis_span(&rs->horizontal, &x_lo, &x_hi);
    rf__resample_axis_span(&rs->vertical, &y_lo, &y_hi);
    if (x_hi <= x_lo || y_hi <= y_lo)
        raise_error(
            dec, "the crop box %g x %g at (%g, %g) is outside the image",
            job->crop.width, job->crop.height, job->crop.x, job->crop.y);
    crop_columns(dec, x_lo, x_hi);
    rf__resample_axis_shift(&rs->vertical, y_lo);
    job->rows_lo = y_lo;
    job->rows_hi = y_hi;
}

/* The target as the resizer sees it: a transposed orientation turns
 * result rows into target columns; the crop's flip mirrors target x.
 * Rows pushed are the cropped decode's (cinfo.output_width pixels). */
static void begin_resize(struct rf__jpeg_decoder *dec, struct decode_job *job)
{
    const struct rf__jpeg_target *t = job->target;
    const struct orientation *o = &job->orient;
    const bool reverse_x = o->transpose ? o->reverse_y : o->reverse_x;
    const struct rf__resize_dest dest = {
        .dst = t->dst,
        .width = t->out_width,
        .height = t->out_height,
        .channels = t->channels,
        .layout = t->layout,
        .transpose = o->transpose,
        .mirror_x = reverse_x != job->crop.flip,
        .mirror_y = o->transpose ? o->reverse_x : o->reverse_y,
    };
    const int rc = rf__resizer_begin(&dec->resizer, job->channels,
                                     dec->cinfo.output_width, &dest);
    if (rc == -ENOMEM)
        raise_error(dec, "out of memory for the resize buffers");
    if (rc < 0)
        raise_error(dec, "internal error: the resizer refused its target");
}

/* PIL's MULDIV255: a * b / 255, rounded. */
static uint32_t muldiv255(uint32_t a, uint32_t b)
{
    const uint32_t t = a * b + 128;
    return ((t >> 8) + t) >> 8;
}

/* ITU-R 601 luma with libjpeg's and PIL's 16-bit weights. */
static uint8_t luma(const uint8_t rgb[3])
{
    return (uint8_t)((rgb[0] * 19595u + rgb[1] * 38470u + rgb[2] * 7471u +
                      32768u) >>
                     16);
}

/* PIL's cmyk2rgb: R = (255 - K) - C (255 - K) / 255 for inks C and K.
 * Adobe's files (the APP14 marker) store 255 - ink, Photoshop's habit. */
static void cmyk_row(const uint8_t *in, uint8_t *out, size_t width,
                     bool inverted, uint32_t channels)
{
    const uint8_t flip = inverted ? 0xff : 0;
    for (size_t x = 0; x < width; x++, in += 4) {
        const uint32_t paper = 255u - (uint8_t)(in[3] ^ flip);
        uint8_t rgb[3];
        for (int c = 0; c < 3; c++)
            rgb[c] = (uint8_t)(paper - muldiv255(in[c] ^ flip, paper));
        if (channels == 3)
            memcpy(out + 3 * x, rgb, 3);
        else
            out[x] = luma(rgb);
    }
}

/* Skips to the first needed row and pushes every needed row, converted
 * to the working channels, into the resizer. */
/* Rows asked of libjpeg per call: one at a time costs it a pass through
 * its whole pipeline per row. */
#define ROW_BATCH 16

static void push_rows(struct rf__jpeg_decoder *dec, struct decode_job *job,
                      const uint8_t *rows, unsigned count, size_t row_bytes)
{
    const size_t width = dec->cinfo.output_width;
    if (!job->cmyk) {
        rf__resizer_push_rows(&dec->resizer, rows, count, row_bytes);
        return;
    }
    for (unsigned r = 0; r < count; r++) {
        cmyk_row(rows + r * row_bytes, dec->converted, width, job->inverted,
                 job->channels);
        rf__resizer_push_row(&dec->resizer, dec->converted);
    }
}

/* Skips to the first needed row and pushes every needed row, converted
 * to the working channels, into the resizer. */
static void read_rows(struct rf__jpeg_decoder *dec, struct decode_job *job)
{
    j_decompress_ptr ci = &dec->cinfo;
    const size_t width = ci->output_width; /* the cropped width */
    const size_t row_bytes = width * ci->output_components;
    /* the resizer reads a little past the last row of each batch, into
     * taps of weight 0 (see below) */
    reserve(dec, &dec->row, &dec->row_cap,
            ROW_BATCH * row_bytes + RF_RESIZE_ROW_SLACK);
    if (job->cmyk)
        reserve(dec, &dec->converted, &dec->converted_cap,
                width * job->channels);
    begin_resize(dec, job);
    if (job->rows_lo > 0 &&
        jpeg_skip_scanlines(ci, job->rows_lo) != job->rows_lo)
        raise_error(dec, "libjpeg skipped fewer rows than asked");
    JSAMPROW rows[ROW_BATCH];
    for (unsigned r = 0; r < ROW_BATCH; r++)
        rows[r] = dec->row + r * row_bytes;
    while (ci->output_scanline < job->rows_hi) {
        const unsigned left = job->rows_hi - ci->output_scanline;
        const unsigned want = left < ROW_BATCH ? left : ROW_BATCH;
        /* a scaled decode gives one row a call: gather the batch, so that
         * the resizer gets its rows in pairs */
        /* cppcheck 2.10 wrongly finds `want` below 1 here */
        // cppcheck-suppress knownConditionTrueFalse
        for (unsigned got = 0; got < want;) {
            const unsigned n = jpeg_read_scanlines(ci, rows + got, want - got);
            if (n == 0)
                raise_error(dec, "libjpeg returned no scanline");
            got += n;
        }
        /* The bytes read past the last row meet zero weights, so their
         * values never matter; zeroed so that they are defined (a buffer
         * just grown, or a short last batch, has nothing written there)
         * and memory checkers see defined pixels. */
        memset(dec->row + want * row_bytes, 0, RF_RESIZE_ROW_SLACK);
        push_rows(dec, job, dec->row, want, row_bytes);
    }
    if (!rf__resizer_done(&dec->resizer))
        raise_error(dec, "internal error: rows missing for the resize");
}

/* EOI (FF D9) cannot occur inside entropy-coded data: a coded FF byte
 * is followed by 00, and restart markers are FF D0 to FF D7. So a stream
 * with no FF D9 after the point libjpeg has read to was cut short.
 * Searched from the end, where a whole file has it: one step for a whole
 * file, a pass over the unread bytes for a cut one. */
static bool end_marker_follows(const struct jpeg_source_mgr *src)
{
    const uint8_t *unread = src->next_input_byte;
    size_t left = src->bytes_in_buffer;
    while (left >= 2) {
        const uint8_t *ff = memrchr(unread, 0xff, left - 1);
        if (!ff)
            return false;
        if (ff[1] == 0xd9)
            return true;
        left = (size_t)(ff - unread);
    }
    return false;
}

/*
 * A decode that read the last row reads on to the end, so that damage
 * after the image data (a stream cut short or out of step) is noticed.
 * One that stopped earlier abandons the rest: rows below the crop are
 * never decoded. A file cut short is still refused, by the end marker's
 * absence, so that it fails in every epoch and not only in those whose
 * crop reaches the cut. Other damage below the crop, and damage that
 * leaves the Huffman stream out of step without a marker to show it,
 * goes unseen by such a crop: `ringfeed-pack --verify` decodes every row
 * of every file.
 */
static void finish(struct rf__jpeg_decoder *dec)
{
    j_decompress_ptr ci = &dec->cinfo;
    if (ci->output_scanline == ci->output_height) {
        jpeg_finish_decompress(ci);
        return;
    }
    /* A multi-scan file was read whole by jpeg_start_decompress; the
     * entropy decoder may have read the end marker already */
    const bool whole = jpeg_has_multiple_scans(ci) ||
                       ci->unread_marker == JPEG_EOI ||
                       end_marker_follows(ci->src);
    if (dec->err.warnings_are_errors && !whole)
        raise_error(dec, "premature end of data: the file is truncated "
                         "(no end-of-image marker after the rows decoded); "
                         "copy it again or leave it out "
                         "(RF_PARAM_JPEG_WARNINGS=1 accepts it, the missing "
                         "rows grey)");
    jpeg_abort_decompress(ci);
}

static void decode_step(struct rf__jpeg_decoder *dec, void *arg)
{
    struct decode_job *job = arg;
    read_header(dec, job);
    choose_crop(dec, job);
    choose_color(dec, job);
    start(dec, job);
    plan_axes(dec, job);
    read_rows(dec, job);
    finish(dec);
}

int rf__jpeg_decode(struct rf__jpeg_decoder *dec, const uint8_t *data,
                    size_t size, const struct rf__jpeg_options *opt,
                    rf__crop_chooser choose, void *user,
                    const struct rf__jpeg_target *target, char *err,
                    size_t err_len)
{
    char none[1];
    if (!err || err_len == 0) {
        err = none;
        err_len = sizeof(none);
    }
    if (check_signature(data, size, err, err_len) < 0 ||
        check_target(target, err, err_len) < 0)
        return -1;
    struct decode_job job = {.data = data,
                             .size = size,
                             .opt = opt,
                             .choose = choose,
                             .user = user,
                             .target = target};
    dec->err.warnings_are_errors = opt->warnings_are_errors;
    dec->err.warnings = 0;
    dec->max_scans = opt->max_scans;
    dec->max_memory = opt->max_decode_memory;
    if (guarded(dec, decode_step, &job) < 0) {
        rf__format(err, err_len, "%s", dec->err.reason);
        return -1;
    }
    return 0;
}
