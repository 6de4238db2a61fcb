/*
 * failures.c - counting and keeping failed samples for the consumer; see
 * failures.h.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/mix64.h"
#include "common/text.h"
#include "consumer/failures.h"

void rf__failures_init(struct rf__failures *f, const int64_t *params,
                       uint64_t samples_per_epoch, uint64_t batched_per_epoch)
{
    memset(f, 0, sizeof(*f));
    f->max_errors = (uint64_t)params[RF_PARAM_MAX_ERRORS];
    f->max_error_ppm = (uint64_t)params[RF_PARAM_MAX_ERROR_PPM];
    f->samples_per_epoch = samples_per_epoch;
    f->batched_per_epoch = batched_per_epoch;
    f->sharded = params[RF_PARAM_WORLD_SIZE] > 1;
    f->max_in_epoch = samples_per_epoch * f->max_error_ppm / 1000000;
    for (int i = 0; i < RF__FAILURE_EPOCHS; i++)
        f->by_epoch[i].epoch = UINT64_MAX;
}

/* Adds index to the set of samples that failed; true when it is new.
 * When memory runs out it counts as new: the limit then errs on the
 * side of stopping. */
static bool first_failure_of(struct rf__failures *f, uint64_t index)
{
    if (2 * (f->distinct + 1) > f->seen_capacity) {
        const size_t capacity = f->seen_capacity ? 2 * f->seen_capacity : 64;
        uint64_t *seen = calloc(capacity, sizeof(*seen));
        if (!seen)
            return true;
        for (size_t i = 0; i < f->seen_capacity; i++) {
            if (!f->seen[i])
                continue;
            size_t at = rf__mix64(0, f->seen[i]) & (capacity - 1);
            while (seen[at])
                at = (at + 1) & (capacity - 1);
            seen[at] = f->seen[i];
        }
        free(f->seen);
        f->seen = seen;
        f->seen_capacity = capacity;
    }
    const uint64_t key = index + 1;
    size_t at = rf__mix64(0, key) & (f->seen_capacity - 1);
    for (; f->seen[at]; at = (at + 1) & (f->seen_capacity - 1))
        if (f->seen[at] == key)
            return false;
    f->seen[at] = key;
    return true;
}

static void keep(struct rf__failures *f, uint64_t epoch, uint64_t index,
                 const char *text)
{
    if (f->kept_count >= RF__FAILURES_KEPT)
        return;
    if (!f->kept) {
        f->kept = calloc(RF__FAILURES_KEPT, sizeof(*f->kept));
        if (!f->kept)
            return; /* only the listing suffers; counting goes on */
    }
    rf_sample_error *e = &f->kept[f->kept_count++];
    e->index = index;
    e->epoch = epoch;
    rf__format(e->message, sizeof(e->message), "%s", text);
}

/* The counter of `epoch`, taking over the oldest epoch's when it has none. */
static uint64_t *epoch_counter(struct rf__failures *f, uint64_t epoch)
{
    int oldest = 0;
    for (int i = 0; i < RF__FAILURE_EPOCHS; i++) {
        if (f->by_epoch[i].epoch == epoch)
            return &f->by_epoch[i].count;
        if (f->by_epoch[i].epoch == UINT64_MAX ||
            (f->by_epoch[oldest].epoch != UINT64_MAX &&
             f->by_epoch[i].epoch < f->by_epoch[oldest].epoch))
            oldest = i;
    }
    f->by_epoch[oldest].epoch = epoch;
    f->by_epoch[oldest].count = 0;
    return &f->by_epoch[oldest].count;
}

/* The least RF_PARAM_MAX_ERROR_PPM under which `failures` of `samples`
 * are allowed: failures / samples in parts per million, rounded up. */
static uint64_t ppm_allowing(uint64_t failures, uint64_t samples)
{
    if (samples == 0 || failures >= samples)
        return 1000000;
    /* the product fits below 2^44 failures; beyond (no real run), a
     * figure within a part per million or so does for a message */
    if (failures < (UINT64_C(1) << 44))
        return (failures * 1000000 + samples - 1) / samples;
    return failures / (samples / 1000000 + 1) + 1;
}

/* Why the run ends when `in_epoch` failures of `epoch` exceed its share:
 * how many the share allows (the ppm of the epoch's samples, rounded
 * down) and the share that would allow these. */
