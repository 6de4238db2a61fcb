/*
 * tools/pack-progress.c - ringfeed-pack's progress line and list of bad
 * samples; see pack-progress.h.
 */
#include "pack-progress.h"

#include <inttypes.h>
#include <unistd.h>

#include "cli.h"

#define PROGRESS_BAR 30 /* characters of the bar */

void progress_start(struct progress *p, int wanted, const char *what,
                    uint64_t total)
{
    p->on_terminal = isatty(STDERR_FILENO);
    p->shown = cli_progress_shown(wanted);
    p->what = what;
    p->total = total;
    p->start = cli_now_s();
    p->drawn = 0;
    p->on_screen = false;
}

void progress_show(struct progress *p, uint64_t done)
{
    const double now = cli_now_s();
    if (!p->shown ||
        (done < p->total && now - p->drawn < CLI_PROGRESS_INTERVAL_S))
        return;
    p->drawn = now;
    p->on_screen = true;
    char bar[PROGRESS_BAR + 1];
    const uint64_t filled = p->total ? done * PROGRESS_BAR / p->total : 0;
    for (uint64_t i = 0; i < PROGRESS_BAR; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[PROGRESS_BAR] = '\0';
    const double rate = cli_per_second((double)done, now - p->start);
    fprintf(stderr,
            "\r%s [%s] %3.0f%% %" PRIu64 "/%" PRIu64 ", %.0f/s, %.0f s "
            "left ",
            p->what, bar,
            p->total ? 100.0 * (double)done / (double)p->total : 100.0, done,
            p->total, rate, rate > 0 ? (double)(p->total - done) / rate : 0.0);
}

/* Takes the progress line away before other output, or ends it; once,
 * so that a log gets no empty lines. */
void progress_clear(struct progress *p)
{
    if (p->shown && p->on_screen)
        cli_progress_clear(p->on_terminal);
    p->on_screen = false;
}

void report_bad(struct bad_samples *b, struct progress *p, const char *reason)
{
    if (b->count++ >= MAX_BAD_LISTED)
        return;
    progress_clear(p);
    cli_print_line(b->out, "%s%s", b->prefix, reason);
    fflush(b->out);
}
