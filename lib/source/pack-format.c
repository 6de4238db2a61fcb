/*
 * pack-format.c - the byte layout of ringfeed's packed file and folder
 * index: encoders and decoders of their headers and entries, and the
 * rules a packed file's header and index entries must keep, which the
 * writer (pack-writer.c) keeps and the reader (pack-reader.c) checks.
 * The format is described in docs/packed-format.md.
 */
#include "config.h"

#include <string.h>
#include <zstd.h>

#include "common/internal.h"
#include "source/crc32c.h"
#include "source/little-endian.h"
#include "source/pack-format.h"

/* ---- the two headers, each described once by a table of its fields ----- */

/* One field of a header: where it lies in the bytes and where in the
 * decoded struct; its width, 4 or 8 bytes, is the struct member's. */
struct header_field {
    uint8_t at;
    uint8_t width;
    uint8_t member;
};

#define HEADER_FIELD(type, name, at)                                           \
    {                                                                          \
        (at), sizeof(((type *)0)->name), offsetof(type, name)                  \
    }

/* A header's layout: an 8-byte magic (no terminator in the file), the
 * format version at byte 8, the fields, and a CRC-32C of the header
 * computed with its own 4 bytes at crc_at as zero. */
struct header_layout {
    const char *magic;
    const char *what; /* for "not a ...": the format's name */
    uint32_t known_version;
    size_t size, crc_at;
    const struct header_field *fields;
    size_t field_count;
};

#define PACK_FIELD(name, at) HEADER_FIELD(struct rf__pack_header, name, at)
static const struct header_field pack_header_fields[] = {
    PACK_FIELD(version, 8),       PACK_FIELD(header_size, 12),
    PACK_FIELD(flags, 16),        PACK_FIELD(entry_size, 20),
    PACK_FIELD(samples, 24),      PACK_FIELD(classes, 32),
    PACK_FIELD(height, 36),       PACK_FIELD(width, 40),
    PACK_FIELD(channels, 44),     PACK_FIELD(layout, 48),
    PACK_FIELD(index_offset, 56), PACK_FIELD(names_offset, 64),
    PACK_FIELD(names_size, 72),   PACK_FIELD(dict_offset, 80),
    PACK_FIELD(dict_size, 88),    PACK_FIELD(file_size, 96),
    PACK_FIELD(meta_crc, 104),    PACK_FIELD(header_crc, 108),
};

static const struct header_layout pack_header_layout = {
    .magic = RF__PACK_MAGIC,
    .what = "ringfeed packed file",
    .known_version = RF__PACK_VERSION,
    .size = RF__PACK_HEADER_SIZE,
    .crc_at = 108,
    .fields = pack_header_fields,
    .field_count = sizeof(pack_header_fields) / sizeof(pack_header_fields[0]),
};

#define INDEX_FIELD(name, at) HEADER_FIELD(struct rf__index_header, name, at)
static const struct header_field index_header_fields[] = {
    INDEX_FIELD(version, 8),     INDEX_FIELD(header_size, 12),
    INDEX_FIELD(entry_size, 16), INDEX_FIELD(classes, 20),
    INDEX_FIELD(samples, 24),    INDEX_FIELD(names_offset, 32),
    INDEX_FIELD(names_size, 40), INDEX_FIELD(total_size, 48),
    INDEX_FIELD(body_crc, 56),   INDEX_FIELD(header_crc, 60),
};

static const struct header_layout index_header_layout = {
    .magic = RF__INDEX_MAGIC,
    .what = "ringfeed folder index",
    .known_version = RF__INDEX_VERSION,
    .size = RF__INDEX_HEADER_SIZE,
    .crc_at = 60,
    .fields = index_header_fields,
    .field_count = sizeof(index_header_fields) / sizeof(index_header_fields[0]),
};

/* One field from the struct into the header's bytes, and back. */
static void put_field(const struct header_field *f, const void *h, uint8_t *out)
{
    const uint8_t *from = (const uint8_t *)h + f->member;
    if (f->width == 8) {
        uint64_t value = 0;
        memcpy(&value, from, 8);
        rf__put_le64(out + f->at, value);
    } else {
        uint32_t value = 0;
        memcpy(&value, from, 4);
        rf__put_le32(out + f->at, value);
    }
}

