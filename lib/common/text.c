/*
 * text.c - bounded formatting and eliding copies for error details; see
 * text.h.
 */
#include "config.h"

#include "common/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void rf__format(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

void rf__copy_elided(char *out, size_t len, const char *text)
{
    if (len == 0)
        return;
    const size_t n = strlen(text);
    if (n < len || len < 16) {
        rf__format(out, len, "%s", text);
        return;
    }
    const size_t tail = (len - 1 - 3) / 2, head = len - 1 - 3 - tail;
    rf__format(out, len, "%.*s...%s", (int)head, text, text + n - tail);
}
