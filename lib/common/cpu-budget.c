/*
 * cpu-budget.c - the default producer count and CPUs of one rank (see
 * cpu-budget.h): the computation, and the reads of the environment,
 * sysfs and cgroups it is computed from. Owns nothing.
 */
#include "config.h"

#include "common/cpu-budget.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cgroup.h"
#include "common/internal.h"

void rf__budget_format_cpus(const int *cpus, int count, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < count && used + 1 < len;) {
        int j = i;
        while (j + 1 < count && cpus[j + 1] == cpus[j] + 1)
            j++;
        const int n = j > i ? snprintf(out + used, len - used, "%s%d-%d",
                                       used ? "," : "", cpus[i], cpus[j])
                            : snprintf(out + used, len - used, "%s%d",
                                       used ? "," : "", cpus[i]);
        used = n < 0 ? len : used + (size_t)n;
        i = j + 1;
    }
}

/* The mask's CPUs in topology order: by NUMA node, then core (so that
 * hyperthread siblings sit side by side), then number. Insertion sort:
 * masks have at most a few hundred CPUs and this runs once per open. */
static void order_by_topology(const struct rf__budget_input *in, int *order)
{
    for (int i = 0; i < in->affinity_count; i++) {
        int k = i;
        const int node = in->node_of ? in->node_of[i] : -1;
        const int core = in->core_of ? in->core_of[i] : -1;
        while (k > 0) {
            const int p = order[k - 1];
            const int pnode = in->node_of ? in->node_of[p] : -1;
            const int pcore = in->core_of ? in->core_of[p] : -1;
            if (pnode < node || (pnode == node && pcore <= core))
                break;
            order[k] = p;
            k--;
        }
        order[k] = i;
    }
}

/* CPUs usable at once: the mask, capped by the quota (rounded down, at
 * least 1). */
static int usable_cpus(const struct rf__budget_input *in)
{
    int usable = in->affinity_count > 0 ? in->affinity_count : 1;
    if (in->quota > 0 && in->quota < usable)
        usable = in->quota < 1 ? 1 : (int)floor(in->quota);
    return usable;
}

/* Whether the mask looks like this rank's own: smaller than what the
 * cpuset allows, as when a launcher binds each rank to its CPUs. */
static bool mask_is_own(const struct rf__budget_input *in)
{
    return in->allowed_count > 0 && in->affinity_count < in->allowed_count;
}

/* This rank's slice of the mask in topology order: rank r of n gets the
 * r-th of n nearly equal, disjoint parts that together cover the mask. */
static void take_slice(const struct rf__budget_input *in, int rank, int size,
                       struct rf__budget *out)
{
    int order[RF__BUDGET_MAX_CPUS];
    const int n = in->affinity_count < RF__BUDGET_MAX_CPUS
                      ? in->affinity_count
                      : RF__BUDGET_MAX_CPUS;
    struct rf__budget_input capped = *in;
    capped.affinity_count = n;
    order_by_topology(&capped, order);
    const int first = (int)((long long)n * rank / size);
    const int end = (int)((long long)n * (rank + 1) / size);
    out->cpu_count = 0;
    for (int i = first; i < end; i++)
        out->cpus[out->cpu_count++] = in->affinity[order[i]];
    /* increasing, for the description and for pinning in order */
    for (int i = 1; i < out->cpu_count; i++)
        for (int k = i; k > 0 && out->cpus[k - 1] > out->cpus[k]; k--) {
            const int t = out->cpus[k];
            out->cpus[k] = out->cpus[k - 1];
            out->cpus[k - 1] = t;
        }
}

static void describe(const struct rf__budget_input *in, int rank, int size,
                     bool own, struct rf__budget *out)
{
    /* The parts' sizes add up to under RF_CPU_BUDGET_MAX, so the line is
     * never cut: a cgroup's path is shortened in its middle to `where`;
     * ranks holds the longest reason a launcher's variables give no local
     * ranks (ranks_from, ~120 bytes) with the advice around it. */
    char mask[160], where[200], quota[sizeof(where) + 32] = "";
    char ranks[400] = "", pinned[200] = ", not pinned";
    rf__budget_format_cpus(in->affinity, in->affinity_count, mask,
                           sizeof(mask));
    rf__copy_elided(where, sizeof(where),
                    in->quota_where ? in->quota_where : "cgroup");
    if (in->quota > 0)
        rf__format(quota, sizeof(quota), ", quota %.2f (%s)", in->quota, where);
    if (own)
        rf__format(ranks, sizeof(ranks), ", the rank's own mask (%s)",
                   size > 1 ? "launcher-bound" : "narrower than the cpuset");
    else if (size > 1)
        rf__format(ranks, sizeof(ranks), ", local rank %d of %d (%s)", rank,
                   size, in->ranks_from ? in->ranks_from : "set");
    else if (in->local_rank < 0 && in->ranks_from)
        rf__format(ranks, sizeof(ranks),
                   ", no local ranks (%s: the node's ranks are not known; "
                   "set RF_LOCAL_RANK and RF_LOCAL_WORLD_SIZE)",
                   in->ranks_from);
    if (out->pin) {
        char list[160];
        rf__budget_format_cpus(out->cpus, out->cpu_count, list, sizeof(list));
        rf__format(pinned, sizeof(pinned), "; pinned to %s", list);
    }
    rf__format(out->why, sizeof(out->why), "%d CPU%s: affinity %s%s%s%s",
               out->producers, out->producers == 1 ? "" : "s", mask, quota,
               ranks, pinned);
}

