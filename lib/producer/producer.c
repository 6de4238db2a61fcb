/*
 * producer.c - the producer process: takes orders {slot, batch} from its
 * EMPTY ring, fills the slot, and publishes it on its FULL ring. Single
 * threaded; owns nothing but its mappings; touches only its own ring pair,
 * its own state record and the slots it was ordered to fill.
 */
#include "config.h"

#include "producer/producer.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "channel/broken-list.h"
#include "channel/segment.h"
#include "common/clock.h"
#include "common/fds.h"
#include "common/order.h"
#include "common/text.h"
#include "decode/decode.h"
#include "ringfeed.h"
#include "source/dataset.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* How often an idle producer checks that its parent still exists (the
 * PR_SET_PDEATHSIG signal normally ends it first). */
#define PARENT_CHECK_MS 250

/* The signal PR_SET_PDEATHSIG sends; see on_parent_signal(). SIGCONT is
 * the one signal that a stopped process acts on (the kernel continues
 * it) and that can still be caught: a producer that someone stopped
 * (SIGSTOP, a debugger, a test) when the consumer died runs its handler
 * and ends, where a pending SIGUSR1 would wait for a SIGCONT that may
 * never come (the consumer's process group is orphaned, and the kernel
 * continues it, only when the consumer led a group of its own). Job
 * control's own SIGCONT (fg, a scheduler's resume) runs the same check,
 * and stamps the resume for the consumer's deadlines. */
#define PARENT_DEATH_SIGNAL SIGCONT

struct producer {
    struct rf__segment seg;
    uint32_t index;
    int parent_pid;
    int bell_fd;
    struct rf__producer_state *state;
    struct rf__ring *empty, *full;
    uint32_t ring_entries; /* read once from the validated header */
    struct rf__bell *consumer_bell;
    const struct rf__broken_list *broken; /* samples to leave out */
    /* The configuration, read once from the control segment. */
    struct rf__order order;
    uint32_t height, width, channels, classes;
    rf_layout layout;
    rf_source_kind source;
    uint64_t spin_ns, sample_bytes;
    bool skip_errors;
    /* RF_SOURCE_PATH and RF_SOURCE_SYNTHETIC_JPEG */
    int index_fd; /* the consumer's listing of a folder, or -1 */
    int data_fd;  /* the consumer's open folder or packed file, or -1 */
    int control_fd, parent_control_fd; /* ours; the consumer's number */
    rf_dataset *dataset;
    struct rf__decoder *decoder;
    bool *slot_mapped; /* [slots]: the slot's pages are mapped here */
};

/* Flags the producer as failed (the consumer reports error_text) and
 * returns its exit status. */
static int mark_failed(struct producer *pr)
{
    rf__store_release32(&pr->state->failed, 1);
    return 2;
}

/* Records why this producer stops, for the consumer to report. */
#define fail(pr, ...)                                                          \
    (rf__format((pr)->state->error_text, sizeof((pr)->state->error_text),      \
                __VA_ARGS__),                                                  \
     mark_failed(pr))

/* Reads the configuration once from the control segment and checks it
 * against the segment's layout. */
static int read_config(struct producer *pr)
{
    const int64_t *p = pr->seg.params;
    pr->height = (uint32_t)p[RF_PARAM_HEIGHT];
    pr->width = (uint32_t)p[RF_PARAM_WIDTH];
    pr->channels = (uint32_t)p[RF_PARAM_CHANNELS];
    pr->classes = (uint32_t)p[RF_PARAM_CLASSES];
    pr->layout = (rf_layout)p[RF_PARAM_LAYOUT];
    pr->source = (rf_source_kind)p[RF_PARAM_SOURCE];
    pr->spin_ns = (uint64_t)p[RF_PARAM_SPIN_NS];
    pr->sample_bytes = (uint64_t)pr->height * pr->width * pr->channels;
    pr->skip_errors = p[RF_PARAM_ON_ERROR] == RF_ON_ERROR_SKIP;
    char why[256];
    if (rf__order_init(&pr->order, p, why, sizeof(why)) < 0)
        return fail(pr, "producer %u: %s", pr->index, why);
    if (pr->order.batch_size != pr->seg.layout.batch_size ||
        pr->sample_bytes * pr->order.batch_size >
            pr->seg.layout.slot_data_bytes)
        return fail(pr,
                    "producer %u: configuration in the control segment "
                    "does not match its layout",
                    pr->index);
    return 0;
}

