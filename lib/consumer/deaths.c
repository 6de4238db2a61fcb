/*
 * deaths.c - producers that died (noticed through their pidfds, or killed
 * by deadlines.c): what they published is kept, the slots they still
 * owed are taken back, their rings are reset, and under the respawn
 * policy a new producer with the same index starts while the owed batch
 * numbers are issued again, within RF_PARAM_MAX_RESPAWNS per window.
 * Producers that cannot start at all end the run with advice about the
 * helper, not the data. Which sample a crash is charged to is blame.c's.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <sys/wait.h>

#include "common/assert.h"
#include "common/clock.h"
#include "consumer/loader-internal.h"

/* Producers that crashed or timed out before they took up work (before
 * attaching to the segment, or attached but before their first batch),
 * this many in a row, cannot start at all (a helper that cannot load its
 * libraries, another version's helper, one that aborts as it sets up):
 * respawning again would loop. */
#define MAX_FAILED_STARTS 3

/* The oldest batch producer p owes, or UINT64_MAX. */
static uint64_t oldest_owed(const rf_loader *l, uint32_t p)
{
    uint64_t oldest = UINT64_MAX;
    for (uint32_t s = 0; s < l->slots; s++)
        if (l->slot_info[s].where == SLOT_AT_PRODUCER &&
            l->slot_info[s].producer == p && l->slot_info[s].seq < oldest)
            oldest = l->slot_info[s].seq;
    return oldest;
}

/* "producer 1 (pid 42) was killed by signal 9 (Killed) while filling
 * batch 17 (sample 4242)", from what its state record says last. */
static void describe_death(const rf_loader *l, uint32_t p, int pid,
                           const char *how, char *out, size_t len)
{
    const struct rf__producer_state *st = rf__segment_producer(&l->seg, p);
    const uint64_t seq = rf__load_relaxed64(&st->current_seq);
    const uint64_t sample = rf__load_relaxed64(&st->current_sample);
    const uint64_t owed = oldest_owed(l, p);
    const uint32_t orders = l->producer_info[p].orders;
    if (rf__load_relaxed32(&st->pid) == 0)
        rf__format(out, len,
                   "producer %u (pid %d) %s at start, before it attached "
                   "to the loader's shared memory",
                   p, pid, how);
    else if (seq != UINT64_MAX && sample != UINT64_MAX)
        rf__format(out, len,
                   "producer %u (pid %d) %s while filling batch %llu "
                   "(sample %llu)",
                   p, pid, how, (unsigned long long)seq,
                   (unsigned long long)sample);
    else if (seq != UINT64_MAX)
        rf__format(out, len, "producer %u (pid %d) %s as it began batch %llu",
                   p, pid, how, (unsigned long long)seq);
    else if (owed != UINT64_MAX)
        rf__format(out, len,
                   "producer %u (pid %d) %s before it started batch %llu "
                   "(it owed %u batch%s)",
                   p, pid, how, (unsigned long long)owed, orders,
                   orders == 1 ? "" : "es");
    else
        rf__format(out, len, "producer %u (pid %d) %s while idle", p, pid, how);
}

/* Takes back every slot producer p still owed, oldest batch first, into
 * l->owed; returns how many. */
static uint32_t reclaim_slots(rf_loader *l, uint32_t p)
{
    RF_ASSERT(p < l->producers);
    uint32_t n = 0;
    for (uint32_t s = 0; s < l->slots; s++) {
        struct slot_info *info = &l->slot_info[s];
        if (info->where != SLOT_AT_PRODUCER || info->producer != p)
            continue;
        info->where = SLOT_FREE;
        /* Insertion sort: a producer owes a handful of slots. */
        uint32_t k = n++;
        while (k > 0 && l->slot_info[l->owed[k - 1]].seq > info->seq) {
            l->owed[k] = l->owed[k - 1];
            k--;
        }
        l->owed[k] = s;
    }
    /* The slots slot_info says p holds are exactly the orders it was
     * counted. */
    RF_ASSERT(n == l->producer_info[p].orders && n <= l->at_producers);
    l->at_producers -= n;
    l->producer_info[p].orders = 0;
    return n;
}

/* Empties producer p's rings and state record for its successor. Safe:
 * the old process is reaped, so nobody else touches them. */
