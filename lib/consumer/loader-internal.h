/*
 * loader-internal.h - the loader's private state, shared by the
 * consumer's files (loader.c, resolve.c, shared-memory.c, launch.c,
 * delivery.c, wait.c, deaths.c, deadlines.c, stalls.c, blame.c,
 * messages.c) and by nothing else. Each function below says which file owns it.
 *
 * Every slot is always in exactly one place, recorded in slot_info:
 * FREE (nothing left to issue), AT_PRODUCER p (an order is in p's EMPTY
 * ring or being filled), READY (published, not yet handed out) or
 * WITH_USER (handed out, not yet released). Handles popped from a FULL
 * ring are checked against this record before any slot memory is
 * touched.
 */
#ifndef RF_CONSUMER_LOADER_INTERNAL_H
#define RF_CONSUMER_LOADER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ringfeed.h"

#include "channel/segment.h"
#include "common/cpu-budget.h"
#include "common/order.h"
#include "common/params.h"
#include "common/text.h"
#include "consumer/breakers.h"
#include "consumer/failures.h"
#include "consumer/spawn.h"

/* Where a slot is (see above); every change of place is one of the
 * transitions delivery.c and deaths.c make. */
enum slot_where { SLOT_FREE, SLOT_AT_PRODUCER, SLOT_READY, SLOT_WITH_USER };

struct slot_info {
    uint8_t where;     /* enum slot_where */
    uint32_t producer; /* valid when AT_PRODUCER */
    uint64_t seq;      /* the batch it holds or is being filled with */
};

/* What the consumer knows of one producer: its process, where it runs,
 * what it owes and the clock its deadline runs on. Restarted (all but
 * cpu) whenever a replacement takes its index. */
struct producer_info {
    struct rf__child child;
    int cpu;              /* CPU to pin to, or -1 */
    uint32_t orders;      /* orders outstanding */
    bool has_delivered;   /* the current process has delivered a batch */
    uint64_t progress_ns; /* when it last delivered, or got its first order
                             after owing none */
    uint64_t overdue_ns;  /* when first seen past its deadline, or 0 */
    uint64_t resumed_ns;  /* the SIGCONT stamp taken for the current
                             deadline, or 0 */
};

/* Fields are grouped by concern, and within a group ordered so that the
 * struct has little padding. */
struct rf_loader {
    int64_t params[RF__PARAMS];
    char path[RF__PATH_MAX];
    struct rf__segment seg;
    struct rf__producer_fds fds; /* control memfd, arena memfd, eventfd */
    uint32_t producers, slots, batch_size;
    uint32_t ring_entries; /* from the layout; never read back from shared
                              memory, which producers can write */
    uint64_t sample_bytes, spin_ns;

    struct rf__budget budget;            /* the CPUs this rank may use */
    struct producer_info *producer_info; /* [producers] */
    char producer_path[RF__PATH_MAX];    /* spawn mode: the helper */
    int helper_fd;                       /* spawn mode: it, open, or -1 */
    uint32_t next_producer;              /* where the search for the least
                                            busy producer starts, for fairness */
    struct slot_info *slot_info;         /* [slots] */
    struct pollfd *pfds; /* [1 + producers]: the eventfd, then each
                            producer's pidfd; one array, which poll()
                            takes whole, rather than in producer_info */

    struct rf__order order;
    uint64_t listing_digest; /* RF_SOURCE_PATH's (rf_stats); else 0 */
    uint64_t first_batch;    /* sequence number the run starts at */
    uint64_t total_batches;  /* sequence number it ends at; without an
                                end, RF__SEQ_MASK (2^40 - 1: a handle's
                                40 bits) */
    uint64_t next_issue;     /* sequence number of the next order */
    uint64_t next_deliver;   /* ordered: the batch to hand out next */
    uint64_t delivered;
    int32_t *ready; /* ordered: [seq % slots] -> slot or -1;
                       any order: FIFO of slots */
    uint32_t ready_head, ready_count;
    uint32_t at_producers; /* slots with state AT_PRODUCER */
    bool ordered;          /* RF_PARAM_ORDERED */

