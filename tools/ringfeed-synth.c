/*
 * ringfeed-synth - writes a folder of synthetic ImageNet-like JPEG files
 * (rf_synthetic_jpeg()), laid out as torchvision's ImageFolder reads it,
 * for benchmarks that need real files without a real dataset:
 *
 *     ringfeed-synth /tmp/synth --images 100000 --classes 1000 --jobs 8
 *
 * Image i is DIR/class_C/img_I.jpg with C = i % classes, zero-padded so
 * that the folders sort in class order: label = i % classes. Uses the
 * public API only. Exit status: 0 success, 1 failure, 2 bad usage.
 */
#include <ringfeed.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define PROGRAM "ringfeed-synth"

#define MAX_IMAGES (UINT64_C(1) << 40)
#define MAX_CLASSES 1000000
#define MAX_JOBS 1024

struct synth_options {
    const char *dir;
    uint64_t images, classes, seed;
    unsigned jobs;
    bool quiet;
};

/* Counters the workers add to, in a shared anonymous mapping. */
struct shared_counts {
    uint64_t files, bytes;
};

/* ---- usage ------------------------------------------------------------- */

static void print_usage(void)
{
    fputs("Usage: " PROGRAM " DIR --images N --classes C [OPTION]...\n"
          "Writes N synthetic ImageNet-like JPEG files into "
          "DIR/class_C/img_I.jpg,\n"
          "image I in class I % C, as torchvision's ImageFolder reads "
          "them.\n\n"
          "  --images N    images to write, 1..2^40\n"
          "  --classes C   class folders, 1..1000000\n"
          "  --seed S      content, 0..2^64-1 (default 0)\n"
          "  --jobs J      worker processes, 1..1024 (default: one per "
          "CPU)\n"
          "  --quiet       no progress line on stderr\n"
          "  --help        show this help and exit\n\n"
          "DIR must not exist yet, or be empty; N must be at least C. Each "
          "file is\n"
          "written under a temporary name and renamed when complete. Images "
          "are\n"
          "256..500 pixels on the short side, 40-150 KB each; see "
          "rf_synthetic_jpeg()\n"
          "in ringfeed.h.\n"
          "Exit status: 0 success, 1 failure, 2 bad usage.\n",
          stdout);
}

