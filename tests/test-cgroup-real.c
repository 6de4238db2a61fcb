/*
 * test-cgroup-real.c - the cgroup limits the library reads, on a real
 * cgroup that the test creates (the made-up hierarchies are
 * test-cgroup.c's): a loader whose ring is larger than the cgroup's
 * 100 MB limit must be refused at open with -ENOMEM and a message naming
 * the cgroup's file, not be killed by the OOM killer, and so must one
 * that fits with too little to spare for its producers; a ring beside a
 * cgroup full of page cache still opens; and a real CPU quota must read
 * back as written. It needs root and a writable cgroup hierarchy;
 * without them each case skips, saying why.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <math.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "channel/segment.h"
#include "common/cgroup.h"
#include "common/internal.h"
#include "harness.h"
#include "test.h"

#define LIMIT (UINT64_C(100) << 20)

static char made[RF__PATH_MAX]; /* the cgroup this test created, if any */
static pid_t maker;             /* the process that created it */
static int made_version;

/* Skips the running real case, saying why; the cgroup made, if any, is
 * removed on the way out (remove_made() runs at exit). */
static void skip(const char *what, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
static void skip(const char *what, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    TEST_SKIP_BECAUSE("%s: %s", what, why);
}

/* Writes text to folder/file in one write(), as cgroup files want it.
 * Returns 0 or -errno. */
static int write_to(const char *folder, const char *file, const char *text)
{
    char path[RF__PATH_MAX];
    rf__format(path, sizeof(path), "%s/%s", folder, file);
    const int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    const ssize_t n = write(fd, text, strlen(text));
    const int err = n < 0 ? -errno : 0;
    close(fd);
    return err;
}

/* Removes the cgroup made, once its processes have gone (the kernel may
 * take a moment after they are reaped). */
static void remove_made(void)
{
    if (!made[0] || getpid() != maker)
        return;
    for (int tries = 0; rmdir(made) != 0 && errno == EBUSY && tries < 200;
         tries++)
        usleep(10000);
    if (access(made, F_OK) == 0)
        fprintf(stderr, "warning: could not remove %s: %s\n", made,
                strerror(errno));
    made[0] = '\0';
}

/* Whether folder (a cgroup) has file. */
static bool has_file(const char *folder, const char *file)
{
    char path[RF__PATH_MAX];
    rf__format(path, sizeof(path), "%s/%s", folder, file);
    return access(path, F_OK) == 0;
}

/* Creates a cgroup that has `probe` (the controller's file): a child of
 * this process's own cgroup or, where that one does not hand the
 * controller down (v2 hands down none from a cgroup that holds processes,
 * except at the root), of the nearest cgroup above it that does. It
 * enables no controller anywhere: that would change the machine for
 * everything else on it. Sets made and made_version; skips the case,
 * saying why, when it cannot. */
static int make_cgroup(const char *what, const char *controller,
                       const char *probe_v1, const char *probe_v2)
{
    static bool cleanup_registered;
    if (geteuid() != 0)
        skip(what, "not root: the test cannot create a cgroup");
    char parent[RF__PATH_MAX];
    made_version = rf__cgroup_folder_at("/proc/self", "", controller, parent,
                                        sizeof(parent));
    if (made_version == 0)
        skip(what, "no cgroup hierarchy with %s is mounted", controller);
    const char *probe = made_version == 1 ? probe_v1 : probe_v2;
    maker = getpid();
    if (!cleanup_registered)
        CHECK_EQ(atexit(remove_made), 0);
    cleanup_registered = true;
    char folder[RF__PATH_MAX];
    while (has_file(parent, "cgroup.procs")) {
        rf__format(folder, sizeof(folder), "%s/ringfeed-test-%d-%s", parent,
                   (int)getpid(), controller);
        if (mkdir(folder, 0755) != 0)
            skip(what, "cannot create %s: %s", folder, strerror(errno));
        rf__format(made, sizeof(made), "%s", folder);
        if (has_file(made, probe))
            return made_version;
        remove_made();
        *strrchr(parent, '/') = '\0';
    }
    skip(what, "no cgroup here hands down the %s controller", controller);
}

/* Runs fn in a child process moved into the cgroup made, then removes
 * that cgroup. Returns the child's wait status; skips the case, saying
 * why, when the child could not be moved in. */
static int run_inside(const char *what, void (*fn)(void))
{
    int go[2];
    CHECK_EQ(pipe2(go, O_CLOEXEC), 0);
    fflush(NULL);
    const pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(go[1]);
        char c;
        if (read(go[0], &c, 1) != 1) /* not moved in */
            _exit(TEST_SKIP);
        fn();
        exit(0);
    }
    close(go[0]);
    char text[32];
    rf__format(text, sizeof(text), "%d", (int)pid);
    const int moved = write_to(made, "cgroup.procs", text);
    if (moved == 0)
        CHECK_EQ(write(go[1], "g", 1), 1);
    close(go[1]);
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    char folder[RF__PATH_MAX];
    rf__format(folder, sizeof(folder), "%s", made);
    remove_made();
    if (moved < 0)
        skip(what, "cannot move a process into %s: %s", folder,
             strerror(-moved));
    return status;
}