static void get_field(const struct header_field *f, void *h, const uint8_t *in)
{
    uint8_t *to = (uint8_t *)h + f->member;
    if (f->width == 8) {
        const uint64_t value = rf__get_le64(in + f->at);
        memcpy(to, &value, 8);
    } else {
        const uint32_t value = rf__get_le32(in + f->at);
        memcpy(to, &value, 4);
    }
}

/* Writes the magic and the fields, the checksum's own aside, then the
 * checksum of those bytes with its field still zero. */
static void encode_header(const struct header_layout *l, const void *h,
                          uint8_t *out)
{
    memset(out, 0, l->size);
    memcpy(out, l->magic, 8);
    for (size_t i = 0; i < l->field_count; i++)
        if (l->fields[i].at != l->crc_at)
            put_field(&l->fields[i], h, out);
    rf__put_le32(out + l->crc_at, rf__crc32c_bitwise(out, l->size));
}

/* The CRC of a header whose checksum field at crc_at reads as zero. */
static uint32_t header_crc(const uint8_t *in, size_t size, size_t crc_at)
{
    _Static_assert(RF__INDEX_HEADER_SIZE <= RF__PACK_HEADER_SIZE,
                   "a copy of either header fits");
    uint8_t copy[RF__PACK_HEADER_SIZE];
    memcpy(copy, in, size);
    memset(copy + crc_at, 0, 4);
    return rf__crc32c_bitwise(copy, size);
}

/* Describes the first 8 bytes of a file that is not the expected format,
 * with a guess at what it is. */
static void describe_magic(const uint8_t *in, char *why, size_t why_len)
{
    const char *guess = "";
    if (in[0] == 0xff && in[1] == 0xd8)
        guess = " (a JPEG file)";
    else if (memcmp(in, "\x89PNG", 4) == 0)
        guess = " (a PNG file)";
    else if (memcmp(in, "RFLIST01", 8) == 0)
        guess = " (a ringfeed folder index)";
    else if (memcmp(in, "RFPACK01", 8) == 0)
        guess = " (a ringfeed packed file)";
    rf__format(why, why_len,
               "starts with %02x %02x %02x %02x %02x %02x %02x %02x%s", in[0],
               in[1], in[2], in[3], in[4], in[5], in[6], in[7], guess);
}

static int check_version(uint32_t version, uint32_t known, char *why,
                         size_t why_len)
{
    if (version > known) {
        rf__format(why, why_len,
                   "format version %u is newer than this ringfeed reads (%u); "
                   "upgrade ringfeed (or, if that version does not exist, "
                   "the header is damaged: write the file again)",
                   version, known);
        return RF__FORMAT_NEWER;
    }
    if (version == 0) {
        rf__format(why, why_len, "format version 0 does not exist");
        return RF__FORMAT_DAMAGED;
    }
    return 0;
}

/* What both headers' decoders check first, in this order: the magic,
 * then (the fields decoded) the version and the checksum. */
static int decode_header(const struct header_layout *l, void *h,
                         const uint8_t *in, char *why, size_t why_len)
{
    if (memcmp(in, l->magic, 8) != 0) {
        char magic[96];
        describe_magic(in, magic, sizeof(magic));
        rf__format(why, why_len, "not a %s: it %s", l->what, magic);
        return RF__FORMAT_FOREIGN;
    }
    for (size_t i = 0; i < l->field_count; i++)
        get_field(&l->fields[i], h, in);
    const int rc =
        check_version(rf__get_le32(in + 8), l->known_version, why, why_len);
    if (rc < 0)
        return rc;
    if (header_crc(in, l->size, l->crc_at) != rf__get_le32(in + l->crc_at)) {
        rf__format(why, why_len, "the header's checksum does not match");
        return RF__FORMAT_DAMAGED;
    }
    return 0;
}

/* ---- packed file header and entries ------------------------------------- */

