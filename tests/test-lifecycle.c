/*
 * test-lifecycle.c - what happens around the stream: closing mid-epoch
 * leaves no child process, no fd and nothing in /dev/shm, even with a
 * stopped producer or exec() instead of close; holding every slot is an
 * error, not a hang; a killed producer is reported with its pid and
 * signal; rf_loader_interrupt() ends one wait, from another thread or a
 * signal handler; a child of
 * fork() or clone() leaves its parent's run alone, and fork mode is
 * refused beside other threads; a small /dev/shm does not limit the
 * ring; producers map only the slots they fill; errors have names. (What
 * open refuses is test-start's; a message handler calling back into its
 * loader, test-handler's.)
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/internal.h"
#include "harness.h"
#include "proc.h"
#include "test.h"

static rf_config *small_config(int64_t producers, int64_t slots)
{
    return TEST_CONFIG({RF_PARAM_PRODUCERS, producers}, {RF_PARAM_SLOTS, slots},
                       {RF_PARAM_BATCH_SIZE, 4}, {RF_PARAM_HEIGHT, 8},
                       {RF_PARAM_WIDTH, 8}, {RF_PARAM_SAMPLES, 1000000});
}

/* Opens a loader from cfg, which it frees; *ring_bytes: its ring's size. */
static rf_loader *open_and_free(rf_config *cfg, size_t *ring_bytes)
{
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    void *base = NULL;
    CHECK_OK(rf_loader_arena(l, &base, ring_bytes));
    return l;
}

static rf_loader *open_small(int64_t producers, int64_t slots)
{
    rf_config *cfg = small_config(producers, slots);
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    return l;
}

TEST_CASE(test_close_mid_epoch_leaves_nothing, "close",
          "mid-epoch: no process, fd or /dev/shm entry left")
{
    const int fds_before = count_entries("/proc/self/fd");
    const int shm_before = count_entries("/dev/shm");
    rf_loader *l = open_small(3, 6);
    rf_batch held, b;
    CHECK_EQ(rf_loader_next(l, &held), 1);
    CHECK_EQ(rf_loader_next(l, &b), 1);
    CHECK_OK(rf_loader_release(l, &b));
    int pids[16];
    CHECK_EQ(list_children(pids, 16), 3);
    rf_loader_close(l); /* with `held` still out */
    CHECK_EQ(list_children(pids, 16), 0);
    CHECK_EQ(waitpid(-1, NULL, WNOHANG), -1); /* no zombie either */
    CHECK_EQ(errno, ECHILD);
    CHECK_EQ(count_entries("/proc/self/fd"), fds_before);
    CHECK_EQ(count_entries("/dev/shm"), shm_before);
}

TEST_CASE(test_holding_every_slot_is_an_error, "slots",
          "holding every slot is an error, not a hang")
{
    rf_loader *l = open_small(1, 2);
    rf_batch a, b, c;
    CHECK_EQ(rf_loader_next(l, &a), 1);
    CHECK_EQ(rf_loader_next(l, &b), 1);
    CHECK_EQ(rf_loader_next(l, &c), RF_E_ALL_SLOTS_HELD);
    CHECK_CONTAINS(rf_loader_error(l), "release a batch");
    CHECK_OK(rf_loader_release(l, &a));
    CHECK_EQ(rf_loader_next(l, &c), 1); /* recoverable */
    CHECK_EQ(c.sequence, 2);
    CHECK_EQ(rf_loader_release(l, &a), -EINVAL); /* twice */
    CHECK_CONTAINS(rf_loader_error(l), "released twice");
    rf_loader_close(l);
}

