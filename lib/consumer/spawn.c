/*
 * spawn.c - starting, watching and reaping producer processes. Owns the
 * child records it is handed, nothing else. No threads: death is noticed
 * through each child's pidfd, which the consumer polls.
 *
 * The layers depend one way: common/ on nothing, channel/, source/ and
 * decode/ on common/, producer/ and consumer/ on those, and consumer/
 * never on producer/, with one exception, here and in spawn.h only:
 * producer/producer.h. Fork mode runs rf__producer_run() in the child,
 * with no exec between, so the consumer must call the producer's code
 * itself. (Spawn mode needs only what the helper is started with, struct
 * rf__producer_fds and the signals it catches, which that header
 * declares too.)
 */
#include "config.h"
#include "install-dirs.h" /* RF_PKGLIBEXECDIR, made by make */

#include "consumer/spawn.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fds.h"
#include "common/resources.h"
#include "common/text.h"
#include "producer/producer.h"
#include "ringfeed.h"

extern char **environ;

/* The fds a spawned producer finds its segments on. */
enum {
    CHILD_CONTROL_FD = 3,
    CHILD_ARENA_FD = 4,
    CHILD_BELL_FD = 5,
    CHILD_LISTING_FD = 6,
    CHILD_DATA_FD = 7
};

/* Whether an executable ringfeed-producer sits at one of the places a
 * build tree puts it relative to folder `dir` (the folder of the library
 * or of the program): dir itself (tools/), its parent (tools/.libs/ ->
 * tools/) or the parent's tools/ (.libs/ or tests/ -> tools/). */
static bool helper_near(const char *dir, char *path, size_t len)
{
    static const char *const relative[] = {"", "/..", "/../tools"};
    for (size_t i = 0; i < sizeof(relative) / sizeof(relative[0]); i++) {
        rf__format(path, len, "%s%s/ringfeed-producer", dir, relative[i]);
        if (access(path, X_OK) == 0)
            return true;
    }
    return false;
}

/* The folder of a file's path, in place ("." for a bare name). */
static void cut_to_folder(char *file)
{
    char *slash = strrchr(file, '/');
    if (slash)
        *slash = '\0';
    else
        rf__format(file, 2, ".");
}

/* A build tree's own helper, so that its programs run uninstalled with no
 * setting: found from where this code was loaded (dladdr: the build's
 * .libs/libringfeed.so, or the program itself when linked statically)
 * and from the running program (/proc/self/exe). Preferred to the
 * installed helper: a program of a build tree must not start another
 * version's producers. */
static bool build_tree_helper(char *path, size_t len)
{
    char dir[4096];
    Dl_info info;
    if (dladdr((void *)build_tree_helper, &info) && info.dli_fname &&
        strchr(info.dli_fname, '/')) {
        rf__format(dir, sizeof(dir), "%s", info.dli_fname);
        cut_to_folder(dir);
        if (helper_near(dir, path, len))
            return true;
    }
    const ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
    if (n <= 0)
        return false;
    dir[n] = '\0';
    cut_to_folder(dir);
    return helper_near(dir, path, len);
}

int rf__producer_path(char *path, size_t len, char *why, size_t why_len)
{
    const char *env = getenv("RINGFEED_PRODUCER");
    const bool from_env = env && *env;
    if (!from_env && build_tree_helper(path, len))
        return 0;
    rf__format(path, len, "%s",
               from_env ? env : RF_PKGLIBEXECDIR "/ringfeed-producer");
    struct stat st;
    /* a folder passes access(X_OK): it is said as what it is */
    const bool folder = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    if (!folder && access(path, X_OK) == 0)
        return 0;
    /* The detail stands alone (rf_loader_open() gives it without
     * rf_strerror()'s text), with the advice that fits where the path
     * came from. */
    rf__format(why, why_len,
               "producer helper '%s' (%s) cannot be executed: %s; %s", path,
               from_env ? "RINGFEED_PRODUCER" : "installed path",
               folder ? "it is a folder, not the program" : strerror(errno),
               from_env ? "point RINGFEED_PRODUCER at an executable "
                          "ringfeed-producer, or unset it to use the "
                          "installed helper"
                        : "reinstall ringfeed, or set RINGFEED_PRODUCER "
                          "to the path of ringfeed-producer");
    return RF_E_NO_PRODUCER_BINARY;
}

static int open_pidfd(int pid)
{
    return rf__fd_off_stdio((int)syscall(SYS_pidfd_open, pid, 0));
}