/* Fails unless the child exited with 0: a signal is what the OOM killer
 * sends. */
static void check_child(const char *what, int status)
{
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "%s: the child was killed by signal %d (%s)\n", what,
                WTERMSIG(status), strsignal(WTERMSIG(status)));
        exit(1);
    }
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
}

/* Runs fn in a child inside a new cgroup whose memory limit is LIMIT;
 * its wait status. Skips, saying why, where no such cgroup can be made. */
static int run_under_memory_limit(const char *what, void (*fn)(void))
{
    make_cgroup(what, "memory", "memory.limit_in_bytes", "memory.max");
    char limit[32];
    rf__format(limit, sizeof(limit), "%llu", (unsigned long long)LIMIT);
    const int set = write_to(
        made, made_version == 1 ? "memory.limit_in_bytes" : "memory.max",
        limit);
    if (set < 0)
        skip(what, "cannot set the limit of %s: %s", made, strerror(-set));
    return run_inside(what, fn);
}

/* In the cgroup: a ring of 10 slots of 256 x 384 x 384 x 3 bytes (1.13 GB)
 * is refused at open, naming the cgroup's limit. */
static void open_ring_over_limit(void)
{
    char want[RF__CGROUP_WHERE_MAX], where[RF__CGROUP_WHERE_MAX];
    rf__format(want, sizeof(want), "the cgroup v%d %s of %s", made_version,
               made_version == 1 ? "memory.limit_in_bytes" : "memory.max",
               made);
    CHECK_LE(rf__cgroup_memory_room(where, sizeof(where)), LIMIT);
    CHECK_CONTAINS(where, want);
    rf_config *cfg = TEST_CONFIG({RF_PARAM_SOURCE, RF_SOURCE_SYNTHETIC},
                                 {RF_PARAM_PRODUCERS, 1}, {RF_PARAM_SLOTS, 10},
                                 {RF_PARAM_BATCH_SIZE, 256},
                                 {RF_PARAM_HEIGHT, 384}, {RF_PARAM_WIDTH, 384});
    rf_loader *l = NULL;
    char *err = NULL;
    const int rc = rf_loader_open(&l, cfg, &err);
    printf("open in a cgroup limited to %llu bytes: %d (%s)\n",
           (unsigned long long)LIMIT, rc, err ? err : "opened");
    if (rc == 0)
        rf_loader_close(l);
    CHECK_EQ(rc, -ENOMEM);
    CHECK_CONTAINS(err, "the ring needs 1132");
    CHECK_CONTAINS(err, want);
    free(err);
    rf_config_free(cfg);
}

TEST_CASE(test_real_memory, "real",
          "a ring over a 100 MB memory limit is refused at open")
{
    const char *what = "real memory limit";
    const int status = run_under_memory_limit(what, open_ring_over_limit);
    check_child(what, status);
    printf("%s: refused at open (cgroup v%d)\n", what, made_version);
}

/* A ring that leaves the cgroup only `spare` bytes: synthetic samples of
 * 64x64x3 in 4 slots, one producer, the batch the largest that fits. */
enum { SNUG_SLOTS = 4, SNUG_SIDE = 64 };