    /* Messages (rf_config_set_message_handler()) */
    rf_message_fn message_fn;
    void *message_user;
    dev_t stderr_dev; /* fd 2 was this file at rf_loader_open() ... */
    ino_t stderr_ino;
    bool stderr_open; /* ... if it was open at all */
    bool quiet;       /* RF_PARAM_QUIET */
    /* The message handler runs inside rf_loader_next(): calls counts the
     * next() calls on the stack (0 or 1: the handler's own next() and
     * release() are refused with -EBUSY while it is not 0), and
     * close_pending is its rf_loader_close(), which that next() carries
     * out on its way out (see rf_message_fn in ringfeed.h). */
    uint32_t calls;
    bool close_pending;

    /* Producer deaths */
    bool respawn; /* RF_ON_DEATH_RESPAWN */
    /* RF_PARAM_MAX_RESPAWNS counts per window (RF_PARAM_RESPAWN_WINDOW_S,
     * an hour by default), not per run: an OOM killer that takes a
     * producer every ten minutes must not end a week-long run on its
     * seventh day, while a loop of replacements still ends in the hour. */
    uint64_t max_respawns;
    uint64_t window_ns;
    uint64_t window_start_ns; /* the window max_respawns counts in */
    uint64_t window_respawns; /* replacements in it */
    uint64_t timeout_ns;      /* RF_PARAM_BATCH_TIMEOUT_MS; 0 = none */
    uint64_t stall_ns;        /* RF_PARAM_STALL_WARNING_MS; 0 = never */
    /* stalls.c: the wait for the batch next() is to hand out */
    uint64_t stall_waited_ns;     /* time it took in earlier next() calls */
    uint64_t stall_call_ns;       /* when this call began waiting, or 0 */
    uint64_t report_after_ns;     /* report once waited this long; 0: no wait
                                     going on (or none to report) */
    uint64_t respawns;            /* producers replaced so far */
    struct rf__breakers breakers; /* crashes and time-outs per sample */
    uint32_t failed_starts;       /* crashes and time-outs in a row before
                                     taking up work (MAX_FAILED_STARTS) */
    uint64_t next_check_ns;       /* when next() looks at the producers again */
    uint32_t *owed; /* [slots] scratch: slots a dead producer held */

    /* RF_SOURCE_PATH: the dataset over the producers' fds, opened by
     * rf_loader_open() while its file system answers, so that messages
     * name samples without touching it again (a report of a hung read
     * must not hang on the same file system); NULL otherwise */
    rf_dataset *described;

    struct rf__failures failures; /* samples that failed */
    /* the sample whose failure ended the run (failed-sample.c) */
    struct {
        bool set;
        uint64_t index, epoch;
        char text[RF__ERROR_TEXT]; /* its failure, as its producer said */
    } failed;
    bool skip_errors; /* RF_ON_ERROR_SKIP */
    int fatal;        /* sticky error; the loader can only be closed */
    bool arena_kept;  /* rf_loader_keep_arena(): close leaves it mapped */
    /* a signal ended the wait for a replacement producer (launch.c):
     * taken by next() as an interrupt */
    bool signal_in_respawn;
    /* rf_loader_interrupt(): set by any thread, taken by next() */
    _Atomic uint32_t interrupt;
    uint64_t open_ns, wait_ns, samples_out, bytes_out;
    pid_t owner;          /* the process that opened the loader */
    uint64_t owner_token; /* its rf__process_token() */
    char error[RF__DETAIL];
};

/* Keeps the detail of an error in the loader and evaluates to `code`. A
 * macro rather than a variadic function: the text is formatted by
 * rf__format() in one place. */
#define set_error(l, code, ...)                                                \
    (rf__format((l)->error, sizeof((l)->error), __VA_ARGS__), (code))

