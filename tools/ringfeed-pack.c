/*
 * ringfeed-pack - writes a folder of class folders (or another packed
 * file) into one ringfeed packed file, and checks packed files.
 *
 *     ringfeed-pack train/ train.pack               JPEG bytes as they are
 *     ringfeed-pack train/ train-160.pack --raw 160x160 --dict-size 112640
 *     ringfeed-pack train/ train-64.pack --raw 64x64 --full-scale
 *     ringfeed-pack --verify train.pack --jobs 8
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
 * both are the same whatever --jobs is. Uses the public API, libzstd and
 * libc only. Exit status: 0 success, 1 failure (or bad samples found by
 * --verify), 2 bad usage.
 */
#include <ringfeed.h>

#include <assert.h>
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
#include "work-pool.h"

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
#define MAX_JOBS 1024

struct pack_options {
    const char *source, *output, *verify;
    uint32_t height, width; /* --raw; 0 = keep the JPEG bytes */
    rf_layout layout;
    int level;
    uint64_t dict_size;
    bool skip_bad;
    bool full_scale; /* --raw: RF_PARAM_DCT_SCALING 0 */
    unsigned jobs;   /* worker processes; 1: none, the work is done here */
    int progress;    /* -1 quiet, 0 when stderr is a terminal, 1 always */
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
          "  --full-scale      with --raw: decode every JPEG in full, never "
          "at a smaller\n"
          "                    DCT scale (RF_PARAM_DCT_SCALING 0): PIL's "
          "pixels, slower.\n"
          "                    A loader's setting cannot change a raw "
          "pack's pixels\n"
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
          "  --jobs N          read, decode and compress in N worker "
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
    {"full-scale", no_argument, NULL, 'F'},
    {"skip-bad", no_argument, NULL, 's'},
    {"verify", required_argument, NULL, 'v'},
    {"jobs", required_argument, NULL, 'j'},
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
                       : code == 'F' ? "--full-scale"
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
    *o = (struct pack_options){
        .layout = RF_LAYOUT_NHWC, .level = 3, .jobs = cli_cpus_available()};
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

/* A configuration for rf_dataset_decode(): the shape, the transform and
 * whether JPEGs may be decoded at a smaller DCT scale. */
static rf_config *decode_config(uint32_t height, uint32_t width,
                                uint32_t channels, rf_layout layout,
                                rf_transform transform, bool dct_scaling)
{
    rf_config *cfg = rf_config_create();
    if (!cfg)
        cli_die(PROGRAM, "out of memory");
    const int64_t settings[][2] = {
        {RF_PARAM_HEIGHT, height},       {RF_PARAM_WIDTH, width},
        {RF_PARAM_CHANNELS, channels},   {RF_PARAM_LAYOUT, layout},
        {RF_PARAM_TRANSFORM, transform}, {RF_PARAM_DCT_SCALING, dct_scaling},
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
 * epochs). At the source's shape when it has one (the decoder must be
 * configured for it), else at VERIFY_SIZE x VERIFY_SIZE. */
struct whole_decoder {
    rf_config *cfg;
    unsigned char *pixels;
};

static void whole_decoder_init(struct whole_decoder *d,
                               const struct pack_shape *s)
{
    const bool raw = s->height != 0;
    const uint32_t h = raw ? s->height : VERIFY_SIZE;
    const uint32_t w = raw ? s->width : VERIFY_SIZE;
    const uint32_t c = raw ? s->channels : 3;
    d->cfg = decode_config(h, w, c, s->layout, RF_TRANSFORM_NONE, true);
    d->pixels = malloc((size_t)h * w * c);
    if (!d->pixels)
        cli_die(PROGRAM, "out of memory");
}

static void whole_decoder_free(struct whole_decoder *d)
{
    rf_config_free(d->cfg);
    free(d->pixels);
    *d = (struct whole_decoder){NULL, NULL};
}

/* ---- the work on each sample, done by the workers ------------------------ */

/* The writer of the pack being written, until it is finished. Every way
 * out of the program before that (cli_die() in any helper, a failed add)
 * abandons it, so that no partial file is left behind; where the file
 * system has no O_TMPFILE the writer's file has a name, and this is what
 * removes it. A worker forgets it: the file is its parent's. */
static rf_pack_writer *unfinished_pack;

static void abandon_unfinished_pack(void)
{
    rf_pack_writer_abort(unfinished_pack);
    unfinished_pack = NULL;
}

/* What is done to each sample. The results go back to the parent in
 * sample order, which writes or lists them: the pack and the list are
 * the same whatever --jobs is. */
enum sample_task {
    TASK_READ,           /* its bytes as they are */
    TASK_READ_DECODABLE, /* its bytes, if it is a JPEG that decodes whole
                            (--skip-bad without --raw) */
    TASK_RAW,            /* a zstd frame of its pixels (--raw) */
    TASK_TRAIN,          /* its pixels, to train a dictionary on */
    TASK_VERIFY,         /* whether it decodes whole (--verify) */
};

/* The state of the process doing the work (a worker, or the tool itself
 * with --jobs 1). What decodes is made by worker_start(), after the fork:
 * a child must not use an rf_config its parent made. The dataset handle
 * may be used on both sides of a fork (each side has its own). */
struct sample_worker {
    enum sample_task task;
    const struct pack_options *o;
    const char *source;
    rf_dataset *ds;
    struct pack_shape shape; /* the source's: all zero, or raw samples */
    /* Item j is sample j * samples / items: every sample when items is
     * the dataset's size, else samples spread over all of it. */
    uint64_t samples, items;
    const ZSTD_CDict *cdict; /* TASK_RAW with a dictionary */
    rf_config *cfg;          /* TASK_RAW, TASK_TRAIN */
    unsigned char *pixels;
    size_t pixel_bytes;
    void *frame;
    size_t frame_capacity;
    ZSTD_CCtx *cctx;
    struct whole_decoder whole; /* TASK_READ_DECODABLE, TASK_VERIFY */
    char name[4200];            /* the sample's name, kept across calls on ds */
};

static uint64_t sample_of(const struct sample_worker *sw, uint64_t item)
{
    return sw->items == sw->samples ? item : item * sw->samples / sw->items;
}

static void *allocate(size_t size)
{
    void *p = malloc(size);
    if (!p)
        cli_die(PROGRAM, "out of memory");
    return p;
}

static void worker_start(void *ctx, bool forked)
{
    struct sample_worker *sw = ctx;
    const struct pack_options *o = sw->o;
    if (forked)
        unfinished_pack = NULL;
    if (sw->task == TASK_READ_DECODABLE || sw->task == TASK_VERIFY)
        whole_decoder_init(&sw->whole, &sw->shape);
    if (sw->task != TASK_RAW && sw->task != TASK_TRAIN)
        return;
    sw->cfg = decode_config(o->height, o->width, 3, o->layout,
                            RF_TRANSFORM_EVAL, !o->full_scale);
    sw->pixel_bytes = (size_t)o->height * o->width * 3;
    sw->pixels = allocate(sw->pixel_bytes);
    if (sw->task != TASK_RAW)
        return;
    sw->frame_capacity = ZSTD_compressBound(sw->pixel_bytes);
    sw->frame = allocate(sw->frame_capacity);
    sw->cctx = ZSTD_createCCtx();
    if (!sw->cctx)
        cli_die(PROGRAM, "out of memory");
}

static void worker_stop(void *ctx)
{
    struct sample_worker *sw = ctx;
    whole_decoder_free(&sw->whole);
    rf_config_free(sw->cfg);
    free(sw->pixels);
    free(sw->frame);
    ZSTD_freeCCtx(sw->cctx);
    sw->cfg = NULL;
    sw->pixels = NULL;
    sw->frame = NULL;
    sw->cctx = NULL;
}

/* "sample 7 (a/x.jpg) of train/", for the message about a worker that
 * died on it; read here, in the parent, with its own handle. */
static void describe_item(void *ctx, uint64_t item, char *out, size_t len)
{
    struct sample_worker *sw = ctx;
    const uint64_t i = sample_of(sw, item);
    rf_sample_info info;
    if (rf_dataset_read(sw->ds, i, &info) == 0)
        snprintf(out, len, "sample %" PRIu64 " (%s) of %s", i, info.name,
                 sw->source);
    else
        snprintf(out, len, "%s", rf_dataset_error(sw->ds));
}

/* A frame of the pixels, with the dictionary when there is one. */
static size_t compress_pixels(struct sample_worker *sw)
{
    const size_t size =
        sw->cdict
            ? ZSTD_compress_usingCDict(sw->cctx, sw->frame, sw->frame_capacity,
                                       sw->pixels, sw->pixel_bytes, sw->cdict)
            : ZSTD_compressCCtx(sw->cctx, sw->frame, sw->frame_capacity,
                                sw->pixels, sw->pixel_bytes, sw->o->level);
    if (ZSTD_isError(size))
        cli_die(PROGRAM, "zstd: %s", ZSTD_getErrorName(size));
    return size;
}

/* The sample's bytes, label and name as the dataset read them. */
static int read_as_is(struct sample_worker *sw, uint64_t i,
                      struct pool_result *r)
{
    rf_sample_info info;
    const int rc = rf_dataset_read(sw->ds, i, &info);
    if (rc == 0) {
        r->kind = (int)info.kind;
        r->label = info.label;
        r->name = info.name;
        r->data = info.data;
        r->size = info.size;
    }
    return rc;
}

/* --skip-bad promises to leave out samples that cannot be decoded, so
 * each one is decoded whole first, as --verify does. The decode reads the
 * sample again into the dataset's buffer, so its bytes are read once
 * more to be sent. A sample that is not a JPEG is sent as it is: the
 * parent refuses it. */
static int read_decodable(struct sample_worker *sw, uint64_t i,
                          struct pool_result *r)
{
    int rc = read_as_is(sw, i, r);
    if (rc < 0 || r->kind != RF_SAMPLE_JPEG)
        return rc;
    rc = rf_dataset_decode(sw->ds, sw->whole.cfg, 0, i, sw->whole.pixels);
    return rc < 0 ? rc : read_as_is(sw, i, r);
}

/* Decodes sample i as --raw asks, into sw->pixels, with its label and
 * name (copied, as the decode is another call on ds). */
static int decode_pixels(struct sample_worker *sw, uint64_t i,
                         struct pool_result *r)
{
    int rc = read_as_is(sw, i, r);
    if (rc < 0)
        return rc;
    snprintf(sw->name, sizeof(sw->name), "%s", r->name);
    r->name = sw->name;
    rc = rf_dataset_decode(sw->ds, sw->cfg, 0, i, sw->pixels);
    r->kind = RF_SAMPLE_ZSTD;
    r->data = sw->pixels;
    r->size = sw->pixel_bytes;
    return rc;
}

static void work_on_sample(void *ctx, uint64_t item, struct pool_result *r)
{
    struct sample_worker *sw = ctx;
    const uint64_t i = sample_of(sw, item);
    int rc = 0;
    switch (sw->task) {
    case TASK_READ:
        rc = read_as_is(sw, i, r);
        break;
    case TASK_READ_DECODABLE:
        rc = read_decodable(sw, i, r);
        break;
    case TASK_RAW:
        rc = decode_pixels(sw, i, r);
        if (rc == 0) {
            r->data = sw->frame;
            r->size = compress_pixels(sw);
        }
        break;
    case TASK_TRAIN:
        rc = decode_pixels(sw, i, r);
        break;
    case TASK_VERIFY:
        rc = rf_dataset_decode(sw->ds, sw->whole.cfg, 0, i, sw->whole.pixels);
        break;
    }
    r->status = rc;
    if (rc < 0) {
        r->reason = rf_dataset_error(sw->ds);
        r->data = NULL;
        r->size = 0;
    }
}

/* Runs sw's task on its items, in o->jobs workers, and gives each result
 * to take() in item order; clear() takes the caller's progress line away
 * before a message about a worker. */
static void run_task(struct sample_worker *sw, const char *aftermath,
                     void *caller,
                     void (*take)(void *, uint64_t, const struct pool_result *),
                     void (*clear)(void *))
{
    const struct pool_work w = {
        .program = PROGRAM,
        .aftermath = aftermath,
        .jobs = sw->o->jobs,
        .items = sw->items,
        .worker = sw,
        .start = worker_start,
        .work = work_on_sample,
        .stop = worker_stop,
        .describe = describe_item,
        .caller = caller,
        .take = take,
        .before_message = clear,
    };
    pool_run(&w);
}

/* ---- packing ---------------------------------------------------------------
 */

struct packer {
    const struct pack_options *o;
    rf_dataset *ds;
    rf_pack_writer *w;
    struct sample_worker work;
    size_t pixel_bytes; /* --raw */
    ZSTD_CDict *cdict;
    void *dict;
    size_t dict_size;
    struct pack_shape source_shape; /* all zero: no raw samples */
    uint32_t classes;               /* the source's */
    uint64_t *packed_per_class;     /* indexed by label */
    uint64_t packed, not_jpeg, bytes;
    struct bad_samples bad;
    struct progress progress;
    /* Dictionary training: the pixels of `trained` samples so far. */
    unsigned char *training;
    size_t *training_sizes;
    size_t trained;
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

static void clear_packing_progress(void *ctx)
{
    progress_clear(&((struct packer *)ctx)->progress);
}

static void add_sample(struct packer *pk, rf_sample_kind kind,
                       const struct pool_result *r)
{
    if (rf_pack_writer_add(pk->w, kind, r->data, r->size, r->label, r->name) <
        0) {
        progress_clear(&pk->progress);
        cli_die(PROGRAM, "%s", rf_pack_writer_error(pk->w));
    }
    pk->packed++;
    pk->bytes += r->size;
    if (r->label >= 0 && r->label < pk->classes)
        pk->packed_per_class[r->label]++;
}

/* A sample that cannot be packed: left out with --skip-bad, else the
 * end of the run. */
static void sample_failed(struct packer *pk, const char *reason)
{
    report_bad(&pk->bad, &pk->progress, reason);
    if (pk->o->skip_bad)
        return;
    cli_die(PROGRAM, "stopped at that sample; fix or remove the file, or "
                     "pass --skip-bad to leave such samples out");
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
    if (s->height != 0 && o->full_scale)
        cli_die_usage(PROGRAM,
                      "--full-scale would change nothing: %s holds raw "
                      "samples, decoded when it was packed; drop it, or "
                      "pack from the JPEG folder they were made from",
                      o->source);
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
                             const struct pool_result *r)
{
    const unsigned char *b = r->data;
    if (r->size >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff)
        return;
    if (pk->not_jpeg++ < MAX_BAD_LISTED) {
        progress_clear(&pk->progress);
        cli_print_line(stderr,
                       PROGRAM ": warning: sample %" PRIu64 " (%s) is not a "
                               "JPEG file; packed as is, it will fail to "
                               "decode",
                       i, r->name);
    }
}

/* Each sample's result, in sample order: added to the pack, or listed
 * as bad. */
static void take_sample(void *ctx, uint64_t i, const struct pool_result *r)
{
    struct packer *pk = ctx;
    if (r->status < 0) {
        sample_failed(pk, r->reason);
    } else if (pk->o->height) {
        add_sample(pk, RF_SAMPLE_ZSTD, r);
    } else {
        if (r->kind != RF_SAMPLE_JPEG)
            raw_source_refused(
                pk, "without --raw only JPEG samples go in as they are");
        if (!pk->o->skip_bad)
            warn_if_not_jpeg(pk, i, r);
        add_sample(pk, RF_SAMPLE_JPEG, r);
    }
    progress_show(&pk->progress, i + 1);
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

/* The pixels of a training sample, appended to the block as ZDICT wants
 * them. Samples that fail are left out here; packing reports them. */
static void take_training(void *ctx, uint64_t j, const struct pool_result *r)
{
    struct packer *pk = ctx;
    if (r->status == 0) {
        assert(r->size == pk->pixel_bytes);
        memcpy(pk->training + pk->trained * pk->pixel_bytes, r->data,
               pk->pixel_bytes);
        pk->training_sizes[pk->trained++] = pk->pixel_bytes;
    }
    progress_show(&pk->progress, j + 1);
}

/* Decodes k samples spread over the whole dataset (its first ones would
 * all be of one class). */
static void collect_training(struct packer *pk, uint64_t k)
{
    pk->work.task = TASK_TRAIN;
    pk->work.items = k;
    progress_start(&pk->progress, pk->o->progress, "training", k);
    run_task(&pk->work, "no pack was written", pk, take_training,
             clear_packing_progress);
    progress_clear(&pk->progress);
}

static void train_dictionary(struct packer *pk)
{
    const uint64_t k = training_samples(pk, rf_dataset_size(pk->ds));
    pk->training = malloc(k * pk->pixel_bytes);
    pk->training_sizes = malloc(k * sizeof(*pk->training_sizes));
    pk->dict = malloc(pk->o->dict_size);
    if (!pk->training || !pk->training_sizes || !pk->dict)
        cli_die(PROGRAM,
                "out of memory for training a dictionary on %" PRIu64
                " samples; use a smaller --dict-size",
                k);
    collect_training(pk, k);
    const size_t count = pk->trained;
    const size_t size =
        ZDICT_trainFromBuffer(pk->dict, pk->o->dict_size, pk->training,
                              pk->training_sizes, (unsigned)count);
    if (ZDICT_isError(size))
        cli_die(PROGRAM,
                "cannot train a %" PRIu64 "-byte dictionary on %zu samples "
                "(%s): too few or too alike; use a smaller --dict-size, or "
                "none",
                pk->o->dict_size, count, ZDICT_getErrorName(size));
    pk->dict_size = size;
    free(pk->training);
    free(pk->training_sizes);
    pk->training = NULL;
    pk->training_sizes = NULL;
}

/* ---- the packing run
 * --------------------------------------------------------- */

static void setup_raw(struct packer *pk)
{
    const struct pack_options *o = pk->o;
    pk->pixel_bytes = (size_t)o->height * o->width * 3;
    if (o->dict_size == 0)
        return;
    train_dictionary(pk);
    pk->cdict = ZSTD_createCDict(pk->dict, pk->dict_size, o->level);
    if (!pk->cdict)
        cli_die(PROGRAM, "zstd cannot use the dictionary it trained");
    pk->work.cdict = pk->cdict;
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
    free(pk->packed_per_class);
    ZSTD_freeCDict(pk->cdict);
    free(pk->dict);
}

/* The work's state before any task: what every task reads. */
static struct sample_worker plan_work(const struct pack_options *o,
                                      const char *source, rf_dataset *ds,
                                      struct pack_shape shape)
{
    const uint64_t samples = rf_dataset_size(ds);
    return (struct sample_worker){.o = o,
                                  .source = source,
                                  .ds = ds,
                                  .shape = shape,
                                  .samples = samples,
                                  .items = samples};
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
    pk.work = plan_work(o, o->source, pk.ds, pk.source_shape);
    if (o->height) {
        check_source_shape(&pk);
        setup_raw(&pk);
    }
    store_dictionary(&pk);
    const uint64_t samples = rf_dataset_size(pk.ds);
    pk.work.task = o->height     ? TASK_RAW
                   : o->skip_bad ? TASK_READ_DECODABLE
                                 : TASK_READ;
    pk.work.items = samples;
    progress_start(&pk.progress, o->progress, "packing", samples);
    run_task(&pk.work, "no pack was written", &pk, take_sample,
             clear_packing_progress);
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
    struct sample_worker work;
    struct bad_samples bad;
    struct progress progress;
};

/* Each sample's verdict, in sample order (TASK_VERIFY decodes JPEG
 * samples whole, so that damage anywhere in the file is seen; zstd
 * samples as they are). */
static void take_verdict(void *ctx, uint64_t i, const struct pool_result *r)
{
    struct verifier *v = ctx;
    if (r->status < 0)
        report_bad(&v->bad, &v->progress, r->reason);
    progress_show(&v->progress, i + 1);
}

static void clear_verifying_progress(void *ctx)
{
    progress_clear(&((struct verifier *)ctx)->progress);
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
    struct verifier v = {.ds = open_dataset(o->verify)};
    v.work = plan_work(o, o->verify, v.ds, read_pack_shape(o->verify));
    v.work.task = TASK_VERIFY;
    v.bad = (struct bad_samples){stdout, "bad: ", 0};
    const uint64_t samples = rf_dataset_size(v.ds);
    const double start = cli_now_s();
    progress_start(&v.progress, o->progress, "verifying", samples);
    run_task(&v.work, "the check was not finished", &v, take_verdict,
             clear_verifying_progress);
    progress_clear(&v.progress);
    const bool good = print_verify_result(&v, o->verify, cli_now_s() - start);
    rf_dataset_close(v.ds);
    return good ? 0 : EXIT_FAILED;
}

int main(int argc, char **argv)
{
    struct pack_options o;
    parse_options(argc, argv, &o);
    return o.verify ? verify(&o) : pack(&o);
}
