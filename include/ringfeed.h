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
 *     char *why = NULL;
 *     int rc = rf_loader_open(&loader, cfg, &why);
 *     rf_config_free(cfg);                 // the loader keeps its own copy
 *     if (rc < 0) {
 *         fprintf(stderr, "%s\n", why);    // malloc'd; ours to free
 *         free(why);
 *         return rc;
 *     }
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
 *  - Free functions accept NULL and do nothing. No call crashes on a NULL
 *    object or pointer: each says what it returns then, -EINVAL where it
 *    returns an int code, 0 for a count and "" for a string.
 *  - An object may be used by one thread at a time; different objects may
 *    be used by different threads at once. The library starts no threads.
 *  - fork(): a child must not use a loader its parent opened: the rings
 *    and producers are the parent's, so rf_loader_next(),
 *    rf_loader_release() and rf_loader_arena() there return
 *    RF_E_FORK_UNSAFE and change nothing. rf_loader_close() in the child
 *    only frees the child's copy (its mappings, fds and memory); the
 *    parent's run goes on. The child may also just leave it: its copy goes
 *    away when it exits or execs.
 *    A config is plain memory: after fork() parent and child each have
 *    their own copy to use and free. Datasets and pack writers: see
 *    rf_dataset_open() and rf_pack_writer_create().
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
#define RF_VERSION_MINOR 2
#define RF_VERSION_PATCH 0
#define RF_VERSION_NUMBER                                                      \
    (RF_VERSION_MAJOR * 10000 + RF_VERSION_MINOR * 100 + RF_VERSION_PATCH)

/* Returns RF_VERSION_NUMBER of the library that is loaded. Safe from any
 * thread. */
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
      "CUDA context (use spawn mode); or a child of fork() called its "        \
      "parent's loader (open its own)")                                        \
    X(CUDA, -10009,                                                            \
      "a CUDA call failed (the detail names the call and CUDA's message); "    \
      "the GPU consumer can only be closed")

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
typedef struct rf_loader rf_loader; /* the consumer side, below */

/* Memory layout of one batch of images. N = samples, H, W, C as usual. */
typedef enum rf_layout {
    RF_LAYOUT_NHWC = 0, /* pixels interleaved, as decoders produce them */
    RF_LAYOUT_NCHW = 1  /* planes, as most PyTorch models expect */
} rf_layout;

/* Where samples come from. */
typedef enum rf_source_kind {
    /* Images computed from (seed, sample index, classes), with a pattern
     * per class: see rf_synthetic_fill().
     * Written straight into the slot; RF_PARAM_TRANSFORM does not apply. */
    RF_SOURCE_SYNTHETIC = 0,
    /* No pixels at all: producers only stamp sample indices and labels.
     * Measures the transport alone. */
    RF_SOURCE_EMPTY = 1,
    /* A dataset on disk, named with rf_config_set_path(): a folder of
     * class folders (torchvision ImageFolder's labels) or a packed file
     * written by ringfeed-pack / rf_pack_writer. */
    RF_SOURCE_PATH = 2,
    /* rf_synthetic_jpeg()'s ImageNet-like images (short side 256-500,
     * 4:4:4 at quality 95 or 4:2:0 at 90), made in memory, then decoded
     * and transformed like files: the JPEG path without disk I/O. Labels
     * as rf_synthetic_label(); the pixels do not depend on them, so a
     * model cannot learn from this source. */
    RF_SOURCE_SYNTHETIC_JPEG = 3
} rf_source_kind;

/* How each image is cut to the output size (RF_PARAM_HEIGHT x WIDTH). */
typedef enum rf_transform {
    /* The whole image, resized to the output size (stretched when its
     * aspect differs; no crop, no flip): for data already of that size,
     * where it is a plain decode. */
    RF_TRANSFORM_NONE = 0,
    /* torchvision's RandomResizedCrop(scale=(min_scale, 1), ratio=(3/4,
     * 4/3)) with its exact algorithm, then a horizontal flip with p = 0.5
     * (RF_PARAM_FLIP). Randomness keyed on (seed, epoch, sample index). */
    RF_TRANSFORM_TRAIN = 1,
    /* Resize of the short side to RF_PARAM_RESIZE, then the centre crop,
     * as torchvision's Resize(int) + CenterCrop on PIL images (the same
     * bytes with RF_PARAM_DCT_SCALING 0), with one difference:
     * where the output is larger than the resized image on an axis (a
     * non-square output with RF_PARAM_RESIZE below its long side),
     * torchvision pads that axis with zeros, and ringfeed stretches the
     * image's whole extent on it to the output instead. */
    RF_TRANSFORM_EVAL = 2
} rf_transform;

/* What a sample that cannot be read or decoded does to its batch. */
typedef enum rf_on_error {
    /* rf_loader_next() returns RF_E_CORRUPT_SAMPLE naming the sample. */
    RF_ON_ERROR_FAIL = 0,
    /* The sample is left out: the batch comes out shorter (rf_batch.samples
     * and .skipped say so) and the failure is counted and listed
     * (rf_loader_sample_errors()). Too many failures (RF_PARAM_MAX_ERRORS,
     * RF_PARAM_MAX_ERROR_PPM) end the run with RF_E_CORRUPT_SAMPLE. A
     * batch whose every sample failed comes out empty (samples 0), keeping
     * its number; an epoch whose every sample failed ends the run with
     * RF_E_CORRUPT_SAMPLE at its last failure, whatever the limits (also
     * RF_PARAM_MAX_ERROR_PPM 1000000): it would deliver nothing, nor would
     * the next. (An epoch a loader starts at a later batch,
     * RF_PARAM_START_BATCH, counts only from there and never ends so.) */
    RF_ON_ERROR_SKIP = 1
} rf_on_error;

/* Which images that libjpeg decodes with a warning (damage it decoded
 * around) count as decoded (RF_PARAM_JPEG_WARNINGS). */
typedef enum rf_jpeg_verdict {
    /* As PIL, torchvision's default loader (default): a file cut short
     * (no end-of-image marker) fails, as PIL refuses it without
     * LOAD_TRUNCATED_IMAGES; the warnings PIL ignores ("N extraneous
     * bytes before marker", corrupt data decoded around) do not. */
    RF_JPEG_AS_PIL = 0,
    /* Every image that decodes at all, a truncated one's missing rows
     * grey (PIL with LOAD_TRUNCATED_IMAGES = True). */
    RF_JPEG_LENIENT = 1,
    /* Any libjpeg warning fails the sample (ringfeed 0.1's default). */
    RF_JPEG_STRICT = 2
} rf_jpeg_verdict;

/* What happens when a producer process dies: killed (the OOM killer, a
 * user), crashed, or stopped for RF_PARAM_BATCH_TIMEOUT_MS. */
typedef enum rf_on_producer_death {
    /* A new producer takes its place and the batches it owed are filled
     * again, so the run goes on with every sample exactly once and the
     * same bytes as an undisturbed run; rf_stats.respawns counts the
     * replacements. It is RF_E_PRODUCER_DIED after all when more than
     * RF_PARAM_MAX_RESPAWNS producers have been replaced within
     * RF_PARAM_RESPAWN_WINDOW_S.
     * A sample during which three producers crashed (by a signal other
     * than SIGKILL, or an exit with a non-zero status) or timed out, over
     * the whole run, breaks the decoder: with RF_ON_ERROR_SKIP it is left
     * out and listed like a corrupt sample (its reason says so); with
     * RF_ON_ERROR_FAIL the run ends with RF_E_PRODUCER_DIED naming it
     * (file and index) and the other samples that broke producers. Counts
     * are kept per sample, so several such samples in flight at once are
     * each caught; three deaths on one batch between its samples end the
     * run too. Also when three producers in a row crashed or timed out
     * before they took up work (before attaching to the loader, or idle
     * before their first batch): the helper cannot run (a missing shared
     * library, another version's helper), and the detail names it. */
    RF_ON_DEATH_RESPAWN = 0,
    /* rf_loader_next() returns RF_E_PRODUCER_DIED naming the producer's
     * pid, its signal or exit status, and the batch and sample it was
     * filling. */
    RF_ON_DEATH_FAIL = 1
} rf_on_producer_death;

