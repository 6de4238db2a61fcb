/*
 * loader.c - the consumer: creates the segments, starts the producers,
 * issues orders, collects finished batches, hands them out in order and
 * takes them back. Owns both segments, the eventfd the producers ring and
 * the producer processes. Single-threaded by contract (see ringfeed.h).
 *
 * Every slot is always in exactly one place, recorded in slot_info:
 * FREE (nothing left to issue), AT_PRODUCER p (an order is in p's EMPTY
 * ring or being filled), READY (published, not yet handed out) or
 * WITH_USER (handed out, not yet released). Handles popped from a FULL ring
 * are checked against this record before any slot memory is touched.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dataset.h"
#include "decode.h"
#include "failures.h"
#include "internal.h"
#include "segment.h"

/* How long close() waits for producers to exit before it kills them. */
#define CLOSE_GRACE_MS 1000

enum slot_where { SLOT_FREE, SLOT_AT_PRODUCER, SLOT_READY, SLOT_WITH_USER };

struct slot_info {
    uint8_t where;     /* enum slot_where */
    uint32_t producer; /* valid when AT_PRODUCER */
    uint64_t seq;      /* the batch it holds or is being filled with */
};

struct rf_loader {
    int64_t params[RF__PARAMS];
    char path[RF__PATH_MAX];
    struct rf__segment seg;
    struct rf__producer_fds fds; /* control memfd, arena memfd, eventfd */
    uint32_t producers, slots, batch_size;
    uint64_t sample_bytes, spin_ns;
    bool ordered;

    struct rf__child *children;  /* [producers] */
    uint32_t *orders;            /* [producers] orders outstanding */
    uint32_t next_producer;      /* where the search for the least busy
                                    producer starts, for fairness */
    struct slot_info *slot_info; /* [slots] */
    struct pollfd *pfds;         /* [1 + producers]: eventfd, pidfds */

    struct rf__order order;
    uint64_t first_batch;   /* sequence number the run starts at */
    uint64_t total_batches; /* sequence number it ends at; without an
                               end, the 2^40 a handle can count */
    uint64_t next_issue;    /* sequence number of the next order */
    uint64_t next_deliver;  /* ordered: the batch to hand out next */
    uint64_t delivered;
    int32_t *ready; /* ordered: [seq % slots] -> slot or -1;
                       any order: FIFO of slots */
    uint32_t ready_head, ready_count;
    uint32_t at_producers; /* slots with state AT_PRODUCER */

    struct rf__failures failures; /* samples that failed */
    bool skip_errors;             /* RF_ON_ERROR_SKIP */
    int fatal; /* sticky error; the loader can only be closed */
    uint64_t open_ns, wait_ns, samples_out, bytes_out;
    char error[RF__DETAIL];
};

/* Keeps the detail of an error in the loader and evaluates to `code`. A
 * macro rather than a variadic function: the text is formatted by
 * rf__format() in one place. */
#define set_error(l, code, ...)                                                \
    (rf__format((l)->error, sizeof((l)->error), __VA_ARGS__), (code))

static int set_fatal(rf_loader *l, int code)
{
    l->fatal = code;
    return code;
}

/* ---- configuration -------------------------------------------------- */

static int resolve_counts(rf_loader *l)
{
    int cpus[1];
    const int ncpu = rf__affinity_cpus(cpus, 0);
    int64_t producers = l->params[RF_PARAM_PRODUCERS];
    if (producers == 0)
        producers = ncpu;
    int64_t slots = l->params[RF_PARAM_SLOTS];
    if (slots == 0)
        slots = producers * 3 < 4 ? 4 : producers * 3;
    if (slots > RF__MAX_SLOTS)
        return set_error(l, -EINVAL,
                         "slots = %lld is more than %u; set RF_PARAM_SLOTS",
                         (long long)slots, RF__MAX_SLOTS);
    l->producers = (uint32_t)producers;
    l->slots = (uint32_t)slots;
    l->params[RF_PARAM_PRODUCERS] = producers;
    l->params[RF_PARAM_SLOTS] = slots;
    return 0;
}

/* An environment variable as a non-negative int, or -1. */
static int64_t env_int(const char *name)
{
    const char *text = getenv(name);
    if (!text || !*text)
        return -1;
    char *end = NULL;
    errno = 0;
    const long long v = strtoll(text, &end, 10);
    return errno || *end || v < 0 || v > INT32_MAX ? -1 : v;
}

