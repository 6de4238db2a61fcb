/*
 * params.c - the parameter table and rf_config, the configuration that
 * rf_loader_open() reads.
 *
 * The table is the one place where a parameter's number, name, default,
 * range and one-line doc are written: rf_config_create() fills the
 * defaults from it, rf_config_set() checks against it, rf_param_at() and
 * rf_param_lookup() hand it to callers (ringfeed-bench's --help, a
 * binding's keyword arguments), and rf__param_range() to other checks in
 * the library. ringfeed.h's comments say the same at more length;
 * tests/test-params.c keeps the two, and the old numbers, in step.
 */
#include "config.h"

#include "common/params.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"

struct param_rule {
    rf_param param;
    int old; /* its number in ringfeed 0.1 (ringfeed.h's ABI note), or
                NEW_IN_0_2 */
    const char *name;
    rf_param_kind kind;
    int64_t def, min, max;
    const char *choices; /* RF_PARAM_KIND_CHOICE only */
    const char *c_names; /* the choices' enumerators, in messages */
    const char *doc;
};

/* One row each; clang-format would spread them over three lines. */
/* clang-format off */
#define NUMBER(param, old, name, def, min, max, doc)                           \
    {param, old, name, RF_PARAM_KIND_INTEGER, def, min, max, NULL, NULL, doc}
#define FLAG(param, old, name, def, doc)                                       \
    {param, old, name, RF_PARAM_KIND_BOOLEAN, def, 0, 1, NULL, NULL, doc}
#define CHOICE(param, old, name, def, min, max, choices, c_names, doc)         \
    {param, old, name, RF_PARAM_KIND_CHOICE, def, min, max, choices, c_names,  \
     doc}
/* clang-format on */

#define POW2(n) (INT64_C(1) << (n))
/* The `old` of a parameter that ringfeed 0.1 did not have */
#define NEW_IN_0_2 0

