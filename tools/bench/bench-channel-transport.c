/*
 * tools/bench/bench-channel-transport.c - how bench-channel moves a handle
 * between its two processes: the anonymous shared mapping that holds the
 * two rf__rings and the two rf__bells, the start barrier, one handle sent
 * and received over a ring (the receiver spinning, or sleeping on its
 * futex bell), and the same over a pair of pipes for pingpong-pipe. What
 * the handles mean and how they are timed is bench-channel-sides.c's.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench-channel.h"
#include "channel/atomics.h"
#include "channel/ring.h"

_Static_assert(_Alignof(struct rf__bell) == RF__CACHELINE,
               "a bell must own its cache line");

/* ---- the shared mapping ----------------------------------------------- */

static size_t round_up(size_t x, size_t to)
{
    return (x + to - 1) / to * to;
}

/* MAP_SHARED|MAP_ANONYMOUS survives fork() as the same pages, which is all
 * two related processes need (the library uses memfds so that unrelated
 * ones can attach; the cache traffic is the same). */
int bc_channel_map(struct channel *ch, uint32_t entries)
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
void bc_channel_reset(struct channel *ch)
{
    memset(ch->sh, 0, sizeof(*ch->sh));
    rf__ring_init(ch->ring[TO_CHILD], ch->entries);
    rf__ring_init(ch->ring[TO_PARENT], ch->entries);
}

/* Both sides arrive before either starts, so neither times the other's
 * fork() or page faults. The parent gives up if the child died. */
int bc_barrier(struct shared *sh)
{
    atomic_fetch_add_explicit(&sh->arrived, 1, memory_order_acq_rel);
    while (atomic_load_explicit(&sh->arrived, memory_order_acquire) < 2) {
        if (bc_stop)
            return -1;
        bc_spin_pause();
    }
    return 0;
}

/* ---- sending and receiving one handle -------------------------------- */

static int push_one(struct rf__ring *r, uint64_t h)
{
    while (rf__ring_push(r, r->entries, h) != 0) {
        if (bc_stop)
            return -1;
        bc_spin_pause();
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
        if (bc_stop) {
            /* The child may have pushed its last reply and exited just
             * after our pop: that SIGCHLD is no failure. */
            rc = rf__ring_pop(r, r->entries, h);
            return rc != 0 ? rc : -EINTR;
        }
        if (sleep)
            (void)rf__ring_wait_futex(r, b, 0, -1);
        else
            bc_spin_pause();
    }
}

/* ---- the same over pipes (pingpong-pipe) ------------------------------ */

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

void bc_pipes_close(struct channel *ch)
{
    for (int d = 0; d < 2; d++) {
        close_fd(&ch->pipe_fd[d][0]);
        close_fd(&ch->pipe_fd[d][1]);
    }
}

/* Fresh pipes for every run, so no byte of a failed run is left in them. */
int bc_pipes_open(struct channel *ch)
{
    for (int d = 0; d < 2; d++) {
        if (pipe(ch->pipe_fd[d]) != 0) {
            perror("bench-channel: pipe");
            bc_pipes_close(ch);
            return -1;
        }
    }
    return 0;
}

/* Side s keeps only the read end it receives on and the write end it sends
 * on, so that when the other side dies its reads see EOF instead of
 * blocking for ever. */
void bc_pipes_keep(struct channel *ch, enum side s)
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
    return n < 0 && errno == EINTR && bc_stop != SIGALRM;
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
int bc_send_handle(struct channel *ch, enum direction d, uint64_t h,
                   enum mode m)
{
    if (m == MODE_PIPE)
        return pipe_send(ch, d, h);
    return send_one(ch, d, h, m == MODE_SLEEP);
}

/* As receive_one(); `expect` is the handle due next, which only a pipe,
 * carrying one byte of it, needs. */
int bc_receive_handle(struct channel *ch, enum direction d, enum mode m,
                      uint64_t expect, uint64_t *h)
{
    if (m == MODE_PIPE)
        return pipe_receive(ch, d, expect, h);
    return receive_one(ch, d, m == MODE_SLEEP, h);
}
