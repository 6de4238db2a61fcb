/*
 * test-stops.c - producers and whole jobs stopped (SIGSTOP), and the
 * signals a batch scheduler or job control sends them.
 *
 *   - a stopped producer past RF_PARAM_BATCH_TIMEOUT_MS is replaced, or
 *     reported with its batch under the fail policy;
 *   - a long wait for a stopped producer is reported (each time the wait
 *     doubles), naming its sample, also when a timer signal cuts next()
 *     short, and without the time the caller spends away;
 *   - the whole job (consumer and producers) stopped for more than twice
 *     the deadline replaces no producer, and every sample comes once;
 *   - SIGUSR1, SIGUSR2, SIGSTOP and SIGCONT to every producer as it starts
 *     end no producer (spawn and fork mode).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "faults.h"
#include "harness.h"
#include "proc.h"
#include "channel/segment.h"
#include "test.h"

/* ---- stuck producers --------------------------------------------------- */

static rf_config *timeout_config(int64_t policy)
{
    rf_config *cfg = small_config(2, 400, 4, 16);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_BATCH_TIMEOUT_MS, 300));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_ON_PRODUCER_DEATH, policy));
    return cfg;
}

static int stop_one_producer(void)
{
    int pids[8];
    CHECK_EQ(list_children(pids, 8), 2);
    CHECK_EQ(kill(pids[0], SIGSTOP), 0);
    return pids[0];
}

/* A loader with the batch time-out and this death policy, past its first
 * batch (both producers running), with one producer then stopped: its pid
 * in *stopped. */
static rf_loader *open_and_stop_one_producer(int64_t policy, int *stopped)
{
    rf_config *cfg = timeout_config(policy);
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    test_pass_one_batch(l);
    *stopped = stop_one_producer();
    return l;
}

TEST_CASE(test_stopped_producer_is_replaced, "stop",
          "stopped producer is replaced")
{
    int stopped = 0;
    rf_loader *l = open_and_stop_one_producer(RF_ON_DEATH_RESPAWN, &stopped);
    rf_batch b;
    uint8_t seen[400] = {0};
    uint64_t batches = 1;
    int rc;
    while ((rc = rf_loader_next(l, &b)) == 1) {
        CHECK_EQ(b.sequence, batches);
        for (uint32_t i = 0; i < b.samples; i++)
            CHECK_EQ(seen[b.indices[i]]++, 0);
        batches++;
        CHECK_OK(rf_loader_release(l, &b));
    }
    CHECK_EQ(rc, 0);
    CHECK_EQ(batches, 100);
    rf_stats st;
    CHECK_OK(rf_loader_stats(l, &st));
    CHECK_GE(st.respawns, 1);
    CHECK_EQ(st.slots_free, st.slots); /* every slot came back */
    CHECK(process_gone(stopped));
    rf_loader_close(l);
}

TEST_CASE(test_stopped_producer_fails_with_its_batch, "stop",
          "stopped producer fails with its batch")
{
    int stopped = 0;
    rf_loader *l = open_and_stop_one_producer(RF_ON_DEATH_FAIL, &stopped);
    rf_batch b;
    int rc;
    while ((rc = rf_loader_next(l, &b)) == 1)
        CHECK_OK(rf_loader_release(l, &b));
    CHECK_EQ(rc, RF_E_PRODUCER_DIED);
    const char *msg = rf_loader_error(l);
    char pid_text[32];
    snprintf(pid_text, sizeof(pid_text), "pid %d", stopped);
    CHECK_CONTAINS(msg, pid_text);
    CHECK_CONTAINS(msg, "RF_PARAM_BATCH_TIMEOUT_MS");
    CHECK_CONTAINS(msg, "batch ");
    /* It was given the whole time-out. */
    const char *idle = strstr(msg, "delivered nothing for ");
    CHECK(idle);
    CHECK_GE(strtol(idle + strlen("delivered nothing for "), NULL, 10), 300);
    CHECK(process_gone(stopped));
    rf_loader_close(l);
}

/* ---- a long wait reported ---------------------------------------------- */

struct messages {
    char text[8192];
    int count;
};

static void collect_message(void *user, const char *text)
{
    struct messages *m = user;
    const size_t used = strlen(m->text);
    snprintf(m->text + used, sizeof(m->text) - used, "%s\n", text);
    m->count++;
}

