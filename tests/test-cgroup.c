/*
 * test-cgroup.c - the cgroup limits the library reads (lib/common/cgroup.c)
 * on made-up v1 and v2 hierarchies in a temporary folder (nested limits,
 * usage and page cache, "max", v1's "no limit" value, a quota set only
 * above, a container whose mount shows only its own subtree). A real
 * cgroup is test-cgroup-real.c's.
 */
#include "config.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cgroup.h"
#include "common/internal.h"
#include "harness.h"
#include "scratch.h"
#include "test.h"

static char base[RF__PATH_MAX]; /* the scratch folder (setup) */
static int hierarchies;         /* made-up ones so far, in this case */
SCRATCH_FOLDER_FIXTURE(base, "cgroup")

#define V1_NO_LIMIT "9223372036854771712"

/* ---- made-up hierarchies ------------------------------------------------ */

/* Writes text to dir/rel (dir inside base), making the folders on the
 * way. */
static void put(const char *dir, const char *rel, const char *text)
{
    char path[RF__PATH_MAX];
    rf__format(path, sizeof(path), "%s/%s", dir, rel);
    for (char *p = path + strlen(base) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        CHECK(mkdir(path, 0755) == 0 || errno == EEXIST);
        *p = '/';
    }
    FILE *f = fopen(path, "we");
    CHECK(f);
    CHECK(fputs(text, f) >= 0);
    CHECK_EQ(fclose(f), 0);
}

/* A fresh made-up machine: its /proc/self files, its root folder in dir
 * (dir/root) and the proc folder in proc (dir/proc). */
static void fake(const char *cgroup, const char *mountinfo, char *root,
                 char *proc)
{
    char dir[RF__PATH_MAX];
    rf__format(dir, RF__PATH_MAX, "%s/case-%d-%d", base, (int)getpid(),
               ++hierarchies);
    rf__format(root, RF__PATH_MAX, "%s/root", dir);
    rf__format(proc, RF__PATH_MAX, "%s/proc", dir);
    put(dir, "proc/cgroup", cgroup);
    put(dir, "proc/mountinfo", mountinfo);
    CHECK_EQ(mkdir(root, 0755), 0);
}

static uint64_t room_at(const char *proc, const char *root, char *where)
{
    return rf__cgroup_memory_room_at(proc, root, where, RF__CGROUP_WHERE_MAX);
}

static double quota_at(const char *proc, const char *root, char *where)
{
    return rf__cgroup_cpu_quota_at(proc, root, where, RF__CGROUP_WHERE_MAX);
}

/* Fails, printing both, unless got is want. */
#define CHECK_SAME(got, want) check_same((got), (want), __LINE__)
static void check_same(const char *got, const char *want, int line)
{
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "%s:%d: got \"%s\"\n  wanted \"%s\"\n", __FILE__, line,
                got, want);
        exit(1);
    }
}

/* where must be "the cgroup vVERSION FILE of ROOT/FOLDER". */
static void check_where(const char *where, int version, const char *file,
                        const char *root, const char *folder)
{
    char want[RF__CGROUP_WHERE_MAX];
    rf__format(want, sizeof(want), "the cgroup v%d %s of %s%s", version, file,
               root, folder);
    CHECK_SAME(where, want);
}

#define V1_MOUNTS                                                              \
    "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n"               \
    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup "              \
    "rw,cpu,cpuacct\n"                                                         \
    "34 31 0:31 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n"        \
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup "          \
    "rw,memory\n"                                                              \
    "41 31 0:38 / /sys/fs/cgroup/unified rw shared:9 - cgroup2 cgroup2 rw\n"

#define V1_CGROUP                                                              \
    "5:cpuset:/\n4:memory:/job/step\n2:cpu,cpuacct:/job/step\n0::/\n"

