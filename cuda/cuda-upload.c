/*
 * cuda-upload.c - the GPU consumer's batches (include/ringfeed/cuda.h):
 * each batch goes up from the pinned ring into a device buffer on the
 * copy stream, ahead of the caller's step, and its ring slot goes back to
 * the producers as soon as the upload is seen to have landed, never
 * before. rf_cuda_next() hands out the oldest upload; rf_cuda_release()
 * frees its buffer once the caller's stream is done with it. See
 * cuda-loader.h for the buffers' states.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/assert.h"
#include "cuda-loader.h"

/* Pixels and labels go up in one DMA when at most this many bytes lie
 * between them (the slot's page padding and metadata), or 1/64 of the
 * pixels; a short last batch in a slot sized for a full one has a larger
 * gap, and then two copies move less. */
#define ONE_COPY_MAX_GAP ((size_t)64 * 1024)
#define ONE_COPY_MAX_GAP_SHARE 64

/* ---- ring slots ------------------------------------------------------- */

void rf__cuda_give_slot_back(rf_cuda_loader *gpu, struct rf__cuda_buffer *b)
{
    const int rc = rf_loader_release(gpu->loader, &b->host);
    RF_ASSERT(rc == 0); /* it was handed to us and not yet released */
    (void)rc;
    b->host_held = false;
}

/* Gives the producers the slots whose uploads have landed: never waits. */
static int return_uploaded_slots(rf_cuda_loader *gpu)
{
    for (uint32_t i = 0; i < gpu->depth; i++) {
        struct rf__cuda_buffer *b = &gpu->buffers[i];
        if (!b->host_held)
            continue;
        const cudaError_t err = cudaEventQuery(b->copied);
        if (err == cudaErrorNotReady) {
            /* Where the runtime records it as the thread's last error, a
             * caller that checks cudaGetLastError() after its own launches
             * would take it: cleared then, and only then (an error of the
             * caller's own launches stays for the caller). */
            if (cudaPeekAtLastError() == cudaErrorNotReady)
                (void)cudaGetLastError();
            continue;
        }
        if (err != cudaSuccess)
            return rf__cuda_call_failed(gpu, err, "cudaEventQuery",
                                        "the upload of batch %" PRIu64
                                        " into device buffer %" PRIu32,
                                        b->host.sequence, i);
        rf__cuda_give_slot_back(gpu, b);
    }
    return 0;
}

/* Waits on the host for one upload (not for the device) and gives its
 * slot back. */
static int wait_for_upload(rf_cuda_loader *gpu, struct rf__cuda_buffer *b)
{
    const cudaError_t err = cudaEventSynchronize(b->copied);
    if (err != cudaSuccess)
        return rf__cuda_call_failed(gpu, err, "cudaEventSynchronize",
                                    "waiting for the upload of batch %" PRIu64,
                                    b->host.sequence);
    rf__cuda_give_slot_back(gpu, b);
    return 0;
}

/* When the uploads in flight hold every slot the loader could hand out,
 * the oldest of them is the one to wait for. */
