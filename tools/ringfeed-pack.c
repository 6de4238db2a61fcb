/*
 * ringfeed-pack - writes a folder of class folders (or another packed
 * file) into one ringfeed packed file, and checks packed files.
 *
 *     ringfeed-pack train/ train.pack               JPEG bytes as they are
 *     ringfeed-pack train/ train-160.pack --raw 160x160 --dict-size 112640
 *     ringfeed-pack train/ train-64.pack --raw 64x64 --full-scale
 *     ringfeed-pack --verify train.pack --jobs 8
 *     ringfeed-pack --verify train/ --jpeg-warnings strict
 *
 * With --raw, each image is decoded, resized (short side to 8/7 of the
 * size) and centre-cropped, as a loader's eval transform does, and the
 * pixels are stored as zstd frames, optionally with a dictionary trained
 * on a sample of them: a loader then only decompresses, so the pixels are
 * fixed here (--full-scale: PIL's, RF_PARAM_DCT_SCALING 0). The format is
 * described in docs/packed-format.md.
 *
 * The work on each sample (reading, decoding, compressing) is done by
 * --jobs worker processes (work-pool.h); this process takes their results
 * in sample order and alone writes the pack and the messages, so that
 * both are the same whatever --jobs is. Wherever samples are decoded
 * (--raw, --skip-bad, --verify) a loader's limits apply, set by the
 * flags named after them (--max-pixels, --jpeg-warnings, ...), and the
 * library's reasons are printed in those flags (pack_user_terms()).
 * Uses the public API, libzstd and libc only. Exit status: 0 success, 1
 * failure (or bad samples found by --verify), 2 bad usage.
 *
 * This file reads the command line; the rest is in ringfeed-pack.h's
 * files: pack-build.c (writing), pack-verify.c (--verify),
 * pack-samples.c (the work on each sample) and pack-progress.c.
 */
#include <ringfeed.h>

#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-terms.h"
#include "cli.h"
#include "ringfeed-pack.h"

#define MAX_SIDE 65536
#define MAX_DICT (UINT64_C(1) << 24)
#define MAX_JOBS 1024

/* Help texts start in this column, so that they line up. */
#define HELP_COLUMN 20
#define HELP_WIDTH 80

/* The decode limits: X(ID, flag, param). The flag is the parameter's name
 * with dashes, as cli-terms.h finds it; the range, the default and the
 * choices are the library's (rf_param_lookup()). */
#define DECODE_OPTIONS(X)                                                      \
    X(MAX_PIXELS, "max-pixels", RF_PARAM_MAX_PIXELS)                           \
    X(MAX_SCANS, "max-scans", RF_PARAM_MAX_SCANS)                              \
    X(MAX_DECODE_MEMORY, "max-decode-memory", RF_PARAM_MAX_DECODE_MEMORY)      \
    X(JPEG_WARNINGS, "jpeg-warnings", RF_PARAM_JPEG_WARNINGS)

/* Their option codes are OPT_DECODE + their position; above every char,
 * so that none clashes with the other options' codes. */
enum decode_option_id {
#define DECODE_ID_(id, flag, param) DECODE_##id,
    DECODE_OPTIONS(DECODE_ID_)
#undef DECODE_ID_
};
enum { OPT_DECODE = 256 };

const rf_param pack_decode_params[PACK_DECODE_PARAMS] = {
#define DECODE_PARAM_(id, flag, param) param,
    DECODE_OPTIONS(DECODE_PARAM_)
#undef DECODE_PARAM_
};

static const char *const decode_flags[] = {
#define DECODE_FLAG_(id, flag, param) flag,
    DECODE_OPTIONS(DECODE_FLAG_)
#undef DECODE_FLAG_
};
_Static_assert(sizeof(decode_flags) / sizeof(decode_flags[0]) ==
                   PACK_DECODE_PARAMS,
               "PACK_DECODE_PARAMS counts DECODE_OPTIONS");

/* The same with their dashes, for messages. */
static const char *const decode_dashed[PACK_DECODE_PARAMS] = {
#define DECODE_DASHED_(id, flag, param) "--" flag,
    DECODE_OPTIONS(DECODE_DASHED_)
#undef DECODE_DASHED_
};

/* ---- the library's parameter table ------------------------------------- */

/* param's row of the library's table (cli_param_info()). */
static rf_param_info param_info(rf_param param)
{
    return cli_param_info(PROGRAM, param);
}

/* The length of word `position` of a list of words separated by single
 * spaces, which *word is set to; 0 when the list has no such word. */
static size_t word_at(const char *words, int64_t position, const char **word)
{
    for (int64_t i = 0; words && *words; i++) {
        const size_t n = strcspn(words, " ");
        if (i == position) {
            *word = words;
            return n;
        }
        words += n + (words[n] == ' ');
    }
    return 0;
}

