/*
 * tools/bench/bench-channel.h - what the files of bench-channel share: the
 * options, the shared mapping both processes use, the figures of one run,
 * and the calls each file offers the others. bench-channel.c says what the
 * program measures and why; each bench-channel-*.c owns one part:
 *
 *   bench-channel.c            main: signals, CPUs, the chosen benchmark
 *   bench-channel-options.c    the command line
 *   bench-channel-transport.c  the shared mapping; moving one handle over
 *                              a ring (spinning or sleeping) or a pipe
 *   bench-channel-sides.c      the loop each process runs in a throughput
 *                              or ping-pong run, checking every handle
 *   bench-channel-run.c        one run: fork, play the parent's side, reap,
 *                              turn what both sides saw into figures
 *   bench-channel-report.c     repeated runs, their medians, the report
 *                              and the --json line
 */
#ifndef RINGFEED_TOOLS_BENCH_CHANNEL_H
#define RINGFEED_TOOLS_BENCH_CHANNEL_H

#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "channel/atomics.h"
#include "channel/ring.h"

/* ---- options (bench-channel-options.c) ---------------------------------- */

/* MODE_PIPE is no ring at all: one byte each way through two pipes, with
 * blocking reads, as the yardstick for MODE_SLEEP. */
enum mode { MODE_THROUGHPUT, MODE_SPIN, MODE_SLEEP, MODE_PIPE };

/* Indexed by enum mode: the --mode names, as printed in the report. */
extern const char *const bc_mode_names[4];

struct opts {
    enum mode mode;
    uint64_t count;   /* handles (throughput) or round trips (ping-pong) */
    uint64_t repeat;  /* runs, each with a fresh pair of processes */
    uint64_t entries; /* per ring, a power of two */
    uint64_t block;   /* round trips per timed block */
    uint64_t timeout; /* seconds one run may take before we call it hung */
    bool json;
};

/* The modes in which the receiver sleeps in the kernel until woken. */
bool bc_mode_sleeps(enum mode m);

void bc_usage(FILE *f);

/* Returns 0, 1 for --help, or -1 after saying what is wrong. */
int bc_parse_args(int argc, char **argv, struct opts *o);

/* ---- the process (bench-channel.c) -------------------------------------- */

/* Set by the parent's SIGCHLD and SIGALRM handlers: the signal number that
 * says "stop waiting for the other side", 0 while all is well. */
extern volatile sig_atomic_t bc_stop;

/* With a single CPU the other side cannot run while we spin; yielding lets
 * it, at the cost of making the figures meaningless (we say so). */
extern bool bc_yield;

/* The CPU each side is pinned to, one per side, so the figures are about
 * cache-line transfers between cores and not about scheduling. */
struct cpus {
    int parent, child; /* -1: not pinned */
    int available;
};

int bc_pin_to(int cpu);

/* ---- the shared mapping (bench-channel-transport.c) --------------------- */

enum side { PARENT = 0, CHILD = 1 };

/* Ring TO_CHILD is written by the parent; TO_PARENT by the child. */
enum direction { TO_CHILD = 0, TO_PARENT = 1 };

/* What the child found, for the parent to read after waitpid(), which
 * orders it after every store the child made. */
struct report {
    uint64_t t0_ns, t1_ns; /* throughput: from start to the last pop */
    uint64_t received;
    uint64_t lost;       /* indices skipped over, or never seen */
    uint64_t duplicated; /* indices that went backwards */
    uint64_t bad;        /* -EBADMSG, or garbage that is no handle of ours */
    uint64_t polls;      /* pops that found the ring empty */
    uint64_t switches;   /* voluntary context switches while timed */
};

/* The start of the mapping. Each part that one side writes while the
 * other polls has its own cache line, so the bench measures the ring and
 * not false sharing of its own bookkeeping. */
struct shared {
    _Alignas(RF__CACHELINE) _Atomic uint32_t arrived; /* start barrier */
    _Alignas(RF__CACHELINE) _Atomic uint32_t pushed_all;
    _Alignas(RF__CACHELINE) struct report report;
    /* bell[s]: where side s sleeps; rf__bell is cache-line aligned. */
    struct rf__bell bell[2];
};

struct channel {
    void *base;
    size_t bytes;
    struct shared *sh;
    struct rf__ring *ring[2]; /* [enum direction] */
    uint32_t entries;
    /* pingpong-pipe only: [enum direction][0 read end, 1 write end]; -1
     * when not open. */
    int pipe_fd[2][2];
};

int bc_channel_map(struct channel *ch, uint32_t entries);
/* Every run starts from empty rings, idle bells and a blank report. */
void bc_channel_reset(struct channel *ch);

