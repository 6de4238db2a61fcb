/*
 * cuda-fixtures.h - what the GPU consumer's programs share (test-cuda,
 * test-cuda-upload, test-cuda-convert): CUDA and GPU-call checks, a
 * synthetic loader of a given shape with a GPU consumer over it, a
 * device batch read back to the host and checked against the synthetic
 * source, and the skip of a case on a machine with too few GPUs.
 */
#ifndef RF_TEST_CUDA_FIXTURES_H
#define RF_TEST_CUDA_FIXTURES_H

#include <errno.h>
#include <stdbool.h>
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

static inline rf_loader *open_synthetic(const struct shape *s)
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

static inline rf_cuda_loader *open_gpu(rf_loader *loader, uint32_t depth,
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

static inline rf_cuda_loader *open_small(uint32_t depth, uint32_t flags)
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

static inline cudaStream_t new_stream(void)
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

static inline struct host_copy download(const rf_cuda_batch *b,
                                        cudaStream_t stream)
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

static inline void host_copy_free(struct host_copy *h)
{
    free(h->pixels);
    free(h->labels);
}

/* Every sample's pixels and label are what the synthetic source makes. */
static inline void check_contents(const rf_cuda_batch *b,
                                  const struct host_copy *h)
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

/* CUDA's devices here: 0 where there is no GPU (no device, or no driver
 * and no NVIDIA device node). Any other failure, as a driver too old for
 * this CUDA on a machine with a GPU, fails the case: skipping there would
 * pass the GPU cases without running one. */
static inline int device_count(void)
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
static inline void require_devices(int n)
{
    const int have = device_count();
    if (have < n)
        TEST_SKIP_BECAUSE("%d CUDA device%s here, %d needed", have,
                          have == 1 ? "" : "s", n);
}

#endif
