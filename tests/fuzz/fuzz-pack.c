/*
 * fuzz-pack.c - the packed-file reader (lib/dataset.c, lib/pack.c) on any
 * bytes. The input becomes a file (a memfd, opened by its /proc path like
 * any dataset path); whatever rf_dataset_open() accepts is then read the
 * way a loader reads it: every sample with rf_dataset_read() (checksum,
 * name), decoded into a buffer of exactly one sample's bytes with the
 * producers' decoder (JPEG with the train transform, or zstd with the
 * file's shape and dictionary), and opened once more through the sealed
 * copy of its index that the consumer hands to producers.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dataset.h"
#include "decode.h"
#include "fuzz.h"
#include "internal.h"

/* Samples read per input: enough for every seed, and a bound on time. */
#define MAX_SAMPLES 64
/* zstd shapes above this are read but not decoded (no slot that big). */
#define MAX_SAMPLE_BYTES (UINT64_C(1) << 20)

static int memfd_with(const uint8_t *data, size_t size)
{
    const int fd = memfd_create("fuzz-pack", MFD_CLOEXEC);
    if (fd < 0)
        abort();
    for (size_t done = 0; done < size;) {
        const ssize_t n = write(fd, data + done, size - done);
        if (n <= 0)
            abort();
        done += (size_t)n;
    }
    return fd;
}

/* The loader's parameters for this dataset: its zstd shape when it has
 * one (else a small JPEG output), the train transform. */
static void params_for(const rf_dataset *ds, int64_t *p)
{
    rf_config *cfg = rf_config_create();
    if (!cfg)
        abort();
    memcpy(p, cfg->params, sizeof(cfg->params));
    rf_config_free(cfg);
    uint32_t height, width, channels;
    rf_layout layout;
    rf__dataset_raw_shape(ds, &height, &width, &channels, &layout);
    const bool raw = height != 0 && (uint64_t)height * width * channels <=
                                        MAX_SAMPLE_BYTES;
    p[RF_PARAM_HEIGHT] = raw ? height : 24;
    p[RF_PARAM_WIDTH] = raw ? width : 20;
    p[RF_PARAM_CHANNELS] = raw ? channels : 3;
    p[RF_PARAM_LAYOUT] = raw ? layout : RF_LAYOUT_NHWC;
    p[RF_PARAM_MAX_PIXELS] = INT64_C(1) << 22;
}

/* Reads (and, with a decoder, decodes) the first samples. */
static void read_samples(rf_dataset *ds, struct rf__decoder *d, size_t bytes)
{
    uint8_t *dst = malloc(bytes);
    if (!dst)
        abort();
    const uint64_t n = rf_dataset_size(ds);
    for (uint64_t i = 0; i < n && i < MAX_SAMPLES; i++) {
        rf_sample_info info;
        if (rf_dataset_read(ds, i, &info) < 0)
            continue;
        if (strlen(info.name) == 0 || info.label < 0 ||
            info.label >= rf_dataset_classes(ds))
            abort(); /* the reader promised a name and a label in range */
        char err[256];
        if (d)
            (void)rf__decode_sample(d, &info, 0, i, dst, err, sizeof(err));
    }
    free(dst);
}

static void read_dataset(rf_dataset *ds)
{
    int64_t p[RF__PARAMS];
    params_for(ds, p);
    struct rf__decoder *d = NULL;
    char why[256];
    if (rf__decoder_new(&d, p, ds, why, sizeof(why)) < 0)
        d = NULL; /* e.g. an unusable dictionary: read without decoding */
    const size_t bytes =
        (size_t)(p[RF_PARAM_HEIGHT] * p[RF_PARAM_WIDTH] * p[RF_PARAM_CHANNELS]);
    read_samples(ds, d, bytes);
    rf__decoder_free(d);
    /* the public one-off decode of the first sample too */
    rf_config *cfg = rf_config_create();
    uint8_t *dst = malloc(bytes);
    if (!cfg || !dst)
        abort();
    memcpy(cfg->params, p, sizeof(cfg->params));
    if (rf_dataset_size(ds) > 0)
        (void)rf_dataset_decode(ds, cfg, 1, 0, dst);
    free(dst);
    rf_config_free(cfg);
}

/* What a producer does: open again with the consumer's copy of the index. */
static void reopen_as_producer(rf_dataset *ds, const char *path)
{
    int index_fd = -1;
    if (rf__dataset_index_fd(ds, &index_fd) < 0)
        abort();
    rf_dataset *again = NULL;
    char why[RF__DETAIL];
    if (rf__dataset_open_indexed(&again, path, index_fd, why, sizeof(why)) < 0)
        abort(); /* the same file and its own copy must open */
    if (rf_dataset_size(again) != rf_dataset_size(ds))
        abort();
    read_samples(again, NULL, 1);
    rf_dataset_close(again);
    if (index_fd >= 0)
        close(index_fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const int fd = memfd_with(data, size);
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    rf_dataset *ds = NULL;
    char *why = NULL;
    if (rf_dataset_open(&ds, path, &why) == 0) {
        read_dataset(ds);
        reopen_as_producer(ds, path);
        rf_dataset_close(ds);
    } else if (!why || !strstr(why, path)) {
        abort(); /* every refusal names the file */
    }
    free(why);
    close(fd);
    return 0;
}
