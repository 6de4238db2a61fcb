/*
 * tools/pack-samples.c - the work on each sample of ringfeed-pack, done
 * by its workers; see pack-samples.h.
 */
#include "pack-samples.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define VERIFY_SIZE 224 /* --verify decodes JPEG samples at this */

/* ---- decoding ------------------------------------------------------------ */

/* Sets param to value in cfg, or ends the program saying why. */
static void set_param(rf_config *cfg, rf_param param, int64_t value)
{
    if (rf_config_set(cfg, param, value) < 0)
        pack_die(rf_config_error(cfg), NULL);
}

/* A configuration for rf_dataset_decode(): the shape, the transform,
 * whether JPEGs may be decoded at a smaller DCT scale, and the decode
 * limits of o (--max-pixels, --jpeg-warnings, ...). */
static rf_config *decode_config(const struct pack_options *o, uint32_t height,
                                uint32_t width, uint32_t channels,
                                rf_layout layout, rf_transform transform,
                                bool dct_scaling)
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
        set_param(cfg, (rf_param)settings[i][0], settings[i][1]);
    for (size_t i = 0; i < PACK_DECODE_PARAMS; i++)
        set_param(cfg, pack_decode_params[i], o->decode[i]);
    return cfg;
}

struct pack_shape pack_shape_of(const rf_dataset *ds)
{
    rf_dataset_info info;
    if (rf_dataset_get_info(ds, &info) < 0)
        cli_die(PROGRAM, "no dataset to describe");
    return (struct pack_shape){info.height, info.width, info.channels,
                               info.layout};
}

/* Decodes samples whole, to find those that cannot be decoded: with
 * transform none, which reads every row of a JPEG (a training crop reads
 * only the rows down to its bottom, so damage below it can go unseen for
 * epochs). At the source's shape when it has one (the decoder must be
 * configured for it), else at VERIFY_SIZE x VERIFY_SIZE. */
static void whole_decoder_init(struct whole_decoder *d,
                               const struct pack_options *o,
                               const struct pack_shape *s)
{
    const bool raw = s->height != 0;
    const uint32_t h = raw ? s->height : VERIFY_SIZE;
    const uint32_t w = raw ? s->width : VERIFY_SIZE;
    const uint32_t c = raw ? s->channels : 3;
    d->cfg = decode_config(o, h, w, c, s->layout, RF_TRANSFORM_NONE, true);
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
    if (forked && sw->forked)
        sw->forked();
    if (sw->task == TASK_READ_DECODABLE || sw->task == TASK_VERIFY)
        whole_decoder_init(&sw->whole, o, &sw->shape);
    if (sw->task != TASK_RAW && sw->task != TASK_TRAIN)
        return;
    sw->cfg = decode_config(o, o->height, o->width, 3, o->layout,
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
        pack_user_terms(rf_dataset_error(sw->ds), NULL, out, len);
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

/* A failed sample's reason, and its name, so that the parent can leave
 * the name as it is when it puts the reason in its own terms
 * (pack_user_terms()). A decode that failed before the name was read
 * (--verify) reads it now, after the reason is copied: a read clears
 * it. */
static void name_failure(struct sample_worker *sw, uint64_t i,
                         struct pool_result *r)
{
    snprintf(sw->reason, sizeof(sw->reason), "%s", rf_dataset_error(sw->ds));
    r->reason = sw->reason;
    r->data = NULL;
    r->size = 0;
    rf_sample_info info;
    if (!*r->name && rf_dataset_read(sw->ds, i, &info) == 0) {
        snprintf(sw->name, sizeof(sw->name), "%s", info.name);
        r->name = sw->name;
    }
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
    if (rc < 0)
        name_failure(sw, i, r);
}

/* Runs sw's task on its items, in o->jobs workers, and gives each result
 * to take() in item order; clear() takes the caller's progress line away
 * before a message about a worker. */
void run_task(struct sample_worker *sw, const char *aftermath, void *caller,
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

rf_dataset *open_dataset(const char *path)
{
    rf_dataset *ds = NULL;
    char *why = NULL;
    const int rc = rf_dataset_open(&ds, path, &why);
    if (rc < 0)
        pack_die(why, rf_strerror(rc));
    return ds;
}

struct sample_worker plan_work(const struct pack_options *o, const char *source,
                               rf_dataset *ds)
{
    const uint64_t samples = rf_dataset_size(ds);
    return (struct sample_worker){.o = o,
                                  .source = source,
                                  .ds = ds,
                                  .shape = pack_shape_of(ds),
                                  .samples = samples,
                                  .items = samples};
}
