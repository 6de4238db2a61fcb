/*
 * pack.c - the byte layout of ringfeed's packed file and folder index
 * (encoders and decoders of their headers and entries), CRC-32C,
 * rf_pack_writer, which writes a packed file, and rf__copy_region(), which
 * copies the metadata that a header describes into a memfd a bounded piece
 * at a time. The format is described in docs/packed-format.md;
 * lib/dataset.c reads it.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "common/internal.h"
#include "source/atomic-file.h"
#include "source/pack.h"

/* ---- CRC-32C ------------------------------------------------------------ */

#define CRC32C_POLY 0x82f63b78u /* Castagnoli, bit-reversed */

void rf__crc32c_init(struct rf__crc32c *c)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t crc = i;
        for (int bit = 0; bit < 8; bit++)
            crc = (crc >> 1) ^ (CRC32C_POLY & (0u - (crc & 1)));
        c->table[0][i] = crc;
    }
    /* table[k][i]: the CRC of byte i followed by k zero bytes, so that
     * eight bytes are folded in with eight lookups ("slicing by 8"). */
    for (int k = 1; k < 8; k++)
        for (int i = 0; i < 256; i++) {
            const uint32_t prev = c->table[k - 1][i];
            c->table[k][i] = (prev >> 8) ^ c->table[0][prev & 0xff];
        }
#if defined(__x86_64__)
    c->hardware = __builtin_cpu_supports("sse4.2");
#else
    c->hardware = false;
#endif
}

#if defined(__x86_64__)
/* The crc32 instruction computes exactly CRC-32C, 8 bytes a cycle. */
__attribute__((target("sse4.2"))) static uint32_t
crc32c_hardware(uint32_t crc, const uint8_t *p, size_t size)
{
    uint64_t wide = crc;
    for (; size >= 8; p += 8, size -= 8)
        wide = __builtin_ia32_crc32di(wide, rf__get_le64(p));
    crc = (uint32_t)wide;
    for (; size > 0; p++, size--)
        crc = __builtin_ia32_crc32qi(crc, *p);
    return crc;
}
#endif

static uint32_t crc32c_tables(const struct rf__crc32c *c, uint32_t crc,
                              const uint8_t *p, size_t size)
{
    const uint32_t(*t)[256] = c->table;
    for (; size >= 8; p += 8, size -= 8) {
        const uint64_t w = rf__get_le64(p) ^ crc;
        crc = t[7][w & 0xff] ^ t[6][(w >> 8) & 0xff] ^ t[5][(w >> 16) & 0xff] ^
              t[4][(w >> 24) & 0xff] ^ t[3][(w >> 32) & 0xff] ^
              t[2][(w >> 40) & 0xff] ^ t[1][(w >> 48) & 0xff] ^ t[0][w >> 56];
    }
    for (; size > 0; p++, size--)
        crc = (crc >> 8) ^ t[0][(crc ^ *p) & 0xff];
    return crc;
}

uint32_t rf__crc32c(const struct rf__crc32c *c, uint32_t crc, const void *data,
                    size_t size)
{
    crc = ~crc;
#if defined(__x86_64__)
    if (c->hardware)
        return ~crc32c_hardware(crc, data, size);
#endif
    return ~crc32c_tables(c, crc, data, size);
}

/* The header checksums need no speed: a table-free bitwise CRC-32C keeps
 * the codecs free of any state. */
static uint32_t crc32c_bitwise(const uint8_t *p, size_t size)
{
    uint32_t crc = UINT32_MAX;
    for (size_t i = 0; i < size; i++) {
        crc ^= p[i];
        for (int bit = 0; bit < 8; bit++)
            crc = (crc >> 1) ^ (CRC32C_POLY & (0u - (crc & 1)));
    }
    return ~crc;
}

/* The magic is 8 bytes in the file, without the string's terminator. */
static void put_magic(uint8_t *out, const char *magic)
{
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)magic[i];
}

/* ---- packed file header and entries ------------------------------------- */

