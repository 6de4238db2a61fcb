/*
 * tools/bench/bench-channel-report.c - bench-channel's report: the header
 * lines (mode, CPUs, clock), each mode's runs repeated --repeat times with
 * a line per run, the medians across runs, and the one JSON object that
 * --json adds as the last line (tools/bench/bench-transport.sh reads it,
 * so its field names are an interface).
 */
#include "config.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench-channel.h"

static int cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile (p in 0..1) of v[n]; sorts v. 0 when n == 0. */
uint64_t bc_percentile(uint64_t *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof(*v), cmp_u64);
    size_t rank = (size_t)(p * (double)n + 0.999999);
    return v[rank == 0 ? 0 : rank - 1];
}

/* Medians across runs, one figure at a time. */
static uint64_t median_of(const uint64_t *v, size_t n)
{
    uint64_t *copy = malloc(n * sizeof(*copy));
    if (!copy)
        return 0;
    memcpy(copy, v, n * sizeof(*copy));
    const uint64_t m = bc_percentile(copy, n, 0.5);
    free(copy);
    return m;
}

void bc_print_header(const struct opts *o, const struct cpus *c,
                     uint64_t clock_ns)
{
    printf("bench-channel: %s, %" PRIu64 " %s x %" PRIu64 " runs, ",
           bc_mode_names[o->mode], o->count,
           o->mode == MODE_THROUGHPUT ? "handles" : "round trips", o->repeat);
    if (o->mode == MODE_PIPE)
        printf("one byte each way over a pair of pipes\n");
    else
        printf("rings of %" PRIu64 " entries\n", o->entries);
    if (c->parent >= 0)
        printf("cpus: parent pinned to CPU %d, child to CPU %d (%d "
               "available)\n",
               c->parent, c->child, c->available);
    else
        printf("cpus: not pinned: only %d CPU available, so the sides take "
               "turns and the figures mean little\n",
               c->available);
    printf("clock: clock_gettime(CLOCK_MONOTONIC), %" PRIu64 " ns per read\n",
           clock_ns);
}

static void json_common(const struct opts *o, const struct cpus *c,
                        uint64_t clock_ns)
{
    printf("{\"mode\":\"%s\",\"count\":%" PRIu64 ",\"repeat\":%" PRIu64
           ",\"entries\":%" PRIu64 ",\"cpus\":[%d,%d],\"cpus_available\":%d,"
           "\"clock_read_ns\":%" PRIu64,
           bc_mode_names[o->mode], o->count, o->repeat, o->entries, c->parent,
           c->child, c->available, clock_ns);
}

int bc_bench_throughput(struct channel *ch, const struct opts *o,
                        const struct cpus *c, uint64_t clock_ns)
{
    uint64_t *rates = calloc(o->repeat, sizeof(*rates));
    uint64_t errors = 0;
    int rc = 0;
    if (!rates) {
        perror("bench-channel: calloc");
        rc = 2;
    }
    for (uint64_t r = 0; rc == 0 && r < o->repeat; r++) {
        struct throughput_run run, *t = &run;
        if (bc_throughput_run(ch, o, c, t) != 0) {
            rc = 1;
            break;
        }
        rates[r] = t->per_s;
        errors += t->errors;
        printf("  run %" PRIu64 ": %.1f M handles/s (%.3f s; push retries "
               "%.2f, empty polls %.2f per handle; %" PRIu64 " errors)\n",
               r + 1, (double)t->per_s / 1e6, t->seconds, t->push_retries,
               t->empty_polls, t->errors);
        fflush(stdout);
    }
    if (rc == 0) {
        const uint64_t med = median_of(rates, o->repeat);
        printf("throughput: %.1f M handles/s (median of %" PRIu64 ")\n",
               (double)med / 1e6, o->repeat);
        if (o->json) {
            json_common(o, c, clock_ns);
            printf(",\"runs_handles_per_s\":[");
            for (uint64_t r = 0; r < o->repeat; r++)
                printf("%s%" PRIu64, r ? "," : "", rates[r]);
            printf("],\"handles_per_s\":%" PRIu64 ",\"errors\":%" PRIu64 "}\n",
                   med, errors);
        }
        rc = errors ? 1 : 0;
    }
    free(rates);
    return rc;
}

/* The across-run medians of each pingpong figure. */
struct pingpong_summary {
    uint64_t median_ns, p99_ns, block_median_ns, block_p99_ns;
    uint64_t max_ns; /* the worst trip of all runs: preemption shows here */
    double parent_sleeps, child_sleeps;
    uint64_t errors;
};

