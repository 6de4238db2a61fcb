/*
 * tools/bench/bench-channel-options.c - bench-channel's command line: the
 * modes and their default counts, --help, and parsing and checking every
 * option into a struct opts. Nothing here touches the channel.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench-channel.h"

const char *const bc_mode_names[4] = {"throughput", "pingpong-spin",
                                      "pingpong-sleep", "pingpong-pipe"};

/* Defaults per mode: sleeping round trips cost microseconds, so fewer. */
static const uint64_t default_count[] = {20000000, 1000000, 100000, 100000};

bool bc_mode_sleeps(enum mode m)
{
    return m == MODE_SLEEP || m == MODE_PIPE;
}

void bc_usage(FILE *f)
{
    fputs("usage: bench-channel [options]\n"
          "Measures the rf__ring channel between two processes sharing "
          "memory.\n"
          "  --mode M      throughput | pingpong-spin | pingpong-sleep |\n"
          "                pingpong-pipe (default throughput); pingpong-pipe "
          "is\n"
          "                the same round trip with one byte over two pipes "
          "and\n"
          "                blocking reads instead of the rings: the OS floor\n"
          "                for a receiver that sleeps\n"
          "  --count N     handles one way (default 20000000), or round "
          "trips\n"
          "                (spin: 1000000, sleep and pipe: 100000)\n"
          "  --repeat R    runs, median reported (default 5)\n"
          "  --entries E   ring entries, a power of two (default 1024; "
          "unused\n"
          "                by pingpong-pipe)\n"
          "  --block B     round trips per timed block (default 1000)\n"
          "  --timeout S   seconds before a run counts as hung (default "
          "300)\n"
          "  --json        also print one JSON object as the last line\n"
          "  --help        this text\n"
          "Exits 1 if any handle was lost, duplicated or out of order.\n",
          f);
}

/* Decimal only, no sign, no trailing junk: a typo must not become 0. */
static int parse_u64(const char *s, uint64_t *v)
{
    char *end;
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *v = x;
    return 0;
}

static int parse_mode(const char *s, enum mode *m)
{
    for (size_t i = 0; i < sizeof(bc_mode_names) / sizeof(bc_mode_names[0]);
         i++) {
        if (strcmp(s, bc_mode_names[i]) == 0) {
            *m = (enum mode)i;
            return 0;
        }
    }
    return -1;
}

/* Returns the value of option `name` given as "name V" or "name=V", NULL
 * when argv[*i] is another option; *missing is set when V is absent. */
static const char *option_value(int argc, char **argv, int *i, const char *name,
                                bool *missing)
{
    const char *arg = argv[*i];
    if (!arg)
        return NULL;
    size_t len = strlen(name);
    if (strncmp(arg, name, len) != 0)
        return NULL;
    if (arg[len] == '=')
        return arg + len + 1;
    if (arg[len] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

/* The numeric options, so parse_args() can walk them in one loop. */
static uint64_t *numeric_option(struct opts *o, const char *name)
{
    if (strcmp(name, "--count") == 0)
        return &o->count;
    if (strcmp(name, "--repeat") == 0)
        return &o->repeat;
    if (strcmp(name, "--entries") == 0)
        return &o->entries;
    if (strcmp(name, "--block") == 0)
        return &o->block;
    return &o->timeout;
}

static int parse_one(int argc, char **argv, int *i, struct opts *o)
{
    static const char *const numeric[] = {"--count", "--repeat", "--entries",
                                          "--block", "--timeout"};
    bool missing = false;
    const char *v = option_value(argc, argv, i, "--mode", &missing);
    if (v)
        return parse_mode(v, &o->mode);
    for (size_t k = 0; k < sizeof(numeric) / sizeof(numeric[0]); k++) {
        v = option_value(argc, argv, i, numeric[k], &missing);
        if (v)
            return parse_u64(v, numeric_option(o, numeric[k]));
    }
    if (strcmp(argv[*i], "--json") == 0) {
        o->json = true;
        return 0;
    }
    return -1;
}

static bool power_of_two(uint64_t x)
{
    return x >= 2 && (x & (x - 1)) == 0;
}

int bc_parse_args(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){
        .repeat = 5, .entries = 1024, .block = 1000, .timeout = 300};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0)
            return 1;
        if (parse_one(argc, argv, &i, o) != 0) {
            fprintf(stderr, "bench-channel: bad option or value near '%s'\n",
                    argv[i]);
            return -1;
        }
    }
    if (o->count == 0)
        o->count = default_count[o->mode];
    if (o->count > (UINT64_C(1) << 40) || o->block > (UINT64_C(1) << 32)) {
        fputs("bench-channel: --count is at most 2^40, --block 2^32\n", stderr);
        return -1;
    }
    if (o->repeat == 0 || o->block == 0 || o->timeout == 0 ||
        o->timeout > 100000 || !power_of_two(o->entries) ||
        o->entries > (UINT64_C(1) << 24)) {
        fputs("bench-channel: --repeat, --block and --timeout must be > 0, "
              "--entries a power of two in 2..2^24\n",
              stderr);
        return -1;
    }
    return 0;
}
