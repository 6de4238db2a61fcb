/*
 * faults.h - what the fault programs share (test-faults, test-stops,
 * test-deaths, test-producer-start, test-garbage): a small synthetic
 * loader's config, a sleep, a SIGALRM handler that only interrupts, the
 * loader's control segment mapped a second time, a producer stopped so
 * that a test can write its side of the rings, and next() until it stops.
 */
#ifndef RF_TEST_FAULTS_H
#define RF_TEST_FAULTS_H

#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#include "channel/segment.h"
#include "proc.h"
#include "test.h"

/* A loader of synthetic side x side samples, replacements not reported:
 * the shape most tests start from. */
static inline rf_config *small_config(int64_t producers, int64_t samples,
                                      int64_t batch, int64_t side)
{
    return TEST_CONFIG({RF_PARAM_PRODUCERS, producers},
                       {RF_PARAM_SAMPLES, samples},
                       {RF_PARAM_BATCH_SIZE, batch}, {RF_PARAM_HEIGHT, side},
                       {RF_PARAM_WIDTH, side}, {RF_PARAM_QUIET, 1});
}

static inline void sleep_us(long us)
{
    const struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static inline void on_alarm(int sig)
{
    (void)sig; /* only interrupts poll() in rf_loader_next() */
}

/* The control segment of this process's only loader, mapped a second time
 * the way a stray writer could reach it. */
static inline struct rf__segment map_control_segment(void)
{
    struct rf__segment seg = {0};
    seg.header = map_memfd("memfd:ringfeed-control", &seg.control_size);
    seg.layout = *seg.header; /* as attaching takes it */
    return seg;
}

/* Stops the producer so that the test can write its side of the rings. */
static inline int pause_producer(const struct rf__segment *seg)
{
    int pid;
    /* The producer writes its pid once it has attached. */
    while ((pid = (int)atomic_load(&rf__segment_producer(seg, 0)->pid)) == 0)
        sleep_us(100);
    CHECK_EQ(kill(pid, SIGSTOP), 0);
    while (process_state(pid, NULL) != 'T')
        sleep_us(100);
    return pid;
}

static inline int next_until_error(rf_loader *l)
{
    rf_batch b;
    int rc;
    while ((rc = rf_loader_next(l, &b)) == 1)
        CHECK_OK(rf_loader_release(l, &b));
    return rc;
}

#endif /* RF_TEST_FAULTS_H */