static const struct option long_options[] = {
    {"images", required_argument, NULL, 'n'},
    {"classes", required_argument, NULL, 'c'},
    {"seed", required_argument, NULL, 's'},
    {"jobs", required_argument, NULL, 'j'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static void apply_option(struct synth_options *o, int code, const char *arg)
{
    switch (code) {
    case 'n':
        o->images = cli_parse_uint(PROGRAM, "images", arg, 1, MAX_IMAGES);
        break;
    case 'c':
        o->classes = cli_parse_uint(PROGRAM, "classes", arg, 1, MAX_CLASSES);
        break;
    case 's':
        o->seed = cli_parse_uint(PROGRAM, "seed", arg, 0, UINT64_MAX);
        break;
    case 'j':
        o->jobs = (unsigned)cli_parse_uint(PROGRAM, "jobs", arg, 1, MAX_JOBS);
        break;
    case 'q':
        o->quiet = true;
        break;
    case 'h':
        print_usage();
        exit(cli_finish_output(PROGRAM, EXIT_SUCCESS));
    default:
        cli_die_usage(PROGRAM, "unexpected option code %d", code);
    }
}

static void parse_options(int argc, char **argv, struct synth_options *o)
{
    int code;
    *o = (struct synth_options){.jobs = cli_cpus_available()};
    while ((code = cli_next_option(PROGRAM, argc, argv, long_options)) != -1)
        apply_option(o, code, optarg);
    if (optind == argc)
        cli_die_usage(PROGRAM, "which folder? Give DIR");
    o->dir = argv[optind++];
    if (optind < argc)
        cli_die_usage(PROGRAM, "unexpected argument '%s'", argv[optind]);
    if (o->images == 0 || o->classes == 0)
        cli_die_usage(PROGRAM, "--images and --classes are required");
    /* A class folder without an image cannot be opened as a dataset
     * (torchvision refuses empty classes, and so does ringfeed). */
    if (o->images < o->classes)
        cli_die_usage(PROGRAM,
                      "--images %" PRIu64 " is fewer than --classes %" PRIu64
                      ", which would leave class folders without an image; "
                      "give at least as many images as classes",
                      o->images, o->classes);
}

/* ---- the folder ---------------------------------------------------------- */

static bool folder_is_empty(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        cli_die(PROGRAM, "%s: cannot read it: %s", dir, strerror(errno));
    bool empty = true;
    for (const struct dirent *de = readdir(d); de && empty; de = readdir(d))
        empty = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
    closedir(d);
    return empty;
}

/* A new folder, or an empty one: never mix with files already there. */
static void make_root(const char *dir)
{
    if (mkdir(dir, 0755) == 0)
        return;
    if (errno == ENOENT) {
        /* said as what to do: mkdir's ENOENT is about the folder above */
        char parent[4096];
        snprintf(parent, sizeof(parent), "%s", dir);
        size_t n = strlen(parent);
        while (n > 1 && parent[n - 1] == '/')
            parent[--n] = '\0';
        char *slash = strrchr(parent, '/');
        if (slash == parent)
            slash[1] = '\0';
        else if (slash)
            *slash = '\0';
        else
            snprintf(parent, sizeof(parent), ".");
        cli_die(PROGRAM,
                "cannot create %s: the folder it goes in, %s, does not "
                "exist; create it first (mkdir -p %s), or choose another path",
                dir, parent, parent);
    }
    if (errno != EEXIST)
        cli_die(PROGRAM,
                "cannot create %s: %s; check the path and that you may write "
                "there",
                dir, strerror(errno));
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        cli_die(PROGRAM, "%s exists and is not a folder; choose another path",
                dir);
    if (!folder_is_empty(dir))
        cli_die(PROGRAM,
                "%s exists and is not empty; choose a new folder or empty it",
                dir);
    if (access(dir, W_OK) != 0)
        cli_die(PROGRAM, "%s: cannot write into it: %s", dir, strerror(errno));
}

/* Digits of the largest number written, at least `least`, so that names
 * sort in numeric order. */
static int digits_for(uint64_t count, int least)
{
    int digits = 1;
    for (uint64_t v = count > 0 ? count - 1 : 0; v >= 10; v /= 10)
        digits++;
    return digits > least ? digits : least;
}

struct layout {
    const char *dir;
    int class_digits, image_digits;
    uint64_t classes;
};

static void class_path(const struct layout *l, uint64_t c, char *out,
                       size_t len)
{
    snprintf(out, len, "%s/class_%0*" PRIu64, l->dir, l->class_digits, c);
}

static const char *write_advice(int err, const char *dir);

/* The class folders; one that cannot be made (a full disk, no inodes
 * left) stops the run with what DIR then holds, as a failed image does. */
static void make_class_folders(const struct layout *l)
{
    char path[4200];
    for (uint64_t c = 0; c < l->classes; c++) {
        class_path(l, c, path, sizeof(path));
        if (mkdir(path, 0755) != 0) {
            const int err = errno;
            cli_print_line(stderr, PROGRAM ": cannot create %s: %s%s", path,
                           strerror(err), write_advice(-err, l->dir));
            cli_die(PROGRAM,
                    "stopped: %s holds %" PRIu64 " of the %" PRIu64
                    " class folders and no images, not a whole dataset; "
                    "remove it (a folder to write into must be empty), then "
                    "run again",
                    l->dir, c, l->classes);
        }
    }
}

/* ---- the workers -------------------------------------------------------- */

static int write_all(int fd, const unsigned char *data, size_t size)
{
    while (size > 0) {
        const ssize_t n = write(fd, data, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        data += n;
        size -= (size_t)n;
    }
    return 0;
}

/* Writes the file under a temporary name in its folder, renamed to its
 * own name once complete: a worker killed while writing (SIGKILL, a full
 * disk) never leaves a partial .jpg, which a loader would then read; at
 * most a PATH.tmp, which no image folder reader lists. SIGTERM, SIGINT
 * and SIGHUP (the parent stopping its workers after one failed, a user's
 * Ctrl-C or kill) wait until the file is renamed or removed, so that they
 * leave not even that. */
static int write_file_whole(const char *path, const unsigned char *data,
                            size_t size)
{
    char temp[4400];
    snprintf(temp, sizeof(temp), "%s.tmp", path);
    sigset_t stops;
    sigset_t before;
    sigemptyset(&stops);
    sigaddset(&stops, SIGTERM);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGHUP);
    sigprocmask(SIG_BLOCK, &stops, &before);
    int err = 0;
    const int fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        err = -errno;
    } else {
        err = write_all(fd, data, size);
        if (close(fd) != 0 && err == 0) /* where some file systems report */
            err = -errno;
        if (err == 0 && rename(temp, path) != 0)
            err = -errno;
        if (err < 0)
            unlink(temp);
    }
    sigprocmask(SIG_SETMASK, &before, NULL); /* a stop waiting ends here */
    return err;
}

/* What to do about a file of dir that could not be written (-err), or
 * "". A file system out of inodes fails with ENOSPC too, with bytes to
 * spare: said as such, since freeing space would not help. */
static const char *write_advice(int err, const char *dir)
{
    struct statvfs fs;
    if (err == -ENOSPC && statvfs(dir, &fs) == 0 && fs.f_files > 0 &&
        fs.f_favail == 0)
        return "; the file system has no inodes left (df -i): remove some "
               "files, or write to a folder on another file system";
    if (err == -ENOSPC || err == -EDQUOT)
        return "; free some space, or write to a folder on another disk";
    if (err == -EFBIG)
        return "; write to a folder on another file system";
    return "";
}

/* Writes image i; returns its size, or exits the worker with a message. */
static size_t write_image(const struct layout *l, uint64_t seed, uint64_t i)
{
    char path[4300];
    void *jpeg = NULL;
    size_t size = 0;
    const int rc = rf_synthetic_jpeg(seed, i, 0, 0, &jpeg, &size);
    if (rc < 0)
        cli_die(PROGRAM, "image %" PRIu64 ": cannot make it: %s", i,
                rf_strerror(rc));
    class_path(l, i % l->classes, path, sizeof(path));
    const size_t used = strlen(path);
    snprintf(path + used, sizeof(path) - used, "/img_%0*" PRIu64 ".jpg",
             l->image_digits, i);
    const int err = write_file_whole(path, jpeg, size);
    free(jpeg);
    if (err < 0)
        cli_die(PROGRAM, "%s: cannot write it: %s%s", path, strerror(-err),
                write_advice(err, l->dir));
    return size;
}

static void run_worker(const struct layout *l, const struct synth_options *o,
                       unsigned job, struct shared_counts *counts)
{
    for (uint64_t i = job; i < o->images; i += o->jobs) {
        const size_t size = write_image(l, o->seed, i);
        __atomic_add_fetch(&counts->bytes, size, __ATOMIC_RELAXED);
        __atomic_add_fetch(&counts->files, 1, __ATOMIC_RELAXED);
    }
}

static pid_t start_worker(const struct layout *l, const struct synth_options *o,
                          unsigned job, struct shared_counts *counts)
{
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0)
        cli_die(PROGRAM, "cannot start worker %u: %s; try fewer --jobs", job,
                strerror(errno));
    if (pid == 0) {
        /* A worker must not go on writing once the parent is gone
         * (SIGTERM or SIGKILL sent to it alone, as a user stopping the
         * run does). */
        cli_stop_with_parent(PROGRAM, parent);
        run_worker(l, o, job, counts);
        fflush(NULL);
        _exit(0);
    }
    return pid;
}

