/*
 * tools/work-pool.c - work on items in forked workers, results handed to
 * the caller in item order; see work-pool.h. Uses libc only.
 */
#define _GNU_SOURCE /* pipe2(), F_SETPIPE_SZ */
#include "work-pool.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

/* A worker's pipe is made this large where the system allows (else it
 * keeps the default, 64 KiB on Linux, and only runs fewer results ahead):
 * several JPEG files or zstd frames, so that a worker whose next result
 * the caller is not reading yet still has room to go on. */
#define POOL_PIPE_BYTES (1 << 20)

/* What goes down a pipe for each result, followed by its name and
 * reason, each with its NUL, then its data. */
struct wire_header {
    uint64_t item, size;
    int64_t label;
    int32_t status, kind;
    uint32_t name_size, reason_size;
};

struct pool {
    const struct pool_work *w;
    unsigned jobs;
    pid_t *pids;  /* 0 once reaped */
    int *fds;     /* the read end of each worker's pipe */
    char *buffer; /* the result being taken */
    size_t capacity;
};

/* The pool whose workers run, for end_running_workers(); NULL when none
 * does (and in every worker). */
static struct pool *running_pool;

/* ---- in a worker --------------------------------------------------------- */

/* Writes every byte of iov; false when the reader has gone. */
static bool write_all(int fd, struct iovec *iov, int count)
{
    while (count > 0) {
        ssize_t n = writev(fd, iov, count);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return false;
        for (; count > 0 && (size_t)n >= iov->iov_len; iov++, count--)
            n -= (ssize_t)iov->iov_len;
        if (count > 0) {
            iov->iov_base = (char *)iov->iov_base + n;
            iov->iov_len -= (size_t)n;
        }
    }
    return true;
}

static bool send_result(int fd, uint64_t item, const struct pool_result *r)
{
    const struct wire_header h = {
        .item = item,
        .size = r->size,
        .label = r->label,
        .status = r->status,
        .kind = r->kind,
        .name_size = (uint32_t)strlen(r->name) + 1,
        .reason_size = (uint32_t)strlen(r->reason) + 1,
    };
    struct iovec iov[] = {
        {(void *)&h, sizeof(h)},
        {(void *)r->name, h.name_size},
        {(void *)r->reason, h.reason_size},
        {(void *)r->data, r->size},
    };
    return write_all(fd, iov, r->size ? 4 : 3);
}

static void run_worker(const struct pool *p, unsigned job, int fd)
{
    const struct pool_work *w = p->w;
    w->start(w->worker, true);
    for (uint64_t item = job; item < w->items; item += p->jobs) {
        struct pool_result r = {.name = "", .reason = ""};
        w->work(w->worker, item, &r);
        /* A failed write: the caller has gone, or stopped reading. */
        if (!send_result(fd, item, &r))
            _exit(CLI_EXIT_FAILED);
    }
    _exit(0);
}

static void start_worker(struct pool *p, unsigned job)
{
    const char *program = p->w->program;
    int ends[2];
    if (pipe2(ends, O_CLOEXEC) != 0)
        cli_die(program,
                "cannot make a pipe for worker %u: %s; try fewer --jobs",
                job + 1, strerror(errno));
    (void)fcntl(ends[1], F_SETPIPE_SZ, POOL_PIPE_BYTES); /* see above */
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0)
        cli_die(program, "cannot start worker %u: %s; try fewer --jobs",
                job + 1, strerror(errno));
    if (pid == 0) {
        running_pool = NULL; /* the caller's workers are not this one's */
        cli_stop_with_parent(program, parent);
        /* The other workers' pipes: a worker that held one open would
         * keep the caller from seeing that pipe end. */
        for (unsigned j = 0; j < job; j++)
            close(p->fds[j]);
        close(ends[0]);
        run_worker(p, job, ends[1]);
    }
    close(ends[1]);
    p->pids[job] = pid;
    p->fds[job] = ends[0];
}

/* ---- in the caller ------------------------------------------------------- */

static void before_message(const struct pool *p)
{
    if (p->w->before_message)
        p->w->before_message(p->w->caller);
}

