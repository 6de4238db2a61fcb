/*
 * bench-channel.c - how fast is the channel itself? Two processes share one
 * anonymous MAP_SHARED mapping that holds two rf__rings and two rf__bells;
 * this program measures one-way throughput and round-trip latency between
 * them, with the receiver either spinning or sleeping in the kernel. For
 * scale it also times the same round trip over a pair of pipes: the
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
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "channel/atomics.h"
#include "channel/ring.h"
#include "common/internal.h"

/* ---- options ------------------------------------------------------------ */

/* MODE_PIPE is no ring at all: one byte each way through two pipes, with
 * blocking reads, as the yardstick for MODE_SLEEP. */
enum mode { MODE_THROUGHPUT, MODE_SPIN, MODE_SLEEP, MODE_PIPE };

static const char *const mode_names[] = {"throughput", "pingpong-spin",
                                         "pingpong-sleep", "pingpong-pipe"};

/* Defaults per mode: sleeping round trips cost microseconds, so fewer. */
static const uint64_t default_count[] = {20000000, 1000000, 100000, 100000};

/* The modes in which the receiver sleeps in the kernel until woken. */
static bool mode_sleeps(enum mode m)
{
    return m == MODE_SLEEP || m == MODE_PIPE;
}

struct opts {
    enum mode mode;
    uint64_t count;   /* handles (throughput) or round trips (ping-pong) */
    uint64_t repeat;  /* runs, each with a fresh pair of processes */
    uint64_t entries; /* per ring, a power of two */
    uint64_t block;   /* round trips per timed block */
    uint64_t timeout; /* seconds one run may take before we call it hung */
    bool json;
};

static void usage(FILE *f)
{
    fputs("usage: bench-channel [options]\n"
          "Measures the rf__ring channel between two processes sharing "
          "memory.\n"
          "  --mode M      throughput | pingpong-spin | pingpong-sleep |\n"
          "                pingpong-pipe (default throughput); pingpong-pipe "
          "is\n"
          "                the same round trip with one byte over two pipes "
          "and\n"
          "                blocking reads instead of the rings: the OS floor\n"
          "                for a receiver that sleeps\n"
          "  --count N     handles one way (default 20000000), or round "
          "trips\n"
          "                (spin: 1000000, sleep and pipe: 100000)\n"
          "  --repeat R    runs, median reported (default 5)\n"
          "  --entries E   ring entries, a power of two (default 1024; "
          "unused\n"
          "                by pingpong-pipe)\n"
          "  --block B     round trips per timed block (default 1000)\n"
          "  --timeout S   seconds before a run counts as hung (default "
          "300)\n"
          "  --json        also print one JSON object as the last line\n"
          "  --help        this text\n"
          "Exits 1 if any handle was lost, duplicated or out of order.\n",
          f);
}

/* Decimal only, no sign, no trailing junk: a typo must not become 0. */
static int parse_u64(const char *s, uint64_t *v)
{
    char *end;
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *v = x;
    return 0;
}

static int parse_mode(const char *s, enum mode *m)
{
    for (size_t i = 0; i < sizeof(mode_names) / sizeof(mode_names[0]); i++) {
        if (strcmp(s, mode_names[i]) == 0) {
            *m = (enum mode)i;
            return 0;
        }
    }
    return -1;
}

/* Returns the value of option `name` given as "name V" or "name=V", NULL
 * when argv[*i] is another option; *missing is set when V is absent. */
