/*
 * internal.h - declarations shared by the library's own files and its
 * tests, never installed. Internal non-static names start with rf__.
 */
#ifndef RF_INTERNAL_H
#define RF_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>

#include "ringfeed.h"

#define RF__DETAIL 1024 /* bytes of detail text kept per object */
#define RF__PARAMS 64   /* room for rf_param values 0..63 */
#define RF__PATH_MAX 4096

struct rf_config {
    int64_t params[RF__PARAMS]; /* indexed by rf_param */
    char path[RF__PATH_MAX];    /* RF_SOURCE_PATH's dataset */
    rf_message_fn message_fn;   /* NULL: the default (stderr, guarded) */
    void *message_user;
    char error[RF__DETAIL];
};

/* printf into a fixed buffer, always terminated, truncation is fine. */
void rf__format(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Copies text into out (len bytes, always terminated): whole when it
 * fits, else its start and its end around "...", so that a long path
 * keeps its beginning and its file name. */
void rf__copy_elided(char *out, size_t len, const char *text);

/* Room for "sample N (file)" in messages: a slot's error text has 504
 * bytes, and the reason after it must fit too. */
#define RF__SAMPLE_NAME_MAX 240

/* The values rf_config_set() accepts for param, so that checks made
 * elsewhere (the pack writer's sample shape) keep to the same limits.
 * False for a number that is not a parameter. */
bool rf__param_range(rf_param param, int64_t *min, int64_t *max);

/* CPUs in this process's affinity mask, in increasing order. Returns the
 * count (>= 1) and stores at most `max` of them in cpus. */
int rf__affinity_cpus(int *cpus, int max);

/* Bytes of memory this process can still take: the smaller of the
 * kernel's MemAvailable and the room (limit minus usage) under the memory
 * limits of its cgroup and the cgroups above it, v1 or v2 (cgroup.h;
 * UINT64_MAX when none can be read). *limited_by names the limit, for a
 * cgroup its file and folder ("the cgroup v1 memory.limit_in_bytes of
 * /sys/fs/cgroup/memory/job"); the text stays valid until this thread
 * calls again. */
uint64_t rf__memory_room(const char **limited_by);

/* File descriptors this process can still open under RLIMIT_NOFILE
 * (INT32_MAX when unlimited or unknown); *limit gets the limit. */
int rf__fds_free(uint64_t *limit);

/* A number that names this process, never that of its parent, a child of
 * fork() or an earlier process with the same pid; cheap enough for every
 * call (process-token.c). */
uint64_t rf__process_token(void);

/* ---- order ------------------------------------------------------------- */

/* Which sample goes where, as both the consumer and the producers derive
 * it from the parameters. */
struct rf__order {
    uint64_t seed;
    uint64_t samples;           /* N, the whole dataset */
    uint64_t per_rank;          /* samples this rank sees each epoch */
    uint64_t batches_per_epoch; /* for this rank */
    uint32_t batch_size, rank, world;
    bool shuffle, pad_shards;
};

/* Fills *o from resolved parameters (rank and world size already taken
 * from the environment). Returns 0, or -EINVAL with a reason in why when
 * the configuration leaves a rank without a batch. */
int rf__order_init(struct rf__order *o, const int64_t *params, char *why,
                   size_t why_len);

/* The dataset index at `position` (0 <= position < per_rank) of this
 * rank's part of epoch `epoch`. */
uint64_t rf__order_sample(const struct rf__order *o, uint64_t epoch,
                          uint64_t position);

/* Samples in batch `number` of an epoch (the last one may be short). */
uint32_t rf__order_batch_samples(const struct rf__order *o, uint64_t number);

/* Batches in one epoch of `samples`. */
uint64_t rf__batches_per_epoch(uint64_t samples, uint32_t batch_size,
                               bool drop_last);

/* The dataset index at `position` of epoch `epoch`: a keyed bijection of
 * [0, samples) when shuffling, the identity otherwise. O(1) memory. */
uint64_t rf__sample_at(uint64_t seed, uint64_t epoch, uint64_t position,
                       uint64_t samples, bool shuffle);

/* A 64-bit mix of two words (splitmix64 finaliser); the building block of
 * every keyed random choice. */
uint64_t rf__mix64(uint64_t a, uint64_t b);

/* ---- producer ---------------------------------------------------------- */

/* The fds a producer inherits: both segments, the consumer's eventfd and
 * a folder dataset's listing (-1 when there is none). */
struct rf__producer_fds {
    int control, arena, bell, listing;
    /* The dataset itself, open (a folder or a packed file), or -1. Set
     * exactly when listing is. */
    int data;
    /* The consumer's own fd number of the control memfd, or -1: an idle
     * producer stops once its parent no longer holds it (it exec'd). */
    int parent_control;
};

/* The signals a producer catches (its parent's death, a scheduler's
 * warnings), which it starts with blocked until its handler is in place. */
void rf__producer_caught_signals(sigset_t *set);

/* Runs a producer in this process until it is told to stop or its parent
 * dies. Returns the exit status. Used by rf_producer_main() (spawn mode)
 * and by fork mode directly. */
int rf__producer_run(const struct rf__producer_fds *fds, uint32_t index,
                     int cpu, int parent_pid);

/* ---- processes --------------------------------------------------------- */

/* A producer process as the consumer sees it. */
struct rf__child {
    int pid;    /* 0 once reaped */
    int pidfd;  /* readable when the process has exited; -1 once closed */
    int status; /* once reaped: the wait status, or -1 when unknown */
};

/* Finds the ringfeed-producer helper: $RINGFEED_PRODUCER, else the
 * installed one. Returns 0 or RF_E_NO_PRODUCER_BINARY with a detail. */
int rf__producer_path(char *path, size_t len, char *why, size_t why_len);

/* The helper at `path`, opened (O_PATH) for rf__spawn_producer() to
 * start from, or -1 where it cannot be (no /proc): then it is started by
 * name. Holding it open, every replacement runs the very file the loader
 * checked at open, even after an upgrade replaced or removed the file
 * under that name (a new helper speaks another version's protocol). */
int rf__helper_open(const char *path);

/* Starts producer `index` with posix_spawn of the helper: of `helper`
 * (from rf__helper_open()) when it is >= 0, else of `path`, which also
 * names it in messages. The child gets the three fds as 3, 4 and 5 (and
 * listing and data as 6 and 7, then the helper's own, which it closes)
 * and no other fd, default signal handling and an
 * empty signal mask. Returns 0 or a negative code with a detail. */
int rf__spawn_producer(const char *path, int helper,
                       const struct rf__producer_fds *fds, uint32_t index,
                       int cpu, struct rf__child *child, char *why,
                       size_t why_len);

/* Returns 0 when fork() without exec is safe here (one thread, no CUDA
 * driver loaded), else RF_E_FORK_UNSAFE with a detail. */
int rf__fork_is_safe(char *why, size_t why_len);

/* Starts producer `index` with fork(); the child runs rf__producer_run()
 * and never returns. */
int rf__fork_producer(const struct rf__producer_fds *fds, uint32_t index,
                      int cpu, struct rf__child *child, char *why,
                      size_t why_len);

/* Sends sig to a child that has not been reaped, through its pidfd when
 * it has one. Returns 0 or -errno. */
int rf__child_kill(const struct rf__child *child, int sig);

/* Reaps an exited child (or one about to exit, waiting at most
 * timeout_ms) and describes how it ended ("was killed by signal 9
 * (Killed)") into how. Returns 1 when it was reaped, 0 if it is still
 * running after the wait. */
int rf__child_reap(struct rf__child *child, int timeout_ms, char *how,
                   size_t how_len);

#endif /* RF_INTERNAL_H */