/* How producer processes are started. */
typedef enum rf_start_mode {
    /* posix_spawn of the ringfeed-producer helper: safe in any process. */
    RF_START_SPAWN = 0,
    /* fork() without exec: faster to start, but refused with
     * RF_E_FORK_UNSAFE unless this process is single-threaded and has not
     * loaded the CUDA driver. The producers keep none of this process's
     * signal handlers (every signal starts at its default, as in spawn
     * mode). */
    RF_START_FORK = 1
} rf_start_mode;

/*
 * Parameters, set with rf_config_set() and read with rf_config_get(). Each
 * one's name, default, range and a line of documentation come from one
 * table in the library, the one rf_config_set() checks against and
 * rf_config_create() fills from; rf_param_at() and rf_param_lookup() read
 * it, so that a binding or a tool can build its options from it. Values
 * are int64_t; the seed is taken as its 64-bit pattern. "a..b" below is
 * the range rf_config_set() accepts.
 *
 * Numbers come in bands of 16, one band per area, so that a new
 * parameter lands beside its kin: area a holds 64 + 16a .. 79 + 16a, and
 * a new area takes the next band, from 176.
 *
 *     64  shape and batch            128  bad input
 *     80  order and sharding         144  faults
 *     96  source                     160  processes
 *     112 decode and augmentation
 *
 * ABI note. A number, once published, always names the same parameter
 * and is never reused. ringfeed 0.1 numbered the parameters 1..42 in the
 * order they were added (each one's "was N" below); rf_config_set(),
 * rf_config_get() and rf_param_lookup() still accept those old numbers
 * and map each to the parameter it named, so that a program compiled
 * against 0.1's header keeps working unchanged; rf_param_at() lists each
 * parameter once, by its banded number. A program compiled against this
 * header passes the banded numbers, which a library from before them (one
 * without rf_param_at()) refuses with -EINVAL. Any other number (0,
 * 43..63, a band's free numbers) is not a parameter: -EINVAL.
 */
