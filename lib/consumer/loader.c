/*
 * loader.c - the consumer's public API: rf_loader_open() (resolve.c's
 * configuration, shared-memory.c's segments, launch.c's producers, the
 * first orders), next() and release() (delivery.c's batches, wait.c's
 * waiting), close, and the read-only calls (arena, error, stats, sample
 * errors). Owns the loader object and its tables; refuses every call but
 * close in a child of fork(); puts off a close from the message handler
 * until next() returns and refuses the handler's next() and release()
 * (-EBUSY). Single-threaded by contract (see ringfeed.h).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/assert.h"
#include "common/clock.h"
#include "common/fds.h"
#include "common/process-token.h"
#include "common/resources.h"
#include "consumer/loader-internal.h"

static int allocate_tables(rf_loader *l)
{
    l->producer_info = calloc(l->producers, sizeof(*l->producer_info));
    l->owed = calloc(l->slots, sizeof(*l->owed));
    l->pfds = calloc(1 + (size_t)l->producers, sizeof(*l->pfds));
    l->slot_info = calloc(l->slots, sizeof(*l->slot_info));
    l->ready = malloc(l->slots * sizeof(*l->ready));
    if (!l->producer_info || !l->owed || !l->pfds || !l->slot_info || !l->ready)
        return set_error(l, -ENOMEM, "out of memory for loader tables");
    for (uint32_t i = 0; i < l->producers; i++) {
        l->producer_info[i].child.pidfd = -1;
        l->producer_info[i].cpu = -1; /* until launch.c pins it */
        l->pfds[1 + i].fd = -1;
    }
    for (uint32_t s = 0; s < l->slots; s++)
        l->ready[s] = -1;
    return 0;
}

/* The fds the run still has to open: control, arena, eventfd, the
 * helper, a pidfd per producer, and one for whatever the caller opens
 * next. Not the dataset's listing and data fds: resolve.c opened them
 * already, so rf__fds_free() counts them as taken. */
static uint64_t fds_needed(const rf_loader *l)
{
    return 6 + (uint64_t)l->producers;
}

/* Refuses to start when the fd limit leaves too few for the ring: better
 * than an EMFILE from whichever call happens to come last. */
static int check_fds(rf_loader *l)
{
    const uint64_t needed = fds_needed(l);
    uint64_t limit = 0;
    const int free_fds = rf__fds_free(&limit);
    if ((uint64_t)free_fds >= needed)
        return 0;
    return set_error(l, -EMFILE,
                     "the loader needs %llu file descriptors (%u producers) "
                     "but only %d are free under the limit of %llu; raise "
                     "it (ulimit -n, RLIMIT_NOFILE), close some files, or "
                     "start fewer producers (RF_PARAM_PRODUCERS)",
                     (unsigned long long)needed, l->producers, free_fds,
                     (unsigned long long)limit);
}

