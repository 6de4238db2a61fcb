/*
 * segment.c - layout, formatting, validation and mapping of the control
 * segment and the arena. Owns no state of its own: callers hold the
 * struct rf__segment.
 */
#include "config.h"

#include "channel/segment.h"

#include <errno.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "ringfeed.h"

static uint64_t round_up(uint64_t v, uint64_t align)
{
    return (v + align - 1) / align * align;
}

static uint32_t next_pow2(uint32_t v)
{
    uint32_t p = 2;
    while (p < v)
        p <<= 1;
    return p;
}

/* Per slot after the pixels: meta, labels, indices. */
static uint64_t slot_meta_bytes(uint32_t batch_size)
{
    return sizeof(struct rf__slot_meta) +
           (uint64_t)batch_size * (sizeof(int64_t) + sizeof(uint64_t));
}

int rf__layout_compute(struct rf__layout *lay, uint32_t producers,
                       uint32_t slots, uint32_t batch_size,
                       uint64_t sample_bytes)
{
    memset(lay, 0, sizeof(*lay));
    if (producers == 0 || slots == 0 || batch_size == 0)
        return -EINVAL;
    if (slots > RF__MAX_SLOTS || producers > RF__MAX_PRODUCERS ||
        sample_bytes > RF__MAX_SLOT_BYTES / batch_size)
        return -EOVERFLOW;
    lay->producers = producers;
    lay->slots = slots;
    lay->batch_size = batch_size;
    /* Each ring carries at most every slot plus a stop sentinel. */
    lay->ring_entries = next_pow2(slots + 2);
    lay->slot_data_bytes = round_up(sample_bytes * batch_size, RF__PAGE);
    lay->slot_bytes =
        lay->slot_data_bytes + round_up(slot_meta_bytes(batch_size), RF__PAGE);
    if (lay->slot_bytes > RF__MAX_ARENA / slots)
        return -EOVERFLOW;
    lay->arena_size = lay->slot_bytes * slots;

    uint64_t off = RF__PAGE; /* the header has the first page */
    lay->params_offset = off;
    off += round_up(RF__PARAMS * sizeof(int64_t), RF__CACHELINE);
    lay->path_offset = off;
    off += RF__PATH_MAX;
    lay->producers_offset = off;
    off += round_up((uint64_t)producers * sizeof(struct rf__producer_state),
                    RF__CACHELINE);
    lay->consumer_bell_offset = off;
    off += round_up(sizeof(struct rf__bell), RF__CACHELINE);
    lay->broken_offset = off;
    off += round_up(sizeof(struct rf__broken_list), RF__CACHELINE);
    lay->rings_offset = off;
    lay->ring_stride =
        round_up(rf__ring_bytes(lay->ring_entries), RF__CACHELINE);
    off += lay->ring_stride * 2 * producers;
    lay->control_size = round_up(off, RF__PAGE);
    return 0;
}

void rf__segment_format(struct rf__segment *seg, const struct rf__layout *lay,
                        const int64_t *params, const char *path)
{
    struct rf__header *h = seg->header;
    memset(h, 0, sizeof(*h));
    h->magic = RF__MAGIC;
    h->abi_version = RF__ABI_VERSION;
    h->header_size = sizeof(*h);
    h->segment_size = lay->control_size;
    h->arena_size = lay->arena_size;
    h->producers = lay->producers;
    h->slots = lay->slots;
    h->ring_entries = lay->ring_entries;
    h->batch_size = lay->batch_size;
    h->slot_bytes = lay->slot_bytes;
    h->slot_data_bytes = lay->slot_data_bytes;
    h->params_offset = lay->params_offset;
    h->path_offset = lay->path_offset;
    h->producers_offset = lay->producers_offset;
    h->consumer_bell_offset = lay->consumer_bell_offset;
    h->broken_offset = lay->broken_offset;
    h->rings_offset = lay->rings_offset;
    h->ring_stride = lay->ring_stride;
    seg->layout = *h;

    seg->params = (int64_t *)((uint8_t *)h + lay->params_offset);
    memcpy(seg->params, params, RF__PARAMS * sizeof(int64_t));
    char *dst_path = (char *)h + lay->path_offset;
    rf__format(dst_path, RF__PATH_MAX, "%s", path);
    seg->path = dst_path;
    for (uint32_t p = 0; p < lay->producers; p++) {
        rf__ring_init(rf__segment_empty_ring(seg, p), lay->ring_entries);
        rf__ring_init(rf__segment_full_ring(seg, p), lay->ring_entries);
        struct rf__producer_state *st = rf__segment_producer(seg, p);
        memset(st, 0, sizeof(*st));
        rf__store_relaxed64(&st->current_seq, UINT64_MAX);
    }
    memset(rf__segment_consumer_bell(seg), 0, sizeof(struct rf__bell));
    memset(rf__segment_broken(seg), 0, sizeof(struct rf__broken_list));
}