TEST_CASE_LIMIT(test_v1_memory, "made-up",
                "v1 memory: nested limits, usage, no limit", 10)
{
    char root[RF__PATH_MAX], proc[RF__PATH_MAX], where[RF__CGROUP_WHERE_MAX];
    fake(V1_CGROUP, V1_MOUNTS, root, proc);
    const char *m = "sys/fs/cgroup/memory";
    char r[RF__PATH_MAX];
    rf__format(r, sizeof(r), "%s/%s", root, m);
    /* every level unlimited: no room to report */
    put(r, "memory.limit_in_bytes", V1_NO_LIMIT "\n");
    put(r, "memory.usage_in_bytes", "5000000000\n");
    put(r, "job/memory.limit_in_bytes", V1_NO_LIMIT "\n");
    put(r, "job/memory.usage_in_bytes", "900000\n");
    put(r, "job/step/memory.limit_in_bytes", V1_NO_LIMIT "\n");
    put(r, "job/step/memory.usage_in_bytes", "100000\n");
    CHECK(room_at(proc, root, where) == UINT64_MAX);
    CHECK_SAME(where, "");
    /* a limit in the parent only; its usage counts */
    put(r, "job/memory.limit_in_bytes", "1000000\n");
    CHECK_EQ(room_at(proc, root, where), 100000);
    check_where(where, 1, "memory.limit_in_bytes", r, "/job");
    /* a smaller limit below with more room: the parent's room still wins */
    put(r, "job/step/memory.limit_in_bytes", "500000\n");
    CHECK_EQ(room_at(proc, root, where), 100000);
    /* less room below: the leaf wins */
    put(r, "job/step/memory.usage_in_bytes", "450000\n");
    CHECK_EQ(room_at(proc, root, where), 50000);
    check_where(where, 1, "memory.limit_in_bytes", r, "/job/step");
    /* over the limit: no room at all */
    put(r, "job/step/memory.usage_in_bytes", "600000\n");
    CHECK_EQ(room_at(proc, root, where), 0);
    /* another page size's "no limit" is none too */
    put(r, "job/step/memory.limit_in_bytes", "9223372036854710272\n");
    CHECK_EQ(room_at(proc, root, where), 100000);
    /* its page cache (file pages, with those of the cgroups below) is
     * room: the kernel reclaims it before it kills; shared memory is not.
     * The active file pages (the working set) count only by half. */
    put(r, "job/step/memory.limit_in_bytes", "500000\n");
    put(r, "job/step/memory.usage_in_bytes", "450000\n");
    put(r, "job/step/memory.stat",
        "cache 400000\nshmem 50000\ninactive_file 1\n"
        "total_shmem 50000\ntotal_inactive_file 200000\n"
        "total_active_file 200000\n");
    CHECK_EQ(room_at(proc, root, where), 100000); /* the parent's, again */
    put(r, "job/memory.usage_in_bytes", "990000\n");
    put(r, "job/memory.stat", "total_inactive_file 300000\n");
    CHECK_EQ(room_at(proc, root, where), 310000);
    check_where(where, 1, "memory.limit_in_bytes", r, "/job");
    /* more cache than usage: the whole limit; the step's 500000 less
     * 450000 used but 200000 of it inactive file pages and half of its
     * 200000 active ones (its shmem not) is less */
    put(r, "job/memory.stat", "total_inactive_file 2000000\n");
    CHECK_EQ(room_at(proc, root, where), 350000);
    check_where(where, 1, "memory.limit_in_bytes", r, "/job/step");
    /* use_hierarchy 0 (old kernels): the parent does not count ours */
    put(r, "job/memory.use_hierarchy", "0\n");
    put(r, "job/step/memory.limit_in_bytes", V1_NO_LIMIT "\n");
    CHECK(room_at(proc, root, where) == UINT64_MAX);
}

TEST_CASE_LIMIT(test_v1_cpu, "made-up", "v1 CPU quota, set only above", 10)
{
    char root[RF__PATH_MAX], proc[RF__PATH_MAX], where[RF__CGROUP_WHERE_MAX];
    fake(V1_CGROUP, V1_MOUNTS, root, proc);
    char r[RF__PATH_MAX];
    rf__format(r, sizeof(r), "%s/sys/fs/cgroup/cpu,cpuacct", root);
    put(r, "cpu.cfs_quota_us", "-1\n");
    put(r, "cpu.cfs_period_us", "100000\n");
    put(r, "job/cpu.cfs_quota_us", "-1\n");
    put(r, "job/cpu.cfs_period_us", "100000\n");
    put(r, "job/step/cpu.cfs_quota_us", "-1\n");
    put(r, "job/step/cpu.cfs_period_us", "100000\n");
    CHECK(quota_at(proc, root, where) == 0);
    CHECK_SAME(where, "");
    /* a quota in the parent only */
    put(r, "job/cpu.cfs_quota_us", "150000\n");
    CHECK(quota_at(proc, root, where) == 1.5);
    check_where(where, 1, "cpu.cfs_quota_us", r, "/job");
    /* a larger one below does not lift it */
    put(r, "job/step/cpu.cfs_quota_us", "400000\n");
    CHECK(quota_at(proc, root, where) == 1.5);
    /* a smaller one below wins; periods differ */
    put(r, "job/step/cpu.cfs_quota_us", "25000\n");
    put(r, "job/step/cpu.cfs_period_us", "50000\n");
    CHECK(quota_at(proc, root, where) == 0.5);
    check_where(where, 1, "cpu.cfs_quota_us", r, "/job/step");
}

