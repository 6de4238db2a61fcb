/*
 * cuda-loader.c - the GPU consumer's life (include/ringfeed/cuda.h):
 * rf_cuda_open() checks its arguments, chooses the device, pins the
 * loader's ring for DMA and makes the copy stream and the device buffers
 * with their events; rf_cuda_close() undoes whatever was done, in
 * reverse. The consumer owns the rf_loader it wraps, the ring's
 * registration, the copy stream, the device buffers and their events. It
 * uses only the public API of libringfeed; nothing in lib/ knows it
 * exists. Uploads are cuda-upload.c's.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda-loader.h"

/* ---- open ------------------------------------------------------------- */

static int check_arguments(rf_cuda_loader *gpu, int device, uint32_t depth,
                           uint32_t flags)
{
    if (device < -1)
        return rf__cuda_fail(gpu, -EINVAL,
                             "device %d: give a CUDA device number, or -1 "
                             "for the current device",
                             device);
    if (depth > RF_CUDA_MAX_DEPTH)
        return rf__cuda_fail(gpu, -EINVAL,
                             "depth %" PRIu32 ": at most %d device buffers; "
                             "0 means %d",
                             depth, RF_CUDA_MAX_DEPTH, RF_CUDA_DEFAULT_DEPTH);
    if (flags & ~(uint32_t)RF_CUDA_TIMING)
        return rf__cuda_fail(gpu, -EINVAL,
                             "flags 0x%" PRIx32 ": only RF_CUDA_TIMING (1) "
                             "exists",
                             flags);
    return 0;
}

static int choose_device(rf_cuda_loader *gpu, int device)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess)
        (void)cudaGetLastError(); /* reported here, not the caller's */
    /* Any failure to count (no driver, an old one, one that does not
     * match its kernel module) means no usable device. */
    if (err != cudaSuccess || count == 0)
        return rf__cuda_fail(gpu, -ENODEV,
                             "no usable CUDA device: %s; nvidia-smi shows "
                             "what the driver sees",
                             err == cudaSuccess ? "the driver lists none"
                                                : cudaGetErrorString(err));
    if (device == -1) {
        err = cudaGetDevice(&device);
        if (err != cudaSuccess)
            return rf__cuda_call_failed(gpu, err, "cudaGetDevice",
                                        "finding the current device");
    }
    if (device >= count)
        return rf__cuda_fail(gpu, -ENODEV,
                             "CUDA device %d asked for, but this process "
                             "sees %d (0..%d; CUDA_VISIBLE_DEVICES decides "
                             "which)",
                             device, count, count - 1);
    gpu->device = device;
    gpu->device_chosen = true;
    return 0;
}

/* The ring is slots x slot_bytes, each slot holding one batch. */
static int find_ring(rf_cuda_loader *gpu)
{
    void *base = NULL;
    size_t bytes = 0;
    rf_stats stats = {0};
    int rc = rf_loader_arena(gpu->loader, &base, &bytes);
    if (rc == 0)
        rc = rf_loader_stats(gpu->loader, &stats);
    if (rc == RF_E_FORK_UNSAFE)
        return rf__cuda_fail(gpu, rc,
                             "the loader belongs to another process, and "
                             "this is process %d, a child of fork(): open a "
                             "loader of its own",
                             (int)getpid());
    if (rc < 0)
        return rf__cuda_fail(gpu, rc, "the loader's ring cannot be read: %s",
                             rf_strerror(rc));
    if (stats.slots == 0 || bytes % stats.slots != 0)
        return rf__cuda_fail(gpu, RF_E_ABI,
                             "the ring of %zu bytes is not %" PRIu32
                             " equal slots; ringfeed and ringfeed-cuda come "
                             "from different builds",
                             bytes, stats.slots);
    gpu->arena = base;
    gpu->arena_bytes = bytes;
    gpu->slot_bytes = bytes / stats.slots;
    return 0;
}

/* Pins the whole ring once, so that every upload is a direct DMA from
 * where the producers wrote. */
