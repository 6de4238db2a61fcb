/*
 * test-pack-sizes.c - the sizes and bytes a pack's reader refuses.
 *
 * A header that claims a 6 GiB index in a sparse file is refused at once,
 * with little memory, by the reader and by `ringfeed-pack --verify`;
 * sizes beyond the file name the field and both numbers; the copy of the
 * metadata takes no memory for zeros; and one cap (1 GiB) bounds a sample
 * in a folder, in a pack and in the writer. A pack cut inside its header
 * is called truncated; reserved bytes that are not zero, and a
 * name_offset without a name, are refused even with both checksums
 * right; meta_crc's message names the areas it covers. Each case works in
 * an empty folder of its own (pack-folder.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/internal.h"
#include "source/crc32c.h"
#include "source/dataset.h"
#include "source/pack.h"
#include "harness.h"
#include "pack-folder.h"
#include "proc.h"
#include "test.h"

/* ---- sizes read from a file --------------------------------------------- */

static uint8_t *read_whole(const char *path, size_t *size)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    CHECK(fd >= 0 && fstat(fd, &st) == 0);
    *size = (size_t)st.st_size;
    uint8_t *bytes = malloc(*size);
    CHECK(bytes);
    CHECK_EQ(read(fd, bytes, *size), (long long)*size);
    close(fd);
    return bytes;
}

/* The index a sparse pack's header claims: 6 GiB, as in the report of a
 * pack of 4 KiB on disk that cost 6.1 GB of memory and 18-39 s to refuse
 * (the whole claimed index was copied before its checksum was compared). */
#define SPARSE_INDEX (UINT64_C(6) << 30)

/* A pack whose header claims a SPARSE_INDEX-byte index, with a wrong
 * meta_crc, in a file of that apparent size holding a few hundred bytes:
 * two good entries, then a hole. Returns its path. */
static const char *make_sparse_pack(void)
{
    rf_pack_writer *w = create_or_die(at("small.pack"), 0, 0, 0);
    add_text(w, "a0", 0);
    add_text(w, "b1", 1);
    test_finish_pack(w);
    size_t size = 0;
    uint8_t *bytes = read_whole(at("small.pack"), &size);
    CHECK_EQ(unlink(at("small.pack")), 0);
    struct rf__pack_header h;
    char why[256];
    CHECK_OK(rf__pack_header_decode(&h, bytes, why, sizeof(why)));
    for (uint64_t i = 0; i < 2; i++) { /* no names: the area is empty */
        uint8_t *raw = bytes + h.index_offset + i * RF__PACK_ENTRY_SIZE;
        struct rf__pack_entry e;
        rf__pack_entry_decode(&e, raw);
        e.name_offset = e.name_length = 0;
        rf__pack_entry_encode(&e, raw);
    }
    h.samples = SPARSE_INDEX / RF__PACK_ENTRY_SIZE;
    h.names_offset = h.index_offset + h.samples * RF__PACK_ENTRY_SIZE;
    h.dict_offset = h.file_size = h.names_offset;
    h.names_size = h.dict_size = 0;
    h.flags = 0;
    h.meta_crc = 0; /* wrong, as in the report */
    rf__pack_header_encode(&h, bytes);
    const char *path = at("sparse.pack");
    write_file(path, bytes,
               (size_t)h.index_offset + (size_t)2 * RF__PACK_ENTRY_SIZE);
    CHECK_EQ(truncate(path, (off_t)h.file_size), 0);
    free(bytes);
    return path;
}

/* The most a refusal of the sparse pack may cost: the copy of its index
 * used to take 6 GiB. */
#define REFUSAL_MEMORY (UINT64_C(256) << 20)
#define REFUSAL_SECONDS 10.0

/* In a child: caps its address space at what it maps now plus
 * REFUSAL_MEMORY (not under a sanitizer, whose shadow memory fills any
 * cap; the parent's check of its peak RSS still holds there), and kills
 * it should it run for long. */