/* "was killed by signal 9 (Killed)", "exited with status 1". */
static void describe_end(int status, char *out, size_t len)
{
    if (WIFSIGNALED(status))
        snprintf(out, len, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(out, len, "exited with status %d", WEXITSTATUS(status));
}

static int reap(struct pool *p, unsigned job)
{
    int status = 0;
    pid_t got;
    do
        got = waitpid(p->pids[job], &status, 0);
    while (got < 0 && errno == EINTR);
    p->pids[job] = 0;
    return status;
}

/* The pipe of the worker doing item ended before its result: the worker
 * has died on it (it does its items in order, and every result before
 * this one arrived whole). */
static void worker_lost(struct pool *p, uint64_t item)
{
    const struct pool_work *w = p->w;
    const unsigned job = (unsigned)(item % p->jobs);
    const pid_t pid = p->pids[job];
    char what[1200], how[100];
    w->describe(w->worker, item, what, sizeof(what));
    if (pid > 0)
        kill(pid, SIGKILL); /* it closed its pipe: it is ending anyway */
    const int status = reap(p, job);
    describe_end(status, how, sizeof(how));
    before_message(p);
    if (!WIFSIGNALED(status))
        cli_die(w->program,
                "worker %u of %u (pid %d) %s while on %s (its message above "
                "says why); %s",
                job + 1, p->jobs, (int)pid, how, what, w->aftermath);
    cli_die(w->program,
            "worker %u of %u (pid %d) %s while on %s; %s. Run again (with "
            "fewer --jobs if memory ran out); if a worker dies on the same "
            "sample again, that file crashes the decoder: move it aside",
            job + 1, p->jobs, (int)pid, how, what, w->aftermath);
}

/* Reads size bytes; false when the pipe ends first. */
static bool read_all(int fd, void *data, size_t size)
{
    char *at = data;
    while (size > 0) {
        const ssize_t n = read(fd, at, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        at += n;
        size -= (size_t)n;
    }
    return true;
}

static void make_room(struct pool *p, size_t size)
{
    if (p->buffer && size <= p->capacity)
        return;
    char *bigger = realloc(p->buffer, size);
    if (!bigger) {
        before_message(p);
        cli_die(p->w->program,
                "out of memory for a result of %zu bytes; try fewer --jobs",
                size);
    }
    p->buffer = bigger;
    p->capacity = size;
}

/* Only a bug could send anything else: the workers are ours. */
static void check_header(const struct pool *p, uint64_t item,
                         const struct wire_header *h)
{
    if (h->item == item && h->name_size > 0 && h->reason_size > 0 &&
        h->size <= SIZE_MAX - h->name_size - h->reason_size)
        return;
    before_message(p);
    cli_die(p->w->program,
            "worker %u sent a damaged result for item %" PRIu64
            " (a bug: please report it)",
            (unsigned)(item % p->jobs) + 1, item);
}

/* The result of item, from its worker's pipe, into *r. */
static void receive(struct pool *p, uint64_t item, struct pool_result *r)
{
    const int fd = p->fds[item % p->jobs];
    struct wire_header h;
    if (!read_all(fd, &h, sizeof(h)))
        worker_lost(p, item);
    check_header(p, item, &h);
    const size_t text = (size_t)h.name_size + h.reason_size;
    make_room(p, text + (size_t)h.size);
    if (!read_all(fd, p->buffer, text + (size_t)h.size))
        worker_lost(p, item);
    /* The strings' ends, which the worker sent with them. */
    p->buffer[h.name_size - 1] = '\0';
    p->buffer[text - 1] = '\0';
    *r = (struct pool_result){.status = h.status,
                              .kind = h.kind,
                              .label = h.label,
                              .name = p->buffer,
                              .reason = p->buffer + h.name_size,
                              .data = p->buffer + text,
                              .size = (size_t)h.size};
}

/* Once every result is taken: each worker must have ended well, or
 * something went wrong after its last result, and the run fails all the
 * same. */
static void finish_workers(struct pool *p)
{
    for (unsigned job = 0; job < p->jobs; job++) {
        close(p->fds[job]);
        const pid_t pid = p->pids[job];
        const int status = reap(p, job);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
            continue;
        char how[100];
        describe_end(status, how, sizeof(how));
        before_message(p);
        cli_die(p->w->program,
                "worker %u of %u (pid %d) %s after its last sample; %s. Run "
                "again",
                job + 1, p->jobs, (int)pid, how, p->w->aftermath);
    }
}

/* At exit, when the caller ends the run early (cli_die() from take(), a
 * lost worker): the workers still running are killed and reaped before
 * the caller has gone. Left to PR_SET_PDEATHSIG they died only after it,
 * and what they hold open meanwhile, the pack file the caller was
 * writing (inherited at fork), kept its disk space taken after the tool
 * had exited: a script that freed space or retried at once found the
 * disk still full. */
static void end_running_workers(void)
{
    struct pool *p = running_pool;
    running_pool = NULL;
    for (unsigned job = 0; p && job < p->jobs; job++)
        if (p->pids[job] > 0) {
            kill(p->pids[job], SIGKILL);
            (void)reap(p, job);
        }
}

static void run_in_workers(const struct pool_work *w, unsigned jobs)
{
    static bool ended_at_exit;
    struct pool p = {.w = w, .jobs = jobs};
    p.pids = calloc(jobs, sizeof(*p.pids));
    p.fds = calloc(jobs, sizeof(*p.fds));
    if (!p.pids || !p.fds)
        cli_die(w->program, "out of memory for %u workers", jobs);
    if (!ended_at_exit)
        ended_at_exit = atexit(end_running_workers) == 0;
    running_pool = &p;
    fflush(NULL); /* a worker must not write out our buffers again */
    for (unsigned job = 0; job < jobs; job++)
        start_worker(&p, job);
    for (uint64_t item = 0; item < w->items; item++) {
        struct pool_result r;
        receive(&p, item, &r);
        w->take(w->caller, item, &r);
    }
    finish_workers(&p);
    running_pool = NULL;
    free(p.pids);
    free(p.fds);
    free(p.buffer);
}

static void run_here(const struct pool_work *w)
{
    w->start(w->worker, false);
    for (uint64_t item = 0; item < w->items; item++) {
        struct pool_result r = {.name = "", .reason = ""};
        w->work(w->worker, item, &r);
        w->take(w->caller, item, &r);
    }
    w->stop(w->worker);
}

void pool_run(const struct pool_work *w)
{
    const unsigned jobs = w->items < w->jobs ? (unsigned)w->items : w->jobs;
    if (jobs > 1)
        run_in_workers(w, jobs);
    else
        run_here(w);
}
