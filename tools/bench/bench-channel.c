/*
 * tools/bench/bench-channel.c - how fast is the channel itself? Two processes
 * share one anonymous MAP_SHARED mapping that holds two rf__rings and two
 * rf__bells; this program measures one-way throughput and round-trip latency
 * between them, with the receiver either spinning or sleeping in the kernel.
 * For scale it also times the same round trip over a pair of pipes: the
 * operating system's floor for a trip in which the receiver really sleeps.
 *
 *   bench-channel [--mode throughput|pingpong-spin|pingpong-sleep|
 *                         pingpong-pipe]
 *                 [--count N] [--repeat R] [--json] [--help] ...
 *
 * A benchmark, not a test: it prints figures and is never run by `make
 * check`. It still checks every handle and exits 1 if one was lost,
 * duplicated or reordered, because a fast wrong channel is worth nothing.
 *
 * Every time comes from rf__now_ns(), i.e. clock_gettime(CLOCK_MONOTONIC)
 * through the vDSO; no rdtsc. It is slower than rdtsc (we print what one
 * read costs) but needs no calibration, means the same on every machine,
 * and is one system-wide clock, so the two processes can compare stamps.
 *
 * The program is in files of one concern each; bench-channel.h lists
 * them. This one holds main(): the signals that end a wait, the choice of
 * CPUs, the cost of a clock read, and the benchmark the mode asks for.
 */
#include "config.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>

#include "bench-channel.h"
#include "common/internal.h"

/* What they mean: bench-channel.h. */
volatile sig_atomic_t bc_stop;
bool bc_yield;

static void on_signal(int sig)
{
    bc_stop = sig;
}

int bc_pin_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof(set), &set);
}

/* What one read of the clock costs: every per-trip sample includes one. */
static uint64_t clock_cost_ns(void)
{
    enum { READS = 10000 };
    uint64_t t0 = rf__now_ns(), t = t0;
    for (int i = 0; i < READS; i++)
        t = rf__now_ns();
    return (t - t0 + READS / 2) / READS;
}

/* The parent learns of a dead child (SIGCHLD) or a hung run (SIGALRM)
 * through bc_stop. No SA_RESTART: a futex wait or a pipe read must return
 * so the loop can look at the flag. SIGPIPE is ignored so that writing to
 * a dead side's pipe fails with EPIPE instead of killing us. */
static int install_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_NOCLDSTOP;
    if (sigaction(SIGCHLD, &sa, NULL) != 0 ||
        sigaction(SIGALRM, &sa, NULL) != 0 ||
        signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
        perror("bench-channel: sigaction");
        return -1;
    }
    return 0;
}

/* The first two CPUs we may run on, one per side, so the figures are
 * about cache-line transfers between cores and not about scheduling. */
static void choose_cpus(struct cpus *c)
{
    int list[2];
    c->available = rf__affinity_cpus(list, 2);
    c->parent = c->child = -1;
    bc_yield = c->available < 2;
    if (c->available < 2)
        return;
    if (bc_pin_to(list[0]) != 0) {
        perror("bench-channel: sched_setaffinity");
        return;
    }
    c->parent = list[0];
    c->child = list[1];
}

int main(int argc, char **argv)
{
    struct opts o;
    struct channel ch;
    struct cpus c;
    int rc = bc_parse_args(argc, argv, &o);
    if (rc > 0) {
        bc_usage(stdout);
        return 0;
    }
    if (rc < 0) {
        fputs("bench-channel: try --help\n", stderr);
        return 2;
    }
    if (install_handlers() != 0 || bc_channel_map(&ch, (uint32_t)o.entries))
        return 2;
    choose_cpus(&c);
    const uint64_t clock_ns = clock_cost_ns();
    bc_print_header(&o, &c, clock_ns);
    fflush(stdout);
    if (o.mode == MODE_THROUGHPUT)
        rc = bc_bench_throughput(&ch, &o, &c, clock_ns);
    else
        rc = bc_bench_pingpong(&ch, &o, &c, clock_ns);
    munmap(ch.base, ch.bytes);
    fflush(stdout); /* the figures first, then the verdict */
    if (rc == 1)
        fputs("bench-channel: FAILED: handles lost, duplicated, out of "
              "order, or a side gave up\n",
              stderr);
    return rc;
}
