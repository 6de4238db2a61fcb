/*
 * jpeg.c - JPEG decoding straight into a batch slot (see jpeg.h), through
 * libjpeg-turbo's libjpeg API: the decoder object, libjpeg's error
 * bridge, and one image's steps from start to finish.
 *
 * One image goes: header -> checks (precision, pixel count) -> EXIF
 * orientation (jpeg-header.c) -> the caller's crop -> DCT scale M/8
 * (jpeg-crop.c) -> start -> the columns (jpeg_crop_scanline) and rows
 * (jpeg_skip_scanlines) the resampler needs (jpeg-crop.c) -> each row
 * into resize.c -> stop. libjpeg reports errors by calling error_exit,
 * which must not return: the error manager below turns that, and warnings
 * when they count as errors, into a longjmp back to guarded(), the only
 * setjmp of the project.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h> /* jpeglib.h needs FILE and size_t first */
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "common/assert.h"
#include "common/internal.h"
#include "decode/jpeg-decoder.h"
#include "decode/resize.h"

/* ---- errors --------------------------------------------------------- */

void rf__jpeg_raise(struct rf__jpeg_decoder *dec, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dec->err.reason, sizeof(dec->err.reason), fmt, ap);
    va_end(ap);
    longjmp(dec->err.jump, 1);
}

/* libjpeg's words for an error it raised, made specific where a common
 * cause has a plainer name. */
static void on_error(j_common_ptr cinfo)
{
    struct rf__jpeg_decoder *dec = rf__jpeg_decoder_of(cinfo);
    char text[JMSG_LENGTH_MAX];
    (*cinfo->err->format_message)(cinfo, text);
    switch (cinfo->err->msg_code) {
    case JERR_BAD_PRECISION:
        rf__jpeg_raise(dec, "%d-bit JPEG is not supported",
                       cinfo->err->msg_parm.i[0]);
    case JERR_INPUT_EOF:
        rf__jpeg_raise(dec, "premature end of data: the file is truncated");
    case JERR_NO_IMAGE:
        rf__jpeg_raise(dec, "no image in the JPEG data (truncated header?)");
    case JERR_OUT_OF_MEMORY: /* malloc failed: the process, not the file */
        if (!dec->err.header_read) /* no size yet (cinfo has the last's) */
            rf__jpeg_raise(dec,
                           "the process ran out of memory reading this JPEG's "
                           "header (the file is not at fault); raise its "
                           "memory limit (ulimit -v, the container's limit)");
        /* kept under RF__JPEG_REASON_LEN at 65535 x 65535 */
        rf__jpeg_raise(
            dec,
            "the process ran out of memory decoding this %sJPEG of %u x %u "
            "pixels (the file is not at fault); raise its memory limit "
            "(ulimit -v, the container's limit), or lower "
            "RF_PARAM_MAX_DECODE_MEMORY or RF_PARAM_MAX_PIXELS to refuse "
            "such images",
            dec->cinfo.progressive_mode ? "progressive " : "",
            dec->cinfo.image_width, dec->cinfo.image_height);
    case JERR_NO_BACKING_STORE: /* libjpeg's own count, past ours */
        rf__jpeg_raise(dec,
                       "decoding this JPEG needs more than the limit of %llu "
                       "MiB of memory; raise RF_PARAM_MAX_DECODE_MEMORY or "
                       "re-encode it as baseline (not progressive)",
                       (unsigned long long)(dec->max_memory >> 20));
    default:
        rf__jpeg_raise(dec,
                       "libjpeg: %s (a damaged file, or a kind of JPEG "
                       "libjpeg-turbo cannot decode: re-encode it or leave it "
                       "out)",
                       text);
    }
}

/* Warnings are libjpeg decoding around damage (a truncated file is
 * completed with grey). A file cut short fails unless the options accept
 * it (PIL refuses it too); the others fail only when the options make
 * every warning an error (PIL ignores them: "extraneous bytes before
 * marker" is common in scraped data and harmless). Trace messages
 * (level >= 0) are ignored. */
static void on_message(j_common_ptr cinfo, int level)
{
    struct rf__jpeg_decoder *dec = rf__jpeg_decoder_of(cinfo);
    if (level >= 0)
        return;
    dec->err.warnings++;
    const bool truncated = cinfo->err->msg_code == JWRN_JPEG_EOF;
    /* Cut before the header ended there are no rows to complete with
     * grey: RF_JPEG_LENIENT would refuse it too (JERR_NO_IMAGE), so no
     * setting is offered. */
    if (truncated && !dec->err.header_read)
        rf__jpeg_raise(dec, "premature end of data: the file is truncated "
                            "inside its header, before any pixel; copy it "
                            "again or leave it out");
    if (truncated && !dec->err.accept_truncated)
        rf__jpeg_raise(dec, "premature end of data: the file is truncated; "
                            "copy it again or leave it out "
                            "(RF_PARAM_JPEG_WARNINGS RF_JPEG_LENIENT accepts "
                            "it, the missing rows grey, as PIL's "
                            "LOAD_TRUNCATED_IMAGES)");
    if (!dec->err.warnings_are_errors)
        return;
    char text[JMSG_LENGTH_MAX];
    (*cinfo->err->format_message)(cinfo, text);
    rf__jpeg_raise(dec,
                   "libjpeg warning: %s (RF_PARAM_JPEG_WARNINGS "
                   "RF_JPEG_STRICT refuses such images; RF_JPEG_AS_PIL, the "
                   "default, accepts them as PIL does)",
                   text);
}

