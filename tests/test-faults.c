/*
 * test-faults.c - producers SIGKILLed at random moments while a long run
 * goes on.
 *
 *   - kills from another thread (spawn mode) or from the consuming loop
 *     (fork mode): the run goes on, every sample comes exactly once per
 *     epoch, and every batch has the bytes of an undisturbed run;
 *   - fork-mode producers take none of the caller's signal handlers, so
 *     they die of the signals sent to them;
 *   - a lost wake-up (the consumer's bell cleared while it sleeps) does not
 *     stall next().
 *
 * The other faults a run survives have programs of their own: stopped
 * producers and jobs (test-stops), deaths and respawns (test-deaths), the
 * helper and resources at start (test-producer-start), garbage in the
 * shared rings (test-garbage); faults.h holds what they share.
 *
 * `test-faults --stress N` runs N kills in rounds of 100 and prints hangs,
 * lost, duplicated and leaked counts (tools/dev/stress-kills.sh; not in CI).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "faults.h"
#include "harness.h"
#include "proc.h"
#include "channel/segment.h"
#include "test.h"

/* ---- a run with kills ---------------------------------------------------- */

struct kill_spec {
    rf_source_kind source;
    rf_start_mode start_mode;
    int kills;      /* wanted */
    int min_gap_us; /* between kills, uniformly random */
    int max_gap_us;
    bool killer_thread; /* kill from a thread; else from the loop */
};

/* What a run saw. Problems are counted rather than fatal, so that the
 * stress mode can report them; the test mode checks they are all 0. */
struct kill_result {
    uint64_t batches;
    uint64_t *digests; /* [batches], FNV-1a of pixels, labels, indices */
    int kills;
    uint64_t respawns;
    uint64_t lost, duplicated, wrong_order, hangs;
    int error; /* a next() error other than a hang */
    char detail[512];
};

enum {
    KILL_SAMPLES = 24, /* per epoch */
    KILL_BATCH = 2,
    KILL_SIDE = 32,
    MAX_EPOCHS = 4096,
    HANG_SECONDS = 20
};

static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * UINT64_C(0x100000001b3);
    return h;
}

static uint64_t digest_batch(const rf_batch *b)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    h = fnv1a(h, b->data, b->bytes);
    h = fnv1a(h, b->labels, b->samples * sizeof(b->labels[0]));
    return fnv1a(h, b->indices, b->samples * sizeof(b->indices[0]));
}

static rf_config *kill_config(const struct kill_spec *s)
{
    rf_config *cfg = small_config(2, KILL_SAMPLES, KILL_BATCH, KILL_SIDE);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SOURCE, s->source));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_START_MODE, s->start_mode));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_EPOCHS, MAX_EPOCHS));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SEED, 77));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_MAX_RESPAWNS, 1000000));
    /* Never reached by a healthy producer: a deadline that fires anyway
     * shows up as more respawns than kills. */
    CHECK_OK(rf_config_set(cfg, RF_PARAM_BATCH_TIMEOUT_MS, 60000));
    return cfg;
}

static unsigned next_random(unsigned *state)
{
    *state = *state * 1103515245u + 12345u;
    return *state >> 8;
}

/* Sends SIGKILL to one of this process's producers, chosen at random.
 * Returns whether a live one was there to kill. */
static bool kill_a_producer(unsigned *rng)
{
    int pids[64];
    const int n = list_children(pids, 64);
    if (n == 0)
        return false;
    return kill(pids[next_random(rng) % (unsigned)n], SIGKILL) == 0;
}

struct killer {
    pthread_t thread;
    const struct kill_spec *spec;
    atomic_int kills;
    atomic_bool stop;
    unsigned rng;
};

static long random_gap(const struct kill_spec *s, unsigned *rng)
{
    return s->min_gap_us +
           (long)(next_random(rng) %
                  (unsigned)(s->max_gap_us - s->min_gap_us + 1));
}

static void *killer_main(void *arg)
{
    struct killer *k = arg;
    while (!atomic_load(&k->stop) && atomic_load(&k->kills) < k->spec->kills) {
        sleep_us(random_gap(k->spec, &k->rng));
        if (kill_a_producer(&k->rng))
            atomic_fetch_add(&k->kills, 1);
    }
    return NULL;
}

/* next() with a watchdog: SIGALRM makes a hung wait return -EINTR. The
 * timer repeats, in case one signal lands outside poll(). */
static int next_or_hang(rf_loader *l, rf_batch *b)
{
    const struct itimerval every = {{HANG_SECONDS, 0}, {HANG_SECONDS, 0}};
    const struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &every, NULL);
    const int rc = rf_loader_next(l, b);
    setitimer(ITIMER_REAL, &off, NULL);
    return rc;
}

