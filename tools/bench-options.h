/*
 * tools/bench-options.h - ringfeed-bench's command line: its options, their
 * ranges and defaults, --help, and the rf_config they make. An option
 * that sets a library parameter takes its range and default from the
 * library's parameter table (rf_param_lookup()), so that --help and the
 * checks follow the library instead of copying it.
 */
#ifndef RINGFEED_TOOLS_BENCH_OPTIONS_H
#define RINGFEED_TOOLS_BENCH_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ringfeed.h>

#include "cli.h"

#define PROGRAM "ringfeed-bench"

enum { EXIT_RUN_FAILED = CLI_EXIT_FAILED, EXIT_USAGE = CLI_EXIT_USAGE };

#define COUNT_OF(array) (sizeof(array) / sizeof((array)[0]))

struct bench_options {
    int64_t producers;
    int64_t batch;
    int64_t slots;
    int64_t epochs;
    int64_t samples;
    int64_t height; /* --size N or HxW */
    int64_t width;
    int64_t channels;
    int64_t classes;
    int64_t spin_ns;
    int64_t max_errors;    /* --on-error skip: RF_PARAM_MAX_ERRORS */
    int64_t max_error_ppm; /* and RF_PARAM_MAX_ERROR_PPM */
    int64_t max_pixels;    /* the decode limits, a PATH or synthetic-jpeg */
    int64_t max_scans;
    int64_t max_decode_memory;
    int64_t resize;           /* --transform eval: RF_PARAM_RESIZE */
    int64_t min_scale_ppm;    /* --transform train: RF_PARAM_MIN_SCALE_PPM */
    int64_t batch_timeout_ms; /* the watch on producers */
    int64_t stall_warning_ms;
    int64_t max_respawns; /* --on-producer-death respawn's limit */
    int64_t respawn_window_s;
    int64_t rank;       /* RF_PARAM_RANK; -1: from the environment */
    int64_t world_size; /* RF_PARAM_WORLD_SIZE; 0: from the environment */
    int64_t device;     /* --gpu: CUDA device */
    int64_t depth;      /* --gpu: device buffers; 0: the library's choice */
    int64_t step_us;    /* --gpu: the stand-in step; -1: 3 uploads */
    uint64_t seed;
    rf_source_kind source;
    const char *path; /* RF_SOURCE_PATH: a folder or packed file */
    rf_transform transform;
    rf_on_error on_error;
    rf_layout layout;
    rf_jpeg_verdict jpeg_warnings;
    rf_on_producer_death on_producer_death;
    bool no_flip; /* --transform train: RF_PARAM_FLIP 0 */
    bool unordered;
    bool fork_mode;
    bool full_scale;
    uint64_t given; /* one bit for each option given: set by bench-options.c,
                      read by bench-option-rules.c */
    bool verify;
    bool gpu;
    bool json;
    bool quiet;
};

/* Fills *o from the command line; prints --help and exits 0, or says
 * what is wrong and exits with EXIT_USAGE. */
void bench_parse_options(int argc, char **argv, struct bench_options *o);

/* Sets cfg up for the run o describes. Returns 0, or -EINVAL after
 * printing the library's reason. */
int bench_configure(rf_config *cfg, const struct bench_options *o);

/* Copies the name that --help and the library's table give `value` of
 * choice parameter `param` (RF_PARAM_LAYOUT, RF_PARAM_SOURCE, ...) into
 * out, e.g. "nchw"; "?" when there is none. Returns out. */
const char *bench_choice_name(rf_param param, int64_t value, char *out,
                              size_t len);

/* a / b, rounded up: batches of b in a samples. */
static inline uint64_t bench_ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

/* The library's message text in the bench's flags (cli_user_terms()),
 * into out (len bytes, always terminated): every message of the
 * library's that the bench prints goes through it. */
void bench_user_terms(const char *text, char *out, size_t len);

#endif
