/*
 * params.c - rf_config (parameters with their ranges and defaults), the
 * configuration that rf_loader_open() reads.
 */
#include "config.h"

#include "common/params.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"

struct param_rule {
    const char *name;
    int64_t min, max, def;
};

/* Indexed by rf_param. A NULL name marks a number that is not a param. */
static const struct param_rule rules[RF__PARAMS] = {
    [RF_PARAM_BATCH_SIZE] = {"batch_size", 1, 65536, 32},
    [RF_PARAM_HEIGHT] = {"height", 1, 65536, 224},
    [RF_PARAM_WIDTH] = {"width", 1, 65536, 224},
    [RF_PARAM_CHANNELS] = {"channels", 1, 4, 3},
    [RF_PARAM_LAYOUT] = {"layout", RF_LAYOUT_NHWC, RF_LAYOUT_NCHW,
                         RF_LAYOUT_NHWC},
    [RF_PARAM_PRODUCERS] = {"producers", 0, 1024, 0},
    [RF_PARAM_SLOTS] = {"slots", 0, 65536, 0},
    [RF_PARAM_SEED] = {"seed", INT64_MIN, INT64_MAX, 0},
    [RF_PARAM_EPOCHS] = {"epochs", 0, INT64_C(1) << 30, 1},
    [RF_PARAM_DROP_LAST] = {"drop_last", 0, 1, 0},
    [RF_PARAM_ORDERED] = {"ordered", 0, 1, 1},
    [RF_PARAM_SOURCE] = {"source", RF_SOURCE_SYNTHETIC,
                         RF_SOURCE_SYNTHETIC_JPEG, RF_SOURCE_SYNTHETIC},
    [RF_PARAM_SAMPLES] = {"samples", 1, INT64_C(1) << 38, 10000},
    [RF_PARAM_CLASSES] = {"classes", 1, INT64_C(1) << 31, 1000},
    [RF_PARAM_SHUFFLE] = {"shuffle", 0, 1, 1},
    [RF_PARAM_START_MODE] = {"start_mode", RF_START_SPAWN, RF_START_FORK,
                             RF_START_SPAWN},
    [RF_PARAM_SPIN_NS] = {"spin_ns", 0, 1000000000, 20000},
    [RF_PARAM_PIN_PRODUCERS] = {"pin_producers", 0, 1, 1},
    [RF_PARAM_RANK] = {"rank", -1, INT32_MAX, -1},
    [RF_PARAM_WORLD_SIZE] = {"world_size", 0, INT32_MAX, 0},
    [RF_PARAM_SHARD_PAD] = {"shard_pad", 0, 1, 1},
    [RF_PARAM_START_EPOCH] = {"start_epoch", 0, INT64_C(1) << 30, 0},
    [RF_PARAM_START_BATCH] = {"start_batch", 0, INT64_C(1) << 40, 0},
    [RF_PARAM_TRANSFORM] = {"transform", RF_TRANSFORM_NONE, RF_TRANSFORM_EVAL,
                            RF_TRANSFORM_TRAIN},
    [RF_PARAM_RESIZE] = {"resize", 0, 65536, 0},
    [RF_PARAM_MIN_SCALE_PPM] = {"min_scale_ppm", 1, 1000000, 80000},
    [RF_PARAM_FLIP] = {"flip", 0, 1, 1},
    [RF_PARAM_ON_ERROR] = {"on_error", RF_ON_ERROR_FAIL, RF_ON_ERROR_SKIP,
                           RF_ON_ERROR_FAIL},
    [RF_PARAM_MAX_ERRORS] = {"max_errors", 0, INT64_MAX, 0},
    [RF_PARAM_MAX_ERROR_PPM] = {"max_error_ppm", 0, 1000000, 10000},
    [RF_PARAM_MAX_PIXELS] = {"max_pixels", 1, INT64_C(1) << 40, 89478485},
    [RF_PARAM_MAX_SCANS] = {"max_scans", 1, 100000, 100},
    [RF_PARAM_JPEG_WARNINGS] = {"jpeg_warnings", 0, 1, 0},
    [RF_PARAM_EXIF_ORIENTATION] = {"exif_orientation", 0, 1, 0},
    [RF_PARAM_INDEX_CACHE] = {"index_cache", 0, 1, 0},
    [RF_PARAM_ON_PRODUCER_DEATH] = {"on_producer_death", RF_ON_DEATH_RESPAWN,
                                    RF_ON_DEATH_FAIL, RF_ON_DEATH_RESPAWN},
    [RF_PARAM_MAX_RESPAWNS] = {"max_respawns", 0, INT64_MAX, 1000},
    [RF_PARAM_BATCH_TIMEOUT_MS] = {"batch_timeout_ms", 0, INT64_C(1) << 40, 0},
    [RF_PARAM_QUIET] = {"quiet", 0, 1, 0},
    [RF_PARAM_MAX_DECODE_MEMORY] = {"max_decode_memory", INT64_C(1) << 20,
                                    INT64_C(1) << 40, INT64_C(1) << 30},
    [RF_PARAM_RESPAWN_WINDOW_S] = {"respawn_window_s", 1, INT64_C(1) << 31,
                                   3600},
    [RF_PARAM_DCT_SCALING] = {"dct_scaling", 0, 1, 1},
};

static const struct param_rule *rule_of(rf_param param)
{
    if ((unsigned)param >= RF__PARAMS || !rules[param].name)
        return NULL;
    return &rules[param];
}

rf_config *rf_config_create(void)
{
    rf_config *cfg = calloc(1, sizeof(*cfg));
    if (!cfg)
        return NULL;
    for (unsigned p = 0; p < RF__PARAMS; p++)
        if (rules[p].name)
            cfg->params[p] = rules[p].def;
    return cfg;
}

void rf_config_free(rf_config *cfg)
{
    free(cfg);
}

int rf_config_set(rf_config *cfg, rf_param param, int64_t value)
{
    const struct param_rule *r = rule_of(param);
    if (!r) {
        rf__format(cfg->error, sizeof(cfg->error),
                   "rf_config_set: %d is not a parameter of this ringfeed "
                   "version",
                   (int)param);
        return -EINVAL;
    }
    if (value < r->min || value > r->max) {
        rf__format(cfg->error, sizeof(cfg->error),
                   "rf_config_set: %s = %lld is out of range; use %lld..%lld",
                   r->name, (long long)value, (long long)r->min,
                   (long long)r->max);
        return -EINVAL;
    }
    cfg->params[param] = value;
    cfg->error[0] = '\0';
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

int rf_config_get(const rf_config *cfg, rf_param param, int64_t *value)
{
    if (!rule_of(param))
        return -EINVAL;
    *value = cfg->params[param];
    return 0;
}

const char *rf_config_error(const rf_config *cfg)
{
    return cfg->error;
}

int rf_config_set_path(rf_config *cfg, const char *path)
{
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
    memcpy(cfg->path, path, strlen(path) + 1);
    cfg->params[RF_PARAM_SOURCE] = RF_SOURCE_PATH;
    cfg->error[0] = '\0';
    return 0;
}

const char *rf_config_get_path(const rf_config *cfg)
{
    return cfg->path;
}

int rf_config_set_message_handler(rf_config *cfg, rf_message_fn fn, void *user)
{
    if (!cfg)
        return -EINVAL;
    cfg->message_fn = fn;
    cfg->message_user = fn ? user : NULL;
    return 0;
}