struct stopper {
    pthread_t thread;
    const struct rf__segment *seg;
    int pid;
    unsigned stopped_ms;
    uint64_t seq; /* the batch it was filling when stopped */
    /* The seconds the caller spent in rf_loader_next() for that batch,
     * its calls cut short included, the time it was away not. */
    double in_next_s;
};

/* Stops producer 0 while it is on a sample of a batch (SIGSTOP, again if
 * it had just finished the sample or the batch), for stopped_ms, then lets
 * it go on. */
static void *stopper_main(void *arg)
{
    struct stopper *s = arg;
    struct rf__producer_state *st = rf__segment_producer(s->seg, 0);
    sigset_t alarm; /* the caller's timer signal is for next() */
    sigemptyset(&alarm);
    sigaddset(&alarm, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &alarm, NULL);
    for (;;) {
        s->pid = (int)atomic_load(&st->pid);
        if (s->pid > 0 && atomic_load(&st->current_seq) != UINT64_MAX) {
            CHECK_EQ(kill(s->pid, SIGSTOP), 0);
            while (process_state(s->pid, NULL) != 'T')
                sleep_us(100);
            s->seq = atomic_load(&st->current_seq);
            /* on a sample of a batch, not between two (the report then
             * says "between samples": it failed so under load) */
            if (s->seq != UINT64_MAX &&
                atomic_load(&st->current_sample) != UINT64_MAX)
                break;
            CHECK_EQ(kill(s->pid, SIGCONT), 0);
        }
        sleep_us(50);
    }
    sleep_us((long)s->stopped_ms * 1000);
    CHECK_EQ(kill(s->pid, SIGCONT), 0);
    return NULL;
}

/* How the caller of next() is interrupted while it waits. */
enum interruption {
    UNINTERRUPTED,
    EVERY_50_MS,   /* a timer signal (a profiler's) cuts each wait short */
    CUT_THEN_AWAY, /* cut once, then the caller is away for a second */
};

/* One producer, stopped in the middle of a sample for stopped_ms while the
 * caller waits in next(): the messages of the run, which ends normally.
 * When a signal cuts next() short (-EINTR) the caller calls it again, as
 * Python does. */
static void wait_on_a_stopped_producer(int64_t stall_ms, unsigned stopped_ms,
                                       enum interruption how,
                                       struct messages *m, struct stopper *out)
{
    rf_config *cfg = small_config(1, 160, 16, 32);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SOURCE, RF_SOURCE_SYNTHETIC_JPEG));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_STALL_WARNING_MS, stall_ms));
    CHECK_OK(rf_config_set_message_handler(cfg, collect_message, m));
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    test_pass_one_batch(l);
    struct rf__segment seg = map_control_segment();
    struct stopper s = {.seg = &seg, .stopped_ms = stopped_ms};
    CHECK_EQ(pthread_create(&s.thread, NULL, stopper_main, &s), 0);
    const struct itimerval every = {{0, 50000}, {0, 50000}};
    const struct itimerval off = {{0, 0}, {0, 0}};
    if (how != UNINTERRUPTED) {
        const struct sigaction sa = {.sa_handler = on_alarm}; /* no restart */
        CHECK_EQ(sigaction(SIGALRM, &sa, NULL), 0);
        CHECK_EQ(setitimer(ITIMER_REAL, &every, NULL), 0);
    }
    rf_batch b;
    int rc, batches = 1, interruptions = 0;
    double in_next[16] = {0}, since_last = 0, called = test_seconds();
    while ((rc = rf_loader_next(l, &b)) == 1 || rc == -EINTR) {
        since_last += test_seconds() - called;
        if (rc == 1 && b.sequence < 16) /* 10 batches in the epoch */
            in_next[b.sequence] = since_last;
        if (rc == 1)
            since_last = 0;
        if (rc == -EINTR && how == CUT_THEN_AWAY && interruptions++ == 0) {
            CHECK_EQ(setitimer(ITIMER_REAL, &off, NULL), 0);
            sleep_us(1000000); /* the caller's own work, no wait */
        } else if (rc == -EINTR) {
            interruptions++;
        } else {
            batches++;
            CHECK_OK(rf_loader_release(l, &b));
        }
        called = test_seconds();
    }
    CHECK_EQ(setitimer(ITIMER_REAL, &off, NULL), 0);
    pthread_join(s.thread, NULL);
    s.in_next_s = s.seq < 16 ? in_next[s.seq] : 0;
    CHECK_EQ(rc, 0);
    CHECK_EQ(batches, 10);
    CHECK(how != EVERY_50_MS || interruptions >= 5);
    CHECK(how != CUT_THEN_AWAY || interruptions == 1);
    *out = s;
    rf_loader_close(l);
    munmap(seg.header, seg.control_size);
}

