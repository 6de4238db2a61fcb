/*
 * test-garbage.c - garbage written into the shared rings, slots and header
 * (the way a stray writer could reach them) is an error, or changes
 * nothing, and is never an access outside them.
 */
#include "config.h"

#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "faults.h"
#include "harness.h"
#include "proc.h"
#include "channel/segment.h"
#include "test.h"

/* ---- garbage in the rings ---------------------------------------------- */

static rf_config *one_producer_config(void)
{
    return small_config(1, 100000, 32, 8);
}

static rf_loader *open_one_producer(void)
{
    rf_config *cfg = one_producer_config();
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    return l;
}

/* Stops the producer, lets `corrupt` write its FULL ring (the test is
 * then its only writer), and expects next() to refuse what it finds. */
static void expect_bad_handle(void (*corrupt)(const struct rf__segment *),
                              const char *reason)
{
    rf_loader *l = open_one_producer();
    struct rf__segment seg = map_control_segment();
    const int pid = pause_producer(&seg);
    corrupt(&seg);
    CHECK_EQ(next_until_error(l), RF_E_BAD_HANDLE);
    CHECK_CONTAINS(rf_loader_error(l), reason);
    kill(pid, SIGCONT);
    rf_loader_close(l);
    munmap(seg.header, seg.control_size);
}

/* A plausible-looking handle: right kind, a slot far out of range. */
static void push_garbage_handle(const struct rf__segment *seg)
{
    CHECK_EQ(rf__ring_push(rf__segment_full_ring(seg, 0),
                           seg->header->ring_entries,
                           rf__handle_make(RF__HANDLE_BATCH, 0xfffff, 12345)),
             0);
}

static void push_garbage_indices(const struct rf__segment *seg)
{
    struct rf__ring *full = rf__segment_full_ring(seg, 0);
    atomic_store(&full->tail, atomic_load(&full->head) + 100000);
}

TEST_CASE(test_garbage_in_the_batch_ring, "garbage",
          "handles in the batch ring")
{
    expect_bad_handle(push_garbage_handle, "matches no batch");
    expect_bad_handle(push_garbage_indices, "corrupted");
}

/* The list of failed samples in a slot is shared memory too: an index
 * beyond the dataset, written where a producer writes its failures, is an
 * error and never a key of the loader's set of failed samples. The test
 * stands in for the stopped producer: it takes an order and answers it
 * with a batch whose one failed sample is UINT64_MAX (the set's empty
 * key). */
TEST_CASE(test_garbage_failed_index_is_an_error, "garbage",
          "failed index beyond the dataset")
{
    rf_config *cfg = one_producer_config();
    CHECK_OK(rf_config_set(cfg, RF_PARAM_ORDERED, 0));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_ON_ERROR, RF_ON_ERROR_SKIP));
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    struct rf__segment seg = map_control_segment();
    size_t arena_size = 0;
    seg.arena = map_memfd("memfd:ringfeed-arena", &arena_size);
    rf_batch b;
    CHECK_EQ(rf_loader_next(l, &b), 1);
    const int pid = pause_producer(&seg);
    CHECK_OK(rf_loader_release(l, &b)); /* an order for the test to take */
    const uint32_t entries = seg.layout.ring_entries;
    uint64_t order = 0;
    CHECK_EQ(rf__ring_pop(rf__segment_empty_ring(&seg, 0), entries, &order), 1);
    const uint32_t slot = rf__handle_slot(order);
    const uint64_t seq = rf__handle_seq(order);
    struct rf__slot_meta *m = rf__slot_meta(&seg, slot);
    m->sequence = seq;
    m->samples = 0;
    m->failed_samples = 1;
    m->failures[0].index = UINT64_MAX;
    snprintf(m->failures[0].text, sizeof(m->failures[0].text), "forged");
    rf__slot_indices(&seg, slot)[seg.layout.batch_size - 1] = UINT64_MAX;
    CHECK_EQ(rf__ring_push(rf__segment_full_ring(&seg, 0), entries,
                           rf__handle_make(RF__HANDLE_BATCH, slot, seq)),
             0);
    CHECK_EQ(next_until_error(l), RF_E_BAD_HANDLE);
    CHECK_CONTAINS(rf_loader_error(l),
                   "lists failed sample 18446744073709551615, but the "
                   "dataset has 100000 samples");
    printf("forged failed sample: %s\n", rf_loader_error(l));
    kill(pid, SIGCONT);
    rf_loader_close(l);
    munmap(seg.header, seg.control_size);
    munmap(seg.arena, arena_size);
}

/* The size fields in the shared rings are never used after set-up, so
 * garbage there changes nothing (ASan would see any access outside). */
