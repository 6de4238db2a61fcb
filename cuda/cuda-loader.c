/*
 * loader.c - the GPU consumer (include/ringfeed/cuda.h): uploads each
 * batch from the pinned ring into a ring of device buffers on a copy
 * stream of its own, and gives ring slots back once their uploads have
 * landed. It owns: the rf_loader it wraps, the ring's registration, the
 * copy stream, the device buffers and their events. It uses only the
 * public API of libringfeed; nothing in lib/ knows it exists.
 *
 * A device buffer is FREE, QUEUED (upload started, not handed out) or
 * WITH_USER. Apart from that state, it may still hold the ring slot of its
 * last upload (host_held) until that upload's event is seen complete.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h> /* CUcontext: the functions come through the runtime */

#include "cuda-loader.h"

/* Pixels and labels go up in one DMA when at most this many bytes lie
 * between them (the slot's page padding and metadata), or 1/64 of the
 * pixels; a short last batch in a slot sized for a full one has a larger
 * gap, and then two copies move less. */
#define ONE_COPY_MAX_GAP ((size_t)64 * 1024)
#define ONE_COPY_MAX_GAP_SHARE 64

enum buffer_state {
    BUFFER_FREE,      /* may be uploaded into, after `released` */
    BUFFER_QUEUED,    /* upload started, not yet handed out */
    BUFFER_WITH_USER, /* handed out, not yet released */
};

struct device_buffer {
    void *device;         /* slot_bytes of device memory */
    cudaEvent_t copied;   /* recorded on the copy stream after each upload */
    cudaEvent_t released; /* recorded on the caller's stream by release */
    cudaEvent_t started;  /* RF_CUDA_TIMING: recorded before each upload */
    enum buffer_state state;
    bool release_pending; /* the next upload must wait for `released` */
    bool host_held;       /* `host` is still ours: the DMA may read it */
    rf_batch host;        /* the ring slot uploaded last */
    size_t label_offset;  /* the labels lie at device + label_offset */
    size_t upload_bytes;
    int64_t *labels; /* host copies of labels and indices, `capacity` */
    uint64_t *indices;
    uint32_t capacity;
};

typedef CUresult (*ctx_get_fn)(CUcontext *);
typedef CUresult (*ctx_set_fn)(CUcontext);

struct rf_cuda_loader {
    rf_loader *loader;
    pid_t owner; /* the process that opened it: CUDA is its alone */
    /* cuCtxGetCurrent and cuCtxSetCurrent (NULL if the driver lacks them):
     * enter/leave give the caller back exactly the context it had, none
     * included; cudaSetDevice(0) on the way out would create device 0's
     * context in a thread that had none. */
    ctx_get_fn get_ctx;
    ctx_set_fn set_ctx;
    CUcontext caller_ctx;
    int device;
    uint32_t depth;
    uint32_t flags;
    bool device_chosen; /* CUDA is set up: close has things to undo */
    char *arena;        /* the loader's ring, one mapping */
    size_t arena_bytes;
    size_t slot_bytes;
    bool registered;
    cudaStream_t copy_stream;
    struct device_buffer *buffers; /* depth of them */
    uint32_t *queue;               /* QUEUED buffers, oldest upload first */
    uint32_t queue_head, queue_count;
    bool ended;   /* the loader has no batch left */
    int fatal;    /* RF_E_CUDA once a CUDA call has failed */
    int deferred; /* met while uploading ahead; returned once the batches
                     already uploaded have been handed out */
    char error[512];
};

/* ---- errors and the current device --------------------------------- */

static void set_detail(rf_cuda_loader *gpu, const char *fmt, va_list ap)
{
    vsnprintf(gpu->error, sizeof(gpu->error), fmt, ap);
}

int rf__cuda_fail(rf_cuda_loader *gpu, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_detail(gpu, fmt, ap);
    va_end(ap);
    return code;
}

