/*
 * tools/pack-progress.h - what ringfeed-pack tells the user while it
 * works: the progress line on stderr, and the samples that failed,
 * listed (the first MAX_BAD_LISTED) and counted.
 */
#ifndef RINGFEED_TOOLS_PACK_PROGRESS_H
#define RINGFEED_TOOLS_PACK_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Bad samples listed one by one; the count covers the rest. */
#define MAX_BAD_LISTED 100

struct progress {
    bool shown, on_terminal;
    bool on_screen; /* a line is drawn and not yet cleared */
    const char *what;
    uint64_t total;
    double start, drawn;
};

/* Starts the line for `total` items of `what` ("packing"); wanted is
 * --progress (1), --quiet (-1) or neither (0: only on a terminal). */
void progress_start(struct progress *p, int wanted, const char *what,
                    uint64_t total);

/* Redraws the line for `done` items, at most every
 * CLI_PROGRESS_INTERVAL_S, and always at the last. */
void progress_show(struct progress *p, uint64_t done);

/* Takes the progress line away before other output, or ends it; once,
 * so that a log gets no empty lines. */
void progress_clear(struct progress *p);

/* Samples that failed: listed (the first MAX_BAD_LISTED), and counted.
 * --verify lists them on stdout, as its result; packing with --skip-bad
 * on stderr, as warnings. */
struct bad_samples {
    FILE *out;
    const char *prefix;
    uint64_t count;
};

/* Lists reason (the first MAX_BAD_LISTED), after taking p's line away,
 * and counts it. */
void report_bad(struct bad_samples *b, struct progress *p, const char *reason);

#endif