/* Rank and world size not set by the caller come from torchrun's or Open
 * MPI's environment, else a single process. */
static void resolve_rank(rf_loader *l)
{
    int64_t *p = l->params;
    if (p[RF_PARAM_RANK] < 0) {
        const int64_t torch = env_int("RANK");
        const int64_t mpi = env_int("OMPI_COMM_WORLD_RANK");
        p[RF_PARAM_RANK] = torch >= 0 ? torch : mpi >= 0 ? mpi : 0;
    }
    if (p[RF_PARAM_WORLD_SIZE] == 0) {
        const int64_t torch = env_int("WORLD_SIZE");
        const int64_t mpi = env_int("OMPI_COMM_WORLD_SIZE");
        p[RF_PARAM_WORLD_SIZE] = torch > 0 ? torch : mpi > 0 ? mpi : 1;
    }
}

/* The run covers sequence numbers [first_batch, total_batches). */
static int resolve_span(rf_loader *l)
{
    const int64_t *p = l->params;
    const uint64_t per_epoch = l->order.batches_per_epoch;
    const uint64_t epochs = (uint64_t)p[RF_PARAM_EPOCHS];
    const uint64_t start_epoch = (uint64_t)p[RF_PARAM_START_EPOCH];
    const uint64_t start_batch = (uint64_t)p[RF_PARAM_START_BATCH];
    if (start_batch >= per_epoch || (epochs && start_epoch >= epochs))
        return set_error(
            l, -EINVAL,
            "cannot resume at batch %llu of epoch %llu: an epoch "
            "has %llu batches and the run %llu epochs",
            (unsigned long long)start_batch, (unsigned long long)start_epoch,
            (unsigned long long)per_epoch, (unsigned long long)epochs);
    /* Sequence numbers travel in 40 bits of a handle. */
    if ((epochs && per_epoch > RF__SEQ_MASK / epochs) ||
        start_epoch > (RF__SEQ_MASK - start_batch) / per_epoch)
        return set_error(l, -EINVAL,
                         "%llu epochs of %llu batches is more than a handle "
                         "can count (2^40 batches); use fewer epochs or "
                         "larger batches",
                         (unsigned long long)(epochs ? epochs : start_epoch),
                         (unsigned long long)per_epoch);
    l->total_batches = epochs == 0 ? RF__SEQ_MASK : epochs * per_epoch;
    l->first_batch = start_epoch * per_epoch + start_batch;
    return 0;
}

/* Checks now what the producers would otherwise find out one sample at a
 * time: that the decoders accept this shape for this dataset. */
static int check_decoder(rf_loader *l, const rf_dataset *ds)
{
    const int64_t channels = l->params[RF_PARAM_CHANNELS];
    uint32_t raw_height = 0, raw_width = 0, raw_channels = 0;
    rf_layout raw_layout = RF_LAYOUT_NHWC;
    if (ds)
        rf__dataset_raw_shape(ds, &raw_height, &raw_width, &raw_channels,
                              &raw_layout);
    /* Only a pack of zstd samples (it has a raw shape) holds other than
     * JPEGs. */
    if (raw_height == 0 && channels != 1 && channels != 3)
        return set_error(l, -EINVAL,
                         "JPEG samples decode to 1 or 3 channels, not %lld; "
                         "set RF_PARAM_CHANNELS",
                         (long long)channels);
    struct rf__decoder *d = NULL;
    const int rc =
        rf__decoder_new(&d, l->params, ds, l->error, sizeof(l->error));
    rf__decoder_free(d);
    return rc;
}

/* RF_SOURCE_PATH: lists the dataset once (the producers map the listing),
 * takes its size and classes, and checks the decoders against it. */
static int open_dataset(rf_loader *l)
{
    rf_dataset *ds = NULL;
    char *why = NULL;
    int rc = l->params[RF_PARAM_INDEX_CACHE]
                 ? rf__dataset_open_cached(&ds, l->path, &why)
                 : rf_dataset_open(&ds, l->path, &why);
    if (rc < 0) {
        (void)set_error(l, rc, "cannot open dataset '%s': %s", l->path,
                        why ? why : rf_strerror(rc));
        free(why);
        return rc;
    }
    l->params[RF_PARAM_SAMPLES] = (int64_t)rf_dataset_size(ds);
    l->params[RF_PARAM_CLASSES] = rf_dataset_classes(ds);
    rc = l->params[RF_PARAM_SAMPLES] == 0
             ? set_error(l, -ENOENT,
                         "dataset '%s' has no samples; a folder needs class "
                         "folders holding .jpg files",
                         l->path)
             : check_decoder(l, ds);
    if (rc == 0)
        rc = rf__dataset_index_fd(ds, &l->fds.listing);
    rf_dataset_close(ds);
    return rc;
}