TEST_CASE(test_garbage_ring_sizes_are_ignored, "garbage",
          "ring sizes are ignored")
{
    rf_loader *l = open_one_producer();
    struct rf__segment seg = map_control_segment();
    /* After the producer has attached (which checks the fields). */
    while (atomic_load(&rf__segment_producer(&seg, 0)->pid) == 0)
        sleep_us(100);
    for (int which = 0; which < 2; which++) {
        struct rf__ring *r = which ? rf__segment_full_ring(&seg, 0)
                                   : rf__segment_empty_ring(&seg, 0);
        r->entries = 0xffffffffu;
        r->mask = 0xffffffffu;
    }
    rf_batch b;
    for (uint64_t i = 0; i < 200; i++) {
        CHECK_EQ(rf_loader_next(l, &b), 1);
        CHECK_EQ(b.sequence, i);
        CHECK_OK(rf_loader_release(l, &b));
    }
    rf_stats st;
    CHECK_OK(rf_loader_stats(l, &st));
    CHECK_EQ(st.respawns, 0); /* the same producer did it all */
    rf_loader_close(l);
    munmap(seg.header, seg.control_size);
}

/* The layout fields of the shared header are read once, when the loader
 * makes the segment and when a producer attaches; garbage written there
 * later must not move any pointer of either side. */
TEST_CASE(test_garbage_header_is_ignored, "garbage", "header is ignored")
{
    rf_loader *l = open_one_producer();
    struct rf__segment seg = map_control_segment();
    struct rf__producer_state *st = rf__segment_producer(&seg, 0);
    while (atomic_load(&st->pid) == 0)
        sleep_us(100);
    struct rf__header *h = seg.header;
    h->rings_offset += UINT64_C(1) << 40;
    h->ring_stride += UINT64_C(1) << 40;
    h->producers_offset += UINT64_C(1) << 40;
    h->consumer_bell_offset += UINT64_C(1) << 40;
    h->slot_bytes += UINT64_C(1) << 40;
    h->slot_data_bytes += UINT64_C(1) << 40;
    h->batch_size = UINT32_MAX;
    h->slots = UINT32_MAX;
    rf_batch b;
    for (uint64_t i = 0; i < 400; i++) {
        if (i == 200) /* its successor attaches to a repaired header */
            CHECK_EQ(kill((int)atomic_load(&st->pid), SIGKILL), 0);
        CHECK_EQ(rf_loader_next(l, &b), 1);
        CHECK_EQ(b.sequence, i);
        CHECK_OK(rf_loader_release(l, &b));
    }
    rf_stats stats;
    CHECK_OK(rf_loader_stats(l, &stats));
    CHECK_EQ(stats.respawns, 1);
    rf_loader_close(l);
    munmap(seg.header, seg.control_size);
}

/* An order ring that looks full (its head moved back by a stray
 * writer) cannot take the order for a released slot: that is reported
 * by the next next(), not lost as a batch that never comes. */
TEST_CASE(test_full_order_ring_is_an_error, "garbage",
          "full order ring is an error")
{
    rf_loader *l = open_one_producer();
    struct rf__segment seg = map_control_segment();
    rf_batch b;
    CHECK_EQ(rf_loader_next(l, &b), 1);
    const int pid = pause_producer(&seg);
    struct rf__ring *ring = rf__segment_empty_ring(&seg, 0);
    atomic_store(&ring->head,
                 atomic_load(&ring->tail) - seg.layout.ring_entries);
    CHECK_OK(rf_loader_release(l, &b));
    CHECK_EQ(next_until_error(l), RF_E_BAD_HANDLE);
    CHECK_CONTAINS(rf_loader_error(l), "order ring of producer 0 is full");
    kill(pid, SIGCONT);
    rf_loader_close(l);
    munmap(seg.header, seg.control_size);
}

TEST_CASE(test_garbage_order_stops_the_producer, "garbage",
          "order stops the producer")
{
    rf_loader *l = open_one_producer();
    struct rf__segment seg = map_control_segment();
    /* This thread is the order ring's only writer, and is not inside the
     * loader now. */
    CHECK_EQ(rf__ring_push(rf__segment_empty_ring(&seg, 0),
                           seg.header->ring_entries,
                           rf__handle_make(RF__HANDLE_BATCH, 0xfffff, 1)),
             0);
    rf__bell_ring_futex(&rf__segment_producer(&seg, 0)->bell);
    CHECK_EQ(next_until_error(l), RF_E_PRODUCER_FAILED);
    CHECK_CONTAINS(rf_loader_error(l), "invalid order");
    rf_loader_close(l);
    munmap(seg.header, seg.control_size);
}

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
