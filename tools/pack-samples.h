/*
 * tools/pack-samples.h - the work ringfeed-pack does on each sample
 * (read it, decode it whole, decode and compress it), run by --jobs
 * worker processes through work-pool.h, each result handed back to the
 * caller in sample order; and what that work needs to know of its
 * source (the shape of its raw samples).
 */
#ifndef RINGFEED_TOOLS_PACK_SAMPLES_H
#define RINGFEED_TOOLS_PACK_SAMPLES_H

#include <ringfeed.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zstd.h>

#include "ringfeed-pack.h"
#include "work-pool.h"

/* The shape of a source's RF_SAMPLE_ZSTD samples, which the decoder must
 * be configured for; all zero for a folder, or a pack of JPEG samples. */
struct pack_shape {
    uint32_t height, width, channels;
    rf_layout layout;
};

/* ds's stored shape, from rf_dataset_get_info(). */
struct pack_shape pack_shape_of(const rf_dataset *ds);

/* A configuration that decodes a sample whole, and room for its pixels
 * (TASK_READ_DECODABLE, TASK_VERIFY). */
struct whole_decoder {
    rf_config *cfg;
    unsigned char *pixels;
};

/* What is done to each sample. The results go back to the parent in
 * sample order, which writes or lists them: the pack and the list are
 * the same whatever --jobs is. */
enum sample_task {
    TASK_READ,           /* its bytes as they are */
    TASK_READ_DECODABLE, /* its bytes, if it is a JPEG that decodes whole
                            (--skip-bad without --raw) */
    TASK_RAW,            /* a zstd frame of its pixels (--raw) */
    TASK_TRAIN,          /* its pixels, to train a dictionary on */
    TASK_VERIFY,         /* whether it decodes whole (--verify) */
};

/* The state of the process doing the work (a worker, or the tool itself
 * with --jobs 1). What decodes is made by worker_start(), after the fork:
 * a child must not use an rf_config its parent made. The dataset handle
 * may be used on both sides of a fork (each side has its own). */
struct sample_worker {
    enum sample_task task;
    const struct pack_options *o;
    const char *source;
    rf_dataset *ds;
    struct pack_shape shape; /* the source's: all zero, or raw samples */
    /* Item j is sample j * samples / items: every sample when items is
     * the dataset's size, else samples spread over all of it. */
    uint64_t samples, items;
    const ZSTD_CDict *cdict; /* TASK_RAW with a dictionary */
    rf_config *cfg;          /* TASK_RAW, TASK_TRAIN */
    unsigned char *pixels;
    size_t pixel_bytes;
    void *frame;
    size_t frame_capacity;
    ZSTD_CCtx *cctx;
    struct whole_decoder whole; /* TASK_READ_DECODABLE, TASK_VERIFY */
    char name[4200];            /* the sample's name, kept across calls on ds */
    char reason[2048];          /* a failed sample's, likewise */
    /* Run in each worker right after fork(), before any work (NULL:
     * nothing): what the parent alone must do at exit is forgotten. */
    void (*forked)(void);
};

/* Opens the dataset at path, or ends the program saying why. */
rf_dataset *open_dataset(const char *path);

/* The work's state before any task: what every task reads, every sample
 * of ds its items. The caller sets task (and items, cdict, forked). */
struct sample_worker plan_work(const struct pack_options *o, const char *source,
                               rf_dataset *ds);

/* Runs sw's task on its items, in o->jobs workers, and gives each result
 * to take() in item order; clear() takes the caller's progress line away
 * before a message about a worker. */
void run_task(struct sample_worker *sw, const char *aftermath, void *caller,
              void (*take)(void *, uint64_t, const struct pool_result *),
              void (*clear)(void *));

#endif
