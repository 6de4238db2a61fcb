/*
 * soak.c - many epochs over a dataset on disk, watching for leaks: at each
 * epoch boundary one line with the memory (PSS) and open fds of this
 * process and of every producer, and where the ring's slots are. At the
 * end the growth of each process from the first measured epoch (after a
 * warm-up epoch) to the end, and a verdict: PSS may grow by less than
 * 1 MiB, fds not at all, and no producer may have been replaced.
 *
 *   soak DATASET [--epochs N] [--size N] [--batch N] [--producers N]
 *
 * Not part of `make check` (it takes minutes): tools/dev/soak.sh makes a JPEG
 * folder and runs it. Uses only the public header and /proc.
 *
 * How PSS counts the ring: the slots are one shared-memory mapping (a
 * memfd) in the consumer and in every producer. PSS charges each page
 * 1/n to each of the n processes that map it, so the ring shows up as
 * Pss_Shmem split among them, and its share moves when a producer first
 * touches a slot. That settles during the warm-up epoch; after it, growth
 * of PSS means the process's own memory grew. The "anon" columns
 * (Pss_Anon: heap, stacks, private copies) leave the ring out entirely and
 * are the first place to look when PSS grows. File pages (the programs
 * and libraries) are shared with every other process that maps them, so
 * their share moves a little as processes come and go on the machine.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <ringfeed.h>

#include "proc.h"

enum { MAX_PRODUCERS = 16, LIMIT_KB = 1024 };

/* One process at one moment. */
struct proc_sample {
    int pid;
    long pss_kb, anon_kb, shmem_kb, file_kb;
    int fds;
};

/* Everything measured at one epoch boundary. */
struct sample {
    uint64_t epoch;
    double seconds;
    struct proc_sample consumer;
    int producers;
    struct proc_sample producer[MAX_PRODUCERS];
    rf_stats stats;
};

struct options {
    const char *dataset;
    uint64_t epochs;
    int64_t size, batch, producers;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Sets *kb to the number after `name` when the line starts with it. */
static void read_field(const char *line, const char *name, long *kb)
{
    const size_t len = strlen(name);
    if (strncmp(line, name, len) == 0)
        *kb = strtol(line + len, NULL, 10);
}

/* Reads Pss and its parts Pss_Anon, Pss_Shmem and Pss_File (kB) of a
 * process. Returns 0 or -1. */
static int read_memory(int pid, struct proc_sample *p)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    p->pss_kb = p->anon_kb = p->shmem_kb = p->file_kb = -1;
    while (fgets(line, sizeof(line), f)) {
        read_field(line, "Pss:", &p->pss_kb);
        read_field(line, "Pss_Anon:", &p->anon_kb);
        read_field(line, "Pss_Shmem:", &p->shmem_kb);
        read_field(line, "Pss_File:", &p->file_kb);
    }
    fclose(f);
    return p->pss_kb < 0 ? -1 : 0;
}

/* Open fds of a process (for this process, the listing's own fd is among
 * them: the same one every time, so it cancels out of the growth). */
static int count_fds(int pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", pid);
    return count_entries(path);
}

static void measure(int pid, struct proc_sample *p)
{
    p->pid = pid;
    if (read_memory(pid, p) < 0)
        p->pss_kb = p->anon_kb = p->shmem_kb = p->file_kb = -1;
    p->fds = count_fds(pid);
}

/* The producers are this process's children: the pids listed in
 * /proc/self/task/TID/children of each of its threads. */
static int find_producers(int *pids, int max)
{
    DIR *tasks = opendir("/proc/self/task");
    if (!tasks)
        return 0;
    int n = 0;
    const struct dirent *t;
    while ((t = readdir(tasks)) && n < max) {
        if (t->d_name[0] == '.')
            continue;
        char path[300];
        snprintf(path, sizeof(path), "/proc/self/task/%s/children", t->d_name);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        char list[1024] = "";
        if (fgets(list, sizeof(list), f)) {
            char *next = list, *end;
            long pid;
            while (n < max && (pid = strtol(next, &end, 10)) > 0) {
                pids[n++] = (int)pid;
                next = end;
            }
        }
        fclose(f);
    }
    closedir(tasks);
    return n;
}

