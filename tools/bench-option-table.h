/*
 * tools/bench-option-table.h - the table of ringfeed-bench's options,
 * which both halves of its command line are generated from:
 * bench-options.c parses each flag into struct bench_options and prints
 * --help, and bench-option-rules.c refuses flags that cannot go
 * together. Only those two include this header; the rest of the tool
 * sees struct bench_options (bench-options.h).
 *
 * An option that sets a library parameter names it, and its range, its
 * default and the choices it takes come from the library's parameter
 * table (rf_param_lookup()): the table writes down only where the tool
 * differs from the library, and says why. The rows name getopt's
 * required_argument and no_argument; only bench-options.c expands those
 * columns (and includes <getopt.h>).
 */
#ifndef RINGFEED_TOOLS_BENCH_OPTION_TABLE_H
#define RINGFEED_TOOLS_BENCH_OPTION_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include <ringfeed.h>

#include "bench-options.h"

/* In a NUMBER_OPTIONS row: this bound or default is the parameter's, from
 * the library's table. No option's own value is INT64_MIN. */
#define FROM_TABLE INT64_MIN
/* In a row's param column: an option of the benchmark's own, not a
 * parameter (0 is none). */
#define NO_PARAM ((rf_param)0)

/*
 * The options that take an integer: X(ID, name, field, param, min, max,
 * default, help). Two differ from their parameter: --epochs refuses 0 (no
 * end), because a benchmark has to finish, and --batch keeps the
 * benchmark's own default, which the figures in the docs were measured
 * with.
 */
