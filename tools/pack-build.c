/*
 * tools/pack-build.c - ringfeed-pack's writing of a pack: the writer made
 * first (an output that cannot be written fails before any work), the
 * --raw dictionary trained on samples spread over the source, every
 * sample's result added in sample order (or left out and listed with
 * --skip-bad), every class checked to keep a sample, and the summary.
 */
#include <ringfeed.h>

#include <assert.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zdict.h>
#include <sys/stat.h>
#include <zstd.h>

#include "cli.h"
#include "decode/decode.h"
#include "pack-progress.h"
#include "pack-samples.h"
#include "ringfeed-pack.h"
#include "work-pool.h"

/* Dictionary training reads about this many times the dictionary's size
 * of samples (zstd's advice), within these bounds. */
#define DICT_TRAINING_FACTOR 100
#define DICT_MIN_SAMPLES 16
#define DICT_MAX_SAMPLES 4096
#define DICT_MAX_TRAINING_BYTES (UINT64_C(1) << 30)

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

/* In each worker, after fork(): the file is the parent's to abandon. */
static void forget_unfinished_pack(void)
{
    unfinished_pack = NULL;
}

/* ---- packing ------------------------------------------------------------- */

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
    uint64_t packed, undecodable, bytes;
    struct bad_samples bad;
    struct progress progress;
    /* Dictionary training: the pixels of `trained` samples so far. */
    unsigned char *training;
    size_t *training_sizes;
    size_t trained;
};

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
        pack_die(rf_pack_writer_error(pk->w), NULL);
    }
    pk->packed++;
    pk->bytes += r->size;
    if (r->label >= 0 && r->label < pk->classes)
        pk->packed_per_class[r->label]++;
}

/* A sample that cannot be packed: left out with --skip-bad, else the
 * end of the run. The reason is the library's, in the tool's flags. */
static void sample_failed(struct packer *pk, const struct pool_result *r)
{
    char reason[2048];
    report_bad(&pk->bad, &pk->progress,
               pack_user_terms(r->reason, r->name, reason, sizeof(reason)));
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

/* Without --skip-bad, an image's bytes go in as they are, even when no
 * decoder of this build reads them: the sample then fails when decoded,
 * as it would from the folder. Say so, with the reason the decode would
 * give, from the library's own test of the signature (PNG and WebP pass
 * where the library was built with libpng and libwebp). */
static void warn_if_undecodable(struct packer *pk, uint64_t i,
                                const struct pool_result *r)
{
    char why[256];
    if (rf__decode_check_signature(r->data, r->size, why, sizeof(why)) == 0)
        return;
    if (pk->undecodable++ < MAX_BAD_LISTED) {
        /* a folder's file by its path, as the library's messages name it;
         * a pack's sample by its name in the pack */
        struct stat st;
        const char *source = pk->o->source;
        const size_t n = strlen(source);
        const bool folder = stat(source, &st) == 0 && S_ISDIR(st.st_mode);
        progress_clear(&pk->progress);
        cli_print_line(stderr,
                       PROGRAM ": warning: sample %" PRIu64 " (%.*s%s%s) is "
                               "packed as is but will fail to decode: %s; "
                               "pass --skip-bad to leave it out",
                       i, folder ? (int)n : 0, source,
                       folder && n && source[n - 1] != '/' ? "/" : "", r->name,
                       why);
    }
}

/* Each sample's result, in sample order: added to the pack, or listed
 * as bad. */
static void take_sample(void *ctx, uint64_t i, const struct pool_result *r)
{
    struct packer *pk = ctx;
    if (r->status < 0) {
        sample_failed(pk, r);
    } else if (pk->o->height) {
        add_sample(pk, RF_SAMPLE_ZSTD, r);
    } else {
        if (r->kind != RF_SAMPLE_JPEG)
            raw_source_refused(
                pk, "without --raw only JPEG samples go in as they are");
        if (!pk->o->skip_bad)
            warn_if_undecodable(pk, i, r);
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

/* ---- the zstd dictionary ------------------------------------------------ */

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
                "cannot train a %" PRIu64 "-byte dictionary on %zu sample%s "
                "(%s): too few or too alike; use a smaller --dict-size, or "
                "none",
                pk->o->dict_size, count, count == 1 ? "" : "s",
                ZDICT_getErrorName(size));
    pk->dict_size = size;
    free(pk->training);
    free(pk->training_sizes);
    pk->training = NULL;
    pk->training_sizes = NULL;
}

/* ---- the packing run ---------------------------------------------------- */

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
        pack_die(why, "cannot create the packed file");
    unfinished_pack = pk->w;
    atexit(abandon_unfinished_pack);
}

static void store_dictionary(struct packer *pk)
{
    if (pk->dict_size > 0 &&
        rf_pack_writer_set_dictionary(pk->w, pk->dict, pk->dict_size) < 0)
        pack_die(rf_pack_writer_error(pk->w), NULL);
}

static void finish_writer(struct packer *pk)
{
    char *why = NULL;
    unfinished_pack = NULL; /* finish frees it, whatever happens */
    if (rf_pack_writer_finish(pk->w, &why) < 0)
        pack_die(why, "cannot finish the packed file");
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
            "packed %" PRIu64 " sample%s in %u class%s from %s into %s: "
            "%.1f MB, %.1f KB each",
            pk->packed, pk->packed == 1 ? "" : "s", packed_classes(pk),
            packed_classes(pk) == 1 ? "" : "es", o->source, o->output,
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
        fprintf(out, "; %" PRIu64 " bad sample%s left out", pk->bad.count,
                pk->bad.count == 1 ? "" : "s");
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
int pack_build(const struct pack_options *o)
{
    struct packer pk = {.o = o};
    pk.bad = (struct bad_samples){stderr,
                                  o->skip_bad ? "skipped: " : PROGRAM ": ", 0};
    const double start = cli_now_s();
    start_writer(&pk);
    pk.ds = open_dataset(o->source);
    if (rf_dataset_size(pk.ds) == 0) /* a pack made empty: no loader reads */
        cli_die(PROGRAM,
                "%s has no samples, so there is nothing to pack (a loader "
                "refuses a pack without samples); pack the folder it was "
                "made from instead. No pack was written",
                o->source);
    count_classes(&pk);
    pk.work = plan_work(o, o->source, pk.ds);
    pk.work.forked = forget_unfinished_pack;
    pk.source_shape = pk.work.shape;
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
