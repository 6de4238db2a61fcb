/*
 * test-cpu-budget.c - the default producer count and CPUs of one rank
 * (lib/common/cpu-budget.c), computed from made-up inputs: masks, quotas,
 * local ranks from each launcher's variables, topologies in a made-up
 * sysfs. The real thing, ranks as processes opening loaders, is in
 * test-ranks.
 */
#include "config.h"

#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cpu-budget.h"
#include "harness.h"
#include "test.h"

static int mask[256];

static struct rf__budget_input input(int cpus, int allowed)
{
    for (int i = 0; i < cpus; i++)
        mask[i] = i;
    return (struct rf__budget_input){.affinity = mask,
                                     .affinity_count = cpus,
                                     .allowed_count = allowed,
                                     .local_rank = -1};
}

TEST_CASE(alone_takes_the_mask, "budget", "one rank takes the whole mask")
{
    struct rf__budget_input in = input(16, 16);
    struct rf__budget b;
    rf__budget_compute(&in, &b);
    CHECK_EQ(b.producers, 16);
    CHECK(b.pin);
    CHECK_EQ(b.cpu_count, 16);
    CHECK_CONTAINS(b.why, "16 CPUs: affinity 0-15");
}

TEST_CASE(quota_caps_the_count, "budget", "a CFS quota caps the count")
{
    struct rf__budget_input in = input(64, 64);
    in.quota = 4.7;
    in.quota_where = "the cgroup v2 cpu.max of /sys/fs/cgroup/pod";
    struct rf__budget b;
    rf__budget_compute(&in, &b);
    CHECK_EQ(b.producers, 4);
    CHECK_CONTAINS(b.why, "quota 4.70 (the cgroup v2 cpu.max");
    in.quota = 0.5; /* at least one */
    rf__budget_compute(&in, &b);
    CHECK_EQ(b.producers, 1);
}

/* Every rank's slice: disjoint, together the whole mask, each the size
 * of its share. */
static void check_ranks_cover(int cpus, int ranks, double quota)
{
    bool seen[256] = {false};
    int covered = 0;
    for (int r = 0; r < ranks; r++) {
        struct rf__budget_input in = input(cpus, cpus);
        in.local_rank = r;
        in.local_size = ranks;
        in.ranks_from = "LOCAL_RANK/LOCAL_WORLD_SIZE";
        in.quota = quota;
        struct rf__budget b;
        rf__budget_compute(&in, &b);
        const int usable = quota > 0 && quota < cpus ? (int)quota : cpus;
        CHECK_EQ(b.producers, usable / ranks >= 1 ? usable / ranks : 1);
        CHECK_EQ(b.pin, usable / ranks >= 1);
        for (int i = 0; i < b.cpu_count; i++) {
            CHECK(!seen[b.cpus[i]]);
            seen[b.cpus[i]] = true;
            covered++;
        }
        CHECK_CONTAINS(b.why, "local rank");
    }
    CHECK_EQ(covered, cpus);
}

TEST_CASE(ranks_split_the_mask, "budget",
          "ranks split the mask, disjoint and covering")
{
    check_ranks_cover(2, 2, 0);
    check_ranks_cover(16, 4, 0);
    check_ranks_cover(96, 8, 0);
    check_ranks_cover(10, 4, 0);  /* uneven: 2 or 3 CPUs each */
    check_ranks_cover(64, 8, 16); /* a quota of 16 over 8 ranks: 2 each */
}

/* The budget for `in` is `producers` producers, not pinned, for a reason
 * that contains `why`. */
static void check_not_pinned(const struct rf__budget_input *in, int producers,
                             const char *why)
{
    struct rf__budget b;
    rf__budget_compute(in, &b);
    CHECK_EQ(b.producers, producers);
    CHECK(!b.pin);
    CHECK_CONTAINS(b.why, why);
}

TEST_CASE(less_than_a_cpu_each_is_not_pinned, "budget",
          "under one CPU each is not pinned")
{
    struct rf__budget_input in = input(2, 2);
    in.local_rank = 3;
    in.local_size = 4;
    check_not_pinned(&in, 1, "not pinned");
}

