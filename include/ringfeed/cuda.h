/*
 * ringfeed/cuda.h - the GPU consumer: each batch goes from the shared ring,
 * where the producers wrote it, to a CUDA device buffer in one DMA, with no
 * staging copy, while the training loop works on the batch before it.
 *
 *     rf_loader *loader;                  // opened as in ringfeed.h
 *     rf_cuda_loader *gpu;
 *     rc = rf_cuda_open(&gpu, loader, 0, 0, 0, &why); // device 0, depth 3
 *     rf_cuda_batch b;
 *     while ((rc = rf_cuda_next(gpu, &b)) > 0) {
 *         cudaStreamWaitEvent(step, b.ready, 0);      // no host wait
 *         rf_cuda_convert(gpu, &b, x, RF_CUDA_FLOAT16, RF_LAYOUT_NCHW,
 *                         mean, std, step);
 *         train_step(x, b.labels, b.samples, step);   // kernels on `step`
 *         rf_cuda_release(gpu, &b, step);             // no host wait
 *     }
 *     rf_cuda_close(gpu);                 // closes the loader too
 *
 * How it works. rf_cuda_open() pins the loader's whole ring once
 * (cudaHostRegister of rf_loader_arena()) and allocates `depth` device
 * buffers. rf_cuda_next() hands out the oldest uploaded buffer and, before
 * it returns, starts the uploads of the next batches into every free
 * buffer (depth - 1 ahead when the caller holds one), each a
 * cudaMemcpyAsync on the loader's own non-blocking copy stream followed by
 * an event. So the upload of batch n+1 runs while the caller's stream
 * works on batch n. A ring slot goes back to the producers only once the
 * event of its upload has completed (polled with cudaEventQuery in every
 * call; never a device-wide synchronisation). rf_cuda_release() records an
 * event on the caller's stream, and the copy stream waits for it before it
 * overwrites that device buffer: the host never waits for the GPU.
 *
 * Conventions are ringfeed.h's: 0 or a documented positive value on
 * success, a negative -errno or RF_E_* code on failure with the detail in
 * rf_cuda_error(); RF_E_CUDA means a CUDA call failed, and its detail
 * names the call and cudaGetErrorString()'s message. After RF_E_CUDA the
 * GPU consumer can only be closed.
 *
 * Threads and devices: one thread at a time per rf_cuda_loader, as for
 * rf_loader; any thread may be the one (rf_cuda_next() calls
 * rf_loader_next(), whose replacement producers outlive the thread that
 * started them). Every call makes the loader's device current for its duration
 * and restores the caller's current device before it returns.
 *
 * Ring slots: the ring needs at least depth + 2 x producers slots
 * (RF_PARAM_SLOTS): up to depth slots wait for their uploads, and each
 * producer needs two to fill one while the other waits to be taken. With
 * fewer, the producers stall for free slots while uploads are in flight,
 * each rf_cuda_next() waits for them on the host, and the uploads no
 * longer run ahead of the steps (the throughput drops, nothing fails).
 *
 * Processes: producers never load CUDA (they are separate executables
 * that link no CUDA library). Use spawn mode (RF_START_SPAWN, the
 * default) with the GPU consumer. A loader that asks for RF_START_FORK
 * must be opened before anything in the process initialises CUDA; once
 * CUDA is loaded, fork mode is refused with RF_E_FORK_UNSAFE, and that
 * includes replacing a producer: with a fork-mode loader, a producer that
 * dies after rf_cuda_open() cannot be restarted, and the run ends with
 * RF_E_PRODUCER_DIED.
 *
 * fork(): CUDA cannot be used in a child of fork(), and the ring is the
 * parent's: there every call that would reach CUDA or the ring returns
 * RF_E_FORK_UNSAFE and changes nothing, and rf_cuda_close() only frees
 * the child's copy, with no CUDA call (the parent's run goes on). The
 * child may also just leave it.
 *
 * Link with -lringfeed-cuda -lringfeed -lcudart (pkg-config ringfeed-cuda).
 */
#ifndef RINGFEED_CUDA_H
#define RINGFEED_CUDA_H

#include <cuda_runtime_api.h>

#include <ringfeed.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rf_cuda_loader rf_cuda_loader;

/* Device buffers when rf_cuda_open() is given depth 0, and the most it
 * takes. Two is enough to overlap one upload with one step; three also
 * absorbs a step or a producer that is late once in a while. */
#define RF_CUDA_DEFAULT_DEPTH 3
#define RF_CUDA_MAX_DEPTH 64

/* Flags for rf_cuda_open(). */
enum rf_cuda_flags {
    /* Events that keep time: rf_cuda_batch.upload_started is set and
     * cudaEventElapsedTime() works on it and on .ready. For profiling; a
     * timing event costs a little more to record. */
    RF_CUDA_TIMING = 1
};