/* Opens the dataset and decoders the source needs, once. */
static int open_source(struct producer *pr)
{
    char why[RF__ERROR_TEXT];
    int rc = 0;
    if (pr->source == RF_SOURCE_PATH)
        rc = rf__dataset_open_indexed(&pr->dataset, pr->seg.path, pr->data_fd,
                                      pr->index_fd, why, sizeof(why));
    if (rc == 0 && (pr->source == RF_SOURCE_PATH ||
                    pr->source == RF_SOURCE_SYNTHETIC_JPEG))
        rc = rf__decoder_new(&pr->decoder, pr->seg.params, pr->dataset, why,
                             sizeof(why));
    if (rc < 0)
        return fail(pr, "producer %u: %s", pr->index, why);
    return 0;
}

static void close_source(struct producer *pr)
{
    rf__decoder_free(pr->decoder);
    rf_dataset_close(pr->dataset);
}

static int fill_from_dataset(struct producer *pr, uint64_t epoch,
                             uint64_t index, uint8_t *dst, int64_t *label,
                             char *err, size_t err_len)
{
    rf_sample_info info;
    if (rf_dataset_read(pr->dataset, index, &info) < 0) {
        /* It names the sample already: "sample N (file): reason". */
        rf__format(err, err_len, "%s", rf_dataset_error(pr->dataset));
        return -1;
    }
    *label = info.label;
    char reason[RF__ERROR_TEXT];
    if (rf__decode_sample(pr->decoder, &info, epoch, index, dst, reason,
                          sizeof(reason)) == 0)
        return 0;
    char who[RF__SAMPLE_NAME_MAX];
    rf__dataset_describe(pr->dataset, index, who, sizeof(who));
    rf__format(err, err_len, "%s: %s", who, reason);
    return -1;
}

/* The synthetic images, encoded to JPEG here and decoded like files. */
static int fill_from_synthetic_jpeg(struct producer *pr, uint64_t epoch,
                                    uint64_t index, uint8_t *dst, char *err,
                                    size_t err_len)
{
    rf_sample_info info = {.kind = RF_SAMPLE_JPEG};
    void *jpeg = NULL;
    if (rf_synthetic_jpeg(pr->order.seed, index, 0, 0, &jpeg, &info.size) < 0) {
        rf__format(err, err_len, "sample %llu: cannot encode it",
                   (unsigned long long)index);
        return -1;
    }
    info.data = jpeg;
    char reason[RF__ERROR_TEXT];
    const int rc = rf__decode_sample(pr->decoder, &info, epoch, index, dst,
                                     reason, sizeof(reason));
    free(jpeg);
    if (rc < 0)
        rf__format(err, err_len, "sample %llu (synthetic JPEG): %s",
                   (unsigned long long)index, reason);
    return rc;
}

/* A sample the consumer condemned (channel/broken-list.h): it crashed or hung
 * producers before, and would do it again. Left out without a look. */
static int refuse_broken(struct producer *pr, uint64_t index, char *err,
                         size_t err_len)
{
    char who[RF__SAMPLE_NAME_MAX];
    if (pr->dataset)
        rf__dataset_describe(pr->dataset, index, who, sizeof(who));
    else
        rf__format(who, sizeof(who), "sample %llu", (unsigned long long)index);
    rf__format(err, err_len,
               "%s: it crashed or hung %d producers that decoded it (see "
               "their messages on stderr), so it is left out",
               who, RF__BREAKER_DEATHS);
    return -1;
}

/* Puts sample `index` at dst and its label at *label. Returns 0, or -1
 * with "sample N (name): reason" in err. */