struct epoch_seen {
    uint8_t *count; /* [MAX_EPOCHS * KILL_SAMPLES] */
};

/* Records the batch's samples; counts duplicates and wrong order. */
static void note_batch(struct kill_result *r, struct epoch_seen *seen,
                       const rf_batch *b)
{
    if (b->sequence != r->batches)
        r->wrong_order++;
    for (uint32_t i = 0; i < b->samples; i++) {
        uint8_t *c = &seen->count[b->epoch * KILL_SAMPLES + b->indices[i]];
        if (b->indices[i] >= KILL_SAMPLES || (*c)++ != 0)
            r->duplicated++;
    }
    r->digests[r->batches++] = digest_batch(b);
}

/* Samples missing from the epochs the run went through completely. */
static uint64_t count_lost(const struct epoch_seen *seen, uint64_t batches)
{
    const uint64_t per_epoch = KILL_SAMPLES / KILL_BATCH;
    uint64_t lost = 0;
    for (uint64_t e = 0; e < batches / per_epoch; e++)
        for (uint32_t i = 0; i < KILL_SAMPLES; i++)
            lost += seen->count[e * KILL_SAMPLES + i] == 0;
    return lost;
}

/* Consumes until `kills` producers have been killed and then `batches`
 * more, or exactly `batches` when no kills are wanted (the reference). */
static void run_with_kills(const struct kill_spec *s, uint64_t batches,
                           unsigned seed, struct kill_result *r)
{
    memset(r, 0, sizeof(*r));
    const uint64_t cap = (uint64_t)MAX_EPOCHS * (KILL_SAMPLES / KILL_BATCH);
    r->digests = calloc(cap, sizeof(*r->digests));
    struct epoch_seen seen = {calloc((size_t)MAX_EPOCHS * KILL_SAMPLES, 1)};
    CHECK(r->digests && seen.count);
    rf_config *cfg = kill_config(s);
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    struct killer k = {.spec = s, .rng = seed};
    if (s->kills && s->killer_thread)
        CHECK_EQ(pthread_create(&k.thread, NULL, killer_main, &k), 0);
    uint64_t after_kills = 0;
    rf_batch b;
    int rc;
    while (r->batches < cap && (rc = next_or_hang(l, &b)) == 1) {
        note_batch(r, &seen, &b);
        CHECK_OK(rf_loader_release(l, &b));
        if (s->kills && !s->killer_thread && atomic_load(&k.kills) < s->kills &&
            next_random(&k.rng) % 4 == 0) {
            sleep_us(random_gap(s, &k.rng));
            atomic_fetch_add(&k.kills, kill_a_producer(&k.rng));
        }
        const bool kills_done = atomic_load(&k.kills) >= s->kills;
        if ((s->kills == 0 && r->batches == batches) ||
            (kills_done && ++after_kills > batches))
            break;
    }
    if (rc == -EINTR)
        r->hangs++;
    else if (rc < 0)
        r->error = rc;
    if (rc < 0)
        snprintf(r->detail, sizeof(r->detail), "%s", rf_loader_error(l));
    atomic_store(&k.stop, true);
    if (s->kills && s->killer_thread)
        pthread_join(k.thread, NULL);
    r->kills = atomic_load(&k.kills);
    rf_stats st;
    CHECK_OK(rf_loader_stats(l, &st));
    r->respawns = st.respawns;
    r->lost = count_lost(&seen, r->batches);
    rf_loader_close(l);
    free(seen.count);
}

/* Batches of run a that differ from the undisturbed run b. */
static uint64_t count_changed(const struct kill_result *a,
                              const struct kill_result *b)
{
    uint64_t changed = 0;
    for (uint64_t i = 0; i < a->batches && i < b->batches; i++)
        changed += a->digests[i] != b->digests[i];
    return changed;
}