static int open_loader(rf_loader *l, const rf_config *cfg)
{
    int rc = rf__loader_resolve(l, cfg);
    if (rc == 0)
        rc = check_fds(l);
    if (rc == 0) {
        rf__loader_keep_described(l, fds_needed(l));
        rc = allocate_tables(l);
    }
    if (rc == 0)
        rc = rf__loader_create_segments(l);
    if (rc < 0)
        return rc;
    /* samples a run carried on from condemned stay left out */
    rf__breakers_publish(&l->breakers, rf__segment_broken(&l->seg));
    l->fds.bell = rf__fd_off_stdio(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (l->fds.bell < 0)
        return set_error(l, -errno,
                         "cannot create the loader's wake-up event (eventfd): "
                         "%s; raise the open-files limit (ulimit -n) or close "
                         "some files",
                         strerror(errno));
    l->pfds[0].fd = l->fds.bell;
    l->pfds[0].events = POLLIN;
    rc = rf__loader_start_producers(l);
    if (rc < 0)
        return rc;
    l->next_issue = l->next_deliver = l->first_batch;
    for (uint32_t s = 0; s < l->slots && rc == 0; s++)
        rc = rf__loader_issue_order(l, s);
    if (rc == 0)
        rf__loader_await_producers(l);
    return rc;
}

int rf_loader_open(rf_loader **out, const rf_config *cfg, char **errp)
{
    if (errp)
        *errp = NULL;
    if (out) /* on every error, a NULL cfg's included */
        *out = NULL;
    if (!out || !cfg)
        return -EINVAL;
    rf_loader *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->fds.control = l->fds.arena = l->fds.bell = l->fds.listing = -1;
    l->fds.data = -1;
    l->helper_fd = -1;
    l->fds.parent_control = -1;
    l->open_ns = rf__now_ns();
    l->owner = getpid();
    l->owner_token = rf__process_token();
    const int rc = open_loader(l, cfg);
    if (rc < 0) {
        if (errp)
            *errp = strdup(l->error[0] ? l->error : rf_strerror(rc));
        rf_loader_close(l);
        return rc;
    }
    *out = l;
    return 0;
}

/* Whether this is the process that opened the loader: a child of fork()
 * holds a copy of its parent's loader, whose rings and producers are the
 * parent's. Asked on every next() and release(): no system call. */
static bool owned_here(const rf_loader *l)
{
    return rf__process_token() == l->owner_token;
}

/* In a child of fork() the loader may only be closed, which frees the
 * child's copy. */
static int refuse_other_process(rf_loader *l, const char *call)
{
    if (owned_here(l))
        return 0;
    return set_error(l, RF_E_FORK_UNSAFE,
                     "%s: this loader belongs to process %d, and this is "
                     "process %d, a child of fork(): open a loader of its "
                     "own (rf_loader_close() frees the child's copy)",
                     call, (int)l->owner, (int)getpid());
}

/* The message handler runs inside rf_loader_next(): a call of its that
 * would change what that next() is doing (take a batch, give a slot back
 * to a producer) is refused, with nothing changed, so that the next() on
 * the stack goes on as if the handler had not called. `instead` says what
 * to do. (rf__loader_report() gives that next() its own detail back.) */
static int refuse_inside_next(rf_loader *l, const char *call,
                              const char *instead)
{
    if (l->calls == 0)
        return 0;
    return set_error(l, -EBUSY,
                     "%s called from the loader's own message handler: the "
                     "handler runs inside rf_loader_next(), which goes on "
                     "when it returns; %s",
                     call, instead);
}

/* Whether the message handler closed the loader during this call (a
 * producer replaced, a long wait reported): then next() stops at once,
 * and leave_call() frees the loader. */
static bool closed_by_handler(const rf_loader *l, int *rc)
{
    if (!l->close_pending)
        return false;
    *rc = -ECANCELED;
    return true;
}

/* The end of a call that may emit messages: a close the handler asked
 * for inside it happens now, at the outermost call on the stack, and
 * the call returns -ECANCELED with *batch cleared (its pointers went with
 * the loader). */
static int leave_call(rf_loader *l, int rc, rf_batch *batch)
{
    RF_ASSERT(l->calls > 0);
    if (--l->calls > 0 || !l->close_pending)
        return rc;
    rf_loader_close(l);
    memset(batch, 0, sizeof(*batch));
    return -ECANCELED;
}

static int next_batch(rf_loader *l, rf_batch *batch)
{
    if (l->fatal)
        return l->fatal;
    /* a signal in an earlier call's respawn is that call's, which found
     * a batch ready and gave it instead */
    l->signal_in_respawn = false;
    if (l->first_batch + l->delivered >= l->total_batches)
        return 0;
    const uint64_t start = rf__now_ns();
    int rc;
    for (;;) {
        rc = rf__loader_drain_full_rings(l);
        if (rc == 0)
            rc = rf__loader_check_producers(l);
        if (closed_by_handler(l, &rc))
            break;
        if (rc < 0) {
            set_fatal(l, rc);
            break;
        }
        uint32_t slot;
        if (rf__loader_take_ready(l, &slot)) {
            rf__loader_stall_over(l);
            rc = rf__loader_fill_view(l, slot, batch);
            if (rc < 0)
                set_fatal(l, rc);
            break;
        }
        if (l->at_producers == 0) {
            rc = set_error(l, RF_E_ALL_SLOTS_HELD,
                           "all %u slots are held by the caller; release a "
                           "batch before asking for the next one, or "
                           "configure more slots",
                           l->slots);
            break;
        }
        rc = rf__loader_take_interrupt(l); /* instead of waiting */
        if (rc < 0)
            break;
        rf__loader_stall_begins(l);
        rc = rf__loader_wait_for_batches(l);
        rf__loader_report_stall(l); /* also when a signal cut it short */
        if (closed_by_handler(l, &rc) || rc < 0)
            break;
    }
    if (rc != 1)
        rf__loader_stall_pause(l);
    l->wait_ns += rf__now_ns() - start;
    return rc;
}

int rf_loader_next(rf_loader *l, rf_batch *batch)
{
    if (!l)
        return -EINVAL;
    if (!batch) /* said, so that rf_loader_error() shows no older error */
        return set_error(l, -EINVAL,
                         "rf_loader_next: batch is NULL; pass where to write "
                         "the batch");
    int rc = refuse_other_process(l, "rf_loader_next");
    if (rc == 0)
        rc = refuse_inside_next(
            l, "rf_loader_next()",
            "let the handler return, and that call hands out the batch "
            "(rf_loader_interrupt() ends its wait with -EINTR instead, "
            "rf_loader_close() ends the run with -ECANCELED)");
    if (rc < 0)
        return rc;
    l->calls++;
    return leave_call(l, next_batch(l, batch), batch);
}

int rf_loader_interrupt(rf_loader *l)
{
    if (!l)
        return -EINVAL;
    if (!owned_here(l)) /* no set_error(): another thread may be in next() */
        return RF_E_FORK_UNSAFE;
    rf__store_release32(&l->interrupt, 1);
    /* Wakes a next() asleep in poll() on the bell (non-blocking: a
     * saturated counter is still readable, so EAGAIN changes nothing). */
    const uint64_t one = 1;
    const ssize_t n = write(l->fds.bell, &one, sizeof(one));
    (void)n;
    return 0;
}

int rf_loader_release(rf_loader *l, const rf_batch *batch)
{
    if (!l)
        return -EINVAL;
    if (!batch)
        return set_error(l, -EINVAL,
                         "rf_loader_release: batch is NULL; pass the batch "
                         "rf_loader_next() gave");
    int rc = refuse_other_process(l, "rf_loader_release");
    if (rc == 0)
        rc = refuse_inside_next(l, "rf_loader_release()",
                                "keep the batch, and release it once that "
                                "rf_loader_next() has returned");
    if (rc < 0)
        return rc;
    const uint32_t slot = rf__handle_slot(batch->handle);
    if (rf__handle_kind(batch->handle) != RF__HANDLE_BATCH ||
        slot >= l->slots || l->slot_info[slot].where != SLOT_WITH_USER ||
        (l->slot_info[slot].seq & RF__SEQ_MASK) !=
            rf__handle_seq(batch->handle) ||
        batch->data != rf__slot_data(&l->seg, slot)) /* another loader's */
        return set_error(l, -EINVAL,
                         "rf_loader_release: batch (handle 0x%016llx) is "
                         "not held by the caller; was it released twice?",
                         (unsigned long long)batch->handle);
    if (l->fatal) {
        l->slot_info[slot].where = SLOT_FREE;
        return 0;
    }
    /* a failure is sticky: next() reports it */
    (void)rf__loader_issue_order(l, slot);
    return 0;
}

void rf_loader_close(rf_loader *l)
{
    if (!l)
        return;
    if (l->calls > 0) { /* from the message handler: see leave_call() */
        l->close_pending = true;
        return;
    }
    /* In a child of fork() the producers and rings are the parent's: only
     * the child's copies of the pidfds go (close-on-exec, but a child
     * that does not exec would keep one per producer). */
    if (l->producer_info)
        rf__loader_unpin_producers(l);
    if (l->producer_info && owned_here(l))
        rf__loader_stop_producers(l);
    else if (l->producer_info)
        for (uint32_t i = 0; i < l->producers; i++)
            if (l->producer_info[i].child.pidfd >= 0)
                close(l->producer_info[i].child.pidfd);
    if (l->arena_kept)
        l->seg.arena = NULL; /* the caller's now: see rf_loader_keep_arena() */
    rf__segment_detach(&l->seg);
    if (l->fds.control >= 0)
        close(l->fds.control);
    if (l->fds.arena >= 0)
        close(l->fds.arena);
    if (l->fds.bell >= 0)
        close(l->fds.bell);
    if (l->fds.listing >= 0)
        close(l->fds.listing);
    if (l->fds.data >= 0)
        close(l->fds.data);
    if (l->helper_fd >= 0)
        close(l->helper_fd);
    rf__failures_free(&l->failures);
    rf_dataset_close(l->described);
    free(l->producer_info);
    free(l->owed);
    free(l->pfds);
    free(l->slot_info);
    free(l->ready);
    free(l);
}

int rf_loader_arena(const rf_loader *l, void **base, size_t *bytes)
{
    if (!l || !base || !bytes)
        return -EINVAL;
    if (!owned_here(l)) /* the parent's ring: not to be registered here */
        return RF_E_FORK_UNSAFE;
    *base = l->seg.arena;
    *bytes = (size_t)l->seg.arena_size;
    return 0;
}

int rf_loader_keep_arena(rf_loader *l)
{
    if (!l)
        return -EINVAL;
    if (!owned_here(l)) /* the child's copy is unmapped with the rest */
        return RF_E_FORK_UNSAFE;
    l->arena_kept = true;
    return 0;
}

const char *rf_loader_error(const rf_loader *l)
{
    return l ? l->error : "";
}

int rf_loader_cpu_budget(const rf_loader *l, char *out, size_t len)
{
    if (!l || !out || len == 0)
        return -EINVAL;
    rf__format(out, len, "%s", l->budget.why);
    return l->budget.producers;
}

int rf_loader_class_name(const rf_loader *l, uint32_t label, char *out,
                         size_t len)
{
    if (!l || !out || len == 0)
        return -EINVAL;
    out[0] = '\0';
    if (l->params[RF_PARAM_SOURCE] != RF_SOURCE_PATH)
        return -ENOTSUP;
    if (!l->described) /* not kept: too few fds were free at open */
        return -ENODATA;
    return rf_dataset_class_name(l->described, label, out, len);
}

int rf_loader_stats(const rf_loader *l, rf_stats *st)
{
    if (!l || !st)
        return -EINVAL;
    memset(st, 0, sizeof(*st));
    st->batches = l->delivered;
    st->samples = l->samples_out;
    st->bytes = l->bytes_out;
    st->wait_ns = l->wait_ns;
    st->elapsed_ns = rf__now_ns() - l->open_ns;
    st->failed_samples = l->failures.total;
    st->respawns = l->respawns;
    st->producers = l->producers;
    st->slots = l->slots;
    st->batches_per_epoch = l->order.batches_per_epoch;
    st->dataset_samples = l->order.samples;
    st->rank = l->order.rank;
    st->world_size = l->order.world;
    st->listing_digest = l->listing_digest;
    for (uint32_t s = 0; s < l->slots; s++) {
        switch (l->slot_info[s].where) {
        case SLOT_AT_PRODUCER:
            st->slots_at_producers++;
            break;
        case SLOT_READY:
            st->slots_ready++;
            break;
        case SLOT_WITH_USER:
            st->slots_with_user++;
            break;
        default:
            st->slots_free++;
            break;
        }
    }
    for (uint32_t p = 0; p < l->producers && p < 64; p++)
        st->producer_busy_ns[p] =
            rf__load_relaxed64(&rf__segment_producer(&l->seg, p)->busy_ns);
    return 0;
}

uint64_t rf_loader_sample_errors(const rf_loader *l, rf_sample_error *out,
                                 size_t max)
{
    if (!l)
        return 0;
    return rf__failures_copy(&l->failures, out, out ? max : 0);
}
