/*
 * test-pack-damage.c - damaged packed files: every kind of damage to the
 * header, the index entries or a size the file cannot hold is refused at
 * open with a reason that names the file (and, for a size, the field and
 * both numbers); damaged payloads are named when read; a pack truncated
 * after open gives an error per sample, never a SIGBUS. Setup writes the
 * test pack (pack-samples.h) once, in a scratch folder; the damaged packs
 * are copies.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/internal.h"
#include "source/dataset.h"
#include "source/pack.h"
#include "dataset-files.h"
#include "harness.h"
#include "pack-samples.h"
#include "scratch.h"
#include "test.h"

/* ---- damaged packed files ----------------------------------------------- */

enum entry_field {
    ENTRY_OFFSET,
    ENTRY_KIND,
    ENTRY_LABEL,
    ENTRY_NAME,
    ENTRY_NAME_LENGTH
};

static void edit_entry(uint8_t *bytes, uint64_t i, enum entry_field field,
                       uint64_t value)
{
    struct rf__pack_header h;
    char why[256];
    CHECK_OK(rf__pack_header_decode(&h, bytes, why, sizeof(why)));
    uint8_t *raw = bytes + h.index_offset + i * RF__PACK_ENTRY_SIZE;
    struct rf__pack_entry e;
    rf__pack_entry_decode(&e, raw);
    if (field == ENTRY_OFFSET)
        e.offset = value;
    else if (field == ENTRY_KIND)
        e.kind = (uint8_t)value;
    else if (field == ENTRY_LABEL)
        e.label = (int64_t)value;
    else if (field == ENTRY_NAME_LENGTH)
        e.name_length = (uint32_t)value;
    else { /* a name that starts outside the names area */
        e.name_offset = value;
        e.name_length = 4;
    }
    rf__pack_entry_encode(&e, raw);
    reseal(bytes, &h);
}

static void test_pack_damage_to_entries(const uint8_t *good, size_t size)
{
    uint8_t *bytes = malloc(size);
    CHECK(bytes);
    const struct {
        enum entry_field field;
        uint64_t value;
        const char *reason;
    } edits[] = {
        {ENTRY_OFFSET, size, "index entry 2: its payload lies outside"},
        {ENTRY_OFFSET, 3, "index entry 2: its payload lies outside"},
        {ENTRY_KIND, 7, "index entry 2: its kind is unknown"},
        {ENTRY_LABEL, 3, "index entry 2: its label is outside"},
        {ENTRY_NAME, 1u << 20, "index entry 2: its name lies outside"},
        {ENTRY_NAME_LENGTH, 4096,
         "index entry 2: its name is longer than 4095 bytes"},
    };
    for (size_t k = 0; k < sizeof(edits) / sizeof(edits[0]); k++) {
        memcpy(bytes, good, size);
        edit_entry(bytes, 2, edits[k].field, edits[k].value);
        check_open_fails(damaged(bytes, size), RF_E_CORRUPT_SAMPLE,
                         edits[k].reason);
    }
    /* classes is the largest label + 1, no more: a count read from the
     * file that others size their tables by */
    memcpy(bytes, good, size);
    struct rf__pack_header h;
    char why[256];
    CHECK_OK(rf__pack_header_decode(&h, bytes, why, sizeof(why)));
    h.classes = 4;
    reseal(bytes, &h);
    check_open_fails(damaged(bytes, size), RF_E_CORRUPT_SAMPLE,
                     "its header's classes is 4, but its largest label is 2");
    free(bytes);
}

/* Each size or offset of a header that the file cannot hold is refused
 * before anything is read or allocated, naming the field and both numbers
 * (`bytes` holds the good file, h its header, both left damaged). */