/* The lowest fd number from 3 up that is neither a source nor a
 * target of the moves: the one spare a cycle of moves is broken with. */
static int spare_fd(const int *src, int n)
{
    for (int fd = CHILD_CONTROL_FD;; fd++) {
        bool used = fd < CHILD_CONTROL_FD + n;
        for (int i = 0; i < n && !used; i++)
            used = src[i] == fd;
        if (!used)
            return fd;
    }
}

/* Whether fd is still needed as the source of a move not yet made. */
static bool still_a_source(const int *src, const bool *done, int n, int fd)
{
    for (int i = 0; i < n; i++)
        if (!done[i] && src[i] == fd)
            return true;
    return false;
}

/* dup2(src[i], CHILD_CONTROL_FD + i) for every i, as a parallel move:
 * each target is written only once no move still reads it, and a cycle
 * (3 -> 4 -> 3) goes through one spare number. No number above the
 * highest source or target is needed, so this works close to
 * RLIMIT_NOFILE. A move onto itself goes through the spare too: dup2()
 * of an fd onto itself would keep its close-on-exec flag. */
static int plan_moves(posix_spawn_file_actions_t *fa, int *src, int n)
{
    bool done[6] = {false};
    const int spare = spare_fd(src, n);
    int rc = 0;
    for (int left = n; left > 0 && rc == 0;) {
        int made = 0;
        for (int i = 0; i < n && rc == 0; i++) {
            const int target = CHILD_CONTROL_FD + i;
            if (done[i] || src[i] == target ||
                still_a_source(src, done, n, target))
                continue;
            rc = posix_spawn_file_actions_adddup2(fa, src[i], target);
            done[i] = true;
            made++;
            left--;
        }
        if (made == 0 && rc == 0) { /* only cycles (or self-moves) left */
            int i = 0;
            while (done[i])
                i++;
            rc = posix_spawn_file_actions_adddup2(fa, src[i], spare);
            src[i] = spare;
        }
    }
    return rc;
}

/* Moves fds to 3, 4, 5 (and 6, 7), then the helper's own fd (when
 * helper >= 0) to the next. Returns the helper's fd number in the child
 * in *helper_at (-1 without one), for exec to find it there. */
static int plan_fds(posix_spawn_file_actions_t *fa,
                    const struct rf__producer_fds *fds, int helper,
                    int *helper_at)
{
    int src[6] = {fds->control, fds->arena, fds->bell, fds->listing, fds->data};
    int n = fds->listing < 0 ? 3 : fds->data < 0 ? 4 : 5;
    *helper_at = helper >= 0 ? CHILD_CONTROL_FD + n : -1;
    if (helper >= 0)
        src[n++] = helper;
    int rc = plan_moves(fa, src, n);
#ifdef HAVE_POSIX_SPAWN_FILE_ACTIONS_ADDCLOSEFROM_NP
    /* The caller's sockets and files stay out of the producers (and so
     * does the spare). */
    if (rc == 0)
        rc = posix_spawn_file_actions_addclosefrom_np(fa, CHILD_CONTROL_FD + n);
#endif
    return rc;
}

static int plan_signals(posix_spawnattr_t *attr)
{
    sigset_t caught, all;
    rf__producer_caught_signals(&caught);
    sigfillset(&all);
    int rc = posix_spawnattr_setsigmask(attr, &caught);
    if (rc == 0)
        rc = posix_spawnattr_setsigdefault(attr, &all);
    if (rc == 0)
        rc = posix_spawnattr_setflags(attr, POSIX_SPAWN_SETSIGMASK |
                                                POSIX_SPAWN_SETSIGDEF);
    return rc;
}

static int watch_child(int pid, struct rf__child *child, char *why,
                       size_t why_len)
{
    child->pid = pid;
    child->pidfd = open_pidfd(pid);
    if (child->pidfd >= 0)
        return 0;
    const int err = errno;
    rf__format(why, why_len,
               "pidfd_open(%d) failed: %s; ringfeed needs Linux 5.3 or later "
               "and a free file descriptor",
               pid, strerror(err));
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    child->pid = 0;
    return -err;
}

int rf__helper_open(const char *path)
{
    /* Without /proc there is no path to exec an fd by: spawn by name. */
    if (access("/proc/self/fd", X_OK) != 0)
        return -1;
    return rf__fd_off_stdio(open(path, O_PATH | O_CLOEXEC));
}

