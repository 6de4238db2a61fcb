/*
 * delivery.c - batches on their way: orders to the least busy producer,
 * finished handles collected from the FULL rings (each checked against
 * slot_info before any slot memory is touched), and the ready batches
 * handed out in order or as they come, with their failed samples
 * accounted. Moves slots between the states of slot_info; touches the
 * rings and slots of the shared memory, never the producer processes.
 */
#include "config.h"

#include <string.h>

#include "common/assert.h"
#include "common/clock.h"
#include "consumer/loader-internal.h"

/*
 * Batches producer p still has to fill, counting the part of the current
 * one it has done: its orders, less the time since it last delivered (or
 * started owing) over its own mean time per batch. The mean comes from
 * its state record, which it writes; a garbage value there can only make
 * the choice below a worse guess, never a wrong order.
 */
static double work_left(rf_loader *l, uint32_t p, uint64_t now)
{
    const struct producer_info *prod = &l->producer_info[p];
    if (prod->orders == 0)
        return 0.0;
    const struct rf__producer_state *st = rf__segment_producer(&l->seg, p);
    const uint64_t batches = rf__load_relaxed64(&st->batches);
    const uint64_t busy_ns = rf__load_relaxed64(&st->busy_ns);
    if (batches == 0 || busy_ns == 0 || prod->progress_ns >= now)
        return (double)prod->orders;
    const double batch_ns = (double)busy_ns / (double)batches;
    const double since = (double)(now - prod->progress_ns);
    /* Below 1 even when the batch runs late, so that the order count
     * ranks first: an idle producer (0) always beats one with an order. */
    const double done = since < batch_ns ? since / batch_ns : 1.0;
    return (double)prod->orders - (done < 0.99 ? done : 0.99);
}

/* The producer that will run out of work first. Counting orders alone
 * ties whenever the producers keep pace; breaking the tie by how far each
 * is into its current batch matters at the end of an epoch, where the
 * last orders decide which producer finishes last while the other
 * idles. Among equals, the next in turn. */
static uint32_t least_busy_producer(rf_loader *l)
{
    const uint64_t now = rf__now_ns();
    uint32_t best = l->next_producer;
    double best_left = work_left(l, best, now);
    for (uint32_t k = 1; k < l->producers; k++) {
        const uint32_t p = (l->next_producer + k) % l->producers;
        const double left = work_left(l, p, now);
        if (left < best_left) {
            best = p;
            best_left = left;
        }
    }
    l->next_producer = (best + 1) % l->producers;
    return best;
}

/* Orders the least busy producer to fill `slot` with batch `seq`. */
/* Returns 0, or a fatal RF_E_BAD_HANDLE when the ring is full, which
 * only a writer into the shared memory can have caused. */
int rf__loader_give_order(rf_loader *l, uint32_t slot, uint64_t seq)
{
    RF_ASSERT(slot < l->slots);
    struct slot_info *s = &l->slot_info[slot];
    /* Free (at open, or taken back from a dead producer) or just released
     * by the caller: never one a producer or the caller still has. */
    RF_ASSERT(s->where == SLOT_FREE || s->where == SLOT_WITH_USER);
    const uint32_t p = least_busy_producer(l);
    RF_ASSERT(p < l->producers);
    s->where = SLOT_AT_PRODUCER;
    s->producer = p;
    s->seq = seq;
    /* Its deadline runs from now when it owed nothing before. */
    if (l->producer_info[p].orders++ == 0)
        rf__loader_restart_deadline(l, p);
    l->at_producers++;
    /* Cannot be full: a ring has room for every slot plus a stop. */
    if (rf__ring_push(rf__segment_empty_ring(&l->seg, p), l->ring_entries,
                      rf__handle_make(RF__HANDLE_BATCH, slot, seq)) < 0)
        return set_fatal(
            l, set_error(l, RF_E_BAD_HANDLE,
                         "the order ring of producer %u is full, which it "
                         "cannot be: something wrote into the loader's "
                         "shared memory",
                         p));
    rf__bell_ring_futex(&rf__segment_producer(&l->seg, p)->bell);
    return 0;
}

/* Gives `slot` the next batch number, or marks it free when every batch
 * has been issued. */
int rf__loader_issue_order(rf_loader *l, uint32_t slot)
{
    if (l->next_issue >= l->total_batches) {
        RF_ASSERT(slot < l->slots);
        RF_ASSERT(l->slot_info[slot].where == SLOT_FREE ||
                  l->slot_info[slot].where == SLOT_WITH_USER);
        l->slot_info[slot].where = SLOT_FREE;
        return 0;
    }
    return rf__loader_give_order(l, slot, l->next_issue++);
}