static int wait_for_oldest_upload(rf_cuda_loader *gpu)
{
    struct rf__cuda_buffer *oldest = NULL;
    for (uint32_t i = 0; i < gpu->depth; i++) {
        struct rf__cuda_buffer *b = &gpu->buffers[i];
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
        if (rc == -ECANCELED) { /* the handler closed it, which cuda.h
                                   forbids: the loader is gone */
            gpu->loader = NULL;
            gpu->fatal = rc;
            return rf__cuda_fail(gpu, rc,
                                 "the loader was closed by its message "
                                 "handler; only rf_cuda_close() is left");
        }
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
static int keep_host_copies(rf_cuda_loader *gpu, struct rf__cuda_buffer *b,
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
    struct rf__cuda_buffer *b = &gpu->buffers[index];
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
    struct rf__cuda_buffer *b = &gpu->buffers[index];
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
    struct rf__cuda_buffer *b = &gpu->buffers[index];
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
    b->state = RF__CUDA_BUFFER_QUEUED;
    queue_push(gpu, index);
    return 0;
}

static int find_free_buffer(const rf_cuda_loader *gpu)
{
    for (uint32_t i = 0; i < gpu->depth; i++)
        if (gpu->buffers[i].state == RF__CUDA_BUFFER_FREE)
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
    struct rf__cuda_buffer *b = &gpu->buffers[index];
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
    while (!gpu->deferred && !gpu->close_pending &&
           find_free_buffer(gpu) >= 0) {
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
    struct rf__cuda_buffer *b = &gpu->buffers[index];
    const rf_batch *hb = &b->host; /* its scalars only: the slot may be
                                      back with the producers already */
    b->state = RF__CUDA_BUFFER_WITH_USER;
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

/* rf__cuda_enter() for the calls that upload or release. After RF_E_CUDA
 * a GPU consumer can only be closed (cuda.h): what the failed call left
 * on the device is unknown, so they return that failure again without
 * touching it. */
static int enter_usable(rf_cuda_loader *gpu, int *previous)
{
    if (gpu->fatal)
        return gpu->fatal;
    return rf__cuda_enter(gpu, previous);
}

/* The loader's message handler runs inside rf_cuda_next() (in its
 * rf_loader_next()): `call` of the handler's, a next() or release(), would
 * change the buffers and slots that rf_cuda_next() is working on, and is
 * refused with nothing changed, so that it goes on as if the handler had
 * not called. */
static int refuse_from_handler(rf_cuda_loader *gpu, const char *call)
{
    return rf__cuda_fail(gpu, -EBUSY,
                         "%s called from the loader's own message handler: "
                         "the handler runs inside rf_cuda_next(), which hands "
                         "out its batch when the handler returns; make the "
                         "call after that (rf_cuda_close() from the handler "
                         "ends the run with -ECANCELED)",
                         call);
}

int rf_cuda_next(rf_cuda_loader *gpu, rf_cuda_batch *batch)
{
    if (!gpu || !batch)
        return -EINVAL;
    if (gpu->calls > 0)
        return refuse_from_handler(gpu, "rf_cuda_next()");
    int previous = 0;
    int rc = enter_usable(gpu, &previous);
    if (rc < 0)
        return rc;
    gpu->calls++;
    rc = next_batch(gpu, batch);
    rf__cuda_leave(gpu, previous);
    if (--gpu->calls > 0 || !gpu->close_pending)
        return rc;
    rf_cuda_close(gpu); /* asked for by the message handler meanwhile */
    memset(batch, 0, sizeof(*batch));
    return -ECANCELED;
}

struct rf__cuda_buffer *rf__cuda_held_buffer(rf_cuda_loader *gpu,
                                             const rf_cuda_batch *batch)
{
    if (batch->buffer >= gpu->depth)
        return NULL;
    struct rf__cuda_buffer *b = &gpu->buffers[batch->buffer];
    if (b->state != RF__CUDA_BUFFER_WITH_USER ||
        b->host.handle != batch->handle)
        return NULL;
    return b;
}

static int release_on(rf_cuda_loader *gpu, struct rf__cuda_buffer *b,
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
    b->state = RF__CUDA_BUFFER_FREE;
    return return_uploaded_slots(gpu);
}

int rf_cuda_release(rf_cuda_loader *gpu, const rf_cuda_batch *batch,
                    cudaStream_t stream)
{
    if (!gpu || !batch)
        return -EINVAL;
    if (gpu->calls > 0)
        return refuse_from_handler(gpu, "rf_cuda_release()");
    struct rf__cuda_buffer *b = rf__cuda_held_buffer(gpu, batch);
    if (!b)
        return rf__cuda_fail(gpu, -EINVAL,
                             "batch %" PRIu64 " (device buffer %" PRIu32
                             ") is not held: it was released already, or "
                             "comes from another loader",
                             batch->sequence, batch->buffer);
    int previous = 0;
    int rc = enter_usable(gpu, &previous);
    if (rc < 0)
        return rc;
    rc = release_on(gpu, b, stream);
    rf__cuda_leave(gpu, previous);
    return rc;
}
