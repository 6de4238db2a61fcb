/*
 * bench-decode.c - the floor for decoding a folder of JPEGs: how many images
 * a second do plain processes decode with TurboJPEG when they do nothing
 * else? No crop, no scaled decode, no resize, no shared memory, no batches.
 * tools/bench/bench-pipeline.sh sets ringfeed's figures beside this one.
 *
 *   bench-decode DIR [--processes P | --side-by-side R] [--json] [--help]
 *
 * The parent lists every .jpg/.jpeg file under DIR (not timed), sorts the
 * list, then forks P processes (default: one per CPU it may run on).
 * Process p decodes files i with i % P == p, each at full scale to RGB,
 * reading the file with read() into a buffer and decoding into another,
 * both reused. The parent reports images/s over the wall time from before
 * the first fork to after the last child was reaped.
 *
 * With --side-by-side R it measures instead, in this one process, what
 * ringfeed's own decode costs against that floor: every file is read into
 * memory once, then in each of R rounds every file is decoded twice in a
 * row, by ringfeed's `train` path (random-resized crop and flip to
 * 224x224, through lib/jpeg.c: crop-region decode and the resizer) and by
 * the full TurboJPEG decode, each timed on this thread's CPU clock. As the
 * two alternate file by file, drift in the machine's speed hits both
 * alike, and no file reading, process or batch is in either figure. It
 * prints milliseconds per image for each and their ratio.
 *
 * Two more timings per file show the floor under both: libjpeg's entropy
 * (Huffman) decoding alone, of every row and of the rows down to the
 * bottom edge of the file's crop, each skipped with jpeg_skip_scanlines(),
 * which decodes and discards them. Without restart markers the entropy
 * decoding of a baseline JPEG cannot be cut short above the crop nor
 * beside it, so no path through libjpeg-turbo 2.1 decodes the crop for
 * less than the second figure.
 *
 * A benchmark, not a test: never run by `make check`. It exits 1 when any
 * file could not be read or decoded, as a floor that skipped work would
 * flatter itself.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <sched.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <jpeglib.h> /* after stdio.h, which it needs */

#include "common/internal.h"
#include "decode/jpeg.h"
#include "decode/transform.h"

#define PROGRAM "bench-decode"

/* ---- options ------------------------------------------------------------ */

struct opts {
    const char *dir;
    long processes; /* 0: one per CPU of the affinity mask */
    long rounds;    /* --side-by-side: rounds; 0: the decode loop */
    bool json;
};

static void usage(FILE *f)
{
    fputs("usage: " PROGRAM
          " DIR [--processes P | --side-by-side R] [--json] [--help]\n"
          "Decodes every .jpg/.jpeg file under DIR once, at full scale to "
          "RGB with\n"
          "TurboJPEG, in P forked processes (file i in process i % P), and "
          "prints\n"
          "images/s over the wall time.\n"
          "  --processes P  1..1024; default: one per CPU this process may "
          "use\n"
          "  --side-by-side R  instead, in one process, R rounds of every "
          "file decoded\n"
          "                 by ringfeed's train path (crop + resize to "
          "224x224) and in\n"
          "                 full by TurboJPEG, alternately, on the CPU clock; "
          "and the\n"
          "                 floor: libjpeg's entropy decoding alone\n"
          "  --json         also print one JSON object as the last line\n"
          "  --help         this text\n"
          "Exits 1 if any file failed to read or decode, 2 on bad usage.\n",
          f);
}

/* Decimal only, no sign, no trailing junk: a typo must not become 0. */
static int parse_count(const char *s, long max, long *v)
{
    char *end;
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    const long x = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || x < 1 || x > max)
        return -1;
    *v = x;
    return 0;
}

