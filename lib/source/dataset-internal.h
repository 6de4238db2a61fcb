/*
 * dataset-internal.h - struct rf_dataset, shared by the three files that
 * make it up and by nothing else: dataset.c (the public calls, and the
 * dispatch between the two kinds), folder.c (a folder of class folders,
 * by its listing) and pack-reader.c (a packed file). Each kind's calls
 * below are called by dataset.c only, after it has chosen the kind; the
 * helpers at the end are dataset.c's, for both kinds.
 */
#ifndef RF_DATASET_INTERNAL_H
#define RF_DATASET_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/internal.h"
#include "ringfeed.h"
#include "source/crc32c.h"
#include "source/dataset.h"
#include "source/pack-format.h"

enum rf__dataset_kind { RF__DATASET_FOLDER, RF__DATASET_PACK };

struct rf_dataset {
    enum rf__dataset_kind kind;
    char *path;
    int fd; /* the folder (names are opened relative to it) or the file */
    uint64_t samples;
    uint32_t classes;
    /* Samples of each rf_sample_kind, indexed by it, counted at open
     * (for rf_dataset_info()); [0] is no kind and stays 0. */
    uint64_t samples_of_kind[RF_SAMPLE_ZSTD + 1];
    /* Folder: the listing in the folder index format; malloc'd when it
     * was listed here, mapped when it came from an index fd. */
    uint8_t *listing;
    size_t listing_size;
    bool listing_mapped;
    /* Folder listed here: the path below it of every folder walked, each
     * NUL-terminated (for the index cache); NULL otherwise. */
    struct rf__walked walked; /* listed here: the folders walked */
    /* Packed file: the header and the mapping of its metadata. A
     * folder's header stays all zeros (calloc). */
    struct rf__pack_header header;
    int meta_fd; /* sealed memfd holding a copy of them, or -1 */
    uint8_t *meta_map;
    size_t meta_map_size;
    const uint8_t *dict;
    /* Both: encoded index entries and the names they point into. */
    const uint8_t *entries;
    const char *names;
    uint64_t names_size;
    /* The last sample read, reused (grown, never shrunk). */
    uint8_t *buffer;
    size_t buffer_size;
    struct rf__crc32c crc;
    char name[48]; /* "packed offset N" for a sample without a name */
    char error[RF__DETAIL];
};

/* ---- a folder (folder.c) ------------------------------------------------ */

/* Lists the folder open at ds->fd, or maps and checks the listing in
 * index_fd (>= 0); sets kind, samples, classes, entries and names.
 * Returns 0 or a negative code with the reason, naming the folder, in
 * why. */
int rf__folder_open(rf_dataset *ds, int index_fd, char *why, size_t why_len);

/* Reads sample index (< ds->samples) into ds->buffer; as
 * rf_dataset_read(), which has checked the index. */
int rf__folder_read(rf_dataset *ds, uint64_t index, rf_sample_info *info);

/* "sample 12 (/data/train/cls/a.jpg)" for index < ds->samples. */
void rf__folder_describe(const rf_dataset *ds, uint64_t index, char *out,
                         size_t len);

/* rf__dataset_index_fd() for a folder: a sealed memfd of its listing. */
int rf__folder_index_fd(rf_dataset *ds, int *fd);

/* Frees what rf__folder_open() made (the listing, what was walked). */
void rf__folder_close(rf_dataset *ds);

/* ---- a packed file (pack-reader.c) -------------------------------------- */

/* Reads and checks the header of the file open at ds->fd (size bytes)
 * and gets its metadata (from the file, or from the consumer's copy in
 * index_fd >= 0), every entry checked; sets kind, header, samples,
 * classes, entries, names and dict. Returns 0 or RF_E_CORRUPT_SAMPLE with
 * the reason, naming the file, in why. */
int rf__pack_open(rf_dataset *ds, uint64_t size, int index_fd, char *why,
                  size_t why_len);

/* Reads sample index (< ds->samples) into ds->buffer and checks its
 * CRC-32C; as rf_dataset_read(), which has checked the index. */
int rf__pack_read(rf_dataset *ds, uint64_t index, rf_sample_info *info);

/* "sample 12 (cls/a.jpg, packed offset 128) of /data/x.pack" for index <
 * ds->samples. */
void rf__pack_describe(const rf_dataset *ds, uint64_t index, char *out,
                       size_t len);

/* rf__dataset_index_fd() for a packed file: a new fd of the sealed copy
 * of its metadata; *fd stays -1 when there is none (no samples). */
int rf__pack_index_fd(rf_dataset *ds, int *fd);

/* Frees what rf__pack_open() made (the mapping, the memfd). */
void rf__pack_close(rf_dataset *ds);

/* ---- for both (dataset.c) ----------------------------------------------- */

/* Makes ds->buffer hold at least size bytes (and gives back an oversized
 * one). Returns 0 or -ENOMEM. */
int rf__dataset_reserve_buffer(rf_dataset *ds, size_t size);

/* Writes "WHO: WHAT[: strerror]" into ds->error (errno's text for a
 * negative errno) and returns rc. */
int rf__dataset_sample_failed(rf_dataset *ds, const char *who, const char *what,
                              int rc);

#endif /* RF_DATASET_INTERNAL_H */
