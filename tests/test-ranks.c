/*
 * test-ranks.c - several ranks of one job on this machine, as torchrun,
 * mpirun or Slurm start them: processes with the launchers' variables,
 * each opening its own loader at the same time.
 *
 *   - 2 and 4 ranks (torchrun's, Open MPI's and Slurm's variables): where
 *     a rank's share is at least one CPU its producers run only inside
 *     its own slice, the slices are disjoint and cover the mask; where it
 *     is less, one producer each, not pinned;
 *   - a CPU quota on a cgroup the test creates lowers the default
 *     producer count (skipped, with the reason, where no cgroup can be
 *     made).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cgroup.h"
#include "harness.h"
#include "proc.h"
#include "test.h"

/* What one rank saw, sent to the parent through a pipe. */
struct rank_report {
    int producers;
    int budget;     /* rf_loader_cpu_budget()'s count */
    cpu_set_t used; /* the CPUs its producers may run on, together */
    bool any_unpinned;
};

static int cpus_in_mask(cpu_set_t *mask)
{
    CHECK_EQ(sched_getaffinity(0, sizeof(*mask), mask), 0);
    return CPU_COUNT(mask);
}

static void set_launcher(const char *launcher, int rank, int size)
{
    char r[16], s[16];
    snprintf(r, sizeof(r), "%d", rank);
    snprintf(s, sizeof(s), "%d", size);
    if (strcmp(launcher, "torchrun") == 0) {
        setenv("LOCAL_RANK", r, 1);
        setenv("LOCAL_WORLD_SIZE", s, 1);
        setenv("RANK", r, 1);
        setenv("WORLD_SIZE", s, 1);
    } else if (strcmp(launcher, "mpirun") == 0) {
        setenv("OMPI_COMM_WORLD_LOCAL_RANK", r, 1);
        setenv("OMPI_COMM_WORLD_LOCAL_SIZE", s, 1);
        setenv("OMPI_COMM_WORLD_RANK", r, 1);
        setenv("OMPI_COMM_WORLD_SIZE", s, 1);
    } else {
        setenv("SLURM_LOCALID", r, 1);
        setenv("SLURM_NODEID", "0", 1);
        setenv("SLURM_TASKS_PER_NODE", s, 1);
    }
}

/* One rank: opens a loader with the defaults, runs its shard, and
 * reports where its producers may run. */
static void run_rank(const char *launcher, int rank, int size, int out)
{
    set_launcher(launcher, rank, size);
    rf_loader *l =
        TEST_OPEN_LOADER({RF_PARAM_SAMPLES, 4000}, {RF_PARAM_HEIGHT, 16},
                         {RF_PARAM_WIDTH, 16}, {RF_PARAM_QUIET, 1});
    rf_batch b;
    int rc;
    while ((rc = rf_loader_next(l, &b)) == 1)
        CHECK_OK(rf_loader_release(l, &b));
    CHECK_EQ(rc, 0);
    struct rank_report rep = {0};
    char why[512];
    rep.budget = rf_loader_cpu_budget(l, why, sizeof(why));
    int pids[64];
    rep.producers = list_children(pids, 64);
    cpu_set_t mask;
    const int all = cpus_in_mask(&mask);
    for (int i = 0; i < rep.producers; i++) {
        cpu_set_t one;
        CHECK_EQ(sched_getaffinity(pids[i], sizeof(one), &one), 0);
        rep.any_unpinned |= CPU_COUNT(&one) == all && all > 1;
        CPU_OR(&rep.used, &rep.used, &one);
    }
    printf("%s rank %d of %d: %d producers; %s\n", launcher, rank, size,
           rep.producers, why);
    CHECK_EQ(write(out, &rep, sizeof(rep)), (long long)sizeof(rep));
    rf_loader_close(l);
}

/* Starts `size` ranks at once and checks their shares. */
static void ranks_share_the_mask(const char *launcher, int size)
{
    cpu_set_t mask;
    const int cpus = cpus_in_mask(&mask);
    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    pid_t kids[8];
    for (int r = 0; r < size; r++) {
        fflush(NULL);
        kids[r] = fork();
        CHECK(kids[r] >= 0);
        if (kids[r] == 0) {
            close(fds[0]);
            run_rank(launcher, r, size, fds[1]);
            _exit(0);
        }
    }
    close(fds[1]);
    cpu_set_t seen;
    CPU_ZERO(&seen);
    const int share = cpus / size;
    for (int r = 0; r < size; r++) {
        struct rank_report rep;
        CHECK_EQ(read(fds[0], &rep, sizeof(rep)), (long long)sizeof(rep));
        CHECK_EQ(rep.producers, share >= 1 ? share : 1);
        CHECK_EQ(rep.budget, rep.producers);
        if (share >= 1) {
            /* its own CPUs only: none another rank's */
            cpu_set_t overlap;
            CPU_AND(&overlap, &seen, &rep.used);
            CHECK_EQ(CPU_COUNT(&overlap), 0);
            CHECK(!rep.any_unpinned);
            CPU_OR(&seen, &seen, &rep.used);
        } else {
            CHECK(rep.any_unpinned || cpus == 1);
        }
    }
    close(fds[0]);
    for (int r = 0; r < size; r++)
        CHECK_EQ(exit_status_of(kids[r]), 0);
    if (share >= 1 && cpus % size == 0)
        CHECK(CPU_EQUAL(&seen, &mask)); /* together, the whole mask */
}