void rf__budget_unpin(struct rf__budget *b, const char *reason)
{
    if (!b->pin)
        return;
    b->pin = false;
    char *pinned = strstr(b->why, "; pinned to ");
    if (pinned)
        rf__format(pinned, sizeof(b->why) - (size_t)(pinned - b->why),
                   ", not pinned (%s)", reason);
}

void rf__budget_compute(const struct rf__budget_input *in,
                        struct rf__budget *out)
{
    const bool ranked = in->local_size > 1 && in->local_rank >= 0 &&
                        in->local_rank < in->local_size;
    const int size = ranked ? in->local_size : 1;
    const int rank = ranked ? in->local_rank : 0;
    const bool own = mask_is_own(in);
    const int usable = usable_cpus(in);
    memset(out, 0, sizeof(*out));
    if (own || size == 1) {
        /* The whole mask is this rank's; a quota only lowers the count.
         * Pinned from the first CPU as before, unless the mask is the
         * launcher's binding, which it keeps. */
        out->producers = usable;
        take_slice(in, 0, 1, out);
        out->pin = !own && in->affinity_count > 0;
    } else {
        const int share = usable / size;
        take_slice(in, rank, size, out);
        out->producers = share >= 1 ? share : 1;
        /* Under one CPU each, ranks must share CPUs: pinning would stack
         * them; the scheduler spreads them better. */
        out->pin = share >= 1 && out->cpu_count > 0;
    }
    out->ranks_unknown =
        !ranked && !own && in->local_rank < 0 ? in->ranks_from : NULL;
    /* a local rank known, even 0 of 1 (one rank per node: torchrun
     * --nproc_per_node=1, Slurm's one task per node), is not alone */
    out->alone = !own && in->local_rank < 0;
    describe(in, rank, size, own, out);
}

/* ---- reading the inputs ---------------------------------------------- */

/* A decimal in [min, max] with nothing after it, from variable `name`. */
static bool env_int(const char *name, long min, long max, long *out)
{
    const char *text = getenv(name);
    if (!text || !*text)
        return false;
    char *end = NULL;
    errno = 0;
    const long v = strtol(text, &end, 10);
    if (errno || *end || v < min || v > max)
        return false;
    *out = v;
    return true;
}

/* Slurm's tasks on this node: SLURM_NODEID's entry of
 * SLURM_TASKS_PER_NODE ("2(x3),1": nodes 0-2 run 2 tasks, node 3 runs
 * 1), else SLURM_NTASKS_PER_NODE; *from gets the pair's name. */
static bool slurm_tasks_here(long *tasks, const char **from)
{
    *from = "SLURM_LOCALID/SLURM_TASKS_PER_NODE";
    long node = 0;
    const char *list = getenv("SLURM_TASKS_PER_NODE");
    if (list && env_int("SLURM_NODEID", 0, INT_MAX, &node)) {
        for (const char *p = list; *p;) {
            char *end = NULL;
            const long n = strtol(p, &end, 10);
            long times = 1;
            if (end == p)
                break;
            if (strncmp(end, "(x", 2) == 0) {
                times = strtol(end + 2, &end, 10);
                end += *end == ')';
            }
            if (node < times) {
                *tasks = n;
                return n > 0;
            }
            node -= times;
            p = *end == ',' ? end + 1 : end;
        }
    }
    *from = "SLURM_LOCALID/SLURM_NTASKS_PER_NODE";
    return env_int("SLURM_NTASKS_PER_NODE", 1, INT_MAX, tasks);
}

/* Slurm's local rank, SLURM_LOCALID, when it is set: its pair's name in
 * *from and true, or false with why it gives no local ranks in out (a
 * value that is not a number, no count of this node's tasks, a rank not
 * below it). */