static int reject(char *why, size_t why_len, const char *reason)
{
    snprintf(why, why_len, "control segment rejected: %s", reason);
    return RF_E_ABI;
}

/* The header lives in memory that every process of the loader can write,
 * so nothing in it is trusted: the counts must be in range, and every
 * offset and size must be exactly what rf__layout_compute() gives for
 * them (the same build made it: the ABI version matched), which puts
 * every region inside the segment, aligned, without overlap. */
static int validate_layout(const struct rf__header *h, uint64_t size, char *why,
                           size_t why_len)
{
    if (h->producers == 0 || h->producers > RF__MAX_PRODUCERS ||
        h->slots == 0 || h->slots > RF__MAX_SLOTS || h->batch_size == 0 ||
        h->batch_size > RF__MAX_BATCH)
        return reject(why, why_len,
                      "producer, slot or batch count out of range");
    struct rf__layout lay;
    if (rf__layout_compute(&lay, h->producers, h->slots, h->batch_size, 0) < 0)
        return reject(why, why_len, "its counts give no layout");
    if (h->ring_entries != lay.ring_entries)
        return reject(why, why_len,
                      "ring size is not the power of two its slots need");
    if (h->ring_stride != lay.ring_stride)
        return reject(why, why_len, "ring stride differs from the layout");
    if (h->params_offset != lay.params_offset ||
        h->path_offset != lay.path_offset ||
        h->producers_offset != lay.producers_offset ||
        h->consumer_bell_offset != lay.consumer_bell_offset ||
        h->broken_offset != lay.broken_offset ||
        h->rings_offset != lay.rings_offset || size != lay.control_size)
        return reject(why, why_len,
                      "an offset points outside the segment or differs from "
                      "the layout");
    return 0;
}

/* Slots: a page-aligned pixel area, then room for the meta, labels and
 * indices of batch_size samples; the arena holds exactly `slots` of them.
 * Checked without overflow whatever the fields hold. */
static int validate_slots(const struct rf__header *h, char *why, size_t why_len)
{
    const uint64_t meta = slot_meta_bytes(h->batch_size);
    uint64_t arena = 0;
    if (h->slot_data_bytes % RF__PAGE != 0 ||
        h->slot_data_bytes > h->slot_bytes ||
        h->slot_bytes - h->slot_data_bytes != round_up(meta, RF__PAGE) ||
        __builtin_mul_overflow(h->slot_bytes, (uint64_t)h->slots, &arena) ||
        arena != h->arena_size || arena > RF__MAX_ARENA)
        return reject(why, why_len, "slot sizes are inconsistent");
    return 0;
}

/* The shape the producers will write must fit a slot's pixel area:
 * a producer bounds its writes by these parameters. */
static int validate_params(const struct rf__header *h, const uint8_t *base,
                           char *why, size_t why_len)
{
    const int64_t *p = (const int64_t *)(base + h->params_offset);
    const int64_t height = p[RF_PARAM_HEIGHT], width = p[RF_PARAM_WIDTH];
    const int64_t channels = p[RF_PARAM_CHANNELS];
    if (height < 1 || height > 65536 || width < 1 || width > 65536 ||
        channels < 1 || channels > 4 ||
        p[RF_PARAM_BATCH_SIZE] != (int64_t)h->batch_size ||
        (uint64_t)(height * width * channels) * h->batch_size >
            h->slot_data_bytes)
        return reject(why, why_len,
                      "the sample shape or batch size in its parameters "
                      "does not fit its slots");
    return 0;
}

