/*
 * pack-writer.c - rf_pack_writer, which writes a packed file: each sample
 * is checked (kind, size, label, name; a zstd frame whole and fitting the
 * pack's dictionary) and its payload written at once; the index, names
 * and dictionary are kept in memory and written after the payloads, then
 * the header, and the file gets its name only when finished
 * (atomic-file.h). The layout is pack-format.h's.
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
#include "source/crc32c.h"
#include "source/file-io.h"
#include "source/pack-format.h"

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

static int check_writer_shape(const char *path, uint32_t height, uint32_t width,
                              uint32_t channels, rf_layout layout, char *why,
                              size_t why_len)
{
    if (rf__pack_shape_is_loadable(height, width, channels, (unsigned)layout))
        return 0;
    char loadable[160];
    rf__describe_loadable_shapes(loadable, sizeof(loadable));
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

/* A dictionary of dict_size bytes at dict: none (0 bytes), or one readers
 * accept; create and set_dictionary alike. */
static int check_dictionary(const char *path, const void *dict,
                            size_t dict_size, char *why, size_t why_len)
{
    if (dict_size > 0 && !dict) {
        rf__format(why, why_len, "%s: a %zu-byte dictionary at NULL", path,
                   dict_size);
        return -EINVAL;
    }
    return check_dictionary_size(path, dict_size, why, why_len);
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
        rc = check_dictionary(path, dict, dict_size, why, why_len);
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
    if (!out || !path) {
        give_detail(errp, !out ? "rf_pack_writer_create: out is NULL"
                               : "rf_pack_writer_create: path is NULL");
        return -EINVAL;
    }
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

/* What to do about a write that failed with -err: a full disk or quota
 * wants room, a file too large for the process's limit (ulimit -f) or
 * the file system (FAT's 4 GiB) another limit or place. */
static const char *write_advice(int err)
{
    if (err == -EFBIG)
        return "the pack is larger than this process (ulimit -f) or the file "
               "system lets a file be: raise the limit, or write the pack on "
               "another file system";
    return "free some space or write the pack elsewhere";
}

int rf_pack_writer_add(rf_pack_writer *w, rf_sample_kind kind, const void *data,
                       size_t size, int64_t label, const char *name)
{
    if (!w)
        return -EINVAL;
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
                   "%s: cannot write sample %llu: %s; %s", w->file.path,
                   (unsigned long long)w->header.samples, strerror(-rc),
                   write_advice(rc));
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
    return w ? w->error : "";
}

int rf_pack_writer_set_dictionary(rf_pack_writer *w, const void *dict,
                                  size_t dict_size)
{
    if (!w)
        return -EINVAL;
    if (w->header.samples > 0) {
        /* frames already added were checked against the old one */
        rf__format(w->error, sizeof(w->error),
                   "%s: the dictionary must be set before the first sample; "
                   "%llu are already added",
                   w->file.path, (unsigned long long)w->header.samples);
        return -EINVAL;
    }
    if (check_dictionary(w->file.path, dict, dict_size, w->error,
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
                   "%s: cannot write the index: %s; %s", w->file.path,
                   strerror(-rc), write_advice(rc));
    return rc;
}

int rf_pack_writer_finish(rf_pack_writer *w, char **errp)
{
    if (!w) {
        give_detail(errp, "rf_pack_writer_finish: no writer (NULL)");
        return -EINVAL;
    }
    if (w->header.samples == 0) {
        /* every loader refuses a pack without samples ("has no
         * samples"): say so now, not when a run starts on it */
        rf__format(w->error, sizeof(w->error),
                   "%s: no sample was added, and a pack without samples is "
                   "refused by every loader; add samples with "
                   "rf_pack_writer_add() first (or, with nothing to pack, "
                   "rf_pack_writer_abort()). No file was written",
                   w->file.path);
        give_detail(errp, w->error);
        writer_free(w);
        return -ENODATA;
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