int rf__cuda_call_failed(rf_cuda_loader *gpu, cudaError_t err, const char *call,
                         const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_detail(gpu, fmt, ap);
    va_end(ap);
    const size_t used = strlen(gpu->error);
    snprintf(gpu->error + used, sizeof(gpu->error) - used,
             ": %s failed: %s (%s)", call, cudaGetErrorString(err),
             cudaGetErrorName(err));
    /* The detail is kept here: clear the runtime's last error, so that a
     * caller checking cudaGetLastError() after its own kernels does not
     * take ours for its own (a sticky context error stays regardless). */
    (void)cudaGetLastError();
    gpu->fatal = RF_E_CUDA;
    return RF_E_CUDA;
}

int rf__cuda_enter(rf_cuda_loader *gpu, int *previous)
{
    /* Every call that reaches CUDA comes through here; a child of fork()
     * cannot use its parent's CUDA context. */
    if (getpid() != gpu->owner)
        return rf__cuda_fail(gpu, RF_E_FORK_UNSAFE,
                             "this GPU consumer belongs to process %d, and "
                             "this is process %d, a child of fork(), where "
                             "CUDA cannot be used: open one in the child, "
                             "after exec (rf_cuda_close() frees the child's "
                             "copy)",
                             (int)gpu->owner, (int)getpid());
    cudaError_t err = cudaGetDevice(previous);
    if (err != cudaSuccess)
        return rf__cuda_call_failed(gpu, err, "cudaGetDevice",
                                    "finding the caller's current device");
    if (*previous == gpu->device)
        return 0;
    if (gpu->get_ctx && gpu->set_ctx &&
        gpu->get_ctx(&gpu->caller_ctx) == CUDA_SUCCESS)
        *previous = -1; /* restore gpu->caller_ctx */
    err = cudaSetDevice(gpu->device);
    if (err != cudaSuccess)
        return rf__cuda_call_failed(gpu, err, "cudaSetDevice",
                                    "making device %d current", gpu->device);
    return 0;
}

void rf__cuda_leave(const rf_cuda_loader *gpu, int previous)
{
    /* It was current a moment ago, so this cannot fail in a way that the
     * caller could do anything about. */
    if (previous == -1)
        (void)gpu->set_ctx(gpu->caller_ctx);
    else if (previous != gpu->device)
        (void)cudaSetDevice(previous);
}

static void find_ctx_calls(rf_cuda_loader *gpu)
{
#if CUDART_VERSION >= 12050
    void *get = NULL, *set = NULL;
    enum cudaDriverEntryPointQueryResult got =
        cudaDriverEntryPointSymbolNotFound;
    enum cudaDriverEntryPointQueryResult put =
        cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &get, 12000,
                                         cudaEnableDefault,
                                         &got) != cudaSuccess ||
        cudaGetDriverEntryPointByVersion("cuCtxSetCurrent", &set, 12000,
                                         cudaEnableDefault,
                                         &put) != cudaSuccess ||
        got != cudaDriverEntryPointSuccess ||
        put != cudaDriverEntryPointSuccess) {
        (void)cudaGetLastError();
        return;
    }
    gpu->get_ctx = (ctx_get_fn)get;
    gpu->set_ctx = (ctx_set_fn)set;
#else
    (void)gpu;
#endif
}

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
    struct device_buffer *b = &gpu->buffers[index];
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
        find_ctx_calls(gpu);
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
    *out = gpu;
    return 0;
}

/* ---- ring slots ------------------------------------------------------- */

static void give_slot_back(rf_cuda_loader *gpu, struct device_buffer *b)
{
    const int rc = rf_loader_release(gpu->loader, &b->host);
    assert(rc == 0); /* it was handed to us and not yet released */
    (void)rc;
    b->host_held = false;
}