static bool slurm_local_rank(long *rank, long *size, const char **from,
                             char *out, size_t len)
{
    const char *text = getenv("SLURM_LOCALID");
    const bool tasks = slurm_tasks_here(size, from);
    if (!env_int("SLURM_LOCALID", 0, INT_MAX, rank))
        rf__format(out, len,
                   "SLURM_LOCALID is '%.40s', not a local rank (0 or more)",
                   text);
    else if (!tasks)
        rf__format(out, len,
                   "SLURM_LOCALID is set without this node's count of tasks "
                   "(SLURM_TASKS_PER_NODE with SLURM_NODEID, or "
                   "SLURM_NTASKS_PER_NODE)");
    else if (*rank >= *size)
        rf__format(out, len,
                   "the local rank %ld (SLURM_LOCALID) is not below this "
                   "node's %ld tasks (%s)",
                   *rank, *size, strchr(*from, '/') + 1);
    else
        return true;
    return false;
}

/* Why a pair whose rank is set gives no local ranks, into `out`: a
 * value that is not a number, a rank not below the size, or no size
 * (`alone`, the pair's own words). */
static void pair_refused(const char *const pair[4], char *out, size_t len)
{
    const char *rank_text = getenv(pair[0]), *size_text = getenv(pair[1]);
    long r = 0, s = 0;
    if (!env_int(pair[0], 0, INT_MAX, &r))
        rf__format(out, len, "%s is '%.40s', not a local rank (0 or more)",
                   pair[0], rank_text);
    else if (!size_text || !*size_text)
        rf__format(out, len, "%s", pair[3]);
    else if (!env_int(pair[1], 1, INT_MAX, &s))
        rf__format(out, len,
                   "%s is '%.40s', not a number of local ranks (1 or more)",
                   pair[1], size_text);
    else
        rf__format(out, len,
                   "the local rank %ld (%s) is not below the local world size "
                   "%ld (%s)",
                   r, pair[0], s, pair[1]);
}

void rf__budget_local_ranks(int *rank, int *size, const char **from)
{
    /* rank, size, the pair's name, and what is said when the rank is set
     * but its size is not (a launcher that sets LOCAL_RANK alone, as
     * PyTorch Lightning's and many sbatch scripts do) */
    static const char *const pairs[][4] = {
        {"RF_LOCAL_RANK", "RF_LOCAL_WORLD_SIZE",
         "RF_LOCAL_RANK/RF_LOCAL_WORLD_SIZE",
         "RF_LOCAL_RANK is set without an RF_LOCAL_WORLD_SIZE above it"},
        {"LOCAL_RANK", "LOCAL_WORLD_SIZE", "LOCAL_RANK/LOCAL_WORLD_SIZE",
         "LOCAL_RANK is set without a LOCAL_WORLD_SIZE above it"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
         "OMPI_COMM_WORLD_LOCAL_RANK/_LOCAL_SIZE",
         "OMPI_COMM_WORLD_LOCAL_RANK is set without an "
         "OMPI_COMM_WORLD_LOCAL_SIZE above it"},
        /* MPICH's and Intel MPI's Hydra launcher */
        {"MPI_LOCALRANKID", "MPI_LOCALNRANKS",
         "MPI_LOCALRANKID/MPI_LOCALNRANKS",
         "MPI_LOCALRANKID is set without an MPI_LOCALNRANKS above it"},
    };
    /* the reason, read by the caller at once (this thread's own) */
    static _Thread_local char refused[200];
    long r = 0, s = 0;
    *rank = -1;
    *size = 0;
    *from = NULL;
    const char *half = NULL;
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        const char *rank_text = getenv(pairs[i][0]);
        if (!rank_text || !*rank_text)
            continue;
        if (env_int(pairs[i][0], 0, INT_MAX, &r) &&
            env_int(pairs[i][1], 1, INT_MAX, &s) && r < s) {
            *rank = (int)r;
            *size = (int)s;
            *from = pairs[i][2];
            return;
        }
        if (!half) {
            pair_refused(pairs[i], refused, sizeof(refused));
            half = refused;
        }
    }
    const char *slurm = getenv("SLURM_LOCALID");
    if (slurm && *slurm) {
        char why[200];
        const char *pair = NULL;
        if (slurm_local_rank(&r, &s, &pair, why, sizeof(why))) {
            *rank = (int)r;
            *size = (int)s;
            *from = pair;
            return;
        }
        if (!half) {
            rf__format(refused, sizeof(refused), "%s", why);
            half = refused;
        }
    }
    *from = half; /* no local ranks: say why, where a rank was given */
}