int rf__spawn_producer(const char *path, int helper,
                       const struct rf__producer_fds *fds, uint32_t index,
                       int cpu, struct rf__child *child, char *why,
                       size_t why_len)
{
    char a_index[16], a_cpu[16], a_parent[16], a_parent_control[16];
    char a_helper[16], exec_path[32];
    rf__format(a_index, sizeof(a_index), "%u", index);
    rf__format(a_cpu, sizeof(a_cpu), "%d", cpu);
    rf__format(a_parent, sizeof(a_parent), "%d", (int)getpid());
    rf__format(a_parent_control, sizeof(a_parent_control), "%d", fds->control);
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    int pid = 0, helper_at = -1;
    int rc = plan_fds(&fa, fds, helper, &helper_at);
    rf__format(a_helper, sizeof(a_helper), "%d", helper_at);
    rf__format(exec_path, sizeof(exec_path), "/proc/self/fd/%d", helper_at);
    if (rc == 0)
        rc = plan_signals(&attr);
    if (rc == 0) {
        char *argv[] = {"ringfeed-producer",
                        "--control-fd",
                        "3",
                        "--arena-fd",
                        "4",
                        "--bell-fd",
                        "5",
                        "--listing-fd",
                        fds->listing >= 0 ? "6" : "-1",
                        "--data-fd",
                        fds->listing >= 0 && fds->data >= 0 ? "7" : "-1",
                        "--index",
                        a_index,
                        "--cpu",
                        a_cpu,
                        "--parent",
                        a_parent,
                        "--parent-control-fd",
                        a_parent_control,
                        "--helper-fd",
                        a_helper,
                        NULL};
        rc = posix_spawn(&pid, helper_at >= 0 ? exec_path : path, &fa, &attr,
                         argv, environ);
    }
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        char advice[320] = "";
        const bool limit =
            rf__advise_on_process_limit(rc, advice, sizeof(advice));
        /* A long path elided, so that the advice after it is kept */
        char shown[256];
        rf__copy_elided(shown, sizeof(shown), path);
        rf__format(why, why_len, "cannot start producer %u from '%s': %s%s%s",
                   index, shown, strerror(rc), limit ? "; " : "", advice);
        return rc == ENOENT || rc == EACCES ? RF_E_NO_PRODUCER_BINARY : -rc;
    }
    return watch_child(pid, child, why, why_len);
}

static int count_threads(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        return -1;
    char line[256];
    int threads = -1;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, "Threads:", 8) == 0)
            threads = (int)strtol(line + 8, NULL, 10);
    fclose(f);
    return threads;
}

static int find_cuda(struct dl_phdr_info *info, size_t size, void *found)
{
    (void)size;
    if (info->dlpi_name && strstr(info->dlpi_name, "libcuda.so")) {
        *(int *)found = 1;
        return 1;
    }
    return 0;
}

int rf__fork_is_safe(char *why, size_t why_len)
{
    const int threads = count_threads();
    if (threads != 1) {
        rf__format(why, why_len,
                   "fork mode refused: this process has %d threads (a child "
                   "of fork() could inherit a held lock and hang); use "
                   "RF_START_SPAWN",
                   threads);
        return RF_E_FORK_UNSAFE;
    }
    int cuda = 0;
    dl_iterate_phdr(find_cuda, &cuda);
    if (cuda) {
        rf__format(why, why_len,
                   "fork mode refused: the CUDA driver is loaded in this "
                   "process and CUDA does not survive fork(); use "
                   "RF_START_SPAWN");
        return RF_E_FORK_UNSAFE;
    }
    return 0;
}

static void close_range_fallback(unsigned first, unsigned last)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, first, last, 0) == 0)
        return;
#endif
    const long max = sysconf(_SC_OPEN_MAX);
    for (long fd = first; fd <= (long)last && fd < max; fd++)
        close((int)fd);
}

/* Closes every fd above 2 but those in keep (-1 entries are ignored). */
static void close_fds_except(const int *keep, int n)
{
    unsigned from = 3;
    for (;;) {
        int next = -1; /* the lowest kept fd at or above `from` */
        for (int i = 0; i < n; i++)
            if (keep[i] >= (int)from && (next < 0 || keep[i] < next))
                next = keep[i];
        if (next < 0)
            break;
        if ((unsigned)next > from)
            close_range_fallback(from, (unsigned)next - 1);
        from = (unsigned)next + 1;
    }
    close_range_fallback(from, ~0u);
}