static void take_sample(const rf_loader *loader, uint64_t epoch, double started,
                        struct sample *s)
{
    int pids[MAX_PRODUCERS] = {0};
    s->epoch = epoch;
    s->seconds = now_s() - started;
    measure((int)getpid(), &s->consumer);
    s->producers = find_producers(pids, MAX_PRODUCERS);
    for (int i = 0; i < s->producers; i++)
        measure(pids[i], &s->producer[i]);
    rf_loader_stats(loader, &s->stats);
}

/* Two header lines: the process names, then the columns of each. */
static void print_header(int producers)
{
    printf("%-6s %7s  %-22s", "", "", "consumer");
    for (int i = 0; i < producers; i++)
        printf("  producer %-13d", i);
    printf("  slots\n");
    printf("%-6s %7s", "epoch", "time_s");
    for (int i = 0; i <= producers; i++)
        printf("  %8s %8s %4s", "pss_KiB", "anon_KiB", "fds");
    printf("  %4s %4s %5s %4s %8s\n", "free", "prod", "ready", "user",
           "respawns");
}

static void print_proc(const struct proc_sample *p)
{
    printf("  %8ld %8ld %4d", p->pss_kb, p->anon_kb, p->fds);
}

static void print_sample(const struct sample *s, const char *label)
{
    printf("%-6s %7.1f", label, s->seconds);
    print_proc(&s->consumer);
    for (int i = 0; i < s->producers; i++)
        print_proc(&s->producer[i]);
    printf("  %4u %4u %5u %4u %8" PRIu64 "\n", s->stats.slots_free,
           s->stats.slots_at_producers, s->stats.slots_ready,
           s->stats.slots_with_user, s->stats.respawns);
}

/* Prints one process's growth; returns 1 when it is within the limits. */
static int judge(const char *name, const struct proc_sample *a,
                 const struct proc_sample *b)
{
    const long pss = b->pss_kb - a->pss_kb, anon = b->anon_kb - a->anon_kb;
    const int fds = b->fds - a->fds;
    const int ok = a->pid == b->pid && pss < LIMIT_KB && fds <= 0;
    printf("  %-11s pid %d: PSS %+ld KiB (anon %+ld, ring share %+ld, files "
           "%+ld), fds %+d%s  %s\n",
           name, b->pid, pss, anon, b->shmem_kb - a->shmem_kb,
           b->file_kb - a->file_kb, fds,
           a->pid == b->pid ? "" : " (a different process)",
           ok ? "ok" : "TOO MUCH");
    return ok;
}

/* Growth from `first` to `last` of every process, and the verdict. */
static int report(const struct sample *first, const struct sample *last)
{
    printf("growth from the start of epoch %" PRIu64
           " to the end (limit: PSS < %d KiB, fds +0):\n",
           first->epoch, LIMIT_KB);
    int ok = judge("consumer", &first->consumer, &last->consumer);
    if (first->producers != last->producers) {
        printf("  producers: %d, then %d\n", first->producers, last->producers);
        ok = 0;
    }
    for (int i = 0; i < first->producers && i < last->producers; i++) {
        char name[32];
        snprintf(name, sizeof(name), "producer %d", i);
        ok &= judge(name, &first->producer[i], &last->producer[i]);
    }
    if (last->stats.respawns > 0) {
        printf("  %" PRIu64 " producers were replaced after dying\n",
               last->stats.respawns);
        ok = 0;
    }
    printf("verdict: %s\n", ok ? "PASS" : "FAIL");
    return ok;
}