static void reset_channel(rf_loader *l, uint32_t p)
{
    RF_ASSERT(p < l->producers && l->producer_info[p].child.pid <= 0);
    /* The successor attaches to the header, parameters and path: give
     * it the consumer's own copies, whatever was written there since. */
    rf__segment_restore(&l->seg, l->params, l->path);
    rf__ring_init(rf__segment_empty_ring(&l->seg, p), l->ring_entries);
    rf__ring_init(rf__segment_full_ring(&l->seg, p), l->ring_entries);
    struct rf__producer_state *st = rf__segment_producer(&l->seg, p);
    rf__store_relaxed32(&st->pid, 0);
    rf__store_relaxed32(&st->failed, 0);
    rf__store_relaxed64(&st->current_seq, UINT64_MAX);
    rf__store_relaxed64(&st->current_sample, UINT64_MAX);
    rf__store_relaxed64(&st->continued_ns, 0);
    rf__store_relaxed32(&st->bell.sleeping, 0);
    st->error_text[0] = '\0';
    rf__breakers_publish(&l->breakers, rf__segment_broken(&l->seg));
}

/* A crash is a signal other than SIGKILL (which comes from outside: the
 * OOM killer, a user) or an exit with a status but no reason given (a
 * sanitizer's report, a library's exit(), the dynamic loader's 127). */
static bool crashed_or_timed_out(int status, bool timed_out)
{
    const bool known = status != -1;
    return timed_out ||
           (known && WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL) ||
           (known && WIFEXITED(status) && WEXITSTATUS(status) != 0);
}

/* A crash or a time-out before the producer took up work: returns true
 * once too many came in a row. Any other death starts the count again. */
static bool producers_cannot_start(rf_loader *l, bool took_up_work,
                                   bool crashed)
{
    if (took_up_work || !crashed) {
        l->failed_starts = 0;
        return false;
    }
    return ++l->failed_starts >= MAX_FAILED_STARTS;
}

/* The error for a producer that died before it attached, the last of
 * `times` in a row: the helper is what to look at, not the data. */
static int fail_to_start(rf_loader *l, const char *what, uint32_t times,
                         bool attached)
{
    char advice[RF__DETAIL / 2];
    if (l->params[RF_PARAM_START_MODE] == RF_START_FORK)
        rf__format(advice, sizeof(advice), "see its message on stderr");
    else if (attached)
        /* It ran and attached: its libraries load and it speaks this
         * version's protocol. Something kills it as it sets up. */
        rf__format(advice, sizeof(advice),
                   "producers start but die before their first batch: see "
                   "the message of '%s' on stderr (a sanitizer's report, a "
                   "failed assertion) and what else signals them (a "
                   "sandbox, seccomp)",
                   l->producer_path);
    else
        rf__format(advice, sizeof(advice),
                   "the helper '%s' cannot run here: see its message on "
                   "stderr, check that '%s --help' runs (status 127 is a "
                   "missing shared library), or set RINGFEED_PRODUCER to "
                   "the ringfeed-producer of this version of the library",
                   l->producer_path, l->producer_path);
    if (times <= 1)
        return set_error(l, RF_E_PRODUCER_DIED, "%s; %s", what, advice);
    return set_error(l, RF_E_PRODUCER_DIED,
                     "%s; the last %u producers all ended this way, so %s",
                     what, times, advice);
}

/* "an hour", "3 hours", "10 minutes", "1 second": a window in words. */
static void describe_seconds(char *out, size_t len, uint64_t seconds)
{
    if (seconds == 3600) {
        rf__format(out, len, "an hour");
        return;
    }
    const char *unit = "second";
    uint64_t n = seconds;
    if (seconds % 3600 == 0) {
        unit = "hour";
        n = seconds / 3600;
    } else if (seconds % 60 == 0) {
        unit = "minute";
        n = seconds / 60;
    }
    rf__format(out, len, "%llu %s%s", (unsigned long long)n, unit,
               n == 1 ? "" : "s");
}

/* Whether this window's replacements have reached RF_PARAM_MAX_RESPAWNS;
 * a new window starts the count again. */
static bool respawns_used_up(rf_loader *l)
{
    const uint64_t now = rf__now_ns();
    if (now - l->window_start_ns >= l->window_ns) {
        l->window_start_ns = now;
        l->window_respawns = 0;
    }
    return l->window_respawns >= l->max_respawns;
}