static int fill_sample(struct producer *pr, uint64_t epoch, uint64_t index,
                       uint8_t *dst, int64_t *label, char *err, size_t err_len)
{
    if (rf__broken_contains(pr->broken, index))
        return refuse_broken(pr, index, err, err_len);
    if (pr->source == RF_SOURCE_PATH)
        return fill_from_dataset(pr, epoch, index, dst, label, err, err_len);
    /* The synthetic sources' labels come from (seed, index). */
    *label = rf_synthetic_label(pr->order.seed, index, pr->classes);
    switch (pr->source) {
    case RF_SOURCE_SYNTHETIC:
        rf_synthetic_fill(pr->order.seed, index, pr->classes, pr->height,
                          pr->width, pr->channels, pr->layout, dst);
        return 0;
    case RF_SOURCE_EMPTY:
        return 0;
    case RF_SOURCE_SYNTHETIC_JPEG:
        return fill_from_synthetic_jpeg(pr, epoch, index, dst, err, err_len);
    default:
        break;
    }
    rf__format(err, err_len, "unknown source kind %d", (int)pr->source);
    return -1;
}

/* Every failed index goes at the end of the slot's index array, from
 * the last entry down, where the good samples (packed from the front)
 * never reach; the first RF__SLOT_FAILURES also keep their reason. */
static void record_failure(struct rf__slot_meta *meta, uint64_t *indices,
                           uint32_t batch_size, uint64_t index,
                           const char *text)
{
    const uint32_t k = meta->failed_samples++;
    indices[batch_size - 1 - k] = index;
    if (k >= RF__SLOT_FAILURES)
        return;
    meta->failures[k].index = index;
    rf__format(meta->failures[k].text, sizeof(meta->failures[k].text), "%s",
               text);
}

/* Fills the slot's samples in order, packing the good ones at the front:
 * a failed sample is recorded and, with the skip policy, left out. */
static void fill_batch(struct producer *pr, uint32_t slot, uint64_t seq)
{
    const struct rf__order *o = &pr->order;
    const uint64_t epoch = seq / o->batches_per_epoch;
    const uint64_t number = seq % o->batches_per_epoch;
    const uint64_t first = number * o->batch_size;
    const uint32_t count = rf__order_batch_samples(o, number);

    uint8_t *data = rf__slot_data(&pr->seg, slot);
    int64_t *labels = rf__slot_labels(&pr->seg, slot);
    uint64_t *indices = rf__slot_indices(&pr->seg, slot);
    struct rf__slot_meta *meta = rf__slot_meta(&pr->seg, slot);
    meta->failed_samples = 0;
    uint32_t filled = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (rf__load_acquire32(&pr->seg.header->closing))
            break; /* nobody will read this batch */
        const uint64_t index = rf__order_sample(o, epoch, first + i);
        rf__store_relaxed64(&pr->state->current_sample, index);
        char err[RF__ERROR_TEXT];
        if (fill_sample(pr, epoch, index, data + filled * pr->sample_bytes,
                        &labels[filled], err, sizeof(err)) == 0) {
            indices[filled++] = index;
            continue;
        }
        record_failure(meta, indices, o->batch_size, index, err);
        if (!pr->skip_errors)
            break; /* the consumer fails on this batch anyway */
    }
    meta->sequence = seq;
    meta->epoch = epoch;
    meta->number = number;
    meta->samples = filled;
    meta->producer = pr->index;
}

static void publish(struct producer *pr, uint64_t handle)
{
    /* The ring has room for every slot plus a stop, so this cannot fail
     * unless the consumer corrupted it; then the consumer finds out. */
    (void)rf__ring_push(pr->full, pr->ring_entries, handle);
    rf__bell_ring_eventfd(pr->consumer_bell, pr->bell_fd);
}

/*
 * The arena is mapped without its pages (segment.c), and a producer maps
 * a slot's pages the first time it is ordered to fill it, all in one
 * call: faulting them in one at a time as the decoder writes costs more.
 * Mapping every slot at start made each of P producers map the whole
 * ring of (by default) 3P slots before the first batch: O(P^2)
 * page-table work, a second of system time at P = 16 with batches of 64
 * at 224x224. Where the kernel has no MADV_POPULATE_WRITE (before Linux
 * 5.14), or where slots are not aligned to the kernel's page (RF__PAGE
 * is 4 KiB; arm64 and ppc64le kernels may use 64 KiB), madvise() fails
 * with EINVAL and the pages are faulted in as they are written. The
 * memory itself was reserved by the consumer, so neither way can fail
 * for want of it.
 */