TEST_CASE(two_ranks_torchrun, "ranks", "2 ranks of torchrun share the mask")
{
    ranks_share_the_mask("torchrun", 2);
}

TEST_CASE(four_ranks_torchrun, "ranks", "4 ranks of torchrun share the mask")
{
    ranks_share_the_mask("torchrun", 4);
}

TEST_CASE(two_ranks_mpirun, "ranks", "2 ranks of mpirun share the mask")
{
    ranks_share_the_mask("mpirun", 2);
}

TEST_CASE(two_ranks_slurm, "ranks", "2 ranks of Slurm share the mask")
{
    ranks_share_the_mask("slurm", 2);
}

/* LOCAL_RANK without LOCAL_WORLD_SIZE (PyTorch Lightning's launcher):
 * the node's ranks are not known, and the loader says so once at open,
 * naming the variable and what to set; a complete pair says nothing. */
TEST_CASE(local_rank_alone_is_said, "ranks",
          "a local rank without its size is said at open")
{
    /* each case runs in a process of its own: the environment is its */
    setenv("LOCAL_RANK", "1", 1);
    unsetenv("LOCAL_WORLD_SIZE");
    unsetenv("RF_LOCAL_RANK");
    unsetenv("SLURM_LOCALID");
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
    unsetenv("MPI_LOCALRANKID");
    struct test_messages s = {0};
    rf_config *cfg =
        TEST_CONFIG({RF_PARAM_SAMPLES, 64}, {RF_PARAM_PRODUCERS, 1});
    CHECK_OK(rf_config_set_message_handler(cfg, test_collect_message, &s));
    rf_loader *l = test_open_loader(cfg);
    rf_loader_close(l);
    CHECK_EQ(s.count, 1);
    CHECK_CONTAINS(s.last, "LOCAL_RANK is set without a LOCAL_WORLD_SIZE");
    CHECK_CONTAINS(s.last, "set RF_LOCAL_RANK and RF_LOCAL_WORLD_SIZE");
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    s.count = 0;
    l = test_open_loader(cfg);
    rf_loader_close(l);
    rf_config_free(cfg);
    CHECK_EQ(s.count, 0);
    /* in a rank of several, its producers are not pinned, for a local
     * rank that is not usable, not for none (it said "no local rank") */
    unsetenv("LOCAL_WORLD_SIZE");
    cfg = TEST_CONFIG({RF_PARAM_SAMPLES, 64}, {RF_PARAM_PRODUCERS, 1},
                      {RF_PARAM_RANK, 1}, {RF_PARAM_WORLD_SIZE, 2});
    CHECK_OK(rf_config_set_message_handler(cfg, test_collect_message, &s));
    l = test_open_loader(cfg);
    char why[RF_CPU_BUDGET_MAX];
    CHECK_GE(rf_loader_cpu_budget(l, why, sizeof(why)), 1);
    rf_loader_close(l);
    rf_config_free(cfg);
    printf("  %s\n", why);
    CHECK_EQ(s.count, 1); /* the unusable local rank, said once */
    CHECK_CONTAINS(why, "no local ranks (LOCAL_RANK is set without a "
                        "LOCAL_WORLD_SIZE above it");
    CHECK(!strstr(why, "no local rank)"));
    if (strstr(why, ", not pinned ("))
        CHECK_CONTAINS(why, ", not pinned (one of 2 ranks, no usable local "
                            "rank)");
}

/* The loader's message at open for one LOCAL_RANK and LOCAL_WORLD_SIZE
 * that give no local ranks: must contain `words` and the advice. */
