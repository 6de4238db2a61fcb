/*
 * stalls.c - a caller left waiting: when one rf_loader_next() has waited
 * RF_PARAM_STALL_WARNING_MS for its batch, and again each time that wait
 * doubles, the caller is told which batch it waits for and what each
 * producer that owes batches is on (its sample and file, and how long
 * since it last delivered). A job stuck on a hung read (a network file
 * system, a dying disk) then says where, instead of hanging in silence.
 * Reports only: deadlines.c is what replaces a stuck producer (and takes
 * the time the whole job was frozen out of the wait). Owns the
 * loader's waiting_since_ns and report_after_ns: a wait is one batch's,
 * across the next() calls that a signal cuts short.
 */
#include "config.h"

#include <string.h>

#include "common/clock.h"
#include "consumer/loader-internal.h"

/* Producers described one by one in a report; more are counted. */
#define DESCRIBED_PRODUCERS 4

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

/* "; producer 1 (pid 1234) is on sample 5 (a/b.jpg) and has delivered
 * nothing for 61 s" for producer p, appended at out + *used. */
static void describe_producer(const rf_loader *l, uint32_t p, uint64_t now,
                              char *out, size_t len, size_t *used)
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
    if (*used + 1 < len)
        rf__format(out + *used, len - *used,
                   "; producer %u (pid %d) %s and has delivered nothing for "
                   "%.1f s",
                   p, (int)prod->child.pid, on, idle_s);
    *used += strlen(out + *used);
}

/* What the producers that owe batches are doing, for the report. */
static void describe_producers(const rf_loader *l, uint64_t now, char *out,
                               size_t len)
{
    size_t used = 0;
    uint32_t described = 0, more = 0;
    out[0] = '\0';
    for (uint32_t p = 0; p < l->producers; p++) {
        if (l->producer_info[p].orders == 0)
            continue;
        if (described == DESCRIBED_PRODUCERS) {
            more++;
            continue;
        }
        describe_producer(l, p, now, out, len, &used);
        described++;
    }
    if (more > 0 && used + 1 < len)
        rf__format(out + used, len - used, "; and %u more producer%s", more,
                   more == 1 ? "" : "s");
}

void rf__loader_stall_begins(rf_loader *l)
{
    if (l->waiting_since_ns != 0)
        return;
    l->waiting_since_ns = rf__now_ns();
    l->report_after_ns = l->stall_ns;
}

void rf__loader_stall_over(rf_loader *l)
{
    l->waiting_since_ns = 0;
}

void rf__loader_report_stall(rf_loader *l)
{
    const uint64_t now = rf__now_ns(), started = l->waiting_since_ns;
    if (l->report_after_ns == 0 || started == 0 ||
        now - started < l->report_after_ns)
        return;
    l->report_after_ns *= 2;
    char awaited[64], producers[RF__DETAIL / 2];
    describe_awaited(l, awaited, sizeof(awaited));
    describe_producers(l, now, producers, sizeof(producers));
    char remedy[160];
    if (l->timeout_ns == 0)
        rf__format(remedy, sizeof(remedy),
                   "set RF_PARAM_BATCH_TIMEOUT_MS to have a producer that "
                   "delivers nothing that long replaced");
    else
        rf__format(remedy, sizeof(remedy),
                   "a producer that delivers nothing for %llu ms "
                   "(RF_PARAM_BATCH_TIMEOUT_MS) is replaced",
                   (unsigned long long)(l->timeout_ns / 1000000u));
    rf__loader_report_always(
        l,
        "the loop has waited %.1f s for %s%s. A read that hangs (a network "
        "file system) or a slow decode holds a batch up; %s "
        "(RF_PARAM_STALL_WARNING_MS sets when this is reported)",
        (double)(now - started) / 1e9, awaited, producers, remedy);
}
