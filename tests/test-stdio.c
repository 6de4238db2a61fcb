/*
 * test-stdio.c - a caller started with stdin, stdout or stderr closed (a
 * daemon, `2>&-`, a job runner).
 *
 *   - no descriptor the library creates lands on 0, 1 or 2, in the
 *     consumer, and a producer finds /dev/null there;
 *   - under a kill storm every sample still comes exactly once with its
 *     bytes, and the header, parameters and path in the control segment
 *     stay byte for byte what open wrote (the respawn message once went
 *     into the control segment, the memfd that had taken fd 2);
 *   - the default message handler never writes into a file the caller
 *     opened onto fd 2 after open; a handler set in the config gets each
 *     replacement.
 *
 * Each case runs in a child process of its own (harness.h), which closes
 * its own descriptors.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "proc.h"
#include "channel/segment.h"
#include "test.h"

enum { SAMPLES = 3000, BATCH = 8, SIDE = 16, KILL_EVERY = 25, SEED = 5 };

/* The checks' messages go to a copy of the test's stderr, so that the
 * case can close fd 2 and still report. */
static void keep_reporting(void)
{
    const int saved = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 64);
    CHECK(saved >= 0);
    FILE *f = fdopen(saved, "w");
    CHECK(f != NULL);
    setvbuf(f, NULL, _IONBF, 0);
    stderr = f;
}

static bool fd_is_closed(int fd)
{
    return fcntl(fd, F_GETFD) < 0 && errno == EBADF;
}

static void close_std(unsigned mask)
{
    for (int fd = 0; fd <= 2; fd++)
        if (mask & (1u << fd))
            CHECK_EQ(close(fd), 0);
}

static rf_config *storm_config(rf_start_mode mode)
{
    rf_config *cfg = rf_config_create();
    CHECK_OK(rf_config_set(cfg, RF_PARAM_PRODUCERS, 2));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SAMPLES, SAMPLES));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_BATCH_SIZE, BATCH));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_HEIGHT, SIDE));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_WIDTH, SIDE));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SEED, SEED));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_START_MODE, mode));
    return cfg; /* RF_PARAM_QUIET stays 0: the default handler runs */
}

/* What must not change while the run goes on: the header, the
 * parameters and the dataset path (only rings, states and bells move). */
struct frozen {
    const uint8_t *base;
    size_t size;
    uint8_t *copy;
};

static struct frozen freeze(void)
{
    struct frozen f = {0};
    f.base = map_memfd("memfd:ringfeed-control", &f.size);
    const struct rf__header *h = (const struct rf__header *)f.base;
    f.size = h->producers_offset; /* header page, params, path */
    f.copy = malloc(f.size);
    CHECK(f.copy != NULL);
    memcpy(f.copy, f.base, f.size);
    return f;
}

static void check_unchanged(const struct frozen *f)
{
    for (size_t i = 0; i < f->size; i++)
        if (f->base[i] != f->copy[i]) {
            fprintf(stderr, "control segment byte %zu changed: %u -> %u\n", i,
                    f->copy[i], f->base[i]);
            exit(1);
        }
}

/* The producers must not start with a hole at 0, 1 or 2 either: their
 * own files would land there. */
static void check_producers_stdio(unsigned closed)
{
    int pids[8];
    const int n = list_children(pids, 8);
    CHECK_GT(n, 0);
    for (int i = 0; i < n; i++)
        for (int fd = 0; fd <= 2; fd++) {
            if (!(closed & (1u << fd)))
                continue;
            char link[64], target[256] = "";
            snprintf(link, sizeof(link), "/proc/%d/fd/%d", pids[i], fd);
            ssize_t len = -1;
            /* A producer that is still starting may not have filled it
             * yet (and the dynamic loader opens its libraries on the
             * lowest free fd for a moment): give it 5 s to show
             * /dev/null there. */
            for (int tries = 0; tries < 5000; tries++) {
                len = readlink(link, target, sizeof(target) - 1);
                target[len > 0 ? len : 0] = '\0';
                if (strstr(target, "/dev/null") || process_gone(pids[i]))
                    break;
                usleep(1000);
            }
            if (process_gone(pids[i]))
                continue;
            CHECK_GT(len, 0);
            CHECK_CONTAINS(target, "/dev/null");
        }
}

