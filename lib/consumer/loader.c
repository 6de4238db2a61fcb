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
 *
 * A producer that dies is noticed through its pidfd: at once while
 * next() sleeps in poll(), and within HEALTH_CHECK_MS while batches keep
 * coming. Its published batches are kept, the slots it still owed are
 * taken back, its rings are reset, and (policy respawn) a new producer
 * with the same index starts while the owed batch numbers are issued
 * again. A producer is stuck when it owes batches and has delivered none
 * for RF_PARAM_BATCH_TIMEOUT_MS: it is killed and handled the same way.
 * A job stopped and resumed is no producer's fault: a producer's SIGCONT
 * restarts its clock (deadline_note_resume()), and a wait in next() that
 * took longer than it asked for (the consumer was not running: a freeze
 * that sends no signal) does not count (forgive_time_stopped()).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "channel/segment.h"
#include "common/fds.h"
#include "common/internal.h"
#include "consumer/breakers.h"
#include "consumer/failures.h"
#include "decode/decode.h"
#include "source/dataset.h"

/* How long close() waits for producers to exit before it kills them. */
#define CLOSE_GRACE_MS 1000

/* While next() finds batches ready it does not sleep in poll(), so it
 * looks at the producers' pidfds and deadlines this often instead. */
#define HEALTH_CHECK_MS 10
/* How far past its own timeout a wait may run before the excess is taken
 * for a freeze of the consumer: well above scheduling delays and a CPU
 * limit's throttling (cgroup periods are 100 ms by default), which must
 * not postpone a stuck producer's end; real freezes last seconds. */
#define WAIT_OVERRUN_SLACK_NS (1000 * 1000000ull)
/* A producer seen past its deadline is killed only if it still is this
 * much later: when a stopped job resumes, the consumer may look before
 * the producers have run their SIGCONT handlers (see deadline_start()). */
#define DEADLINE_CONFIRM_NS (200 * 1000000ull)

/* The longest next() sleeps without looking at the rings itself. A
 * producer rings the eventfd only when the consumer's bell says it sleeps,
 * and that word is in shared memory: one stray write of 0 there (a buggy
 * or dying producer) and no wake-up ever comes. The producers have the
 * same backstop for their own bells (PARENT_CHECK_MS in producer.c). */
#define SLEEP_BACKSTOP_MS 250

/* Producers that crashed or timed out before they took up work (before
 * attaching to the segment, or attached but before their first batch),
 * this many in a row, cannot start at all (a helper that cannot load its
 * libraries, another version's helper, one that aborts as it sets up):
 * respawning again would loop. */
#define MAX_FAILED_STARTS 3

enum slot_where { SLOT_FREE, SLOT_AT_PRODUCER, SLOT_READY, SLOT_WITH_USER };

struct slot_info {
    uint8_t where;     /* enum slot_where */
    uint32_t producer; /* valid when AT_PRODUCER */
    uint64_t seq;      /* the batch it holds or is being filled with */
};

/* What the consumer knows of one producer: its process, where it runs,
 * what it owes and the clock its deadline runs on. Restarted (all but
 * cpu) whenever a replacement takes its index. */
struct producer_info {
    struct rf__child child;
    int cpu;              /* CPU to pin to, or -1 */
    uint32_t orders;      /* orders outstanding */
    bool has_delivered;   /* the current process has delivered a batch */
    uint64_t progress_ns; /* when it last delivered, or got its first order
                             after owing none */
    uint64_t overdue_ns;  /* when first seen past its deadline, or 0 */
    uint64_t resumed_ns;  /* the SIGCONT stamp taken for the current
                             deadline, or 0 */
};

struct rf_loader {
    int64_t params[RF__PARAMS];
    char path[RF__PATH_MAX];
    struct rf__segment seg;
    struct rf__producer_fds fds; /* control memfd, arena memfd, eventfd */
    uint32_t producers, slots, batch_size;
    uint64_t sample_bytes, spin_ns;
    bool ordered;

    struct producer_info *producer_info; /* [producers] */
    char producer_path[RF__PATH_MAX];    /* spawn mode: the helper */
    int helper_fd;                       /* spawn mode: it, open, or -1 */
    uint32_t ring_entries;       /* from the layout; never read back from shared
                                    memory, which producers can write */
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