/* Field f (in the order of struct pingpong_summary) of one run. */
static uint64_t run_figure(const struct pingpong_run *p, int f)
{
    switch (f) {
    case 0:
        return p->median_ns;
    case 1:
        return p->p99_ns;
    case 2:
        return p->block_median_ns;
    default:
        return p->block_p99_ns;
    }
}

static void summarise(const struct pingpong_run *runs, uint64_t n,
                      struct pingpong_summary *s)
{
    uint64_t *dst[] = {&s->median_ns, &s->p99_ns, &s->block_median_ns,
                       &s->block_p99_ns};
    uint64_t *v = calloc(n, sizeof(*v));
    for (int f = 0; v && f < 4; f++) {
        for (uint64_t r = 0; r < n; r++)
            v[r] = run_figure(&runs[r], f);
        *dst[f] = bc_percentile(v, n, 0.5);
    }
    free(v);
    for (uint64_t r = 0; r < n; r++) {
        s->parent_sleeps += runs[r].parent_sleeps / (double)n;
        s->child_sleeps += runs[r].child_sleeps / (double)n;
        s->errors += runs[r].errors;
        if (runs[r].max_ns > s->max_ns)
            s->max_ns = runs[r].max_ns;
    }
}

static void print_pingpong_run(const struct opts *o, uint64_t r,
                               const struct pingpong_run *p)
{
    printf("  run %" PRIu64 ": median %" PRIu64 " ns, p99 %" PRIu64
           " ns, max %" PRIu64 " ns; blocks of %" PRIu64 ": median %" PRIu64
           " ns, p99 %" PRIu64 " ns",
           r + 1, p->median_ns, p->p99_ns, p->max_ns, o->block,
           p->block_median_ns, p->block_p99_ns);
    if (bc_mode_sleeps(o->mode))
        printf("; sleeps per trip: parent %.2f, child %.2f", p->parent_sleeps,
               p->child_sleeps);
    printf("; %" PRIu64 " errors\n", p->errors);
    fflush(stdout);
}

static void print_pingpong_summary(const struct opts *o, const struct cpus *c,
                                   uint64_t clock_ns,
                                   const struct pingpong_summary *s)
{
    printf("%s: round trip median %" PRIu64 " ns, p99 %" PRIu64
           " ns (each trip timed, median of %" PRIu64 " runs)\n",
           bc_mode_names[o->mode], s->median_ns, s->p99_ns, o->repeat);
    printf("  block means (no clock read inside): median %" PRIu64
           " ns, p99 %" PRIu64 " ns; worst single trip %" PRIu64 " ns\n",
           s->block_median_ns, s->block_p99_ns, s->max_ns);
    if (bc_mode_sleeps(o->mode))
        printf("  voluntary context switches per round trip: parent %.2f, "
               "child %.2f (about 1 each: both really sleep)\n",
               s->parent_sleeps, s->child_sleeps);
    if (!o->json)
        return;
    json_common(o, c, clock_ns);
    printf(",\"rtt_median_ns\":%" PRIu64 ",\"rtt_p99_ns\":%" PRIu64
           ",\"rtt_max_ns\":%" PRIu64 ",\"block_median_ns\":%" PRIu64
           ",\"block_p99_ns\":%" PRIu64
           ",\"parent_sleeps_per_trip\":%.3f,\"child_sleeps_per_trip\":%.3f"
           ",\"errors\":%" PRIu64 "}\n",
           s->median_ns, s->p99_ns, s->max_ns, s->block_median_ns,
           s->block_p99_ns, s->parent_sleeps, s->child_sleeps, s->errors);
}

int bc_bench_pingpong(struct channel *ch, const struct opts *o,
                      const struct cpus *c, uint64_t clock_ns)
{
    struct pingpong_run *runs = calloc(o->repeat, sizeof(*runs));
    struct pingpong_summary s = {0};
    if (!runs) {
        perror("bench-channel: calloc");
        return 2;
    }
    for (uint64_t r = 0; r < o->repeat; r++) {
        if (bc_pingpong_run(ch, o, c, &runs[r]) != 0) {
            free(runs);
            return 1;
        }
        print_pingpong_run(o, r, &runs[r]);
    }
    summarise(runs, o->repeat, &s);
    print_pingpong_summary(o, c, clock_ns, &s);
    free(runs);
    return s.errors ? 1 : 0;
}