#define NUMBER_OPTIONS(X)                                                      \
    X(PRODUCERS, "producers", producers, RF_PARAM_PRODUCERS, FROM_TABLE,       \
      FROM_TABLE, FROM_TABLE, "producer processes; 0 = one per CPU")           \
    X(BATCH, "batch", batch, RF_PARAM_BATCH_SIZE, FROM_TABLE, FROM_TABLE, 64,  \
      "samples per batch")                                                     \
    X(SLOTS, "slots", slots, RF_PARAM_SLOTS, FROM_TABLE, FROM_TABLE,           \
      FROM_TABLE, "batches in the ring; 0 = the library's choice")             \
    X(EPOCHS, "epochs", epochs, RF_PARAM_EPOCHS, 1, FROM_TABLE, FROM_TABLE,    \
      "passes over the samples")                                               \
    X(SAMPLES, "samples", samples, RF_PARAM_SAMPLES, FROM_TABLE, FROM_TABLE,   \
      FROM_TABLE, "samples per epoch; refused with a PATH, which has its own") \
    X(CHANNELS, "channels", channels, RF_PARAM_CHANNELS, FROM_TABLE,           \
      FROM_TABLE, FROM_TABLE, "bytes per pixel")                               \
    X(CLASSES, "classes", classes, RF_PARAM_CLASSES, FROM_TABLE, FROM_TABLE,   \
      FROM_TABLE, "labels are 0..N-1; refused with a PATH, which has its own") \
    X(SPIN_NS, "spin-ns", spin_ns, RF_PARAM_SPIN_NS, FROM_TABLE, FROM_TABLE,   \
      FROM_TABLE, "ns to spin before sleeping")                                \
    X(MAX_ERRORS, "max-errors", max_errors, RF_PARAM_MAX_ERRORS, FROM_TABLE,   \
      FROM_TABLE, FROM_TABLE,                                                  \
      "--on-error skip: end the run once more samples failed; 0 = no limit")   \
    X(MAX_ERROR_PPM, "max-error-ppm", max_error_ppm, RF_PARAM_MAX_ERROR_PPM,   \
      FROM_TABLE, FROM_TABLE, FROM_TABLE,                                      \
      "--on-error skip: end the run once one epoch's failures exceed this "    \
      "share, per million")                                                    \
    X(MAX_PIXELS, "max-pixels", max_pixels, RF_PARAM_MAX_PIXELS, FROM_TABLE,   \
      FROM_TABLE, FROM_TABLE,                                                  \
      "a PATH or synthetic-jpeg: refuse images with more pixels")              \
    X(MAX_SCANS, "max-scans", max_scans, RF_PARAM_MAX_SCANS, FROM_TABLE,       \
      FROM_TABLE, FROM_TABLE,                                                  \
      "a PATH or synthetic-jpeg: refuse progressive JPEGs with more scans")    \
    X(MAX_DECODE_MEMORY, "max-decode-memory", max_decode_memory,               \
      RF_PARAM_MAX_DECODE_MEMORY, FROM_TABLE, FROM_TABLE, FROM_TABLE,          \
      "a PATH or synthetic-jpeg: refuse JPEGs whose decode needs more bytes")  \
    X(RESIZE, "resize", resize, RF_PARAM_RESIZE, FROM_TABLE, FROM_TABLE,       \
      FROM_TABLE,                                                              \
      "--transform eval: the short side before the centre crop; 0 = 8/7 of "   \
      "--size")                                                                \
    X(MIN_SCALE_PPM, "min-scale-ppm", min_scale_ppm, RF_PARAM_MIN_SCALE_PPM,   \
      FROM_TABLE, FROM_TABLE, FROM_TABLE,                                      \
      "--transform train: the smallest crop's area, per million of the "       \
      "image's")                                                               \
    X(BATCH_TIMEOUT_MS, "batch-timeout-ms", batch_timeout_ms,                  \
      RF_PARAM_BATCH_TIMEOUT_MS, FROM_TABLE, FROM_TABLE, FROM_TABLE,           \
      "kill and replace a producer that owes batches and delivers none this "  \
      "long; 0 = never")                                                       \
    X(STALL_WARNING_MS, "stall-warning-ms", stall_warning_ms,                  \
      RF_PARAM_STALL_WARNING_MS, FROM_TABLE, FROM_TABLE, FROM_TABLE,           \
      "report a wait this long for one batch, and each doubling; 0 = never")   \
    X(MAX_RESPAWNS, "max-respawns", max_respawns, RF_PARAM_MAX_RESPAWNS,       \
      FROM_TABLE, FROM_TABLE, FROM_TABLE,                                      \
      "--on-producer-death respawn: end the run once more producers were "     \
      "replaced within --respawn-window-s")                                    \
    X(RESPAWN_WINDOW_S, "respawn-window-s", respawn_window_s,                  \
      RF_PARAM_RESPAWN_WINDOW_S, FROM_TABLE, FROM_TABLE, FROM_TABLE,           \
      "--on-producer-death respawn: the window --max-respawns counts in, in "  \
      "seconds")                                                               \
    X(RANK, "rank", rank, RF_PARAM_RANK, FROM_TABLE, FROM_TABLE, FROM_TABLE,   \
      "run this rank's share of each epoch, 0..--world-size - 1; -1 = $RANK, " \
      "else $OMPI_COMM_WORLD_RANK, else 0")                                    \
    X(WORLD_SIZE, "world-size", world_size, RF_PARAM_WORLD_SIZE, FROM_TABLE,   \
      FROM_TABLE, FROM_TABLE,                                                  \
      "ranks sharing each epoch; 0 = $WORLD_SIZE, else "                       \
      "$OMPI_COMM_WORLD_SIZE, else 1")                                         \
    X(DEVICE, "device", device, NO_PARAM, 0, 1023, 0,                          \
      "--gpu: the CUDA device")                                                \
    X(DEPTH, "depth", depth, NO_PARAM, 0, 64, 0,                               \
      "--gpu: device buffers; 0 = the library's choice")                       \
    X(STEP_US, "step-us", step_us, NO_PARAM, -1, 10000000, -1,                 \
      "--gpu: the stand-in step's length in microseconds; -1 = three of a "    \
      "batch's uploads")

/* The other options: X(ID, name, has_arg, metavar, param, help), where
 * param is the parameter whose default --help shows, or NO_PARAM. --size
 * sets two parameters, RF_PARAM_HEIGHT and RF_PARAM_WIDTH (parse_size()),
 * and shows their defaults. */
