/*
 * test-handler.c - a message handler that calls back into its loader
 * from inside rf_loader_next(), where the library runs it (a producer
 * replaced, a long wait reported): one that closes the loader ends that
 * next() with -ECANCELED and the loader freed (a use after free before
 * the close was put off); one that calls next() or release() gets -EBUSY
 * and changes nothing, while that next() goes on and hands out its batch.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <sys/mman.h>

#include "harness.h"
#include "proc.h"
#include "test.h"

/* One producer over two slots of batches of 4 tiny synthetic samples. */
static rf_config *small_config(void)
{
    return TEST_CONFIG({RF_PARAM_PRODUCERS, 1}, {RF_PARAM_SLOTS, 2},
                       {RF_PARAM_BATCH_SIZE, 4}, {RF_PARAM_HEIGHT, 8},
                       {RF_PARAM_WIDTH, 8}, {RF_PARAM_SAMPLES, 1000000});
}

/* A message handler that closes the loader reporting to it, from inside
 * rf_loader_next() (a use after free before the close was put off). */
struct closing_handler {
    rf_loader *loader; /* NULL until open returns */
    int messages;      /* while it had the loader */
    char first[1024];
};

static void close_from_handler(void *user, const char *text)
{
    struct closing_handler *h = user;
    if (!h->loader) /* a message of open's: not the one the case makes */
        return;
    if (h->messages++ == 0)
        snprintf(h->first, sizeof(h->first), "%s", text);
    rf_loader_close(h->loader);
    rf_loader_close(h->loader); /* twice: still one close, at the end */
}

/* Opens one producer over two slots, reporting to h, with a long wait
 * reported after stall_ms (0: never), and passes one batch. */
static rf_loader *open_closing(struct closing_handler *h, int64_t stall_ms)
{
    rf_config *cfg = small_config();
    CHECK_OK(rf_config_set(cfg, RF_PARAM_STALL_WARNING_MS, stall_ms));
    CHECK_OK(rf_config_set_message_handler(cfg, close_from_handler, h));
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    test_pass_one_batch(l);
    h->loader = l;
    return l;
}

/* Sends `sig` to the one producer, then takes batches until next()
 * ends: with -ECANCELED and a zeroed batch, after one message, which
 * says `said`, and with the loader freed: no producer, no fd of its
 * left. */
static void handler_closes_after(int sig, int64_t stall_ms, const char *said)
{
    const int fds_before = count_entries("/proc/self/fd");
    struct closing_handler h = {0};
    rf_loader *l = open_closing(&h, stall_ms);
    int pids[4];
    CHECK_EQ(list_children(pids, 4), 1);
    CHECK_EQ(kill(pids[0], sig), 0);
    rf_batch b;
    int rc;
    while ((rc = rf_loader_next(l, &b)) == 1)
        CHECK_OK(rf_loader_release(l, &b));
    CHECK_EQ(rc, -ECANCELED);
    CHECK(b.data == NULL && b.labels == NULL);
    CHECK_EQ(h.messages, 1);
    CHECK_CONTAINS(h.first, said);
    CHECK_EQ(list_children(pids, 4), 0);
    CHECK_EQ(count_entries("/proc/self/fd"), fds_before);
}

TEST_CASE(test_handler_closes_on_replacement, "close",
          "the message handler closes it: a producer replaced")
{
    handler_closes_after(SIGKILL, 0, "replaced by pid");
}

TEST_CASE(test_handler_closes_on_long_wait, "close",
          "the message handler closes it: a long wait reported")
{
    handler_closes_after(SIGSTOP, 100, "the loop has waited");
}

/* A message handler that calls its loader from inside rf_loader_next():
 * next() and release() are refused with -EBUSY and change nothing, the
 * reads and rf_loader_keep_arena() answer, and the next() that runs the
 * handler then hands out its batch as if nothing had been called. */
struct calling_handler {
    rf_loader *loader;    /* NULL until open returns */
    const rf_batch *held; /* one the caller holds */
    int stopped_pid;      /* SIGCONT to it once called, or 0 */
    int messages;         /* while it had the loader */
};