void rf__pack_header_encode(const struct rf__pack_header *h,
                            uint8_t out[RF__PACK_HEADER_SIZE])
{
    memset(out, 0, RF__PACK_HEADER_SIZE);
    put_magic(out, RF__PACK_MAGIC);
    rf__put_le32(out + 8, h->version);
    rf__put_le32(out + 12, h->header_size);
    rf__put_le32(out + 16, h->flags);
    rf__put_le32(out + 20, h->entry_size);
    rf__put_le64(out + 24, h->samples);
    rf__put_le32(out + 32, h->classes);
    rf__put_le32(out + 36, h->height);
    rf__put_le32(out + 40, h->width);
    rf__put_le32(out + 44, h->channels);
    rf__put_le32(out + 48, h->layout);
    rf__put_le64(out + 56, h->index_offset);
    rf__put_le64(out + 64, h->names_offset);
    rf__put_le64(out + 72, h->names_size);
    rf__put_le64(out + 80, h->dict_offset);
    rf__put_le64(out + 88, h->dict_size);
    rf__put_le64(out + 96, h->file_size);
    rf__put_le32(out + 104, h->meta_crc);
    rf__put_le32(out + 108, crc32c_bitwise(out, RF__PACK_HEADER_SIZE));
}

static void pack_header_fields(struct rf__pack_header *h, const uint8_t *in)
{
    h->version = rf__get_le32(in + 8);
    h->header_size = rf__get_le32(in + 12);
    h->flags = rf__get_le32(in + 16);
    h->entry_size = rf__get_le32(in + 20);
    h->samples = rf__get_le64(in + 24);
    h->classes = rf__get_le32(in + 32);
    h->height = rf__get_le32(in + 36);
    h->width = rf__get_le32(in + 40);
    h->channels = rf__get_le32(in + 44);
    h->layout = rf__get_le32(in + 48);
    h->index_offset = rf__get_le64(in + 56);
    h->names_offset = rf__get_le64(in + 64);
    h->names_size = rf__get_le64(in + 72);
    h->dict_offset = rf__get_le64(in + 80);
    h->dict_size = rf__get_le64(in + 88);
    h->file_size = rf__get_le64(in + 96);
    h->meta_crc = rf__get_le32(in + 104);
    h->header_crc = rf__get_le32(in + 108);
}