/* Gives the producers the slots whose uploads have landed: never waits. */
static int return_uploaded_slots(rf_cuda_loader *gpu)
{
    for (uint32_t i = 0; i < gpu->depth; i++) {
        struct device_buffer *b = &gpu->buffers[i];
        if (!b->host_held)
            continue;
        const cudaError_t err = cudaEventQuery(b->copied);
        if (err == cudaErrorNotReady) {
            /* Recorded as the thread's last error: a caller that checks
             * cudaGetLastError() after its own launches would take it. */
            (void)cudaGetLastError();
            continue;
        }
        if (err != cudaSuccess)
            return rf__cuda_call_failed(gpu, err, "cudaEventQuery",
                                        "the upload of batch %" PRIu64
                                        " into device buffer %" PRIu32,
                                        b->host.sequence, i);
        give_slot_back(gpu, b);
    }
    return 0;
}

/* Waits on the host for one upload (not for the device) and gives its
 * slot back. */
static int wait_for_upload(rf_cuda_loader *gpu, struct device_buffer *b)
{
    const cudaError_t err = cudaEventSynchronize(b->copied);
    if (err != cudaSuccess)
        return rf__cuda_call_failed(gpu, err, "cudaEventSynchronize",
                                    "waiting for the upload of batch %" PRIu64,
                                    b->host.sequence);
    give_slot_back(gpu, b);
    return 0;
}

/* When the uploads in flight hold every slot the loader could hand out,
 * the oldest of them is the one to wait for. */
static int wait_for_oldest_upload(rf_cuda_loader *gpu)
{
    struct device_buffer *oldest = NULL;
    for (uint32_t i = 0; i < gpu->depth; i++) {
        struct device_buffer *b = &gpu->buffers[i];
        if (b->host_held &&
            (!oldest || b->host.sequence < oldest->host.sequence))
            oldest = b;
    }
    if (!oldest) /* the caller holds slots it took before rf_cuda_open() */
        return rf__cuda_fail(gpu, RF_E_ALL_SLOTS_HELD, "%s",
                             rf_loader_error(gpu->loader));
    return wait_for_upload(gpu, oldest);
}

static int take_host_batch(rf_cuda_loader *gpu, rf_batch *batch)
{
    for (;;) {
        const int rc = rf_loader_next(gpu->loader, batch);
        if (rc == 0)
            gpu->ended = true;
        if (rc == -EINTR)
            return rf__cuda_fail(gpu, rc,
                                 "a signal arrived while waiting "
                                 "for the producers; call again");
        if (rc < 0 && rc != RF_E_ALL_SLOTS_HELD)
            return rf__cuda_fail(gpu, rc, "%s", rf_loader_error(gpu->loader));
        if (rc != RF_E_ALL_SLOTS_HELD)
            return rc;
        const int waited = wait_for_oldest_upload(gpu);
        if (waited < 0)
            return waited;
    }
}

/* ---- uploads ---------------------------------------------------------- */

/* The labels must follow the pixels within the batch's slot, so that the
 * device buffer (one slot's size) holds both at the same distance. */
static int locate_labels(rf_cuda_loader *gpu, const rf_batch *hb,
                         size_t *label_offset)
{
    const char *data = hb->data, *labels = (const char *)hb->labels;
    const size_t label_bytes = (size_t)hb->samples * sizeof(int64_t);
    if (data < gpu->arena || data >= gpu->arena + gpu->arena_bytes)
        return rf__cuda_fail(gpu, RF_E_ABI,
                             "batch %" PRIu64 " lies outside the loader's "
                             "ring; ringfeed and ringfeed-cuda come from "
                             "different builds",
                             hb->sequence);
    const size_t into_slot = (size_t)(data - gpu->arena) % gpu->slot_bytes;
    const size_t room = gpu->slot_bytes - into_slot;
    if (labels < data + hb->bytes || (size_t)(labels - data) > room ||
        (size_t)(labels - data) + label_bytes > room)
        return rf__cuda_fail(gpu, RF_E_ABI,
                             "batch %" PRIu64 ": its labels do not follow its "
                             "pixels within its slot of %zu bytes; ringfeed "
                             "and ringfeed-cuda come from different builds",
                             hb->sequence, gpu->slot_bytes);
    *label_offset = (size_t)(labels - data);
    return 0;
}