static void test_pack_damage_to_sizes(const struct rf__pack_header *h,
                                      uint8_t *bytes, size_t size)
{
    char expected[256];
    struct rf__pack_header bad = *h;
    bad.version = 1;
    bad.samples = size; /* more entries than the file has bytes */
    rf__pack_header_encode(&bad, bytes);
    rf__format(expected, sizeof(expected),
               "its header's samples, %zu index entries of 40 bytes at "
               "index_offset %llu, do not fit its %zu bytes (room for %llu)",
               size, (unsigned long long)h->index_offset, size,
               (unsigned long long)((size - h->index_offset) / 40));
    check_open_fails(damaged(bytes, size), RF_E_CORRUPT_SAMPLE, expected);
    bad = *h;
    bad.version = 1;
    bad.names_size = size; /* and the dictionary after it */
    bad.dict_offset = bad.names_offset + bad.names_size;
    rf__pack_header_encode(&bad, bytes);
    rf__format(expected, sizeof(expected),
               "its header's names_size, %zu bytes at names_offset %llu, "
               "runs past the end of the file: it has %llu bytes after it",
               size, (unsigned long long)h->names_offset,
               (unsigned long long)(size - h->names_offset));
    check_open_fails(damaged(bytes, size), RF_E_CORRUPT_SAMPLE, expected);
    /* A dictionary above the limit, in a sparse file: refused from the
     * header alone. */
    bad = *h;
    bad.version = 1;
    bad.dict_size = RF__PACK_DICT_MAX + 1;
    bad.file_size = bad.dict_offset + bad.dict_size;
    rf__pack_header_encode(&bad, bytes);
    const char *path = damaged(bytes, (size_t)bad.dict_offset);
    CHECK_EQ(truncate(path, (off_t)bad.file_size), 0);
    check_open_fails(path, RF_E_CORRUPT_SAMPLE,
                     "its header's dict_size, 67108865 bytes, is more than "
                     "the 67108864 (64 MiB) a dictionary may have");
}

static void test_pack_damage_to_header(const uint8_t *good, size_t size)
{
    uint8_t *bytes = malloc(size + 1);
    CHECK(bytes);
    memcpy(bytes, good, size);
    bytes[0] = 'X';
    check_open_fails(damaged(bytes, size), RF_E_CORRUPT_SAMPLE,
                     "not a ringfeed packed file");
    memcpy(bytes, good, size);
    bytes[120] ^= 1; /* reserved, but covered by the checksum */
    check_open_fails(damaged(bytes, size), RF_E_CORRUPT_SAMPLE,
                     "header's checksum does not match");
    memcpy(bytes, good, size);
    check_open_fails(damaged(bytes, size - 1), RF_E_CORRUPT_SAMPLE,
                     "truncated");
    check_open_fails(damaged(bytes, RF__PACK_HEADER_SIZE - 1),
                     RF_E_CORRUPT_SAMPLE, "fewer than a header");
    bytes[size] = 0;
    check_open_fails(damaged(bytes, size + 1), RF_E_CORRUPT_SAMPLE, "appended");
    bytes[size - sizeof(pack_dict) - 2] ^= 1; /* in the names */
    check_open_fails(damaged(bytes, size), RF_E_CORRUPT_SAMPLE,
                     "checksum of its index does not match");
    memcpy(bytes, good, size);
    struct rf__pack_header h;
    char why[256];
    CHECK_OK(rf__pack_header_decode(&h, bytes, why, sizeof(why)));
    h.version = 2;
    rf__pack_header_encode(&h, bytes);
    check_open_fails(damaged(bytes, size), RF_E_CORRUPT_SAMPLE,
                     "format version 2 is newer");
    /* Areas that cannot be, refused before anything is copied: names
     * without samples, and an index beyond the end whose sizes wrap
     * around to look as if they fit. */
    struct rf__pack_header bad = h;
    bad.version = 1;
    bad.samples = 0;
    bad.names_offset = bad.index_offset;
    bad.names_size = size - bad.index_offset;
    bad.dict_offset = size;
    bad.dict_size = 0;
    bad.flags = RF__PACK_FLAG_NAMES;
    rf__pack_header_encode(&bad, bytes);
    char expected[160];
    rf__format(expected, sizeof(expected),
               "its header's names_size, %llu bytes, is more than 4096 bytes "
               "for each of its 0 samples",
               (unsigned long long)bad.names_size);
    check_open_fails(damaged(bytes, size), RF_E_CORRUPT_SAMPLE, expected);
    bad.index_offset = bad.names_offset = bad.dict_offset = size + 4096;
    bad.names_size = 0;
    bad.dict_size = (uint64_t)size - bad.dict_offset; /* wraps */
    bad.flags = RF__PACK_FLAG_DICT;
    rf__pack_header_encode(&bad, bytes);
    rf__format(expected, sizeof(expected),
               "its header's index_offset %zu is not between the end of its "
               "header (128) and the end of the file (%zu bytes)",
               size + 4096, size);
    check_open_fails(damaged(bytes, size), RF_E_CORRUPT_SAMPLE, expected);
    test_pack_damage_to_sizes(&h, bytes, size);
    /* A JPEG's first bytes, padded to a whole header. */
    uint8_t jpeg_like[RF__PACK_HEADER_SIZE];
    memset(jpeg_like, '.', sizeof(jpeg_like));
    const uint8_t soi_app0[4] = {0xff, 0xd8, 0xff, 0xe0};
    memcpy(jpeg_like, soi_app0, sizeof(soi_app0));
    check_open_fails(damaged(jpeg_like, sizeof(jpeg_like)), RF_E_CORRUPT_SAMPLE,
                     "(a JPEG file)");
    free(bytes);
}