static void mark_ready(rf_loader *l, uint32_t slot)
{
    RF_ASSERT(l->slot_info[slot].where == SLOT_AT_PRODUCER);
    RF_ASSERT(l->ready_count < l->slots);
    l->slot_info[slot].where = SLOT_READY;
    if (l->ordered) {
        /* The batches not yet handed out span fewer than `slots` numbers,
         * so no two share a cell. */
        RF_ASSERT(l->ready[l->slot_info[slot].seq % l->slots] < 0);
        l->ready[l->slot_info[slot].seq % l->slots] = (int32_t)slot;
    } else {
        l->ready[(l->ready_head + l->ready_count) % l->slots] = (int32_t)slot;
    }
    l->ready_count++;
}

static int accept_handle(rf_loader *l, uint32_t p, uint64_t h)
{
    struct producer_info *prod = &l->producer_info[p];
    const uint32_t slot = rf__handle_slot(h);
    const struct slot_info *s = &l->slot_info[slot < l->slots ? slot : 0];
    if (rf__handle_kind(h) != RF__HANDLE_BATCH || slot >= l->slots ||
        s->where != SLOT_AT_PRODUCER || s->producer != p ||
        (s->seq & RF__SEQ_MASK) != rf__handle_seq(h))
        return set_error(l, RF_E_BAD_HANDLE,
                         "producer %u (pid %d) returned handle 0x%016llx, "
                         "which matches no batch it was given; the shared "
                         "rings were overwritten",
                         p, prod->child.pid, (unsigned long long)h);
    /* The counts agree with slot_info, which was just checked. */
    RF_ASSERT(prod->orders > 0 && l->at_producers > 0);
    prod->orders--;
    l->at_producers--;
    prod->has_delivered = true;
    /* Delivering restarts the deadline for what it still owes. */
    rf__loader_restart_deadline(l, p);
    mark_ready(l, slot);
    return 0;
}

int rf__loader_drain_full_ring(rf_loader *l, uint32_t p)
{
    RF_ASSERT(p < l->producers);
    struct rf__ring *ring = rf__segment_full_ring(&l->seg, p);
    uint64_t h;
    int rc;
    while ((rc = rf__ring_pop(ring, l->ring_entries, &h)) > 0) {
        rc = accept_handle(l, p, h);
        if (rc < 0)
            return rc;
    }
    if (rc < 0)
        return set_error(l, RF_E_BAD_HANDLE,
                         "the batch ring of producer %u is corrupted (head "
                         "and tail disagree)",
                         p);
    return 0;
}

