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

/* Bytes of one value of TIFF type `type` as PIL reads EXIF (Pillow 9.4's
 * ImageFileDirectory_v2._load_dispatch): BYTE, ASCII, SHORT, LONG,
 * RATIONAL, SBYTE, UNDEFINED, SSHORT, SLONG, SRATIONAL, FLOAT, DOUBLE, IFD
 * and LONG8; 0 for a type it does not know, whose entry it passes over. */
static uint32_t tiff_type_size(uint32_t type)
{
    static const uint8_t sizes[17] = {
        [1] = 1, [2] = 1, [3] = 2,  [4] = 4,  [5] = 8,  [6] = 1,  [7] = 1,
        [8] = 2, [9] = 4, [10] = 8, [11] = 4, [12] = 8, [13] = 4, [16] = 8};
    return type < sizeof(sizes) ? sizes[type] : 0;
}

/* k when the number num / den is exactly the whole number k in 1..8,
 * else 0 (den 0 included: PIL makes that NaN). */
static int whole_orientation(int64_t num, int64_t den)
{
    if (den == 0 || num % den != 0)
        return 0;
    const int64_t k = num / den;
    return k >= 1 && k <= 8 ? (int)k : 0;
}

/* The same for a floating-point value (NaN is none). */
static int float_orientation(double v)
{
    for (int k = 1; k <= 8; k++)
        if (v == (double)k)
            return k;
    return 0;
}

/* The orientation that the first value at p, of TIFF type `type`, gives
 * PIL's exif_transpose(): one that equals a whole number from 1 to 8 (PIL
 * looks it up in a dict, where 6, 6.0 and the rational 12/2 are one key),
 * else 0. BYTE, ASCII and UNDEFINED come out as bytes or text, which
 * never do. */
static int value_orientation(const uint8_t *p, uint32_t type, bool big)
{
    switch (type) {
    case 3: /* SHORT */
        return whole_orientation(tiff_u16(p, big), 1);
    case 8: /* SSHORT */
        return whole_orientation((int16_t)tiff_u16(p, big), 1);
    case 4:  /* LONG */
    case 13: /* IFD */
        return whole_orientation(tiff_u32(p, big), 1);
    case 9: /* SLONG */
        return whole_orientation((int32_t)tiff_u32(p, big), 1);
    case 6: /* SBYTE */
        return whole_orientation((int8_t)p[0], 1);
    case 16: { /* LONG8: a value of 1..8 has its high half 0 */
        const uint32_t high = tiff_u32(p + (big ? 0 : 4), big);
        return high ? 0
                    : whole_orientation(tiff_u32(p + (big ? 4 : 0), big), 1);
    }
    case 5: /* RATIONAL */
        return whole_orientation(tiff_u32(p, big), tiff_u32(p + 4, big));
    case 10: /* SRATIONAL */
        return whole_orientation((int32_t)tiff_u32(p, big),
                                 (int32_t)tiff_u32(p + 4, big));
    case 11: { /* FLOAT, IEEE 754 single */
        const uint32_t bits = tiff_u32(p, big);
        float f;
        memcpy(&f, &bits, sizeof(f));
        return float_orientation(f);
    }
    case 12: { /* DOUBLE */
        const uint64_t bits = (uint64_t)tiff_u32(p + (big ? 0 : 4), big) << 32 |
                              tiff_u32(p + (big ? 4 : 0), big);
        double d;
        memcpy(&d, &bits, sizeof(d));
        return float_orientation(d);
    }
    default: /* BYTE, ASCII, UNDEFINED */
        return 0;
    }
}

/* The Orientation tag (0x0112) of IFD0 of an Exif block's TIFF
 * structure; 1 (upright) when absent or unreadable. The standard stores
 * one SHORT; writers also store other types, more than one value, and the
 * tag twice. It is read as Pillow 9.4 (Debian 12's) reads it for
 * exif_transpose(), entry by entry: an entry of a type it does not know
 * or with a count of 0 is passed over; one whose values lie past the end
 * of the block ends the reading (whatever its tag: the entries before
 * stay); the last Orientation entry read counts, by its first value (so
 * one of BYTE or UNDEFINED type after a SHORT leaves the image upright).
 * Its start may be any of the six PIL takes (below). Every offset is
 * checked against the block: the bytes come from the file. */
static int tiff_orientation(const uint8_t *tiff, size_t len)
{
    /* The starts PIL takes (TiffImagePlugin.PREFIXES): besides the two
     * of the standard, "MM*\0" and "II\0*" (a wrong magic, read with
     * the order that "MM" or "II" gives) and "MM\0+", which it reads as
     * a classic TIFF since only a '+' at byte 2 makes it BigTIFF; that
     * one, "II+\0", it cannot read from an 8-byte head (it raises). */
    static const uint8_t starts[5][4] = {{'M', 'M', 0, '*'},
                                         {'I', 'I', '*', 0},
                                         {'M', 'M', '*', 0},
                                         {'I', 'I', 0, '*'},
                                         {'M', 'M', 0, '+'}};
    bool known = false;
    for (int i = 0; len >= 8 && i < 5; i++)
        known = known || memcmp(tiff, starts[i], 4) == 0;
    if (!known)
        return 1;
    const bool big = tiff[0] == 'M';
    const uint32_t ifd = tiff_u32(tiff + 4, big);
    if (ifd > len - 2)
        return 1;
    const uint32_t entries = tiff_u16(tiff + ifd, big);
    int value = 1; /* none read: upright */
    for (uint32_t i = 0; i < entries; i++) {
        const size_t at = ifd + 2 + (size_t)12 * i;
        if (at + 12 > len)
            break;
        const uint32_t type = tiff_u16(tiff + at + 2, big);
        const uint64_t size =
            (uint64_t)tiff_u32(tiff + at + 4, big) * tiff_type_size(type);
        if (size == 0) /* a type PIL does not know, or no value */
            continue;
        uint64_t value_at = at + 8; /* the values themselves when they fit */
        if (size > 4) {
            value_at = tiff_u32(tiff + at + 8, big);
            if (value_at + size > len)
                break; /* PIL: "Truncated File Read", and no more entries */
        }
        if (tiff_u16(tiff + at, big) == 0x0112)
            value = value_orientation(tiff + value_at, type, big);
    }
    return value >= 1 && value <= 8 ? value : 1;
}

/* The orientation of the first APP1 block that begins "Exif\0": the one
 * PIL keeps (JpegImagePlugin's info["exif"]), whose TIFF structure
 * follows "Exif\0\0". Where that first block lacks the second NUL, or
 * holds nothing after it, PIL reads no orientation (getexif() raises, or
 * finds no tag): upright, and no later block is read in its place. */
static int exif_orientation(j_decompress_ptr cinfo)
{
    for (jpeg_saved_marker_ptr m = cinfo->marker_list; m; m = m->next)
        if (m->marker == JPEG_APP0 + 1 && m->data_length >= 5 &&
            memcmp(m->data, "Exif\0", 5) == 0)
            return m->data_length > 6 && m->data[5] == 0
                       ? tiff_orientation(m->data + 6, m->data_length - 6)
                       : 1;
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