/* In a fork-mode child, as plan_signals() asks of posix_spawn: every
 * signal back to its default action, and none blocked but those the
 * producer catches, until it catches them. The caller's
 * handlers are the caller's (a SIGTERM handler that saves a checkpoint
 * would keep the producer alive through a job's SIGTERM), and so are the
 * signals it ignores (nohup's SIGHUP). sigaction() refuses SIGKILL,
 * SIGSTOP and libc's own: nothing to undo there. */
static void default_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    for (int sig = 1; sig < NSIG; sig++)
        (void)sigaction(sig, &sa, NULL);
    sigset_t caught;
    rf__producer_caught_signals(&caught);
    (void)sigprocmask(SIG_SETMASK, &caught, NULL);
}

int rf__fork_producer(const struct rf__producer_fds *fds, uint32_t index,
                      int cpu, struct rf__child *child, char *why,
                      size_t why_len)
{
    const int parent = (int)getpid();
    /* Blocked across fork(), so that no handler of the caller's runs in
     * the child before default_signals() (fork mode has one thread). */
    sigset_t all, old;
    sigfillset(&all);
    (void)sigprocmask(SIG_SETMASK, &all, &old);
    const int pid = (int)fork();
    if (pid == 0)
        default_signals();
    else
        (void)sigprocmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
        const int err = errno;
        char advice[320] = "";
        const bool limit =
            rf__advise_on_process_limit(err, advice, sizeof(advice));
        rf__format(why, why_len, "fork() for producer %u failed: %s%s%s", index,
                   strerror(err), limit ? "; " : "", advice);
        return -err;
    }
    if (pid == 0) {
        /* As in spawn mode: the caller's files, sockets and pipes stay
         * out of the producer. */
        const int keep[5] = {fds->control, fds->arena, fds->bell, fds->listing,
                             fds->data};
        close_fds_except(keep, 5);
        struct rf__producer_fds own = *fds;
        own.parent_control = fds->control; /* the same number as ours */
        _exit(rf__producer_run(&own, index, cpu, parent));
    }
    return watch_child(pid, child, why, why_len);
}

int rf__child_kill(const struct rf__child *child, int sig)
{
    if (child->pid <= 0)
        return -ESRCH;
    /* Through the pidfd, the signal cannot reach another process that has
     * reused the pid of a child someone else reaped. */
    if (child->pidfd >= 0)
        return syscall(SYS_pidfd_send_signal, child->pidfd, sig, NULL, 0) == 0
                   ? 0
                   : -errno;
    return kill(child->pid, sig) == 0 ? 0 : -errno;
}

static void describe_status(int status, char *how, size_t how_len)
{
    if (WIFSIGNALED(status))
        rf__format(how, how_len, "was killed by signal %d (%s)",
                   WTERMSIG(status), strsignal(WTERMSIG(status)));
    else if (WIFEXITED(status))
        rf__format(how, how_len, "exited with status %d", WEXITSTATUS(status));
    else
        rf__format(how, how_len, "ended (wait status 0x%x)", status);
}

int rf__child_reap(struct rf__child *child, int timeout_ms, char *how,
                   size_t how_len)
{
    if (child->pid <= 0)
        return 1;
    if (child->pidfd >= 0) {
        struct pollfd pfd = {.fd = child->pidfd, .events = POLLIN};
        /* A signal must not restart the full timeout: under a periodic
         * timer that would never end. */
        const uint64_t deadline =
            rf__now_ns() +
            (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000u;
        int wait_ms = timeout_ms;
        while (poll(&pfd, 1, wait_ms) < 0 && errno == EINTR) {
            const uint64_t now = rf__now_ns();
            if (timeout_ms >= 0)
                wait_ms = now >= deadline
                              ? 0
                              : (int)((deadline - now + 999999) / 1000000);
        }
        if (!(pfd.revents & POLLIN))
            return 0;
    }
    int status = -1;
    pid_t r;
    do
        r = waitpid(child->pid, &status, child->pidfd >= 0 ? WNOHANG : 0);
    while (r < 0 && errno == EINTR);
    if (r == child->pid)
        describe_status(status, how, how_len);
    else if (r < 0)
        rf__format(how, how_len, "ended (status unknown: %s)", strerror(errno));
    else
        return 0;
    child->status = r == child->pid ? status : -1;
    if (child->pidfd >= 0)
        close(child->pidfd);
    child->pidfd = -1;
    child->pid = 0;
    return 1;
}
