/*
 * carry.c - rf_config_continue(): a configuration takes from an open
 * loader what the loaders opened from it need to go on with that
 * loader's run (see carry.h). The Python package starts its producers
 * again this way whenever a Loader's position moves (set_epoch() to
 * another epoch, load_state_dict(), a loop left early): the dataset
 * stays the one it listed, and the skip policy's list and limits count
 * over the whole run, not from each restart.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/resources.h"
#include "common/text.h"
#include "consumer/carry.h"
#include "consumer/loader-internal.h"
#include "source/dataset.h"

static void free_carried(struct rf__carried *c)
{
    if (c->data_fd >= 0)
        close(c->data_fd);
    if (c->listing_fd >= 0)
        close(c->listing_fd);
    rf__failures_free(&c->failed);
    free(c);
}

int rf__carried_open_dataset(const rf_config *cfg, rf_dataset **ds, char **why)
{
    char reason[RF__DETAIL];
    const int rc = rf__dataset_open_indexed(
        ds, cfg->path, cfg->carried->data_fd, cfg->carried->listing_fd, reason,
        sizeof(reason));
    if (rc < 0)
        *why = strdup(reason);
    return rc;
}

/* Copies of the loader's dataset fds into c; -errno with the reason in
 * cfg's error when no fd is free. */
static int copy_dataset_fds(rf_config *cfg, const rf_loader *from,
                            struct rf__carried *c)
{
    c->data_fd = fcntl(from->fds.data, F_DUPFD_CLOEXEC, 3);
    if (c->data_fd >= 0)
        c->listing_fd = fcntl(from->fds.listing, F_DUPFD_CLOEXEC, 3);
    if (c->data_fd >= 0 && c->listing_fd >= 0)
        return 0;
    const int rc = -errno;
    char advice[256] = "";
    (void)rf__advise_on_exhaustion(-rc, advice, sizeof(advice));
    rf__format(cfg->error, sizeof(cfg->error),
               "rf_config_continue: cannot keep the dataset '%s' open: %s%s%s",
               from->path, strerror(-rc), *advice ? "; " : "", advice);
    return rc;
}

/* Why `from` has nothing a config could carry on, or NULL. */
static const char *nothing_to_carry(const rf_loader *from)
{
    if (!from)
        return "the loader is NULL";
    if (from->params[RF_PARAM_SOURCE] != RF_SOURCE_PATH)
        return "the loader reads no dataset from a path (a synthetic source "
               "has no listing)";
    if (from->fds.listing < 0 || from->fds.data < 0)
        return "the loader kept no listing of its dataset";
    return NULL;
}

/* Copies from's records into c: its failed samples (the one copy that
 * allocates), its producers' breakers and replacements. */
static int copy_records(rf_config *cfg, const rf_loader *from,
                        struct rf__carried *c)
{
    rf__breakers_carry(&c->breakers, &from->breakers);
    c->respawns = from->respawns;
    c->window_respawns = from->window_respawns;
    c->window_start_ns = from->window_start_ns;
    if (rf__failures_carry(&c->failed, &from->failures) == 0)
        return 0;
    rf__format(cfg->error, sizeof(cfg->error),
               "rf_config_continue: out of memory for the %llu failed "
               "samples' record",
               (unsigned long long)from->failures.distinct);
    return -ENOMEM;
}

int rf_config_continue(rf_config *cfg, const rf_loader *from)
{
    if (!cfg)
        return -EINVAL;
    const char *none = nothing_to_carry(from);
    if (none) {
        rf__format(cfg->error, sizeof(cfg->error), "rf_config_continue: %s",
                   none);
        return -EINVAL;
    }
    struct rf__carried *c = calloc(1, sizeof(*c));
    if (!c) {
        rf__format(cfg->error, sizeof(cfg->error),
                   "rf_config_continue: out of memory");
        return -ENOMEM;
    }
    c->data_fd = c->listing_fd = -1;
    int rc = copy_dataset_fds(cfg, from, c);
    if (rc == 0)
        rc = copy_records(cfg, from, c);
    if (rc < 0) {
        free_carried(c);
        return rc;
    }
    rf__config_drop_carried(cfg);
    cfg->carried = c;
    cfg->free_carried = free_carried;
    memcpy(cfg->path, from->path, sizeof(cfg->path));
    cfg->params[RF_PARAM_SOURCE] = RF_SOURCE_PATH;
    cfg->error[0] = '\0';
    return 0;
}

int rf__carried_apply(rf_loader *l, const rf_config *cfg)
{
    const struct rf__carried *c = cfg->carried;
    if (!c || l->params[RF_PARAM_SOURCE] != RF_SOURCE_PATH)
        return 0;
    if (rf__failures_carry(&l->failures, &c->failed) < 0)
        return set_error(l, -ENOMEM,
                         "out of memory for the record of the %llu samples "
                         "that failed before",
                         (unsigned long long)c->failed.distinct);
    rf__breakers_carry(&l->breakers, &c->breakers);
    l->respawns = c->respawns;
    l->window_respawns = c->window_respawns;
    l->window_start_ns = c->window_start_ns;
    return 0;
}