static void map_slot(struct producer *pr, uint32_t slot)
{
    if (pr->slot_mapped[slot])
        return;
    pr->slot_mapped[slot] = true;
    (void)madvise(rf__slot_data(&pr->seg, slot), pr->seg.layout.slot_bytes,
                  MADV_POPULATE_WRITE);
}

static int handle_order(struct producer *pr, uint64_t h)
{
    const uint32_t slot = rf__handle_slot(h);
    const uint64_t seq = rf__handle_seq(h);
    if (rf__handle_kind(h) != RF__HANDLE_BATCH || slot >= pr->seg.layout.slots)
        return fail(pr, "producer %u: invalid order 0x%016llx on its ring",
                    pr->index, (unsigned long long)h);
    const uint64_t start = rf__now_ns();
    /* No sample yet: a death before the first one is the batch's. */
    rf__store_relaxed64(&pr->state->current_sample, UINT64_MAX);
    rf__store_relaxed64(&pr->state->current_seq, seq);
    map_slot(pr, slot);
    fill_batch(pr, slot, seq);
    rf__store_relaxed64(&pr->state->current_seq, UINT64_MAX);
    rf__add_relaxed64(&pr->state->busy_ns, rf__now_ns() - start);
    rf__add_relaxed64(&pr->state->batches, 1);
    publish(pr, h);
    return 0;
}

/* The parent still runs but no longer holds the control segment: it
 * exec'd another program (its fds are close-on-exec), so nobody will ever
 * stop us. Unknown counts as held: no access to its /proc entry, or no
 * /proc at all (its fd folder must be there before a missing fd in it
 * means anything). */
static bool parent_dropped_ring(const struct producer *pr)
{
    if (pr->parent_pid <= 0 || pr->parent_control_fd < 0)
        return false;
    char folder[48], path[64];
    rf__format(folder, sizeof(folder), "/proc/%d/fd", pr->parent_pid);
    rf__format(path, sizeof(path), "%s/%d", folder, pr->parent_control_fd);
    struct stat ours, theirs;
    if (fstat(pr->control_fd, &ours) != 0 || stat(folder, &theirs) != 0)
        return false;
    if (stat(path, &theirs) != 0)
        return errno == ENOENT;
    return theirs.st_dev != ours.st_dev || theirs.st_ino != ours.st_ino;
}

static bool parent_gone(const struct producer *pr)
{
    return (pr->parent_pid > 0 && getppid() != pr->parent_pid) ||
           parent_dropped_ring(pr);
}

static int serve(struct producer *pr)
{
    for (;;) {
        uint64_t h;
        int rc = rf__ring_pop(pr->empty, pr->ring_entries, &h);
        if (rc == 0) {
            rc = rf__ring_wait_futex(pr->empty, &pr->state->bell, pr->spin_ns,
                                     PARENT_CHECK_MS);
            if (rc <= 0 && parent_gone(pr))
                return 0;
            continue;
        }
        if (rc < 0)
            return fail(pr, "producer %u: its order ring is corrupted",
                        pr->index);
        if (rf__handle_kind(h) == RF__HANDLE_STOP) {
            publish(pr, rf__handle_make(RF__HANDLE_STOP, 0, 0));
            return 0;
        }
        rc = handle_order(pr, h);
        if (rc != 0)
            return rc;
    }
}

static void pin_to(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    /* Failure (a CPU removed from the cgroup since) only costs locality. */
    (void)sched_setaffinity(0, sizeof(set), &set);
}

/* The consumer process, for on_parent_signal(); 0 = unknown. */
static volatile sig_atomic_t consumer_pid;

/* This producer's continued_ns in the shared state, once attached; and
 * the last SIGCONT's time, kept for it until then. */
