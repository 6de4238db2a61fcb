/*
 * test-cuda.c - the GPU consumer against the real CUDA runtime and real
 * producers: uploads are byte-exact in both layouts; conversions match a
 * CPU reference for every dtype and layout; a ring slot goes back only
 * after its upload, and an upload into a device buffer waits for the
 * caller's release; depth is respected; fork mode is refused once CUDA is
 * initialised; producers never map a CUDA library; a message handler may
 * close the GPU consumer, and its rf_cuda_next() and rf_cuda_release()
 * are refused (-EBUSY).
 *
 * Without a CUDA device the cases that need none run (arguments, -ENODEV,
 * producers free of CUDA, the driver check of fork mode) and each of the
 * others skips, saying so. The harness's parent never touches CUDA: every
 * case's child initialises it afresh, and a fork-mode check sees CUDA only
 * where its case loaded it.
 */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "harness.h"
#include "ringfeed/cuda.h"
#include "test.h"

#define SEED 7
#define CLASSES 1000

#define CHECK_CUDA(call)                                                       \
    do {                                                                       \
        const cudaError_t e_ = (call);                                         \
        if (e_ != cudaSuccess) {                                               \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,      \
                    cudaGetErrorString(e_));                                   \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* A call on a GPU consumer: fails with its detail. */
#define CHECK_GPU(gpu, call)                                                   \
    do {                                                                       \
        const int rc_ = (call);                                                \
        if (rc_ < 0) {                                                         \
            fprintf(stderr, "%s:%d: %s returned %d (%s): %s\n", __FILE__,      \
                    __LINE__, #call, rc_, rf_strerror(rc_),                    \
                    rf_cuda_error(gpu));                                       \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

struct shape {
    uint32_t samples, batch, height, width, channels;
    rf_layout layout;
    int64_t producers, slots, epochs;
};

/* 100 grey 8x8 samples in batches of 4, one epoch: enough for the tests
 * that check calls and processes rather than pixels. */
static struct shape tiny_shape(int64_t producers)
{
    const struct shape s = {.samples = 100,
                            .batch = 4,
                            .height = 8,
                            .width = 8,
                            .channels = 1,
                            .producers = producers,
                            .epochs = 1};
    return s;
}

static rf_loader *open_synthetic(const struct shape *s)
{
    rf_config *cfg = rf_config_create();
    CHECK(cfg);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SEED, SEED));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_CLASSES, CLASSES));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SAMPLES, s->samples));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_BATCH_SIZE, s->batch));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_HEIGHT, s->height));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_WIDTH, s->width));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_CHANNELS, s->channels));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_LAYOUT, s->layout));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_PRODUCERS, s->producers));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SLOTS, s->slots));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_EPOCHS, s->epochs));
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    return l;
}

static rf_cuda_loader *open_gpu(rf_loader *loader, uint32_t depth,
                                uint32_t flags)
{
    rf_cuda_loader *gpu = NULL;
    char *why = NULL;
    const int rc = rf_cuda_open(&gpu, loader, 0, depth, flags, &why);
    if (rc < 0)
        fprintf(stderr, "rf_cuda_open: %s\n", why ? why : "");
    free(why);
    CHECK_OK(rc);
    return gpu;
}

static rf_cuda_loader *open_small(uint32_t depth, uint32_t flags)
{
    const struct shape s = {.samples = 1000,
                            .batch = 4,
                            .height = 32,
                            .width = 16,
                            .channels = 3,
                            .producers = 1,
                            .epochs = 1};
    return open_gpu(open_synthetic(&s), depth, flags);
}

static uint32_t slots_with_user(rf_cuda_loader *gpu)
{
    rf_stats st;
    CHECK_OK(rf_loader_stats(rf_cuda_host_loader(gpu), &st));
    return st.slots_with_user;
}

static cudaStream_t new_stream(void)
{
    cudaStream_t s;
    CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
}

/* ---- what the host sees of a device batch ------------------------------ */

struct host_copy {
    uint8_t *pixels;
    int64_t *labels;
};