    /* Messages (rf_config_set_message_handler()) */
    rf_message_fn message_fn;
    void *message_user;
    bool quiet;       /* RF_PARAM_QUIET */
    bool stderr_open; /* fd 2 was open at rf_loader_open() ... */
    dev_t stderr_dev; /* ... and was this file */
    ino_t stderr_ino;

    /* Producer deaths */
    bool respawn; /* RF_ON_DEATH_RESPAWN */
    /* RF_PARAM_MAX_RESPAWNS counts per window (RF_PARAM_RESPAWN_WINDOW_S,
     * an hour by default), not per run: an OOM killer that takes a
     * producer every ten minutes must not end a week-long run on its
     * seventh day, while a loop of replacements still ends in the hour. */
    uint64_t max_respawns;
    uint64_t window_ns;
    uint64_t window_start_ns;     /* the window max_respawns counts in */
    uint64_t window_respawns;     /* replacements in it */
    uint64_t timeout_ns;          /* RF_PARAM_BATCH_TIMEOUT_MS; 0 = none */
    uint64_t respawns;            /* producers replaced so far */
    struct rf__breakers breakers; /* crashes and time-outs per sample */
    uint32_t failed_starts;       /* crashes and time-outs in a row before
                                     taking up work (MAX_FAILED_STARTS) */
    uint64_t next_check_ns;       /* when next() looks at the producers again */
    uint32_t *owed; /* [slots] scratch: slots a dead producer held */

    struct rf__failures failures; /* samples that failed */
    bool skip_errors;             /* RF_ON_ERROR_SKIP */
    int fatal; /* sticky error; the loader can only be closed */
    uint64_t open_ns, wait_ns, samples_out, bytes_out;
    pid_t owner;          /* the process that opened the loader */
    uint64_t owner_token; /* its rf__process_token() */
    char error[RF__DETAIL];
};

/* Keeps the detail of an error in the loader and evaluates to `code`. A
 * macro rather than a variadic function: the text is formatted by
 * rf__format() in one place. */
#define set_error(l, code, ...)                                                \
    (rf__format((l)->error, sizeof((l)->error), __VA_ARGS__), (code))

/* Remembers what fd 2 is now: the default message handler writes there
 * only while it is still that file. */
static void note_stderr(rf_loader *l)
{
    struct stat st;
    l->stderr_open = fstat(STDERR_FILENO, &st) == 0;
    l->stderr_dev = l->stderr_open ? st.st_dev : 0;
    l->stderr_ino = l->stderr_open ? st.st_ino : 0;
}

/* Whether fd 2 is still the stderr the caller had at open, and not a
 * file the caller (or anyone) opened onto 2 since. */
static bool stderr_unchanged(const rf_loader *l)
{
    struct stat st;
    return l->stderr_open && fstat(STDERR_FILENO, &st) == 0 &&
           st.st_dev == l->stderr_dev && st.st_ino == l->stderr_ino;
}

/* Reports one event of the run to the caller's handler, else to the
 * caller's stderr as the default handler does (see
 * rf_config_set_message_handler()). */
__attribute__((format(printf, 2, 3))) static void report(rf_loader *l,
                                                         const char *fmt, ...)
{
    if (l->quiet)
        return;
    char text[RF__DETAIL + 16];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (l->message_fn) {
        l->message_fn(l->message_user, text);
    } else if (stderr_unchanged(l)) {
        char line[sizeof(text) + 16];
        const int n = snprintf(line, sizeof(line), "ringfeed: %s\n", text);
        /* One write, so that lines of several loaders do not interleave;
         * a failed one is no reason to disturb the run. */
        const ssize_t w =
            write(STDERR_FILENO, line,
                  n < (int)sizeof(line) ? (size_t)n : sizeof(line) - 1);
        (void)w;
    }
}

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

static bool env_is_set(const char *name)
{
    const char *text = getenv(name);
    return text && *text;
}

/* Environment variable `name` as a plain decimal in [min, INT32_MAX]
 * into *out, or `fallback` when it is unset or empty. Anything else
 * ("1x", "-1", " 1", 0 for a size) is an error: a rank that silently
 * became 0 would train on another rank's shard. */
