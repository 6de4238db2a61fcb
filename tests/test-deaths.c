/*
 * test-deaths.c - producers and consumers that die, and the limits on
 * replacing producers.
 *
 *   - a producer's death is noticed while next() sleeps, under either
 *     death policy;
 *   - a sample that keeps crashing its producers ends the run naming it
 *     instead of respawning forever;
 *   - a consumer killed or exiting without close leaves no producer behind,
 *     not even one that was stopped (SIGSTOP) when it died;
 *   - RF_PARAM_MAX_RESPAWNS ends the run, and its count starts again after
 *     RF_PARAM_RESPAWN_WINDOW_S;
 *   - threads that open a loader or replace a producer and then end keep
 *     its producers alive.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "faults.h"
#include "harness.h"
#include "proc.h"
#include "channel/segment.h"
#include "test.h"

/* ---- noticing a death while waiting ------------------------------------ */

struct delayed_kill {
    pthread_t thread;
    const struct rf__segment *seg;
    int pid;
    _Atomic uint64_t killed_ns;
    _Atomic uint64_t replaced_ns; /* when a new producer appeared, or 0 */
};

/* Kills the producer while next() sleeps, then watches for a successor. */
static void *kill_after_a_while(void *arg)
{
    struct delayed_kill *k = arg;
    /* Inside batch 0, which takes hundreds of ms, while next() waits. */
    while (atomic_load(&rf__segment_producer(k->seg, 0)->current_seq) != 0)
        sleep_us(200);
    sleep_us(10000);
    k->killed_ns = rf__now_ns();
    CHECK_EQ(kill(k->pid, SIGKILL), 0);
    for (int i = 0; i < 2000 && !k->replaced_ns; i++) {
        int pids[2];
        if (list_children(pids, 2) == 1 && pids[0] != k->pid)
            k->replaced_ns = rf__now_ns();
        sleep_us(500);
    }
    return NULL;
}

/* The one producer fills a slow batch (64 JPEGs) while next() waits for
 * it; a kill must wake next() at once, not after some timer. Prints the
 * delay; the bound is 100 ms, asserted loosely (1 s) because this
 * machine is shared. */
static void death_noticed_while_waiting(int64_t policy)
{
    rf_loader *l = TEST_OPEN_LOADER(
        {RF_PARAM_PRODUCERS, 1}, {RF_PARAM_SOURCE, RF_SOURCE_SYNTHETIC_JPEG},
        {RF_PARAM_BATCH_SIZE, 64}, {RF_PARAM_SAMPLES, 128},
        {RF_PARAM_ON_PRODUCER_DEATH, policy}, {RF_PARAM_QUIET, 1});
    int pids[2];
    CHECK_EQ(list_children(pids, 2), 1);
    struct rf__segment seg = map_control_segment();
    struct delayed_kill k = {.seg = &seg, .pid = pids[0]};
    CHECK_EQ(pthread_create(&k.thread, NULL, kill_after_a_while, &k), 0);
    rf_batch b;
    const int rc = rf_loader_next(l, &b);
    const uint64_t returned_ns = rf__now_ns();
    if (policy == RF_ON_DEATH_FAIL)
        k.replaced_ns = 1; /* no successor to watch for */
    pthread_join(k.thread, NULL);
    if (policy == RF_ON_DEATH_FAIL) {
        CHECK_EQ(rc, RF_E_PRODUCER_DIED);
        const uint64_t noticed_ms = (returned_ns - k.killed_ns) / 1000000;
        printf("fail policy: death noticed %llu ms after the kill\n",
               (unsigned long long)noticed_ms);
        CHECK_LT(noticed_ms, 1000);
    } else {
        /* The replacement started while next() went on waiting. */
        CHECK_EQ(rc, 1);
        CHECK_EQ(b.sequence, 0);
        CHECK_GT(k.replaced_ns, 0);
        const uint64_t replaced_ms = (k.replaced_ns - k.killed_ns) / 1000000;
        printf("respawn policy: replacement running %llu ms after the kill\n",
               (unsigned long long)replaced_ms);
        CHECK_LT(replaced_ms, 1000);
        CHECK_OK(rf_loader_release(l, &b));
    }
    rf_loader_close(l);
    munmap(seg.header, seg.control_size);
}