TEST_CASE(launcher_bound_mask_is_kept_whole, "budget",
          "a launcher-bound mask is kept whole")
{
    /* mpirun --bind-to: rank 1 of 4 sees CPUs 4-7 of 16 */
    int own[4] = {4, 5, 6, 7};
    struct rf__budget_input in = {.affinity = own,
                                  .affinity_count = 4,
                                  .allowed_count = 16,
                                  .local_rank = 1,
                                  .local_size = 4};
    check_not_pinned(&in, 4, "the rank's own mask");
}

/* Without a local rank the budget is marked `alone` (resolve.c unpins
 * it for a rank of several); with one, 0 of 1 included (one rank per
 * node: torchrun --nproc_per_node=1 on several nodes), it is not, and
 * stays pinned. */
TEST_CASE(only_rank_of_its_node_is_not_alone, "budget",
          "the node's only rank (local rank 0 of 1) is not taken as unranked")
{
    struct rf__budget_input in = input(8, 8);
    struct rf__budget b;
    rf__budget_compute(&in, &b);
    CHECK(b.alone);
    CHECK(b.pin);
    in.local_rank = 0;
    in.local_size = 1;
    in.ranks_from = "LOCAL_RANK/LOCAL_WORLD_SIZE";
    rf__budget_compute(&in, &b);
    CHECK(!b.alone);
    CHECK(b.pin);
    CHECK_EQ(b.producers, 8);
    CHECK(b.ranks_unknown == NULL);
    in.local_rank = 1;
    in.local_size = 2;
    rf__budget_compute(&in, &b);
    CHECK(!b.alone);
}

/* Two NUMA nodes whose CPUs interleave (0,2,4.. on node 0), with
 * hyperthread siblings (cpu c and c + 8 share a core). */
static int node_of_cpu[16], core_of_cpu[16];

/* The budget of local rank `rank` of `ranks` on that machine. */
static void topology_slice(int rank, int ranks, struct rf__budget *b)
{
    for (int c = 0; c < 16; c++) {
        node_of_cpu[c] = c % 2;
        core_of_cpu[c] = c % 8;
    }
    struct rf__budget_input in = input(16, 16);
    in.node_of = node_of_cpu;
    in.core_of = core_of_cpu;
    in.local_rank = rank;
    in.local_size = ranks;
    rf__budget_compute(&in, b);
}

/* Two ranks each get one node, siblings together. */
TEST_CASE(slices_follow_the_topology, "topology",
          "slices keep to a NUMA node and keep siblings together")
{
    struct rf__budget b;
    for (int r = 0; r < 2; r++) {
        topology_slice(r, 2, &b);
        CHECK_EQ(b.cpu_count, 8);
        for (int i = 0; i < b.cpu_count; i++)
            CHECK_EQ(node_of_cpu[b.cpus[i]], r);
    }
    /* Four ranks: each takes two cores with both their siblings. */
    for (int r = 0; r < 4; r++) {
        topology_slice(r, 4, &b);
        CHECK_EQ(b.cpu_count, 4);
        for (int i = 0; i < b.cpu_count; i++) {
            const int sibling = b.cpus[i] < 8 ? b.cpus[i] + 8 : b.cpus[i] - 8;
            bool found = false;
            for (int k = 0; k < b.cpu_count; k++)
                found |= b.cpus[k] == sibling;
            CHECK(found);
        }
    }
}