static bool within_param_range(rf_param param, uint32_t value)
{
    int64_t min = 0, max = 0;
    return rf__param_range(param, &min, &max) && value >= min && value <= max;
}

/* A sample shape a loader can be configured for (its RF_PARAM_HEIGHT,
 * WIDTH, CHANNELS and LAYOUT), since it must be configured for the pack's
 * shape to read the pack; or all zeros, for JPEG samples only. Writer and
 * reader share it: a pack with any other shape could never be loaded. */
bool rf__pack_shape_is_loadable(uint32_t height, uint32_t width,
                                uint32_t channels, uint32_t layout)
{
    if (layout > RF_LAYOUT_NCHW)
        return false;
    if (!height && !width && !channels)
        return true;
    return within_param_range(RF_PARAM_HEIGHT, height) &&
           within_param_range(RF_PARAM_WIDTH, width) &&
           within_param_range(RF_PARAM_CHANNELS, channels);
}

/* "heights and widths of 1..65536 and 1..4 channels", from the config's
 * ranges, for the messages of both. */
void rf__describe_loadable_shapes(char *out, size_t len)
{
    int64_t h_min = 0, h_max = 0, w_min = 0, w_max = 0, c_min = 0, c_max = 0;
    rf__param_range(RF_PARAM_HEIGHT, &h_min, &h_max);
    rf__param_range(RF_PARAM_WIDTH, &w_min, &w_max);
    rf__param_range(RF_PARAM_CHANNELS, &c_min, &c_max);
    rf__format(out, len,
               "a height of %lld..%lld, a width of %lld..%lld and "
               "%lld..%lld channels",
               (long long)h_min, (long long)h_max, (long long)w_min,
               (long long)w_max, (long long)c_min, (long long)c_max);
}

static int check_pack_shape(const struct rf__pack_header *h, char *why,
                            size_t why_len)
{
    if (rf__pack_shape_is_loadable(h->height, h->width, h->channels, h->layout))
        return 0;
    char loadable[160];
    rf__describe_loadable_shapes(loadable, sizeof(loadable));
    rf__format(why, why_len,
               "the header's sample shape %u x %u x %u, layout %u, is not "
               "valid (a loader takes %s, layout 0 or 1; or all zeros)",
               h->height, h->width, h->channels, h->layout, loadable);
    return -1;
}

void rf__pack_header_encode(const struct rf__pack_header *h,
                            uint8_t out[RF__PACK_HEADER_SIZE])
{
    encode_header(&pack_header_layout, h, out);
}

/* Reserved bytes of the packed file's header: 4 at 52 and 16 at 112. The
 * header's checksum covers them, but a writer could compute it over bytes
 * it did not clear: version 1 has them all zero, so a file that does not
 * is refused rather than read with meaning a later version may give them. */
static int check_pack_reserved(const uint8_t *in, char *why, size_t why_len)
{
    static const struct {
        uint8_t at, size;
    } reserved[] = {{52, 4}, {112, 16}};
    for (size_t r = 0; r < sizeof(reserved) / sizeof(reserved[0]); r++)
        for (uint8_t i = 0; i < reserved[r].size; i++) {
            const unsigned at = reserved[r].at + i;
            if (in[at] == 0)
                continue;
            rf__format(why, why_len,
                       "its header's reserved byte at %u is 0x%02x; version 1 "
                       "has every reserved byte (52..55, 112..127) zero",
                       at, in[at]);
            return RF__FORMAT_DAMAGED;
        }
    return 0;
}

int rf__pack_header_decode(struct rf__pack_header *h,
                           const uint8_t in[RF__PACK_HEADER_SIZE], char *why,
                           size_t why_len)
{
    const int rc = decode_header(&pack_header_layout, h, in, why, why_len);
    if (rc < 0)
        return rc;
    if (check_pack_reserved(in, why, why_len) < 0)
        return RF__FORMAT_DAMAGED;
    if (h->header_size != RF__PACK_HEADER_SIZE ||
        h->entry_size != RF__PACK_ENTRY_SIZE ||
        (h->flags & ~RF__PACK_FLAGS_KNOWN)) {
        rf__format(why, why_len,
                   "the header has header size %u, entry size %u and flags "
                   "0x%x; version 1 has 128, 40 and flags within 0x%x",
                   h->header_size, h->entry_size, h->flags,
                   RF__PACK_FLAGS_KNOWN);
        return RF__FORMAT_DAMAGED;
    }
    return check_pack_shape(h, why, why_len) < 0 ? RF__FORMAT_DAMAGED : 0;
}