TEST_CASE(test_death_noticed_while_waiting, "death",
          "noticed while next() waits")
{
    death_noticed_while_waiting(RF_ON_DEATH_FAIL);
    death_noticed_while_waiting(RF_ON_DEATH_RESPAWN);
}

/* ---- a batch that keeps crashing its producers ----------------------------
 */

struct crasher {
    pthread_t thread;
    const struct rf__segment *seg;
    atomic_bool stop;
    atomic_int crashes;
};

/* Crashes the producer with SIGABRT (as a failed assert() would) each time
 * it is filling a batch. Not SIGSEGV: under ASan the producer catches that
 * and exits with status 1, which counts as a crash too but reads
 * differently. */
static void *crasher_main(void *arg)
{
    struct crasher *c = arg;
    struct rf__producer_state *st = rf__segment_producer(c->seg, 0);
    while (!atomic_load(&c->stop)) {
        const int pid = (int)atomic_load(&st->pid);
        if (pid > 0 && atomic_load(&st->current_seq) != UINT64_MAX &&
            atomic_load(&st->current_sample) != UINT64_MAX &&
            kill(pid, SIGABRT) == 0) {
            atomic_fetch_add(&c->crashes, 1);
            /* Wait for the loader to reset the record for a successor. */
            while (!atomic_load(&c->stop) && (int)atomic_load(&st->pid) == pid)
                sleep_us(200);
        }
        sleep_us(200);
    }
    return NULL;
}

/* One producer, and a crash whenever it is decoding a sample: the batch
 * in progress is always the oldest one owed, so each replacement starts
 * on it again and crashes on its first samples too. */
TEST_CASE(test_batch_that_keeps_crashing_is_named, "death",
          "sample that keeps crashing is named")
{
    /* No core files from the crashes below (producers inherit this). */
    const struct rlimit no_core = {0, 0};
    CHECK_EQ(setrlimit(RLIMIT_CORE, &no_core), 0);
    rf_loader *l = TEST_OPEN_LOADER(
        {RF_PARAM_PRODUCERS, 1}, {RF_PARAM_SOURCE, RF_SOURCE_SYNTHETIC_JPEG},
        {RF_PARAM_BATCH_SIZE, 16}, {RF_PARAM_SAMPLES, 640},
        {RF_PARAM_QUIET, 1});
    struct rf__segment seg = map_control_segment();
    struct crasher c = {.seg = &seg};
    CHECK_EQ(pthread_create(&c.thread, NULL, crasher_main, &c), 0);
    const int rc = next_until_error(l);
    atomic_store(&c.stop, true);
    pthread_join(c.thread, NULL);
    CHECK_EQ(rc, RF_E_PRODUCER_DIED);
    /* Normally 3 crashes on the first sample of batch 0; one that
     * finishes a sample between the crasher's look and its kill charges
     * the next, so only "some sample, three times" is certain. */
    CHECK_GE(atomic_load(&c.crashes), 3);
    const char *msg = rf_loader_error(l);
    CHECK_CONTAINS(msg, "has now broken 3 producers");
    CHECK_CONTAINS(msg, "signal 6");
    CHECK_CONTAINS(msg, "remove that file");
    rf_stats st;
    CHECK_OK(rf_loader_stats(l, &st));
    CHECK_EQ(st.respawns, (uint64_t)atomic_load(&c.crashes) - 1);
    rf_loader_close(l);
    munmap(seg.header, seg.control_size);
}

/* ---- the consumer dies ------------------------------------------------- */

/* How the consumer dies in consumer_dies(). */
enum consumer_death {
    CONSUMER_KILLED, /* SIGKILL from itself */
    CONSUMER_EXITS,  /* _exit() without rf_loader_close() */
    /* SIGKILL from the test, with one of its producers stopped (SIGSTOP)
     * and the thread that opened the loader still running */
    CONSUMER_KILLED_STOPPED,
    /* the same, its producers stopped as soon as open returned, before any
     * batch: open returns only once they follow the consumer (they could
     * be stopped before they asked for PR_SET_PDEATHSIG, and stayed) */
    CONSUMER_KILLED_STOPPED_AT_OPEN,
};

/* In the consumer: opens a loader, takes a batch (or, `at_open`, stops
 * both producers as soon as open returns), and writes the pids of its two
 * producers to fd. */