static int register_ring(rf_cuda_loader *gpu)
{
    const cudaError_t err = cudaHostRegister(gpu->arena, gpu->arena_bytes,
                                             cudaHostRegisterPortable);
    const char *advice =
        err == cudaErrorHostMemoryAlreadyRegistered
            ? "it is pinned already: the caller need not (and must not) "
              "cudaHostRegister it"
        : err == cudaErrorNotSupported
            ? "this platform cannot pin memory CUDA did not allocate"
            : "fewer slots (RF_PARAM_SLOTS) or smaller batches pin less";
    if (err != cudaSuccess)
        return rf__cuda_call_failed(gpu, err, "cudaHostRegister",
                                    "pinning the loader's ring (%zu bytes) "
                                    "for DMA; %s",
                                    gpu->arena_bytes, advice);
    gpu->registered = true;
    return 0;
}

static int create_event(rf_cuda_loader *gpu, cudaEvent_t *event, bool timing,
                        const char *what, uint32_t index)
{
    const cudaError_t err = cudaEventCreateWithFlags(
        event, timing ? cudaEventDefault : cudaEventDisableTiming);
    if (err != cudaSuccess)
        return rf__cuda_call_failed(gpu, err, "cudaEventCreateWithFlags",
                                    "creating the %s event of device "
                                    "buffer %" PRIu32,
                                    what, index);
    return 0;
}

static int create_buffer(rf_cuda_loader *gpu, uint32_t index)
{
    struct rf__cuda_buffer *b = &gpu->buffers[index];
    const bool timing = gpu->flags & RF_CUDA_TIMING;
    const cudaError_t err = cudaMalloc(&b->device, gpu->slot_bytes);
    if (err != cudaSuccess)
        return rf__cuda_call_failed(gpu, err, "cudaMalloc",
                                    "allocating device buffer %" PRIu32
                                    " (%zu bytes) on device %d",
                                    index, gpu->slot_bytes, gpu->device);
    int rc = create_event(gpu, &b->copied, timing, "upload", index);
    if (rc == 0)
        rc = create_event(gpu, &b->released, false, "release", index);
    if (rc == 0 && timing)
        rc = create_event(gpu, &b->started, true, "upload-start", index);
    return rc;
}

