/*
 * test-pack.c - how rf_pack_writer puts its file on disk.
 *
 * The file gets its name only when finished, in one step: two writers of
 * one path each finish a whole file (the last wins), a link planted where
 * the old writer put its temporary file is never followed, an aborted
 * writer leaves nothing, and the named fallback (file systems without
 * O_TMPFILE) behaves the same. A path that names a folder, a missing
 * folder or anything but a regular file is refused when the writer is
 * created, before any sample; a write past ulimit -f says to raise it.
 * Which packs are accepted is test-pack-accepted's, the sizes and bytes a
 * reader refuses test-pack-sizes'; pack-folder.h holds what the three
 * share. Each case works in an empty folder of its own.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/internal.h"
#include "source/atomic-file.h"
#include "source/file-io.h"
#include "harness.h"
#include "pack-folder.h"
#include "test.h"

/* The pack at path holds exactly the samples texts[0..count), in order,
 * their bytes also their names. */
static void check_pack_holds(const char *path, const char *const *texts,
                             size_t count)
{
    rf_dataset *ds = NULL;
    char *why = NULL;
    const int rc = rf_dataset_open(&ds, path, &why);
    if (rc < 0)
        fprintf(stderr, "open %s: %s\n", path, why);
    CHECK_OK(rc);
    CHECK_EQ(rf_dataset_size(ds), count);
    for (size_t i = 0; i < count; i++) {
        rf_sample_info info;
        CHECK_OK(rf_dataset_read(ds, i, &info));
        CHECK_EQ(info.size, strlen(texts[i]));
        CHECK(memcmp(info.data, texts[i], info.size) == 0);
        CHECK(strcmp(info.name, texts[i]) == 0);
    }
    rf_dataset_close(ds);
}

/* ---- where the file is written ------------------------------------------ */

/* Two writers of one path, interleaved: each finishes a whole file of its
 * own, and the path ends up holding the one that finished last (the old
 * writer shared PATH.tmp between them: the second run truncated the
 * first's file, the first to finish renamed it, and the other then wrote
 * its index into the renamed file and failed). */
TEST_CASE(test_racing_writers, "write",
          "two writers of one path: each whole, the last wins")
{
    own_folder();
    const char *path = at("same.pack");
    rf_pack_writer *a = create_or_die(path, 0, 0, 0);
    add_text(a, "a0", 0);
    rf_pack_writer *b = create_or_die(path, 0, 0, 0);
    add_text(b, "b0", 0);
    add_text(a, "a1", 1);
    test_finish_pack(b);
    const char *b_texts[] = {"b0"};
    check_pack_holds(path, b_texts, 1);
    add_text(a, "a2", 1);
    test_finish_pack(a);
    const char *a_texts[] = {"a0", "a1", "a2"};
    check_pack_holds(path, a_texts, 3);
    check_folder_holds(1);
    clear_folder();
    printf("two writers of one path: each finished whole, the last won\n");
}

/* A link planted at the name the old writer used for its temporary file
 * (PATH.tmp, opened with O_TRUNC) is never followed: its target keeps
 * its bytes, and the pack is a file of its own. */
TEST_CASE(test_planted_link_not_followed, "write",
          "a link planted at PATH.tmp is not followed")
{
    own_folder();
    write_file(at("victim"), "victim's bytes", 14);
    CHECK_EQ(symlink(at("victim"), at("out.pack.tmp")), 0);
    write_text_pack(at("out.pack"), "sample");
    char text[64];
    read_text(at("victim"), text, sizeof(text));
    CHECK(strcmp(text, "victim's bytes") == 0);
    struct stat st;
    CHECK_EQ(lstat(at("out.pack"), &st), 0);
    CHECK(S_ISREG(st.st_mode));
    const char *texts[] = {"sample"};
    check_pack_holds(at("out.pack"), texts, 1);
    check_folder_holds(3); /* victim, the link, out.pack */
    clear_folder();
    printf("a link planted at PATH.tmp: not followed\n");
}

/* Whether the run's folder can hold unnamed files: where it cannot, the
 * writer uses a named file, which the next tests check on their own. */
static bool folder_has_o_tmpfile(void)
{
    const int fd = open(base, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0)
        return false;
    close(fd);
    return true;
}

/* An aborted writer leaves nothing, and an existing pack keeps its bytes
 * until a new one is finished. */
TEST_CASE(test_abort_leaves_nothing, "write",
          "abort leaves nothing, the old pack untouched")
{
    own_folder();
    write_text_pack(at("kept.pack"), "old");
    rf_pack_writer *w = create_or_die(at("kept.pack"), 0, 0, 0);
    add_text(w, "new", 0);
    if (folder_has_o_tmpfile())
        check_folder_holds(1); /* the unfinished file has no name */
    rf_pack_writer_abort(w);
    check_folder_holds(1);
    const char *texts[] = {"old"};
    check_pack_holds(at("kept.pack"), texts, 1);
    clear_folder();
    printf("abort: nothing left, the old pack untouched\n");
}

