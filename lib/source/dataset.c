/*
 * dataset.c - rf_dataset's public calls and the internal ones of
 * dataset.h: opening a path (a folder of class folders, or a packed
 * file), and the dispatch of every call on a dataset to its kind,
 * folder.c or pack-reader.c (dataset-internal.h), plus the read buffer
 * and error text both kinds share. rf_dataset_decode() is in
 * lib/decode/decode.c; the index cache in index-cache.c.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fds.h"
#include "common/internal.h"
#include "common/resources.h"
#include "source/dataset-internal.h"
#include "source/dataset.h"
#include "source/pack-format.h"

/* ---- opening ------------------------------------------------------------ */

static int open_path(rf_dataset *ds, int data_fd, int index_fd, char *why,
                     size_t why_len)
{
    struct stat st;
    /* A producer gets the consumer's open folder or file: by now the path
     * may name another dataset (a pack replaced by rename, a folder moved
     * and another put in its place) or none (a relative path after the
     * caller's chdir()). O_NONBLOCK: opening a FIFO by mistake must not
     * hang. */
    ds->fd = data_fd >= 0 ? fcntl(data_fd, F_DUPFD_CLOEXEC, 3)
                          : rf__fd_off_stdio(open(
                                ds->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (ds->fd < 0 || fstat(ds->fd, &st) < 0) {
        const int rc = -errno;
        char advice[256];
        if (!rf__advise_on_exhaustion(-rc, advice, sizeof(advice)))
            rf__format(advice, sizeof(advice),
                       "pass a folder of class folders or a packed file");
        rf__format(why, why_len, "%s: %s; %s", ds->path, strerror(-rc), advice);
        return rc;
    }
    if (S_ISDIR(st.st_mode))
        return rf__folder_open(ds, index_fd, why, why_len);
    if (S_ISREG(st.st_mode))
        return rf__pack_open(ds, (uint64_t)st.st_size, index_fd, why, why_len);
    rf__format(why, why_len,
               "%s is neither a folder nor a regular file; pass a folder of "
               "class folders or a packed file",
               ds->path);
    return -ENOTDIR;
}
int rf__dataset_open_indexed(rf_dataset **out, const char *path, int data_fd,
                             int index_fd, char *why, size_t why_len)
{
    *out = NULL;
    rf_dataset *ds = calloc(1, sizeof(*ds));
    if (ds)
        ds->path = strdup(path);
    if (!ds || !ds->path) {
        free(ds);
        rf__format(why, why_len, "%s: out of memory", path);
        return -ENOMEM;
    }
    ds->fd = -1;
    ds->meta_fd = -1;
    rf__crc32c_init(&ds->crc);
    const int rc = open_path(ds, data_fd, index_fd, why, why_len);
    if (rc < 0) {
        rf_dataset_close(ds);
        return rc;
    }
    *out = ds;
    return 0;
}

int rf_dataset_open(rf_dataset **out, const char *path, char **errp)
{
    if (out)
        *out = NULL;
    if (!out || !path) {
        if (errp)
            *errp = strdup(!out ? "rf_dataset_open: out is NULL"
                                : "rf_dataset_open: path is NULL; pass a "
                                  "folder of class folders or a packed file");
        return -EINVAL;
    }
    char why[RF__DETAIL];
    const int rc =
        rf__dataset_open_indexed(out, path, -1, -1, why, sizeof(why));
    if (rc < 0 && errp)
        *errp = strdup(why);
    return rc;
}

void rf_dataset_close(rf_dataset *ds)
{
    if (!ds)
        return;
    rf__folder_close(ds);
    rf__pack_close(ds);
    if (ds->fd >= 0)
        close(ds->fd);
    free(ds->buffer);
    free(ds->path);
    free(ds);
}

uint64_t rf_dataset_size(const rf_dataset *ds)
{
    return ds ? ds->samples : 0;
}

uint32_t rf_dataset_classes(const rf_dataset *ds)
{
    return ds ? ds->classes : 0;
}

/* Sample i's label and stored name (NULL when it has none). */
static const char *entry_label_name(const rf_dataset *ds, uint64_t i,
                                    uint32_t *label, size_t *length)
{
    if (ds->kind == RF__DATASET_FOLDER) {
        struct rf__index_entry e;
        rf__index_entry_decode(&e, ds->entries + i * RF__INDEX_ENTRY_SIZE);
        *label = e.label;
        *length = e.name_length;
        return ds->names + e.name_offset;
    }
    struct rf__pack_entry e;
    rf__pack_entry_decode(&e, ds->entries + i * RF__PACK_ENTRY_SIZE);
    *label = (uint32_t)e.label;
    *length = e.name_length;
    return e.name_length ? ds->names + e.name_offset : NULL;
}

/* The first sample of `label` in a folder, whose samples are in label
 * order (ImageFolder's: class by class), by bisection: 1,000 classes of
 * ImageNet's 1.28 million files took seconds to name by a scan each. */
static uint64_t folder_first_of(const rf_dataset *ds, uint32_t label)
{
    uint64_t low = 0, high = ds->samples;
    while (low < high) {
        const uint64_t mid = low + (high - low) / 2;
        uint32_t l;
        size_t length;
        (void)entry_label_name(ds, mid, &l, &length);
        if (l < label)
            low = mid + 1;
        else
            high = mid;
    }
    return low;
}

/* Copies the first path component of sample i's name into out, if the
 * sample is of `label` and has a name. */
static bool copy_class_of(const rf_dataset *ds, uint64_t i, uint32_t label,
                          char *out, size_t len)
{
    uint32_t l;
    size_t length;
    const char *name = entry_label_name(ds, i, &l, &length);
    if (l != label || !name)
        return false;
    const char *slash = memchr(name, '/', length);
    const size_t n = slash ? (size_t)(slash - name) : length;
    rf__format(out, len, "%.*s", (int)n, name);
    return true;
}

int rf_dataset_class_name(const rf_dataset *ds, uint32_t label, char *out,
                          size_t len)
{
    if (!out || len == 0)
        return -EINVAL;
    out[0] = '\0';
    if (!ds)
        return -EINVAL;
    if (label >= ds->classes)
        return -ERANGE;
    if (ds->kind == RF__DATASET_FOLDER) {
        const uint64_t first = folder_first_of(ds, label);
        if (first < ds->samples && copy_class_of(ds, first, label, out, len))
            return 0;
    }
    /* a pack's labels come in any order: the first of each is looked for */
    for (uint64_t i = 0; i < ds->samples; i++)
        if (copy_class_of(ds, i, label, out, len))
            return 0;
    return -ENOENT;
}

/* The ABI promises this size (ringfeed.h): fields are added in the
 * reserved tail only. */
_Static_assert(sizeof(rf_dataset_info) == 120,
               "rf_dataset_info keeps its size; use a reserved slot");

int rf_dataset_get_info(const rf_dataset *ds, rf_dataset_info *out)
{
    if (!ds || !out)
        return -EINVAL;
    /* memset first: the reserved slots, and any padding a future field
     * might leave, read as zeros */
    memset(out, 0, sizeof(*out));
    out->format =
        ds->kind == RF__DATASET_FOLDER ? RF_DATASET_FOLDER : RF_DATASET_PACK;
    out->classes = ds->classes;
    out->samples = ds->samples;
    out->jpeg_samples = ds->samples_of_kind[RF_SAMPLE_JPEG];
    out->zstd_samples = ds->samples_of_kind[RF_SAMPLE_ZSTD];
    rf__dataset_raw_shape(ds, &out->height, &out->width, &out->channels,
                          &out->layout);
    out->dict_size = ds->header.dict_size; /* a folder's header is zeros */
    out->listing_digest = rf__dataset_digest(ds);
    return 0;
}

const char *rf_dataset_error(const rf_dataset *ds)
{
    return ds ? ds->error : "";
}

char *rf__dataset_error_buffer(rf_dataset *ds, size_t *len)
{
    *len = sizeof(ds->error);
    return ds->error;
}

const void *rf__dataset_dict(const rf_dataset *ds, size_t *size)
{
    const bool has = ds->kind == RF__DATASET_PACK && ds->header.dict_size > 0;
    *size = has ? (size_t)ds->header.dict_size : 0;
    return has ? ds->dict : NULL;
}

void rf__dataset_raw_shape(const rf_dataset *ds, uint32_t *height,
                           uint32_t *width, uint32_t *channels,
                           rf_layout *layout)
{
    /* a folder's header is all zeros (calloc) */
    *height = ds->header.height;
    *width = ds->header.width;
    *channels = ds->header.channels;
    *layout = (rf_layout)ds->header.layout;
}

const char *rf__dataset_path(const rf_dataset *ds)
{
    return ds->path;
}

/* ---- the listing for producers ------------------------------------------ */

const struct rf__walked *rf__dataset_walked(const rf_dataset *ds)
{
    return ds->walked.names ? &ds->walked : NULL;
}

int rf__dataset_data_fd(const rf_dataset *ds)
{
    const int fd = fcntl(ds->fd, F_DUPFD_CLOEXEC, 3);
    return fd >= 0 ? fd : -errno;
}

int rf__dataset_index_fd(rf_dataset *ds, int *fd)
{
    *fd = -1;
    return ds->kind == RF__DATASET_FOLDER ? rf__folder_index_fd(ds, fd)
                                          : rf__pack_index_fd(ds, fd);
}

/* ---- reading samples ---------------------------------------------------- */

/* A read buffer above this size is given back at the next smaller read:
 * one odd file (a JPEG with 300 MB of zeros appended decodes fine) must
 * not pin its size in every producer for the rest of a week-long run. */
#define KEEP_BUFFER_BYTES (16u << 20)

int rf__dataset_reserve_buffer(rf_dataset *ds, size_t size)
{
    const bool fits = size <= ds->buffer_size && ds->buffer;
    const bool oversized =
        ds->buffer_size > KEEP_BUFFER_BYTES && size <= KEEP_BUFFER_BYTES;
    if (fits && !oversized)
        return 0;
    /* round up so that slowly growing samples do not realloc each time */
    const size_t want = (size | 0xffff) + 1;
    uint8_t *buffer = realloc(ds->buffer, want);
    if (!buffer)
        return fits ? 0 : -ENOMEM; /* a failed shrink keeps what it has */
    ds->buffer = buffer;
    ds->buffer_size = want;
    return 0;
}

void rf__dataset_describe(const rf_dataset *ds, uint64_t index, char *out,
                          size_t len)
{
    if (index >= ds->samples) {
        char whole[RF__PATH_MAX + 64];
        rf__format(whole, sizeof(whole), "sample %llu of %s",
                   (unsigned long long)index, ds->path);
        rf__copy_elided(out, len, whole);
    } else if (ds->kind == RF__DATASET_FOLDER) {
        rf__folder_describe(ds, index, out, len);
    } else {
        rf__pack_describe(ds, index, out, len);
    }
}

/* snprintf(out, len, "%s%s%s", a, b, c) when it fits. */
static bool join_fits(char *out, size_t len, const char *a, const char *b,
                      const char *c)
{
    const int n = snprintf(out, len, "%s%s%s", a, b, c);
    return n >= 0 && (size_t)n < len;
}

int rf__dataset_sample_place(const rf_dataset *ds, uint64_t index, char *path,
                             size_t path_len, char *name, size_t name_len)
{
    path[0] = name[0] = '\0';
    if (index >= ds->samples)
        return -ERANGE;
    uint32_t label;
    size_t length;
    const char *stored = entry_label_name(ds, index, &label, &length);
    const bool fits =
        ds->kind == RF__DATASET_FOLDER
            ? join_fits(path, path_len, ds->path, "/", stored)
            : join_fits(path, path_len, ds->path, "", "") &&
                  join_fits(name, name_len, stored ? stored : "", "", "");
    if (fits)
        return 0;
    path[0] = name[0] = '\0';
    return -ENAMETOOLONG;
}

int rf__dataset_sample_failed(rf_dataset *ds, const char *who, const char *what,
                              int rc)
{
    rf__format(ds->error, sizeof(ds->error), "%s: %s%s%s", who, what,
               rc < 0 && rc > -4096 ? ": " : "",
               rc < 0 && rc > -4096 ? strerror(-rc) : "");
    return rc;
}

int rf_dataset_read(rf_dataset *ds, uint64_t index, rf_sample_info *info)
{
    if (!ds)
        return -EINVAL;
    if (!info) {
        rf__format(ds->error, sizeof(ds->error),
                   "rf_dataset_read: info is NULL; pass where to describe "
                   "sample %llu",
                   (unsigned long long)index);
        return -EINVAL;
    }
    if (index >= ds->samples) {
        rf__format(ds->error, sizeof(ds->error),
                   "sample %llu of %s: out of range; it has %llu samples",
                   (unsigned long long)index, ds->path,
                   (unsigned long long)ds->samples);
        return -ERANGE;
    }
    const int rc = ds->kind == RF__DATASET_FOLDER
                       ? rf__folder_read(ds, index, info)
                       : rf__pack_read(ds, index, info);
    if (rc == 0)
        ds->error[0] = '\0';
    return rc;
}