/* Entries are coded field by field rather than from a table like the
 * headers: a reader decodes one for every sample it reads, and every one
 * at open, where a table's loop would cost. */
void rf__pack_entry_encode(const struct rf__pack_entry *e,
                           uint8_t out[RF__PACK_ENTRY_SIZE])
{
    memset(out, 0, RF__PACK_ENTRY_SIZE);
    rf__put_le64(out, e->offset);
    rf__put_le64(out + 8, e->name_offset);
    rf__put_le64(out + 16, (uint64_t)e->label);
    rf__put_le32(out + 24, e->size);
    rf__put_le32(out + 28, e->crc);
    rf__put_le32(out + 32, e->name_length);
    out[36] = e->kind;
    memcpy(out + 37, e->reserved, sizeof(e->reserved));
}

void rf__pack_entry_decode(struct rf__pack_entry *e,
                           const uint8_t in[RF__PACK_ENTRY_SIZE])
{
    e->offset = rf__get_le64(in);
    e->name_offset = rf__get_le64(in + 8);
    e->label = (int64_t)rf__get_le64(in + 16);
    e->size = rf__get_le32(in + 24);
    e->crc = rf__get_le32(in + 28);
    e->name_length = rf__get_le32(in + 32);
    e->kind = in[36];
    memcpy(e->reserved, in + 37, sizeof(e->reserved));
}

/* ---- what a packed file's header and entries must keep ------------------ */

/* file_size, and the index: after the header and inside the file. Every
 * size a header gives is compared with the file's real size (fstat)
 * before anything is read or allocated, so that a damaged header costs
 * nothing; and every offset is checked before it is subtracted, so that
 * no difference wraps. */
static int check_pack_index_area(const struct rf__pack_header *h, uint64_t size,
                                 char *why, size_t why_len)
{
    if (h->file_size != size) {
        rf__format(
            why, why_len,
            "its header's file_size is %llu bytes, but the file has %llu (%s)",
            (unsigned long long)h->file_size, (unsigned long long)size,
            size < h->file_size ? "truncated" : "something was appended to it");
        return -1;
    }
    if (h->index_offset < h->header_size || h->index_offset > size) {
        rf__format(why, why_len,
                   "its header's index_offset %llu is not between the end of "
                   "its header (%u) and the end of the file (%llu bytes)",
                   (unsigned long long)h->index_offset, h->header_size,
                   (unsigned long long)size);
        return -1;
    }
    const uint64_t room = (size - h->index_offset) / h->entry_size;
    if (h->samples > room) {
        rf__format(why, why_len,
                   "its header's samples, %llu index entries of %u bytes at "
                   "index_offset %llu, do not fit its %llu bytes (room for "
                   "%llu)",
                   (unsigned long long)h->samples, h->entry_size,
                   (unsigned long long)h->index_offset,
                   (unsigned long long)size, (unsigned long long)room);
        return -1;
    }
    const uint64_t index_end = h->index_offset + h->samples * h->entry_size;
    if (h->names_offset != index_end) {
        rf__format(why, why_len,
                   "its header's names_offset %llu is not where its index "
                   "ends (%llu)",
                   (unsigned long long)h->names_offset,
                   (unsigned long long)index_end);
        return -1;
    }
    return 0;
}

/* The names follow the index, within the file and within 4096 bytes a
 * sample. names_offset <= size is known. */
