/*
 * spawn.h - starting, watching and reaping one producer process
 * (spawn.c): posix_spawn() of the ringfeed-producer helper, or fork()
 * with the producer's code run in the child (fork mode). The loader's
 * producers as a set are launch.c's.
 *
 * The one place the consumer depends on producer/: a producer is started
 * with struct rf__producer_fds and the signals it catches blocked, and
 * in fork mode the child runs rf__producer_run() itself (see spawn.c).
 */
#ifndef RF_CONSUMER_SPAWN_H
#define RF_CONSUMER_SPAWN_H

#include <stddef.h>
#include <stdint.h>

#include "producer/producer.h"

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
 * and no other fd, default signal handling, and blocked only the signals
 * it catches (rf__producer_caught_signals()), until its handler is in
 * place. Returns 0 or a negative code with a detail. */
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

#endif /* RF_CONSUMER_SPAWN_H */