/* The error that ends the run when no producer may be replaced: none at
 * all (RF_PARAM_MAX_RESPAWNS 0), or as many as the limit allows already
 * within the window. */
static int say_respawns_used_up(rf_loader *l, const char *what)
{
    if (l->max_respawns == 0)
        return set_error(l, RF_E_PRODUCER_DIED,
                         "%s; RF_PARAM_MAX_RESPAWNS 0 replaces none: raise "
                         "it for the run to go on, and look for what kills "
                         "producers (dmesg for the OOM killer)",
                         what);
    char window[64];
    const uint64_t window_s = l->window_ns / 1000000000u;
    describe_seconds(window, sizeof(window), window_s);
    return set_error(
        l, RF_E_PRODUCER_DIED,
        "%s; %llu producer%s been replaced within %s "
        "(RF_PARAM_RESPAWN_WINDOW_S %llu), the most "
        "RF_PARAM_MAX_RESPAWNS %llu allows (%llu in the run): look for "
        "what kills them (dmesg for the OOM killer), or raise the limit",
        what, (unsigned long long)l->window_respawns,
        l->window_respawns == 1 ? " has" : "s have", window,
        (unsigned long long)window_s, (unsigned long long)l->max_respawns,
        (unsigned long long)l->respawns);
}

/* Whether a failed start may succeed if tried again soon: fork() or
 * posix_spawn() found no room for another process (EAGAIN: RLIMIT_NPROC,
 * pids.max, the system's threads) or no memory for it (ENOMEM), which may
 * last only a moment; anything else (no helper, fork mode refused) stays. */
static bool start_may_succeed_later(int rc)
{
    return rc == -EAGAIN || rc == -ENOMEM;
}

/* Waits `ms` before the next try to start a replacement, a millisecond
 * at a time as rf__loader_await_producer() waits; returns false at once
 * when rf_loader_interrupt() was called or a signal came, which ends the
 * tries (next() is not held up for them): a signal is noted for next() to
 * return -EINTR, as a signal in that wait is. */
static bool back_off(rf_loader *l, uint32_t ms)
{
    const uint64_t until = rf__now_ns() + (uint64_t)ms * 1000000ull;
    while (rf__now_ns() < until) {
        if (rf__load_acquire32(&l->interrupt))
            return false;
        if (poll(NULL, 0, 1) < 0 && errno == EINTR) {
            l->signal_in_respawn = true;
            return false;
        }
    }
    return true;
}

/* Starts producer p again after a death. A start that may succeed later
 * (start_may_succeed_later()) is tried again after 10, 20, 40, ... ms,
 * START_TRIES in all, about 1.3 s: a week-long run is not ended by a
 * moment's shortage of processes. A signal or rf_loader_interrupt() ends
 * the tries early. Counts the tries into *tries. */
#define START_TRIES 8
static int start_replacement(rf_loader *l, uint32_t p, uint32_t *tries)
{
    uint32_t wait_ms = 10;
    int rc = rf__loader_start_producer(l, p);
    for (*tries = 1; rc < 0 && start_may_succeed_later(rc) &&
                     *tries < START_TRIES && back_off(l, wait_ms);
         ++*tries, wait_ms *= 2) {
        reset_channel(l, p); /* in case it got as far as attaching */
        rc = rf__loader_start_producer(l, p);
    }
    return rc;
}