/* ---- the parent ---------------------------------------------------------- */

static void show_progress(const struct shared_counts *counts, uint64_t total,
                          double start)
{
    const uint64_t files = __atomic_load_n(&counts->files, __ATOMIC_RELAXED);
    const uint64_t bytes = __atomic_load_n(&counts->bytes, __ATOMIC_RELAXED);
    const double elapsed = cli_now_s() - start;
    fprintf(stderr,
            "\r%" PRIu64 " of %" PRIu64 " images (%.0f%%), %.0f MB, "
            "%.0f images/s   ",
            files, total, 100.0 * (double)files / (double)total,
            (double)bytes / 1e6, cli_per_second((double)files, elapsed));
}

static void stop_workers(const pid_t *pids, unsigned count)
{
    for (unsigned j = 0; j < count; j++)
        if (pids[j] > 0)
            kill(pids[j], SIGTERM);
}

static void forget_worker(pid_t *pids, unsigned count, pid_t pid)
{
    for (unsigned j = 0; j < count; j++)
        if (pids[j] == pid)
            pids[j] = 0;
}

/* A worker ended by a signal: which, and for SIGXFSZ (a file past the
 * file size limit, which kills the writer) what to do. */
static void report_killed_worker(pid_t pid, int sig)
{
    fprintf(stderr, PROGRAM ": worker %d was killed by signal %d (%s)%s\n",
            (int)pid, sig, strsignal(sig),
            sig == SIGXFSZ ? ": an image would pass the file size limit; "
                             "raise it (ulimit -f)"
                           : "");
}

