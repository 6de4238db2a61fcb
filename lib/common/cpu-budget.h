/*
 * cpu-budget.h - how many producers a loader starts by default, and on
 * which CPUs, when it is one rank of several on a node.
 *
 * A training job runs one rank per GPU (torchrun, mpirun, Slurm), each
 * rank with its own loader, often in a container whose CPU limit is a CFS
 * quota. Every rank sees the same affinity mask; one producer per CPU of
 * it, pinned from its first CPU, stacks every rank's producers onto the
 * same CPUs. The budget is instead:
 *
 *   - the CPUs of the affinity mask, capped by the cgroup's CFS quota
 *     (rounded down, at least 1);
 *   - divided among the ranks of the node that share the mask (the local
 *     rank and size from the launcher's environment, or set explicitly);
 *   - each rank pinned to a slice of the mask of its own, disjoint from
 *     the others' and covering the mask, in topology order (NUMA node,
 *     then core, hyperthread siblings together) so that a slice stays
 *     within one node where the sizes allow;
 *   - no pinning when a rank's share is under one CPU, or when its mask
 *     is already its own (a launcher that binds ranks: mpirun --bind-to,
 *     srun --cpu-bind), where the mask is used whole and not divided.
 */
#ifndef RF_COMMON_CPU_BUDGET_H
#define RF_COMMON_CPU_BUDGET_H

#include <stdbool.h>
#include <stddef.h>

#include "ringfeed.h" /* RF_CPU_BUDGET_MAX */

/* CPUs a budget can name; more are counted but not listed. */
#define RF__BUDGET_MAX_CPUS 1024

/* What the budget is computed from. */
struct rf__budget_input {
    const int *affinity; /* the mask's CPUs, increasing */
    int affinity_count;
    int allowed_count;       /* CPUs the cgroup's cpuset (else the machine)
                                allows: a mask smaller than this is the
                                rank's own; 0 = unknown */
    double quota;            /* CFS quota in CPUs; 0 = none */
    const char *quota_where; /* the file that sets it */
    int local_rank;          /* this rank on the node; < 0: unknown */
    int local_size;          /* ranks on the node; < 1: unknown */
    const char *ranks_from;  /* where they came from ("LOCAL_RANK"); with
                                local_rank < 0, why there are none, or
                                NULL */
    /* Topology of each CPU of the mask (same order), or NULL: its NUMA
     * node and its core (siblings share one); -1 where unknown. */
    const int *node_of;
    const int *core_of;
};

struct rf__budget {
    int producers; /* the default producer count, >= 1 */
    bool pin;      /* pin each producer to one of cpus[] (launch.c) */
    int cpu_count; /* CPUs of this rank's slice */
    int cpus[RF__BUDGET_MAX_CPUS];
    /* why no local ranks were used where one was set ("LOCAL_RANK is set
     * without a LOCAL_WORLD_SIZE above it"), else NULL */
    const char *ranks_unknown;
    /* the whole mask taken, pinned from its first CPU, for want of local
     * ranks (none set or usable, and the mask not the rank's own): right
     * for one process on the node, wrong for one rank of several there.
     * False where a local rank is known, 0 of 1 included (the node's only
     * rank, whose whole mask is its own to pin). */
    bool alone;
    char why[RF_CPU_BUDGET_MAX]; /* "2 CPUs: affinity 0-7, quota 4.0 (the cgroup
                      v2 cpu.max of ...), local rank 1 of 2 (LOCAL_RANK); pinned
                      to 2-3" */
};

/* Computes the budget; never fails (a missing input means no limit from
 * it). */
void rf__budget_compute(const struct rf__budget_input *in,
                        struct rf__budget *out);

/* The budget without pinning, for `reason` (what turned it off): pin is
 * false and why says ", not pinned (REASON)" where it said where. */
void rf__budget_unpin(struct rf__budget *b, const char *reason);

/* The local rank and size from the environment: RF_LOCAL_RANK and
 * RF_LOCAL_WORLD_SIZE when set (the explicit override), else torchrun's
 * LOCAL_RANK / LOCAL_WORLD_SIZE, Open MPI's OMPI_COMM_WORLD_LOCAL_RANK /
 * _LOCAL_SIZE, or Slurm's SLURM_LOCALID with the tasks on this node
 * (SLURM_TASKS_PER_NODE at SLURM_NODEID, else SLURM_NTASKS_PER_NODE).
 * Sets *rank -1 and *size 0 when none is set or a pair is not a pair of
 * plain numbers with rank < size; *from names the variables used, or
 * then says which rank was set without its size (NULL when none was). */
void rf__budget_local_ranks(int *rank, int *size, const char **from);

/* Reads the topology of `count` CPUs under sysfs_root ("" for the real
 * /sys): NUMA node and core of each (-1 where unknown), and how many
 * CPUs the cpuset of this process's cgroup allows, else how many are
 * online (0 when neither can be read). */
int rf__budget_topology(const char *sysfs_root, const int *cpus, int count,
                        int *node_of, int *core_of);

/* The budget of this process, from its affinity mask, cgroups, the
 * environment and sysfs. */
void rf__budget_of_process(struct rf__budget *out);

/* "0-3,8,10-11": a list of increasing CPUs as ranges, into out. */
void rf__budget_format_cpus(const int *cpus, int count, char *out, size_t len);

#endif /* RF_COMMON_CPU_BUDGET_H */