static void open_and_report(int fd, bool at_open)
{
    rf_loader *l = TEST_OPEN_LOADER(
        {RF_PARAM_PRODUCERS, 2}, {RF_PARAM_HEIGHT, 16}, {RF_PARAM_WIDTH, 16});
    int pids[2];
    CHECK_EQ(list_children(pids, 2), 2);
    rf_batch b;
    if (at_open)
        for (int p = 0; p < 2; p++)
            CHECK_EQ(kill(pids[p], SIGSTOP), 0);
    else
        CHECK_EQ(rf_loader_next(l, &b), 1);
    CHECK_EQ(write(fd, pids, sizeof(pids)), (ssize_t)sizeof(pids));
}

struct report_to {
    int fd;
    bool at_open;
};

static void *open_report_and_wait(void *arg)
{
    const struct report_to *to = arg;
    open_and_report(to->fd, to->at_open);
    for (;;)
        pause();
    return NULL;
}

/* A child process opens a loader, reports its producers' pids, takes a
 * batch and then dies the given way. A stopped producer runs no code, so
 * only the kernel's signal at the consumer's death (PR_SET_PDEATHSIG) can
 * end it, where an idle one would also find its parent gone by itself
 * within PARENT_CHECK_MS. */
static void consumer_dies(enum consumer_death how)
{
    const int shm_before = count_entries("/dev/shm");
    int fd;
    const pid_t child = fork_with_pipe(&fd);
    const bool stopped = how == CONSUMER_KILLED_STOPPED ||
                         how == CONSUMER_KILLED_STOPPED_AT_OPEN;
    if (child == 0) {
        if (stopped) {
            struct report_to to = {fd, how == CONSUMER_KILLED_STOPPED_AT_OPEN};
            pthread_t t;
            CHECK_EQ(pthread_create(&t, NULL, open_report_and_wait, &to), 0);
            for (;;)
                pause();
        }
        open_and_report(fd, false);
        if (how == CONSUMER_KILLED)
            raise(SIGKILL);
        _exit(0); /* no rf_loader_close(), no atexit handlers */
    }
    int pids[2];
    CHECK_EQ(read(fd, pids, sizeof(pids)), (ssize_t)sizeof(pids));
    close(fd);
    if (stopped) {
        for (int p = 0; p < 2; p++)
            CHECK_EQ(kill(pids[p], SIGSTOP), 0);
        for (int p = 0; p < 2; p++)
            while (process_state(pids[p], NULL) != 'T')
                sleep_us(100);
        CHECK_EQ(kill(child, SIGKILL), 0);
    }
    int status;
    CHECK_EQ(waitpid(child, &status, 0), child);
    const uint64_t died = rf__now_ns();
    while (!(process_gone(pids[0]) && process_gone(pids[1])) &&
           rf__now_ns() - died < 2000000000u)
        sleep_us(1000);
    const uint64_t took_ms = (rf__now_ns() - died) / 1000000;
    const bool gone = process_gone(pids[0]) && process_gone(pids[1]);
    printf("consumer %s: producers %s after %llu ms\n",
           how == CONSUMER_KILLED  ? "killed"
           : how == CONSUMER_EXITS ? "exited without close"
           : how == CONSUMER_KILLED_STOPPED
               ? "killed with a thread and its producers stopped"
               : "killed with its producers stopped as open returned",
           gone ? "gone" : "still there", (unsigned long long)took_ms);
    if (!gone) { /* leave no stopped process behind the failure */
        kill(pids[0], SIGKILL);
        kill(pids[1], SIGKILL);
    }
    CHECK(process_gone(pids[0]));
    CHECK(process_gone(pids[1]));
    CHECK_LT(took_ms, 1000);
    CHECK_EQ(count_entries("/dev/shm"), shm_before);
}

TEST_CASE(test_consumer_death_leaves_nothing, "death",
          "consumer death leaves nothing")
{
    consumer_dies(CONSUMER_KILLED);
    consumer_dies(CONSUMER_EXITS);
    consumer_dies(CONSUMER_KILLED_STOPPED);
    for (int i = 0; i < 5; i++) /* a race it lost 2 times in 6 */
        consumer_dies(CONSUMER_KILLED_STOPPED_AT_OPEN);
}

/* In the consumer: the message handler sees producer 0's replacement
 * reported, stops it (SIGSTOP) at once and writes its pid to the test,
 * then waits to be killed. */