static int env_number(rf_loader *l, const char *name, int64_t min,
                      int64_t fallback, int64_t *out)
{
    const char *text = getenv(name);
    if (!text || !*text) {
        *out = fallback;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    const long long v = strtoll(text, &end, 10);
    /* strtoll also takes leading blanks and signs */
    if (*text < '0' || *text > '9' || errno || *end || v < min || v > INT32_MAX)
        return set_error(l, -EINVAL,
                         "%s='%s' is not a number in %lld..%d; fix it, or "
                         "set RF_PARAM_RANK and RF_PARAM_WORLD_SIZE",
                         name, text, (long long)min, INT32_MAX);
    *out = v;
    return 0;
}

/* Rank and world size not set by the caller come from one launcher's
 * pair: torchrun's when it set either, else Open MPI's, else a single
 * process. Half a pair is an error when both come from it. */
static int resolve_rank(rf_loader *l)
{
    int64_t *p = l->params;
    const bool torch = env_is_set("RANK") || env_is_set("WORLD_SIZE");
    const char *rank = torch ? "RANK" : "OMPI_COMM_WORLD_RANK";
    const char *size = torch ? "WORLD_SIZE" : "OMPI_COMM_WORLD_SIZE";
    const bool has_rank = env_is_set(rank);
    if (p[RF_PARAM_RANK] < 0 && p[RF_PARAM_WORLD_SIZE] == 0 &&
        has_rank != env_is_set(size))
        return set_error(l, -EINVAL,
                         "%s is set but %s is not; set both, or set "
                         "RF_PARAM_RANK and RF_PARAM_WORLD_SIZE",
                         has_rank ? rank : size, has_rank ? size : rank);
    int rc = 0;
    if (p[RF_PARAM_RANK] < 0)
        rc = env_number(l, rank, 0, 0, &p[RF_PARAM_RANK]);
    if (rc == 0 && p[RF_PARAM_WORLD_SIZE] == 0)
        rc = env_number(l, size, 1, 1, &p[RF_PARAM_WORLD_SIZE]);
    return rc;
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
            "has %llu batches and the run %llu epochs; set "
            "RF_PARAM_START_BATCH and START_EPOCH inside them (the "
            "checkpoint's batch size and dataset must be this run's)",
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
                         "dataset '%s' has no samples; pass a folder of "
                         "class folders holding .jpg files, or a packed "
                         "file written from one",
                         l->path)
             : check_decoder(l, ds);
    if (rc == 0)
        rc = rf__dataset_index_fd(ds, &l->fds.listing);
    if (rc == 0) {
        l->fds.data = rf__dataset_data_fd(ds);
        if (l->fds.data < 0)
            rc = set_error(l, l->fds.data,
                           "cannot keep dataset '%s' open for producers: %s",
                           l->path, strerror(-l->fds.data));
    }
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
    l->message_fn = cfg->message_fn;
    l->message_user = cfg->message_user;
    note_stderr(l);
    int rc = open_source(l);
    if (rc == 0)
        rc = resolve_counts(l);
    if (rc < 0)
        return rc;
    rc = resolve_rank(l);
    if (rc < 0)
        return rc;
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
    l->respawn = p[RF_PARAM_ON_PRODUCER_DEATH] == RF_ON_DEATH_RESPAWN;
    l->quiet = p[RF_PARAM_QUIET] != 0;
    l->max_respawns = (uint64_t)p[RF_PARAM_MAX_RESPAWNS];
    l->window_ns = (uint64_t)p[RF_PARAM_RESPAWN_WINDOW_S] * 1000000000u;
    l->window_start_ns = rf__now_ns();
    l->timeout_ns = (uint64_t)p[RF_PARAM_BATCH_TIMEOUT_MS] * 1000000u;
    rf__failures_init(&l->failures, p, l->order.per_rank);
    return resolve_span(l);
}

/* ---- shared memory -------------------------------------------------- */

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
    if (*fd < 0)
        return set_error(l, -errno, "memfd_create(%s): %s; raise the fd limit",
                         name, strerror(errno));
    /* Reserve every page now, so that too little memory is an error here
     * and never a SIGBUS in the middle of a run. */
    const int err = reserve(*fd, size);
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
        return set_error(l, -errno,
                         "cannot map %llu bytes: %s; fewer slots "
                         "(RF_PARAM_SLOTS) or smaller batches need less, or "
                         "raise the address-space limit (ulimit -v)",
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
    l->ring_entries = lay.ring_entries;
    rf__segment_format(&l->seg, &lay, l->params, l->path);
    return 0;
}