/* Labels and indices stay readable on the host after the slot goes back. */
static int keep_host_copies(rf_cuda_loader *gpu, struct device_buffer *b,
                            const rf_batch *hb)
{
    if (hb->samples > b->capacity) {
        int64_t *labels = realloc(b->labels, hb->samples * sizeof(*labels));
        if (labels)
            b->labels = labels;
        uint64_t *indices =
            labels ? realloc(b->indices, hb->samples * sizeof(*indices)) : NULL;
        if (!indices)
            return rf__cuda_fail(gpu, -ENOMEM,
                                 "no memory to keep the labels of %" PRIu32
                                 " samples",
                                 hb->samples);
        b->indices = indices;
        b->capacity = hb->samples;
    }
    if (hb->samples > 0) {
        memcpy(b->labels, hb->labels, hb->samples * sizeof(*b->labels));
        memcpy(b->indices, hb->indices, hb->samples * sizeof(*b->indices));
    }
    return 0;
}

static cudaError_t copy_up(const rf_cuda_loader *gpu, void *to,
                           const void *from, size_t bytes)
{
    return cudaMemcpyAsync(to, from, bytes, cudaMemcpyHostToDevice,
                           gpu->copy_stream);
}

/* Queues the DMA of b->host: one copy from the pixels to the end of the
 * labels, or two when the gap between them is large. */
static int queue_copies(rf_cuda_loader *gpu, uint32_t index)
{
    struct device_buffer *b = &gpu->buffers[index];
    const rf_batch *hb = &b->host;
    const size_t label_bytes = (size_t)hb->samples * sizeof(int64_t);
    const size_t gap = b->label_offset - hb->bytes;
    cudaError_t err;
    if (gap <= ONE_COPY_MAX_GAP || gap <= hb->bytes / ONE_COPY_MAX_GAP_SHARE) {
        b->upload_bytes = b->label_offset + label_bytes;
        err = copy_up(gpu, b->device, hb->data, b->upload_bytes);
    } else {
        b->upload_bytes = hb->bytes + label_bytes;
        err = copy_up(gpu, b->device, hb->data, hb->bytes);
        if (err == cudaSuccess)
            err = copy_up(gpu, (char *)b->device + b->label_offset, hb->labels,
                          label_bytes);
    }
    if (err != cudaSuccess)
        return rf__cuda_call_failed(gpu, err, "cudaMemcpyAsync",
                                    "uploading batch %" PRIu64 " (%zu bytes) "
                                    "into device buffer %" PRIu32,
                                    hb->sequence, b->upload_bytes, index);
    return 0;
}

/* On the copy stream: wait until the caller is done with the buffer's
 * last batch, [mark the start,] copy, mark the end. */
static int queue_upload(rf_cuda_loader *gpu, uint32_t index)
{
    struct device_buffer *b = &gpu->buffers[index];
    cudaError_t err;
    if (b->release_pending) {
        err = cudaStreamWaitEvent(gpu->copy_stream, b->released, 0);
        if (err != cudaSuccess)
            return rf__cuda_call_failed(gpu, err, "cudaStreamWaitEvent",
                                        "making the upload into device "
                                        "buffer %" PRIu32 " wait for its "
                                        "release",
                                        index);
        b->release_pending = false;
    }
    if (gpu->flags & RF_CUDA_TIMING) {
        err = cudaEventRecord(b->started, gpu->copy_stream);
        if (err != cudaSuccess)
            return rf__cuda_call_failed(gpu, err, "cudaEventRecord",
                                        "marking the start of an upload");
    }
    const int rc = queue_copies(gpu, index);
    if (rc < 0)
        return rc;
    err = cudaEventRecord(b->copied, gpu->copy_stream);
    if (err != cudaSuccess)
        return rf__cuda_call_failed(gpu, err, "cudaEventRecord",
                                    "marking the end of the upload of batch "
                                    "%" PRIu64,
                                    b->host.sequence);
    return 0;
}