#define V2_MOUNTS                                                              \
    "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 "        \
    "rw,nsdelegate\n"

TEST_CASE_LIMIT(test_v2, "made-up", "v2: memory.max, cpu.max, \"max\"", 10)
{
    char root[RF__PATH_MAX], proc[RF__PATH_MAX], where[RF__CGROUP_WHERE_MAX];
    fake("0::/job/step\n", V2_MOUNTS, root, proc);
    char r[RF__PATH_MAX];
    rf__format(r, sizeof(r), "%s/sys/fs/cgroup", root);
    put(r, "memory.current", "8000000000\n"); /* the root has no max */
    put(r, "job/memory.max", "max\n");
    put(r, "job/memory.current", "800000\n");
    put(r, "job/step/memory.max", "max\n");
    put(r, "job/step/memory.current", "500000\n");
    put(r, "job/cpu.max", "max 100000\n");
    put(r, "job/step/cpu.max", "max 100000\n");
    CHECK(room_at(proc, root, where) == UINT64_MAX);
    CHECK(quota_at(proc, root, where) == 0);
    put(r, "job/step/memory.max", "2000000\n");
    CHECK_EQ(room_at(proc, root, where), 1500000);
    check_where(where, 2, "memory.max", r, "/job/step");
    put(r, "job/memory.max", "1000000\n");
    CHECK_EQ(room_at(proc, root, where), 200000);
    check_where(where, 2, "memory.max", r, "/job");
    /* its file pages are room (v2's memory.stat counts those below): the
     * inactive ones in full, the active ones by half */
    put(r, "job/memory.stat",
        "anon 100000\nfile 500000\nshmem 20000\nactive_file 30000\n"
        "inactive_file 70000\n");
    CHECK_EQ(room_at(proc, root, where), 285000);
    put(r, "job/memory.stat", "inactive_file 0\n");
    put(r, "job/cpu.max", "200000 100000\n");
    CHECK(quota_at(proc, root, where) == 2.0);
    check_where(where, 2, "cpu.max", r, "/job");
    put(r, "job/step/cpu.max", "75000 100000\n");
    CHECK(quota_at(proc, root, where) == 0.75);
    check_where(where, 2, "cpu.max", r, "/job/step");
}

/* The folder found for controller must be expected (under root). */
static void check_folder(const char *proc, const char *root,
                         const char *controller, int version,
                         const char *expected)
{
    char folder[RF__PATH_MAX], want[RF__PATH_MAX];
    CHECK_EQ(
        rf__cgroup_folder_at(proc, root, controller, folder, sizeof(folder)),
        version);
    rf__format(want, sizeof(want), "%s%s", root, expected);
    CHECK_SAME(folder, want);
}

/* A container's view: the mount shows only /kubepods/pod1/ctr, so the
 * path of /proc/self/cgroup is taken relative to that root; where that
 * folder does not exist, or the path lies outside the root, the reading
 * starts from what exists (at worst the mount point). */
