/*
 * test-segment.c - the control segment's layout and the checks every
 * attach makes: a good segment attaches; a wrong magic, ABI version,
 * header size, recorded size, offset or arena size, sizes that overflow,
 * a ring whose entries or mask disagree with the header, and a sample
 * shape larger than a slot are refused with RF_E_ABI and a reason, never
 * trusted (a case per field). Also the handle encoding.
 */
#include "config.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "channel/segment.h"
#include "harness.h"
#include "test.h"

struct fixture {
    struct rf__layout lay;
    int control_fd, arena_fd;
    struct rf__header *header; /* the creator's own mapping */
};

static void fixture_make(struct fixture *f)
{
    int64_t params[RF__PARAMS] = {0};
    params[RF_PARAM_HEIGHT] = 32;
    params[RF_PARAM_WIDTH] = 32;
    params[RF_PARAM_CHANNELS] = 3;
    params[RF_PARAM_BATCH_SIZE] = 8;
    CHECK_OK(rf__layout_compute(&f->lay, 3, 6, 8, (uint64_t)32 * 32 * 3));
    f->control_fd = memfd_create("test-control", MFD_CLOEXEC);
    f->arena_fd = memfd_create("test-arena", MFD_CLOEXEC);
    CHECK(f->control_fd >= 0 && f->arena_fd >= 0);
    CHECK_EQ(ftruncate(f->control_fd, (off_t)f->lay.control_size), 0);
    CHECK_EQ(ftruncate(f->arena_fd, (off_t)f->lay.arena_size), 0);
    void *p = mmap(NULL, f->lay.control_size, PROT_READ | PROT_WRITE,
                   MAP_SHARED, f->control_fd, 0);
    CHECK(p != MAP_FAILED);
    struct rf__segment seg = {.header = p, .control_size = f->lay.control_size};
    rf__segment_format(&seg, &f->lay, params, "/data/train");
    f->header = p;
}

static void fixture_free(struct fixture *f)
{
    munmap(f->header, f->lay.control_size);
    close(f->control_fd);
    close(f->arena_fd);
}

/* Attaches and expects `want`; on RF_E_ABI the reason must mention
 * `reason`. */
static void expect_attach(struct fixture *f, int want, const char *reason)
{
    struct rf__segment seg;
    char why[256] = "";
    const int rc =
        rf__segment_attach(&seg, f->control_fd, f->arena_fd, why, sizeof(why));
    if (rc != want)
        fprintf(stderr, "attach: %s\n", why);
    CHECK_EQ(rc, want);
    if (rc == 0) {
        CHECK_EQ(seg.header->slots, 6);
        CHECK_EQ(seg.header->producers, 3);
        rf__segment_detach(&seg);
    } else {
        CHECK_CONTAINS(why, reason);
    }
}

TEST_CASE_LIMIT(test_good_segment_attaches, "layout",
                "a good segment attaches, rings apart", 10)
{
    struct fixture f;
    fixture_make(&f);
    expect_attach(&f, 0, "");
    /* Rings of different producers do not overlap, nor touch the bell. */
    struct rf__segment seg = {.header = f.header, .layout = *f.header};
    uint8_t *e0 = (uint8_t *)rf__segment_empty_ring(&seg, 0);
    uint8_t *f0 = (uint8_t *)rf__segment_full_ring(&seg, 0);
    uint8_t *e1 = (uint8_t *)rf__segment_empty_ring(&seg, 1);
    CHECK_GE(f0 - e0, (long long)rf__ring_bytes(f.lay.ring_entries));
    CHECK_GE(e1 - f0, (long long)rf__ring_bytes(f.lay.ring_entries));
    CHECK_EQ(f.lay.ring_entries, 8); /* 6 slots + stop, rounded up */
    CHECK_EQ(f.lay.slot_data_bytes % RF__PAGE, 0);
    fixture_free(&f);
}

typedef void (*corruption)(struct rf__header *h);

static void bad_magic(struct rf__header *h)
{
    h->magic ^= 1;
}
static void bad_version(struct rf__header *h)
{
    h->abi_version = RF__ABI_VERSION + 1;
}
static void bad_header_size(struct rf__header *h)
{
    h->header_size -= 8;
}
static void bad_segment_size(struct rf__header *h)
{
    h->segment_size += RF__PAGE;
}
static void bad_ring_offset(struct rf__header *h)
{
    h->rings_offset = h->segment_size - 8;
}
static void bad_slot_count(struct rf__header *h)
{
    h->slots = 0;
}
static void bad_ring_size(struct rf__header *h)
{
    h->ring_entries = 12;
}
static void bad_arena_size(struct rf__header *h)
{
    h->arena_size += RF__PAGE;
}
static void bad_producer_offset(struct rf__header *h)
{
    h->producers_offset = UINT64_MAX - 16;
}

/* The header lives in memory any process of the loader can write: sizes
 * that overflow, offsets that stay inside but break the layout, rings
 * whose mask disagrees, and a sample shape larger than a slot must all be
 * refused, not only offsets that point outside. */