static int check_pack_names_area(const struct rf__pack_header *h, uint64_t size,
                                 char *why, size_t why_len)
{
    const uint64_t room = size - h->names_offset;
    if (h->names_size > room) {
        rf__format(why, why_len,
                   "its header's names_size, %llu bytes at names_offset %llu, "
                   "runs past the end of the file: it has %llu bytes after it",
                   (unsigned long long)h->names_size,
                   (unsigned long long)h->names_offset,
                   (unsigned long long)room);
        return -1;
    }
    if (h->names_size > 0 &&
        (h->names_size - 1) / (RF__PACK_NAME_MAX + 1) >= h->samples) {
        rf__format(why, why_len,
                   "its header's names_size, %llu bytes, is more than %u "
                   "bytes for each of its %llu samples",
                   (unsigned long long)h->names_size, RF__PACK_NAME_MAX + 1,
                   (unsigned long long)h->samples);
        return -1;
    }
    return 0;
}

/* The dictionary follows the names and ends the file, within
 * RF__PACK_DICT_MAX. The names are known to end inside the file. */
static int check_pack_dict_area(const struct rf__pack_header *h, uint64_t size,
                                char *why, size_t why_len)
{
    const uint64_t names_end = h->names_offset + h->names_size;
    if (h->dict_offset != names_end) {
        rf__format(why, why_len,
                   "its header's dict_offset %llu is not where its names end "
                   "(%llu)",
                   (unsigned long long)h->dict_offset,
                   (unsigned long long)names_end);
        return -1;
    }
    if (h->dict_size != size - h->dict_offset) {
        rf__format(why, why_len,
                   "its header's dict_size, %llu bytes at dict_offset %llu, "
                   "does not end the file: it has %llu bytes after it",
                   (unsigned long long)h->dict_size,
                   (unsigned long long)h->dict_offset,
                   (unsigned long long)(size - h->dict_offset));
        return -1;
    }
    if (h->dict_size > RF__PACK_DICT_MAX) {
        rf__format(why, why_len,
                   "its header's dict_size, %llu bytes, is more than the %llu "
                   "(64 MiB) a dictionary may have",
                   (unsigned long long)h->dict_size,
                   (unsigned long long)RF__PACK_DICT_MAX);
        return -1;
    }
    return 0;
}

/* Bit 0 of flags says there are names, bit 1 that there is a dictionary. */
static int check_pack_flags(const struct rf__pack_header *h, char *why,
                            size_t why_len)
{
    if (!(h->flags & RF__PACK_FLAG_NAMES) == !h->names_size &&
        !(h->flags & RF__PACK_FLAG_DICT) == !h->dict_size)
        return 0;
    rf__format(why, why_len,
               "its header's flags 0x%x do not match its names_size %llu and "
               "dict_size %llu",
               h->flags, (unsigned long long)h->names_size,
               (unsigned long long)h->dict_size);
    return -1;
}

/* The areas the header names must tile the file exactly: payloads from
 * the header to the index, then index, names and dictionary to the end. */
int rf__pack_check_areas(const struct rf__pack_header *h, uint64_t size,
                         char *why, size_t why_len)
{
    if (check_pack_index_area(h, size, why, why_len) < 0 ||
        check_pack_names_area(h, size, why, why_len) < 0 ||
        check_pack_dict_area(h, size, why, why_len) < 0 ||
        check_pack_flags(h, why, why_len) < 0)
        return RF__FORMAT_DAMAGED;
    return 0;
}

static bool entry_is_zeros(const struct rf__pack_entry *e)
{
    return !e->offset && !e->name_offset && !e->label && !e->size && !e->crc &&
           !e->name_length && !e->kind && !e->reserved[0] && !e->reserved[1] &&
           !e->reserved[2];
}

/* What is wrong with an index entry, its name aside (that needs the
 * names area, which follows the index); NULL when nothing is. */
