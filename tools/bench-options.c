/*
 * tools/bench-options.c - ringfeed-bench's options: parsing, --help, the
 * checks that refuse an option which would change nothing, and the
 * rf_config a run opens its loader with. See bench-options.h.
 *
 * An option that sets a library parameter names it, and its range, its
 * default and the choices it takes come from the library's parameter
 * table (rf_param_lookup()): the tool writes down only where it differs
 * from the library, and says why.
 */
#include "bench-options.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli-terms.h"

/* Help texts start in this column after "  --", so that they line up. */
#define HELP_COLUMN 19

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
      "smaller DCT scale (RF_PARAM_DCT_SCALING 0): PIL's pixels, slower")      \
    X(JPEG_WARNINGS, "jpeg-warnings", required_argument, "W",                  \
      RF_PARAM_JPEG_WARNINGS,                                                  \
      "a PATH or synthetic-jpeg: damaged JPEGs: pil: PIL's verdicts; "         \
      "lenient: accept all; strict: any libjpeg warning fails")                \
    X(NO_FLIP, "no-flip", no_argument, "", NO_PARAM,                           \
      "--transform train: flip no sample (RF_PARAM_FLIP 0)")                   \
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

enum option_id {
    OPT_FIRST_ = 256, /* above every char, so no short option can clash */
#define OPTION_ID_(id, ...) OPT_##id,
    NUMBER_OPTIONS(OPTION_ID_) OTHER_OPTIONS(OPTION_ID_)
#undef OPTION_ID_
};

/* clang-format cannot see that the macros expand to whole rows. */
/* clang-format off */
static const struct option long_options[] = {
#define NUMBER_LONG_(id, name, ...) {name, required_argument, NULL, OPT_##id},
#define OTHER_LONG_(id, name, has_arg, ...) {name, has_arg, NULL, OPT_##id},
    NUMBER_OPTIONS(NUMBER_LONG_) OTHER_OPTIONS(OTHER_LONG_)
#undef NUMBER_LONG_
#undef OTHER_LONG_
    {NULL, 0, NULL, 0},
};

/* clang-format on */

/* The parameters whose flag is not their name with dashes. */
static const struct cli_alias aliases[] = {
    {"batch_size", "batch"},
    {"height", "size"},
    {"width", "size"},
    {NULL, NULL},
};

void bench_user_terms(const char *text, char *out, size_t len)
{
    cli_user_terms(text, long_options, aliases, out, len);
}

struct number_option {
    const char *name;
    rf_param param;        /* NO_PARAM: the benchmark's own */
    int64_t min, max, def; /* FROM_TABLE: the parameter's */
    const char *help;
};

/* In option_id order: number_options[id - OPT_FIRST_ - 1]. */
static const struct number_option number_options[] = {
#define NUMBER_ROW_(id, name, field, param, min, max, def, help)               \
    {name, param, min, max, def, help},
    NUMBER_OPTIONS(NUMBER_ROW_)
#undef NUMBER_ROW_
};

struct other_option {
    const char *name, *metavar;
    rf_param param; /* whose default --help shows; NO_PARAM: none */
    const char *help;
};

static const struct other_option other_options[] = {
#define OTHER_ROW_(id, name, has_arg, metavar, param, help)                    \
    {name, metavar, param, help},
    OTHER_OPTIONS(OTHER_ROW_)
#undef OTHER_ROW_
};

/* ---- the library's table ------------------------------------------------ */

/* param's row of the library's table (cli_param_info()). */
static rf_param_info param_info(rf_param param)
{
    return cli_param_info(PROGRAM, param);
}

/* Copies word `position` of a list of words separated by single spaces
 * into out; false when the list has no such word. */
static bool word_at(const char *words, int64_t position, char *out, size_t len)
{
    for (int64_t i = 0; words && *words; i++) {
        const size_t n = strcspn(words, " ");
        if (i == position) {
            snprintf(out, len, "%.*s", (int)n, words);
            return true;
        }
        words += n + (words[n] == ' ');
    }
    return false;
}

const char *bench_choice_name(rf_param param, int64_t value, char *out,
                              size_t len)
{
    const rf_param_info info = param_info(param);
    if (!word_at(info.choices, value - info.min, out, len))
        snprintf(out, len, "?");
    return out;
}

/* The value of choice parameter info whose name is text, or -1. */
static int64_t choice_value(const rf_param_info *info, const char *text)
{
    char word[64];
    for (int64_t v = info->min; v <= info->max; v++)
        if (word_at(info->choices, v - info->min, word, sizeof(word)) &&
            strcmp(word, text) == 0)
            return v;
    return -1;
}