static void stop_the_replacement(void *arg, const char *message)
{
    const char *said = strstr(message, "replaced by pid ");
    if (!said)
        return;
    const int fd = *(const int *)arg;
    const int pid = (int)strtol(said + strlen("replaced by pid "), NULL, 10);
    CHECK_EQ(kill(pid, SIGSTOP), 0);
    CHECK_EQ(write(fd, &pid, sizeof(pid)), (ssize_t)sizeof(pid));
    for (;;)
        pause();
}

/* A replacement producer stopped as soon as its parent reports it, the
 * parent then killed: it goes with its parent, as the first ones do
 * (test_consumer_death_leaves_nothing), because the report comes only
 * once the replacement asked for PR_SET_PDEATHSIG. */
static void consumer_dies_at_a_respawn(void)
{
    const int shm_before = count_entries("/dev/shm");
    int fd;
    const pid_t child = fork_with_pipe(&fd);
    if (child == 0) {
        rf_config *cfg =
            TEST_CONFIG({RF_PARAM_PRODUCERS, 2}, {RF_PARAM_HEIGHT, 16},
                        {RF_PARAM_WIDTH, 16});
        CHECK_OK(rf_config_set_message_handler(cfg, stop_the_replacement, &fd));
        rf_loader *l = test_open_config_(cfg);
        rf_batch b;
        CHECK_EQ(rf_loader_next(l, &b), 1);
        int pids[2];
        CHECK_EQ(list_children(pids, 2), 2);
        CHECK_EQ(kill(pids[0], SIGKILL), 0);
        for (;;) { /* until the handler reports the replacement */
            CHECK_OK(rf_loader_release(l, &b));
            CHECK_EQ(rf_loader_next(l, &b), 1);
        }
    }
    int replacement;
    CHECK_EQ(read(fd, &replacement, sizeof(replacement)),
             (ssize_t)sizeof(replacement));
    close(fd);
    while (process_state(replacement, NULL) != 'T')
        sleep_us(100);
    CHECK_EQ(kill(child, SIGKILL), 0);
    int status;
    CHECK_EQ(waitpid(child, &status, 0), child);
    const uint64_t died = rf__now_ns();
    while (!process_gone(replacement) && rf__now_ns() - died < 2000000000u)
        sleep_us(1000);
    const bool gone = process_gone(replacement);
    printf("consumer killed with its replacement producer stopped: it is "
           "%s\n",
           gone ? "gone" : "still there");
    if (!gone) /* leave no stopped process behind the failure */
        kill(replacement, SIGKILL);
    CHECK(gone);
    CHECK_EQ(count_entries("/dev/shm"), shm_before);
}

TEST_CASE(test_consumer_death_at_a_respawn_leaves_nothing, "death",
          "consumer death at a respawn leaves nothing")
{
    for (int i = 0; i < 5; i++)
        consumer_dies_at_a_respawn();
}

/* One producer of small synthetic batches, endless for these tests,
 * replaced at most `max_respawns` times; replacements not reported. */
static rf_config *respawn_config(int64_t max_respawns)
{
    rf_config *cfg = small_config(1, 1000000, 4, 8);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_MAX_RESPAWNS, max_respawns));
    return cfg;
}

/* Replacements count against RF_PARAM_MAX_RESPAWNS: with a limit of 2,
 * the third producer killed (SIGKILL, which is never blamed on a batch)
 * ends the run, with the count and what to look for. */
TEST_CASE(test_respawn_limit_ends_the_run, "respawn", "limit ends the run")
{
    rf_config *cfg = respawn_config(2);
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    int killed = 0, last = 0, rc;
    rf_batch b;
    while ((rc = rf_loader_next(l, &b)) == 1) {
        CHECK_OK(rf_loader_release(l, &b));
        int pid = 0;
        if (list_children(&pid, 1) == 1 && pid != last) {
            CHECK_EQ(kill(pid, SIGKILL), 0);
            last = pid;
            killed++;
        }
        CHECK_LE(killed, 3);
    }
    CHECK_EQ(rc, RF_E_PRODUCER_DIED);
    CHECK_EQ(killed, 3);
    const char *msg = rf_loader_error(l);
    CHECK_CONTAINS(msg, "2 producers have been replaced within an hour");
    CHECK_CONTAINS(msg, "RF_PARAM_RESPAWN_WINDOW_S");
    CHECK_CONTAINS(msg, "RF_PARAM_MAX_RESPAWNS");
    CHECK_CONTAINS(msg, "OOM killer");
    rf_stats st;
    CHECK_OK(rf_loader_stats(l, &st));
    CHECK_EQ(st.respawns, 2);
    rf_loader_close(l);
}

