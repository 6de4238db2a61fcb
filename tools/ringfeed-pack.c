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
 *
 * This file reads the command line; the rest is in ringfeed-pack.h's
 * files: pack-build.c (writing), pack-verify.c (--verify),
 * pack-samples.c (the work on each sample) and pack-progress.c.
 */
#include <ringfeed.h>

#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ringfeed-pack.h"

#define MAX_SIDE 65536
#define MAX_DICT (UINT64_C(1) << 24)
#define MAX_JOBS 1024

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

int main(int argc, char **argv)
{
    struct pack_options o;
    parse_options(argc, argv, &o);
    return o.verify ? pack_verify(&o) : pack_build(&o);
}
