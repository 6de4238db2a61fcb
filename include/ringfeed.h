/*
 * ringfeed.h - the public API of ringfeed, a data loader for training loops.
 *
 * Producer processes write whole batches into a ring of preallocated
 * shared-memory slots; this process (the consumer) receives each batch as a
 * zero-copy view, uses it, and releases it so that the slot is refilled.
 *
 *     rf_config *cfg = rf_config_create();
 *     rf_config_set(cfg, RF_PARAM_BATCH_SIZE, 64);
 *     rf_loader *loader;
 *     int rc = rf_loader_open(&loader, cfg);
 *     rf_config_free(cfg);                 // the loader keeps its own copy
 *     rf_batch b;
 *     while ((rc = rf_loader_next(loader, &b)) > 0) {
 *         train_step(b.data, b.labels, b.samples);
 *         rf_loader_release(loader, &b);
 *     }
 *     if (rc < 0)
 *         fprintf(stderr, "%s\n", rf_loader_error(loader));
 *     rf_loader_close(loader);
 *
 * Conventions, for every call below unless its comment says otherwise:
 *  - Functions that can fail return 0 (or a documented positive value) on
 *    success and a negative number on failure: either -errno (-ENOMEM,
 *    -EINVAL, ...) or one of ringfeed's own codes RF_E_* below, which lie in
 *    a reserved range that no errno reaches. rf_strerror() names either kind.
 *  - Details of a failure (which parameter, which producer, which file) are
 *    kept per object and read with rf_config_error() / rf_loader_error().
 *    Nothing is kept in globals.
 *  - Free functions accept NULL and do nothing.
 *  - An object may be used by one thread at a time; different objects may
 *    be used by different threads at once. The library starts no threads.
 *  - fork(): a child must not use a loader or config its parent created.
 *    Producers are separate processes that never load CUDA, so the consumer
 *    may use CUDA freely.
 */
#ifndef RINGFEED_H
#define RINGFEED_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RF_BUILDING_LIBRARY)
#define RF_API __attribute__((visibility("default")))
#else
#define RF_API
#endif

/* The version of this header. rf_version() returns the library's, which may
 * be newer than the header a program was compiled with. */
#define RF_VERSION_MAJOR 0
#define RF_VERSION_MINOR 1
#define RF_VERSION_PATCH 0
#define RF_VERSION_NUMBER                                                      \
    (RF_VERSION_MAJOR * 10000 + RF_VERSION_MINOR * 100 + RF_VERSION_PATCH)

/* Returns RF_VERSION_NUMBER of the library that is loaded. */
RF_API unsigned rf_version(void);

/*
 * Errors. Each X(NAME, value, message) becomes RF_E_NAME = value. The values
 * are fixed forever: a code is never renumbered or reused.
 */
#define RF_ERROR_MAP(X)                                                        \
    X(ABI, -10001,                                                             \
      "shared segment has the wrong magic, ABI version or size; producer and " \
      "consumer must come from the same ringfeed build")                       \
    X(BAD_HANDLE, -10002,                                                      \
      "a ring held a handle that does not match any batch in flight; the "     \
      "shared segment was overwritten")                                        \
    X(PRODUCER_DIED, -10003,                                                   \
      "a producer process exited or was killed while it owed batches")         \
    X(PRODUCER_FAILED, -10004,                                                 \
      "a producer process reported an error and stopped")                      \
    X(CORRUPT_SAMPLE, -10005, "a sample could not be read or decoded")         \
    X(ALL_SLOTS_HELD, -10006,                                                  \
      "every slot is held by the caller; release a batch before asking for "   \
      "the next one, or configure more slots")                                 \
    X(NO_PRODUCER_BINARY, -10007,                                              \
      "the ringfeed-producer helper was not found or cannot be executed; set " \
      "RINGFEED_PRODUCER to its path")                                         \
    X(FORK_UNSAFE, -10008,                                                     \
      "fork mode was asked for, but this process has other threads or a "      \
      "CUDA context; use spawn mode")

