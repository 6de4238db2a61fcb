/*
 * clock.c - monotonic nanoseconds; see clock.h.
 */
#include "config.h"

#include "common/clock.h"

#include <time.h>

uint64_t rf__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
