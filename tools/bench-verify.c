/*
 * tools/bench-verify.c - ringfeed-bench --verify; see bench-verify.h.
 *
 * Each epoch keeps one bit per sample index, so that a sample that
 * arrives twice or never is found whatever the delivery order; the
 * expected pixels are made again for each sample, by rf_synthetic_fill()
 * or, for a dataset, by rf_dataset_decode() with the loader's own
 * configuration.
 */
#define _GNU_SOURCE /* asprintf() */
#include "bench-verify.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-terms.h"

/* Only the first few verification failures are described one by one; the
 * counts at the end cover the rest. */
#define MAX_FAILURES_DESCRIBED 10

/* Which sample indices of one epoch have arrived so far: one bit each. */
struct epoch_seen {
    uint64_t epoch;
    uint64_t batches;  /* batches of this epoch checked so far */
    uint64_t distinct; /* indices seen at least once */
    uint64_t skipped;  /* left out by the skip policy: not missing */
    uint64_t *bits;
};

struct verifier {
    /* What every batch should hold. */
    uint64_t seed;
    uint32_t height, width, channels, classes;
    rf_layout layout;
    bool check_pixels; /* false for the empty source, which has none */
    bool ordered;
    size_t sample_bytes;
    uint64_t samples_per_epoch; /* in the source: indices 0..this-1 */
    uint64_t rank_samples;      /* of each epoch, this rank's share */
    uint64_t batch_size;
    uint64_t batches_per_epoch;
    uint64_t epochs;
    unsigned char *expected; /* one sample, as the source makes it */
    /* RF_SOURCE_PATH: the dataset, read again to check labels and pixels
     * (rf_dataset_decode() with the loader's configuration). */
    rf_dataset *dataset;
    rf_config *config;

    /* Epochs with batches still to come. Without ordering, batches of
     * neighbouring epochs interleave, so more than one can be open. */
    struct epoch_seen *open;
    size_t open_count, open_capacity;
    uint64_t epochs_opened;
    uint64_t next_sequence; /* the batch that ordered delivery owes next */

    /* Results. */
    uint64_t verified, missing, duplicated, corrupt;
    uint64_t out_of_order, malformed; /* batches */
    unsigned described;               /* failures described on stderr */
};

void verifier_free(struct verifier *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->open_count; i++)
        free(v->open[i].bits);
    free(v->open);
    free(v->expected);
    rf_dataset_close(v->dataset);
    rf_config_free(v->config);
    free(v);
}

static void verifier_expect(struct verifier *v, const struct bench_options *o)
{
    v->seed = o->seed;
    v->height = (uint32_t)o->height;
    v->width = (uint32_t)o->width;
    v->channels = (uint32_t)o->channels;
    v->classes = (uint32_t)o->classes;
    v->layout = o->layout;
    v->check_pixels =
        o->source == RF_SOURCE_SYNTHETIC || o->source == RF_SOURCE_PATH;
    v->ordered = !o->unordered;
    v->sample_bytes =
        (size_t)o->height * (size_t)o->width * (size_t)o->channels;
    v->samples_per_epoch = (uint64_t)o->samples;
    v->rank_samples = v->samples_per_epoch;
    v->batch_size = (uint64_t)o->batch;
    v->batches_per_epoch = bench_ceil_div(v->samples_per_epoch, v->batch_size);
    v->epochs = (uint64_t)o->epochs;
}

/* The dataset gives the sample count, the labels and (decoded with the
 * loader's own configuration) the pixels to expect. When it does not
 * open, *unopened gets the message, unsaid (see verifier_create()). */
static int open_dataset_for(struct verifier *v, const struct bench_options *o,
                            char **unopened)
{
    char *detail = NULL;
    const int rc = rf_dataset_open(&v->dataset, o->path, &detail);
    if (rc < 0) {
        if (asprintf(unopened, "--verify: %s",
                     detail ? detail : rf_strerror(rc)) < 0) {
            *unopened = NULL; /* no memory to keep it: said now */
            cli_print_line(stderr, PROGRAM ": --verify: %s",
                           detail ? detail : rf_strerror(rc));
        }
        free(detail);
        return rc;
    }
    v->samples_per_epoch = rf_dataset_size(v->dataset);
    v->rank_samples = v->samples_per_epoch;
    v->batches_per_epoch = bench_ceil_div(v->samples_per_epoch, v->batch_size);
    v->config = rf_config_create();
    return v->config ? bench_configure(v->config, o) : -ENOMEM;
}

struct verifier *verifier_create(const struct bench_options *o, char **unopened)
{
    *unopened = NULL;
    struct verifier *v = calloc(1, sizeof(*v));
    if (!v)
        goto no_memory;
    verifier_expect(v, o);
    if (o->source == RF_SOURCE_PATH && open_dataset_for(v, o, unopened) < 0)
        goto fail;
    if (v->check_pixels) {
        v->expected = malloc(v->sample_bytes);
        if (!v->expected)
            goto no_memory;
    }
    return v;
fail:
    verifier_free(v);
    return NULL;
no_memory:
    fprintf(stderr, PROGRAM ": no memory for --verify\n");
    verifier_free(v);
    return NULL;
}