static void check_local_pair_said(const char *rank, const char *size,
                                  const char *words)
{
    setenv("LOCAL_RANK", rank, 1);
    setenv("LOCAL_WORLD_SIZE", size, 1);
    unsetenv("RF_LOCAL_RANK");
    unsetenv("SLURM_LOCALID");
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
    unsetenv("MPI_LOCALRANKID");
    struct test_messages s = {0};
    rf_config *cfg =
        TEST_CONFIG({RF_PARAM_SAMPLES, 64}, {RF_PARAM_PRODUCERS, 1});
    CHECK_OK(rf_config_set_message_handler(cfg, test_collect_message, &s));
    rf_loader *l = test_open_loader(cfg);
    rf_loader_close(l);
    rf_config_free(cfg);
    CHECK_EQ(s.count, 1);
    printf("  %s\n", s.last);
    CHECK_CONTAINS(s.last, words);
    CHECK_CONTAINS(s.last, "set RF_LOCAL_RANK and RF_LOCAL_WORLD_SIZE");
}

/* LOCAL_RANK 5 of LOCAL_WORLD_SIZE 2, or a LOCAL_RANK that is not a
 * number: no local ranks, and the message at open says which variable
 * and value (it said "set without a LOCAL_WORLD_SIZE", and nothing for
 * "x"). */
TEST_CASE(unusable_local_pair_is_said, "ranks",
          "a local rank not below its size, or not a number, is said")
{
    check_local_pair_said("5", "2",
                          "the local rank 5 (LOCAL_RANK) is not below the "
                          "local world size 2 (LOCAL_WORLD_SIZE), so this "
                          "rank's CPU budget is all");
    check_local_pair_said("x", "2",
                          "LOCAL_RANK is 'x', not a local rank (0 or more), "
                          "so this rank's CPU budget is all");
}

/* Writes text into a cgroup file; false when it cannot. */
static bool write_cgroup(const char *folder, const char *file, const char *text)
{
    char path[4400];
    snprintf(path, sizeof(path), "%s/%s", folder, file);
    const int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    const bool ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
    close(fd);
    return ok;
}

/* A cgroup below this process's own in the cpu hierarchy, with a quota
 * of one CPU; "" when none can be made (then the case skips). */
static void make_quota_cgroup(char *made, size_t len, int *version)
{
    char own[4200];
    made[0] = '\0';
    *version = rf__cgroup_folder_at("/proc/self", "", "cpu", own, sizeof(own));
    if (*version == 0)
        return;
    snprintf(made, len, "%s/ringfeed-ranks-%d", own, (int)getpid());
    if (mkdir(made, 0755) != 0) {
        made[0] = '\0';
        return;
    }
    const bool ok = *version == 1
                        ? write_cgroup(made, "cpu.cfs_period_us", "100000") &&
                              write_cgroup(made, "cpu.cfs_quota_us", "100000")
                        : write_cgroup(made, "cpu.max", "100000 100000");
    if (!ok) {
        rmdir(made);
        made[0] = '\0';
    }
}

TEST_CASE(quota_lowers_the_count, "quota",
          "a CPU quota lowers the default count")
{
    cpu_set_t mask;
    if (cpus_in_mask(&mask) < 2)
        TEST_SKIP_BECAUSE("one CPU: a quota of one changes nothing here");
    char folder[4400];
    int version;
    make_quota_cgroup(folder, sizeof(folder), &version);
    if (!folder[0])
        TEST_SKIP_BECAUSE("no cgroup with a CPU quota can be made here "
                          "(needs root and a writable cpu hierarchy)");
    fflush(NULL);
    const pid_t kid = fork();
    CHECK(kid >= 0);
    if (kid == 0) {
        char pid[16];
        snprintf(pid, sizeof(pid), "%d", (int)getpid());
        CHECK(write_cgroup(folder, "cgroup.procs", pid));
        rf_loader *l =
            TEST_OPEN_LOADER({RF_PARAM_SAMPLES, 100}, {RF_PARAM_QUIET, 1});
        char why[512];
        const int count = rf_loader_cpu_budget(l, why, sizeof(why));
        printf("cgroup v%d quota of 1 CPU: %s\n", version, why);
        CHECK_EQ(count, 1);
        CHECK_CONTAINS(why, "quota 1.00");
        rf_stats st;
        CHECK_OK(rf_loader_stats(l, &st));
        CHECK_EQ(st.producers, 1);
        rf_loader_close(l);
        _exit(0);
    }
    const int status = exit_status_of(kid);
    /* the child is gone: its cgroup is empty and can go */
    CHECK_EQ(rmdir(folder), 0);
    CHECK_EQ(status, 0);
}

/* Takes a batch: the producers are then at work, pinned (a producer
 * pins itself as it starts). */
static void take_one(rf_loader *l)
{
    rf_batch b;
    CHECK_EQ(rf_loader_next(l, &b), 1);
    CHECK_OK(rf_loader_release(l, &b));
}

/* A loader of one producer at work, pinned; the case skips where the
 * budget does not pin (a launcher-bound mask, say). */
