/*
 * segment.h - what lives in shared memory: the control segment (header,
 * configuration, per-producer state, rings) and the arena of batch slots,
 * plus the 64-bit handles that travel on the rings.
 *
 * Both segments are memfds, so nothing appears under /dev/shm and nothing
 * outlives the last process that maps them. The consumer creates them; a
 * producer attaches and validates the header before it touches anything
 * else. Changing any struct here means bumping RF__ABI_VERSION.
 */
#ifndef RF_SEGMENT_H
#define RF_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "channel/atomics.h"
#include "channel/ring.h"
#include "common/assert.h"
#include "common/params.h" /* RF__PARAMS, RF__PATH_MAX */
#include "channel/broken-list.h"

#define RF__MAGIC UINT64_C(0x31444546474e4952) /* "RINGFED1" */
#define RF__ABI_VERSION 4u
#define RF__PAGE 4096u

#define RF__ERROR_TEXT 512 /* bytes of error text kept per slot/producer */

/* ---- handles ----------------------------------------------------------- */

/* kind:4 | slot:20 | sequence:40. Kind 0 is never valid, so zeroed or
 * half-written memory never reads as a handle. */
enum rf__handle_kind {
    RF__HANDLE_BATCH = 1, /* EMPTY ring: fill slot with batch `seq`;
                             FULL ring: slot now holds batch `seq` */
    RF__HANDLE_STOP = 2   /* EMPTY ring: exit; FULL ring: exiting cleanly */
};

#define RF__SEQ_BITS 40
#define RF__SLOT_BITS 20
#define RF__SEQ_MASK ((UINT64_C(1) << RF__SEQ_BITS) - 1)
#define RF__SLOT_MASK ((UINT64_C(1) << RF__SLOT_BITS) - 1)
#define RF__MAX_SLOTS 65536u
/* Bounds a control segment is checked against: RF_PARAM_BATCH_SIZE
 * allows no more (lib/common/params.c), and no machine has as many CPUs as
 * producers (one per CPU by default). */
#define RF__MAX_PRODUCERS 65536u
#define RF__MAX_BATCH 65536u
/* rf__layout_compute() never makes a larger arena, nor a slot of more
 * pixel bytes. */
#define RF__MAX_ARENA (UINT64_C(1) << 46)
#define RF__MAX_SLOT_BYTES (UINT64_C(1) << 40)

/* Every field must fit: a slot or sequence too large for its bits is the
 * caller's bug. The masks stay so that even then, in a release build, it
 * cannot spill into the kind. */
static inline uint64_t rf__handle_make(unsigned kind, uint32_t slot,
                                       uint64_t seq)
{
    RF_ASSERT(kind != 0 && kind < 16);
    RF_ASSERT(slot <= RF__SLOT_MASK);
    RF_ASSERT(seq <= RF__SEQ_MASK);
    return ((uint64_t)kind << 60) |
           ((uint64_t)(slot & RF__SLOT_MASK) << RF__SEQ_BITS) |
           (seq & RF__SEQ_MASK);
}

static inline unsigned rf__handle_kind(uint64_t h)
{
    return (unsigned)(h >> 60);
}

static inline uint32_t rf__handle_slot(uint64_t h)
{
    return (uint32_t)((h >> RF__SEQ_BITS) & RF__SLOT_MASK);
}

static inline uint64_t rf__handle_seq(uint64_t h)
{
    return h & RF__SEQ_MASK;
}

/* ---- control segment --------------------------------------------------- */

/* The first page of the control segment. Fields are only ever appended
 * (using up `reserved`); offsets let older readers skip what they do not
 * know. */
struct rf__header {
    uint64_t magic;
    uint32_t abi_version;
    uint32_t header_size;  /* sizeof(struct rf__header) */
    uint64_t segment_size; /* bytes of the whole control segment */
    uint64_t arena_size;   /* bytes of the arena memfd */
    uint32_t producers;
    uint32_t slots;
    uint32_t ring_entries; /* per ring, a power of two */
    uint32_t features;     /* none yet */
    uint32_t batch_size;   /* samples per slot */
    uint32_t reserved32_;
    uint64_t slot_bytes;           /* stride of slots in the arena */
    uint64_t slot_data_bytes;      /* pixel area at the start of each slot */
    uint64_t params_offset;        /* int64_t[RF__PARAMS] */
    uint64_t producers_offset;     /* struct rf__producer_state[producers] */
    uint64_t consumer_bell_offset; /* struct rf__bell */
    uint64_t rings_offset;         /* per producer: EMPTY ring, FULL ring */
    uint64_t ring_stride;          /* bytes of one ring, cache-line rounded */
    uint64_t path_offset;          /* char[RF__PATH_MAX]: the dataset path */
    uint64_t broken_offset;        /* struct rf__broken_list */
    /* Set by the consumer as it closes: a producer stops filling the
     * batch in hand at the next sample instead of finishing it (a batch
     * of 256 photographs takes a second), then finds its stop order. */
    _Atomic uint32_t closing;
    uint32_t reserved32b_;
    uint64_t reserved[13];
};

