/*
 * test-start-limits.c - starting producers under the process's limits: a
 * low fd limit is refused at open with what to change; no room for
 * another process (ulimit -u, a cgroup's pids.max) is named so, at open
 * and for a replacement, whose start is tried again for about a second
 * (a moment's shortage is waited out, a kept one ends the run saying so,
 * its advice whole whatever the helper's path); root of a user namespace
 * (a rootless container), held to RLIMIT_NPROC, is told of ulimit -u.
 * Cases that need another user run as nobody where the test is root, and
 * skip where that cannot be done.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/resources.h"
#include "faults.h"
#include "harness.h"
#include "proc.h"
#include "test.h"

TEST_CASE(test_low_fd_limit_is_refused, "start", "low fd limit is refused")
{
    const pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        const struct rlimit low = {(rlim_t)count_entries("/proc/self/fd") + 4,
                                   (rlim_t)count_entries("/proc/self/fd") + 4};
        CHECK_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
        rf_config *cfg = TEST_CONFIG({RF_PARAM_PRODUCERS, 4});
        char *err = test_open_refused(cfg, -EMFILE);
        CHECK_CONTAINS(err, "needs 10 file descriptors (4 producers)");
        CHECK_CONTAINS(err, "ulimit -n");
        CHECK_CONTAINS(err, "start fewer producers (RF_PARAM_PRODUCERS)");
        free(err);
        rf_config_free(cfg);
        _exit(0);
    }
    CHECK_EQ(exit_status_of(child), 0);
}

/* Becomes nobody when root (root is not held to RLIMIT_NPROC); false when
 * that cannot be done. */
static bool become_held_to_process_limit(void)
{
    return geteuid() != 0 ||
           (setgroups(0, NULL) == 0 && setresgid(65534, 65534, 65534) == 0 &&
            setresuid(65534, 65534, 65534) == 0);
}

/* Waits for a child that ran as nobody: skips the case where it could
 * not become nobody or nobody could not run the helper. */
static void check_child_as_nobody(pid_t child)
{
    const int status = exit_status_of(child);
    if (status == TEST_SKIP)
        TEST_SKIP_BECAUSE("cannot become nobody, or nobody cannot run "
                          "the helper");
    CHECK_EQ(status, 0);
}

/* No room for another process (ulimit -u; a cgroup's pids.max gives the
 * same EAGAIN): the open names the limit and the producer count, in
 * spawn and in fork mode, rather than a bare "Resource temporarily
 * unavailable". Root is not held to RLIMIT_NPROC, so as root the child
 * becomes nobody first; with a limit of 0 no process can be started. */
TEST_CASE(test_process_limit_is_named, "start", "process limit is named")
{
    for (int fork_mode = 0; fork_mode < 2; fork_mode++) {
        const pid_t child = fork();
        CHECK(child >= 0);
        if (child == 0) {
            if (!become_held_to_process_limit())
                _exit(TEST_SKIP);
            const struct rlimit none = {0, 0};
            CHECK_EQ(setrlimit(RLIMIT_NPROC, &none), 0);
            rf_config *cfg =
                TEST_CONFIG({RF_PARAM_PRODUCERS, 2}, {RF_PARAM_QUIET, 1},
                            {RF_PARAM_START_MODE,
                             fork_mode ? RF_START_FORK : RF_START_SPAWN});
            rf_loader *l = NULL;
            char *err = NULL;
            const int rc = rf_loader_open(&l, cfg, &err);
            if (rc == RF_E_NO_PRODUCER_BINARY) /* nobody cannot reach it */
                _exit(TEST_SKIP);
            if (rc != -EAGAIN)
                fprintf(stderr, "rf_loader_open: %d %s\n", rc, err ? err : "");
            CHECK_EQ(rc, -EAGAIN);
            CHECK_CONTAINS(err, "producer 0");
            CHECK_CONTAINS(err, "ulimit -u, RLIMIT_NPROC");
            CHECK_CONTAINS(err, "pids.max");
            CHECK_CONTAINS(err, "start fewer producers (RF_PARAM_PRODUCERS)");
            free(err);
            rf_config_free(cfg);
            _exit(0);
        }
        check_child_as_nobody(child);
    }
}

/* RLIMIT_NPROC's soft limit: 1 lets this user start no process, and the
 * hard limit stays, so that the soft one can be raised again. */
