/*
 * resources.h - what this process may still take from the machine: memory
 * (the kernel's and its cgroups' limits), file descriptors, and the CPUs
 * of its affinity mask. Read at open, so that a loader too large for
 * them is refused with a message that names the limit.
 */
#ifndef RF_COMMON_RESOURCES_H
#define RF_COMMON_RESOURCES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* CPUs in this process's affinity mask, in increasing order. Returns the
 * count (>= 1) and stores at most `max` of them in cpus. */
int rf__affinity_cpus(int *cpus, int max);

/* Bytes of memory this process can still take: the smaller of the
 * kernel's MemAvailable and the room (limit minus usage) under the memory
 * limits of its cgroup and the cgroups above it, v1 or v2 (cgroup.h;
 * UINT64_MAX when none can be read). limited_by (len bytes) gets the
 * limit's name, for a cgroup its file and folder ("the cgroup v1
 * memory.limit_in_bytes of /sys/fs/cgroup/memory/job"). */
uint64_t rf__memory_room(char *limited_by, size_t len);

/* File descriptors this process can still open under RLIMIT_NOFILE
 * (INT32_MAX when unlimited or unknown); *limit gets the limit. */
int rf__fds_free(uint64_t *limit);

/* What to change after a call failed with errno `error` because this
 * process or the system ran out of something (EMFILE, ENFILE, ENOMEM):
 * the limit to raise, in the user's terms, into out (len bytes), and
 * true. False, out untouched, for any other error: the caller's own
 * advice fits it (a file to fix, a path to pass). */
bool rf__advise_on_exhaustion(int error, char *out, size_t len);

/* What to change after fork() or posix_spawn() of producer failed with
 * errno `error`: for EAGAIN (no room for another process: RLIMIT_NPROC,
 * a cgroup's pids.max, the system's limits), that limit and fewer
 * producers (RF_PARAM_PRODUCERS, which the tools and the Python package
 * put in their own terms), into out (len bytes), and true. False, out
 * untouched, for any other error. */
bool rf__advise_on_process_limit(int error, char *out, size_t len);

/* Whether uid 0 in the user namespace whose uid_map is at `uid_map`
 * (/proc/self/uid_map) is another user than root outside it, as in a
 * rootless container ("0 100000 65536"), and so held to RLIMIT_NPROC as
 * root of the system is not. False for the identity map ("0 0
 * 4294967295") and when the file cannot be read. */
bool rf__root_is_another_user(const char *uid_map);

#endif /* RF_COMMON_RESOURCES_H */