static void check_kill_run(const struct kill_spec *s, unsigned seed)
{
    struct kill_result hit, calm;
    run_with_kills(s, 8, seed, &hit);
    if (hit.error || hit.hangs)
        fprintf(stderr, "after %d kills: %s\n", hit.kills, hit.detail);
    CHECK_EQ(hit.error, 0);
    CHECK_EQ(hit.hangs, 0);
    CHECK_GE(hit.kills, s->kills);
    /* A kill can find a producer that is already exiting. */
    CHECK_GE(hit.respawns, (uint64_t)s->kills / 2);
    CHECK_LE(hit.respawns, (uint64_t)hit.kills);
    CHECK_EQ(hit.duplicated, 0);
    CHECK_EQ(hit.lost, 0);
    CHECK_EQ(hit.wrong_order, 0);
    struct kill_spec undisturbed = *s;
    undisturbed.kills = 0;
    run_with_kills(&undisturbed, hit.batches, seed, &calm);
    CHECK_EQ(calm.batches, hit.batches);
    CHECK_EQ(count_changed(&hit, &calm), 0);
    printf("%s, %s: %d kills, %llu respawns, %llu batches identical to an "
           "undisturbed run\n",
           s->source == RF_SOURCE_SYNTHETIC_JPEG ? "JPEG" : "synthetic",
           s->start_mode == RF_START_FORK ? "fork" : "spawn", hit.kills,
           (unsigned long long)hit.respawns, (unsigned long long)hit.batches);
    free(hit.digests);
    free(calm.digests);
}

TEST_CASE_LIMIT(test_random_kills_lose_nothing, "kills",
                "random kills lose nothing", 240)
{
    const struct kill_spec jpeg = {.source = RF_SOURCE_SYNTHETIC_JPEG,
                                   .start_mode = RF_START_SPAWN,
                                   .kills = 60,
                                   .min_gap_us = 2000,
                                   .max_gap_us = 30000,
                                   .killer_thread = true};
    check_kill_run(&jpeg, 1);
}

/* Fork mode has no threads to kill from: the loop kills between batches,
 * after a random pause while the producers work. */
TEST_CASE_LIMIT(test_random_kills_fork_mode, "kills", "random kills, fork mode",
                120)
{
    const struct kill_spec forked = {.source = RF_SOURCE_SYNTHETIC,
                                     .start_mode = RF_START_FORK,
                                     .kills = 10,
                                     .min_gap_us = 0,
                                     .max_gap_us = 2000,
                                     .killer_thread = false};
    check_kill_run(&forked, 2);
}

static void do_nothing(int sig)
{
    (void)sig;
}

/* A fork-mode producer is a fork of the caller, but keeps none of its
 * signal handlers nor the signals it ignores, as a spawned one keeps
 * none: a SIGTERM handler (a training script's, which saves a
 * checkpoint) must not keep it alive through a job's SIGTERM, nor an
 * ignored SIGHUP (nohup) through a hang-up. Each producer dies of the
 * signal sent to it. */
TEST_CASE(test_fork_mode_takes_no_handlers, "fork",
          "fork mode takes none of the caller's handlers")
{
    struct sigaction catch_it = {.sa_handler = do_nothing};
    struct sigaction ignore_it = {.sa_handler = SIG_IGN};
    struct sigaction old_term, old_hup;
    CHECK_EQ(sigaction(SIGTERM, &catch_it, &old_term), 0);
    CHECK_EQ(sigaction(SIGHUP, &ignore_it, &old_hup), 0);
    rf_config *cfg = small_config(2, 1000000, 32, 8);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_START_MODE, RF_START_FORK));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_ON_PRODUCER_DEATH, RF_ON_DEATH_FAIL));
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    CHECK_EQ(sigaction(SIGTERM, &old_term, NULL), 0);
    CHECK_EQ(sigaction(SIGHUP, &old_hup, NULL), 0);
    test_pass_one_batch(l);
    int pids[2];
    CHECK_EQ(list_children(pids, 2), 2);
    CHECK_EQ(kill(pids[0], SIGTERM), 0);
    CHECK_EQ(kill(pids[1], SIGHUP), 0);
    const uint64_t start = rf__now_ns();
    while (!(process_gone(pids[0]) && process_gone(pids[1])) &&
           rf__now_ns() - start < 2000000000u)
        sleep_us(1000);
    CHECK(process_gone(pids[0]));
    CHECK(process_gone(pids[1]));
    CHECK_EQ(next_until_error(l), RF_E_PRODUCER_DIED);
    CHECK_CONTAINS(rf_loader_error(l), "was killed by signal");
    printf("fork mode, SIGTERM caught and SIGHUP ignored by the caller: "
           "producers die of them (%s)\n",
           rf_loader_error(l));
    rf_loader_close(l);
}

/* ---- a lost wake-up ------------------------------------------------------ */

struct bell_thief {
    pthread_t thread;
    const struct rf__segment *seg;
    int producer_pid;
    atomic_bool done;
};

/* Waits until the consumer sleeps for the stopped producer's batch, then
 * writes the one word that loses its wake-up (a buggy or dying producer
 * could) and lets the producer go on: it publishes and, reading "not
 * sleeping", rings nobody. */