static void limit_child(void)
{
#ifndef ALLOCATOR_ABORTS
    struct rlimit old;
    CHECK_EQ(getrlimit(RLIMIT_AS, &old), 0);
    const rlim_t cap = (rlim_t)mapped_bytes() + REFUSAL_MEMORY;
    if (old.rlim_max == RLIM_INFINITY || old.rlim_max >= cap) {
        const struct rlimit capped = {cap, old.rlim_max};
        CHECK_EQ(setrlimit(RLIMIT_AS, &capped), 0);
    }
#endif
    alarm(60);
}

/* In a child: rf_dataset_open() of the sparse pack (tool and err_path
 * are verify_sparse_pack()'s). */
static void open_sparse_pack(const char *tool, const char *path,
                             const char *err_path)
{
    (void)tool;
    (void)err_path;
    limit_child();
    rf_dataset *ds = NULL;
    char *why = NULL;
    CHECK_EQ(rf_dataset_open(&ds, path, &why), RF_E_CORRUPT_SAMPLE);
    char expected[1100];
    rf__format(expected, sizeof(expected),
               "%s: index entry 2: it is all zeros (a hole in a sparse file",
               path);
    CHECK_CONTAINS(why, expected);
    CHECK_CONTAINS(why, "write it again with ringfeed-pack");
    printf("  refused as expected: %s\n", why);
    fflush(stdout);
    _exit(0);
}

/* In a child: `ringfeed-pack --verify path`, its stderr into err_path. */
static void verify_sparse_pack(const char *tool, const char *path,
                               const char *err_path)
{
    limit_child();
    const int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && dup2(fd, 2) == 2);
    execl(tool, tool, "--verify", path, "--jobs", "1", (char *)NULL);
    _exit(127);
}

/* Runs run(tool, path, err_path) in a child; returns its exit status,
 * and prints and checks its time and peak RSS. */
static int run_measured(void (*run)(const char *, const char *, const char *),
                        const char *tool, const char *path,
                        const char *err_path, const char *what)
{
    fflush(stdout);
    fflush(stderr);
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    const pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        run(tool, path, err_path);
        _exit(1);
    }
    int status = 0;
    struct rusage ru;
    CHECK_EQ(wait4(child, &status, 0, &ru), child);
    clock_gettime(CLOCK_MONOTONIC, &end);
    const double seconds = (double)(end.tv_sec - start.tv_sec) +
                           (double)(end.tv_nsec - start.tv_nsec) * 1e-9;
    printf("  %s: refused in %.3f s, peak RSS %ld KiB\n", what, seconds,
           ru.ru_maxrss);
    CHECK(WIFEXITED(status));
    CHECK_LT(seconds, REFUSAL_SECONDS);
    CHECK_LT((uint64_t)ru.ru_maxrss * 1024, REFUSAL_MEMORY);
    return WEXITSTATUS(status);
}

/* The ringfeed-pack that make check built (tests/tools-lib.sh finds it
 * the same way), or NULL. */
static const char *pack_tool(char *out, size_t len)
{
    const char *tools = getenv("RINGFEED_TOOLS");
    if (!tools)
        return NULL;
    rf__format(out, len, "%s/ringfeed-pack", tools);
    return access(out, X_OK) == 0 ? out : NULL;
}

/* A header that claims a 6 GiB index in a sparse file of that size is
 * refused at the index's first entry that is a hole, in a fraction of a
 * second and without memory to speak of, naming the file and the entry;
 * by rf_dataset_open() and by `ringfeed-pack --verify`. */
TEST_CASE(test_sparse_pack_refused_by_open, "sizes",
          "a 6 GiB index in a sparse file: rf_dataset_open")
{
    own_folder();
    const char *path = make_sparse_pack();
    CHECK_EQ(
        run_measured(open_sparse_pack, NULL, path, NULL, "rf_dataset_open"), 0);
    clear_folder();
}

