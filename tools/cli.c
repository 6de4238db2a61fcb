/*
 * tools/cli.c - the helpers that the command-line tools share; see cli.h.
 * Uses libc only, so that each tool still needs nothing but the public
 * API besides.
 */
#define _GNU_SOURCE /* vasprintf(), sched_getaffinity(), CPU_COUNT() */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

/* Bytes in the valid UTF-8 sequence at c that prints (not U+0080 to
 * U+009F, the C1 controls a terminal obeys); 0 when there is none. */
static int printable_utf8(const unsigned char *c)
{
    int n = c[0] >= 0xC2 && c[0] <= 0xDF   ? 2
            : c[0] >= 0xE0 && c[0] <= 0xEF ? 3
            : c[0] >= 0xF0 && c[0] <= 0xF4 ? 4
                                           : 0;
    if (n == 0 || (c[0] == 0xC2 && c[1] <= 0x9F))
        return 0;
    const unsigned char low = c[0] == 0xE0 ? 0xA0 : c[0] == 0xF0 ? 0x90 : 0x80;
    const unsigned char high = c[0] == 0xED ? 0x9F : c[0] == 0xF4 ? 0x8F : 0xBF;
    if (c[1] < low || c[1] > high)
        return 0;
    for (int k = 2; k < n; k++)
        if (c[k] < 0x80 || c[k] > 0xBF)
            return 0;
    return n;
}

void cli_put_escaped(FILE *out, const char *text)
{
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        const int n = *c >= 0x80 ? printable_utf8(c) : 0;
        if (n > 0) {
            fwrite(c, 1, (size_t)n, out);
            c += n - 1;
        } else if (*c == '\n')
            fputs("\\n", out);
        else if (*c == '\t')
            fputs("\\t", out);
        else if (*c == '\r')
            fputs("\\r", out);
        else if (*c == '\\')
            fputs("\\\\", out);
        else if (*c < 0x20 || *c >= 0x7f) /* controls; above 0x7f here:
                                             not UTF-8, or a C1 control */
            fprintf(out, "\\x%02x", *c);
        else
            fputc(*c, out);
    }
}

/* "PREFIX: " when there is a prefix, the message escaped, then a newline,
 * all put out in one write: formatted whole first, so that what the
 * arguments hold is escaped and the format's own text is not split from
 * it, and gathered in memory, so that two processes writing to one stderr
 * (a tool's workers) never interleave their messages character by
 * character, as an unbuffered stream written a character at a time did.
 * Without memory to gather it in, it goes out a piece at a time, and
 * without memory to format it, its prefix still says whose it is. */
static void vprint_line(FILE *out, const char *prefix, const char *fmt,
                        va_list ap) __attribute__((format(printf, 3, 0)));

static void vprint_line(FILE *out, const char *prefix, const char *fmt,
                        va_list ap)
{
    char *text = NULL;
    if (vasprintf(&text, fmt, ap) < 0)
        text = NULL;
    char *line = NULL;
    size_t length = 0;
    FILE *gathered = open_memstream(&line, &length);
    FILE *to = gathered ? gathered : out; /* else a piece at a time */
    if (prefix)
        fprintf(to, "%s: ", prefix);
    if (text)
        cli_put_escaped(to, text);
    else
        fputs("(no memory for the message)", to);
    fputc('\n', to);
    if (gathered && fclose(gathered) == 0)
        fwrite(line, 1, length, out);
    else if (gathered) /* the line did not fit in memory */
        fprintf(out, "%s%s(no memory for the message)\n", prefix ? prefix : "",
                prefix ? ": " : "");
    free(line);
    free(text);
}

void cli_print_line(FILE *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprint_line(out, NULL, fmt, ap);
    va_end(ap);
}

