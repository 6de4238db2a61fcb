/*
 * test-ring.c - the SPSC handle ring and its bell: single-threaded edge
 * cases, then 10^7 handles between two threads (also run under TSan) and
 * between two processes, checking that none is lost, duplicated or
 * reordered.
 *
 * RF_TEST_THREADS_ONLY=1 skips the case between processes: ThreadSanitizer
 * cannot see across fork(), so its run (tools/quickstart's tsan step)
 * checks the stream between threads only.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <unistd.h>

#include "channel/ring.h"
#include "harness.h"
#include "proc.h"
#include "test.h"

#define HANDLES 10000000ull

/* A ring and the reader's bell, as they sit in shared memory. */
struct channel {
    struct rf__bell bell;
    struct rf__ring ring; /* followed by its entries */
};

static struct channel *channel_new(uint32_t entries, bool shared)
{
    const size_t bytes = sizeof(struct channel) + entries * sizeof(uint64_t);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    struct channel *ch = p;
    rf__ring_init(&ch->ring, entries);
    return ch;
}

TEST_CASE_LIMIT(test_push_pop_full_empty, "ring",
                "push and pop, full and empty", 10)
{
    struct channel *ch = channel_new(4, false);
    uint64_t h = 0;
    CHECK(rf__ring_empty(&ch->ring));
    CHECK_EQ(rf__ring_pop(&ch->ring, ch->ring.entries, &h), 0);
    for (uint64_t i = 0; i < 4; i++)
        CHECK_EQ(rf__ring_push(&ch->ring, ch->ring.entries, 100 + i), 0);
    CHECK_EQ(rf__ring_push(&ch->ring, ch->ring.entries, 999), -EAGAIN);
    for (uint64_t i = 0; i < 4; i++) {
        CHECK_EQ(rf__ring_pop(&ch->ring, ch->ring.entries, &h), 1);
        CHECK_EQ(h, 100 + i);
    }
    CHECK_EQ(rf__ring_pop(&ch->ring, ch->ring.entries, &h), 0);
}

TEST_CASE_LIMIT(test_index_wraparound, "ring", "indices wrap around 2^32", 10)
{
    struct channel *ch = channel_new(8, false);
    /* Free-running indices just below 2^32: the masks must still work. */
    atomic_store(&ch->ring.head, UINT32_MAX - 2);
    atomic_store(&ch->ring.tail, UINT32_MAX - 2);
    for (uint64_t i = 0; i < 100; i++) {
        uint64_t h = 0;
        CHECK_EQ(rf__ring_push(&ch->ring, ch->ring.entries, i), 0);
        CHECK_EQ(rf__ring_push(&ch->ring, ch->ring.entries, i + 1000), 0);
        CHECK_EQ(rf__ring_pop(&ch->ring, ch->ring.entries, &h), 1);
        CHECK_EQ(h, i);
        CHECK_EQ(rf__ring_pop(&ch->ring, ch->ring.entries, &h), 1);
        CHECK_EQ(h, i + 1000);
    }
}

TEST_CASE_LIMIT(test_corrupt_indices, "ring", "corrupt indices are an error",
                10)
{
    struct channel *ch = channel_new(8, false);
    uint64_t h = 0;
    atomic_store(&ch->ring.tail, 1000); /* 1000 entries in a ring of 8 */
    CHECK_EQ(rf__ring_pop(&ch->ring, ch->ring.entries, &h), -EBADMSG);
}

TEST_CASE_LIMIT(test_wait_times_out, "ring", "wait times out", 10)
{
    struct channel *ch = channel_new(4, false);
    const uint64_t start = rf__now_ns();
    CHECK_EQ(rf__ring_wait_futex(&ch->ring, &ch->bell, 1000, 50), 0);
    CHECK_GE(rf__now_ns() - start, 40000000ull);
    CHECK_EQ(atomic_load(&ch->bell.sleeping), 0);
}

/* The writer side of a stream: pushes 1..n, ringing the bell each time.
 * On a full ring it yields rather than spins: on a loaded machine (other
 * tests, a CPU hog) a spinning writer can hold the CPU the reader needs
 * for a whole time slice at every one of thousands of full rings, and the
 * test then ran for more than 5 minutes instead of seconds. */
static void write_stream(struct channel *ch, uint64_t n)
{
    for (uint64_t v = 1; v <= n; v++) {
        while (rf__ring_push(&ch->ring, ch->ring.entries, v) != 0)
            sched_yield();
        rf__bell_ring_futex(&ch->bell);
    }
}

/* The reader side: expects exactly 1..n in order; returns the number of
 * handles that were missing, repeated or out of place. */
static uint64_t read_stream(struct channel *ch, uint64_t n)
{
    uint64_t expect = 1, bad = 0;
    while (expect <= n) {
        uint64_t h;
        const int rc = rf__ring_pop(&ch->ring, ch->ring.entries, &h);
        if (rc == 0) {
            rf__ring_wait_futex(&ch->ring, &ch->bell, 2000, 1000);
            continue;
        }
        CHECK_EQ(rc, 1);
        if (h != expect)
            bad++;
        expect++;
    }
    return bad;
}

static void *writer_thread(void *arg)
{
    write_stream(arg, HANDLES);
    return NULL;
}

TEST_CASE(test_stream_between_threads, "stream", "10^7 handles between threads")
{
    struct channel *ch = channel_new(64, false);
    pthread_t writer;
    CHECK_EQ(pthread_create(&writer, NULL, writer_thread, ch), 0);
    const uint64_t bad = read_stream(ch, HANDLES);
    CHECK_EQ(pthread_join(writer, NULL), 0);
    CHECK_EQ(bad, 0);
    CHECK(rf__ring_empty(&ch->ring));
    printf("threads: %llu handles, 0 lost or duplicated\n", HANDLES);
}

TEST_CASE(test_stream_between_processes, "stream",
          "10^7 handles between processes")
{
    if (getenv("RF_TEST_THREADS_ONLY"))
        TEST_SKIP_BECAUSE("RF_TEST_THREADS_ONLY is set (a ThreadSanitizer "
                          "run, which cannot see across fork())");
    struct channel *ch = channel_new(64, true);
    const pid_t pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0) {
        write_stream(ch, HANDLES);
        _exit(0);
    }
    const uint64_t bad = read_stream(ch, HANDLES);
    CHECK_EQ(exit_status_of(pid), 0);
    CHECK_EQ(bad, 0);
    CHECK(rf__ring_empty(&ch->ring));
    printf("processes: %llu handles, 0 lost or duplicated\n", HANDLES);
}

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
