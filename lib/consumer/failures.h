/*
 * failures.h - the consumer's record of samples that failed under the
 * skip policy: the first failure of each of the first samples kept in
 * full for rf_loader_sample_errors(), and all of them counted against
 * the limits that turn too many failures into a fatal error: distinct
 * samples over the run, failures per epoch. A bad file fails again in
 * every epoch; over a long run that must neither use up the run's limit
 * nor fill the list with repeats, so that a file that breaks on day 3
 * is still named.
 */
#ifndef RF_FAILURES_H
#define RF_FAILURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringfeed.h"

#define RF__FAILURES_KEPT 1024
#define RF__FAILURE_EPOCHS                                                     \
    4 /* epochs counted at once (any-order delivery                            \
         interleaves neighbouring epochs) */

struct rf__failures {
    rf_sample_error *kept; /* [RF__FAILURES_KEPT], allocated on first use */
    size_t kept_count;
    uint64_t total;    /* failures, a sample once per epoch it failed in */
    uint64_t distinct; /* samples that have failed */
    /* The indices of those samples: open addressing, index + 1 in use
     * (0 empty), at most half full. */
    uint64_t *seen;
    size_t seen_capacity;
    struct {
        uint64_t epoch, count;
    } by_epoch[RF__FAILURE_EPOCHS];
    uint64_t max_errors;                       /* 0: no count limit */
    uint64_t max_in_epoch;                     /* failures an epoch may have */
    uint64_t max_error_ppm, samples_per_epoch; /* what it comes from */
    /* The samples a whole epoch hands out (fewer than samples_per_epoch
     * when the last short batch is dropped): when all of them fail, the
     * epoch delivers nothing and the run ends, whatever the limits. */
    uint64_t batched_per_epoch;
    bool sharded; /* samples_per_epoch is this rank's share (world > 1) */
};

/* Sets the limits from RF_PARAM_MAX_ERRORS, RF_PARAM_MAX_ERROR_PPM, the
 * samples one epoch gives this rank and those of them its batches hold
 * (batched_per_epoch: all but a short last batch dropped). */
void rf__failures_init(struct rf__failures *f, const int64_t *params,
                       uint64_t samples_per_epoch, uint64_t batched_per_epoch);

/* Records one failure. Returns 1 when it is the sample's first (a sample
 * left out the first time, which the caller may report), 0 when it
 * failed before, or RF_E_CORRUPT_SAMPLE with why filled when a limit is
 * now exceeded or every sample of the epoch has now failed. */
int rf__failures_add(struct rf__failures *f, uint64_t epoch, uint64_t index,
                     const char *text, char *why, size_t why_len);

/* Copies the first failure of each of the first min(max, kept) samples
 * that failed; returns how many samples have failed. */
uint64_t rf__failures_copy(const struct rf__failures *f, rf_sample_error *out,
                           size_t max);

/* Copies from's record of failed samples into `to`: the list, the set of
 * samples that failed, and the counts of them (distinct, total), in place
 * of to's; not the limits nor the per-epoch counts (a run started again
 * at an epoch counts that epoch's share afresh). Returns 0, or -ENOMEM
 * with `to` unchanged. */
int rf__failures_carry(struct rf__failures *to,
                       const struct rf__failures *from);

void rf__failures_free(struct rf__failures *f);

#endif /* RF_FAILURES_H */
