/*
 * tools/bench/bench-channel-run.c - one run of bench-channel: fresh rings
 * (or pipes), a forked child pinned to its CPU that plays its side and
 * exits, the parent's side under a time limit, the child reaped (killed
 * first when the parent gave up on it), and what both sides saw turned
 * into the figures of that run. Repeating runs and reporting them is
 * bench-channel-report.c's.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench-channel.h"

/* The child's whole life: pinned to its own CPU, it plays its side of the
 * mode and exits; what it saw is in the shared report. */
static void child_main(struct channel *ch, const struct opts *o,
                       const struct cpus *c, pid_t parent)
{
    /* Never outlive a parent that crashed or was killed mid-run. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(3);
    if (c->child >= 0 && bc_pin_to(c->child) != 0)
        perror("bench-channel: sched_setaffinity (child)");
    bc_pipes_keep(ch, CHILD);
    if (o->mode == MODE_THROUGHPUT)
        bc_pop_all(ch, o);
    else
        bc_pong_all(ch, o);
    _exit(0);
}

/* Reaps the child; kills it first when the parent gave up on it. Returns
 * 0 when it ran to the end. */
static int reap(pid_t pid, bool gave_up)
{
    int status;
    if (gave_up)
        kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            perror("bench-channel: waitpid");
            return -1;
        }
    }
    if (gave_up)
        return -1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench-channel: child ended with status 0x%x\n",
                (unsigned)status);
        return -1;
    }
    return 0;
}

static void explain_stop(void)
{
    if (bc_stop == SIGALRM)
        fputs("bench-channel: run timed out: the other side never "
              "answered (a lost wake-up or a lost handle?)\n",
              stderr);
    else if (bc_stop == SIGCHLD)
        fputs("bench-channel: the child died mid-run\n", stderr);
}

/* Runs the parent's part against a fresh child. role() returns 0 or -1
 * (gave up). Returns 0 when both sides finished. */
static int run_once(struct channel *ch, const struct opts *o,
                    const struct cpus *c,
                    int (*role)(struct channel *, const struct opts *, void *),
                    void *arg)
{
    bc_channel_reset(ch);
    if (o->mode == MODE_PIPE && bc_pipes_open(ch) != 0)
        return -1;
    bc_stop = 0;
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
        perror("bench-channel: fork");
        bc_pipes_close(ch);
        return -1;
    }
    if (pid == 0)
        child_main(ch, o, c, parent);
    bc_pipes_keep(ch, PARENT);
    alarm((unsigned)o->timeout);
    const int rc = role(ch, o, arg);
    alarm(0);
    if (rc != 0)
        explain_stop();
    const int reaped = reap(pid, rc != 0);
    bc_pipes_close(ch);
    return reaped;
}

static int throughput_role(struct channel *ch, const struct opts *o, void *arg)
{
    uint64_t *retries = arg;
    return bc_push_all(ch, o, retries);
}

struct ping_arg {
    struct samples s;
    uint64_t bad, switches;
};

static int pingpong_role(struct channel *ch, const struct opts *o, void *arg)
{
    struct ping_arg *a = arg;
    return bc_ping_all(ch, o, &a->s, &a->bad, &a->switches);
}

int bc_throughput_run(struct channel *ch, const struct opts *o,
                      const struct cpus *c, struct throughput_run *out)
{
    uint64_t retries = 0;
    if (run_once(ch, o, c, throughput_role, &retries) != 0)
        return -1;
    const struct report *rep = &ch->sh->report;
    const uint64_t ns = rep->t1_ns - rep->t0_ns;
    out->seconds = (double)ns / 1e9;
    out->per_s = ns ? (uint64_t)((double)o->count / out->seconds) : 0;
    out->push_retries = (double)retries / (double)o->count;
    out->empty_polls = (double)rep->polls / (double)o->count;
    out->errors = bc_report_errors(rep);
    return 0;
}

int bc_pingpong_run(struct channel *ch, const struct opts *o,
                    const struct cpus *c, struct pingpong_run *out)
{
    struct ping_arg a = {0};
    a.s.each = calloc(o->count, sizeof(uint64_t));
    a.s.block = calloc(o->count / o->block + 1, sizeof(uint64_t));
    int rc = -1;
    if (!a.s.each || !a.s.block)
        perror("bench-channel: calloc");
    else if (run_once(ch, o, c, pingpong_role, &a) == 0)
        rc = 0;
    if (rc == 0) {
        const struct report *rep = &ch->sh->report;
        const double n = (double)o->count;
        out->median_ns = bc_percentile(a.s.each, a.s.n_each, 0.5);
        out->p99_ns = bc_percentile(a.s.each, a.s.n_each, 0.99);
        out->max_ns = bc_percentile(a.s.each, a.s.n_each, 1.0);
        out->block_median_ns = bc_percentile(a.s.block, a.s.n_block, 0.5);
        out->block_p99_ns = bc_percentile(a.s.block, a.s.n_block, 0.99);
        out->parent_sleeps = (double)a.switches / n;
        out->child_sleeps = (double)rep->switches / n;
        out->errors = bc_report_errors(rep) + a.bad;
    }
    free(a.s.each);
    free(a.s.block);
    return rc;
}
