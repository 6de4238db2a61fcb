/*
 * ring.c - the SPSC handle ring and the bells readers sleep on.
 * See ring.h for the contract; atomics.h for the primitives.
 */
#include "config.h"

#include "channel/ring.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/assert.h"

size_t rf__ring_bytes(uint32_t entries)
{
    return sizeof(struct rf__ring) + (size_t)entries * sizeof(uint64_t);
}

/* A power of two, so that `& (entries - 1)` is the index; at least 2, so
 * that the ring holds a handle and a stop. */
static inline bool entries_valid(uint32_t entries)
{
    return entries >= 2 && (entries & (entries - 1)) == 0;
}

void rf__ring_init(struct rf__ring *ring, uint32_t entries)
{
    RF_ASSERT(entries_valid(entries));
    ring->entries = entries;
    ring->mask = entries - 1;
    rf__store_relaxed32(&ring->head, 0);
    rf__store_relaxed32(&ring->tail, 0);
}

int rf__ring_push(struct rf__ring *ring, uint32_t entries, uint64_t h)
{
    RF_ASSERT(entries_valid(entries)); /* the caller's own copy */
    const uint32_t tail = rf__load_relaxed32(&ring->tail);
    /* Pairs with the store_release of head in rf__ring_pop(): the reader
     * is done with the entry we are about to overwrite. */
    const uint32_t head = rf__load_acquire32(&ring->head);
    if (tail - head >= entries)
        return -EAGAIN;
    ring->slot[tail & (entries - 1)] = h;
    /* Pairs with the load_acquire of tail in rf__ring_pop(): the entry is
     * written before the reader can see the new tail. */
    rf__store_release32(&ring->tail, tail + 1);
    return 0;
}

int rf__ring_pop(struct rf__ring *ring, uint32_t entries, uint64_t *h)
{
    RF_ASSERT(entries_valid(entries)); /* the caller's own copy */
    const uint32_t head = rf__load_relaxed32(&ring->head);
    /* Pairs with the store_release of tail in rf__ring_push(). */
    const uint32_t tail = rf__load_acquire32(&ring->tail);
    if (tail == head)
        return 0;
    if (tail - head > entries)
        return -EBADMSG;
    *h = ring->slot[head & (entries - 1)];
    /* Pairs with the load_acquire of head in rf__ring_push(). */
    rf__store_release32(&ring->head, head + 1);
    return 1;
}

bool rf__ring_empty(const struct rf__ring *ring)
{
    return rf__load_acquire32(&ring->tail) == rf__load_relaxed32(&ring->head);
}

static long futex(_Atomic uint32_t *word, int op, uint32_t val,
                  const struct timespec *timeout)
{
    /* Not FUTEX_PRIVATE: the word is shared between processes. */
    return syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

void rf__bell_ring_futex(struct rf__bell *bell)
{
    /* The push's tail store must be visible before we read `sleeping`, and
     * the reader stores `sleeping` before it re-reads tail: with a full
     * fence on both sides at least one of us sees the other. */
    rf__fence_full();
    if (!rf__load_relaxed32(&bell->sleeping))
        return;
    atomic_fetch_add_explicit(&bell->seq, 1, memory_order_release);
    futex(&bell->seq, FUTEX_WAKE, 1, NULL); /* one reader per bell */
}

void rf__bell_ring_eventfd(struct rf__bell *bell, int eventfd)
{
    rf__fence_full(); /* as in rf__bell_ring_futex() */
    if (!rf__load_relaxed32(&bell->sleeping))
        return;
    const uint64_t one = 1;
    /* EAGAIN (counter saturated) still leaves it readable: ignore. */
    ssize_t n = write(eventfd, &one, sizeof(one));
    (void)n;
}

void rf__spin_step(void)
{
    sched_yield();
}

bool rf__spin_until(bool (*ready)(const void *arg), const void *arg,
                    uint64_t spin_ns)
{
    if (ready(arg))
        return true;
    if (spin_ns == 0)
        return false;
    const uint64_t deadline = rf__now_ns() + spin_ns;
    do {
        rf__spin_step();
        if (ready(arg))
            return true;
    } while (rf__now_ns() < deadline);
    return false;
}

static bool ring_has_handle(const void *ring)
{
    return !rf__ring_empty(ring);
}

int rf__ring_wait_futex(struct rf__ring *ring, struct rf__bell *bell,
                        uint64_t spin_ns, int timeout_ms)
{
    if (rf__spin_until(ring_has_handle, ring, spin_ns))
        return 1;
    const uint32_t seq = atomic_load_explicit(&bell->seq, memory_order_acquire);
    rf__store_relaxed32(&bell->sleeping, 1);
    rf__fence_full(); /* pairs with the fence in rf__bell_ring_futex() */
    int rc = 1;
    if (rf__ring_empty(ring)) {
        struct timespec ts = {timeout_ms / 1000,
                              (long)(timeout_ms % 1000) * 1000000};
        long r =
            futex(&bell->seq, FUTEX_WAIT, seq, timeout_ms < 0 ? NULL : &ts);
        if (r < 0 && errno == EINTR)
            rc = -EINTR;
        else
            rc = rf__ring_empty(ring) ? 0 : 1;
    }
    rf__store_relaxed32(&bell->sleeping, 0);
    return rc;
}