int rf__loader_drain_full_rings(rf_loader *l)
{
    for (uint32_t p = 0; p < l->producers; p++) {
        const int rc = rf__loader_drain_full_ring(l, p);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Takes the next batch to hand out, if it is ready. */
bool rf__loader_take_ready(rf_loader *l, uint32_t *slot)
{
    if (l->ready_count == 0)
        return false;
    if (l->ordered) {
        int32_t *cell = &l->ready[l->next_deliver % l->slots];
        if (*cell < 0)
            return false;
        *slot = (uint32_t)*cell;
        *cell = -1;
        RF_ASSERT(*slot < l->slots);
        RF_ASSERT(l->slot_info[*slot].seq == l->next_deliver);
        l->next_deliver++;
    } else {
        *slot = (uint32_t)l->ready[l->ready_head];
        l->ready_head = (l->ready_head + 1) % l->slots;
    }
    RF_ASSERT(*slot < l->slots && l->slot_info[*slot].where == SLOT_READY);
    l->ready_count--;
    return true;
}

/* Samples left out that are said one by one; those after are counted and
 * listed only, so that a folder with many bad files does not flood the
 * log. */
#define SKIPS_SAID 10

/* Says the first time a sample is left out (RF_ON_ERROR_SKIP): a run
 * would otherwise only deliver shorter batches. */
static void report_skipped(rf_loader *l, const char *text)
{
    const uint64_t n = l->failures.distinct;
    if (l->quiet || n > SKIPS_SAID)
        return;
    rf__loader_report(l, "left out (RF_PARAM_ON_ERROR RF_ON_ERROR_SKIP): %s%s",
                      text,
                      n < SKIPS_SAID ? ""
                                     : "; the samples left out after this "
                                       "one are counted "
                                       "(rf_stats.failed_samples) and "
                                       "listed (rf_loader_sample_errors()), "
                                       "not said");
}

/* The failure of a sample beyond those whose reasons a slot keeps: its
 * file, named by the listing the loader kept (as the stall reports name
 * it), so that the reports and rf_loader_sample_errors() still say which
 * file to look at. */
static void reason_not_kept(const rf_loader *l, uint64_t index, uint64_t seq,
                            char *out, size_t len)
{
    char who[RF__SAMPLE_NAME_MAX]; /* as a producer's (failed-sample.c) */
    rf__loader_describe_sample(l, index, who, sizeof(who));
    rf__format(out, len,
               "%s: its reason was not kept (more than %d samples of batch "
               "%llu failed); rf_dataset_decode() of it says why",
               who, RF__SLOT_FAILURES, (unsigned long long)seq);
}

/* A slot's list of failed samples names one past the dataset. */
static int say_bad_failed_index(rf_loader *l, uint32_t slot, uint64_t index)
{
    return set_error(l, RF_E_BAD_HANDLE,
                     "slot %u lists failed sample %llu, but the dataset has "
                     "%lld samples; the shared memory was overwritten",
                     slot, (unsigned long long)index,
                     (long long)l->params[RF_PARAM_SAMPLES]);
}

/* Failed samples of a batch (`failed` of them, read once from the slot):
 * with the fail policy the first one is the error; with skip they are
 * counted against the limits. */
static int account_failures(rf_loader *l, uint32_t slot, uint64_t epoch,
                            uint32_t failed)
{
    const struct rf__slot_meta *m = rf__slot_meta(&l->seg, slot);
    /* failed indices run down from the end (see the producer) */
    const uint64_t *failed_index =
        rf__slot_indices(&l->seg, slot) + l->batch_size - 1;
    if (failed && !l->skip_errors) {
        /* read once, and checked: the slot is shared memory */
        const uint64_t index = __atomic_load_n(failed_index, __ATOMIC_RELAXED);
        if (index >= (uint64_t)l->params[RF_PARAM_SAMPLES])
            return say_bad_failed_index(l, slot, index);
        rf__loader_note_failed_sample(l, epoch, index, m->failures[0].text,
                                      sizeof(m->failures[0].text));
        /* from the copy: the slot's text read twice could differ */
        return set_error(l, RF_E_CORRUPT_SAMPLE,
                         "%s; set RF_PARAM_ON_ERROR to RF_ON_ERROR_SKIP to "
                         "leave failing samples out",
                         l->failed.text);
    }
    for (uint32_t i = 0; i < failed; i++) {
        const uint64_t index =
            __atomic_load_n(failed_index - i, __ATOMIC_RELAXED);
        if (index >= (uint64_t)l->params[RF_PARAM_SAMPLES])
            return say_bad_failed_index(l, slot, index);
        char text[sizeof(m->failures[0].text) + 1];
        /* The slot records the first RF__SLOT_FAILURES in full. */
        if (i < RF__SLOT_FAILURES)
            rf__format(text, sizeof(text), "%.*s", (int)sizeof(text) - 1,
                       m->failures[i].text);
        else
            reason_not_kept(l, index, l->slot_info[slot].seq, text,
                            sizeof(text));
        const int rc = rf__failures_add(&l->failures, epoch, index, text,
                                        l->error, sizeof(l->error));
        if (rc < 0) {
            rf__loader_note_failed_sample(l, epoch, index, text, sizeof(text));
            return rc;
        }
        if (rc == 1)
            report_skipped(l, text);
    }
    return 0;
}

int rf__loader_fill_view(rf_loader *l, uint32_t slot, rf_batch *b)
{
    RF_ASSERT(slot < l->slots);
    struct slot_info *s = &l->slot_info[slot];
    RF_ASSERT(s->where == SLOT_READY); /* only a ready batch is handed out */
    const struct rf__slot_meta *m = rf__slot_meta(&l->seg, slot);
    /* Each count is read once and checked: the slot is shared memory,
     * and a value read twice could differ the second time. */
    const uint64_t sequence = __atomic_load_n(&m->sequence, __ATOMIC_RELAXED);
    const uint32_t samples = __atomic_load_n(&m->samples, __ATOMIC_RELAXED);
    const uint32_t failed =
        __atomic_load_n(&m->failed_samples, __ATOMIC_RELAXED);
    if (sequence != s->seq || samples > l->batch_size ||
        failed > l->batch_size || (samples == 0 && failed == 0))
        return set_error(l, RF_E_BAD_HANDLE,
                         "slot %u claims batch %llu with %u samples; "
                         "expected batch %llu",
                         slot, (unsigned long long)sequence, samples,
                         (unsigned long long)s->seq);
    /* the epoch from the loader's own record, not the slot's */
    const uint64_t epoch = s->seq / l->order.batches_per_epoch;
    const int rc = account_failures(l, slot, epoch, failed);
    if (rc < 0)
        return rc;
    memset(b, 0, sizeof(*b));
    b->skipped = failed;
    b->data = rf__slot_data(&l->seg, slot);
    b->samples = samples;
    b->sample_bytes = l->sample_bytes;
    b->bytes = (size_t)(l->sample_bytes * samples);
    b->height = (uint32_t)l->params[RF_PARAM_HEIGHT];
    b->width = (uint32_t)l->params[RF_PARAM_WIDTH];
    b->channels = (uint32_t)l->params[RF_PARAM_CHANNELS];
    b->layout = (rf_layout)l->params[RF_PARAM_LAYOUT];
    b->slot = slot;
    b->labels = rf__slot_labels(&l->seg, slot);
    b->indices = rf__slot_indices(&l->seg, slot);
    b->sequence = s->seq;
    b->epoch = epoch;
    b->number = s->seq % l->order.batches_per_epoch;
    b->handle = rf__handle_make(RF__HANDLE_BATCH, slot, s->seq);
    s->where = SLOT_WITH_USER;
    l->delivered++;
    l->samples_out += samples;
    l->bytes_out += b->bytes;
    return 1;
}