/* Reaps the workers; the first one that fails stops the others (it has
 * said why on stderr). Returns whether all of them succeeded. */
static bool wait_workers(pid_t *pids, unsigned count,
                         const struct shared_counts *counts, uint64_t total,
                         double start, bool show)
{
    /* Polls for workers that ended as often as the line is redrawn. */
    const struct timespec pause = {0, (long)(CLI_PROGRESS_INTERVAL_S * 1e9)};
    bool ok = true;
    for (unsigned left = count; left > 0;) {
        int status;
        const pid_t pid = waitpid(-1, &status, show ? WNOHANG : 0);
        if (pid == 0) {
            show_progress(counts, total, start);
            nanosleep(&pause, NULL);
            continue;
        }
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid < 0)
            break;
        left--;
        forget_worker(pids, count, pid);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
            continue;
        if (ok && WIFSIGNALED(status))
            report_killed_worker(pid, WTERMSIG(status));
        if (ok)
            stop_workers(pids, count);
        ok = false;
    }
    return ok;
}

static void print_summary(const struct synth_options *o,
                          const struct shared_counts *counts, double seconds)
{
    cli_print_line(stdout,
                   "wrote %" PRIu64 " image%s in %" PRIu64 " class%s into %s: "
                   "%.1f MB, %.1f KB each on average, in %.1f s (%.0f "
                   "images/s with %u job%s)",
                   counts->files, counts->files == 1 ? "" : "s", o->classes,
                   o->classes == 1 ? "" : "es", o->dir,
                   (double)counts->bytes / 1e6,
                   (double)counts->bytes / 1024.0 / (double)counts->files,
                   seconds, cli_per_second((double)counts->files, seconds),
                   o->jobs, o->jobs == 1 ? "" : "s");
}

int main(int argc, char **argv)
{
    struct synth_options o;
    parse_options(argc, argv, &o);
    if (o.jobs > o.images)
        o.jobs = (unsigned)o.images;
    const struct layout layout = {.dir = o.dir,
                                  .class_digits = digits_for(o.classes, 3),
                                  .image_digits = digits_for(o.images, 6),
                                  .classes = o.classes};
    make_root(o.dir);
    make_class_folders(&layout);
    struct shared_counts *counts =
        mmap(NULL, sizeof(*counts), PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t *pids = calloc(o.jobs, sizeof(*pids));
    if (counts == MAP_FAILED || !pids)
        cli_die(PROGRAM, "out of memory");
    const bool show = cli_progress_shown(o.quiet ? -1 : 0);
    const double start = cli_now_s();
    fflush(NULL); /* a worker must not write our buffers again */
    for (unsigned j = 0; j < o.jobs; j++)
        pids[j] = start_worker(&layout, &o, j, counts);
    const bool ok = wait_workers(pids, o.jobs, counts, o.images, start, show);
    if (show) /* only ever on a terminal */
        cli_progress_clear(true);
    free(pids);
    if (!ok) {
        cli_print_line(stderr,
                       PROGRAM ": stopped: %s holds %" PRIu64 " of the %" PRIu64
                               " images, not a whole dataset; remove it "
                               "(a folder to write into must be empty), "
                               "then run again",
                       o.dir, __atomic_load_n(&counts->files, __ATOMIC_RELAXED),
                       o.images);
        return CLI_EXIT_FAILED;
    }
    print_summary(&o, counts, cli_now_s() - start);
    return cli_finish_output(PROGRAM, EXIT_SUCCESS);
}
