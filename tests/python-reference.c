/*
 * python-reference.c - what examples/python-loop.py must print, computed
 * in C from the public header alone, for tests/test-python.sh.
 *
 *   python-reference layout
 *       one line per field of rf_batch, "NAME OFFSET SIZE" from offsetof()
 *       and sizeof, then "sizeof SIZE": what python-loop.py's RfBatch must
 *       match (the library has no call that tells them at run time).
 *
 *   python-reference structs
 *       the same, "STRUCT.FIELD OFFSET SIZE" and "STRUCT sizeof SIZE", for
 *       every structure the Python package (python/ringfeed/_capi.py)
 *       declares: tests/python/test_capi.py compares them.
 *
 *   python-reference totals DATASET BATCH SIZE EPOCHS nhwc|nchw
 *       the lines python-loop.py prints for those options ("epoch E: B
 *       batches, S samples" for each epoch, then "checksums: ..."),
 *       computed sample by sample with rf_dataset_decode(), which decodes
 *       a sample as a producer does for that epoch. No loader and no
 *       rf_batch: Python's totals agree only if its RfBatch reads the
 *       fields it uses where C puts them (layout covers the rest: the
 *       reserved fields and the size).
 *
 * The checksums, as python-loop.py's Totals defines them: over every
 * sample of every epoch, modulo 2^64, the sum of (index + 1) * crc32(the
 * sample's pixels) and the sum of (index + 1) * (label + 1)^2. One rank
 * (world size 1) and every sample: the test clears RANK and WORLD_SIZE.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringfeed.h>

#define FIELD(name)                                                            \
    printf("%s %zu %zu\n", #name, offsetof(rf_batch, name),                    \
           sizeof(((rf_batch *)NULL)->name))

static void print_layout(void)
{
    FIELD(data);
    FIELD(bytes);
    FIELD(sample_bytes);
    FIELD(samples);
    FIELD(height);
    FIELD(width);
    FIELD(channels);
    FIELD(layout);
    FIELD(slot);
    FIELD(labels);
    FIELD(indices);
    FIELD(epoch);
    FIELD(number);
    FIELD(sequence);
    FIELD(handle);
    FIELD(skipped);
    FIELD(reserved32_);
    FIELD(reserved_);
    printf("sizeof %zu\n", sizeof(rf_batch));
}

#define MEMBER(type, name)                                                     \
    printf("%s.%s %zu %zu\n", #type, #name, offsetof(type, name),              \
           sizeof(((type *)NULL)->name))
#define SIZE(type) printf("%s sizeof %zu\n", #type, sizeof(type))

static void print_stats_layout(void)
{
    MEMBER(rf_stats, batches);
    MEMBER(rf_stats, samples);
    MEMBER(rf_stats, bytes);
    MEMBER(rf_stats, wait_ns);
    MEMBER(rf_stats, elapsed_ns);
    MEMBER(rf_stats, producers);
    MEMBER(rf_stats, slots);
    MEMBER(rf_stats, producer_busy_ns);
    MEMBER(rf_stats, failed_samples);
    MEMBER(rf_stats, slots_at_producers);
    MEMBER(rf_stats, slots_ready);
    MEMBER(rf_stats, slots_with_user);
    MEMBER(rf_stats, slots_free);
    MEMBER(rf_stats, respawns);
    MEMBER(rf_stats, batches_per_epoch);
    MEMBER(rf_stats, dataset_samples);
    MEMBER(rf_stats, rank);
    MEMBER(rf_stats, world_size);
    MEMBER(rf_stats, listing_digest);
    SIZE(rf_stats);
}

static void print_other_layouts(void)
{
    MEMBER(rf_param_info, param);
    MEMBER(rf_param_info, kind);
    MEMBER(rf_param_info, name);
    MEMBER(rf_param_info, doc);
    MEMBER(rf_param_info, choices);
    MEMBER(rf_param_info, default_value);
    MEMBER(rf_param_info, min);
    MEMBER(rf_param_info, max);
    MEMBER(rf_param_info, reserved_);
    SIZE(rf_param_info);
    MEMBER(rf_sample_error, index);
    MEMBER(rf_sample_error, epoch);
    MEMBER(rf_sample_error, message);
    SIZE(rf_sample_error);
    MEMBER(rf_failed_sample, index);
    MEMBER(rf_failed_sample, epoch);
    MEMBER(rf_failed_sample, path);
    MEMBER(rf_failed_sample, name);
    MEMBER(rf_failed_sample, reason);
    SIZE(rf_failed_sample);
    MEMBER(rf_dataset_info, format);
    MEMBER(rf_dataset_info, classes);
    MEMBER(rf_dataset_info, samples);
    MEMBER(rf_dataset_info, jpeg_samples);
    MEMBER(rf_dataset_info, zstd_samples);
    MEMBER(rf_dataset_info, height);
    MEMBER(rf_dataset_info, width);
    MEMBER(rf_dataset_info, channels);
    MEMBER(rf_dataset_info, layout);
    MEMBER(rf_dataset_info, dict_size);
    MEMBER(rf_dataset_info, listing_digest);
    MEMBER(rf_dataset_info, reserved);
    SIZE(rf_dataset_info);
}

/* CRC-32 (IEEE 802.3, reflected), as Python's zlib.crc32(). */
static uint32_t crc32_of(const uint8_t *p, size_t n)
{
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int bit = 0; bit < 8; bit++)
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