TEST_CASE(test_killed_producer_is_reported, "death",
          "a killed producer is named, with its signal")
{
    rf_config *cfg = small_config(2, 4);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_ON_PRODUCER_DEATH, RF_ON_DEATH_FAIL));
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    test_pass_one_batch(l);
    int pids[16];
    const int n = list_children(pids, 16);
    CHECK_EQ(n, 2);
    for (int i = 0; i < n; i++)
        CHECK_EQ(kill(pids[i], SIGKILL), 0);
    rf_batch b;
    int rc;
    int delivered = 0;
    while ((rc = rf_loader_next(l, &b)) == 1) {
        CHECK_OK(rf_loader_release(l, &b));
        CHECK_LT(++delivered, 8); /* at most what was already in the ring */
    }
    CHECK_EQ(rc, RF_E_PRODUCER_DIED);
    CHECK_CONTAINS(rf_loader_error(l), "killed by signal 9");
    char pid_text[32];
    snprintf(pid_text, sizeof(pid_text), "pid %d", pids[0]);
    const char *msg = rf_loader_error(l);
    char pid_text2[32];
    snprintf(pid_text2, sizeof(pid_text2), "pid %d", pids[1]);
    CHECK(strstr(msg, pid_text) || strstr(msg, pid_text2));
    CHECK_CONTAINS(msg, "RF_ON_DEATH_RESPAWN"); /* what the user can change */
    CHECK_EQ(rf_loader_next(l, &b), RF_E_PRODUCER_DIED); /* sticky */
    rf_loader_close(l);
    CHECK_EQ(list_children(pids, 16), 0);
}

static void *idle_thread(void *arg)
{
    pause();
    return arg;
}

TEST_CASE(test_fork_refused_with_threads, "fork",
          "fork mode refused beside another thread")
{
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, idle_thread, NULL), 0);
    rf_config *cfg = TEST_CONFIG({RF_PARAM_START_MODE, RF_START_FORK});
    char *err = test_open_refused(cfg, RF_E_FORK_UNSAFE);
    CHECK_CONTAINS(err, "2 threads");
    CHECK_CONTAINS(err, "RF_START_SPAWN");
    free(err);
    rf_config_free(cfg);
    /* The thread stays parked until exit; spawn mode must still work. */
    rf_loader_close(open_small(1, 2));
}

TEST_CASE_LIMIT(test_error_names, "errors", "every error has a name of its own",
                10)
{
    static const int codes[] = {
#define RF_CODE_(name, value, message) value,
        RF_ERROR_MAP(RF_CODE_)
#undef RF_CODE_
    };
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        CHECK_LT(codes[i], -4096); /* no errno reaches the range */
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(rf_strerror(codes[i]), rf_strerror(codes[j])) != 0);
    }
    CHECK_CONTAINS(rf_strerror(-ENOMEM), "memory");
    CHECK_CONTAINS(rf_strerror(0), "success");
    /* an errno no system has: still a static string, the same pointer
     * each time (strerror() wrote "Unknown error 4000" into a per-thread
     * buffer the next call overwrites) */
    const char *unknown = rf_strerror(-4000);
    CHECK(unknown == rf_strerror(-3999));
    CHECK_EQ(rf_version(), RF_VERSION_NUMBER);
}

/* Fork mode: the producers hold no fd of the caller's, like spawn mode: a
 * pipe whose write end the caller closes reaches EOF. */
TEST_CASE(test_fork_mode_keeps_caller_fds_out, "fork",
          "fork mode keeps the caller's fds out")
{
    int p[2];
    CHECK_EQ(pipe(p), 0); /* no O_CLOEXEC, like a socket or a child's pipe */
    rf_config *cfg = small_config(2, 4);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_START_MODE, RF_START_FORK));
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    close(p[1]);
    struct pollfd pfd = {.fd = p[0], .events = POLLIN};
    CHECK_EQ(poll(&pfd, 1, 3000), 1); /* EOF, not a timeout */
    close(p[0]);
    rf_loader_close(l);
}

static volatile sig_atomic_t alarm_ticks;