/* Makes `code` the loader's sticky error (only close is left) and
 * returns it. */
static inline int set_fatal(rf_loader *l, int code)
{
    l->fatal = code;
    return code;
}

/* ---- messages.c ---------------------------------------------------------- */

/* The longest message (a stall report naming four producers' files) */
#define RF__MESSAGE_MAX 2048

/* Remembers what fd 2 is now: the default message handler writes there
 * only while it is still that file. */
void rf__loader_note_stderr(rf_loader *l);

/* Reports one event of the run to the caller's handler, else to the
 * caller's stderr as the default handler does (see
 * rf_config_set_message_handler()); nothing once the handler has closed
 * the loader. RF_PARAM_QUIET is the caller's to check: it silences
 * the reports of replaced producers and of samples left out, not the
 * CPU budget's at open or a long wait's. */
void rf__loader_report(rf_loader *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- resolve.c ----------------------------------------------------------- */

/* Copies cfg into l and resolves what it leaves open: the dataset,
 * producer and slot counts, rank and world size, the order and the span
 * of the run. Returns 0 or a negative code with l->error set. */
int rf__loader_resolve(rf_loader *l, const rf_config *cfg);

/* RF_SOURCE_PATH: opens l->described over the producers' fds (two more
 * fds at most), to name samples in messages, when the fd limit leaves
 * two beyond the fds_needed the run still has to open. Without it (out
 * of memory, no fds to spare) messages give sample numbers only. */
void rf__loader_keep_described(rf_loader *l, uint64_t fds_needed);

/* ---- shared-memory.c ----------------------------------------------------- */

/* Creates, reserves, maps and formats both segments. Returns 0 or a
 * negative code with l->error set. */
int rf__loader_create_segments(rf_loader *l);

/* ---- launch.c ------------------------------------------------------------ */

/* Pins, finds the helper, and starts every producer. */
int rf__loader_start_producers(rf_loader *l);

/* Waits (for a while) until every producer follows this process: has
 * asked for a signal at its death (see launch.c). */
void rf__loader_await_producers(rf_loader *l);

/* The same for producer i alone, a replacement (deaths.c), which could be
 * stopped as it starts too. rf_loader_interrupt() or a signal ends the
 * wait: next() then returns -EINTR before it waits for a batch. */
void rf__loader_await_producer(rf_loader *l, uint32_t i);

/* Starts producer i (again, after a death) in its record. */
int rf__loader_start_producer(rf_loader *l, uint32_t i);

/* Tells every producer to stop, waits CLOSE_GRACE_MS, kills the rest. */
void rf__loader_stop_producers(rf_loader *l);

/* Gives back the CPUs its producers were pinned to, for the process's
 * next loader to choose among (in a child of fork() too, whose counts
 * are its parent's copy); each cpu is -1 after. */
void rf__loader_unpin_producers(rf_loader *l);

/* ---- delivery.c ---------------------------------------------------------- */

/* Orders the least busy producer to fill `slot` with batch `seq`.
 * Returns 0, or a fatal RF_E_BAD_HANDLE when the ring is full, which
 * only a writer into the shared memory can have caused. */
int rf__loader_give_order(rf_loader *l, uint32_t slot, uint64_t seq);

/* Gives `slot` the next batch number, or marks it free when every batch
 * has been issued. */
int rf__loader_issue_order(rf_loader *l, uint32_t slot);

/* Collects the finished batches on producer p's FULL ring (every
 * producer's, for _rings). Returns 0 or RF_E_BAD_HANDLE. */
int rf__loader_drain_full_ring(rf_loader *l, uint32_t p);
int rf__loader_drain_full_rings(rf_loader *l);

/* Takes the next batch to hand out, if it is ready. */
bool rf__loader_take_ready(rf_loader *l, uint32_t *slot);

/* Fills the caller's view of the batch in `slot` and hands it out.
 * Returns 1, or a negative code. */
int rf__loader_fill_view(rf_loader *l, uint32_t slot, rf_batch *b);

/* ---- deaths.c ------------------------------------------------------------ */

/* Producer p has exited (reaped, `how` says how) or been killed for its
 * deadline. Keeps what it published, then replaces it or fails. */
int rf__loader_handle_death(rf_loader *l, uint32_t p, int pid, const char *how,
                            bool timed_out);

/* Handles every producer whose pidfd says it has exited. */
int rf__loader_collect_dead(rf_loader *l);

/* ---- blame.c ------------------------------------------------------------- */

/* Charges producer p's crash or time-out filling batch seq. Returns 0 to
 * go on with a replacement, or the error that ends the run. */
int rf__loader_charge_death(rf_loader *l, uint32_t p, uint64_t seq,
                            const char *what);

/* The sample producer p is filling now, when its state record names a
 * batch it owes and a sample of that batch (shared memory is checked
 * against the loader's own record first); false otherwise. */
bool rf__loader_current_sample(const rf_loader *l, uint32_t p,
                               uint64_t *sample);

/* "sample 12 (/data/train/cls/a.jpg)" for messages, from the listing in
 * memory (no file system access); "sample 12" without one. */
void rf__loader_describe_sample(const rf_loader *l, uint64_t index, char *out,
                                size_t len);

/* ---- failed-sample.c ----------------------------------------------------- */

/* Keeps sample `index` of `epoch` (< the dataset's samples) and its
 * failure `text` (at most text_len bytes, from a slot) as the sample whose
 * failure ends the run, for rf_loader_failed_sample(). */
void rf__loader_note_failed_sample(rf_loader *l, uint64_t epoch, uint64_t index,
                                   const char *text, size_t text_len);

/* ---- stalls.c ------------------------------------------------------------ */

/* next() is about to wait for its batch: the wait's clock starts, unless
 * it runs already (a next() that a signal cut short, called again). */
void rf__loader_stall_begins(rf_loader *l);

/* next() returns without a batch (a signal, an error): the wait stops
 * counting until next() is called again. */
void rf__loader_stall_pause(rf_loader *l);

/* next() hands a batch out: the wait, if any, is over. */
void rf__loader_stall_over(rf_loader *l);

/* After a sleep in next(): once the wait has lasted RF_PARAM_STALL_WARNING_MS
 * (0: never), and again each time it doubles, reports the batch awaited
 * and the producers that owe batches. */
void rf__loader_report_stall(rf_loader *l);

/* ---- deadlines.c --------------------------------------------------------- */

/* Producer p made progress: its deadline runs from now. */
void rf__loader_restart_deadline(rf_loader *l, uint32_t p);

/* Kills and handles every producer past its deadline. */
int rf__loader_collect_stuck(rf_loader *l);

/* Milliseconds until the nearest producer deadline, or -1 for none. */
int rf__loader_ms_to_deadline(const rf_loader *l, uint64_t now);

/* A wait that began at `started`, allowed `allowed_ns`, took much longer:
 * the time the consumer was frozen counts against no producer, nor in the
 * wait stalls.c reports. */
void rf__loader_forgive_time_stopped(rf_loader *l, uint64_t started,
                                     uint64_t allowed_ns);

/* ---- wait.c -------------------------------------------------------------- */

/* next() between sleeps: the pidfds and deadlines, every HEALTH_CHECK_MS. */
int rf__loader_check_producers(rf_loader *l);

/* Spins, then sleeps until batches come, a producer dies or a deadline
 * passes; handles the dead and the stuck. */
int rf__loader_wait_for_batches(rf_loader *l);

/* Takes a pending rf_loader_interrupt(): -EINTR with the loader's detail
 * saying so, or 0 when none is pending. */
int rf__loader_take_interrupt(rf_loader *l);

#endif /* RF_CONSUMER_LOADER_INTERNAL_H */