static const char *option_value(int argc, char **argv, int *i, const char *name,
                                bool *missing)
{
    const char *arg = argv[*i];
    if (!arg)
        return NULL;
    size_t len = strlen(name);
    if (strncmp(arg, name, len) != 0)
        return NULL;
    if (arg[len] == '=')
        return arg + len + 1;
    if (arg[len] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

/* The numeric options, so parse_args() can walk them in one loop. */
static uint64_t *numeric_option(struct opts *o, const char *name)
{
    if (strcmp(name, "--count") == 0)
        return &o->count;
    if (strcmp(name, "--repeat") == 0)
        return &o->repeat;
    if (strcmp(name, "--entries") == 0)
        return &o->entries;
    if (strcmp(name, "--block") == 0)
        return &o->block;
    return &o->timeout;
}

static int parse_one(int argc, char **argv, int *i, struct opts *o)
{
    static const char *const numeric[] = {"--count", "--repeat", "--entries",
                                          "--block", "--timeout"};
    bool missing = false;
    const char *v = option_value(argc, argv, i, "--mode", &missing);
    if (v)
        return parse_mode(v, &o->mode);
    for (size_t k = 0; k < sizeof(numeric) / sizeof(numeric[0]); k++) {
        v = option_value(argc, argv, i, numeric[k], &missing);
        if (v)
            return parse_u64(v, numeric_option(o, numeric[k]));
    }
    if (strcmp(argv[*i], "--json") == 0) {
        o->json = true;
        return 0;
    }
    return -1;
}

static bool power_of_two(uint64_t x)
{
    return x >= 2 && (x & (x - 1)) == 0;
}

/* Returns 0, 1 for --help, or -1 after saying what is wrong. */
static int parse_args(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){
        .repeat = 5, .entries = 1024, .block = 1000, .timeout = 300};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0)
            return 1;
        if (parse_one(argc, argv, &i, o) != 0) {
            fprintf(stderr, "bench-channel: bad option or value near '%s'\n",
                    argv[i]);
            return -1;
        }
    }
    if (o->count == 0)
        o->count = default_count[o->mode];
    if (o->count > (UINT64_C(1) << 40) || o->block > (UINT64_C(1) << 32)) {
        fputs("bench-channel: --count is at most 2^40, --block 2^32\n", stderr);
        return -1;
    }
    if (o->repeat == 0 || o->block == 0 || o->timeout == 0 ||
        o->timeout > 100000 || !power_of_two(o->entries) ||
        o->entries > (UINT64_C(1) << 24)) {
        fputs("bench-channel: --repeat, --block and --timeout must be > 0, "
              "--entries a power of two in 2..2^24\n",
              stderr);
        return -1;
    }
    return 0;
}

/* ---- small helpers ---------------------------------------------------- */

/* Set by the parent's SIGCHLD and SIGALRM handlers: the signal number that
 * says "stop waiting for the other side", 0 while all is well. */
static volatile sig_atomic_t g_stop;

/* With a single CPU the other side cannot run while we spin; yielding lets
 * it, at the cost of making the figures meaningless (we say so). */
static bool g_yield;

static void on_signal(int sig)
{
    g_stop = sig;
}

static void spin_pause(void)
{
    if (g_yield)
        sched_yield();
    else
        rf__cpu_relax();
}

/* Handles carry an index under a key, so zeroed or stale memory never
 * reads as the handle we expect next. */
#define HANDLE_KEY UINT64_C(0x5eedf00d00000000)

static uint64_t handle_of(uint64_t index)
{
    return index ^ HANDLE_KEY;
}

static uint64_t index_of(uint64_t handle)
{
    return handle ^ HANDLE_KEY;
}

/* The answer to a ping differs from the ping, so an echo of the wrong
 * ring's contents is caught. */
static uint64_t reply_of(uint64_t handle)
{
    return ~handle;
}

static int cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile (p in 0..1) of v[n]; sorts v. 0 when n == 0. */
static uint64_t percentile(uint64_t *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof(*v), cmp_u64);
    size_t rank = (size_t)(p * (double)n + 0.999999);
    return v[rank == 0 ? 0 : rank - 1];
}

static uint64_t voluntary_switches(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (uint64_t)ru.ru_nvcsw;
}

static int pin_to(int cpu)
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

/* ---- the shared mapping ----------------------------------------------- */

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

_Static_assert(_Alignof(struct rf__bell) == RF__CACHELINE,
               "a bell must own its cache line");

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

static size_t round_up(size_t x, size_t to)
{
    return (x + to - 1) / to * to;
}

/* MAP_SHARED|MAP_ANONYMOUS survives fork() as the same pages, which is all
 * two related processes need (the library uses memfds so that unrelated
 * ones can attach; the cache traffic is the same). */
static int channel_map(struct channel *ch, uint32_t entries)
{
    const size_t head = round_up(sizeof(struct shared), RF__CACHELINE);
    const size_t ring = round_up(rf__ring_bytes(entries), RF__CACHELINE);
    ch->bytes = head + 2 * ring;
    ch->base = mmap(NULL, ch->bytes, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ch->base == MAP_FAILED) {
        perror("bench-channel: mmap");
        return -1;
    }
    ch->sh = ch->base;
    ch->ring[TO_CHILD] = (struct rf__ring *)((char *)ch->base + head);
    ch->ring[TO_PARENT] = (struct rf__ring *)((char *)ch->base + head + ring);
    ch->entries = entries;
    for (int d = 0; d < 2; d++)
        ch->pipe_fd[d][0] = ch->pipe_fd[d][1] = -1;
    return 0;
}