static void on_alarm(int sig)
{
    (void)sig;
    /* Bounded, so that the test fails instead of hanging without a fix. */
    if (++alarm_ticks >= 50) {
        const struct itimerval off = {{0, 0}, {0, 0}};
        setitimer(ITIMER_REAL, &off, NULL);
    }
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) +
           (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* close() waits at most a second for a stuck producer, even when a timer
 * signal interrupts the wait every 100 ms. */
TEST_CASE(test_close_under_periodic_signals, "close",
          "a stopped producer, under timer signals")
{
    rf_loader *l = open_small(1, 2);
    test_pass_one_batch(l);
    int pids[4];
    CHECK_EQ(list_children(pids, 4), 1);
    CHECK_EQ(kill(pids[0], SIGSTOP), 0);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_alarm;
    CHECK_EQ(sigaction(SIGALRM, &sa, &old), 0);
    alarm_ticks = 0;
    const struct itimerval every = {{0, 100000}, {0, 100000}};
    CHECK_EQ(setitimer(ITIMER_REAL, &every, NULL), 0);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rf_loader_close(l);
    const double took = seconds_since(&t0);
    const struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    sigaction(SIGALRM, &old, NULL);
    fprintf(stderr, "close took %.3f s, %d timer signals\n", took,
            (int)alarm_ticks);
    CHECK_LT(took * 1000, 2500);
    /* close() gives a stuck producer a second's grace: several signals
     * cut that wait short, and it went on, neither ending early nor
     * starting again at each signal */
    CHECK_GE(alarm_ticks, 3);
    CHECK_EQ(list_children(pids, 4), 0);
}

struct interrupter {
    rf_loader *loader;
    int delay_ms;
    int rc;
};

static void *interrupt_later(void *arg)
{
    struct interrupter *in = arg;
    usleep((useconds_t)in->delay_ms * 1000);
    in->rc = rf_loader_interrupt(in->loader);
    return NULL;
}

/* Takes the batches made before the producer stopped, from sequence
 * number `next_seq` on: each call is interrupted first, so the first one
 * that would wait returns -EINTR instead. Returns the next batch's
 * sequence number. */
static uint64_t take_ready_batches(rf_loader *l, uint64_t next_seq)
{
    rf_batch b;
    for (;;) {
        CHECK_OK(rf_loader_interrupt(l));
        const int rc = rf_loader_next(l, &b);
        if (rc == -EINTR)
            return next_seq;
        CHECK_EQ(rc, 1);
        CHECK_EQ(b.sequence, next_seq++);
        CHECK_OK(rf_loader_release(l, &b));
    }
}

/* rf_loader_interrupt() from another thread ends a next() that waits for
 * a batch that will not come (its producer stopped), at once; before any
 * call it ends the first call that would wait, without the wait (calls
 * that find a batch ready return it); and the run goes on after either,
 * in order, when the producer does. */
TEST_CASE(test_interrupt_from_another_thread, "next",
          "rf_loader_interrupt() from another thread ends a wait")
{
    rf_loader *l = open_small(1, 2);
    rf_batch b;
    CHECK_EQ(rf_loader_next(l, &b), 1);
    CHECK_EQ(b.sequence, 0);
    CHECK_OK(rf_loader_release(l, &b));
    int pids[4];
    CHECK_EQ(list_children(pids, 4), 1);
    CHECK_EQ(kill(pids[0], SIGSTOP), 0);
    /* the batches already made come first, then the wait is cut short */
    const uint64_t next_seq = take_ready_batches(l, 1);
    CHECK_CONTAINS(rf_loader_error(l), "rf_loader_interrupt()");
    /* the interrupt was one call's: next() now waits, until the thread */
    struct interrupter in = {.loader = l, .delay_ms = 300, .rc = 1};
    pthread_t thread;
    CHECK_EQ(pthread_create(&thread, NULL, interrupt_later, &in), 0);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_EQ(rf_loader_next(l, &b), -EINTR);
    const double waited = seconds_since(&t0);
    pthread_join(thread, NULL);
    CHECK_EQ(in.rc, 0);
    CHECK_GE(waited * 1000, 250); /* it waited for the interrupt */
    CHECK_LT(waited * 1000, 300 + 2000 * test_time_scale());
    /* no batch lost: the producer goes on where it stopped */
    CHECK_EQ(kill(pids[0], SIGCONT), 0);
    CHECK_EQ(rf_loader_next(l, &b), 1);
    CHECK_EQ(b.sequence, next_seq);
    CHECK_OK(rf_loader_release(l, &b));
    rf_loader_close(l);
    CHECK_EQ(rf_loader_interrupt(NULL), -EINVAL);
}

static rf_loader *interrupted_by_alarm;

static void interrupt_on_alarm(int sig)
{
    (void)sig;
    (void)rf_loader_interrupt(interrupted_by_alarm);
}

/* A signal handler that calls rf_loader_interrupt() ends the wait it cut
 * short, and only that one: the next call waits for its batch (the
 * interrupt was left pending, and ended the next wait at once too). */
TEST_CASE(test_interrupt_from_a_signal_handler, "next",
          "rf_loader_interrupt() from a signal handler ends one wait")
{
    rf_loader *l = open_small(1, 2);
    int pids[4];
    CHECK_EQ(list_children(pids, 4), 1);
    CHECK_EQ(kill(pids[0], SIGSTOP), 0);
    (void)take_ready_batches(l, 0);
    rf_batch b;
    interrupted_by_alarm = l;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = interrupt_on_alarm;
    sigemptyset(&sa.sa_mask);
    CHECK_EQ(sigaction(SIGALRM, &sa, &old), 0);
    const struct itimerval once = {.it_value = {.tv_usec = 200000}};
    CHECK_EQ(setitimer(ITIMER_REAL, &once, NULL), 0);
    CHECK_EQ(rf_loader_next(l, &b), -EINTR);
    CHECK_EQ(sigaction(SIGALRM, &old, NULL), 0);
    CHECK_CONTAINS(rf_loader_error(l), "rf_loader_interrupt()");
    CHECK_EQ(kill(pids[0], SIGCONT), 0);
    CHECK_EQ(rf_loader_next(l, &b), 1);
    CHECK_OK(rf_loader_release(l, &b));
    rf_loader_close(l);
}

/* A batch of another loader is refused, even with the same slot and
 * sequence, instead of refilling a slot the caller still reads. */
TEST_CASE(test_release_of_another_loaders_batch, "slots",
          "a batch of another loader is refused")
{
    rf_loader *a = open_small(1, 2), *b = open_small(1, 2);
    rf_batch ba, bb;
    CHECK_EQ(rf_loader_next(a, &ba), 1);
    CHECK_EQ(rf_loader_next(b, &bb), 1);
    CHECK_EQ(ba.handle, bb.handle); /* slot 0, batch 0 in both */
    CHECK_EQ(rf_loader_release(b, &ba), -EINVAL);
    CHECK_OK(rf_loader_release(b, &bb));
    CHECK_OK(rf_loader_release(a, &ba));
    rf_loader_close(a);
    rf_loader_close(b);
}

/* A process that exec()s another program without closing its loader
 * (a training script restarting itself) leaves no producer behind. */
TEST_CASE(test_exec_without_close_stops_producers, "close",
          "exec() without close stops the producers")
{
    int fd;
    const pid_t child = fork_with_pipe(&fd);
    if (child == 0) {
        rf_loader *l = open_small(2, 4);
        int pids[4];
        const int n = list_children(pids, 4);
        if (write(fd, pids, sizeof(pids[0]) * (size_t)n) < 0)
            _exit(1);
        close(fd);
        (void)l; /* not closed */
        execl("/bin/sleep", "sleep", "30", (char *)NULL);
        _exit(1);
    }
    int pids[4];
    const ssize_t got = read(fd, pids, sizeof(pids));
    close(fd);
    CHECK_EQ(got, 2 * (ssize_t)sizeof(int));
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while ((!process_gone(pids[0]) || !process_gone(pids[1])) &&
           seconds_since(&t0) < 3)
        usleep(20000);
    const bool gone = process_gone(pids[0]) && process_gone(pids[1]);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    CHECK(gone);
}

/* Takes the rest of the run: with `taken` samples already delivered, it
 * must end normally after `expected` in all, with no producer replaced. */
static void finish_whole(rf_loader *l, uint64_t taken, uint64_t expected)
{
    rf_batch b;
    int rc;
    while ((rc = rf_loader_next(l, &b)) == 1) {
        taken += b.samples;
        CHECK_OK(rf_loader_release(l, &b));
    }
    CHECK_EQ(rc, 0);
    CHECK_EQ(taken, expected);
    rf_stats st;
    CHECK_OK(rf_loader_stats(l, &st));
    CHECK_EQ(st.respawns, 0);
}

/* A child of fork() holds a copy of its parent's loader. Using it there
 * is refused, and closing it frees only the copy: the parent's run goes
 * on to its end with its own producers, none replaced. */
static void test_fork_child_leaves_the_parents_run_alone(int mode)
{
    const int fds_before = count_entries("/proc/self/fd");
    rf_config *cfg = small_config(2, 4);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SAMPLES, 2000));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_START_MODE, mode));
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    rf_batch held;
    CHECK_EQ(rf_loader_next(l, &held), 1);
    const pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        rf_batch b;
        void *base = NULL;
        size_t bytes = 0;
        const bool refused =
            rf_loader_next(l, &b) == RF_E_FORK_UNSAFE &&
            strstr(rf_loader_error(l), "a child of fork()") != NULL &&
            rf_loader_release(l, &held) == RF_E_FORK_UNSAFE &&
            rf_loader_arena(l, &base, &bytes) == RF_E_FORK_UNSAFE &&
            base == NULL;
        rf_loader_close(l);
        /* Its copies of the fds are gone, the pidfds too (they stayed, one
         * per producer, on the first version). */
        const int fds_left = count_entries("/proc/self/fd");
        _exit(!refused ? 1 : fds_left != fds_before ? 2 : 0);
    }
    CHECK_EQ(exit_status_of(child), 0);
    CHECK_OK(rf_loader_release(l, &held));
    finish_whole(l, held.samples, 2000);
    rf_loader_close(l);
    printf("%s mode: a fork child's next(), release() and arena() refused "
           "and its close harmless (no fd left): the parent's run ended "
           "with all 2000 samples\n",
           mode == RF_START_FORK ? "fork" : "spawn");
}