/* The option with each FROM_TABLE replaced by its parameter's value. */
static struct number_option resolved(enum option_id id)
{
    struct number_option n = number_options[id - OPT_FIRST_ - 1];
    if (n.param == NO_PARAM)
        return n;
    const rf_param_info info = param_info(n.param);
    n.min = n.min == FROM_TABLE ? info.min : n.min;
    n.max = n.max == FROM_TABLE ? info.max : n.max;
    n.def = n.def == FROM_TABLE ? info.default_value : n.def;
    return n;
}

/* ---- --help ----------------------------------------------------------- */

static void print_option_help(const char *name, const char *metavar,
                              const char *help, const char *default_text)
{
    const int pad = HELP_COLUMN - (int)strlen(name);
    printf("  --%s %-*s %s", name, pad > 0 ? pad : 0, metavar, help);
    if (default_text)
        printf(" (default %s)", default_text);
    putchar('\n');
}

static void print_number_help(enum option_id id)
{
    const struct number_option n = resolved(id);
    char text[32];
    snprintf(text, sizeof(text), "%" PRId64, n.def);
    print_option_help(n.name, "N", n.help, text);
}

/* The default of other option o, as --help shows it, into text; NULL
 * when it has none. */
static const char *other_default(const struct other_option *o, char *text,
                                 size_t len)
{
    if (o->param == NO_PARAM)
        return NULL;
    const rf_param_info info = param_info(o->param);
    if (info.kind == RF_PARAM_KIND_CHOICE)
        return bench_choice_name(o->param, info.default_value, text, len);
    if (o->param == RF_PARAM_HEIGHT) { /* --size: HxW when they differ */
        const int64_t width = param_info(RF_PARAM_WIDTH).default_value;
        if (width == info.default_value)
            snprintf(text, len, "%" PRId64, width);
        else
            snprintf(text, len, "%" PRId64 "x%" PRId64, info.default_value,
                     width);
        return text;
    }
    /* The seed: the tool takes its 64-bit pattern, unsigned. */
    snprintf(text, len, "%" PRIu64, (uint64_t)info.default_value);
    return text;
}

static void print_usage(void)
{
    fputs("Usage: " PROGRAM " [OPTION]...\n"
          "Measures how fast ringfeed hands out batches of images: "
          "synthetic ones, or a\ndataset's (--source PATH).\n\n",
          stdout);
    for (size_t i = 0; i < COUNT_OF(number_options); i++)
        print_number_help((enum option_id)(OPT_FIRST_ + 1 + i));
    for (size_t i = 0; i < COUNT_OF(other_options); i++) {
        char text[64];
        const struct other_option *o = &other_options[i];
        print_option_help(o->name, o->metavar, o->help,
                          other_default(o, text, sizeof(text)));
    }
    fputs("\nSet RINGFEED_PRODUCER to the ringfeed-producer helper when it "
          "is not installed.\n"
          "Exit status: 0 success, 1 the run or --verify failed, 2 bad "
          "usage.\n",
          stdout);
}

/* ---- parsing ------------------------------------------------------------ */

static struct bench_options default_options(void)
{
    struct bench_options o = {0};
#define NUMBER_DEFAULT_(id, name, field, ...) o.field = resolved(OPT_##id).def;
    NUMBER_OPTIONS(NUMBER_DEFAULT_)
#undef NUMBER_DEFAULT_
    o.height = param_info(RF_PARAM_HEIGHT).default_value;
    o.width = param_info(RF_PARAM_WIDTH).default_value;
    o.seed = (uint64_t)param_info(RF_PARAM_SEED).default_value;
    o.source = (rf_source_kind)param_info(RF_PARAM_SOURCE).default_value;
    o.transform = (rf_transform)param_info(RF_PARAM_TRANSFORM).default_value;
    o.on_error = (rf_on_error)param_info(RF_PARAM_ON_ERROR).default_value;
    o.layout = (rf_layout)param_info(RF_PARAM_LAYOUT).default_value;
    o.jpeg_warnings =
        (rf_jpeg_verdict)param_info(RF_PARAM_JPEG_WARNINGS).default_value;
    o.on_producer_death =
        (rf_on_producer_death)param_info(RF_PARAM_ON_PRODUCER_DEATH)
            .default_value;
    return o;
}

/* The value of choice parameter param named text, or exits listing the
 * names. */
static int64_t parse_choice(const char *option, rf_param param,
                            const char *text)
{
    const rf_param_info info = param_info(param);
    const int64_t value = choice_value(&info, text);
    if (value >= 0)
        return value;
    fprintf(stderr, PROGRAM ": --%s wants", option);
    char word[64];
    for (int64_t i = 0; word_at(info.choices, i, word, sizeof(word)); i++)
        fprintf(stderr, "%s %s", i == 0 ? "" : " or", word);
    fprintf(stderr, ", not '%s'\n", text);
    cli_usage_failure(PROGRAM);
}

