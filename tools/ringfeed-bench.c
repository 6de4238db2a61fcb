/*
 * ringfeed-bench - measures how fast a ringfeed loader hands out batches
 * and, with --verify, checks every pixel, label and sample index received.
 * It uses the public API only, as a training loop would, so what it
 * measures is what a user gets.
 *
 *     ringfeed-bench --producers 4 --batch 64 --epochs 2 --verify
 *
 * Exit status: 0 success, 1 the run or the verification failed, 2 bad
 * usage.
 */
#include <ringfeed.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#ifdef RF_BENCH_GPU
#include "bench-gpu.h"
#endif

#define PROGRAM "ringfeed-bench"

enum { EXIT_RUN_FAILED = CLI_EXIT_FAILED, EXIT_USAGE = CLI_EXIT_USAGE };

/* Only the first few verification failures are described one by one; the
 * counts at the end cover the rest. */
#define MAX_FAILURES_DESCRIBED 10

/* Help texts start in this column after "  --", so that they line up. */
#define HELP_COLUMN 16

/* Producers whose busy share fits in rf_stats. */
#define STATS_MAX_PRODUCERS 64

#define COUNT_OF(array) (sizeof(array) / sizeof((array)[0]))

/* ---- options ----------------------------------------------------------- */

struct bench_options {
    int64_t producers;
    int64_t batch;
    int64_t slots;
    int64_t epochs;
    int64_t samples;
    int64_t size;
    int64_t channels;
    int64_t classes;
    int64_t spin_ns;       /* -1: leave the library's default alone */
    int64_t max_errors;    /* --on-error skip: RF_PARAM_MAX_ERRORS */
    int64_t max_error_ppm; /* and RF_PARAM_MAX_ERROR_PPM */
    int64_t device;        /* --gpu: CUDA device */
    int64_t depth;         /* --gpu: device buffers; 0: the library's choice */
    int64_t step_us;       /* --gpu: the stand-in step; -1: 3 uploads */
    uint64_t seed;
    rf_source_kind source;
    const char *path; /* RF_SOURCE_PATH: a folder or packed file */
    rf_transform transform;
    rf_on_error on_error;
    rf_layout layout;
    bool unordered;
    bool fork_mode;
    bool full_scale;
    uint64_t given; /* bit (code - OPT_FIRST_ - 1) of each option given */
    bool verify;
    bool gpu;
    bool json;
    bool quiet;
};

/*
 * The options that take an integer: X(ID, name, field, min, max, help).
 * The ranges are the library's (see rf_param), except that --epochs
 * refuses 0 ("no end"), because a benchmark has to finish.
 */
#define NUMBER_OPTIONS(X)                                                      \
    X(PRODUCERS, "producers", producers, 0, 1024,                              \
      "producer processes; 0 = one per CPU (default 0)")                       \
    X(BATCH, "batch", batch, 1, 65536, "samples per batch (default 64)")       \
    X(SLOTS, "slots", slots, 0, 65536,                                         \
      "batches in the ring; 0 = the library's choice (default 0)")             \
    X(EPOCHS, "epochs", epochs, 1, INT64_C(1) << 30,                           \
      "passes over the samples (default 1)")                                   \
    X(SAMPLES, "samples", samples, 1, INT64_C(1) << 38,                        \
      "samples per epoch (default 10000); refused with a PATH, which has "     \
      "its own")                                                               \
    X(SIZE, "size", size, 1, 65536,                                            \
      "image height and width in pixels (default 224)")                        \
    X(CHANNELS, "channels", channels, 1, 4, "bytes per pixel (default 3)")     \
    X(CLASSES, "classes", classes, 1, INT64_C(1) << 31,                        \
      "labels are 0..N-1 (default 1000); refused with a PATH, which has its "  \
      "own")                                                                   \
    X(SPIN_NS, "spin-ns", spin_ns, 0, 1000000000,                              \
      "ns to spin before sleeping (default: the library's)")                   \
    X(MAX_ERRORS, "max-errors", max_errors, 0, INT64_MAX,                      \
      "--on-error skip: end the run once more samples failed; 0 = no "         \
      "limit (default 0)")                                                     \
    X(MAX_ERROR_PPM, "max-error-ppm", max_error_ppm, 0, 1000000,               \
      "--on-error skip: end the run once one epoch's failures exceed this "    \
      "share, per million (default 10000)")                                    \
    X(DEVICE, "device", device, 0, 1023, "--gpu: the CUDA device (default 0)") \
    X(DEPTH, "depth", depth, 0, 64,                                            \
      "--gpu: device buffers; 0 = the library's choice (default 0)")           \
    X(STEP_US, "step-us", step_us, -1, 10000000,                               \
      "--gpu: the stand-in step's length in microseconds; -1 = three of a "    \
      "batch's uploads (default -1)")

