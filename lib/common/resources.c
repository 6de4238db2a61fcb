/*
 * resources.c - how much memory this process may still take, so that a
 * ring too large for the machine or the cgroup is refused at open with a
 * clear message instead of waking the OOM killer half-way through
 * reserving it; how many file descriptors it may still open; and which
 * CPUs it may run on, for the default number of producers and their
 * pinning. The cgroups' limits themselves are read by cgroup.c.
 */
#include "config.h"

#include "common/resources.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/cgroup.h"
#include "common/text.h"

/* Reads "Key: N kB" from /proc/meminfo; returns bytes or UINT64_MAX. */
static uint64_t meminfo_bytes(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f)
        return UINT64_MAX;
    char line[256];
    uint64_t bytes = UINT64_MAX;
    const size_t key_len = strlen(key);
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, key, key_len) == 0 && line[key_len] == ':') {
            bytes = strtoull(line + key_len + 1, NULL, 10) * 1024;
            break;
        }
    }
    fclose(f);
    return bytes;
}

uint64_t rf__memory_room(char *limited_by, size_t len)
{
    const uint64_t available = meminfo_bytes("MemAvailable");
    const uint64_t cgroup = rf__cgroup_memory_room(limited_by, len);
    if (cgroup < available)
        return cgroup;
    rf__format(limited_by, len, "MemAvailable in /proc/meminfo");
    return available;
}

int rf__fds_free(uint64_t *limit)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) {
        *limit = UINT64_MAX;
        return INT32_MAX;
    }
    *limit = (uint64_t)rl.rlim_cur;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return INT32_MAX; /* cannot tell; let the calls themselves fail */
    uint64_t open_fds = 0;
    const struct dirent *e;
    while ((e = readdir(d)))
        open_fds += e->d_name[0] != '.';
    closedir(d);
    /* Counted while the directory itself was open: one too many. */
    open_fds = open_fds > 0 ? open_fds - 1 : 0;
    if (open_fds >= rl.rlim_cur)
        return 0;
    const uint64_t free_fds = rl.rlim_cur - open_fds;
    return free_fds > INT32_MAX ? INT32_MAX : (int)free_fds;
}

int rf__affinity_cpus(int *cpus, int max)
{
    cpu_set_t set;
    int n = 0;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        for (int c = 0; c < CPU_SETSIZE; c++) {
            if (!CPU_ISSET(c, &set))
                continue;
            if (n < max)
                cpus[n] = c;
            n++;
        }
    }
    if (n == 0) { /* cannot read it: behave as a single CPU */
        if (max > 0)
            cpus[0] = 0;
        n = 1;
    }
    return n;
}

bool rf__advise_on_exhaustion(int error, char *out, size_t len)
{
    struct rlimit files;
    switch (error) {
    case EMFILE:
        if (getrlimit(RLIMIT_NOFILE, &files) == 0 &&
            files.rlim_cur != RLIM_INFINITY)
            rf__format(out, len,
                       "the process has the %llu files open that its limit "
                       "allows: raise its open-files limit (ulimit -n, the "
                       "container's nofile limit)",
                       (unsigned long long)files.rlim_cur);
        else
            rf__format(out, len,
                       "the process has all the files open that its limit "
                       "allows: raise its open-files limit (ulimit -n, the "
                       "container's nofile limit)");
        return true;
    case ENFILE:
        rf__format(out, len,
                   "the system has all the files open that it allows: close "
                   "files elsewhere or raise its limit (sysctl fs.file-max)");
        return true;
    case ENOMEM:
        rf__format(out, len,
                   "the kernel is short of memory: free some, or raise the "
                   "process's memory limit (ulimit -v, the container's "
                   "limit), and try again");
        return true;
    default:
        return false;
    }
}

bool rf__root_is_another_user(const char *uid_map)
{
    FILE *f = fopen(uid_map, "re");
    if (!f)
        return false; /* cannot tell: as root of the system */
    char line[128];
    bool other = false;
    while (fgets(line, sizeof(line), f)) {
        char *end;
        const unsigned long long inside = strtoull(line, &end, 10);
        const unsigned long long outside = strtoull(end, &end, 10);
        const unsigned long long count = strtoull(end, &end, 10);
        if (inside == 0 && count > 0) { /* the range holding uid 0 */
            other = outside != 0;
            break;
        }
    }
    fclose(f);
    return other;
}

bool rf__advise_on_process_limit(int error, char *out, size_t len)
{
    if (error != EAGAIN)
        return false;
    /* Root's processes are not held to RLIMIT_NPROC: only the cgroup's
     * limit or the system's can refuse them. Root of a user namespace
     * (a rootless container) is another user outside it, and held. */
    struct rlimit procs;
    if ((getuid() != 0 || rf__root_is_another_user("/proc/self/uid_map")) &&
        getrlimit(RLIMIT_NPROC, &procs) == 0 && procs.rlim_cur != RLIM_INFINITY)
        rf__format(out, len,
                   "no room for another process: this user may run %llu "
                   "processes and threads in all (ulimit -u, RLIMIT_NPROC), "
                   "or the job's cgroup its pids.max; raise that limit, or "
                   "start fewer producers (RF_PARAM_PRODUCERS)",
                   (unsigned long long)procs.rlim_cur);
    else
        rf__format(out, len,
                   "no room for another process: the job's cgroup allows no "
                   "more (pids.max), or the system none (sysctl "
                   "kernel.threads-max, kernel.pid_max); raise that limit, "
                   "or start fewer producers (RF_PARAM_PRODUCERS)");
    return true;
}
