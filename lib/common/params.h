/*
 * params.h - struct rf_config (what rf_config_* in include/ringfeed.h set
 * and read) and the library's view of the parameter table in params.c:
 * the one place where each parameter's name, default, range and doc
 * live.
 */
#ifndef RF_COMMON_PARAMS_H
#define RF_COMMON_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/text.h"
#include "ringfeed.h"

/* Parameters are numbered in bands of RF__PARAM_BAND, one per area
 * (ringfeed.h); the first band starts at RF__PARAM_FIRST, above the old
 * numbers 1..42, so the two never meet. */
#define RF__PARAM_FIRST 64
#define RF__PARAM_BAND 16
#define RF__PARAM_AREAS 7
/* Room for every banded number: arrays of parameter values (the config,
 * the loader's resolved copy, the control segment) are indexed by
 * rf_param directly. */
#define RF__PARAMS (RF__PARAM_FIRST + RF__PARAM_AREAS * RF__PARAM_BAND)

#define RF__PATH_MAX 4096

struct rf_config {
    int64_t params[RF__PARAMS]; /* indexed by rf_param (banded numbers) */
    char path[RF__PATH_MAX];    /* RF_SOURCE_PATH's dataset */
    /* rf_config_continue(): what the config carries from a loader
     * (consumer/carry.h), owned by it; NULL when none, and the path is
     * then listed at each open. carry.c sets how to free it too: common/
     * depends on no layer above it. */
    struct rf__carried *carried;
    void (*free_carried)(struct rf__carried *carried);
    rf_message_fn message_fn; /* NULL: the default (stderr, guarded) */
    void *message_user;
    char error[RF__DETAIL];
};

/* The values rf_config_set() accepts for param, so that checks made
 * elsewhere (the pack writer's sample shape) keep to the same limits.
 * False for a number that is not a parameter. */
bool rf__param_range(rf_param param, int64_t *min, int64_t *max);

/* Frees what rf_config_continue() carried, if anything: cfg lists its
 * path again at the next open. */
void rf__config_drop_carried(rf_config *cfg);

#endif /* RF_COMMON_PARAMS_H */