enum rf_error {
#define RF_ERROR_ENUM_(name, value, message) RF_E_##name = (value),
    RF_ERROR_MAP(RF_ERROR_ENUM_)
#undef RF_ERROR_ENUM_
};

/* Returns a static, human-readable message for any return code: 0, -errno
 * or RF_E_*. Never returns NULL. Thread-safe. */
RF_API const char *rf_strerror(int code);

/* ------------------------------------------------------------------------
 * Configuration
 * ------------------------------------------------------------------------ */

typedef struct rf_config rf_config;

/* Memory layout of one batch of images. N = samples, H, W, C as usual. */
typedef enum rf_layout {
    RF_LAYOUT_NHWC = 0, /* pixels interleaved, as decoders produce them */
    RF_LAYOUT_NCHW = 1  /* planes, as most PyTorch models expect */
} rf_layout;

/* Where samples come from. */
typedef enum rf_source_kind {
    /* Images computed from (seed, sample index): see rf_synthetic_fill(). */
    RF_SOURCE_SYNTHETIC = 0,
    /* No pixels at all: producers only stamp sample indices and labels.
     * Measures the transport alone. */
    RF_SOURCE_EMPTY = 1
} rf_source_kind;

/* How producer processes are started. */
typedef enum rf_start_mode {
    /* posix_spawn of the ringfeed-producer helper: safe in any process. */
    RF_START_SPAWN = 0,
    /* fork() without exec: faster to start, but refused with
     * RF_E_FORK_UNSAFE unless this process is single-threaded and has not
     * loaded the CUDA driver. */
    RF_START_FORK = 1
} rf_start_mode;

/*
 * Parameters, set with rf_config_set() and read with rf_config_get(). The
 * numbers are part of the ABI and never change. Values are int64_t; the
 * seed is taken as its 64-bit pattern.
 */
typedef enum rf_param {
    RF_PARAM_BATCH_SIZE = 1,  /* samples per batch, 1..65536; default 32 */
    RF_PARAM_HEIGHT = 2,      /* sample height in pixels; default 224 */
    RF_PARAM_WIDTH = 3,       /* sample width in pixels; default 224 */
    RF_PARAM_CHANNELS = 4,    /* 1..4; default 3 */
    RF_PARAM_LAYOUT = 5,      /* rf_layout; default RF_LAYOUT_NHWC */
    RF_PARAM_PRODUCERS = 6,   /* 0 = one per CPU of the affinity mask
                                 (default); at most 1024 */
    RF_PARAM_SLOTS = 7,       /* batches in the ring; 0 = 3 per producer,
                                 at least 4 (default): one being filled,
                                 one ready, one of slack for uneven
                                 samples; at most 65536 */
    RF_PARAM_SEED = 8,        /* order and synthetic content; default 0 */
    RF_PARAM_EPOCHS = 9,      /* 0 = no end; default 1 */
    RF_PARAM_DROP_LAST = 10,  /* 1: drop the partial last batch; default 0 */
    RF_PARAM_ORDERED = 11,    /* 1: batches in batch order (default);
                                 0: as soon as each is ready */
    RF_PARAM_SOURCE = 12,     /* rf_source_kind; default synthetic */
    RF_PARAM_SAMPLES = 13,    /* synthetic/empty: samples per epoch;
                                 default 10000 */
    RF_PARAM_CLASSES = 14,    /* synthetic/empty: label range; default 1000 */
    RF_PARAM_SHUFFLE = 15,    /* 1: new sample order each epoch (default) */
    RF_PARAM_START_MODE = 16, /* rf_start_mode; default spawn */
    RF_PARAM_SPIN_NS = 17,    /* how long a waiting side spins before it
                                 sleeps in the kernel; default 20000 */
    RF_PARAM_PIN_PRODUCERS = 18, /* 1: pin producer i to the i-th CPU of
                                    the affinity mask (default); 0: leave
                                    alone */
    /* Sharding for data-parallel training: rank r of W sees positions
     * r, r + W, r + 2W, ... of each epoch's global order, and every rank
     * gets the same number of batches. */
    RF_PARAM_RANK = 19,       /* -1 (default): $RANK, else
                                 $OMPI_COMM_WORLD_RANK, else 0 */
    RF_PARAM_WORLD_SIZE = 20, /* 0 (default): $WORLD_SIZE, else
                                 $OMPI_COMM_WORLD_SIZE, else 1 */
    RF_PARAM_SHARD_PAD = 21,  /* when W does not divide N: 1 (default)
                                 repeats the first samples of the order so
                                 every rank has ceil(N/W), like PyTorch's
                                 DistributedSampler; 0 drops the rest so
                                 every rank has floor(N/W) */
    /* Resuming: start at batch START_BATCH of epoch START_EPOCH and yield
     * exactly the batches an uninterrupted run would have from there. */
    RF_PARAM_START_EPOCH = 22, /* default 0; must be < EPOCHS unless
                                  EPOCHS is 0 */
    RF_PARAM_START_BATCH = 23  /* default 0; < batches per epoch */
} rf_param;

