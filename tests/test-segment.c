/*
 * test-segment.c - the control segment's layout and the checks every
 * attach makes: a good segment attaches; a wrong magic, ABI version,
 * header size, recorded size, offset or arena size is refused with
 * RF_E_ABI and a reason, never trusted. Also the handle encoding.
 */
#include "config.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "segment.h"
#include "test.h"

struct fixture {
    struct rf__layout lay;
    int control_fd, arena_fd;
    struct rf__header *header; /* the creator's own mapping */
};

static void fixture_make(struct fixture *f)
{
    int64_t params[RF__PARAMS] = {0};
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
    CHECK_EQ(rc, want);
    if (rc == 0) {
        CHECK_EQ(seg.header->slots, 6);
        CHECK_EQ(seg.header->producers, 3);
        rf__segment_detach(&seg);
    } else {
        CHECK_CONTAINS(why, reason);
    }
}

static void test_good_segment_attaches(void)
{
    struct fixture f;
    fixture_make(&f);
    expect_attach(&f, 0, "");
    /* Rings of different producers do not overlap, nor touch the bell. */
    struct rf__segment seg = {.header = f.header};
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
static void bad_ring_entries(struct rf__header *h)
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

static void test_corruptions_are_refused(void)
{
    static const struct {
        corruption corrupt;
        const char *reason;
    } cases[] = {
        {bad_magic, "wrong magic"},
        {bad_version, "ABI version"},
        {bad_header_size, "header size"},
        {bad_segment_size, "recorded size"},
        {bad_ring_offset, "outside the segment"},
        {bad_slot_count, "out of range"},
        {bad_ring_entries, "power of two"},
        {bad_arena_size, "slot sizes"},
        {bad_producer_offset, "outside the segment"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct fixture f;
        fixture_make(&f);
        cases[i].corrupt(f.header);
        expect_attach(&f, RF_E_ABI, cases[i].reason);
        fixture_free(&f);
    }
}

static void test_truncated_segment_is_refused(void)
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

static void test_handles_round_trip(void)
{
    const uint64_t h = rf__handle_make(RF__HANDLE_BATCH, 65535, RF__SEQ_MASK);
    CHECK_EQ(rf__handle_kind(h), RF__HANDLE_BATCH);
    CHECK_EQ(rf__handle_slot(h), 65535);
    CHECK_EQ(rf__handle_seq(h), RF__SEQ_MASK);
    CHECK_EQ(rf__handle_kind(0), 0); /* zeroed memory is never a handle */
    const uint64_t s = rf__handle_make(RF__HANDLE_STOP, 0, 0);
    CHECK_EQ(rf__handle_kind(s), RF__HANDLE_STOP);
}

static void test_layout_overflow_is_refused(void)
{
    struct rf__layout lay;
    CHECK_EQ(rf__layout_compute(&lay, 1, 4, 65536, UINT64_C(1) << 40),
             -EOVERFLOW);
}

int main(void)
{
    test_good_segment_attaches();
    test_corruptions_are_refused();
    test_truncated_segment_is_refused();
    test_handles_round_trip();
    test_layout_overflow_is_refused();
    return 0;
}
