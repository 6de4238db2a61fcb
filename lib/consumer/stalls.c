/*
 * stalls.c - a caller left waiting: when one rf_loader_next() has waited
 * RF_PARAM_STALL_WARNING_MS for its batch, and again each time that wait
 * doubles, the caller is told which batch it waits for and what each
 * producer that owes batches is on (its sample and file, and how long
 * since it last delivered), the one filling the awaited batch first. A job
 * stuck on a hung read (a network file system, a dying disk) then says where,
 * instead of hanging in silence. Reports only: deadlines.c is what replaces a
 * stuck producer (and takes the time the whole job was frozen out of the wait).
 * Owns the loader's stall_* fields and report_after_ns: a wait is one batch's,
 * the time spent in next() calls until it comes (a call a signal cuts
 * short and the next make one wait; the caller's time between them is
 * not counted).
 */
#include "config.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "consumer/loader-internal.h"

/* Producers described one by one in a report; more are counted. */
#define DESCRIBED_PRODUCERS 4
/* The longest description of one producer: its sample's name and the
 * words around it */
#define PRODUCER_TEXT_MAX (RF__SAMPLE_NAME_MAX + 144)

/* "batch 12 of epoch 3" (in order), or "a batch" (any order). */
static void describe_awaited(const rf_loader *l, char *out, size_t len)
{
    if (!l->ordered) {
        rf__format(out, len, "a batch");
        return;
    }
    const uint64_t per_epoch = l->order.batches_per_epoch;
    rf__format(out, len, "batch %llu of epoch %llu",
               (unsigned long long)(l->next_deliver % per_epoch),
               (unsigned long long)(l->next_deliver / per_epoch));
}

/* The producer filling the awaited batch (in order: a slot it holds for
 * that batch), or UINT32_MAX: in any order, or not handed out yet. */
static uint32_t awaited_batch_producer(const rf_loader *l)
{
    if (!l->ordered)
        return UINT32_MAX;
    for (uint32_t s = 0; s < l->slots; s++)
        if (l->slot_info[s].where == SLOT_AT_PRODUCER &&
            l->slot_info[s].seq == l->next_deliver)
            return l->slot_info[s].producer;
    return UINT32_MAX;
}

/* Whether process pid is stopped (SIGSTOP, a debugger, job control):
 * the state letter after the ")" that ends the name in /proc/PID/stat,
 * T or t. Such a producer delivers nothing until it is continued, and
 * no read or decode is to blame; false where /proc cannot be read. */
static bool process_stopped(int pid)
{
    char path[48], text[256];
    rf__format(path, sizeof(path), "/proc/%d/stat", pid);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    const ssize_t n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n <= 0)
        return false;
    text[n] = '\0';
    const char *end = strrchr(text, ')'); /* the name may hold ")" */
    return end && end[1] == ' ' && (end[2] == 'T' || end[2] == 't');
}

/* "; producer 1 (pid 1234) is on sample 5 (a/b.jpg) and has delivered
 * nothing for 61 s" for producer p, appended at out + *used; "producer 1
 * (pid 1234), which is filling it, is on ..." when it fills the awaited
 * batch; "(pid 1234, stopped)" when the producer is stopped, counted in
 * *stopped. */
static void describe_producer(const rf_loader *l, uint32_t p, bool filling,
                              uint64_t now, char *out, size_t len, size_t *used,
                              uint32_t *stopped)
{
    const struct producer_info *prod = &l->producer_info[p];
    char on[RF__SAMPLE_NAME_MAX + 16] = "is between samples";
    uint64_t sample;
    if (rf__loader_current_sample(l, p, &sample)) {
        char who[RF__SAMPLE_NAME_MAX];
        rf__loader_describe_sample(l, sample, who, sizeof(who));
        rf__format(on, sizeof(on), "is on %s", who);
    }
    const double idle_s =
        now > prod->progress_ns ? (double)(now - prod->progress_ns) / 1e9 : 0;
    const bool is_stopped = process_stopped((int)prod->child.pid);
    *stopped += is_stopped;
    rf__format(out + *used, len - *used,
               "; producer %u (pid %d%s)%s %s and has delivered nothing for "
               "%.1f s",
               p, (int)prod->child.pid, is_stopped ? ", stopped" : "",
               filling ? ", which is filling it," : "", on, idle_s);
    *used += strlen(out + *used);
}

