/*
 * ringfeed-pack - writes a folder of class folders (or another packed
 * file) into one ringfeed packed file, and checks packed files.
 *
 *     ringfeed-pack train/ train.pack               JPEG bytes as they are
 *     ringfeed-pack train/ train-160.pack --raw 160x160 --dict-size 112640
 *     ringfeed-pack --verify train.pack
 *
 * With --raw, each image is decoded, resized (short side to 8/7 of the
 * size) and centre-cropped, as a loader's eval transform does, and the
 * pixels are stored as zstd frames, optionally with a dictionary trained
 * on a sample of them: a loader then only decompresses. The format is
 * described in docs/packed-format.md. Uses the public API, libzstd and
 * libc only. Exit status: 0 success, 1 failure (or bad samples found by
 * --verify), 2 bad usage.
 */
#include <ringfeed.h>

#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zdict.h>
#include <zstd.h>

#include "cli.h"

#define PROGRAM "ringfeed-pack"

enum { EXIT_FAILED = CLI_EXIT_FAILED };

#define PROGRESS_BAR 30 /* characters of the bar */
#define VERIFY_SIZE 224 /* --verify decodes JPEG samples at this */
#define MAX_SIDE 65536
#define MAX_DICT (UINT64_C(1) << 24)
/* Dictionary training reads about this many times the dictionary's size
 * of samples (zstd's advice), within these bounds. */
#define DICT_TRAINING_FACTOR 100
#define DICT_MIN_SAMPLES 16
#define DICT_MAX_SAMPLES 4096
#define DICT_MAX_TRAINING_BYTES (UINT64_C(1) << 30)
/* Bad samples listed one by one; the count covers the rest. */
#define MAX_BAD_LISTED 100

struct pack_options {
    const char *source, *output, *verify;
    uint32_t height, width; /* --raw; 0 = keep the JPEG bytes */
    rf_layout layout;
    int level;
    uint64_t dict_size;
    bool skip_bad;
    int progress; /* -1 quiet, 0 when stderr is a terminal, 1 always */
    /* The first option given that changes how a pack is written, and the
     * first that only --raw samples use, for refusing them where they
     * would have no effect; NULL when none was given. */
    const char *packing_option, *raw_option;
};

/* ---- usage ------------------------------------------------------------- */

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
          "above\n"
          "  --progress        show the progress line even when stderr is "
          "not a terminal\n"
          "  --quiet           no progress line\n"
          "  --help            show this help and exit\n\n"
          "Exit status: 0 success, 1 failure or bad samples found, 2 bad "
          "usage.\n",
          stdout);
}

/* "HxW", e.g. 224x224. */
static void parse_shape(const char *text, struct pack_options *o)
{
    char height[32];
    const char *x = strchr(text, 'x');
    if (!x || (size_t)(x - text) >= sizeof(height))
        cli_die_usage(PROGRAM,
                      "--raw wants HEIGHTxWIDTH, e.g. 224x224, not '%s'", text);
    memcpy(height, text, (size_t)(x - text));
    height[x - text] = '\0';
    o->height = (uint32_t)cli_parse_uint(PROGRAM, "raw", height, 1, MAX_SIDE);
    o->width = (uint32_t)cli_parse_uint(PROGRAM, "raw", x + 1, 1, MAX_SIDE);
}