TEST_CASE(test_sparse_pack_refused_by_verify, "sizes",
          "a 6 GiB index in a sparse file: ringfeed-pack --verify")
{
    own_folder();
    char tool[1024];
    if (!pack_tool(tool, sizeof(tool)))
        TEST_SKIP_BECAUSE("no ringfeed-pack (RINGFEED_TOOLS unset; make check "
                          "sets it)");
    const char *path = make_sparse_pack();
    const char *err = at("verify.err");
    CHECK_EQ(run_measured(verify_sparse_pack, tool, path, err,
                          "ringfeed-pack --verify"),
             1);
    char text[2048];
    read_text(err, text, sizeof(text));
    CHECK_CONTAINS(text, "sparse.pack: index entry 2: it is all zeros");
    printf("  refused as expected: %s", text);
    clear_folder();
}

/* A header's sizes that the file cannot hold name the field and both
 * numbers: a pack made larger (sparse) than its header says, and a header
 * that claims a 6 GiB index in a file of 4 KiB. */
TEST_CASE(test_sizes_beyond_the_file, "sizes",
          "beyond the file: the field and both numbers named")
{
    own_folder();
    write_text_pack(at("grown.pack"), "a0");
    struct stat st;
    CHECK_EQ(stat(at("grown.pack"), &st), 0);
    CHECK_EQ(truncate(at("grown.pack"), (off_t)(UINT64_C(5) << 30)), 0);
    char expected[1100];
    rf__format(expected, sizeof(expected),
               "%s: its header's file_size is %lld bytes, but the file has "
               "5368709120 (something was appended to it)",
               at("grown.pack"), (long long)st.st_size);
    rf_dataset *ds = NULL;
    char *why = NULL;
    CHECK_EQ(rf_dataset_open(&ds, at("grown.pack"), &why), RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(why, expected);
    CHECK_CONTAINS(why, "write it again with ringfeed-pack");
    printf("  refused as expected: %s\n", why);
    free(why);
    struct rf__pack_header h = {.version = RF__PACK_VERSION,
                                .header_size = RF__PACK_HEADER_SIZE,
                                .entry_size = RF__PACK_ENTRY_SIZE,
                                .samples = SPARSE_INDEX / RF__PACK_ENTRY_SIZE,
                                .classes = 1,
                                .index_offset = RF__PACK_HEADER_SIZE,
                                .file_size = 4096};
    h.names_offset = h.dict_offset = h.index_offset + SPARSE_INDEX;
    uint8_t bytes[4096] = {0};
    rf__pack_header_encode(&h, bytes);
    write_file(at("claims.pack"), bytes, sizeof(bytes));
    rf__format(expected, sizeof(expected),
               "%s: its header's samples, %llu index entries of 40 bytes at "
               "index_offset 128, do not fit its 4096 bytes (room for 99)",
               at("claims.pack"), (unsigned long long)h.samples);
    CHECK_EQ(rf_dataset_open(&ds, at("claims.pack"), &why),
             RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(why, expected);
    printf("  refused as expected: %s\n", why);
    free(why);
    clear_folder();
    printf("sizes beyond the file: refused naming the field and both "
           "numbers\n");
}

/* The copy of a pack's metadata that producers map (a memfd) takes no
 * memory for pages of zeros: here an 8 MiB dictionary of zeros, which the
 * copy used to hold in full. So a damaged index of zeros costs no more
 * memory than the file holds. */
TEST_CASE(test_metadata_copy_skips_zeros, "sizes",
          "the metadata copy holds no pages of zeros")
{
    own_folder();
    static const uint8_t zeros[8u << 20];
    rf_pack_writer *w = create_or_die(at("zeros.pack"), 4, 4, 3);
    CHECK_OK(rf_pack_writer_set_dictionary(w, zeros, sizeof(zeros)));
    add_text(w, "a0", 0);
    test_finish_pack(w);
    rf_dataset *ds = NULL;
    CHECK_OK(rf_dataset_open(&ds, at("zeros.pack"), NULL));
    int fd = -1;
    CHECK_OK(rf__dataset_index_fd(ds, &fd));
    struct stat st;
    CHECK_EQ(fstat(fd, &st), 0);
    CHECK_GT(st.st_size, sizeof(zeros));
    printf("  the copy of %lld bytes of metadata holds %lld bytes\n",
           (long long)st.st_size, (long long)st.st_blocks * 512);
    CHECK_LT((uint64_t)st.st_blocks * 512, UINT64_C(1) << 20);
    size_t dict_size = 0; /* and it reads back as written */
    const void *dict = rf__dataset_dict(ds, &dict_size);
    CHECK_EQ(dict_size, sizeof(zeros));
    CHECK(memcmp(dict, zeros, sizeof(zeros)) == 0);
    close(fd);
    rf_dataset_close(ds);
    clear_folder();
    printf("metadata copy: no memory for pages of zeros\n");
}

/* A pack of one sample of `size` bytes (its payload a hole), written
 * directly: the writer refuses such a sample. Returns its path. */
static const char *pack_with_sample_of(uint64_t size)
{
    struct rf__pack_header h = {.version = RF__PACK_VERSION,
                                .header_size = RF__PACK_HEADER_SIZE,
                                .entry_size = RF__PACK_ENTRY_SIZE,
                                .samples = 1,
                                .classes = 1,
                                .index_offset = RF__PACK_HEADER_SIZE + size};
    const struct rf__pack_entry e = {.offset = RF__PACK_HEADER_SIZE,
                                     .size = (uint32_t)size,
                                     .kind = RF_SAMPLE_JPEG};
    uint8_t header[RF__PACK_HEADER_SIZE], entry[RF__PACK_ENTRY_SIZE];
    rf__pack_entry_encode(&e, entry);
    struct rf__crc32c crc;
    rf__crc32c_init(&crc);
    h.meta_crc = rf__crc32c(&crc, 0, entry, sizeof(entry));
    h.names_offset = h.dict_offset = h.file_size =
        h.index_offset + sizeof(entry);
    rf__pack_header_encode(&h, header);
    const char *path = at("one-%llu.pack", (unsigned long long)size);
    const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    CHECK_OK(rf__pwrite_all(fd, header, sizeof(header), 0));
    CHECK_OK(rf__pwrite_all(fd, entry, sizeof(entry), h.index_offset));
    close(fd);
    return path;
}

static void check_pack_sample_cap(void)
{
    rf_dataset *ds = NULL;
    char *why = NULL;
    const char *path = pack_with_sample_of(RF__SAMPLE_MAX + 1);
    CHECK_EQ(rf_dataset_open(&ds, path, &why), RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(why, "index entry 0: its payload is larger than the 1 GiB "
                        "a sample may have, in a pack as in a folder");
    CHECK_CONTAINS(why, "1073741825 bytes");
    printf("  refused as expected: %s\n", why);
    free(why);
    CHECK_OK(rf_dataset_open(&ds, pack_with_sample_of(RF__SAMPLE_MAX), NULL));
    rf_dataset_close(ds);
}

static void check_folder_sample_cap(void)
{
    CHECK_EQ(mkdir(at("folder"), 0755), 0);
    CHECK_EQ(mkdir(at("folder/c"), 0755), 0);
    write_file(at("folder/c/big.jpg"), "", 0);
    CHECK_EQ(truncate(at("folder/c/big.jpg"), (off_t)RF__SAMPLE_MAX + 1), 0);
    rf_dataset *ds = NULL;
    CHECK_OK(rf_dataset_open(&ds, at("folder"), NULL));
    rf_sample_info info;
    CHECK_EQ(rf_dataset_read(ds, 0, &info), RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(rf_dataset_error(ds), "big.jpg): is larger than 1 GiB, more "
                                         "than a sample may have");
    printf("  refused as expected: %s\n", rf_dataset_error(ds));
    rf_dataset_close(ds);
    CHECK_EQ(unlink(at("folder/c/big.jpg")), 0);
    CHECK_EQ(rmdir(at("folder/c")), 0);
    CHECK_EQ(rmdir(at("folder")), 0);
}

/* One cap on a sample's size, RF__SAMPLE_MAX (1 GiB): a folder's file
 * above it fails when read, a pack entry above it when the pack is opened,
 * and the writer refuses such a sample (it used to take up to 4 GiB - 1,
 * so a pack could hold what no folder yields). The sample given to the
 * writer is an inaccessible mapping: refused before it is read, as it
 * must be. */
TEST_CASE(test_one_sample_cap, "sizes",
          "one 1 GiB cap for folders, packs and the writer")
{
    own_folder();
    const size_t big = (size_t)RF__SAMPLE_MAX + 1;
    void *none = mmap(NULL, big, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(none != MAP_FAILED);
    rf_pack_writer *w = create_or_die(at("cap.pack"), 0, 0, 0);
    CHECK_EQ(rf_pack_writer_add(w, RF_SAMPLE_JPEG, none, big, 0, "big.jpg"),
             -EINVAL);
    CHECK_CONTAINS(rf_pack_writer_error(w),
                   "sample 0 (big.jpg): its 1073741825 bytes are more than "
                   "the 1 GiB (1073741824 bytes) a sample may have, in a pack "
                   "as in a folder");
    printf("  refused as expected: %s\n", rf_pack_writer_error(w));
    rf_pack_writer_abort(w);
    CHECK_EQ(munmap(none, big), 0);
    check_pack_sample_cap();
    check_folder_sample_cap();
    clear_folder();
    printf("sample size: one cap of 1 GiB for folders, packs and the "
           "writer\n");
}

/* A pack cut inside its header is a damaged pack, not a foreign file
 * (the advice was to pass a file written by ringfeed-pack); one cut
 * inside its magic cannot be told from one. */
TEST_CASE(test_cut_inside_header, "sizes",
          "a pack cut inside its header is called truncated")
{
    own_folder();
    write_text_pack(at("cut.pack"), "a0");
    CHECK_EQ(truncate(at("cut.pack"), 100), 0);
    rf_dataset *ds = NULL;
    char *why = NULL;
    CHECK_EQ(rf_dataset_open(&ds, at("cut.pack"), &why), RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(why, "cut.pack: a ringfeed packed file cut short: it has "
                        "100 bytes, fewer than a header (128): it was "
                        "truncated; the file is damaged: copy it again");
    printf("  refused as expected: %s\n", why);
    free(why);
    CHECK_EQ(truncate(at("cut.pack"), 5), 0);
    CHECK_EQ(rf_dataset_open(&ds, at("cut.pack"), &why), RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(why, "not a ringfeed packed file: it has 5 bytes");
    free(why);
    clear_folder();
    printf("cut inside its header: called truncated\n");
}

/* ---- what a reader refuses in a header and an index ---------------------- */

/* A pack of two named samples ("a0" label 0, "b1" label 1), its bytes
 * read into memory; *size set. */
static uint8_t *two_sample_pack(size_t *size)
{
    rf_pack_writer *w = create_or_die(at("two.pack"), 0, 0, 0);
    add_text(w, "a0", 0);
    add_text(w, "b1", 1);
    test_finish_pack(w);
    uint8_t *bytes = read_whole(at("two.pack"), size);
    CHECK_EQ(unlink(at("two.pack")), 0);
    return bytes;
}

/* Writes bytes as `name` with both checksums made right again (meta_crc
 * over index, names and dictionary, then the header's own), so that only
 * the field changed is wrong; returns rf_dataset_open()'s message. */
static char *open_resealed(const char *name, uint8_t *bytes, size_t size)
{
    struct rf__crc32c crc;
    rf__crc32c_init(&crc);
    const uint64_t index = rf__get_le64(bytes + 56);
    rf__put_le32(bytes + 104, rf__crc32c(&crc, 0, bytes + index, size - index));
    memset(bytes + 108, 0, 4);
    rf__put_le32(bytes + 108, rf__crc32c_bitwise(bytes, RF__PACK_HEADER_SIZE));
    write_file(at("%s", name), bytes, size);
    rf_dataset *ds = NULL;
    char *why = NULL;
    CHECK_EQ(rf_dataset_open(&ds, at("%s", name), &why), RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(why, at("%s", name));
    CHECK_CONTAINS(why, "write it again with ringfeed-pack");
    printf("  refused as expected: %s\n", why);
    return why;
}

/* Sets byte `at` of a copy of pack to value, reseals it and checks that
 * the open is refused saying `expected`. */
static void check_byte_refused(const uint8_t *pack, size_t size, size_t at,
                               uint8_t value, const char *expected)
{
    uint8_t *bytes = malloc(size);
    CHECK(bytes);
    memcpy(bytes, pack, size);
    bytes[at] = value;
    char *why = open_resealed("changed.pack", bytes, size);
    CHECK_CONTAINS(why, expected);
    free(why);
    free(bytes);
}

/* Bytes the format reserves (the header's 52..55 and 112..127, an
 * entry's 37..39) are zero in version 1, and a name_offset goes with a
 * name: a writer that leaves anything else is refused, even with both
 * checksums right (they were read as if zero). */
TEST_CASE(test_reserved_bytes_refused, "format",
          "reserved bytes and a name_offset without a name are refused")
{
    own_folder();
    size_t size = 0;
    uint8_t *pack = two_sample_pack(&size);
    const uint64_t index = rf__get_le64(pack + 56);
    check_byte_refused(pack, size, 52, 1,
                       "its header's reserved byte at 52 is 0x01; version 1 "
                       "has every reserved byte (52..55, 112..127) zero");
    check_byte_refused(pack, size, 127, 0x80,
                       "its header's reserved byte at 127 is 0x80");
    check_byte_refused(pack, size, index + RF__PACK_ENTRY_SIZE + 38, 5,
                       "index entry 1: its reserved bytes (37..39) are not "
                       "zero");
    /* entry 1's name, "b1", is at 3: take its length away */
    check_byte_refused(pack, size, index + RF__PACK_ENTRY_SIZE + 32, 0,
                       "index entry 1: it has no name (name_length 0) but "
                       "its name_offset is not 0");
    free(pack);
    clear_folder();
    printf("reserved bytes: refused, naming the byte or the entry\n");
}

/* A damaged byte in the names (or the dictionary) fails meta_crc, whose
 * message used to speak of the index alone. */
TEST_CASE(test_meta_crc_names_its_areas, "format",
          "a damaged name fails the checksum that covers it")
{
    own_folder();
    size_t size = 0;
    uint8_t *pack = two_sample_pack(&size);
    pack[rf__get_le64(pack + 64)] ^= 0x40; /* the first name */
    write_file(at("names.pack"), pack, size);
    rf_dataset *ds = NULL;
    char *why = NULL;
    CHECK_EQ(rf_dataset_open(&ds, at("names.pack"), &why), RF_E_CORRUPT_SAMPLE);
    CHECK_CONTAINS(why, "the checksum of its index does not match (meta_crc, "
                        "which covers its index, names and dictionary)");
    printf("  refused as expected: %s\n", why);
    free(why);
    free(pack);
    clear_folder();
    printf("meta_crc: its message names the areas it covers\n");
}

int main(int argc, char **argv)
{
    return TEST_MAIN_WITH(argc, argv, scratch_setup, scratch_teardown);
}