static _Atomic uint64_t *volatile continued_stamp;
static _Atomic uint64_t last_continued;

/* PR_SET_PDEATHSIG fires when the *thread* that started this producer
 * ends, even while the rest of the consumer process lives on: a loader
 * opened, or a producer replaced, by a thread that then returned. Its
 * signal (PARENT_DEATH_SIGNAL) is caught, and the producer ends only once
 * getppid() no longer names the consumer, which happens when the whole
 * process is gone and a reaper took us over. The same check answers the
 * SIGUSR1 and SIGUSR2 a batch scheduler sends every process of a job as a
 * warning (Slurm's --signal): those are meant for the training process. */
static void on_parent_signal(int sig)
{
    if (consumer_pid <= 0 || getppid() != consumer_pid)
        _exit(0);
    /* A SIGCONT that is not the consumer's death resumed a stopped job
     * (fg, a scheduler): the consumer then does not count the time
     * stopped against this producer's deadline (consumer/deadlines.c).
     * Both calls are async-signal-safe (clock_gettime, a lock-free
     * store). */
    if (sig != SIGCONT)
        return;
    const uint64_t now = rf__now_ns();
    rf__store_relaxed64(&last_continued, now);
    _Atomic uint64_t *stamp = continued_stamp;
    if (stamp)
        rf__store_relaxed64(stamp, now);
}

/* The signals on_parent_signal() answers. */
static const int caught_signals[] = {PARENT_DEATH_SIGNAL, SIGUSR1, SIGUSR2};

void rf__producer_caught_signals(sigset_t *set)
{
    sigemptyset(set);
    for (size_t i = 0; i < sizeof(caught_signals) / sizeof(caught_signals[0]);
         i++)
        sigaddset(set, caught_signals[i]);
}

/* Dies with the consumer process, and only then. */
static void follow_parent(int parent_pid)
{
    consumer_pid = parent_pid;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_parent_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(caught_signals) / sizeof(caught_signals[0]);
         i++)
        (void)sigaction(caught_signals[i], &sa, NULL);
    /* Blocked from the start (spawn.c), so that one sent while the
     * producer was starting waits for the handler instead of killing. */
    sigset_t ours;
    rf__producer_caught_signals(&ours);
    (void)sigprocmask(SIG_UNBLOCK, &ours, NULL);
    prctl(PR_SET_PDEATHSIG, PARENT_DEATH_SIGNAL);
}

int rf__producer_run(const struct rf__producer_fds *fds, uint32_t index,
                     int cpu, int parent_pid)
{
    /* Die with the consumer; then make sure it did not die already. */
    follow_parent(parent_pid);
    if (parent_pid > 0 && getppid() != parent_pid)
        return 0;
    /* Ctrl-C belongs to the training process, which then closes us. */
    signal(SIGINT, SIG_IGN);
    /* Before anything here opens a file (the dataset's samples). */
    rf__stdio_fill();
    char name[16];
    rf__format(name, sizeof(name), "rf-producer-%u", index);
    prctl(PR_SET_NAME, name);
    pin_to(cpu);

    struct producer pr = {.index = index,
                          .parent_pid = parent_pid,
                          .bell_fd = fds->bell,
                          .index_fd = fds->listing,
                          .data_fd = fds->data,
                          .control_fd = fds->control,
                          .parent_control_fd = fds->parent_control};
    char why[RF__ERROR_TEXT];
    int rc =
        rf__segment_attach(&pr.seg, fds->control, fds->arena, why, sizeof(why));
    if (rc < 0) {
        /* No shared state to write to: stderr is all we have. */
        fprintf(stderr, "ringfeed-producer %u: %s\n", index, why);
        return 3;
    }
    if (index >= pr.seg.layout.producers) {
        fprintf(stderr, "ringfeed-producer: index %u out of range\n", index);
        rf__segment_detach(&pr.seg);
        return 3;
    }
    pr.state = rf__segment_producer(&pr.seg, index);
    pr.empty = rf__segment_empty_ring(&pr.seg, index);
    pr.full = rf__segment_full_ring(&pr.seg, index);
    pr.ring_entries = pr.seg.layout.ring_entries;
    pr.consumer_bell = rf__segment_consumer_bell(&pr.seg);
    pr.broken = rf__segment_broken(&pr.seg);
    rf__store_relaxed32(&pr.state->pid, (uint32_t)getpid());
    continued_stamp = &pr.state->continued_ns;
    /* a job resumed while this producer was starting */
    rf__store_relaxed64(continued_stamp, rf__load_relaxed64(&last_continued));
    pr.slot_mapped = calloc(pr.seg.layout.slots, sizeof(*pr.slot_mapped));
    rc = pr.slot_mapped ? read_config(&pr)
                        : fail(&pr, "producer %u: out of memory", index);
    if (rc == 0)
        rc = open_source(&pr);
    if (rc == 0)
        rc = serve(&pr);
    close_source(&pr);
    free(pr.slot_mapped);
    continued_stamp = NULL; /* before the mapping goes */
    rf__segment_detach(&pr.seg);
    return rc;
}