/* Every run starts from empty rings, idle bells and a blank report. */
static void channel_reset(struct channel *ch)
{
    memset(ch->sh, 0, sizeof(*ch->sh));
    rf__ring_init(ch->ring[TO_CHILD], ch->entries);
    rf__ring_init(ch->ring[TO_PARENT], ch->entries);
}

/* Both sides arrive before either starts, so neither times the other's
 * fork() or page faults. The parent gives up if the child died. */
static int barrier(struct shared *sh)
{
    atomic_fetch_add_explicit(&sh->arrived, 1, memory_order_acq_rel);
    while (atomic_load_explicit(&sh->arrived, memory_order_acquire) < 2) {
        if (g_stop)
            return -1;
        spin_pause();
    }
    return 0;
}

/* ---- sending and receiving one handle -------------------------------- */

static int push_one(struct rf__ring *r, uint64_t h)
{
    while (rf__ring_push(r, r->entries, h) != 0) {
        if (g_stop)
            return -1;
        spin_pause();
    }
    return 0;
}

static int send_one(struct channel *ch, enum direction d, uint64_t h,
                    bool sleep)
{
    if (push_one(ch->ring[d], h) != 0)
        return -1;
    /* The receiver of direction d is the other side: ring its bell. */
    if (sleep)
        rf__bell_ring_futex(&ch->sh->bell[d == TO_CHILD ? CHILD : PARENT]);
    return 0;
}

/* Waits for one handle on direction d. Returns 1, -EBADMSG, or -EINTR
 * when told to stop. A 0 from rf__ring_wait_futex() (a wake-up with
 * nothing to pop) or -EINTR (our own signals) just means "look again". */
static int receive_one(struct channel *ch, enum direction d, bool sleep,
                       uint64_t *h)
{
    struct rf__ring *r = ch->ring[d];
    struct rf__bell *b = &ch->sh->bell[d == TO_CHILD ? CHILD : PARENT];
    for (;;) {
        int rc = rf__ring_pop(r, r->entries, h);
        if (rc != 0)
            return rc;
        if (g_stop) {
            /* The child may have pushed its last reply and exited just
             * after our pop: that SIGCHLD is no failure. */
            rc = rf__ring_pop(r, r->entries, h);
            return rc != 0 ? rc : -EINTR;
        }
        if (sleep)
            (void)rf__ring_wait_futex(r, b, 0, -1);
        else
            spin_pause();
    }
}

/* ---- the same over pipes (pingpong-pipe) ------------------------------ */

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static void pipes_close(struct channel *ch)
{
    for (int d = 0; d < 2; d++) {
        close_fd(&ch->pipe_fd[d][0]);
        close_fd(&ch->pipe_fd[d][1]);
    }
}

/* Fresh pipes for every run, so no byte of a failed run is left in them. */
static int pipes_open(struct channel *ch)
{
    for (int d = 0; d < 2; d++) {
        if (pipe(ch->pipe_fd[d]) != 0) {
            perror("bench-channel: pipe");
            pipes_close(ch);
            return -1;
        }
    }
    return 0;
}

/* Side s keeps only the read end it receives on and the write end it sends
 * on, so that when the other side dies its reads see EOF instead of
 * blocking for ever. */
static void pipes_keep(struct channel *ch, enum side s)
{
    const enum direction in = s == CHILD ? TO_CHILD : TO_PARENT;
    const enum direction out = s == CHILD ? TO_PARENT : TO_CHILD;
    close_fd(&ch->pipe_fd[in][1]);
    close_fd(&ch->pipe_fd[out][0]);
}

/* EINTR is one of our own signals: go on, unless the run timed out. After
 * SIGCHLD going on cannot hang, as a dead writer's pipe reads as EOF. */
static bool pipe_retry(ssize_t n)
{
    return n < 0 && errno == EINTR && g_stop != SIGALRM;
}

/* A pipe carries only the low byte of h: consecutive handles still differ
 * in it, and so does a reply from its ping. */
static int pipe_send(struct channel *ch, enum direction d, uint64_t h)
{
    const unsigned char b = (unsigned char)h;
    ssize_t n;
    while ((n = write(ch->pipe_fd[d][1], &b, 1)) != 1) {
        if (!pipe_retry(n))
            return -1;
    }
    return 0;
}

/* Sleeps in read() until a byte comes, and widens it back to `expect`, the
 * handle due next, when it is that handle's low byte; any other byte reads
 * as 0, which is no handle of ours. Returns 1, or -EINTR when the run timed
 * out or the writer is gone. */
