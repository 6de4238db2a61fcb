/*
 * tools/bench-report.c - ringfeed-bench's summary and --json report; see
 * bench-report.h.
 */
#include "bench-report.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* Producers whose busy share fits in rf_stats. */
#define STATS_MAX_PRODUCERS 64

/* Producers whose busy time rf_stats keeps. */
static uint32_t producers_counted(const rf_stats *stats)
{
    return stats->producers < STATS_MAX_PRODUCERS ? stats->producers
                                                  : STATS_MAX_PRODUCERS;
}

static double share_of_run(uint64_t ns, const struct bench_run *run)
{
    return cli_per_second((double)ns * 1e-9, run->elapsed_s);
}

/* Producer p's busy share of the timed run: its busy time less what it
 * had when the open returned (the producers start during the open and
 * fill the ring while it waits for them: counted against the run, a
 * short run showed "producer busy 186.2%"). A replacement adds to the
 * same count. A batch's time is counted when it is done, so one begun
 * before the run counts whole in it: a producer busy all the time shows
 * a little over 1 in a run of few batches (the summary says 100%). */
static double busy_share(uint32_t p, const struct bench_run *run)
{
    const uint64_t end = run->stats.producer_busy_ns[p];
    const uint64_t before = run->opened.producer_busy_ns[p];
    return share_of_run(end > before ? end - before : 0, run);
}

static void print_busy_shares(const struct bench_run *run)
{
    const uint32_t count = producers_counted(&run->stats);
    printf("  producer busy");
    for (uint32_t p = 0; p < count; p++) {
        /* Ten to a line keeps 64 producers within 80 columns. */
        if (p > 0 && p % 10 == 0)
            printf("\n               ");
        const double share = busy_share(p, run);
        printf(" %5.1f%%", 100 * (share < 1.0 ? share : 1.0));
    }
    putchar('\n');
}

static void print_summary(const struct bench_options *o,
                          const struct bench_run *run)
{
    const rf_stats *s = &run->stats;
    const double secs = run->elapsed_s;
    char layout[16], source[32];
    printf(
        "%" PRIu64 " sample%s in %" PRIu64 " batch%s of %" PRId64 " (%" PRId64
        "x%" PRId64 "x%" PRId64 " %s, %s) in %.3f s\n",
        s->samples, s->samples == 1 ? "" : "s", s->batches,
        s->batches == 1 ? "" : "es", o->batch, o->height, o->width, o->channels,
        bench_choice_name(RF_PARAM_LAYOUT, o->layout, layout, sizeof(layout)),
        o->source == RF_SOURCE_PATH
            ? o->path
            : bench_choice_name(RF_PARAM_SOURCE, o->source, source,
                                sizeof(source)),
        secs);
    printf("  startup       %.3f s\n", run->startup_s);
    printf("  producers     %" PRIu32 "\n", s->producers);
    printf("  cpu budget    %s\n", run->cpu_budget);
    printf("  slots         %" PRIu32 "\n", s->slots);
    printf("  throughput    %.0f samples/s, %.1f MB/s, %.1f batches/s\n",
           cli_per_second((double)s->samples, secs),
           cli_per_second((double)s->bytes / 1e6, secs),
           cli_per_second((double)s->batches, secs));
    printf("  consumer      waited %.1f%% of the time\n",
           100 * share_of_run(s->wait_ns, run));
    print_busy_shares(run);
    if (s->failed_samples == 0)
        return;
    printf("  skipped       %" PRIu64 " sample%s (--on-error skip; %" PRIu64
           " distinct, a file counted once per epoch it failed in); the "
           "first:\n",
           s->failed_samples, s->failed_samples == 1 ? "" : "s",
           run->failed_distinct);
    for (size_t i = 0; i < run->failures_listed; i++) {
        char text[sizeof(run->failures[i].message) + 256]; /* flags grow */
        bench_user_terms(run->failures[i].message, text, sizeof(text));
        cli_print_line(stdout, "    epoch %" PRIu64 ": %s",
                       run->failures[i].epoch, text);
    }
}

/* Writes "key": with the comma that JSON needs before every key but the
 * first. */
static void json_key(bool *first, const char *key)
{
    printf("%s\"%s\": ", *first ? "" : ", ", key);
    *first = false;
}