/* libjpeg's progress hook, called as it reads (once per iMCU row of each
 * scan while jpeg_start_decompress absorbs a multi-scan file): refuses
 * files with too many scans before they cost too much (a progressive
 * file of thousands of tiny scans is a decompression bomb). */
static void count_scans(j_common_ptr cinfo)
{
    struct rf__jpeg_decoder *dec = rf__jpeg_decoder_of(cinfo);
    const int scans = ((j_decompress_ptr)cinfo)->input_scan_number;
    if (dec->max_scans != 0 && scans > (int)dec->max_scans)
        rf__jpeg_raise(dec,
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
        rf__jpeg_raise(dec, "out of memory for %zu bytes of scratch", want);
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
        /* the "._NAME" beside each file that a Mac copies to a foreign
         * disk: listed, as ImageFolder lists it, and never an image */
        {0, 4, "\0\x05\x16\x07",
         "macOS AppleDouble metadata, a '._' file a Mac leaves beside each "
         "file it copies; delete those (find DIR -name '._*' -delete)"},
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
int rf__jpeg_check_signature(const uint8_t *data, size_t size,
                             const char *decoded, char *why, size_t why_len)
{
    if (size == 0) {
        rf__format(why, why_len, "empty file (0 bytes): not a %s file",
                   decoded);
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
    rf__format(why, why_len, "not a %s file (starts with %s: %s)", decoded, hex,
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

/* ---- colour and start ----------------------------------------------- */

/* RGB or luminance straight from libjpeg; CMYK and YCCK come out as CMYK
 * and are converted here, since libjpeg has no CMYK -> RGB. */
static void choose_color(struct rf__jpeg_decoder *dec, struct rf__jpeg_job *job)
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
        rf__jpeg_raise(dec, "unsupported JPEG colour space (%d components)",
                       ci->num_components);
    }
}

static void start(struct rf__jpeg_decoder *dec, struct rf__jpeg_job *job)
{
    j_decompress_ptr ci = &dec->cinfo;
    RF_ASSERT(job->scale >= 1 && job->scale <= 8); /* rf__jpeg_scale_for() */
    ci->scale_num = job->scale;
    ci->scale_denom = 8;
    /* what TurboJPEG and PIL use by default: the same pixels as theirs */
    ci->dct_method = JDCT_ISLOW;
    ci->do_fancy_upsampling = TRUE;
    jpeg_start_decompress(ci);
}

/* ---- rows into the resizer ------------------------------------------ */

struct rf__resize_dest rf__jpeg_target_dest(const struct rf__jpeg_target *t)
{
    return (struct rf__resize_dest){.dst = t->dst,
                                    .width = t->out_width,
                                    .height = t->out_height,
                                    .channels = t->channels,
                                    .layout = t->layout};
}

/* The target as the resizer sees it: a transposed orientation turns
 * result rows into target columns; the crop's flip mirrors target x.
 * Rows pushed are the cropped decode's (cinfo.output_width pixels). */
static void begin_resize(struct rf__jpeg_decoder *dec, struct rf__jpeg_job *job)
{
    const struct rf__jpeg_orientation *o = &job->orient;
    const bool reverse_x = o->transpose ? o->reverse_y : o->reverse_x;
    struct rf__resize_dest dest = rf__jpeg_target_dest(job->target);
    dest.transpose = o->transpose;
    dest.y_first = job->crop.y_first;
    dest.mirror_x = reverse_x != job->crop.flip;
    dest.mirror_y = o->transpose ? o->reverse_x : o->reverse_y;
    const int rc = rf__resizer_begin(&dec->resizer, job->channels,
                                     dec->cinfo.output_width, &dest);
    if (rc == -ENOMEM)
        rf__jpeg_raise(dec, "out of memory for the resize buffers");
    if (rc < 0)
        rf__jpeg_raise(dec, "internal error: the resizer refused its target");
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

/* Rows asked of libjpeg per call: one at a time costs it a pass through
 * its whole pipeline per row. */
#define ROW_BATCH 16

/* Pushes `count` decoded rows into the resizer, CMYK ones converted to
 * the working channels first. */
static void push_rows(struct rf__jpeg_decoder *dec, struct rf__jpeg_job *job,
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
static void read_rows(struct rf__jpeg_decoder *dec, struct rf__jpeg_job *job)
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
        rf__jpeg_raise(dec, "libjpeg skipped fewer rows than asked");
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
                rf__jpeg_raise(dec, "libjpeg returned no scanline");
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
        rf__jpeg_raise(dec, "internal error: rows missing for the resize");
}

/* ---- the end of the image ------------------------------------------- */

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

/* Whether the entropy decoder stopped at a marker inside the image data:
 * bytes of damage that read as one (0xff 0x38 in the scan), not the end
 * marker nor a restart marker met on the way. The rows after it decode
 * to nothing, and a full decode then reads that marker and fails (PIL's
 * "broken data stream"). */
static bool stopped_at_a_stray_marker(j_decompress_ptr ci)
{
    const int marker = ci->unread_marker;
    return marker != 0 && marker != JPEG_EOI &&
           !(marker >= JPEG_RST0 && marker < JPEG_RST0 + 8);
}

/* Reads on to the end of the image data as a full decode would, so that
 * what follows it is read too: the rows but the last skipped (which
 * decodes nothing after a stray marker), the last read (skipping to the
 * very end would take the end as reached without reading on). */
static void read_to_the_end(j_decompress_ptr ci)
{
    const JDIMENSION left = ci->output_height - ci->output_scanline;
    if (left > 1)
        (void)jpeg_skip_scanlines(ci, left - 1);
    JSAMPARRAY row = (*ci->mem->alloc_sarray)(
        (j_common_ptr)ci, JPOOL_IMAGE,
        ci->output_width * (JDIMENSION)ci->out_color_components, 1);
    while (ci->output_scanline < ci->output_height)
        (void)jpeg_read_scanlines(ci, row, 1);
}

/*
 * A decode that read the last row reads on to the end, so that damage
 * after the image data (a stream cut short or out of step) is noticed.
 * One that stopped earlier abandons the rest: rows below the crop are
 * never decoded. Two kinds of damage are still refused as a full decode
 * refuses them, so that such a file fails in every epoch and not only in
 * those whose crop reaches it: a file cut short, by the end marker's
 * absence; and a stray marker the rows decoded ran into, by reading on
 * (the rows left are cheap: nothing after the marker is decoded). Other
 * damage below the crop, and damage that leaves the Huffman stream out of
 * step without a marker to show it, goes unseen by such a crop:
 * `ringfeed-pack --verify` decodes every row of every file.
 */
static void finish(struct rf__jpeg_decoder *dec)
{
    j_decompress_ptr ci = &dec->cinfo;
    if (ci->output_scanline < ci->output_height &&
        stopped_at_a_stray_marker(ci))
        read_to_the_end(ci);
    if (ci->output_scanline == ci->output_height) {
        jpeg_finish_decompress(ci);
        return;
    }
    /* A multi-scan file was read whole by jpeg_start_decompress; the
     * entropy decoder may have read the end marker already */
    const bool whole = jpeg_has_multiple_scans(ci) ||
                       ci->unread_marker == JPEG_EOI ||
                       end_marker_follows(ci->src);
    if (!dec->err.accept_truncated && !whole)
        rf__jpeg_raise(dec, "premature end of data: the file is truncated "
                            "(no end-of-image marker after the rows decoded); "
                            "copy it again or leave it out "
                            "(RF_PARAM_JPEG_WARNINGS RF_JPEG_LENIENT accepts "
                            "it, the missing rows grey)");
    jpeg_abort_decompress(ci);
}

static void decode_step(struct rf__jpeg_decoder *dec, void *arg)
{
    struct rf__jpeg_job *job = arg;
    rf__jpeg_read_header(dec, job);
    rf__jpeg_choose_crop(dec, job);
    choose_color(dec, job);
    start(dec, job);
    rf__jpeg_plan_axes(dec, job);
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
    if (rf__jpeg_check_signature(data, size,
                                 opt->decoded ? opt->decoded : "JPEG", err,
                                 err_len) < 0 ||
        check_target(target, err, err_len) < 0)
        return -1;
    struct rf__jpeg_job job = {.data = data,
                               .size = size,
                               .opt = opt,
                               .choose = choose,
                               .user = user,
                               .target = target};
    dec->err.warnings_are_errors = opt->warnings_are_errors;
    dec->err.accept_truncated = opt->accept_truncated;
    dec->err.warnings = 0;
    dec->max_scans = opt->max_scans;
    dec->max_memory = opt->max_decode_memory;
    if (guarded(dec, decode_step, &job) < 0) {
        rf__format(err, err_len, "%s", dec->err.reason);
        return -1;
    }
    return 0;
}