static int pipe_receive(struct channel *ch, enum direction d, uint64_t expect,
                        uint64_t *h)
{
    unsigned char b;
    ssize_t n;
    while ((n = read(ch->pipe_fd[d][0], &b, 1)) != 1) {
        if (!pipe_retry(n))
            return -EINTR;
    }
    *h = b == (unsigned char)expect ? expect : 0;
    return 1;
}

/* One handle over direction d by the mode's transport. */
static int send_handle(struct channel *ch, enum direction d, uint64_t h,
                       enum mode m)
{
    if (m == MODE_PIPE)
        return pipe_send(ch, d, h);
    return send_one(ch, d, h, m == MODE_SLEEP);
}

/* As receive_one(); `expect` is the handle due next, which only a pipe,
 * carrying one byte of it, needs. */
static int receive_handle(struct channel *ch, enum direction d, enum mode m,
                          uint64_t expect, uint64_t *h)
{
    if (m == MODE_PIPE)
        return pipe_receive(ch, d, expect, h);
    return receive_one(ch, d, m == MODE_SLEEP, h);
}

/* ---- checking the order ----------------------------------------------- */

struct checker {
    uint64_t count; /* indices 0..count-1 are expected, in order */
    uint64_t next;
    uint64_t received, lost, duplicated, bad;
};

static void check_handle(struct checker *ck, uint64_t h)
{
    const uint64_t i = index_of(h);
    ck->received++;
    if (i == ck->next) {
        ck->next++;
    } else if (i >= ck->count) {
        ck->bad++;
    } else if (i > ck->next) {
        ck->lost += i - ck->next;
        ck->next = i + 1;
    } else {
        ck->duplicated++;
    }
}

/* Whatever never came counts as lost. */
static void checker_finish(struct checker *ck, struct report *rep)
{
    rep->received = ck->received;
    rep->lost = ck->lost + (ck->count - ck->next);
    rep->duplicated = ck->duplicated;
    rep->bad = ck->bad;
}

static uint64_t report_errors(const struct report *rep)
{
    return rep->lost + rep->duplicated + rep->bad;
}

/* ---- throughput ------------------------------------------------------- */

struct throughput_run {
    uint64_t per_s;
    double seconds;
    double push_retries, empty_polls; /* per handle */
    uint64_t errors;
};

/* Child: pops until all arrived or the parent is done and the ring is
 * empty (so a lost handle shows up as an error, not as a hang). */
static void pop_all(struct channel *ch, const struct opts *o)
{
    struct rf__ring *r = ch->ring[TO_CHILD];
    struct report *rep = &ch->sh->report;
    struct checker ck = {.count = o->count};
    uint64_t polls = 0, h;
    barrier(ch->sh);
    rep->t0_ns = rf__now_ns();
    while (ck.received < o->count) {
        int rc = rf__ring_pop(r, r->entries, &h);
        if (rc == 1) {
            check_handle(&ck, h);
            continue;
        }
        if (rc < 0) {
            ck.bad++;
            break;
        }
        /* Pairs with the store_release after the parent's last push. */
        if (rf__load_acquire32(&ch->sh->pushed_all) && rf__ring_empty(r))
            break;
        polls++;
        spin_pause();
    }
    rep->t1_ns = rf__now_ns();
    rep->polls = polls;
    checker_finish(&ck, rep);
}

/* Parent: pushes count handles as fast as the ring takes them. */
static int push_all(struct channel *ch, const struct opts *o, uint64_t *retries)
{
    struct rf__ring *r = ch->ring[TO_CHILD];
    uint64_t waits = 0;
    if (barrier(ch->sh) != 0)
        return -1;
    for (uint64_t i = 0; i < o->count; i++) {
        while (rf__ring_push(r, r->entries, handle_of(i)) != 0) {
            if (g_stop)
                return -1;
            waits++;
            spin_pause();
        }
    }
    /* Pairs with the load_acquire in pop_all(). */
    rf__store_release32(&ch->sh->pushed_all, 1);
    *retries = waits;
    return 0;
}

/* ---- ping-pong -------------------------------------------------------- */

/* Round trips are timed two ways, in alternating blocks: "each" blocks
 * read the clock after every trip (the distribution, p99 included, plus
 * one clock read per sample); "block" blocks read it only at both ends
 * (the mean per trip, free of clock cost). One untimed block warms up. */
struct samples {
    uint64_t *each, *block;
    size_t n_each, n_block;
};