/* The fallback for file systems without O_TMPFILE: a unique name next to
 * the target, removed when discarded, renamed over the target when
 * committed. */
TEST_CASE(test_named_fallback, "write", "the named fallback, without O_TMPFILE")
{
    own_folder();
    struct rf__atomic_file f;
    char why[RF__DETAIL];
    const char *path = at("named.pack");
    CHECK_OK(rf__atomic_file_open(&f, path, RF__ATOMIC_FILE_NAMED, why,
                                  sizeof(why)));
    CHECK(f.temp != NULL);
    CHECK(strncmp(f.temp, path, strlen(path)) == 0);
    CHECK(strcmp(f.temp + strlen(f.temp) - 4, ".tmp") == 0);
    CHECK_EQ(access(f.temp, F_OK), 0);
    check_folder_holds(1);
    rf__atomic_file_discard(&f);
    check_folder_holds(0);
    rf__atomic_file_discard(&f); /* twice is fine */

    write_file(path, "old", 3);
    CHECK_OK(rf__atomic_file_open(&f, path, RF__ATOMIC_FILE_NAMED, why,
                                  sizeof(why)));
    CHECK_OK(rf__pwrite_all(f.fd, "new bytes", 9, 0));
    CHECK_OK(rf__atomic_file_commit(&f, why, sizeof(why)));
    CHECK_EQ(f.fd, -1);
    char text[64];
    read_text(path, text, sizeof(text));
    CHECK(strcmp(text, "new bytes") == 0);
    check_folder_holds(1);
    clear_folder();
    printf("named fallback: removed when discarded, renamed over the "
           "target when committed\n");
}

static void check_create_refused(const char *path, int expected,
                                 const char *needle)
{
    rf_pack_writer *w = NULL;
    char *why = NULL;
    CHECK_EQ(
        rf_pack_writer_create(&w, path, 0, 0, 0, RF_LAYOUT_NHWC, NULL, 0, &why),
        expected);
    CHECK(w == NULL);
    CHECK_CONTAINS(why, needle);
    printf("  refused as expected: %s\n", why);
    free(why);
}

/* What used to be found at the rename, after all the work, is found when
 * the writer is created. */
TEST_CASE(test_output_checked_up_front, "write",
          "the output is checked when the writer is created")
{
    own_folder();
    CHECK_EQ(mkdir(at("folder"), 0755), 0);
    char expected[1100];
    rf__format(expected, sizeof(expected), "%s is a folder", at("folder"));
    check_create_refused(at("folder"), -EISDIR, expected);
    check_create_refused(at("new-folder/"), -EISDIR, "is a folder");
    check_create_refused("", -ENOENT, "the path is empty");
    CHECK_EQ(mkfifo(at("fifo"), 0644), 0);
    check_create_refused(at("fifo"), -EEXIST, "is not a regular file");
    check_create_refused(at("missing/x.pack"), -ENOENT,
                         "missing/x.pack: cannot create a file in its folder");
    if (geteuid() != 0) { /* root writes anywhere */
        CHECK_EQ(chmod(at("folder"), 0555), 0);
        check_create_refused(at("folder/x.pack"), -EACCES,
                             "that you can write to");
        CHECK_EQ(chmod(at("folder"), 0755), 0);
    }
    CHECK_EQ(rmdir(at("folder")), 0);
    check_folder_holds(1); /* the fifo */
    clear_folder();
    printf("output: a folder, an empty path, a missing folder, a fifo "
           "refused at create\n");
}

/* A pack past the file size limit (ulimit -f), with SIGXFSZ ignored as
 * ringfeed-pack ignores it, fails its write with EFBIG; the advice is
 * the limit's, not "free some space". In a child, which the limit
 * binds. */
TEST_CASE(test_file_size_limit_advice, "write",
          "a write past ulimit -f says to raise the limit")
{
    own_folder();
    const pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        const struct rlimit limit = {4096, 4096};
        CHECK_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
        static const char big[8192];
        rf_pack_writer *w = create_or_die(at("big.pack"), 0, 0, 0);
        CHECK_EQ(rf_pack_writer_add(w, RF_SAMPLE_JPEG, big, sizeof(big), 0,
                                    "big.jpg"),
                 -EFBIG);
        CHECK_CONTAINS(rf_pack_writer_error(w),
                       "big.pack: cannot write sample 0: File too large; the "
                       "pack is larger than this process (ulimit -f)");
        printf("  refused as expected: %s\n", rf_pack_writer_error(w));
        rf_pack_writer_abort(w);
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    check_folder_holds(0);
    printf("file size limit: the advice is to raise it\n");
}

int main(int argc, char **argv)
{
    return TEST_MAIN_WITH(argc, argv, scratch_setup, scratch_teardown);
}
