/*
 * deadlines.c - stuck producers: one that owes batches and has delivered
 * none for RF_PARAM_BATCH_TIMEOUT_MS is killed and handled as a death.
 * A job stopped and resumed is no producer's fault: a producer's SIGCONT
 * restarts its clock (deadline_note_resume()), and a wait in next() that
 * took longer than it asked for (the consumer was not running: a freeze
 * that sends no signal) does not count
 * (rf__loader_forgive_time_stopped()). Owns the deadline clocks of each
 * producer_info.
 */
#include "config.h"

#include <signal.h>

#include "common/assert.h"
#include "common/clock.h"
#include "consumer/loader-internal.h"

/* How far past its own timeout a wait may run before the excess is taken
 * for a freeze of the consumer: well above scheduling delays and a CPU
 * limit's throttling (cgroup periods are 100 ms by default), which must
 * not postpone a stuck producer's end; real freezes last seconds. */
#define WAIT_OVERRUN_SLACK_NS (1000 * 1000000ull)
/* A producer seen past its deadline is killed only if it still is this
 * much later: when a stopped job resumes, the consumer may look before
 * the producers have run their SIGCONT handlers (see deadline_start()). */
#define DEADLINE_CONFIRM_NS (200 * 1000000ull)

/* Producer p made progress (started, got its first order, delivered):
 * its deadline runs from now, with no mark or stamp left from before. */
void rf__loader_restart_deadline(rf_loader *l, uint32_t p)
{
    RF_ASSERT(p < l->producers);
    struct producer_info *prod = &l->producer_info[p];
    prod->progress_ns = rf__now_ns();
    prod->overdue_ns = 0;
    prod->resumed_ns = 0;
}

/* When a producer's deadline clock started: its last progress, or the
 * first SIGCONT it got after that (deadline_note_resume()). */
static uint64_t deadline_start(const struct producer_info *prod)
{
    return prod->resumed_ns > prod->progress_ns ? prod->resumed_ns
                                                : prod->progress_ns;
}

/* A job stopped and resumed (Ctrl-Z and fg, kill -STOP and -CONT of its
 * process group) was stopped with its producers, whatever the consumer
 * was doing then: the time stopped is no producer's fault. A producer's
 * SIGCONT handler stamps the resume in its shared state; the first stamp
 * after its last progress restarts its clock. Later ones do not, until
 * it delivers again: SIGCONTs that keep coming (a scheduler's time
 * slices, a stray kill -CONT) cannot keep a stuck producer alive. A stamp
 * later than the consumer's clock is garbage and ignored. */
static void deadline_note_resume(rf_loader *l, uint32_t p, uint64_t now)
{
    struct producer_info *prod = &l->producer_info[p];
    const uint64_t continued =
        rf__load_relaxed64(&rf__segment_producer(&l->seg, p)->continued_ns);
    if (continued > prod->progress_ns && continued <= now &&
        prod->resumed_ns <= prod->progress_ns)
        prod->resumed_ns = continued;
}

/* Whether a producer past its deadline has been so for
 * DEADLINE_CONFIRM_NS: the first time it is seen past, only noted. */
static bool overdue_confirmed(struct producer_info *prod, uint64_t now)
{
    if (prod->overdue_ns == 0) {
        prod->overdue_ns = now;
        return false;
    }
    return now - prod->overdue_ns >= DEADLINE_CONFIRM_NS;
}

/* Kills and handles every producer past its deadline. */
int rf__loader_collect_stuck(rf_loader *l)
{
    if (l->timeout_ns == 0)
        return 0;
    for (uint32_t p = 0; p < l->producers; p++) {
        struct producer_info *prod = &l->producer_info[p];
        /* The clock is read for each producer: handling one death stamps
         * the others' progress (re-issued orders) after any earlier now. */
        const uint64_t now = rf__now_ns();
        deadline_note_resume(l, p, now);
        const uint64_t since = deadline_start(prod);
        if (prod->orders == 0 || since >= now || now - since <= l->timeout_ns ||
            prod->child.pid <= 0) {
            prod->overdue_ns = 0;
            continue;
        }
        if (!overdue_confirmed(prod, now))
            continue;
        prod->overdue_ns = 0;
        const int pid = prod->child.pid;
        rf__child_kill(&prod->child, SIGKILL);
        char how[160], ignored[128];
        rf__child_reap(&prod->child, -1, ignored, sizeof(ignored));
        rf__format(how, sizeof(how),
                   "delivered nothing for %llu ms (RF_PARAM_BATCH_TIMEOUT_MS) "
                   "and was killed",
                   (unsigned long long)((now - since) / 1000000));
        const int rc = rf__loader_handle_death(l, p, pid, how, true);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Milliseconds until the nearest producer deadline, or -1 for none. */
int rf__loader_ms_to_deadline(const rf_loader *l, uint64_t now)
{
    if (l->timeout_ns == 0)
        return -1;
    uint64_t nearest = UINT64_MAX;
    for (uint32_t p = 0; p < l->producers; p++) {
        const struct producer_info *prod = &l->producer_info[p];
        if (prod->orders == 0)
            continue;
        const uint64_t due = prod->overdue_ns != 0
                                 ? prod->overdue_ns + DEADLINE_CONFIRM_NS
                                 : deadline_start(prod) + l->timeout_ns;
        const uint64_t left = due > now ? due - now : 0;
        if (left < nearest)
            nearest = left;
    }
    if (nearest == UINT64_MAX)
        return -1;
    /* Rounded up, so that waking finds the deadline passed. */
    const uint64_t ms = (nearest + 999999) / 1000000;
    return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* A wait that began at `started` and was allowed `allowed_ns` (its spin
 * and its poll() timeout) but took longer: the consumer was not running
 * for part of it, and its producers were stopped too. This covers what
 * the SIGCONT stamps of deadline_note_resume() cannot: a freeze that sends no
 * signal (the cgroup freezer, docker pause). When within the wait it
 * began is unknown, so none of the wait counts against the producers
 * that owe batches; only its excess would put them right at their
 * deadline as they resume. Each freeze postpones a stuck producer's end
 * by the wait it froze; a producer stopped alone is still caught, since
 * the consumer's waits then end on time. */
void rf__loader_forgive_time_stopped(rf_loader *l, uint64_t started,
                                     uint64_t allowed_ns)
{
    const uint64_t now = rf__now_ns();
    if (now - started <= allowed_ns + WAIT_OVERRUN_SLACK_NS)
        return;
    const uint64_t lost = now - started;
    /* nor against the wait stalls.c reports (the caller knows) */
    if (l->stall_call_ns != 0)
        l->stall_call_ns =
            l->stall_call_ns + lost < now ? l->stall_call_ns + lost : now;
    for (uint32_t p = 0; p < l->producers; p++) {
        struct producer_info *prod = &l->producer_info[p];
        if (prod->orders == 0)
            continue;
        prod->progress_ns =
            prod->progress_ns + lost < now ? prod->progress_ns + lost : now;
        prod->overdue_ns = 0;
    }
}
