/*
 * launch.c - the loader's producers as a set: the CPU each is pinned to,
 * the helper spawn mode starts, starting each one (again, after a death)
 * in its record, and stopping them all at close. How one process is
 * started, watched and reaped is spawn.c's.
 */
#include "config.h"

#include <poll.h>
#include <signal.h>

#include "common/assert.h"
#include "common/clock.h"
#include "common/resources.h"
#include "consumer/loader-internal.h"

/* How long close() waits for producers to exit before it kills them. */
#define CLOSE_GRACE_MS 1000

/* Starts producer i (again, after a death) in its record. */
int rf__loader_start_producer(rf_loader *l, uint32_t i)
{
    RF_ASSERT(i < l->producers);
    struct producer_info *prod = &l->producer_info[i];
    /* Never over a live process: it would run on, unwatched. */
    RF_ASSERT(prod->child.pid <= 0);
    const bool fork_mode = l->params[RF_PARAM_START_MODE] == RF_START_FORK;
    /* Checked for every start: a replacement may come after the caller
     * started threads or loaded CUDA. */
    int rc = fork_mode ? rf__fork_is_safe(l->error, sizeof(l->error)) : 0;
    if (rc == 0)
        rc = fork_mode ? rf__fork_producer(&l->fds, i, prod->cpu, &prod->child,
                                           l->error, sizeof(l->error))
                       : rf__spawn_producer(l->producer_path, l->helper_fd,
                                            &l->fds, i, prod->cpu, &prod->child,
                                            l->error, sizeof(l->error));
    if (rc < 0)
        return rc;
    l->pfds[1 + i].fd = prod->child.pidfd;
    l->pfds[1 + i].events = POLLIN;
    rf__loader_restart_deadline(l, i);
    prod->has_delivered = false;
    return 0;
}

/* Where this process's next loader pins its first producer: each loader
 * takes the CPUs after the last one's, so that two loaders alive at once
 * (a training and a validation set), each with fewer producers than the
 * rank has CPUs, do not both start at the slice's first CPU. */
static uint32_t next_first_cpu;

int rf__loader_start_producers(rf_loader *l)
{
    /* Producer i on a CPU of its own of this rank's slice of the mask (see
     * cpu-budget.h), as far as there are CPUs, unless the budget says not
     * to pin (RF_PARAM_PIN_PRODUCERS 0 among the reasons). */
    const struct rf__budget *b = &l->budget;
    const bool pin = b->pin && b->cpu_count > 0;
    const uint32_t first =
        pin ? __atomic_fetch_add(&next_first_cpu, l->producers,
                                 __ATOMIC_RELAXED)
            : 0;
    for (uint32_t i = 0; i < l->producers; i++)
        l->producer_info[i].cpu =
            pin ? b->cpus[(first + i) % (uint32_t)b->cpu_count] : -1;
    int rc = 0;
    if (l->params[RF_PARAM_START_MODE] != RF_START_FORK)
        rc = rf__producer_path(l->producer_path, sizeof(l->producer_path),
                               l->error, sizeof(l->error));
    if (rc == 0 && l->params[RF_PARAM_START_MODE] != RF_START_FORK)
        l->helper_fd = rf__helper_open(l->producer_path);
    for (uint32_t i = 0; i < l->producers && rc == 0; i++)
        rc = rf__loader_start_producer(l, i);
    return rc;
}

void rf__loader_stop_producers(rf_loader *l)
{
    if (!l->seg.header)
        return;
    rf__store_release32(&l->seg.header->closing, 1);
    for (uint32_t i = 0; i < l->producers; i++) {
        if (l->producer_info[i].child.pid <= 0)
            continue;
        (void)rf__ring_push(rf__segment_empty_ring(&l->seg, i), l->ring_entries,
                            rf__handle_make(RF__HANDLE_STOP, 0, 0));
        rf__bell_ring_futex(&rf__segment_producer(&l->seg, i)->bell);
    }
    const uint64_t deadline = rf__now_ns() + CLOSE_GRACE_MS * 1000000ull;
    char how[128];
    for (uint32_t i = 0; i < l->producers; i++) {
        struct rf__child *child = &l->producer_info[i].child;
        const uint64_t now = rf__now_ns();
        const int left = now < deadline ? (int)((deadline - now) / 1000000) : 0;
        if (rf__child_reap(child, left, how, sizeof(how)))
            continue;
        rf__child_kill(child, SIGKILL);
        rf__child_reap(child, -1, how, sizeof(how));
    }
}