TEST_CASE_LIMIT(test_container_mount, "made-up",
                "a container's mount shows its own subtree", 10)
{
    const char *mount = "30 23 0:26 /kubepods/pod1/ctr /sys/fs/cgroup ro - "
                        "cgroup2 cgroup2 rw\n";
    const char *inside[] = {"/kubepods/pod1/ctr/sub", "/kubepods/pod1/ctr",
                            "/kubepods/pod1/ctr/gone/deeper", "/elsewhere",
                            "/kubepods/pod1/ctr2"};
    const char *folder[] = {"/sys/fs/cgroup/sub", "/sys/fs/cgroup",
                            "/sys/fs/cgroup", "/sys/fs/cgroup",
                            "/sys/fs/cgroup"};
    /* and with another mount of the same hierarchy listed first, which
     * does not hold the path */
    char two[512];
    rf__format(two, sizeof(two), "%s%s",
               "29 23 0:26 /other /mnt/other rw - cgroup2 cgroup2 rw\n", mount);
    for (size_t i = 0; i <= sizeof(inside) / sizeof(inside[0]); i++) {
        const bool last = i == sizeof(inside) / sizeof(inside[0]);
        char root[RF__PATH_MAX], proc[RF__PATH_MAX], cgroup[RF__PATH_MAX];
        char where[RF__CGROUP_WHERE_MAX], r[RF__PATH_MAX];
        rf__format(cgroup, sizeof(cgroup), "0::%s\n", inside[last ? 0 : i]);
        fake(cgroup, last ? two : mount, root, proc);
        rf__format(r, sizeof(r), "%s/sys/fs/cgroup", root);
        put(r, "memory.max", "300000\n");
        put(r, "memory.current", "100000\n");
        put(r, "sub/memory.max", "max\n");
        put(r, "sub/memory.current", "1000\n");
        put(root, "mnt/other/memory.max", "1000\n");
        check_folder(proc, root, "memory", 2, folder[last ? 0 : i]);
        CHECK_EQ(room_at(proc, root, where), 200000);
        check_where(where, 2, "memory.max", r, "");
    }
}

/* A hybrid host: memory on v1, and a v2 hierarchy beside it. Both count;
 * mount points may hold escaped spaces. */
TEST_CASE_LIMIT(test_hybrid, "made-up", "hybrid: v1 memory, v2 for the rest",
                10)
{
    const char *mounts =
        "35 31 0:32 / /sys/fs/cgroup/my\\040memory rw - cgroup cgroup "
        "rw,memory\n"
        "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
    char root[RF__PATH_MAX], proc[RF__PATH_MAX], where[RF__CGROUP_WHERE_MAX];
    char v1[RF__PATH_MAX], v2[RF__PATH_MAX];
    fake("4:memory:/job\n0::/job\n", mounts, root, proc);
    rf__format(v1, sizeof(v1), "%s/sys/fs/cgroup/my memory", root);
    rf__format(v2, sizeof(v2), "%s/sys/fs/cgroup/unified", root);
    put(v1, "job/memory.limit_in_bytes", "1000000\n");
    put(v1, "job/memory.usage_in_bytes", "0\n");
    check_folder(proc, root, "memory", 1, "/sys/fs/cgroup/my memory/job");
    CHECK_EQ(room_at(proc, root, where), 1000000);
    check_where(where, 1, "memory.limit_in_bytes", v1, "/job");
    put(v2, "job/memory.max", "300000\n");
    CHECK_EQ(room_at(proc, root, where), 300000);
    check_where(where, 2, "memory.max", v2, "/job");
    /* no cpu hierarchy on v1: the v2 one */
    check_folder(proc, root, "cpu", 2, "/sys/fs/cgroup/unified/job");
}

/* Nothing to read: no limit, no quota, no folder. */
TEST_CASE_LIMIT(test_nothing_mounted, "made-up", "nothing mounted", 10)
{
    char root[RF__PATH_MAX], proc[RF__PATH_MAX], where[RF__CGROUP_WHERE_MAX];
    char folder[RF__PATH_MAX];
    fake("4:memory:/job\n0::/job\n", "", root, proc);
    CHECK(room_at(proc, root, where) == UINT64_MAX);
    CHECK(quota_at(proc, root, where) == 0);
    CHECK_EQ(rf__cgroup_folder_at(proc, root, "memory", folder, sizeof(folder)),
             0);
    /* no /proc at all */
    CHECK(room_at("/nonexistent", root, where) == UINT64_MAX);
    CHECK(quota_at("/nonexistent", root, where) == 0);
}

int main(int argc, char **argv)
{
    return TEST_MAIN_WITH(argc, argv, scratch_setup, scratch_teardown);
}