static int open_source(rf_loader *l)
{
    switch (l->params[RF_PARAM_SOURCE]) {
    case RF_SOURCE_PATH:
        return open_dataset(l);
    case RF_SOURCE_SYNTHETIC_JPEG:
        return check_decoder(l, NULL);
    default:
        return 0;
    }
}

static int resolve_config(rf_loader *l, const rf_config *cfg)
{
    memcpy(l->params, cfg->params, sizeof(l->params));
    memcpy(l->path, cfg->path, sizeof(l->path));
    int rc = open_source(l);
    if (rc == 0)
        rc = resolve_counts(l);
    if (rc < 0)
        return rc;
    resolve_rank(l);
    const int64_t *p = l->params;
    l->batch_size = (uint32_t)p[RF_PARAM_BATCH_SIZE];
    l->sample_bytes = (uint64_t)p[RF_PARAM_HEIGHT] *
                      (uint64_t)p[RF_PARAM_WIDTH] *
                      (uint64_t)p[RF_PARAM_CHANNELS];
    l->spin_ns = (uint64_t)p[RF_PARAM_SPIN_NS];
    l->ordered = p[RF_PARAM_ORDERED] != 0;
    rc = rf__order_init(&l->order, p, l->error, sizeof(l->error));
    if (rc < 0)
        return rc;
    l->skip_errors = p[RF_PARAM_ON_ERROR] == RF_ON_ERROR_SKIP;
    rf__failures_init(&l->failures, p, l->order.per_rank);
    return resolve_span(l);
}

/* ---- shared memory -------------------------------------------------- */

static int make_memfd(rf_loader *l, const char *name, uint64_t size,
                      const char *purpose, int *fd)
{
    *fd = memfd_create(name, MFD_CLOEXEC);
    if (*fd < 0)
        return set_error(l, -errno, "memfd_create(%s): %s; raise the fd limit",
                         name, strerror(errno));
    /* Reserve every page now, so that too little memory is an error here
     * and never a SIGBUS in the middle of a run. */
    int err;
    do /* tmpfs gives up on a pending signal; glibc does not retry */
        err = posix_fallocate(*fd, 0, (off_t)size);
    while (err == EINTR);
    if (err != 0)
        return set_error(l, err == ENOSPC ? -ENOMEM : -err,
                         "cannot reserve %llu bytes of shared memory for %s: "
                         "%s; use fewer slots, a smaller batch or sample "
                         "size, or raise the memory limit",
                         (unsigned long long)size, purpose, strerror(err));
    return 0;
}

static int map_segment(rf_loader *l, int fd, uint64_t size, void **out)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED)
        return set_error(l, -errno, "cannot map %llu bytes: %s",
                         (unsigned long long)size, strerror(errno));
    *out = p;
    return 0;
}

/* Refuses a ring that the machine or the cgroup cannot hold, before
 * reserving it can wake the OOM killer. */
static int check_memory(rf_loader *l, const struct rf__layout *lay)
{
    const char *limit = NULL;
    const uint64_t room = rf__memory_room(&limit);
    if (lay->arena_size + lay->control_size <= room)
        return 0;
    return set_error(
        l, -ENOMEM,
        "the ring needs %llu bytes (%u slots of %llu bytes) but %s allows "
        "only %llu more; use fewer slots, a smaller batch or sample size, "
        "or raise the memory limit",
        (unsigned long long)(lay->arena_size + lay->control_size), l->slots,
        (unsigned long long)lay->slot_bytes, limit, (unsigned long long)room);
}