typedef enum rf_param {
    /* ---- Shape and batch (64..79) ---- */
    RF_PARAM_BATCH_SIZE = 64, /* was 1; samples per batch, 1..65536;
                                 default 32 */
    RF_PARAM_HEIGHT = 65,     /* was 2; sample height in pixels,
                                 1..65536; default 224 */
    RF_PARAM_WIDTH = 66,      /* was 3; sample width in pixels, 1..65536;
                                 default 224 */
    RF_PARAM_CHANNELS = 67,   /* was 4; bytes per pixel, 1..4; default 3 */
    RF_PARAM_LAYOUT = 68,     /* was 5; rf_layout; default RF_LAYOUT_NHWC */
    RF_PARAM_DROP_LAST = 69,  /* was 10; 1: drop each epoch's partial last
                                 batch; 0 (default): deliver it short */

    /* ---- Order and sharding (80..95) ---- */
    RF_PARAM_SEED = 80,    /* was 8; keys the sample order, the random
                              crops and flips and synthetic content; any
                              int64_t (its 64-bit pattern); default 0 */
    RF_PARAM_EPOCHS = 81,  /* was 9; passes over the dataset, 0..2^30;
                              0 = no end (2^40 - 1 batches); default 1 */
    RF_PARAM_SHUFFLE = 82, /* was 15; 1 (default): a new sample order each
                              epoch; 0: the dataset's order */
    RF_PARAM_ORDERED = 83, /* was 11; 1 (default): batches in batch order;
                              0: each as soon as it is ready */
    /* Sharding for data-parallel training: rank r of W sees positions
     * r, r + W, r + 2W, ... of each epoch's global order, and every rank
     * gets the same number of batches. */
    RF_PARAM_RANK = 84,       /* was 19; -1..2^31-1; -1 (default): $RANK,
                                 else $OMPI_COMM_WORLD_RANK, else 0 */
    RF_PARAM_WORLD_SIZE = 85, /* was 20; 0..2^31-1; 0 (default):
                                 $WORLD_SIZE, else $OMPI_COMM_WORLD_SIZE,
                                 else 1. Both come from one launcher:
                                 torchrun's pair when RANK or WORLD_SIZE
                                 is set. A value that is not a plain
                                 decimal (a size of at least 1), or half
                                 a pair when both are taken from it,
                                 fails open with -EINVAL naming the
                                 variable */
    RF_PARAM_SHARD_PAD = 86,  /* was 21; when W does not divide N: 1
                                 (default) repeats the first samples of
                                 the order so every rank has ceil(N/W),
                                 like PyTorch's DistributedSampler; 0
                                 drops the rest so every rank has
                                 floor(N/W) */
    /* Resuming: start at batch START_BATCH of epoch START_EPOCH and yield
     * exactly the batches an uninterrupted run would have from there. */
    RF_PARAM_START_EPOCH = 87, /* was 22; 0..2^30; default 0; must be
                                  below EPOCHS unless EPOCHS is 0 */
    RF_PARAM_START_BATCH = 88, /* was 23; 0..2^40; default 0; must be
                                  below the batches per epoch */

    /* ---- Source (96..111) ---- */
    RF_PARAM_SOURCE = 96,      /* was 12; rf_source_kind; default
                                  RF_SOURCE_SYNTHETIC (rf_config_set_path()
                                  sets RF_SOURCE_PATH) */
    RF_PARAM_SAMPLES = 97,     /* was 13; a synthetic or empty source's
                                  samples per epoch, 1..2^38; default
                                  10000 (a dataset has its own) */
    RF_PARAM_CLASSES = 98,     /* was 14; a synthetic or empty source's
                                  labels are 0..CLASSES-1, 1..2^31;
                                  default 1000 (a dataset has its own) */
    RF_PARAM_INDEX_CACHE = 99, /* was 35; folder: 1 reads and writes the
                                  listing in FOLDER/.ringfeed-index so
                                  that the next loader opened on the
                                  folder (another process's, a job
                                  started again) does not list it again
                                  (one rf_config_continue() set up
                                  reads its carried listing); it is
                                  trusted only while the class folders
                                  are the same and no folder listed
                                  changed (ctime) since the listing
                                  began. Where the folder cannot take
                                  it (read-only, as shared datasets
                                  are mounted; a full disk) no cache is
                                  kept, nothing is written, the open
                                  succeeds and lists the folder, and
                                  the message handler is told once per
                                  open: the folder, the cause and what
                                  to do (write the cache once from a
                                  read-write mount, or set this to 0);
                                  not silenced by RF_PARAM_QUIET;
                                  default 0 */

    /* ---- Decode and augmentation (112..127), for RF_SOURCE_PATH and
     * RF_SOURCE_SYNTHETIC_JPEG ---- */
    RF_PARAM_TRANSFORM = 112,        /* was 24; rf_transform; default
                                        RF_TRANSFORM_TRAIN. Not applied to
                                        a pack's raw samples (see
                                        RF_SAMPLE_ZSTD) */
    RF_PARAM_RESIZE = 113,           /* was 25; eval: short side before the
                                        centre crop, 0..65536; 0 (default)
                                        = 8/7 of the output size, i.e. 256
                                        for 224 */
    RF_PARAM_MIN_SCALE_PPM = 114,    /* was 26; train: smallest crop area,
                                        in parts per million of the image,
                                        1..1000000; default 80000
                                        (torchvision's 0.08) */
    RF_PARAM_FLIP = 115,             /* was 27; train: 1 (default) flips
                                        half the samples horizontally */
    RF_PARAM_DCT_SCALING = 116,      /* was 42; 1 (default): a JPEG whose
                                        crop is at least twice the output
                                        size is decoded at a DCT scale of
                                        1/8, 2/8 or 4/8 (libjpeg's own
                                        downscaling, much faster) before
                                        the resize: pixels then differ a
                                        little from torchvision's (PIL
                                        decodes in full), more the smaller
                                        the output; 0: always decode in
                                        full, the same pixels as PIL's to
                                        within 1 */
    RF_PARAM_EXIF_ORIENTATION = 117, /* was 34; 1: apply the EXIF
                                        orientation tag of a JPEG (PNG's
                                        and WebP's are not read); 0
                                        (default, as torchvision): ignore
                                        it */
    RF_PARAM_PILLOW = 118,           /* new in 0.2; eval: the Pillow
                                        release whose resize eval matches
                                        byte for byte (with
                                        RF_PARAM_DCT_SCALING 0), 1..1000.
                                        PIL resizes in two passes, each
                                        rounded to 8 bits; Pillow 13
                                        resizes the height first where it
                                        loses more than twice as many
                                        pixels as the width (images over
                                        twice as tall as wide, shrunk),
                                        Pillow 12 and older the width
                                        first always: some pixels of those
                                        images differ by 1. 13 (default):
                                        as Pillow 13; 12 or less: width
                                        first */

    /* ---- Bad input (128..143): what a sample that does not decode, or
     * would cost too much, does ---- */
    RF_PARAM_ON_ERROR = 128,          /* was 28; rf_on_error; default
                                         RF_ON_ERROR_FAIL */
    RF_PARAM_MAX_ERRORS = 129,        /* was 29; skip: fail once more
                                         samples than this have failed in
                                         the run (a file that fails in
                                         every epoch counts once),
                                         0..2^63-1; 0 (default) = no
                                         count limit */
    RF_PARAM_MAX_ERROR_PPM = 130,     /* was 30; skip: fail once the
                                         failures of one epoch exceed this
                                         share of its samples, in parts
                                         per million, 0..1000000; default
                                         10000 (1%); 1000000 lets any
                                         share fail but all: an epoch with
                                         no sample left fails (see
                                         RF_ON_ERROR_SKIP) */
    RF_PARAM_MAX_PIXELS = 131,        /* was 31; refuse images with more
                                         pixels, 1..2^40; default 89478485
                                         (as PIL) */
    RF_PARAM_MAX_SCANS = 132,         /* was 32; refuse progressive JPEGs
                                         with more scans, 1..100000;
                                         default 100 */
    RF_PARAM_MAX_DECODE_MEMORY = 133, /* was 40; refuse JPEGs whose decode
                                         needs more bytes, 2^20..2^40 (1
                                         MiB..1 TiB): a progressive
                                         (multi-scan) file keeps every DCT
                                         coefficient, 2 bytes per pixel
                                         per full-size component (6 MB per
                                         megapixel at 4:4:4, 3 at 4:2:0),
                                         while a baseline one needs a few
                                         rows; each producer may hold this
                                         much at once; default 2^30
                                         (1 GiB), above what any image
                                         under the default
                                         RF_PARAM_MAX_PIXELS needs */
    RF_PARAM_JPEG_WARNINGS = 134,     /* was 33; rf_jpeg_verdict;
                                         default RF_JPEG_AS_PIL. 0.1's 0
                                         (any warning fails) is now
                                         RF_JPEG_STRICT (2), and 0 means
                                         PIL's verdicts; 1 still accepts
                                         every image */

    /* ---- Faults (144..159): producers that die or hang ---- */
    RF_PARAM_ON_PRODUCER_DEATH = 144, /* was 36; rf_on_producer_death;
                                         default RF_ON_DEATH_RESPAWN */
    RF_PARAM_MAX_RESPAWNS = 145,      /* was 37; respawn: replace at most
                                         this many producers within
                                         RF_PARAM_RESPAWN_WINDOW_S (the
                                         count starts again each window,
                                         so a long run survives occasional
                                         kills), 0..2^63-1; default 1000 */
    RF_PARAM_RESPAWN_WINDOW_S = 146,  /* was 41; the window
                                         RF_PARAM_MAX_RESPAWNS counts in,
                                         in seconds: it starts at
                                         rf_loader_open() and again at the
                                         first replacement after it ends;
                                         1..2^31; default 3600 (an hour) */
    RF_PARAM_BATCH_TIMEOUT_MS = 147,  /* was 38; a producer that owes
                                         batches and delivers none for
                                         this long (stopped alone, or
                                         stuck on one sample) is killed
                                         and handled as dead, once it is
                                         still so 200 ms later; the time
                                         a replacement takes to start
                                         counts too. Time the whole job
                                         spends stopped by signals (Ctrl-Z
                                         and fg, kill -STOP and -CONT of
                                         its process group) does not
                                         count: a producer's first SIGCONT
                                         after its last progress restarts
                                         its clock (later ones only once
                                         it delivers again). A freeze
                                         without signals (the cgroup
                                         freezer: docker pause, Slurm's
                                         suspend with cgroup process
                                         tracking) of more than 1 s does
                                         not count while the caller waits
                                         in rf_loader_next(), but does if
                                         it finds the caller in its own
                                         step. 0..2^40; 0 (default) = no
                                         limit */
    RF_PARAM_QUIET = 148,             /* was 39; 0 (default): report each
                                         producer replaced and the first
                                         10 samples left out under
                                         RF_ON_ERROR_SKIP (see
                                         rf_config_set_message_handler());
                                         1: only count them
                                         (rf_stats.respawns,
                                         failed_samples) */
    RF_PARAM_STALL_WARNING_MS = 149,  /* new in 0.2; when
                                         rf_loader_next() has waited this
                                         long for one batch, and again
                                         each time that wait doubles, a
                                         message (see
                                         rf_config_set_message_handler())
                                         names the batch and what each
                                         producer that owes batches is on:
                                         its sample and file, and how long
                                         since it last delivered. Calls
                                         that a signal cut short (-EINTR)
                                         and the next call make one wait.
                                         Only
                                         reports (RF_PARAM_BATCH_TIMEOUT_MS
                                         is what replaces a stuck
                                         producer); not silenced by
                                         RF_PARAM_QUIET. 0..2^40; 60000
                                         (default, a minute); 0 = never */

    /* ---- Processes (160..175) ---- */
    RF_PARAM_PRODUCERS = 160,    /* was 6; producer processes, 0..1024;
                                    0 (default) = this rank's CPU
                                    budget: affinity, container quota,
                                    share of the node's ranks
                                    (rf_loader_cpu_budget()) */
    RF_PARAM_SLOTS = 161,        /* was 7; batches in the ring, 0..65536;
                                    0 (default) = 3 per producer, at
                                    least 4: one being filled, one
                                    ready, one of slack for uneven
                                    samples */
    RF_PARAM_START_MODE = 162,   /* was 16; rf_start_mode; default
                                    RF_START_SPAWN */
    RF_PARAM_SPIN_NS = 163,      /* was 17; how long a waiting side spins
                                    before it sleeps in the kernel, in
                                    ns, 0..10^9; default 20000 */
    RF_PARAM_PIN_PRODUCERS = 164 /* was 18; 1 (default): pin each
                                    producer to a CPU of this rank's slice
                                    of the affinity mask, one each as far
                                    as they go, on the CPUs the process's
                                    other open loaders use least (not
                                    where the mask is already the rank's
                                    own, ranks share CPUs, or a rank of
                                    several has no local rank: see
                                    rf_loader_cpu_budget()); 0: leave
                                    them alone */
} rf_param;

/* What kind of value a parameter takes, for a binding to pick its type. */
typedef enum rf_param_kind {
    RF_PARAM_KIND_INTEGER = 0, /* a number in [min, max] */
    RF_PARAM_KIND_BOOLEAN = 1, /* 0 or 1 */
    RF_PARAM_KIND_CHOICE = 2   /* one of an enum's values min..max
                                  (rf_layout, rf_transform, ...), each
                                  with a name in rf_param_info.choices */
} rf_param_kind;

