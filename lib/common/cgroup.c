/*
 * cgroup.c - reads the limits that this process's cgroups put on it (the
 * memory it may still take, its CPU time quota), for the checks at open
 * that turn a limit into a clear error instead of an OOM kill.
 *
 * Both versions are read, because both are in use: cgroup v1 (one
 * hierarchy per controller, /sys/fs/cgroup/memory/...) on older hosts and
 * in many container runtimes, v2 (one hierarchy) elsewhere, and hybrids
 * with some controllers on each. A limit set on any cgroup above this
 * one applies too, so each hierarchy is walked from this process's
 * cgroup up to the top of what is mounted, and the smallest limit wins.
 *
 * The folder is found from /proc/self/cgroup (the path inside the
 * hierarchy) and /proc/self/mountinfo (where that hierarchy is mounted,
 * and which part of it): inside a container the mount often shows only
 * the container's own subtree, whose root is the path of /proc/self/cgroup
 * or a part of it, so the path is taken relative to the mount's root.
 * Where that leaves a folder that does not exist (the process moved to a
 * cgroup outside the subtree), the walk starts from the deepest part that
 * does, at worst the mount point: a limit seen there still applies.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/cgroup.h"
#include "common/internal.h"

/* Limits at or above this are "no limit": v1 reports none as the largest
 * page count times the page size (9223372036854771712 with 4 KiB pages,
 * other values with other page sizes). */
#define NO_LIMIT (UINT64_C(1) << 62)

/* One hierarchy as this process sees it. */
struct hierarchy {
    int version;               /* 1 or 2 */
    char top[RF__PATH_MAX];    /* its mount point: the walk ends there */
    char folder[RF__PATH_MAX]; /* the cgroup being read, inside top */
};

/* Called on each cgroup from this process's own (own is true) up to the
 * top; returns false to stop the walk there. */
typedef bool (*visit_fn)(const struct hierarchy *h, bool own, void *state);