static rf_config *snug_config(uint64_t spare)
{
    const uint64_t sample_bytes = (uint64_t)SNUG_SIDE * SNUG_SIDE * 3;
    char where[RF__CGROUP_WHERE_MAX];
    const uint64_t room = rf__memory_room(where, sizeof(where));
    CHECK_LE(room, LIMIT);
    uint32_t batch = 0;
    for (uint32_t b = 1; b < RF__MAX_BATCH; b++) {
        struct rf__layout lay;
        CHECK_EQ(rf__layout_compute(&lay, 1, SNUG_SLOTS, b, sample_bytes), 0);
        if (lay.arena_size + lay.control_size + spare > room)
            break;
        batch = b;
    }
    CHECK_GT(batch, 0);
    printf("room %llu bytes: batches of %u leave %llu spare\n",
           (unsigned long long)room, batch, (unsigned long long)spare);
    return TEST_CONFIG(
        {RF_PARAM_SOURCE, RF_SOURCE_SYNTHETIC}, {RF_PARAM_PRODUCERS, 1},
        {RF_PARAM_SLOTS, SNUG_SLOTS}, {RF_PARAM_BATCH_SIZE, batch},
        {RF_PARAM_HEIGHT, SNUG_SIDE}, {RF_PARAM_WIDTH, SNUG_SIDE},
        {RF_PARAM_SAMPLES, (int64_t)batch * 2 * SNUG_SLOTS},
        {RF_PARAM_QUIET, 1});
}

/* In the cgroup: a ring that fits under the limit with 1 MiB to spare is
 * refused at open, for the producer's own memory (such a ring, 0.4 MB
 * short of a 200 MB limit, with two producers decoding JPEGs, was
 * reserved and the run then killed by the OOM killer); one that leaves
 * the room the loader asks for runs. */
static void open_ring_to_the_limit(void)
{
    rf_config *cfg = snug_config(UINT64_C(1) << 20);
    rf_loader *l = NULL;
    char *err = NULL;
    int rc = rf_loader_open(&l, cfg, &err);
    printf("a ring 1 MiB short of the room: %d (%s)\n", rc,
           err ? err : "opened");
    rf_batch b;
    for (int i = 0; rc == 0 && i < 2 * SNUG_SLOTS; i++) {
        CHECK_EQ(rf_loader_next(l, &b), 1);
        CHECK_OK(rf_loader_release(l, &b));
    }
    if (rc == 0)
        rf_loader_close(l);
    CHECK_EQ(rc, -ENOMEM);
    CHECK_CONTAINS(err, "and its 1 producer and the loader about 16 MB "
                        "more of their own, but ");
    CHECK_CONTAINS(err, "use fewer slots (RF_PARAM_SLOTS)");
    CHECK_CONTAINS(err, "fewer producers (RF_PARAM_PRODUCERS; 8 MB each)");
    free(err);
    rf_config_free(cfg);
    cfg = snug_config(UINT64_C(24) << 20);
    l = test_open_loader(cfg);
    for (int i = 0; i < 2 * SNUG_SLOTS; i++) {
        CHECK_EQ(rf_loader_next(l, &b), 1);
        CHECK_OK(rf_loader_release(l, &b));
    }
    rf_loader_close(l);
    rf_config_free(cfg);
}

TEST_CASE(test_real_memory_to_the_limit, "real",
          "a ring that leaves the producers no memory is refused at open")
{
    const char *what = "real memory limit, ring to the limit";
    const int status = run_under_memory_limit(what, open_ring_to_the_limit);
    check_child(what, status);
    printf("%s: refused at open, and run with room (cgroup v%d)\n", what,
           made_version);
}

/* In the cgroup: a file of twice the limit written (its pages charged to
 * the cgroup, which then holds them up to its limit), a ring of about a
 * fifth of the limit still opens and runs: the page cache is room. It
 * was not (a 200 MB cgroup that had written 400 MB refused a 1.2 MB
 * ring). */