static struct host_copy download(const rf_cuda_batch *b, cudaStream_t stream)
{
    struct host_copy h = {malloc(b->bytes + 1),
                          malloc((size_t)b->samples * 8 + 8)};
    CHECK(h.pixels && h.labels);
    CHECK_CUDA(cudaStreamWaitEvent(stream, b->ready, 0));
    CHECK_CUDA(cudaMemcpyAsync(h.pixels, b->data, b->bytes,
                               cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaMemcpyAsync(h.labels, b->labels, (size_t)b->samples * 8,
                               cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    return h;
}

static void host_copy_free(struct host_copy *h)
{
    free(h->pixels);
    free(h->labels);
}

/* Every sample's pixels and label are what the synthetic source makes. */
static void check_contents(const rf_cuda_batch *b, const struct host_copy *h)
{
    uint8_t *expected = malloc(b->sample_bytes);
    CHECK(expected);
    for (uint32_t i = 0; i < b->samples; i++) {
        const uint64_t index = b->indices[i];
        rf_synthetic_fill(SEED, index, CLASSES, b->height, b->width,
                          b->channels, b->layout, expected);
        if (memcmp(expected, h->pixels + i * b->sample_bytes,
                   b->sample_bytes) != 0) {
            fprintf(stderr,
                    "batch %" PRIu64 " sample %u (index %" PRIu64
                    "): device bytes differ from the source's\n",
                    b->sequence, i, index);
            exit(1);
        }
        CHECK_EQ(h->labels[i], rf_synthetic_label(SEED, index, CLASSES));
        CHECK_EQ(b->host_labels[i], h->labels[i]);
    }
    free(expected);
}

/* ---- without a GPU ----------------------------------------------------- */

/* Whether /proc/PID/maps names a CUDA library. */
static bool maps_cuda(int pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof(path), "/proc/%d/maps", pid);
    FILE *f = fopen(path, "re");
    CHECK(f);
    bool found = false;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, "libcuda") != NULL;
    fclose(f);
    return found;
}

/* Fills pids with this process's children; returns how many. */
static int list_children(int *pids, int max)
{
    DIR *d = opendir("/proc");
    CHECK(d);
    int n = 0;
    const struct dirent *e;
    while ((e = readdir(d))) {
        char path[300], buf[512];
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        const size_t len = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[len] = '\0';
        /* "pid (comm) state ppid ...": parse after the last ')'. */
        const char *close_paren = strrchr(buf, ')');
        if (!close_paren || strlen(close_paren) < 4)
            continue;
        const int pid = (int)strtol(buf, NULL, 10);
        if ((int)strtol(close_paren + 4, NULL, 10) == getpid() && n < max)
            pids[n++] = pid;
    }
    closedir(d);
    return n;
}

/* This process maps libcudart (so the check can see one); its producers
 * map nothing of CUDA. */
static void check_producers_free_of_cuda(void)
{
    CHECK(maps_cuda(getpid()));
    int pids[8];
    const int n = list_children(pids, 8);
    CHECK_GE(n, 2);
    for (int i = 0; i < n; i++)
        if (maps_cuda(pids[i])) {
            fprintf(stderr, "producer %d maps a CUDA library\n", pids[i]);
            exit(1);
        }
}

TEST_CASE(test_producers_never_load_cuda, "processes",
          "producers never load CUDA")
{
    const struct shape s = tiny_shape(2);
    rf_loader *l = open_synthetic(&s);
    check_producers_free_of_cuda();
    rf_loader_close(l);
}

TEST_CASE(test_arguments_refused, "calls", "bad arguments are refused")
{
    rf_cuda_loader *gpu = (rf_cuda_loader *)1;
    char *why = NULL;
    CHECK_EQ(rf_cuda_open(NULL, NULL, 0, 0, 0, NULL), -EINVAL);
    CHECK_EQ(rf_cuda_open(&gpu, NULL, 0, 0, 0, &why), -EINVAL);
    CHECK(gpu == NULL);
    CHECK_CONTAINS(why, "no loader");
    free(why);

    const struct shape s = tiny_shape(1);
    rf_loader *l = open_synthetic(&s);
    CHECK_EQ(rf_cuda_open(&gpu, l, 0, RF_CUDA_MAX_DEPTH + 1, 0, &why), -EINVAL);
    CHECK_CONTAINS(why, "at most 64 device buffers");
    free(why);
    CHECK_EQ(rf_cuda_open(&gpu, l, 0, 0, 2, &why), -EINVAL);
    CHECK_CONTAINS(why, "RF_CUDA_TIMING");
    free(why);
    CHECK_EQ(rf_cuda_open(&gpu, l, -2, 0, 0, &why), -EINVAL);
    CHECK_CONTAINS(why, "device -2");
    free(why);
    /* The loader is still the caller's, and works. */
    test_pass_one_batch(l);
    rf_loader_close(l);

    rf_cuda_batch db = {0};
    CHECK_EQ(rf_cuda_next(NULL, &db), -EINVAL);
    CHECK_EQ(rf_cuda_release(NULL, &db, 0), -EINVAL);
    float dst[4];
    CHECK_EQ(rf_cuda_convert(NULL, &db, dst, RF_CUDA_FLOAT32, RF_LAYOUT_NCHW,
                             NULL, NULL, 0),
             -EINVAL);
    CHECK(rf_cuda_host_loader(NULL) == NULL);
    CHECK_EQ(strcmp(rf_cuda_error(NULL), ""), 0);
    rf_cuda_close(NULL);
}

/* CUDA's devices here: 0 where there is no GPU (no device, or no driver
 * and no NVIDIA device node). Any other failure, as a driver too old for
 * this CUDA on a machine with a GPU, fails the case: skipping there would
 * pass the GPU cases without running one. */
static int device_count(void)
{
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err == cudaSuccess)
        return n;
    const bool gpu_here = access("/dev/nvidiactl", F_OK) == 0;
    if (err == cudaErrorNoDevice ||
        (err == cudaErrorInsufficientDriver && !gpu_here))
        return 0;
    fprintf(stderr, "cudaGetDeviceCount: %s (%s), with %s\n",
            cudaGetErrorName(err), cudaGetErrorString(err),
            gpu_here ? "/dev/nvidiactl here" : "no /dev/nvidiactl");
    CHECK(!"CUDA cannot count this machine's GPUs");
    return 0;
}

/* Skips the running case on a machine with fewer than `n` devices. */
static void require_devices(int n)
{
    const int have = device_count();
    if (have < n)
        TEST_SKIP_BECAUSE("%d CUDA device%s here, %d needed", have,
                          have == 1 ? "" : "s", n);
}

