/*
 * ring.h - a single-producer single-consumer ring of 64-bit handles that
 * lives in shared memory, and the bell a reader sleeps on.
 *
 * The ring owns nothing but its own bytes. One writer and one reader, each
 * possibly in another process; no locks, no system calls on push or pop.
 * Head and tail run freely (they wrap at 2^32) and are masked on use; the
 * ring is full when tail - head == entries.
 *
 * The ring lies in memory that the other process can write, so its size
 * is never read from there after set-up: both sides pass `entries` from
 * their own validated copy of the layout. A corrupted head or tail can
 * then make a pop fail (-EBADMSG) or return a wrong handle, which the
 * caller checks, but never reach outside the ring.
 *
 * A reader that finds the ring empty may sleep on a bell. The bell's
 * "sleeping" flag is the only thing a writer looks at after a push, so a
 * writer makes a system call only when a reader really sleeps.
 */
#ifndef RF_RING_H
#define RF_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "channel/atomics.h"
/* The clock the waits spin against; files that took rf__now_ns() from
 * this header still find it here. */
#include "common/clock.h"

struct rf__ring {
    /* Written by the reader only. */
    _Alignas(RF__CACHELINE) _Atomic uint32_t head;
    /* Written by the writer only. */
    _Alignas(RF__CACHELINE) _Atomic uint32_t tail;
    /* Fixed at init; for validation and debugging only (see above). */
    _Alignas(RF__CACHELINE) uint32_t entries;
    uint32_t mask;
    _Alignas(RF__CACHELINE) uint64_t slot[];
};

/* A place for one reader to sleep. `seq` is the futex word; `sleeping` says
 * whether the reader may be asleep (or about to be). */
struct rf__bell {
    _Alignas(RF__CACHELINE) _Atomic uint32_t sleeping;
    _Atomic uint32_t seq;
};

/* Bytes a ring of `entries` (a power of two) needs. */
size_t rf__ring_bytes(uint32_t entries);

/* Makes an empty ring. `entries` must be a power of two >= 2. */
void rf__ring_init(struct rf__ring *ring, uint32_t entries);

/* Writer: appends h to a ring of `entries` (the caller's own copy of the
 * size). Returns 0, or -EAGAIN when the ring is full. */
int rf__ring_push(struct rf__ring *ring, uint32_t entries, uint64_t h);

/* Reader: takes the oldest handle into *h. Returns 1, 0 when empty, or
 * -EBADMSG when head and tail are inconsistent (the memory was
 * overwritten). */
int rf__ring_pop(struct rf__ring *ring, uint32_t entries, uint64_t *h);

/* Reader: true when a pop would find nothing. */
bool rf__ring_empty(const struct rf__ring *ring);

/* Writer, after a push: wakes the reader sleeping on a futex bell. Costs a
 * fence and a load when nobody sleeps. */
void rf__bell_ring_futex(struct rf__bell *bell);

/* Writer, after a push: wakes the reader that polls `eventfd`. */
void rf__bell_ring_eventfd(struct rf__bell *bell, int eventfd);

/*
 * Reader: waits until `ring` is not empty, spinning for spin_ns first and
 * then sleeping on the futex bell for at most timeout_ms (< 0: forever).
 * Returns 1 when the ring has a handle, 0 when it is still empty (time-out,
 * or a wake-up meant for an earlier wait), -EINTR. Callers loop.
 */
int rf__ring_wait_futex(struct rf__ring *ring, struct rf__bell *bell,
                        uint64_t spin_ns, int timeout_ms);

/* One step of a spin-wait: sched_yield(). The producers plus the consumer
 * usually outnumber the CPUs, and a spinner that keeps its CPU delays the
 * very process it waits for; yielding hands the CPU to whoever is
 * runnable and costs one quick system call when nobody is. On 2 CPUs with
 * 2 producers this raised the transport ceiling from 53,000 to 960,000
 * batches/s against spinning on `pause`. */
void rf__spin_step(void);

/* Spins (rf__spin_step) until ready(arg) is true or spin_ns have passed.
 * Returns whether it became ready; checks once even when spin_ns is 0. */
bool rf__spin_until(bool (*ready)(const void *arg), const void *arg,
                    uint64_t spin_ns);

#endif /* RF_RING_H */
