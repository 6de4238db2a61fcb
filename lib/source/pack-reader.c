/*
 * pack-reader.c - the packed-file kind of rf_dataset (dataset-internal.h).
 * The header is read and checked (pack-format.c) against the file's real
 * size before anything else is read or allocated. The index, names and
 * dictionary are read once with pread() into a sealed memfd (handed to
 * producers the same way), mapped read-only and checked at open, so that
 * a file truncated under a reader is an error, never a SIGBUS; payloads
 * are read with pread() and checked against their CRC-32C on every read.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/assert.h"
#include "common/fds.h"
#include "common/internal.h"
#include "source/dataset-internal.h"
#include "source/file-io.h"
#include "source/pack-format.h"

/* What makes a memfd of metadata safe to map: it can neither shrink
 * (SIGBUS) nor change. */
#define METADATA_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)

/* ---- opening ------------------------------------------------------------ */

/* Every entry, names included, once the metadata is mapped; and classes,
 * which must be the largest label + 1. Counts the samples of each kind
 * on the way (an entry's kind is known to be one once it passed). */
static int check_pack_entries(rf_dataset *ds, char *why, size_t why_len)
{
    int64_t largest = -1;
    for (uint64_t i = 0; i < ds->samples; i++) {
        struct rf__pack_entry e;
        rf__pack_entry_decode(&e, ds->entries + i * RF__PACK_ENTRY_SIZE);
        const char *problem = rf__pack_entry_problem(&ds->header, &e);
        if (!problem && e.name_length &&
            !rf__name_is_whole(ds->names, ds->names_size, e.name_offset,
                               e.name_length))
            problem = "its name lies outside the names area";
        if (problem) {
            rf__pack_describe_entry_problem(i, &e, problem, why, why_len);
            return -1;
        }
        largest = e.label > largest ? e.label : largest;
        RF_ASSERT(e.kind == RF_SAMPLE_JPEG || e.kind == RF_SAMPLE_ZSTD);
        ds->samples_of_kind[e.kind]++;
    }
    if ((int64_t)ds->classes == largest + 1)
        return 0;
    rf__format(why, why_len,
               "its header's classes is %u, but its largest label is %lld "
               "(classes must be the largest label + 1)",
               ds->classes, (long long)largest);
    return -1;
}

/* The entries of a piece of metadata checked as it is read, all but their
 * names: a damaged index (a sparse file's hole reads as entries of zeros)
 * is refused at its first bad entry, not after all of it was read. */
struct piece_check {
    const struct rf__pack_header *header;
    char *why;
    size_t why_len;
};

_Static_assert(RF__COPY_PIECE % RF__PACK_ENTRY_SIZE == 0,
               "a piece holds whole index entries");

static int check_piece_entries(void *ctx, const uint8_t *data, uint64_t at,
                               size_t size)
{
    const struct piece_check *c = ctx;
    const uint64_t index_size = c->header->samples * RF__PACK_ENTRY_SIZE;
    for (uint64_t o = at; o < at + size && o < index_size;
         o += RF__PACK_ENTRY_SIZE) {
        struct rf__pack_entry e;
        rf__pack_entry_decode(&e, data + (o - at));
        const char *problem = rf__pack_entry_problem(c->header, &e);
        if (problem) {
            rf__pack_describe_entry_problem(o / RF__PACK_ENTRY_SIZE, &e,
                                            problem, c->why, c->why_len);
            return -1;
        }
    }
    return 0;
}

static int index_checksum_mismatch(char *why, size_t why_len)
{
    rf__format(why, why_len,
               "the checksum of its index does not match (meta_crc, which "
               "covers its index, names and dictionary)");
    return RF__FORMAT_DAMAGED;
}

/* Says why rf__copy_region() failed on the metadata at `offset`. */
static int copy_failed(int rc, uint64_t offset, uint64_t copied, char *why,
                       size_t why_len)
{
    if (rc == -ENODATA)
        rf__format(why, why_len,
                   "it ends at %llu bytes, inside its index: it was truncated "
                   "while it was opened",
                   (unsigned long long)offset + (unsigned long long)copied);
    else if (rc < 0)
        rf__format(why, why_len, "cannot copy its index: %s", strerror(-rc));
    /* RF__COPY_REFUSED: the check said why */
    return RF__FORMAT_DAMAGED;
}