static void clear_launchers(void)
{
    static const char *const names[] = {"RF_LOCAL_RANK",
                                        "RF_LOCAL_WORLD_SIZE",
                                        "LOCAL_RANK",
                                        "LOCAL_WORLD_SIZE",
                                        "OMPI_COMM_WORLD_LOCAL_RANK",
                                        "OMPI_COMM_WORLD_LOCAL_SIZE",
                                        "MPI_LOCALRANKID",
                                        "MPI_LOCALNRANKS",
                                        "SLURM_LOCALID",
                                        "SLURM_TASKS_PER_NODE",
                                        "SLURM_NODEID",
                                        "SLURM_NTASKS_PER_NODE"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        unsetenv(names[i]);
}

static void expect_ranks(int rank, int size, const char *from)
{
    int r, s;
    const char *f;
    rf__budget_local_ranks(&r, &s, &f);
    CHECK_EQ(r, rank);
    CHECK_EQ(s, size);
    if (from)
        CHECK_CONTAINS(f, from);
    else
        CHECK(f == NULL);
}

TEST_CASE(local_ranks_from_each_launcher, "environment",
          "local ranks from each launcher")
{
    clear_launchers();
    expect_ranks(-1, 0, NULL);
    setenv("LOCAL_RANK", "1", 1);
    setenv("LOCAL_WORLD_SIZE", "4", 1);
    expect_ranks(1, 4, "LOCAL_RANK");
    setenv("RF_LOCAL_RANK", "0", 1); /* the explicit setting wins */
    setenv("RF_LOCAL_WORLD_SIZE", "2", 1);
    expect_ranks(0, 2, "RF_LOCAL_RANK");
    clear_launchers();
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "8", 1);
    expect_ranks(3, 8, "OMPI");
    clear_launchers();
    setenv("MPI_LOCALRANKID", "1", 1); /* MPICH, Intel MPI (Hydra) */
    setenv("MPI_LOCALNRANKS", "2", 1);
    expect_ranks(1, 2, "MPI_LOCALRANKID");
    clear_launchers();
    setenv("SLURM_LOCALID", "2", 1);
    setenv("SLURM_NODEID", "3", 1);
    setenv("SLURM_TASKS_PER_NODE", "4(x2),3(x2)", 1); /* node 3 runs 3 */
    expect_ranks(2, 3, "SLURM");
    setenv("SLURM_NODEID", "0", 1);
    expect_ranks(2, 4, "SLURM");
    clear_launchers();
    setenv("SLURM_LOCALID", "1", 1); /* the pair named is the one read */
    setenv("SLURM_NTASKS_PER_NODE", "2", 1);
    expect_ranks(1, 2, "SLURM_LOCALID/SLURM_NTASKS_PER_NODE");
    /* set alone, or beyond the node's tasks: none, and said (it took
     * every CPU in silence) */
    unsetenv("SLURM_NTASKS_PER_NODE");
    expect_ranks(-1, 0,
                 "SLURM_LOCALID is set without this node's count of tasks");
    setenv("SLURM_LOCALID", "2", 1);
    setenv("SLURM_NODEID", "0", 1);
    setenv("SLURM_TASKS_PER_NODE", "2", 1);
    expect_ranks(-1, 0,
                 "the local rank 2 (SLURM_LOCALID) is not below this node's "
                 "2 tasks (SLURM_TASKS_PER_NODE)");
    setenv("SLURM_LOCALID", "x", 1);
    expect_ranks(-1, 0, "SLURM_LOCALID is 'x', not a local rank");
    clear_launchers();
    setenv("LOCAL_RANK", "4", 1); /* not below the size: ignored, said */
    setenv("LOCAL_WORLD_SIZE", "4", 1);
    expect_ranks(-1, 0, "the local rank 4 (LOCAL_RANK) is not below");
    unsetenv("LOCAL_WORLD_SIZE"); /* Lightning's launcher sets it alone */
    setenv("LOCAL_RANK", "1", 1);
    expect_ranks(-1, 0, "LOCAL_RANK is set without a LOCAL_WORLD_SIZE");
    setenv("SLURM_LOCALID", "1", 1); /* another launcher's pair still wins */
    setenv("SLURM_NTASKS_PER_NODE", "2", 1);
    expect_ranks(1, 2, "SLURM");
    clear_launchers();
    setenv("LOCAL_RANK", "", 1); /* empty: as if not set */
    expect_ranks(-1, 0, NULL);
}

/* A pair that is set but unusable gives no local ranks and says why,
 * naming the variables and their values: a rank not below the size, a
 * rank or a size that is not a number. (A rank not below the size was
 * said to be "set without a LOCAL_WORLD_SIZE above it"; a rank that is
 * not a number was ignored in silence.) */