/* An empty --source names nothing: says which it takes, and exits. */
static void refuse_empty_source(const rf_param_info *info)
    __attribute__((noreturn));

static void refuse_empty_source(const rf_param_info *info)
{
    char kinds[256] = "", word[64];
    size_t used = 0;
    for (int64_t v = info->min; v <= info->max; v++) {
        if (v == RF_SOURCE_PATH ||
            !word_at(info->choices, v - info->min, word, sizeof(word)))
            continue;
        const int n = snprintf(kinds + used, sizeof(kinds) - used, "%s%s",
                               used ? ", " : "", word);
        if (n < 0 || (size_t)n >= sizeof(kinds) - used)
            break;
        used += (size_t)n;
    }
    cli_die_usage(PROGRAM,
                  "--source wants %s or the PATH of a dataset, not an empty "
                  "string",
                  kinds);
}

/* A source kind by name (other than "path"), or else a dataset path. */
static void parse_source(struct bench_options *o, const char *arg)
{
    const rf_param_info info = param_info(RF_PARAM_SOURCE);
    if (*arg == '\0')
        refuse_empty_source(&info);
    const int64_t kind = choice_value(&info, arg);
    if (kind >= 0 && kind != RF_SOURCE_PATH) {
        o->source = (rf_source_kind)kind;
        return;
    }
    o->source = RF_SOURCE_PATH;
    o->path = arg;
}

/* One side of --size, n bytes of decimal digits at text, into *out;
 * false unless it lies within info's range. */
static bool parse_side(const char *text, size_t n, const rf_param_info *info,
                       int64_t *out)
{
    int64_t value = 0;
    if (n == 0 || n > 10) /* 10 digits: beyond any side, within int64_t */
        return false;
    for (size_t i = 0; i < n; i++) {
        if (text[i] < '0' || text[i] > '9')
            return false;
        value = value * 10 + (text[i] - '0');
    }
    *out = value;
    return value >= info->min && value <= info->max;
}

/* --size N (height and width) or HxW, as ringfeed-pack's --raw: each side
 * within its parameter's range. */
static void parse_size(struct bench_options *o, const char *arg)
{
    const rf_param_info height = param_info(RF_PARAM_HEIGHT);
    const rf_param_info width = param_info(RF_PARAM_WIDTH);
    const size_t n = strcspn(arg, "x");
    const bool ok = arg[n] == '\0'
                        ? parse_side(arg, n, &height, &o->height) &&
                              parse_side(arg, n, &width, &o->width)
                        : parse_side(arg, n, &height, &o->height) &&
                              parse_side(arg + n + 1, strlen(arg + n + 1),
                                         &width, &o->width);
    if (!ok)
        cli_die_usage(PROGRAM,
                      "--size wants N or HxW (height x width), each in "
                      "%" PRId64 "..%" PRId64 ", not '%s'",
                      height.min > width.min ? height.min : width.min,
                      height.max < width.max ? height.max : width.max, arg);
}

static int64_t parse_number(enum option_id id, const char *arg)
{
    const struct number_option n = resolved(id);
    return cli_parse_int(PROGRAM, n.name, arg, n.min, n.max);
}

