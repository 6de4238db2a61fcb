/*
 * bench-listing.c - how long a folder of class folders takes to list, and
 * to hand to producers, with the same calls the loader makes.
 *
 *   bench-listing DIR [--make FILES CLASSES] [--runs R]
 *
 * With --make it first writes FILES empty .jpg files spread over CLASSES
 * class folders into DIR, which must not exist (ImageNet's training set
 * is 1281167 files in 1000 classes); listing reads folders only, so empty
 * files list as real ones would. Then, R times (default 5), it times:
 *
 *   - rf_dataset_open(): the consumer's listing;
 *   - rf__dataset_digest(): the listing digest a loader's open computes
 *     once, for checkpoints (rf_stats.listing_digest);
 *   - rf__dataset_index_fd(): writing that listing into the sealed memfd
 *     handed to producers;
 *   - rf__dataset_open_indexed() with that memfd: a producer mapping and
 *     checking it instead of listing again.
 *
 * It prints the median of each, in seconds, and the listing's size. The
 * folders stay in the page cache between runs, so these are warm figures
 * (drop the cache first, as root, for a cold first run). A benchmark, not
 * a test: never run by `make check`.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/internal.h"
#include "source/dataset.h"

#define MAX_RUNS 101

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "bench-listing: %s: %s\n", what, detail);
    exit(1);
}

/* DIR/nNNNNNNNN/NNNNNNNN.jpg, as many files in each class as fall to it. */
static void make_tree(const char *dir, unsigned long files,
                      unsigned long classes)
{
    if (classes == 0 || files < classes)
        die("--make", "wants at least one file per class");
    if (mkdir(dir, 0755) != 0)
        die(dir, strerror(errno));
    char path[4096];
    for (unsigned long c = 0; c < classes; c++) {
        snprintf(path, sizeof(path), "%s/n%08lu", dir, c);
        if (mkdir(path, 0755) != 0)
            die(path, strerror(errno));
    }
    for (unsigned long i = 0; i < files; i++) {
        snprintf(path, sizeof(path), "%s/n%08lu/%08lu.jpg", dir, i % classes,
                 i);
        const int fd =
            open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0)
            die(path, strerror(errno));
        close(fd);
    }
}

static int compare_doubles(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *values, int n)
{
    qsort(values, (size_t)n, sizeof(*values), compare_doubles);
    return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

/* One round of the four timings; returns the listing's bytes. */
static off_t time_round(const char *dir, double *list_s, double *digest_s,
                        double *write_s, double *adopt_s)
{
    char *err = NULL;
    rf_dataset *ds = NULL;
    double t = now_s();
    if (rf_dataset_open(&ds, dir, &err) != 0)
        die(dir, err);
    *list_s = now_s() - t;
    t = now_s();
    volatile uint64_t digest = rf__dataset_digest(ds);
    (void)digest;
    *digest_s = now_s() - t;
    int fd = -1;
    t = now_s();
    if (rf__dataset_index_fd(ds, &fd) != 0)
        die(dir, rf_dataset_error(ds));
    *write_s = now_s() - t;
    char why[RF__DETAIL];
    rf_dataset *copy = NULL;
    t = now_s();
    if (rf__dataset_open_indexed(&copy, dir, -1, fd, why, sizeof(why)) != 0)
        die(dir, why);
    *adopt_s = now_s() - t;
    struct stat st;
    const off_t bytes = fstat(fd, &st) == 0 ? st.st_size : -1;
    rf_dataset_close(copy);
    rf_dataset_close(ds);
    close(fd);
    return bytes;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        fputs("usage: bench-listing DIR [--make FILES CLASSES] [--runs R]\n",
              argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *dir = argv[1];
    int runs = 5;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--make") == 0 && i + 2 < argc) {
            make_tree(dir, strtoul(argv[i + 1], NULL, 10),
                      strtoul(argv[i + 2], NULL, 10));
            i += 2;
        } else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
            runs = (int)strtol(argv[++i], NULL, 10);
        } else {
            die(argv[i], "unknown option; see --help");
        }
    }
    if (runs < 1 || runs > MAX_RUNS)
        die("--runs", "wants 1 to 101");
    double list_s[MAX_RUNS], digest_s[MAX_RUNS], write_s[MAX_RUNS],
        adopt_s[MAX_RUNS];
    off_t bytes = 0;
    for (int r = 0; r < runs; r++)
        bytes =
            time_round(dir, &list_s[r], &digest_s[r], &write_s[r], &adopt_s[r]);
    rf_dataset *ds = NULL;
    if (rf_dataset_open(&ds, dir, NULL) != 0)
        die(dir, "cannot open it again");
    printf("%llu files in %u classes, listing %.1f MB; medians of %d runs:\n",
           (unsigned long long)rf_dataset_size(ds), rf_dataset_classes(ds),
           (double)bytes / 1e6, runs);
    rf_dataset_close(ds);
    printf("  list (consumer, rf_dataset_open)          %.3f s\n",
           median(list_s, runs));
    printf("  its digest (consumer, for checkpoints)    %.3f s\n",
           median(digest_s, runs));
    printf("  write into the memfd for producers        %.3f s\n",
           median(write_s, runs));
    printf("  map and check it (producer)               %.3f s\n",
           median(adopt_s, runs));
    return 0;
}
