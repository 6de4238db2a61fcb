/*
 * test-producer-start.c - what starting the producers survives or refuses
 * (the process's limits are test-start-limits.c's): open finishes
 * under a frequent timer signal; a build tree finds its own helper; a
 * helper that is not executable, cannot start, exits at once or crashes
 * after attaching is named instead of respawned forever; a helper file
 * replaced during the run changes nothing; a producer holds only its own
 * fds.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "faults.h"
#include "harness.h"
#include "proc.h"
#include "channel/segment.h"
#include "test.h"

static volatile sig_atomic_t timer_ticks;

static void count_tick(int sig)
{
    (void)sig;
    timer_ticks++;
}

/* A timer signal every 50 us (setitimer, a profiler) while open
 * reserves a 256 MiB ring: tmpfs gives up a reservation on a pending
 * signal and undoes it, so a loop that only retried could never end. Open
 * must finish, with the ring, in bounded time. */
TEST_CASE_LIMIT(test_open_under_timer_signals, "start",
                "open finishes under a frequent timer signal", 60)
{
    struct sigaction sa = {.sa_handler = count_tick}; /* no SA_RESTART */
    sigaction(SIGALRM, &sa, NULL);
    const struct itimerval every = {{0, 50}, {0, 50}};
    const struct itimerval off = {{0, 0}, {0, 0}};
    rf_config *cfg = small_config(1, 100000, 64, 384);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SLOTS, 16)); /* ~450 MB */
    CHECK_EQ(setitimer(ITIMER_REAL, &every, NULL), 0);
    const uint64_t start = rf__now_ns();
    rf_loader *l = test_open_loader(cfg);
    const uint64_t took_ms = (rf__now_ns() - start) / 1000000;
    CHECK_EQ(setitimer(ITIMER_REAL, &off, NULL), 0);
    printf("open under a 50 us timer: %llu ms, %d signals\n",
           (unsigned long long)took_ms, (int)timer_ticks);
    test_pass_one_batch(l);
    rf_loader_close(l);
    rf_config_free(cfg);
}

/* Points RINGFEED_PRODUCER at `path`; returns the old value (or NULL)
 * for restore_helper(). */
static char *use_helper(const char *path)
{
    const char *env = getenv("RINGFEED_PRODUCER");
    char *saved = env ? strdup(env) : NULL;
    setenv("RINGFEED_PRODUCER", path, 1);
    return saved;
}

static void restore_helper(char *saved)
{
    if (saved)
        setenv("RINGFEED_PRODUCER", saved, 1);
    else
        unsetenv("RINGFEED_PRODUCER");
    free(saved);
}

/* A program of a build tree runs uninstalled with no setting: the
 * library finds the tree's tools/ringfeed-producer from where it was
 * loaded (here the test program itself, linked statically). */
TEST_CASE(test_build_tree_finds_its_helper, "start",
          "a build tree finds its own helper unset")
{
    char *saved = use_helper("x"); /* to save it */
    unsetenv("RINGFEED_PRODUCER");
    rf_config *cfg = small_config(2, 1000, 10, 8);
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    test_pass_one_batch(l);
    rf_loader_close(l);
    restore_helper(saved);
}

TEST_CASE(test_helper_not_executable_is_refused, "start",
          "helper not executable is refused")
{
    char path[] = "/tmp/rf-not-executable-XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK_EQ(chmod(path, 0644), 0);
    char *saved = use_helper(path);
    rf_config *cfg = rf_config_create();
    char *err = test_open_refused(cfg, RF_E_NO_PRODUCER_BINARY);
    CHECK_CONTAINS(err, path);
    CHECK_CONTAINS(err, "Permission denied");
    CHECK_CONTAINS(err, "point RINGFEED_PRODUCER at an executable");
    free(err);
    rf_config_free(cfg);
    unlink(path);
    restore_helper(saved);
}

/* A folder (RINGFEED_PRODUCER=/tmp) is said to be one, and where it came
 * from: it passed access(X_OK), and the spawn then failed with "cannot
 * start producer 0 from '/tmp': Permission denied". */
