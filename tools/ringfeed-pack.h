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
#include <stddef.h>
#include <stdint.h>

#include "cli.h"

#define PROGRAM "ringfeed-pack"

enum { EXIT_FAILED = CLI_EXIT_FAILED };

/* The library's decode limits that ringfeed-pack has a flag for (its
 * name with dashes: --max-pixels), in pack_options.decode's order. They
 * apply wherever samples are decoded: --raw, --skip-bad and --verify. */
#define PACK_DECODE_PARAMS 4
extern const rf_param pack_decode_params[PACK_DECODE_PARAMS];

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
    /* The value of each of pack_decode_params: the library's default, or
     * the flag's. */
    int64_t decode[PACK_DECODE_PARAMS];
    /* The first option given that changes how a pack is written, and the
     * first that only --raw samples use, for refusing them where they
     * would have no effect; NULL when none was given. */
    const char *packing_option, *raw_option;
    /* The first decode limit given (--max-pixels ...), or NULL. */
    const char *decode_option;
};

/* A message of the library (a sample's reason, a writer's error) in the
 * tool's terms, into out (len bytes): a parameter it names, as C knows
 * it (RF_PARAM_MAX_PIXELS) or by its keyword (jpeg_warnings), becomes
 * this tool's flag (--max-pixels, --jpeg-warnings), through cli-terms.h.
 * The text up to the end of name, the sample's name in it (NULL or "":
 * none), is copied as it is, so that a file's name is never changed.
 * Returns out. */
const char *pack_user_terms(const char *text, const char *name, char *out,
                            size_t len);

/* Ends the program with a message of the library (NULL: fallback), in
 * the tool's terms as above, through cli_die(). */
void pack_die(const char *message, const char *fallback)
    __attribute__((noreturn));

/* Writes o->source into the pack o->output; returns the exit status (it
 * exits through cli_die() on a failure). */
int pack_build(const struct pack_options *o);

/* Checks o->verify (--verify): every sample decoded whole, the bad ones
 * listed; returns 0 when all are good, else EXIT_FAILED. */
int pack_verify(const struct pack_options *o);

#endif
