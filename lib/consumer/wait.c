/*
 * wait.c - how next() waits for batches: it spins for RF_PARAM_SPIN_NS,
 * then sleeps in poll() on the eventfd the producers ring and on their
 * pidfds, at most until the nearest deadline or SLEEP_BACKSTOP_MS; and
 * between sleeps, while batches keep coming, it looks at the producers
 * every HEALTH_CHECK_MS. Sleeps on the consumer's bell and the poll
 * table that loader.c sets up and launch.c fills.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "consumer/loader-internal.h"

/* While next() finds batches ready it does not sleep in poll(), so it
 * looks at the producers' pidfds and deadlines this often instead. */
#define HEALTH_CHECK_MS 10
/* The longest next() sleeps without looking at the rings itself. A
 * producer rings the eventfd only when the consumer's bell says it sleeps,
 * and that word is in shared memory: one stray write of 0 there (a buggy
 * or dying producer) and no wake-up ever comes. The producers have the
 * same backstop for their own bells (PARENT_CHECK_MS in producer.c). */
#define SLEEP_BACKSTOP_MS 250

/* next() between sleeps: the pidfds and deadlines, every HEALTH_CHECK_MS. */
int rf__loader_check_producers(rf_loader *l)
{
    const uint64_t now = rf__now_ns();
    if (now < l->next_check_ns)
        return 0;
    l->next_check_ns = now + HEALTH_CHECK_MS * 1000000ull;
    if (poll(l->pfds + 1, l->producers, 0) > 0) {
        const int rc = rf__loader_collect_dead(l);
        if (rc < 0)
            return rc;
    }
    return rf__loader_collect_stuck(l);
}

static bool any_full_ring_ready(const void *loader)
{
    const rf_loader *l = loader;
    for (uint32_t p = 0; p < l->producers; p++)
        if (!rf__ring_empty(rf__segment_full_ring(&l->seg, p)))
            return true;
    return false;
}

/* Sleeps until a producer rings the eventfd, one of them exits, or a
 * deadline passes; then handles the dead and the stuck. `started` is when
 * the wait began, spin included. */
static int sleep_for_batches(rf_loader *l, uint64_t started)
{
    struct rf__bell *bell = rf__segment_consumer_bell(&l->seg);
    rf__store_relaxed32(&bell->sleeping, 1);
    rf__fence_full(); /* pairs with the fence in rf__bell_ring_eventfd() */
    int rc = 0;
    for (uint32_t i = 0; i <= l->producers; i++)
        l->pfds[i].revents = 0;
    int wait_ms = 0;
    if (!any_full_ring_ready(l)) {
        wait_ms = rf__loader_ms_to_deadline(l, rf__now_ns());
        if (wait_ms < 0 || wait_ms > SLEEP_BACKSTOP_MS)
            wait_ms = SLEEP_BACKSTOP_MS;
        const int n = poll(l->pfds, 1 + l->producers, wait_ms);
        if (n < 0)
            rc = errno == EINTR ? -EINTR : -errno;
    }
    rf__loader_forgive_time_stopped(
        l, started, l->spin_ns + (uint64_t)wait_ms * 1000000ull);
    rf__store_relaxed32(&bell->sleeping, 0);
    if (l->pfds[0].revents & POLLIN) {
        uint64_t count;
        ssize_t r = read(l->fds.bell, &count, sizeof(count));
        (void)r; /* EAGAIN: another wake already took it */
    }
    /* One interrupt ends one wait: a signal whose handler called
     * rf_loader_interrupt() ended this one, so the interrupt is taken
     * too (left, it ended the next call's wait at once) */
    if (rc == -EINTR)
        return rf__loader_take_interrupt(l) < 0
                   ? -EINTR
                   : set_error(l, rc, "interrupted by a signal while waiting");
    if (rc < 0)
        return set_fatal(l,
                         set_error(l, rc, "poll() failed: %s", strerror(-rc)));
    if (rc == 0)
        rc = rf__loader_drain_full_rings(l); /* before any deadline is judged */
    if (rc == 0)
        rc = rf__loader_collect_dead(l);
    if (rc == 0)
        rc = rf__loader_collect_stuck(l);
    return rc < 0 ? set_fatal(l, rc) : 0;
}

int rf__loader_take_interrupt(rf_loader *l)
{
    /* both at once: one interrupt ends one wait, whichever came */
    const bool in_respawn = l->signal_in_respawn;
    l->signal_in_respawn = false;
    if (!rf__take32(&l->interrupt)) {
        if (!in_respawn)
            return 0;
        return set_error(l, -EINTR,
                         "interrupted by a signal while a replacement "
                         "producer started");
    }
    return set_error(l, -EINTR, "interrupted by rf_loader_interrupt()");
}

int rf__loader_wait_for_batches(rf_loader *l)
{
    const uint64_t started = rf__now_ns();
    if (rf__spin_until(any_full_ring_ready, l, l->spin_ns)) {
        /* a freeze may end a spin too */
        rf__loader_forgive_time_stopped(l, started, l->spin_ns);
        return 0;
    }
    return sleep_for_batches(l, started);
}