TEST_CASE(test_helper_that_is_a_folder_is_said, "start",
          "helper that is a folder is said")
{
    char path[] = "/tmp/rf-helper-folder-XXXXXX";
    CHECK(mkdtemp(path) != NULL);
    char *saved = use_helper(path);
    rf_config *cfg = rf_config_create();
    char *err = test_open_refused(cfg, RF_E_NO_PRODUCER_BINARY);
    char expected[128];
    snprintf(expected, sizeof(expected),
             "producer helper '%s' (RINGFEED_PRODUCER) cannot be executed: "
             "it is a folder, not the program",
             path);
    CHECK_CONTAINS(err, expected);
    CHECK_CONTAINS(err, "point RINGFEED_PRODUCER at an executable");
    free(err);
    rf_config_free(cfg);
    rmdir(path);
    restore_helper(saved);
}

/* A new executable script from the template path (mkstemp's XXXXXX) that
 * exits with `status` at once: 127 as a helper whose shared library is
 * missing does, 0 as another program named by RINGFEED_PRODUCER may. */
static void write_helper_that_exits(char *path, int status)
{
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    char script[64];
    const int n =
        snprintf(script, sizeof(script), "#!/bin/sh\nexit %d\n", status);
    CHECK_EQ(write(fd, script, (size_t)n), (ssize_t)n);
    close(fd);
    CHECK_EQ(chmod(path, 0755), 0);
}

/* A helper that runs but ends before attaching, as one whose shared
 * library is missing does (the dynamic loader exits with 127), or another
 * program that exits 0 (RINGFEED_PRODUCER=/bin/true): three in a row end
 * the run naming the helper, not a thousand respawns ending in advice
 * about the OOM killer. Policy fail says the same at once. */
static void helper_that_cannot_start_is_named(int status)
{
    char path[] = "/tmp/rf-cannot-start-XXXXXX";
    write_helper_that_exits(path, status);
    char *saved = use_helper(path);
    char ended[64];
    snprintf(ended, sizeof(ended), "exited with status %d at start", status);
    for (int policy = 0; policy < 2; policy++) {
        rf_config *cfg = rf_config_create();
        CHECK_OK(rf_config_set(cfg, RF_PARAM_PRODUCERS, 2));
        CHECK_OK(rf_config_set(cfg, RF_PARAM_QUIET, 1));
        CHECK_OK(rf_config_set(cfg, RF_PARAM_ON_PRODUCER_DEATH,
                               policy == 0 ? RF_ON_DEATH_RESPAWN
                                           : RF_ON_DEATH_FAIL));
        rf_loader *l = test_open_loader(cfg);
        rf_config_free(cfg);
        CHECK_EQ(next_until_error(l), RF_E_PRODUCER_DIED);
        const char *msg = rf_loader_error(l);
        CHECK_CONTAINS(msg, ended);
        CHECK_CONTAINS(msg, path);
        CHECK_CONTAINS(msg, "--help' runs");
        rf_stats st;
        CHECK_OK(rf_loader_stats(l, &st));
        if (policy == 0) {
            CHECK_CONTAINS(msg, "the last 3 producers all ended this way");
            CHECK_EQ(st.respawns, 2);
        } else {
            CHECK(strstr(msg, "RF_ON_DEATH_RESPAWN") == NULL);
            CHECK_EQ(st.respawns, 0);
        }
        rf_loader_close(l);
    }
    unlink(path);
    restore_helper(saved);
}

TEST_CASE(test_helper_that_cannot_start_is_named, "start",
          "helper that cannot start is named")
{
    helper_that_cannot_start_is_named(127);
}

TEST_CASE(test_helper_that_exits_at_once_is_named, "start",
          "another program as the helper, exiting 0, is named")
{
    helper_that_cannot_start_is_named(0);
}

/* Waits until producer 0 has attached with a pid other than `old`. */
static int attached_pid(const struct rf__segment *seg, int old)
{
    const struct rf__producer_state *st = rf__segment_producer(seg, 0);
    int pid = 0;
    while ((pid = (int)atomic_load(&st->pid)) == 0 || pid == old)
        sleep_us(100);
    return pid;
}

/* A helper that attaches and then crashes before its first batch (as one
 * that aborts while it sets up would) cannot start either: counted like
 * a crash before attaching, not replaced a thousand times. One producer
 * fills every slot and goes idle; the batches stay with the caller, so
 * its replacements get no order and crash idle. */
