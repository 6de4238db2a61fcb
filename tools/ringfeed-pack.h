/*
 * tools/ringfeed-pack.h - what the files of ringfeed-pack share: its
 * options and the two things it does. ringfeed-pack.c reads the command
 * line; pack-build.c writes a pack and pack-verify.c checks one, both
 * doing the work on each sample through pack-samples.h and telling the
 * user through pack-progress.h.
 */
#ifndef RINGFEED_TOOLS_RINGFEED_PACK_H
#define RINGFEED_TOOLS_RINGFEED_PACK_H

#include <ringfeed.h>

#include <stdbool.h>
#include <stdint.h>

#include "cli.h"

#define PROGRAM "ringfeed-pack"

enum { EXIT_FAILED = CLI_EXIT_FAILED };

struct pack_options {
    const char *source, *output, *verify;
    uint32_t height, width; /* --raw; 0 = keep the JPEG bytes */
    rf_layout layout;
    int level;
    uint64_t dict_size;
    bool skip_bad;
    bool full_scale; /* --raw: RF_PARAM_DCT_SCALING 0 */
    unsigned jobs;   /* worker processes; 1: none, the work is done here */
    int progress;    /* -1 quiet, 0 when stderr is a terminal, 1 always */
    /* The first option given that changes how a pack is written, and the
     * first that only --raw samples use, for refusing them where they
     * would have no effect; NULL when none was given. */
    const char *packing_option, *raw_option;
};

/* Writes o->source into the pack o->output; returns the exit status (it
 * exits through cli_die() on a failure). */
int pack_build(const struct pack_options *o);

/* Checks o->verify (--verify): every sample decoded whole, the bad ones
 * listed; returns 0 when all are good, else EXIT_FAILED. */
int pack_verify(const struct pack_options *o);

#endif