TEST_CASE(test_fork_child_spawn_mode, "fork",
          "a fork child leaves the run alone, spawn mode")
{
    test_fork_child_leaves_the_parents_run_alone(RF_START_SPAWN);
}

TEST_CASE(test_fork_child_fork_mode, "fork",
          "a fork child leaves the run alone, fork mode")
{
    test_fork_child_leaves_the_parents_run_alone(RF_START_FORK);
}

/* A child made by the bare clone() system call (no atfork handler runs)
 * is told apart from its parent too; and a loader that the child opens is
 * its own, while the parent's stays refused there. Then the parent's run
 * ends whole. */
TEST_CASE(test_child_of_raw_clone_has_its_own_loaders, "fork",
          "a child of a bare clone() has its own loaders")
{
    rf_config *cfg = small_config(2, 4);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SAMPLES, 400));
    rf_loader *l = test_open_loader(cfg);
    test_pass_one_batch(l);
    fflush(stdout);
    const long child = syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L);
    CHECK(child >= 0);
    if (child == 0) {
        rf_batch b;
        int failed = rf_loader_next(l, &b) == RF_E_FORK_UNSAFE ? 0 : 1;
        rf_loader *own = NULL;
        char *why = NULL;
        if (!failed && rf_loader_open(&own, cfg, &why) != 0)
            failed = 2;
        uint64_t samples = 0;
        int rc = 0;
        while (!failed && (rc = rf_loader_next(own, &b)) == 1) {
            samples += b.samples;
            if (rf_loader_release(own, &b) != 0)
                failed = 3;
        }
        if (!failed && (rc != 0 || samples != 400))
            failed = 4;
        if (!failed && rf_loader_next(l, &b) != RF_E_FORK_UNSAFE)
            failed = 5;
        rf_loader_close(own);
        rf_loader_close(l);
        free(why);
        _exit(failed);
    }
    CHECK_EQ(exit_status_of((pid_t)child), 0);
    finish_whole(l, 4, 400);
    rf_loader_close(l);
    rf_config_free(cfg);
    printf("a child of a bare clone(): the parent's loader refused, its own "
           "ran whole; the parent's run ended with all 400 samples\n");
}