static struct rf__ring *ring_of(struct rf__header *h, uint32_t producer)
{
    const struct rf__segment seg = {.header = h, .layout = *h};
    return rf__segment_empty_ring(&seg, producer);
}
static int64_t *params_of(struct rf__header *h)
{
    return (int64_t *)((uint8_t *)h + h->params_offset);
}
static void bad_producer_count(struct rf__header *h)
{
    h->producers = UINT32_MAX; /* stride * 2 * producers overflows 32 bits */
}
static void bad_batch_size(struct rf__header *h)
{
    h->batch_size = 0;
}
static void bad_bell_alignment(struct rf__header *h)
{
    h->consumer_bell_offset += 8; /* inside, but not on its cache line */
}
static void bad_ring_stride(struct rf__header *h)
{
    h->ring_stride += RF__CACHELINE; /* still fits the last page */
}
static void bad_slot_overflow(struct rf__header *h)
{
    /* slot_bytes * slots wraps round to arena_size */
    h->slot_data_bytes = (UINT64_C(1) << 63) - (uint64_t)RF__PAGE * 4;
    h->slot_bytes = h->slot_data_bytes + RF__PAGE;
}
static void bad_ring_mask(struct rf__header *h)
{
    ring_of(h, 2)->mask = 0xffffff; /* pushes would land past the ring */
}
static void bad_ring_entries(struct rf__header *h)
{
    ring_of(h, 1)->entries = 1u << 30;
}
static void bad_shape(struct rf__header *h)
{
    params_of(h)[RF_PARAM_HEIGHT] = 4096; /* a sample overruns the slot */
}
static void bad_shape_overflow(struct rf__header *h)
{
    params_of(h)[RF_PARAM_HEIGHT] = INT64_C(1) << 62;
    params_of(h)[RF_PARAM_WIDTH] = 4; /* the product wraps to 0 */
}
static void bad_batch_param(struct rf__header *h)
{
    params_of(h)[RF_PARAM_BATCH_SIZE] = 4096;
}

/* A fixture with one field broken by `corrupt` is refused with RF_E_ABI
 * and a reason that contains `reason`. */
static void expect_refused(corruption corrupt, const char *reason)
{
    struct fixture f;
    fixture_make(&f);
    corrupt(f.header);
    expect_attach(&f, RF_E_ABI, reason);
    fixture_free(&f);
}

/* Case refused_bad_magic() and so on: one per corruption, called NAME,
 * refused with REASON. */
#define REFUSED_CASE(corruption, name, reason)                                 \
    TEST_CASE_LIMIT(refused_##corruption, "corrupt", name, 10)                 \
    {                                                                          \
        expect_refused(corruption, reason);                                    \
    }

REFUSED_CASE(bad_magic, "wrong magic", "wrong magic")
REFUSED_CASE(bad_version, "wrong ABI version", "ABI version")
REFUSED_CASE(bad_header_size, "wrong header size", "header size")
REFUSED_CASE(bad_segment_size, "wrong recorded size", "recorded size")
REFUSED_CASE(bad_ring_offset, "ring offset outside", "outside the segment")
REFUSED_CASE(bad_producer_offset, "producer offset outside",
             "outside the segment")
REFUSED_CASE(bad_slot_count, "slot count out of range", "out of range")
REFUSED_CASE(bad_producer_count, "producer count out of range", "out of range")
REFUSED_CASE(bad_batch_size, "batch size out of range", "out of range")
REFUSED_CASE(bad_ring_size, "ring size not a power of two", "power of two")
REFUSED_CASE(bad_arena_size, "arena size", "slot sizes")
REFUSED_CASE(bad_slot_overflow, "slot sizes that overflow", "slot sizes")
REFUSED_CASE(bad_bell_alignment, "bell alignment", "differs from the layout")
REFUSED_CASE(bad_ring_stride, "ring stride", "ring stride")
REFUSED_CASE(bad_ring_mask, "ring mask",
             "EMPTY ring of producer 2 has 8 entries, mask 0xffffff")
REFUSED_CASE(bad_ring_entries, "ring entries",
             "EMPTY ring of producer 1 has 1073741824")
REFUSED_CASE(bad_shape, "shape larger than a slot", "does not fit its slots")
REFUSED_CASE(bad_shape_overflow, "shape that overflows",
             "does not fit its slots")
REFUSED_CASE(bad_batch_param, "batch size larger than a slot",
             "does not fit its slots")

TEST_CASE_LIMIT(test_truncated_segment_is_refused, "corrupt",
                "truncated segment", 10)
{
    struct fixture f;
    fixture_make(&f);
    CHECK_EQ(ftruncate(f.control_fd, 100), 0);
    struct rf__segment seg;
    char why[256] = "";
    CHECK_EQ(
        rf__segment_attach(&seg, f.control_fd, f.arena_fd, why, sizeof(why)),
        RF_E_ABI);
    CHECK_CONTAINS(why, "smaller than its header");
    munmap(f.header, f.lay.control_size);
    close(f.control_fd);
    close(f.arena_fd);
}

TEST_CASE_LIMIT(test_handles_round_trip, "handles",
                "kind, slot and sequence round trip", 10)
{
    const uint64_t h = rf__handle_make(RF__HANDLE_BATCH, 65535, RF__SEQ_MASK);
    CHECK_EQ(rf__handle_kind(h), RF__HANDLE_BATCH);
    CHECK_EQ(rf__handle_slot(h), 65535);
    CHECK_EQ(rf__handle_seq(h), RF__SEQ_MASK);
    CHECK_EQ(rf__handle_kind(0), 0); /* zeroed memory is never a handle */
    const uint64_t s = rf__handle_make(RF__HANDLE_STOP, 0, 0);
    CHECK_EQ(rf__handle_kind(s), RF__HANDLE_STOP);
}

TEST_CASE_LIMIT(test_layout_overflow_is_refused, "layout",
                "sizes that overflow are refused", 10)
{
    struct rf__layout lay;
    CHECK_EQ(rf__layout_compute(&lay, 1, 4, 65536, UINT64_C(1) << 40),
             -EOVERFLOW);
    /* slots + 2 rounded up to a power of two would wrap round */
    CHECK_EQ(rf__layout_compute(&lay, 1, UINT32_MAX, 1, 1), -EOVERFLOW);
    CHECK_EQ(rf__layout_compute(&lay, 1, 4, 0, 1), -EINVAL);
}

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