/* One parameter as the library's table describes it, filled by
 * rf_param_at() and rf_param_lookup(). The strings are static: they stay
 * valid as long as the library is loaded, and are never freed. */
typedef struct rf_param_info {
    rf_param param; /* its number (the banded one, never an old one) */
    rf_param_kind kind;
    const char *name;      /* "batch_size": lower case, unique, a valid C and
                              Python identifier; RF_PARAM_ + its upper case
                              is the enumerator */
    const char *doc;       /* one line, no newline, no trailing period */
    const char *choices;   /* RF_PARAM_KIND_CHOICE: the names of the values
                              min, min + 1, ..., max, separated by single
                              spaces ("nhwc nchw"), as ringfeed-bench takes
                              them; NULL for the other kinds */
    int64_t default_value; /* what rf_config_create() sets */
    int64_t min, max;      /* what rf_config_set() accepts, inclusive */
    uint64_t reserved_[4];
} rf_param_info;

/* Describes the parameter at position `index` of the table: 0, 1, ... in
 * increasing number, until it returns -ERANGE (index past the last; *info
 * is then untouched), so that a caller can list every parameter without
 * knowing how many there are. Returns 0, -ERANGE, or -EINVAL for a NULL
 * info. A pure read of a static table: thread-safe, no allocation, and
 * the same in every process. */
RF_API int rf_param_at(unsigned index, rf_param_info *info);

/* Describes parameter `param`, given by its number or by its 0.1 number
 * (see the ABI note above; info->param is then the banded number).
 * Returns 0, or -EINVAL when param is not a parameter or info is NULL
 * (*info is then untouched). Thread-safe and allocation-free, as
 * rf_param_at(). */
RF_API int rf_param_lookup(rf_param param, rf_param_info *info);

/* Creates a configuration holding every default (rf_param_info's
 * default_value). Returns NULL when out of memory. The caller owns it and
 * frees it with rf_config_free(). */
RF_API rf_config *rf_config_create(void);

/* Frees a configuration. NULL is fine. A loader opened from it is
 * unaffected. */
RF_API void rf_config_free(rf_config *cfg);

/* Sets one parameter, given by its number or by its 0.1 number (see the
 * ABI note above). Returns 0, or -EINVAL when cfg is NULL, the parameter
 * is unknown or the value is out of its range, [min, max] of
 * rf_param_info (rf_config_error() says which and what is allowed).
 * Nothing is changed on error. */
RF_API int rf_config_set(rf_config *cfg, rf_param param, int64_t value);

/* Reads one parameter, given by its number or by its 0.1 number, into
 * *value. Returns 0 or -EINVAL (cfg or value NULL, or an unknown param;
 * but for a NULL cfg, rf_config_error() says which). The parameters are
 * never changed. */
RF_API int rf_config_get(const rf_config *cfg, rf_param param, int64_t *value);

/* The detail of the last failed call on cfg, or "" when none or cfg is
 * NULL. The string belongs to cfg and stays valid until the next call on
 * it. */
RF_API const char *rf_config_error(const rf_config *cfg);

/* Sets the dataset to read (a folder of class folders or a packed file)
 * and RF_PARAM_SOURCE to RF_SOURCE_PATH. The path is copied; it must be
 * shorter than 4096 bytes (else -ENAMETOOLONG); NULL or "" is -EINVAL, as
 * is a NULL cfg.
 * Whether it exists is checked by rf_loader_open(). */
RF_API int rf_config_set_path(rf_config *cfg, const char *path);

/* The path set by rf_config_set_path(), or "" when none or cfg is NULL.
 * Owned by cfg; valid until the next rf_config_set_path() or
 * rf_config_free() on it. */
RF_API const char *rf_config_get_path(const rf_config *cfg);

/* Makes the loaders opened with cfg go on with the run of `from`, for
 * starting it again at another position (a later epoch, a checkpoint's
 * batch) as the same run. They read the dataset `from` reads, as `from`
 * listed it at its open: the same folder or packed file (the one `from`
 * opened, whatever its path names now), the same samples, indices and
 * labels, instead of listing the path again; files added since are not
 * read, a file removed or damaged since fails as that sample does
 * (RF_PARAM_ON_ERROR), and RF_PARAM_INDEX_CACHE is not used. And they take
 * over its record of what failed, as it stands now:
 *  - samples that failed under RF_ON_ERROR_SKIP: rf_loader_sample_errors()
 *    lists those of `from` first, rf_stats.failed_samples counts on from
 *    its count (an epoch begun again counts its failures again),
 *    RF_PARAM_MAX_ERRORS counts the samples that failed in `from` too
 *    (each once), and the first ten samples left out are said over the
 *    whole run, not again at each start; RF_PARAM_MAX_ERROR_PPM counts
 *    each epoch's failures from the start of the new loader;
 *  - samples that crashed or hung producers: those condemned stay left
 *    out without being decoded again, and the others' deaths count on;
 *    rf_stats.respawns and RF_PARAM_MAX_RESPAWNS's window count on too.
 * Sets cfg's path to `from`'s (which then only names the dataset in
 * messages) and RF_PARAM_SOURCE to RF_SOURCE_PATH; what cfg carries is
 * used only while RF_PARAM_SOURCE is RF_SOURCE_PATH, a later
 * rf_config_set_path() with another path drops it, and the next
 * rf_config_continue() replaces it. cfg holds copies (two fds,
 * close-on-exec, and the records) until then or rf_config_free(): `from`
 * may be closed as soon as this returns. Returns 0; -EINVAL when cfg or
 * from is NULL or `from` reads no dataset from a path (a synthetic
 * source); -EMFILE/-ENFILE when no fd is free; -ENOMEM (rf_config_error()
 * says which). cfg is unchanged on error. `from`'s records change inside
 * rf_loader_next(): call this from the thread that calls it on `from`,
 * or while no call on `from` runs. In a fork()ed child only copies are
 * made, so a loader opened there reads the same dataset. New in 0.2. */
RF_API int rf_config_continue(rf_config *cfg, const rf_loader *from);

/* Receives one line of text (no newline) for each event a loader reports
 * while the run goes on: a producer replaced after it died ("producer
 * 1 (pid 42) was killed by signal 9 (Killed) while filling batch 17
 * (sample 4242); replaced by pid 43, 2 batches issued again"), a producer
 * count over the CPU budget, a dataset whose raw samples the transform
 * does not touch (at open: see RF_SAMPLE_ZSTD), each of the first ten
 * samples left out under RF_ON_ERROR_SKIP, once, when it first fails
 * ("left out (RF_PARAM_ON_ERROR RF_ON_ERROR_SKIP): sample 7 (...): ..."),
 * and a long wait in rf_loader_next()
 * (RF_PARAM_STALL_WARNING_MS: "the loop has waited 60.1 s for batch 2 of
 * epoch 2; producer 0 (pid 20642), which is filling it, is on sample 6
 * (...) ..."; in order, the producer filling the awaited batch is named
 * first). `message`
 * is valid during the call only. Called from inside rf_loader_open() or
 * rf_loader_next() on the caller's thread. Inside rf_loader_next() the
 * handler may call, on the loader that reports:
 *  - the reads: rf_loader_error(), rf_loader_stats(),
 *    rf_loader_cpu_budget(), rf_loader_class_name(),
 *    rf_loader_sample_errors() and rf_loader_arena();
 *  - rf_loader_keep_arena() (it only marks the loader for close);
 *  - rf_loader_interrupt(): the rf_loader_next() that runs the handler
 *    then returns -EINTR where it would wait (a batch ready is still
 *    handed out);
 *  - rf_loader_close(), which is put off until rf_loader_next() returns:
 *    that call stops at once (no more messages, no batch), frees the
 *    loader as rf_loader_close() does and returns -ECANCELED, after
 *    which the loader must not be used at all (not even rf_loader_error()
 *    or a second close).
 * rf_loader_next() and rf_loader_release() from the handler are refused
 * with -EBUSY and change nothing (the detail, in rf_loader_error() until
 * the handler returns, says what to do instead); the rf_loader_next()
 * that runs the handler then goes on as if they had not been made, with
 * its own error detail. Inside rf_loader_open() the handler cannot reach
 * the loader: *out is set only on success. */