/* In increasing number, band by band (ringfeed.h). */
static const struct param_rule rules[] = {
    /* Shape and batch */
    NUMBER(RF_PARAM_BATCH_SIZE, 1, "batch_size", 32, 1, 65536,
           "samples per batch"),
    NUMBER(RF_PARAM_HEIGHT, 2, "height", 224, 1, 65536,
           "sample height in pixels"),
    NUMBER(RF_PARAM_WIDTH, 3, "width", 224, 1, 65536, "sample width in pixels"),
    NUMBER(RF_PARAM_CHANNELS, 4, "channels", 3, 1, 4, "bytes per pixel"),
    CHOICE(RF_PARAM_LAYOUT, 5, "layout", RF_LAYOUT_NHWC, RF_LAYOUT_NHWC,
           RF_LAYOUT_NCHW, "nhwc nchw", "RF_LAYOUT_NHWC RF_LAYOUT_NCHW",
           "memory layout of a batch: pixels interleaved, or planes"),
    FLAG(RF_PARAM_DROP_LAST, 10, "drop_last", 0,
         "1: drop each epoch's partial last batch"),
    /* Order and sharding */
    NUMBER(RF_PARAM_SEED, 8, "seed", 0, INT64_MIN, INT64_MAX,
           "keys the sample order, crops, flips and synthetic content "
           "(its 64-bit pattern)"),
    NUMBER(RF_PARAM_EPOCHS, 9, "epochs", 1, 0, POW2(30),
           "passes over the dataset; 0 = no end"),
    FLAG(RF_PARAM_SHUFFLE, 15, "shuffle", 1,
         "1: a new sample order each epoch; 0: the dataset's order"),
    FLAG(RF_PARAM_ORDERED, 11, "ordered", 1,
         "1: batches in batch order; 0: each as soon as it is ready"),
    NUMBER(RF_PARAM_RANK, 19, "rank", -1, -1, INT32_MAX,
           "this rank; -1 = $RANK, else $OMPI_COMM_WORLD_RANK, else 0"),
    NUMBER(RF_PARAM_WORLD_SIZE, 20, "world_size", 0, 0, INT32_MAX,
           "ranks; 0 = $WORLD_SIZE, else $OMPI_COMM_WORLD_SIZE, else 1"),
    FLAG(RF_PARAM_SHARD_PAD, 21, "shard_pad", 1,
         "1: repeat samples so every rank has ceil(N/W); 0: floor(N/W)"),
    NUMBER(RF_PARAM_START_EPOCH, 22, "start_epoch", 0, 0, POW2(30),
           "resume: the epoch to start at"),
    NUMBER(RF_PARAM_START_BATCH, 23, "start_batch", 0, 0, POW2(40),
           "resume: the batch of start_epoch to start at"),
    /* Source */
    CHOICE(RF_PARAM_SOURCE, 12, "source", RF_SOURCE_SYNTHETIC,
           RF_SOURCE_SYNTHETIC, RF_SOURCE_SYNTHETIC_JPEG,
           "synthetic empty path synthetic-jpeg",
           "RF_SOURCE_SYNTHETIC RF_SOURCE_EMPTY RF_SOURCE_PATH "
           "RF_SOURCE_SYNTHETIC_JPEG",
           "where samples come from (path: set by rf_config_set_path)"),
    NUMBER(RF_PARAM_SAMPLES, 13, "samples", 10000, 1, POW2(38),
           "a synthetic or empty source's samples per epoch"),
    NUMBER(RF_PARAM_CLASSES, 14, "classes", 1000, 1, POW2(31),
           "a synthetic or empty source's labels are 0..classes-1"),
    FLAG(RF_PARAM_INDEX_CACHE, 35, "index_cache", 0,
         "folder: 1 keeps its listing in FOLDER/.ringfeed-index"),
    /* Decode and augmentation */
    CHOICE(RF_PARAM_TRANSFORM, 24, "transform", RF_TRANSFORM_TRAIN,
           RF_TRANSFORM_NONE, RF_TRANSFORM_EVAL, "none train eval",
           "RF_TRANSFORM_NONE RF_TRANSFORM_TRAIN RF_TRANSFORM_EVAL",
           "how each image is cut to the output size"),
    NUMBER(RF_PARAM_RESIZE, 25, "resize", 0, 0, 65536,
           "eval: short side before the centre crop; 0 = 8/7 of the output"),
    NUMBER(RF_PARAM_MIN_SCALE_PPM, 26, "min_scale_ppm", 80000, 1, 1000000,
           "train: smallest crop area, per million of the image"),
    FLAG(RF_PARAM_FLIP, 27, "flip", 1,
         "train: 1 flips half the samples horizontally"),
    FLAG(RF_PARAM_DCT_SCALING, 42, "dct_scaling", 1,
         "1: decode at a smaller DCT scale where the crop allows; 0: in "
         "full, PIL's pixels"),
    FLAG(
        RF_PARAM_EXIF_ORIENTATION, 34, "exif_orientation", 0,
        "1: apply a JPEG's EXIF orientation tag; 0: ignore it, as torchvision"),
    NUMBER(RF_PARAM_PILLOW, NEW_IN_0_2, "pillow", 13, 1, 1000,
           "eval: resize in the pass order of this Pillow release; 13: y "
           "first where it shrinks twice as much as x; 12 or less: x first"),
    /* Bad input */
    CHOICE(RF_PARAM_ON_ERROR, 28, "on_error", RF_ON_ERROR_FAIL,
           RF_ON_ERROR_FAIL, RF_ON_ERROR_SKIP, "fail skip",
           "RF_ON_ERROR_FAIL RF_ON_ERROR_SKIP",
           "a sample that does not decode: end the run, or leave it out"),
    NUMBER(RF_PARAM_MAX_ERRORS, 29, "max_errors", 0, 0, INT64_MAX,
           "skip: fail once more samples than this failed; 0 = no limit"),
    NUMBER(RF_PARAM_MAX_ERROR_PPM, 30, "max_error_ppm", 10000, 0, 1000000,
           "skip: fail once an epoch's failures exceed this, per million; "
           "an epoch whose every sample failed fails at any value"),
    NUMBER(RF_PARAM_MAX_PIXELS, 31, "max_pixels", 89478485, 1, POW2(40),
           "refuse images with more pixels (PIL's limit by default)"),
    NUMBER(RF_PARAM_MAX_SCANS, 32, "max_scans", 100, 1, 100000,
           "refuse progressive JPEGs with more scans"),
    NUMBER(RF_PARAM_MAX_DECODE_MEMORY, 40, "max_decode_memory", POW2(30),
           POW2(20), POW2(40), "refuse JPEGs whose decode needs more bytes"),
    CHOICE(RF_PARAM_JPEG_WARNINGS, 33, "jpeg_warnings", RF_JPEG_AS_PIL,
           RF_JPEG_AS_PIL, RF_JPEG_STRICT, "pil lenient strict",
           "RF_JPEG_AS_PIL RF_JPEG_LENIENT RF_JPEG_STRICT",
           "damaged JPEGs: PIL's verdicts, accept all, or any warning fails"),
    /* Faults */
    CHOICE(RF_PARAM_ON_PRODUCER_DEATH, 36, "on_producer_death",
           RF_ON_DEATH_RESPAWN, RF_ON_DEATH_RESPAWN, RF_ON_DEATH_FAIL,
           "respawn fail", "RF_ON_DEATH_RESPAWN RF_ON_DEATH_FAIL",
           "a dead producer: replace it, or end the run"),
    NUMBER(RF_PARAM_MAX_RESPAWNS, 37, "max_respawns", 1000, 0, INT64_MAX,
           "respawn: most producers replaced within one window"),
    NUMBER(RF_PARAM_RESPAWN_WINDOW_S, 41, "respawn_window_s", 3600, 1, POW2(31),
           "the window max_respawns counts in, in seconds"),
    NUMBER(RF_PARAM_BATCH_TIMEOUT_MS, 38, "batch_timeout_ms", 0, 0, POW2(40),
           "kill a producer that owes batches and delivers none this "
           "long; 0 = never"),
    FLAG(RF_PARAM_QUIET, 39, "quiet", 0,
         "1: only count replaced producers and skipped samples; 0: report "
         "each (the first 10 skipped)"),
    NUMBER(RF_PARAM_STALL_WARNING_MS, NEW_IN_0_2, "stall_warning_ms", 60000, 0,
           POW2(40),
           "report a wait of this long for one batch, and each doubling, "
           "naming the producers' samples; 0 = never"),
    /* Processes */
    NUMBER(RF_PARAM_PRODUCERS, 6, "producers", 0, 0, 1024,
           "producer processes; 0 = this rank's CPU budget (affinity, "
           "container quota, share of the node's ranks)"),
    NUMBER(RF_PARAM_SLOTS, 7, "slots", 0, 0, 65536,
           "batches in the ring; 0 = 3 per producer, at least 4"),
    CHOICE(RF_PARAM_START_MODE, 16, "start_mode", RF_START_SPAWN,
           RF_START_SPAWN, RF_START_FORK, "spawn fork",
           "RF_START_SPAWN RF_START_FORK",
           "how producers start: posix_spawn of the helper, or fork()"),
    NUMBER(RF_PARAM_SPIN_NS, 17, "spin_ns", 20000, 0, 1000000000,
           "ns a waiting side spins before it sleeps in the kernel"),
    FLAG(RF_PARAM_PIN_PRODUCERS, 18, "pin_producers", 1,
         "1: pin each producer to a CPU of this rank's CPU budget, those "
         "the process's other loaders use least (where the budget pins at "
         "all)"),
};

