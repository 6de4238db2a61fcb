/*
 * producer.h - what a producer process is started with and runs: the fds
 * it inherits, the signals it catches, and rf__producer_run(), its whole
 * life. rf_producer_main() (the ringfeed-producer helper, spawn mode)
 * and consumer/spawn.c (fork mode, in the child) are its two callers.
 */
#ifndef RF_PRODUCER_PRODUCER_H
#define RF_PRODUCER_PRODUCER_H

#include <signal.h>
#include <stdint.h>

/* The fds a producer inherits: both segments, the consumer's eventfd and
 * a folder dataset's listing (-1 when there is none). */
struct rf__producer_fds {
    int control, arena, bell, listing;
    /* The dataset itself, open (a folder or a packed file), or -1. Set
     * exactly when listing is. */
    int data;
    /* The consumer's own fd number of the control memfd, or -1: an idle
     * producer stops once its parent no longer holds it (it exec'd). */
    int parent_control;
};

/* The signals a producer catches (its parent's death, a scheduler's
 * warnings), which it starts with blocked until its handler is in place. */
void rf__producer_caught_signals(sigset_t *set);

/* Runs a producer in this process until it is told to stop or its parent
 * dies. Returns the exit status. Used by rf_producer_main() (spawn mode)
 * and by fork mode directly. */
int rf__producer_run(const struct rf__producer_fds *fds, uint32_t index,
                     int cpu, int parent_pid);

#endif /* RF_PRODUCER_PRODUCER_H */