/* ---- producers ------------------------------------------------------ */

/* Producer p made progress (started, got its first order, delivered):
 * its deadline runs from now, with no mark or stamp left from before. */
static void restart_deadline(rf_loader *l, uint32_t p)
{
    struct producer_info *prod = &l->producer_info[p];
    prod->progress_ns = rf__now_ns();
    prod->overdue_ns = 0;
    prod->resumed_ns = 0;
}

/* Starts producer i (again, after a death) in its record. */
static int start_producer(rf_loader *l, uint32_t i)
{
    struct producer_info *prod = &l->producer_info[i];
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
    restart_deadline(l, i);
    prod->has_delivered = false;
    return 0;
}

static int start_producers(rf_loader *l)
{
    int cpus[1024];
    const int ncpu = rf__affinity_cpus(cpus, 1024);
    const bool pin = l->params[RF_PARAM_PIN_PRODUCERS] != 0;
    for (uint32_t i = 0; i < l->producers; i++)
        l->producer_info[i].cpu =
            pin ? cpus[i % (uint32_t)(ncpu < 1024 ? ncpu : 1024)] : -1;
    int rc = 0;
    if (l->params[RF_PARAM_START_MODE] != RF_START_FORK)
        rc = rf__producer_path(l->producer_path, sizeof(l->producer_path),
                               l->error, sizeof(l->error));
    if (rc == 0 && l->params[RF_PARAM_START_MODE] != RF_START_FORK)
        l->helper_fd = rf__helper_open(l->producer_path);
    for (uint32_t i = 0; i < l->producers && rc == 0; i++)
        rc = start_producer(l, i);
    return rc;
}