/* Each ring's fixed fields must say what the header says. Nobody indexes
 * through them (each side passes the size from its own copy of the
 * layout), so this only catches a mismatched writer early. Head and tail
 * are not checked here: other processes move them all the time, and every
 * pop checks them anyway. */
static int validate_rings(const struct rf__header *h, const uint8_t *base,
                          char *why, size_t why_len)
{
    for (uint64_t r = 0; r < 2 * (uint64_t)h->producers; r++) {
        const struct rf__ring *ring =
            (const struct rf__ring *)(base + h->rings_offset +
                                      r * h->ring_stride);
        if (ring->entries != h->ring_entries ||
            ring->mask != h->ring_entries - 1) {
            snprintf(why, why_len,
                     "control segment rejected: %s ring of producer %llu "
                     "has %u entries, mask 0x%x; the header says %u entries",
                     r % 2 ? "FULL" : "EMPTY", (unsigned long long)(r / 2),
                     ring->entries, ring->mask, h->ring_entries);
            return RF_E_ABI;
        }
    }
    return 0;
}

int rf__segment_validate(const void *base, size_t size, char *why,
                         size_t why_len)
{
    const struct rf__header *h = base;
    if (!base || size < RF__PAGE)
        return reject(why, why_len, "smaller than its header");
    if (h->magic != RF__MAGIC)
        return reject(why, why_len, "wrong magic (not a ringfeed segment)");
    if (h->abi_version != RF__ABI_VERSION) {
        snprintf(why, why_len,
                 "control segment rejected: ABI version %u, this build "
                 "speaks %u; use the ringfeed-producer of the same build",
                 h->abi_version, RF__ABI_VERSION);
        return RF_E_ABI;
    }
    if (h->header_size != sizeof(*h))
        return reject(why, why_len, "header size differs from this build's");
    if (h->segment_size != size)
        return reject(why, why_len, "recorded size differs from the file's");
    int rc = validate_layout(h, size, why, why_len);
    if (rc == 0)
        rc = validate_slots(h, why, why_len);
    if (rc == 0)
        rc = validate_params(h, base, why, why_len);
    if (rc == 0)
        rc = validate_rings(h, base, why, why_len);
    return rc;
}

/* populate: map every page now (MAP_POPULATE); otherwise each is mapped
 * at its first use. */