/* This case's process gets a private mount namespace whose /dev/shm is
 * a 1 MiB tmpfs, as in a container started with a small --shm-size
 * (Docker's default is 64 MiB); the case skips where that cannot be made
 * (no privilege to unshare or mount). */
static void make_tiny_dev_shm(void)
{
    if (unshare(CLONE_NEWNS) != 0 ||
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m") !=
            0)
        TEST_SKIP_BECAUSE("no 1 MiB /dev/shm (unshare or mount: %s; needs "
                          "root)",
                          strerror(errno));
}

/* The ring lives in memfds, not in /dev/shm, so a small /dev/shm (the
 * usual cause of a DataLoader's "bus error" in a container) does not
 * limit it: a 12.6 MB ring runs whole beside a 1 MiB /dev/shm. */
TEST_CASE(test_ring_larger_than_dev_shm, "memory",
          "a ring larger than a 1 MiB /dev/shm")
{
    make_tiny_dev_shm();
    rf_config *cfg = small_config(2, 4);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_BATCH_SIZE, 64));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_HEIGHT, 128));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_WIDTH, 128));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SAMPLES, 1024));
    size_t bytes = 0;
    rf_loader *l = open_and_free(cfg, &bytes);
    CHECK(bytes > 12 * ((size_t)1 << 20));
    finish_whole(l, 0, 1024);
    rf_loader_close(l);
    printf("a %zu-byte ring ran whole beside a 1 MiB /dev/shm\n", bytes);
}