static void say_epoch_limit(const struct rf__failures *f, uint64_t epoch,
                            uint64_t in_epoch, const char *text, char *why,
                            size_t why_len)
{
    const char *plural = f->samples_per_epoch == 1 ? "" : "s";
    char of[96], allowed[64];
    if (f->sharded)
        rf__format(of, sizeof(of), "this rank's %llu sample%s of the epoch",
                   (unsigned long long)f->samples_per_epoch, plural);
    else
        rf__format(of, sizeof(of), "this epoch's %llu sample%s",
                   (unsigned long long)f->samples_per_epoch, plural);
    if (f->max_in_epoch == 0)
        rf__format(allowed, sizeof(allowed), "none");
    else
        rf__format(allowed, sizeof(allowed), "at most %llu failure%s",
                   (unsigned long long)f->max_in_epoch,
                   f->max_in_epoch == 1 ? "" : "s");
    rf__format(why, why_len,
               "%llu sample%s of epoch %llu %s failed, more than "
               "RF_PARAM_MAX_ERROR_PPM %llu allows (%s among %s): raise it "
               "to %llu for %s, or fix or remove the files; the last: %s",
               (unsigned long long)in_epoch, in_epoch == 1 ? "" : "s",
               (unsigned long long)epoch, in_epoch == 1 ? "has" : "have",
               (unsigned long long)f->max_error_ppm, allowed, of,
               (unsigned long long)ppm_allowing(in_epoch, f->samples_per_epoch),
               in_epoch == 1 ? "one failure" : "that many", text);
}

/* Why the run ends when every sample of `epoch` has failed: it would
 * hand out only empty batches, this epoch and (the same files) every
 * next one, and a training loop would go on for days taking steps on
 * nothing. No limit allows it, and raising one would not help: said
 * before the limits, whose words would advise it (a ppm limit passed at
 * the same failure, as with an epoch of one sample, said "raise it to
 * 1000000"). */
static void say_epoch_empty(const struct rf__failures *f, uint64_t epoch,
                            const char *text, char *why, size_t why_len)
{
    char all[64];
    if (f->batched_per_epoch == 1)
        rf__format(all, sizeof(all), "the only sample");
    else
        rf__format(all, sizeof(all), "all %llu samples",
                   (unsigned long long)f->batched_per_epoch);
    rf__format(why, why_len,
               "%s of epoch %llu%s failed, so the epoch has nothing to "
               "deliver: under RF_PARAM_ON_ERROR RF_ON_ERROR_SKIP that ends "
               "the run, whatever RF_PARAM_MAX_ERROR_PPM %llu allows; check "
               "the dataset (its path, its files: the failures are in "
               "rf_loader_sample_errors()) and fix or remove the files; the "
               "last: %s",
               all, (unsigned long long)epoch,
               f->sharded ? " (this rank's share)" : "",
               (unsigned long long)f->max_error_ppm, text);
}

int rf__failures_add(struct rf__failures *f, uint64_t epoch, uint64_t index,
                     const char *text, char *why, size_t why_len)
{
    const bool first = first_failure_of(f, index);
    if (first) {
        f->distinct++;
        keep(f, epoch, index, text);
    }
    f->total++;
    const uint64_t in_epoch = ++*epoch_counter(f, epoch);
    /* First: where every sample of the epoch failed no limit raised would
     * let the run go on (the limits' words would say to raise them) */
    if (f->batched_per_epoch && in_epoch >= f->batched_per_epoch) {
        say_epoch_empty(f, epoch, text, why, why_len);
        return RF_E_CORRUPT_SAMPLE;
    }
    if (f->max_errors && f->distinct > f->max_errors) {
        rf__format(why, why_len,
                   "%llu samples have failed, more than RF_PARAM_MAX_ERRORS "
                   "%llu allows: raise it, or fix or remove the files; the "
                   "last: %s",
                   (unsigned long long)f->distinct,
                   (unsigned long long)f->max_errors, text);
        return RF_E_CORRUPT_SAMPLE;
    }
    if (in_epoch > f->max_in_epoch) {
        say_epoch_limit(f, epoch, in_epoch, text, why, why_len);
        return RF_E_CORRUPT_SAMPLE;
    }
    return first ? 1 : 0;
}

uint64_t rf__failures_copy(const struct rf__failures *f, rf_sample_error *out,
                           size_t max)
{
    const size_t n = max < f->kept_count ? max : f->kept_count;
    if (n)
        memcpy(out, f->kept, n * sizeof(*out));
    return f->distinct;
}

int rf__failures_carry(struct rf__failures *to, const struct rf__failures *from)
{
    rf_sample_error *kept = NULL;
    uint64_t *seen = NULL;
    if (from->kept) { /* whole: keep() takes RF__FAILURES_KEPT as room */
        kept = malloc(RF__FAILURES_KEPT * sizeof(*kept));
        if (!kept)
            return -ENOMEM;
        memcpy(kept, from->kept, from->kept_count * sizeof(*kept));
    }
    if (from->seen) {
        seen = malloc(from->seen_capacity * sizeof(*seen));
        if (!seen) {
            free(kept);
            return -ENOMEM;
        }
        memcpy(seen, from->seen, from->seen_capacity * sizeof(*seen));
    }
    rf__failures_free(to);
    to->kept = kept;
    to->kept_count = from->kept_count;
    to->seen = seen;
    to->seen_capacity = from->seen_capacity;
    to->distinct = from->distinct;
    to->total = from->total;
    return 0;
}

void rf__failures_free(struct rf__failures *f)
{
    free(f->kept);
    f->kept = NULL;
    free(f->seen);
    f->seen = NULL;
}