TEST_CASE(unusable_local_pair_is_said, "environment",
          "a local rank not below its size, or not a number, is said")
{
    clear_launchers();
    setenv("LOCAL_RANK", "5", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    expect_ranks(-1, 0,
                 "the local rank 5 (LOCAL_RANK) is not below the local world "
                 "size 2 (LOCAL_WORLD_SIZE)");
    setenv("LOCAL_RANK", "x", 1);
    expect_ranks(-1, 0, "LOCAL_RANK is 'x', not a local rank (0 or more)");
    setenv("LOCAL_RANK", "1", 1);
    setenv("LOCAL_WORLD_SIZE", "two", 1);
    expect_ranks(-1, 0,
                 "LOCAL_WORLD_SIZE is 'two', not a number of local ranks");
    clear_launchers();
    setenv("RF_LOCAL_RANK", "-1", 1);
    setenv("RF_LOCAL_WORLD_SIZE", "2", 1);
    expect_ranks(-1, 0, "RF_LOCAL_RANK is '-1', not a local rank");
    clear_launchers();
}

/* A rank given without the node's size: the budget is the whole mask,
 * and its description says why and what to set. */
TEST_CASE(half_a_local_pair_is_described, "budget",
          "a local rank without its size is described")
{
    struct rf__budget_input in = input(8, 8);
    in.ranks_from = "LOCAL_RANK is set without a LOCAL_WORLD_SIZE above it";
    struct rf__budget b;
    rf__budget_compute(&in, &b);
    CHECK_EQ(b.producers, 8);
    CHECK(b.ranks_unknown == in.ranks_from); /* said at open (resolve.c) */
    CHECK_CONTAINS(b.why, "no local ranks (LOCAL_RANK is set without");
    CHECK_CONTAINS(b.why, "set RF_LOCAL_RANK and RF_LOCAL_WORLD_SIZE");
    /* the longest reason, Slurm's, whole (the advice was cut at "RF_") */
    in.ranks_from = "SLURM_LOCALID is set without this node's count of tasks "
                    "(SLURM_TASKS_PER_NODE with SLURM_NODEID, or "
                    "SLURM_NTASKS_PER_NODE)";
    rf__budget_compute(&in, &b);
    CHECK_CONTAINS(b.why, "SLURM_NTASKS_PER_NODE): the node's ranks are not "
                          "known; set RF_LOCAL_RANK and RF_LOCAL_WORLD_SIZE)");
    /* with a quota from a cgroup 4000 bytes deep: its path is shortened
     * in the middle, and the line still ends whole */
    static char deep[4001];
    memset(deep, 'd', 4000);
    in.quota = 4;
    in.quota_where = deep;
    rf__budget_compute(&in, &b);
    CHECK(strlen(b.why) < RF_CPU_BUDGET_MAX - 1);
    CHECK_CONTAINS(b.why, "...");
    CHECK_CONTAINS(b.why, "set RF_LOCAL_RANK and RF_LOCAL_WORLD_SIZE)");
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs(text, f);
    CHECK_EQ(fclose(f), 0);
}

/* A made-up sysfs: 4 CPUs, two nodes, core ids 0,1 repeating. */
TEST_CASE(topology_from_sysfs, "topology", "read from sysfs")
{
    char root[] = "/tmp/rf-sysfs-XXXXXX";
    CHECK(mkdtemp(root) != NULL);
    char path[512];
    snprintf(path, sizeof(path), "%s/sys/devices/system/cpu", root);
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "mkdir -p %s", path);
    CHECK_EQ(system(cmd), 0);
    snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/online", root);
    write_text(path, "0-3\n");
    for (int c = 0; c < 4; c++) {
        snprintf(cmd, sizeof(cmd),
                 "mkdir -p %s/sys/devices/system/cpu/cpu%d/topology "
                 "%s/sys/devices/system/cpu/cpu%d/node%d",
                 root, c, root, c, c / 2);
        CHECK_EQ(system(cmd), 0);
        char text[16];
        snprintf(path, sizeof(path),
                 "%s/sys/devices/system/cpu/cpu%d/topology/core_id", root, c);
        snprintf(text, sizeof(text), "%d\n", c % 2);
        write_text(path, text);
        snprintf(path, sizeof(path),
                 "%s/sys/devices/system/cpu/cpu%d/topology/"
                 "physical_package_id",
                 root, c);
        write_text(path, c < 2 ? "0\n" : "1\n");
    }
    const int cpus[4] = {0, 1, 2, 3};
    int node_of[4], core_of[4];
    rf__budget_topology(root, cpus, 4, node_of, core_of);
    for (int c = 0; c < 4; c++) {
        CHECK_EQ(node_of[c], c / 2);
        CHECK_GE(core_of[c], 0);
    }
    CHECK_NE(core_of[0], core_of[2]); /* same core id, other package */
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    CHECK_EQ(system(cmd), 0);
}

TEST_CASE(format_ranges, "text", "CPU lists as ranges")
{
    const int cpus[] = {0, 1, 2, 3, 8, 10, 11};
    char text[64];
    rf__budget_format_cpus(cpus, 7, text, sizeof(text));
    CHECK(strcmp(text, "0-3,8,10-11") == 0);
}

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