static int create_segments(rf_loader *l)
{
    struct rf__layout lay;
    if (rf__layout_compute(&lay, l->producers, l->slots, l->batch_size,
                           l->sample_bytes) < 0)
        return set_error(l, -EINVAL,
                         "a slot of %u samples of %llu bytes is too large; "
                         "lower the batch size or sample shape",
                         l->batch_size, (unsigned long long)l->sample_bytes);
    int rc = check_memory(l, &lay);
    if (rc < 0)
        return rc;
    char purpose[128];
    rf__format(purpose, sizeof(purpose), "%u slots of %llu bytes", l->slots,
               (unsigned long long)lay.slot_bytes);
    void *control = NULL, *arena = NULL;
    rc = make_memfd(l, "ringfeed-control", lay.control_size,
                    "the control segment", &l->fds.control);
    if (rc == 0)
        rc = make_memfd(l, "ringfeed-arena", lay.arena_size, purpose,
                        &l->fds.arena);
    if (rc == 0)
        rc = map_segment(l, l->fds.control, lay.control_size, &control);
    if (rc < 0)
        return rc;
    l->seg.header = control;
    l->seg.control_size = lay.control_size;
    rc = map_segment(l, l->fds.arena, lay.arena_size, &arena);
    if (rc < 0)
        return rc;
    l->seg.arena = arena;
    l->seg.arena_size = lay.arena_size;
    rf__segment_format(&l->seg, &lay, l->params, l->path);
    return 0;
}

/* ---- producers ------------------------------------------------------ */

static int start_producers(rf_loader *l)
{
    int cpus[1024];
    const int ncpu = rf__affinity_cpus(cpus, 1024);
    const bool fork_mode = l->params[RF_PARAM_START_MODE] == RF_START_FORK;
    const bool pin = l->params[RF_PARAM_PIN_PRODUCERS] != 0;
    char path[4096];
    int rc = fork_mode ? rf__fork_is_safe(l->error, sizeof(l->error))
                       : rf__producer_path(path, sizeof(path), l->error,
                                           sizeof(l->error));
    for (uint32_t i = 0; i < l->producers && rc == 0; i++) {
        const int cpu =
            pin ? cpus[i % (uint32_t)(ncpu < 1024 ? ncpu : 1024)] : -1;
        rc = fork_mode
                 ? rf__fork_producer(&l->fds, i, cpu, &l->children[i], l->error,
                                     sizeof(l->error))
                 : rf__spawn_producer(path, &l->fds, i, cpu, &l->children[i],
                                      l->error, sizeof(l->error));
        l->pfds[1 + i].fd = l->children[i].pidfd;
        l->pfds[1 + i].events = POLLIN;
    }
    return rc;
}

static void stop_producers(rf_loader *l)
{
    if (!l->seg.header)
        return;
    for (uint32_t i = 0; i < l->producers; i++) {
        if (l->children[i].pid <= 0)
            continue;
        (void)rf__ring_push(rf__segment_empty_ring(&l->seg, i),
                            rf__handle_make(RF__HANDLE_STOP, 0, 0));
        rf__bell_ring_futex(&rf__segment_producer(&l->seg, i)->bell);
    }
    const uint64_t deadline = rf__now_ns() + CLOSE_GRACE_MS * 1000000ull;
    char how[128];
    for (uint32_t i = 0; i < l->producers; i++) {
        const uint64_t now = rf__now_ns();
        const int left = now < deadline ? (int)((deadline - now) / 1000000) : 0;
        if (rf__child_reap(&l->children[i], left, how, sizeof(how)))
            continue;
        kill(l->children[i].pid, SIGKILL);
        rf__child_reap(&l->children[i], -1, how, sizeof(how));
    }
}

/* ---- orders ----------------------------------------------------------- */

static uint32_t least_busy_producer(rf_loader *l)
{
    uint32_t best = l->next_producer;
    for (uint32_t k = 1; k < l->producers; k++) {
        const uint32_t p = (l->next_producer + k) % l->producers;
        if (l->orders[p] < l->orders[best])
            best = p;
    }
    l->next_producer = (best + 1) % l->producers;
    return best;
}

/* Gives `slot` to a producer with the next batch number, or marks it free
 * when every batch has been issued. */
static void issue_order(rf_loader *l, uint32_t slot)
{
    struct slot_info *s = &l->slot_info[slot];
    if (l->next_issue >= l->total_batches) {
        s->where = SLOT_FREE;
        return;
    }
    const uint32_t p = least_busy_producer(l);
    const uint64_t seq = l->next_issue++;
    s->where = SLOT_AT_PRODUCER;
    s->producer = p;
    s->seq = seq;
    l->orders[p]++;
    l->at_producers++;
    /* Cannot be full: a ring has room for every slot plus a stop. */
    (void)rf__ring_push(rf__segment_empty_ring(&l->seg, p),
                        rf__handle_make(RF__HANDLE_BATCH, slot, seq));
    rf__bell_ring_futex(&rf__segment_producer(&l->seg, p)->bell);
}