typedef void (*rf_message_fn)(void *user, const char *message);

/* Sets where a loader opened from cfg sends its messages: fn(user, text).
 * fn NULL restores the default, which writes "ringfeed: <text>" to stderr
 * only while file descriptor 2 is the same open file it was when
 * rf_loader_open() ran (so never into a file the caller opened on 2 after
 * closing stderr), and not at all when fd 2 was closed then.
 * RF_PARAM_QUIET 1 silences both for replaced producers and samples left
 * out (long waits are reported unless RF_PARAM_STALL_WARNING_MS is 0). Whatever
 * the handler, every event also shows in rf_loader_stats() and errors in
 * rf_loader_error(). Returns 0, or -EINVAL for a NULL cfg. */
RF_API int rf_config_set_message_handler(rf_config *cfg, rf_message_fn fn,
                                         void *user);

/* ------------------------------------------------------------------------
 * Loader (the consumer side)
 * ------------------------------------------------------------------------ */

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
    uint32_t skipped;        /* RF_ON_ERROR_SKIP: samples of this batch
                                left out because they failed */
    uint32_t reserved32_;
    uint64_t reserved_[5];
} rf_batch;

/*
 * Starts the producers and fills the ring. On success *out is a new loader
 * that the caller closes with rf_loader_close(), and cfg may be freed at
 * once.
 *
 * Errors: -EINVAL (inconsistent configuration), -ENOMEM (no memory for the
 * ring: the detail says how many bytes were asked for and what limits
 * them), -EMFILE, RF_E_NO_PRODUCER_BINARY, RF_E_FORK_UNSAFE, the errors
 * of rf_dataset_open() for RF_SOURCE_PATH (-ENOENT, -ENOTDIR, -EACCES,
 * RF_E_CORRUPT_SAMPLE for a damaged pack, ...), or the -errno of a failed
 * system call. The detail of an error of rf_dataset_open() begins
 * "cannot open dataset 'PATH': " (PATH as configured), and no other
 * error's does: a binding tells a dataset it may not read (-EACCES)
 * from a helper it may not start by it. On error *out is NULL and, when
 * errp is not NULL,
 * *errp receives a malloc'd detail message for the caller to free(); it
 * is NULL when out or cfg is NULL (-EINVAL) or memory ran out before the
 * message could be made.
 *
 * Processes: the producers are children of the calling process. They
 * end when it ends, even while stopped (PR_SET_PDEATHSIG with SIGCONT,
 * checked against getppid() so that the thread that started them may
 * return first; an idle producer also checks every 250 ms). Open returns
 * once each of them has got that far (or died, or 2 s passed), so that
 * one stopped as it started cannot outlive a caller killed right after. They
 * inherit no fd of the caller's besides the ring's own. They ignore
 * SIGINT, so that Ctrl-C reaches only the training process, which then
 * closes the loader, and outlive SIGUSR1 and SIGUSR2 (a batch
 * scheduler's warning to every process of a job). The caller must not
 * reap them (waitpid(-1, ...) would steal their status) nor set SIGCHLD
 * to SIG_IGN.
 */
RF_API int rf_loader_open(rf_loader **out, const rf_config *cfg, char **errp);

/*
 * Waits for the next batch and fills *batch with a zero-copy view of it.
 * Returns 1 with a batch, 0 at the end of the last epoch (every call after
 * that returns 0 too), or a negative code:
 *   RF_E_ALL_SLOTS_HELD  the caller holds every slot, so waiting would hang;
 *   RF_E_PRODUCER_DIED   a producer died or timed out and was not replaced
 *                        (RF_ON_DEATH_FAIL, or a respawn limit; the detail
 *                        names the pid, the signal, the batch and sample);
 *   RF_E_PRODUCER_FAILED a producer stopped with an error (detail says why);
 *   RF_E_BAD_HANDLE      the shared rings were corrupted;
 *   RF_E_CORRUPT_SAMPLE  a sample failed under RF_ON_ERROR_FAIL, or too
 *                        many under RF_ON_ERROR_SKIP (the detail names
 *                        the sample, its file and the reason);
 *   RF_E_FORK_UNSAFE     called in a child of fork(): the loader is its
 *                        parent's (nothing is changed);
 *   -EINVAL              NULL loader or batch;
 *   -EBUSY               called by the loader's message handler, inside
 *                        rf_loader_next() (nothing is changed: the call
 *                        that runs the handler hands out the batch once
 *                        the handler returns; see rf_message_fn);
 *   -EINTR               a signal arrived while waiting (for a batch,
 *                        or, up to 2 s, for a producer started in place
 *                        of a dead one to follow the caller), or
 *                        rf_loader_interrupt() was called; call again;
 *   -ECANCELED           the loader was closed by its message handler
 *                        during this call (see rf_message_fn): it is
 *                        freed now, with every batch still held, and
 *                        *batch is zeroed; the caller must not use the
 *                        loader again, not even to close it;
 *   -errno               poll() failed for another reason (-ENOMEM).
 * After any error other than -EINTR, -EBUSY and RF_E_ALL_SLOTS_HELD the
 * loader can only be closed (releasing the batches still held first is
 * allowed); after -ECANCELED it is gone.
 * Waiting spins for RF_PARAM_SPIN_NS and then sleeps in the kernel; the
 * call notices a dead producer at once, without a timer, and under
 * RF_ON_DEATH_RESPAWN (the default) replaces it before it goes on
 * waiting. next() may be called from any one thread at a time, not only
 * the one that opened the loader.
 */
RF_API int rf_loader_next(rf_loader *loader, rf_batch *batch);

/*
 * Cuts a wait in rf_loader_next() short from another thread (or a signal
 * handler, or the loader's message handler: see rf_message_fn): the call
 * waiting now returns -EINTR at once, or, when none waits, the first
 * call that would wait returns -EINTR instead (a call that finds a batch
 * ready still returns it). One interrupt ends one wait; nothing is lost
 * (the loader goes on at the next call as after a signal). This is how a
 * watchdog, or a binding's close() from another thread, stops a loop
 * that waits for a batch: interrupt, wait until the looping thread has
 * left next(), then rf_loader_close() (which must never run while
 * another thread is inside a call on the loader). Returns 0, -EINVAL for
 * NULL, or RF_E_FORK_UNSAFE in a child of fork(). Thread-safe
 * and async-signal-safe: one atomic store and one write() to an eventfd.
 * New in 0.2.
 */
RF_API int rf_loader_interrupt(rf_loader *loader);

/*
 * Gives the batch's slot back so that producers can refill it. A batch may
 * be released in any order and at any time before close, but not by the
 * loader's message handler while rf_loader_next() runs. Returns 0, or
 * -EINVAL when loader or batch is NULL or the batch is not one this
 * loader handed out and has not yet been released, RF_E_FORK_UNSAFE in
 * a child of fork(), or -EBUSY when called by the loader's message
 * handler inside rf_loader_next() (release it after that call returns;
 * see rf_message_fn). On error nothing changes.
 */
RF_API int rf_loader_release(rf_loader *loader, const rf_batch *batch);

/*
 * Stops the producers (ending a run in the middle of an epoch is fine),
 * waits for them for at most a second, kills any that remain, and frees
 * everything. Every pointer from rf_loader_next() becomes invalid. NULL is
 * fine. Any thread may close the loader. In a child of fork() it only
 * frees the child's copy and leaves the parent's producers running (see
 * the conventions above). Called by the loader's message handler while
 * rf_loader_next() runs, it only asks for the close, which that call
 * carries out as it returns -ECANCELED (see rf_message_fn).
 */
