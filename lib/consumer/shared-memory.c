/*
 * shared-memory.c - the loader's two segments: the control and arena
 * memfds, every page reserved up front (too little memory is an error at
 * open, never a SIGBUS later), mapped, and formatted for the producers.
 * Owns the memfds and mappings it creates, until rf_loader_close().
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>

#include "common/cgroup.h" /* RF__CGROUP_WHERE_MAX */
#include "common/fds.h"
#include "common/resources.h"
#include "consumer/loader-internal.h"

/* How often a reservation interrupted by a signal is tried again as it
 * is, before the last try with signals blocked. */
#define RESERVE_TRIES 4

/* posix_fallocate() of the whole memfd. tmpfs gives up on a pending
 * signal and undoes what it had reserved, and glibc does not retry: under
 * a timer signal that comes more often than a large reservation takes (a
 * profiler's SIGPROF, setitimer), retrying alone could never end. So
 * after RESERVE_TRIES the last try runs with the catchable signals
 * blocked (this thread only); they are delivered when it ends. Returns 0
 * or an errno. */
static int reserve(int fd, uint64_t size)
{
    for (int i = 0; i < RESERVE_TRIES; i++) {
        const int err = posix_fallocate(fd, 0, (off_t)size);
        if (err != EINTR)
            return err;
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    const int err = posix_fallocate(fd, 0, (off_t)size);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return err;
}

static int make_memfd(rf_loader *l, const char *name, uint64_t size,
                      const char *purpose, int *fd)
{
    *fd = rf__fd_off_stdio(memfd_create(name, MFD_CLOEXEC));
    if (*fd < 0) {
        const int err = errno;
        return set_error(l, -err,
                         "cannot create the shared memory for %s: %s%s",
                         purpose, strerror(err),
                         err == EMFILE   ? "; this process has as many files "
                                           "open as its limit allows: raise it "
                                           "(ulimit -n) or close some files"
                         : err == ENFILE ? "; the system has as many files "
                                           "open as it allows: close some, or "
                                           "raise its limit (fs.file-max)"
                                         : "");
    }
    /* Reserve every page now, so that too little memory is an error here
     * and never a SIGBUS in the middle of a run. */
    const int err = reserve(*fd, size);
    if (err != 0)
        return set_error(l, err == ENOSPC ? -ENOMEM : -err,
                         "cannot reserve %llu bytes of shared memory for %s: "
                         "%s; use fewer slots (RF_PARAM_SLOTS), a smaller "
                         "batch (RF_PARAM_BATCH_SIZE) or sample size "
                         "(RF_PARAM_HEIGHT, RF_PARAM_WIDTH), or raise the "
                         "memory limit",
                         (unsigned long long)size, purpose, strerror(err));
    return 0;
}

static int map_segment(rf_loader *l, int fd, uint64_t size, void **out)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED)
        return set_error(l, -errno,
                         "cannot map %llu bytes: %s; fewer slots "
                         "(RF_PARAM_SLOTS) or smaller batches "
                         "(RF_PARAM_BATCH_SIZE) need less, or "
                         "raise the address-space limit (ulimit -v)",
                         (unsigned long long)size, strerror(errno));
    *out = p;
    return 0;
}

/* Memory the run takes beside the ring, once it is reserved: each
 * producer's own (its private pages of the libraries, page tables,
 * decoder and read buffers: 1 to 4 MB measured while decoding photographs
 * of up to 500x500 into 224x224 batches), and the consumer's tables and
 * the producers' start. A ring that left less would be reserved, and the
 * first producer to touch its pages would wake the OOM killer: in a
 * 200 MB cgroup, a ring 0.4 MB short of the room was killed at its first
 * batch. Larger images need more (RF_PARAM_MAX_DECODE_MEMORY bounds a
 * JPEG's); this covers what any run needs. */
#define ROOM_PER_PRODUCER (UINT64_C(8) << 20)
#define ROOM_FOR_THE_RUN (UINT64_C(8) << 20)

/* Refuses a ring that the machine or the cgroup cannot hold, with room
 * to spare for the producers, before reserving it can wake the OOM
 * killer. */
static int check_memory(rf_loader *l, const struct rf__layout *lay)
{
    char limit[RF__CGROUP_WHERE_MAX];
    const uint64_t room = rf__memory_room(limit, sizeof(limit));
    const uint64_t ring = lay->arena_size + lay->control_size;
    const uint64_t beside =
        ROOM_FOR_THE_RUN + ROOM_PER_PRODUCER * (uint64_t)l->producers;
    if (ring <= room && beside <= room - ring)
        return 0;
    /* the ring alone would fit, to the last bytes: the producers' and the
     * loader's own memory is what does not, and fewer producers need less */
    const bool snug = ring <= room;
    char own[128] = "", producers[64] = "";
    if (snug) {
        rf__format(own, sizeof(own),
                   ", and its %u producer%s and the loader about %llu MB more "
                   "of their own",
                   l->producers, l->producers == 1 ? "" : "s",
                   (unsigned long long)(beside >> 20));
        rf__format(producers, sizeof(producers),
                   ", fewer producers (RF_PARAM_PRODUCERS; %llu MB each)",
                   (unsigned long long)(ROOM_PER_PRODUCER >> 20));
    }
    return set_error(
        l, -ENOMEM,
        "the ring needs %llu bytes (%u slots of %llu bytes)%s, but %s allows "
        "only %llu more; use fewer slots (RF_PARAM_SLOTS), a smaller batch "
        "(RF_PARAM_BATCH_SIZE) or sample size (RF_PARAM_HEIGHT, "
        "RF_PARAM_WIDTH)%s, or raise the memory limit",
        (unsigned long long)ring, l->slots, (unsigned long long)lay->slot_bytes,
        own, limit, (unsigned long long)room, producers);
}

/* Why rf__layout_compute() refused: one slot over 2^40 bytes, or the
 * ring over RF__MAX_ARENA in all (slots that are each fine). */
static int say_ring_too_large(rf_loader *l)
{
    if (l->sample_bytes > RF__MAX_SLOT_BYTES / l->batch_size)
        return set_error(l, -EINVAL,
                         "a slot of %u samples of %llu bytes is over 2^40 "
                         "bytes; lower RF_PARAM_BATCH_SIZE or the sample "
                         "size (RF_PARAM_HEIGHT, RF_PARAM_WIDTH)",
                         l->batch_size, (unsigned long long)l->sample_bytes);
    return set_error(
        l, -EINVAL,
        "the ring's %u slots of %u samples of %llu bytes are "
        "over the %llu bytes a ring may have; use fewer slots "
        "(RF_PARAM_SLOTS) or a smaller batch (RF_PARAM_BATCH_SIZE)",
        l->slots, l->batch_size, (unsigned long long)l->sample_bytes,
        (unsigned long long)RF__MAX_ARENA);
}

int rf__loader_create_segments(rf_loader *l)
{
    struct rf__layout lay;
    if (rf__layout_compute(&lay, l->producers, l->slots, l->batch_size,
                           l->sample_bytes) < 0)
        return say_ring_too_large(l);
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
    l->ring_entries = lay.ring_entries;
    rf__segment_format(&l->seg, &lay, l->params, l->path);
    return 0;
}
