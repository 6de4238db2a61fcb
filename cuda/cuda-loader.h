/*
 * cuda-loader.h - what the C files of libringfeed-cuda share: the GPU
 * consumer's object and its device buffers, the error detail, and the
 * current-device guard every public call runs under.
 *
 *   cuda-loader.c  open and close: the device, the ring's registration,
 *                  the copy stream, the device buffers and their events;
 *   cuda-upload.c  ring slots and uploads: rf_cuda_next(),
 *                  rf_cuda_release();
 *   cuda-device.c  the error detail and the current-device guard;
 *   cuda-convert.c rf_cuda_convert(), whose kernel is cuda-kernels.cu.
 *
 * A device buffer is FREE, QUEUED (upload started, not handed out) or
 * WITH_USER. Apart from that state, it may still hold the ring slot of its
 * last upload (host_held) until that upload's event is seen complete.
 */
#ifndef RF_CUDA_LOADER_H
#define RF_CUDA_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cuda.h> /* CUcontext: the functions come through the runtime */
#include <cuda_runtime_api.h>

#include "ringfeed/cuda.h"

enum rf__cuda_buffer_state {
    RF__CUDA_BUFFER_FREE,      /* may be uploaded into, after `released` */
    RF__CUDA_BUFFER_QUEUED,    /* upload started, not yet handed out */
    RF__CUDA_BUFFER_WITH_USER, /* handed out, not yet released */
};

struct rf__cuda_buffer {
    void *device;         /* slot_bytes of device memory */
    cudaEvent_t copied;   /* recorded on the copy stream after each upload */
    cudaEvent_t released; /* recorded on the caller's stream by release */
    cudaEvent_t started;  /* RF_CUDA_TIMING: recorded before each upload */
    enum rf__cuda_buffer_state state;
    bool release_pending; /* the next upload must wait for `released` */
    bool host_held;       /* `host` is still ours: the DMA may read it */
    rf_batch host;        /* the ring slot uploaded last */
    size_t label_offset;  /* the labels lie at device + label_offset */
    size_t upload_bytes;
    int64_t *labels; /* host copies of labels and indices, `capacity` */
    uint64_t *indices;
    uint32_t capacity;
};

typedef CUresult (*rf__cuda_ctx_get_fn)(CUcontext *);
typedef CUresult (*rf__cuda_ctx_set_fn)(CUcontext);

struct rf_cuda_loader {
    rf_loader *loader;
    pid_t owner; /* the process that opened it: CUDA is its alone */
    /* cuCtxGetCurrent and cuCtxSetCurrent (NULL if the driver lacks them):
     * enter/leave give the caller back exactly the context it had, none
     * included; cudaSetDevice(0) on the way out would create device 0's
     * context in a thread that had none. */
    rf__cuda_ctx_get_fn get_ctx;
    rf__cuda_ctx_set_fn set_ctx;
    CUcontext caller_ctx;
    int device;
    uint32_t depth;
    uint32_t flags;
    bool device_chosen; /* CUDA is set up: close has things to undo */
    char *arena;        /* the loader's ring, one mapping */
    size_t arena_bytes;
    size_t slot_bytes;
    bool registered;
    /* rf_loader_keep_arena(): the ring's mapping is this object's, unmapped
     * only after it is unregistered, however the host loader closes (its
     * message handler may close it inside rf_cuda_next()) */
    bool owns_mapping;
    cudaStream_t copy_stream;
    struct rf__cuda_buffer *buffers; /* depth of them */
    uint32_t *queue;                 /* QUEUED buffers, oldest upload first */
    uint32_t queue_head, queue_count;
    bool ended; /* the loader has no batch left */
    int fatal;  /* RF_E_CUDA once a CUDA call has failed; -ECANCELED
                   once the loader's message handler closed the loader
                   (then loader is NULL) */
    /* rf_cuda_close() from the loader's message handler, inside
     * rf_cuda_next(): that call destroys gpu on its way out. calls counts
     * the rf_cuda_next() calls on the stack (0 or 1: the handler's own
     * rf_cuda_next() and rf_cuda_release() are refused with -EBUSY). */
    uint32_t calls;
    bool close_pending;
    int deferred; /* met while uploading ahead; returned once the batches
                     already uploaded have been handed out */
    char error[512];
};

/* ---- cuda-device.c ------------------------------------------------------ */

/* Stores the detail of a failure in gpu and returns code. */
int rf__cuda_fail(rf_cuda_loader *gpu, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Stores "CALL: CUDA's message (its name)" plus the context given, and
 * returns RF_E_CUDA. */
int rf__cuda_call_failed(rf_cuda_loader *gpu, cudaError_t err, const char *call,
                         const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Finds the driver's cuCtxGetCurrent and cuCtxSetCurrent, when the
 * runtime can look them up, for rf__cuda_enter() and rf__cuda_leave(). */
void rf__cuda_find_ctx_calls(rf_cuda_loader *gpu);

/* Makes gpu's device current, keeping the caller's in *previous for
 * rf__cuda_leave(). Returns 0, RF_E_FORK_UNSAFE in a child of fork(), or
 * RF_E_CUDA. */
int rf__cuda_enter(rf_cuda_loader *gpu, int *previous);
void rf__cuda_leave(const rf_cuda_loader *gpu, int previous);

/* ---- cuda-upload.c ------------------------------------------------------ */

/* Gives buffer b's ring slot (b->host) back to the loader, once no DMA
 * reads it any more. */
void rf__cuda_give_slot_back(rf_cuda_loader *gpu, struct rf__cuda_buffer *b);

/* The device buffer of `batch` when the caller holds it (handed out by
 * rf_cuda_next(), not released), else NULL. */
struct rf__cuda_buffer *rf__cuda_held_buffer(rf_cuda_loader *gpu,
                                             const rf_cuda_batch *batch);

#endif /* RF_CUDA_LOADER_H */
