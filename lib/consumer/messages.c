/*
 * messages.c - the loader's messages to the caller: each event of the run
 * (a producer replaced) goes to the handler set in the configuration,
 * else to the caller's stderr, but only while fd 2 is still the file it
 * was at open; none once the handler has closed the loader. The call
 * that reports keeps its own error detail, whatever the handler's calls
 * left there. Owns nothing; reads the loader's handler and stderr record.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "consumer/loader-internal.h"

/* Remembers what fd 2 is now: the default message handler writes there
 * only while it is still that file. */
void rf__loader_note_stderr(rf_loader *l)
{
    struct stat st;
    l->stderr_open = fstat(STDERR_FILENO, &st) == 0;
    l->stderr_dev = l->stderr_open ? st.st_dev : 0;
    l->stderr_ino = l->stderr_open ? st.st_ino : 0;
}

/* Whether fd 2 is still the stderr the caller had at open, and not a
 * file the caller (or anyone) opened onto 2 since. */
static bool stderr_unchanged(const rf_loader *l)
{
    struct stat st;
    return l->stderr_open && fstat(STDERR_FILENO, &st) == 0 &&
           st.st_dev == l->stderr_dev && st.st_ino == l->stderr_ino;
}

/* Reports one event of the run to the caller's handler, else to the
 * caller's stderr as the default handler does (see
 * rf_config_set_message_handler()); nothing once the handler has closed
 * the loader. */
void rf__loader_report(rf_loader *l, const char *fmt, ...)
{
    if (l->close_pending) /* the handler closed the loader: no more news */
        return;
    char text[RF__MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (l->message_fn) {
        /* A call the handler makes that fails (a refused next(): -EBUSY)
         * leaves its detail for the handler to read; the next() that
         * reports then carries on with its own (a signal's -EINTR comes
         * before a long wait is reported). */
        char detail[sizeof(l->error)];
        memcpy(detail, l->error, sizeof(detail));
        l->message_fn(l->message_user, text);
        memcpy(l->error, detail, sizeof(detail));
    } else if (stderr_unchanged(l)) {
        char line[sizeof(text) + 16];
        const int n = snprintf(line, sizeof(line), "ringfeed: %s\n", text);
        /* One write, so that lines of several loaders do not interleave;
         * a failed one is no reason to disturb the run. */
        const ssize_t w =
            write(STDERR_FILENO, line,
                  n < (int)sizeof(line) ? (size_t)n : sizeof(line) - 1);
        (void)w;
    }
}