RF_API void rf_loader_close(rf_loader *loader);

/*
 * The shared memory every batch lies in: one mapping of *bytes bytes at
 * *base, the same from open to close, whose pages exist from open on. It
 * is there to be registered once with a DMA engine (cudaHostRegister, an
 * RDMA memory region), so that batches are copied from where the
 * producers wrote them. The caller must unregister it before
 * rf_loader_close() and must not write to it. Returns 0, -EINVAL for a
 * NULL argument, or RF_E_FORK_UNSAFE in a child of fork(): the ring is
 * the parent's, and a registration there would pin it for a process that
 * may not use it.
 */
RF_API int rf_loader_arena(const rf_loader *loader, void **base, size_t *bytes);

/*
 * Hands the arena's mapping (rf_loader_arena()'s base and bytes) to the
 * caller for after close: rf_loader_close() then stops the producers and
 * frees everything else but leaves the arena mapped, and the caller
 * unmaps it with munmap(base, bytes) once nothing reads it any more. This
 * is for a binding whose views of batches may outlive the loader (a
 * tensor kept by a garbage-collected language): such a view then reads
 * the last bytes written there instead of faulting. The memory is freed
 * at that munmap (the loader closes its file descriptor at close).
 * Returns 0, -EINVAL for a NULL loader, or RF_E_FORK_UNSAFE in a child of
 * fork() (the child's copy of the mapping goes with rf_loader_close()).
 * Same thread rules as rf_loader_release(), but allowed from the
 * loader's message handler (see rf_message_fn): next() never reads
 * what it sets.
 */
RF_API int rf_loader_keep_arena(rf_loader *loader);

/* The detail of the last error on loader, or "" when none or loader is
 * NULL. The string belongs to loader and stays valid until the next call
 * on it. */
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
    uint64_t failed_samples;       /* failures (skip policy): a sample
                                      counts once for every epoch it
                                      failed in */
    /* Where the slots are now; the four always add up to `slots`. */
    uint32_t slots_at_producers; /* ordered, being filled or published */
    uint32_t slots_ready;        /* filled, waiting for rf_loader_next() */
    uint32_t slots_with_user;    /* handed out, not yet released */
    uint32_t slots_free;         /* idle: every batch has been issued */
    uint64_t respawns;           /* producers replaced after dying */
    /* The run's shape, fixed at open (since 0.2; a library before it
     * leaves them 0): what a binding needs for len() and a checkpoint. */
    uint64_t batches_per_epoch; /* this rank's batches in each epoch */
    uint64_t dataset_samples;   /* samples in the dataset (or the
                                   synthetic source), before sharding */
    uint32_t rank, world_size;  /* as resolved (from the environment when
                                   RF_PARAM_RANK/WORLD_SIZE were unset) */
    uint64_t listing_digest;    /* RF_SOURCE_PATH: the dataset's, as
                                   rf_dataset_info has it (a checkpoint
                                   keeps it); 0 for the other sources */
} rf_stats;

/* Fills *stats. Returns 0 or -EINVAL (NULL argument). Cheap: reads
 * counters only. */
RF_API int rf_loader_stats(const rf_loader *loader, rf_stats *stats);

/*
 * The CPU budget the loader's producer count and pinning came from, as
 * one line, e.g. "4 CPUs: affinity 0-15, quota 8.00 (the cgroup v2
 * cpu.max of /sys/fs/cgroup/pod), local rank 1 of 4
 * (LOCAL_RANK/LOCAL_WORLD_SIZE); pinned to 4-7". The budget is the
 * affinity mask, capped by the CFS quota of the process's cgroups
 * (rounded down, at least 1), divided among the ranks of the node (the
 * local rank and size of RF_LOCAL_RANK and RF_LOCAL_WORLD_SIZE when set,
 * else torchrun's LOCAL_RANK and LOCAL_WORLD_SIZE, Open MPI's
 * OMPI_COMM_WORLD_LOCAL_RANK and _LOCAL_SIZE, MPICH's and Intel MPI's
 * MPI_LOCALRANKID and MPI_LOCALNRANKS, or Slurm's SLURM_LOCALID
 * and the tasks of this node); each rank's producers are pinned to a
 * slice of the mask of their own (NUMA node and core order), or not at
 * all when a rank's share is under one CPU, the mask is already the
 * rank's own (a launcher that binds ranks), or the rank is one of several
 * (RF_PARAM_WORLD_SIZE above 1) with no local rank, whose whole mask
 * every rank of the node takes (said by a message). RF_PARAM_PRODUCERS, when
 * set, wins over the count (with a message when it exceeds the budget).
 * Copies the line into out (len bytes, always terminated, cut short if
 * longer; RF_CPU_BUDGET_MAX bytes always hold it whole) and returns the
 * budget's producer count (>= 1), or -EINVAL for a NULL argument or len
 * 0. A read of the loader's own copy: same thread rules as
 * rf_loader_stats().
 */
#define RF_CPU_BUDGET_MAX 1024
RF_API int rf_loader_cpu_budget(const rf_loader *loader, char *out, size_t len);

/* The name of class `label` in the listing this loader reads (its
 * producers' labels), as rf_dataset_class_name() gives it: for a folder,
 * the class folder's name as it was when the loader was opened, even if
 * folders have been added or removed since (opening the path again would
 * name the classes of the new listing). Copies it into out (len bytes,
 * always NUL-terminated, cut short if longer). Returns 0, -ERANGE (label
 * not below the dataset's classes), -ENOENT (a packed file with no named
 * sample of that label), -ENOTSUP (a synthetic source: its classes have
 * no names), -ENODATA (the loader did not keep its listing open, as
 * when few file descriptors were free at open: open the path with
 * rf_dataset_open() instead), or -EINVAL (loader or out is NULL, or len
 * is 0). A read of what open made: same thread rules as rf_loader_stats().
 */
RF_API int rf_loader_class_name(const rf_loader *loader, uint32_t label,
                                char *out, size_t len);

/* One failed sample, as listed by rf_loader_sample_errors(). */
typedef struct rf_sample_error {
    uint64_t index; /* dataset index */
    uint64_t epoch;
    char message[496]; /* "sample 18231 (/data/train/n01/x.jpg): premature
                          end of data; ...", or for a packed file "sample 7
                          (n01/x.jpg, packed offset 4096) of /data/t.pack:
                          ..." */
} rf_sample_error;

/* Copies the first failure of each of the first min(max, count) samples
 * that failed in the run (oldest first; the first 1024 samples are kept)
 * into out and returns how many samples have failed in all, each counted
 * once however many epochs it failed in (0 for a NULL loader). A file
 * that fails in every epoch thus takes one entry, and a file that breaks
 * late in a long run is still listed. out may be NULL when max is 0. */
RF_API uint64_t rf_loader_sample_errors(const rf_loader *loader,
                                        rf_sample_error *out, size_t max);

/* The sample whose failure ended a run, as rf_loader_failed_sample()
 * gives it: the parts rf_loader_error()'s message names, apart, and the
 * file's path whole (a message shortens a long one in the middle). */
typedef struct rf_failed_sample {
    uint64_t index;   /* dataset index */
    uint64_t epoch;   /* the epoch of the batch it was to go into */
    char path[4096];  /* the image's file for a folder, the packed file for
                         a pack; "" when not known (a synthetic source, a
                         loader that did not keep its listing: see
                         rf_loader_class_name(), or a path of 4096 bytes
                         or more) */
    char name[4096];  /* a packed sample's stored name, else "" (also
                         when path is "") */
    char reason[512]; /* what was wrong with it ("premature end of data
                         segment", ...), without the sample's name; its
                         whole failure when the name cannot be told
                         apart (a synthetic source, no listing kept) */
} rf_failed_sample;