/* The waits (in seconds) the reports in m give for the batch the stopper
 * stopped (its producer was filling it). A loaded machine (make -j) may
 * add reports of other batches' waits, which are not counted. */
static int waits_for_stopped_batch(const struct messages *m,
                                   const struct stopper *s, double *waits,
                                   int most)
{
    char batch[64]; /* 10 batches in the one epoch */
    snprintf(batch, sizeof(batch), " s for batch %llu of epoch 0;",
             (unsigned long long)s->seq);
    int n = 0;
    for (const char *line = m->text, *next;
         n < most && (next = strchr(line, '\n'));
         line = next + 1) { /* whole lines: m->text may end in a cut one */
        const char *at = strstr(line, "has waited ");
        const char *named = strstr(line, batch);
        CHECK(at && at < next);
        if (named && named < next)
            waits[n++] = strtod(at + strlen("has waited "), NULL);
    }
    return n;
}

/* The reports of the stopped batch's wait: at least `least`, the first
 * past stall_s, then one each time the wait doubles (no burst), and none
 * of a wait longer than the time the caller spent in next() for that
 * batch (next() looks at the clock when it wakes, at least every 250 ms).
 * Bounds from what the run measured, not fixed ones: on a loaded machine
 * the producer, continued, takes longer to finish the batch, and the
 * wait goes on to further doublings. */
static void check_waits(const struct messages *m, const struct stopper *s,
                        double stall_s, int least)
{
    double waits[16];
    const int n = waits_for_stopped_batch(m, s, waits, 16);
    CHECK_GE(n, least);
    CHECK(waits[0] >= stall_s);
    for (int i = 1; i < n; i++)
        CHECK(waits[i] >= 1.5 * waits[i - 1]);
    CHECK(n == 0 || waits[n - 1] <= s->in_next_s + 0.3);
}

/* A wait of 1.2 s with RF_PARAM_STALL_WARNING_MS 200 is reported past
 * 0.2, 0.4 and 0.8 s (each time the wait doubles), naming the batch, the
 * producer's sample and that the producer is stopped, though RF_PARAM_QUIET is
 * set; with 0, never; as one wait when a timer signal cuts next() short every
 * 50 ms; and without the time the caller spends away between two calls. */
TEST_CASE_LIMIT(test_long_wait_is_reported, "stop",
                "a long wait is reported, naming the producer's sample", 30)
{
    struct messages m = {.count = 0};
    struct stopper s;
    wait_on_a_stopped_producer(200, 1200, UNINTERRUPTED, &m, &s);
    printf("%d reports; the first:\n%.*s", m.count,
           (int)(strchr(m.text, '\n') - m.text + 1), m.text);
    check_waits(&m, &s, 0.2, 2); /* 0.2, 0.4, 0.8; more under load */
    char producer[96];
    /* named as the one filling the awaited batch, and as stopped: the
     * report blamed a hung read or a slow decode, which sent the user to
     * the file system while SIGCONT was what it needed */
    snprintf(producer, sizeof(producer),
             "producer 0 (pid %d, stopped), which is filling it, is on sample ",
             s.pid);
    /* next() looks at the clock when it wakes, at least every 250 ms */
    CHECK_CONTAINS(m.text, "the loop has waited 0.");
    CHECK_CONTAINS(m.text, producer);
    CHECK_CONTAINS(m.text, "and has delivered nothing for ");
    CHECK_CONTAINS(m.text, "delivers nothing until it is sent SIGCONT");
    CHECK_CONTAINS(m.text,
                   "RF_PARAM_BATCH_TIMEOUT_MS, when set, replaces a producer");
    CHECK_CONTAINS(m.text, "RF_PARAM_STALL_WARNING_MS");
    struct messages none = {.count = 0};
    wait_on_a_stopped_producer(0, 500, UNINTERRUPTED, &none, &s);
    CHECK_EQ(none.count, 0);
    /* one wait for one batch, however often a signal cuts next() short */
    struct messages cut = {.count = 0};
    wait_on_a_stopped_producer(200, 1200, EVERY_50_MS, &cut, &s);
    check_waits(&cut, &s, 0.2, 2);
    /* the second the caller spends away between two calls is no wait: in
     * next() it waits about 0.5 s of the 1.5 s stop, and a wait counting
     * the second away (1.5 s) would be past that time in next() */
    struct messages away = {.count = 0};
    wait_on_a_stopped_producer(300, 1500, CUT_THEN_AWAY, &away, &s);
    check_waits(&away, &s, 0.3, 1);
    printf("away a second: %.1f s in next() for the batch\n", s.in_next_s);
}