/* Element types that rf_cuda_convert() writes. */
typedef enum rf_cuda_dtype {
    RF_CUDA_FLOAT32 = 0,
    RF_CUDA_FLOAT16 = 1, /* IEEE binary16 (__half) */
    RF_CUDA_BFLOAT16 = 2 /* bfloat16 (__nv_bfloat16) */
} rf_cuda_dtype;

/*
 * One batch on the device, filled by rf_cuda_next(). The device pointers
 * and host arrays stay valid until the batch is passed to
 * rf_cuda_release() or the loader is closed; the device memory must be
 * read only after the caller's stream has waited for `ready`.
 */
typedef struct rf_cuda_batch {
    void *data;            /* device: `bytes` uint8 pixels in `layout`,
                              the producers' bytes exactly; 256-aligned */
    const int64_t *labels; /* device: `samples` labels */
    size_t bytes;          /* samples * sample_bytes */
    size_t sample_bytes;   /* height * width * channels */
    uint32_t samples;      /* samples in this batch (last may be short) */
    uint32_t height;       /* as configured */
    uint32_t width;
    uint32_t channels;
    rf_layout layout;
    uint32_t buffer;            /* which device buffer, 0..depth-1 */
    const int64_t *host_labels; /* host copy of the labels */
    const uint64_t *indices;    /* host: dataset index of each sample */
    uint64_t epoch;             /* 0-based */
    uint64_t number;            /* batch number within the epoch */
    uint64_t sequence;          /* batch number across all epochs */
    uint32_t skipped;           /* as rf_batch.skipped */
    uint32_t reserved32_;
    size_t upload_bytes;        /* bytes the DMA moved: the pixels and the
                                   labels, and the few bytes between them
                                   when they went in one copy */
    cudaEvent_t ready;          /* completes when the upload has landed;
                                   wait for it on the stream that reads
                                   the batch (cudaStreamWaitEvent) */
    cudaEvent_t upload_started; /* RF_CUDA_TIMING: recorded just before
                                   the upload; otherwise NULL */
    uint64_t handle;            /* opaque; identifies the batch */
    uint64_t reserved_[4];
} rf_cuda_batch;

/*
 * Makes a GPU consumer of `loader` on CUDA device `device` (-1: the
 * calling thread's current device) with `depth` device buffers (0:
 * RF_CUDA_DEFAULT_DEPTH; at most RF_CUDA_MAX_DEPTH), and `flags` from
 * enum rf_cuda_flags. Each device buffer holds one ring slot, so the GPU
 * memory taken is about depth * (the ring's size / its slots).
 *
 * Ownership: on success *out owns `loader`: rf_cuda_close() closes it,
 * and from then on the caller must not call rf_loader_next(),
 * rf_loader_release() or rf_loader_close() on it (rf_cuda_host_loader()
 * gives it back for rf_loader_stats(), rf_loader_error() and
 * rf_loader_sample_errors()). On failure the caller still owns `loader`,
 * e.g. to fall back to a CPU loop. Batches the caller took from `loader`
 * before this call stay the caller's to release. *out also takes the
 * ring's mapping (rf_loader_keep_arena()): it unmaps the ring only once
 * CUDA has finished with it and it is unregistered, in rf_cuda_close(),
 * even when the host loader was closed before (its message handler
 * closing it inside rf_cuda_next()).
 *
 * Errors: -EINVAL (NULL out or loader, depth or flags out of range),
 * -ENODEV (no usable CUDA device: no driver, one too old or not matching
 * its kernel module, or `device` is not one; the detail says how many
 * there are and gives CUDA's message), -ENOMEM, RF_E_CUDA (registering the
 * ring, allocating device memory, creating the stream or events failed: the
 * detail names the call, the sizes and CUDA's message), RF_E_ABI
 * (libringfeed and libringfeed-cuda from different builds),
 * RF_E_FORK_UNSAFE (in a child of fork() of the process that opened
 * `loader`: refused before any CUDA call). On error *out
 * is NULL and, when errp is not NULL, *errp receives a malloc'd detail for
 * the caller to free(); it is NULL when out is NULL (-EINVAL) or memory
 * ran out before the message could be made.
 */
RF_API int rf_cuda_open(rf_cuda_loader **out, rf_loader *loader, int device,
                        uint32_t depth, uint32_t flags, char **errp);