/* Policy respawn: a new producer p, and its owed batches issued again. */
static int replace_producer(rf_loader *l, uint32_t p, const char *what)
{
    if (respawns_used_up(l)) /* none at all for RF_PARAM_MAX_RESPAWNS 0 */
        return say_respawns_used_up(l, what);
    const uint32_t owed = reclaim_slots(l, p);
    reset_channel(l, p);
    const uint64_t started = rf__now_ns();
    uint32_t tries = 0;
    int rc = start_replacement(l, p, &tries);
    if (rc < 0) {
        /* Report the death first; the failed start is the detail, whole:
         * what does not fit is elided from the middle (the helper's path),
         * keeping the advice at the end. */
        char why[RF__DETAIL], tried[96] = "";
        rf__format(why, sizeof(why), "%s", l->error);
        if (tries > 1)
            rf__format(tried, sizeof(tried), ", tried %u times over %llu ms%s",
                       tries,
                       (unsigned long long)((rf__now_ns() - started) / 1000000),
                       tries < START_TRIES ? " until interrupted" : "");
        char text[RF__DETAIL * 2];
        rf__format(text, sizeof(text),
                   "%s; no replacement could be started%s: %s", what, tried,
                   why);
        rf__copy_elided(l->error, sizeof(l->error), text);
        return RF_E_PRODUCER_DIED;
    }
    rf__loader_await_producer(l, p); /* as at open (launch.c) */
    l->respawns++;
    l->window_respawns++;
    for (uint32_t k = 0; k < owed && rc == 0; k++)
        rc = rf__loader_give_order(l, l->owed[k], l->slot_info[l->owed[k]].seq);
    if (rc < 0)
        return rc;
    if (!l->quiet)
        rf__loader_report(l, "%s; replaced by pid %d, %u batch%s issued again",
                          what, l->producer_info[p].child.pid, owed,
                          owed == 1 ? "" : "es");
    return 0;
}

/* Producer p has exited (reaped, `how` says how) or been killed for its
 * deadline. Keeps what it published, then replaces it or fails. */
int rf__loader_handle_death(rf_loader *l, uint32_t p, int pid, const char *how,
                            bool timed_out)
{
    RF_ASSERT(p < l->producers);
    const struct rf__producer_state *st = rf__segment_producer(&l->seg, p);
    const struct producer_info *prod = &l->producer_info[p];
    l->pfds[1 + p].fd = -1;
    if (rf__load_acquire32(&st->failed))
        return set_error(l, RF_E_PRODUCER_FAILED, "producer %u (pid %d): %.*s",
                         p, pid, (int)sizeof(st->error_text), st->error_text);
    int rc = rf__loader_drain_full_ring(l, p);
    if (rc < 0)
        return rc;
    char what[RF__DETAIL / 2];
    describe_death(l, p, pid, how, what, sizeof(what));
    const uint64_t seq = rf__load_relaxed64(&st->current_seq);
    const bool attached = rf__load_relaxed32(&st->pid) != 0;
    /* Took up work: delivered a batch, or died filling one (which
     * rf__loader_charge_death() judges). Attached and idle since is not enough:
     * a helper that aborts as it sets up would be replaced a thousand times
     * (RF_PARAM_MAX_RESPAWNS) and end in advice about the OOM killer. */
    const bool took_up_work =
        attached && (prod->has_delivered || seq != UINT64_MAX);
    const bool crashed = crashed_or_timed_out(prod->child.status, timed_out);
    /* A producer ends cleanly only at its stop order, which close() sends:
     * one that exits 0 before it took up work is not a producer of this
     * loader (RINGFEED_PRODUCER pointing at another program). */
    const bool failed_start =
        crashed || (!took_up_work && prod->child.status != -1 &&
                    WIFEXITED(prod->child.status));
    if (!l->respawn) {
        (void)reclaim_slots(l, p); /* the ring keeps its full count */
        if (!attached && failed_start)
            return fail_to_start(l, what, 1, false);
        return set_error(l, RF_E_PRODUCER_DIED,
                         "%s; set RF_PARAM_ON_PRODUCER_DEATH to "
                         "RF_ON_DEATH_RESPAWN to replace it",
                         what);
    }
    if (producers_cannot_start(l, took_up_work, failed_start))
        return fail_to_start(l, what, l->failed_starts, attached);
    rc = crashed ? rf__loader_charge_death(l, p, seq, what) : 0;
    if (rc < 0)
        return rc;
    return replace_producer(l, p, what);
}

/* Handles every producer whose pidfd says it has exited. */
int rf__loader_collect_dead(rf_loader *l)
{
    for (uint32_t p = 0; p < l->producers; p++) {
        if (!(l->pfds[1 + p].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        l->pfds[1 + p].revents = 0;
        struct rf__child *child = &l->producer_info[p].child;
        const int pid = child->pid;
        char how[128] = "ended";
        if (!rf__child_reap(child, 0, how, sizeof(how)))
            continue; /* not gone after all */
        const int rc = rf__loader_handle_death(l, p, pid, how, false);
        if (rc < 0)
            return rc;
    }
    return 0;
}