/* Whether the comma-separated list holds word. */
static bool has_word(const char *list, const char *word)
{
    const size_t n = strlen(word);
    for (const char *p = list; p; p = strchr(p, ',')) {
        p += *p == ',';
        if (strncmp(p, word, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return true;
    }
    return false;
}

/* mountinfo writes space, tab, newline and backslash in paths as octal
 * escapes ("\040"); decodes them in place. */
static void unescape(char *s)
{
    char *out = s;
    for (const char *in = s; *in; out++) {
        if (in[0] == '\\' && in[1] >= '0' && in[1] <= '3' && in[2] >= '0' &&
            in[2] <= '7' && in[3] >= '0' && in[3] <= '7') {
            *out =
                (char)((in[1] - '0') * 64 + (in[2] - '0') * 8 + (in[3] - '0'));
            in += 4;
        } else {
            *out = *in++;
        }
    }
    *out = '\0';
}

/* This process's path in the v1 hierarchy of controller, or in the v2 one
 * when controller is NULL, from proc_self/cgroup ("4:memory:/job",
 * "0::/job"). */
static bool own_path(const char *proc_self, const char *controller, char *path,
                     size_t len)
{
    char name[RF__PATH_MAX];
    rf__format(name, sizeof(name), "%s/cgroup", proc_self);
    FILE *f = fopen(name, "re");
    if (!f)
        return false;
    char line[RF__PATH_MAX + 256];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *controllers = strchr(line, ':');
        char *at = controllers ? strchr(controllers + 1, ':') : NULL;
        if (!at)
            continue;
        *controllers++ = '\0';
        *at++ = '\0';
        const bool v2 = strcmp(line, "0") == 0 && controllers[0] == '\0';
        found = controller ? !v2 && has_word(controllers, controller) : v2;
        if (found)
            rf__format(path, len, "%s", at);
    }
    fclose(f);
    return found;
}

/* The part of path below the mount's root, or NULL when the path lies
 * outside it. */
static const char *below_root(const char *path, const char *root)
{
    if (strcmp(root, "/") == 0)
        return path;
    const size_t n = strlen(root);
    if (strncmp(path, root, n) != 0 || (path[n] != '/' && path[n] != '\0'))
        return NULL;
    return path + n;
}

/* Whether a mountinfo line mounts the hierarchy wanted: v1's with
 * controller among its options, or v2's when controller is NULL. Fills
 * root and point (the line's fields 4 and 5, decoded). */
static bool mounts_hierarchy(const char *line, const char *controller,
                             char *root, char *point)
{
    const char *dash = strstr(line, " - ");
    char type[64], source[RF__PATH_MAX], options[1024];
    if (!dash || sscanf(line, "%*s %*s %*s %4095s %4095s", root, point) != 2 ||
        sscanf(dash + 3, "%63s %4095s %1023s", type, source, options) != 3)
        return false;
    unescape(root);
    unescape(point);
    if (!controller)
        return strcmp(type, "cgroup2") == 0;
    return strcmp(type, "cgroup") == 0 && has_word(options, controller);
}

/* Sets h->top and h->folder for the cgroup at path: under the mount of
 * that hierarchy whose root holds the path, else under the first mount of
 * it (at its mount point). False when the hierarchy is not mounted. */
static bool locate(const char *proc_self, const char *root_dir,
                   const char *controller, const char *path,
                   struct hierarchy *h)
{
    char name[RF__PATH_MAX];
    rf__format(name, sizeof(name), "%s/mountinfo", proc_self);
    FILE *f = fopen(name, "re");
    if (!f)
        return false;
    char line[3 * RF__PATH_MAX], root[RF__PATH_MAX], point[RF__PATH_MAX];
    bool found = false, inside = false;
    while (!inside && fgets(line, sizeof(line), f)) {
        if (!mounts_hierarchy(line, controller, root, point))
            continue;
        const char *rel = below_root(path, root);
        if (found && !rel)
            continue;
        inside = rel != NULL;
        found = true;
        rf__format(h->top, sizeof(h->top), "%s%s", root_dir, point);
        rf__format(h->folder, sizeof(h->folder), "%s%s", h->top,
                   rel ? rel : "");
    }
    fclose(f);
    return found;
}

static bool is_folder(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Moves h->folder one level up; false once it is the top. */
static bool go_up(struct hierarchy *h)
{
    const size_t top = strlen(h->top);
    char *slash = strrchr(h->folder, '/');
    if (strlen(h->folder) <= top || !slash || slash < h->folder + top)
        return false;
    *slash = '\0';
    return true;
}

/* Finds this process's cgroup in the v1 hierarchy of controller (v2 when
 * NULL), going up to the deepest folder that exists. */
static bool find_hierarchy(const char *proc_self, const char *root_dir,
                           const char *controller, struct hierarchy *h)
{
    char path[RF__PATH_MAX];
    if (!own_path(proc_self, controller, path, sizeof(path)) ||
        !locate(proc_self, root_dir, controller, path, h))
        return false;
    h->version = controller ? 1 : 2;
    /* "/" leaves a trailing slash, which go_up() would take for a level */
    const size_t n = strlen(h->folder);
    if (n > strlen(h->top) && h->folder[n - 1] == '/')
        h->folder[n - 1] = '\0';
    while (!is_folder(h->folder))
        if (!go_up(h))
            return false;
    return true;
}

static void walk(struct hierarchy *h, visit_fn visit, void *state)
{
    bool own = true;
    do {
        if (!visit(h, own, state))
            return;
        own = false;
    } while (go_up(h));
}

/* Visits every cgroup that governs this process for controller: in its
 * v1 hierarchy and in the v2 one (a hybrid host has both). */
static void walk_all(const char *proc_self, const char *root_dir,
                     const char *controller, visit_fn visit, void *state)
{
    struct hierarchy h;
    if (find_hierarchy(proc_self, root_dir, controller, &h))
        walk(&h, visit, state);
    if (find_hierarchy(proc_self, root_dir, NULL, &h))
        walk(&h, visit, state);
}

/* The first line of folder/file, without its newline. */
static bool read_line(const char *folder, const char *file, char *text,
                      size_t len)
{
    char name[RF__PATH_MAX];
    rf__format(name, sizeof(name), "%s/%s", folder, file);
    FILE *f = fopen(name, "re");
    if (!f)
        return false;
    const bool got = fgets(text, (int)len, f) != NULL;
    fclose(f);
    text[strcspn(text, "\n")] = '\0';
    return got;
}

/* A number from folder/file; "max" reads as UINT64_MAX. */
static bool read_u64(const char *folder, const char *file, uint64_t *value)
{
    char text[64] = "";
    if (!read_line(folder, file, text, sizeof(text)))
        return false;
    if (strncmp(text, "max", 3) == 0) {
        *value = UINT64_MAX;
        return true;
    }
    char *end = NULL;
    *value = strtoull(text, &end, 10);
    return end != text;
}

static void describe(char *where, size_t len, const struct hierarchy *h,
                     const char *file)
{
    rf__format(where, len, "the cgroup v%d %s of %s", h->version, file,
               h->folder);
}

struct room {
    uint64_t bytes;
    char *where;
    size_t where_len;
};

/* The page cache charged to the cgroup at `folder` that can be counted
 * as room: its inactive file pages in full and half of its active ones
 * (memory.stat; v1's total_ figures cover the cgroups below, as
 * memory.usage_in_bytes does). Not all of it: the kernel's own
 * MemAvailable (si_mem_available(), in mm/show_mem.c, earlier in
 * mm/page_alloc.c) keeps half of the page cache, or the low watermark's
 * worth where that is less, as not available, "otherwise the system will
 * start swapping or thrashing". A cgroup has no watermark, and its
 * active file pages are its working set: the program's own mapped
 * libraries (hundreds of MB for torch), the dataset pages it reads again
 * and again, which a ring taking their room would make it read back from
 * disk. Reclaim takes the inactive list first, so the half kept is taken
 * from the active one.
 * Shared memory (the ring itself, tmpfs) is not among them: it sits
 * with the anonymous pages. 0 when unread. */
static uint64_t reclaimable_cache(const char *folder, bool v1)
{
    char name[RF__PATH_MAX];
    rf__format(name, sizeof(name), "%s/memory.stat", folder);
    FILE *f = fopen(name, "re");
    if (!f)
        return 0;
    const char *inactive_key = v1 ? "total_inactive_file " : "inactive_file ";
    const char *active_key = v1 ? "total_active_file " : "active_file ";
    uint64_t inactive = 0, active = 0;
    char line[128];
    while (fgets(line, sizeof(line), f)) {
        const size_t ni = strlen(inactive_key), na = strlen(active_key);
        if (strncmp(line, inactive_key, ni) == 0)
            inactive = strtoull(line + ni, NULL, 10);
        else if (strncmp(line, active_key, na) == 0)
            active = strtoull(line + na, NULL, 10);
    }
    fclose(f);
    return inactive + active / 2;
}

static bool memory_level(const struct hierarchy *h, bool own, void *state)
{
    struct room *r = state;
    const bool v1 = h->version == 1;
    uint64_t value = 0;
    /* v1 with use_hierarchy 0 (which older kernels allowed) does not
     * charge this process's pages to that cgroup or any above it. */
    if (v1 && !own && read_u64(h->folder, "memory.use_hierarchy", &value) &&
        value == 0)
        return false;
    const char *limit_file = v1 ? "memory.limit_in_bytes" : "memory.max";
    uint64_t limit = 0;
    if (!read_u64(h->folder, limit_file, &limit) || limit >= NO_LIMIT)
        return true;
    uint64_t used = 0; /* unknown: the limit alone is still a bound */
    if (!read_u64(h->folder, v1 ? "memory.usage_in_bytes" : "memory.current",
                  &used))
        used = 0;
    /* A cgroup that has read or written files holds their pages up to its
     * limit: counted as used, a 200 MB cgroup that wrote 400 MB had no
     * room for a 1 MB ring, though the kernel gives most of those pages
     * back (which of them: reclaimable_cache()). */
    const uint64_t cache = reclaimable_cache(h->folder, v1);
    used = used > cache ? used - cache : 0;
    const uint64_t room = used < limit ? limit - used : 0;
    if (room < r->bytes) {
        r->bytes = room;
        describe(r->where, r->where_len, h, limit_file);
    }
    return true;
}

uint64_t rf__cgroup_memory_room_at(const char *proc_self, const char *root,
                                   char *where, size_t where_len)
{
    struct room r = {UINT64_MAX, where, where_len};
    where[0] = '\0';
    walk_all(proc_self, root, "memory", memory_level, &r);
    return r.bytes;
}

uint64_t rf__cgroup_memory_room(char *where, size_t where_len)
{
    return rf__cgroup_memory_room_at("/proc/self", "", where, where_len);
}

/* Reads a decimal number at *text and moves *text past it; false when
 * there is none ("max", an empty file). */
static bool take_number(const char **text, long long *value)
{
    char *end = NULL;
    errno = 0;
    *value = strtoll(*text, &end, 10);
    if (end == *text || errno != 0)
        return false;
    *text = end;
    return true;
}

/* The quota of one cgroup in CPUs, 0 when it sets none. */
static double level_cpus(const struct hierarchy *h, const char **file)
{
    long long quota = -1, period = 0;
    char text[64] = "";
    const char *at = text;
    if (h->version == 2) {
        *file = "cpu.max"; /* "QUOTA PERIOD", or "max PERIOD" for none */
        if (!read_line(h->folder, *file, text, sizeof(text)) ||
            !take_number(&at, &quota) || !take_number(&at, &period))
            return 0;
    } else {
        *file = "cpu.cfs_quota_us"; /* -1 for none */
        if (!read_line(h->folder, *file, text, sizeof(text)) ||
            !take_number(&at, &quota))
            return 0;
        at = text;
        if (!read_line(h->folder, "cpu.cfs_period_us", text, sizeof(text)) ||
            !take_number(&at, &period))
            return 0;
    }
    return quota > 0 && period > 0 ? (double)quota / (double)period : 0;
}

struct quota {
    double cpus; /* 0: none found yet */
    char *where;
    size_t where_len;
};

static bool cpu_level(const struct hierarchy *h, bool own, void *state)
{
    (void)own;
    struct quota *q = state;
    const char *file = NULL;
    const double cpus = level_cpus(h, &file);
    if (cpus > 0 && (q->cpus == 0 || cpus < q->cpus)) {
        q->cpus = cpus;
        describe(q->where, q->where_len, h, file);
    }
    return true;
}

double rf__cgroup_cpu_quota_at(const char *proc_self, const char *root,
                               char *where, size_t where_len)
{
    struct quota q = {0, where, where_len};
    where[0] = '\0';
    walk_all(proc_self, root, "cpu", cpu_level, &q);
    return q.cpus;
}

double rf__cgroup_cpu_quota(char *where, size_t where_len)
{
    return rf__cgroup_cpu_quota_at("/proc/self", "", where, where_len);
}

int rf__cgroup_folder_at(const char *proc_self, const char *root,
                         const char *controller, char *folder, size_t len)
{
    struct hierarchy h;
    int version = 0;
    if (find_hierarchy(proc_self, root, controller, &h) ||
        find_hierarchy(proc_self, root, NULL, &h))
        version = h.version;
    if (version)
        rf__format(folder, len, "%s", h.folder);
    return version;
}