struct pingpong_run {
    uint64_t median_ns, p99_ns, max_ns;     /* per-trip samples */
    uint64_t block_median_ns, block_p99_ns; /* block means */
    double parent_sleeps, child_sleeps;     /* switches per round trip */
    uint64_t errors;
};

static uint64_t warmup_trips(const struct opts *o)
{
    return o->block;
}

/* Child: answers every ping, checking it is the next one. */
static void pong_all(struct channel *ch, const struct opts *o)
{
    const uint64_t total = warmup_trips(o) + o->count;
    struct report *rep = &ch->sh->report;
    struct checker ck = {.count = total};
    uint64_t h;
    barrier(ch->sh);
    const uint64_t sw0 = voluntary_switches();
    while (ck.received < total) {
        const uint64_t due = handle_of(ck.next);
        if (receive_handle(ch, TO_CHILD, o->mode, due, &h) != 1) {
            ck.bad++;
            break;
        }
        check_handle(&ck, h);
        send_handle(ch, TO_PARENT, reply_of(h), o->mode);
    }
    rep->switches = voluntary_switches() - sw0;
    checker_finish(&ck, rep);
}

/* Parent: one ping and its answer. Returns 0, 1 for a wrong answer, or -1
 * when it must give up. */
static int round_trip(struct channel *ch, uint64_t i, enum mode m)
{
    const uint64_t reply = reply_of(handle_of(i));
    uint64_t h;
    if (send_handle(ch, TO_CHILD, handle_of(i), m) != 0)
        return -1;
    int rc = receive_handle(ch, TO_PARENT, m, reply, &h);
    if (rc == -EINTR)
        return -1;
    return rc == 1 && h == reply ? 0 : 1;
}

/* Runs trips [*i, *i + n); counts wrong answers in *bad. */
static int trips(struct channel *ch, uint64_t *i, uint64_t n, enum mode m,
                 uint64_t *bad)
{
    for (uint64_t end = *i + n; *i < end; ++*i) {
        int rc = round_trip(ch, *i, m);
        if (rc < 0)
            return -1;
        *bad += (uint64_t)rc;
    }
    return 0;
}

static int timed_each(struct channel *ch, uint64_t *i, uint64_t n, enum mode m,
                      struct samples *s, uint64_t *bad)
{
    uint64_t t = rf__now_ns();
    for (uint64_t k = 0; k < n; k++) {
        if (trips(ch, i, 1, m, bad) != 0)
            return -1;
        const uint64_t now = rf__now_ns();
        s->each[s->n_each++] = now - t;
        t = now;
    }
    return 0;
}

static int timed_block(struct channel *ch, uint64_t *i, uint64_t n, enum mode m,
                       struct samples *s, uint64_t *bad)
{
    const uint64_t t0 = rf__now_ns();
    if (trips(ch, i, n, m, bad) != 0)
        return -1;
    s->block[s->n_block++] = (rf__now_ns() - t0 + n / 2) / n;
    return 0;
}

/* Parent: warm-up, then alternating blocks, the first one timed "each" so
 * that even a short run yields a distribution. */
static int ping_all(struct channel *ch, const struct opts *o, struct samples *s,
                    uint64_t *bad, uint64_t *switches)
{
    const enum mode m = o->mode;
    const uint64_t total = warmup_trips(o) + o->count;
    uint64_t i = 0;
    if (barrier(ch->sh) != 0 || trips(ch, &i, warmup_trips(o), m, bad))
        return -1;
    const uint64_t sw0 = voluntary_switches();
    for (uint64_t b = 0; i < total; b++) {
        const uint64_t n = total - i < o->block ? total - i : o->block;
        int rc = b % 2 == 0 ? timed_each(ch, &i, n, m, s, bad)
                            : timed_block(ch, &i, n, m, s, bad);
        if (rc != 0)
            return -1;
    }
    *switches = voluntary_switches() - sw0;
    return 0;
}

/* ---- one run: fork, play both sides, collect --------------------------- */

struct cpus {
    int parent, child; /* -1: not pinned */
    int available;
};

static void child_main(struct channel *ch, const struct opts *o,
                       const struct cpus *c, pid_t parent)
{
    /* Never outlive a parent that crashed or was killed mid-run. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(3);
    if (c->child >= 0 && pin_to(c->child) != 0)
        perror("bench-channel: sched_setaffinity (child)");
    pipes_keep(ch, CHILD);
    if (o->mode == MODE_THROUGHPUT)
        pop_all(ch, o);
    else
        pong_all(ch, o);
    _exit(0);
}

/* Reaps the child; kills it first when the parent gave up on it. Returns
 * 0 when it ran to the end. */
static int reap(pid_t pid, bool gave_up)
{
    int status;
    if (gave_up)
        kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            perror("bench-channel: waitpid");
            return -1;
        }
    }
    if (gave_up)
        return -1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench-channel: child ended with status 0x%x\n",
                (unsigned)status);
        return -1;
    }
    return 0;
}

