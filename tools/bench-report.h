/*
 * tools/bench-report.h - what ringfeed-bench prints at the end of a run:
 * the summary, or one JSON object (--json), and the exit status that
 * follows from the run and its verification.
 */
#ifndef RINGFEED_TOOLS_BENCH_REPORT_H
#define RINGFEED_TOOLS_BENCH_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include <ringfeed.h>

#include "bench-options.h"
#include "bench-verify.h"

/* One run, as measured by ringfeed-bench.c. */
struct bench_run {
    double startup_s; /* inside rf_loader_open() */
    double opened_at; /* when rf_loader_open() returned */
    double elapsed_s; /* from then until the last batch was released */
    int error;        /* 0, or what ended the run early */
    rf_stats opened;  /* read as rf_loader_open() returned */
    rf_stats stats;   /* read just before close */
    /* --on-error skip: the first failures, as the loader lists them */
    rf_sample_error failures[3];
    size_t failures_listed;
    uint64_t failed_distinct; /* samples that failed, each counted once */
    char cpu_budget[RF_CPU_BUDGET_MAX]; /* rf_loader_cpu_budget()'s line */
};

/* Finishes the verification (verifier may be NULL), prints what the run
 * found and returns the exit status. */
int bench_report(const struct bench_options *o, const struct bench_run *run,
                 struct verifier *verifier);

#endif