static int create_buffers(rf_cuda_loader *gpu)
{
    gpu->buffers = calloc(gpu->depth, sizeof(*gpu->buffers));
    gpu->queue = calloc(gpu->depth, sizeof(*gpu->queue));
    if (!gpu->buffers || !gpu->queue)
        return rf__cuda_fail(gpu, -ENOMEM,
                             "no memory for %" PRIu32 " device buffer records",
                             gpu->depth);
    const cudaError_t err =
        cudaStreamCreateWithFlags(&gpu->copy_stream, cudaStreamNonBlocking);
    if (err != cudaSuccess)
        return rf__cuda_call_failed(gpu, err, "cudaStreamCreateWithFlags",
                                    "creating the copy stream on device %d",
                                    gpu->device);
    for (uint32_t i = 0; i < gpu->depth; i++) {
        const int rc = create_buffer(gpu, i);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void destroy(rf_cuda_loader *gpu);

int rf_cuda_open(rf_cuda_loader **out, rf_loader *loader, int device,
                 uint32_t depth, uint32_t flags, char **errp)
{
    if (errp)
        *errp = NULL;
    if (!out)
        return -EINVAL;
    *out = NULL;
    rf_cuda_loader *gpu = calloc(1, sizeof(*gpu));
    if (!gpu)
        return -ENOMEM;
    gpu->owner = getpid();
    gpu->depth = depth ? depth : RF_CUDA_DEFAULT_DEPTH;
    gpu->flags = flags;
    int rc = loader ? check_arguments(gpu, device, depth, flags)
                    : rf__cuda_fail(gpu, -EINVAL, "no loader given");
    gpu->loader = loader;
    if (rc == 0) /* first: a fork child's is refused before any CUDA call */
        rc = find_ring(gpu);
    if (rc == 0)
        rc = choose_device(gpu, device);
    if (rc == 0)
        rf__cuda_find_ctx_calls(gpu);
    int previous = 0;
    if (rc == 0)
        rc = rf__cuda_enter(gpu, &previous);
    const bool entered = rc == 0;
    if (rc == 0)
        rc = register_ring(gpu);
    if (rc == 0)
        rc = create_buffers(gpu);
    if (entered)
        rf__cuda_leave(gpu, previous);
    if (rc < 0) {
        if (errp)
            *errp = strdup(gpu->error);
        gpu->loader = NULL; /* still the caller's */
        destroy(gpu);
        return rc;
    }
    /* last, once nothing can fail: a failed open leaves the caller's
     * loader as it was */
    gpu->owns_mapping = rf_loader_keep_arena(loader) == 0;
    *out = gpu;
    return 0;
}

/* ---- close ------------------------------------------------------------ */

static void destroy_buffer(rf_cuda_loader *gpu, struct rf__cuda_buffer *b)
{
    if (b->release_pending)
        (void)cudaEventSynchronize(b->released);
    if (b->host_held && gpu->loader)
        rf__cuda_give_slot_back(gpu, b);
    if (b->copied)
        (void)cudaEventDestroy(b->copied);
    if (b->released)
        (void)cudaEventDestroy(b->released);
    if (b->started)
        (void)cudaEventDestroy(b->started);
    if (b->device)
        (void)cudaFree(b->device);
    free(b->labels);
    free(b->indices);
}

/* Undoes whatever open got done, in reverse. Errors are ignored: after a
 * CUDA failure each step may fail, and the next must still run. */
static void release_cuda(rf_cuda_loader *gpu)
{
    int previous = 0;
    const bool entered = rf__cuda_enter(gpu, &previous) == 0;
    /* No DMA may read the ring once it is unregistered and given back. */
    if (gpu->copy_stream)
        (void)cudaStreamSynchronize(gpu->copy_stream);
    for (uint32_t i = 0; gpu->buffers && i < gpu->depth; i++)
        destroy_buffer(gpu, &gpu->buffers[i]);
    if (gpu->copy_stream)
        (void)cudaStreamDestroy(gpu->copy_stream);
    if (gpu->registered)
        (void)cudaHostUnregister(gpu->arena);
    if (entered)
        rf__cuda_leave(gpu, previous);
}

/* The ring's mapping, once CUDA no longer reads it (see owns_mapping). */
static void unmap_ring(rf_cuda_loader *gpu)
{
    if (gpu->owns_mapping)
        (void)munmap(gpu->arena, gpu->arena_bytes);
}

/* In a child of fork(): the host copies of each buffer's labels and
 * indices, which release_cuda() frees with the rest in the owner. */
static void free_host_copies(rf_cuda_loader *gpu)
{
    for (uint32_t i = 0; gpu->buffers && i < gpu->depth; i++) {
        free(gpu->buffers[i].labels);
        free(gpu->buffers[i].indices);
    }
}

static void destroy(rf_cuda_loader *gpu)
{
    /* In a child of fork() only the memory is the child's own. */
    if (getpid() != gpu->owner)
        free_host_copies(gpu);
    else if (gpu->device_chosen)
        release_cuda(gpu);
    unmap_ring(gpu); /* a child's copy too: its loader leaves it mapped */
    free(gpu->buffers);
    free(gpu->queue);
    rf_loader_close(gpu->loader);
    free(gpu);
}

void rf_cuda_close(rf_cuda_loader *gpu)
{
    if (!gpu)
        return;
    if (gpu->calls > 0) { /* the message handler's: see rf_cuda_next() */
        gpu->close_pending = true;
        if (gpu->loader) /* cut the loader's wait short */
            (void)rf_loader_interrupt(gpu->loader);
        return;
    }
    destroy(gpu);
}

rf_loader *rf_cuda_host_loader(rf_cuda_loader *gpu)
{
    return gpu ? gpu->loader : NULL;
}

const char *rf_cuda_error(const rf_cuda_loader *gpu)
{
    return gpu ? gpu->error : "";
}