/* Reads one small number from a sysfs file; -1 when it cannot. */
static int read_int(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char text[32] = "";
    const char *got = fgets(text, sizeof(text), f);
    fclose(f);
    char *end = NULL;
    const long v = got ? strtol(text, &end, 10) : -1;
    return got && end != text && v >= 0 && v <= INT_MAX ? (int)v : -1;
}

/* CPUs in a list file ("0-3,8"); 0 when it cannot be read. */
static int count_cpulist(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char text[4096] = "";
    const char *got = fgets(text, sizeof(text), f);
    fclose(f);
    int count = 0;
    for (const char *p = text; got && *p && *p != '\n';) {
        char *end = NULL;
        const long lo = strtol(p, &end, 10);
        long hi = lo;
        if (end == p)
            break;
        if (*end == '-')
            hi = strtol(end + 1, &end, 10);
        count += hi >= lo ? (int)(hi - lo + 1) : 0;
        p = *end == ',' ? end + 1 : end;
    }
    return count;
}

/* The NUMA node of cpu: the "nodeN" link in its sysfs folder; -1 on a
 * machine without NUMA in sysfs. */
static int node_of_cpu(const char *root, int cpu)
{
    char path[512];
    rf__format(path, sizeof(path), "%s/sys/devices/system/cpu/cpu%d", root,
               cpu);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int node = -1;
    const struct dirent *e;
    while (node < 0 && (e = readdir(d)))
        if (strncmp(e->d_name, "node", 4) == 0 && e->d_name[4] >= '0' &&
            e->d_name[4] <= '9')
            node = (int)strtol(e->d_name + 4, NULL, 10);
    closedir(d);
    return node;
}

/* What the cpuset of this process's cgroup allows, else what is online. */
static int allowed_cpus(const char *root)
{
    char folder[RF__CGROUP_WHERE_MAX], path[RF__CGROUP_WHERE_MAX + 64];
    const int version = rf__cgroup_folder_at("/proc/self", root, "cpuset",
                                             folder, sizeof(folder));
    int n = 0;
    if (version == 2) {
        rf__format(path, sizeof(path), "%s/cpuset.cpus.effective", folder);
        n = count_cpulist(path);
    } else if (version == 1) {
        rf__format(path, sizeof(path), "%s/cpuset.effective_cpus", folder);
        n = count_cpulist(path);
        if (n == 0) {
            rf__format(path, sizeof(path), "%s/cpuset.cpus", folder);
            n = count_cpulist(path);
        }
    }
    if (n == 0) {
        rf__format(path, sizeof(path), "%s/sys/devices/system/cpu/online",
                   root);
        n = count_cpulist(path);
    }
    return n;
}

int rf__budget_topology(const char *sysfs_root, const int *cpus, int count,
                        int *node_of, int *core_of)
{
    for (int i = 0; i < count; i++) {
        char path[512];
        rf__format(path, sizeof(path),
                   "%s/sys/devices/system/cpu/cpu%d/topology/core_id",
                   sysfs_root, cpus[i]);
        const int core = read_int(path);
        rf__format(path, sizeof(path),
                   "%s/sys/devices/system/cpu/cpu%d/topology/"
                   "physical_package_id",
                   sysfs_root, cpus[i]);
        const int package = read_int(path);
        /* core ids repeat across packages: make them unique */
        core_of[i] = core < 0 ? -1 : (package < 0 ? 0 : package) * 65536 + core;
        node_of[i] = node_of_cpu(sysfs_root, cpus[i]);
    }
    return allowed_cpus(sysfs_root);
}

void rf__budget_of_process(struct rf__budget *out)
{
    int cpus[RF__BUDGET_MAX_CPUS], node_of[RF__BUDGET_MAX_CPUS];
    int core_of[RF__BUDGET_MAX_CPUS];
    char quota_where[RF__CGROUP_WHERE_MAX];
    struct rf__budget_input in = {.affinity = cpus,
                                  .node_of = node_of,
                                  .core_of = core_of,
                                  .quota_where = quota_where};
    const int n = rf__affinity_cpus(cpus, RF__BUDGET_MAX_CPUS);
    in.affinity_count = n < RF__BUDGET_MAX_CPUS ? n : RF__BUDGET_MAX_CPUS;
    in.quota = rf__cgroup_cpu_quota(quota_where, sizeof(quota_where));
    rf__budget_local_ranks(&in.local_rank, &in.local_size, &in.ranks_from);
    in.allowed_count =
        rf__budget_topology("", cpus, in.affinity_count, node_of, core_of);
    rf__budget_compute(&in, out);
}