#define OTHER_OPTIONS(X)                                                       \
    X(SOURCE, "source", required_argument, "KIND", RF_PARAM_SOURCE,            \
      "synthetic; empty: indices only, no pixels; synthetic-jpeg: synthetic "  \
      "images through the JPEG path; or the PATH of a folder of class "        \
      "folders or of a packed file")                                           \
    X(SIZE, "size", required_argument, "N|HxW", RF_PARAM_HEIGHT,               \
      "image height and width in pixels: N for both, or HxW (height x "        \
      "width, e.g. 24x32)")                                                    \
    X(TRANSFORM, "transform", required_argument, "T", RF_PARAM_TRANSFORM,      \
      "a PATH or synthetic-jpeg: train: random-resized crop + flip; eval: "    \
      "resize + centre crop; none: the whole image resized (stretched) to "    \
      "the output size")                                                       \
    X(ON_ERROR, "on-error", required_argument, "P", RF_PARAM_ON_ERROR,         \
      "a PATH or synthetic-jpeg: fail: stop at a bad sample; skip: leave it "  \
      "out and count it")                                                      \
    X(FULL_SCALE, "full-scale", no_argument, "", NO_PARAM,                     \
      "a PATH or synthetic-jpeg: decode every JPEG in full, never at a "       \
      "smaller DCT scale: PIL's pixels, slower")                               \
    X(JPEG_WARNINGS, "jpeg-warnings", required_argument, "W",                  \
      RF_PARAM_JPEG_WARNINGS,                                                  \
      "a PATH or synthetic-jpeg: damaged JPEGs: pil: PIL's verdicts; "         \
      "lenient: accept all; strict: any libjpeg warning fails")                \
    X(NO_FLIP, "no-flip", no_argument, "", NO_PARAM,                           \
      "--transform train: flip no sample")                                     \
    X(ON_PRODUCER_DEATH, "on-producer-death", required_argument, "P",          \
      RF_PARAM_ON_PRODUCER_DEATH,                                              \
      "a dead producer: respawn: replace it and go on; fail: end the run")     \
    X(SEED, "seed", required_argument, "N", RF_PARAM_SEED,                     \
      "sample order and content, 0..2^64-1")                                   \
    X(LAYOUT, "layout", required_argument, "L", RF_PARAM_LAYOUT,               \
      "nhwc or nchw")                                                          \
    X(UNORDERED, "unordered", no_argument, "", NO_PARAM,                       \
      "hand out each batch as soon as it is ready")                            \
    X(FORK, "fork", no_argument, "", NO_PARAM,                                 \
      "start producers with fork() instead of posix_spawn()")                  \
    X(VERIFY, "verify", no_argument, "", NO_PARAM,                             \
      "check every pixel, label and sample index received")                    \
    X(GPU, "gpu", no_argument, "", NO_PARAM,                                   \
      "upload every batch to the GPU and time uploads against steps and a "    \
      "plain cudaMemcpyAsync (builds with CUDA only)")                         \
    X(JSON, "json", no_argument, "", NO_PARAM,                                 \
      "end with one JSON object instead of the summary")                       \
    X(QUIET, "quiet", no_argument, "", NO_PARAM, "no progress line on stderr") \
    X(HELP, "help", no_argument, "", NO_PARAM, "show this help and exit")

/* OPT_END_ is one past the last option. */
enum option_id {
    OPT_FIRST_ = 256, /* above every char, so no short option can clash */
#define OPTION_ID_(id, ...) OPT_##id,
    NUMBER_OPTIONS(OPTION_ID_) OTHER_OPTIONS(OPTION_ID_) OPT_END_
#undef OPTION_ID_
};

/* bench_options.given has a bit for each option: the rules need to tell
 * an option given its default value from one not given at all. */
_Static_assert(OPT_END_ - OPT_FIRST_ - 1 <= 64,
               "bench_options.given has 64 bits");

/* Option id's row: its index in the table, in long_options[] and in
 * bench_options.given. */
static inline size_t option_index(enum option_id id)
{
    return (size_t)(id - OPT_FIRST_ - 1);
}

/* The bit of bench_options.given that says id was on the command line. */
static inline uint64_t option_bit(enum option_id id)
{
    return UINT64_C(1) << option_index(id);
}

/* The flag of option id without its dashes, e.g. "max-errors" (from
 * bench-options.c's long_options[], which getopt matches against). */
const char *bench_option_name(enum option_id id);

/* Refuses, with a message naming the flag and exit status EXIT_USAGE,
 * options that would change nothing together with the others given
 * (bench-option-rules.c); a pack of raw pixels given no transform
 * option gets transform none. Called once every flag is parsed. */
void bench_check_option_rules(struct bench_options *o);

#endif
