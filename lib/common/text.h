/*
 * text.h - bounded text for error details and messages: a printf that
 * cannot overflow its buffer, and a copy that shortens long text in the
 * middle. Depends on nothing but libc.
 */
#ifndef RF_COMMON_TEXT_H
#define RF_COMMON_TEXT_H

#include <stddef.h>

#define RF__DETAIL 1024 /* bytes of detail text kept per object */

/* Room for "sample N (file)" in messages: a slot's error text has 504
 * bytes, and the reason after it must fit too. */
#define RF__SAMPLE_NAME_MAX 240

/* printf into a fixed buffer, always terminated, truncation is fine. */
void rf__format(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Copies text into out (len bytes, always terminated): whole when it
 * fits, else its start and its end around "...", so that a long path
 * keeps its beginning and its file name. */
void rf__copy_elided(char *out, size_t len, const char *text);

#endif /* RF_COMMON_TEXT_H */
