/*
 * carry.h - what a configuration carries from an open loader to the
 * loaders opened from it (rf_config_continue() in include/ringfeed.h),
 * so that a run started again at another position goes on as the same
 * run: the dataset as the first loader listed it, and the record of the
 * samples that failed under the skip policy.
 */
#ifndef RF_CONSUMER_CARRY_H
#define RF_CONSUMER_CARRY_H

#include "common/params.h"
#include "consumer/breakers.h"
#include "consumer/failures.h"
#include "ringfeed.h"

struct rf__carried {
    /* the folder or packed file the loader opened, and its listing (a
     * folder's, or a pack's sealed metadata): copies owned here */
    int data_fd;
    int listing_fd;
    /* its record of failed samples (the list, the distinct samples
     * RF_PARAM_MAX_ERRORS counts, the total); the limits are not used */
    struct rf__failures failed;
    /* its producers' deaths: the samples that crashed or hung them
     * (those condemned stay left out), and the replacements made, which
     * RF_PARAM_MAX_RESPAWNS counts in its window */
    struct rf__breakers breakers;
    uint64_t respawns, window_respawns, window_start_ns;
};

/* Opens the dataset a config carries (cfg->carried is not NULL), as the
 * loader it came from listed it, like rf_dataset_open(): *why is the
 * reason, allocated, on error. */
int rf__carried_open_dataset(const rf_config *cfg, rf_dataset **ds, char **why);

/* Makes l, resolved from cfg, go on with the run cfg carries (if any, and
 * only for a dataset from a path): its failed samples, its producers'
 * breakers and replacements. Returns 0, or -ENOMEM with l's error set. */
int rf__carried_apply(rf_loader *l, const rf_config *cfg);

#endif /* RF_CONSUMER_CARRY_H */
