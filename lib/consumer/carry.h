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
};

/* Opens the dataset a config carries (cfg->carried is not NULL), as the
 * loader it came from listed it, like rf_dataset_open(): *why is the
 * reason, allocated, on error. */
int rf__carried_open_dataset(const rf_config *cfg, rf_dataset **ds, char **why);

#endif /* RF_CONSUMER_CARRY_H */
