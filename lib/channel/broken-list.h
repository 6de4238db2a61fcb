/*
 * broken-list.h - the samples every producer must leave out, as a list in
 * the control segment (segment.h places it). The consumer writes it
 * (consumer/breakers.c condemns samples that crashed or hung producers);
 * each producer reads it before every sample. Shared memory, and so part
 * of the channel: producers depend on it, never on the consumer.
 */
#ifndef RF_CHANNEL_BROKEN_LIST_H
#define RF_CHANNEL_BROKEN_LIST_H

#include <stdbool.h>
#include <stdint.h>

/* Condemned samples the control segment can list. */
#define RF__BROKEN_MAX 64
/* Producers a sample crashed or hung before it is listed: the consumer
 * condemns it at this count, and a producer that leaves it out says so. */
#define RF__BREAKER_DEATHS 3

/* Written by the consumer only, read by every producer before each
 * sample. A producer that scribbles here can only make others leave out
 * samples it names; the consumer rewrites the list from its own copy
 * whenever it changes and before each replacement starts. */
struct rf__broken_list {
    _Atomic uint32_t count; /* entries valid, 0..RF__BROKEN_MAX */
    uint32_t reserved_;
    _Atomic uint64_t index[RF__BROKEN_MAX];
};

/* Producer: whether `shared` lists `sample`. One atomic load while
 * nothing is condemned: cheap enough for every sample. */
bool rf__broken_contains(const struct rf__broken_list *shared, uint64_t sample);

#endif /* RF_CHANNEL_BROKEN_LIST_H */