static void check_batch(const rf_batch *b, uint8_t *seen, uint8_t *expect)
{
    for (uint32_t i = 0; i < b->samples; i++) {
        const uint64_t index = b->indices[i];
        CHECK_LT(index, SAMPLES);
        CHECK_EQ(seen[index]++, 0);
        rf_synthetic_fill(SEED, index, 1000, SIDE, SIDE, 3, RF_LAYOUT_NHWC,
                          expect);
        CHECK(memcmp((const uint8_t *)b->data + i * b->sample_bytes, expect,
                     b->sample_bytes) == 0);
        CHECK_EQ(b->labels[i], rf_synthetic_label(SEED, index, 1000));
    }
}

/* One epoch with a producer SIGKILLed every KILL_EVERY batches; returns
 * the kills. */
static int storm(rf_loader *l, const struct frozen *f)
{
    uint8_t *seen = calloc(SAMPLES, 1), expect[SIDE * SIDE * 3];
    CHECK(seen != NULL);
    unsigned rng = 1;
    int kills = 0, rc;
    rf_batch b;
    for (uint64_t n = 0; (rc = rf_loader_next(l, &b)) == 1; n++) {
        check_batch(&b, seen, expect);
        CHECK_OK(rf_loader_release(l, &b));
        int pids[8];
        const int alive = list_children(pids, 8);
        if (n % KILL_EVERY == KILL_EVERY - 1 && alive > 0) {
            rng = rng * 1103515245u + 12345u;
            kills += kill(pids[(rng >> 8) % (unsigned)alive], SIGKILL) == 0;
        }
        check_unchanged(f);
    }
    if (rc < 0)
        fprintf(stderr, "next: %s\n", rf_loader_error(l));
    CHECK_EQ(rc, 0);
    for (uint64_t i = 0; i < SAMPLES; i++)
        CHECK_EQ(seen[i], 1);
    free(seen);
    return kills;
}

static void run_closed(unsigned mask, rf_start_mode mode)
{
    keep_reporting();
    close_std(mask);
    rf_config *cfg = storm_config(mode);
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    for (int fd = 0; fd <= 2; fd++)
        if (mask & (1u << fd))
            CHECK(fd_is_closed(fd));
    check_producers_stdio(mask);
    struct frozen f = freeze();
    const int kills = storm(l, &f);
    rf_stats st;
    CHECK_OK(rf_loader_stats(l, &st));
    CHECK_GE(kills, 10);
    CHECK_GE(st.respawns, 1);
    check_unchanged(&f);
    rf_loader_close(l);
    for (int fd = 0; fd <= 2; fd++)
        if (mask & (1u << fd))
            CHECK(fd_is_closed(fd));
    fprintf(stderr, "closed mask %u, %s: %d kills, %llu respawns, ok\n", mask,
            mode == RF_START_FORK ? "fork" : "spawn", kills,
            (unsigned long long)st.respawns);
    free(f.copy);
}

/* Kills one producer and reads batches until its replacement has been
 * reported (one more respawn counted). */
static void kill_one_and_go_on(rf_loader *l)
{
    rf_stats st = {0};
    CHECK_OK(rf_loader_stats(l, &st));
    const uint64_t before = st.respawns;
    int pids[8];
    CHECK_GT(list_children(pids, 8), 0);
    CHECK_EQ(kill(pids[0], SIGKILL), 0);
    while (!process_gone(pids[0]))
        usleep(1000);
    rf_batch b;
    while (st.respawns == before) {
        CHECK_EQ(rf_loader_next(l, &b), 1);
        CHECK_OK(rf_loader_release(l, &b));
        CHECK_OK(rf_loader_stats(l, &st));
    }
}

/* Everything the pipe holds now (its write end stays open). */
static void read_pipe(int fd, char *text, size_t len)
{
    const int flags = fcntl(fd, F_GETFL);
    CHECK_EQ(fcntl(fd, F_SETFL, flags | O_NONBLOCK), 0);
    size_t used = 0;
    ssize_t n;
    while (used + 1 < len && (n = read(fd, text + used, len - 1 - used)) > 0)
        used += (size_t)n;
    text[used] = '\0';
}