/* The other options: X(ID, name, has_arg, metavar, help). */
#define OTHER_OPTIONS(X)                                                       \
    X(SOURCE, "source", required_argument, "KIND",                             \
      "synthetic (default); empty: indices only, no pixels; synthetic-jpeg: "  \
      "synthetic images through the JPEG path; or the PATH of a folder of "    \
      "class folders or of a packed file")                                     \
    X(TRANSFORM, "transform", required_argument, "T",                          \
      "a PATH or synthetic-jpeg: train (default): random-resized crop + "      \
      "flip; eval: resize + centre crop; none: the whole image resized "       \
      "(stretched) to the output size")                                        \
    X(ON_ERROR, "on-error", required_argument, "P",                            \
      "a PATH or synthetic-jpeg: fail (default): stop at a bad sample; "       \
      "skip: leave it out and count it")                                       \
    X(FULL_SCALE, "full-scale", no_argument, "",                               \
      "a PATH or synthetic-jpeg: decode every JPEG in full, never at a "       \
      "smaller DCT scale (RF_PARAM_DCT_SCALING 0): PIL's pixels, slower")      \
    X(SEED, "seed", required_argument, "N",                                    \
      "sample order and content, 0..2^64-1 (default 0)")                       \
    X(LAYOUT, "layout", required_argument, "L", "nhwc (default) or nchw")      \
    X(UNORDERED, "unordered", no_argument, "",                                 \
      "hand out each batch as soon as it is ready")                            \
    X(FORK, "fork", no_argument, "",                                           \
      "start producers with fork() instead of posix_spawn()")                  \
    X(VERIFY, "verify", no_argument, "",                                       \
      "check every pixel, label and sample index received")                    \
    X(GPU, "gpu", no_argument, "",                                             \
      "upload every batch to the GPU and time uploads against steps and a "    \
      "plain cudaMemcpyAsync (builds with CUDA only)")                         \
    X(JSON, "json", no_argument, "",                                           \
      "end with one JSON object instead of the summary")                       \
    X(QUIET, "quiet", no_argument, "", "no progress line on stderr")           \
    X(HELP, "help", no_argument, "", "show this help and exit")

enum option_id {
    OPT_FIRST_ = 256, /* above every char, so no short option can clash */
#define OPTION_ID_(id, ...) OPT_##id,
    NUMBER_OPTIONS(OPTION_ID_) OTHER_OPTIONS(OPTION_ID_)
#undef OPTION_ID_
};

