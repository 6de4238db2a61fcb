/*
 * launch.c - the loader's producers as a set: the CPU each is pinned to,
 * the helper spawn mode starts, starting each one (again, after a death)
 * in its record, and stopping them all at close. How one process is
 * started, watched and reaped is spawn.c's.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>

#include "common/assert.h"
#include "common/clock.h"
#include "common/resources.h"
#include "consumer/loader-internal.h"

/* How long close() waits for producers to exit before it kills them. */
#define CLOSE_GRACE_MS 1000
/* How long open waits for its producers to follow it. */
#define FOLLOW_WAIT_MS 2000

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

/* How many producers of this process's open loaders are pinned to each
 * CPU. A loader takes the run of its slice's CPUs that the others use
 * least, so that two loaders alive at once (a training and a validation
 * set), each with fewer producers than the rank has CPUs, do not stack
 * on the same CPUs; a loader closed gives its CPUs back (a process-wide
 * offset that only grew came round onto a live loader's CPUs after a few
 * loaders were opened again). Atomics, not a lock: two threads opening
 * loaders at once may pick the same CPUs, which costs speed, never
 * correctness; and a child of fork() holds no lock its parent's threads
 * took. The child inherits the counts of its parent's loaders, and its
 * rf_loader_close() of them takes theirs back. */
static uint32_t pinned_on[RF__BUDGET_MAX_CPUS];

static uint32_t *pin_count(int cpu)
{
    RF_ASSERT(cpu >= 0 && cpu < RF__BUDGET_MAX_CPUS);
    return &pinned_on[cpu];
}

/* Where in the slice `producers` in a row share the fewest CPUs with
 * the producers already pinned; the first such. */
static uint32_t least_used_start(const struct rf__budget *b, uint32_t producers)
{
    const uint32_t n = (uint32_t)b->cpu_count;
    uint64_t best_load = UINT64_MAX;
    uint32_t best = 0;
    for (uint32_t first = 0; first < n && best_load > 0; first++) {
        uint64_t load = 0;
        for (uint32_t i = 0; i < producers; i++)
            load += __atomic_load_n(pin_count(b->cpus[(first + i) % n]),
                                    __ATOMIC_RELAXED);
        if (load < best_load) {
            best_load = load;
            best = first;
        }
    }
    return best;
}

/* Producer i on a CPU of its own of this rank's slice of the mask (see
 * cpu-budget.h), as far as there are CPUs, unless the budget says not to
 * pin (RF_PARAM_PIN_PRODUCERS 0 among the reasons). */
static void choose_cpus(rf_loader *l)
{
    const struct rf__budget *b = &l->budget;
    if (!b->pin || b->cpu_count <= 0)
        return; /* every cpu stays -1 */
    const uint32_t first = least_used_start(b, l->producers);
    for (uint32_t i = 0; i < l->producers; i++) {
        const int cpu = b->cpus[(first + i) % (uint32_t)b->cpu_count];
        l->producer_info[i].cpu = cpu;
        __atomic_fetch_add(pin_count(cpu), 1, __ATOMIC_RELAXED);
    }
}

void rf__loader_unpin_producers(rf_loader *l)
{
    for (uint32_t i = 0; i < l->producers; i++) {
        struct producer_info *prod = &l->producer_info[i];
        if (prod->cpu < 0)
            continue;
        __atomic_fetch_sub(pin_count(prod->cpu), 1, __ATOMIC_RELAXED);
        prod->cpu = -1;
    }
}

int rf__loader_start_producers(rf_loader *l)
{
    choose_cpus(l);
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

/* Producer i has attached (its pid in its record, written only after it
 * asked for PR_SET_PDEATHSIG), or exited: waits for it up to `deadline`,
 * a millisecond at a time on its pidfd. With `signals_end_it` (inside
 * next()), returns early with -EINTR when rf_loader_interrupt() was
 * called (next() then takes the interrupt) or a signal came; else 0. */
static int await_producer(rf_loader *l, uint32_t i, uint64_t deadline,
                          bool signals_end_it)
{
    const struct rf__producer_state *st = rf__segment_producer(&l->seg, i);
    struct pollfd exited = {.fd = l->producer_info[i].child.pidfd,
                            .events = POLLIN};
    while (rf__load_acquire32(&st->pid) == 0 && rf__now_ns() < deadline) {
        if (signals_end_it && rf__load_acquire32(&l->interrupt))
            return -EINTR;
        const int n = poll(&exited, 1, 1);
        if (n > 0)
            return 0; /* dead before it attached: next() says so */
        if (n < 0 && errno == EINTR && signals_end_it)
            return -EINTR;
    }
    return 0;
}

/* Until a producer has asked the kernel for a signal at the consumer's
 * death, nothing would wake it were it stopped while starting (a SIGSTOP
 * to the process group, a debugger) and the caller then killed: it would
 * stay, stopped, holding the ring, for good. So open returns only once
 * every producer got that far, or died, or FOLLOW_WAIT_MS passed (one
 * that slow is left to next()'s start checks). */
void rf__loader_await_producers(rf_loader *l)
{
    const uint64_t deadline = rf__now_ns() + FOLLOW_WAIT_MS * 1000000ull;
    /* a signal does not end it: a profiler's timer would, at every open */
    for (uint32_t i = 0; i < l->producers; i++)
        (void)await_producer(l, i, deadline, false);
}

void rf__loader_await_producer(rf_loader *l, uint32_t i)
{
    const uint64_t deadline = rf__now_ns() + FOLLOW_WAIT_MS * 1000000ull;
    if (await_producer(l, i, deadline, true) < 0 &&
        !rf__load_acquire32(&l->interrupt))
        l->signal_in_respawn = true; /* next() returns -EINTR for it */
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