/* Both sides arrive before either starts; the parent gives up (-1) if the
 * child died. */
int bc_barrier(struct shared *sh);

/* Spins one step, or yields when both sides share one CPU. Inline, as it
 * was when this was one file: it sits in every polling loop. */
static inline void bc_spin_pause(void)
{
    if (bc_yield)
        sched_yield();
    else
        rf__cpu_relax();
}

/* Pipes for pingpong-pipe: fresh ones per run; after fork() each side
 * keeps only the ends it uses. */
int bc_pipes_open(struct channel *ch);
void bc_pipes_close(struct channel *ch);
void bc_pipes_keep(struct channel *ch, enum side s);

/* One handle over direction d by the mode's transport: 0 or -1 (give up). */
int bc_send_handle(struct channel *ch, enum direction d, uint64_t h,
                   enum mode m);

/* Waits for one handle on direction d. Returns 1, -EBADMSG, or -EINTR when
 * told to stop. `expect` is the handle due next, which only a pipe,
 * carrying one byte of it, needs. */
int bc_receive_handle(struct channel *ch, enum direction d, enum mode m,
                      uint64_t expect, uint64_t *h);

/* Handles carry an index under a key, so zeroed or stale memory never
 * reads as the handle we expect next. */
#define BC_HANDLE_KEY UINT64_C(0x5eedf00d00000000)

static inline uint64_t bc_handle_of(uint64_t index)
{
    return index ^ BC_HANDLE_KEY;
}

static inline uint64_t bc_index_of(uint64_t handle)
{
    return handle ^ BC_HANDLE_KEY;
}

/* The answer to a ping differs from the ping, so an echo of the wrong
 * ring's contents is caught. */
static inline uint64_t bc_reply_of(uint64_t handle)
{
    return ~handle;
}

/* ---- each side's loop (bench-channel-sides.c) --------------------------- */

/* Round trips are timed two ways, in alternating blocks: "each" blocks
 * read the clock after every trip (the distribution, p99 included, plus
 * one clock read per sample); "block" blocks read it only at both ends
 * (the mean per trip, free of clock cost). One untimed block warms up. */
struct samples {
    uint64_t *each, *block;
    size_t n_each, n_block;
};

/* Throughput, in the child: pops and checks every handle. */
void bc_pop_all(struct channel *ch, const struct opts *o);
/* Throughput, in the parent: pushes count handles; counts full-ring
 * retries in *retries. 0, or -1 when it gave up. */
int bc_push_all(struct channel *ch, const struct opts *o, uint64_t *retries);
/* Ping-pong, in the child: answers and checks every ping. */
void bc_pong_all(struct channel *ch, const struct opts *o);
/* Ping-pong, in the parent: times every round trip into *s; counts wrong
 * answers in *bad. 0, or -1 when it gave up. */
int bc_ping_all(struct channel *ch, const struct opts *o, struct samples *s,
                uint64_t *bad, uint64_t *switches);

/* Handles lost, duplicated or bad, as the child reported them. */
uint64_t bc_report_errors(const struct report *rep);

/* ---- one run (bench-channel-run.c) -------------------------------------- */

struct throughput_run {
    uint64_t per_s;
    double seconds;
    double push_retries, empty_polls; /* per handle */
    uint64_t errors;
};

struct pingpong_run {
    uint64_t median_ns, p99_ns, max_ns;     /* per-trip samples */
    uint64_t block_median_ns, block_p99_ns; /* block means */
    double parent_sleeps, child_sleeps;     /* switches per round trip */
    uint64_t errors;
};

/* Each runs one fresh child and fills *out. 0, or -1 when the run failed
 * (after saying why). */
int bc_throughput_run(struct channel *ch, const struct opts *o,
                      const struct cpus *c, struct throughput_run *out);
int bc_pingpong_run(struct channel *ch, const struct opts *o,
                    const struct cpus *c, struct pingpong_run *out);

/* ---- repeated runs and the report (bench-channel-report.c) -------------- */

/* Nearest-rank percentile (p in 0..1) of v[n]; sorts v. 0 when n == 0. */
uint64_t bc_percentile(uint64_t *v, size_t n, double p);

void bc_print_header(const struct opts *o, const struct cpus *c,
                     uint64_t clock_ns);

/* o->repeat runs, each reported, then their medians (and --json's line).
 * Return the exit status: 0, 1 when a handle went wrong or a run failed,
 * 2 when out of memory. */
int bc_bench_throughput(struct channel *ch, const struct opts *o,
                        const struct cpus *c, uint64_t clock_ns);
int bc_bench_pingpong(struct channel *ch, const struct opts *o,
                      const struct cpus *c, uint64_t clock_ns);

#endif