static void open_ring_beside_page_cache(void)
{
    char name[] = "rf-cgroup-cache-XXXXXX"; /* here: the build's disk */
    const int fd = mkstemp(name);
    CHECK(fd >= 0);
    CHECK_EQ(unlink(name), 0);
    struct statfs fs;
    CHECK_EQ(fstatfs(fd, &fs), 0);
    if (fs.f_type == TMPFS_MAGIC) /* its pages would be shared memory */
        exit(TEST_SKIP);
    static char block[1 << 20];
    memset(block, 7, sizeof(block));
    for (uint64_t done = 0; done < 2 * LIMIT; done += sizeof(block))
        CHECK_EQ(write(fd, block, sizeof(block)), (ssize_t)sizeof(block));
    CHECK_EQ(fsync(fd), 0); /* kept open: closed, its pages would go */
    char where[RF__CGROUP_WHERE_MAX];
    printf("room after writing %llu MB: %llu bytes\n",
           (unsigned long long)(2 * LIMIT >> 20),
           (unsigned long long)rf__cgroup_memory_room(where, sizeof(where)));
    rf_config *cfg = TEST_CONFIG(
        {RF_PARAM_SOURCE, RF_SOURCE_SYNTHETIC}, {RF_PARAM_PRODUCERS, 1},
        {RF_PARAM_SLOTS, 4}, {RF_PARAM_BATCH_SIZE, 400},
        {RF_PARAM_HEIGHT, SNUG_SIDE}, {RF_PARAM_WIDTH, SNUG_SIDE},
        {RF_PARAM_SAMPLES, 3200}, {RF_PARAM_QUIET, 1});
    rf_loader *l = test_open_loader(cfg);
    rf_batch b;
    for (int i = 0; i < 8; i++) {
        CHECK_EQ(rf_loader_next(l, &b), 1);
        CHECK_OK(rf_loader_release(l, &b));
    }
    rf_loader_close(l);
    rf_config_free(cfg);
    close(fd);
}

TEST_CASE(test_real_memory_page_cache, "real",
          "a cgroup full of page cache still opens a ring that fits")
{
    const char *what = "real memory limit, page cache";
    const int status =
        run_under_memory_limit(what, open_ring_beside_page_cache);
    if (WIFEXITED(status) && WEXITSTATUS(status) == TEST_SKIP)
        skip(what, "the working folder is a tmpfs, whose pages are not "
                   "page cache");
    check_child(what, status);
    printf("%s: opened and ran (cgroup v%d)\n", what, made_version);
}

static double quota_wanted; /* CPUs, set before the child starts */

static void read_quota(void)
{
    char want[RF__CGROUP_WHERE_MAX], where[RF__CGROUP_WHERE_MAX];
    rf__format(want, sizeof(want), "the cgroup v%d %s of %s", made_version,
               made_version == 1 ? "cpu.cfs_quota_us" : "cpu.max", made);
    const double cpus = rf__cgroup_cpu_quota(where, sizeof(where));
    printf("quota read in the cgroup: %g CPUs, from %s\n", cpus, where);
    CHECK(fabs(cpus - quota_wanted) < 1e-9);
    CHECK_STR_EQ(where, want);
}

TEST_CASE(test_real_cpu, "real", "a CPU quota reads back as written")
{
    const char *what = "real CPU quota";
    char where[RF__CGROUP_WHERE_MAX];
    /* below any quota already above us, so that ours is the smallest */
    const double above = rf__cgroup_cpu_quota(where, sizeof(where));
    long long quota_us = 25000;
    if (above > 0 && above <= 0.25)
        quota_us = (long long)(above * 100000 / 2);
    if (quota_us < 1000)
        skip(what, "the quota above (%g CPUs) is too small", above);
    make_cgroup(what, "cpu", "cpu.cfs_quota_us", "cpu.max");
    quota_wanted = (double)quota_us / 100000;
    char text[64];
    int set;
    if (made_version == 1) {
        set = write_to(made, "cpu.cfs_period_us", "100000");
        rf__format(text, sizeof(text), "%lld", quota_us);
        if (set == 0)
            set = write_to(made, "cpu.cfs_quota_us", text);
    } else {
        rf__format(text, sizeof(text), "%lld 100000", quota_us);
        set = write_to(made, "cpu.max", text);
    }
    if (set < 0)
        skip(what, "cannot set the quota of %s: %s", made, strerror(-set));
    const int status = run_inside(what, read_quota);
    check_child(what, status);
    printf("%s: %g CPUs read back (cgroup v%d)\n", what, quota_wanted,
           made_version);
}

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