/* fd 2 closed at open; a file the caller opens later lands on 2. The
 * default handler must leave it alone. Then the same with fd 2 open at
 * open (a pipe), closed and reused for a file afterwards: there the
 * handler must first have written to the pipe while it was fd 2, so that
 * an empty file means it was spared, not that nothing was said. */
static void default_handler_spares_callers_file(bool open_at_start)
{
    keep_reporting();
    int pipe_fds[2] = {-1, -1};
    if (open_at_start) {
        CHECK_EQ(pipe(pipe_fds), 0);
        CHECK_EQ(dup2(pipe_fds[1], STDERR_FILENO), STDERR_FILENO);
    } else {
        close_std(1u << 2);
    }
    rf_config *cfg = storm_config(RF_START_SPAWN);
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    if (open_at_start) {
        kill_one_and_go_on(l);
        char said[4096];
        read_pipe(pipe_fds[0], said, sizeof(said));
        CHECK_CONTAINS(said, "ringfeed: ");
        CHECK_CONTAINS(said, "replaced by pid");
        CHECK_EQ(close(STDERR_FILENO), 0);
    }
    char path[] = "/tmp/rf-stdio-XXXXXX";
    const int fd = mkstemp(path);
    CHECK_EQ(fd, STDERR_FILENO);
    kill_one_and_go_on(l);
    struct stat sb;
    CHECK_EQ(fstat(fd, &sb), 0);
    CHECK_EQ(sb.st_size, 0);
    rf_loader_close(l);
    unlink(path);
    if (open_at_start) {
        close(pipe_fds[0]);
        close(pipe_fds[1]);
    }
}

TEST_CASE(handler_gets_replacements, "messages", "handler gets replacements")
{
    struct test_messages m = {0};
    rf_config *cfg = storm_config(RF_START_SPAWN);
    CHECK_OK(rf_config_set_message_handler(cfg, test_collect_message, &m));
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    kill_one_and_go_on(l);
    CHECK_EQ(m.count, 1);
    CHECK_CONTAINS(m.last, "was killed by signal 9");
    CHECK_CONTAINS(m.last, "replaced by pid");
    CHECK(strchr(m.last, '\n') == NULL);
    rf_loader_close(l);
    /* RF_PARAM_QUIET silences the handler too. */
    m.count = 0;
    cfg = storm_config(RF_START_SPAWN);
    CHECK_OK(rf_config_set_message_handler(cfg, test_collect_message, &m));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_QUIET, 1));
    l = test_open_loader(cfg);
    rf_config_free(cfg);
    kill_one_and_go_on(l);
    CHECK_EQ(m.count, 0);
    rf_loader_close(l);
    CHECK_EQ(rf_config_set_message_handler(NULL, test_collect_message, &m),
             -EINVAL);
}

TEST_CASE(closed_0_spawn, "closed", "fd 0 closed, spawn")
{
    run_closed(1u << 0, RF_START_SPAWN);
}

TEST_CASE(closed_1_spawn, "closed", "fd 1 closed, spawn")
{
    run_closed(1u << 1, RF_START_SPAWN);
}

TEST_CASE(closed_2_spawn, "closed", "fd 2 closed, spawn")
{
    run_closed(1u << 2, RF_START_SPAWN);
}

TEST_CASE(closed_all_spawn, "closed", "fds 0-2 closed, spawn")
{
    run_closed(7u, RF_START_SPAWN);
}

TEST_CASE(closed_all_fork, "closed", "fds 0-2 closed, fork mode")
{
    run_closed(7u, RF_START_FORK);
}

TEST_CASE(spares_file_opened_later, "messages",
          "default handler spares a file opened on fd 2")
{
    default_handler_spares_callers_file(false);
}

TEST_CASE(spares_file_after_reuse, "messages",
          "default handler spares fd 2 reused after open")
{
    default_handler_spares_callers_file(true);
}

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