/*
 * Hands out the next batch on the device and starts the uploads of the
 * batches after it. Returns 1 with a batch, 0 at the end of the last epoch
 * (and every call after), or a negative code:
 *   RF_E_ALL_SLOTS_HELD  the caller holds every device buffer; release one
 *                        first, or open with a larger depth;
 *   RF_E_CUDA            an upload could not be started or failed;
 *   -EINVAL              NULL gpu or batch;
 *   -EBUSY               called by the loader's message handler, which
 *                        runs inside rf_cuda_next(): nothing is changed,
 *                        and the call that runs the handler hands out its
 *                        batch once the handler returns. From the handler
 *                        only rf_cuda_convert(), rf_cuda_host_loader()
 *                        (for the reads rf_message_fn lists),
 *                        rf_cuda_error() and rf_cuda_close() may be
 *                        called on gpu;
 *   -EINTR               a signal arrived while waiting; call again;
 *   -ECANCELED           the loader's message handler (which runs inside
 *                        this call: see rf_message_fn) called
 *                        rf_cuda_close(gpu): the close is put off until
 *                        this call returns, which then stops, closes gpu
 *                        (and its loader) and zeroes *batch; gpu must
 *                        not be used again. Where the handler closed
 *                        the loader itself instead (which the caller
 *                        must not: gpu owns it), the call fails with
 *                        -ECANCELED, and every later one too: only
 *                        rf_cuda_close() is left;
 *   any error of rf_loader_next(), with its detail: a producer died or
 *                        failed, a sample is corrupt.
 * Batches already uploaded are handed out before an error of
 * rf_loader_next() met while fetching later ones is returned; after
 * RF_E_CUDA or -ECANCELED none is (only rf_cuda_close() is left). Before
 * it returns, the call fills
 * every free device buffer with the next batches (giving back the slots
 * of uploads that have landed first), so it waits on the host for the
 * producers whenever those batches are not ready yet, even when the batch
 * it hands out was uploaded long ago. It never synchronises the device, and
 * waits for a single upload's event in two cases only: the buffer it is about
 * to refill still has its previous upload in flight (normally finished a step
 * ago), or the uploads in flight hold every ring slot (then the oldest).
 */
RF_API int rf_cuda_next(rf_cuda_loader *gpu, rf_cuda_batch *batch);

/*
 * Gives the batch's device buffer back once the work already queued on
 * `stream` (any stream of the loader's device; 0 is the legacy default
 * stream) is done with it: an event is recorded on `stream` and the next
 * upload into this buffer waits for it on the GPU. Does not wait on the
 * host. Also gives back to the producers the ring slots whose uploads have
 * completed. Returns 0, -EINVAL (gpu or batch is NULL, or the batch is not
 * one this loader handed out and has not released; nothing happens),
 * -EBUSY (called by the loader's message handler inside rf_cuda_next():
 * nothing happens; release it once that call has returned) or RF_E_CUDA
 * (the event could not be recorded, e.g. the stream belongs to another
 * device).
 */
RF_API int rf_cuda_release(rf_cuda_loader *gpu, const rf_cuda_batch *batch,
                           cudaStream_t stream);

/*
 * Converts the batch's uint8 pixels (NHWC or NCHW, as the batch is) into
 * dst, on `stream`, in one pass:
 *     dst = (pixel / 255 - mean[c]) / std[c]
 * as torchvision's ToTensor() then Normalize(mean, std), in `dtype`
 * (rounded to nearest even) and `layout`. mean and std are host arrays of
 * `channels` floats, read during the call only; NULL mean means 0, NULL
 * std means 1. dst is device memory of at least batch->bytes elements of
 * `dtype` (4 or 2 bytes each), aligned to the element. The stream must
 * already wait for batch->ready and the batch must not be released before
 * the work is queued (release it on the same stream afterwards). Returns
 * 0, -EINVAL (NULL pointer, a dtype or layout that does not exist, a std
 * of 0, a non-finite mean or std, a batch that is not a whole number of
 * samples, or one not held: released already, or not this consumer's),
 * RF_E_CUDA (the kernel could not be launched), or the error after which
 * only rf_cuda_close() is left.
 */
RF_API int rf_cuda_convert(rf_cuda_loader *gpu, const rf_cuda_batch *batch,
                           void *dst, rf_cuda_dtype dtype, rf_layout layout,
                           const float *mean, const float *std,
                           cudaStream_t stream);

/*
 * Waits for the uploads still in flight (on the copy stream only), gives
 * every slot back, frees the device buffers, unregisters the ring and
 * closes the loader. Device pointers of batches still held become invalid:
 * the caller's streams must be done with them (e.g. synchronise those
 * streams) before this call. NULL is fine. From the loader's message
 * handler while rf_cuda_next() runs, it only asks for the close, which
 * that call carries out as it returns -ECANCELED.
 */
RF_API void rf_cuda_close(rf_cuda_loader *gpu);

/* The loader that `gpu` owns, for rf_loader_stats(), rf_loader_error() and
 * rf_loader_sample_errors(); NULL for NULL. Owned by gpu. */
RF_API rf_loader *rf_cuda_host_loader(rf_cuda_loader *gpu);

/* The detail of the last error on gpu, or "" when none or gpu is NULL.
 * The string belongs to gpu and stays valid until the next call on it. */
RF_API const char *rf_cuda_error(const rf_cuda_loader *gpu);

#ifdef __cplusplus
}
#endif

#endif /* RINGFEED_CUDA_H */