TEST_CASE(test_crash_after_attach_counts_as_failed_start, "start",
          "crash after attach counts as a failed start")
{
    const struct rlimit no_core = {0, 0};
    CHECK_EQ(setrlimit(RLIMIT_CORE, &no_core), 0);
    enum { SLOTS = 6 };
    rf_loader *l =
        TEST_OPEN_LOADER({RF_PARAM_PRODUCERS, 1}, {RF_PARAM_SLOTS, SLOTS},
                         {RF_PARAM_BATCH_SIZE, 4}, {RF_PARAM_QUIET, 1});
    struct rf__segment seg = map_control_segment();
    const struct rf__producer_state *st = rf__segment_producer(&seg, 0);
    while (atomic_load(&st->batches) < SLOTS)
        sleep_us(200);
    rf_batch held[SLOTS];
    int pid = attached_pid(&seg, 0), rc = 1, taken = 0;
    /* The first producer did work: its death starts no count. Each of
     * the next three dies idle before any batch. */
    for (int death = 0; death < 4 && rc == 1; death++) {
        if (death > 0)
            pid = attached_pid(&seg, pid);
        CHECK_EQ(kill(pid, SIGABRT), 0);
        /* next() hands out a ready batch at once and looks at the
         * producers every 10 ms (HEALTH_CHECK_MS): call it until it has
         * noticed this death, keeping every batch. */
        while (rc == 1 && (int)atomic_load(&st->pid) == pid) {
            CHECK(taken < SLOTS);
            sleep_us(20000);
            rc = rf_loader_next(l, &held[taken]);
            taken += rc == 1;
        }
    }
    if (rc == 1)
        rc = next_until_error(l);
    CHECK_EQ(rc, RF_E_PRODUCER_DIED);
    const char *msg = rf_loader_error(l);
    CHECK_CONTAINS(msg, "signal 6");
    CHECK_CONTAINS(msg, "while idle");
    CHECK_CONTAINS(msg, "the last 3 producers all ended this way");
    CHECK_CONTAINS(msg, "die before their first batch");
    CHECK(strstr(msg, "127") == NULL); /* it ran: no library is missing */
    rf_stats stats;
    CHECK_OK(rf_loader_stats(l, &stats));
    CHECK_EQ(stats.respawns, 3);
    rf_loader_close(l);
    munmap(seg.header, seg.control_size);
}

/* Copies the file at `from` to a new temporary file made executable;
 * writes its path into `to`. */
static void copy_executable(const char *from, char *to)
{
    const int in = open(from, O_RDONLY | O_CLOEXEC);
    const int out = mkstemp(to);
    CHECK(in >= 0 && out >= 0);
    char buffer[1 << 16];
    ssize_t got;
    while ((got = read(in, buffer, sizeof(buffer))) > 0)
        CHECK_EQ(write(out, buffer, (size_t)got), got);
    CHECK_EQ(got, 0);
    close(in);
    close(out);
    CHECK_EQ(chmod(to, 0755), 0);
}

/* A replacement runs the helper the loader checked at open, though the
 * file under that name was replaced meanwhile (an upgrade during the run)
 * by one that cannot start. */
TEST_CASE(test_helper_replaced_during_run, "start",
          "helper replaced during the run")
{
    char helper[] = "/tmp/rf-helper-XXXXXX";
    char broken[] = "/tmp/rf-broken-XXXXXX";
    const char *installed = getenv("RINGFEED_PRODUCER");
    CHECK(installed != NULL);
    copy_executable(installed, helper);
    write_helper_that_exits(broken, 127);
    char *saved = use_helper(helper);
    rf_loader *l =
        TEST_OPEN_LOADER({RF_PARAM_PRODUCERS, 1}, {RF_PARAM_SAMPLES, 4000},
                         {RF_PARAM_BATCH_SIZE, 4}, {RF_PARAM_QUIET, 1});
    test_pass_one_batch(l);
    CHECK_EQ(rename(broken, helper), 0);
    int pid = 0;
    CHECK_EQ(list_children(&pid, 1), 1);
    CHECK_EQ(kill(pid, SIGKILL), 0);
    const int rc = next_until_error(l);
    if (rc != 0)
        fprintf(stderr, "%s\n", rf_loader_error(l));
    CHECK_EQ(rc, 0);
    rf_stats st;
    CHECK_OK(rf_loader_stats(l, &st));
    CHECK_EQ(st.respawns, 1);
    rf_loader_close(l);
    unlink(helper);
    restore_helper(saved);
    printf("helper replaced during the run: its replacement ran the one "
           "opened\n");
}

/* A new helper from the template path (mkstemp's XXXXXX) that sleeps 3 s
 * before it runs the real one while the file named in `mark` (PATH.slow)
 * exists: a slow start, as on a loaded machine or a slow file system. */