/* "PROGRAM: message\n" on stderr, the form of every tool's errors. */
static void print_message(const char *program, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void print_message(const char *program, const char *fmt, va_list ap)
{
    vprint_line(stderr, program, fmt, ap);
}

void cli_usage_failure(const char *program)
{
    fprintf(stderr, "Try '%s --help'.\n", program);
    exit(CLI_EXIT_USAGE);
}

void cli_die_usage(const char *program, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    print_message(program, fmt, ap);
    va_end(ap);
    cli_usage_failure(program);
}

void cli_die(const char *program, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    print_message(program, fmt, ap);
    va_end(ap);
    exit(CLI_EXIT_FAILED);
}

uint64_t cli_parse_uint(const char *program, const char *option,
                        const char *text, uint64_t min, uint64_t max)
{
    char *end;
    errno = 0;
    const unsigned long long value = strtoull(text, &end, 10);
    /* strtoull skips blanks and wraps "-1" around; neither is meant. */
    if (errno != 0 || *end != '\0' || !isdigit((unsigned char)text[0]) ||
        value < min || value > max)
        cli_die_usage(program,
                      "--%s wants an integer in %" PRIu64 "..%" PRIu64
                      ", not '%s'",
                      option, min, max, text);
    return value;
}

int64_t cli_parse_int(const char *program, const char *option, const char *text,
                      int64_t min, int64_t max)
{
    char *end;
    errno = 0;
    const long long value = strtoll(text, &end, 10);
    /* strtoll skips leading blanks; on the command line they are a typo. */
    if (errno != 0 || end == text || *end != '\0' ||
        isspace((unsigned char)text[0]) || value < min || value > max)
        cli_die_usage(program,
                      "--%s wants an integer in %" PRId64 "..%" PRId64
                      ", not '%s'",
                      option, min, max, text);
    return value;
}

/* The long option whose code is code, or NULL. */
static const struct option *option_with_code(const struct option *options,
                                             int code)
{
    for (size_t i = 0; options[i].name; i++)
        if (options[i].val == code)
            return &options[i];
    return NULL;
}

/* After getopt_long() returned '?' for text, the word it stopped at:
 * optopt is the code of a long option that lacks its value or was given
 * one it does not take, a short option that does not exist, or 0 when
 * the long option is unknown or ambiguous. */
static void reject_option(const char *program, const char *text,
                          const struct option *options)
    __attribute__((noreturn));

static void reject_option(const char *program, const char *text,
                          const struct option *options)
{
    const bool long_form = strncmp(text, "--", 2) == 0;
    const struct option *o =
        long_form && optopt != 0 ? option_with_code(options, optopt) : NULL;
    if (o && o->has_arg == required_argument)
        cli_die_usage(program, "--%s wants a value", o->name);
    if (o)
        cli_die_usage(program, "--%s takes no value: '%s'", o->name, text);
    if (optopt != 0 && !long_form)
        cli_die_usage(program, "unknown option '-%c'", optopt);
    cli_die_usage(program, "unknown or ambiguous option '%s'", text);
}

int cli_next_option(const char *program, int argc, char **argv,
                    const struct option *long_options)
{
    int index = -1;
    opterr = 0; /* getopt's messages name argv[0], a libtool path */
    const int code = getopt_long(argc, argv, "h", long_options, &index);
    if (code == '?')
        reject_option(program, argv[optind - 1], long_options);
    /* A value of its own word that starts with "--" is the next option,
     * which the user meant as one: "--source --quiet" lacks its value.
     * ("--source=--odd" is taken as written.) */
    if (index >= 0 && optarg && optarg == argv[optind - 1] &&
        strncmp(optarg, "--", 2) == 0)
        cli_die_usage(program, "--%s wants a value, and '%s' is an option",
                      long_options[index].name, optarg);
    return code;
}

int cli_finish_output(const char *program, int status)
{
    return cli_finish_output_noting(program, status, NULL);
}

int cli_finish_output_noting(const char *program, int status, const char *done)
{
    /* fflush() says why it failed; an error of an earlier write (the
     * buffer written when it filled) only leaves ferror() set. */
    const int err = fflush(stdout) != 0 ? errno : ferror(stdout) ? EIO : 0;
    if (err == 0)
        return status;
    /* said as the user knows it: a closed stdout (>&-) fails with EBADF */
    cli_print_line(stderr, "%s: cannot write to standard output: %s%s%s%s",
                   program, strerror(err),
                   err == EBADF ? " (it is closed); to drop the output, send "
                                  "it to /dev/null"
                                : "",
                   done ? "; " : "", done ? done : "");
    return CLI_EXIT_FAILED;
}

double cli_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double cli_per_second(double amount, double seconds)
{
    return seconds > 0 ? amount / seconds : 0;
}

bool cli_progress_shown(int wanted)
{
    return wanted > 0 || (wanted == 0 && isatty(STDERR_FILENO));
}

void cli_progress_clear(bool on_terminal)
{
    fputs(on_terminal ? "\r\033[K" : "\n", stderr);
}

unsigned cli_cpus_available(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return 1;
    const int count = CPU_COUNT(&set);
    return count > 0 ? (unsigned)count : 1;
}

void cli_stop_with_parent(const char *program, pid_t parent)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
        fprintf(stderr, "%s: cannot tie a worker to its parent: %s\n", program,
                strerror(errno));
        _exit(CLI_EXIT_FAILED);
    }
    if (getppid() != parent)
        _exit(CLI_EXIT_FAILED);
}