static rf_loader *open_pinned_loader(void)
{
    char why[512];
    rf_loader *l =
        TEST_OPEN_LOADER({RF_PARAM_PRODUCERS, 1}, {RF_PARAM_QUIET, 1});
    CHECK_GE(rf_loader_cpu_budget(l, why, sizeof(why)), 1);
    if (!strstr(why, "; pinned to "))
        TEST_SKIP_BECAUSE("the budget does not pin here: %s", why);
    take_one(l);
    return l;
}

/* This process's two producers are pinned to one CPU each, not the same
 * one, and one of them to `first` when given. */
static void two_producers_apart(const cpu_set_t *first)
{
    int pids[8];
    CHECK_EQ(list_children(pids, 8), 2);
    cpu_set_t a, b;
    CHECK_EQ(sched_getaffinity(pids[0], sizeof(a), &a), 0);
    CHECK_EQ(sched_getaffinity(pids[1], sizeof(b), &b), 0);
    CHECK_EQ(CPU_COUNT(&a), 1);
    CHECK_EQ(CPU_COUNT(&b), 1);
    CHECK(!CPU_EQUAL(&a, &b));
    if (first)
        CHECK(CPU_EQUAL(&a, first) || CPU_EQUAL(&b, first));
}

/* The affinity of this process's one producer. */
static cpu_set_t only_producer_mask(void)
{
    int pids[8];
    CHECK_EQ(list_children(pids, 8), 1);
    cpu_set_t one;
    CHECK_EQ(sched_getaffinity(pids[0], sizeof(one), &one), 0);
    return one;
}

/* Two loaders alive at once in one process (a training and a validation
 * set), each with fewer producers than the mask has CPUs: their producers
 * run on different CPUs (each loader pinned its first producer to the
 * slice's first CPU). RF_PARAM_PIN_PRODUCERS 0 leaves a producer on the
 * whole mask, and the budget's line says so (it said "pinned to"). */
TEST_CASE(two_loaders_take_different_cpus, "pin",
          "two loaders' producers run on different CPUs")
{
    cpu_set_t mask;
    const int all = cpus_in_mask(&mask);
    if (all < 2)
        TEST_SKIP_BECAUSE("one CPU in the mask: nothing to spread over");
    rf_loader *train = open_pinned_loader();
    const cpu_set_t first = only_producer_mask();
    rf_loader *val =
        TEST_OPEN_LOADER({RF_PARAM_PRODUCERS, 1}, {RF_PARAM_QUIET, 1});
    take_one(val);
    two_producers_apart(&first);
    rf_loader_close(val);
    rf_loader_close(train);
    rf_loader *loose =
        TEST_OPEN_LOADER({RF_PARAM_PRODUCERS, 1}, {RF_PARAM_PIN_PRODUCERS, 0},
                         {RF_PARAM_QUIET, 1});
    char why[512];
    CHECK_GE(rf_loader_cpu_budget(loose, why, sizeof(why)), 1);
    printf("  %s\n", why);
    CHECK_CONTAINS(why, ", not pinned (RF_PARAM_PIN_PRODUCERS 0)");
    take_one(loose);
    const cpu_set_t whole = only_producer_mask();
    CHECK_EQ(CPU_COUNT(&whole), all);
    rf_loader_close(loose);
}

/* The validation loader opened again and again (each epoch's evaluation)
 * while the training loader lives: its producer never comes round onto
 * the training loader's CPU (an offset that only grew came round to it
 * after as many loaders as the mask has CPUs). */
TEST_CASE(reopened_loader_keeps_off_a_live_one, "pin",
          "a loader opened again keeps off a live loader's CPUs")
{
    cpu_set_t mask;
    if (cpus_in_mask(&mask) < 2)
        TEST_SKIP_BECAUSE("one CPU in the mask: nothing to spread over");
    /* three CPUs at most, so that coming round takes few loaders */
    cpu_set_t few;
    CPU_ZERO(&few);
    for (int c = 0, kept = 0; c < CPU_SETSIZE && kept < 3; c++)
        if (CPU_ISSET(c, &mask)) {
            CPU_SET(c, &few);
            kept++;
        }
    CHECK_EQ(sched_setaffinity(0, sizeof(few), &few), 0);
    const int all = CPU_COUNT(&few);
    rf_loader *train = open_pinned_loader();
    for (int round = 0; round < all + 1; round++) {
        rf_loader *val =
            TEST_OPEN_LOADER({RF_PARAM_PRODUCERS, 1}, {RF_PARAM_QUIET, 1});
        take_one(val);
        two_producers_apart(NULL);
        rf_loader_close(val);
    }
    rf_loader_close(train);
}

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
