/*
 * dataset.h - the parts of rf_dataset (dataset.c, with folder.c and
 * pack-reader.c) that the loader, the producers, the decoder and the
 * index cache need beyond the public API: a folder is listed once, by
 * the consumer, into a memfd that every producer maps instead of listing
 * the folder again; a packed file's zstd dictionary and sample shape.
 */
#ifndef RF_DATASET_H
#define RF_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringfeed.h"

/* Opens `path` like rf_dataset_open(). data_fd (from rf__dataset_data_fd()
 * in the consumer; < 0 for none) is the dataset already open, the folder
 * or the packed file: it is used (through a copy of the fd) instead of
 * opening `path`, which then only names it in messages. index_fd (made by
 * rf__dataset_index_fd() in the consumer; < 0 for none) holds, for a
 * folder, its listing, used instead of listing again, and for a packed
 * file the sealed copy of its metadata, used instead of reading it again
 * (both are checked, never trusted). Returns 0 or a negative code with
 * the reason in why. */
int rf__dataset_open_indexed(rf_dataset **out, const char *path, int data_fd,
                             int index_fd, char *why, size_t why_len);

/* Consumer: a new close-on-exec fd of the open folder or packed file, for
 * producers to open the very dataset the consumer listed, whatever its
 * path names later. Returns the fd or -errno. */
int rf__dataset_data_fd(const rf_dataset *ds);

/* Consumer: a sealed memfd for producers (the caller closes it): a
 * folder's listing, or a packed file's metadata (index, names,
 * dictionary); -1 in *fd for a packed file without samples. Returns 0 or
 * -errno. */
int rf__dataset_index_fd(rf_dataset *ds, int *fd);

/* Writes a folder dataset's listing in the folder index format
 * (pack-format.h) to fd, at offset 0 (fd is new and empty): the memfd of
 * rf__dataset_index_fd(), or a cache file that rf__dataset_open_indexed()
 * reads back (it checks everything, so a damaged or foreign file is
 * refused, never trusted). Returns 0, -EINVAL for a packed file, or
 * -errno of the write, with the reason in why. */
int rf__dataset_index_write(const rf_dataset *ds, int fd, char *why,
                            size_t why_len);

/* The listing digest of rf_dataset_info (digest.c): never 0. Reads the
 * listing held in memory, no file; one pass over every sample's entry. */
uint64_t rf__dataset_digest(const rf_dataset *ds);

/* A packed file's zstd dictionary (NULL, 0 when none, and for folders). */
const void *rf__dataset_dict(const rf_dataset *ds, size_t *size);

/* A packed file's RF_SAMPLE_ZSTD sample shape; all zero when it has none
 * (and for folders). */
void rf__dataset_raw_shape(const rf_dataset *ds, uint32_t *height,
                           uint32_t *width, uint32_t *channels,
                           rf_layout *layout);

/* The path the dataset was opened with, for messages. */
const char *rf__dataset_path(const rf_dataset *ds);

/* The folders a listing walked, for the index cache. */
struct rf__walked {
    char *names; /* the path below the folder of each, NUL-terminated,
                    back to back */
    size_t names_size;
    /* Device and inode, in pairs: of the folder itself, then of each of
     * `count` folders in the order of names, taken from the fd the walk
     * read it through (so a link re-pointed meanwhile does not count). */
    uint64_t *ids;
    size_t count;
};

/* What a folder listed by this rf_dataset walked; NULL when it was
 * handed a listing, or is a packed file. */
const struct rf__walked *rf__dataset_walked(const rf_dataset *ds);

/* "." or "..": a folder entry that is no class nor sample, for the
 * listing and for the index cache's check of it alike. */
static inline bool rf__is_dot_or_dotdot(const char *name)
{
    return name[0] == '.' &&
           (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

/* rf_dataset_open(), but a folder's listing is read from, or written to,
 * FOLDER/.ringfeed-index (RF_PARAM_INDEX_CACHE; index-cache.c). The open
 * succeeds whether or not the cache could be written; *unkept is 0 when
 * it was used or written, else -errno of why it was not (-EROFS: a
 * read-only file system; -ENOSPC: a full disk; -EACCES). */
int rf__dataset_open_cached(rf_dataset **out, const char *path, char **errp,
                            int *unkept);

/* How messages name sample `index`: "sample 12 (/data/train/cls/a.jpg)",
 * or "sample 12 (cls/a.jpg, packed offset 128) of /data/x.pack". */
void rf__dataset_describe(const rf_dataset *ds, uint64_t index, char *out,
                          size_t len);

/* Where sample `index` (< the dataset's samples) is stored, whole (the
 * messages above elide long paths): for a folder the image's path in
 * `path` and "" in `name`; for a packed file the pack's path in `path`
 * and the sample's stored name (or "") in `name`. Returns 0, -ERANGE for
 * an index past the end, or -ENAMETOOLONG when either does not fit (both
 * are then ""). */
int rf__dataset_sample_place(const rf_dataset *ds, uint64_t index, char *path,
                             size_t path_len, char *name, size_t name_len);

/* The buffer behind rf_dataset_error(), for rf_dataset_decode() (which
 * lives in lib/decode/decode.c) to write its reason into. */
char *rf__dataset_error_buffer(rf_dataset *ds, size_t *len);

#endif /* RF_DATASET_H */