/* Written by producer i, read by the consumer. */
struct rf__producer_state {
    _Alignas(RF__CACHELINE) _Atomic uint32_t pid;
    _Atomic uint32_t failed;         /* 1: error_text says why it stopped */
    _Atomic uint64_t busy_ns;        /* time spent filling batches */
    _Atomic uint64_t batches;        /* batches published */
    _Atomic uint64_t current_seq;    /* batch being filled, or ~0 */
    _Atomic uint64_t current_sample; /* dataset index being filled */
    _Atomic uint64_t continued_ns;   /* rf__now_ns() at the last SIGCONT
                                        (a stopped job resumed), or 0 */
    struct rf__bell bell;            /* the producer sleeps here */
    char error_text[RF__ERROR_TEXT];
};

/* ---- arena ------------------------------------------------------------- */

/* A sample that could not be read or decoded, as its producer saw it. */
struct rf__sample_failure {
    uint64_t index;
    char text[RF__ERROR_TEXT - 8]; /* "sample N (name): reason" */
};

/* How many failures a slot records in full; more are only counted. */
#define RF__SLOT_FAILURES 4

/* Follows the pixel area of each slot; then labels, indices. */
struct rf__slot_meta {
    uint64_t sequence;
    uint64_t epoch;
    uint64_t number;
    uint32_t samples; /* filled, packed at the front of the slot */
    uint32_t producer;
    uint32_t failed_samples; /* left out because they failed */
    uint32_t reserved_;
    struct rf__sample_failure failures[RF__SLOT_FAILURES];
};

/* Everything a process needs to find its way around both segments. */
struct rf__segment {
    struct rf__header *header; /* shared: any process can write it */
    /* Private copy of the validated header, taken by rf__segment_format()
     * and rf__segment_attach(); every accessor below reads the layout from
     * here, never from shared memory again: a stray writer could point
     * the header's offsets anywhere. */
    struct rf__header layout;
    size_t control_size;
    uint8_t *arena;
    size_t arena_size;
    int64_t *params;
    const char *path; /* terminated inside the segment */
};

/* The layout that a configuration implies. */
struct rf__layout {
    uint32_t producers, slots, ring_entries, batch_size;
    uint64_t slot_data_bytes, slot_bytes, arena_size;
    uint64_t params_offset, path_offset, producers_offset, consumer_bell_offset;
    uint64_t broken_offset;
    uint64_t rings_offset, ring_stride, control_size;
};

/* Computes offsets and sizes; returns -EINVAL for a zero count, or
 * -EOVERFLOW for more than RF__MAX_SLOTS slots, RF__MAX_PRODUCERS
 * producers, or sizes that do not fit. */
int rf__layout_compute(struct rf__layout *lay, uint32_t producers,
                       uint32_t slots, uint32_t batch_size,
                       uint64_t sample_bytes);

/* Writes a fresh header and initialises rings, bells and states in the
 * mapped control segment. */
void rf__segment_format(struct rf__segment *seg, const struct rf__layout *lay,
                        const int64_t *params, const char *path);

/* Checks a mapped control segment of `size` bytes before it is trusted
 * (any process of the loader can write it): magic, ABI version, header
 * size, segment size; counts in range and every offset and size exactly
 * as rf__layout_compute() makes them, without overflow; the parameters'
 * sample shape fits a slot; each ring's entries, mask, head and tail
 * agree with the header. Returns 0 or RF_E_ABI, with the reason in
 * why[why_len]. */
int rf__segment_validate(const void *base, size_t size, char *why,
                         size_t why_len);

/* Maps both memfds and validates them (producer side). Returns 0 or a
 * negative code with the reason in why. */
int rf__segment_attach(struct rf__segment *seg, int control_fd, int arena_fd,
                       char *why, size_t why_len);

/* Unmaps whatever rf__segment_attach() or the consumer mapped. */
void rf__segment_detach(struct rf__segment *seg);

/* Consumer: writes the header, parameters and dataset path back into the
 * shared segment from its private copies (params and path as given to
 * rf__segment_format()), before a producer attaches: whatever a stray
 * writer put there is gone. Rings, producer states and bells are left
 * as they are. */
void rf__segment_restore(struct rf__segment *seg, const int64_t *params,
                         const char *path);

struct rf__ring *rf__segment_empty_ring(const struct rf__segment *seg,
                                        uint32_t producer);
struct rf__ring *rf__segment_full_ring(const struct rf__segment *seg,
                                       uint32_t producer);
struct rf__producer_state *rf__segment_producer(const struct rf__segment *seg,
                                                uint32_t producer);
struct rf__bell *rf__segment_consumer_bell(const struct rf__segment *seg);
struct rf__broken_list *rf__segment_broken(const struct rf__segment *seg);

/* Pointers into slot `slot` of the arena. */
uint8_t *rf__slot_data(const struct rf__segment *seg, uint32_t slot);
struct rf__slot_meta *rf__slot_meta(const struct rf__segment *seg,
                                    uint32_t slot);
int64_t *rf__slot_labels(const struct rf__segment *seg, uint32_t slot);
uint64_t *rf__slot_indices(const struct rf__segment *seg, uint32_t slot);

#endif /* RF_SEGMENT_H */
