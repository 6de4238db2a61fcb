/*
 * proc.h - what /proc says about this test's processes: children, open
 * fds, /dev/shm entries; and how a child of fork() exited. For the tests
 * that fork, kill and count processes.
 */
#ifndef RF_TEST_PROC_H
#define RF_TEST_PROC_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

/* Entries of a directory other than . and .., or -1. */
static inline int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    const struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The state letter of a process ('R', 'S', 'T', 'Z', ...) and its parent,
 * or 0 when it does not exist. */
static inline char process_state(int pid, int *ppid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    const size_t len = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[len] = '\0';
    /* "pid (comm) state ppid ...": comm may hold spaces and parentheses,
     * so parse after the last ')'. */
    const char *close_paren = strrchr(buf, ')');
    if (!close_paren || strlen(close_paren) < 4)
        return 0;
    if (ppid)
        *ppid = (int)strtol(close_paren + 4, NULL, 10);
    return close_paren[2];
}

/* fork() with a pipe from the child to the parent: 0 in the child, with
 * *fd the pipe's write end; the child's pid in the parent, with *fd its
 * read end. Each side's other end is closed. */
static inline pid_t fork_with_pipe(int *fd)
{
    int p[2];
    CHECK_EQ(pipe(p), 0);
    const pid_t child = fork();
    CHECK(child >= 0);
    close(p[child == 0 ? 0 : 1]);
    *fd = p[child == 0 ? 1 : 0];
    return child;
}

/* Waits for a child of fork() and returns its exit status; one a signal
 * ended fails the check. */
static inline int exit_status_of(pid_t child)
{
    int status = 0;
    CHECK_EQ(waitpid(child, &status, 0), child);
    CHECK(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* Gone, or a zombie nobody has reaped yet: it no longer runs. */
static inline bool process_gone(int pid)
{
    const char state = process_state(pid, NULL);
    return state == 0 || state == 'Z' || state == 'X';
}

/* Fills pids with the live (not zombie) children of this process; returns
 * the count. */
static inline int list_children(int *pids, int max)
{
    DIR *d = opendir("/proc");
    CHECK(d);
    int n = 0;
    const struct dirent *e;
    while ((e = readdir(d))) {
        const int pid = (int)strtol(e->d_name, NULL, 10);
        int ppid = 0;
        if (pid <= 0)
            continue;
        const char state = process_state(pid, &ppid);
        if (state && state != 'Z' && ppid == getpid() && n < max)
            pids[n++] = pid;
    }
    closedir(d);
    return n;
}

/* The resident kB of process pid's mappings whose /proc/PID/smaps line
 * names `name` (a memfd shows as "/memfd:NAME (deleted)"), or -1 when it
 * cannot be read. */
static inline long mapping_rss_kb(int pid, const char *name)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    long total = 0;
    bool inside = false;
    while (fgets(line, sizeof(line), f)) {
        /* A mapping's first line starts with its address range in
         * lowercase hex; the lines of its figures, with a capital. */
        if (strchr("0123456789abcdef", line[0]))
            inside = strstr(line, name) != NULL;
        else if (inside && strncmp(line, "Rss:", 4) == 0)
            total += strtol(line + 4, NULL, 10);
    }
    fclose(f);
    return total;
}

/* Maps, read-write and shared, the memfd of this process whose
 * /proc/self/fd link names `name` ("memfd:ringfeed-control"): the tests
 * see the loader's shared memory as a producer does. Fails the test when
 * there is none. */
static inline void *map_memfd(const char *name, size_t *size)
{
    for (int fd = 0; fd < 1024; fd++) {
        char link[64], target[256];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        const ssize_t n = readlink(link, target, sizeof(target) - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        if (!strstr(target, name))
            continue;
        struct stat sb;
        CHECK_EQ(fstat(fd, &sb), 0);
        void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE,
                       MAP_SHARED, fd, 0);
        CHECK(p != MAP_FAILED);
        *size = (size_t)sb.st_size;
        return p;
    }
    CHECK(!"no such memfd");
    return NULL;
}

/* Sanitizers whose allocator aborts on a failed allocation instead of
 * returning NULL (and whose shadow memory fills any cap). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ALLOCATOR_ABORTS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||     \
    __has_feature(memory_sanitizer)
#define ALLOCATOR_ABORTS 1
#endif
#endif

/* The address space this process has mapped, in bytes. */
static inline uint64_t mapped_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    CHECK(f);
    char line[128];
    CHECK(fgets(line, sizeof(line), f));
    fclose(f);
    char *end = NULL;
    const unsigned long long pages = strtoull(line, &end, 10);
    CHECK(end != line);
    return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

#endif /* RF_TEST_PROC_H */