void verifier_bind(struct verifier *v, const rf_loader *loader)
{
    rf_stats stats;
    if (rf_loader_stats(loader, &stats) < 0 || stats.world_size <= 1)
        return;
    /* The bench sets no RF_PARAM_SHARD_PAD: the table's default says
     * whether ranks are padded to ceil(N/W) or cut to floor(N/W). */
    const rf_param_info pad = cli_param_info(PROGRAM, RF_PARAM_SHARD_PAD);
    const uint64_t n = v->samples_per_epoch, w = stats.world_size;
    v->rank_samples = pad.default_value ? bench_ceil_div(n, w) : n / w;
    /* the loader's own count: a rule above gone wrong shows as batches
     * that do not add up, not as a silently matching expectation */
    v->batches_per_epoch = stats.batches_per_epoch;
}

static void describe_failure(struct verifier *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void describe_failure(struct verifier *v, const char *fmt, ...)
{
    if (v->described++ >= MAX_FAILURES_DESCRIBED)
        return;
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    cli_print_line(stderr, PROGRAM ": verify: %s", text);
}

/* Ordered delivery promises sequence 0, 1, 2, ... across all epochs. */
static void check_order(struct verifier *v, const rf_batch *b)
{
    if (v->ordered && b->sequence != v->next_sequence) {
        v->out_of_order++;
        describe_failure(v,
                         "batch %" PRIu64 " arrived when %" PRIu64 " was due",
                         b->sequence, v->next_sequence);
    }
    /* Continue from what arrived, so that one slip is counted once. */
    v->next_sequence = b->sequence + 1;
}

/* epoch and number must follow from sequence, and lie within the run. */
static bool position_is_consistent(struct verifier *v, const rf_batch *b)
{
    const uint64_t per_epoch = v->batches_per_epoch;
    if (b->sequence < per_epoch * v->epochs &&
        b->epoch == b->sequence / per_epoch &&
        b->number == b->sequence % per_epoch)
        return true;
    describe_failure(v,
                     "batch %" PRIu64 " says epoch %" PRIu64 ", number %" PRIu64
                     "; a run has %" PRIu64 " epochs of %" PRIu64 " batches",
                     b->sequence, b->epoch, b->number, v->epochs, per_epoch);
    return false;
}

/* The last batch of an epoch holds what is left over. */
static uint64_t samples_in_batch(const struct verifier *v, uint64_t number)
{
    const uint64_t first = number * v->batch_size;
    const uint64_t left = v->rank_samples - first;
    return left < v->batch_size ? left : v->batch_size;
}

static bool shape_is_expected(struct verifier *v, const rf_batch *b)
{
    const uint64_t samples = samples_in_batch(v, b->number);
    const bool bytes_ok =
        !v->check_pixels || b->bytes == b->samples * v->sample_bytes;
    if (b->samples + b->skipped == samples &&
        b->sample_bytes == v->sample_bytes && b->height == v->height &&
        b->width == v->width && b->channels == v->channels &&
        b->layout == v->layout && bytes_ok)
        return true;
    describe_failure(v,
                     "batch %" PRIu64 " holds %" PRIu32 " samples of %" PRIu32
                     "x%" PRIu32 "x%" PRIu32 " (%zu bytes); expected %" PRIu64
                     " of %" PRIu32 "x%" PRIu32 "x%" PRIu32,
                     b->sequence, b->samples, b->height, b->width, b->channels,
                     b->bytes, samples, v->height, v->width, v->channels);
    return false;
}

/* A batch whose own description is wrong cannot be checked sample by
 * sample: its data may not even be where it says. */
static bool batch_is_checkable(struct verifier *v, const rf_batch *b)
{
    check_order(v, b);
    if (position_is_consistent(v, b) && shape_is_expected(v, b))
        return true;
    v->malformed++;
    return false;
}

/* Ends the bookkeeping of one epoch: whatever did not arrive is missing. */
static void close_epoch(struct verifier *v, struct epoch_seen *rec)
{
    const uint64_t missing = v->rank_samples - rec->distinct - rec->skipped;
    if (missing > 0)
        describe_failure(
            v, "epoch %" PRIu64 ": %" PRIu64 " sample%s never arrived",
            rec->epoch, missing, missing == 1 ? "" : "s");
    v->missing += missing;
    /* Each epoch's bits come from their own calloc; the analyzer cannot
     * tell that two records never share them. */
    free(rec->bits); /* NOLINT(clang-analyzer-unix.Malloc) */
    /* Keep the open ones contiguous: the last takes this one's place. */
    struct epoch_seen *last = &v->open[--v->open_count];
    if (rec != last)
        *rec = *last;
}

static struct epoch_seen *open_epoch(struct verifier *v, uint64_t epoch)
{
    if (v->open_count == v->open_capacity) {
        const size_t capacity = v->open_capacity ? 2 * v->open_capacity : 4;
        struct epoch_seen *grown = realloc(v->open, capacity * sizeof(*grown));
        if (!grown)
            return NULL;
        v->open = grown;
        v->open_capacity = capacity;
    }
    uint64_t *bits =
        calloc(bench_ceil_div(v->samples_per_epoch, 64), sizeof(uint64_t));
    if (!bits)
        return NULL;
    struct epoch_seen *rec = &v->open[v->open_count++];
    *rec = (struct epoch_seen){.epoch = epoch, .bits = bits};
    v->epochs_opened++;
    return rec;
}

/* Returns the record of epoch, opening it at its first batch; NULL when
 * out of memory. Few epochs are open at once, so a linear search does. */
static struct epoch_seen *epoch_record(struct verifier *v, uint64_t epoch)
{
    for (size_t i = 0; i < v->open_count; i++)
        if (v->open[i].epoch == epoch)
            return &v->open[i];
    return open_epoch(v, epoch);
}

static void mark_seen(struct verifier *v, struct epoch_seen *rec,
                      uint64_t index)
{
    uint64_t *const word = &rec->bits[index / 64];
    const uint64_t bit = UINT64_C(1) << (index % 64);
    if (*word & bit) {
        v->duplicated++;
        describe_failure(v,
                         "epoch %" PRIu64 ": sample %" PRIu64 " arrived again",
                         rec->epoch, index);
        return;
    }
    *word |= bit;
    rec->distinct++;
}

static bool pixels_match(struct verifier *v, const rf_batch *b, uint32_t i,
                         uint64_t index)
{
    const unsigned char *const got =
        (const unsigned char *)b->data + (size_t)i * v->sample_bytes;
    if (v->dataset) {
        if (rf_dataset_decode(v->dataset, v->config, b->epoch, index,
                              v->expected) < 0)
            return false;
    } else {
        rf_synthetic_fill(v->seed, index, v->classes, v->height, v->width,
                          v->channels, v->layout, v->expected);
    }
    return memcmp(got, v->expected, v->sample_bytes) == 0;
}

static int64_t expected_label(struct verifier *v, uint64_t index)
{
    if (!v->dataset)
        return rf_synthetic_label(v->seed, index, v->classes);
    rf_sample_info info;
    return rf_dataset_read(v->dataset, index, &info) < 0 ? -1 : info.label;
}

static void check_sample(struct verifier *v, const rf_batch *b, uint32_t i,
                         struct epoch_seen *rec)
{
    const uint64_t index = b->indices[i];
    const char *wrong = NULL;
    if (index >= v->samples_per_epoch) {
        wrong = "index out of range";
    } else {
        mark_seen(v, rec, index);
        if (b->labels[i] != expected_label(v, index))
            wrong = "wrong label";
        else if (v->check_pixels && !pixels_match(v, b, i, index))
            wrong = "wrong pixels";
    }
    if (wrong) {
        v->corrupt++;
        describe_failure(
            v, "batch %" PRIu64 ", sample %" PRIu32 " (index %" PRIu64 "): %s",
            b->sequence, i, index, wrong);
    }
}

int verify_batch(struct verifier *v, const rf_batch *b)
{
    if (!batch_is_checkable(v, b))
        return 0;
    struct epoch_seen *rec = epoch_record(v, b->epoch);
    if (!rec) {
        fprintf(stderr,
                PROGRAM ": verify: no memory to track epoch %" PRIu64 "\n",
                b->epoch);
        return -ENOMEM;
    }
    rec->skipped += b->skipped;
    for (uint32_t i = 0; i < b->samples; i++)
        check_sample(v, b, i, rec);
    v->verified += b->samples;
    if (++rec->batches == v->batches_per_epoch)
        close_epoch(v, rec);
    return 0;
}

void verifier_finish(struct verifier *v)
{
    while (v->open_count > 0)
        close_epoch(v, &v->open[0]);
    if (v->epochs_opened < v->epochs) {
        const uint64_t never = v->epochs - v->epochs_opened;
        describe_failure(v, "%" PRIu64 " epoch%s never began", never,
                         never == 1 ? "" : "s");
        v->missing += never * v->rank_samples;
    }
}

uint64_t verifier_report(const struct verifier *v, bool counts)
{
    if (counts)
        printf("verified: %" PRIu64 " samples, %" PRIu64 " missing, %" PRIu64
               " duplicated, %" PRIu64 " corrupt\n",
               v->verified, v->missing, v->duplicated, v->corrupt);
    if (v->out_of_order > 0 || v->malformed > 0)
        fprintf(stderr,
                PROGRAM ": verify: %" PRIu64 " batches out of order, %" PRIu64
                        " malformed\n",
                v->out_of_order, v->malformed);
    return v->missing + v->duplicated + v->corrupt + v->out_of_order +
           v->malformed;
}

void verifier_counts(const struct verifier *v, struct verify_counts *out)
{
    *out = (struct verify_counts){
        .verified = v->verified,
        .missing = v->missing,
        .duplicated = v->duplicated,
        .corrupt = v->corrupt,
    };
}