static void stop_producers(rf_loader *l)
{
    if (!l->seg.header)
        return;
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

/* ---- orders ----------------------------------------------------------- */

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
static int give_order(rf_loader *l, uint32_t slot, uint64_t seq)
{
    struct slot_info *s = &l->slot_info[slot];
    const uint32_t p = least_busy_producer(l);
    s->where = SLOT_AT_PRODUCER;
    s->producer = p;
    s->seq = seq;
    /* Its deadline runs from now when it owed nothing before. */
    if (l->producer_info[p].orders++ == 0)
        restart_deadline(l, p);
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
static int issue_order(rf_loader *l, uint32_t slot)
{
    if (l->next_issue >= l->total_batches) {
        l->slot_info[slot].where = SLOT_FREE;
        return 0;
    }
    return give_order(l, slot, l->next_issue++);
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
    prod->orders--;
    l->at_producers--;
    prod->has_delivered = true;
    /* Delivering restarts the deadline for what it still owes. */
    restart_deadline(l, p);
    mark_ready(l, slot);
    return 0;
}

static int drain_full_ring(rf_loader *l, uint32_t p)
{
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

static int drain_full_rings(rf_loader *l)
{
    for (uint32_t p = 0; p < l->producers; p++) {
        const int rc = drain_full_ring(l, p);
        if (rc < 0)
            return rc;
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
    if (failed && !l->skip_errors)
        return set_error(l, RF_E_CORRUPT_SAMPLE,
                         "%.*s; set RF_PARAM_ON_ERROR to RF_ON_ERROR_SKIP to "
                         "leave failing samples out",
                         (int)sizeof(m->failures[0].text), m->failures[0].text);
    for (uint32_t i = 0; i < failed; i++) {
        const uint64_t index = *(failed_index - i);
        if (index >= (uint64_t)l->params[RF_PARAM_SAMPLES])
            return set_error(l, RF_E_BAD_HANDLE,
                             "slot %u lists failed sample %llu, but the "
                             "dataset has %lld samples; the shared memory "
                             "was overwritten",
                             slot, (unsigned long long)index,
                             (long long)l->params[RF_PARAM_SAMPLES]);
        char text[sizeof(m->failures[0].text) + 1];
        /* The slot records the first RF__SLOT_FAILURES in full. */
        if (i < RF__SLOT_FAILURES)
            rf__format(text, sizeof(text), "%.*s", (int)sizeof(text) - 1,
                       m->failures[i].text);
        else
            rf__format(text, sizeof(text),
                       "sample %llu: its reason was not kept (more than %d "
                       "samples of batch %llu failed)",
                       (unsigned long long)index, RF__SLOT_FAILURES,
                       (unsigned long long)l->slot_info[slot].seq);
        const int rc = rf__failures_add(&l->failures, epoch, index, text,
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

/* ---- dead and stuck producers ------------------------------------------ */

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
    l->at_producers -= n;
    l->producer_info[p].orders = 0;
    return n;
}

/* Empties producer p's rings and state record for its successor. Safe:
 * the old process is reaped, so nobody else touches them. */
static void reset_channel(rf_loader *l, uint32_t p)
{
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

/* Whether producer p owes batch seq: the batch its state record names
 * is shared memory, checked before a death is charged to it. */
static bool owes_batch(const rf_loader *l, uint32_t p, uint64_t seq)
{
    for (uint32_t s = 0; s < l->slots; s++)
        if (l->slot_info[s].where == SLOT_AT_PRODUCER &&
            l->slot_info[s].producer == p && l->slot_info[s].seq == seq)
            return true;
    return false;
}

/* Whether `sample` is one of the samples of batch seq (as above). */
static bool sample_in_batch(const rf_loader *l, uint64_t seq, uint64_t sample)
{
    const uint64_t epoch = seq / l->order.batches_per_epoch;
    const uint64_t number = seq % l->order.batches_per_epoch;
    const uint64_t first = number * l->order.batch_size;
    const uint32_t count = rf__order_batch_samples(&l->order, number);
    for (uint32_t i = 0; i < count; i++)
        if (rf__order_sample(&l->order, epoch, first + i) == sample)
            return true;
    return false;
}

/* "sample 12 (/data/train/cls/a.jpg)" for messages: the consumer keeps
 * no dataset open, so a folder or pack is opened again from the fds the
 * producers get (rare: only when a sample ends the run). */
static void describe_sample(const rf_loader *l, uint64_t index, char *out,
                            size_t len)
{
    rf_dataset *ds = NULL;
    char why[256];
    if (l->params[RF_PARAM_SOURCE] == RF_SOURCE_PATH &&
        rf__dataset_open_indexed(&ds, l->path, l->fds.data, l->fds.listing, why,
                                 sizeof(why)) == 0) {
        rf__dataset_describe(ds, index, out, len);
        rf_dataset_close(ds);
        return;
    }
    rf__format(out, len, "sample %llu", (unsigned long long)index);
}

/* The other samples that broke producers, for the message that ends the
 * run: "; sample 9 (b.jpg) broke 2 producers, ...", or "". */
static void describe_other_breakers(const rf_loader *l, uint64_t except,
                                    char *out, size_t len)
{
    const struct rf__breaker *others[4];
    const uint32_t n = rf__breakers_others(&l->breakers, except, others, 4);
    size_t used = 0;
    out[0] = '\0';
    for (uint32_t i = 0; i < n && i < 4 && used + 1 < len; i++) {
        char who[RF__SAMPLE_NAME_MAX];
        describe_sample(l, others[i]->key, who, sizeof(who));
        rf__format(out + used, len - used, "%s%s broke %u producer%s",
                   i == 0 ? "; also " : ", ", who, others[i]->deaths,
                   others[i]->deaths == 1 ? "" : "s");
        used += strlen(out + used);
    }
    if (n > 4 && used + 1 < len)
        rf__format(out + used, len - used, ", and %u more samples", n - 4);
}

/* The error that ends the run for a condemned sample (fail policy, or a
 * skip list already full). */
static int sample_breaks_run(rf_loader *l, const char *what, uint64_t sample)
{
    char who[RF__SAMPLE_NAME_MAX], others[RF__DETAIL / 2];
    describe_sample(l, sample, who, sizeof(who));
    describe_other_breakers(l, sample, others, sizeof(others));
    return set_error(
        l, RF_E_PRODUCER_DIED,
        "%s; %s has now broken %d producers, so it crashes or hangs the "
        "decoder: remove that file from the dataset, or %s%s",
        what, who, RF__BREAKER_DEATHS,
        l->skip_errors ? "check the decoder: more samples than the skip "
                         "policy can leave out this way broke it"
                       : "set RF_PARAM_ON_ERROR to RF_ON_ERROR_SKIP to leave "
                         "such samples out",
        others);
}

/* Producer p crashed or timed out filling batch seq: the death is
 * charged to the sample it was on (else to the batch). A sample charged
 * RF__BREAKER_DEATHS times is left out under the skip policy and ends the
 * run under fail; so does a batch, whose sample is not known. Returns 0
 * to go on with a replacement, or the error. */
static int charge_death(rf_loader *l, uint32_t p, uint64_t seq,
                        const char *what)
{
    if (seq == UINT64_MAX || !owes_batch(l, p, seq))
        return 0;
    const struct rf__producer_state *st = rf__segment_producer(&l->seg, p);
    uint64_t sample = rf__load_relaxed64(&st->current_sample);
    if (!sample_in_batch(l, seq, sample))
        sample = UINT64_MAX;
    const struct rf__breaker *r =
        rf__breakers_charge(&l->breakers, seq, sample);
    if (r->deaths < RF__BREAKER_DEATHS)
        return 0;
    if (r->kind == RF__BREAKER_BATCH)
        return set_error(l, RF_E_PRODUCER_DIED,
                         "%s; batch %llu has now broken %d producers between "
                         "its samples: look for what crashes them (a "
                         "sanitizer's report or a core dump)",
                         what, (unsigned long long)seq, RF__BREAKER_DEATHS);
    if (l->skip_errors &&
        rf__breakers_condemn(&l->breakers, sample,
                             rf__segment_broken(&l->seg)) == 0)
        return 0; /* the producer that fills it again leaves it out */
    return sample_breaks_run(l, what, sample);
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

/* Policy respawn: a new producer p, and its owed batches issued again. */
static int replace_producer(rf_loader *l, uint32_t p, const char *what)
{
    if (respawns_used_up(l)) {
        char window[64];
        describe_seconds(window, sizeof(window), l->window_ns / 1000000000u);
        return set_error(l, RF_E_PRODUCER_DIED,
                         "%s; %llu producer%s been replaced within %s, the "
                         "most RF_PARAM_MAX_RESPAWNS allows "
                         "(RF_PARAM_RESPAWN_WINDOW_S; %llu in the run): look "
                         "for what kills them (dmesg for the OOM killer), or "
                         "raise the limit",
                         what, (unsigned long long)l->window_respawns,
                         l->window_respawns == 1 ? " has" : "s have", window,
                         (unsigned long long)l->respawns);
    }
    const uint32_t owed = reclaim_slots(l, p);
    reset_channel(l, p);
    int rc = start_producer(l, p);
    if (rc < 0) {
        /* Report the death first; the failed start is the detail. */
        char why[RF__DETAIL / 2];
        rf__format(why, sizeof(why), "%s", l->error);
        return set_error(l, RF_E_PRODUCER_DIED,
                         "%s; no replacement could be started: %s", what, why);
    }
    l->respawns++;
    l->window_respawns++;
    for (uint32_t k = 0; k < owed && rc == 0; k++)
        rc = give_order(l, l->owed[k], l->slot_info[l->owed[k]].seq);
    if (rc < 0)
        return rc;
    report(l, "%s; replaced by pid %d, %u batch%s issued again", what,
           l->producer_info[p].child.pid, owed, owed == 1 ? "" : "es");
    return 0;
}

/* Producer p has exited (reaped, `how` says how) or been killed for its
 * deadline. Keeps what it published, then replaces it or fails. */
static int handle_death(rf_loader *l, uint32_t p, int pid, const char *how,
                        bool timed_out)
{
    const struct rf__producer_state *st = rf__segment_producer(&l->seg, p);
    const struct producer_info *prod = &l->producer_info[p];
    l->pfds[1 + p].fd = -1;
    if (rf__load_acquire32(&st->failed))
        return set_error(l, RF_E_PRODUCER_FAILED, "producer %u (pid %d): %.*s",
                         p, pid, (int)sizeof(st->error_text), st->error_text);
    int rc = drain_full_ring(l, p);
    if (rc < 0)
        return rc;
    char what[RF__DETAIL / 2];
    describe_death(l, p, pid, how, what, sizeof(what));
    const uint64_t seq = rf__load_relaxed64(&st->current_seq);
    const bool attached = rf__load_relaxed32(&st->pid) != 0;
    /* Took up work: delivered a batch, or died filling one (which
     * charge_death() judges). Attached and idle since is not enough: a
     * helper that aborts as it sets up would be replaced a thousand times
     * (RF_PARAM_MAX_RESPAWNS) and end in advice about the OOM killer. */
    const bool took_up_work =
        attached && (prod->has_delivered || seq != UINT64_MAX);
    const bool crashed = crashed_or_timed_out(prod->child.status, timed_out);
    if (!l->respawn) {
        (void)reclaim_slots(l, p); /* the ring keeps its full count */
        if (!attached && crashed)
            return fail_to_start(l, what, 1, false);
        return set_error(l, RF_E_PRODUCER_DIED,
                         "%s; set RF_PARAM_ON_PRODUCER_DEATH to "
                         "RF_ON_DEATH_RESPAWN to replace it",
                         what);
    }
    if (producers_cannot_start(l, took_up_work, crashed))
        return fail_to_start(l, what, l->failed_starts, attached);
    rc = crashed ? charge_death(l, p, seq, what) : 0;
    if (rc < 0)
        return rc;
    return replace_producer(l, p, what);
}

/* Handles every producer whose pidfd says it has exited. */
static int collect_dead(rf_loader *l)
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
        const int rc = handle_death(l, p, pid, how, false);
        if (rc < 0)
            return rc;
    }
    return 0;
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
static int collect_stuck(rf_loader *l)
{
    if (l->timeout_ns == 0)
        return 0;
    for (uint32_t p = 0; p < l->producers; p++) {
        /* The clock is read for each producer: handling one death stamps
         * the others' progress (re-issued orders) after any earlier now. */
        struct producer_info *prod = &l->producer_info[p];
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
        const int rc = handle_death(l, p, pid, how, true);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Milliseconds until the nearest producer deadline, or -1 for none. */
static int ms_to_deadline(const rf_loader *l, uint64_t now)
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

/* next() between sleeps: the pidfds and deadlines, every HEALTH_CHECK_MS. */
static int check_producers(rf_loader *l)
{
    const uint64_t now = rf__now_ns();
    if (now < l->next_check_ns)
        return 0;
    l->next_check_ns = now + HEALTH_CHECK_MS * 1000000ull;
    if (poll(l->pfds + 1, l->producers, 0) > 0) {
        const int rc = collect_dead(l);
        if (rc < 0)
            return rc;
    }
    return collect_stuck(l);
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
static void forgive_time_stopped(rf_loader *l, uint64_t started,
                                 uint64_t allowed_ns)
{
    const uint64_t now = rf__now_ns();
    if (now - started <= allowed_ns + WAIT_OVERRUN_SLACK_NS)
        return;
    const uint64_t lost = now - started;
    for (uint32_t p = 0; p < l->producers; p++) {
        struct producer_info *prod = &l->producer_info[p];
        if (prod->orders == 0)
            continue;
        prod->progress_ns =
            prod->progress_ns + lost < now ? prod->progress_ns + lost : now;
        prod->overdue_ns = 0;
    }
}

/* Sleeps until a producer rings the eventfd, one of them exits, or a
 * deadline passes; then handles the dead and the stuck. `started` is when
 * the wait began, spin included. */
static int sleep_for_batches(rf_loader *l, uint64_t started)
{
    struct rf__bell *bell = rf__segment_consumer_bell(&l->seg);
    rf__store_relaxed32(&bell->sleeping, 1);
    rf__fence_full(); /* pairs with the fence in rf__bell_ring_eventfd() */
    int rc = 0;
    for (uint32_t i = 0; i <= l->producers; i++)
        l->pfds[i].revents = 0;
    int wait_ms = 0;
    if (!any_full_ring_ready(l)) {
        wait_ms = ms_to_deadline(l, rf__now_ns());
        if (wait_ms < 0 || wait_ms > SLEEP_BACKSTOP_MS)
            wait_ms = SLEEP_BACKSTOP_MS;
        const int n = poll(l->pfds, 1 + l->producers, wait_ms);
        if (n < 0)
            rc = errno == EINTR ? -EINTR : -errno;
    }
    if (l->timeout_ns != 0)
        forgive_time_stopped(l, started,
                             l->spin_ns + (uint64_t)wait_ms * 1000000ull);
    rf__store_relaxed32(&bell->sleeping, 0);
    if (l->pfds[0].revents & POLLIN) {
        uint64_t count;
        ssize_t r = read(l->fds.bell, &count, sizeof(count));
        (void)r; /* EAGAIN: another wake already took it */
    }
    if (rc == -EINTR)
        return set_error(l, rc, "interrupted by a signal while waiting");
    if (rc < 0)
        return set_fatal(l,
                         set_error(l, rc, "poll() failed: %s", strerror(-rc)));
    if (rc == 0)
        rc = drain_full_rings(l); /* before any deadline is judged */
    if (rc == 0)
        rc = collect_dead(l);
    if (rc == 0)
        rc = collect_stuck(l);
    return rc < 0 ? set_fatal(l, rc) : 0;
}

static int wait_for_batches(rf_loader *l)
{
    const uint64_t started = rf__now_ns();
    if (rf__spin_until(any_full_ring_ready, l, l->spin_ns)) {
        if (l->timeout_ns != 0) /* a freeze may end a spin too */
            forgive_time_stopped(l, started, l->spin_ns);
        return 0;
    }
    return sleep_for_batches(l, started);
}

/* ---- public API --------------------------------------------------------- */

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
        l->pfds[1 + i].fd = -1;
    }
    for (uint32_t s = 0; s < l->slots; s++)
        l->ready[s] = -1;
    return 0;
}

/* Refuses to start when the fd limit leaves too few for the ring: better
 * than an EMFILE from whichever call happens to come last. */
static int check_fds(rf_loader *l)
{
    /* Still to be opened: control, arena, eventfd, the helper, a pidfd
     * per producer, and one for whatever the caller opens next. Not the
     * dataset's listing and data fds: open_source() opened them before
     * this runs, so rf__fds_free() counts them as taken already. A
     * replacement's describe_sample() may open the dataset again (two
     * more) only on its way to an error. */
    const uint64_t needed = 6 + (uint64_t)l->producers;
    uint64_t limit = 0;
    const int free_fds = rf__fds_free(&limit);
    if ((uint64_t)free_fds >= needed)
        return 0;
    return set_error(l, -EMFILE,
                     "the loader needs %llu file descriptors (%u producers) "
                     "but only %d are free under the limit of %llu; raise "
                     "it (ulimit -n, RLIMIT_NOFILE) or close some files",
                     (unsigned long long)needed, l->producers, free_fds,
                     (unsigned long long)limit);
}

static int open_loader(rf_loader *l, const rf_config *cfg)
{
    int rc = resolve_config(l, cfg);
    if (rc == 0)
        rc = check_fds(l);
    if (rc == 0)
        rc = allocate_tables(l);
    if (rc == 0)
        rc = create_segments(l);
    if (rc < 0)
        return rc;
    l->fds.bell = rf__fd_off_stdio(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (l->fds.bell < 0)
        return set_error(l, -errno, "eventfd: %s; raise the fd limit",
                         strerror(errno));
    l->pfds[0].fd = l->fds.bell;
    l->pfds[0].events = POLLIN;
    rc = start_producers(l);
    if (rc < 0)
        return rc;
    l->next_issue = l->next_deliver = l->first_batch;
    for (uint32_t s = 0; s < l->slots && rc == 0; s++)
        rc = issue_order(l, s);
    return rc;
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

int rf_loader_next(rf_loader *l, rf_batch *batch)
{
    if (!l || !batch)
        return -EINVAL;
    const int other = refuse_other_process(l, "rf_loader_next");
    if (other < 0)
        return other;
    if (l->fatal)
        return l->fatal;
    if (l->first_batch + l->delivered >= l->total_batches)
        return 0;
    const uint64_t start = rf__now_ns();
    int rc;
    for (;;) {
        rc = drain_full_rings(l);
        if (rc == 0)
            rc = check_producers(l);
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
    const int other = refuse_other_process(l, "rf_loader_release");
    if (other < 0)
        return other;
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
    (void)issue_order(l, slot);
    return 0;
}

void rf_loader_close(rf_loader *l)
{
    if (!l)
        return;
    /* In a child of fork() the producers and rings are the parent's: only
     * the child's copies of the pidfds go (close-on-exec, but a child
     * that does not exec would keep one per producer). */
    if (l->producer_info && owned_here(l))
        stop_producers(l);
    else if (l->producer_info)
        for (uint32_t i = 0; i < l->producers; i++)
            if (l->producer_info[i].child.pidfd >= 0)
                close(l->producer_info[i].child.pidfd);
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
    st->respawns = l->respawns;
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