const char *rf__pack_entry_problem(const struct rf__pack_header *h,
                                   const struct rf__pack_entry *e)
{
    if (entry_is_zeros(e))
        return "it is all zeros (a hole in a sparse file, or zeroed damage)";
    if (e->kind != RF_SAMPLE_JPEG && e->kind != RF_SAMPLE_ZSTD)
        return "its kind is unknown";
    if (e->kind == RF_SAMPLE_ZSTD && h->channels == 0)
        return "it is zstd but the file has no sample shape";
    if (e->offset < h->header_size || e->offset > h->index_offset ||
        e->size > h->index_offset - e->offset)
        return "its payload lies outside the payload area";
    if (e->size > RF__SAMPLE_MAX)
        return "its payload is larger than the " RF__SAMPLE_MAX_TEXT
               " a sample may have, in a pack as in a folder";
    if (e->label < 0 || e->label >= (int64_t)h->classes)
        return "its label is outside 0..classes-1";
    if (e->name_length > RF__PACK_NAME_MAX)
        return "its name is longer than 4095 bytes";
    if (e->name_length == 0 && e->name_offset != 0)
        return "it has no name (name_length 0) but its name_offset is not 0";
    if (e->reserved[0] || e->reserved[1] || e->reserved[2])
        return "its reserved bytes (37..39) are not zero";
    return NULL;
}

/* "index entry N: PROBLEM (its fields)" into why. */
void rf__pack_describe_entry_problem(uint64_t i, const struct rf__pack_entry *e,
                                     const char *problem, char *why,
                                     size_t why_len)
{
    if (entry_is_zeros(e)) { /* the fields would say nothing more */
        rf__format(why, why_len, "index entry %llu: %s", (unsigned long long)i,
                   problem);
        return;
    }
    rf__format(why, why_len,
               "index entry %llu: %s (offset %llu, %u bytes, kind %u, label "
               "%lld, name at %llu, %u bytes)",
               (unsigned long long)i, problem, (unsigned long long)e->offset,
               e->size, e->kind, (long long)e->label,
               (unsigned long long)e->name_offset, e->name_length);
}

/* Whether the name is inside the names area, ends with its NUL and holds
 * no other. */
bool rf__name_is_whole(const char *names, uint64_t names_size, uint64_t offset,
                       uint32_t length)
{
    return offset < names_size && length < names_size - offset &&
           names[offset + length] == '\0' &&
           memchr(names + offset, '\0', length) == NULL;
}

bool rf__zstd_frame_fits_dict(const void *frame, size_t size, unsigned dict_id,
                              char *why, size_t why_len)
{
    const unsigned wanted = ZSTD_getDictID_fromFrame(frame, size);
    if (wanted == 0 || wanted == dict_id)
        return true;
    if (dict_id == 0)
        rf__format(why, why_len,
                   "the zstd frame was compressed with dictionary %u, and "
                   "the packed file has no dictionary with an ID",
                   wanted);
    else
        rf__format(why, why_len,
                   "the zstd frame was compressed with dictionary %u, but "
                   "the packed file's dictionary is %u",
                   wanted, dict_id);
    return false;
}

/* ---- folder index header and entries ------------------------------------ */

void rf__index_header_encode(const struct rf__index_header *h,
                             uint8_t out[RF__INDEX_HEADER_SIZE])
{
    encode_header(&index_header_layout, h, out);
}

int rf__index_header_decode(struct rf__index_header *h,
                            const uint8_t in[RF__INDEX_HEADER_SIZE], char *why,
                            size_t why_len)
{
    const int rc = decode_header(&index_header_layout, h, in, why, why_len);
    if (rc < 0)
        return rc;
    if (h->header_size != RF__INDEX_HEADER_SIZE ||
        h->entry_size != RF__INDEX_ENTRY_SIZE) {
        rf__format(why, why_len,
                   "header size %u, entry size %u; expected %u, %u",
                   h->header_size, h->entry_size, RF__INDEX_HEADER_SIZE,
                   RF__INDEX_ENTRY_SIZE);
        return RF__FORMAT_DAMAGED;
    }
    return 0;
}

void rf__index_entry_encode(const struct rf__index_entry *e,
                            uint8_t out[RF__INDEX_ENTRY_SIZE])
{
    rf__put_le64(out, e->name_offset);
    rf__put_le32(out + 8, e->label);
    rf__put_le32(out + 12, e->name_length);
}

void rf__index_entry_decode(struct rf__index_entry *e,
                            const uint8_t in[RF__INDEX_ENTRY_SIZE])
{
    e->name_offset = rf__get_le64(in);
    e->label = rf__get_le32(in + 8);
    e->name_length = rf__get_le32(in + 12);
}