/* Creates a configuration holding every default. Returns NULL when out of
 * memory. The caller owns it and frees it with rf_config_free(). */
RF_API rf_config *rf_config_create(void);

/* Frees a configuration. NULL is fine. A loader opened from it is
 * unaffected. */
RF_API void rf_config_free(rf_config *cfg);

/* Sets one parameter. Returns 0, or -EINVAL when the parameter is unknown
 * or the value is out of its range (rf_config_error() says which and what
 * is allowed). Nothing is changed on error. */
RF_API int rf_config_set(rf_config *cfg, rf_param param, int64_t value);

/* Reads one parameter into *value. Returns 0 or -EINVAL (unknown param). */
RF_API int rf_config_get(const rf_config *cfg, rf_param param, int64_t *value);

/* The detail of the last failed call on cfg, or "" when none. The string
 * belongs to cfg and stays valid until the next call on it. */
RF_API const char *rf_config_error(const rf_config *cfg);

/* ------------------------------------------------------------------------
 * Loader (the consumer side)
 * ------------------------------------------------------------------------ */

typedef struct rf_loader rf_loader;

/*
 * One batch, filled by rf_loader_next(). Every pointer points into the
 * shared ring and stays valid until the batch is passed to
 * rf_loader_release() or the loader is closed; the memory is read-only by
 * convention (the producers will overwrite it after release).
 */
typedef struct rf_batch {
    void *data;          /* samples * sample_bytes bytes, page-aligned */
    size_t bytes;        /* samples * sample_bytes: the pixel area in use */
    size_t sample_bytes; /* height * width * channels */
    uint32_t samples;    /* samples in this batch (last may be short) */
    uint32_t height;     /* as configured */
    uint32_t width;
    uint32_t channels;
    rf_layout layout;
    uint32_t slot;           /* which ring slot holds it, 0..slots-1 */
    const int64_t *labels;   /* samples entries */
    const uint64_t *indices; /* the dataset index of each sample */
    uint64_t epoch;          /* 0-based */
    uint64_t number;         /* batch number within the epoch, 0-based */
    uint64_t sequence;       /* batch number across all epochs */
    uint64_t handle;         /* opaque; identifies the batch to release */
    uint64_t reserved_[6];
} rf_batch;

/*
 * Starts the producers and fills the ring. On success *out is a new loader
 * that the caller closes with rf_loader_close(), and cfg may be freed at
 * once.
 *
 * Errors: -EINVAL (inconsistent configuration), -ENOMEM (no memory for the
 * ring: the detail says how many bytes were asked for and what limits
 * them), -EMFILE, RF_E_NO_PRODUCER_BINARY, RF_E_FORK_UNSAFE, or the -errno
 * of a failed system call. On error *out is NULL and, when errp is not NULL,
 * *errp receives a malloc'd detail message for the caller to free().
 *
 * Processes: the producers are children of the calling thread. They are
 * killed (PR_SET_PDEATHSIG) when that thread exits, so open the loader
 * from a thread that outlives it, e.g. the main thread. They inherit no fd
 * of the caller's besides the ring's own, and ignore SIGINT so that Ctrl-C
 * reaches only the training process, which then closes the loader. The
 * caller must not reap them (waitpid(-1, ...) would steal their status)
 * nor set SIGCHLD to SIG_IGN.
 */