#define RULES (sizeof(rules) / sizeof(rules[0]))

/* The rule of param, given by its banded or its 0.1 number (the two
 * ranges never meet), or NULL. A search: the table is short, and no call
 * that takes a parameter is on a hot path. */
static const struct param_rule *rule_of(rf_param param)
{
    for (size_t i = 0; i < RULES; i++)
        if (rules[i].param == param ||
            (rules[i].old != NEW_IN_0_2 && rules[i].old == (int)param))
            return &rules[i];
    return NULL;
}

static void describe(const struct param_rule *r, rf_param_info *info)
{
    *info = (rf_param_info){
        .param = r->param,
        .kind = r->kind,
        .name = r->name,
        .doc = r->doc,
        .choices = r->choices,
        .default_value = r->def,
        .min = r->min,
        .max = r->max,
    };
}

int rf_param_at(unsigned index, rf_param_info *info)
{
    if (!info)
        return -EINVAL;
    if (index >= RULES)
        return -ERANGE;
    describe(&rules[index], info);
    return 0;
}

int rf_param_lookup(rf_param param, rf_param_info *info)
{
    const struct param_rule *r = rule_of(param);
    if (!r || !info)
        return -EINVAL;
    describe(r, info);
    return 0;
}

bool rf__param_range(rf_param param, int64_t *min, int64_t *max)
{
    const struct param_rule *r = rule_of(param);
    if (!r)
        return false;
    *min = r->min;
    *max = r->max;
    return true;
}

rf_config *rf_config_create(void)
{
    rf_config *cfg = calloc(1, sizeof(*cfg));
    if (!cfg)
        return NULL;
    for (size_t i = 0; i < RULES; i++)
        cfg->params[rules[i].param] = rules[i].def;
    return cfg;
}

void rf__config_drop_carried(rf_config *cfg)
{
    if (cfg->carried)
        cfg->free_carried(cfg->carried);
    cfg->carried = NULL;
}

void rf_config_free(rf_config *cfg)
{
    if (!cfg)
        return;
    rf__config_drop_carried(cfg);
    free(cfg);
}