static void set_process_limit(rlim_t soft)
{
    struct rlimit rl;
    CHECK_EQ(getrlimit(RLIMIT_NPROC, &rl), 0);
    rl.rlim_cur =
        soft == RLIM_INFINITY || soft > rl.rlim_max ? rl.rlim_max : soft;
    CHECK_EQ(setrlimit(RLIMIT_NPROC, &rl), 0);
}

static atomic_int limit_lowered;

/* Lowers the limit (a thread is a process to it: created first), then
 * raises it 200 ms later. */
static void *lower_process_limit_for_a_moment(void *unused)
{
    (void)unused;
    set_process_limit(1);
    atomic_store(&limit_lowered, 1);
    sleep_us(200000);
    set_process_limit(RLIM_INFINITY);
    return NULL;
}

/* A producer dies while no process can be started (a moment's shortage:
 * ulimit -u, pids.max): its replacement is tried again for about a
 * second before the run ends. With the limit raised 200 ms after the
 * death the run goes on; with it kept, the run ends saying the start was
 * tried again, and what limit refused it. */
static void replacement_under_process_limit(bool raised, const char *helper)
{
    const pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        if (!become_held_to_process_limit())
            _exit(TEST_SKIP);
        if (helper)
            setenv("RINGFEED_PRODUCER", helper, 1);
        rf_config *cfg =
            TEST_CONFIG({RF_PARAM_PRODUCERS, 1}, {RF_PARAM_SAMPLES, 4000},
                        {RF_PARAM_BATCH_SIZE, 4}, {RF_PARAM_QUIET, 1});
        rf_loader *l = NULL;
        char *err = NULL;
        const int opened = rf_loader_open(&l, cfg, &err);
        rf_config_free(cfg);
        if (opened == RF_E_NO_PRODUCER_BINARY) /* nobody cannot reach it */
            _exit(TEST_SKIP);
        CHECK_OK(opened);
        test_pass_one_batch(l);
        int pid = 0;
        CHECK_EQ(list_children(&pid, 1), 1);
        pthread_t raiser;
        if (raised) {
            CHECK_EQ(pthread_create(&raiser, NULL,
                                    lower_process_limit_for_a_moment, NULL),
                     0);
            while (!atomic_load(&limit_lowered))
                sleep_us(1000);
        } else {
            set_process_limit(1);
        }
        CHECK_EQ(kill(pid, SIGKILL), 0);
        const uint64_t started = rf__now_ns();
        const int rc = next_until_error(l);
        const uint64_t took_ms = (rf__now_ns() - started) / 1000000;
        printf("limit %s: next() %d after %llu ms: %s\n",
               raised ? "raised after 200 ms" : "kept", rc,
               (unsigned long long)took_ms, rc ? rf_loader_error(l) : "");
        rf_stats st;
        CHECK_OK(rf_loader_stats(l, &st));
        if (raised) {
            CHECK_EQ(pthread_join(raiser, NULL), 0);
            CHECK_EQ(rc, 0);
            CHECK_EQ(st.respawns, 1);
        } else {
            CHECK_EQ(rc, RF_E_PRODUCER_DIED);
            const char *msg = rf_loader_error(l);
            CHECK_CONTAINS(msg, "was killed by signal 9");
            CHECK_CONTAINS(msg, "no replacement could be started, tried 8 "
                                "times over");
            CHECK_CONTAINS(msg, "ulimit -u");
            CHECK_CONTAINS(msg, "pids.max");
            /* the whole advice, to its end, whatever the helper's path */
            const char *end = "start fewer producers (RF_PARAM_PRODUCERS)";
            CHECK(strlen(msg) >= strlen(end));
            CHECK_EQ(strcmp(msg + strlen(msg) - strlen(end), end), 0);
            CHECK_EQ(st.respawns, 0);
        }
        rf_loader_close(l);
        _exit(0);
    }
    check_child_as_nobody(child);
}

TEST_CASE(test_replacement_waits_out_process_limit, "start",
          "a replacement waits out a moment's process limit")
{
    replacement_under_process_limit(true, NULL);
}

TEST_CASE(test_replacement_under_kept_process_limit, "start",
          "a kept process limit ends the run after retries")
{
    replacement_under_process_limit(false, NULL);
}

/* The same with the helper at a path of about 900 characters (a deep
 * build tree): the message keeps its advice whole, eliding the path. */