static void call_from_handler(void *user, const char *text)
{
    struct calling_handler *h = user;
    if (!h->loader || h->messages++ > 0) /* open's, or a later report */
        return;
    (void)text;
    rf_loader *l = h->loader;
    rf_batch b = {0};
    CHECK_EQ(rf_loader_next(l, &b), -EBUSY);
    CHECK(b.data == NULL);
    CHECK_CONTAINS(rf_loader_error(l), "rf_loader_next() called from the "
                                       "loader's own message handler");
    CHECK_CONTAINS(rf_loader_error(l), "let the handler return");
    CHECK_EQ(rf_loader_release(l, h->held), -EBUSY);
    CHECK_CONTAINS(rf_loader_error(l), "rf_loader_release() called from the "
                                       "loader's own message handler");
    rf_stats st;
    CHECK_OK(rf_loader_stats(l, &st));
    CHECK_EQ(st.slots_with_user, 1); /* `held`, still */
    char line[256];
    CHECK_GE(rf_loader_cpu_budget(l, line, sizeof(line)), 1);
    CHECK_EQ(rf_loader_class_name(l, 0, line, sizeof(line)), -ENOTSUP);
    CHECK_EQ(rf_loader_sample_errors(l, NULL, 0), 0);
    void *base = NULL;
    size_t bytes = 0;
    CHECK_OK(rf_loader_arena(l, &base, &bytes));
    CHECK_OK(rf_loader_keep_arena(l));
    if (h->stopped_pid > 0)
        CHECK_EQ(kill(h->stopped_pid, SIGCONT), 0);
}

/* Holds one batch of one producer over two slots, sends `sig` to the
 * producer and takes batches until the handler has been called: the
 * next() that ran it hands out a batch, with its error detail as before
 * (""), and the run goes on; the batch the handler failed to release is
 * still the caller's to release. */
static void handler_calls_after(int sig, int64_t stall_ms)
{
    struct calling_handler h = {0};
    rf_config *cfg = small_config();
    CHECK_OK(rf_config_set(cfg, RF_PARAM_STALL_WARNING_MS, stall_ms));
    CHECK_OK(rf_config_set_message_handler(cfg, call_from_handler, &h));
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    rf_batch held, b;
    CHECK_EQ(rf_loader_next(l, &held), 1);
    h.loader = l;
    h.held = &held;
    int pids[4];
    CHECK_EQ(list_children(pids, 4), 1);
    if (sig == SIGSTOP)
        h.stopped_pid = pids[0];
    CHECK_EQ(kill(pids[0], sig), 0);
    for (;;) {
        CHECK_EQ(rf_loader_next(l, &b), 1);
        if (h.messages > 0)
            break;
        CHECK_OK(rf_loader_release(l, &b));
    }
    CHECK_EQ(h.messages, 1);
    CHECK_EQ(strcmp(rf_loader_error(l), ""), 0);
    CHECK_GT(b.sequence, held.sequence);
    CHECK_OK(rf_loader_release(l, &held));
    CHECK_OK(rf_loader_release(l, &b));
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(rf_loader_next(l, &b), 1);
        CHECK_OK(rf_loader_release(l, &b));
    }
    rf_stats st;
    CHECK_OK(rf_loader_stats(l, &st));
    CHECK_EQ(st.respawns, sig == SIGKILL ? 1 : 0);
    void *base = NULL;
    size_t bytes = 0;
    CHECK_OK(rf_loader_arena(l, &base, &bytes));
    rf_loader_close(l);
    CHECK_EQ(munmap(base, bytes), 0); /* kept by the handler */
    CHECK_EQ(list_children(pids, 4), 0);
}

TEST_CASE(test_handler_calls_on_replacement, "next",
          "the message handler's next() and release(): -EBUSY, a producer "
          "replaced")
{
    handler_calls_after(SIGKILL, 0);
}

TEST_CASE(test_handler_calls_on_long_wait, "next",
          "the message handler's next() and release(): -EBUSY, a long wait "
          "reported")
{
    handler_calls_after(SIGSTOP, 100);
}

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