/* Without a device, open says so and leaves the loader to the caller. */
TEST_CASE(test_no_device, "calls",
          "no device: -ENODEV, the loader left to the caller")
{
    if (device_count() > 0)
        TEST_SKIP_BECAUSE("a CUDA device is here: -ENODEV cannot be seen");
    const struct shape s = tiny_shape(1);
    rf_loader *l = open_synthetic(&s);
    rf_cuda_loader *gpu = NULL;
    char *why = NULL;
    CHECK_EQ(rf_cuda_open(&gpu, l, 0, 0, 0, &why), -ENODEV);
    CHECK(gpu == NULL);
    CHECK_CONTAINS(why, "no usable CUDA device");
    free(why);
    test_pass_one_batch(l);
    rf_loader_close(l);
}

/* A message handler that closes, from inside rf_cuda_next(), the GPU
 * consumer, or the loader it owns (which cuda.h forbids): either way no
 * use after free. */
struct gpu_closer {
    rf_cuda_loader *gpu; /* NULL until open returns */
    bool loader_itself;
    int messages; /* while it had gpu */
};

static void close_gpu_from_handler(void *user, const char *text)
{
    struct gpu_closer *c = user;
    (void)text;
    if (!c->gpu)
        return;
    c->messages++;
    if (c->loader_itself)
        rf_loader_close(rf_cuda_host_loader(c->gpu));
    else
        rf_cuda_close(c->gpu);
}

/* One producer, stopped: rf_cuda_next() waits, the wait is reported
 * after 100 ms, and the handler closes. */
static void test_handler_closes(bool loader_itself)
{
    require_devices(1);
    struct gpu_closer c = {.loader_itself = loader_itself};
    rf_config *cfg = TEST_CONFIG(
        {RF_PARAM_PRODUCERS, 1}, {RF_PARAM_BATCH_SIZE, 4}, {RF_PARAM_HEIGHT, 8},
        {RF_PARAM_WIDTH, 8}, {RF_PARAM_STALL_WARNING_MS, 100});
    CHECK_OK(rf_config_set_message_handler(cfg, close_gpu_from_handler, &c));
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    c.gpu = open_gpu(l, 2, 0);
    int pids[4];
    CHECK_EQ(list_children(pids, 4), 1);
    CHECK_EQ(kill(pids[0], SIGSTOP), 0);
    rf_cuda_batch b;
    int rc;
    while ((rc = rf_cuda_next(c.gpu, &b)) == 1) {
        const int released = rf_cuda_release(c.gpu, &b, 0);
        CHECK(released == 0 || released == -ECANCELED);
    }
    CHECK_EQ(rc, -ECANCELED);
    CHECK_EQ(c.messages, 1);
    if (loader_itself) { /* gpu is left, to close */
        CHECK_CONTAINS(rf_cuda_error(c.gpu), "closed by its message handler");
        CHECK(rf_cuda_host_loader(c.gpu) == NULL);
        CHECK_EQ(rf_cuda_next(c.gpu, &b), -ECANCELED);
        rf_cuda_close(c.gpu);
    } else { /* gpu is gone */
        CHECK(b.data == NULL);
    }
    CHECK_EQ(list_children(pids, 4), 0);
}

TEST_CASE(test_handler_closes_gpu, "calls",
          "the message handler closes the GPU consumer")
{
    test_handler_closes(false);
}

TEST_CASE(test_handler_closes_host_loader, "calls",
          "the message handler closes the loader it owns")
{
    test_handler_closes(true);
}

/* A message handler that calls the GPU consumer from inside
 * rf_cuda_next(): its rf_cuda_next() and rf_cuda_release() are refused
 * with -EBUSY and change nothing, and the call that runs it goes on. */
struct gpu_caller {
    rf_cuda_loader *gpu;       /* NULL until open returns */
    const rf_cuda_batch *held; /* one the caller holds */
    int stopped_pid;           /* SIGCONT to it once called */
    int messages;              /* while it had gpu */
};

static void call_gpu_from_handler(void *user, const char *text)
{
    struct gpu_caller *c = user;
    (void)text;
    if (!c->gpu || c->messages++ > 0)
        return;
    rf_cuda_batch b = {0};
    CHECK_EQ(rf_cuda_next(c->gpu, &b), -EBUSY);
    CHECK(b.data == NULL);
    CHECK_CONTAINS(rf_cuda_error(c->gpu), "rf_cuda_next() called from the "
                                          "loader's own message handler");
    CHECK_EQ(rf_cuda_release(c->gpu, c->held, 0), -EBUSY);
    CHECK_CONTAINS(rf_cuda_error(c->gpu), "rf_cuda_release() called from "
                                          "the loader's own message handler");
    rf_stats st;
    CHECK_OK(rf_loader_stats(rf_cuda_host_loader(c->gpu), &st));
    CHECK_EQ(kill(c->stopped_pid, SIGCONT), 0);
}

/* One producer, stopped while the caller holds a device batch: the wait
 * is reported after 100 ms, the handler's calls are refused and it lets
 * the producer go on; the call it ran in hands out a batch, the held one
 * is still the caller's to release, and the run goes on. */
