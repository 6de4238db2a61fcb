/*
 * params.h - struct rf_config (what rf_config_* in include/ringfeed.h set
 * and read) and the library's view of the parameter rules in params.c.
 */
#ifndef RF_COMMON_PARAMS_H
#define RF_COMMON_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/text.h"
#include "ringfeed.h"

#define RF__PARAMS 64 /* room for rf_param values 0..63 */
#define RF__PATH_MAX 4096

struct rf_config {
    int64_t params[RF__PARAMS]; /* indexed by rf_param */
    char path[RF__PATH_MAX];    /* RF_SOURCE_PATH's dataset */
    rf_message_fn message_fn;   /* NULL: the default (stderr, guarded) */
    void *message_user;
    char error[RF__DETAIL];
};

/* The values rf_config_set() accepts for param, so that checks made
 * elsewhere (the pack writer's sample shape) keep to the same limits.
 * False for a number that is not a parameter. */
bool rf__param_range(rf_param param, int64_t *min, int64_t *max);

#endif /* RF_COMMON_PARAMS_H */
