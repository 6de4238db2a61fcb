/*
 * digest.c - the listing digest of a dataset (rf_dataset_info's
 * listing_digest, rf_stats'): which samples it holds, by name and label,
 * in index order, as 64 bits. A checkpoint keeps it, so that resuming on
 * a folder whose files changed but not their number (a file swapped, a
 * class folder renamed) is refused instead of reading other samples at
 * the checkpoint's positions.
 *
 * Not a checksum of the pixels: a folder's files are not read (listing
 * them is all open does), and a file rewritten in place keeps its name.
 * A pack's samples are fixed once written; its digest takes each
 * sample's CRC-32C as well, from the index it already holds.
 */
#include "dataset-internal.h"

#include <string.h>

#include "common/mix64.h"

/* A name's 64 bits: its bytes 8 at a time through the mixer, then its
 * length (a CRC-32C's 32 bits would let a renamed file keep the digest
 * once in 2^32 renames). */
static uint64_t name_bits(const char *name, uint32_t length)
{
    uint64_t bits = length;
    for (uint32_t at = 0; at < length; at += 8) {
        uint64_t word = 0;
        const uint32_t n = length - at < 8 ? length - at : 8;
        memcpy(&word, name + at, n);
        bits = rf__mix64(bits, word);
    }
    return bits;
}

/* One sample's part: its name and label, then (a pack's) its payload's
 * CRC-32C and kind. */
static uint64_t add_sample(uint64_t digest, uint64_t name, uint64_t label,
                           uint64_t payload)
{
    digest = rf__mix64(digest, name);
    digest = rf__mix64(digest, label);
    return rf__mix64(digest, payload);
}

static uint64_t folder_digest(const rf_dataset *ds, uint64_t digest)
{
    for (uint64_t i = 0; i < ds->samples; i++) {
        struct rf__index_entry e;
        rf__index_entry_decode(&e, ds->entries + i * RF__INDEX_ENTRY_SIZE);
        digest = add_sample(digest,
                            name_bits(ds->names + e.name_offset, e.name_length),
                            e.label, 0);
    }
    return digest;
}

static uint64_t pack_digest(const rf_dataset *ds, uint64_t digest)
{
    for (uint64_t i = 0; i < ds->samples; i++) {
        struct rf__pack_entry e;
        rf__pack_entry_decode(&e, ds->entries + i * RF__PACK_ENTRY_SIZE);
        const uint64_t name =
            e.name_length ? name_bits(ds->names + e.name_offset, e.name_length)
                          : 0;
        digest = add_sample(digest, name, (uint64_t)e.label,
                            ((uint64_t)e.kind << 32) | e.crc);
    }
    return digest;
}

uint64_t rf__dataset_digest(const rf_dataset *ds)
{
    /* The counts first, so that an empty listing is not 0 ("not known")
     * and a class folder without samples still counts. */
    uint64_t digest = rf__mix64(ds->samples, ds->classes);
    digest = ds->kind == RF__DATASET_FOLDER ? folder_digest(ds, digest)
                                            : pack_digest(ds, digest);
    return digest ? digest : 1; /* 0 stays "not known" */
}