static int map_fd(int fd, bool populate, size_t *size, void **out, char *why,
                  size_t why_len, const char *what)
{
    struct stat st;
    if (fstat(fd, &st) < 0) {
        const int err = errno;
        snprintf(why, why_len, "%s fd %d: %s", what, fd, strerror(err));
        return -err;
    }
    *size = (size_t)st.st_size;
    if (*size == 0) {
        snprintf(why, why_len, "%s fd %d is empty", what, fd);
        return RF_E_ABI;
    }
    void *p = mmap(NULL, *size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
    if (p == MAP_FAILED) {
        const int err = errno;
        snprintf(why, why_len, "cannot map %s (%zu bytes): %s", what, *size,
                 strerror(err));
        return -err;
    }
    *out = p;
    return 0;
}

int rf__segment_attach(struct rf__segment *seg, int control_fd, int arena_fd,
                       char *why, size_t why_len)
{
    memset(seg, 0, sizeof(*seg));
    void *base = NULL;
    int rc = map_fd(control_fd, true, &seg->control_size, &base, why, why_len,
                    "control segment");
    if (rc < 0)
        return rc;
    seg->header = base;
    /* Validated, then compared with the copy taken before: what the
     * accessors use is exactly what was checked. The words the consumer
     * writes while producers run (`closing`, from there on) are not
     * layout and stay out of the comparison. */
    if (base)
        memcpy(&seg->layout, base, sizeof(seg->layout));
    rc = rf__segment_validate(base, seg->control_size, why, why_len);
    if (rc == 0 &&
        memcmp((const unsigned char *)&seg->layout, (const unsigned char *)base,
               offsetof(struct rf__header, closing)) != 0)
        rc = reject(why, why_len, "the header changed while it was checked");
    if (rc < 0)
        goto fail;
    void *arena = NULL;
    /* A producer writes only the slots it is ordered to fill, and maps
     * their pages then (producer.c, map_slot()). */
    rc = map_fd(arena_fd, false, &seg->arena_size, &arena, why, why_len,
                "arena");
    if (rc < 0)
        goto fail;
    seg->arena = arena;
    if (seg->arena_size != seg->layout.arena_size) {
        rc = reject(why, why_len, "arena size differs from the header's");
        goto fail;
    }
    seg->params = (int64_t *)((uint8_t *)base + seg->layout.params_offset);
    char *path = (char *)base + seg->layout.path_offset;
    if (!memchr(path, '\0', RF__PATH_MAX)) {
        rc = reject(why, why_len, "the dataset path is not terminated");
        goto fail;
    }
    seg->path = path;
    return 0;
fail:
    rf__segment_detach(seg);
    return rc;
}

void rf__segment_detach(struct rf__segment *seg)
{
    if (seg->arena)
        munmap(seg->arena, seg->arena_size);
    if (seg->header)
        munmap(seg->header, seg->control_size);
    memset(seg, 0, sizeof(*seg));
}

void rf__segment_restore(struct rf__segment *seg, const int64_t *params,
                         const char *path)
{
    *seg->header = seg->layout;
    memcpy(seg->params, params, RF__PARAMS * sizeof(int64_t));
    rf__format((char *)seg->header + seg->layout.path_offset, RF__PATH_MAX,
               "%s", path);
}

static uint8_t *control_at(const struct rf__segment *seg, uint64_t off)
{
    return (uint8_t *)seg->header + off;
}

struct rf__ring *rf__segment_empty_ring(const struct rf__segment *seg,
                                        uint32_t producer)
{
    const struct rf__header *h = &seg->layout;
    RF_ASSERT(producer < h->producers);
    return (struct rf__ring *)control_at(
        seg, h->rings_offset + h->ring_stride * (2 * (uint64_t)producer));
}

struct rf__ring *rf__segment_full_ring(const struct rf__segment *seg,
                                       uint32_t producer)
{
    const struct rf__header *h = &seg->layout;
    RF_ASSERT(producer < h->producers);
    return (struct rf__ring *)control_at(
        seg, h->rings_offset + h->ring_stride * (2 * (uint64_t)producer + 1));
}

struct rf__producer_state *rf__segment_producer(const struct rf__segment *seg,
                                                uint32_t producer)
{
    RF_ASSERT(producer < seg->layout.producers);
    return (struct rf__producer_state *)control_at(
               seg, seg->layout.producers_offset) +
           producer;
}

struct rf__bell *rf__segment_consumer_bell(const struct rf__segment *seg)
{
    return (struct rf__bell *)control_at(seg, seg->layout.consumer_bell_offset);
}

struct rf__broken_list *rf__segment_broken(const struct rf__segment *seg)
{
    return (struct rf__broken_list *)control_at(seg, seg->layout.broken_offset);
}

/* The other slot accessors reach the slot through this one. A slot that
 * came from shared memory (a handle on a ring) is checked against the
 * count before it gets here. */
uint8_t *rf__slot_data(const struct rf__segment *seg, uint32_t slot)
{
    RF_ASSERT(slot < seg->layout.slots);
    return seg->arena + (uint64_t)slot * seg->layout.slot_bytes;
}

struct rf__slot_meta *rf__slot_meta(const struct rf__segment *seg,
                                    uint32_t slot)
{
    return (struct rf__slot_meta *)(rf__slot_data(seg, slot) +
                                    seg->layout.slot_data_bytes);
}

int64_t *rf__slot_labels(const struct rf__segment *seg, uint32_t slot)
{
    return (int64_t *)(rf__slot_meta(seg, slot) + 1);
}

uint64_t *rf__slot_indices(const struct rf__segment *seg, uint32_t slot)
{
    return (uint64_t *)(rf__slot_labels(seg, slot) + seg->layout.batch_size);
}
