/*
 * ringfeed-bench - measures how fast a ringfeed loader hands out batches
 * and, with --verify, checks every pixel, label and sample index received.
 * It uses the public API only, as a training loop would, so what it
 * measures is what a user gets.
 *
 *     ringfeed-bench --producers 4 --batch 64 --epochs 2 --verify
 *
 * This file runs the loader and times it; bench-options.c reads the
 * command line, bench-verify.c checks the batches, bench-report.c prints
 * the figures, and bench-gpu.c (--gpu) feeds a GPU.
 *
 * Exit status: 0 success, 1 the run or the verification failed, 2 bad
 * usage.
 */
#include <ringfeed.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench-options.h"
#include "bench-report.h"
#include "bench-verify.h"
#include "cli.h"
#ifdef RF_BENCH_GPU
#include "bench-gpu.h"
#endif

/* A library error, with its advice in this tool's flags. An RF_E_* code
 * says what kind of failure it was, and goes before the detail, which
 * says where; for a -errno code the library's detail is a sentence of
 * its own that gives the cause (with the system's reason where a call
 * failed), and the errno's name would mislead ("No such file or
 * directory" for a class folder without images, which exists). So for
 * RF_E_CORRUPT_SAMPLE from rf_loader_open() (opening): no sample has
 * been read yet, and it is the dataset that does not open (a file that
 * is not a pack, a damaged header or index), which the detail says
 * ("cannot open dataset '...': ... not a ringfeed packed file"); the
 * code's description, of a sample, would mislead. */
static void print_failure(int rc, const char *detail, bool opening)
{
    char text[2048];
    if (!detail || !*detail) {
        cli_print_line(stderr, PROGRAM ": %s", rf_strerror(rc));
        return;
    }
    bench_user_terms(detail, text, sizeof(text));
    /* the RF_E_* codes start at RF_E_ABI, downwards; a helper that cannot
     * be run is said with its own advice, which the code's text would
     * give again (as "set RINGFEED_PRODUCER" where it is set) */
    if (rc > RF_E_ABI || (opening && rc == RF_E_CORRUPT_SAMPLE) ||
        (rc == RF_E_NO_PRODUCER_BINARY && strstr(detail, "RINGFEED_PRODUCER")))
        cli_print_line(stderr, PROGRAM ": %s", text);
    else
        cli_print_line(stderr, PROGRAM ": %s: %s", rf_strerror(rc), text);
}

struct progress {
    bool shown;
    double started;
    double last_drawn;
    int width; /* characters on screen, to erase them at the end */
};

static void progress_erase(const struct progress *p)
{
    if (p->shown && p->width > 0)
        fprintf(stderr, "\r%*s\r", p->width, "");
}

/* The loader's messages (more producers than CPUs, a producer replaced, a
 * long wait), in this tool's flags as its errors are, on a line of their
 * own: the progress line, if drawn, is taken away first and drawn again
 * at its next update. */
static void print_message(void *user, const char *message)
{
    struct progress *progress = user;
    char text[2048];
    progress_erase(progress);
    progress->width = 0;
    bench_user_terms(message, text, sizeof(text));
    cli_print_line(stderr, PROGRAM ": %s", text);
}

static int start_loader(const rf_config *cfg, rf_loader **loader,
                        struct bench_run *run)
{
    char *detail = NULL;
    const double start = cli_now_s();
    const int rc = rf_loader_open(loader, cfg, &detail);
    run->opened_at = cli_now_s();
    run->startup_s = run->opened_at - start;
    if (rc < 0)
        print_failure(rc, detail, true);
    else /* the producers' busy time so far is the open's, not the run's */
        (void)rf_loader_stats(*loader, &run->opened);
    free(detail);
    return rc < 0 ? EXIT_RUN_FAILED : EXIT_SUCCESS;
}

/* Returns an exit status: a bad configuration is a usage error. The
 * loader's messages go through print_message(), with progress. */
static int open_loader(const struct bench_options *o, rf_loader **loader,
                       struct bench_run *run, struct progress *progress)
{
    rf_config *cfg = rf_config_create();
    if (!cfg) {
        fprintf(stderr, PROGRAM ": %s\n", rf_strerror(-ENOMEM));
        return EXIT_RUN_FAILED;
    }
    int status = bench_configure(cfg, o) < 0 ? EXIT_USAGE : EXIT_SUCCESS;
    if (status == EXIT_SUCCESS &&
        rf_config_set_message_handler(cfg, print_message, progress) < 0)
        status = EXIT_RUN_FAILED;
    if (status == EXIT_SUCCESS)
        status = start_loader(cfg, loader, run);
    rf_config_free(cfg);
    return status;
}

static void progress_update(struct progress *p, const rf_loader *loader)
{
    const double now = cli_now_s();
    rf_stats stats;
    if (!p->shown || now - p->last_drawn < CLI_PROGRESS_INTERVAL_S ||
        rf_loader_stats(loader, &stats) < 0)
        return;
    p->last_drawn = now;
    const double rate = cli_per_second((double)stats.samples, now - p->started);
    const int printed = fprintf(stderr, "\r%" PRIu64 " batches, %.0f samples/s",
                                stats.batches, rate);
    if (printed - 1 > p->width) /* - 1: the \r takes no room */
        p->width = printed - 1;
}