/* A batch scheduler warns every process of a job with SIGUSR1 or SIGUSR2
 * before it stops it (Slurm's --signal), and job control stops and
 * continues them all: such signals are for the training process, and the
 * producers live on (the same handler catches PR_SET_PDEATHSIG's
 * SIGCONT). The run ends normally, with no replacement. */
static void test_job_signals_spare_producers(rf_start_mode mode)
{
    rf_config *cfg = small_config(2, 4000, 8, 8);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_START_MODE, mode));
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    /* At once, while the producers may still be starting: they start with
     * these signals blocked until their handler is in place. */
    int pids[2];
    CHECK_EQ(list_children(pids, 2), 2);
    const int signals[] = {SIGUSR1, SIGUSR2, SIGSTOP, SIGCONT, SIGCONT};
    for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
        for (int p = 0; p < 2; p++)
            CHECK_EQ(kill(pids[p], signals[i]), 0);
    sleep_us(200000);
    for (int p = 0; p < 2; p++)
        CHECK(!process_gone(pids[p]) && process_state(pids[p], NULL) != 'T');
    CHECK_EQ(next_until_error(l), 0);
    rf_stats st;
    CHECK_OK(rf_loader_stats(l, &st));
    CHECK_EQ(st.respawns, 0);
    printf("%s mode: SIGUSR1, SIGUSR2, SIGSTOP and SIGCONT to every producer "
           "as it starts: the run ends with %llu replacements\n",
           mode == RF_START_FORK ? "fork" : "spawn",
           (unsigned long long)st.respawns);
    rf_loader_close(l);
}

/* How the consumer of a stopped job spends its time: waiting in next()
 * for producers that are always busy (JPEGs made and decoded), or in a
 * step of its own after each batch, as a training loop does. */
struct stop_case {
    int64_t batch, samples, timeout_ms;
    long step_us;      /* 0: none; else the step, and the 4th one tells */
    const char *where; /* where the stop finds the consumer */
};

static void count_message(void *user, const char *text)
{
    (void)text;
    (*(int *)user)++;
}

/* The consumer, in a process group of its own with its producers: reads
 * every batch, checks each sample comes once, and exits with the number
 * of producers replaced, or 100 + a step that went wrong (107: a long
 * wait reported, at the deadline: the stop is no wait). */
#define STOP_SAMPLES 1280
static int consume_with_deadline(const struct stop_case *c, int stepping_fd)
{
    rf_config *cfg = small_config(2, c->samples, c->batch, 224);
    int reports = 0;
    if (rf_config_set(cfg, RF_PARAM_SOURCE, RF_SOURCE_SYNTHETIC_JPEG) != 0 ||
        rf_config_set(cfg, RF_PARAM_BATCH_TIMEOUT_MS, c->timeout_ms) != 0 ||
        rf_config_set(cfg, RF_PARAM_STALL_WARNING_MS, c->timeout_ms) != 0 ||
        rf_config_set_message_handler(cfg, count_message, &reports) != 0)
        return 101;
    rf_loader *l = NULL;
    char *why = NULL;
    const int opened = rf_loader_open(&l, cfg, &why);
    rf_config_free(cfg);
    free(why);
    if (opened != 0)
        return 102;
    uint8_t seen[STOP_SAMPLES] = {0};
    uint64_t samples = 0, batches = 0;
    rf_batch b;
    int rc;
    while ((rc = rf_loader_next(l, &b)) == 1 || rc == -EINTR) {
        if (rc != 1)
            continue;
        for (uint32_t i = 0; i < b.samples; i++)
            if (b.indices[i] >= (uint64_t)c->samples || seen[b.indices[i]]++)
                return 103;
        samples += b.samples;
        if (rf_loader_release(l, &b) != 0)
            return 104;
        if (c->step_us > 0 && ++batches == 4 && write(stepping_fd, "s", 1) != 1)
            return 106;
        if (c->step_us > 0)
            sleep_us(c->step_us);
    }
    rf_stats st;
    if (rc != 0 || samples != (uint64_t)c->samples ||
        rf_loader_stats(l, &st) != 0)
        return 105;
    rf_loader_close(l);
    if (reports > 0)
        return 107;
    return st.respawns < 100 ? (int)st.respawns : 99;
}