static void explain_stop(void)
{
    if (g_stop == SIGALRM)
        fputs("bench-channel: run timed out: the other side never "
              "answered (a lost wake-up or a lost handle?)\n",
              stderr);
    else if (g_stop == SIGCHLD)
        fputs("bench-channel: the child died mid-run\n", stderr);
}

/* Runs the parent's part against a fresh child. role() returns 0 or -1
 * (gave up). Returns 0 when both sides finished. */
static int run_once(struct channel *ch, const struct opts *o,
                    const struct cpus *c,
                    int (*role)(struct channel *, const struct opts *, void *),
                    void *arg)
{
    channel_reset(ch);
    if (o->mode == MODE_PIPE && pipes_open(ch) != 0)
        return -1;
    g_stop = 0;
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
        perror("bench-channel: fork");
        pipes_close(ch);
        return -1;
    }
    if (pid == 0)
        child_main(ch, o, c, parent);
    pipes_keep(ch, PARENT);
    alarm((unsigned)o->timeout);
    const int rc = role(ch, o, arg);
    alarm(0);
    if (rc != 0)
        explain_stop();
    const int reaped = reap(pid, rc != 0);
    pipes_close(ch);
    return reaped;
}

static int throughput_role(struct channel *ch, const struct opts *o, void *arg)
{
    uint64_t *retries = arg;
    return push_all(ch, o, retries);
}

struct ping_arg {
    struct samples s;
    uint64_t bad, switches;
};

static int pingpong_role(struct channel *ch, const struct opts *o, void *arg)
{
    struct ping_arg *a = arg;
    return ping_all(ch, o, &a->s, &a->bad, &a->switches);
}

static int throughput_run(struct channel *ch, const struct opts *o,
                          const struct cpus *c, struct throughput_run *out)
{
    uint64_t retries = 0;
    if (run_once(ch, o, c, throughput_role, &retries) != 0)
        return -1;
    const struct report *rep = &ch->sh->report;
    const uint64_t ns = rep->t1_ns - rep->t0_ns;
    out->seconds = (double)ns / 1e9;
    out->per_s = ns ? (uint64_t)((double)o->count / out->seconds) : 0;
    out->push_retries = (double)retries / (double)o->count;
    out->empty_polls = (double)rep->polls / (double)o->count;
    out->errors = report_errors(rep);
    return 0;
}

static int pingpong_run(struct channel *ch, const struct opts *o,
                        const struct cpus *c, struct pingpong_run *out)
{
    struct ping_arg a = {0};
    a.s.each = calloc(o->count, sizeof(uint64_t));
    a.s.block = calloc(o->count / o->block + 1, sizeof(uint64_t));
    int rc = -1;
    if (!a.s.each || !a.s.block)
        perror("bench-channel: calloc");
    else if (run_once(ch, o, c, pingpong_role, &a) == 0)
        rc = 0;
    if (rc == 0) {
        const struct report *rep = &ch->sh->report;
        const double n = (double)o->count;
        out->median_ns = percentile(a.s.each, a.s.n_each, 0.5);
        out->p99_ns = percentile(a.s.each, a.s.n_each, 0.99);
        out->max_ns = percentile(a.s.each, a.s.n_each, 1.0);
        out->block_median_ns = percentile(a.s.block, a.s.n_block, 0.5);
        out->block_p99_ns = percentile(a.s.block, a.s.n_block, 0.99);
        out->parent_sleeps = (double)a.switches / n;
        out->child_sleeps = (double)rep->switches / n;
        out->errors = report_errors(rep) + a.bad;
    }
    free(a.s.each);
    free(a.s.block);
    return rc;
}

/* ---- reporting -------------------------------------------------------- */

/* Medians across runs, one figure at a time. */
static uint64_t median_of(const uint64_t *v, size_t n)
{
    uint64_t *copy = malloc(n * sizeof(*copy));
    if (!copy)
        return 0;
    memcpy(copy, v, n * sizeof(*copy));
    const uint64_t m = percentile(copy, n, 0.5);
    free(copy);
    return m;
}