/* Fills out with the sample whose failure ended the run: the one
 * rf_loader_next()'s RF_E_CORRUPT_SAMPLE names, under RF_ON_ERROR_FAIL
 * the first failure of the batch, under RF_ON_ERROR_SKIP the failure
 * that went past a limit (RF_PARAM_MAX_ERRORS, RF_PARAM_MAX_ERROR_PPM).
 * For bindings and tools that show the file, the sample and the reason
 * apart (Python's CorruptSample.path, .index, .reason) without taking the
 * message apart. Returns 0; -ENOENT when no sample's failure ended the
 * run: no error, another error (a sample that crashed or hung producers
 * ends it with RF_E_PRODUCER_DIED, whose message names it), or a dataset
 * that failed at open (rf_loader_open()'s detail names the file);
 * -EINVAL when loader or out is NULL. out is written only on success.
 * A read of the loader's error: same thread rules as rf_loader_error().
 * New in 0.2. */
RF_API int rf_loader_failed_sample(const rf_loader *loader,
                                   rf_failed_sample *out);

/* ------------------------------------------------------------------------
 * Datasets on disk, for tools and for checking what a loader delivers.
 * ------------------------------------------------------------------------ */

/* How a sample is stored. The numbers are part of the packed format. */
typedef enum rf_sample_kind {
    RF_SAMPLE_JPEG = 1, /* an encoded image's bytes: JPEG, or PNG and WebP
                           where the library was built with libpng and
                           libwebp; recognised from the bytes, not the
                           name (the number and its name are the packed
                           format's since 0.1) */
    RF_SAMPLE_ZSTD = 2  /* a zstd frame holding exactly height x width x
                           channels bytes in the packed file's layout
                           (ringfeed-pack --raw), delivered as stored:
                           no crop, resize or flip, whatever
                           RF_PARAM_TRANSFORM and RF_PARAM_FLIP say. A
                           loader opened on a dataset holding some, with
                           RF_PARAM_TRANSFORM other than
                           RF_TRANSFORM_NONE, says so once at open,
                           through its message handler; setting
                           RF_TRANSFORM_NONE silences it */
} rf_sample_kind;

typedef struct rf_dataset rf_dataset;

/* Raw bytes of one sample, filled by rf_dataset_read(). */
typedef struct rf_sample_info {
    const void *data; /* valid until the next call on the dataset */
    size_t size;
    int64_t label;
    rf_sample_kind kind;
    const char *name; /* path below the folder, or "packed offset N";
                         valid until the next call on the dataset, too */
} rf_sample_info;

/* Opens a folder of class folders or a packed file, read-only. Returns 0,
 * -EINVAL (out or path is NULL), -ENOENT, -ENOTDIR, RF_E_CORRUPT_SAMPLE (a
 * packed file whose header or index is damaged: a size or offset beyond the
 * file, an entry above 1 GiB, a checksum that does not match), or -errno; on
 * error *errp (if errp is not NULL) gets a malloc'd detail, and *out (if out
 * is not NULL) is NULL. On success *out is the caller's, to free
 * with rf_dataset_close(). Listing a folder reads directories only, never the
 * files. Not thread-safe; open one per thread. After fork() parent and
 * child may each go on using it: reads use pread() and fresh file
 * descriptors, so they share no file offset. */
RF_API int rf_dataset_open(rf_dataset **out, const char *path, char **errp);

/* Samples in the dataset; 0 when ds is NULL. A pure read of what
 * rf_dataset_open() loaded, which nothing changes until close: safe from
 * several threads at once, also while another thread reads or decodes
 * samples of ds, and in both parent and child after fork(). */
RF_API uint64_t rf_dataset_size(const rf_dataset *ds);

/* Classes (folders; or the largest label + 1 of a packed file); 0 when ds
 * is NULL. Thread-safety and fork: as rf_dataset_size(). */
RF_API uint32_t rf_dataset_classes(const rf_dataset *ds);

/* The name of class `label` (torchvision's dataset.classes[label]): the
 * first path component of the name of its first sample that has a name,
 * which for a folder is the class folder's name, and for a packed file
 * written from a folder by ringfeed-pack the same. Copies it into out (len
 * bytes, always NUL-terminated, cut short if longer). Works for samples that
 * cannot be read, too: it needs only the index. Returns 0, -ERANGE
 * (label not below rf_dataset_classes()), -ENOENT (a packed file with no
 * named sample of that label), or -EINVAL
 * (ds or out is NULL, or len is 0). O(log samples) for a folder; a packed
 * file's index is scanned, O(samples). Thread-safety and fork: as
 * rf_dataset_size(), a pure read of the dataset. */
RF_API int rf_dataset_class_name(const rf_dataset *ds, uint32_t label,
                                 char *out, size_t len);

/* What a dataset is on disk. The numbers never change. */
typedef enum rf_dataset_format {
    RF_DATASET_FOLDER = 1, /* a folder of class folders */
    RF_DATASET_PACK = 2    /* a packed file */
} rf_dataset_format;

/* What a dataset holds, filled by rf_dataset_get_info(): what a tool
 * needs to know before it reads or decodes a sample. Its size is part of
 * the ABI and never changes (120 bytes, no padding): a field added later
 * takes a slot of `reserved`, where 0 means "not known", so that a
 * program compiled against a later header reads 0 there from this
 * library, and one compiled against this header never sees the new
 * field. Callers need not zero it or say its size: rf_dataset_get_info()
 * writes all of it. */
typedef struct rf_dataset_info {
    rf_dataset_format format;
    uint32_t classes; /* rf_dataset_classes() */
    uint64_t samples; /* rf_dataset_size() */
    /* Samples of each rf_sample_kind, as rf_dataset_read() gives them;
     * they add up to samples. A folder's files all count as
     * RF_SAMPLE_JPEG (their bytes, as they are). */
    uint64_t jpeg_samples;
    uint64_t zstd_samples;
    /* The sample shape a packed file was written with, that of its
     * RF_SAMPLE_ZSTD samples: a loader (or rf_dataset_decode()) reads
     * the file only when its RF_PARAM_HEIGHT, WIDTH, CHANNELS and LAYOUT
     * are these. All zero (layout RF_LAYOUT_NHWC) when the file has
     * none, and for a folder; a pack of JPEG samples only may have one. */
    uint32_t height, width, channels;
    rf_layout layout;
    /* Bytes of the packed file's zstd dictionary; 0 when it has none,
     * and for a folder. */
    uint64_t dict_size;
    /* Which samples the dataset holds, as 64 bits (since 0.2; 0 from a
     * library before it): a digest of each sample's name (its path below
     * the folder, or its name in the pack) and label in index order, and
     * for a pack each sample's CRC-32C. Two listings that differ give
     * different digests (bar a chance of about 2^-64 in a change; not
     * cryptographic: made to catch accidents, not forgeries), so a
     * checkpoint that keeps it can tell a folder whose files changed but
     * not their number. A folder's files are not read for it: a file
     * rewritten in place under its name keeps the digest. */
    uint64_t listing_digest;
    uint64_t reserved[7]; /* written as 0 */
} rf_dataset_info;

/* Fills *out with what ds is and holds (see rf_dataset_info), all of it
 * known since rf_dataset_open(): no file is read. Returns 0, or -EINVAL
 * when ds or out is NULL (out is then left as it was). *out is the
 * caller's; nothing in it points into ds. Thread-safety and fork: as
 * rf_dataset_size(), a pure read of the dataset. */
RF_API int rf_dataset_get_info(const rf_dataset *ds, rf_dataset_info *out);

/* Reads sample `index` into *info. Returns 0, -EINVAL (ds or info is
 * NULL), -ERANGE, RF_E_CORRUPT_SAMPLE
 * (a packed sample whose checksum does not match; a folder entry that is
 * not a regular file, or is above 1 GiB), or -errno of the open or read,
 * with the detail, naming the sample, in rf_dataset_error(). info's data
 * and name belong to ds and are valid until the next call on it. One
 * thread at a time (see rf_dataset_open()). */
RF_API int rf_dataset_read(rf_dataset *ds, uint64_t index,
                           rf_sample_info *info);