static void queue_push(rf_cuda_loader *gpu, uint32_t index)
{
    gpu->queue[(gpu->queue_head + gpu->queue_count) % gpu->depth] = index;
    gpu->queue_count++;
}

static uint32_t queue_pop(rf_cuda_loader *gpu)
{
    const uint32_t index = gpu->queue[gpu->queue_head];
    gpu->queue_head = (gpu->queue_head + 1) % gpu->depth;
    gpu->queue_count--;
    return index;
}

/* Takes over the host batch and queues its upload. On failure the batch
 * is still the caller's unless b->host_held says a DMA may read it. */
static int start_upload(rf_cuda_loader *gpu, uint32_t index, const rf_batch *hb)
{
    struct device_buffer *b = &gpu->buffers[index];
    size_t label_offset = 0;
    int rc = locate_labels(gpu, hb, &label_offset);
    if (rc == 0)
        rc = keep_host_copies(gpu, b, hb);
    if (rc < 0)
        return rc;
    b->host = *hb;
    b->host_held = true;
    b->label_offset = label_offset;
    rc = queue_upload(gpu, index);
    if (rc < 0)
        return rc;
    b->state = BUFFER_QUEUED;
    queue_push(gpu, index);
    return 0;
}

static int find_free_buffer(const rf_cuda_loader *gpu)
{
    for (uint32_t i = 0; i < gpu->depth; i++)
        if (gpu->buffers[i].state == BUFFER_FREE)
            return (int)i;
    return -1;
}

/* Starts the upload of the loader's next batch into a free buffer.
 * Returns 1, 0 when there is none left, or an error. */
static int upload_next(rf_cuda_loader *gpu)
{
    if (gpu->ended)
        return 0;
    const int index = find_free_buffer(gpu);
    if (index < 0)
        return rf__cuda_fail(gpu, RF_E_ALL_SLOTS_HELD,
                             "all %" PRIu32 " device buffers are held by the "
                             "caller; release one with rf_cuda_release() "
                             "before asking for the next batch, or open with "
                             "a larger depth",
                             gpu->depth);
    struct device_buffer *b = &gpu->buffers[index];
    /* Its previous upload is normally long done (a whole step ago); its
     * slot must go back before the buffer takes a new one. */
    int rc = b->host_held ? wait_for_upload(gpu, b) : 0;
    /* Uploads that finished since give their slots back first, so that
     * the producers can fill them while this call waits for a batch. */
    if (rc == 0)
        rc = return_uploaded_slots(gpu);
    rf_batch hb = {0};
    if (rc == 0)
        rc = take_host_batch(gpu, &hb);
    if (rc <= 0)
        return rc;
    rc = start_upload(gpu, (uint32_t)index, &hb);
    if (rc < 0 && !b->host_held)
        rf_loader_release(gpu->loader, &hb);
    return rc < 0 ? rc : 1;
}

/* Fills every free buffer, so that those uploads overlap the caller's
 * step. An error is kept for the call after the batches already queued. */
static void upload_ahead(rf_cuda_loader *gpu)
{
    while (!gpu->deferred && find_free_buffer(gpu) >= 0) {
        const int rc = upload_next(gpu);
        if (rc == 0)
            break;
        if (rc < 0) {
            if (rc != -EINTR) /* the next call simply tries again */
                gpu->deferred = rc;
            break;
        }
    }
}

/* ---- the consumer's calls --------------------------------------------- */