static void *steal_wake_up(void *arg)
{
    struct bell_thief *t = arg;
    struct rf__bell *bell = rf__segment_consumer_bell(t->seg);
    while (atomic_load(&bell->sleeping) == 0)
        sleep_us(100);
    sleep_us(20000); /* well inside poll() by now */
    atomic_store(&bell->sleeping, 0);
    CHECK_EQ(kill(t->producer_pid, SIGCONT), 0);
    atomic_store(&t->done, true);
    return NULL;
}

TEST_CASE_LIMIT(test_lost_wake_up_does_not_stall_next, "wake",
                "lost wake-up does not stall next()", 60)
{
    rf_config *cfg = small_config(1, 100000, 4, 8);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SLOTS, 4));
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    struct rf__segment seg = map_control_segment();
    const int pid = pause_producer(&seg);
    rf_batch b;
    /* Take what is ready; the next call then sleeps for the producer. */
    struct bell_thief t = {.seg = &seg, .producer_pid = pid};
    CHECK_EQ(pthread_create(&t.thread, NULL, steal_wake_up, &t), 0);
    int rc;
    while ((rc = next_or_hang(l, &b)) == 1 && !atomic_load(&t.done))
        CHECK_OK(rf_loader_release(l, &b));
    pthread_join(t.thread, NULL);
    /* -EINTR: the watchdog found next() asleep for HANG_SECONDS. */
    CHECK_EQ(rc, 1);
    CHECK_OK(rf_loader_release(l, &b));
    for (int i = 0; i < 20; i++) {
        CHECK_EQ(next_or_hang(l, &b), 1);
        CHECK_OK(rf_loader_release(l, &b));
    }
    rf_loader_close(l);
    munmap(seg.header, seg.control_size);
}

/* ---- stress mode --------------------------------------------------------- */

static int stress(int total_kills)
{
    const struct kill_spec spec = {.source = RF_SOURCE_SYNTHETIC_JPEG,
                                   .start_mode = RF_START_SPAWN,
                                   .kills = 100,
                                   .min_gap_us = 200,
                                   .max_gap_us = 20000,
                                   .killer_thread = true};
    uint64_t kills = 0, hangs = 0, lost = 0, duplicated = 0, changed = 0,
             errors = 0, leaked = 0, batches = 0;
    const int fds_before = count_entries("/proc/self/fd");
    const int shm_before = count_entries("/dev/shm");
    for (unsigned round = 1; kills < (uint64_t)total_kills; round++) {
        struct kill_result hit, calm;
        run_with_kills(&spec, 8, round, &hit);
        struct kill_spec undisturbed = spec;
        undisturbed.kills = 0;
        run_with_kills(&undisturbed, hit.batches, round, &calm);
        int pids[8];
        const uint64_t leaks = (uint64_t)list_children(pids, 8) +
                               (count_entries("/proc/self/fd") != fds_before) +
                               (count_entries("/dev/shm") != shm_before);
        kills += (uint64_t)hit.kills;
        hangs += hit.hangs;
        lost += hit.lost;
        duplicated += hit.duplicated;
        changed += count_changed(&hit, &calm) + hit.wrong_order;
        errors += hit.error != 0;
        leaked += leaks;
        batches += hit.batches;
        printf("round %u: %d kills, %llu respawns, %llu batches%s%s\n", round,
               hit.kills, (unsigned long long)hit.respawns,
               (unsigned long long)hit.batches, hit.error ? ", error: " : "",
               hit.error ? hit.detail : "");
        fflush(stdout);
        free(hit.digests);
        free(calm.digests);
    }
    printf("kills %llu, batches %llu, hangs %llu, lost %llu, duplicated "
           "%llu, changed %llu, errors %llu, leaked %llu\n",
           (unsigned long long)kills, (unsigned long long)batches,
           (unsigned long long)hangs, (unsigned long long)lost,
           (unsigned long long)duplicated, (unsigned long long)changed,
           (unsigned long long)errors, (unsigned long long)leaked);
    return (hangs + lost + duplicated + changed + errors + leaked) != 0;
}

int main(int argc, char **argv)
{
    struct sigaction sa = {.sa_handler = on_alarm}; /* no SA_RESTART */
    sigaction(SIGALRM, &sa, NULL);
    if (argc == 3 && strcmp(argv[1], "--stress") == 0)
        return stress((int)strtol(argv[2], NULL, 10));
    /* Each case runs in a child forked from this single-threaded
     * process, so fork-mode cases may come in any order. */
    return TEST_MAIN(argc, argv);
}
