/*
 * fuzz-pack.c - the packed-file reader (lib/dataset.c, lib/pack.c) on any
 * bytes. After a leading byte that says which checksums to recompute
 * (fuzz.h: a mutation that only breaks a CRC-32C tests nothing behind
 * it), the input becomes a file (a memfd, opened by its /proc path like
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

#include "common/internal.h"
#include "decode/decode.h"
#include "fuzz.h"
#include "source/dataset.h"
#include "source/pack.h"

/* Samples read per input: enough for every seed, and a bound on time. */
#define MAX_SAMPLES 64
/* zstd shapes above this are read but not decoded (no slot that big). */
#define MAX_SAMPLE_BYTES (UINT64_C(1) << 20)

/* Writes the CRC-32C of [from, to) of file at `at`, when all of it is
 * inside the file. */
static void reseal(const struct rf__crc32c *crc, uint8_t *file, size_t size,
                   uint64_t from, uint64_t to, uint64_t at)
{
    if (from <= to && to <= size && at <= size - 4)
        rf__put_le32(file + at, rf__crc32c(crc, 0, file + from, to - from));
}

/* Recomputes the checksums the bits ask for, where the fields that place
 * them make sense, in the order each covers the one before. */
static void reseal_pack(uint8_t bits, uint8_t *file, size_t size)
{
    static struct rf__crc32c crc;
    if (!crc.table[0][1])
        rf__crc32c_init(&crc);
    if (size < RF__PACK_HEADER_SIZE)
        return;
    const uint64_t index = rf__get_le64(file + 56);
    const uint64_t samples = rf__get_le64(file + 24);
    for (uint64_t i = 0; bits & PACK_RESEAL_PAYLOADS && i < samples; i++) {
        const uint64_t entry = index + i * RF__PACK_ENTRY_SIZE;
        if (index > size || i >= (size - index) / RF__PACK_ENTRY_SIZE)
            break;
        const uint64_t offset = rf__get_le64(file + entry);
        const uint64_t bytes = rf__get_le32(file + entry + 24);
        if (offset <= size && bytes <= size - offset)
            reseal(&crc, file, size, offset, offset + bytes, entry + 28);
    }
    if (bits & PACK_RESEAL_META)
        reseal(&crc, file, size, index, size, 104);
    if (bits & PACK_RESEAL_HEADER) {
        memset(file + 108, 0, 4);
        reseal(&crc, file, size, 0, RF__PACK_HEADER_SIZE, 108);
    }
}

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
    const bool raw =
        height != 0 && (uint64_t)height * width * channels <= MAX_SAMPLE_BYTES;
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
        if (d) {
            char err[256];
            (void)rf__decode_sample(d, &info, 0, i, dst, err, sizeof(err));
        }
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
    if (rf__dataset_open_indexed(&again, path, -1, index_fd, why, sizeof(why)) <
        0)
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
    struct fuzz_bytes in = {data, size};
    const uint8_t bits = fuzz_take(&in);
    uint8_t *file = malloc(in.size ? in.size : 1);
    if (!file)
        abort();
    if (in.size > 0)
        memcpy(file, in.data, in.size);
    reseal_pack(bits, file, in.size);
    const int fd = memfd_with(file, in.size);
    free(file);
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
