/*
 * fuzz-segment.c - a producer attaching to a control segment made of any
 * bytes (lib/segment.c). The input becomes the control memfd; the arena
 * memfd has the size the header claims (when that is small). Whatever
 * rf__segment_attach() accepts must then be safe to use as a producer
 * uses it: every ring, producer state, bell, the parameters, the path and
 * every slot's pixels, meta, labels and indices must lie inside the two
 * mappings (checked here by address, since a stray access into another
 * mapping would not fault), and a push and a pop on each ring must stay
 * inside its ring.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "channel/segment.h"

/* Arena memfds above this are not made: the header's claim is refused by
 * the size check, or the input is skipped. */
#define MAX_ARENA (UINT64_C(1) << 22)

static int memfd_of_size(const uint8_t *data, size_t size, uint64_t length)
{
    const int fd = memfd_create("fuzz-segment", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)length) < 0)
        abort();
    if (size > 0 && pwrite(fd, data, size, 0) != (ssize_t)size)
        abort();
    return fd;
}

/* [p, p + len) inside [base, base + size), or abort. */
static void check_inside(const void *p, uint64_t len, const void *base,
                         uint64_t size)
{
    const uintptr_t at = (uintptr_t)p, start = (uintptr_t)base;
    if (at < start || at - start > size || len > size - (at - start))
        abort();
}

static void check_ring(const struct rf__segment *seg, struct rf__ring *ring)
{
    const struct rf__header *h = seg->header;
    check_inside(ring, sizeof(*ring), h, seg->control_size);
    if (ring->entries != h->ring_entries || ring->mask != ring->entries - 1)
        abort();
    check_inside(ring, rf__ring_bytes(ring->entries), h, seg->control_size);
    uint64_t handle = 0;
    (void)rf__ring_push(ring, h->ring_entries,
                        rf__handle_make(RF__HANDLE_BATCH, 0, 1));
    (void)rf__ring_pop(ring, h->ring_entries, &handle);
}

static void check_slots(const struct rf__segment *seg)
{
    const struct rf__header *h = seg->header;
    for (uint32_t s = 0; s < h->slots; s++) {
        /* the whole slot: a producer maps it in one call (map_slot()) */
        check_inside(rf__slot_data(seg, s), h->slot_bytes, seg->arena,
                     seg->arena_size);
        check_inside(rf__slot_data(seg, s), h->slot_data_bytes, seg->arena,
                     seg->arena_size);
        check_inside(rf__slot_meta(seg, s), sizeof(struct rf__slot_meta),
                     seg->arena, seg->arena_size);
        check_inside(rf__slot_labels(seg, s),
                     (uint64_t)h->batch_size * sizeof(int64_t), seg->arena,
                     seg->arena_size);
        check_inside(rf__slot_indices(seg, s),
                     (uint64_t)h->batch_size * sizeof(uint64_t), seg->arena,
                     seg->arena_size);
    }
}

/* What a producer touches, or what the parameters let it write. */
static void check_attached(const struct rf__segment *seg)
{
    const struct rf__header *h = seg->header;
    check_inside(seg->params, RF__PARAMS * sizeof(int64_t), h,
                 seg->control_size);
    check_inside(seg->path, strlen(seg->path) + 1, h, seg->control_size);
    check_inside(rf__segment_consumer_bell(seg), sizeof(struct rf__bell), h,
                 seg->control_size);
    for (uint32_t p = 0; p < h->producers; p++) {
        check_inside(rf__segment_producer(seg, p),
                     sizeof(struct rf__producer_state), h, seg->control_size);
        check_ring(seg, rf__segment_empty_ring(seg, p));
        check_ring(seg, rf__segment_full_ring(seg, p));
    }
    const uint64_t sample = (uint64_t)seg->params[RF_PARAM_HEIGHT] *
                            (uint64_t)seg->params[RF_PARAM_WIDTH] *
                            (uint64_t)seg->params[RF_PARAM_CHANNELS];
    if (sample * h->batch_size > h->slot_data_bytes)
        abort();
    check_slots(seg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rf__header claimed = {0};
    if (size > 0)
        memcpy(&claimed, data, size < sizeof(claimed) ? size : sizeof(claimed));
    const uint64_t arena =
        claimed.arena_size - 1 < MAX_ARENA ? claimed.arena_size : RF__PAGE;
    const int control_fd = memfd_of_size(data, size, size);
    const int arena_fd = memfd_of_size(NULL, 0, arena);
    struct rf__segment seg;
    char why[256];
    if (rf__segment_attach(&seg, control_fd, arena_fd, why, sizeof(why)) == 0) {
        check_attached(&seg);
        rf__segment_detach(&seg);
    }
    close(control_fd);
    close(arena_fd);
    return 0;
}