/* Kills the only producer once it is not `last`, taking batches until
 * the kill is noticed and answered; returns the killed pid, or 0 when
 * next() failed instead (its code in *rc). */
static int kill_and_wait_for_replacement(rf_loader *l, int last, int *rc)
{
    rf_batch b;
    int pid = 0;
    while (list_children(&pid, 1) != 1 || pid == last) {
        if ((*rc = rf_loader_next(l, &b)) != 1)
            return 0;
        CHECK_OK(rf_loader_release(l, &b));
    }
    CHECK_EQ(kill(pid, SIGKILL), 0);
    rf_stats before, after;
    CHECK_OK(rf_loader_stats(l, &before));
    do {
        if ((*rc = rf_loader_next(l, &b)) != 1)
            return 0;
        CHECK_OK(rf_loader_release(l, &b));
        CHECK_OK(rf_loader_stats(l, &after));
    } while (after.respawns == before.respawns);
    return pid;
}

/* The count of RF_PARAM_MAX_RESPAWNS starts again when its window
 * (RF_PARAM_RESPAWN_WINDOW_S) is over: with one replacement allowed per
 * 2 seconds, a kill, a pause of 2.5 s and a kill are both answered, and a
 * third kill at once ends the run, naming the window. */
TEST_CASE(test_respawn_window_starts_the_count_again, "respawn",
          "window starts the count again")
{
    rf_config *cfg = respawn_config(1);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_RESPAWN_WINDOW_S, 2));
    CHECK_EQ(rf_config_set(cfg, RF_PARAM_RESPAWN_WINDOW_S, 0), -EINVAL);
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    int rc = 0;
    const int first = kill_and_wait_for_replacement(l, 0, &rc);
    CHECK(first > 0);
    sleep_us(2500000);
    const int second = kill_and_wait_for_replacement(l, first, &rc);
    CHECK(second > 0);
    CHECK_EQ(kill_and_wait_for_replacement(l, second, &rc), 0);
    CHECK_EQ(rc, RF_E_PRODUCER_DIED);
    const char *msg = rf_loader_error(l);
    CHECK_CONTAINS(msg, "1 producer has been replaced within 2 seconds");
    rf_stats st;
    CHECK_OK(rf_loader_stats(l, &st));
    CHECK_EQ(st.respawns, 2);
    printf("respawn window of 2 s: a kill, 2.5 s, a kill: both replaced; a "
           "third kill at once ends the run\n");
    rf_loader_close(l);
}

static void *open_and_return(void *cfg)
{
    return test_open_loader(cfg);
}

static void *replace_and_return(void *loader)
{
    int rc = 0;
    CHECK(kill_and_wait_for_replacement(loader, 0, &rc) > 0);
    return NULL;
}

/* Producers are children of the thread that started them, and
 * PR_SET_PDEATHSIG signals them when that thread ends. A loader opened by
 * a thread that returns, and a producer replaced by another that
 * returns, must keep their producers: the run ends normally with the one
 * replacement the test asked for. */
TEST_CASE(test_threads_that_end_keep_their_producers, "threads",
          "threads that end keep their producers")
{
    rf_config *cfg = respawn_config(1000);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SAMPLES, 4000));
    pthread_t t;
    void *opened = NULL;
    CHECK_EQ(pthread_create(&t, NULL, open_and_return, cfg), 0);
    CHECK_EQ(pthread_join(t, &opened), 0);
    rf_config_free(cfg);
    rf_loader *l = opened;
    sleep_us(300000);
    CHECK_EQ(pthread_create(&t, NULL, replace_and_return, l), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    sleep_us(300000);
    int pid = 0;
    CHECK_EQ(list_children(&pid, 1), 1);
    CHECK_EQ(kill(pid, 0), 0);
    CHECK_EQ(next_until_error(l), 0);
    rf_stats st;
    CHECK_OK(rf_loader_stats(l, &st));
    CHECK_EQ(st.respawns, 1);
    printf("loader opened, and a producer replaced, by threads that ended: "
           "%llu replacement, the one asked for\n",
           (unsigned long long)st.respawns);
    rf_loader_close(l);
}

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