static void print_header(const struct opts *o, const struct cpus *c,
                         uint64_t clock_ns)
{
    printf("bench-channel: %s, %" PRIu64 " %s x %" PRIu64 " runs, ",
           mode_names[o->mode], o->count,
           o->mode == MODE_THROUGHPUT ? "handles" : "round trips", o->repeat);
    if (o->mode == MODE_PIPE)
        printf("one byte each way over a pair of pipes\n");
    else
        printf("rings of %" PRIu64 " entries\n", o->entries);
    if (c->parent >= 0)
        printf("cpus: parent pinned to CPU %d, child to CPU %d (%d "
               "available)\n",
               c->parent, c->child, c->available);
    else
        printf("cpus: not pinned: only %d CPU available, so the sides take "
               "turns and the figures mean little\n",
               c->available);
    printf("clock: clock_gettime(CLOCK_MONOTONIC), %" PRIu64 " ns per read\n",
           clock_ns);
}

static void json_common(const struct opts *o, const struct cpus *c,
                        uint64_t clock_ns)
{
    printf("{\"mode\":\"%s\",\"count\":%" PRIu64 ",\"repeat\":%" PRIu64
           ",\"entries\":%" PRIu64 ",\"cpus\":[%d,%d],\"cpus_available\":%d,"
           "\"clock_read_ns\":%" PRIu64,
           mode_names[o->mode], o->count, o->repeat, o->entries, c->parent,
           c->child, c->available, clock_ns);
}

static int bench_throughput(struct channel *ch, const struct opts *o,
                            const struct cpus *c, uint64_t clock_ns)
{
    uint64_t *rates = calloc(o->repeat, sizeof(*rates));
    uint64_t errors = 0;
    int rc = 0;
    if (!rates) {
        perror("bench-channel: calloc");
        rc = 2;
    }
    for (uint64_t r = 0; rc == 0 && r < o->repeat; r++) {
        struct throughput_run run, *t = &run;
        if (throughput_run(ch, o, c, t) != 0) {
            rc = 1;
            break;
        }
        rates[r] = t->per_s;
        errors += t->errors;
        printf("  run %" PRIu64 ": %.1f M handles/s (%.3f s; push retries "
               "%.2f, empty polls %.2f per handle; %" PRIu64 " errors)\n",
               r + 1, (double)t->per_s / 1e6, t->seconds, t->push_retries,
               t->empty_polls, t->errors);
        fflush(stdout);
    }
    if (rc == 0) {
        const uint64_t med = median_of(rates, o->repeat);
        printf("throughput: %.1f M handles/s (median of %" PRIu64 ")\n",
               (double)med / 1e6, o->repeat);
        if (o->json) {
            json_common(o, c, clock_ns);
            printf(",\"runs_handles_per_s\":[");
            for (uint64_t r = 0; r < o->repeat; r++)
                printf("%s%" PRIu64, r ? "," : "", rates[r]);
            printf("],\"handles_per_s\":%" PRIu64 ",\"errors\":%" PRIu64 "}\n",
                   med, errors);
        }
        rc = errors ? 1 : 0;
    }
    free(rates);
    return rc;
}

/* The across-run medians of each pingpong figure. */
struct pingpong_summary {
    uint64_t median_ns, p99_ns, block_median_ns, block_p99_ns;
    uint64_t max_ns; /* the worst trip of all runs: preemption shows here */
    double parent_sleeps, child_sleeps;
    uint64_t errors;
};

/* Field f (in the order of struct pingpong_summary) of one run. */
static uint64_t run_figure(const struct pingpong_run *p, int f)
{
    switch (f) {
    case 0:
        return p->median_ns;
    case 1:
        return p->p99_ns;
    case 2:
        return p->block_median_ns;
    default:
        return p->block_p99_ns;
    }
}

static void summarise(const struct pingpong_run *runs, uint64_t n,
                      struct pingpong_summary *s)
{
    uint64_t *dst[] = {&s->median_ns, &s->p99_ns, &s->block_median_ns,
                       &s->block_p99_ns};
    uint64_t *v = calloc(n, sizeof(*v));
    for (int f = 0; v && f < 4; f++) {
        for (uint64_t r = 0; r < n; r++)
            v[r] = run_figure(&runs[r], f);
        *dst[f] = percentile(v, n, 0.5);
    }
    free(v);
    for (uint64_t r = 0; r < n; r++) {
        s->parent_sleeps += runs[r].parent_sleeps / (double)n;
        s->child_sleeps += runs[r].child_sleeps / (double)n;
        s->errors += runs[r].errors;
        if (runs[r].max_ns > s->max_ns)
            s->max_ns = runs[r].max_ns;
    }
}