TEST_CASE(test_handler_calls_gpu, "calls",
          "the message handler's rf_cuda_next() and rf_cuda_release(): "
          "-EBUSY")
{
    require_devices(1);
    struct gpu_caller c = {0};
    rf_config *cfg = TEST_CONFIG(
        {RF_PARAM_PRODUCERS, 1}, {RF_PARAM_BATCH_SIZE, 4}, {RF_PARAM_HEIGHT, 8},
        {RF_PARAM_WIDTH, 8}, {RF_PARAM_SAMPLES, 1000000},
        {RF_PARAM_STALL_WARNING_MS, 100});
    CHECK_OK(rf_config_set_message_handler(cfg, call_gpu_from_handler, &c));
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    rf_cuda_loader *gpu = open_gpu(l, 3, 0);
    rf_cuda_batch held, b;
    CHECK_EQ(rf_cuda_next(gpu, &held), 1);
    c.held = &held;
    c.gpu = gpu;
    int pids[4];
    CHECK_EQ(list_children(pids, 4), 1);
    c.stopped_pid = pids[0];
    CHECK_EQ(kill(pids[0], SIGSTOP), 0);
    for (;;) {
        const int rc = rf_cuda_next(gpu, &b);
        if (rc != 1)
            fprintf(stderr, "rf_cuda_next: %s\n", rf_cuda_error(gpu));
        CHECK_EQ(rc, 1);
        if (c.messages > 0)
            break;
        CHECK_GPU(gpu, rf_cuda_release(gpu, &b, 0));
    }
    CHECK_EQ(c.messages, 1);
    CHECK_GT(b.sequence, held.sequence);
    CHECK_GPU(gpu, rf_cuda_release(gpu, &held, 0));
    CHECK_GPU(gpu, rf_cuda_release(gpu, &b, 0));
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(rf_cuda_next(gpu, &b), 1);
        CHECK_GPU(gpu, rf_cuda_release(gpu, &b, 0));
    }
    rf_cuda_close(gpu);
    CHECK_EQ(list_children(pids, 4), 0);
}

/* ---- uploads ----------------------------------------------------------- */

/* 100 samples in batches of 16: six full batches and a short one, whose
 * labels lie far behind its pixels (so they go as a second copy). */
static void test_upload_is_byte_exact(rf_layout layout)
{
    require_devices(1);
    const struct shape s = {.samples = 100,
                            .batch = 16,
                            .height = 48,
                            .width = 64,
                            .channels = 3,
                            .layout = layout,
                            .producers = 2,
                            .epochs = 2};
    rf_cuda_loader *gpu = open_gpu(open_synthetic(&s), 3, 0);
    cudaStream_t stream = new_stream();
    uint32_t seen[2][100] = {{0}};
    rf_cuda_batch b;
    int rc, batches = 0;
    while ((rc = rf_cuda_next(gpu, &b)) > 0) {
        CHECK_LT(b.epoch, 2);
        CHECK_EQ(b.layout, layout);
        CHECK_EQ(b.sample_bytes, 48 * 64 * 3);
        CHECK_EQ(b.bytes, b.samples * b.sample_bytes);
        CHECK_EQ(b.samples, b.number == 6 ? 4 : 16);
        CHECK_EQ((uintptr_t)b.data % 256, 0);
        CHECK(b.upload_started == NULL);
        CHECK_GE(b.upload_bytes, b.bytes + 8 * (size_t)b.samples);
        if (b.number == 6) /* the short batch: pixels, then labels */
            CHECK_EQ(b.upload_bytes, b.bytes + 8 * (size_t)b.samples);
        struct host_copy h = download(&b, stream);
        check_contents(&b, &h);
        host_copy_free(&h);
        for (uint32_t i = 0; i < b.samples; i++)
            seen[b.epoch][b.indices[i]]++;
        CHECK_GPU(gpu, rf_cuda_release(gpu, &b, stream));
        batches++;
    }
    CHECK_GPU(gpu, rc);
    CHECK_EQ(batches, 14);
    CHECK_EQ(rf_cuda_next(gpu, &b), 0); /* and again: still the end */
    for (int e = 0; e < 2; e++)
        for (int i = 0; i < 100; i++)
            CHECK_EQ(seen[e][i], 1);
    CHECK_CUDA(cudaStreamDestroy(stream));
    rf_cuda_close(gpu);
}

/* depth uploads are started by the first call; the caller may hold depth
 * batches, in depth distinct buffers, and not one more; once their
 * uploads are complete, a release gives every slot back. */
