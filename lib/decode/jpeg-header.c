/*
 * jpeg-header.c - what a JPEG's header decides before any pixel is
 * decoded: files over the limits are refused (precision, pixel count, the
 * memory a multi-scan file would take), and the EXIF orientation tag says
 * how the stored pixels map onto the upright image. See jpeg-decoder.h.
 */
#include "config.h"

#include <limits.h>
#include <string.h>

#include "decode/jpeg-decoder.h"

/* EXIF orientations 1 to 8 (0: none given, taken as upright). */
static const struct rf__jpeg_orientation orientations[9] = {
    [1] = {false, false, false}, [2] = {false, true, false},
    [3] = {false, true, true},   [4] = {false, false, true},
    [5] = {true, false, false},  [6] = {true, false, true},
    [7] = {true, true, true},    [8] = {true, true, false},
};

static uint32_t tiff_u16(const uint8_t *p, bool big_endian)
{
    return big_endian ? (uint32_t)p[0] << 8 | p[1] : (uint32_t)p[1] << 8 | p[0];
}

static uint32_t tiff_u32(const uint8_t *p, bool big_endian)
{
    return big_endian ? tiff_u16(p, true) << 16 | tiff_u16(p + 2, true)
                      : tiff_u16(p + 2, false) << 16 | tiff_u16(p, false);
}

/* Bytes of one value of TIFF type `type` among those an orientation may
 * be stored as (SHORT, LONG, SSHORT, SLONG), else 0. */
static uint32_t tiff_integer_size(uint32_t type)
{
    return type == 3 || type == 8 ? 2 : type == 4 || type == 9 ? 4 : 0;
}

/* The orientation in IFD0 entry `at` (its tag checked), or 0 when it
 * holds none this reads: a SHORT, LONG, SSHORT or SLONG, the first of
 * several values (then at an offset), none for a count of 0. Every offset
 * is checked against the block: the bytes come from the file. */
static uint32_t entry_orientation(const uint8_t *tiff, size_t len, size_t at,
                                  bool big)
{
    const uint32_t size = tiff_integer_size(tiff_u16(tiff + at + 2, big));
    const uint32_t count = tiff_u32(tiff + at + 4, big);
    if (size == 0 || count == 0)
        return 0;
    size_t value_at = at + 8; /* the value itself when it fits in 4 */
    if ((uint64_t)count * size > 4)
        value_at = tiff_u32(tiff + at + 8, big);
    if (value_at > len - size)
        return 0;
    return size == 2 ? tiff_u16(tiff + value_at, big)
                     : tiff_u32(tiff + value_at, big);
}

/* The Orientation tag (0x0112) of IFD0 of an Exif block's TIFF
 * structure; 1 (upright) when absent or unreadable. The standard stores
 * one SHORT; writers also store a LONG, a signed type or more than one
 * value, and the tag twice, which PIL's exif_transpose() honours (the
 * last entry counts), so these are read as it reads them (not the
 * rational, floating and byte types it also takes, which no writer
 * seen uses for a number from 1 to 8). */
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
    uint32_t value = 0;
    for (uint32_t i = 0; i < entries; i++) {
        const size_t at = ifd + 2 + (size_t)12 * i;
        if (at + 12 > len)
            break;
        if (tiff_u16(tiff + at, big) != 0x0112)
            continue;
        const uint32_t here = entry_orientation(tiff, len, at, big);
        if (here)
            value = here;
    }
    return value >= 1 && value <= 8 ? (int)value : 1;
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
        rf__jpeg_raise(
            dec,
            "a multi-scan (progressive) JPEG of %u x %u pixels needs "
            "%llu MiB of memory to decode, above the limit of %llu "
            "MiB; raise RF_PARAM_MAX_DECODE_MEMORY or re-encode it "
            "as baseline",
            ci->image_width, ci->image_height,
            (unsigned long long)((need + (1u << 20) - 1) >> 20),
            (unsigned long long)(dec->max_memory >> 20));
}

void rf__jpeg_read_header(struct rf__jpeg_decoder *dec,
                          struct rf__jpeg_job *job)
{
    j_decompress_ptr ci = &dec->cinfo;
    const bool exif = job->opt->exif_orientation;
    jpeg_mem_src(ci, job->data, (unsigned long)job->size);
    /* kept across images by libjpeg: set every time (0 = skip them) */
    jpeg_save_markers(ci, JPEG_APP0 + 1, exif ? 0xffff : 0);
    dec->err.header_read = false; /* cinfo still has the last image's */
    jpeg_read_header(ci, TRUE);
    dec->err.header_read = true;
    if (ci->data_precision != 8)
        rf__jpeg_raise(dec, "%d-bit JPEG is not supported", ci->data_precision);
    const uint64_t pixels = (uint64_t)ci->image_width * ci->image_height;
    if (pixels > job->opt->max_pixels)
        rf__jpeg_raise(dec,
                       "%u x %u pixels is above the limit of %llu; raise "
                       "RF_PARAM_MAX_PIXELS",
                       ci->image_width, ci->image_height,
                       (unsigned long long)job->opt->max_pixels);
    check_memory(dec);
    job->orient = orientations[exif ? exif_orientation(ci) : 1];
}