/* ---- collecting and handing out --------------------------------------- */

static void mark_ready(rf_loader *l, uint32_t slot)
{
    l->slot_info[slot].where = SLOT_READY;
    if (l->ordered) {
        l->ready[l->slot_info[slot].seq % l->slots] = (int32_t)slot;
    } else {
        l->ready[(l->ready_head + l->ready_count) % l->slots] = (int32_t)slot;
    }
    l->ready_count++;
}

static int accept_handle(rf_loader *l, uint32_t p, uint64_t h)
{
    const uint32_t slot = rf__handle_slot(h);
    const struct slot_info *s = &l->slot_info[slot < l->slots ? slot : 0];
    if (rf__handle_kind(h) != RF__HANDLE_BATCH || slot >= l->slots ||
        s->where != SLOT_AT_PRODUCER || s->producer != p ||
        (s->seq & RF__SEQ_MASK) != rf__handle_seq(h))
        return set_error(l, RF_E_BAD_HANDLE,
                         "producer %u (pid %d) returned handle 0x%016llx, "
                         "which matches no batch it was given; the shared "
                         "rings were overwritten",
                         p, l->children[p].pid, (unsigned long long)h);
    l->orders[p]--;
    l->at_producers--;
    mark_ready(l, slot);
    return 0;
}

static int drain_full_rings(rf_loader *l)
{
    for (uint32_t p = 0; p < l->producers; p++) {
        struct rf__ring *ring = rf__segment_full_ring(&l->seg, p);
        uint64_t h;
        int rc;
        while ((rc = rf__ring_pop(ring, &h)) > 0) {
            rc = accept_handle(l, p, h);
            if (rc < 0)
                return rc;
        }
        if (rc < 0)
            return set_error(l, RF_E_BAD_HANDLE,
                             "the batch ring of producer %u is corrupted "
                             "(head and tail disagree)",
                             p);
    }
    return 0;
}

/* Takes the next batch to hand out, if it is ready. */
static bool take_ready(rf_loader *l, uint32_t *slot)
{
    if (l->ready_count == 0)
        return false;
    if (l->ordered) {
        int32_t *cell = &l->ready[l->next_deliver % l->slots];
        if (*cell < 0)
            return false;
        *slot = (uint32_t)*cell;
        *cell = -1;
        l->next_deliver++;
    } else {
        *slot = (uint32_t)l->ready[l->ready_head];
        l->ready_head = (l->ready_head + 1) % l->slots;
    }
    l->ready_count--;
    return true;
}

/* Failed samples of a batch: with the fail policy the first one is the
 * error; with skip they are counted against the limits. */
