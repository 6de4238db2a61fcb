/*
 * tools/work-pool.h - runs one piece of work per item (items 0..n-1) in
 * worker processes forked from the caller, and hands each item's result
 * to the caller in item order, so that what the caller makes of the
 * results (a file, a list) is the same whatever the number of workers.
 *
 * Worker j of J does items j, j + J, j + 2J, ... in turn and writes each
 * result into a pipe of its own; the caller reads the pipes in item
 * order. A worker thus runs at most a pipe's worth of results ahead
 * (memory stays bounded, whatever the number of items), and when a
 * worker's pipe ends early, the first item whose result is missing is
 * the one it died on: the run stops, naming it. With one job no process
 * is started: the work runs in the caller, item by item.
 *
 * Compiled into the tools that use it; policy for programs (it exits
 * through cli_die()), like cli.h.
 */
#ifndef RINGFEED_TOOLS_WORK_POOL_H
#define RINGFEED_TOOLS_WORK_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The result of one item. Filled by work(), whose memory the pointers
 * point into until its next call; what take() gets points into the
 * pool's, valid until take() returns. */
struct pool_result {
    int status;         /* 0, or why the item failed (negative) */
    int kind;           /* what the caller wants; rf_sample_kind here */
    int64_t label;      /* likewise */
    const char *name;   /* never NULL; "" for none */
    const char *reason; /* never NULL; "" for none */
    const void *data;   /* size bytes; may be NULL when size is 0 */
    size_t size;
};

struct pool_work {
    const char *program; /* starts each message */
    /* What a worker's death leaves behind, for its message, e.g. "no
     * pack was written". */
    const char *aftermath;
    unsigned jobs; /* at least 1; no more workers than items are started */
    uint64_t items;
    /* The work's state. start() makes what the work needs, in each
     * worker after fork (forked: true), or in the caller with one job;
     * stop() frees it again, in the caller only (workers just end). */
    void *worker;
    void (*start)(void *worker, bool forked);
    void (*work)(void *worker, uint64_t item, struct pool_result *r);
    void (*stop)(void *worker);
    /* In the caller, with the state as it was before start(): names item,
     * e.g. "sample 7 (a/x.jpg)", for the message about a worker that
     * died on it. */
    void (*describe)(void *worker, uint64_t item, char *out, size_t len);
    /* In the caller, the result of each item in item order. */
    void *caller;
    void (*take)(void *caller, uint64_t item, const struct pool_result *r);
    /* In the caller, before the pool ends it with a message (e.g. takes
     * its progress line away); NULL for nothing. */
    void (*before_message)(void *caller);
};

/* Runs the work; returns once every result was taken and every worker
 * has ended well. A worker that dies (killed, crashed, or ended with a
 * status other than 0) ends the caller with cli_die(), naming the worker,
 * how it ended, and the item it was on; so does a failure to start one.
 * The other workers are killed and reaped before the caller exits, so
 * that nothing they hold (a file the caller was writing) outlives it; were
 * the caller killed, they die with it (cli_stop_with_parent()). Not
 * reentrant: one pool at a time. */
void pool_run(const struct pool_work *w);

#endif