/* Stores a numeric option; returns false when code is not one. */
static bool apply_number_option(struct bench_options *o, int code,
                                const char *arg)
{
    switch (code) {
#define NUMBER_CASE_(id, name, field, ...)                                     \
    case OPT_##id:                                                             \
        o->field = parse_number(OPT_##id, arg);                                \
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
    case OPT_SIZE:
        parse_size(o, arg);
        break;
    case OPT_TRANSFORM:
        o->transform =
            (rf_transform)parse_choice("transform", RF_PARAM_TRANSFORM, arg);
        break;
    case OPT_ON_ERROR:
        o->on_error =
            (rf_on_error)parse_choice("on-error", RF_PARAM_ON_ERROR, arg);
        break;
    case OPT_JPEG_WARNINGS:
        o->jpeg_warnings = (rf_jpeg_verdict)parse_choice(
            "jpeg-warnings", RF_PARAM_JPEG_WARNINGS, arg);
        break;
    case OPT_NO_FLIP:
        o->no_flip = true;
        break;
    case OPT_ON_PRODUCER_DEATH:
        o->on_producer_death = (rf_on_producer_death)parse_choice(
            "on-producer-death", RF_PARAM_ON_PRODUCER_DEATH, arg);
        break;
    case OPT_SEED:
        o->seed = cli_parse_uint(PROGRAM, "seed", arg, 0, UINT64_MAX);
        break;
    case OPT_LAYOUT:
        o->layout = (rf_layout)parse_choice("layout", RF_PARAM_LAYOUT, arg);
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
        exit(cli_finish_output(PROGRAM, EXIT_SUCCESS));
    }
}

/* ---- options that cannot go together ------------------------------------ */

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

/* --gpu has its own report and no verification; its own options would
 * change nothing without it. */
static void check_gpu_options(const struct bench_options *o)
{
    static const enum option_id gpu_only[] = {OPT_DEVICE, OPT_DEPTH,
                                              OPT_STEP_US};
    enum option_id id;
#ifndef RF_BENCH_GPU
    if (o->gpu)
        cli_die_usage(PROGRAM, "--gpu: this ringfeed-bench was built without "
                               "CUDA; configure --with-cuda");
#endif
    if (o->gpu && (o->verify || o->json))
        cli_die_usage(PROGRAM, "--gpu goes with neither --verify nor --json");
    if (!o->gpu && (id = first_given(o, gpu_only, COUNT_OF(gpu_only))))
        cli_die_usage(PROGRAM,
                      "--%s applies to --gpu only, and would change nothing "
                      "without it: add --gpu, or drop it",
                      option_name(id));
}

/* Options that would change nothing for the source given are refused,
 * so that a run never measures something other than what was asked. */
static void check_source_options(const struct bench_options *o)
{
    static const enum option_id decoding[] = {
        OPT_TRANSFORM,  OPT_ON_ERROR,          OPT_FULL_SCALE,
        OPT_MAX_ERRORS, OPT_MAX_ERROR_PPM,     OPT_MAX_PIXELS,
        OPT_MAX_SCANS,  OPT_MAX_DECODE_MEMORY, OPT_JPEG_WARNINGS,
        OPT_RESIZE,     OPT_MIN_SCALE_PPM,     OPT_NO_FLIP};
    static const enum option_id skip_limits[] = {OPT_MAX_ERRORS,
                                                 OPT_MAX_ERROR_PPM};
    static const enum option_id own_count[] = {OPT_SAMPLES, OPT_CLASSES};
    const bool decodes =
        o->source == RF_SOURCE_PATH || o->source == RF_SOURCE_SYNTHETIC_JPEG;
    enum option_id id;
    if (!decodes && (id = first_given(o, decoding, COUNT_OF(decoding)))) {
        char source[32];
        cli_die_usage(PROGRAM,
                      "--%s applies to a PATH or synthetic-jpeg, and would "
                      "change nothing for --source %s: drop it",
                      option_name(id),
                      bench_choice_name(RF_PARAM_SOURCE, o->source, source,
                                        sizeof(source)));
    }
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

/* A transform's own options would change nothing under another one; the
 * respawn limits nothing when a dead producer ends the run. */
static void check_policy_options(const struct bench_options *o)
{
    static const enum option_id train_only[] = {OPT_MIN_SCALE_PPM, OPT_NO_FLIP};
    static const enum option_id respawn_limits[] = {OPT_MAX_RESPAWNS,
                                                    OPT_RESPAWN_WINDOW_S};
    enum option_id id;
    char name[32];
    if (o->transform != RF_TRANSFORM_EVAL && given(o, OPT_RESIZE))
        cli_die_usage(PROGRAM,
                      "--resize applies to --transform eval, and would change "
                      "nothing for --transform %s: add --transform eval, or "
                      "drop it",
                      bench_choice_name(RF_PARAM_TRANSFORM, o->transform, name,
                                        sizeof(name)));
    if (o->transform != RF_TRANSFORM_TRAIN &&
        (id = first_given(o, train_only, COUNT_OF(train_only))))
        cli_die_usage(PROGRAM,
                      "--%s applies to --transform train, and would change "
                      "nothing for --transform %s: drop it",
                      option_name(id),
                      bench_choice_name(RF_PARAM_TRANSFORM, o->transform, name,
                                        sizeof(name)));
    if (o->on_producer_death != RF_ON_DEATH_RESPAWN &&
        (id = first_given(o, respawn_limits, COUNT_OF(respawn_limits))))
        cli_die_usage(PROGRAM,
                      "--%s limits --on-producer-death respawn, and would "
                      "change nothing with fail: drop it",
                      option_name(id));
}

/* A pack whose samples are all raw pixels (zstd frames: --raw of
 * ringfeed-pack) holds them decoded, resized and cropped when it was
 * packed; the decoder only decompresses them, so --transform,
 * --full-scale or a transform's own options would change nothing, and the run
 * would measure something other than what was asked. Without them the run takes
 * transform none, which is what such a pack gets (the loader would otherwise
 * say at open that its default transform does not apply). Only a regular file
 * can be such a pack: a folder is not opened here (listing a million files
 * twice would double the start); a path that does not open is left to
 * rf_loader_open(), whose message says why. */
static void check_raw_pack_options(struct bench_options *o)
{
    struct stat st;
    rf_dataset *ds = NULL;
    rf_dataset_info info;
    if (o->source != RF_SOURCE_PATH || stat(o->path, &st) != 0 ||
        !S_ISREG(st.st_mode) || rf_dataset_open(&ds, o->path, NULL) < 0)
        return;
    const int rc = rf_dataset_get_info(ds, &info);
    rf_dataset_close(ds);
    if (rc < 0 || info.samples == 0 || info.zstd_samples != info.samples)
        return;
    static const enum option_id decoding[] = {OPT_TRANSFORM, OPT_FULL_SCALE,
                                              OPT_RESIZE, OPT_MIN_SCALE_PPM,
                                              OPT_NO_FLIP};
    const enum option_id id = first_given(o, decoding, COUNT_OF(decoding));
    if (!id) {
        o->transform = RF_TRANSFORM_NONE;
        return;
    }
    cli_die_usage(PROGRAM,
                  "--%s would change nothing: every sample of %s is raw "
                  "pixels (%ux%ux%u), decoded, resized and cropped when it "
                  "was packed; drop it, or pack the JPEG folder without --raw",
                  option_name(id), o->path, info.height, info.width,
                  info.channels);
}

void bench_parse_options(int argc, char **argv, struct bench_options *o)
{
    int code;
    *o = default_options();
    while ((code = cli_next_option(PROGRAM, argc, argv, long_options)) != -1) {
        if (code > OPT_FIRST_)
            o->given |= UINT64_C(1) << (code - OPT_FIRST_ - 1);
        if (!apply_number_option(o, code, optarg))
            apply_other_option(o, code, optarg);
    }
    if (optind < argc)
        cli_die_usage(PROGRAM, "unexpected argument '%s'", argv[optind]);
    check_gpu_options(o);
    check_source_options(o);
    check_raw_pack_options(o);
    check_policy_options(o);
}

/* ---- the configuration -------------------------------------------------- */

static int set_param(rf_config *cfg, rf_param param, int64_t value)
{
    const int rc = rf_config_set(cfg, param, value);
    if (rc < 0)
        fprintf(stderr, PROGRAM ": %s\n", rf_config_error(cfg));
    return rc;
}

int bench_configure(rf_config *cfg, const struct bench_options *o)
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
        {RF_PARAM_HEIGHT, o->height},
        {RF_PARAM_WIDTH, o->width},
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
        {RF_PARAM_SPIN_NS, o->spin_ns},
        {RF_PARAM_MAX_PIXELS, o->max_pixels},
        {RF_PARAM_MAX_SCANS, o->max_scans},
        {RF_PARAM_MAX_DECODE_MEMORY, o->max_decode_memory},
        {RF_PARAM_JPEG_WARNINGS, o->jpeg_warnings},
        {RF_PARAM_RESIZE, o->resize},
        {RF_PARAM_MIN_SCALE_PPM, o->min_scale_ppm},
        {RF_PARAM_FLIP, !o->no_flip},
        {RF_PARAM_BATCH_TIMEOUT_MS, o->batch_timeout_ms},
        {RF_PARAM_STALL_WARNING_MS, o->stall_warning_ms},
        {RF_PARAM_ON_PRODUCER_DEATH, o->on_producer_death},
        {RF_PARAM_MAX_RESPAWNS, o->max_respawns},
        {RF_PARAM_RESPAWN_WINDOW_S, o->respawn_window_s},
        {RF_PARAM_RANK, o->rank},
        {RF_PARAM_WORLD_SIZE, o->world_size},
    };
    if (o->path && rf_config_set_path(cfg, o->path) < 0) {
        /* The library's reason names its function; the user set --source. */
        static const char function[] = "rf_config_set_path: ";
        const char *why = rf_config_error(cfg);
        if (strncmp(why, function, sizeof(function) - 1) == 0)
            why += sizeof(function) - 1;
        cli_print_line(stderr, PROGRAM ": --source: %s", why);
        return -EINVAL;
    }
    for (size_t i = 0; i < COUNT_OF(settings); i++) {
        const int rc = set_param(cfg, settings[i].param, settings[i].value);
        if (rc < 0)
            return rc;
    }
    return 0;
}