/* A memfd of `size` bytes, all holes (no memory until written), or -1. */
static int metadata_memfd(uint64_t size, char *why, size_t why_len)
{
    const int fd = rf__fd_off_stdio(
        memfd_create("ringfeed-pack-index", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (fd >= 0 && ftruncate(fd, (off_t)size) == 0)
        return fd;
    rf__format(why, why_len, "cannot make a memfd for its index: %s",
               strerror(errno));
    if (fd >= 0)
        close(fd);
    return -1;
}

/* Index, names and dictionary are read once with pread() into a sealed
 * memfd and mapped from there, never mapped from the file itself: a file
 * truncated while it is open would turn every access to a mapping of it
 * past the new end into a SIGBUS. Sealed (no write, grow or shrink), the
 * memfd can be handed to producers (rf__dataset_index_fd()), which map
 * the same pages instead of a copy each. The copy is made and checked
 * (entries, meta_crc) a piece at a time, and leaves pages of zeros
 * unwritten: a damaged header whose index is a hole of gigabytes costs a
 * piece of memory and one piece's read. */
static int copy_metadata(rf_dataset *ds, uint64_t size, char *why,
                         size_t why_len)
{
    const struct rf__pack_header *h = &ds->header;
    struct piece_check pc = {h, why, why_len};
    const int fd = metadata_memfd(size, why, why_len);
    if (fd < 0)
        return RF__FORMAT_DAMAGED;
    const struct rf__copy copy = {.from = ds->fd,
                                  .offset = h->index_offset,
                                  .size = size,
                                  .to = fd,
                                  .crc32c = &ds->crc,
                                  .check = {check_piece_entries, &pc}};
    uint32_t crc = 0;
    uint64_t copied = 0;
    int rc = rf__copy_region(&copy, &crc, &copied);
    if (rc != 0)
        rc = copy_failed(rc, h->index_offset, copied, why, why_len);
    else if (crc != h->meta_crc)
        rc = index_checksum_mismatch(why, why_len);
    else if (fcntl(fd, F_ADD_SEALS, METADATA_SEALS | F_SEAL_SEAL) < 0) {
        rf__format(why, why_len, "cannot seal the copy of its index: %s",
                   strerror(errno));
        rc = RF__FORMAT_DAMAGED;
    }
    if (rc < 0)
        close(fd);
    else
        ds->meta_fd = fd;
    return rc;
}

/* A copy handed over by the consumer must be sealed (else it could shrink
 * under us) and as long as this file's metadata; meta_crc, checked next,
 * says whether it is this file's. */
static int adopt_metadata(rf_dataset *ds, int index_fd, uint64_t size,
                          char *why, size_t why_len)
{
    struct stat st;
    const int seals = fcntl(index_fd, F_GET_SEALS);
    if (seals < 0 || (seals & METADATA_SEALS) != METADATA_SEALS ||
        fstat(index_fd, &st) < 0 || (uint64_t)st.st_size != size) {
        rf__format(why, why_len,
                   "the copy of its index handed over (fd %d) is not a "
                   "sealed %llu-byte memfd",
                   index_fd, (unsigned long long)size);
        return RF__FORMAT_DAMAGED;
    }
    ds->meta_fd = fcntl(index_fd, F_DUPFD_CLOEXEC, 3);
    if (ds->meta_fd < 0) {
        rf__format(why, why_len, "cannot keep its index (fd %d): %s", index_fd,
                   strerror(errno));
        return RF__FORMAT_DAMAGED;
    }
    return 0;
}

/* Points entries, names and dictionary into the mapped metadata. */
static void use_metadata(rf_dataset *ds, const uint8_t *meta)
{
    const struct rf__pack_header *h = &ds->header;
    ds->entries = meta;
    ds->names = (const char *)meta + (h->names_offset - h->index_offset);
    ds->names_size = h->names_size;
    ds->dict = h->dict_size ? meta + (h->dict_offset - h->index_offset) : NULL;
}

static int map_metadata(rf_dataset *ds, uint64_t size, char *why,
                        size_t why_len)
{
    void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, ds->meta_fd, 0);
    if (map == MAP_FAILED) {
        rf__format(why, why_len, "cannot map its index: %s", strerror(errno));
        return RF__FORMAT_DAMAGED;
    }
    ds->meta_map = map;
    ds->meta_map_size = (size_t)size;
    use_metadata(ds, map);
    return 0;
}

/* Gets index, names and dictionary (from the file, or from the consumer's
 * copy in index_fd), maps them and checks their checksum: a copy made here
 * was checked as it was read, one handed over is checked once mapped. */
static int load_pack_metadata(rf_dataset *ds, int index_fd, char *why,
                              size_t why_len)
{
    const struct rf__pack_header *h = &ds->header;
    const uint64_t size = h->file_size - h->index_offset;
    if (size == 0) /* no samples, names or dictionary: the CRC of nothing */
        return h->meta_crc == 0 ? 0 : index_checksum_mismatch(why, why_len);
    int rc = index_fd >= 0 ? adopt_metadata(ds, index_fd, size, why, why_len)
                           : copy_metadata(ds, size, why, why_len);
    if (rc == 0)
        rc = map_metadata(ds, size, why, why_len);
    if (rc == 0 && index_fd >= 0 &&
        rf__crc32c(&ds->crc, 0, ds->meta_map, size) != h->meta_crc)
        rc = index_checksum_mismatch(why, why_len);
    return rc;
}

static int read_pack_header(rf_dataset *ds, char *why, size_t why_len)
{
    uint8_t raw[RF__PACK_HEADER_SIZE];
    const ssize_t got = pread(ds->fd, raw, sizeof(raw), 0);
    if (got < 0) {
        rf__format(why, why_len, "cannot read it: %s", strerror(errno));
        return RF__FORMAT_DAMAGED;
    }
    if ((size_t)got < sizeof(raw) &&
        (size_t)got >= sizeof(RF__PACK_MAGIC) - 1 &&
        memcmp(raw, RF__PACK_MAGIC, sizeof(RF__PACK_MAGIC) - 1) == 0) {
        rf__format(why, why_len,
                   "a ringfeed packed file cut short: it has %zd bytes, "
                   "fewer than a header (%u): it was truncated",
                   got, RF__PACK_HEADER_SIZE);
        return RF__FORMAT_DAMAGED;
    }
    if ((size_t)got < sizeof(raw)) {
        rf__format(why, why_len,
                   "not a ringfeed packed file: it has %zd bytes, fewer than "
                   "a header",
                   got);
        return RF__FORMAT_FOREIGN;
    }
    return rf__pack_header_decode(&ds->header, raw, why, why_len);
}

/* What the user can do about a file that is refused. */
static const char *pack_advice(int problem)
{
    switch (problem) {
    case RF__FORMAT_FOREIGN:
        return "; pass a folder of class folders or a file written by "
               "ringfeed-pack";
    case RF__FORMAT_NEWER:
        return ""; /* the reason says it: upgrade */
    default:
        return "; the file is damaged: copy it again, or write it again "
               "with ringfeed-pack";
    }
}

int rf__pack_open(rf_dataset *ds, uint64_t size, int index_fd, char *why,
                  size_t why_len)
{
    char reason[RF__DETAIL / 2];
    ds->kind = RF__DATASET_PACK;
    int rc = read_pack_header(ds, reason, sizeof(reason));
    if (rc == 0)
        rc = rf__pack_check_areas(&ds->header, size, reason, sizeof(reason));
    if (rc == 0) {
        ds->samples = ds->header.samples;
        ds->classes = ds->header.classes;
        rc = load_pack_metadata(ds, index_fd, reason, sizeof(reason));
    }
    if (rc == 0)
        rc = check_pack_entries(ds, reason, sizeof(reason));
    if (rc == 0)
        return 0;
    rf__format(why, why_len, "%s: %s%s", ds->path, reason, pack_advice(rc));
    return RF_E_CORRUPT_SAMPLE;
}

void rf__pack_close(rf_dataset *ds)
{
    if (ds->meta_map)
        munmap(ds->meta_map, ds->meta_map_size);
    if (ds->meta_fd >= 0)
        close(ds->meta_fd);
}

/* A packed file's copy of its metadata, for producers. */
int rf__pack_index_fd(rf_dataset *ds, int *fd)
{
    if (ds->meta_fd < 0)
        return 0; /* nothing to share */
    *fd = fcntl(ds->meta_fd, F_DUPFD_CLOEXEC, 3);
    if (*fd >= 0)
        return 0;
    const int rc = -errno;
    rf__format(ds->error, sizeof(ds->error),
               "%s: cannot hand over the copy of its index: %s", ds->path,
               strerror(errno));
    return rc;
}

/* ---- reading samples ---------------------------------------------------- */

/* "sample 12 (cls/a.jpg, packed offset 128) of /data/x.pack", or without
 * the name when the pack stores none. */
static void describe_packed_sample(const rf_dataset *ds, uint64_t index,
                                   const struct rf__pack_entry *e, char *out,
                                   size_t len)
{
    const char *name = e->name_length ? ds->names + e->name_offset : NULL;
    char whole[2 * RF__PATH_MAX + 64];
    rf__format(whole, sizeof(whole),
               "sample %llu (%s%spacked offset %llu) of %s",
               (unsigned long long)index, name ? name : "", name ? ", " : "",
               (unsigned long long)e->offset, ds->path);
    rf__copy_elided(out, len, whole);
}

void rf__pack_describe(const rf_dataset *ds, uint64_t index, char *out,
                       size_t len)
{
    struct rf__pack_entry e;
    rf__pack_entry_decode(&e, ds->entries + index * RF__PACK_ENTRY_SIZE);
    describe_packed_sample(ds, index, &e, out, len);
}

/* The name of a packed sample: its stored name, else "packed offset N". */
static const char *packed_name(rf_dataset *ds, const struct rf__pack_entry *e)
{
    if (e->name_length)
        return ds->names + e->name_offset;
    rf__format(ds->name, sizeof(ds->name), "packed offset %llu",
               (unsigned long long)e->offset);
    return ds->name;
}

static int packed_sample_failed(rf_dataset *ds, uint64_t index,
                                const struct rf__pack_entry *e,
                                const char *what, int rc)
{
    char who[RF__SAMPLE_NAME_MAX];
    describe_packed_sample(ds, index, e, who, sizeof(who));
    return rf__dataset_sample_failed(ds, who, what, rc);
}

int rf__pack_read(rf_dataset *ds, uint64_t index, rf_sample_info *info)
{
    struct rf__pack_entry e;
    rf__pack_entry_decode(&e, ds->entries + index * RF__PACK_ENTRY_SIZE);
    ssize_t got = rf__dataset_reserve_buffer(ds, e.size);
    if (got == 0)
        got = rf__pread_all(ds->fd, ds->buffer, e.size, e.offset);
    if (got < 0)
        return packed_sample_failed(ds, index, &e, "cannot read it", (int)got);
    if ((size_t)got < e.size)
        return packed_sample_failed(ds, index, &e,
                                    "the file was truncated after it was "
                                    "opened; copy it again",
                                    RF_E_CORRUPT_SAMPLE);
    const uint32_t crc = rf__crc32c(&ds->crc, 0, ds->buffer, e.size);
    if (crc != e.crc) {
        char what[160];
        rf__format(what, sizeof(what),
                   "payload checksum mismatch (stored %08x, computed %08x); "
                   "the file is damaged: copy or write it again",
                   e.crc, crc);
        return packed_sample_failed(ds, index, &e, what, RF_E_CORRUPT_SAMPLE);
    }
    *info = (rf_sample_info){.data = ds->buffer,
                             .size = e.size,
                             .label = e.label,
                             .kind = (rf_sample_kind)e.kind,
                             .name = packed_name(ds, &e)};
    return 0;
}