/* Returns 0, 1 for --help, or -1 after saying what is wrong. */
static int parse_args(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0)
            return 1;
        if (strcmp(a, "--json") == 0) {
            o->json = true;
        } else if (strcmp(a, "--side-by-side") == 0 && i + 1 < argc) {
            if (parse_count(argv[++i], 1000, &o->rounds) != 0) {
                fprintf(stderr, PROGRAM ": --side-by-side wants 1..1000\n");
                return -1;
            }
        } else if (strcmp(a, "--processes") == 0 && i + 1 < argc) {
            if (parse_count(argv[++i], 1024, &o->processes) != 0) {
                fprintf(stderr, PROGRAM ": --processes wants 1..1024\n");
                return -1;
            }
        } else if (a[0] != '-' && !o->dir) {
            o->dir = a;
        } else {
            fprintf(stderr, PROGRAM ": bad option or value near '%s'\n", a);
            return -1;
        }
    }
    if (!o->dir) {
        fprintf(stderr, PROGRAM ": which folder? (see --help)\n");
        return -1;
    }
    if (o->processes && o->rounds) {
        fprintf(stderr, PROGRAM ": --side-by-side runs in one process; "
                                "leave out --processes\n");
        return -1;
    }
    return 0;
}

/* One per CPU we may run on, as ringfeed's producers and the PyTorch
 * workers of bench-pipeline.sh count them. */
static long default_processes(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}

/* ---- the file list ------------------------------------------------------ */

struct list {
    char **path;
    size_t count, capacity;
};

/* nftw() takes no user pointer, so its callback appends here. */
static struct list g_list;

static bool is_jpeg_name(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot &&
           (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0);
}

static int list_add(const char *path)
{
    if (g_list.count == g_list.capacity) {
        const size_t cap = g_list.capacity ? 2 * g_list.capacity : 1024;
        char **p = realloc(g_list.path, cap * sizeof(*p));
        if (!p)
            return -1;
        g_list.path = p;
        g_list.capacity = cap;
    }
    char *copy = strdup(path);
    if (!copy)
        return -1;
    g_list.path[g_list.count++] = copy;
    return 0;
}

static int visit(const char *path, const struct stat *st, int type,
                 struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (type != FTW_F || !is_jpeg_name(path))
        return 0;
    return list_add(path) == 0 ? 0 : -1;
}

