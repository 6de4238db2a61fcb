/*
 * tools/cli-terms.h - the library's messages in a tool's own terms: a
 * parameter named as C knows it (RF_PARAM_ON_ERROR, RF_ON_ERROR_SKIP), or
 * by its keyword (jpeg_warnings), becomes the tool's flag and value
 * ("--on-error skip", "--jpeg-warnings"), so that the advice in a message
 * is what the user of the tool can type.
 */
#ifndef RF_CLI_TERMS_H
#define RF_CLI_TERMS_H

#include <getopt.h>
#include <stddef.h>

#include "ringfeed.h"

/* A parameter whose flag is not its name with dashes ("batch_size" is
 * --batch); the list ends with a NULL param_name. */
struct cli_alias {
    const char *param_name;
    const char *flag;
};

/* Copies text into out (len bytes, always terminated), with each
 * RF_PARAM_NAME that the tool has a flag for (in options, or aliases,
 * which may be NULL) written as "--flag", a value constant right after
 * one written as the value's choice name, and "set --flag to value"
 * written as "use --flag value". A parameter's keyword ("jpeg_warnings",
 * the library's name for it) is written as "--flag" too where it stands
 * as a word of its own (after a space or '(', before a space, a
 * punctuation mark or the end: not inside a path) and has an underscore
 * (a one-word name such as "seed" is an ordinary word as well). Names the
 * tool has no flag for are left as they are. Two parameters with one
 * flag (height and width, both --size), listed one after the other, are
 * said once: "--size 32" for two equal values, "--size 24x32" for two
 * numbers that differ (in the order listed). */
void cli_user_terms(const char *text, const struct option *options,
                    const struct cli_alias *aliases, char *out, size_t len);

/* A library call or field that a message names ("rf_stats.failed_samples"),
 * and what stands for it in a tool's output; a list ends with a NULL
 * c_name. */
struct cli_call {
    const char *c_name;
    const char *tool_term;
};

/* Replaces, in place, each c_name of calls in text (len bytes, always
 * terminated; what does not fit is cut) with its tool_term. */
void cli_replace_calls(char *text, size_t len, const struct cli_call *calls);

/* param's row of the library's table, which a tool builds its flags'
 * ranges, defaults and choices from. Exits with status 1 (cli_die(),
 * naming program) when the library loaded has no such parameter: one
 * older than the tool. */
rf_param_info cli_param_info(const char *program, rf_param param);

#endif
