/*
 * tools/bench/bench-channel-sides.c - what each of bench-channel's two
 * processes does during one run: in throughput mode the parent pushes
 * handles as fast as the ring takes them and the child pops them; in the
 * ping-pong modes the parent sends pings and times every round trip while
 * the child answers. The receiving side checks every handle's order, so a
 * lost, duplicated or reordered handle is an error and never a hang.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>

#include "bench-channel.h"
#include "channel/atomics.h"
#include "channel/ring.h"
#include "common/internal.h"

/* In the sleeping modes each wait that really slept is one switch, so the
 * count per trip says whether a side slept or spun. */
static uint64_t voluntary_switches(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (uint64_t)ru.ru_nvcsw;
}

/* ---- checking the order ----------------------------------------------- */

struct checker {
    uint64_t count; /* indices 0..count-1 are expected, in order */
    uint64_t next;
    uint64_t received, lost, duplicated, bad;
};

static void check_handle(struct checker *ck, uint64_t h)
{
    const uint64_t i = bc_index_of(h);
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

uint64_t bc_report_errors(const struct report *rep)
{
    return rep->lost + rep->duplicated + rep->bad;
}

/* ---- throughput ------------------------------------------------------- */

/* Child: pops until all arrived or the parent is done and the ring is
 * empty (so a lost handle shows up as an error, not as a hang). */
void bc_pop_all(struct channel *ch, const struct opts *o)
{
    struct rf__ring *r = ch->ring[TO_CHILD];
    struct report *rep = &ch->sh->report;
    struct checker ck = {.count = o->count};
    uint64_t polls = 0, h;
    bc_barrier(ch->sh);
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
        bc_spin_pause();
    }
    rep->t1_ns = rf__now_ns();
    rep->polls = polls;
    checker_finish(&ck, rep);
}

/* Parent: pushes count handles as fast as the ring takes them. */
int bc_push_all(struct channel *ch, const struct opts *o, uint64_t *retries)
{
    struct rf__ring *r = ch->ring[TO_CHILD];
    uint64_t waits = 0;
    if (bc_barrier(ch->sh) != 0)
        return -1;
    for (uint64_t i = 0; i < o->count; i++) {
        while (rf__ring_push(r, r->entries, bc_handle_of(i)) != 0) {
            if (bc_stop)
                return -1;
            waits++;
            bc_spin_pause();
        }
    }
    /* Pairs with the load_acquire in bc_pop_all(). */
    rf__store_release32(&ch->sh->pushed_all, 1);
    *retries = waits;
    return 0;
}

/* ---- ping-pong -------------------------------------------------------- */

static uint64_t warmup_trips(const struct opts *o)
{
    return o->block;
}

/* Child: answers every ping, checking it is the next one. */
void bc_pong_all(struct channel *ch, const struct opts *o)
{
    const uint64_t total = warmup_trips(o) + o->count;
    struct report *rep = &ch->sh->report;
    struct checker ck = {.count = total};
    uint64_t h;
    bc_barrier(ch->sh);
    const uint64_t sw0 = voluntary_switches();
    while (ck.received < total) {
        const uint64_t due = bc_handle_of(ck.next);
        if (bc_receive_handle(ch, TO_CHILD, o->mode, due, &h) != 1) {
            ck.bad++;
            break;
        }
        check_handle(&ck, h);
        bc_send_handle(ch, TO_PARENT, bc_reply_of(h), o->mode);
    }
    rep->switches = voluntary_switches() - sw0;
    checker_finish(&ck, rep);
}

/* Parent: one ping and its answer. Returns 0, 1 for a wrong answer, or -1
 * when it must give up. */
static int round_trip(struct channel *ch, uint64_t i, enum mode m)
{
    const uint64_t reply = bc_reply_of(bc_handle_of(i));
    uint64_t h;
    if (bc_send_handle(ch, TO_CHILD, bc_handle_of(i), m) != 0)
        return -1;
    int rc = bc_receive_handle(ch, TO_PARENT, m, reply, &h);
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
    /* bc_ping_all() never asks for 0 trips; a mean of none is no sample. */
    if (n == 0)
        return 0;
    const uint64_t t0 = rf__now_ns();
    if (trips(ch, i, n, m, bad) != 0)
        return -1;
    s->block[s->n_block++] = (rf__now_ns() - t0 + n / 2) / n;
    return 0;
}

/* Parent: warm-up, then alternating blocks, the first one timed "each" so
 * that even a short run yields a distribution. */
int bc_ping_all(struct channel *ch, const struct opts *o, struct samples *s,
                uint64_t *bad, uint64_t *switches)
{
    const enum mode m = o->mode;
    const uint64_t total = warmup_trips(o) + o->count;
    uint64_t i = 0;
    if (bc_barrier(ch->sh) != 0 || trips(ch, &i, warmup_trips(o), m, bad))
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