/* ---- the ringfeed-producer command line -------------------------------- */

static bool parse_int(const char *s, long min, long max, long *out)
{
    char *end = NULL;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
        return false;
    *out = v;
    return true;
}

static const char usage[] =
    "usage: ringfeed-producer --control-fd N --arena-fd N --bell-fd N\n"
    "                         [--listing-fd N] [--data-fd N]\n"
    "                         --index I [--cpu C] [--parent PID]\n"
    "                         [--parent-control-fd N] [--helper-fd N]\n"
    "A ringfeed producer process. rf_loader_open() starts these; there is\n"
    "no reason to run one by hand.\n";

/* Whether argv holds argc strings: a NULL argv, or a NULL among its
 * first argc entries, is a command line no shell makes (an exec with a
 * short array), refused with the usage. */
static bool argv_whole(int argc, char *const *argv)
{
    if (!argv)
        return false;
    for (int i = 0; i < argc; i++)
        if (!argv[i])
            return false;
    return true;
}

int rf_producer_main(int argc, char **argv)
{
    long control = -1, arena = -1, bell = -1, listing = -1, data = -1;
    long index = -1;
    long cpu = -1, parent = 0, parent_control = -1, helper = -1;
    if (!argv_whole(argc, argv)) {
        fputs(usage, stderr);
        return 64;
    }
    /* every option but --help takes a value: they come in pairs */
    for (int i = 1; i < argc; i += 2) {
        if (strcmp(argv[i], "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        }
        long *dst = strcmp(argv[i], "--control-fd") == 0   ? &control
                    : strcmp(argv[i], "--arena-fd") == 0   ? &arena
                    : strcmp(argv[i], "--bell-fd") == 0    ? &bell
                    : strcmp(argv[i], "--listing-fd") == 0 ? &listing
                    : strcmp(argv[i], "--data-fd") == 0    ? &data
                    : strcmp(argv[i], "--index") == 0      ? &index
                    : strcmp(argv[i], "--cpu") == 0        ? &cpu
                    : strcmp(argv[i], "--parent") == 0     ? &parent
                    : strcmp(argv[i], "--parent-control-fd") == 0
                        ? &parent_control
                    : strcmp(argv[i], "--helper-fd") == 0 ? &helper
                                                          : NULL;
        if (!dst || i + 1 >= argc ||
            !parse_int(argv[i + 1], -1, INT_MAX, dst)) {
            fprintf(stderr, "ringfeed-producer: bad argument '%s'\n%s", argv[i],
                    usage);
            return 64;
        }
    }
    if (control < 0 || arena < 0 || bell < 0 || index < 0) {
        fputs(usage, stderr);
        return 64;
    }
    /* The fd this program was started from (rf__helper_open()). */
    if (helper >= 0)
        close((int)helper);
    const struct rf__producer_fds fds = {.control = (int)control,
                                         .arena = (int)arena,
                                         .bell = (int)bell,
                                         .listing = (int)listing,
                                         .data = (int)data,
                                         .parent_control = (int)parent_control};
    return rf__producer_run(&fds, (uint32_t)index, (int)cpu, (int)parent);
}