TEST_CASE(test_long_helper_path_keeps_the_advice, "start",
          "a long helper path keeps the advice of a failed replacement")
{
    const char *real = getenv("RINGFEED_PRODUCER");
    CHECK(real != NULL);
    char top[] = "/tmp/rf-long-helper-XXXXXX";
    CHECK(mkdtemp(top) != NULL);
    CHECK_EQ(chmod(top, 0755), 0);
    char dir[1024], helper[1100];
    snprintf(dir, sizeof(dir), "%s", top);
    char part[201];
    memset(part, 'd', 200);
    part[200] = '\0';
    for (int depth = 0; depth < 4; depth++) {
        const size_t n = strlen(dir);
        snprintf(dir + n, sizeof(dir) - n, "/%s", part);
        CHECK_EQ(mkdir(dir, 0755), 0);
    }
    snprintf(helper, sizeof(helper), "%s/ringfeed-producer", dir);
    CHECK_EQ(symlink(real, helper), 0);
    replacement_under_process_limit(false, helper);
    CHECK_EQ(unlink(helper), 0);
    for (int depth = 0; depth < 4; depth++) {
        CHECK_EQ(rmdir(dir), 0);
        *strrchr(dir, '/') = '\0';
    }
    CHECK_EQ(rmdir(top), 0);
}

/* Root of a user namespace (a rootless container) is held to
 * RLIMIT_NPROC as root of the system is not: uid_map tells them apart,
 * and the advice for root names ulimit -u then. */
TEST_CASE(test_root_of_a_user_namespace_is_held, "start",
          "root of a user namespace is told of ulimit -u")
{
    static const struct {
        const char *map;
        bool other;
    } maps[] = {
        {"         0          0 4294967295\n", false}, /* the system's */
        {"0 0 1\n", false},         /* root mapped to root: still exempt */
        {"0 100000 65536\n", true}, /* rootless podman, docker */
        {"1000 1000 1\n0 231072 1000\n", true},
        {"", false},
    };
    for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++) {
        char path[] = "/tmp/rf-uid-map-XXXXXX";
        const int fd = mkstemp(path);
        CHECK(fd >= 0);
        const size_t n = strlen(maps[i].map);
        CHECK_EQ(write(fd, maps[i].map, n), (ssize_t)n);
        close(fd);
        CHECK_EQ(rf__root_is_another_user(path), maps[i].other);
        unlink(path);
    }
    CHECK(!rf__root_is_another_user("/nonexistent/uid_map"));
    /* For real, where user namespaces may be made: root mapped to nobody
     * outside, with a finite RLIMIT_NPROC, is told of it. */
    if (geteuid() != 0)
        return;
    int go[2], ready[2];
    CHECK_EQ(pipe(go), 0);
    CHECK_EQ(pipe(ready), 0);
    const pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        close(go[1]);
        close(ready[0]);
        /* nobody, then root of its own namespace, as in a rootless
         * container; the parent maps it once it has unshared (a map
         * written before is refused) */
        if (!become_held_to_process_limit() || unshare(CLONE_NEWUSER) != 0)
            _exit(TEST_SKIP);
        char byte = 'u';
        if (write(ready[1], &byte, 1) != 1)
            _exit(TEST_SKIP);
        if (read(go[0], &byte, 1) != 1 || getuid() != 0)
            _exit(TEST_SKIP);
        const struct rlimit some = {1000, 1000};
        CHECK_EQ(setrlimit(RLIMIT_NPROC, &some), 0);
        char advice[320] = "";
        CHECK(rf__advise_on_process_limit(EAGAIN, advice, sizeof(advice)));
        CHECK_CONTAINS(advice, "this user may run 1000 processes");
        CHECK_CONTAINS(advice, "ulimit -u");
        _exit(0);
    }
    close(go[0]);
    close(ready[1]);
    char file[64], byte;
    const bool unshared = read(ready[0], &byte, 1) == 1; /* EOF: skipped */
    close(ready[0]);
    snprintf(file, sizeof(file), "/proc/%d/uid_map", (int)child);
    const int fd = unshared ? open(file, O_WRONLY) : -1;
    const bool mapped = fd >= 0 && write(fd, "0 65534 1", 9) == 9;
    if (fd >= 0)
        close(fd);
    if (mapped)
        CHECK_EQ(write(go[1], "x", 1), 1);
    close(go[1]);
    const int status = exit_status_of(child);
    if (status == TEST_SKIP || !mapped)
        TEST_SKIP_BECAUSE("no user namespace to be made here");
    CHECK_EQ(status, 0);
}

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