static int account_failures(rf_loader *l, const struct rf__slot_meta *m)
{
    if (m->failed_samples && !l->skip_errors)
        return set_error(l, RF_E_CORRUPT_SAMPLE,
                         "%.*s; set RF_PARAM_ON_ERROR to RF_ON_ERROR_SKIP to "
                         "leave failing samples out",
                         (int)sizeof(m->failures[0].text), m->failures[0].text);
    for (uint32_t i = 0; i < m->failed_samples; i++) {
        /* The slot records the first RF__SLOT_FAILURES in full. */
        const struct rf__sample_failure *f =
            i < RF__SLOT_FAILURES ? &m->failures[i] : NULL;
        char text[sizeof(m->failures[0].text) + 1];
        rf__format(text, sizeof(text), "%.*s", (int)sizeof(text) - 1,
                   f ? f->text
                     : "(details not kept: too many failures in one batch)");
        const int rc =
            rf__failures_add(&l->failures, m->epoch, f ? f->index : 0, text,
                             l->error, sizeof(l->error));
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int fill_view(rf_loader *l, uint32_t slot, rf_batch *b)
{
    struct slot_info *s = &l->slot_info[slot];
    const struct rf__slot_meta *m = rf__slot_meta(&l->seg, slot);
    if (m->sequence != s->seq || m->samples > l->batch_size ||
        m->failed_samples > l->batch_size ||
        (m->samples == 0 && m->failed_samples == 0))
        return set_error(l, RF_E_BAD_HANDLE,
                         "slot %u claims batch %llu with %u samples; "
                         "expected batch %llu",
                         slot, (unsigned long long)m->sequence, m->samples,
                         (unsigned long long)s->seq);
    const int rc = account_failures(l, m);
    if (rc < 0)
        return rc;
    memset(b, 0, sizeof(*b));
    b->skipped = m->failed_samples;
    b->data = rf__slot_data(&l->seg, slot);
    b->samples = m->samples;
    b->sample_bytes = l->sample_bytes;
    b->bytes = (size_t)(l->sample_bytes * m->samples);
    b->height = (uint32_t)l->params[RF_PARAM_HEIGHT];
    b->width = (uint32_t)l->params[RF_PARAM_WIDTH];
    b->channels = (uint32_t)l->params[RF_PARAM_CHANNELS];
    b->layout = (rf_layout)l->params[RF_PARAM_LAYOUT];
    b->slot = slot;
    b->labels = rf__slot_labels(&l->seg, slot);
    b->indices = rf__slot_indices(&l->seg, slot);
    b->sequence = s->seq;
    b->epoch = s->seq / l->order.batches_per_epoch;
    b->number = s->seq % l->order.batches_per_epoch;
    b->handle = rf__handle_make(RF__HANDLE_BATCH, slot, s->seq);
    s->where = SLOT_WITH_USER;
    l->delivered++;
    l->samples_out += m->samples;
    l->bytes_out += b->bytes;
    return 1;
}

/* ---- waiting ------------------------------------------------------------ */

static bool any_full_ring_ready(const void *loader)
{
    const rf_loader *l = loader;
    for (uint32_t p = 0; p < l->producers; p++)
        if (!rf__ring_empty(rf__segment_full_ring(&l->seg, p)))
            return true;
    return false;
}

static int report_dead_producer(rf_loader *l, uint32_t p)
{
    struct rf__producer_state *st = rf__segment_producer(&l->seg, p);
    const int pid = l->children[p].pid;
    char how[128] = "ended";
    rf__child_reap(&l->children[p], 0, how, sizeof(how));
    if (rf__load_acquire32(&st->failed))
        return set_error(l, RF_E_PRODUCER_FAILED, "producer %u (pid %d): %.*s",
                         p, pid, (int)sizeof(st->error_text), st->error_text);
    const uint64_t seq = rf__load_relaxed64(&st->current_seq);
    if (seq != UINT64_MAX)
        return set_error(
            l, RF_E_PRODUCER_DIED,
            "producer %u (pid %d) %s while filling batch %llu "
            "(sample %llu)",
            p, pid, how, (unsigned long long)seq,
            (unsigned long long)rf__load_relaxed64(&st->current_sample));
    return set_error(l, RF_E_PRODUCER_DIED,
                     "producer %u (pid %d) %s while it owed %u batches", p, pid,
                     how, l->orders[p]);
}

/* Sleeps until a producer rings the eventfd or one of them exits. */
static int sleep_for_batches(rf_loader *l)
{
    struct rf__bell *bell = rf__segment_consumer_bell(&l->seg);
    rf__store_relaxed32(&bell->sleeping, 1);
    rf__fence_full(); /* pairs with the fence in rf__bell_ring_eventfd() */
    int rc = 0;
    if (!any_full_ring_ready(l)) {
        const int n = poll(l->pfds, 1 + l->producers, -1);
        if (n < 0)
            rc = errno == EINTR ? -EINTR : -errno;
    }
    rf__store_relaxed32(&bell->sleeping, 0);
    if (l->pfds[0].revents & POLLIN) {
        uint64_t count;
        ssize_t r = read(l->fds.bell, &count, sizeof(count));
        (void)r; /* EAGAIN: another wake already took it */
    }
    if (rc == -EINTR)
        return set_error(l, rc, "interrupted by a signal while waiting");
    for (uint32_t p = 0; p < l->producers; p++)
        if (l->pfds[1 + p].revents & (POLLIN | POLLHUP | POLLERR))
            return set_fatal(l, report_dead_producer(l, p));
    return rc;
}

static int wait_for_batches(rf_loader *l)
{
    if (rf__spin_until(any_full_ring_ready, l, l->spin_ns))
        return 0;
    return sleep_for_batches(l);
}

/* ---- public API --------------------------------------------------------- */

static int allocate_tables(rf_loader *l)
{
    l->children = calloc(l->producers, sizeof(*l->children));
    l->orders = calloc(l->producers, sizeof(*l->orders));
    l->pfds = calloc(1 + (size_t)l->producers, sizeof(*l->pfds));
    l->slot_info = calloc(l->slots, sizeof(*l->slot_info));
    l->ready = malloc(l->slots * sizeof(*l->ready));
    if (!l->children || !l->orders || !l->pfds || !l->slot_info || !l->ready)
        return set_error(l, -ENOMEM, "out of memory for loader tables");
    for (uint32_t i = 0; i < l->producers; i++)
        l->children[i].pidfd = -1;
    for (uint32_t s = 0; s < l->slots; s++)
        l->ready[s] = -1;
    return 0;
}

static int open_loader(rf_loader *l, const rf_config *cfg)
{
    int rc = resolve_config(l, cfg);
    if (rc == 0)
        rc = allocate_tables(l);
    if (rc == 0)
        rc = create_segments(l);
    if (rc < 0)
        return rc;
    l->fds.bell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (l->fds.bell < 0)
        return set_error(l, -errno, "eventfd: %s; raise the fd limit",
                         strerror(errno));
    l->pfds[0].fd = l->fds.bell;
    l->pfds[0].events = POLLIN;
    rc = start_producers(l);
    if (rc < 0)
        return rc;
    l->next_issue = l->next_deliver = l->first_batch;
    for (uint32_t s = 0; s < l->slots; s++)
        issue_order(l, s);
    return 0;
}

int rf_loader_open(rf_loader **out, const rf_config *cfg, char **errp)
{
    if (errp)
        *errp = NULL;
    if (!out || !cfg)
        return -EINVAL;
    *out = NULL;
    rf_loader *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->fds.control = l->fds.arena = l->fds.bell = l->fds.listing = -1;
    l->open_ns = rf__now_ns();
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

int rf_loader_next(rf_loader *l, rf_batch *batch)
{
    if (!l || !batch)
        return -EINVAL;
    if (l->fatal)
        return l->fatal;
    if (l->first_batch + l->delivered >= l->total_batches)
        return 0;
    const uint64_t start = rf__now_ns();
    int rc;
    for (;;) {
        rc = drain_full_rings(l);
        if (rc < 0) {
            set_fatal(l, rc);
            break;
        }
        uint32_t slot;
        if (take_ready(l, &slot)) {
            rc = fill_view(l, slot, batch);
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
        rc = wait_for_batches(l);
        if (rc < 0)
            break;
    }
    l->wait_ns += rf__now_ns() - start;
    return rc;
}

int rf_loader_release(rf_loader *l, const rf_batch *batch)
{
    if (!l || !batch)
        return -EINVAL;
    const uint32_t slot = rf__handle_slot(batch->handle);
    if (rf__handle_kind(batch->handle) != RF__HANDLE_BATCH ||
        slot >= l->slots || l->slot_info[slot].where != SLOT_WITH_USER ||
        (l->slot_info[slot].seq & RF__SEQ_MASK) !=
            rf__handle_seq(batch->handle))
        return set_error(l, -EINVAL,
                         "rf_loader_release: batch (handle 0x%016llx) is "
                         "not held by the caller; was it released twice?",
                         (unsigned long long)batch->handle);
    if (l->fatal) {
        l->slot_info[slot].where = SLOT_FREE;
        return 0;
    }
    issue_order(l, slot);
    return 0;
}

void rf_loader_close(rf_loader *l)
{
    if (!l)
        return;
    if (l->children)
        stop_producers(l);
    rf__segment_detach(&l->seg);
    if (l->fds.control >= 0)
        close(l->fds.control);
    if (l->fds.arena >= 0)
        close(l->fds.arena);
    if (l->fds.bell >= 0)
        close(l->fds.bell);
    if (l->fds.listing >= 0)
        close(l->fds.listing);
    rf__failures_free(&l->failures);
    free(l->children);
    free(l->orders);
    free(l->pfds);
    free(l->slot_info);
    free(l->ready);
    free(l);
}

int rf_loader_arena(const rf_loader *l, void **base, size_t *bytes)
{
    if (!l || !base || !bytes)
        return -EINVAL;
    *base = l->seg.arena;
    *bytes = (size_t)l->seg.arena_size;
    return 0;
}

const char *rf_loader_error(const rf_loader *l)
{
    return l ? l->error : "";
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
    st->producers = l->producers;
    st->slots = l->slots;
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