static void json_u64(bool *first, const char *key, uint64_t value)
{
    json_key(first, key);
    printf("%" PRIu64, value);
}

static void json_f64(bool *first, const char *key, double value)
{
    json_key(first, key);
    printf("%.6g", value);
}

static void json_bool(bool *first, const char *key, bool value)
{
    json_key(first, key);
    fputs(value ? "true" : "false", stdout);
}

/* Only for names from the library's table, which need no escaping. */
static void json_name(bool *first, const char *key, const char *value)
{
    json_key(first, key);
    printf("\"%s\"", value);
}

/* A string value with JSON's escapes for quotes, backslashes and
 * control characters (a cgroup path may hold any byte). */
static void json_text(bool *first, const char *key, const char *value)
{
    json_key(first, key);
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 0x20)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

static void json_busy_shares(bool *first, const struct bench_run *run)
{
    const uint32_t count = producers_counted(&run->stats);
    json_key(first, "producer_busy");
    putchar('[');
    for (uint32_t p = 0; p < count; p++)
        printf("%s%.6g", p > 0 ? ", " : "", busy_share(p, run));
    putchar(']');
}

static void json_verify_counts(bool *first, const struct verifier *v)
{
    struct verify_counts c;
    verifier_counts(v, &c);
    json_u64(first, "verified", c.verified);
    json_u64(first, "missing", c.missing);
    json_u64(first, "duplicated", c.duplicated);
    json_u64(first, "corrupt", c.corrupt);
}

static void print_json(const struct bench_options *o,
                       const struct bench_run *run, const struct verifier *v,
                       uint64_t errors)
{
    const rf_stats *s = &run->stats;
    const double secs = run->elapsed_s;
    char layout[16], source[32];
    bool first = true;
    putchar('{');
    json_u64(&first, "samples", s->samples);
    json_f64(&first, "seconds", secs);
    json_f64(&first, "samples_per_s", cli_per_second((double)s->samples, secs));
    json_f64(&first, "bytes_per_s", cli_per_second((double)s->bytes, secs));
    json_f64(&first, "batches_per_s", cli_per_second((double)s->batches, secs));
    json_u64(&first, "producers", s->producers);
    json_text(&first, "cpu_budget", run->cpu_budget);
    json_u64(&first, "slots", s->slots);
    json_u64(&first, "batches", s->batches);
    json_u64(&first, "errors", errors);
    json_u64(&first, "skipped", s->failed_samples);
    json_u64(&first, "skipped_distinct", run->failed_distinct);
    json_f64(&first, "wait_share", share_of_run(s->wait_ns, run));
    json_busy_shares(&first, run);
    json_f64(&first, "startup_s", run->startup_s);
    json_u64(&first, "batch", (uint64_t)o->batch);
    json_u64(&first, "height", (uint64_t)o->height);
    json_u64(&first, "width", (uint64_t)o->width);
    if (o->height == o->width) /* as before HxW: for the readers of "size" */
        json_u64(&first, "size", (uint64_t)o->height);
    json_u64(&first, "channels", (uint64_t)o->channels);
    json_name(
        &first, "layout",
        bench_choice_name(RF_PARAM_LAYOUT, o->layout, layout, sizeof(layout)));
    json_name(
        &first, "source",
        bench_choice_name(RF_PARAM_SOURCE, o->source, source, sizeof(source)));
    json_name(&first, "start", o->fork_mode ? "fork" : "spawn");
    json_bool(&first, "dct_scaling", !o->full_scale);
    json_bool(&first, "ordered", !o->unordered);
    if (v)
        json_verify_counts(&first, v);
    puts("}");
}

int bench_report(const struct bench_options *o, const struct bench_run *run,
                 struct verifier *verifier)
{
    uint64_t errors = run->error < 0;
    /* A run cut short leaves epochs unfinished: not worth a verdict. */
    if (verifier && run->error == 0) {
        verifier_finish(verifier);
        errors += verifier_report(verifier, !o->json);
    }
    if (o->json)
        print_json(o, run, run->error == 0 ? verifier : NULL, errors);
    else
        print_summary(o, run);
    return errors > 0 ? EXIT_RUN_FAILED : EXIT_SUCCESS;
}
