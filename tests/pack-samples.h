/*
 * pack-samples.h - the test pack of test-pack-format and test-pack-damage:
 * its samples (JPEG bytes and zstd frames, with names and without), its
 * dictionary and shape, written with the writer's refusals checked half-way
 * where asked; zstd dictionaries for frames that name one; each sample read
 * back and checked; and a copy, damaged, written and resealed.
 */
#ifndef RF_TEST_PACK_SAMPLES_H
#define RF_TEST_PACK_SAMPLES_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zdict.h>
#include <zstd.h>

#include "common/internal.h"
#include "source/dataset.h"
#include "source/pack.h"
#include "dataset-files.h"
#include "test.h"

#define RAW_H 4
#define RAW_W 5
#define RAW_C 3
#define RAW_BYTES ((size_t)RAW_H * RAW_W * RAW_C)

static const char pack_dict[] = "any bytes: the writer keeps them as given";

/* The samples of the test pack; sizes and offsets are filled in. */
static struct pack_sample {
    rf_sample_kind kind;
    int64_t label;
    const char *name; /* NULL or "": none */
    uint8_t data[128];
    size_t size;
    uint64_t offset;
} pack_samples[] = {
    {RF_SAMPLE_JPEG, 2, "cls/a.jpg", {0}, 0, 0},
    {RF_SAMPLE_ZSTD, 0, NULL, {0}, 0, 0},
    {RF_SAMPLE_JPEG, 1, "", {0}, 0, 0},
    {RF_SAMPLE_ZSTD, 1, "raw/3", {0}, 0, 0},
};
#define PACK_SAMPLES (sizeof(pack_samples) / sizeof(pack_samples[0]))

static inline void make_pack_samples(void)
{
    uint64_t offset = RF__PACK_HEADER_SIZE;
    for (size_t i = 0; i < PACK_SAMPLES; i++) {
        struct pack_sample *s = &pack_samples[i];
        if (s->kind == RF_SAMPLE_ZSTD) {
            uint8_t raw[RAW_BYTES];
            for (size_t k = 0; k < RAW_BYTES; k++)
                raw[k] = (uint8_t)(k * i);
            s->size =
                ZSTD_compress(s->data, sizeof(s->data), raw, sizeof(raw), 3);
            CHECK(!ZSTD_isError(s->size));
        } else { /* sample 2 stays empty: a 0-byte file packs as is */
            s->size = i == 0 ? 20 : 0;
            memcpy(s->data, "\xff\xd8\xff not quite a JPEG", s->size);
        }
        s->offset = offset;
        offset += s->size;
    }
}

static inline void add_or_die(rf_pack_writer *w, const struct pack_sample *s)
{
    const int rc =
        rf_pack_writer_add(w, s->kind, s->data, s->size, s->label, s->name);
    if (rc < 0)
        fprintf(stderr, "add: %s\n", rf_pack_writer_error(w));
    CHECK_OK(rc);
}

/* A refused add leaves the writer as it was. */
static inline void check_add_refused(rf_pack_writer *w, rf_sample_kind kind,
                                     const void *data, size_t size,
                                     int64_t label, const char *needle)
{
    CHECK_EQ(rf_pack_writer_add(w, kind, data, size, label, "bad"), -EINVAL);
    CHECK_CONTAINS(rf_pack_writer_error(w), needle);
    printf("  refused as expected: %s\n", rf_pack_writer_error(w));
}

/* A zstd dictionary with an ID (frames compressed with it name it),
 * trained on patterned samples; returns its size. */
static inline size_t train_dictionary(uint8_t *dict, size_t capacity)
{
    enum { SAMPLES = 400, SAMPLE_BYTES = 64 };
    static uint8_t samples[SAMPLES * SAMPLE_BYTES];
    size_t sizes[SAMPLES];
    for (size_t i = 0; i < SAMPLES; i++) {
        for (size_t k = 0; k < SAMPLE_BYTES; k++)
            samples[i * SAMPLE_BYTES + k] =
                (uint8_t)("ringfeed"[k % 8] + i % 7);
        sizes[i] = SAMPLE_BYTES;
    }
    const size_t size =
        ZDICT_trainFromBuffer(dict, capacity, samples, sizes, SAMPLES);
    CHECK(!ZDICT_isError(size));
    CHECK(ZSTD_getDictID_fromDict(dict, size) != 0);
    return size;
}

/* raw compressed with dict into frame (capacity bytes); returns its size. */
static inline size_t compress_with_dictionary(const void *raw, size_t raw_size,
                                              const void *dict,
                                              size_t dict_size, uint8_t *frame,
                                              size_t capacity)
{
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    const size_t n = ZSTD_compress_usingDict(cctx, frame, capacity, raw,
                                             raw_size, dict, dict_size, 3);
    ZSTD_freeCCtx(cctx);
    CHECK(!ZSTD_isError(n));
    return n;
}