static void write_slow_helper(char *path, char *mark, size_t mark_len)
{
    const char *real = getenv("RINGFEED_PRODUCER");
    CHECK(real != NULL);
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    snprintf(mark, mark_len, "%s.slow", path);
    char script[2200];
    const int n = snprintf(script, sizeof(script),
                           "#!/bin/sh\n[ -e '%s' ] && sleep 3\nexec '%s' "
                           "\"$@\"\n",
                           mark, real);
    CHECK(n > 0 && (size_t)n < sizeof(script));
    CHECK_EQ(write(fd, script, (size_t)n), (ssize_t)n);
    close(fd);
    CHECK_EQ(chmod(path, 0755), 0);
}

/* next() waits up to 2 s for a replacement to follow the consumer, as
 * open does for the first ones; a signal ends that wait at once: next()
 * returns -EINTR, as for a signal while it waits for a batch (it went on
 * waiting, and a Ctrl-C or rf_loader_interrupt() waited with it), and
 * the run goes on once the replacement has started. */
TEST_CASE(test_signal_ends_the_wait_for_a_replacement, "start",
          "a signal ends the wait for a slow replacement")
{
    char helper[] = "/tmp/rf-slow-helper-XXXXXX", mark[64];
    write_slow_helper(helper, mark, sizeof(mark));
    char *saved = use_helper(helper);
    rf_config *cfg = small_config(1, 1000000, 4, 8);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_QUIET, 1));
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    rf_batch b;
    CHECK_EQ(rf_loader_next(l, &b), 1);
    CHECK_OK(rf_loader_release(l, &b));
    const int marked = creat(mark, 0644); /* the replacement starts slowly */
    CHECK(marked >= 0);
    close(marked);
    int pid = 0;
    CHECK_EQ(list_children(&pid, 1), 1);
    CHECK_EQ(kill(pid, SIGKILL), 0);
    struct sigaction sa = {.sa_handler = on_alarm}, old;
    CHECK_EQ(sigaction(SIGALRM, &sa, &old), 0);
    const struct itimerval once = {{0, 0}, {0, 300000}};
    CHECK_EQ(setitimer(ITIMER_REAL, &once, NULL), 0);
    const uint64_t started = rf__now_ns();
    int rc;
    while ((rc = rf_loader_next(l, &b)) == 1) /* what it made before */
        CHECK_OK(rf_loader_release(l, &b));
    const uint64_t took_ms = (rf__now_ns() - started) / 1000000;
    printf("next() returned %d after %llu ms: %s\n", rc,
           (unsigned long long)took_ms, rf_loader_error(l));
    CHECK_EQ(rc, -EINTR);
    CHECK_CONTAINS(rf_loader_error(l), "while a replacement producer started");
    CHECK_LT(took_ms, 1500); /* the signal came at 300 ms; the wait is 2 s */
    unlink(mark);
    CHECK_EQ(rf_loader_next(l, &b), 1); /* once the replacement runs */
    CHECK_OK(rf_loader_release(l, &b));
    CHECK_EQ(sigaction(SIGALRM, &old, NULL), 0);
    rf_loader_close(l);
    unlink(helper);
    restore_helper(saved);
}

/* A spawned producer holds fds 0 to 5 and nothing else: not the caller's
 * files (opened here without O_CLOEXEC), not the fd its helper was
 * started from. */
TEST_CASE(test_producer_holds_only_its_fds, "start",
          "producer holds only its fds")
{
#ifdef HAVE_POSIX_SPAWN_FILE_ACTIONS_ADDCLOSEFROM_NP
    const int stray = open("/dev/null", O_RDONLY);
    CHECK(stray >= 0);
    rf_loader *l = TEST_OPEN_LOADER({RF_PARAM_PRODUCERS, 1});
    rf_batch b;
    CHECK_EQ(rf_loader_next(l, &b), 1); /* the producer is running */
    int pid = 0;
    CHECK_EQ(list_children(&pid, 1), 1);
    char folder[64], fd_path[80];
    snprintf(folder, sizeof(folder), "/proc/%d/fd", pid);
    CHECK_EQ(count_entries(folder), 6);
    for (int fd = 0; fd <= 5; fd++) { /* six entries, and these are they */
        struct stat st;
        snprintf(fd_path, sizeof(fd_path), "%s/%d", folder, fd);
        CHECK_EQ(lstat(fd_path, &st), 0);
    }
    CHECK_OK(rf_loader_release(l, &b));
    rf_loader_close(l);
    close(stray);
#endif
}

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