/* ---- usage ------------------------------------------------------------- */

/* Prints head ("  --max-scans N"), then text from HELP_COLUMN on, its
 * words wrapped before HELP_WIDTH. */
static void print_wrapped(const char *head, const char *text)
{
    int column = printf("%s", head);
    if (column >= HELP_COLUMN) {
        putchar('\n');
        column = 0;
    }
    column += printf("%*s", HELP_COLUMN - column, "");
    for (const char *p = text; *p;) {
        const int n = (int)strcspn(p, " ");
        if (column > HELP_COLUMN && column + 1 + n >= HELP_WIDTH)
            column = printf("\n%*s", HELP_COLUMN, "") - 1;
        else if (column > HELP_COLUMN)
            column += printf(" ");
        column += printf("%.*s", n, p);
        p += n + (p[n] == ' ');
    }
    putchar('\n');
}

/* "pil, lenient or strict", from a choice parameter's names. */
static void list_choices(const rf_param_info *info, char *out, size_t len)
{
    const char *word = NULL;
    int64_t count = 0;
    size_t used = 0;
    while (word_at(info->choices, count, &word) > 0)
        count++;
    out[0] = '\0';
    for (int64_t i = 0; i < count && used < len; i++) {
        const size_t n = word_at(info->choices, i, &word);
        const char *separator = i == 0 ? "" : i + 1 == count ? " or " : ", ";
        used += (size_t)snprintf(out + used, len - used, "%s%.*s", separator,
                                 (int)n, word);
    }
}

/* The decode limits' help, from the library's table. */
static void print_decode_help(void)
{
    puts("  Where samples are decoded (--raw, --skip-bad, --verify), as a "
         "loader\n  decodes them:");
    for (unsigned i = 0; i < PACK_DECODE_PARAMS; i++) {
        const rf_param_info info = param_info(pack_decode_params[i]);
        const bool choice = info.kind == RF_PARAM_KIND_CHOICE;
        char head[64], text[512];
        snprintf(head, sizeof(head), "  --%s %s", decode_flags[i],
                 choice ? "W" : "N");
        if (choice) {
            char choices[128];
            const char *word = NULL;
            const size_t n =
                word_at(info.choices, info.default_value - info.min, &word);
            list_choices(&info, choices, sizeof(choices));
            snprintf(text, sizeof(text), "%s (%s; default %.*s)", info.doc,
                     choices, (int)n, word ? word : "?");
        } else {
            snprintf(text, sizeof(text),
                     "%s; %" PRId64 "..%" PRId64 " (default %" PRId64 ")",
                     info.doc, info.min, info.max, info.default_value);
        }
        print_wrapped(head, text);
    }
}

static void print_usage(void)
{
    fputs("Usage: " PROGRAM " SOURCE OUT.pack [OPTION]...\n"
          "       " PROGRAM " --verify PATH [OPTION]...\n"
          "Writes a folder of class folders (as torchvision's ImageFolder "
          "reads it) or\n"
          "a packed file into one packed file, or checks one (or a "
          "folder).\n\n"
          "  --raw HxW         store decoded pixels (resize to 8/7, centre "
          "crop HxW,\n"
          "                    3 channels) as zstd frames, not the JPEG "
          "bytes; a SOURCE\n"
          "                    pack of such frames takes only its own HxW "
          "and layout\n"
          "  --layout L        with --raw: nhwc (default) or nchw\n"
          "  --level L         with --raw: zstd level 1..22 (default 3)\n"
          "  --dict-size N     with --raw: train a zstd dictionary of N "
          "bytes on a\n"
          "                    sample of the images (default 0: none)\n"
          "  --full-scale      with --raw: decode every JPEG in full, never "
          "at a smaller\n"
          "                    DCT scale: PIL's pixels, slower. A loader's "
          "setting cannot\n"
          "                    change a raw pack's pixels\n"
          "  --skip-bad        leave out samples that cannot be read or "
          "decoded (JPEGs\n"
          "                    are decoded whole first, as --verify does), "
          "and list them;\n"
          "                    without it a sample that cannot be read "
          "(with --raw:\n"
          "                    or decoded) stops the run, and JPEG bytes "
          "go in as they are.\n"
          "                    A pack with no sample, or with a class left "
          "without one, is\n"
          "                    refused (as torchvision refuses empty "
          "classes)\n"
          "  --verify PATH     decode every sample of a packed file or "
          "folder, every\n"
          "                    row of it (a training crop reads only "
          "some), and list\n"
          "                    the bad ones; takes none of the options "
          "above\n",
          stdout);
    print_decode_help();
    fputs("  --jobs N          read, decode and compress in N worker "
          "processes, 1..1024\n"
          "                    (default: one per CPU this process may run "
          "on; 1: in this\n"
          "                    process); the pack and what is listed are "
          "the same for\n"
          "                    any N\n"
          "  --progress        show the progress line even when stderr is "
          "not a terminal\n"
          "  --quiet           no progress line\n"
          "  --help            show this help and exit\n\n"
          "Exit status: 0 success, 1 failure or bad samples found, 2 bad "
          "usage.\n",
          stdout);
}