/* A frame naming a dictionary goes only into a pack that carries that
 * dictionary: the pack of write_test_pack() carries raw bytes, so the
 * frame is refused; and the check itself for a matching and another ID. */
static inline void check_dictionary_refusal(rf_pack_writer *w)
{
    uint8_t dict[1024], frame[256], raw[RAW_BYTES] = {0};
    const size_t dict_size = train_dictionary(dict, sizeof(dict));
    const unsigned id = ZSTD_getDictID_fromDict(dict, dict_size);
    const size_t n = compress_with_dictionary(raw, sizeof(raw), dict, dict_size,
                                              frame, sizeof(frame));
    CHECK_EQ(ZSTD_getDictID_fromFrame(frame, n), id);
    check_add_refused(w, RF_SAMPLE_ZSTD, frame, n, 0,
                      "has no dictionary with an ID; compress it with the "
                      "dictionary passed to rf_pack_writer_create()");
    char why[160];
    CHECK(rf__zstd_frame_fits_dict(frame, n, id, why, sizeof(why)));
    CHECK(!rf__zstd_frame_fits_dict(frame, n, id + 1, why, sizeof(why)));
    char expected[160];
    rf__format(expected, sizeof(expected),
               "compressed with dictionary %u, but the packed file's "
               "dictionary is %u",
               id, id + 1);
    CHECK_CONTAINS(why, expected);
}

static inline void add_refusals(rf_pack_writer *w)
{
    uint8_t frame[128], raw[RAW_BYTES] = {0};
    const size_t n = ZSTD_compress(frame, sizeof(frame), raw, sizeof(raw), 1);
    check_add_refused(w, RF_SAMPLE_ZSTD, frame, n - 1, 0,
                      "not exactly one zstd frame");
    check_add_refused(w, RF_SAMPLE_ZSTD, frame, n + 1, 0,
                      "more bytes follow it");
    check_add_refused(w, RF_SAMPLE_ZSTD, "not zstd", 8, 0,
                      "not exactly one zstd frame");
    check_add_refused(w, RF_SAMPLE_JPEG, "x", 1, -1, "label -1");
    check_add_refused(w, (rf_sample_kind)9, "x", 1, 0, "kind 9");
    check_dictionary_refusal(w);
}

/* The test pack at path; with `refusals`, the writer's refusals are
 * checked half-way (each must leave the writer as it was). */
static inline void write_test_pack(const char *path, bool refusals)
{
    rf_pack_writer *w =
        test_create_pack(path, RAW_H, RAW_W, RAW_C, RF_LAYOUT_NCHW, pack_dict,
                         sizeof(pack_dict));
    for (size_t i = 0; i < PACK_SAMPLES; i++) {
        add_or_die(w, &pack_samples[i]);
        if (i == 1 && refusals)
            add_refusals(w);
    }
    CHECK(access(path, F_OK) != 0); /* not there until finished */
    test_finish_pack(w);
    char tmp[1100];
    rf__format(tmp, sizeof(tmp), "%s.tmp", path);
    CHECK_EQ(access(tmp, F_OK), -1);
}

static inline void check_pack_sample(rf_dataset *ds, size_t i)
{
    const struct pack_sample *s = &pack_samples[i];
    rf_sample_info info;
    CHECK_OK(rf_dataset_read(ds, i, &info));
    CHECK_EQ(info.size, s->size);
    CHECK(s->size == 0 || memcmp(info.data, s->data, s->size) == 0);
    CHECK_EQ(info.label, s->label);
    CHECK_EQ(info.kind, s->kind);
    char name[64];
    if (s->name && s->name[0])
        rf__format(name, sizeof(name), "%s", s->name);
    else
        rf__format(name, sizeof(name), "packed offset %llu",
                   (unsigned long long)s->offset);
    if (strcmp(info.name, name) != 0) {
        fprintf(stderr, "sample %zu is named %s, expected %s\n", i, info.name,
                name);
        exit(1);
    }
}

static inline const char *damaged(const uint8_t *bytes, size_t size)
{
    write_file(at("damaged.pack"), bytes, size);
    return at("damaged.pack");
}

/* Recomputes the checksums after an edit, so that the reader's other
 * checks are what stands between it and the damage. */
static inline void reseal(uint8_t *bytes, struct rf__pack_header *h)
{
    struct rf__crc32c crc;
    rf__crc32c_init(&crc);
    h->meta_crc = rf__crc32c(&crc, 0, bytes + h->index_offset,
                             h->file_size - h->index_offset);
    rf__pack_header_encode(h, bytes);
}

#endif /* RF_TEST_PACK_SAMPLES_H */
