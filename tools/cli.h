/*
 * tools/cli.h - what the command-line tools share: usage and fatal
 * errors, number parsing, the clock, the progress line, and what their
 * worker processes need (the CPUs to use, dying with the parent).
 *
 * Compiled into each tool, not into the library: it is policy for
 * programs (it prints and exits), which a library must never do. Every
 * call that prints takes the program's name, so that each tool's messages
 * start with its own name and nothing here keeps state between calls.
 */
#ifndef RINGFEED_TOOLS_CLI_H
#define RINGFEED_TOOLS_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* The exit statuses every tool's --help promises (0 is success). */
enum { CLI_EXIT_FAILED = 1, CLI_EXIT_USAGE = 2 };

/* A progress line is redrawn at most this often, so that a fast run is
 * not slowed down by its own terminal output. */
#define CLI_PROGRESS_INTERVAL_S 0.2

/* Prints "Try 'PROGRAM --help'." and exits with CLI_EXIT_USAGE, for a
 * tool that has already said what is wrong. */
void cli_usage_failure(const char *program) __attribute__((noreturn));

/* Prints "PROGRAM: message", then the hint above, and exits with
 * CLI_EXIT_USAGE. */
void cli_die_usage(const char *program, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));

/* Prints "PROGRAM: message" and exits with CLI_EXIT_FAILED. */
void cli_die(const char *program, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));

/* All of text as a decimal integer in [min, max]; anything else (nothing,
 * blanks, trailing junk, a sign where none fits, overflow, out of range)
 * is a usage error naming --option. */
uint64_t cli_parse_uint(const char *program, const char *option,
                        const char *text, uint64_t min, uint64_t max);
int64_t cli_parse_int(const char *program, const char *option, const char *text,
                      int64_t min, int64_t max);

/* getopt_long() with -h as the only short option, for the tools whose
 * long options all map to distinct codes: returns the next code, or -1
 * at the end. A usage error names what is wrong: an unknown option, an
 * option without its value, a value given to an option that takes none.
 * The next word is never taken as a value when it starts with "--"
 * ("--source --quiet" lacks its value; "--source=--odd" still gives
 * one). */
int cli_next_option(const char *program, int argc, char **argv,
                    const struct option *long_options);

/* For a tool about to end with status: stdout flushed and checked, so
 * that output lost to a full disk, a closed pipe or /dev/full is not a
 * success. Returns status, or, when stdout could not be written, says
 * "PROGRAM: cannot write to standard output: <reason>" on stderr and returns
 * CLI_EXIT_FAILED. Each tool's main() returns through it, and --help
 * exits through it. */
int cli_finish_output(const char *program, int status);

/* The same, with done (when not NULL) added to that message: what the
 * run did all the same, so that a user whose log could not be written
 * learns that only the log was lost ("the pack OUT was written whole").
 * Escaped as any message is. */
int cli_finish_output_noting(const char *program, int status, const char *done);

/* Writes text to out with its control characters escaped: \n, \t, \r,
 * \\ for a backslash, \xNN for the others. Names of files and samples
 * go into messages, and a name holding a newline (or a terminal's escape
 * sequence) must not forge a line of output, or move the cursor. */
void cli_put_escaped(FILE *out, const char *text);

/* printf() to out, escaped as above, then a newline. Every tool's error
 * messages (cli_die() and cli_die_usage()) go through it. */
void cli_print_line(FILE *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Seconds on the monotonic clock, for timing a run. */
double cli_now_s(void);

/* amount / seconds, or 0 for a run too short to time. */
double cli_per_second(double amount, double seconds);

/* Whether to draw a progress line on stderr: always when wanted > 0,
 * never when wanted < 0, and when 0 only if stderr is a terminal (a log
 * file would fill up with redraws). */
bool cli_progress_shown(int wanted);

/* Takes a progress line away before other output, or ends it: erased on
 * a terminal, else ended with a newline so that what follows starts on a
 * line of its own. */
void cli_progress_clear(bool on_terminal);

/* CPUs this process may run on (sched_getaffinity()), at least 1: the
 * default number of workers. */
unsigned cli_cpus_available(void);

/* For a worker just forked from parent: the kernel kills it (SIGKILL)
 * when the parent dies, so that no worker goes on once the run was
 * stopped; and if the parent died before that was set, the worker ends
 * now. Ends the worker with _exit() on failure: a child must not run its
 * parent's exit handlers. */
void cli_stop_with_parent(const char *program, pid_t parent);

#endif
