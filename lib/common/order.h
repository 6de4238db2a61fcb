/*
 * order.h - which sample goes where: batches per epoch, each rank's share
 * of an epoch, and the per-epoch shuffle (order.c says how it works in
 * O(1) memory). The consumer and every producer derive the same order
 * from the same parameters, so nothing about it travels between them.
 */
#ifndef RF_COMMON_ORDER_H
#define RF_COMMON_ORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Which sample goes where, as both the consumer and the producers derive
 * it from the parameters. */
struct rf__order {
    uint64_t seed;
    uint64_t samples;           /* N, the whole dataset */
    uint64_t per_rank;          /* samples this rank sees each epoch */
    uint64_t batches_per_epoch; /* for this rank */
    uint32_t batch_size, rank, world;
    bool shuffle, pad_shards;
};

/* Fills *o from resolved parameters (an array indexed by rf_param, rank
 * and world size already taken from the environment). Returns 0, or
 * -EINVAL with a reason in why when the configuration leaves a rank
 * without a batch. */
int rf__order_init(struct rf__order *o, const int64_t *params, char *why,
                   size_t why_len);

/* The dataset index at `position` (0 <= position < per_rank) of this
 * rank's part of epoch `epoch`. */
uint64_t rf__order_sample(const struct rf__order *o, uint64_t epoch,
                          uint64_t position);

/* Samples in batch `number` of an epoch (the last one may be short). */
uint32_t rf__order_batch_samples(const struct rf__order *o, uint64_t number);

/* Batches in one epoch of `samples`. */
uint64_t rf__batches_per_epoch(uint64_t samples, uint32_t batch_size,
                               bool drop_last);

/* The dataset index at `position` of epoch `epoch`: a keyed bijection of
 * [0, samples) when shuffling, the identity otherwise. O(1) memory. */
uint64_t rf__sample_at(uint64_t seed, uint64_t epoch, uint64_t position,
                       uint64_t samples, bool shuffle);

#endif /* RF_COMMON_ORDER_H */
