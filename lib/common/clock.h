/*
 * clock.h - the library's one clock: monotonic nanoseconds, for spins,
 * deadlines, time-outs and process tokens. Depends on nothing but libc.
 */
#ifndef RF_COMMON_CLOCK_H
#define RF_COMMON_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds: never goes back, and does not count
 * time before boot, so only differences mean anything. */
uint64_t rf__now_ns(void);

#endif /* RF_COMMON_CLOCK_H */