/* What r accepts, as a message says it: "1..65536", "0 or 1",
 * "RF_LAYOUT_NHWC (0) or RF_LAYOUT_NCHW (1)". */
static void values_allowed(const struct param_rule *r, char *out, size_t len)
{
    if (r->kind == RF_PARAM_KIND_BOOLEAN) {
        rf__format(out, len, "0 or 1");
        return;
    }
    if (!r->c_names) {
        rf__format(out, len, "%lld..%lld", (long long)r->min,
                   (long long)r->max);
        return;
    }
    size_t used = 0;
    out[0] = '\0';
    const char *c = r->c_names;
    for (int64_t v = r->min; v <= r->max && *c; v++) {
        const size_t n = strcspn(c, " ");
        const char *sep = v == r->min ? "" : v == r->max ? " or " : ", ";
        const int k = snprintf(out + used, len - used, "%s%.*s (%lld)", sep,
                               (int)n, c, (long long)v);
        if (k < 0 || (size_t)k >= len - used)
            break;
        used += (size_t)k;
        c += n + (c[n] == ' ');
    }
}

int rf_config_set(rf_config *cfg, rf_param param, int64_t value)
{
    if (!cfg)
        return -EINVAL;
    const struct param_rule *r = rule_of(param);
    if (!r) {
        rf__format(cfg->error, sizeof(cfg->error),
                   "rf_config_set: %d is not a parameter of this ringfeed "
                   "version",
                   (int)param);
        return -EINVAL;
    }
    if (value < r->min || value > r->max) {
        /* the parameter and its values by their C names, which Python and
         * the tools put in their own terms */
        char allowed[256], upper_name[64];
        values_allowed(r, allowed, sizeof(allowed));
        size_t i = 0;
        for (; r->name[i] && i + 1 < sizeof(upper_name); i++)
            upper_name[i] = (char)(r->name[i] >= 'a' && r->name[i] <= 'z'
                                       ? r->name[i] - 'a' + 'A'
                                       : r->name[i]);
        upper_name[i] = '\0';
        rf__format(cfg->error, sizeof(cfg->error),
                   "rf_config_set: RF_PARAM_%s %lld is out of range; use %s",
                   upper_name, (long long)value, allowed);
        return -EINVAL;
    }
    cfg->params[r->param] = value;
    cfg->error[0] = '\0';
    return 0;
}

int rf_config_get(const rf_config *cfg, rf_param param, int64_t *value)
{
    if (!cfg)
        return -EINVAL;
    /* The detail of a failed get is kept like any other (ringfeed.h: the
     * last failed call on cfg). Every rf_config comes from
     * rf_config_create(), never a const object, so writing its error
     * text through this pointer is defined; the parameters stay as they
     * are. */
    char *error = ((rf_config *)cfg)->error;
    const struct param_rule *r = rule_of(param);
    if (!r) {
        rf__format(error, sizeof(cfg->error),
                   "rf_config_get: %d is not a parameter of this ringfeed "
                   "version",
                   (int)param);
        return -EINVAL;
    }
    if (!value) {
        rf__format(error, sizeof(cfg->error),
                   "rf_config_get: value is NULL; pass where to write %s",
                   r->name);
        return -EINVAL;
    }
    *value = cfg->params[r->param];
    return 0;
}

const char *rf_config_error(const rf_config *cfg)
{
    return cfg ? cfg->error : "";
}

int rf_config_set_path(rf_config *cfg, const char *path)
{
    if (!cfg)
        return -EINVAL;
    if (!path || !*path) {
        rf__format(cfg->error, sizeof(cfg->error),
                   "rf_config_set_path: the path is empty");
        return -EINVAL;
    }
    if (strlen(path) >= sizeof(cfg->path)) {
        rf__format(cfg->error, sizeof(cfg->error),
                   "rf_config_set_path: the path is %zu bytes; the limit is "
                   "%zu",
                   strlen(path), sizeof(cfg->path) - 1);
        return -ENAMETOOLONG;
    }
    if (strcmp(cfg->path, path) != 0)
        rf__config_drop_carried(cfg); /* what it carries is the old's */
    memcpy(cfg->path, path, strlen(path) + 1);
    cfg->params[RF_PARAM_SOURCE] = RF_SOURCE_PATH;
    cfg->error[0] = '\0';
    return 0;
}

const char *rf_config_get_path(const rf_config *cfg)
{
    return cfg ? cfg->path : "";
}

int rf_config_set_message_handler(rf_config *cfg, rf_message_fn fn, void *user)
{
    if (!cfg)
        return -EINVAL;
    cfg->message_fn = fn;
    cfg->message_user = fn ? user : NULL;
    return 0;
}
