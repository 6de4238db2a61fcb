/*
 * test-cuda-upload.c - the GPU consumer's uploads against the real CUDA
 * runtime and real producers: byte-exact in both layouts; a ring slot
 * goes back only after its upload, and an upload into a device buffer
 * waits for the caller's release; depth is respected; timing events; the
 * caller's current device is kept. Each case skips without a GPU.
 */
#include "config.h"

#include <stdatomic.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "cuda-fixtures.h"

static uint32_t slots_with_user(rf_cuda_loader *gpu)
{
    rf_stats st;
    CHECK_OK(rf_loader_stats(rf_cuda_host_loader(gpu), &st));
    return st.slots_with_user;
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
int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