/* The CRC of a header whose checksum field at crc_at reads as zero. */
static uint32_t header_crc(const uint8_t *in, size_t size, size_t crc_at)
{
    uint8_t copy[RF__PACK_HEADER_SIZE];
    memcpy(copy, in, size);
    memset(copy + crc_at, 0, 4);
    return crc32c_bitwise(copy, size);
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

static bool within_param_range(rf_param param, uint32_t value)
{
    int64_t min = 0, max = 0;
    return rf__param_range(param, &min, &max) && value >= min && value <= max;
}

/* A sample shape a loader can be configured for (its RF_PARAM_HEIGHT,
 * WIDTH, CHANNELS and LAYOUT), since it must be configured for the pack's
 * shape to read the pack; or all zeros, for JPEG samples only. Writer and
 * reader share it: a pack with any other shape could never be loaded. */
static bool shape_is_loadable(uint32_t height, uint32_t width,
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
static void describe_loadable_shapes(char *out, size_t len)
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
    if (shape_is_loadable(h->height, h->width, h->channels, h->layout))
        return 0;
    char loadable[160];
    describe_loadable_shapes(loadable, sizeof(loadable));
    rf__format(why, why_len,
               "the header's sample shape %u x %u x %u, layout %u, is not "
               "valid (a loader takes %s, layout 0 or 1; or all zeros)",
               h->height, h->width, h->channels, h->layout, loadable);
    return -1;
}

int rf__pack_header_decode(struct rf__pack_header *h,
                           const uint8_t in[RF__PACK_HEADER_SIZE], char *why,
                           size_t why_len)
{
    if (memcmp(in, RF__PACK_MAGIC, 8) != 0) {
        char magic[96];
        describe_magic(in, magic, sizeof(magic));
        rf__format(why, why_len, "not a ringfeed packed file: it %s", magic);
        return RF__FORMAT_FOREIGN;
    }
    pack_header_fields(h, in);
    const int rc = check_version(h->version, RF__PACK_VERSION, why, why_len);
    if (rc < 0)
        return rc;
    if (header_crc(in, RF__PACK_HEADER_SIZE, 108) != h->header_crc) {
        rf__format(why, why_len, "the header's checksum does not match");
        return RF__FORMAT_DAMAGED;
    }
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
}

/* ---- folder index header and entries ------------------------------------ */

void rf__index_header_encode(const struct rf__index_header *h,
                             uint8_t out[RF__INDEX_HEADER_SIZE])
{
    memset(out, 0, RF__INDEX_HEADER_SIZE);
    put_magic(out, RF__INDEX_MAGIC);
    rf__put_le32(out + 8, h->version);
    rf__put_le32(out + 12, h->header_size);
    rf__put_le32(out + 16, h->entry_size);
    rf__put_le32(out + 20, h->classes);
    rf__put_le64(out + 24, h->samples);
    rf__put_le64(out + 32, h->names_offset);
    rf__put_le64(out + 40, h->names_size);
    rf__put_le64(out + 48, h->total_size);
    rf__put_le32(out + 56, h->body_crc);
    rf__put_le32(out + 60, crc32c_bitwise(out, RF__INDEX_HEADER_SIZE));
}

int rf__index_header_decode(struct rf__index_header *h,
                            const uint8_t in[RF__INDEX_HEADER_SIZE], char *why,
                            size_t why_len)
{
    if (memcmp(in, RF__INDEX_MAGIC, 8) != 0) {
        char magic[96];
        describe_magic(in, magic, sizeof(magic));
        rf__format(why, why_len, "not a ringfeed folder index: it %s", magic);
        return RF__FORMAT_FOREIGN;
    }
    h->version = rf__get_le32(in + 8);
    h->header_size = rf__get_le32(in + 12);
    h->entry_size = rf__get_le32(in + 16);
    h->classes = rf__get_le32(in + 20);
    h->samples = rf__get_le64(in + 24);
    h->names_offset = rf__get_le64(in + 32);
    h->names_size = rf__get_le64(in + 40);
    h->total_size = rf__get_le64(in + 48);
    h->body_crc = rf__get_le32(in + 56);
    h->header_crc = rf__get_le32(in + 60);
    const int rc = check_version(h->version, RF__INDEX_VERSION, why, why_len);
    if (rc < 0)
        return rc;
    if (header_crc(in, RF__INDEX_HEADER_SIZE, 60) != h->header_crc) {
        rf__format(why, why_len, "the header's checksum does not match");
        return RF__FORMAT_DAMAGED;
    }
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

/* ---- the writer --------------------------------------------------------- */

/* A growing array of bytes; doubling keeps appends O(1) amortised. */
struct byte_buffer {
    uint8_t *data;
    size_t used, cap;
};

struct rf_pack_writer {
    struct rf__atomic_file file; /* unnamed until finished */
    struct rf__pack_header header;
    uint64_t end;             /* where the next payload goes */
    struct byte_buffer index; /* encoded entries */
    struct byte_buffer names; /* NUL-terminated names */
    struct byte_buffer dict;
    unsigned dict_id; /* the dictionary's zstd ID; 0: none, or raw content */
    int64_t max_label;
    struct rf__crc32c crc;
    char error[RF__DETAIL];
};

static void give_detail(char **errp, const char *text)
{
    if (errp)
        *errp = strdup(text);
}

static int buffer_reserve(struct byte_buffer *b, size_t more)
{
    if (b->cap - b->used >= more)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->used < more)
        cap *= 2;
    uint8_t *data = realloc(b->data, cap);
    if (!data)
        return -ENOMEM;
    b->data = data;
    b->cap = cap;
    return 0;
}

static int buffer_append(struct byte_buffer *b, const void *data, size_t size)
{
    if (buffer_reserve(b, size) < 0)
        return -ENOMEM;
    if (size > 0)
        memcpy(b->data + b->used, data, size);
    b->used += size;
    return 0;
}

int rf__pwrite_all(int fd, const void *data, size_t size, uint64_t offset)
{
    const uint8_t *p = data;
    while (size > 0) {
        const ssize_t n = pwrite(fd, p, size, (off_t)offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        p += n;
        size -= (size_t)n;
        offset += (uint64_t)n;
    }
    return 0;
}

static int check_writer_shape(const char *path, uint32_t height, uint32_t width,
                              uint32_t channels, rf_layout layout, char *why,
                              size_t why_len)
{
    if (shape_is_loadable(height, width, channels, (unsigned)layout))
        return 0;
    char loadable[160];
    describe_loadable_shapes(loadable, sizeof(loadable));
    rf__format(why, why_len,
               "%s: the sample shape %u x %u x %u, layout %d, is not valid; "
               "pass all zeros for JPEG samples only, or %s (the shapes a "
               "loader can be configured for) and RF_LAYOUT_NHWC or "
               "RF_LAYOUT_NCHW",
               path, height, width, channels, (int)layout, loadable);
    return -EINVAL;
}

/* Readers refuse a dictionary above RF__PACK_DICT_MAX (before copying
 * anything from a header that may be damaged): so does the writer. */
static int check_dictionary_size(const char *path, size_t dict_size, char *why,
                                 size_t why_len)
{
    if (dict_size <= RF__PACK_DICT_MAX)
        return 0;
    rf__format(why, why_len,
               "%s: a %zu-byte dictionary is larger than the %llu bytes a "
               "packed file may carry; train a smaller one (zstd's trainer "
               "makes them of about 100 KB)",
               path, dict_size, (unsigned long long)RF__PACK_DICT_MAX);
    return -EINVAL;
}

/* Says that the writer's copy of a dictionary could not be allocated;
 * returns -ENOMEM. */
static int no_memory_for_dictionary(const char *path, size_t dict_size,
                                    char *why, size_t why_len)
{
    rf__format(why, why_len,
               "%s: no memory for a %zu-byte dictionary; make more memory "
               "available, or use a smaller dictionary (ringfeed-pack: "
               "--dict-size)",
               path, dict_size);
    return -ENOMEM;
}

static int writer_setup(rf_pack_writer *w, const char *path, uint32_t height,
                        uint32_t width, uint32_t channels, rf_layout layout,
                        const void *dict, size_t dict_size, char *why,
                        size_t why_len)
{
    int rc =
        check_writer_shape(path, height, width, channels, layout, why, why_len);
    if (rc == 0)
        rc = check_dictionary_size(path, dict_size, why, why_len);
    if (rc < 0)
        return rc;
    if (dict_size > 0 && buffer_append(&w->dict, dict, dict_size) < 0)
        return no_memory_for_dictionary(path, dict_size, why, why_len);
    w->dict_id = dict_size > 0 ? ZSTD_getDictID_fromDict(dict, dict_size) : 0;
    /* The file is made now, in the output's folder, so that a path that
     * cannot be written is refused before any sample is prepared. */
    rc = rf__atomic_file_open(&w->file, path, 0, why, why_len);
    if (rc < 0)
        return rc;
    w->header.height = height;
    w->header.width = width;
    w->header.channels = channels;
    w->header.layout = (uint32_t)layout;
    w->end = RF__PACK_HEADER_SIZE; /* the header is written last */
    w->max_label = -1;
    rf__crc32c_init(&w->crc);
    return 0;
}

/* Frees w; its file, unless it was committed, goes with it. */
static void writer_free(rf_pack_writer *w)
{
    rf__atomic_file_discard(&w->file);
    free(w->index.data);
    free(w->names.data);
    free(w->dict.data);
    free(w);
}

int rf_pack_writer_create(rf_pack_writer **out, const char *path,
                          uint32_t height, uint32_t width, uint32_t channels,
                          rf_layout layout, const void *dict, size_t dict_size,
                          char **errp)
{
    char why[RF__DETAIL];
    *out = NULL;
    rf_pack_writer *w = calloc(1, sizeof(*w));
    if (!w) {
        give_detail(errp, "rf_pack_writer_create: out of memory");
        return -ENOMEM;
    }
    w->file.fd = -1;
    const int rc = writer_setup(w, path, height, width, channels, layout, dict,
                                dict_size, why, sizeof(why));
    if (rc < 0) {
        give_detail(errp, why);
        writer_free(w);
        return rc;
    }
    *out = w;
    return 0;
}

/* "sample 12 (n01/x.jpg)" or "sample 12", for error messages. */
static void describe_new_sample(const rf_pack_writer *w, const char *name,
                                char *out, size_t len)
{
    if (name && name[0])
        rf__format(out, len, "sample %llu (%s)",
                   (unsigned long long)w->header.samples, name);
    else
        rf__format(out, len, "sample %llu",
                   (unsigned long long)w->header.samples);
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

/* A zstd sample must be one whole zstd frame, in a pack that has a sample
 * shape: that catches raw bytes passed as zstd, or a frame cut short.
 * What the frame holds is not checked here, as the bytes of a JPEG sample
 * are not: a frame of the wrong size is stored as given and fails when
 * it is decoded (ringfeed-pack --verify finds it), like a bad JPEG. */
static int check_zstd_frame(rf_pack_writer *w, const void *data, size_t size,
                            const char *sample)
{
    if (w->header.channels == 0) {
        rf__format(w->error, sizeof(w->error),
                   "%s: RF_SAMPLE_ZSTD needs the sample shape; pass height, "
                   "width and channels to rf_pack_writer_create()",
                   sample);
        return -EINVAL;
    }
    const size_t frame = ZSTD_findFrameCompressedSize(data, size);
    if (ZSTD_isError(frame) || frame != size) {
        rf__format(w->error, sizeof(w->error),
                   "%s: the %zu bytes are not exactly one zstd frame (%s)",
                   sample, size,
                   ZSTD_isError(frame) ? ZSTD_getErrorName(frame)
                                       : "more bytes follow it");
        return -EINVAL;
    }
    char why[160];
    if (!rf__zstd_frame_fits_dict(data, size, w->dict_id, why, sizeof(why))) {
        rf__format(w->error, sizeof(w->error),
                   "%s: %s; compress it with the dictionary passed to "
                   "rf_pack_writer_create()",
                   sample, why);
        return -EINVAL;
    }
    return 0;
}

/* A JPEG decodes to 1 or 3 channels only, and a loader reading a pack
 * with a sample shape must be configured for that shape: a JPEG sample in
 * a pack of 2 or 4 channels could never be decoded. */
static int check_jpeg_channels(rf_pack_writer *w, const char *sample)
{
    const uint32_t channels = w->header.channels;
    if (channels == 0 || channels == 1 || channels == 3)
        return 0;
    rf__format(w->error, sizeof(w->error),
               "%s: a JPEG sample decodes to 1 or 3 channels, but the "
               "samples of this pack have %u, so a loader could never "
               "decode it; store its pixels as RF_SAMPLE_ZSTD, or create the "
               "pack with 1 or 3 channels",
               sample, channels);
    return -EINVAL;
}

static int check_sample(rf_pack_writer *w, rf_sample_kind kind,
                        const void *data, size_t size, int64_t label,
                        const char *name)
{
    char sample[RF__PACK_NAME_MAX + 64];
    describe_new_sample(w, name, sample, sizeof(sample));
    if (kind != RF_SAMPLE_JPEG && kind != RF_SAMPLE_ZSTD) {
        rf__format(w->error, sizeof(w->error),
                   "%s: kind %d is neither RF_SAMPLE_JPEG (1) nor "
                   "RF_SAMPLE_ZSTD (2)",
                   sample, (int)kind);
        return -EINVAL;
    }
    if (size > 0 && !data) {
        rf__format(w->error, sizeof(w->error), "%s: %zu bytes at NULL", sample,
                   size);
        return -EINVAL;
    }
    if (size > RF__SAMPLE_MAX) {
        rf__format(w->error, sizeof(w->error),
                   "%s: its %zu bytes are more than the " RF__SAMPLE_MAX_TEXT
                   " (%llu bytes) a sample may have, in a pack as in a "
                   "folder; leave it out",
                   sample, size, (unsigned long long)RF__SAMPLE_MAX);
        return -EINVAL;
    }
    if (label < 0 || label >= (int64_t)UINT32_MAX) {
        rf__format(w->error, sizeof(w->error),
                   "%s: label %lld is outside 0..4294967294", sample,
                   (long long)label);
        return -EINVAL;
    }
    if (name && strlen(name) > RF__PACK_NAME_MAX) {
        rf__format(w->error, sizeof(w->error),
                   "sample %llu: its name is longer than %u bytes",
                   (unsigned long long)w->header.samples, RF__PACK_NAME_MAX);
        return -ENAMETOOLONG;
    }
    if (kind == RF_SAMPLE_ZSTD)
        return check_zstd_frame(w, data, size, sample);
    return check_jpeg_channels(w, sample);
}

/* Stores the name (when there is one) and makes room for the entry
 * before the payload is written, so that running out of memory leaves the
 * writer as it was. */
static int reserve_entry(rf_pack_writer *w, const char *name,
                         struct rf__pack_entry *e)
{
    const size_t length = name ? strlen(name) : 0;
    if (buffer_reserve(&w->index, RF__PACK_ENTRY_SIZE) < 0 ||
        buffer_reserve(&w->names, length + 1) < 0) {
        rf__format(w->error, sizeof(w->error),
                   "%s: out of memory for the index of %llu samples",
                   w->file.path, (unsigned long long)w->header.samples + 1);
        return -ENOMEM;
    }
    e->name_length = (uint32_t)length;
    e->name_offset = length ? w->names.used : 0;
    return 0;
}

int rf_pack_writer_add(rf_pack_writer *w, rf_sample_kind kind, const void *data,
                       size_t size, int64_t label, const char *name)
{
    struct rf__pack_entry e = {.offset = w->end,
                               .label = label,
                               .size = (uint32_t)size,
                               .kind = (uint8_t)kind};
    int rc = check_sample(w, kind, data, size, label, name);
    if (rc == 0)
        rc = reserve_entry(w, name, &e);
    if (rc < 0)
        return rc;
    rc = rf__pwrite_all(w->file.fd, data, size, w->end);
    if (rc < 0) {
        rf__format(w->error, sizeof(w->error),
                   "%s: cannot write sample %llu: %s; free some space or "
                   "write the pack elsewhere",
                   w->file.path, (unsigned long long)w->header.samples,
                   strerror(-rc));
        return rc;
    }
    e.crc = rf__crc32c(&w->crc, 0, data, size);
    if (e.name_length)
        buffer_append(&w->names, name, e.name_length + 1); /* reserved */
    rf__pack_entry_encode(&e, w->index.data + w->index.used);
    w->index.used += RF__PACK_ENTRY_SIZE;
    w->end += size;
    w->header.samples++;
    if (label > w->max_label)
        w->max_label = label;
    w->error[0] = '\0';
    return 0;
}

const char *rf_pack_writer_error(const rf_pack_writer *w)
{
    return w->error;
}

int rf_pack_writer_set_dictionary(rf_pack_writer *w, const void *dict,
                                  size_t dict_size)
{
    if (w->header.samples > 0) {
        /* frames already added were checked against the old one */
        rf__format(w->error, sizeof(w->error),
                   "%s: the dictionary must be set before the first sample; "
                   "%llu are already added",
                   w->file.path, (unsigned long long)w->header.samples);
        return -EINVAL;
    }
    if (dict_size > 0 && !dict) {
        rf__format(w->error, sizeof(w->error),
                   "%s: a %zu-byte dictionary at NULL", w->file.path,
                   dict_size);
        return -EINVAL;
    }
    if (check_dictionary_size(w->file.path, dict_size, w->error,
                              sizeof(w->error)) < 0)
        return -EINVAL;
    /* Made aside: a failure leaves the old dictionary and its ID. */
    struct byte_buffer copy = {0};
    if (buffer_append(&copy, dict, dict_size) < 0)
        return no_memory_for_dictionary(w->file.path, dict_size, w->error,
                                        sizeof(w->error));
    free(w->dict.data);
    w->dict = copy;
    w->dict_id = dict_size > 0 ? ZSTD_getDictID_fromDict(dict, dict_size) : 0;
    w->error[0] = '\0';
    return 0;
}

/* Index, names and dictionary go after the payloads, in that order and
 * with no gap, then the header (which covers them with meta_crc) goes to
 * the front. */
static int write_metadata(rf_pack_writer *w)
{
    struct rf__pack_header *h = &w->header;
    h->version = RF__PACK_VERSION;
    h->header_size = RF__PACK_HEADER_SIZE;
    h->entry_size = RF__PACK_ENTRY_SIZE;
    h->flags = (w->names.used ? RF__PACK_FLAG_NAMES : 0) |
               (w->dict.used ? RF__PACK_FLAG_DICT : 0);
    h->classes = (uint32_t)(w->max_label + 1);
    h->index_offset = w->end;
    h->names_offset = h->index_offset + w->index.used;
    h->names_size = w->names.used;
    h->dict_offset = h->names_offset + h->names_size;
    h->dict_size = w->dict.used;
    h->file_size = h->dict_offset + h->dict_size;
    uint32_t crc = rf__crc32c(&w->crc, 0, w->index.data, w->index.used);
    crc = rf__crc32c(&w->crc, crc, w->names.data, w->names.used);
    h->meta_crc = rf__crc32c(&w->crc, crc, w->dict.data, w->dict.used);
    uint8_t header[RF__PACK_HEADER_SIZE];
    rf__pack_header_encode(h, header);
    int rc = rf__pwrite_all(w->file.fd, w->index.data, w->index.used,
                            h->index_offset);
    if (rc == 0)
        rc = rf__pwrite_all(w->file.fd, w->names.data, w->names.used,
                            h->names_offset);
    if (rc == 0)
        rc = rf__pwrite_all(w->file.fd, w->dict.data, w->dict.used,
                            h->dict_offset);
    if (rc == 0)
        rc = rf__pwrite_all(w->file.fd, header, sizeof(header), 0);
    if (rc < 0)
        rf__format(w->error, sizeof(w->error),
                   "%s: cannot write the index: %s; free some space or write "
                   "the pack elsewhere",
                   w->file.path, strerror(-rc));
    return rc;
}

int rf_pack_writer_finish(rf_pack_writer *w, char **errp)
{
    if (!w) {
        give_detail(errp, "rf_pack_writer_finish: no writer (NULL)");
        return -EINVAL;
    }
    int rc = write_metadata(w);
    if (rc == 0)
        rc = rf__atomic_file_commit(&w->file, w->error, sizeof(w->error));
    if (rc < 0)
        give_detail(errp, w->error);
    writer_free(w); /* removes the file unless it was committed */
    return rc;
}

void rf_pack_writer_abort(rf_pack_writer *w)
{
    if (w)
        writer_free(w);
}

/* ---- copying metadata out of a file ------------------------------------- */

/* The page the zero test goes by: a memfd's pages are at least this
 * large, so a page of zeros left unwritten is memory not taken. */
#define COPY_PAGE 4096u

static bool all_zero(const uint8_t *p, size_t size)
{
    return size == 0 || (p[0] == 0 && memcmp(p, p + 1, size - 1) == 0);
}

ssize_t rf__pread_all(int fd, void *data, size_t size, uint64_t offset)
{
    size_t done = 0;
    while (done < size) {
        const ssize_t n = pread(fd, (uint8_t *)data + done, size - done,
                                (off_t)(offset + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        done += (size_t)n;
    }
    return (ssize_t)done;
}

/* Writes the pages of data that hold anything but zeros to fd at `at`,
 * in runs; the rest of fd stays a hole. (Where `at` is a multiple of
 * COPY_PAGE, each page of zeros skipped is a page of fd not taken.) */
static int write_nonzero_pages(int fd, const uint8_t *data, size_t size,
                               uint64_t at)
{
    size_t run = 0; /* where the pages not yet written begin */
    for (size_t page = 0; page < size; page += COPY_PAGE) {
        const size_t n = size - page < COPY_PAGE ? size - page : COPY_PAGE;
        if (!all_zero(data + page, n))
            continue;
        const int rc =
            page > run ? rf__pwrite_all(fd, data + run, page - run, at + run)
                       : 0;
        if (rc < 0)
            return rc;
        run = page + n;
    }
    return size > run ? rf__pwrite_all(fd, data + run, size - run, at + run)
                      : 0;
}

/* One piece of rf__copy_region(): `size` bytes at *copied into the
 * region, read into `piece`. */
static int copy_piece(const struct rf__copy *c, uint8_t *piece, size_t size,
                      uint32_t *crc, uint64_t *copied)
{
    const ssize_t got =
        rf__pread_all(c->from, piece, size, c->offset + *copied);
    if (got < 0)
        return (int)got;
    if ((size_t)got < size) {
        *copied += (uint64_t)got;
        return -ENODATA;
    }
    if (c->check.piece &&
        c->check.piece(c->check.ctx, piece, *copied, size) < 0)
        return RF__COPY_REFUSED;
    *crc = rf__crc32c(c->crc32c, *crc, piece, size);
    const int rc =
        write_nonzero_pages(c->to, piece, size, c->to_offset + *copied);
    if (rc == 0)
        *copied += size;
    return rc;
}

int rf__copy_region(const struct rf__copy *c, uint32_t *crc, uint64_t *copied)
{
    *crc = 0;
    *copied = 0;
    if (c->size == 0)
        return 0;
    /* One piece at a time, never the whole region: its size comes from a
     * header, and the file may hold far less (a sparse file's holes). */
    uint8_t *piece =
        malloc(c->size < RF__COPY_PIECE ? c->size : RF__COPY_PIECE);
    int rc = piece ? 0 : -ENOMEM;
    while (rc == 0 && *copied < c->size) {
        const uint64_t left = c->size - *copied;
        rc = copy_piece(c, piece, left < RF__COPY_PIECE ? left : RF__COPY_PIECE,
                        crc, copied);
    }
    free(piece);
    return rc;
}