/* The kB of the ring that the producers map, in all and the most of one. */
static long producers_mapping_kb(int producers, long *most_kb)
{
    int pids[16];
    CHECK_EQ(list_children(pids, 16), producers);
    long all_kb = 0;
    *most_kb = 0;
    for (int i = 0; i < producers; i++) {
        const long kb = mapping_rss_kb(pids[i], "ringfeed-arena");
        CHECK_GE(kb, 0);
        all_kb += kb;
        *most_kb = kb > *most_kb ? kb : *most_kb;
    }
    return all_kb;
}

/*
 * A producer maps the pages of a slot when it first fills it, not the
 * whole ring at start: with every slot filled once and none given back,
 * the producers map one ring between them, not one each. (Each mapping
 * all of it at start made P producers and their 3P slots cost O(P^2)
 * page-table work before the first batch: a second of system time at
 * P = 16 with batches of 64 at 224x224.)
 */
TEST_CASE(test_producers_map_only_the_slots_they_fill, "memory",
          "producers map only the slots they fill")
{
    enum { PRODUCERS = 4, SLOTS = 16 };
    rf_config *cfg = small_config(PRODUCERS, SLOTS);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_HEIGHT, 64));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_WIDTH, 64));
    size_t arena_bytes = 0;
    rf_loader *l = open_and_free(cfg, &arena_bytes);
    const long ring_kb = (long)(arena_bytes / 1024);
    /* All but one slot taken and held, so none was filled twice. */
    rf_batch held[SLOTS - 1];
    for (int i = 0; i < SLOTS - 1; i++)
        CHECK_EQ(rf_loader_next(l, &held[i]), 1);
    long most_kb = 0;
    const long all_kb = producers_mapping_kb(PRODUCERS, &most_kb);
    printf("after the first %d batches the producers map %ld kB of the "
           "%ld kB ring, at most %ld kB each\n",
           SLOTS - 1, all_kb, ring_kb, most_kb);
    CHECK_LE(all_kb, ring_kb);
    CHECK_LT(most_kb, ring_kb);
    for (int i = 0; i < SLOTS - 1; i++)
        CHECK_OK(rf_loader_release(l, &held[i]));
    rf_loader_close(l);
}

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