/* Payload damage is found when the sample is read, with its name. */
static void test_pack_damage_to_payloads(const uint8_t *good, size_t size)
{
    uint8_t *bytes = malloc(size);
    CHECK(bytes);
    memcpy(bytes, good, size);
    bytes[pack_samples[0].offset + 5] ^= 0x10;
    bytes[pack_samples[1].offset + 5] ^= 0x10;
    rf_dataset *ds = open_or_die(damaged(bytes, size));
    rf_sample_info info;
    CHECK_EQ(rf_dataset_read(ds, 0, &info), RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(rf_dataset_error(ds), "sample 0 (cls/a.jpg, packed offset "
                                         "128)");
    CHECK_CONTAINS(rf_dataset_error(ds), "payload checksum mismatch");
    CHECK_CONTAINS(rf_dataset_error(ds), "damaged.pack");
    printf("  refused as expected: %s\n", rf_dataset_error(ds));
    char offset[64];
    rf__format(offset, sizeof(offset), "sample 1 (packed offset %llu)",
               (unsigned long long)pack_samples[1].offset);
    CHECK_EQ(rf_dataset_read(ds, 1, &info), RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(rf_dataset_error(ds), offset);
    CHECK_OK(rf_dataset_read(ds, 3, &info)); /* the rest reads fine */
    CHECK_EQ(rf_dataset_error(ds)[0], '\0');
    rf_dataset_close(ds);
    free(bytes);
}

/* One kind of damage to a copy of the test pack. */
static void damage_test_pack(void (*damage)(const uint8_t *, size_t))
{
    size_t size;
    uint8_t *good = read_whole(at("test.pack"), &size);
    damage(good, size);
    free(good);
}

TEST_CASE(test_pack_damaged_header, "pack", "damaged header refused")
{
    damage_test_pack(test_pack_damage_to_header);
}

TEST_CASE(test_pack_damaged_entries, "pack", "damaged index entries refused")
{
    damage_test_pack(test_pack_damage_to_entries);
}

TEST_CASE(test_pack_damaged_payloads, "pack",
          "damaged payloads named when read")
{
    damage_test_pack(test_pack_damage_to_payloads);
}

/* A pack truncated (or emptied) while open: samples past the new end fail
 * with a reason naming the file, the others still read, and nothing
 * touches the file's pages through a mapping (which would be a SIGBUS). */
TEST_CASE(test_pack_truncated_after_open, "pack",
          "truncated after open: an error per sample")
{
    size_t size;
    uint8_t *bytes = read_whole(at("test.pack"), &size);
    const char *path = damaged(bytes, size);
    rf_dataset *ds = open_or_die(path);
    CHECK_EQ(truncate(path, (off_t)pack_samples[1].offset), 0);
    rf_sample_info info;
    check_pack_sample(ds, 0);
    CHECK_EQ(rf_dataset_read(ds, 3, &info), RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(rf_dataset_error(ds), "truncated after it was opened");
    CHECK_CONTAINS(rf_dataset_error(ds), "sample 3 (raw/3");
    CHECK_CONTAINS(rf_dataset_error(ds), path);
    CHECK_EQ(truncate(path, 0), 0);
    for (size_t i = 0; i < PACK_SAMPLES; i++) {
        const int rc = rf_dataset_read(ds, i, &info);
        CHECK(rc == (pack_samples[i].size ? RF_E_CORRUPT_SAMPLE : 0));
    }
    printf("  refused as expected: %s\n", rf_dataset_error(ds));
    size_t dict_size = 0;
    const void *dict = rf__dataset_dict(ds, &dict_size);
    CHECK(dict_size == sizeof(pack_dict) &&
          memcmp(dict, pack_dict, dict_size) == 0);
    rf_dataset_close(ds);
    free(bytes);
    printf("pack: truncated after open: an error per sample, no SIGBUS\n");
}

static void setup(void)
{
    scratch_make(base, sizeof(base), "pack-damage");
    make_pack_samples();
    write_test_pack(at("test.pack"), false);
}

static void teardown(void)
{
    remove_tree(base);
}

int main(int argc, char **argv)
{
    return TEST_MAIN_WITH(argc, argv, setup, teardown);
}