/* What the producers that owe batches are doing, for the report: the one
 * filling the awaited batch first (with 16 producers it could otherwise
 * be among those only counted), then as many descriptions as len holds
 * (up to DESCRIBED_PRODUCERS in all), whole, with 48 bytes always left
 * for the count of the rest. Returns how many of those described are
 * stopped. */
static uint32_t describe_producers(const rf_loader *l, uint64_t now, char *out,
                                   size_t len)
{
    size_t used = 0;
    uint32_t described = 0, more = 0, stopped = 0;
    out[0] = '\0';
    const uint32_t filling = awaited_batch_producer(l);
    if (filling != UINT32_MAX) {
        describe_producer(l, filling, true, now, out, len, &used, &stopped);
        described++;
    }
    for (uint32_t p = 0; p < l->producers; p++) {
        if (l->producer_info[p].orders == 0 || p == filling)
            continue;
        if (described == DESCRIBED_PRODUCERS ||
            len - used < PRODUCER_TEXT_MAX + 48) {
            more++;
            continue;
        }
        describe_producer(l, p, false, now, out, len, &used, &stopped);
        described++;
    }
    if (more > 0)
        rf__format(out + used, len - used, "; and %u more producer%s", more,
                   more == 1 ? "" : "s");
    return stopped;
}

void rf__loader_stall_begins(rf_loader *l)
{
    if (l->stall_ns == 0)
        return;                    /* never reported */
    if (l->report_after_ns == 0) { /* a new wait */
        l->stall_waited_ns = 0;
        l->report_after_ns = l->stall_ns;
    }
    if (l->stall_call_ns == 0)
        l->stall_call_ns = rf__now_ns();
}

void rf__loader_stall_pause(rf_loader *l)
{
    if (l->stall_call_ns == 0)
        return;
    l->stall_waited_ns += rf__now_ns() - l->stall_call_ns;
    l->stall_call_ns = 0;
}

void rf__loader_stall_over(rf_loader *l)
{
    l->report_after_ns = 0;
    l->stall_call_ns = 0;
}

/* Time waited for the awaited batch inside next(), this call included. */
static uint64_t waited_ns(const rf_loader *l, uint64_t now)
{
    return l->stall_waited_ns + (l->stall_call_ns != 0 && now > l->stall_call_ns
                                     ? now - l->stall_call_ns
                                     : 0);
}

/* The next report after a wait of `waited`: the first doubling past it,
 * so that a wait that jumped several (a freeze, a slow call) gives one
 * report, not a burst. */
static void next_report_after(rf_loader *l, uint64_t waited)
{
    while (l->report_after_ns <= waited && l->report_after_ns < UINT64_MAX / 2)
        l->report_after_ns *= 2;
    if (l->report_after_ns <= waited)
        l->report_after_ns = UINT64_MAX;
}

void rf__loader_report_stall(rf_loader *l)
{
    const uint64_t now = rf__now_ns(), waited = waited_ns(l, now);
    if (l->report_after_ns == 0 || waited < l->report_after_ns)
        return;
    next_report_after(l, waited);
    char awaited[64], producers[DESCRIBED_PRODUCERS * PRODUCER_TEXT_MAX + 48];
    describe_awaited(l, awaited, sizeof(awaited));
    /* A stopped producer is no hung read: say what holds it and what
     * lets it go on, where the words below would send the user to the
     * file system. */
    const char *stopped_note =
        describe_producers(l, now, producers, sizeof(producers)) > 0
            ? "A stopped producer (SIGSTOP, a debugger, job control) "
              "delivers nothing until it is sent SIGCONT. "
            : "";
    char remedy[160];
    if (l->timeout_ns == 0)
        rf__format(remedy, sizeof(remedy),
                   "RF_PARAM_BATCH_TIMEOUT_MS, when set, replaces a "
                   "producer that delivers nothing that long");
    else
        rf__format(remedy, sizeof(remedy),
                   "a producer that delivers nothing for %llu ms "
                   "(RF_PARAM_BATCH_TIMEOUT_MS) is replaced",
                   (unsigned long long)(l->timeout_ns / 1000000u));
    rf__loader_report(
        l,
        "the loop has waited %.1f s for %s%s. %sA read that hangs (a "
        "network file system) or a slow decode holds a batch up; %s "
        "(RF_PARAM_STALL_WARNING_MS sets when this is reported)",
        (double)waited / 1e9, awaited, producers, stopped_note, remedy);
}
