/*
 * tools/bench-options.c - ringfeed-bench's options: parsing each flag
 * into struct bench_options, --help, and the rf_config a run opens its
 * loader with. See bench-options.h. Parsing and --help are generated
 * from the table in bench-option-table.h; the options that cannot go
 * together are refused by bench-option-rules.c, once every flag is
 * parsed.
 */
#include "bench-option-table.h"

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

const char *bench_option_name(enum option_id id)
{
    return long_options[option_index(id)].name;
}

/* The library's calls and fields that its messages name, as this tool's
 * summary shows them. */
static const struct cli_call calls[] = {
    {"(rf_stats.failed_samples) and listed (rf_loader_sample_errors())",
     "and listed in the summary's \"skipped\" lines"},
    {"rf_stats.failed_samples", "the summary's \"skipped\" count"},
    {"rf_loader_sample_errors()", "the summary's \"skipped\" list"},
    {"rf_dataset_decode() of it", "ringfeed-pack --verify of the --source"},
    {NULL, NULL},
};

void bench_user_terms(const char *text, char *out, size_t len)
{
    cli_user_terms(text, long_options, aliases, out, len);
    cli_replace_calls(out, len, calls);
}

struct number_option {
    const char *name;
    rf_param param;        /* NO_PARAM: the benchmark's own */
    int64_t min, max, def; /* FROM_TABLE: the parameter's */
    const char *help;
};

/* In option_id order: number_options[option_index(id)]. */
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
    struct number_option n = number_options[option_index(id)];
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
    struct stat st;
    /* "synthetic" is a kind of source, also when a folder of that name
     * lies here: which the user meant cannot be told, and a run on
     * made-up images would look like one on the dataset. */
    if (kind >= 0 && kind != RF_SOURCE_PATH && stat(arg, &st) == 0)
        cli_die_usage(PROGRAM,
                      "--source %s names a kind of source, not a path, but "
                      "a %s called '%s' is here too: to read it, use "
                      "--source ./%s; for the kind, run from another "
                      "folder",
                      arg, S_ISDIR(st.st_mode) ? "folder" : "file", arg, arg);
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

void bench_parse_options(int argc, char **argv, struct bench_options *o)
{
    int code;
    *o = default_options();
    while ((code = cli_next_option(PROGRAM, argc, argv, long_options)) != -1) {
        if (code > OPT_FIRST_)
            o->given |= option_bit((enum option_id)code);
        if (!apply_number_option(o, code, optarg))
            apply_other_option(o, code, optarg);
    }
    if (optind < argc)
        cli_die_usage(PROGRAM, "unexpected argument '%s'", argv[optind]);
    bench_check_option_rules(o);
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