/* A positive decimal no larger than max, or 0. */
static int64_t number(const char *text, int64_t max)
{
    char *end = NULL;
    errno = 0;
    const long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v < 1 || v > max)
        return 0;
    return v;
}

static rf_config *make_config(const char *path, int64_t batch, int64_t size,
                              int64_t epochs, rf_layout layout)
{
    rf_config *cfg = rf_config_create();
    if (!cfg)
        return NULL;
    int rc = rf_config_set_path(cfg, path);
    if (rc == 0)
        rc = rf_config_set(cfg, RF_PARAM_BATCH_SIZE, batch);
    if (rc == 0)
        rc = rf_config_set(cfg, RF_PARAM_HEIGHT, size);
    if (rc == 0)
        rc = rf_config_set(cfg, RF_PARAM_WIDTH, size);
    if (rc == 0)
        rc = rf_config_set(cfg, RF_PARAM_EPOCHS, epochs);
    if (rc == 0)
        rc = rf_config_set(cfg, RF_PARAM_LAYOUT, layout);
    if (rc < 0) {
        fprintf(stderr, "python-reference: %s\n", rf_config_error(cfg));
        rf_config_free(cfg);
        return NULL;
    }
    return cfg;
}

/* Decodes every sample of every epoch; returns 0 or 1 (said why). */
static int print_totals(rf_dataset *ds, const rf_config *cfg, int64_t batch,
                        int64_t size, int64_t epochs)
{
    const uint64_t n = rf_dataset_size(ds);
    const size_t sample_bytes = (size_t)size * (size_t)size * 3;
    uint8_t *pixels = malloc(sample_bytes);
    if (!pixels) {
        fprintf(stderr, "python-reference: out of memory\n");
        return 1;
    }
    uint64_t pixel_sum = 0, label_sum = 0;
    for (uint64_t epoch = 0; epoch < (uint64_t)epochs; epoch++) {
        for (uint64_t index = 0; index < n; index++) {
            rf_sample_info info;
            int rc = rf_dataset_read(ds, index, &info);
            if (rc == 0)
                rc = rf_dataset_decode(ds, cfg, epoch, index, pixels);
            if (rc != 0) {
                fprintf(stderr, "python-reference: %s: %s\n", rf_strerror(rc),
                        rf_dataset_error(ds));
                free(pixels);
                return 1;
            }
            pixel_sum += (index + 1) * crc32_of(pixels, sample_bytes);
            const uint64_t label = (uint64_t)(info.label + 1);
            label_sum += (index + 1) * label * label;
        }
        printf("epoch %" PRIu64 ": %" PRIu64 " batches, %" PRIu64 " samples\n",
               epoch, (n + (uint64_t)batch - 1) / (uint64_t)batch, n);
    }
    printf("checksums: pixels 0x%016" PRIx64 ", labels 0x%016" PRIx64 "\n",
           pixel_sum, label_sum);
    free(pixels);
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: python-reference layout\n"
                    "       python-reference structs\n"
                    "       python-reference totals DATASET BATCH SIZE EPOCHS "
                    "nhwc|nchw\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "structs") == 0) {
        print_layout();
        print_stats_layout();
        print_other_layouts();
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "layout") == 0) {
        print_layout();
        return 0;
    }
    if (argc != 7 || strcmp(argv[1], "totals") != 0)
        return usage();
    const int64_t batch = number(argv[3], 65536);
    const int64_t size = number(argv[4], 65536);
    const int64_t epochs = number(argv[5], 1000);
    const int nchw = strcmp(argv[6], "nchw") == 0;
    if (!batch || !size || !epochs || (!nchw && strcmp(argv[6], "nhwc") != 0))
        return usage();
    rf_config *cfg = make_config(argv[2], batch, size, epochs,
                                 nchw ? RF_LAYOUT_NCHW : RF_LAYOUT_NHWC);
    if (!cfg)
        return 1;
    rf_dataset *ds = NULL;
    char *why = NULL;
    int rc = rf_dataset_open(&ds, argv[2], &why);
    if (rc < 0) {
        fprintf(stderr, "python-reference: %s: %s\n", rf_strerror(rc),
                why ? why : "");
        free(why);
        rf_config_free(cfg);
        return 1;
    }
    rc = print_totals(ds, cfg, batch, size, epochs);
    rf_dataset_close(ds);
    rf_config_free(cfg);
    return rc;
}