static int cmp_path(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted, so that which process decodes which file does not depend on the
 * order the file system lists them in. */
static int list_files(const char *dir)
{
    if (nftw(dir, visit, 32, FTW_PHYS) != 0) {
        fprintf(stderr, PROGRAM ": cannot list %s: %s\n", dir,
                errno ? strerror(errno) : "out of memory");
        return -1;
    }
    if (g_list.count == 0) {
        fprintf(stderr, PROGRAM ": no .jpg or .jpeg file under %s\n", dir);
        return -1;
    }
    qsort(g_list.path, g_list.count, sizeof(*g_list.path), cmp_path);
    return 0;
}

/* ---- one decoding process ---------------------------------------------- */

/* What child p leaves in the shared mapping for the parent, which reads it
 * after waitpid() and so after every store the child made. */
struct result {
    uint64_t decoded;
    uint64_t failed;
    uint64_t pixels;
};

/* A buffer that only grows, so a run does no allocation in steady state. */
struct buffer {
    unsigned char *data;
    size_t size;
};

static int buffer_reserve(struct buffer *b, size_t size)
{
    if (size <= b->size)
        return 0;
    unsigned char *p = realloc(b->data, size);
    if (!p)
        return -1;
    b->data = p;
    b->size = size;
    return 0;
}

/* Reads the whole file into b; returns its size, or -1. */
static ssize_t read_file(const char *path, struct buffer *b)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) != 0 || st.st_size <= 0 ||
        buffer_reserve(b, (size_t)st.st_size) != 0) {
        close(fd);
        return -1;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        const ssize_t n = read(fd, b->data + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    return got == (size_t)st.st_size ? (ssize_t)got : -1;
}

/* Full scale, RGB, and flags 0: the accurate integer DCT and fancy
 * upsampling, the defaults of libjpeg and so what PIL and ringfeed use. */
static int decode(tjhandle tj, const struct buffer *in, size_t size,
                  struct buffer *out, uint64_t *pixels)
{
    int w, h, subsamp, colorspace;
    if (tjDecompressHeader3(tj, in->data, (unsigned long)size, &w, &h, &subsamp,
                            &colorspace) != 0 ||
        w <= 0 || h <= 0)
        return -1;
    if (buffer_reserve(out, (size_t)w * (size_t)h * 3) != 0)
        return -1;
    if (tjDecompress2(tj, in->data, (unsigned long)size, out->data, w, 0, h,
                      TJPF_RGB, 0) != 0)
        return -1;
    *pixels += (uint64_t)w * (uint64_t)h;
    return 0;
}

static void decode_share(size_t p, size_t procs, struct result *r)
{
    struct buffer in = {0}, out = {0};
    tjhandle tj = tjInitDecompress();
    for (size_t i = p; i < g_list.count; i += procs) {
        const ssize_t size = tj ? read_file(g_list.path[i], &in) : -1;
        if (size > 0 && decode(tj, &in, (size_t)size, &out, &r->pixels) == 0)
            r->decoded++;
        else
            r->failed++;
    }
    if (tj)
        tjDestroy(tj);
    free(in.data);
    free(out.data);
}

/* ---- the run ------------------------------------------------------------ */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Forks procs children over r[procs] and reaps them all. Returns how many
 * could not be started or did not exit with status 0. */
static size_t run_children(size_t procs, struct result *r)
{
    size_t bad = 0, started = 0;
    for (size_t p = 0; p < procs; p++) {
        const pid_t pid = fork();
        if (pid == 0) {
            decode_share(p, procs, &r[p]);
            _exit(0);
        }
        if (pid < 0) {
            perror(PROGRAM ": fork");
            bad++;
        } else {
            started++;
        }
    }
    for (; started > 0; started--) {
        int status;
        pid_t pid;
        while ((pid = wait(&status)) < 0 && errno == EINTR)
            ;
        if (pid < 0)
            break;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            bad++;
    }
    return bad + started;
}

struct totals {
    uint64_t decoded, failed, pixels;
};

static struct totals sum_results(const struct result *r, size_t procs)
{
    struct totals t = {0};
    for (size_t p = 0; p < procs; p++) {
        t.decoded += r[p].decoded;
        t.failed += r[p].failed;
        t.pixels += r[p].pixels;
    }
    return t;
}

static void report(const struct opts *o, size_t procs, const struct totals *t,
                   double secs)
{
    const double rate = secs > 0 ? (double)t->decoded / secs : 0;
    const double mpix = secs > 0 ? (double)t->pixels / secs / 1e6 : 0;
    printf("decoded %" PRIu64 " of %zu images in %.3f s with %zu processes: "
           "%.1f images/s, %.1f Mpixel/s\n",
           t->decoded, g_list.count, secs, procs, rate, mpix);
    if (t->failed > 0)
        printf("FAILED: %" PRIu64 " files could not be read or decoded\n",
               t->failed);
    if (o->json)
        printf("{\"images\": %" PRIu64 ", \"failed\": %" PRIu64
               ", \"seconds\": %.6g, \"images_per_s\": %.6g, "
               "\"mpixels_per_s\": %.6g, \"processes\": %zu}\n",
               t->decoded, t->failed, secs, rate, mpix, procs);
}

/* ---- --side-by-side ------------------------------------------------------ */

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The training transform as the library builds it from its defaults,
 * at 224 x 224; false when out of memory. */
static bool train_spec(struct rf__transform_spec *t)
{
    rf_config *cfg = rf_config_create();
    if (!cfg || rf_config_set(cfg, RF_PARAM_TRANSFORM, RF_TRANSFORM_TRAIN) ||
        rf_config_set(cfg, RF_PARAM_HEIGHT, 224) ||
        rf_config_set(cfg, RF_PARAM_WIDTH, 224)) {
        rf_config_free(cfg);
        return false;
    }
    rf__transform_from_params(t, cfg->params);
    rf_config_free(cfg);
    return true;
}

/* Every file's bytes, read once before any timing. */
static int read_all(struct buffer *files, size_t *sizes)
{
    for (size_t i = 0; i < g_list.count; i++) {
        const ssize_t n = read_file(g_list.path[i], &files[i]);
        if (n <= 0) {
            fprintf(stderr, PROGRAM ": cannot read %s\n", g_list.path[i]);
            return -1;
        }
        sizes[i] = (size_t)n;
    }
    return 0;
}

/* A libjpeg error ends the entropy-only pass through this jump, not
 * through exit(). */
struct entropy_error {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
};

/* What --side-by-side holds for its run, freed by side_by_side_free(). */
struct side_by_side {
    struct buffer *files, full, row;
    size_t *sizes;
    struct rf__jpeg_decoder *dec;
    tjhandle tj;
    uint8_t *slot;
    struct jpeg_decompress_struct entropy;
    struct entropy_error entropy_err;
};

/* CPU seconds summed over every file and round. */
struct side_by_side_times {
    double crop_s, full_s, entropy_s, entropy_crop_s;
};

static void side_by_side_free(struct side_by_side *r)
{
    for (size_t i = 0; r->files && i < g_list.count; i++)
        free(r->files[i].data);
    free(r->files);
    free(r->full.data);
    free(r->row.data);
    free(r->sizes);
    rf__jpeg_decoder_free(r->dec);
    if (r->tj)
        tjDestroy(r->tj);
    free(r->slot);
    jpeg_destroy_decompress(&r->entropy);
}

static void entropy_error_exit(j_common_ptr ci)
{
    longjmp(((struct entropy_error *)ci->err)->jump, 1);
}

/* The rows a crop-region decode must entropy-decode at least: down to the
 * bottom edge of the crop box (the resampler's taps reach a few rows
 * further, so the true figure is a little higher). NULL: every row. */
static JDIMENSION rows_to_decode(const struct rf__crop_key *key,
                                 JDIMENSION width, JDIMENSION height)
{
    if (!key)
        return height;
    struct rf__crop crop;
    rf__transform_crop(key->spec, key->seed, key->epoch, key->index, width,
                       height, &crop);
    const struct rf__crop shown =
        rf__crop_shown(&crop, key->spec->out_width, key->spec->out_height);
    const double bottom = shown.y + shown.height;
    return bottom >= (double)height ? height : (JDIMENSION)bottom + 1;
}

/* Entropy-decodes rows_to_decode() rows of the file and discards them:
 * all but the last are skipped with jpeg_skip_scanlines(), which
 * Huffman-decodes them as it does the rows above a crop, and the last is
 * decoded into `row` (a skip to the very end would return without
 * decoding anything). Returns 0, or -1 when libjpeg gave up on the file
 * or `row` could not grow. */
static int entropy_only(j_decompress_ptr ci, const uint8_t *data, size_t size,
                        struct buffer *row, const struct rf__crop_key *key)
{
    struct entropy_error *err = (struct entropy_error *)ci->err;
    if (setjmp(err->jump)) {
        jpeg_abort_decompress(ci);
        return -1;
    }
    jpeg_mem_src(ci, data, (unsigned long)size);
    jpeg_read_header(ci, TRUE);
    jpeg_start_decompress(ci);
    if (buffer_reserve(row, (size_t)ci->output_width *
                                (size_t)ci->output_components) != 0) {
        jpeg_abort_decompress(ci);
        return -1;
    }
    const JDIMENSION rows =
        rows_to_decode(key, ci->output_width, ci->output_height);
    JSAMPROW last = row->data;
    jpeg_skip_scanlines(ci, rows - 1);
    jpeg_read_scanlines(ci, &last, 1);
    if (rows == ci->output_height)
        jpeg_finish_decompress(ci);
    else
        jpeg_abort_decompress(ci);
    return 0;
}

/* Times R rounds; returns how many decodes failed. */
static uint64_t time_rounds(struct side_by_side *r, long rounds,
                            struct side_by_side_times *t)
{
    struct rf__transform_spec spec;
    if (!train_spec(&spec)) {
        fprintf(stderr, PROGRAM ": out of memory for the transform\n");
        return 1;
    }
    const struct rf__jpeg_options options = {.max_pixels = 1ull << 32,
                                             .max_scans = 1000,
                                             .warnings_are_errors = true};
    const struct rf__jpeg_target target = {224, 224, 3, RF_LAYOUT_NHWC,
                                           r->slot};
    uint64_t pixels = 0, failed = 0;
    char why[256];
    for (long round = 0; round < rounds; round++) {
        for (size_t i = 0; i < g_list.count; i++) {
            /* ringfeed's train transform, keyed on the round (as the
             * epoch) and the file's index, as the producers key it */
            struct rf__crop_key key = {&spec, 0, (uint64_t)round, i};
            const double t0 = thread_cpu_s();
            if (rf__jpeg_decode(r->dec, r->files[i].data, r->sizes[i], &options,
                                rf__transform_choose_crop, &key, &target, why,
                                sizeof(why)) != 0) {
                fprintf(stderr, PROGRAM ": %s: %s\n", g_list.path[i], why);
                failed++;
            }
            const double t1 = thread_cpu_s();
            if (decode(r->tj, &r->files[i], r->sizes[i], &r->full, &pixels))
                failed++;
            const double t2 = thread_cpu_s();
            if (entropy_only(&r->entropy, r->files[i].data, r->sizes[i],
                             &r->row, NULL))
                failed++;
            const double t3 = thread_cpu_s();
            if (entropy_only(&r->entropy, r->files[i].data, r->sizes[i],
                             &r->row, &key))
                failed++;
            const double t4 = thread_cpu_s();
            t->crop_s += t1 - t0;
            t->full_s += t2 - t1;
            t->entropy_s += t3 - t2;
            t->entropy_crop_s += t4 - t3;
        }
    }
    return failed;
}

static int side_by_side(const struct opts *o)
{
    struct side_by_side r = {
        .files = calloc(g_list.count, sizeof(*r.files)),
        .sizes = calloc(g_list.count, sizeof(*r.sizes)),
        .dec = rf__jpeg_decoder_new(),
        .tj = tjInitDecompress(),
        .slot = malloc((size_t)224 * 224 * 3),
    };
    r.entropy.err = jpeg_std_error(&r.entropy_err.mgr);
    r.entropy_err.mgr.error_exit = entropy_error_exit;
    jpeg_create_decompress(&r.entropy);
    if (!r.files || !r.sizes || !r.dec || !r.tj || !r.slot ||
        read_all(r.files, r.sizes) != 0) {
        fprintf(stderr, PROGRAM ": out of memory or unreadable files\n");
        side_by_side_free(&r);
        return 1;
    }
    struct side_by_side_times t = {0};
    const uint64_t failed = time_rounds(&r, o->rounds, &t);
    side_by_side_free(&r);
    if (failed > 0) {
        fprintf(stderr, PROGRAM ": %llu decodes failed; no figures\n",
                (unsigned long long)failed);
        return 1;
    }
    const double n = (double)g_list.count * (double)o->rounds;
    printf("%zu images x %ld rounds, alternating, CPU time per image:\n"
           "  ringfeed train crop + resize to 224x224  %.3f ms\n"
           "  TurboJPEG full decode                    %.3f ms\n"
           "  full / ringfeed                          %.3f\n"
           "  libjpeg's entropy decoding alone, the floor under both:\n"
           "    of every row                           %.3f ms (%.0f%% of "
           "the full decode)\n"
           "    down to each crop's bottom edge        %.3f ms (%.0f%% of "
           "ringfeed's)\n",
           g_list.count, o->rounds, t.crop_s * 1e3 / n, t.full_s * 1e3 / n,
           t.full_s / t.crop_s, t.entropy_s * 1e3 / n,
           100.0 * t.entropy_s / t.full_s, t.entropy_crop_s * 1e3 / n,
           100.0 * t.entropy_crop_s / t.crop_s);
    if (o->json)
        printf("{\"images\": %zu, \"rounds\": %ld, \"crop_ms\": %.6g, "
               "\"full_ms\": %.6g, \"ratio\": %.6g, \"entropy_ms\": "
               "%.6g, \"entropy_to_crop_ms\": %.6g}\n",
               g_list.count, o->rounds, t.crop_s * 1e3 / n, t.full_s * 1e3 / n,
               t.full_s / t.crop_s, t.entropy_s * 1e3 / n,
               t.entropy_crop_s * 1e3 / n);
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o;
    const int rc = parse_args(argc, argv, &o);
    if (rc != 0) {
        usage(rc > 0 ? stdout : stderr);
        return rc > 0 ? 0 : 2;
    }
    if (list_files(o.dir) != 0)
        return 1;
    if (o.rounds > 0)
        return side_by_side(&o);
    const size_t procs =
        (size_t)(o.processes ? o.processes : default_processes());
    /* MAP_SHARED survives fork() as the same pages: the children's results
     * need no pipe. */
    struct result *r = mmap(NULL, procs * sizeof(*r), PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) {
        perror(PROGRAM ": mmap");
        return 1;
    }
    const double t0 = now_s();
    const size_t bad = run_children(procs, r);
    const double secs = now_s() - t0;
    const struct totals t = sum_results(r, procs);
    report(&o, procs, &t, secs);
    if (bad > 0)
        fprintf(stderr, PROGRAM ": %zu processes failed\n", bad);
    return bad > 0 || t.failed > 0 ? 1 : 0;
}