/* Decodes sample `index` the way a producer would for `epoch` under cfg
 * (source shape, layout, transform, limits), into dst (height x width x
 * channels bytes). Returns 0, RF_E_CORRUPT_SAMPLE (the sample does not
 * decode), rf_dataset_read()'s errors, -EINVAL when ds, cfg or dst is NULL
 * or cfg's shape does not fit the dataset (as rf_loader_open() would
 * refuse it: RF_PARAM_CHANNELS other than 1 or 3 for JPEG samples, a
 * packed file's raw shape not matched; the reason names the parameter),
 * or -ENOMEM when memory runs out; the reason (but for a NULL ds) is in
 * rf_dataset_error(). cfg is read during the call only; dst is the
 * caller's. One thread at a time (see rf_dataset_open()). */
RF_API int rf_dataset_decode(rf_dataset *ds, const rf_config *cfg,
                             uint64_t epoch, uint64_t index, void *dst);

/* The detail of the last error on ds, or "" (also when ds is NULL): owned
 * by ds, valid until the next call on it. */
RF_API const char *rf_dataset_error(const rf_dataset *ds);

/* NULL is fine. */
RF_API void rf_dataset_close(rf_dataset *ds);

typedef struct rf_pack_writer rf_pack_writer;

/* Starts a packed file at path. It is written as an unnamed file in path's
 * folder (or, where the file system cannot, under a unique name
 * path.XXXXXXXX.tmp) and gets its name only from rf_pack_writer_finish(),
 * replacing any file there in one step: a reader never sees it half-written,
 * a process killed while writing leaves nothing behind, and two writers of
 * one path each write their own file (the last to finish wins). dict (may be
 * NULL) is a zstd dictionary stored in the file for RF_SAMPLE_ZSTD samples
 * (see also rf_pack_writer_set_dictionary()); it is copied, and stays the
 * caller's. For RF_SAMPLE_ZSTD the shape of every sample is height x width
 * x channels in layout, within the ranges of RF_PARAM_HEIGHT, WIDTH and
 * CHANNELS (a loader must be configured for the pack's shape to read it);
 * pass zeros when the file holds JPEGs only.
 * Returns 0, -EINVAL (out or path NULL, a shape no loader takes, dict NULL
 * with dict_size > 0, or a dictionary above 64 MiB, more than readers
 * accept), -EISDIR (path is a folder),
 * -EEXIST (path is something other than a regular file), or the -errno of
 * creating the file in path's folder (-ENOENT, -EACCES, ...), so that a path
 * that cannot be written fails here, before any work; with a malloc'd detail
 * in *errp. On success *out is the caller's until rf_pack_writer_finish() or
 * rf_pack_writer_abort(). One thread at a time; a child of fork() must not
 * use its parent's writer (both would write the same file). */
RF_API int rf_pack_writer_create(rf_pack_writer **out, const char *path,
                                 uint32_t height, uint32_t width,
                                 uint32_t channels, rf_layout layout,
                                 const void *dict, size_t dict_size,
                                 char **errp);

/* Replaces the zstd dictionary given to rf_pack_writer_create() (NULL or
 * 0 bytes: none), before the first sample is added: a tool can create the
 * writer first, so that a bad output path is found before it trains a
 * dictionary on the samples. Returns 0, -EINVAL for a NULL w, once a
 * sample has been added, for dict NULL with dict_size > 0, or for a
 * dictionary above 64 MiB (more than readers accept), or -ENOMEM; the
 * detail (but for a NULL w) is in rf_pack_writer_error(). On any error
 * the dictionary set before stays. dict is copied, and stays the
 * caller's. */
RF_API int rf_pack_writer_set_dictionary(rf_pack_writer *w, const void *dict,
                                         size_t dict_size);

/* Appends one sample; name (may be NULL) is kept for error messages.
 * Refused with -EINVAL, among others: a NULL w; a zstd sample that is not
 * one whole frame, names another dictionary, or goes into a pack without a
 * shape;
 * a JPEG sample in a pack whose shape has 2 or 4 channels (a JPEG decodes
 * to 1 or 3, so no loader could decode it); a sample above 1 GiB (the cap
 * on a folder's files too). Returns 0 or -errno (the
 * detail in rf_pack_writer_error()): -EINVAL, -ENAMETOOLONG (a name
 * above the format's limit), -ENOMEM, or the -errno of writing the file
 * (-ENOSPC, ...); on error nothing is added. data is written to the file
 * and name copied before the call returns; both stay the caller's. */
RF_API int rf_pack_writer_add(rf_pack_writer *w, rf_sample_kind kind,
                              const void *data, size_t size, int64_t label,
                              const char *name);

/* The detail of the last error on w, or "" (also when w is NULL): owned
 * by w, valid until the next call on it. */
RF_API const char *rf_pack_writer_error(const rf_pack_writer *w);

/* Writes the index and header, flushes the file to disk and gives it its
 * name (replacing any file there), then frees w. Returns 0 or -errno with
 * a malloc'd detail in *errp (nothing of the file is left then, and a
 * file already at the path stays as it was). w is freed whether or not it
 * succeeds; a NULL w is -EINVAL. A writer to which no sample was added is
 * -ENODATA (since 0.2; it wrote a pack that every loader refuses as
 * having no samples): rf_pack_writer_abort() it instead. */
RF_API int rf_pack_writer_finish(rf_pack_writer *w, char **errp);

/* Abandons the file (nothing of it is left) and frees w. NULL is fine. */
RF_API void rf_pack_writer_abort(rf_pack_writer *w);

/* ------------------------------------------------------------------------
 * The synthetic source, so that any consumer can check what it received.
 * ------------------------------------------------------------------------ */

/* Writes the pixels of synthetic sample `index` into dst (height * width *
 * channels bytes) in the given layout: the bytes every producer writes for
 * that sample when RF_PARAM_CLASSES is `classes`. Each byte is noise in
 * 0..127 plus 0 or 32 after a pattern of the sample's class
 * (rf_synthetic_label()), so that a model can learn the labels from the
 * pixels. A NULL dst writes nothing. Thread-safe, no allocation. */
RF_API void rf_synthetic_fill(uint64_t seed, uint64_t index, uint32_t classes,
                              uint32_t height, uint32_t width,
                              uint32_t channels, rf_layout layout, void *dst);

/* The label of synthetic sample `index`, in [0, classes); 0 when classes
 * is 0. A pure function: safe from any thread. */
RF_API int64_t rf_synthetic_label(uint64_t seed, uint64_t index,
                                  uint32_t classes);

/* Encodes synthetic image `index` as a JPEG into a malloc'd buffer (*jpeg,
 * *size; the caller frees it): smooth, photo-like content that compresses
 * like ImageNet. With width and height 0 the size comes from (seed,
 * index): short side 256..500, aspect 3/4..4/3, and the file is 40-150
 * KB. Whatever the size, half the images (by seed and index) are 4:4:4 at
 * quality 95, the rest 4:2:0 at quality 90. The same arguments give the
 * same bytes. Returns 0, -EINVAL (jpeg or size is NULL, only one of width
 * and height is 0, or one is above 65500, libjpeg-turbo's limit),
 * -ENOMEM or -EIO. Thread-safe. */
RF_API int rf_synthetic_jpeg(uint64_t seed, uint64_t index, uint32_t width,
                             uint32_t height, void **jpeg, size_t *size);

/* ------------------------------------------------------------------------
 * The producer side, for the ringfeed-producer helper.
 * ------------------------------------------------------------------------ */

/* The whole program of a producer process: attaches to the segments named
 * on the command line, fills batches until told to stop, and returns the
 * process exit status. The ringfeed-producer helper's main() calls only
 * this; a statically linked custom helper can do the same. Not for any
 * other use. A NULL argv, or a NULL among argv[0] .. argv[argc - 1], gets
 * the usage on stderr and 64, as a missing option does. */
RF_API int rf_producer_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif /* RINGFEED_H */