static const struct option long_options[] = {
    {"raw", required_argument, NULL, 'r'},
    {"layout", required_argument, NULL, 'l'},
    {"level", required_argument, NULL, 'L'},
    {"dict-size", required_argument, NULL, 'd'},
    {"skip-bad", no_argument, NULL, 's'},
    {"verify", required_argument, NULL, 'v'},
    {"progress", no_argument, NULL, 'p'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Remembers which options were given, by name (see pack_options). */
static void note_option(struct pack_options *o, int code)
{
    const char *name = code == 'r'   ? "--raw"
                       : code == 'l' ? "--layout"
                       : code == 'L' ? "--level"
                       : code == 'd' ? "--dict-size"
                       : code == 's' ? "--skip-bad"
                                     : NULL;
    if (name && !o->packing_option)
        o->packing_option = name;
    if (name && code != 'r' && code != 's' && !o->raw_option)
        o->raw_option = name;
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
    case 'v':
        o->verify = arg;
        break;
    case 'p':
    case 'q':
        o->progress = code == 'p' ? 1 : -1;
        break;
    default:
        print_usage();
        exit(EXIT_SUCCESS);
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
    if (o->dict_size && o->dict_size < 256)
        cli_die_usage(PROGRAM,
                      "--dict-size of %" PRIu64 " bytes is too small to train; "
                      "use 0 for none, or e.g. 112640",
                      o->dict_size);
}

static void parse_options(int argc, char **argv, struct pack_options *o)
{
    int code;
    *o = (struct pack_options){.layout = RF_LAYOUT_NHWC, .level = 3};
    while ((code = cli_next_option(PROGRAM, argc, argv, long_options)) != -1)
        apply_option(o, code, optarg);
    check_combination(o, argc - optind);
    if (!o->verify) {
        o->source = argv[optind];
        o->output = argv[optind + 1];
    }
}

/* ---- messages and progress ----------------------------------------------- */

struct progress {
    bool shown, on_terminal;
    bool on_screen; /* a line is drawn and not yet cleared */
    const char *what;
    uint64_t total;
    double start, drawn;
};

static void progress_start(struct progress *p, int wanted, const char *what,
                           uint64_t total)
{
    p->on_terminal = isatty(STDERR_FILENO);
    p->shown = cli_progress_shown(wanted);
    p->what = what;
    p->total = total;
    p->start = cli_now_s();
    p->drawn = 0;
    p->on_screen = false;
}

static void progress_show(struct progress *p, uint64_t done)
{
    const double now = cli_now_s();
    if (!p->shown ||
        (done < p->total && now - p->drawn < CLI_PROGRESS_INTERVAL_S))
        return;
    p->drawn = now;
    p->on_screen = true;
    char bar[PROGRESS_BAR + 1];
    const uint64_t filled = p->total ? done * PROGRESS_BAR / p->total : 0;
    for (uint64_t i = 0; i < PROGRESS_BAR; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[PROGRESS_BAR] = '\0';
    const double rate = cli_per_second((double)done, now - p->start);
    fprintf(stderr,
            "\r%s [%s] %3.0f%% %" PRIu64 "/%" PRIu64 ", %.0f/s, %.0f s "
            "left ",
            p->what, bar,
            p->total ? 100.0 * (double)done / (double)p->total : 100.0, done,
            p->total, rate, rate > 0 ? (double)(p->total - done) / rate : 0.0);
}

/* Takes the progress line away before other output, or ends it; once,
 * so that a log gets no empty lines. */
static void progress_clear(struct progress *p)
{
    if (p->shown && p->on_screen)
        cli_progress_clear(p->on_terminal);
    p->on_screen = false;
}

/* Samples that failed: listed (the first MAX_BAD_LISTED), and counted.
 * --verify lists them on stdout, as its result; packing with --skip-bad
 * on stderr, as warnings. */
struct bad_samples {
    FILE *out;
    const char *prefix;
    uint64_t count;
};

static void report_bad(struct bad_samples *b, struct progress *p,
                       const char *reason)
{
    if (b->count++ >= MAX_BAD_LISTED)
        return;
    progress_clear(p);
    cli_print_line(b->out, "%s%s", b->prefix, reason);
    fflush(b->out);
}

/* ---- decoding ------------------------------------------------------------ */

/* A configuration for rf_dataset_decode(): the shape and the transform. */
static rf_config *decode_config(uint32_t height, uint32_t width,
                                uint32_t channels, rf_layout layout,
                                rf_transform transform)
{
    rf_config *cfg = rf_config_create();
    if (!cfg)
        cli_die(PROGRAM, "out of memory");
    const int64_t settings[][2] = {
        {RF_PARAM_HEIGHT, height},       {RF_PARAM_WIDTH, width},
        {RF_PARAM_CHANNELS, channels},   {RF_PARAM_LAYOUT, layout},
        {RF_PARAM_TRANSFORM, transform},
    };
    for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
        if (rf_config_set(cfg, (rf_param)settings[i][0], settings[i][1]) < 0)
            cli_die(PROGRAM, "%s", rf_config_error(cfg));
    return cfg;
}

struct pack_shape {
    uint32_t height, width, channels;
    rf_layout layout;
};

static uint32_t le32_at(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

/* The zstd sample shape, from the header (docs/packed-format.md): the
 * public API has no call for it, and the decoder wants it configured.
 * All zero for a folder, or a pack of JPEG samples. */
static struct pack_shape read_pack_shape(const char *path)
{
    unsigned char header[128];
    struct pack_shape shape = {0, 0, 0, RF_LAYOUT_NHWC};
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    const ssize_t got = fd < 0 ? -1 : pread(fd, header, sizeof(header), 0);
    if (fd >= 0)
        close(fd);
    if (got != (ssize_t)sizeof(header) || memcmp(header, "RFPACK01", 8) != 0)
        return shape; /* a folder: rf_dataset_open() has checked the rest */
    shape.height = le32_at(header + 36);
    shape.width = le32_at(header + 40);
    shape.channels = le32_at(header + 44);
    shape.layout = le32_at(header + 48) ? RF_LAYOUT_NCHW : RF_LAYOUT_NHWC;
    return shape;
}

/* Decodes samples whole, to find those that cannot be decoded: with
 * transform none, which reads every row of a JPEG (a training crop reads
 * only the rows down to its bottom, so damage below it can go unseen for
 * epochs). At the pack's shape when it has one (the decoder must be
 * configured for it), else at VERIFY_SIZE x VERIFY_SIZE. */
struct whole_decoder {
    rf_config *cfg;
    unsigned char *pixels;
};

static void whole_decoder_init(struct whole_decoder *d, const char *path)
{
    const struct pack_shape s = read_pack_shape(path);
    const bool raw = s.height != 0;
    const uint32_t h = raw ? s.height : VERIFY_SIZE;
    const uint32_t w = raw ? s.width : VERIFY_SIZE;
    const uint32_t c = raw ? s.channels : 3;
    d->cfg = decode_config(h, w, c, s.layout, RF_TRANSFORM_NONE);
    d->pixels = malloc((size_t)h * w * c);
    if (!d->pixels)
        cli_die(PROGRAM, "out of memory");
}

static void whole_decoder_free(struct whole_decoder *d)
{
    rf_config_free(d->cfg);
    free(d->pixels);
}

/* Whether sample i decodes; rf_dataset_error() says why not. */
static bool decodes_whole(struct whole_decoder *d, rf_dataset *ds, uint64_t i)
{
    return rf_dataset_decode(ds, d->cfg, 0, i, d->pixels) == 0;
}

/* ---- packing ---------------------------------------------------------------
 */

/* The writer of the pack being written, until it is finished. Every way
 * out of the program before that (cli_die() in any helper, a failed add)
 * abandons it, so that no partial file is left behind; where the file
 * system has no O_TMPFILE the writer's file has a name, and this is what
 * removes it. */
static rf_pack_writer *unfinished_pack;

static void abandon_unfinished_pack(void)
{
    rf_pack_writer_abort(unfinished_pack);
    unfinished_pack = NULL;
}

struct packer {
    const struct pack_options *o;
    rf_dataset *ds;
    rf_pack_writer *w;
    rf_config *cfg; /* --raw: how samples are decoded */
    unsigned char *pixels;
    size_t pixel_bytes;
    void *frame;
    size_t frame_capacity;
    ZSTD_CCtx *cctx;
    ZSTD_CDict *cdict;
    void *dict;
    size_t dict_size;
    struct pack_shape source_shape; /* all zero: no raw samples */
    struct whole_decoder whole;     /* --skip-bad without --raw */
    uint32_t classes;               /* the source's */
    uint64_t *packed_per_class;     /* indexed by label */
    uint64_t packed, not_jpeg, bytes;
    struct bad_samples bad;
    struct progress progress;
    char name[4200]; /* the sample's name, kept across calls on ds */
};

static rf_dataset *open_dataset(const char *path)
{
    rf_dataset *ds = NULL;
    char *why = NULL;
    const int rc = rf_dataset_open(&ds, path, &why);
    if (rc < 0)
        cli_die(PROGRAM, "%s", why ? why : rf_strerror(rc));
    return ds;
}

/* Decodes sample i into pk->pixels; returns 0 or the failure, with its
 * label and name in *info (the name copied to pk->name). */
static int decode_sample(struct packer *pk, uint64_t i, rf_sample_info *info)
{
    int rc = rf_dataset_read(pk->ds, i, info);
    if (rc == 0) {
        snprintf(pk->name, sizeof(pk->name), "%s", info->name);
        info->name = pk->name;
        rc = rf_dataset_decode(pk->ds, pk->cfg, 0, i, pk->pixels);
    }
    return rc;
}

/* A frame of the pixels, with the dictionary when there is one. */
static size_t compress_pixels(struct packer *pk)
{
    const size_t size =
        pk->cdict
            ? ZSTD_compress_usingCDict(pk->cctx, pk->frame, pk->frame_capacity,
                                       pk->pixels, pk->pixel_bytes, pk->cdict)
            : ZSTD_compressCCtx(pk->cctx, pk->frame, pk->frame_capacity,
                                pk->pixels, pk->pixel_bytes, pk->o->level);
    if (ZSTD_isError(size))
        cli_die(PROGRAM, "zstd: %s", ZSTD_getErrorName(size));
    return size;
}

static void add_sample(struct packer *pk, rf_sample_kind kind, const void *data,
                       size_t size, const rf_sample_info *info)
{
    if (rf_pack_writer_add(pk->w, kind, data, size, info->label, info->name) <
        0) {
        progress_clear(&pk->progress);
        cli_die(PROGRAM, "%s", rf_pack_writer_error(pk->w));
    }
    pk->packed++;
    pk->bytes += size;
    if (info->label >= 0 && info->label < pk->classes)
        pk->packed_per_class[info->label]++;
}

/* A sample that cannot be packed: left out with --skip-bad, else the
 * end of the run. */
static void sample_failed(struct packer *pk)
{
    report_bad(&pk->bad, &pk->progress, rf_dataset_error(pk->ds));
    if (pk->o->skip_bad)
        return;
    cli_die(PROGRAM, "stopped at that sample; fix or remove the file, or "
                     "pass --skip-bad to leave such samples out");
}

static void pack_raw(struct packer *pk, uint64_t i)
{
    rf_sample_info info;
    if (decode_sample(pk, i, &info) < 0) {
        sample_failed(pk);
        return;
    }
    add_sample(pk, RF_SAMPLE_ZSTD, pk->frame, compress_pixels(pk), &info);
}

/* The pixels of a pack's raw samples can be compressed again, but not
 * resized or converted: say which --raw gives their shape, since the
 * decoder's own message would speak of a loader's RF_PARAM_HEIGHT, and
 * --skip-bad would leave every sample out. */
static void raw_source_refused(const struct packer *pk, const char *why)
{
    const struct pack_shape *s = &pk->source_shape;
    const char *layout = s->layout == RF_LAYOUT_NCHW ? "nchw" : "nhwc";
    if (s->channels != 3)
        cli_die(PROGRAM,
                "%s holds raw samples of %ux%ux%u %s, and --raw stores 3 "
                "channels (%s); pack again from the JPEG folder they were "
                "made from",
                pk->o->source, s->height, s->width, s->channels, layout, why);
    cli_die(PROGRAM,
            "%s holds raw samples of %ux%ux3 %s (%s); to compress them "
            "again pass --raw %ux%u --layout %s (their shape), or pack again "
            "from the JPEG folder they were made from",
            pk->o->source, s->height, s->width, layout, why, s->height,
            s->width, layout);
}

/* With --raw, a source of raw samples must have the shape that --raw
 * asks for: checked before any sample is decoded or a dictionary
 * trained. */
static void check_source_shape(const struct packer *pk)
{
    const struct pack_options *o = pk->o;
    const struct pack_shape *s = &pk->source_shape;
    if (s->height == 0 || (s->height == o->height && s->width == o->width &&
                           s->channels == 3 && s->layout == o->layout))
        return;
    raw_source_refused(
        pk, "ringfeed-pack cannot resize them or change their layout");
}

/* Without --skip-bad, JPEG bytes go in as they are, even when they are
 * not a JPEG: the sample then fails when decoded, as it would from the
 * folder. Say so. */
static void warn_if_not_jpeg(struct packer *pk, uint64_t i,
                             const rf_sample_info *info)
{
    const unsigned char *b = info->data;
    if (info->size >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff)
        return;
    if (pk->not_jpeg++ < MAX_BAD_LISTED) {
        progress_clear(&pk->progress);
        cli_print_line(stderr,
                       PROGRAM ": warning: sample %" PRIu64 " (%s) is not a "
                               "JPEG file; packed as is, it will fail to "
                               "decode",
                       i, info->name);
    }
}

/* --skip-bad promises to leave out samples that cannot be decoded, so
 * each one is decoded whole first, as --verify does. The decode reads the
 * sample again into the dataset's buffer, so its bytes are read once
 * more to be added. */
static bool read_decodable(struct packer *pk, uint64_t i, rf_sample_info *info)
{
    return decodes_whole(&pk->whole, pk->ds, i) &&
           rf_dataset_read(pk->ds, i, info) == 0;
}

static void pack_jpeg(struct packer *pk, uint64_t i)
{
    rf_sample_info info;
    if (rf_dataset_read(pk->ds, i, &info) < 0) {
        sample_failed(pk);
        return;
    }
    if (info.kind != RF_SAMPLE_JPEG)
        raw_source_refused(pk,
                           "without --raw only JPEG samples go in as they are");
    if (!pk->o->skip_bad) {
        warn_if_not_jpeg(pk, i, &info);
    } else if (!read_decodable(pk, i, &info)) {
        sample_failed(pk);
        return;
    }
    add_sample(pk, info.kind, info.data, info.size, &info);
}

/* ---- every class keeps a sample ------------------------------------------ */

static void count_classes(struct packer *pk)
{
    pk->classes = rf_dataset_classes(pk->ds);
    pk->packed_per_class =
        calloc(pk->classes ? pk->classes : 1, sizeof(*pk->packed_per_class));
    if (!pk->packed_per_class)
        cli_die(PROGRAM, "out of memory for counting %u classes", pk->classes);
}

/* "'n01440764' (label 0)", or "label 3" for a source that names none
 * (a packed file without names). The name comes from the index, so an
 * emptied class is named though none of its samples could be read. */
static void describe_class(const struct packer *pk, uint32_t label, char *out,
                           size_t len)
{
    char folder[1024];
    if (rf_dataset_class_name(pk->ds, label, folder, sizeof(folder)) == 0)
        snprintf(out, len, "'%s' (label %u)", folder, label);
    else
        snprintf(out, len, "label %u", label);
}

/* The classes left without a sample, the first few described in out;
 * returns how many there are. */
static uint32_t describe_empty_classes(const struct packer *pk, char *out,
                                       size_t len)
{
    uint32_t empty = 0;
    size_t used = 0;
    out[0] = '\0';
    for (uint32_t c = 0; c < pk->classes; c++) {
        if (pk->packed_per_class[c] > 0 || empty++ >= 5)
            continue;
        char one[1100];
        describe_class(pk, c, one, sizeof(one));
        used += (size_t)snprintf(out + used, used < len ? len - used : 0,
                                 "%s%s", empty > 1 ? ", " : "", one);
    }
    if (empty > 5 && used < len)
        snprintf(out + used, len - used, " and %u more", empty - 5);
    return empty;
}

/* A pack with no sample feeds nothing, and a class left without one
 * either shrinks the pack's class count (classes are the largest label
 * + 1, so when it is the last one) and a model sized from the pack gets
 * the wrong number of outputs, or leaves a class the model never sees.
 * torchvision's ImageFolder refuses empty classes; so does this, before
 * the pack is given its name. */
static void check_every_class_packed(const struct packer *pk)
{
    if (pk->packed == 0)
        cli_die(PROGRAM,
                "no sample of %s can be packed: all %" PRIu64 " were left "
                "out (listed above); fix or remove those files. No pack was "
                "written",
                pk->o->source, rf_dataset_size(pk->ds));
    char classes[8192];
    const uint32_t empty = describe_empty_classes(pk, classes, sizeof(classes));
    if (empty > 0)
        cli_die(PROGRAM,
                "%s would have no sample of %s %s (left out, listed above, or "
                "missing from the source), so a model sized from it would "
                "not match its classes; fix or remove those files, or "
                "remove %s from %s. No pack was written",
                pk->o->output, empty > 1 ? "classes" : "class", classes,
                empty > 1 ? "those classes" : "that class", pk->o->source);
}

/* Classes in the pack: its largest label + 1, as its header will say. */
static uint32_t packed_classes(const struct packer *pk)
{
    uint32_t classes = pk->classes;
    while (classes > 0 && pk->packed_per_class[classes - 1] == 0)
        classes--;
    return classes;
}

/* ---- the zstd dictionary
 * ----------------------------------------------------- */

/* How many samples train the dictionary: about DICT_TRAINING_FACTOR times
 * its size in pixels, within bounds. */
static uint64_t training_samples(const struct packer *pk, uint64_t samples)
{
    uint64_t k =
        (pk->o->dict_size * DICT_TRAINING_FACTOR + pk->pixel_bytes - 1) /
        pk->pixel_bytes;
    if (k < DICT_MIN_SAMPLES)
        k = DICT_MIN_SAMPLES;
    if (k > DICT_MAX_SAMPLES)
        k = DICT_MAX_SAMPLES;
    if (k * pk->pixel_bytes > DICT_MAX_TRAINING_BYTES)
        k = DICT_MAX_TRAINING_BYTES / pk->pixel_bytes;
    return k < samples ? k : samples;
}

/* Decodes samples spread over the whole dataset (its first ones would all
 * be of one class) into one block, as ZDICT wants them. Samples that fail
 * are left out here; packing reports them. */
static size_t collect_training(struct packer *pk, uint64_t k,
                               unsigned char *block, size_t *sizes)
{
    const uint64_t samples = rf_dataset_size(pk->ds);
    size_t count = 0;
    progress_start(&pk->progress, pk->o->progress, "training", k);
    for (uint64_t j = 0; j < k; j++) {
        rf_sample_info info;
        if (decode_sample(pk, j * samples / k, &info) == 0) {
            memcpy(block + count * pk->pixel_bytes, pk->pixels,
                   pk->pixel_bytes);
            sizes[count++] = pk->pixel_bytes;
        }
        progress_show(&pk->progress, j + 1);
    }
    progress_clear(&pk->progress);
    return count;
}

static void train_dictionary(struct packer *pk)
{
    const uint64_t k = training_samples(pk, rf_dataset_size(pk->ds));
    unsigned char *block = malloc(k * pk->pixel_bytes);
    size_t *sizes = malloc(k * sizeof(*sizes));
    pk->dict = malloc(pk->o->dict_size);
    if (!block || !sizes || !pk->dict)
        cli_die(PROGRAM,
                "out of memory for training a dictionary on %" PRIu64
                " samples; use a smaller --dict-size",
                k);
    const size_t count = collect_training(pk, k, block, sizes);
    const size_t size = ZDICT_trainFromBuffer(pk->dict, pk->o->dict_size, block,
                                              sizes, (unsigned)count);
    if (ZDICT_isError(size))
        cli_die(PROGRAM,
                "cannot train a %" PRIu64 "-byte dictionary on %zu samples "
                "(%s): too few or too alike; use a smaller --dict-size, or "
                "none",
                pk->o->dict_size, count, ZDICT_getErrorName(size));
    pk->dict_size = size;
    free(block);
    free(sizes);
}

/* ---- the packing run
 * --------------------------------------------------------- */

static void setup_raw(struct packer *pk)
{
    const struct pack_options *o = pk->o;
    pk->cfg =
        decode_config(o->height, o->width, 3, o->layout, RF_TRANSFORM_EVAL);
    pk->pixel_bytes = (size_t)o->height * o->width * 3;
    pk->frame_capacity = ZSTD_compressBound(pk->pixel_bytes);
    pk->pixels = malloc(pk->pixel_bytes);
    pk->frame = malloc(pk->frame_capacity);
    pk->cctx = ZSTD_createCCtx();
    if (!pk->pixels || !pk->frame || !pk->cctx)
        cli_die(PROGRAM, "out of memory");
    if (o->dict_size == 0)
        return;
    train_dictionary(pk);
    pk->cdict = ZSTD_createCDict(pk->dict, pk->dict_size, o->level);
    if (!pk->cdict)
        cli_die(PROGRAM, "zstd cannot use the dictionary it trained");
}

/* Created before anything else is done: the writer makes its file in the
 * output's folder at once, so that an output that cannot be written (a
 * folder, a missing or read-only folder) fails now, not after the
 * samples were decoded or a dictionary trained. */
static void start_writer(struct packer *pk)
{
    const struct pack_options *o = pk->o;
    const uint32_t channels = o->height ? 3 : 0;
    char *why = NULL;
    if (rf_pack_writer_create(&pk->w, o->output, o->height, o->width, channels,
                              o->layout, NULL, 0, &why) < 0)
        cli_die(PROGRAM, "%s", why ? why : "cannot create the packed file");
    unfinished_pack = pk->w;
    atexit(abandon_unfinished_pack);
}

static void store_dictionary(struct packer *pk)
{
    if (pk->dict_size > 0 &&
        rf_pack_writer_set_dictionary(pk->w, pk->dict, pk->dict_size) < 0)
        cli_die(PROGRAM, "%s", rf_pack_writer_error(pk->w));
}

static void finish_writer(struct packer *pk)
{
    char *why = NULL;
    unfinished_pack = NULL; /* finish frees it, whatever happens */
    if (rf_pack_writer_finish(pk->w, &why) < 0)
        cli_die(PROGRAM, "%s", why ? why : "cannot finish the packed file");
    pk->w = NULL;
}

/* One line: what was packed, how large, how fast, and what was left
 * out. Written to a string first, so that the paths in it are escaped as
 * any message is. */
static void write_pack_summary(FILE *out, const struct packer *pk,
                               double seconds)
{
    const struct pack_options *o = pk->o;
    fprintf(out,
            "packed %" PRIu64 " samples in %u classes from %s into %s: %.1f "
            "MB, %.1f KB each",
            pk->packed, packed_classes(pk), o->source, o->output,
            (double)pk->bytes / 1e6,
            pk->packed ? (double)pk->bytes / 1024.0 / (double)pk->packed : 0.0);
    if (o->height)
        fprintf(
            out, " (%.0f%% of the %ux%ux3 pixels, zstd level %d%s)",
            100.0 * (double)pk->bytes /
                ((double)pk->pixel_bytes * (double)(pk->packed + !pk->packed)),
            o->height, o->width, o->level,
            pk->dict_size ? " with a dictionary" : "");
    fprintf(out, ", in %.1f s (%.0f samples/s)", seconds,
            cli_per_second((double)pk->packed, seconds));
    if (pk->bad.count)
        fprintf(out, "; %" PRIu64 " bad samples left out", pk->bad.count);
}

static void print_pack_summary(const struct packer *pk, double seconds)
{
    char *line = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&line, &size);
    if (!out)
        cli_die(PROGRAM, "out of memory");
    write_pack_summary(out, pk, seconds);
    if (fclose(out) != 0)
        cli_die(PROGRAM, "out of memory");
    cli_print_line(stdout, "%s", line);
    free(line);
}

static void free_packer(struct packer *pk)
{
    rf_dataset_close(pk->ds);
    whole_decoder_free(&pk->whole);
    free(pk->packed_per_class);
    rf_config_free(pk->cfg);
    ZSTD_freeCDict(pk->cdict);
    ZSTD_freeCCtx(pk->cctx);
    free(pk->pixels);
    free(pk->frame);
    free(pk->dict);
}

static int pack(const struct pack_options *o)
{
    struct packer pk = {.o = o};
    pk.bad = (struct bad_samples){stderr,
                                  o->skip_bad ? "skipped: " : PROGRAM ": ", 0};
    const double start = cli_now_s();
    start_writer(&pk);
    pk.ds = open_dataset(o->source);
    count_classes(&pk);
    pk.source_shape = read_pack_shape(o->source);
    if (o->height) {
        check_source_shape(&pk);
        setup_raw(&pk);
    } else if (o->skip_bad) {
        whole_decoder_init(&pk.whole, o->source);
    }
    store_dictionary(&pk);
    const uint64_t samples = rf_dataset_size(pk.ds);
    progress_start(&pk.progress, o->progress, "packing", samples);
    for (uint64_t i = 0; i < samples; i++) {
        if (o->height)
            pack_raw(&pk, i);
        else
            pack_jpeg(&pk, i);
        progress_show(&pk.progress, i + 1);
    }
    progress_clear(&pk.progress);
    check_every_class_packed(&pk);
    finish_writer(&pk);
    print_pack_summary(&pk, cli_now_s() - start);
    free_packer(&pk);
    return 0;
}

/* ---- --verify
 * ------------------------------------------------------------------ */

struct verifier {
    rf_dataset *ds;
    struct whole_decoder whole;
    struct bad_samples bad;
    struct progress progress;
};

static void make_verifier(struct verifier *v, const char *path)
{
    v->ds = open_dataset(path);
    whole_decoder_init(&v->whole, path);
    v->bad = (struct bad_samples){stdout, "bad: ", 0};
}

/* JPEG samples are decoded whole, so that damage anywhere in the file is
 * seen; zstd samples as they are. */
static void verify_sample(struct verifier *v, uint64_t i)
{
    if (!decodes_whole(&v->whole, v->ds, i))
        report_bad(&v->bad, &v->progress, rf_dataset_error(v->ds));
}

/* The last line of --verify: what was checked and what was found. An
 * empty pack fails too: a loader can read nothing from it. */
static bool print_verify_result(const struct verifier *v, const char *path,
                                double seconds)
{
    const uint64_t samples = rf_dataset_size(v->ds);
    if (samples == 0) {
        cli_print_line(stdout,
                       "%s: no samples: a loader can read nothing from it; "
                       "pack it again from a source that has samples",
                       path);
        return false;
    }
    if (v->bad.count > MAX_BAD_LISTED)
        printf("(only the first %d bad samples are listed)\n", MAX_BAD_LISTED);
    cli_print_line(stdout,
                   "%s: %" PRIu64 " samples in %u classes checked in %.1f s: "
                   "%s%" PRIu64 " bad",
                   path, samples, rf_dataset_classes(v->ds), seconds,
                   v->bad.count ? "" : "all good, ", v->bad.count);
    return v->bad.count == 0;
}

static int verify(const struct pack_options *o)
{
    struct verifier v;
    make_verifier(&v, o->verify);
    const uint64_t samples = rf_dataset_size(v.ds);
    const double start = cli_now_s();
    progress_start(&v.progress, o->progress, "verifying", samples);
    for (uint64_t i = 0; i < samples; i++) {
        verify_sample(&v, i);
        progress_show(&v.progress, i + 1);
    }
    progress_clear(&v.progress);
    const bool good = print_verify_result(&v, o->verify, cli_now_s() - start);
    rf_dataset_close(v.ds);
    whole_decoder_free(&v.whole);
    return good ? 0 : EXIT_FAILED;
}

int main(int argc, char **argv)
{
    struct pack_options o;
    parse_options(argc, argv, &o);
    return o.verify ? verify(&o) : pack(&o);
}