/* One side of --raw HxW: all digits, within 1..MAX_SIDE; 0 when not. */
static uint32_t parse_side(const char *text, size_t length)
{
    uint32_t side = 0;
    if (length == 0 || length > 6)
        return 0;
    for (size_t i = 0; i < length; i++) {
        if (text[i] < '0' || text[i] > '9')
            return 0;
        side = side * 10 + (uint32_t)(text[i] - '0');
    }
    return side <= MAX_SIDE ? side : 0;
}

/* "HxW", e.g. 224x224; the message quotes the whole value, whichever
 * side is wrong. */
static void parse_shape(const char *text, struct pack_options *o)
{
    const char *x = strchr(text, 'x');
    if (x) {
        o->height = parse_side(text, (size_t)(x - text));
        o->width = parse_side(x + 1, strlen(x + 1));
    }
    if (!x || o->height == 0 || o->width == 0)
        cli_die_usage(PROGRAM,
                      "--raw wants HEIGHTxWIDTH, each side 1..%d, e.g. "
                      "224x224, not '%s'",
                      MAX_SIDE, text);
}

/* clang-format cannot see that the macros expand to whole rows. */
/* clang-format off */
static const struct option long_options[] = {
    {"raw", required_argument, NULL, 'r'},
    {"layout", required_argument, NULL, 'l'},
    {"level", required_argument, NULL, 'L'},
    {"dict-size", required_argument, NULL, 'd'},
    {"full-scale", no_argument, NULL, 'F'},
    {"skip-bad", no_argument, NULL, 's'},
    {"verify", required_argument, NULL, 'v'},
#define DECODE_LONG_(id, flag, param)                                          \
    {flag, required_argument, NULL, OPT_DECODE + DECODE_##id},
    DECODE_OPTIONS(DECODE_LONG_)
#undef DECODE_LONG_
    {"jobs", required_argument, NULL, 'j'},
    {"progress", no_argument, NULL, 'p'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};
/* clang-format on */

/* Remembers which options were given, by name (see pack_options). */
static void note_option(struct pack_options *o, int code)
{
    const char *name = code == 'r'   ? "--raw"
                       : code == 'l' ? "--layout"
                       : code == 'L' ? "--level"
                       : code == 'd' ? "--dict-size"
                       : code == 'F' ? "--full-scale"
                       : code == 's' ? "--skip-bad"
                                     : NULL;
    if (name && !o->packing_option)
        o->packing_option = name;
    if (name && code != 'r' && code != 's' && !o->raw_option)
        o->raw_option = name;
}

/* --max-pixels N and the like: within the parameter's range, or one of
 * its choices, as the library's table gives them. */
static void parse_decode_option(struct pack_options *o, unsigned i,
                                const char *arg)
{
    const rf_param_info info = param_info(pack_decode_params[i]);
    if (!o->decode_option)
        o->decode_option = decode_dashed[i];
    if (info.kind != RF_PARAM_KIND_CHOICE) {
        o->decode[i] =
            cli_parse_int(PROGRAM, decode_flags[i], arg, info.min, info.max);
        return;
    }
    const char *word = NULL;
    for (int64_t v = info.min; v <= info.max; v++) {
        const size_t n = word_at(info.choices, v - info.min, &word);
        if (n > 0 && strlen(arg) == n && strncmp(word, arg, n) == 0) {
            o->decode[i] = v;
            return;
        }
    }
    char choices[128];
    list_choices(&info, choices, sizeof(choices));
    cli_die_usage(PROGRAM, "%s wants %s, not '%s'", decode_dashed[i], choices,
                  arg);
}

static void apply_option(struct pack_options *o, int code, const char *arg)
{
    note_option(o, code);
    switch (code) {
    case 'r':
        parse_shape(arg, o);
        break;
    case 'l':
        if (strcmp(arg, "nhwc") != 0 && strcmp(arg, "nchw") != 0)
            cli_die_usage(PROGRAM, "--layout wants nhwc or nchw, not '%s'",
                          arg);
        o->layout = arg[1] == 'c' ? RF_LAYOUT_NCHW : RF_LAYOUT_NHWC;
        break;
    case 'L':
        o->level = (int)cli_parse_uint(PROGRAM, "level", arg, 1, 22);
        break;
    case 'd':
        o->dict_size = cli_parse_uint(PROGRAM, "dict-size", arg, 0, MAX_DICT);
        break;
    case 's':
        o->skip_bad = true;
        break;
    case 'F':
        o->full_scale = true;
        break;
    case 'v':
        o->verify = arg;
        break;
    case 'j':
        o->jobs = (unsigned)cli_parse_uint(PROGRAM, "jobs", arg, 1, MAX_JOBS);
        break;
    case 'p':
    case 'q':
        o->progress = code == 'p' ? 1 : -1;
        break;
    case 'h':
        print_usage();
        exit(cli_finish_output(PROGRAM, EXIT_SUCCESS));
    default:
        parse_decode_option(o, (unsigned)(code - OPT_DECODE), arg);
        break;
    }
}

static void check_combination(const struct pack_options *o, int positional)
{
    if (o->verify && positional != 0)
        cli_die_usage(PROGRAM,
                      "--verify takes the file to check, and nothing else");
    if (!o->verify && positional != 2)
        cli_die_usage(PROGRAM,
                      "give the SOURCE folder (or file) and the OUT.pack to "
                      "write");
    if (o->verify && o->packing_option)
        cli_die_usage(PROGRAM,
                      "--verify checks a file as it is, and %s only changes "
                      "how a pack is written: drop %s",
                      o->packing_option, o->packing_option);
    if (o->height == 0 && o->raw_option)
        cli_die_usage(PROGRAM,
                      "%s applies to --raw samples only, and has no effect "
                      "on JPEG bytes: drop %s, or add --raw HxW",
                      o->raw_option, o->raw_option);
    if (!o->verify && o->height == 0 && !o->skip_bad && o->decode_option)
        cli_die_usage(PROGRAM,
                      "%s applies where samples are decoded (--raw, "
                      "--skip-bad or --verify), and without them JPEG bytes "
                      "go in as they are: drop %s, or add --skip-bad",
                      o->decode_option, o->decode_option);
    if (o->dict_size && o->dict_size < 256)
        cli_die_usage(PROGRAM,
                      "--dict-size of %" PRIu64 " bytes is too small to train; "
                      "use 0 for none, or e.g. 112640",
                      o->dict_size);
}

static void parse_options(int argc, char **argv, struct pack_options *o)
{
    int code;
    *o = (struct pack_options){
        .layout = RF_LAYOUT_NHWC, .level = 3, .jobs = cli_cpus_available()};
    for (unsigned i = 0; i < PACK_DECODE_PARAMS; i++)
        o->decode[i] = param_info(pack_decode_params[i]).default_value;
    while ((code = cli_next_option(PROGRAM, argc, argv, long_options)) != -1)
        apply_option(o, code, optarg);
    check_combination(o, argc - optind);
    if (!o->verify) {
        o->source = argv[optind];
        o->output = argv[optind + 1];
    }
    /* Not standard output: the pack is written to a file of its own,
     * whose header goes in last and which gets its name when whole. */
    if (o->output && strcmp(o->output, "-") == 0)
        cli_die_usage(PROGRAM,
                      "a pack cannot go to standard output ('-'): it is "
                      "written into a file and named when it is whole; give "
                      "a file name (./- for a file named -)");
}

/* ---- messages in the tool's terms ------------------------------------- */

/* Where name ends in text, as the sample's description shows it ("sample
 * 3 (train/a/x.jpg): ..."); 0 when it is not there (none given, or
 * elided in a long description). */
static size_t end_of_name(const char *text, const char *name)
{
    if (!name || !*name)
        return 0;
    const char *at = strstr(text, name);
    return at ? (size_t)(at - text) + strlen(name) : 0;
}

const char *pack_user_terms(const char *text, const char *name, char *out,
                            size_t len)
{
    const size_t kept = end_of_name(text, name);
    if (len == 0)
        return out;
    snprintf(out, len, "%.*s", (int)kept, text);
    const size_t used = strlen(out);
    cli_user_terms(text + kept, long_options, NULL, out + used, len - used);
    return out;
}

void pack_die(const char *message, const char *fallback)
{
    char text[2048];
    cli_die(PROGRAM, "%s",
            pack_user_terms(message    ? message
                            : fallback ? fallback
                                       : "no detail",
                            NULL, text, sizeof(text)));
}

int main(int argc, char **argv)
{
    struct pack_options o;
    /* A pack larger than ulimit -f then fails its write with EFBIG, which
     * the writer explains, instead of killing the tool without a word. */
    signal(SIGXFSZ, SIG_IGN);
    parse_options(argc, argv, &o);
    if (o.verify)
        return cli_finish_output(PROGRAM, pack_verify(&o));
    const int status = pack_build(&o);
    /* The pack is in place when pack_build() returns: a summary that
     * could not be written (stdout sent to a full disk) loses the
     * summary alone, which the user must learn before packing again. */
    char done[4096 + 64];
    snprintf(done, sizeof(done),
             "only the summary was lost: the pack %s was written whole",
             o.output);
    return cli_finish_output_noting(PROGRAM, status, status == 0 ? done : NULL);
}