/* clang-format cannot see that the macros expand to whole rows. */
/* clang-format off */
static const struct option long_options[] = {
#define NUMBER_LONG_(id, name, field, min, max, help)                          \
    {name, required_argument, NULL, OPT_##id},
#define OTHER_LONG_(id, name, has_arg, metavar, help)                          \
    {name, has_arg, NULL, OPT_##id},
    NUMBER_OPTIONS(NUMBER_LONG_) OTHER_OPTIONS(OTHER_LONG_)
#undef NUMBER_LONG_
#undef OTHER_LONG_
    {NULL, 0, NULL, 0},
};
/* clang-format on */

/* Indexed by the enums, for parsing and for reports. */
static const char *const source_names[] = {
    [RF_SOURCE_SYNTHETIC] = "synthetic",
    [RF_SOURCE_EMPTY] = "empty",
    [RF_SOURCE_PATH] = "path",
    [RF_SOURCE_SYNTHETIC_JPEG] = "synthetic-jpeg",
};
static const char *const transform_names[] = {
    [RF_TRANSFORM_NONE] = "none",
    [RF_TRANSFORM_TRAIN] = "train",
    [RF_TRANSFORM_EVAL] = "eval",
};
static const char *const on_error_names[] = {
    [RF_ON_ERROR_FAIL] = "fail",
    [RF_ON_ERROR_SKIP] = "skip",
};
static const char *const layout_names[] = {
    [RF_LAYOUT_NHWC] = "nhwc",
    [RF_LAYOUT_NCHW] = "nchw",
};

static struct bench_options default_options(void)
{
    const struct bench_options defaults = {
        .batch = 64,
        .epochs = 1,
        .samples = 10000,
        .size = 224,
        .channels = 3,
        .classes = 1000,
        .spin_ns = -1,
        .max_error_ppm = 10000,
        .step_us = -1,
        .source = RF_SOURCE_SYNTHETIC,
        .transform = RF_TRANSFORM_TRAIN,
        .layout = RF_LAYOUT_NHWC,
    };
    return defaults;
}

static void print_option_help(const char *name, const char *metavar,
                              const char *help)
{
    const int pad = HELP_COLUMN - (int)strlen(name);
    printf("  --%s %-*s %s\n", name, pad > 0 ? pad : 0, metavar, help);
}

static void print_usage(void)
{
    fputs("Usage: " PROGRAM " [OPTION]...\n"
          "Measures how fast ringfeed hands out batches of images: "
          "synthetic ones, or a\ndataset's (--source PATH).\n\n",
          stdout);
#define NUMBER_HELP_(id, name, field, min, max, help)                          \
    print_option_help(name, "N", help);
#define OTHER_HELP_(id, name, has_arg, metavar, help)                          \
    print_option_help(name, metavar, help);
    NUMBER_OPTIONS(NUMBER_HELP_)
    OTHER_OPTIONS(OTHER_HELP_)
#undef NUMBER_HELP_
#undef OTHER_HELP_
    fputs("\nSet RINGFEED_PRODUCER to the ringfeed-producer helper when it "
          "is not installed.\n"
          "Exit status: 0 success, 1 the run or --verify failed, 2 bad "
          "usage.\n",
          stdout);
}

/* Returns the position of text in names[], or exits listing them. */
static int parse_choice(const char *option, const char *text,
                        const char *const *names, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(text, names[i]) == 0)
            return (int)i;
    fprintf(stderr, PROGRAM ": --%s wants", option);
    for (size_t i = 0; i < count; i++)
        fprintf(stderr, "%s %s", i == 0 ? "" : " or", names[i]);
    fprintf(stderr, ", not '%s'\n", text);
    cli_usage_failure(PROGRAM);
}

/* A source kind by name, or else a dataset path. */
static void parse_source(struct bench_options *o, const char *arg)
{
    for (size_t i = 0; i < COUNT_OF(source_names); i++) {
        if (i != RF_SOURCE_PATH && strcmp(arg, source_names[i]) == 0) {
            o->source = (rf_source_kind)i;
            return;
        }
    }
    o->source = RF_SOURCE_PATH;
    o->path = arg;
}

/* Stores a numeric option; returns false when code is not one. */
static bool apply_number_option(struct bench_options *o, int code,
                                const char *arg)
{
    switch (code) {
#define NUMBER_CASE_(id, name, field, min, max, help)                          \
    case OPT_##id:                                                             \
        o->field = cli_parse_int(PROGRAM, name, arg, min, max);                \
        return true;
        NUMBER_OPTIONS(NUMBER_CASE_)
#undef NUMBER_CASE_
    default:
        return false;
    }
}

static void apply_other_option(struct bench_options *o, int code,
                               const char *arg)
{
    switch (code) {
    case OPT_SOURCE:
        parse_source(o, arg);
        break;
    case OPT_TRANSFORM:
        o->transform = (rf_transform)parse_choice(
            "transform", arg, transform_names, COUNT_OF(transform_names));
        break;
    case OPT_ON_ERROR:
        o->on_error = (rf_on_error)parse_choice("on-error", arg, on_error_names,
                                                COUNT_OF(on_error_names));
        break;
    case OPT_SEED:
        o->seed = cli_parse_uint(PROGRAM, "seed", arg, 0, UINT64_MAX);
        break;
    case OPT_LAYOUT:
        o->layout = (rf_layout)parse_choice("layout", arg, layout_names,
                                            COUNT_OF(layout_names));
        break;
    case OPT_UNORDERED:
        o->unordered = true;
        break;
    case OPT_FORK:
        o->fork_mode = true;
        break;
    case OPT_FULL_SCALE:
        o->full_scale = true;
        break;
    case OPT_VERIFY:
        o->verify = true;
        break;
    case OPT_GPU:
        o->gpu = true;
        break;
    case OPT_JSON:
        o->json = true;
        break;
    case OPT_QUIET:
        o->quiet = true;
        break;
    case OPT_HELP:
    case 'h':
        print_usage();
        exit(EXIT_SUCCESS);
    }
}

/* After getopt_long() returned '?': optopt is the option that lacks its
 * value, a short option that does not exist, or 0 when the long option
 * in text is unknown or ambiguous. */
static void reject_option(const char *text) __attribute__((noreturn));

static void reject_option(const char *text)
{
    if (optopt > OPT_FIRST_)
        cli_die_usage(PROGRAM, "--%s wants a value",
                      long_options[optopt - OPT_FIRST_ - 1].name);
    if (optopt != 0)
        cli_die_usage(PROGRAM, "unknown option '-%c'", optopt);
    cli_die_usage(PROGRAM, "unknown or ambiguous option '%s'", text);
}

/* --gpu has its own report and no verification. */
static void check_gpu_options(const struct bench_options *o)
{
#ifndef RF_BENCH_GPU
    if (o->gpu)
        cli_die_usage(PROGRAM, "--gpu: this ringfeed-bench was built without "
                               "CUDA; configure --with-cuda");
#endif
    if (o->gpu && (o->verify || o->json))
        cli_die_usage(PROGRAM, "--gpu goes with neither --verify nor --json");
}

_Static_assert(OPT_HELP - OPT_FIRST_ <= 64, "bench_options.given has 64 bits");

static bool given(const struct bench_options *o, enum option_id id)
{
    return (o->given >> (id - OPT_FIRST_ - 1)) & 1u;
}

/* The first of `ids` (count of them) that was given, or 0 for none. */
static enum option_id first_given(const struct bench_options *o,
                                  const enum option_id *ids, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (given(o, ids[i]))
            return ids[i];
    return 0;
}

static const char *option_name(enum option_id id)
{
    return long_options[id - OPT_FIRST_ - 1].name;
}

/* Options that would change nothing for the source given are refused,
 * so that a run never measures something other than what was asked. */
static void check_source_options(const struct bench_options *o)
{
    static const enum option_id decoding[] = {OPT_TRANSFORM, OPT_ON_ERROR,
                                              OPT_FULL_SCALE, OPT_MAX_ERRORS,
                                              OPT_MAX_ERROR_PPM};
    static const enum option_id skip_limits[] = {OPT_MAX_ERRORS,
                                                 OPT_MAX_ERROR_PPM};
    static const enum option_id own_count[] = {OPT_SAMPLES, OPT_CLASSES};
    const bool decodes =
        o->source == RF_SOURCE_PATH || o->source == RF_SOURCE_SYNTHETIC_JPEG;
    enum option_id id;
    if (!decodes && (id = first_given(o, decoding, COUNT_OF(decoding))))
        cli_die_usage(PROGRAM,
                      "--%s applies to a PATH or synthetic-jpeg, and would "
                      "change nothing for --source %s: drop it",
                      option_name(id), source_names[o->source]);
    if (o->on_error != RF_ON_ERROR_SKIP &&
        (id = first_given(o, skip_limits, COUNT_OF(skip_limits))))
        cli_die_usage(PROGRAM,
                      "--%s limits --on-error skip, and would change "
                      "nothing without it: add --on-error skip, or drop it",
                      option_name(id));
    if (o->source == RF_SOURCE_PATH &&
        (id = first_given(o, own_count, COUNT_OF(own_count))))
        cli_die_usage(PROGRAM,
                      "--%s would change nothing: the dataset at %s has its "
                      "own; drop it",
                      option_name(id), o->path);
}

static void parse_options(int argc, char **argv, struct bench_options *o)
{
    int code;
    *o = default_options();
    opterr = 0; /* getopt's messages name argv[0], a libtool path */
    while ((code = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
        if (code == '?')
            reject_option(argv[optind - 1]);
        if (code > OPT_FIRST_)
            o->given |= UINT64_C(1) << (code - OPT_FIRST_ - 1);
        if (!apply_number_option(o, code, optarg))
            apply_other_option(o, code, optarg);
    }
    if (optind < argc)
        cli_die_usage(PROGRAM, "unexpected argument '%s'", argv[optind]);
    check_gpu_options(o);
    check_source_options(o);
}

/* ---- small helpers ----------------------------------------------------- */

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

/* ---- verification ------------------------------------------------------ */

/* Which sample indices of one epoch have arrived so far: one bit each. */
struct epoch_seen {
    uint64_t epoch;
    uint64_t batches;  /* batches of this epoch checked so far */
    uint64_t distinct; /* indices seen at least once */
    uint64_t skipped;  /* left out by the skip policy: not missing */
    uint64_t *bits;
};

struct verifier {
    /* What every batch should hold. */
    uint64_t seed;
    uint32_t height, width, channels, classes;
    rf_layout layout;
    bool check_pixels; /* false for the empty source, which has none */
    bool ordered;
    size_t sample_bytes;
    uint64_t samples_per_epoch;
    uint64_t batch_size;
    uint64_t batches_per_epoch;
    uint64_t epochs;
    unsigned char *expected; /* one sample, as the source makes it */
    /* RF_SOURCE_PATH: the dataset, read again to check labels and pixels
     * (rf_dataset_decode() with the loader's configuration). */
    rf_dataset *dataset;
    rf_config *config;

    /* Epochs with batches still to come. Without ordering, batches of
     * neighbouring epochs interleave, so more than one can be open. */
    struct epoch_seen *open;
    size_t open_count, open_capacity;
    uint64_t epochs_opened;
    uint64_t next_sequence; /* the batch that ordered delivery owes next */

    /* Results. */
    uint64_t verified, missing, duplicated, corrupt;
    uint64_t out_of_order, malformed; /* batches */
    unsigned described;               /* failures described on stderr */
};

static void verifier_free(struct verifier *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->open_count; i++)
        free(v->open[i].bits);
    free(v->open);
    free(v->expected);
    rf_dataset_close(v->dataset);
    rf_config_free(v->config);
    free(v);
}

static void verifier_expect(struct verifier *v, const struct bench_options *o)
{
    v->seed = o->seed;
    v->height = (uint32_t)o->size;
    v->width = (uint32_t)o->size;
    v->channels = (uint32_t)o->channels;
    v->classes = (uint32_t)o->classes;
    v->layout = o->layout;
    v->check_pixels =
        o->source == RF_SOURCE_SYNTHETIC || o->source == RF_SOURCE_PATH;
    v->ordered = !o->unordered;
    v->sample_bytes = (size_t)o->size * (size_t)o->size * (size_t)o->channels;
    v->samples_per_epoch = (uint64_t)o->samples;
    v->batch_size = (uint64_t)o->batch;
    v->batches_per_epoch = ceil_div(v->samples_per_epoch, v->batch_size);
    v->epochs = (uint64_t)o->epochs;
}

static int configure(rf_config *cfg, const struct bench_options *o);

/* The dataset gives the sample count, the labels and (decoded with the
 * loader's own configuration) the pixels to expect. */
static int open_dataset_for(struct verifier *v, const struct bench_options *o)
{
    char *detail = NULL;
    const int rc = rf_dataset_open(&v->dataset, o->path, &detail);
    if (rc < 0) {
        cli_print_line(stderr, PROGRAM ": --verify: %s",
                       detail ? detail : rf_strerror(rc));
        free(detail);
        return rc;
    }
    v->samples_per_epoch = rf_dataset_size(v->dataset);
    v->batches_per_epoch = ceil_div(v->samples_per_epoch, v->batch_size);
    v->config = rf_config_create();
    return v->config ? configure(v->config, o) : -ENOMEM;
}

/* Returns NULL after saying why. */
static struct verifier *verifier_create(const struct bench_options *o)
{
    struct verifier *v = calloc(1, sizeof(*v));
    if (!v)
        goto no_memory;
    verifier_expect(v, o);
    if (o->source == RF_SOURCE_PATH && open_dataset_for(v, o) < 0)
        goto fail;
    if (v->check_pixels) {
        v->expected = malloc(v->sample_bytes);
        if (!v->expected)
            goto no_memory;
    }
    return v;
fail:
    verifier_free(v);
    return NULL;
no_memory:
    fprintf(stderr, PROGRAM ": no memory for --verify\n");
    verifier_free(v);
    return NULL;
}

static void describe_failure(struct verifier *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void describe_failure(struct verifier *v, const char *fmt, ...)
{
    if (v->described++ >= MAX_FAILURES_DESCRIBED)
        return;
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    cli_print_line(stderr, PROGRAM ": verify: %s", text);
}

/* Ordered delivery promises sequence 0, 1, 2, ... across all epochs. */
static void check_order(struct verifier *v, const rf_batch *b)
{
    if (v->ordered && b->sequence != v->next_sequence) {
        v->out_of_order++;
        describe_failure(v,
                         "batch %" PRIu64 " arrived when %" PRIu64 " was due",
                         b->sequence, v->next_sequence);
    }
    /* Continue from what arrived, so that one slip is counted once. */
    v->next_sequence = b->sequence + 1;
}

/* epoch and number must follow from sequence, and lie within the run. */
static bool position_is_consistent(struct verifier *v, const rf_batch *b)
{
    const uint64_t per_epoch = v->batches_per_epoch;
    if (b->sequence < per_epoch * v->epochs &&
        b->epoch == b->sequence / per_epoch &&
        b->number == b->sequence % per_epoch)
        return true;
    describe_failure(v,
                     "batch %" PRIu64 " says epoch %" PRIu64 ", number %" PRIu64
                     "; a run has %" PRIu64 " epochs of %" PRIu64 " batches",
                     b->sequence, b->epoch, b->number, v->epochs, per_epoch);
    return false;
}

/* The last batch of an epoch holds what is left over. */
static uint64_t samples_in_batch(const struct verifier *v, uint64_t number)
{
    const uint64_t first = number * v->batch_size;
    const uint64_t left = v->samples_per_epoch - first;
    return left < v->batch_size ? left : v->batch_size;
}

static bool shape_is_expected(struct verifier *v, const rf_batch *b)
{
    const uint64_t samples = samples_in_batch(v, b->number);
    const bool bytes_ok =
        !v->check_pixels || b->bytes == b->samples * v->sample_bytes;
    if (b->samples + b->skipped == samples &&
        b->sample_bytes == v->sample_bytes && b->height == v->height &&
        b->width == v->width && b->channels == v->channels &&
        b->layout == v->layout && bytes_ok)
        return true;
    describe_failure(v,
                     "batch %" PRIu64 " holds %" PRIu32 " samples of %" PRIu32
                     "x%" PRIu32 "x%" PRIu32 " (%zu bytes); expected %" PRIu64
                     " of %" PRIu32 "x%" PRIu32 "x%" PRIu32,
                     b->sequence, b->samples, b->height, b->width, b->channels,
                     b->bytes, samples, v->height, v->width, v->channels);
    return false;
}

/* A batch whose own description is wrong cannot be checked sample by
 * sample: its data may not even be where it says. */
static bool batch_is_checkable(struct verifier *v, const rf_batch *b)
{
    check_order(v, b);
    if (position_is_consistent(v, b) && shape_is_expected(v, b))
        return true;
    v->malformed++;
    return false;
}

/* Ends the bookkeeping of one epoch: whatever did not arrive is missing. */
static void close_epoch(struct verifier *v, struct epoch_seen *rec)
{
    const uint64_t missing =
        v->samples_per_epoch - rec->distinct - rec->skipped;
    if (missing > 0)
        describe_failure(v,
                         "epoch %" PRIu64 ": %" PRIu64 " samples never arrived",
                         rec->epoch, missing);
    v->missing += missing;
    /* Each epoch's bits come from their own calloc; the analyzer cannot
     * tell that two records never share them. */
    free(rec->bits); /* NOLINT(clang-analyzer-unix.Malloc) */
    /* Keep the open ones contiguous: the last takes this one's place. */
    struct epoch_seen *last = &v->open[--v->open_count];
    if (rec != last)
        *rec = *last;
}

static struct epoch_seen *open_epoch(struct verifier *v, uint64_t epoch)
{
    if (v->open_count == v->open_capacity) {
        const size_t capacity = v->open_capacity ? 2 * v->open_capacity : 4;
        struct epoch_seen *grown = realloc(v->open, capacity * sizeof(*grown));
        if (!grown)
            return NULL;
        v->open = grown;
        v->open_capacity = capacity;
    }
    uint64_t *bits =
        calloc(ceil_div(v->samples_per_epoch, 64), sizeof(uint64_t));
    if (!bits)
        return NULL;
    struct epoch_seen *rec = &v->open[v->open_count++];
    *rec = (struct epoch_seen){.epoch = epoch, .bits = bits};
    v->epochs_opened++;
    return rec;
}

/* Returns the record of epoch, opening it at its first batch; NULL when
 * out of memory. Few epochs are open at once, so a linear search does. */
static struct epoch_seen *epoch_record(struct verifier *v, uint64_t epoch)
{
    for (size_t i = 0; i < v->open_count; i++)
        if (v->open[i].epoch == epoch)
            return &v->open[i];
    return open_epoch(v, epoch);
}

static void mark_seen(struct verifier *v, struct epoch_seen *rec,
                      uint64_t index)
{
    uint64_t *const word = &rec->bits[index / 64];
    const uint64_t bit = UINT64_C(1) << (index % 64);
    if (*word & bit) {
        v->duplicated++;
        describe_failure(v,
                         "epoch %" PRIu64 ": sample %" PRIu64 " arrived again",
                         rec->epoch, index);
        return;
    }
    *word |= bit;
    rec->distinct++;
}

static bool pixels_match(struct verifier *v, const rf_batch *b, uint32_t i,
                         uint64_t index)
{
    const unsigned char *const got =
        (const unsigned char *)b->data + (size_t)i * v->sample_bytes;
    if (v->dataset) {
        if (rf_dataset_decode(v->dataset, v->config, b->epoch, index,
                              v->expected) < 0)
            return false;
    } else {
        rf_synthetic_fill(v->seed, index, v->classes, v->height, v->width,
                          v->channels, v->layout, v->expected);
    }
    return memcmp(got, v->expected, v->sample_bytes) == 0;
}

static int64_t expected_label(struct verifier *v, uint64_t index)
{
    if (!v->dataset)
        return rf_synthetic_label(v->seed, index, v->classes);
    rf_sample_info info;
    return rf_dataset_read(v->dataset, index, &info) < 0 ? -1 : info.label;
}

static void check_sample(struct verifier *v, const rf_batch *b, uint32_t i,
                         struct epoch_seen *rec)
{
    const uint64_t index = b->indices[i];
    const char *wrong = NULL;
    if (index >= v->samples_per_epoch) {
        wrong = "index out of range";
    } else {
        mark_seen(v, rec, index);
        if (b->labels[i] != expected_label(v, index))
            wrong = "wrong label";
        else if (v->check_pixels && !pixels_match(v, b, i, index))
            wrong = "wrong pixels";
    }
    if (wrong) {
        v->corrupt++;
        describe_failure(
            v, "batch %" PRIu64 ", sample %" PRIu32 " (index %" PRIu64 "): %s",
            b->sequence, i, index, wrong);
    }
}

/* Returns 0, or -ENOMEM when an epoch's record cannot be allocated. */
static int verify_batch(struct verifier *v, const rf_batch *b)
{
    if (!batch_is_checkable(v, b))
        return 0;
    struct epoch_seen *rec = epoch_record(v, b->epoch);
    if (!rec) {
        fprintf(stderr,
                PROGRAM ": verify: no memory to track epoch %" PRIu64 "\n",
                b->epoch);
        return -ENOMEM;
    }
    rec->skipped += b->skipped;
    for (uint32_t i = 0; i < b->samples; i++)
        check_sample(v, b, i, rec);
    v->verified += b->samples;
    if (++rec->batches == v->batches_per_epoch)
        close_epoch(v, rec);
    return 0;
}

/* After the last batch: epochs left open, or never begun, lack samples. */
static void verifier_finish(struct verifier *v)
{
    while (v->open_count > 0)
        close_epoch(v, &v->open[0]);
    if (v->epochs_opened < v->epochs) {
        const uint64_t never = v->epochs - v->epochs_opened;
        describe_failure(v, "%" PRIu64 " epochs never began", never);
        v->missing += never * v->samples_per_epoch;
    }
}

/* Prints the verdict; returns how many problems were found. */
static uint64_t verifier_report(const struct verifier *v)
{
    printf("verified: %" PRIu64 " samples, %" PRIu64 " missing, %" PRIu64
           " duplicated, %" PRIu64 " corrupt\n",
           v->verified, v->missing, v->duplicated, v->corrupt);
    if (v->out_of_order > 0 || v->malformed > 0)
        fprintf(stderr,
                PROGRAM ": verify: %" PRIu64 " batches out of order, %" PRIu64
                        " malformed\n",
                v->out_of_order, v->malformed);
    return v->missing + v->duplicated + v->corrupt + v->out_of_order +
           v->malformed;
}

/* ---- the run ----------------------------------------------------------- */

struct bench_run {
    double startup_s; /* inside rf_loader_open() */
    double opened_at; /* when rf_loader_open() returned */
    double elapsed_s; /* from then until the last batch was released */
    int error;        /* 0, or what ended the run early */
    rf_stats stats;   /* read just before close */
    /* --on-error skip: the first failures, as the loader lists them */
    rf_sample_error failures[3];
    size_t failures_listed;
    uint64_t failed_distinct; /* samples that failed, each counted once */
};

static int set_param(rf_config *cfg, rf_param param, int64_t value)
{
    const int rc = rf_config_set(cfg, param, value);
    if (rc < 0)
        fprintf(stderr, PROGRAM ": %s\n", rf_config_error(cfg));
    return rc;
}

static int configure(rf_config *cfg, const struct bench_options *o)
{
    const struct {
        rf_param param;
        int64_t value;
    } settings[] = {
        {RF_PARAM_PRODUCERS, o->producers},
        {RF_PARAM_BATCH_SIZE, o->batch},
        {RF_PARAM_SLOTS, o->slots},
        {RF_PARAM_EPOCHS, o->epochs},
        {RF_PARAM_SAMPLES, o->samples},
        /* The library takes the seed as its 64-bit pattern. */
        {RF_PARAM_SEED, (int64_t)o->seed},
        {RF_PARAM_HEIGHT, o->size},
        {RF_PARAM_WIDTH, o->size},
        {RF_PARAM_CHANNELS, o->channels},
        {RF_PARAM_CLASSES, o->classes},
        {RF_PARAM_LAYOUT, o->layout},
        {RF_PARAM_ORDERED, !o->unordered},
        {RF_PARAM_START_MODE, o->fork_mode ? RF_START_FORK : RF_START_SPAWN},
        {RF_PARAM_SOURCE, o->source},
        {RF_PARAM_TRANSFORM, o->transform},
        {RF_PARAM_ON_ERROR, o->on_error},
        {RF_PARAM_MAX_ERRORS, o->max_errors},
        {RF_PARAM_MAX_ERROR_PPM, o->max_error_ppm},
        {RF_PARAM_DCT_SCALING, !o->full_scale},
    };
    if (o->path && rf_config_set_path(cfg, o->path) < 0) {
        fprintf(stderr, PROGRAM ": %s\n", rf_config_error(cfg));
        return -EINVAL;
    }
    for (size_t i = 0; i < COUNT_OF(settings); i++) {
        const int rc = set_param(cfg, settings[i].param, settings[i].value);
        if (rc < 0)
            return rc;
    }
    return o->spin_ns < 0 ? 0 : set_param(cfg, RF_PARAM_SPIN_NS, o->spin_ns);
}

static int start_loader(const rf_config *cfg, rf_loader **loader,
                        struct bench_run *run)
{
    char *detail = NULL;
    const double start = cli_now_s();
    const int rc = rf_loader_open(loader, cfg, &detail);
    run->opened_at = cli_now_s();
    run->startup_s = run->opened_at - start;
    if (rc < 0)
        cli_print_line(stderr, PROGRAM ": %s: %s", rf_strerror(rc),
                       detail ? detail : "no detail");
    free(detail);
    return rc < 0 ? EXIT_RUN_FAILED : EXIT_SUCCESS;
}

/* Returns an exit status: a bad configuration is a usage error. */
static int open_loader(const struct bench_options *o, rf_loader **loader,
                       struct bench_run *run)
{
    rf_config *cfg = rf_config_create();
    if (!cfg) {
        fprintf(stderr, PROGRAM ": %s\n", rf_strerror(-ENOMEM));
        return EXIT_RUN_FAILED;
    }
    int status = configure(cfg, o) < 0 ? EXIT_USAGE : EXIT_SUCCESS;
    if (status == EXIT_SUCCESS)
        status = start_loader(cfg, loader, run);
    rf_config_free(cfg);
    return status;
}

struct progress {
    bool shown;
    double started;
    double last_drawn;
    int width; /* characters on screen, to erase them at the end */
};

static void progress_update(struct progress *p, const rf_loader *loader)
{
    const double now = cli_now_s();
    rf_stats stats;
    if (!p->shown || now - p->last_drawn < CLI_PROGRESS_INTERVAL_S ||
        rf_loader_stats(loader, &stats) < 0)
        return;
    p->last_drawn = now;
    const double rate = cli_per_second((double)stats.samples, now - p->started);
    const int printed = fprintf(stderr, "\r%" PRIu64 " batches, %.0f samples/s",
                                stats.batches, rate);
    if (printed - 1 > p->width) /* - 1: the \r takes no room */
        p->width = printed - 1;
}

static void progress_erase(const struct progress *p)
{
    if (p->shown && p->width > 0)
        fprintf(stderr, "\r%*s\r", p->width, "");
}

/* Retries a wait that a signal interrupted, as the API asks. */
static int next_batch(rf_loader *loader, rf_batch *batch)
{
    int rc;
    do
        rc = rf_loader_next(loader, batch);
    while (rc == -EINTR);
    return rc;
}

static int loader_failure(const rf_loader *loader, int rc)
{
    cli_print_line(stderr, PROGRAM ": %s: %s", rf_strerror(rc),
                   rf_loader_error(loader));
    return rc;
}

/* Takes every batch there is, verifying each when asked. Returns 0 after
 * the last epoch, or the error that ended the run. */
static int consume_all(rf_loader *loader, struct verifier *verifier,
                       struct progress *progress)
{
    rf_batch batch;
    int rc;
    while ((rc = next_batch(loader, &batch)) > 0) {
        const int verified = verifier ? verify_batch(verifier, &batch) : 0;
        rc = rf_loader_release(loader, &batch);
        if (rc < 0)
            return loader_failure(loader, rc);
        if (verified < 0) /* verify_batch has said why */
            return verified;
        progress_update(progress, loader);
    }
    return rc < 0 ? loader_failure(loader, rc) : 0;
}

static void run_to_end(rf_loader *loader, struct verifier *verifier,
                       const struct bench_options *o, struct bench_run *run)
{
    struct progress progress = {
        .shown = cli_progress_shown(o->quiet || o->json ? -1 : 0),
        .started = run->opened_at,
        .last_drawn = run->opened_at,
    };
    run->error = consume_all(loader, verifier, &progress);
    run->elapsed_s = cli_now_s() - run->opened_at;
    progress_erase(&progress);
    rf_loader_stats(loader, &run->stats);
    const size_t room = sizeof(run->failures) / sizeof(run->failures[0]);
    const uint64_t failed =
        rf_loader_sample_errors(loader, run->failures, room);
    run->failures_listed = failed < room ? (size_t)failed : room;
    run->failed_distinct = failed;
}

/* ---- reports ----------------------------------------------------------- */

/* Producers whose busy time rf_stats keeps. */
static uint32_t producers_counted(const rf_stats *stats)
{
    return stats->producers < STATS_MAX_PRODUCERS ? stats->producers
                                                  : STATS_MAX_PRODUCERS;
}

static double share_of_run(uint64_t ns, const struct bench_run *run)
{
    return cli_per_second((double)ns * 1e-9, run->elapsed_s);
}

static void print_busy_shares(const struct bench_run *run)
{
    const uint32_t count = producers_counted(&run->stats);
    printf("  producer busy");
    for (uint32_t p = 0; p < count; p++) {
        /* Ten to a line keeps 64 producers within 80 columns. */
        if (p > 0 && p % 10 == 0)
            printf("\n               ");
        printf(" %5.1f%%",
               100 * share_of_run(run->stats.producer_busy_ns[p], run));
    }
    putchar('\n');
}

static void print_summary(const struct bench_options *o,
                          const struct bench_run *run)
{
    const rf_stats *s = &run->stats;
    const double secs = run->elapsed_s;
    printf("%" PRIu64 " samples in %" PRIu64 " batches of %" PRId64 " (%" PRId64
           "x%" PRId64 "x%" PRId64 " %s, %s) in %.3f s\n",
           s->samples, s->batches, o->batch, o->size, o->size, o->channels,
           layout_names[o->layout],
           o->source == RF_SOURCE_PATH ? o->path : source_names[o->source],
           secs);
    printf("  startup       %.3f s\n", run->startup_s);
    printf("  producers     %" PRIu32 "\n", s->producers);
    printf("  slots         %" PRIu32 "\n", s->slots);
    printf("  throughput    %.0f samples/s, %.1f MB/s, %.1f batches/s\n",
           cli_per_second((double)s->samples, secs),
           cli_per_second((double)s->bytes / 1e6, secs),
           cli_per_second((double)s->batches, secs));
    printf("  consumer      waited %.1f%% of the time\n",
           100 * share_of_run(s->wait_ns, run));
    print_busy_shares(run);
    if (s->failed_samples == 0)
        return;
    printf("  skipped       %" PRIu64 " samples (--on-error skip; %" PRIu64
           " distinct, a file counted once per epoch it failed in); the "
           "first:\n",
           s->failed_samples, run->failed_distinct);
    for (size_t i = 0; i < run->failures_listed; i++)
        cli_print_line(stdout, "    epoch %" PRIu64 ": %s",
                       run->failures[i].epoch, run->failures[i].message);
}

/* Writes "key": with the comma that JSON needs before every key but the
 * first. */
static void json_key(bool *first, const char *key)
{
    printf("%s\"%s\": ", *first ? "" : ", ", key);
    *first = false;
}

static void json_u64(bool *first, const char *key, uint64_t value)
{
    json_key(first, key);
    printf("%" PRIu64, value);
}

static void json_f64(bool *first, const char *key, double value)
{
    json_key(first, key);
    printf("%.6g", value);
}

static void json_bool(bool *first, const char *key, bool value)
{
    json_key(first, key);
    fputs(value ? "true" : "false", stdout);
}

/* Only for names from this file's tables, which need no escaping. */
static void json_name(bool *first, const char *key, const char *value)
{
    json_key(first, key);
    printf("\"%s\"", value);
}

static void json_busy_shares(bool *first, const struct bench_run *run)
{
    const uint32_t count = producers_counted(&run->stats);
    json_key(first, "producer_busy");
    putchar('[');
    for (uint32_t p = 0; p < count; p++)
        printf("%s%.6g", p > 0 ? ", " : "",
               share_of_run(run->stats.producer_busy_ns[p], run));
    putchar(']');
}

static void json_verify_counts(bool *first, const struct verifier *v)
{
    json_u64(first, "verified", v->verified);
    json_u64(first, "missing", v->missing);
    json_u64(first, "duplicated", v->duplicated);
    json_u64(first, "corrupt", v->corrupt);
}

static void print_json(const struct bench_options *o,
                       const struct bench_run *run, const struct verifier *v,
                       uint64_t errors)
{
    const rf_stats *s = &run->stats;
    const double secs = run->elapsed_s;
    bool first = true;
    putchar('{');
    json_u64(&first, "samples", s->samples);
    json_f64(&first, "seconds", secs);
    json_f64(&first, "samples_per_s", cli_per_second((double)s->samples, secs));
    json_f64(&first, "bytes_per_s", cli_per_second((double)s->bytes, secs));
    json_f64(&first, "batches_per_s", cli_per_second((double)s->batches, secs));
    json_u64(&first, "producers", s->producers);
    json_u64(&first, "slots", s->slots);
    json_u64(&first, "batches", s->batches);
    json_u64(&first, "errors", errors);
    json_u64(&first, "skipped", s->failed_samples);
    json_u64(&first, "skipped_distinct", run->failed_distinct);
    json_f64(&first, "wait_share", share_of_run(s->wait_ns, run));
    json_busy_shares(&first, run);
    json_f64(&first, "startup_s", run->startup_s);
    json_u64(&first, "batch", (uint64_t)o->batch);
    json_u64(&first, "size", (uint64_t)o->size);
    json_u64(&first, "channels", (uint64_t)o->channels);
    json_name(&first, "layout", layout_names[o->layout]);
    json_name(&first, "source", source_names[o->source]);
    json_name(&first, "start", o->fork_mode ? "fork" : "spawn");
    json_bool(&first, "dct_scaling", !o->full_scale);
    json_bool(&first, "ordered", !o->unordered);
    if (v)
        json_verify_counts(&first, v);
    puts("}");
}

/* Prints what the run found; returns the exit status. */
static int report(const struct bench_options *o, const struct bench_run *run,
                  struct verifier *verifier)
{
    uint64_t errors = run->error < 0;
    /* A run cut short leaves epochs unfinished: not worth a verdict. */
    if (verifier && run->error == 0) {
        verifier_finish(verifier);
        errors += verifier_report(verifier);
    }
    if (o->json)
        print_json(o, run, run->error == 0 ? verifier : NULL, errors);
    else
        print_summary(o, run);
    return errors > 0 ? EXIT_RUN_FAILED : EXIT_SUCCESS;
}

/* The GPU consumer takes the loader over and closes it. */
static int run_gpu(const struct bench_options *o, rf_loader **loader)
{
#ifdef RF_BENCH_GPU
    const struct gpu_bench_options g = {
        .device = (int)o->device,
        .depth = (uint32_t)o->depth,
        .step_us = o->step_us,
        .batches = ceil_div((uint64_t)o->samples, (uint64_t)o->batch) *
                   (uint64_t)o->epochs,
        .batch_bytes = (size_t)o->batch * (size_t)o->size * (size_t)o->size *
                       (size_t)o->channels,
        .batch = (uint32_t)o->batch,
    };
    return bench_gpu(loader, &g);
#else
    (void)o; /* check_gpu_options() refused --gpu */
    (void)loader;
    return EXIT_USAGE;
#endif
}

int main(int argc, char **argv)
{
    struct bench_options opts;
    struct bench_run run = {0};
    struct verifier *verifier = NULL;
    rf_loader *loader = NULL;
    int status = EXIT_RUN_FAILED;

    parse_options(argc, argv, &opts);
    /* Before the loader opens, so that its set-up is not timed. */
    if (opts.verify && !(verifier = verifier_create(&opts)))
        goto out;
    status = open_loader(&opts, &loader, &run);
    if (status != EXIT_SUCCESS)
        goto out;
    if (opts.gpu) {
        status = run_gpu(&opts, &loader);
        goto out;
    }
    run_to_end(loader, verifier, &opts, &run);
    status = report(&opts, &run, verifier);
out:
    rf_loader_close(loader);
    verifier_free(verifier);
    return status;
}
