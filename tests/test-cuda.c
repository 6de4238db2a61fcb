/*
 * test-cuda.c - the GPU consumer's calls and processes against the real
 * CUDA runtime and real producers: bad arguments are refused; without a
 * device open says so; a message handler may close the GPU consumer, and
 * its rf_cuda_next() and rf_cuda_release() are refused (-EBUSY); fork
 * mode is refused once CUDA is initialised, a child of fork() leaves the
 * GPU run alone; producers never map a CUDA library. Uploads are in
 * test-cuda-upload.c, conversions in test-cuda-convert.c.
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
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "cuda-fixtures.h"

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
int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
