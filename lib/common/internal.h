/*
 * internal.h - an umbrella, kept for now: it includes the headers of
 * lib/common/ (one per concern: text, clock, mix64, params, resources,
 * order, process-token), so that files written before they were split
 * out still build. New code includes the header it needs. What is still
 * declared below (the producer's entry point, starting producers) is
 * being moved to headers of their own layers; once nothing includes this
 * file, it goes. Never installed; internal non-static names start with
 * rf__.
 */
#ifndef RF_INTERNAL_H
#define RF_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>

#include "ringfeed.h"

#include "common/clock.h"
#include "common/mix64.h"
#include "common/order.h"
#include "common/params.h"
#include "common/process-token.h"
#include "common/resources.h"
#include "common/text.h"

/* ---- producer ---------------------------------------------------------- */

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

/* ---- processes --------------------------------------------------------- */

/* A producer process as the consumer sees it. */
struct rf__child {
    int pid;    /* 0 once reaped */
    int pidfd;  /* readable when the process has exited; -1 once closed */
    int status; /* once reaped: the wait status, or -1 when unknown */
};

/* Finds the ringfeed-producer helper: $RINGFEED_PRODUCER, else the
 * installed one. Returns 0 or RF_E_NO_PRODUCER_BINARY with a detail. */
int rf__producer_path(char *path, size_t len, char *why, size_t why_len);

/* The helper at `path`, opened (O_PATH) for rf__spawn_producer() to
 * start from, or -1 where it cannot be (no /proc): then it is started by
 * name. Holding it open, every replacement runs the very file the loader
 * checked at open, even after an upgrade replaced or removed the file
 * under that name (a new helper speaks another version's protocol). */
int rf__helper_open(const char *path);

/* Starts producer `index` with posix_spawn of the helper: of `helper`
 * (from rf__helper_open()) when it is >= 0, else of `path`, which also
 * names it in messages. The child gets the three fds as 3, 4 and 5 (and
 * listing and data as 6 and 7, then the helper's own, which it closes)
 * and no other fd, default signal handling and an
 * empty signal mask. Returns 0 or a negative code with a detail. */
int rf__spawn_producer(const char *path, int helper,
                       const struct rf__producer_fds *fds, uint32_t index,
                       int cpu, struct rf__child *child, char *why,
                       size_t why_len);

/* Returns 0 when fork() without exec is safe here (one thread, no CUDA
 * driver loaded), else RF_E_FORK_UNSAFE with a detail. */
int rf__fork_is_safe(char *why, size_t why_len);

/* Starts producer `index` with fork(); the child runs rf__producer_run()
 * and never returns. */
int rf__fork_producer(const struct rf__producer_fds *fds, uint32_t index,
                      int cpu, struct rf__child *child, char *why,
                      size_t why_len);

/* Sends sig to a child that has not been reaped, through its pidfd when
 * it has one. Returns 0 or -errno. */
int rf__child_kill(const struct rf__child *child, int sig);

/* Reaps an exited child (or one about to exit, waiting at most
 * timeout_ms) and describes how it ended ("was killed by signal 9
 * (Killed)") into how. Returns 1 when it was reaped, 0 if it is still
 * running after the wait. */
int rf__child_reap(struct rf__child *child, int timeout_ms, char *how,
                   size_t how_len);

#endif /* RF_INTERNAL_H */