/* Retries a wait that a signal interrupted, as the API asks. */
static int next_batch(rf_loader *loader, rf_batch *batch)
{
    int rc;
    do
        rc = rf_loader_next(loader, batch);
    while (rc == -EINTR);
    return rc;
}

static int loader_failure(const rf_loader *loader, int rc)
{
    print_failure(rc, rf_loader_error(loader), false);
    return rc;
}

/* Takes every batch there is, verifying each when asked. Returns 0 after
 * the last epoch, or the error that ended the run. */
static int consume_all(rf_loader *loader, struct verifier *verifier,
                       struct progress *progress)
{
    rf_batch batch;
    int rc;
    while ((rc = next_batch(loader, &batch)) > 0) {
        const int verified = verifier ? verify_batch(verifier, &batch) : 0;
        rc = rf_loader_release(loader, &batch);
        if (rc < 0)
            return loader_failure(loader, rc);
        if (verified < 0) /* verify_batch has said why */
            return verified;
        progress_update(progress, loader);
    }
    return rc < 0 ? loader_failure(loader, rc) : 0;
}

static void run_to_end(rf_loader *loader, struct verifier *verifier,
                       const struct bench_options *o, struct bench_run *run,
                       struct progress *progress)
{
    *progress = (struct progress){
        .shown = cli_progress_shown(o->quiet || o->json ? -1 : 0),
        .started = run->opened_at,
        .last_drawn = run->opened_at,
    };
    run->error = consume_all(loader, verifier, progress);
    run->elapsed_s = cli_now_s() - run->opened_at;
    progress_erase(progress);
    *progress = (struct progress){0}; /* nothing on screen any more */
    rf_loader_stats(loader, &run->stats);
    rf_loader_cpu_budget(loader, run->cpu_budget, sizeof(run->cpu_budget));
    const size_t room = sizeof(run->failures) / sizeof(run->failures[0]);
    const uint64_t failed =
        rf_loader_sample_errors(loader, run->failures, room);
    run->failures_listed = failed < room ? (size_t)failed : room;
    run->failed_distinct = failed;
}

/* The GPU consumer takes the loader over and closes it. */
static int run_gpu(const struct bench_options *o, rf_loader **loader)
{
#ifdef RF_BENCH_GPU
    const struct gpu_bench_options g = {
        .device = (int)o->device,
        .depth = (uint32_t)o->depth,
        .step_us = o->step_us,
        .batches = bench_ceil_div((uint64_t)o->samples, (uint64_t)o->batch) *
                   (uint64_t)o->epochs,
        .batch_bytes = (size_t)o->batch * (size_t)o->height * (size_t)o->width *
                       (size_t)o->channels,
        .batch = (uint32_t)o->batch,
    };
    return bench_gpu(loader, &g);
#else
    (void)o; /* check_gpu_options() refused --gpu */
    (void)loader;
    return EXIT_USAGE;
#endif
}

/* Where stdout is fully buffered (not a terminal), what the bench writes
 * on it (--help, the summary or --json's object, --verify's counts) is
 * written whole at the end, by cli_finish_output()'s fflush(), so that a
 * write that fails says why: a write made earlier, when a smaller buffer
 * filled (--help is longer than stdio's 4 KiB), leaves only ferror()
 * set, and /dev/full was reported as "Input/output error". A terminal
 * keeps its line buffering, and its lines their order among stderr's. */
static char stdout_buffer[1 << 16];

int main(int argc, char **argv)
{
    struct bench_options opts;
    struct bench_run run = {0};
    struct verifier *verifier = NULL;
    char *unopened = NULL; /* --verify could not open the dataset */
    rf_loader *loader = NULL;
    struct progress progress = {0}; /* none while the loader opens */
    int status = EXIT_RUN_FAILED;

    if (!isatty(STDOUT_FILENO))
        setvbuf(stdout, stdout_buffer, _IOFBF, sizeof(stdout_buffer));
    bench_parse_options(argc, argv, &opts);
    /* Before the loader opens, so that its set-up is not timed. A dataset
     * that does not open is the loader's to refuse, in the words it uses
     * without --verify; the verifier's own are for one that opens for the
     * loader after all. */
    if (opts.verify && !(verifier = verifier_create(&opts, &unopened)) &&
        !unopened)
        goto out;
    status = open_loader(&opts, &loader, &run, &progress);
    if (status == EXIT_SUCCESS && unopened) {
        cli_print_line(stderr, PROGRAM ": %s", unopened);
        status = EXIT_RUN_FAILED;
    }
    if (status != EXIT_SUCCESS)
        goto out;
    if (opts.gpu) {
        status = run_gpu(&opts, &loader);
        goto out;
    }
    if (verifier)
        verifier_bind(verifier, loader);
    run_to_end(loader, verifier, &opts, &run, &progress);
    status = bench_report(&opts, &run, verifier);
out:
    rf_loader_close(loader);
    verifier_free(verifier);
    free(unopened);
    return cli_finish_output(PROGRAM, status);
}