static void hand_out(rf_cuda_loader *gpu, rf_cuda_batch *out)
{
    const uint32_t index = queue_pop(gpu);
    struct device_buffer *b = &gpu->buffers[index];
    const rf_batch *hb = &b->host; /* its scalars only: the slot may be
                                      back with the producers already */
    b->state = BUFFER_WITH_USER;
    memset(out, 0, sizeof(*out));
    out->data = b->device;
    out->labels = (const int64_t *)((const char *)b->device + b->label_offset);
    out->bytes = hb->bytes;
    out->sample_bytes = hb->sample_bytes;
    out->samples = hb->samples;
    out->height = hb->height;
    out->width = hb->width;
    out->channels = hb->channels;
    out->layout = hb->layout;
    out->buffer = index;
    out->host_labels = b->labels;
    out->indices = b->indices;
    out->epoch = hb->epoch;
    out->number = hb->number;
    out->sequence = hb->sequence;
    out->skipped = hb->skipped;
    out->upload_bytes = b->upload_bytes;
    out->ready = b->copied;
    out->upload_started = (gpu->flags & RF_CUDA_TIMING) ? b->started : NULL;
    out->handle = hb->handle;
}

static int next_batch(rf_cuda_loader *gpu, rf_cuda_batch *batch)
{
    int rc = return_uploaded_slots(gpu);
    if (rc < 0)
        return rc;
    if (gpu->queue_count == 0) {
        if (gpu->deferred) {
            rc = gpu->deferred;
            gpu->deferred = 0;
            return rc;
        }
        rc = upload_next(gpu);
        if (rc <= 0)
            return rc;
    }
    hand_out(gpu, batch);
    upload_ahead(gpu);
    return 1;
}

int rf_cuda_next(rf_cuda_loader *gpu, rf_cuda_batch *batch)
{
    if (!gpu || !batch)
        return -EINVAL;
    if (gpu->fatal)
        return gpu->fatal;
    int previous = 0;
    int rc = rf__cuda_enter(gpu, &previous);
    if (rc < 0)
        return rc;
    rc = next_batch(gpu, batch);
    rf__cuda_leave(gpu, previous);
    return rc;
}

static struct device_buffer *held_buffer(rf_cuda_loader *gpu,
                                         const rf_cuda_batch *batch)
{
    if (batch->buffer >= gpu->depth)
        return NULL;
    struct device_buffer *b = &gpu->buffers[batch->buffer];
    if (b->state != BUFFER_WITH_USER || b->host.handle != batch->handle)
        return NULL;
    return b;
}

static int release_on(rf_cuda_loader *gpu, struct device_buffer *b,
                      cudaStream_t stream)
{
    const cudaError_t err = cudaEventRecord(b->released, stream);
    if (err != cudaSuccess)
        return rf__cuda_call_failed(gpu, err, "cudaEventRecord",
                                    "releasing batch %" PRIu64 " on the "
                                    "caller's stream, which must be a "
                                    "stream of device %d",
                                    b->host.sequence, gpu->device);
    b->release_pending = true;
    b->state = BUFFER_FREE;
    return return_uploaded_slots(gpu);
}

int rf_cuda_release(rf_cuda_loader *gpu, const rf_cuda_batch *batch,
                    cudaStream_t stream)
{
    if (!gpu || !batch)
        return -EINVAL;
    struct device_buffer *b = held_buffer(gpu, batch);
    if (!b)
        return rf__cuda_fail(gpu, -EINVAL,
                             "batch %" PRIu64 " (device buffer %" PRIu32
                             ") is not held: it was released already, or "
                             "comes from another loader",
                             batch->sequence, batch->buffer);
    if (gpu->fatal)
        return gpu->fatal;
    int previous = 0;
    int rc = rf__cuda_enter(gpu, &previous);
    if (rc < 0)
        return rc;
    rc = release_on(gpu, b, stream);
    rf__cuda_leave(gpu, previous);
    return rc;
}

/* ---- close ------------------------------------------------------------ */

static void destroy_buffer(rf_cuda_loader *gpu, struct device_buffer *b)
{
    if (b->release_pending)
        (void)cudaEventSynchronize(b->released);
    if (b->host_held && gpu->loader)
        give_slot_back(gpu, b);
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
    free(gpu->buffers);
    free(gpu->queue);
    rf_loader_close(gpu->loader);
    free(gpu);
}

void rf_cuda_close(rf_cuda_loader *gpu)
{
    if (gpu)
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