static void print_pingpong_run(const struct opts *o, uint64_t r,
                               const struct pingpong_run *p)
{
    printf("  run %" PRIu64 ": median %" PRIu64 " ns, p99 %" PRIu64
           " ns, max %" PRIu64 " ns; blocks of %" PRIu64 ": median %" PRIu64
           " ns, p99 %" PRIu64 " ns",
           r + 1, p->median_ns, p->p99_ns, p->max_ns, o->block,
           p->block_median_ns, p->block_p99_ns);
    if (mode_sleeps(o->mode))
        printf("; sleeps per trip: parent %.2f, child %.2f", p->parent_sleeps,
               p->child_sleeps);
    printf("; %" PRIu64 " errors\n", p->errors);
    fflush(stdout);
}

static void print_pingpong_summary(const struct opts *o, const struct cpus *c,
                                   uint64_t clock_ns,
                                   const struct pingpong_summary *s)
{
    printf("%s: round trip median %" PRIu64 " ns, p99 %" PRIu64
           " ns (each trip timed, median of %" PRIu64 " runs)\n",
           mode_names[o->mode], s->median_ns, s->p99_ns, o->repeat);
    printf("  block means (no clock read inside): median %" PRIu64
           " ns, p99 %" PRIu64 " ns; worst single trip %" PRIu64 " ns\n",
           s->block_median_ns, s->block_p99_ns, s->max_ns);
    if (mode_sleeps(o->mode))
        printf("  voluntary context switches per round trip: parent %.2f, "
               "child %.2f (about 1 each: both really sleep)\n",
               s->parent_sleeps, s->child_sleeps);
    if (!o->json)
        return;
    json_common(o, c, clock_ns);
    printf(",\"rtt_median_ns\":%" PRIu64 ",\"rtt_p99_ns\":%" PRIu64
           ",\"rtt_max_ns\":%" PRIu64 ",\"block_median_ns\":%" PRIu64
           ",\"block_p99_ns\":%" PRIu64
           ",\"parent_sleeps_per_trip\":%.3f,\"child_sleeps_per_trip\":%.3f"
           ",\"errors\":%" PRIu64 "}\n",
           s->median_ns, s->p99_ns, s->max_ns, s->block_median_ns,
           s->block_p99_ns, s->parent_sleeps, s->child_sleeps, s->errors);
}

static int bench_pingpong(struct channel *ch, const struct opts *o,
                          const struct cpus *c, uint64_t clock_ns)
{
    struct pingpong_run *runs = calloc(o->repeat, sizeof(*runs));
    struct pingpong_summary s = {0};
    if (!runs) {
        perror("bench-channel: calloc");
        return 2;
    }
    for (uint64_t r = 0; r < o->repeat; r++) {
        if (pingpong_run(ch, o, c, &runs[r]) != 0) {
            free(runs);
            return 1;
        }
        print_pingpong_run(o, r, &runs[r]);
    }
    summarise(runs, o->repeat, &s);
    print_pingpong_summary(o, c, clock_ns, &s);
    free(runs);
    return s.errors ? 1 : 0;
}

/* ---- main ------------------------------------------------------------- */

/* The parent learns of a dead child (SIGCHLD) or a hung run (SIGALRM)
 * through g_stop. No SA_RESTART: a futex wait or a pipe read must return
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
    g_yield = c->available < 2;
    if (c->available < 2)
        return;
    if (pin_to(list[0]) != 0) {
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
    int rc = parse_args(argc, argv, &o);
    if (rc > 0) {
        usage(stdout);
        return 0;
    }
    if (rc < 0) {
        fputs("bench-channel: try --help\n", stderr);
        return 2;
    }
    if (install_handlers() != 0 || channel_map(&ch, (uint32_t)o.entries))
        return 2;
    choose_cpus(&c);
    const uint64_t clock_ns = clock_cost_ns();
    print_header(&o, &c, clock_ns);
    fflush(stdout);
    if (o.mode == MODE_THROUGHPUT)
        rc = bench_throughput(&ch, &o, &c, clock_ns);
    else
        rc = bench_pingpong(&ch, &o, &c, clock_ns);
    munmap(ch.base, ch.bytes);
    fflush(stdout); /* the figures first, then the verdict */
    if (rc == 1)
        fputs("bench-channel: FAILED: handles lost, duplicated, out of "
              "order, or a side gave up\n",
              stderr);
    return rc;
}