RF_API int rf_loader_open(rf_loader **out, const rf_config *cfg, char **errp);

/*
 * Waits for the next batch and fills *batch with a zero-copy view of it.
 * Returns 1 with a batch, 0 at the end of the last epoch (every call after
 * that returns 0 too), or a negative code:
 *   RF_E_ALL_SLOTS_HELD  the caller holds every slot, so waiting would hang;
 *   RF_E_PRODUCER_DIED   a producer died (the detail names pid and signal);
 *   RF_E_PRODUCER_FAILED a producer stopped with an error (detail says why);
 *   RF_E_BAD_HANDLE      the shared rings were corrupted;
 *   -EINTR               a signal arrived while waiting; call again.
 * After any error other than -EINTR and RF_E_ALL_SLOTS_HELD the loader can
 * only be closed. Waiting spins for RF_PARAM_SPIN_NS and then sleeps in the
 * kernel; the call notices a dead producer at once, without a timer.
 */
RF_API int rf_loader_next(rf_loader *loader, rf_batch *batch);

/*
 * Gives the batch's slot back so that producers can refill it. A batch may
 * be released in any order and at any time before close. Returns 0, or
 * -EINVAL when the batch is not one this loader handed out and has not yet
 * been released (then nothing happens).
 */
RF_API int rf_loader_release(rf_loader *loader, const rf_batch *batch);

/*
 * Stops the producers (ending a run in the middle of an epoch is fine),
 * waits for them for at most a second, kills any that remain, and frees
 * everything. Every pointer from rf_loader_next() becomes invalid. NULL is
 * fine.
 */
RF_API void rf_loader_close(rf_loader *loader);

/* The detail of the last error on loader, or "" when none. The string
 * belongs to loader and stays valid until the next call on it. */
RF_API const char *rf_loader_error(const rf_loader *loader);

/* Counters since open. Filled by rf_loader_stats(). */
typedef struct rf_stats {
    uint64_t batches;              /* batches handed out */
    uint64_t samples;              /* samples handed out */
    uint64_t bytes;                /* pixel bytes handed out */
    uint64_t wait_ns;              /* time spent waiting inside next() */
    uint64_t elapsed_ns;           /* time since open */
    uint32_t producers;            /* producer processes */
    uint32_t slots;                /* slots in the ring */
    uint64_t producer_busy_ns[64]; /* per producer (first 64): time spent
                                      filling batches */
    uint64_t reserved_[8];
} rf_stats;

/* Fills *stats. Returns 0 or -EINVAL (NULL argument). Cheap: reads
 * counters only. */
RF_API int rf_loader_stats(const rf_loader *loader, rf_stats *stats);

/* ------------------------------------------------------------------------
 * The synthetic source, so that any consumer can check what it received.
 * ------------------------------------------------------------------------ */

/* Writes the pixels of synthetic sample `index` into dst (height * width *
 * channels bytes) in the given layout: the bytes every producer writes for
 * that sample. Thread-safe, no allocation. */
RF_API void rf_synthetic_fill(uint64_t seed, uint64_t index, uint32_t height,
                              uint32_t width, uint32_t channels,
                              rf_layout layout, void *dst);

/* The label of synthetic sample `index`, in [0, classes). */
RF_API int64_t rf_synthetic_label(uint64_t seed, uint64_t index,
                                  uint32_t classes);

/* ------------------------------------------------------------------------
 * The producer side, for the ringfeed-producer helper.
 * ------------------------------------------------------------------------ */

/* The whole program of a producer process: attaches to the segments named
 * on the command line, fills batches until told to stop, and returns the
 * process exit status. The ringfeed-producer helper's main() calls only
 * this; a statically linked custom helper can do the same. Not for any
 * other use. */
RF_API int rf_producer_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif /* RINGFEED_H */