/* Ctrl-Z or a scheduler's suspend stops the consumer and its producers
 * together, for twice RF_PARAM_BATCH_TIMEOUT_MS and more. On SIGCONT the
 * producers finish their batches: none may be killed as stuck. On the
 * old code both were, at once, and repeated suspends used up the
 * respawn limit and ended the run. The deadlines leave room for batches
 * made slower by ASan and other tests.
 * - Stopped while the consumer waits in next(), 1 s into a run of about
 *   6 s, batches of 4 (about 40 ms): the consumer's wait overran, so the
 *   whole wait is forgiven.
 * - Stopped in the consumer's own 50 ms step, batches of 64 (about
 *   600 ms): it comes back into next() long before the producers finish
 *   their batches, and their SIGCONT stamps restart their deadlines. */
static void
test_whole_job_stopped_spares_producers(const struct stop_case *given)
{
    /* A slow build (a sanitizer's) gets a longer deadline and a stop
     * that long again: a batch of 64 at 224 under ASan on 2 loaded CPUs
     * took over the 4 s meant for a release build. */
    struct stop_case scaled = *given;
    scaled.timeout_ms = (int64_t)(given->timeout_ms * test_time_scale());
    const struct stop_case *c = &scaled;
    int pipe_fds[2];
    CHECK_OK(pipe(pipe_fds));
    fflush(stdout);
    const pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        setpgid(0, 0);
        close(pipe_fds[0]);
        _exit(consume_with_deadline(c, pipe_fds[1]));
    }
    setpgid(child, child); /* either side may run first */
    close(pipe_fds[1]);
    char byte;
    if (c->step_us > 0)
        CHECK_EQ(read(pipe_fds[0], &byte, 1), 1); /* in its 4th step */
    else
        sleep_us(1000000);
    close(pipe_fds[0]);
    CHECK_EQ(waitpid(child, NULL, WNOHANG), 0); /* still running */
    CHECK_EQ(kill(-child, SIGSTOP), 0);
    const long stop_us = (long)c->timeout_ms * 2000 + 500000;
    sleep_us(stop_us);
    CHECK_EQ(kill(-child, SIGCONT), 0);
    CHECK_EQ(exit_status_of(child), 0);
    printf("the whole job stopped for %.1f s against a %.1f s deadline, %s: "
           "every sample once, no producer replaced\n",
           stop_us / 1e6, c->timeout_ms / 1e3, c->where);
}

TEST_CASE(test_stop_while_waiting, "stop",
          "whole job stopped while next() waits")
{
    test_whole_job_stopped_spares_producers(
        &(struct stop_case){.batch = 4,
                            .samples = STOP_SAMPLES,
                            .timeout_ms = 1500,
                            .where = "the consumer waiting in next()"});
}

TEST_CASE(test_stop_in_the_step, "stop",
          "whole job stopped in the caller's step")
{
    test_whole_job_stopped_spares_producers(
        &(struct stop_case){.batch = 64,
                            .samples = 640,
                            .timeout_ms = 4000,
                            .step_us = 50000,
                            .where = "the consumer in its step"});
}

TEST_CASE(test_job_signals_spawn, "signals",
          "job signals spare producers, spawn")
{
    test_job_signals_spare_producers(RF_START_SPAWN);
}

TEST_CASE(test_job_signals_fork, "signals", "job signals spare producers, fork")
{
    test_job_signals_spare_producers(RF_START_FORK);
}

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
