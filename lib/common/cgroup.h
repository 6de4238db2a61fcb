/*
 * cgroup.h - the limits that this process's cgroups put on it: the memory
 * it may still take and its CPU time quota, read from cgroup v1 and v2
 * alike, wherever their hierarchies are mounted (cgroup.c).
 */
#ifndef RF_CGROUP_H
#define RF_CGROUP_H

#include <stddef.h>
#include <stdint.h>

/* Room for a `where` text: "the cgroup v1 memory.limit_in_bytes of " and
 * a folder. */
#define RF__CGROUP_WHERE_MAX (4096 + 64)

/* Bytes this process may still take under the memory limits of its cgroup
 * and of every cgroup above it: the smallest room (limit minus what is
 * already charged, less the page cache the kernel reclaims first: the
 * inactive file pages of memory.stat and half of the active ones) of
 * v1's memory.limit_in_bytes and memory.usage_in_bytes and v2's
 * memory.max and memory.current, as MemAvailable counts part of the
 * page cache. UINT64_MAX when no limit is set
 * or none can be read; a limit of 2^62 or more is none (v1 writes
 * "no limit" as 9223372036854771712). `where` (where_len > 0 bytes) gets
 * the file that sets the smallest room, e.g. "the cgroup v1
 * memory.limit_in_bytes of /sys/fs/cgroup/memory/job": the one to raise
 * ("" when there is no limit). */
uint64_t rf__cgroup_memory_room(char *where, size_t where_len);

/* The CFS bandwidth quota of this process's cgroups, in CPUs: v2's
 * cpu.max ("QUOTA PERIOD", or "max PERIOD" for none) or v1's
 * cpu.cfs_quota_us (-1 for none) over cpu.cfs_period_us, the smallest of
 * its cgroup and of every cgroup above it. 0 when there is no quota (or
 * none can be read). `where` gets the file that sets it, e.g. "the
 * cgroup v2 cpu.max of /sys/fs/cgroup/job" ("" when there is none). A
 * quota caps CPU time, not which CPUs run: 1.5 lets 4 threads on 4 CPUs
 * run 37.5% of the time each, so it is a budget to split, which the
 * affinity mask is not. */
double rf__cgroup_cpu_quota(char *where, size_t where_len);

/* The same reads against another root, for tests on a made-up hierarchy:
 * proc_self stands for /proc/self (its files "cgroup" and "mountinfo"),
 * and each mount point that mountinfo lists is looked for under root
 * ("" for the real file system). */
uint64_t rf__cgroup_memory_room_at(const char *proc_self, const char *root,
                                   char *where, size_t where_len);
double rf__cgroup_cpu_quota_at(const char *proc_self, const char *root,
                               char *where, size_t where_len);

/* The folder of this process's own cgroup in the hierarchy of
 * `controller` ("memory", "cpu"): the v1 hierarchy that has it, else the
 * v2 one. Returns the version (1 or 2), or 0 when neither is mounted.
 * proc_self and root as above ("/proc/self" and "" for the real ones). */
int rf__cgroup_folder_at(const char *proc_self, const char *root,
                         const char *controller, char *folder, size_t len);

#endif /* RF_CGROUP_H */