static void test_depth(uint32_t depth)
{
    require_devices(1);
    rf_cuda_loader *gpu = open_small(depth, 0);
    cudaStream_t stream = new_stream();
    rf_cuda_batch held[3];
    CHECK_GPU(gpu, rf_cuda_next(gpu, &held[0]));
    /* Every buffer got an upload; a slot goes back as soon as a later
     * upload is started after its own landed, but the last one's cannot
     * have gone back yet. */
    CHECK_GE(slots_with_user(gpu), 1);
    CHECK_LE(slots_with_user(gpu), depth);
    for (uint32_t i = 1; i < depth; i++)
        CHECK_GPU(gpu, rf_cuda_next(gpu, &held[i]));
    for (uint32_t i = 0; i < depth; i++) {
        CHECK_LT(held[i].buffer, depth);
        CHECK_EQ(held[i].sequence, i);
        for (uint32_t j = 0; j < i; j++)
            CHECK(held[i].data != held[j].data);
    }
    rf_cuda_batch more;
    CHECK_EQ(rf_cuda_next(gpu, &more), RF_E_ALL_SLOTS_HELD);
    CHECK_CONTAINS(rf_cuda_error(gpu), "device buffers are held");
    for (uint32_t i = 0; i < depth; i++)
        CHECK_CUDA(cudaEventSynchronize(held[i].ready));
    /* No rf_cuda_next since the uploads landed: the release gives back. */
    CHECK_GPU(gpu, rf_cuda_release(gpu, &held[0], stream));
    CHECK_EQ(slots_with_user(gpu), 0);
    CHECK_EQ(rf_cuda_release(gpu, &held[0], stream), -EINVAL);
    CHECK_CONTAINS(rf_cuda_error(gpu), "is not held");
    for (uint32_t i = 1; i < depth; i++)
        CHECK_GPU(gpu, rf_cuda_release(gpu, &held[i], stream));
    CHECK_GPU(gpu, rf_cuda_next(gpu, &more));
    CHECK_EQ(more.sequence, depth);
    CHECK_GPU(gpu, rf_cuda_release(gpu, &more, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaStreamDestroy(stream));
    rf_cuda_close(gpu);
}

/* Holds a stream on the GPU until the test opens the gate (or 30 s pass,
 * so that a broken test cannot hang the suite). */
static atomic_int gate;

static void CUDART_CB wait_for_gate(void *arg)
{
    (void)arg;
    const struct timespec tick = {0, 1000000};
    for (int ms = 0; ms < 30000 && !atomic_load(&gate); ms++)
        nanosleep(&tick, NULL);
}

/*
 * Depth 2. Batch 0 is read back on a stream that the gate holds, and
 * released on that stream; batch 1 is taken, so batch 2's upload goes
 * into batch 0's buffer. While the gate is shut that upload cannot run:
 * its ring slot must stay with the consumer, and batch 0's bytes must
 * survive until the read-back behind the gate.
 */
TEST_CASE(test_uploads_wait_for_release, "upload",
          "waits for the caller's release")
{
    require_devices(1);
    rf_cuda_loader *gpu = open_small(2, 0);
    cudaStream_t held = new_stream(), other = new_stream();
    rf_cuda_batch b0, b1, b2;
    CHECK_GPU(gpu, rf_cuda_next(gpu, &b0));
    /* Pinned: into pageable memory the copy would block this thread until
     * the gate times out. */
    uint8_t *late = NULL;
    CHECK_CUDA(cudaMallocHost((void **)&late, b0.bytes));
    uint64_t indices0[4]; /* b0.indices is reused once b0 is released */
    CHECK_EQ(b0.samples, 4);
    memcpy(indices0, b0.indices, sizeof(indices0));
    atomic_store(&gate, 0);
    CHECK_CUDA(cudaStreamWaitEvent(held, b0.ready, 0));
    CHECK_CUDA(cudaLaunchHostFunc(held, wait_for_gate, NULL));
    CHECK_CUDA(
        cudaMemcpyAsync(late, b0.data, b0.bytes, cudaMemcpyDeviceToHost, held));
    CHECK_GPU(gpu, rf_cuda_release(gpu, &b0, held));

    CHECK_GPU(gpu, rf_cuda_next(gpu, &b1)); /* starts batch 2's upload */
    CHECK_EQ(b1.sequence, 1);
    CHECK_CUDA(cudaEventSynchronize(b1.ready));
    const struct timespec pause = {0, 50000000};
    nanosleep(&pause, NULL);
    CHECK_GPU(gpu, rf_cuda_release(gpu, &b1, other)); /* collects slots */
    CHECK_EQ(slots_with_user(gpu), 1); /* batch 2's: its upload waits */
    /* Its event was not ready; that is no error of the caller's. */
    CHECK_EQ(cudaGetLastError(), cudaSuccess);

    atomic_store(&gate, 1);
    CHECK_CUDA(cudaStreamSynchronize(held));
    uint8_t *expected = malloc(b0.sample_bytes);
    CHECK(expected);
    for (uint32_t i = 0; i < b0.samples; i++) {
        rf_synthetic_fill(SEED, indices0[i], CLASSES, b0.height, b0.width,
                          b0.channels, b0.layout, expected);
        /* Batch 2, had it landed first, would differ here. */
        CHECK_EQ(memcmp(expected, late + i * b0.sample_bytes, b0.sample_bytes),
                 0);
    }
    free(expected);
    CHECK_CUDA(cudaFreeHost(late));

    CHECK_GPU(gpu, rf_cuda_next(gpu, &b2));
    CHECK_EQ(b2.sequence, 2);
    CHECK_EQ(b2.buffer, b0.buffer);
    struct host_copy h2 = download(&b2, other);
    check_contents(&b2, &h2);
    host_copy_free(&h2);
    CHECK_GPU(gpu, rf_cuda_release(gpu, &b2, other));
    CHECK_CUDA(cudaStreamSynchronize(other));
    CHECK_CUDA(cudaStreamDestroy(held));
    CHECK_CUDA(cudaStreamDestroy(other));
    rf_cuda_close(gpu);
}

TEST_CASE(test_timing_events, "upload", "timing events")
{
    require_devices(1);
    rf_cuda_loader *gpu = open_small(2, RF_CUDA_TIMING);
    cudaStream_t stream = new_stream();
    rf_cuda_batch b;
    CHECK_GPU(gpu, rf_cuda_next(gpu, &b));
    CHECK(b.upload_started != NULL);
    CHECK_CUDA(cudaEventSynchronize(b.ready));
    float ms = -1;
    CHECK_CUDA(cudaEventElapsedTime(&ms, b.upload_started, b.ready));
    CHECK(ms >= 0 && ms < 10000);
    CHECK_GPU(gpu, rf_cuda_release(gpu, &b, stream));
    CHECK_CUDA(cudaStreamDestroy(stream));
    rf_cuda_close(gpu);
}

/* With two devices, calls leave the caller's current device alone. */
TEST_CASE(test_current_device_kept, "upload",
          "the caller's current device is kept")
{
    require_devices(2);
    CHECK_CUDA(cudaSetDevice(1));
    rf_cuda_loader *gpu = open_small(2, 0);
    rf_cuda_batch b;
    CHECK_GPU(gpu, rf_cuda_next(gpu, &b));
    int current = -1;
    CHECK_CUDA(cudaGetDevice(&current));
    CHECK_EQ(current, 1);
    CHECK_CUDA(cudaSetDevice(0)); /* the release stream is device 0's */
    CHECK_GPU(gpu, rf_cuda_release(gpu, &b, 0));
    rf_cuda_close(gpu);
}

/* ---- conversion -------------------------------------------------------- */

static float half_to_float(uint16_t h)
{
    const int exponent = (h >> 10) & 31, mantissa = h & 1023;
    const float sign = (h & 0x8000) ? -1.0f : 1.0f;
    if (exponent == 0)
        return sign * ldexpf((float)mantissa, -24);
    if (exponent == 31)
        return mantissa ? NAN : sign * INFINITY;
    return sign * ldexpf((float)(1024 + mantissa), exponent - 25);
}

static float bfloat16_to_float(uint16_t b)
{
    const uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

static double element(const void *out, rf_cuda_dtype dtype, size_t i)
{
    if (dtype == RF_CUDA_FLOAT32)
        return ((const float *)out)[i];
    const uint16_t bits = ((const uint16_t *)out)[i];
    return dtype == RF_CUDA_FLOAT16 ? half_to_float(bits)
                                    : bfloat16_to_float(bits);
}

/*
 * The tolerance: one unit in the last place of the output type (2^-10 of
 * the value for float16, 2^-7 for bfloat16: twice the rounding error, for
 * results that land next to a rounding boundary), plus 4e-6 (1 + |value|)
 * for the float32 arithmetic (one fused multiply-add with a scale and a
 * bias rounded to float: about 3e-7 per unit of the operands).
 */
static double tolerance(rf_cuda_dtype dtype, double expected)
{
    const double ulp = dtype == RF_CUDA_FLOAT16    ? ldexp(1, -10)
                       : dtype == RF_CUDA_BFLOAT16 ? ldexp(1, -7)
                                                   : 0;
    return ulp * fabs(expected) + 4e-6 * (1 + fabs(expected));
}

static size_t offset_of(rf_layout layout, const rf_cuda_batch *b, uint32_t n,
                        uint32_t c, size_t pixel)
{
    const size_t plane = (size_t)b->height * b->width;
    if (layout == RF_LAYOUT_NCHW)
        return ((size_t)n * b->channels + c) * plane + pixel;
    return ((size_t)n * plane + pixel) * b->channels + c;
}

struct conversion {
    rf_cuda_dtype dtype;
    rf_layout layout;
    const float *mean, *std;
};

/* Compares every element with (pixel / 255 - mean) / std in double;
 * returns the largest error. */
static double check_conversion(const rf_cuda_batch *b, const uint8_t *pixels,
                               const void *out, const struct conversion *cv)
{
    double worst = 0;
    const size_t plane = (size_t)b->height * b->width;
    for (uint32_t n = 0; n < b->samples; n++)
        for (uint32_t c = 0; c < b->channels; c++)
            for (size_t p = 0; p < plane; p++) {
                const double m = cv->mean ? cv->mean[c] : 0;
                const double s = cv->std ? cv->std[c] : 1;
                const double want =
                    (pixels[offset_of(b->layout, b, n, c, p)] / 255.0 - m) / s;
                const double got =
                    element(out, cv->dtype, offset_of(cv->layout, b, n, c, p));
                const double error = fabs(got - want);
                if (!(error <= tolerance(cv->dtype, want))) {
                    fprintf(stderr,
                            "dtype %d layout %d: sample %u channel %u pixel "
                            "%zu is %.9g, want %.9g\n",
                            (int)cv->dtype, (int)cv->layout, n, c, p, got,
                            want);
                    exit(1);
                }
                if (error > worst)
                    worst = error;
            }
    return worst;
}

static void convert_and_check(rf_cuda_loader *gpu, const rf_cuda_batch *b,
                              const uint8_t *pixels,
                              const struct conversion *cv, cudaStream_t stream)
{
    const size_t size = b->bytes * (cv->dtype == RF_CUDA_FLOAT32 ? 4 : 2);
    void *device = NULL, *host = malloc(size);
    CHECK(host);
    CHECK_CUDA(cudaMalloc(&device, size));
    CHECK_CUDA(cudaMemsetAsync(device, 0xff, size, stream)); /* NaN */
    CHECK_GPU(gpu, rf_cuda_convert(gpu, b, device, cv->dtype, cv->layout,
                                   cv->mean, cv->std, stream));
    CHECK_CUDA(
        cudaMemcpyAsync(host, device, size, cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    const double worst = check_conversion(b, pixels, host, cv);
    printf("convert %u channels %s -> dtype %d %s: largest error %.3g\n",
           b->channels, b->layout == RF_LAYOUT_NCHW ? "NCHW" : "NHWC",
           (int)cv->dtype, cv->layout == RF_LAYOUT_NCHW ? "NCHW" : "NHWC",
           worst);
    CHECK_CUDA(cudaFree(device));
    free(host);
}

static const float imagenet_mean[] = {0.485f, 0.456f, 0.406f, 0.5f};
static const float imagenet_std[] = {0.229f, 0.224f, 0.225f, 0.25f};

static void test_conversion(uint32_t channels, rf_layout from, bool normalise)
{
    require_devices(1);
    const struct shape s = {.samples = 10,
                            .batch = 5,
                            .height = 17,
                            .width = 23,
                            .channels = channels,
                            .layout = from,
                            .producers = 1,
                            .epochs = 1};
    rf_cuda_loader *gpu = open_gpu(open_synthetic(&s), 2, 0);
    cudaStream_t stream = new_stream();
    rf_cuda_batch b;
    CHECK_GPU(gpu, rf_cuda_next(gpu, &b));
    struct host_copy h = download(&b, stream);
    check_contents(&b, &h);
    for (int dtype = RF_CUDA_FLOAT32; dtype <= RF_CUDA_BFLOAT16; dtype++)
        for (int to = RF_LAYOUT_NHWC; to <= RF_LAYOUT_NCHW; to++) {
            const struct conversion cv = {(rf_cuda_dtype)dtype, (rf_layout)to,
                                          normalise ? imagenet_mean : NULL,
                                          normalise ? imagenet_std : NULL};
            convert_and_check(gpu, &b, h.pixels, &cv, stream);
        }
    host_copy_free(&h);
    CHECK_GPU(gpu, rf_cuda_release(gpu, &b, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaStreamDestroy(stream));
    rf_cuda_close(gpu);
}

TEST_CASE(test_conversion_refused, "convert", "bad arguments are refused")
{
    require_devices(1);
    rf_cuda_loader *gpu = open_small(2, 0);
    rf_cuda_batch b;
    CHECK_GPU(gpu, rf_cuda_next(gpu, &b));
    void *device = NULL;
    CHECK_CUDA(cudaMalloc(&device, b.bytes * 4));
    const float zero_std[] = {0.2f, 0.0f, 0.2f};
    const float nan_mean[] = {0.5f, NAN, 0.5f};
    CHECK_EQ(rf_cuda_convert(gpu, &b, device, (rf_cuda_dtype)3, RF_LAYOUT_NCHW,
                             NULL, NULL, 0),
             -EINVAL);
    CHECK_CONTAINS(rf_cuda_error(gpu), "dtype 3");
    CHECK_EQ(rf_cuda_convert(gpu, &b, device, RF_CUDA_FLOAT32, (rf_layout)2,
                             NULL, NULL, 0),
             -EINVAL);
    CHECK_EQ(rf_cuda_convert(gpu, &b, device, RF_CUDA_FLOAT32, RF_LAYOUT_NCHW,
                             NULL, zero_std, 0),
             -EINVAL);
    CHECK_CONTAINS(rf_cuda_error(gpu), "channel 1");
    CHECK_EQ(rf_cuda_convert(gpu, &b, device, RF_CUDA_FLOAT32, RF_LAYOUT_NCHW,
                             nan_mean, NULL, 0),
             -EINVAL);
    CHECK_EQ(rf_cuda_convert(gpu, &b, (char *)device + 2, RF_CUDA_FLOAT32,
                             RF_LAYOUT_NCHW, NULL, NULL, 0),
             -EINVAL);
    CHECK_CONTAINS(rf_cuda_error(gpu), "not aligned");
    CHECK_EQ(rf_cuda_convert(gpu, NULL, device, RF_CUDA_FLOAT32, RF_LAYOUT_NCHW,
                             NULL, NULL, 0),
             -EINVAL);
    CHECK_GPU(gpu, rf_cuda_release(gpu, &b, 0));
    /* released: its buffer may be under the next upload already */
    CHECK_EQ(rf_cuda_convert(gpu, &b, device, RF_CUDA_FLOAT32, RF_LAYOUT_NCHW,
                             NULL, NULL, 0),
             -EINVAL);
    CHECK_CONTAINS(rf_cuda_error(gpu), "is not held");
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaFree(device));
    rf_cuda_close(gpu);
}

/* ---- processes --------------------------------------------------------- */

TEST_CASE(test_producers_free_of_cuda_beside_a_context, "processes",
          "producers free of CUDA beside a context")
{
    require_devices(1);
    const struct shape s = tiny_shape(2);
    rf_cuda_loader *gpu = open_gpu(open_synthetic(&s), 2, 0);
    rf_cuda_batch b;
    CHECK_GPU(gpu, rf_cuda_next(gpu, &b));
    check_producers_free_of_cuda();
    CHECK_GPU(gpu, rf_cuda_release(gpu, &b, 0));
    rf_cuda_close(gpu);
}

/* A child of fork() can use neither CUDA nor the parent's ring: its calls
 * are refused, and its close frees only its copy, with no CUDA call. The
 * parent's run goes on to its end (1000 samples in batches of 4), with no
 * producer replaced. */
TEST_CASE(test_fork_child_leaves_the_gpu_run_alone, "fork",
          "a fork child leaves the GPU run alone")
{
    require_devices(1);
    rf_cuda_loader *gpu = open_small(2, 0);
    cudaStream_t stream = new_stream();
    rf_cuda_batch b;
    CHECK_GPU(gpu, rf_cuda_next(gpu, &b));
    fflush(stdout);
    const pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        rf_cuda_batch other;
        rf_cuda_loader *again = NULL;
        char *why = NULL;
        const bool refused =
            rf_cuda_next(gpu, &other) == RF_E_FORK_UNSAFE &&
            strstr(rf_cuda_error(gpu), "a child of fork()") != NULL &&
            rf_cuda_release(gpu, &b, stream) == RF_E_FORK_UNSAFE &&
            rf_cuda_open(&again, rf_cuda_host_loader(gpu), 0, 2, 0, &why) ==
                RF_E_FORK_UNSAFE &&
            again == NULL && why && strstr(why, "a child of fork()") != NULL;
        free(why);
        rf_cuda_close(gpu);
        _exit(refused ? 0 : 1);
    }
    int status = 0;
    CHECK_EQ(waitpid(child, &status, 0), child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_GPU(gpu, rf_cuda_release(gpu, &b, stream));
    uint64_t batches = 1;
    int rc;
    while ((rc = rf_cuda_next(gpu, &b)) == 1) {
        batches++;
        CHECK_GPU(gpu, rf_cuda_release(gpu, &b, stream));
    }
    CHECK_EQ(rc, 0);
    CHECK_EQ(batches, 250);
    rf_stats st;
    CHECK_OK(rf_loader_stats(rf_cuda_host_loader(gpu), &st));
    CHECK_EQ(st.respawns, 0);
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaStreamDestroy(stream));
    rf_cuda_close(gpu);
    printf("fork child: rf_cuda_next, rf_cuda_release and rf_cuda_open on "
           "the parent's loader refused, close harmless; the parent's 250 "
           "batches all came\n");
}

/* A fork-mode loader of one producer is refused (RF_E_FORK_UNSAFE) with
 * a reason that contains `reason`. */
static void expect_fork_refused(const char *reason)
{
    rf_config *cfg = TEST_CONFIG({RF_PARAM_START_MODE, RF_START_FORK},
                                 {RF_PARAM_PRODUCERS, 1});
    char *why = test_open_refused(cfg, RF_E_FORK_UNSAFE);
    CHECK_CONTAINS(why, reason);
    free(why);
    rf_config_free(cfg);
}

TEST_CASE(test_fork_refused_after_cuda, "fork",
          "refused once CUDA is initialised")
{
    require_devices(1);
    CHECK_CUDA(cudaFree(NULL)); /* CUDA is initialised, with its threads */
    expect_fork_refused("fork mode refused");
}

/* The check above passes on the thread count alone (CUDA's threads). A
 * process that is still single-threaded, with only the driver library
 * loaded (no cuInit: no threads), meets the libcuda check itself. The
 * case's own process: nothing has initialised CUDA in it. */
TEST_CASE(test_fork_refused_with_driver_loaded, "fork",
          "refused with only the driver loaded")
{
    if (!dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL))
        TEST_SKIP_BECAUSE("libcuda.so.1 could not be loaded (%s)", dlerror());
    expect_fork_refused("the CUDA driver is loaded in this process");
}

/* Case upload_<layout>(): test_upload_is_byte_exact() from LAYOUT. */
#define UPLOAD_CASE(fn, name, layout)                                          \
    TEST_CASE(fn, "upload", name)                                              \
    {                                                                          \
        test_upload_is_byte_exact(layout);                                     \
    }

UPLOAD_CASE(upload_nhwc, "byte-exact, NHWC", RF_LAYOUT_NHWC)
UPLOAD_CASE(upload_nchw, "byte-exact, NCHW", RF_LAYOUT_NCHW)

/* Case depth_<n>(): test_depth() with N device buffers. */
#define DEPTH_CASE(n, name)                                                    \
    TEST_CASE(depth_##n, "depth", name)                                        \
    {                                                                          \
        test_depth(n);                                                         \
    }

DEPTH_CASE(1, "1 device buffer")
DEPTH_CASE(2, "2 device buffers")
DEPTH_CASE(3, "3 device buffers")

/* Case convert_<what>(): test_conversion() of CHANNELS channels from
 * LAYOUT, normalised or not, into every dtype and layout. */
#define CONVERT_CASE(fn, name, channels, layout, normalised)                   \
    TEST_CASE(fn, "convert", name)                                             \
    {                                                                          \
        test_conversion(channels, layout, normalised);                         \
    }

CONVERT_CASE(convert_rgb_nhwc,
             "RGB from NHWC, normalised, every dtype and layout", 3,
             RF_LAYOUT_NHWC, true)
CONVERT_CASE(convert_rgb_nchw,
             "RGB from NCHW, normalised, every dtype and layout", 3,
             RF_LAYOUT_NCHW, true)
CONVERT_CASE(convert_grey_nhwc, "grey from NHWC, every dtype and layout", 1,
             RF_LAYOUT_NHWC, false)
CONVERT_CASE(convert_rgba_nchw,
             "4 channels from NCHW, normalised, every dtype and layout", 4,
             RF_LAYOUT_NCHW, true)

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