static int parse_number(const char *text, int64_t low, int64_t *value)
{
    char *end;
    errno = 0;
    const long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v < low)
        return -1;
    *value = v;
    return 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
    int64_t epochs = 50;
    *o = (struct options){.size = 224, .batch = 32, .producers = 0};
    for (int i = 1; i < argc; i++) {
        int64_t *target = NULL, low = 1;
        if (!strcmp(argv[i], "--epochs"))
            target = &epochs, low = 2;
        else if (!strcmp(argv[i], "--size"))
            target = &o->size;
        else if (!strcmp(argv[i], "--batch"))
            target = &o->batch;
        else if (!strcmp(argv[i], "--producers"))
            target = &o->producers, low = 0;
        else if (argv[i][0] != '-' && !o->dataset) {
            o->dataset = argv[i];
            continue;
        }
        if (!target || i + 1 == argc ||
            parse_number(argv[++i], low, target) < 0) {
            fprintf(stderr, "soak: bad argument '%s'\n", argv[i]);
            return -1;
        }
    }
    o->epochs = (uint64_t)epochs;
    if (!o->dataset)
        fprintf(stderr, "usage: soak DATASET [--epochs N (>= 2)] [--size N] "
                        "[--batch N] [--producers N]\n");
    return o->dataset ? 0 : -1;
}

static rf_loader *open_loader(const struct options *o)
{
    rf_config *cfg = rf_config_create();
    if (!cfg)
        return NULL;
    int rc = rf_config_set_path(cfg, o->dataset);
    const int64_t settings[][2] = {
        {RF_PARAM_EPOCHS, (int64_t)o->epochs},
        {RF_PARAM_HEIGHT, o->size},
        {RF_PARAM_WIDTH, o->size},
        {RF_PARAM_BATCH_SIZE, o->batch},
        {RF_PARAM_PRODUCERS, o->producers},
        {RF_PARAM_TRANSFORM, RF_TRANSFORM_TRAIN},
    };
    for (size_t i = 0; rc == 0 && i < sizeof(settings) / sizeof(*settings); i++)
        rc = rf_config_set(cfg, (rf_param)settings[i][0], settings[i][1]);
    rf_loader *loader = NULL;
    char *why = NULL;
    if (rc < 0)
        fprintf(stderr, "soak: %s\n", rf_config_error(cfg));
    else if ((rc = rf_loader_open(&loader, cfg, &why)) < 0)
        fprintf(stderr, "soak: %s: %s\n", rf_strerror(rc), why ? why : "");
    free(why);
    rf_config_free(cfg);
    return loader;
}

/* Runs every epoch, sampling after the first batch of each and at the
 * end. samples[e] is epoch e's; samples[epochs] the end's. */
static int run(rf_loader *loader, uint64_t epochs, struct sample *samples)
{
    const double started = now_s();
    rf_batch b;
    int rc;
    while ((rc = rf_loader_next(loader, &b)) != 0) {
        if (rc == -EINTR)
            continue;
        if (rc < 0)
            return rc;
        rc = rf_loader_release(loader, &b);
        if (rc < 0)
            return rc;
        if (b.number != 0 || b.epoch >= epochs)
            continue;
        take_sample(loader, b.epoch, started, &samples[b.epoch]);
        if (b.epoch == 0)
            print_header(samples[0].producers);
        char label[24];
        snprintf(label, sizeof(label), "%" PRIu64, b.epoch);
        print_sample(&samples[b.epoch], label);
        fflush(stdout);
    }
    take_sample(loader, epochs, started, &samples[epochs]);
    print_sample(&samples[epochs], "end");
    return 0;
}

int main(int argc, char **argv)
{
    struct options o;
    if (parse_options(argc, argv, &o) < 0)
        return 2;
    struct sample *samples = calloc(o.epochs + 1, sizeof(*samples));
    rf_loader *loader = samples ? open_loader(&o) : NULL;
    if (!loader) {
        free(samples);
        return 1;
    }
    const int rc = run(loader, o.epochs, samples);
    if (rc < 0)
        fprintf(stderr, "soak: %s: %s\n", rf_strerror(rc),
                rf_loader_error(loader));
    /* Epoch 0 is the warm-up: the ring's pages are first touched in it. */
    const int ok = rc == 0 && report(&samples[1], &samples[o.epochs]);
    rf_loader_close(loader);
    free(samples);
    return ok ? 0 : 1;
}
